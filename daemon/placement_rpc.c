/* SPDX-License-Identifier: MIT */
#include "placement_rpc.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "calibrate.h"
#include "catalogue.h"
#include "log.h"
#include "manifest.h"
#include "placement.h"

/* ---------------------------------------------------------------- model + metrics → regions */

struct loaded {
	int64_t model_id;
	int64_t version;   /* of the model and metrics read (store_model_version) */
	struct store_model_info summary;
	size_t n_regions;
	struct placement_region *regions;  /* manifest order */
	struct placement_operand *operands;
	size_t n_operands, operands_cap;
	/* the regions' strings, "name\0op\0location\0" each (name and op point here) */
	char *text;
	size_t text_len, text_cap;
	size_t n_with_metrics;
	size_t n_estimates, n_counters, n_imported;
	size_t n_imported_unknown_b_cpu; /* imported without the measuring host's B_cpu */
	size_t n_with_spread;            /* with a measured spread of T_host (marginal decisions) */
	/* regions whose metrics came from the fleet catalogue, and from where (the host with the
	 * most of them; up to LOADED_HOSTS hosts counted) */
	size_t n_catalogue;
	struct loaded_origin {
		char host[CONFIG_HOST_ID_MAX + 1];
		char backend[16];
		int64_t measured_at;
		size_t regions;
	} origins[8];
	size_t n_origins;
	bool from_fetched; /* the metrics are the rows just fetched from the catalogue, in memory */
};
#define LOADED_HOSTS 8

static void loaded_free(struct loaded *l)
{
	store_model_info_clear(&l->summary);
	free(l->regions);
	free(l->operands);
	free(l->text);
	memset(l, 0, sizeof *l);
}

/* The operator's name of a region read by load() (r->op is its instance, for grouping). */
static const char *region_op_kind(const struct placement_region *r)
{
	return r->name + strlen(r->name) + 1;
}

static int cmp_region_id(const void *a, const void *b, void *regions)
{
	const struct placement_region *r = regions;
	uint32_t x = r[*(const uint32_t *)a].id, y = r[*(const uint32_t *)b].id;
	return (x > y) - (x < y);
}

static enum placement_role role_of(enum store_operand_role r)
{
	return r == STORE_ROLE_IN ? PL_IN : r == STORE_ROLE_OUT ? PL_OUT : PL_INOUT;
}

/* Room for len more bytes of l->text. */
static int text_reserve(struct loaded *l, size_t len)
{
	if (l->text_len + len <= l->text_cap)
		return 0;
	size_t cap = l->text_cap ? l->text_cap : 4096;
	while (cap < l->text_len + len)
		cap *= 2;
	char *t = realloc(l->text, cap);
	if (!t)
		return -ENOMEM;
	l->text = t;
	l->text_cap = cap;
	return 0;
}

/*
 * A region as the placement rule reads it: numbers, and its strings in l->text (as offsets
 * until the walk ends, for text moves as it grows).  The model is never held as a manifest:
 * for a million regions that would be hundreds of MiB more.
 */
static int loaded_region(void *ctx, size_t index, const struct store_region *g)
{
	struct loaded *l = ctx;
	size_t ln = strlen(g->name) + 1, lo = strlen(g->op) + 1, ll = strlen(g->location) + 1;

	if (index >= l->n_regions || text_reserve(l, ln + lo + ll) < 0)
		return index >= l->n_regions ? -EIO : -ENOMEM;
	struct placement_region *p = &l->regions[index];
	size_t at = l->text_len;
	memcpy(l->text + at, g->name, ln);
	memcpy(l->text + at + ln, g->op, lo);
	memcpy(l->text + at + ln + lo, g->location, ll);
	l->text_len += ln + lo + ll;
	p->id = g->id;
	p->name = (const char *)(uintptr_t)at;
	/* Operator instance: the source location when known (one linalg op per location),
	 * else the op name, which groups every instance of that op kind. */
	p->op = (const char *)(uintptr_t)(*g->location ? at + ln + lo : at + ln);
	p->order = g->order;
	p->n_par = g->n_par;
	p->n_total = g->n_total;
	p->trip = g->trip ? g->trip : 1;
	/* Blocks per nest execution: N_total over the innermost (last reduction, else last
	 * parallel) extent, when the extents are known. */
	if (g->n_reduction_extents && g->reduction_extents[g->n_reduction_extents - 1])
		p->n_outer = g->n_total / g->reduction_extents[g->n_reduction_extents - 1];
	else if (g->n_parallel_extents && g->parallel_extents[g->n_parallel_extents - 1])
		p->n_outer = g->n_total / g->parallel_extents[g->n_parallel_extents - 1];
	p->operands = (const struct placement_operand *)(uintptr_t)l->n_operands;
	return 0;
}

static int loaded_operand(void *ctx, size_t region, const struct store_operand *o)
{
	struct loaded *l = ctx;

	if (l->n_operands == l->operands_cap) {
		size_t cap = l->operands_cap ? l->operands_cap * 2 : 1024;
		struct placement_operand *v = realloc(l->operands, cap * sizeof *v);
		if (!v)
			return -ENOMEM;
		l->operands = v;
		l->operands_cap = cap;
	}
	l->operands[l->n_operands++] = (struct placement_operand){
		.alloc_id = o->allocation_id, .bytes = o->bytes, .role = role_of(o->role) };
	l->regions[region].n_operands++;
	return 0;
}

/* A region's metrics came from the catalogue: counted with their host. */
static void loaded_origin_add(struct loaded *l, const struct store_metrics *mt)
{
	size_t i;

	l->n_catalogue++;
	for (i = 0; i < l->n_origins; i++)
		if (strcmp(l->origins[i].host, mt->origin_host) == 0)
			break;
	if (i == l->n_origins) {
		if (i == LOADED_HOSTS)
			return;
		l->n_origins++;
		snprintf(l->origins[i].host, sizeof l->origins[i].host, "%s", mt->origin_host);
		snprintf(l->origins[i].backend, sizeof l->origins[i].backend, "%s", mt->origin_backend);
	}
	l->origins[i].regions++;
	if (mt->origin_measured_at > l->origins[i].measured_at)
		l->origins[i].measured_at = mt->origin_measured_at;
}

/* The stored metrics of a region, as the placement rule reads them. */
static void loaded_apply(struct loaded *l, struct placement_region *p, const struct store_metrics *mt)
{
	l->n_with_metrics++;
	p->evidence = mt->evidence;
	p->t_host = mt->t_host;
	/* a spread that is not a finite relative spread is taken as not known */
	if (isfinite(mt->t_host_spread) && mt->t_host_spread > 0) {
		p->t_host_spread = mt->t_host_spread;
		l->n_with_spread++;
	}
	p->have_n_rd = mt->have_n_rd;
	p->n_rd = mt->n_rd;
	p->have_store = mt->have_store;
	p->c_store = mt->c_store;
	p->c_be1 = mt->c_be1;
	p->c_be2 = mt->c_be2;
	p->c_be3 = mt->c_be3;
	if (mt->evidence == PL_EVIDENCE_IMPORTED) {
		/* θ of imported counts comes from the B_cpu of the host that measured them */
		if (mt->source_b_cpu > 0 && isfinite(mt->source_b_cpu))
			p->b_cpu_source = mt->source_b_cpu;
		else
			l->n_imported_unknown_b_cpu++;
	}
	if (mt->bw_read_estimate > 0) {
		p->have_bw_read_estimate = true;
		p->bw_read_estimate = mt->bw_read_estimate;
	}
	if (mt->origin_host && *mt->origin_host)
		loaded_origin_add(l, mt);
	l->n_estimates += mt->evidence == PL_EVIDENCE_ESTIMATE;
	l->n_counters += mt->evidence == PL_EVIDENCE_COUNTERS;
	l->n_imported += mt->evidence == PL_EVIDENCE_IMPORTED;
}

/* Metrics rows come by region id; so do the regions, through by_id (NULL: in array order). */
struct metrics_merge {
	struct loaded *l;
	const uint32_t *by_id;
	size_t next;
};

static int loaded_metric(void *ctx, const struct store_metrics *mt)
{
	struct metrics_merge *mm = ctx;
	struct loaded *l = mm->l;
	struct placement_region *p = NULL;

	for (; mm->next < l->n_regions; mm->next++) {
		p = &l->regions[mm->by_id ? mm->by_id[mm->next] : mm->next];
		if (p->id >= mt->region_id)
			break;
	}
	if (mm->next < l->n_regions && p->id == mt->region_id)
		loaded_apply(l, p, mt);
	return 0;
}

/*
 * Each region's metrics, read row by row into the region (never held as a list: a million
 * metrics rows as protobuf-c structures would take ~200 MB); from the rows fill fetched from
 * the catalogue when l->from_fetched (they are being stored meanwhile).
 */
static int load_metrics(struct rpc_context *ctx, struct loaded *l, const struct catalogue_fill *fill,
			struct pim_error *err)
{
	struct metrics_merge mm = { .l = l };
	uint32_t *by_id = NULL;
	bool sorted = true;
	int r;

	for (size_t i = 1; i < l->n_regions && sorted; i++)
		sorted = l->regions[i - 1].id < l->regions[i].id;
	if (!sorted) {
		if (!(by_id = malloc(l->n_regions * sizeof *by_id)))
			return err_set(err, -ENOMEM, "out of memory");
		for (size_t i = 0; i < l->n_regions; i++)
			by_id[i] = (uint32_t)i;
		qsort_r(by_id, l->n_regions, sizeof *by_id, cmp_region_id, l->regions);
		mm.by_id = by_id;
	}
	if (l->from_fetched)
		r = catalogue_fill_each(fill, loaded_metric, &mm) == -ENOMEM ? err_set(err, -ENOMEM, "out of memory") : 0;
	else
		r = store_metrics_each(ctx->store, l->model_id, ctx->platform->row, loaded_metric, &mm, err);
	free(by_id);
	return r;
}

/* The model, its version and its metrics as of one state of the store: another connection may
 * change them meanwhile (pimd's work thread has its own).  The metrics are fill's rows in memory
 * when the model is still as it was when they were asked for (catalogue_fill: nothing else
 * changed it, and they are not committed yet), else the store's. */
static int load_read(struct rpc_context *ctx, const char *name, struct loaded *l, struct catalogue_fill *fill,
		     struct pim_error *err)
{
	static const struct store_model_walker walker = { .region = loaded_region, .operand = loaded_operand };
	int r = store_read_begin(ctx->store, err);

	if (r < 0)
		return r;
	if ((r = store_model_id(ctx->store, name, &l->model_id, err)) >= 0 &&
	    (r = store_model_version(ctx->store, l->model_id, &l->version, err)) >= 0 &&
	    (r = store_model_get(ctx->store, name, &l->summary, NULL, err)) >= 0) {
		l->n_regions = l->summary.regions;
		l->regions = calloc(l->n_regions ? l->n_regions : 1, sizeof *l->regions);
		if (!l->regions)
			r = err_set(err, -ENOMEM, "out of memory");
		else if ((r = store_model_walk(ctx->store, l->model_id, &walker, l, err)) == -ENOMEM)
			r = err_set(err, -ENOMEM, "out of memory reading model \"%s\"", name);
		else if (r == -EIO && !err->msg[0])
			r = err_set(err, -EIO, "model \"%s\" has more regions than its summary says", name);
	}
	/* the catalogue's rows came meanwhile (catalogue_fill_wait) */
	if (r >= 0 && fill && fill->ask)
		r = catalogue_fill_wait(fill, err);
	if (r >= 0) {
		l->from_fetched = fill && fill->rows && l->model_id == fill->model_id && l->version == fill->version_before;
		r = load_metrics(ctx, l, fill, err);
	}
	store_read_end(ctx->store);
	if (r < 0)
		return r;
	/* the walk is over: offsets into text and operands become pointers */
	for (size_t i = 0; i < l->n_regions; i++) {
		struct placement_region *p = &l->regions[i];
		p->name = l->text + (uintptr_t)p->name;
		p->op = l->text + (uintptr_t)p->op;
		p->operands = l->operands + (uintptr_t)p->operands;
	}
	return 0;
}

static int load(struct rpc_context *ctx, const char *name, struct loaded *l, struct catalogue_fill *fill,
		struct pim_error *err)
{
	memset(l, 0, sizeof *l);
	if (!manifest_name_valid(name))
		return err_set(err, -EINVAL, "\"%.*s\" is not a valid model name", TEXT_ECHO(name, 64));
	return load_read(ctx, name, l, fill, err);
}

/* This host's B_cpu as queries use it: configured, else measured, else the paper's. */
double placement_rpc_host_b_cpu(const struct rpc_context *ctx)
{
	if (ctx->params->b_cpu > 0)
		return ctx->params->b_cpu;
	return ctx->platform->id.b_cpu > 0 ? ctx->platform->id.b_cpu : placement_params_default().b_cpu;
}

/*
 * The relative spread of that B_cpu, the noise of a derived θ (marginal decisions): configured
 * with it, or the probe's (platform.h: how far its figure moved between its rounds; 0 for a
 * figure measured before sql/0008).  A query may give it.
 */
static double placement_host_b_cpu_spread(const struct rpc_context *ctx)
{
	if (ctx->params->b_cpu > 0)
		return ctx->params->b_cpu_spread;
	return ctx->platform->id.b_cpu > 0 ? ctx->platform->id.b_cpu_spread : 0;
}

/* Configured parameters with the request's non-zero fields on top, validated. */
static int merge_params(struct rpc_context *ctx, const Pim__PlacementParams *q,
			struct placement_params *p, struct pim_error *err)
{
	*p = *ctx->params;
	p->b_cpu = placement_rpc_host_b_cpu(ctx);
	p->b_cpu_spread = placement_host_b_cpu_spread(ctx);
	if (q) {
#define TAKE(f)                                                                                    \
	do {                                                                                       \
		if (q->f != 0)                                                                     \
			p->f = q->f;                                                               \
	} while (0)
		TAKE(n_core);
		TAKE(f_pim);
		TAKE(i_min);
		TAKE(t_ctx);
		TAKE(b_cpu);
		TAKE(theta);
		TAKE(theta_ratio);
		TAKE(sigma);
		TAKE(b_rd);
		TAKE(b_wb);
		TAKE(b_pim_core);
		TAKE(line_bytes);
		TAKE(b_cpu_spread);
#undef TAKE
	}
	return placement_params_validate(p, err);
}

/* ---------------------------------------------------------------- building messages */


/* n_core: the core count of the only estimate, or 0 when the answer has several (each estimate
 * carries its own). */
static Pim__PlacementParams *params_msg(struct reply *b, const struct placement_params *p,
					double n_core)
{
	Pim__PlacementParams *m = reply_message(b, &pim__placement_params__descriptor);
	if (!m)
		return NULL;
	m->n_core = n_core;
	m->f_pim = p->f_pim;
	m->i_min = p->i_min;
	m->t_ctx = p->t_ctx;
	m->b_cpu = p->b_cpu;
	m->theta = placement_theta(p);
	m->theta_ratio = p->theta_ratio;
	m->sigma = p->sigma;
	m->b_rd = placement_b_rd(p);
	m->b_wb = placement_b_wb(p);
	m->b_pim_core = p->b_pim_core;
	m->line_bytes = p->line_bytes;
	m->b_cpu_spread = p->b_cpu_spread;
	return m;
}

static Pim__RegionDecision *decision_msg(struct reply *b, const struct placement_region *r,
					 const struct placement_decision *d)
{
	Pim__RegionDecision *m = reply_message(b, &pim__region_decision__descriptor);
	char reason[384];

	if (!m)
		return NULL;
	m->region_id = r->id;
	m->name = reply_strdup(b, r->name);
	m->op = reply_strdup(b, region_op_kind(r));
	m->order = r->order;
	m->n_par = r->n_par;
	m->n_total = r->n_total;
	m->trip = r->trip;
	m->pim = d->side == PL_PIM;
	m->conditions = reply_calloc(b, PL_N_COND, sizeof *m->conditions);
	if (m->conditions)
		for (int c = 0; c < PL_N_COND; c++) {
			Pim__Condition *k = reply_message(b, &pim__condition__descriptor);
			if (!k)
				break;
			k->state = (Pim__CondState)d->cond[c].state;
			k->lhs = d->cond[c].lhs;
			k->rhs = d->cond[c].rhs;
			k->noise = d->cond[c].noise;
			k->marginal = d->cond[c].marginal;
			m->conditions[m->n_conditions++] = k;
		}
	m->evidence = (Pim__Evidence)d->evidence;
	m->bw_estimated = d->bw_estimated;
	m->t_host = r->t_host;
	placement_format_reason(d, reason, sizeof reason);
	m->reason = reply_strdup(b, reason);
	m->t_pim = d->t_pim;
	m->fetch_bytes = d->fetch_bytes;
	m->flush_bytes = d->flush_bytes;
	m->unit_size = (uint32_t)d->unit_size;
	if (d->side == PL_PIM)
		m->t_pim_term = reply_strdup(b, placement_t_pim_term_name(d->t_pim_term));
	m->marginal = d->marginal;
	m->marginal_on = d->marginal_on;
	return m;
}

static Pim__PlacementEstimate *estimate_msg(struct reply *b, const struct loaded *l,
					    const struct placement_result *res, size_t k, bool summary_only)
{
	const struct placement_estimate *e = &res->estimates[k];
	Pim__PlacementEstimate *m = reply_message(b, &pim__placement_estimate__descriptor);
	if (!m)
		return NULL;
	m->n_core = e->n_core;
	m->offloaded = (uint32_t)e->n_offloaded;
	m->rejected_stage1 = (uint32_t)e->n_rejected_stage1;
	m->rejected_stage2 = (uint32_t)e->n_rejected_stage2;
	m->t_cpu = e->t_cpu;
	m->t_host = e->t_host;
	m->t_pim = e->t_pim;
	m->t_hybrid = e->t_hybrid;
	m->speedup = e->speedup;
	m->captured_share = e->captured_share;
	m->residual_share = e->residual_share;
	m->bound = isfinite(e->bound) ? e->bound : 0;
	m->bound_movement = isfinite(e->bound_movement) ? e->bound_movement : 0;
	m->t_pim_compute = e->t_pim_by[PL_TPIM_COMPUTE];
	m->t_pim_bandwidth = e->t_pim_by[PL_TPIM_BANDWIDTH];
	m->t_pim_measured = e->t_pim_by[PL_TPIM_MEASURED];
	m->pim_compute = (uint32_t)e->n_pim_by[PL_TPIM_COMPUTE];
	m->pim_bandwidth = (uint32_t)e->n_pim_by[PL_TPIM_BANDWIDTH];
	m->pim_measured = (uint32_t)e->n_pim_by[PL_TPIM_MEASURED];
	m->marginal = (uint32_t)e->n_marginal;
	m->marginal_pim = (uint32_t)e->n_marginal_pim;
	m->marginal_by_condition = reply_calloc(b, PL_N_COND, sizeof *m->marginal_by_condition);
	for (int c = 0; m->marginal_by_condition && c < PL_N_COND; c++)
		m->marginal_by_condition[m->n_marginal_by_condition++] = (uint32_t)e->n_marginal_on[c];
	Pim__Movement *mv = m->movement = reply_message(b, &pim__movement__descriptor);
	if (mv) {
		mv->model = reply_strdup(b, placement_movement_model_name(e->move.model));
		mv->segments = e->move.segments;
		mv->transitions = e->move.transitions;
		mv->fetch_bytes = e->move.fetch_bytes;
		mv->flush_bytes = e->move.flush_bytes;
		mv->t_switch = e->move.t_switch;
		mv->t_fetch = e->move.t_fetch;
		mv->t_flush = e->move.t_flush;
		mv->t_move = e->move.t_move;
	}
	if (summary_only)
		return m;
	size_t n = l->n_regions;
	m->regions = reply_calloc(b, n, sizeof *m->regions);
	if (!m->regions)
		return m;
	for (size_t i = 0; i < n && !b->oom; i++) {
		struct placement_decision pd;
		placement_decision_get(res, k, i, &pd);
		Pim__RegionDecision *d = decision_msg(b, &l->regions[i], &pd);
		if (d)
			m->regions[m->n_regions++] = d;
	}
	return m;
}


static void evidence_notes(struct reply *b, Pim__PlacementReply *r, const struct loaded *l,
			   const struct rpc_context *ctx)
{
	size_t n = l->n_regions;

	if (l->n_with_metrics < n)
		reply_append(b, &r->notes, &r->n_notes, "%zu of %zu regions have no metrics yet: they stay on the host (pimctl "
			 "profile, or pimctl import-perf)", n - l->n_with_metrics, n);
	if (l->n_estimates)
		reply_append(b, &r->notes, &r->n_notes, "%zu regions rest on timing-backend estimates: BW_read estimated from "
			 "unique read bytes / T_host, C4 not evaluable (%s)", l->n_estimates,
			 ctx->platform->counters ? "measured before counters were available"
						 : ctx->platform->backend_reason);
	if (l->n_imported)
		reply_append(b, &r->notes, &r->n_notes, "%zu regions use counter data imported from perf stat", l->n_imported);
	if (l->n_imported_unknown_b_cpu)
		reply_append(b, &r->notes, &r->n_notes, "warning: %zu regions use imported counts without the B_cpu of the "
			   "host that measured them: their theta comes from this host's B_cpu, which may not "
			   "match (import again with --b-cpu)", l->n_imported_unknown_b_cpu);
	if (l->n_counters)
		reply_append(b, &r->notes, &r->n_notes, "%zu regions use hardware counters measured on this host", l->n_counters);
}

/* Where an answer's metrics measured elsewhere came from: its origin and a note (fill: what the
 * catalogue did for this answer, NULL when it was not asked). */
static void catalogue_notes(struct reply *b, Pim__PlacementReply *r, const struct loaded *l,
			    const struct rpc_context *ctx, const struct catalogue_fill *fill)
{
	if (fill && fill->asked && fill->error[0])
		reply_append(b, &r->notes, &r->n_notes, "this host has no metrics of the model and the fleet catalogue "
			     "was not asked or did not answer (%s): the answer rests on this host's store alone",
			     fill->error);
	else if (fill && fill->asked && !fill->fetched)
		reply_append(b, &r->notes, &r->n_notes, "the fleet catalogue has no metrics of this model (its content "
			     "hash) on this platform (%s)", ctx->platform->fleet_key);
	if (!l->n_catalogue)
		return;
	const struct loaded_origin *o = &l->origins[0];
	for (size_t i = 1; i < l->n_origins; i++)
		if (l->origins[i].regions > o->regions)
			o = &l->origins[i];
	Pim__CatalogueOrigin *m = reply_message(b, &pim__catalogue_origin__descriptor);
	if (!m)
		return;
	m->host = reply_strdup(b, o->host);
	m->measured_at = o->measured_at;
	m->backend = reply_strdup(b, o->backend);
	m->regions = (uint32_t)l->n_catalogue;
	m->hosts = (uint32_t)l->n_origins;
	m->platform_key = reply_strdup(b, ctx->platform->fleet_key);
	m->fetched = fill && fill->fetched > 0;
	char hash[65] = "";
	if (store_model_hash(ctx->store, l->model_id, hash, NULL) == 0)
		m->model_hash = reply_strdup(b, hash);
	r->catalogue = m;
	char when[32] = "an unknown date";
	time_t t = (time_t)o->measured_at;
	struct tm tm;
	if (gmtime_r(&t, &tm))
		strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
	reply_append(b, &r->notes, &r->n_notes, "%zu of %zu regions use metrics from the fleet catalogue, measured on "
		     "host %s on %s with the %s backend%s (%s%s); this host has not measured them", l->n_catalogue,
		     l->n_regions, o->host, when, o->backend, l->n_origins > 1 ? " and on other hosts" : "",
		     !m->fetched ? "kept in the local store"
		     : l->from_fetched ? "fetched for this answer, being stored in the local store"
					: "fetched for this answer, kept in the local store",
		     strcmp(o->backend, "timing") == 0 ? "; timing-backend estimates" : "");
}

/* A stored answer's note on where its metrics came from, as of now: kept in the local store,
 * not fetched for this answer (the phrase is shortened in place). */
static void note_not_fetched(char *note)
{
	static const char *const was[] = { "fetched for this answer, being stored in the local store",
					   "fetched for this answer, kept in the local store" };
	static const char now[] = "kept in the local store";

	for (size_t k = 0; note && k < sizeof was / sizeof was[0]; k++) {
		char *at = strstr(note, was[k]);
		if (at) {
			memcpy(at, now, sizeof now - 1);
			memmove(at + sizeof now - 1, at + strlen(was[k]), strlen(at + strlen(was[k])) + 1);
		}
	}
}

/* For a model this host has not measured, the catalogue's metrics into the store first
 * (catalogue.h); only off the event loop (dispatch.c sends such a query there). */
static int fill_from_catalogue(struct rpc_context *ctx, const char *name, struct catalogue_fill *fill,
			       struct pim_error *err)
{
	memset(fill, 0, sizeof *fill);
	if (!ctx->catalogue || !ctx->may_block || !manifest_name_valid(name))
		return 0;
	return catalogue_fill(ctx->catalogue, ctx->store, ctx->platform->row, name, fill, err);
}

/* What "marginal" rests on: the regions with a measured spread, and B_cpu's. */
static void marginal_notes(struct reply *b, Pim__PlacementReply *r, const struct loaded *l,
			   const struct placement_params *p)
{
	size_t n = l->n_with_metrics;
	bool theta_noise = p->theta <= 0 && p->b_cpu_spread > 0; /* an explicit θ is exact */

	if (n == 0)
		return;
	if (l->n_with_spread == 0 && !theta_noise)
		reply_append(b, &r->notes, &r->n_notes, "no region has a measured spread (one repetition each, "
			     "or imported counts): no decision can be labelled marginal");
	else if (l->n_with_spread == 0)
		reply_append(b, &r->notes, &r->n_notes, "no region has a measured spread (one repetition each, "
			     "or imported counts): only theta's noise, from B_cpu's spread of %.1f%%, can make a "
			     "decision marginal (~)", 100 * p->b_cpu_spread);
	else
		reply_append(b, &r->notes, &r->n_notes, "marginal (~): the threshold (T_ctx of C1, theta of C3, "
			     "sigma of C4) lies within the measured noise, +-%g x the relative spread of the "
			     "region's repetitions%s, and that can change the decision; %zu of %zu measured regions "
			     "have a spread", PLACEMENT_NOISE_K,
			     theta_noise ? " (and of B_cpu's for theta)" : "", l->n_with_spread, n);
}

/* Stores an answer (a message m) for the next identical query; failing to is not the client's
 * problem. */
/* key, followed by the model's version: it stands for the manifest and metrics the answer was
 * computed from, so an answer computed while another connection changed the model is never
 * taken for the new one's (versions are never reused, store_model_version). */
static void versioned_key(char *out, size_t len, const char *key, int64_t version)
{
	snprintf(out, len, "%s model=%" PRId64, key, version);
}

static void cache_put(struct rpc_context *ctx, const struct loaded *l, const char *key,
		      const ProtobufCMessage *m)
{
	char vkey[1100];
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = n <= ctx->max_frame_bytes ? malloc(n ? n : 1) : NULL;

	if (!buf)
		return;
	protobuf_c_message_pack(m, buf);
	versioned_key(vkey, sizeof vkey, key, l->version);
	/* by the writer thread: the event loop does not wait for the disk */
	reply_store_decision(ctx, l->model_id, vkey, buf, n, l->summary.name);
}

/* An answer computed from rows just fetched from the catalogue, which the catalogue's storer
 * stores once they are committed (catalogue_answer). */
struct later_answer {
	int64_t model_id, platform_id;
	uint8_t *packed;
	size_t len;
	char key[];
};

static void later_put(void *data, struct store *s, int64_t version)
{
	struct later_answer *a = data;
	struct pim_error err = { 0 };
	char vkey[1100];

	versioned_key(vkey, sizeof vkey, a->key, version);
	if (store_decision_put(s, a->model_id, a->platform_id, vkey, a->packed, a->len, &err) < 0)
		log_warning("An answer from the fleet catalogue's metrics was not stored: %s", err.msg);
}

static void later_release(void *data)
{
	struct later_answer *a = data;

	free(a->packed);
	free(a);
}

/*
 * The answer (m, NULL if it is not to be stored) is computed: the rows this answer fetched from
 * the catalogue, if any, are not needed any more.  An answer computed from them (l->from_fetched)
 * is stored by the catalogue's storer once they are committed, under the model's version then:
 * true; else false (the caller stores it as any other, cache_put).
 */
static bool fill_release(struct rpc_context *ctx, struct catalogue_fill *fill, const struct loaded *l,
			 const char *key, const ProtobufCMessage *m)
{
	struct catalogue_answer ans = { .put = later_put, .release = later_release };
	struct later_answer *a = NULL;
	bool later = fill->rows && l && l->from_fetched;

	if (!fill->rows && !fill->ask)
		return false;
	size_t n = later && m ? protobuf_c_message_get_packed_size(m) : 0;
	if (later && m && n <= ctx->max_frame_bytes && (a = calloc(1, sizeof *a + strlen(key) + 1)) &&
	    (a->packed = malloc(n ? n : 1))) {
		protobuf_c_message_pack(m, a->packed);
		a->len = n;
		a->model_id = l->model_id;
		a->platform_id = ctx->platform->row;
		memcpy(a->key, key, strlen(key) + 1);
		ans.data = a;
	} else if (a) {
		free(a);
		a = NULL;
	}
	catalogue_fill_release(ctx->catalogue, fill, a ? &ans : NULL);
	return later;
}

/*
 * The answer stored under key for model `name`, unpacked as a message of descriptor d; NULL
 * when there is none, or the model is unknown (loading it then says why).  It is looked up
 * before the model's manifest and metrics are read, under the model's current version (read in
 * the same transaction as its id); replacing or removing a model or measuring it also deletes
 * its answers (store.c).
 */
static void *cache_get(struct rpc_context *ctx, const char *name, const char *key,
		       const ProtobufCMessageDescriptor *d)
{
	struct pim_error err = { 0 };
	int64_t model_id, version;
	char vkey[1100];
	uint8_t *blob;
	size_t blen;
	int r;

	if (!manifest_name_valid(name) || store_read_begin(ctx->store, &err) < 0)
		return NULL;
	r = store_model_id(ctx->store, name, &model_id, &err);
	if (r >= 0)
		r = store_model_version(ctx->store, model_id, &version, &err);
	if (r >= 0) {
		versioned_key(vkey, sizeof vkey, key, version);
		r = store_decision_get(ctx->store, model_id, ctx->platform->row, vkey, &blob, &blen, &err);
	}
	store_read_end(ctx->store);
	if (r <= 0)
		return NULL;
	ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, blen, blob);
	free(blob);
	if (!m)
		log_warning("A stored answer for model \"%s\" does not decode; recomputing", name);
	return m;
}

/*
 * Every input that shapes an answer, in one string, led by the kind and version of the answer
 * stored under it: "v3" a PlacementReply (with the T_pim terms, the movement-aware bound and
 * marginal decisions), "decisions-v1" a DecisionsReply.
 */
static void cache_key(char *buf, size_t len, const char *kind, const struct placement_params *p,
		      const char *gran, const char *move, const double *cores, size_t n_cores, bool summary)
{
	size_t pos = (size_t)snprintf(buf, len, "%s %s %s %d n_core=%.17g f_pim=%.17g i_min=%.17g "
				      "t_ctx=%.17g b_cpu=%.17g theta=%.17g sigma=%.17g b_rd=%.17g "
				      "b_wb=%.17g b_pim_core=%.17g L=%.17g b_cpu_spread=%.17g cores=", kind, gran,
				      move, summary, p->n_core, p->f_pim, p->i_min, p->t_ctx, p->b_cpu,
				      placement_theta(p), p->sigma, placement_b_rd(p), placement_b_wb(p),
				      p->b_pim_core, p->line_bytes, p->b_cpu_spread);
	for (size_t i = 0; i < n_cores && pos < len; i++)
		pos += (size_t)snprintf(buf + pos, len - pos, "%s%.17g", i ? "," : "", cores[i]);
}

Pim__Response *placement_rpc_placement(struct rpc_context *ctx, const Pim__Request *req)
{
	const Pim__Placement *q = req->placement;
	struct pim_error err = { 0 };
	struct placement_params p;
	struct loaded l;
	struct placement_result res = { 0 };
	struct reply b;
	int gran = PL_GRAN_LOOP, move = PL_MOVE_UPPER;
	char key[1024];

	if (q->granularity && *q->granularity && (gran = placement_granularity_from_name(q->granularity)) < 0)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "granularity \"%.*s\" is not one of loop, operator, block",
				   TEXT_ECHO(q->granularity, 32));
	if (q->movement && *q->movement && (move = placement_movement_model_from_name(q->movement)) < 0)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "movement \"%.*s\" is not one of upper, resident",
				   TEXT_ECHO(q->movement, 32));
	if (q->n_core_counts > PLACEMENT_MAX_CORE_COUNTS)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "%zu core counts; at most %d per query", q->n_core_counts,
				   PLACEMENT_MAX_CORE_COUNTS);
	for (size_t i = 0; i < q->n_core_counts; i++)
		if (!isfinite(q->core_counts[i]) || q->core_counts[i] < 1 || q->core_counts[i] > 1e9)
			return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
					   "core count %g is outside 1..1e9", q->core_counts[i]);
	if (merge_params(ctx, q->params, &p, &err) < 0)
		return reply_error_from(req->id, &err);

	struct catalogue_fill fill;
	if (fill_from_catalogue(ctx, q->model, &fill, &err) < 0)
		return reply_error_from(req->id, &err);
	double one = p.n_core;
	const double *cores = q->n_core_counts ? q->core_counts : &one;
	size_t n_cores = q->n_core_counts ? q->n_core_counts : 1;
	cache_key(key, sizeof key, "v3", &p, placement_granularity_name(gran), placement_movement_model_name(move),
		  cores, n_cores, q->summary_only);
	/* (rows just fetched: no answer can be stored for them yet) */
	Pim__PlacementReply *cached = fill.rows || fill.ask ? NULL : cache_get(ctx, q->model, key, &pim__placement_reply__descriptor);
	if (cached) {
		cached->cached = true;
		if (cached->catalogue) {
			cached->catalogue->fetched = false;
			for (size_t i = 0; i < cached->n_notes; i++)
				note_not_fetched(cached->notes[i]);
		}
		ctx->answer_reusable = true; /* (read from the store) */
		return reply_wrap(req->id, PIM__RESPONSE__BODY_PLACEMENT, cached);
	}
	if (load(ctx, q->model, &l, &fill, &err) < 0) {
		fill_release(ctx, &fill, NULL, NULL, NULL);
		loaded_free(&l);
		return reply_error_from(req->id, &err);
	}
	/* A region row takes ~150 bytes of reply: refuse early what cannot be sent. */
	if (!q->summary_only && (double)l.n_regions * (double)n_cores * 150 > ctx->max_frame_bytes) {
		size_t n = l.n_regions;
		fill_release(ctx, &fill, NULL, NULL, NULL);
		loaded_free(&l);
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "placement: %zu regions x %zu core counts do not fit a reply of "
				   "max_frame_bytes %u; ask for the summary (--summary) or fewer core counts",
				   n, n_cores, ctx->max_frame_bytes);
	}

	struct placement_query pq = { .granularity = (enum placement_granularity)gran,
				      .movement = (enum placement_movement_model)move,
				      .core_counts = cores, .n_core_counts = n_cores };
	if (placement_run(l.regions, l.n_regions, &p, &pq, &res, &err) < 0) {
		fill_release(ctx, &fill, NULL, NULL, NULL);
		loaded_free(&l);
		return reply_error_from(req->id, &err);
	}
	Pim__PlacementReply *pr = reply_start(&b, req->id, PIM__RESPONSE__BODY_PLACEMENT);
	if (pr) {
		pr->model = reply_strdup(&b, l.summary.name);
		pr->granularity = reply_strdup(&b, placement_granularity_name(gran));
		pr->movement = reply_strdup(&b, placement_movement_model_name(move));
		pr->params = params_msg(&b, &res.params, n_cores == 1 ? cores[0] : 0);
		pr->platform = reply_strdup(&b, ctx->platform->id.name);
		reply_b_cpu(&b, &pr->b_cpu_probe, ctx, res.params.b_cpu);
		pr->regions_with_metrics = (uint32_t)l.n_with_metrics;
		pr->estimates = reply_calloc(&b, res.n_estimates, sizeof *pr->estimates);
		for (size_t i = 0; pr->estimates && i < res.n_estimates && !b.oom; i++) {
			Pim__PlacementEstimate *e = estimate_msg(&b, &l, &res, i, q->summary_only);
			if (e)
				pr->estimates[pr->n_estimates++] = e;
		}
		evidence_notes(&b, pr, &l, ctx);
		catalogue_notes(&b, pr, &l, ctx, &fill);
		marginal_notes(&b, pr, &l, &p);
		reply_append(&b, &pr->notes, &pr->n_notes, "the speedup is an estimate, not a prediction: each "
			   "offloaded region's T_pim is the larger of a lower bound on compute (N_total x I_min / "
			   "(N_core x f_pim), I_min = %g) and its bytes at an assumed PIM bandwidth of %.2f GB/s per "
			   "core (b_pim_core); T_move is %s", p.i_min, p.b_pim_core / 1e9,
			   move == PL_MOVE_UPPER ? "an upper bound (Eq. 8)"
						 : "the resident model's estimate, below Eq. 8's upper bound");
	}
	placement_result_free(&res);
	/* (an answer that says the catalogue did not answer is not kept: the next one asks again) */
	bool keep = !b.oom && !(fill.asked && !fill.fetched);
	if (!fill_release(ctx, &fill, &l, key, keep ? &pr->base : NULL) && keep)
		cache_put(ctx, &l, key, &pr->base);
	loaded_free(&l);
	return reply_finish(&b);
}

/* ---------------------------------------------------------------- calibrate */

static Pim__CalibratePoint *point_msg(struct reply *b, const struct calibrate_point *p)
{
	Pim__CalibratePoint *m = reply_message(b, &pim__calibrate_point__descriptor);
	if (!m)
		return NULL;
	m->theta = p->theta;
	m->sigma = p->sigma;
	m->selected = (uint32_t)p->selected;
	m->tp = (uint32_t)p->tp;
	m->fp = (uint32_t)p->fp;
	m->tn = (uint32_t)p->tn;
	m->fn = (uint32_t)p->fn;
	m->accuracy = p->accuracy;
	return m;
}

/* A calibration in flight: what the sweep needs, owned here (the request is gone when it runs). */
struct calibrate_job {
	uint64_t id;
	struct loaded l;
	struct placement_params p;
	struct calibrate_labels labels;
	struct calibrate_sweep sw;
	double *sigmas;
	struct calibrate_result res;
	struct pim_error err;
	int r;
	Pim__Response *resp;  /* built by run() too: a reply of 100,000s of points takes a while */
};

static Pim__Response *calibrate_reply(struct calibrate_job *j);

static void calibrate_job_run(struct store *s, void *data)
{
	struct calibrate_job *j = data;
	j->r = calibrate_run(j->l.regions, j->l.n_regions, &j->p, &j->labels, &j->sw, &j->res,
			     &j->err);
	j->resp = calibrate_reply(j);
}

static Pim__Response *calibrate_job_finish(void *data, struct rpc_deferred *next)
{
	struct calibrate_job *j = data;
	Pim__Response *r = j->resp;
	j->resp = NULL;
	return r;
}

static void calibrate_job_release(void *data)
{
	struct calibrate_job *j = data;
	calibrate_result_free(&j->res);
	calibrate_labels_free(&j->labels);
	loaded_free(&j->l);
	free(j->sigmas);
	if (j->resp)
		pim__response__free_unpacked(j->resp, NULL);
	free(j);
}

static Pim__Response *calibrate_reply(struct calibrate_job *j)
{
	struct calibrate_result *res = &j->res;
	struct reply b;

	if (j->r < 0)
		return reply_error_from(j->id, &j->err);
	size_t n_points = res->n_thetas * res->n_sigmas;
	Pim__CalibrateReply *cr = reply_start(&b, j->id, PIM__RESPONSE__BODY_CALIBRATE);
	if (!cr)
		return reply_finish(&b);
	cr->labelled = (uint32_t)res->n_labelled;
	cr->beneficial = (uint32_t)res->n_beneficial;
	cr->best = (uint32_t)res->best;
	cr->points = reply_calloc(&b, n_points, sizeof *cr->points);
	for (size_t i = 0; cr->points && i < n_points; i++) {
		Pim__CalibratePoint *m = point_msg(&b, &res->points[i]);
		if (!m)
			break;
		cr->points[cr->n_points++] = m;
	}
	cr->suggestions = reply_calloc(&b, res->n_sigmas, sizeof *cr->suggestions);
	cr->suggestion_lo = reply_calloc(&b, res->n_sigmas, sizeof *cr->suggestion_lo);
	cr->suggestion_hi = reply_calloc(&b, res->n_sigmas, sizeof *cr->suggestion_hi);
	for (size_t i = 0; cr->suggestions && cr->suggestion_lo && cr->suggestion_hi && i < res->n_sigmas;
	     i++) {
		Pim__CalibratePoint *m = point_msg(&b, &res->suggestions[i].at);
		if (!m)
			break;
		m->theta = res->suggestions[i].theta;
		cr->suggestions[cr->n_suggestions++] = m;
		cr->suggestion_lo[cr->n_suggestion_lo++] = res->suggestions[i].lo;
		cr->suggestion_hi[cr->n_suggestion_hi++] = res->suggestions[i].hi;
	}
	return reply_finish(&b);
}

Pim__Response *placement_rpc_calibrate(struct rpc_context *ctx, const Pim__Request *req,
				       struct rpc_deferred *defer)
{
	const Pim__Calibrate *q = req->calibrate;
	struct pim_error err = { 0 };
	struct calibrate_sweep sw = calibrate_sweep_default();

	if (q->n_sigmas > PLACEMENT_MAX_SIGMAS)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "%zu sigma values; at most %d", q->n_sigmas, PLACEMENT_MAX_SIGMAS);
	if (q->theta_lo)
		sw.theta_lo = q->theta_lo;
	if (q->theta_hi)
		sw.theta_hi = q->theta_hi;
	if (q->theta_step)
		sw.theta_step = q->theta_step;
	sw.n_sigmas = q->n_sigmas;
	/* Every point goes into the reply (about 40 bytes each): refuse a sweep that cannot. */
	if (!(sw.theta_step > 0) || !(sw.theta_hi >= sw.theta_lo) || !isfinite(sw.theta_hi) ||
	    !isfinite(sw.theta_lo))
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "calibrate: theta needs lo <= hi and a positive step");
	double points = (floor((sw.theta_hi - sw.theta_lo) / sw.theta_step) + 1) *
			(double)(sw.n_sigmas ? sw.n_sigmas : 1);
	double max_points = (double)ctx->max_frame_bytes / 48;
	if (points > max_points)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "calibrate: a sweep of %.0f points does not fit a reply of "
				   "max_frame_bytes %u (at most %.0f points): use a larger theta step",
				   points, ctx->max_frame_bytes, max_points);
	struct calibrate_job *j = calloc(1, sizeof *j);
	if (!j)
		return NULL;
	j->id = req->id;
	j->sw = sw;
	if (q->n_sigmas) {
		j->sigmas = malloc(q->n_sigmas * sizeof *j->sigmas);
		if (!j->sigmas) {
			free(j);
			return NULL;
		}
		memcpy(j->sigmas, q->sigmas, q->n_sigmas * sizeof *j->sigmas);
	}
	j->sw.sigmas = j->sigmas;
	/* The store and the labels are read here, on the event loop; only the sweep moves. */
	const char *csv = q->labels_csv ? q->labels_csv : "";
	if (merge_params(ctx, q->params, &j->p, &err) < 0 || load(ctx, q->model, &j->l, NULL, &err) < 0 ||
	    calibrate_parse_labels(csv, strlen(csv), j->l.regions, j->l.n_regions, &j->labels,
				   &err) < 0) {
		calibrate_job_release(j);
		return reply_error_from(req->id, &err);
	}
	struct rpc_deferred job = { .run = calibrate_job_run, .finish = calibrate_job_finish,
				    .release = calibrate_job_release, .data = j };
	return reply_defer(defer, &job);
}

/* ---------------------------------------------------------------- decisions for the client */

/* The bitmaps of known and offloaded regions, and the weakest evidence an offload rests on. */
static void decisions_fill(Pim__DecisionsReply *dr, const struct loaded *l,
			   const struct placement_result *res)
{
	uint8_t *known = dr->known_bitmap.data, *bits = dr->pim_bitmap.data;
	Pim__Evidence weakest = PIM__EVIDENCE__EVIDENCE_COUNTERS;

	for (size_t i = 0; i < l->n_regions; i++)
		known[l->regions[i].id / 8] |= (uint8_t)(1u << (l->regions[i].id % 8));
	for (size_t i = 0; i < l->n_regions; i++)
		if (res->estimates[0].side[i] == PL_PIM) {
			uint32_t id = l->regions[i].id;
			struct placement_decision d;
			bits[id / 8] |= (uint8_t)(1u << (id % 8));
			dr->offloaded++;
			/* estimate < imported < counters, as evidence goes */
			placement_decision_get(res, 0, i, &d);
			Pim__Evidence ev = (Pim__Evidence)d.evidence;
			if (ev == PIM__EVIDENCE__EVIDENCE_ESTIMATE ||
			    (ev == PIM__EVIDENCE__EVIDENCE_IMPORTED && weakest == PIM__EVIDENCE__EVIDENCE_COUNTERS))
				weakest = ev;
		}
	dr->evidence = dr->offloaded ? weakest : PIM__EVIDENCE__EVIDENCE_NONE;
}

Pim__Response *placement_rpc_decisions(struct rpc_context *ctx, const Pim__Request *req)
{
	const Pim__Decisions *q = req->decisions;
	struct pim_error err = { 0 };
	struct placement_params p;
	struct loaded l;
	struct placement_result res = { 0 };
	int gran = PL_GRAN_LOOP, move = PL_MOVE_UPPER;

	if (q->granularity && *q->granularity && (gran = placement_granularity_from_name(q->granularity)) < 0)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "granularity \"%.*s\" is not one of loop, operator, block",
				   TEXT_ECHO(q->granularity, 32));
	if (q->movement && *q->movement && (move = placement_movement_model_from_name(q->movement)) < 0)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "movement \"%.*s\" is not one of upper, resident",
				   TEXT_ECHO(q->movement, 32));
	struct catalogue_fill fill;
	if (merge_params(ctx, q->params, &p, &err) < 0 || fill_from_catalogue(ctx, q->model, &fill, &err) < 0)
		return reply_error_from(req->id, &err);
	char key[1024];
	cache_key(key, sizeof key, "decisions-v1", &p, placement_granularity_name(gran),
		  placement_movement_model_name(move), &p.n_core, 1, false);
	Pim__DecisionsReply *cached = fill.rows || fill.ask ? NULL : cache_get(ctx, q->model, key, &pim__decisions_reply__descriptor);
	if (cached) {
		ctx->answer_reusable = true; /* (read from the store) */
		return reply_wrap(req->id, PIM__RESPONSE__BODY_DECISIONS, cached);
	}
	if (load(ctx, q->model, &l, &fill, &err) < 0) {
		fill_release(ctx, &fill, NULL, NULL, NULL);
		loaded_free(&l);
		return reply_error_from(req->id, &err);
	}
	uint64_t limit64 = 0;
	for (size_t i = 0; i < l.n_regions; i++)
		if (l.regions[i].id >= limit64)
			limit64 = (uint64_t)l.regions[i].id + 1;
	if (limit64 > PLACEMENT_DECISIONS_MAX_ID) {
		fill_release(ctx, &fill, NULL, NULL, NULL);
		loaded_free(&l);
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "region ids up to %llu: the client's lookup table allows ids below %u",
				   (unsigned long long)(limit64 - 1), PLACEMENT_DECISIONS_MAX_ID);
	}
	uint32_t limit = (uint32_t)limit64;
	struct placement_query pq = { .granularity = (enum placement_granularity)gran,
				      .movement = (enum placement_movement_model)move };
	if (placement_run(l.regions, l.n_regions, &p, &pq, &res, &err) < 0) {
		fill_release(ctx, &fill, NULL, NULL, NULL);
		loaded_free(&l);
		return reply_error_from(req->id, &err);
	}
	struct reply b;
	Pim__DecisionsReply *dr = reply_start(&b, req->id, PIM__RESPONSE__BODY_DECISIONS);
	if (dr) {
		dr->model = reply_strdup(&b, l.summary.name);
		dr->id_limit = limit;
		dr->pim_bitmap.data = reply_calloc(&b, (limit + 7) / 8 + 1, 1);
		dr->pim_bitmap.len = (limit + 7) / 8;
		dr->known_bitmap.data = reply_calloc(&b, (limit + 7) / 8 + 1, 1);
		dr->known_bitmap.len = (limit + 7) / 8;
	}
	if (!b.oom)
		decisions_fill(dr, &l, &res);
	placement_result_free(&res);
	if (!fill_release(ctx, &fill, &l, key, !b.oom ? &dr->base : NULL) && !b.oom)
		cache_put(ctx, &l, key, &dr->base);
	loaded_free(&l);
	return reply_finish(&b);
}
