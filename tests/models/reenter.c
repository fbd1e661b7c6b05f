/* SPDX-License-Identifier: MIT */
/* reenter: enters region 7 twice without exiting it in between (a contract violation). */
#include "pim_hooks.h"

int pim_model_entry(void *const *args, size_t n_args)
{
	(void)args;
	(void)n_args;
	pim_region_enter(7);
	pim_region_enter(7);
	pim_region_exit(7);
	return 0;
}
