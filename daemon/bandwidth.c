/* SPDX-License-Identifier: MIT */
#include "bandwidth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double bandwidth_quantile(double *v, size_t n, double q)
{
	qsort(v, n, sizeof *v, cmp_double);
	double at = q * (double)(n - 1);
	size_t i = (size_t)at;
	if (i + 1 >= n)
		return v[n - 1];
	return v[i] + (at - (double)i) * (v[i + 1] - v[i]);
}

int bandwidth_summarize(const double *passes, size_t n, size_t n_groups, const double *runnable,
			size_t n_runnable, unsigned n_cpus, struct bandwidth_result *out,
			struct pim_error *err)
{
	memset(out, 0, sizeof *out);
	if (n == 0)
		return err_set(err, -EINVAL, "bandwidth probe: no pass was timed");
	if (n_groups == 0 || n_groups > n)
		return err_set(err, -EINVAL, "bandwidth probe: %zu groups of %zu passes", n_groups, n);
	for (size_t i = 0; i < n; i++)
		if (!isfinite(passes[i]) || passes[i] <= 0)
			return err_set(err, -EINVAL, "bandwidth probe: pass %zu measured %g B/s", i, passes[i]);
	double *v = malloc((n > n_runnable ? n : n_runnable) * sizeof *v);
	if (!v)
		return err_set(err, -ENOMEM, "bandwidth probe: out of memory");

	/* each group's quantile, then all passes together */
	size_t per = n / n_groups;
	double lo = INFINITY, hi = 0;
	for (size_t g = 0; g < n_groups; g++) {
		size_t from = g * per, k = g + 1 == n_groups ? n - from : per;
		memcpy(v, passes + from, k * sizeof *v);
		double q = bandwidth_quantile(v, k, BANDWIDTH_QUANTILE);
		lo = fmin(lo, q);
		hi = fmax(hi, q);
	}
	memcpy(v, passes, n * sizeof *v);
	out->b_cpu = bandwidth_quantile(v, n, BANDWIDTH_QUANTILE);
	out->median = bandwidth_quantile(v, n, 0.5);
	out->spread = (hi - lo) / out->b_cpu;
	size_t slow = 0;
	while (slow < n && v[slow] < BANDWIDTH_SLOW_RATIO * out->b_cpu)
		slow++;
	out->slow_share = (double)slow / (double)n;
	out->passes = n;
	if (n_runnable) {
		memcpy(v, runnable, n_runnable * sizeof *v);
		out->runnable = bandwidth_quantile(v, n_runnable, 0.5);
	}
	free(v);
	out->busy = (n_cpus > 0 && out->runnable > (double)n_cpus) ||
		    out->slow_share > BANDWIDTH_SLOW_SHARE_BUSY;
	return 0;
}

void bandwidth_describe(const struct bandwidth_result *r, unsigned n_cpus, char *buf, size_t len)
{
	char tasks[64] = "";

	if (r->runnable > 0)
		snprintf(tasks, sizeof tasks, "%g runnable task%s on %u CPU%s, ", r->runnable,
			 r->runnable == 1 ? "" : "s", n_cpus, n_cpus == 1 ? "" : "s");
	snprintf(buf, len, "%s: %s%.0f%% of the passes below %.0f%% of B_cpu", r->busy ? "busy" : "quiet",
		 tasks, 100 * r->slow_share, 100 * BANDWIDTH_SLOW_RATIO);
}
