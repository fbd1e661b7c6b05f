/* SPDX-License-Identifier: MIT */
/*
 * placement.h: the Torch-PIM placement rule (doc/design.md §3) as a pure function over plain structs.
 *
 * One call, placement_run(), takes the profiled regions (loop nests) of a model and the platform
 * parameters, and returns for each requested PIM core count:
 *   - per region: C1..C4 (state, the two values compared and the measured noise between them),
 *     the decision, whether that noise can change it (marginal), the evidence;
 *   - the data-movement cost of the whole placement (Eq. 8, "upper", or the tighter "resident"
 *     model), always labelled with the model that produced it;
 *   - the end-to-end estimate: T_hybrid, speedup, captured and residual share, attainable bound.
 *
 * No I/O, no logging, no global state (reentrant); memory is one block per result, holding the
 * run's working arrays too.  A result keeps per region only what cannot be recomputed from the
 * region in a few operations (its side and movement bytes per core count, its distinct
 * allocations); placement_decision_get() rebuilds a region's whole decision from them.  Errors
 * are a negative errno plus a message in struct pim_error naming the region or parameter at
 * fault.
 */
#ifndef PIMD_PLACEMENT_H
#define PIMD_PLACEMENT_H

#include "util.h"

/* How an operand uses its allocation. */
enum placement_role {
	PL_IN,    /* ins(r): read */
	PL_OUT,   /* outs(r): written */
	PL_INOUT, /* read and written (an outs operand that is also read, e.g. an accumulator) */
};

/* One operand of a region, already resolved to its allocation (manifest, §2). */
struct placement_operand {
	uint32_t alloc_id; /* allocation the operand resolves to after bufferization */
	uint64_t bytes;    /* bytes of the operand (shape product × element width) */
	enum placement_role role;
};

/* Where the metrics of a region come from (doc/design.md §3 "evidence quality", §4.4). */
enum placement_evidence {
	PL_EVIDENCE_NONE,     /* nothing measured: Stage 2 cannot hold */
	PL_EVIDENCE_COUNTERS, /* hardware counters on this host */
	PL_EVIDENCE_ESTIMATE, /* timing backend: T_host measured, BW_read estimated */
	PL_EVIDENCE_IMPORTED, /* counter data measured elsewhere (perf stat CSV) */
};

/*
 * One loop nest with its manifest facts and profile metrics (doc/design.md §3 table).  The
 * fields are ordered so that a region takes 160 bytes rather than 200 with each flag beside its
 * value: pimd holds a million of them to place a model at the documented limit.
 */
struct placement_region {
	uint32_t id;
	uint32_t order;   /* program order; ties keep array order */
	enum placement_evidence evidence;
	bool have_n_rd;             /* n_rd is known */
	bool have_bw_read_estimate; /* bw_read_estimate is known */
	bool have_store;            /* c_store and c_be1..3 are known */
	bool have_t_pim;            /* t_pim_measured is known */
	const char *name; /* may be NULL */
	const char *op;   /* source operator instance (not the linalg op kind): regions sharing it form
			     one operator group; NULL: a group of its own */
	uint64_t n_par;   /* N_par: product of the parallel dims */
	uint64_t n_total; /* N_total: product of all dims */
	uint64_t trip;    /* trip(r): product of enclosing trip counts (>= 1) */
	/*
	 * Block granularity only: executions of the nest's innermost loop per nest execution (the
	 * trip count of the nest's own loops outside it).  0 = derive: 1 when N_par == N_total (the
	 * scf.parallel is the innermost loop), else N_par (one scf.parallel around one scf.for, the
	 * shape convert-linalg-to-parallel-loops gives a single-reduction nest).
	 */
	uint64_t n_outer;
	const struct placement_operand *operands;
	size_t n_operands;

	double t_host; /* T_host: seconds, one execution (median) */
	double n_rd; /* off-core data read requests, one execution */
	double bw_read_estimate; /* B/s, used for C3 when n_rd is missing (timing backend) */
	double c_store, c_be1, c_be2, c_be3; /* cycles, one execution */
	double t_pim_measured; /* seconds, one execution on PIM, reported by a client */
	/*
	 * B_cpu (B/s) of the host whose counts these are, when not this one (imported counts):
	 * a derived θ (theta_ratio·B_cpu) for this region uses it, since BW_read was measured
	 * against that host's memory.  0: this host's B_cpu (params->b_cpu).
	 */
	double b_cpu_source;
	/*
	 * The measured noise of this region's metrics: the relative spread of T_host over its
	 * repetitions, (largest − smallest) / median (metrics.c).  BW_read and f_store come from the
	 * same repetitions and take the same spread (pimd keeps no spread of the counts).  0: not
	 * known (one repetition, imported counts): no decision of the region is then marginal.
	 */
	double t_host_spread;
};

/*
 * Platform parameters (doc/design.md §3).  Zero in theta, b_rd, b_wb means "derive": θ = theta_ratio·B_cpu,
 * B_rd = B_wb = B_cpu.
 */
struct placement_params {
	double n_core;      /* N_core: PIM cores (default 128: one UPMEM DIMM) */
	double f_pim;       /* f_pim: Hz (default 350e6: UPMEM DPU v1A) */
	double i_min;       /* I_min: instructions per iteration, lower bound (default 1) */
	double t_ctx;       /* T_ctx: seconds per host<->PIM switch (default 10e-6, an assumption) */
	double b_cpu;       /* B_cpu: host read bandwidth, B/s (default 16.754e9, the paper's) */
	double theta;       /* θ: B/s; <= 0 means theta_ratio·B_cpu */
	double theta_ratio; /* default 0.12 (θ = 2.0 GB/s at the paper's B_cpu) */
	double sigma;       /* σ: store-bound fraction threshold (default 0.4) */
	double b_rd, b_wb;  /* movement bandwidths, B/s; <= 0 means B_cpu */
	double b_pim_core;  /* PIM-side bandwidth per core, B/s; B_pim = N_core·b_pim_core */
	double line_bytes;  /* L: cache line (default 64) */
	/*
	 * The measured noise of B_cpu, hence of a derived θ: its relative spread, (largest −
	 * smallest) / the figure, as its probe saw it move between rounds.  Default 0: not known,
	 * and θ is then taken as exact (an explicit theta always is).
	 */
	double b_cpu_spread;
};

struct placement_params placement_params_default(void);
/* 0, or -EINVAL with a message naming the first bad parameter and its value. */
int placement_params_validate(const struct placement_params *p, struct pim_error *err);
/* Effective values after "<= 0 means derive". */
double placement_theta(const struct placement_params *p);
/* θ for counts measured on a host of bandwidth b_cpu_source (0: this host): an explicit theta
 * applies as given, a derived one is theta_ratio·b_cpu_source. */
double placement_theta_for(const struct placement_params *p, double b_cpu_source);
double placement_b_rd(const struct placement_params *p);
double placement_b_wb(const struct placement_params *p);

enum placement_granularity {
	PL_GRAN_LOOP,     /* per nest (default, Torch-PIM) */
	PL_GRAN_OPERATOR, /* nests of one source operator decided together */
	PL_GRAN_BLOCK,    /* each innermost loop body judged alone */
};

enum placement_movement_model {
	PL_MOVE_UPPER,    /* Eq. 8 as in the paper: an upper bound */
	PL_MOVE_RESIDENT, /* buffers stay resident on PIM; invariant inputs fetched once */
};

/* Return the enum value (>= 0) or -EINVAL for an unknown name. */
int placement_granularity_from_name(const char *name);
int placement_movement_model_from_name(const char *name);
const char *placement_granularity_name(enum placement_granularity g);
const char *placement_movement_model_name(enum placement_movement_model m);

enum placement_cond_state {
	PL_COND_FALSE,
	PL_COND_TRUE,
	PL_COND_NO_DATA, /* not evaluable: the metric is missing (lhs is NAN) */
	PL_COND_SKIPPED, /* not evaluated: Stage 1 failed (lhs/rhs still filled when known) */
};

enum { PL_C1, PL_C2, PL_C3, PL_C4, PL_N_COND };

/*
 * Marginal conditions and decisions (stable answers).  A value v with relative spread s is known
 * only as the interval v·(1 ± PLACEMENT_NOISE_K·s): with s the range of the repetitions over their
 * median and k = 1/2, the repetitions' own range centred on the median.  A condition is marginal
 * when its threshold's interval meets its value's, i.e. |lhs − rhs| <= noise with
 *   C1  noise = k·s·T_host                   (T_ctx and the compute term are exact)
 *   C2  never marginal                       (N_par and N_core are exact)
 *   C3  noise = k·(s·BW_read + s_B·θ)        (s_B = b_cpu_spread when θ = theta_ratio·B_cpu of
 *                                             this host, else 0: an explicit θ is exact)
 *   C4  noise = k·s·f_store                  (σ is exact)
 * A noise of 0 (spread not known) makes nothing marginal, nor does a metric not measured.  A
 * decision is marginal when moving its marginal conditions across their thresholds can change
 * its side; marginal_on names the conditions that can (C1 failing and C2 failing is not made
 * marginal by C1's noise, since C2 alone keeps it on the host).
 */
#define PLACEMENT_NOISE_K 0.5

struct placement_cond {
	enum placement_cond_state state;
	bool marginal;   /* |lhs − rhs| <= noise, noise > 0 */
	double lhs, rhs; /* C1: T_host vs T_ctx+N_total·I_min/(N_core·f_pim); C2: N_par vs N_core;
			    C3: BW_read vs θ (B/s); C4: f_store vs σ */
	double noise;    /* half-width of the band around rhs within which lhs is marginal; 0 unknown */
};

enum placement_side { PL_HOST, PL_PIM };

/*
 * Which term set a region's T_pim (doc/design.md §3: T_pim = max(compute, bytes/B_pim) or a measurement).
 * The two estimated terms are of different kinds, so the estimate says which one it rests on:
 * the compute term is a strict lower bound (every iteration issues at least I_min = 1
 * instruction), the bandwidth term rests on an assumed per-core PIM bandwidth (b_pim_core).
 */
enum placement_t_pim_term {
	PL_TPIM_NONE,      /* the region stays on the host */
	PL_TPIM_COMPUTE,   /* N_total·I_min/(N_core·f_pim): a lower bound */
	PL_TPIM_BANDWIDTH, /* bytes(r)/(N_core·b_pim_core): an assumed bandwidth */
	PL_TPIM_MEASURED,  /* a PIM time reported by a client */
	PL_TPIM_N_TERMS,
};
const char *placement_t_pim_term_name(enum placement_t_pim_term t); /* "compute", ... */

struct placement_decision {
	size_t region;     /* index into the caller's array */
	uint32_t region_id;
	size_t unit;       /* decision unit: the region itself, or the first member of its operator group */
	size_t unit_size;  /* regions deciding together (operator granularity), else 1 */
	uint64_t n_outer;  /* block granularity: blocks per nest execution, else 1 */
	enum placement_side side;
	struct placement_cond cond[PL_N_COND];
	enum placement_evidence evidence; /* weakest evidence behind the Stage-2 values */
	bool bw_estimated;                /* C3 used an estimated BW_read */
	bool theta_from_source;           /* C3's θ came from the measuring host's B_cpu */
	bool marginal;                    /* the noise of a condition can change the side */
	uint8_t marginal_on;              /* bit c (PL_C1..PL_C4): condition c's noise can */
	/* cost, totals over all executions */
	uint64_t executions; /* trip, or trip·n_outer at block granularity */
	double t_host;       /* T_host·trip */
	double t_pim;        /* T_pim·trip when on PIM, else 0 */
	bool t_pim_is_measured;
	enum placement_t_pim_term t_pim_term; /* which term set t_pim */
	uint64_t fetch_bytes, flush_bytes; /* movement charged to this region */
};

struct placement_movement {
	enum placement_movement_model model;
	uint64_t segments;    /* maximal runs of consecutive PIM units */
	uint64_t transitions; /* N_region */
	uint64_t fetch_bytes, flush_bytes;
	double t_switch, t_fetch, t_flush, t_move; /* N_region·T_ctx, fetch/B_rd, flush/B_wb, sum */
};

/* Everything decided and estimated for one PIM core count. */
struct placement_estimate {
	double n_core;
	/* per region, in the caller's order (placement_decision_get() gives the whole decision) */
	uint8_t *side;                       /* enum placement_side */
	uint64_t *fetch_bytes, *flush_bytes; /* movement charged to the region */
	size_t n_offloaded;                   /* regions on PIM */
	size_t n_rejected_stage1, n_rejected_stage2;
	size_t n_marginal, n_marginal_pim;    /* marginal decisions (regions), of which on PIM */
	size_t n_marginal_on[PL_N_COND];      /* marginal decisions that condition c can change */
	struct placement_movement move;
	double t_cpu;          /* Σ_all T_host·trip: the all-CPU time */
	double t_host;         /* Σ_host T_host·trip: the residual */
	double t_pim;          /* Σ_PIM T_pim·trip */
	double t_pim_by[PL_TPIM_N_TERMS]; /* t_pim split by the term that set each region's T_pim */
	size_t n_pim_by[PL_TPIM_N_TERMS]; /* regions on PIM by that term */
	double t_hybrid;       /* t_host + t_pim + move.t_move */
	double speedup;        /* t_cpu / t_hybrid: an estimate (see enum placement_t_pim_term) */
	double captured_share; /* Σ_PIM T_host·trip / t_cpu */
	double residual_share; /* t_host / t_cpu */
	double bound;          /* 1/residual_share: the speedup if PIM and movement took no time;
				  HUGE_VAL when nothing stays */
	/*
	 * The same placement with ever more PIM cores: the estimated T_pim terms shrink as 1/N_core
	 * but T_move does not, so the speedup tends to t_cpu / (t_host + measured T_pim + t_move).
	 * HUGE_VAL when that sum is 0.  Never above bound.
	 */
	double bound_movement;
};

struct placement_query {
	enum placement_granularity granularity;
	enum placement_movement_model movement;
	const double *core_counts; /* decide once per count; NULL or 0 entries: params->n_core */
	size_t n_core_counts;
};

struct placement_work;

struct placement_result {
	enum placement_granularity granularity;
	enum placement_movement_model movement;
	struct placement_params params; /* as validated, theta/b_rd/b_wb resolved */
	size_t n_regions;
	struct placement_estimate *estimates; /* one per core count, in query order */
	size_t n_estimates;
	struct placement_work *work; /* what placement_decision_get() reads besides the regions */
	void *mem;       /* the one block holding all of the above and the run's working arrays */
	size_t mem_size;
};

/*
 * Decide every region and estimate the placement, once per core count.  q may be NULL (loop,
 * upper, params->n_core).  Cost O(n log n + operands) per core count.  On success *out must be
 * released with placement_result_free(); on failure *out is left empty.
 */
int placement_run(const struct placement_region *regions, size_t n, const struct placement_params *p,
		  const struct placement_query *q, struct placement_result *out, struct pim_error *err);
/*
 * placement_run() for a caller that places repeatedly: *out is empty (zeroed) or an earlier
 * result, which this call replaces, keeping its memory when that is large enough.  A result
 * takes about 8 + 33·o + 17·c bytes a region (o operands per region, c core counts) at loop and
 * block granularity, 4 more when the regions are out of program order, about 130 more at
 * operator granularity; reusing it spares the page faults of touching that memory afresh on
 * every call.
 */
int placement_run_reuse(const struct placement_region *regions, size_t n, const struct placement_params *p,
			const struct placement_query *q, struct placement_result *out, struct pim_error *err);
void placement_result_free(struct placement_result *r);

/*
 * The whole decision for regions[region] in estimates[estimate] of r: conditions, side,
 * evidence, unit, executions, T_host, T_pim and its term, movement bytes.  Reads the region
 * array r was computed from, which must still be there, unchanged.  Both indices must be in
 * range.
 */
void placement_decision_get(const struct placement_result *r, size_t estimate, size_t region,
			    struct placement_decision *d);

/* 0, or -EINVAL naming regions[index] and the bad field (placement_run checks every region). */
int placement_region_validate(const struct placement_region *r, size_t index, struct pim_error *err);

/*
 * The rule for one region alone at loop granularity: fills cond[], side, evidence and
 * bw_estimated (cost fields are zero).  p must be valid.  Used by calibrate.c.
 */
void placement_decide_region(const struct placement_region *r, const struct placement_params *p,
			     struct placement_decision *d);

/*
 * One-line human reason for d, e.g. "C3: BW_read 6.97 GB/s >= θ 2.00 GB/s".  Returns what
 * snprintf returns.
 */
int placement_format_reason(const struct placement_decision *d, char *buf, size_t len);

/* Distinct allocations with role in/inout, bytes summed (the timing backend's read set, §4.4). */
uint64_t placement_unique_read_bytes(const struct placement_region *r);

#endif
