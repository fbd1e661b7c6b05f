/* SPDX-License-Identifier: MIT */
/* profile_derive.c: at a run's end, on the writer thread: the per-region metrics derived from its samples. */
#include "profile_int.h"

#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/timerfd.h>

#include "log.h"
#include "manifest.h"
#include "metrics.h"
#include "placement.h"
#include "worker.h"

/* Per-region metrics from the stored samples (metrics.c: medians over repetitions of
 * per-execution time and counts, BW_read estimated for the timing backend). */
struct derive {
	struct job *j;
	int64_t run;
	struct store *store;    /* the writer's connection */
	int32_t region;
	struct metrics_region acc;
	unsigned stored;
	unsigned part, in_part; /* regions per part (0: all at once), and derived in this one */
	uint32_t next;          /* where the next part starts */
	int error;
	struct pim_error err;
};

/* Regions whose metrics are derived in one change on the writer thread: the writes handed to it
 * meanwhile (another client's model) wait for one part, not for a million regions. */
#define DERIVE_PART STORE_PART_ROWS

static void derive_flush(struct derive *d);
static int derive_sample(void *ctx, const struct store_sample *s);
static int derive_run(struct derive *d, uint32_t from);
static int queue_for_catalogue(struct store *s, const struct job *j, int64_t run, const char *msg, unsigned stored,
			       struct pim_error *err);

const struct region_fact *profile_fact_of(const struct job *j, int32_t id)
{
	size_t lo = 0, hi = j->n_facts;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (j->facts[mid].id < id)
			lo = mid + 1;
		else if (j->facts[mid].id > id)
			hi = mid;
		else
			return &j->facts[mid];
	}
	return NULL;
}

static void derive_flush(struct derive *d)
{
	struct job *j = d->j;
	struct store_metrics m = { 0 };
	char source[96];
	struct metrics_result res;

	metrics_region_result(&d->acc, &res);
	metrics_region_reset(&d->acc);
	if (res.reps == 0)
		return;
	m.region_id = (uint32_t)d->region;
	m.t_host = res.t_host;
	m.t_host_spread = res.t_host_spread;
	if (j->n_groups) {
		m.evidence = PL_EVIDENCE_COUNTERS;
		m.have_n_rd = res.have[EVENTS_ROLE_N_RD];
		m.n_rd = res.have[EVENTS_ROLE_N_RD] ? res.role[EVENTS_ROLE_N_RD] : 0;
		m.have_store = res.have[EVENTS_ROLE_C_STORE] && res.have[EVENTS_ROLE_BE1] &&
			       res.have[EVENTS_ROLE_BE2] && res.have[EVENTS_ROLE_BE3];
		if (m.have_store) {
			m.c_store = res.role[EVENTS_ROLE_C_STORE];
			m.c_be1 = res.role[EVENTS_ROLE_BE1];
			m.c_be2 = res.role[EVENTS_ROLE_BE2];
			m.c_be3 = res.role[EVENTS_ROLE_BE3];
		}
	} else {
		m.evidence = PL_EVIDENCE_ESTIMATE;
		const struct region_fact *f = profile_fact_of(j, d->region);
		if (f)
			m.bw_read_estimate = metrics_bw_read_estimate(f->profile_read_bytes, m.t_host);
	}
	snprintf(source, sizeof source, "profile job %" PRId64 ", %zu repetitions%s", d->run,
		 res.reps, res.scaled ? ", scaled counts" : "");
	m.source = source;
	if (m.t_host > 0) {
		if (store_metrics_put(d->store, j->model_id, j->pf->platform->row, d->run, &m, &d->err) < 0)
			d->error = d->err.code ? d->err.code : -EIO;
		else
			d->stored++;
	}
}

static int derive_sample(void *ctx, const struct store_sample *s)
{
	struct derive *d = ctx;
	struct job *j = d->j;

	if ((int32_t)s->region != d->region) {
		derive_flush(d);
		if (d->region >= 0 && d->part && ++d->in_part == d->part) {
			d->next = s->region; /* this part is done: the next starts here */
			return STORE_WRITE_AGAIN;
		}
		d->region = (int32_t)s->region;
	}
	if (s->group == 0 && metrics_add_time(&d->acc, s->time_ns, s->executions) < 0)
		return -ENOMEM;
	if (j->n_groups && s->group < j->n_groups) {
		const struct worker_group *g = &j->groups[s->group];
		unsigned base = (unsigned)(g->events - j->events);
		unsigned n = s->n_values < g->n ? s->n_values : g->n;
		if (metrics_add_counts(&d->acc, s->values, &j->role_of[base], n, s->time_enabled,
				       s->time_running, s->executions) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* Metrics of the regions of j's run from region `from` on, from its stored samples, d->part of
 * them (0: all); d->stored counts them; STORE_WRITE_AGAIN when regions remain (from d->next
 * on); on failure d->err says why. */
static int derive_run(struct derive *d, uint32_t from)
{
	int r = store_samples_each(d->store, d->run, from, derive_sample, d, &d->err);

	if (r == 0)
		derive_flush(d);
	metrics_region_free(&d->acc);
	return r < 0 ? r : d->error < 0 ? d->error : r;
}

/* On the writer thread: a finished run goes to the fleet catalogue's outbox, in the group that
 * records its end (catalogue.h); nothing without a catalogue. */
static int queue_for_catalogue(struct store *s, const struct job *j, int64_t run, const char *msg, unsigned stored,
			       struct pim_error *err)
{
	const struct platform *p = j->pf->platform;
	char hash[65];
	int r;

	if (!p->fleet_key[0] || stored == 0)
		return 0;
	if ((r = store_model_hash(s, j->model_id, hash, err)) < 0)
		return r;
	struct store_outbox_origin o = { .model_hash = hash, .platform_key = p->fleet_key,
					 .platform_json = p->fleet_json,
					 .backend = j->n_groups ? "counters" : "timing" };
	return store_outbox_add_run(s, run, &o, msg, stored, err);
}

/* On the writer thread: the end of jw's run (its samples stored, or failure says why not):
 * the metrics when it went well, then its final row. */
int profile_job_end_run(struct store *s, struct job_write *jw, const char *failure, struct pim_error *err)
{
	struct job *j = jw->j;
	const struct worker_status *st = &jw->st;
	char *msg = jw->msg;
	size_t len = sizeof jw->msg;
	/* cut short at profile_max_samples: done, with the samples stored before the cut */
	bool ok = j->insitu || (st->end == WORKER_END_OK && j->done) || (j->cut && j->samples_seen > 0);
	/* in parts within a group (each part committed with it, profile_job_write_part_done); alone (a
	 * failed group's retry), the rest at once from the last part on disk */
	struct derive d = { .j = j, .run = jw->run, .store = s, .region = -1, .stored = jw->stored,
			    .part = store_in_group(s) ? DERIVE_PART : 0 };
	int r;

	if (j->cancelled) {
		/* (read here: profile_job_cancel changes nothing of a job once it ends) */
		snprintf(msg, len, "cancelled: %s", j->cancel_why);
		jw->ok = false;
		if (j->gone)
			return 0; /* its run went with its model */
		struct store_run_update u = { .state = "cancelled", .message = msg, .worker_uid = -1,
					      .regions_done = -1, .finished = true,
					      .repetitions_done = (int64_t)j->reps_done,
					      .repetitions_total = (int64_t)j->reps_total };
		return store_run_update(s, jw->run, &u, err);
	}
	if (j->store_failed)
		failure = j->store_error;
	else if (!failure[0] && ok && (r = derive_run(&d, jw->derive_from)) != 0) {
		if (r < 0) {
			failure = d.err.msg;
		} else {
			jw->derive_next = d.next;
			jw->stored_next = d.stored;
			return STORE_WRITE_AGAIN;
		}
	}
	if (failure[0])
		snprintf(msg, len, "the store failed: %s", failure);
	else if (j->insitu)
		snprintf(msg, len, "in-situ sampling: %" PRIu64 " samples, %u regions measured",
			 j->samples_seen, d.stored);
	else if (ok)
		snprintf(msg, len, "%u regions measured with the %s backend in %.2f s of CPU time",
			 d.stored, j->n_groups ? "counters" : "timing", st->cpu_s);
	else if (j->have_error && st->end == WORKER_END_FAILED)
		snprintf(msg, len, "%s", j->error.message);
	else
		snprintf(msg, len, "%s", st->message[0] ? st->message : "the worker failed");
	if (j->cut) {
		size_t n = strlen(msg);
		snprintf(msg + n, len - n, "; cut at %" PRIu64 " samples (profile_max_samples): "
			 "the worker was stopped before it finished", j->samples_seen);
	}
	if (j->note[0]) {
		size_t n = strlen(msg);
		snprintf(msg + n, len - n, "; %s", j->note);
	}
	if (st->refused[0] && !strstr(msg, st->refused)) {
		size_t n = strlen(msg);
		snprintf(msg + n, len - n, "; %s", st->refused);
	}
	jw->ok = ok && !failure[0];
	jw->stored = d.stored;
	if (jw->ok && (r = queue_for_catalogue(s, j, jw->run, msg, d.stored, err)) < 0)
		return r;
	struct store_run_update u = { .state = jw->ok ? "done" : "failed", .message = msg, .worker_uid = -1,
				      .regions_done = d.stored, .finished = true,
				      .repetitions_done = j->insitu ? -1 : (int64_t)j->reps_done,
				      .repetitions_total = j->insitu ? -1 : (int64_t)j->reps_total };
	return store_run_update(s, jw->run, &u, err);
}
