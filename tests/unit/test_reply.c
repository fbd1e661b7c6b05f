/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of daemon/reply.c, and of every request handler when memory runs out.
 *
 * This binary is linked with -Wl,--wrap for the allocation functions (Makefile, REPLY_WRAP):
 * every allocation pimd's code makes goes through fail_now() below, which can make the n-th
 * one fail.  Each request is answered with the 1st, 2nd, ... allocation failing until one
 * answer needs no more; every answer on the way must be a whole Response (its own body or an
 * Error) or NULL, the transport's cue to close the connection.  Under make asan,
 * LeakSanitizer fails the test on anything a failed answer left allocated.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "dispatch.h"
#include "log.h"
#include "loop.h"
#include "manifest.h"
#include "mx.h"
#include "profile.h"
#include "rpc.h"
#include "status_rpc.h"
#include "threads.h"
#include "frame.h"
#include "test_util.h"

/* ---------------------------------------------------------------- failing allocations */

/* Nothing that allocates may run between arm() and disarm() but the code under test: check's
 * own assertions allocate (check is linked statically, so they are counted too). */

static long fail_at; /* the allocation that fails, counted from arm(); 0: none */
static long allocs;
static bool failed;

static bool fail_now(void)
{
	long n = __atomic_add_fetch(&allocs, 1, __ATOMIC_RELAXED);
	if (n != __atomic_load_n(&fail_at, __ATOMIC_RELAXED))
		return false;
	__atomic_store_n(&failed, true, __ATOMIC_RELAXED);
	errno = ENOMEM;
	return true;
}

static void arm(long n)
{
	__atomic_store_n(&allocs, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&failed, false, __ATOMIC_RELAXED);
	__atomic_store_n(&fail_at, n, __ATOMIC_RELAXED);
}

static void disarm(void) { __atomic_store_n(&fail_at, 0, __ATOMIC_RELAXED); }

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
int __real_vasprintf(char **s, const char *fmt, va_list ap);

void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return fail_now() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return fail_now() ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { return fail_now() ? NULL : __real_strdup(s); }

int __wrap_vasprintf(char **s, const char *fmt, va_list ap)
{
	return fail_now() ? -1 : __real_vasprintf(s, fmt, ap);
}

int __wrap_asprintf(char **s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = __wrap_vasprintf(s, fmt, ap);
	va_end(ap);
	return r;
}

/* ---------------------------------------------------------------- reply.c */

START_TEST(start_attaches_the_body)
{
	struct reply b;
	Pim__StatusReply *s = reply_start(&b, 7, PIM__RESPONSE__BODY_STATUS);
	ck_assert_ptr_nonnull(s);
	ck_assert_ptr_eq(s->base.descriptor, &pim__status_reply__descriptor);
	s->database = reply_strdup(&b, "x.db");
	Pim__Response *r = reply_finish(&b);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->id, 7);
	ck_assert_int_eq(r->body_case, PIM__RESPONSE__BODY_STATUS);
	ck_assert_ptr_eq(r->status, s);
	ck_assert_str_eq(r->status->database, "x.db");
	pim__response__free_unpacked(r, NULL);
}
END_TEST

START_TEST(a_failed_allocation_frees_the_tree)
{
	struct reply b;
	/* the third allocation (after the response and its body) fails: the whole tree goes (no
	 * ck_assert while armed: check allocates to record it) */
	arm(3);
	Pim__ModelRemoveReply *rr = reply_start(&b, 1, PIM__RESPONSE__BODY_MODEL_REMOVE);
	if (rr)
		rr->name = reply_strdup(&b, "m");
	disarm();
	ck_assert_ptr_nonnull(rr);
	ck_assert(failed);
	ck_assert_ptr_null(rr->name);
	ck_assert(b.oom);
	ck_assert_ptr_null(reply_finish(&b));

	/* the body itself */
	arm(2);
	ck_assert_ptr_null(reply_start(&b, 1, PIM__RESPONSE__BODY_MODEL_REMOVE));
	disarm();
	ck_assert_ptr_null(reply_finish(&b));
}
END_TEST

START_TEST(fail_answers_the_error_instead)
{
	struct reply b;
	struct pim_error err = { 0 };
	Pim__ModelListReply *lr = reply_start(&b, 9, PIM__RESPONSE__BODY_MODEL_LIST);
	ck_assert_ptr_nonnull(lr);
	err_set(&err, -ENOENT, "no model named \"%s\"", "m");
	Pim__Response *r = reply_fail(&b, &err);
	ck_assert_int_eq(r->body_case, PIM__RESPONSE__BODY_ERROR);
	ck_assert_uint_eq(r->id, 9);
	ck_assert_int_eq(r->error->code, PIM__ERROR_CODE__ERROR_NOT_FOUND);
	ck_assert_str_eq(r->error->message, "no model named \"m\"");
	pim__response__free_unpacked(r, NULL);
}
END_TEST

START_TEST(append_and_printf)
{
	struct reply b;
	Pim__ImportPerfReply *ir = reply_start(&b, 1, PIM__RESPONSE__BODY_IMPORT_PERF);
	reply_append(&b, &ir->notes, &ir->n_notes, "C%d not evaluable", 4);
	reply_append(&b, &ir->notes, &ir->n_notes, "%s", "second");
	ck_assert_uint_eq(ir->n_notes, 2);
	ck_assert_str_eq(ir->notes[0], "C4 not evaluable");
	ck_assert_str_eq(ir->notes[1], "second");
	/* a failed append keeps what was there */
	arm(1);
	reply_append(&b, &ir->notes, &ir->n_notes, "third");
	disarm();
	ck_assert_uint_eq(ir->n_notes, 2);
	ck_assert(b.oom);
	ck_assert_ptr_null(reply_finish(&b));

	Pim__JitqQuantizeReply *q = reply_start(&b, 2, PIM__RESPONSE__BODY_JITQ_QUANTIZE);
	q->engine = reply_printf(&b, "%s%s", "tiled", " (paper kernel)");
	Pim__Response *r = reply_finish(&b);
	ck_assert_str_eq(r->jitq_quantize->engine, "tiled (paper kernel)");
	pim__response__free_unpacked(r, NULL);
}
END_TEST

START_TEST(wrap_takes_the_message)
{
	Pim__ProfileReply *p = malloc(sizeof *p);
	pim__profile_reply__init(p);
	p->job = 3;
	Pim__Response *r = reply_wrap(5, PIM__RESPONSE__BODY_PROFILE, p);
	ck_assert_int_eq(r->body_case, PIM__RESPONSE__BODY_PROFILE);
	ck_assert_ptr_eq(r->profile, p);
	pim__response__free_unpacked(r, NULL);

	/* without memory for the response, the message is freed (LeakSanitizer would say) */
	p = malloc(sizeof *p);
	pim__profile_reply__init(p);
	arm(1);
	ck_assert_ptr_null(reply_wrap(5, PIM__RESPONSE__BODY_PROFILE, p));
	disarm();
}
END_TEST

START_TEST(errors_and_their_codes)
{
	Pim__Response *r = reply_error(4, PIM__ERROR_CODE__ERROR_BUSY, "%u jobs queued", 3u);
	ck_assert_int_eq(r->body_case, PIM__RESPONSE__BODY_ERROR);
	ck_assert_int_eq(r->error->code, PIM__ERROR_CODE__ERROR_BUSY);
	ck_assert_str_eq(r->error->message, "3 jobs queued");
	pim__response__free_unpacked(r, NULL);
	for (long n = 1; n <= 3; n++) {
		arm(n);
		ck_assert_ptr_null(reply_error(4, PIM__ERROR_CODE__ERROR_BUSY, "x"));
		disarm();
	}

	ck_assert_int_eq(reply_code_from_errno(-E2BIG), PIM__ERROR_CODE__ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(reply_code_from_errno(-ENOENT), PIM__ERROR_CODE__ERROR_NOT_FOUND);
	ck_assert_int_eq(reply_code_from_errno(-EEXIST), PIM__ERROR_CODE__ERROR_ALREADY_EXISTS);
	ck_assert_int_eq(reply_code_from_errno(-EACCES), PIM__ERROR_CODE__ERROR_PERMISSION_DENIED);
	ck_assert_int_eq(reply_code_from_errno(-ENOSPC), PIM__ERROR_CODE__ERROR_BUSY);
	ck_assert_int_eq(reply_code_from_errno(-EPROTO), PIM__ERROR_CODE__ERROR_PROTOCOL);
	ck_assert_int_eq(reply_code_from_errno(-EPROTONOSUPPORT),
			 PIM__ERROR_CODE__ERROR_UNSUPPORTED_VERSION);
	ck_assert_int_eq(reply_code_from_errno(-EOPNOTSUPP), PIM__ERROR_CODE__ERROR_UNIMPLEMENTED);
	ck_assert_int_eq(reply_code_from_errno(-ENOMEM), PIM__ERROR_CODE__ERROR_INTERNAL);
}
END_TEST

/* ---------------------------------------------------------------- which thread answers */

/* Every kind of Request in pim.proto (the fields of its oneof, from the generated descriptor)
 * has exactly one row in the dispatch table, named as the field; and no row is left over. */
START_TEST(dispatch_covers_every_request_kind)
{
	const ProtobufCMessageDescriptor *d = &pim__request__descriptor;
	size_t n_rows, kinds = 0;
	const struct dispatch_rule *table = dispatch_table(&n_rows);

	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
			continue;
		kinds++;
		const struct dispatch_rule *r = dispatch_rule((Pim__Request__BodyCase)f->id);
		ck_assert_msg(r, "request kind %s (field %u) has no row in dispatch.c's table", f->name, f->id);
		ck_assert_str_eq(r->name, f->name);
		unsigned same = 0;
		for (size_t k = 0; k < n_rows; k++)
			same += table[k].kind == (Pim__Request__BodyCase)f->id;
		ck_assert_msg(same == 1, "request kind %s has %u rows", f->name, same);
	}
	ck_assert_uint_ge(kinds, 20); /* as of this writing */
	ck_assert_uint_eq(n_rows, kinds);
	ck_assert_ptr_null(dispatch_rule((Pim__Request__BodyCase)9999));
}
END_TEST

/* What each thread may touch: the loop never the store, the profiler on it neither; only the
 * writer changes it. */
START_TEST(dispatch_rules_hold)
{
	size_t n;
	const struct dispatch_rule *t = dispatch_table(&n);

	for (size_t i = 0; i < n; i++) {
		if (t[i].thread == DISPATCH_LOOP || t[i].thread == DISPATCH_PROFILER)
			ck_assert_msg(!(t[i].access & (DISPATCH_STORE_READ | DISPATCH_STORE_WRITE)),
				      "%s: answered on the loop, but touches the store", t[i].name);
		if (t[i].access & DISPATCH_STORE_WRITE)
			ck_assert_msg(t[i].thread == DISPATCH_WRITER, "%s: changes the store off the writer",
				      t[i].name);
		/* an answer kept on the loop is a read's, first answered on a work thread */
		if (t[i].access & DISPATCH_ANSWER_KEPT)
			ck_assert_msg(t[i].thread == DISPATCH_WORK && !(t[i].access & DISPATCH_STORE_WRITE),
				      "%s: an answer kept in memory must be a read's on a work thread", t[i].name);
		if (t[i].access & DISPATCH_PROFILER_STATE)
			ck_assert_msg(t[i].thread == DISPATCH_PROFILER || t[i].thread == DISPATCH_LOOP,
				      "%s: reads the profiler off the loop", t[i].name);
	}
	/* where: by the kind alone, a large load on a work thread, an unknown kind on the loop */
	Pim__Manifest m = PIM__MANIFEST__INIT;
	Pim__ModelLoad ml = PIM__MODEL_LOAD__INIT;
	Pim__Request req = PIM__REQUEST__INIT;
	ml.manifest = &m;
	req.body_case = PIM__REQUEST__BODY_MODEL_LOAD;
	req.model_load = &ml;
	ck_assert_int_eq(dispatch_where(&req, 0), DISPATCH_WRITER);
	ck_assert_int_eq(dispatch_where(&req, DISPATCH_WRITER_MAX_REGIONS + 1), DISPATCH_WORK);
	m.n_regions = DISPATCH_WRITER_MAX_REGIONS + 1;
	ck_assert_int_eq(dispatch_where(&req, 0), DISPATCH_WORK);
	req.body_case = PIM__REQUEST__BODY_STATUS;
	ck_assert_int_eq(dispatch_where(&req, 0), DISPATCH_LOOP);
	req.body_case = PIM__REQUEST__BODY_MODEL_SHOW;
	ck_assert_int_eq(dispatch_where(&req, 0), DISPATCH_WORK);
	req.body_case = PIM__REQUEST__BODY_PROFILE;
	ck_assert_int_eq(dispatch_where(&req, 0), DISPATCH_PROFILER);
	req.body_case = (Pim__Request__BodyCase)9999;
	ck_assert_int_eq(dispatch_where(&req, 0), DISPATCH_LOOP);
}
END_TEST

/* ---------------------------------------------------------------- the handlers */

static char dir[] = "/tmp/pimd-test-reply-XXXXXX";
static struct store *store;
static struct platform platform;
static struct pimsim_params pim;
static struct config cfg;
static struct loop *loop;
static struct profiler *profiler;
static struct rpc_context ctx;
static Pim__Manifest *manifest;

/* The context pimd answers in (rpc_context_init), with decoder-block stored. */
static void setup(void)
{
	struct pim_error err = { 0 };
	char path[64];

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/pimd.db", dir);
	log_set_level(LOG_CRIT);
	ck_assert_int_eq(store_open(path, 1000, &store, &err), 0);
	platform_detect(&platform, &err);
	platform.id.b_cpu = 10e9;
	ck_assert_int_eq(store_platform_ensure(store, &platform.id, &platform.row, &err), 0);
	config_init(&cfg);
	pimsim_params_default(&pim);
	ck_assert_int_eq(loop_new(&loop), 0);
	ck_assert_int_eq(profiler_new(loop, store, &platform, &cfg, &profiler, &err), 0);
	rpc_context_init(&ctx, store, &platform, &cfg, &pim, profiler);
	ck_assert_msg(manifest_read_file("tests/e2e/data/decoder-block.json", &manifest, &err) == 0,
		      "%s", err.msg);
	ck_assert_int_eq(rpc_model_put(store, manifest, 0, true, &(bool){ false }, NULL, &err), 0);
}

static void teardown(void)
{
	char cmd[96];
	pim__manifest__free_unpacked(manifest, NULL);
	rpc_context_release(&ctx);
	profiler_free(profiler);
	loop_free(loop);
	store_close(store);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* A whole response: every field set as protobuf-c requires, and it packs. */
static void assert_whole(const Pim__Response *r)
{
	ck_assert(protobuf_c_message_check(&r->base));
	size_t n = pim__response__get_packed_size(r);
	uint8_t *buf = malloc(n + 1);
	ck_assert_uint_eq(pim__response__pack(r, buf), n);
	free(buf);
}

/*
 * Answers req with its 1st, 2nd, ... allocation failing until an answer needs no more; before,
 * when given, runs first each time without failures (to restore what the request changes).
 * Returns the answer that had everything, checked to carry want.
 */
static Pim__Response *answer_under_failure(Pim__Request *req, Pim__Response__BodyCase want,
					   void (*before)(long n, Pim__Request *req))
{
	for (long n = 1;; n++) {
		struct rpc_peer peer = { .hello_done = req->body_case != PIM__REQUEST__BODY_HELLO,
					 .passed_fd = -1 };
		enum rpc_after after;
		if (before)
			before(n, req);
		arm(n);
		Pim__Response *r = rpc_handle(&ctx, &peer, req, &after, NULL);
		rpc_peer_closed(&ctx, &peer);
		disarm();
		if (!failed) {
			ck_assert_msg(r, "request %d: no answer without a failure", req->body_case);
			ck_assert_msg(r->body_case == want, "request %d: answered %d, not %d (%s)",
				      req->body_case, r->body_case, want,
				      r->body_case == PIM__RESPONSE__BODY_ERROR ? r->error->message : "");
			assert_whole(r);
			return r;
		}
		if (r) {
			ck_assert_msg(r->body_case == want || r->body_case == PIM__RESPONSE__BODY_ERROR,
				      "request %d, allocation %ld failed: answered %d", req->body_case, n,
				      r->body_case);
			assert_whole(r);
			pim__response__free_unpacked(r, NULL);
		}
		ck_assert_msg(n < 200000, "request %d: no end to its allocations", req->body_case);
	}
}

static void check_under_failure(Pim__Request *req, Pim__Response__BodyCase want,
				void (*before)(long n, Pim__Request *req))
{
	pim__response__free_unpacked(answer_under_failure(req, want, before), NULL);
}

START_TEST(session_and_models)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__Hello hello = PIM__HELLO__INIT;
	hello.protocol_version = PIM__VERSION__VERSION_CURRENT;
	hello.client_name = "test";
	req.body_case = PIM__REQUEST__BODY_HELLO;
	req.hello = &hello;
	check_under_failure(&req, PIM__RESPONSE__BODY_HELLO, NULL);

	Pim__StatusRequest status = PIM__STATUS_REQUEST__INIT;
	req.body_case = PIM__REQUEST__BODY_STATUS;
	req.status = &status;
	check_under_failure(&req, PIM__RESPONSE__BODY_STATUS, NULL);

	Pim__ModelLoad load = PIM__MODEL_LOAD__INIT;
	load.manifest = manifest;
	load.replace = true;
	req.body_case = PIM__REQUEST__BODY_MODEL_LOAD;
	req.model_load = &load;
	check_under_failure(&req, PIM__RESPONSE__BODY_MODEL_LOAD, NULL);

	Pim__ModelList list = PIM__MODEL_LIST__INIT;
	req.body_case = PIM__REQUEST__BODY_MODEL_LIST;
	req.model_list = &list;
	Pim__Response *r = answer_under_failure(&req, PIM__RESPONSE__BODY_MODEL_LIST, NULL);
	ck_assert_uint_eq(r->model_list->n_models, 1);
	ck_assert_str_eq(r->model_list->models[0]->name, "decoder-block");
	pim__response__free_unpacked(r, NULL);

	Pim__ModelShow show = PIM__MODEL_SHOW__INIT;
	show.name = "decoder-block";
	req.body_case = PIM__REQUEST__BODY_MODEL_SHOW;
	req.model_show = &show;
	r = answer_under_failure(&req, PIM__RESPONSE__BODY_MODEL_SHOW, NULL);
	ck_assert_uint_eq(r->model_show->manifest->n_regions, manifest->n_regions);
	pim__response__free_unpacked(r, NULL);
}
END_TEST

/* Status packed on the stack (status_rpc_pack, the transport's) is rpc_handle's answer, and it
 * allocates nothing: not one allocation is counted while it packs. */
START_TEST(status_packed_without_allocation)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__StatusRequest status = PIM__STATUS_REQUEST__INIT;
	struct rpc_peer peer = { .hello_done = true, .passed_fd = -1 };
	enum rpc_after after;
	uint8_t small[8], buf[4096], want[4096];

	req.id = 300;
	req.body_case = PIM__REQUEST__BODY_STATUS;
	req.status = &status;
	/* too small: the size, nothing written */
	memset(small, 0xa5, sizeof small);
	size_t n = status_rpc_pack(&ctx, 300, now_ns(), small, sizeof small);
	ck_assert_uint_gt(n, sizeof small);
	ck_assert_uint_le(n, sizeof buf);
	for (size_t i = 0; i < sizeof small; i++)
		ck_assert_uint_eq(small[i], 0xa5);
	/* the counters move between two answers (requests, uptime): rpc_handle's first, then
	 * packed with the same counters */
	Pim__Response *r = rpc_handle(&ctx, &peer, &req, &after, NULL);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->body_case, PIM__RESPONSE__BODY_STATUS);
	ck_assert_str_eq(r->status->database, store_path(ctx.store));
	ck_assert_ptr_nonnull(r->status->b_cpu_probe);
	size_t wn = pim__response__get_packed_size(r);
	ck_assert_uint_le(wn, sizeof want);
	pim__response__pack(r, want);
	uint64_t uptime = r->status->uptime_ms;
	pim__response__free_unpacked(r, NULL);
	arm(1);
	n = status_rpc_pack(&ctx, 300, now_ns(), buf, sizeof buf);
	disarm();
	long counted = allocs;
	ck_assert(!failed);
	ck_assert_int_eq(counted, 0);
	Pim__Response *got = pim__response__unpack(NULL, n, buf);
	ck_assert_ptr_nonnull(got);
	ck_assert_uint_eq(got->id, 300);
	/* written by hand as protobuf-c packs it, byte for byte (a message that gains a field must
	 * have it written in status_rpc.c's status_field) */
	ck_assert_uint_eq(pim__status_reply__descriptor.n_fields, 18);
	ck_assert_uint_eq(pim__bandwidth_probe__descriptor.n_fields, 9);
	uint8_t same[4096];
	ck_assert_uint_eq(pim__response__get_packed_size(got), n);
	pim__response__pack(got, same);
	ck_assert_mem_eq(same, buf, n);
	ck_assert_uint_ge(got->status->uptime_ms, uptime);
	got->status->uptime_ms = uptime; /* (time went on) */
	size_t gn = pim__response__get_packed_size(got);
	uint8_t again[4096];
	ck_assert_uint_eq(gn, wn);
	pim__response__pack(got, again);
	ck_assert_mem_eq(again, want, wn);
	pim__response__free_unpacked(got, NULL);

	/* The counters change every answer; the rest when answers_epoch does (a probe, a reload).
	 * Every field set, as packed whole without the cache: the same bytes. */
	struct status_cache *cache = ctx.status_cache;
	ck_assert_ptr_nonnull(cache);
	uint64_t models = ctx.models, requests = ctx.requests;
	unsigned clients = ctx.clients;
	double b_cpu = platform.id.b_cpu;
	ctx.models = 1u << 20;
	ctx.clients = 3;
	ctx.requests = UINT64_MAX;
	platform.id.b_cpu = 20e9;
	platform.id.b_cpu_spread = 0.125;
	snprintf(platform.id.b_cpu_method, sizeof platform.id.b_cpu_method, "by hand");
	platform.id.b_cpu_measured_at = 1700000000;
	platform.id.b_cpu_busy = true;
	snprintf(platform.id.b_cpu_load, sizeof platform.id.b_cpu_load, "load 0.5");
	snprintf(platform.id.b_cpu_host, sizeof platform.id.b_cpu_host, "2 CPUs");
	ctx.answers_epoch++;
	uint64_t at = ctx.started_ns + 86400123456789ull; /* a day, 123.456789 s later: 86,400,123 ms */
	n = status_rpc_pack(&ctx, UINT64_MAX, at, buf, sizeof buf);
	ck_assert_uint_le(n, sizeof buf);
	got = pim__response__unpack(NULL, n, buf);
	ck_assert_ptr_nonnull(got);
	ck_assert_uint_eq(got->id, UINT64_MAX);
	ck_assert_uint_eq(got->status->models, 1u << 20);
	ck_assert_uint_eq(got->status->clients, 3);
	ck_assert_uint_eq(got->status->requests, UINT64_MAX);
	ck_assert_uint_eq(got->status->uptime_ms, 86400123);
	ck_assert(got->status->b_cpu == 20e9 && got->status->b_cpu_probe->spread == 0.125);
	ck_assert_str_eq(got->status->b_cpu_probe->method, "by hand");
	ck_assert(got->status->b_cpu_probe->busy);
	ck_assert_uint_eq(pim__response__get_packed_size(got), n);
	pim__response__pack(got, same);
	ck_assert_mem_eq(same, buf, n);
	pim__response__free_unpacked(got, NULL);
	ctx.status_cache = NULL;
	size_t whole = status_rpc_pack(&ctx, UINT64_MAX, at, again, sizeof again);
	ctx.status_cache = cache;
	ck_assert(whole == n && memcmp(again, buf, n) == 0);
	/* a time before the start (a clock read before it) is an uptime of 0, not 584 million years */
	n = status_rpc_pack(&ctx, 1, ctx.started_ns - 1, buf, sizeof buf);
	got = pim__response__unpack(NULL, n, buf);
	ck_assert_ptr_nonnull(got);
	ck_assert_uint_eq(got->status->uptime_ms, 0);
	pim__response__free_unpacked(got, NULL);
	ctx.models = models;
	ctx.clients = clients;
	ctx.requests = requests;
	platform.id.b_cpu = b_cpu;
	ctx.answers_epoch++;
}
END_TEST

/* A show packed as it is read (rpc_handle_packed) is the same bytes as rpc_handle's answer
 * packed, metrics included, with and without an id; under failing allocations it answers
 * whole or leaves the request to rpc_handle, never anything else. */
START_TEST(show_packed_as_read)
{
	struct pim_error err = { 0 };
	int64_t model_id;
	struct store_metrics mt = { 0 };
	mt.region_id = manifest->regions[1]->id;
	mt.evidence = PL_EVIDENCE_IMPORTED;
	mt.t_host = 5e-5;
	mt.have_n_rd = true;
	mt.n_rd = 12288;
	mt.source = "perf stat";
	ck_assert_int_eq(store_model_id(store, "decoder-block", &model_id, &err), 0);
	ck_assert_int_eq(store_metrics_put(store, model_id, platform.row, 0, &mt, &err), 0);

	Pim__Request req = PIM__REQUEST__INIT;
	Pim__ModelShow show = PIM__MODEL_SHOW__INIT;
	struct rpc_peer peer = { .hello_done = true, .passed_fd = -1 };
	show.name = "decoder-block";
	req.body_case = PIM__REQUEST__BODY_MODEL_SHOW;
	req.model_show = &show;
	for (int k = 0; k < 2; k++) {
		req.id = k ? 300 : 0;
		enum rpc_after after;
		Pim__Response *r = rpc_handle(&ctx, &peer, &req, &after, NULL);
		ck_assert_int_eq(r->body_case, PIM__RESPONSE__BODY_MODEL_SHOW);
		ck_assert_uint_eq(r->model_show->n_metrics, 1);
		size_t n = pim__response__get_packed_size(r), len;
		uint8_t *want = malloc(n), *frame;
		pim__response__pack(r, want);
		pim__response__free_unpacked(r, NULL);
		ck_assert_int_eq(rpc_handle_packed(&ctx, &peer, &req, &frame, &len), 1);
		ck_assert_uint_eq(len, n);
		ck_assert_int_eq(memcmp(frame + FRAME_HEADER_BYTES, want, n), 0);
		free(frame);
		for (long f = 1; k && f < 100000; f++) {
			arm(f);
			int got = rpc_handle_packed(&ctx, &peer, &req, &frame, &len);
			disarm();
			if (got) {
				ck_assert_uint_eq(len, n);
				ck_assert_int_eq(memcmp(frame + FRAME_HEADER_BYTES, want, n), 0);
				free(frame);
			}
			if (!failed)
				break;
		}
		free(want);
	}
	/* other requests, an unknown model, no Hello: left to rpc_handle */
	uint8_t *frame = NULL;
	size_t len;
	show.name = "nothing-here";
	ck_assert_int_eq(rpc_handle_packed(&ctx, &peer, &req, &frame, &len), 0);
	show.name = "decoder-block";
	peer.hello_done = false;
	ck_assert_int_eq(rpc_handle_packed(&ctx, &peer, &req, &frame, &len), 0);
	ck_assert_ptr_null(frame);
}
END_TEST

static void load_again(long n, Pim__Request *req)
{
	struct pim_error err = { 0 };
	bool replaced;
	ck_assert_int_eq(rpc_model_put(store, manifest, 0, true, &replaced, NULL, &err), 0);
}

START_TEST(model_remove)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__ModelRemove rm = PIM__MODEL_REMOVE__INIT;
	rm.name = "decoder-block";
	req.body_case = PIM__REQUEST__BODY_MODEL_REMOVE;
	req.model_remove = &rm;
	check_under_failure(&req, PIM__RESPONSE__BODY_MODEL_REMOVE, load_again);
}
END_TEST

/* Another core count each time: no stored answer, the reply is built. */
static void other_cores(long n, Pim__Request *req)
{
	req->placement->core_counts[0] = (double)(4 + n);
}

START_TEST(placement_import_decisions)
{
	static const char csv[] = "1234567,,icx::OFFCORE_REQUESTS:ALL_DATA_RD,1000000,100.00,,\n"
				  "1019234,ns,duration_time,1019234,100.00,1.039,G/sec\n";
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__ImportPerf imp = PIM__IMPORT_PERF__INIT;
	imp.model = "decoder-block";
	imp.region_id = 1;
	imp.csv = (char *)csv;
	req.body_case = PIM__REQUEST__BODY_IMPORT_PERF;
	req.import_perf = &imp;
	Pim__Response *r = answer_under_failure(&req, PIM__RESPONSE__BODY_IMPORT_PERF, NULL);
	ck_assert(r->import_perf->metrics->have_n_rd);
	ck_assert_uint_eq(r->import_perf->n_notes, 2); /* no C4, unknown B_cpu */
	pim__response__free_unpacked(r, NULL);

	Pim__Placement pl = PIM__PLACEMENT__INIT;
	double cores = 4;
	pl.model = "decoder-block";
	pl.core_counts = &cores;
	pl.n_core_counts = 1;
	req.body_case = PIM__REQUEST__BODY_PLACEMENT;
	req.placement = &pl;
	r = answer_under_failure(&req, PIM__RESPONSE__BODY_PLACEMENT, other_cores);
	ck_assert(!r->placement->cached);
	ck_assert_uint_eq(r->placement->n_estimates, 1);
	ck_assert_uint_eq(r->placement->estimates[0]->n_regions, manifest->n_regions);
	pim__response__free_unpacked(r, NULL);
	/* the same query again: the stored answer */
	r = answer_under_failure(&req, PIM__RESPONSE__BODY_PLACEMENT, NULL);
	ck_assert(r->placement->cached);
	pim__response__free_unpacked(r, NULL);

	Pim__Decisions dec = PIM__DECISIONS__INIT;
	dec.model = "decoder-block";
	req.body_case = PIM__REQUEST__BODY_DECISIONS;
	req.decisions = &dec;
	r = answer_under_failure(&req, PIM__RESPONSE__BODY_DECISIONS, NULL);
	ck_assert_str_eq(r->decisions->model, "decoder-block");
	ck_assert_uint_gt(r->decisions->known_bitmap.len, 0);
	ck_assert_uint_eq(r->decisions->known_bitmap.data[0] & 1, 1); /* region 0 */
	pim__response__free_unpacked(r, NULL);

	Pim__Calibrate cal = PIM__CALIBRATE__INIT;
	cal.model = "decoder-block";
	cal.labels_csv = "region,beneficial\n1,1\n2,0\n";
	cal.theta_lo = 0.5e9;
	cal.theta_hi = 2e9;
	cal.theta_step = 0.5e9; /* 4 points */
	req.body_case = PIM__REQUEST__BODY_CALIBRATE;
	req.calibrate = &cal;
	r = answer_under_failure(&req, PIM__RESPONSE__BODY_CALIBRATE, NULL);
	ck_assert_uint_eq(r->calibrate->labelled, 2);
	ck_assert_uint_eq(r->calibrate->n_points, 4);
	pim__response__free_unpacked(r, NULL);
}
END_TEST

START_TEST(plan_under_failure)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__JitqPlan plan = PIM__JITQ_PLAN__INIT;
	Pim__JitqModel model = PIM__JITQ_MODEL__INIT;
	char *settings[] = { (char *)"stacks=2" };
	/* small: the plan is made again for each of its allocations (about 180, 0.1 s each) */
	model.layers = 2;
	model.hidden = 64;
	model.seq = 64;
	plan.model = &model;
	plan.settings = settings;
	plan.n_settings = 1;
	plan.per_block = true;
	req.body_case = PIM__REQUEST__BODY_JITQ_PLAN;
	req.jitq_plan = &plan;
	Pim__Response *r = answer_under_failure(&req, PIM__RESPONSE__BODY_JITQ_PLAN, NULL);
	ck_assert_str_eq(r->jitq_plan->model, "custom");
	ck_assert_uint_eq(r->jitq_plan->pim_stacks, 2);
	ck_assert_uint_gt(r->jitq_plan->n_assumptions, 4);
	pim__response__free_unpacked(r, NULL);
}
END_TEST

START_TEST(jitq_quantize)
{
	Pim__Request req = PIM__REQUEST__INIT;

	/* 2 x 64 BF16 elements, through the reference and the PIM model */
	uint16_t in[2 * 64];
	for (size_t i = 0; i < 128; i++)
		in[i] = (uint16_t)(0x3f80 + i); /* 1.0 and a little more */
	Pim__JitqQuantize q = PIM__JITQ_QUANTIZE__INIT;
	q.rows = 2;
	q.cols = 64;
	q.data.data = (uint8_t *)in;
	q.data.len = sizeof in;
	req.body_case = PIM__REQUEST__BODY_JITQ_QUANTIZE;
	req.jitq_quantize = &q;
	Pim__Response *r = answer_under_failure(&req, PIM__RESPONSE__BODY_JITQ_QUANTIZE, NULL);
	ck_assert_str_eq(r->jitq_quantize->engine, "reference");
	ck_assert_uint_eq(r->jitq_quantize->data.len, mx_packed_size(MX_FMT_MX6, 2, 64, MX_DIR_ROW));
	Pim__JitqDequantize dq = PIM__JITQ_DEQUANTIZE__INIT;
	dq.rows = 2;
	dq.cols = 64;
	dq.data = r->jitq_quantize->data;
	q.engine = "tiled";
	Pim__Response *r2 = answer_under_failure(&req, PIM__RESPONSE__BODY_JITQ_QUANTIZE, NULL);
	ck_assert_str_eq(r2->jitq_quantize->engine, "tiled");
	ck_assert_mem_eq(r2->jitq_quantize->data.data, dq.data.data, dq.data.len);
	pim__response__free_unpacked(r2, NULL);

	req.body_case = PIM__REQUEST__BODY_JITQ_DEQUANTIZE;
	req.jitq_dequantize = &dq;
	r2 = answer_under_failure(&req, PIM__RESPONSE__BODY_JITQ_DEQUANTIZE, NULL);
	ck_assert_uint_eq(r2->jitq_dequantize->data.len, 2 * 64 * sizeof(float));
	ck_assert_uint_eq(r2->jitq_dequantize->blocks, r->jitq_quantize->blocks);
	pim__response__free_unpacked(r2, NULL);
	pim__response__free_unpacked(r, NULL);
}
END_TEST

START_TEST(in_situ_samples_and_profile_status)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__SampleBatch sb = PIM__SAMPLE_BATCH__INIT;
	Pim__RegionSample s = PIM__REGION_SAMPLE__INIT, *sv[] = { &s };
	s.region_id = 1;
	s.time_ns = 1000;
	sb.model = "decoder-block";
	sb.samples = sv;
	sb.n_samples = 1;
	sb.final = true;
	req.body_case = PIM__REQUEST__BODY_SAMPLE_BATCH;
	req.sample_batch = &sb;
	Pim__Response *r = answer_under_failure(&req, PIM__RESPONSE__BODY_SAMPLE_BATCH, NULL);
	ck_assert_uint_eq(r->sample_batch->accepted, 1);
	uint64_t job = r->sample_batch->job;
	pim__response__free_unpacked(r, NULL);

	Pim__ProfileStatus ps = PIM__PROFILE_STATUS__INIT;
	ps.job = job;
	req.body_case = PIM__REQUEST__BODY_PROFILE_STATUS;
	req.profile_status = &ps;
	r = answer_under_failure(&req, PIM__RESPONSE__BODY_PROFILE, NULL);
	ck_assert_uint_eq(r->profile->job, job);
	pim__response__free_unpacked(r, NULL);
}
END_TEST

/* ---------------------------------------------------------------- a change's done() comes later */

/* A change whose done() frees it, as the profiler's do, and counts. */
struct later_change {
	struct store_write sw;
	int *written, *done;
	struct loop *quit; /* done() ends the loop when set */
	struct store_writer *again; /* done() hands another change over (to settle in the same call) */
	struct store *store;
};

static int later_write(struct store *s, void *data, struct pim_error *err)
{
	struct later_change *c = data;
	(*c->written)++;
	return store_model_count(s, &(unsigned){ 0 }, err);
}

static struct later_change *later_new(int *written, int *done);

static void later_done(void *data, int r, const struct pim_error *err)
{
	struct later_change *c = data;
	ck_assert_int_eq(r, 0);
	(*c->done)++;
	if (c->quit)
		loop_quit(c->quit, 0);
	if (c->again) {
		struct later_change *n = later_new(c->written, c->done);
		store_write_via(c->again, c->store, &n->sw);
	}
	free(c); /* the caller of store_write_via must not be the one running this */
}

static struct later_change *later_new(int *written, int *done)
{
	struct later_change *c = calloc(1, sizeof *c);
	ck_assert_ptr_nonnull(c);
	c->sw = (struct store_write){ later_write, later_done, c, NULL, NULL };
	c->written = written;
	c->done = done;
	return c;
}

static int refuse(void *owner, const struct store_write *w) { return -ENOMEM; }

/* threads.h: what the writer finished (a change of pimd's own: nobody waits) is given back. */
static void finished(void *data, struct work *w)
{
	ck_assert_ptr_null(w->owner);
	threads_release(*(struct threads **)data, w);
}

/* store_write_via never runs done() inside the call: without a writer, with one that refuses,
 * and with pimd's writer thread (threads.h), whose done() comes on the event loop. */
START_TEST(store_write_done_is_never_synchronous)
{
	int written = 0, done = 0;
	struct later_change *c;

	/* no writer: waits in the store */
	c = later_new(&written, &done);
	store_write_via(NULL, store, &c->sw);
	ck_assert_int_eq(done, 0);
	ck_assert_int_eq(written, 0);
	ck_assert_uint_eq(store_write_settle(store), 1);
	ck_assert_int_eq(written, 1);
	ck_assert_int_eq(done, 1);
	/* a writer that refuses (out of memory): the same, and a done() that hands another change
	 * over has it settled in the same call, after it */
	struct store_writer refusing = { refuse, NULL };
	c = later_new(&written, &done);
	c->again = &refusing;
	c->store = store;
	store_write_via(&refusing, store, &c->sw);
	ck_assert_int_eq(done, 1);
	ck_assert_uint_eq(store_write_settle(store), 2);
	ck_assert_int_eq(written, 3);
	ck_assert_int_eq(done, 3);
	ck_assert_uint_eq(store_write_settle(store), 0);

	/* the writer thread: written there, done() on the loop */
	struct threads *th;
	ck_assert_int_eq(threads_new(loop, &ctx, 1000, finished, NULL, &th, &th), 0);
	struct store_writer wr = threads_writer(th);
	c = later_new(&written, &done);
	c->quit = loop;
	store_write_via(&wr, store, &c->sw);
	ck_assert_int_eq(done, 3);
	ck_assert_uint_eq(store_write_settle(store), 0); /* the writer took it */
	ck_assert_int_eq(loop_run(loop), 0);
	ck_assert_int_eq(written, 4);
	ck_assert_int_eq(done, 4);
	/* stopping: what was handed over is written first, done() told before threads_free ends */
	c = later_new(&written, &done);
	store_write_via(&wr, store, &c->sw);
	threads_free(th);
	ck_assert_int_eq(written, 5);
	ck_assert_int_eq(done, 5);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("reply");
	TCase *tc = test_case(s, "reply");
	tcase_add_test(tc, start_attaches_the_body);
	tcase_add_test(tc, a_failed_allocation_frees_the_tree);
	tcase_add_test(tc, fail_answers_the_error_instead);
	tcase_add_test(tc, append_and_printf);
	tcase_add_test(tc, wrap_takes_the_message);
	tcase_add_test(tc, errors_and_their_codes);
	tc = test_case(s, "dispatch");
	tcase_add_test(tc, dispatch_covers_every_request_kind);
	tcase_add_test(tc, dispatch_rules_hold);
	tc = test_case(s, "handlers out of memory");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, session_and_models);
	tcase_add_test(tc, model_remove);
	tcase_add_test(tc, show_packed_as_read);
	tcase_add_test(tc, status_packed_without_allocation);
	tcase_add_test(tc, placement_import_decisions);
	tcase_add_test(tc, jitq_quantize);
	tcase_add_test(tc, in_situ_samples_and_profile_status);
	tcase_add_test(tc, store_write_done_is_never_synchronous);
	tc = test_case(s, "a plan out of memory");
	tcase_set_timeout(tc, 600); /* minutes under AddressSanitizer on a loaded machine */
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, plan_under_failure);
	return test_run_suite(s);
}
