/* SPDX-License-Identifier: MIT */
/* profile_write.c: a job's changes with the writer thread: batches of samples (each its own write
 * request: profile_pipe.c says how a sample gets there), progress, its end. */
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

void profile_job_store_error(struct job *j, const struct pim_error *err)
{
	if (!j->store_failed)
		snprintf(j->store_error, sizeof j->store_error, "%s", err->msg);
	j->store_failed = true;
}

/* An empty batch: a write request with room for SAMPLE_ROOM samples; NULL without memory. */
struct job_write *profile_batch_new(void)
{
	struct job_write *jw = calloc(1, sizeof *jw);

	if (jw) {
		jw->buf = calloc(SAMPLE_ROOM, sizeof *jw->buf);
		jw->vals = calloc(SAMPLE_ROOM, sizeof *jw->vals);
	}
	if (!jw || !jw->buf || !jw->vals) {
		if (jw)
			profile_job_write_free(jw);
		return NULL;
	}
	return jw;
}

void profile_job_write_free(struct job_write *jw)
{
	if (!jw)
		return;
	free(jw->buf);
	free(jw->vals);
	free(jw);
}

/* On the writer thread: jw (store_write). */
int profile_job_write_run(struct store *s, void *data, struct pim_error *err)
{
	struct job_write *jw = data;
	struct job *j = jw->j;
	char failure[256] = "";
	int r;

	if (jw->head_done || (jw->final && j->gone))
		return profile_job_end_run(s, jw, failure, err); /* a further part of the metrics, or no row */
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
	return jw->final ? profile_job_end_run(s, jw, failure, err) : 0;
}

/* On the writer thread: a part of the metrics of the job_write data is on disk (with the head,
 * the first time). */
void profile_job_write_part_done(void *data)
{
	struct job_write *jw = data;

	jw->head_done = true;
	jw->derive_from = jw->derive_next;
	jw->stored = jw->stored_next;
}

/* Hands jw to the writer (j->writes counts it until profile_job_write_done, which comes later: j is
 * still there when this returns). */
void profile_job_submit(struct job *j, struct job_write *jw)
{
	if (j->gone && !jw->final) {
		profile_job_write_free(jw); /* its run is gone: nothing more to store */
		return;
	}
	jw->j = j;
	jw->run = j->run;
	jw->sw = (struct store_write){ profile_job_write_run, profile_job_write_done, jw,
				       profile_job_write_part_done, NULL };
	j->writes++;
	store_write_via(&j->pf->writer, j->pf->store, &jw->sw);
}

/* Hands j's open batch of samples, with progress when not NULL, to the writer and opens the
 * next; progress alone goes in a change of its own.  False when BATCHES_WAITING of its changes
 * wait for the disk already (nothing was handed over). */
bool profile_job_flush(struct job *j, const struct store_run_update *progress)
{
	struct job_write *jw;

	if (j->writes >= BATCHES_WAITING)
		return false;
	if (j->store_failed) {
		j->batch->n = 0; /* nothing more is stored: the job's end says why */
		return true;
	}
	if (!j->batch->n && !progress)
		return true;
	/* (the next batch, or the change for progress alone) */
	struct job_write *next = j->batch->n ? profile_batch_new() : calloc(1, sizeof *next);
	if (!next) {
		struct pim_error err = { 0 };
		err_set(&err, -ENOMEM, "out of memory for %zu samples", j->batch->n);
		profile_job_store_error(j, &err);
		j->batch->n = 0;
		return true;
	}
	if (j->batch->n) {
		jw = j->batch;
		j->batch = next;
	} else {
		jw = next;
	}
	if (progress) {
		jw->update = true;
		jw->u = *progress;
	}
	profile_job_submit(j, jw);
	return true;
}

/* On the event loop: a change of j was made (r 0) or not. */
void profile_job_write_done(void *data, int r, const struct pim_error *err)
{
	struct job_write *jw = data;
	struct job *j = jw->j;

	j->writes--;
	if (jw->final) {
		profile_job_ended(j, jw, r, err);
		return;
	}
	if (r < 0) {
		log_error("Profile job %" PRId64 ": storing samples failed: %s", j->run, err->msg);
		profile_job_store_error(j, err);
	}
	profile_job_write_free(jw);
	if (j->paused && (j->batch->n < SAMPLE_BATCH || profile_job_flush(j, NULL)))
		profile_job_pause(j, false);
	if (j->ending)
		profile_job_end(j); /* (j is freed when its end's done() comes) */
}
