/* SPDX-License-Identifier: MIT */
/* profile_turns.c: turns between uids in the profiling queue: which job starts next. */
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

static uint64_t turns_last(const struct profile_turns *t, uid_t uid);
static bool job_waiting(const struct job *j);
static struct job *next_job(struct profiler *pf);

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

void profiler_kick(struct profiler *pf)
{
	struct job *j;
	/* (a job of a model gone was cancelled when the transport said so: profiler_models_changed,
	 * told before anything else a thread finished with the change) */
	while (!pf->stopping && pf->n_running < pf->concurrency && (j = next_job(pf))) {
		profile_turns_take(&pf->turns, j->uid);
		profile_job_start(j);
	}
}
