#ifndef KEYCHAINFS_CSYSTEMD_SHIM_H
#define KEYCHAINFS_CSYSTEMD_SHIM_H
#include <systemd/sd-bus.h>
/* sd_notify for Type=notify units: READY=1 once the mount serves, STOPPING=1 at unmount. */
#include <systemd/sd-daemon.h>
/* sd_journal_stream_fd: the background daemon's stderr, so a crash's last words are kept. */
#include <systemd/sd-journal.h>
/* The loop that drives sd-bus is woken through an eventfd; Swift's Glibc module lacks it. */
#include <sys/eventfd.h>

/* An error reply needs an sd_bus_error on the stack (SD_BUS_ERROR_NULL is a macro); the
   message copies name and text, so nothing is left to free. The reply is returned unsent so
   the caller can mark it sensitive first. */
static inline int csystemd_new_method_error(sd_bus_message *call, sd_bus_message **reply,
                                            const char *name, const char *message) {
    sd_bus_error error = SD_BUS_ERROR_NULL;
    sd_bus_error_set_const(&error, name, message);
    return sd_bus_message_new_method_error(call, reply, &error);
}
#endif
