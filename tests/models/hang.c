/* SPDX-License-Identifier: MIT */
/* hang: spins forever inside region 0 (wall-clock timeout or CPU limit). */
#include "pim_hooks.h"

int pim_model_entry(void *const *args, size_t n_args)
{
	(void)args;
	(void)n_args;
	pim_region_enter(0);
	for (;;)
		__asm__ volatile("" ::: "memory");
	pim_region_exit(0);
	return 0;
}
