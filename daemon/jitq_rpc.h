/* SPDX-License-Identifier: MIT */
/*
 * jitq_rpc.h: the daemon side of JIT-Q: JitqPlan (the scheduler of jitq.c with the PIM cost of
 * pimsim.c), JitqQuantize (mx.c, or the PIM model checked against it) and JitqDequantize.
 */
#ifndef PIMD_JITQ_RPC_H
#define PIMD_JITQ_RPC_H

#include "reply.h"

Pim__Response *jitq_rpc_plan(struct rpc_context *ctx, const Pim__Request *req);
/* The quantization itself runs through defer (rpc_deferred): a tensor can take seconds. */
Pim__Response *jitq_rpc_quantize(struct rpc_context *ctx, const Pim__Request *req,
				 struct rpc_deferred *defer);
Pim__Response *jitq_rpc_dequantize(struct rpc_context *ctx, const Pim__Request *req,
				    struct rpc_deferred *defer);

/* The launches listed without per_block (a summary stays small for any model). */
#define JITQ_RPC_SUMMARY_LAUNCHES 64
/* KEY=VALUE settings one JitqPlan may carry. */
#define JITQ_RPC_SETTINGS_MAX 64u
/* Elements one JitqQuantize may run through the PIM model (a few hundred ms at most). */
#define JITQ_RPC_PIM_ELEMENTS_MAX (1u << 20)
/* Bytes a reply needs beside its payload (envelope, tags, lengths), kept free of max_frame_bytes. */
#define JITQ_RPC_REPLY_OVERHEAD 64

#endif
