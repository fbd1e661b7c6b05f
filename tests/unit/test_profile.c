/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of daemon/profile.c: the turns between uids (its metrics: test_metrics.c), a
 * job whose changes wait for the writer thread: its worker's pipe is not read beyond what may
 * wait, and nothing is lost; and the requests answered as pimd answers them, reading the store
 * on the transport's threads only.  profile_int.h is included to see the jobs.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/timerfd.h>

#include "log.h"
#include "pimsim.h"
#include "profile_int.h"
#include "rpc.h"
#include "threads.h"
#include "test_util.h"

/* Runs a queue of jobs (their uids, in arrival order) one at a time; returns the start order. */
static void run_queue(struct profile_turns *t, const uid_t *queue, size_t n, uid_t *order)
{
	uid_t waiting[16];
	memcpy(waiting, queue, n * sizeof *queue);
	for (size_t k = 0; k < n; k++) {
		size_t left = n - k;
		size_t i = profile_turns_pick(t, waiting, left);
		order[k] = waiting[i];
		profile_turns_take(t, waiting[i]);
		memmove(&waiting[i], &waiting[i + 1], (left - i - 1) * sizeof *waiting);
	}
}

START_TEST(turns_between_uids)
{
	struct profile_turns t;
	memset(&t, 0, sizeof t);
	/* 1000 queued four jobs before 2000 and 3000 queued one each: they do not wait for all four */
	const uid_t queue[] = { 1000, 1000, 1000, 1000, 2000, 3000 };
	uid_t order[6];
	run_queue(&t, queue, 6, order);
	const uid_t want[] = { 1000, 2000, 3000, 1000, 1000, 1000 };
	ck_assert_mem_eq(order, want, sizeof want);

	/* now 1000's last start is the latest (its three in a row): a uid never served goes
	 * first, then 2000 and 3000 in the order of their last starts, then 1000 */
	const uid_t again[] = { 3000, 2000, 1000, 4000 };
	run_queue(&t, again, 4, order);
	const uid_t want2[] = { 4000, 2000, 3000, 1000 };
	ck_assert_mem_eq(order, want2, sizeof want2);
}
END_TEST

START_TEST(turns_forget_the_oldest)
{
	struct profile_turns t;
	memset(&t, 0, sizeof t);
	for (uid_t u = 1; u <= PROFILE_TURNS_MAX; u++)
		profile_turns_take(&t, u);
	ck_assert_uint_eq(t.n, PROFILE_TURNS_MAX);
	profile_turns_take(&t, 99999); /* table full: uid 1, served longest ago, is forgotten */
	ck_assert_uint_eq(t.n, PROFILE_TURNS_MAX);
	const uid_t two[] = { 2, 1 };
	ck_assert_uint_eq(profile_turns_pick(&t, two, 2), 1); /* forgotten: as if never served */
	const uid_t three[] = { 99999, 3, 2 };
	ck_assert_uint_eq(profile_turns_pick(&t, three, 3), 2);
}
END_TEST

/* ---------------------------------------------------------------- a writer that is behind */

/* The changes handed to the writer, held until released: a database whose write lock another
 * process holds. */
struct held {
	struct store_write w[4096];
	unsigned n, done;
	struct store *store;
};

static int held_submit(void *owner, const struct store_write *w)
{
	struct held *h = owner;
	ck_assert_uint_lt(h->n, 4096);
	h->w[h->n++] = *w;
	return 0;
}

/* Writes what is held, in order, and what their done() hands over meanwhile. */
static void held_release(struct held *h)
{
	while (h->done < h->n) {
		struct store_write w = h->w[h->done++];
		struct pim_error err = { 0 };
		int r = w.write(h->store, w.data, &err);
		w.done(w.data, r, &err);
	}
}

struct drive {
	struct loop *loop;
	struct profiler *pf;
	struct held *h;
	uint64_t paused_ns;    /* when the job was first seen paused */
	uint64_t reps_paused;  /* its repetitions then */
	uint64_t samples;      /* the job's samples, last seen */
	bool released;
	uint64_t deadline_ns;
};

/* Every 20 ms: while the writer holds everything, the job must stop reading its worker once
 * BATCHES_WAITING changes wait; half a second later nothing more was read; then the writer
 * catches up and the job ends. */
static void drive_tick(struct watch *w, uint32_t events)
{
	struct drive *d = w->data;
	uint64_t exp, now = now_ns();
	struct job *j = d->pf->jobs;

	ck_assert_int_eq(read(w->fd, &exp, sizeof exp), sizeof exp);
	ck_assert_msg(now < d->deadline_ns, "the job did not end in time");
	if (j)
		d->samples = j->samples_seen;
	if (!d->released) {
		ck_assert_msg(j && !j->ending, "the job ended while its changes were held");
		ck_assert_uint_le(j->writes, BATCHES_WAITING);
		ck_assert_uint_eq(j->writes, d->h->n); /* nothing was written, all waits */
		ck_assert_uint_le(j->batch->n, SAMPLE_ROOM);
		if (!j->paused)
			return;
		if (!d->paused_ns) {
			d->paused_ns = now;
			d->reps_paused = j->reps_done;
			ck_assert_uint_ge(j->batch->n, SAMPLE_BATCH);
			return;
		}
		if (now - d->paused_ns < 500000000u)
			return;
		ck_assert_uint_eq(j->reps_done, d->reps_paused); /* the pipe was not read */
		ck_assert_uint_lt(j->reps_done, j->reps_total);
		d->released = true;
	}
	held_release(d->h);
	if (!d->pf->jobs)
		loop_quit(d->loop, 0);
}

START_TEST(writer_behind)
{
	char dir[] = "/tmp/pimd-test-profile-XXXXXX", path[64];
	struct pim_error err = { 0 };
	struct store *store;
	struct platform platform;
	struct config cfg;
	struct loop *loop;
	struct profiler *pf;
	Pim__Manifest *m;
	static struct held h;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/pimd.db", dir);
	log_set_level(LOG_CRIT);
	ck_assert_int_eq(store_open(path, 1000, &store, &err), 0);
	platform_detect(&platform, &err);
	platform.counters = false; /* one group: the timing backend */
	ck_assert_int_eq(store_platform_ensure(store, &platform.id, &platform.row, &err), 0);
	config_init(&cfg);
	cfg.allow_root_jobs = true;
	ck_assert_int_eq(loop_new(&loop), 0);
	ck_assert_int_eq(profiler_new(loop, store, &platform, &cfg, &pf, &err), 0);
	snprintf(pf->helper, sizeof pf->helper, "%s", getenv("PIMD_TEST_WORKER"));
	h.store = store;
	profiler_set_writer(pf, &(struct store_writer){ held_submit, &h });
	ck_assert_msg(manifest_read_file("tests/models/three_regions.json", &m, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(rpc_model_put(store, m, getuid(), true, &(bool){ false }, NULL, &err), 0);
	pim__manifest__free_unpacked(m, NULL);

	const char *models = getenv("PIMD_TEST_MODELS");
	snprintf(path, sizeof path, "%s/three_regions.so", models && *models ? models : "build/tests/models");
	struct rpc_peer peer = { .cred = { .pid = getpid(), .uid = getuid(), .gid = getgid() },
				 .hello_done = true, .passed_fd = open(path, O_RDONLY | O_CLOEXEC) };
	ck_assert_int_ge(peer.passed_fd, 0);
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__Profile q = PIM__PROFILE__INIT;
	q.model = "three-regions";
	q.repetitions = 2000; /* 5 samples each: 10,000, more than BATCHES_WAITING batches */
	req.body_case = PIM__REQUEST__BODY_PROFILE;
	req.profile = &q;
	Pim__Response *r = profiler_rpc_start(pf, &peer, &req, NULL);
	ck_assert_msg(r && r->body_case == PIM__RESPONSE__BODY_PROFILE, "%s",
		      r && r->body_case == PIM__RESPONSE__BODY_ERROR ? r->error->message : "no answer");
	int64_t run = (int64_t)r->profile->job;
	pim__response__free_unpacked(r, NULL);

	struct drive d = { .loop = loop, .pf = pf, .h = &h, .deadline_ns = now_ns() + 50000000000ull };
	struct watch tick = { .fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC),
			      .fn = drive_tick, .data = &d };
	struct itimerspec its = { .it_interval = { 0, 20000000 }, .it_value = { 0, 20000000 } };
	ck_assert_int_eq(timerfd_settime(tick.fd, 0, &its, NULL), 0);
	ck_assert_int_eq(loop_add(loop, &tick, EPOLLIN), 0);
	ck_assert_int_eq(loop_run(loop), 0);
	ck_assert(d.released);

	/* every sample the worker reported is stored, and the run ended done after them */
	struct store_run p;
	ck_assert_int_eq(store_run_get(store, run, &p, &err), 0);
	ck_assert_int_eq(p.id, run);
	ck_assert_str_eq(p.state, "done");
	ck_assert_str_eq(p.model, "three-regions");
	ck_assert_uint_eq(p.samples, d.samples);
	ck_assert_uint_ge(p.samples, 2000u * 5);
	ck_assert_uint_eq(p.regions_done, 5);
	ck_assert_uint_eq(p.uid, getuid());
	ck_assert_int_gt(p.finished_at, 0);
	store_run_clear(&p);
	ck_assert_int_eq(store_run_get(store, run + 1, &p, &err), -ENOENT);
	ck_assert_msg(strstr(err.msg, "no profile job"), "%s", err.msg);
	loop_del(loop, &tick);
	close(tick.fd);
	profiler_free(pf);
	loop_free(loop);
	store_close(store);
	char cmd[96];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* ---------------------------------------------------------------- the loop never queries the store */

/* The transport's part (server.c) for one request at a time: each part of it handed to the
 * threads, its finish() on the loop, a next part handed over in turn, the answer kept. */
struct via {
	struct loop *loop;
	struct threads *th;
	Pim__Response *resp;
	bool answered;
};

static void via_finished(void *data, struct work *w)
{
	struct via *v = data;

	if (w->owner && !w->dropped) {
		struct rpc_deferred next = { 0 };
		Pim__Response *r = w->job.finish(w->job.data, &next);
		if (!r && (next.run || next.write.write)) {
			struct work *nw;
			w->job.release = NULL;
			ck_assert_int_eq(threads_submit_deferred(v->th, v, &next, &nw), 0);
		} else {
			v->resp = r;
			v->answered = true;
			loop_quit(v->loop, 0);
		}
	}
	threads_release(v->th, w);
}

static Pim__Response *via_threads(struct via *v, struct rpc_context *ctx, struct rpc_peer *peer,
				  Pim__Request *req)
{
	struct rpc_deferred defer = { 0 };
	enum rpc_after after;
	struct work *w;

	v->resp = NULL;
	v->answered = false;
	Pim__Response *r = rpc_handle(ctx, peer, req, &after, &defer);
	if (r || !(defer.run || defer.write.write))
		return r;
	ck_assert_int_eq(threads_submit_deferred(v->th, v, &defer, &w), 0);
	ck_assert_int_eq(loop_run(v->loop), 0);
	ck_assert_msg(v->answered, "request %d not answered", req->body_case);
	ck_assert_ptr_nonnull(v->resp);
	return v->resp;
}

/* Until the profiler has no job left (their ends stored by the writer thread). */
static void until_idle(struct watch *w, uint32_t events)
{
	struct profiler *pf = w->data;
	uint64_t exp;
	ck_assert_int_eq(read(w->fd, &exp, sizeof exp), sizeof exp);
	if (!profiler_active(pf) && !pf->jobs)
		loop_quit(pf->loop, 0);
}

/* Profile, ProfileStatus, ProfileCancel and in-situ batches answered as pimd answers them: the
 * thread that runs the event loop runs no SQL statement meanwhile (store_guard_thread); the
 * same ProfileStatus answered at once (defer NULL) on it does, which the guard sees. */
START_TEST(the_loop_never_queries_the_store)
{
	char dir[] = "/tmp/pimd-test-profile-XXXXXX", path[64];
	struct pim_error err = { 0 };
	struct store *store;
	struct platform platform;
	struct pimsim_params pim;
	struct config cfg;
	struct rpc_context ctx;
	struct loop *loop;
	struct profiler *pf;
	struct threads *th;
	Pim__Manifest *m;
	Pim__Response *r;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/pimd.db", dir);
	log_set_level(LOG_CRIT);
	ck_assert_int_eq(store_open(path, 1000, &store, &err), 0);
	platform_detect(&platform, &err);
	platform.counters = false;
	ck_assert_int_eq(store_platform_ensure(store, &platform.id, &platform.row, &err), 0);
	config_init(&cfg);
	cfg.allow_root_jobs = true;
	pimsim_params_default(&pim);
	ck_assert_int_eq(loop_new(&loop), 0);
	ck_assert_int_eq(profiler_new(loop, store, &platform, &cfg, &pf, &err), 0);
	snprintf(pf->helper, sizeof pf->helper, "%s", getenv("PIMD_TEST_WORKER"));
	rpc_context_init(&ctx, store, &platform, &cfg, &pim, pf);
	ck_assert_msg(manifest_read_file("tests/models/three_regions.json", &m, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(rpc_model_put(store, m, getuid(), true, &(bool){ false }, NULL, &err), 0);
	pim__manifest__free_unpacked(m, NULL);
	struct via v = { .loop = loop };
	ck_assert_int_eq(threads_new(loop, &ctx, 1000, via_finished, NULL, &v, &th), 0);
	v.th = th;
	ctx.writer = threads_writer(th);
	profiler_set_writer(pf, &ctx.writer);

	unsigned long before = store_guard_count(NULL);
	store_guard_thread(true);
	Pim__Request req = PIM__REQUEST__INIT;
	struct rpc_peer peer = { .cred = { .pid = getpid(), .uid = getuid(), .gid = getgid() },
				 .hello_done = true, .passed_fd = -1 };

	/* a job: its model read on a work thread, its row stored and read back by the writer */
	const char *models = getenv("PIMD_TEST_MODELS");
	snprintf(path, sizeof path, "%s/three_regions.so", models && *models ? models : "build/tests/models");
	peer.passed_fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(peer.passed_fd, 0);
	Pim__Profile q = PIM__PROFILE__INIT;
	uint32_t measure[] = { 1, 2 };
	q.model = "three-regions";
	q.repetitions = 3;
	q.regions = measure;
	q.n_regions = 2;
	req.body_case = PIM__REQUEST__BODY_PROFILE;
	req.profile = &q;
	r = via_threads(&v, &ctx, &peer, &req);
	ck_assert_msg(r->body_case == PIM__RESPONSE__BODY_PROFILE, "%s",
		      r->body_case == PIM__RESPONSE__BODY_ERROR ? r->error->message : "");
	ck_assert_str_eq(r->profile->state, "queued");
	ck_assert_str_eq(r->profile->model, "three-regions");
	ck_assert_uint_eq(r->profile->regions_total, 2);
	uint64_t job = r->profile->job;
	pim__response__free_unpacked(r, NULL);
	/* a region the model lacks, found on the work thread */
	peer.passed_fd = open(path, O_RDONLY | O_CLOEXEC);
	measure[1] = 77;
	r = via_threads(&v, &ctx, &peer, &req);
	ck_assert_int_eq(r->body_case, PIM__RESPONSE__BODY_ERROR);
	ck_assert_str_eq(r->error->message, "regions[1]: the model has no region 77");
	pim__response__free_unpacked(r, NULL);
	closep(&peer.passed_fd);

	/* its end, stored by the writer: the run reads as done */
	struct watch tick = { .fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC),
			      .fn = until_idle, .data = pf };
	struct itimerspec its = { .it_interval = { 0, 20000000 }, .it_value = { 0, 20000000 } };
	ck_assert_int_eq(timerfd_settime(tick.fd, 0, &its, NULL), 0);
	ck_assert_int_eq(loop_add(loop, &tick, EPOLLIN), 0);
	ck_assert_int_eq(loop_run(loop), 0);
	loop_del(loop, &tick);
	close(tick.fd);
	Pim__ProfileStatus ps = PIM__PROFILE_STATUS__INIT;
	ps.job = job;
	req.body_case = PIM__REQUEST__BODY_PROFILE_STATUS;
	req.profile_status = &ps;
	r = via_threads(&v, &ctx, &peer, &req);
	ck_assert_int_eq(r->body_case, PIM__RESPONSE__BODY_PROFILE);
	ck_assert_str_eq(r->profile->state, "done");
	ck_assert_uint_eq(r->profile->regions_done, 2);
	pim__response__free_unpacked(r, NULL);
	Pim__ProfileCancel pc = PIM__PROFILE_CANCEL__INIT;
	pc.job = job;
	req.body_case = PIM__REQUEST__BODY_PROFILE_CANCEL;
	req.profile_cancel = &pc;
	r = via_threads(&v, &ctx, &peer, &req);
	ck_assert_int_eq(r->body_case, PIM__RESPONSE__BODY_ERROR);
	ck_assert_msg(strstr(r->error->message, "has ended (done): there is nothing to cancel"), "%s",
		      r->error->message);
	pim__response__free_unpacked(r, NULL);

	/* in situ: the first batch reads the model on a work thread; an unknown one says so */
	Pim__SampleBatch sb = PIM__SAMPLE_BATCH__INIT;
	Pim__RegionSample s1 = PIM__REGION_SAMPLE__INIT, s2 = PIM__REGION_SAMPLE__INIT, *sv[] = { &s1, &s2 };
	s1.region_id = 1;
	s1.time_ns = 1000;
	s2.region_id = 99;
	s2.time_ns = 1000;
	sb.model = "none-such";
	sb.samples = sv;
	sb.n_samples = 2;
	req.body_case = PIM__REQUEST__BODY_SAMPLE_BATCH;
	req.sample_batch = &sb;
	r = via_threads(&v, &ctx, &peer, &req);
	ck_assert_int_eq(r->body_case, PIM__RESPONSE__BODY_ERROR);
	ck_assert_msg(strstr(r->error->message, "no model named \"none-such\""), "%s", r->error->message);
	pim__response__free_unpacked(r, NULL);
	ck_assert_ptr_null(peer.insitu);
	sb.model = "three-regions";
	r = via_threads(&v, &ctx, &peer, &req);
	ck_assert_int_eq(r->body_case, PIM__RESPONSE__BODY_SAMPLE_BATCH);
	ck_assert_uint_eq(r->sample_batch->accepted, 1);
	ck_assert_uint_eq(r->sample_batch->rejected, 1);
	ps.job = r->sample_batch->job;
	pim__response__free_unpacked(r, NULL);
	ck_assert_ptr_nonnull(peer.insitu);
	r = via_threads(&v, &ctx, &peer, &req); /* the next batch: no read */
	ck_assert_int_eq(r->body_case, PIM__RESPONSE__BODY_SAMPLE_BATCH);
	ck_assert_uint_eq(r->sample_batch->job, ps.job);
	pim__response__free_unpacked(r, NULL);
	req.body_case = PIM__REQUEST__BODY_PROFILE_STATUS;
	req.profile_status = &ps; /* (a oneof: the fields share their room) */
	r = via_threads(&v, &ctx, &peer, &req);
	ck_assert_int_eq(r->body_case, PIM__RESPONSE__BODY_PROFILE);
	ck_assert_str_eq(r->profile->state, "running");
	ck_assert_uint_eq(r->profile->samples, 2);
	pim__response__free_unpacked(r, NULL);
	pc.job = ps.job;
	req.body_case = PIM__REQUEST__BODY_PROFILE_CANCEL;
	req.profile_cancel = &pc;
	r = via_threads(&v, &ctx, &peer, &req);
	ck_assert_int_eq(r->body_case, PIM__RESPONSE__BODY_ERROR);
	ck_assert_msg(strstr(r->error->message, "is an in-situ run (running)"), "%s", r->error->message);
	pim__response__free_unpacked(r, NULL);
	ps.job = 999;
	req.body_case = PIM__REQUEST__BODY_PROFILE_STATUS;
	req.profile_status = &ps;
	r = via_threads(&v, &ctx, &peer, &req);
	ck_assert_int_eq(r->body_case, PIM__RESPONSE__BODY_ERROR);
	ck_assert_str_eq(r->error->message, "no profile job 999");
	pim__response__free_unpacked(r, NULL);
	ck_assert_uint_eq(store_guard_count(NULL), before);

	/* answered at once on this thread, the status is read here: the guard counts it */
	enum rpc_after after;
	r = rpc_handle(&ctx, &peer, &req, &after, NULL);
	ck_assert_ptr_nonnull(r);
	pim__response__free_unpacked(r, NULL);
	ck_assert_uint_gt(store_guard_count(NULL), before);
	store_guard_thread(false);

	rpc_peer_closed(&ctx, &peer); /* its in-situ run ends, by the writer */
	threads_free(th);
	rpc_context_release(&ctx);
	profiler_set_writer(pf, NULL);
	profiler_free(pf);
	loop_free(loop);
	store_close(store);
	char cmd[96];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *profile_suite(void)
{
	Suite *s = suite_create("profile");
	TCase *tc = test_case(s, "pure");
	tcase_add_test(tc, turns_between_uids);
	tcase_add_test(tc, turns_forget_the_oldest);
	tc = test_case(s, "writer");
	test_add_if(tc, writer_behind, getenv("PIMD_TEST_WORKER") != NULL,
		    "PIMD_TEST_WORKER (pimd-worker) not set: make unit sets it");
	test_add_if(tc, the_loop_never_queries_the_store, getenv("PIMD_TEST_WORKER") != NULL,
		    "PIMD_TEST_WORKER (pimd-worker) not set: make unit sets it");
	return s;
}

int main(void)
{
	return test_run_suite(profile_suite());
}
