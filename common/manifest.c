/* SPDX-License-Identifier: MIT */
#include "manifest.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>

static const char *const alloc_kind_names[] = {
	[PIM__ALLOC_KIND__ALLOC_KIND_UNSPECIFIED] = "unspecified",
	[PIM__ALLOC_KIND__ALLOC_KIND_ARGUMENT] = "argument",
	[PIM__ALLOC_KIND__ALLOC_KIND_ALLOC] = "alloc",
	[PIM__ALLOC_KIND__ALLOC_KIND_GLOBAL] = "global",
};

static const char *const role_names[] = {
	[PIM__OPERAND_ROLE__OPERAND_ROLE_UNSPECIFIED] = "unspecified",
	[PIM__OPERAND_ROLE__OPERAND_ROLE_IN] = "in",
	[PIM__OPERAND_ROLE__OPERAND_ROLE_OUT] = "out",
	[PIM__OPERAND_ROLE__OPERAND_ROLE_INOUT] = "inout",
};

const char *manifest_alloc_kind_name(Pim__AllocKind k)
{
	return (unsigned)k < ELEMENTSOF(alloc_kind_names) ? alloc_kind_names[k] : "invalid";
}

const char *manifest_role_name(Pim__OperandRole r)
{
	return (unsigned)r < ELEMENTSOF(role_names) ? role_names[r] : "invalid";
}

bool manifest_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > MANIFEST_NAME_MAX || name[0] == '.' || name[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

struct alloc_ref {
	uint32_t id;
	size_t index; /* position in m->allocations */
};

/* Sorts ids in place and reports the first duplicate. */
static int ids_unique(uint32_t *ids, size_t n, const char *what, struct pim_error *err)
{
	qsort(ids, n, sizeof *ids, cmp_u32);
	for (size_t i = 1; i < n; i++)
		if (ids[i] == ids[i - 1])
			return err_set(err, -EINVAL, "%s: %u appears more than once", what, ids[i]);
	return 0;
}

static int extents_check(const char *field, const uint64_t *e, size_t n, uint64_t *product,
			 struct pim_error *err)
{
	uint64_t p = 1;

	if (n > MANIFEST_EXTENTS_MAX)
		return err_set(err, -EINVAL, "%s: %zu extents, at most %u allowed", field, n,
			       MANIFEST_EXTENTS_MAX);
	for (size_t i = 0; i < n; i++) {
		if (e[i] == 0)
			return err_set(err, -EINVAL, "%s[%zu]: must be at least 1", field, i);
		if (!mul_u64(p, e[i], &p) || p > MANIFEST_ITERATIONS_MAX)
			return err_set(err, -EINVAL, "%s: product exceeds %" PRIu64, field,
				       MANIFEST_ITERATIONS_MAX);
	}
	*product = p;
	return 0;
}

/* text_check of a field named by fmt, i and j: the name is written only when the check fails
 * (a model of a million regions has millions of fields). */
static int text_check_at(const char *s, size_t max, unsigned flags, struct pim_error *err,
			 const char *fmt, ...) _printf_(5, 6);
static int text_check_at(const char *s, size_t max, unsigned flags, struct pim_error *err,
			 const char *fmt, ...)
{
	char f[96];
	va_list ap;

	if (text_check("", s, max, flags, NULL) >= 0)
		return 0;
	va_start(ap, fmt);
	vsnprintf(f, sizeof f, fmt, ap);
	va_end(ap);
	return text_check(f, s, max, flags, err);
}

/* extents_check of regions[i].<kind>, named only when it fails. */
static int extents_check_at(const char *kind, size_t i, const uint64_t *e, size_t n, uint64_t *product,
			    struct pim_error *err)
{
	char f[96];

	if (extents_check("", e, n, product, NULL) >= 0)
		return 0;
	snprintf(f, sizeof f, "regions[%zu].%s", i, kind);
	return extents_check(f, e, n, product, err);
}

static int cmp_alloc_ref(const void *a, const void *b);

static int region_check(const Pim__Region *r, size_t i, const struct alloc_ref *refs,
			const Pim__Manifest *m, struct pim_error *err)
{
	int k;

	if (r->id > MANIFEST_REGION_ID_MAX)
		return err_set(err, -EINVAL, "regions[%zu].id: %u exceeds %u (region ids index dense "
			       "tables in pimd and the client)", i, r->id, MANIFEST_REGION_ID_MAX);
	if ((k = text_check_at(r->name, MANIFEST_TEXT_MAX, TEXT_REQUIRED, err, "regions[%zu].name", i)) < 0 ||
	    (k = text_check_at(r->op, MANIFEST_TEXT_MAX, TEXT_REQUIRED, err, "regions[%zu].op", i)) < 0 ||
	    (k = text_check_at(r->location, MANIFEST_TEXT_MAX, 0, err, "regions[%zu].location", i)) < 0)
		return k;
	if (r->n_par == 0)
		return err_set(err, -EINVAL, "regions[%zu].n_par: must be at least 1", i);
	if (r->n_total == 0 || r->n_total > MANIFEST_ITERATIONS_MAX)
		return err_set(err, -EINVAL, "regions[%zu].n_total: %" PRIu64
			       " is outside 1..%" PRIu64, i, r->n_total, MANIFEST_ITERATIONS_MAX);
	if (r->n_par > r->n_total)
		return err_set(err, -EINVAL, "regions[%zu].n_par: %" PRIu64
			       " exceeds n_total %" PRIu64, i, r->n_par, r->n_total);
	if (r->trip > MANIFEST_ITERATIONS_MAX)
		return err_set(err, -EINVAL, "regions[%zu].trip: %" PRIu64 " exceeds %" PRIu64, i,
			       r->trip, MANIFEST_ITERATIONS_MAX);
	if (r->n_parallel_extents || r->n_reduction_extents) {
		uint64_t pp, rp, all;
		if ((k = extents_check_at("parallel_extents", i, r->parallel_extents, r->n_parallel_extents,
					  &pp, err)) < 0 ||
		    (k = extents_check_at("reduction_extents", i, r->reduction_extents, r->n_reduction_extents,
					  &rp, err)) < 0)
			return k;
		if (pp != r->n_par)
			return err_set(err, -EINVAL, "regions[%zu].parallel_extents: product %" PRIu64
				       " differs from n_par %" PRIu64, i, pp, r->n_par);
		if (!mul_u64(pp, rp, &all) || all != r->n_total)
			return err_set(err, -EINVAL, "regions[%zu].reduction_extents: parallel x reduction "
				       "extents differ from n_total %" PRIu64, i, r->n_total);
	}
	if (r->n_operands == 0)
		return err_set(err, -EINVAL, "regions[%zu].operands: a region needs at least one operand", i);
	if (r->n_operands > MANIFEST_OPERANDS_MAX)
		return err_set(err, -EINVAL, "regions[%zu].operands: %zu operands, at most %u allowed", i,
			       r->n_operands, MANIFEST_OPERANDS_MAX);
	for (size_t j = 0; j < r->n_operands; j++) {
		const Pim__Operand *o = r->operands[j];
		const struct alloc_ref key = { o->allocation_id, 0 };
		const struct alloc_ref *hit = bsearch(&key, refs, m->n_allocations, sizeof *refs,
						      cmp_alloc_ref);
		if (!hit)
			return err_set(err, -EINVAL, "regions[%zu].operands[%zu].allocation_id: %u is not a "
				       "known allocation", i, j, o->allocation_id);
		const Pim__Allocation *a = m->allocations[hit->index];
		if (o->bytes == 0)
			return err_set(err, -EINVAL, "regions[%zu].operands[%zu].bytes: must be at least 1", i, j);
		if (o->bytes > a->bytes)
			return err_set(err, -EINVAL, "regions[%zu].operands[%zu].bytes: %" PRIu64
				       " exceeds allocation %u (%" PRIu64 " bytes)", i, j, o->bytes,
				       a->id, a->bytes);
		if (o->role == PIM__OPERAND_ROLE__OPERAND_ROLE_UNSPECIFIED ||
		    (unsigned)o->role >= ELEMENTSOF(role_names))
			return err_set(err, -EINVAL, "regions[%zu].operands[%zu].role: must be in, out or inout", i, j);
		if (o->elem_bits > 1024)
			return err_set(err, -EINVAL, "regions[%zu].operands[%zu].elem_bits: %u exceeds 1024", i,
				       j, o->elem_bits);
		if ((k = text_check_at(o->elem_type, MANIFEST_ELEM_TYPE_MAX, 0, err,
				       "regions[%zu].operands[%zu].elem_type", i, j)) < 0)
			return k;
	}
	return 0;
}

static int cmp_alloc_ref(const void *a, const void *b)
{
	return cmp_u32(&((const struct alloc_ref *)a)->id, &((const struct alloc_ref *)b)->id);
}

int manifest_validate_each(const Pim__Manifest *m, size_t n_regions,
			   const Pim__Region *(*region)(void *ctx, size_t i, struct pim_error *err), void *ctx,
			   struct pim_error *err)
{
	_cleanup_(freep) struct alloc_ref *refs = NULL;
	uint64_t total = 0;
	int k;

	if ((k = text_check("name", m->name, MANIFEST_NAME_MAX, TEXT_REQUIRED, err)) < 0)
		return k;
	if (!manifest_name_valid(m->name))
		return err_set(err, -EINVAL, "name: \"%.*s\" is not a valid model name (1-%d characters "
			       "of A-Z a-z 0-9 . _ -, not starting with . or -)", TEXT_ECHO(m->name, 64),
			       MANIFEST_NAME_MAX);
	if ((k = text_check("source", m->source, MANIFEST_TEXT_MAX, 0, err)) < 0)
		return k;
	if (m->n_allocations == 0)
		return err_set(err, -EINVAL, "allocations: a manifest needs at least one allocation");
	if (m->n_allocations > MANIFEST_ALLOCATIONS_MAX)
		return err_set(err, -EINVAL, "allocations: %zu allocations, at most %u allowed",
			       m->n_allocations, MANIFEST_ALLOCATIONS_MAX);
	if (n_regions == 0)
		return err_set(err, -EINVAL, "regions: a manifest needs at least one region");
	if (n_regions > MANIFEST_REGIONS_MAX)
		return err_set(err, -EINVAL, "regions: %zu regions, at most %u allowed", n_regions,
			       MANIFEST_REGIONS_MAX);

	for (size_t i = 0; i < m->n_allocations; i++) {
		const Pim__Allocation *a = m->allocations[i];
		if (a->bytes == 0 || a->bytes > MANIFEST_BYTES_MAX)
			return err_set(err, -EINVAL, "allocations[%zu].bytes: %" PRIu64 " is outside 1..%" PRIu64,
				       i, a->bytes, MANIFEST_BYTES_MAX);
		if (!add_u64(total, a->bytes, &total) || total > MANIFEST_BYTES_MAX)
			return err_set(err, -EINVAL, "allocations[%zu].bytes: the allocations add up to more "
				       "than %" PRIu64 " bytes", i, MANIFEST_BYTES_MAX);
		if (a->kind == PIM__ALLOC_KIND__ALLOC_KIND_UNSPECIFIED ||
		    (unsigned)a->kind >= ELEMENTSOF(alloc_kind_names))
			return err_set(err, -EINVAL, "allocations[%zu].kind: must be argument, alloc or global", i);
		if ((k = text_check_at(a->name, MANIFEST_TEXT_MAX, 0, err, "allocations[%zu].name", i)) < 0)
			return k;
	}
	refs = malloc(m->n_allocations * sizeof *refs);
	if (!refs)
		return err_set(err, -ENOMEM, "out of memory validating the manifest");
	for (size_t i = 0; i < m->n_allocations; i++)
		refs[i] = (struct alloc_ref){ m->allocations[i]->id, i };
	qsort(refs, m->n_allocations, sizeof *refs, cmp_alloc_ref);
	for (size_t i = 1; i < m->n_allocations; i++)
		if (refs[i].id == refs[i - 1].id)
			return err_set(err, -EINVAL, "allocations: id %u appears more than once", refs[i].id);

	{
		/* one pass over the regions, each checked as it comes; ids and orders after */
		_cleanup_(freep) uint32_t *rid = malloc(n_regions * sizeof *rid);
		_cleanup_(freep) uint32_t *ord = malloc(n_regions * sizeof *ord);
		if (!rid || !ord)
			return err_set(err, -ENOMEM, "out of memory validating the manifest");
		for (size_t i = 0; i < n_regions; i++) {
			const Pim__Region *g = region(ctx, i, err);
			if (!g)
				return err->code < 0 ? err->code : err_set(err, -EIO, "regions[%zu]: unreadable", i);
			rid[i] = g->id;
			ord[i] = g->order;
			if ((k = region_check(g, i, refs, m, err)) < 0)
				return k;
		}
		if ((k = ids_unique(rid, n_regions, "regions: id", err)) < 0)
			return k;
		if ((k = ids_unique(ord, n_regions, "regions: order", err)) < 0)
			return k;
	}
	return 0;
}

static const Pim__Region *region_of(void *ctx, size_t i, struct pim_error *err)
{
	return ((const Pim__Manifest *)ctx)->regions[i];
}

int manifest_validate(const Pim__Manifest *m, struct pim_error *err)
{
	return manifest_validate_each(m, m->n_regions, region_of, (void *)m, err);
}

uint64_t manifest_allocation_bytes(const Pim__Manifest *m)
{
	uint64_t t = 0;
	for (size_t i = 0; i < m->n_allocations; i++)
		t += m->allocations[i]->bytes;
	return t;
}

/* ---------------------------------------------------------------- interface digest */

#define FNV64_OFFSET UINT64_C(0xcbf29ce484222325)
#define FNV64_PRIME UINT64_C(0x100000001b3)

static uint64_t fnv_u64(uint64_t h, uint64_t v)
{
	for (int i = 0; i < 8; i++, v >>= 8)
		h = (h ^ (v & 0xff)) * FNV64_PRIME;
	return h;
}

static int cmp_alloc_id(const void *a, const void *b)
{
	uint32_t x = (*(Pim__Allocation *const *)a)->id, y = (*(Pim__Allocation *const *)b)->id;
	return (x > y) - (x < y);
}

static int cmp_region_id(const void *a, const void *b)
{
	uint32_t x = (*(Pim__Region *const *)a)->id, y = (*(Pim__Region *const *)b)->id;
	return (x > y) - (x < y);
}

uint64_t manifest_digest_begin(size_t n_allocations)
{
	return fnv_u64(fnv_u64(FNV64_OFFSET, MANIFEST_DIGEST_VERSION), n_allocations);
}

uint64_t manifest_digest_allocation(uint64_t h, const Pim__Allocation *a)
{
	h = fnv_u64(h, a->id);
	h = fnv_u64(h, a->bytes);
	return fnv_u64(h, (uint64_t)a->kind);
}

uint64_t manifest_digest_regions(uint64_t h, size_t n_regions)
{
	return fnv_u64(h, n_regions);
}

uint64_t manifest_digest_end(uint64_t h)
{
	return h ? h : 1; /* 0 means "no digest" to the worker */
}

uint64_t manifest_digest_region(uint64_t h, const Pim__Region *r)
{
	h = fnv_u64(h, r->id);
	h = fnv_u64(h, r->order);
	h = fnv_u64(h, r->n_par);
	h = fnv_u64(h, r->n_total);
	h = fnv_u64(h, r->trip ? r->trip : 1);
	h = fnv_u64(h, r->n_parallel_extents);
	for (size_t i = 0; i < r->n_parallel_extents; i++)
		h = fnv_u64(h, r->parallel_extents[i]);
	h = fnv_u64(h, r->n_reduction_extents);
	for (size_t i = 0; i < r->n_reduction_extents; i++)
		h = fnv_u64(h, r->reduction_extents[i]);
	h = fnv_u64(h, r->n_operands);
	for (size_t i = 0; i < r->n_operands; i++) {
		const Pim__Operand *o = r->operands[i];
		h = fnv_u64(h, o->allocation_id);
		h = fnv_u64(h, o->bytes);
		h = fnv_u64(h, o->elem_bits);
		h = fnv_u64(h, (uint64_t)o->role);
	}
	return h;
}

uint64_t manifest_digest(const Pim__Manifest *m)
{
	uint64_t h = manifest_digest_begin(m->n_allocations);
	Pim__Allocation **a = malloc((m->n_allocations ? m->n_allocations : 1) * sizeof *a);
	Pim__Region **r = malloc((m->n_regions ? m->n_regions : 1) * sizeof *r);
	if (!a || !r) {
		free(a);
		free(r);
		return 0;
	}
	memcpy(a, m->allocations, m->n_allocations * sizeof *a);
	memcpy(r, m->regions, m->n_regions * sizeof *r);
	qsort(a, m->n_allocations, sizeof *a, cmp_alloc_id);
	qsort(r, m->n_regions, sizeof *r, cmp_region_id);
	for (size_t i = 0; i < m->n_allocations; i++)
		h = manifest_digest_allocation(h, a[i]);
	h = manifest_digest_regions(h, m->n_regions);
	for (size_t i = 0; i < m->n_regions; i++)
		h = manifest_digest_region(h, r[i]);
	free(a);
	free(r);
	return manifest_digest_end(h);
}

/* ---------------------------------------------------------------- JSON in */

static int json_u64(json_object *v, const char *field, uint64_t *out, struct pim_error *err)
{
	if (!json_object_is_type(v, json_type_int))
		return err_set(err, -EINVAL, "%s: must be a non-negative integer", field);
	errno = 0;
	int64_t s = json_object_get_int64(v);
	if (s < 0)
		return err_set(err, -EINVAL, "%s: must be a non-negative integer", field);
	errno = 0;
	uint64_t u = json_object_get_uint64(v);
	if (errno == ERANGE)
		return err_set(err, -EINVAL, "%s: out of range", field);
	*out = u;
	return 0;
}

static int json_u32(json_object *v, const char *field, uint32_t *out, struct pim_error *err)
{
	uint64_t u;
	int k = json_u64(v, field, &u, err);
	if (k < 0)
		return k;
	if (u > UINT32_MAX)
		return err_set(err, -EINVAL, "%s: %" PRIu64 " exceeds %u", field, u, UINT32_MAX);
	*out = (uint32_t)u;
	return 0;
}

static int json_str(json_object *v, const char *field, char **out, struct pim_error *err)
{
	if (!json_object_is_type(v, json_type_string))
		return err_set(err, -EINVAL, "%s: must be a string", field);
	const char *s = json_object_get_string(v);
	if (strlen(s) != (size_t)json_object_get_string_len(v))
		return err_set(err, -EINVAL, "%s: contains a NUL byte", field);
	char *d = strdup(s);
	if (!d)
		return err_set(err, -ENOMEM, "out of memory");
	if (*out != protobuf_c_empty_string)
		free(*out);
	*out = d;
	return 0;
}

static int json_array(json_object *v, const char *field, size_t max, size_t *n, struct pim_error *err)
{
	if (!json_object_is_type(v, json_type_array))
		return err_set(err, -EINVAL, "%s: must be an array", field);
	*n = json_object_array_length(v);
	if (*n > max)
		return err_set(err, -EINVAL, "%s: %zu entries, at most %zu allowed", field, *n, max);
	return 0;
}

static int json_extents(json_object *v, const char *field, uint64_t **out, size_t *n,
			struct pim_error *err)
{
	size_t len;
	int k = json_array(v, field, MANIFEST_EXTENTS_MAX, &len, err);
	if (k < 0)
		return k;
	*out = calloc(len ? len : 1, sizeof **out);
	if (!*out)
		return err_set(err, -ENOMEM, "out of memory");
	*n = len;
	for (size_t i = 0; i < len; i++) {
		char f[128];
		snprintf(f, sizeof f, "%s[%zu]", field, i);
		if ((k = json_u64(json_object_array_get_idx(v, i), f, &(*out)[i], err)) < 0)
			return k;
	}
	return 0;
}

static int enum_from_name(const char *const *names, size_t n, json_object *v, const char *field,
			  const char *allowed, int *out, struct pim_error *err)
{
	if (json_object_is_type(v, json_type_string)) {
		const char *s = json_object_get_string(v);
		for (size_t i = 1; i < n; i++)
			if (strcmp(s, names[i]) == 0) {
				*out = (int)i;
				return 0;
			}
		return err_set(err, -EINVAL, "%s: \"%.*s\" is not one of %s", field, TEXT_ECHO(s, 32), allowed);
	}
	return err_set(err, -EINVAL, "%s: must be one of %s", field, allowed);
}

#define FOREACH_KEY(obj, key, val) json_object_object_foreach(obj, key, val)

static int json_operand(json_object *o, const char *field, Pim__Operand *op, struct pim_error *err)
{
	char f[160];
	int k;
	bool have_alloc = false;

	if (!json_object_is_type(o, json_type_object))
		return err_set(err, -EINVAL, "%s: must be an object", field);
	FOREACH_KEY(o, key, val) {
		snprintf(f, sizeof f, "%s.%s", field, key);
		if (strcmp(key, "allocation") == 0 || strcmp(key, "allocation_id") == 0) {
			k = json_u32(val, f, &op->allocation_id, err);
			have_alloc = true;
		} else if (strcmp(key, "bytes") == 0)
			k = json_u64(val, f, &op->bytes, err);
		else if (strcmp(key, "elem_type") == 0)
			k = json_str(val, f, &op->elem_type, err);
		else if (strcmp(key, "elem_bits") == 0)
			k = json_u32(val, f, &op->elem_bits, err);
		else if (strcmp(key, "role") == 0) {
			int e;
			k = enum_from_name(role_names, ELEMENTSOF(role_names), val, f, "in, out, inout", &e, err);
			op->role = (Pim__OperandRole)e;
		} else
			k = err_set(err, -EINVAL, "%s: unknown key", f);
		if (k < 0)
			return k;
	}
	if (!have_alloc)
		return err_set(err, -EINVAL, "%s.allocation: missing", field);
	return 0;
}

static int json_region(json_object *o, const char *field, Pim__Region *r, struct pim_error *err)
{
	char f[160];
	int k;

	if (!json_object_is_type(o, json_type_object))
		return err_set(err, -EINVAL, "%s: must be an object", field);
	bool have_id = false;
	FOREACH_KEY(o, key, val) {
		snprintf(f, sizeof f, "%s.%s", field, key);
		if (strcmp(key, "id") == 0) {
			k = json_u32(val, f, &r->id, err);
			have_id = true;
		} else if (strcmp(key, "name") == 0)
			k = json_str(val, f, &r->name, err);
		else if (strcmp(key, "op") == 0)
			k = json_str(val, f, &r->op, err);
		else if (strcmp(key, "location") == 0)
			k = json_str(val, f, &r->location, err);
		else if (strcmp(key, "order") == 0)
			k = json_u32(val, f, &r->order, err);
		else if (strcmp(key, "n_par") == 0)
			k = json_u64(val, f, &r->n_par, err);
		else if (strcmp(key, "n_total") == 0)
			k = json_u64(val, f, &r->n_total, err);
		else if (strcmp(key, "trip") == 0)
			k = json_u64(val, f, &r->trip, err);
		else if (strcmp(key, "parallel_extents") == 0)
			k = json_extents(val, f, &r->parallel_extents, &r->n_parallel_extents, err);
		else if (strcmp(key, "reduction_extents") == 0)
			k = json_extents(val, f, &r->reduction_extents, &r->n_reduction_extents, err);
		else if (strcmp(key, "operands") == 0) {
			size_t n;
			if ((k = json_array(val, f, MANIFEST_OPERANDS_MAX, &n, err)) < 0)
				return k;
			r->operands = calloc(n ? n : 1, sizeof *r->operands);
			if (!r->operands)
				return err_set(err, -ENOMEM, "out of memory");
			for (size_t j = 0; j < n; j++) {
				Pim__Operand *op = malloc(sizeof *op);
				if (!op)
					return err_set(err, -ENOMEM, "out of memory");
				pim__operand__init(op);
				r->operands[r->n_operands++] = op;
				char g[192];
				snprintf(g, sizeof g, "%s[%zu]", f, j);
				if ((k = json_operand(json_object_array_get_idx(val, j), g, op, err)) < 0)
					return k;
			}
		} else
			k = err_set(err, -EINVAL, "%s: unknown key", f);
		if (k < 0)
			return k;
	}
	if (!have_id)
		return err_set(err, -EINVAL, "%s.id: missing", field);
	return 0;
}

static int json_allocation(json_object *o, const char *field, Pim__Allocation *a, struct pim_error *err)
{
	char f[160];
	int k;
	bool have_id = false;

	if (!json_object_is_type(o, json_type_object))
		return err_set(err, -EINVAL, "%s: must be an object", field);
	FOREACH_KEY(o, key, val) {
		snprintf(f, sizeof f, "%s.%s", field, key);
		if (strcmp(key, "id") == 0) {
			k = json_u32(val, f, &a->id, err);
			have_id = true;
		} else if (strcmp(key, "bytes") == 0)
			k = json_u64(val, f, &a->bytes, err);
		else if (strcmp(key, "name") == 0)
			k = json_str(val, f, &a->name, err);
		else if (strcmp(key, "kind") == 0) {
			int e;
			k = enum_from_name(alloc_kind_names, ELEMENTSOF(alloc_kind_names), val, f,
					   "argument, alloc, global", &e, err);
			a->kind = (Pim__AllocKind)e;
		} else
			k = err_set(err, -EINVAL, "%s: unknown key", f);
		if (k < 0)
			return k;
	}
	if (!have_id)
		return err_set(err, -EINVAL, "%s.id: missing", field);
	return 0;
}

static void manifest_freep(Pim__Manifest **m)
{
	if (*m)
		pim__manifest__free_unpacked(*m, NULL);
}

static void json_putp(json_object **o)
{
	if (*o)
		json_object_put(*o);
}

/*
 * json-c keeps the last of duplicate keys without a word, so a manifest saying "n_par" twice
 * would mean what its last line says.  The text is scanned for them once it parsed (so it is
 * valid JSON).  Keys are compared decoded ("n\u0061me" is "name"); a key of more than
 * JSON_KEY_MAX bytes, or with escapes beyond ASCII, or the keys of an object past its first
 * JSON_KEYS_MAX, are not tracked: none of them can be a known key, and unknown keys are refused.
 */
#define JSON_KEY_MAX 32
#define JSON_KEYS_MAX 16
#define JSON_DEPTH_MAX 64

struct json_frame {
	bool object, want_key;
	unsigned n;
	char keys[JSON_KEYS_MAX][JSON_KEY_MAX + 1];
};

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Decodes the JSON string s[0..n) (without quotes) into key; false if it cannot be a known key. */
static bool json_key_decode(const char *s, size_t n, char key[JSON_KEY_MAX + 1])
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '\\' && i + 1 < n) {
			c = s[++i];
			if (c == 'u') {
				int v = 0;
				for (int h = 0; h < 4; h++) {
					int x = i + 1 < n ? hexval(s[++i]) : -1;
					if (x < 0)
						return false;
					v = v << 4 | x;
				}
				if (v == 0 || v >= 0x80)
					return false;
				c = (char)v;
			} else if (c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') {
				return false;
			}
		}
		if (k == JSON_KEY_MAX)
			return false;
		key[k++] = c;
	}
	key[k] = 0;
	return true;
}

static int json_duplicate_keys(const char *buf, size_t len, struct pim_error *err)
{
	_cleanup_(freep) struct json_frame *st = calloc(JSON_DEPTH_MAX, sizeof *st);
	size_t depth = 0, line = 1;

	if (!st)
		return err_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < len; i++) {
		char c = buf[i];
		if (c == '"') {
			size_t j = i + 1;
			while (j < len && buf[j] != '"')
				j += buf[j] == '\\' ? 2 : 1;
			struct json_frame *f = depth ? &st[depth - 1] : NULL;
			if (f && f->object && f->want_key) {
				char key[JSON_KEY_MAX + 1];
				f->want_key = false;
				if (j <= len && f->n < JSON_KEYS_MAX && json_key_decode(buf + i + 1, j - i - 1, key)) {
					for (unsigned k = 0; k < f->n; k++)
						if (strcmp(f->keys[k], key) == 0)
							return err_set(err, -EINVAL, "manifest: duplicate key \"%s\" "
								       "near line %zu", key, line);
					memcpy(f->keys[f->n++], key, sizeof key);
				}
			}
			i = j;
		} else if (c == '{' || c == '[') {
			if (depth == JSON_DEPTH_MAX)
				return err_set(err, -EINVAL, "manifest: nested more than %d deep", JSON_DEPTH_MAX);
			st[depth].object = c == '{';
			st[depth].want_key = c == '{';
			st[depth].n = 0;
			depth++;
		} else if (c == '}' || c == ']') {
			if (depth)
				depth--;
		} else if (c == ',') {
			if (depth && st[depth - 1].object)
				st[depth - 1].want_key = true;
		} else if (c == '\n') {
			line++;
		}
	}
	return 0;
}

int manifest_from_json(const char *buf, size_t len, Pim__Manifest **out, struct pim_error *err)
{
	_cleanup_(json_putp) json_object *root = NULL;
	_cleanup_(manifest_freep) Pim__Manifest *m = NULL;
	json_tokener *tok;
	enum json_tokener_error jerr;
	int k;

	if (len > MANIFEST_FILE_MAX || len > INT32_MAX)
		return err_set(err, -EFBIG, "manifest: %zu bytes, at most %u allowed", len, MANIFEST_FILE_MAX);
	tok = json_tokener_new_ex(64);
	if (!tok)
		return err_set(err, -ENOMEM, "out of memory");
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	root = json_tokener_parse_ex(tok, buf, (int)len);
	jerr = json_tokener_get_error(tok);
	size_t consumed = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (!root || jerr != json_tokener_success) {
		/* Report the line of the error to help whoever edits the file by hand. */
		size_t line = 1;
		for (size_t i = 0; i < consumed && i < len; i++)
			line += buf[i] == '\n';
		return err_set(err, -EINVAL, "manifest: JSON syntax error near line %zu: %s", line,
			       root ? "trailing data"
			       : jerr == json_tokener_continue ? "unexpected end of input"
							       : json_tokener_error_desc(jerr));
	}
	for (size_t i = consumed; i < len; i++)
		if (buf[i] != ' ' && buf[i] != '\n' && buf[i] != '\t' && buf[i] != '\r')
			return err_set(err, -EINVAL, "manifest: trailing data after the JSON object");
	if (!json_object_is_type(root, json_type_object))
		return err_set(err, -EINVAL, "manifest: the top level must be a JSON object");
	if ((k = json_duplicate_keys(buf, consumed, err)) < 0)
		return k;

	m = malloc(sizeof *m);
	if (!m)
		return err_set(err, -ENOMEM, "out of memory");
	pim__manifest__init(m);

	FOREACH_KEY(root, key, val) {
		if (strcmp(key, "name") == 0)
			k = json_str(val, "name", &m->name, err);
		else if (strcmp(key, "source") == 0)
			k = json_str(val, "source", &m->source, err);
		else if (strcmp(key, "allocations") == 0) {
			size_t n;
			if ((k = json_array(val, "allocations", MANIFEST_ALLOCATIONS_MAX, &n, err)) < 0)
				return k;
			m->allocations = calloc(n ? n : 1, sizeof *m->allocations);
			if (!m->allocations)
				return err_set(err, -ENOMEM, "out of memory");
			for (size_t i = 0; i < n && k >= 0; i++) {
				Pim__Allocation *a = malloc(sizeof *a);
				if (!a)
					return err_set(err, -ENOMEM, "out of memory");
				pim__allocation__init(a);
				m->allocations[m->n_allocations++] = a;
				char f[64];
				snprintf(f, sizeof f, "allocations[%zu]", i);
				k = json_allocation(json_object_array_get_idx(val, i), f, a, err);
			}
		} else if (strcmp(key, "regions") == 0) {
			size_t n;
			if ((k = json_array(val, "regions", MANIFEST_REGIONS_MAX, &n, err)) < 0)
				return k;
			m->regions = calloc(n ? n : 1, sizeof *m->regions);
			if (!m->regions)
				return err_set(err, -ENOMEM, "out of memory");
			for (size_t i = 0; i < n && k >= 0; i++) {
				Pim__Region *r = malloc(sizeof *r);
				if (!r)
					return err_set(err, -ENOMEM, "out of memory");
				pim__region__init(r);
				m->regions[m->n_regions++] = r;
				char f[64];
				snprintf(f, sizeof f, "regions[%zu]", i);
				k = json_region(json_object_array_get_idx(val, i), f, r, err);
			}
		} else
			k = err_set(err, -EINVAL, "%s: unknown key", key);
		if (k < 0)
			return k;
	}
	*out = TAKE_PTR(m);
	return 0;
}

int manifest_read_file(const char *path, Pim__Manifest **out, struct pim_error *err)
{
	_cleanup_(freep) char *buf = NULL;
	_cleanup_(manifest_freep) Pim__Manifest *m = NULL;
	size_t len;
	int k;

	if ((k = read_file(path, MANIFEST_FILE_MAX, &buf, &len, err)) < 0)
		return k;
	size_t i = 0;
	while (i < len && (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\t' || buf[i] == '\r'))
		i++;
	if (i < len && buf[i] == '{') {
		if ((k = manifest_from_json(buf, len, &m, err)) < 0)
			return err_prefix(err, "%s", path);
	} else {
		m = pim__manifest__unpack(NULL, len, (const uint8_t *)buf);
		if (!m)
			return err_set(err, -EINVAL, "%s: neither JSON nor a valid protobuf Manifest", path);
	}
	if ((k = manifest_validate(m, err)) < 0)
		return err_prefix(err, "%s", path);
	*out = TAKE_PTR(m);
	return 0;
}

/* ---------------------------------------------------------------- JSON out */

static json_object *json_u64_new(uint64_t v)
{
	return v > INT64_MAX ? json_object_new_uint64(v) : json_object_new_int64((int64_t)v);
}

json_object *manifest_to_json(const Pim__Manifest *m)
{
	json_object *root = json_object_new_object();
	json_object *allocs = json_object_new_array_ext((int)m->n_allocations);
	json_object *regions = json_object_new_array_ext((int)m->n_regions);

	json_object_object_add(root, "name", json_object_new_string(m->name));
	if (m->source && *m->source)
		json_object_object_add(root, "source", json_object_new_string(m->source));
	for (size_t i = 0; i < m->n_allocations; i++) {
		const Pim__Allocation *a = m->allocations[i];
		json_object *o = json_object_new_object();
		json_object_object_add(o, "id", json_object_new_int64(a->id));
		json_object_object_add(o, "bytes", json_u64_new(a->bytes));
		json_object_object_add(o, "kind", json_object_new_string(manifest_alloc_kind_name(a->kind)));
		if (a->name && *a->name)
			json_object_object_add(o, "name", json_object_new_string(a->name));
		json_object_array_add(allocs, o);
	}
	for (size_t i = 0; i < m->n_regions; i++) {
		const Pim__Region *r = m->regions[i];
		json_object *o = json_object_new_object();
		json_object_object_add(o, "id", json_object_new_int64(r->id));
		json_object_object_add(o, "name", json_object_new_string(r->name));
		json_object_object_add(o, "op", json_object_new_string(r->op));
		json_object_object_add(o, "order", json_object_new_int64(r->order));
		json_object_object_add(o, "n_par", json_u64_new(r->n_par));
		json_object_object_add(o, "n_total", json_u64_new(r->n_total));
		json_object_object_add(o, "trip", json_u64_new(r->trip ? r->trip : 1));
		if (r->n_parallel_extents || r->n_reduction_extents) {
			json_object *pe = json_object_new_array(), *re = json_object_new_array();
			for (size_t j = 0; j < r->n_parallel_extents; j++)
				json_object_array_add(pe, json_u64_new(r->parallel_extents[j]));
			for (size_t j = 0; j < r->n_reduction_extents; j++)
				json_object_array_add(re, json_u64_new(r->reduction_extents[j]));
			json_object_object_add(o, "parallel_extents", pe);
			json_object_object_add(o, "reduction_extents", re);
		}
		if (r->location && *r->location)
			json_object_object_add(o, "location", json_object_new_string(r->location));
		json_object *ops = json_object_new_array_ext((int)r->n_operands);
		for (size_t j = 0; j < r->n_operands; j++) {
			const Pim__Operand *op = r->operands[j];
			json_object *p = json_object_new_object();
			json_object_object_add(p, "allocation", json_object_new_int64(op->allocation_id));
			json_object_object_add(p, "bytes", json_u64_new(op->bytes));
			if (op->elem_type && *op->elem_type)
				json_object_object_add(p, "elem_type", json_object_new_string(op->elem_type));
			if (op->elem_bits)
				json_object_object_add(p, "elem_bits", json_object_new_int64(op->elem_bits));
			json_object_object_add(p, "role", json_object_new_string(manifest_role_name(op->role)));
			json_object_array_add(ops, p);
		}
		json_object_object_add(o, "operands", ops);
		json_object_array_add(regions, o);
	}
	json_object_object_add(root, "allocations", allocs);
	json_object_object_add(root, "regions", regions);
	return root;
}
