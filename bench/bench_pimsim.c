/* SPDX-License-Identifier: MIT */
/*
 * bench_pimsim: the PIM model's JIT-Q Figure 9 table (doc/design.md §5.2) for every MX format and
 * source type on one weight shape, next to the paper's figures, and the cost of the
 * estimate call itself (what the scheduler pays per layer shape).
 *
 *   bench_pimsim [rows cols (default 12288 12288)] [config file]
 *
 * Paper (JIT-Q §5.2, BF16 -> MX6, one representative LLM): strided 48% and strided-opt 70%
 * below tiled; column quantization 18% slower than row. Comparisons, not targets.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "pimsim.h"

static const enum pimsim_mapping maps[] = { PIMSIM_TILED, PIMSIM_STRIDED, PIMSIM_STRIDED_OPT };

int main(int argc, char **argv)
{
	struct pimsim_params p;
	struct pim_error err;
	size_t rows = 12288, cols = 12288;

	pimsim_params_default(&p);
	if (argc >= 3) {
		rows = strtoull(argv[1], NULL, 10);
		cols = strtoull(argv[2], NULL, 10);
	}
	if (argc >= 4) {
		_cleanup_(freep) char *buf = NULL;
		size_t len;
		if (read_file(argv[3], PIMSIM_CONF_MAX, &buf, &len, &err) < 0 ||
		    pimsim_params_parse(&p, buf, len, argv[3], &err) < 0) {
			fprintf(stderr, "bench_pimsim: %s\n", err.msg);
			return 1;
		}
	}
	printf("pimsim: %zux%zu weight, %u stack(s) x %u pCH x %u PIM units, tCK %.3f ns\n", rows,
	       cols, p.stacks, p.pch_per_stack, p.banks_per_pch / 2, p.tck_ps / 1000.0);
	printf("%-4s %-4s %-11s %-3s %9s %6s %6s %6s %6s %8s %9s\n", "src", "fmt", "mapping", "dir",
	       "time ms", "lane%", "bit%", "other%", "rows%", "ACT", "vs tiled");
	uint64_t t0 = now_ns();
	unsigned calls = 0;
	for (enum mx_src src = MX_SRC_FP32; src <= MX_SRC_BF16; src++)
		for (enum mx_format f = MX_FMT_MX9; f <= MX_FMT_MX4; f++) {
			struct pimsim_stats st[3][2];
			for (unsigned m = 0; m < 3; m++)
				for (unsigned d = 0; d < 2; d++) {
					if (pimsim_estimate(&p, maps[m], d ? MX_DIR_COL : MX_DIR_ROW, f,
							    src, rows, cols, &st[m][d], &err) < 0) {
						fprintf(stderr, "bench_pimsim: %s\n", err.msg);
						return 1;
					}
					calls++;
				}
			for (unsigned m = 0; m < 3; m++)
				for (unsigned d = 0; d < 2; d++) {
					const struct pimsim_stats *s = &st[m][d];
					printf("%-4s %-4s %-11s %-3s %9.3f %6.1f %6.1f %6.1f %6.1f %8" PRIu64
					       " %+8.1f%%\n", src == MX_SRC_BF16 ? "bf16" : "fp32",
					       mx_format_name(f), pimsim_mapping_name(maps[m]),
					       d ? "col" : "row", s->time_ns / 1e6,
					       100.0 * s->lane_shift_cycles / s->cycles,
					       100.0 * s->bit_shift_cycles / s->cycles,
					       100.0 * s->other_cycles / s->cycles,
					       100.0 * s->row_cycles / s->cycles, s->activations,
					       100.0 * (s->time_ns / st[0][d].time_ns - 1.0));
				}
			double both[3];
			for (unsigned m = 0; m < 3; m++)
				both[m] = st[m][0].time_ns + st[m][1].time_ns;
			printf("     below tiled (row / col / both): strided %.0f / %.0f / %.0f%%, "
			       "opt %.0f / %.0f / %.0f%%  [paper, bf16 mx6: 48%%, 70%%]\n",
			       100 * (1 - st[1][0].time_ns / st[0][0].time_ns),
			       100 * (1 - st[1][1].time_ns / st[0][1].time_ns),
			       100 * (1 - both[1] / both[0]),
			       100 * (1 - st[2][0].time_ns / st[0][0].time_ns),
			       100 * (1 - st[2][1].time_ns / st[0][1].time_ns),
			       100 * (1 - both[2] / both[0]));
			printf("     column vs row: tiled %+.0f%%, strided %+.0f%%, opt %+.0f%%  "
			       "[paper: +18%%]\n",
			       100 * (st[0][1].time_ns / st[0][0].time_ns - 1),
			       100 * (st[1][1].time_ns / st[1][0].time_ns - 1),
			       100 * (st[2][1].time_ns / st[2][0].time_ns - 1));
		}
	printf("%u estimates in %.1f ms (%.2f ms each)\n", calls, (now_ns() - t0) / 1e6,
	       (now_ns() - t0) / 1e6 / calls);
	return 0;
}
