/* SPDX-License-Identifier: MIT */
/*
 * memhog: fills a memfd 1 MiB at a time, up to HOG_MAX.  The pages are in no mapping, so the
 * address-space limit (RLIMIT_AS) does not stop it; the memory limit of the job's cgroup
 * (memory.max, or memory.limit_in_bytes in cgroup v1) does: the kernel's OOM killer ends the
 * worker.  Region 7 (tests/models/fault.json) when it filled HOG_MAX (no limit held it); region
 * 0 when a write failed.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pim_hooks.h"

#define BLOCK (1u << 20)
#define HOG_MAX 1024u /* MiB: a bound, so that a test without a memory limit stays harmless */

int pim_model_entry(void *const *args, size_t n_args)
{
	(void)args;
	(void)n_args;
	static char block[BLOCK];
	memset(block, 0x5a, sizeof block);
	int fd = memfd_create("memhog", MFD_CLOEXEC);
	if (fd < 0)
		return 10;
	unsigned mib = 0;
	while (mib < HOG_MAX && write(fd, block, sizeof block) == (ssize_t)sizeof block)
		mib++;
	int region = mib == HOG_MAX ? 7 : 0;
	pim_region_enter(region);
	pim_region_exit(region);
	close(fd);
	return 0;
}
