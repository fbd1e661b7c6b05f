/* SPDX-License-Identifier: MIT */
#include "rpc.h"

#include <string.h>
#include <unistd.h>

#include "catalogue.h"
#include "decode.h"
#include "frame.h"
#include "wire.h"
#include "log.h"
#include "manifest.h"
#include "jitq_rpc.h"
#include "placement_rpc.h"
#include "profile.h"

#define PROTOCOL_VERSION PIM__VERSION__VERSION_CURRENT

static Pim__Response *do_hello(struct rpc_context *ctx, struct rpc_peer *peer, const Pim__Request *req,
			       enum rpc_after *after)
{
	const Pim__Hello *h = req->hello;
	struct reply b;

	if (peer->hello_done)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_PROTOCOL,
				   "Hello was already sent on this connection");
	if (h->protocol_version != PROTOCOL_VERSION) {
		*after = RPC_CLOSE;
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_UNSUPPORTED_VERSION,
				   "protocol version %u is not supported; this pimd speaks %u",
				   h->protocol_version, PROTOCOL_VERSION);
	}
	/* For the log: whole characters, up to the first control character. */
	snprintf(peer->name, sizeof peer->name, "%.*s", TEXT_ECHO(h->client_name, sizeof peer->name - 1));
	peer->hello_done = true;
	log_debug("Client \"%s\" (pid %d uid %u) speaks protocol %u", peer->name, (int)peer->cred.pid,
		  (unsigned)peer->cred.uid, h->protocol_version);

	Pim__HelloReply *hr = reply_start(&b, req->id, PIM__RESPONSE__BODY_HELLO);
	if (hr) {
		hr->protocol_version = PROTOCOL_VERSION;
		hr->server_version = reply_strdup(&b, PIMD_VERSION);
		hr->max_frame_bytes = ctx->max_frame_bytes;
	}
	return reply_finish(&b);
}

/* Milliseconds since pimd started, at now (CLOCK_MONOTONIC, ns). */
static uint64_t uptime_ms(const struct rpc_context *ctx, uint64_t now)
{
	return now > ctx->started_ns ? (now - ctx->started_ns) / 1000000 : 0;
}

/* Status's fields at now, their strings borrowed from ctx and constants. */
static void status_fill(struct rpc_context *ctx, uint64_t now, Pim__StatusReply *s, Pim__BandwidthProbe *probe)
{
	s->server_version = (char *)PIMD_VERSION;
	s->protocol_version = PROTOCOL_VERSION;
	s->uptime_ms = uptime_ms(ctx, now);
	s->models = ctx->models; /* (kept in memory: the loop does not query the store) */
	s->clients = ctx->clients;
	s->schema_version = store_schema_version(ctx->store);
	s->database = (char *)store_path(ctx->store);
	s->requests = ctx->requests;
	s->max_frame_bytes = ctx->max_frame_bytes;
	s->pid = ctx->pid;
	const struct platform *pf = ctx->platform;
	s->platform = (char *)pf->id.name;
	s->backend = (char *)(pf->counters ? "counters" : "timing");
	s->backend_reason = (char *)pf->backend_reason;
	/* B_cpu as answers use it: configured, else measured, else the paper's (the probe's) */
	reply_b_cpu_fill(probe, ctx, 0);
	s->b_cpu_probe = probe;
	s->b_cpu = probe->b_cpu;
	s->b_cpu_source = probe->source;
	s->profile_jobs = profiler_active(ctx->profiler);
	const char *containment = profiler_containment(ctx->profiler);
	s->containment = (char *)(containment ? containment : "");
}

/*
 * Status's messages written by hand (wire.h), field by field in the order protobuf-c packs them:
 * protobuf-c's generic packing was most of the cost of the most frequent answer.  test_reply
 * compares the bytes with protobuf-c's and fails when either message gains a field not written
 * here.  out NULL: only counted.
 */
#define AT (out ? out + n : NULL)
static size_t probe_put(uint8_t *out, const Pim__BandwidthProbe *m)
{
	size_t n = 0;

	n += wire_put_double(AT, 1, m->b_cpu);
	n += wire_put_string(AT, 2, m->source);
	n += wire_put_double(AT, 3, m->measured);
	n += wire_put_double(AT, 4, m->spread);
	n += wire_put_string(AT, 5, m->method);
	n += wire_put_uint(AT, 6, (uint64_t)m->measured_at);
	n += wire_put_uint(AT, 7, m->busy);
	n += wire_put_string(AT, 8, m->load);
	n += wire_put_string(AT, 9, m->host);
	return n;
}
#undef AT

/* Field f of Status s. */
static size_t status_field(uint8_t *out, const Pim__StatusReply *s, unsigned f)
{
	size_t n = 0;

	switch (f) {
	case 1: return wire_put_string(out, 1, s->server_version);
	case 2: return wire_put_uint(out, 2, s->protocol_version);
	case 3: return wire_put_uint(out, 3, s->uptime_ms);
	case 4: return wire_put_uint(out, 4, s->models);
	case 5: return wire_put_uint(out, 5, s->clients);
	case 6: return wire_put_uint(out, 6, s->schema_version);
	case 7: return wire_put_string(out, 7, s->database);
	case 8: return wire_put_uint(out, 8, s->requests);
	case 9: return wire_put_uint(out, 9, s->max_frame_bytes);
	case 10: return wire_put_uint(out, 10, s->pid);
	case 11: return wire_put_string(out, 11, s->platform);
	case 12: return wire_put_string(out, 12, s->backend);
	case 13: return wire_put_string(out, 13, s->backend_reason);
	case 14: return wire_put_double(out, 14, s->b_cpu);
	case 15: return wire_put_string(out, 15, s->b_cpu_source);
	case 16: return wire_put_uint(out, 16, s->profile_jobs);
	case 17: return wire_put_string(out, 17, s->containment);
	case 18:
		if (!s->b_cpu_probe)
			return 0;
		n = probe_put(NULL, s->b_cpu_probe);
		size_t h = wire_put_len(out, 18, n);
		if (out)
			probe_put(out + h, s->b_cpu_probe);
		return h + n;
	}
	return 0;
}

#define STATUS_FIELDS 18u
/* The fields that change between two answers (the others only with answers_epoch: a reload, a
 * new B_cpu; everything else about the daemon is set before its loop starts), and the runs of
 * the others between them: 1-2, 6-7, 9-15, 17-18. */
static const uint8_t status_counters[] = { 3, 4, 5, 8, 16 };
#define STATUS_RUNS 4u
static const uint8_t status_run_end[STATUS_RUNS] = { 2, 7, 15, 18 };

struct status_cache {
	bool valid;
	uint64_t epoch;
	size_t end[STATUS_RUNS]; /* where each run's bytes end */
	size_t cap;
	uint8_t *bytes;
};

/* The runs packed again for this epoch; -ENOMEM. */
static int status_cache_fill(struct rpc_context *ctx, struct status_cache *c)
{
	Pim__StatusReply s = PIM__STATUS_REPLY__INIT;
	Pim__BandwidthProbe probe = PIM__BANDWIDTH_PROBE__INIT;
	size_t n = 0;

	status_fill(ctx, 0, &s, &probe); /* (its counters are not kept) */
	for (unsigned f = 1; f <= STATUS_FIELDS; f++)
		n += memchr(status_counters, (int)f, sizeof status_counters) ? 0 : status_field(NULL, &s, f);
	if (n > c->cap) {
		uint8_t *b = realloc(c->bytes, n);
		if (!b)
			return -ENOMEM;
		c->bytes = b;
		c->cap = n;
	}
	n = 0;
	for (unsigned f = 1, r = 0; f <= STATUS_FIELDS; f++) {
		if (!memchr(status_counters, (int)f, sizeof status_counters))
			n += status_field(c->bytes + n, &s, f);
		if (r < STATUS_RUNS && f == status_run_end[r])
			c->end[r++] = n;
	}
	c->valid = true;
	c->epoch = ctx->answers_epoch;
	return 0;
}

/* Status written whole (no cache): body's bytes at out, n of them; returns n. */
static size_t status_put(uint8_t *out, const Pim__StatusReply *s)
{
	size_t n = 0;

	for (unsigned f = 1; f <= STATUS_FIELDS; f++)
		n += status_field(out ? out + n : NULL, s, f);
	return n;
}

size_t rpc_status_pack(struct rpc_context *ctx, uint64_t id, uint64_t now, uint8_t *out, size_t cap)
{
	struct status_cache *c = ctx->status_cache;
	Pim__StatusReply s = PIM__STATUS_REPLY__INIT;
	Pim__BandwidthProbe probe = PIM__BANDWIDTH_PROBE__INIT;
	size_t body, n;

	if (!c || ((!c->valid || c->epoch != ctx->answers_epoch) && status_cache_fill(ctx, c) < 0)) {
		status_fill(ctx, now, &s, &probe);
		body = status_put(NULL, &s);
		n = wire_put_uint(NULL, 1, id) + wire_put_len(NULL, PIM__RESPONSE__BODY_STATUS, body) + body;
		if (n <= cap) {
			out += wire_put_uint(out, 1, id);
			out += wire_put_len(out, PIM__RESPONSE__BODY_STATUS, body);
			status_put(out, &s);
		}
		return n;
	}
	/* the counters, in the order of status_counters, written once here (a field of a varint:
	 * at most 5 bytes of tag and 10 of value) */
	const uint64_t v[] = { uptime_ms(ctx, now), ctx->models, ctx->clients, ctx->requests,
			       profiler_active(ctx->profiler) };
	_Static_assert(sizeof v / sizeof *v == sizeof status_counters, "one value per counter");
	uint8_t counter[sizeof status_counters][16];
	size_t counter_n[sizeof status_counters];
	body = c->end[STATUS_RUNS - 1];
	for (unsigned k = 0; k < sizeof status_counters; k++)
		body += counter_n[k] = wire_put_uint(counter[k], status_counters[k], v[k]);
	n = wire_put_uint(NULL, 1, id) + wire_put_len(NULL, PIM__RESPONSE__BODY_STATUS, body) + body;
	if (n > cap)
		return n;
	out += wire_put_uint(out, 1, id);
	out += wire_put_len(out, PIM__RESPONSE__BODY_STATUS, body);
	size_t from = 0;
	for (unsigned f = 1, r = 0, k = 0; f <= STATUS_FIELDS;) {
		if (k < sizeof status_counters && status_counters[k] == f) {
			memcpy(out, counter[k], counter_n[k]);
			out += counter_n[k++];
			f++;
		} else {
			memcpy(out, c->bytes + from, c->end[r] - from);
			out += c->end[r] - from;
			from = c->end[r];
			f = status_run_end[r++] + 1u;
		}
	}
	return n;
}

/* The same, as a Response to free (one place builds a Status: rpc_status_pack). */
static Pim__Response *do_status(struct rpc_context *ctx, const Pim__Request *req)
{
	uint8_t small[2048], *buf = small;
	uint64_t now = now_ns();
	size_t n = rpc_status_pack(ctx, req->id, now, small, sizeof small);

	if (n > sizeof small) {
		if (!(buf = malloc(n)))
			return NULL;
		rpc_status_pack(ctx, req->id, now, buf, n);
	}
	Pim__Response *r = pim__response__unpack(NULL, n, buf);
	if (buf != small)
		free(buf);
	return r;
}

/* ---------------------------------------------------------------- measuring B_cpu again */

/* A re-measure of B_cpu: probed on the work thread, taken on the event loop. */
struct probe_job {
	struct rpc_context *ctx;
	uint64_t id;
	uid_t uid;
	struct store_platform m;  /* the platform, then the measurement */
	int r;
	struct pim_error err;
};

/* What the writer stores: a copy, as the platform may be measured again before it is written. */
struct probe_write {
	struct store_write sw;
	int64_t row;
	struct store_platform m;
};

static int probe_write(struct store *s, void *data, struct pim_error *err)
{
	struct probe_write *w = data;
	return store_platform_set_b_cpu(s, w->row, &w->m, err);
}

static void probe_write_done(void *data, int r, const struct pim_error *err)
{
	if (r < 0)
		log_warning("Cannot store the measured B_cpu: %s; it holds until pimd stops", err->msg);
	free(data);
}

static void probe_job_run(struct store *s, void *data)
{
	struct probe_job *j = data;
	j->r = platform_probe_bandwidth(&j->m, NULL, &j->err);
}

static Pim__Response *probe_job_finish(void *data, struct rpc_deferred *next)
{
	struct probe_job *j = data;
	struct rpc_context *ctx = j->ctx;
	struct store_platform *id = &ctx->platform->id;
	struct reply b;

	if (j->r < 0) {
		log_warning("B_cpu was not measured again: %s", j->err.msg);
		return reply_error_from(j->id, &j->err);
	}
	Pim__ProbeBandwidthReply *pr = reply_start(&b, j->id, PIM__RESPONSE__BODY_PROBE_BANDWIDTH);
	if (!pr)
		return reply_finish(&b);
	reply_b_cpu(&b, &pr->previous, ctx, 0);
	/* From here on every answer uses it (a cached placement answer is keyed by its B_cpu). */
	double was = id->b_cpu;
	id->b_cpu = j->m.b_cpu;
	ctx->answers_epoch++; /* (the answers kept in memory were of the old one) */
	id->b_cpu_spread = j->m.b_cpu_spread;
	memcpy(id->b_cpu_method, j->m.b_cpu_method, sizeof id->b_cpu_method);
	id->b_cpu_measured_at = j->m.b_cpu_measured_at;
	id->b_cpu_busy = j->m.b_cpu_busy;
	memcpy(id->b_cpu_load, j->m.b_cpu_load, sizeof id->b_cpu_load);
	memcpy(id->b_cpu_host, j->m.b_cpu_host, sizeof id->b_cpu_host);
	reply_b_cpu(&b, &pr->probe, ctx, 0);
	log_info("B_cpu measured again at the request of uid %u: %.2f GB/s (was %.2f), spread %.1f%% "
		 "(%s; %s)", (unsigned)j->uid, id->b_cpu / 1e9, was / 1e9, 100 * id->b_cpu_spread,
		 id->b_cpu_method, id->b_cpu_load);
	struct probe_write *w = malloc(sizeof *w);
	if (!w) {
		log_warning("Cannot store the measured B_cpu: out of memory; it holds until pimd stops");
	} else {
		*w = (struct probe_write){ .sw = { probe_write, probe_write_done, w, NULL, NULL },
					   .row = ctx->platform->row, .m = *id };
		store_write_via(&ctx->writer, ctx->store, &w->sw);
	}
	return reply_finish(&b);
}

static void probe_job_release(void *data)
{
	free(data);
}

/* Measures B_cpu again: it moves θ and the movement times of every user's answers, so only
 * root and pimd's own user may ask.  The probe (about a second) runs on the work thread. */
static Pim__Response *do_probe_bandwidth(struct rpc_context *ctx, struct rpc_peer *peer,
					 const Pim__Request *req, struct rpc_deferred *defer)
{
	uid_t uid = peer->cred.uid;

	if (uid != 0 && uid != geteuid())
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_PERMISSION_DENIED,
				   "measuring B_cpu again changes every user's placement answers: only root "
				   "or pimd's own user (uid %u) may ask, not uid %u", (unsigned)geteuid(),
				   (unsigned)uid);
	struct probe_job *j = calloc(1, sizeof *j);
	if (!j)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INTERNAL, "out of memory");
	*j = (struct probe_job){ .ctx = ctx, .id = req->id, .uid = uid, .m = ctx->platform->id };
	log_info("Measuring B_cpu again at the request of uid %u", (unsigned)uid);
	struct rpc_deferred job = { .run = probe_job_run, .finish = probe_job_finish,
				    .release = probe_job_release, .data = j };
	return reply_defer(defer, &job);
}

/* ---------------------------------------------------------------- models: pim.proto <-> store */

_Static_assert(STORE_EXTENTS_MAX == MANIFEST_EXTENTS_MAX, "the store holds a region's extents");
_Static_assert(STORE_OPERANDS_MAX == MANIFEST_OPERANDS_MAX, "the store holds a region's operands");
_Static_assert(STORE_ELEM_TYPE_MAX == MANIFEST_ELEM_TYPE_MAX, "the store holds an operand's element type");

enum store_alloc_kind rpc_alloc_kind_from_wire(Pim__AllocKind k)
{
	switch (k) {
	case PIM__ALLOC_KIND__ALLOC_KIND_ARGUMENT: return STORE_ALLOC_ARGUMENT;
	case PIM__ALLOC_KIND__ALLOC_KIND_ALLOC: return STORE_ALLOC_ALLOC;
	case PIM__ALLOC_KIND__ALLOC_KIND_GLOBAL: return STORE_ALLOC_GLOBAL;
	default: return STORE_ALLOC_UNSPECIFIED;
	}
}

Pim__AllocKind rpc_alloc_kind_to_wire(enum store_alloc_kind k)
{
	switch (k) {
	case STORE_ALLOC_ARGUMENT: return PIM__ALLOC_KIND__ALLOC_KIND_ARGUMENT;
	case STORE_ALLOC_ALLOC: return PIM__ALLOC_KIND__ALLOC_KIND_ALLOC;
	case STORE_ALLOC_GLOBAL: return PIM__ALLOC_KIND__ALLOC_KIND_GLOBAL;
	default: return PIM__ALLOC_KIND__ALLOC_KIND_UNSPECIFIED;
	}
}

enum store_operand_role rpc_role_from_wire(Pim__OperandRole r)
{
	switch (r) {
	case PIM__OPERAND_ROLE__OPERAND_ROLE_IN: return STORE_ROLE_IN;
	case PIM__OPERAND_ROLE__OPERAND_ROLE_OUT: return STORE_ROLE_OUT;
	case PIM__OPERAND_ROLE__OPERAND_ROLE_INOUT: return STORE_ROLE_INOUT;
	default: return STORE_ROLE_UNSPECIFIED;
	}
}

Pim__OperandRole rpc_role_to_wire(enum store_operand_role r)
{
	switch (r) {
	case STORE_ROLE_IN: return PIM__OPERAND_ROLE__OPERAND_ROLE_IN;
	case STORE_ROLE_OUT: return PIM__OPERAND_ROLE__OPERAND_ROLE_OUT;
	case STORE_ROLE_INOUT: return PIM__OPERAND_ROLE__OPERAND_ROLE_INOUT;
	default: return PIM__OPERAND_ROLE__OPERAND_ROLE_UNSPECIFIED;
	}
}

void rpc_allocation_to_wire(const struct store_allocation *a, Pim__Allocation *w)
{
	pim__allocation__init(w);
	w->id = a->id;
	w->bytes = a->bytes;
	w->kind = rpc_alloc_kind_to_wire(a->kind);
	w->name = (char *)a->name;
}

void rpc_model_info_to_wire(const struct store_model_info *info, Pim__ModelSummary *w)
{
	pim__model_summary__init(w);
	w->name = info->name;
	w->regions = info->regions;
	w->allocations = info->allocations;
	w->loaded_at = info->loaded_at;
	w->owner_uid = info->owner_uid;
	w->source = info->source;
	w->allocation_bytes = info->allocation_bytes;
}

/* info as the ModelSummary at *at of the reply b (copied into it). */
static void summary_reply(struct reply *b, Pim__ModelSummary **at, const struct store_model_info *info)
{
	Pim__ModelSummary *w = *at = reply_message(b, &pim__model_summary__descriptor);

	if (!w)
		return;
	rpc_model_info_to_wire(info, w);
	w->name = reply_strdup(b, info->name);  /* (the reply's own copies) */
	w->source = reply_strdup(b, info->source);
}

/* A manifest of the protocol as store_model_put_each reads it: its allocations as they are asked
 * for, its regions as they come (from the request, or its frame), each converted into g. */
struct wire_manifest {
	const Pim__Manifest *m;
	const Pim__Region *(*region)(void *ctx, size_t i, struct pim_error *err);  /* NULL: m's */
	void *ctx;
	struct store_region g;
	struct store_operand ops[MANIFEST_OPERANDS_MAX];
};

static void wire_allocation(void *ctx, size_t i, struct store_allocation *a)
{
	const Pim__Allocation *w = ((const struct wire_manifest *)ctx)->m->allocations[i];

	*a = (struct store_allocation){ .id = w->id, .bytes = w->bytes, .kind = rpc_alloc_kind_from_wire(w->kind),
					.name = w->name ? w->name : "" };
}

static const struct store_region *wire_region(void *ctx, size_t i, struct pim_error *err)
{
	struct wire_manifest *wm = ctx;
	const Pim__Region *w = wm->region ? wm->region(wm->ctx, i, err) : wm->m->regions[i];

	if (!w)
		return NULL;
	/* (validated: these hold; a manifest that was not is refused rather than cut) */
	if (w->n_operands > MANIFEST_OPERANDS_MAX || w->n_parallel_extents > STORE_EXTENTS_MAX ||
	    w->n_reduction_extents > STORE_EXTENTS_MAX) {
		err_set(err, -EINVAL, "regions[%zu]: more than %u operands or %u extents of a kind", i,
			MANIFEST_OPERANDS_MAX, STORE_EXTENTS_MAX);
		return NULL;
	}
	for (size_t j = 0; j < w->n_operands; j++) {
		const Pim__Operand *o = w->operands[j];
		wm->ops[j] = (struct store_operand){ .allocation_id = o->allocation_id, .bytes = o->bytes,
						     .elem_type = o->elem_type ? o->elem_type : "",
						     .elem_bits = o->elem_bits, .role = rpc_role_from_wire(o->role) };
	}
	wm->g = (struct store_region){
		.id = w->id, .order = w->order, .name = w->name ? w->name : "", .op = w->op ? w->op : "",
		.location = w->location ? w->location : "", .n_par = w->n_par, .n_total = w->n_total,
		.trip = w->trip, .parallel_extents = w->parallel_extents,
		.n_parallel_extents = w->n_parallel_extents, .reduction_extents = w->reduction_extents,
		.n_reduction_extents = w->n_reduction_extents, .operands = wm->ops, .n_operands = w->n_operands,
	};
	return &wm->g;
}

int rpc_model_put_each(struct store *s, const Pim__Manifest *m, size_t n_regions,
		       const Pim__Region *(*region)(void *ctx, size_t i, struct pim_error *err), void *ctx,
		       uid_t uid, bool replace, int64_t *replaced, struct store_model_info *info,
		       struct pim_error *err)
{
	struct wire_manifest *wm = calloc(1, sizeof *wm);

	*replaced = 0;
	if (!wm)
		return err_set(err, -ENOMEM, "out of memory");
	wm->m = m;
	wm->region = region;
	wm->ctx = ctx;
	const struct store_manifest_src src = {
		.name = m->name, .source = m->source ? m->source : "", .n_allocations = m->n_allocations,
		.n_regions = n_regions, .allocation = wire_allocation, .region = wire_region, .ctx = wm,
	};
	int r = store_model_put_each(s, &src, uid, replace, replaced, info, err);
	free(wm);
	return r;
}

int rpc_model_put(struct store *s, const Pim__Manifest *m, uid_t uid, bool replace, bool *replaced,
		  struct store_model_info *info, struct pim_error *err)
{
	int64_t gone;
	int r = rpc_model_put_each(s, m, m->n_regions, NULL, NULL, uid, replace, &gone, info, err);

	*replaced = gone != 0;
	return r;
}

void rpc_region_msg_start(struct rpc_region_msg *m, const struct store_region *r)
{
	size_t np = r->n_parallel_extents < MANIFEST_EXTENTS_MAX ? r->n_parallel_extents : MANIFEST_EXTENTS_MAX,
	       nr = r->n_reduction_extents < MANIFEST_EXTENTS_MAX ? r->n_reduction_extents : MANIFEST_EXTENTS_MAX;

	pim__region__init(&m->g);
	m->g.id = r->id;
	m->g.order = r->order;
	m->g.n_par = r->n_par;
	m->g.n_total = r->n_total;
	m->g.trip = r->trip;
	if (np)
		memcpy(m->pe, r->parallel_extents, np * sizeof *m->pe);
	if (nr)
		memcpy(m->re, r->reduction_extents, nr * sizeof *m->re);
	m->g.parallel_extents = m->pe;
	m->g.n_parallel_extents = np;
	m->g.reduction_extents = m->re;
	m->g.n_reduction_extents = nr;
	m->g.operands = m->opp;
}

Pim__Operand *rpc_region_msg_operand(struct rpc_region_msg *m, const struct store_operand *o)
{
	size_t i = m->g.n_operands;

	if (i == MANIFEST_OPERANDS_MAX)
		return NULL;
	Pim__Operand *p = m->opp[i] = &m->ops[i];
	pim__operand__init(p);
	p->allocation_id = o->allocation_id;
	p->bytes = o->bytes;
	p->elem_bits = o->elem_bits;
	p->role = rpc_role_to_wire(o->role);
	m->g.n_operands++;
	return p;
}

/* ---------------------------------------------------------------- models: requests */

static Pim__Response *do_model_load(struct rpc_context *ctx, struct rpc_peer *peer,
				    const Pim__Request *req)
{
	struct pim_error err = { 0 };
	const Pim__ModelLoad *ml = req->model_load;
	struct reply b;
	int64_t replaced;
	int k;

	if (!ml->manifest)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
				   "model_load: manifest is missing");
	/* A large manifest's regions are read from the frame one at a time, twice: checked, then
	 * stored (decode.h).  Otherwise they are in the request. */
	size_t n = ctx->regions ? ctx->regions->n : ml->manifest->n_regions;
	if (ctx->regions)
		k = manifest_validate_each(ml->manifest, n, decode_regions_get, ctx->regions, &err);
	else
		k = manifest_validate(ml->manifest, &err);
	if (k < 0)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT, "manifest: %s", err.msg);
	/* Started before the model is stored: without memory for an answer, nothing changes. */
	Pim__ModelLoadReply *lr = reply_start(&b, req->id, PIM__RESPONSE__BODY_MODEL_LOAD);
	if (!lr)
		return reply_finish(&b);
	struct store_model_info info;
	if (ctx->regions)
		k = rpc_model_put_each(ctx->store, ml->manifest, n, decode_regions_get, ctx->regions,
				       peer->cred.uid, ml->replace, &replaced, &info, &err);
	else
		k = rpc_model_put_each(ctx->store, ml->manifest, n, NULL, NULL, peer->cred.uid, ml->replace, &replaced,
				       &info, &err);
	if (k < 0) {
		if (k != -EEXIST && k != -EPERM)
			log_error("Failed to store model \"%s\": %s", ml->manifest->name, err.msg);
		return reply_fail(&b, &err);
	}
	log_info("Model \"%s\" %s by uid %u: %zu regions, %zu allocations", ml->manifest->name,
		 replaced ? "replaced" : "loaded", (unsigned)peer->cred.uid, n, ml->manifest->n_allocations);
	summary_reply(&b, &lr->model, &info);
	store_model_info_clear(&info);
	lr->replaced = replaced != 0;
	ctx->model_gone = replaced;
	return reply_finish(&b);
}

static Pim__Response *do_model_list(struct rpc_context *ctx, const Pim__Request *req)
{
	struct pim_error err = { 0 };
	struct reply b;

	struct store_model_info *v;
	size_t n;

	Pim__ModelListReply *lr = reply_start(&b, req->id, PIM__RESPONSE__BODY_MODEL_LIST);
	if (!lr)
		return reply_finish(&b);
	if (store_model_list(ctx->store, &v, &n, &err) < 0)
		return reply_fail(&b, &err);
	if (n && (lr->models = reply_calloc(&b, n, sizeof *lr->models)))
		for (; lr->n_models < n; lr->n_models++)
			summary_reply(&b, &lr->models[lr->n_models], &v[lr->n_models]);
	store_model_list_free(v, n);
	ctx->answer_reusable = true; /* (read from the store) */
	return reply_finish(&b);
}

static Pim__Response *bad_name(uint64_t id, const char *name)
{
	return reply_error(id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT, "\"%.*s\" is not a valid model name",
			   TEXT_ECHO(name, 64));
}

/* A stored manifest as the Manifest at *at of the reply b, copied into it: what
 * model_show_packed writes as it reads, so that both answers are the same bytes. */
static void manifest_reply(struct reply *b, Pim__Manifest **at, const struct store_manifest *m)
{
	Pim__Manifest *w = *at = reply_message(b, &pim__manifest__descriptor);

	if (!w)
		return;
	w->name = reply_strdup(b, m->name);
	w->source = reply_strdup(b, m->source);
	if (!(w->allocations = reply_calloc(b, m->n_allocations, sizeof *w->allocations)) ||
	    !(w->regions = reply_calloc(b, m->n_regions, sizeof *w->regions)))
		return;
	for (size_t i = 0; i < m->n_allocations; i++) {
		Pim__Allocation *a = w->allocations[i] = reply_message(b, &pim__allocation__descriptor);
		if (!a)
			return;
		w->n_allocations++;
		rpc_allocation_to_wire(&m->allocations[i], a);
		a->name = reply_strdup(b, m->allocations[i].name);
	}
	for (size_t i = 0; i < m->n_regions; i++) {
		const struct store_region *r = &m->regions[i];
		Pim__Region *g = w->regions[i] = reply_message(b, &pim__region__descriptor);
		if (!g)
			return;
		w->n_regions++;
		g->id = r->id;
		g->order = r->order;
		g->n_par = r->n_par;
		g->n_total = r->n_total;
		g->trip = r->trip;
		g->name = reply_strdup(b, r->name);
		g->op = reply_strdup(b, r->op);
		g->location = reply_strdup(b, r->location);
		if (r->n_parallel_extents &&
		    (g->parallel_extents = reply_calloc(b, r->n_parallel_extents, sizeof *g->parallel_extents))) {
			memcpy(g->parallel_extents, r->parallel_extents, r->n_parallel_extents * sizeof *r->parallel_extents);
			g->n_parallel_extents = r->n_parallel_extents;
		}
		if (r->n_reduction_extents &&
		    (g->reduction_extents = reply_calloc(b, r->n_reduction_extents, sizeof *g->reduction_extents))) {
			memcpy(g->reduction_extents, r->reduction_extents,
			       r->n_reduction_extents * sizeof *r->reduction_extents);
			g->n_reduction_extents = r->n_reduction_extents;
		}
		if (!(g->operands = reply_calloc(b, r->n_operands, sizeof *g->operands)))
			return;
		for (size_t j = 0; j < r->n_operands; j++) {
			const struct store_operand *o = &r->operands[j];
			Pim__Operand *p = g->operands[j] = reply_message(b, &pim__operand__descriptor);
			if (!p)
				return;
			g->n_operands++;
			p->allocation_id = o->allocation_id;
			p->bytes = o->bytes;
			p->elem_type = reply_strdup(b, o->elem_type);
			p->elem_bits = o->elem_bits;
			p->role = rpc_role_to_wire(o->role);
		}
	}
}

static Pim__Response *do_model_show(struct rpc_context *ctx, const Pim__Request *req)
{
	struct pim_error err = { 0 };
	const char *name = req->model_show->name;
	struct reply b;
	int64_t model_id;

	if (!manifest_name_valid(name))
		return bad_name(req->id, name);
	catalogue_settle(ctx->catalogue); /* a first answer's rows: shown once stored */
	Pim__ModelShowReply *sr = reply_start(&b, req->id, PIM__RESPONSE__BODY_MODEL_SHOW);
	if (!sr)
		return reply_finish(&b);
	struct store_model_info info;
	struct store_manifest *m;
	if (store_model_get(ctx->store, name, &info, &m, &err) < 0)
		return reply_fail(&b, &err);
	summary_reply(&b, &sr->model, &info);
	manifest_reply(&b, &sr->manifest, m);
	store_model_info_clear(&info);
	store_manifest_free(m);
	if (store_model_id(ctx->store, name, &model_id, &err) < 0 ||
	    placement_rpc_metrics_list(ctx->store, model_id, ctx->platform->row, &sr->metrics, &sr->n_metrics,
				       &err) < 0)
		return reply_fail(&b, &err);
	ctx->answer_reusable = true;
	return reply_finish(&b);
}

/* ---------------------------------------------------------------- a show reply packed as read */

/* A frame written as it grows: FRAME_HEADER_BYTES of room first. */
struct wbuf {
	uint8_t *p;
	size_t len, cap;
	bool oom;
};

static uint8_t *wbuf_room(struct wbuf *b, size_t n)
{
	if (b->oom)
		return NULL;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n)
			cap *= 2;
		uint8_t *p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return NULL;
		}
		b->p = p;
		b->cap = cap;
	}
	return b->p + b->len;
}

/* A length-delimited field: its tag and length, then len bytes from data (NULL: left to fill). */
static uint8_t *wbuf_field(struct wbuf *b, uint32_t field, const void *data, size_t len)
{
	uint8_t *at = wbuf_room(b, 2 * 10 + len);
	if (!at)
		return NULL;
	size_t n = wire_put_varint(at, (uint64_t)field << 3 | 2);
	n += wire_put_varint(at + n, len);
	if (data)
		memcpy(at + n, data, len);
	b->len += n + len;
	return at + n;
}

static void wbuf_message(struct wbuf *b, uint32_t field, const ProtobufCMessage *m)
{
	uint8_t *at = wbuf_field(b, field, NULL, protobuf_c_message_get_packed_size(m));
	if (at)
		protobuf_c_message_pack(m, at);
}

/* The region being read (store_model_walk gives its operands after it): packed when the next
 * one comes, or the walk ends. */
struct show_pack {
	struct wbuf *b;
	struct rpc_region_msg m;
	char *text;  /* name, op, location */
	char *types[MANIFEST_OPERANDS_MAX];
	bool pending;
};

static void show_flush(struct show_pack *sp)
{
	if (sp->pending)
		wbuf_message(sp->b, 4, &sp->m.g.base);  /* Manifest.regions */
	for (size_t i = 0; i < sp->m.g.n_operands; i++)
		free(sp->types[i]);
	free(sp->text);
	sp->text = NULL;
	sp->m.g.n_operands = 0;
	sp->pending = false;
}

static int show_allocation(void *ctx, const struct store_allocation *a)
{
	struct show_pack *sp = ctx;
	Pim__Allocation w;
	rpc_allocation_to_wire(a, &w);
	wbuf_message(sp->b, 3, &w.base);  /* Manifest.allocations */
	return sp->b->oom ? -ENOMEM : 0;
}

static int show_region(void *ctx, size_t index, const struct store_region *r)
{
	struct show_pack *sp = ctx;
	size_t ln = strlen(r->name) + 1, lo = strlen(r->op) + 1, ll = strlen(r->location) + 1;

	show_flush(sp);
	if (!(sp->text = malloc(ln + lo + ll)))
		return -ENOMEM;
	memcpy(sp->text, r->name, ln);
	memcpy(sp->text + ln, r->op, lo);
	memcpy(sp->text + ln + lo, r->location, ll);
	rpc_region_msg_start(&sp->m, r);
	sp->m.g.name = sp->text;
	sp->m.g.op = sp->text + ln;
	sp->m.g.location = sp->text + ln + lo;
	sp->pending = true;
	return sp->b->oom ? -ENOMEM : 0;
}

static int show_operand(void *ctx, size_t region, const struct store_operand *o)
{
	struct show_pack *sp = ctx;
	size_t i = sp->m.g.n_operands;
	Pim__Operand *p = rpc_region_msg_operand(&sp->m, o);

	if (!p)
		return -E2BIG;
	/* (freed by show_flush, which frees n_operands of them: NULL frees nothing) */
	if (!(p->elem_type = sp->types[i] = strdup(o->elem_type)))
		return -ENOMEM;
	return 0;
}

/* A metrics row, packed as read (ModelShowReply.metrics). */
static int show_metrics(void *ctx, const struct store_metrics *m)
{
	struct wbuf *b = ctx;
	Pim__RegionMetrics w = PIM__REGION_METRICS__INIT;
	placement_rpc_metrics_to_wire(m, &w);
	wbuf_message(b, 3, &w.base);
	return b->oom ? -ENOMEM : 0;
}

/*
 * The ModelShowReply of a model, packed as its rows are read, rather than built as protobuf-c
 * structures first (ten times the 26 MB that a million regions take packed): fields in the
 * order protobuf-c packs them, so the bytes are the same.  The manifest is written first,
 * behind room for what precedes it (the Response's id and the reply's summary), whose lengths
 * are known once it is written.
 */
static int model_show_packed(struct rpc_context *ctx, const Pim__Request *req, uint8_t **frame, size_t *frame_len,
			     struct pim_error *err)
{
	static const struct store_model_walker walker = {
		.allocation = show_allocation, .region = show_region, .operand = show_operand };
	const char *name = req->model_show->name;
	struct store_model_info info = { 0 };
	Pim__ModelSummary summary, *sum = &summary;
	struct wbuf b = { 0 };
	struct show_pack *sp = calloc(1, sizeof *sp);
	int64_t model_id;

	catalogue_settle(ctx->catalogue); /* a first answer's rows: shown once stored */
	int r;

	if (!sp)
		return err_set(err, -ENOMEM, "out of memory");
	sp->b = &b;
	if ((r = store_read_begin(ctx->store, err)) < 0) {
		free(sp);
		return r;
	}
	if ((r = store_model_get(ctx->store, name, &info, NULL, err)) >= 0 &&
	    (r = store_model_id(ctx->store, name, &model_id, err)) >= 0) {
		rpc_model_info_to_wire(&info, sum);
		/* room: frame header, id, body tag and length, summary, manifest tag and length */
		size_t room = FRAME_HEADER_BYTES + 11 + 11 + 11 + pim__model_summary__get_packed_size(sum) + 11;
		if (wbuf_room(&b, room))
			b.len = room;
		if (sum->name[0])
			wbuf_field(&b, 1, sum->name, strlen(sum->name));  /* Manifest.name */
		if (sum->source[0])
			wbuf_field(&b, 2, sum->source, strlen(sum->source));
		r = store_model_walk(ctx->store, model_id, &walker, sp, err);
		show_flush(sp);
		if (r == -ENOMEM || b.oom)
			r = err_set(err, -ENOMEM, "out of memory packing model \"%s\"", name);
		else if (r == -E2BIG)
			r = err_set(err, -EIO, "model \"%s\" has a region of more than %u operands", name,
				    MANIFEST_OPERANDS_MAX);
		size_t manifest_len = b.len - room;
		if (r >= 0)
			r = store_metrics_each(ctx->store, model_id, ctx->platform->row, show_metrics, &b, err);
		if (r >= 0 && b.oom)
			r = err_set(err, -ENOMEM, "out of memory packing model \"%s\"", name);
		if (r >= 0) {
			size_t sum_len = pim__model_summary__get_packed_size(sum);
			size_t reply_len = 1 + wire_put_varint(NULL, sum_len) + sum_len + 1 + wire_put_varint(NULL, manifest_len) +
					   (b.len - room);
			uint8_t head[64];
			size_t h = 0;
			if (req->id) {
				head[h++] = 1 << 3;  /* Response.id */
				h += wire_put_varint(head + h, req->id);
			}
			head[h++] = 7 << 3 | 2;  /* Response.model_show */
			h += wire_put_varint(head + h, reply_len);
			head[h++] = 1 << 3 | 2;  /* ModelShowReply.model */
			h += wire_put_varint(head + h, sum_len);
			/* the summary, then the manifest's tag and length, end where the manifest starts */
			uint8_t *at = b.p + room - (1 + wire_put_varint(NULL, manifest_len)) - sum_len - h;
			memcpy(at, head, h);
			pim__model_summary__pack(sum, at + h);
			at[h + sum_len] = 2 << 3 | 2;  /* ModelShowReply.manifest */
			wire_put_varint(at + h + sum_len + 1, manifest_len);
			size_t len = (size_t)(b.p + b.len - at);
			memmove(b.p + FRAME_HEADER_BYTES, at, len);
			*frame = b.p;
			*frame_len = len;
			b.p = NULL;
		}
	}
	store_read_end(ctx->store);
	free(b.p);
	free(sp);
	store_model_info_clear(&info);
	return r < 0 ? r : 0;
}

int rpc_handle_packed(struct rpc_context *ctx, struct rpc_peer *peer, const Pim__Request *req, uint8_t **frame,
		      size_t *len)
{
	struct pim_error err = { 0 };

	if (!peer->hello_done || req->body_case != PIM__REQUEST__BODY_MODEL_SHOW ||
	    !manifest_name_valid(req->model_show->name))
		return 0;
	int r = model_show_packed(ctx, req, frame, len, &err);
	if (r == -ENOENT)
		return 0;  /* rpc_handle says so */
	if (r < 0) {
		log_error("Failed to pack model \"%s\": %s", req->model_show->name, err.msg);
		return 0;
	}
	ctx->requests++;
	ctx->answer_reusable = true;
	return 1;
}

static Pim__Response *do_model_remove(struct rpc_context *ctx, struct rpc_peer *peer,
				      const Pim__Request *req)
{
	struct pim_error err = { 0 };
	const char *name = req->model_remove->name;
	struct reply b;

	if (!manifest_name_valid(name))
		return bad_name(req->id, name);
	int k = store_model_remove(ctx->store, name, peer->cred.uid, &ctx->model_gone, &err);
	if (k < 0) {
		if (k == -ENOSPC)
			log_warning("Cannot remove model \"%s\": %s", name, err.msg);
		return reply_error_from(req->id, &err);
	}
	log_info("Model \"%s\" removed by uid %u", name, (unsigned)peer->cred.uid);
	if (k > 0)
		log_warning("The file system of %s is full: model \"%s\" was removed with the room pimd "
			    "keeps in reserve, which is %s", store_path(ctx->store), name,
			    store_reserve_held(ctx->store) ? "restored" : "spent until space is freed");
	Pim__ModelRemoveReply *rr = reply_start(&b, req->id, PIM__RESPONSE__BODY_MODEL_REMOVE);
	if (rr)
		rr->name = reply_strdup(&b, name);
	return reply_finish(&b);
}

/* ---------------------------------------------------------------- the fleet catalogue */

static Pim__Response *do_catalogue_status(struct rpc_context *ctx, const Pim__Request *req)
{
	struct catalogue_status st;
	struct reply b;

	Pim__CatalogueStatusReply *r = reply_start(&b, req->id, PIM__RESPONSE__BODY_CATALOGUE_STATUS);
	if (!r || !ctx->catalogue)
		return reply_finish(&b); /* configured = false */
	catalogue_status(ctx->catalogue, &st);
	r->configured = true;
	r->reachable = st.reachable;
	r->target = reply_strdup(&b, st.target);
	r->host_id = reply_strdup(&b, st.host_id);
	r->platform_key = reply_strdup(&b, st.platform_key);
	r->outbox_depth = st.outbox_depth;
	r->outbox_failed = st.outbox_failed;
	r->last_publish_at = st.last_publish_at;
	r->published = st.published;
	r->conflicts = st.conflicts;
	r->last_error = reply_strdup(&b, st.last_error);
	r->last_error_at = st.last_error_at;
	r->retry_in_ms = st.retry_in_ms;
	r->schema_version = st.schema_version;
	r->lookups = st.lookups;
	r->lookup_hits = st.lookup_hits;
	return reply_finish(&b);
}

struct list_build {
	struct reply *b;
	Pim__CatalogueListReply *r;
	size_t cap;
};

static int list_entry(void *data, const struct catalogue_entry *e)
{
	struct list_build *lb = data;
	Pim__CatalogueListReply *r = lb->r;

	if (r->n_entries == lb->cap)
		return -ENOMEM; /* (cap is the limit: the catalogue gives no more) */
	Pim__CatalogueListEntry *m = reply_message(lb->b, &pim__catalogue_list_entry__descriptor);
	if (!m)
		return -ENOMEM;
	m->model_hash = reply_strdup(lb->b, e->model_hash);
	m->model_name = reply_strdup(lb->b, e->model_name);
	m->platform_key = reply_strdup(lb->b, e->platform_key);
	m->hosts = e->hosts;
	m->runs = e->runs;
	m->imports = e->imports;
	m->last_measured_at = e->last_measured_at;
	m->regions = e->regions;
	r->entries[r->n_entries++] = m;
	return 0;
}

/* Answered on a work thread (dispatch.c): it waits for PostgreSQL. */
static Pim__Response *do_catalogue_list(struct rpc_context *ctx, const Pim__Request *req)
{
	struct pim_error err = { 0 };
	unsigned limit = req->catalogue_list->limit ? req->catalogue_list->limit : 1000;
	struct reply b;
	bool truncated = false;

	if (!ctx->catalogue)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_UNIMPLEMENTED, "no fleet catalogue is configured "
				   "(pimd.conf(5): catalogue)");
	if (!ctx->may_block)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_BUSY, "the catalogue is listed off the event loop "
				   "only; retry later");
	if (limit > CATALOGUE_LIST_MAX)
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT, "limit %u: at most %u rows",
				   limit, CATALOGUE_LIST_MAX);
	Pim__CatalogueListReply *r = reply_start(&b, req->id, PIM__RESPONSE__BODY_CATALOGUE_LIST);
	if (!r)
		return reply_finish(&b);
	struct list_build lb = { .b = &b, .r = r, .cap = limit };
	r->entries = reply_calloc(&b, limit, sizeof *r->entries);
	if (!r->entries)
		return reply_finish(&b);
	if (catalogue_list(ctx->catalogue, limit, list_entry, &lb, &truncated, &err) < 0)
		return reply_fail(&b, &err);
	r->truncated = truncated;
	r->platform_key = reply_strdup(&b, ctx->platform->fleet_key);
	return reply_finish(&b);
}

void rpc_context_init(struct rpc_context *ctx, struct store *store, struct platform *platform,
		      const struct config *cfg, const struct pimsim_params *pim,
		      struct profiler *profiler)
{
	*ctx = (struct rpc_context){ .store = store, .platform = platform, .pim = pim,
				     .profiler = profiler, .started_ns = now_ns(), .pid = (uint32_t)getpid() };
	ctx->status_cache = calloc(1, sizeof *ctx->status_cache); /* (NULL: Status packed whole) */
	ctx->decisions_waiting = &ctx->decisions_waiting_bytes;
	if (store_model_count(store, &ctx->models, NULL) < 0)
		ctx->models = 0;
	rpc_context_apply_config(ctx, cfg);
}

void rpc_context_release(struct rpc_context *ctx)
{
	if (ctx->status_cache)
		free(ctx->status_cache->bytes);
	free(ctx->status_cache);
	ctx->status_cache = NULL;
}

const char *rpc_request_model(const Pim__Request *req)
{
	const char *name = NULL;

	switch (req->body_case) {
	case PIM__REQUEST__BODY_MODEL_SHOW:
		name = req->model_show->name;
		break;
	case PIM__REQUEST__BODY_PLACEMENT:
		name = req->placement->model;
		break;
	case PIM__REQUEST__BODY_DECISIONS:
		name = req->decisions->model;
		break;
	case PIM__REQUEST__BODY_MODEL_LOAD:
		name = req->model_load->manifest ? req->model_load->manifest->name : NULL;
		break;
	case PIM__REQUEST__BODY_MODEL_REMOVE:
		name = req->model_remove->name;
		break;
	default:
		break;
	}
	return name && *name ? name : NULL;
}

void rpc_context_apply_config(struct rpc_context *ctx, const struct config *cfg)
{
	ctx->params = &cfg->placement;
	ctx->max_frame_bytes = cfg->max_frame_bytes;
	ctx->pim_configured = cfg->pim_config[0] != 0;
	memcpy(ctx->jitq_speedup, cfg->jitq_speedup, sizeof ctx->jitq_speedup);
	ctx->answers_epoch++; /* the answers kept were of the old settings */
}

static Pim__Response *rpc_answer(struct rpc_context *ctx, struct rpc_peer *peer, const Pim__Request *req,
				 enum rpc_after *after, struct rpc_deferred *defer)
{
	*after = RPC_KEEP;
	if (defer)
		*defer = (struct rpc_deferred){ 0 };
	ctx->requests++;

	if (!peer->hello_done && req->body_case != PIM__REQUEST__BODY_HELLO) {
		*after = RPC_CLOSE;
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_PROTOCOL,
				   "the first request on a connection must be Hello");
	}
	switch (req->body_case) {
	case PIM__REQUEST__BODY_HELLO:
		return do_hello(ctx, peer, req, after);
	case PIM__REQUEST__BODY_STATUS:
		return do_status(ctx, req);
	case PIM__REQUEST__BODY_MODEL_LOAD:
		return do_model_load(ctx, peer, req);
	case PIM__REQUEST__BODY_MODEL_LIST:
		return do_model_list(ctx, req);
	case PIM__REQUEST__BODY_MODEL_SHOW:
		return do_model_show(ctx, req);
	case PIM__REQUEST__BODY_MODEL_REMOVE:
		return do_model_remove(ctx, peer, req);
	case PIM__REQUEST__BODY_PLACEMENT:
		return placement_rpc_placement(ctx, req);
	case PIM__REQUEST__BODY_IMPORT_PERF:
		return placement_rpc_import_perf(ctx, peer, req);
	case PIM__REQUEST__BODY_CALIBRATE:
		return placement_rpc_calibrate(ctx, req, defer);
	case PIM__REQUEST__BODY_DECISIONS:
		return placement_rpc_decisions(ctx, req);
	case PIM__REQUEST__BODY_JITQ_PLAN:
		return jitq_rpc_plan(ctx, req);
	case PIM__REQUEST__BODY_JITQ_QUANTIZE:
		return jitq_rpc_quantize(ctx, req, defer);
	case PIM__REQUEST__BODY_JITQ_DEQUANTIZE:
		return jitq_rpc_dequantize(ctx, req, defer);
	case PIM__REQUEST__BODY_PROFILE:
		return profiler_rpc_start(ctx->profiler, peer, req, defer);
	case PIM__REQUEST__BODY_PROFILE_STATUS:
		return profiler_rpc_status(ctx->profiler, req, defer);
	case PIM__REQUEST__BODY_PROFILE_CANCEL:
		return profiler_rpc_cancel(ctx->profiler, peer, req, defer);
	case PIM__REQUEST__BODY_SAMPLE_BATCH:
		return profiler_rpc_samples(ctx->profiler, peer, req, defer);
	case PIM__REQUEST__BODY_PROBE_BANDWIDTH:
		return do_probe_bandwidth(ctx, peer, req, defer);
	case PIM__REQUEST__BODY_CATALOGUE_STATUS:
		return do_catalogue_status(ctx, req);
	case PIM__REQUEST__BODY_CATALOGUE_LIST:
		return do_catalogue_list(ctx, req);
	default:
		/* A newer client may send bodies this daemon does not know; that is not fatal. */
		return reply_error(req->id, PIM__ERROR_CODE__ERROR_UNIMPLEMENTED,
				   "request body not known to this pimd (version %s)", PIMD_VERSION);
	}
}

Pim__Response *rpc_handle(struct rpc_context *ctx, struct rpc_peer *peer, const Pim__Request *req,
			  enum rpc_after *after, struct rpc_deferred *defer)
{
	Pim__Response *r = rpc_answer(ctx, peer, req, after, defer);

	/* Answered at once (a thread, the fuzz harness): what it stored without a writer is
	 * written before the answer goes (store_write_settle; on the loop, after the batch). */
	if (!defer)
		store_write_settle(ctx->store);
	return r;
}

void rpc_peer_closed(struct rpc_context *ctx, struct rpc_peer *peer)
{
	if (peer->insitu)
		profiler_insitu_close(ctx->profiler, peer);
}
