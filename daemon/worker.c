/* SPDX-License-Identifier: MIT */
/*
 * worker.c: the profiling worker (doc/design.md §4.3): the job and its wire format, which both
 * sides read.  Each of its three processes has a file of its own: worker_parent.c (pimd: spawn,
 * read, reap, timeout), worker_child.c (the forked child that contains the worker) and
 * worker_helper.c (pimd-worker, which the child executes to run the model in a fresh image).
 * The hooks live in worker_hooks.c.
 *
 * Order of the setup and why:
 *   1. (child) pdeath signal, default signal dispositions, empty mask (pimd blocks
 *      SIGTERM/HUP/INT and ignores SIGPIPE), own process group (the parent kills the group);
 *   2. (child) fds: 0 = /dev/null, 1/2 = output_fd or /dev/null, 3 = result pipe, 4 = model,
 *      5 = the encoded job (a sealed memfd), 6 = the helper, the rest closed (close_range);
 *   3. (child) perf groups opened while CAP_PERFMON is still held (perf_event_paranoid >= 3
 *      needs it), moved to fds 7...; the events are on this task and keep counting across the
 *      credential switch and the exec;
 *   4. (child) setgroups(0)/setresgid/setresuid; refused with a message when not permitted;
 *      PR_SET_PDEATHSIG again (a credential change clears it);
 *   5. (child) NO_NEW_PRIVS, ambient set cleared, bounding set and securebits when CAP_SETPCAP
 *      allows, then capset() with empty sets: pimd's uid is not 0, so setresuid() kept its
 *      capabilities;
 *   6. (child) execveat() of pimd-worker, opened by pimd, with argv and environment fixed here:
 *      nothing of pimd's memory (other jobs, other users' data) or environment survives;
 *   7. (helper) the job read back and validated, rlimits (CPU soft/hard, core 0, address space
 *      relative to the footprint so far, processes, files), the seccomp filter, then
 *      everything the model can influence: dlopen (constructors count), arguments, runs.
 */
#include "worker_int.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "pim_hooks.h"
#include "cpulevel.h"
#include "priority.h"

#define WIRE_MAGIC 0x77646d70u /* "pmdw" */

#define WIRE_VERSION 1u

struct wire_head {
	uint32_t magic;
	uint32_t version;
	uint64_t as_bytes;
	uint64_t manifest_digest;
	uint32_t n_args;
	uint32_t n_regions;
	uint32_t n_measure;
	uint32_t has_measure;
	uint32_t warmups;
	uint32_t reps;
	int32_t cpu;
	uint32_t cpu_seconds;
	uint32_t fill;
	uint32_t n_groups;
	uint32_t group_n[WORKER_GROUPS_MAX];
	uint32_t max_processes;
	uint32_t max_files;
	uint32_t uid;
	uint32_t gid;
	char reason[WORKER_MESSAGE_MAX];
};

static int cmp_i32(const void *a, const void *b);
static size_t describe_plan(const struct worker_job *job, char *b, size_t len);

const char *worker_signal_name(int sig)
{
	static const struct {
		int sig;
		const char *name;
	} names[] = {
		{ SIGHUP, "SIGHUP" },   { SIGINT, "SIGINT" },   { SIGQUIT, "SIGQUIT" },
		{ SIGILL, "SIGILL" },   { SIGTRAP, "SIGTRAP" }, { SIGABRT, "SIGABRT" },
		{ SIGBUS, "SIGBUS" },   { SIGFPE, "SIGFPE" },   { SIGKILL, "SIGKILL" },
		{ SIGUSR1, "SIGUSR1" }, { SIGSEGV, "SIGSEGV" }, { SIGUSR2, "SIGUSR2" },
		{ SIGPIPE, "SIGPIPE" }, { SIGALRM, "SIGALRM" }, { SIGTERM, "SIGTERM" },
		{ SIGSTKFLT, "SIGSTKFLT" }, { SIGCHLD, "SIGCHLD" }, { SIGCONT, "SIGCONT" },
		{ SIGSTOP, "SIGSTOP" }, { SIGTSTP, "SIGTSTP" }, { SIGTTIN, "SIGTTIN" },
		{ SIGTTOU, "SIGTTOU" }, { SIGURG, "SIGURG" },   { SIGXCPU, "SIGXCPU" },
		{ SIGXFSZ, "SIGXFSZ" }, { SIGVTALRM, "SIGVTALRM" }, { SIGPROF, "SIGPROF" },
		{ SIGWINCH, "SIGWINCH" }, { SIGIO, "SIGIO" },   { SIGPWR, "SIGPWR" },
		{ SIGSYS, "SIGSYS" },
	};
	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (names[i].sig == sig)
			return names[i].name;
	return "a real-time signal";
}

void worker_job_init(struct worker_job *job)
{
	memset(job, 0, sizeof *job);
	job->model_fd = -1;
	job->warmups = 1;
	job->reps = 10;
	job->uid = getuid();
	job->gid = getgid();
	job->cpu = -1;
	job->nice = priority_base();
	job->cpu_seconds = 60;
	job->as_bytes = UINT64_C(4) << 30;
	job->timeout_ms = 120000;
	job->fill = WORKER_FILL_ZERO;
	job->output_fd = -1;
	job->max_processes = 256;
	job->max_files = 1024;
	job->helper = NULL;
	job->helper_fd = -1;
}

bool worker_fd_open(int fd)
{
	return fd >= 0 && fcntl(fd, F_GETFD) >= 0;
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

/* A sorted copy of job->regions, checked for range and duplicates. */
int worker_sorted_regions(const struct worker_job *job, int32_t **out, struct pim_error *err)
{
	*out = NULL;
	if (!job->regions || job->n_regions == 0)
		return err_set(err, -EINVAL, "profiling job: the manifest lists no regions");
	if (job->n_regions > WORKER_REGIONS_MAX)
		return err_set(err, -E2BIG, "profiling job: %zu regions, at most %u", job->n_regions,
			       WORKER_REGIONS_MAX);
	int32_t *s = malloc(job->n_regions * sizeof *s);
	if (!s)
		return err_set(err, -ENOMEM, "profiling job: out of memory");
	memcpy(s, job->regions, job->n_regions * sizeof *s);
	qsort(s, job->n_regions, sizeof *s, cmp_i32);
	for (size_t i = 0; i < job->n_regions; i++) {
		if (s[i] < 0 || s[i] > WORKER_REGION_ID_MAX) {
			int32_t bad = s[i];
			free(s);
			return err_set(err, -EINVAL, "profiling job: region id %d out of range 0..%d",
				       bad, WORKER_REGION_ID_MAX);
		}
		if (i > 0 && s[i] == s[i - 1]) {
			int32_t bad = s[i];
			free(s);
			return err_set(err, -EINVAL, "profiling job: region id %d listed twice", bad);
		}
	}
	*out = s;
	return 0;
}

bool worker_region_known(const int32_t *sorted, size_t n, int32_t id)
{
	return bsearch(&id, sorted, n, sizeof *sorted, cmp_i32) != NULL;
}

int worker_job_validate(const struct worker_job *job, struct pim_error *err)
{
	if (!worker_fd_open(job->model_fd))
		return err_set(err, -EBADF, "profiling job: model library fd %d is not an open file "
					    "descriptor", job->model_fd);
	struct stat st;
	if (fstat(job->model_fd, &st) < 0)
		return err_set(err, -errno, "profiling job: fstat of model library fd %d failed: %s",
			       job->model_fd, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return err_set(err, -EINVAL, "profiling job: model library fd %d is not a regular "
					     "file", job->model_fd);
	if (job->n_args > WORKER_ARGS_MAX)
		return err_set(err, -E2BIG, "profiling job: %zu arguments, at most %u", job->n_args,
			       WORKER_ARGS_MAX);
	if (job->n_args > 0 && !job->arg_bytes)
		return err_set(err, -EINVAL, "profiling job: %zu arguments without sizes",
			       job->n_args);
	uint64_t total = 0;
	for (size_t i = 0; i < job->n_args; i++)
		if (job->arg_bytes[i] == 0 || !add_u64(total, job->arg_bytes[i], &total) ||
		    total > (UINT64_C(1) << 50))
			return err_set(err, -EINVAL, "profiling job: argument %zu has %llu bytes; "
						     "each must be 1 byte to 1 PiB in all", i,
				       (unsigned long long)job->arg_bytes[i]);

	_cleanup_(freep) int32_t *sorted = NULL;
	int r = worker_sorted_regions(job, &sorted, err);
	if (r < 0)
		return r;
	if (job->measure) {
		if (job->n_measure > job->n_regions)
			return err_set(err, -EINVAL, "profiling job: %zu regions to measure of %zu",
				       job->n_measure, job->n_regions);
		for (size_t i = 0; i < job->n_measure; i++)
			if (!worker_region_known(sorted, job->n_regions, job->measure[i]))
				return err_set(err, -EINVAL, "profiling job: region %d to measure is "
							     "not in the manifest", job->measure[i]);
	}
	if (job->reps == 0 || job->reps > WORKER_REPS_MAX)
		return err_set(err, -EINVAL, "profiling job: %u repetitions; need 1..%u", job->reps,
			       WORKER_REPS_MAX);
	if (job->warmups > WORKER_WARMUPS_MAX)
		return err_set(err, -EINVAL, "profiling job: %u warm-up runs, at most %u",
			       job->warmups, WORKER_WARMUPS_MAX);
	if (job->cpu < -1 || job->cpu >= CPU_SETSIZE)
		return err_set(err, -EINVAL, "profiling job: CPU %d out of range -1..%d", job->cpu,
			       CPU_SETSIZE - 1);
	if (job->n_groups > WORKER_GROUPS_MAX || (job->n_groups > 0 && !job->groups))
		return err_set(err, -EINVAL, "profiling job: %u event groups, at most %d",
			       job->n_groups, WORKER_GROUPS_MAX);
	for (unsigned g = 0; g < job->n_groups; g++)
		if (!job->groups[g].events || job->groups[g].n == 0 ||
		    job->groups[g].n > COUNTERS_MAX_GROUP)
			return err_set(err, -EINVAL, "profiling job: event group %u has %u events; "
						     "need 1..%d", g, job->groups[g].n,
				       COUNTERS_MAX_GROUP);
	if (job->fill != WORKER_FILL_ZERO && job->fill != WORKER_FILL_RANDOM)
		return err_set(err, -EINVAL, "profiling job: unknown fill mode %d", (int)job->fill);
	if (job->output_fd != -1 && !worker_fd_open(job->output_fd))
		return err_set(err, -EBADF, "profiling job: output fd %d is not open", job->output_fd);
	if (job->uid == (uid_t)-1 || job->gid == (gid_t)-1)
		return err_set(err, -EINVAL, "profiling job: uid/gid -1 is not a user");
	if (job->max_files != 0 && (job->max_files < 32 || job->max_files > (1u << 20)))
		return err_set(err, -EINVAL, "profiling job: a file limit of %u; need 32..%u or 0",
			       job->max_files, 1u << 20);
	if (job->max_processes > (1u << 22))
		return err_set(err, -EINVAL, "profiling job: a process limit of %u; at most %u",
			       job->max_processes, 1u << 22);
	return 0;
}

bool worker_executable(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int worker_helper_find(char *path, size_t len, struct pim_error *err)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return err_set(err, -errno, "cannot find %s: readlink(/proc/self/exe) failed: %s",
			       WORKER_HELPER_NAME, strerror(errno));
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = 0;
	snprintf(path, len, "%s/%s", exe, WORKER_HELPER_NAME);
	if (worker_executable(path))
		return 0;
	snprintf(path, len, "%s/../libexec/pimd/%s", exe, WORKER_HELPER_NAME);
	if (worker_executable(path))
		return 0;
	return err_set(err, -ENOENT, "the worker helper %s is neither in %s nor in %s/../libexec/"
				     "pimd (make install puts it there); profiling jobs cannot run",
		       WORKER_HELPER_NAME, exe, exe);
}

int worker_job_encode(const struct worker_job *job, void **buf, size_t *len,
		      struct pim_error *err)
{
	*buf = NULL;
	*len = 0;
	int r = worker_job_validate(job, err);
	if (r < 0)
		return r;
	size_t n_measure = job->measure ? job->n_measure : 0;
	size_t size = sizeof(struct wire_head) + job->n_args * sizeof(uint64_t) +
		      (job->n_regions + n_measure) * sizeof(int32_t);
	if (size > WORKER_WIRE_MAX)
		return err_set(err, -E2BIG, "profiling job: %zu bytes encoded, at most %u", size,
			       WORKER_WIRE_MAX);
	uint8_t *b = calloc(1, size);
	if (!b)
		return err_set(err, -ENOMEM, "profiling job: out of memory");
	struct wire_head h;
	memset(&h, 0, sizeof h);
	h.magic = WIRE_MAGIC;
	h.version = WIRE_VERSION;
	h.as_bytes = job->as_bytes;
	h.manifest_digest = job->manifest_digest;
	h.n_args = (uint32_t)job->n_args;
	h.n_regions = (uint32_t)job->n_regions;
	h.n_measure = (uint32_t)n_measure;
	h.has_measure = job->measure != NULL;
	h.warmups = job->warmups;
	h.reps = job->reps;
	h.cpu = job->cpu;
	h.cpu_seconds = job->cpu_seconds;
	h.fill = (uint32_t)job->fill;
	h.n_groups = job->n_groups;
	for (unsigned g = 0; g < job->n_groups; g++)
		h.group_n[g] = job->groups[g].n;
	h.max_processes = job->max_processes;
	h.max_files = job->max_files;
	h.uid = job->uid;
	h.gid = job->gid;
	if (job->n_groups)
		describe_plan(job, h.reason, sizeof h.reason);
	else
		snprintf(h.reason, sizeof h.reason, "timing backend (CLOCK_MONOTONIC, no counter "
			 "values): %s", job->reason && job->reason[0] ? job->reason
								       : "the job has no event plan");
	size_t at = 0;
	memcpy(b, &h, sizeof h);
	at += sizeof h;
	if (job->n_args)
		memcpy(b + at, job->arg_bytes, job->n_args * sizeof(uint64_t));
	at += job->n_args * sizeof(uint64_t);
	memcpy(b + at, job->regions, job->n_regions * sizeof(int32_t));
	at += job->n_regions * sizeof(int32_t);
	if (n_measure)
		memcpy(b + at, job->measure, n_measure * sizeof(int32_t));
	*buf = b;
	*len = size;
	return 0;
}

void worker_wire_free(struct worker_wire *w)
{
	free(w->arg_bytes);
	free(w->regions);
	free(w->measure);
	w->arg_bytes = NULL;
	w->regions = w->measure = NULL;
}

int worker_job_decode(const void *buf, size_t len, int model_fd, struct worker_wire *out,
		      struct pim_error *err)
{
	static const struct counters_event placeholder[COUNTERS_MAX_GROUP];
	const uint8_t *b = buf;
	struct wire_head h;

	memset(out, 0, sizeof *out);
	if (len < sizeof h)
		return err_set(err, -EBADMSG, "encoded job: %zu bytes, shorter than its %zu-byte "
					      "header", len, sizeof h);
	memcpy(&h, b, sizeof h);
	if (h.magic != WIRE_MAGIC || h.version != WIRE_VERSION)
		return err_set(err, -EBADMSG, "encoded job: magic %#x version %u, expected %#x "
					      "version %u", h.magic, h.version, WIRE_MAGIC,
			       WIRE_VERSION);
	if (h.n_args > WORKER_ARGS_MAX || h.n_regions > WORKER_REGIONS_MAX ||
	    h.n_measure > WORKER_REGIONS_MAX || h.n_groups > WORKER_GROUPS_MAX ||
	    (!h.has_measure && h.n_measure))
		return err_set(err, -EBADMSG, "encoded job: counts out of range (%u arguments, %u "
					      "regions, %u to measure, %u groups)", h.n_args,
			       h.n_regions, h.n_measure, h.n_groups);
	size_t want = sizeof h + (size_t)h.n_args * sizeof(uint64_t) +
		      ((size_t)h.n_regions + h.n_measure) * sizeof(int32_t);
	if (len != want)
		return err_set(err, -EBADMSG, "encoded job: %zu bytes, its header announces %zu",
			       len, want);
	out->arg_bytes = calloc(h.n_args ? h.n_args : 1, sizeof(uint64_t));
	out->regions = calloc(h.n_regions ? h.n_regions : 1, sizeof(int32_t));
	out->measure = calloc(h.n_measure ? h.n_measure : 1, sizeof(int32_t));
	if (!out->arg_bytes || !out->regions || !out->measure) {
		worker_wire_free(out);
		return err_set(err, -ENOMEM, "encoded job: out of memory");
	}
	size_t at = sizeof h;
	memcpy(out->arg_bytes, b + at, (size_t)h.n_args * sizeof(uint64_t));
	at += (size_t)h.n_args * sizeof(uint64_t);
	memcpy(out->regions, b + at, (size_t)h.n_regions * sizeof(int32_t));
	at += (size_t)h.n_regions * sizeof(int32_t);
	memcpy(out->measure, b + at, (size_t)h.n_measure * sizeof(int32_t));
	h.reason[sizeof h.reason - 1] = 0;
	memcpy(out->reason, h.reason, sizeof out->reason);

	struct worker_job *job = &out->job;
	worker_job_init(job);
	job->model_fd = model_fd;
	job->arg_bytes = out->arg_bytes;
	job->n_args = h.n_args;
	job->regions = out->regions;
	job->n_regions = h.n_regions;
	job->measure = h.has_measure ? out->measure : NULL;
	job->n_measure = h.n_measure;
	job->warmups = h.warmups;
	job->reps = h.reps;
	job->uid = h.uid;
	job->gid = h.gid;
	job->cpu = h.cpu;
	job->cpu_seconds = h.cpu_seconds;
	job->as_bytes = h.as_bytes;
	job->manifest_digest = h.manifest_digest;
	job->timeout_ms = 0; /* the parent's to enforce */
	job->fill = (enum worker_fill)h.fill;
	job->max_processes = h.max_processes;
	job->max_files = h.max_files;
	job->reason = out->reason;
	for (unsigned g = 0; g < h.n_groups; g++)
		out->groups[g] = (struct worker_group){ placeholder, h.group_n[g] };
	job->groups = h.n_groups ? out->groups : NULL;
	job->n_groups = h.n_groups;
	int r = worker_job_validate(job, err);
	if (r < 0) {
		worker_wire_free(out);
		return err_prefix(err, "encoded job");
	}
	return 0;
}

static size_t describe_plan(const struct worker_job *job, char *b, size_t len)
{
	int n = snprintf(b, len, "counters: %u event group(s), %u repetitions each, never "
				 "multiplexed:", job->n_groups, job->reps);
	size_t at = n > 0 ? (size_t)n : 0;
	for (unsigned g = 0; g < job->n_groups && at < len; g++)
		for (unsigned i = 0; i < job->groups[g].n && at < len; i++) {
			const char *name = job->groups[g].events[i].name;
			n = snprintf(b + at, len - at, "%s%s", i == 0 ? (g ? " | " : " ") : ", ",
				     name ? name : "unnamed");
			at += n > 0 ? (size_t)n : 0;
		}
	return at;
}
