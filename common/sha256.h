/* SPDX-License-Identifier: MIT */
/*
 * sha256.h: SHA-256 (FIPS 180-4), for content hashes (a model's identity in the fleet
 * catalogue).  Pure: data in, digest out.
 */
#ifndef PIM_SHA256_H
#define PIM_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct sha256 {
	uint32_t h[8];
	uint64_t len;      /* bytes hashed so far */
	uint8_t buf[64];
	size_t n;          /* bytes in buf */
};

void sha256_init(struct sha256 *c);
void sha256_update(struct sha256 *c, const void *data, size_t len);
/* The digest as 64 lowercase hexadecimal digits and a NUL. */
void sha256_final_hex(struct sha256 *c, char out[65]);

#endif
