"""Connect, then exec, with a command line's request (`cmd item`, what `keychainfs get` sends
without a passphrase): a child connects and execs the admitted program, and this process,
which no rule admits, writes the request on the shared socket. Usage:
connect_then_exec_command.py ADMITTED DICTIONARY ITEM. Prints the daemon's whole reply."""
import glob, os, struct, sys
from shared_socket import connect_then_exec, whole_reply

admitted = sys.argv[1]
names = [name.encode() for name in sys.argv[2:]]
payload = struct.pack("<I", len(names)) + b"".join(struct.pack("<I", len(n)) + n for n in names)
s, release = connect_then_exec(glob.glob(os.environ["XDG_RUNTIME_DIR"] + "/keychainfs/*.sock")[0], admitted)
s.sendall(b"cmd item %d\n" % len(payload) + payload)
sys.stdout.write(whole_reply(s))
release()
