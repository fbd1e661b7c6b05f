/* SPDX-License-Identifier: MIT */
/*
 * events.c: the per-PMU event tables of doc/design.md §4.1, kept as data (pure: their encoding through
 * libpfm4, which keeps process-wide state, is counters_encode_event in counters.c).
 *
 * Every encoding below was checked offline with LIBPFM_ENCODE_INACTIVE=1 against libpfm4 4.13
 * (doc/pmu.md; tests/unit/test_events.c keeps the expected configs).
 */
#include "events.h"

#include <string.h>

#define B(r) EVENTS_ROLE_BIT(EVENTS_ROLE_##r)

static const struct event_table tables[] = {
	{
		/* Ice Lake client and server share one table (doc/design.md §4.1). */
		.model = "icx",
		.pmus = { "icx", "icl", NULL },
		.event = {
			[EVENTS_ROLE_N_RD] = "OFFCORE_REQUESTS:ALL_DATA_RD",       /* 0x8b0 */
			[EVENTS_ROLE_C_STORE] = "EXE_ACTIVITY:BOUND_ON_STORES",    /* 0x20040a6 */
			[EVENTS_ROLE_BE1] = "CYCLE_ACTIVITY:STALLS_TOTAL",         /* 0x40004a3 */
			[EVENTS_ROLE_BE2] = "EXE_ACTIVITY:1_PORTS_UTIL",           /* 0x2a6 */
			[EVENTS_ROLE_BE3] = "EXE_ACTIVITY:2_PORTS_UTIL",           /* 0x4a6 */
			[EVENTS_ROLE_CYCLES] = "CPU_CLK_UNHALTED:THREAD_P",        /* 0x3c */
		},
		.be1_tma36 = "EXE_ACTIVITY:EXE_BOUND_0_PORTS",                     /* 0x80a6 */
		.formula = EVENTS_FORMULA_TMA,
		/* event 0x3c is eligible for fixed counter 1 in the kernel's constraint table */
		.fixed_roles = B(CYCLES),
		.note = "icl/icx: TMA >= 4.2 Backend_Bound_Cycles with Retiring weight 1; "
			"TMA-3.6 alternative uses EXE_BOUND_0_PORTS",
	},
	{
		/* Skylake-X uses the Skylake table (doc/design.md §4.1); Cascade Lake-X is the same core. */
		.model = "skx",
		.pmus = { "skx", "skl", "clx", NULL },
		.event = {
			[EVENTS_ROLE_N_RD] = "OFFCORE_REQUESTS:ALL_DATA_RD",       /* 0x8b0 */
			[EVENTS_ROLE_C_STORE] = "EXE_ACTIVITY:BOUND_ON_STORES",    /* 0x40a6 */
			[EVENTS_ROLE_BE1] = "CYCLE_ACTIVITY:STALLS_TOTAL",         /* 0x40004a3 */
			[EVENTS_ROLE_BE2] = "EXE_ACTIVITY:1_PORTS_UTIL",           /* 0x2a6 */
			[EVENTS_ROLE_BE3] = "EXE_ACTIVITY:2_PORTS_UTIL",           /* 0x4a6 */
			[EVENTS_ROLE_CYCLES] = "CPU_CLK_UNHALTED:THREAD_P",        /* 0x3c */
		},
		.be1_tma36 = "EXE_ACTIVITY:EXE_BOUND_0_PORTS",                     /* 0x1a6 */
		.formula = EVENTS_FORMULA_TMA,
		.fixed_roles = B(CYCLES),
		.note = "skl/skx/clx: BOUND_ON_STORES has no cmask here (0x40a6), "
			"EXE_BOUND_0_PORTS is umask 0x01 (0x1a6)",
	},
	{
		/* Sapphire Rapids: libpfm4 4.13 lacks OFFCORE_REQUESTS:ALL_DATA_RD,
		 * EXE_ACTIVITY:EXE_BOUND_0_PORTS and CYCLE_ACTIVITY:STALLS_MEM_ANY (doc/pmu.md). */
		.model = "spr",
		.pmus = { "spr", NULL },
		.event = {
			/* ALL_DATA_RD does not exist; DATA_RD (0x821) counts demand and prefetch
			 * data reads that miss L2, the same signal */
			[EVENTS_ROLE_N_RD] = "OFFCORE_REQUESTS:DATA_RD",           /* 0x821 */
			[EVENTS_ROLE_C_STORE] = "EXE_ACTIVITY:BOUND_ON_STORES",    /* 0x20040a6 */
			[EVENTS_ROLE_BE1] = "CYCLE_ACTIVITY:STALLS_TOTAL",         /* 0x40004a3 */
			[EVENTS_ROLE_BE2] = "EXE_ACTIVITY:1_PORTS_UTIL",           /* 0x2a6 */
			[EVENTS_ROLE_BE3] = "EXE_ACTIVITY:2_PORTS_UTIL",           /* 0x4a6 */
			[EVENTS_ROLE_CYCLES] = "CPU_CLK_UNHALTED:THREAD_P",        /* 0x3c */
		},
		/* EXE_BOUND_0_PORTS is unknown to libpfm4 4.13 on spr: the TMA-3.6 form uses the
		 * Ice Lake raw code 0x80a6 (event 0xa6, umask 0x80) through perf_raw */
		.be1_tma36 = "perf_raw::r80a6",
		.formula = EVENTS_FORMULA_TMA,
		.fixed_roles = B(CYCLES),
		.note = "spr: n_rd is OFFCORE_REQUESTS:DATA_RD (ALL_DATA_RD missing in libpfm4 4.13); "
			"TMA-3.6 be1 EXE_BOUND_0_PORTS missing, encoded as raw 0x80a6",
	},
	{
		/* AMD Zen 3: no TMA-style backend-cycle decomposition exists, so be1..be3 are not
		 * available and C4 is computed with the store proxy over cycles. */
		.model = "zen3",
		.pmus = { "amd64_fam19h_zen3", NULL },
		.event = {
			/* data-cache fills from local + remote DRAM/IO (umask 0x48): proxy for
			 * n_rd; unlike Intel's ALL_DATA_RD it does not count L3 hits */
			[EVENTS_ROLE_N_RD] = "ANY_DATA_CACHE_FILLS_FROM_SYSTEM:MEM_IO_LCL:MEM_IO_RMT",
			/* dispatch stalled for lack of store-queue entries: proxy for c_store */
			[EVENTS_ROLE_C_STORE] = "DISPATCH_RESOURCE_STALL_CYCLES_1:STORE_QUEUE_RSRC_STALL",
			[EVENTS_ROLE_CYCLES] = "CYCLES_NOT_IN_HALT",               /* 0x76 */
		},
		.formula = EVENTS_FORMULA_STORE_PER_CYCLE,
		.proxy_roles = B(N_RD) | B(C_STORE),
		.note = "zen3: n_rd = DRAM/IO data-cache fills (proxy, 0x4844), c_store = store-queue "
			"dispatch stall cycles (proxy, 0x4ae); no backend events: f_store = c_store/cycles",
	},
	{
		/* AMD Zen 4: same proxies. DISPATCH_STALLS_1:BE_STALLS exists but counts dispatch
		 * slots (6 per cycle), not cycles, so it cannot be added to c_store. */
		.model = "zen4",
		.pmus = { "amd64_fam19h_zen4", NULL },
		.event = {
			[EVENTS_ROLE_N_RD] = "ANY_DATA_CACHE_FILLS_FROM_SYSTEM:DRAM_IO_NEAR:DRAM_IO_FAR",
			[EVENTS_ROLE_C_STORE] = "DISPATCH_RESOURCE_STALL_CYCLES_1:STORE_QUEUE_RSRC_STALL",
			[EVENTS_ROLE_CYCLES] = "CYCLES_NOT_IN_HALT",
		},
		.formula = EVENTS_FORMULA_STORE_PER_CYCLE,
		.proxy_roles = B(N_RD) | B(C_STORE),
		.note = "zen4: n_rd = DRAM/IO data-cache fills (proxy, 0x4844), c_store = store-queue "
			"dispatch stall cycles (proxy, 0x4ae); no backend events: f_store = c_store/cycles",
	},
	{
		/* Any other core PMU (Zen 5 is unknown to libpfm4 4.13): kernel generic events. */
		.model = "generic",
		.pmus = { NULL },
		.event = {
			[EVENTS_ROLE_N_RD] = "perf::PERF_COUNT_HW_CACHE_LL:READ:MISS",
			[EVENTS_ROLE_CYCLES] = "perf::PERF_COUNT_HW_CPU_CYCLES",
		},
		.formula = EVENTS_FORMULA_NONE,
		.proxy_roles = B(N_RD),
		.note = "generic: n_rd = last-level-cache read misses (DRAM read proxy); no store-bound "
			"event: C4 not evaluable",
	},
	{
		/* No hardware counters at all: the timing backend of doc/design.md §4.4. */
		.model = "software",
		.pmus = { NULL },
		.formula = EVENTS_FORMULA_NONE,
		.note = "software: no hardware counters; timing backend (T_host from CLOCK_MONOTONIC, "
			"BW_read estimated, C4 not evaluable)",
	},
};

#undef B

const struct event_table *events_tables(size_t *n)
{
	if (n)
		*n = ELEMENTSOF(tables);
	return tables;
}

const struct event_table *events_table_for_pmu(const char *pfm_pmu_name)
{
	if (!pfm_pmu_name)
		return NULL;
	for (size_t i = 0; i < ELEMENTSOF(tables); i++)
		for (size_t j = 0; j < EVENTS_MAX_PMUS && tables[i].pmus[j]; j++)
			if (strcmp(tables[i].pmus[j], pfm_pmu_name) == 0)
				return &tables[i];
	return NULL;
}

const struct event_table *events_table_by_model(const char *model)
{
	if (!model)
		return NULL;
	for (size_t i = 0; i < ELEMENTSOF(tables); i++)
		if (strcmp(tables[i].model, model) == 0)
			return &tables[i];
	return NULL;
}

const char *events_role_name(enum events_role role)
{
	static const char *const names[EVENTS_ROLE_MAX] = {
		[EVENTS_ROLE_N_RD] = "n_rd",   [EVENTS_ROLE_C_STORE] = "c_store",
		[EVENTS_ROLE_BE1] = "be1",     [EVENTS_ROLE_BE2] = "be2",
		[EVENTS_ROLE_BE3] = "be3",     [EVENTS_ROLE_CYCLES] = "cycles",
	};
	if ((unsigned)role >= EVENTS_ROLE_MAX)
		return "unknown";
	return names[role];
}

const char *events_formula_name(enum events_formula f)
{
	switch (f) {
	case EVENTS_FORMULA_NONE:
		return "none";
	case EVENTS_FORMULA_TMA:
		return "tma";
	case EVENTS_FORMULA_TMA36:
		return "tma-3.6";
	case EVENTS_FORMULA_STORE_PER_CYCLE:
		return "store-per-cycle";
	}
	return "unknown";
}

int events_full_name(const struct event_table *t, const char *pmu, enum events_role role,
		     bool tma36, char *buf, size_t len, struct pim_error *err)
{
	if (!t || (unsigned)role >= EVENTS_ROLE_MAX || !buf || len == 0)
		return err_set(err, -EINVAL, "events_full_name: invalid arguments");
	const char *name = t->event[role];
	if (tma36 && role == EVENTS_ROLE_BE1)
		name = t->be1_tma36;
	if (!name)
		return err_set(err, -ENOENT, "event table %s has no %s event%s", t->model,
			       events_role_name(role), tma36 ? " for the TMA-3.6 formula" : "");

	int n;
	if (strstr(name, "::"))
		n = snprintf(buf, len, "%s", name);
	else {
		if (!pmu)
			pmu = t->pmus[0];
		if (!pmu)
			return err_set(err, -EINVAL, "event table %s serves no PMU; name one",
				       t->model);
		n = snprintf(buf, len, "%s::%s", pmu, name);
	}
	if (n < 0 || (size_t)n >= len)
		return err_set(err, -ENAMETOOLONG, "event name for %s/%s does not fit %zu bytes",
			       t->model, events_role_name(role), len);
	return 0;
}

int events_f_store(enum events_formula f, const uint64_t v[EVENTS_ROLE_MAX], unsigned present,
		   double *out, struct pim_error *err)
{
	unsigned need;
	switch (f) {
	case EVENTS_FORMULA_TMA:
	case EVENTS_FORMULA_TMA36:
		need = EVENTS_ROLES_F_STORE;
		break;
	case EVENTS_FORMULA_STORE_PER_CYCLE:
		need = EVENTS_ROLE_BIT(EVENTS_ROLE_C_STORE) | EVENTS_ROLE_BIT(EVENTS_ROLE_CYCLES);
		break;
	default:
		return err_set(err, -EDOM, "f_store not evaluable: no store-bound event on this "
					   "host (formula none)");
	}
	for (unsigned r = 0; r < EVENTS_ROLE_MAX; r++)
		if ((need & EVENTS_ROLE_BIT(r)) && !(present & EVENTS_ROLE_BIT(r)))
			return err_set(err, -EDOM, "f_store (%s) needs the %s count, which is missing",
				       events_formula_name(f), events_role_name(r));

	/* long double keeps 64-bit counts exact enough and cannot overflow the sum */
	long double num = v[EVENTS_ROLE_C_STORE], den;
	if (f == EVENTS_FORMULA_STORE_PER_CYCLE)
		den = v[EVENTS_ROLE_CYCLES];
	else
		den = (long double)v[EVENTS_ROLE_BE1] + v[EVENTS_ROLE_BE2] + v[EVENTS_ROLE_BE3] + num;
	if (den <= 0)
		return err_set(err, -ERANGE, "f_store (%s): denominator is zero",
			       events_formula_name(f));
	*out = (double)(num / den);
	return 0;
}
