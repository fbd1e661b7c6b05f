/* SPDX-License-Identifier: MIT */
/*
 * extract_manifest.c: the model manifest (pim.proto's Manifest) built from what the stages of
 * extract.c found: the model's name, source and target, its allocations and regions with
 * their operands, loops and trip counts.
 */
#include "extract_internal.h"

#include <string.h>

/* ---------------------------------------------------------------- manifest */

static void manifest_freep(Pim__Manifest **m)
{
	if (*m)
		pim__manifest__free_unpacked(*m, NULL);
}

static char *dup_str(const char *s)
{
	return strdup(s ? s : "");
}

int extract_manifest(const struct extract *x, Pim__Manifest **out, struct pim_error *err)
{
	_cleanup_(manifest_freep) Pim__Manifest *m = malloc(sizeof *m);
	int r;

	if (!m)
		return err_set(err, -ENOMEM, "out of memory");
	pim__manifest__init(m);
	/* Every field is malloc'd, so pim__manifest__free_unpacked(m, NULL) frees it all. */
	m->name = dup_str(x->name);
	/* The labels pimctl model show prints: the instruction set of the library's host code
	 * and, with --weights zero, that its outputs are not the model's. */
	char label[128] = "";
	int w = 0;
	if (x->weights_zero)
		w = snprintf(label, sizeof label, " (--weights zero: %zu constants, %" PRIu64 " bytes zeroed)",
			     x->n_zeros, x->zero_bytes);
	if (x->target[0])
		w += snprintf(label + w, sizeof label - (size_t)w, " (host code %s)", x->target);
	if (asprintf(&m->source, "%.*s%s", (int)(MANIFEST_TEXT_MAX - (size_t)w), x->source, label) < 0)
		m->source = NULL;
	m->allocations = calloc(x->n_allocs ? x->n_allocs : 1, sizeof *m->allocations);
	m->regions = calloc(x->n_regions ? x->n_regions : 1, sizeof *m->regions);
	if (!m->name || !m->source || !m->allocations || !m->regions)
		return err_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < x->n_allocs; i++) {
		Pim__Allocation *a = malloc(sizeof *a);
		if (!a)
			return err_set(err, -ENOMEM, "out of memory");
		pim__allocation__init(a);
		m->allocations[m->n_allocations++] = a;
		a->id = (uint32_t)i;
		a->bytes = x->allocs[i].bytes;
		a->kind = x->allocs[i].kind;
		if (!(a->name = dup_str(x->allocs[i].name)))
			return err_set(err, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < x->n_regions; i++) {
		const struct extract_region *s = &x->regions[i];
		Pim__Region *g = malloc(sizeof *g);
		if (!g)
			return err_set(err, -ENOMEM, "out of memory");
		pim__region__init(g);
		m->regions[m->n_regions++] = g;
		g->id = g->order = (uint32_t)i;
		g->n_par = s->n_par;
		g->n_total = s->n_total;
		g->trip = s->trip;
		g->name = dup_str(s->name);
		g->op = dup_str(s->op);
		g->location = dup_str(s->location);
		g->parallel_extents = malloc((s->n_par_ext ? s->n_par_ext : 1) * sizeof(uint64_t));
		g->reduction_extents = malloc((s->n_red_ext ? s->n_red_ext : 1) * sizeof(uint64_t));
		g->operands = calloc(s->n_operands ? s->n_operands : 1, sizeof *g->operands);
		if (!g->name || !g->op || !g->location || !g->parallel_extents || !g->reduction_extents ||
		    !g->operands)
			return err_set(err, -ENOMEM, "out of memory");
		memcpy(g->parallel_extents, s->par_ext, s->n_par_ext * sizeof(uint64_t));
		g->n_parallel_extents = s->n_par_ext;
		memcpy(g->reduction_extents, s->red_ext, s->n_red_ext * sizeof(uint64_t));
		g->n_reduction_extents = s->n_red_ext;
		for (size_t j = 0; j < s->n_operands; j++) {
			Pim__Operand *p = malloc(sizeof *p);
			if (!p)
				return err_set(err, -ENOMEM, "out of memory");
			pim__operand__init(p);
			g->operands[g->n_operands++] = p;
			p->allocation_id = s->operands[j].alloc;
			p->bytes = s->operands[j].bytes;
			p->elem_bits = s->operands[j].elem_bits;
			p->role = s->operands[j].role;
			if (!(p->elem_type = dup_str(s->operands[j].elem_type)))
				return err_set(err, -ENOMEM, "out of memory");
		}
	}
	if ((r = manifest_validate(m, err)) < 0)
		return err_prefix(err, "internal error: the manifest of %s does not validate", x->source);
	*out = TAKE_PTR(m);
	return 0;
}
