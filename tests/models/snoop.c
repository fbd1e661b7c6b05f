/* SPDX-License-Identifier: MIT */
/*
 * snoop: looks for a marker in its own memory and environment, as a model run for one user
 * could look for another user's data left in the worker. The marker is stored here XOR 0x5a, so
 * that the library itself does not contain it; the test program holds it in its memory and
 * environment. Regions entered:
 *   0  always
 *   1  the marker is in readable memory (/proc/self/mem, every readable mapping of up to 1 GiB)
 *   2  the marker is in the environment
 *   3  the scanner works: it found a copy placed on purpose in the heap
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pim_hooks.h"

extern char **environ;

static const unsigned char hidden[] = { /* "pimd-isolation-marker-7f3c" ^ 0x5a */
	0x2a, 0x33, 0x37, 0x3e, 0x77, 0x33, 0x29, 0x35, 0x36, 0x3b, 0x2e, 0x33, 0x35,
	0x34, 0x77, 0x37, 0x3b, 0x28, 0x31, 0x3f, 0x28, 0x77, 0x6d, 0x3c, 0x69, 0x39,
};

#define CHUNK (1u << 20)

/* Scans every readable mapping but [skip_lo, skip_hi) for marker[0..len). */
static int scan_memory(const char *marker, size_t len, uintptr_t skip_lo, uintptr_t skip_hi,
		       char *buf, int *self_test_hit, uintptr_t planted)
{
	FILE *maps = fopen("/proc/self/maps", "re");
	int mem = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	if (!maps || mem < 0)
		return -1;
	char line[512];
	int found = 0;
	while (fgets(line, sizeof line, maps)) {
		unsigned long lo, hi;
		char perms[8];
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[0] != 'r')
			continue;
		if (strstr(line, "[vvar]") || strstr(line, "[vsyscall]"))
			continue;
		/* reservations of a terabyte (AddressSanitizer's shadow) hold no copied data */
		if (hi - lo > (1ul << 30))
			continue;
		for (unsigned long at = lo; at < hi; at += CHUNK - len) {
			size_t want = hi - at < CHUNK ? hi - at : CHUNK;
			ssize_t n = pread(mem, buf, want, (off_t)at);
			if (n <= 0)
				break;
			for (char *p = buf; (p = memmem(p, (size_t)n - (size_t)(p - buf), marker, len));
			     p++) {
				uintptr_t addr = at + (uintptr_t)(p - buf);
				if (addr >= skip_lo && addr < skip_hi)
					continue;
				if (addr == planted)
					*self_test_hit = 1;
				else
					found = 1;
			}
			if (want < CHUNK)
				break;
		}
	}
	fclose(maps);
	close(mem);
	return found;
}

int pim_model_entry(void *const *args, size_t n_args)
{
	(void)args;
	(void)n_args;
	size_t len = sizeof hidden;
	/* the decoded marker and the read buffer live in one mapping the scan skips */
	size_t area = CHUNK + 4096;
	char *base = mmap(NULL, area, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		return 20;
	char *marker = base + CHUNK;
	for (size_t i = 0; i < len; i++)
		marker[i] = (char)(hidden[i] ^ 0x5a);
	char *planted = malloc(len + 1); /* the self-test copy, outside the skipped mapping */
	if (!planted)
		return 21;
	memcpy(planted, marker, len);
	planted[len] = 0;

	int self_test = 0;
	int in_memory = scan_memory(marker, len, (uintptr_t)base, (uintptr_t)base + area, base,
				    &self_test, (uintptr_t)planted);
	if (in_memory < 0)
		return 22;
	int in_env = 0;
	for (char **e = environ; e && *e; e++)
		if (memmem(*e, strlen(*e), marker, len))
			in_env = 1;

	pim_region_enter(0);
	pim_region_exit(0);
	if (in_memory) {
		pim_region_enter(1);
		pim_region_exit(1);
	}
	if (in_env) {
		pim_region_enter(2);
		pim_region_exit(2);
	}
	if (self_test) {
		pim_region_enter(3);
		pim_region_exit(3);
	}
	memset(planted, 0, len);
	free(planted);
	munmap(base, area);
	return 0;
}
