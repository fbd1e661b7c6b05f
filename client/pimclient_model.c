/* SPDX-License-Identifier: MIT */
/*
 * libpimclient's typed model calls: a manifest in JSON form (or a file in either form) parsed
 * and validated with the reader pimctl and pimd share (common/manifest.c), then loaded; a model
 * shown as pim.h's structs.  Strings of a shown model point into the decoded answer, which the
 * result keeps until pim_model_detail_free().
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"
#include "pimclient_priv.h"

/* ---------------------------------------------------------------- load */

void pim_model_loaded_free(struct pim_model_loaded *l)
{
	free(l);
}

/* Sends a validated manifest (c->lock held). */
static int load_manifest(pim_client *c, Pim__Manifest *m, unsigned flags, struct pim_model_loaded **out)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__ModelLoad body = PIM__MODEL_LOAD__INIT;
	Pim__Response *resp;
	int r;

	body.manifest = m;
	body.replace = (flags & PIM_LOAD_REPLACE) != 0;
	req.body_case = PIM__REQUEST__BODY_MODEL_LOAD;
	req.model_load = &body;
	if ((r = pimclient_call(c, &req, PIM__RESPONSE__BODY_MODEL_LOAD, &resp)) < 0)
		return r;
	const Pim__ModelLoadReply *w = resp->model_load;
	struct pim_model_loaded *l = NULL;
	if (!w->model)
		r = pimclient_fail(c, -EBADMSG, "pimd answered a load without the model's summary");
	else if (!(l = calloc(1, sizeof *l)))
		r = pimclient_fail(c, -ENOMEM, "out of memory");
	else {
		pimclient_info_from_wire(&l->info, w->model);
		l->replaced = w->replaced;
		*out = l;
	}
	pim__response__free_unpacked(resp, NULL);
	return r;
}

int pim_model_load_json(pim_client *c, const char *json, size_t len, unsigned flags,
			struct pim_model_loaded **out)
{
	struct pim_error err = { 0 };
	Pim__Manifest *m = NULL;
	int r;

	*out = NULL;
	pthread_mutex_lock(&c->lock);
	if (!json)
		r = pimclient_fail(c, -EINVAL, "no manifest");
	else if ((r = manifest_from_json(json, len, &m, &err)) < 0 || (r = manifest_validate(m, &err)) < 0)
		r = pimclient_fail(c, r, "%s", err.msg);
	else
		r = load_manifest(c, m, flags, out);
	if (m)
		pim__manifest__free_unpacked(m, NULL);
	pthread_mutex_unlock(&c->lock);
	return r;
}

int pim_model_load_file(pim_client *c, const char *path, unsigned flags, struct pim_model_loaded **out)
{
	struct pim_error err = { 0 };
	Pim__Manifest *m = NULL;
	int r;

	*out = NULL;
	pthread_mutex_lock(&c->lock);
	if (!path || !*path)
		r = pimclient_fail(c, -EINVAL, "no manifest file");
	else if ((r = manifest_read_file(path, &m, &err)) < 0)
		r = pimclient_fail(c, r, "%s", err.msg);
	else
		r = load_manifest(c, m, flags, out);
	if (m)
		pim__manifest__free_unpacked(m, NULL);
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* ---------------------------------------------------------------- show */

static enum pim_alloc_kind kind_from_wire(Pim__AllocKind k)
{
	switch (k) {
	case PIM__ALLOC_KIND__ALLOC_KIND_ARGUMENT: return PIM_ALLOC_ARGUMENT;
	case PIM__ALLOC_KIND__ALLOC_KIND_ALLOC: return PIM_ALLOC_ALLOC;
	case PIM__ALLOC_KIND__ALLOC_KIND_GLOBAL: return PIM_ALLOC_GLOBAL;
	default: return PIM_ALLOC_UNSPECIFIED;
	}
}

static enum pim_operand_role role_from_wire(Pim__OperandRole r)
{
	switch (r) {
	case PIM__OPERAND_ROLE__OPERAND_ROLE_IN: return PIM_ROLE_IN;
	case PIM__OPERAND_ROLE__OPERAND_ROLE_OUT: return PIM_ROLE_OUT;
	case PIM__OPERAND_ROLE__OPERAND_ROLE_INOUT: return PIM_ROLE_INOUT;
	default: return PIM_ROLE_UNSPECIFIED;
	}
}

static const char *str(const char *s)
{
	return s ? s : "";
}

/* The detail and the arrays it owns; operands of all regions in one array. */
struct detail_box {
	struct pim_model_detail pub;
	struct pim_model_operand *operands;
};

char *pim_model_detail_manifest_json(const struct pim_model_detail *d)
{
	const Pim__Response *resp = d ? d->internal_ : NULL;

	if (!resp || !resp->model_show || !resp->model_show->manifest) {
		errno = EINVAL;
		return NULL;
	}
	json_object *j = manifest_to_json(resp->model_show->manifest);
	const char *text = j ? json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN) : NULL;
	char *out = text ? strdup(text) : NULL;
	json_object_put(j);
	if (!out)
		errno = ENOMEM;
	return out;
}

void pim_model_detail_free(struct pim_model_detail *d)
{
	struct detail_box *b = (struct detail_box *)d; /* pub is the first member of its box */

	if (!d)
		return;
	free(d->allocations);
	free(d->regions);
	free(d->metrics);
	free(b->operands);
	if (d->internal_)
		pim__response__free_unpacked(d->internal_, NULL);
	free(b);
}

static int cmp_metrics(const void *a, const void *b)
{
	uint32_t x = ((const struct pim_region_metrics *)a)->region_id,
		 y = ((const struct pim_region_metrics *)b)->region_id;
	return (x > y) - (x < y);
}

/* The answer read into d (which keeps it: internal_). */
static int detail_from_wire(pim_client *c, struct detail_box *b, const Pim__ModelShowReply *w)
{
	struct pim_model_detail *d = &b->pub;
	const Pim__Manifest *m = w->manifest;
	size_t n_ops = 0;

	if (!w->model || !m)
		return pimclient_fail(c, -EBADMSG, "pimd answered a show without the model's manifest");
	pimclient_info_from_wire(&d->info, w->model);
	for (size_t i = 0; i < m->n_regions; i++)
		n_ops += m->regions[i]->n_operands; /* (no overflow: each came in the answer) */
	if ((m->n_allocations && !(d->allocations = calloc(m->n_allocations, sizeof *d->allocations))) ||
	    (m->n_regions && !(d->regions = calloc(m->n_regions, sizeof *d->regions))) ||
	    (n_ops && !(b->operands = calloc(n_ops, sizeof *b->operands))) ||
	    (w->n_metrics && !(d->metrics = calloc(w->n_metrics, sizeof *d->metrics))))
		return pimclient_fail(c, -ENOMEM, "out of memory");
	for (size_t i = 0; i < m->n_allocations; i++) {
		const Pim__Allocation *a = m->allocations[i];
		d->allocations[i] = (struct pim_model_allocation){ .id = a->id, .bytes = a->bytes,
								   .kind = kind_from_wire(a->kind),
								   .name = str(a->name) };
	}
	d->n_allocations = m->n_allocations;
	/* metrics by region id, so that each region finds its own */
	for (size_t i = 0; i < w->n_metrics; i++)
		pimclient_metrics_from_wire(&d->metrics[i], w->metrics[i]);
	d->n_metrics = w->n_metrics;
	if (d->n_metrics > 1)
		qsort(d->metrics, d->n_metrics, sizeof *d->metrics, cmp_metrics);
	struct pim_model_operand *op = b->operands;
	for (size_t i = 0; i < m->n_regions; i++) {
		const Pim__Region *g = m->regions[i];
		const struct pim_region_metrics key = { .region_id = g->id };
		d->regions[i] = (struct pim_model_region){
			.id = g->id, .order = g->order, .name = str(g->name), .op = str(g->op),
			.location = str(g->location), .n_par = g->n_par, .n_total = g->n_total, .trip = g->trip,
			.parallel_extents = g->parallel_extents, .n_parallel_extents = g->n_parallel_extents,
			.reduction_extents = g->reduction_extents, .n_reduction_extents = g->n_reduction_extents,
			.operands = op, .n_operands = g->n_operands,
			.metrics = d->n_metrics ? bsearch(&key, d->metrics, d->n_metrics, sizeof *d->metrics,
							  cmp_metrics) : NULL,
		};
		for (size_t j = 0; j < g->n_operands; j++, op++) {
			const Pim__Operand *o = g->operands[j];
			*op = (struct pim_model_operand){ .allocation_id = o->allocation_id, .bytes = o->bytes,
							  .elem_type = str(o->elem_type), .elem_bits = o->elem_bits,
							  .role = role_from_wire(o->role) };
		}
	}
	d->n_regions = m->n_regions;
	return 0;
}

int pim_model_show_get(pim_client *c, const char *name, struct pim_model_detail **out)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__ModelShow body = PIM__MODEL_SHOW__INIT;
	Pim__Response *resp;
	struct detail_box *b;
	int r;

	*out = NULL;
	pthread_mutex_lock(&c->lock);
	if (!name || !*name) {
		r = pimclient_fail(c, -EINVAL, "no model name");
		goto out;
	}
	body.name = (char *)name;
	req.body_case = PIM__REQUEST__BODY_MODEL_SHOW;
	req.model_show = &body;
	if ((r = pimclient_call(c, &req, PIM__RESPONSE__BODY_MODEL_SHOW, &resp)) < 0)
		goto out;
	if (!(b = calloc(1, sizeof *b))) {
		pim__response__free_unpacked(resp, NULL);
		r = pimclient_fail(c, -ENOMEM, "out of memory");
		goto out;
	}
	b->pub.internal_ = resp;
	if ((r = detail_from_wire(c, b, resp->model_show)) < 0)
		pim_model_detail_free(&b->pub);
	else
		*out = &b->pub;
out:
	pthread_mutex_unlock(&c->lock);
	return r;
}
