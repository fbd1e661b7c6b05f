/* SPDX-License-Identifier: MIT */
/*
 * placement_rpc.h: the daemon side of the placement engine: Placement, ImportPerf, Calibrate
 * and Decisions requests.  Loads manifests and metrics from the store, runs the pure modules
 * (placement.c, calibrate.c, perfcsv.c) and turns their results into protocol messages.
 */
#ifndef PIMD_PLACEMENT_RPC_H
#define PIMD_PLACEMENT_RPC_H

#include "reply.h"

Pim__Response *placement_rpc_placement(struct rpc_context *ctx, const Pim__Request *req);
Pim__Response *placement_rpc_import_perf(struct rpc_context *ctx, const struct rpc_peer *peer,
					 const Pim__Request *req);
/* The sweep itself runs through defer (rpc_deferred): it can take seconds on a large model. */
Pim__Response *placement_rpc_calibrate(struct rpc_context *ctx, const Pim__Request *req,
				       struct rpc_deferred *defer);
Pim__Response *placement_rpc_decisions(struct rpc_context *ctx, const Pim__Request *req);

/* Limits on what a request may ask for. */
#define PLACEMENT_MAX_CORE_COUNTS 16
#define PLACEMENT_MAX_SIGMAS 16
/* Largest B_cpu an import may carry, B/s (far above any memory system). */
#define PLACEMENT_MAX_B_CPU 1e15
#define PLACEMENT_DECISIONS_MAX_ID (16u * 1024u * 1024u) /* bitmap of at most 2 MiB */

#endif
