/* SPDX-License-Identifier: MIT */
/*
 * test_bandwidth.c: the statistic behind a measured B_cpu (daemon/bandwidth.c), against numbers
 * computed by hand.
 */
#include <check.h>
#include <math.h>
#include <string.h>

#include "bandwidth.h"

#define G 1e9
#define ck_near(x, want) ck_assert_msg(fabs((x) - (double)(want)) <= 1e-9 * fabs((double)(want)) + 1e-12, \
				       "%s = %.12g, want %.12g", #x, (double)(x), (double)(want))

/*
 * Eight passes in two groups of four (GB/s):
 *   group 1: 10 20 18 19 -> sorted 10 18 19 20; q0.9 at 0.9·3 = 2.7: 19 + 0.7·(20 − 19) = 19.7
 *   group 2: 21  9 20 17 -> sorted  9 17 20 21; q0.9 at 2.7:          20 + 0.7·(21 − 20) = 20.7
 *   all:     9 10 17 18 19 20 20 21; q0.9 at 0.9·7 = 6.3: 20 + 0.3·(21 − 20) = 20.3 (B_cpu)
 *            median at 3.5: 18 + 0.5·(19 − 18) = 18.5
 *   spread = (20.7 − 19.7) / 20.3; slow: below 0.75·20.3 = 15.225: 9 and 10, 2/8 = 0.25
 *   runnable 1 3 2 -> median 2: not more than 2 CPUs, and 0.25 slow is not more than 1/4: quiet
 */
static const double passes[] = { 10 * G, 20 * G, 18 * G, 19 * G, 21 * G, 9 * G, 20 * G, 17 * G };

START_TEST(test_quantiles_and_spread)
{
	static const double runnable[] = { 1, 3, 2 };
	struct bandwidth_result r;
	struct pim_error err = { 0 };
	char text[160];

	ck_assert_int_eq(bandwidth_summarize(passes, 8, 2, runnable, 3, 2, &r, &err), 0);
	ck_near(r.b_cpu, 20.3 * G);
	ck_near(r.median, 18.5 * G);
	ck_near(r.spread, 1.0 / 20.3);
	ck_near(r.slow_share, 0.25);
	ck_near(r.runnable, 2);
	ck_assert_uint_eq(r.passes, 8);
	ck_assert(!r.busy);
	bandwidth_describe(&r, 2, text, sizeof text);
	ck_assert_str_eq(text, "quiet: 2 runnable tasks on 2 CPUs, 25% of the passes below 75% of B_cpu");

	/* the same passes as one group: nothing to spread over */
	ck_assert_int_eq(bandwidth_summarize(passes, 8, 1, NULL, 0, 2, &r, &err), 0);
	ck_near(r.b_cpu, 20.3 * G);
	ck_assert(r.spread == 0);
	ck_assert(r.runnable == 0 && !r.busy);
	bandwidth_describe(&r, 2, text, sizeof text);
	ck_assert_str_eq(text, "quiet: 25% of the passes below 75% of B_cpu");
}
END_TEST

START_TEST(test_busy)
{
	struct bandwidth_result r;
	struct pim_error err = { 0 };
	char text[160];

	/* runnable 4 4 5 3 -> sorted 3 4 4 5, median at 1.5: 4 > 2 CPUs */
	static const double four[] = { 4, 4, 5, 3 };
	ck_assert_int_eq(bandwidth_summarize(passes, 8, 2, four, 4, 2, &r, &err), 0);
	ck_near(r.runnable, 4);
	ck_assert(r.busy);
	ck_near(r.b_cpu, 20.3 * G); /* the figure itself does not depend on the verdict */
	bandwidth_describe(&r, 2, text, sizeof text);
	ck_assert_str_eq(text, "busy: 4 runnable tasks on 2 CPUs, 25% of the passes below 75% of B_cpu");

	/* the same runnable tasks on 1 CPU more than the median of 2 */
	static const double two[] = { 1, 3, 2 };
	ck_assert_int_eq(bandwidth_summarize(passes, 8, 2, two, 3, 1, &r, &err), 0);
	ck_assert(r.busy);

	/*
	 * Slow passes alone: 4 6 20 20 20 (GB/s), one group.  q0.9 at 3.6: 20; below 15: 4 and 6,
	 * 2/5 = 0.4 > 1/4: busy, with the runnable count unknown.  Groups of 2 and 3 (the last takes
	 * the remainder): q0.9 of 4 6 at 0.9: 4 + 0.9·2 = 5.8; of 20 20 20: 20; spread (20 − 5.8) / 20.
	 */
	static const double slow[] = { 4 * G, 6 * G, 20 * G, 20 * G, 20 * G };
	ck_assert_int_eq(bandwidth_summarize(slow, 5, 2, NULL, 0, 2, &r, &err), 0);
	ck_near(r.b_cpu, 20 * G);
	ck_near(r.median, 20 * G);
	ck_near(r.slow_share, 0.4);
	ck_near(r.spread, (20 - 5.8) / 20);
	ck_assert(r.busy);
	bandwidth_describe(&r, 2, text, sizeof text);
	ck_assert_str_eq(text, "busy: 40% of the passes below 75% of B_cpu");
}
END_TEST

/* The figure of a loaded probe: a third of the passes halved (a competitor beside them) leaves
 * the 90th percentile where the undisturbed passes put it. */
START_TEST(test_load_cannot_halve)
{
	double quiet[30], loaded[30];
	struct bandwidth_result rq, rl;
	struct pim_error err = { 0 };

	for (int i = 0; i < 30; i++) {
		quiet[i] = (18 + (i % 5) * 0.5) * G;   /* 18 .. 20 GB/s */
		loaded[i] = i % 3 == 0 ? quiet[i] / 2 : quiet[i];
	}
	ck_assert_int_eq(bandwidth_summarize(quiet, 30, 3, NULL, 0, 2, &rq, &err), 0);
	ck_assert_int_eq(bandwidth_summarize(loaded, 30, 3, NULL, 0, 2, &rl, &err), 0);
	ck_near(rq.b_cpu, 20 * G);
	ck_near(rl.b_cpu, 20 * G);
	ck_assert(rl.median < rq.median);
	ck_assert(rl.busy && !rq.busy); /* 10 of 30 passes below 15 GB/s */
}
END_TEST

START_TEST(test_refused)
{
	struct bandwidth_result r;
	struct pim_error err = { 0 };
	double bad[] = { 1 * G, -1, 2 * G };

	ck_assert_int_eq(bandwidth_summarize(passes, 0, 1, NULL, 0, 2, &r, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "bandwidth probe: no pass was timed");
	ck_assert_int_eq(bandwidth_summarize(passes, 8, 0, NULL, 0, 2, &r, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "bandwidth probe: 0 groups of 8 passes");
	ck_assert_int_eq(bandwidth_summarize(passes, 2, 3, NULL, 0, 2, &r, &err), -EINVAL);
	ck_assert_int_eq(bandwidth_summarize(bad, 3, 1, NULL, 0, 2, &r, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "bandwidth probe: pass 1 measured -1 B/s");
	bad[1] = NAN;
	ck_assert_int_eq(bandwidth_summarize(bad, 3, 1, NULL, 0, 2, &r, &err), -EINVAL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("bandwidth");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_quantiles_and_spread);
	tcase_add_test(tc, test_busy);
	tcase_add_test(tc, test_load_cannot_halve);
	tcase_add_test(tc, test_refused);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
