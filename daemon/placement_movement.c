/* SPDX-License-Identifier: MIT */
/*
 * placement_movement.c: the data-movement bound and the end-to-end estimate (placement.h,
 * doc/design.md §3).  Movement between host and PIM memory for a placement, by Eq. 8
 * ("upper") or the tighter "resident" model, then T_pim, T_hybrid, the speedup and the shares
 * of each estimate, and the decision of one region read back from a result.
 */
#include "placement_internal.h"

#include <math.h>
#include <string.h>

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
int estimate_all(struct placement_work *w, struct placement_result *res, const double *cores,
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
