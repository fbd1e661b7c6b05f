/* SPDX-License-Identifier: MIT */
/* Unit tests of the pure part of daemon/profile.c: the turns between uids (its metrics: test_metrics.c). */
#include <string.h>

#include "profile.h"
#include "test_util.h"

/* Runs a queue of jobs (their uids, in arrival order) one at a time; returns the start order. */
static void run_queue(struct profile_turns *t, const uid_t *queue, size_t n, uid_t *order)
{
	uid_t waiting[16];
	memcpy(waiting, queue, n * sizeof *queue);
	for (size_t k = 0; k < n; k++) {
		size_t left = n - k;
		size_t i = profile_turns_pick(t, waiting, left);
		order[k] = waiting[i];
		profile_turns_take(t, waiting[i]);
		memmove(&waiting[i], &waiting[i + 1], (left - i - 1) * sizeof *waiting);
	}
}

START_TEST(turns_between_uids)
{
	struct profile_turns t;
	memset(&t, 0, sizeof t);
	/* 1000 queued four jobs before 2000 and 3000 queued one each: they do not wait for all four */
	const uid_t queue[] = { 1000, 1000, 1000, 1000, 2000, 3000 };
	uid_t order[6];
	run_queue(&t, queue, 6, order);
	const uid_t want[] = { 1000, 2000, 3000, 1000, 1000, 1000 };
	ck_assert_mem_eq(order, want, sizeof want);

	/* now 1000's last start is the latest (its three in a row): a uid never served goes
	 * first, then 2000 and 3000 in the order of their last starts, then 1000 */
	const uid_t again[] = { 3000, 2000, 1000, 4000 };
	run_queue(&t, again, 4, order);
	const uid_t want2[] = { 4000, 2000, 3000, 1000 };
	ck_assert_mem_eq(order, want2, sizeof want2);
}
END_TEST

START_TEST(turns_forget_the_oldest)
{
	struct profile_turns t;
	memset(&t, 0, sizeof t);
	for (uid_t u = 1; u <= PROFILE_TURNS_MAX; u++)
		profile_turns_take(&t, u);
	ck_assert_uint_eq(t.n, PROFILE_TURNS_MAX);
	profile_turns_take(&t, 99999); /* table full: uid 1, served longest ago, is forgotten */
	ck_assert_uint_eq(t.n, PROFILE_TURNS_MAX);
	const uid_t two[] = { 2, 1 };
	ck_assert_uint_eq(profile_turns_pick(&t, two, 2), 1); /* forgotten: as if never served */
	const uid_t three[] = { 99999, 3, 2 };
	ck_assert_uint_eq(profile_turns_pick(&t, three, 3), 2);
}
END_TEST

static Suite *profile_suite(void)
{
	Suite *s = suite_create("profile");
	TCase *tc = test_case(s, "pure");
	tcase_add_test(tc, turns_between_uids);
	tcase_add_test(tc, turns_forget_the_oldest);
	return s;
}

int main(void)
{
	return test_run_suite(profile_suite());
}
