/* SPDX-License-Identifier: MIT */
/*
 * worker_helper.c: pimd-worker, the helper a profiling worker executes: the job read back, limits
 * and the seccomp filter, then the model loaded and measured; its records to the parent.
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

static long page_size;

static uint64_t as_limit;       /* RLIMIT_AS set, 0: none */

static uint64_t as_base;        /* footprint when it was set */

static uint64_t as_allowed;     /* the job's as_bytes */

static int crash_fd = -1;

#ifndef SYS_clone3
#define SYS_clone3 435 /* the same on x86-64 and arm64 */
#endif

#if defined(__x86_64__)
#define WORKER_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define WORKER_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

static void out_flush(struct out *o);
static void out_push(struct out *o, const struct worker_record *r);
static void emit_sample(void *ctx, const struct worker_record *r);
static uint64_t vm_size(void);
static bool as_near_limit(uint64_t *used);
static size_t app_str(char *b, size_t at, size_t cap, const char *s);
static size_t app_u64(char *b, size_t at, size_t cap, uint64_t v);
static void on_crash(int sig);
static void install_crash_handlers(void *altstack, size_t len);
static int set_limits(const struct worker_job *job, struct pim_error *err);
static int install_seccomp(struct pim_error *err);
static void fill_buffer(uint8_t *p, uint64_t len, enum worker_fill fill, uint64_t *state);
static int helper_read_job(struct worker_wire *wire, struct pim_error *err);
static void helper_take_counters(struct out *o, const struct worker_job *job,
				 struct counters_group *groups);
static void helper_hello(struct out *o, const struct worker_wire *wire);
static pim_model_entry_fn helper_load_model(struct out *o, const struct worker_job *job);
static void helper_map_args(struct out *o, const struct worker_job *job, void **args);
static void helper_run(struct out *o, pim_model_entry_fn entry, void **args, size_t n_args,
		       bool warmup, unsigned g, unsigned rep);
static void helper_measure(struct out *o, const struct worker_job *job,
			   struct counters_group *groups, pim_model_entry_fn entry, void **args);

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

_Noreturn void worker_child_fail(struct out *o, int code, int32_t region, const char *fmt, ...)
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

static int set_limits(const struct worker_job *job, struct pim_error *err)
{
	struct rlimit rl = { 0, 0 };
	if (setrlimit(RLIMIT_CORE, &rl) < 0)
		return err_set(err, -errno, "setrlimit(RLIMIT_CORE) failed: %s", strerror(errno));
	/* pimd may lower its loop's and writer's nice values (RLIMIT_NICE, pimd.service's
	 * LimitNICE; priority.h): the model may not lower its own, and starts at nice 0 or at
	 * pimd's (worker_job.nice), whichever is higher */
	if (setrlimit(RLIMIT_NICE, &rl) < 0)
		return err_set(err, -errno, "setrlimit(RLIMIT_NICE) failed: %s", strerror(errno));
	errno = 0;
	int nice_now = getpriority(PRIO_PROCESS, 0);
	if (!errno && nice_now < 0 && setpriority(PRIO_PROCESS, 0, 0) < 0)
		return err_set(err, -errno, "setpriority(0) failed: %s", strerror(errno));
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
			if (!worker_fd_open(next))
				worker_child_fail(o, -EBADF, -1, "worker setup: event group %u: descriptor "
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
		worker_child_fail(o, -ENOEXEC, -1, "cannot load the model library: %s", dlerror());
	close(WORKER_FD_MODEL);
	const uint64_t *built_for = dlsym(lib, PIM_MODEL_DIGEST);
	if (job->manifest_digest && built_for && *built_for != job->manifest_digest)
		worker_child_fail(o, -ESTALE, -1, "the model library was built for another manifest "
					   "(library digest %016llx, loaded manifest %016llx): "
					   "load the manifest pim-extract wrote with this library, or "
					   "rebuild both from the same source",
			   (unsigned long long)*built_for, (unsigned long long)job->manifest_digest);
	const char *target = dlsym(lib, PIM_MODEL_TARGET);
	if (target && target[0] && !cpulevel_runs_here(target))
		worker_child_fail(o, -ENOEXEC, -1, "the model library's host code was built for %.16s (%s), "
					    "which this CPU does not have: rebuild it here with pim-extract "
					    "(--target native, the default)",
			   target, cpulevel_needs(target));
	pim_model_entry_fn entry;
	*(void **)&entry = dlsym(lib, PIM_MODEL_ENTRY);
	if (!entry)
		worker_child_fail(o, -ENOEXEC, -1, "the model library does not export %s "
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
				worker_child_fail(o, -ENOMEM, -1, "address-space limit of %llu bytes "
							   "exceeded allocating arguments: argument "
							   "%zu (%llu bytes) after %llu bytes of "
							   "arguments",
					   (unsigned long long)as_allowed, i,
					   (unsigned long long)len, (unsigned long long)mapped);
			worker_child_fail(o, -ENOMEM, -1, "out of memory allocating argument %zu (%llu "
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
		worker_child_fail(o, -ENOMEM, -1, "address-space limit of %llu bytes exceeded: pim_model_entry "
					   "returned %d in %s with %llu bytes mapped",
			   (unsigned long long)as_allowed, rc, run, (unsigned long long)used);
	if (warmup)
		worker_child_fail(o, -ECANCELED, -1, "pim_model_entry returned %d in %s", rc, run);
	worker_child_fail(o, -ECANCELED, -1, "pim_model_entry returned %d in %s of group %u", rc, run, g);
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
				worker_child_fail(o, err.code, -1, "event group %u: %s", g, err.msg);
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
		worker_child_fail(&o, err.code, -1, "%s", err.msg);
	const struct worker_job *job = &wire.job;
	helper_take_counters(&o, job, groups);

	unsigned max_values = 0;
	for (unsigned g = 0; g < job->n_groups; g++)
		if (job->groups[g].n > max_values)
			max_values = job->groups[g].n;
	if (worker_hooks_setup(job, max_values, &err) < 0)
		worker_child_fail(&o, err.code, -1, "worker setup: %s", err.msg);
	if (job->cpu >= 0 && counters_pin_cpu(job->cpu, &err) < 0)
		worker_child_fail(&o, err.code, -1, "%s", err.msg);
	uint64_t t_start = now_ns();
	helper_hello(&o, &wire);

	/* Allocations the model can't touch come first, then the limits, then the model. */
	size_t alt_len = 64 * 1024;
	void *alt = mmap(NULL, alt_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void **args = calloc(job->n_args ? job->n_args : 1, sizeof *args);
	if (alt == MAP_FAILED || !args)
		worker_child_fail(&o, -ENOMEM, -1, "worker setup: out of memory");
	if (set_limits(job, &err) < 0)
		worker_child_fail(&o, err.code, -1, "%s", err.msg);
	if (install_seccomp(&err) < 0)
		worker_child_fail(&o, err.code, -1, "%s", err.msg);
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
