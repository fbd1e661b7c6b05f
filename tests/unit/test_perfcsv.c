/* SPDX-License-Identifier: MIT */
/*
 * test_perfcsv.c: `perf stat -x,` import (doc/design.md §4.4) on sample files in perf 6.1's layout.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "perfcsv.h"

static struct perfcsv_result res; /* ~17 KiB: not on the stack */
static struct pim_error err;

static int parse(const char *text)
{
	memset(&err, 0, sizeof err);
	return perfcsv_parse(text, strlen(text), &res, &err);
}

#define ROLE(r) EVENTS_ROLE_BIT(EVENTS_ROLE_##r)
#define EV(r) (&res.events[res.event_of[EVENTS_ROLE_##r]])

/* An Ice Lake server run with every role, as `perf stat -x, -o file` writes it. */
static const char icx_csv[] =
	"# started on Tue Mar  5 10:12:01 2024\n"
	"\n"
	"1234567,,icx::OFFCORE_REQUESTS:ALL_DATA_RD,1000000,100.00,,\n"
	"250000,,icx::EXE_ACTIVITY:BOUND_ON_STORES,1000000,100.00,,\n"
	"400000,,icx::CYCLE_ACTIVITY:STALLS_TOTAL,1000000,100.00,,\n"
	"150000,,icx::EXE_ACTIVITY:1_PORTS_UTIL,1000000,100.00,,\n"
	"200000,,icx::EXE_ACTIVITY:2_PORTS_UTIL,1000000,100.00,,\n"
	"3000000,,icx::CPU_CLK_UNHALTED:THREAD_P,1000000,100.00,,\n"
	"0.98,msec,task-clock,980512,100.00,0.962,CPUs utilized\n"
	"1019234,ns,duration_time,1019234,100.00,1.039,G/sec\n";

START_TEST(test_icx_full)
{
	ck_assert_msg(parse(icx_csv) == 0, "%s", err.msg);
	ck_assert_uint_eq(res.present, ROLE(N_RD) | ROLE(C_STORE) | ROLE(BE1) | ROLE(BE2) |
					       ROLE(BE3) | ROLE(CYCLES));
	ck_assert_uint_eq(res.value[EVENTS_ROLE_N_RD], 1234567);
	ck_assert_uint_eq(res.value[EVENTS_ROLE_C_STORE], 250000);
	ck_assert_uint_eq(res.value[EVENTS_ROLE_BE1], 400000);
	ck_assert_uint_eq(res.value[EVENTS_ROLE_BE2], 150000);
	ck_assert_uint_eq(res.value[EVENTS_ROLE_BE3], 200000);
	ck_assert_uint_eq(res.value[EVENTS_ROLE_CYCLES], 3000000);
	ck_assert_int_eq(res.formula, EVENTS_FORMULA_TMA);
	ck_assert(!res.multiplexed);
	ck_assert_uint_eq(res.n_events, 8);
	ck_assert_uint_eq(res.n_unknown, 0);

	ck_assert_uint_eq(EV(N_RD)->line, 3);
	ck_assert(EV(N_RD)->has_running && EV(N_RD)->has_pct);
	ck_assert_uint_eq(EV(N_RD)->time_running_ns, 1000000);
	ck_assert_double_eq_tol(EV(N_RD)->pct_running, 100.0, 1e-9);
	ck_assert_str_eq(EV(CYCLES)->name, "icx::CPU_CLK_UNHALTED:THREAD_P");

	/* duration_time wins over task-clock */
	ck_assert(res.has_t_host);
	ck_assert_int_eq(res.t_host_source, PERFCSV_TIME_DURATION);
	ck_assert_double_eq_tol(res.t_host_s, 1019234e-9, 1e-15);

	/* the counts feed C4: 250000 / (400000 + 150000 + 200000 + 250000) */
	double f;
	ck_assert_int_eq(events_f_store(res.formula, res.value, res.present, &f, &err), 0);
	ck_assert_double_eq_tol(f, 0.25, 1e-12);
}
END_TEST

/* What perf 6.1 printed on this VM (no PMU): cycles is <not supported>. */
START_TEST(test_not_supported_names_event)
{
	const char *vm = "0.85,msec,task-clock,851009,100.00,0.258,CPUs utilized\n"
			 "48,,page-faults,851009,100.00,56.404,K/sec\n"
			 "<not supported>,,cycles,0,100.00,,\n"
			 "3299204,ns,duration_time,3299204,100.00,3.877,G/sec\n";
	ck_assert_int_eq(parse(vm), -ENODATA);
	ck_assert_str_eq(err.msg, "perf stat CSV: line 3: event cycles is <not supported> in this "
				  "file; measure it on a host whose PMU counts it, or leave it out");

	ck_assert_int_eq(parse("<not counted>,,icx::OFFCORE_REQUESTS:ALL_DATA_RD,0,0.00,,\n"),
			 -ENODATA);
	ck_assert_ptr_nonnull(strstr(err.msg, "line 1: event icx::OFFCORE_REQUESTS:ALL_DATA_RD is "
					      "<not counted>"));
}
END_TEST

/* The same file without the unsupported line: only software events, nothing to import. */
START_TEST(test_unknown_only)
{
	const char *sw = "0.85,msec,task-clock,851009,100.00,0.258,CPUs utilized\n"
			 "48,,page-faults,851009,100.00,56.404,K/sec\n"
			 "3299204,ns,duration_time,3299204,100.00,3.877,G/sec\n";
	ck_assert_int_eq(parse(sw), -ENOENT);
	ck_assert_str_eq(err.msg, "perf stat CSV: no event of the pimd event tables among 3 events "
				  "(task-clock, page-faults, duration_time); name them as libpfm4 or "
				  "perf does, e.g. icx::OFFCORE_REQUESTS:ALL_DATA_RD");

	ck_assert_int_eq(parse("# only a comment\n\n"), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err.msg, "among 0 events (none)"));
	ck_assert_int_eq(perfcsv_parse("", 0, &res, &err), -ENOENT);
}
END_TEST

/* Spellings: perf-json, cpu/…/ with modifiers, other PMU prefixes, lower case. */
START_TEST(test_name_variants)
{
	bool t36;
	ck_assert_int_eq(perfcsv_role_of("icx::OFFCORE_REQUESTS:ALL_DATA_RD", &t36), EVENTS_ROLE_N_RD);
	ck_assert_int_eq(perfcsv_role_of("OFFCORE_REQUESTS:ALL_DATA_RD", NULL), EVENTS_ROLE_N_RD);
	ck_assert_int_eq(perfcsv_role_of("offcore_requests.all_data_rd", NULL), EVENTS_ROLE_N_RD);
	ck_assert_int_eq(perfcsv_role_of("cpu/offcore_requests.all_data_rd/u", NULL),
			 EVENTS_ROLE_N_RD);
	ck_assert_int_eq(perfcsv_role_of("spr::OFFCORE_REQUESTS:DATA_RD", NULL), EVENTS_ROLE_N_RD);
	ck_assert_int_eq(perfcsv_role_of("exe_activity.bound_on_stores:u", NULL),
			 EVENTS_ROLE_C_STORE);
	ck_assert_int_eq(perfcsv_role_of("cpu_core/EXE_ACTIVITY.BOUND_ON_STORES/", NULL),
			 EVENTS_ROLE_C_STORE);
	ck_assert_int_eq(perfcsv_role_of("skx::cycle_activity:stalls_total", NULL), EVENTS_ROLE_BE1);
	ck_assert_int_eq(perfcsv_role_of("EXE_ACTIVITY.1_PORTS_UTIL", NULL), EVENTS_ROLE_BE2);
	ck_assert_int_eq(perfcsv_role_of(" exe_activity.2_ports_util:uk ", NULL), EVENTS_ROLE_BE3);
	ck_assert_int_eq(perfcsv_role_of("cycles", NULL), EVENTS_ROLE_CYCLES);
	ck_assert_int_eq(perfcsv_role_of("cycles:u", NULL), EVENTS_ROLE_CYCLES);
	ck_assert_int_eq(perfcsv_role_of("cpu-cycles", NULL), EVENTS_ROLE_CYCLES);
	ck_assert_int_eq(perfcsv_role_of("cpu_clk_unhalted.thread", NULL), EVENTS_ROLE_CYCLES);
	ck_assert_int_eq(perfcsv_role_of("amd64_fam19h_zen3::CYCLES_NOT_IN_HALT", NULL),
			 EVENTS_ROLE_CYCLES);

	ck_assert_int_eq(perfcsv_role_of("icx::EXE_ACTIVITY:EXE_BOUND_0_PORTS", &t36),
			 EVENTS_ROLE_BE1);
	ck_assert(t36);
	ck_assert_int_eq(perfcsv_role_of("icx::CYCLE_ACTIVITY:STALLS_TOTAL", &t36), EVENTS_ROLE_BE1);
	ck_assert(!t36);

	/* not mapped: raw codes, attributes that change the event, other events */
	ck_assert_int_eq(perfcsv_role_of("r80a6", NULL), -1);
	ck_assert_int_eq(perfcsv_role_of("cpu/event=0xa6,umask=0x40,cmask=2/", NULL), -1);
	ck_assert_int_eq(perfcsv_role_of("icx::CYCLE_ACTIVITY:STALLS_TOTAL:c=1", NULL), -1);
	ck_assert_int_eq(perfcsv_role_of("instructions", NULL), -1);
	ck_assert_int_eq(perfcsv_role_of("", NULL), -1);
}
END_TEST

/* Every name of every row maps back to its own role: no name serves two roles. */
START_TEST(test_tables_round_trip)
{
	size_t n;
	const struct event_table *t = events_tables(&n);
	for (size_t i = 0; i < n; i++) {
		for (int r = 0; r < EVENTS_ROLE_MAX; r++) {
			if (!t[i].event[r])
				continue;
			char name[160];
			snprintf(name, sizeof name, "%s%s%s", t[i].pmus[0] ? t[i].pmus[0] : "",
				 t[i].pmus[0] ? "::" : "", t[i].event[r]);
			bool t36 = true;
			ck_assert_msg(perfcsv_role_of(name, &t36) == r && !t36,
				      "%s (row %s) does not map back to %s", name, t[i].model,
				      events_role_name(r));
		}
		if (t[i].be1_tma36 && !strstr(t[i].be1_tma36, "perf_raw::")) {
			bool t36 = false;
			ck_assert_int_eq(perfcsv_role_of(t[i].be1_tma36, &t36), EVENTS_ROLE_BE1);
			ck_assert(t36);
		}
	}
}
END_TEST

/* perf stat -r 5 adds a variance field after the event. */
START_TEST(test_repeat_variance)
{
	const char *csv = "1234567,,icx::OFFCORE_REQUESTS:ALL_DATA_RD,3.04%,1000000,100.00,,\n"
			  "0.75,msec,task-clock,0.69%,753005,100.00,0.522,CPUs utilized\n";
	ck_assert_msg(parse(csv) == 0, "%s", err.msg);
	ck_assert(EV(N_RD)->has_variance);
	ck_assert_double_eq_tol(EV(N_RD)->variance_pct, 3.04, 1e-9);
	ck_assert_uint_eq(EV(N_RD)->time_running_ns, 1000000);
	ck_assert_double_eq_tol(EV(N_RD)->pct_running, 100.0, 1e-9);
	/* task-clock only: T_host from it, msec */
	ck_assert(res.has_t_host);
	ck_assert_int_eq(res.t_host_source, PERFCSV_TIME_TASK_CLOCK);
	ck_assert_double_eq_tol(res.t_host_s, 0.75e-3, 1e-12);
	ck_assert_int_eq(res.formula, EVENTS_FORMULA_NONE); /* no store events */
}
END_TEST

/* Formulas implied: TMA-3.6, both be1 forms, the AMD proxy; multiplexing is flagged. */
START_TEST(test_formulas)
{
	const char *tma36 = "100,,icx::EXE_ACTIVITY:BOUND_ON_STORES,10,100.00,,\n"
			    "200,,icx::EXE_ACTIVITY:EXE_BOUND_0_PORTS,10,100.00,,\n"
			    "300,,icx::EXE_ACTIVITY:1_PORTS_UTIL,10,100.00,,\n"
			    "400,,icx::EXE_ACTIVITY:2_PORTS_UTIL,10,100.00,,\n";
	ck_assert_msg(parse(tma36) == 0, "%s", err.msg);
	ck_assert_int_eq(res.formula, EVENTS_FORMULA_TMA36);
	ck_assert_uint_eq(res.value[EVENTS_ROLE_BE1], 200);
	ck_assert(!res.has_be1_tma36);

	const char *both = "100,,icx::EXE_ACTIVITY:BOUND_ON_STORES,10,100.00,,\n"
			   "200,,icx::EXE_ACTIVITY:EXE_BOUND_0_PORTS,10,100.00,,\n"
			   "300,,icx::EXE_ACTIVITY:1_PORTS_UTIL,10,100.00,,\n"
			   "400,,icx::EXE_ACTIVITY:2_PORTS_UTIL,10,100.00,,\n"
			   "500,,icx::CYCLE_ACTIVITY:STALLS_TOTAL,10,100.00,,\n";
	ck_assert_msg(parse(both) == 0, "%s", err.msg);
	ck_assert_int_eq(res.formula, EVENTS_FORMULA_TMA);
	ck_assert_uint_eq(res.value[EVENTS_ROLE_BE1], 500);
	ck_assert(res.has_be1_tma36);
	ck_assert_uint_eq(res.be1_tma36, 200);
	ck_assert_uint_eq(EV(BE1)->line, 5);

	const char *zen3 =
		"812345,,amd64_fam19h_zen3::ANY_DATA_CACHE_FILLS_FROM_SYSTEM:MEM_IO_LCL:MEM_IO_RMT,"
		"2000000,50.00,,\n"
		"30000,,amd64_fam19h_zen3::DISPATCH_RESOURCE_STALL_CYCLES_1:STORE_QUEUE_RSRC_STALL,"
		"2000000,50.00,,\n"
		"120000,,amd64_fam19h_zen3::CYCLES_NOT_IN_HALT,2000000,50.00,,\n";
	ck_assert_msg(parse(zen3) == 0, "%s", err.msg);
	ck_assert_int_eq(res.formula, EVENTS_FORMULA_STORE_PER_CYCLE);
	ck_assert(res.multiplexed); /* 50 %: perf scaled these counts */
	ck_assert(!res.has_t_host);
	double f;
	ck_assert_int_eq(events_f_store(res.formula, res.value, res.present, &f, &err), 0);
	ck_assert_double_eq_tol(f, 0.25, 1e-12);

	/* Intel c_store with cycles but no backend events: no formula (not the AMD proxy) */
	ck_assert_int_eq(parse("1,,icx::EXE_ACTIVITY:BOUND_ON_STORES,1,100.00,,\n"
			       "4,,cycles,1,100.00,,\n"), 0);
	ck_assert_int_eq(res.formula, EVENTS_FORMULA_NONE);
}
END_TEST

START_TEST(test_duplicates)
{
	ck_assert_int_eq(parse("1,,icx::OFFCORE_REQUESTS:ALL_DATA_RD,1,100.00,,\n"
			       "# comment\n"
			       "2,,cpu/offcore_requests.all_data_rd/u,1,100.00,,\n"), -EINVAL);
	ck_assert_str_eq(err.msg, "perf stat CSV: line 3: duplicate n_rd event "
				  "cpu/offcore_requests.all_data_rd/u (first on line 1 as "
				  "icx::OFFCORE_REQUESTS:ALL_DATA_RD)");

	ck_assert_int_eq(parse("1,,cycles,1,100.00,,\n"
			       "1,ns,duration_time,1,100.00,,\n"
			       "1,ns,duration_time,1,100.00,,\n"), -EINVAL);
	ck_assert_str_eq(err.msg, "perf stat CSV: line 3: duration_time given twice (first on "
				  "line 2)");

	ck_assert_int_eq(parse("1,,icx::EXE_ACTIVITY:EXE_BOUND_0_PORTS,1,100.00,,\n"
			       "2,,icx::CYCLE_ACTIVITY:STALLS_TOTAL,1,100.00,,\n"
			       "3,,skx::CYCLE_ACTIVITY:STALLS_TOTAL,1,100.00,,\n"), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "line 3: duplicate be1"));
}
END_TEST

START_TEST(test_malformed)
{
	ck_assert_int_eq(parse("1,,cycles,1,100.00,,\n12345\n"), -EBADMSG);
	ck_assert_str_eq(err.msg, "perf stat CSV: line 2: 1 field, expected at least "
				  "value,unit,event (is the separator ','?)");
	ck_assert_int_eq(parse("12ab,,cycles,1,100.00,,\n"), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, "line 1: value '12ab' of cycles is not a "
					      "non-negative number"));
	ck_assert_int_eq(parse("-5,,cycles,1,100.00,,\n"), -EBADMSG);
	ck_assert_int_eq(parse("5,,,1,100.00,,\n"), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, "line 1: empty event name"));
	ck_assert_int_eq(parse("5,,cycles,x,100.00,,\n"), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, "run-time 'x' of cycles is not an integer"));
	ck_assert_int_eq(parse("5,,cycles,1,150.00,,\n"), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, "percentage '150.00' of cycles is not in 0..100"));
	ck_assert_int_eq(parse("5,,cycles,1,100.00,,\n5,s,duration_time,1,100.00,,\n"), 0);
	ck_assert_int_eq(parse("5,,cycles,1,100.00,,\n5,furlong,duration_time,1,100.00,,\n"),
			 -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, "unit 'furlong' of duration_time"));
	/* perf stat -I 1000: a timestamp field in front */
	ck_assert_int_eq(parse("     1.001175345,1234,,icx::OFFCORE_REQUESTS:ALL_DATA_RD,1000,"
			       "100.00,,\n"), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, "line 1: 8 fields; only the aggregated"));

	const char nul[] = "5,,cycles\0,1,100.00,,\n";
	ck_assert_int_eq(perfcsv_parse(nul, sizeof nul - 1, &res, &err), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, "NUL byte"));

	char *big = malloc(PERFCSV_MAX_BYTES + 1);
	ck_assert_ptr_nonnull(big);
	memset(big, '#', PERFCSV_MAX_BYTES + 1);
	ck_assert_int_eq(perfcsv_parse(big, PERFCSV_MAX_BYTES + 1, &res, &err), -EFBIG);
	memset(big, 'x', PERFCSV_MAX_LINE + 10);
	ck_assert_int_eq(perfcsv_parse(big, PERFCSV_MAX_LINE + 10, &res, &err), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err.msg, "line 1: longer than"));
	free(big);

	/* too many events */
	size_t cap = (PERFCSV_MAX_EVENTS + 1) * 40 + 64;
	char *many = malloc(cap);
	size_t used = 0;
	used += (size_t)snprintf(many + used, cap - used, "1,,cycles,1,100.00,,\n");
	for (int i = 0; i < PERFCSV_MAX_EVENTS; i++)
		used += (size_t)snprintf(many + used, cap - used, "1,,other%d,1,100.00,,\n", i);
	ck_assert_int_eq(perfcsv_parse(many, used, &res, &err), -E2BIG);
	ck_assert_ptr_nonnull(strstr(err.msg, "more than 64 events"));
	free(many);
}
END_TEST

/* Tolerated: raw events with commas, CRLF line ends, unknown events beside known ones, no
 * trailing newline, the short layout of old perf (value,unit,event). */
START_TEST(test_tolerated)
{
	const char *csv = "4321,,cpu/event=0xa6,umask=0x40,cmask=2/u,777,100.00,,\r\n"
			  "\r\n"
			  "99,,instructions:u,777,100.00,0.50,insn per cycle\r\n"
			  "1000,,cycles:u,777,100.00,,";
	ck_assert_msg(parse(csv) == 0, "%s", err.msg);
	ck_assert_uint_eq(res.n_events, 3);
	ck_assert_uint_eq(res.n_unknown, 2);
	ck_assert_str_eq(res.events[0].name, "cpu/event=0xa6,umask=0x40,cmask=2/u");
	ck_assert_int_eq(res.events[0].role, -1);
	ck_assert_uint_eq(res.events[0].time_running_ns, 777); /* fields stayed aligned */
	ck_assert_uint_eq(res.present, ROLE(CYCLES));
	ck_assert_uint_eq(res.value[EVENTS_ROLE_CYCLES], 1000);
	ck_assert_uint_eq(EV(CYCLES)->line, 4);

	ck_assert_msg(parse("1000,,cycles") == 0, "%s", err.msg);
	ck_assert(!EV(CYCLES)->has_running && !EV(CYCLES)->has_pct);

	/* counts above 2^53 stay exact */
	ck_assert_int_eq(parse("18446744073709551615,,cycles,1,100.00,,\n"), 0);
	ck_assert_uint_eq(res.value[EVENTS_ROLE_CYCLES], UINT64_MAX);
}
END_TEST

static Suite *perfcsv_suite(void)
{
	Suite *s = suite_create("perfcsv");
	TCase *tc = tcase_create("core");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_icx_full);
	tcase_add_test(tc, test_not_supported_names_event);
	tcase_add_test(tc, test_unknown_only);
	tcase_add_test(tc, test_name_variants);
	tcase_add_test(tc, test_tables_round_trip);
	tcase_add_test(tc, test_repeat_variance);
	tcase_add_test(tc, test_formulas);
	tcase_add_test(tc, test_duplicates);
	tcase_add_test(tc, test_malformed);
	tcase_add_test(tc, test_tolerated);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(perfcsv_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
