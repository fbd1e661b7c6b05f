/* SPDX-License-Identifier: MIT */
/*
 * stream_read: one region (0) that reads a 64 MiB argument once, summing it as 64-bit words
 * (unique read bytes: 64 MiB). Manifest: argument 0 = 64 MiB (in), argument 1 = 8 bytes (out).
 */
#include <stdint.h>

#include "pim_hooks.h"

#define STREAM_BYTES (64u << 20)

int pim_model_entry(void *const *args, size_t n_args)
{
	if (n_args < 2)
		return 1;
	const uint64_t *in = args[0];
	uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;

	pim_region_enter(0);
	for (size_t i = 0; i < STREAM_BYTES / 8; i += 4) {
		s0 += in[i];
		s1 += in[i + 1];
		s2 += in[i + 2];
		s3 += in[i + 3];
	}
	*(uint64_t *)args[1] = s0 + s1 + s2 + s3;
	pim_region_exit(0);
	return 0;
}
