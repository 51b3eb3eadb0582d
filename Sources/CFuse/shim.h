#ifndef KEYCHAINFS_CFUSE_SHIM_H
#define KEYCHAINFS_CFUSE_SHIM_H
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

/* fuse_session_new is a macro (3.17 turns it into a versioned symbol); Swift calls this instead. */
static inline struct fuse_session *cfuse_session_new(struct fuse_args *args,
                                                     const struct fuse_lowlevel_ops *ops,
                                                     size_t ops_size, void *userdata) {
    return fuse_session_new(args, ops, ops_size, userdata);
}

/* FUSE_ARGS_INIT is a macro. */
static inline struct fuse_args cfuse_args_init(int argc, char **argv) {
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    return args;
}
#endif
