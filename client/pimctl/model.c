/* SPDX-License-Identifier: MIT */
/* pimctl model: load, list, show and remove models. */
#include "pimctl.h"

static int cmd_model_load(struct ctl *ctl, const char *path, bool replace)
{
	struct pim_model_loaded *l;
	int r;

	/* The library reads and validates the file before anything is sent: a clear message
	 * naming the field, without a round trip. */
	if ((r = connect_client(ctl)) != EXIT_OK)
		return r;
	r = pim_model_load_file(ctl->client, path, replace ? PIM_LOAD_REPLACE : 0, &l);
	if (r < 0)
		return request_failed(ctl, r);
	if (ctl->json) {
		json_object *o = model_info_json(&l->info);
		json_object_object_add(o, "replaced", json_object_new_boolean(l->replaced));
		print_json(o);
	} else
		printf("%s model %s: %u regions, %u allocations\n", l->replaced ? "Replaced" : "Loaded",
		       tty(l->info.name), l->info.regions, l->info.allocations);
	pim_model_loaded_free(l);
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

/* The names of the manifest's JSON form (pimd(8), MANIFEST). */
static const char *kind_name(enum pim_alloc_kind k)
{
	switch (k) {
	case PIM_ALLOC_ARGUMENT: return "argument";
	case PIM_ALLOC_ALLOC: return "alloc";
	case PIM_ALLOC_GLOBAL: return "global";
	default: return "unspecified";
	}
}

static const char *role_name(enum pim_operand_role r)
{
	switch (r) {
	case PIM_ROLE_IN: return "in";
	case PIM_ROLE_OUT: return "out";
	case PIM_ROLE_INOUT: return "inout";
	default: return "unspecified";
	}
}

static int show_json(const struct pim_model_detail *d)
{
	/* the manifest as common/manifest.c writes it, for model load to read again */
	char *text = pim_model_detail_manifest_json(d);
	json_object *manifest = text ? json_tokener_parse(text) : NULL;
	free(text);
	if (!manifest) {
		fprintf(stderr, "pimctl: out of memory\n");
		return EXIT_DAEMON;
	}
	json_object *o = model_info_json(&d->info);
	json_object_object_add(o, "manifest", manifest);
	json_object *ms = json_object_new_array();
	for (size_t i = 0; i < d->n_metrics; i++) {
		const struct pim_region_metrics *x = &d->metrics[i];
		json_object *jm = json_object_new_object();
		json_object_object_add(jm, "region", json_object_new_int64(x->region_id));
		json_object_object_add(jm, "evidence", json_object_new_string(evidence_name(x->evidence)));
		json_object_object_add(jm, "t_host", jdouble(x->t_host));
		json_object_object_add(jm, "t_host_spread", jdouble(x->t_host_spread));
		json_object_object_add(jm, "n_rd", x->have_n_rd ? jdouble(x->n_rd) : json_object_new_null());
		json_object_object_add(jm, "c_store", x->have_store ? jdouble(x->c_store) : json_object_new_null());
		json_object_object_add(jm, "bw_read_estimate",
				       x->bw_read_estimate > 0 ? jdouble(x->bw_read_estimate) : json_object_new_null());
		json_object_object_add(jm, "source", json_object_new_string(x->source));
		json_object_array_add(ms, jm);
	}
	json_object_object_add(o, "metrics", ms);
	print_json(o);
	return EXIT_OK;
}

static int cmd_model_show(struct ctl *ctl, const char *name)
{
	struct pim_model_detail *d;
	int r = pim_model_show_get(ctl->client, name, &d);

	if (r < 0)
		return request_failed(ctl, r);
	if (ctl->json) {
		int rc = show_json(d);
		pim_model_detail_free(d);
		return rc;
	}
	const struct pim_model_info *info = &d->info;
	char b[32], t[32];
	human_bytes(b, sizeof b, info->allocation_bytes);
	format_time(t, sizeof t, info->loaded_at);
	printf("Model %s\n  source:      %s\n  loaded:      %s by uid %u\n  regions:     %u (%zu with "
	       "metrics on this platform)\n  allocations: %u (%s)\n\n", tty(info->name),
	       *info->source ? tty(info->source) : "-", t, info->owner_uid, info->regions, d->n_metrics,
	       info->allocations, b);
	printf("%6s %-8s %12s  %s\n", "ALLOC", "KIND", "BYTES", "NAME");
	for (size_t i = 0; i < d->n_allocations; i++) {
		const struct pim_model_allocation *a = &d->allocations[i];
		printf("%6u %-8s %12" PRIu64 "  %s\n", a->id, kind_name(a->kind), a->bytes,
		       *a->name ? tty(a->name) : "-");
	}
	printf("\n%5s %6s %-20s %-22s %12s %14s %8s %10s %-9s  %s\n", "ORDER", "REGION", "NAME", "OP", "N_PAR",
	       "N_TOTAL", "TRIP", "T_HOST", "EVIDENCE", "OPERANDS (alloc:role:bytes)");
	for (size_t i = 0; i < d->n_regions; i++) {
		const struct pim_model_region *g = &d->regions[i];
		const struct pim_region_metrics *x = g->metrics;
		char th[32];
		fmt_time(th, sizeof th, x ? x->t_host : 0);
		printf("%5u %6u %-20.20s %-22.22s %12" PRIu64 " %14" PRIu64 " %8" PRIu64 " %10s %-9s ", g->order,
		       g->id, tty(g->name), tty(g->op), g->n_par, g->n_total, g->trip ? g->trip : 1, th,
		       x ? evidence_name(x->evidence) : "-");
		for (size_t j = 0; j < g->n_operands; j++)
			printf(" %u:%s:%" PRIu64, g->operands[j].allocation_id, role_name(g->operands[j].role),
			       g->operands[j].bytes);
		printf("\n");
	}
	pim_model_detail_free(d);
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
