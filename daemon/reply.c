/* SPDX-License-Identifier: MIT */
#include "reply.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "manifest.h"

/* The field of Response's oneof that carries body (protobuf-c numbers the cases by field). */
static const ProtobufCFieldDescriptor *body_field(Pim__Response__BodyCase body)
{
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field(&pim__response__descriptor, (unsigned)body);
	assert(f && f->type == PROTOBUF_C_TYPE_MESSAGE && (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF));
	return f;
}

static void attach(Pim__Response *r, const ProtobufCFieldDescriptor *f, void *msg)
{
	memcpy((char *)r + f->offset, &msg, sizeof msg);
	r->body_case = (Pim__Response__BodyCase)f->id;
}

static Pim__Response *response_new(uint64_t id)
{
	Pim__Response *r = malloc(sizeof *r);
	if (r) {
		pim__response__init(r);
		r->id = id;
	}
	return r;
}

void *reply_message(struct reply *b, const ProtobufCMessageDescriptor *d)
{
	void *m = malloc(d->sizeof_message);
	if (!m) {
		b->oom = true;
		return NULL;
	}
	d->message_init(m);
	return m;
}

void *reply_start(struct reply *b, uint64_t id, Pim__Response__BodyCase body)
{
	const ProtobufCFieldDescriptor *f = body_field(body);

	*b = (struct reply){ .id = id, .resp = response_new(id) };
	void *m = b->resp ? reply_message(b, f->descriptor) : NULL;
	if (!m) {
		b->oom = true;
		return NULL;
	}
	attach(b->resp, f, m);
	return m;
}

Pim__Response *reply_finish(struct reply *b)
{
	Pim__Response *r = b->resp;
	b->resp = NULL;
	if (b->oom) {
		pim__response__free_unpacked(r, NULL);
		return NULL;
	}
	return r;
}

Pim__Response *reply_fail(struct reply *b, const struct pim_error *err)
{
	pim__response__free_unpacked(b->resp, NULL);
	b->resp = NULL;
	return reply_error_from(b->id, err);
}

void *reply_calloc(struct reply *b, size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		b->oom = true;
	return p;
}

char *reply_strdup(struct reply *b, const char *s)
{
	char *d = strdup(s ? s : "");
	if (!d)
		b->oom = true;
	return d;
}

static char *vformat(struct reply *b, const char *fmt, va_list ap)
{
	char *s = NULL;
	if (vasprintf(&s, fmt, ap) < 0) {
		s = NULL;
		b->oom = true;
	}
	return s;
}

char *reply_printf(struct reply *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	char *s = vformat(b, fmt, ap);
	va_end(ap);
	return s;
}

void reply_append(struct reply *b, char ***v, size_t *n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	char *s = vformat(b, fmt, ap);
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

Pim__Response *reply_wrap(uint64_t id, Pim__Response__BodyCase body, void *msg)
{
	const ProtobufCFieldDescriptor *f = body_field(body);
	Pim__Response *r = response_new(id);

	assert(((ProtobufCMessage *)msg)->descriptor == f->descriptor);
	if (!r) {
		protobuf_c_message_free_unpacked(msg, NULL);
		return NULL;
	}
	attach(r, f, msg);
	return r;
}

Pim__ErrorCode reply_code_from_errno(int e)
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
	case -EROFS: /* the database (pimd's business), not a refusal of the client */
		return PIM__ERROR_CODE__ERROR_INTERNAL;
	case -EPROTONOSUPPORT:
		return PIM__ERROR_CODE__ERROR_UNSUPPORTED_VERSION;
	case -EOPNOTSUPP:
		return PIM__ERROR_CODE__ERROR_UNIMPLEMENTED;
	default:
		return PIM__ERROR_CODE__ERROR_INTERNAL;
	}
}

Pim__Response *reply_error(uint64_t id, Pim__ErrorCode code, const char *fmt, ...)
{
	struct reply b;
	va_list ap;

	Pim__Error *e = reply_start(&b, id, PIM__RESPONSE__BODY_ERROR);
	if (e) {
		e->code = code;
		va_start(ap, fmt);
		e->message = vformat(&b, fmt, ap);
		va_end(ap);
	}
	return reply_finish(&b);
}

Pim__Response *reply_error_from(uint64_t id, const struct pim_error *err)
{
	return reply_error(id, reply_code_from_errno(err->code), "%s", err->msg);
}

/* A placement answer with the writer. */
struct decision_write {
	struct store_write sw;
	size_t *waiting; /* rpc_context.decisions_waiting */
	int64_t model_id, platform_id;
	uint8_t *packed;
	size_t len;
	char model[MANIFEST_NAME_MAX + 1];
	char key[]; /* (the flexible member last) */
};

static int decision_write(struct store *s, void *data, struct pim_error *err)
{
	struct decision_write *d = data;
	return store_decision_put(s, d->model_id, d->platform_id, d->key, d->packed, d->len, err);
}

static void decision_done(void *data, int r, const struct pim_error *err)
{
	struct decision_write *d = data;

	if (r < 0)
		log_warning("Could not store an answer for \"%s\": %s", d->model, err->msg);
	__atomic_fetch_sub(d->waiting, d->len, __ATOMIC_RELAXED);
	free(d->packed);
	free(d);
}

void reply_store_decision(struct rpc_context *ctx, int64_t model_id, const char *key, uint8_t *packed,
			  size_t len, const char *model)
{
	struct decision_write *d = NULL;

	if (__atomic_load_n(ctx->decisions_waiting, __ATOMIC_RELAXED) + len <= REPLY_DECISIONS_WAITING_MAX)
		d = calloc(1, sizeof *d + strlen(key) + 1);
	if (!d) {
		free(packed);
		return;
	}
	*d = (struct decision_write){ .sw = { decision_write, decision_done, d, NULL, NULL },
				      .waiting = ctx->decisions_waiting, .model_id = model_id,
				      .platform_id = ctx->platform->row, .packed = packed, .len = len };
	snprintf(d->model, sizeof d->model, "%s", model);
	memcpy(d->key, key, strlen(key) + 1);
	__atomic_fetch_add(ctx->decisions_waiting, len, __ATOMIC_RELAXED);
	store_write_via(&ctx->writer, ctx->store, &d->sw);
}

Pim__Response *reply_defer(struct rpc_deferred *defer, const struct rpc_deferred *job)
{
	if (defer) {
		*defer = *job;
		return NULL;
	}
	struct rpc_deferred part = *job;
	for (;;) {
		/* (the write waits in the store until settled: its done() never runs inside the
		 * call that hands it over) */
		struct store_write w = part.write;
		if (w.write) {
			store_write_via(NULL, part.store, &w);
			store_write_settle(part.store);
		} else {
			part.run(part.store, part.data);
		}
		struct rpc_deferred next = { 0 };
		Pim__Response *r = part.finish(part.data, &next);
		if (!r && (next.run || next.write.write)) {
			part = next; /* (this part's data goes on with it) */
			continue;
		}
		part.release(part.data);
		return r;
	}
}

void reply_b_cpu_fill(Pim__BandwidthProbe *m, const struct rpc_context *ctx, double requested)
{
	const struct store_platform *id = &ctx->platform->id;

	if (requested > 0 && requested != (ctx->params->b_cpu > 0 ? ctx->params->b_cpu : id->b_cpu)) {
		m->b_cpu = requested;
		m->source = (char *)"requested";
	} else if (ctx->params->b_cpu > 0) {
		m->b_cpu = ctx->params->b_cpu;
		m->source = (char *)"configured";
	} else if (id->b_cpu > 0) {
		m->b_cpu = id->b_cpu;
		m->source = (char *)"measured";
	} else {
		m->b_cpu = placement_params_default().b_cpu;
		m->source = (char *)"default (the paper's host)";
	}
	if (id->b_cpu > 0) {
		m->measured = id->b_cpu;
		m->spread = id->b_cpu_spread;
		m->method = (char *)id->b_cpu_method;
		m->measured_at = id->b_cpu_measured_at;
		m->busy = id->b_cpu_busy;
		m->load = (char *)id->b_cpu_load;
		m->host = (char *)id->b_cpu_host;
	}
}

void reply_b_cpu(struct reply *b, Pim__BandwidthProbe **at, const struct rpc_context *ctx, double requested)
{
	Pim__BandwidthProbe *m = *at = reply_message(b, &pim__bandwidth_probe__descriptor);

	if (!m)
		return;
	reply_b_cpu_fill(m, ctx, requested);
	/* (owned by the reply from here on) */
	m->source = reply_strdup(b, m->source);
	m->method = reply_strdup(b, m->method);
	m->load = reply_strdup(b, m->load);
	m->host = reply_strdup(b, m->host);
}
