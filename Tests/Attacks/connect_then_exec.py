"""Connect, then exec, on the control socket: a child connects and execs the admitted program,
and this process, which no rule admits, writes the request on the shared socket. Usage:
connect_then_exec.py ADMITTED ITEM. Prints the daemon's whole reply."""
import glob, os, sys
from shared_socket import connect_then_exec, whole_reply

admitted, item = sys.argv[1], sys.argv[2].encode()
s, release = connect_then_exec(glob.glob(os.environ["XDG_RUNTIME_DIR"] + "/keychainfs/*.sock")[0], admitted)
s.sendall(b"read %d\n" % len(item) + item)
sys.stdout.write(whole_reply(s))
release()
