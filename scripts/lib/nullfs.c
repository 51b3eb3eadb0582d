/* The floor of the per-item rows (scripts/lib/row_costs.py): a libfuse file system that keeps
   names and nothing else, and answers every request of the rows (`mkdir d; echo > d/sN`, the
   same with an fsync, `ls -lR d`, `mv d/sN d/rN`) at once, mounted with KeychainFS's options
   (default_permissions, noatime, max_read=16384, direct I/O, 0.5 s entry and attribute
   timeouts, every listing with attributes), so that what it costs is the kernel's round trips
   alone. Directories made in the root, files in them; files read as 64 bytes; no content is
   kept. With BUSY_POLL_US, served by KeychainFS's loop (after each request, non-blocking reads
   for that long before sleeping in poll(2)) instead of libfuse's, which sleeps in read(2).
   With DELAY_US as well, each request is answered that long after it arrives (a busy wait): what
   a caller pays for a request that takes so long. */
#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_DIRECTORIES 64
#define SLOTS (1 << 17) /* a directory's name table: open addressing, far more slots than items */

struct entry {
    char *name; /* NULL: a renamed-away or never used place in the listing */
    fuse_ino_t inode;
};

struct directory {
    char *name;
    fuse_ino_t inode;
    struct entry *entries; /* in creation order: a listing's offsets are places in it */
    size_t count, capacity;
    long *slots; /* index into entries + 1; 0 empty, -1 removed */
};

static struct directory directories[MAX_DIRECTORIES];
static size_t directory_count = 0;
static fuse_ino_t next_inode = 2;

static int64_t delay_ns = 0;

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void take_delay(void) {
    if (delay_ns <= 0) return;
    int64_t start = now_ns();
    while (now_ns() - start < delay_ns) {}
}

static unsigned long hash(const char *name) {
    unsigned long h = 1469598103934665603UL;
    for (; *name; name++) h = (h ^ (unsigned char)*name) * 1099511628211UL;
    return h;
}

static struct directory *directory_of(fuse_ino_t inode) {
    for (size_t i = 0; i < directory_count; i++)
        if (directories[i].inode == inode) return &directories[i];
    return NULL;
}

/* The slot holding name, or the place to put it (*found says which). */
static size_t slot_of(struct directory *d, const char *name, int *found) {
    size_t place = SIZE_MAX;
    for (size_t s = hash(name) & (SLOTS - 1);; s = (s + 1) & (SLOTS - 1)) {
        long at = d->slots[s];
        if (at == 0) {
            *found = 0;
            return place == SIZE_MAX ? s : place;
        }
        if (at == -1) {
            if (place == SIZE_MAX) place = s;
        } else if (strcmp(d->entries[at - 1].name, name) == 0) {
            *found = 1;
            return s;
        }
    }
}

static fuse_ino_t add_name(struct directory *d, const char *name) {
    int found;
    size_t s = slot_of(d, name, &found);
    if (found) return d->entries[d->slots[s] - 1].inode;
    if (d->count == d->capacity) {
        d->capacity = d->capacity ? 2 * d->capacity : 1024;
        d->entries = realloc(d->entries, d->capacity * sizeof *d->entries);
        if (!d->entries) abort();
    }
    d->entries[d->count] = (struct entry){strdup(name), next_inode++};
    d->slots[s] = (long)++d->count;
    return d->entries[d->count - 1].inode;
}

static void attributes(fuse_ino_t inode, struct stat *st) {
    memset(st, 0, sizeof *st);
    st->st_ino = inode;
    st->st_uid = getuid();
    st->st_gid = getgid();
    if (inode == FUSE_ROOT_ID || directory_of(inode)) {
        st->st_mode = S_IFDIR | 0700;
        st->st_nlink = 2;
    } else {
        st->st_mode = S_IFREG | 0600;
        st->st_nlink = 1;
        st->st_size = 64;
    }
}

static struct fuse_entry_param entry_of(fuse_ino_t inode) {
    struct fuse_entry_param entry;
    memset(&entry, 0, sizeof entry);
    entry.ino = inode;
    entry.attr_timeout = 0.5;
    entry.entry_timeout = 0.5;
    attributes(inode, &entry.attr);
    return entry;
}

static void reply_entry(fuse_req_t req, fuse_ino_t inode) {
    struct fuse_entry_param entry = entry_of(inode);
    fuse_reply_entry(req, &entry);
}

static void null_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
    if (parent == FUSE_ROOT_ID) {
        for (size_t i = 0; i < directory_count; i++)
            if (strcmp(directories[i].name, name) == 0) return reply_entry(req, directories[i].inode);
    } else {
        struct directory *d = directory_of(parent);
        int found;
        if (d) {
            size_t s = slot_of(d, name, &found);
            if (found) return reply_entry(req, d->entries[d->slots[s] - 1].inode);
        }
    }
    fuse_reply_err(req, ENOENT);
}

static void null_getattr(fuse_req_t req, fuse_ino_t inode, struct fuse_file_info *fi) {
    (void)fi;
    struct stat st;
    attributes(inode, &st);
    fuse_reply_attr(req, &st, 0.5);
}

static void null_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode) {
    (void)mode;
    if (parent != FUSE_ROOT_ID) return (void)fuse_reply_err(req, EPERM);
    if (directory_count == MAX_DIRECTORIES) return (void)fuse_reply_err(req, ENOSPC);
    struct directory *d = &directories[directory_count++];
    *d = (struct directory){.name = strdup(name), .inode = next_inode++, .slots = calloc(SLOTS, sizeof(long))};
    if (!d->slots) abort();
    reply_entry(req, d->inode);
}

static void null_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
    (void)mode;
    struct directory *d = directory_of(parent);
    if (!d) return (void)fuse_reply_err(req, EPERM);
    struct fuse_entry_param entry = entry_of(add_name(d, name));
    fi->direct_io = 1;
    fuse_reply_create(req, &entry, fi);
}

static void null_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname,
                        unsigned int flags) {
    struct directory *d = directory_of(parent);
    int found, taken;
    if (!d || newparent != parent || flags) return (void)fuse_reply_err(req, EINVAL);
    size_t from = slot_of(d, name, &found);
    if (!found) return (void)fuse_reply_err(req, ENOENT);
    slot_of(d, newname, &taken);
    if (taken) return (void)fuse_reply_err(req, EEXIST); /* the rows never replace */
    long at = d->slots[from];
    d->slots[from] = -1;
    free(d->entries[at - 1].name);
    d->entries[at - 1].name = strdup(newname);
    d->slots[slot_of(d, newname, &found)] = at;
    fuse_reply_err(req, 0);
}

static void null_readdirplus(fuse_req_t req, fuse_ino_t inode, size_t size, off_t offset, struct fuse_file_info *fi) {
    (void)fi;
    struct directory *d = directory_of(inode);
    char *buffer = malloc(size);
    size_t used = 0;
    if (!buffer) return (void)fuse_reply_err(req, ENOMEM);
    for (size_t i = (size_t)offset; d && i < d->count; i++) {
        if (!d->entries[i].name) continue;
        struct fuse_entry_param entry = entry_of(d->entries[i].inode);
        size_t needed = fuse_add_direntry_plus(req, buffer + used, size - used, d->entries[i].name, &entry, (off_t)(i + 1));
        if (needed > size - used) break;
        used += needed;
    }
    fuse_reply_buf(req, buffer, used);
    free(buffer);
}

static void null_write(fuse_req_t req, fuse_ino_t inode, const char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)inode; (void)buf; (void)off; (void)fi;
    fuse_reply_write(req, size);
}

static void null_done(fuse_req_t req, fuse_ino_t inode, struct fuse_file_info *fi) {
    (void)inode; (void)fi;
    fuse_reply_err(req, 0);
}

static void null_opendir(fuse_req_t req, fuse_ino_t inode, struct fuse_file_info *fi) {
    (void)inode;
    fuse_reply_open(req, fi);
}

static void null_fsync(fuse_req_t req, fuse_ino_t inode, int datasync, struct fuse_file_info *fi) {
    (void)datasync;
    null_done(req, inode, fi);
}

static void null_getxattr(fuse_req_t req, fuse_ino_t inode, const char *name, size_t size) {
    (void)inode; (void)name; (void)size;
    fuse_reply_err(req, ENODATA);
}

/* max_read asked at mount must be asked again here (libfuse 3 checks they agree); every
   listing with attributes, as KeychainFS asks. */
static void null_init(void *userdata, struct fuse_conn_info *conn) {
    (void)userdata;
    conn->max_read = 16384;
    if (conn->capable & FUSE_CAP_READDIRPLUS) {
        conn->want |= FUSE_CAP_READDIRPLUS;
        conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
    }
}

static const struct fuse_lowlevel_ops operations = {
    .init = null_init,
    .lookup = null_lookup,
    .getattr = null_getattr,
    .mkdir = null_mkdir,
    .create = null_create,
    .rename = null_rename,
    .write = null_write,
    .flush = null_done,
    .release = null_done,
    .fsync = null_fsync,
    .opendir = null_opendir,
    .readdirplus = null_readdirplus,
    .releasedir = null_done,
    .getxattr = null_getxattr,
};

/* KeychainFS's /dev/fuse loop (FUSESession.runLoop), without its wiping. */
static int busy_polling_loop(struct fuse_session *session, int64_t busy_poll_ns) {
    struct fuse_buf buffer = {0};
    int fd = fuse_session_fd(session);
    int64_t idle_since = -1;
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) return 1;
    while (!fuse_session_exited(session)) {
        int received = fuse_session_receive_buf(session, &buffer);
        if (received == -EINTR) continue;
        if (received == -EAGAIN) {
            int64_t now = now_ns();
            if (idle_since < 0) idle_since = now;
            if (now - idle_since < busy_poll_ns) continue;
            struct pollfd ready = {.fd = fd, .events = POLLIN};
            poll(&ready, 1, -1);
            idle_since = -1;
            continue;
        }
        idle_since = -1;
        if (received <= 0) break;
        take_delay();
        fuse_session_process_buf(session, &buffer);
    }
    free(buffer.mem);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: nullfs MOUNTPOINT [BUSY_POLL_US [DELAY_US]] (in the foreground until unmounted)\n");
        return 2;
    }
    if (argc == 4) delay_ns = atoll(argv[3]) * 1000;
    char *options[] = {argv[0], "-o", "fsname=nullfs,default_permissions,noatime,max_read=16384", NULL};
    struct fuse_args args = FUSE_ARGS_INIT(3, options);
    struct fuse_session *session = fuse_session_new(&args, &operations, sizeof operations, NULL);
    if (!session || fuse_session_mount(session, argv[1]) != 0) return 1;
    int status = argc >= 3 ? busy_polling_loop(session, atoll(argv[2]) * 1000) : fuse_session_loop(session);
    fuse_session_unmount(session);
    fuse_session_destroy(session);
    return status ? 1 : 0;
}
