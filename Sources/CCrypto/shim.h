#ifndef KEYCHAINFS_CCRYPTO_SHIM_H
#define KEYCHAINFS_CCRYPTO_SHIM_H
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/dh.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/param_build.h>
#include <openssl/rand.h>

/* The key-selection macros are built from other macros by |, which Swift does not import. */
static inline int ccrypto_select_domain_parameters(void) { return EVP_PKEY_KEY_PARAMETERS; }
static inline int ccrypto_select_public_key(void) { return EVP_PKEY_PUBLIC_KEY; }

/* OpenSSL keeps the key names of OSSL_PARAMs as pointers, used after the call that took them;
   a Swift String passed as a C string lives only for that call, so the names come from here. */
static inline const char *ccrypto_param_ffc_p(void) { return OSSL_PKEY_PARAM_FFC_P; }
static inline const char *ccrypto_param_ffc_g(void) { return OSSL_PKEY_PARAM_FFC_G; }
static inline const char *ccrypto_param_pub_key(void) { return OSSL_PKEY_PARAM_PUB_KEY; }
static inline const char *ccrypto_param_kdf_digest(void) { return OSSL_KDF_PARAM_DIGEST; }
static inline const char *ccrypto_param_kdf_key(void) { return OSSL_KDF_PARAM_KEY; }
#endif
