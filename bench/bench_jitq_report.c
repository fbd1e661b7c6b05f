/* SPDX-License-Identifier: MIT */
/*
 * bench_jitq_report ("make jitq-report"): the model's own JIT-Q results printed beside the
 * figures of the JIT-Q paper (MLSys 2024).  These are comparisons, not targets: no parameter of
 * the PIM model, the scheduler or the footprint was fitted to them, and the differences are
 * explained in the README ("JIT-Q against the paper").
 *
 * Everything here is computed, not timed: pimsim's command-stream cost (examples/hbm-pim.conf
 * defaults, 5 HBM-PIM stacks as pimd's JitqPlan assumes) and the scheduler of jitq.c.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "jitq.h"
#include "pimsim.h"

static double quant_ms(const struct pimsim_params *p, enum pimsim_mapping m, enum mx_dir d, enum mx_format f,
		       enum mx_src s, size_t rows, size_t cols)
{
	struct pimsim_stats st;
	struct pim_error err = { 0 };
	if (pimsim_estimate(p, m, d, f, s, rows, cols, &st, &err) < 0) {
		fprintf(stderr, "jitq-report: %s\n", err.msg);
		return NAN;
	}
	return st.time_ns * 1e-6;
}

static int plan(const char *preset, enum mx_format f, enum mx_src s, struct pimsim_params *pp,
		struct jitq_plan **out)
{
	struct jitq_config c;
	struct pim_error err = { 0 };
	static struct pimsim_cost cost;

	jitq_config_init(&c);
	if (jitq_model_preset(preset, &c.model) < 0)
		return -1;
	c.fmt = f;
	c.src = s;
	cost = (struct pimsim_cost){ .params = pp, .mapping = PIMSIM_STRIDED_OPT };
	c.pim.quant_time_s = pimsim_cost_s;
	c.pim.ctx = &cost;
	c.pim.channels = pp->stacks * pp->pch_per_stack;
	if (jitq_plan(&c, out, &err) < 0 || cost.error) {
		fprintf(stderr, "jitq-report: %s: %s\n", preset, cost.error ? cost.err.msg : err.msg);
		return -1;
	}
	return 0;
}

int main(void)
{
	struct pimsim_params p;
	pimsim_params_default(&p);
	p.stacks = 5;

	const size_t R = 12288, C = 12288;
	printf("JIT-Q: the model's figures beside the paper's (comparisons, not targets)\n\n");
	printf("1. Quantization time, BF16 -> MX6, one %zux%zu weight, %u HBM-PIM stacks (pimsim)\n", R, C,
	       p.stacks);
	printf("   %-12s %12s %12s %10s\n", "mapping", "row (ms)", "col (ms)", "col/row");
	double t[3][2];
	for (int m = 0; m < 3; m++) {
		for (int d = 0; d < 2; d++)
			t[m][d] = quant_ms(&p, (enum pimsim_mapping)m, (enum mx_dir)d, MX_FMT_MX6, MX_SRC_BF16, R, C);
		printf("   %-12s %12.3f %12.3f %9.2fx\n", pimsim_mapping_name((enum pimsim_mapping)m), t[m][0],
		       t[m][1], t[m][1] / t[m][0]);
	}
	printf("   %-40s %10s %10s\n", "", "model", "paper");
	printf("   %-40s %9.0f%% %10s\n", "strided below tiled (row blocking)", 100 * (1 - t[1][0] / t[0][0]), "48%");
	printf("   %-40s %9.0f%% %10s\n", "strided-opt below tiled (row blocking)", 100 * (1 - t[2][0] / t[0][0]),
	       "70%");
	printf("   %-40s %9.0f%% %10s\n", "column slower than row (strided-opt)", 100 * (t[2][1] / t[2][0] - 1),
	       "18%");

	printf("\n2. Slack (accelerator time / PIM time, minimum over blocks), strided-opt, %u stacks\n", p.stacks);
	printf("   %-14s %-5s %-5s %10s %10s %9s %9s\n", "model", "from", "to", "fwd", "bwd", "lookahead",
	       "loss");
	static const enum mx_format fmts[] = { MX_FMT_MX9, MX_FMT_MX6, MX_FMT_MX4 };
	static const enum mx_src srcs[] = { MX_SRC_BF16, MX_SRC_FP32 };
	double cap_sum = 0, loss_max = 0, slack_min_bf16_mx6 = INFINITY;
	unsigned n_presets = 0;
	for (size_t i = 0; jitq_model_preset_name(i); i++) {
		const char *name = jitq_model_preset_name(i);
		for (int s = 0; s < 2; s++)
			for (int f = 0; f < 3; f++) {
				struct jitq_plan *pl;
				if (plan(name, fmts[f], srcs[s], &p, &pl) < 0)
					return 1;
				const struct jitq_phase_plan *fw = &pl->phase[JITQ_PHASE_FWD], *bw = &pl->phase[JITQ_PHASE_BWD];
				if (fmts[f] == MX_FMT_MX6 && srcs[s] == MX_SRC_BF16) {
					cap_sum += pl->cap.pct_vs_both;
					n_presets++;
					if (fw->slack_min < slack_min_bf16_mx6)
						slack_min_bf16_mx6 = fw->slack_min;
					if (pl->loss > loss_max)
						loss_max = pl->loss;
				}
				printf("   %-14s %-5s %-5s %9.2fx %9.2fx    i+%u/%u %8.2f%%%s\n", name, jitq_src_name(srcs[s]),
				       jitq_fmt_name(fmts[f]), fw->slack_min, bw->slack_min, fw->lookahead, bw->lookahead,
				       100 * pl->loss, fw->pim_bound || bw->pim_bound ? "  PIM-bound" : "");
				jitq_plan_free(pl);
			}
	}
	printf("\n3. Summary                                    model      paper\n");
	printf("   min forward slack, BF16 -> MX6         %8.2fx    >= 2.4x\n", slack_min_bf16_mx6);
	printf("   capacity saved vs both copies, MX6     %8.1f%%     12.5%% (average)\n",
	       cap_sum / n_presets);
	printf("   throughput loss, BF16 -> MX6 (max)     %8.2f%%     up to 2.4%%\n", 100 * loss_max);
	printf("   FP32 source                            see table 2   slack 0.51-0.76x, i+2\n");
	return 0;
}
