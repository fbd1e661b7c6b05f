/* SPDX-License-Identifier: MIT */
/*
 * bench_jitq_report ("make jitq-report"): every figure of the JIT-Q paper's evaluation (MLSys
 * 2024, §5) beside pimd's, in the paper configuration (pimctl jitq plan --preset paper) and in
 * the same configuration with the exact kernel, with the tolerance of each target and, where
 * pimd differs, the assumption that explains it (jitq_paper.c computes the rows; its unit test
 * fails when a figure that meets its target leaves it). Computed, not timed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jitq_paper.h"

static const char *tol_text(const struct jitq_paper_row *r, char *buf, size_t len)
{
	switch (r->tol_kind) {
	case JITQ_TOL_NONE:
		return "-";
	case JITQ_TOL_ABS:
		snprintf(buf, len, "+-%g%s", r->tol, strcmp(r->unit, "%") == 0 ? " pp" : "");
		return buf;
	case JITQ_TOL_REL:
		snprintf(buf, len, "+-%g%%", 100 * r->tol);
		return buf;
	case JITQ_TOL_MIN:
		return ">= paper";
	}
	return "?";
}

int main(void)
{
	struct jitq_paper_row *rows;
	size_t n;
	struct pim_error err = { 0 };
	unsigned targets = 0, met = 0;

	if (jitq_paper_report(&rows, &n, &err) < 0) {
		fprintf(stderr, "jitq-report: %s\n", err.msg);
		return 1;
	}
	printf("JIT-Q paper (MLSys 2024, §5) beside pimd\n"
	       "paper config: kernel paper (truncating, conditional shifts, range 8), tCK 0.833 ns,\n"
	       "  5 HBM-PIM stacks, strided-opt, BF16 master + 2 B gradients + 3 B optimizer, no\n"
	       "  activations, the presets' micro-batch and parallelism (4096 tokens for gpt-3-175B\n"
	       "  and future-1T), accelerator 312 TFLOP/s x 0.52 in BF16 and per format x 1 (mx9),\n"
	       "  x 1.5 (mx6), x 2.25 (mx4): time per GEMM 9 : 6 : 4; exact: the same with the\n"
	       "  exact kernel (RNE, NaN/Inf, subnormals)\n\n");
	printf("%-46s %8s %8s %8s  %-9s %s\n", "figure", "paper", "paper-cfg", "exact", "tolerance",
	       "result");
	const char *section = "", *last_why = NULL;
	for (size_t i = 0; i < n; i++) {
		const struct jitq_paper_row *r = &rows[i];
		char tb[32];
		if (strcmp(section, r->section) != 0) {
			section = r->section;
			printf("-- %s\n", section);
		}
		const char *res = r->tol_kind == JITQ_TOL_NONE ? "reported" : r->met ? "met" : "MISSED";
		printf("%-46s %7.2f%-1s %8.2f %8.2f  %-9s %s\n", r->figure, r->paper,
		       strcmp(r->unit, "%") == 0 ? "%" : strcmp(r->unit, "x") == 0 ? "x" : " ", r->cfg,
		       r->exact, tol_text(r, tb, sizeof tb), res);
		printf("%-46s   paper: %s\n", "", r->paper_note);
		if (r->tol_kind != JITQ_TOL_NONE) {
			targets++;
			met += r->met;
		}
		/* The reason of a miss always; of a reported figure once per reason. */
		if (r->why[0] && (!r->met || (r->tol_kind == JITQ_TOL_NONE && r->why != last_why))) {
			printf("%-46s   why: %s\n", "", r->why);
			last_why = r->why;
		}
	}
	printf("\n%u of %u targets met in the paper configuration\n", met, targets);
	free(rows);
	return 0;
}
