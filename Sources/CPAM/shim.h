#ifndef KEYCHAINFS_CPAM_SHIM_H
#define KEYCHAINFS_CPAM_SHIM_H
#include <security/pam_modules.h>
#include <security/pam_ext.h>
#include <syslog.h>

/* pam_syslog is variadic, which Swift cannot call: one message, never a format. */
static inline void cpam_syslog(const pam_handle_t *pamh, int priority, const char *message) {
    pam_syslog(pamh, priority, "%s", message);
}

#endif
