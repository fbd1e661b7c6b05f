/* SPDX-License-Identifier: MIT */
/*
 * profile_pipe.c: reading a worker's pipe on the event loop: its records become the job's
 * samples.  A sample takes one form per layer, on a straight line:
 *
 *   worker record   a 512-byte struct worker_record, validated in the worker's read buffer
 *                   (worker_next: no copy, no callback);
 *   parsed sample   a struct store_sample written straight into the job's open batch (j->batch,
 *                   its counter values beside it in the batch's vals);
 *   write request   that batch itself, a struct job_write, handed whole to the writer thread
 *                   (profile_job_flush, profile_write.c) once it holds SAMPLE_BATCH samples or
 *                   progress is due, and a new one opened; the last one carries the run's end.
 *
 * The writer stores the batch in one change (store_samples_put) and gives it back to the event
 * loop (profile_job_write_done), which frees it.
 */
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

static void job_take(struct job *j, const struct worker_record *r);
static void job_read(struct job *j);

/* Stops or resumes reading j's worker pipe. */
void profile_job_pause(struct job *j, bool pause)
{
	if (j->eof || j->paused == pause)
		return;
	j->paused = pause;
	loop_mod(j->pf->loop, &j->wfd, pause ? 0 : EPOLLIN);
	if (pause)
		log_debug("Profile job %" PRId64 ": %u changes wait for the writer thread; the worker's "
			  "results are read no further until one is stored", j->run, j->writes);
}

/* One record of j's worker. */
static void job_take(struct job *j, const struct worker_record *r)
{
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
			profile_job_submit(j, jw);
		} else {
			err_set(&err, -ENOMEM, "out of memory");
			profile_job_store_error(j, &err);
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
		struct job_write *b = j->batch;
		if (b->n == SAMPLE_ROOM) {
			/* (job_read stops reading before; never reached) */
			err_set(&err, -ENOBUFS, "samples came faster than the store took them");
			profile_job_store_error(j, &err);
			break;
		}
		j->samples_seen++;
		unsigned nv = s->n_values < COUNTERS_MAX_GROUP ? s->n_values : COUNTERS_MAX_GROUP;
		memcpy(b->vals[b->n], s->value, nv * sizeof s->value[0]);
		b->buf[b->n] = (struct store_sample){ .region = (uint32_t)s->region, .group = s->group,
						      .rep = s->rep, .executions = s->executions,
						      .time_ns = s->time_ns, .time_enabled = s->time_enabled,
						      .time_running = s->time_running, .n_values = nv,
						      .values = b->vals[b->n] };
		if (++b->n >= SAMPLE_BATCH)
			profile_job_flush(j, NULL); /* else job_read stops reading until it can */
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
		if (now - j->progress_stored_ns >= PROGRESS_STORE_NS && profile_job_flush(j, &u))
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

static void job_read(struct job *j)
{
	const struct worker_record *rec;
	int r;

	/* A full batch waits for the writer: the worker waits for its pipe meanwhile. */
	if (j->batch->n >= SAMPLE_BATCH && !profile_job_flush(j, NULL)) {
		profile_job_pause(j, true);
		return;
	}
	while ((r = worker_next(j->w, &rec)) == 1)
		job_take(j, rec);
	if (r != 0 && !j->eof) {
		/* EOF, or malformed records (the worker was killed; reap names it) */
		j->eof = true;
		loop_del(j->pf->loop, &j->wfd);
	} else if (j->batch->n >= SAMPLE_BATCH) {
		profile_job_pause(j, true);
	}
}

void profile_on_worker_fd(struct watch *w, uint32_t events)
{
	struct job *j = w->data;
	job_read(j);
	profile_job_try_finish(j);
}

void profile_on_worker_exit(struct watch *w, uint32_t events)
{
	struct job *j = w->data;
	/* The pidfd stays readable: stop watching it, the pipe's EOF finishes the job. */
	loop_del(j->pf->loop, &j->wpid);
	j->exited = true;
	if (!j->eof)
		job_read(j);
	profile_job_try_finish(j);
}
