/* SPDX-License-Identifier: MIT */
/*
 * worker.h: the profiling worker (doc/design.md §4.2-4.4): one forked process per job that runs a model
 * library as the requesting user, contained, and streams per-region measurements back over a
 * pipe as fixed-size binary records.
 *
 * Parent side (pimd's event loop, never blocks):
 *     worker_job_init(&job); job.model_fd = fd; ...; worker_spawn(&job, &w, &err);
 *     epoll on worker_fd(w) (results) and worker_pidfd(w) (exit); on either:
 *         worker_next(w, &rec) for each record until it answers 0 (wait) or WORKER_EOF,
 *         then worker_reap(w, &st);
 *     on a timer: worker_check_timeout(w, now_ns());
 *     worker_free(w).
 *
 * Worker side, in two stages so that model code never runs in a copy of pimd's memory:
 *  - the forked child (pimd's image, no client code): setpgid, fds arranged (0 /dev/null, 1/2
 *    output, 3 result pipe, 4 model, 5 the job, 6 the helper executable, 7... counter groups),
 *    every other fd closed, perf groups opened (while CAP_PERFMON is still held),
 *    setgroups(0)/setresgid/setresuid to the job's ids, PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS,
 *    ambient, bounding (when permitted), permitted, effective and inheritable capabilities
 *    cleared; then execveat() of the helper pimd-worker with a fixed environment of its own;
 *  - pimd-worker (worker_helper_main(), a fresh image): the job decoded from fd 5 and validated
 *    again, rlimits (CPU, address space, core = 0, processes, files), a seccomp filter that
 *    keeps every process the model starts in the worker's process group (setsid and setpgid
 *    fail with EPERM), CPU pinned, model dlopen()ed through /proc/self/fd, arguments allocated
 *    and filled, warm-up runs, then K repetitions per event group (never multiplexed).
 * When the worker has exited, worker_next() kills its whole process group: nothing the model
 * started outlives the job.  With a cgroup tree (job->cgroup, cgroup.h) the forked child first
 * moves itself into the job's own cgroup, so that every process of the job is born there and
 * cannot leave; the job's end kills the cgroup as well as the process group, and removes it.
 *
 * The hooks pim_region_enter/exit (client/pim_hooks.h) are defined in worker_hooks.c and must be
 * exported from the executable that runs the model (pimd-worker; test programs that drive the
 * hook engine in process): -rdynamic, or
 * -Wl,--export-dynamic-symbol=pim_region_enter -Wl,--export-dynamic-symbol=pim_region_exit, so
 * that the model library resolves them there. libpimclient defines the decided-path versions
 * of the same symbols: an executable links one of the two. In profiling mode a boundary costs
 * a vDSO clock read, plus one read() of the group leader when a counter group is open.
 *
 * Records come from a process that runs client code: the model can write to the pipe too. The
 * parent validates every record (type, region, group, repetition, sizes) and kills a worker
 * that sends a malformed one; a model can still forge plausible numbers about itself.
 */
#ifndef PIMD_WORKER_H
#define PIMD_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgroup.h"
#include "counters.h"
#include "util.h"

#define WORKER_REGION_ID_MAX 1000000    /* region ids are 0..this (a lookup array is sized to it) */
#define WORKER_REGIONS_MAX 1000000u
#define WORKER_ARGS_MAX 4096u
#define WORKER_REPS_MAX 100000u
#define WORKER_WARMUPS_MAX 1000u
#define WORKER_GROUPS_MAX COUNTERS_MAX_EVENTS
#define WORKER_DEPTH_MAX 256u           /* regions open at once (nesting depth) */
#define WORKER_MESSAGE_MAX 448
#define WORKER_HELPER_NAME "pimd-worker"
#define WORKER_WIRE_MAX (16u << 20)     /* bytes of an encoded job (1e6 regions take 8 MB) */

/* The helper's descriptors (see above). */
enum {
	WORKER_FD_PIPE = 3,
	WORKER_FD_MODEL = 4,
	WORKER_FD_JOB = 5,
	WORKER_FD_HELPER = 6,
	WORKER_FD_COUNTERS = 7,
};

/* ------------------------------------------------------------------ the job */

enum worker_fill {
	WORKER_FILL_ZERO,   /* every argument byte written with 0 (pages really touched) */
	WORKER_FILL_RANDOM, /* xorshift64 bytes, fixed seed: reproducible */
};

/* One perf group of the event plan (events[0] leads). */
struct worker_group {
	const struct counters_event *events;
	unsigned n;
};

struct worker_job {
	int model_fd;             /* open fd of the model .so (SCM_RIGHTS); read by the child only */
	const uint64_t *arg_bytes; /* bytes of each ARGUMENT allocation, increasing allocation id */
	size_t n_args;
	const int32_t *regions;   /* every region id of the manifest (0..WORKER_REGION_ID_MAX) */
	size_t n_regions;
	const int32_t *measure;   /* the ids to measure (subset of regions); NULL: all */
	size_t n_measure;
	unsigned warmups;         /* unrecorded runs first (default 1) */
	unsigned reps;            /* K recorded repetitions per group (default 10) */
	uid_t uid;                /* credentials to run as (SO_PEERCRED); no supplementary groups */
	gid_t gid;
	int cpu;                  /* CPU to pin to; -1: no pinning (default) */
	int nice;                 /* the nice value the worker starts at (the model at this or 0,
				   * whichever is higher); default pimd's (priority_base): the
				   * thread that forks it may run lower (priority.h) */
	unsigned cpu_seconds;     /* RLIMIT_CPU; 0: none (default 60) */
	uint64_t as_bytes;        /* address space the model may add to the worker's own footprint
				   * (library, arguments, its allocations): RLIMIT_AS = footprint +
				   * as_bytes; 0: none (default 4 GiB) */
	unsigned timeout_ms;      /* wall clock, enforced by worker_check_timeout(); 0: none
				   * (default 120000) */
	const struct worker_group *groups; /* the event plan; n_groups 0: timing backend */
	unsigned n_groups;
	enum worker_fill fill;
	int output_fd;            /* the model's stdout/stderr; -1: /dev/null (default) */
	const char *reason;       /* why this backend (e.g. counters_probe's reason), for HELLO */
	uint64_t manifest_digest; /* manifest_digest() of the model; a library exporting
				   * PIM_MODEL_DIGEST with another value is refused; 0: no check */
	unsigned max_processes;   /* RLIMIT_NPROC (counts every process of the job's uid; not
				   * enforced for uid 0); 0: none (default 256) */
	unsigned max_files;       /* RLIMIT_NOFILE; 0: none (default 1024) */
	const char *helper;       /* path of pimd-worker; NULL: worker_helper_find() */
	int helper_fd;            /* an open descriptor of pimd-worker, used instead of helper
				   * (the caller keeps it: opened before it gives up a uid that can
				   * reach the file); -1: open helper (default) */
	struct cgroup_tree *cgroup; /* pimd's delegated subtree: the job runs in a cgroup of its
				   * own, job-<job_id>, with pids.max = max_processes and
				   * memory.max = as_bytes + WORKER_CGROUP_MEMORY_MARGIN, killed
				   * whole at the end; NULL: the process group only (default) */
	uint64_t job_id;
};

/* Room in memory.max for the helper itself, its counters and the page cache of the library. */
#define WORKER_CGROUP_MEMORY_MARGIN (UINT64_C(64) << 20)

/* Defaults as documented above; uid/gid are set to the caller's real ids. */
void worker_job_init(struct worker_job *job);
/* Checks every field against the bounds above; -EINVAL/-EBADF/-E2BIG with a message. */
int worker_job_validate(const struct worker_job *job, struct pim_error *err);

/* Where pimd-worker is: beside the running executable, else in ../libexec/pimd/ from it.
 * 0 with the path, or -ENOENT with a message naming both places. */
int worker_helper_find(char *path, size_t len, struct pim_error *err);

/* ------------------------------------------------------------------ the job on the wire
 * What the helper receives on fd 5: a fixed header, then arg_bytes, regions and measure. Only
 * the job travels: no pointer, no other memory of pimd. The HELLO reason is composed here. */

struct worker_wire {
	struct worker_job job;    /* its arrays point into this struct's allocations */
	uint64_t *arg_bytes;
	int32_t *regions;
	int32_t *measure;
	struct worker_group groups[WORKER_GROUPS_MAX]; /* sizes only: events are placeholders */
	char reason[WORKER_MESSAGE_MAX];
};

/* Encodes a valid job into a malloc'ed buffer (*len bytes). */
int worker_job_encode(const struct worker_job *job, void **buf, size_t *len,
		      struct pim_error *err);
/* Decodes and validates (worker_job_validate, with model_fd as the library) an encoded job;
 * -EBADMSG with a message when the bytes are not a job. Free with worker_wire_free(). */
int worker_job_decode(const void *buf, size_t len, int model_fd, struct worker_wire *out,
		      struct pim_error *err);
void worker_wire_free(struct worker_wire *w);

/* ------------------------------------------------------------------ records (child -> parent) */

enum worker_record_type {
	WORKER_REC_HELLO = 1, /* first: who runs, which backend */
	WORKER_REC_SAMPLE,    /* one region, one group, one repetition */
	WORKER_REC_PROGRESS,  /* after every repetition */
	WORKER_REC_ERROR,     /* the job fails (setup, model, contract violation, limit) */
	WORKER_REC_DONE,      /* last, on success only */
};

enum worker_backend {
	WORKER_BACKEND_TIMING = 1,   /* CLOCK_MONOTONIC only: no counter values at all */
	WORKER_BACKEND_COUNTERS = 2, /* perf groups, one per pass */
};

struct worker_hello {
	int32_t pid;
	uint32_t uid;      /* getuid()/getgid() after the switch, before the model runs */
	uint32_t gid;
	uint32_t backend;  /* enum worker_backend */
	uint32_t n_groups; /* passes (1 for timing) */
	uint32_t reps;
	uint32_t warmups;
	int32_t cpu;       /* pinned CPU, -1 when not pinned */
	char reason[WORKER_MESSAGE_MAX];
};

/* Sums over every execution of the region inside one repetition (a region inside an outer loop
 * executes trip times): T_host per execution = time_ns / executions. */
struct worker_sample {
	int32_t region;
	uint32_t group;        /* pass index into the job's groups; 0 for timing */
	uint32_t rep;          /* 0..reps-1 */
	uint32_t n_values;     /* events of the group; 0 for timing */
	uint64_t executions;
	uint64_t time_ns;      /* CLOCK_MONOTONIC, summed */
	uint64_t time_enabled; /* perf group times, summed deltas; 0 for timing */
	uint64_t time_running; /* < time_enabled: the group was multiplexed (flag, scale) */
	uint64_t value[COUNTERS_MAX_GROUP]; /* raw deltas, in the group's event order */
};

struct worker_progress {
	uint32_t group;
	uint32_t n_groups;
	uint32_t rep;          /* repetitions done in this group */
	uint32_t reps;
	uint64_t done;         /* repetitions done over all groups */
	uint64_t total;
};

struct worker_error {
	int32_t code;          /* negative errno: -ENOMEM limit, -EPROTO hook contract, ... */
	int32_t region;        /* the region named, -1 when none */
	char message[WORKER_MESSAGE_MAX];
};

struct worker_done {
	uint64_t samples;
	uint64_t wall_ns;      /* from HELLO to DONE */
};

struct worker_record {
	uint32_t type;         /* enum worker_record_type */
	uint32_t reserved;
	union {
		struct worker_hello hello;
		struct worker_sample sample;
		struct worker_progress progress;
		struct worker_error error;
		struct worker_done done;
		uint8_t pad[504];
	};
};
_Static_assert(sizeof(struct worker_record) == 512, "worker records are 512 bytes");

/* ------------------------------------------------------------------ parent side */

struct worker;

enum worker_end {
	WORKER_END_OK = 1,
	WORKER_END_FAILED,    /* the worker reported an error (setup, model return, contract) */
	WORKER_END_EXITED,    /* exited with a code and no explanation */
	WORKER_END_SIGNALED,  /* killed by a signal */
	WORKER_END_CPU_LIMIT,
	WORKER_END_AS_LIMIT,
	WORKER_END_TIMEOUT,
	WORKER_END_PROTOCOL,  /* sent malformed records; killed */
};

struct worker_status {
	enum worker_end end;
	int exit_code;        /* when it exited */
	int signal;           /* when it was killed */
	double cpu_s;         /* user + system CPU of the worker */
	char message[512];    /* "killed by SIGSEGV", "wall-clock timeout of 500 ms exceeded", ... */
	char refused[160];    /* forks the job's cgroup refused at pids.max, said however the job
			       * ended; "" none */
};

/* Validates the job, forks the worker; 0 or a negative errno with a message. */
int worker_spawn(const struct worker_job *job, struct worker **out, struct pim_error *err);

/* The read end of the result pipe (non-blocking, close-on-exec). */
int worker_fd(const struct worker *w);
/* The name of the job's cgroup ("job-7"), NULL without one. */
const char *worker_cgroup(const struct worker *w);
/* A pidfd of the worker, readable when it has exited; -1 when the kernel has none. */
int worker_pidfd(const struct worker *w);
pid_t worker_pid(const struct worker *w);

/* The next complete, valid record from the worker's pipe, read as needed: 1 and *rec (in w's
 * buffer, as read, until the next call); 0: none for now (wait for readability: after
 * READ_BUDGET bytes it answers 0 too, so that one worker does not hold the event loop);
 * WORKER_EOF: every writer closed the pipe and every record was taken; negative errno:
 * malformed input (-EPROTO, the worker is killed; worker_reap names it) or a read error.
 * Once the worker has exited it kills the worker's process group, so that processes the model
 * left behind (holding the pipe open or not) end and EOF comes. */
#define WORKER_EOF 2
int worker_next(struct worker *w, const struct worker_record **rec);

/* Kills the worker's process group once now (CLOCK_MONOTONIC ns, now_ns()) is past the job's
 * deadline. Returns 1 when it killed it now, else 0. */
int worker_check_timeout(struct worker *w, uint64_t now);
/* The deadline (CLOCK_MONOTONIC ns), UINT64_MAX when none. */
uint64_t worker_deadline(const struct worker *w);

/* waitpid(WNOHANG): 0 while running; 1 when it ended, with st filled (read to EOF first, so that
 * the worker's last ERROR record is known); negative errno on failure. Idempotent once ended. */
int worker_reap(struct worker *w, struct worker_status *st);

/* Reaps every child of this process that has exited and is not one of the n_keep workers in
 * keep (whose ends worker_reap collects): processes a job made the daemon's children, by clone()
 * with CLONE_PARENT from a worker where the seccomp filter does not stop it.  The daemon is no
 * child subreaper (PR_SET_CHILD_SUBREAPER): orphans of a job go to the nearest one above it, or
 * init, and never to it.  Children are found in /proc/self/task/TID/children, else one by one
 * with waitid(P_ALL).  Returns how many it reaped. */
unsigned worker_reap_strays(const pid_t *keep, size_t n_keep);

/* Kills (SIGKILL to the process group) and reaps a worker still running, closes the fds. */
void worker_free(struct worker *w);
/* SIGKILL to the worker's process group now (the job is abandoned). */
void worker_kill(struct worker *w);

/* The helper program's main (pimd-worker): never returns. Started by worker_spawn() only. */
_Noreturn void worker_helper_main(void);

/* Names a signal: "SIGSEGV" (static storage). */
const char *worker_signal_name(int sig);

/* ------------------------------------------------------------------ the hooks' engine
 * Used by the worker child around pim_model_entry; exposed for bench_hooks and the tests.
 * One engine per process, driven by one thread: hooks called from another thread are counted
 * and reported as an error at the end of the repetition. */

/* The hooks themselves; pim_region_enter/exit are aliases of these. Call these names where
 * libpimclient's decided-path pim_region_* may be linked too (bench_hooks). */
void worker_region_enter(int32_t region);
void worker_region_exit(int32_t region);

/* Allocates the region tables (job->regions, job->measure) for samples of n_values values.
 * The hooks stay inert until worker_hooks_begin(). */
int worker_hooks_setup(const struct worker_job *job, unsigned n_values, struct pim_error *err);
/* Selects the group the hooks read (leader fd, n values), or leader -1 for timing only. */
void worker_hooks_arm(int leader_fd, unsigned n_values);
/* Starts a run of the model on the calling thread. */
void worker_hooks_begin(void);
/* Ends it: calls emit for one SAMPLE per measured region that executed (when emit is not NULL),
 * resets the accumulators. 0, or -EPROTO after filling err_rec (an ERROR record) when the model
 * broke the hook contract (re-entry, unknown region, bad nesting, region left open, foreign
 * thread) or a counter read failed. */
int worker_hooks_end(uint32_t group, uint32_t rep,
		     void (*emit)(void *ctx, const struct worker_record *r), void *ctx,
		     struct worker_record *err_rec);
void worker_hooks_teardown(void);

#endif
