/* SPDX-License-Identifier: MIT */
/* status_rpc.c: see status_rpc.h. */
#include "status_rpc.h"

#include <string.h>
#include <unistd.h>

#include "log.h"
#include "platform.h"
#include "profile.h"
#include "wire.h"

#define PROTOCOL_VERSION PIM__VERSION__VERSION_CURRENT

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

size_t status_rpc_pack(struct rpc_context *ctx, uint64_t id, uint64_t now, uint8_t *out, size_t cap)
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

/* The same, as a Response to free (one place builds a Status: status_rpc_pack). */
Pim__Response *status_rpc_status(struct rpc_context *ctx, const Pim__Request *req)
{
	uint8_t small[2048], *buf = small;
	uint64_t now = now_ns();
	size_t n = status_rpc_pack(ctx, req->id, now, small, sizeof small);

	if (n > sizeof small) {
		if (!(buf = malloc(n)))
			return NULL;
		status_rpc_pack(ctx, req->id, now, buf, n);
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
Pim__Response *status_rpc_probe_bandwidth(struct rpc_context *ctx, struct rpc_peer *peer,
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

struct status_cache *status_cache_new(void)
{
	return calloc(1, sizeof(struct status_cache));
}

void status_cache_free(struct status_cache *c)
{
	if (c)
		free(c->bytes);
	free(c);
}
