/* SPDX-License-Identifier: MIT */
#include "dispatch.h"

/*
 * THE table: for each request kind, the thread that answers it and what it may touch there.
 * A kind added to pim.proto's Request needs a row here (tests/unit/test_reply.c checks every
 * field of the oneof against it).
 */
static const struct dispatch_rule table[] = {
	{ PIM__REQUEST__BODY_HELLO, "hello", DISPATCH_LOOP, DISPATCH_MEMORY },
	/* the model count is kept in memory (rpc_context.models); read on the wire
	 * (decode_status_request) and written by hand straight into the connection's output buffer
	 * (status_rpc_pack, wire.h) */
	{ PIM__REQUEST__BODY_STATUS, "status", DISPATCH_LOOP, DISPATCH_MEMORY | DISPATCH_PROFILER_STATE },
	{ PIM__REQUEST__BODY_MODEL_LOAD, "model_load", DISPATCH_WRITER, DISPATCH_STORE_WRITE },
	{ PIM__REQUEST__BODY_MODEL_LIST, "model_list", DISPATCH_WORK, DISPATCH_STORE_READ | DISPATCH_ANSWER_KEPT },
	{ PIM__REQUEST__BODY_MODEL_SHOW, "model_show", DISPATCH_WORK, DISPATCH_STORE_READ | DISPATCH_ANSWER_KEPT },
	{ PIM__REQUEST__BODY_MODEL_REMOVE, "model_remove", DISPATCH_WRITER, DISPATCH_STORE_WRITE },
	/* a placement answer is stored for the next identical query by the writer (a cache); one
	 * read from there is also kept on the loop (answers.h), as are a model's, a list's,
	 * stored decisions and JIT-Q plans */
	{ PIM__REQUEST__BODY_PLACEMENT, "placement", DISPATCH_WORK, DISPATCH_STORE_READ | DISPATCH_ANSWER_KEPT },
	{ PIM__REQUEST__BODY_IMPORT_PERF, "import_perf", DISPATCH_WRITER, DISPATCH_STORE_WRITE },
	{ PIM__REQUEST__BODY_CALIBRATE, "calibrate", DISPATCH_WORK, DISPATCH_STORE_READ },
	{ PIM__REQUEST__BODY_DECISIONS, "decisions", DISPATCH_WORK, DISPATCH_STORE_READ | DISPATCH_ANSWER_KEPT },
	{ PIM__REQUEST__BODY_JITQ_PLAN, "jitq_plan", DISPATCH_WORK, DISPATCH_MEMORY | DISPATCH_ANSWER_KEPT },
	{ PIM__REQUEST__BODY_JITQ_QUANTIZE, "jitq_quantize", DISPATCH_WORK, DISPATCH_MEMORY },
	/* takes the descriptor of the model library; the model is read on a work thread, the run's
	 * row stored (and read back) by the writer */
	{ PIM__REQUEST__BODY_PROFILE, "profile", DISPATCH_PROFILER, DISPATCH_PROFILER_STATE },
	/* the run's row is read on a work thread */
	{ PIM__REQUEST__BODY_PROFILE_STATUS, "profile_status", DISPATCH_PROFILER, DISPATCH_PROFILER_STATE },
	/* a connection's first batch reads its model on a work thread */
	{ PIM__REQUEST__BODY_SAMPLE_BATCH, "sample_batch", DISPATCH_PROFILER, DISPATCH_PROFILER_STATE },
	{ PIM__REQUEST__BODY_JITQ_DEQUANTIZE, "jitq_dequantize", DISPATCH_WORK, DISPATCH_MEMORY },
	/* the probe runs on a work thread; B_cpu is taken on the loop, and stored by the writer */
	{ PIM__REQUEST__BODY_PROBE_BANDWIDTH, "probe_bandwidth", DISPATCH_LOOP, DISPATCH_MEMORY },
	/* the run's row, for the answer, is read on a work thread */
	{ PIM__REQUEST__BODY_PROFILE_CANCEL, "profile_cancel", DISPATCH_PROFILER, DISPATCH_PROFILER_STATE },
	{ PIM__REQUEST__BODY_CATALOGUE_STATUS, "catalogue_status", DISPATCH_LOOP, DISPATCH_MEMORY },
	/* waits for PostgreSQL */
	{ PIM__REQUEST__BODY_CATALOGUE_LIST, "catalogue_list", DISPATCH_WORK, DISPATCH_MEMORY },
};

const struct dispatch_rule *dispatch_rule(Pim__Request__BodyCase kind)
{
	for (size_t i = 0; i < sizeof table / sizeof *table; i++)
		if (table[i].kind == kind)
			return &table[i];
	return NULL;
}

const struct dispatch_rule *dispatch_table(size_t *n)
{
	*n = sizeof table / sizeof *table;
	return table;
}

enum dispatch_thread dispatch_where(const Pim__Request *req, size_t n_regions)
{
	const struct dispatch_rule *r = dispatch_rule(req->body_case);

	if (!r)
		return DISPATCH_LOOP; /* ERROR_UNIMPLEMENTED */
	if (req->body_case == PIM__REQUEST__BODY_MODEL_LOAD && req->model_load->manifest &&
	    (req->model_load->manifest->n_regions > DISPATCH_WRITER_MAX_REGIONS ||
	     n_regions > DISPATCH_WRITER_MAX_REGIONS))
		return DISPATCH_WORK;
	return r->thread;
}
