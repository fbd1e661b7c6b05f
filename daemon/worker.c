/* SPDX-License-Identifier: MIT */
/*
 * worker.c: the profiling worker (doc/design.md §4.3): the parent side (spawn, read, reap, timeout),
 * the forked child that contains the worker, and the helper pimd-worker that the child executes
 * to run the model in a fresh image. The hooks live in worker_hooks.c.
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
#include "worker.h"

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

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif
#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif

#define REC_SIZE sizeof(struct worker_record)
#define OUT_BATCH 32                         /* records per write() (16 KiB) */
#define READ_BUDGET (1024 * REC_SIZE)         /* bytes per worker_read() call */

enum {
	EXIT_FAILED = 2,     /* an ERROR record was sent */
	EXIT_PIPE = 3,       /* the result pipe broke */
};

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

/* ------------------------------------------------------------------ job */

void worker_job_init(struct worker_job *job)
{
	memset(job, 0, sizeof *job);
	job->model_fd = -1;
	job->warmups = 1;
	job->reps = 10;
	job->uid = getuid();
	job->gid = getgid();
	job->cpu = -1;
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

static bool fd_open(int fd)
{
	return fd >= 0 && fcntl(fd, F_GETFD) >= 0;
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

/* A sorted copy of job->regions, checked for range and duplicates. */
static int sorted_regions(const struct worker_job *job, int32_t **out, struct pim_error *err)
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

static bool region_known(const int32_t *sorted, size_t n, int32_t id)
{
	return bsearch(&id, sorted, n, sizeof *sorted, cmp_i32) != NULL;
}

int worker_job_validate(const struct worker_job *job, struct pim_error *err)
{
	if (!fd_open(job->model_fd))
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
	int r = sorted_regions(job, &sorted, err);
	if (r < 0)
		return r;
	if (job->measure) {
		if (job->n_measure > job->n_regions)
			return err_set(err, -EINVAL, "profiling job: %zu regions to measure of %zu",
				       job->n_measure, job->n_regions);
		for (size_t i = 0; i < job->n_measure; i++)
			if (!region_known(sorted, job->n_regions, job->measure[i]))
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
	if (job->output_fd != -1 && !fd_open(job->output_fd))
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

/* ------------------------------------------------------------------ the helper and the wire */

static bool executable(const char *path)
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
	if (executable(path))
		return 0;
	snprintf(path, len, "%s/../libexec/pimd/%s", exe, WORKER_HELPER_NAME);
	if (executable(path))
		return 0;
	return err_set(err, -ENOENT, "the worker helper %s is neither in %s nor in %s/../libexec/"
				     "pimd (make install puts it there); profiling jobs cannot run",
		       WORKER_HELPER_NAME, exe, exe);
}

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

static size_t describe_plan(const struct worker_job *job, char *b, size_t len);

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

/* ------------------------------------------------------------------ child: record output */

struct out {
	int fd;
	unsigned n;
	uint64_t samples;
	struct worker_record rec[OUT_BATCH];
};

static void out_flush(struct out *o)
{
	const uint8_t *p = (const uint8_t *)o->rec;
	size_t left = (size_t)o->n * REC_SIZE;
	while (left > 0) {
		ssize_t w = write(o->fd, p, left);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(EXIT_PIPE);
		p += w;
		left -= (size_t)w;
	}
	o->n = 0;
}

static void out_push(struct out *o, const struct worker_record *r)
{
	o->rec[o->n++] = *r;
	if (r->type == WORKER_REC_SAMPLE)
		o->samples++;
	if (o->n == OUT_BATCH)
		out_flush(o);
}

static void emit_sample(void *ctx, const struct worker_record *r)
{
	out_push(ctx, r);
}

static _Noreturn void child_fail(struct out *o, int code, int32_t region, const char *fmt, ...)
	_printf_(4, 5);
static _Noreturn void child_fail(struct out *o, int code, int32_t region, const char *fmt, ...)
{
	struct worker_record r;
	memset(&r, 0, sizeof r);
	r.type = WORKER_REC_ERROR;
	r.error.code = code;
	r.error.region = region;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r.error.message, sizeof r.error.message, fmt, ap);
	va_end(ap);
	out_push(o, &r);
	out_flush(o);
	_exit(EXIT_FAILED);
}

/* ------------------------------------------------------------------ child: address space */

static long page_size;
static uint64_t as_limit;       /* RLIMIT_AS set, 0: none */
static uint64_t as_base;        /* footprint when it was set */
static uint64_t as_allowed;     /* the job's as_bytes */

/* Current address-space size (VmSize) from /proc/self/statm; async-signal-safe. */
static uint64_t vm_size(void)
{
	char buf[64];
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	uint64_t pages = 0;
	for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9'; i++)
		pages = pages * 10 + (uint64_t)(buf[i] - '0');
	return pages * (uint64_t)page_size;
}

/* True when the address space is within a slack of the limit: an allocation probably failed. */
static bool as_near_limit(uint64_t *used)
{
	if (as_limit == 0)
		return false;
	uint64_t vm = vm_size();
	uint64_t slack = as_allowed / 16;
	if (slack < (UINT64_C(2) << 20))
		slack = UINT64_C(2) << 20;
	*used = vm > as_base ? vm - as_base : 0;
	return vm + slack >= as_limit;
}

/* Crash path: append-only formatting without stdio (async-signal-safe). */
static size_t app_str(char *b, size_t at, size_t cap, const char *s)
{
	while (*s && at + 1 < cap)
		b[at++] = *s++;
	b[at] = 0;
	return at;
}

static size_t app_u64(char *b, size_t at, size_t cap, uint64_t v)
{
	char d[24];
	int n = 0;
	do
		d[n++] = (char)('0' + v % 10);
	while ((v /= 10) > 0);
	while (n > 0 && at + 1 < cap)
		b[at++] = d[--n];
	b[at] = 0;
	return at;
}

static int crash_fd = -1;

static void on_crash(int sig)
{
	int saved = errno;
	uint64_t used;
	if (crash_fd >= 0 && as_near_limit(&used)) {
		struct worker_record r;
		memset(&r, 0, sizeof r);
		r.type = WORKER_REC_ERROR;
		r.error.code = -ENOMEM;
		r.error.region = -1;
		char *m = r.error.message;
		size_t cap = sizeof r.error.message, at = 0;
		at = app_str(m, at, cap, "address-space limit of ");
		at = app_u64(m, at, cap, as_allowed);
		at = app_str(m, at, cap, " bytes exceeded: the model had mapped ");
		at = app_u64(m, at, cap, used);
		at = app_str(m, at, cap, " bytes when it was killed by ");
		at = app_str(m, at, cap, worker_signal_name(sig));
		app_str(m, at, cap, " (an allocation probably failed)");
		ssize_t w _unused_ = write(crash_fd, &r, sizeof r);
	}
	/* die of the signal as if unhandled: default disposition, delivered on return */
	signal(sig, SIG_DFL);
	raise(sig);
	errno = saved;
}

static void install_crash_handlers(void *altstack, size_t len)
{
	stack_t ss = { .ss_sp = altstack, .ss_size = len };
	sigaltstack(&ss, NULL);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_crash;
	sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
	const int sigs[] = { SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE };
	for (size_t i = 0; i < ELEMENTSOF(sigs); i++)
		sigaction(sigs[i], &sa, NULL);
}

/* ------------------------------------------------------------------ child: containment */

static void reset_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_DFL;
	for (int sig = 1; sig < _NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			sigaction(sig, &sa, NULL); /* glibc-reserved signals fail: fine */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* 0 = /dev/null, 1 and 2 = output, 3 = result pipe, 4 = model library, 5 = the encoded job,
 * 6 = the helper executable (close-on-exec); everything else closed. */
static int setup_fds(int pipe_fd, int model_fd, int output_fd, int job_fd, int helper_fd,
		     struct pim_error *err)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0)
		return err_set(err, -errno, "cannot open /dev/null: %s", strerror(errno));
	/* copies above every target first, so that no dup2 clobbers a source */
	int p = fcntl(pipe_fd, F_DUPFD_CLOEXEC, WORKER_FD_COUNTERS);
	int m = fcntl(model_fd, F_DUPFD_CLOEXEC, WORKER_FD_COUNTERS);
	int o = fcntl(output_fd >= 0 ? output_fd : null, F_DUPFD_CLOEXEC, WORKER_FD_COUNTERS);
	int n = fcntl(null, F_DUPFD_CLOEXEC, WORKER_FD_COUNTERS);
	int j = fcntl(job_fd, F_DUPFD_CLOEXEC, WORKER_FD_COUNTERS);
	int h = fcntl(helper_fd, F_DUPFD_CLOEXEC, WORKER_FD_COUNTERS);
	if (p < 0 || m < 0 || o < 0 || n < 0 || j < 0 || h < 0)
		return err_set(err, -errno, "cannot arrange the worker's file descriptors: %s",
			       strerror(errno));
	/* the helper inherits 0-5; 6 only serves execveat() */
	if (dup2(n, 0) < 0 || dup2(o, 1) < 0 || dup2(o, 2) < 0 || dup2(p, WORKER_FD_PIPE) < 0 ||
	    dup2(m, WORKER_FD_MODEL) < 0 || dup2(j, WORKER_FD_JOB) < 0 ||
	    dup3(h, WORKER_FD_HELPER, O_CLOEXEC) < 0)
		return err_set(err, -errno, "cannot arrange the worker's file descriptors: %s",
			       strerror(errno));
	if (close_range(WORKER_FD_COUNTERS, ~0U, 0) < 0)
		for (int fd = WORKER_FD_COUNTERS; fd < 65536; fd++)
			close(fd);
	return 0;
}

static int switch_credentials(uid_t uid, gid_t gid, struct pim_error *err)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;
	getresuid(&ru, &eu, &su);
	getresgid(&rg, &eg, &sg);
	bool same = ru == uid && eu == uid && su == uid && rg == gid && eg == gid && sg == gid;

	if (same) {
		/* nothing to switch; drop the daemon's supplementary groups when allowed */
		if (setgroups(0, NULL) < 0 && errno != EPERM)
			return err_set(err, -errno, "setgroups(0) failed: %s", strerror(errno));
		return 0;
	}
	const char *what = NULL;
	const char *cap = NULL;
	if (setgroups(0, NULL) < 0)
		what = "setgroups(0)", cap = "CAP_SETGID";
	else if (setresgid(gid, gid, gid) < 0)
		what = "setresgid", cap = "CAP_SETGID";
	else if (setresuid(uid, uid, uid) < 0)
		what = "setresuid", cap = "CAP_SETUID";
	if (what) {
		int e = errno;
		if (e == EPERM)
			return err_set(err, -EPERM, "cannot run the model as uid %u gid %u: %s failed "
						    "with EPERM; pimd (uid %u) lacks %s; refusing "
						    "to run it under any other identity",
				       (unsigned)uid, (unsigned)gid, what, (unsigned)eu, cap);
		return err_set(err, -e, "cannot run the model as uid %u gid %u: %s failed: %s",
			       (unsigned)uid, (unsigned)gid, what, strerror(e));
	}
	getresuid(&ru, &eu, &su);
	getresgid(&rg, &eg, &sg);
	if (ru != uid || eu != uid || su != uid || rg != gid || eg != gid || sg != gid ||
	    getgroups(0, NULL) != 0)
		return err_set(err, -EPERM, "credential switch to uid %u gid %u did not take effect",
			       (unsigned)uid, (unsigned)gid);
	return 0;
}

static int capget_self(struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3])
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	memset(data, 0, sizeof(*data) * _LINUX_CAPABILITY_U32S_3);
	return (int)syscall(SYS_capget, &hdr, data);
}

static bool has_setpcap(void)
{
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	return capget_self(data) == 0 &&
	       (data[CAP_TO_INDEX(CAP_SETPCAP)].effective & CAP_TO_MASK(CAP_SETPCAP));
}

/* Before the credential switch, which takes CAP_SETPCAP away from a root parent: empty the
 * bounding set when permitted (pimd under systemd is not; NO_NEW_PRIVS covers that case). */
static void drop_bounding_set(void)
{
	if (!has_setpcap())
		return;
	for (int c = 0; c < 64; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno == EINVAL)
			break;
}

static int drop_privileges(struct pim_error *err)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return err_set(err, -errno, "prctl(PR_SET_NO_NEW_PRIVS) failed: %s", strerror(errno));
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return err_set(err, -errno, "clearing ambient capabilities failed: %s",
			       strerror(errno));

	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	if (has_setpcap())
		/* a uid-0 job: lock the securebits (NOROOT, NO_SETUID_FIXUP, KEEP_CAPS, ambient
		 * raise, each with its lock), so that not even an execve() regains capabilities */
		prctl(PR_SET_SECUREBITS, 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80, 0, 0, 0);
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	memset(data, 0, sizeof data);
	if (syscall(SYS_capset, &hdr, data) < 0)
		return err_set(err, -errno, "capset(empty) failed: %s", strerror(errno));
	if (capget_self(data) < 0)
		return err_set(err, -errno, "capget failed: %s", strerror(errno));
	for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
		if (data[i].effective || data[i].permitted || data[i].inheritable)
			return err_set(err, -EPERM, "capabilities remain after capset(empty)");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return err_set(err, -errno, "prctl(PR_SET_DUMPABLE) failed: %s", strerror(errno));
	return 0;
}

static int set_limits(const struct worker_job *job, struct pim_error *err)
{
	struct rlimit rl = { 0, 0 };
	if (setrlimit(RLIMIT_CORE, &rl) < 0)
		return err_set(err, -errno, "setrlimit(RLIMIT_CORE) failed: %s", strerror(errno));
	if (job->cpu_seconds > 0) {
		/* SIGXCPU at the soft limit, SIGKILL one second later if it is ignored */
		rl.rlim_cur = job->cpu_seconds;
		rl.rlim_max = (rlim_t)job->cpu_seconds + 1;
		if (setrlimit(RLIMIT_CPU, &rl) < 0)
			return err_set(err, -errno, "setrlimit(RLIMIT_CPU, %u s) failed: %s",
				       job->cpu_seconds, strerror(errno));
	}
	if (job->as_bytes > 0) {
		uint64_t base = vm_size(), lim;
		if (!add_u64(base, job->as_bytes, &lim) || lim >= RLIM_INFINITY)
			lim = RLIM_INFINITY - 1;
		rl.rlim_cur = rl.rlim_max = lim;
		if (setrlimit(RLIMIT_AS, &rl) < 0)
			return err_set(err, -errno, "setrlimit(RLIMIT_AS) failed: %s",
				       strerror(errno));
		as_base = base;
		as_allowed = job->as_bytes;
		as_limit = lim;
	}
	if (job->max_processes > 0) {
		rl.rlim_cur = rl.rlim_max = job->max_processes;
		if (setrlimit(RLIMIT_NPROC, &rl) < 0)
			return err_set(err, -errno, "setrlimit(RLIMIT_NPROC, %u) failed: %s",
				       job->max_processes, strerror(errno));
	}
	if (job->max_files > 0) {
		rl.rlim_cur = rl.rlim_max = job->max_files;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			return err_set(err, -errno, "setrlimit(RLIMIT_NOFILE, %u) failed: %s",
				       job->max_files, strerror(errno));
	}
	return 0;
}

#ifndef SYS_clone3
#define SYS_clone3 435 /* the same on x86-64 and arm64 */
#endif

#if defined(__x86_64__)
#define WORKER_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define WORKER_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

/* Every process the model starts stays in the worker's process group, where the parent's
 * kill(-pgid) reaches it: setsid() and setpgid() fail with EPERM.  None becomes pimd's child:
 * clone() with CLONE_PARENT fails with EPERM (its child would be a sibling of the worker, which
 * pimd would have to reap), and clone3(), whose flags are in a structure the filter cannot read,
 * with ENOSYS, so that the C library falls back to clone().  Other architectures' and x32
 * system calls fail with ENOSYS (no way around the filter through a second ABI). */
static int install_seccomp(struct pim_error *err)
{
#ifdef WORKER_AUDIT_ARCH
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, WORKER_AUDIT_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#ifdef __X32_SYSCALL_BIT
		BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, __X32_SYSCALL_BIT, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
#endif
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 3),
		/* the flags are clone's first argument on both architectures; CLONE_PARENT is in
		 * their low 32 bits (little-endian: the first word) */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_PARENT, 3, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setsid, 1, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setpgid, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = (unsigned short)ELEMENTSOF(f), .filter = f };
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
		return err_set(err, -errno, "installing the seccomp filter failed: %s",
			       strerror(errno));
	return 0;
#else
	return err_set(err, -ENOTSUP, "no seccomp filter for this architecture: the worker "
				      "cannot keep the model's processes in its process group");
#endif
}

/* ------------------------------------------------------------------ child: running the model */

static void fill_buffer(uint8_t *p, uint64_t len, enum worker_fill fill, uint64_t *state)
{
	if (fill == WORKER_FILL_ZERO) {
		memset(p, 0, len); /* touches every page: no shared zero page under the model */
		return;
	}
	uint64_t x = *state;
	uint64_t i = 0;
	for (; i + 8 <= len; i += 8) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		memcpy(p + i, &x, 8);
	}
	for (; i < len; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		p[i] = (uint8_t)x;
	}
	*state = x;
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

/* The forked child: pimd's image, no client code. Arranges the fds, opens the counters,
 * switches credentials, drops privileges and executes the helper. */
static _Noreturn void child_main(const struct worker_job *job, int pipe_fd, int job_fd,
				 int helper_fd, const struct cgroup_job *cg, pid_t parent)
{
	struct pim_error err = { 0 };
	static struct out o; /* 16 KiB: not on the stack */
	static struct counters_group groups[WORKER_GROUPS_MAX];

	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != parent)
		_exit(EXIT_PIPE);
	o.fd = pipe_fd;
	/* into the job's cgroup before anything else: whatever the model starts is born there.
	 * The child moves itself rather than being cloned into the cgroup (clone3 with
	 * CLONE_INTO_CGROUP): a raw clone3 skips glibc's fork handlers, and the child of a
	 * multithreaded pimd could then find malloc's locks held; no code of the model runs
	 * before this write either way. */
	int r = cg ? cgroup_job_enter(cg) : 0;
	if (r < 0)
		child_fail(&o, r, -1, "worker setup: cannot enter the job's cgroup: %s",
			   strerror(-r));
	reset_signals();
	setpgid(0, 0);

	if (setup_fds(pipe_fd, job->model_fd, job->output_fd, job_fd, helper_fd, &err) < 0)
		child_fail(&o, err.code, -1, "worker setup: %s", err.msg);
	o.fd = WORKER_FD_PIPE;
	if (chdir("/") < 0)
		child_fail(&o, -errno, -1, "worker setup: chdir(/) failed: %s", strerror(errno));

	/* while CAP_PERFMON is held; then at fixed numbers, inherited by the helper */
	int next = WORKER_FD_COUNTERS;
	for (unsigned g = 0; g < job->n_groups; g++) {
		if (counters_open(&groups[g], 0, -1, job->groups[g].events, job->groups[g].n,
				  &err) < 0)
			child_fail(&o, err.code, -1, "event group %u: %s", g, err.msg);
		for (unsigned i = 0; i < groups[g].n; i++, next++) {
			if (groups[g].fd[i] != next) {
				if (fcntl(groups[g].fd[i], F_DUPFD, next) != next)
					child_fail(&o, -EBADF, -1, "worker setup: event group %u: "
						   "cannot move its descriptors", g);
				close(groups[g].fd[i]);
				groups[g].fd[i] = next;
			} else if (fcntl(next, F_SETFD, 0) < 0) {
				child_fail(&o, -errno, -1, "worker setup: %s", strerror(errno));
			}
		}
	}

	drop_bounding_set();
	if (switch_credentials(job->uid, job->gid, &err) < 0)
		child_fail(&o, err.code, -1, "%s", err.msg);
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0); /* cleared by the credential change */
	if (getppid() != parent)
		_exit(EXIT_PIPE);
	if (drop_privileges(&err) < 0)
		child_fail(&o, err.code, -1, "dropping privileges: %s", err.msg);

	/* A fresh image: the model never sees pimd's memory, nor its environment. */
	char *const argv[] = { (char *)WORKER_HELPER_NAME, NULL };
	char *const envp[] = { (char *)"PATH=/usr/bin:/bin", (char *)"HOME=/",
			       (char *)"LC_ALL=C", NULL };
	syscall(SYS_execveat, WORKER_FD_HELPER, "", argv, envp, AT_EMPTY_PATH);
	child_fail(&o, -errno, -1, "cannot start the worker helper %s as uid %u: execveat "
		   "failed: %s", WORKER_HELPER_NAME, (unsigned)job->uid, strerror(errno));
}

/* Reads the job from WORKER_FD_JOB. */
static int helper_read_job(struct worker_wire *wire, struct pim_error *err)
{
	struct stat st;
	if (fstat(WORKER_FD_JOB, &st) < 0 || !S_ISREG(st.st_mode))
		return err_set(err, -EBADF, "worker setup: fd %d is not the encoded job",
			       WORKER_FD_JOB);
	if (st.st_size <= 0 || (uint64_t)st.st_size > WORKER_WIRE_MAX)
		return err_set(err, -EBADMSG, "worker setup: the encoded job has %lld bytes",
			       (long long)st.st_size);
	_cleanup_(freep) uint8_t *buf = malloc((size_t)st.st_size);
	if (!buf)
		return err_set(err, -ENOMEM, "worker setup: out of memory");
	size_t have = 0;
	while (have < (size_t)st.st_size) {
		ssize_t n = pread(WORKER_FD_JOB, buf + have, (size_t)st.st_size - have,
				  (off_t)have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return err_set(err, n < 0 ? -errno : -EBADMSG, "worker setup: reading the "
				       "job failed: %s", n < 0 ? strerror(errno) : "short file");
		have += (size_t)n;
	}
	close(WORKER_FD_JOB);
	return worker_job_decode(buf, have, WORKER_FD_MODEL, wire, err);
}

/* The counter descriptors the forked child left at WORKER_FD_COUNTERS on, into groups; every
 * descriptor above them is closed. */
static void helper_take_counters(struct out *o, const struct worker_job *job,
				 struct counters_group *groups)
{
	int next = WORKER_FD_COUNTERS;
	for (unsigned g = 0; g < job->n_groups; g++) {
		counters_group_init(&groups[g]);
		groups[g].n = job->groups[g].n;
		for (unsigned i = 0; i < groups[g].n; i++, next++) {
			if (!fd_open(next))
				child_fail(o, -EBADF, -1, "worker setup: event group %u: descriptor "
					   "%d is missing", g, next);
			groups[g].fd[i] = next;
		}
	}
	if (close_range((unsigned)next, ~0U, 0) < 0)
		for (int fd = next; fd < 65536; fd++)
			close(fd);
}

static void helper_hello(struct out *o, const struct worker_wire *wire)
{
	const struct worker_job *job = &wire->job;
	struct worker_record r;

	memset(&r, 0, sizeof r);
	r.type = WORKER_REC_HELLO;
	r.hello.pid = getpid();
	r.hello.uid = getuid();
	r.hello.gid = getgid();
	r.hello.backend = job->n_groups ? WORKER_BACKEND_COUNTERS : WORKER_BACKEND_TIMING;
	r.hello.n_groups = job->n_groups ? job->n_groups : 1;
	r.hello.reps = job->reps;
	r.hello.warmups = job->warmups;
	r.hello.cpu = job->cpu >= 0 ? sched_getcpu() : -1;
	snprintf(r.hello.reason, sizeof r.hello.reason, "%s", wire->reason);
	out_push(o, &r);
	out_flush(o);
}

/* The model library, checked against the manifest it was built for, and its entry point. */
static pim_model_entry_fn helper_load_model(struct out *o, const struct worker_job *job)
{
	void *lib = dlopen("/proc/self/fd/4", RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		child_fail(o, -ENOEXEC, -1, "cannot load the model library: %s", dlerror());
	close(WORKER_FD_MODEL);
	const uint64_t *built_for = dlsym(lib, PIM_MODEL_DIGEST);
	if (job->manifest_digest && built_for && *built_for != job->manifest_digest)
		child_fail(o, -ESTALE, -1, "the model library was built for another manifest "
					   "(library digest %016llx, loaded manifest %016llx): "
					   "load the manifest pim-extract wrote with this library, or "
					   "rebuild both from the same source",
			   (unsigned long long)*built_for, (unsigned long long)job->manifest_digest);
	const char *target = dlsym(lib, PIM_MODEL_TARGET);
	if (target && target[0] && !cpulevel_runs_here(target))
		child_fail(o, -ENOEXEC, -1, "the model library's host code was built for %.16s (%s), "
					    "which this CPU does not have: rebuild it here with pim-extract "
					    "(--target native, the default)",
			   target, cpulevel_needs(target));
	pim_model_entry_fn entry;
	*(void **)&entry = dlsym(lib, PIM_MODEL_ENTRY);
	if (!entry)
		child_fail(o, -ENOEXEC, -1, "the model library does not export %s "
					    "(see client/pim_hooks.h)", PIM_MODEL_ENTRY);
	return entry;
}

/* The model's arguments: job->arg_bytes[i] bytes each, filled as the job says. */
static void helper_map_args(struct out *o, const struct worker_job *job, void **args)
{
	uint64_t mapped = 0, seed = UINT64_C(0x9e3779b97f4a7c15);
	for (size_t i = 0; i < job->n_args; i++) {
		uint64_t len = job->arg_bytes[i];
		void *p = len > SIZE_MAX ? MAP_FAILED
					 : mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE,
						MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			if (as_limit)
				child_fail(o, -ENOMEM, -1, "address-space limit of %llu bytes "
							   "exceeded allocating arguments: argument "
							   "%zu (%llu bytes) after %llu bytes of "
							   "arguments",
					   (unsigned long long)as_allowed, i,
					   (unsigned long long)len, (unsigned long long)mapped);
			child_fail(o, -ENOMEM, -1, "out of memory allocating argument %zu (%llu "
						   "bytes): %s", i, (unsigned long long)len,
				   strerror(errno));
		}
		fill_buffer(p, len, job->fill, &seed);
		args[i] = p;
		mapped += len;
	}
}

/* One run of the model between the hooks: repetition rep of group g, or with warmup the
 * warm-up run rep (no samples).  A run that faulted (the hooks' record), returned non-zero
 * or ran into the address-space limit ends the helper. */
static void helper_run(struct out *o, pim_model_entry_fn entry, void **args, size_t n_args,
		       bool warmup, unsigned g, unsigned rep)
{
	struct worker_record fault;
	char run[64];

	worker_hooks_begin();
	int rc = entry((void *const *)args, n_args);
	if (worker_hooks_end(warmup ? 0 : g, warmup ? 0 : rep, warmup ? NULL : emit_sample,
			     warmup ? NULL : o, &fault) < 0) {
		out_push(o, &fault);
		out_flush(o);
		_exit(EXIT_FAILED);
	}
	if (rc == 0)
		return;
	snprintf(run, sizeof run, warmup ? "warm-up run %u" : "repetition %u", rep);
	uint64_t used;
	if (as_near_limit(&used))
		child_fail(o, -ENOMEM, -1, "address-space limit of %llu bytes exceeded: pim_model_entry "
					   "returned %d in %s with %llu bytes mapped",
			   (unsigned long long)as_allowed, rc, run, (unsigned long long)used);
	if (warmup)
		child_fail(o, -ECANCELED, -1, "pim_model_entry returned %d in %s", rc, run);
	child_fail(o, -ECANCELED, -1, "pim_model_entry returned %d in %s of group %u", rc, run, g);
}

/* The warm-up runs, then job->reps measured runs per event group (one pass without counters
 * on the timing backend), each followed by a progress record. */
static void helper_measure(struct out *o, const struct worker_job *job,
			   struct counters_group *groups, pim_model_entry_fn entry, void **args)
{
	struct pim_error err = { 0 };
	struct worker_record r;

	for (unsigned i = 0; i < job->warmups; i++) {
		worker_hooks_arm(-1, 0);
		helper_run(o, entry, args, job->n_args, true, 0, i);
	}
	unsigned passes = job->n_groups ? job->n_groups : 1;
	uint64_t done = 0, total = (uint64_t)passes * job->reps;
	for (unsigned g = 0; g < passes; g++) {
		if (job->n_groups) {
			if (counters_enable(&groups[g], &err) < 0)
				child_fail(o, err.code, -1, "event group %u: %s", g, err.msg);
			worker_hooks_arm(groups[g].fd[0], groups[g].n);
		} else {
			worker_hooks_arm(-1, 0);
		}
		for (unsigned rep = 0; rep < job->reps; rep++) {
			helper_run(o, entry, args, job->n_args, false, g, rep);
			memset(&r, 0, sizeof r);
			r.type = WORKER_REC_PROGRESS;
			r.progress.group = g;
			r.progress.n_groups = passes;
			r.progress.rep = rep + 1;
			r.progress.reps = job->reps;
			r.progress.done = ++done;
			r.progress.total = total;
			out_push(o, &r);
			out_flush(o);
		}
		if (job->n_groups)
			counters_disable(&groups[g], NULL);
	}
}

_Noreturn void worker_helper_main(void)
{
	struct pim_error err = { 0 };
	static struct out o;
	static struct counters_group groups[WORKER_GROUPS_MAX];
	static struct worker_wire wire;
	struct stat st;

	if (fstat(WORKER_FD_PIPE, &st) < 0 || !S_ISFIFO(st.st_mode)) {
		static const char msg[] = WORKER_HELPER_NAME ": runs profiling jobs for pimd(8), "
					  "which starts it; it is not run by hand\n";
		ssize_t w _unused_ = write(2, msg, sizeof msg - 1);
		_exit(2);
	}
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); /* an exec made it dumpable again */
	o.fd = WORKER_FD_PIPE;
	page_size = sysconf(_SC_PAGESIZE);
	if (helper_read_job(&wire, &err) < 0)
		child_fail(&o, err.code, -1, "%s", err.msg);
	const struct worker_job *job = &wire.job;
	helper_take_counters(&o, job, groups);

	unsigned max_values = 0;
	for (unsigned g = 0; g < job->n_groups; g++)
		if (job->groups[g].n > max_values)
			max_values = job->groups[g].n;
	if (worker_hooks_setup(job, max_values, &err) < 0)
		child_fail(&o, err.code, -1, "worker setup: %s", err.msg);
	if (job->cpu >= 0 && counters_pin_cpu(job->cpu, &err) < 0)
		child_fail(&o, err.code, -1, "%s", err.msg);
	uint64_t t_start = now_ns();
	helper_hello(&o, &wire);

	/* Allocations the model can't touch come first, then the limits, then the model. */
	size_t alt_len = 64 * 1024;
	void *alt = mmap(NULL, alt_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void **args = calloc(job->n_args ? job->n_args : 1, sizeof *args);
	if (alt == MAP_FAILED || !args)
		child_fail(&o, -ENOMEM, -1, "worker setup: out of memory");
	if (set_limits(job, &err) < 0)
		child_fail(&o, err.code, -1, "%s", err.msg);
	if (install_seccomp(&err) < 0)
		child_fail(&o, err.code, -1, "%s", err.msg);
	crash_fd = WORKER_FD_PIPE;
	install_crash_handlers(alt, alt_len);
	pim_model_entry_fn entry = helper_load_model(&o, job);
	helper_map_args(&o, job, args);
	helper_measure(&o, job, groups, entry, args);

	struct worker_record r;
	memset(&r, 0, sizeof r);
	r.type = WORKER_REC_DONE;
	r.done.samples = o.samples;
	r.done.wall_ns = now_ns() - t_start;
	out_push(&o, &r);
	out_flush(&o);
	_exit(0);
}

/* ------------------------------------------------------------------ parent */

struct worker {
	pid_t pid;
	int fd;
	struct cgroup_job *cg;      /* the job's cgroup, NULL without */
	uint64_t memory_max;        /* its memory.max, 0 none */
	uint64_t pids_max;
	int pidfd;
	uint64_t deadline;
	unsigned timeout_ms;
	unsigned cpu_seconds;
	uint64_t as_bytes;
	uint32_t reps;
	uint32_t passes;
	uint32_t n_groups;
	unsigned group_n[WORKER_GROUPS_MAX];
	int32_t *regions; /* sorted */
	size_t n_regions;

	bool timed_out;
	bool protocol;
	bool eof;
	bool ended;
	bool hello_seen;
	bool leftovers_killed;
	bool done_seen;
	bool error_seen;
	struct worker_error error;  /* the first ERROR record */
	char protocol_msg[256];
	struct worker_status status;

	size_t have;
	uint8_t buf[64 * REC_SIZE];
};

int worker_spawn(const struct worker_job *job, struct worker **out, struct pim_error *err)
{
	*out = NULL;
	int r = worker_job_validate(job, err);
	if (r < 0)
		return r;

	_cleanup_(freep) struct worker *w = calloc(1, sizeof *w);
	if (!w)
		return err_set(err, -ENOMEM, "worker: out of memory");
	r = sorted_regions(job, &w->regions, err);
	if (r < 0)
		return r;
	w->n_regions = job->n_regions;
	w->fd = w->pidfd = -1;
	w->timeout_ms = job->timeout_ms;
	w->cpu_seconds = job->cpu_seconds;
	w->as_bytes = job->as_bytes;
	w->reps = job->reps;
	w->n_groups = job->n_groups;
	w->passes = job->n_groups ? job->n_groups : 1;
	for (unsigned g = 0; g < job->n_groups; g++)
		w->group_n[g] = job->groups[g].n;

	char found[PATH_MAX];
	const char *helper = job->helper_fd >= 0 ? "(descriptor)" : job->helper;
	if (!helper) {
		r = worker_helper_find(found, sizeof found, err);
		if (r < 0) {
			free(w->regions);
			return r;
		}
		helper = found;
	}
	_cleanup_(closep) int helper_fd = job->helper_fd >= 0 ? fcntl(job->helper_fd, F_DUPFD_CLOEXEC, 3)
							      : open(helper, O_RDONLY | O_CLOEXEC);
	if (helper_fd < 0) {
		r = -errno;
		free(w->regions);
		return err_set(err, r, "worker: cannot open the helper %s: %s", helper,
			       strerror(-r));
	}
	_cleanup_(freep) void *wire = NULL;
	size_t wire_len;
	r = worker_job_encode(job, &wire, &wire_len, err);
	if (r < 0) {
		free(w->regions);
		return r;
	}
	/* the job travels in a sealed memfd: the helper reads exactly what pimd wrote */
	_cleanup_(closep) int job_fd = memfd_create("pimd-job", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (job_fd < 0 || write(job_fd, wire, wire_len) != (ssize_t)wire_len ||
	    fcntl(job_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) <
		    0) {
		r = -errno;
		free(w->regions);
		return err_set(err, r, "worker: cannot pass the job to the helper: %s",
			       strerror(-r));
	}

	if (job->cgroup) {
		struct cgroup_limits lim = { .pids_max = job->max_processes };
		if (job->as_bytes && !add_u64(job->as_bytes, WORKER_CGROUP_MEMORY_MARGIN, &lim.memory_max))
			lim.memory_max = 0;
		r = cgroup_job_new(job->cgroup, job->job_id, &lim, &w->cg, err);
		if (r < 0) {
			free(w->regions);
			return err_prefix(err, "worker");
		}
		unsigned ctl = cgroup_tree_controllers(job->cgroup);
		w->pids_max = ctl & CGROUP_PIDS ? lim.pids_max : 0;
		w->memory_max = ctl & CGROUP_MEMORY ? lim.memory_max : 0;
	}
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		r = -errno;
		cgroup_job_end(w->cg);
		free(w->regions);
		return err_set(err, r, "worker: pipe2 failed: %s", strerror(-r));
	}
	fflush(NULL); /* no buffered output duplicated into the child */
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(p[0]);
		close(p[1]);
		cgroup_job_end(w->cg);
		free(w->regions);
		return err_set(err, -e, "worker: fork failed: %s", strerror(e));
	}
	if (pid == 0) {
		close(p[0]);
		child_main(job, p[1], job_fd, helper_fd, w->cg, parent);
	}
	close(p[1]);
	setpgid(pid, pid); /* also done by the child: whichever runs first */
	fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
	w->pid = pid;
	w->fd = p[0];
	w->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	w->deadline = job->timeout_ms ? now_ns() + (uint64_t)job->timeout_ms * 1000000u : UINT64_MAX;
	*out = TAKE_PTR(w);
	return 0;
}

int worker_fd(const struct worker *w) { return w->fd; }
const char *worker_cgroup(const struct worker *w) { return w->cg ? cgroup_job_name(w->cg) : NULL; }
int worker_pidfd(const struct worker *w) { return w->pidfd; }
pid_t worker_pid(const struct worker *w) { return w->pid; }
uint64_t worker_deadline(const struct worker *w) { return w->deadline; }

/* Everything the job started: its cgroup, and its process group (the worker's pid is its id
 * while the worker is unreaped); a worker not yet in its cgroup is in the group. */
static void kill_job(struct worker *w)
{
	if (w->cg)
		cgroup_job_kill(w->cg);
	kill(-w->pid, SIGKILL);
}

static void kill_group(struct worker *w)
{
	if (w->ended)
		return;
	kill_job(w);
	kill(w->pid, SIGKILL);
}

void worker_kill(struct worker *w)
{
	kill_group(w);
}

/* Once the worker has exited (still unreaped: its pid, the group's id, cannot be reused), kills
 * what the model left in its process group; the seccomp filter keeps them all there. */
static void kill_leftovers(struct worker *w)
{
	if (w->ended || w->leftovers_killed)
		return;
	siginfo_t si;
	memset(&si, 0, sizeof si);
	if (waitid(P_PID, (id_t)w->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid == 0)
		return;
	kill_job(w);
	w->leftovers_killed = true;
}

static int protocol_error(struct worker *w, const char *fmt, ...) _printf_(2, 3);
static int protocol_error(struct worker *w, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->protocol_msg, sizeof w->protocol_msg, fmt, ap);
	va_end(ap);
	w->protocol = true;
	kill_group(w);
	return -EPROTO;
}

static int check_record(struct worker *w, struct worker_record *r)
{
	if (w->done_seen)
		return protocol_error(w, "record of type %u after DONE", r->type);
	switch (r->type) {
	case WORKER_REC_HELLO:
		r->hello.reason[sizeof r->hello.reason - 1] = 0;
		if (w->hello_seen)
			return protocol_error(w, "second HELLO");
		if (r->hello.pid != w->pid || r->hello.reps != w->reps ||
		    r->hello.n_groups != w->passes ||
		    (r->hello.backend != WORKER_BACKEND_TIMING &&
		     r->hello.backend != WORKER_BACKEND_COUNTERS))
			return protocol_error(w, "HELLO does not match the job (pid %d, %u reps, %u "
						 "groups)", r->hello.pid, r->hello.reps,
					      r->hello.n_groups);
		w->hello_seen = true;
		return 0;
	case WORKER_REC_ERROR:
		r->error.message[sizeof r->error.message - 1] = 0;
		if (!w->error_seen) {
			w->error = r->error;
			w->error_seen = true;
		}
		return 0;
	case WORKER_REC_SAMPLE: {
		const struct worker_sample *s = &r->sample;
		unsigned want = w->n_groups && s->group < w->passes ? w->group_n[s->group] : 0;
		if (!w->hello_seen)
			return protocol_error(w, "SAMPLE before HELLO");
		if (!region_known(w->regions, w->n_regions, s->region) || s->group >= w->passes ||
		    s->rep >= w->reps || s->n_values != want || s->executions == 0 ||
		    s->time_running > s->time_enabled)
			return protocol_error(w, "malformed SAMPLE (region %d, group %u, rep %u, "
						 "%u values)", s->region, s->group, s->rep,
					      s->n_values);
		return 0;
	}
	case WORKER_REC_PROGRESS:
		if (!w->hello_seen || r->progress.group >= w->passes || r->progress.rep > w->reps)
			return protocol_error(w, "malformed PROGRESS");
		return 0;
	case WORKER_REC_DONE:
		if (!w->hello_seen)
			return protocol_error(w, "DONE before HELLO");
		w->done_seen = true;
		return 0;
	default:
		return protocol_error(w, "unknown record type %u", r->type);
	}
}

int worker_read(struct worker *w, void (*on_record)(void *ctx, const struct worker_record *r),
		void *ctx)
{
	size_t budget = READ_BUDGET;
	if (w->protocol)
		return -EPROTO;
	while (!w->eof && budget > 0) {
		ssize_t n = read(w->fd, w->buf + w->have, sizeof w->buf - w->have);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				kill_leftovers(w);
				return 0;
			}
			return -errno;
		}
		if (n == 0) {
			w->eof = true;
			if (w->have > 0)
				return protocol_error(w, "truncated record at end of stream");
			break;
		}
		budget = (size_t)n >= budget ? 0 : budget - (size_t)n;
		w->have += (size_t)n;
		size_t off = 0;
		while (w->have - off >= REC_SIZE) {
			struct worker_record rec;
			memcpy(&rec, w->buf + off, REC_SIZE);
			off += REC_SIZE;
			int r = check_record(w, &rec);
			if (r < 0)
				return r;
			if (on_record)
				on_record(ctx, &rec);
		}
		memmove(w->buf, w->buf + off, w->have - off);
		w->have -= off;
	}
	return w->eof ? 1 : 0;
}

int worker_check_timeout(struct worker *w, uint64_t now)
{
	if (w->ended || w->timed_out || now < w->deadline)
		return 0;
	w->timed_out = true;
	kill_group(w);
	return 1;
}

static void classify(struct worker *w, int ws, const struct rusage *ru)
{
	struct worker_status *st = &w->status;
	memset(st, 0, sizeof *st);
	st->cpu_s = (double)ru->ru_utime.tv_sec + ru->ru_utime.tv_usec / 1e6 +
		    (double)ru->ru_stime.tv_sec + ru->ru_stime.tv_usec / 1e6;
	bool as_error = w->error_seen && w->error.code == -ENOMEM && w->as_bytes > 0;

	if (w->protocol) {
		st->end = WORKER_END_PROTOCOL;
		st->signal = WIFSIGNALED(ws) ? WTERMSIG(ws) : 0;
		snprintf(st->message, sizeof st->message, "the worker sent malformed results (%s); "
			 "killed", w->protocol_msg);
		return;
	}
	if (WIFEXITED(ws)) {
		st->exit_code = WEXITSTATUS(ws);
		if (st->exit_code == 0 && w->done_seen) {
			st->end = WORKER_END_OK;
			snprintf(st->message, sizeof st->message, "completed");
		} else if (w->error_seen) {
			st->end = as_error ? WORKER_END_AS_LIMIT : WORKER_END_FAILED;
			snprintf(st->message, sizeof st->message, "%s", w->error.message);
		} else if (st->exit_code == EXIT_PIPE) {
			st->end = WORKER_END_EXITED;
			snprintf(st->message, sizeof st->message, "the worker lost its result pipe "
				 "(exit code %d)", st->exit_code);
		} else {
			st->end = WORKER_END_EXITED;
			snprintf(st->message, sizeof st->message, "the worker exited with code %d "
				 "before finishing (the model called exit()?)", st->exit_code);
		}
		return;
	}
	int sig = WIFSIGNALED(ws) ? WTERMSIG(ws) : 0;
	st->signal = sig;
	if (w->timed_out && sig == SIGKILL) {
		st->end = WORKER_END_TIMEOUT;
		snprintf(st->message, sizeof st->message, "wall-clock timeout of %u ms exceeded; "
			 "the worker was killed", w->timeout_ms);
	} else if (w->cpu_seconds > 0 &&
		   (sig == SIGXCPU || (sig == SIGKILL && st->cpu_s >= w->cpu_seconds))) {
		st->end = WORKER_END_CPU_LIMIT;
		snprintf(st->message, sizeof st->message, "CPU time limit of %u s exceeded (%.2f s "
			 "used); killed by %s", w->cpu_seconds, st->cpu_s, worker_signal_name(sig));
	} else if (as_error) {
		st->end = WORKER_END_AS_LIMIT;
		snprintf(st->message, sizeof st->message, "%s", w->error.message);
	} else {
		st->end = WORKER_END_SIGNALED;
		if (w->error_seen)
			snprintf(st->message, sizeof st->message, "killed by %s after: %s",
				 worker_signal_name(sig), w->error.message);
		else
			snprintf(st->message, sizeof st->message, "killed by %s (%s)",
				 worker_signal_name(sig), strsignal(sig));
	}
}

/* What the job's cgroup refused or killed, said after the status message: a fork refused at
 * pids.max is often what made the model fail, and an OOM kill at memory.max explains the
 * SIGKILL. */
static void note_cgroup_events(struct worker *w)
{
	if (!w->cg)
		return;
	struct cgroup_job_events ev;
	cgroup_job_events(w->cg, &ev);
	struct worker_status *st = &w->status;
	size_t n = strlen(st->message);
	if (ev.oom_kills > 0 && st->end == WORKER_END_SIGNALED && st->signal == SIGKILL) {
		st->end = WORKER_END_AS_LIMIT;
		snprintf(st->message, sizeof st->message, "memory limit of the job's cgroup exceeded "
			 "(%s %" PRIu64 " bytes): the kernel killed %" PRIu64 " process(es) of the job",
			 ev.memory_file, w->memory_max, ev.oom_kills);
		n = strlen(st->message);
	}
	if (ev.pids_max_hits > 0) {
		snprintf(st->refused, sizeof st->refused, "the job's cgroup refused %" PRIu64
			 " fork(s) at its process limit (pids.max %" PRIu64 ")", ev.pids_max_hits,
			 w->pids_max);
		if (n < sizeof st->message)
			snprintf(st->message + n, sizeof st->message - n, "; %s", st->refused);
	}
}

int worker_reap(struct worker *w, struct worker_status *st)
{
	if (!w->ended) {
		siginfo_t si;
		memset(&si, 0, sizeof si);
		/* look first without reaping: while it is a zombie its pid (the process group id)
		 * cannot be reused, so leftovers of the group can be killed safely */
		if (waitid(P_PID, (id_t)w->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
			return -errno;
		if (si.si_pid == 0)
			return 0;
		kill_job(w); /* descendants the model left behind */
		int ws;
		struct rusage ru;
		pid_t r;
		do
			r = wait4(w->pid, &ws, 0, &ru);
		while (r < 0 && errno == EINTR);
		if (r < 0)
			return -errno;
		w->ended = true;
		classify(w, ws, &ru);
		note_cgroup_events(w);
	}
	if (st)
		*st = w->status;
	return 1;
}

static bool pid_kept(pid_t pid, const pid_t *keep, size_t n_keep)
{
	for (size_t i = 0; i < n_keep; i++)
		if (keep[i] == pid)
			return true;
	return false;
}

/* __WALL: a clone() child may have been made with an exit signal other than SIGCHLD. */
static bool reap_one(pid_t pid)
{
	int ws;
	return waitpid(pid, &ws, WNOHANG | __WALL) == pid;
}

static void closedirp(DIR **d)
{
	if (*d)
		closedir(*d);
}

/* The children of every thread of this process (each thread's own list) in kernels with
 * CONFIG_PROC_CHILDREN; -1 when there is no such file. */
static int reap_listed(const pid_t *keep, size_t n_keep, unsigned *reaped)
{
	_cleanup_(closedirp) DIR *d = opendir("/proc/self/task");
	if (!d)
		return -1;
	bool listed = false;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		char path[64];
		snprintf(path, sizeof path, "/proc/self/task/%s/children", e->d_name);
		_cleanup_(fclosep) FILE *f = fopen(path, "re");
		if (!f)
			continue;
		listed = true;
		long pid;
		while (fscanf(f, "%ld", &pid) == 1)
			if (pid > 0 && !pid_kept((pid_t)pid, keep, n_keep) && reap_one((pid_t)pid))
				(*reaped)++;
	}
	return listed ? 0 : -1;
}

unsigned worker_reap_strays(const pid_t *keep, size_t n_keep)
{
	unsigned reaped = 0;
	if (reap_listed(keep, n_keep, &reaped) == 0)
		return reaped;
	/* Without the lists: the first exited child each time, until it is a worker's. */
	for (;;) {
		siginfo_t si;
		memset(&si, 0, sizeof si);
		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT | __WALL) < 0 || si.si_pid == 0 ||
		    pid_kept(si.si_pid, keep, n_keep) || !reap_one(si.si_pid))
			return reaped;
		reaped++;
	}
}

void worker_free(struct worker *w)
{
	if (!w)
		return;
	if (!w->ended) {
		kill_group(w);
		int ws;
		while (waitpid(w->pid, &ws, 0) < 0 && errno == EINTR)
			;
		w->ended = true;
	}
	cgroup_job_end(w->cg);
	closep(&w->fd);
	closep(&w->pidfd);
	free(w->regions);
	free(w);
}
