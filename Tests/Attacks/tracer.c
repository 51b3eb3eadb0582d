/* An attached debugger: PTRACE_SEIZE on PID (which keeps running), "attached" on standard
   output, then it stays attached until the tracee ends. Usage: tracer PID. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
int main(int argc, char **argv) {
    if (argc != 2) return 2;
    pid_t pid = (pid_t)atoi(argv[1]);
    if (ptrace(PTRACE_SEIZE, pid, 0, 0) != 0) { perror("PTRACE_SEIZE"); return 1; }
    printf("attached\n");
    fflush(stdout);
    int status;
    while (waitpid(pid, &status, __WALL) == pid && !WIFEXITED(status) && !WIFSIGNALED(status)) {
        ptrace(PTRACE_CONT, pid, 0, WIFSTOPPED(status) ? WSTOPSIG(status) : 0);
    }
    return 0;
}
