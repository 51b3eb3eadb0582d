#ifndef KEYCHAINFS_CLINUX_SHIM_H
#define KEYCHAINFS_CLINUX_SHIM_H
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/file.h>
#include <termios.h>
#include <unistd.h>
#include <linux/fs.h>

/* prctl is variadic, which Swift cannot call. */
static inline int clinux_set_dumpable(int dumpable) {
    return prctl(PR_SET_DUMPABLE, (unsigned long)dumpable, 0UL, 0UL, 0UL);
}
static inline int clinux_get_dumpable(void) {
    return prctl(PR_GET_DUMPABLE, 0UL, 0UL, 0UL, 0UL);
}
#endif
