/* SPDX-License-Identifier: MIT */
/*
 * test_counters.c: real software-event groups on this host, the no-PMU probe (doc/design.md §4.4),
 * group planning, scaling arithmetic (doc/design.md §4.2) and error paths by message.
 */
#include <check.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "counters.h"
#include "events.h"

#define PAGES 512

static struct perf_event_attr sw_attr(uint64_t config)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof a);
	a.size = sizeof a;
	a.type = PERF_TYPE_SOFTWARE;
	a.config = config;
	return a;
}

/* Touches PAGES fresh 4 KiB pages (no THP, so each is one minor fault) and spins a little. */
static uint64_t thread_cpu_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void busy_touch(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t len = (size_t)PAGES * (size_t)pg;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	madvise(p, len, MADV_NOHUGEPAGE);
	for (size_t i = 0; i < len; i += (size_t)pg)
		((volatile char *)p)[i] = 1;
	/* 20 ms of this thread's CPU time, not of wall-clock time: on a loaded machine the thread
	 * runs only part of the time, and task-clock counts only what it ran. */
	uint64_t end = thread_cpu_ns() + 20 * 1000 * 1000;
	volatile uint64_t x = 0;
	while (thread_cpu_ns() < end)
		x++;
	munmap(p, len);
}

/* A group of software events, encoded through libpfm4's perf:: names like the daemon does. */
START_TEST(test_software_group_counts)
{
	const char *names[] = { "perf::PERF_COUNT_SW_TASK_CLOCK", "perf::PERF_COUNT_SW_PAGE_FAULTS",
				"perf::PERF_COUNT_SW_CONTEXT_SWITCHES",
				"perf::PERF_COUNT_SW_CPU_MIGRATIONS" };
	struct counters_event ev[4];
	struct pim_error err = { 0 };
	for (unsigned i = 0; i < 4; i++) {
		ev[i].name = names[i];
		ev[i].fixed = false;
		ck_assert_msg(counters_encode_event(names[i], &ev[i].attr, &err) == 0, "%s", err.msg);
		ck_assert_uint_eq(ev[i].attr.type, PERF_TYPE_SOFTWARE);
	}

	struct counters_group g;
	ck_assert_msg(counters_open(&g, 0, -1, ev, 4, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(g.n, 4);
	ck_assert_int_eq(counters_enable(&g, &err), 0);

	struct counters_sample s0, s1, s2;
	ck_assert_msg(counters_read(&g, &s0, &err) == 0, "%s", err.msg);
	busy_touch();
	ck_assert_msg(counters_read(&g, &s1, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(counters_disable(&g, &err), 0);
	ck_assert_int_eq(counters_read(&g, &s2, &err), 0);

	struct counters_reading r;
	ck_assert_msg(counters_delta(&s0, &s1, &r, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(r.n, 4);
	printf("test_counters: task-clock %llu ns, page-faults %llu, context-switches %llu, "
	       "enabled %llu ns, running %llu ns\n",
	       (unsigned long long)r.value[0], (unsigned long long)r.value[1],
	       (unsigned long long)r.value[2], (unsigned long long)r.time_enabled,
	       (unsigned long long)r.time_running);
	/* task-clock: at least the 20 ms spin, in ns */
	ck_assert_uint_ge(r.value[0], 15 * 1000 * 1000);
	/* page-faults: one per fresh page, allow for pages pre-faulted by the kernel */
	ck_assert_uint_ge(r.value[1], PAGES / 2);
	ck_assert_uint_gt(r.time_enabled, 0);
	ck_assert_uint_eq(r.time_running, r.time_enabled); /* software events never multiplex */
	ck_assert(!r.scaled);
	for (unsigned i = 0; i < r.n; i++)
		ck_assert_uint_eq(r.raw[i], r.value[i]);

	/* disabled group stays put */
	struct counters_sample s3;
	busy_touch();
	ck_assert_int_eq(counters_read(&g, &s3, &err), 0);
	ck_assert_uint_eq(s3.value[1], s2.value[1]);
	ck_assert_uint_eq(s3.time_enabled, s2.time_enabled);

	/* enable resets */
	ck_assert_int_eq(counters_enable(&g, &err), 0);
	ck_assert_int_eq(counters_read(&g, &s3, &err), 0);
	ck_assert_uint_lt(s3.value[1], s2.value[1]);

	counters_close(&g);
	ck_assert_int_eq(g.fd[0], -1);
	counters_close(&g); /* twice is fine */
	ck_assert_int_eq(counters_read(&g, &s3, &err), -EBADF);
	ck_assert_ptr_nonnull(strstr(err.msg, "not open"));
}
END_TEST

static bool has_cap_from_status(int cap)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	unsigned long long eff = 0;
	bool found = false;
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "CapEff: %llx", &eff) == 1) {
			found = true;
			break;
		}
	fclose(f);
	ck_assert(found);
	return eff & (1ull << cap);
}

/* The probe agrees with itself and with /proc; on this VM it reports the missing PMU. */
START_TEST(test_probe_consistent)
{
	struct counters_probe p;
	ck_assert_int_eq(counters_probe(&p), 0);
	ck_assert(p.reason[0]);
	printf("test_counters: probe: %s\n", p.reason);

	if (p.hw_ok) {
		ck_assert_int_eq(p.hw_errno, 0);
		ck_assert_ptr_nonnull(strstr(p.reason, "hardware counters available"));
	} else {
		char want[96];
		snprintf(want, sizeof want, "perf_event_open(cycles) failed with %s",
			 strerrorname_np(p.hw_errno));
		ck_assert_msg(strstr(p.reason, want), "reason '%s' lacks '%s'", p.reason, want);
		ck_assert_ptr_nonnull(strstr(p.reason, "timing backend"));
		if (p.hw_errno == ENOENT)
			ck_assert_ptr_nonnull(strstr(p.reason, "PMU unavailable: perf_event_open(cycles) "
							       "failed with ENOENT; this host exports "
							       "no hardware counters"));
	}
	if (!p.sw_ok)
		ck_assert_ptr_nonnull(strstr(p.reason, "task-clock"));

	/* capabilities: capget agrees with /proc/self/status CapEff */
	ck_assert_int_eq(p.cap_sys_admin, has_cap_from_status(21));
	ck_assert_int_eq(p.cap_perfmon, has_cap_from_status(38));

	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
	if (f) {
		int v;
		ck_assert_int_eq(fscanf(f, "%d", &v), 1);
		fclose(f);
		ck_assert(p.paranoid_known);
		ck_assert_int_eq(p.paranoid, v);
	}
}
END_TEST

/* A hardware member: opens where the probe saw a PMU, fails naming the event and errno where not. */
START_TEST(test_hardware_group_matches_probe)
{
	struct counters_probe p;
	counters_probe(&p);

	struct counters_event ev[2] = {
		{ .name = "task-clock", .attr = sw_attr(PERF_COUNT_SW_TASK_CLOCK) },
		{ .name = "cycles" },
	};
	ev[1].attr.size = sizeof ev[1].attr;
	ev[1].attr.type = PERF_TYPE_HARDWARE;
	ev[1].attr.config = PERF_COUNT_HW_CPU_CYCLES;

	struct counters_group g;
	struct pim_error err = { 0 };
	int r = counters_open(&g, 0, -1, ev, 2, &err);
	if (p.hw_ok) {
		ck_assert_msg(r == 0, "%s", err.msg);
		counters_close(&g);
	} else {
		ck_assert_int_eq(r, -p.hw_errno);
		char want[96];
		snprintf(want, sizeof want, "perf_event_open(cycles) failed with %s",
			 strerrorname_np(p.hw_errno));
		ck_assert_msg(strstr(err.msg, want), "'%s' lacks '%s'", err.msg, want);
		ck_assert_int_eq(g.fd[0], -1); /* the leader was closed again */
	}

	/* the detected table's own cycles event, encoded by libpfm4, behaves the same */
	struct events_host h;
	ck_assert_int_eq(counters_detect_pmu(&h, &err), 0);
	char name[128];
	if (events_full_name(h.table, h.pmu[0] ? h.pmu : NULL, EVENTS_ROLE_CYCLES, false, name,
			     sizeof name, &err) == 0) {
		struct counters_event hw = { .name = name };
		ck_assert_msg(counters_encode_event(name, &hw.attr, &err) == 0, "%s", err.msg);
		r = counters_open(&g, 0, -1, &hw, 1, &err);
		if (!p.hw_ok) {
			ck_assert_int_lt(r, 0);
			ck_assert_ptr_nonnull(strstr(err.msg, name));
			printf("test_counters: %s\n", err.msg);
		}
		counters_close(&g);
	}
}
END_TEST

START_TEST(test_plan_groups)
{
	struct counters_event ev[COUNTERS_MAX_EVENTS + 1];
	struct counters_plan plan;
	struct pim_error err = { 0 };
	memset(ev, 0, sizeof ev);

	/* 7 general events, 4 per group: 4 + 3 */
	ck_assert_int_eq(counters_plan_groups(ev, 7, 4, &plan, &err), 2);
	ck_assert_uint_eq(plan.first[0], 0);
	ck_assert_uint_eq(plan.count[0], 4);
	ck_assert_uint_eq(plan.first[1], 4);
	ck_assert_uint_eq(plan.count[1], 3);

	/* the f_store events + fixed cycles fit one group, n_rd goes to the next:
	 * c_store, be1, be2, be3, cycles(fixed), n_rd */
	ev[4].fixed = true;
	ck_assert_int_eq(counters_plan_groups(ev, 6, 4, &plan, &err), 2);
	ck_assert_uint_eq(plan.count[0], 5);
	ck_assert_uint_eq(plan.first[1], 5);
	ck_assert_uint_eq(plan.count[1], 1);
	ev[4].fixed = false;

	/* one per group */
	ck_assert_int_eq(counters_plan_groups(ev, 7, 1, &plan, &err), 7);
	for (unsigned i = 0; i < 7; i++)
		ck_assert(plan.first[i] == i && plan.count[i] == 1);

	/* fixed events are still bounded by the group size */
	for (unsigned i = 0; i < 10; i++)
		ev[i].fixed = true;
	ck_assert_int_eq(counters_plan_groups(ev, 10, 4, &plan, &err), 2);
	ck_assert_uint_eq(plan.count[0], COUNTERS_MAX_GROUP);
	ck_assert_uint_eq(plan.count[1], 10 - COUNTERS_MAX_GROUP);

	ck_assert_int_eq(counters_plan_groups(ev, 0, 4, &plan, &err), 0);
	ck_assert_int_eq(counters_plan_groups(ev, 3, 0, &plan, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "counters: max_per_group must be at least 1");
	ck_assert_int_eq(counters_plan_groups(ev, COUNTERS_MAX_EVENTS + 1, 4, &plan, &err), -E2BIG);
	ck_assert_ptr_nonnull(strstr(err.msg, "33 events to plan"));
}
END_TEST

START_TEST(test_scaling)
{
	struct counters_reading r;
	struct pim_error err = { 0 };

	/* multiplexed half the time: 1000 counted over 100 of 200 ns -> 2000, flagged */
	struct counters_sample s = { .n = 1, .value = { 1000 }, .time_enabled = 200,
				     .time_running = 100 };
	ck_assert_int_eq(counters_scale(&s, &r, &err), 0);
	ck_assert(r.scaled);
	ck_assert_uint_eq(r.raw[0], 1000);
	ck_assert_uint_eq(r.value[0], 2000);
	ck_assert_uint_eq(r.time_enabled, 200);
	ck_assert_uint_eq(r.time_running, 100);

	/* ran throughout: untouched */
	s.time_running = 200;
	ck_assert_int_eq(counters_scale(&s, &r, &err), 0);
	ck_assert(!r.scaled);
	ck_assert_uint_eq(r.value[0], 1000);

	/* rounding and no overflow: UINT64_MAX/2 · 3/2 would overflow 64-bit intermediates */
	struct counters_sample big = { .n = 2, .value = { UINT64_MAX / 2, 1 }, .time_enabled = 3,
				       .time_running = 2 };
	ck_assert_int_eq(counters_scale(&big, &r, &err), 0);
	ck_assert_uint_eq(r.value[0], UINT64_MAX / 2 + UINT64_MAX / 4 + 1);
	ck_assert_uint_eq(r.value[1], 2); /* 1.5 rounds to 2 */
	big.value[0] = UINT64_MAX;
	ck_assert_int_eq(counters_scale(&big, &r, &err), 0);
	ck_assert_uint_eq(r.value[0], UINT64_MAX); /* saturates */

	/* never scheduled: an error, not a zero */
	s.time_running = 0;
	ck_assert_int_eq(counters_scale(&s, &r, &err), -ENOSPC);
	ck_assert_ptr_nonnull(strstr(err.msg, "never scheduled on the PMU"));
	ck_assert_ptr_nonnull(strstr(err.msg, "another group"));

	s.time_running = 300;
	ck_assert_int_eq(counters_scale(&s, &r, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "exceeds time_enabled"));

	/* delta then scale */
	struct counters_sample a = { .n = 1, .value = { 100 }, .time_enabled = 1000,
				     .time_running = 1000 };
	struct counters_sample b = { .n = 1, .value = { 1100 }, .time_enabled = 3000,
				     .time_running = 2000 };
	ck_assert_int_eq(counters_delta(&a, &b, &r, &err), 0);
	ck_assert_uint_eq(r.raw[0], 1000);
	ck_assert_uint_eq(r.value[0], 2000);
	ck_assert_uint_eq(r.time_enabled, 2000);
	ck_assert_uint_eq(r.time_running, 1000);
	ck_assert(r.scaled);

	ck_assert_int_eq(counters_delta(&b, &a, &r, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "smaller times"));
	b.time_enabled = a.time_enabled;
	b.time_running = a.time_running;
	b.value[0] = 50;
	ck_assert_int_eq(counters_delta(&a, &b, &r, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "went back (100 -> 50)"));
	b.n = 2;
	ck_assert_int_eq(counters_delta(&a, &b, &r, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "1 and 2 events"));
}
END_TEST

START_TEST(test_open_errors)
{
	struct counters_group g;
	struct pim_error err = { 0 };
	struct counters_event ev[COUNTERS_MAX_GROUP + 1];
	for (unsigned i = 0; i < ELEMENTSOF(ev); i++)
		ev[i] = (struct counters_event){ .name = "task-clock",
						 .attr = sw_attr(PERF_COUNT_SW_TASK_CLOCK) };

	ck_assert_int_eq(counters_open(&g, 0, -1, ev, 0, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "empty event group"));
	ck_assert_int_eq(counters_open(&g, 0, -1, ev, COUNTERS_MAX_GROUP + 1, &err), -E2BIG);
	ck_assert_ptr_nonnull(strstr(err.msg, "counters_plan_groups"));

	/* an event type no kernel has */
	ev[0].name = "bogus";
	ev[0].attr.type = 0x7fff0000;
	ck_assert_int_lt(counters_open(&g, 0, -1, ev, 1, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "perf_event_open(bogus) failed with"));

	/* a member the kernel rejects: named, with its place in the group */
	ev[0] = (struct counters_event){ .name = "task-clock",
					 .attr = sw_attr(PERF_COUNT_SW_TASK_CLOCK) };
	ev[1] = (struct counters_event){ .name = "too-fast",
					 .attr = sw_attr(PERF_COUNT_SW_PAGE_FAULTS) };
	ev[1].attr.freq = 1;
	ev[1].attr.sample_freq = 1ull << 40; /* above kernel.perf_event_max_sample_rate */
	ck_assert_int_eq(counters_open(&g, 0, -1, ev, 2, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "perf_event_open(too-fast) failed with EINVAL as member 1 of the "
				  "group led by task-clock: the group does not fit the PMU; run this "
				  "event in another group");
	ck_assert_int_eq(g.fd[0], -1);

	ck_assert_int_eq(counters_enable(&g, &err), -EBADF);
	ck_assert_ptr_nonnull(strstr(err.msg, "not open"));
}
END_TEST

START_TEST(test_pin_cpu)
{
	cpu_set_t set;
	struct pim_error err = { 0 };
	ck_assert_int_eq(sched_getaffinity(0, sizeof set, &set), 0);
	int cpu = -1;
	for (int i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &set))
			cpu = i; /* the last allowed one */
	ck_assert_int_ge(cpu, 0);

	ck_assert_msg(counters_pin_cpu(cpu, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(sched_getaffinity(0, sizeof set, &set), 0);
	ck_assert_int_eq(CPU_COUNT(&set), 1);
	ck_assert(CPU_ISSET(cpu, &set));
	sched_yield();
	ck_assert_int_eq(sched_getcpu(), cpu);

	ck_assert_int_eq(counters_pin_cpu(-1, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "out of range"));
	ck_assert_int_eq(counters_pin_cpu(CPU_SETSIZE - 1, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "cannot pin to CPU 1023: it is offline or outside this thread's "
				  "cpuset");
}
END_TEST

static Suite *counters_suite(void)
{
	Suite *s = suite_create("counters");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_software_group_counts);
	tcase_add_test(tc, test_probe_consistent);
	tcase_add_test(tc, test_hardware_group_matches_probe);
	tcase_add_test(tc, test_plan_groups);
	tcase_add_test(tc, test_scaling);
	tcase_add_test(tc, test_open_errors);
	tcase_add_test(tc, test_pin_cpu);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(counters_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
