#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <linux/prctl.h>

static unsigned long field(const char *stat, int wanted) {
    const char *p = strrchr(stat, ')') + 2; /* field 3 */
    for (int n = 3; n < wanted; n++) p = strchr(p, ' ') + 1;
    return strtoul(p, NULL, 10);
}

static void say(const char *text) { (void)!write(2, text, strlen(text)); }

int masquerade(const char *program, const char *file) {
    char self[4096], stat[4096], maps[65536], line[64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return 3;
    self[n] = 0;
    int exe = open(program, O_RDONLY | O_CLOEXEC);
    if (exe < 0) { say("cannot open the program\n"); return 3; }
    if (unshare(CLONE_NEWUSER) != 0) { say("unshare failed\n"); return 4; }
    int fd = open("/proc/self/stat", O_RDONLY);
    n = read(fd, stat, sizeof stat - 1); stat[n > 0 ? n : 0] = 0; close(fd);
    fd = open("/proc/self/maps", O_RDONLY);
    size_t total = 0;
    while ((n = read(fd, maps + total, sizeof maps - 1 - total)) > 0) total += n;
    maps[total] = 0; close(fd);
    struct prctl_mm_map map = {
        .start_code = field(stat, 26), .end_code = field(stat, 27), .start_stack = field(stat, 28),
        .start_data = field(stat, 45), .end_data = field(stat, 46), .start_brk = field(stat, 47),
        .brk = (unsigned long)sbrk(0), .arg_start = field(stat, 48), .arg_end = field(stat, 49),
        .env_start = field(stat, 50), .env_end = field(stat, 51), .auxv = NULL, .auxv_size = 0,
        .exe_fd = (unsigned)exe,
    };
    /* Unmap every mapping of our own binary; nothing of it runs after this. */
    for (char *l = maps; *l; ) {
        char *end = strchr(l, '\n');
        if (end) *end = 0;
        char *path = strchr(l, '/');
        if (path && strcmp(path, self) == 0) {
            unsigned long from = strtoul(l, NULL, 16), to = strtoul(strchr(l, '-') + 1, NULL, 16);
            munmap((void *)from, to - from);
        }
        if (!end) break;
        l = end + 1;
    }
    if (prctl(PR_SET_MM, PR_SET_MM_MAP, (unsigned long)&map, sizeof map, 0) != 0) {
        snprintf(line, sizeof line, "prctl failed: %d\n", errno);
        say(line);
        _exit(5);
    }
    char buffer[256];
    fd = open(file, O_RDONLY);
    n = fd < 0 ? -1 : read(fd, buffer, sizeof buffer);
    if (n < 0) {
        snprintf(line, sizeof line, "refused: %d\n", errno);
        (void)!write(1, line, strlen(line));
        _exit(1);
    }
    (void)!write(1, buffer, n);
    _exit(0);
}
