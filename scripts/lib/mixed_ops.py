"""Mixed filesystem work in the manner of xfstests' fsstress (not packaged in Debian): PROCS
processes, each doing OPS random operations in a directory of its own under ROOT, with
fsstress's default mix and sizes (writes of up to 128 KiB at an offset within the file's size
plus 1 MiB, each through an open and close of its own). Failures are counted, not fatal, as
fsstress counts them (a vault refuses items past its size limit with EFBIG).
    python3 mixed_ops.py ROOT [--procs 4] [--ops 10000] [--seed 1]
Prints one line: operations done and failed, by kind."""
import argparse, errno, multiprocessing, os, random, sys

# fsstress's default frequencies for what a vault has (no links, symlinks, device nodes).
MIX = {"creat": 4, "write": 4, "read": 1, "truncate": 2, "unlink": 1, "mkdir": 2, "rmdir": 1, "rename": 2,
       "chmod": 3, "setxattr": 1, "fsync": 1, "fdatasync": 1, "getdents": 1, "stat": 1, "fallocate": 1}
WRITE_MAX = 32 * 4096


def worker(root, ops, seed, results):
    rng = random.Random(seed)
    os.makedirs(root, exist_ok=True)
    files, dirs = [], [root]
    serial = 0
    done, failed = {}, {}
    kinds = [k for k, weight in MIX.items() for _ in range(weight)]

    def new_name(prefix="f"):
        nonlocal serial
        serial += 1
        return os.path.join(rng.choice(dirs), "%s%d" % (prefix, serial))

    for _ in range(ops):
        kind = rng.choice(kinds)
        try:
            if kind == "creat":
                path = new_name()
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                files.append(path)
            elif kind == "mkdir":
                path = new_name("d")
                os.mkdir(path, 0o700)
                dirs.append(path)
            elif not files and kind not in ("rmdir", "getdents"):
                kind = "skipped"
            elif kind in ("write", "read", "fsync", "fdatasync", "fallocate"):
                path = rng.choice(files)
                fd = os.open(path, os.O_RDWR)
                try:
                    size = os.fstat(fd).st_size
                    if kind == "write":
                        length = rng.randrange(WRITE_MAX) + 1
                        os.pwrite(fd, os.urandom(length), rng.randrange(size + (1 << 20)))
                    elif kind == "read":
                        os.pread(fd, rng.randrange(WRITE_MAX) + 1, rng.randrange(size + 1))
                    elif kind == "fallocate":
                        os.posix_fallocate(fd, rng.randrange(size + (1 << 20)), rng.randrange(WRITE_MAX) + 1)
                    elif kind == "fsync":
                        os.fsync(fd)
                    else:
                        os.fdatasync(fd)
                finally:
                    os.close(fd)
            elif kind == "truncate":
                path = rng.choice(files)
                os.truncate(path, rng.randrange(os.stat(path).st_size + (1 << 20)))
            elif kind == "unlink":
                path = files.pop(rng.randrange(len(files)))
                os.unlink(path)
            elif kind == "rmdir":
                if len(dirs) == 1:
                    kind = "skipped"
                else:
                    path = dirs[rng.randrange(1, len(dirs))]
                    os.rmdir(path)
                    dirs.remove(path)
            elif kind == "rename":
                path = files.pop(rng.randrange(len(files)))
                target = new_name()
                os.rename(path, target)
                files.append(target)
            elif kind == "chmod":
                os.chmod(rng.choice(files), rng.choice((0o600, 0o640, 0o700, 0o400)) | 0o200)
            elif kind == "setxattr":
                os.setxattr(rng.choice(files), "user.k%d" % rng.randrange(8), os.urandom(rng.randrange(1, 256)))
            elif kind == "getdents":
                os.listdir(rng.choice(dirs))
            elif kind == "stat":
                os.stat(rng.choice(files))
            done[kind] = done.get(kind, 0) + 1
        except OSError as error:
            name = "%s:%s" % (kind, errno.errorcode.get(error.errno, error.errno))
            failed[name] = failed.get(name, 0) + 1
    results.put((done, failed))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--ops", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    results = multiprocessing.Queue()
    workers = [multiprocessing.Process(target=worker, args=(os.path.join(args.root, "p%d" % k), args.ops, args.seed * 100 + k, results))
               for k in range(args.procs)]
    for w in workers:
        w.start()
    done, failed = {}, {}
    for _ in workers:
        d, f = results.get()
        for k, v in d.items():
            done[k] = done.get(k, 0) + v
        for k, v in f.items():
            failed[k] = failed.get(k, 0) + v
    for w in workers:
        w.join()
    if any(w.exitcode != 0 for w in workers):
        sys.exit("a worker failed")
    print("done %d, failed %d: %s" % (sum(done.values()), sum(failed.values()), " ".join("%s=%d" % kv for kv in sorted(failed.items()))))


if __name__ == "__main__":
    main()
