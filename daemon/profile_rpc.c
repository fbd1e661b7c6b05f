/* SPDX-License-Identifier: MIT */
/*
 * profile_rpc.c: who may profile (profile_group), and the requests Profile, ProfileStatus and
 * ProfileCancel.  They are answered on the event loop, where the jobs are, and read the store
 * never there: a job's model and a run's row are read on a work thread (rpc_deferred.run), a
 * new run's row read back by the writer that stores it.
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

/*
 * A Profile request, in two parts: its model read on a work thread into a job of its own (which
 * nothing on the event loop sees yet); then, the job queued (creating: it cannot start yet), its
 * run's row stored by the writer and read back there, and the answer sent once it is stored.
 */
struct profile_start {
	struct job_write jw;       /* its job (jw.j), and the row's creation */
	struct profiler *pf;
	uint64_t id;
	uint32_t *regions;         /* what to measure, as asked (n_regions; none: all) */
	size_t n_regions;
	uint64_t models_gen;       /* pf->models_gen when the model was read */
	bool queued;               /* the job is the profiler's (in pf->jobs) */
	int read_r;                /* the first part's outcome */
	struct pim_error read_err;
	bool written;              /* the row's write is done (or failed: r) */
	int r;
	struct pim_error err;
	int row_r;                 /* the row as read back by the writer */
	Pim__ProfileReply *row;
	struct pim_error row_err;
};

/* A ProfileStatus, or the answer of a ProfileCancel: the run's row, read on a work thread, with
 * what the event loop knows of it (profile_status_answer). */
struct status_read {
	struct profiler *pf;
	uint64_t id;
	int64_t run;
	bool cancel;               /* a ProfileCancel with nothing to cancel: say why */
	bool had_job, was_cancelled; /* (its job as the cancel found it) */
	int r;
	struct pim_error err;
	Pim__ProfileReply *row;
};

static int job_group(const struct profiler *pf, gid_t *gid, char *name, size_t len,
		     struct pim_error *err);
static bool user_in_group(uid_t uid, gid_t gid);
static int job_uid_allowed(const struct profiler *pf, uid_t uid, struct pim_error *err);
static Pim__Response *job_admit(const struct profiler *pf, uid_t uid, uint64_t id);
static Pim__ProfileReply *gone_reply(const struct profiler *pf, int64_t run);
static Pim__Response *profile_status_answer(struct profiler *pf, uint64_t id, int64_t run, int r,
					    Pim__ProfileReply *row, const struct pim_error *err);
static void status_read_run(struct store *s, void *data);
static Pim__Response *status_read_finish(void *data, struct rpc_deferred *next);
static void status_read_release(void *data);
static Pim__Response *status_defer(struct profiler *pf, const struct status_read *q, struct rpc_deferred *defer);
static void profile_start_read(struct store *s, void *data);
static Pim__Response *profile_start_queue(void *data, struct rpc_deferred *next);
static int profile_start_write(struct store *s, void *data, struct pim_error *err);
static Pim__Response *profile_start_reply(void *data, struct rpc_deferred *next);
static void profile_start_release(void *data);

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

/* A stored run as the ProfileReply of its job, which takes its strings over (NULL when out of
 * memory: r is cleared either way). */
static Pim__ProfileReply *run_to_wire(struct store_run *r)
{
	Pim__ProfileReply *p = malloc(sizeof *p);

	if (!p) {
		store_run_clear(r);
		return NULL;
	}
	pim__profile_reply__init(p);
	p->job = (uint64_t)r->id;
	p->state = r->state;
	p->model = r->model;
	p->backend = r->backend;
	p->backend_reason = r->backend_reason;
	p->regions_done = r->regions_done;
	p->regions_total = r->regions_total;
	p->repetitions_done = r->repetitions_done;
	p->repetitions_total = r->repetitions_total;
	p->samples = r->samples;
	p->message = r->message;
	p->uid = r->uid;
	p->created_at = r->created_at;
	p->finished_at = r->finished_at;
	*r = (struct store_run){ 0 };
	return p;
}

/* A stored run's row as a ProfileReply (store_run_get, then run_to_wire). */
static int run_get_wire(struct store *s, int64_t run, Pim__ProfileReply **out, struct pim_error *err)
{
	struct store_run sr;
	int r = store_run_get(s, run, &sr, err);

	*out = NULL;
	if (r < 0)
		return r;
	if (!(*out = run_to_wire(&sr)))
		return err_set(err, -ENOMEM, "out of memory");
	return 0;
}

/* On the event loop: the answer about run from its row (r 0: row, taken over; else err says why
 * it was not read), with what the loop knows of it: an end the store could not record, a job
 * cancelled with its model, the live position of a queued or running job. */
static Pim__Response *profile_status_answer(struct profiler *pf, uint64_t id, int64_t run, int r,
					    Pim__ProfileReply *row, const struct pim_error *err)
{
	Pim__ProfileReply *p = row;

	if (r < 0) {
		if (err->code != -ENOENT || !(p = gone_reply(pf, run)))
			return reply_error_from(id, err);
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

/* On a work thread. */
static void status_read_run(struct store *s, void *data)
{
	struct status_read *q = data;

	q->r = run_get_wire(s, q->run, &q->row, &q->err);
}

static Pim__Response *status_read_finish(void *data, struct rpc_deferred *next)
{
	struct status_read *q = data;
	Pim__ProfileReply *row = q->row;

	q->row = NULL;
	Pim__Response *r = profile_status_answer(q->pf, q->id, q->run, q->r, row, &q->err);
	if (!q->cancel)
		return r;
	/* no worker's job queued or running: unknown (the store says so), ended (its state says
	 * how), or an in-situ run (not one of the profiler's jobs) */
	if (!r || r->body_case != PIM__RESPONSE__BODY_PROFILE)
		return r ? r : reply_error(q->id, PIM__ERROR_CODE__ERROR_NOT_FOUND, "no profile job %" PRId64,
					   q->run);
	const char *state = q->was_cancelled ? "cancelled" : r->profile->state;
	bool ended = q->had_job || strcmp(state, "done") == 0 || strcmp(state, "failed") == 0 ||
		     strcmp(state, "cancelled") == 0;
	char msg[256];
	snprintf(msg, sizeof msg, ended ? "profile job %" PRId64 " has ended (%s): there is "
					  "nothing to cancel"
					: "profile job %" PRId64 " is an in-situ run (%s): it "
					  "ends when its client's connection closes", q->run, state);
	pim__response__free_unpacked(r, NULL);
	return reply_error(q->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT, "%s", msg);
}

static void status_read_release(void *data)
{
	struct status_read *q = data;

	if (q->row)
		pim__profile_reply__free_unpacked(q->row, NULL);
	free(q);
}

/* The answer about a run (q: the request), once its row is read on a work thread; NULL when
 * out of memory. */
static Pim__Response *status_defer(struct profiler *pf, const struct status_read *q, struct rpc_deferred *defer)
{
	struct status_read *sr = malloc(sizeof *sr);

	if (!sr)
		return NULL;
	*sr = *q;
	sr->pf = pf;
	return reply_defer(defer, &(struct rpc_deferred){
		.run = status_read_run, .store = pf->store, .finish = status_read_finish,
		.release = status_read_release, .data = sr });
}

/* Whether uid may queue another job now: NULL, or the answer to request id that says why not. */
static Pim__Response *job_admit(const struct profiler *pf, uid_t uid, uint64_t id)
{
	if (pf->n_queued >= pf->queue_max)
		return reply_error(id, PIM__ERROR_CODE__ERROR_BUSY,
				   "profile: %u jobs are queued already (profile_queue_max); retry later",
				   pf->n_queued);
	unsigned mine = 0;
	for (const struct job *o = pf->jobs; o; o = o->next)
		mine += !o->running && !o->cancelled && o->uid == uid;
	if (mine >= pf->queue_per_uid)
		return reply_error(id, PIM__ERROR_CODE__ERROR_BUSY,
				   "profile: uid %u has %u jobs queued already (profile_queue_per_uid); "
				   "retry when one has started", (unsigned)uid, mine);
	return NULL;
}

/* On a work thread: the job's model (its job is nobody else's yet). */
static void profile_start_read(struct store *s, void *data)
{
	struct profile_start *ps = data;

	ps->read_r = profile_job_from_store(ps->jw.j, s, "profile it", ps->regions, ps->n_regions, &ps->read_err);
}

/* On the event loop: the model is read (or not); the job is queued, its run's row handed to the
 * writer. */
static Pim__Response *profile_start_queue(void *data, struct rpc_deferred *next)
{
	struct profile_start *ps = data;
	struct profiler *pf = ps->pf;
	struct job *j = ps->jw.j;
	const char *gone;
	Pim__Response *busy;

	if (ps->read_r < 0)
		return reply_error_from(ps->id, &ps->read_err);
	if ((gone = profile_model_gone_since(pf, ps->models_gen, j->model_id)))
		return reply_error(ps->id, PIM__ERROR_CODE__ERROR_NOT_FOUND, "profile: %s while the job "
				   "was being queued", gone);
	/* (other jobs may have been queued while the model was read) */
	if ((busy = job_admit(pf, j->uid, ps->id)))
		return busy;
	profile_plan_events(j, pf->platform);
	ps->jw.open = true;
	ps->jw.regions_total = (unsigned)(j->n_measure ? j->n_measure : j->n_regions);
	if (j->note[0]) {
		/* the reply says at once what pimd changed; the final message repeats it */
		ps->jw.update = true;
		ps->jw.u = (struct store_run_update){ .message = j->note, .worker_uid = -1, .regions_done = -1,
						      .repetitions_done = -1, .repetitions_total = -1 };
	}
	/* queued at the end, but it starts once its run is stored (profile_start_done);
	 * profiler_kick() picks in turns between uids */
	j->creating = true;
	struct job **tail = &pf->jobs;
	while (*tail)
		tail = &(*tail)->next;
	*tail = j;
	pf->n_queued++;
	ps->queued = true;
	return reply_defer(next, &(struct rpc_deferred){
		.write = { profile_start_write, profile_start_done, ps, NULL }, .store = pf->store,
		.finish = profile_start_reply, .release = profile_start_release, .data = ps });
}

/* On the writer thread: the run's row, and the row as stored, for the answer. */
static int profile_start_write(struct store *s, void *data, struct pim_error *err)
{
	struct profile_start *ps = data;
	int r = profile_job_write_run(s, &ps->jw, err);

	if (ps->row) /* (made again alone: its group failed) */
		pim__profile_reply__free_unpacked(ps->row, NULL);
	ps->row = NULL;
	ps->row_err = (struct pim_error){ 0 };
	ps->row_r = r < 0 ? r : run_get_wire(s, ps->jw.run, &ps->row, &ps->row_err);
	return r;
}

/* On the event loop: the run is stored (or not); the job may start. */
void profile_start_done(void *data, int r, const struct pim_error *err)
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
		profile_job_stop(j);
		return;
	}
	log_info("Profile job %" PRId64 " queued: model \"%s\" for uid %u, %u repetitions, %u regions",
		 j->run, j->model, (unsigned)j->uid, j->reps, ps->jw.regions_total);
	profiler_kick(ps->pf);
}

static Pim__Response *profile_start_reply(void *data, struct rpc_deferred *next)
{
	struct profile_start *ps = data;
	Pim__ProfileReply *row = ps->row;

	if (ps->r < 0 && ps->jw.j->cancelled)
		return reply_error(ps->id, PIM__ERROR_CODE__ERROR_NOT_FOUND, "profile: %s while the "
				   "job was being queued (%s)", ps->jw.j->cancel_why, ps->err.msg);
	if (ps->r < 0)
		return reply_error_from(ps->id, &ps->err);
	ps->row = NULL;
	return profile_status_answer(ps->pf, ps->id, ps->jw.run, ps->row_r, row, &ps->row_err);
}

static void profile_start_release(void *data)
{
	struct profile_start *ps = data;

	if (!ps->queued) {
		profile_job_free(ps->jw.j);
	} else if (!ps->written || ps->r < 0) {
		profile_job_unlink(ps->jw.j);
		profile_job_free(ps->jw.j);
	}
	if (ps->row)
		pim__profile_reply__free_unpacked(ps->row, NULL);
	free(ps->regions);
	free(ps);
}

Pim__Response *profiler_rpc_start(struct profiler *pf, struct rpc_peer *peer, const Pim__Request *req,
				  struct rpc_deferred *defer)
{
	const Pim__Profile *q = req->profile;
	struct pim_error err = { 0 };
	struct stat st;
	Pim__Response *busy;

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
		return job_admit(pf, peer->cred.uid, req->id);
	if (!manifest_name_valid(q->model))
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "\"%.*s\" is not a valid model name", TEXT_ECHO(q->model, 64));
	if (job_uid_allowed(pf, peer->cred.uid, &err) < 0)
		return reply_error(req->id, err.code == -EPERM ? PIM__ERROR_CODE__ERROR_PERMISSION_DENIED
							       : PIM__ERROR_CODE__ERROR_INTERNAL,
				   "%s", err.msg);
	if ((busy = job_admit(pf, peer->cred.uid, req->id)))
		return busy;
	struct job *j = calloc(1, sizeof *j);
	struct profile_start *ps = calloc(1, sizeof *ps);
	if (!j || !ps) {
		free(j);
		free(ps);
		return NULL;
	}
	ps->jw.j = j;
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
	j->batch = profile_batch_new();
	ps->regions = q->n_regions ? malloc(q->n_regions * sizeof *ps->regions) : NULL;
	if (!j->batch || (q->n_regions && !ps->regions)) {
		profile_start_release(ps);
		return NULL;
	}
	if (q->n_regions)
		memcpy(ps->regions, q->regions, q->n_regions * sizeof *ps->regions);
	ps->n_regions = q->n_regions;
	ps->pf = pf;
	ps->id = req->id;
	ps->models_gen = pf->models_gen;
	j->model_fd = TAKE_FD(peer->passed_fd);
	/* the model is read on a work thread: the event loop never queries the store */
	return reply_defer(defer, &(struct rpc_deferred){
		.run = profile_start_read, .store = pf->store, .finish = profile_start_queue,
		.release = profile_start_release, .data = ps });
}

Pim__Response *profiler_rpc_cancel(struct profiler *pf, struct rpc_peer *peer, const Pim__Request *req,
				   struct rpc_deferred *defer)
{
	uint64_t job = req->profile_cancel->job;
	uid_t uid = peer->cred.uid;
	struct job *j = pf->jobs;

	while (j && (j->creating || (uint64_t)j->run != job))
		j = j->next;
	if (!j || j->ending || j->cancelled) {
		if (job > INT64_MAX)
			return reply_error(req->id, PIM__ERROR_CODE__ERROR_NOT_FOUND, "no profile job %" PRIu64, job);
		return status_defer(pf, &(struct status_read){ .id = req->id, .run = (int64_t)job, .cancel = true,
							       .had_job = j != NULL,
							       .was_cancelled = j && j->cancelled }, defer);
	}
	if (uid != 0 && uid != j->uid)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_PERMISSION_DENIED,
				   "profile job %" PRIu64 " belongs to uid %u: only its owner or root may "
				   "cancel it", job, (unsigned)j->uid);
	char why[64];
	snprintf(why, sizeof why, "by uid %u", (unsigned)uid);
	profile_job_cancel(j, why, false); /* (j ends once its end is stored: later) */
	return status_defer(pf, &(struct status_read){ .id = req->id, .run = (int64_t)job }, defer);
}

Pim__Response *profiler_rpc_status(struct profiler *pf, const Pim__Request *req, struct rpc_deferred *defer)
{
	if (req->profile_status->job > INT64_MAX)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_NOT_FOUND, "no profile job %" PRIu64,
				   req->profile_status->job);
	return status_defer(pf, &(struct status_read){ .id = req->id, .run = (int64_t)req->profile_status->job },
			    defer);
}
