/* SPDX-License-Identifier: MIT */
/*
 * reply.h: what a request handler is given, and how it answers.  The handlers (rpc.c's own,
 * status_rpc.c, placement_rpc.c, jitq_rpc.c, profile.c) include this; the dispatcher (rpc.h)
 * calls them and they never call it.
 *
 * A reply is one tree from its first allocation: reply_start() makes the Response with its body
 * already attached, and every later allocation is hung on the tree as it is made, so whatever
 * fails, the one free in reply_finish() (or reply_fail()) cleans up all of it.
 */
#ifndef PIMD_REPLY_H
#define PIMD_REPLY_H

#include <sys/socket.h>

#include "pim.pb-c.h"
#include "placement.h"
#include "pimsim.h"
#include "platform.h"
#include "store.h"

struct profiler;

/* The daemon as the handlers see it, built by its owner with rpc_context_init() (rpc.h). */
struct rpc_context {
	struct store *store;
	/* this host, as stored; its B_cpu changes on the event loop only (status_rpc.c, a
	 * re-measure): a request answered on another thread gets a copy */
	struct platform *platform;
	const struct placement_params *params; /* configured placement parameters */
	const struct pimsim_params *pim;      /* HBM-PIM organisation and timing (JIT-Q) */
	bool pim_configured;                  /* pim comes from a pim_config file */
	double jitq_speedup[3];               /* configured accelerator speedup per MX format; 0: default */
	uint64_t started_ns;
	uint32_t pid;           /* pimd's, once detached (Status: asked once, not on each request) */
	uint64_t requests;      /* answered so far */
	unsigned clients;       /* open connections */
	unsigned models;        /* models stored, as of the last change (Status: never queried) */
	/* Who writes what the asking thread must not wait for (store_write_via): the writer
	 * thread, on the event loop and on the work threads alike. */
	struct store_writer writer;
	/* bytes of answers handed to it, not yet stored: decisions_waiting_bytes of the loop's
	 * context, which copies on threads point to (updated atomically) */
	size_t *decisions_waiting;
	size_t decisions_waiting_bytes;
	uint32_t max_frame_bytes;
	struct profiler *profiler;
	/* The manifest regions of the request being answered, left in its frame (decode.h:
	 * decode_request_lean); NULL when they are in the request. */
	struct decode_regions *regions;
	/* The fleet catalogue (catalogue.h), or NULL without one. */
	struct catalogue *catalogue;
	/* Answered off the event loop (the transport's work thread): it may wait for the
	 * catalogue. */
	bool may_block;
	/* Set by a model load that replaced a model, or a removal: the id of the model gone (the
	 * transport tells the profiler, whose jobs of it are cancelled); 0 none. */
	int64_t model_gone;
	/* Set by a handler whose answer may be sent again to the same request while nothing it
	 * depends on changed (answers.h): read from the store, or computed from the configuration
	 * alone.  Reset by the thread before each request. */
	bool answer_reusable;
	/* Grows on the loop when something answers depend on changes outside the store (a reload,
	 * a new B_cpu): the answers kept in memory are of the past (answers.h). */
	uint64_t answers_epoch;
	/* Status's bytes that change only with answers_epoch (status_rpc.c); the loop's alone: NULL
	 * in the copies the threads answer in (and when out of memory: then packed whole each time). */
	struct status_cache *status_cache;
};

/* What the transport knows about the peer of a request. */
struct rpc_peer {
	struct ucred cred;
	bool hello_done;
	char name[65];
	int passed_fd;  /* descriptor that came with the request, -1; a handler keeping it sets -1 */
	struct insitu *insitu; /* in-situ samples of this connection (profile.c), or NULL */
};

/*
 * Work too long for the event loop (a calibration sweep), or that reads the store, which the
 * loop never does (a profile run's row).  run(s, data) is called on a work thread with that
 * thread's own connection s, to read; it may use only data and s (no context or connection).
 * finish(data, next) is called on the event loop afterwards and returns the response (NULL when
 * out of memory), or NULL having handed the request's next part to next (reply_defer(next,
 * ...)): the connection waits for that part in turn, and this part's release() is not called
 * (the next part's is, and may free data).  release() frees data, whether finish() was called
 * or not (the connection may have closed meanwhile).
 * Or, instead of run, a change to store (write, store.h): the transport's writer makes it, and
 * write.done() is called on the event loop once it is on disk (or failed), before finish(), so
 * that the answer says stored only what is.  With defer NULL every part is done at once, run()
 * with store and a write on store.
 */
struct rpc_deferred {
	void (*run)(struct store *s, void *data);
	struct store_write write;
	struct store *store;
	Pim__Response *(*finish)(void *data, struct rpc_deferred *next);
	void (*release)(void *data);
	void *data;
};

/* Stores a placement answer (store_decision_put: packed, len bytes, taken over) for the next
 * identical query without waiting for it: by ctx's writer, or, without one, when the store's
 * waiting changes are settled (store_write_settle).  It is a
 * cache: a failure is logged, and while REPLY_DECISIONS_WAITING_MAX bytes of answers wait for
 * the writer already, it is not stored. */
#define REPLY_DECISIONS_WAITING_MAX (16u << 20)
void reply_store_decision(struct rpc_context *ctx, int64_t model_id, const char *key, uint8_t *packed,
			  size_t len, const char *model);

/* For handlers (and finish(), for a next part): hands job to defer, or with defer NULL runs and
 * finishes it, and the parts it hands on, before returning (a write settled on job->store
 * first). */
Pim__Response *reply_defer(struct rpc_deferred *defer, const struct rpc_deferred *job);

/* A Response being built.  Allocation failures are remembered (oom) and answered once, at the
 * end: a handler fills what it has and checks nothing but the pointers it writes through. */
struct reply {
	Pim__Response *resp;
	uint64_t id;
	bool oom;
};

/* Starts the response to request id with an empty body of kind body (a message field of
 * Response's oneof), attached; returns the body, NULL when out of memory. */
void *reply_start(struct reply *b, uint64_t id, Pim__Response__BodyCase body);
/* The response, or NULL (everything built freed) when an allocation failed. */
Pim__Response *reply_finish(struct reply *b);
/* Frees everything built and answers err instead (NULL when out of memory). */
Pim__Response *reply_fail(struct reply *b, const struct pim_error *err);

/* Allocations for the tree: attach each at once (a field, or an entry of a counted array). */
void *reply_message(struct reply *b, const ProtobufCMessageDescriptor *d); /* initialised */
void *reply_calloc(struct reply *b, size_t n, size_t size);
char *reply_strdup(struct reply *b, const char *s); /* NULL is the empty string */
char *reply_printf(struct reply *b, const char *fmt, ...) _printf_(2, 3);
/* Appends a formatted string to a repeated string field (v, n). */
void reply_append(struct reply *b, char ***v, size_t *n, const char *fmt, ...) _printf_(4, 5);

/* A response whose body (of kind body) is msg, a message built elsewhere (a stored or cached
 * answer), which it takes: msg is freed when out of memory. */
Pim__Response *reply_wrap(uint64_t id, Pim__Response__BodyCase body, void *msg);

/* Attaches at *at B_cpu as answers use it and how it was measured (pim.proto BandwidthProbe):
 * requested (> 0: a query's own value), else configured, else measured on this platform, else
 * the paper's. */
void reply_b_cpu(struct reply *b, Pim__BandwidthProbe **at, const struct rpc_context *ctx, double requested);
/* The same into m (initialised), its strings borrowed from ctx and constants. */
void reply_b_cpu_fill(Pim__BandwidthProbe *m, const struct rpc_context *ctx, double requested);

/* A response carrying only an Error. */
Pim__Response *reply_error(uint64_t id, Pim__ErrorCode code, const char *fmt, ...) _printf_(3, 4);
/* A response carrying the error in err (its code mapped with reply_code_from_errno). */
Pim__Response *reply_error_from(uint64_t id, const struct pim_error *err);
/* Maps a negative errno from the store or validators to a protocol error code. */
Pim__ErrorCode reply_code_from_errno(int e);

#endif
