/* SPDX-License-Identifier: MIT */
/*
 * jitq_paper.h: pimd beside the evaluation of the JIT-Q paper (Ibrahim et al., MLSys 2024, §5),
 * figure by figure: the paper's value, pimd's in the paper configuration (pimsim_params_paper()
 * and jitq_config_paper()), pimd's in the same configuration with the exact kernel, the
 * tolerance where there is a target, and the assumption that explains the difference.
 *
 * What each pimd figure is:
 *   mapping   pimsim, BF16 -> MX6, one 12288 x 12288 weight (GPT-3's hidden size), 5 stacks;
 *             "below tiled" is 1 - time / tiled time, per direction and for both directions
 *             summed (every weight is quantized both ways in a training step).
 *   slack     the smallest, over the six presets, of min(forward, backward) least slack of a
 *             plan (strided-opt, preset micro-batch and parallelism, accelerator throughput
 *             per format accel.speedup: time per GEMM 9 : 6 : 4, MX9 at the BF16 rate).  One
 *             figure, BF16 -> MX9, sets the level (JITQ_PAPER_TOKENS); the others follow.
 *   lookahead the largest lookahead a plan chose, over the presets.
 *   capacity  savings over keeping both (or one) low-precision copies, per model: the plan
 *             with pipeline 1 (the paper's figures count the whole model's state), "up to"
 *             the largest over the presets, "average" their mean.
 *   loss      the plan's throughput loss, mean (or largest) over the presets.
 * Pure computation; about 150 plans, a few seconds.
 */
#ifndef PIMD_JITQ_PAPER_H
#define PIMD_JITQ_PAPER_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

enum jitq_paper_tol {
	JITQ_TOL_NONE, /* reported, no target */
	JITQ_TOL_ABS,  /* |pimd - paper| <= tol (percentage points for %, else the unit) */
	JITQ_TOL_REL,  /* |pimd / paper - 1| <= tol */
	JITQ_TOL_MIN,  /* pimd >= paper (the paper gives a bound) */
};

struct jitq_paper_row {
	const char *section;  /* "mapping", "slack", ... */
	char figure[96];
	const char *unit;     /* "%", "x", "blocks", "" (1 = yes) */
	double paper;
	const char *paper_note; /* how the paper states it */
	double cfg;           /* pimd, paper configuration */
	double exact;         /* pimd, paper configuration with kernel = exact */
	enum jitq_paper_tol tol_kind;
	double tol;
	bool met;             /* cfg within the tolerance (true without one) */
	bool known_miss;      /* a miss this model is known for; why says why */
	const char *why;      /* the assumption behind the difference, one line */
};

/* Computes every row; *rows is malloc'ed (free()). 0 or negative errno with err. */
int jitq_paper_report(struct jitq_paper_row **rows, size_t *n, struct pim_error *err);

#endif
