/* SPDX-License-Identifier: MIT */
/*
 * hog: allocates 1 MiB blocks inside region 0 until malloc fails and, like most code, uses the
 * result unchecked: the NULL write kills it (SIGSEGV) at the address-space limit.
 */
#include <stdlib.h>

#include "pim_hooks.h"

#define BLOCK (1u << 20)

int pim_model_entry(void *const *args, size_t n_args)
{
	(void)args;
	(void)n_args;
	pim_region_enter(0);
	for (;;) {
		volatile char *p = malloc(BLOCK);
		p[0] = 1; /* unchecked */
	}
	pim_region_exit(0);
	return 0;
}
