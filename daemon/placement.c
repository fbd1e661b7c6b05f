/* SPDX-License-Identifier: MIT */
/*
 * placement.c: the Torch-PIM placement rule, movement model and end-to-end estimate (doc/design.md §3).
 *
 * Layout of this file, top to bottom:
 *   parameters        defaults, validation, derived values (θ, B_rd, B_wb)
 *   the rule          C1..C4 for one decision unit (placement_decide_unit) — the only place the
 *                     four formulas appear
 *   units             loop / operator / block granularity turn regions into decision units
 *   movement          Eq. 8 ("upper") and the tighter "resident" model
 *   estimate          T_pim, T_hybrid, speedup, shares
 *   placement_run     the one entry point
 */
#include "placement.h"

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

/* What the rule needs of one decision unit, per execution of that unit (64 bytes: operator
 * granularity keeps one per region). */
struct unit_metrics {
	double t_host;    /* T_host, s */
	double n_par;     /* N_par */
	double n_total;   /* N_total */
	double bw;        /* BW_read, B/s; NAN when not evaluable */
	double f_store;   /* NAN when not evaluable */
	enum placement_evidence evidence;
	bool bw_estimated;
	double b_cpu_source; /* B_cpu of the measuring host; 0: this host */
	double spread;       /* relative spread of T_host, also taken for BW_read and f_store; 0 unknown */
};

/* Higher is stronger; a unit's evidence is the weakest of its members'. */
static int evidence_strength(enum placement_evidence e)
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
static void placement_decide_unit(const struct unit_metrics *m, const struct placement_params *p,
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

/* Distinct allocations of a region with the union of their roles and the largest operand size. */
struct alloc_ref {
	uint32_t alloc;
	bool rd, wr;
	uint64_t bytes;
};

static bool role_reads(enum placement_role r)
{
	return r == PL_IN || r == PL_INOUT;
}

static bool role_writes(enum placement_role r)
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

static void region_metrics(const struct placement_region *r, const struct placement_params *p,
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

/* ------------------------------------------------------------------ reasons */

static void fmt_seconds(char *b, size_t n, double s)
{
	if (isnan(s))
		snprintf(b, n, "?");
	else if (s >= 1)
		snprintf(b, n, "%.2f s", s);
	else if (s >= 1e-3)
		snprintf(b, n, "%.2f ms", s * 1e3);
	else if (s >= 1e-6)
		snprintf(b, n, "%.2f us", s * 1e6);
	else
		snprintf(b, n, "%.2f ns", s * 1e9);
}

static const char *cmp_text(const struct placement_cond *c, const char *ge, const char *lt)
{
	return c->lhs >= c->rhs ? ge : lt;
}

/* Appends with snprintf semantics: *pos keeps counting past len so the total length is returned. */
_printf_(4, 5) static void append(char *buf, size_t len, size_t *pos, const char *fmt, ...)
{
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(*pos < len ? buf + *pos : NULL, *pos < len ? len - *pos : 0, fmt, ap);
	va_end(ap);
	if (k > 0)
		*pos += (size_t)k;
}

static void reason_c3(const struct placement_decision *d, char *buf, size_t len, size_t *pos)
{
	const struct placement_cond *c = &d->cond[PL_C3];

	if (c->state == PL_COND_NO_DATA || isnan(c->lhs)) {
		append(buf, len, pos, "C3 not evaluable (no read counts)");
		return;
	}
	append(buf, len, pos, "C3: BW_read %.2f GB/s %s θ %.2f GB/s%s%s", c->lhs / 1e9,
	       cmp_text(c, ">=", "<"), c->rhs / 1e9, d->bw_estimated ? " (estimated)" : "",
	       d->theta_from_source ? " (θ from the measuring host's B_cpu)" : "");
}

static void reason_c4(const struct placement_decision *d, char *buf, size_t len, size_t *pos)
{
	const struct placement_cond *c = &d->cond[PL_C4];

	if (c->state == PL_COND_NO_DATA || isnan(c->lhs)) {
		append(buf, len, pos, "C4 not evaluable (no store counts)");
		return;
	}
	append(buf, len, pos, "C4: f_store %.2f %s σ %.2f", c->lhs, cmp_text(c, ">=", "<"), c->rhs);
}

/* " [marginal: within the measured noise of T_ctx (C1, ±1.20 us)]", for the conditions that can
 * change the side. */
static void reason_marginal(const struct placement_decision *d, char *buf, size_t len, size_t *pos)
{
	static const char *const threshold[PL_N_COND] = { "T_ctx", "N_core", "θ", "σ" };
	const char *sep = "";

	append(buf, len, pos, " [marginal: within the measured noise of ");
	for (int c = 0; c < PL_N_COND; c++) {
		double noise = d->cond[c].noise;
		char v[32];

		if (!(d->marginal_on & 1u << c))
			continue;
		if (c == PL_C1)
			fmt_seconds(v, sizeof v, noise);
		else if (c == PL_C3)
			snprintf(v, sizeof v, "%.2f GB/s", noise / 1e9);
		else
			snprintf(v, sizeof v, "%.3f", noise);
		append(buf, len, pos, "%s%s (C%d, ±%s)", sep, threshold[c], c + 1, v);
		sep = " and ";
	}
	append(buf, len, pos, "]");
}

int placement_format_reason(const struct placement_decision *d, char *buf, size_t len)
{
	const struct placement_cond *c = d->cond;
	size_t pos = 0;

	if (len > 0)
		buf[0] = '\0';
	if (c[PL_C1].state != PL_COND_TRUE || c[PL_C2].state != PL_COND_TRUE) {
		bool both = c[PL_C1].state != PL_COND_TRUE && c[PL_C2].state != PL_COND_TRUE;
		if (c[PL_C1].state != PL_COND_TRUE) {
			char a[32], b[32];
			fmt_seconds(a, sizeof a, c[PL_C1].lhs);
			fmt_seconds(b, sizeof b, c[PL_C1].rhs);
			append(buf, len, &pos, "C1: T_host %s <= T_ctx + N_total·I_min/(N_core·f_pim) %s", a, b);
		}
		if (c[PL_C2].state != PL_COND_TRUE)
			append(buf, len, &pos, "%sC2: N_par %.0f < N_core %.0f", both ? "; " : "",
			       c[PL_C2].lhs, c[PL_C2].rhs);
		append(buf, len, &pos, "; Stage 2 not evaluated");
	} else if (d->side == PL_PIM) {
		if (c[PL_C3].state == PL_COND_TRUE) {
			reason_c3(d, buf, len, &pos);
			if (c[PL_C4].state == PL_COND_TRUE) {
				append(buf, len, &pos, "; ");
				reason_c4(d, buf, len, &pos);
			}
		} else {
			reason_c4(d, buf, len, &pos);
			append(buf, len, &pos, "; ");
			reason_c3(d, buf, len, &pos);
		}
	} else {
		append(buf, len, &pos, "Stage 2 failed: ");
		reason_c3(d, buf, len, &pos);
		append(buf, len, &pos, "; ");
		reason_c4(d, buf, len, &pos);
	}
	if (d->marginal)
		reason_marginal(d, buf, len, &pos);
	if (d->evidence == PL_EVIDENCE_NONE && d->side == PL_HOST)
		append(buf, len, &pos, " [no measurements]");
	if (d->unit_size > 1)
		append(buf, len, &pos, " [operator group of %zu regions]", d->unit_size);
	if (d->n_outer > 1)
		append(buf, len, &pos, " [block: 1/%llu of the nest per execution]",
		       (unsigned long long)d->n_outer);
	return (int)pos;
}

/* ------------------------------------------------------------------ hash maps */

/*
 * Open addressing, power-of-two capacity, at most half full.  Two maps: allocation id → dense
 * index (movement needs per-allocation state) and operator name → group (operator granularity).
 */
static size_t table_capacity(size_t n)
{
	size_t cap = 16;

	while (cap < 2 * n)
		cap <<= 1;
	return cap;
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= UINT64_C(0xff51afd7ed558ccd);
	x ^= x >> 33;
	return x;
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = UINT64_C(14695981039346656037);

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * UINT64_C(1099511628211);
	return h;
}

/*
 * Allocation id → dense index 0..n_allocs-1.  Manifests number allocations densely, so a direct
 * table is used when the largest id is small against the operand count; otherwise an
 * open-addressing hash.  UINT32_MAX marks an empty slot.
 */
struct alloc_map {
	bool direct;
	size_t cap;     /* direct: max id + 1; hash: power of two */
	uint32_t *keys; /* hash only */
	uint32_t *vals;
};

/* ------------------------------------------------------------------ working state */

/*
 * A run's state.  It lives in the result's block, where placement_decision_get() reads it after
 * the run.  A model may have a million regions, so indices are 32-bit and nothing is kept per
 * region that the region itself gives back in a few operations: at loop and block granularity
 * its unit metrics, and at every granularity its decision, executions and byte sums.
 */
struct placement_work {
	const struct placement_region *regions;
	size_t n;
	struct placement_params p; /* as given: a derived θ is derived per region (b_cpu_source) */
	enum placement_granularity gran;
	enum placement_movement_model model;

	uint32_t *order; /* region indices in program order; NULL: the array is in program order */

	/* distinct allocations per region: refs[ref_off[i] .. ref_off[i+1]) */
	struct alloc_ref *refs;
	uint32_t *ref_off;
	size_t n_ops;    /* operands of all regions: bounds the refs and the distinct allocations */
	size_t n_allocs; /* dense allocation indices 0..n_allocs-1 */
	uint32_t max_id;

	/* operator granularity: region → unit; per unit its first member, size and metrics */
	size_t n_units;
	uint32_t *unit_of, *unit_first, *unit_size;
	struct unit_metrics *unit_m;
	/* operator granularity, while the units are formed: name table, smallest member trip,
	 * partial sums (4 per unit), members measured on hosts of different B_cpu */
	size_t op_cap;
	uint32_t *op_slots;
	uint64_t *op_trip;
	double *op_sum;
	uint8_t *op_mixed;

	/*
	 * Per distinct allocation, each array serving one phase after another.  a_x: while indexing,
	 * 1 + the last region listing it; then "upper": 1 + the segment in which a PIM region last
	 * wrote it; "resident": its last PIM writer (UINT32_MAX: none).  a_y: while indexing, its
	 * ref in that region.  a_wtrip: resident, the trip of its last writer (0: none).  a_flags:
	 * resident, A_STATE (where the valid copy is), A_READ (read after its last write), and
	 * A_WRITTEN (some region writes it: not loop-invariant), set once after indexing.
	 */
	struct alloc_map map;
	uint32_t *a_x, *a_y;
	uint64_t *a_wtrip;
	uint8_t *a_flags;
};

static int region_label(char *b, size_t n, const struct placement_region *r, size_t i)
{
	if (r->name)
		return snprintf(b, n, "regions[%zu] (id %u, %s)", i, r->id, r->name);
	return snprintf(b, n, "regions[%zu] (id %u)", i, r->id);
}

static int region_bad(struct pim_error *err, const struct placement_region *r, size_t i, const char *fmt,
		      double v)
{
	char label[160];

	region_label(label, sizeof label, r, i);
	return err_set(err, -EINVAL, "%s: %s (got %g)", label, fmt, v);
}

int placement_region_validate(const struct placement_region *r, size_t i, struct pim_error *err)
{
	if (r->n_par < 1)
		return region_bad(err, r, i, "n_par must be >= 1", (double)r->n_par);
	if (r->n_total < r->n_par)
		return region_bad(err, r, i, "n_total must be >= n_par", (double)r->n_total);
	if (r->trip < 1)
		return region_bad(err, r, i, "trip must be >= 1", (double)r->trip);
	if (r->n_outer > r->n_total)
		return region_bad(err, r, i, "n_outer must not exceed n_total", (double)r->n_outer);
	if ((unsigned)r->evidence > PL_EVIDENCE_IMPORTED)
		return region_bad(err, r, i, "unknown evidence kind", (double)r->evidence);
	if (!isfinite(r->t_host) || r->t_host < 0)
		return region_bad(err, r, i, "t_host must be a finite number >= 0 s", r->t_host);
	if (!isfinite(r->t_host_spread) || r->t_host_spread < 0)
		return region_bad(err, r, i, "t_host_spread must be a finite relative spread >= 0 (0: not known)",
				  r->t_host_spread);
	if (r->have_n_rd && (!isfinite(r->n_rd) || r->n_rd < 0))
		return region_bad(err, r, i, "n_rd must be a finite count >= 0", r->n_rd);
	if (r->have_bw_read_estimate && (!isfinite(r->bw_read_estimate) || r->bw_read_estimate < 0))
		return region_bad(err, r, i, "bw_read_estimate must be a finite number >= 0 B/s",
				  r->bw_read_estimate);
	if (r->have_store) {
		const double v[] = { r->c_store, r->c_be1, r->c_be2, r->c_be3 };
		for (size_t k = 0; k < ELEMENTSOF(v); k++)
			if (!isfinite(v[k]) || v[k] < 0)
				return region_bad(err, r, i, "store/backend cycle counts must be finite and >= 0",
						  v[k]);
	}
	if (!isfinite(r->b_cpu_source) || r->b_cpu_source < 0)
		return region_bad(err, r, i, "b_cpu_source must be a finite number >= 0 B/s (0: this host)",
				  r->b_cpu_source);
	if (r->have_t_pim && (!isfinite(r->t_pim_measured) || r->t_pim_measured < 0))
		return region_bad(err, r, i, "t_pim_measured must be a finite number >= 0 s", r->t_pim_measured);
	if (r->n_operands > 0 && !r->operands)
		return region_bad(err, r, i, "operands missing for n_operands", (double)r->n_operands);
	for (size_t k = 0; k < r->n_operands; k++)
		if ((unsigned)r->operands[k].role > PL_INOUT)
			return region_bad(err, r, i, "operand with unknown role", (double)r->operands[k].role);
	return 0;
}

static int cmp_order(const void *a, const void *b, void *arg)
{
	const struct placement_region *R = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (R[x].order != R[y].order)
		return R[x].order < R[y].order ? -1 : 1;
	return x < y ? -1 : x > y;
}

static void alloc_map_size(struct alloc_map *m, size_t n_ops, uint32_t max_id)
{
	m->direct = (uint64_t)max_id < 4 * (uint64_t)n_ops + 1024;
	m->cap = m->direct ? (size_t)max_id + 1 : table_capacity(n_ops);
}

/* Slot holding id's dense index (UINT32_MAX in it when id is new). */
static uint32_t *alloc_map_slot(struct alloc_map *m, uint32_t id)
{
	size_t h;

	if (m->direct)
		return &m->vals[id];
	h = mix64(id) & (m->cap - 1);
	while (m->vals[h] != UINT32_MAX && m->keys[h] != id)
		h = (h + 1) & (m->cap - 1);
	m->keys[h] = id;
	return &m->vals[h];
}

/*
 * Distinct allocations of every region, with dense allocation indices: one pass over all
 * operands, with a per-allocation stamp so that repeated allocations within a region merge.
 * Checks here, once, that no region's byte sums overflow (region_bytes relies on it).
 */
static int work_index_allocations(struct placement_work *w, struct pim_error *err)
{
	uint32_t n_allocs = 0, nref = 0;
	uint32_t *stamp = w->a_x, *slot_of = w->a_y;

	memset(w->map.vals, 0xff, w->map.cap * sizeof *w->map.vals);
	for (size_t i = 0; i < w->n; i++) {
		const struct placement_region *r = &w->regions[i];
		uint64_t touched = 0;

		w->ref_off[i] = nref;
		for (size_t k = 0; k < r->n_operands; k++) {
			const struct placement_operand *o = &r->operands[k];
			uint32_t *slot = alloc_map_slot(&w->map, o->alloc_id), a;

			if (*slot == UINT32_MAX) {
				*slot = n_allocs;
				stamp[n_allocs++] = 0;
			}
			a = *slot;
			if (stamp[a] != i + 1) {
				stamp[a] = (uint32_t)(i + 1);
				slot_of[a] = nref;
				w->refs[nref++] = (struct alloc_ref){ .alloc = a };
			}
			struct alloc_ref *ref = &w->refs[slot_of[a]];
			ref->rd |= role_reads(o->role);
			ref->wr |= role_writes(o->role);
			if (o->bytes > ref->bytes)
				ref->bytes = o->bytes;
		}
		/* the read bytes are a part of the touched ones: their sum cannot overflow either */
		for (uint32_t k = w->ref_off[i]; k < nref; k++)
			if (!add_u64(touched, w->refs[k].bytes, &touched)) {
				char label[160];
				region_label(label, sizeof label, r, i);
				return err_set(err, -EOVERFLOW, "%s: operand bytes overflow 64 bits", label);
			}
	}
	w->ref_off[w->n] = nref;
	w->n_allocs = n_allocs;
	return 0;
}

/* Σ bytes of the distinct allocations region i reads (reads_only) or touches. */
static uint64_t region_bytes(const struct placement_work *w, size_t i, bool reads_only)
{
	uint64_t sum = 0;

	for (uint32_t k = w->ref_off[i]; k < w->ref_off[i + 1]; k++)
		if (!reads_only || w->refs[k].rd)
			sum += w->refs[k].bytes;
	return sum;
}

/* The metrics of region i alone; its read bytes are summed only when BW_read rests on them. */
static void region_metrics_of(const struct placement_work *w, size_t i, struct unit_metrics *m)
{
	const struct placement_region *r = &w->regions[i];
	bool by_bytes = !r->have_n_rd && !r->have_bw_read_estimate && r->evidence == PL_EVIDENCE_ESTIMATE;

	region_metrics(r, &w->p, by_bytes ? region_bytes(w, i, true) : 0, m);
}

/* ------------------------------------------------------------------ units */

static uint64_t block_outer(const struct placement_region *r)
{
	if (r->n_outer > 0)
		return r->n_outer;
	return r->n_par == r->n_total ? 1 : r->n_par;
}

static uint64_t div_ceil(uint64_t a, uint64_t b)
{
	return a / b + (a % b != 0);
}

/*
 * Loop granularity: one unit per region, decided on the region's metrics.
 * Block granularity (doc/design.md §3): each innermost loop body judged alone; per execution its time and
 * counts are the nest's divided by the outer trip count n_outer (so BW_read and f_store, being
 * ratios, are the nest's; T_host, N_total and N_par shrink by n_outer, N_par at least 1).
 * Neither is stored: the metrics are taken again from the region whenever it is decided.
 * Returns the blocks per nest execution (1 at loop granularity).
 */
static uint64_t region_unit_metrics(const struct placement_work *w, size_t i, struct unit_metrics *m)
{
	const struct placement_region *r = &w->regions[i];
	uint64_t outer = w->gran == PL_GRAN_BLOCK ? block_outer(r) : 1;

	region_metrics_of(w, i, m);
	if (outer > 1) {
		m->t_host /= (double)outer;
		m->n_total = (double)div_ceil(r->n_total, outer);
		m->n_par = (double)div_ceil(r->n_par, outer);
	}
	return outer;
}

/*
 * Operator granularity (doc/design.md §3; the paper's operator-level configuration): the nests of one
 * source operator are aggregated and decided together.  Members may sit under different loops, so
 * sums are weighted by trip(r)/trip_g, trip_g the smallest member trip (one operator execution):
 * with equal trips these are plain sums.  T_host, N_total, n_rd, c_* are summed; N_par is the
 * minimum; BW_read = Σ read bytes / Σ T_host over the members (counters where every member has
 * them, else estimated); f_store from the summed cycle counts; the relative spread is the members'
 * weighted by their time (their noise taken as moving together; a member without one adds none).
 * A region without an operator name is a group of its own.
 */
static void units_per_operator(struct placement_work *w)
{
	size_t cap = w->op_cap;
	uint32_t *slots = w->op_slots;
	uint64_t *trip_g = w->op_trip;
	double *sum = w->op_sum;
	uint8_t *mixed = w->op_mixed;

	for (size_t k = 0; k < cap; k++)
		slots[k] = UINT32_MAX;

	/* pass 1: group membership, smallest trip, weakest evidence */
	w->n_units = 0;
	for (size_t i = 0; i < w->n; i++) {
		const struct placement_region *r = &w->regions[i];
		uint32_t u = (uint32_t)w->n_units;

		if (r->op) {
			size_t h = hash_str(r->op) & (cap - 1);
			while (slots[h] != UINT32_MAX && strcmp(w->regions[w->unit_first[slots[h]]].op, r->op) != 0)
				h = (h + 1) & (cap - 1);
			if (slots[h] == UINT32_MAX)
				slots[h] = u;
			u = slots[h];
		}
		if (u == w->n_units) {
			w->n_units++;
			mixed[u] = false;
			memset(&sum[4 * u], 0, 4 * sizeof *sum);
			w->unit_first[u] = (uint32_t)i;
			w->unit_size[u] = 0;
			trip_g[u] = r->trip;
			/* t_host, n_total, bw and f_store start as the sums of pass 2 */
			w->unit_m[u] = (struct unit_metrics){ .n_par = (double)r->n_par,
							      .evidence = r->evidence,
							      .b_cpu_source = r->b_cpu_source };
		}
		if (r->b_cpu_source != w->unit_m[u].b_cpu_source)
			mixed[u] = true;
		w->unit_of[i] = u;
		w->unit_size[u]++;
		if (r->trip < trip_g[u])
			trip_g[u] = r->trip;
		if ((double)r->n_par < w->unit_m[u].n_par)
			w->unit_m[u].n_par = (double)r->n_par;
	}

	/* pass 2: weighted sums, in the unit's metrics: t_host Σ T_host, n_total Σ N_total, bw Σ read
	   bytes, f_store Σ c_store; and sum[4u + k]: 0 T_host with BW, 1 backend total, 2 members with
	   BW, 3 members with stores */
	for (size_t i = 0; i < w->n; i++) {
		const struct placement_region *r = &w->regions[i];
		uint32_t u = w->unit_of[i];
		struct unit_metrics rm, *m = &w->unit_m[u];
		double wt = (double)r->trip / (double)trip_g[u], *s = &sum[4 * u];

		region_metrics_of(w, i, &rm);
		/* members measured on hosts of different B_cpu: with a derived θ, each member's read
		 * bandwidth is rescaled to this host (BW·B_cpu/B_cpu_source), and θ is this host's */
		double scale = mixed[u] && w->p.theta <= 0 && r->b_cpu_source > 0
				       ? w->p.b_cpu / r->b_cpu_source : 1;
		m->t_host += wt * r->t_host;
		m->spread += wt * r->t_host * rm.spread;
		m->n_total += wt * (double)r->n_total;
		if (!isnan(rm.bw)) {
			m->bw += wt * rm.bw * scale * r->t_host;
			s[0] += wt * r->t_host;
			s[2] += 1;
			m->bw_estimated |= rm.bw_estimated;
		}
		if (!isnan(rm.f_store)) {
			m->f_store += wt * r->c_store;
			s[1] += wt * (r->c_be1 + r->c_be2 + r->c_be3 + r->c_store);
			s[3] += 1;
		}
		if (evidence_strength(rm.evidence) < evidence_strength(m->evidence))
			m->evidence = rm.evidence;
	}
	for (size_t u = 0; u < w->n_units; u++) {
		struct unit_metrics *m = &w->unit_m[u];
		const double *s = &sum[4 * u];
		double members = (double)w->unit_size[u];

		if (mixed[u])
			m->b_cpu_source = 0;
		m->spread = m->t_host > 0 ? m->spread / m->t_host : 0;
		/* a member without the metric makes the group's metric not evaluable */
		m->bw = s[2] == members && s[0] > 0 ? m->bw / s[0] : NAN;
		if (isnan(m->bw))
			m->bw_estimated = false;
		m->f_store = s[3] == members && s[1] > 0 ? m->f_store / s[1] : NAN;
	}
}

/* ------------------------------------------------------------------ movement */

/*
 * Data movement of a placement (doc/design.md §3, the paper's Eq. 8):
 *   T_move = N_region·T_ctx + fetch/B_rd + flush/B_wb
 * Regions are taken in program order (order, then array index).  Operands are identified by
 * allocation; within a region an allocation is one entry, sized by its largest operand, with the
 * union of the operands' roles.
 *
 * N_region: a maximal run of consecutive PIM regions is one segment and costs 2 transitions
 * (doc/design.md §3: per segment, not multiplied by the trip counts).  At block granularity every
 * execution of a block is a separate transition: 2·trip·n_outer per PIM nest, and no two
 * executions share a segment.
 *
 * "upper" (the paper's bound).  For each PIM region r, per execution (× trip(r)):
 *   - an allocation r writes (out or inout, including an in-place read+write) is charged once,
 *     to flush: the paper counts an in-place buffer "as one transfer instead of two", and we keep
 *     the write-back as that one transfer, as the producer→consumer rule below also does;
 *   - an allocation r only reads is charged to fetch, unless a PIM region earlier in the same
 *     segment wrote it ("a buffer written by a producer and read back by a consumer in the same
 *     segment counts once": the producer's flush, not the consumer's fetch);
 *   - nothing else is deduplicated: two PIM regions of a segment reading one input each fetch
 *     it, and a buffer produced in one segment and read in the next is fetched again.
 * Worked example (trip 1, all on PIM unless said, A=100 B, B=200 B, C=50 B):
 *   r0: ins(A) outs(B)    segment 1   fetch A 100, flush B 200
 *   r1: ins(B) outs(B)    segment 1   in place: B once, to flush 200 (the read-back of r0's B
 *                                     is not fetched; r1's own write is charged)
 *   r2: ins(B, C) outs(C) segment 1   B produced in segment: no fetch; C in place: flush 50
 *   r3: host
 *   r4: ins(B) outs(A)    segment 2   B fetched again 200; flush A 100
 *   fetch = 100 + 200 = 300, flush = 200 + 200 + 50 + 100 = 550, N_region = 4.
 *
 * "resident" (tighter; doc/design.md §3 "a buffer produced and consumed on PIM is never moved, a
 * loop-invariant input is not multiplied by the trip count").  Walk all regions (host and PIM) in
 * program order keeping, per allocation, where its valid copy is: HOST (initially: model inputs
 * and weights live on the host), PIM, or BOTH.
 *   - a PIM region reading a HOST-only allocation it does not also write fetches it (→ BOTH).
 *     Multiplicity: 1 if no region of the model writes the allocation (read-only, hence loop
 *     invariant); else min(trip(r), trip(last writer)), or trip(r) when its writer comes later in
 *     program order (it rewrites it each iteration of a shared loop);
 *   - a PIM region writing an allocation makes it PIM-only; an in-place read+write is the same
 *     single transfer as in "upper", so it charges no fetch — its write-back is charged if the
 *     host ever needs it;
 *   - a host region reading a PIM-only allocation charges a flush to its last PIM writer
 *     (→ BOTH), multiplicity min(trip(host reader), trip(writer));
 *   - a host region writing an allocation makes it HOST-only;
 *   - at the end, a PIM-only allocation that no region read after its last write is a model
 *     output the host reads once: one flush.  One that was read after its last write (produced
 *     and consumed on PIM) is never moved.
 * Every resident charge has a matching upper charge at least as large, so resident <= upper.
 * Same example, resident: r0 fetches A 100; r1, r2 charge nothing (B is PIM-only, C in place);
 * r3 (host) touches nothing; r4 writes A.  End: B was read after its write (never moved), C was
 * not read after r2 wrote it (flush 50), A was not read after r4 (flush 100).
 *   fetch = 100, flush = 150, N_region = 4.
 */
enum { A_HOST, A_PIM, A_BOTH, A_STATE = 3, A_READ = 4, A_WRITTEN = 8 };

/* Region at position k of program order. */
static size_t in_order(const struct placement_work *w, size_t k)
{
	return w->order ? w->order[k] : k;
}

static int move_charge(uint64_t *acc, uint64_t *region_acc, uint64_t bytes, uint64_t mult)
{
	uint64_t v;

	if (!mul_u64(bytes, mult, &v) || !add_u64(*acc, v, acc) || !add_u64(*region_acc, v, region_acc))
		return -EOVERFLOW;
	return 0;
}

static int movement_upper(struct placement_work *w, struct placement_estimate *e)
{
	struct placement_movement *mv = &e->move;
	uint32_t seg = 0, *a_seg = w->a_x;
	bool in_seg = false;

	memset(a_seg, 0, w->n_allocs * sizeof *a_seg);
	for (size_t k = 0; k < w->n; k++) {
		size_t i = in_order(w, k);
		const struct placement_region *r = &w->regions[i];

		if (e->side[i] != PL_PIM) {
			in_seg = false;
			continue;
		}
		if (w->gran == PL_GRAN_BLOCK) {
			/* every execution its own segment: no producer→consumer reuse either */
			in_seg = false;
			seg++;
		} else if (!in_seg) {
			in_seg = true;
			seg++;
			mv->segments++;
			mv->transitions += 2;
		}
		for (uint32_t j = w->ref_off[i]; j < w->ref_off[i + 1]; j++) {
			const struct alloc_ref *a = &w->refs[j];
			int rc = 0;

			if (a->wr)
				rc = move_charge(&mv->flush_bytes, &e->flush_bytes[i], a->bytes, r->trip);
			else if (a->rd && a_seg[a->alloc] != seg)
				rc = move_charge(&mv->fetch_bytes, &e->fetch_bytes[i], a->bytes, r->trip);
			if (rc < 0)
				return rc;
		}
		for (uint32_t j = w->ref_off[i]; j < w->ref_off[i + 1]; j++)
			if (w->refs[j].wr)
				a_seg[w->refs[j].alloc] = seg;
	}
	return 0;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static int movement_resident(struct placement_work *w, struct placement_estimate *e)
{
	struct placement_movement *mv = &e->move;
	uint32_t *a_wregion = w->a_x;
	uint8_t *f = w->a_flags;
	bool in_seg = false;
	int rc;

	for (size_t a = 0; a < w->n_allocs; a++) {
		f[a] &= A_WRITTEN; /* A_HOST, not read since */
		w->a_wtrip[a] = 0;
		a_wregion[a] = UINT32_MAX;
	}

	for (size_t k = 0; k < w->n; k++) {
		size_t i = in_order(w, k);
		const struct placement_region *r = &w->regions[i];
		bool pim = e->side[i] == PL_PIM;

		if (!pim)
			in_seg = false;
		else if (w->gran != PL_GRAN_BLOCK && !in_seg) {
			in_seg = true;
			mv->segments++;
			mv->transitions += 2;
		}
		for (uint32_t j = w->ref_off[i]; j < w->ref_off[i + 1]; j++) {
			const struct alloc_ref *ref = &w->refs[j];
			uint32_t a = ref->alloc;
			unsigned state = f[a] & A_STATE;

			if (ref->rd) {
				if (pim && !ref->wr && state == A_HOST) {
					uint64_t mult = !(f[a] & A_WRITTEN) ? 1
							: w->a_wtrip[a] ? min_u64(r->trip, w->a_wtrip[a])
									: r->trip;
					rc = move_charge(&mv->fetch_bytes, &e->fetch_bytes[i], ref->bytes, mult);
					if (rc < 0)
						return rc;
					state = A_BOTH;
				} else if (!pim && state == A_PIM) {
					rc = move_charge(&mv->flush_bytes, &e->flush_bytes[a_wregion[a]], ref->bytes,
							 min_u64(r->trip, w->a_wtrip[a]));
					if (rc < 0)
						return rc;
					state = A_BOTH;
				}
				f[a] = (uint8_t)((f[a] & A_WRITTEN) | A_READ | state);
			}
			if (ref->wr) {
				f[a] = (uint8_t)((f[a] & A_WRITTEN) | (pim ? A_PIM : A_HOST));
				w->a_wtrip[a] = r->trip;
				a_wregion[a] = pim ? (uint32_t)i : UINT32_MAX;
			}
		}
	}
	/* model outputs left on PIM come back once; the flush is sized by the last writer's operand */
	for (size_t i = 0; i < w->n; i++) {
		if (e->side[i] != PL_PIM)
			continue;
		for (uint32_t j = w->ref_off[i]; j < w->ref_off[i + 1]; j++) {
			const struct alloc_ref *ref = &w->refs[j];
			uint32_t a = ref->alloc;

			if (ref->wr && a_wregion[a] == i && (f[a] & (A_STATE | A_READ)) == A_PIM) {
				rc = move_charge(&mv->flush_bytes, &e->flush_bytes[i], ref->bytes, 1);
				if (rc < 0)
					return rc;
				f[a] = (uint8_t)((f[a] & A_WRITTEN) | A_BOTH); /* once */
			}
		}
	}
	return 0;
}

static int movement_run(struct placement_work *w, struct placement_estimate *e, struct pim_error *err)
{
	struct placement_movement *mv = &e->move;
	const struct placement_params *p = &w->p;
	int rc;

	memset(mv, 0, sizeof *mv);
	mv->model = w->model;
	if (w->gran == PL_GRAN_BLOCK) {
		for (size_t i = 0; i < w->n; i++) {
			if (e->side[i] != PL_PIM)
				continue;
			/* executions = trip·n_outer, which estimate_one found to fit 64 bits */
			uint64_t x = w->regions[i].trip * block_outer(&w->regions[i]), t2;
			if (!mul_u64(x, 2, &t2) || !add_u64(mv->segments, x, &mv->segments) ||
			    !add_u64(mv->transitions, t2, &mv->transitions))
				return err_set(err, -EOVERFLOW, "placement: transition count overflows 64 bits");
		}
	}
	rc = w->model == PL_MOVE_RESIDENT ? movement_resident(w, e) : movement_upper(w, e);
	if (rc < 0)
		return err_set(err, rc, "placement: movement bytes overflow 64 bits (%s model)",
			       placement_movement_model_name(w->model));
	mv->t_switch = (double)mv->transitions * p->t_ctx;
	mv->t_fetch = (double)mv->fetch_bytes / placement_b_rd(p);
	mv->t_flush = (double)mv->flush_bytes / placement_b_wb(p);
	mv->t_move = mv->t_switch + mv->t_fetch + mv->t_flush;
	return 0;
}

/* ------------------------------------------------------------------ estimate */

/*
 * T_pim(r) = max(N_total·I_min/(N_core·f_pim), bytes(r)/B_pim), B_pim = N_core·b_pim_core, or the
 * measured time when a client reported one (doc/design.md §3).  bytes(r): the distinct allocations r
 * touches.  Per nest execution; block granularity splits it n_outer ways and runs n_outer times
 * as often, which is the same total.
 */
static double region_t_pim(const struct placement_region *r, const struct placement_params *p,
			   uint64_t touched_bytes, enum placement_t_pim_term *term)
{
	double tc, tm;

	if (r->have_t_pim) {
		*term = PL_TPIM_MEASURED;
		return r->t_pim_measured;
	}
	tc = (double)r->n_total * p->i_min / (p->n_core * p->f_pim);
	tm = (double)touched_bytes / (p->n_core * p->b_pim_core);
	/* a tie is charged to the lower bound: the assumed bandwidth did not raise it */
	*term = tm > tc ? PL_TPIM_BANDWIDTH : PL_TPIM_COMPUTE;
	return tc >= tm ? tc : tm;
}

/*
 * What deciding region i takes whatever the core count: the metrics of its unit (*own holds
 * them at loop and block granularity, which recompute them from the region; operator
 * granularity keeps them per unit), and in d its unit, unit size and blocks per execution.
 */
static const struct unit_metrics *region_unit(const struct placement_work *w, size_t i, struct unit_metrics *own,
					      struct placement_decision *d)
{
	if (w->gran == PL_GRAN_OPERATOR) {
		uint32_t u = w->unit_of[i];
		d->unit = w->unit_first[u];
		d->unit_size = w->unit_size[u];
		d->n_outer = 1;
		return &w->unit_m[u];
	}
	d->unit = i;
	d->unit_size = 1;
	d->n_outer = region_unit_metrics(w, i, own);
	return own;
}

/*
 * Region i's decision at the core count of pc, on its unit's metrics m (region_unit), with its
 * costs but no movement bytes: the one place a decision is made, for the estimate and for
 * placement_decision_get() alike.  *touched: the region's touched bytes, summed at the first
 * need (UINT64_MAX until then).  -EOVERFLOW when its executions overflow 64 bits.
 */
static int decision_fill(const struct placement_work *w, const struct placement_params *pc, size_t i,
			 const struct unit_metrics *m, uint64_t *touched, struct placement_decision *d)
{
	const struct placement_region *r = &w->regions[i];

	placement_decide_unit(m, pc, d);
	d->region = i;
	d->region_id = r->id;
	d->t_pim = 0;
	d->t_pim_is_measured = false;
	d->t_pim_term = PL_TPIM_NONE;
	d->fetch_bytes = d->flush_bytes = 0;
	d->t_host = r->t_host * (double)r->trip;
	if (d->side == PL_PIM) {
		if (*touched == UINT64_MAX && !r->have_t_pim)
			*touched = region_bytes(w, i, false);
		d->t_pim = region_t_pim(r, pc, *touched, &d->t_pim_term) * (double)r->trip;
		d->t_pim_is_measured = d->t_pim_term == PL_TPIM_MEASURED;
	}
	return mul_u64(r->trip, d->n_outer, &d->executions) ? 0 : -EOVERFLOW;
}

/* Adds decision d of region i to estimate e. */
static void estimate_add(struct placement_estimate *e, size_t i, const struct placement_decision *d,
			 double *t_pim_side_host)
{
	e->side[i] = (uint8_t)d->side;
	e->fetch_bytes[i] = e->flush_bytes[i] = 0;
	e->t_cpu += d->t_host;
	if (d->marginal) {
		e->n_marginal++;
		e->n_marginal_pim += d->side == PL_PIM;
		for (int c = 0; c < PL_N_COND; c++)
			e->n_marginal_on[c] += (d->marginal_on >> c) & 1;
	}
	if (d->side == PL_PIM) {
		e->t_pim += d->t_pim;
		e->t_pim_by[d->t_pim_term] += d->t_pim;
		e->n_pim_by[d->t_pim_term]++;
		*t_pim_side_host += d->t_host;
		e->n_offloaded++;
	} else {
		e->t_host += d->t_host;
		if (d->cond[PL_C1].state != PL_COND_TRUE || d->cond[PL_C2].state != PL_COND_TRUE)
			e->n_rejected_stage1++;
		else
			e->n_rejected_stage2++;
	}
}

/* Movement and the end-to-end figures of estimate e, once every region is added to it. */
static int estimate_finish(struct placement_work *w, struct placement_estimate *e, double t_pim_side_host,
			   struct pim_error *err)
{
	int rc = movement_run(w, e, err);

	if (rc < 0)
		return rc;
	e->t_hybrid = e->t_host + e->t_pim + e->move.t_move;
	e->speedup = e->t_hybrid > 0 ? e->t_cpu / e->t_hybrid : 1.0;
	e->captured_share = e->t_cpu > 0 ? t_pim_side_host / e->t_cpu : 0;
	e->residual_share = e->t_cpu > 0 ? e->t_host / e->t_cpu : 1;
	/* depthwise_conv reasoning: with the PIM and movement terms at zero, 1/residual remains */
	e->bound = e->residual_share > 0 ? 1.0 / e->residual_share : HUGE_VAL;
	/* N_core → ∞ with this placement: estimated T_pim → 0, measured T_pim and T_move stay */
	double floor_t = e->t_host + e->t_pim_by[PL_TPIM_MEASURED] + e->move.t_move;
	e->bound_movement = floor_t > 0 ? e->t_cpu / floor_t : e->t_cpu > 0 ? HUGE_VAL : 1.0;
	return 0;
}

/*
 * Every estimate of the run, at the core counts cores[0..n_estimates) (res->n_estimates set):
 * each region's unit metrics are taken once and decided at every core count (up to CHUNK at a
 * time), then each estimate's movement is walked.
 */
static int estimate_all(struct placement_work *w, struct placement_result *res, const double *cores,
			struct pim_error *err)
{
	enum { CHUNK = 16 };
	struct placement_params pc[CHUNK];
	double side_host[CHUNK];
	size_t n_counts = res->n_estimates;

	for (size_t k0 = 0; k0 < n_counts; k0 += CHUNK) {
		size_t nk = n_counts - k0 < CHUNK ? n_counts - k0 : CHUNK;

		for (size_t k = 0; k < nk; k++) {
			pc[k] = w->p;
			pc[k].n_core = res->estimates[k0 + k].n_core = cores[k0 + k];
			side_host[k] = 0;
		}
		for (size_t i = 0; i < w->n; i++) {
			struct placement_decision d;
			struct unit_metrics own;
			const struct unit_metrics *m = region_unit(w, i, &own, &d);
			uint64_t touched = UINT64_MAX;

			for (size_t k = 0; k < nk; k++) {
				if (decision_fill(w, &pc[k], i, m, &touched, &d) < 0)
					return err_set(err, -EOVERFLOW, "placement: executions of region %u "
						       "overflow 64 bits", w->regions[i].id);
				estimate_add(&res->estimates[k0 + k], i, &d, &side_host[k]);
			}
		}
		for (size_t k = 0; k < nk; k++) {
			int rc = estimate_finish(w, &res->estimates[k0 + k], side_host[k], err);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

void placement_decision_get(const struct placement_result *r, size_t estimate, size_t region,
			    struct placement_decision *d)
{
	const struct placement_estimate *e = &r->estimates[estimate];
	struct placement_params pc = r->work->p;
	struct unit_metrics own;
	uint64_t touched = UINT64_MAX;

	pc.n_core = e->n_core;
	memset(d, 0, sizeof *d);
	const struct unit_metrics *m = region_unit(r->work, region, &own, d);
	(void)decision_fill(r->work, &pc, region, m, &touched, d); /* its executions fitted in the run */
	d->fetch_bytes = e->fetch_bytes[region];
	d->flush_bytes = e->flush_bytes[region];
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
