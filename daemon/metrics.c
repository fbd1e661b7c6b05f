/* SPDX-License-Identifier: MIT */
#include "metrics.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void metrics_region_init(struct metrics_region *r)
{
	memset(r, 0, sizeof *r);
}

void metrics_region_reset(struct metrics_region *r)
{
	r->nt = 0;
	for (int k = 0; k < EVENTS_ROLE_MAX; k++)
		r->nv[k] = 0;
	r->scaled = false;
}

void metrics_region_free(struct metrics_region *r)
{
	free(r->t);
	for (int k = 0; k < EVENTS_ROLE_MAX; k++)
		free(r->v[k]);
	metrics_region_init(r);
}

static int push(double **a, size_t *n, size_t *cap, double x)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		double *p = realloc(*a, c * sizeof *p);
		if (!p)
			return -ENOMEM;
		*a = p;
		*cap = c;
	}
	(*a)[(*n)++] = x;
	return 0;
}

int metrics_add_time(struct metrics_region *r, uint64_t time_ns, uint64_t executions)
{
	if (executions == 0)
		return 0;
	return push(&r->t, &r->nt, &r->cap_t, (double)time_ns * 1e-9 / (double)executions);
}

double metrics_scale(uint64_t value, uint64_t time_enabled, uint64_t time_running, bool *scaled)
{
	bool s = time_running && time_running < time_enabled;

	if (scaled)
		*scaled = s;
	return s ? (double)value * ((double)time_enabled / (double)time_running) : (double)value;
}

int metrics_add_counts(struct metrics_region *r, const uint64_t *values, const int *roles,
		       unsigned n, uint64_t time_enabled, uint64_t time_running, uint64_t executions)
{
	if (executions == 0)
		return 0;
	for (unsigned k = 0; k < n; k++) {
		int role = roles[k];
		bool scaled;
		if (role < 0 || role >= EVENTS_ROLE_MAX)
			continue;
		double v = metrics_scale(values[k], time_enabled, time_running, &scaled);
		if (push(&r->v[role], &r->nv[role], &r->cap_v[role], v / (double)executions) < 0)
			return -ENOMEM;
		r->scaled = r->scaled || scaled;
	}
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double metrics_median(double *v, size_t n, double *spread)
{
	if (n == 0) {
		if (spread)
			*spread = 0;
		return NAN;
	}
	qsort(v, n, sizeof *v, cmp_double);
	double m = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	if (spread)
		*spread = m > 0 ? (v[n - 1] - v[0]) / m : 0;
	return m;
}

void metrics_region_result(struct metrics_region *r, struct metrics_result *out)
{
	memset(out, 0, sizeof *out);
	out->reps = r->nt;
	out->scaled = r->scaled;
	out->t_host = metrics_median(r->t, r->nt, &out->t_host_spread);
	for (int k = 0; k < EVENTS_ROLE_MAX; k++)
		if (r->nv[k]) {
			out->role[k] = metrics_median(r->v[k], r->nv[k], NULL);
			out->have[k] = true;
		}
}

double metrics_bw_read_estimate(uint64_t read_bytes, double t_host)
{
	return t_host > 0 ? (double)read_bytes / t_host : 0;
}
