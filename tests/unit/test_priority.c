/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of daemon/priority.c: the event loop's and the writer's nice values, and what pimd
 * says where lowering them is refused.  Each test runs in its own process (check forks), which
 * starts with CAP_SYS_NICE and gives it up (capset) where the test needs a refusal: an RLIMIT_NICE
 * between the two values cannot be set where the hard limit is 0 without CAP_SYS_RESOURCE, and
 * taking the capability away after the loop lowered its value gives the same case (the loop's
 * value lowered, the writer's refused).
 */
#include <errno.h>
#include <linux/capability.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "priority.h"
#include "test_util.h"

static int nice_of_thread(void)
{
	errno = 0;
	int v = getpriority(PRIO_PROCESS, (id_t)gettid());
	ck_assert_int_eq(errno, 0);
	return v;
}

/* Whether this process may lower a thread's nice value (it probes on a thread of its own). */
static void *probe_lower(void *arg)
{
	int v = nice_of_thread();
	*(bool *)arg = v > -20 && setpriority(PRIO_PROCESS, (id_t)gettid(), v - 1) == 0;
	return NULL;
}

static bool may_lower(void)
{
	bool ok = false;
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, probe_lower, &ok), 0);
	pthread_join(t, NULL);
	return ok;
}

/* CAP_SYS_NICE out of this process's effective set, and RLIMIT_NICE at 0: no lowering. */
static void drop_sys_nice(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[2];

	struct rlimit rl;
	ck_assert_int_eq(getrlimit(RLIMIT_NICE, &rl), 0);
	rl.rlim_cur = 0; /* (lowering a limit needs nothing) */
	ck_assert_int_eq(setrlimit(RLIMIT_NICE, &rl), 0);
	ck_assert_int_eq(syscall(SYS_capget, &h, d), 0);
	d[CAP_SYS_NICE / 32].effective &= ~(1u << (CAP_SYS_NICE % 32));
	ck_assert_int_eq(syscall(SYS_capset, &h, d), 0);
	ck_assert(!may_lower());
}

/* stderr (where log.c writes) into a file read back by logged(). */
static FILE *log_file;

static void capture_log(void)
{
	log_file = tmpfile();
	ck_assert_ptr_nonnull(log_file);
	fflush(stderr);
	ck_assert_int_ge(dup2(fileno(log_file), STDERR_FILENO), 0);
}

static char *logged(void)
{
	static char buf[4096];
	fflush(stderr);
	size_t n = (size_t)pread(fileno(log_file), buf, sizeof buf - 1, 0);
	buf[n < sizeof buf ? n : 0] = 0;
	return buf;
}

static unsigned count(const char *s, const char *what)
{
	unsigned n = 0;
	for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

/* A thread started by the loop, as threads.c starts the writer. */
static void *writer_main(void *arg)
{
	priority_boost_writer();
	*(int *)arg = nice_of_thread();
	return NULL;
}

static int run_writer(void)
{
	int v = 99;
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, writer_main, &v), 0);
	pthread_join(t, NULL);
	return v;
}

static void *unboosted_main(void *arg)
{
	priority_unboost(0);
	*(int *)arg = nice_of_thread();
	return NULL;
}

/* Where this test cannot lower a nice value, or the values do not fit above -20, it says SKIP. */
static bool can_run(const char *name, int base)
{
	if (!may_lower()) {
		printf("SKIP %s: lowering a nice value is refused here (no CAP_SYS_NICE)\n", name);
		return false;
	}
	if (base - PRIORITY_WRITER_BOOST < -20) {
		printf("SKIP %s: started at nice %d, too low to lower by %d\n", name, base, PRIORITY_WRITER_BOOST);
		return false;
	}
	return true;
}

/* Allowed: the loop PRIORITY_LOOP_BOOST below pimd's value, the writer PRIORITY_WRITER_BOOST
 * below, a work thread back at pimd's; nothing said. */
START_TEST(loop_and_writer_lowered)
{
	int base = nice_of_thread();
	if (!can_run("loop_and_writer_lowered", base))
		return;
	capture_log();
	ck_assert(priority_boost_loop());
	ck_assert_int_eq(priority_base(), base);
	ck_assert_int_eq(nice_of_thread(), base - PRIORITY_LOOP_BOOST);
	ck_assert_int_eq(run_writer(), base - PRIORITY_WRITER_BOOST);
	int work = 99;
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, unboosted_main, &work), 0);
	pthread_join(t, NULL);
	ck_assert_int_eq(work, base);
	ck_assert_str_eq(logged(), "");
}
END_TEST

/* The loop lowered, then the privilege gone (as an RLIMIT_NICE that allows the loop's value and
 * not the writer's): the writer keeps the loop's value, inherited, and one notice says what it
 * takes, however many writers start. */
START_TEST(writer_refused_alone)
{
	int base = nice_of_thread();
	if (!can_run("writer_refused_alone", base))
		return;
	capture_log();
	ck_assert(priority_boost_loop());
	drop_sys_nice();
	int loop = base - PRIORITY_LOOP_BOOST, writer = base - PRIORITY_WRITER_BOOST;
	ck_assert_int_eq(run_writer(), loop);
	ck_assert_int_eq(run_writer(), loop);
	char want[256];
	snprintf(want, sizeof want, "The writer thread runs at the event loop's nice value %d, not %d: that "
		 "takes CAP_SYS_NICE or an RLIMIT_NICE of %d (LimitNICE=%d in pimd.service)", loop, writer,
		 20 - writer, writer);
	const char *log = logged();
	ck_assert_uint_eq(count(log, want), 1);
	ck_assert_uint_eq(count(log, "The event loop"), 0);
	ck_assert_int_eq(nice_of_thread(), loop);
}
END_TEST

/* Refused from the start: every thread at pimd's value; one notice for both, none for the
 * writer. */
START_TEST(both_refused)
{
	int base = nice_of_thread();
	if (!can_run("both_refused", base))
		return;
	drop_sys_nice();
	capture_log();
	ck_assert(!priority_boost_loop());
	ck_assert_int_eq(nice_of_thread(), base);
	ck_assert_int_eq(priority_base(), base);
	ck_assert_int_eq(run_writer(), base);
	int writer = base - PRIORITY_WRITER_BOOST;
	char want[256];
	snprintf(want, sizeof want, "The event loop and the writer thread run at pimd's nice value %d, not "
		 "%d and %d: that takes CAP_SYS_NICE or an RLIMIT_NICE of %d (LimitNICE=%d in pimd.service)",
		 base, base - PRIORITY_LOOP_BOOST, writer, 20 - writer, writer);
	const char *log = logged();
	ck_assert_uint_eq(count(log, want), 1);
	ck_assert_uint_eq(count(log, "The writer thread"), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("priority");
	TCase *tc = test_case(s, "priority");
	tcase_add_test(tc, loop_and_writer_lowered);
	tcase_add_test(tc, writer_refused_alone);
	tcase_add_test(tc, both_refused);
	return test_run_suite(s);
}
