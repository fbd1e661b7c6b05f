/* SPDX-License-Identifier: MIT */
#include "rpc.h"

#include <string.h>

#include "log.h"
#include "manifest.h"
#include "jitq_rpc.h"
#include "placement_rpc.h"
#include "profile.h"

#define PROTOCOL_VERSION PIM__VERSION__VERSION_CURRENT

Pim__Response *rpc_response_new(uint64_t id)
{
	Pim__Response *r = malloc(sizeof *r);
	if (r) {
		pim__response__init(r);
		r->id = id;
	}
	return r;
}

Pim__ErrorCode rpc_code_from_errno(int e)
{
	switch (e) {
	case -EINVAL:
	case -EOVERFLOW:
	case -E2BIG:
	case -EFBIG:
	case -ENAMETOOLONG:
		return PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT;
	case -ENOENT:
		return PIM__ERROR_CODE__ERROR_NOT_FOUND;
	case -EEXIST:
		return PIM__ERROR_CODE__ERROR_ALREADY_EXISTS;
	case -EPERM:
	case -EACCES:
		return PIM__ERROR_CODE__ERROR_PERMISSION_DENIED;
	case -EBUSY:
	case -EAGAIN:
	case -ENOSPC:
		return PIM__ERROR_CODE__ERROR_BUSY;
	case -EPROTO:
		return PIM__ERROR_CODE__ERROR_PROTOCOL;
	case -EPROTONOSUPPORT:
		return PIM__ERROR_CODE__ERROR_UNSUPPORTED_VERSION;
	case -EOPNOTSUPP:
		return PIM__ERROR_CODE__ERROR_UNIMPLEMENTED;
	default:
		return PIM__ERROR_CODE__ERROR_INTERNAL;
	}
}

Pim__Response *rpc_error_response(uint64_t id, Pim__ErrorCode code, const char *fmt, ...)
{
	Pim__Response *r = rpc_response_new(id);
	Pim__Error *e = malloc(sizeof *e);
	char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	if (!r || !e || !msg) {
		free(r);
		free(e);
		free(msg);
		return NULL;
	}
	pim__error__init(e);
	e->code = code;
	e->message = msg;
	r->body_case = PIM__RESPONSE__BODY_ERROR;
	r->error = e;
	return r;
}

Pim__Response *rpc_error_from(uint64_t id, const struct pim_error *err)
{
	return rpc_error_response(id, rpc_code_from_errno(err->code), "%s", err->msg);
}

/* ---------------------------------------------------------------- strings on the wire */

#define WIRE_DEPTH_MAX 32u   /* pim.proto nests 5 deep; deeper is not a Request */
#define WIRE_PATH_MAX 192u

static bool wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;
	for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
		uint8_t b = *(*p)++;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return true;
		}
	}
	return false;
}

static int wire_strings(const ProtobufCMessageDescriptor *d, const uint8_t *start, const uint8_t *p,
			const uint8_t *end, char *path, size_t used, unsigned depth, struct pim_error *err)
{
	unsigned seen[64] = { 0 }; /* occurrences of each field so far: the index of a repeated one */

	if (depth > WIRE_DEPTH_MAX)
		return err_set(err, -EPROTO, "%s: messages nested more than %u deep", path, WIRE_DEPTH_MAX);
	while (p < end) {
		uint64_t tag, len;
		if (!wire_varint(&p, end, &tag))
			goto malformed;
		switch (tag & 7) {
		case 0:
			if (!wire_varint(&p, end, &len))
				goto malformed;
			continue;
		case 1:
			if (end - p < 8)
				goto malformed;
			p += 8;
			continue;
		case 5:
			if (end - p < 4)
				goto malformed;
			p += 4;
			continue;
		case 2:
			break;
		default: /* groups: not in proto3 */
			goto malformed;
		}
		if (!wire_varint(&p, end, &len) || len > (uint64_t)(end - p))
			goto malformed;
		const ProtobufCFieldDescriptor *f =
			tag >> 3 <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(d, (unsigned)(tag >> 3))
					       : NULL;
		if (f && (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE)) {
			size_t i = (size_t)(f - d->fields);
			unsigned nth = i < ELEMENTSOF(seen) ? seen[i]++ : 0;
			int w = f->label == PROTOBUF_C_LABEL_REPEATED
				? snprintf(path + used, WIRE_PATH_MAX - used, "%s%s[%u]", used ? "." : "", f->name, nth)
				: snprintf(path + used, WIRE_PATH_MAX - used, "%s%s", used ? "." : "", f->name);
			size_t now = used + (w > 0 ? (size_t)w : 0);
			if (now >= WIRE_PATH_MAX)
				now = WIRE_PATH_MAX - 1;
			int k = f->type == PROTOBUF_C_TYPE_STRING
				? text_check_n(path, (const char *)p, (size_t)len, 0, TEXT_ANY_CONTROL, err)
				: wire_strings(f->descriptor, start, p, p + len, path, now, depth + 1, err);
			path[used] = 0;
			if (k < 0)
				return k;
		}
		p += len;
	}
	return 0;
malformed:
	return err_set(err, -EPROTO, "%s: not a valid %s message (byte %td)", used ? path : "request",
		       d->name, p - start);
}

int rpc_check_strings(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t len,
		      struct pim_error *err)
{
	char path[WIRE_PATH_MAX] = "";
	return wire_strings(d, buf, buf, buf + len, path, 0, 0, err);
}

static Pim__Response *do_hello(struct rpc_context *ctx, struct rpc_peer *peer, const Pim__Request *req,
			       enum rpc_after *after)
{
	const Pim__Hello *h = req->hello;

	if (peer->hello_done)
		return rpc_error_response(req->id, PIM__ERROR_CODE__ERROR_PROTOCOL,
					  "Hello was already sent on this connection");
	if (h->protocol_version != PROTOCOL_VERSION) {
		*after = RPC_CLOSE;
		return rpc_error_response(req->id, PIM__ERROR_CODE__ERROR_UNSUPPORTED_VERSION,
					  "protocol version %u is not supported; this pimd speaks %u",
					  h->protocol_version, PROTOCOL_VERSION);
	}
	/* For the log: whole characters, up to the first control character. */
	snprintf(peer->name, sizeof peer->name, "%.*s", TEXT_ECHO(h->client_name, sizeof peer->name - 1));
	peer->hello_done = true;
	log_debug("Client \"%s\" (pid %d uid %u) speaks protocol %u", peer->name, (int)peer->cred.pid,
		  (unsigned)peer->cred.uid, h->protocol_version);

	Pim__Response *r = rpc_response_new(req->id);
	Pim__HelloReply *hr = malloc(sizeof *hr);
	char *ver = strdup(PIMD_VERSION);
	if (!r || !hr || !ver) {
		free(r);
		free(hr);
		free(ver);
		return NULL;
	}
	pim__hello_reply__init(hr);
	hr->protocol_version = PROTOCOL_VERSION;
	hr->server_version = ver;
	hr->max_frame_bytes = ctx->max_frame_bytes;
	r->body_case = PIM__RESPONSE__BODY_HELLO;
	r->hello = hr;
	return r;
}

static Pim__Response *do_status(struct rpc_context *ctx, const Pim__Request *req)
{
	struct pim_error err = { 0 };
	unsigned models = 0;

	if (store_model_count(ctx->store, &models, &err) < 0)
		return rpc_error_from(req->id, &err);
	Pim__Response *r = rpc_response_new(req->id);
	Pim__StatusReply *s = malloc(sizeof *s);
	char *ver = strdup(PIMD_VERSION), *db = strdup(store_path(ctx->store));
	if (!r || !s || !ver || !db) {
		free(r);
		free(s);
		free(ver);
		free(db);
		return NULL;
	}
	pim__status_reply__init(s);
	s->server_version = ver;
	s->protocol_version = PROTOCOL_VERSION;
	s->uptime_ms = (now_ns() - ctx->started_ns) / 1000000;
	s->models = models;
	s->clients = ctx->clients;
	s->schema_version = store_schema_version(ctx->store);
	s->database = db;
	s->requests = ctx->requests;
	s->max_frame_bytes = ctx->max_frame_bytes;
	s->pid = (uint32_t)ctx->pid;
	const struct platform *pf = ctx->platform;
	s->platform = strdup(pf->id.name);
	s->backend = strdup(pf->counters ? "counters" : "timing");
	s->backend_reason = strdup(pf->backend_reason);
	if (ctx->params->b_cpu > 0) {
		s->b_cpu = ctx->params->b_cpu;
		s->b_cpu_source = strdup("configured");
	} else if (pf->id.b_cpu > 0) {
		s->b_cpu = pf->id.b_cpu;
		s->b_cpu_source = strdup("measured");
	} else {
		s->b_cpu = placement_params_default().b_cpu;
		s->b_cpu_source = strdup("default (the paper's host)");
	}
	s->profile_jobs = profiler_active(ctx->profiler);
	if (!s->platform || !s->backend || !s->backend_reason || !s->b_cpu_source) {
		pim__response__free_unpacked(r, NULL);
		return NULL;
	}
	r->body_case = PIM__RESPONSE__BODY_STATUS;
	r->status = s;
	return r;
}

static Pim__Response *do_model_load(struct rpc_context *ctx, struct rpc_peer *peer,
				    const Pim__Request *req)
{
	struct pim_error err = { 0 };
	const Pim__ModelLoad *ml = req->model_load;
	Pim__ModelSummary *sum = NULL;
	bool replaced;
	int k;

	if (!ml->manifest)
		return rpc_error_response(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
					  "model_load: manifest is missing");
	if ((k = manifest_validate(ml->manifest, &err)) < 0)
		return rpc_error_response(req->id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
					  "manifest: %s", err.msg);
	k = store_model_put(ctx->store, ml->manifest, peer->cred.uid, ml->replace, &replaced, &sum, &err);
	if (k < 0) {
		if (k != -EEXIST && k != -EPERM)
			log_error("Failed to store model \"%s\": %s", ml->manifest->name, err.msg);
		return rpc_error_from(req->id, &err);
	}
	log_info("Model \"%s\" %s by uid %u: %zu regions, %zu allocations", ml->manifest->name,
		 replaced ? "replaced" : "loaded", (unsigned)peer->cred.uid, ml->manifest->n_regions,
		 ml->manifest->n_allocations);
	Pim__Response *r = rpc_response_new(req->id);
	Pim__ModelLoadReply *lr = malloc(sizeof *lr);
	if (!r || !lr) {
		free(r);
		free(lr);
		pim__model_summary__free_unpacked(sum, NULL);
		return NULL;
	}
	pim__model_load_reply__init(lr);
	lr->model = sum;
	lr->replaced = replaced;
	r->body_case = PIM__RESPONSE__BODY_MODEL_LOAD;
	r->model_load = lr;
	return r;
}

static Pim__Response *do_model_list(struct rpc_context *ctx, const Pim__Request *req)
{
	struct pim_error err = { 0 };
	Pim__ModelSummary **v;
	size_t n;

	if (store_model_list(ctx->store, &v, &n, &err) < 0)
		return rpc_error_from(req->id, &err);
	Pim__Response *r = rpc_response_new(req->id);
	Pim__ModelListReply *lr = malloc(sizeof *lr);
	if (!r || !lr) {
		free(r);
		free(lr);
		for (size_t i = 0; i < n; i++)
			pim__model_summary__free_unpacked(v[i], NULL);
		free(v);
		return NULL;
	}
	pim__model_list_reply__init(lr);
	lr->models = v;
	lr->n_models = n;
	r->body_case = PIM__RESPONSE__BODY_MODEL_LIST;
	r->model_list = lr;
	return r;
}

static Pim__Response *check_name(uint64_t id, const char *name)
{
	if (!manifest_name_valid(name))
		return rpc_error_response(id, PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT,
					  "\"%.*s\" is not a valid model name", TEXT_ECHO(name, 64));
	return NULL;
}

static Pim__Response *do_model_show(struct rpc_context *ctx, const Pim__Request *req)
{
	struct pim_error err = { 0 };
	Pim__ModelSummary *sum;
	Pim__Manifest *m;
	Pim__Response *r = check_name(req->id, req->model_show->name);

	if (r)
		return r;
	if (store_model_get(ctx->store, req->model_show->name, &sum, &m, &err) < 0)
		return rpc_error_from(req->id, &err);
	Pim__RegionMetrics **metrics = NULL;
	size_t n_metrics = 0;
	int64_t model_id;
	if (store_model_id(ctx->store, req->model_show->name, &model_id, &err) < 0 ||
	    store_metrics_list(ctx->store, model_id, ctx->platform->row, &metrics, &n_metrics, &err) < 0) {
		pim__model_summary__free_unpacked(sum, NULL);
		pim__manifest__free_unpacked(m, NULL);
		return rpc_error_from(req->id, &err);
	}
	r = rpc_response_new(req->id);
	Pim__ModelShowReply *sr = malloc(sizeof *sr);
	if (!r || !sr) {
		free(r);
		free(sr);
		pim__model_summary__free_unpacked(sum, NULL);
		pim__manifest__free_unpacked(m, NULL);
		for (size_t i = 0; i < n_metrics; i++)
			pim__region_metrics__free_unpacked(metrics[i], NULL);
		free(metrics);
		return NULL;
	}
	pim__model_show_reply__init(sr);
	sr->model = sum;
	sr->manifest = m;
	sr->metrics = metrics;
	sr->n_metrics = n_metrics;
	r->body_case = PIM__RESPONSE__BODY_MODEL_SHOW;
	r->model_show = sr;
	return r;
}

static Pim__Response *do_model_remove(struct rpc_context *ctx, struct rpc_peer *peer,
				      const Pim__Request *req)
{
	struct pim_error err = { 0 };
	const char *name = req->model_remove->name;
	Pim__Response *r = check_name(req->id, name);

	if (r)
		return r;
	int k = store_model_remove(ctx->store, name, peer->cred.uid, &err);
	if (k < 0) {
		if (k == -ENOSPC)
			log_warning("Cannot remove model \"%s\": %s", name, err.msg);
		return rpc_error_from(req->id, &err);
	}
	log_info("Model \"%s\" removed by uid %u", name, (unsigned)peer->cred.uid);
	if (k > 0)
		log_warning("The file system of %s is full: model \"%s\" was removed with the room pimd "
			    "keeps in reserve, which is %s", store_path(ctx->store), name,
			    store_reserve_held(ctx->store) ? "restored" : "spent until space is freed");
	r = rpc_response_new(req->id);
	Pim__ModelRemoveReply *rr = malloc(sizeof *rr);
	char *n = strdup(name);
	if (!r || !rr || !n) {
		free(r);
		free(rr);
		free(n);
		return NULL;
	}
	pim__model_remove_reply__init(rr);
	rr->name = n;
	r->body_case = PIM__RESPONSE__BODY_MODEL_REMOVE;
	r->model_remove = rr;
	return r;
}

Pim__Response *rpc_defer(struct rpc_deferred *defer, const struct rpc_deferred *job)
{
	if (defer) {
		*defer = *job;
		return NULL;
	}
	job->run(job->data);
	Pim__Response *r = job->finish(job->data);
	job->release(job->data);
	return r;
}

Pim__Response *rpc_handle(struct rpc_context *ctx, struct rpc_peer *peer, const Pim__Request *req,
			  enum rpc_after *after, struct rpc_deferred *defer)
{
	*after = RPC_KEEP;
	if (defer)
		defer->run = NULL;
	ctx->requests++;

	if (!peer->hello_done && req->body_case != PIM__REQUEST__BODY_HELLO) {
		*after = RPC_CLOSE;
		return rpc_error_response(req->id, PIM__ERROR_CODE__ERROR_PROTOCOL,
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
		return profiler_rpc_start(ctx->profiler, peer, req);
	case PIM__REQUEST__BODY_PROFILE_STATUS:
		return profiler_rpc_status(ctx->profiler, req);
	case PIM__REQUEST__BODY_SAMPLE_BATCH:
		return profiler_rpc_samples(ctx->profiler, peer, req);
	default:
		/* A newer client may send bodies this daemon does not know; that is not fatal. */
		return rpc_error_response(req->id, PIM__ERROR_CODE__ERROR_UNIMPLEMENTED,
					  "request body not known to this pimd (version %s)", PIMD_VERSION);
	}
}

void rpc_peer_closed(struct rpc_context *ctx, struct rpc_peer *peer)
{
	if (peer->insitu)
		profiler_insitu_close(ctx->profiler, peer);
}

void *rpc_calloc(struct rpc_builder *b, size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);
	if (!p)
		b->oom = true;
	return p;
}

char *rpc_strdup(struct rpc_builder *b, const char *s)
{
	char *d = strdup(s ? s : "");
	if (!d)
		b->oom = true;
	return d;
}

void rpc_append(struct rpc_builder *b, char ***v, size_t *n, const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	char **nv = s ? realloc(*v, (*n + 1) * sizeof *nv) : NULL;
	if (!nv) {
		free(s);
		b->oom = true;
		return;
	}
	*v = nv;
	nv[(*n)++] = s;
}
