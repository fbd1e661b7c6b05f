/* SPDX-License-Identifier: MIT */
/*
 * answers.h: answers kept in memory on the event loop, so that a read asked again (the same
 * model shown, the same placement, decisions or JIT-Q plan) is answered there, from bytes,
 * without a work thread, SQLite or protobuf.
 *
 * An answer is kept under its request's bytes without the request's id (field 1 of Request),
 * as the bytes of its Response without the id (field 1 of Response); it is sent again with the
 * id of the request that asks.  Which kinds may be kept is dispatch.c's table
 * (DISPATCH_ANSWER_KEPT); whether one answer may be is said by its handler
 * (rpc_context.answer_reusable): only what is read from the store, or computed from the
 * configuration alone, never an error.
 *
 * What is kept is of one version: a number that grows whenever anything an answer depends on
 * may have changed (the store's commits, store_changes; a reload or a new B_cpu on the loop,
 * rpc_context.answers_epoch).  The version is taken when a request is handed to its thread; its
 * answer is kept only when the version is the same when it comes back, so an answer read before
 * a change committed is never kept for after it.  Anything kept under an older version is
 * dropped at the next lookup.  A full cache is emptied (answers_put).
 *
 * Plain C: no I/O, no protobuf (the few bytes of the wire format it needs are here).
 */
#ifndef PIMD_ANSWERS_H
#define PIMD_ANSWERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Defaults: at most this many answers and bytes kept (keys and answers together). */
#define ANSWERS_MAX_ENTRIES 512u
#define ANSWERS_MAX_BYTES (32u << 20)
/* A request longer than this is not a key (it is answered on its thread each time). */
#define ANSWERS_MAX_KEY 4096u

struct answers;

struct answers_stats {
	uint64_t hits, misses; /* lookups */
	uint64_t kept;         /* answers put */
	uint64_t refused;      /* put under a version gone by, or too large */
	uint64_t emptied;      /* times the cache was emptied: a new version, or full */
	unsigned entries;
	size_t bytes;
};

/* NULL when out of memory; limits of 0 take the defaults. */
struct answers *answers_new(unsigned max_entries, size_t max_bytes);
void answers_free(struct answers *a);

/*
 * The key of a request (a frame's payload of len bytes): the bytes after its id field when it
 * leads (as every encoder that writes fields in order puts it), else all of them.  false when
 * the payload is longer than ANSWERS_MAX_KEY or its leading id is not a whole varint.
 */
bool answers_key(const uint8_t *payload, size_t len, const uint8_t **key, size_t *klen);

/* The answer kept under key at version, or NULL; *n its bytes (the Response without its id). */
const uint8_t *answers_get(struct answers *a, const uint8_t *key, size_t klen, uint64_t version, size_t *n);

/*
 * Keeps resp (a packed Response of n bytes, with or without its id) under key, asked at version
 * asked; now is the version at this moment.  Refused (false) when the two differ, the Response
 * does not begin as one, or it is larger than a quarter of the cache; a cache that would go
 * over its limits is emptied first.
 */
bool answers_put(struct answers *a, const uint8_t *key, size_t klen, uint64_t asked, uint64_t now,
		 const uint8_t *resp, size_t n);

/* Bytes of a Response of body (n bytes, from answers_get) with id; answers_write writes them. */
size_t answers_size(uint64_t id, size_t n);
void answers_write(uint8_t *out, uint64_t id, const uint8_t *body, size_t n);

void answers_stats(const struct answers *a, struct answers_stats *st);

#endif
