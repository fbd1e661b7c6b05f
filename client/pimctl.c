/* SPDX-License-Identifier: MIT */
/*
 * pimctl: the command line of pimd.  See pimctl(1).
 * Exit status: 0 success, 1 the request failed (pimd refused it, or the input file is invalid),
 * 2 usage error, 3 pimd could not be reached or the connection broke.
 */
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "chart.h"
#include "manifest.h"
#include "pim.h"

enum { EXIT_OK = 0, EXIT_DAEMON = 1, EXIT_USAGE = 2, EXIT_CONNECT = 3 };

struct ticker;

struct ctl {
	const char *socket;
	bool json;
	pim_client *client;
	struct ticker *ticker; /* the progress line of the request under way; call_body ends it */
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: pimctl [--socket PATH] [--json] COMMAND [ARG]...\n"
		"Command line of pimd, the PIM placement service.\n\n"
		"Commands:\n"
		"  status                    daemon version, uptime, clients, models, store, B_cpu\n"
		"  platform probe            measure the host read bandwidth B_cpu again (root or\n"
		"                            pimd's user: it changes every user's answers)\n"
		"  model load FILE [--replace]\n"
		"                            load a manifest (JSON or protobuf binary)\n"
		"  model list                list loaded models\n"
		"  model show NAME           show a model's allocations and regions\n"
		"  model rm NAME             remove a model\n"
		"  profile MODEL --library PATH [--reps K] [--warmups W] [--regions ID,...]\n"
		"            [--timeout-ms N] [--no-wait]\n"
		"                            run the model library under counters (or timing) as you\n"
		"  profile --status JOB [--wait]\n"
		"                            a profiling job's state\n"
		"  profile --cancel JOB        cancel a queued or running job of yours\n"
		"  placement MODEL [--cores N,N...] [--granularity loop|operator|block]\n"
		"            [--movement upper|resident] [--param NAME=VALUE]... [--summary]\n"
		"            [--verbose] [--svg FILE]\n"
		"                            decide which regions run on PIM, with the estimate;\n"
		"                            --svg also draws it as an SVG picture\n"
		"  import-perf MODEL REGION FILE [--time SECONDS] [--executions N]\n"
		"            [--b-cpu BYTES_PER_S]\n"
		"                            store perf stat -x, counts measured elsewhere\n"
		"  calibrate MODEL --labels FILE [--theta LO:HI:STEP] [--sigma S,...]\n"
		"            [--param NAME=VALUE]... [--all] [--svg FILE]\n"
		"                            sweep theta (GB/s) against labelled regions;\n"
		"                            --svg also draws accuracy against theta\n"
		"  catalogue status          the fleet catalogue: reachable, outbox, last publish\n"
		"  catalogue list [--limit N]\n"
		"                            models and platforms measured across the fleet\n"
		"  jitq plan --model PRESET | --layers N --hidden H [--heads A] [--seq S] [--batch B]\n"
		"            [--tslice T] [--pipeline P] [--format mx9|mx6|mx4] [--from bf16|fp32]\n"
		"            [--mapping tiled|strided|strided-opt] [--peak-flops F] [--efficiency E]\n"
		"            [--times FILE] [--lookahead N] [--stacks N] [--preset default|paper]\n"
		"            [--kernel exact|paper] [--tck NS] [--activations full|selective|\n"
		"            recompute|none] [--layout in-out|out-in] [--set KEY=VALUE]... [--per-block]\n"
		"            [--svg FILE]\n"
		"                            schedule just-in-time weight quantization on PIM;\n"
		"                            --svg also draws one training step's timeline\n"
		"  jitq quantize --shape ROWSxCOLS [--format mx9|mx6|mx4|mxfp8-e4m3|mxfp8-e5m2|\n"
		"            mxfp6-e3m2|mxfp6-e2m3|mxfp4|mxint8] [--from bf16|fp32] [--direction row|col]\n"
		"            [--engine reference|tiled|strided|strided-opt] [--kernel exact|paper] IN OUT\n"
		"                            convert a raw tensor file to packed MX\n"
		"  jitq dequantize --shape ROWSxCOLS [--format FORMAT] [--direction row|col] IN OUT\n"
		"                            convert packed MX back to raw FP32\n\n"
		"Options:\n"
		"  -s, --socket PATH  pimd's socket (default $%s, else %s)\n"
		"  -j, --json         print JSON instead of tables\n"
		"  -h, --help         show this help\n"
		"  -V, --version      show the version\n\n"
		"On a terminal, profile, calibrate and jitq quantize/dequantize show a progress\n"
		"line; never in a pipe or with --json.\n\n"
		"Exit status: 0 ok, 1 the request failed (refused by pimd, or an invalid input file),\n"
		"2 usage error, 3 pimd could not be reached or the connection broke.\n",
		PIM_SOCKET_ENV, PIM_DEFAULT_SOCKET);
}

static int _printf_(1, 2) usage_error(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "pimctl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'pimctl --help'.\n");
	return EXIT_USAGE;
}

/* s as text for the terminal (text_for_terminal: controls and bidirectional controls escaped,
 * so that a name cannot rewrite or reorder what is shown); valid until 8 more calls. */
static const char *tty(const char *s)
{
	static char *ring[8];
	static unsigned next;
	char *e = text_for_terminal(s);

	free(ring[next % 8]);
	ring[next++ % 8] = e;
	return e ? e : "?";
}

static int connect_client(struct ctl *ctl)
{
	ctl->client = pim_client_new();
	if (!ctl->client) {
		fprintf(stderr, "pimctl: out of memory\n");
		return EXIT_CONNECT;
	}
	int r = pim_client_connect(ctl->client, ctl->socket, "pimctl");
	if (r < 0) {
		fprintf(stderr, "pimctl: %s%s\n", tty(pim_client_error(ctl->client)),
			r == -ENOENT || r == -ECONNREFUSED ? "; --socket PATH selects another socket" : "");
		/* pimd answered but refused (too many clients, protocol version): a daemon error */
		return pim_client_remote_error(ctl->client) ? EXIT_DAEMON : EXIT_CONNECT;
	}
	return EXIT_OK;
}

/* A failed request: pimd refused it or it was invalid here (1), or the connection broke (3). */
static int request_failed(struct ctl *ctl, int r)
{
	fprintf(stderr, "pimctl: %s\n", tty(pim_client_error(ctl->client)));
	if (pim_client_remote_error(ctl->client))
		return EXIT_DAEMON;
	switch (r) {
	case -ECONNRESET:
	case -EPIPE:
	case -ENOTCONN:
	case -ETIMEDOUT:
	case -EBADMSG:
		return EXIT_CONNECT;
	default:
		return EXIT_DAEMON;
	}
}

/* ---------------------------------------------------------------- progress on a terminal */

/*
 * A progress line, rewritten in place with \r and erased when the work ends: only when standard
 * output is a terminal and the output is not JSON, so pipes, files and scripts see nothing of it.
 */
struct progress {
	bool on, shown;
	struct timespec t0;
};

static void progress_init(struct progress *p, const struct ctl *ctl)
{
	p->on = !ctl->json && isatty(STDOUT_FILENO);
	p->shown = false;
	clock_gettime(CLOCK_MONOTONIC, &p->t0);
}

static double progress_elapsed(const struct progress *p)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - p->t0.tv_sec) + (double)(t.tv_nsec - p->t0.tv_nsec) * 1e-9;
}

static void _printf_(2, 3) progress_show(struct progress *p, const char *fmt, ...)
{
	va_list ap;
	if (!p->on)
		return;
	fputs("\r", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputs("\033[K", stdout);
	fflush(stdout);
	p->shown = true;
}

static void progress_end(struct progress *p)
{
	if (p->shown) {
		fputs("\r\033[K", stdout);
		fflush(stdout);
	}
	p->shown = false;
}

/*
 * A request that answers once, at the end (a calibration sweep, a quantized file): a thread
 * shows what is being done and for how long until the answer comes.
 */
struct ticker {
	struct progress p;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop, running;
	char what[256];
};

static void *ticker_main(void *arg)
{
	struct ticker *t = arg;
	double wait = 0.3; /* quick answers show nothing */
	pthread_mutex_lock(&t->mu);
	while (!t->stop) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += (long)(wait * 1e9);
		until.tv_sec += until.tv_nsec / 1000000000;
		until.tv_nsec %= 1000000000;
		if (pthread_cond_timedwait(&t->cv, &t->mu, &until) == ETIMEDOUT && !t->stop)
			progress_show(&t->p, "%s: %.1f s", t->what, progress_elapsed(&t->p));
		wait = 0.25;
	}
	pthread_mutex_unlock(&t->mu);
	return NULL;
}

/* Starts t for the next request, which call_body() ends before it prints anything. */
static void _printf_(3, 4) ticker_start(struct ticker *t, struct ctl *ctl, const char *fmt, ...)
{
	va_list ap;
	*t = (struct ticker){ .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
	progress_init(&t->p, ctl);
	va_start(ap, fmt);
	vsnprintf(t->what, sizeof t->what, fmt, ap);
	va_end(ap);
	t->running = t->p.on && pthread_create(&t->thread, NULL, ticker_main, t) == 0;
	ctl->ticker = t;
}

static void ticker_stop(struct ticker *t)
{
	if (!t->running)
		return;
	pthread_mutex_lock(&t->mu);
	t->stop = true;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
	pthread_join(t->thread, NULL);
	progress_end(&t->p);
	t->running = false;
}

static void print_json(json_object *o)
{
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
}

static void human_bytes(char *buf, size_t cap, uint64_t b)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)b;
	unsigned u = 0;

	while (v >= 1024 && u + 1 < ELEMENTSOF(units)) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, cap, "%" PRIu64 " B", b);
	else
		snprintf(buf, cap, "%.1f %s", v, units[u]);
}

static void format_time(char *buf, size_t cap, int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;
	if (localtime_r(&tt, &tm))
		strftime(buf, cap, "%Y-%m-%d %H:%M:%S", &tm);
	else
		snprintf(buf, cap, "%" PRId64, t);
}

static json_object *model_info_json(const struct pim_model_info *m)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "name", json_object_new_string(m->name));
	json_object_object_add(o, "regions", json_object_new_int64(m->regions));
	json_object_object_add(o, "allocations", json_object_new_int64(m->allocations));
	json_object_object_add(o, "allocation_bytes", json_object_new_int64((int64_t)m->allocation_bytes));
	json_object_object_add(o, "owner_uid", json_object_new_int64(m->owner_uid));
	json_object_object_add(o, "loaded_at", json_object_new_int64(m->loaded_at));
	json_object_object_add(o, "source", json_object_new_string(m->source));
	return o;
}

/* ---------------------------------------------------------------- B_cpu and its probe */

static int call_body(struct ctl *ctl, Pim__Request *req, Pim__Response__BodyCase want,
		     Pim__Response **out);

static json_object *b_cpu_json(const Pim__BandwidthProbe *p)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "b_cpu", json_object_new_double(p->b_cpu));
	json_object_object_add(o, "source", json_object_new_string(p->source));
	if (p->measured > 0) {
		json_object_object_add(o, "measured", json_object_new_double(p->measured));
		json_object_object_add(o, "spread", json_object_new_double(p->spread));
		json_object_object_add(o, "method", json_object_new_string(p->method));
		json_object_object_add(o, "measured_at", json_object_new_int64(p->measured_at));
		json_object_object_add(o, "busy", json_object_new_boolean(p->busy));
		json_object_object_add(o, "load", json_object_new_string(p->load));
		json_object_object_add(o, "host", json_object_new_string(p->host));
	}
	return o;
}

/* How the B_cpu of p was measured, on lines after a first of the caller's, each indented. */
static void b_cpu_print(const Pim__BandwidthProbe *p, const char *indent)
{
	char t[32];

	if (!p || p->measured <= 0) {
		if (p && strcmp(p->source, "measured") != 0)
			printf("%snot measured on this platform\n", indent);
		return;
	}
	format_time(t, sizeof t, p->measured_at);
	if (strcmp(p->source, "measured") != 0)
		printf("%sthe probe measured %.2f GB/s; the %s value is used instead\n", indent, p->measured / 1e9,
		       p->source);
	if (p->method[0])
		printf("%smeasured %s on %s, spread %.1f%% between rounds\n%s(%s)\n", indent, t, p->host,
		       100 * p->spread, indent, p->method);
	else
		printf("%smeasured by the single-pass probe of an earlier pimd (no spread known)\n", indent);
	if (p->load[0])
		printf("%s%s%s\n", indent, p->load,
		       p->busy ? "; measure again when it is quiet: pimctl platform probe" : "");
}

static int cmd_status(struct ctl *ctl)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__StatusRequest body = PIM__STATUS_REQUEST__INIT;
	Pim__Response *resp;
	int r;

	req.body_case = PIM__REQUEST__BODY_STATUS;
	req.status = &body;
	if ((r = call_body(ctl, &req, PIM__RESPONSE__BODY_STATUS, &resp)))
		return r;
	const Pim__StatusReply *st = resp->status;
	if (ctl->json) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "server_version", json_object_new_string(st->server_version));
		json_object_object_add(o, "protocol_version", json_object_new_int64(st->protocol_version));
		json_object_object_add(o, "uptime_ms", json_object_new_int64((int64_t)st->uptime_ms));
		json_object_object_add(o, "clients", json_object_new_int64(st->clients));
		json_object_object_add(o, "models", json_object_new_int64(st->models));
		json_object_object_add(o, "requests", json_object_new_int64((int64_t)st->requests));
		json_object_object_add(o, "database", json_object_new_string(st->database));
		json_object_object_add(o, "schema_version", json_object_new_int64(st->schema_version));
		json_object_object_add(o, "max_frame_bytes", json_object_new_int64(st->max_frame_bytes));
		json_object_object_add(o, "pid", json_object_new_int64(st->pid));
		json_object_object_add(o, "platform", json_object_new_string(st->platform));
		json_object_object_add(o, "backend", json_object_new_string(st->backend));
		json_object_object_add(o, "backend_reason", json_object_new_string(st->backend_reason));
		json_object_object_add(o, "b_cpu", json_object_new_double(st->b_cpu));
		json_object_object_add(o, "b_cpu_source", json_object_new_string(st->b_cpu_source));
		if (st->b_cpu_probe)
			json_object_object_add(o, "b_cpu_probe", b_cpu_json(st->b_cpu_probe));
		json_object_object_add(o, "profile_jobs", json_object_new_int64(st->profile_jobs));
		json_object_object_add(o, "containment", json_object_new_string(st->containment));
		json_object_object_add(o, "socket", json_object_new_string(pim_client_socket_path(ctl->client)));
		print_json(o);
		pim__response__free_unpacked(resp, NULL);
		return EXIT_OK;
	}
	printf("pimd %s (protocol %u), pid %u\n", st->server_version, st->protocol_version, st->pid);
	printf("  socket:     %s\n", pim_client_socket_path(ctl->client));
	printf("  uptime:     %" PRIu64 ".%03" PRIu64 " s\n", st->uptime_ms / 1000, st->uptime_ms % 1000);
	printf("  clients:    %u\n", st->clients);
	printf("  requests:   %" PRIu64 "\n", st->requests);
	printf("  models:     %u\n", st->models);
	printf("  database:   %s (schema %u)\n", st->database, st->schema_version);
	printf("  max frame:  %u bytes\n", st->max_frame_bytes);
	printf("  platform:   %s\n", st->platform);
	printf("  profiling:  %s backend; %s\n", st->backend, st->backend_reason);
	printf("  B_cpu:      %.2f GB/s (%s)\n", st->b_cpu / 1e9, st->b_cpu_source);
	b_cpu_print(st->b_cpu_probe, "              ");
	printf("  jobs:       %u profiling jobs queued or running\n", st->profile_jobs);
	printf("  contained:  %s\n", st->containment);
	pim__response__free_unpacked(resp, NULL);
	return EXIT_OK;
}

/* pimctl platform probe: B_cpu measured again (root or pimd's user). */
/* ---------------------------------------------------------------- the fleet catalogue */

static const char *when_text(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (t <= 0 || !gmtime_r(&tt, &tm))
		return "never";
	strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm);
	return buf;
}

static json_object *catalogue_status_json(const Pim__CatalogueStatusReply *r)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "configured", json_object_new_boolean(r->configured));
	if (!r->configured)
		return o;
	json_object_object_add(o, "reachable", json_object_new_boolean(r->reachable));
	json_object_object_add(o, "target", json_object_new_string(r->target));
	json_object_object_add(o, "host_id", json_object_new_string(r->host_id));
	json_object_object_add(o, "platform_key", json_object_new_string(r->platform_key));
	json_object_object_add(o, "outbox_depth", json_object_new_int64((int64_t)r->outbox_depth));
	json_object_object_add(o, "outbox_failed", json_object_new_int64((int64_t)r->outbox_failed));
	json_object_object_add(o, "last_publish_at", json_object_new_int64(r->last_publish_at));
	json_object_object_add(o, "published", json_object_new_int64((int64_t)r->published));
	json_object_object_add(o, "conflicts", json_object_new_int64((int64_t)r->conflicts));
	json_object_object_add(o, "last_error", json_object_new_string(r->last_error));
	json_object_object_add(o, "last_error_at", json_object_new_int64(r->last_error_at));
	json_object_object_add(o, "retry_in_ms", json_object_new_int64(r->retry_in_ms));
	json_object_object_add(o, "schema_version", json_object_new_int64(r->schema_version));
	json_object_object_add(o, "lookups", json_object_new_int64((int64_t)r->lookups));
	json_object_object_add(o, "lookup_hits", json_object_new_int64((int64_t)r->lookup_hits));
	return o;
}

static void catalogue_status_print(const Pim__CatalogueStatusReply *r)
{
	char a[40], b[40];

	printf("Catalogue %s: %s\n", tty(r->target), r->reachable ? "reachable" : "UNREACHABLE");
	if (!r->reachable && r->last_error[0])
		printf("  error:          %s (%s)%s\n", tty(r->last_error), when_text(r->last_error_at, a, sizeof a),
		       r->retry_in_ms ? "" : "");
	if (!r->reachable && r->retry_in_ms)
		printf("  next attempt:   in %.1f s\n", r->retry_in_ms / 1000.0);
	printf("  host id:        %s\n  platform key:   %s\n", tty(r->host_id), tty(r->platform_key));
	printf("  outbox:         %" PRIu64 " waiting%s", r->outbox_depth, r->outbox_failed ? ", " : "\n");
	if (r->outbox_failed)
		printf("%" PRIu64 " refused by the catalogue (see the journal)\n", r->outbox_failed);
	printf("  last publish:   %s\n  published:      %" PRIu64 " since pimd started, %" PRIu64
	       " conflicts (already there)\n", when_text(r->last_publish_at, b, sizeof b), r->published,
	       r->conflicts);
	printf("  lookups:        %" PRIu64 ", %" PRIu64 " found the model\n  schema:         version %u\n",
	       r->lookups, r->lookup_hits, r->schema_version);
	if (r->reachable && r->last_error[0])
		printf("  last error:     %s (%s)\n", tty(r->last_error), when_text(r->last_error_at, a, sizeof a));
}

/* Exit status 0 when the catalogue is reachable, 1 when not or none is configured. */
static int cmd_catalogue_status(struct ctl *ctl)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__CatalogueStatus body = PIM__CATALOGUE_STATUS__INIT;
	Pim__Response *resp;
	int r;

	req.body_case = PIM__REQUEST__BODY_CATALOGUE_STATUS;
	req.catalogue_status = &body;
	if ((r = call_body(ctl, &req, PIM__RESPONSE__BODY_CATALOGUE_STATUS, &resp)))
		return r;
	const Pim__CatalogueStatusReply *cs = resp->catalogue_status;
	if (ctl->json)
		print_json(catalogue_status_json(cs));
	else if (!cs->configured)
		printf("No fleet catalogue is configured (pimd.conf(5): catalogue)\n");
	else
		catalogue_status_print(cs);
	r = cs->configured && cs->reachable ? EXIT_OK : EXIT_DAEMON;
	pim__response__free_unpacked(resp, NULL);
	return r;
}

static int cmd_catalogue_list(struct ctl *ctl, unsigned limit)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__CatalogueList body = PIM__CATALOGUE_LIST__INIT;
	Pim__Response *resp;
	char when[40];
	int r;

	body.limit = limit;
	req.body_case = PIM__REQUEST__BODY_CATALOGUE_LIST;
	req.catalogue_list = &body;
	if ((r = call_body(ctl, &req, PIM__RESPONSE__BODY_CATALOGUE_LIST, &resp)))
		return r;
	const Pim__CatalogueListReply *l = resp->catalogue_list;
	if (ctl->json) {
		json_object *o = json_object_new_object(), *a = json_object_new_array();
		for (size_t i = 0; i < l->n_entries; i++) {
			const Pim__CatalogueListEntry *e = l->entries[i];
			json_object *je = json_object_new_object();
			json_object_object_add(je, "model", json_object_new_string(e->model_name));
			json_object_object_add(je, "model_hash", json_object_new_string(e->model_hash));
			json_object_object_add(je, "platform_key", json_object_new_string(e->platform_key));
			json_object_object_add(je, "this_platform", json_object_new_boolean(strcmp(e->platform_key,
											    l->platform_key) == 0));
			json_object_object_add(je, "hosts", json_object_new_int64(e->hosts));
			json_object_object_add(je, "runs", json_object_new_int64(e->runs));
			json_object_object_add(je, "imports", json_object_new_int64(e->imports));
			json_object_object_add(je, "regions", json_object_new_int64(e->regions));
			json_object_object_add(je, "last_measured_at", json_object_new_int64(e->last_measured_at));
			json_object_array_add(a, je);
		}
		json_object_object_add(o, "entries", a);
		json_object_object_add(o, "truncated", json_object_new_boolean(l->truncated));
		json_object_object_add(o, "platform_key", json_object_new_string(l->platform_key));
		print_json(o);
	} else {
		printf("%-24s %-12s %6s %5s %7s %8s  %-20s %s\n", "MODEL", "HASH", "HOSTS", "RUNS", "IMPORTS", "REGIONS",
		       "LAST MEASURED", "PLATFORM");
		for (size_t i = 0; i < l->n_entries; i++) {
			const Pim__CatalogueListEntry *e = l->entries[i];
			printf("%-24s %-12.12s %6u %5u %7u %8u  %-20.20s %s%s\n", tty(e->model_name), e->model_hash,
			       e->hosts, e->runs, e->imports, e->regions, when_text(e->last_measured_at, when, sizeof when),
			       tty(e->platform_key), strcmp(e->platform_key, l->platform_key) == 0 ? " (this host's)" : "");
		}
		if (l->truncated)
			printf("(more rows: --limit)\n");
	}
	pim__response__free_unpacked(resp, NULL);
	return EXIT_OK;
}

static int run_catalogue(struct ctl *ctl, int argc, char **argv)
{
	unsigned limit = 0;
	int r;

	if (argc < 1 || (strcmp(argv[0], "status") != 0 && strcmp(argv[0], "list") != 0))
		return usage_error("catalogue: unknown or missing subcommand%s%s (status, list)", argc ? " " : "",
				   argc ? argv[0] : "");
	bool list = strcmp(argv[0], "list") == 0;
	for (int i = 1; i < argc; i++) {
		char *end;
		if (list && strcmp(argv[i], "--limit") == 0 && i + 1 < argc) {
			unsigned long v = strtoul(argv[++i], &end, 10);
			if (*end || v == 0 || v > 10000)
				return usage_error("catalogue list: --limit takes 1..10000");
			limit = (unsigned)v;
		} else
			return usage_error("catalogue %s: unexpected argument '%s'", argv[0], argv[i]);
	}
	if ((r = connect_client(ctl)) != EXIT_OK)
		return r;
	return list ? cmd_catalogue_list(ctl, limit) : cmd_catalogue_status(ctl);
}

static int cmd_platform_probe(struct ctl *ctl)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__ProbeBandwidth body = PIM__PROBE_BANDWIDTH__INIT;
	Pim__Response *resp;
	struct ticker t;
	int r;

	req.body_case = PIM__REQUEST__BODY_PROBE_BANDWIDTH;
	req.probe_bandwidth = &body;
	ticker_start(&t, ctl, "measuring B_cpu");
	if ((r = call_body(ctl, &req, PIM__RESPONSE__BODY_PROBE_BANDWIDTH, &resp)))
		return r;
	const Pim__ProbeBandwidthReply *pr = resp->probe_bandwidth;
	if (ctl->json) {
		json_object *o = json_object_new_object();
		if (pr->previous)
			json_object_object_add(o, "previous", b_cpu_json(pr->previous));
		if (pr->probe)
			json_object_object_add(o, "probe", b_cpu_json(pr->probe));
		print_json(o);
	} else if (pr->probe) {
		const Pim__BandwidthProbe *was = pr->previous, *now = pr->probe;
		printf("B_cpu measured: %.2f GB/s", now->measured / 1e9);
		if (was && was->measured > 0)
			printf(" (was %.2f GB/s, %+.1f%%)", was->measured / 1e9,
			       100 * (now->measured / was->measured - 1));
		printf("\n");
		b_cpu_print(now, "  ");
	}
	pim__response__free_unpacked(resp, NULL);
	return EXIT_OK;
}

static int cmd_model_load(struct ctl *ctl, const char *path, bool replace)
{
	struct pim_error err = { 0 };
	struct pim_model_info info;
	Pim__Manifest *m;
	int replaced = 0, r;

	/* Validate locally first: a clear message naming the field, without a round trip. */
	if (manifest_read_file(path, &m, &err) < 0) {
		fprintf(stderr, "pimctl: %s\n", tty(err.msg));
		return EXIT_DAEMON;
	}
	size_t len = pim__manifest__get_packed_size(m);
	uint8_t *buf = malloc(len ? len : 1);
	if (!buf) {
		pim__manifest__free_unpacked(m, NULL);
		fprintf(stderr, "pimctl: out of memory\n");
		return EXIT_DAEMON;
	}
	pim__manifest__pack(m, buf);
	pim__manifest__free_unpacked(m, NULL);
	if ((r = connect_client(ctl)) != EXIT_OK) {
		free(buf);
		return r;
	}
	r = pim_model_load(ctl->client, buf, len, replace ? PIM_LOAD_REPLACE : 0, &info, &replaced);
	free(buf);
	if (r < 0)
		return request_failed(ctl, r);
	if (ctl->json) {
		json_object *o = model_info_json(&info);
		json_object_object_add(o, "replaced", json_object_new_boolean(replaced));
		print_json(o);
	} else
		printf("%s model %s: %u regions, %u allocations\n", replaced ? "Replaced" : "Loaded",
		       tty(info.name), info.regions, info.allocations);
	return EXIT_OK;
}

static int cmd_model_list(struct ctl *ctl)
{
	struct pim_model_info *v;
	size_t n;

	int r = pim_model_list(ctl->client, &v, &n);
	if (r < 0)
		return request_failed(ctl, r);
	if (ctl->json) {
		json_object *a = json_object_new_array();
		for (size_t i = 0; i < n; i++)
			json_object_array_add(a, model_info_json(&v[i]));
		print_json(a);
	} else if (n == 0) {
		printf("No models loaded.\n");
	} else {
		printf("%-24s %8s %8s %12s %6s  %s\n", "NAME", "REGIONS", "ALLOCS", "BYTES", "OWNER", "LOADED");
		for (size_t i = 0; i < n; i++) {
			char b[32], t[32];
			human_bytes(b, sizeof b, v[i].allocation_bytes);
			format_time(t, sizeof t, v[i].loaded_at);
			printf("%-24s %8u %8u %12s %6u  %s\n", tty(v[i].name), v[i].regions, v[i].allocations, b,
			       v[i].owner_uid, t);
		}
	}
	free(v);
	return EXIT_OK;
}

static const char *evidence_name(Pim__Evidence e);
static json_object *jdouble(double v);
static void fmt_time(char *buf, size_t len, double s);
static int call_body(struct ctl *ctl, Pim__Request *req, Pim__Response__BodyCase want,
		     Pim__Response **out);

static const Pim__RegionMetrics *metrics_of(const Pim__ModelShowReply *r, uint32_t id)
{
	for (size_t i = 0; i < r->n_metrics; i++)
		if (r->metrics[i]->region_id == id)
			return r->metrics[i];
	return NULL;
}

static int cmd_model_show(struct ctl *ctl, const char *name)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__ModelShow body = PIM__MODEL_SHOW__INIT;
	Pim__Response *resp;
	int r;

	body.name = (char *)name;
	req.body_case = PIM__REQUEST__BODY_MODEL_SHOW;
	req.model_show = &body;
	if ((r = call_body(ctl, &req, PIM__RESPONSE__BODY_MODEL_SHOW, &resp)))
		return r;
	const Pim__ModelShowReply *sr = resp->model_show;
	const Pim__ModelSummary *s = sr->model;
	const Pim__Manifest *m = sr->manifest;
	struct pim_model_info info = { 0 };
	snprintf(info.name, sizeof info.name, "%s", s->name);
	snprintf(info.source, sizeof info.source, "%s", s->source);
	info.regions = s->regions;
	info.allocations = s->allocations;
	info.owner_uid = s->owner_uid;
	info.loaded_at = s->loaded_at;
	info.allocation_bytes = s->allocation_bytes;
	if (ctl->json) {
		json_object *o = model_info_json(&info);
		json_object_object_add(o, "manifest", manifest_to_json(m));
		json_object *ms = json_object_new_array();
		for (size_t i = 0; i < sr->n_metrics; i++) {
			const Pim__RegionMetrics *x = sr->metrics[i];
			json_object *jm = json_object_new_object();
			json_object_object_add(jm, "region", json_object_new_int64(x->region_id));
			json_object_object_add(jm, "evidence", json_object_new_string(evidence_name(x->evidence)));
			json_object_object_add(jm, "t_host", jdouble(x->t_host));
			json_object_object_add(jm, "t_host_spread", jdouble(x->t_host_spread));
			json_object_object_add(jm, "n_rd", x->have_n_rd ? jdouble(x->n_rd) : json_object_new_null());
			json_object_object_add(jm, "c_store", x->have_store ? jdouble(x->c_store) : json_object_new_null());
			json_object_object_add(jm, "bw_read_estimate",
					       x->bw_read_estimate > 0 ? jdouble(x->bw_read_estimate)
								       : json_object_new_null());
			json_object_object_add(jm, "source", json_object_new_string(x->source));
			json_object_array_add(ms, jm);
		}
		json_object_object_add(o, "metrics", ms);
		print_json(o);
		pim__response__free_unpacked(resp, NULL);
		return EXIT_OK;
	}
	char b[32], t[32];
	human_bytes(b, sizeof b, info.allocation_bytes);
	format_time(t, sizeof t, info.loaded_at);
	printf("Model %s\n  source:      %s\n  loaded:      %s by uid %u\n  regions:     %u (%zu with "
	       "metrics on this platform)\n  allocations: %u (%s)\n\n", tty(info.name),
	       *info.source ? tty(info.source) : "-", t, info.owner_uid, info.regions, sr->n_metrics,
	       info.allocations, b);
	printf("%6s %-8s %12s  %s\n", "ALLOC", "KIND", "BYTES", "NAME");
	for (size_t i = 0; i < m->n_allocations; i++) {
		const Pim__Allocation *a = m->allocations[i];
		printf("%6u %-8s %12" PRIu64 "  %s\n", a->id, manifest_alloc_kind_name(a->kind), a->bytes,
		       *a->name ? tty(a->name) : "-");
	}
	printf("\n%5s %6s %-20s %-22s %12s %14s %8s %10s %-9s  %s\n", "ORDER", "REGION", "NAME", "OP", "N_PAR",
	       "N_TOTAL", "TRIP", "T_HOST", "EVIDENCE", "OPERANDS (alloc:role:bytes)");
	for (size_t i = 0; i < m->n_regions; i++) {
		const Pim__Region *g = m->regions[i];
		const Pim__RegionMetrics *x = metrics_of(sr, g->id);
		char th[32];
		fmt_time(th, sizeof th, x ? x->t_host : 0);
		printf("%5u %6u %-20.20s %-22.22s %12" PRIu64 " %14" PRIu64 " %8" PRIu64 " %10s %-9s ", g->order,
		       g->id, tty(g->name), tty(g->op), g->n_par, g->n_total, g->trip ? g->trip : 1, th,
		       x ? evidence_name(x->evidence) : "-");
		for (size_t j = 0; j < g->n_operands; j++)
			printf(" %u:%s:%" PRIu64, g->operands[j]->allocation_id,
			       manifest_role_name(g->operands[j]->role), g->operands[j]->bytes);
		printf("\n");
	}
	pim__response__free_unpacked(resp, NULL);
	return EXIT_OK;
}

static int cmd_model_rm(struct ctl *ctl, const char *name)
{
	int r = pim_model_remove(ctl->client, name);
	if (r < 0)
		return request_failed(ctl, r);
	if (ctl->json) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "removed", json_object_new_string(name));
		print_json(o);
	} else
		printf("Removed model %s\n", tty(name));
	return EXIT_OK;
}


/* ---------------------------------------------------------------- raw requests (placement etc.) */

/* Sends req through libpimclient and returns the decoded response body; an Error response is
 * printed and mapped to an exit status. */
static int call_body(struct ctl *ctl, Pim__Request *req, Pim__Response__BodyCase want,
		     Pim__Response **out)
{
	size_t n = pim__request__get_packed_size(req);
	uint8_t *buf = malloc(n ? n : 1);
	void *rbuf;
	size_t rlen;
	int r;

	if (!buf) {
		fprintf(stderr, "pimctl: out of memory\n");
		return EXIT_DAEMON;
	}
	pim__request__pack(req, buf);
	r = pim_call(ctl->client, buf, n, &rbuf, &rlen);
	free(buf);
	if (ctl->ticker) {
		ticker_stop(ctl->ticker);
		ctl->ticker = NULL;
	}
	if (r < 0)
		return request_failed(ctl, r);
	Pim__Response *resp = pim__response__unpack(NULL, rlen, rbuf);
	free(rbuf);
	if (!resp) {
		fprintf(stderr, "pimctl: pimd sent a response that does not decode\n");
		return EXIT_CONNECT;
	}
	if (resp->body_case == PIM__RESPONSE__BODY_ERROR) {
		fprintf(stderr, "pimctl: %s\n", tty(resp->error->message));
		pim__response__free_unpacked(resp, NULL);
		return EXIT_DAEMON;
	}
	if (resp->body_case != want) {
		fprintf(stderr, "pimctl: pimd answered with an unexpected message (%d); is it older than "
			"pimctl %s?\n", resp->body_case, PIMD_VERSION);
		pim__response__free_unpacked(resp, NULL);
		return EXIT_DAEMON;
	}
	*out = resp;
	return EXIT_OK;
}

static const struct {
	const char *name;
	size_t offset;
} param_fields[] = {
	{ "n_core", offsetof(Pim__PlacementParams, n_core) },
	{ "f_pim", offsetof(Pim__PlacementParams, f_pim) },
	{ "i_min", offsetof(Pim__PlacementParams, i_min) },
	{ "t_ctx", offsetof(Pim__PlacementParams, t_ctx) },
	{ "b_cpu", offsetof(Pim__PlacementParams, b_cpu) },
	{ "theta", offsetof(Pim__PlacementParams, theta) },
	{ "theta_ratio", offsetof(Pim__PlacementParams, theta_ratio) },
	{ "sigma", offsetof(Pim__PlacementParams, sigma) },
	{ "b_rd", offsetof(Pim__PlacementParams, b_rd) },
	{ "b_wb", offsetof(Pim__PlacementParams, b_wb) },
	{ "b_pim_core", offsetof(Pim__PlacementParams, b_pim_core) },
	{ "line_bytes", offsetof(Pim__PlacementParams, line_bytes) },
	{ "b_cpu_spread", offsetof(Pim__PlacementParams, b_cpu_spread) },
};

/* --param NAME=VALUE: 0 ok, else the usage exit status. */
static int parse_param(Pim__PlacementParams *p, const char *arg)
{
	const char *eq = strchr(arg, '=');
	char *end;

	if (!eq)
		return usage_error("--param: expected NAME=VALUE, got '%s'", arg);
	for (size_t i = 0; i < ELEMENTSOF(param_fields); i++)
		if (strlen(param_fields[i].name) == (size_t)(eq - arg) &&
		    strncmp(param_fields[i].name, arg, (size_t)(eq - arg)) == 0) {
			errno = 0;
			double v = strtod(eq + 1, &end);
			if (errno || end == eq + 1 || *end || !isfinite(v) || v <= 0)
				return usage_error("--param %s: '%s' is not a positive number", param_fields[i].name,
						   eq + 1);
			*(double *)((char *)p + param_fields[i].offset) = v;
			return 0;
		}
	return usage_error("--param: unknown parameter '%.*s' (n_core, f_pim, i_min, t_ctx, b_cpu, theta, "
			   "theta_ratio, sigma, b_rd, b_wb, b_pim_core, line_bytes, b_cpu_spread)", (int)(eq - arg),
			   arg);
}

/* A comma-separated list of positive numbers. */
static int parse_list(const char *opt, const char *arg, double *v, size_t max, size_t *n)
{
	const char *p = arg;
	char *end;

	*n = 0;
	while (*p) {
		if (*n == max)
			return usage_error("%s: at most %zu values", opt, max);
		errno = 0;
		double x = strtod(p, &end);
		if (errno || end == p || !isfinite(x) || x <= 0)
			return usage_error("%s: '%s' is not a list of positive numbers", opt, arg);
		v[(*n)++] = x;
		if (*end == ',')
			end++;
		else if (*end)
			return usage_error("%s: '%s' is not a list of positive numbers", opt, arg);
		p = end;
	}
	if (*n == 0)
		return usage_error("%s: empty list", opt);
	return 0;
}

static void fmt_time(char *buf, size_t len, double s)
{
	if (!isfinite(s) || s <= 0)
		snprintf(buf, len, "-");
	else if (s < 1e-6)
		snprintf(buf, len, "%.0f ns", s * 1e9);
	else if (s < 1e-3)
		snprintf(buf, len, "%.2f us", s * 1e6);
	else if (s < 1)
		snprintf(buf, len, "%.2f ms", s * 1e3);
	else
		snprintf(buf, len, "%.3f s", s);
}

/* A time that is known to be 0 prints as 0 ('-' means unknown). */
static void fmt_time0(char *buf, size_t len, double s)
{
	if (s == 0)
		snprintf(buf, len, "0");
	else
		fmt_time(buf, len, s);
}

/* Which term set the estimate's T_pim: one name, "mixed", or NULL when nothing is on PIM. */
static const char *t_pim_by(const Pim__PlacementEstimate *e)
{
	unsigned kinds = (e->pim_compute > 0) + (e->pim_bandwidth > 0) + (e->pim_measured > 0);

	if (kinds == 0)
		return NULL;
	if (kinds > 1)
		return "mixed";
	return e->pim_compute ? "compute" : e->pim_bandwidth ? "bandwidth" : "measured";
}

static char cond_char(const Pim__Condition *c)
{
	switch (c->state) {
	case PIM__COND_STATE__COND_TRUE: return 'y';
	case PIM__COND_STATE__COND_FALSE: return 'n';
	case PIM__COND_STATE__COND_NO_DATA: return '?';
	default: return '.';
	}
}

static const char *evidence_name(Pim__Evidence e)
{
	switch (e) {
	case PIM__EVIDENCE__EVIDENCE_COUNTERS: return "counters";
	case PIM__EVIDENCE__EVIDENCE_ESTIMATE: return "estimate";
	case PIM__EVIDENCE__EVIDENCE_IMPORTED: return "imported";
	default: return "none";
	}
}

/* The conditions as --json names them, and the threshold each compares with. */
static const char *const cond_key[4] = { "c1", "c2", "c3", "c4" };
static const char *const cond_threshold[4] = { "t_ctx", "n_core", "theta", "sigma" };

static json_object *jdouble(double v)
{
	return isfinite(v) ? json_object_new_double(v) : json_object_new_null();
}

static json_object *placement_json(const Pim__PlacementReply *r)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "model", json_object_new_string(r->model));
	json_object_object_add(o, "granularity", json_object_new_string(r->granularity));
	json_object_object_add(o, "movement", json_object_new_string(r->movement));
	json_object_object_add(o, "platform", json_object_new_string(r->platform));
	json_object_object_add(o, "cached", json_object_new_boolean(r->cached));
	json_object_object_add(o, "regions_with_metrics", json_object_new_int64(r->regions_with_metrics));
	if (r->catalogue) {
		const Pim__CatalogueOrigin *c = r->catalogue;
		json_object *jc = json_object_new_object();
		json_object_object_add(jc, "host", json_object_new_string(c->host));
		json_object_object_add(jc, "measured_at", json_object_new_int64(c->measured_at));
		json_object_object_add(jc, "backend", json_object_new_string(c->backend));
		json_object_object_add(jc, "regions", json_object_new_int64(c->regions));
		json_object_object_add(jc, "hosts", json_object_new_int64(c->hosts));
		json_object_object_add(jc, "model_hash", json_object_new_string(c->model_hash));
		json_object_object_add(jc, "platform_key", json_object_new_string(c->platform_key));
		json_object_object_add(jc, "fetched", json_object_new_boolean(c->fetched));
		json_object_object_add(o, "catalogue", jc);
	}
	if (r->b_cpu_probe)
		json_object_object_add(o, "b_cpu_probe", b_cpu_json(r->b_cpu_probe));
	json_object *pp = json_object_new_object();
	for (size_t i = 0; r->params && i < ELEMENTSOF(param_fields); i++) {
		double v = *(const double *)((const char *)r->params + param_fields[i].offset);
		/* n_core is 0 when the answer holds several core counts: each estimate has its own */
		bool none = param_fields[i].offset == offsetof(Pim__PlacementParams, n_core) && v == 0;
		json_object_object_add(pp, param_fields[i].name, none ? json_object_new_null() : jdouble(v));
	}
	json_object_object_add(o, "params", pp);
	json_object *notes = json_object_new_array();
	for (size_t i = 0; i < r->n_notes; i++)
		json_object_array_add(notes, json_object_new_string(r->notes[i]));
	json_object_object_add(o, "notes", notes);
	json_object *ests = json_object_new_array();
	for (size_t i = 0; i < r->n_estimates; i++) {
		const Pim__PlacementEstimate *e = r->estimates[i];
		json_object *je = json_object_new_object();
		json_object_object_add(je, "n_core", jdouble(e->n_core));
		json_object_object_add(je, "offloaded", json_object_new_int64(e->offloaded));
		json_object_object_add(je, "rejected_stage1", json_object_new_int64(e->rejected_stage1));
		json_object_object_add(je, "rejected_stage2", json_object_new_int64(e->rejected_stage2));
		json_object_object_add(je, "marginal", json_object_new_int64(e->marginal));
		json_object_object_add(je, "marginal_pim", json_object_new_int64(e->marginal_pim));
		json_object *mb = json_object_new_object();
		for (size_t c = 0; c < e->n_marginal_by_condition && c < 4; c++)
			json_object_object_add(mb, cond_key[c], json_object_new_int64(e->marginal_by_condition[c]));
		json_object_object_add(je, "marginal_by_condition", mb);
		json_object_object_add(je, "t_cpu", jdouble(e->t_cpu));
		json_object_object_add(je, "t_host", jdouble(e->t_host));
		json_object_object_add(je, "t_pim", jdouble(e->t_pim));
		json_object_object_add(je, "t_hybrid", jdouble(e->t_hybrid));
		json_object_object_add(je, "speedup", jdouble(e->speedup));
		json_object_object_add(je, "speedup_kind", json_object_new_string("estimate"));
		const char *by = t_pim_by(e);
		json_object_object_add(je, "t_pim_term", by ? json_object_new_string(by) : json_object_new_null());
		json_object *tb = json_object_new_object();
		json_object_object_add(tb, "compute", jdouble(e->t_pim_compute));
		json_object_object_add(tb, "bandwidth", jdouble(e->t_pim_bandwidth));
		json_object_object_add(tb, "measured", jdouble(e->t_pim_measured));
		json_object_object_add(je, "t_pim_by_term", tb);
		json_object *nb = json_object_new_object();
		json_object_object_add(nb, "compute", json_object_new_int64(e->pim_compute));
		json_object_object_add(nb, "bandwidth", json_object_new_int64(e->pim_bandwidth));
		json_object_object_add(nb, "measured", json_object_new_int64(e->pim_measured));
		json_object_object_add(je, "regions_by_term", nb);
		json_object_object_add(je, "captured_share", jdouble(e->captured_share));
		json_object_object_add(je, "residual_share", jdouble(e->residual_share));
		json_object_object_add(je, "bound", e->bound > 0 ? jdouble(e->bound) : json_object_new_null());
		json_object_object_add(je, "bound_movement",
				       e->bound_movement > 0 ? jdouble(e->bound_movement) : json_object_new_null());
		if (e->movement) {
			json_object *m = json_object_new_object();
			json_object_object_add(m, "model", json_object_new_string(e->movement->model));
			json_object_object_add(m, "segments", json_object_new_int64((int64_t)e->movement->segments));
			json_object_object_add(m, "transitions", json_object_new_int64((int64_t)e->movement->transitions));
			json_object_object_add(m, "fetch_bytes", json_object_new_int64((int64_t)e->movement->fetch_bytes));
			json_object_object_add(m, "flush_bytes", json_object_new_int64((int64_t)e->movement->flush_bytes));
			json_object_object_add(m, "t_switch", jdouble(e->movement->t_switch));
			json_object_object_add(m, "t_fetch", jdouble(e->movement->t_fetch));
			json_object_object_add(m, "t_flush", jdouble(e->movement->t_flush));
			json_object_object_add(m, "t_move", jdouble(e->movement->t_move));
			json_object_object_add(je, "movement", m);
		}
		json_object *regs = json_object_new_array();
		for (size_t j = 0; j < e->n_regions; j++) {
			const Pim__RegionDecision *d = e->regions[j];
			json_object *jr = json_object_new_object();
			json_object_object_add(jr, "region", json_object_new_int64(d->region_id));
			json_object_object_add(jr, "name", json_object_new_string(d->name));
			json_object_object_add(jr, "op", json_object_new_string(d->op));
			json_object_object_add(jr, "order", json_object_new_int64(d->order));
			json_object_object_add(jr, "n_par", json_object_new_int64((int64_t)d->n_par));
			json_object_object_add(jr, "n_total", json_object_new_int64((int64_t)d->n_total));
			json_object_object_add(jr, "trip", json_object_new_int64((int64_t)d->trip));
			json_object_object_add(jr, "place", json_object_new_string(d->pim ? "pim" : "host"));
			json_object_object_add(jr, "evidence", json_object_new_string(evidence_name(d->evidence)));
			json_object_object_add(jr, "t_host", jdouble(d->t_host));
			static const char *const st[] = { "false", "true", "no_data", "skipped" };
			for (size_t c = 0; c < d->n_conditions && c < 4; c++) {
				json_object *jc = json_object_new_object();
				json_object_object_add(jc, "state", json_object_new_string(
					(unsigned)d->conditions[c]->state < 4 ? st[d->conditions[c]->state] : "?"));
				json_object_object_add(jc, "lhs", jdouble(d->conditions[c]->lhs));
				json_object_object_add(jc, "rhs", jdouble(d->conditions[c]->rhs));
				json_object_object_add(jc, "noise", jdouble(d->conditions[c]->noise));
				json_object_object_add(jc, "marginal", json_object_new_boolean(d->conditions[c]->marginal));
				json_object_object_add(jr, cond_key[c], jc);
			}
			json_object_object_add(jr, "marginal", json_object_new_boolean(d->marginal));
			json_object *on = json_object_new_array();
			for (int c = 0; c < 4; c++)
				if (d->marginal_on & 1u << c)
					json_object_array_add(on, json_object_new_string(cond_threshold[c]));
			json_object_object_add(jr, "marginal_on", on);
			json_object_object_add(jr, "bw_estimated", json_object_new_boolean(d->bw_estimated));
			json_object_object_add(jr, "reason", json_object_new_string(d->reason));
			json_object_object_add(jr, "t_pim", d->pim ? jdouble(d->t_pim) : json_object_new_null());
			json_object_object_add(jr, "t_pim_term", d->pim && d->t_pim_term && *d->t_pim_term
					       ? json_object_new_string(d->t_pim_term) : json_object_new_null());
			json_object_object_add(jr, "fetch_bytes", json_object_new_int64((int64_t)d->fetch_bytes));
			json_object_object_add(jr, "flush_bytes", json_object_new_int64((int64_t)d->flush_bytes));
			json_object_array_add(regs, jr);
		}
		json_object_object_add(je, "regions", regs);
		json_object_array_add(ests, je);
	}
	json_object_object_add(o, "estimates", ests);
	return o;
}

static void decision_row(const Pim__RegionDecision *d, bool verbose)
{
	char t[32], bw[32], fs[32], conds[5] = "....";
	fmt_time(t, sizeof t, d->t_host);
	snprintf(bw, sizeof bw, "-");
	snprintf(fs, sizeof fs, "-");
	if (d->n_conditions == 4) {
		for (int c = 0; c < 4; c++)
			conds[c] = cond_char(d->conditions[c]);
		double b = d->conditions[2]->lhs, f = d->conditions[3]->lhs;
		if (isfinite(b))
			snprintf(bw, sizeof bw, "%.2f%s", b / 1e9, d->bw_estimated ? "e" : "");
		if (isfinite(f))
			snprintf(fs, sizeof fs, "%.2f", f);
	}
	/* ~: marginal, the noise of a condition can change the side */
	char place[8];
	snprintf(place, sizeof place, "%s%s", d->pim ? "PIM" : "host", d->marginal ? "~" : "");
	printf("%6u %-18.18s %-16.16s %10" PRIu64 " %12" PRIu64 " %10s %9s %7s %-5s %-*s%s%s\n", d->region_id,
	       tty(d->name), tty(d->op), d->n_par, d->n_total, t, bw, fs, conds, verbose ? 5 : 0, place,
	       verbose ? " " : "", verbose ? tty(d->reason) : "");
}

static void decision_header(bool verbose)
{
	printf("%6s %-18s %-16s %10s %12s %10s %9s %7s %-5s %s%s\n", "REGION", "NAME", "OPERATOR", "N_PAR",
	       "N_TOTAL", "T_HOST", "BW_READ", "F_STORE", "C1234", verbose ? "PLACE " : "PLACE",
	       verbose ? "REASON" : "");
}

/*
 * Below a table: how many of its regions each condition kept on the host or sent to PIM, with
 * the condition's text once.  A region failing C1 and C2 counts under both.
 */
static void reason_summary(const Pim__PlacementReply *r, const Pim__PlacementEstimate *e,
			   const Pim__PlacementEstimate *first)
{
	enum { C1_FAIL, C2_FAIL, S2_FAIL, C3_FAIL, C3_NODATA, C4_FAIL, C4_NODATA, NO_METRICS, C3_HOLD, C4_HOLD,
	       N_WHY };
	size_t n[N_WHY] = { 0 }, marginal = 0, marginal_on[4] = { 0 };
	char theta[64] = "θ", sigma[64] = "σ";

	if (r->params) {
		/* this host's θ; imported counts may carry their own (see --verbose) */
		snprintf(theta, sizeof theta, "θ %.2f GB/s", r->params->theta / 1e9);
		snprintf(sigma, sizeof sigma, "σ %.2f", r->params->sigma);
	}
	for (size_t j = 0; j < e->n_regions; j++) {
		const Pim__RegionDecision *d = e->regions[j];
		if (first && (j >= first->n_regions || d->pim == first->regions[j]->pim))
			continue;
		if (d->n_conditions != 4)
			continue;
		Pim__CondState c1 = d->conditions[0]->state, c2 = d->conditions[1]->state;
		Pim__CondState c3 = d->conditions[2]->state, c4 = d->conditions[3]->state;
		marginal += d->marginal;
		for (int c = 0; c < 4; c++)
			marginal_on[c] += d->marginal && (d->marginal_on & 1u << c);
		if (d->pim) {
			n[C3_HOLD] += c3 == PIM__COND_STATE__COND_TRUE;
			n[C4_HOLD] += c4 == PIM__COND_STATE__COND_TRUE;
			continue;
		}
		if (d->evidence == PIM__EVIDENCE__EVIDENCE_NONE)
			n[NO_METRICS]++;
		n[C1_FAIL] += c1 != PIM__COND_STATE__COND_TRUE;
		n[C2_FAIL] += c2 != PIM__COND_STATE__COND_TRUE;
		if (c1 == PIM__COND_STATE__COND_TRUE && c2 == PIM__COND_STATE__COND_TRUE) {
			n[S2_FAIL]++;
			n[C3_FAIL] += c3 == PIM__COND_STATE__COND_FALSE;
			n[C3_NODATA] += c3 == PIM__COND_STATE__COND_NO_DATA;
			n[C4_FAIL] += c4 == PIM__COND_STATE__COND_FALSE;
			n[C4_NODATA] += c4 == PIM__COND_STATE__COND_NO_DATA;
		}
	}
	char c2text[96], theta_lt[96], theta_ge[96], sigma_lt[64], sigma_ge[64];
	snprintf(c2text, sizeof c2text, "C2 fails: N_par < N_core %g", e->n_core);
	snprintf(theta_lt, sizeof theta_lt, "  C3 fails: BW_read < %s", theta);
	snprintf(theta_ge, sizeof theta_ge, "C3 holds: BW_read >= %s", theta);
	snprintf(sigma_lt, sizeof sigma_lt, "  C4 fails: f_store < %s", sigma);
	snprintf(sigma_ge, sizeof sigma_ge, "C4 holds: f_store >= %s", sigma);
	const char *text[N_WHY] = {
		[C1_FAIL] = "C1 fails: T_host <= T_ctx + N_total·I_min/(N_core·f_pim)",
		[C2_FAIL] = c2text,
		[S2_FAIL] = "Stage 1 holds but Stage 2 fails (neither C3 nor C4), of which:",
		[C3_FAIL] = theta_lt,
		[C3_NODATA] = "  C3 not evaluable (no read counts)",
		[C4_FAIL] = sigma_lt,
		[C4_NODATA] = "  C4 not evaluable (no store counts)",
		[NO_METRICS] = "no measurements: T_host is taken as 0",
		[C3_HOLD] = theta_ge,
		[C4_HOLD] = sigma_ge,
	};
	printf("Why, by condition (--verbose gives each region's reason):\n");
	for (int k = 0; k < N_WHY; k++)
		if (n[k])
			printf("  %-4s %6zu  %s\n", k >= C3_HOLD ? "PIM" : "host", n[k], text[k]);
	if (marginal) {
		static const char *const what[4] = { "T_ctx (C1)", "N_core (C2)", "θ (C3)", "σ (C4)" };
		const char *sep = "";
		printf("  %-4s %6zu  marginal, within the measured noise of ", "~", marginal);
		for (int c = 0; c < 4; c++)
			if (marginal_on[c]) {
				printf("%s%s: %zu", sep, what[c], marginal_on[c]);
				sep = ", ";
			}
		printf("\n");
	}
}

static void placement_print(const Pim__PlacementReply *r, bool verbose)
{
	printf("Placement of %s: granularity %s, movement model %s%s\n", tty(r->model), r->granularity,
	       r->movement, r->cached ? " (stored answer)" : "");
	if (r->params)
		printf("Platform %s; theta %.2f GB/s, sigma %.2f, T_ctx %g s, f_pim %g Hz, B_cpu %.2f GB/s\n",
		       r->platform, r->params->theta / 1e9, r->params->sigma, r->params->t_ctx,
		       r->params->f_pim, r->params->b_cpu / 1e9);
	if (r->catalogue) {
		char when[40];
		printf("Metrics of %u regions from the fleet catalogue: host %s, %s, %s backend%s\n",
		       r->catalogue->regions, tty(r->catalogue->host),
		       when_text(r->catalogue->measured_at, when, sizeof when), tty(r->catalogue->backend),
		       r->catalogue->fetched ? " (fetched now)" : "");
	}
	if (r->params && r->b_cpu_probe) {
		printf("B_cpu %s:\n", r->b_cpu_probe->source);
		b_cpu_print(r->b_cpu_probe, "  ");
	}
	const Pim__PlacementEstimate *first = r->n_estimates ? r->estimates[0] : NULL;
	for (size_t i = 0; i < r->n_estimates; i++) {
		const Pim__PlacementEstimate *e = r->estimates[i];
		if (!e->n_regions)
			continue;
		if (i == 0) {
			printf("\nN_core = %g (conditions: y holds, n fails, ? no data, . not evaluated)\n", e->n_core);
			decision_header(verbose);
			for (size_t j = 0; j < e->n_regions; j++)
				decision_row(e->regions[j], verbose);
			if (!verbose)
				reason_summary(r, e, NULL);
			continue;
		}
		/* Later core counts: only the regions whose placement differs from the first. */
		size_t changed = 0;
		for (size_t j = 0; j < e->n_regions && j < first->n_regions; j++)
			changed += e->regions[j]->pim != first->regions[j]->pim;
		if (!changed) {
			printf("\nN_core = %g: the same placement as N_core = %g\n", e->n_core, first->n_core);
			continue;
		}
		printf("\nN_core = %g: %zu regions placed differently than at N_core = %g\n", e->n_core, changed,
		       first->n_core);
		decision_header(verbose);
		for (size_t j = 0; j < e->n_regions && j < first->n_regions; j++)
			if (e->regions[j]->pim != first->regions[j]->pim)
				decision_row(e->regions[j], verbose);
		if (!verbose)
			reason_summary(r, e, first);
	}
	if (first && first->n_regions)
		printf("(BW_READ in GB/s; 'e': estimated by the timing backend%s)\n",
		       first->marginal ? "; PLACE ~: marginal, within the measured noise of T_ctx (C1), θ (C3) or "
		       "σ (C4), so that it may change from run to run" : "");
	printf("\n%7s %9s %8s %10s %10s %-9s %10s %10s %9s %10s %11s %9s %9s  %s\n", "N_CORE", "OFFLOADED",
	       "MARGINAL", "T_CPU", "T_PIM", "T_PIM_BY", "T_MOVE", "T_HYBRID", "SPEEDUP~", "BOUND_MOVE",
	       "BOUND_RESID", "CAPTURED", "RESIDUAL", "MOVEMENT");
	for (size_t i = 0; i < r->n_estimates; i++) {
		const Pim__PlacementEstimate *e = r->estimates[i];
		char a[32], p[32], b[32], c[32], bound[32], bmove[32];
		const char *by = t_pim_by(e);
		fmt_time0(a, sizeof a, e->t_cpu);
		fmt_time0(p, sizeof p, e->t_pim);
		fmt_time0(b, sizeof b, e->t_hybrid);
		fmt_time0(c, sizeof c, e->movement ? e->movement->t_move : 0);
		if (e->bound > 0)
			snprintf(bound, sizeof bound, "%.3fx", e->bound);
		else
			snprintf(bound, sizeof bound, "-");
		if (e->bound_movement > 0)
			snprintf(bmove, sizeof bmove, "%.3fx", e->bound_movement);
		else
			snprintf(bmove, sizeof bmove, "-");
		printf("%7g %9u %8u %10s %10s %-9s %10s %10s %8.3fx %10s %11s %8.1f%% %8.1f%%  %s: %" PRIu64
		       " transitions, %" PRIu64 " B fetched, %" PRIu64 " B flushed\n",
		       e->n_core, e->offloaded, e->marginal, a, p, by ? by : "-", c, b, e->speedup, bmove, bound,
		       100 * e->captured_share, 100 * e->residual_share, e->movement ? e->movement->model : "?",
		       e->movement ? e->movement->transitions : 0, e->movement ? e->movement->fetch_bytes : 0,
		       e->movement ? e->movement->flush_bytes : 0);
	}
	printf("(SPEEDUP~ is an estimate; MARGINAL: decisions within the measured noise of their threshold; "
	       "T_PIM_BY: the term that set T_PIM,\n compute (a lower bound), bandwidth (assumed b_pim_core), "
	       "measured or mixed; BOUND_MOVE: the speedup as N_core grows without limit,\n T_MOVE staying; "
	       "BOUND_RESID: 1/RESIDUAL, without any movement)\n");
	for (size_t i = 0; i < r->n_notes; i++)
		printf("note: %s\n", r->notes[i]);
}

/* A chart as chart.h draws it: its text and length, or the error. */
struct drawn {
	char *text;
	size_t len;
	struct pim_error e;
};

/*
 * Writes a chart that chart.h drew into d (r: what the chart function returned) to path and says
 * so unless the output is JSON: 0, or EXIT_DAEMON with the error printed.  Frees d's text.
 */
static int write_svg(const struct ctl *ctl, const char *path, int r, struct drawn *d)
{
	if (r < 0) {
		fprintf(stderr, "pimctl: %s\n", d->e.msg);
		return EXIT_DAEMON;
	}
	FILE *f = fopen(path, "we");
	if (!f || fwrite(d->text, 1, d->len, f) != d->len || fclose(f) != 0) {
		fprintf(stderr, "pimctl: %s: %s\n", path, strerror(errno));
		free(d->text);
		return EXIT_DAEMON;
	}
	free(d->text);
	if (!ctl->json)
		printf("Chart written to %s (%zu bytes of SVG)\n", path, d->len);
	return EXIT_OK;
}

static int cmd_placement(struct ctl *ctl, int argc, char **argv)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__Placement body = PIM__PLACEMENT__INIT;
	Pim__PlacementParams params = PIM__PLACEMENT_PARAMS__INIT;
	const char *model = NULL;
	double cores[16];
	size_t n_cores = 0;
	bool verbose = false;
	const char *svg = NULL;
	int r;

	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--cores") == 0 && v) {
			if ((r = parse_list("--cores", v, cores, ELEMENTSOF(cores), &n_cores)))
				return r;
			i++;
		} else if (strcmp(a, "--granularity") == 0 && v) {
			body.granularity = (char *)v;
			i++;
		} else if (strcmp(a, "--movement") == 0 && v) {
			body.movement = (char *)v;
			i++;
		} else if (strcmp(a, "--param") == 0 && v) {
			if ((r = parse_param(&params, v)))
				return r;
			i++;
		} else if (strcmp(a, "--svg") == 0 && v) {
			svg = v;
			i++;
		} else if (strcmp(a, "--summary") == 0) {
			body.summary_only = true;
		} else if (strcmp(a, "--verbose") == 0) {
			verbose = true;
		} else if (a[0] == '-' && a[1]) {
			return usage_error("placement: unknown option or missing value '%s'", a);
		} else if (!model) {
			model = a;
		} else
			return usage_error("placement: unexpected argument '%s'", a);
	}
	if (!model)
		return usage_error("placement: missing MODEL");
	body.model = (char *)model;
	if ((r = connect_client(ctl)))
		return r;
	body.params = &params;
	body.core_counts = cores;
	body.n_core_counts = n_cores;
	req.body_case = PIM__REQUEST__BODY_PLACEMENT;
	req.placement = &body;
	Pim__Response *resp;
	if ((r = call_body(ctl, &req, PIM__RESPONSE__BODY_PLACEMENT, &resp)))
		return r;
	if (ctl->json)
		print_json(placement_json(resp->placement));
	else
		placement_print(resp->placement, verbose);
	if (svg) {
		struct drawn d = { 0 };
		r = write_svg(ctl, svg, chart_placement(resp->placement, &d.text, &d.len, &d.e), &d);
	}
	pim__response__free_unpacked(resp, NULL);
	return r;
}

static int read_text_file(const char *path, size_t max, char **out)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		fprintf(stderr, "pimctl: %s: %s\n", path, strerror(errno));
		return EXIT_DAEMON;
	}
	char *buf = malloc(max + 1);
	size_t n = buf ? fread(buf, 1, max + 1, f) : 0;
	int bad = ferror(f);
	fclose(f);
	if (!buf || bad) {
		free(buf);
		fprintf(stderr, "pimctl: %s: cannot read\n", path);
		return EXIT_DAEMON;
	}
	if (n > max) {
		free(buf);
		fprintf(stderr, "pimctl: %s: larger than %zu bytes\n", path, max);
		return EXIT_DAEMON;
	}
	if (memchr(buf, 0, n)) {
		free(buf);
		fprintf(stderr, "pimctl: %s: contains a NUL byte; expected text\n", path);
		return EXIT_DAEMON;
	}
	buf[n] = 0;
	*out = buf;
	return EXIT_OK;
}

static int cmd_import_perf(struct ctl *ctl, int argc, char **argv)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__ImportPerf body = PIM__IMPORT_PERF__INIT;
	const char *pos[3];
	int npos = 0, r;
	char *end;

	for (int i = 0; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--time") == 0 && v) {
			errno = 0;
			body.t_host = strtod(v, &end);
			if (errno || *end || end == v || !isfinite(body.t_host) || body.t_host <= 0)
				return usage_error("--time: '%s' is not a positive number of seconds", v);
			i++;
		} else if (strcmp(a, "--b-cpu") == 0 && v) {
			errno = 0;
			body.b_cpu = strtod(v, &end);
			if (errno || *end || end == v || !isfinite(body.b_cpu) || body.b_cpu <= 0)
				return usage_error("--b-cpu: '%s' is not a positive number of bytes per second", v);
			i++;
		} else if (strcmp(a, "--executions") == 0 && v) {
			errno = 0;
			unsigned long long e = strtoull(v, &end, 10);
			if (errno || *end || end == v || e == 0 || v[0] == '-')
				return usage_error("--executions: '%s' is not a positive integer", v);
			body.executions = e;
			i++;
		} else if (a[0] == '-' && a[1]) {
			return usage_error("import-perf: unknown option or missing value '%s'", a);
		} else if (npos < 3) {
			pos[npos++] = a;
		} else
			return usage_error("import-perf: unexpected argument '%s'", a);
	}
	if (npos != 3)
		return usage_error("import-perf: expected MODEL REGION FILE");
	errno = 0;
	unsigned long region = strtoul(pos[1], &end, 10);
	if (errno || *end || end == pos[1] || region > UINT32_MAX || pos[1][0] == '-')
		return usage_error("import-perf: REGION '%s' is not a region id", pos[1]);
	char *csv;
	if ((r = read_text_file(pos[2], 1u << 20, &csv)))
		return r;
	if ((r = connect_client(ctl))) {
		free(csv);
		return r;
	}
	body.model = (char *)pos[0];
	body.region_id = (uint32_t)region;
	body.csv = csv;
	req.body_case = PIM__REQUEST__BODY_IMPORT_PERF;
	req.import_perf = &body;
	Pim__Response *resp;
	r = call_body(ctl, &req, PIM__RESPONSE__BODY_IMPORT_PERF, &resp);
	free(csv);
	if (r)
		return r;
	const Pim__RegionMetrics *m = resp->import_perf->metrics;
	if (ctl->json) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "model", json_object_new_string(pos[0]));
		json_object_object_add(o, "region", json_object_new_int64(m->region_id));
		json_object_object_add(o, "evidence", json_object_new_string(evidence_name(m->evidence)));
		json_object_object_add(o, "t_host", jdouble(m->t_host));
		json_object_object_add(o, "n_rd", m->have_n_rd ? jdouble(m->n_rd) : json_object_new_null());
		json_object_object_add(o, "c_store", m->have_store ? jdouble(m->c_store) : json_object_new_null());
		json_object_object_add(o, "c_be1", m->have_store ? jdouble(m->c_be1) : json_object_new_null());
		json_object_object_add(o, "c_be2", m->have_store ? jdouble(m->c_be2) : json_object_new_null());
		json_object_object_add(o, "c_be3", m->have_store ? jdouble(m->c_be3) : json_object_new_null());
		json_object_object_add(o, "source", json_object_new_string(m->source));
		json_object_object_add(o, "b_cpu", m->source_b_cpu > 0 ? jdouble(m->source_b_cpu)
								      : json_object_new_null());
		json_object *notes = json_object_new_array();
		for (size_t i = 0; i < resp->import_perf->n_notes; i++)
			json_object_array_add(notes, json_object_new_string(resp->import_perf->notes[i]));
		json_object_object_add(o, "notes", notes);
		print_json(o);
	} else {
		char t[32];
		fmt_time(t, sizeof t, m->t_host);
		printf("Imported region %u of %s: T_host %s", m->region_id, pos[0], t);
		if (m->have_n_rd)
			printf(", n_rd %.0f (BW_read %.2f GB/s)", m->n_rd, m->n_rd * 64 / m->t_host / 1e9);
		if (m->have_store)
			printf(", f_store %.3f", m->c_store / (m->c_be1 + m->c_be2 + m->c_be3 + m->c_store));
		if (m->source_b_cpu > 0)
			printf("; measured on a host with B_cpu %.2f GB/s", m->source_b_cpu / 1e9);
		printf("\n");
		for (size_t i = 0; i < resp->import_perf->n_notes; i++)
			printf("note: %s\n", resp->import_perf->notes[i]);
	}
	pim__response__free_unpacked(resp, NULL);
	return EXIT_OK;
}

/* The sweep as a table: every point with --all, else only where a count changes; the
 * suggested theta per sigma. */
static void calibrate_print(const Pim__CalibrateReply *c, const char *model, bool all)
{
	printf("Calibration of %s: %u labelled regions, %u beneficial\n", tty(model), c->labelled,
	       c->beneficial);
	printf("%11s %5s %9s %6s %6s %9s\n", "THETA", "SIGMA", "SELECTED", "FP", "FN", "ACCURACY");
	for (size_t i = 0; i < c->n_points; i++) {
		const Pim__CalibratePoint *p = c->points[i], *q = i ? c->points[i - 1] : NULL;
		/* Without --all, print only where a count changes (and the ends). */
		const Pim__CalibratePoint *nx = i + 1 < c->n_points ? c->points[i + 1] : NULL;
		bool changed = !q || q->sigma != p->sigma || q->selected != p->selected || q->fp != p->fp ||
			       q->fn != p->fn || !nx || nx->sigma != p->sigma;
		if (all || changed)
			printf("%6.2f GB/s %5.2f %9u %6u %6u %9.3f\n", p->theta / 1e9, p->sigma, p->selected,
			       p->fp, p->fn, p->accuracy);
	}
	for (size_t i = 0; i < c->n_suggestions; i++) {
		const Pim__CalibratePoint *s = c->suggestions[i];
		printf("%s sigma %.2f: theta %.3f GB/s, the midpoint of [%.2f, %.2f] GB/s (fewest false "
		       "positives); %u selected, accuracy %u/%u = %.3f\n", i == c->best ? "suggested" : "         ",
		       s->sigma, s->theta / 1e9, c->suggestion_lo[i] / 1e9, c->suggestion_hi[i] / 1e9,
		       s->selected, s->tp + s->tn, c->labelled, s->accuracy);
	}
}

static int cmd_calibrate(struct ctl *ctl, int argc, char **argv)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__Calibrate body = PIM__CALIBRATE__INIT;
	Pim__PlacementParams params = PIM__PLACEMENT_PARAMS__INIT;
	const char *labels = NULL, *model = NULL;
	double sig[16], th[3];
	size_t n_sig = 0, n_th = 0;
	bool all = false;
	const char *svg = NULL;
	int r;

	for (int i = 0; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--labels") == 0 && v) {
			labels = v;
			i++;
		} else if (strcmp(a, "--theta") == 0 && v) {
			/* LO:HI:STEP in GB/s */
			char tmp[128];
			snprintf(tmp, sizeof tmp, "%s", v);
			for (char *c = tmp; *c; c++)
				if (*c == ':')
					*c = ',';
			if (parse_list("--theta", tmp, th, 3, &n_th) != 0 || n_th != 3 || th[0] > th[1])
				return usage_error("--theta: expected LO:HI:STEP in GB/s with LO <= HI, got '%s'", v);
			i++;
		} else if (strcmp(a, "--sigma") == 0 && v) {
			if ((r = parse_list("--sigma", v, sig, ELEMENTSOF(sig), &n_sig)))
				return r;
			i++;
		} else if (strcmp(a, "--param") == 0 && v) {
			if ((r = parse_param(&params, v)))
				return r;
			i++;
		} else if (strcmp(a, "--svg") == 0 && v) {
			svg = v;
			i++;
		} else if (strcmp(a, "--all") == 0) {
			all = true;
		} else if (a[0] == '-' && a[1]) {
			return usage_error("calibrate: unknown option or missing value '%s'", a);
		} else if (!model) {
			model = a;
		} else
			return usage_error("calibrate: unexpected argument '%s'", a);
	}
	if (!model || !labels)
		return usage_error("calibrate: expected MODEL --labels FILE");
	body.model = (char *)model;
	char *csv;
	if ((r = read_text_file(labels, 64u << 20, &csv)))
		return r;
	if ((r = connect_client(ctl))) {
		free(csv);
		return r;
	}
	body.labels_csv = csv;
	body.params = &params;
	if (n_th == 3) {
		body.theta_lo = th[0] * 1e9;
		body.theta_hi = th[1] * 1e9;
		body.theta_step = th[2] * 1e9;
	}
	body.sigmas = sig;
	body.n_sigmas = n_sig;
	req.body_case = PIM__REQUEST__BODY_CALIBRATE;
	req.calibrate = &body;
	Pim__Response *resp;
	struct ticker tick;
	ticker_start(&tick, ctl, "calibrating %s against %s", model, labels);
	r = call_body(ctl, &req, PIM__RESPONSE__BODY_CALIBRATE, &resp);
	free(csv);
	if (r)
		return r;
	const Pim__CalibrateReply *c = resp->calibrate;
	if (ctl->json) {
		json_object *o = json_object_new_object(), *pts = json_object_new_array(),
			    *sug = json_object_new_array();
		json_object_object_add(o, "labelled", json_object_new_int64(c->labelled));
		json_object_object_add(o, "beneficial", json_object_new_int64(c->beneficial));
		for (size_t i = 0; i < c->n_points; i++) {
			const Pim__CalibratePoint *p = c->points[i];
			json_object *jp = json_object_new_object();
			json_object_object_add(jp, "theta", jdouble(p->theta));
			json_object_object_add(jp, "sigma", jdouble(p->sigma));
			json_object_object_add(jp, "selected", json_object_new_int64(p->selected));
			json_object_object_add(jp, "false_positives", json_object_new_int64(p->fp));
			json_object_object_add(jp, "false_negatives", json_object_new_int64(p->fn));
			json_object_object_add(jp, "accuracy", jdouble(p->accuracy));
			json_object_array_add(pts, jp);
		}
		for (size_t i = 0; i < c->n_suggestions; i++) {
			json_object *js = json_object_new_object();
			json_object_object_add(js, "sigma", jdouble(c->suggestions[i]->sigma));
			json_object_object_add(js, "theta", jdouble(c->suggestions[i]->theta));
			json_object_object_add(js, "interval_lo", jdouble(c->suggestion_lo[i]));
			json_object_object_add(js, "interval_hi", jdouble(c->suggestion_hi[i]));
			json_object_object_add(js, "selected", json_object_new_int64(c->suggestions[i]->selected));
			json_object_object_add(js, "accuracy", jdouble(c->suggestions[i]->accuracy));
			json_object_array_add(sug, js);
		}
		json_object_object_add(o, "points", pts);
		json_object_object_add(o, "suggestions", sug);
		json_object_object_add(o, "best", json_object_new_int64(c->best));
		print_json(o);
	} else
		calibrate_print(c, model, all);
	if (svg) {
		struct drawn d = { 0 };
		r = write_svg(ctl, svg, chart_calibrate(c, model, &d.text, &d.len, &d.e), &d);
	}
	pim__response__free_unpacked(resp, NULL);
	return r;
}

/* ---------------------------------------------------------------- jitq */

static int parse_u32(const char *opt, const char *v, uint32_t *out)
{
	char *end;
	errno = 0;
	unsigned long x = strtoul(v, &end, 10);
	if (errno || *end || end == v || v[0] == '-' || x == 0 || x > UINT32_MAX)
		return usage_error("%s: '%s' is not a positive integer", opt, v);
	*out = (uint32_t)x;
	return 0;
}

static int parse_pos_double(const char *opt, const char *v, double *out)
{
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	if (errno || *end || end == v || !isfinite(x) || x <= 0)
		return usage_error("%s: '%s' is not a positive number", opt, v);
	*out = x;
	return 0;
}

/* --times FILE: one line per block, "FORWARD_SECONDS,BACKWARD_SECONDS"; '#' comments. */
static int read_times(const char *path, double **fwd, double **bwd, size_t *n)
{
	char *text;
	int r = read_text_file(path, 16u << 20, &text);
	if (r)
		return r;
	size_t cap = 0, cnt = 0;
	double *f = NULL, *b = NULL;
	unsigned lineno = 0;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		lineno++;
		while (*line == ' ' || *line == '\t')
			line++;
		if (!*line || *line == '#' || *line == '\r')
			continue;
		char *end;
		double x = strtod(line, &end), y;
		if (end == line || *end != ',' || (y = strtod(end + 1, &end), !isfinite(x) || !isfinite(y)) ||
		    x <= 0 || y <= 0 || (*end && *end != '\r' && *end != ' ')) {
			fprintf(stderr, "pimctl: %s: line %u: expected FORWARD_SECONDS,BACKWARD_SECONDS\n", path,
				lineno);
			free(text);
			free(f);
			free(b);
			return EXIT_DAEMON;
		}
		if (cnt == cap) {
			cap = cap ? cap * 2 : 64;
			double *nf = realloc(f, cap * sizeof *f), *nb = nf ? realloc(b, cap * sizeof *b) : NULL;
			if (nf)
				f = nf;
			if (!nf || !nb) {
				free(text);
				free(f);
				free(b);
				fprintf(stderr, "pimctl: out of memory\n");
				return EXIT_DAEMON;
			}
			b = nb;
		}
		f[cnt] = x;
		b[cnt++] = y;
	}
	free(text);
	*fwd = f;
	*bwd = b;
	*n = cnt;
	return EXIT_OK;
}

static json_object *jitq_json(const Pim__JitqPlanReply *r)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "model", json_object_new_string(r->model));
	json_object_object_add(o, "layers", json_object_new_int64(r->layers));
	json_object_object_add(o, "model_layers", json_object_new_int64(r->model_layers));
	json_object_object_add(o, "pipeline", json_object_new_int64(r->pipeline));
	json_object_object_add(o, "kernel", json_object_new_string(r->kernel));
	json_object_object_add(o, "pim_tck_ns", jdouble(r->pim_tck_ns));
	json_object_object_add(o, "pim_stacks", json_object_new_int64(r->pim_stacks));
	json_object_object_add(o, "format", json_object_new_string(r->format));
	json_object_object_add(o, "source", json_object_new_string(r->source));
	json_object_object_add(o, "mapping", json_object_new_string(r->mapping));
	json_object_object_add(o, "loss", jdouble(r->loss));
	json_object_object_add(o, "loss_stall", jdouble(r->loss_stall));
	json_object_object_add(o, "loss_interference", jdouble(r->loss_interference));
	json_object *phases = json_object_new_array();
	for (size_t i = 0; i < r->n_phases; i++) {
		const Pim__JitqPhase *p = r->phases[i];
		json_object *jp = json_object_new_object();
		json_object_object_add(jp, "phase", json_object_new_string(p->phase));
		json_object_object_add(jp, "lookahead", json_object_new_int64(p->lookahead));
		json_object_object_add(jp, "accel_s", jdouble(p->accel_s));
		json_object_object_add(jp, "pim_s", jdouble(p->pim_s));
		json_object_object_add(jp, "stall_s", jdouble(p->stall_s));
		json_object_object_add(jp, "pim_bound", json_object_new_boolean(p->pim_bound));
		json_object_object_add(jp, "overlap_s", jdouble(p->overlap_s));
		json_object_object_add(jp, "slack_min", jdouble(p->slack_min));
		json_object_object_add(jp, "slack_median", jdouble(p->slack_median));
		json_object_object_add(jp, "resident_bytes", json_object_new_int64((int64_t)p->resident_bytes));
		json_object *ls = json_object_new_array();
		for (size_t j = 0; j < p->n_launches; j++) {
			const Pim__JitqLaunch *l = p->launches[j];
			json_object *jl = json_object_new_object();
			json_object_object_add(jl, "block", json_object_new_int64(l->block));
			json_object_object_add(jl, "boundary", json_object_new_int64(l->boundary));
			json_object_object_add(jl, "tensor", json_object_new_string(l->tensor));
			json_object_object_add(jl, "direction", json_object_new_string(l->direction));
			json_object_object_add(jl, "rows", json_object_new_int64(l->rows));
			json_object_object_add(jl, "cols", json_object_new_int64(l->cols));
			json_object_object_add(jl, "bytes", json_object_new_int64((int64_t)l->bytes));
			json_object_object_add(jl, "pim_s", jdouble(l->pim_s));
			json_object_array_add(ls, jl);
		}
		json_object_object_add(jp, "launches", ls);
		json_object *bs = json_object_new_array();
		for (size_t j = 0; j < p->n_blocks; j++) {
			json_object *jb = json_object_new_object();
			json_object_object_add(jb, "accel_s", jdouble(p->blocks[j]->accel_s));
			json_object_object_add(jb, "pim_s", jdouble(p->blocks[j]->pim_s));
			json_object_object_add(jb, "slack", jdouble(p->blocks[j]->slack));
			json_object_object_add(jb, "stall_s", jdouble(p->blocks[j]->stall_s));
			json_object_object_add(jb, "launch_s", jdouble(p->blocks[j]->launch_s));
			json_object_object_add(jb, "ready_s", jdouble(p->blocks[j]->ready_s));
			json_object_object_add(jb, "start_s", jdouble(p->blocks[j]->start_s));
			json_object_array_add(bs, jb);
		}
		json_object_object_add(jp, "blocks", bs);
		json_object_array_add(phases, jp);
	}
	json_object_object_add(o, "phases", phases);
	if (r->capacity) {
		const Pim__JitqCapacity *c = r->capacity;
		json_object *jc = json_object_new_object();
#define CAP(f) json_object_object_add(jc, #f, json_object_new_int64((int64_t)c->f))
		CAP(params);
		CAP(params_quant);
		CAP(master);
		CAP(grads);
		CAP(optim);
		CAP(acts);
		CAP(lp_both);
		CAP(lp_one);
		CAP(lp_jitq);
		CAP(total_both);
		CAP(total_one);
		CAP(total_jitq);
		CAP(saved_vs_both);
		CAP(saved_vs_one);
#undef CAP
		json_object_object_add(jc, "pct_vs_both", jdouble(c->pct_vs_both));
		json_object_object_add(jc, "pct_vs_one", jdouble(c->pct_vs_one));
		json_object_object_add(o, "capacity", jc);
	}
	json_object *as = json_object_new_array();
	for (size_t i = 0; i < r->n_assumptions; i++)
		json_object_array_add(as, json_object_new_string(r->assumptions[i]));
	json_object_object_add(o, "assumptions", as);
	return o;
}

static int cmd_jitq_plan(struct ctl *ctl, int argc, char **argv)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__JitqPlan body = PIM__JITQ_PLAN__INIT;
	Pim__JitqModel model = PIM__JITQ_MODEL__INIT;
	double *fwd = NULL, *bwd = NULL;
	size_t n_times = 0;
	bool have_model = false;
	const char *svg = NULL;
	int r = 0;
	/* --set KEY=VALUE and the options that are shorthands for one (the daemon validates). */
	char *settings[64];
	size_t n_set = 0;

	for (int i = 0; i < argc && !r; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		bool takes = v != NULL;
		const char *set_key = NULL;
		if (strcmp(a, "--set") == 0 && takes)
			set_key = "";
		else if (strcmp(a, "--kernel") == 0 && takes)
			set_key = "kernel";
		else if (strcmp(a, "--tck") == 0 && takes)
			set_key = "tCK";
		else if (strcmp(a, "--activations") == 0 && takes)
			set_key = "activations";
		else if (strcmp(a, "--layout") == 0 && takes)
			set_key = "layout";
		if (set_key) {
			if (n_set == ELEMENTSOF(settings)) {
				r = usage_error("jitq plan: at most %zu settings", ELEMENTSOF(settings));
				break;
			}
			if (*set_key ? asprintf(&settings[n_set], "%s=%s", set_key, v) < 0
				     : !(settings[n_set] = strdup(v))) {
				fprintf(stderr, "pimctl: out of memory\n");
				r = EXIT_DAEMON;
				break;
			}
			if (!*set_key && !strchr(v, '='))
				r = usage_error("--set: '%s' is not KEY=VALUE", v);
			n_set++;
			i++;
			continue;
		}
		if (strcmp(a, "--model") == 0 && takes) {
			model.preset = (char *)v;
			have_model = true;
		} else if (strcmp(a, "--layers") == 0 && takes) {
			r = parse_u32(a, v, &model.layers);
			have_model = true;
		} else if (strcmp(a, "--hidden") == 0 && takes) {
			r = parse_u32(a, v, &model.hidden);
			have_model = true;
		} else if (strcmp(a, "--heads") == 0 && takes)
			r = parse_u32(a, v, &model.heads);
		else if (strcmp(a, "--seq") == 0 && takes)
			r = parse_u32(a, v, &model.seq);
		else if (strcmp(a, "--batch") == 0 && takes)
			r = parse_u32(a, v, &model.batch);
		else if (strcmp(a, "--tslice") == 0 && takes)
			r = parse_u32(a, v, &model.tslice);
		else if (strcmp(a, "--pipeline") == 0 && takes)
			r = parse_u32(a, v, &model.pipeline);
		else if (strcmp(a, "--preset") == 0 && takes)
			body.config = (char *)v;
		else if (strcmp(a, "--format") == 0 && takes)
			body.format = (char *)v;
		else if (strcmp(a, "--from") == 0 && takes)
			body.source = (char *)v;
		else if (strcmp(a, "--mapping") == 0 && takes)
			body.mapping = (char *)v;
		else if (strcmp(a, "--peak-flops") == 0 && takes)
			r = parse_pos_double(a, v, &body.peak_flops);
		else if (strcmp(a, "--efficiency") == 0 && takes)
			r = parse_pos_double(a, v, &body.efficiency);
		else if (strcmp(a, "--lookahead") == 0 && takes)
			r = parse_u32(a, v, &body.max_lookahead);
		else if (strcmp(a, "--stacks") == 0 && takes)
			r = parse_u32(a, v, &body.pim_stacks);
		else if (strcmp(a, "--times") == 0 && takes) {
			free(fwd);
			free(bwd);
			fwd = bwd = NULL;
			r = read_times(v, &fwd, &bwd, &n_times);
		} else if (strcmp(a, "--svg") == 0 && takes) {
			svg = v;
		} else if (strcmp(a, "--per-block") == 0) {
			body.per_block = true;
			continue;
		} else if (a[0] == '-')
			r = usage_error("jitq plan: unknown option or missing value '%s'", a);
		else
			r = usage_error("jitq plan: unexpected argument '%s'", a);
		i++;
	}
	if (!r && !have_model)
		r = usage_error("jitq plan: give --model PRESET or a custom shape (--layers, --hidden, ...)");
	if (!r)
		r = connect_client(ctl);
	if (r) {
		free(fwd);
		free(bwd);
		for (size_t i = 0; i < n_set; i++)
			free(settings[i]);
		return r;
	}
	body.settings = settings;
	body.n_settings = n_set;
	body.model = &model;
	body.fwd_times = fwd;
	body.bwd_times = bwd;
	body.n_fwd_times = body.n_bwd_times = n_times;
	req.body_case = PIM__REQUEST__BODY_JITQ_PLAN;
	req.jitq_plan = &body;
	Pim__Response *resp, *full = NULL;
	r = call_body(ctl, &req, PIM__RESPONSE__BODY_JITQ_PLAN, &resp);
	/* the chart needs every block's timeline: the same plan with its rows per block */
	if (!r && svg && body.per_block)
		full = resp;
	else if (!r && svg) {
		body.per_block = true;
		if ((r = call_body(ctl, &req, PIM__RESPONSE__BODY_JITQ_PLAN, &full)))
			pim__response__free_unpacked(resp, NULL);
	}
	free(fwd);
	free(bwd);
	for (size_t i = 0; i < n_set; i++)
		free(settings[i]);
	if (r)
		return r;
	const Pim__JitqPlanReply *p = resp->jitq_plan;
	if (ctl->json)
		print_json(jitq_json(p));
	else {
		for (size_t i = 0; i < p->n_assumptions; i++)
			if (strncmp(p->assumptions[i], "PIM:", 4) == 0 ||
			    strncmp(p->assumptions[i], "configuration:", 14) == 0)
				printf("%s\n", p->assumptions[i]);
		fputs(p->text, stdout);
	}
	if (svg) {
		struct drawn d = { 0 };
		r = write_svg(ctl, svg, chart_jitq(full->jitq_plan, &d.text, &d.len, &d.e), &d);
		if (full != resp)
			pim__response__free_unpacked(full, NULL);
	}
	pim__response__free_unpacked(resp, NULL);
	return r;
}

/* --shape ROWSxCOLS: 0, or the usage exit status. */
static int parse_shape(const char *v, uint32_t *rows, uint32_t *cols)
{
	unsigned long rr, cc;
	char x;
	int end = -1;

	if (sscanf(v, "%lu%c%lu%n", &rr, &x, &cc, &end) != 3 || x != 'x' || end != (int)strlen(v) || !rr || !cc ||
	    rr > UINT32_MAX || cc > UINT32_MAX || v[0] == '-')
		return usage_error("--shape: expected ROWSxCOLS, got '%s'", v);
	*rows = (uint32_t)rr;
	*cols = (uint32_t)cc;
	return 0;
}

/* A whole binary file of at most max bytes: 0, or the exit status after saying why. */
static int read_binary_file(const char *path, size_t max, uint8_t **out, size_t *len)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		fprintf(stderr, "pimctl: %s: %s\n", path, strerror(errno));
		return EXIT_DAEMON;
	}
	uint8_t *data = malloc(max + 1);
	size_t n = data ? fread(data, 1, max + 1, f) : 0;
	int bad = ferror(f);
	fclose(f);
	if (!data || bad || n > max) {
		free(data);
		if (data && !bad)
			fprintf(stderr, "pimctl: %s: larger than %zu MiB\n", path, max >> 20);
		else
			fprintf(stderr, "pimctl: %s: %s\n", path, data ? "cannot read" : "out of memory");
		return EXIT_DAEMON;
	}
	*out = data;
	*len = n;
	return EXIT_OK;
}

/* Sends req with the contents of path (at most 256 MiB) as its data field and waits for the
 * answer; the common half of jitq quantize and dequantize. */
static int call_with_file(struct ctl *ctl, const char *path, ProtobufCBinaryData *data,
			  Pim__Request *req, Pim__Response__BodyCase want, Pim__Response **resp)
{
	uint8_t *buf;
	size_t n;
	int r;

	if ((r = read_binary_file(path, 256u << 20, &buf, &n)))
		return r;
	if ((r = connect_client(ctl))) {
		free(buf);
		return r;
	}
	data->data = buf;
	data->len = n;
	struct ticker tick;
	ticker_start(&tick, ctl, "%s: %.1f MiB to pimd and back", path, (double)n / (1 << 20));
	r = call_body(ctl, req, want, resp);
	free(buf);
	data->data = NULL;
	data->len = 0;
	return r;
}

/* Writes a reply's data to path: 0, or EXIT_DAEMON with the error printed. */
static int write_output(const char *path, const ProtobufCBinaryData *data)
{
	FILE *o = fopen(path, "we");
	if (!o || fwrite(data->data, 1, data->len, o) != data->len || fclose(o) != 0) {
		fprintf(stderr, "pimctl: %s: %s\n", path, strerror(errno));
		return EXIT_DAEMON;
	}
	return 0;
}


static int cmd_jitq_quantize(struct ctl *ctl, int argc, char **argv)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__JitqQuantize body = PIM__JITQ_QUANTIZE__INIT;
	const char *pos[2];
	int npos = 0, r = 0;
	bool have_shape = false;

	for (int i = 0; i < argc && !r; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--format") == 0 && v)
			body.format = (char *)v;
		else if (strcmp(a, "--from") == 0 && v)
			body.source = (char *)v;
		else if (strcmp(a, "--direction") == 0 && v)
			body.direction = (char *)v;
		else if (strcmp(a, "--engine") == 0 && v)
			body.engine = (char *)v;
		else if (strcmp(a, "--kernel") == 0 && v)
			body.kernel = (char *)v;
		else if (strcmp(a, "--shape") == 0 && v) {
			r = parse_shape(v, &body.rows, &body.cols);
			have_shape = true;
		} else if (a[0] == '-' && a[1]) {
			r = usage_error("jitq quantize: unknown option or missing value '%s'", a);
			continue;
		} else {
			if (npos == 2)
				r = usage_error("jitq quantize: unexpected argument '%s'", a);
			else
				pos[npos++] = a;
			continue;
		}
		i++;
	}
	if (r)
		return r;
	if (npos != 2 || !have_shape)
		return usage_error("jitq quantize: expected --shape ROWSxCOLS IN OUT");
	req.body_case = PIM__REQUEST__BODY_JITQ_QUANTIZE;
	req.jitq_quantize = &body;
	Pim__Response *resp;
	r = call_with_file(ctl, pos[0], &body.data, &req, PIM__RESPONSE__BODY_JITQ_QUANTIZE, &resp);
	if (r)
		return r;
	const Pim__JitqQuantizeReply *q = resp->jitq_quantize;
	if ((r = write_output(pos[1], &q->data))) {
		pim__response__free_unpacked(resp, NULL);
		return r;
	}
	if (ctl->json) {
		json_object *jo = json_object_new_object();
		json_object_object_add(jo, "output", json_object_new_string(pos[1]));
		json_object_object_add(jo, "bytes", json_object_new_int64((int64_t)q->data.len));
		json_object_object_add(jo, "blocks", json_object_new_int64((int64_t)q->blocks));
		json_object_object_add(jo, "engine", json_object_new_string(q->engine));
		if (strcmp(q->engine, "reference") != 0) {
			json_object_object_add(jo, "pim_time_ns", jdouble(q->pim_time_ns));
			json_object_object_add(jo, "pim_commands", json_object_new_int64((int64_t)q->pim_commands));
		}
		print_json(jo);
	} else {
		printf("Wrote %zu bytes (%" PRIu64 " MX blocks) to %s with the %s engine", q->data.len,
		       q->blocks, pos[1], q->engine);
		if (strcmp(q->engine, "reference") != 0)
			printf("; PIM model %.1f us, %" PRIu64 " commands, output identical to the reference",
			       q->pim_time_ns / 1e3, q->pim_commands);
		printf("\n");
	}
	pim__response__free_unpacked(resp, NULL);
	return EXIT_OK;
}

static int cmd_jitq_dequantize(struct ctl *ctl, int argc, char **argv)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__JitqDequantize body = PIM__JITQ_DEQUANTIZE__INIT;
	const char *pos[2];
	int npos = 0, r = 0;
	bool have_shape = false;

	for (int i = 0; i < argc && !r; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--format") == 0 && v)
			body.format = (char *)v;
		else if (strcmp(a, "--direction") == 0 && v)
			body.direction = (char *)v;
		else if (strcmp(a, "--shape") == 0 && v) {
			r = parse_shape(v, &body.rows, &body.cols);
			have_shape = true;
		} else if (a[0] == '-' && a[1]) {
			r = usage_error("jitq dequantize: unknown option or missing value '%s'", a);
			continue;
		} else {
			if (npos == 2)
				r = usage_error("jitq dequantize: unexpected argument '%s'", a);
			else
				pos[npos++] = a;
			continue;
		}
		i++;
	}
	if (r)
		return r;
	if (npos != 2 || !have_shape)
		return usage_error("jitq dequantize: expected --shape ROWSxCOLS IN OUT");
	req.body_case = PIM__REQUEST__BODY_JITQ_DEQUANTIZE;
	req.jitq_dequantize = &body;
	Pim__Response *resp;
	r = call_with_file(ctl, pos[0], &body.data, &req, PIM__RESPONSE__BODY_JITQ_DEQUANTIZE, &resp);
	if (r)
		return r;
	const Pim__JitqDequantizeReply *q = resp->jitq_dequantize;
	if ((r = write_output(pos[1], &q->data))) {
		pim__response__free_unpacked(resp, NULL);
		return r;
	}
	if (ctl->json) {
		json_object *jo = json_object_new_object();
		json_object_object_add(jo, "output", json_object_new_string(pos[1]));
		json_object_object_add(jo, "bytes", json_object_new_int64((int64_t)q->data.len));
		json_object_object_add(jo, "blocks", json_object_new_int64((int64_t)q->blocks));
		json_object_object_add(jo, "nan_blocks", json_object_new_int64((int64_t)q->nan_blocks));
		print_json(jo);
	} else {
		printf("Wrote %zu bytes (%u x %u FP32) from %" PRIu64 " MX blocks to %s", q->data.len, body.rows,
		       body.cols, q->blocks, pos[1]);
		if (q->nan_blocks)
			printf("; %" PRIu64 " NaN blocks", q->nan_blocks);
		printf("\n");
	}
	pim__response__free_unpacked(resp, NULL);
	return EXIT_OK;
}

/* ---------------------------------------------------------------- profile */

static json_object *job_json(const struct pim_profile_job *j)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "job", json_object_new_int64((int64_t)j->id));
	json_object_object_add(o, "state", json_object_new_string(j->state));
	json_object_object_add(o, "model", json_object_new_string(j->model));
	json_object_object_add(o, "backend", json_object_new_string(j->backend));
	json_object_object_add(o, "backend_reason", json_object_new_string(j->backend_reason));
	json_object_object_add(o, "regions_done", json_object_new_int64(j->regions_done));
	json_object_object_add(o, "regions_total", json_object_new_int64(j->regions_total));
	json_object_object_add(o, "repetitions_done", json_object_new_int64((int64_t)j->repetitions_done));
	json_object_object_add(o, "repetitions_total", json_object_new_int64((int64_t)j->repetitions_total));
	json_object_object_add(o, "samples", json_object_new_int64((int64_t)j->samples));
	json_object_object_add(o, "uid", json_object_new_int64(j->uid));
	json_object_object_add(o, "message", json_object_new_string(j->message));
	return o;
}

static bool job_finished(const struct pim_profile_job *j)
{
	return strcmp(j->state, "done") == 0 || strcmp(j->state, "failed") == 0 ||
	       strcmp(j->state, "cancelled") == 0;
}

/* The progress line of a profiling job: its state, regions and repetitions done, and how long
 * its worker has run against its timeout (or how long it has waited in the queue). */
static void progress_job(struct progress *p, const Pim__ProfileReply *q)
{
	char limit[64] = "";
	if (q->timeout_ms)
		snprintf(limit, sizeof limit, " of its %.4g s timeout", q->timeout_ms / 1e3);
	if (strcmp(q->state, "running") == 0)
		progress_show(p, "job %" PRIu64 " running: regions %u/%u, repetitions %" PRIu64 "/%" PRIu64
			      ", %.1f s%s", q->job, q->regions_done, q->regions_total, q->repetitions_done,
			      q->repetitions_total, q->running_ms / 1e3, limit);
	else
		progress_show(p, "job %" PRIu64 " %s: waiting %.1f s for a worker", q->job, q->state,
			      progress_elapsed(p));
}

/* Polls until the job ends, with a progress line on a terminal; the exit status says how it
 * ended.  The polls ask for the reply itself (its timeout and run time are not in
 * struct pim_profile_job); the job's last state then comes through libpimclient. */
static int profile_wait(struct ctl *ctl, struct pim_profile_job *j)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__ProfileStatus body = PIM__PROFILE_STATUS__INIT;
	struct progress p;
	int r = 0;

	progress_init(&p, ctl);
	body.job = j->id;
	req.body_case = PIM__REQUEST__BODY_PROFILE_STATUS;
	req.profile_status = &body;
	for (bool end = job_finished(j); !end;) {
		Pim__Response *resp;
		if ((r = call_body(ctl, &req, PIM__RESPONSE__BODY_PROFILE, &resp)))
			break;
		end = strcmp(resp->profile->state, "done") == 0 || strcmp(resp->profile->state, "failed") == 0 ||
		      strcmp(resp->profile->state, "cancelled") == 0;
		if (!end)
			progress_job(&p, resp->profile);
		pim__response__free_unpacked(resp, NULL);
		if (!end)
			usleep(100000);
	}
	progress_end(&p);
	if (r)
		return r;
	if ((r = pim_profile_status(ctl->client, j->id, j)) < 0)
		return request_failed(ctl, r);
	return EXIT_OK;
}

static void job_print(const struct pim_profile_job *j)
{
	printf("Profile job %" PRIu64 " of %s: %s", j->id, j->model, j->state);
	if (job_finished(j))
		printf(" (%s backend, as uid %u): %s\n", j->backend, j->uid, j->message);
	else
		printf(", repetitions %" PRIu64 "/%" PRIu64 "; poll with: pimctl profile --status %" PRIu64 "\n",
		       j->repetitions_done, j->repetitions_total, j->id);
	if (job_finished(j))
		printf("  regions with metrics %u/%u, %" PRIu64 " samples stored\n", j->regions_done,
		       j->regions_total, j->samples);
	if (strcmp(j->backend, "timing") == 0 && j->backend_reason[0])
		printf("  %s\n", j->backend_reason);
}

static int cmd_profile(struct ctl *ctl, int argc, char **argv)
{
	struct pim_profile_options opt = { 0 };
	struct pim_profile_job job;
	const char *model = NULL, *library = NULL;
	uint32_t regions[1024];
	int wait = -1; /* default: wait for a new job, not for --status */
	bool have_status = false, cancel = false;
	uint64_t status_id = 0;
	int r = 0;

	for (int i = 0; i < argc && !r; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--library") == 0 && v)
			library = v;
		else if (strcmp(a, "--reps") == 0 && v)
			r = parse_u32(a, v, &opt.repetitions);
		else if (strcmp(a, "--warmups") == 0 && v)
			r = parse_u32(a, v, &opt.warmups);
		else if (strcmp(a, "--timeout-ms") == 0 && v)
			r = parse_u32(a, v, &opt.timeout_ms);
		else if (strcmp(a, "--regions") == 0 && v) {
			char buf[8192];
			snprintf(buf, sizeof buf, "%s", v);
			size_t k = 0;
			for (char *t = strtok(buf, ","); t && !r; t = strtok(NULL, ","), k++) {
				char *end;
				errno = 0;
				unsigned long x = strtoul(t, &end, 10);
				if (errno || *end || end == t || t[0] == '-' || x > UINT32_MAX || k == 1024)
					r = usage_error("--regions: '%s' is not a list of region ids", v);
				else
					regions[k] = (uint32_t)x;
			}
			if (k == 0)
				r = usage_error("--regions: empty list (leave the option out to measure every region)");
			opt.regions = regions;
			opt.n_regions = k;
		} else if ((strcmp(a, "--status") == 0 || strcmp(a, "--cancel") == 0) && v) {
			char *end;
			errno = 0;
			status_id = strtoull(v, &end, 10);
			if (errno || *end || end == v || v[0] == '-')
				r = usage_error("%s: '%s' is not a job id", a, v);
			if (have_status)
				r = usage_error("profile: --status and --cancel name one job, once");
			have_status = true;
			cancel = strcmp(a, "--cancel") == 0;
		} else if (strcmp(a, "--no-wait") == 0) {
			wait = 0;
			continue;
		} else if (strcmp(a, "--wait") == 0) {
			wait = 1;
			continue;
		} else if (a[0] == '-') {
			r = usage_error("profile: unknown option or missing value '%s'", a);
			continue;
		} else if (!model) {
			model = a;
			continue;
		} else {
			r = usage_error("profile: unexpected argument '%s'", a);
			continue;
		}
		i++;
	}
	if (r)
		return r;
	if (wait < 0)
		wait = !have_status;
	if (have_status) {
		if (model || library || opt.repetitions || opt.warmups || opt.timeout_ms || opt.regions)
			return usage_error("profile %s JOB takes only --wait or --no-wait",
					   cancel ? "--cancel" : "--status");
		if ((r = connect_client(ctl)))
			return r;
		if ((r = cancel ? pim_profile_cancel(ctl->client, status_id, &job)
				: pim_profile_status(ctl->client, status_id, &job)) < 0)
			return request_failed(ctl, r);
	} else {
		if (!model || !library)
			return usage_error("profile: expected MODEL --library PATH");
		/* The library goes to pimd as an open descriptor: pimd never opens our paths. */
		int fd = open(library, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			fprintf(stderr, "pimctl: %s: %s\n", library, strerror(errno));
			return EXIT_DAEMON;
		}
		if ((r = connect_client(ctl))) {
			close(fd);
			return r;
		}
		r = pim_profile_start(ctl->client, model, fd, &opt, &job);
		close(fd);
		if (r < 0)
			return request_failed(ctl, r);
		if (!wait) {
			if (ctl->json)
				print_json(job_json(&job));
			else
				job_print(&job);
			return EXIT_OK;
		}
	}
	if (wait && (r = profile_wait(ctl, &job)))
		return r;
	if (ctl->json)
		print_json(job_json(&job));
	else
		job_print(&job);
	/* (a job waited for that failed or was cancelled did not run: an error; --cancel that
	 * cancelled it went well) */
	return (strcmp(job.state, "failed") == 0 || strcmp(job.state, "cancelled") == 0) && !cancel ?
		       EXIT_DAEMON : EXIT_OK;
}

static int run_model(struct ctl *ctl, int argc, char **argv)
{
	if (argc < 1)
		return usage_error("model: missing subcommand (load, list, show, rm)");
	const char *sub = argv[0];
	if (strcmp(sub, "load") == 0) {
		bool replace = false;
		const char *file = NULL;
		for (int i = 1; i < argc; i++) {
			if (strcmp(argv[i], "--replace") == 0)
				replace = true;
			else if (argv[i][0] == '-' && argv[i][1])
				return usage_error("model load: unknown option '%s'", argv[i]);
			else if (file)
				return usage_error("model load: unexpected argument '%s'", argv[i]);
			else
				file = argv[i];
		}
		if (!file)
			return usage_error("model load: missing FILE");
		return cmd_model_load(ctl, file, replace);
	}
	if (strcmp(sub, "list") == 0 || strcmp(sub, "ls") == 0) {
		if (argc > 1)
			return usage_error("model list: unexpected argument '%s'", argv[1]);
		int r = connect_client(ctl);
		return r ? r : cmd_model_list(ctl);
	}
	if (strcmp(sub, "show") == 0 || strcmp(sub, "rm") == 0 || strcmp(sub, "remove") == 0) {
		if (argc != 2)
			return usage_error("model %s: expected exactly one NAME", sub);
		int r = connect_client(ctl);
		if (r)
			return r;
		return strcmp(sub, "show") == 0 ? cmd_model_show(ctl, argv[1]) : cmd_model_rm(ctl, argv[1]);
	}
	return usage_error("model: unknown subcommand '%s' (load, list, show, rm)", sub);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	struct ctl ctl = { 0 };
	int c, r;

	/* --json and --socket are global: accepted after the command too (pimctl placement m --json). */
	int k = 1;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0 || strcmp(argv[i], "-j") == 0) {
			ctl.json = true;
			continue;
		}
		if ((strcmp(argv[i], "--socket") == 0 || strcmp(argv[i], "-s") == 0) && i + 1 < argc) {
			ctl.socket = argv[++i];
			continue;
		}
		if (strncmp(argv[i], "--socket=", 9) == 0) {
			ctl.socket = argv[i] + 9;
			continue;
		}
		argv[k++] = argv[i];
	}
	argc = k;
	argv[argc] = NULL;
	/* '+': stop at the command so its own options (model load --replace) pass through. */
	while ((c = getopt_long(argc, argv, "+s:jhV", opts, NULL)) != -1) {
		switch (c) {
		case 's': ctl.socket = optarg; break;
		case 'j': ctl.json = true; break;
		case 'h': usage(stdout); return EXIT_OK;
		case 'V': printf("pimctl %s\n", PIMD_VERSION); return EXIT_OK;
		default:
			fprintf(stderr, "Try 'pimctl --help'.\n");
			return EXIT_USAGE;
		}
	}
	if (optind >= argc)
		return usage_error("missing command");
	const char *cmd = argv[optind];
	argc -= optind + 1;
	argv += optind + 1;
	if (strcmp(cmd, "status") == 0) {
		if (argc > 0)
			return usage_error("status: unexpected argument '%s'", argv[0]);
		r = connect_client(&ctl);
		if (r == EXIT_OK)
			r = cmd_status(&ctl);
	} else if (strcmp(cmd, "platform") == 0) {
		if (argc < 1 || strcmp(argv[0], "probe") != 0)
			return usage_error("platform: unknown or missing subcommand%s%s (probe)",
					   argc ? " " : "", argc ? argv[0] : "");
		if (argc > 1)
			return usage_error("platform probe: unexpected argument '%s'", argv[1]);
		r = connect_client(&ctl);
		if (r == EXIT_OK)
			r = cmd_platform_probe(&ctl);
	} else if (strcmp(cmd, "model") == 0) {
		r = run_model(&ctl, argc, argv);
	} else if (strcmp(cmd, "catalogue") == 0) {
		r = run_catalogue(&ctl, argc, argv);
	} else if (strcmp(cmd, "profile") == 0) {
		r = cmd_profile(&ctl, argc, argv);
	} else if (strcmp(cmd, "placement") == 0) {
		r = cmd_placement(&ctl, argc, argv);
	} else if (strcmp(cmd, "import-perf") == 0) {
		r = cmd_import_perf(&ctl, argc, argv);
	} else if (strcmp(cmd, "calibrate") == 0) {
		r = cmd_calibrate(&ctl, argc, argv);
	} else if (strcmp(cmd, "jitq") == 0) {
		if (argc >= 1 && strcmp(argv[0], "plan") == 0)
			r = cmd_jitq_plan(&ctl, argc - 1, argv + 1);
		else if (argc >= 1 && strcmp(argv[0], "quantize") == 0)
			r = cmd_jitq_quantize(&ctl, argc - 1, argv + 1);
		else if (argc >= 1 && strcmp(argv[0], "dequantize") == 0)
			r = cmd_jitq_dequantize(&ctl, argc - 1, argv + 1);
		else
			r = usage_error("jitq: expected plan, quantize or dequantize");
	} else if (strcmp(cmd, "help") == 0) {
		usage(stdout);
		r = EXIT_OK;
	} else
		r = usage_error("unknown command '%s'", cmd);
	pim_client_free(ctl.client);
	return r;
}
