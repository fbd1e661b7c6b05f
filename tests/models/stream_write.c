/* SPDX-License-Identifier: MIT */
/*
 * stream_write: one region (0) that writes a 64 MiB argument once (unique written bytes:
 * 64 MiB, nothing read). Manifest: argument 0 = 64 MiB (out).
 */
#include <stdint.h>

#include "pim_hooks.h"

#define STREAM_BYTES (64u << 20)

int pim_model_entry(void *const *args, size_t n_args)
{
	if (n_args < 1)
		return 1;
	uint64_t *out = args[0];

	pim_region_enter(0);
	for (size_t i = 0; i < STREAM_BYTES / 8; i++)
		out[i] = i;
	pim_region_exit(0);
	return 0;
}
