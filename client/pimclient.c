/* SPDX-License-Identifier: MIT */
/* libpimclient: see pim.h and libpimclient(3).  Never logs; no global state. */
#include "pim.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <sys/un.h>
#include <unistd.h>

#include "frame.h"
#include "wire.h"
#include "pim.pb-c.h"
#include "pim_hooks.h"
#include "pimclient_priv.h"

int pimclient_fail(pim_client *c, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->error, sizeof c->error, fmt, ap);
	va_end(ap);
	c->remote = PIM_REMOTE_NONE;
	return code;
}

pim_client *pim_client_new(void)
{
	pim_client *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	pthread_mutex_init(&c->lock, NULL);
	c->fd = -1;
	c->timeout_ms = -1;
	c->next_id = 1;
	c->max_frame = FRAME_MAX_DEFAULT;
	return c;
}

void pim_client_free(pim_client *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

const char *pim_client_error(const pim_client *c) { return c->error; }
int pim_client_remote_error(const pim_client *c) { return c->remote; }
const char *pim_client_socket_path(const pim_client *c) { return c->path; }
const char *pim_client_server_version(const pim_client *c) { return c->server_version; }

static int errno_from_code(Pim__ErrorCode code)
{
	switch (code) {
	case PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT: return -EINVAL;
	case PIM__ERROR_CODE__ERROR_NOT_FOUND: return -ENOENT;
	case PIM__ERROR_CODE__ERROR_ALREADY_EXISTS: return -EEXIST;
	case PIM__ERROR_CODE__ERROR_PROTOCOL: return -EPROTO;
	case PIM__ERROR_CODE__ERROR_UNSUPPORTED_VERSION: return -EPROTONOSUPPORT;
	case PIM__ERROR_CODE__ERROR_BUSY: return -EBUSY;
	case PIM__ERROR_CODE__ERROR_PERMISSION_DENIED: return -EACCES;
	case PIM__ERROR_CODE__ERROR_UNIMPLEMENTED: return -EOPNOTSUPP;
	default: return -EIO;
	}
}

static void drop_connection(pim_client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* Sends the request buf (n bytes, with pass_fd when >= 0) and receives its response's bytes
 * (*rbuf, to free); on transport failure the connection is dropped. */
static int exchange_bytes(pim_client *c, const uint8_t *buf, size_t n, int pass_fd, uint8_t **rbuf,
			  uint32_t *rlen)
{
	int r = pass_fd >= 0 ? frame_send_fd(c->fd, buf, (uint32_t)n, pass_fd) : frame_send(c->fd, buf, (uint32_t)n);

	if (r < 0 && r != -EPIPE && r != -ECONNRESET) {
		drop_connection(c);
		return pimclient_fail(c, r, "sending to pimd at %s: %s", c->path, strerror(-r));
	}
	/* Even when the send failed because pimd closed the connection, it may have said why
	 * first (too many clients, an oversized frame): read that answer if it is there. */
	int sent = r;
	r = frame_recv_wait(c->fd, c->max_frame, c->timeout_ms, rbuf, rlen);
	if (r < 0 && sent < 0) {
		drop_connection(c);
		return pimclient_fail(c, sent, "sending to pimd at %s: %s", c->path, strerror(-sent));
	}
	if (r < 0) {
		drop_connection(c);
		if (r == -ECONNRESET || r == -EPIPE)
			return pimclient_fail(c, -ECONNRESET, "pimd at %s closed the connection", c->path);
		if (r == -EAGAIN)
			return pimclient_fail(c, -ETIMEDOUT, "no answer from pimd at %s within the timeout", c->path);
		return pimclient_fail(c, r, "receiving from pimd at %s: %s", c->path, strerror(-r));
	}
	return 0;
}

/* As exchange_bytes, for req (its id set here). */
static int exchange(pim_client *c, Pim__Request *req, int pass_fd, uint8_t **rbuf, uint32_t *rlen)
{
	uint8_t small[512], *buf;
	size_t n;
	int r;

	if (c->fd < 0)
		return pimclient_fail(c, -ENOTCONN, "not connected to pimd");
	req->id = c->next_id++;
	n = pim__request__get_packed_size(req);
	if (n > c->max_frame)
		return pimclient_fail(c, -EMSGSIZE, "request of %zu bytes exceeds the daemon's frame limit of %u "
			    "bytes", n, c->max_frame);
	buf = n <= sizeof small ? small : malloc(n);
	if (!buf)
		return pimclient_fail(c, -ENOMEM, "out of memory");
	pim__request__pack(req, buf);
	r = exchange_bytes(c, buf, n, pass_fd, rbuf, rlen);
	if (buf != small)
		free(buf);
	return r;
}

/* An answer with another id than request id's (0: an answer to no request, such as a refusal
 * before the connection is dropped). */
static int id_mismatch(pim_client *c, uint64_t want, uint64_t got)
{
	drop_connection(c);
	return pimclient_fail(c, -EBADMSG, "pimd answered request %llu with id %llu", (unsigned long long)want,
			      (unsigned long long)got);
}

/* The answer in rbuf (rlen bytes, freed here) to request id, unpacked into *out: an Error
 * becomes a failure with its message, another body or id is refused. */
static int answer_from(pim_client *c, uint64_t id, Pim__Response__BodyCase want, uint8_t *rbuf, uint32_t rlen,
		       Pim__Response **out)
{
	Pim__Response *resp = pim__response__unpack(NULL, rlen, rbuf);
	int r;

	free(rbuf);
	if (!resp) {
		drop_connection(c);
		return pimclient_fail(c, -EBADMSG, "pimd sent a response that does not decode");
	}
	if (resp->id != id && resp->id != 0) {
		uint64_t got = resp->id;
		pim__response__free_unpacked(resp, NULL);
		return id_mismatch(c, id, got);
	}
	if (resp->body_case == PIM__RESPONSE__BODY_ERROR) {
		r = errno_from_code(resp->error->code);
		pimclient_fail(c, r, "%s", resp->error->message);
		c->remote = (int)resp->error->code ? (int)resp->error->code : PIM_REMOTE_INTERNAL;
		pim__response__free_unpacked(resp, NULL);
		return r;
	}
	if (resp->body_case != want) {
		int got = (int)resp->body_case;
		pim__response__free_unpacked(resp, NULL);
		return pimclient_fail(c, -EBADMSG, "pimd answered with an unexpected message (%d)", got);
	}
	*out = resp;
	c->error[0] = 0;
	c->remote = PIM_REMOTE_NONE;
	return 0;
}

/* Round trip expecting a body; an Error response becomes a failure with its message. */
int pimclient_call_fd(pim_client *c, Pim__Request *req, int pass_fd, Pim__Response__BodyCase want,
		      Pim__Response **out)
{
	uint8_t *rbuf;
	uint32_t rlen;
	int r = exchange(c, req, pass_fd, &rbuf, &rlen);

	return r < 0 ? r : answer_from(c, req->id, want, rbuf, rlen, out);
}

int pimclient_call(pim_client *c, Pim__Request *req, Pim__Response__BodyCase want, Pim__Response **out)
{
	return pimclient_call_fd(c, req, -1, want, out);
}

int pim_client_connect(pim_client *c, const char *path, const char *client_name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__Hello hello = PIM__HELLO__INIT;
	Pim__Response *resp;
	int r;

	pthread_mutex_lock(&c->lock);
	drop_connection(c);
	if (!path || !*path)
		path = getenv(PIM_SOCKET_ENV);
	if (!path || !*path)
		path = PIM_DEFAULT_SOCKET;
	if (strlen(path) >= sizeof c->path) {
		r = pimclient_fail(c, -ENAMETOOLONG, "socket path %s is too long", path);
		goto out;
	}
	memcpy(c->path, path, strlen(path) + 1);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	c->timeout_ms = -1;
	if (c->fd < 0) {
		r = pimclient_fail(c, -errno, "socket: %s", strerror(errno));
		goto out;
	}
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		r = -errno;
		drop_connection(c);
		pimclient_fail(c, r, "cannot connect to pimd at %s: %s%s", path, strerror(-r),
		     r == -ENOENT || r == -ECONNREFUSED ? " (is pimd running? $PIMD_SOCKET names "
							  "another path)"
		     : r == -EACCES ? " (is your user in the socket's group?)" : "");
		goto out;
	}
	hello.protocol_version = PIM_PROTOCOL_VERSION;
	hello.client_name = (char *)(client_name ? client_name : "libpimclient");
	req.body_case = PIM__REQUEST__BODY_HELLO;
	req.hello = &hello;
	r = pimclient_call(c, &req, PIM__RESPONSE__BODY_HELLO, &resp);
	if (r < 0) {
		drop_connection(c);
		goto out;
	}
	snprintf(c->server_version, sizeof c->server_version, "%s", resp->hello->server_version);
	if (resp->hello->max_frame_bytes >= FRAME_MAX_MIN && resp->hello->max_frame_bytes <= FRAME_MAX_LIMIT)
		c->max_frame = resp->hello->max_frame_bytes;
	pim__response__free_unpacked(resp, NULL);
	r = 0;
out:
	pthread_mutex_unlock(&c->lock);
	return r;
}

int pim_client_set_timeout(pim_client *c, unsigned timeout_ms)
{
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
	int r = 0;

	pthread_mutex_lock(&c->lock);
	if (c->fd < 0)
		r = pimclient_fail(c, -ENOTCONN, "not connected to pimd");
	else if (setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0)
		r = pimclient_fail(c, -errno, "SO_RCVTIMEO: %s", strerror(errno));
	else
		c->timeout_ms = timeout_ms && timeout_ms <= INT_MAX ? (int)timeout_ms : -1;
	pthread_mutex_unlock(&c->lock);
	return r;
}

void pimclient_copy_str(char *dst, size_t cap, const char *src)
{
	size_t n = src && cap ? strnlen(src, cap - 1) : 0;

	if (!cap)
		return;
	memcpy(dst, src ? src : "", n);
	dst[n] = 0;
}

void pimclient_info_from_wire(struct pim_model_info *info, const Pim__ModelSummary *s)
{
	memset(info, 0, sizeof *info);
	if (!s)
		return;
	pimclient_copy_str(info->name, sizeof info->name, s->name);
	pimclient_copy_str(info->source, sizeof info->source, s->source);
	info->regions = s->regions;
	info->allocations = s->allocations;
	info->owner_uid = s->owner_uid;
	info->loaded_at = s->loaded_at;
	info->allocation_bytes = s->allocation_bytes;
}

/* Status's fields read on the wire into struct pim_status (wire.h): its answer, the largest
 * of the frequent ones, costs no protobuf-c unpacking and no copy of its strings but one. */
#define STATUS_STR(num, f) { num, WIRE_SLOT_STRING, offsetof(struct pim_status, f), sizeof(((struct pim_status *)0)->f) }
#define STATUS_NUM(num, kind, f) { num, kind, offsetof(struct pim_status, f), 0 }
_Static_assert(sizeof(unsigned) == sizeof(uint32_t), "struct pim_status's unsigned fields are uint32");
static const struct wire_slot status_slots[] = {
	STATUS_STR(1, server_version),
	STATUS_NUM(2, WIRE_SLOT_U32, protocol_version),
	STATUS_NUM(3, WIRE_SLOT_U64, uptime_ms),
	STATUS_NUM(4, WIRE_SLOT_U32, models),
	STATUS_NUM(5, WIRE_SLOT_U32, clients),
	STATUS_NUM(6, WIRE_SLOT_U32, schema_version),
	STATUS_STR(7, database),
	STATUS_NUM(8, WIRE_SLOT_U64, requests),
	STATUS_NUM(9, WIRE_SLOT_U32, max_frame_bytes),
	STATUS_NUM(10, WIRE_SLOT_U32, pid),
	STATUS_STR(11, platform),
	STATUS_STR(12, backend),
	STATUS_STR(13, backend_reason),
	STATUS_NUM(14, WIRE_SLOT_DOUBLE, b_cpu),
	STATUS_STR(15, b_cpu_source),
	STATUS_NUM(16, WIRE_SLOT_U32, profile_jobs),
	STATUS_STR(17, containment),
};

/* The body of a Status answer to request id (rbuf, rlen bytes) when it is one; false for
 * anything else (an Error, another body or id, bytes that do not decode), which answer_from
 * then describes. */
static bool status_body(const uint8_t *rbuf, size_t rlen, uint64_t id, const uint8_t **body, size_t *n)
{
	struct wire_field f;
	size_t i = 0;
	uint64_t got = 0;
	uint32_t which = 0;
	int r;

	while ((r = wire_next(rbuf, rlen, &i, &f)) > 0) {
		const ProtobufCFieldDescriptor *d = f.number == PIM__RESPONSE__BODY_STATUS || f.number == 1 ? NULL
			: protobuf_c_message_descriptor_get_field(&pim__response__descriptor, f.number);
		if (f.number == 1 && f.type == WIRE_VARINT) {
			got = f.v;
		} else if (f.number == PIM__RESPONSE__BODY_STATUS || (d && (d->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))) {
			which = f.number; /* (the last body is the one) */
			*body = f.p;
			*n = f.len;
			if (f.type != WIRE_LEN)
				return false;
		}
	}
	return r == 0 && (got == id || got == 0) && which == PIM__RESPONSE__BODY_STATUS;
}

int pim_status(pim_client *c, struct pim_status *st)
{
	uint8_t req[16], *rbuf;
	Pim__Response *resp;
	const uint8_t *sb = NULL;
	uint32_t rlen;
	size_t sn = 0;
	int r;

	pthread_mutex_lock(&c->lock);
	if (c->fd < 0) {
		r = pimclient_fail(c, -ENOTCONN, "not connected to pimd");
		goto out;
	}
	/* Request{id, status: StatusRequest{}} (wire.h) */
	uint64_t id = c->next_id++;
	size_t n = wire_put_uint(req, 1, id);
	n += wire_put_len(req + n, PIM__REQUEST__BODY_STATUS, 0);
	if ((r = exchange_bytes(c, req, n, -1, &rbuf, &rlen)) < 0)
		goto out;
	memset(st, 0, sizeof *st);
	if (status_body(rbuf, rlen, id, &sb, &sn) &&
	    wire_read(sb, sn, status_slots, sizeof status_slots / sizeof *status_slots, st) == 0) {
		free(rbuf);
		c->error[0] = 0;
		c->remote = PIM_REMOTE_NONE;
	} else if ((r = answer_from(c, id, PIM__RESPONSE__BODY_STATUS, rbuf, rlen, &resp)) == 0) {
		/* (protobuf-c took what the wire reading did not) */
		pim__response__free_unpacked(resp, NULL);
		drop_connection(c);
		r = pimclient_fail(c, -EBADMSG, "pimd sent a Status answer that does not decode");
	}
out:
	pthread_mutex_unlock(&c->lock);
	return r;
}

int pim_status_get(pim_client *c, struct pim_daemon_status **out)
{
	Pim__Response *resp;
	int r;

	*out = NULL;
	pthread_mutex_lock(&c->lock);
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__StatusRequest body = PIM__STATUS_REQUEST__INIT;
	req.body_case = PIM__REQUEST__BODY_STATUS;
	req.status = &body;
	r = pimclient_call(c, &req, PIM__RESPONSE__BODY_STATUS, &resp); /* (kept by the caller) */
	if (r == 0) {
		struct pim_daemon_status *d = calloc(1, sizeof *d);
		if (!d) {
			pim__response__free_unpacked(resp, NULL);
			r = pimclient_fail(c, -ENOMEM, "out of memory");
		} else {
			const Pim__StatusReply *w = resp->status;
			*d = (struct pim_daemon_status){
				.server_version = w->server_version, .protocol_version = w->protocol_version,
				.uptime_ms = w->uptime_ms, .models = w->models, .clients = w->clients,
				.schema_version = w->schema_version, .requests = w->requests,
				.max_frame_bytes = w->max_frame_bytes, .pid = w->pid, .database = w->database,
				.platform = w->platform, .backend = w->backend, .backend_reason = w->backend_reason,
				.b_cpu = w->b_cpu, .b_cpu_source = w->b_cpu_source, .profile_jobs = w->profile_jobs,
				.containment = w->containment, .internal_ = resp,
			};
			pimclient_probe_from_wire(&d->b_cpu_probe, w->b_cpu_probe);
			*out = d;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

void pim_daemon_status_free(struct pim_daemon_status *d)
{
	if (!d)
		return;
	if (d->internal_)
		pim__response__free_unpacked(d->internal_, NULL);
	free(d);
}

int pim_model_load(pim_client *c, const void *manifest, size_t len, unsigned flags,
		   struct pim_model_info *info, int *replaced)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__ModelLoad body = PIM__MODEL_LOAD__INIT;
	Pim__Response *resp;
	int r;

	pthread_mutex_lock(&c->lock);
	body.manifest = pim__manifest__unpack(NULL, len, manifest);
	if (!body.manifest) {
		r = pimclient_fail(c, -EINVAL, "the manifest is not a valid serialized pim.Manifest");
		goto out;
	}
	body.replace = (flags & PIM_LOAD_REPLACE) != 0;
	req.body_case = PIM__REQUEST__BODY_MODEL_LOAD;
	req.model_load = &body;
	r = pimclient_call(c, &req, PIM__RESPONSE__BODY_MODEL_LOAD, &resp);
	pim__manifest__free_unpacked(body.manifest, NULL);
	if (r == 0) {
		if (info)
			pimclient_info_from_wire(info, resp->model_load->model);
		if (replaced)
			*replaced = resp->model_load->replaced;
		pim__response__free_unpacked(resp, NULL);
	}
out:
	pthread_mutex_unlock(&c->lock);
	return r;
}

int pim_model_list(pim_client *c, struct pim_model_info **models, size_t *n)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__ModelList body = PIM__MODEL_LIST__INIT;
	Pim__Response *resp;
	int r;

	pthread_mutex_lock(&c->lock);
	req.body_case = PIM__REQUEST__BODY_MODEL_LIST;
	req.model_list = &body;
	r = pimclient_call(c, &req, PIM__RESPONSE__BODY_MODEL_LIST, &resp);
	if (r == 0) {
		size_t cnt = resp->model_list->n_models;
		struct pim_model_info *v = calloc(cnt ? cnt : 1, sizeof *v);
		if (!v)
			r = pimclient_fail(c, -ENOMEM, "out of memory");
		else {
			for (size_t i = 0; i < cnt; i++)
				pimclient_info_from_wire(&v[i], resp->model_list->models[i]);
			*models = v;
			*n = cnt;
		}
		pim__response__free_unpacked(resp, NULL);
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

int pim_model_show(pim_client *c, const char *name, struct pim_model_info *info, void **manifest,
		   size_t *manifest_len)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__ModelShow body = PIM__MODEL_SHOW__INIT;
	Pim__Response *resp;
	int r;

	pthread_mutex_lock(&c->lock);
	body.name = (char *)name;
	req.body_case = PIM__REQUEST__BODY_MODEL_SHOW;
	req.model_show = &body;
	r = pimclient_call(c, &req, PIM__RESPONSE__BODY_MODEL_SHOW, &resp);
	if (r == 0) {
		if (info)
			pimclient_info_from_wire(info, resp->model_show->model);
		if (manifest) {
			const Pim__Manifest *m = resp->model_show->manifest;
			size_t len = m ? pim__manifest__get_packed_size(m) : 0;
			void *buf = malloc(len ? len : 1);
			if (!buf)
				r = pimclient_fail(c, -ENOMEM, "out of memory");
			else {
				if (m)
					pim__manifest__pack(m, buf);
				*manifest = buf;
				*manifest_len = len;
			}
		}
		pim__response__free_unpacked(resp, NULL);
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

int pim_model_remove(pim_client *c, const char *name)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__ModelRemove body = PIM__MODEL_REMOVE__INIT;
	Pim__Response *resp;
	int r;

	pthread_mutex_lock(&c->lock);
	body.name = (char *)name;
	req.body_case = PIM__REQUEST__BODY_MODEL_REMOVE;
	req.model_remove = &body;
	r = pimclient_call(c, &req, PIM__RESPONSE__BODY_MODEL_REMOVE, &resp);
	if (r == 0)
		pim__response__free_unpacked(resp, NULL);
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* The id (field 1) of a serialized Response, its top-level fields checked whole (the caller
 * decodes the rest); false when they are not. */
static bool response_id(const uint8_t *p, size_t n, uint64_t *id)
{
	struct wire_field f;
	size_t i = 0;
	int r;

	*id = 0;
	while ((r = wire_next(p, n, &i, &f)) > 0)
		if (f.number == 1 && f.type == WIRE_VARINT)
			*id = f.v;
	return r == 0;
}

int pim_call(pim_client *c, const void *request, size_t len, void **response, size_t *response_len)
{
	Pim__Request *req;
	uint8_t *rbuf = NULL;
	uint32_t rlen;
	uint64_t id;
	int r;

	pthread_mutex_lock(&c->lock);
	req = pim__request__unpack(NULL, len, request);
	if (!req) {
		r = pimclient_fail(c, -EINVAL, "the request is not a valid serialized pim.Request");
		goto out;
	}
	r = exchange(c, req, -1, &rbuf, &rlen);
	/* the bytes as pimd sent them: the caller decodes them (no copy, no second packing) */
	if (r == 0 && !response_id(rbuf, rlen, &id)) {
		drop_connection(c);
		r = pimclient_fail(c, -EBADMSG, "pimd sent a response that does not decode");
	} else if (r == 0 && id != req->id && id != 0) {
		r = id_mismatch(c, req->id, id);
	}
	pim__request__free_unpacked(req, NULL);
	if (r == 0) {
		*response = rbuf;
		*response_len = rlen;
		rbuf = NULL;
	}
	free(rbuf);
out:
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* ---------------------------------------------------------------- the decided path */

#define SAMPLE_BUF 4096          /* samples per batch */
#define SAMPLE_FLUSH_MS 200      /* the background thread sends at least this often */

struct sampler {
	pim_model *m;
	unsigned one_in;
	uint32_t *count;        /* per region: executions since the last sample (racy by design) */
	uint64_t *start;        /* per region: CLOCK_MONOTONIC ns of a sampled entry, 0 if none */
	pthread_mutex_t lock;   /* buf, n; taken only on a sampled exit and by the sender */
	pthread_cond_t wake;
	Pim__RegionSample buf[SAMPLE_BUF];
	size_t n;
	bool stop;
	uint64_t sent, dropped;
	pim_client *c;
	pthread_t thread;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO: no system call */
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline __attribute__((always_inline)) void sample_enter(struct sampler *s, uint32_t region)
{
	if (++s->count[region] < s->one_in)
		return;
	s->count[region] = 0;
	__atomic_store_n(&s->start[region], mono_ns(), __ATOMIC_RELAXED);
}

static inline void sample_exit(struct sampler *s, uint32_t region)
{
	/* A plain load first: the locked exchange only on the (rare) sampled exit. */
	if (!__atomic_load_n(&s->start[region], __ATOMIC_RELAXED))
		return;
	uint64_t t0 = __atomic_exchange_n(&s->start[region], 0, __ATOMIC_RELAXED);
	if (!t0)
		return;
	uint64_t dt = mono_ns() - t0;
	pthread_mutex_lock(&s->lock);
	if (s->n < SAMPLE_BUF) {
		Pim__RegionSample *x = &s->buf[s->n++];
		pim__region_sample__init(x);
		x->region_id = region;
		x->time_ns = dt ? dt : 1;
		if (s->n == SAMPLE_BUF)
			pthread_cond_signal(&s->wake);
	} else
		s->dropped++;
	pthread_mutex_unlock(&s->lock);
}


struct pim_model {
	uint32_t id_limit;
	unsigned offloaded;
	uint64_t unknown; /* updated with relaxed atomics: a counter, not a lock */
	char name[129];
	struct sampler *sampler; /* non-NULL while in-situ sampling runs */
	uint64_t sampled_sent, sampled_dropped; /* totals of the last sampling session */
	uint8_t place[];  /* one byte per region id: PIM_ON_HOST, PIM_ON_PIM or PLACE_UNKNOWN */
};


#define PLACE_UNKNOWN 2 /* an id below the limit that names no region */

/* The daemon never answers more ids than this (placement_rpc.h: PLACEMENT_DECISIONS_MAX_ID). */
#define MODEL_ID_LIMIT_MAX (16u * 1024u * 1024u)

int pim_model_open(pim_client *c, const char *name, pim_model **out)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__Decisions body = PIM__DECISIONS__INIT;
	Pim__Response *resp;
	int r;

	pthread_mutex_lock(&c->lock);
	body.model = (char *)name;
	req.body_case = PIM__REQUEST__BODY_DECISIONS;
	req.decisions = &body;
	r = pimclient_call(c, &req, PIM__RESPONSE__BODY_DECISIONS, &resp);
	if (r == 0) {
		const Pim__DecisionsReply *d = resp->decisions;
		if (d->id_limit > MODEL_ID_LIMIT_MAX || d->pim_bitmap.len < (d->id_limit + 7u) / 8u ||
		    d->known_bitmap.len < (d->id_limit + 7u) / 8u) {
			r = pimclient_fail(c, -EBADMSG, "pimd sent an inconsistent decision table");
		} else {
			pim_model *m = calloc(1, sizeof *m + d->id_limit + 1);
			if (!m) {
				r = pimclient_fail(c, -ENOMEM, "out of memory");
			} else {
				m->id_limit = d->id_limit;
				pimclient_copy_str(m->name, sizeof m->name, name);
				for (uint32_t i = 0; i < d->id_limit; i++)
					if (!(d->known_bitmap.data[i / 8] & (1u << (i % 8)))) {
						m->place[i] = PLACE_UNKNOWN;
					} else if (d->pim_bitmap.data[i / 8] & (1u << (i % 8))) {
						m->place[i] = PIM_ON_PIM;
						m->offloaded++;
					}
				*out = m;
			}
		}
		pim__response__free_unpacked(resp, NULL);
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

void pim_model_close(pim_model *m)
{
	if (m && m->sampler)
		pim_model_sample(m, NULL, 0);
	free(m);
}

int pim_model_region_enter(pim_model *m, uint32_t region)
{
	if (__builtin_expect(region < m->id_limit, 1)) {
		uint8_t p = m->place[region];
		struct sampler *s = __atomic_load_n(&m->sampler, __ATOMIC_ACQUIRE);
		if (__builtin_expect(s != NULL, 0))
			sample_enter(s, region);
		if (__builtin_expect(p != PLACE_UNKNOWN, 1))
			return p;
	}
	__atomic_fetch_add(&m->unknown, 1, __ATOMIC_RELAXED);
	return PIM_ON_HOST;
}

void pim_model_region_exit(pim_model *m, uint32_t region)
{
	struct sampler *s = __atomic_load_n(&m->sampler, __ATOMIC_ACQUIRE);
	if (__builtin_expect(s != NULL, 0) && region < m->id_limit)
		sample_exit(s, region);
}

unsigned pim_model_offloaded(const pim_model *m) { return m->offloaded; }

uint64_t pim_model_unknown_regions(const pim_model *m)
{
	return __atomic_load_n(&m->unknown, __ATOMIC_RELAXED);
}

static pim_model *bound_model;

void pim_model_bind_hooks(pim_model *m)
{
	__atomic_store_n(&bound_model, m, __ATOMIC_RELEASE);
}

void pim_region_enter(int32_t region)
{
	pim_model *m = __atomic_load_n(&bound_model, __ATOMIC_ACQUIRE);
	if (m)
		(void)pim_model_region_enter(m, (uint32_t)region);
}

void pim_region_exit(int32_t region)
{
	pim_model *m = __atomic_load_n(&bound_model, __ATOMIC_ACQUIRE);
	if (m)
		pim_model_region_exit(m, (uint32_t)region);
}

/* ---------------------------------------------------------------- profiling */

static void job_from(struct pim_profile_job *job, const Pim__ProfileReply *p)
{
	memset(job, 0, sizeof *job);
	job->id = p->job;
	pimclient_copy_str(job->state, sizeof job->state, p->state);
	pimclient_copy_str(job->model, sizeof job->model, p->model);
	pimclient_copy_str(job->backend, sizeof job->backend, p->backend);
	pimclient_copy_str(job->backend_reason, sizeof job->backend_reason, p->backend_reason);
	pimclient_copy_str(job->message, sizeof job->message, p->message);
	job->regions_done = p->regions_done;
	job->regions_total = p->regions_total;
	job->repetitions_done = p->repetitions_done;
	job->repetitions_total = p->repetitions_total;
	job->samples = p->samples;
	job->uid = p->uid;
}

int pim_profile_start(pim_client *c, const char *model, int library_fd,
		      const struct pim_profile_options *opt, struct pim_profile_job *job)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__Profile body = PIM__PROFILE__INIT;
	Pim__Response *resp;
	int r;

	pthread_mutex_lock(&c->lock);
	if (library_fd < 0) {
		r = pimclient_fail(c, -EBADF, "no model library descriptor");
		goto out;
	}
	body.model = (char *)model;
	if (opt) {
		body.repetitions = opt->repetitions;
		body.warmups = opt->warmups;
		body.timeout_ms = opt->timeout_ms;
		body.regions = (uint32_t *)opt->regions;
		body.n_regions = opt->n_regions;
	}
	req.body_case = PIM__REQUEST__BODY_PROFILE;
	req.profile = &body;
	r = pimclient_call_fd(c, &req, library_fd, PIM__RESPONSE__BODY_PROFILE, &resp);
	if (r == 0) {
		job_from(job, resp->profile);
		pim__response__free_unpacked(resp, NULL);
	}
out:
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* A request answered with a ProfileReply, read into job. */
static int profile_job_call(pim_client *c, Pim__Request *req, struct pim_profile_job *job)
{
	Pim__Response *resp;
	int r;

	pthread_mutex_lock(&c->lock);
	r = pimclient_call(c, req, PIM__RESPONSE__BODY_PROFILE, &resp);
	if (r == 0) {
		job_from(job, resp->profile);
		pim__response__free_unpacked(resp, NULL);
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

int pim_profile_status(pim_client *c, uint64_t id, struct pim_profile_job *job)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__ProfileStatus body = PIM__PROFILE_STATUS__INIT;

	body.job = id;
	req.body_case = PIM__REQUEST__BODY_PROFILE_STATUS;
	req.profile_status = &body;
	return profile_job_call(c, &req, job);
}

int pim_profile_poll(pim_client *c, uint64_t id, struct pim_profile_job *job, struct pim_profile_clock *clock)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__ProfileStatus body = PIM__PROFILE_STATUS__INIT;
	Pim__Response *resp;
	int r;

	body.job = id;
	req.body_case = PIM__REQUEST__BODY_PROFILE_STATUS;
	req.profile_status = &body;
	pthread_mutex_lock(&c->lock);
	r = pimclient_call(c, &req, PIM__RESPONSE__BODY_PROFILE, &resp);
	if (r == 0) {
		const Pim__ProfileReply *p = resp->profile;
		job_from(job, p);
		*clock = (struct pim_profile_clock){ .timeout_ms = p->timeout_ms, .running_ms = p->running_ms,
						     .created_at = p->created_at, .finished_at = p->finished_at };
		pim__response__free_unpacked(resp, NULL);
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

int pim_profile_cancel(pim_client *c, uint64_t id, struct pim_profile_job *job)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__ProfileCancel body = PIM__PROFILE_CANCEL__INIT;

	body.job = id;
	req.body_case = PIM__REQUEST__BODY_PROFILE_CANCEL;
	req.profile_cancel = &body;
	return profile_job_call(c, &req, job);
}

/* ---------------------------------------------------------------- JIT-Q plans */

#define JITQ_LAYERS_MAX 4096u /* jitq.h JITQ_MAX_LAYERS */

struct pim_jitq_plan {
	unsigned layers;
	unsigned lookahead[2];
	struct pim_jitq_launch *launches[2]; /* per phase, sorted by boundary */
	size_t n_launches[2];
	uint32_t *first[2];                  /* [layers + 2]: slot 0 is the prologue */
};

void pim_jitq_plan_free(pim_jitq_plan *p)
{
	if (!p)
		return;
	for (int ph = 0; ph < 2; ph++) {
		free(p->launches[ph]);
		free(p->first[ph]);
	}
	free(p);
}

static int cmp_launch(const void *a, const void *b)
{
	const struct pim_jitq_launch *x = a, *y = b;
	return (x->boundary > y->boundary) - (x->boundary < y->boundary);
}

static int jitq_index(pim_client *c, pim_jitq_plan *p, int ph, const Pim__JitqPhase *m)
{
	size_t n = m->n_launches;
	p->launches[ph] = calloc(n ? n : 1, sizeof *p->launches[ph]);
	p->first[ph] = calloc(p->layers + 3, sizeof *p->first[ph]);
	if (!p->launches[ph] || !p->first[ph])
		return pimclient_fail(c, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const Pim__JitqLaunch *l = m->launches[i];
		if (l->boundary < -1 || l->boundary >= (int32_t)p->layers || l->block >= p->layers)
			return pimclient_fail(c, -EBADMSG, "pimd sent a launch outside the model's blocks");
		struct pim_jitq_launch *d = &p->launches[ph][i];
		d->block = l->block;
		d->boundary = l->boundary;
		pimclient_copy_str(d->tensor, sizeof d->tensor, l->tensor);
		d->column = l->direction && strcmp(l->direction, "col") == 0;
		d->rows = l->rows;
		d->cols = l->cols;
		d->bytes = l->bytes;
		d->pim_s = l->pim_s;
	}
	p->n_launches[ph] = n;
	qsort(p->launches[ph], n, sizeof *p->launches[ph], cmp_launch);
	/* first[s]..first[s+1]: launches at boundary slot s (slot 0 = prologue, s = boundary + 1) */
	size_t k = 0;
	for (unsigned s = 0; s <= p->layers + 1; s++) {
		p->first[ph][s] = (uint32_t)k;
		while (k < n && p->launches[ph][k].boundary + 1 == (int32_t)s)
			k++;
	}
	p->first[ph][p->layers + 2] = (uint32_t)n;
	return 0;
}

int pim_jitq_plan_fetch(pim_client *c, const struct pim_jitq_request *rq, pim_jitq_plan **out)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__JitqPlan body = PIM__JITQ_PLAN__INIT;
	Pim__JitqModel model = PIM__JITQ_MODEL__INIT;
	Pim__Response *resp;
	int r;

	pthread_mutex_lock(&c->lock);
	if (rq->preset)
		model.preset = (char *)rq->preset;
	model.layers = rq->layers;
	model.hidden = rq->hidden;
	model.heads = rq->heads;
	model.seq = rq->seq;
	model.batch = rq->batch;
	model.tslice = rq->tslice;
	body.model = &model;
	if (rq->format)
		body.format = (char *)rq->format;
	if (rq->source)
		body.source = (char *)rq->source;
	if (rq->mapping)
		body.mapping = (char *)rq->mapping;
	body.pim_stacks = rq->pim_stacks;
	body.fwd_times = (double *)rq->fwd_s;
	body.bwd_times = (double *)rq->bwd_s;
	body.n_fwd_times = body.n_bwd_times = rq->fwd_s && rq->bwd_s ? rq->n_times : 0;
	body.per_block = true; /* every launch: the runtime needs them all */
	req.body_case = PIM__REQUEST__BODY_JITQ_PLAN;
	req.jitq_plan = &body;
	r = pimclient_call(c, &req, PIM__RESPONSE__BODY_JITQ_PLAN, &resp);
	if (r == 0) {
		const Pim__JitqPlanReply *m = resp->jitq_plan;
		pim_jitq_plan *p = calloc(1, sizeof *p);
		if (!p)
			r = pimclient_fail(c, -ENOMEM, "out of memory");
		else if (m->layers == 0 || m->layers > JITQ_LAYERS_MAX || m->n_phases != 2)
			r = pimclient_fail(c, -EBADMSG, "pimd sent a plan of an unexpected shape");
		else {
			p->layers = m->layers;
			for (int ph = 0; ph < 2 && r == 0; ph++) {
				p->lookahead[ph] = m->phases[ph]->lookahead;
				r = jitq_index(c, p, ph, m->phases[ph]);
			}
		}
		if (r == 0)
			*out = p;
		else
			pim_jitq_plan_free(p);
		pim__response__free_unpacked(resp, NULL);
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

const struct pim_jitq_launch *pim_jitq_launches_at(const pim_jitq_plan *p, enum pim_jitq_phase phase,
						   int32_t boundary, size_t *n)
{
	*n = 0;
	if ((unsigned)phase > 1 || boundary < -1 || boundary >= (int32_t)p->layers)
		return NULL;
	uint32_t a = p->first[phase][boundary + 1], b = p->first[phase][boundary + 2];
	*n = b - a;
	return *n ? &p->launches[phase][a] : NULL;
}

unsigned pim_jitq_lookahead(const pim_jitq_plan *p, enum pim_jitq_phase phase)
{
	return (unsigned)phase < 2 ? p->lookahead[phase] : 0;
}

unsigned pim_jitq_layers(const pim_jitq_plan *p) { return p->layers; }

/* ---------------------------------------------------------------- in-situ sampling */

/* Sends the samples taken (and, with final, asks pimd to derive the metrics). */
static void sample_send(struct sampler *s, Pim__RegionSample *v, size_t n, bool final)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__SampleBatch body = PIM__SAMPLE_BATCH__INIT;
	Pim__RegionSample **ptrs = calloc(n ? n : 1, sizeof *ptrs);
	Pim__Response *resp;

	if (!ptrs) {
		s->dropped += n;
		return;
	}
	for (size_t i = 0; i < n; i++)
		ptrs[i] = &v[i];
	body.model = s->m->name;
	body.samples = ptrs;
	body.n_samples = n;
	body.final = final;
	req.body_case = PIM__REQUEST__BODY_SAMPLE_BATCH;
	req.sample_batch = &body;
	pthread_mutex_lock(&s->c->lock);
	int r = pimclient_call(s->c, &req, PIM__RESPONSE__BODY_SAMPLE_BATCH, &resp);
	pthread_mutex_unlock(&s->c->lock);
	free(ptrs);
	if (r < 0) {
		s->dropped += n;
		return;
	}
	s->sent += resp->sample_batch->accepted;
	s->dropped += resp->sample_batch->rejected;
	pim__response__free_unpacked(resp, NULL);
}

static void *sample_thread(void *p)
{
	struct sampler *s = p;
	static __thread Pim__RegionSample local[SAMPLE_BUF];

	pthread_mutex_lock(&s->lock);
	for (;;) {
		if (!s->stop && s->n < SAMPLE_BUF) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += SAMPLE_FLUSH_MS * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&s->wake, &s->lock, &ts);
		}
		size_t n = s->n;
		memcpy(local, s->buf, n * sizeof *local);
		s->n = 0;
		bool stop = s->stop;
		pthread_mutex_unlock(&s->lock);
		if (n || stop)
			sample_send(s, local, n, stop);
		pthread_mutex_lock(&s->lock);
		if (stop)
			break;
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

int pim_model_sample(pim_model *m, const char *socket_path, unsigned one_in)
{
	struct sampler *s = m->sampler;

	if (one_in == 0) {
		if (!s)
			return 0;
		/* Detach first: hooks that already hold s finish with it before it is freed
		 * (callers stop sampling once the model's threads are quiet). */
		__atomic_store_n(&m->sampler, NULL, __ATOMIC_RELEASE);
		pthread_mutex_lock(&s->lock);
		s->stop = true;
		pthread_cond_signal(&s->wake);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->thread, NULL);
		/* keep the totals readable after the sampler is gone */
		m->sampled_sent = s->sent;
		m->sampled_dropped = s->dropped;
		pim_client_free(s->c);
		pthread_mutex_destroy(&s->lock);
		pthread_cond_destroy(&s->wake);
		free(s->count);
		free(s->start);
		free(s);
		return 0;
	}
	if (s)
		return -EBUSY;
	s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	s->m = m;
	s->one_in = one_in;
	s->count = calloc(m->id_limit + 1, sizeof *s->count);
	s->start = calloc(m->id_limit + 1, sizeof *s->start);
	s->c = pim_client_new();
	int r = -ENOMEM;
	if (!s->count || !s->start || !s->c)
		goto fail;
	if ((r = pim_client_connect(s->c, socket_path, "libpimclient-sampler")) < 0)
		goto fail;
	/* An empty first batch opens the run now: an unknown model, or one this user may not
	 * sample, is refused here rather than in the background. */
	{
		Pim__Request req = PIM__REQUEST__INIT;
		Pim__SampleBatch body = PIM__SAMPLE_BATCH__INIT;
		Pim__Response *resp;
		body.model = m->name;
		req.body_case = PIM__REQUEST__BODY_SAMPLE_BATCH;
		req.sample_batch = &body;
		pthread_mutex_lock(&s->c->lock);
		r = pimclient_call(s->c, &req, PIM__RESPONSE__BODY_SAMPLE_BATCH, &resp);
		pthread_mutex_unlock(&s->c->lock);
		if (r < 0)
			goto fail;
		pim__response__free_unpacked(resp, NULL);
	}
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->wake, NULL);
	if ((r = -pthread_create(&s->thread, NULL, sample_thread, s)) < 0) {
		pthread_mutex_destroy(&s->lock);
		pthread_cond_destroy(&s->wake);
		goto fail;
	}
	__atomic_store_n(&m->sampler, s, __ATOMIC_RELEASE);
	return 0;
fail:
	pim_client_free(s->c);
	free(s->count);
	free(s->start);
	free(s);
	return r;
}

uint64_t pim_model_samples_sent(const pim_model *m)
{
	return m->sampler ? m->sampler->sent : m->sampled_sent;
}

uint64_t pim_model_samples_dropped(const pim_model *m)
{
	return m->sampler ? m->sampler->dropped : m->sampled_dropped;
}
