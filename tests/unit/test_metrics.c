/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of daemon/metrics.c: medians and spread, the time_enabled / time_running scaling of
 * multiplexed counts, per-execution values over repetitions, and the timing backend's BW_read
 * estimate. Every expected number is worked out by hand in the comment beside it.
 */
#include <math.h>
#include <string.h>

#include "metrics.h"
#include "test_util.h"

#define TOL 1e-15

START_TEST(median_and_spread)
{
	double v[] = { 4, 1, 3, 2 }, spread;
	/* even count: mean of the middle two, (2 + 3) / 2; spread (4 - 1) / 2.5 = 1.2 */
	ck_assert(metrics_median(v, 4, &spread) == 2.5);
	ck_assert(spread == (4.0 - 1.0) / 2.5);
	ck_assert(v[0] == 1 && v[3] == 4); /* sorted in place */
	double w[] = { 5, 1, 3 };
	ck_assert(metrics_median(w, 3, NULL) == 3);
	ck_assert(isnan(metrics_median(w, 0, &spread)));
	ck_assert(spread == 0);
	double z[] = { 0, 1, 0 }; /* median 0: no relative spread */
	ck_assert(metrics_median(z, 3, &spread) == 0);
	ck_assert(spread == 0);
}
END_TEST

START_TEST(scale_only_multiplexed_groups)
{
	bool scaled;
	/* on the PMU a quarter of the time: 1000 counted, 4000 estimated */
	ck_assert(metrics_scale(1000, 4000, 1000, &scaled) == 4000);
	ck_assert(scaled);
	/* on the PMU all the time: the count itself */
	ck_assert(metrics_scale(1000, 4000, 4000, &scaled) == 1000);
	ck_assert(!scaled);
	/* never scheduled (running 0) or inconsistent times (running > enabled): not scaled */
	ck_assert(metrics_scale(7, 4000, 0, &scaled) == 7);
	ck_assert(!scaled);
	ck_assert(metrics_scale(7, 1000, 2000, &scaled) == 7);
	ck_assert(!scaled);
	/* 3 counted in 2 of 3 ns: 4.5 */
	ck_assert(metrics_scale(3, 3, 2, NULL) == 4.5);
}
END_TEST

START_TEST(region_medians_per_execution)
{
	struct metrics_region r;
	struct metrics_result res;
	const int roles[] = { EVENTS_ROLE_N_RD, -1, EVENTS_ROLE_CYCLES };

	metrics_region_init(&r);
	/* times per execution: 3 ms / 3 = 1 ms, 2 ms / 1 = 2 ms, 5 ms / 2 = 2.5 ms; a repetition
	 * of no execution adds nothing */
	ck_assert_int_eq(metrics_add_time(&r, 3000000, 3), 0);
	ck_assert_int_eq(metrics_add_time(&r, 2000000, 1), 0);
	ck_assert_int_eq(metrics_add_time(&r, 5000000, 2), 0);
	ck_assert_int_eq(metrics_add_time(&r, 9000000, 0), 0);
	/* counts: rep 1 not multiplexed, 3 executions: n_rd 300/3 = 100, cycles 600/3 = 200;
	 * rep 2 on the PMU half the time, 1 execution: n_rd 100·2 = 200, cycles 250·2 = 500;
	 * rep 3, 2 executions: n_rd 400/2 = 200, cycles 800/2 = 400; the role-less event
	 * (index 1) is dropped */
	const uint64_t c1[] = { 300, 7, 600 }, c2[] = { 100, 0, 250 }, c3[] = { 400, 0, 800 };
	ck_assert_int_eq(metrics_add_counts(&r, c1, roles, 3, 1000, 1000, 3), 0);
	ck_assert(!r.scaled);
	ck_assert_int_eq(metrics_add_counts(&r, c2, roles, 3, 2000, 1000, 1), 0);
	ck_assert(r.scaled);
	ck_assert_int_eq(metrics_add_counts(&r, c3, roles, 3, 1000, 1000, 2), 0);
	ck_assert_int_eq(metrics_add_counts(&r, c3, roles, 3, 1000, 1000, 0), 0);

	metrics_region_result(&r, &res);
	ck_assert_uint_eq(res.reps, 3);
	/* median of 1, 2, 2.5 ms = 2 ms; spread (2.5 - 1) / 2 = 0.75 */
	ck_assert_double_eq_tol(res.t_host, 2e-3, TOL);
	ck_assert_double_eq_tol(res.t_host_spread, 0.75, 1e-12);
	/* n_rd {100, 200, 200}: 200; cycles {200, 500, 400}: 400 */
	ck_assert(res.have[EVENTS_ROLE_N_RD] && res.have[EVENTS_ROLE_CYCLES]);
	ck_assert(!res.have[EVENTS_ROLE_C_STORE] && !res.have[EVENTS_ROLE_BE1]);
	ck_assert(res.role[EVENTS_ROLE_N_RD] == 200);
	ck_assert(res.role[EVENTS_ROLE_CYCLES] == 400);
	ck_assert(res.scaled);

	/* reset: the next region starts empty */
	metrics_region_reset(&r);
	metrics_region_result(&r, &res);
	ck_assert_uint_eq(res.reps, 0);
	ck_assert(isnan(res.t_host));
	ck_assert(!res.have[EVENTS_ROLE_N_RD] && !res.scaled);
	ck_assert_int_eq(metrics_add_time(&r, 4000, 4), 0); /* 1 µs */
	metrics_region_result(&r, &res);
	ck_assert_uint_eq(res.reps, 1);
	ck_assert_double_eq_tol(res.t_host, 1e-6, TOL);
	ck_assert(res.t_host_spread == 0);
	metrics_region_free(&r);
}
END_TEST

/* Past the first buffer (64 values): 1001 repetitions of 1..1001 µs, median 501 µs, spread
 * (1001 - 1) / 501. */
START_TEST(region_many_repetitions)
{
	struct metrics_region r;
	struct metrics_result res;
	const int roles[] = { EVENTS_ROLE_C_STORE };

	metrics_region_init(&r);
	for (uint64_t i = 1001; i >= 1; i--) {
		ck_assert_int_eq(metrics_add_time(&r, i * 1000, 1), 0);
		ck_assert_int_eq(metrics_add_counts(&r, &i, roles, 1, 10, 10, 1), 0);
	}
	metrics_region_result(&r, &res);
	ck_assert_uint_eq(res.reps, 1001);
	ck_assert_double_eq_tol(res.t_host, 501e-6, 1e-18);
	ck_assert_double_eq_tol(res.t_host_spread, 1000.0 / 501.0, 1e-12);
	ck_assert(res.role[EVENTS_ROLE_C_STORE] == 501);
	metrics_region_free(&r);
}
END_TEST

START_TEST(bw_read_estimate)
{
	/* 1 MiB per execution in 1 ms: 1048576 / 1e-3 = 1.048576e9 B/s */
	ck_assert_double_eq_tol(metrics_bw_read_estimate(1048576, 1e-3), 1.048576e9, 1e-3);
	/* 64 B in 16 ns: 4 GB/s */
	ck_assert_double_eq_tol(metrics_bw_read_estimate(64, 16e-9), 4e9, 1e-3);
	/* no time (or none measured): no estimate */
	ck_assert(metrics_bw_read_estimate(64, 0) == 0);
	ck_assert(metrics_bw_read_estimate(64, NAN) == 0);
	ck_assert(metrics_bw_read_estimate(0, 1e-3) == 0);
}
END_TEST

static Suite *metrics_suite(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = test_case(s, "pure");
	tcase_add_test(tc, median_and_spread);
	tcase_add_test(tc, scale_only_multiplexed_groups);
	tcase_add_test(tc, region_medians_per_execution);
	tcase_add_test(tc, region_many_repetitions);
	tcase_add_test(tc, bw_read_estimate);
	return s;
}

int main(void)
{
	return test_run_suite(metrics_suite());
}
