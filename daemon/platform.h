/* SPDX-License-Identifier: MIT */
/*
 * platform.h: what this host is (CPU model, core PMU, kernel) and what it can count
 * (doc/design.md §4.4), detected once at start-up.  Metrics and decisions are stored per platform.
 */
#ifndef PIMD_PLATFORM_H
#define PIMD_PLATFORM_H

#include "counters.h"
#include "events.h"
#include "store.h"

struct platform {
	struct store_platform id;      /* identity as stored */
	int64_t row;                   /* platforms.id */
	bool counters;                 /* hardware counters usable: the counters backend */
	const struct event_table *table; /* event table of the core PMU (generic if unknown) */
	struct counters_probe probe;
	char backend_reason[512];      /* plain words, for the journal and pimctl status */
};

/* Detects the platform; never fails for lack of a PMU (that is the timing backend). */
int platform_detect(struct platform *p, struct pim_error *err);

/* Single-thread read bandwidth (B/s) over a buffer of bytes (well above the last-level cache):
 * pages touched first, then the best of three sequential read passes (doc/design.md §3, B_cpu). */
#define PLATFORM_PROBE_BYTES (256u << 20)
int platform_probe_bandwidth(size_t bytes, double *bps, struct pim_error *err);

#endif
