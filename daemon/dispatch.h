/* SPDX-License-Identifier: MIT */
/*
 * dispatch.h: which thread answers each kind of request, and what it may touch there.  The one
 * table behind it (dispatch.c) is the only place that decides; the transport (server.c) reads
 * it for every decoded frame, and the threads beside the loop (threads.c) read it again when
 * they decode a large frame themselves.
 *
 * The event loop never queries SQLite: a request that reads the store is answered on a work
 * thread (with that thread's own connection), one that writes it on the writer thread, and
 * the loop answers only from memory (the session, Status, the fleet catalogue's state) or
 * hands the request to the profiler, whose jobs and turns live on the loop; what the
 * profiler's requests read of the store is read on a work thread in turn (rpc_deferred), and
 * the answer finished on the loop.  No row of the loop or the profiler has
 * DISPATCH_STORE_READ (tests/unit/test_reply.c), and pimd counts any statement the loop runs
 * (store_guard_thread).  A read marked DISPATCH_ANSWER_KEPT whose answer the loop keeps
 * (answers.h) is answered on the loop from those bytes while nothing it depends on changed.
 */
#ifndef PIMD_DISPATCH_H
#define PIMD_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "pim.pb-c.h"

enum dispatch_thread {
	DISPATCH_LOOP,     /* the event loop: answers from memory, never the store */
	DISPATCH_WORK,     /* a work thread (threads.h): reads the store, or runs long */
	DISPATCH_WRITER,   /* the writer thread: writes the store, in groups (group commit) */
	DISPATCH_PROFILER, /* the profiler's state on the event loop (profile_rpc.c), never the
			    * store: its reads are handed to a work thread */
};

/* What the answering thread may touch (a mask). */
enum dispatch_access {
	DISPATCH_MEMORY = 0,           /* the context's counters and configuration only */
	DISPATCH_STORE_READ = 1 << 0,  /* read-only store queries (the thread's connection) */
	DISPATCH_STORE_WRITE = 1 << 1, /* changes to the store (the writer's connection) */
	DISPATCH_PROFILER_STATE = 1 << 2, /* the profiler's jobs; its changes go to the writer */
	/* not an access: its answer may be kept in memory on the loop and sent again to the same
	 * request (answers.h), when its handler says so and nothing changed meanwhile */
	DISPATCH_ANSWER_KEPT = 1 << 3,
};

struct dispatch_rule {
	Pim__Request__BodyCase kind;
	const char *name;          /* for the log and the tests: the oneof field's name */
	enum dispatch_thread thread;
	unsigned access;           /* enum dispatch_access */
};

/* The rule for a request kind; NULL for a kind this pimd does not know (answered on the loop
 * as ERROR_UNIMPLEMENTED). */
const struct dispatch_rule *dispatch_rule(Pim__Request__BodyCase kind);
/* The table itself, for the tests: *n rows. */
const struct dispatch_rule *dispatch_table(size_t *n);

/* A frame at least this large is decoded on a work thread (a manifest at the documented limit
 * takes a second to decode); it is answered where its rule says. */
#define DISPATCH_DECODE_OFF_LOOP_BYTES (1u << 20)
/* A model load of more regions than this is written on a work thread alone rather than by the
 * writer in a group: it takes seconds at the documented limit, which the other clients' small
 * changes would wait for. */
#define DISPATCH_WRITER_MAX_REGIONS 10000u

/*
 * Where req is answered: its rule's thread, except that a large model load goes to a work
 * thread (DISPATCH_WRITER_MAX_REGIONS; n_regions is the count of a manifest whose regions were
 * left in the frame, else 0).  Decided from the request alone: nothing is looked up.  A
 * descriptor that comes with a request is taken by the profiler's requests only.
 */
enum dispatch_thread dispatch_where(const Pim__Request *req, size_t n_regions);

#endif
