/* SPDX-License-Identifier: MIT */
/* pimctl model: load, list, show and remove models. */
#include "pimctl.h"

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
			json_object_object_add(jm, "evidence", json_object_new_string(evidence_name((enum pim_evidence)x->evidence)));
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
		       x ? evidence_name((enum pim_evidence)x->evidence) : "-");
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


/* model show NAME, model rm NAME: exactly one NAME, no options. */
static int one_name(const char *name, int argc, char **argv, const char **out)
{
	static const struct option none[] = { { 0 } };
	struct cmd_getopt g = { .name = name, .argc = argc, .argv = argv, .opts = none };
	const char *v;
	int opt, n = 0;

	while ((opt = cmd_getopt(&g, &v)) != -1) {
		if (opt < 0)
			return -opt;
		*out = v;
		n++;
	}
	return n == 1 ? 0 : usage_error("%s: expected exactly one NAME", name);
}

int run_model(struct ctl *ctl, int argc, char **argv)
{
	static const struct option load_opts[] = { { "replace", no_argument, NULL, 'r' }, { 0 } };
	const char *sub = argc > 1 ? argv[1] : NULL, *v, *name = NULL;
	int opt, r;

	if (!sub)
		return usage_error("model: missing subcommand (load, list, show, rm)");
	argc--;
	argv++;
	if (strcmp(sub, "load") == 0) {
		struct cmd_getopt g = { .name = "model load", .argc = argc, .argv = argv, .opts = load_opts };
		bool replace = false;
		const char *file = NULL;
		while ((opt = cmd_getopt(&g, &v)) != -1) {
			if (opt < 0)
				return -opt;
			if (opt == 'r')
				replace = true;
			else if (file)
				return usage_error("model load: unexpected argument '%s'", v);
			else
				file = v;
		}
		if (!file)
			return usage_error("model load: missing FILE");
		return cmd_model_load(ctl, file, replace);
	}
	if (strcmp(sub, "list") == 0 || strcmp(sub, "ls") == 0) {
		if ((r = cmd_no_args("model list", argc, argv)))
			return r;
		return (r = connect_client(ctl)) ? r : cmd_model_list(ctl);
	}
	if (strcmp(sub, "show") == 0) {
		if ((r = one_name("model show", argc, argv, &name)))
			return r;
		return (r = connect_client(ctl)) ? r : cmd_model_show(ctl, name);
	}
	if (strcmp(sub, "rm") == 0 || strcmp(sub, "remove") == 0) {
		if ((r = one_name("model rm", argc, argv, &name)))
			return r;
		return (r = connect_client(ctl)) ? r : cmd_model_rm(ctl, name);
	}
	return usage_error("model: unknown subcommand '%s' (load, list, show, rm)", sub);
}
