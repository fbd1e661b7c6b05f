/* SPDX-License-Identifier: MIT */
/*
 * threads.h: the threads beside the event loop, and group commit.  Which request goes where is
 * dispatch.h's table; this module runs what the transport (server.c) hands it there:
 *
 *   - the work threads (THREADS_WORK_N of them, each with its own connection to the store)
 *     answer the requests that read the store, decode large frames, and run the deferred parts
 *     of requests too long for the loop (a calibration sweep, a B_cpu probe, a quantization)
 *     or that read the store for a request answered on the loop (the profiler's: a job's model,
 *     a run's row), with that thread's connection;
 *   - the writer thread answers the requests that change the store and makes the changes pimd
 *     makes itself (profiling samples and runs, in-situ batches, stored answers: threads_writer),
 *     all that is queued meanwhile in one transaction with one fsync (group commit); it runs
 *     at a nice value below the event loop's, the work threads at pimd's own (priority.h).
 *
 * Everything handed over comes back on the event loop, in the order it finished, through the
 * transport's finished() hook; a store_write's done() is called there before, never inside the
 * call that handed it over.
 */
#ifndef PIMD_THREADS_H
#define PIMD_THREADS_H

#include "decode.h"
#include "dispatch.h"
#include "loop.h"
#include "rpc.h"

/* Work threads, each with its own store connection; one may run a long job while the others
 * answer reads. */
#define THREADS_WORK_N 3
/* Changes written together by the writer thread (group commit), at most. */
#define THREADS_WRITE_GROUP_MAX 64

/* A frame decoded, with what its strings' check found. */
struct decoded {
	uint32_t len;           /* of the frame */
	int k;                  /* decode_request's result */
	Pim__Request *req;      /* allocated from budget */
	struct decode_budget budget;
	struct pim_error err;
	bool bad_text;
	struct pim_error text_err;
};
/* Decodes a frame and checks its strings: as far as pimd goes without its connection.  With
 * regions not NULL, a manifest's regions are left in the frame (decode_request_lean). */
void decoded_init(struct decoded *d, const uint8_t *payload, uint32_t len, bool hello_done,
		  struct decode_regions *regions);
void decoded_free(struct decoded *d);

/* A request answered on a thread as a whole, with copies of what it reads of the context; its
 * frame is decoded there.  One that must be answered on the event loop after all (dispatch.h)
 * comes back decoded (answered false). */
struct frame_job {
	uint8_t *payload;
	uint32_t len;
	struct rpc_peer peer;   /* a copy, without descriptor or in-situ state */
	struct rpc_context ctx; /* a copy, with the thread's store and the copies below */
	struct placement_params params;
	struct pimsim_params pim;
	struct platform platform; /* B_cpu may be measured again on the loop meanwhile */
	struct decoded d;
	struct decode_regions regions; /* of a manifest, left in payload */
	bool decoded;           /* d was decoded on the loop already */
	bool answered;          /* the answer below is set; else d goes back to the loop */
	bool model_change;      /* a load or removal: the models stored changed by models_delta */
	int models_delta;
	int64_t model_gone;     /* the id of the model it removed or replaced (0: none) */
	bool model_replaced;    /* (by a load) */
	Pim__Response *resp;    /* or, packed on the thread behind FRAME_HEADER_BYTES of room: */
	uint8_t *packed;
	size_t packed_len;
	uint64_t resp_id;
	enum rpc_after after;
	bool reusable;          /* the answer may be sent again (rpc_context.answer_reusable; no error) */
	/* the transport's: the request's key and the version it was asked at (answers.h), and
	 * what that version is made of (the store or not, which model: in keep_key's block); freed
	 * with the job */
	uint8_t *keep_key;
	size_t keep_klen;
	uint64_t keep_version;
	bool keep_store;
	const char *keep_model;
};

/* Something handed to a thread: a deferred part of a request (job.run on a work thread, or
 * job.write on the writer), a whole frame (frame), or a change pimd makes itself (job.write
 * alone, owner NULL). */
struct work {
	struct work *next;
	void *owner;               /* the transport's connection waiting for it; NULL: nobody */
	size_t charge;             /* the transport's: bytes it holds against a budget */
	struct rpc_deferred job;
	struct frame_job *frame;
	int write_r;               /* job.write's outcome, with the group's */
	struct pim_error write_err;
	unsigned busy_timeout_ms;  /* job.write waits this long for the write lock */
	bool big;                  /* a large frame: the thread's heap is trimmed after it */
	bool dropped;              /* not answered: the threads stopped (a write's done() was told) */
};

struct threads;

/* ctx: the loop's request context, of which frame jobs get copies (and whose store is opened
 * again for each thread); finished(data, w) is called on the loop for each work done, in order
 * (w->owner NULL: nobody waits; a write's done() was called before); it gives w back with
 * threads_release.  models(data, w), when not NULL, is called first for each frame of those
 * that changed the models (w->frame->model_change), before any of them is finished: what
 * depends on a model gone learns it before anything done with the change goes on. */
int threads_new(struct loop *loop, struct rpc_context *ctx, unsigned busy_timeout_ms,
		void (*finished)(void *data, struct work *w), void (*models)(void *data, struct work *w),
		void *data, struct threads **out);
/* Stops the threads: the writer after what it was given (pimd's own changes have nobody to ask
 * for them again), the work threads after the jobs they run; what was not done is dropped, a
 * change's done() told its outcome. */
void threads_free(struct threads *th);
void threads_set_busy_timeout(struct threads *th, unsigned busy_timeout_ms);

/* Hands a whole frame (payload of len bytes, taken over also on failure) of a connection
 * (owner, whose peer is copied) to where (DISPATCH_WORK or DISPATCH_WRITER), decoded there, or
 * with d not NULL, decoded already: d is taken over (also on failure), and the payload is
 * freed; *out is the work (its charge is the caller's to set).  From the event loop. */
int threads_submit_frame(struct threads *th, enum dispatch_thread where, void *owner,
			 const struct rpc_peer *peer, uint8_t *payload, uint32_t len, struct decoded *d,
			 struct work **out);
/* Hands the deferred part of a request (rpc_deferred: run, or write) over; from the loop. */
int threads_submit_deferred(struct threads *th, void *owner, const struct rpc_deferred *job,
			    struct work **out);
/* The answer to request id that where could not take (why, when its store could not be
 * opened). */
Pim__Response *threads_refusal(const struct threads *th, enum dispatch_thread where, uint64_t id);
/* The connection waiting for w closed: its outcome is dropped when it comes. */
static inline void threads_disown(struct work *w) { w->owner = NULL; }
void threads_release(struct threads *th, struct work *w);

/* The writer as a store_writer (store_write_via), valid until threads_free: from the event
 * loop, or from a work thread (done() is called on the loop all the same). */
struct store_writer threads_writer(struct threads *th);

#endif
