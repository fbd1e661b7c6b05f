/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of threshold calibration (daemon/calibrate.c): label parsing and the θ/σ sweep on a
 * labelled set built to mirror the paper's (44 loops, 29 beneficial, FP minimal over
 * [1.80, 2.13] GB/s, 26 selected and 37/44 correct at θ = 2.0 GB/s).
 */
#include "calibrate.h"

#include <check.h>
#include <math.h>
#include <string.h>

#define ck_rel(a, b)                                                                                \
	do {                                                                                       \
		double a_ = (a), b_ = (b);                                                         \
		ck_assert_msg(fabs(a_ - b_) <= 1e-9 * fabs(b_) + 1e-18, "%s = %.15g, expected %.15g", \
			      #a, a_, b_);                                                          \
	} while (0)

#define ck_has(hay, needle)                                                                         \
	ck_assert_msg(strstr((hay), (needle)) != NULL, "'%s' does not contain '%s'", (hay), (needle))

static struct placement_params tparams(void)
{
	struct placement_params p = placement_params_default();

	p.n_core = 64;
	p.f_pim = 400e6;
	p.t_ctx = 10e-6;
	p.theta = 2e9;
	p.sigma = 0.4;
	return p;
}

/* ------------------------------------------------------------------ parsing */

static const struct placement_region pregions[] = {
	{ .id = 7, .name = "a", .n_par = 1, .n_total = 1, .trip = 1 },
	{ .id = 8, .name = "b", .n_par = 1, .n_total = 1, .trip = 1 },
	{ .id = 9, .name = "dup", .n_par = 1, .n_total = 1, .trip = 1 },
	{ .id = 10, .name = "dup", .n_par = 1, .n_total = 1, .trip = 1 },
	{ .id = 11, .name = "12", .n_par = 1, .n_total = 1, .trip = 1 }, /* no region has id 12 */
};

START_TEST(test_parse_ok)
{
	/* the buffer continues past len: the parser must not read beyond it */
	static const char text[] = "# labels for a test\r\n"
				   "  Region , Beneficial \r\n"
				   "7,1   # by id\n"
				   "b, yes\n"
				   "\n"
				   "12,FALSE\n"
				   "8,1\n";
	size_t len = strlen(text) - strlen("8,1\n");
	struct calibrate_labels l;
	struct pim_error err = { 0 };

	ck_assert_int_eq(calibrate_parse_labels(text, len, pregions, ELEMENTSOF(pregions), &l, &err), 0);
	ck_assert_uint_eq(l.n, 3);
	ck_assert_uint_eq(l.v[0].region, 0);
	ck_assert(l.v[0].beneficial);
	ck_assert_uint_eq(l.v[0].line, 3);
	ck_assert_uint_eq(l.v[1].region, 1);
	ck_assert(l.v[1].beneficial);
	ck_assert_uint_eq(l.v[1].line, 4);
	/* "12" is no id, so it is the name of id 11 */
	ck_assert_uint_eq(l.v[2].region, 4);
	ck_assert(!l.v[2].beneficial);
	ck_assert_uint_eq(l.v[2].line, 6);
	calibrate_labels_free(&l);

	/* no final newline, "true"/"0"/"no" */
	static const char t2[] = "region,beneficial\n7,true\n8,0\n11,no";
	ck_assert_int_eq(calibrate_parse_labels(t2, strlen(t2), pregions, ELEMENTSOF(pregions), &l, &err), 0);
	ck_assert_uint_eq(l.n, 3);
	ck_assert(l.v[0].beneficial && !l.v[1].beneficial && !l.v[2].beneficial);
	calibrate_labels_free(&l);
}
END_TEST

static void parse_bad(const char *text, size_t len, const char *needle)
{
	struct calibrate_labels l = { (void *)1, 99 };
	struct pim_error err = { 0 };

	ck_assert_int_eq(calibrate_parse_labels(text, len, pregions, ELEMENTSOF(pregions), &l, &err), -EINVAL);
	ck_has(err.msg, needle);
	ck_assert_ptr_null(l.v);
	ck_assert_uint_eq(l.n, 0);
}

#define PARSE_BAD(text, needle) parse_bad((text), strlen(text), (needle))

START_TEST(test_parse_errors)
{
	PARSE_BAD("7,1\n", "labels line 1: expected the header 'region,beneficial'");
	PARSE_BAD("# c\nregion,good\n", "labels line 2: expected the header 'region,beneficial'");
	PARSE_BAD("region,beneficial\n7,maybe\n",
		  "labels line 2: beneficial 'maybe' is not one of 1/0/yes/no/true/false");
	PARSE_BAD("region,beneficial\n7,1\na,0\n", "labels line 3: region 7 (a) already labelled on line 2");
	PARSE_BAD("region,beneficial\n\nzzz,1\n", "labels line 3: unknown region 'zzz' (neither an id nor a name)");
	PARSE_BAD("region,beneficial\n99,1\n", "labels line 2: unknown region '99'");
	PARSE_BAD("region,beneficial\n7,1,2\n", "labels line 2: expected two fields 'region,beneficial', got more");
	PARSE_BAD("region,beneficial\n7\n", "labels line 2: expected two fields 'region,beneficial', found no comma");
	PARSE_BAD("region,beneficial\n , 1\n", "labels line 2: empty region field");
	PARSE_BAD("region,beneficial\ndup,1\n",
		  "labels line 2: region name 'dup' is ambiguous (several regions): use the id");
	PARSE_BAD("", "labels: no header line 'region,beneficial' (file is empty)");
	PARSE_BAD("# nothing but comments\n\n", "labels: no header line");
	parse_bad("region,beneficial\n7,\0 1\n", 24, "labels line 2: NUL byte in text");
}
END_TEST

/* ------------------------------------------------------------------ the sweep */

/*
 * 44 regions, all passing Stage 1 (N_par = N_total = 1,048,576 >= 64; T_host 64 ms against
 * C1's 10 µs + 1,048,576/25.6e9 = 50.96 µs).  BW_read = n_rd·64/0.064 = n_rd·1000 B/s.
 *   beneficial (29):
 *     0..13   BW 5 GB/s                          selected over the whole sweep
 *     14..23  BW 2.135 + 0.01·k GB/s, k = 0..9   selected up to θ = 2.13 .. 2.22
 *     24..26  BW 5 GB/s but N_par 8 (C2 fails)   never selected
 *     27..28  BW 0.3 GB/s                        never selected (below the sweep)
 *   not beneficial (15):
 *     29..30  BW 5 GB/s                          always selected: the 2 irreducible FP
 *     31      BW 1.795 GB/s                      FP up to θ = 1.79
 *     32      BW 1.725 GB/s                      FP up to θ = 1.72
 *     33..43  BW 0.2 GB/s, f_store 10/(30+30+30+10) = 0.1: FP only when σ <= 0.1
 * No store counts elsewhere (C4 not evaluable).
 * σ = 0.4:
 *   θ = 1.70: selected 14+10+2+2 = 28, FP 4, FN 5 → (24 + 11)/44
 *   θ = 1.75: FP 3;  θ in [1.80, 2.13]: FP 2, FN 5, selected 26, accuracy 37/44 = 0.841
 *   θ = 2.14: FN 6 (the 2.135 region drops);  θ = 2.25: FN 15, selected 16, accuracy 27/44 = 0.614
 *   minimal FP (2) holds from 1.80 to 4.00; minimal FN among those (5) only on [1.80, 2.13]
 *   → suggestion (1.80 + 2.13)/2 = 1.965 GB/s, where 26 are selected and 37/44 match.
 * σ = 0.05: the 11 low-bandwidth regions are selected through C4 everywhere: FP 13 on the same
 *   interval, accuracy (24 + 2)/44 at 1.965 → σ = 0.4 is the better suggestion.
 */
#define NREG 44

static void build_set(struct placement_region r[NREG], char names[NREG][16])
{
	for (int i = 0; i < NREG; i++) {
		double bw;

		snprintf(names[i], 16, "loop%d", i);
		r[i] = (struct placement_region){ .id = (uint32_t)(100 + i), .name = names[i], .order = (uint32_t)i,
						  .n_par = 1048576, .n_total = 1048576, .trip = 1,
						  .evidence = PL_EVIDENCE_COUNTERS, .t_host = 0.064 };
		if (i < 14 || (i >= 24 && i <= 26) || i == 29 || i == 30)
			bw = 5e9;
		else if (i < 24)
			bw = 2.135e9 + 0.01e9 * (i - 14);
		else if (i < 29)
			bw = 0.3e9;
		else if (i == 31)
			bw = 1.795e9;
		else if (i == 32)
			bw = 1.725e9;
		else
			bw = 0.2e9;
		r[i].have_n_rd = true;
		r[i].n_rd = bw / 1000;
		if (i >= 24 && i <= 26)
			r[i].n_par = 8;
		if (i >= 33) {
			r[i].have_store = true;
			r[i].c_store = 10;
			r[i].c_be1 = r[i].c_be2 = r[i].c_be3 = 30;
		}
	}
}

static void labels_for_set(const struct placement_region r[NREG], struct calibrate_labels *l)
{
	char text[NREG * 16 + 64];
	size_t pos = 0;
	struct pim_error err = { 0 };

	pos += (size_t)snprintf(text + pos, sizeof text - pos, "region,beneficial\n");
	for (int i = 0; i < NREG; i++)
		pos += (size_t)snprintf(text + pos, sizeof text - pos, "%u,%d\n", r[i].id, i < 29);
	ck_assert_int_eq(calibrate_parse_labels(text, pos, r, NREG, l, &err), 0);
	ck_assert_uint_eq(l->n, NREG);
}

static const struct calibrate_point *at(const struct calibrate_result *res, size_t s, double theta_gbs)
{
	/* grid index of θ: (θ − 0.50)/0.01 */
	size_t t = (size_t)llround((theta_gbs - 0.5) / 0.01);

	ck_assert_uint_lt(t, res->n_thetas);
	ck_rel(res->points[s * res->n_thetas + t].theta, theta_gbs * 1e9);
	return &res->points[s * res->n_thetas + t];
}

START_TEST(test_sweep_paper_like)
{
	struct placement_region r[NREG];
	char names[NREG][16];
	struct calibrate_labels l;
	struct calibrate_result res;
	struct placement_params p = tparams();
	const double sigmas[] = { 0.4, 0.05 };
	struct calibrate_sweep sw = calibrate_sweep_default();
	struct pim_error err = { 0 };

	build_set(r, names);
	labels_for_set(r, &l);
	sw.sigmas = sigmas;
	sw.n_sigmas = 2;
	ck_assert_int_eq(calibrate_run(r, NREG, &p, &l, &sw, &res, &err), 0);
	ck_assert_uint_eq(res.n_thetas, 351); /* 0.50, 0.51, .., 4.00 */
	ck_assert_uint_eq(res.n_sigmas, 2);
	ck_assert_uint_eq(res.n_labelled, 44);
	ck_assert_uint_eq(res.n_beneficial, 29);

	const struct calibrate_point *pt = at(&res, 0, 1.70);
	ck_assert_uint_eq(pt->selected, 28);
	ck_assert_uint_eq(pt->fp, 4);
	ck_assert_uint_eq(pt->fn, 5);
	ck_rel(pt->accuracy, 35.0 / 44);
	ck_assert_uint_eq(at(&res, 0, 1.75)->fp, 3);
	ck_assert_uint_eq(at(&res, 0, 1.79)->fp, 3);
	ck_assert_uint_eq(at(&res, 0, 1.80)->fp, 2);
	pt = at(&res, 0, 2.00);
	ck_assert_uint_eq(pt->selected, 26);
	ck_assert_uint_eq(pt->tp, 24);
	ck_assert_uint_eq(pt->fp, 2);
	ck_assert_uint_eq(pt->tn, 13);
	ck_assert_uint_eq(pt->fn, 5);
	ck_rel(pt->accuracy, 37.0 / 44);
	ck_assert_uint_eq(at(&res, 0, 2.13)->fn, 5);
	ck_assert_uint_eq(at(&res, 0, 2.14)->fn, 6);
	pt = at(&res, 0, 2.25);
	ck_assert_uint_eq(pt->fn, 15);
	ck_assert_uint_eq(pt->fp, 2);
	ck_assert_uint_eq(pt->selected, 16);
	ck_rel(pt->accuracy, 27.0 / 44);
	ck_assert_uint_eq(at(&res, 0, 4.00)->fp, 2);

	const struct calibrate_suggestion *s = &res.suggestions[0];
	ck_rel(s->sigma, 0.4);
	ck_rel(s->lo, 1.80e9);
	ck_rel(s->hi, 2.13e9);
	ck_rel(s->theta, 1.965e9);
	ck_assert_uint_eq(s->at.selected, 26);
	ck_assert_uint_eq(s->at.fp, 2);
	ck_assert_uint_eq(s->at.fn, 5);
	ck_rel(s->at.accuracy, 37.0 / 44);

	s = &res.suggestions[1];
	ck_rel(s->sigma, 0.05);
	ck_assert_uint_eq(at(&res, 1, 2.00)->fp, 13);
	ck_rel(s->lo, 1.80e9);
	ck_rel(s->hi, 2.13e9);
	ck_assert_uint_eq(s->at.fp, 13);
	ck_rel(s->at.accuracy, 26.0 / 44);
	ck_assert_uint_eq(res.best, 0);

	calibrate_result_free(&res);
	calibrate_labels_free(&l);
}
END_TEST

START_TEST(test_sweep_default_sigma_and_subset)
{
	/*
	 * Only regions 29..32 labelled (not beneficial) and 0 (beneficial), σ from the params (0.4).
	 * FP: 29, 30 always; 31 up to 1.79; 32 up to 1.72 → min FP 2 from 1.80 to 4.00, FN 0
	 * throughout → interval [1.80, 4.00], suggestion 2.90 GB/s.
	 */
	struct placement_region r[NREG];
	char names[NREG][16];
	struct calibrate_labels l;
	struct calibrate_result res;
	struct placement_params p = tparams();
	struct pim_error err = { 0 };
	static const char text[] = "region,beneficial\nloop29,0\nloop30,0\nloop31,no\n132,false\nloop0,1\n";

	build_set(r, names);
	ck_assert_int_eq(calibrate_parse_labels(text, strlen(text), r, NREG, &l, &err), 0);
	ck_assert_int_eq(calibrate_run(r, NREG, &p, &l, NULL, &res, &err), 0);
	ck_assert_uint_eq(res.n_sigmas, 1);
	ck_rel(res.suggestions[0].sigma, 0.4);
	ck_rel(res.suggestions[0].lo, 1.80e9);
	ck_rel(res.suggestions[0].hi, 4.00e9);
	ck_rel(res.suggestions[0].theta, 2.90e9);
	ck_assert_uint_eq(res.suggestions[0].at.fp, 2);
	ck_assert_uint_eq(res.suggestions[0].at.selected, 3);
	calibrate_result_free(&res);
	calibrate_labels_free(&l);
}
END_TEST

START_TEST(test_run_errors)
{
	struct placement_region r[NREG];
	char names[NREG][16];
	struct calibrate_labels l, none = { 0 };
	struct calibrate_result res;
	struct placement_params p = tparams();
	struct calibrate_sweep sw = calibrate_sweep_default();
	struct pim_error err = { 0 };
	const double bad_sigma[] = { 2 };

	build_set(r, names);
	labels_for_set(r, &l);
	ck_assert_int_eq(calibrate_run(r, NREG, &p, &none, NULL, &res, &err), -EINVAL);
	ck_has(err.msg, "calibrate: no labelled regions");
	sw.theta_step = 0;
	ck_assert_int_eq(calibrate_run(r, NREG, &p, &l, &sw, &res, &err), -EINVAL);
	ck_has(err.msg, "theta_step=0 must be a finite number > 0 B/s");
	sw = calibrate_sweep_default();
	sw.theta_hi = 0.1e9;
	ck_assert_int_eq(calibrate_run(r, NREG, &p, &l, &sw, &res, &err), -EINVAL);
	ck_has(err.msg, "theta_hi=1e+08 must be finite and >= theta_lo=5e+08");
	sw = calibrate_sweep_default();
	sw.sigmas = bad_sigma;
	sw.n_sigmas = 1;
	ck_assert_int_eq(calibrate_run(r, NREG, &p, &l, &sw, &res, &err), -EINVAL);
	ck_has(err.msg, "σ #1 is 2: must lie in [0, 1]");
	sw = calibrate_sweep_default();
	sw.theta_step = 1;
	ck_assert_int_eq(calibrate_run(r, NREG, &p, &l, &sw, &res, &err), -E2BIG);
	ck_has(err.msg, "exceed the limit");
	p.sigma = 7;
	ck_assert_int_eq(calibrate_run(r, NREG, &p, &l, NULL, &res, &err), -EINVAL);
	ck_has(err.msg, "invalid placement parameter sigma=7");
	p = tparams();
	r[5].t_host = -1;
	ck_assert_int_eq(calibrate_run(r, NREG, &p, &l, NULL, &res, &err), -EINVAL);
	ck_has(err.msg, "regions[5] (id 105, loop5): t_host must be a finite number >= 0 s");
	ck_assert_ptr_null(res.points);
	calibrate_labels_free(&l);
}
END_TEST

/*
 * Imported counts from a host with twice this host's B_cpu: the sweep's θ is this host's, so
 * their BW_read counts at half.  a: imported, 3 GB/s there (n_rd 46,875 over 1 ms), i.e.
 * 1.5 GB/s here, not beneficial; b: measured here, 2.5 GB/s (n_rd 39,062.5), beneficial.  Both
 * pass Stage 1 (N_par 4096 >= 64, 1 ms > 10 µs + 4096/25.6e9).  Grid 1.0, 1.5, ... 3.0 GB/s:
 *   θ 1.5: a (1.5) and b selected: 1 FP;  θ 2.0: only b: no FP, accuracy 1;  θ 3.0: none: 1 FN.
 * Read at a's own 3 GB/s, θ 2.0 would wrongly select it.
 */
START_TEST(test_sweep_imported_b_cpu)
{
	struct placement_params p = tparams();
	struct placement_region r[2] = {
		{ .id = 0, .name = "a", .n_par = 4096, .n_total = 4096, .trip = 1, .evidence = PL_EVIDENCE_IMPORTED,
		  .t_host = 1e-3, .have_n_rd = true, .n_rd = 46875, .b_cpu_source = 2 * p.b_cpu },
		{ .id = 1, .name = "b", .n_par = 4096, .n_total = 4096, .trip = 1, .evidence = PL_EVIDENCE_COUNTERS,
		  .t_host = 1e-3, .have_n_rd = true, .n_rd = 39062.5 },
	};
	struct calibrate_label lv[2] = { { .region = 0, .beneficial = false, .line = 2 },
					 { .region = 1, .beneficial = true, .line = 3 } };
	struct calibrate_labels l = { .v = lv, .n = 2 };
	struct calibrate_sweep sw = { .theta_lo = 1e9, .theta_hi = 3e9, .theta_step = 0.5e9 };
	struct calibrate_result res = { 0 };
	struct pim_error err = { 0 };

	ck_assert_int_eq(calibrate_run(r, 2, &p, &l, &sw, &res, &err), 0);
	ck_assert_uint_eq(res.n_thetas, 5);
	const struct calibrate_point *t15 = &res.points[1], *t20 = &res.points[2], *t30 = &res.points[4];
	ck_rel(t15->theta, 1.5e9);
	ck_assert_uint_eq(t15->selected, 2);
	ck_assert_uint_eq(t15->fp, 1);
	ck_rel(t20->theta, 2.0e9);
	ck_assert_uint_eq(t20->selected, 1);
	ck_assert_uint_eq(t20->fp, 0);
	ck_assert_uint_eq(t20->tp, 1);
	ck_rel(t20->accuracy, 1.0);
	ck_assert_uint_eq(t30->selected, 0);
	ck_assert_uint_eq(t30->fn, 1);
	calibrate_result_free(&res);
}
END_TEST

static Suite *calibrate_suite(void)
{
	Suite *s = suite_create("calibrate");
	struct {
		const char *name;
		const TTest *t;
	} tests[] = {
		{ "parse_ok", test_parse_ok },
		{ "parse_errors", test_parse_errors },
		{ "sweep_paper_like", test_sweep_paper_like },
		{ "sweep_default_sigma_and_subset", test_sweep_default_sigma_and_subset },
		{ "run_errors", test_run_errors },
		{ "sweep_imported_b_cpu", test_sweep_imported_b_cpu },
	};

	for (size_t i = 0; i < ELEMENTSOF(tests); i++) {
		TCase *tc = tcase_create(tests[i].name);
		tcase_set_timeout(tc, 60);
		tcase_add_test(tc, tests[i].t);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(calibrate_suite());
	int failed;

	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
