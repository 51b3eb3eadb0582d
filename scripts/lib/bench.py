"""The benchmark behind scripts/bench. Every figure is a median of several runs taken in
turn (tmpfs, gocryptfs, KeychainFS, tmpfs, ...) so drift on a shared machine hits all alike."""
import argparse, datetime, json, os, platform, shlex, shutil, statistics, subprocess, sys, tempfile, time

parser = argparse.ArgumentParser()
parser.add_argument("keychainfs")
parser.add_argument("--runs", type=int, default=5)
parser.add_argument("--quick", action="store_true")
parser.add_argument("--secrets", type=int, default=2000)
parser.add_argument("--workloads-only", action="store_true", help="skip mount times and vault sizes")
parser.add_argument("--secret-service-only", action="store_true",
                    help="only the Secret Service section: secret-tool lookups against KeychainFS and gnome-keyring, cat through the mount")
parser.add_argument("--lookups", type=int, default=1000, help="calls per run in the Secret Service section")
parser.add_argument("--no-postgres", action="store_true", help="leave out the vault in PostgreSQL")
parser.add_argument("--vault-sizes-only", action="store_true", help="only the table by vault size (mount, ls -lR, set, find)")
parser.add_argument("--changes", type=int, default=50, help="changes timed from one mount to the other in the PostgreSQL section")
parser.add_argument("--transport", choices=["both", "dev-fuse"], default="both",
                    help="both: KeychainFS also mounted with --transport io-uring (the fuse module's enable_uring is turned on "
                         "for the run and put back) where the kernel has it; dev-fuse: /dev/fuse alone")
parser.add_argument("--small-secrets-only", action="store_true",
                    help="only the per-item rows (echo >, cat, ls -lR, rename, delete, fsync each): no parallel, 1 MiB or mixed work")
parser.add_argument("--mixed-ops", type=int, default=10000,
                    help="operations per process in the mixed-work section (fsstress-like, 4 processes; 0 leaves it out)")
# Team vaults at scale (scripts/lib/team_scale.py): on by default with the PostgreSQL column.
parser.add_argument("--no-team-scale", action="store_true", help="leave out team vaults at scale (many mounts, many vaults)")
parser.add_argument("--team-scale-only", action="store_true", help="only team vaults at scale, on the bench's own PostgreSQL server")
parser.add_argument("--team-mounts", default="1,10,50", help="mounts of one team vault, one row each (--quick: 1,10)")
parser.add_argument("--team-vaults", type=int, default=1000, help="vaults in one database (--quick: 100)")
parser.add_argument("--team-changes", type=int, default=10, help="changes timed per row of mounts")
args = parser.parse_args()
KFS = args.keychainfs
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
work = tempfile.mkdtemp(prefix="keychainfs-bench.")
# Every command runs in the scratch directory: whatever one leaves under a relative name (a
# vault location taken for a file, as `postgresql:/...` once was) goes with it, never into the
# repository the bench is run from.
os.chdir(work)
PW = os.path.join(work, "pw")
open(PW, "w").write("benchmark passphrase\n")
mounted = []
daemons = []  # subprocess.Popen of every daemon the bench started and has not stopped yet
# Debian keeps each major version's server programs apart; the newest installed.
POSTGRES_BIN = max((os.path.join("/usr/lib/postgresql", d, "bin") for d in os.listdir("/usr/lib/postgresql")
                    if d.isdigit() and os.access(os.path.join("/usr/lib/postgresql", d, "bin", "initdb"), os.X_OK)),
                   key=lambda path: int(path.split("/")[-2]), default="/usr/lib/postgresql/bin") \
    if os.path.isdir("/usr/lib/postgresql") else "/usr/lib/postgresql/bin"
postgres_directories = []  # removed by cleanup, once the server is stopped


def sh(command, **kw):
    done = subprocess.run(command, shell=isinstance(command, str), capture_output=True, text=True, **kw)
    if done.returncode != 0:
        raise RuntimeError("%s: exit status %d: %s" % (command if isinstance(command, str) else shlex.join(command), done.returncode,
                                                      done.stderr.strip()[-500:]))
    return done


def timed(command, **kw):
    start = time.perf_counter()
    sh(command, **kw)
    return time.perf_counter() - start


ENABLE_URING = "/sys/module/fuse/parameters/enable_uring"
uring_before = None  # the parameter's value before the bench turned it on


def cleanup():
    if uring_before is not None:
        with open(ENABLE_URING, "w") as parameter:
            parameter.write(uring_before)
    for mountpoint in reversed(mounted):
        subprocess.run(["fusermount3", "-u", "-z", mountpoint], capture_output=True)
        subprocess.run(["umount", "-l", mountpoint], capture_output=True)
    # After the mounts: a KeychainFS daemon serving the Secret Service is a client of a bus here.
    for daemon in reversed(daemons[:]):
        stop_daemon(daemon)
    shutil.rmtree(work, ignore_errors=True)
    for directory in postgres_directories:
        shutil.rmtree(directory, ignore_errors=True)


def kfs_mount(vault, mountpoint, kdf="interactive", extra=(), env=None):
    os.makedirs(mountpoint, exist_ok=True)
    sh([KFS, "mount", "--vault", vault, "--passphrase-file", PW, "--kdf", kdf, *extra, mountpoint], env=env)
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


def workload_scripts(n):
    """The per-item workloads over n secrets: `echo >` create (a bash line taking the dictionary
    for %s), and create with fsync, rename and delete (Python taking it as argv[1])."""
    echo = 'd="%s"; mkdir "$d"; for i in $(seq 1 ' + str(n) + '); do printf "%%063d\\n" $i > "$d/s$i"; done'
    fsync = ("import os,sys\nd=sys.argv[1]\nos.mkdir(d)\nfor i in range(1,%d):\n"
             " fd=os.open('%%s/s%%d'%%(d,i),os.O_WRONLY|os.O_CREAT|os.O_TRUNC,0o600)\n"
             " os.write(fd,b'%%063d\\n'%%i); os.fsync(fd); os.close(fd)\n") % (n + 1)
    rename = "import os,sys\nd=sys.argv[1]\nfor i in range(1,%d): os.rename('%%s/s%%d'%%(d,i),'%%s/r%%d'%%(d,i))\n" % (n + 1)
    delete = "import os,sys\nd=sys.argv[1]\nfor i in range(1,%d): os.unlink('%%s/r%%d'%%(d,i))\nos.rmdir(d)\n" % (n + 1)
    return echo, fsync, rename, delete


create_echo, create_fsync, rename_all, delete_all = workload_scripts(N)
# Eight processes at once, each creating 500 secrets in a dictionary of its own and reading them
# back: the wall time until the last is done (throughput is 8 x 500 / that).
PARALLEL, PER_PROCESS = 8, 500
create_and_read = ("import os,sys\nd=sys.argv[1]\nos.mkdir(d)\nfor i in range(%d):\n"
                   " fd=os.open('%%s/s%%d'%%(d,i),os.O_WRONLY|os.O_CREAT|os.O_TRUNC,0o600); os.write(fd,b'%%063d\\n'%%i); os.close(fd)\n"
                   "for i in range(%d):\n fd=os.open('%%s/s%%d'%%(d,i),os.O_RDONLY); os.read(fd,4096); os.close(fd)\n") % (PER_PROCESS, PER_PROCESS)
# One 1 MiB item (the default item size limit) written and read back 100 times.
big_item = ("import os,sys\np=sys.argv[1]\nblob=os.urandom(1<<20)\nfor _ in range(100):\n"
            " fd=os.open(p,os.O_WRONLY|os.O_CREAT|os.O_TRUNC,0o600); os.write(fd,blob); os.close(fd)\n"
            " fd=os.open(p,os.O_RDONLY); got=b''\n while len(got)<len(blob):\n  part=os.read(fd,1<<20)\n  if not part: break\n  got+=part\n"
            " os.close(fd)\n assert got==blob\n")


def parallel(root):
    os.makedirs(root)
    processes = [subprocess.Popen(["python3", "-c", create_and_read, os.path.join(root, "p%d" % k)]) for k in range(PARALLEL)]
    failed = [p for p in processes if p.wait() != 0]
    if failed:
        raise RuntimeError("a parallel writer failed under %s" % root)

results = {}  # (workload, system) -> [seconds]
logging_cost = {}  # "on"/"off" -> [seconds of `cat all`], access log on (default) and off
sized = {}  # items -> (populate, mount, RSS MiB, set, setxattr each, find, ls -lR just after mounting, find of the tree)
scale = {}  # (workload, items in the vault) -> [µs per item]
commit_us = {}  # "FULL"/"NORMAL" -> µs of one SQLite WAL commit with and without its fdatasync
lookups = {}  # (call, system) -> [seconds of args.lookups calls]
churn = {}  # system -> (bytes at the largest, bytes after rm -rf, largest WAL seen) for the mixed work
unavailable = {}  # system -> why it could not be measured
pin_mounts = {}  # "passphrase"/"pin" -> [seconds of a mount of one `moderate` vault with a TPM PIN slot, by that slot]


def record(workload, system, seconds):
    results.setdefault((workload, system), []).append(seconds)


def filesystem_workloads():
    # The three filesystems.
    tmpfs = os.path.join(work, "tmpfs")
    os.makedirs(tmpfs)
    sh(["mount", "-t", "tmpfs", "-o", "size=1g,mode=0700", "tmpfs", tmpfs])
    mounted.append(tmpfs)
    gocryptfs_init("gcipher")
    gocrypt = os.path.join(work, "gocryptfs")
    gocryptfs_mount(os.path.join(work, "gcipher"), gocrypt)
    kfs = os.path.join(work, "keychainfs")
    sh([KFS, "init", "--vault", os.path.join(work, "bench.vault"), "--passphrase-file", PW, "--kdf", "interactive"])
    kfs_mount(os.path.join(work, "bench.vault"), kfs)
    systems = [("tmpfs", tmpfs), ("gocryptfs", gocrypt), ("keychainfs", kfs)]
    global uring_before
    if args.transport == "both" and os.access(ENABLE_URING, os.W_OK):
        # The same vault format served through io_uring queues instead of /dev/fuse.
        uring_before = open(ENABLE_URING).read().strip()
        with open(ENABLE_URING, "w") as parameter:
            parameter.write("Y")
        kfs_uring = os.path.join(work, "keychainfs-uring")
        sh([KFS, "init", "--vault", os.path.join(work, "uring.vault"), "--passphrase-file", PW, "--kdf", "interactive"])
        kfs_mount(os.path.join(work, "uring.vault"), kfs_uring, extra=["--transport", "io-uring"])
        systems.append(("keychainfs-uring", kfs_uring))
    elif args.transport == "both":
        unavailable["io-uring"] = "the fuse module has no writable enable_uring parameter (Linux 6.14 and root needed)"
    if postgres_vault is not None:
        kfs_pg = os.path.join(work, "keychainfs-pg")
        sh([KFS, "init", "--vault", postgres_vault, "--passphrase-file", PW, "--kdf", "interactive"])
        kfs_mount(postgres_vault, kfs_pg)
        systems.append(("keychainfs-pg", kfs_pg))
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
            if args.small_secrets_only:
                continue
            start = time.perf_counter(); parallel(d + "p"); record("%d processes x %d create + read, in parallel" % (PARALLEL, PER_PROCESS), name, time.perf_counter() - start)
            sh("rm -rf %sp" % d)
            record("1 MiB item written and read 100 times", name, timed(["python3", "-c", big_item, d + "big"]))
            sh("rm -f %sbig" % d)
        d = os.path.join(kfs_nolog, "run%d" % run)
        sh(["bash", "-c", create_echo % d])
        logging_cost.setdefault("off", []).append(timed("cat %s/* > /dev/null" % d))
        logging_cost.setdefault("on", []).append(results[("cat all", "keychainfs")][-1])
    if args.small_secrets_only:
        return kfs
    heavy_work([s for s in systems if s[0] not in ("keychainfs-pg", "keychainfs-uring")],
               {"gocryptfs": os.path.join(work, "gcipher"), "keychainfs": os.path.join(work, "bench.vault")})
    return kfs


MIXED = os.path.join(ROOT, "scripts", "lib", "mixed_ops.py")
SETFATTR_FILES = 1000


def bytes_on_disk(store):
    """What a vault file and its WAL, or a cipher directory's files, take on disk (files removed
    meanwhile left out)."""
    def size(path):  # allocated, not apparent: gocryptfs keeps the mixed work's holes
        try:
            return os.stat(path).st_blocks * 512
        except OSError:
            return 0
    if os.path.isdir(store):
        return sum(size(os.path.join(top, f)) for top, _dirs, files in os.walk(store) for f in files)
    return size(store) + size(store + "-wal")


def heavy_work(systems, stores):
    """setfattr on 1 000 files (one call), then mixed work in the manner of fsstress (xfstests'
    fsstress is not packaged in Debian: scripts/lib/mixed_ops.py, 4 processes x --mixed-ops
    operations with its default mix) and the rm -rf of what it left, once each (the mixed work
    takes minutes): its time, and how much the vault (WAL included) or the cipher directory
    holds at its largest and after the removal, sampled every 50 ms during both."""
    for run in range(args.runs):
        for name, root in systems:
            d = os.path.join(root, "xattr%d" % run)
            os.makedirs(d)
            files = [os.path.join(d, "f%d" % i) for i in range(SETFATTR_FILES)]
            for path in files:
                with open(path, "w") as f:
                    f.write("x")
            record("setfattr -n user.service on %d files (one call)" % SETFATTR_FILES, name,
                   timed(["setfattr", "-n", "user.service", "-v", "github", *files]))
            sh(["rm", "-rf", d])
    if args.mixed_ops <= 0:
        return
    import threading
    for name, root in systems:
        store = stores.get(name)
        largest, wal = [0], [0]
        done = threading.Event()

        def sample():
            while not done.wait(0.05):
                largest[0] = max(largest[0], bytes_on_disk(store))
                try:
                    wal[0] = max(wal[0], os.path.getsize(store + "-wal"))
                except OSError:
                    pass
        sampler = threading.Thread(target=sample) if store else None
        if sampler:
            sampler.start()
        d = os.path.join(root, "mixed")
        try:
            record("mixed work, 4 processes x %d operations (fsstress-like)" % args.mixed_ops, name,
                   timed(["python3", MIXED, d, "--procs", "4", "--ops", str(args.mixed_ops)]))
            record("rm -rf of what the mixed work left", name, timed(["rm", "-rf", d]))
            time.sleep(1)  # the space a vault gives back, it gives within its sync window
        finally:
            done.set()
            if sampler:
                sampler.join()
        if store:
            churn[name] = (largest[0], bytes_on_disk(store), wal[0])


MOUNT_SAME_KDF = "mount, a 64 MiB KDF each (gocryptfs default, KeychainFS `interactive`)"
MOUNT_DEFAULTS = "mount, each one's default KDF (KeychainFS `moderate`, 256 MiB)"
MOUNT_CHEAP = "mount, gocryptfs with scrypt N=2^10 (its mount without the KDF)"
# Per-item workloads run again inside each sized vault (SCALE_ITEMS items each): how their cost
# grows with the vault.
SCALE_ITEMS = 1000


def scale_workloads(mp, size):
    d = os.path.join(mp, "scale")
    n = SCALE_ITEMS
    echo, fsync, rename, delete = workload_scripts(n)
    for run in range(min(args.runs, 3)):
        per = lambda label, seconds, count=n: scale.setdefault((label, size), []).append(seconds / count * 1e6)
        per("create (echo >)", timed(["bash", "-c", echo % d]))
        per("cat", timed("cat %s/* > /dev/null" % d))
        per("stat (ls -l of the dictionary)", timed("ls -l %s > /dev/null" % d))
        per("rename", timed(["python3", "-c", rename, d]))
        per("delete", timed(["python3", "-c", delete, d]))
        per("create, fsync each", timed(["python3", "-c", fsync, d + "f"]))
        sh("rm -rf %sf" % d)
        start = time.perf_counter(); parallel(d + "p")
        per("8 processes create + read, per item", time.perf_counter() - start, PARALLEL * PER_PROCESS)
        sh("rm -rf %sp" % d)
        per("1 MiB item written and read", timed(["python3", "-c", big_item, d + "big"]), 100)
        sh("rm -f %sbig" % d)


def mount_times_and_vault_sizes(kfs):
    # Mount times. The same KDF memory on both sides first: gocryptfs's default scrypt (N=2^16,
    # r=8: 64 MiB) against the `interactive` preset (Argon2id, 64 MiB); then each one's default
    # (KeychainFS's `moderate` is 256 MiB); then gocryptfs with scrypt N=2^10, which shows what
    # its mount costs besides the KDF.
    gocryptfs_init("gcipher-cheap", "-scryptn", "10")
    sh([KFS, "init", "--vault", os.path.join(work, "moderate.vault"), "--passphrase-file", PW, "--kdf", "moderate"])
    for run in range(args.runs):
        for label, cipher in [(MOUNT_SAME_KDF, "gcipher"), (MOUNT_DEFAULTS, "gcipher"), (MOUNT_CHEAP, "gcipher-cheap")]:
            mp = os.path.join(work, "m-g")
            start = time.perf_counter(); gocryptfs_mount(os.path.join(work, cipher), mp); record(label, "gocryptfs", time.perf_counter() - start)
            unmount(mp)
        for label, vault in [(MOUNT_DEFAULTS, "moderate.vault"), (MOUNT_SAME_KDF, "bench.vault")]:
            mp = os.path.join(work, "m-k")
            if vault == "bench.vault":
                kfs_unmount(kfs)
            start = time.perf_counter(); kfs_mount(os.path.join(work, vault), mp); record(label, "keychainfs", time.perf_counter() - start)
            kfs_unmount(mp)
            if vault == "bench.vault":
                kfs_mount(os.path.join(work, "bench.vault"), kfs)

    vault_sizes()


def tpm_pin_mount_times():
    # The mount of one vault (`moderate`) by its TPM PIN slot against its passphrase slot, a
    # software TPM (swtpm) of the bench's own: the same Argon2id either way, the TPM's part
    # (storage root key derived again, salted session, unseal) on top for the PIN.
    if shutil.which("swtpm") is None:
        unavailable["tpm"] = "no swtpm"
        return
    state = os.path.join(work, "swtpm")
    os.makedirs(state)
    port = 23000 + os.getpid() % 20000
    tpm = subprocess.Popen(["swtpm", "socket", "--tpm2", "--tpmstate", "dir=" + state, "--server", "type=tcp,port=%d,bindaddr=127.0.0.1" % port,
                            "--ctrl", "type=tcp,port=%d,bindaddr=127.0.0.1" % (port + 1), "--flags", "not-need-init,startup-clear"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        env = dict(os.environ, KEYCHAINFS_TCTI="swtpm:host=127.0.0.1,port=%d" % port, XDG_STATE_HOME=os.path.join(work, "pin-state"),
                   KEYCHAINFS_HOST_KEY="")
        pin = os.path.join(work, "pin")
        open(pin, "w").write("4711\n")
        vault = os.path.join(work, "pin.vault")
        for _ in range(100):
            if subprocess.run([KFS, "init", "--vault", vault, "--passphrase-file", PW, "--tpm-pin", "--pin-file", pin, "--kdf", "moderate"],
                              env=env, capture_output=True).returncode == 0:
                break
            time.sleep(0.05)  # swtpm not listening yet: init refused before writing anything
        mp = os.path.join(work, "m-pin")
        os.makedirs(mp, exist_ok=True)
        for run in range(args.runs):
            for label, option in [("passphrase", ["--passphrase-file", PW]), ("pin", ["--pin-file", pin])]:
                start = time.perf_counter()
                sh([KFS, "mount", "--vault", vault, *option, mp], env=env)
                mounted.append(mp)
                pin_mounts.setdefault(label, []).append(time.perf_counter() - start)
                kfs_unmount(mp)
    finally:
        tpm.terminate()
        tpm.wait()


def vault_sizes():
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
        mounts, rss, listings, walks, daemon_finds = [], [], [], [], []
        for run in range(args.runs):
            start = time.perf_counter(); kfs_mount(vault, mp); mounts.append(time.perf_counter() - start)
            listings.append(timed("ls -lR %s > /dev/null" % mp))
            walks.append(timed("find %s -type f > /dev/null" % mp))
            rss.append(rss_mib(daemon_pid(mp)))
            if label_seconds is not None:  # no passphrase: the mount's daemon answers
                daemon_finds.append(timed([KFS, "find", "--vault", vault, "service=svc%d" % (42 + run)]))
            if run == 0:
                scale_workloads(mp, size)
            kfs_unmount(mp)
        sets = [timed([KFS, "set", "--vault", vault, "--passphrase-file", PW, "bench/key", "value-%d" % run]) for run in range(args.runs)]
        finds = None
        if label_seconds is not None:
            finds = statistics.median(timed([KFS, "find", "--vault", vault, "--passphrase-file", PW, "service=svc%d" % (42 + run)])
                                      for run in range(args.runs))
        sized[size] = (populate_seconds, statistics.median(mounts), statistics.median(rss), statistics.median(sets), label_seconds, finds,
                       statistics.median(listings), statistics.median(walks),
                       statistics.median(daemon_finds) if daemon_finds else None)


def durable_commit_cost():
    # What one durable commit costs on this disk, the floor under every store KeychainFS
    # acknowledges: the same SQLite WAL update with and without its fdatasync.
    import sqlite3
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


# The Secret Service section: one item, looked up args.lookups times per run by secret-tool
# over D-Bus (KeychainFS, then gnome-keyring, each on a bus of its own) and read as many times
# by cat through the mount. Each figure is one `sh -c` loop, so every call pays the same
# process start; /bin/true in the same loop shows what that start alone costs.
SS_LABEL = "bench-token"
SS_SECRET = "bench-secret-0123456789abcdefghijklmnopqrstuvwxyz"
SS_ATTRIBUTES = ["bench", "lookup"]
# The stock session bus's policy (everything may be sent and received, every name owned)
# with nothing to activate: on the stock configuration a lookup made before KeychainFS owns
# org.freedesktop.secrets would start the machine's gnome-keyring there.
BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=%s/socket</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


def start_postgres():
    """A PostgreSQL server of the bench's own: a fresh cluster under work/, on a Unix socket
    only, with pg_stat_statements for counting the statements a change costs. Returns the libpq
    URI of a database on it, or None (and why, in `unavailable`) when it cannot run here."""
    if not os.path.exists(os.path.join(POSTGRES_BIN, "initdb")):
        unavailable["postgresql"] = "PostgreSQL is not installed (Debian package postgresql)"
        return None
    # Beside work/, not in it: the server's user cannot enter a directory of mkdtemp's (0700).
    directory = tempfile.mkdtemp(prefix="keychainfs-bench-postgres.")
    postgres_directories.append(directory)
    socket = os.path.join(directory, "socket")
    os.makedirs(socket)
    as_server = []
    if os.getuid() == 0:  # the server refuses root: run it as Debian's postgres user
        import pwd
        user = pwd.getpwnam("postgres")
        for path in (directory, socket):
            os.chown(path, user.pw_uid, user.pw_gid)
        as_server = ["setpriv", "--reuid", "postgres", "--regid", "postgres", "--init-groups", "--"]
    data = os.path.join(directory, "data")
    sh(as_server + [os.path.join(POSTGRES_BIN, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])
    log = open(os.path.join(directory, "server.log"), "wb")
    server = start_daemon(as_server + [os.path.join(POSTGRES_BIN, "postgres"), "-D", data, "-k", socket, "-c", "listen_addresses=",
                                       "-c", "shared_preload_libraries=pg_stat_statements", "-c", "pg_stat_statements.track=all",
                                       # Team scale: 50 mounts hold two connections each, past the default 100.
                                       "-c", "max_connections=250"],
                          stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while subprocess.run([os.path.join(POSTGRES_BIN, "pg_isready"), "-q", "-h", socket]).returncode != 0:
        if server.poll() is not None or time.monotonic() > deadline:
            unavailable["postgresql"] = "the server did not start: " + open(os.path.join(directory, "server.log")).read()[-300:]
            return None
        time.sleep(0.05)
    sh([os.path.join(POSTGRES_BIN, "createdb"), "-h", socket, "-U", "postgres", "bench"])
    psql(socket, "CREATE EXTENSION pg_stat_statements")
    return socket


def psql(socket, query):
    return sh([os.path.join(POSTGRES_BIN, "psql"), "-h", socket, "-U", "postgres", "-d", "bench", "-AtX", "-c", query]).stdout.strip()


class RoundTripCounter:
    """Between a daemon and the server (Unix sockets): passes every byte on and counts the
    client's messages after which libpq waits for an answer (Sync, Flush, simple Query): the
    round trips, as the wire carries them. Its threads end with the connections."""

    def __init__(self, server_socket):
        import socket as sockets, struct, threading
        self.directory = tempfile.mkdtemp(prefix="keychainfs-bench-proxy.")
        os.chmod(self.directory, 0o755)
        self.count = 0
        lock = threading.Lock()
        listener = sockets.socket(sockets.AF_UNIX)
        listener.bind(os.path.join(self.directory, ".s.PGSQL.5432"))
        listener.listen(16)

        def pump(source, sink, parse):
            pending, started = b"", False
            try:
                while True:
                    data = source.recv(65536)
                    if not data:
                        break
                    sink.sendall(data)
                    if not parse:
                        continue
                    pending += data
                    while True:
                        header = 5 if started else 4
                        if len(pending) < header:
                            break
                        length = struct.unpack("!I", pending[header - 4:header])[0] + (1 if started else 0)
                        if len(pending) < length:
                            break
                        if started and pending[0:1] in (b"S", b"H", b"Q"):
                            with lock:
                                self.count += 1
                        started, pending = True, pending[length:]
            except OSError:
                pass
            finally:
                for end in (source, sink):
                    try:
                        end.shutdown(sockets.SHUT_RDWR)
                    except OSError:
                        pass

        def serve():
            while True:
                try:
                    client, _ = listener.accept()
                except OSError:
                    return
                upstream = sockets.socket(sockets.AF_UNIX)
                upstream.connect(os.path.join(server_socket, ".s.PGSQL.5432"))
                threading.Thread(target=pump, args=(client, upstream, True), daemon=True).start()
                threading.Thread(target=pump, args=(upstream, client, False), daemon=True).start()
        threading.Thread(target=serve, daemon=True).start()
        postgres_directories.append(self.directory)


def postgres_two_mounts(socket):
    """Two mounts of one vault in PostgreSQL (two daemons, as on two machines): how long a change
    made through one takes to show through the other; and for `echo >`, `cat`, rename and delete
    through one, the statements the server runs (for both daemons: the other reads the change
    again), the round trips the one makes (counted on the wire) and the time each takes."""
    vault = "postgresql:///bench?host=%s&user=postgres#two" % socket
    sh([KFS, "init", "--vault", vault, "--passphrase-file", PW, "--kdf", "interactive"])
    a, b = os.path.join(work, "pg-a"), os.path.join(work, "pg-b")
    counter = RoundTripCounter(socket)
    kfs_mount(vault.replace("host=" + socket, "host=" + counter.directory), a)
    kfs_mount(vault, b)
    os.makedirs(os.path.join(a, "shared"))
    delays = []
    try:
        for i in range(args.changes):
            value = "change %d\n" % i
            path = os.path.join("shared", "item%d" % (i % 5))
            with open(os.path.join(a, path), "w") as f:
                f.write(value)
            start = time.perf_counter()
            deadline = start + 10
            while True:
                try:
                    with open(os.path.join(b, path)) as f:
                        if f.read() == value:
                            break
                except FileNotFoundError:
                    pass
                if time.perf_counter() > deadline:
                    raise RuntimeError("a change through one mount did not show through the other within 10 s")
                time.sleep(0.002)
            delays.append(time.perf_counter() - start)
        counted = {}
        directory = os.path.join(a, "shared")
        for label, command in (("echo >", lambda i: open(os.path.join(directory, "counted%d" % i), "w").write("value%d\n" % i)),
                               ("cat", lambda i: open(os.path.join(directory, "counted%d" % i)).read()),
                               ("rename", lambda i: os.rename(os.path.join(directory, "counted%d" % i), os.path.join(directory, "moved%d" % i))),
                               ("delete", lambda i: os.unlink(os.path.join(directory, "moved%d" % i)))):
            time.sleep(0.5)  # the other mount done reading the last change
            psql(socket, "SELECT pg_stat_statements_reset()")
            trips = counter.count
            start = time.perf_counter()
            for i in range(100):
                command(i)
            elapsed = time.perf_counter() - start
            trips = counter.count - trips
            time.sleep(0.5)
            # Statements of every session but this psql's own (pg_stat_statements counts them too).
            calls = psql(socket, "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'")
            counted[label] = (int(calls) / 100, trips / 100, elapsed / 100 * 1e6)
        return delays, counted
    finally:
        kfs_unmount(b)
        kfs_unmount(a)


class Unavailable(Exception):
    """A system the section cannot measure here, and why (printed in its row)."""


def start_daemon(argv, **kw):
    daemon = subprocess.Popen(argv, **kw)
    daemons.append(daemon)
    return daemon


def stop_daemon(daemon):
    if daemon.poll() is None:
        daemon.terminate()
    try:
        daemon.wait(timeout=10)
    except subprocess.TimeoutExpired:
        daemon.kill()
        daemon.wait()
    daemons.remove(daemon)


def private_bus(name):
    """A dbus-daemon of the bench's own, never the machine's session bus; returns the daemon and
    an environment whose session bus it is. Its only descriptors beyond /dev/null are the pipe it
    prints its address to (closed here once read)."""
    directory = os.path.join(work, name)
    os.makedirs(directory)
    config = os.path.join(directory, "bus.conf")
    open(config, "w").write(BUS_CONFIG % directory)
    read_end, write_end = os.pipe()
    try:
        bus = start_daemon(["dbus-daemon", "--config-file=" + config, "--nofork", "--print-address=%d" % write_end],
                           pass_fds=(write_end,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finally:
        os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        address = pipe.readline().decode().strip()
    if not address:
        raise RuntimeError("dbus-daemon printed no address (exit status %s)" % bus.poll())
    return bus, dict(os.environ, DBUS_SESSION_BUS_ADDRESS=address)


def wait_for_secret_service(env, owner, within=15):
    """Until org.freedesktop.secrets has an owner on env's bus; owner is the process that should
    take it (its exit ends the wait)."""
    deadline = time.monotonic() + within
    while True:
        probe = subprocess.run(["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                                "org.freedesktop.DBus.NameHasOwner", "string:org.freedesktop.secrets"], env=env, capture_output=True, text=True)
        if "boolean true" in probe.stdout:
            return
        if owner is not None and owner.poll() is not None:
            raise Unavailable("exited with status %d before owning org.freedesktop.secrets" % owner.returncode)
        if time.monotonic() > deadline:
            raise Unavailable("no owner of org.freedesktop.secrets after %d s" % within)
        time.sleep(0.05)


def store_and_check(env):
    """Stores the item with secret-tool and looks it up once: a store or lookup that fails here
    would time failures."""
    stored = subprocess.run(["secret-tool", "store", "--label=" + SS_LABEL, *SS_ATTRIBUTES], input=SS_SECRET, env=env,
                            capture_output=True, text=True, timeout=60)
    if stored.returncode != 0:
        raise Unavailable("`secret-tool store` failed (%d): %s" % (stored.returncode, stored.stderr.strip()))
    looked = subprocess.run(["secret-tool", "lookup", *SS_ATTRIBUTES], env=env, capture_output=True, text=True, timeout=60)
    if looked.returncode != 0 or looked.stdout != SS_SECRET:
        raise Unavailable("`secret-tool lookup` gave %r (%d): %s" % (looked.stdout, looked.returncode, looked.stderr.strip()))


def start_gnome_keyring(bus_env):
    """gnome-keyring-daemon (secrets only) on bus_env's bus, HOME and the XDG directories in a
    fresh directory so --unlock creates a new `login` keyring with the passphrase on stdin."""
    if shutil.which("gnome-keyring-daemon") is None:
        raise Unavailable("gnome-keyring-daemon is not installed (Debian package gnome-keyring)")
    home = os.path.join(work, "gnome-keyring-home")
    runtime = os.path.join(home, "run")
    os.makedirs(runtime, mode=0o700)
    env = dict(bus_env, HOME=home, XDG_DATA_HOME=os.path.join(home, "data"), XDG_CONFIG_HOME=os.path.join(home, "config"),
               XDG_CACHE_HOME=os.path.join(home, "cache"), XDG_RUNTIME_DIR=runtime)
    log_path = os.path.join(home, "daemon.log")
    with open(log_path, "wb") as log:
        daemon = start_daemon(["gnome-keyring-daemon", "--foreground", "--components=secrets", "--unlock"],
                              stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env)
    daemon.stdin.write(open(PW, "rb").read().rstrip(b"\n"))
    daemon.stdin.close()
    try:
        wait_for_secret_service(env, daemon)
        store_and_check(env)
    except Unavailable as why:
        said = open(log_path, errors="replace").read().strip().splitlines()
        raise Unavailable("gnome-keyring-daemon " + str(why) + ("; it said: " + " / ".join(said[-3:]) if said else ""))
    return daemon, env


def call_loop(command):
    """sh -c running command args.lookups times; the first failure fails the run."""
    return 'i=0; while [ "$i" -lt %d ]; do %s >/dev/null || exit 1; i=$((i+1)); done' % (args.lookups, command)


def secret_service_lookups():
    started = len(daemons)
    kfs_bus, kfs_env = private_bus("bus-keychainfs")
    mp = os.path.join(work, "secret-service")
    try:
        ss_vault = os.path.join(work, "secret-service.vault")
        kfs_mount(ss_vault, mp, extra=["--secret-service"], env=kfs_env)
        wait_for_secret_service(kfs_env, None)
        store_and_check(kfs_env)
        item = os.path.join(mp, "login", SS_LABEL)
        if open(item).read() != SS_SECRET:
            raise RuntimeError("%s does not hold the secret stored over D-Bus" % item)
        try:
            _gk_bus, gk_bus_env = private_bus("bus-gnome-keyring")
            _gk, gk_env = start_gnome_keyring(gk_bus_env)
        except Unavailable as why:
            unavailable["gnome-keyring"] = str(why)
            gk_env = None
        lookup = call_loop("secret-tool lookup " + " ".join(SS_ATTRIBUTES))
        for run in range(args.runs):
            lookups.setdefault(("secret-tool lookup", "keychainfs"), []).append(timed(lookup, env=kfs_env))
            if gk_env is not None:
                lookups.setdefault(("secret-tool lookup", "gnome-keyring"), []).append(timed(lookup, env=gk_env))
            lookups.setdefault(("cat", "keychainfs"), []).append(timed(call_loop("cat " + shlex.quote(item))))
            # The command line without a passphrase: the mount's daemon answers.
            lookups.setdefault(("keychainfs get", "keychainfs"), []).append(
                timed(call_loop("%s get --vault %s %s" % (shlex.quote(KFS), shlex.quote(ss_vault), shlex.quote("login/" + SS_LABEL)))))
            # With the passphrase: one Argon2id (the interactive preset) per call, so fewer calls.
            calls = max(args.lookups // 50, 3)
            loop = 'i=0; while [ "$i" -lt %d ]; do %s get --vault %s --passphrase-file %s %s >/dev/null || exit 1; i=$((i+1)); done' % (
                calls, shlex.quote(KFS), shlex.quote(ss_vault), shlex.quote(PW), shlex.quote("login/" + SS_LABEL))
            direct_gets.append(timed(loop) / calls)
            lookups.setdefault(("true", "none"), []).append(timed(call_loop("/bin/true")))
    finally:
        if mp in mounted:
            kfs_unmount(mp)
        for daemon in reversed(daemons[started:]):
            stop_daemon(daemon)


direct_gets = []  # seconds per `keychainfs get --passphrase-file`
postgres_vault = None
two_mounts = None  # (delays in seconds, statements per call by command)
team = None  # team_scale.TeamScale once measured


def team_scale_section(socket):
    import types, team_scale
    context = types.SimpleNamespace(KFS=KFS, PW=PW, work=work, sh=sh, timed=timed, mounted=mounted, psql=psql, socket=socket,
                                    daemon_pid=daemon_pid, rss_mib=rss_mib, runs=args.runs, POSTGRES_BIN=POSTGRES_BIN,
                                    start_daemon=start_daemon, stop_daemon=stop_daemon, postgres_directories=postgres_directories)
    mounts = [1, 10] if args.quick and args.team_mounts == "1,10,50" else [int(n) for n in args.team_mounts.split(",")]
    vaults = 100 if args.quick and args.team_vaults == 1000 else args.team_vaults
    return team_scale.run(context, mounts, vaults, args.team_changes)


try:
    if args.team_scale_only:
        postgres_socket = start_postgres()
        if postgres_socket is None:
            raise RuntimeError("team scale: " + unavailable["postgresql"])
        team = team_scale_section(postgres_socket)
    elif args.vault_sizes_only:
        vault_sizes()
    elif not args.secret_service_only and not args.no_postgres:
        postgres_socket = start_postgres()
        if postgres_socket is not None:
            postgres_vault = "postgresql:///bench?host=%s&user=postgres#bench" % postgres_socket
    if not args.secret_service_only and not args.vault_sizes_only and not args.team_scale_only:
        kfs = filesystem_workloads()
        if postgres_vault is not None:
            two_mounts = postgres_two_mounts(postgres_socket)
            if not args.no_team_scale and not args.workloads_only and not args.small_secrets_only:
                team = team_scale_section(postgres_socket)
        if not args.workloads_only:  # a quick look while working on the filesystem
            mount_times_and_vault_sizes(kfs)
            tpm_pin_mount_times()
    if not args.workloads_only and not args.vault_sizes_only and not args.team_scale_only:
        secret_service_lookups()
    if not args.secret_service_only and not args.vault_sizes_only and not args.team_scale_only:
        durable_commit_cost()
finally:
    cleanup()

# Report.
rows = []
workloads = []
for (workload, _system) in results:
    if workload not in workloads:
        workloads.append(workload)
for workload in workloads:
    med = {s: statistics.median(results[(workload, s)]) for s in ("tmpfs", "gocryptfs", "keychainfs", "keychainfs-pg", "keychainfs-uring")
           if (workload, s) in results}
    k, pg, ring = med.get("keychainfs"), med.get("keychainfs-pg"), med.get("keychainfs-uring")
    rows.append((workload, med.get("tmpfs"), med.get("gocryptfs"), k,
                 k / med["tmpfs"] if k and med.get("tmpfs") else None, k / med["gocryptfs"] if k and med.get("gocryptfs") else None,
                 pg, pg / k if pg and k else None, ring, ring / k if ring and k else None,
                 ring / med["gocryptfs"] if ring and med.get("gocryptfs") else None))


def f(x, digits=3):
    return "" if x is None else ("%.*f" % (digits, x))


machine = "%s, %d cores, %s" % (platform.node(), os.cpu_count(), platform.platform())
when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
lines = ["Benchmark of %s on %s; medians of %d runs%s." % (when, machine, args.runs, " (seconds)" if rows else "")]
if rows:
    lines += ["", "| workload | tmpfs | gocryptfs | KeychainFS | KeychainFS / tmpfs | KeychainFS / gocryptfs "
              "| KeychainFS, vault in PostgreSQL | PostgreSQL / file "
              "| KeychainFS over io_uring | io_uring / /dev/fuse | io_uring / gocryptfs |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r[0], f(r[1]), f(r[2]), f(r[3]), f(r[4], 1), f(r[5], 2), f(r[6]), f(r[7], 2), f(r[8]), f(r[9], 2), f(r[10], 2)))
    if "io-uring" in unavailable:
        lines += ["", "KeychainFS over io_uring: not measured: " + unavailable["io-uring"]]
    if "postgresql" in unavailable:
        lines += ["", "Vault in PostgreSQL: not measured: " + unavailable["postgresql"]]
if two_mounts is not None:
    delays, counted = two_mounts
    ordered = sorted(delays)
    lines += ["", "Vault in PostgreSQL (a server on this machine, Unix socket), mounted twice (two daemons): a change written "
              "through one shows through the other after %.0f ms (median of %d changes; slowest %.0f ms).  \n"
              "Per call through one mount (100 each): statements the server runs (both daemons: the other reads the change "
              "again), round trips the one makes (counted on the wire: Sync, Flush and simple Query messages) and µs "
              "(the one, through a counting proxy): "
              % (statistics.median(delays) * 1000, len(delays), ordered[-1] * 1000)
              + "; ".join("`%s` %.1f statements, %.1f round trips, %.0f µs" % (label, *counted[label])
                          for label in ("echo >", "cat", "rename", "delete")) + "."]
if commit_us:
    lines += ["", "One SQLite WAL commit on this disk: %.0f µs with its fdatasync (what each acknowledged store costs), %.0f µs without."
              % (commit_us["FULL"], commit_us["NORMAL"])]
if churn:
    mib = lambda n: n / (1 << 20)
    lines += ["", "Space on disk during and after the mixed work (scripts/lib/mixed_ops.py, an fsstress-like mix) and its `rm -rf`: "
              + "; ".join("%s %.0f MiB at its largest, %.1f MiB after the removal%s" % (
                  name, mib(big), mib(after), ", its WAL %.1f MiB at its largest" % mib(wal) if wal else "")
                  for name, (big, after, wal) in sorted(churn.items()))
              + ". A fresh KeychainFS vault takes about 0.05 MiB."]
if pin_mounts:
    by_passphrase, by_pin = statistics.median(pin_mounts["passphrase"]), statistics.median(pin_mounts["pin"])
    lines += ["", "Mount of a vault (`moderate`) by its TPM PIN slot (swtpm): %.3f s; by its passphrase slot: %.3f s; PIN / passphrase: %.2f."
              % (by_pin, by_passphrase, by_pin / by_passphrase)]
if logging_cost:
    on, off = statistics.median(logging_cost["on"]), statistics.median(logging_cost["off"])
    lines += ["", "`cat all` with the access log on (the default): %.3f s; off (`--log-entries 0`): %.3f s; on / off: %.2f."
              % (on, off, on / off)]
if sized:
    lines += ["", "| items in the vault | time to add them through the mount | mount time | `ls -lR` after mounting | `find -type f` after it "
              "| daemon RSS after them | `keychainfs set` | time to set `user.service` on each | `keychainfs find service=...` (1 % of the items match) "
              "| the same `find` through the mounted vault's daemon (no passphrase) |",
              "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for size, (populate_seconds, mount_s, rss, set_s, label_s, find_s, list_s, walk_s, daemon_find_s) in sorted(sized.items()):
        lines.append("| %d | %.1f s | %.3f s | %.3f s | %.3f s | %.1f MiB | %.3f s | %s | %s | %s |" % (
            size, populate_seconds, mount_s, list_s, walk_s, rss, set_s, "%.1f s" % label_s if label_s is not None else "no xattrs in the mount",
            "%.3f s" % find_s if find_s is not None else "", "%.3f s" % daemon_find_s if daemon_find_s is not None else ""))
if scale:
    sizes_seen = sorted({size for (_workload, size) in scale})
    names = []
    for (workload, _size) in scale:
        if workload not in names:
            names.append(workload)
    lines += ["", "Each workload again, %d items, in a dictionary of its own inside each sized vault: µs per item (medians of %d runs)."
              % (SCALE_ITEMS, min(args.runs, 3)), "",
              "| workload | " + " | ".join("%d items" % size for size in sizes_seen) + " | largest / smallest |",
              "| --- | " + " | ".join("---:" for _ in sizes_seen) + " | ---: |"]
    for workload in names:
        cells = [statistics.median(scale[(workload, size)]) for size in sizes_seen]
        lines.append("| %s | %s | %.2f |" % (workload, " | ".join("%.0f" % c for c in cells), cells[-1] / cells[0]))
per_call = {key: statistics.median(seconds) / args.lookups for key, seconds in lookups.items()}  # seconds per call
ss_lookup = per_call.get(("secret-tool lookup", "keychainfs"))
ss_gnome = per_call.get(("secret-tool lookup", "gnome-keyring"))
ss_cat = per_call.get(("cat", "keychainfs"))
ss_get = per_call.get(("keychainfs get", "keychainfs"))
ss_direct = statistics.median(direct_gets) if direct_gets else None
if ss_lookup is not None:
    ms = lambda seconds: f(seconds * 1000, 2)
    gnome_cell = ms(ss_gnome) if ss_gnome is not None else "not measured: " + unavailable.get("gnome-keyring", "?").replace("|", "/")
    lines += ["", "Secret Service: one item (%d-byte secret), %d calls per run in one `sh -c` loop each; milliseconds per call, medians of %d runs."
              % (len(SS_SECRET), args.lookups, args.runs), "",
              "| per call (ms) | KeychainFS | gnome-keyring | KeychainFS / gnome-keyring |",
              "| --- | ---: | ---: | ---: |",
              "| `secret-tool lookup %s` (D-Bus, a private bus each) | %s | %s | %s |"
              % (" ".join(SS_ATTRIBUTES), ms(ss_lookup), gnome_cell, f(ss_lookup / ss_gnome, 2) if ss_gnome else ""),
              "| `cat MOUNTPOINT/login/%s` (the same item through the mount) | %s |  |  |" % (SS_LABEL, ms(ss_cat)),
              "| D-Bus / cat | %s |  |  |" % f(ss_lookup / ss_cat, 1),
              "| `keychainfs get login/%s` through the mount's daemon (no passphrase) | %s |  |  |" % (SS_LABEL, ms(ss_get)),
              "| `keychainfs get --passphrase-file` (opens the vault: one Argon2id, interactive preset) | %s |  |  |" % ms(ss_direct),
              "| `keychainfs get` through the daemon / `secret-tool lookup` | %s |  |  |" % f(ss_get / ss_lookup, 2),
              "| `keychainfs get` with the passphrase / through the daemon | %s |  |  |" % f(ss_direct / ss_get, 1),
              "", "`/bin/true` in the same loop (what starting a process costs): %s ms per call." % ms(per_call[("true", "none")])]
if team is not None:
    lines += team.lines()
report = "\n".join(lines)
print(report)
if args.workloads_only:
    sys.exit(0)
os.makedirs(os.path.join(ROOT, "results"), exist_ok=True)
stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
open(os.path.join(ROOT, "results", "bench-%s.md" % stamp), "w").write(report + "\n")
with open(os.path.join(ROOT, "results", "bench-%s.csv" % stamp), "w") as csv:
    csv.write("workload,tmpfs_s,gocryptfs_s,keychainfs_s,ratio_tmpfs,ratio_gocryptfs,gnome_keyring_s,ratio_gnome_keyring,"
              "keychainfs_postgresql_s,ratio_postgresql_file,keychainfs_io_uring_s,ratio_io_uring_dev_fuse\n")
    for r in rows:
        csv.write('"%s",%s,%s,%s,%s,%s,,,%s,%s,%s,%s\n' % (r[0], f(r[1], 6), f(r[2], 6), f(r[3], 6), f(r[4], 3), f(r[5], 3), f(r[6], 6), f(r[7], 3),
                                                       f(r[8], 6), f(r[9], 3)))
    if two_mounts is not None:
        csv.write('"postgresql change seen by the other mount, s (median)",,,%f,,\n' % statistics.median(two_mounts[0]))
        for label, (statements, trips, micros) in two_mounts[1].items():
            csv.write('"postgresql statements per %s",,,%f,,\n"postgresql round trips per %s",,,%f,,\n"postgresql us per %s",,,%f,,\n'
                      % (label, statements, label, trips, label, micros))
    if team is not None:
        for label, value in team.csv_rows():
            csv.write('"%s",,,%f,,\n' % (label, value))
    if commit_us:
        csv.write('"durable commit us",,,%f,,\n"commit without sync us",,,%f,,\n' % (commit_us["FULL"], commit_us["NORMAL"]))
    if logging_cost:
        csv.write('"cat all log on",,,%f,,\n"cat all log off",,,%f,,\n' % (statistics.median(logging_cost["on"]), statistics.median(logging_cost["off"])))
    if churn:
        for name, (big, after, wal) in sorted(churn.items()):
            csv.write('"mixed work %s largest bytes",,,%d,,\n"mixed work %s bytes after rm -rf",,,%d,,\n"mixed work %s largest WAL bytes",,,%d,,\n'
                      % (name, big, name, after, name, wal))
    for size, (populate_seconds, mount_s, rss, set_s, label_s, find_s, list_s, walk_s, daemon_find_s) in sorted(sized.items()):
        if daemon_find_s is not None:
            csv.write('"items=%d find through the daemon",,,%f,,\n' % (size, daemon_find_s))
        csv.write('"items=%d find -type f",,,%f,,\n' % (size, walk_s))
        csv.write('"items=%d mount",,,%f,,\n"items=%d rss_mib",,,%f,,\n"items=%d set",,,%f,,\n' % (size, mount_s, size, rss, size, set_s))
        csv.write('"items=%d ls -lR",,,%f,,\n' % (size, list_s))
        if find_s is not None:
            csv.write('"items=%d setxattr each",,,%f,,\n"items=%d find",,,%f,,\n' % (size, label_s, size, find_s))
    for (workload, size), per_item in scale.items():
        csv.write('"items=%d %s, us per item",,,%f,,\n' % (size, workload, statistics.median(per_item)))
    if ss_lookup is not None:
        csv.write('"secret-tool lookup, s per call",,,%s,,,%s,%s\n' % (f(ss_lookup, 6), f(ss_gnome, 6), f(ss_lookup / ss_gnome, 3) if ss_gnome else ""))
        csv.write('"cat login/%s, s per call",,,%s,,,,\n' % (SS_LABEL, f(ss_cat, 6)))
        csv.write('"secret-tool lookup / cat",,,%s,,,,\n' % f(ss_lookup / ss_cat, 3))
        csv.write('"keychainfs get through the daemon, s per call",,,%s,,,,\n' % f(ss_get, 6))
        csv.write('"keychainfs get with the passphrase, s per call",,,%s,,,,\n' % f(ss_direct, 6))
        csv.write('"/bin/true, s per call",,,%s,,,,\n' % f(per_call[("true", "none")], 6))
