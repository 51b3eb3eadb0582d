#ifndef KEYCHAINFS_CPOSTGRES_SHIM_H
#define KEYCHAINFS_CPOSTGRES_SHIM_H
/* libpq's client API imports into Swift as it is; no wrappers are needed. */
#include <libpq-fe.h>
#endif
