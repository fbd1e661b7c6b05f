/* SPDX-License-Identifier: MIT */
/*
 * test_events.c: the event tables of doc/design.md §4.1 encode, offline, to the configs recorded in
 * doc/pmu.md; detection and the f_store formulas.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "counters.h"
#include "events.h"

/* Expected encodings (doc/pmu.md, checked with libpfm4 4.13). pmu "perf" stands for rows
 * whose names carry their own prefix. */
struct expect {
	const char *pmu;
	int role;       /* enum events_role; -2: the TMA-3.6 be1 */
	uint32_t type;
	uint64_t config;
};

#define T36 (-2)
#define RAW PERF_TYPE_RAW

static const struct expect expects[] = {
	/* icx / icl: one table */
	{ "icx", EVENTS_ROLE_N_RD, RAW, 0x8b0 },     { "icx", EVENTS_ROLE_C_STORE, RAW, 0x20040a6 },
	{ "icx", EVENTS_ROLE_BE1, RAW, 0x40004a3 },  { "icx", EVENTS_ROLE_BE2, RAW, 0x2a6 },
	{ "icx", EVENTS_ROLE_BE3, RAW, 0x4a6 },      { "icx", EVENTS_ROLE_CYCLES, RAW, 0x3c },
	{ "icx", T36, RAW, 0x80a6 },
	{ "icl", EVENTS_ROLE_N_RD, RAW, 0x8b0 },     { "icl", EVENTS_ROLE_C_STORE, RAW, 0x20040a6 },
	{ "icl", EVENTS_ROLE_BE1, RAW, 0x40004a3 },  { "icl", EVENTS_ROLE_BE2, RAW, 0x2a6 },
	{ "icl", EVENTS_ROLE_BE3, RAW, 0x4a6 },      { "icl", EVENTS_ROLE_CYCLES, RAW, 0x3c },
	{ "icl", T36, RAW, 0x80a6 },
	/* skx, with skl and clx on the same table */
	{ "skx", EVENTS_ROLE_N_RD, RAW, 0x8b0 },     { "skx", EVENTS_ROLE_C_STORE, RAW, 0x40a6 },
	{ "skx", EVENTS_ROLE_BE1, RAW, 0x40004a3 },  { "skx", EVENTS_ROLE_BE2, RAW, 0x2a6 },
	{ "skx", EVENTS_ROLE_BE3, RAW, 0x4a6 },      { "skx", EVENTS_ROLE_CYCLES, RAW, 0x3c },
	{ "skx", T36, RAW, 0x1a6 },
	{ "skl", EVENTS_ROLE_N_RD, RAW, 0x8b0 },     { "skl", EVENTS_ROLE_C_STORE, RAW, 0x40a6 },
	{ "skl", EVENTS_ROLE_BE1, RAW, 0x40004a3 },  { "skl", EVENTS_ROLE_BE2, RAW, 0x2a6 },
	{ "skl", EVENTS_ROLE_BE3, RAW, 0x4a6 },      { "skl", EVENTS_ROLE_CYCLES, RAW, 0x3c },
	{ "skl", T36, RAW, 0x1a6 },
	{ "clx", EVENTS_ROLE_N_RD, RAW, 0x8b0 },     { "clx", EVENTS_ROLE_C_STORE, RAW, 0x40a6 },
	{ "clx", EVENTS_ROLE_BE1, RAW, 0x40004a3 },  { "clx", EVENTS_ROLE_BE2, RAW, 0x2a6 },
	{ "clx", EVENTS_ROLE_BE3, RAW, 0x4a6 },      { "clx", EVENTS_ROLE_CYCLES, RAW, 0x3c },
	{ "clx", T36, RAW, 0x1a6 },
	/* spr: DATA_RD for ALL_DATA_RD, raw 0x80a6 for EXE_BOUND_0_PORTS */
	{ "spr", EVENTS_ROLE_N_RD, RAW, 0x821 },     { "spr", EVENTS_ROLE_C_STORE, RAW, 0x20040a6 },
	{ "spr", EVENTS_ROLE_BE1, RAW, 0x40004a3 },  { "spr", EVENTS_ROLE_BE2, RAW, 0x2a6 },
	{ "spr", EVENTS_ROLE_BE3, RAW, 0x4a6 },      { "spr", EVENTS_ROLE_CYCLES, RAW, 0x3c },
	{ "spr", T36, RAW, 0x80a6 },
	/* AMD proxies */
	{ "amd64_fam19h_zen3", EVENTS_ROLE_N_RD, RAW, 0x4844 },
	{ "amd64_fam19h_zen3", EVENTS_ROLE_C_STORE, RAW, 0x4ae },
	{ "amd64_fam19h_zen3", EVENTS_ROLE_CYCLES, RAW, 0x76 },
	{ "amd64_fam19h_zen4", EVENTS_ROLE_N_RD, RAW, 0x4844 },
	{ "amd64_fam19h_zen4", EVENTS_ROLE_C_STORE, RAW, 0x4ae },
	{ "amd64_fam19h_zen4", EVENTS_ROLE_CYCLES, RAW, 0x76 },
	/* generic perf:: names: LL read misses (HW_CACHE LL | READ<<8 | MISS<<16), cycles */
	{ "perf", EVENTS_ROLE_N_RD, PERF_TYPE_HW_CACHE, 0x10002 },
	{ "perf", EVENTS_ROLE_CYCLES, PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES },
};

static const struct expect *find_expect(const char *pmu, int role)
{
	for (size_t i = 0; i < ELEMENTSOF(expects); i++)
		if (strcmp(expects[i].pmu, pmu) == 0 && expects[i].role == role)
			return &expects[i];
	return NULL;
}

static void encode_inactive(void)
{
	/* must precede the first pfm_initialize() of this (forked) test process */
	setenv("LIBPFM_ENCODE_INACTIVE", "1", 1);
}

/* Every role of every row, for every PMU it serves, encodes to the recorded config. */
START_TEST(test_encode_every_row_offline)
{
	encode_inactive();
	size_t n;
	const struct event_table *t = events_tables(&n);
	unsigned checked = 0;

	for (size_t i = 0; i < n; i++) {
		const char *pmus[EVENTS_MAX_PMUS + 1] = { NULL };
		size_t np = 0;
		for (; np < EVENTS_MAX_PMUS && t[i].pmus[np]; np++)
			pmus[np] = t[i].pmus[np];
		if (np == 0)
			pmus[np++] = "perf";

		for (size_t p = 0; p < np; p++) {
			for (int r = T36; r < EVENTS_ROLE_MAX; r++) {
				if (r == -1)
					continue;
				bool tma36 = r == T36;
				enum events_role role = tma36 ? EVENTS_ROLE_BE1 : (enum events_role)r;
				const char *ev = tma36 ? t[i].be1_tma36 : t[i].event[role];
				if (!ev)
					continue;
				char name[256];
				struct pim_error err = { 0 };
				int rc = events_full_name(&t[i], strcmp(pmus[p], "perf") ? pmus[p] : NULL,
							  role, tma36, name, sizeof name, &err);
				ck_assert_msg(rc == 0, "row %s: %s", t[i].model, err.msg);

				struct perf_event_attr attr;
				rc = counters_encode_event(name, &attr, &err);
				ck_assert_msg(rc == 0, "row %s, %s%s: '%s' does not encode: %s",
					      t[i].model, events_role_name(role),
					      tma36 ? " (TMA-3.6)" : "", name, err.msg);

				const struct expect *x = find_expect(pmus[p], r);
				ck_assert_msg(x, "row %s: no recorded encoding for %s on %s (%s)",
					      t[i].model, events_role_name(role), pmus[p], name);
				ck_assert_msg(attr.type == x->type && attr.config == x->config,
					      "%s: type %u config %#llx, doc/pmu.md says type %u "
					      "config %#llx",
					      name, attr.type, (unsigned long long)attr.config,
					      x->type, (unsigned long long)x->config);
				ck_assert_uint_eq(attr.size, sizeof attr);
				ck_assert_uint_eq(attr.exclude_kernel, 1);
				checked++;
			}
		}
	}
	/* and nothing recorded went unchecked (a row lost an event) */
	ck_assert_uint_eq(checked, ELEMENTSOF(expects));
}
END_TEST

/* The names the SPR row maps around really are missing from libpfm4 4.13. */
START_TEST(test_spr_missing_names)
{
	encode_inactive();
	struct perf_event_attr attr;
	struct pim_error err = { 0 };

	ck_assert_int_lt(counters_encode_event("spr::OFFCORE_REQUESTS:ALL_DATA_RD", &attr, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "spr::OFFCORE_REQUESTS:ALL_DATA_RD"));
	ck_assert_int_lt(counters_encode_event("spr::EXE_ACTIVITY:EXE_BOUND_0_PORTS", &attr, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "EXE_BOUND_0_PORTS"));
	ck_assert_ptr_nonnull(strstr(err.msg, "unit mask"));

	const struct event_table *spr = events_table_for_pmu("spr");
	ck_assert_ptr_nonnull(spr);
	ck_assert_str_eq(spr->event[EVENTS_ROLE_N_RD], "OFFCORE_REQUESTS:DATA_RD");
	ck_assert_str_eq(spr->be1_tma36, "perf_raw::r80a6");
	ck_assert_ptr_nonnull(strstr(spr->note, "raw 0x80a6"));
}
END_TEST

START_TEST(test_unknown_event_message)
{
	encode_inactive();
	struct perf_event_attr attr;
	struct pim_error err = { 0 };

	ck_assert_int_eq(counters_encode_event("icx::NO_SUCH_EVENT", &attr, &err), -ENOENT);
	ck_assert_int_eq(err.code, -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "cannot encode event 'icx::NO_SUCH_EVENT'"));
	ck_assert_ptr_nonnull(strstr(err.msg, "event not found"));
	ck_assert_ptr_nonnull(strstr(err.msg, "PMU prefix"));

	ck_assert_int_eq(counters_encode_event("icx::EXE_ACTIVITY:NO_SUCH_UMASK", &attr, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "NO_SUCH_UMASK"));

	ck_assert_int_eq(counters_encode_event("", &attr, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "empty event name"));
}
END_TEST

START_TEST(test_table_lookup)
{
	const struct event_table *icx = events_table_by_model("icx");
	ck_assert_ptr_nonnull(icx);
	ck_assert_ptr_eq(events_table_for_pmu("icx"), icx);
	ck_assert_ptr_eq(events_table_for_pmu("icl"), icx);
	ck_assert_ptr_eq(events_table_for_pmu("skl"), events_table_by_model("skx"));
	ck_assert_ptr_eq(events_table_for_pmu("clx"), events_table_by_model("skx"));
	ck_assert_ptr_eq(events_table_for_pmu("amd64_fam19h_zen3"), events_table_by_model("zen3"));
	ck_assert_ptr_eq(events_table_for_pmu("amd64_fam19h_zen4"), events_table_by_model("zen4"));
	ck_assert_ptr_null(events_table_for_pmu("adl_glc"));
	ck_assert_ptr_null(events_table_for_pmu(NULL));
	ck_assert_ptr_null(events_table_by_model("zen5"));
	ck_assert_ptr_nonnull(events_table_by_model("generic"));
	ck_assert_ptr_nonnull(events_table_by_model("software"));
}
END_TEST

/* The data says what the brief asks: formulas, proxies, notes. */
START_TEST(test_table_data)
{
	size_t n;
	const struct event_table *t = events_tables(&n);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(t[i].note && *t[i].note, "row %s has no note", t[i].model);

	const char *intel[] = { "icx", "skx", "spr" };
	for (size_t i = 0; i < ELEMENTSOF(intel); i++) {
		const struct event_table *r = events_table_by_model(intel[i]);
		ck_assert_int_eq(r->formula, EVENTS_FORMULA_TMA);
		ck_assert_ptr_nonnull(r->be1_tma36);
		ck_assert_str_eq(r->event[EVENTS_ROLE_BE1], "CYCLE_ACTIVITY:STALLS_TOTAL");
		ck_assert_uint_eq(r->proxy_roles, 0);
	}
	const char *amd[] = { "zen3", "zen4" };
	for (size_t i = 0; i < ELEMENTSOF(amd); i++) {
		const struct event_table *r = events_table_by_model(amd[i]);
		ck_assert_int_eq(r->formula, EVENTS_FORMULA_STORE_PER_CYCLE);
		ck_assert_ptr_null(r->event[EVENTS_ROLE_BE1]);
		ck_assert_ptr_null(r->be1_tma36);
		ck_assert_uint_eq(r->proxy_roles, EVENTS_ROLE_BIT(EVENTS_ROLE_N_RD) |
							  EVENTS_ROLE_BIT(EVENTS_ROLE_C_STORE));
		ck_assert_ptr_nonnull(strstr(r->note, "proxy"));
	}
	ck_assert_int_eq(events_table_by_model("generic")->formula, EVENTS_FORMULA_NONE);
	ck_assert_int_eq(events_table_by_model("software")->formula, EVENTS_FORMULA_NONE);
}
END_TEST

START_TEST(test_full_name)
{
	char buf[128];
	struct pim_error err = { 0 };
	const struct event_table *icx = events_table_by_model("icx");

	ck_assert_int_eq(events_full_name(icx, "icl", EVENTS_ROLE_C_STORE, false, buf, sizeof buf,
					  &err), 0);
	ck_assert_str_eq(buf, "icl::EXE_ACTIVITY:BOUND_ON_STORES");
	ck_assert_int_eq(events_full_name(icx, NULL, EVENTS_ROLE_BE1, true, buf, sizeof buf, &err), 0);
	ck_assert_str_eq(buf, "icx::EXE_ACTIVITY:EXE_BOUND_0_PORTS");
	ck_assert_int_eq(events_full_name(icx, NULL, EVENTS_ROLE_BE2, true, buf, sizeof buf, &err), 0);
	ck_assert_str_eq(buf, "icx::EXE_ACTIVITY:1_PORTS_UTIL"); /* tma36 only changes be1 */
	ck_assert_int_eq(events_full_name(events_table_by_model("spr"), NULL, EVENTS_ROLE_BE1, true,
					  buf, sizeof buf, &err), 0);
	ck_assert_str_eq(buf, "perf_raw::r80a6");

	ck_assert_int_eq(events_full_name(events_table_by_model("zen3"), NULL, EVENTS_ROLE_BE1,
					  false, buf, sizeof buf, &err), -ENOENT);
	ck_assert_str_eq(err.msg, "event table zen3 has no be1 event");
	ck_assert_int_eq(events_full_name(icx, NULL, EVENTS_ROLE_N_RD, false, buf, 8, &err),
			 -ENAMETOOLONG);
	ck_assert_ptr_nonnull(strstr(err.msg, "does not fit"));
}
END_TEST

/* Real detection on this host: whatever it finds must be self-consistent. */
START_TEST(test_detect_host)
{
	struct events_host h;
	struct pim_error err = { 0 };
	ck_assert_int_eq(counters_detect_pmu(&h, &err), 0);
	ck_assert_ptr_nonnull(h.table);
	ck_assert(h.reason[0]);
	if (h.pmu[0]) {
		ck_assert_ptr_eq(events_table_for_pmu(h.pmu), h.table);
		ck_assert_ptr_nonnull(strstr(h.reason, h.pmu));
		ck_assert_uint_ge(h.n_core_pmus, 1);
	} else {
		ck_assert_str_eq(h.table->model, "generic");
		ck_assert_ptr_nonnull(strstr(h.reason, "generic"));
	}
	printf("test_events: detected: %s\n", h.reason);
}
END_TEST

START_TEST(test_f_store)
{
	uint64_t v[EVENTS_ROLE_MAX] = { 0 };
	unsigned all = EVENTS_ROLES_F_STORE | EVENTS_ROLE_BIT(EVENTS_ROLE_CYCLES);
	struct pim_error err = { 0 };
	double f;

	/* doc/design.md §3 C4: c_store / (be1 + be2 + be3 + c_store) = 30 / (10 + 20 + 40 + 30) */
	v[EVENTS_ROLE_C_STORE] = 30;
	v[EVENTS_ROLE_BE1] = 10;
	v[EVENTS_ROLE_BE2] = 20;
	v[EVENTS_ROLE_BE3] = 40;
	v[EVENTS_ROLE_CYCLES] = 120;
	ck_assert_int_eq(events_f_store(EVENTS_FORMULA_TMA, v, all, &f, &err), 0);
	ck_assert_double_eq_tol(f, 0.3, 1e-12);
	ck_assert_int_eq(events_f_store(EVENTS_FORMULA_TMA36, v, all, &f, &err), 0);
	ck_assert_double_eq_tol(f, 0.3, 1e-12);
	/* AMD proxy: 30 / 120 */
	ck_assert_int_eq(events_f_store(EVENTS_FORMULA_STORE_PER_CYCLE, v, all, &f, &err), 0);
	ck_assert_double_eq_tol(f, 0.25, 1e-12);

	/* huge counts do not overflow */
	v[EVENTS_ROLE_C_STORE] = v[EVENTS_ROLE_BE1] = v[EVENTS_ROLE_BE2] = v[EVENTS_ROLE_BE3] =
		UINT64_MAX;
	ck_assert_int_eq(events_f_store(EVENTS_FORMULA_TMA, v, all, &f, &err), 0);
	ck_assert_double_eq_tol(f, 0.25, 1e-12);

	ck_assert_int_eq(events_f_store(EVENTS_FORMULA_NONE, v, all, &f, &err), -EDOM);
	ck_assert_ptr_nonnull(strstr(err.msg, "not evaluable"));
	ck_assert_int_eq(events_f_store(EVENTS_FORMULA_TMA, v,
					all & ~EVENTS_ROLE_BIT(EVENTS_ROLE_BE2), &f, &err), -EDOM);
	ck_assert_str_eq(err.msg, "f_store (tma) needs the be2 count, which is missing");
	memset(v, 0, sizeof v);
	ck_assert_int_eq(events_f_store(EVENTS_FORMULA_TMA, v, all, &f, &err), -ERANGE);
	ck_assert_ptr_nonnull(strstr(err.msg, "denominator is zero"));
}
END_TEST

static Suite *events_suite(void)
{
	Suite *s = suite_create("events");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_encode_every_row_offline);
	tcase_add_test(tc, test_spr_missing_names);
	tcase_add_test(tc, test_unknown_event_message);
	tcase_add_test(tc, test_table_lookup);
	tcase_add_test(tc, test_table_data);
	tcase_add_test(tc, test_full_name);
	tcase_add_test(tc, test_detect_host);
	tcase_add_test(tc, test_f_store);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(events_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
