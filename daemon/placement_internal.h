/* SPDX-License-Identifier: MIT */
/*
 * placement_internal.h: what the files of the placement engine share, and nothing outside it
 * uses.  placement.c holds the parameters, the rule (C1..C4) and the entry point;
 * placement_units.c a run's working state and decision units; placement_movement.c the
 * movement models and the estimate; placement_reason.c the explanation of a decision.  The
 * names have hidden visibility: no program or library linked with pimd's core sees them.
 */
#ifndef PIMD_PLACEMENT_INTERNAL_H
#define PIMD_PLACEMENT_INTERNAL_H

#include "placement.h"

#pragma GCC visibility push(hidden)

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


/* Distinct allocations of a region with the union of their roles and the largest operand size. */
struct alloc_ref {
	uint32_t alloc;
	bool rd, wr;
	uint64_t bytes;
};

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


/* Allocation state of the "resident" movement model (placement_movement.c), in a_flags. */
enum { A_HOST, A_PIM, A_BOTH, A_STATE = 3, A_READ = 4, A_WRITTEN = 8 };

/* placement.c: the rule and the metrics of one region. */
int evidence_strength(enum placement_evidence e);
void placement_decide_unit(const struct unit_metrics *m, const struct placement_params *p,
	struct placement_decision *d);
bool role_reads(enum placement_role r);
bool role_writes(enum placement_role r);
void region_metrics(const struct placement_region *r, const struct placement_params *p,
	uint64_t unique_read_bytes, struct unit_metrics *m);

/* placement_units.c: the working state and the decision units. */
size_t table_capacity(size_t n);
int cmp_order(const void *a, const void *b, void *arg);
void alloc_map_size(struct alloc_map *m, size_t n_ops, uint32_t max_id);
int work_index_allocations(struct placement_work *w, struct pim_error *err);
uint64_t region_bytes(const struct placement_work *w, size_t i, bool reads_only);
uint64_t block_outer(const struct placement_region *r);
uint64_t region_unit_metrics(const struct placement_work *w, size_t i, struct unit_metrics *m);
void units_per_operator(struct placement_work *w);

/* placement_movement.c: movement and the estimates. */
int estimate_all(struct placement_work *w, struct placement_result *res, const double *cores,
	struct pim_error *err);

#pragma GCC visibility pop

#endif
