#ifndef KEYCHAINFS_CSODIUM_SHIM_H
#define KEYCHAINFS_CSODIUM_SHIM_H
#include <sodium.h>

/* Swift cannot place a buffer on the stack on request. Argon2's BLAKE2b leaves message words
   (the passphrase) in dead stack frames; this overwrites the stack below the caller. */
static inline void csodium_scrub_stack(void) {
    volatile unsigned char frame[32768];
    sodium_memzero((void *) frame, sizeof frame);
}
#endif
