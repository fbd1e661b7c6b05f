/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of daemon/profile.c: the turns between uids (its metrics: test_metrics.c), and a
 * job whose changes wait for the writer thread: its worker's pipe is not read beyond what may
 * wait, and nothing is lost.  The module is included to see its jobs.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/timerfd.h>

#include "log.h"
#include "profile_int.h"
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
	ck_assert_int_eq(store_model_put(store, m, getuid(), true, &(bool){ false }, NULL, &err), 0);
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
	Pim__ProfileReply *p;
	ck_assert_int_eq(store_run_get(store, run, &p, &err), 0);
	ck_assert_str_eq(p->state, "done");
	ck_assert_uint_eq(p->samples, d.samples);
	ck_assert_uint_ge(p->samples, 2000u * 5);
	ck_assert_uint_eq(p->regions_done, 5);
	pim__profile_reply__free_unpacked(p, NULL);
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

static Suite *profile_suite(void)
{
	Suite *s = suite_create("profile");
	TCase *tc = test_case(s, "pure");
	tcase_add_test(tc, turns_between_uids);
	tcase_add_test(tc, turns_forget_the_oldest);
	tc = test_case(s, "writer");
	test_add_if(tc, writer_behind, getenv("PIMD_TEST_WORKER") != NULL,
		    "PIMD_TEST_WORKER (pimd-worker) not set: make unit sets it");
	return s;
}

int main(void)
{
	return test_run_suite(profile_suite());
}
