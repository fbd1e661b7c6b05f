/* SPDX-License-Identifier: MIT */
/*
 * rpc.h: answers one decoded Request.  The transport (server.c) owns connections and frames;
 * this module owns what each request means.
 */
#ifndef PIMD_RPC_H
#define PIMD_RPC_H

#include <sys/socket.h>

#include "pim.pb-c.h"
#include "placement.h"
#include "pimsim.h"
#include "platform.h"
#include "store.h"

struct profiler;

struct rpc_context {
	struct store *store;
	const struct platform *platform;      /* this host, as stored */
	const struct placement_params *params; /* configured placement parameters */
	const struct pimsim_params *pim;      /* HBM-PIM organisation and timing (JIT-Q) */
	bool pim_configured;                  /* pim comes from a pim_config file */
	uint64_t started_ns;
	uint64_t requests;      /* answered so far */
	unsigned clients;       /* open connections */
	uint32_t max_frame_bytes;
	pid_t pid;              /* of pimd, after detaching */
	struct profiler *profiler;
};

/* What the transport knows about the peer of a request. */
struct rpc_peer {
	struct ucred cred;
	bool hello_done;
	char name[65];
	int passed_fd;  /* descriptor that came with the request, -1; a handler keeping it sets -1 */
	struct insitu *insitu; /* in-situ samples of this connection (profile.c), or NULL */
};

enum rpc_after {
	RPC_KEEP,   /* keep serving the connection */
	RPC_CLOSE,  /* send the response, then close (protocol violation) */
};

/*
 * Work too long for the event loop (a calibration sweep).  run() is called on another thread
 * and may use only data (no store, context or connection); finish() is called on the event
 * loop afterwards and returns the response (NULL when out of memory); release() frees data,
 * whether finish() was called or not (the connection may have closed meanwhile).
 */
struct rpc_deferred {
	void (*run)(void *data);
	Pim__Response *(*finish)(void *data);
	void (*release)(void *data);
	void *data;
};

/*
 * Builds the response to req.  The response and everything it points to is heap-allocated;
 * free it with pim__response__free_unpacked(resp, NULL).  Returns NULL when out of memory, or
 * when the handler handed its work to *defer (then defer->run is set; see rpc_deferred); with
 * defer NULL the work is done before returning.
 */
Pim__Response *rpc_handle(struct rpc_context *ctx, struct rpc_peer *peer, const Pim__Request *req,
			  enum rpc_after *after, struct rpc_deferred *defer);

/* For handlers: hands job to defer, or with defer NULL runs and finishes it at once. */
Pim__Response *rpc_defer(struct rpc_deferred *defer, const struct rpc_deferred *job);

/* Building a response tree: allocation failures are remembered and checked once at the end
 * (free the partial tree with its free_unpacked function). */
struct rpc_builder {
	bool oom;
};
void *rpc_calloc(struct rpc_builder *b, size_t n, size_t size);
char *rpc_strdup(struct rpc_builder *b, const char *s);
/* Appends a formatted string to a repeated string field (v, n). */
void rpc_append(struct rpc_builder *b, char ***v, size_t *n, const char *fmt, ...) _printf_(4, 5);

/* The connection of peer is closing: finish what it left open (in-situ runs). */
void rpc_peer_closed(struct rpc_context *ctx, struct rpc_peer *peer);

/* A response carrying only an Error. */
Pim__Response *rpc_error_response(uint64_t id, Pim__ErrorCode code, const char *fmt, ...)
	_printf_(3, 4);

/*
 * Checks every string field of a serialized message of type d, at any depth, on the wire,
 * against the rules all strings share (util.h, text_check_n): UTF-8 without NUL.  protobuf-c
 * checks neither, and hands a string over NUL-terminated, so "nul\0evil" would reach the
 * handlers as "nul".  -EINVAL naming the field ("model_load.manifest.regions[2].name: invalid
 * UTF-8 at byte 3"), -EPROTO if the bytes are not a message.  Control characters are each
 * field's own business (manifest.c, the name rules).
 */
int rpc_check_strings(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t len,
		      struct pim_error *err);

/* Maps a negative errno from the store or validators to a protocol error code. */
Pim__ErrorCode rpc_code_from_errno(int e);
/* A response carrying the error in err (its code mapped with rpc_code_from_errno). */
Pim__Response *rpc_error_from(uint64_t id, const struct pim_error *err);
/* An empty response with this id (body to be set by the caller); NULL when out of memory. */
Pim__Response *rpc_response_new(uint64_t id);

#endif
