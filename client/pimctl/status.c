/* SPDX-License-Identifier: MIT */
/* pimctl status, platform probe and catalogue: the daemon, its B_cpu and the fleet catalogue. */
#include "pimctl.h"

static int cmd_status(struct ctl *ctl)
{
	struct pim_daemon_status *st;
	int r = pim_status_get(ctl->client, &st);

	if (r < 0)
		return request_failed(ctl, r);
	const struct pim_bandwidth_probe *probe = st->b_cpu_probe.source ? &st->b_cpu_probe : NULL;
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
		if (probe)
			json_object_object_add(o, "b_cpu_probe", b_cpu_json(probe));
		json_object_object_add(o, "profile_jobs", json_object_new_int64(st->profile_jobs));
		json_object_object_add(o, "containment", json_object_new_string(st->containment));
		json_object_object_add(o, "socket", json_object_new_string(pim_client_socket_path(ctl->client)));
		print_json(o);
		pim_daemon_status_free(st);
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
	b_cpu_print(probe, "              ");
	printf("  jobs:       %u profiling jobs queued or running\n", st->profile_jobs);
	printf("  contained:  %s\n", st->containment);
	pim_daemon_status_free(st);
	return EXIT_OK;
}

/* pimctl platform probe: B_cpu measured again (root or pimd's user). */
/* ---------------------------------------------------------------- the fleet catalogue */

static json_object *catalogue_status_json(const struct pim_catalogue_status *r)
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

static void catalogue_status_print(const struct pim_catalogue_status *r)
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
	struct pim_catalogue_status *cs;
	int r = pim_catalogue_status_get(ctl->client, &cs);

	if (r < 0)
		return request_failed(ctl, r);
	if (ctl->json)
		print_json(catalogue_status_json(cs));
	else if (!cs->configured)
		printf("No fleet catalogue is configured (pimd.conf(5): catalogue)\n");
	else
		catalogue_status_print(cs);
	r = cs->configured && cs->reachable ? EXIT_OK : EXIT_DAEMON;
	pim_catalogue_status_free(cs);
	return r;
}

static int cmd_catalogue_list(struct ctl *ctl, unsigned limit)
{
	struct pim_catalogue_list *l;
	char when[40];
	int r = pim_catalogue_list_get(ctl->client, limit, &l);

	if (r < 0)
		return request_failed(ctl, r);
	if (ctl->json) {
		json_object *o = json_object_new_object(), *a = json_object_new_array();
		for (size_t i = 0; i < l->n_entries; i++) {
			const struct pim_catalogue_entry *e = &l->entries[i];
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
			const struct pim_catalogue_entry *e = &l->entries[i];
			printf("%-24s %-12.12s %6u %5u %7u %8u  %-20.20s %s%s\n", tty(e->model_name), e->model_hash,
			       e->hosts, e->runs, e->imports, e->regions, when_text(e->last_measured_at, when, sizeof when),
			       tty(e->platform_key), strcmp(e->platform_key, l->platform_key) == 0 ? " (this host's)" : "");
		}
		if (l->truncated)
			printf("(more rows: --limit)\n");
	}
	pim_catalogue_list_free(l);
	return EXIT_OK;
}

static int cmd_platform_probe(struct ctl *ctl)
{
	struct pim_probe_result *pr;
	struct ticker t;
	int r;

	ticker_start(&t, ctl, "measuring B_cpu");
	r = pim_platform_probe(ctl->client, &pr);
	ctl_ticker_end(ctl);
	if (r < 0)
		return request_failed(ctl, r);
	const struct pim_bandwidth_probe *was = pr->previous.source ? &pr->previous : NULL;
	const struct pim_bandwidth_probe *now = pr->probe.source ? &pr->probe : NULL;
	if (ctl->json) {
		json_object *o = json_object_new_object();
		if (was)
			json_object_object_add(o, "previous", b_cpu_json(was));
		if (now)
			json_object_object_add(o, "probe", b_cpu_json(now));
		print_json(o);
	} else if (now) {
		printf("B_cpu measured: %.2f GB/s", now->measured / 1e9);
		if (was && was->measured > 0)
			printf(" (was %.2f GB/s, %+.1f%%)", was->measured / 1e9,
			       100 * (now->measured / was->measured - 1));
		printf("\n");
		b_cpu_print(now, "  ");
	}
	pim_probe_result_free(pr);
	return EXIT_OK;
}


int run_status(struct ctl *ctl, int argc, char **argv)
{
	int r = cmd_no_args("status", argc, argv);
	return r ? r : (r = connect_client(ctl)) ? r : cmd_status(ctl);
}

int run_platform(struct ctl *ctl, int argc, char **argv)
{
	int r;

	if (argc < 2 || strcmp(argv[1], "probe") != 0)
		return usage_error("platform: unknown or missing subcommand%s%s (probe)", argc > 1 ? " " : "",
				   argc > 1 ? argv[1] : "");
	if ((r = cmd_no_args("platform probe", argc - 1, argv + 1)))
		return r;
	return (r = connect_client(ctl)) ? r : cmd_platform_probe(ctl);
}

int run_catalogue(struct ctl *ctl, int argc, char **argv)
{
	static const struct option list_opts[] = { { "limit", required_argument, NULL, 'l' }, { 0 } };
	unsigned limit = 0;
	const char *v;
	int opt, r;

	if (argc < 2 || (strcmp(argv[1], "status") != 0 && strcmp(argv[1], "list") != 0))
		return usage_error("catalogue: unknown or missing subcommand%s%s (status, list)", argc > 1 ? " " : "",
				   argc > 1 ? argv[1] : "");
	if (strcmp(argv[1], "status") == 0) {
		if ((r = cmd_no_args("catalogue status", argc - 1, argv + 1)))
			return r;
		return (r = connect_client(ctl)) ? r : cmd_catalogue_status(ctl);
	}
	struct cmd_getopt g = { .name = "catalogue list", .argc = argc - 1, .argv = argv + 1, .opts = list_opts };
	while ((opt = cmd_getopt(&g, &v)) != -1) {
		char *end;
		if (opt < 0)
			return -opt;
		if (opt == 0)
			return usage_error("catalogue list: unexpected argument '%s'", v);
		errno = 0;
		unsigned long x = strtoul(v, &end, 10);
		if (errno || *end || end == v || v[0] == '-' || x == 0 || x > 10000)
			return usage_error("catalogue list: --limit takes 1..10000");
		limit = (unsigned)x;
	}
	return (r = connect_client(ctl)) ? r : cmd_catalogue_list(ctl, limit);
}
