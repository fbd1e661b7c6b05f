/* SPDX-License-Identifier: MIT */
/*
 * compute: one compute-bound region (0) on a 4 KiB argument (512 doubles) that stays in L1:
 * 20,000 sweeps of an affine update, 10.24 M multiply-adds, a few ms like the streams.
 * Unique bytes: 4 KiB. Manifest: argument 0 = 4096 bytes (in and out).
 */
#include <stdint.h>

#include "pim_hooks.h"

#define COMPUTE_BYTES 4096u
#define SWEEPS 20000u

int pim_model_entry(void *const *args, size_t n_args)
{
	if (n_args < 1)
		return 1;
	double *x = args[0];

	pim_region_enter(0);
	for (unsigned s = 0; s < SWEEPS; s++)
		for (unsigned i = 0; i < COMPUTE_BYTES / sizeof(double); i++)
			x[i] = x[i] * 0.999 + 1.0;
	pim_region_exit(0);
	return 0;
}
