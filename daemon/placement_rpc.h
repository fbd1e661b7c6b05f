/* SPDX-License-Identifier: MIT */
/*
 * placement_rpc.h: the daemon side of the placement engine: Placement, ImportPerf, Calibrate
 * and Decisions requests.  Loads manifests and metrics from the store, runs the pure modules
 * (placement.c, calibrate.c, perfcsv.c) and turns their results into protocol messages.
 */
#ifndef PIMD_PLACEMENT_RPC_H
#define PIMD_PLACEMENT_RPC_H

#include "reply.h"
#include "store.h"

Pim__Response *placement_rpc_placement(struct rpc_context *ctx, const Pim__Request *req);
Pim__Response *placement_rpc_import_perf(struct rpc_context *ctx, const struct rpc_peer *peer,
					 const Pim__Request *req);
/* The sweep itself runs through defer (rpc_deferred): it can take seconds on a large model. */
Pim__Response *placement_rpc_calibrate(struct rpc_context *ctx, const Pim__Request *req,
				       struct rpc_deferred *defer);
Pim__Response *placement_rpc_decisions(struct rpc_context *ctx, const Pim__Request *req);

/* This host's B_cpu as queries use it: configured, else measured, else the paper's. */
double placement_rpc_host_b_cpu(const struct rpc_context *ctx);

/* metrics_rpc.c: a region's metrics as the store keeps them, into pim.RegionMetrics (w initialised; its
 * strings borrowed from m), and back. */
void placement_rpc_metrics_to_wire(const struct store_metrics *m, Pim__RegionMetrics *w);
void placement_rpc_metrics_from_wire(const Pim__RegionMetrics *w, struct store_metrics *m);
/* The metrics of a model on a platform as pim.RegionMetrics (ModelShowReply.metrics): each one
 * and its strings allocated, to free with pim__region_metrics__free_unpacked and the array with
 * free(). */
int placement_rpc_metrics_list(struct store *s, int64_t model_id, int64_t platform_id,
			       Pim__RegionMetrics ***out, size_t *n, struct pim_error *err);

/* Limits on what a request may ask for. */
#define PLACEMENT_MAX_CORE_COUNTS 16
#define PLACEMENT_MAX_SIGMAS 16
/* Largest B_cpu an import may carry, B/s (far above any memory system). */
#define PLACEMENT_MAX_B_CPU 1e15
#define PLACEMENT_DECISIONS_MAX_ID (16u * 1024u * 1024u) /* bitmap of at most 2 MiB */

#endif
