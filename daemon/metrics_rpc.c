/* SPDX-License-Identifier: MIT */
/*
 * Region metrics on the wire: ImportPerf (counts a user measured with perf stat, stored as the
 * region's metrics and published to the fleet catalogue labelled imported), and the
 * conversions between the store's metrics and pim.RegionMetrics (placement_rpc.h).
 */
#include "placement_rpc.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "manifest.h"
#include "perfcsv.h"

/* ---------------------------------------------------------------- import-perf */

/* Imported counts go to the fleet catalogue's outbox, labelled imported, with the uid that
 * imported them (never preferred there over a measurement); nothing without a catalogue. */
static int import_for_catalogue(struct rpc_context *ctx, int64_t model_id, uint32_t region, uid_t uid,
				struct pim_error *err)
{
	const struct platform *p = ctx->platform;
	char hash[65];
	int r;

	if (!p->fleet_key[0])
		return 0;
	if ((r = store_model_hash(ctx->store, model_id, hash, err)) < 0)
		return r;
	struct store_outbox_origin o = { .model_hash = hash, .platform_key = p->fleet_key,
					 .platform_json = p->fleet_json, .backend = "imported" };
	return store_outbox_add_import(ctx->store, model_id, p->row, region, uid, &o, err);
}

Pim__Response *placement_rpc_import_perf(struct rpc_context *ctx, const struct rpc_peer *peer,
					 const Pim__Request *req)
{
	const Pim__ImportPerf *q = req->import_perf;
	struct pim_error err = { 0 };
	_cleanup_(freep) struct perfcsv_result *csv = NULL;
	int64_t model_id;
	int k;

	if (!manifest_name_valid(q->model))
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "\"%.*s\" is not a valid model name", TEXT_ECHO(q->model, 64));
	if (!isfinite(q->t_host) || q->t_host < 0)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "t_host must be a finite number of seconds >= 0");
	if (!isfinite(q->b_cpu) || q->b_cpu < 0 || q->b_cpu > PLACEMENT_MAX_B_CPU)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "b_cpu %g: the measuring host's read bandwidth must lie in 0..%g B/s "
				   "(0: unknown)", q->b_cpu, PLACEMENT_MAX_B_CPU);
	if ((k = store_model_id_for(ctx->store, q->model, peer->cred.uid, "import its metrics", &model_id,
				    &err)) < 0)
		return reply_error_from(req->id, &err);
	csv = malloc(sizeof *csv);
	if (!csv)
		return NULL;
	size_t len = q->csv ? strlen(q->csv) : 0;
	if ((k = perfcsv_parse(q->csv ? q->csv : "", len, csv, &err)) < 0)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT, "%s", err.msg);
	uint64_t execs = q->executions ? q->executions : 1;
	double t = q->t_host > 0 ? q->t_host : csv->has_t_host ? csv->t_host_s : 0;
	if (!(t > 0))
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "the CSV has no duration_time or task-clock line: give the region's "
				   "time per execution (--time)");
	if (q->t_host == 0)
		t /= (double)execs;
	struct store_metrics m = { .region_id = q->region_id, .evidence = PL_EVIDENCE_IMPORTED };
	m.t_host = t;
	m.source_b_cpu = q->b_cpu;
	unsigned bit_rd = 1u << EVENTS_ROLE_N_RD, bit_store = 1u << EVENTS_ROLE_C_STORE;
	unsigned bits_be = (1u << EVENTS_ROLE_BE1) | (1u << EVENTS_ROLE_BE2) | (1u << EVENTS_ROLE_BE3);
	if (csv->present & bit_rd) {
		m.have_n_rd = true;
		m.n_rd = (double)csv->value[EVENTS_ROLE_N_RD] / (double)execs;
	}
	if ((csv->present & bit_store) && (csv->present & bits_be) == bits_be) {
		m.have_store = true;
		m.c_store = (double)csv->value[EVENTS_ROLE_C_STORE] / (double)execs;
		m.c_be1 = (double)csv->value[EVENTS_ROLE_BE1] / (double)execs;
		m.c_be2 = (double)csv->value[EVENTS_ROLE_BE2] / (double)execs;
		m.c_be3 = (double)csv->value[EVENTS_ROLE_BE3] / (double)execs;
	}
	if (!m.have_n_rd && !m.have_store)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "the CSV gives neither the off-core read count (n_rd) nor the "
				   "store-bound and three backend events: nothing for C3 or C4");
	char source[128];
	snprintf(source, sizeof source, "perf stat import: %u events%s", csv->n_events,
		 csv->multiplexed ? ", some scaled by perf (multiplexed)" : "");
	m.source = source;
	if ((k = store_metrics_put(ctx->store, model_id, ctx->platform->row, 0, &m, &err)) < 0 ||
	    (k = import_for_catalogue(ctx, model_id, q->region_id, peer->cred.uid, &err)) < 0)
		return reply_error_from(req->id, &err);
	log_info("Imported perf counts for model \"%s\" region %u (%u events)", q->model, q->region_id,
		 csv->n_events);
	struct reply b;
	Pim__ImportPerfReply *ir = reply_start(&b, req->id, PIM__RESPONSE__BODY_IMPORT_PERF);
	Pim__RegionMetrics *mm = ir ? ir->metrics = reply_message(&b, &pim__region_metrics__descriptor)
				    : NULL;
	if (!mm)
		return reply_finish(&b);
	placement_rpc_metrics_to_wire(&m, mm);
	mm->source = reply_strdup(&b, source);
	/* notes: conditions without data, and an unknown measuring host */
	if (!m.have_store)
		reply_append(&b, &ir->notes, &ir->n_notes, "C4 not evaluable for region %u: the store-bound "
			     "and backend events are missing", q->region_id);
	if (!m.have_n_rd)
		reply_append(&b, &ir->notes, &ir->n_notes, "C3 not evaluable for region %u: the off-core "
			     "read count is missing", q->region_id);
	else if (q->b_cpu == 0)
		reply_append(&b, &ir->notes, &ir->n_notes, "warning: the B_cpu of the host that measured "
			     "these counts is unknown, so C3 compares them with theta from this host's "
			     "B_cpu (%.2f GB/s); give it with --b-cpu", placement_rpc_host_b_cpu(ctx) / 1e9);
	return reply_finish(&b);
}

/* ---------------------------------------------------------------- metrics on the wire */

/* An empty string as protobuf-c's own, which pim__*__free_unpacked leaves alone. */
static char *wire_str(const char *t)
{
	return t && *t ? (char *)t : (char *)protobuf_c_empty_string;
}

void placement_rpc_metrics_to_wire(const struct store_metrics *m, Pim__RegionMetrics *w)
{
	w->region_id = m->region_id;
	w->evidence = (Pim__Evidence)m->evidence; /* the same numbers (pim.proto Evidence) */
	w->t_host = m->t_host;
	w->t_host_spread = m->t_host_spread;
	w->have_n_rd = m->have_n_rd;
	w->n_rd = m->n_rd;
	w->have_store = m->have_store;
	w->c_store = m->c_store;
	w->c_be1 = m->c_be1;
	w->c_be2 = m->c_be2;
	w->c_be3 = m->c_be3;
	w->bw_read_estimate = m->bw_read_estimate;
	w->source = wire_str(m->source);
	w->updated_at = m->updated_at;
	w->source_b_cpu = m->source_b_cpu;
	w->origin_host = wire_str(m->origin_host);
	w->origin_measured_at = m->origin_measured_at;
	w->origin_backend = wire_str(m->origin_backend);
}

void placement_rpc_metrics_from_wire(const Pim__RegionMetrics *w, struct store_metrics *m)
{
	*m = (struct store_metrics){
		.region_id = w->region_id, .evidence = (enum placement_evidence)w->evidence, .t_host = w->t_host,
		.t_host_spread = w->t_host_spread, .have_n_rd = w->have_n_rd, .n_rd = w->n_rd,
		.have_store = w->have_store, .c_store = w->c_store, .c_be1 = w->c_be1, .c_be2 = w->c_be2,
		.c_be3 = w->c_be3, .bw_read_estimate = w->bw_read_estimate, .source = w->source,
		.updated_at = w->updated_at, .source_b_cpu = w->source_b_cpu, .origin_host = w->origin_host,
		.origin_measured_at = w->origin_measured_at, .origin_backend = w->origin_backend,
	};
}

int placement_rpc_metrics_list(struct store *s, int64_t model_id, int64_t platform_id,
			       Pim__RegionMetrics ***out, size_t *n, struct pim_error *err)
{
	struct store_metrics *v;
	size_t k;
	int r = store_metrics_list(s, model_id, platform_id, &v, &k, err);

	if (r < 0)
		return r;
	Pim__RegionMetrics **w = calloc(k ? k : 1, sizeof *w);
	size_t i = 0;
	for (; w && i < k; i++) {
		if (!(w[i] = malloc(sizeof *w[i])))
			break;
		pim__region_metrics__init(w[i]);
		placement_rpc_metrics_to_wire(&v[i], w[i]);
		/* its own copies, for pim__region_metrics__free_unpacked (v's are freed below) */
		w[i]->source = (char *)v[i].source;
		w[i]->origin_host = (char *)v[i].origin_host;
		w[i]->origin_backend = (char *)v[i].origin_backend;
		v[i].source = v[i].origin_host = v[i].origin_backend = NULL;
	}
	if (!w || i < k) {
		for (size_t j = 0; w && j < i; j++)
			pim__region_metrics__free_unpacked(w[j], NULL);
		free(w);
		store_metrics_list_free(v, k);
		return err_set(err, -ENOMEM, "out of memory");
	}
	store_metrics_list_free(v, k);
	*out = w;
	*n = k;
	return 0;
}
