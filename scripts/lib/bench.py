"""The benchmark behind scripts/bench. Every figure is a median of several runs taken in
turn (tmpfs, gocryptfs, KeychainFS, tmpfs, ...) so drift on a shared machine hits all alike."""
import argparse, datetime, json, os, platform, shutil, statistics, subprocess, sys, tempfile, time

parser = argparse.ArgumentParser()
parser.add_argument("keychainfs")
parser.add_argument("--runs", type=int, default=5)
parser.add_argument("--quick", action="store_true")
parser.add_argument("--secrets", type=int, default=2000)
parser.add_argument("--workloads-only", action="store_true", help="skip mount times and vault sizes")
args = parser.parse_args()
KFS = args.keychainfs
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
work = tempfile.mkdtemp(prefix="keychainfs-bench.")
PW = os.path.join(work, "pw")
open(PW, "w").write("benchmark passphrase\n")
mounted = []


def sh(command, **kw):
    return subprocess.run(command, shell=isinstance(command, str), check=True, capture_output=True, text=True, **kw)


def timed(command):
    start = time.perf_counter()
    sh(command)
    return time.perf_counter() - start


def cleanup():
    for mountpoint in reversed(mounted):
        subprocess.run(["fusermount3", "-u", "-z", mountpoint], capture_output=True)
        subprocess.run(["umount", "-l", mountpoint], capture_output=True)
    shutil.rmtree(work, ignore_errors=True)


def kfs_mount(vault, mountpoint, kdf="interactive", extra=()):
    os.makedirs(mountpoint, exist_ok=True)
    sh([KFS, "mount", "--vault", vault, "--passphrase-file", PW, "--kdf", kdf, *extra, mountpoint])
    mounted.append(mountpoint)


def kfs_unmount(mountpoint):
    sh([KFS, "unmount", mountpoint])
    mounted.remove(mountpoint)


def gocryptfs_init(name, *options):
    cipher = os.path.join(work, name)
    os.makedirs(cipher)
    sh(["gocryptfs", "-q", "-init", *options, "-passfile", PW, cipher])


def gocryptfs_mount(cipher, mountpoint):
    os.makedirs(mountpoint, exist_ok=True)
    sh(["gocryptfs", "-q", "-passfile", PW, cipher, mountpoint])
    mounted.append(mountpoint)


def unmount(mountpoint):
    sh(["fusermount3", "-u", mountpoint])
    mounted.remove(mountpoint)


def daemon_pid(mountpoint):
    status = json.loads(sh([KFS, "status", "--json", mountpoint]).stdout)
    return int((status[0] if isinstance(status, list) else status)["pid"])


def rss_mib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


N = args.secrets
create_echo = 'd="%s"; mkdir "$d"; for i in $(seq 1 ' + str(N) + '); do printf "%%063d\\n" $i > "$d/s$i"; done'
create_fsync = ("import os,sys\nd=sys.argv[1]\nos.mkdir(d)\nfor i in range(1,%d):\n"
                " fd=os.open('%%s/s%%d'%%(d,i),os.O_WRONLY|os.O_CREAT|os.O_TRUNC,0o600)\n"
                " os.write(fd,b'%%063d\\n'%%i); os.fsync(fd); os.close(fd)\n") % (N + 1)
rename_all = "import os,sys\nd=sys.argv[1]\nfor i in range(1,%d): os.rename('%%s/s%%d'%%(d,i),'%%s/r%%d'%%(d,i))\n" % (N + 1)
delete_all = "import os,sys\nd=sys.argv[1]\nfor i in range(1,%d): os.unlink('%%s/r%%d'%%(d,i))\nos.rmdir(d)\n" % (N + 1)

results = {}  # (workload, system) -> [seconds]
logging_cost = {}  # "on"/"off" -> [seconds of `cat all`], access log on (default) and off
sized = {}  # items -> (populate seconds, mount seconds, RSS MiB, set seconds)


def record(workload, system, seconds):
    results.setdefault((workload, system), []).append(seconds)


try:
    # The three filesystems.
    tmpfs = os.path.join(work, "tmpfs")
    os.makedirs(tmpfs)
    sh(["mount", "-t", "tmpfs", "-o", "size=512m,mode=0700", "tmpfs", tmpfs])
    mounted.append(tmpfs)
    gocryptfs_init("gcipher")
    gocrypt = os.path.join(work, "gocryptfs")
    gocryptfs_mount(os.path.join(work, "gcipher"), gocrypt)
    kfs = os.path.join(work, "keychainfs")
    sh([KFS, "init", "--vault", os.path.join(work, "bench.vault"), "--passphrase-file", PW, "--kdf", "interactive"])
    kfs_mount(os.path.join(work, "bench.vault"), kfs)
    systems = [("tmpfs", tmpfs), ("gocryptfs", gocrypt), ("keychainfs", kfs)]
    # The same vault format with the access log off, for what logging costs (`cat all`).
    kfs_nolog = os.path.join(work, "keychainfs-nolog")
    sh([KFS, "init", "--vault", os.path.join(work, "nolog.vault"), "--passphrase-file", PW, "--kdf", "interactive"])
    kfs_mount(os.path.join(work, "nolog.vault"), kfs_nolog, extra=["--log-entries", "0"])

    for run in range(args.runs):
        for name, root in systems:
            d = os.path.join(root, "run%d" % run)
            record("create %d x 64 B (echo >)" % N, name, timed(["bash", "-c", create_echo % d]))
            record("cat all", name, timed("cat %s/* > /dev/null" % d))
            record("ls -lR", name, timed("ls -lR %s > /dev/null" % root))
            record("rename all", name, timed(["python3", "-c", rename_all, d]))
            record("delete all", name, timed(["python3", "-c", delete_all, d]))
            record("create %d x 64 B, fsync each" % N, name, timed(["python3", "-c", create_fsync, d + "f"]))
            sh("rm -rf %sf" % d)
        d = os.path.join(kfs_nolog, "run%d" % run)
        sh(["bash", "-c", create_echo % d])
        logging_cost.setdefault("off", []).append(timed("cat %s/* > /dev/null" % d))
        logging_cost.setdefault("on", []).append(results[("cat all", "keychainfs")][-1])

    if not args.workloads_only:  # a quick look while working on the filesystem
        # Mount times: with the KDF as configured by default, and with a cheap one.
        gocryptfs_init("gcipher-cheap", "-scryptn", "10")
        sh([KFS, "init", "--vault", os.path.join(work, "moderate.vault"), "--passphrase-file", PW, "--kdf", "moderate"])
        for run in range(args.runs):
            for label, cipher in [("mount (default KDF)", "gcipher"), ("mount (cheap KDF)", "gcipher-cheap")]:
                mp = os.path.join(work, "m-g")
                start = time.perf_counter(); gocryptfs_mount(os.path.join(work, cipher), mp); record(label, "gocryptfs", time.perf_counter() - start)
                unmount(mp)
            for label, vault in [("mount (default KDF)", "moderate.vault"), ("mount (cheap KDF)", "bench.vault")]:
                mp = os.path.join(work, "m-k")
                if vault == "bench.vault":
                    kfs_unmount(kfs)
                start = time.perf_counter(); kfs_mount(os.path.join(work, vault), mp); record(label, "keychainfs", time.perf_counter() - start)
                kfs_unmount(mp)
                if vault == "bench.vault":
                    kfs_mount(os.path.join(work, "bench.vault"), kfs)

        # Size of the vault: mount time, daemon RSS, `set` latency.
        sizes = [1000, 10000] if args.quick else [10000, 100000]
        populate = ("import os,sys\nroot,n=sys.argv[1],int(sys.argv[2])\nfor i in range(n):\n d=os.path.join(root,'d%d'%(i%100))\n"
                    " os.makedirs(d,exist_ok=True)\n fd=os.open(os.path.join(d,'s%d'%i),os.O_WRONLY|os.O_CREAT,0o600); os.write(fd,b'%063d\\n'%i); os.close(fd)\n")
        # One attribute per item, through the mount as a user sets them: service=svcK where
        # K = (i + i // 100) % 100, so each value is on 1 % of the items (one of the first 100
        # already), spread over every dictionary.
        # Exits 3 when the mount has no extended attributes (a driver without them).
        label = ("import errno,os,sys\nroot,n=sys.argv[1],int(sys.argv[2])\nfor i in range(n):\n"
                 " try: os.setxattr(os.path.join(root,'d%d'%(i%100),'s%d'%i),'user.service',b'svc%d'%((i+i//100)%100))\n"
                 " except OSError as e:\n  if e.errno in (errno.ENOTSUP,errno.ENOSYS): sys.exit(3)\n  raise\n")
        for size in [100] + sizes:
            vault = os.path.join(work, "items%d.vault" % size)
            sh([KFS, "init", "--vault", vault, "--passphrase-file", PW, "--kdf", "interactive"])
            mp = os.path.join(work, "sized")
            kfs_mount(vault, mp)
            populate_seconds = timed(["python3", "-c", populate, mp, str(size)])
            start = time.perf_counter()
            labelled = subprocess.run(["python3", "-c", label, mp, str(size)], capture_output=True, text=True)
            label_seconds = time.perf_counter() - start if labelled.returncode == 0 else None
            if labelled.returncode not in (0, 3):
                raise RuntimeError("setting attributes failed: " + labelled.stderr)
            kfs_unmount(mp)
            mounts, rss = [], []
            for run in range(args.runs):
                start = time.perf_counter(); kfs_mount(vault, mp); mounts.append(time.perf_counter() - start)
                sh("ls -R %s > /dev/null" % mp)
                rss.append(rss_mib(daemon_pid(mp)))
                kfs_unmount(mp)
            sets = [timed([KFS, "set", "--vault", vault, "--passphrase-file", PW, "bench/key", "value-%d" % run]) for run in range(args.runs)]
            finds = None
            if label_seconds is not None:
                finds = statistics.median(timed([KFS, "find", "--vault", vault, "--passphrase-file", PW, "service=svc%d" % (42 + run)])
                                          for run in range(args.runs))
            sized[size] = (populate_seconds, statistics.median(mounts), statistics.median(rss), statistics.median(sets), label_seconds, finds)
    # What one durable commit costs on this disk, the floor under every store KeychainFS
    # acknowledges: the same SQLite WAL update with and without its fdatasync.
    import sqlite3
    commit_us = {}
    for sync in ("NORMAL", "FULL"):
        probe = os.path.join(work, "commit-%s.db" % sync)
        db = sqlite3.connect(probe, isolation_level=None)
        db.execute("pragma journal_mode=wal")
        db.execute("pragma synchronous=%s" % sync)
        db.execute("create table t(id integer primary key, v blob)")
        db.executemany("insert into t(v) values(?)", [(b"x" * 200,)] * 300)
        start = time.perf_counter()
        for i in range(500):
            db.execute("begin immediate")
            db.execute("update t set v=? where id=?", (os.urandom(200), i % 300 + 1))
            db.execute("commit")
        commit_us[sync] = (time.perf_counter() - start) / 500 * 1e6
        db.close()
finally:
    cleanup()

# Report.
rows = []
workloads = []
for (workload, _system) in results:
    if workload not in workloads:
        workloads.append(workload)
for workload in workloads:
    med = {s: statistics.median(results[(workload, s)]) for s in ("tmpfs", "gocryptfs", "keychainfs") if (workload, s) in results}
    k = med.get("keychainfs")
    rows.append((workload, med.get("tmpfs"), med.get("gocryptfs"), k,
                 k / med["tmpfs"] if k and med.get("tmpfs") else None, k / med["gocryptfs"] if k and med.get("gocryptfs") else None))


def f(x, digits=3):
    return "" if x is None else ("%.*f" % (digits, x))


machine = "%s, %d cores, %s" % (platform.node(), os.cpu_count(), platform.platform())
when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
lines = ["Benchmark of %s on %s; medians of %d runs (seconds)." % (when, machine, args.runs), "",
         "| workload | tmpfs | gocryptfs | KeychainFS | KeychainFS / tmpfs | KeychainFS / gocryptfs |",
         "| --- | ---: | ---: | ---: | ---: | ---: |"]
for r in rows:
    lines.append("| %s | %s | %s | %s | %s | %s |" % (r[0], f(r[1]), f(r[2]), f(r[3]), f(r[4], 1), f(r[5], 2)))
lines += ["", "One SQLite WAL commit on this disk: %.0f µs with its fdatasync (what each acknowledged store costs), %.0f µs without."
          % (commit_us["FULL"], commit_us["NORMAL"])]
if logging_cost:
    on, off = statistics.median(logging_cost["on"]), statistics.median(logging_cost["off"])
    lines += ["", "`cat all` with the access log on (the default): %.3f s; off (`--log-entries 0`): %.3f s; on / off: %.2f."
              % (on, off, on / off)]
if sized:
    lines += ["", "| items in the vault | time to add them through the mount | mount time | daemon RSS after `ls -R` | `keychainfs set` "
              "| time to set `user.service` on each | `keychainfs find service=...` (1 % of the items match) |",
              "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for size, (populate_seconds, mount_s, rss, set_s, label_s, find_s) in sorted(sized.items()):
        lines.append("| %d | %.1f s | %.3f s | %.1f MiB | %.3f s | %s | %s |" % (
            size, populate_seconds, mount_s, rss, set_s, "%.1f s" % label_s if label_s is not None else "no xattrs in the mount",
            "%.3f s" % find_s if find_s is not None else ""))
report = "\n".join(lines)
print(report)
if args.workloads_only:
    sys.exit(0)
os.makedirs(os.path.join(ROOT, "results"), exist_ok=True)
stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
open(os.path.join(ROOT, "results", "bench-%s.md" % stamp), "w").write(report + "\n")
with open(os.path.join(ROOT, "results", "bench-%s.csv" % stamp), "w") as csv:
    csv.write("workload,tmpfs_s,gocryptfs_s,keychainfs_s,ratio_tmpfs,ratio_gocryptfs\n")
    for r in rows:
        csv.write('"%s",%s,%s,%s,%s,%s\n' % (r[0], f(r[1], 6), f(r[2], 6), f(r[3], 6), f(r[4], 3), f(r[5], 3)))
    csv.write('"durable commit us",,,%f,,\n"commit without sync us",,,%f,,\n' % (commit_us["FULL"], commit_us["NORMAL"]))
    if logging_cost:
        csv.write('"cat all log on",,,%f,,\n"cat all log off",,,%f,,\n' % (statistics.median(logging_cost["on"]), statistics.median(logging_cost["off"])))
    for size, (populate_seconds, mount_s, rss, set_s, label_s, find_s) in sorted(sized.items()):
        csv.write('"items=%d mount",,,%f,,\n"items=%d rss_mib",,,%f,,\n"items=%d set",,,%f,,\n' % (size, mount_s, size, rss, size, set_s))
        if find_s is not None:
            csv.write('"items=%d setxattr each",,,%f,,\n"items=%d find",,,%f,,\n' % (size, label_s, size, find_s))
