/* SPDX-License-Identifier: MIT */
/*
 * forge: writes a bogus 512-byte record (type 99) straight into the worker's result pipe
 * (fd 3), as hostile model code could: the parent must reject it and kill the worker.
 */
#include <string.h>
#include <unistd.h>

#include "pim_hooks.h"

int pim_model_entry(void *const *args, size_t n_args)
{
	(void)args;
	(void)n_args;
	unsigned char rec[512];
	memset(rec, 0, sizeof rec);
	rec[0] = 99;
	if (write(3, rec, sizeof rec) != (ssize_t)sizeof rec)
		return 1;
	pause();
	return 0;
}
