/* SPDX-License-Identifier: MIT */
/*
 * perfcsv.c: `perf stat -x,` import (doc/design.md §4.4: "accept counter data measured elsewhere").
 * The layout handled is the one perf 6.1 prints, e.g.
 *   0.85,msec,task-clock,851009,100.00,0.258,CPUs utilized
 *   <not supported>,,cycles,0,100.00,,
 *   1234567,,icx::OFFCORE_REQUESTS:ALL_DATA_RD,1000000,100.00,,
 * and with -r N:  0.75,msec,task-clock,3.04%,753005,100.00,0.522,CPUs utilized
 */
#include "perfcsv.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

#define MAX_FIELDS 16

/* perf's names for events the tables spell in libpfm4 terms (normalised form, see below). */
static const struct {
	const char *name;
	enum events_role role;
} aliases[] = {
	{ "CYCLES", EVENTS_ROLE_CYCLES },
	{ "CPU-CYCLES", EVENTS_ROLE_CYCLES },
	{ "CPU_CLK_UNHALTED:THREAD", EVENTS_ROLE_CYCLES }, /* Intel fixed-counter spelling */
	{ "LS_NOT_HALTED_CYC", EVENTS_ROLE_CYCLES },       /* perf json, AMD Zen */
	{ "LLC-LOAD-MISSES", EVENTS_ROLE_N_RD },           /* generic row's LL read misses */
};

/* perf event modifiers (tools/perf/util/parse-events.l) */
static bool is_modifier(const char *s, size_t n)
{
	if (n == 0 || n > 8)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr("ukhIGHpPSDWeb", s[i]))
			return false;
	return true;
}

/*
 * Normalises an event name for comparison: the inside of "pmu/…/", no "xxx::" prefix, no
 * trailing perf modifiers, '.' as ':' (perf-json spelling), upper case. Raw terms
 * ("event=0xa6,...") come back as they are and match nothing.
 */
static void normalise(const char *in, char *out, size_t len)
{
	char tmp[PERFCSV_NAME_MAX * 2];
	snprintf(tmp, sizeof tmp, "%s", in);

	char *s = tmp;
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';

	char *slash = strchr(s, '/'), *last = strrchr(s, '/');
	if (slash && last > slash) {
		*last = '\0';
		s = slash + 1;
		char *comma = strchr(s, ',');
		if (comma)
			*comma = '\0';
	}
	char *colons = strstr(s, "::");
	while (colons) {
		s = colons + 2;
		colons = strstr(s, "::");
	}
	for (;;) {
		char *c = strrchr(s, ':');
		if (!c || !is_modifier(c + 1, strlen(c + 1)))
			break;
		*c = '\0';
	}
	size_t i = 0;
	for (; s[i] && i + 1 < len; i++)
		out[i] = s[i] == '.' ? ':' : (char)toupper((unsigned char)s[i]);
	out[i] = '\0';
}

int perfcsv_role_of(const char *event_name, bool *tma36)
{
	char want[PERFCSV_NAME_MAX], have[PERFCSV_NAME_MAX];
	size_t n_tables;
	const struct event_table *t = events_tables(&n_tables);

	if (tma36)
		*tma36 = false;
	if (!event_name)
		return -1;
	normalise(event_name, want, sizeof want);
	if (!want[0])
		return -1;

	for (size_t i = 0; i < n_tables; i++) {
		for (int r = 0; r < EVENTS_ROLE_MAX; r++) {
			if (!t[i].event[r])
				continue;
			normalise(t[i].event[r], have, sizeof have);
			if (strcmp(want, have) == 0)
				return r;
		}
		/* raw codes (perf_raw::) mean different things on different PMUs: not mapped */
		if (t[i].be1_tma36 && strncmp(t[i].be1_tma36, "perf_raw::", 10) != 0) {
			normalise(t[i].be1_tma36, have, sizeof have);
			if (strcmp(want, have) == 0) {
				if (tma36)
					*tma36 = true;
				return EVENTS_ROLE_BE1;
			}
		}
	}
	for (size_t i = 0; i < ELEMENTSOF(aliases); i++)
		if (strcmp(want, aliases[i].name) == 0)
			return (int)aliases[i].role;
	return -1;
}

/* The formula of the row a c_store name comes from (first match). */
static enum events_formula row_formula_of_c_store(const char *event_name)
{
	char want[PERFCSV_NAME_MAX], have[PERFCSV_NAME_MAX];
	size_t n_tables;
	const struct event_table *t = events_tables(&n_tables);

	normalise(event_name, want, sizeof want);
	for (size_t i = 0; i < n_tables; i++) {
		if (!t[i].event[EVENTS_ROLE_C_STORE])
			continue;
		normalise(t[i].event[EVENTS_ROLE_C_STORE], have, sizeof have);
		if (strcmp(want, have) == 0)
			return t[i].formula;
	}
	return EVENTS_FORMULA_NONE;
}

static bool parse_u64(const char *s, uint64_t *out)
{
	if (!*s || !isdigit((unsigned char)*s))
		return false;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

static bool parse_double(const char *s, double *out)
{
	if (!*s)
		return false;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || *end || !isfinite(v))
		return false;
	*out = v;
	return true;
}

/* A duration with perf's unit to seconds; default_unit when the unit field is empty. */
static bool to_seconds(double v, const char *unit, const char *default_unit, double *out)
{
	static const struct {
		const char *unit;
		double scale;
	} units[] = {
		{ "ns", 1e-9 }, { "nsec", 1e-9 }, { "us", 1e-6 }, { "usec", 1e-6 },
		{ "ms", 1e-3 }, { "msec", 1e-3 }, { "s", 1.0 },   { "sec", 1.0 },
	};
	if (!*unit)
		unit = default_unit;
	for (size_t i = 0; i < ELEMENTSOF(units); i++)
		if (strcmp(unit, units[i].unit) == 0) {
			*out = v * units[i].scale;
			return true;
		}
	return false;
}

/* Splits line in place at commas; an event field holding "pmu/a=1,b=2/" stays one field. */
static int split(char *line, char **f, unsigned max)
{
	unsigned n = 0;
	char *p = line;
	for (;;) {
		if (n == max)
			return -1;
		f[n++] = p;
		char *c = strchr(p, ',');
		if (n == 3) {
			/* event field: join while its slashes are unbalanced */
			unsigned slashes = 0;
			for (char *q = p; *q && q != c; q++)
				slashes += *q == '/';
			while (c && slashes % 2 == 1) {
				char *q = c + 1;
				c = strchr(q, ',');
				for (; *q && q != c; q++)
					slashes += *q == '/';
			}
		}
		if (!c)
			return (int)n;
		*c = '\0';
		p = c + 1;
	}
}

struct parse_state {
	struct perfcsv_result *out;
	int time_line[3]; /* per enum perfcsv_time_source: line it was given on */
	double time_s[3];
	int be1_tma36_line;
};

static int parse_line(struct parse_state *st, char *line, unsigned lineno, struct pim_error *err)
{
	struct perfcsv_result *out = st->out;
	char *f[MAX_FIELDS];
	int nf = split(line, f, MAX_FIELDS);
	if (nf < 0)
		return err_set(err, -EBADMSG, "line %u: more than %d fields; only the aggregated "
					      "`perf stat -x,` layout is accepted",
			       lineno, MAX_FIELDS);
	if (nf < 3)
		return err_set(err, -EBADMSG, "line %u: %d field%s, expected at least "
					      "value,unit,event (is the separator ','?)",
			       lineno, nf, nf == 1 ? "" : "s");

	char *value = text_trim(f[0]), *unit = text_trim(f[1]), *event = text_trim(f[2]);
	if (out->n_events == PERFCSV_MAX_EVENTS)
		return err_set(err, -E2BIG, "line %u: more than %d events in one file", lineno,
			       PERFCSV_MAX_EVENTS);
	struct perfcsv_event *ev = &out->events[out->n_events];
	memset(ev, 0, sizeof *ev);
	snprintf(ev->name, sizeof ev->name, "%s", event);
	snprintf(ev->unit, sizeof ev->unit, "%s", unit);
	ev->line = lineno;

	/* rest: [variance%,] run-time, percentage [, metric value, metric unit] */
	char **rest = f + 3;
	int nrest = nf - 3;
	if (nrest > 0) {
		char *v = text_trim(rest[0]);
		size_t vl = strlen(v);
		if (vl > 0 && v[vl - 1] == '%') {
			v[vl - 1] = '\0';
			if (!parse_double(v, &ev->variance_pct))
				return err_set(err, -EBADMSG, "line %u: variance '%s%%' of %s is not "
							      "a number", lineno, v, event);
			ev->has_variance = true;
			rest++;
			nrest--;
		}
	}
	if (nrest > 4)
		return err_set(err, -EBADMSG, "line %u: %d fields; only the aggregated `perf stat "
					      "-x,` layout is accepted (no -I, -A, -G or --per-*)",
			       lineno, nf);
	if (!*event)
		return err_set(err, -EBADMSG, "line %u: empty event name", lineno);
	if (nrest > 0 && *text_trim(rest[0])) {
		if (!parse_u64(text_trim(rest[0]), &ev->time_running_ns))
			return err_set(err, -EBADMSG, "line %u: run-time '%s' of %s is not an "
						      "integer (ns)", lineno, rest[0], event);
		ev->has_running = true;
	}
	if (nrest > 1 && *text_trim(rest[1])) {
		if (!parse_double(text_trim(rest[1]), &ev->pct_running) || ev->pct_running < 0 ||
		    ev->pct_running > 100.0001)
			return err_set(err, -EBADMSG, "line %u: percentage '%s' of %s is not in "
						      "0..100", lineno, rest[1], event);
		ev->has_pct = true;
	}

	bool tma36;
	ev->role = perfcsv_role_of(event, &tma36);
	ev->tma36 = tma36;
	char norm[PERFCSV_NAME_MAX];
	normalise(event, norm, sizeof norm);
	enum perfcsv_time_source ts = PERFCSV_TIME_NONE;
	if (strcmp(norm, "DURATION_TIME") == 0)
		ts = PERFCSV_TIME_DURATION;
	else if (strcmp(norm, "TASK-CLOCK") == 0)
		ts = PERFCSV_TIME_TASK_CLOCK;
	ev->is_time = ts != PERFCSV_TIME_NONE;

	if (value[0] == '<')
		return err_set(err, -ENODATA, "line %u: event %s is %s in this file; measure it on "
					      "a host whose PMU counts it, or leave it out",
			       lineno, event, value);
	if (parse_u64(value, &ev->count))
		ev->value = (double)ev->count;
	else if (parse_double(value, &ev->value) && ev->value >= 0 && ev->value < 0x1p64)
		ev->count = (uint64_t)llround(ev->value);
	else
		return err_set(err, -EBADMSG, "line %u: value '%s' of %s is not a non-negative "
					      "number", lineno, value, event);

	if (ts != PERFCSV_TIME_NONE) {
		if (st->time_line[ts])
			return err_set(err, -EINVAL, "line %u: %s given twice (first on line %d)",
				       lineno, event, st->time_line[ts]);
		if (!to_seconds(ev->value, unit, ts == PERFCSV_TIME_DURATION ? "ns" : "msec",
				&st->time_s[ts]))
			return err_set(err, -EBADMSG, "line %u: unit '%s' of %s is not a time unit",
				       lineno, unit, event);
		st->time_line[ts] = (int)lineno;
	} else if (ev->role < 0) {
		out->n_unknown++;
	} else if (ev->role == EVENTS_ROLE_BE1 &&
		   (out->present & EVENTS_ROLE_BIT(EVENTS_ROLE_BE1)) &&
		   out->events[out->event_of[EVENTS_ROLE_BE1]].tma36 != tma36) {
		/* STALLS_TOTAL and EXE_BOUND_0_PORTS both given: be1 is the current TMA's
		 * STALLS_TOTAL (doc/design.md §4.1 default), the TMA-3.6 one is kept beside it */
		if (st->be1_tma36_line)
			return err_set(err, -EINVAL, "line %u: duplicate be1 event %s (first on "
						     "line %d)", lineno, event, st->be1_tma36_line);
		struct perfcsv_event *old = &out->events[out->event_of[EVENTS_ROLE_BE1]];
		if (tma36) {
			out->be1_tma36 = ev->count;
		} else {
			out->be1_tma36 = old->count;
			out->value[EVENTS_ROLE_BE1] = ev->count;
			out->event_of[EVENTS_ROLE_BE1] = out->n_events;
		}
		out->has_be1_tma36 = true;
		st->be1_tma36_line = (int)lineno;
	} else {
		unsigned bit = EVENTS_ROLE_BIT(ev->role);
		if (out->present & bit) {
			const struct perfcsv_event *old = &out->events[out->event_of[ev->role]];
			return err_set(err, -EINVAL, "line %u: duplicate %s event %s (first on line "
						     "%u as %s)", lineno, events_role_name(ev->role),
				       event, old->line, old->name);
		}
		out->present |= bit;
		out->value[ev->role] = ev->count;
		out->event_of[ev->role] = out->n_events;
	}
	if (ev->role >= 0 && ev->has_pct && ev->pct_running < 100.0)
		out->multiplexed = true;
	out->n_events++;
	return 0;
}

int perfcsv_parse(const char *buf, size_t len, struct perfcsv_result *out, struct pim_error *err)
{
	memset(out, 0, sizeof *out);
	if (!buf && len > 0)
		return err_set(err, -EINVAL, "perfcsv: no buffer");
	if (len > PERFCSV_MAX_BYTES)
		return err_set(err, -EFBIG, "perf stat CSV of %zu bytes exceeds the %u byte limit",
			       len, PERFCSV_MAX_BYTES);

	struct parse_state st = { .out = out };
	char line[PERFCSV_MAX_LINE];
	unsigned lineno = 0;
	size_t pos = 0;
	while (pos < len) {
		lineno++;
		const char *nl = memchr(buf + pos, '\n', len - pos);
		size_t n = (nl ? (size_t)(nl - buf) : len) - pos;
		if (n >= sizeof line)
			return err_set(err, -EBADMSG, "line %u: longer than %d bytes", lineno,
				       PERFCSV_MAX_LINE - 1);
		if (memchr(buf + pos, '\0', n))
			return err_set(err, -EBADMSG, "line %u: contains a NUL byte", lineno);
		memcpy(line, buf + pos, n);
		line[n] = '\0';
		pos += n + (nl ? 1 : 0);

		char *s = text_trim(line); /* also drops a CR of CRLF files */
		if (!*s || *s == '#')
			continue;
		int r = parse_line(&st, s, lineno, err);
		if (r < 0)
			return err_prefix(err, "perf stat CSV");
	}

	if (!out->present) {
		char seen[256] = "";
		size_t used = 0;
		for (unsigned i = 0; i < out->n_events && used < sizeof seen; i++) {
			int k = snprintf(seen + used, sizeof seen - used, "%s%s", i ? ", " : "",
					 out->events[i].name);
			if (k < 0)
				break;
			used += (size_t)k;
		}
		return err_set(err, -ENOENT, "perf stat CSV: no event of the pimd event tables "
					     "among %u event%s (%s); name them as libpfm4 or perf "
					     "does, e.g. icx::OFFCORE_REQUESTS:ALL_DATA_RD",
			       out->n_events, out->n_events == 1 ? "" : "s",
			       out->n_events ? seen : "none");
	}

	if (st.time_line[PERFCSV_TIME_DURATION]) {
		out->has_t_host = true;
		out->t_host_s = st.time_s[PERFCSV_TIME_DURATION];
		out->t_host_source = PERFCSV_TIME_DURATION;
	} else if (st.time_line[PERFCSV_TIME_TASK_CLOCK]) {
		out->has_t_host = true;
		out->t_host_s = st.time_s[PERFCSV_TIME_TASK_CLOCK];
		out->t_host_source = PERFCSV_TIME_TASK_CLOCK;
	}

	/* the formula the roles imply (doc/design.md §3 C4, §4.1) */
	unsigned p = out->present;
	if ((p & EVENTS_ROLES_F_STORE) == EVENTS_ROLES_F_STORE)
		out->formula = out->events[out->event_of[EVENTS_ROLE_BE1]].tma36 ?
				       EVENTS_FORMULA_TMA36 : EVENTS_FORMULA_TMA;
	else if ((p & EVENTS_ROLE_BIT(EVENTS_ROLE_C_STORE)) &&
		 (p & EVENTS_ROLE_BIT(EVENTS_ROLE_CYCLES)) &&
		 row_formula_of_c_store(out->events[out->event_of[EVENTS_ROLE_C_STORE]].name) ==
			 EVENTS_FORMULA_STORE_PER_CYCLE)
		out->formula = EVENTS_FORMULA_STORE_PER_CYCLE;
	else
		out->formula = EVENTS_FORMULA_NONE;
	return 0;
}
