/* SPDX-License-Identifier: MIT */
/*
 * forkbomb: forks children that wait forever, until fork() fails or FORKS_MAX of them run (a
 * bound, so that a test without any process limit stays harmless), then enters region 0 when
 * fork() failed with EAGAIN (a process limit held it) and region 1 when it never failed.  The
 * children are left behind for the job's end to kill.
 */
#include <errno.h>
#include <unistd.h>

#include "pim_hooks.h"

#define FORKS_MAX 1000

int pim_model_entry(void *const *args, size_t n_args)
{
	(void)args;
	(void)n_args;
	int failed = 0;
	for (int i = 0; i < FORKS_MAX; i++) {
		pid_t pid = fork();
		if (pid == 0)
			for (;;)
				pause();
		if (pid < 0) {
			failed = errno;
			break;
		}
	}
	int region = failed == EAGAIN ? 0 : 1;
	if (failed && failed != EAGAIN)
		return 10;
	pim_region_enter(region);
	pim_region_exit(region);
	return 0;
}
