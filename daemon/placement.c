/* SPDX-License-Identifier: MIT */
/*
 * placement.c: the Torch-PIM placement rule, movement model and end-to-end estimate (doc/design.md §3).
 *
 * Layout of this file, top to bottom:
 *   parameters        defaults, validation, derived values (θ, B_rd, B_wb)
 *   the rule          C1..C4 for one decision unit (placement_decide_unit) — the only place the
 *                     four formulas appear
 *   placement_run     the one entry point
 * and of the files split from it (placement_internal.h joins them):
 *   placement_reason.c    the explanation of a decision (placement_format_reason)
 *   placement_units.c     working state; loop / operator / block granularity turn regions into
 *                         decision units
 *   placement_movement.c  movement: Eq. 8 ("upper") and the tighter "resident" model; the
 *                         estimate: T_pim, T_hybrid, speedup, shares
 */
#include "placement_internal.h"

#include <math.h>
#include <string.h>
#include <sys/mman.h>

/* ------------------------------------------------------------------ parameters */

struct placement_params placement_params_default(void)
{
	return (struct placement_params){
		/* One UPMEM DIMM: 128 DPUs, v1A at 350 MHz (doc/design.md §3). */
		.n_core = 128,
		.f_pim = 350e6,
		/* The paper's lower bound: a loop body issues at least one instruction (§4.4). */
		.i_min = 1,
		/*
		 * Host<->PIM switch cost.  Neither the paper excerpt nor the notes give a number;
		 * 10 µs is an assumption of the order of a DPU launch plus completion poll.
		 * Configure it per platform.
		 */
		.t_ctx = 10e-6,
		/* The paper's Ice Lake host; θ = 0.12·B_cpu = 2.0 GB/s and σ = 0.4 (doc/design.md §3). */
		.b_cpu = 16.754e9,
		.theta = 0,
		.theta_ratio = 0.12,
		.sigma = 0.4,
		/* B_rd = B_wb = B_cpu (doc/design.md §3; the paper's Section 5.1). */
		.b_rd = 0,
		.b_wb = 0,
		/*
		 * Per-DPU MRAM bandwidth of the order PrIM (Gómez-Luna et al. 2022) measured at
		 * 350 MHz, ~0.63 GB/s; not in the notes, an assumption.  B_pim = N_core·b_pim_core, so
		 * that T_pim's memory term shrinks with the core count as the compute term does.
		 */
		.b_pim_core = 0.63e9,
		.line_bytes = 64,
	};
}

double placement_theta(const struct placement_params *p)
{
	return p->theta > 0 ? p->theta : p->theta_ratio * p->b_cpu;
}

double placement_theta_for(const struct placement_params *p, double b_cpu_source)
{
	if (p->theta > 0 || !(b_cpu_source > 0))
		return placement_theta(p);
	return p->theta_ratio * b_cpu_source;
}

double placement_b_rd(const struct placement_params *p)
{
	return p->b_rd > 0 ? p->b_rd : p->b_cpu;
}

double placement_b_wb(const struct placement_params *p)
{
	return p->b_wb > 0 ? p->b_wb : p->b_cpu;
}

static int param_bad(struct pim_error *err, const char *name, double v, const char *rule)
{
	return err_set(err, -EINVAL, "invalid placement parameter %s=%g: %s", name, v, rule);
}

int placement_params_validate(const struct placement_params *p, struct pim_error *err)
{
	if (!p)
		return err_set(err, -EINVAL, "invalid placement parameters: none given");
	if (!isfinite(p->n_core) || p->n_core < 1)
		return param_bad(err, "n_core", p->n_core, "PIM core count must be a finite number >= 1");
	if (!isfinite(p->f_pim) || p->f_pim <= 0)
		return param_bad(err, "f_pim", p->f_pim, "PIM clock must be a finite frequency > 0 Hz");
	if (!isfinite(p->i_min) || p->i_min <= 0)
		return param_bad(err, "i_min", p->i_min, "instructions per iteration must be > 0");
	if (!isfinite(p->t_ctx) || p->t_ctx < 0)
		return param_bad(err, "t_ctx", p->t_ctx, "switch time must be a finite number >= 0 s");
	if (!isfinite(p->b_cpu) || p->b_cpu <= 0)
		return param_bad(err, "b_cpu", p->b_cpu, "host bandwidth must be a finite number > 0 B/s");
	if (!isfinite(p->theta))
		return param_bad(err, "theta", p->theta, "must be finite (B/s; <= 0 derives it from theta_ratio)");
	if (p->theta <= 0 && (!isfinite(p->theta_ratio) || p->theta_ratio <= 0))
		return param_bad(err, "theta_ratio", p->theta_ratio,
				 "must be a finite number > 0 when theta is not given");
	if (!isfinite(p->sigma) || p->sigma < 0 || p->sigma > 1)
		return param_bad(err, "sigma", p->sigma, "store-bound fraction threshold must lie in [0, 1]");
	if (!isfinite(p->b_rd))
		return param_bad(err, "b_rd", p->b_rd, "must be finite (B/s; <= 0 means b_cpu)");
	if (!isfinite(p->b_wb))
		return param_bad(err, "b_wb", p->b_wb, "must be finite (B/s; <= 0 means b_cpu)");
	if (!isfinite(p->b_pim_core) || p->b_pim_core <= 0)
		return param_bad(err, "b_pim_core", p->b_pim_core,
				 "PIM bandwidth per core must be a finite number > 0 B/s");
	if (!isfinite(p->line_bytes) || p->line_bytes <= 0)
		return param_bad(err, "line_bytes", p->line_bytes, "cache line must be > 0 bytes");
	if (!isfinite(p->b_cpu_spread) || p->b_cpu_spread < 0)
		return param_bad(err, "b_cpu_spread", p->b_cpu_spread,
				 "relative spread of B_cpu must be a finite number >= 0 (0: not known)");
	return 0;
}

static const char *const granularity_names[] = {
	[PL_GRAN_LOOP] = "loop",
	[PL_GRAN_OPERATOR] = "operator",
	[PL_GRAN_BLOCK] = "block",
};

static const char *const movement_names[] = {
	[PL_MOVE_UPPER] = "upper",
	[PL_MOVE_RESIDENT] = "resident",
};

int placement_granularity_from_name(const char *name)
{
	for (size_t i = 0; name && i < ELEMENTSOF(granularity_names); i++)
		if (strcmp(name, granularity_names[i]) == 0)
			return (int)i;
	return -EINVAL;
}

int placement_movement_model_from_name(const char *name)
{
	for (size_t i = 0; name && i < ELEMENTSOF(movement_names); i++)
		if (strcmp(name, movement_names[i]) == 0)
			return (int)i;
	return -EINVAL;
}

const char *placement_granularity_name(enum placement_granularity g)
{
	return (unsigned)g < ELEMENTSOF(granularity_names) ? granularity_names[g] : "?";
}

const char *placement_movement_model_name(enum placement_movement_model m)
{
	return (unsigned)m < ELEMENTSOF(movement_names) ? movement_names[m] : "?";
}

static const char *const t_pim_term_names[] = {
	[PL_TPIM_NONE] = "none",
	[PL_TPIM_COMPUTE] = "compute",
	[PL_TPIM_BANDWIDTH] = "bandwidth",
	[PL_TPIM_MEASURED] = "measured",
};

const char *placement_t_pim_term_name(enum placement_t_pim_term t)
{
	return (unsigned)t < ELEMENTSOF(t_pim_term_names) ? t_pim_term_names[t] : "?";
}

/* ------------------------------------------------------------------ the rule */

/* Higher is stronger; a unit's evidence is the weakest of its members'. */
int evidence_strength(enum placement_evidence e)
{
	switch (e) {
	case PL_EVIDENCE_COUNTERS:
		return 3;
	case PL_EVIDENCE_IMPORTED:
		return 2;
	case PL_EVIDENCE_ESTIMATE:
		return 1;
	default:
		return 0;
	}
}

/* The rule on truth values: bit c of held says that condition c holds. */
static bool rule_offloads(unsigned held)
{
	return (held & 1u << PL_C1) && (held & 1u << PL_C2) && (held & (1u << PL_C3 | 1u << PL_C4));
}

/* Condition c is marginal when lhs lies within its noise of rhs (placement.h); noise 0: unknown. */
static void cond_noise(struct placement_cond *c, double noise)
{
	c->noise = isfinite(noise) && noise > 0 ? noise : 0;
	c->marginal = c->noise > 0 && !isnan(c->lhs) && fabs(c->lhs - c->rhs) <= c->noise;
}

/*
 * Whether the noise of d's marginal conditions can change its side, and which of them can: each
 * way of moving the marginal conditions across their thresholds is tried (at most 2^3 = 8, C2
 * being exact) on the truth values held (Stage 2's taken even where Stage 1 skipped it).
 * Condition c can change the side when, with the others moved in some way, moving c does.
 */
static void decide_marginal(struct placement_decision *d, unsigned held)
{
	unsigned marg = 0, on = 0;
	bool side = rule_offloads(held), marginal = false;

	for (int c = 0; c < PL_N_COND; c++)
		if (d->cond[c].marginal)
			marg |= 1u << c;
	for (unsigned x = marg;; x = (x - 1) & marg) {
		marginal |= rule_offloads(held ^ x) != side;
		for (int c = 0; c < PL_N_COND; c++)
			if ((x & 1u << c) && rule_offloads(held ^ x) != rule_offloads(held ^ x ^ 1u << c))
				on |= 1u << c;
		if (x == 0)
			break;
	}
	d->marginal = marginal;
	d->marginal_on = (uint8_t)on;
}

/*
 * The two-stage rule (doc/design.md §3; paper §4.4).  Offload iff C1 ∧ C2 ∧ (C3 ∨ C4).  Stage 2 is
 * marked skipped when Stage 1 fails, but its values are still filled in for display.  Each
 * condition's noise comes from the unit's measured spread (and B_cpu's for a derived θ), and the
 * decision is marginal when that noise can change its side (placement.h).
 */
void placement_decide_unit(const struct unit_metrics *m, const struct placement_params *p,
				  struct placement_decision *d)
{
	struct placement_cond *c = d->cond;
	const double k = PLACEMENT_NOISE_K, s = m->spread;
	unsigned held = 0;

	/* C1: T_host(r) > T_ctx + N_total(r)·I_min / (N_core·f_pim) */
	c[PL_C1].lhs = m->t_host;
	c[PL_C1].rhs = p->t_ctx + m->n_total * p->i_min / (p->n_core * p->f_pim);
	c[PL_C1].state = c[PL_C1].lhs > c[PL_C1].rhs ? PL_COND_TRUE : PL_COND_FALSE;

	/* C2: N_par(r) >= N_core (the brief's reconstruction) */
	c[PL_C2].lhs = m->n_par;
	c[PL_C2].rhs = p->n_core;
	c[PL_C2].state = c[PL_C2].lhs >= c[PL_C2].rhs ? PL_COND_TRUE : PL_COND_FALSE;

	bool stage1 = c[PL_C1].state == PL_COND_TRUE && c[PL_C2].state == PL_COND_TRUE;

	/* C3: BW_read(r) = n_rd·L / T_host(r) >= θ (BW computed by the caller of this function) */
	c[PL_C3].lhs = m->bw;
	c[PL_C3].rhs = placement_theta_for(p, m->b_cpu_source);
	d->theta_from_source = p->theta <= 0 && m->b_cpu_source > 0;
	if (!stage1)
		c[PL_C3].state = PL_COND_SKIPPED;
	else if (isnan(m->bw))
		c[PL_C3].state = PL_COND_NO_DATA;
	else
		c[PL_C3].state = m->bw >= c[PL_C3].rhs ? PL_COND_TRUE : PL_COND_FALSE;

	/* C4: f_store(r) = c_store / (c_be1 + c_be2 + c_be3 + c_store) >= σ */
	c[PL_C4].lhs = m->f_store;
	c[PL_C4].rhs = p->sigma;
	if (!stage1)
		c[PL_C4].state = PL_COND_SKIPPED;
	else if (isnan(m->f_store))
		c[PL_C4].state = PL_COND_NO_DATA;
	else
		c[PL_C4].state = m->f_store >= c[PL_C4].rhs ? PL_COND_TRUE : PL_COND_FALSE;

	d->side = stage1 && (c[PL_C3].state == PL_COND_TRUE || c[PL_C4].state == PL_COND_TRUE) ? PL_PIM
												: PL_HOST;
	d->evidence = m->evidence;
	d->bw_estimated = m->bw_estimated;

	/* the noise of each comparison: T_host's spread, and B_cpu's where θ derives from it */
	double s_theta = p->theta <= 0 && !(m->b_cpu_source > 0) ? p->b_cpu_spread : 0;
	d->marginal = false;
	d->marginal_on = 0;
	for (int i = 0; i < PL_N_COND; i++) {
		c[i].noise = 0;
		c[i].marginal = false;
	}
	if (s == 0 && s_theta == 0)
		return; /* no noise known: nothing is marginal (the common case of imported counts) */
	cond_noise(&c[PL_C1], k * s * m->t_host);
	cond_noise(&c[PL_C3], isnan(m->bw) ? 0 : k * (s * m->bw + s_theta * c[PL_C3].rhs));
	cond_noise(&c[PL_C4], isnan(m->f_store) ? 0 : k * s * m->f_store);
	if (!c[PL_C1].marginal && !c[PL_C3].marginal && !c[PL_C4].marginal)
		return;
	held |= (unsigned)(c[PL_C1].state == PL_COND_TRUE) << PL_C1;
	held |= (unsigned)(c[PL_C2].state == PL_COND_TRUE) << PL_C2;
	held |= (unsigned)(!isnan(m->bw) && m->bw >= c[PL_C3].rhs) << PL_C3;
	held |= (unsigned)(!isnan(m->f_store) && m->f_store >= c[PL_C4].rhs) << PL_C4;
	decide_marginal(d, held);
}

bool role_reads(enum placement_role r)
{
	return r == PL_IN || r == PL_INOUT;
}

bool role_writes(enum placement_role r)
{
	return r == PL_OUT || r == PL_INOUT;
}

/*
 * Quadratic in the operands of one region; used only where no allocation index exists
 * (placement_unique_read_bytes called alone).  placement_run uses the linear path.
 */
uint64_t placement_unique_read_bytes(const struct placement_region *r)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < r->n_operands; i++) {
		const struct placement_operand *o = &r->operands[i];
		uint64_t bytes = 0;
		bool first = true, reads = false;

		/* Take each allocation at its first operand; size = largest of its operands. */
		for (size_t j = 0; j < i && first; j++)
			if (r->operands[j].alloc_id == o->alloc_id)
				first = false;
		if (!first)
			continue;
		for (size_t j = i; j < r->n_operands; j++)
			if (r->operands[j].alloc_id == o->alloc_id) {
				if (r->operands[j].bytes > bytes)
					bytes = r->operands[j].bytes;
				reads |= role_reads(r->operands[j].role);
			}
		if (reads)
			sum += bytes;
	}
	return sum;
}

/*
 * BW_read of one region: from n_rd when counted; else the caller's estimate; else, for the
 * timing backend (doc/design.md §4.4), unique read bytes / T_host.  NAN when none applies.
 */
static double region_bw_read(const struct placement_region *r, const struct placement_params *p,
			     uint64_t unique_read_bytes, bool *estimated)
{
	*estimated = false;
	if (r->t_host <= 0)
		return NAN;
	if (r->have_n_rd)
		return r->n_rd * p->line_bytes / r->t_host;
	*estimated = true;
	if (r->have_bw_read_estimate)
		return r->bw_read_estimate;
	if (r->evidence == PL_EVIDENCE_ESTIMATE)
		return (double)unique_read_bytes / r->t_host;
	*estimated = false;
	return NAN;
}

static double region_f_store(const struct placement_region *r)
{
	double den;

	if (!r->have_store)
		return NAN;
	den = r->c_be1 + r->c_be2 + r->c_be3 + r->c_store;
	return den > 0 ? r->c_store / den : NAN;
}

void region_metrics(const struct placement_region *r, const struct placement_params *p,
			   uint64_t unique_read_bytes, struct unit_metrics *m)
{
	m->t_host = r->t_host;
	m->n_par = (double)r->n_par;
	m->n_total = (double)r->n_total;
	m->bw = region_bw_read(r, p, unique_read_bytes, &m->bw_estimated);
	m->f_store = region_f_store(r);
	m->evidence = r->evidence;
	m->spread = r->t_host_spread;
	m->b_cpu_source = r->b_cpu_source;
	if (m->bw_estimated && evidence_strength(m->evidence) > evidence_strength(PL_EVIDENCE_ESTIMATE))
		m->evidence = PL_EVIDENCE_ESTIMATE;
}

void placement_decide_region(const struct placement_region *r, const struct placement_params *p,
			     struct placement_decision *d)
{
	struct unit_metrics m;
	uint64_t urb = 0;

	if (!r->have_n_rd && !r->have_bw_read_estimate && r->evidence == PL_EVIDENCE_ESTIMATE)
		urb = placement_unique_read_bytes(r);
	region_metrics(r, p, urb, &m);
	memset(d, 0, sizeof *d);
	d->region_id = r->id;
	d->unit_size = 1;
	d->n_outer = 1;
	placement_decide_unit(&m, p, d);
}

/* ------------------------------------------------------------------ entry point */

/*
 * One block holds a run's result (estimates, the state placement_decision_get reads) and its
 * working arrays, so that a caller placing models repeatedly reuses it (placement_run_reuse)
 * instead of first-touching fresh pages.  The block is laid out twice: with no base to size it,
 * then over the allocated block.
 */
struct layout {
	char *base;
	size_t used;
	bool overflow;
};

static void *layout_take(struct layout *l, size_t count, size_t size)
{
	size_t bytes, at = l->used + 63;

	/* 64-byte aligned, so that no two arrays share a cache line */
	if (__builtin_mul_overflow(count ? count : 1, size, &bytes) || at < l->used ||
	    __builtin_add_overflow(at & ~(size_t)63, bytes, &l->used)) {
		l->overflow = true;
		return NULL;
	}
	return l->base ? l->base + (at & ~(size_t)63) : NULL;
}

#define LAYOUT_TAKE(l, ptr, count) ((ptr) = layout_take((l), (count), sizeof *(ptr)))

/* Every array of a run over l, w->order only when the regions are not in program order. */
static void work_layout(struct placement_work *w, struct layout *l, struct placement_result *res,
			size_t n_counts, bool sorted)
{
	size_t n = w->n, na = w->n_ops; /* distinct allocations <= operands */

	LAYOUT_TAKE(l, res->work, 1);
	LAYOUT_TAKE(l, res->estimates, n_counts);
	for (size_t k = 0; k < n_counts; k++) {
		struct placement_estimate sizing, *e = l->base ? &res->estimates[k] : &sizing;

		*e = (struct placement_estimate){ 0 };
		LAYOUT_TAKE(l, e->side, n);
		LAYOUT_TAKE(l, e->fetch_bytes, n);
		LAYOUT_TAKE(l, e->flush_bytes, n);
	}
	if (w->gran == PL_GRAN_OPERATOR) {
		w->op_cap = table_capacity(n);
		LAYOUT_TAKE(l, w->unit_of, n);
		LAYOUT_TAKE(l, w->unit_first, n);
		LAYOUT_TAKE(l, w->unit_size, n);
		LAYOUT_TAKE(l, w->unit_m, n);
		LAYOUT_TAKE(l, w->op_slots, w->op_cap);
		LAYOUT_TAKE(l, w->op_trip, n);
		LAYOUT_TAKE(l, w->op_sum, 4 * n);
		LAYOUT_TAKE(l, w->op_mixed, n);
	}
	w->order = NULL;
	if (!sorted)
		LAYOUT_TAKE(l, w->order, n);
	LAYOUT_TAKE(l, w->refs, w->n_ops);
	LAYOUT_TAKE(l, w->ref_off, n + 1);
	alloc_map_size(&w->map, w->n_ops, w->max_id);
	LAYOUT_TAKE(l, w->map.vals, w->map.cap);
	w->map.keys = w->map.direct ? NULL : layout_take(l, w->map.cap, sizeof *w->map.keys);
	LAYOUT_TAKE(l, w->a_x, na);
	LAYOUT_TAKE(l, w->a_y, na);
	LAYOUT_TAKE(l, w->a_wtrip, na);
	LAYOUT_TAKE(l, w->a_flags, na);
}

/*
 * A large block on 2 MiB boundaries, marked for transparent huge pages: a 100,000-region run
 * walks ~10 MB, which 4 KiB pages spread over more TLB entries than a core has.
 */
static void *block_alloc(size_t size)
{
	enum { HUGE_PAGE = 2 << 20 };
	void *p;

	if (size < 2 * HUGE_PAGE)
		return malloc(size);
	size = (size + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
	if (posix_memalign(&p, HUGE_PAGE, size) != 0)
		return NULL;
	(void)madvise(p, size, MADV_HUGEPAGE); /* a hint: without it the block works the same */
	return p;
}

void placement_result_free(struct placement_result *r)
{
	if (!r)
		return;
	free(r->mem);
	memset(r, 0, sizeof *r);
}

/* A failed run leaves *out empty, its memory released. */
static int run_fail(struct placement_result *out, int rc)
{
	placement_result_free(out);
	return rc;
}

int placement_run(const struct placement_region *regions, size_t n, const struct placement_params *p,
		  const struct placement_query *q, struct placement_result *out, struct pim_error *err)
{
	if (out)
		memset(out, 0, sizeof *out);
	return placement_run_reuse(regions, n, p, q, out, err);
}

int placement_run_reuse(const struct placement_region *regions, size_t n, const struct placement_params *p,
			const struct placement_query *q, struct placement_result *out, struct pim_error *err)
{
	struct placement_work w = { 0 };
	struct placement_query dq = { PL_GRAN_LOOP, PL_MOVE_UPPER, NULL, 0 };
	struct placement_result res = { 0 };
	size_t n_counts;
	bool sorted = true;
	int rc;

	if (!out)
		return err_set(err, -EINVAL, "placement: no result given");
	if (n > 0 && !regions)
		return run_fail(out, err_set(err, -EINVAL, "placement: %zu regions but no region array", n));
	/* region indices, and 1 + a region index, are 32-bit */
	if (n >= UINT32_MAX)
		return run_fail(out, err_set(err, -E2BIG, "placement: %zu regions; at most %u", n, UINT32_MAX - 1));
	rc = placement_params_validate(p, err);
	if (rc < 0)
		return run_fail(out, rc);
	if (!q)
		q = &dq;
	if ((unsigned)q->granularity > PL_GRAN_BLOCK)
		return run_fail(out, err_set(err, -EINVAL, "placement: unknown granularity %d", (int)q->granularity));
	if ((unsigned)q->movement > PL_MOVE_RESIDENT)
		return run_fail(out, err_set(err, -EINVAL, "placement: unknown movement model %d", (int)q->movement));
	n_counts = q->core_counts && q->n_core_counts ? q->n_core_counts : 1;
	for (size_t k = 0; q->core_counts && k < q->n_core_counts; k++)
		if (!isfinite(q->core_counts[k]) || q->core_counts[k] < 1)
			return run_fail(out, err_set(err, -EINVAL,
						     "placement: core count #%zu is %g: must be a finite number >= 1",
						     k + 1, q->core_counts[k]));
	for (size_t i = 0; i < n; i++) {
		const struct placement_region *r = &regions[i];

		rc = placement_region_validate(r, i, err);
		if (rc < 0)
			return run_fail(out, rc);
		if (r->n_operands >= UINT32_MAX - w.n_ops)
			return run_fail(out, err_set(err, -E2BIG, "placement: more than %u operands", UINT32_MAX - 1));
		w.n_ops += r->n_operands;
		for (size_t k = 0; k < r->n_operands; k++)
			if (r->operands[k].alloc_id > w.max_id)
				w.max_id = r->operands[k].alloc_id;
		/* manifests list regions in program order already; sort only when they do not */
		sorted &= i == 0 || regions[i - 1].order <= r->order;
	}

	w.regions = regions;
	w.n = n;
	w.p = *p;
	w.gran = q->granularity;
	w.model = q->movement;

	/* size the block; take over the earlier result's when it is large enough */
	struct layout l = { 0 };
	work_layout(&w, &l, &res, n_counts, sorted);
	if (l.overflow)
		return run_fail(out, err_set(err, -ENOMEM, "placement: %zu regions need more memory than "
					     "can be addressed", n));
	res.mem = out->mem;
	res.mem_size = out->mem_size;
	out->mem = NULL;
	placement_result_free(out);
	if (res.mem_size < l.used) {
		free(res.mem);
		res.mem_size = 0;
		res.mem = block_alloc(l.used);
		if (!res.mem)
			return err_set(err, -ENOMEM, "placement: out of memory for %zu regions (%zu bytes)", n,
				       l.used);
		res.mem_size = l.used;
	}
	l = (struct layout){ .base = res.mem };
	work_layout(&w, &l, &res, n_counts, sorted);

	res.params = *p;
	res.params.theta = placement_theta(p);
	res.params.b_rd = placement_b_rd(p);
	res.params.b_wb = placement_b_wb(p);
	res.granularity = q->granularity;
	res.movement = q->movement;
	res.n_regions = n;

	if (w.order) {
		for (size_t i = 0; i < n; i++)
			w.order[i] = (uint32_t)i;
		qsort_r(w.order, n, sizeof *w.order, cmp_order, (void *)regions);
	}

	rc = work_index_allocations(&w, err);
	if (rc < 0)
		return run_fail(&res, rc);
	memset(w.a_flags, 0, w.n_allocs * sizeof *w.a_flags);
	for (size_t j = 0; j < w.ref_off[n]; j++)
		if (w.refs[j].wr)
			w.a_flags[w.refs[j].alloc] = A_WRITTEN;

	if (w.gran == PL_GRAN_OPERATOR)
		units_per_operator(&w);

	res.n_estimates = n_counts;
	rc = estimate_all(&w, &res, q->core_counts && q->n_core_counts ? q->core_counts : &p->n_core, err);
	if (rc < 0)
		return run_fail(&res, rc);
	*res.work = w;
	*out = res;
	return 0;
}
