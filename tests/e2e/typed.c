/* SPDX-License-Identifier: MIT */
/*
 * A client of libpimclient's typed calls, as a C program (or a ctypes script) writes one: no
 * protobuf.
 *
 * e2e-typed SOCKET MODEL
 *	Prints the placement of MODEL at 128 PIM cores, one line per region ("ID NAME pim|host
 *	REASON"), then checks it against the decision table of pim_decisions_get().
 * e2e-typed model SOCKET MANIFEST.json
 *	Loads the manifest from its JSON text (twice: the second replaces the first), shows the
 *	model, checks what it shows against the load's summary and itself, prints it ("region ID
 *	NAME OP ..."), checks that malformed and invalid JSON and a missing model fail with the
 *	right code and message on a connection that goes on serving, and removes the model.
 * e2e-typed show SOCKET MODEL
 *	Prints a loaded model's regions with the evidence of their metrics ("region ID NAME ...
 *	metrics EVIDENCE SOURCE"), after checking that each region's metrics are its own.
 * Exit 0, or 1 with the failure on stderr.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pim.h"

static int failed(pim_client *c, const char *what)
{
	fprintf(stderr, "e2e-typed: %s: %s\n", what, c ? pim_client_error(c) : "out of memory");
	return 1;
}

static int wrong(const char *what)
{
	fprintf(stderr, "e2e-typed: %s\n", what);
	return 1;
}

static int placement(pim_client *c, const char *model)
{
	struct pim_placement *p;
	struct pim_decisions *d;
	struct pim_placement_request rq = { .params = { .n_core = 128 } };

	if (pim_placement_get(c, model, &rq, &p) < 0 || pim_decisions_get(c, model, &rq, &d) < 0)
		return failed(c, model);
	const struct pim_placement_estimate *e = &p->estimates[0];
	printf("%s: %u of %zu regions on PIM at %g cores, speedup %.3f\n", p->model, e->offloaded, e->n_regions,
	       e->n_core, e->speedup);
	int bad = p->n_estimates != 1 || d->offloaded != e->offloaded;
	for (size_t i = 0; i < e->n_regions; i++) {
		const struct pim_region_decision *r = &e->regions[i];
		printf("%u %s %s %s\n", r->region_id, r->name, r->pim ? "pim" : "host", r->reason);
		bad |= r->region_id >= d->id_limit || d->place[r->region_id] != (r->pim ? PIM_ON_PIM : PIM_ON_HOST);
	}
	if (bad)
		fprintf(stderr, "e2e-typed: the placement and the decision table disagree\n");
	pim_decisions_free(d);
	pim_placement_free(p);
	return bad;
}

static const char *kind_name(enum pim_alloc_kind k)
{
	return k == PIM_ALLOC_ARGUMENT ? "argument" : k == PIM_ALLOC_ALLOC ? "alloc"
	       : k == PIM_ALLOC_GLOBAL ? "global" : "unspecified";
}

static const char *role_name(enum pim_operand_role r)
{
	return r == PIM_ROLE_IN ? "in" : r == PIM_ROLE_OUT ? "out" : r == PIM_ROLE_INOUT ? "inout" : "unspecified";
}

static uint64_t product(const uint64_t *e, size_t n)
{
	uint64_t p = 1;
	for (size_t i = 0; i < n; i++)
		p *= e[i];
	return p;
}

/* What a shown model must hold whatever it is; prints its regions.  0, or 1 with the reason. */
static int check_detail(const struct pim_model_detail *d)
{
	uint64_t bytes = 0;

	if (d->n_regions != d->info.regions || d->n_allocations != d->info.allocations)
		return wrong("the shown manifest's counts differ from its summary");
	for (size_t i = 0; i < d->n_allocations; i++) {
		const struct pim_model_allocation *a = &d->allocations[i];
		bytes += a->bytes;
		if (i && a->id <= d->allocations[i - 1].id)
			return wrong("allocations are not by id");
		if (a->kind == PIM_ALLOC_UNSPECIFIED || !a->name)
			return wrong("an allocation without its kind or name");
		printf("allocation %u %s %llu %s\n", a->id, kind_name(a->kind), (unsigned long long)a->bytes,
		       *a->name ? a->name : "-");
	}
	if (bytes != d->info.allocation_bytes)
		return wrong("the allocations' bytes differ from the summary's");
	for (size_t i = 0; i < d->n_regions; i++) {
		const struct pim_model_region *r = &d->regions[i];
		if (i && r->order <= d->regions[i - 1].order)
			return wrong("regions are not in program order");
		if (r->n_par > r->n_total || r->trip < 1 || !r->name || !r->op || !r->location)
			return wrong("a region's counts or strings are not what a valid manifest holds");
		if ((r->n_parallel_extents || r->n_reduction_extents) &&
		    (product(r->parallel_extents, r->n_parallel_extents) != r->n_par ||
		     r->n_par * product(r->reduction_extents, r->n_reduction_extents) != r->n_total))
			return wrong("a region's extents do not multiply to its counts");
		if (r->metrics && r->metrics->region_id != r->id)
			return wrong("a region shows another region's metrics");
		printf("region %u %s %s order %u n_par %llu n_total %llu trip %llu extents %zu+%zu operands", r->id,
		       r->name, r->op, r->order, (unsigned long long)r->n_par, (unsigned long long)r->n_total,
		       (unsigned long long)r->trip, r->n_parallel_extents, r->n_reduction_extents);
		for (size_t j = 0; j < r->n_operands; j++) {
			const struct pim_model_operand *o = &r->operands[j];
			size_t k;
			for (k = 0; k < d->n_allocations && d->allocations[k].id != o->allocation_id; k++)
				;
			if (k == d->n_allocations || o->bytes > d->allocations[k].bytes || o->role == PIM_ROLE_UNSPECIFIED)
				return wrong("an operand names no allocation of the model, or is larger than it");
			printf(" %u:%s:%llu:%s", o->allocation_id, role_name(o->role), (unsigned long long)o->bytes,
			       *o->elem_type ? o->elem_type : "-");
		}
		if (r->metrics)
			printf(" metrics %s %s", r->metrics->evidence == PIM_EVIDENCE_IMPORTED ? "imported"
						 : r->metrics->evidence == PIM_EVIDENCE_COUNTERS ? "counters"
						 : r->metrics->evidence == PIM_EVIDENCE_ESTIMATE ? "estimate" : "none",
			       r->metrics->source);
		printf("\n");
	}
	return 0;
}

static int show(pim_client *c, const char *model)
{
	struct pim_model_detail *d;
	size_t with = 0;

	if (pim_model_show_get(c, model, &d) < 0)
		return failed(c, model);
	printf("%s: %u regions, %u allocations, %zu with metrics\n", d->info.name, d->info.regions,
	       d->info.allocations, d->n_metrics);
	int bad = check_detail(d);
	for (size_t i = 0; i < d->n_regions; i++)
		with += d->regions[i].metrics != NULL;
	if (!bad && with != d->n_metrics)
		bad = wrong("not every region's metrics found their region");
	pim_model_detail_free(d);
	return bad;
}

static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0, got;

	if (!f)
		return NULL;
	do {
		if (n == cap) {
			char *b = realloc(buf, cap = cap ? 2 * cap : 65536);
			if (!b) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = b;
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
	} while (got > 0);
	fclose(f);
	*len = n;
	return buf;
}

/* A load that must fail with code, its message containing text. */
static int refused(pim_client *c, const char *what, const char *json, size_t len, int code, const char *text)
{
	struct pim_model_loaded *l = NULL;
	int r = pim_model_load_json(c, json, len, PIM_LOAD_REPLACE, &l);

	printf("%s: %d %s\n", what, r, pim_client_error(c));
	if (r != code || l || !strstr(pim_client_error(c), text) || pim_client_remote_error(c) != PIM_REMOTE_NONE) {
		fprintf(stderr, "e2e-typed: %s: expected %d with \"%s\", not %d \"%s\"\n", what, code, text, r,
			pim_client_error(c));
		pim_model_loaded_free(l);
		return 1;
	}
	return 0;
}

static int model(pim_client *c, const char *path)
{
	static const char invalid[] = "{ \"name\": \"typed-invalid\", \"allocations\": [], \"regions\": [] }";
	struct pim_model_loaded *first, *again;
	struct pim_model_detail *d;
	size_t len;
	char *json = read_all(path, &len);
	int bad = 0;

	if (!json)
		return wrong("cannot read the manifest");
	if (pim_model_load_json(c, json, len, PIM_LOAD_REPLACE, &first) < 0 ||
	    pim_model_load_json(c, json, len, PIM_LOAD_REPLACE, &again) < 0) {
		free(json);
		return failed(c, "load");
	}
	printf("loaded %s: %u regions, %u allocations, %llu bytes, replaced %d then %d\n", first->info.name,
	       first->info.regions, first->info.allocations, (unsigned long long)first->info.allocation_bytes,
	       first->replaced, again->replaced);
	if (!again->replaced || strcmp(first->info.name, again->info.name) != 0)
		bad = wrong("the second load did not replace the first");
	if (!bad && pim_model_show_get(c, again->info.name, &d) < 0)
		bad = failed(c, "show");
	else if (!bad) {
		if (strcmp(d->info.name, again->info.name) != 0 || strcmp(d->info.source, again->info.source) != 0 ||
		    d->info.regions != again->info.regions || d->info.allocations != again->info.allocations ||
		    d->info.allocation_bytes != again->info.allocation_bytes ||
		    d->info.owner_uid != again->info.owner_uid || d->info.loaded_at != again->info.loaded_at)
			bad = wrong("the shown summary differs from the load's");
		if (!bad)
			bad = check_detail(d);
		if (!bad && (d->n_metrics || d->metrics))
			bad = wrong("a model just loaded shows metrics");
		/* its manifest as JSON loads again as the same model */
		char *mj = bad ? NULL : pim_model_detail_manifest_json(d);
		struct pim_model_loaded *back = NULL;
		if (!bad && !mj)
			bad = wrong("no JSON manifest of a shown model");
		else if (!bad && pim_model_load_json(c, mj, strlen(mj), PIM_LOAD_REPLACE, &back) < 0)
			bad = failed(c, "load of the shown manifest");
		else if (!bad && (!back->replaced || back->info.regions != d->info.regions ||
				  back->info.allocation_bytes != d->info.allocation_bytes ||
				  strcmp(back->info.source, d->info.source) != 0))
			bad = wrong("the shown manifest loads as another model");
		pim_model_loaded_free(back);
		free(mj);
		if (pim_model_detail_manifest_json(NULL) || errno != EINVAL)
			bad = wrong("a detail that is not one has a manifest");
		pim_model_detail_free(d);
	}
	/* refused here, before anything is sent; the connection serves on */
	bad |= refused(c, "malformed", json, len / 2, -EINVAL, "manifest: JSON syntax error near line");
	bad |= refused(c, "invalid", invalid, strlen(invalid), -EINVAL,
		       "allocations: a manifest needs at least one allocation");
	bad |= refused(c, "empty", "", 0, -EINVAL, "manifest: JSON syntax error");
	bad |= refused(c, "nothing", NULL, 0, -EINVAL, "no manifest");
	if (pim_model_show_get(c, "typed-missing", &d) != -ENOENT || pim_client_remote_error(c) != PIM_REMOTE_NOT_FOUND)
		bad |= wrong("a missing model is not -ENOENT from pimd");
	printf("missing: %s\n", pim_client_error(c));
	if (pim_model_remove(c, again->info.name) < 0)
		bad |= failed(c, "remove");
	pim_model_loaded_free(first);
	pim_model_loaded_free(again);
	free(json);
	return bad;
}

int main(int argc, char **argv)
{
	int mode = argc == 3 ? 0 : argc == 4 && strcmp(argv[1], "model") == 0 ? 1
				   : argc == 4 && strcmp(argv[1], "show") == 0 ? 2 : -1;
	pim_client *c;
	int bad;

	if (mode < 0)
		return wrong("usage: e2e-typed SOCKET MODEL | model SOCKET MANIFEST.json | show SOCKET MODEL");
	if (!(c = pim_client_new()))
		return wrong("out of memory");
	if (pim_client_connect(c, argv[mode ? 2 : 1], "e2e-typed") < 0)
		bad = failed(c, "connect");
	else
		bad = mode == 1 ? model(c, argv[3]) : mode == 2 ? show(c, argv[3]) : placement(c, argv[2]);
	pim_client_free(c);
	return bad;
}
