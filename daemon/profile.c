/* SPDX-License-Identifier: MIT */
#include "profile.h"

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

#define SAMPLE_BATCH 4096          /* samples per transaction */
/* A job's buffer holds a batch and what one worker_read() call may hand over beyond it (its
 * budget of 1024 records and the 64 of its buffer), so that reading stops between calls only. */
#define SAMPLE_ROOM (SAMPLE_BATCH + 2048)
/* A job's changes handed to the writer thread and not yet on disk, at most: beyond, its
 * worker's pipe is not read (the worker waits to write) until one is stored, so that what
 * waits for the disk stays bounded. */
#define BATCHES_WAITING 2
#define UNRECORDED_MAX 16
#define PROGRESS_STORE_NS 250000000ull /* progress written to the store at most 4 times a second */
#define TIMEOUT_TICK_MS 100

struct region_fact {
	int32_t id;
	uint64_t read_bytes; /* unique bytes read (allocations with role in/inout), §4.4 */
};

struct job {
	struct job *next;
	struct profiler *pf;
	int64_t run;
	int64_t model_id;
	char model[MANIFEST_NAME_MAX + 1];
	int model_fd;
	uid_t uid;
	gid_t gid;
	unsigned reps, warmups, timeout_ms;
	int cpu; /* pinned to, -1 none */
	uint64_t *arg_bytes;
	uint64_t digest;          /* manifest_digest() of the stored manifest */
	size_t n_args;
	int32_t *regions;
	size_t n_regions;
	int32_t *measure;
	size_t n_measure;
	struct region_fact *facts; /* sorted by id */
	size_t n_facts;
	/* event plan (counters backend) */
	struct counters_event events[EVENTS_ROLE_MAX];
	int role_of[EVENTS_ROLE_MAX]; /* event index → role */
	struct worker_group groups[EVENTS_ROLE_MAX];
	unsigned n_groups;
	/* while running */
	struct worker *w;
	struct watch wfd, wpid;
	bool running, eof, exited;
	bool have_hello, have_error, done;
	struct worker_hello hello;
	struct worker_error error;
	struct store_sample *buf;
	uint64_t (*vals)[COUNTERS_MAX_GROUP];
	size_t nbuf;
	uint64_t reps_done, reps_total;
	uint64_t progress_stored_ns;
	bool store_failed;
	char store_error[256];
	uint64_t samples_seen;
	bool cut;                  /* profile_max_samples reached: the worker was stopped */
	char note[128];            /* what pimd changed in the request, said in the final message */
	/* its changes are made by the writer thread (struct job_write) */
	unsigned writes;           /* handed over, not yet done */
	bool paused;               /* the worker's pipe is not read: a full batch waits */
	bool ending;               /* the worker ended (end); the run ends once writes is 0 */
	struct worker_status end;
	struct job_write *last;    /* the run's end, allocated with the job */
	bool insitu;               /* an in-situ run: samples_seen counts what its client sent */
	bool creating;             /* queued, its run's row with the writer: it cannot start yet */
	/* cancelled (job_cancel): it never starts, or its worker was killed; it ends failed with
	 * "cancelled: " and why.  gone: its model was removed or replaced, and its run with it */
	bool cancelled, gone, gone_seen;
	char cancel_why[96];
};

/*
 * A change of a job's run, made by the writer thread (store_write): its creation (an in-situ
 * run's first batch), a batch of samples, an update of its row; or its end: the rest of its
 * samples, the metrics derived from all of them, and its final row.  The writer reads only
 * what the event loop no longer changes: the job's facts, and at its end (nothing of it is
 * with the writer any more) its outcome.
 */
struct job_write {
	struct store_write sw;     /* as handed to the writer (store_write_via) */
	struct job *j;
	int64_t run;               /* j's run (the loop's j->run is not read on the writer) */
	struct store_sample *buf;  /* n samples (values in vals) */
	uint64_t (*vals)[COUNTERS_MAX_GROUP];
	size_t n;
	bool open;                 /* create the run first (sets run) */
	unsigned regions_total;    /* open: the regions it measures */
	bool update;
	struct store_run_update u;
	bool final;
	/* final, in parts: where the metrics go on and how many are stored, as of the parts on
	 * disk (derive_from, stored) and as of the part being written (the _next ones); whether
	 * the samples, run and update above are on disk already (head_done) */
	uint32_t derive_from, derive_next;
	unsigned stored_next;
	bool head_done;
	struct worker_status st;   /* final, of a profiling job: how its worker ended */
	bool ok;                   /* final: the run is done, not failed */
	unsigned stored;           /* final: regions with metrics */
	char msg[1024];            /* final: the run's message */
};


struct profiler {
	struct loop *loop;
	struct store *store;
	const struct platform *platform;
	unsigned concurrency, queue_max, reps, warmups, timeout_ms, cpu_seconds;
	uint64_t memory_bytes;
	unsigned max_samples, queue_per_uid, max_processes;
	bool allow_root_jobs;
	struct cgroup_tree *cgroup;                /* a cgroup per job (cgroup.h); NULL: none */
	char containment[640];                     /* what contains the jobs, in plain words */
	char group[CONFIG_NAME_MAX + 1];           /* profile_group; "": the socket's group */
	char socket_path[sizeof(((struct config *)0)->socket_path)];
	struct profile_turns turns;
	struct store_writer writer;                /* who makes the jobs' changes (store_write_via) */
	bool stopping;                             /* no job starts any more */
	uint64_t insitu_waiting;                   /* in-situ samples with the writer, not yet stored */
	/* Ends of jobs the store could not record (a full disk), told by ProfileStatus instead of
	 * the row's stale state until a restart fails them (store_runs_abandon); the latest. */
	struct {
		int64_t run;
		char message[512];
	} unrecorded[UNRECORDED_MAX];
	unsigned n_unrecorded;
	/* Jobs cancelled with their model, whose runs went with it: what ProfileStatus tells of
	 * them until a restart; the latest. */
	struct {
		int64_t run;
		uid_t uid;
		char model[MANIFEST_NAME_MAX + 1];
		char why[96];
	} gone[UNRECORDED_MAX];
	unsigned n_gone;
	char helper[PATH_MAX]; /* pimd-worker; "" when not found (jobs fail naming it) */
	struct job *jobs; /* queued and running, in arrival order */
	unsigned n_running, n_queued;
	struct watch timer;
};


static void job_free(struct job *j)
{
	if (!j)
		return;
	if (j->w) {
		loop_del(j->pf->loop, &j->wfd);
		if (!j->exited && worker_pidfd(j->w) >= 0)
			loop_del(j->pf->loop, &j->wpid);
		worker_free(j->w);
	}
	if (j->model_fd >= 0)
		close(j->model_fd);
	free(j->arg_bytes);
	free(j->regions);
	free(j->measure);
	free(j->facts);
	free(j->buf);
	free(j->vals);
	free(j->last);
	free(j);
}

static void job_unlink(struct job *j)
{
	struct profiler *pf = j->pf;
	for (struct job **p = &pf->jobs; *p; p = &(*p)->next)
		if (*p == j) {
			*p = j->next;
			break;
		}
	if (j->running)
		pf->n_running--;
	else
		pf->n_queued--;
}

static void job_store_error(struct job *j, const struct pim_error *err)
{
	if (!j->store_failed)
		snprintf(j->store_error, sizeof j->store_error, "%s", err->msg);
	j->store_failed = true;
}

static void job_write_free(struct job_write *jw)
{
	free(jw->buf);
	free(jw->vals);
	free(jw);
}

static int job_end_run(struct store *s, struct job_write *jw, const char *failure, struct pim_error *err);

/* On the writer thread: jw (store_write). */
static int job_write_run(struct store *s, void *data, struct pim_error *err)
{
	struct job_write *jw = data;
	struct job *j = jw->j;
	char failure[256] = "";
	int r;

	if (jw->head_done || (jw->final && j->gone))
		return job_end_run(s, jw, failure, err); /* a further part of the metrics, or no row */
	if (jw->open && (r = store_run_create(s, j->model_id, j->pf->platform->row, j->uid, j->warmups,
					       j->reps, jw->regions_total, &jw->run, err)) < 0)
		return r;
	/* (one change, in one group: a reader sees the progress with its samples) */
	if ((jw->n && (r = store_samples_put(s, jw->run, jw->buf, jw->n, err)) < 0) ||
	    (jw->update && (r = store_run_update(s, jw->run, &jw->u, err)) < 0)) {
		if (!jw->final)
			return r;
		snprintf(failure, sizeof failure, "%s", err->msg); /* the run still ends, failed */
	}
	return jw->final ? job_end_run(s, jw, failure, err) : 0;
}

/* On the writer thread: a part of jw's metrics is on disk (with the head, the first time). */
static void job_write_part_done(struct job_write *jw)
{
	jw->head_done = true;
	jw->derive_from = jw->derive_next;
	jw->stored = jw->stored_next;
}

static void job_part_done(void *data)
{
	job_write_part_done(data);
}

static void job_write_done(void *data, int r, const struct pim_error *err);

/* Hands jw to the writer (j->writes counts it until job_write_done, which comes later: j is
 * still there when this returns). */
static void job_submit(struct job *j, struct job_write *jw)
{
	if (j->gone && !jw->final) {
		job_write_free(jw); /* its run is gone: nothing more to store */
		return;
	}
	jw->j = j;
	jw->run = j->run;
	jw->sw = (struct store_write){ job_write_run, job_write_done, jw, job_part_done, NULL };
	j->writes++;
	store_write_via(&j->pf->writer, j->pf->store, &jw->sw);
}

/* Hands j's buffered samples, and progress when not NULL, to the writer; false when
 * BATCHES_WAITING of its changes wait for the disk already (nothing was handed over). */
static bool job_flush(struct job *j, const struct store_run_update *progress)
{
	if (j->writes >= BATCHES_WAITING)
		return false;
	if (j->store_failed) {
		j->nbuf = 0; /* nothing more is stored: the job's end says why */
		return true;
	}
	if (!j->nbuf && !progress)
		return true;
	struct job_write *jw = calloc(1, sizeof *jw);
	struct store_sample *buf = calloc(SAMPLE_ROOM, sizeof *buf);
	uint64_t(*vals)[COUNTERS_MAX_GROUP] = calloc(SAMPLE_ROOM, sizeof *vals);
	if (!jw || !buf || !vals) {
		free(jw);
		free(buf);
		free(vals);
		struct pim_error err = { 0 };
		err_set(&err, -ENOMEM, "out of memory for %zu samples", j->nbuf);
		job_store_error(j, &err);
		j->nbuf = 0;
		return true;
	}
	*jw = (struct job_write){ .buf = j->buf, .vals = j->vals, .n = j->nbuf };
	if (progress) {
		jw->update = true;
		jw->u = *progress;
	}
	j->buf = buf;
	j->vals = vals;
	j->nbuf = 0;
	job_submit(j, jw);
	return true;
}

/* Stops or resumes reading j's worker pipe. */
static void job_pause(struct job *j, bool pause)
{
	if (j->eof || j->paused == pause)
		return;
	j->paused = pause;
	loop_mod(j->pf->loop, &j->wfd, pause ? 0 : EPOLLIN);
	if (pause)
		log_debug("Profile job %" PRId64 ": %u changes wait for the writer thread; the worker's "
			  "results are read no further until one is stored", j->run, j->writes);
}

static void job_end(struct job *j);
static void job_ended(struct job *j, struct job_write *jw, int r, const struct pim_error *err);

/* On the event loop: a change of j was made (r 0) or not. */
static void job_write_done(void *data, int r, const struct pim_error *err)
{
	struct job_write *jw = data;
	struct job *j = jw->j;

	j->writes--;
	if (jw->final) {
		job_ended(j, jw, r, err);
		return;
	}
	if (r < 0) {
		log_error("Profile job %" PRId64 ": storing samples failed: %s", j->run, err->msg);
		job_store_error(j, err);
	}
	job_write_free(jw);
	if (j->paused && (j->nbuf < SAMPLE_BATCH || job_flush(j, NULL)))
		job_pause(j, false);
	if (j->ending)
		job_end(j); /* (j is freed when its end's done() comes) */
}

static void on_record(void *ctx, const struct worker_record *r)
{
	struct job *j = ctx;
	struct pim_error err = { 0 };

	switch (r->type) {
	case WORKER_REC_HELLO: {
		j->have_hello = true;
		j->hello = r->hello;
		j->hello.reason[sizeof j->hello.reason - 1] = 0;
		j->reps_total = (uint64_t)r->hello.reps * (r->hello.n_groups ? r->hello.n_groups : 1);
		struct store_run_update u = {
			.state = "running",
			.backend = r->hello.backend == WORKER_BACKEND_COUNTERS ? "counters" : "timing",
			.backend_reason = j->hello.reason,
			.worker_uid = r->hello.uid, .regions_done = -1, .repetitions_done = 0,
			.repetitions_total = (int64_t)j->reps_total,
		};
		struct job_write *jw = calloc(1, sizeof *jw);
		if (jw) {
			jw->update = true;
			jw->u = u;
			job_submit(j, jw);
		} else {
			err_set(&err, -ENOMEM, "out of memory");
			job_store_error(j, &err);
		}
		log_info("Profile job %" PRId64 " (model \"%s\"): worker pid %d as uid %u%s%s, %s "
			 "backend%s%s", j->run, j->model, r->hello.pid, r->hello.uid,
			 worker_cgroup(j->w) ? " in cgroup " : "",
			 worker_cgroup(j->w) ? worker_cgroup(j->w) : "", u.backend,
			 r->hello.backend == WORKER_BACKEND_TIMING ? ": " : "",
			 r->hello.backend == WORKER_BACKEND_TIMING ? j->hello.reason : "");
		break;
	}
	case WORKER_REC_SAMPLE: {
		const struct worker_sample *s = &r->sample;
		if (j->cut)
			break;
		if (j->samples_seen >= j->pf->max_samples) {
			/* a job's share of the database: stop the worker, keep what is stored */
			j->cut = true;
			log_warning("Profile job %" PRId64 ": %" PRIu64 " samples stored, the most a job may "
				    "(profile_max_samples); stopping its worker", j->run, j->samples_seen);
			if (j->w)
				worker_kill(j->w);
			break;
		}
		if (j->nbuf == SAMPLE_ROOM) {
			/* (job_read stops reading before; never reached) */
			err_set(&err, -ENOBUFS, "samples came faster than the store took them");
			job_store_error(j, &err);
			break;
		}
		j->samples_seen++;
		struct store_sample *d = &j->buf[j->nbuf];
		unsigned nv = s->n_values < COUNTERS_MAX_GROUP ? s->n_values : COUNTERS_MAX_GROUP;
		memcpy(j->vals[j->nbuf], s->value, nv * sizeof s->value[0]);
		*d = (struct store_sample){ .region = (uint32_t)s->region, .group = s->group, .rep = s->rep,
					    .executions = s->executions, .time_ns = s->time_ns,
					    .time_enabled = s->time_enabled, .time_running = s->time_running,
					    .n_values = nv, .values = j->vals[j->nbuf] };
		if (++j->nbuf >= SAMPLE_BATCH)
			job_flush(j, NULL); /* else job_read stops reading until it can */
		break;
	}
	case WORKER_REC_PROGRESS: {
		j->reps_done = r->progress.done;
		j->reps_total = r->progress.total;
		/* What has arrived is stored with the progress, in one change, at most 4 times a
		 * second: a crash loses at most the last quarter second (and what waits for the
		 * disk), and a reader never sees progress ahead of the stored samples.  Skipped
		 * while the writer is behind. */
		uint64_t now = now_ns();
		struct store_run_update u = { .worker_uid = -1, .regions_done = -1,
					      .repetitions_done = (int64_t)j->reps_done,
					      .repetitions_total = (int64_t)j->reps_total };
		if (now - j->progress_stored_ns >= PROGRESS_STORE_NS && job_flush(j, &u))
			j->progress_stored_ns = now;
		break;
	}
	case WORKER_REC_ERROR:
		j->have_error = true;
		j->error = r->error;
		j->error.message[sizeof j->error.message - 1] = 0;
		break;
	case WORKER_REC_DONE:
		j->done = true;
		break;
	}
}

static const struct region_fact *fact_of(const struct job *j, int32_t id)
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

static void derive_flush(struct derive *d)
{
	struct job *j = d->j;
	Pim__RegionMetrics m = PIM__REGION_METRICS__INIT;
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
		m.evidence = PIM__EVIDENCE__EVIDENCE_COUNTERS;
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
		m.evidence = PIM__EVIDENCE__EVIDENCE_ESTIMATE;
		const struct region_fact *f = fact_of(j, d->region);
		if (f)
			m.bw_read_estimate = metrics_bw_read_estimate(f->read_bytes, m.t_host);
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
static int job_end_run(struct store *s, struct job_write *jw, const char *failure, struct pim_error *err)
{
	struct job *j = jw->j;
	const struct worker_status *st = &jw->st;
	char *msg = jw->msg;
	size_t len = sizeof jw->msg;
	/* cut short at profile_max_samples: done, with the samples stored before the cut */
	bool ok = j->insitu || (st->end == WORKER_END_OK && j->done) || (j->cut && j->samples_seen > 0);
	/* in parts within a group (each part committed with it, job_write_part_done); alone (a
	 * failed group's retry), the rest at once from the last part on disk */
	struct derive d = { .j = j, .run = jw->run, .store = s, .region = -1, .stored = jw->stored,
			    .part = store_in_group(s) ? DERIVE_PART : 0 };
	int r;

	if (j->cancelled) {
		/* (read here: job_cancel changes nothing of a job once it ends) */
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

/* The worker of j ended: once nothing of j is with the writer, the rest of its samples and
 * its end go there (job_ended). */
static void job_end(struct job *j)
{
	if (j->writes)
		return; /* job_write_done comes back here */
	struct job_write *jw = j->last;
	j->last = NULL;
	*jw = (struct job_write){ .buf = j->buf, .vals = j->vals, .n = j->nbuf, .final = true, .st = j->end };
	j->buf = NULL;
	j->vals = NULL;
	j->nbuf = 0;
	job_submit(j, jw);
}

static void profiler_kick(struct profiler *pf);
static void job_cancel(struct job *j, const char *why, bool gone);
static bool job_model_gone(struct profiler *pf, const struct job *j, char *why, size_t len);

void profiler_models_changed(struct profiler *pf)
{
	for (struct job *j = pf->jobs; j; j = j->next)
		j->gone_seen = !j->cancelled && !j->ending && !j->insitu &&
			       job_model_gone(pf, j, j->cancel_why, sizeof j->cancel_why);
	/* from the start each time: cancelling one may end others, and start or free jobs */
	for (;;) {
		struct job *j = pf->jobs;
		while (j && !(j->gone_seen && !j->cancelled))
			j = j->next;
		if (!j)
			return;
		j->gone_seen = false;
		char why[sizeof j->cancel_why];
		memcpy(why, j->cancel_why, sizeof why);
		job_cancel(j, why, true);
	}
}

void profiler_reap_strays(struct profiler *pf)
{
	size_t n = 0;
	for (struct job *j = pf->jobs; j; j = j->next)
		n += j->w != NULL;
	_cleanup_(freep) pid_t *keep = n ? calloc(n, sizeof *keep) : NULL;
	if (n && !keep)
		return; /* the next SIGCHLD or job's end tries again */
	size_t k = 0;
	for (struct job *j = pf->jobs; j; j = j->next)
		if (j->w)
			keep[k++] = worker_pid(j->w);
	unsigned reaped = worker_reap_strays(keep, k);
	if (reaped)
		log_warning("Reaped %u process%s that a profiling job made pimd's child%s (clone with "
			    "CLONE_PARENT)", reaped, reaped == 1 ? "" : "es", reaped == 1 ? "" : "ren");
}

/* On the event loop: j's end is stored (r 0) or not; j goes, and the next job may start. */
static void job_ended(struct job *j, struct job_write *jw, int r, const struct pim_error *err)
{
	struct profiler *pf = j->pf;

	if (r < 0) {
		log_error("Profile job %" PRId64 ": recording the end failed: %s", j->run, err->msg);
		unsigned i = pf->n_unrecorded++ % UNRECORDED_MAX;
		pf->unrecorded[i].run = j->run;
		snprintf(pf->unrecorded[i].message, sizeof pf->unrecorded[i].message,
			 "%s; the store could not record this end: %s", jw->msg, err->msg);
	}
	if (j->gone) {
		unsigned i = pf->n_gone++ % UNRECORDED_MAX;
		pf->gone[i].run = j->run;
		pf->gone[i].uid = j->uid;
		snprintf(pf->gone[i].model, sizeof pf->gone[i].model, "%s", j->model);
		snprintf(pf->gone[i].why, sizeof pf->gone[i].why, "%s", j->cancel_why);
	}
	if (jw->ok)
		log_info("Profile job %" PRId64 " (model \"%s\") done: %s", j->run, j->model, jw->msg);
	else if (j->cancelled)
		log_info("Profile job %" PRId64 " (model \"%s\") ended: %s", j->run, j->model, jw->msg);
	else
		log_warning("Profile job %" PRId64 " (model \"%s\") failed: %s", j->run, j->model,
			    r < 0 ? err->msg : jw->msg);
	job_write_free(jw);
	job_unlink(j);
	job_free(j);
	profiler_reap_strays(pf);
	profiler_kick(pf);
}

/* The worker of j ended (st): the job ends once its samples are stored. */
static void job_finish(struct job *j, const struct worker_status *st)
{
	j->ending = true;
	j->end = *st;
	job_end(j);
}

static void job_try_finish(struct job *j)
{
	struct worker_status st;

	if (!j->eof || j->ending)
		return;
	int r = worker_reap(j->w, &st);
	if (r == 0)
		return; /* still running: the pidfd tells when it exits */
	if (r < 0) {
		memset(&st, 0, sizeof st);
		st.end = WORKER_END_EXITED;
		snprintf(st.message, sizeof st.message, "could not reap the worker: %s", strerror(-r));
	}
	job_finish(j, &st);
}

/* What job_cancel does once j's run is stored: stops its worker (its end comes as any
 * worker's), or ends it at once when it has none. */
static void job_stop(struct job *j)
{
	if (j->running) {
		if (j->w)
			worker_kill(j->w);
		return;
	}
	struct worker_status st = { .end = WORKER_END_FAILED };
	job_finish(j, &st);
}

/* Cancels j (a job of a worker, queued or running), which ends failed with "cancelled: " and
 * why; gone: its model, and its run with it, is no longer in the store. */
static void job_cancel(struct job *j, const char *why, bool gone)
{
	if (j->cancelled || j->ending || j->insitu)
		return;
	j->cancelled = true;
	j->gone = gone;
	snprintf(j->cancel_why, sizeof j->cancel_why, "%s", why);
	if (gone) {
		j->store_failed = true; /* no sample is stored any more */
		j->nbuf = 0;
	}
	if (j->creating) {
		log_info("Profile job of model \"%s\" for uid %u cancelled before it was queued: %s",
			 j->model, (unsigned)j->uid, why);
		return; /* profile_start_done stops it once its run is stored */
	}
	log_info("Profile job %" PRId64 " (model \"%s\", %s) cancelled: %s", j->run, j->model,
		 j->running ? "running" : "queued", why);
	job_stop(j);
}

/* Whether the model j was queued for is gone from the store, and why ("model replaced" when
 * another of its name was loaded since, "model removed"). */
static bool job_model_gone(struct profiler *pf, const struct job *j, char *why, size_t len)
{
	int64_t version, id;
	if (store_model_version(pf->store, j->model_id, &version, NULL) != -ENOENT)
		return false; /* there, or the store cannot tell now: the job goes on */
	snprintf(why, len, "model %s", store_model_id(pf->store, j->model, &id, NULL) == 0 ? "replaced"
											    : "removed");
	return true;
}

static void job_read(struct job *j)
{
	/* A full batch waits for the writer: the worker waits for its pipe meanwhile. */
	if (j->nbuf >= SAMPLE_BATCH && !job_flush(j, NULL)) {
		job_pause(j, true);
		return;
	}
	int r = worker_read(j->w, on_record, j);
	if (r != 0 && !j->eof) {
		/* EOF, or malformed records (the worker was killed; reap names it) */
		j->eof = true;
		loop_del(j->pf->loop, &j->wfd);
	} else if (j->nbuf >= SAMPLE_BATCH) {
		job_pause(j, true);
	}
}

static void on_worker_fd(struct watch *w, uint32_t events)
{
	struct job *j = w->data;
	job_read(j);
	job_try_finish(j);
}

static void on_worker_exit(struct watch *w, uint32_t events)
{
	struct job *j = w->data;
	/* The pidfd stays readable: stop watching it, the pipe's EOF finishes the job. */
	loop_del(j->pf->loop, &j->wpid);
	j->exited = true;
	if (!j->eof)
		job_read(j);
	job_try_finish(j);
}

static int pick_cpu(const struct profiler *pf);

static void job_start(struct job *j)
{
	struct profiler *pf = j->pf;
	struct pim_error err = { 0 };
	struct worker_job wj;

	worker_job_init(&wj);
	wj.model_fd = j->model_fd;
	wj.arg_bytes = j->arg_bytes;
	wj.n_args = j->n_args;
	wj.regions = j->regions;
	wj.n_regions = j->n_regions;
	wj.measure = j->measure;
	wj.n_measure = j->n_measure;
	wj.warmups = j->warmups;
	wj.reps = j->reps;
	wj.uid = j->uid;
	wj.gid = j->gid;
	j->cpu = pick_cpu(pf);
	wj.cpu = j->cpu;
	wj.cpu_seconds = pf->cpu_seconds;
	wj.as_bytes = pf->memory_bytes;
	wj.timeout_ms = j->timeout_ms;
	wj.groups = j->n_groups ? j->groups : NULL;
	wj.n_groups = j->n_groups;
	wj.reason = pf->platform->backend_reason;
	wj.manifest_digest = j->digest;
	wj.helper = pf->helper[0] ? pf->helper : NULL;
	wj.max_processes = pf->max_processes;
	wj.cgroup = pf->cgroup;
	wj.job_id = (uint64_t)j->run;

	j->running = true;
	pf->n_queued--;
	pf->n_running++;
	if (worker_spawn(&wj, &j->w, &err) < 0) {
		struct worker_status st = { .end = WORKER_END_FAILED };
		snprintf(st.message, sizeof st.message, "%s", err.msg);
		j->w = NULL;
		job_finish(j, &st);
		return;
	}
	/* The worker has its own copy of the library's descriptor. */
	closep(&j->model_fd);
	j->model_fd = -1;
	j->wfd = (struct watch){ .fd = worker_fd(j->w), .fn = on_worker_fd, .data = j };
	if (loop_add(pf->loop, &j->wfd, EPOLLIN) < 0) {
		/* Cannot watch it: stop it now; the timer reaps it (eof set, no reader). */
		log_error("Profile job %" PRId64 ": cannot watch the worker: %s; stopping it", j->run,
			  strerror(errno));
		worker_kill(j->w);
		j->eof = true;
		j->exited = true;
		return;
	}
	j->exited = true; /* no pidfd watch unless added below: job_free must not delete one */
	if (worker_pidfd(j->w) >= 0) {
		j->wpid = (struct watch){ .fd = worker_pidfd(j->w), .fn = on_worker_exit, .data = j };
		if (loop_add(pf->loop, &j->wpid, EPOLLIN) == 0)
			j->exited = false;
	}
}

static uint64_t turns_last(const struct profile_turns *t, uid_t uid)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->slot[i].uid == uid)
			return t->slot[i].last;
	return 0;
}

size_t profile_turns_pick(const struct profile_turns *t, const uid_t *uids, size_t n)
{
	size_t best = 0;
	uint64_t best_last = turns_last(t, uids[0]);
	for (size_t i = 1; i < n; i++) {
		uint64_t last = turns_last(t, uids[i]);
		if (last < best_last) {
			best = i;
			best_last = last;
		}
	}
	return best;
}

void profile_turns_take(struct profile_turns *t, uid_t uid)
{
	unsigned slot = 0;
	for (unsigned i = 0; i < t->n; i++) {
		if (t->slot[i].uid == uid) {
			t->slot[i].last = ++t->clock;
			return;
		}
		if (t->slot[i].last < t->slot[slot].last)
			slot = i;
	}
	if (t->n < PROFILE_TURNS_MAX)
		slot = t->n++; /* else the uid served longest ago is forgotten */
	t->slot[slot].uid = uid;
	t->slot[slot].last = ++t->clock;
}

/* A queued job that may start: its run is stored. */
static bool job_waiting(const struct job *j)
{
	return !j->running && !j->creating && !j->cancelled;
}

/* The waiting job to start next (profile_turns_pick), NULL when none waits. */
static struct job *next_job(struct profiler *pf)
{
	size_t n = 0;
	for (struct job *j = pf->jobs; j; j = j->next)
		n += job_waiting(j);
	if (n == 0)
		return NULL;
	_cleanup_(freep) uid_t *uids = malloc(n * sizeof *uids);
	if (!uids) {
		/* no memory for the turns: arrival order */
		for (struct job *j = pf->jobs; j; j = j->next)
			if (job_waiting(j))
				return j;
	}
	size_t k = 0;
	for (struct job *j = pf->jobs; j; j = j->next)
		if (job_waiting(j))
			uids[k++] = j->uid;
	size_t pick = profile_turns_pick(&pf->turns, uids, n);
	for (struct job *j = pf->jobs; j; j = j->next)
		if (job_waiting(j) && pick-- == 0)
			return j;
	return NULL;
}

static void profiler_kick(struct profiler *pf)
{
	struct job *j;
	while (!pf->stopping && pf->n_running < pf->concurrency && (j = next_job(pf))) {
		char why[64];
		if (job_model_gone(pf, j, why, sizeof why)) {
			job_cancel(j, why, true); /* no worker starts for a model that is gone */
			continue;
		}
		profile_turns_take(&pf->turns, j->uid);
		job_start(j);
	}
}

static void on_timer(struct watch *w, uint32_t events)
{
	struct profiler *pf = w->data;
	uint64_t exp;
	if (read(w->fd, &exp, sizeof exp) < 0)
		return;
	uint64_t now = now_ns();
	struct job *reap = NULL;
	for (struct job *j = pf->jobs; j; j = j->next) {
		if (j->running && j->w)
			worker_check_timeout(j->w, now);
		/* Without a pidfd (or before it fires) a job whose pipe has ended is reaped here. */
		if (j->running && j->w && j->eof && !j->ending && !reap)
			reap = j;
	}
	if (reap)
		job_try_finish(reap); /* one per tick */
	if (pf->cgroup)
		cgroup_tree_sweep(pf->cgroup); /* job cgroups whose last processes died since */
}

/* Workers are pinned (doc/design.md §4.2), each running job to a CPU of its own, from the last CPU
 * this process may use downwards; -1 (no pinning) when they outnumber the CPUs. */
static int pick_cpu(const struct profiler *pf)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) < 0)
		return -1;
	for (int c = CPU_SETSIZE - 1; c >= 0; c--) {
		if (!CPU_ISSET(c, &set))
			continue;
		bool used = false;
		for (const struct job *j = pf->jobs; j; j = j->next)
			used = used || (j->running && j->cpu == c);
		if (!used)
			return c;
	}
	return -1;
}

/* Counter groups from the platform's event table, planned without multiplexing. */
static void plan_events(struct job *j, const struct platform *p)
{
	unsigned n = 0;
	struct pim_error err = { 0 };

	j->n_groups = 0;
	if (!p->counters || !p->table)
		return;
	for (int role = 0; role < EVENTS_ROLE_MAX; role++) {
		char name[256];
		if (events_full_name(p->table, NULL, (enum events_role)role, false, name, sizeof name, &err) < 0)
			continue;
		if (counters_encode_event(name, &j->events[n].attr, &err) < 0) {
			log_warning("Event %s does not encode: %s", name, err.msg);
			continue;
		}
		j->events[n].name = p->table->event[role];
		j->role_of[n] = role;
		n++;
	}
	struct counters_plan plan;
	if (n == 0 || counters_plan_groups(j->events, n, 4, &plan, &err) < 0)
		return;
	for (unsigned g = 0; g < plan.n_groups; g++)
		j->groups[g] = (struct worker_group){ &j->events[plan.first[g]], plan.count[g] };
	j->n_groups = plan.n_groups;
}

/*
 * Reading a job's model from the store a region at a time, regions by id (a manifest of a
 * million regions would take hundreds of MiB as protobuf-c structures): the arguments' sizes,
 * every region id with its unique read bytes, and the manifest's digest (manifest_digest()).
 * The region read last is kept until the next comes, or the walk ends (job_read_flush).
 */
struct job_reader {
	struct job *j;
	size_t n_allocations, n_regions; /* the model's, from its summary */
	size_t allocations_seen, regions_seen, args_cap;
	uint64_t h;
	struct store_region_msg m;
	bool pending;
	struct pim_error *err;
};

/* Unique read bytes of a region: its distinct allocations read (in, inout). */
static uint64_t read_bytes(Pim__Operand *const *ops, size_t n)
{
	uint64_t bytes = 0;

	for (size_t a = 0; a < n; a++) {
		const Pim__Operand *o = ops[a];
		if (o->role == PIM__OPERAND_ROLE__OPERAND_ROLE_OUT)
			continue;
		bool seen = false;
		for (size_t b = 0; b < a && !seen; b++)
			seen = ops[b]->allocation_id == o->allocation_id &&
			       ops[b]->role != PIM__OPERAND_ROLE__OPERAND_ROLE_OUT;
		if (!seen)
			bytes += o->bytes;
	}
	return bytes;
}

static void job_read_flush(struct job_reader *jr)
{
	if (!jr->pending)
		return;
	jr->h = manifest_digest_region(jr->h, &jr->m.g);
	jr->j->facts[jr->regions_seen - 1].read_bytes = read_bytes(jr->m.g.operands, jr->m.g.n_operands);
	jr->pending = false;
}

static int job_read_allocation(void *ctx, const Pim__Allocation *a)
{
	struct job_reader *jr = ctx;
	struct job *j = jr->j;

	if (++jr->allocations_seen > jr->n_allocations)
		return err_set(jr->err, -EIO, "the model has more allocations than its summary says");
	jr->h = manifest_digest_allocation(jr->h, a);
	if (a->kind != PIM__ALLOC_KIND__ALLOC_KIND_ARGUMENT)
		return 0;
	if (j->n_args == WORKER_ARGS_MAX)
		return err_set(jr->err, -EINVAL, "the model has more than %u arguments; a worker takes at most %u",
			       WORKER_ARGS_MAX, WORKER_ARGS_MAX);
	if (j->n_args == jr->args_cap) {
		size_t cap = jr->args_cap ? 2 * jr->args_cap : 16;
		uint64_t *v = realloc(j->arg_bytes, cap * sizeof *v);
		if (!v)
			return err_set(jr->err, -ENOMEM, "out of memory");
		j->arg_bytes = v;
		jr->args_cap = cap;
	}
	j->arg_bytes[j->n_args++] = a->bytes; /* allocations come by id: the arguments' order */
	return 0;
}

static int job_read_region(void *ctx, size_t index, const struct store_region_row *r)
{
	struct job_reader *jr = ctx;

	job_read_flush(jr);
	if (jr->regions_seen == 0)
		jr->h = manifest_digest_regions(jr->h, jr->n_regions);
	if (index >= jr->n_regions)
		return err_set(jr->err, -EIO, "the model has more regions than its summary says");
	if (r->id > WORKER_REGION_ID_MAX)
		return err_set(jr->err, -EINVAL, "region id %u exceeds %d, the largest a worker tracks", r->id,
			       WORKER_REGION_ID_MAX);
	jr->regions_seen = index + 1;
	jr->j->regions[index] = (int32_t)r->id;
	jr->j->facts[index] = (struct region_fact){ (int32_t)r->id, 0 };
	store_region_msg_start(&jr->m, r); /* what manifest_digest_region reads */
	jr->pending = true;
	return 0;
}

static int job_read_operand(void *ctx, const struct store_operand_row *o)
{
	struct job_reader *jr = ctx;

	if (!store_region_msg_operand(&jr->m, o))
		return err_set(jr->err, -EIO, "region %u has more than %u operands", jr->m.g.id,
			       MANIFEST_OPERANDS_MAX);
	return 0;
}

/* The job's arguments, regions and facts from the stored model (inside a read transaction). */
static int job_read_model(struct job *j, struct store *st, const char *name, struct pim_error *err)
{
	static const struct store_model_walker walker = { .allocation = job_read_allocation,
							  .region = job_read_region,
							  .operand = job_read_operand,
							  .by_id = true };
	Pim__ModelSummary *sum = NULL;
	struct job_reader *jr;
	int k = store_model_get(st, name, &sum, NULL, err);

	if (k < 0)
		return k;
	jr = calloc(1, sizeof *jr);
	j->regions = calloc(sum->regions ? sum->regions : 1, sizeof *j->regions);
	j->facts = calloc(sum->regions ? sum->regions : 1, sizeof *j->facts);
	if (!jr || !j->regions || !j->facts) {
		k = err_set(err, -ENOMEM, "out of memory");
	} else {
		*jr = (struct job_reader){ .j = j, .n_allocations = sum->allocations, .n_regions = sum->regions,
					   .h = manifest_digest_begin(sum->allocations), .err = err };
		k = store_model_walk(st, j->model_id, &walker, jr, err);
		job_read_flush(jr);
		if (k >= 0 && (jr->regions_seen != jr->n_regions || jr->allocations_seen != jr->n_allocations))
			k = err_set(err, -EIO, "model \"%s\": %zu regions and %zu allocations stored, its summary "
				    "says %zu and %zu", name, jr->regions_seen, jr->allocations_seen,
				    jr->n_regions, jr->n_allocations);
		if (k >= 0 && jr->regions_seen == 0)
			jr->h = manifest_digest_regions(jr->h, 0);
		j->digest = manifest_digest_end(jr->h);
		j->n_regions = j->n_facts = jr->regions_seen; /* by id: facts are sorted */
	}
	if (k == -ENOMEM && !err->msg[0])
		err_set(err, -ENOMEM, "out of memory");
	free(jr);
	pim__model_summary__free_unpacked(sum, NULL);
	return k;
}

/* Builds the job's arguments, regions and facts from the stored model, and what to measure. */
static int job_from_store(struct job *j, struct store *st, const char *name, const Pim__Profile *q,
			  struct pim_error *err)
{
	int k = store_read_begin(st, err);

	if (k < 0)
		return k;
	k = job_read_model(j, st, name, err);
	store_read_end(st);
	if (k < 0)
		return k;
	if (q->n_regions) {
		j->measure = calloc(q->n_regions, sizeof *j->measure);
		if (!j->measure)
			return err_set(err, -ENOMEM, "out of memory");
		for (size_t i = 0; i < q->n_regions; i++) {
			if (q->regions[i] > INT32_MAX || !fact_of(j, (int32_t)q->regions[i]))
				return err_set(err, -EINVAL, "regions[%zu]: the model has no region %u", i,
					       q->regions[i]);
			j->measure[i] = (int32_t)q->regions[i];
		}
		j->n_measure = q->n_regions;
	}
	return 0;
}

/* The group whose members jobs may run as: profile_group, else the socket's group. */
static int job_group(const struct profiler *pf, gid_t *gid, char *name, size_t len,
		     struct pim_error *err)
{
	if (pf->group[0]) {
		char *end;
		errno = 0;
		unsigned long n = strtoul(pf->group, &end, 10);
		const struct group *g = *end == 0 && errno == 0 && n < UINT32_MAX ? getgrgid((gid_t)n)
									       : getgrnam(pf->group);
		if (g) {
			*gid = g->gr_gid;
			snprintf(name, len, "%s", g->gr_name);
			return 0;
		}
		if (*end == 0 && errno == 0 && n < UINT32_MAX) {
			*gid = (gid_t)n;
			snprintf(name, len, "%lu", n);
			return 0;
		}
		return err_set(err, -ENOENT, "profile: profile_group \"%s\" of pimd.conf is not a group of "
			       "this host; no job may run as another user until it names one", pf->group);
	}
	struct stat st;
	if (stat(pf->socket_path, &st) < 0)
		return err_set(err, -errno, "profile: cannot tell the group of the socket %s (%s) whose "
			       "members jobs may run as; set profile_group in pimd.conf", pf->socket_path,
			       strerror(errno));
	*gid = st.st_gid;
	const struct group *g = getgrgid(st.st_gid);
	if (g)
		snprintf(name, len, "%s", g->gr_name);
	else
		snprintf(name, len, "%u", (unsigned)st.st_gid);
	return 0;
}

/* Whether uid is a member of gid (primary or supplementary group in the user database). */
static bool user_in_group(uid_t uid, gid_t gid)
{
	const struct passwd *pw = getpwuid(uid);
	if (!pw)
		return false;
	if (pw->pw_gid == gid)
		return true;
	int n = 64;
	for (int tries = 0; tries < 3; tries++) {
		_cleanup_(freep) gid_t *list = calloc((size_t)n, sizeof *list);
		if (!list)
			return false;
		int got = n;
		if (getgrouplist(pw->pw_name, pw->pw_gid, list, &got) >= 0) {
			for (int i = 0; i < got; i++)
				if (list[i] == gid)
					return true;
			return false;
		}
		if (got <= n || got > 65536)
			return false;
		n = got;
	}
	return false;
}

/* Who a worker may become (doc/design.md §4.3): not root unless allow_root_jobs; when pimd must switch
 * to another uid, only a member of profile_group (by default the socket's group). */
static int job_uid_allowed(const struct profiler *pf, uid_t uid, struct pim_error *err)
{
	if (uid == 0)
		return pf->allow_root_jobs
			       ? 0
			       : err_set(err, -EPERM, "profile: jobs for uid 0 are refused: the model "
						      "would run as root; set allow_root_jobs = yes in "
						      "pimd.conf to allow them");
	if (uid == geteuid())
		return 0; /* no switch: the worker stays pimd's own user */
	gid_t gid = 0;
	char name[CONFIG_NAME_MAX + 16];
	int r = job_group(pf, &gid, name, sizeof name, err);
	if (r < 0)
		return r;
	if (user_in_group(uid, gid))
		return 0;
	return err_set(err, -EPERM, "profile: uid %u is not a member of group %s (gid %u), whose "
				    "members pimd runs jobs for (profile_group)", (unsigned)uid, name,
		       (unsigned)gid);
}

/* The run of a job cancelled with its model, gone with it: NULL when none (or no memory). */
static Pim__ProfileReply *gone_reply(const struct profiler *pf, int64_t run)
{
	const char *model = NULL, *why = NULL;
	uid_t uid = 0;
	for (const struct job *j = pf->jobs; j && !model; j = j->next)
		if (j->run == run && j->gone && !j->creating) {
			model = j->model;
			why = j->cancel_why;
			uid = j->uid;
		}
	for (unsigned i = 0; i < UNRECORDED_MAX && i < pf->n_gone && !model; i++)
		if (pf->gone[i].run == run) {
			model = pf->gone[i].model;
			why = pf->gone[i].why;
			uid = pf->gone[i].uid;
		}
	if (!model)
		return NULL;
	Pim__ProfileReply *p = malloc(sizeof *p);
	if (!p)
		return NULL;
	pim__profile_reply__init(p);
	p->job = (uint64_t)run;
	p->uid = uid;
	p->state = strdup("cancelled");
	p->model = strdup(model);
	if (!p->state || !p->model || asprintf(&p->message, "cancelled: %s", why) < 0) {
		p->message = NULL;
		pim__profile_reply__free_unpacked(p, NULL);
		return NULL;
	}
	return p;
}

static Pim__Response *status_response(struct profiler *pf, uint64_t id, int64_t run)
{
	struct pim_error err = { 0 };
	Pim__ProfileReply *p;

	if (store_run_get(pf->store, run, &p, &err) < 0) {
		if (err.code != -ENOENT || !(p = gone_reply(pf, run)))
			return reply_error_from(id, &err);
		return reply_wrap(id, PIM__RESPONSE__BODY_PROFILE, p);
	}
	for (unsigned i = 0; i < UNRECORDED_MAX && i < pf->n_unrecorded; i++)
		if (pf->unrecorded[i].run == run) {
			char *state = strdup("failed"), *msg = strdup(pf->unrecorded[i].message);
			if (!state || !msg) {
				free(state);
				free(msg);
				pim__profile_reply__free_unpacked(p, NULL);
				return NULL;
			}
			free(p->state);
			free(p->message);
			p->state = state;
			p->message = msg;
		}
	/* the live position of a queued or running job, between progress writes: its repetitions,
	 * its timeout and how much of it the worker has used (pimctl's progress line) */
	for (struct job *j = pf->jobs; j; j = j->next)
		if (j->run == run && j->cancelled && !j->creating) {
			/* its worker is being stopped: it reads as it will end */
			char *state = strdup("cancelled"), *msg = NULL;
			if (!state || asprintf(&msg, "cancelled: %s", j->cancel_why) < 0) {
				free(state);
				pim__profile_reply__free_unpacked(p, NULL);
				return NULL;
			}
			free(p->state);
			free(p->message);
			p->state = state;
			p->message = msg;
		} else if (j->run == run) {
			p->repetitions_done = j->reps_done;
			if (j->reps_total)
				p->repetitions_total = j->reps_total;
			p->timeout_ms = j->timeout_ms;
			uint64_t deadline = j->w ? worker_deadline(j->w) : UINT64_MAX, now = now_ns();
			uint64_t limit_ns = (uint64_t)j->timeout_ms * 1000000u;
			if (deadline != UINT64_MAX) {
				uint64_t left = deadline > now ? deadline - now : 0;
				p->running_ms = (limit_ns > left ? limit_ns - left : 0) / 1000000u;
			}
		}
	return reply_wrap(id, PIM__RESPONSE__BODY_PROFILE, p);
}

/* A Profile request whose run's row is being stored by the writer; its job waits in the queue
 * meanwhile (creating), and the answer is sent once the row is stored. */
struct profile_start {
	struct job_write jw;
	struct profiler *pf;
	uint64_t id;
	bool written;
	int r;
	struct pim_error err;
};

static int profile_start_write(struct store *s, void *data, struct pim_error *err)
{
	return job_write_run(s, &((struct profile_start *)data)->jw, err);
}

/* On the event loop: the run is stored (or not); the job may start. */
static void profile_start_done(void *data, int r, const struct pim_error *err)
{
	struct profile_start *ps = data;
	struct job *j = ps->jw.j;

	ps->written = true;
	ps->r = r;
	if (r < 0) {
		ps->err = *err;
		return; /* the job goes in profile_start_release */
	}
	j->run = ps->jw.run;
	j->creating = false;
	if (j->cancelled) {
		log_info("Profile job %" PRId64 " (model \"%s\") cancelled: %s", j->run, j->model,
			 j->cancel_why);
		job_stop(j);
		return;
	}
	log_info("Profile job %" PRId64 " queued: model \"%s\" for uid %u, %u repetitions, %u regions",
		 j->run, j->model, (unsigned)j->uid, j->reps, ps->jw.regions_total);
	profiler_kick(ps->pf);
}

static Pim__Response *profile_start_reply(void *data)
{
	struct profile_start *ps = data;

	if (ps->r < 0 && ps->jw.j->cancelled)
		return reply_error(ps->id, PIM__ERROR_CODE__ERROR_NOT_FOUND, "profile: %s while the "
				   "job was being queued (%s)", ps->jw.j->cancel_why, ps->err.msg);
	if (ps->r < 0)
		return reply_error_from(ps->id, &ps->err);
	return status_response(ps->pf, ps->id, ps->jw.run);
}

static void profile_start_release(void *data)
{
	struct profile_start *ps = data;

	if (!ps->written || ps->r < 0) {
		job_unlink(ps->jw.j);
		job_free(ps->jw.j);
	}
	free(ps);
}

Pim__Response *profiler_rpc_start(struct profiler *pf, struct rpc_peer *peer, const Pim__Request *req,
				  struct rpc_deferred *defer)
{
	const Pim__Profile *q = req->profile;
	struct pim_error err = { 0 };
	struct stat st;
	int k;

	if (peer->passed_fd < 0)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "profile: the model library must come with the request as a file "
				   "descriptor (pimctl profile --library PATH)");
	if (fstat(peer->passed_fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "profile: the descriptor passed is not a non-empty regular file");
	if (q->repetitions > WORKER_REPS_MAX || q->warmups > WORKER_WARMUPS_MAX)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "profile: at most %u repetitions and %u warm-up runs", WORKER_REPS_MAX,
				   WORKER_WARMUPS_MAX);
	if (q->timeout_ms > 86400000u)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "profile: timeout_ms %u exceeds a day", q->timeout_ms);
	if (q->n_regions > WORKER_REGIONS_MAX)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "profile: at most %u regions", WORKER_REGIONS_MAX);
	if (pf->n_queued >= pf->queue_max)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_BUSY,
				   "profile: %u jobs are queued already (profile_queue_max); retry later",
				   pf->n_queued);
	if (!manifest_name_valid(q->model))
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "\"%.*s\" is not a valid model name", TEXT_ECHO(q->model, 64));
	if (job_uid_allowed(pf, peer->cred.uid, &err) < 0)
		return reply_error(req->id, err.code == -EPERM ? PIM__ERROR_CODE__ERROR_PERMISSION_DENIED
							       : PIM__ERROR_CODE__ERROR_INTERNAL,
				   "%s", err.msg);
	unsigned mine = 0;
	for (const struct job *o = pf->jobs; o; o = o->next)
		mine += !o->running && !o->cancelled && o->uid == peer->cred.uid;
	if (mine >= pf->queue_per_uid)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_BUSY,
				   "profile: uid %u has %u jobs queued already (profile_queue_per_uid); "
				   "retry when one has started", (unsigned)peer->cred.uid, mine);
	struct job *j = calloc(1, sizeof *j);
	if (!j)
		return NULL;
	j->pf = pf;
	j->model_fd = -1;
	snprintf(j->model, sizeof j->model, "%s", q->model);
	j->uid = peer->cred.uid;
	j->gid = peer->cred.gid;
	j->reps = q->repetitions ? q->repetitions : pf->reps;
	j->warmups = q->warmups ? q->warmups : pf->warmups;
	/* profile_timeout_ms is the most a job may hold a worker: a client may ask for less */
	j->timeout_ms = q->timeout_ms ? q->timeout_ms : pf->timeout_ms;
	if (j->timeout_ms > pf->timeout_ms) {
		snprintf(j->note, sizeof j->note, "timeout_ms %u capped at %u ms (profile_timeout_ms)",
			 j->timeout_ms, pf->timeout_ms);
		j->timeout_ms = pf->timeout_ms;
	}
	j->buf = calloc(SAMPLE_ROOM, sizeof *j->buf);
	j->vals = calloc(SAMPLE_ROOM, sizeof *j->vals);
	j->last = calloc(1, sizeof *j->last);
	if (!j->buf || !j->vals || !j->last) {
		job_free(j);
		return NULL;
	}
	if ((k = store_model_id_for(pf->store, q->model, peer->cred.uid, "profile it", &j->model_id,
				    &err)) < 0 ||
	    (k = job_from_store(j, pf->store, q->model, q, &err)) < 0) {
		job_free(j);
		return reply_error_from(req->id, &err);
	}
	plan_events(j, pf->platform);
	struct profile_start *ps = calloc(1, sizeof *ps);
	if (!ps) {
		job_free(j);
		return NULL;
	}
	ps->pf = pf;
	ps->id = req->id;
	ps->jw = (struct job_write){ .j = j, .open = true,
				     .regions_total = (unsigned)(j->n_measure ? j->n_measure : j->n_regions) };
	if (j->note[0]) {
		/* the reply says at once what pimd changed; the final message repeats it */
		ps->jw.update = true;
		ps->jw.u = (struct store_run_update){ .message = j->note, .worker_uid = -1, .regions_done = -1,
						      .repetitions_done = -1, .repetitions_total = -1 };
	}
	j->model_fd = TAKE_FD(peer->passed_fd);
	/* queued at the end, but it starts once its run is stored (profile_start_done);
	 * profiler_kick() picks in turns between uids */
	j->creating = true;
	struct job **tail = &pf->jobs;
	while (*tail)
		tail = &(*tail)->next;
	*tail = j;
	pf->n_queued++;
	return reply_defer(defer, &(struct rpc_deferred){
		.write = { profile_start_write, profile_start_done, ps, NULL }, .store = pf->store,
		.finish = profile_start_reply, .release = profile_start_release, .data = ps });
}

Pim__Response *profiler_rpc_cancel(struct profiler *pf, struct rpc_peer *peer, const Pim__Request *req)
{
	uint64_t job = req->profile_cancel->job;
	uid_t uid = peer->cred.uid;
	struct job *j = pf->jobs;

	while (j && (j->creating || (uint64_t)j->run != job))
		j = j->next;
	if (!j || j->ending || j->cancelled) {
		/* no worker's job queued or running: unknown (the store says so), ended (its state
		 * says how), or an in-situ run (not one of the profiler's jobs) */
		Pim__Response *r = job > INT64_MAX ? NULL : status_response(pf, req->id, (int64_t)job);
		if (!r || r->body_case != PIM__RESPONSE__BODY_PROFILE)
			return r ? r : reply_error(req->id, PIM__ERROR_CODE__ERROR_NOT_FOUND,
						   "no profile job %" PRIu64, job);
		const char *state = j && j->cancelled ? "cancelled" : r->profile->state;
		bool ended = j || strcmp(state, "done") == 0 || strcmp(state, "failed") == 0 ||
			     strcmp(state, "cancelled") == 0;
		char msg[256];
		snprintf(msg, sizeof msg, ended ? "profile job %" PRIu64 " has ended (%s): there is "
						  "nothing to cancel"
						: "profile job %" PRIu64 " is an in-situ run (%s): it "
						  "ends when its client's connection closes", job, state);
		pim__response__free_unpacked(r, NULL);
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT, "%s", msg);
	}
	if (uid != 0 && uid != j->uid)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_PERMISSION_DENIED,
				   "profile job %" PRIu64 " belongs to uid %u: only its owner or root may "
				   "cancel it", job, (unsigned)j->uid);
	char why[64];
	snprintf(why, sizeof why, "by uid %u", (unsigned)uid);
	job_cancel(j, why, false); /* (j ends once its end is stored: later) */
	return status_response(pf, req->id, (int64_t)job);
}

Pim__Response *profiler_rpc_status(struct profiler *pf, const Pim__Request *req)
{
	if (req->profile_status->job > INT64_MAX)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_NOT_FOUND, "no profile job %" PRIu64,
				   req->profile_status->job);
	return status_response(pf, req->id, (int64_t)req->profile_status->job);
}

void profiler_apply_config(struct profiler *pf, const struct config *cfg)
{
	pf->concurrency = cfg->profile_concurrency;
	pf->queue_max = cfg->profile_queue_max;
	pf->reps = cfg->profile_repetitions;
	pf->warmups = cfg->profile_warmups;
	pf->timeout_ms = cfg->profile_timeout_ms;
	pf->cpu_seconds = cfg->profile_cpu_seconds;
	pf->memory_bytes = cfg->profile_memory_bytes;
	pf->max_samples = cfg->profile_max_samples;
	pf->queue_per_uid = cfg->profile_queue_per_uid;
	pf->max_processes = cfg->profile_max_processes;
	pf->allow_root_jobs = cfg->allow_root_jobs;
	snprintf(pf->group, sizeof pf->group, "%s", cfg->profile_group);
	snprintf(pf->socket_path, sizeof pf->socket_path, "%s", cfg->socket_path);
	profiler_kick(pf);
}

void profiler_set_containment(struct profiler *pf, struct cgroup_tree *cgroup,
			      const char *containment)
{
	pf->cgroup = cgroup;
	snprintf(pf->containment, sizeof pf->containment, "%s", containment);
}

const char *profiler_containment(const struct profiler *pf)
{
	return pf->containment;
}

unsigned profiler_active(const struct profiler *pf)
{
	return pf->n_running + pf->n_queued;
}

int profiler_new(struct loop *loop, struct store *store, const struct platform *platform,
		 const struct config *cfg, struct profiler **out, struct pim_error *err)
{
	struct profiler *pf = calloc(1, sizeof *pf);
	int r;

	if (!pf)
		return err_set(err, -ENOMEM, "out of memory");
	pf->loop = loop;
	pf->store = store;
	pf->platform = platform;
	struct pim_error herr = { 0 };
	if (worker_helper_find(pf->helper, sizeof pf->helper, &herr) < 0) {
		pf->helper[0] = 0;
		log_warning("%s", herr.msg);
	} else {
		log_debug("Profiling workers execute %s", pf->helper);
	}
	profiler_apply_config(pf, cfg);
	r = store_runs_abandon(store, err);
	if (r < 0) {
		free(pf);
		return r;
	}
	if (r > 0)
		log_warning("%d profile jobs of a previous pimd never finished; marked failed", r);
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		free(pf);
		return err_set(err, r, "timerfd: %s", strerror(-r));
	}
	struct itimerspec its = { .it_interval = { 0, TIMEOUT_TICK_MS * 1000000L },
				  .it_value = { 0, TIMEOUT_TICK_MS * 1000000L } };
	timerfd_settime(fd, 0, &its, NULL);
	pf->timer = (struct watch){ .fd = fd, .fn = on_timer, .data = pf };
	loop_add(loop, &pf->timer, EPOLLIN);
	*out = pf;
	return 0;
}

void profiler_set_writer(struct profiler *pf, const struct store_writer *writer)
{
	pf->writer = writer ? *writer : (struct store_writer){ 0 };
}

void profiler_stop(struct profiler *pf)
{
	pf->stopping = true;
}

void profiler_free(struct profiler *pf)
{
	if (!pf)
		return;
	/* what the writer did not take is written first: its done() may end jobs */
	store_write_settle(pf->store);
	while (pf->jobs) {
		struct job *j = pf->jobs;
		struct pim_error err = { 0 };
		struct store_run_update u = { .state = "failed", .worker_uid = -1, .regions_done = -1,
					      .repetitions_done = -1, .repetitions_total = -1,
					      .message = "pimd stopped before the job finished; run it again",
					      .finished = true };
		log_notice("Profile job %" PRId64 " of model %s (uid %u) was %s when pimd stopped; "
			   "recorded as interrupted", j->run, j->model, (unsigned)j->uid,
			   j->running ? "running" : "queued");
		/* (nothing is with the writer: it wrote all it was given before it stopped) */
		if (j->nbuf && !j->store_failed &&
		    store_samples_put(pf->store, j->run, j->buf, j->nbuf, &err) < 0)
			log_error("Profile job %" PRId64 ": storing samples failed: %s", j->run, err.msg);
		if (store_run_update(pf->store, j->run, &u, &err) < 0)
			log_error("Profile job %" PRId64 ": recording its end failed: %s", j->run, err.msg);
		job_unlink(j);
		job_free(j);
	}
	loop_del(pf->loop, &pf->timer);
	close(pf->timer.fd);
	free(pf);
}

/* ---------------------------------------------------------------- in-situ sampling */

#define INSITU_BATCH_MAX 65536u
#define INSITU_RUN_MAX 4000000u /* samples per in-situ run: its store space and the work at its end */
/* One execution of one region measured in situ: beyond an hour the clock or the client is wrong
 * (2^64-1 ns would read as 1.8e10 s of T_host, and not fit the store's signed column). */
#define INSITU_TIME_NS_MAX (UINT64_C(3600) * 1000000000u)

/* In-situ samples of all connections with the writer and not yet stored, at most: beyond, a
 * batch is refused (ERROR_BUSY) until the disk catches up. */
#define INSITU_WAITING_MAX (8u * INSITU_BATCH_MAX)

/* The in-situ run of a connection; it is stored (opened) by its first batch. */
struct insitu {
	struct job *j;   /* not queued: holds the run, the model's facts and the store errors */
	uint64_t seq;    /* repetition numbers: unique per run */
	bool opened;     /* its run is stored */
	bool busy;       /* a batch of it is with the writer (its connection waits) */
	bool orphan;     /* its connection closed meanwhile: the batch's end ends the run */
	struct job_write end;
};

/* A SampleBatch with the writer; its connection waits for the answer. */
struct insitu_batch {
	struct job_write jw;
	struct profiler *pf;
	struct insitu *in;
	struct rpc_peer *peer;   /* while the connection is open (!in->orphan) */
	uint64_t id;             /* of the request */
	pid_t pid;               /* of the client */
	unsigned accepted, rejected;
	bool written;            /* its done() came */
	int r;
	struct pim_error err;
};

static void insitu_free(struct insitu *in)
{
	job_free(in->j);
	free(in);
}

/* On the writer thread. */
static int insitu_batch_write(struct store *s, void *data, struct pim_error *err)
{
	return job_write_run(s, &((struct insitu_batch *)data)->jw, err);
}

static int insitu_end_write(struct store *s, void *data, struct pim_error *err)
{
	return job_write_run(s, &((struct insitu *)data)->end, err);
}

static void insitu_batch_part_done(void *data)
{
	job_write_part_done(&((struct insitu_batch *)data)->jw);
}

static void insitu_end_part_done(void *data)
{
	job_write_part_done(&((struct insitu *)data)->end);
}

/* On the event loop: the end of an in-situ run whose connection closed is stored (or not). */
static void insitu_ended(void *data, int r, const struct pim_error *err)
{
	struct insitu *in = data;

	if (r < 0)
		log_error("In-situ run %" PRId64 ": recording the end failed: %s", in->j->run, err->msg);
	else
		log_info("In-situ run %" PRId64 " (model \"%s\"): %s", in->j->run, in->j->model, in->end.msg);
	insitu_free(in);
}

/* The connection of in closed: its run ends (metrics from its samples, its final row). */
static void insitu_end(struct profiler *pf, struct insitu *in)
{
	if (!in->opened) {
		insitu_free(in);
		return;
	}
	in->j->samples_seen = in->seq;
	in->end = (struct job_write){ .sw = { insitu_end_write, insitu_ended, in, insitu_end_part_done, NULL },
				      .j = in->j, .run = in->j->run, .final = true };
	store_write_via(&pf->writer, pf->store, &in->end.sw);
}

void profiler_insitu_close(struct profiler *pf, struct rpc_peer *peer)
{
	struct insitu *in = peer->insitu;

	if (!in)
		return;
	peer->insitu = NULL;
	if (in->busy)
		in->orphan = true; /* insitu_batch_release ends it */
	else
		insitu_end(pf, in);
}

static void insitu_batch_done(void *data, int r, const struct pim_error *err)
{
	struct insitu_batch *b = data;

	b->written = true;
	b->r = r;
	if (r < 0)
		b->err = *err;
}

static Pim__Response *insitu_batch_reply(void *data)
{
	struct insitu_batch *b = data;
	struct reply rb;

	if (b->r < 0)
		return reply_error_from(b->id, &b->err);
	Pim__SampleBatchReply *sr = reply_start(&rb, b->id, PIM__RESPONSE__BODY_SAMPLE_BATCH);
	if (sr) {
		sr->job = (uint64_t)b->jw.run;
		sr->accepted = b->accepted;
		sr->rejected = b->rejected;
		sr->regions_done = b->jw.final ? b->jw.stored : 0;
	}
	return reply_finish(&rb);
}

/* After the answer (or the connection's end): what the batch stored changes the run. */
static void insitu_batch_release(void *data)
{
	struct insitu_batch *b = data;
	struct insitu *in = b->in;
	struct job *j = in->j;

	if (!b->written) {
		b->r = -ECANCELED; /* never handed over */
		err_set(&b->err, b->r, "pimd's writer thread did not take the batch");
	}
	b->pf->insitu_waiting -= b->jw.n;
	in->busy = false;
	if (b->r == 0 && b->jw.open) {
		in->opened = true;
		j->run = b->jw.run;
		log_info("In-situ run %" PRId64 " opened: model \"%s\", pid %d uid %u", j->run, j->model,
			 (int)b->pid, (unsigned)j->uid);
	}
	if (b->r == 0 && b->jw.final) {
		log_info("In-situ run %" PRId64 " (model \"%s\"): %s", j->run, j->model, b->jw.msg);
		if (!in->orphan)
			b->peer->insitu = NULL;
		insitu_free(in);
	} else if (in->orphan) {
		insitu_end(b->pf, in);
	} else if (!in->opened) {
		b->peer->insitu = NULL; /* the next batch tries again */
		insitu_free(in);
	}
	free(b->jw.buf);
	free(b);
}

/* The in-situ state of a connection's first batch, for model q->model: the model's facts and the
 * owner rule (its run is stored with the batch). */
static int insitu_new(struct profiler *pf, const struct rpc_peer *peer, const Pim__SampleBatch *q,
		      struct insitu **out, struct pim_error *err)
{
	Pim__Profile none = PIM__PROFILE__INIT;
	struct job *j = calloc(1, sizeof *j);
	struct insitu *in = calloc(1, sizeof *in);
	int k;

	if (!j || !in) {
		free(j);
		free(in);
		return err_set(err, -ENOMEM, "out of memory");
	}
	j->pf = pf;
	j->model_fd = -1;
	j->insitu = true;
	j->uid = peer->cred.uid;
	in->j = j;
	if (!manifest_name_valid(q->model))
		k = err_set(err, -EINVAL, "\"%.*s\" is not a valid model name", TEXT_ECHO(q->model, 64));
	else if ((k = store_model_id_for(pf->store, q->model, peer->cred.uid, "sample it", &j->model_id,
					 err)) >= 0)
		k = job_from_store(j, pf->store, q->model, &none, err);
	if (k < 0) {
		insitu_free(in);
		return k;
	}
	snprintf(j->model, sizeof j->model, "%s", q->model);
	*out = in;
	return 0;
}

Pim__Response *profiler_rpc_samples(struct profiler *pf, struct rpc_peer *peer, const Pim__Request *req,
				    struct rpc_deferred *defer)
{
	const Pim__SampleBatch *q = req->sample_batch;
	struct pim_error err = { 0 };
	struct insitu *in = peer->insitu;

	if (q->n_samples > INSITU_BATCH_MAX)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "sample batch: %zu samples, at most %u", q->n_samples, INSITU_BATCH_MAX);
	for (size_t i = 0; i < q->n_samples; i++)
		if (q->samples[i]->time_ns > INSITU_TIME_NS_MAX)
			return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
					   "sample batch: samples[%zu].time_ns: %" PRIu64 " exceeds %" PRIu64
					   " (one hour); nothing of this batch was stored", i,
					   q->samples[i]->time_ns, INSITU_TIME_NS_MAX);
	if (in && strcmp(in->j->model, q->model ? q->model : "") != 0)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "sample batch: this connection samples model \"%s\"; use one connection "
				   "per model", in->j->model);
	if (in && in->seq + q->n_samples > INSITU_RUN_MAX)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_BUSY,
				   "sample batch: this in-situ run has %" PRIu64 " samples, at most %u; "
				   "stop sampling (a final batch) and start again", in->seq, INSITU_RUN_MAX);
	if (pf->insitu_waiting + q->n_samples > INSITU_WAITING_MAX)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_BUSY,
				   "sample batch: %" PRIu64 " samples of in-situ runs wait for the disk "
				   "already; nothing of this batch was stored, retry later", pf->insitu_waiting);
	if (!in) {
		/* The first batch opens the run: the model's facts, the owner rule; the run's row is
		 * stored with the batch. */
		if (insitu_new(pf, peer, q, &in, &err) < 0)
			return err.code == -ENOMEM ? NULL : reply_error_from(req->id, &err);
		peer->insitu = in;
	}
	struct job *j = in->j;
	struct insitu_batch *b = calloc(1, sizeof *b);
	struct store_sample *v = calloc(q->n_samples ? q->n_samples : 1, sizeof *v);
	if (!b || !v) {
		free(b);
		free(v);
		if (!in->opened) {
			peer->insitu = NULL;
			insitu_free(in);
		}
		return NULL;
	}
	*b = (struct insitu_batch){ .pf = pf, .in = in, .peer = peer, .id = req->id, .pid = peer->cred.pid };
	for (size_t i = 0; i < q->n_samples; i++) {
		const Pim__RegionSample *s = q->samples[i];
		if (s->region_id > INT32_MAX || !fact_of(j, (int32_t)s->region_id) || s->time_ns == 0) {
			b->rejected++;
			continue;
		}
		v[b->accepted++] = (struct store_sample){ .region = s->region_id, .rep = (uint32_t)in->seq++,
							  .executions = 1, .time_ns = s->time_ns };
	}
	b->jw = (struct job_write){ .j = j, .run = j->run, .buf = v, .n = b->accepted, .open = !in->opened,
				    .regions_total = (unsigned)j->n_regions, .final = q->final };
	if (b->jw.open)
		b->jw.u = (struct store_run_update){
			.state = "running", .backend = "timing",
			.backend_reason = "in-situ sampling by the running model (CLOCK_MONOTONIC in the client)",
			.worker_uid = peer->cred.uid, .regions_done = -1, .repetitions_done = -1,
			.repetitions_total = -1 };
	b->jw.update = b->jw.open;
	j->samples_seen = in->seq;
	pf->insitu_waiting += b->jw.n;
	in->busy = true;
	/* Answered once the samples are on disk, by the writer thread; the connection reads no
	 * more requests meanwhile, so one batch of a run is with the writer at a time. */
	return reply_defer(defer, &(struct rpc_deferred){
		.write = { insitu_batch_write, insitu_batch_done, b, insitu_batch_part_done }, .store = pf->store,
		.finish = insitu_batch_reply, .release = insitu_batch_release, .data = b });
}
