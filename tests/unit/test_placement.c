/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the placement rule, the movement models and the end-to-end estimate
 * (daemon/placement.c, doc/design.md §3).  Every expected number is worked out by hand in the comment
 * next to it.
 *
 * Unless a test says otherwise it runs with the test platform of tparams():
 *   N_core 64, f_pim 400 MHz (N_core·f_pim = 25.6e9 iterations/s), I_min 1, T_ctx 10 µs,
 *   θ 2.0 GB/s, σ 0.4, L 64 B, B_rd = B_wb = 10 GB/s, b_pim_core 0.25 GB/s (B_pim = 16 GB/s at 64).
 */
#include "placement.h"

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
	p.i_min = 1;
	p.t_ctx = 10e-6;
	p.theta = 2e9;
	p.sigma = 0.4;
	p.line_bytes = 64;
	p.b_rd = p.b_wb = 10e9;
	p.b_pim_core = 0.25e9;
	return p;
}

static struct placement_region reg(uint32_t id, const char *name, uint32_t order, uint64_t n_par,
				   uint64_t n_total, double t_host)
{
	return (struct placement_region){ .id = id, .name = name, .order = order, .n_par = n_par,
					  .n_total = n_total, .trip = 1, .evidence = PL_EVIDENCE_COUNTERS,
					  .t_host = t_host };
}

static void set_nrd(struct placement_region *r, double n_rd)
{
	r->have_n_rd = true;
	r->n_rd = n_rd;
}

static void set_store(struct placement_region *r, double c_store, double be1, double be2, double be3)
{
	r->have_store = true;
	r->c_store = c_store;
	r->c_be1 = be1;
	r->c_be2 = be2;
	r->c_be3 = be3;
}

static void run(const struct placement_region *r, size_t n, const struct placement_params *p,
		enum placement_granularity g, enum placement_movement_model m, const double *cores, size_t nc,
		struct placement_result *res)
{
	struct placement_query q = { .granularity = g, .movement = m, .core_counts = cores, .n_core_counts = nc };
	struct pim_error err = { 0 };
	int rc = placement_run(r, n, p, &q, res, &err);

	ck_assert_msg(rc == 0, "placement_run: %d %s", rc, err.msg);
}

static const char *reason(const struct placement_decision *d)
{
	static char buf[512];

	placement_format_reason(d, buf, sizeof buf);
	return buf;
}

/*
 * Every decision of estimate e of res, expanded by placement_decision_get(); the arrays of the
 * last eight calls stay valid.
 */
static const struct placement_decision *edecs(const struct placement_result *res,
					      const struct placement_estimate *e)
{
	static struct placement_decision *ring[8];
	static unsigned next;
	struct placement_decision **all = &ring[next++ % 8];
	size_t k = (size_t)(e - res->estimates);

	ck_assert(k < res->n_estimates);
	free(*all);
	*all = calloc(res->n_regions ? res->n_regions : 1, sizeof **all);
	ck_assert_ptr_nonnull(*all);
	for (size_t i = 0; i < res->n_regions; i++)
		placement_decision_get(res, k, i, &(*all)[i]);
	return *all;
}

/* ------------------------------------------------------------------ parameters */

START_TEST(test_params_default)
{
	struct placement_params p = placement_params_default();
	struct pim_error err = { 0 };

	ck_assert_int_eq(placement_params_validate(&p, &err), 0);
	/* θ = 0.12 · 16.754 GB/s = 2.01048 GB/s (doc/design.md §3) */
	ck_rel(placement_theta(&p), 2.01048e9);
	ck_rel(placement_b_rd(&p), 16.754e9);
	ck_rel(placement_b_wb(&p), 16.754e9);
	ck_rel(p.sigma, 0.4);
	ck_rel(p.line_bytes, 64);
	ck_rel(p.i_min, 1);
	ck_rel(p.n_core, 128);
	ck_rel(p.f_pim, 350e6);
	p.theta = 3e9;
	ck_rel(placement_theta(&p), 3e9);
}
END_TEST

static void expect_bad(struct placement_params p, const char *needle)
{
	struct pim_error err = { 0 };

	ck_assert_int_eq(placement_params_validate(&p, &err), -EINVAL);
	ck_assert_int_eq(err.code, -EINVAL);
	ck_has(err.msg, needle);
}

START_TEST(test_params_invalid)
{
	struct placement_params p = tparams();

	p.n_core = 0;
	expect_bad(p, "invalid placement parameter n_core=0");
	p = tparams(), p.f_pim = -1;
	expect_bad(p, "f_pim=-1");
	p = tparams(), p.sigma = 1.5;
	expect_bad(p, "sigma=1.5: store-bound fraction threshold must lie in [0, 1]");
	p = tparams(), p.theta = NAN;
	expect_bad(p, "theta=nan");
	p = tparams(), p.theta = 0, p.theta_ratio = 0;
	expect_bad(p, "theta_ratio=0");
	p = tparams(), p.t_ctx = -1e-6;
	expect_bad(p, "t_ctx=-1e-06");
	p = tparams(), p.b_pim_core = 0;
	expect_bad(p, "b_pim_core=0");
	p = tparams(), p.line_bytes = 0;
	expect_bad(p, "line_bytes=0");
	p = tparams(), p.b_cpu = INFINITY;
	expect_bad(p, "b_cpu=inf");
	p = tparams(), p.i_min = 0;
	expect_bad(p, "i_min=0");

	/* the same through placement_run, plus core counts and regions */
	struct placement_region r = reg(7, "bad", 0, 0, 10, 1e-3);
	struct placement_result res;
	struct pim_error err = { 0 };
	p = tparams();
	p.sigma = -0.1;
	ck_assert_int_eq(placement_run(&r, 1, &p, NULL, &res, &err), -EINVAL);
	ck_has(err.msg, "sigma=-0.1");
	ck_assert_int_eq(res.n_estimates, 0);

	p = tparams();
	ck_assert_int_eq(placement_run(&r, 1, &p, NULL, &res, &err), -EINVAL);
	ck_has(err.msg, "regions[0] (id 7, bad): n_par must be >= 1 (got 0)");

	r.n_par = 20;
	ck_assert_int_eq(placement_run(&r, 1, &p, NULL, &res, &err), -EINVAL);
	ck_has(err.msg, "n_total must be >= n_par (got 10)");

	r.n_par = 10, r.trip = 0;
	ck_assert_int_eq(placement_run(&r, 1, &p, NULL, &res, &err), -EINVAL);
	ck_has(err.msg, "trip must be >= 1");

	r.trip = 1, r.t_host = NAN;
	ck_assert_int_eq(placement_run(&r, 1, &p, NULL, &res, &err), -EINVAL);
	ck_has(err.msg, "t_host must be a finite number >= 0 s");

	r.t_host = 1e-3;
	double cores[] = { 32, 0 };
	struct placement_query q = { .core_counts = cores, .n_core_counts = 2 };
	ck_assert_int_eq(placement_run(&r, 1, &p, &q, &res, &err), -EINVAL);
	ck_has(err.msg, "core count #2 is 0: must be a finite number >= 1");
}
END_TEST

START_TEST(test_names)
{
	ck_assert_int_eq(placement_granularity_from_name("loop"), PL_GRAN_LOOP);
	ck_assert_int_eq(placement_granularity_from_name("operator"), PL_GRAN_OPERATOR);
	ck_assert_int_eq(placement_granularity_from_name("block"), PL_GRAN_BLOCK);
	ck_assert_int_eq(placement_granularity_from_name("nest"), -EINVAL);
	ck_assert_int_eq(placement_granularity_from_name(NULL), -EINVAL);
	ck_assert_int_eq(placement_movement_model_from_name("upper"), PL_MOVE_UPPER);
	ck_assert_int_eq(placement_movement_model_from_name("resident"), PL_MOVE_RESIDENT);
	ck_assert_int_eq(placement_movement_model_from_name("Upper"), -EINVAL);
	ck_assert_str_eq(placement_granularity_name(PL_GRAN_OPERATOR), "operator");
	ck_assert_str_eq(placement_movement_model_name(PL_MOVE_RESIDENT), "resident");
}
END_TEST

/* ------------------------------------------------------------------ C1..C4 on both sides */

START_TEST(test_c1)
{
	struct placement_params p = tparams();
	struct placement_decision d;
	/*
	 * N_total = 25.6e6: N_total·I_min/(N_core·f_pim) = 25.6e6/25.6e9 = 1 ms; rhs = 1.01 ms.
	 * T_host 1.02 ms > 1.01 ms holds; 1.00 ms does not (nor does equality: C1 is strict).
	 */
	struct placement_region r = reg(1, "c1", 0, 25600000, 25600000, 1.02e-3);

	set_nrd(&r, 1e9); /* Stage 2 would pass */
	placement_decide_region(&r, &p, &d);
	ck_assert_int_eq(d.cond[PL_C1].state, PL_COND_TRUE);
	ck_rel(d.cond[PL_C1].lhs, 1.02e-3);
	ck_rel(d.cond[PL_C1].rhs, 1.01e-3);
	ck_assert_int_eq(d.side, PL_PIM);

	r.t_host = 1.00e-3;
	placement_decide_region(&r, &p, &d);
	ck_assert_int_eq(d.cond[PL_C1].state, PL_COND_FALSE);
	ck_assert_int_eq(d.cond[PL_C2].state, PL_COND_TRUE);
	ck_assert_int_eq(d.cond[PL_C3].state, PL_COND_SKIPPED);
	ck_assert_int_eq(d.cond[PL_C4].state, PL_COND_SKIPPED);
	ck_assert_int_eq(d.side, PL_HOST);
	ck_assert_str_eq(reason(&d),
			 "C1: T_host 1.00 ms <= T_ctx + N_total·I_min/(N_core·f_pim) 1.01 ms; Stage 2 not evaluated");

	r.t_host = d.cond[PL_C1].rhs;
	placement_decide_region(&r, &p, &d);
	ck_assert_int_eq(d.cond[PL_C1].state, PL_COND_FALSE);
}
END_TEST

START_TEST(test_c2)
{
	struct placement_params p = tparams();
	struct placement_decision d;
	/* C2: N_par >= N_core = 64.  T_host 1 s passes C1 easily. */
	struct placement_region r = reg(2, "c2", 0, 64, 1 << 20, 1.0);

	set_nrd(&r, 1e9);
	placement_decide_region(&r, &p, &d);
	ck_assert_int_eq(d.cond[PL_C2].state, PL_COND_TRUE);
	ck_rel(d.cond[PL_C2].lhs, 64);
	ck_rel(d.cond[PL_C2].rhs, 64);
	ck_assert_int_eq(d.side, PL_PIM);

	r.n_par = 63;
	placement_decide_region(&r, &p, &d);
	ck_assert_int_eq(d.cond[PL_C1].state, PL_COND_TRUE);
	ck_assert_int_eq(d.cond[PL_C2].state, PL_COND_FALSE);
	ck_assert_int_eq(d.cond[PL_C3].state, PL_COND_SKIPPED);
	ck_assert_int_eq(d.side, PL_HOST);
	ck_assert_str_eq(reason(&d), "C2: N_par 63 < N_core 64; Stage 2 not evaluated");
}
END_TEST

START_TEST(test_c3)
{
	struct placement_params p = tparams();
	struct placement_decision d;
	/*
	 * T_host 1 ms; C3 holds when n_rd·64/1e-3 >= 2e9, i.e. n_rd >= 31250.
	 * 31251 → 2.000064 GB/s holds; 31000 → 1.984 GB/s does not.  No store counts: C4 not evaluable.
	 * C1: rhs = 10 µs + 6400/25.6e9 = 10.25 µs < 1 ms.
	 */
	struct placement_region r = reg(3, "c3", 0, 6400, 6400, 1e-3);

	set_nrd(&r, 31251);
	placement_decide_region(&r, &p, &d);
	ck_assert_int_eq(d.cond[PL_C3].state, PL_COND_TRUE);
	ck_rel(d.cond[PL_C3].lhs, 2.000064e9);
	ck_rel(d.cond[PL_C3].rhs, 2e9);
	ck_assert_int_eq(d.cond[PL_C4].state, PL_COND_NO_DATA);
	ck_assert_int_eq(d.side, PL_PIM);
	ck_assert(!d.bw_estimated);
	ck_assert_str_eq(reason(&d), "C3: BW_read 2.00 GB/s >= θ 2.00 GB/s");

	set_nrd(&r, 31000);
	placement_decide_region(&r, &p, &d);
	ck_assert_int_eq(d.cond[PL_C3].state, PL_COND_FALSE);
	ck_rel(d.cond[PL_C3].lhs, 1.984e9);
	ck_assert_int_eq(d.side, PL_HOST);
	ck_assert_str_eq(reason(&d),
			 "Stage 2 failed: C3: BW_read 1.98 GB/s < θ 2.00 GB/s; C4 not evaluable (no store counts)");

	/* neither n_rd nor an estimate, counters evidence: C3 not evaluable */
	r.have_n_rd = false;
	placement_decide_region(&r, &p, &d);
	ck_assert_int_eq(d.cond[PL_C3].state, PL_COND_NO_DATA);
	ck_assert(isnan(d.cond[PL_C3].lhs));
	ck_assert_int_eq(d.side, PL_HOST);

	/* the caller's estimate (timing backend): 2.5 GB/s holds, marked estimated */
	r.have_bw_read_estimate = true;
	r.bw_read_estimate = 2.5e9;
	placement_decide_region(&r, &p, &d);
	ck_assert_int_eq(d.cond[PL_C3].state, PL_COND_TRUE);
	ck_assert(d.bw_estimated);
	ck_assert_int_eq(d.evidence, PL_EVIDENCE_ESTIMATE);
	ck_assert_str_eq(reason(&d), "C3: BW_read 2.50 GB/s >= θ 2.00 GB/s (estimated)");
}
END_TEST

START_TEST(test_c4)
{
	struct placement_params p = tparams();
	struct placement_decision d;
	/* f_store = 40/(20+20+20+40) = 0.4 >= σ 0.4 holds; 39/(20+20+21+39) = 0.39 does not. */
	struct placement_region r = reg(4, "c4", 0, 6400, 6400, 1e-3);

	set_store(&r, 40, 20, 20, 20);
	placement_decide_region(&r, &p, &d);
	ck_assert_int_eq(d.cond[PL_C3].state, PL_COND_NO_DATA);
	ck_assert_int_eq(d.cond[PL_C4].state, PL_COND_TRUE);
	ck_rel(d.cond[PL_C4].lhs, 0.4);
	ck_rel(d.cond[PL_C4].rhs, 0.4);
	ck_assert_int_eq(d.side, PL_PIM);
	ck_assert_str_eq(reason(&d), "C4: f_store 0.40 >= σ 0.40; C3 not evaluable (no read counts)");

	set_store(&r, 39, 20, 20, 21);
	placement_decide_region(&r, &p, &d);
	ck_assert_int_eq(d.cond[PL_C4].state, PL_COND_FALSE);
	ck_rel(d.cond[PL_C4].lhs, 0.39);
	ck_assert_int_eq(d.side, PL_HOST);

	/* all-zero cycle counts give no fraction: not evaluable rather than 0/0 */
	set_store(&r, 0, 0, 0, 0);
	placement_decide_region(&r, &p, &d);
	ck_assert_int_eq(d.cond[PL_C4].state, PL_COND_NO_DATA);
}
END_TEST

START_TEST(test_timing_backend_estimate)
{
	struct placement_params p = tparams();
	struct placement_decision d;
	/*
	 * Timing backend (doc/design.md §4.4): no n_rd, BW = unique read bytes / T_host.  Operands: A read
	 * twice (1000 B and a 800 B view: the allocation counts once, at its largest operand),
	 * B in+out 500 B, C out only 700 B → unique read bytes = 1000 + 500 = 1500.
	 * T_host = 1 µs → 1.5 GB/s < θ; with T_host 0.5 µs → 3 GB/s >= θ.  C1 must hold: N_total 64
	 * → rhs = 10 µs + 64/25.6e9 = 10.0025 µs, so use T_ctx = 0 here: rhs = 2.5 ns.
	 */
	const struct placement_operand ops[] = {
		{ .alloc_id = 1, .bytes = 1000, .role = PL_IN },
		{ .alloc_id = 1, .bytes = 800, .role = PL_IN },
		{ .alloc_id = 2, .bytes = 500, .role = PL_INOUT },
		{ .alloc_id = 3, .bytes = 700, .role = PL_OUT },
	};
	struct placement_region r = reg(5, "est", 0, 64, 64, 1e-6);

	p.t_ctx = 0;
	r.operands = ops;
	r.n_operands = ELEMENTSOF(ops);
	r.evidence = PL_EVIDENCE_ESTIMATE;
	ck_assert_uint_eq(placement_unique_read_bytes(&r), 1500);
	placement_decide_region(&r, &p, &d);
	ck_assert_int_eq(d.cond[PL_C3].state, PL_COND_FALSE);
	ck_rel(d.cond[PL_C3].lhs, 1.5e9);
	ck_assert(d.bw_estimated);
	ck_assert_int_eq(d.cond[PL_C4].state, PL_COND_NO_DATA);

	r.t_host = 0.5e-6;
	placement_decide_region(&r, &p, &d);
	ck_assert_int_eq(d.side, PL_PIM);
	ck_has(reason(&d), "C3: BW_read 3.00 GB/s >= θ 2.00 GB/s (estimated)");
}
END_TEST

/* ------------------------------------------------------------------ the paper's scenarios */

START_TEST(test_matmul_rejected_stage2)
{
	struct placement_params p = tparams();
	struct placement_result res;
	/*
	 * Square matmul, N = 2048: N_par = 2048² = 4,194,304, N_total = 2048³ = 8,589,934,592.
	 * C1: 10 µs + 8,589,934,592/25.6e9 = 0.33555432 s < T_host 0.5 s.  C2: 4,194,304 >= 64.
	 * Reuse keeps tiles in cache: n_rd = 6.25e6 → BW = 6.25e6·64/0.5 = 0.8 GB/s < 2 GB/s.
	 * f_store = 5/100 = 0.05 < 0.4.  Rejected at Stage 2.
	 */
	struct placement_region r = reg(10, "matmul", 0, 4194304, UINT64_C(8589934592), 0.5);

	set_nrd(&r, 6.25e6);
	set_store(&r, 5, 30, 30, 35);
	run(&r, 1, &p, PL_GRAN_LOOP, PL_MOVE_UPPER, NULL, 0, &res);
	const struct placement_decision *d = &edecs(&res, &res.estimates[0])[0];
	ck_assert_int_eq(d->cond[PL_C1].state, PL_COND_TRUE);
	ck_rel(d->cond[PL_C1].rhs, 0.33555432);
	ck_assert_int_eq(d->cond[PL_C2].state, PL_COND_TRUE);
	ck_assert_int_eq(d->cond[PL_C3].state, PL_COND_FALSE);
	ck_rel(d->cond[PL_C3].lhs, 0.8e9);
	ck_assert_int_eq(d->cond[PL_C4].state, PL_COND_FALSE);
	ck_assert_int_eq(d->side, PL_HOST);
	ck_assert_uint_eq(res.estimates[0].n_rejected_stage1, 0);
	ck_assert_uint_eq(res.estimates[0].n_rejected_stage2, 1);
	ck_rel(res.estimates[0].speedup, 1.0);
	ck_assert_str_eq(reason(d), "Stage 2 failed: C3: BW_read 0.80 GB/s < θ 2.00 GB/s; C4: f_store 0.05 < σ 0.40");
	placement_result_free(&res);
}
END_TEST

START_TEST(test_gemv_passes_c3)
{
	struct placement_params p = tparams();
	struct placement_result res;
	/*
	 * gemv 4096×4096 fp32: N_par 4096, N_total 16,777,216, T_host 6.7 ms.
	 * C1: 10 µs + 16,777,216/25.6e9 = 0.66536 ms < 6.7 ms.  C2: 4096 >= 64.
	 * The matrix streams once: n_rd = (67,108,864 + 16,384)/64 = 1,048,832 →
	 * BW = 1,048,832·64/6.7e-3 = 10.0187 GB/s >= 2 GB/s: C3.  f_store 0.05: C4 false.
	 */
	struct placement_region r = reg(11, "gemv", 0, 4096, 16777216, 6.7e-3);

	set_nrd(&r, 1048832);
	set_store(&r, 5, 30, 30, 35);
	run(&r, 1, &p, PL_GRAN_LOOP, PL_MOVE_UPPER, NULL, 0, &res);
	const struct placement_decision *d = &edecs(&res, &res.estimates[0])[0];
	ck_rel(d->cond[PL_C1].rhs, 0.66536e-3);
	ck_assert_int_eq(d->cond[PL_C3].state, PL_COND_TRUE);
	ck_rel(d->cond[PL_C3].lhs, 1048832.0 * 64 / 6.7e-3);
	ck_assert_int_eq(d->cond[PL_C4].state, PL_COND_FALSE);
	ck_assert_int_eq(d->side, PL_PIM);
	ck_assert_str_eq(reason(d), "C3: BW_read 10.02 GB/s >= θ 2.00 GB/s");
	placement_result_free(&res);
}
END_TEST

START_TEST(test_fill_passes_c4_alone)
{
	struct placement_params p = tparams();
	struct placement_result res;
	/*
	 * mac's fill nest: 4096×4096 non-temporal stores, T_host 2 ms, N_par = N_total = 16,777,216.
	 * C1: 0.66536 ms < 2 ms.  Stores bypass the cache: n_rd = 100 → BW = 6400/2e-3 = 3.2 MB/s < θ.
	 * f_store = 600/(100+200+100+600) = 0.6 >= 0.4: enters through C4 alone.
	 */
	struct placement_region r = reg(12, "fill", 0, 16777216, 16777216, 2e-3);

	set_nrd(&r, 100);
	set_store(&r, 600, 100, 200, 100);
	run(&r, 1, &p, PL_GRAN_LOOP, PL_MOVE_UPPER, NULL, 0, &res);
	const struct placement_decision *d = &edecs(&res, &res.estimates[0])[0];
	ck_assert_int_eq(d->cond[PL_C3].state, PL_COND_FALSE);
	ck_rel(d->cond[PL_C3].lhs, 3.2e6);
	ck_assert_int_eq(d->cond[PL_C4].state, PL_COND_TRUE);
	ck_rel(d->cond[PL_C4].lhs, 0.6);
	ck_assert_int_eq(d->side, PL_PIM);
	ck_assert_str_eq(reason(d), "C4: f_store 0.60 >= σ 0.40; C3: BW_read 0.00 GB/s < θ 2.00 GB/s");
	placement_result_free(&res);
}
END_TEST

START_TEST(test_transcendental_stage1_only)
{
	struct placement_params p = tparams();
	struct placement_result res;
	/*
	 * exp over 4,194,304 fp32 (16 MiB): N_par = N_total = 4,194,304, T_host 20 ms.
	 * C1: 10 µs + 4,194,304/25.6e9 = 0.17384 ms < 20 ms; C2 holds: Stage 1 passes.
	 * n_rd = 262,144 → BW = 16,777,216/0.02 = 0.8388608 GB/s < θ; f_store 0.02 < σ: host.
	 */
	struct placement_region r = reg(13, "exp", 0, 4194304, 4194304, 20e-3);

	set_nrd(&r, 262144);
	set_store(&r, 2, 48, 25, 25);
	run(&r, 1, &p, PL_GRAN_LOOP, PL_MOVE_UPPER, NULL, 0, &res);
	const struct placement_decision *d = &edecs(&res, &res.estimates[0])[0];
	ck_assert_int_eq(d->cond[PL_C1].state, PL_COND_TRUE);
	ck_rel(d->cond[PL_C1].rhs, 0.17384e-3);
	ck_assert_int_eq(d->cond[PL_C2].state, PL_COND_TRUE);
	ck_assert_int_eq(d->cond[PL_C3].state, PL_COND_FALSE);
	ck_rel(d->cond[PL_C3].lhs, 0.8388608e9);
	ck_assert_int_eq(d->cond[PL_C4].state, PL_COND_FALSE);
	ck_rel(d->cond[PL_C4].lhs, 0.02);
	ck_assert_int_eq(d->side, PL_HOST);
	ck_assert_uint_eq(res.estimates[0].n_rejected_stage2, 1);
	placement_result_free(&res);
}
END_TEST

START_TEST(test_softmax_one_nest)
{
	struct placement_params p = tparams();
	struct placement_result res;
	/*
	 * softmax over x[16 × 131,072] fp32 (2,097,152 elements, 8,388,608 B) as 8 nests; 16 rows
	 * give the reductions N_par = 16 < 64 (C2 fails).  Allocations: x 0, max 1 (64 B), t 2,
	 * e 3, sum 4 (64 B), y 5, 8,388,608 B each unless said.
	 *   0 fill max      N 16/16          0.001 ms  C1: 1 µs <= 10.000625 µs
	 *   1 max           N 16/2,097,152  10 ms      C2: 16 < 64
	 *   2 sub t=x-max   N 2,097,152      3 ms      n_rd 131,073 → 8,388,672/3e-3 = 2.796 GB/s: PIM
	 *   3 exp           N 2,097,152     40 ms      n_rd 131,072 → 0.2097 GB/s, f_store 0.05: host
	 *   4 fill sum      N 16/16          0.001 ms  C1 fails
	 *   5 sum           N 16/2,097,152  10 ms      C2 fails
	 *   6 div           N 2,097,152     35 ms      n_rd 131,073 → 0.2397 GB/s: host
	 *   7 copy out      N 16/16·2^17      1.998 ms C2 fails
	 * Σ T_host = 100 ms; the offloaded nest holds 3 ms: captured 0.03, residual 0.97, bound 1/0.97.
	 * Movement (upper): one segment, 2·10 µs; fetch x + max = 8,388,672 B, flush t 8,388,608 B;
	 *   T_move = 20e-6 + 8,388,672/1e10 + 8,388,608/1e10 = 1.697728 ms.
	 * T_pim = max(2,097,152/25.6e9 = 0.08192 ms, 16,777,280/(64·0.25e9) = 1.04858 ms) = 1.04858 ms.
	 * T_hybrid = 97 + 1.04858 + 1.697728 = 99.746308 ms; speedup = 100/99.746308 = 1.0025434.
	 */
	const struct placement_operand o0[] = { { 1, 64, PL_OUT } };
	const struct placement_operand o1[] = { { 0, 8388608, PL_IN }, { 1, 64, PL_INOUT } };
	const struct placement_operand o2[] = { { 0, 8388608, PL_IN }, { 1, 64, PL_IN }, { 2, 8388608, PL_OUT } };
	const struct placement_operand o3[] = { { 2, 8388608, PL_IN }, { 3, 8388608, PL_OUT } };
	const struct placement_operand o4[] = { { 4, 64, PL_OUT } };
	const struct placement_operand o5[] = { { 3, 8388608, PL_IN }, { 4, 64, PL_INOUT } };
	const struct placement_operand o6[] = { { 3, 8388608, PL_IN }, { 4, 64, PL_IN }, { 5, 8388608, PL_OUT } };
	const struct placement_operand o7[] = { { 5, 8388608, PL_IN }, { 6, 8388608, PL_OUT } };
	struct placement_region r[8] = {
		reg(0, "fill_max", 0, 16, 16, 1e-6),	 reg(1, "max", 1, 16, 2097152, 10e-3),
		reg(2, "sub", 2, 2097152, 2097152, 3e-3), reg(3, "exp", 3, 2097152, 2097152, 40e-3),
		reg(4, "fill_sum", 4, 16, 16, 1e-6),	 reg(5, "sum", 5, 16, 2097152, 10e-3),
		reg(6, "div", 6, 2097152, 2097152, 35e-3), reg(7, "copy", 7, 16, 2097152, 1.998e-3),
	};
	const struct placement_operand *ops[] = { o0, o1, o2, o3, o4, o5, o6, o7 };
	const size_t nops[] = { 1, 2, 3, 2, 1, 2, 3, 2 };

	for (size_t i = 0; i < 8; i++) {
		r[i].operands = ops[i];
		r[i].n_operands = nops[i];
		r[i].op = "softmax";
		set_nrd(&r[i], 131073);
		set_store(&r[i], 5, 30, 30, 35);
	}
	set_nrd(&r[3], 131072);
	run(r, 8, &p, PL_GRAN_LOOP, PL_MOVE_UPPER, NULL, 0, &res);
	const struct placement_estimate *e = &res.estimates[0];
	for (size_t i = 0; i < 8; i++)
		ck_assert_msg(edecs(&res, e)[i].side == (i == 2 ? PL_PIM : PL_HOST), "nest %zu: %s", i,
			      reason(&edecs(&res, e)[i]));
	ck_assert_uint_eq(e->n_offloaded, 1);
	ck_assert_uint_eq(e->n_rejected_stage1, 5);
	ck_assert_uint_eq(e->n_rejected_stage2, 2);
	ck_rel(edecs(&res, e)[2].cond[PL_C3].lhs, 131073.0 * 64 / 3e-3);
	ck_rel(e->t_cpu, 100e-3);
	ck_rel(e->captured_share, 0.03);
	ck_rel(e->residual_share, 0.97);
	ck_rel(e->bound, 1 / 0.97);
	ck_assert_uint_eq(e->move.transitions, 2);
	ck_assert_uint_eq(e->move.fetch_bytes, 8388672);
	ck_assert_uint_eq(e->move.flush_bytes, 8388608);
	ck_rel(e->move.t_move, 1.697728e-3);
	ck_rel(e->t_pim, 1.04858e-3);
	ck_rel(e->t_hybrid, 99.746308e-3);
	ck_rel(e->speedup, 100 / 99.746308);
	placement_result_free(&res);
}
END_TEST

START_TEST(test_rmsnorm_cores)
{
	struct placement_params p = tparams();
	struct placement_result res;
	double cores[] = { 32, 128 };
	/*
	 * rmsnorm over x[16 × 1,048,576] fp32.  Allocations: x 0 (67,108,864 B), ss 1 (64 B),
	 * w 2 (4,194,304 B), y 3 (67,108,864 B).
	 *   r0 sum of squares: ins x, outs ss; N_par 16 (< 32 and < 128: C2 fails), 15 ms, host.
	 *   r1 scale: ins x, ss, w; outs y; N_par = N_total = 16,777,216; 25 ms;
	 *      n_rd = 71,303,232/64 = 1,114,113 → BW 2.852 GB/s >= θ; C1 at 32 cores:
	 *      10 µs + 16,777,216/12.8e9 = 1.32072 ms < 25 ms.  Offloaded at 32 and 128.
	 * Movement (upper, independent of the core count): 2 transitions, fetch x+ss+w = 71,303,232 B,
	 *   flush y = 67,108,864 B; T_move = 20 µs + 7.1303232 ms + 6.7108864 ms = 13.8612096 ms.
	 * T_pim(r1) = max(compute, bytes/B_pim), bytes = 138,412,096:
	 *   32 cores:  max(1.31072 ms, 138,412,096/8e9  = 17.301512 ms) = 17.301512 ms
	 *   128 cores: max(0.32768 ms, 138,412,096/32e9 =  4.325378 ms) =  4.325378 ms
	 * All-CPU 40 ms.  T_hybrid(32) = 15 + 17.301512 + 13.8612096 = 46.1627216 ms → 0.86650×:
	 *   the PIM gain 25 − 17.30 = 7.70 ms is less than the 13.86 ms of movement.
	 * T_hybrid(128) = 15 + 4.325378 + 13.8612096 = 33.1865876 ms → 1.20530×: gain 20.67 ms > 13.86 ms.
	 * captured 25/40 = 0.625 at both; bound 1/0.375.
	 */
	const struct placement_operand o0[] = { { 0, 67108864, PL_IN }, { 1, 64, PL_OUT } };
	const struct placement_operand o1[] = {
		{ 0, 67108864, PL_IN }, { 1, 64, PL_IN }, { 2, 4194304, PL_IN }, { 3, 67108864, PL_OUT } };
	struct placement_region r[2] = {
		reg(0, "sumsq", 0, 16, 16777216, 15e-3),
		reg(1, "scale", 1, 16777216, 16777216, 25e-3),
	};
	r[0].operands = o0, r[0].n_operands = 2;
	r[1].operands = o1, r[1].n_operands = 4;
	set_nrd(&r[0], 1048576);
	set_nrd(&r[1], 1114113);

	run(r, 2, &p, PL_GRAN_LOOP, PL_MOVE_UPPER, cores, 2, &res);
	ck_assert_uint_eq(res.n_estimates, 2);
	const struct placement_estimate *e32 = &res.estimates[0], *e128 = &res.estimates[1];
	ck_rel(e32->n_core, 32);
	ck_rel(e128->n_core, 128);
	for (int k = 0; k < 2; k++) {
		const struct placement_estimate *e = &res.estimates[k];
		ck_assert_int_eq(edecs(&res, e)[0].side, PL_HOST);
		ck_assert_int_eq(edecs(&res, e)[0].cond[PL_C2].state, PL_COND_FALSE);
		ck_assert_int_eq(edecs(&res, e)[1].side, PL_PIM);
		ck_assert_int_eq(e->move.model, PL_MOVE_UPPER);
		ck_assert_uint_eq(e->move.fetch_bytes, 71303232);
		ck_assert_uint_eq(e->move.flush_bytes, 67108864);
		ck_rel(e->move.t_move, 13.8612096e-3);
		ck_rel(e->captured_share, 0.625);
		ck_rel(e->bound, 1 / 0.375);
		/* T_pim set by the bandwidth term at both counts (17.30 / 4.33 ms against 1.31 / 0.33 ms) */
		ck_assert_int_eq(edecs(&res, e)[1].t_pim_term, PL_TPIM_BANDWIDTH);
		ck_rel(e->t_pim_by[PL_TPIM_BANDWIDTH], e->t_pim);
		ck_assert_uint_eq(e->n_pim_by[PL_TPIM_BANDWIDTH], 1);
		ck_assert_uint_eq(e->n_pim_by[PL_TPIM_COMPUTE], 0);
		/* movement-aware bound: 40 / (15 + 13.8612096) = 1.38594×, far below 1/0.375 = 2.667× */
		ck_rel(e->bound_movement, 40 / 28.8612096);
	}
	ck_rel(edecs(&res, e32)[1].cond[PL_C1].rhs, 1.32072e-3);
	ck_rel(e32->t_pim, 17.301512e-3);
	ck_rel(e32->t_hybrid, 46.1627216e-3);
	ck_rel(e32->speedup, 40 / 46.1627216);
	ck_assert(e32->speedup < 1);
	ck_rel(e128->t_pim, 4.325378e-3);
	ck_rel(e128->t_hybrid, 33.1865876e-3);
	ck_rel(e128->speedup, 40 / 33.1865876);
	ck_assert(e128->speedup > 1);
	placement_result_free(&res);
}
END_TEST

/* ------------------------------------------------------------------ movement dedup */

/* A region that goes to PIM under tparams(): huge T_host, N_par, BW. */
static struct placement_region pim_region(uint32_t id, uint32_t order)
{
	struct placement_region r = reg(id, NULL, order, 1 << 20, 1 << 20, 1.0);

	set_nrd(&r, 1e9);
	return r;
}

/* A region that stays on the host: N_par 1 fails C2. */
static struct placement_region host_region(uint32_t id, uint32_t order)
{
	return reg(id, NULL, order, 1, 1, 1.0);
}

enum { A_ = 1, B_ = 2, C_ = 3 };
static const struct placement_operand ex0[] = { { A_, 100, PL_IN }, { B_, 200, PL_OUT } };
static const struct placement_operand ex1[] = { { B_, 200, PL_IN }, { B_, 200, PL_OUT } };
static const struct placement_operand ex2[] = { { B_, 200, PL_IN }, { C_, 50, PL_INOUT } };
static const struct placement_operand ex4[] = { { B_, 200, PL_IN }, { A_, 100, PL_OUT } };

/*
 * The worked example of placement.c (A=100 B, B=200 B, C=50 B), given in scrambled array order
 * to check that program order, not array order, forms the segments:
 *   r0 ins(A) outs(B)  PIM   r1 ins(B) outs(B) PIM (in place)   r2 ins(B) inout(C) PIM
 *   r3 host            r4 ins(B) outs(A) PIM
 */
static void example(struct placement_region r[5])
{
	r[0] = pim_region(4, 4), r[0].operands = ex4, r[0].n_operands = 2;
	r[1] = pim_region(0, 0), r[1].operands = ex0, r[1].n_operands = 2;
	r[2] = host_region(3, 3);
	r[3] = pim_region(1, 1), r[3].operands = ex1, r[3].n_operands = 2;
	r[4] = pim_region(2, 2), r[4].operands = ex2, r[4].n_operands = 2;
}

START_TEST(test_move_upper_dedup)
{
	struct placement_params p = tparams();
	struct placement_region r[5];
	struct placement_result res;

	example(r);
	run(r, 5, &p, PL_GRAN_LOOP, PL_MOVE_UPPER, NULL, 0, &res);
	const struct placement_estimate *e = &res.estimates[0];
	const struct placement_decision *d = edecs(&res, e);
	/*
	 * Segment 1 = ids 0,1,2: id0 fetch A 100, flush B 200; id1 B in place → counted once, as a
	 * flush 200, its read of B produced in the segment not fetched; id2 B produced in the segment
	 * → no fetch, C in place → flush 50.  Segment 2 = id4: B fetched again 200, flush A 100.
	 * fetch 300, flush 550, 2 segments, 4 transitions.
	 */
	ck_assert_int_eq(e->move.model, PL_MOVE_UPPER);
	ck_assert_uint_eq(e->move.segments, 2);
	ck_assert_uint_eq(e->move.transitions, 4);
	ck_assert_uint_eq(e->move.fetch_bytes, 300);
	ck_assert_uint_eq(e->move.flush_bytes, 550);
	ck_assert_uint_eq(d[1].fetch_bytes, 100);
	ck_assert_uint_eq(d[1].flush_bytes, 200);
	ck_assert_uint_eq(d[3].fetch_bytes, 0);
	ck_assert_uint_eq(d[3].flush_bytes, 200);
	ck_assert_uint_eq(d[4].fetch_bytes, 0);
	ck_assert_uint_eq(d[4].flush_bytes, 50);
	ck_assert_uint_eq(d[0].fetch_bytes, 200);
	ck_assert_uint_eq(d[0].flush_bytes, 100);
	ck_assert_uint_eq(d[2].fetch_bytes + d[2].flush_bytes, 0);
	/* T_move = 4·10 µs + 300/1e10 + 550/1e10 */
	ck_rel(e->move.t_move, 40e-6 + 300 / 10e9 + 550 / 10e9);
	placement_result_free(&res);

	/* trip multiplies the bytes: every region in a loop of 3 → fetch 900, flush 1650 */
	for (int i = 0; i < 5; i++)
		r[i].trip = 3;
	run(r, 5, &p, PL_GRAN_LOOP, PL_MOVE_UPPER, NULL, 0, &res);
	ck_assert_uint_eq(res.estimates[0].move.fetch_bytes, 900);
	ck_assert_uint_eq(res.estimates[0].move.flush_bytes, 1650);
	ck_assert_uint_eq(res.estimates[0].move.transitions, 4); /* per segment, not per trip (doc/design.md §3) */
	placement_result_free(&res);

	/* the host region gone: one segment, B no longer fetched again: fetch 100, flush 550 */
	r[2] = pim_region(3, 3);
	for (int i = 0; i < 5; i++)
		r[i].trip = 1;
	run(r, 5, &p, PL_GRAN_LOOP, PL_MOVE_UPPER, NULL, 0, &res);
	ck_assert_uint_eq(res.estimates[0].move.segments, 1);
	ck_assert_uint_eq(res.estimates[0].move.fetch_bytes, 100);
	ck_assert_uint_eq(res.estimates[0].move.flush_bytes, 550);
	placement_result_free(&res);
}
END_TEST

START_TEST(test_move_resident_dedup)
{
	struct placement_params p = tparams();
	struct placement_region r[5];
	struct placement_result res;

	example(r);
	run(r, 5, &p, PL_GRAN_LOOP, PL_MOVE_RESIDENT, NULL, 0, &res);
	const struct placement_estimate *e = &res.estimates[0];
	const struct placement_decision *d = edecs(&res, e);
	/*
	 * id0 fetches A 100 (host copy).  B stays on PIM: produced and consumed on PIM, never moved,
	 * across the host region too.  C in place: no fetch; not read after id2 wrote it → a model
	 * output, flushed once 50 (charged to id2).  A rewritten by id4, not read after → flush 100.
	 * fetch 100, flush 150; transitions as in upper (4).
	 */
	ck_assert_int_eq(e->move.model, PL_MOVE_RESIDENT);
	ck_assert_uint_eq(e->move.transitions, 4);
	ck_assert_uint_eq(e->move.fetch_bytes, 100);
	ck_assert_uint_eq(e->move.flush_bytes, 150);
	ck_assert_uint_eq(d[1].fetch_bytes, 100);
	ck_assert_uint_eq(d[4].flush_bytes, 50);
	ck_assert_uint_eq(d[0].flush_bytes, 100);
	ck_assert_uint_eq(d[0].fetch_bytes, 0);
	placement_result_free(&res);
}
END_TEST

START_TEST(test_move_loop_invariant)
{
	struct placement_params p = tparams();
	struct placement_result res;
	/*
	 * A loop of 10 (trip 10 everywhere).  W 1000 B (weights, written by no region), X 400 B,
	 * Y 300 B, Z 100 B.
	 *   h0 host: outs(X)          p1 PIM: ins(W, X) outs(Y)          h2 host: ins(Y) outs(Z)
	 * upper:    fetch 10·(1000 + 400) = 14000, flush 10·300 = 3000.
	 * resident: W read-only → fetched once: 1000; X rewritten by the host every iteration →
	 *           min(10, 10)·400 = 4000; Y read by the host after each PIM write → min(10, 10)·300
	 *           = 3000 (charged to p1).  fetch 5000, flush 3000.
	 */
	/* sparse allocation ids: the hash path of the allocation index (the other tests use dense ids) */
	const uint32_t W = 4000000010u, X = W + 1, Y = W + 2, Z = W + 3;
	const struct placement_operand oh0[] = { { X, 400, PL_OUT } };
	const struct placement_operand op1[] = { { W, 1000, PL_IN }, { X, 400, PL_IN }, { Y, 300, PL_OUT } };
	const struct placement_operand oh2[] = { { Y, 300, PL_IN }, { Z, 100, PL_OUT } };
	struct placement_region r[3] = { host_region(0, 0), pim_region(1, 1), host_region(2, 2) };

	r[0].operands = oh0, r[0].n_operands = 1;
	r[1].operands = op1, r[1].n_operands = 3;
	r[2].operands = oh2, r[2].n_operands = 2;
	for (int i = 0; i < 3; i++)
		r[i].trip = 10;

	run(r, 3, &p, PL_GRAN_LOOP, PL_MOVE_UPPER, NULL, 0, &res);
	ck_assert_uint_eq(res.estimates[0].move.fetch_bytes, 14000);
	ck_assert_uint_eq(res.estimates[0].move.flush_bytes, 3000);
	placement_result_free(&res);

	run(r, 3, &p, PL_GRAN_LOOP, PL_MOVE_RESIDENT, NULL, 0, &res);
	ck_assert_uint_eq(res.estimates[0].move.fetch_bytes, 5000);
	ck_assert_uint_eq(res.estimates[0].move.flush_bytes, 3000);
	ck_assert_uint_eq(edecs(&res, &res.estimates[0])[1].flush_bytes, 3000);
	ck_assert_uint_eq(edecs(&res, &res.estimates[0])[2].flush_bytes, 0);
	placement_result_free(&res);

	/* the host consumer outside the loop (trip 1): Y comes back once, 300 */
	r[2].trip = 1;
	run(r, 3, &p, PL_GRAN_LOOP, PL_MOVE_RESIDENT, NULL, 0, &res);
	ck_assert_uint_eq(res.estimates[0].move.flush_bytes, 300);
	placement_result_free(&res);
}
END_TEST

/* ------------------------------------------------------------------ granularity */

START_TEST(test_operator_granularity)
{
	struct placement_params p = tparams();
	struct placement_result res;
	/*
	 * gelu as two small nests g0, g1 (op "gelu"), each N_par = N_total = 65,536, T_host 8 µs,
	 * n_rd 2048 (BW = 2048·64/8e-6 = 16.384 GB/s), and a norm operator of two nests:
	 * n0 N_par 16 (C2 fails alone), 10 ms; n1 N_par 1,048,576, 5 ms, BW high.
	 * loop: g0, g1: C1 rhs = 10 µs + 65,536/25.6e9 = 12.56 µs > 8 µs → host; n0 host (C2); n1 PIM.
	 * operator: gelu = T 16 µs, N_total 131,072 → rhs = 10 µs + 5.12 µs = 15.12 µs < 16 µs,
	 *   N_par min 65,536, BW = (2·2048·64)/16e-6 = 16.384 GB/s → both PIM;
	 *   norm: N_par = min(16, 1,048,576) = 16 < 64 → both host.
	 *   f_store of gelu from summed cycles: (10 + 30)/((10+30) + (90+70)) = 40/200 = 0.2.
	 */
	struct placement_region r[4] = {
		reg(0, "g0", 0, 65536, 65536, 8e-6),
		reg(1, "g1", 1, 65536, 65536, 8e-6),
		reg(2, "n0", 2, 16, 16777216, 10e-3),
		reg(3, "n1", 3, 1048576, 1048576, 5e-3),
	};
	r[0].op = r[1].op = "gelu";
	r[2].op = r[3].op = "norm";
	set_nrd(&r[0], 2048), set_nrd(&r[1], 2048);
	set_nrd(&r[2], 1e6), set_nrd(&r[3], 1e6);
	set_store(&r[0], 10, 30, 30, 30);
	set_store(&r[1], 30, 50, 10, 10);

	run(r, 4, &p, PL_GRAN_LOOP, PL_MOVE_UPPER, NULL, 0, &res);
	const struct placement_decision *d = edecs(&res, &res.estimates[0]);
	ck_assert_int_eq(d[0].side, PL_HOST);
	ck_rel(d[0].cond[PL_C1].rhs, 12.56e-6);
	ck_assert_int_eq(d[1].side, PL_HOST);
	ck_assert_int_eq(d[2].side, PL_HOST);
	ck_assert_int_eq(d[3].side, PL_PIM);
	placement_result_free(&res);

	run(r, 4, &p, PL_GRAN_OPERATOR, PL_MOVE_UPPER, NULL, 0, &res);
	d = edecs(&res, &res.estimates[0]);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(d[i].side, PL_PIM);
		ck_assert_uint_eq(d[i].unit, 0);
		ck_assert_uint_eq(d[i].unit_size, 2);
		ck_rel(d[i].cond[PL_C1].lhs, 16e-6);
		ck_rel(d[i].cond[PL_C1].rhs, 15.12e-6);
		ck_rel(d[i].cond[PL_C2].lhs, 65536);
		ck_rel(d[i].cond[PL_C3].lhs, 16.384e9);
		ck_rel(d[i].cond[PL_C4].lhs, 0.2);
	}
	ck_has(reason(&d[0]), "[operator group of 2 regions]");
	for (int i = 2; i < 4; i++) {
		ck_assert_int_eq(d[i].side, PL_HOST);
		ck_assert_uint_eq(d[i].unit, 2);
		ck_rel(d[i].cond[PL_C2].lhs, 16);
		ck_assert_int_eq(d[i].cond[PL_C2].state, PL_COND_FALSE);
		ck_rel(d[i].cond[PL_C1].lhs, 15e-3);
	}
	ck_assert_uint_eq(res.estimates[0].n_offloaded, 2);
	ck_assert_uint_eq(res.estimates[0].move.segments, 1);
	ck_assert_int_eq(res.granularity, PL_GRAN_OPERATOR);
	placement_result_free(&res);

	/* a member without counts makes the group's C3 not evaluable (C4 remains: 0.2 < 0.4) */
	r[1].have_n_rd = false;
	run(r, 4, &p, PL_GRAN_OPERATOR, PL_MOVE_UPPER, NULL, 0, &res);
	d = edecs(&res, &res.estimates[0]);
	ck_assert_int_eq(d[0].cond[PL_C3].state, PL_COND_NO_DATA);
	ck_assert_int_eq(d[0].side, PL_HOST);
	placement_result_free(&res);
}
END_TEST

START_TEST(test_block_granularity)
{
	struct placement_params p = tparams();
	struct placement_result res;
	/*
	 * b0: elementwise, N_par = N_total = 16,777,216, 25 ms: n_outer derived 1 (the scf.parallel is
	 *     the innermost loop): the block is the nest, PIM as at loop granularity.
	 * b1: gemv-like, N_par 4096, N_total 16,777,216, 6.7 ms, n_outer derived = N_par = 4096: per
	 *     block T_host = 6.7e-3/4096 = 1.6357 µs, N_total 4096, N_par 1 → C1 (rhs 10 µs +
	 *     4096/25.6e9 = 10.16 µs) and C2 fail: host.  At loop granularity: PIM.
	 * b2: same nest with n_outer = 64 given: per block 6.7e-3/64 = 104.6875 µs, N_total 262,144
	 *     (rhs 10 µs + 10.24 µs = 20.24 µs), N_par 4096/64 = 64 >= 64: PIM, 64 executions.
	 * Operands: b0 ins(A 1000) outs(B 2000); b1 ins(C 3000) outs(D 40); b2 ins(B, E 500) outs(F 60).
	 * loop (upper): b0 b1 b2 one segment: fetch A + C + E = 4500 (B produced in segment),
	 *   flush B + D + F = 2100; 2 transitions.
	 * block (upper): b0 fetch 1000 flush 2000; b2 every execution separate: B fetched again,
	 *   fetch 2000 + 500, flush 60 → fetch 3500, flush 2060; transitions 2·1 + 2·64 = 130.
	 */
	const struct placement_operand o0[] = { { 1, 1000, PL_IN }, { 2, 2000, PL_OUT } };
	const struct placement_operand o1[] = { { 3, 3000, PL_IN }, { 4, 40, PL_OUT } };
	const struct placement_operand o2[] = { { 2, 2000, PL_IN }, { 5, 500, PL_IN }, { 6, 60, PL_OUT } };
	struct placement_region r[3] = {
		reg(0, "b0", 0, 16777216, 16777216, 25e-3),
		reg(1, "b1", 1, 4096, 16777216, 6.7e-3),
		reg(2, "b2", 2, 4096, 16777216, 6.7e-3),
	};
	r[0].operands = o0, r[0].n_operands = 2;
	r[1].operands = o1, r[1].n_operands = 2;
	r[2].operands = o2, r[2].n_operands = 3;
	r[2].n_outer = 64;
	for (int i = 0; i < 3; i++)
		set_nrd(&r[i], 1048832);

	run(r, 3, &p, PL_GRAN_LOOP, PL_MOVE_UPPER, NULL, 0, &res);
	const struct placement_estimate *e = &res.estimates[0];
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(edecs(&res, e)[i].side, PL_PIM);
	ck_assert_uint_eq(e->move.transitions, 2);
	ck_assert_uint_eq(e->move.fetch_bytes, 4500);
	ck_assert_uint_eq(e->move.flush_bytes, 2100);
	placement_result_free(&res);

	run(r, 3, &p, PL_GRAN_BLOCK, PL_MOVE_UPPER, NULL, 0, &res);
	e = &res.estimates[0];
	ck_assert_int_eq(edecs(&res, e)[0].side, PL_PIM);
	ck_assert_uint_eq(edecs(&res, e)[0].n_outer, 1);
	ck_assert_uint_eq(edecs(&res, e)[0].executions, 1);
	ck_assert_int_eq(edecs(&res, e)[1].side, PL_HOST);
	ck_assert_uint_eq(edecs(&res, e)[1].n_outer, 4096);
	ck_rel(edecs(&res, e)[1].cond[PL_C1].lhs, 6.7e-3 / 4096);
	ck_rel(edecs(&res, e)[1].cond[PL_C1].rhs, 10.16e-6);
	ck_rel(edecs(&res, e)[1].cond[PL_C2].lhs, 1);
	ck_assert_int_eq(edecs(&res, e)[2].side, PL_PIM);
	ck_assert_uint_eq(edecs(&res, e)[2].executions, 64);
	ck_rel(edecs(&res, e)[2].cond[PL_C1].lhs, 104.6875e-6);
	ck_rel(edecs(&res, e)[2].cond[PL_C1].rhs, 20.24e-6);
	ck_rel(edecs(&res, e)[2].cond[PL_C2].lhs, 64);
	/* ratios are the nest's: BW_read unchanged by the split */
	ck_rel(edecs(&res, e)[2].cond[PL_C3].lhs, 1048832.0 * 64 / 6.7e-3);
	ck_has(reason(&edecs(&res, e)[2]), "[block: 1/64 of the nest per execution]");
	ck_assert_uint_eq(e->move.transitions, 130);
	ck_assert_uint_eq(e->move.segments, 65);
	ck_assert_uint_eq(e->move.fetch_bytes, 3500);
	ck_assert_uint_eq(e->move.flush_bytes, 2060);
	ck_rel(e->move.t_move, 130 * 10e-6 + 3500 / 10e9 + 2060 / 10e9);
	/* T_pim totals do not depend on the split: b2 = max(16,777,216/25.6e9, 2560/16e9) = 0.65536 ms */
	ck_rel(edecs(&res, e)[2].t_pim, 0.65536e-3);
	placement_result_free(&res);
}
END_TEST

START_TEST(test_measured_t_pim_and_empty)
{
	struct placement_params p = tparams();
	struct placement_result res;
	/* a reported PIM time replaces the estimate: 2 executions of 1 ms → 2 ms */
	struct placement_region r = pim_region(9, 0);

	r.trip = 2;
	r.have_t_pim = true;
	r.t_pim_measured = 1e-3;
	run(&r, 1, &p, PL_GRAN_LOOP, PL_MOVE_UPPER, NULL, 0, &res);
	ck_assert(edecs(&res, &res.estimates[0])[0].t_pim_is_measured);
	ck_rel(res.estimates[0].t_pim, 2e-3);
	ck_rel(res.estimates[0].t_cpu, 2.0);
	/* nothing left on the host: the residual bound is unbounded */
	ck_rel(res.estimates[0].residual_share, 0);
	ck_assert(isinf(res.estimates[0].bound));
	placement_result_free(&res);

	run(NULL, 0, &p, PL_GRAN_OPERATOR, PL_MOVE_RESIDENT, NULL, 0, &res);
	ck_assert_uint_eq(res.n_estimates, 1);
	ck_rel(res.estimates[0].speedup, 1);
	ck_rel(res.estimates[0].n_core, 64);
	placement_result_free(&res);
}
END_TEST


/*
 * Which term set T_pim, and the bound as the core count grows (tparams: 25.6e9 iterations/s and
 * B_pim 16 GB/s at 64 cores; B_rd = B_wb = 10 GB/s; T_ctx 10 µs).
 *   a: N_par = N_total = 256e6, 50 ms, ins alloc 0 (8e6 B), outs alloc 1 (8e6 B), n_rd 2e6
 *      (2e6·64/0.05 = 2.56 GB/s >= θ 2): PIM.  64 cores: compute 256e6/25.6e9 = 10 ms, bandwidth
 *      16e6/16e9 = 1 ms: the compute term sets it.  1e6 cores: compute 256e6/4e14 = 0.64 µs,
 *      bandwidth 16e6/2.5e14 = 0.064 µs: still the compute term (both shrink as 1/N_core).
 *   b: N_par 1 (C2 fails), 30 ms: host.
 *   c: N_par = N_total = 1,024,000 (>= 1e6), 20 ms, n_rd 1e6 (3.2 GB/s): PIM, with a measured
 *      T_pim of 5 ms and no operands.
 * Movement (upper): a | b | c: 2 segments, 4 transitions = 40 µs, fetch 8e6 B = 0.8 ms, flush
 *   8e6 B = 0.8 ms: T_move = 1.64 ms, the same at both counts.
 * T_CPU 100 ms, residual 30 ms: bound 1/0.3 = 3.333×.
 *   64 cores:  T_pim = 10 + 5 = 15 ms, T_hybrid = 30 + 15 + 1.64 = 46.64 ms, speedup 2.1441×.
 *   1e6 cores: T_pim = 0.00064 + 5 ms, T_hybrid = 36.64064 ms, speedup 2.72925×.
 *   bound_movement = 100 / (30 + 5 + 1.64) = 2.7293× at both: the estimated T_pim terms vanish,
 *   the measured 5 ms and T_move stay.
 */
START_TEST(test_t_pim_terms_and_movement_bound)
{
	struct placement_params p = tparams();
	struct placement_result res;
	double cores[] = { 64, 1e6 };
	const struct placement_operand oa[] = { { 0, 8000000, PL_IN }, { 1, 8000000, PL_OUT } };
	struct placement_region r[3] = {
		reg(0, "a", 0, 256000000, 256000000, 50e-3),
		reg(1, "b", 1, 1, 1, 30e-3),
		reg(2, "c", 2, 1024000, 1024000, 20e-3),
	};

	r[0].operands = oa, r[0].n_operands = 2;
	set_nrd(&r[0], 2e6);
	set_nrd(&r[2], 1e6);
	r[2].have_t_pim = true;
	r[2].t_pim_measured = 5e-3;
	run(r, 3, &p, PL_GRAN_LOOP, PL_MOVE_UPPER, cores, 2, &res);
	const struct placement_estimate *e = &res.estimates[0], *big = &res.estimates[1];
	for (int k = 0; k < 2; k++) {
		const struct placement_estimate *x = &res.estimates[k];
		ck_assert_int_eq(edecs(&res, x)[0].side, PL_PIM);
		ck_assert_int_eq(edecs(&res, x)[1].side, PL_HOST);
		ck_assert_int_eq(edecs(&res, x)[1].t_pim_term, PL_TPIM_NONE);
		ck_assert_int_eq(edecs(&res, x)[2].side, PL_PIM);
		ck_assert_int_eq(edecs(&res, x)[2].t_pim_term, PL_TPIM_MEASURED);
		ck_rel(x->t_pim_by[PL_TPIM_MEASURED], 5e-3);
		ck_assert_uint_eq(x->move.transitions, 4);
		ck_rel(x->move.t_move, 1.64e-3);
		ck_rel(x->bound, 1 / 0.3);
		ck_rel(x->bound_movement, 100 / 36.64);
		ck_assert(x->speedup < x->bound_movement && x->bound_movement < x->bound);
	}
	ck_assert_int_eq(edecs(&res, e)[0].t_pim_term, PL_TPIM_COMPUTE);
	ck_rel(e->t_pim_by[PL_TPIM_COMPUTE], 10e-3);
	ck_rel(e->t_pim_by[PL_TPIM_BANDWIDTH], 0);
	ck_assert_uint_eq(e->n_pim_by[PL_TPIM_COMPUTE], 1);
	ck_assert_uint_eq(e->n_pim_by[PL_TPIM_MEASURED], 1);
	ck_rel(e->t_pim, 15e-3);
	ck_rel(e->t_hybrid, 46.64e-3);
	ck_rel(e->speedup, 100 / 46.64);
	ck_assert_int_eq(edecs(&res, big)[0].t_pim_term, PL_TPIM_COMPUTE);
	ck_rel(big->t_pim_by[PL_TPIM_COMPUTE], 0.64e-6);
	ck_rel(big->t_pim_by[PL_TPIM_BANDWIDTH], 0);
	ck_rel(big->t_hybrid, 36.64064e-3);
	ck_rel(big->speedup, 100 / 36.64064);
	ck_assert_str_eq(placement_t_pim_term_name(PL_TPIM_COMPUTE), "compute");
	ck_assert_str_eq(placement_t_pim_term_name(PL_TPIM_BANDWIDTH), "bandwidth");
	ck_assert_str_eq(placement_t_pim_term_name(PL_TPIM_MEASURED), "measured");
	placement_result_free(&res);
}
END_TEST

/*
 * θ of counts measured on another host (import-perf --b-cpu).  θ derived: theta_ratio 0.12,
 * this host's B_cpu 10 GB/s → θ 1.2 GB/s.  A region of 1 ms with n_rd 23,437.5
 * (23,437.5·64/1e-3 = 1.5 GB/s):
 *   measured here:                    1.5 >= 1.2        C3 holds, PIM
 *   measured on a 20 GB/s host:       θ = 0.12·20 = 2.4  C3 fails, host
 *   explicit θ 2 GB/s:                the source does not matter: 1.5 < 2, host, θ 2
 * Operator group of two such regions, one from the 20 GB/s host and one from here: θ is this
 * host's and the foreign member's bandwidth is rescaled by 10/20:
 *   BW = (0.75 GB/s·1 ms + 1.5 GB/s·1 ms) / 2 ms = 1.125 GB/s < 1.2: host.
 */
START_TEST(test_theta_from_measuring_host)
{
	struct placement_params p = tparams();
	struct placement_result res;
	struct pim_error err = { 0 };
	struct placement_region r[2] = { reg(0, "x", 0, 4096, 4096, 1e-3), reg(1, "y", 1, 4096, 4096, 1e-3) };

	p.theta = 0;
	p.theta_ratio = 0.12;
	p.b_cpu = 10e9;
	for (int i = 0; i < 2; i++) {
		r[i].evidence = PL_EVIDENCE_IMPORTED;
		r[i].op = "add";
		set_nrd(&r[i], 23437.5);
	}
	run(r, 1, &p, PL_GRAN_LOOP, PL_MOVE_UPPER, NULL, 0, &res);
	ck_assert_int_eq(edecs(&res, &res.estimates[0])[0].side, PL_PIM);
	ck_rel(edecs(&res, &res.estimates[0])[0].cond[PL_C3].rhs, 1.2e9);
	ck_assert(!edecs(&res, &res.estimates[0])[0].theta_from_source);
	placement_result_free(&res);

	r[0].b_cpu_source = 20e9;
	run(r, 1, &p, PL_GRAN_LOOP, PL_MOVE_UPPER, NULL, 0, &res);
	const struct placement_decision *d = &edecs(&res, &res.estimates[0])[0];
	ck_assert_int_eq(d->side, PL_HOST);
	ck_assert_int_eq(d->cond[PL_C3].state, PL_COND_FALSE);
	ck_rel(d->cond[PL_C3].lhs, 1.5e9);
	ck_rel(d->cond[PL_C3].rhs, 2.4e9);
	ck_assert(d->theta_from_source);
	ck_has(reason(d), "C3: BW_read 1.50 GB/s < θ 2.40 GB/s (θ from the measuring host's B_cpu)");
	placement_result_free(&res);

	p.theta = 2e9;
	run(r, 1, &p, PL_GRAN_LOOP, PL_MOVE_UPPER, NULL, 0, &res);
	d = &edecs(&res, &res.estimates[0])[0];
	ck_rel(d->cond[PL_C3].rhs, 2e9);
	ck_assert(!d->theta_from_source);
	placement_result_free(&res);

	p.theta = 0;
	run(r, 2, &p, PL_GRAN_OPERATOR, PL_MOVE_UPPER, NULL, 0, &res);
	d = &edecs(&res, &res.estimates[0])[0];
	ck_assert_uint_eq(d->unit_size, 2);
	ck_rel(d->cond[PL_C3].lhs, 1.125e9);
	ck_rel(d->cond[PL_C3].rhs, 1.2e9);
	ck_assert_int_eq(d->side, PL_HOST);
	placement_result_free(&res);

	/* both members from the 20 GB/s host: no rescaling, θ 2.4 GB/s */
	r[1].b_cpu_source = 20e9;
	run(r, 2, &p, PL_GRAN_OPERATOR, PL_MOVE_UPPER, NULL, 0, &res);
	d = &edecs(&res, &res.estimates[0])[0];
	ck_rel(d->cond[PL_C3].lhs, 1.5e9);
	ck_rel(d->cond[PL_C3].rhs, 2.4e9);
	placement_result_free(&res);

	r[0].b_cpu_source = -1;
	ck_assert_int_eq(placement_run(r, 2, &p, NULL, &res, &err), -EINVAL);
	ck_has(err.msg, "b_cpu_source must be a finite number >= 0 B/s");
}
END_TEST

/* ------------------------------------------------------------------ reusing a result */

/*
 * A chain of n regions (deterministic): region i reads the previous output and a weight, writes
 * its own output (every third in place), four consecutive regions share an operator; metrics
 * vary so that each granularity puts some on PIM and some on the host.
 */
struct chain {
	struct placement_region r[600];
	struct placement_operand o[3 * 600];
};

static void chain_make(struct chain *c, size_t n, uint32_t salt)
{
	static const char *ops[] = { "a", "b", "c", "d", "e", "f", "g", "h" };
	uint32_t x = 2463534242u ^ salt;

	for (size_t i = 0; i < n; i++) {
		struct placement_operand *o = &c->o[3 * i];
		uint64_t elems;

		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		elems = UINT64_C(1) << (8 + x % 14);
		o[0] = (struct placement_operand){ (uint32_t)(2 * i), 4 * elems, PL_IN };
		o[1] = (struct placement_operand){ (uint32_t)(2 * i + 1), elems, PL_IN };
		o[2] = (struct placement_operand){ (uint32_t)(i % 3 == 2 ? 2 * i : 2 * i + 2), 4 * elems,
						   i % 3 == 2 ? PL_INOUT : PL_OUT };
		c->r[i] = reg((uint32_t)i, NULL, (uint32_t)i, x % 5 == 0 ? 16 : elems, elems * (1 + x % 3),
			      4 * (double)elems / (1e9 + (x % 16) * 1e9));
		c->r[i].op = ops[(i / 4) % 8];
		c->r[i].trip = 1 + x % 3;
		c->r[i].operands = o;
		c->r[i].n_operands = 3;
		set_nrd(&c->r[i], (double)(x % 7) * (double)elems / 64);
		set_store(&c->r[i], x % 50, 30, 20, 10);
	}
}

static void expect_same_estimate(const struct placement_result *ra, const struct placement_result *rb, size_t k,
				 size_t n)
{
	const struct placement_estimate *a = &ra->estimates[k], *b = &rb->estimates[k];
	const struct placement_decision *da = edecs(ra, a), *db = edecs(rb, b);

	ck_assert(a->n_core == b->n_core);
	ck_assert_uint_eq(a->n_offloaded, b->n_offloaded);
	ck_assert_uint_eq(a->n_rejected_stage1, b->n_rejected_stage1);
	ck_assert_uint_eq(a->n_rejected_stage2, b->n_rejected_stage2);
	ck_assert_uint_eq(a->move.fetch_bytes, b->move.fetch_bytes);
	ck_assert_uint_eq(a->move.flush_bytes, b->move.flush_bytes);
	ck_assert_uint_eq(a->move.transitions, b->move.transitions);
	ck_assert_uint_eq(a->move.segments, b->move.segments);
	ck_assert(a->t_hybrid == b->t_hybrid && a->t_pim == b->t_pim && a->t_host == b->t_host);
	for (size_t i = 0; i < n; i++) {
		const struct placement_decision *x = &da[i], *y = &db[i];

		ck_assert_msg(x->side == y->side && x->unit == y->unit && x->unit_size == y->unit_size &&
				      x->n_outer == y->n_outer && x->executions == y->executions &&
				      x->t_host == y->t_host && x->t_pim == y->t_pim &&
				      x->t_pim_term == y->t_pim_term && x->t_pim_is_measured == y->t_pim_is_measured &&
				      x->fetch_bytes == y->fetch_bytes && x->flush_bytes == y->flush_bytes &&
				      x->evidence == y->evidence && x->bw_estimated == y->bw_estimated &&
				      x->theta_from_source == y->theta_from_source && x->region == y->region &&
				      x->region_id == y->region_id,
			      "region %zu differs", i);
		for (int c = 0; c < PL_N_COND; c++)
			ck_assert(x->cond[c].state == y->cond[c].state && x->cond[c].lhs == y->cond[c].lhs &&
				  x->cond[c].rhs == y->cond[c].rhs);
	}
}

START_TEST(test_reuse_same_as_fresh)
{
	static struct chain big, small;
	static const double cores[] = { 16, 64, 256 }, more[] = { 8, 16, 32, 64, 128 };
	struct placement_params p = tparams();
	struct placement_result reused = { 0 }, fresh;
	struct pim_error err = { 0 };
	size_t offloaded = 0, hosted = 0;

	chain_make(&big, 600, 1);
	chain_make(&small, 400, 2);
	for (int g = PL_GRAN_LOOP; g <= PL_GRAN_BLOCK; g++)
		for (int m = PL_MOVE_UPPER; m <= PL_MOVE_RESIDENT; m++) {
			struct placement_query q = { (enum placement_granularity)g, (enum placement_movement_model)m,
						     cores, 3 };
			struct placement_query qb = { (enum placement_granularity)(2 - g), PL_MOVE_RESIDENT, more, 5 };

			/* the reused block holds another model's run, at another granularity */
			ck_assert_int_eq(placement_run_reuse(big.r, 600, &p, &qb, &reused, &err), 0);
			void *block = reused.mem;
			run(small.r, 400, &p, (enum placement_granularity)g, (enum placement_movement_model)m, cores,
			    3, &fresh);
			ck_assert_int_eq(placement_run_reuse(small.r, 400, &p, &q, &reused, &err), 0);
			ck_assert_ptr_eq(reused.mem, block); /* large enough: kept */
			ck_assert_uint_eq(reused.n_estimates, 3);
			ck_assert_uint_eq(reused.n_regions, 400);
			ck_assert_int_eq(reused.granularity, g);
			for (size_t k = 0; k < 3; k++) {
				expect_same_estimate(&reused, &fresh, k, 400);
				offloaded += fresh.estimates[k].n_offloaded;
				hosted += 400 - fresh.estimates[k].n_offloaded;
			}
			placement_result_free(&fresh);
		}
	/* the chain exercises both sides */
	ck_assert_uint_gt(offloaded, 100);
	ck_assert_uint_gt(hosted, 100);

	/* a failed call leaves the result empty, its memory released */
	p.sigma = 2;
	ck_assert_int_eq(placement_run_reuse(small.r, 400, &p, NULL, &reused, &err), -EINVAL);
	ck_assert_ptr_null(reused.mem);
	ck_assert_ptr_null(reused.estimates);
	ck_assert_uint_eq(reused.n_estimates, 0);
	placement_result_free(&reused);
}
END_TEST


/*
 * What a result keeps per region, counted by hand from its layout (daemon/placement.c,
 * work_layout): at loop granularity with one core count, 17 bytes per region for the estimate
 * (side 1, fetch 8, flush 8), 8 for the allocation index (ref_off 4, one direct map slot 4 per
 * allocation id), and per operand its distinct allocation (ref 16) and that allocation's state
 * (a_x 4, a_y 4, a_wtrip 8, a_flags 1): 58 bytes a region with one operand, plus the fixed part
 * (the run's state, the estimates, 64-byte alignment of 12 arrays) under 4 KiB.  Each further
 * core count adds 17 bytes a region; regions out of program order add 4 (the order).
 */
START_TEST(test_result_memory)
{
	enum { N = 100000 };
	static struct placement_region r[N];
	static struct placement_operand o[N];
	static const double cores[] = { 32, 64, 128 };
	struct placement_params p = tparams();
	struct placement_result res;
	struct pim_error err = { 0 };

	for (size_t i = 0; i < N; i++) {
		o[i] = (struct placement_operand){ (uint32_t)i, 4096, i % 2 ? PL_IN : PL_OUT };
		r[i] = reg((uint32_t)i, NULL, (uint32_t)i, 4096, 4096, 1e-3);
		r[i].operands = &o[i];
		r[i].n_operands = 1;
		set_nrd(&r[i], (double)(i % 7) * 1000);
	}
	/* what a caller holds per region (placement.h; LP64) */
	if (sizeof(void *) == 8)
		ck_assert_uint_eq(sizeof(struct placement_region), 160);
	run(r, N, &p, PL_GRAN_LOOP, PL_MOVE_UPPER, NULL, 0, &res);
	ck_assert_uint_ge(res.mem_size, (size_t)58 * N);
	ck_assert_uint_le(res.mem_size, (size_t)58 * N + 4096);
	placement_result_free(&res);

	run(r, N, &p, PL_GRAN_LOOP, PL_MOVE_RESIDENT, cores, 3, &res);
	ck_assert_uint_ge(res.mem_size, (size_t)(58 + 2 * 17) * N);
	ck_assert_uint_le(res.mem_size, (size_t)(58 + 2 * 17) * N + 4096);
	placement_result_free(&res);

	r[0].order = N; /* the first region runs last: the order is kept */
	run(r, N, &p, PL_GRAN_BLOCK, PL_MOVE_UPPER, NULL, 0, &res);
	ck_assert_uint_ge(res.mem_size, (size_t)(58 + 4) * N);
	ck_assert_uint_le(res.mem_size, (size_t)(58 + 4) * N + 4096);
	placement_result_free(&res);
	r[0].order = 0;

	/* more than 32-bit region indices allow: refused before any region is read */
	ck_assert_int_eq(placement_run(r, (size_t)UINT32_MAX, &p, NULL, &res, &err), -E2BIG);
	ck_has(err.msg, "at most 4294967294");
	ck_assert_ptr_null(res.mem);
}
END_TEST

/* A decision read back (placement_decision_get) agrees with every total of its estimate. */
START_TEST(test_decisions_match_totals)
{
	static struct chain c;
	static const double cores[] = { 16, 64, 256 };
	struct placement_params p = tparams();
	struct placement_result res;
	size_t offloaded = 0, hosted = 0;

	chain_make(&c, 400, 3);
	for (int g = PL_GRAN_LOOP; g <= PL_GRAN_BLOCK; g++) {
		run(c.r, 400, &p, (enum placement_granularity)g, PL_MOVE_RESIDENT, cores, 3, &res);
		for (size_t k = 0; k < 3; k++) {
			const struct placement_estimate *e = &res.estimates[k];
			const struct placement_decision *d = edecs(&res, e);
			double t_cpu = 0, t_pim = 0;
			uint64_t fetch = 0, flush = 0;
			size_t pim = 0;

			for (size_t i = 0; i < 400; i++) {
				ck_assert_int_eq(d[i].side, e->side[i]);
				ck_assert_uint_eq(d[i].region, i);
				ck_assert_uint_eq(d[i].region_id, c.r[i].id);
				ck_assert(d[i].side == PL_PIM || (d[i].fetch_bytes == 0 && d[i].t_pim == 0));
				t_cpu += d[i].t_host;
				t_pim += d[i].t_pim;
				fetch += d[i].fetch_bytes;
				flush += d[i].flush_bytes;
				pim += d[i].side == PL_PIM;
			}
			ck_assert(t_cpu == e->t_cpu && t_pim == e->t_pim);
			ck_assert_uint_eq(fetch, e->move.fetch_bytes);
			ck_assert_uint_eq(flush, e->move.flush_bytes);
			ck_assert_uint_eq(pim, e->n_offloaded);
			offloaded += pim;
			hosted += 400 - pim;
		}
		placement_result_free(&res);
	}
	/* the chain exercises both sides */
	ck_assert_uint_gt(offloaded, 100);
	ck_assert_uint_gt(hosted, 100);
}
END_TEST

/* ------------------------------------------------------------------ marginal decisions */

/*
 * C1 within the measured noise of T_ctx.  N_par 1024, N_total 2^20: C1's right side is
 * T_ctx + 2^20 / 25.6e9 = 10 + 40.96 = 50.96 µs.  T_host 50 µs with a spread of 0.1: noise
 * 0.5 · 0.1 · 50 µs = 2.5 µs >= |50 − 50.96| = 0.96 µs, so C1 is marginal.  n_rd 10000 gives
 * BW_read 10000 · 64 / 50 µs = 12.8 GB/s (noise 0.64 GB/s, far from θ 2 GB/s): were C1 to hold,
 * C3 would put the region on PIM, so the decision (host) is marginal, on C1 alone.
 */
START_TEST(test_marginal_c1)
{
	struct placement_params p = tparams();
	struct placement_region r = reg(1, "small", 0, 1024, 1 << 20, 50e-6);
	struct placement_decision d;

	set_nrd(&r, 10000);
	r.t_host_spread = 0.1;
	placement_decide_region(&r, &p, &d);
	ck_assert_int_eq(d.side, PL_HOST);
	ck_assert_int_eq(d.cond[PL_C1].state, PL_COND_FALSE);
	ck_rel(d.cond[PL_C1].rhs, 50.96e-6);
	ck_rel(d.cond[PL_C1].noise, 2.5e-6);
	ck_assert(d.cond[PL_C1].marginal);
	ck_assert(!d.cond[PL_C2].marginal);
	ck_rel(d.cond[PL_C3].noise, 0.64e9);
	ck_assert(!d.cond[PL_C3].marginal);
	ck_assert(d.marginal);
	ck_assert_uint_eq(d.marginal_on, 1u << PL_C1);
	ck_has(reason(&d), "; Stage 2 not evaluated [marginal: within the measured noise of T_ctx (C1, ±2.50 us)]");

	/* a spread of 0.01: noise 0.25 µs < 0.96 µs, not marginal */
	r.t_host_spread = 0.01;
	placement_decide_region(&r, &p, &d);
	ck_rel(d.cond[PL_C1].noise, 0.25e-6);
	ck_assert(!d.cond[PL_C1].marginal);
	ck_assert(!d.marginal);
	ck_assert_uint_eq(d.marginal_on, 0);
	ck_assert_ptr_null(strstr(reason(&d), "marginal"));

	/* no spread known (one repetition, imported counts): never marginal, however close */
	r.t_host_spread = 0;
	r.t_host = 50.96e-6;
	placement_decide_region(&r, &p, &d);
	ck_assert_double_eq(d.cond[PL_C1].noise, 0);
	ck_assert(!d.cond[PL_C1].marginal);
	ck_assert(!d.marginal);

	/* on the other side: T_host 52 µs holds C1 (noise 2.6 µs >= 1.04 µs): PIM, marginal on C1 */
	r.t_host = 52e-6;
	r.t_host_spread = 0.1;
	placement_decide_region(&r, &p, &d);
	ck_assert_int_eq(d.side, PL_PIM);
	ck_assert(d.marginal);
	ck_assert_uint_eq(d.marginal_on, 1u << PL_C1);
}
END_TEST

/* C1's noise that cannot change the side: C2 fails, or Stage 2 would fail anyway. */
START_TEST(test_marginal_needs_a_flip)
{
	struct placement_params p = tparams();
	struct placement_region r = reg(1, "narrow", 0, 16, 1 << 20, 50e-6);
	struct placement_decision d;

	/* N_par 16 < N_core 64: C2 keeps it on the host whatever T_host is */
	set_nrd(&r, 10000);
	r.t_host_spread = 0.1;
	placement_decide_region(&r, &p, &d);
	ck_assert(d.cond[PL_C1].marginal);
	ck_assert(!d.marginal);
	ck_assert_uint_eq(d.marginal_on, 0);

	/* N_par 1024, but n_rd 100: BW_read 0.128 GB/s, far below θ (noise 6.4 MB/s), no store
	 * counts: Stage 2 fails whether C1 holds or not */
	r.n_par = 1024;
	r.n_rd = 100;
	placement_decide_region(&r, &p, &d);
	ck_assert(d.cond[PL_C1].marginal);
	ck_assert_int_eq(d.cond[PL_C4].state, PL_COND_SKIPPED);
	ck_assert_double_eq(d.cond[PL_C4].noise, 0); /* f_store not measured: no noise */
	ck_assert(!d.marginal);

	/* nothing measured: T_host 0, no spread, nothing marginal */
	struct placement_region none = reg(2, "none", 1, 1024, 1 << 20, 0);
	none.evidence = PL_EVIDENCE_NONE;
	placement_decide_region(&none, &p, &d);
	for (int c = 0; c < PL_N_COND; c++)
		ck_assert(!d.cond[c].marginal);
	ck_assert(!d.marginal);
}
END_TEST

/*
 * C3 and C4 near θ and σ.  T_host 100 µs (C1: 100 vs 50.96 µs, noise 10 µs at a spread of 0.2:
 * clear).  n_rd 3281.25: BW_read 3281.25 · 64 / 100 µs = 2.1 GB/s, noise 0.5 · 0.2 · 2.1 = 0.21
 * GB/s >= |2.1 − 2.0|: C3 marginal.  With f_store 0.8 (noise 0.08, 0.4 from σ) C4 holds clearly
 * and keeps the region on PIM: not marginal.  With f_store 0.42 (c_store 42 of 100 cycles; noise
 * 0.042 >= 0.02) both are marginal, and only both failing together moves it: marginal on C3 and C4.
 */
START_TEST(test_marginal_c3_c4)
{
	struct placement_params p = tparams();
	struct placement_region r = reg(1, "gemv", 0, 4096, 1 << 20, 100e-6);
	struct placement_decision d;

	set_nrd(&r, 3281.25);
	set_store(&r, 80, 10, 5, 5);
	r.t_host_spread = 0.2;
	placement_decide_region(&r, &p, &d);
	ck_assert_int_eq(d.side, PL_PIM);
	ck_assert(!d.cond[PL_C1].marginal);
	ck_rel(d.cond[PL_C3].lhs, 2.1e9);
	ck_rel(d.cond[PL_C3].noise, 0.21e9);
	ck_assert(d.cond[PL_C3].marginal);
	ck_rel(d.cond[PL_C4].noise, 0.08);
	ck_assert(!d.cond[PL_C4].marginal);
	ck_assert(!d.marginal);

	set_store(&r, 42, 30, 20, 8);
	placement_decide_region(&r, &p, &d);
	ck_assert_int_eq(d.side, PL_PIM);
	ck_rel(d.cond[PL_C4].lhs, 0.42);
	ck_rel(d.cond[PL_C4].noise, 0.042);
	ck_assert(d.cond[PL_C4].marginal);
	ck_assert(d.marginal);
	ck_assert_uint_eq(d.marginal_on, 1u << PL_C3 | 1u << PL_C4);
	ck_has(reason(&d), "[marginal: within the measured noise of θ (C3, ±0.21 GB/s) and σ (C4, ±0.042)]");

	/* the other side of θ: BW_read 1.9 GB/s (n_rd 2968.75), noise 0.19 >= 0.1, C4 failing
	 * clearly (f_store 0.1): host, marginal on C3 */
	set_nrd(&r, 2968.75);
	set_store(&r, 10, 50, 20, 20);
	placement_decide_region(&r, &p, &d);
	ck_assert_int_eq(d.side, PL_HOST);
	ck_assert(d.marginal);
	ck_assert_uint_eq(d.marginal_on, 1u << PL_C3);
}
END_TEST

/*
 * B_cpu's spread widens a derived θ's noise.  θ = 0.12 · 16.754 GB/s = 2.01048 GB/s; BW_read
 * 2.1 GB/s; no spread of T_host known.  b_cpu_spread 0.1: noise 0.5 · 0.1 · 2.01048 = 0.100524
 * GB/s >= 0.08952: marginal.  An explicit θ, or counts measured on another host (whose B_cpu's
 * spread is not known), have no such noise.  Both spreads (T_host 0.2): 0.5 · (0.2 · 2.1 + 0.1 ·
 * 2.01048) GB/s = 0.310524 GB/s.
 */
START_TEST(test_marginal_b_cpu_spread)
{
	struct placement_params p = tparams();
	struct placement_region r = reg(1, "gemv", 0, 4096, 1 << 20, 100e-6);
	struct placement_decision d;
	struct pim_error err = { 0 };

	p.theta = 0;
	p.theta_ratio = 0.12;
	p.b_cpu = 16.754e9;
	p.b_cpu_spread = 0.1;
	set_nrd(&r, 3281.25);
	placement_decide_region(&r, &p, &d);
	ck_rel(d.cond[PL_C3].rhs, 2.01048e9);
	ck_rel(d.cond[PL_C3].noise, 0.100524e9);
	ck_assert(d.cond[PL_C3].marginal);
	ck_assert(d.marginal);
	ck_assert_uint_eq(d.marginal_on, 1u << PL_C3);
	ck_assert_double_eq(d.cond[PL_C1].noise, 0); /* T_host's spread not known */

	r.t_host_spread = 0.2;
	placement_decide_region(&r, &p, &d);
	ck_rel(d.cond[PL_C3].noise, 0.310524e9);

	r.t_host_spread = 0;
	r.evidence = PL_EVIDENCE_IMPORTED;
	r.b_cpu_source = 16.754e9; /* the same θ, from the measuring host's B_cpu */
	placement_decide_region(&r, &p, &d);
	ck_assert(d.theta_from_source);
	ck_assert_double_eq(d.cond[PL_C3].noise, 0);
	ck_assert(!d.marginal);

	r.evidence = PL_EVIDENCE_COUNTERS;
	r.b_cpu_source = 0;
	p.theta = 2e9; /* explicit: exact */
	placement_decide_region(&r, &p, &d);
	ck_assert_double_eq(d.cond[PL_C3].noise, 0);
	ck_assert(!d.marginal);

	/* bad inputs are refused, named */
	p.b_cpu_spread = -0.1;
	expect_bad(p, "b_cpu_spread=-0.1");
	p.b_cpu_spread = NAN;
	expect_bad(p, "b_cpu_spread=nan");
	p.b_cpu_spread = 0;
	r.t_host_spread = -1;
	ck_assert_int_eq(placement_region_validate(&r, 3, &err), -EINVAL);
	ck_has(err.msg, "regions[3] (id 1, gemv): t_host_spread must be a finite relative spread >= 0");
	r.t_host_spread = INFINITY;
	ck_assert_int_eq(placement_region_validate(&r, 3, &err), -EINVAL);
}
END_TEST

/*
 * The estimate counts marginal decisions, as placement_decision_get() rebuilds them, per core
 * count.  Regions (spread 0.1): 0 the marginal-C1 region of test_marginal_c1 (host), 1 the same
 * at 52 µs (PIM), 2 clear (T_host 1 ms, BW 0.64 GB/s: host), 3 the same as 0 without a spread.
 * At 64 cores: 2 marginal, 1 on PIM, both on C1.  At 128 cores C1's right side is 10 + 20.48 =
 * 30.48 µs: 50 and 52 µs hold it clearly (noise 2.5, 2.6 µs), and nothing is marginal.
 */
START_TEST(test_marginal_counts)
{
	struct placement_params p = tparams();
	struct placement_region r[4] = {
		reg(1, "a", 0, 1024, 1 << 20, 50e-6),
		reg(2, "b", 1, 1024, 1 << 20, 52e-6),
		reg(3, "c", 2, 1024, 1 << 20, 1e-3),
		reg(4, "d", 3, 1024, 1 << 20, 50e-6),
	};
	static const double cores[] = { 64, 128 };
	struct placement_result res;

	for (int i = 0; i < 4; i++) {
		set_nrd(&r[i], 10000);
		r[i].t_host_spread = i == 3 ? 0 : 0.1;
	}
	run(r, 4, &p, PL_GRAN_LOOP, PL_MOVE_UPPER, cores, 2, &res);
	const struct placement_estimate *e = &res.estimates[0];
	ck_assert_uint_eq(e->n_marginal, 2);
	ck_assert_uint_eq(e->n_marginal_pim, 1);
	ck_assert_uint_eq(e->n_marginal_on[PL_C1], 2);
	ck_assert_uint_eq(e->n_marginal_on[PL_C3], 0);
	const struct placement_decision *d = edecs(&res, e);
	ck_assert(d[0].marginal && d[1].marginal && !d[2].marginal && !d[3].marginal);
	ck_assert_int_eq(d[1].side, PL_PIM);
	ck_assert_uint_eq(res.estimates[1].n_marginal, 0);
	ck_assert_uint_eq(res.estimates[1].n_marginal_pim, 0);
	placement_result_free(&res);
}
END_TEST

/*
 * Operator and block granularity take the spread of their unit.  Operator: members of 30 µs
 * (spread 0.1) and 10 µs (spread 0.3), trip 1: the group's T_host 40 µs, its spread weighted by
 * time (30 · 0.1 + 10 · 0.3) / 40 = 0.15, C1's noise 0.5 · 0.15 · 40 µs = 3 µs.  Block: a nest of
 * 50 µs in n_outer 1024 blocks, spread 0.1: each block 50/1024 µs, noise 0.05 · 50/1024 µs.
 */
START_TEST(test_marginal_granularity)
{
	struct placement_params p = tparams();
	struct placement_region r[2] = {
		reg(1, "x", 0, 1024, 1 << 19, 30e-6),
		reg(2, "y", 1, 1024, 1 << 19, 10e-6),
	};
	struct placement_result res;
	struct placement_decision d;

	r[0].op = r[1].op = "op";
	r[0].t_host_spread = 0.1;
	r[1].t_host_spread = 0.3;
	run(r, 2, &p, PL_GRAN_OPERATOR, PL_MOVE_UPPER, NULL, 0, &res);
	placement_decision_get(&res, 0, 1, &d);
	ck_assert_uint_eq(d.unit_size, 2);
	ck_rel(d.cond[PL_C1].lhs, 40e-6);
	ck_rel(d.cond[PL_C1].noise, 3e-6);
	placement_result_free(&res);

	struct placement_region b = reg(3, "nest", 0, 1024, 1 << 20, 50e-6);
	b.n_outer = 1024;
	b.t_host_spread = 0.1;
	run(&b, 1, &p, PL_GRAN_BLOCK, PL_MOVE_UPPER, NULL, 0, &res);
	placement_decision_get(&res, 0, 0, &d);
	ck_rel(d.cond[PL_C1].lhs, 50e-6 / 1024);
	ck_rel(d.cond[PL_C1].noise, 0.05 * 50e-6 / 1024);
	placement_result_free(&res);
}
END_TEST

static Suite *placement_suite(void)
{
	Suite *s = suite_create("placement");
	struct {
		const char *name;
		const TTest *t;
	} tests[] = {
		{ "params_default", test_params_default },
		{ "params_invalid", test_params_invalid },
		{ "names", test_names },
		{ "c1", test_c1 },
		{ "c2", test_c2 },
		{ "c3", test_c3 },
		{ "c4", test_c4 },
		{ "timing_backend_estimate", test_timing_backend_estimate },
		{ "matmul_rejected_stage2", test_matmul_rejected_stage2 },
		{ "gemv_passes_c3", test_gemv_passes_c3 },
		{ "fill_passes_c4_alone", test_fill_passes_c4_alone },
		{ "transcendental_stage1_only", test_transcendental_stage1_only },
		{ "softmax_one_nest", test_softmax_one_nest },
		{ "rmsnorm_cores", test_rmsnorm_cores },
		{ "move_upper_dedup", test_move_upper_dedup },
		{ "move_resident_dedup", test_move_resident_dedup },
		{ "move_loop_invariant", test_move_loop_invariant },
		{ "operator_granularity", test_operator_granularity },
		{ "block_granularity", test_block_granularity },
		{ "measured_t_pim_and_empty", test_measured_t_pim_and_empty },
		{ "t_pim_terms_and_movement_bound", test_t_pim_terms_and_movement_bound },
		{ "theta_from_measuring_host", test_theta_from_measuring_host },
		{ "reuse_same_as_fresh", test_reuse_same_as_fresh },
		{ "result_memory", test_result_memory },
		{ "decisions_match_totals", test_decisions_match_totals },
		{ "marginal_c1", test_marginal_c1 },
		{ "marginal_needs_a_flip", test_marginal_needs_a_flip },
		{ "marginal_c3_c4", test_marginal_c3_c4 },
		{ "marginal_b_cpu_spread", test_marginal_b_cpu_spread },
		{ "marginal_counts", test_marginal_counts },
		{ "marginal_granularity", test_marginal_granularity },
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
	SRunner *sr = srunner_create(placement_suite());
	int failed;

	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
