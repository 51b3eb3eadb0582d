"""Checks a remounted vault against the writers' logs: every file holds its last acknowledged
value, or a value whose write was still in flight after it; never anything else."""
import os, sys

mountpoint, logs = sys.argv[1], sys.argv[2:]
failures = 0
checked = 0
for log_path in logs:
    writer = os.path.basename(log_path).split(".")[0]
    last_done, pending = {}, {}
    for line in open(log_path):
        parts = line.split()
        if len(parts) != 3:
            continue  # a line cut short by the kill
        kind, name, value = parts
        if kind == "attempt":
            pending.setdefault(name, set()).add(value)
        else:
            last_done[name] = value
            pending[name] = set()
    for name, value in last_done.items():
        path = os.path.join(mountpoint, "w" + writer, name)
        try:
            content = open(path, "rb").read().hex()
        except OSError as error:
            print("FAIL %s/%s: acknowledged write lost (%s)" % (writer, name, error))
            failures += 1
            continue
        checked += 1
        if content != value and content not in pending.get(name, set()):
            print("FAIL %s/%s: holds neither its last acknowledged value nor a later attempt" % (writer, name))
            failures += 1
print("checked %d files, %d failures" % (checked, failures))
sys.exit(1 if failures else 0)
