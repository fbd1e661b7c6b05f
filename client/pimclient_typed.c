/* SPDX-License-Identifier: MIT */
/*
 * libpimclient's typed placement, decisions, calibration, import, B_cpu probe and catalogue
 * calls: pim.h's structs in, a request on the wire, the answer read into pim.h's structs.  Strings of a result point into
 * the decoded answer, which the result keeps until its free call.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "pimclient_priv.h"

#define CORE_COUNTS_MAX 16u /* placement_rpc.h PLACEMENT_MAX_CORE_COUNTS */
#define SIGMAS_MAX 16u      /* placement_rpc.h PLACEMENT_MAX_SIGMAS */
#define DECISIONS_ID_LIMIT_MAX (16u * 1024u * 1024u) /* PLACEMENT_DECISIONS_MAX_ID */

static void params_to_wire(Pim__PlacementParams *w, const struct pim_placement_params *p)
{
	pim__placement_params__init(w);
	if (!p)
		return;
	w->n_core = p->n_core;
	w->f_pim = p->f_pim;
	w->i_min = p->i_min;
	w->t_ctx = p->t_ctx;
	w->b_cpu = p->b_cpu;
	w->theta = p->theta;
	w->theta_ratio = p->theta_ratio;
	w->sigma = p->sigma;
	w->b_rd = p->b_rd;
	w->b_wb = p->b_wb;
	w->b_pim_core = p->b_pim_core;
	w->line_bytes = p->line_bytes;
	w->b_cpu_spread = p->b_cpu_spread;
}

static void params_from_wire(struct pim_placement_params *p, const Pim__PlacementParams *w)
{
	memset(p, 0, sizeof *p);
	if (!w)
		return;
	*p = (struct pim_placement_params){
		.n_core = w->n_core, .f_pim = w->f_pim, .i_min = w->i_min, .t_ctx = w->t_ctx,
		.b_cpu = w->b_cpu, .theta = w->theta, .theta_ratio = w->theta_ratio, .sigma = w->sigma,
		.b_rd = w->b_rd, .b_wb = w->b_wb, .b_pim_core = w->b_pim_core, .line_bytes = w->line_bytes,
		.b_cpu_spread = w->b_cpu_spread,
	};
}

static enum pim_evidence evidence_from_wire(Pim__Evidence e)
{
	switch (e) {
	case PIM__EVIDENCE__EVIDENCE_COUNTERS: return PIM_EVIDENCE_COUNTERS;
	case PIM__EVIDENCE__EVIDENCE_ESTIMATE: return PIM_EVIDENCE_ESTIMATE;
	case PIM__EVIDENCE__EVIDENCE_IMPORTED: return PIM_EVIDENCE_IMPORTED;
	default: return PIM_EVIDENCE_NONE;
	}
}

static enum pim_cond_state cond_from_wire(Pim__CondState s)
{
	switch (s) {
	case PIM__COND_STATE__COND_TRUE: return PIM_COND_TRUE;
	case PIM__COND_STATE__COND_FALSE: return PIM_COND_FALSE;
	case PIM__COND_STATE__COND_NO_DATA: return PIM_COND_NO_DATA;
	default: return PIM_COND_SKIPPED;
	}
}

static void decision_from_wire(struct pim_region_decision *d, const Pim__RegionDecision *w)
{
	*d = (struct pim_region_decision){
		.region_id = w->region_id, .name = w->name, .op = w->op, .order = w->order,
		.n_par = w->n_par, .n_total = w->n_total, .trip = w->trip, .pim = w->pim,
		.evidence = evidence_from_wire(w->evidence), .bw_estimated = w->bw_estimated,
		.t_host = w->t_host, .reason = w->reason, .t_pim = w->t_pim, .fetch_bytes = w->fetch_bytes,
		.flush_bytes = w->flush_bytes, .unit_size = w->unit_size,
		.t_pim_term = w->t_pim_term ? w->t_pim_term : "", .marginal = w->marginal,
		.marginal_on = w->marginal_on,
	};
	/* C1..C4 or nothing: a partial set would shift the conditions' meaning */
	if (w->n_conditions >= 4) {
		d->n_conditions = 4;
		for (int c = 0; c < 4; c++) {
			const Pim__Condition *k = w->conditions[c];
			d->conditions[c] = (struct pim_condition){ .state = cond_from_wire(k->state), .lhs = k->lhs,
								   .rhs = k->rhs, .noise = k->noise,
								   .marginal = k->marginal };
		}
	}
}

static int estimate_from_wire(pim_client *c, struct pim_placement_estimate *e, const Pim__PlacementEstimate *w)
{
	*e = (struct pim_placement_estimate){
		.n_core = w->n_core, .offloaded = w->offloaded, .rejected_stage1 = w->rejected_stage1,
		.rejected_stage2 = w->rejected_stage2, .t_cpu = w->t_cpu, .t_host = w->t_host,
		.t_pim = w->t_pim, .t_hybrid = w->t_hybrid, .speedup = w->speedup,
		.captured_share = w->captured_share, .residual_share = w->residual_share, .bound = w->bound,
		.bound_movement = w->bound_movement, .t_pim_compute = w->t_pim_compute,
		.t_pim_bandwidth = w->t_pim_bandwidth, .t_pim_measured = w->t_pim_measured,
		.pim_compute = w->pim_compute, .pim_bandwidth = w->pim_bandwidth,
		.pim_measured = w->pim_measured, .marginal = w->marginal, .marginal_pim = w->marginal_pim,
	};
	if (w->movement) {
		const Pim__Movement *m = w->movement;
		e->movement = (struct pim_movement){
			.model = m->model, .segments = m->segments, .transitions = m->transitions,
			.fetch_bytes = m->fetch_bytes, .flush_bytes = m->flush_bytes, .t_switch = m->t_switch,
			.t_fetch = m->t_fetch, .t_flush = m->t_flush, .t_move = m->t_move,
		};
	}
	e->n_marginal_by_condition = w->n_marginal_by_condition < 4 ? w->n_marginal_by_condition : 4;
	for (size_t i = 0; i < e->n_marginal_by_condition; i++)
		e->marginal_by_condition[i] = w->marginal_by_condition[i];
	if (w->n_regions) {
		e->regions = calloc(w->n_regions, sizeof *e->regions);
		if (!e->regions)
			return pimclient_fail(c, -ENOMEM, "out of memory");
		for (size_t i = 0; i < w->n_regions; i++)
			decision_from_wire(&e->regions[i], w->regions[i]);
		e->n_regions = w->n_regions;
	}
	return 0;
}

void pimclient_probe_from_wire(struct pim_bandwidth_probe *p, const Pim__BandwidthProbe *b)
{
	if (!b) {
		*p = (struct pim_bandwidth_probe){ 0 };
		return;
	}
	*p = (struct pim_bandwidth_probe){
		.b_cpu = b->b_cpu, .source = b->source, .measured = b->measured, .spread = b->spread,
		.method = b->method, .measured_at = b->measured_at, .busy = b->busy, .load = b->load,
		.host = b->host,
	};
}

void pim_placement_free(struct pim_placement *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_estimates; i++)
		free(p->estimates[i].regions);
	free(p->estimates);
	if (p->internal_)
		pim__response__free_unpacked(p->internal_, NULL);
	free(p);
}

/* The answer read into a pim_placement, which takes resp over (also on failure). */
static int placement_from_wire(pim_client *c, Pim__Response *resp, struct pim_placement **out)
{
	const Pim__PlacementReply *w = resp->placement;
	struct pim_placement *p = calloc(1, sizeof *p);
	int r = 0;

	if (!p) {
		pim__response__free_unpacked(resp, NULL);
		return pimclient_fail(c, -ENOMEM, "out of memory");
	}
	p->internal_ = resp;
	p->model = w->model;
	p->granularity = w->granularity;
	p->movement = w->movement;
	p->platform = w->platform;
	params_from_wire(&p->params, w->params);
	p->cached = w->cached;
	p->regions_with_metrics = w->regions_with_metrics;
	p->notes = (const char *const *)w->notes;
	p->n_notes = w->n_notes;
	pimclient_probe_from_wire(&p->b_cpu_probe, w->b_cpu_probe);
	if (w->catalogue) {
		const Pim__CatalogueOrigin *k = w->catalogue;
		p->catalogue = (struct pim_catalogue_origin){
			.host = k->host, .measured_at = k->measured_at, .backend = k->backend,
			.regions = k->regions, .hosts = k->hosts, .model_hash = k->model_hash,
			.platform_key = k->platform_key, .fetched = k->fetched,
		};
	}
	if (w->n_estimates) {
		p->estimates = calloc(w->n_estimates, sizeof *p->estimates);
		if (!p->estimates)
			r = pimclient_fail(c, -ENOMEM, "out of memory");
		for (size_t i = 0; r == 0 && i < w->n_estimates; i++) {
			r = estimate_from_wire(c, &p->estimates[i], w->estimates[i]);
			p->n_estimates = i + 1;
		}
	}
	if (r < 0) {
		pim_placement_free(p);
		return r;
	}
	*out = p;
	return 0;
}

/* rq's core counts checked here, so that a wrong count says so before anything is sent. */
static int check_request(pim_client *c, const struct pim_placement_request *rq)
{
	if (rq && rq->n_core_counts > CORE_COUNTS_MAX)
		return pimclient_fail(c, -EINVAL, "%zu core counts: at most %u", rq->n_core_counts,
				      CORE_COUNTS_MAX);
	if (rq && rq->n_core_counts && !rq->core_counts)
		return pimclient_fail(c, -EINVAL, "%zu core counts but no array", rq->n_core_counts);
	return 0;
}

int pim_placement_get(pim_client *c, const char *model, const struct pim_placement_request *rq,
		      struct pim_placement **out)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__Placement body = PIM__PLACEMENT__INIT;
	Pim__PlacementParams params;
	Pim__Response *resp;
	int r;

	*out = NULL;
	pthread_mutex_lock(&c->lock);
	if (!model || !*model) {
		r = pimclient_fail(c, -EINVAL, "no model name");
		goto out;
	}
	if ((r = check_request(c, rq)) < 0)
		goto out;
	params_to_wire(&params, rq ? &rq->params : NULL);
	body.model = (char *)model;
	body.params = &params;
	if (rq) {
		if (rq->granularity)
			body.granularity = (char *)rq->granularity;
		if (rq->movement)
			body.movement = (char *)rq->movement;
		body.core_counts = (double *)rq->core_counts;
		body.n_core_counts = rq->n_core_counts;
		body.summary_only = rq->summary_only != 0;
	}
	req.body_case = PIM__REQUEST__BODY_PLACEMENT;
	req.placement = &body;
	r = pimclient_call(c, &req, PIM__RESPONSE__BODY_PLACEMENT, &resp);
	if (r == 0)
		r = placement_from_wire(c, resp, out);
out:
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* ---------------------------------------------------------------- decisions */

struct decisions_box {
	struct pim_decisions pub;
	char model[129];
	uint8_t place[];
};

void pim_decisions_free(struct pim_decisions *d)
{
	free(d); /* pub is the first member of its box */
}

int pim_decisions_get(pim_client *c, const char *model, const struct pim_placement_request *rq,
		      struct pim_decisions **out)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__Decisions body = PIM__DECISIONS__INIT;
	Pim__PlacementParams params;
	Pim__Response *resp;
	int r;

	*out = NULL;
	pthread_mutex_lock(&c->lock);
	if (!model || !*model) {
		r = pimclient_fail(c, -EINVAL, "no model name");
		goto out;
	}
	params_to_wire(&params, rq ? &rq->params : NULL);
	body.model = (char *)model;
	body.params = &params;
	if (rq && rq->granularity)
		body.granularity = (char *)rq->granularity;
	if (rq && rq->movement)
		body.movement = (char *)rq->movement;
	req.body_case = PIM__REQUEST__BODY_DECISIONS;
	req.decisions = &body;
	r = pimclient_call(c, &req, PIM__RESPONSE__BODY_DECISIONS, &resp);
	if (r < 0)
		goto out;
	const Pim__DecisionsReply *w = resp->decisions;
	size_t bytes = (w->id_limit + 7u) / 8u;
	struct decisions_box *b = NULL;
	if (w->id_limit > DECISIONS_ID_LIMIT_MAX || w->pim_bitmap.len < bytes || w->known_bitmap.len < bytes)
		r = pimclient_fail(c, -EBADMSG, "pimd sent an inconsistent decision table");
	else if (!(b = calloc(1, sizeof *b + w->id_limit + 1)))
		r = pimclient_fail(c, -ENOMEM, "out of memory");
	else {
		pimclient_copy_str(b->model, sizeof b->model, w->model && *w->model ? w->model : model);
		for (uint32_t i = 0; i < w->id_limit; i++)
			b->place[i] = !(w->known_bitmap.data[i / 8] & (1u << (i % 8))) ? PIM_NO_REGION
				      : (w->pim_bitmap.data[i / 8] & (1u << (i % 8)))  ? PIM_ON_PIM
											: PIM_ON_HOST;
		b->pub = (struct pim_decisions){ .model = b->model, .id_limit = w->id_limit,
						 .offloaded = w->offloaded,
						 .evidence = evidence_from_wire(w->evidence), .place = b->place };
		*out = &b->pub;
	}
	pim__response__free_unpacked(resp, NULL);
out:
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* ---------------------------------------------------------------- calibration */

void pim_calibration_free(struct pim_calibration *cal)
{
	if (!cal)
		return;
	free(cal->points);
	free(cal->suggestions);
	free(cal->suggestion_lo);
	free(cal->suggestion_hi);
	free(cal);
}

static void point_from_wire(struct pim_calibrate_point *p, const Pim__CalibratePoint *w)
{
	*p = (struct pim_calibrate_point){ .theta = w->theta, .sigma = w->sigma, .selected = w->selected,
					   .tp = w->tp, .fp = w->fp, .tn = w->tn, .fn = w->fn,
					   .accuracy = w->accuracy };
}

int pim_calibrate(pim_client *c, const char *model, const struct pim_calibrate_request *rq,
		  struct pim_calibration **out)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__Calibrate body = PIM__CALIBRATE__INIT;
	Pim__PlacementParams params;
	Pim__Response *resp;
	int r;

	*out = NULL;
	pthread_mutex_lock(&c->lock);
	if (!model || !*model || !rq || !rq->labels_csv) {
		r = pimclient_fail(c, -EINVAL, "calibration needs a model and its labels");
		goto out;
	}
	if (rq->n_sigmas > SIGMAS_MAX || (rq->n_sigmas && !rq->sigmas)) {
		r = pimclient_fail(c, -EINVAL, "%zu sigmas: at most %u", rq->n_sigmas, SIGMAS_MAX);
		goto out;
	}
	params_to_wire(&params, &rq->params);
	body.model = (char *)model;
	body.labels_csv = (char *)rq->labels_csv;
	body.params = &params;
	body.theta_lo = rq->theta_lo;
	body.theta_hi = rq->theta_hi;
	body.theta_step = rq->theta_step;
	body.sigmas = (double *)rq->sigmas;
	body.n_sigmas = rq->n_sigmas;
	req.body_case = PIM__REQUEST__BODY_CALIBRATE;
	req.calibrate = &body;
	r = pimclient_call(c, &req, PIM__RESPONSE__BODY_CALIBRATE, &resp);
	if (r < 0)
		goto out;
	const Pim__CalibrateReply *w = resp->calibrate;
	size_t ns = w->n_suggestions;
	struct pim_calibration *k = calloc(1, sizeof *k);
	if (k) {
		k->points = calloc(w->n_points ? w->n_points : 1, sizeof *k->points);
		k->suggestions = calloc(ns ? ns : 1, sizeof *k->suggestions);
		k->suggestion_lo = calloc(ns ? ns : 1, sizeof *k->suggestion_lo);
		k->suggestion_hi = calloc(ns ? ns : 1, sizeof *k->suggestion_hi);
	}
	if (!k || !k->points || !k->suggestions || !k->suggestion_lo || !k->suggestion_hi)
		r = pimclient_fail(c, -ENOMEM, "out of memory");
	else if (w->n_suggestion_lo < ns || w->n_suggestion_hi < ns)
		r = pimclient_fail(c, -EBADMSG, "pimd sent suggestions without their intervals");
	else {
		k->labelled = w->labelled;
		k->beneficial = w->beneficial;
		for (size_t i = 0; i < w->n_points; i++)
			point_from_wire(&k->points[i], w->points[i]);
		k->n_points = w->n_points;
		for (size_t i = 0; i < ns; i++) {
			point_from_wire(&k->suggestions[i], w->suggestions[i]);
			k->suggestion_lo[i] = w->suggestion_lo[i];
			k->suggestion_hi[i] = w->suggestion_hi[i];
		}
		k->n_suggestions = ns;
		k->best = w->best;
	}
	pim__response__free_unpacked(resp, NULL);
	if (r < 0)
		pim_calibration_free(k);
	else
		*out = k;
out:
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* ---------------------------------------------------------------- metrics, B_cpu, catalogue */

/* A call answered with one message read into a result of size bytes whose internal_ keeps the
 * answer (at offset internal_off): the result, or NULL with the failure recorded. */
static void *boxed_call(pim_client *c, Pim__Request *req, Pim__Response__BodyCase want, size_t size,
			size_t internal_off, Pim__Response **resp, int *r)
{
	void *box;

	if ((*r = pimclient_call(c, req, want, resp)) < 0)
		return NULL;
	if (!(box = calloc(1, size))) {
		pim__response__free_unpacked(*resp, NULL);
		*r = pimclient_fail(c, -ENOMEM, "out of memory");
		return NULL;
	}
	*(void **)((char *)box + internal_off) = *resp;
	return box;
}

static void boxed_free(void *box, void *internal)
{
	if (internal)
		pim__response__free_unpacked(internal, NULL);
	free(box);
}

void pimclient_metrics_from_wire(struct pim_region_metrics *m, const Pim__RegionMetrics *w)
{
	*m = (struct pim_region_metrics){
		.region_id = w->region_id, .evidence = evidence_from_wire(w->evidence), .t_host = w->t_host,
		.t_host_spread = w->t_host_spread, .have_n_rd = w->have_n_rd, .n_rd = w->n_rd,
		.have_store = w->have_store, .c_store = w->c_store, .c_be1 = w->c_be1, .c_be2 = w->c_be2,
		.c_be3 = w->c_be3, .bw_read_estimate = w->bw_read_estimate, .source = w->source,
		.updated_at = w->updated_at, .source_b_cpu = w->source_b_cpu, .origin_host = w->origin_host,
		.origin_measured_at = w->origin_measured_at, .origin_backend = w->origin_backend,
	};
}

int pim_import_perf(pim_client *c, const char *model, const struct pim_import_request *rq,
		    struct pim_import **out)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__ImportPerf body = PIM__IMPORT_PERF__INIT;
	Pim__Response *resp;
	int r;

	*out = NULL;
	pthread_mutex_lock(&c->lock);
	if (!model || !*model || !rq || !rq->csv) {
		r = pimclient_fail(c, -EINVAL, "an import needs a model and its counts");
		goto out;
	}
	body.model = (char *)model;
	body.region_id = rq->region_id;
	body.csv = (char *)rq->csv;
	body.t_host = rq->t_host;
	body.executions = rq->executions;
	body.b_cpu = rq->b_cpu;
	req.body_case = PIM__REQUEST__BODY_IMPORT_PERF;
	req.import_perf = &body;
	struct pim_import *imp = boxed_call(c, &req, PIM__RESPONSE__BODY_IMPORT_PERF, sizeof *imp,
					    offsetof(struct pim_import, internal_), &resp, &r);
	if (!imp)
		goto out;
	const Pim__ImportPerfReply *w = resp->import_perf;
	const Pim__RegionMetrics *m = w->metrics;
	if (!m) {
		pim_import_free(imp);
		r = pimclient_fail(c, -EBADMSG, "pimd answered an import without its metrics");
		goto out;
	}
	pimclient_metrics_from_wire(&imp->metrics, m);
	imp->notes = (const char *const *)w->notes;
	imp->n_notes = w->n_notes;
	*out = imp;
out:
	pthread_mutex_unlock(&c->lock);
	return r;
}

void pim_import_free(struct pim_import *imp)
{
	if (imp)
		boxed_free(imp, imp->internal_);
}

int pim_platform_probe(pim_client *c, struct pim_probe_result **out)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__ProbeBandwidth body = PIM__PROBE_BANDWIDTH__INIT;
	Pim__Response *resp;
	int r;

	req.body_case = PIM__REQUEST__BODY_PROBE_BANDWIDTH;
	req.probe_bandwidth = &body;
	pthread_mutex_lock(&c->lock);
	struct pim_probe_result *p = boxed_call(c, &req, PIM__RESPONSE__BODY_PROBE_BANDWIDTH, sizeof *p,
						offsetof(struct pim_probe_result, internal_), &resp, &r);
	if (p) {
		pimclient_probe_from_wire(&p->previous, resp->probe_bandwidth->previous);
		pimclient_probe_from_wire(&p->probe, resp->probe_bandwidth->probe);
	}
	*out = p;
	pthread_mutex_unlock(&c->lock);
	return r;
}

void pim_probe_result_free(struct pim_probe_result *p)
{
	if (p)
		boxed_free(p, p->internal_);
}

int pim_catalogue_status_get(pim_client *c, struct pim_catalogue_status **out)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__CatalogueStatus body = PIM__CATALOGUE_STATUS__INIT;
	Pim__Response *resp;
	int r;

	req.body_case = PIM__REQUEST__BODY_CATALOGUE_STATUS;
	req.catalogue_status = &body;
	pthread_mutex_lock(&c->lock);
	struct pim_catalogue_status *st = boxed_call(c, &req, PIM__RESPONSE__BODY_CATALOGUE_STATUS, sizeof *st,
						     offsetof(struct pim_catalogue_status, internal_), &resp, &r);
	if (st) {
		const Pim__CatalogueStatusReply *w = resp->catalogue_status;
		*st = (struct pim_catalogue_status){
			.configured = w->configured, .reachable = w->reachable, .target = w->target,
			.host_id = w->host_id, .platform_key = w->platform_key, .outbox_depth = w->outbox_depth,
			.outbox_failed = w->outbox_failed, .last_publish_at = w->last_publish_at,
			.published = w->published, .conflicts = w->conflicts, .last_error = w->last_error,
			.last_error_at = w->last_error_at, .retry_in_ms = w->retry_in_ms,
			.schema_version = w->schema_version, .lookups = w->lookups, .lookup_hits = w->lookup_hits,
			.internal_ = resp,
		};
	}
	*out = st;
	pthread_mutex_unlock(&c->lock);
	return r;
}

void pim_catalogue_status_free(struct pim_catalogue_status *st)
{
	if (st)
		boxed_free(st, st->internal_);
}

int pim_catalogue_list_get(pim_client *c, unsigned limit, struct pim_catalogue_list **out)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__CatalogueList body = PIM__CATALOGUE_LIST__INIT;
	Pim__Response *resp;
	int r;

	body.limit = limit;
	req.body_case = PIM__REQUEST__BODY_CATALOGUE_LIST;
	req.catalogue_list = &body;
	pthread_mutex_lock(&c->lock);
	struct pim_catalogue_list *l = boxed_call(c, &req, PIM__RESPONSE__BODY_CATALOGUE_LIST, sizeof *l,
						  offsetof(struct pim_catalogue_list, internal_), &resp, &r);
	if (l) {
		const Pim__CatalogueListReply *w = resp->catalogue_list;
		l->truncated = w->truncated;
		l->platform_key = w->platform_key;
		if (w->n_entries && !(l->entries = calloc(w->n_entries, sizeof *l->entries))) {
			pim_catalogue_list_free(l);
			l = NULL;
			r = pimclient_fail(c, -ENOMEM, "out of memory");
		}
		for (size_t i = 0; l && i < w->n_entries; i++) {
			const Pim__CatalogueListEntry *e = w->entries[i];
			l->entries[i] = (struct pim_catalogue_entry){
				.model_hash = e->model_hash, .model_name = e->model_name,
				.platform_key = e->platform_key, .hosts = e->hosts, .runs = e->runs,
				.imports = e->imports, .last_measured_at = e->last_measured_at, .regions = e->regions,
			};
		}
		if (l)
			l->n_entries = w->n_entries;
	}
	*out = l;
	pthread_mutex_unlock(&c->lock);
	return r;
}

void pim_catalogue_list_free(struct pim_catalogue_list *l)
{
	if (l) {
		free(l->entries);
		boxed_free(l, l->internal_);
	}
}

/* ---------------------------------------------------------------- JIT-Q plans, whole */

#define JITQ_SETTINGS_MAX 64 /* pim.proto JitqPlan.settings */

void pim_jitq_plan_reply_free(struct pim_jitq_plan_reply *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_phases; i++) {
		free(p->phases[i].launches);
		free(p->phases[i].blocks);
	}
	free(p->phases);
	boxed_free(p, p->internal_);
}

static int phase_from_wire(struct pim_jitq_plan_phase *d, const Pim__JitqPhase *w)
{
	*d = (struct pim_jitq_plan_phase){
		.phase = w->phase, .lookahead = w->lookahead, .accel_s = w->accel_s, .pim_s = w->pim_s,
		.stall_s = w->stall_s, .pim_bound = w->pim_bound, .overlap_s = w->overlap_s,
		.slack_min = w->slack_min, .slack_median = w->slack_median, .resident_bytes = w->resident_bytes,
	};
	if ((w->n_launches && !(d->launches = calloc(w->n_launches, sizeof *d->launches))) ||
	    (w->n_blocks && !(d->blocks = calloc(w->n_blocks, sizeof *d->blocks))))
		return -ENOMEM;
	for (size_t i = 0; i < w->n_launches; i++) {
		const Pim__JitqLaunch *l = w->launches[i];
		d->launches[i] = (struct pim_jitq_plan_launch){
			.block = l->block, .boundary = l->boundary, .phase = l->phase, .tensor = l->tensor,
			.direction = l->direction, .rows = l->rows, .cols = l->cols, .bytes = l->bytes,
			.pim_s = l->pim_s, .chan_first = l->chan_first, .chan_count = l->chan_count,
		};
	}
	d->n_launches = w->n_launches;
	for (size_t i = 0; i < w->n_blocks; i++) {
		const Pim__JitqBlock *k = w->blocks[i];
		d->blocks[i] = (struct pim_jitq_plan_block){
			.accel_s = k->accel_s, .pim_s = k->pim_s, .slack = k->slack, .stall_s = k->stall_s,
			.launch_s = k->launch_s, .ready_s = k->ready_s, .start_s = k->start_s,
		};
	}
	d->n_blocks = w->n_blocks;
	return 0;
}

int pim_jitq_plan_get(pim_client *c, const struct pim_jitq_plan_request *rq, struct pim_jitq_plan_reply **out)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__JitqPlan body = PIM__JITQ_PLAN__INIT;
	Pim__JitqModel model = PIM__JITQ_MODEL__INIT;
	Pim__Response *resp;
	int r;

	*out = NULL;
	pthread_mutex_lock(&c->lock);
	if (rq->n_settings > JITQ_SETTINGS_MAX || (rq->n_settings && !rq->settings)) {
		r = pimclient_fail(c, -EINVAL, "%zu settings: at most %u", rq->n_settings, JITQ_SETTINGS_MAX);
		goto out;
	}
	if (rq->n_times && (!rq->fwd_s || !rq->bwd_s)) {
		r = pimclient_fail(c, -EINVAL, "measured times need both phases'");
		goto out;
	}
	if (rq->preset)
		model.preset = (char *)rq->preset;
	model.layers = rq->layers;
	model.hidden = rq->hidden;
	model.heads = rq->heads;
	model.seq = rq->seq;
	model.batch = rq->batch;
	model.tslice = rq->tslice;
	model.vocab = rq->vocab;
	model.pipeline = rq->pipeline;
	body.model = &model;
	if (rq->format)
		body.format = (char *)rq->format;
	if (rq->source)
		body.source = (char *)rq->source;
	if (rq->mapping)
		body.mapping = (char *)rq->mapping;
	if (rq->config)
		body.config = (char *)rq->config;
	body.peak_flops = rq->peak_flops;
	body.efficiency = rq->efficiency;
	body.fwd_times = (double *)rq->fwd_s;
	body.bwd_times = (double *)rq->bwd_s;
	body.n_fwd_times = body.n_bwd_times = rq->n_times;
	body.max_lookahead = rq->max_lookahead;
	body.per_block = rq->per_block != 0;
	body.pim_stacks = rq->pim_stacks;
	body.settings = (char **)rq->settings;
	body.n_settings = rq->n_settings;
	body.speedup_mx9 = rq->speedup_mx9;
	body.speedup_mx6 = rq->speedup_mx6;
	body.speedup_mx4 = rq->speedup_mx4;
	req.body_case = PIM__REQUEST__BODY_JITQ_PLAN;
	req.jitq_plan = &body;
	struct pim_jitq_plan_reply *p = boxed_call(c, &req, PIM__RESPONSE__BODY_JITQ_PLAN, sizeof *p,
						   offsetof(struct pim_jitq_plan_reply, internal_), &resp, &r);
	if (!p)
		goto out;
	const Pim__JitqPlanReply *w = resp->jitq_plan;
	p->model = w->model;
	p->format = w->format;
	p->source = w->source;
	p->mapping = w->mapping;
	p->kernel = w->kernel;
	p->layers = w->layers;
	p->model_layers = w->model_layers;
	p->pipeline = w->pipeline;
	p->pim_stacks = w->pim_stacks;
	p->pim_tck_ns = w->pim_tck_ns;
	p->loss = w->loss;
	p->loss_stall = w->loss_stall;
	p->loss_interference = w->loss_interference;
	p->text = w->text;
	p->assumptions = (const char *const *)w->assumptions;
	p->n_assumptions = w->n_assumptions;
	if (w->capacity) {
		const Pim__JitqCapacity *k = w->capacity;
		p->has_capacity = 1;
		p->capacity = (struct pim_jitq_capacity){
			.params = k->params, .params_quant = k->params_quant, .master = k->master,
			.grads = k->grads, .optim = k->optim, .acts = k->acts, .lp_both = k->lp_both,
			.lp_one = k->lp_one, .lp_jitq = k->lp_jitq, .total_both = k->total_both,
			.total_one = k->total_one, .total_jitq = k->total_jitq,
			.saved_vs_both = k->saved_vs_both, .saved_vs_one = k->saved_vs_one,
			.pct_vs_both = k->pct_vs_both, .pct_vs_one = k->pct_vs_one,
		};
	}
	if (w->n_phases && !(p->phases = calloc(w->n_phases, sizeof *p->phases)))
		r = -ENOMEM;
	for (size_t i = 0; r == 0 && i < w->n_phases; i++) {
		r = phase_from_wire(&p->phases[i], w->phases[i]);
		p->n_phases = i + 1;
	}
	if (r < 0) {
		pim_jitq_plan_reply_free(p);
		r = pimclient_fail(c, -ENOMEM, "out of memory");
		goto out;
	}
	*out = p;
out:
	pthread_mutex_unlock(&c->lock);
	return r;
}
