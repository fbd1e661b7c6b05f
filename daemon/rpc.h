/* SPDX-License-Identifier: MIT */
/*
 * rpc.h: answers one decoded Request.  The transport (server.c) owns connections and frames,
 * and answers each request on the thread dispatch.h's table names; this module calls the
 * request's handler (here for the session and the models,
 * placement_rpc.c, jitq_rpc.c, profile.c), which builds its answer with reply.h.  The models
 * cross between pim.proto and the store's own structs (store.h) here, and nowhere else.
 */
#ifndef PIMD_RPC_H
#define PIMD_RPC_H

#include "config.h"
#include "manifest.h"
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
/* Frees what rpc_context_init allocated (the context itself is the caller's). */
void rpc_context_release(struct rpc_context *ctx);
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

/*
 * The one model whose rows a request reads or changes, by name, when it touches no other stored
 * state (model_show, placement, decisions, model_load, model_remove; answers.h,
 * store_commit_scope); NULL for any other request, or one without a name.
 */
const char *rpc_request_model(const Pim__Request *req);

/* The connection of peer is closing: finish what it left open (in-situ runs). */
void rpc_peer_closed(struct rpc_context *ctx, struct rpc_peer *peer);

/*
 * Models between pim.proto and the store's own structs (store.h): the protocol stops here.
 * Unknown enum values become the UNSPECIFIED one (a validated manifest has none).
 */
enum store_alloc_kind rpc_alloc_kind_from_wire(Pim__AllocKind k);
Pim__AllocKind rpc_alloc_kind_to_wire(enum store_alloc_kind k);
enum store_operand_role rpc_role_from_wire(Pim__OperandRole r);
Pim__OperandRole rpc_role_to_wire(enum store_operand_role r);

/* An allocation and a summary as pim.proto's (w initialised here; strings borrowed). */
void rpc_allocation_to_wire(const struct store_allocation *a, Pim__Allocation *w);
void rpc_model_info_to_wire(const struct store_model_info *info, Pim__ModelSummary *w);

/*
 * Stores a validated manifest m as uid asks (store_model_put_each): its n_regions regions come
 * from region(ctx, i, err) one at a time (a frame's: decode_regions_get), each converted as it
 * comes, never all at once (region NULL: those of m); *replaced: the id of the model it
 * replaced, 0 when none.  rpc_model_put: those of m, *replaced whether it replaced one.
 */
int rpc_model_put_each(struct store *s, const Pim__Manifest *m, size_t n_regions,
		       const Pim__Region *(*region)(void *ctx, size_t i, struct pim_error *err), void *ctx,
		       uid_t uid, bool replace, int64_t *replaced, struct store_model_info *info,
		       struct pim_error *err);
int rpc_model_put(struct store *s, const Pim__Manifest *m, uid_t uid, bool replace, bool *replaced,
		  struct store_model_info *info, struct pim_error *err);

/*
 * A region of store_model_walk as a Pim__Region, with room for its extents and operands:
 * rpc_region_msg_start with the region (its strings left to the caller), then
 * rpc_region_msg_operand with each of its operands (the operand added, its elem_type left to
 * the caller; NULL past MANIFEST_OPERANDS_MAX).
 */
struct rpc_region_msg {
	Pim__Region g;
	uint64_t pe[MANIFEST_EXTENTS_MAX], re[MANIFEST_EXTENTS_MAX];
	Pim__Operand ops[MANIFEST_OPERANDS_MAX], *opp[MANIFEST_OPERANDS_MAX];
};
void rpc_region_msg_start(struct rpc_region_msg *m, const struct store_region *r);
Pim__Operand *rpc_region_msg_operand(struct rpc_region_msg *m, const struct store_operand *o);

#endif
