#ifndef KEYCHAINFS_CLINUX_SHIM_H
#define KEYCHAINFS_CLINUX_SHIM_H
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/file.h>
#include <termios.h>
#include <unistd.h>
#include <linux/fs.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <string.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/xattr.h>
#include <sys/auxv.h>
#include <poll.h>
#include <linux/fuse.h>
#include <sys/eventfd.h>
#include <sys/epoll.h>

/* fcntl.h defines the open file description locks only under _GNU_SOURCE. */
#ifndef F_OFD_GETLK
#define F_OFD_GETLK 36
#define F_OFD_SETLK 37
#endif

/* Linux 6.6; older kernel headers lack it (bit 36: flags2's bit 4 in INIT). */
#ifndef FUSE_DIRECT_IO_ALLOW_MMAP
#define FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#endif

/* FUSE over io_uring (Linux 6.14, protocol 7.42): the kernel's uapi (include/uapi/linux/fuse.h),
   missing from older kernel headers. INIT's flags2 bit 9 asks for it; then each ring entry is
   registered with an IORING_OP_URING_CMD whose 80-byte command area holds fuse_uring_cmd_req,
   and whose addr points to two iovecs: the headers below, then the payload. */
#ifndef FUSE_OVER_IO_URING
#define FUSE_OVER_IO_URING (1ULL << 41)

struct fuse_uring_ent_in_out {
    uint64_t flags;
    /* The request's unique id as the kernel hands it; echoed back to commit its answer. */
    uint64_t commit_id;
    /* Bytes of the payload buffer in use (the request's arguments, or the answer's). */
    uint32_t payload_sz;
    uint32_t padding;
    uint64_t reserved;
};

/* The first iovec of an entry. */
struct fuse_uring_req_header {
    /* fuse_in_header from the kernel, fuse_out_header to it. */
    char in_out[128];
    /* The operation's own header (fuse_write_in, ...): the request's first argument. */
    char op_in[128];
    struct fuse_uring_ent_in_out ring_ent_in_out;
};

enum fuse_uring_cmd {
    FUSE_IO_URING_CMD_INVALID = 0,
    FUSE_IO_URING_CMD_REGISTER = 1,
    FUSE_IO_URING_CMD_COMMIT_AND_FETCH = 2,
};

/* In the SQE's command area (IORING_SETUP_SQE128). */
struct fuse_uring_cmd_req {
    uint64_t flags;
    uint64_t commit_id;
    uint16_t qid;
    uint8_t padding[6];
};
#endif

/* pidfd_open(2): glibc's wrapper is declared only under _GNU_SOURCE. PIDFD_THREAD (Linux 6.9)
   lets a pidfd name a thread, as FUSE requests do (they carry a thread's id). */
static inline int clinux_pidfd_open(pid_t pid, int thread) {
    return (int)syscall(SYS_pidfd_open, pid, thread ? O_EXCL : 0);
}

/* posix_spawn_file_actions_addclosefrom_np (glibc 2.34) is declared only under _GNU_SOURCE. */
#include <spawn.h>
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *, int);
static inline int clinux_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest) {
    return posix_spawn_file_actions_addclosefrom_np(actions, lowest);
}

/* SO_PASSPIDFD and SCM_PIDFD (Linux 6.5) are missing from older headers. */
#ifndef SO_PASSPIDFD
#define SO_PASSPIDFD 76
#endif
#ifndef SCM_CREDENTIALS
#define SCM_CREDENTIALS 0x02
#endif
#ifndef SCM_PIDFD
#define SCM_PIDFD 0x04
#endif
static inline int clinux_so_passpidfd(void) { return SO_PASSPIDFD; }
static inline int clinux_so_passcred(void) { return SO_PASSCRED; }

/* recvmsg with room for one SCM_CREDENTIALS and one SCM_PIDFD message: the CMSG_* macros and
   struct ucred (hidden behind _GNU_SOURCE) are out of Swift's reach. *pidfd is -1 when the
   kernel sent none; *pid is 0 when no credentials came. */
static inline ssize_t clinux_recv_with_sender(int fd, void *buffer, size_t length,
                                              pid_t *pid, uid_t *uid, gid_t *gid, int *pidfd) {
    struct iovec iov = { buffer, length };
    union { char bytes[CMSG_SPACE(sizeof(struct { pid_t p; uid_t u; gid_t g; })) + CMSG_SPACE(sizeof(int))];
            struct cmsghdr align; } control;
    struct msghdr message = { 0 };
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    message.msg_control = control.bytes;
    message.msg_controllen = sizeof control.bytes;
    *pid = 0; *pidfd = -1;
    ssize_t count = recvmsg(fd, &message, MSG_CMSG_CLOEXEC);
    if (count < 0) return count;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&message); c != NULL; c = CMSG_NXTHDR(&message, c)) {
        if (c->cmsg_level != SOL_SOCKET) continue;
        if (c->cmsg_type == SCM_CREDENTIALS) {
            struct { pid_t p; uid_t u; gid_t g; } credentials;
            memcpy(&credentials, CMSG_DATA(c), sizeof credentials);
            *pid = credentials.p; *uid = credentials.u; *gid = credentials.g;
        } else if (c->cmsg_type == SCM_PIDFD) {
            memcpy(pidfd, CMSG_DATA(c), sizeof(int));
        }
    }
    return count;
}

/* prctl is variadic, which Swift cannot call. */
static inline int clinux_set_dumpable(int dumpable) {
    return prctl(PR_SET_DUMPABLE, (unsigned long)dumpable, 0UL, 0UL, 0UL);
}
static inline int clinux_get_dumpable(void) {
    return prctl(PR_GET_DUMPABLE, 0UL, 0UL, 0UL, 0UL);
}
/* AT_SECURE: the kernel ran this program setuid, setgid or with capabilities. */
static inline int clinux_secure_execution(void) {
    return getauxval(AT_SECURE) != 0;
}

/* The daemon is started as /proc/self/exe, which the kernel names it ("exe") in ps and in
   what the bus daemon reports of it; prctl is variadic. */
static inline int clinux_set_process_name(const char *name) {
    return prctl(PR_SET_NAME, (unsigned long)name, 0UL, 0UL, 0UL);
}

/* struct ucred is hidden behind _GNU_SOURCE; this reads SO_PEERCRED without it. */
static inline int clinux_peer_uid(int fd, uid_t *uid) {
    struct { pid_t pid; uid_t uid; gid_t gid; } credentials;
    socklen_t length = sizeof credentials;
    int rc = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length);
    if (rc == 0) *uid = credentials.uid;
    return rc;
}

/* The whole of SO_PEERCRED: the peer's process, user and group at connect time. */
static inline int clinux_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid) {
    struct { pid_t pid; uid_t uid; gid_t gid; } credentials;
    socklen_t length = sizeof credentials;
    int rc = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length);
    if (rc == 0) { *pid = credentials.pid; *uid = credentials.uid; *gid = credentials.gid; }
    return rc;
}

/* cachestat(2) (Linux 6.5) has no glibc wrapper; tests use it to see what the page cache holds. */
static inline long clinux_cached_pages(int fd) {
    struct { unsigned long long off, len; } range = { 0, 0 };
    unsigned long long stat[5] = { 0, 0, 0, 0, 0 };
    long rc = syscall(451, fd, &range, stat, 0);
    return rc < 0 ? rc : (long)stat[0];
}

/* glibc declares renameat2 only under _GNU_SOURCE; the raw syscall needs variadic syscall(). */
static inline int clinux_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
                                   unsigned int flags) {
    return (int)syscall(SYS_renameat2, olddirfd, oldpath, newdirfd, newpath, flags);
}
/* mkostemp is declared only under _GNU_SOURCE; a temporary made without O_CLOEXEC would leak
   into a program another thread starts before the flag could be set. */
extern int mkostemp(char *template_, int flags);
static inline int clinux_mkostemp(char *template_, int flags) { return mkostemp(template_, flags); }

#endif
