/* SPDX-License-Identifier: MIT */
/*
 * calibrate.h: threshold calibration of the placement rule (doc/design.md §3 "Threshold calibration";
 * the paper's θ sweep over 0.50–4.00 GB/s on 44 labelled loops).
 *
 * Given profiled regions and labels saying whether offloading each one paid off end to end,
 * sweep θ over a grid and σ over a list, re-decide the labelled regions at every point (loop
 * granularity, the rule of placement.c) and count false positives (selected, not beneficial),
 * false negatives (beneficial, not selected) and accuracy.  Suggest, per σ, the midpoint of the
 * θ interval the paper would pick (see calibrate_run).
 *
 * Labels file format (CSV, UTF-8 or ASCII):
 *
 *     # comments start with '#' anywhere on a line; blank lines are ignored
 *     region,beneficial
 *     401,1
 *     softmax.exp,no        # a region name works too
 *
 *   - the first line that is not blank or a comment is the header, exactly "region,beneficial"
 *     (case and surrounding blanks ignored);
 *   - each further line has two fields separated by one comma, blanks around them ignored;
 *   - region: a region id (decimal) or, when no region has that id, a region name; a name shared
 *     by several regions is ambiguous and refused (use the id);
 *   - beneficial: 1/0, yes/no, true/false (any case);
 *   - every region at most once.
 *   Errors name the line: "labels line 7: region 12 (mlp.1) already labelled on line 3".
 */
#ifndef PIMD_CALIBRATE_H
#define PIMD_CALIBRATE_H

#include "placement.h"

struct calibrate_label {
	size_t region;   /* index into the regions array given to the parser */
	bool beneficial;
	unsigned line;   /* where it came from (1-based) */
};

struct calibrate_labels {
	struct calibrate_label *v;
	size_t n;
};

/* Largest label buffer accepted (64 MiB), so a hostile file cannot exhaust memory. */
#define CALIBRATE_LABELS_MAX_BYTES (64u * 1024u * 1024u)

/*
 * Parses buf[0..len) (need not be NUL-terminated).  On success fills *out (free with
 * calibrate_labels_free()); on failure returns -EINVAL with a line-numbered message and leaves
 * *out empty.
 */
int calibrate_parse_labels(const char *buf, size_t len, const struct placement_region *regions,
			   size_t n_regions, struct calibrate_labels *out, struct pim_error *err);
void calibrate_labels_free(struct calibrate_labels *l);

struct calibrate_sweep {
	double theta_lo, theta_hi, theta_step; /* B/s; grid θ_i = lo + i·step, i = 0.. while <= hi */
	const double *sigmas;                  /* NULL or 0 entries: params->sigma alone */
	size_t n_sigmas;
};

/* The paper's sweep: 0.50–4.00 GB/s in steps of 0.01 GB/s, σ from the params. */
struct calibrate_sweep calibrate_sweep_default(void);

#define CALIBRATE_MAX_POINTS 10000000u /* θ values × σ values */

struct calibrate_point {
	double theta, sigma;
	size_t selected; /* labelled regions the rule offloads */
	size_t tp, fp, tn, fn;
	double accuracy; /* (tp + tn) / labelled */
};

struct calibrate_suggestion {
	double sigma;
	double lo, hi;             /* the chosen θ interval (grid points, inclusive) */
	double theta;              /* (lo + hi) / 2 */
	struct calibrate_point at; /* the rule evaluated at theta */
};

struct calibrate_result {
	size_t n_labelled, n_beneficial;
	size_t n_thetas, n_sigmas;
	struct calibrate_point *points; /* n_sigmas × n_thetas, σ-major: points[s·n_thetas + t] */
	struct calibrate_suggestion *suggestions; /* one per σ */
	size_t best;                    /* suggestion with the highest accuracy, first on ties */
};

/*
 * Runs the sweep.  Stage 1 (C1, C2) uses p as given (its n_core); θ and σ come from the sweep.
 *
 * Suggested θ per σ: among the grid points, those with the fewest false positives and, among
 * them, the fewest false negatives; the longest run of consecutive such points (the first on a
 * tie) is the interval, and its midpoint the suggestion.  Why FN as well: raising θ can only
 * deselect regions, so FP never rises with θ and "minimal FP" alone would always extend to the
 * top of the sweep; the paper's [1.80, 2.13] GB/s ends where false negatives start to grow.
 */
int calibrate_run(const struct placement_region *regions, size_t n, const struct placement_params *p,
		  const struct calibrate_labels *labels, const struct calibrate_sweep *sweep,
		  struct calibrate_result *out, struct pim_error *err);
void calibrate_result_free(struct calibrate_result *r);

#endif
