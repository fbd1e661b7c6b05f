/* SPDX-License-Identifier: MIT */
#include "threads.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "log.h"
#include "priority.h"

/* A job of a work thread that took this much CPU time may have taken much of its heap: trimmed
 * after (a quick read, however long it waited for a CPU, is not). */
#define THREADS_TRIM_AFTER_NS (20ull * 1000000ull)

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * A queue and the threads that take from it: the work threads (each takes one job at a time,
 * in the order they came) or the writer (it takes all that are queued, up to a bound, as one
 * group of changes).
 */
struct lane {
	struct threads *th;
	const char *name;     /* for the log */
	bool group;           /* the writer */
	unsigned n;           /* threads */
	pthread_mutex_t mu;
	bool started, stopping;            /* changed under mu, on the loop */
	/* Idle threads, the last one to finish on top (under mu): a job wakes that one, whose
	 * heap and store cache are warm, so that under a light load one thread does the work and
	 * the others' caches stay empty. */
	struct lane_thread *idle[THREADS_WORK_N];
	unsigned n_idle;
	struct work *queued, **queued_tail; /* under mu */
	struct work *done;                 /* under mu, finished, newest first */
	struct watch ev;                   /* eventfd: a thread finished something */
	struct pim_error start_err;        /* why it last could not start (code 0: it could) */
	struct lane_thread {
		struct lane *lane;
		pthread_t thread;
		pthread_cond_t cv;         /* woken when idle */
		bool idle;                 /* on the lane's idle stack (under mu) */
		struct store *store;       /* the thread's connection to the store */
	} t[THREADS_WORK_N];
};

struct threads {
	struct loop *loop;
	pthread_t loop_thread;
	struct rpc_context *ctx;
	unsigned busy_timeout_ms;
	struct lane work, writer;
	void (*finished)(void *data, struct work *w);
	void (*models)(void *data, struct work *w);
	void *data;
};

void decoded_init(struct decoded *d, const uint8_t *payload, uint32_t len, bool hello_done,
		  struct decode_regions *regions)
{
	d->len = len;
	/* Measured before anything is allocated for it (decode.c). */
	d->k = regions ? decode_request_lean(payload, len, &d->budget, &d->req, regions, &d->text_err, &d->err)
		       : decode_request(payload, len, &d->budget, &d->req, &d->text_err, &d->err);
	/* Strings are checked in the same walk (decode.c); a first request that is not a Hello is
	 * left to rpc_handle, which closes the connection. */
	d->bad_text = d->k >= 0 && d->text_err.code < 0 &&
		      (hello_done || d->req->body_case == PIM__REQUEST__BODY_HELLO);
}

void decoded_free(struct decoded *d)
{
	if (d->k >= 0 && d->req)
		pim__request__free_unpacked(d->req, &d->budget.alloc);
	d->req = NULL;
}

static bool model_changing(const Pim__Request *req)
{
	return req->body_case == PIM__REQUEST__BODY_MODEL_LOAD ||
	       req->body_case == PIM__REQUEST__BODY_MODEL_REMOVE;
}

/* ---------------------------------------------------------------- on a thread */

/* j's frame no longer needed. */
static void frame_job_release_frame(struct frame_job *j)
{
	decode_regions_free(&j->regions);
	j->ctx.regions = NULL;
	free(j->payload);
	j->payload = NULL;
}

/* Decodes j's frame; false if it goes back to the loop to be answered there. */
static bool frame_job_decode(struct lane_thread *lt, struct work *w)
{
	struct frame_job *j = w->frame;
	struct decoded *d = &j->d;
	struct lane *l = lt->lane;

	/* A manifest's regions stay in the frame, decoded one at a time as they are checked and
	 * stored: a million of them decoded at once take hundreds of MiB.  (The writer's frames
	 * are small: decoded whole, so that a change can be made again.) */
	if (!j->decoded)
		decoded_init(d, j->payload, j->len, j->peer.hello_done, l->group ? NULL : &j->regions);
	bool lean = d->k >= 0 && j->regions.manifest && d->req->body_case == PIM__REQUEST__BODY_MODEL_LOAD;
	if (!lean) {
		free(j->payload);
		j->payload = NULL;
	}
	store_set_busy_timeout(lt->store, w->busy_timeout_ms);
	j->ctx.store = lt->store;
	j->ctx.regions = lean ? &j->regions : NULL;
	if (d->k < 0 || d->bad_text || !j->peer.hello_done) {
		frame_job_release_frame(j);
		return false;
	}
	enum dispatch_thread where = dispatch_where(d->req, j->regions.n);
	if (where == DISPATCH_LOOP || where == DISPATCH_PROFILER) {
		frame_job_release_frame(j);
		return false;
	}
	return true;
}

/* Answers j's decoded request. */
static void frame_job_answer(struct lane_thread *lt, struct frame_job *j)
{
	const char *model = model_changing(j->d.req) ? rpc_request_model(j->d.req) : NULL;

	j->after = RPC_KEEP;
	j->ctx.model_gone = 0;
	j->ctx.answer_reusable = false;
	/* what a load or a removal commits changes that model alone (answers.h) */
	store_commit_scope(lt->store, &model, model ? 1 : 0);
	if (rpc_handle_packed(&j->ctx, &j->peer, j->d.req, &j->packed, &j->packed_len))
		j->resp_id = j->d.req->id;
	else
		j->resp = rpc_handle(&j->ctx, &j->peer, j->d.req, &j->after, NULL);
	store_commit_scope(lt->store, NULL, 0);
	j->answered = true;
	j->reusable = j->ctx.answer_reusable && !(j->resp && j->resp->body_case == PIM__RESPONSE__BODY_ERROR);
	j->model_change = model_changing(j->d.req);
	j->model_gone = j->ctx.model_gone;
	j->model_replaced = j->d.req->body_case == PIM__REQUEST__BODY_MODEL_LOAD;
}

/* j answered; what it held is freed. */
static void frame_job_settle(struct lane_thread *lt, struct work *w)
{
	struct frame_job *j = w->frame;

	decoded_free(&j->d);
	/* What the count Status tells gains or loses (the loop never queries the store). */
	if (j->resp && j->resp->body_case == PIM__RESPONSE__BODY_MODEL_LOAD)
		j->models_delta = j->resp->model_load->replaced ? 0 : 1;
	else if (j->resp && j->resp->body_case == PIM__RESPONSE__BODY_MODEL_REMOVE)
		j->models_delta = -1;
	/* Packed here, so that the answer's structures (a large model's manifest, for one) are
	 * freed in this thread's heap before it is trimmed, and the loop only queues bytes. */
	if (j->resp) {
		size_t n = pim__response__get_packed_size(j->resp);
		uint8_t *buf = malloc(FRAME_HEADER_BYTES + n);
		if (buf) {
			pim__response__pack(j->resp, buf + FRAME_HEADER_BYTES);
			j->packed = buf;
			j->packed_len = n;
			j->resp_id = j->resp->id;
			pim__response__free_unpacked(j->resp, NULL);
			j->resp = NULL;
			if (n > DISPATCH_DECODE_OFF_LOOP_BYTES)
				w->big = true;
		}
	}
	frame_job_release_frame(j);
}

/* j as a whole. */
static void frame_job_run(struct lane_thread *lt, struct work *w)
{
	if (!frame_job_decode(lt, w))
		return;
	frame_job_answer(lt, w->frame);
	frame_job_settle(lt, w);
}

/* A change pimd makes (job.write), its outcome kept for the loop. */
static void write_change_run(struct lane_thread *lt, struct work *w)
{
	w->write_err = (struct pim_error){ 0 };
	store_set_busy_timeout(lt->store, w->busy_timeout_ms); /* (a reload may have changed it) */
	w->write_r = w->job.write.write(lt->store, w->job.write.data, &w->write_err);
}

/* The group's commit changes the models its loads and removals name, and nothing else, when
 * it holds nothing but those (answers.h). */
static void group_scope(struct store *s, struct work *list)
{
	const char *names[STORE_SCOPE_MAX];
	size_t n = 0;

	for (struct work *w = list; w; w = w->next) {
		const struct frame_job *j = w->frame;
		const char *name = j && j->answered && j->d.req && model_changing(j->d.req) ?
					   rpc_request_model(j->d.req) : NULL;
		if (!name || n == STORE_SCOPE_MAX) {
			store_commit_scope(s, NULL, 0);
			return;
		}
		names[n++] = name;
	}
	store_commit_scope(s, names, n);
}

/* On the writer: the n jobs of list (whole frames of different clients, each storing something,
 * and changes pimd makes) as one group of changes.  An answer that says something was stored
 * stands only once the group is on disk; if the group's commit fails, each change is made again
 * alone (it may be the one that failed, or a removal that needs the reserve). */
static void write_group_run(struct lane_thread *lt, struct work *list, unsigned n)
{
	struct pim_error err = { 0 };
	bool committed;
	struct work *w;

	/* a client's change alone is made alone (a removal may need the reserve); pimd's own
	 * changes (a run's metrics: a change per region) always as a group */
	if ((n == 1 && list->frame) || store_group_begin(lt->store, &err) < 0) {
		for (w = list; w; w = w->next)
			if (w->frame)
				frame_job_run(lt, w);
			else
				write_change_run(lt, w);
		return;
	}
	for (w = list; w; w = w->next)
		if (!w->frame)
			write_change_run(lt, w);
		else if (frame_job_decode(lt, w))
			frame_job_answer(lt, w->frame);
	group_scope(lt->store, list);
	int r = store_group_commit(lt->store, &committed, &err);
	store_commit_scope(lt->store, NULL, 0);
	for (w = list; w; w = w->next) {
		struct frame_job *j = w->frame;
		if (!j) {
			if (r < 0 && w->write_r >= 0) {
				if (committed) {
					/* perhaps not on disk: not stored, as far as anybody is told */
					w->write_r = r;
					w->write_err = err;
				} else {
					write_change_run(lt, w);
				}
			}
			continue;
		}
		bool said_stored = j->resp && j->resp->body_case != PIM__RESPONSE__BODY_ERROR;
		if (r < 0 && j->answered && (said_stored || !committed)) {
			/* rolled back: made again alone (a failure may have come from another change);
			 * committed but perhaps not on disk: what said stored is an error */
			uint64_t id = j->resp ? j->resp->id : 0;
			if (j->resp)
				pim__response__free_unpacked(j->resp, NULL);
			j->resp = committed ? reply_error_from(id, &err) : NULL;
			j->reusable = false;
			if (!committed)
				frame_job_answer(lt, j);
		}
		if (j->answered)
			frame_job_settle(lt, w); /* else the loop answers it */
	}
}

/* The database was found read-only (a mode, an immutable attribute or a file system that has
 * since changed): a connection opened anew writes again once the file is writable; until then
 * each job fails with what SQLite says ("read-only database"). */
static void thread_reconnect(struct lane_thread *lt)
{
	struct pim_error err = { 0 };

	if (store_reconnect(lt->store, &err) == 0)
		log_notice("The %s's connection to the store had found the database read-only; "
			   "reopened it", lt->lane->name);
}

/* Under l->mu: the idle thread on top of the stack wakes. */
static void lane_wake_one(struct lane *l)
{
	if (l->n_idle) {
		struct lane_thread *lt = l->idle[--l->n_idle];
		lt->idle = false;
		pthread_cond_signal(&lt->cv);
	}
}

/* Under l->mu: every idle thread wakes (to stop). */
static void lane_wake_all(struct lane *l)
{
	while (l->n_idle)
		lane_wake_one(l);
}

/* Under l->mu: lt, awake, is off the stack. */
static void lane_unidle(struct lane *l, struct lane_thread *lt)
{
	if (!lt->idle)
		return;
	for (unsigned i = 0; i < l->n_idle; i++)
		if (l->idle[i] == lt) {
			memmove(&l->idle[i], &l->idle[i + 1], (l->n_idle - i - 1) * sizeof *l->idle);
			l->n_idle--;
			break;
		}
	lt->idle = false;
}

static void *thread_main(void *data)
{
	struct lane_thread *lt = data;
	struct lane *l = lt->lane;
	uint64_t one = 1;

	/* started by the loop, at its nice value: the writer goes lower, a work thread to pimd's */
	if (l->group)
		priority_boost_writer();
	else
		priority_unboost(0);
	pthread_mutex_lock(&l->mu);
	for (;;) {
		while (!l->queued && !l->stopping) {
			if (!lt->idle) {
				l->idle[l->n_idle++] = lt;
				lt->idle = true;
			}
			pthread_cond_wait(&lt->cv, &l->mu);
		}
		lane_unidle(l, lt); /* (woken otherwise than by lane_wake_one) */
		/* the writer writes what it was given before it stops */
		if (l->stopping && (!l->group || !l->queued))
			break;
		/* a work thread takes one job; the writer all that are queued, up to a bound */
		struct work *w = l->queued, *last = w;
		unsigned n = 1;
		while (l->group && last->next && n < THREADS_WRITE_GROUP_MAX) {
			last = last->next;
			n++;
		}
		l->queued = last->next;
		last->next = NULL;
		if (!l->queued)
			l->queued_tail = &l->queued;
		pthread_mutex_unlock(&l->mu);
		if (store_found_readonly(lt->store))
			thread_reconnect(lt);
		uint64_t t0 = thread_cpu_ns();
		if (l->group)
			write_group_run(lt, w, n);
		else if (w->frame)
			frame_job_run(lt, w);
		else
			w->job.run(lt->store, w->job.data);
		/* A large model took hundreds of MiB of this thread's heap: give them back now rather
		 * than keep them until the next such request (a quick read took little). */
		if (!l->group && (w->big || thread_cpu_ns() - t0 > THREADS_TRIM_AFTER_NS))
			malloc_trim(0);
		pthread_mutex_lock(&l->mu);
		while (w) {
			struct work *next = w->next;
			if (!w->frame && l->group && w->write_r == STORE_WRITE_AGAIN) {
				/* a part of a long change is on disk: the rest after what came meanwhile */
				if (w->job.write.part_done)
					w->job.write.part_done(w->job.write.data);
				w->next = NULL;
				*l->queued_tail = w;
				l->queued_tail = &w->next;
			} else {
				w->next = l->done;
				l->done = w;
			}
			w = next;
		}
		if (write(l->ev.fd, &one, sizeof one) < 0) {
			/* the counter cannot overflow in practice; the loop drains it */
		}
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* ---------------------------------------------------------------- on the event loop */

/* A write's done() is told its outcome. */
static void work_write_done(struct work *w)
{
	if (!w->frame && w->job.write.write)
		w->job.write.done(w->job.write.data, w->write_r, &w->write_err);
}

/* Threads of l finished work: tell each its owner, in the order they finished. */
static void lane_event(struct watch *wch, uint32_t events)
{
	struct lane *l = wch->data;
	struct threads *th = l->th;
	uint64_t n;
	struct work *done, *rev = NULL;

	if (read(l->ev.fd, &n, sizeof n) < 0 && errno == EAGAIN)
		return;
	pthread_mutex_lock(&l->mu);
	done = l->done;
	l->done = NULL;
	pthread_mutex_unlock(&l->mu);
	while (done) {
		struct work *next = done->next;
		done->next = rev;
		rev = done;
		done = next;
	}
	/* models removed or replaced first: a job of one must not start from a done() of the same
	 * batch (a run's end stored with the removal frees a worker for the next job) */
	for (struct work *w = rev; w && th->models; w = w->next)
		if (w->frame && w->frame->answered && w->frame->model_change)
			th->models(th->data, w);
	for (struct work *w = rev, *next; w; w = next) {
		next = w->next;
		w->next = NULL;
		work_write_done(w);
		th->finished(th->data, w);
	}
}

static void frame_job_free(struct frame_job *j)
{
	decoded_free(&j->d);
	decode_regions_free(&j->regions);
	free(j->payload);
	free(j->packed);
	free(j->keep_key);
	if (j->resp)
		pim__response__free_unpacked(j->resp, NULL);
	free(j);
}

void threads_release(struct threads *th, struct work *w)
{
	if (w->frame)
		frame_job_free(w->frame);
	else if (w->job.release)
		w->job.release(w->job.data);
	free(w);
}

static void lane_close_stores(struct lane *l)
{
	for (unsigned i = 0; i < l->n; i++) {
		store_close(l->t[i].store);
		l->t[i].store = NULL;
	}
}

static int lane_start(struct lane *l)
{
	struct threads *th = l->th;
	struct pim_error err = { 0 };
	unsigned i;
	int fd, r;

	/* SQLite connections are not shared between threads: each thread gets its own. */
	for (i = 0; i < l->n; i++)
		if ((r = store_open_again(th->ctx->store, th->busy_timeout_ms, &l->t[i].store, &err)) < 0) {
			/* tried again at the next request: a database made writable again heals */
			log_error("Cannot open the store for the %s: %s", l->name, err.msg);
			l->start_err = err;
			lane_close_stores(l);
			return r;
		}
	l->start_err = (struct pim_error){ 0 };
	fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		lane_close_stores(l);
		return r;
	}
	l->ev = (struct watch){ .fd = fd, .fn = lane_event, .data = l };
	if ((r = loop_add(th->loop, &l->ev, EPOLLIN)) < 0) {
		close(fd);
		l->ev.fd = -1;
		lane_close_stores(l);
		return r;
	}
	l->queued_tail = &l->queued;
	/* The threads take no signals: they stay with signalfd on the event loop. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (i = 0; i < l->n; i++) {
		l->t[i].lane = l;
		if ((r = -pthread_create(&l->t[i].thread, NULL, thread_main, &l->t[i])) < 0)
			break;
		/* named for top -H, ps -L and perf: pimd-writer, pimd-work0 ... */
		char tname[16];
		snprintf(tname, sizeof tname, l->group ? "pimd-writer" : "pimd-work%u", i);
		pthread_setname_np(l->t[i].thread, tname);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_mutex_lock(&l->mu);
	l->started = true;
	if (r < 0) {
		/* those that started stop at once: nothing is queued yet */
		lane_wake_all(l);
	}
	pthread_mutex_unlock(&l->mu);
	if (r < 0) {
		for (unsigned k = 0; k < i; k++)
			pthread_join(l->t[k].thread, NULL);
		pthread_mutex_lock(&l->mu);
		l->started = l->stopping = false;
		pthread_mutex_unlock(&l->mu);
		loop_del(th->loop, &l->ev);
		close(fd);
		l->ev.fd = -1;
		lane_close_stores(l);
		return r;
	}
	return 0;
}

/* Queues w for l; from the loop (which starts l if it must), or from a work thread (the
 * writer's changes only).  Refused: w is not released. */
static int lane_queue(struct lane *l, struct work *w)
{
	struct threads *th = l->th;
	bool on_loop = pthread_equal(pthread_self(), th->loop_thread);
	int r;

	if (on_loop && !l->started && !l->stopping && (r = lane_start(l)) < 0) {
		if (!l->start_err.code) /* (the store's message was logged) */
			log_error("Cannot start the %s: %s", l->name, strerror(-r));
		return r;
	}
	w->busy_timeout_ms = __atomic_load_n(&th->busy_timeout_ms, __ATOMIC_RELAXED);
	pthread_mutex_lock(&l->mu);
	if (!l->started || l->stopping) {
		pthread_mutex_unlock(&l->mu);
		return -ESHUTDOWN;
	}
	w->next = NULL;
	*l->queued_tail = w;
	l->queued_tail = &w->next;
	lane_wake_one(l);
	pthread_mutex_unlock(&l->mu);
	return 0;
}

static struct lane *lane_of(struct threads *th, enum dispatch_thread where)
{
	return where == DISPATCH_WRITER ? &th->writer : &th->work;
}

int threads_submit_frame(struct threads *th, enum dispatch_thread where, void *owner,
			 const struct rpc_peer *peer, uint8_t *payload, uint32_t len, struct decoded *d,
			 struct work **out)
{
	struct rpc_context *ctx = th->ctx;
	struct work *w = calloc(1, sizeof *w);
	struct frame_job *j = calloc(1, sizeof *j);
	int r;

	if (!w || !j) {
		free(w);
		free(j);
		free(payload);
		if (d)
			decoded_free(d);
		return -ENOMEM;
	}
	j->payload = payload;
	j->len = len;
	if (d) {
		/* moved: its allocator's state goes with it */
		j->d = *d;
		j->d.budget.alloc.allocator_data = &j->d.budget;
		d->req = NULL;
		j->decoded = true;
	}
	j->peer = *peer;
	j->peer.passed_fd = -1;
	j->peer.insitu = NULL;
	j->ctx = *ctx;
	j->ctx.profiler = NULL;
	j->ctx.status_cache = NULL; /* (the loop's) */
	/* what it stores on its own (an answer for the next identical query) goes to the writer */
	j->ctx.writer = threads_writer(th);
	j->ctx.may_block = true;
	/* A reload may change the parameters on the loop meanwhile. */
	j->params = *ctx->params;
	j->pim = *ctx->pim;
	j->platform = *ctx->platform;
	j->ctx.params = &j->params;
	j->ctx.pim = &j->pim;
	j->ctx.platform = &j->platform;
	w->frame = j;
	w->owner = owner;
	w->big = len > DISPATCH_DECODE_OFF_LOOP_BYTES;
	if ((r = lane_queue(lane_of(th, where), w)) < 0) {
		threads_release(th, w);
		return r;
	}
	*out = w;
	return 0;
}

int threads_submit_deferred(struct threads *th, void *owner, const struct rpc_deferred *job,
			    struct work **out)
{
	struct work *w = calloc(1, sizeof *w);
	int r;

	if (!w) {
		job->release(job->data);
		return -ENOMEM;
	}
	w->job = *job;
	w->owner = owner;
	if ((r = lane_queue(job->write.write ? &th->writer : &th->work, w)) < 0) {
		threads_release(th, w);
		return r;
	}
	*out = w;
	return 0;
}

Pim__Response *threads_refusal(const struct threads *th, enum dispatch_thread where, uint64_t id)
{
	const struct lane *l = where == DISPATCH_WRITER ? &th->writer : &th->work;

	if (!l->started && l->start_err.code)
		return reply_error(id, reply_code_from_errno(l->start_err.code),
				   "cannot hand the request to pimd's %s: %s; retry later", l->name,
				   l->start_err.msg);
	return reply_error(id, PIM__ERROR_CODE__ERROR_INTERNAL,
			   "cannot hand the request to pimd's %s; retry later", l->name);
}

static int writer_submit(void *owner, const struct store_write *change)
{
	struct threads *th = owner;
	struct work *w = calloc(1, sizeof *w);
	int r;

	if (!w)
		return -ENOMEM;
	w->job.write = *change;
	/* (refused: nothing of the change was called) */
	if ((r = lane_queue(&th->writer, w)) < 0)
		free(w);
	return r;
}

struct store_writer threads_writer(struct threads *th)
{
	return (struct store_writer){ .submit = writer_submit, .owner = th };
}

void threads_set_busy_timeout(struct threads *th, unsigned busy_timeout_ms)
{
	__atomic_store_n(&th->busy_timeout_ms, busy_timeout_ms, __ATOMIC_RELAXED);
}

static void lane_init(struct threads *th, struct lane *l, const char *name, bool group, unsigned n)
{
	*l = (struct lane){ .th = th, .name = name, .group = group, .n = n, .ev.fd = -1 };
	l->queued_tail = &l->queued;
	pthread_mutex_init(&l->mu, NULL);
	for (unsigned i = 0; i < n; i++)
		pthread_cond_init(&l->t[i].cv, NULL);
}

int threads_new(struct loop *loop, struct rpc_context *ctx, unsigned busy_timeout_ms,
		void (*finished)(void *data, struct work *w), void (*models)(void *data, struct work *w),
		void *data, struct threads **out)
{
	struct threads *th = calloc(1, sizeof *th);

	if (!th)
		return -ENOMEM;
	*th = (struct threads){ .loop = loop, .loop_thread = pthread_self(), .ctx = ctx,
				.busy_timeout_ms = busy_timeout_ms, .finished = finished, .models = models,
				.data = data };
	lane_init(th, &th->work, "work threads", false, THREADS_WORK_N);
	lane_init(th, &th->writer, "writer thread", true, 1);
	*out = th;
	return 0;
}

/* Stops l after the jobs its threads run (the writer after all it was given); drops what was
 * not done.  Nothing is queued for l afterwards (-ESHUTDOWN). */
static void lane_stop(struct threads *th, struct lane *l)
{
	pthread_mutex_lock(&l->mu);
	bool started = l->started;
	l->stopping = true;
	lane_wake_all(l);
	pthread_mutex_unlock(&l->mu);
	if (!started)
		return;
	for (unsigned i = 0; i < l->n; i++)
		pthread_join(l->t[i].thread, NULL);
	/* What was done, in order: a change's done() is told its outcome (its answer is not sent). */
	struct work *rev = NULL;
	while (l->done) {
		struct work *w = l->done;
		l->done = w->next;
		w->next = rev;
		rev = w;
	}
	struct work *lists[2] = { l->queued, rev };
	l->queued = l->done = NULL;
	for (int i = 0; i < 2; i++)
		for (struct work *w = lists[i], *next; w; w = next) {
			next = w->next;
			w->next = NULL;
			if (i == 1)
				work_write_done(w);
			w->dropped = true;
			th->finished(th->data, w);
		}
	loop_del(th->loop, &l->ev);
	close(l->ev.fd);
	l->ev.fd = -1;
	lane_close_stores(l);
	l->started = false;
}

void threads_free(struct threads *th)
{
	if (!th)
		return;
	/* the work threads first: a placement answer they hand the writer is still written */
	lane_stop(th, &th->work);
	lane_stop(th, &th->writer);
	for (struct lane *l = &th->work; l; l = l == &th->work ? &th->writer : NULL) {
		pthread_mutex_destroy(&l->mu);
		for (unsigned i = 0; i < l->n; i++)
			pthread_cond_destroy(&l->t[i].cv);
	}
	free(th);
}
