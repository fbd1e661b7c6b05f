/* SPDX-License-Identifier: MIT */
/* crash: writes through a NULL pointer inside region 0 (SIGSEGV). */
#include "pim_hooks.h"

int pim_model_entry(void *const *args, size_t n_args)
{
	(void)args;
	(void)n_args;
	pim_region_enter(0);
	*(volatile int *)(uintptr_t)0 = 1;
	pim_region_exit(0);
	return 0;
}
