/* SPDX-License-Identifier: MIT */
#include "jitq_rpc.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "jitq.h"
#include "log.h"
#include "mx.h"
#include "mx_ocp.h"
#include "pimsim.h"


static Pim__JitqLaunch *launch_msg(struct reply *b, const struct jitq_launch *l)
{
	Pim__JitqLaunch *m = reply_message(b, &pim__jitq_launch__descriptor);
	if (!m)
		return NULL;
	m->block = l->block;
	m->boundary = l->boundary;
	m->phase = reply_strdup(b, jitq_phase_name((enum jitq_phase)l->phase));
	m->tensor = reply_strdup(b, jitq_tensor_name((enum jitq_tensor)l->tensor));
	m->direction = reply_strdup(b, jitq_dir_name((enum mx_dir)l->dir));
	m->rows = l->rows;
	m->cols = l->cols;
	m->bytes = l->bytes;
	m->pim_s = l->pim_s;
	m->chan_first = l->chan_first;
	m->chan_count = l->chan_count;
	return m;
}

static Pim__JitqPhase *phase_msg(struct reply *b, const struct jitq_plan *p, enum jitq_phase ph,
				 bool per_block)
{
	const struct jitq_phase_plan *pp = &p->phase[ph];
	Pim__JitqPhase *m = reply_message(b, &pim__jitq_phase__descriptor);
	if (!m)
		return NULL;
	m->phase = reply_strdup(b, jitq_phase_name(ph));
	m->lookahead = pp->lookahead;
	m->accel_s = pp->accel_s;
	m->pim_s = pp->pim_s;
	m->stall_s = pp->stall_s;
	m->pim_bound = pp->pim_bound;
	m->overlap_s = pp->overlap_s;
	m->slack_min = pp->slack_min;
	m->slack_median = pp->slack_median;
	m->resident_bytes = pp->resident_bytes;
	size_t n = per_block ? pp->n_launches
			     : (pp->n_launches < JITQ_RPC_SUMMARY_LAUNCHES ? pp->n_launches
									   : JITQ_RPC_SUMMARY_LAUNCHES);
	m->launches = reply_calloc(b, n, sizeof *m->launches);
	for (size_t i = 0; m->launches && i < n && !b->oom; i++) {
		Pim__JitqLaunch *l = launch_msg(b, &pp->launches[i]);
		if (l)
			m->launches[m->n_launches++] = l;
	}
	if (per_block) {
		uint32_t layers = p->layers;
		m->blocks = reply_calloc(b, layers, sizeof *m->blocks);
		for (uint32_t i = 0; m->blocks && i < layers && !b->oom; i++) {
			Pim__JitqBlock *k = reply_message(b, &pim__jitq_block__descriptor);
			if (!k)
				break;
			k->accel_s = pp->blocks[i].accel_s;
			k->pim_s = pp->blocks[i].pim_s;
			k->slack = pp->blocks[i].slack;
			k->stall_s = pp->blocks[i].stall_s;
			k->launch_s = pp->blocks[i].launch_s;
			k->ready_s = pp->blocks[i].ready_s;
			k->start_s = pp->blocks[i].start_s;
			m->blocks[m->n_blocks++] = k;
		}
	}
	return m;
}


static const char *act_name(enum jitq_act a)
{
	switch (a) {
	case JITQ_ACT_FULL: return "all activations kept (Korthikanti et al. 2022, no recomputation)";
	case JITQ_ACT_SELECTIVE: return "selective recomputation of attention (Korthikanti et al. 2022)";
	case JITQ_ACT_RECOMPUTE: return "full recomputation: only block inputs kept";
	default: return "activations not counted";
	}
}

/*
 * Recent plans, packed, by request.  A plan depends on nothing but its request and the PIM
 * organisation (pimsim_params, and whether pim_config gave it), and computing one runs the PIM
 * model over every quantization of a block (pimsim, a few milliseconds), while runtimes ask for
 * the same plan at every start.  Bounded: PLAN_CACHE_SLOTS answers of at most
 * PLAN_CACHE_REPLY_MAX bytes, for requests of at most PLAN_CACHE_REQUEST_MAX bytes; the oldest
 * goes first.  The lock lets any thread answer plans.
 */
#define PLAN_CACHE_SLOTS 16
#define PLAN_CACHE_REQUEST_MAX 4096
#define PLAN_CACHE_REPLY_MAX (256u << 10)

struct plan_cache_entry {
	uint8_t *request, *reply; /* packed JitqPlan and JitqPlanReply; NULL: empty slot */
	size_t request_len, reply_len;
	struct pimsim_params pim;
	bool pim_configured;
	double speedup[3]; /* pimd.conf's speedup_mx9/mx6/mx4 */
};

static struct {
	pthread_mutex_t lock;
	struct plan_cache_entry e[PLAN_CACHE_SLOTS];
	unsigned next; /* the slot replaced next */
} plan_cache = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The key of a request: its packed bytes in key (PLAN_CACHE_REQUEST_MAX), or 0 when too large. */
static size_t plan_cache_key(const Pim__JitqPlan *q, uint8_t *key)
{
	size_t n = pim__jitq_plan__get_packed_size(q);

	if (n > PLAN_CACHE_REQUEST_MAX)
		return 0;
	return pim__jitq_plan__pack(q, key);
}

static bool plan_cache_match(const struct plan_cache_entry *e, const uint8_t *key, size_t len,
			     const struct rpc_context *ctx)
{
	return e->request && e->request_len == len && memcmp(e->request, key, len) == 0 &&
	       e->pim_configured == ctx->pim_configured && memcmp(&e->pim, ctx->pim, sizeof e->pim) == 0 &&
	       memcmp(e->speedup, ctx->jitq_speedup, sizeof e->speedup) == 0;
}

/* The stored answer to the request with key, unpacked; NULL when there is none. */
static Pim__JitqPlanReply *plan_cache_get(const struct rpc_context *ctx, const uint8_t *key, size_t len)
{
	Pim__JitqPlanReply *r = NULL;

	pthread_mutex_lock(&plan_cache.lock);
	for (unsigned i = 0; i < PLAN_CACHE_SLOTS && !r; i++)
		if (plan_cache_match(&plan_cache.e[i], key, len, ctx))
			r = pim__jitq_plan_reply__unpack(NULL, plan_cache.e[i].reply_len, plan_cache.e[i].reply);
	pthread_mutex_unlock(&plan_cache.lock);
	return r;
}

/* Keeps an answer for the request with key; one that cannot be kept is simply computed again. */
static void plan_cache_put(const struct rpc_context *ctx, const uint8_t *key, size_t len,
			   const Pim__JitqPlanReply *r)
{
	size_t n = pim__jitq_plan_reply__get_packed_size(r);
	uint8_t *request = malloc(len ? len : 1), *reply = n <= PLAN_CACHE_REPLY_MAX ? malloc(n ? n : 1) : NULL;

	if (!request || !reply) {
		free(request);
		free(reply);
		return;
	}
	memcpy(request, key, len);
	pim__jitq_plan_reply__pack(r, reply);
	pthread_mutex_lock(&plan_cache.lock);
	struct plan_cache_entry *e = &plan_cache.e[plan_cache.next];
	plan_cache.next = (plan_cache.next + 1) % PLAN_CACHE_SLOTS;
	free(e->request);
	free(e->reply);
	*e = (struct plan_cache_entry){ request, reply, len, n, *ctx->pim, ctx->pim_configured,
					{ ctx->jitq_speedup[0], ctx->jitq_speedup[1], ctx->jitq_speedup[2] } };
	pthread_mutex_unlock(&plan_cache.lock);
}


/* What a JitqPlan asks for, in the terms of jitq.c and pimsim.c. */
struct plan_inputs {
	struct jitq_config cfg;
	struct pimsim_params pp;
	struct pimsim_cost cost; /* of pp: the inputs stay where they were built */
	bool paper;              /* the paper configuration under the settings */
};

/* The model: a preset, or a custom shape; the request's non-zero fields over either. */
static int plan_model(const Pim__JitqModel *qm, struct jitq_model *m, struct pim_error *err)
{
	if (!qm)
		return err_set(err, -EINVAL, "jitq plan: model is missing (a preset name or a custom shape)");
	if (qm->preset && *qm->preset) {
		if (jitq_model_preset(qm->preset, m) < 0) {
			char names[256] = "";
			for (size_t i = 0; jitq_model_preset_name(i); i++)
				snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
					 jitq_model_preset_name(i));
			return err_set(err, -EINVAL, "unknown model preset \"%.*s\" (known: %s)",
				       TEXT_ECHO(qm->preset, 64), names);
		}
	} else {
		/* A custom model starts from nothing but defaults that need no citation: micro-batch
		 * 1, no tensor slicing, sequence 2048, 64-wide heads, no embedding. */
		if (!qm->layers || !qm->hidden)
			return err_set(err, -EINVAL, "jitq plan: a custom model needs layers and hidden (or a preset)");
		memset(m, 0, sizeof *m);
		snprintf(m->name, sizeof m->name, "custom");
		m->batch = 1;
		m->tslice = 1;
		m->seq = 2048;
		m->heads = qm->hidden % 64 == 0 ? qm->hidden / 64 : 1;
	}
#define OVERRIDE(f)                                                                                \
	do {                                                                                       \
		if (qm->f)                                                                         \
			m->f = qm->f;                                                              \
	} while (0)
	OVERRIDE(layers);
	OVERRIDE(hidden);
	OVERRIDE(heads);
	OVERRIDE(seq);
	OVERRIDE(batch);
	OVERRIDE(tslice);
	OVERRIDE(vocab);
#undef OVERRIDE
	if (qm->pipeline)
		m->pstages = qm->pipeline;
	return 0;
}

/* The paper configuration if asked for, then the KEY=VALUE settings over it: the scheduler's
 * keys, else those of the HBM-PIM file.  *stacks_set: a setting named the stack count. */
static int plan_settings(const Pim__JitqPlan *q, struct plan_inputs *in, bool *stacks_set,
			 struct pim_error *err)
{
	if (q->config && *q->config && strcmp(q->config, "default") != 0) {
		if (strcmp(q->config, "paper") != 0)
			return err_set(err, -EINVAL, "config \"%.*s\" is not default or paper",
				       TEXT_ECHO(q->config, 32));
		in->paper = true;
		jitq_config_paper(&in->cfg);
		pimsim_params_paper(&in->pp);
	}
	if (q->n_settings > JITQ_RPC_SETTINGS_MAX)
		return err_set(err, -EINVAL, "%zu settings: at most %u", q->n_settings, JITQ_RPC_SETTINGS_MAX);
	for (size_t i = 0; i < q->n_settings; i++) {
		const char *kv = q->settings[i], *eq = strchr(kv, '=');
		char key[64];
		size_t kl = eq ? (size_t)(eq - kv) : 0;
		if (strlen(kv) > 127 || !eq || kl == 0 || kl >= sizeof key)
			return err_set(err, -EINVAL, "setting \"%.*s\": expected KEY=VALUE of at most 127 bytes",
				       TEXT_ECHO(kv, 40));
		memcpy(key, kv, kl);
		key[kl] = 0;
		for (size_t j = 0; j < i; j++)
			if (strncmp(q->settings[j], kv, kl + 1) == 0)
				return err_set(err, -EINVAL, "setting %s is given twice", key);
		int r = jitq_config_set(&in->cfg, key, eq + 1, err);
		if (r == -ENOENT) {
			/* Not the scheduler's: a key of the HBM-PIM file. */
			char line[160];
			snprintf(line, sizeof line, "%s = %s\n", key, eq + 1);
			r = pimsim_params_parse(&in->pp, line, strlen(line), "setting", err);
			*stacks_set = *stacks_set || strcmp(key, "stacks") == 0;
		}
		if (r < 0)
			return r;
	}
	return 0;
}

/* The formats, the accelerator and the PIM stacks of the request. */
static int plan_options(const struct rpc_context *ctx, const Pim__JitqPlan *q, bool stacks_set,
			struct plan_inputs *in, struct pim_error *err)
{
	struct jitq_config *cfg = &in->cfg;

	if (q->format && *q->format && mx_format_from_name(q->format, &cfg->fmt) < 0)
		return err_set(err, -EINVAL, "format \"%.*s\" is not one of mx9, mx6, mx4", TEXT_ECHO(q->format, 32));
	if (q->source && *q->source && jitq_src_from_name(q->source, &cfg->src) < 0)
		return err_set(err, -EINVAL, "source \"%.*s\" is not one of bf16, fp32", TEXT_ECHO(q->source, 32));
	if (q->mapping && *q->mapping && pimsim_mapping_from_name(q->mapping, &in->cost.mapping) < 0)
		return err_set(err, -EINVAL, "mapping \"%.*s\" is not one of tiled, strided, strided-opt",
			       TEXT_ECHO(q->mapping, 32));
	if (q->peak_flops < 0 || !isfinite(q->peak_flops) || q->efficiency < 0 || q->efficiency > 1 ||
	    !isfinite(q->efficiency))
		return err_set(err, -EINVAL, "peak_flops must be >= 0 and efficiency within [0, 1]");
	if (q->peak_flops)
		cfg->accel.peak_flops = q->peak_flops;
	if (q->efficiency)
		cfg->accel.efficiency = q->efficiency;
	const double speedup[3] = { q->speedup_mx9, q->speedup_mx6, q->speedup_mx4 };
	for (int f = 0; f < 3; f++) {
		if (!isfinite(speedup[f]) || speedup[f] < 0 || speedup[f] > JITQ_SPEEDUP_MAX)
			return err_set(err, -EINVAL, "speedup_%s %g: more than 0 and at most %g "
				       "(0: the default)", jitq_fmt_name((enum mx_format)f),
				       speedup[f], JITQ_SPEEDUP_MAX);
		if (speedup[f] > 0)
			cfg->accel.speedup[f] = speedup[f];
	}
	if (q->n_fwd_times != q->n_bwd_times)
		return err_set(err, -EINVAL, "measured times: %zu forward but %zu backward values (give both "
			       "or neither)", q->n_fwd_times, q->n_bwd_times);
	if (q->n_fwd_times) {
		cfg->accel.fwd_s = q->fwd_times;
		cfg->accel.bwd_s = q->bwd_times;
		cfg->accel.n_times = q->n_fwd_times;
	}
	if (q->max_lookahead)
		cfg->max_lookahead = q->max_lookahead;
	/* The quantization runs in the accelerator's own HBM: as many PIM stacks as it has: the
	 * request's, else pim_config's, else 5 (an A100 40GB's HBM2 stacks; the built-in
	 * organisation describes one stack). */
	if (q->pim_stacks > 64)
		return err_set(err, -EINVAL, "pim_stacks %u: at most 64", q->pim_stacks);
	if (q->pim_stacks)
		in->pp.stacks = q->pim_stacks;
	else if (!stacks_set && !in->paper)
		in->pp.stacks = ctx->pim_configured ? ctx->pim->stacks : 5;
	cfg->pim.channels = in->pp.stacks * in->pp.pch_per_stack;
	cfg->pim.quant_time_s = pimsim_cost_s;
	cfg->pim.ctx = &in->cost;
	return 0;
}

/* The request in the scheduler's terms (in must not move afterwards: cost points into it). */
static int plan_inputs(const struct rpc_context *ctx, const Pim__JitqPlan *q, struct plan_inputs *in,
		       struct pim_error *err)
{
	bool stacks_set = false;
	int r;

	*in = (struct plan_inputs){ .pp = *ctx->pim, .cost.mapping = PIMSIM_STRIDED_OPT };
	in->cost.params = &in->pp;
	jitq_config_init(&in->cfg);
	for (int f = 0; f < 3; f++) /* pimd.conf's, before the request's settings and fields */
		if (ctx->jitq_speedup[f] > 0)
			in->cfg.accel.speedup[f] = ctx->jitq_speedup[f];
	if ((r = plan_model(q->model, &in->cfg.model, err)) < 0 ||
	    (r = plan_settings(q, in, &stacks_set, err)) < 0)
		return r;
	return plan_options(ctx, q, stacks_set, in, err);
}

static void capacity_fill(Pim__JitqCapacity *c, const struct jitq_capacity *pc)
{
	c->params = pc->params;
	c->params_quant = pc->params_quant;
	c->master = pc->master;
	c->grads = pc->grads;
	c->optim = pc->optim;
	c->acts = pc->acts;
	c->lp_both = pc->lp_both;
	c->lp_one = pc->lp_one;
	c->lp_jitq = pc->lp_jitq;
	c->total_both = pc->total_both;
	c->total_one = pc->total_one;
	c->total_jitq = pc->total_jitq;
	c->saved_vs_both = pc->saved_vs_both;
	c->saved_vs_one = pc->saved_vs_one;
	c->pct_vs_both = pc->pct_vs_both;
	c->pct_vs_one = pc->pct_vs_one;
}

/* Every assumption behind the figures, stated in the reply. */
static void plan_assumptions(struct reply *b, Pim__JitqPlanReply *r, const struct plan_inputs *in,
			     const struct jitq_plan *plan)
{
	const struct jitq_config *cfg = &in->cfg;
	const struct jitq_model *m = &plan->cfg.model;
	const struct pimsim_params *pp = &in->pp;

	if (in->paper)
		reply_append(b, &r->assumptions, &r->n_assumptions, "configuration: the JIT-Q paper's "
			     "(kernel paper, cond_shift_range 8, tCK 0.833 ns, 5 stacks; 7 B/param "
			     "footprint without activations), then the settings given");
	reply_append(b, &r->assumptions, &r->n_assumptions, "model %s: %u layers, hidden %u, %u heads, "
		     "sequence %u, micro-batch %u, tensor slicing %u, pipeline %u (%u blocks per "
		     "device)%s%s", cfg->model.name, m->layers, m->hidden, m->heads, m->seq, m->batch,
		     m->tslice, r->pipeline, plan->layers, m->source ? "; " : "", m->source ? m->source : "");
	if (cfg->accel.n_times)
		reply_append(b, &r->assumptions, &r->n_assumptions, "accelerator: measured per-block times "
			     "supplied by the caller");
	else
		reply_append(b, &r->assumptions, &r->n_assumptions, "accelerator: %.0f TFLOP/s peak x %.2f "
			     "efficiency in BF16, x %.3g in %s (throughput per format x the BF16 rate: "
			     "mx9 %.3g, mx6 %.3g, mx4 %.3g; default 1, 1.5, 2.25: time per GEMM "
			     "9 : 6 : 4, bits per element); forward GEMM FLOPs 24bsh^2 + 4bs^2h per "
			     "block, backward 2x forward",
			     cfg->accel.peak_flops / 1e12, cfg->accel.efficiency,
			     cfg->accel.speedup[cfg->fmt], jitq_fmt_name(cfg->fmt),
			     cfg->accel.speedup[MX_FMT_MX9], cfg->accel.speedup[MX_FMT_MX6],
			     cfg->accel.speedup[MX_FMT_MX4]);
	reply_append(b, &r->assumptions, &r->n_assumptions, "PIM: HBM-PIM model (pimsim), %u stacks x %u "
		     "pseudo-channels, %u banks each, tCK %u ps, mapping %s, kernel %s (cond_shift_range "
		     "%u, lane_shift_lanes %u), read/write turnaround %s (tRTW %u, tWTR %u), refresh %s "
		     "re-activation; time from the command stream it executes", pp->stacks,
		     pp->pch_per_stack, pp->banks_per_pch, pp->tck_ps, pimsim_mapping_name(in->cost.mapping),
		     pimsim_kernel_name((enum pimsim_kernel)pp->kernel), pp->cond_shift_range,
		     pp->lane_shift_lanes, pp->rw_turnaround ? "on" : "off", pp->tRTW, pp->tWTR,
		     pp->refresh_reopen ? "with" : "without");
	reply_append(b, &r->assumptions, &r->n_assumptions, "footprint: master weights in %s, gradients "
		     "%u B/parameter, optimizer state %u B/parameter over %u shard(s), %s",
		     jitq_src_name(cfg->src), cfg->fp.grad_bytes, cfg->fp.optim_bytes, cfg->fp.optim_shards,
		     act_name(cfg->fp.act));
	reply_append(b, &r->assumptions, &r->n_assumptions, "interference: PIM takes %.0f%% of the "
		     "command bus during overlap, memory-bound share of block time %.0f%%",
		     100 * cfg->bus_share, 100 * cfg->mem_share);
}

/* The plan as a JitqPlanReply. */
static Pim__Response *plan_reply(uint64_t id, const struct plan_inputs *in, const struct jitq_plan *plan,
				 bool per_block)
{
	const struct pimsim_params *pp = &in->pp;
	struct reply b;

	Pim__JitqPlanReply *r = reply_start(&b, id, PIM__RESPONSE__BODY_JITQ_PLAN);
	if (!r)
		return reply_finish(&b);
	r->model = reply_strdup(&b, in->cfg.model.name);
	r->format = reply_strdup(&b, jitq_fmt_name(in->cfg.fmt));
	r->source = reply_strdup(&b, jitq_src_name(in->cfg.src));
	r->mapping = reply_strdup(&b, pimsim_mapping_name(in->cost.mapping));
	r->layers = plan->layers;
	r->model_layers = plan->cfg.model.layers;
	r->pipeline = plan->cfg.model.pstages ? plan->cfg.model.pstages : 1;
	r->kernel = reply_strdup(&b, pimsim_kernel_name((enum pimsim_kernel)pp->kernel));
	r->pim_tck_ns = pp->tck_ps / 1000.0;
	r->pim_stacks = pp->stacks;
	r->loss = plan->loss;
	r->loss_stall = plan->loss_stall;
	r->loss_interference = plan->loss_interference;
	r->phases = reply_calloc(&b, JITQ_PHASE_COUNT, sizeof *r->phases);
	for (int ph = 0; r->phases && ph < JITQ_PHASE_COUNT && !b.oom; ph++) {
		Pim__JitqPhase *m = phase_msg(&b, plan, (enum jitq_phase)ph, per_block);
		if (m)
			r->phases[r->n_phases++] = m;
	}
	r->capacity = reply_message(&b, &pim__jitq_capacity__descriptor);
	if (r->capacity)
		capacity_fill(r->capacity, &plan->cap);
	size_t need = jitq_plan_format(plan, per_block, NULL, 0) + 1;
	r->text = reply_calloc(&b, need, 1);
	if (r->text)
		jitq_plan_format(plan, per_block, r->text, need);
	plan_assumptions(&b, r, in, plan);
	return reply_finish(&b);
}

Pim__Response *jitq_rpc_plan(struct rpc_context *ctx, const Pim__Request *req)
{
	const Pim__JitqPlan *q = req->jitq_plan;
	struct pim_error err = { 0 };
	struct plan_inputs in;
	struct jitq_plan *plan = NULL;
	uint8_t packed[PLAN_CACHE_REQUEST_MAX];
	size_t packed_len = plan_cache_key(q, packed);
	Pim__JitqPlanReply *cached = packed_len ? plan_cache_get(ctx, packed, packed_len) : NULL;

	/* (computed from the request and the configuration alone: the same again until a reload) */
	ctx->answer_reusable = true;
	if (cached)
		return reply_wrap(req->id, PIM__RESPONSE__BODY_JITQ_PLAN, cached);
	if (plan_inputs(ctx, q, &in, &err) < 0 || jitq_plan(&in.cfg, &plan, &err) < 0)
		return reply_error_from(req->id, &err);
	if (in.cost.error) {
		jitq_plan_free(plan);
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT, "PIM model: %s",
				   in.cost.err.msg);
	}
	Pim__Response *resp = plan_reply(req->id, &in, plan, q->per_block);
	jitq_plan_free(plan);
	if (resp && resp->body_case == PIM__RESPONSE__BODY_JITQ_PLAN && packed_len)
		plan_cache_put(ctx, packed, packed_len, resp->jitq_plan);
	return resp;
}

/* A quantization or dequantization in flight (rpc_deferred): its own copy of the input (and
 * for a quantization through the PIM model, of the model's parameters). */
struct mx_job {
	uint64_t id;
	bool dequantize; /* else quantize */
	bool pim, ocp;
	enum mx_format fmt;
	enum mx_ocp_format ocp_fmt;
	enum mx_src src;
	enum mx_dir dir;
	enum pimsim_mapping map;
	struct pimsim_params pimp;
	uint32_t rows, cols;
	void *data;
	size_t len, out_len;
	Pim__Response *resp;
};

/* On the work thread: quantizes and builds the reply (NULL when out of memory). */
static Pim__Response *quantize_job_reply(struct mx_job *j)
{
	struct pim_error err = { 0 };
	struct reply b;
	Pim__JitqQuantizeReply *r = reply_start(&b, j->id, PIM__RESPONSE__BODY_JITQ_QUANTIZE);
	if (!r)
		return reply_finish(&b);
	uint8_t *out = r->data.data = reply_calloc(&b, 1, j->out_len);
	r->data.len = j->out_len;
	r->engine = reply_printf(&b, "%s%s", j->pim ? pimsim_mapping_name(j->map) : "reference",
				 j->pim && j->pimp.kernel == PIMSIM_KERNEL_PAPER ? " (paper kernel)" : "");
	if (b.oom)
		return reply_finish(&b);
	int k;
	if (j->pim) {
		struct pimsim_stats st = { 0 };
		uint8_t *ref = malloc(j->out_len);
		k = ref ? pimsim_quantize(&j->pimp, j->map, j->dir, j->fmt, j->src, j->data, j->rows, j->cols,
					  out, j->out_len, &st, &err)
			: err_set(&err, -ENOMEM, "out of memory");
		/* The paper kernel truncates: its own reference (mx.h). */
		if (k == 0 && j->pimp.kernel == PIMSIM_KERNEL_PAPER)
			k = mx_quantize_tensor_trunc(j->fmt, j->src, j->data, j->rows, j->cols, j->dir, ref,
						     j->out_len, &err);
		else if (k == 0)
			k = mx_quantize_tensor(j->fmt, j->src, j->data, j->rows, j->cols, j->dir, ref, j->out_len,
					       &err);
		if (k == 0 && memcmp(ref, out, j->out_len) != 0) {
			log_error("PIM model and reference quantizer disagree (%s, %s, %u x %u)",
				  pimsim_mapping_name(j->map), mx_format_name(j->fmt), j->rows, j->cols);
			k = err_set(&err, -EIO, "the PIM model's output differs from the reference quantizer");
		}
		free(ref);
		r->pim_time_ns = st.time_ns;
		r->pim_commands = st.total_cmds;
	} else if (j->ocp) /* threads 0: one per CPU pimd may run on (rows only; see mx.h) */
		k = mx_ocp_quantize_tensor_mt(0, MX_IMPL_AUTO, j->ocp_fmt, j->src, j->data, j->rows, j->cols,
					      j->dir, out, j->out_len, &err);
	else
		k = mx_quantize_tensor_mt(0, MX_IMPL_AUTO, j->fmt, j->src, j->data, j->rows, j->cols, j->dir,
					  out, j->out_len, &err);
	if (k < 0)
		return reply_fail(&b, &err);
	r->blocks = j->out_len / (j->ocp ? mx_ocp_block_bytes(j->ocp_fmt) : mx_block_bytes(j->fmt));
	return reply_finish(&b);
}

/* On the work thread: dequantizes and builds the reply (NULL when out of memory). */
static Pim__Response *dequantize_job_reply(struct mx_job *j)
{
	struct pim_error err = { 0 };
	size_t count = (size_t)j->rows * j->cols;
	struct reply b;
	Pim__JitqDequantizeReply *r = reply_start(&b, j->id, PIM__RESPONSE__BODY_JITQ_DEQUANTIZE);
	/* Output is little-endian by contract; this daemon only runs on little-endian hosts. */
	float *out = r ? reply_calloc(&b, count, sizeof(float)) : NULL;
	if (!out)
		return reply_finish(&b);
	r->data.data = (uint8_t *)out;
	r->data.len = count * sizeof(float);
	int k = j->ocp ? mx_ocp_dequantize_tensor(j->ocp_fmt, j->data, j->len, j->rows, j->cols, j->dir, out,
						  count, &err)
		       : mx_dequantize_tensor(j->fmt, j->data, j->len, j->rows, j->cols, j->dir, out, count,
					      &err);
	if (k < 0)
		return reply_fail(&b, &err);
	size_t bb = j->ocp ? mx_ocp_block_bytes(j->ocp_fmt) : mx_block_bytes(j->fmt);
	r->blocks = j->len / bb;
	/* byte 0 of every block is its exponent or scale; 255 marks a NaN block in both families */
	for (size_t i = 0; i < j->len; i += bb)
		r->nan_blocks += ((const uint8_t *)j->data)[i] == (j->ocp ? MX_OCP_SCALE_NAN : MX_EXP_NAN);
	return reply_finish(&b);
}

static void mx_job_run(struct store *s, void *data)
{
	struct mx_job *j = data;
	j->resp = j->dequantize ? dequantize_job_reply(j) : quantize_job_reply(j);
}

static Pim__Response *mx_job_finish(void *data, struct rpc_deferred *next)
{
	struct mx_job *j = data;
	Pim__Response *r = j->resp;
	j->resp = NULL;
	return r;
}

static void mx_job_release(void *data)
{
	struct mx_job *j = data;
	if (j->resp)
		pim__response__free_unpacked(j->resp, NULL);
	free(j->data);
	free(j);
}

/* The format (either MX family) and blocking direction of a (de)quantization request (empty
 * strings keep the defaults), or -EINVAL naming what is wrong. */
static int parse_format_dir(const char *format, const char *direction, enum mx_format *fmt,
			    enum mx_ocp_format *ocp_fmt, bool *ocp, enum mx_dir *dir, struct pim_error *err)
{
	if (format && *format && mx_format_from_name(format, fmt) < 0) {
		if (mx_ocp_format_from_name(format, ocp_fmt) < 0)
			return err_set(err, -EINVAL, "format \"%.*s\" is not one of mx9, mx6, mx4, mxfp8-e4m3, "
				       "mxfp8-e5m2, mxfp6-e3m2, mxfp6-e2m3, mxfp4, mxint8", TEXT_ECHO(format, 32));
		*ocp = true;
	}
	if (direction && *direction) {
		if (strcmp(direction, "row") == 0)
			*dir = MX_DIR_ROW;
		else if (strcmp(direction, "col") == 0 || strcmp(direction, "column") == 0)
			*dir = MX_DIR_COL;
		else
			return err_set(err, -EINVAL, "direction \"%.*s\" is not row or col",
				       TEXT_ECHO(direction, 16));
	}
	return 0;
}

Pim__Response *jitq_rpc_quantize(struct rpc_context *ctx, const Pim__Request *req,
				  struct rpc_deferred *defer)
{
	const Pim__JitqQuantize *q = req->jitq_quantize;
	enum mx_format fmt = MX_FMT_MX6;
	enum mx_ocp_format ocp_fmt = MX_OCP_FP8_E4M3;
	enum mx_src src = MX_SRC_BF16;
	enum mx_dir dir = MX_DIR_ROW;
	enum pimsim_mapping map = PIMSIM_TILED;
	struct pimsim_params pp = *ctx->pim;
	bool pim = false, ocp = false;

	/* The shared-microexponent formats (doc/design.md §5.1), or the OCP family (reference engine). */
	struct pim_error err = { 0 };
	if (parse_format_dir(q->format, q->direction, &fmt, &ocp_fmt, &ocp, &dir, &err) < 0)
		return reply_error_from(req->id, &err);
	if (q->source && *q->source && jitq_src_from_name(q->source, &src) < 0)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "source \"%.*s\" is not one of bf16, fp32", TEXT_ECHO(q->source, 32));
	if (q->engine && *q->engine && strcmp(q->engine, "reference") != 0) {
		if (pimsim_mapping_from_name(q->engine, &map) < 0)
			return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
					   "engine \"%.*s\" is not reference, tiled, strided or "
					   "strided-opt", TEXT_ECHO(q->engine, 32));
		pim = true;
		if (ocp)
			return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
					   "the PIM model runs the MX9/MX6/MX4 kernel; %s takes the "
					   "reference engine", mx_ocp_format_name(ocp_fmt));
	}
	if (q->kernel && *q->kernel) {
		enum pimsim_kernel kk;
		if (pimsim_kernel_from_name(q->kernel, &kk) < 0)
			return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
					   "kernel \"%.*s\" is not exact or paper",
					   TEXT_ECHO(q->kernel, 32));
		if (!pim)
			return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
					   "a kernel needs a PIM engine (tiled, strided or strided-opt)");
		pp.kernel = kk;
	}
	/* The PIM model executes every command (on the work thread, one request at a time): keep
	 * one request short so that others do not wait long behind it. */
	if (pim && (uint64_t)q->rows * q->cols > JITQ_RPC_PIM_ELEMENTS_MAX)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "the PIM model runs at most %u elements per request (%u x %u given); "
				   "use the reference engine for larger tensors",
				   JITQ_RPC_PIM_ELEMENTS_MAX, q->rows, q->cols);
	size_t elem = src == MX_SRC_FP32 ? 4 : 2;
	uint64_t want;
	if (!q->rows || !q->cols || !mul_u64((uint64_t)q->rows * q->cols, elem, &want) ||
	    want != q->data.len)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "%u x %u %s elements need %llu bytes, the data has %zu", q->rows,
				   q->cols, jitq_src_name(src),
				   (unsigned long long)((uint64_t)q->rows * q->cols * elem), q->data.len);
	size_t out_len = ocp ? mx_ocp_packed_size(ocp_fmt, q->rows, q->cols, dir)
			     : mx_packed_size(fmt, q->rows, q->cols, dir);
	if (!out_len)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "%s blocking needs the %s count (%u) to be a multiple of %d",
				   dir == MX_DIR_ROW ? "row" : "column", dir == MX_DIR_ROW ? "column" : "row",
				   dir == MX_DIR_ROW ? q->cols : q->rows, ocp ? MX_OCP_BLOCK : MX_BLOCK);
	struct mx_job *j = calloc(1, sizeof *j);
	/* Input is little-endian by contract; this daemon only runs on little-endian hosts. */
	void *aligned = malloc(q->data.len);
	if (!j || !aligned) {
		free(j);
		free(aligned);
		return NULL;
	}
	memcpy(aligned, q->data.data, q->data.len);
	*j = (struct mx_job){ .id = req->id, .pim = pim, .ocp = ocp, .fmt = fmt, .ocp_fmt = ocp_fmt,
				    .src = src, .dir = dir, .map = map, .pimp = pp, .rows = q->rows,
				    .cols = q->cols, .data = aligned, .len = q->data.len, .out_len = out_len };
	struct rpc_deferred job = { .run = mx_job_run, .finish = mx_job_finish, .release = mx_job_release,
				    .data = j };
	return reply_defer(defer, &job);
}

Pim__Response *jitq_rpc_dequantize(struct rpc_context *ctx, const Pim__Request *req,
				    struct rpc_deferred *defer)
{
	const Pim__JitqDequantize *q = req->jitq_dequantize;
	enum mx_format fmt = MX_FMT_MX6;
	enum mx_ocp_format ocp_fmt = MX_OCP_FP8_E4M3;
	enum mx_dir dir = MX_DIR_ROW;
	bool ocp = false;

	struct pim_error err = { 0 };
	if (parse_format_dir(q->format, q->direction, &fmt, &ocp_fmt, &ocp, &dir, &err) < 0)
		return reply_error_from(req->id, &err);
	const char *name = ocp ? mx_ocp_format_name(ocp_fmt) : mx_format_name(fmt);
	int block = ocp ? MX_OCP_BLOCK : MX_BLOCK;
	if (!q->rows || !q->cols)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "shape %u x %u: both dimensions must be at least 1", q->rows, q->cols);
	size_t in_len = ocp ? mx_ocp_packed_size(ocp_fmt, q->rows, q->cols, dir)
			    : mx_packed_size(fmt, q->rows, q->cols, dir);
	if (!in_len)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "%s blocking needs the %s count (%u) to be a multiple of %d",
				   dir == MX_DIR_ROW ? "row" : "column", dir == MX_DIR_ROW ? "column" : "row",
				   dir == MX_DIR_ROW ? q->cols : q->rows, block);
	if (q->data.len != in_len)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "%u x %u in %s, %s-blocked, is %zu bytes packed; the data has %zu",
				   q->rows, q->cols, name, dir == MX_DIR_ROW ? "row" : "column", in_len,
				   q->data.len);
	/* The FP32 result is larger than the packed input (2 to 8 times): it must fit a reply. */
	uint64_t count = (uint64_t)q->rows * q->cols, out_bytes = count * sizeof(float);
	if (out_bytes + JITQ_RPC_REPLY_OVERHEAD > ctx->max_frame_bytes)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "%u x %u FP32 elements are %llu bytes, more than a reply of "
				   "max_frame_bytes %u can carry; dequantize the tensor in parts",
				   q->rows, q->cols, (unsigned long long)out_bytes, ctx->max_frame_bytes);
	struct mx_job *j = calloc(1, sizeof *j);
	void *copy = malloc(in_len);
	if (!j || !copy) {
		free(j);
		free(copy);
		return NULL;
	}
	memcpy(copy, q->data.data, in_len);
	*j = (struct mx_job){ .id = req->id, .dequantize = true, .ocp = ocp, .fmt = fmt, .ocp_fmt = ocp_fmt,
			      .dir = dir, .rows = q->rows, .cols = q->cols, .data = copy, .len = in_len };
	struct rpc_deferred job = { .run = mx_job_run, .finish = mx_job_finish, .release = mx_job_release,
				    .data = j };
	return reply_defer(defer, &job);
}
