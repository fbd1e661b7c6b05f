/* SPDX-License-Identifier: MIT */
/*
 * cloneparent: makes children with clone(CLONE_PARENT) in a loop, which would be siblings of the
 * worker and so children of pimd, each exiting at once (a zombie until pimd reaps it); one with
 * no exit signal at all, which only a wait with __WALL collects; and tries clone3 with
 * CLONE_PARENT.  Enters region 0 when every attempt was refused (the worker's seccomp filter),
 * region 7 when any child was made.  Uses the "fault" manifest (tests/models/fault.json).
 */
#define _GNU_SOURCE /* CLONE_PARENT */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pim_hooks.h"

#define CLONES_MAX 300

#ifndef SYS_clone3
#define SYS_clone3 435
#endif

/* struct clone_args of linux/sched.h, the fields clone3 reads first */
struct clone3_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

/* The child exits at once, with no C library code run in it. */
static long clone_parent(unsigned long exit_signal)
{
	long pid = syscall(SYS_clone, CLONE_PARENT | exit_signal, 0, 0, 0, 0);
	if (pid == 0)
		syscall(SYS_exit, 0);
	return pid;
}

int pim_model_entry(void *const *args, size_t n_args)
{
	(void)args;
	(void)n_args;
	int made = 0;
	for (int i = 0; i < CLONES_MAX; i++) {
		long pid = clone_parent(SIGCHLD);
		if (pid > 0)
			made++;
		else if (errno != EPERM)
			break; /* a process limit: enough of them */
	}
	if (clone_parent(0) > 0)
		made++;
	struct clone3_args ca = { .flags = CLONE_PARENT, .exit_signal = SIGCHLD };
	long pid = syscall(SYS_clone3, &ca, sizeof ca);
	if (pid == 0)
		syscall(SYS_exit, 0);
	if (pid > 0)
		made++;
	int region = made ? 7 : 0;
	pim_region_enter(region);
	pim_region_exit(region);
	return 0;
}
