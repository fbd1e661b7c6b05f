/* SPDX-License-Identifier: MIT */
/*
 * bench_hooks: cost of one region boundary pair (pim_region_enter + pim_region_exit) in the
 * profiling worker's hooks, against an empty non-inlined call pair measured in the same run.
 *
 *   inert      hooks outside a profiling run (what pimd's own process pays: nothing to do)
 *   2x clock   two clock_gettime(CLOCK_MONOTONIC) calls: the floor of the timing backend
 *   timing     timing backend: two vDSO clock reads, the region stack and accumulator
 *   sw-group   with a software-event group (task-clock, page-faults): plus one read() each
 *   hw-group   with a hardware group (cycles, instructions) when the host has a PMU
 *
 * The hooks are called directly (worker_region_*, the code behind pim_region_*; no PLT), like
 * the empty pair. Each figure is the
 * median of 7 rounds, in ns per enter+exit pair.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "counters.h"
#include "worker.h"

#define ROUNDS 7

__attribute__((noinline)) static void empty_enter(int32_t region)
{
	__asm__ volatile("" : : "r"(region) : "memory");
}

__attribute__((noinline)) static void empty_exit(int32_t region)
{
	__asm__ volatile("" : : "r"(region) : "memory");
}

static uint64_t executions;

static void count_sample(void *ctx, const struct worker_record *r)
{
	(void)ctx;
	executions += r->sample.executions;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return v[n / 2];
}

static double empty_pairs(unsigned n)
{
	uint64_t t0 = now_ns();
	for (unsigned i = 0; i < n; i++) {
		empty_enter(0);
		empty_exit(0);
	}
	return (double)(now_ns() - t0) / n;
}

/* what the timing backend cannot avoid: two CLOCK_MONOTONIC reads per pair */
static double clock_pairs(unsigned n)
{
	uint64_t sink = 0, t0 = now_ns();
	for (unsigned i = 0; i < n; i++) {
		sink += now_ns();
		sink += now_ns();
	}
	double ns = (double)(now_ns() - t0) / n;
	__asm__ volatile("" : : "r"(sink));
	return ns;
}

/* inert: no run begun, the hooks return at once */
static double inert_pairs(unsigned n)
{
	uint64_t t0 = now_ns();
	for (unsigned i = 0; i < n; i++) {
		worker_region_enter(0);
		worker_region_exit(0);
	}
	return (double)(now_ns() - t0) / n;
}

static double profiled_pairs(unsigned n)
{
	struct worker_record fault;
	executions = 0;
	worker_hooks_begin();
	uint64_t t0 = now_ns();
	for (unsigned i = 0; i < n; i++) {
		worker_region_enter(0);
		worker_region_exit(0);
	}
	double ns = (double)(now_ns() - t0) / n;
	if (worker_hooks_end(0, 0, count_sample, NULL, &fault) < 0 || executions != n) {
		fprintf(stderr, "bench_hooks: the hooks did not count %u executions (%llu): %s\n",
			n, (unsigned long long)executions, fault.error.message);
		exit(1);
	}
	return ns;
}

/* Runs one configuration ROUNDS times, interleaved with the empty pair. */
static void measure(const char *name, double (*fn)(unsigned), unsigned n)
{
	double hook[ROUNDS], base[ROUNDS];
	for (int r = 0; r < ROUNDS; r++) {
		base[r] = empty_pairs(n);
		hook[r] = fn(n);
	}
	double h = median(hook, ROUNDS), b = median(base, ROUNDS);
	printf("%-10s %9.1f ns/pair   empty call pair %5.2f ns   ratio %7.1fx   (%u pairs x %d)\n",
	       name, h, b, h / b, n, ROUNDS);
}

static struct counters_event event(const char *name, uint32_t type, uint64_t config)
{
	struct counters_event e;
	memset(&e, 0, sizeof e);
	e.name = name;
	e.attr.size = sizeof e.attr;
	e.attr.type = type;
	e.attr.config = config;
	return e;
}

static void measure_group(const char *name, const struct counters_event *ev, unsigned n_ev,
			  unsigned pairs)
{
	struct counters_group g;
	struct pim_error err = { 0 };
	if (counters_open(&g, 0, -1, ev, n_ev, &err) < 0) {
		printf("%-10s unavailable: %s\n", name, err.msg);
		return;
	}
	if (counters_enable(&g, &err) < 0) {
		printf("%-10s unavailable: %s\n", name, err.msg);
		counters_close(&g);
		return;
	}
	worker_hooks_arm(g.fd[0], g.n);
	measure(name, profiled_pairs, pairs);
	worker_hooks_arm(-1, 0);
	counters_close(&g);
}

int main(void)
{
	struct pim_error err = { 0 };
	const int32_t regions[] = { 0 };
	struct worker_job job;
	worker_job_init(&job);
	job.regions = regions;
	job.n_regions = 1;
	if (worker_hooks_setup(&job, COUNTERS_MAX_GROUP, &err) < 0) {
		fprintf(stderr, "bench_hooks: %s\n", err.msg);
		return 1;
	}
	if (counters_pin_cpu(0, &err) < 0)
		fprintf(stderr, "bench_hooks: not pinned: %s\n", err.msg);

	struct counters_probe probe;
	counters_probe(&probe);
	printf("hook cost per region boundary pair (enter+exit), profiling worker hooks\n");
	printf("host: %s\n", probe.reason);

	measure("inert", inert_pairs, 20000000);
	measure("2x clock", clock_pairs, 5000000);
	worker_hooks_arm(-1, 0);
	measure("timing", profiled_pairs, 5000000);

	const struct counters_event sw[] = {
		event("task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK),
		event("page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS),
	};
	measure_group("sw-group", sw, 2, 200000);

	const struct counters_event hw[] = {
		event("cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES),
		event("instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS),
	};
	measure_group("hw-group", hw, 2, 200000);

	printf("rdpmc reads: not implemented (counters.c reads groups with read(); see there)\n");
	worker_hooks_teardown();
	return 0;
}
