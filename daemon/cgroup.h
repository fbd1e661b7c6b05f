/* SPDX-License-Identifier: MIT */
/*
 * cgroup.h: a cgroup v2 per profiling job (pimd(8), Containment), in the subtree that the service
 * manager delegated to pimd (systemd's Delegate=, doc/design.md §4.3).
 *
 * Layout, below pimd's own cgroup D (the directory /proc/self/cgroup names):
 *     D/main       pimd itself: a cgroup with controllers enabled for its children may hold no
 *                  process (the kernel's "no internal processes" rule), so pimd moves there;
 *     D/job-<id>   one per running job: the worker moves itself there before it executes
 *                  pimd-worker, so everything the model starts is born inside; pids.max and
 *                  memory.max where those controllers are delegated; cgroup.kill at the end.
 * A job's processes cannot leave it: moving a process needs write access to the cgroup.procs of
 * the common ancestor, D, which belongs to pimd.
 *
 * The module does not log: it returns errors with messages, and pimd says what it uses.
 */
#ifndef PIMD_CGROUP_H
#define PIMD_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util.h"

#define CGROUP_PATH_MAX 4096
#define CGROUP_PENDING_MAX 256   /* ended jobs whose directory waits for its last process */

enum cgroup_mode {
	CGROUP_MODE_AUTO, /* use D when it is delegated to pimd (see cgroup_tree_open) */
	CGROUP_MODE_YES,  /* use D, which the operator says is pimd's: refuse to start otherwise */
	CGROUP_MODE_NO,   /* process groups only */
};

/* Controllers a job cgroup may be limited by (bits). */
#define CGROUP_PIDS 1u
#define CGROUP_MEMORY 2u

struct cgroup_tree;
struct cgroup_job;

/*
 * Parsing, for cgroup_tree_open and the tests.
 * cgroup_parse_self: the cgroup v2 path ("0::/a/b") in the text of /proc/self/cgroup; -ENOENT
 * when there is none (a cgroup v1 only system).
 * cgroup_parse_mountinfo: the directory of the cgroup at path (as /proc/self/cgroup gives it)
 * from the text of /proc/self/mountinfo: the cgroup2 mount whose root is the longest prefix of
 * path; -ENOENT when no cgroup2 mount reaches it.  Octal escapes (\040) in mount points are
 * decoded.
 */
int cgroup_parse_self(const char *text, char *path, size_t len);
int cgroup_parse_mountinfo(const char *text, const char *path, char *dir, size_t len);

/*
 * The delegated subtree of the calling process.  CGROUP_MODE_NO: 0 with *out NULL.  Otherwise
 * the cgroup D is found as above, and D is used when it is not the root cgroup, D, its
 * cgroup.procs and cgroup.subtree_control are writable and (CGROUP_MODE_AUTO only) it is
 * delegated: the directory belongs to pimd's euid when that is not root (systemd gives it to
 * User= with Delegate=), or it carries systemd's trusted.delegate or user.delegate attribute.
 * Then pimd moves into D/main, the pids and memory controllers that D offers are enabled for
 * its children, and job directories a previous pimd left are killed and removed.
 * When D is not used: CGROUP_MODE_AUTO returns 0 with *out NULL and why says why in plain
 * words; CGROUP_MODE_YES returns the error.
 */
int cgroup_tree_open(enum cgroup_mode mode, struct cgroup_tree **out, char *why, size_t why_len,
		     struct pim_error *err);
/* The same on a given directory D (an absolute path), which must hold the caller (the tests). */
int cgroup_tree_open_dir(const char *dir, bool check_delegation, struct cgroup_tree **out,
			 struct pim_error *err);
/* Kills and removes every job cgroup left, waiting at most wait_ms for their processes to die;
 * the number of job directories that could not be removed. */
unsigned cgroup_tree_free(struct cgroup_tree *t, unsigned wait_ms);

const char *cgroup_tree_dir(const struct cgroup_tree *t);      /* D under the cgroup2 mount */
const char *cgroup_tree_path(const struct cgroup_tree *t);     /* D as /proc/self/cgroup says */
unsigned cgroup_tree_controllers(const struct cgroup_tree *t); /* CGROUP_PIDS | CGROUP_MEMORY */
bool cgroup_tree_has_kill(const struct cgroup_tree *t);        /* cgroup.kill (Linux 5.14) */
/* "cgroup v2 /system.slice/pimd.service: a cgroup per job (pids, memory; cgroup.kill)" */
void cgroup_tree_describe(const struct cgroup_tree *t, char *buf, size_t len);

/* Removes the directories of ended jobs whose processes have died since; how many still wait. */
unsigned cgroup_tree_sweep(struct cgroup_tree *t);

/* A job's limits; 0: none.  pids.max counts processes and threads; memory.max takes memory.
 * swap.max 0 and memory.oom.group 1 with it (the whole job is killed when one process is). */
struct cgroup_limits {
	uint64_t pids_max;
	uint64_t memory_max;
};

/* Creates D/job-<id> with the limits whose controllers are enabled (the others are ignored:
 * cgroup_tree_controllers says which hold). -EEXIST when it exists and cannot be emptied. */
int cgroup_job_new(struct cgroup_tree *t, uint64_t id, const struct cgroup_limits *lim,
		   struct cgroup_job **out, struct pim_error *err);
/* An O_WRONLY, close-on-exec descriptor of the job's cgroup.procs: the worker writes "0" to it
 * to move itself in. */
int cgroup_job_procs_fd(const struct cgroup_job *j);
const char *cgroup_job_name(const struct cgroup_job *j); /* "job-<id>" */

/* SIGKILL to every process in the job: cgroup.kill, or where the kernel has none, the
 * cgroup frozen and each process of cgroup.procs killed until none is left. */
int cgroup_job_kill(struct cgroup_job *j);
/* The fallback alone (exposed for the tests). */
int cgroup_job_kill_each(struct cgroup_job *j);
/* Whether any process is left in it (cgroup.events "populated"); negative errno on failure. */
int cgroup_job_populated(const struct cgroup_job *j);

/* What the kernel did to the job: forks refused at pids.max, processes killed at memory.max. */
struct cgroup_job_events {
	uint64_t pids_max_hits;  /* pids.events "max" */
	uint64_t oom_kills;      /* memory.events "oom_kill" */
};
void cgroup_job_events(const struct cgroup_job *j, struct cgroup_job_events *ev);

/* Kills what is left and removes the directory, now or (while processes are still dying)
 * in a later cgroup_tree_sweep; frees j. */
void cgroup_job_end(struct cgroup_job *j);

#endif
