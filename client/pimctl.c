/* SPDX-License-Identifier: MIT */
/*
 * pimctl: the command line of pimd.  See pimctl(1).
 * Exit status: 0 success, 1 the request failed (pimd refused it, or the input file is invalid),
 * 2 usage error, 3 pimd could not be reached or the connection broke.
 */
#include <getopt.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "manifest.h"
#include "pim.h"

enum { EXIT_OK = 0, EXIT_DAEMON = 1, EXIT_USAGE = 2, EXIT_CONNECT = 3 };

struct ctl {
	const char *socket;
	bool json;
	pim_client *client;
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: pimctl [--socket PATH] [--json] COMMAND [ARG]...\n"
		"Command line of pimd, the PIM placement service.\n\n"
		"Commands:\n"
		"  status                    daemon version, uptime, clients, models, store\n"
		"  model load FILE [--replace]\n"
		"                            load a manifest (JSON or protobuf binary)\n"
		"  model list                list loaded models\n"
		"  model show NAME           show a model's allocations and regions\n"
		"  model rm NAME             remove a model\n\n"
		"Options:\n"
		"  -s, --socket PATH  pimd's socket (default $%s, else %s)\n"
		"  -j, --json         print JSON instead of tables\n"
		"  -h, --help         show this help\n"
		"  -V, --version      show the version\n\n"
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

static int connect_client(struct ctl *ctl)
{
	ctl->client = pim_client_new();
	if (!ctl->client) {
		fprintf(stderr, "pimctl: out of memory\n");
		return EXIT_CONNECT;
	}
	int r = pim_client_connect(ctl->client, ctl->socket, "pimctl");
	if (r < 0) {
		fprintf(stderr, "pimctl: %s\n", pim_client_error(ctl->client));
		/* pimd answered but refused (too many clients, protocol version): a daemon error */
		return pim_client_remote_error(ctl->client) ? EXIT_DAEMON : EXIT_CONNECT;
	}
	return EXIT_OK;
}

/* A failed request: pimd refused it or it was invalid here (1), or the connection broke (3). */
static int request_failed(struct ctl *ctl, int r)
{
	fprintf(stderr, "pimctl: %s\n", pim_client_error(ctl->client));
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

static int cmd_status(struct ctl *ctl)
{
	struct pim_status st;

	int r = pim_status(ctl->client, &st);
	if (r < 0)
		return request_failed(ctl, r);
	if (ctl->json) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "server_version", json_object_new_string(st.server_version));
		json_object_object_add(o, "protocol_version", json_object_new_int64(st.protocol_version));
		json_object_object_add(o, "uptime_ms", json_object_new_int64((int64_t)st.uptime_ms));
		json_object_object_add(o, "clients", json_object_new_int64(st.clients));
		json_object_object_add(o, "models", json_object_new_int64(st.models));
		json_object_object_add(o, "requests", json_object_new_int64((int64_t)st.requests));
		json_object_object_add(o, "database", json_object_new_string(st.database));
		json_object_object_add(o, "schema_version", json_object_new_int64(st.schema_version));
		json_object_object_add(o, "max_frame_bytes", json_object_new_int64(st.max_frame_bytes));
		json_object_object_add(o, "pid", json_object_new_int64(st.pid));
		json_object_object_add(o, "socket", json_object_new_string(pim_client_socket_path(ctl->client)));
		print_json(o);
		return EXIT_OK;
	}
	printf("pimd %s (protocol %u), pid %u\n", st.server_version, st.protocol_version, st.pid);
	printf("  socket:     %s\n", pim_client_socket_path(ctl->client));
	printf("  uptime:     %" PRIu64 ".%03" PRIu64 " s\n", st.uptime_ms / 1000, st.uptime_ms % 1000);
	printf("  clients:    %u\n", st.clients);
	printf("  requests:   %" PRIu64 "\n", st.requests);
	printf("  models:     %u\n", st.models);
	printf("  database:   %s (schema %u)\n", st.database, st.schema_version);
	printf("  max frame:  %u bytes\n", st.max_frame_bytes);
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
		fprintf(stderr, "pimctl: %s\n", err.msg);
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
		       info.name, info.regions, info.allocations);
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
			printf("%-24s %8u %8u %12s %6u  %s\n", v[i].name, v[i].regions, v[i].allocations, b,
			       v[i].owner_uid, t);
		}
	}
	free(v);
	return EXIT_OK;
}

static int cmd_model_show(struct ctl *ctl, const char *name)
{
	struct pim_model_info info;
	void *buf;
	size_t len;
	Pim__Manifest *m;

	int r = pim_model_show(ctl->client, name, &info, &buf, &len);
	if (r < 0)
		return request_failed(ctl, r);
	m = pim__manifest__unpack(NULL, len, buf);
	free(buf);
	if (!m) {
		fprintf(stderr, "pimctl: pimd sent a manifest that does not decode\n");
		return EXIT_CONNECT;
	}
	if (ctl->json) {
		json_object *o = model_info_json(&info);
		json_object_object_add(o, "manifest", manifest_to_json(m));
		print_json(o);
		pim__manifest__free_unpacked(m, NULL);
		return EXIT_OK;
	}
	char b[32], t[32];
	human_bytes(b, sizeof b, info.allocation_bytes);
	format_time(t, sizeof t, info.loaded_at);
	printf("Model %s\n  source:      %s\n  loaded:      %s by uid %u\n  regions:     %u\n"
	       "  allocations: %u (%s)\n\n", info.name, *info.source ? info.source : "-", t,
	       info.owner_uid, info.regions, info.allocations, b);
	printf("%6s %-8s %12s  %s\n", "ALLOC", "KIND", "BYTES", "NAME");
	for (size_t i = 0; i < m->n_allocations; i++) {
		const Pim__Allocation *a = m->allocations[i];
		printf("%6u %-8s %12" PRIu64 "  %s\n", a->id, manifest_alloc_kind_name(a->kind), a->bytes,
		       *a->name ? a->name : "-");
	}
	printf("\n%5s %6s %-20s %-22s %12s %14s %8s  %s\n", "ORDER", "REGION", "NAME", "OP", "N_PAR",
	       "N_TOTAL", "TRIP", "OPERANDS (alloc:role:bytes)");
	for (size_t i = 0; i < m->n_regions; i++) {
		const Pim__Region *g = m->regions[i];
		printf("%5u %6u %-20.20s %-22.22s %12" PRIu64 " %14" PRIu64 " %8" PRIu64 " ", g->order, g->id,
		       g->name, g->op, g->n_par, g->n_total, g->trip ? g->trip : 1);
		for (size_t j = 0; j < g->n_operands; j++)
			printf(" %u:%s:%" PRIu64, g->operands[j]->allocation_id,
			       manifest_role_name(g->operands[j]->role), g->operands[j]->bytes);
		printf("\n");
	}
	pim__manifest__free_unpacked(m, NULL);
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
		printf("Removed model %s\n", name);
	return EXIT_OK;
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
	} else if (strcmp(cmd, "model") == 0) {
		r = run_model(&ctl, argc, argv);
	} else if (strcmp(cmd, "help") == 0) {
		usage(stdout);
		r = EXIT_OK;
	} else
		r = usage_error("unknown command '%s'", cmd);
	pim_client_free(ctl.client);
	return r;
}
