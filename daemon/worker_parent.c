/* SPDX-License-Identifier: MIT */
/*
 * worker_parent.c: the parent side of a profiling worker, in pimd: spawn, read its records, time out,
 * reap and kill (worker_int.h names the other parts).
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

	/* records read from the pipe: bytes [next, have) of buf, the next one first */
	size_t have, next;
	size_t budget;              /* bytes worker_next() may still read before it answers 0 */
	union {
		struct worker_record rec[64];
		uint8_t bytes[64 * REC_SIZE];
	} buf;
};


static void kill_group(struct worker *w);
static void kill_leftovers(struct worker *w);
static int protocol_error(struct worker *w, const char *fmt, ...) _printf_(2, 3);
static int check_record(struct worker *w, struct worker_record *r);
static void classify(struct worker *w, int ws, const struct rusage *ru);
static void note_cgroup_events(struct worker *w);
static bool pid_kept(pid_t pid, const pid_t *keep, size_t n_keep);
static bool reap_one(pid_t pid);
static void closedirp(DIR **d);
static int reap_listed(const pid_t *keep, size_t n_keep, unsigned *reaped);

int worker_spawn(const struct worker_job *job, struct worker **out, struct pim_error *err)
{
	*out = NULL;
	int r = worker_job_validate(job, err);
	if (r < 0)
		return r;

	_cleanup_(freep) struct worker *w = calloc(1, sizeof *w);
	if (!w)
		return err_set(err, -ENOMEM, "worker: out of memory");
	r = worker_sorted_regions(job, &w->regions, err);
	if (r < 0)
		return r;
	w->n_regions = job->n_regions;
	w->fd = w->pidfd = -1;
	w->budget = READ_BUDGET;
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
		worker_child_main(job, p[1], job_fd, helper_fd, w->cg, parent);
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
		if (!worker_region_known(w->regions, w->n_regions, s->region) || s->group >= w->passes ||
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

int worker_next(struct worker *w, const struct worker_record **rec)
{
	if (w->protocol)
		return -EPROTO;
	for (;;) {
		if (w->have - w->next >= REC_SIZE) {
			/* (next is a multiple of REC_SIZE: records stay aligned in buf) */
			struct worker_record *r = &w->buf.rec[w->next / REC_SIZE];
			w->next += REC_SIZE;
			int k = check_record(w, r);
			if (k < 0)
				return k;
			*rec = r;
			return 1;
		}
		if (w->eof)
			return WORKER_EOF;
		if (w->budget == 0) {
			w->budget = READ_BUDGET; /* the next round, once the loop has looked around */
			return 0;
		}
		memmove(w->buf.bytes, w->buf.bytes + w->next, w->have - w->next);
		w->have -= w->next;
		w->next = 0;
		ssize_t n = read(w->fd, w->buf.bytes + w->have, sizeof w->buf - w->have);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				kill_leftovers(w);
				w->budget = READ_BUDGET;
				return 0;
			}
			return -errno;
		}
		if (n == 0) {
			w->eof = true;
			if (w->have > 0)
				return protocol_error(w, "truncated record at end of stream");
			return WORKER_EOF;
		}
		w->budget = (size_t)n >= w->budget ? 0 : w->budget - (size_t)n;
		w->have += (size_t)n;
	}
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
