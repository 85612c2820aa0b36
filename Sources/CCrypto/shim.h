#ifndef VCACHE_CCRYPTO_SHIM_H
#define VCACHE_CCRYPTO_SHIM_H
/* The low-level SHA256_CTX (deprecated in OpenSSL 3, still in every build Debian ships) is used
   because its state can be read and set at chunk boundaries (SHA256Digest's chunk states); it
   runs the same code as EVP, the CPU's SHA extensions included. */
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/crypto.h>
#endif
