/* SPDX-License-Identifier: MIT */
/*
 * perfcsv.h: import of `perf stat -x,` output measured elsewhere (doc/design.md §4.4).
 *
 * Accepted: the aggregated CSV of perf stat (value,unit,event,run-time,percentage[,metric
 * value,metric unit]), also with -r N (a variance field "x.xx%" after the event). Lines that are
 * empty or start with '#' are skipped. Interval (-I), per-CPU (-A), per-socket/core/die and
 * cgroup (-G) layouts add fields and are rejected with a message.
 *
 * Event names map to the roles of doc/design.md §3 through every row of the event tables (events.h):
 * with or without a PMU prefix ("icx::"), inside "cpu/…/", with perf modifiers (":u"), perf-json
 * spelling ("exe_activity.bound_on_stores"), case-insensitive. Plus perf's own names for cycles
 * ("cycles", "cpu-cycles", "cpu_clk_unhalted.thread") and "LLC-load-misses" (generic n_rd proxy).
 * Raw codes ("r80a6", "cpu/event=0xa6,umask=0x80/") are not mapped: their meaning depends on the
 * PMU.
 *
 * T_host: a `duration_time` line (wall time, ns) if present, else `task-clock` (CPU time of the
 * counted task, msec: equals wall time only for a single-threaded region that never sleeps).
 * With -r N both are means per run, like the counts.
 */
#ifndef PIMD_PERFCSV_H
#define PIMD_PERFCSV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "events.h"
#include "util.h"

#define PERFCSV_MAX_BYTES (1u << 20) /* a perf stat file is a few KiB */
#define PERFCSV_MAX_LINE 4096
#define PERFCSV_MAX_EVENTS 64
#define PERFCSV_NAME_MAX 128

enum perfcsv_time_source {
	PERFCSV_TIME_NONE,
	PERFCSV_TIME_DURATION,   /* duration_time */
	PERFCSV_TIME_TASK_CLOCK, /* task-clock */
};

/* One event line of the file. */
struct perfcsv_event {
	char name[PERFCSV_NAME_MAX]; /* as written (truncated if longer) */
	char unit[16];
	unsigned line;               /* 1-based line number */
	int role;                    /* enum events_role, -1 when not a role event */
	bool tma36;                  /* role be1 in its TMA-3.6 form (EXE_BOUND_0_PORTS) */
	bool is_time;                /* duration_time or task-clock */
	uint64_t count;              /* value rounded to an integer (counts) */
	double value;                /* value as printed (msec for task-clock) */
	bool has_running;
	uint64_t time_running_ns;    /* perf's run-time field */
	bool has_pct;
	double pct_running;          /* perf's percentage field; < 100: perf scaled the count */
	bool has_variance;
	double variance_pct;         /* -r N only */
};

struct perfcsv_result {
	uint64_t value[EVENTS_ROLE_MAX];       /* per role, valid where present */
	unsigned present;                      /* EVENTS_ROLE_BIT()s */
	unsigned event_of[EVENTS_ROLE_MAX];    /* index into events[] per present role */
	enum events_formula formula;           /* f_store formula the roles present imply */
	bool has_be1_tma36;                    /* both STALLS_TOTAL and EXE_BOUND_0_PORTS given: */
	uint64_t be1_tma36;                    /*   be1 is STALLS_TOTAL, this is the other */
	bool multiplexed;                      /* a role event ran < 100%: perf scaled it */
	bool has_t_host;
	double t_host_s;
	enum perfcsv_time_source t_host_source;
	unsigned n_unknown;                    /* event lines that map to no role */
	unsigned n_events;
	struct perfcsv_event events[PERFCSV_MAX_EVENTS];
};

/* Parses buf[0..len). Errors (with line numbers): -EBADMSG malformed line or layout,
 * -ENODATA an event <not counted>/<not supported>, -EINVAL a role or time given twice,
 * -ENOENT no event of the tables in the file, -E2BIG too many events, -EFBIG too large. */
int perfcsv_parse(const char *buf, size_t len, struct perfcsv_result *out, struct pim_error *err);

/* The role an event name maps to (-1 if none); tma36 set for the TMA-3.6 be1. Exposed for
 * pimctl's diagnostics and the tests. */
int perfcsv_role_of(const char *event_name, bool *tma36);

#endif
