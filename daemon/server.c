/* SPDX-License-Identifier: MIT */
#include "server.h"

#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>

#include "answers.h"
#include "decode.h"
#include "frame.h"
#include "log.h"
#include "profile.h"
#include "status_rpc.h"
#include "threads.h"

/* Frames decoded per wakeup of one connection, so one busy client cannot starve the others. */
#define FRAMES_PER_WAKEUP 32
/* Bytes of input and of output each connection may hold outside max_buffered_bytes, so that
 * small requests and answers always get through while large ones wait for the budget. */
#define CONN_FREE_BYTES (64u * 1024u)
/* Refused connections kept open at once to deliver their ERROR_BUSY (beyond: closed at once). */
#define REJECTED_LINGER_MAX 64
/* Deadlines are checked at this period at most (and at a quarter of handshake_timeout_ms). */
#define SWEEP_MAX_MS 1000u
/* While accept() fails for want of descriptors, the listener rests this long. */
#define ACCEPT_PAUSE_MS 250u
/* At most one log line about failing accept() per this interval. */
#define ACCEPT_LOG_INTERVAL_NS (10ull * 1000000000ull)

struct outbuf {
	uint8_t *data;
	size_t len, off, cap;
};

struct conn {
	struct watch watch;
	struct server *server;
	struct conn *prev, *next;
	struct frame_reader rd;
	struct outbuf out;
	struct rpc_peer peer;
	uint32_t unanswered;  /* responses queued but not fully sent */
	bool closing;         /* close once out is drained */
	bool rejected;        /* refused (ERROR_BUSY): not a client; input dropped until closed */
	bool starved;         /* reading paused until max_buffered_bytes has room */
	uint64_t serial;
	uint64_t accepted_ns; /* handshake deadline counts from here */
	uint64_t active_ns;   /* last complete request or byte sent: idle timeout counts from here */
	size_t in_charge, out_charge;  /* bytes counted in server.buffered */
	struct work *deferred; /* its request being answered on a thread (threads.h): reading waits */
	uint64_t deferred_id;  /* that request's id, when a part of it was handed over */
};

struct server {
	struct loop *loop;
	struct watch listener;
	bool activated;
	char *bound_path;     /* path we created and must unlink, NULL when socket-activated */
	struct rpc_context *ctx; /* the caller's */
	uint32_t max_frame, max_clients, max_in_flight, max_per_uid;
	uint32_t handshake_ms, idle_s;
	uint64_t max_pending, max_buffered;
	unsigned busy_timeout_ms;
	uint64_t buffered;    /* charged bytes of all connections (beyond CONN_FREE_BYTES each) */
	bool starving;        /* some connection waits for buffered to go down */
	unsigned rejected;    /* refused connections still open */
	struct conn *conns;
	uint64_t serial;
	struct watch timer;   /* deadlines and the paused listener */
	uint32_t timer_ms;    /* period armed, 0 when disarmed */
	bool accept_paused;   /* out of descriptors: listener off until a close or ACCEPT_PAUSE_MS */
	uint64_t accept_paused_ns, accept_logged_ns;
	unsigned accept_failures; /* since the last line logged */
	struct threads *threads; /* the work threads and the writer (threads.h) */
	struct answers *answers; /* answers kept to be sent again (answers.h) */
	void (*change_fn)(struct server *, void *);
	void *change_data;
};

static void changed(struct server *s)
{
	if (s->change_fn)
		s->change_fn(s, s->change_data);
}

/* Models were loaded or removed; gone (not 0), the id of a model removed or replaced: its jobs
 * are cancelled (before anything else of the loop can start one of them). */
static void models_changed(struct server *s, int64_t gone, bool replaced)
{
	if (s->ctx->profiler && gone > 0)
		profiler_models_changed(s->ctx->profiler, gone, replaced);
	changed(s);
}

static void server_update_timer(struct server *s);
static void server_wake_starved(struct server *s);
static void listener_resume(struct server *s);

static void conn_free(struct conn *c)
{
	struct server *s = c->server;

	if (c->deferred)
		threads_disown(c->deferred);  /* its result is dropped when it comes */
	rpc_peer_closed(s->ctx, &c->peer);
	loop_del(s->loop, &c->watch);
	close(c->watch.fd);
	frame_reader_reset(&c->rd);
	free(c->out.data);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (c->rejected)
		s->rejected--;
	else
		s->ctx->clients--;
	s->buffered -= c->in_charge + c->out_charge;
	log_debug("Connection #%" PRIu64 " (pid %d uid %u) closed", c->serial, (int)c->peer.cred.pid,
		  (unsigned)c->peer.cred.uid);
	free(c);
	/* A descriptor and buffer space came free. */
	if (s->accept_paused)
		listener_resume(s);
	server_wake_starved(s);
	server_update_timer(s);
	changed(s);
}

static size_t over_free(size_t bytes) { return bytes > CONN_FREE_BYTES ? bytes - CONN_FREE_BYTES : 0; }

/* Recounts what the connection holds against max_buffered_bytes after its buffers changed. */
static void conn_account(struct conn *c)
{
	struct server *s = c->server;
	size_t in = over_free(c->rd.cap), out = over_free(c->out.cap);
	bool less = in + out < c->in_charge + c->out_charge;

	s->buffered = s->buffered - c->in_charge - c->out_charge + in + out;
	c->in_charge = in;
	c->out_charge = out;
	if (less)
		server_wake_starved(s);
}

/* frame_reader grow hook: the payload buffer may grow only within max_buffered_bytes. */
static int conn_grow(void *data, uint32_t old_cap, uint32_t new_cap)
{
	struct conn *c = data;
	struct server *s = c->server;
	size_t charge = over_free(new_cap);

	if (charge > c->in_charge && s->buffered + (charge - c->in_charge) > s->max_buffered) {
		c->starved = true;
		s->starving = true;
		return -ENOBUFS;
	}
	s->buffered = s->buffered - c->in_charge + charge;
	c->in_charge = charge;
	return 0;
}

/* Room for n more bytes at the end of o (not yet counted in o->len), or NULL. */
static uint8_t *outbuf_reserve(struct outbuf *o, size_t n)
{
	if (o->off > 0 && o->off == o->len)
		o->off = o->len = 0;
	if (o->len + n > o->cap) {
		/* Compact before growing. */
		if (o->off > 0) {
			memmove(o->data, o->data + o->off, o->len - o->off);
			o->len -= o->off;
			o->off = 0;
		}
		if (o->len + n > o->cap) {
			/* Doubling, but by at most 1 MiB at a time: what is held beyond what is
			 * needed stays small against max_buffered_bytes. */
			size_t cap = o->cap ? o->cap : 4096;
			while (cap < o->len + n)
				cap += cap < (1u << 20) ? cap : (1u << 20);
			uint8_t *d = realloc(o->data, cap);
			if (!d)
				return NULL;
			o->data = d;
			o->cap = cap;
		}
	}
	return o->data + o->len;
}

static size_t outbuf_pending(const struct outbuf *o) { return o->len - o->off; }

/* Events the connection wants: input unless closing or over a limit, output while pending. */
static void conn_update_events(struct conn *c)
{
	struct server *s = c->server;
	uint32_t ev = 0;

	if (c->rejected && !c->closing)
		ev |= EPOLLIN;  /* read and dropped until the peer closes */
	else if (!c->closing && !c->starved && !c->deferred && outbuf_pending(&c->out) < s->max_pending &&
		 c->unanswered < s->max_in_flight &&
		 !(outbuf_pending(&c->out) && s->buffered >= s->max_buffered))
		ev |= EPOLLIN;
	if (outbuf_pending(&c->out))
		ev |= EPOLLOUT;
	loop_mod(s->loop, &c->watch, ev);
}

/* Sends what it can; returns <0 if the connection must be dropped. */
static int conn_flush(struct conn *c)
{
	struct outbuf *o = &c->out;

	while (outbuf_pending(o)) {
		ssize_t n = send(c->watch.fd, o->data + o->off, outbuf_pending(o), MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			return -errno;
		}
		o->off += (size_t)n;
		c->active_ns = loop_now(c->server->loop);
	}
	if (!outbuf_pending(o)) {
		c->unanswered = 0;
		o->off = o->len = 0;
		if (o->cap > CONN_FREE_BYTES) {
			/* Give a large buffer back once it is sent. */
			free(o->data);
			o->data = NULL;
			o->cap = 0;
			conn_account(c);
		}
	}
	return 0;
}

/* The error to send instead of a response of n bytes to c, when it cannot be queued: over
 * max_frame_bytes, or over what max_buffered_bytes has room for now; NULL when it can (and *oom
 * when the error could not be built). */
static Pim__Response *queue_refusal(struct conn *c, uint64_t id, size_t n, bool *oom)
{
	Pim__Response *resp = NULL;

	if (n > c->server->max_frame) {
		/* Never send what the peer is entitled to refuse; say so instead. */
		resp = reply_error(id, PIM__ERROR_CODE__ERROR_BUSY, "response of %zu bytes exceeds "
				   "max_frame_bytes %u", n, c->server->max_frame);
		*oom = !resp;
		return resp;
	}
	size_t want = outbuf_pending(&c->out) + FRAME_HEADER_BYTES + n;
	if (want > CONN_FREE_BYTES && over_free(want) > c->out_charge &&
	    c->server->buffered + over_free(want) - c->out_charge > c->server->max_buffered) {
		/* Held responses and requests of all clients fill max_buffered_bytes. */
		resp = reply_error(id, PIM__ERROR_CODE__ERROR_BUSY,
				   "a response of %zu bytes does not fit in max_buffered_bytes "
				   "(%" PRIu64 ") now; retry later", n, c->server->max_buffered);
		*oom = !resp;
	}
	return resp;
}

static int conn_queue(struct conn *c, Pim__Response *resp)
{
	size_t n = pim__response__get_packed_size(resp);
	bool oom = false;
	Pim__Response *instead = queue_refusal(c, resp->id, n, &oom);

	if (instead || oom) {
		pim__response__free_unpacked(resp, NULL);
		if (oom)
			return -ENOMEM;
		resp = instead;
		n = pim__response__get_packed_size(resp);
	}
	/* packed straight behind its header in the output buffer: no copy, no allocation per reply */
	uint8_t *at = outbuf_reserve(&c->out, FRAME_HEADER_BYTES + n);
	if (at) {
		frame_put_header(at, (uint32_t)n);
		pim__response__pack(resp, at + FRAME_HEADER_BYTES);
		c->out.len += FRAME_HEADER_BYTES + n;
	}
	pim__response__free_unpacked(resp, NULL);
	conn_account(c);
	if (!at)
		return -ENOMEM;
	c->unanswered++;
	return 0;
}

/* As conn_queue, for a response packed already, behind FRAME_HEADER_BYTES of room, in frame
 * (taken over: a large one becomes the output buffer itself when nothing else is pending). */
static int conn_queue_packed(struct conn *c, uint64_t id, uint8_t *frame, size_t n)
{
	struct outbuf *o = &c->out;
	bool oom = false;
	Pim__Response *instead = queue_refusal(c, id, n, &oom);

	if (instead || oom) {
		free(frame);
		return oom ? -ENOMEM : conn_queue(c, instead);
	}
	frame_put_header(frame, (uint32_t)n);
	if (!outbuf_pending(o)) {
		free(o->data);
		*o = (struct outbuf){ .data = frame, .len = FRAME_HEADER_BYTES + n, .cap = FRAME_HEADER_BYTES + n };
	} else {
		uint8_t *at = outbuf_reserve(o, FRAME_HEADER_BYTES + n);
		if (at) {
			memcpy(at, frame, FRAME_HEADER_BYTES + n);
			o->len += FRAME_HEADER_BYTES + n;
		}
		free(frame);
		if (!at) {
			conn_account(c);
			return -ENOMEM;
		}
	}
	conn_account(c);
	c->unanswered++;
	return 0;
}

/* As conn_queue, for the answer kept in memory body (bn bytes: answers_get) to request id. */
static int conn_queue_kept(struct conn *c, uint64_t id, const uint8_t *body, size_t bn)
{
	size_t n = answers_size(id, bn);
	bool oom = false;
	Pim__Response *instead = queue_refusal(c, id, n, &oom);

	if (instead || oom)
		return oom ? -ENOMEM : conn_queue(c, instead);
	uint8_t *at = outbuf_reserve(&c->out, FRAME_HEADER_BYTES + n);
	if (at) {
		frame_put_header(at, (uint32_t)n);
		answers_write(at + FRAME_HEADER_BYTES, id, body, bn);
		c->out.len += FRAME_HEADER_BYTES + n;
	}
	conn_account(c);
	if (!at)
		return -ENOMEM;
	c->unanswered++;
	return 0;
}

/* Status (after Hello), the most frequent request: packed straight into the output buffer,
 * nothing built or freed (status_rpc_pack). */
static int conn_queue_status(struct conn *c, uint64_t id)
{
	struct rpc_context *ctx = c->server->ctx;
	size_t room = 2048, n;
	bool oom = false;
	uint8_t *at;

	ctx->requests++; /* (counted before it is answered, as rpc_handle counts) */
	for (;;) {
		if (!(at = outbuf_reserve(&c->out, FRAME_HEADER_BYTES + room))) {
			conn_account(c);
			return -ENOMEM;
		}
		n = status_rpc_pack(ctx, id, loop_now(c->server->loop), at + FRAME_HEADER_BYTES, room);
		if (n <= room)
			break;
		room = n;
	}
	Pim__Response *instead = queue_refusal(c, id, n, &oom);
	if (instead || oom)
		return oom ? -ENOMEM : conn_queue(c, instead);
	frame_put_header(at, (uint32_t)n);
	c->out.len += FRAME_HEADER_BYTES + n;
	conn_account(c);
	c->unanswered++;
	return 0;
}

static void conn_answer_status(struct conn *c, uint64_t id)
{
	if (conn_queue_status(c, id) < 0) {
		log_error("Out of memory answering connection #%" PRIu64 "; closing it", c->serial);
		c->closing = true;
	}
}

/* Best effort: tell the peer why it is being dropped, then close after the send. */
static void conn_reject(struct conn *c, Pim__ErrorCode code, const char *msg)
{
	Pim__Response *r = reply_error(0, code, "%s", msg);
	if (r && conn_queue(c, r) == 0)
		conn_flush(c);
	c->closing = true;
}

/*
 * Refuses a new connection with ERROR_BUSY.  Closing a socket whose peer's Hello is still
 * unread would make the peer's read fail with ECONNRESET instead of returning the answer, so
 * the connection stays open, its input dropped, until the peer closes it or the handshake
 * deadline passes (for at most REJECTED_LINGER_MAX connections at once).  Returns false if the
 * connection was freed.
 */
static bool conn_refuse(struct conn *c, const char *msg)
{
	struct server *s = c->server;
	Pim__Response *r = reply_error(0, PIM__ERROR_CODE__ERROR_BUSY, "%s", msg);

	s->ctx->clients--;
	c->rejected = true;
	s->rejected++;
	if (!r || conn_queue(c, r) < 0 || conn_flush(c) < 0 || outbuf_pending(&c->out) ||
	    s->rejected > REJECTED_LINGER_MAX) {
		conn_free(c);
		return false;
	}
	shutdown(c->watch.fd, SHUT_WR);
	conn_update_events(c);
	return true;
}

static void conn_event(struct watch *w, uint32_t events);
static void conn_handle_decoded(struct conn *c, struct decoded *d, int fd);

/*
 * The version of everything an answer kept in memory depends on (answers.h): the loop's own
 * changes (a reload, a new B_cpu); for an answer read from the store, the commits that may have
 * changed anything, and those that changed its model (model NULL: any model, for the list).  A
 * sum of counts that only grow: it changes whenever one of them does.
 */
static uint64_t answers_version(const struct server *s, bool store, const char *model)
{
	uint64_t v = s->ctx->answers_epoch;

	if (store)
		v += store_changes(s->ctx->store) + store_model_changes(s->ctx->store, model);
	return v;
}

/* The key under which the answer to req (a frame's payload) is kept, if it may be: its kind's
 * rule says so (dispatch.c), and no fleet catalogue is configured (whose metrics arrive without
 * a request; its answers are kept in the store only, placement_rpc.c). */
static bool answer_key(const struct server *s, const Pim__Request *req, const uint8_t *payload,
		       uint32_t len, const uint8_t **key, size_t *klen)
{
	const struct dispatch_rule *r = dispatch_rule(req->body_case);

	return r && (r->access & DISPATCH_ANSWER_KEPT) && !s->ctx->catalogue &&
	       answers_key(payload, len, key, klen);
}

/* A whole request came back from a thread: its answer, or its decoded frame. */
static void frame_job_finish(struct conn *c, struct frame_job *j)
{
	struct server *s = c->server;

	if (!j->answered) {
		conn_handle_decoded(c, &j->d, -1);
		return;
	}
	s->ctx->requests++;
	if (j->packed && j->keep_key && j->reusable)
		answers_put(s->answers, j->keep_key, j->keep_klen, j->keep_version,
			    answers_version(s, j->keep_store, j->keep_model), j->packed + FRAME_HEADER_BYTES,
			    j->packed_len);
	Pim__Response *resp = j->resp;
	uint8_t *packed = j->packed;
	j->resp = NULL;
	j->packed = NULL;
	if (packed ? conn_queue_packed(c, j->resp_id, packed, j->packed_len) < 0 : !resp || conn_queue(c, resp) < 0) {
		log_error("Out of memory answering connection #%" PRIu64 "; closing it", c->serial);
		c->closing = true;
		return;
	}
	if (j->after == RPC_CLOSE)
		c->closing = true;
}

/* threads.h: a thread's connection changed the models: so it is, whether or not the connection
 * that asked is still there to be told (before anything finished with it: work_finished). */
static void work_models(void *data, struct work *w)
{
	struct server *s = data;

	s->ctx->models += w->frame->models_delta;
	store_forget_cached(s->ctx->store);
	models_changed(s, w->frame->model_gone, w->frame->model_replaced);
}

/* threads.h: work handed over is done (or dropped): answer its connection. */
static void work_finished(void *data, struct work *w)
{
	struct server *s = data;
	struct conn *c = w->owner;

	if (c) {
		c->deferred = NULL;
		c->active_ns = loop_now(c->server->loop);
	}
	if (c && !w->dropped) {
		if (w->frame) {
			frame_job_finish(c, w->frame);
		} else if (w->job.finish) {
			struct rpc_deferred next = { 0 };
			Pim__Response *resp = w->job.finish(w->job.data, &next);
			if (!resp && (next.run || next.write.write)) {
				/* the request's next part: its data goes on with it */
				w->job.release = NULL;
				struct work *nw;
				if (threads_submit_deferred(s->threads, c, &next, &nw) == 0)
					c->deferred = nw;
				else
					resp = threads_refusal(s->threads, next.write.write ? DISPATCH_WRITER
											: DISPATCH_WORK, c->deferred_id);
			}
			if (!c->deferred && (!resp || conn_queue(c, resp) < 0)) {
				log_error("Out of memory answering connection #%" PRIu64 "; closing it", c->serial);
				c->closing = true;
			}
		}
	}
	bool dropped = w->dropped; /* (w is freed below) */
	s->buffered -= w->charge;
	threads_release(s->threads, w);
	server_wake_starved(s);
	if (c && !dropped) {
		/* flush and read on, as if the socket had become writable */
		conn_event(&c->watch, EPOLLOUT);
	}
}

/* Hands c's whole frame (payload of len bytes, and d when it was decoded here: taken over) to
 * where; answers why if it could not. */
static void conn_submit_frame(struct conn *c, enum dispatch_thread where, uint8_t *payload, uint32_t len,
			      struct decoded *d)
{
	struct server *s = c->server;
	struct work *w;

	if (threads_submit_frame(s->threads, where, c, &c->peer, payload, len, d, &w) == 0) {
		/* The frame's bytes stay counted against max_buffered_bytes until it is done. */
		w->charge = over_free(len);
		s->buffered += w->charge;
		c->deferred = w;
		return;
	}
	Pim__Response *r = threads_refusal(s->threads, where, 0);
	if (!r || conn_queue(c, r) < 0)
		c->closing = true;
}

/* Answers a decoded frame on the event loop (d's request is freed here). */
static void conn_handle_decoded(struct conn *c, struct decoded *d, int fd)
{
	struct server *s = c->server;
	enum rpc_after after = RPC_KEEP;

	c->peer.passed_fd = fd;
	if (d->k == -E2BIG) {
		closep(&c->peer.passed_fd);
		log_warning("Connection #%" PRIu64 " (pid %d uid %u): %s; refused", c->serial,
			    (int)c->peer.cred.pid, (unsigned)c->peer.cred.uid, d->err.msg);
		Pim__Response *r = reply_error(0, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT, "%s", d->err.msg);
		if (!r || conn_queue(c, r) < 0)
			c->closing = true;
		return;
	}
	if (d->k < 0) {
		closep(&c->peer.passed_fd);
		log_warning("Connection #%" PRIu64 " (pid %d uid %u): undecodable request of %u bytes; "
			    "closing it", c->serial, (int)c->peer.cred.pid, (unsigned)c->peer.cred.uid, d->len);
		conn_reject(c, PIM__ERROR_CODE__ERROR_PROTOCOL, "request frame is not a valid Request message");
		return;
	}
	struct rpc_deferred defer = { 0 };
	const Pim__Request *req = d->req;
	uint64_t id = req->id;
	if (!d->bad_text && req->body_case == PIM__REQUEST__BODY_STATUS && c->peer.hello_done) {
		closep(&c->peer.passed_fd);
		decoded_free(d);
		conn_answer_status(c, id);
		return;
	}
	Pim__Response *resp = d->bad_text ? reply_error_from(id, &d->text_err)
					  : rpc_handle(s->ctx, &c->peer, req, &after, &defer);
	/* A descriptor the request did not take is not kept. */
	closep(&c->peer.passed_fd);
	c->peer.passed_fd = -1;
	decoded_free(d);
	if (!resp && (defer.run || defer.write.write)) {
		/* Answered when the work thread (or the writer) is done; nothing more is read
		 * meanwhile, so the responses stay in the order of the requests. */
		struct work *w;
		if (threads_submit_deferred(s->threads, c, &defer, &w) == 0) {
			c->deferred = w;
			c->deferred_id = id;
			return;
		}
		resp = threads_refusal(s->threads, defer.write.write ? DISPATCH_WRITER : DISPATCH_WORK, id);
	}
	if (!resp || conn_queue(c, resp) < 0) {
		log_error("Out of memory answering connection #%" PRIu64 "; closing it", c->serial);
		c->closing = true;
		return;
	}
	if (after == RPC_CLOSE)
		c->closing = true;
}

/*
 * A read whose answer may be kept (answers.h): answered here when it is kept, else handed to a
 * work thread with its key and the version now, so that its answer is kept when it comes back
 * unless something changed meanwhile; true either way (payload and d taken).  false, touching
 * nothing, for a request whose answer is never kept: the caller hands it over.
 */
static bool conn_answer_kept(struct conn *c, struct decoded *d, uint8_t *payload, uint32_t len)
{
	struct server *s = c->server;
	const uint8_t *key, *body;
	size_t klen, n;

	if (!answer_key(s, d->req, payload, len, &key, &klen))
		return false;
	bool store = dispatch_rule(d->req->body_case)->access & DISPATCH_STORE_READ;
	const char *model = rpc_request_model(d->req);
	uint64_t version = answers_version(s, store, model);
	if ((body = answers_get(s->answers, key, klen, version, &n))) {
		s->ctx->requests++;
		if (conn_queue_kept(c, d->req->id, body, n) < 0) {
			log_error("Out of memory answering connection #%" PRIu64 "; closing it", c->serial);
			c->closing = true;
		}
		free(payload);
		decoded_free(d);
		return true;
	}
	/* (without memory for the key, the answer is simply not kept) */
	size_t mlen = model ? strlen(model) + 1 : 0;
	uint8_t *copy = malloc(klen + mlen + 1);
	if (copy) {
		memcpy(copy, key, klen);
		if (model)
			memcpy(copy + klen, model, mlen);
	}
	conn_submit_frame(c, DISPATCH_WORK, payload, len, d);
	if (c->deferred && c->deferred->frame && copy) {
		struct frame_job *j = c->deferred->frame;
		j->keep_key = copy;
		j->keep_klen = klen;
		j->keep_version = version;
		j->keep_store = store;
		j->keep_model = model ? (const char *)copy + klen : NULL;
	} else {
		free(copy);
	}
	return true;
}

static void conn_handle_frame(struct conn *c, uint8_t *payload, uint32_t len, int fd)
{
	struct decoded d = { 0 };

	c->active_ns = loop_now(c->server->loop);
	/* A large frame takes long to decode: a work thread does it (descriptors stay here), and
	 * answers it unless its rule says the loop (dispatch.h). */
	if (len > DISPATCH_DECODE_OFF_LOOP_BYTES && fd < 0 && c->peer.hello_done) {
		conn_submit_frame(c, DISPATCH_WORK, payload, len, NULL);
		return;
	}
	decoded_init(&d, payload, len, c->peer.hello_done, NULL);
	/* Where the table says (dispatch.c): a thread answers the decoded request; what must be
	 * answered here, is. */
	if (d.k >= 0 && !d.bad_text && c->peer.hello_done) {
		enum dispatch_thread where = dispatch_where(d.req, 0);
		if (where == DISPATCH_WORK || where == DISPATCH_WRITER) {
			/* (a descriptor is taken by the profiler's requests only) */
			closep(&fd);
			if (where == DISPATCH_WORK && conn_answer_kept(c, &d, payload, len))
				return;
			conn_submit_frame(c, where, payload, len, &d);
			return;
		}
	}
	free(payload);
	conn_handle_decoded(c, &d, fd);
}

/* A refused connection: drop what it sends; close when it does. */
static void conn_drain_rejected(struct conn *c)
{
	uint8_t junk[4096];
	ssize_t n;

	for (int i = 0; i < 16; i++) {
		n = recv(c->watch.fd, junk, sizeof junk, MSG_DONTWAIT);
		if (n > 0)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		break;
	}
	if (n <= 0)
		conn_free(c);
}

static void conn_event(struct watch *w, uint32_t events)
{
	struct conn *c = w->data;
	struct server *s = c->server;
	int r;

	if (c->rejected) {
		if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
			conn_drain_rejected(c);
		return;
	}
	if (events & EPOLLOUT) {
		if (conn_flush(c) < 0) {
			conn_free(c);
			return;
		}
	}
	if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->closing && !c->deferred) {
		c->starved = false;
		for (int i = 0; i < FRAMES_PER_WAKEUP && !c->closing; i++) {
			if (outbuf_pending(&c->out) >= s->max_pending || c->unanswered >= s->max_in_flight ||
			    (outbuf_pending(&c->out) && s->buffered >= s->max_buffered))
				break;
			r = frame_reader_read(&c->rd, w->fd);
			if (r == 0 || r == -ENOBUFS)
				break;  /* -ENOBUFS: starved, woken when buffer space comes free */
			if (r < 0) {
				if (r == -EMSGSIZE) {
					char msg[128];
					snprintf(msg, sizeof msg, "frame of %u bytes exceeds max_frame_bytes %u",
						 c->rd.len, s->max_frame);
					log_warning("Connection #%" PRIu64 " (pid %d uid %u): %s; closing it",
						    c->serial, (int)c->peer.cred.pid,
						    (unsigned)c->peer.cred.uid, msg);
					conn_reject(c, PIM__ERROR_CODE__ERROR_PROTOCOL, msg);
					break;
				}
				if (r == -ECONNRESET) {
					/* Clean end of input: answer what was asked, then close. */
					c->closing = true;
					break;
				}
				if (r == -EPIPE)
					log_warning("Connection #%" PRIu64 " (pid %d uid %u): closed in the middle "
						    "of a frame", c->serial, (int)c->peer.cred.pid,
						    (unsigned)c->peer.cred.uid);
				else if (r != -ECONNRESET)
					log_debug("Connection #%" PRIu64 ": read: %s", c->serial, strerror(-r));
				conn_free(c);
				return;
			}
			uint32_t len;
			int fd = -1;
			if (c->rd.extra_fds) {
				log_warning("Connection #%" PRIu64 " (pid %d uid %u): more than one file "
					    "descriptor with a frame; closing it", c->serial,
					    (int)c->peer.cred.pid, (unsigned)c->peer.cred.uid);
				conn_reject(c, PIM__ERROR_CODE__ERROR_PROTOCOL,
					    "at most one file descriptor may come with a request");
				break;
			}
			/* Status, read on the wire in the reader's buffer: nothing decoded, allocated
			 * or freed (decode_status_request) */
			uint64_t id;
			const uint8_t *in = frame_reader_peek(&c->rd, &len);
			if (c->rd.fd < 0 && c->peer.hello_done && decode_status_request(in, len, &id)) {
				frame_reader_done(&c->rd);
				c->active_ns = loop_now(c->server->loop);
				conn_answer_status(c, id);
				conn_account(c);
				continue;
			}
			uint8_t *payload = frame_reader_take(&c->rd, &len, &fd);
			conn_handle_frame(c, payload, len, fd);
			/* The payload is freed: its bytes leave the budget. */
			conn_account(c);
			if (c->deferred)
				break;
		}
		if (conn_flush(c) < 0) {
			conn_free(c);
			return;
		}
	}
	if (c->closing && !outbuf_pending(&c->out)) {
		conn_free(c);
		return;
	}
	if (events & (EPOLLHUP | EPOLLERR) && !(events & EPOLLIN)) {
		conn_free(c);
		return;
	}
	conn_update_events(c);
}

/* Buffer space came free: connections waiting for it read again (their EPOLLIN is re-armed). */
static void server_wake_starved(struct server *s)
{
	if (!s->starving || s->buffered >= s->max_buffered)
		return;
	s->starving = false;
	for (struct conn *c = s->conns; c; c = c->next) {
		if (c->starved) {
			c->starved = false;
			conn_update_events(c);
		} else if (!c->rejected && outbuf_pending(&c->out)) {
			conn_update_events(c);
		}
	}
}

static void listener_resume(struct server *s)
{
	s->accept_paused = false;
	loop_mod(s->loop, &s->listener, EPOLLIN);
	server_update_timer(s);
}

/* accept() failed with EMFILE or ENFILE: the level-triggered listener would fire again at once,
 * so it rests until a connection closes or ACCEPT_PAUSE_MS passes; the log says so rarely. */
static void listener_pause(struct server *s, int e)
{
	uint64_t now = now_ns();

	s->accept_paused = true;
	s->accept_paused_ns = now;
	s->accept_failures++;
	loop_mod(s->loop, &s->listener, 0);
	if (!s->accept_logged_ns || now - s->accept_logged_ns >= ACCEPT_LOG_INTERVAL_NS) {
		log_warning("Cannot accept connections: %s (%u failure%s since the last report; %u "
			    "clients); new connections wait until a descriptor is free", strerror(e),
			    s->accept_failures, s->accept_failures == 1 ? "" : "s", s->ctx->clients);
		s->accept_logged_ns = now;
		s->accept_failures = 0;
	}
	server_update_timer(s);
}

/* Closes the connections whose deadline passed and the refused ones that lingered long enough. */
static void server_sweep(struct server *s)
{
	uint64_t now = now_ns(), hs = (uint64_t)s->handshake_ms * 1000000;
	uint64_t idle = (uint64_t)s->idle_s * 1000000000;
	struct conn *next;

	for (struct conn *c = s->conns; c; c = next) {
		next = c->next;
		if (c->rejected || c->closing) {
			/* Had its answer, or was told why; it does not read: give up. */
			if (now - (c->rejected ? c->accepted_ns : c->active_ns) >= hs)
				conn_free(c);
			continue;
		}
		if (!c->peer.hello_done && now - c->accepted_ns >= hs) {
			log_info("Connection #%" PRIu64 " (pid %d uid %u): no Hello within "
				 "handshake_timeout_ms (%u); closing it", c->serial, (int)c->peer.cred.pid,
				 (unsigned)c->peer.cred.uid, s->handshake_ms);
			char msg[96];
			snprintf(msg, sizeof msg, "no Hello within handshake_timeout_ms (%u)", s->handshake_ms);
			conn_reject(c, PIM__ERROR_CODE__ERROR_PROTOCOL, msg);
			conn_free(c);
			continue;
		}
		if (idle && c->peer.hello_done && !outbuf_pending(&c->out) && !c->deferred &&
		    now - c->active_ns >= idle) {
			log_info("Connection #%" PRIu64 " (pid %d uid %u): idle for idle_timeout_s (%u); "
				 "closing it", c->serial, (int)c->peer.cred.pid, (unsigned)c->peer.cred.uid,
				 s->idle_s);
			conn_free(c);
		}
	}
}

static void timer_event(struct watch *w, uint32_t events)
{
	struct server *s = w->data;
	uint64_t expirations;

	if (read(w->fd, &expirations, sizeof expirations) < 0 && errno == EAGAIN)
		return;
	if (s->accept_paused && now_ns() - s->accept_paused_ns >= (uint64_t)ACCEPT_PAUSE_MS * 1000000)
		listener_resume(s);
	server_sweep(s);
	server_update_timer(s);
}

/* The timer runs while there are connections to watch or the listener rests; else it sleeps. */
static void server_update_timer(struct server *s)
{
	uint32_t ms = 0;

	if (s->timer.fd < 0)
		return;
	if (s->conns) {
		ms = s->handshake_ms / 4;
		if (ms > SWEEP_MAX_MS)
			ms = SWEEP_MAX_MS;
		if (ms < 25)
			ms = 25;
	}
	if (s->accept_paused && (!ms || ms > ACCEPT_PAUSE_MS))
		ms = ACCEPT_PAUSE_MS;
	if (ms == s->timer_ms)
		return;
	struct itimerspec its = { 0 };
	its.it_interval.tv_sec = ms / 1000;
	its.it_interval.tv_nsec = (long)(ms % 1000) * 1000000;
	its.it_value = its.it_interval;
	if (timerfd_settime(s->timer.fd, 0, &its, NULL) == 0)
		s->timer_ms = ms;
}

static unsigned uid_connections(const struct server *s, uid_t uid)
{
	unsigned n = 0;
	for (const struct conn *c = s->conns; c; c = c->next)
		if (!c->rejected && c->peer.cred.uid == uid)
			n++;
	return n;
}

static void listener_event(struct watch *w, uint32_t events)
{
	struct server *s = w->data;

	for (int i = 0; i < 64 && !s->accept_paused; i++) {
		int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
				return;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				listener_pause(s, errno);
				return;
			}
			log_error("accept: %s", strerror(errno));
			return;
		}
		struct conn *c = calloc(1, sizeof *c);
		if (!c) {
			close(fd);
			log_error("Out of memory accepting a connection");
			continue;
		}
		socklen_t sl = sizeof c->peer.cred;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->peer.cred, &sl) < 0) {
			log_warning("SO_PEERCRED: %s; refusing the connection", strerror(errno));
			close(fd);
			free(c);
			continue;
		}
		c->watch = (struct watch){ .fd = fd, .fn = conn_event, .data = c };
		c->server = s;
		c->serial = ++s->serial;
		c->accepted_ns = c->active_ns = loop_now(s->loop);
		frame_reader_init(&c->rd, s->max_frame);
		frame_reader_set_grow(&c->rd, conn_grow, c);
		if (loop_add(s->loop, &c->watch, EPOLLIN) < 0) {
			close(fd);
			free(c);
			continue;
		}
		unsigned same_uid = uid_connections(s, c->peer.cred.uid);
		c->next = s->conns;
		if (s->conns)
			s->conns->prev = c;
		s->conns = c;
		s->ctx->clients++;
		log_debug("Connection #%" PRIu64 " from pid %d uid %u gid %u", c->serial,
			  (int)c->peer.cred.pid, (unsigned)c->peer.cred.uid, (unsigned)c->peer.cred.gid);
		if (s->ctx->clients > s->max_clients) {
			log_warning("Refusing connection from pid %d uid %u: max_clients (%u) reached",
				    (int)c->peer.cred.pid, (unsigned)c->peer.cred.uid, s->max_clients);
			conn_refuse(c, "too many clients connected; retry later");
		} else if (same_uid >= s->max_per_uid) {
			char msg[128];
			snprintf(msg, sizeof msg, "uid %u has %u connections open (max_clients_per_uid); "
				 "retry later", (unsigned)c->peer.cred.uid, same_uid);
			log_warning("Refusing connection from pid %d: %s", (int)c->peer.cred.pid, msg);
			conn_refuse(c, msg);
		}
		server_update_timer(s);
		changed(s);
	}
}

/* Is a live daemon answering at path? */
static bool socket_alive(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool alive;

	if (fd < 0)
		return false;
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	alive = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
	close(fd);
	return alive;
}

/* Connections waiting for accept() are not refused by the kernel below max_clients (the kernel
 * caps this at net.core.somaxconn). */
static int listen_backlog(const struct server *s)
{
	return s->max_clients + 64 > (uint32_t)SOMAXCONN ? (int)s->max_clients + 64 : SOMAXCONN;
}

static int bind_socket(struct server *s, const char *path, struct pim_error *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	_cleanup_(closep) int fd = -1;
	struct stat st;

	char abs[PATH_MAX];
	if (path[0] != '/') {
		/* Kept absolute so the socket can be removed after detaching (chdir "/"). */
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof cwd))
			return err_set(err, -errno, "getcwd: %s", strerror(errno));
		if ((size_t)snprintf(abs, sizeof abs, "%s/%s", cwd, path) >= sizeof abs)
			return err_set(err, -ENAMETOOLONG, "socket path %s is too long", path);
		path = abs;
	}
	if (strlen(path) >= sizeof sa.sun_path)
		return err_set(err, -ENAMETOOLONG, "socket path %s is longer than %zu bytes", path,
			       sizeof sa.sun_path - 1);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	/* The runtime directory (/run/pimd) exists under systemd; create it for a manual start. */
	{
		char parent[sizeof sa.sun_path];
		memcpy(parent, path, strlen(path) + 1);
		char *slash = strrchr(parent, '/');
		if (slash && slash != parent) {
			*slash = 0;
			if (mkdir(parent, 0755) < 0 && errno != EEXIST)
				return err_set(err, -errno, "creating %s: %s", parent, strerror(errno));
		}
	}
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return err_set(err, -EEXIST, "%s exists and is not a socket; refusing to replace it",
				       path);
		if (socket_alive(path))
			return err_set(err, -EADDRINUSE, "%s: another pimd is serving this socket", path);
		if (unlink(path) < 0)
			return err_set(err, -errno, "removing stale socket %s: %s", path, strerror(errno));
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_set(err, -errno, "socket: %s", strerror(errno));
	mode_t old = umask(0117);
	int r = bind(fd, (struct sockaddr *)&sa, sizeof sa);
	umask(old);
	if (r < 0)
		return err_set(err, -errno, "binding %s: %s", path, strerror(errno));
	if (chmod(path, 0660) < 0 || listen(fd, listen_backlog(s)) < 0) {
		r = -errno;
		unlink(path);
		return err_set(err, r, "setting up %s: %s", path, strerror(-r));
	}
	s->bound_path = strdup(path);
	s->listener.fd = TAKE_FD(fd);
	return 0;
}

int server_new(struct loop *loop, const struct config *cfg, struct rpc_context *ctx,
	       struct server **out, struct pim_error *err)
{
	struct server *s = calloc(1, sizeof *s);
	int n, r;

	if (!s)
		return err_set(err, -ENOMEM, "out of memory");
	s->loop = loop;
	s->listener = (struct watch){ .fd = -1, .fn = listener_event, .data = s };
	s->timer = (struct watch){ .fd = -1, .fn = timer_event, .data = s };
	s->ctx = ctx;
	if ((r = threads_new(loop, ctx, cfg->busy_timeout_ms, work_finished, work_models, s, &s->threads)) < 0) {
		free(s);
		return err_set(err, r, "out of memory");
	}
	if (!(s->answers = answers_new(0, 0))) {
		threads_free(s->threads);
		free(s);
		return err_set(err, -ENOMEM, "out of memory");
	}
	server_apply_config(s, cfg);

	n = sd_listen_fds(1);
	if (n < 0) {
		r = err_set(err, n, "sd_listen_fds: %s", strerror(-n));
		goto fail;
	}
	if (n > 1) {
		r = err_set(err, -EINVAL, "systemd passed %d sockets; pimd takes exactly one", n);
		goto fail;
	}
	if (n == 1) {
		int fd = SD_LISTEN_FDS_START;
		if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0) {
			r = err_set(err, -EINVAL, "the socket passed by systemd is not a listening "
				    "AF_UNIX stream socket");
			goto fail;
		}
		int fl = fcntl(fd, F_GETFL);
		if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
			r = err_set(err, -errno, "configuring the systemd socket: %s", strerror(errno));
			goto fail;
		}
		s->listener.fd = fd;
		s->activated = true;
		/* The backlog of a socket systemd made is raised the same way (listen(2) again). */
		if (listen(fd, listen_backlog(s)) < 0)
			log_warning("Cannot raise the listen backlog of the systemd socket: %s",
				    strerror(errno));
	} else if ((r = bind_socket(s, cfg->socket_path, err)) < 0)
		goto fail;
	if ((r = loop_add(loop, &s->listener, EPOLLIN)) < 0) {
		err_set(err, r, "epoll: %s", strerror(-r));
		goto fail;
	}
	s->timer.fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (s->timer.fd < 0) {
		r = err_set(err, -errno, "timerfd: %s", strerror(errno));
		goto fail;
	}
	if ((r = loop_add(loop, &s->timer, EPOLLIN)) < 0) {
		err_set(err, r, "epoll: %s", strerror(-r));
		goto fail;
	}
	*out = s;
	return 0;
fail:
	server_free(s);
	return r;
}

void server_free(struct server *s)
{
	if (!s)
		return;
	s->change_fn = NULL;
	threads_free(s->threads);
	s->threads = NULL;
	if (s->answers) {
		struct answers_stats st;
		answers_stats(s->answers, &st);
		if (st.hits + st.misses)
			log_info("Reads answered from memory: %" PRIu64 " of %" PRIu64 " asked (%" PRIu64
				 " answers kept, %u at the end)", st.hits, st.hits + st.misses, st.kept,
				 st.entries);
	}
	answers_free(s->answers);
	s->answers = NULL;
	while (s->conns)
		conn_free(s->conns);
	if (s->listener.fd >= 0) {
		loop_del(s->loop, &s->listener);
		close(s->listener.fd);
	}
	if (s->timer.fd >= 0) {
		loop_del(s->loop, &s->timer);
		close(s->timer.fd);
	}
	if (s->bound_path) {
		unlink(s->bound_path);
		free(s->bound_path);
	}
	free(s);
}

void server_apply_config(struct server *s, const struct config *cfg)
{
	s->max_frame = cfg->max_frame_bytes;
	s->max_clients = cfg->max_clients;
	s->max_pending = cfg->max_pending_bytes;
	s->max_in_flight = cfg->max_requests_in_flight;
	s->max_per_uid = cfg->max_clients_per_uid;
	s->handshake_ms = cfg->handshake_timeout_ms;
	s->idle_s = cfg->idle_timeout_s;
	s->max_buffered = cfg->max_buffered_bytes;
	s->busy_timeout_ms = cfg->busy_timeout_ms;
	if (s->threads)
		threads_set_busy_timeout(s->threads, cfg->busy_timeout_ms);
	for (struct conn *c = s->conns; c; c = c->next)
		c->rd.max = cfg->max_frame_bytes;
	if (s->listener.fd >= 0 && listen(s->listener.fd, listen_backlog(s)) < 0)
		log_warning("Cannot set the listen backlog: %s", strerror(errno));
	s->timer_ms = UINT32_MAX; /* re-armed with the new handshake period */
	server_update_timer(s);
	server_wake_starved(s);
}

bool server_socket_activated(const struct server *s) { return s->activated; }
unsigned server_clients(const struct server *s) { return s->ctx->clients; }

void server_set_change_hook(struct server *s, void (*fn)(struct server *s, void *data), void *data)
{
	s->change_fn = fn;
	s->change_data = data;
}

struct store_writer server_writer(struct server *s)
{
	return threads_writer(s->threads);
}
