"""Connect, then exec, on the control socket: a child connects and execs the admitted program
(which waits on a pipe), and this process, which no rule admits, writes the request on the
shared socket. Usage: connect_then_exec.py ADMITTED ITEM. Prints the daemon's whole reply."""
import glob, os, socket, sys

admitted, item = sys.argv[1], sys.argv[2].encode()
path = glob.glob(os.environ["XDG_RUNTIME_DIR"] + "/keychainfs/*.sock")[0]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
hold_r, hold_w = os.pipe()
ready_r, ready_w = os.pipe()
child = os.fork()
if child == 0:
    s.connect(path)
    os.set_inheritable(s.fileno(), True)
    os.dup2(hold_r, 0)
    os.write(ready_w, b"c")
    os.execv(admitted, [admitted, "-c", "read line"])
os.read(ready_r, 1)
# Speak only once the child runs the admitted program: /proc names it as its executable.
while os.path.realpath("/proc/%d/exe" % child) != os.path.realpath(admitted):
    os.sched_yield()
s.sendall(b"read %d\n" % len(item) + item)
reply = b""
while True:  # the daemon closes the connection once it has answered
    chunk = s.recv(4096)
    if not chunk:
        break
    reply += chunk
sys.stdout.write(reply.decode(errors="replace"))
os.close(hold_w)
os.waitpid(child, 0)
