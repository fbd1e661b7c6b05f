/* SPDX-License-Identifier: MIT */
/*
 * metrics.h: a profiling run's samples turned into the per-region metrics of the placement rule
 * (pure). Per repetition, time and counts per execution; counts of a multiplexed group scaled
 * by time_enabled / time_running; over the repetitions, medians and the relative spread of the
 * time. Without counters (the timing backend), BW_read is estimated from the bytes the region
 * reads (manifest) over its median time.
 */
#ifndef PIMD_METRICS_H
#define PIMD_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "events.h"

/* The repetitions of one region collected so far. Initialise with metrics_region_init(). */
struct metrics_region {
	double *t;                  /* per repetition: seconds per execution */
	size_t nt, cap_t;
	double *v[EVENTS_ROLE_MAX]; /* per repetition: count per execution, by role */
	size_t nv[EVENTS_ROLE_MAX], cap_v[EVENTS_ROLE_MAX];
	bool scaled;                /* a count was scaled (its group was multiplexed) */
};

/* What metrics_region_result() finds. */
struct metrics_result {
	size_t reps;                    /* repetitions with a time (0: no metrics) */
	double t_host;                  /* median seconds per execution */
	double t_host_spread;           /* (max - min) / median of those times */
	bool have[EVENTS_ROLE_MAX];     /* a role was counted in at least one repetition */
	double role[EVENTS_ROLE_MAX];   /* median count per execution of each role counted */
	bool scaled;
};

void metrics_region_init(struct metrics_region *r);
/* Forgets the repetitions and keeps the buffers (the next region's). */
void metrics_region_reset(struct metrics_region *r);
void metrics_region_free(struct metrics_region *r);

/* One repetition's time: time_ns over executions runs of the region. Nothing for 0 executions.
 * -ENOMEM. */
int metrics_add_time(struct metrics_region *r, uint64_t time_ns, uint64_t executions);
/* One repetition of one counter group: values[k] counts the event of role roles[k] (-1: an event
 * of no role), over executions runs, scaled by metrics_scale(). Nothing for 0 executions.
 * -ENOMEM. */
int metrics_add_counts(struct metrics_region *r, const uint64_t *values, const int *roles,
		       unsigned n, uint64_t time_enabled, uint64_t time_running, uint64_t executions);

/* A count of a group that was on the PMU for time_running of its time_enabled ns, scaled to
 * the whole time (value · enabled / running) when it was multiplexed (0 < running < enabled);
 * otherwise the count itself. *scaled (if not NULL) says which. */
double metrics_scale(uint64_t value, uint64_t time_enabled, uint64_t time_running, bool *scaled);

/* Medians over the repetitions collected (sorts the buffers). */
void metrics_region_result(struct metrics_region *r, struct metrics_result *out);

/* Median and relative spread ((max - min) / median; 0 when the median is not positive) of
 * v[0..n), which it sorts. NaN (spread 0) when n is 0. */
double metrics_median(double *v, size_t n, double *spread);

/* The timing backend's BW_read estimate: read_bytes per execution over t_host seconds per
 * execution, in bytes/s; 0 when t_host is not positive. */
double metrics_bw_read_estimate(uint64_t read_bytes, double t_host);

#endif
