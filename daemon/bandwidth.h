/* SPDX-License-Identifier: MIT */
/*
 * bandwidth.h: the statistic behind a measured B_cpu (doc/design.md §3): from the bandwidths of
 * many short read passes, the figure kept, how much it moved between rounds of the probe, and
 * whether the machine was busy while it ran.  Pure: the probe itself (platform.c) reads the
 * clock and /proc and hands the numbers here.
 *
 * Why an upper quantile of short passes: a pass of BANDWIDTH_PASS_BYTES takes about 50 µs, far
 * less than a scheduler time slice, so most passes run whole while the probe is on a CPU, and
 * most of those run while no competitor streams memory beside them.  Load lengthens some passes
 * (a preemption inside one, a memory hog on the other core) and leaves the others as fast as on
 * a quiet machine: it moves the lower quantiles and the median, not the upper ones, as long as
 * more than one pass in ten runs undisturbed.  A single long pass, as pimd timed before, takes a
 * share of every competitor's time with it (0.57× under two spinners and a memory hog).
 */
#ifndef PIMD_BANDWIDTH_H
#define PIMD_BANDWIDTH_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

/* The quantile of the passes kept as B_cpu. */
#define BANDWIDTH_QUANTILE 0.9
/* A pass below this fraction of B_cpu counts as slow (disturbed) in the busy verdict. */
#define BANDWIDTH_SLOW_RATIO 0.75
/* Busy when more than this share of the passes was slow. */
#define BANDWIDTH_SLOW_SHARE_BUSY 0.25
/* Consecutive groups of rounds whose quantiles give the spread. */
#define BANDWIDTH_GROUPS 4

struct bandwidth_result {
	double b_cpu;      /* BANDWIDTH_QUANTILE of all passes, B/s */
	double median;     /* median of all passes, B/s */
	/* (largest − smallest) / b_cpu of the BANDWIDTH_QUANTILE of each of n_groups consecutive
	 * groups of passes: how far the kept figure moved while the probe ran (0: one group) */
	double spread;
	double slow_share; /* share of passes below BANDWIDTH_SLOW_RATIO·b_cpu */
	double runnable;   /* median runnable tasks during the probe, the probe included; 0 unknown */
	bool busy;         /* more runnable tasks than CPUs, or more than 1/4 of the passes slow */
	size_t passes;
};

/*
 * Summarizes n passes (bandwidths in B/s, in the order they ran) grouped into n_groups
 * consecutive groups of equal size (the last takes the remainder), and n_runnable samples of
 * the number of runnable tasks (/proc/stat procs_running, the probe included) on a machine of
 * n_cpus CPUs.  Quantiles interpolate linearly between order statistics: q of sorted x[0..n-1]
 * is x[i] + f·(x[i+1] − x[i]) with i + f = q·(n − 1).  -EINVAL when there is no pass, a pass is
 * not a positive finite number, or n_groups is 0 or more than n.
 */
int bandwidth_summarize(const double *passes, size_t n, size_t n_groups, const double *runnable,
			size_t n_runnable, unsigned n_cpus, struct bandwidth_result *out,
			struct pim_error *err);

/* The q-quantile (0 <= q <= 1) of v[0..n-1], n > 0, sorted in place (as bandwidth_summarize). */
double bandwidth_quantile(double *v, size_t n, double q);

/* The load during the probe in words, e.g. "busy: 4 runnable tasks on 2 CPUs, 31% of the passes
 * below 75% of B_cpu" or "quiet: 1 runnable task on 2 CPUs, 4% of the passes slow". */
void bandwidth_describe(const struct bandwidth_result *r, unsigned n_cpus, char *buf, size_t len);

#endif
