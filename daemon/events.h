/* SPDX-License-Identifier: MIT */
/*
 * events.h: per-PMU event tables (doc/design.md §4.1) and their libpfm4 encoding.
 *
 * The tables are data: one row per PMU model, naming the libpfm4 event for every profiling role
 * of the placement rule (doc/design.md §3: n_rd, c_store, c_be1..3, plus cycles) and the f_store formula
 * the row implies. Encodings checked offline are listed in doc/pmu.md.
 */
#ifndef PIMD_EVENTS_H
#define PIMD_EVENTS_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* What a counter is used for in the placement rule (doc/design.md §3, Stage 2). */
enum events_role {
	EVENTS_ROLE_N_RD,    /* off-core data read requests (C3: BW_read = n_rd·L / T_host) */
	EVENTS_ROLE_C_STORE, /* cycles bound on stores (C4 numerator) */
	EVENTS_ROLE_BE1,     /* first backend-bound event (TMA: STALLS_TOTAL) */
	EVENTS_ROLE_BE2,     /* second (TMA: 1_PORTS_UTIL) */
	EVENTS_ROLE_BE3,     /* third (TMA: 2_PORTS_UTIL, Retiring weight taken as 1) */
	EVENTS_ROLE_CYCLES,  /* unhalted core cycles */
	EVENTS_ROLE_MAX,
};

#define EVENTS_ROLE_BIT(r) (1u << (r))
#define EVENTS_ROLES_F_STORE                                                                       \
	(EVENTS_ROLE_BIT(EVENTS_ROLE_C_STORE) | EVENTS_ROLE_BIT(EVENTS_ROLE_BE1) |                  \
	 EVENTS_ROLE_BIT(EVENTS_ROLE_BE2) | EVENTS_ROLE_BIT(EVENTS_ROLE_BE3))

/* How f_store (C4) is computed from a row's counts. */
enum events_formula {
	/* C4 not evaluable: the row has no store-bound event (doc/design.md §4.4). */
	EVENTS_FORMULA_NONE,
	/* Current TMA (>= 4.2, kernel icx-metrics.json): Backend_Bound_Cycles =
	 * STALLS_TOTAL + 1_PORTS_UTIL + Retiring·2_PORTS_UTIL + BOUND_ON_STORES with Retiring = 1;
	 * f_store = c_store / (be1 + be2 + be3 + c_store). */
	EVENTS_FORMULA_TMA,
	/* TMA 3.6: as above with EXE_BOUND_0_PORTS as be1 instead of STALLS_TOTAL. */
	EVENTS_FORMULA_TMA36,
	/* AMD proxy: no backend-cycle decomposition; f_store = c_store / cycles. */
	EVENTS_FORMULA_STORE_PER_CYCLE,
};

#define EVENTS_MAX_PMUS 4

/* One row: a PMU model. Event names carry no PMU prefix unless they contain "::" (then they are
 * used as written, e.g. "perf::..." or "perf_raw::r80a6"); NULL means "not available". */
struct event_table {
	const char *model;                    /* "icx", "skx", "spr", "zen3", "zen4", "generic", ... */
	const char *pmus[EVENTS_MAX_PMUS];    /* libpfm4 core PMU names served; NULL-terminated */
	const char *event[EVENTS_ROLE_MAX];   /* libpfm4 event per role */
	const char *be1_tma36;                /* be1 of the TMA-3.6 form, NULL if not available */
	enum events_formula formula;          /* the default formula the row implies */
	unsigned proxy_roles;                 /* EVENTS_ROLE_BIT()s measured with a documented proxy */
	unsigned fixed_roles;                 /* roles usually served by a fixed counter */
	const char *note;                     /* plain words: proxies, gaps, raw codes */
};

/* What counters_detect_pmu() found on this host. */
struct events_host {
	const struct event_table *table; /* never NULL after success (falls back to "generic") */
	char pmu[64];                    /* libpfm4 name of the matched core PMU, "" for generic */
	char pmu_desc[128];
	int num_cntrs;                   /* generic counters per libpfm4 (0: unknown) */
	int num_fixed_cntrs;
	unsigned n_core_pmus;            /* active core PMUs; > 1 is a hybrid CPU */
	char reason[512];                /* what was detected and why this row */
};

/* All rows, for iteration (perfcsv maps names through every row). */
const struct event_table *events_tables(size_t *n);
/* The row serving libpfm4 PMU pfm_pmu_name ("icx", "amd64_fam19h_zen3"), or NULL. */
const struct event_table *events_table_for_pmu(const char *pfm_pmu_name);
/* The row with this model name ("icx", "generic", "software"), or NULL. */
const struct event_table *events_table_by_model(const char *model);

const char *events_role_name(enum events_role role);     /* "n_rd", "c_store", "be1", ... */
const char *events_formula_name(enum events_formula f);  /* "tma", "tma-3.6", ... */

/* The fully qualified libpfm4 name of a role in a row ("icx::EXE_ACTIVITY:BOUND_ON_STORES").
 * pmu NULL: the row's first PMU. tma36: for EVENTS_ROLE_BE1, the TMA-3.6 event.
 * -ENOENT when the row has no event for that role. */
int events_full_name(const struct event_table *t, const char *pmu, enum events_role role,
		     bool tma36, char *buf, size_t len, struct pim_error *err);

/* f_store from role values (v indexed by enum events_role, present a role bitmask) under
 * formula f. -EDOM when the formula is NONE or a role it needs is absent, -ERANGE when the
 * denominator is zero. */
int events_f_store(enum events_formula f, const uint64_t v[EVENTS_ROLE_MAX], unsigned present,
		   double *out, struct pim_error *err);

#endif
