"""Reads ITEM through the control socket of the user's one mount, as `keychainfs exec` does,
after waiting for a line on standard input. Usage: read_through_socket.py ITEM. Prints the
daemon's whole reply."""
import glob, os, socket, sys
from shared_socket import whole_reply

sys.stdin.readline()
item = sys.argv[1].encode()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(glob.glob(os.environ["XDG_RUNTIME_DIR"] + "/keychainfs/*.sock")[0])
s.sendall(b"read %d\n" % len(item) + item)
sys.stdout.write(whole_reply(s))
