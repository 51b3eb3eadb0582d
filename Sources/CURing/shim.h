#ifndef KEYCHAINFS_CURING_SHIM_H
#define KEYCHAINFS_CURING_SHIM_H
/* liburing.h defines _GNU_SOURCE and _XOPEN_SOURCE for what it includes, and carries its own copy
   of linux/io_uring.h: the system's headers come first, as every other module sees them. */
#include <linux/io_uring.h>
#include <sys/select.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <signal.h>
#include <sched.h>
#include <errno.h>
#include <string.h>
#include <inttypes.h>
#include <time.h>
#include <fcntl.h>
#include <stdbool.h>
#include <liburing.h>

/* The SQE's command area is a flexible array member, out of Swift's reach. */
static inline void *curing_sqe_cmd(struct io_uring_sqe *sqe) { return sqe->cmd; }

/* cmd_op shares an anonymous union with off; set through its own name. */
static inline void curing_sqe_set_cmd_op(struct io_uring_sqe *sqe, __u32 op) { sqe->cmd_op = op; }
#endif
