"""Checks a remounted vault against the crash writers' logs of one round (crash_writer.py).
  crash_check.py MOUNTPOINT STATE_FILE [--lost-at-most SECONDS --killed-at MONOTONIC] LOG...
STATE_FILE holds what each writer's dictionary held when the round began (JSON, written by the
previous check; missing for the first round) and is replaced by what it holds now.
After a SIGKILL of the daemon (no option): each dictionary holds exactly what every change
acknowledged in the log made of it, the change still in flight applied or not; nothing
acknowledged is lost. After a simulated power loss (--lost-at-most): it holds what some prefix
of its changes made of it, and that prefix takes in every change acknowledged more than
SECONDS before the power went (--killed-at, CLOCK_MONOTONIC) and every change up to the last
acknowledged write (durable at its close, which syncs everything before it)."""
import json, os, sys

arguments = sys.argv[1:]
mountpoint, state_path = arguments[0], arguments[1]
arguments = arguments[2:]
window = killed_at = None
if arguments and arguments[0] == "--lost-at-most":
    window, killed_at = float(arguments[1]), float(arguments[3])
    arguments = arguments[4:]
logs = arguments
try:
    previous = json.load(open(state_path))
except (OSError, ValueError):
    previous = {}


def read_state(directory):
    state = {}
    if not os.path.exists(directory):
        return state  # the writer was killed before its first mkdir
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        state[name] = "dir" if os.path.isdir(path) else open(path, "rb").read().hex()
    return state


def applied(state, words):
    state = dict(state)
    kind = words[0]
    if kind == "write":
        state[words[1]] = words[2]
    elif kind == "rename":
        state[words[2]] = state.pop(words[1])
    elif kind in ("unlink", "rmdir"):
        state.pop(words[1], None)
    elif kind == "mkdir":
        state[words[1]] = "dir"
    elif kind == "create":
        state[words[1]] = ""
    return state


def in_flight_states(state, words):
    """What a change cut short by the kill may have left: nothing of it, or all of it; a create
    by a write may have left the item empty (the create commits before the close)."""
    candidates = [state, applied(state, words)]
    if words[0] == "write" and words[1] not in state:
        candidates.append(dict(state, **{words[1]: ""}))
    return candidates


failures = 0
now = {}
for log_path in logs:
    writer = os.path.basename(log_path).split(".")[0].split("-")[-1]
    key = "w" + writer
    entries = []  # (kind, time, words)
    for line in open(log_path):
        parts = line.split()
        if len(parts) < 3 or parts[0] not in ("attempt", "done"):
            continue  # a line cut short by the kill
        entries.append((parts[0], float(parts[1]), parts[2:]))
    # The changes in order, each with when it was acknowledged (None: in flight).
    changes = []
    for kind, when, words in entries:
        if kind == "attempt":
            changes.append([words, None])
        elif changes and changes[-1][0] == words:
            changes[-1][1] = when
    start = previous.get(key, {})
    try:
        actual = read_state(os.path.join(mountpoint, key))
    except OSError as error:
        print("FAIL %s: unreadable (%s)" % (key, error))
        failures += 1
        continue
    now[key] = actual
    prefixes = [start]
    for words, _ in changes:
        prefixes.append(applied(prefixes[-1], words) if words[0] != "rename" or words[1] in prefixes[-1] else prefixes[-1])
    if window is None:
        acknowledged = sum(1 for _, when in changes if when is not None)
        candidates = [prefixes[acknowledged]]
        if acknowledged < len(changes):
            candidates = in_flight_states(prefixes[acknowledged], changes[acknowledged][0])
        if actual not in candidates:
            lost = [" ".join(w[:2]) for w, when in changes if when is not None][-3:]
            print("FAIL %s: holds what no acknowledged sequence of changes made (last acknowledged: %s)" % (key, lost))
            failures += 1
    else:
        must = 0
        for index, (words, when) in enumerate(changes):
            if when is not None and (words[0] == "write" or when < killed_at - window):
                must = index + 1
        matches = [n for n in range(must, len(prefixes)) if prefixes[n] == actual]
        kept = [n for n in range(len(prefixes)) if prefixes[n] == actual]
        print("%s: %d changes, the first %d must stay; the state is the one after %s" % (key, len(changes), must, kept[-1:] or "none"))
        if not matches and not (must < len(changes) and actual in in_flight_states(prefixes[-2], changes[-1][0])
                                and changes[-1][1] is None):
            print("FAIL %s: holds no state after %d or more of its %d changes (the first %d were acknowledged more than %.3f s before the power went, or by a later close)"
                  % (key, must, len(changes), must, window))
            failures += 1
json.dump(now, open(state_path, "w"))
print("checked %d dictionaries, %d failures" % (len(now), failures))
sys.exit(1 if failures else 0)
