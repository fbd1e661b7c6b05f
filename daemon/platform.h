/* SPDX-License-Identifier: MIT */
/*
 * platform.h: what this host is (CPU model, core PMU, kernel) and what it can count
 * (doc/design.md §4.4), detected once at start-up.  Metrics and decisions are stored per platform.
 */
#ifndef PIMD_PLATFORM_H
#define PIMD_PLATFORM_H

#include "bandwidth.h"
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
	/* This host in the fleet catalogue (platform_fleet_describe), empty without one: the key
	 * another host must have for metrics measured here to serve it, and this host as published
	 * with each run (JSON).  Set before pimd's threads start, never changed after. */
	char fleet_key[256];
	char fleet_json[1024];
};

/* Detects the platform; never fails for lack of a PMU (that is the timing backend). */
int platform_detect(struct platform *p, struct pim_error *err);

/*
 * B_cpu, the host read bandwidth that θ and the movement times derive from (doc/design.md §3),
 * as one thread reads: the figure C3 compares a region's BW_read with is measured by one worker
 * pinned to one CPU, so θ = 0.12·B_cpu is a share of what one thread can stream, and B_rd and
 * B_wb, as one thread moves data, keep Eq. 8 an upper bound.  The probe reads a buffer of
 * PLATFORM_PROBE_BYTES in passes of PLATFORM_PROBE_PASS_BYTES, each flushed from the caches
 * before it is timed (so that the figure is the memory's, whatever the last-level cache holds),
 * PLATFORM_PROBE_ROUNDS times with a pause between rounds, and keeps an upper quantile of the
 * passes (bandwidth.h: why load cannot halve it).  It takes about a second.  Fills p's b_cpu
 * and b_cpu_ fields; res (if not NULL) receives the statistic.  Blocks: not on the event loop.
 */
#define PLATFORM_PROBE_BYTES (32u << 20)
#define PLATFORM_PROBE_PASS_BYTES (1u << 20)
#define PLATFORM_PROBE_ROUNDS 32
#define PLATFORM_PROBE_PAUSE_MS 30
/* Where no cache line can be flushed: passes rotate through a buffer this large instead. */
#define PLATFORM_PROBE_BYTES_UNFLUSHED (256u << 20)
int platform_probe_bandwidth(struct store_platform *p, struct bandwidth_result *res,
			     struct pim_error *err);

/*
 * The platform key of the fleet catalogue, the rule of "same platform" (pimd(8), Fleet
 * catalogue): CPU vendor, family, model and stepping, the number of CPUs, the memory installed
 * (GiB, rounded) and NUMA nodes, and the counter backend with its PMU.  Microcode, kernel and
 * B_cpu with its spread are published beside it, not part of it: they change with updates that
 * do not change what a loop nest costs enough to measure it again.  override (catalogue_platform,
 * not NULL or empty) replaces the key: hosts an operator declares equal, or a test.  Fills
 * p->fleet_key and p->fleet_json; call after B_cpu is known.
 */
void platform_fleet_describe(struct platform *p, const char *override);

/* This host's CPUs online and memory, as b_cpu_host records them ("2 CPUs, 23.5 GiB"): B_cpu
 * is measured again at start when they differ from the stored measurement's. */
void platform_host_describe(char *buf, size_t len);

#endif
