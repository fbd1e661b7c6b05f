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
 * Where cgroup v2 offers no pids or memory controller (a hybrid or legacy host, whose
 * controllers are mounted as cgroup v1 hierarchies) and pimd may write to its own cgroup in the
 * v1 pids, memory and freezer hierarchies (as root, without ProtectControlGroups=), each job also
 * gets a cgroup there, P/pimd-<pid>-<start>/job-<id> below pimd's cgroup P in each hierarchy:
 * pids.max, memory.limit_in_bytes (and memory.memsw.limit_in_bytes) with the OOM killer on; at
 * the end it is frozen, each process of cgroup.procs killed until none is left, and removed.
 * The owner directory is named for pimd's process (pid and start time), so that a later pimd
 * removes what one that died left, and leaves the jobs of another one that runs alone.
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

/* Controllers a job cgroup may be limited by (bits); the freezer only as a cgroup v1 one. */
#define CGROUP_PIDS 1u
#define CGROUP_MEMORY 2u
#define CGROUP_FREEZER 4u

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
/* The same for the cgroup v1 hierarchy of a controller ("pids"): its line "N:a,b:/path" of
 * /proc/self/cgroup, and the "cgroup" mount with that controller among its super options. */
int cgroup_parse_self_v1(const char *text, const char *controller, char *path, size_t len);
int cgroup_parse_mountinfo_v1(const char *text, const char *controller, const char *path,
			      char *dir, size_t len);
/* Field 22 (starttime) of the text of /proc/<pid>/stat; -EINVAL when it is not there. */
int cgroup_parse_starttime(const char *stat, uint64_t *start);
/* An owner directory's name "pimd-<pid>-<start>"; -EINVAL for any other name. */
int cgroup_parse_owner(const char *name, pid_t *pid, uint64_t *start);
/* The cgroup v1 controllers to use (bits) given whether cgroup v2 is used with v2_controllers
 * and the v1 hierarchies pimd may write to: pids and memory where cgroup v2 does not give
 * them, and the freezer with them where there is no cgroup v2 to kill the job. */
unsigned cgroup_v1_choose(bool v2_used, unsigned v2_controllers, unsigned v1_available);

/*
 * The delegated subtree of the calling process.  CGROUP_MODE_NO: 0 with *out NULL.  Otherwise
 * the cgroup D is found as above, and D is used when it is not the root cgroup, D, its
 * cgroup.procs and cgroup.subtree_control are writable and (CGROUP_MODE_AUTO only) it is
 * delegated: the directory belongs to pimd's euid when that is not root (systemd gives it to
 * User= with Delegate=), or it carries systemd's trusted.delegate or user.delegate attribute.
 * Then pimd moves into D/main, the pids and memory controllers that D offers are enabled for
 * its children, and job directories a previous pimd left are killed and removed.
 * When D is not used: CGROUP_MODE_AUTO goes on without it, CGROUP_MODE_YES returns the error.
 * Then (both) the cgroup v1 hierarchies that cgroup_v1_choose picks are added where pimd can
 * make its owner directory in them, and stale owner directories are removed.  With neither:
 * 0 with *out NULL, and why says why in plain words.
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
/* CGROUP_PIDS | CGROUP_MEMORY that limit a job, from cgroup v2 or v1 */
unsigned cgroup_tree_controllers(const struct cgroup_tree *t);
unsigned cgroup_tree_v1_controllers(const struct cgroup_tree *t); /* the v1 ones, freezer too */
bool cgroup_tree_has_kill(const struct cgroup_tree *t);        /* cgroup.kill (Linux 5.14) */
/* "a cgroup per job under /system.slice/pimd.service (pids.max, memory.max; cgroup.kill)",
 * "cgroup v1 pids+memory per job under pids:/pimd-1-2, memory:/pimd-1-2 (...)" */
void cgroup_tree_describe(const struct cgroup_tree *t, char *buf, size_t len);

/* Removes the directories of ended jobs whose processes have died since; how many still wait. */
unsigned cgroup_tree_sweep(struct cgroup_tree *t);

/* A job's limits; 0: none.  pids.max counts processes and threads; memory.max takes memory.
 * swap.max 0 and memory.oom.group 1 with it (the whole job is killed when one process is).
 * In cgroup v1: memory.limit_in_bytes, memory.memsw.limit_in_bytes alike, memory.oom_control 0
 * (the OOM killer ends the largest process of the job; the job's end kills the rest). */
struct cgroup_limits {
	uint64_t pids_max;
	uint64_t memory_max;
};

/* Creates D/job-<id> (and job-<id> in each v1 hierarchy) with the limits whose controllers
 * are enabled (the others are ignored: cgroup_tree_controllers says which hold). -EBUSY when it
 * exists and cannot be emptied. */
int cgroup_job_new(struct cgroup_tree *t, uint64_t id, const struct cgroup_limits *lim,
		   struct cgroup_job **out, struct pim_error *err);
/* Moves the calling process into the job's cgroups: "0" written to the cgroup.procs that
 * cgroup_job_new opened (close-on-exec); only write(2), so a forked child may call it. */
int cgroup_job_enter(const struct cgroup_job *j);
const char *cgroup_job_name(const struct cgroup_job *j); /* "job-<id>" */

/* SIGKILL to every process in the job: cgroup.kill, or where the kernel has none, the
 * cgroup frozen and each process of cgroup.procs killed until none is left; the same in the
 * cgroup v1 hierarchies (frozen with the v1 freezer where it is used). */
int cgroup_job_kill(struct cgroup_job *j);
/* The fallback alone (exposed for the tests). */
int cgroup_job_kill_each(struct cgroup_job *j);
/* Whether any process is left in it (cgroup.events "populated"; in cgroup v1 only, anyone in
 * cgroup.procs); negative errno on failure. */
int cgroup_job_populated(const struct cgroup_job *j);

/* What the kernel did to the job: forks refused at pids.max, processes killed at memory.max. */
struct cgroup_job_events {
	uint64_t pids_max_hits;  /* pids.events "max" */
	uint64_t oom_kills;      /* memory.events "oom_kill" (v1: memory.oom_control) */
	const char *memory_file; /* the limit: "memory.max" or "memory.limit_in_bytes" */
};
void cgroup_job_events(const struct cgroup_job *j, struct cgroup_job_events *ev);

/* Kills what is left and removes the directory, now or (while processes are still dying)
 * in a later cgroup_tree_sweep; frees j. */
void cgroup_job_end(struct cgroup_job *j);

#endif
