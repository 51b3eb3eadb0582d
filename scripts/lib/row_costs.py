"""Where the time of each per-item row goes (issue 25 item 4), from one run: for gocryptfs,
KeychainFS over /dev/fuse, KeychainFS over io_uring (where the kernel has it) and a libfuse
file system that keeps names and nothing else (scripts/lib/nullfs.c, the floor: once on
libfuse's loop, once on KeychainFS's busy-polling one), the µs
per item (with --runs, the median of that many timed runs, one after the other, and each run's
ratios), the FUSE requests per item the kernel sent (the fuse:fuse_request_send tracepoint of
that mount's connection, by opcode), the SQLite statements per item (uprobes on sqlite3_reset
and sqlite3_exec), and the syncs (fsync, fdatasync) and pwrites per item of the file
system's process (the syscall tracepoints of its threads). Times come from a first, untraced
pass; counts from a second, traced one.

    python3 scripts/lib/row_costs.py KEYCHAINFS_BINARY [--items N] [--runs N]

Needs root, tracefs (mounted at /sys/kernel/tracing if it is not), gocryptfs, gcc and
libfuse3-dev. Traces go to a tracefs instance of the script's own, removed after; the fuse
module's enable_uring is turned on for the io_uring mount and put back. Prints Markdown tables.
The floor of a create row is nullfs's µs per item plus one WAL commit's fdatasync (a 4 KiB
pwrite and fdatasync on the same disk, median of 200); of the others, nullfs's. Each row is also
timed on a tmpfs of its own (no FUSE at all), untraced; and a rename's commit is timed on SQLite
alone (`bare_rename_commit_us`), and the rename row once more on the busy-polling nullfs with
each request answered after a wait, to show what a request that takes that long costs its caller
(`what_a_slow_request_costs`)."""
import argparse, json, os, re, shutil, statistics, subprocess, sys, tempfile, time

parser = argparse.ArgumentParser()
parser.add_argument("keychainfs")
parser.add_argument("--items", type=int, default=2000)
parser.add_argument("--runs", type=int, default=1)
args = parser.parse_args()
KFS, N, RUNS = args.keychainfs, args.items, args.runs
HERE = os.path.dirname(os.path.abspath(__file__))
work = tempfile.mkdtemp(prefix="keychainfs-rows.")
PW = os.path.join(work, "pw")
open(PW, "w").write("benchmark passphrase\n")
TRACING = "/sys/kernel/tracing"
INSTANCE = os.path.join(TRACING, "instances", "keychainfs-rows-%d" % os.getpid())
ENABLE_URING = "/sys/module/fuse/parameters/enable_uring"
uring_before = None
mounted, daemons = [], []
unmounted = []  # tmpfs mounts, unmounted with umount


def sh(command, **kw):
    done = subprocess.run(command, shell=isinstance(command, str), capture_output=True, text=True, **kw)
    if done.returncode != 0:
        raise RuntimeError("%s: exit status %d: %s" % (command, done.returncode, done.stderr.strip()[-500:]))
    return done


def cleanup():
    for mountpoint in reversed(mounted):
        subprocess.run(["fusermount3", "-u", "-z", mountpoint], capture_output=True)
    for mountpoint in unmounted:
        subprocess.run(["umount", mountpoint], capture_output=True)
    for daemon in daemons:
        daemon.wait(timeout=10)
    if uring_before is not None:
        open(ENABLE_URING, "w").write(uring_before)
    if os.path.isdir(INSTANCE):
        os.rmdir(INSTANCE)
    for symbol in uprobes:
        append_uprobe("-:%s/%s" % (UPROBE_GROUP, symbol))
    shutil.rmtree(work, ignore_errors=True)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


# The rows, as scripts/lib/bench.py times them (d: the row's directory).
ROWS = [
    ("create (echo >)", ["bash", "-c", 'd="$1"; mkdir "$d"; for i in $(seq 1 %d); do printf "%%063d\\n" $i > "$d/s$i"; done' % N, "-"]),
    ("create, fsync each", ["python3", "-c", "import os,sys\nd=sys.argv[1]\nos.mkdir(d)\nfor i in range(1,%d):\n"
                            " fd=os.open('%%s/s%%d'%%(d,i),os.O_WRONLY|os.O_CREAT|os.O_TRUNC,0o600)\n"
                            " os.write(fd,b'%%063d\\n'%%i); os.fsync(fd); os.close(fd)\n" % (N + 1)]),
    ("ls -lR", ["bash", "-c", 'ls -lR "$1" > /dev/null', "-"]),
    ("rename", ["python3", "-c", "import os,sys\nd=sys.argv[1]\nfor i in range(1,%d): os.rename('%%s/s%%d'%%(d,i),'%%s/r%%d'%%(d,i))\n" % (N + 1)]),
]
# Each row's directory: ls -lR and rename work on what the `echo >` row made.
ROW_DIRECTORY = {"create (echo >)": "e", "create, fsync each": "f", "ls -lR": "e", "rename": "e"}


UPROBES = os.path.join(TRACING, "uprobe_events")
UPROBE_GROUP = "kcfsrows%d" % os.getpid()
uprobes = []  # names added to uprobe_events, removed by cleanup


def append_uprobe(line):
    # O_APPEND without Python's seek to the end (tracefs refuses it); never O_TRUNC, which
    # would remove every uprobe on the machine.
    fd = os.open(UPROBES, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def file_offset(library, symbol):
    """Where symbol's code is in library's file (a uprobe takes a file offset)."""
    address = next(int(line.split()[0], 16) for line in sh(["nm", "-D", "--defined-only", library]).stdout.splitlines()
                   if line.split()[-1] == symbol)
    for line in sh(["readelf", "-lW", library]).stdout.splitlines():
        fields = line.split()
        if fields[:1] == ["LOAD"]:
            offset, virtual, size = int(fields[1], 16), int(fields[2], 16), int(fields[5], 16)
            if virtual <= address < virtual + size:
                return address - virtual + offset
    raise RuntimeError("%s not in a loaded segment of %s" % (symbol, library))


def statement_text_offset(library):
    """Where a statement keeps its SQL: sqlite3_sql(stmt) is `return stmt->zSql`, one load
    from the statement at a fixed offset, read from its code (it differs between versions)."""
    start = file_offset(library, "sqlite3_sql")
    code = sh(["objdump", "-d", "--start-address=0x%x" % start, "--stop-address=0x%x" % (start + 32), library]).stdout
    found = re.search(r"mov\s+0x([0-9a-f]+)\(%rdi\),%rax", code)
    if not found:
        raise RuntimeError("cannot find where sqlite3_sql reads the SQL in %s" % library)
    return int(found.group(1), 16)


def add_statement_probes():
    """Every SQLite statement the daemon runs ends in sqlite3_reset (StorageSQLite's query) or is
    one sqlite3_exec: a uprobe on each, in the library the binary loads, with the SQL (never a
    value: those are bound apart). sqlite3_step also calls sqlite3_reset itself when it prepares
    an expired statement again (PRAGMA synchronous each time), right before our own reset of it:
    a statement seen twice in a row on one thread is counted once."""
    library = os.path.realpath(next(line.split("=>")[1].split()[0] for line in sh(["ldd", KFS]).stdout.splitlines()
                                    if "libsqlite3" in line))  # uprobe_events takes no symbolic link
    append_uprobe("p:%s/sqlite3_reset %s:0x%x sql=+0(+0x%x(%%di)):string" % (UPROBE_GROUP, library, file_offset(library, "sqlite3_reset"),
                                                                          statement_text_offset(library)))
    uprobes.append("sqlite3_reset")
    append_uprobe("p:%s/sqlite3_exec %s:0x%x sql=+0(%%si):string" % (UPROBE_GROUP, library, file_offset(library, "sqlite3_exec")))
    uprobes.append("sqlite3_exec")


def statement_kind(sql):
    """`SELECT nodes WHERE id`, `UPDATE vault`, `PRAGMA data_version`, `COMMIT`: what a statement
    does, without its columns."""
    words = sql.split()
    verb = words[0].upper() if words else "?"
    if verb == "PRAGMA":
        return sql.split("=")[0].split("(")[0].strip()
    table = re.search(r"\b(?:FROM|UPDATE|INTO)\s+(\w+)", sql, re.I)
    where = re.search(r"\bWHERE\s+(\w+)", sql, re.I)
    kind = verb + (" " + table.group(1) if table else "")
    return kind + (" WHERE " + where.group(1) if verb == "SELECT" and where else "")


def connection(mountpoint):
    device = os.stat(mountpoint).st_dev
    return (os.major(device) << 20) | os.minor(device)  # the kernel's dev_t, as the tracepoint gives it


def threads(pid):
    return [int(t) for t in os.listdir("/proc/%d/task" % pid)]


def traced(mountpoint, pid, command):
    """Runs command with the mount's FUSE requests and the process's SQLite statements traced
    and its system calls counted: ({opcode: count}, {"statements", "by kind", "fsync",
    "pwrite64"}, (system calls, {number: count})). Tracing slows each call down: the times come
    from another pass, untraced."""
    events = os.path.join(INSTANCE, "events")
    write(os.path.join(INSTANCE, "trace"), "")
    write(os.path.join(events, "fuse", "fuse_request_send", "filter"), "connection == %d" % connection(mountpoint))
    by_thread = " || ".join("common_pid == %d" % t for t in threads(pid))
    probes = ["%s/%s" % (UPROBE_GROUP, symbol) for symbol in uprobes]
    for name in probes:
        write(os.path.join(events, name, "filter"), by_thread)
        write(os.path.join(events, name, "enable"), "1")
    syncs = ["syscalls/sys_enter_fsync", "syscalls/sys_enter_fdatasync", "syscalls/sys_enter_pwrite64"]
    for name in syncs:
        write(os.path.join(events, name, "filter"), by_thread)
        write(os.path.join(events, name, "enable"), "1")
    write(os.path.join(events, "fuse", "fuse_request_send", "enable"), "1")
    try:
        sh(command)
    finally:
        for name in ["fuse/fuse_request_send"] + probes + syncs:
            write(os.path.join(events, name, "enable"), "0")
    calls = {"fsync": 0, "pwrite64": 0}
    opcodes, statements, last_statement = {}, {}, {}
    with open(os.path.join(INSTANCE, "trace"), errors="replace") as trace:
        for line in trace:
            found = re.search(r"fuse_request_send: .*\((FUSE_\w+)\)", line)
            if found:
                opcodes[found.group(1)[5:]] = opcodes.get(found.group(1)[5:], 0) + 1
                continue
            found = re.search(r"-(\d+)\s+\[.* (sqlite3_reset|sqlite3_exec): .*sql=\"(.*)\"\s*$", line)
            if found:
                thread, sql = found.group(1), found.group(3)
                if found.group(2) == "sqlite3_reset" and last_statement.get(thread) == sql:
                    last_statement[thread] = None  # SQLite's own reset, then ours: one statement
                    continue
                last_statement[thread] = sql
                calls["statements"] = calls.get("statements", 0) + 1
                kind = statement_kind(sql)
                statements[kind] = statements.get(kind, 0) + 1
                continue
            found = re.search(r"sys_(fsync|fdatasync|pwrite64)\(", line)
            if found:
                key = "pwrite64" if found.group(1) == "pwrite64" else "fsync"
                calls[key] += 1
    for cpu in os.listdir(os.path.join(INSTANCE, "per_cpu")):
        if re.search(r"overrun: [1-9]", open(os.path.join(INSTANCE, "per_cpu", cpu, "stats")).read()):
            raise RuntimeError("the trace buffer overran; raise buffer_size_kb")
    calls["by kind"] = statements
    return opcodes, calls


def timed_with_latencies(mountpoint, command):
    """Seconds of command, and each opcode's requests' mean time from the kernel's send to
    its end (fuse_request_send and fuse_request_end, two cheap tracepoints: what the
    daemon and the way there and back take), in µs."""
    events = os.path.join(INSTANCE, "events", "fuse")
    write(os.path.join(INSTANCE, "trace"), "")
    for event in ("fuse_request_send", "fuse_request_end"):
        write(os.path.join(events, event, "filter"), "connection == %d" % connection(mountpoint))
        write(os.path.join(events, event, "enable"), "1")
    start = time.perf_counter()
    try:
        sh(command)
    finally:
        seconds = time.perf_counter() - start
        for event in ("fuse_request_send", "fuse_request_end"):
            write(os.path.join(events, event, "enable"), "0")
    sent, spans = {}, {}
    with open(os.path.join(INSTANCE, "trace")) as trace:
        for line in trace:
            found = re.search(r"\s([\d.]+): fuse_request_(send|end): connection \d+ req (\d+)(?: opcode \d+ \((FUSE_\w+)\))?", line)
            if not found:
                continue
            when, unique = float(found.group(1)), found.group(3)
            if found.group(2) == "send":
                sent[unique] = (when, found.group(4)[5:])
            elif unique in sent:
                began, opcode = sent.pop(unique)
                spans.setdefault(opcode, []).append((when - began) * 1e6)
    return seconds, {opcode: statistics.fmean(values) for opcode, values in spans.items()}


def fdatasync_us():
    path = os.path.join(work, "wal")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    page, samples = b"\0" * 4096, []
    for i in range(200):
        os.pwrite(fd, page, i * 4096)
        start = time.perf_counter()
        os.fdatasync(fd)
        samples.append(time.perf_counter() - start)
    os.close(fd)
    return statistics.median(samples) * 1e6


def bare_rename_commit_us():
    """What a rename's commit costs SQLite alone, with no file system around it: on the same
    disk and library, a WAL database shaped like a vault's nodes (2 000 rows under one parent,
    a unique index on parent and name tag), each transaction updating what a rename updates
    (the node's parent, name tag and sealed name; the dictionary's sealed times; the vault row's
    generation and state MAC) with synchronous=NORMAL, as the mount commits a rename. Median of
    2 000, Python's own cost per statement included."""
    import sqlite3
    db = sqlite3.connect(os.path.join(work, "bare.sqlite"), isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("CREATE TABLE nodes (id INTEGER PRIMARY KEY, parent INTEGER, name_tag BLOB, sealed BLOB)")
    db.execute("CREATE UNIQUE INDEX nodes_by_name ON nodes (parent, name_tag)")
    db.execute("CREATE TABLE vault (singleton INTEGER PRIMARY KEY, generation INTEGER, state_mac BLOB)")
    db.execute("INSERT INTO vault VALUES (1, 0, zeroblob(32))")
    db.execute("BEGIN")
    db.execute("INSERT INTO nodes VALUES (1, 0, zeroblob(32), zeroblob(120))")
    for node in range(2, 2002):
        db.execute("INSERT INTO nodes VALUES (?, 1, ?, ?)", (node, os.urandom(32), os.urandom(120)))
    db.execute("COMMIT")
    samples = []
    for node in range(2, 2002):
        tag, name, times, mac = os.urandom(32), os.urandom(120), os.urandom(120), os.urandom(32)
        start = time.perf_counter()
        db.execute("BEGIN IMMEDIATE")
        db.execute("UPDATE nodes SET parent = 1, name_tag = ?, sealed = ? WHERE id = ?", (tag, name, node))
        db.execute("UPDATE nodes SET sealed = ? WHERE id = 1", (times,))
        db.execute("UPDATE vault SET generation = generation + 1, state_mac = ? WHERE singleton = 1", (mac,))
        db.execute("COMMIT")
        samples.append(time.perf_counter() - start)
    db.close()
    return statistics.median(samples) * 1e6


def mount_nullfs(nullfs, mountpoint, arguments):
    os.makedirs(mountpoint)
    daemon = subprocess.Popen([nullfs, mountpoint] + arguments)
    daemons.append(daemon)
    mounted.append(mountpoint)
    while not os.path.ismount(mountpoint):
        if daemon.poll() is not None:
            raise RuntimeError("nullfs did not mount (exit status %d)" % daemon.returncode)
        time.sleep(0.01)
    return daemon


def what_a_slow_request_costs(nullfs, requests):
    """The rename row on the busy-polling nullfs, each request answered DELAY µs after it
    arrives: a caller whose request takes longer than a few µs pays more than the delay (it
    sleeps, and is woken), which is what a file system with real work to do pays on every
    request. [(delay, µs per item, µs per item beyond the delay-free row and `requests`
    delays)], each delay on a mount of its own, after the rows."""
    rename = dict(ROWS)["rename"]
    rows = []
    for delay in (0, 5, 10, 20, 40, 80):
        mountpoint = os.path.join(work, "slow%d" % delay)
        mount_nullfs(nullfs, mountpoint, ["200", str(delay)])
        d = os.path.join(mountpoint, "e")
        os.mkdir(d)
        for i in range(1, N + 1):
            os.close(os.open(os.path.join(d, "s%d" % i), os.O_WRONLY | os.O_CREAT, 0o600))
        start = time.perf_counter()
        sh(rename + [d])
        us = (time.perf_counter() - start) / N * 1e6
        rows.append((delay, us, us - (rows[0][1] if rows else us) - requests * delay))
    return rows


def kfs_mount(name, extra=()):
    vault, mountpoint = os.path.join(work, name + ".vault"), os.path.join(work, name)
    os.makedirs(mountpoint)
    sh([KFS, "init", "--vault", vault, "--passphrase-file", PW, "--kdf", "interactive"])
    sh([KFS, "mount", "--vault", vault, "--passphrase-file", PW, *extra, mountpoint])
    mounted.append(mountpoint)
    status = json.loads(sh([KFS, "status", "--json", mountpoint]).stdout)
    return mountpoint, int((status[0] if isinstance(status, list) else status)["pid"])


def main():
    global uring_before
    if not os.path.isdir(os.path.join(TRACING, "events")):
        sh(["mount", "-t", "tracefs", "nodev", TRACING])
    os.mkdir(INSTANCE)
    add_statement_probes()
    write(os.path.join(INSTANCE, "buffer_size_kb"), "65536")
    systems = []
    cipher, gocrypt = os.path.join(work, "gcipher"), os.path.join(work, "gocryptfs")
    os.makedirs(cipher); os.makedirs(gocrypt)
    sh(["gocryptfs", "-q", "-init", "-passfile", PW, cipher])
    sh(["gocryptfs", "-q", "-passfile", PW, cipher, gocrypt])
    mounted.append(gocrypt)
    systems.append(("gocryptfs", gocrypt, int(sh(["pgrep", "-n", "-x", "gocryptfs"]).stdout.split()[0])))
    systems.append(("KeychainFS /dev/fuse",) + kfs_mount("kfs", ["--transport", "dev-fuse"]))
    if os.access(ENABLE_URING, os.W_OK):
        uring_before = open(ENABLE_URING).read().strip()
        write(ENABLE_URING, "Y")
        systems.append(("KeychainFS io_uring",) + kfs_mount("kfs-uring", ["--transport", "io-uring"]))
    nullfs = os.path.join(work, "nullfs-bin")
    sh("gcc -O2 -o %s %s $(pkg-config --cflags --libs fuse3)" % (nullfs, os.path.join(HERE, "nullfs.c")))
    floors = []
    # libfuse's own loop, and KeychainFS's (FUSESession.defaultBusyPollMicroseconds: 200).
    for name, loop in (("nullfs (floor)", []), ("nullfs, busy polling (floor)", ["200"])):
        floor = os.path.join(work, "floor%d" % len(floors))
        floors.append((name, floor, mount_nullfs(nullfs, floor, loop).pid))
    tmpfs = os.path.join(work, "tmpfs")
    os.makedirs(tmpfs)
    sh(["mount", "-t", "tmpfs", "-o", "mode=0700", "keychainfs-rows", tmpfs])
    unmounted.append(tmpfs)
    tmpfs_us = {}  # row -> [µs per item, one per run]
    times, latencies = {}, {}  # (row, system) -> [seconds, one per run]; opcode -> mean µs (the last run)
    results = {}  # (row, system) -> (median µs per item, requests per item by opcode, calls per item)
    # The timed runs, one after the other (each row in a directory of its own), then the traced pass.
    for run in list(range(1, RUNS + 1)) + ["traced"]:
        for row, command in ROWS:
            directory = "%s-%s" % (ROW_DIRECTORY[row], run)
            if run != "traced":
                # The same row on tmpfs, no FUSE at all: timed alone.
                start = time.perf_counter()
                sh(command + [os.path.join(tmpfs, directory)])
                tmpfs_us.setdefault(row, []).append((time.perf_counter() - start) / N * 1e6)
            for name, root, pid in systems + floors:
                d = os.path.join(root, directory)
                if run != "traced":
                    seconds, latencies[(row, name)] = timed_with_latencies(root, command + [d])
                    times.setdefault((row, name), []).append(seconds / N * 1e6)
                    continue
                opcodes, calls = traced(root, pid, command + [d])
                results[(row, name)] = (statistics.median(times[(row, name)]),
                                        {k: (v / N, latencies[(row, name)].get(k)) for k, v in opcodes.items()},
                                        {k: (v / N if k != "by kind" else {a: b / N for a, b in v.items()}) for k, v in calls.items()})
    sync_us = fdatasync_us()
    commit_us = bare_rename_commit_us()
    rename_requests = sum(count for count, _ in results[("rename", floors[-1][0])][1].values())
    slow = what_a_slow_request_costs(nullfs, rename_requests)
    names = [s[0] for s in systems]
    print("%s, %d items per row; µs per item (ratio to gocryptfs)%s, FUSE requests the kernel sent per item, and the file "
          "system process's SQLite statements, syncs and pwrites per item. One WAL fdatasync (4 KiB) here: %.0f µs; "
          "a rename's commit to SQLite alone (no file system): %.0f µs.\n"
          % ("One run" if RUNS == 1 else "%d runs" % RUNS, N, "" if RUNS == 1 else ", the median of the runs", sync_us, commit_us))
    floor_names = [f[0] for f in floors]
    print("| row | " + " | ".join(names + [n + ", + 1 fdatasync in a create row" for n in floor_names] + ["tmpfs"]) + " |")
    print("| --- |" + " ---: |" * (len(names) + len(floors) + 1))
    for row, _ in ROWS:
        go = results[(row, "gocryptfs")][0]
        cells = ["%.0f (%.2fx)" % (results[(row, n)][0], results[(row, n)][0] / go) for n in names]
        for floor_name in floor_names:
            nullfs_us = results[(row, floor_name)][0]
            if row.startswith("create"):
                cells.append("%.0f (%.0f + %.0f; %.2fx)" % (nullfs_us + sync_us, nullfs_us, sync_us, (nullfs_us + sync_us) / go))
            else:
                cells.append("%.0f (%.2fx)" % (nullfs_us, nullfs_us / go))
        tmpfs_median = statistics.median(tmpfs_us[row])
        print("| %s | %s | %.0f (%.2fx) |" % (row, " | ".join(cells), tmpfs_median, tmpfs_median / go))
    if RUNS > 1:
        print("\nEach run's ratios to gocryptfs in that run (%s):\n" % "; ".join(names[1:] + ["busy-polling nullfs"]))
        print("| row | " + " | ".join("run %d" % (i + 1) for i in range(RUNS)) + " |")
        print("| --- |" + " ---: |" * RUNS)
        for row, _ in ROWS:
            ratios = []
            for i in range(RUNS):
                go = times[(row, "gocryptfs")][i]
                extra = sync_us if row.startswith("create") else 0
                ratios.append("; ".join(["%.2f" % (times[(row, n)][i] / go) for n in names[1:]]
                                        + ["%.2f" % ((times[(row, floor_names[-1])][i] + extra) / go)]))
            print("| %s | %s |" % (row, " | ".join(ratios)))
    print("\n| row | system | FUSE requests per item: each opcode's count per item and (mean µs from the kernel's send to the end) "
          "| SQLite statements per item | fsync + fdatasync | pwrite64 |")
    print("| --- | --- | --- | --- | ---: | ---: |")
    for (row, name), (us, opcodes, calls) in results.items():
        total = sum(count for count, _ in opcodes.values())
        detail = ", ".join("%s %.2g%s" % (k, count, " (%.0f)" % span if span is not None else "")
                           for k, (count, span) in sorted(opcodes.items(), key=lambda kv: -kv[1][0]) if count >= 0.01)
        kinds = calls.get("by kind", {})
        statement_cell = "%.1f" % calls.get("statements", 0)
        if kinds:
            statement_cell += ": " + ", ".join("%s %.2g" % (k, v) for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]) if v >= 0.05)
        print("| %s | %s | %.2f: %s | %s | %.2f | %.2f |" % (row, name, total, detail, statement_cell, calls.get("fsync", 0),
                                                           calls.get("pwrite64", 0)))
    print("\nWhat a slow request costs its caller: the rename row (%.2f requests per item) on the busy-polling nullfs, each "
          "request answered after a busy wait of the given µs; beyond: µs per item more than the row without the wait and "
          "the waits themselves.\n" % rename_requests)
    print("| wait per request (µs) | µs per item | beyond |")
    print("| ---: | ---: | ---: |")
    for delay, us, beyond in slow:
        print("| %d | %.0f | %.0f |" % (delay, us, beyond))


try:
    main()
finally:
    cleanup()
