/* SPDX-License-Identifier: MIT */
/*
 * worker_int.h: what the code of the three processes of a profiling worker shares (not for
 * other modules): worker.c (the job and its wire format, both sides), worker_parent.c (pimd:
 * spawn, read, reap), worker_child.c (the forked child that contains the worker and executes
 * the helper) and worker_helper.c (pimd-worker, which runs the model).
 */
#ifndef PIMD_WORKER_INT_H
#define PIMD_WORKER_INT_H

#include "worker.h"

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif
#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif

#define REC_SIZE sizeof(struct worker_record)
#define OUT_BATCH 32                         /* records per write() (16 KiB) */
#define READ_BUDGET (1024 * REC_SIZE)         /* bytes worker_next() reads before it answers 0 */

enum {
	EXIT_FAILED = 2,     /* an ERROR record was sent */
	EXIT_PIPE = 3,       /* the result pipe broke */
};

/* What the child and the helper write to the result pipe, batched. */
struct out {
	int fd;
	unsigned n;
	uint64_t samples;
	struct worker_record rec[OUT_BATCH];
};

/* worker.c: the job, both sides */
bool worker_fd_open(int fd);
int worker_sorted_regions(const struct worker_job *job, int32_t **out, struct pim_error *err);
bool worker_region_known(const int32_t *sorted, size_t n, int32_t id);
bool worker_executable(const char *path);

/* worker_helper.c: records to the parent; a failure reported, and the end */
_Noreturn void worker_child_fail(struct out *o, int code, int32_t region, const char *fmt, ...)
	_printf_(4, 5);

/* worker_child.c: from fork to the helper */
_Noreturn void worker_child_main(const struct worker_job *job, int pipe_fd, int job_fd,
				 int helper_fd, const struct cgroup_job *cg, pid_t parent);

#endif
