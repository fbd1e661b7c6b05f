/* SPDX-License-Identifier: MIT */
/*
 * niceness: reports the nice value it runs at through the region it enters: region N for nice
 * value N (0 to 19).  A nice value below 0 enters nothing and returns 22 (whoami's code for it).
 */
#include <errno.h>
#include <sys/resource.h>

#include "pim_hooks.h"

int pim_model_entry(void *const *args, size_t n_args)
{
	(void)args;
	(void)n_args;
	errno = 0;
	int n = getpriority(PRIO_PROCESS, 0);
	if (errno || n < 0)
		return 22;
	pim_region_enter(n);
	pim_region_exit(n);
	return 0;
}
