/* SPDX-License-Identifier: MIT */
/* profile_insitu.c: in-situ sampling: the SampleBatch requests of a connection, and its run's end. */
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

#define INSITU_BATCH_MAX 65536u

#define INSITU_RUN_MAX 4000000u /* samples per in-situ run: its store space and the work at its end */

/* One execution of one region measured in situ: beyond an hour the clock or the client is wrong
 * (2^64-1 ns would read as 1.8e10 s of T_host, and not fit the store's signed column). */
#define INSITU_TIME_NS_MAX (UINT64_C(3600) * 1000000000u)

/* In-situ samples of all connections with the writer and not yet stored, at most: beyond, a
 * batch is refused (ERROR_BUSY) until the disk catches up. */
#define INSITU_WAITING_MAX (8u * INSITU_BATCH_MAX)

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

static void insitu_free(struct insitu *in);
static int insitu_batch_write(struct store *s, void *data, struct pim_error *err);
static int insitu_end_write(struct store *s, void *data, struct pim_error *err);
static void insitu_batch_part_done(void *data);
static void insitu_end_part_done(void *data);
static void insitu_ended(void *data, int r, const struct pim_error *err);
static void insitu_end(struct profiler *pf, struct insitu *in);
static void insitu_batch_done(void *data, int r, const struct pim_error *err);
static Pim__Response *insitu_batch_reply(void *data);
static void insitu_batch_release(void *data);
static int insitu_new(struct profiler *pf, const struct rpc_peer *peer, const Pim__SampleBatch *q,
		      struct insitu **out, struct pim_error *err);

static void insitu_free(struct insitu *in)
{
	profile_job_free(in->j);
	free(in);
}

/* On the writer thread. */
static int insitu_batch_write(struct store *s, void *data, struct pim_error *err)
{
	return profile_job_write_run(s, &((struct insitu_batch *)data)->jw, err);
}

static int insitu_end_write(struct store *s, void *data, struct pim_error *err)
{
	return profile_job_write_run(s, &((struct insitu *)data)->end, err);
}

static void insitu_batch_part_done(void *data)
{
	profile_job_write_part_done(&((struct insitu_batch *)data)->jw);
}

static void insitu_end_part_done(void *data)
{
	profile_job_write_part_done(&((struct insitu *)data)->end);
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
		k = profile_job_from_store(j, pf->store, q->model, &none, err);
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
		if (s->region_id > INT32_MAX || !profile_fact_of(j, (int32_t)s->region_id) || s->time_ns == 0) {
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
