"""Connect, then exec: `connect_then_exec(path, admitted)` makes a child connect a Unix socket
to `path` and exec the admitted program, which waits on a pipe; it returns the socket, shared
with that child, once /proc names the admitted program as the child's executable, and a
function that lets the child end and reaps it."""
import os, socket


def connect_then_exec(path, admitted):
    shared = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    hold_r, hold_w = os.pipe()
    ready_r, ready_w = os.pipe()
    child = os.fork()
    if child == 0:
        shared.connect(path)
        os.set_inheritable(shared.fileno(), True)
        os.dup2(hold_r, 0)
        os.write(ready_w, b"c")
        os.execv(admitted, [admitted, "-c", "read line"])
    os.read(ready_r, 1)
    # Speak only once the child runs the admitted program: /proc names it as its executable.
    while os.path.realpath("/proc/%d/exe" % child) != os.path.realpath(admitted):
        os.sched_yield()

    def release():
        os.close(hold_w)
        os.waitpid(child, 0)

    return shared, release


def whole_reply(s):
    """Everything the daemon writes until it closes the connection (it does, once it answered)."""
    reply = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            return reply.decode(errors="replace")
        reply += chunk
