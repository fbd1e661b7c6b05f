/* SPDX-License-Identifier: MIT */
/* Shared helpers for the check-based unit tests. */
#ifndef PIMD_TEST_UTIL_H
#define PIMD_TEST_UTIL_H

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* A test case with a timeout, so a hung case fails instead of stalling the run. */
static inline TCase *test_case(Suite *s, const char *name)
{
	TCase *tc = tcase_create(name);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	return tc;
}

/* Adds test t to tc when it can run here (ok); otherwise leaves it out and prints
 * "SKIP name: why", which make unit counts into its summary: a test that cannot run is
 * reported as skipped, never as passed. */
#define test_add_if(tc, t, ok, why) test_add_if_((tc), (t), #t, (ok), (why))
static inline void test_add_if_(TCase *tc, const TTest *t, const char *name, bool ok,
				const char *why)
{
	if (ok) {
		tcase_add_test(tc, t);
		return;
	}
	printf("SKIP %s: %s\n", name, why);
	fflush(stdout); /* before check forks: a child must not print it again */
}

/* Runs one suite in fork mode (each case isolated). */
static inline int test_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
