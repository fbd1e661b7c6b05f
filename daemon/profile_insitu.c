/* SPDX-License-Identifier: MIT */
/* profile_insitu.c: in-situ sampling: the SampleBatch requests of a connection (the first one's
 * model read on a work thread), and its run's end. */
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

/* A SampleBatch with the writer; its connection waits for the answer.  A connection's first
 * batch reads its model on a work thread first (fresh: in is the batch's until then). */
struct insitu_batch {
	struct job_write jw;
	struct profiler *pf;
	struct insitu *in;
	struct rpc_peer *peer;   /* while the connection is open (!in->orphan) */
	uint64_t id;             /* of the request */
	pid_t pid;               /* of the client */
	size_t n_sent;           /* samples as sent (in jw.buf until they are sorted out) */
	bool final;              /* as sent */
	bool fresh;              /* in is not the connection's yet: its model is being read */
	int read_r;
	struct pim_error read_err;
	bool sent;               /* handed to the writer */
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
static Pim__Response *insitu_batch_reply(void *data, struct rpc_deferred *next);
static void insitu_batch_release(void *data);
static Pim__Response *insitu_batch_send(struct insitu_batch *b, struct rpc_deferred *defer);
static void insitu_batch_read(struct store *s, void *data);
static Pim__Response *insitu_batch_opened(void *data, struct rpc_deferred *next);

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

static Pim__Response *insitu_batch_reply(void *data, struct rpc_deferred *next)
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

	if (!b->sent) {
		/* its model was not read, or the connection closed meanwhile (fresh: nobody else
		 * has in), or the batch was refused before it went to the writer */
		if (b->fresh)
			insitu_free(in);
		free(b->jw.buf);
		free(b);
		return;
	}
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

/* The batch's samples of the run's regions, numbered, and its change handed to the writer
 * through defer (in is the connection's). */
static Pim__Response *insitu_batch_send(struct insitu_batch *b, struct rpc_deferred *defer)
{
	struct profiler *pf = b->pf;
	struct insitu *in = b->in;
	struct job *j = in->j;
	struct store_sample *v = b->jw.buf;

	/* (other connections' batches may have gone to the writer while the model was read) */
	if (pf->insitu_waiting + b->n_sent > INSITU_WAITING_MAX)
		return reply_error(b->id, PIM__ERROR_CODE__ERROR_BUSY,
				   "sample batch: %" PRIu64 " samples of in-situ runs wait for the disk "
				   "already; nothing of this batch was stored, retry later", pf->insitu_waiting);
	for (size_t i = 0; i < b->n_sent; i++) {
		if (v[i].region > INT32_MAX || !profile_fact_of(j, (int32_t)v[i].region) || v[i].time_ns == 0) {
			b->rejected++;
			continue;
		}
		v[b->accepted++] = (struct store_sample){ .region = v[i].region, .rep = (uint32_t)in->seq++,
							  .executions = 1, .time_ns = v[i].time_ns };
	}
	b->jw = (struct job_write){ .j = j, .run = j->run, .buf = v, .n = b->accepted, .open = !in->opened,
				    .regions_total = (unsigned)j->n_regions, .final = b->final };
	if (b->jw.open)
		b->jw.u = (struct store_run_update){
			.state = "running", .backend = "timing",
			.backend_reason = "in-situ sampling by the running model (CLOCK_MONOTONIC in the client)",
			.worker_uid = b->peer->cred.uid, .regions_done = -1, .repetitions_done = -1,
			.repetitions_total = -1 };
	b->jw.update = b->jw.open;
	j->samples_seen = in->seq;
	pf->insitu_waiting += b->jw.n;
	in->busy = true;
	b->sent = true;
	/* Answered once the samples are on disk, by the writer thread; the connection reads no
	 * more requests meanwhile, so one batch of a run is with the writer at a time. */
	return reply_defer(defer, &(struct rpc_deferred){
		.write = { insitu_batch_write, insitu_batch_done, b, insitu_batch_part_done }, .store = pf->store,
		.finish = insitu_batch_reply, .release = insitu_batch_release, .data = b });
}

/* On a work thread: the model of a connection's first batch, its facts and the owner rule (in
 * is the batch's alone). */
static void insitu_batch_read(struct store *s, void *data)
{
	struct insitu_batch *b = data;

	b->read_r = profile_job_from_store(b->in->j, s, "sample it", NULL, 0, &b->read_err);
}

/* On the event loop: the model is read (or not); the run is the connection's, and the batch goes
 * to the writer (which stores the run's row with it). */
static Pim__Response *insitu_batch_opened(void *data, struct rpc_deferred *next)
{
	struct insitu_batch *b = data;

	if (b->read_r < 0)
		return reply_error_from(b->id, &b->read_err);
	Pim__Response *r = insitu_batch_send(b, next);
	if (b->sent) {
		b->fresh = false;
		b->peer->insitu = b->in;
	}
	return r;
}

Pim__Response *profiler_rpc_samples(struct profiler *pf, struct rpc_peer *peer, const Pim__Request *req,
				    struct rpc_deferred *defer)
{
	const Pim__SampleBatch *q = req->sample_batch;
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
	if (!in && !manifest_name_valid(q->model))
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "\"%.*s\" is not a valid model name", TEXT_ECHO(q->model, 64));
	struct insitu_batch *b = calloc(1, sizeof *b);
	struct store_sample *v = calloc(q->n_samples ? q->n_samples : 1, sizeof *v);
	if (!b || !v) {
		free(b);
		free(v);
		return NULL;
	}
	*b = (struct insitu_batch){ .pf = pf, .in = in, .peer = peer, .id = req->id, .pid = peer->cred.pid,
				    .n_sent = q->n_samples, .final = q->final };
	b->jw.buf = v;
	for (size_t i = 0; i < q->n_samples; i++)
		v[i] = (struct store_sample){ .region = q->samples[i]->region_id, .time_ns = q->samples[i]->time_ns };
	if (in)
		return insitu_batch_send(b, defer);
	/* The first batch opens the run: its model is read on a work thread (the event loop never
	 * queries the store), then the run's row is stored with the batch. */
	struct job *j = calloc(1, sizeof *j);
	in = calloc(1, sizeof *in);
	if (!j || !in) {
		free(j);
		free(in);
		free(v);
		free(b);
		return NULL;
	}
	j->pf = pf;
	j->model_fd = -1;
	j->insitu = true;
	j->uid = peer->cred.uid;
	snprintf(j->model, sizeof j->model, "%s", q->model);
	in->j = j;
	b->in = in;
	b->fresh = true;
	return reply_defer(defer, &(struct rpc_deferred){
		.run = insitu_batch_read, .store = pf->store, .finish = insitu_batch_opened,
		.release = insitu_batch_release, .data = b });
}
