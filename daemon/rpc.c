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
#include "status_rpc.h"

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
	ctx->status_cache = status_cache_new(); /* (NULL: Status packed whole) */
	ctx->decisions_waiting = &ctx->decisions_waiting_bytes;
	if (store_model_count(store, &ctx->models, NULL) < 0)
		ctx->models = 0;
	rpc_context_apply_config(ctx, cfg);
}

void rpc_context_release(struct rpc_context *ctx)
{
	status_cache_free(ctx->status_cache);
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
		return status_rpc_status(ctx, req);
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
		return status_rpc_probe_bandwidth(ctx, peer, req, defer);
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
