/* SPDX-License-Identifier: MIT */
/*
 * three_regions: three nests in program order (regions 0, 1, 2) on a 1 MiB argument, then a
 * nested case: region 3 encloses region 4, which runs 4 times (trip 4).
 * Manifest: argument 0 = 1 MiB; regions 0..4.
 */
#include <stdint.h>

#include "pim_hooks.h"

#define BYTES (1u << 20)
#define TRIP 4

int pim_model_entry(void *const *args, size_t n_args)
{
	if (n_args < 1)
		return 1;
	uint32_t *a = args[0];
	const size_t n = BYTES / sizeof *a;
	uint32_t sum = 0;

	pim_region_enter(0); /* fill */
	for (size_t i = 0; i < n; i++)
		a[i] = (uint32_t)i;
	pim_region_exit(0);

	pim_region_enter(1); /* reduce */
	for (size_t i = 0; i < n; i++)
		sum += a[i];
	pim_region_exit(1);

	pim_region_enter(2); /* scale */
	for (size_t i = 0; i < n; i++)
		a[i] = a[i] * 3u + sum;
	pim_region_exit(2);

	pim_region_enter(3); /* outer loop around region 4 */
	for (int t = 0; t < TRIP; t++) {
		pim_region_enter(4);
		for (size_t i = 0; i < n; i += 16)
			a[i] += (uint32_t)t;
		pim_region_exit(4);
	}
	pim_region_exit(3);
	return 0;
}
