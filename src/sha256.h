/*
 * sha256.h - SHA-256 (FIPS 180-4), streamed: the Hugging Face hub names
 * a large file by the SHA-256 of its bytes (the LFS oid), and a pulled
 * file is checked against it before it is given that name.
 */
#ifndef PARLEY_SHA256_H
#define PARLEY_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_LEN 32 /* bytes of a digest; its hex form is twice that */

struct sha256 {
	uint32_t h[8];   /* the chaining state */
	uint64_t n;      /* bytes hashed so far */
	uint8_t buf[64]; /* a block being filled */
	size_t blen;     /* bytes in buf */
};

/* Start a new hash in S. */
void sha256_init(struct sha256 *s);
/* Hash N more bytes at P. */
void sha256_update(struct sha256 *s, const void *p, size_t n);
/* The digest of everything hashed into OUT; S must be started again
   before it is used once more. */
void sha256_final(struct sha256 *s, uint8_t out[SHA256_LEN]);
/* DIGEST as 64 lowercase hex digits and a NUL into HEX. */
void sha256_hex(const uint8_t digest[SHA256_LEN], char hex[2 * SHA256_LEN + 1]);

#endif /* PARLEY_SHA256_H */
