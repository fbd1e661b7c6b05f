/* SPDX-License-Identifier: MIT */
/*
 * status_rpc.h: the daemon's own state as requests ask for it: Status, the most frequent
 * request, whose answer is read and written on the wire by hand (wire.h) and packed straight
 * into the connection's buffer by the transport, and ProbeBandwidth, B_cpu measured again on
 * the work thread.
 */
#ifndef PIMD_STATUS_RPC_H
#define PIMD_STATUS_RPC_H

#include "reply.h"

/*
 * The Status a connection that said Hello is answered with, packed as a Response of id into out
 * when its size (returned) is at most cap, as protobuf-c packs it.  Written by hand (wire.h):
 * the fields that change only with answers_epoch are kept packed (ctx->status_cache, built
 * again at the first Status after it changes); the counters are written each time.  Nothing is
 * allocated but that cache.  The transport answers Status with it (now: the event loop's time,
 * loop_now, for the uptime); status_rpc_status's answer is the same message.
 */
size_t status_rpc_pack(struct rpc_context *ctx, uint64_t id, uint64_t now, uint8_t *out, size_t cap);

/* Status as a Response (rpc_handle's answer to it). */
Pim__Response *status_rpc_status(struct rpc_context *ctx, const Pim__Request *req);
/* ProbeBandwidth: root or pimd's own user only; the probe (about a second) runs through defer. */
Pim__Response *status_rpc_probe_bandwidth(struct rpc_context *ctx, struct rpc_peer *peer,
					  const Pim__Request *req, struct rpc_deferred *defer);

/* ctx->status_cache: empty (built at the first Status), and freed. */
struct status_cache *status_cache_new(void);
void status_cache_free(struct status_cache *c);

#endif
