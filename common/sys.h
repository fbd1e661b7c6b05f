/* SPDX-License-Identifier: MIT */
/*
 * sys.h: the two operating-system helpers every program shares, kept apart from util.c so that
 * util stays pure (no file, socket, clock or environment; make check-purity).
 */
#ifndef PIMD_SYS_H
#define PIMD_SYS_H

#include "util.h"

/*
 * Reads a whole regular file of at most max bytes into a NUL-terminated buffer (caller frees).
 * Errors name the path: -ENOENT and other open errors, -EINVAL not a regular file, -EFBIG
 * larger than max, -ENOMEM.
 */
int read_file(const char *path, size_t max, char **out, size_t *len, struct pim_error *err);

/* Monotonic clock in nanoseconds. */
uint64_t now_ns(void);

#endif
