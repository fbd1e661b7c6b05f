/* SPDX-License-Identifier: MIT */
/*
 * test_worker.c: the profiling worker end to end on the test models (tests/models, found at
 * $PIMD_TEST_MODELS): timing backend, software-event groups, containment (uid switch,
 * capabilities, limits, crash, hang), the hook contract, job validation.
 *
 * The hooks are exported from this executable (-rdynamic): the models resolve them here.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/capability.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "counters.h"
#include "pim_hooks.h"
#include "test_util.h"
#include "worker.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_RAISE 2
#endif

/* Sizes the models are compiled with (the sources in tests/models). */
#define STREAM_BYTES (UINT64_C(64) << 20)
#define COMPUTE_BYTES UINT64_C(4096)
#define THREE_BYTES (UINT64_C(1) << 20)
#define NOBODY 65534

#define MAX_SAMPLES 256

struct run {
	bool hello_seen;
	struct worker_hello hello;
	struct worker_sample sample[MAX_SAMPLES];
	size_t n_samples;
	unsigned n_errors;
	struct worker_error error;
	unsigned n_progress;
	struct worker_progress last_progress;
	bool done;
	int read_rc;
	struct worker_status st;
	pid_t pid;
};

static void collect(struct run *run, const struct worker_record *r)
{
	switch (r->type) {
	case WORKER_REC_HELLO:
		run->hello_seen = true;
		run->hello = r->hello;
		break;
	case WORKER_REC_SAMPLE:
		ck_assert_uint_lt(run->n_samples, MAX_SAMPLES);
		run->sample[run->n_samples++] = r->sample;
		break;
	case WORKER_REC_ERROR:
		if (run->n_errors++ == 0)
			run->error = r->error;
		break;
	case WORKER_REC_PROGRESS:
		run->n_progress++;
		run->last_progress = r->progress;
		break;
	case WORKER_REC_DONE:
		run->done = true;
		break;
	}
}

static int open_model(const char *name)
{
	const char *dir = getenv("PIMD_TEST_MODELS");
	char path[4096];
	snprintf(path, sizeof path, "%s/%s.so", dir && *dir ? dir : "build/tests/models", name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "cannot open model %s (set PIMD_TEST_MODELS): %m", path);
	return fd;
}

/* Spawns the job and drives it like pimd's loop would, until the worker is reaped. */
static void run_job(const struct worker_job *job, struct run *run)
{
	struct pim_error err = { 0 };
	struct worker *w = NULL;
	memset(run, 0, sizeof *run);
	ck_assert_msg(worker_spawn(job, &w, &err) == 0, "%s", err.msg);
	run->pid = worker_pid(w);

	uint64_t give_up = now_ns() + UINT64_C(40) * 1000000000u;
	bool eof = false;
	for (;;) {
		if (!eof) {
			const struct worker_record *rec;
			int r;
			while ((r = worker_next(w, &rec)) == 1)
				collect(run, rec);
			if (r != 0)
				eof = true;
			if (r < 0)
				run->read_rc = r;
		}
		worker_check_timeout(w, now_ns());
		if (eof) {
			int r = worker_reap(w, &run->st);
			ck_assert_int_ge(r, 0);
			if (r == 1)
				break;
		}
		struct pollfd p[2] = { { .fd = eof ? -1 : worker_fd(w), .events = POLLIN },
				       { .fd = worker_pidfd(w), .events = POLLIN } };
		poll(p, 2, 20);
		ck_assert_msg(now_ns() < give_up, "worker did not finish within 40 s");
	}
	worker_free(w);
	if (getenv("PIMD_TEST_VERBOSE"))
		fprintf(stderr, "worker %d: end %d, %s | hello: uid %u backend %u: %s | %zu samples\n",
			(int)run->pid, run->st.end, run->st.message, run->hello.uid,
			run->hello.backend, run->hello.reason, run->n_samples);
}

/* The helper the workers execute: $PIMD_TEST_WORKER (make unit sets it). */
static const char *helper_path(void)
{
	const char *p = getenv("PIMD_TEST_WORKER");
	return p && *p ? p : "build/pimd-worker";
}

/* The helper opened ahead, by a test about to give up root (the checkout may be in a directory
 * only root can enter); -1: base_job names the path. */
static int helper_fd = -1;

static void open_helper_now(void)
{
	helper_fd = open(helper_path(), O_RDONLY | O_CLOEXEC);
	ck_assert_msg(helper_fd >= 0, "cannot open %s: %m", helper_path());
}

static void base_job(struct worker_job *job, int fd, const uint64_t *args, size_t n_args,
		     const int32_t *regions, size_t n_regions)
{
	worker_job_init(job);
	job->helper = helper_path();
	job->helper_fd = helper_fd;
	job->model_fd = fd;
	job->arg_bytes = args;
	job->n_args = n_args;
	job->regions = regions;
	job->n_regions = n_regions;
	job->reps = 5;
	job->warmups = 1;
	job->timeout_ms = 30000;
	job->as_bytes = UINT64_C(1) << 30;
}

static const struct worker_sample *find_sample(const struct run *run, int32_t region,
					       uint32_t group, uint32_t rep)
{
	for (size_t i = 0; i < run->n_samples; i++)
		if (run->sample[i].region == region && run->sample[i].group == group &&
		    run->sample[i].rep == rep)
			return &run->sample[i];
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static uint64_t median_time(const struct run *run, int32_t region)
{
	uint64_t t[MAX_SAMPLES];
	size_t n = 0;
	for (size_t i = 0; i < run->n_samples; i++)
		if (run->sample[i].region == region)
			t[n++] = run->sample[i].time_ns / run->sample[i].executions;
	ck_assert_uint_gt(n, 0);
	qsort(t, n, sizeof t[0], cmp_u64);
	return t[n / 2];
}

static void assert_ok(const struct run *run)
{
	ck_assert_msg(run->st.end == WORKER_END_OK, "worker ended with %d: %s", run->st.end,
		      run->st.message);
	ck_assert(run->hello_seen);
	ck_assert(run->done);
	ck_assert_int_eq(run->read_rc, 0);
}

/* One region, timing backend: HELLO says so plainly, K samples with times, no values. */
static void check_timing_single(const char *model, const uint64_t *args, size_t n_args,
				struct run *run)
{
	int fd = open_model(model);
	const int32_t regions[] = { 0 };
	struct worker_job job;
	base_job(&job, fd, args, n_args, regions, 1);
	job.reason = "PMU unavailable: test";
	run_job(&job, run);
	close(fd);

	assert_ok(run);
	ck_assert_uint_eq(run->hello.backend, WORKER_BACKEND_TIMING);
	ck_assert_uint_eq(run->hello.uid, getuid());
	ck_assert_uint_eq(run->hello.n_groups, 1);
	ck_assert_ptr_nonnull(strstr(run->hello.reason, "timing backend"));
	ck_assert_ptr_nonnull(strstr(run->hello.reason, "PMU unavailable: test"));
	ck_assert_int_eq(run->hello.pid, run->pid);
	ck_assert_uint_eq(run->n_samples, 5);
	ck_assert_uint_eq(run->n_progress, 5);
	ck_assert_uint_eq(run->last_progress.done, 5);
	ck_assert_uint_eq(run->last_progress.total, 5);
	for (uint32_t rep = 0; rep < 5; rep++) {
		const struct worker_sample *s = find_sample(run, 0, 0, rep);
		ck_assert_ptr_nonnull(s);
		ck_assert_uint_eq(s->executions, 1);
		ck_assert_uint_eq(s->n_values, 0);
		ck_assert_uint_eq(s->time_enabled, 0);
		ck_assert_uint_eq(s->time_running, 0);
		ck_assert_uint_gt(s->time_ns, 0);
	}
}

START_TEST(test_timing_stream_read)
{
	const uint64_t args[] = { STREAM_BYTES, 8 };
	struct run run;
	check_timing_single("stream_read", args, 2, &run);
	/* 64 MiB cannot be read in under 0.3 ms (200 GB/s): the loop really ran */
	ck_assert_uint_gt(median_time(&run, 0), 300000);
}
END_TEST

START_TEST(test_timing_stream_write)
{
	const uint64_t args[] = { STREAM_BYTES };
	struct run run;
	check_timing_single("stream_write", args, 1, &run);
	ck_assert_uint_gt(median_time(&run, 0), 300000);
}
END_TEST

START_TEST(test_timing_compute)
{
	const uint64_t args[] = { COMPUTE_BYTES };
	struct run run;
	check_timing_single("compute", args, 1, &run);
	ck_assert_uint_gt(median_time(&run, 0), 300000); /* 10 M multiply-adds */
}
END_TEST

/* doc/design.md §4.4 timing backend: BW_read = unique read bytes / T_host. The streaming read must
 * come out above the compute-bound loop, by a wide margin. */
START_TEST(test_estimated_bandwidth_order)
{
	const uint64_t rd_args[] = { STREAM_BYTES, 8 }, cp_args[] = { COMPUTE_BYTES };
	struct run rd, cp;
	check_timing_single("stream_read", rd_args, 2, &rd);
	check_timing_single("compute", cp_args, 1, &cp);
	double bw_rd = (double)STREAM_BYTES / ((double)median_time(&rd, 0) * 1e-9);
	double bw_cp = (double)COMPUTE_BYTES / ((double)median_time(&cp, 0) * 1e-9);
	if (getenv("PIMD_TEST_VERBOSE"))
		fprintf(stderr, "estimated BW_read: stream_read %.2f GB/s (%.2f ms), compute %.6f "
			"GB/s (%.2f ms)\n", bw_rd / 1e9, (double)median_time(&rd, 0) / 1e6,
			bw_cp / 1e9, (double)median_time(&cp, 0) / 1e6);
	ck_assert_msg(bw_rd > 100 * bw_cp, "stream_read %.3g B/s vs compute %.3g B/s", bw_rd,
		      bw_cp);
}
END_TEST

START_TEST(test_three_regions_program_order)
{
	int fd = open_model("three_regions");
	const uint64_t args[] = { THREE_BYTES };
	const int32_t regions[] = { 4, 3, 2, 1, 0 }; /* any order in the manifest */
	struct worker_job job;
	base_job(&job, fd, args, 1, regions, 5);
	job.reps = 3;
	struct run run;
	run_job(&job, &run);
	close(fd);

	assert_ok(&run);
	ck_assert_uint_eq(run.n_samples, 15);
	for (uint32_t rep = 0; rep < 3; rep++) {
		const struct worker_sample *s[5];
		for (int32_t r = 0; r < 5; r++) {
			s[r] = find_sample(&run, r, 0, rep);
			ck_assert_ptr_nonnull(s[r]);
		}
		for (int r = 0; r < 4; r++)
			ck_assert_uint_eq(s[r]->executions, 1);
		ck_assert_uint_eq(s[4]->executions, 4);          /* trip 4 inside region 3 */
		ck_assert_uint_ge(s[3]->time_ns, s[4]->time_ns); /* the outer contains the inner */
	}
}
END_TEST

START_TEST(test_measure_subset)
{
	int fd = open_model("three_regions");
	const uint64_t args[] = { THREE_BYTES };
	const int32_t regions[] = { 0, 1, 2, 3, 4 }, measure[] = { 4, 1 };
	struct worker_job job;
	base_job(&job, fd, args, 1, regions, 5);
	job.measure = measure;
	job.n_measure = 2;
	job.reps = 2;
	job.fill = WORKER_FILL_RANDOM;
	struct run run;
	run_job(&job, &run);
	close(fd);

	assert_ok(&run);
	ck_assert_uint_eq(run.n_samples, 4);
	for (size_t i = 0; i < run.n_samples; i++)
		ck_assert(run.sample[i].region == 1 || run.sample[i].region == 4);
}
END_TEST

START_TEST(test_region_not_in_manifest)
{
	int fd = open_model("three_regions");
	const uint64_t args[] = { THREE_BYTES };
	const int32_t regions[] = { 0, 1, 3, 4 };
	struct worker_job job;
	base_job(&job, fd, args, 1, regions, 4);
	struct run run;
	run_job(&job, &run);
	close(fd);

	ck_assert_int_eq(run.st.end, WORKER_END_FAILED);
	ck_assert_uint_eq(run.n_errors, 1);
	ck_assert_int_eq(run.error.region, 2);
	ck_assert_ptr_nonnull(strstr(run.st.message, "pim_region_enter(2): region 2 is not in "
						     "the manifest"));
	ck_assert_uint_eq(run.n_samples, 0); /* warm-up failed: nothing recorded */
}
END_TEST

START_TEST(test_reenter_is_an_error)
{
	int fd = open_model("reenter");
	const int32_t regions[] = { 7 };
	struct worker_job job;
	base_job(&job, fd, NULL, 0, regions, 1);
	job.warmups = 0;
	struct run run;
	run_job(&job, &run);
	close(fd);

	ck_assert_int_eq(run.st.end, WORKER_END_FAILED);
	ck_assert_uint_eq(run.n_errors, 1);
	ck_assert_int_eq(run.error.region, 7);
	ck_assert_int_eq(run.error.code, -EPROTO);
	ck_assert_ptr_nonnull(strstr(run.error.message, "re-entry of region 7"));
	ck_assert_ptr_nonnull(strstr(run.st.message, "re-entry of region 7"));
	ck_assert_uint_eq(run.n_samples, 0); /* no silent miscount */
}
END_TEST

START_TEST(test_crash_named)
{
	int fd = open_model("crash");
	const int32_t regions[] = { 0 };
	struct worker_job job;
	base_job(&job, fd, NULL, 0, regions, 1);
	struct run run;
	run_job(&job, &run);
	close(fd);

	ck_assert_int_eq(run.st.end, WORKER_END_SIGNALED);
	ck_assert_int_eq(run.st.signal, SIGSEGV);
	ck_assert_msg(strncmp(run.st.message, "killed by SIGSEGV", 17) == 0, "%s",
		      run.st.message);
	ck_assert(run.hello_seen);
	ck_assert(!run.done);
}
END_TEST

START_TEST(test_hang_wall_clock_timeout)
{
	int fd = open_model("hang");
	const int32_t regions[] = { 0 };
	struct worker_job job;
	base_job(&job, fd, NULL, 0, regions, 1);
	job.timeout_ms = 300;
	job.cpu_seconds = 20;
	uint64_t t0 = now_ns();
	struct run run;
	run_job(&job, &run);
	close(fd);

	ck_assert_int_eq(run.st.end, WORKER_END_TIMEOUT);
	ck_assert_int_eq(run.st.signal, SIGKILL);
	ck_assert_str_eq(run.st.message, "wall-clock timeout of 300 ms exceeded; the worker was "
					 "killed");
	ck_assert_uint_lt(now_ns() - t0, UINT64_C(5) * 1000000000u);
	ck_assert_int_eq(kill(run.pid, 0), -1); /* gone, and reaped */
	ck_assert_int_eq(errno, ESRCH);
}
END_TEST

START_TEST(test_hang_cpu_limit)
{
	int fd = open_model("hang");
	const int32_t regions[] = { 0 };
	struct worker_job job;
	base_job(&job, fd, NULL, 0, regions, 1);
	job.cpu_seconds = 1;
	job.timeout_ms = 20000;
	struct run run;
	run_job(&job, &run);
	close(fd);

	ck_assert_msg(run.st.end == WORKER_END_CPU_LIMIT, "%d: %s", run.st.end, run.st.message);
	ck_assert_ptr_nonnull(strstr(run.st.message, "CPU time limit of 1 s exceeded"));
	ck_assert_int_eq(run.st.signal, SIGXCPU);
	/* rusage is sampled at tick granularity, and on a loaded VM it was seen to read 0.886 s
	 * when the 1 s limit struck */
	ck_assert_msg(run.st.cpu_s >= 0.8, "CPU time %.3f s", run.st.cpu_s);
}
END_TEST

START_TEST(test_hog_address_space_limit)
{
	int fd = open_model("hog");
	const int32_t regions[] = { 0 };
	struct worker_job job;
	base_job(&job, fd, NULL, 0, regions, 1);
	job.as_bytes = UINT64_C(256) << 20;
#ifdef __SANITIZE_ADDRESS__
	job.timeout_ms = 3000;
#endif
	struct run run;
	run_job(&job, &run);
	close(fd);

#ifdef __SANITIZE_ADDRESS__
	/* Under ASan the model's malloc is ASan's, whose allocator stops at a failed mmap with a
	 * CHECK failure and hangs in its own Die(): the job must still end, contained. */
	ck_assert_int_ne(run.st.end, WORKER_END_OK);
	ck_assert_int_eq(kill(run.pid, 0), -1);
	return;
#endif
	ck_assert_msg(run.st.end == WORKER_END_AS_LIMIT, "%d: %s", run.st.end, run.st.message);
	ck_assert_ptr_nonnull(strstr(run.st.message, "address-space limit of 268435456 bytes "
						     "exceeded"));
	ck_assert_ptr_nonnull(strstr(run.st.message, "killed by SIGSEGV"));
}
END_TEST

START_TEST(test_arguments_over_address_space_limit)
{
	int fd = open_model("stream_read");
	const uint64_t args[] = { UINT64_C(1) << 30, 8 };
	const int32_t regions[] = { 0 };
	struct worker_job job;
	base_job(&job, fd, args, 2, regions, 1);
	job.as_bytes = UINT64_C(256) << 20;
	struct run run;
	run_job(&job, &run);
	close(fd);

	ck_assert_msg(run.st.end == WORKER_END_AS_LIMIT, "%d: %s", run.st.end, run.st.message);
	ck_assert_ptr_nonnull(strstr(run.st.message, "address-space limit of 268435456 bytes "
						     "exceeded allocating arguments: argument 0 "
						     "(1073741824 bytes)"));
}
END_TEST

START_TEST(test_model_failure_named)
{
	int fd = open_model("stream_read");
	const uint64_t args[] = { 8 }; /* the model wants two arguments: returns 1 */
	const int32_t regions[] = { 0 };
	struct worker_job job;
	base_job(&job, fd, args, 1, regions, 1);
	struct run run;
	run_job(&job, &run);
	close(fd);

	ck_assert_int_eq(run.st.end, WORKER_END_FAILED);
	ck_assert_str_eq(run.st.message, "pim_model_entry returned 1 in warm-up run 0");
}
END_TEST

START_TEST(test_forged_records_rejected)
{
	int fd = open_model("forge");
	const int32_t regions[] = { 0 };
	struct worker_job job;
	base_job(&job, fd, NULL, 0, regions, 1);
	struct run run;
	run_job(&job, &run);
	close(fd);

	ck_assert_int_eq(run.read_rc, -EPROTO);
	ck_assert_int_eq(run.st.end, WORKER_END_PROTOCOL);
	ck_assert_int_eq(run.st.signal, SIGKILL);
	ck_assert_str_eq(run.st.message, "the worker sent malformed results (unknown record type "
					 "99); killed");
}
END_TEST

START_TEST(test_free_kills_running_worker)
{
	int fd = open_model("hang");
	const int32_t regions[] = { 0 };
	struct worker_job job;
	base_job(&job, fd, NULL, 0, regions, 1);
	struct worker *w = NULL;
	struct pim_error err = { 0 };
	ck_assert_msg(worker_spawn(&job, &w, &err) == 0, "%s", err.msg);
	close(fd);
	pid_t pid = worker_pid(w);
	struct worker_status st;
	ck_assert_int_eq(worker_reap(w, &st), 0); /* still running */
	ck_assert_int_eq(worker_check_timeout(w, now_ns()), 0);
	worker_free(w);
	ck_assert_int_eq(kill(pid, 0), -1);
	ck_assert_int_eq(errno, ESRCH);
}
END_TEST

/* whoami enters region getuid() and 200000 + getgid(), and returns nonzero unless the
 * containment holds (no capabilities, no ambient set, NO_NEW_PRIVS, no groups, no core). */
/* fd: the whoami model, opened by the caller (before it gives up its uid: the checkout may be
 * in a directory only root can enter, like a clone under /root); closed here. */
static void run_whoami_fd(int fd, uid_t uid, gid_t gid, struct run *run)
{
	const int32_t regions[] = { 0, 1, 65534, 200000, 200001, 265534 };
	struct worker_job job;
	base_job(&job, fd, NULL, 0, regions, ELEMENTSOF(regions));
	job.uid = uid;
	job.gid = gid;
	job.reps = 1;
	job.warmups = 0;
	run_job(&job, run);
	close(fd);
}

static void run_whoami(uid_t uid, gid_t gid, struct run *run)
{
	run_whoami_fd(open_model("whoami"), uid, gid, run);
}

static void assert_ran_as(const struct run *run, uid_t uid, gid_t gid)
{
	assert_ok(run);
	ck_assert_uint_eq(run->hello.uid, uid);
	ck_assert_uint_eq(run->hello.gid, gid);
	ck_assert_uint_eq(run->n_samples, 2);
	ck_assert_ptr_nonnull(find_sample(run, (int32_t)uid, 0, 0));
	ck_assert_ptr_nonnull(find_sample(run, 200000 + (int32_t)gid, 0, 0));
}

/* tests/models/niceness as nobody, from a worker job at nice value nice (INT_MIN:
 * worker_job_init's); the nice value the model ran at (region N for nice N), -1: none. */
static int run_niceness(int nice)
{
	int32_t regions[20];
	for (int i = 0; i < 20; i++)
		regions[i] = i;
	int fd = open_model("niceness");
	struct worker_job job;
	struct run run;
	base_job(&job, fd, NULL, 0, regions, ELEMENTSOF(regions));
	if (nice != INT_MIN)
		job.nice = nice;
	job.uid = job.gid = NOBODY;
	job.reps = 1;
	job.warmups = 0;
	run_job(&job, &run);
	close(fd);
	assert_ok(&run);
	ck_assert_uint_eq(run.n_samples, 1);
	for (int i = 0; i < 20; i++)
		if (find_sample(&run, i, 0, 0))
			return i;
	return -1;
}

START_TEST(test_runs_as_requesting_user)
{
	struct run run;
	run_whoami(NOBODY, NOBODY, &run);
	assert_ran_as(&run, NOBODY, NOBODY);
}
END_TEST

/* A worker started by a thread of pimd's at a lower nice value (the loop's, priority.h) or with
 * leave to lower it (RLIMIT_NICE, pimd.service's LimitNICE) runs the model at nice 0 or above,
 * with no such leave: whoami returns 22 otherwise.  (Raising RLIMIT_NICE takes
 * CAP_SYS_RESOURCE: where that is refused, the nice value alone is handed down; lowering the
 * nice value takes CAP_SYS_NICE: where that is refused, there is nothing to hand down.) */
START_TEST(test_model_gets_no_priority)
{
	struct rlimit rl = { 25, 25 };
	int fd = open_model("whoami");

	(void)setrlimit(RLIMIT_NICE, &rl);
	if (setpriority(PRIO_PROCESS, 0, -5) < 0 && (errno == EACCES || errno == EPERM)) {
		printf("SKIP test_model_gets_no_priority: setpriority(-5): %m\n");
		fflush(stdout);
		close(fd);
		return;
	}
	ck_assert_int_eq(getpriority(PRIO_PROCESS, 0), -5);
	struct run run;
	run_whoami_fd(fd, NOBODY, NOBODY, &run); /* worker_job_init's nice: the thread's, -5 */
	assert_ran_as(&run, NOBODY, NOBODY);
	ck_assert_int_eq(run_niceness(INT_MIN), 0);
}
END_TEST

/* The thread that forks a worker may run below pimd's nice value (the loop's, priority.h): the
 * worker runs the model at the job's (pimd's), not at the thread's. */
START_TEST(test_model_runs_at_the_job_nice)
{
	errno = 0;
	int own = getpriority(PRIO_PROCESS, 0), want = own < 0 ? 7 : own >= 12 ? 19 : own + 7;
	ck_assert_int_eq(errno, 0);
	ck_assert_int_eq(run_niceness(want), want);
}
END_TEST

START_TEST(test_root_job_drops_capabilities)
{
	struct run run;
	run_whoami(0, 0, &run);
	assert_ran_as(&run, 0, 0); /* whoami returned 0: capabilities cleared even as root */
}
END_TEST

static void set_caps(uint64_t caps)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	memset(d, 0, sizeof d);
	for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
		d[i].permitted = d[i].effective = d[i].inheritable = (uint32_t)(caps >> (32 * i));
	ck_assert_msg(syscall(SYS_capset, &hdr, d) == 0, "capset: %m");
}

/* Become what systemd makes of pimd: a non-root uid with CAP_SETUID, CAP_SETGID, CAP_KILL and
 * CAP_PERFMON as ambient capabilities (pimd.service.in). */
static void become_daemon(uint64_t caps)
{
	ck_assert_int_eq(prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0), 0);
	ck_assert_int_eq(setgroups(0, NULL), 0);
	ck_assert_int_eq(setresgid(1, 1, 1), 0);
	ck_assert_int_eq(setresuid(1, 1, 1), 0);
	set_caps(caps);
	for (int c = 0; c < 64; c++)
		if (caps & (UINT64_C(1) << c))
			ck_assert_int_eq(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0), 0);
}

START_TEST(test_daemon_uid_with_capabilities)
{
	int fd = open_model("whoami");
	open_helper_now();
	become_daemon(UINT64_C(1) << CAP_SETUID | UINT64_C(1) << CAP_SETGID |
		      UINT64_C(1) << CAP_KILL | UINT64_C(1) << CAP_PERFMON);
	struct run run;
	run_whoami_fd(fd, NOBODY, NOBODY, &run); /* whoami checks the capabilities were cleared */
	assert_ran_as(&run, NOBODY, NOBODY);
}
END_TEST

START_TEST(test_refuses_when_it_cannot_switch)
{
	int fd = open_model("whoami");
	open_helper_now();
	become_daemon(0);
	struct run run;
	run_whoami_fd(fd, NOBODY, NOBODY, &run);
	ck_assert_int_eq(run.st.end, WORKER_END_FAILED);
	ck_assert(!run.hello_seen);
	ck_assert_uint_eq(run.n_samples, 0);
	ck_assert_msg(strstr(run.st.message, "cannot run the model as uid 65534 gid 65534: "
					     "setgroups(0) failed with EPERM; pimd (uid 1) lacks "
					     "CAP_SETGID"), "%s", run.st.message);
}
END_TEST

static struct counters_event sw_event(const char *name, uint64_t config)
{
	struct counters_event e;
	memset(&e, 0, sizeof e);
	e.name = name;
	e.attr.size = sizeof e.attr;
	e.attr.type = PERF_TYPE_SOFTWARE;
	e.attr.config = config;
	return e;
}

/* The counter path for real on a PMU-less host: software events, one group per pass. */
static void check_software_groups(uid_t uid, gid_t gid)
{
	int fd = open_model("stream_write");
	const uint64_t args[] = { STREAM_BYTES };
	const int32_t regions[] = { 0 };
	struct counters_event g0[] = { sw_event("task-clock", PERF_COUNT_SW_TASK_CLOCK),
				       sw_event("page-faults", PERF_COUNT_SW_PAGE_FAULTS) };
	struct counters_event g1[] = { sw_event("context-switches",
						PERF_COUNT_SW_CONTEXT_SWITCHES) };
	const struct worker_group groups[] = { { g0, 2 }, { g1, 1 } };
	struct worker_job job;
	base_job(&job, fd, args, 1, regions, 1);
	job.groups = groups;
	job.n_groups = 2;
	job.reps = 3;
	job.uid = uid;
	job.gid = gid;
	job.cpu = 0;
	struct run run;
	run_job(&job, &run);
	close(fd);

	assert_ok(&run);
	ck_assert_uint_eq(run.hello.backend, WORKER_BACKEND_COUNTERS);
	ck_assert_uint_eq(run.hello.uid, uid);
	ck_assert_uint_eq(run.hello.n_groups, 2);
	ck_assert_int_eq(run.hello.cpu, 0);
	ck_assert_ptr_nonnull(strstr(run.hello.reason, "task-clock, page-faults | "
						       "context-switches"));
	ck_assert_uint_eq(run.n_samples, 6);
	ck_assert_uint_eq(run.n_progress, 6);
	for (uint32_t rep = 0; rep < 3; rep++) {
		const struct worker_sample *s = find_sample(&run, 0, 0, rep);
		ck_assert_ptr_nonnull(s);
		ck_assert_uint_eq(s->n_values, 2);
		ck_assert_uint_gt(s->time_enabled, 0);
		ck_assert_uint_eq(s->time_enabled, s->time_running); /* not multiplexed */
		ck_assert_uint_gt(s->value[0], 0);                   /* task-clock, ns */
		/* task-clock is read a moment apart from the group times */
		ck_assert_uint_le(s->value[0], s->time_enabled + 1000000);
		ck_assert_uint_le(s->time_enabled, s->time_ns + 1000000);
		s = find_sample(&run, 0, 1, rep);
		ck_assert_ptr_nonnull(s);
		ck_assert_uint_eq(s->n_values, 1);
		ck_assert_uint_eq(s->time_enabled, s->time_running);
	}
}

START_TEST(test_software_event_groups)
{
	check_software_groups(getuid(), getgid());
}
END_TEST

START_TEST(test_software_events_after_uid_switch)
{
	check_software_groups(NOBODY, NOBODY);
}
END_TEST

/* Hardware events: counted when the host has a PMU; otherwise the job fails naming the event
 * and the errno, and no value is invented. */
START_TEST(test_hardware_group_or_plain_error)
{
	struct counters_probe probe;
	counters_probe(&probe);
	int fd = open_model("compute");
	const uint64_t args[] = { COMPUTE_BYTES };
	const int32_t regions[] = { 0 };
	struct counters_event ev;
	memset(&ev, 0, sizeof ev);
	ev.name = "cycles";
	ev.attr.size = sizeof ev.attr;
	ev.attr.type = PERF_TYPE_HARDWARE;
	ev.attr.config = PERF_COUNT_HW_CPU_CYCLES;
	const struct worker_group group = { &ev, 1 };
	struct worker_job job;
	base_job(&job, fd, args, 1, regions, 1);
	job.groups = &group;
	job.n_groups = 1;
	job.reps = 2;
	struct run run;
	run_job(&job, &run);
	close(fd);

	if (probe.hw_ok) {
		assert_ok(&run);
		ck_assert_uint_eq(run.n_samples, 2);
		ck_assert_uint_gt(run.sample[0].value[0], 0);
		return;
	}
	ck_assert_int_eq(run.st.end, WORKER_END_FAILED);
	ck_assert_uint_eq(run.n_samples, 0);
	ck_assert_int_eq(run.error.code, -probe.hw_errno);
	ck_assert_msg(strstr(run.st.message, "event group 0: perf_event_open(cycles) failed with"),
		      "%s", run.st.message);
}
END_TEST

START_TEST(test_invalid_jobs)
{
	const int32_t regions[] = { 0, 1 };
	struct worker_job job;
	struct worker *w = NULL;
	struct pim_error err = { 0 };

	base_job(&job, 987, NULL, 0, regions, 2);
	ck_assert_int_eq(worker_spawn(&job, &w, &err), -EBADF);
	ck_assert_str_eq(err.msg, "profiling job: model library fd 987 is not an open file "
				  "descriptor");
	ck_assert_ptr_null(w);

	int dir = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	job.model_fd = dir;
	ck_assert_int_eq(worker_spawn(&job, &w, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "is not a regular file"));
	close(dir);

	int fd = open_model("compute");
	job.model_fd = fd;
	job.reps = 0;
	ck_assert_int_eq(worker_spawn(&job, &w, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "profiling job: 0 repetitions; need 1..100000");
	job.reps = 1;

	const int32_t dup[] = { 3, 3 };
	job.regions = dup;
	ck_assert_int_eq(worker_spawn(&job, &w, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "profiling job: region id 3 listed twice");
	const int32_t big[] = { WORKER_REGION_ID_MAX + 1 };
	job.regions = big;
	job.n_regions = 1;
	ck_assert_int_eq(worker_spawn(&job, &w, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "out of range"));

	job.regions = regions;
	job.n_regions = 2;
	const int32_t other[] = { 5 };
	job.measure = other;
	job.n_measure = 1;
	ck_assert_int_eq(worker_spawn(&job, &w, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "profiling job: region 5 to measure is not in the manifest");
	job.measure = NULL;

	const uint64_t zero[] = { 0 };
	job.arg_bytes = zero;
	job.n_args = 1;
	ck_assert_int_eq(worker_spawn(&job, &w, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "argument 0 has 0 bytes"));
	close(fd);
	ck_assert_ptr_null(w);
}
END_TEST

START_TEST(test_not_a_model_library)
{
	const int32_t regions[] = { 0 };
	struct worker_job job;
	struct run run;

	int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	base_job(&job, fd, NULL, 0, regions, 1);
	run_job(&job, &run);
	close(fd);
	ck_assert_int_eq(run.st.end, WORKER_END_FAILED);
	ck_assert_msg(strncmp(run.st.message, "cannot load the model library: ", 31) == 0, "%s",
		      run.st.message);

	/* a shared object without the entry point: any library of the system */
	const char *libs[] = { "/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib64/libm.so.6",
			       "/lib/aarch64-linux-gnu/libm.so.6" };
	for (size_t i = 0; i < ELEMENTSOF(libs); i++) {
		fd = open(libs[i], O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		job.model_fd = fd;
		run_job(&job, &run);
		close(fd);
		ck_assert_int_eq(run.st.end, WORKER_END_FAILED);
		ck_assert_str_eq(run.st.message, "the model library does not export "
						 "pim_model_entry (see client/pim_hooks.h)");
		break;
	}
}
END_TEST

/* ------------------------------------------------------------------ isolation */

/* What another user's job could look for: held in this process's data, heap and environment. */
static const char secret[] = "pimd-isolation-marker-7f3c";

START_TEST(test_worker_sees_no_parent_memory)
{
	char *heap = strdup(secret);
	ck_assert_ptr_nonnull(heap);
	ck_assert_int_eq(setenv("PIMD_TEST_SECRET", secret, 1), 0);
	int fd = open_model("snoop");
	const int32_t regions[] = { 0, 1, 2, 3 };
	struct worker_job job;
	base_job(&job, fd, NULL, 0, regions, 4);
	job.reps = 1;
	job.warmups = 0;
	struct run run;
	run_job(&job, &run);
	close(fd);
	free(heap);

	assert_ok(&run);
	ck_assert_ptr_nonnull(find_sample(&run, 0, 0, 0));
	ck_assert_msg(find_sample(&run, 3, 0, 0), "the model's scanner did not find its own "
						   "planted copy: the test proves nothing");
	ck_assert_msg(!find_sample(&run, 1, 0, 0), "the model found pimd's memory");
	ck_assert_msg(!find_sample(&run, 2, 0, 0), "the model found pimd's environment");
}
END_TEST

/* Processes named comm that are alive (zombies waiting for a reaper count as gone). */
static unsigned alive_named(const char *comm)
{
	unsigned n = 0;
	DIR *d = opendir("/proc");
	ck_assert_ptr_nonnull(d);
	struct dirent *e;
	while ((e = readdir(d))) {
		char path[300], buf[512];
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t len = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (len <= 0)
			continue;
		buf[len] = 0;
		char *open_paren = strchr(buf, '('), *close_paren = strrchr(buf, ')');
		if (!open_paren || !close_paren || close_paren[1] == 0)
			continue;
		*close_paren = 0;
		if (strcmp(open_paren + 1, comm) == 0 && close_paren[2] != 'Z' && close_paren[2] != 'X')
			n++;
	}
	closedir(d);
	return n;
}

/* Waits up to 2 s for SIGKILLed processes to be gone. */
static unsigned alive_after_kill(const char *comm)
{
	unsigned n = 0;
	for (int i = 0; i < 100 && (n = alive_named(comm)) > 0; i++)
		usleep(20000);
	return n;
}

static void check_no_escape(size_t n_args)
{
	ck_assert_uint_eq(alive_named("pimd-escapee"), 0);
	int fd = open_model("escape");
	const uint64_t args[] = { 8 };
	const int32_t regions[] = { 0, 1 };
	struct worker_job job;
	base_job(&job, fd, args, n_args, regions, 2);
	job.reps = 1;
	job.warmups = 0;
	job.timeout_ms = 10000;
	uint64_t t0 = now_ns();
	struct run run;
	run_job(&job, &run);
	close(fd);

	assert_ok(&run);
	ck_assert_ptr_nonnull(find_sample(&run, 0, 0, 0));
	ck_assert_msg(!find_sample(&run, 1, 0, 0), "setsid() succeeded in the job");
	ck_assert_uint_lt(now_ns() - t0, UINT64_C(5) * 1000000000u); /* no wait for a timeout */
	ck_assert_uint_eq(alive_after_kill("pimd-escapee"), 0);
}

START_TEST(test_job_leaves_no_process)
{
	check_no_escape(0); /* the escapee closed the result pipe */
}
END_TEST

START_TEST(test_job_leaves_no_process_holding_the_pipe)
{
	check_no_escape(1); /* the escapee keeps the result pipe open */
}
END_TEST

/* tests/models/cloneparent.c: region 0 when every clone/clone3 with CLONE_PARENT was refused,
 * 7 when one made a child of this process. */
START_TEST(test_clone_parent_refused)
{
	int fd = open_model("cloneparent");
	const uint64_t args[] = { 8 };
	const int32_t regions[] = { 0, 7 };
	struct worker_job job;
	base_job(&job, fd, args, 1, regions, 2);
	job.reps = 1;
	job.warmups = 0;
	struct run run;
	run_job(&job, &run);
	close(fd);

	assert_ok(&run);
	ck_assert_ptr_nonnull(find_sample(&run, 0, 0, 0));
	ck_assert_msg(!find_sample(&run, 7, 0, 0), "clone(CLONE_PARENT) made a child of the daemon");
	ck_assert_uint_eq(worker_reap_strays(NULL, 0), 0);
}
END_TEST

static pid_t child_exiting(unsigned long exit_signal)
{
	pid_t pid = (pid_t)syscall(SYS_clone, exit_signal, 0, 0, 0, 0);
	if (pid == 0)
		syscall(SYS_exit, 0);
	ck_assert_int_gt(pid, 0);
	return pid;
}

/* Children that are no workers are reaped, those with no exit signal too; a kept one is not. */
START_TEST(test_reap_strays)
{
	pid_t kept = child_exiting(SIGCHLD), stray = child_exiting(SIGCHLD), silent = child_exiting(0);
	const pid_t all[] = { kept, stray, silent };
	for (size_t i = 0; i < 3; i++) { /* each has exited (still unreaped) */
		siginfo_t si;
		memset(&si, 0, sizeof si);
		ck_assert_int_eq(waitid(P_PID, (id_t)all[i], &si, WEXITED | WNOWAIT | __WALL), 0);
	}
	ck_assert_uint_ge(worker_reap_strays(&kept, 1), 2);
	ck_assert_int_eq(waitpid(stray, NULL, WNOHANG | __WALL), -1);
	ck_assert_int_eq(errno, ECHILD);
	ck_assert_int_eq(waitpid(silent, NULL, WNOHANG | __WALL), -1);
	ck_assert_int_eq(waitpid(kept, NULL, 0), kept);
}
END_TEST

START_TEST(test_wire_round_trip)
{
	int fd = open_model("compute");
	const uint64_t args[] = { 4096, 1u << 20 };
	const int32_t regions[] = { 9, 2, 700000 }, measure[] = { 700000 };
	static const struct counters_event ev[3];
	const struct worker_group groups[] = { { ev, 2 }, { ev, 1 } };
	struct worker_job job;
	base_job(&job, fd, args, 2, regions, 3);
	job.measure = measure;
	job.n_measure = 1;
	job.reps = 7;
	job.warmups = 3;
	job.cpu = 1;
	job.cpu_seconds = 11;
	job.as_bytes = 12345678;
	job.uid = 4242;
	job.gid = 4343;
	job.fill = WORKER_FILL_RANDOM;
	job.max_processes = 17;
	job.max_files = 99;
	job.manifest_digest = UINT64_C(0x0123456789abcdef);
	job.groups = groups;
	job.n_groups = 2;
	void *buf = NULL;
	size_t len = 0;
	struct pim_error err = { 0 };
	ck_assert_msg(worker_job_encode(&job, &buf, &len, &err) == 0, "%s", err.msg);
	/* header, then 2 sizes of 8 bytes and 3 + 1 ids of 4 bytes */
	size_t head = len - 2 * 8 - 4 * 4;

	struct worker_wire wire;
	ck_assert_msg(worker_job_decode(buf, len, fd, &wire, &err) == 0, "%s", err.msg);
	const struct worker_job *d = &wire.job;
	ck_assert_uint_eq(d->n_args, 2);
	ck_assert_uint_eq(d->arg_bytes[0], 4096);
	ck_assert_uint_eq(d->arg_bytes[1], 1u << 20);
	ck_assert_uint_eq(d->n_regions, 3);
	ck_assert_int_eq(d->regions[0], 9);
	ck_assert_int_eq(d->regions[2], 700000);
	ck_assert_ptr_nonnull(d->measure);
	ck_assert_uint_eq(d->n_measure, 1);
	ck_assert_int_eq(d->measure[0], 700000);
	ck_assert_uint_eq(d->reps, 7);
	ck_assert_uint_eq(d->warmups, 3);
	ck_assert_int_eq(d->cpu, 1);
	ck_assert_uint_eq(d->cpu_seconds, 11);
	ck_assert_uint_eq(d->as_bytes, 12345678);
	ck_assert_uint_eq(d->uid, 4242);
	ck_assert_uint_eq(d->gid, 4343);
	ck_assert_int_eq(d->fill, WORKER_FILL_RANDOM);
	ck_assert_uint_eq(d->max_processes, 17);
	ck_assert_uint_eq(d->max_files, 99);
	ck_assert_uint_eq(d->manifest_digest, UINT64_C(0x0123456789abcdef));
	ck_assert_uint_eq(d->n_groups, 2);
	ck_assert_uint_eq(d->groups[0].n, 2);
	ck_assert_uint_eq(d->groups[1].n, 1);
	ck_assert_ptr_nonnull(strstr(wire.reason, "counters: 2 event group(s), 7 repetitions"));
	ck_assert_int_eq(d->model_fd, fd);
	worker_wire_free(&wire);

	/* not a job: each refusal by its message */
	ck_assert_int_eq(worker_job_decode(buf, 10, fd, &wire, &err), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, "10 bytes, shorter than its"));
	ck_assert_int_eq(worker_job_decode(buf, len - 4, fd, &wire, &err), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, "its header announces"));
	uint8_t *bad = malloc(len);
	memcpy(bad, buf, len);
	bad[0] ^= 1;
	ck_assert_int_eq(worker_job_decode(bad, len, fd, &wire, &err), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, "magic"));
	/* a region id out of range inside a well-formed buffer: validated again */
	memcpy(bad, buf, len);
	int32_t huge = WORKER_REGION_ID_MAX + 1;
	memcpy(bad + head + 2 * 8, &huge, sizeof huge);
	ck_assert_int_eq(worker_job_decode(bad, len, fd, &wire, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "encoded job: profiling job: region id 1000001 out "
					      "of range"));
	free(bad);
	free(buf);
	close(fd);
}
END_TEST

START_TEST(test_missing_helper_named)
{
	int fd = open_model("compute");
	const int32_t regions[] = { 0 };
	struct worker_job job;
	base_job(&job, fd, NULL, 0, regions, 1);
	job.helper = "/nonexistent/pimd-worker";
	struct worker *w = NULL;
	struct pim_error err = { 0 };
	ck_assert_int_eq(worker_spawn(&job, &w, &err), -ENOENT);
	ck_assert_str_eq(err.msg, "worker: cannot open the helper /nonexistent/pimd-worker: No "
				  "such file or directory");
	ck_assert_ptr_null(w);
	close(fd);
}
END_TEST

/* ------------------------------------------------------------------ the hook engine in process */

static struct worker_record hook_samples[8];
static unsigned n_hook_samples;

static void hook_emit(void *ctx, const struct worker_record *r)
{
	(void)ctx;
	if (n_hook_samples < ELEMENTSOF(hook_samples))
		hook_samples[n_hook_samples] = *r;
	n_hook_samples++;
}

static void hooks_for(const int32_t *regions, size_t n)
{
	struct worker_job job;
	struct pim_error err = { 0 };
	worker_job_init(&job);
	job.regions = regions;
	job.n_regions = n;
	ck_assert_msg(worker_hooks_setup(&job, 0, &err) == 0, "%s", err.msg);
	worker_hooks_arm(-1, 0);
	n_hook_samples = 0;
}

static void expect_fault(int32_t region, const char *msg)
{
	struct worker_record e;
	ck_assert_int_eq(worker_hooks_end(0, 0, hook_emit, NULL, &e), -EPROTO);
	ck_assert_uint_eq(e.type, WORKER_REC_ERROR);
	ck_assert_int_eq(e.error.region, region);
	ck_assert_msg(strstr(e.error.message, msg), "%s", e.error.message);
	ck_assert_uint_eq(n_hook_samples, 0);
}

START_TEST(test_hooks_contract)
{
	const int32_t regions[] = { 1, 2, 900000 };
	hooks_for(regions, 3);

	/* inert outside a run (pimd itself, library constructors) */
	pim_region_enter(1);
	pim_region_exit(2);

	worker_hooks_begin();
	pim_region_enter(1);
	pim_region_enter(2);
	pim_region_exit(2);
	pim_region_enter(900000);
	pim_region_exit(900000);
	pim_region_exit(1);
	pim_region_enter(2);
	pim_region_exit(2);
	struct worker_record e;
	ck_assert_int_eq(worker_hooks_end(0, 3, hook_emit, NULL, &e), 0);
	ck_assert_uint_eq(n_hook_samples, 3);
	ck_assert_int_eq(hook_samples[0].sample.region, 1);
	ck_assert_uint_eq(hook_samples[0].sample.rep, 3);
	ck_assert_int_eq(hook_samples[1].sample.region, 2);
	ck_assert_uint_eq(hook_samples[1].sample.executions, 2);
	ck_assert_uint_ge(hook_samples[0].sample.time_ns, hook_samples[2].sample.time_ns);

	n_hook_samples = 0;
	worker_hooks_begin();
	pim_region_enter(1);
	pim_region_enter(1);
	pim_region_exit(1);
	expect_fault(1, "pim_region_enter(1): re-entry of region 1");

	worker_hooks_begin();
	pim_region_exit(2);
	expect_fault(2, "pim_region_exit(2): region 2 is not open");

	worker_hooks_begin();
	pim_region_enter(1);
	pim_region_enter(2);
	pim_region_exit(1);
	pim_region_exit(2);
	pim_region_exit(1);
	expect_fault(1, "pim_region_exit(1): region 2, entered inside region 1, is still open");

	worker_hooks_begin();
	pim_region_enter(-5);
	expect_fault(-5, "pim_region_enter(-5): region -5 is not in the manifest");

	worker_hooks_begin();
	pim_region_enter(3);
	expect_fault(3, "region 3 is not in the manifest");

	worker_hooks_begin();
	pim_region_enter(2000000);
	expect_fault(2000000, "region 2000000 is not in the manifest");

	worker_hooks_begin();
	pim_region_enter(2);
	expect_fault(2, "region 2 is still open when pim_model_entry returned");

	/* the engine recovers: a clean run after faults counts normally */
	worker_hooks_begin();
	pim_region_enter(2);
	pim_region_exit(2);
	ck_assert_int_eq(worker_hooks_end(0, 0, hook_emit, NULL, &e), 0);
	ck_assert_uint_eq(n_hook_samples, 1);
	worker_hooks_teardown();
}
END_TEST

static void *other_thread(void *arg)
{
	(void)arg;
	pim_region_enter(1);
	pim_region_exit(1);
	return NULL;
}

START_TEST(test_hooks_foreign_thread)
{
	const int32_t regions[] = { 1 };
	hooks_for(regions, 1);
	worker_hooks_begin();
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, other_thread, NULL), 0);
	pthread_join(t, NULL);
	expect_fault(-1, "2 region hook calls came from threads other than the one running "
			 "pim_model_entry");
	worker_hooks_teardown();
}
END_TEST

START_TEST(test_hooks_nesting_depth)
{
	static int32_t regions[WORKER_DEPTH_MAX + 1];
	for (int32_t i = 0; i <= (int32_t)WORKER_DEPTH_MAX; i++)
		regions[i] = i;
	hooks_for(regions, WORKER_DEPTH_MAX + 1);
	worker_hooks_begin();
	for (int32_t i = 0; i <= (int32_t)WORKER_DEPTH_MAX; i++)
		pim_region_enter(i);
	for (int32_t i = (int32_t)WORKER_DEPTH_MAX; i >= 0; i--)
		pim_region_exit(i);
	expect_fault((int32_t)WORKER_DEPTH_MAX, "more than 256 regions open at once");
	worker_hooks_teardown();
}
END_TEST

/* Switching users and giving up capabilities need root. */
#define ROOT_ONLY "needs root (switches users, drops capabilities)"

static Suite *worker_suite(void)
{
	bool root = geteuid() == 0;
	Suite *s = suite_create("worker");
	TCase *tc = test_case(s, "timing");
	tcase_add_test(tc, test_timing_stream_read);
	tcase_add_test(tc, test_timing_stream_write);
	tcase_add_test(tc, test_timing_compute);
	tcase_add_test(tc, test_estimated_bandwidth_order);
	tcase_add_test(tc, test_three_regions_program_order);
	tcase_add_test(tc, test_measure_subset);

	tc = test_case(s, "contract");
	tcase_add_test(tc, test_region_not_in_manifest);
	tcase_add_test(tc, test_reenter_is_an_error);
	tcase_add_test(tc, test_hooks_contract);
	tcase_add_test(tc, test_hooks_foreign_thread);
	tcase_add_test(tc, test_hooks_nesting_depth);

	tc = test_case(s, "containment");
	tcase_add_test(tc, test_crash_named);
	tcase_add_test(tc, test_hang_wall_clock_timeout);
	tcase_add_test(tc, test_hang_cpu_limit);
	tcase_add_test(tc, test_hog_address_space_limit);
	tcase_add_test(tc, test_arguments_over_address_space_limit);
	tcase_add_test(tc, test_model_failure_named);
	tcase_add_test(tc, test_forged_records_rejected);
	tcase_add_test(tc, test_free_kills_running_worker);
	test_add_if(tc, test_runs_as_requesting_user, root, ROOT_ONLY);
	test_add_if(tc, test_root_job_drops_capabilities, root, ROOT_ONLY);
	test_add_if(tc, test_model_gets_no_priority, root, ROOT_ONLY);
	test_add_if(tc, test_model_runs_at_the_job_nice, root, ROOT_ONLY);
	test_add_if(tc, test_daemon_uid_with_capabilities, root, ROOT_ONLY);
	test_add_if(tc, test_refuses_when_it_cannot_switch, root, ROOT_ONLY);

	tc = test_case(s, "isolation");
	tcase_add_test(tc, test_worker_sees_no_parent_memory);
	tcase_add_test(tc, test_job_leaves_no_process);
	tcase_add_test(tc, test_job_leaves_no_process_holding_the_pipe);
	tcase_add_test(tc, test_clone_parent_refused);
	tcase_add_test(tc, test_reap_strays);
	tcase_add_test(tc, test_wire_round_trip);
	tcase_add_test(tc, test_missing_helper_named);

	tc = test_case(s, "counters");
	tcase_add_test(tc, test_software_event_groups);
	test_add_if(tc, test_software_events_after_uid_switch, root, ROOT_ONLY);
	tcase_add_test(tc, test_hardware_group_or_plain_error);

	tc = test_case(s, "jobs");
	tcase_add_test(tc, test_invalid_jobs);
	tcase_add_test(tc, test_not_a_model_library);
	return s;
}

int main(void)
{
	return test_run_suite(worker_suite());
}
