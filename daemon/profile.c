/* SPDX-License-Identifier: MIT */
/* profile.c: the profiler, and the life of a job: started, finished, cancelled, freed (profile_int.h
 * names the other parts). */
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

static void job_finish(struct job *j, const struct worker_status *st);
static void on_timer(struct watch *w, uint32_t events);
static int pick_cpu(const struct profiler *pf);

void profile_job_free(struct job *j)
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
	profile_job_write_free(j->batch);
	free(j);
}

void profile_job_unlink(struct job *j)
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

/* The worker of j ended: once nothing of j is with the writer, its open batch goes there with
 * the rest of its samples and its end (profile_job_ended). */
void profile_job_end(struct job *j)
{
	if (j->writes || !j->batch)
		return; /* profile_job_write_done comes back here */
	struct job_write *jw = j->batch;
	j->batch = NULL;
	jw->final = true;
	jw->st = j->end;
	profile_job_submit(j, jw);
}

void profiler_models_changed(struct profiler *pf, int64_t model_id, bool replaced)
{
	const char *why = replaced ? "model replaced" : "model removed";
	unsigned i = pf->models_gen++ % UNRECORDED_MAX;

	pf->models_gone[i].id = model_id;
	pf->models_gone[i].replaced = replaced;
	for (struct job *j = pf->jobs; j; j = j->next)
		j->gone_seen = !j->cancelled && !j->ending && !j->insitu && j->model_id == model_id;
	/* from the start each time: cancelling one may end others, and start or free jobs */
	for (;;) {
		struct job *j = pf->jobs;
		while (j && !(j->gone_seen && !j->cancelled))
			j = j->next;
		if (!j)
			return;
		j->gone_seen = false;
		profile_job_cancel(j, why, true);
	}
}

/* Whether model model_id was removed or replaced since pf->models_gen was gen: why ("model
 * replaced", "model removed", or when more changes came than are remembered, "model removed or
 * replaced"), or NULL. */
const char *profile_model_gone_since(const struct profiler *pf, uint64_t gen, int64_t model_id)
{
	if (pf->models_gen - gen > UNRECORDED_MAX)
		return "model removed or replaced";
	for (uint64_t g = gen; g < pf->models_gen; g++)
		if (pf->models_gone[g % UNRECORDED_MAX].id == model_id)
			return pf->models_gone[g % UNRECORDED_MAX].replaced ? "model replaced" : "model removed";
	return NULL;
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
void profile_job_ended(struct job *j, struct job_write *jw, int r, const struct pim_error *err)
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
	profile_job_write_free(jw);
	profile_job_unlink(j);
	profile_job_free(j);
	profiler_reap_strays(pf);
	profiler_kick(pf);
}

/* The worker of j ended (st): the job ends once its samples are stored. */
static void job_finish(struct job *j, const struct worker_status *st)
{
	j->ending = true;
	j->end = *st;
	profile_job_end(j);
}

void profile_job_try_finish(struct job *j)
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

/* What profile_job_cancel does once j's run is stored: stops its worker (its end comes as any
 * worker's), or ends it at once when it has none. */
void profile_job_stop(struct job *j)
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
void profile_job_cancel(struct job *j, const char *why, bool gone)
{
	if (j->cancelled || j->ending || j->insitu)
		return;
	j->cancelled = true;
	j->gone = gone;
	snprintf(j->cancel_why, sizeof j->cancel_why, "%s", why);
	if (gone) {
		j->store_failed = true; /* no sample is stored any more */
		j->batch->n = 0;
	}
	if (j->creating) {
		log_info("Profile job of model \"%s\" for uid %u cancelled before it was queued: %s",
			 j->model, (unsigned)j->uid, why);
		return; /* profile_start_done stops it once its run is stored */
	}
	log_info("Profile job %" PRId64 " (model \"%s\", %s) cancelled: %s", j->run, j->model,
		 j->running ? "running" : "queued", why);
	profile_job_stop(j);
}

void profile_job_start(struct job *j)
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
	j->wfd = (struct watch){ .fd = worker_fd(j->w), .fn = profile_on_worker_fd, .data = j };
	if (loop_add(pf->loop, &j->wfd, EPOLLIN) < 0) {
		/* Cannot watch it: stop it now; the timer reaps it (eof set, no reader). */
		log_error("Profile job %" PRId64 ": cannot watch the worker: %s; stopping it", j->run,
			  strerror(errno));
		worker_kill(j->w);
		j->eof = true;
		j->exited = true;
		return;
	}
	j->exited = true; /* no pidfd watch unless added below: profile_job_free must not delete one */
	if (worker_pidfd(j->w) >= 0) {
		j->wpid = (struct watch){ .fd = worker_pidfd(j->w), .fn = profile_on_worker_exit, .data = j };
		if (loop_add(pf->loop, &j->wpid, EPOLLIN) == 0)
			j->exited = false;
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
		profile_job_try_finish(reap); /* one per tick */
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
		if (j->batch && j->batch->n && !j->store_failed &&
		    store_samples_put(pf->store, j->run, j->batch->buf, j->batch->n, &err) < 0)
			log_error("Profile job %" PRId64 ": storing samples failed: %s", j->run, err.msg);
		if (store_run_update(pf->store, j->run, &u, &err) < 0)
			log_error("Profile job %" PRId64 ": recording its end failed: %s", j->run, err.msg);
		profile_job_unlink(j);
		profile_job_free(j);
	}
	loop_del(pf->loop, &pf->timer);
	close(pf->timer.fd);
	free(pf);
}
