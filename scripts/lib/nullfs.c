/* The floor of the create rows (scripts/lib/row_costs.py): a libfuse file system that keeps
   nothing and answers every request of `mkdir d; echo > d/sN` at once, mounted with
   KeychainFS's options (default_permissions, noatime, max_read=16384, direct I/O, 0.5 s entry
   and attribute timeouts), so that what it costs is the kernel's round trips alone. One
   directory (the last made; the ones before it are forgotten) and files that read as 64
   bytes; nothing is stored. */
#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char directory[256];
static fuse_ino_t directory_inode = 0;
static fuse_ino_t next_inode = 2;

static void attributes(fuse_ino_t inode, struct stat *st) {
    memset(st, 0, sizeof *st);
    st->st_ino = inode;
    st->st_uid = getuid();
    st->st_gid = getgid();
    if (inode == FUSE_ROOT_ID || inode == directory_inode) {
        st->st_mode = S_IFDIR | 0700;
        st->st_nlink = 2;
    } else {
        st->st_mode = S_IFREG | 0600;
        st->st_nlink = 1;
        st->st_size = 64;
    }
}

static void reply_entry(fuse_req_t req, fuse_ino_t inode, struct fuse_file_info *fi) {
    struct fuse_entry_param entry;
    memset(&entry, 0, sizeof entry);
    entry.ino = inode;
    entry.attr_timeout = 0.5;
    entry.entry_timeout = 0.5;
    attributes(inode, &entry.attr);
    if (fi) {
        fi->direct_io = 1;
        fuse_reply_create(req, &entry, fi);
    } else {
        fuse_reply_entry(req, &entry);
    }
}

static void null_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
    if (parent == FUSE_ROOT_ID && directory[0] && strcmp(name, directory) == 0) reply_entry(req, directory_inode, NULL);
    else fuse_reply_err(req, ENOENT);
}

static void null_getattr(fuse_req_t req, fuse_ino_t inode, struct fuse_file_info *fi) {
    (void)fi;
    struct stat st;
    attributes(inode, &st);
    fuse_reply_attr(req, &st, 0.5);
}

static void null_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode) {
    (void)parent; (void)mode;
    /* A new inode each time: the kernel takes a directory seen under two names for an error. */
    snprintf(directory, sizeof directory, "%s", name);
    directory_inode = next_inode++;
    reply_entry(req, directory_inode, NULL);
}

static void null_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
    (void)parent; (void)name; (void)mode;
    reply_entry(req, next_inode++, fi);
}

static void null_write(fuse_req_t req, fuse_ino_t inode, const char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)inode; (void)buf; (void)off; (void)fi;
    fuse_reply_write(req, size);
}

static void null_done(fuse_req_t req, fuse_ino_t inode, struct fuse_file_info *fi) {
    (void)inode; (void)fi;
    fuse_reply_err(req, 0);
}

static void null_getxattr(fuse_req_t req, fuse_ino_t inode, const char *name, size_t size) {
    (void)inode; (void)name; (void)size;
    fuse_reply_err(req, ENODATA);
}

/* max_read asked at mount must be asked again here (libfuse 3 checks they agree). */
static void null_init(void *userdata, struct fuse_conn_info *conn) {
    (void)userdata;
    conn->max_read = 16384;
}

static const struct fuse_lowlevel_ops operations = {
    .init = null_init,
    .lookup = null_lookup,
    .getattr = null_getattr,
    .mkdir = null_mkdir,
    .create = null_create,
    .write = null_write,
    .flush = null_done,
    .release = null_done,
    .getxattr = null_getxattr,
};

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: nullfs MOUNTPOINT (in the foreground until unmounted)\n");
        return 2;
    }
    char *options[] = {argv[0], "-o", "fsname=nullfs,default_permissions,noatime,max_read=16384", NULL};
    struct fuse_args args = FUSE_ARGS_INIT(3, options);
    struct fuse_session *session = fuse_session_new(&args, &operations, sizeof operations, NULL);
    if (!session || fuse_session_mount(session, argv[1]) != 0) return 1;
    int status = fuse_session_loop(session);
    fuse_session_unmount(session);
    fuse_session_destroy(session);
    return status ? 1 : 0;
}
