"""A writer for scripts/crash-test: writes random values, creates empty files, renames, unlinks,
makes and removes a dictionary through the mount, and records each change in a log only after its call returned
success (a write: after close()), so the log lists acknowledged changes only. Each line is
`attempt ...` before the call and `done ...` after, with the monotonic time of the line.
  crash_writer.py MOUNTPOINT WRITER LOG SEED [ONLY_NAMESPACE_AFTER_SECONDS]
With the last argument, writes stop that long after the start and only namespace changes
follow (the power-loss rounds: nothing durable at close comes after them)."""
import os, random, sys, time

mountpoint, writer, log_path, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
writes_until = time.monotonic() + float(sys.argv[5]) if len(sys.argv) > 5 else None
rng = random.Random(seed)
log = open(log_path, "a", buffering=1)
directory = os.path.join(mountpoint, "w" + writer)
try:
    os.mkdir(directory, 0o700)
except FileExistsError:
    pass
except OSError:
    sys.exit(0)
try:
    names = set(os.listdir(directory))
except OSError:
    sys.exit(0)
sequence = 0


def record(kind, *words):
    log.write("%s %.6f %s\n" % (kind, time.monotonic(), " ".join(words)))


def change(words, call):
    record("attempt", *words)
    try:
        call()
    except OSError:
        sys.exit(0)  # the daemon is gone: this change was never acknowledged
    record("done", *words)


def write(path, value):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    view = memoryview(value)
    while view:
        view = view[os.write(fd, view):]
    os.close(fd)


while True:
    sequence += 1
    items = sorted(n for n in names if n != "sub")
    writing = writes_until is None or time.monotonic() < writes_until
    if not writing:
        # Paced, so that SQLite's checkpoints (every 1000 WAL frames, each of which syncs the
        # WAL) are rare: what stays durable is then the flusher's doing.
        time.sleep(0.05)
    roll = rng.random()
    if items and roll < 0.15:
        source, target = rng.choice(items), "k%d" % rng.randrange(12)
        change(["rename", source, target], lambda: os.rename(os.path.join(directory, source), os.path.join(directory, target)))
        names.discard(source)
        names.add(target)
    elif items and roll < 0.3:
        victim = rng.choice(items)
        change(["unlink", victim], lambda: os.unlink(os.path.join(directory, victim)))
        names.discard(victim)
    elif roll < (0.45 if writing else 0.6):
        # An empty file created and closed: a namespace change, durable within the window.
        name = "e%d" % rng.randrange(12)
        if name in names:
            change(["unlink", name], lambda: os.unlink(os.path.join(directory, name)))
            names.discard(name)
        else:
            change(["create", name], lambda: os.close(os.open(os.path.join(directory, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)))
            names.add(name)
    elif roll < 0.5 or not writing:
        if "sub" in names:
            change(["rmdir", "sub"], lambda: os.rmdir(os.path.join(directory, "sub")))
            names.discard("sub")
        else:
            change(["mkdir", "sub"], lambda: os.mkdir(os.path.join(directory, "sub"), 0o700))
            names.add("sub")
    else:
        name = "k%d" % rng.randrange(12)
        size = rng.choice([1, 17, 300, 4000, 70000])
        value = ("%s-%d-" % (writer, sequence)).encode() + os.urandom(size // 2).hex().encode()[:size]
        change(["write", name, value.hex()], lambda: write(os.path.join(directory, name), value))
        names.add(name)
