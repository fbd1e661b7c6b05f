/* SPDX-License-Identifier: MIT */
/*
 * placement_units.c: a run's working state and its decision units (placement.h).  The hash
 * maps (allocation id to dense index, operator name to group), the validation of a region,
 * the index of each region's distinct allocations with their roles, and the units of each
 * granularity: a loop is its own unit, a block is counted per outer iteration, an operator
 * groups the regions of one source op with summed metrics.
 */
#include "placement_internal.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------ hash maps */

/*
 * Open addressing, power-of-two capacity, at most half full.  Two maps: allocation id → dense
 * index (movement needs per-allocation state) and operator name → group (operator granularity).
 */
size_t table_capacity(size_t n)
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

/* ------------------------------------------------------------------ working state */

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

int cmp_order(const void *a, const void *b, void *arg)
{
	const struct placement_region *R = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (R[x].order != R[y].order)
		return R[x].order < R[y].order ? -1 : 1;
	return x < y ? -1 : x > y;
}

void alloc_map_size(struct alloc_map *m, size_t n_ops, uint32_t max_id)
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
int work_index_allocations(struct placement_work *w, struct pim_error *err)
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
uint64_t region_bytes(const struct placement_work *w, size_t i, bool reads_only)
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

uint64_t block_outer(const struct placement_region *r)
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
uint64_t region_unit_metrics(const struct placement_work *w, size_t i, struct unit_metrics *m)
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
void units_per_operator(struct placement_work *w)
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
