#ifndef VCACHE_CCRYPTO_SHIM_H
#define VCACHE_CCRYPTO_SHIM_H
#include <openssl/evp.h>
#include <openssl/crypto.h>
#endif
