/* SPDX-License-Identifier: MIT */
/*
 * rpc.h: answers one decoded Request.  The transport (server.c) owns connections and frames,
 * and answers each request on the thread dispatch.h's table names; this module calls the
 * request's handler (here for the session and the models,
 * placement_rpc.c, jitq_rpc.c, profile.c), which builds its answer with reply.h.
 */
#ifndef PIMD_RPC_H
#define PIMD_RPC_H

#include "config.h"
#include "reply.h"

/*
 * The context requests are answered in: the store, this host, the configuration cfg (which
 * must outlive ctx: the placement parameters are read from it), the HBM-PIM model and the
 * profiler.  pimd and the fuzz harness build it here alike, before the event loop runs (the
 * model count is read from the store here, once).
 */
void rpc_context_init(struct rpc_context *ctx, struct store *store, struct platform *platform,
		      const struct config *cfg, const struct pimsim_params *pim,
		      struct profiler *profiler);
/* Takes the reloadable settings of cfg: placement parameters, max_frame_bytes, pim_config. */
void rpc_context_apply_config(struct rpc_context *ctx, const struct config *cfg);

enum rpc_after {
	RPC_KEEP,   /* keep serving the connection */
	RPC_CLOSE,  /* send the response, then close (protocol violation) */
};

/*
 * Builds the response to req.  The response and everything it points to is heap-allocated;
 * free it with pim__response__free_unpacked(resp, NULL).  Returns NULL when out of memory, or
 * when the handler handed its work to *defer (then defer->run is set; see rpc_deferred); with
 * defer NULL the work is done before returning.
 */
Pim__Response *rpc_handle(struct rpc_context *ctx, struct rpc_peer *peer, const Pim__Request *req,
			  enum rpc_after *after, struct rpc_deferred *defer);

/*
 * A request whose answer is packed as it is read rather than built first (model_show: a
 * manifest of a million regions is ten times larger as protobuf-c structures than packed):
 * 1 and the frame in *frame (FRAME_HEADER_BYTES of room, then *len bytes of Response; free()),
 * or 0 when rpc_handle is to answer it (another request, an error to report).
 */
int rpc_handle_packed(struct rpc_context *ctx, struct rpc_peer *peer, const Pim__Request *req, uint8_t **frame,
		      size_t *len);

/* The connection of peer is closing: finish what it left open (in-situ runs). */
void rpc_peer_closed(struct rpc_context *ctx, struct rpc_peer *peer);

#endif
