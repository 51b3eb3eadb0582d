/* A descriptor taken from another process of the same user with pidfd_getfd(2), then read.
   Usage: takefd PID FD. Prints what it read, or "refused: ERRNO". */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc != 3) return 2;
    int pidfd = (int)syscall(SYS_pidfd_open, atoi(argv[1]), 0);
    if (pidfd < 0) { perror("pidfd_open"); return 3; }
    int fd = (int)syscall(SYS_pidfd_getfd, pidfd, atoi(argv[2]), 0);
    if (fd < 0) { printf("cannot take: %d\n", errno); return 4; }
    char buffer[256];
    ssize_t n = pread(fd, buffer, sizeof buffer, 0);
    if (n < 0) { printf("refused: %d\n", errno); return 1; }
    fwrite(buffer, 1, (size_t)n, stdout);
    return 0;
}
