"""A writer for scripts/crash-test: writes random values through the mount and records each
one in a log only after close() returned success, so the log lists acknowledged writes only."""
import os, random, sys

mountpoint, writer, log_path, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rng = random.Random(seed)
log = open(log_path, "a", buffering=1)
directory = os.path.join(mountpoint, "w" + writer)
try:
    os.mkdir(directory, 0o700)
except FileExistsError:
    pass
except OSError:
    sys.exit(0)
sequence = 0
while True:
    sequence += 1
    name = "k%d" % rng.randrange(12)
    size = rng.choice([1, 17, 300, 4000, 70000])
    value = ("%s-%d-" % (writer, sequence)).encode() + os.urandom(size // 2).hex().encode()[:size]
    path = os.path.join(directory, name)
    log.write("attempt %s %s\n" % (name, value.hex()))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        view = memoryview(value)
        while view:
            view = view[os.write(fd, view):]
        os.close(fd)
    except OSError:
        sys.exit(0)  # the daemon is gone: this write was never acknowledged
    log.write("done %s %s\n" % (name, value.hex()))
