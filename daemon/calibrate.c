/* SPDX-License-Identifier: MIT */
/*
 * calibrate.c: θ/σ sweep against end-to-end labels (doc/design.md §3; the paper's §4.4 sweep).
 */
#include "calibrate.h"

#include <math.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------------ region lookup */

/*
 * Two open-addressing tables over the regions: by id and by name.  A slot keeps the first region
 * with its key and remembers whether another one shares it (ambiguous).
 */
struct region_index {
	const struct placement_region *regions;
	size_t cap;
	uint32_t *by_id, *by_name; /* region index, UINT32_MAX: empty */
	bool *id_dup, *name_dup;
};

static void region_index_free(struct region_index *x)
{
	free(x->by_id);
	free(x->by_name);
	free(x->id_dup);
	free(x->name_dup);
}

static uint64_t hash_u32(uint32_t v)
{
	uint64_t x = v;

	x ^= x >> 16;
	x *= UINT64_C(0x45d9f3b3335b369);
	x ^= x >> 29;
	return x;
}

static uint64_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = UINT64_C(14695981039346656037);

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * UINT64_C(1099511628211);
	return h;
}

static bool name_eq(const char *name, const char *s, size_t n)
{
	return name && strlen(name) == n && memcmp(name, s, n) == 0;
}

static int region_index_build(struct region_index *x, const struct placement_region *regions, size_t n,
			      struct pim_error *err)
{
	size_t cap = 16;

	if (n >= UINT32_MAX)
		return err_set(err, -E2BIG, "labels: %zu regions; at most %u", n, UINT32_MAX - 1);
	while (cap < 2 * n)
		cap <<= 1;
	x->regions = regions;
	x->cap = cap;
	x->by_id = malloc(cap * sizeof *x->by_id);
	x->by_name = malloc(cap * sizeof *x->by_name);
	x->id_dup = calloc(cap, sizeof *x->id_dup);
	x->name_dup = calloc(cap, sizeof *x->name_dup);
	if (!x->by_id || !x->by_name || !x->id_dup || !x->name_dup)
		return err_set(err, -ENOMEM, "labels: out of memory indexing %zu regions", n);
	for (size_t k = 0; k < cap; k++)
		x->by_id[k] = x->by_name[k] = UINT32_MAX;

	for (size_t i = 0; i < n; i++) {
		const struct placement_region *r = &regions[i];
		size_t h = hash_u32(r->id) & (cap - 1);

		while (x->by_id[h] != UINT32_MAX && regions[x->by_id[h]].id != r->id)
			h = (h + 1) & (cap - 1);
		if (x->by_id[h] == UINT32_MAX)
			x->by_id[h] = (uint32_t)i;
		else
			x->id_dup[h] = true;

		if (!r->name)
			continue;
		size_t len = strlen(r->name);
		h = hash_bytes(r->name, len) & (cap - 1);
		while (x->by_name[h] != UINT32_MAX && !name_eq(regions[x->by_name[h]].name, r->name, len))
			h = (h + 1) & (cap - 1);
		if (x->by_name[h] == UINT32_MAX)
			x->by_name[h] = (uint32_t)i;
		else
			x->name_dup[h] = true;
	}
	return 0;
}

/* Slot of key, or SIZE_MAX. */
static size_t lookup_id(const struct region_index *x, uint32_t id)
{
	size_t h = hash_u32(id) & (x->cap - 1);

	for (; x->by_id[h] != UINT32_MAX; h = (h + 1) & (x->cap - 1))
		if (x->regions[x->by_id[h]].id == id)
			return h;
	return SIZE_MAX;
}

static size_t lookup_name(const struct region_index *x, const char *s, size_t n)
{
	size_t h = hash_bytes(s, n) & (x->cap - 1);

	for (; x->by_name[h] != UINT32_MAX; h = (h + 1) & (x->cap - 1))
		if (name_eq(x->regions[x->by_name[h]].name, s, n))
			return h;
	return SIZE_MAX;
}

/* ------------------------------------------------------------------ label parsing */

#define FIELD_MAX 256 /* longest region field accepted (manifest names are at most 256) */

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static void trim(const char **s, size_t *n)
{
	while (*n > 0 && is_blank(**s))
		(*s)++, (*n)--;
	while (*n > 0 && is_blank((*s)[*n - 1]))
		(*n)--;
}

static bool field_is(const char *s, size_t n, const char *word)
{
	return strlen(word) == n && strncasecmp(s, word, n) == 0;
}

/* 1 true, 0 false, -1 not a boolean */
static int parse_bool(const char *s, size_t n)
{
	static const char *const yes[] = { "1", "yes", "true" }, *const no[] = { "0", "no", "false" };

	for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
		if (field_is(s, n, yes[i]))
			return 1;
		if (field_is(s, n, no[i]))
			return 0;
	}
	return -1;
}

/* A decimal uint32 with only digits, or false. */
static bool parse_id(const char *s, size_t n, uint32_t *out)
{
	uint64_t v = 0;

	if (n == 0 || n > 10)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

static int label_region_text(char *b, size_t n, const struct placement_region *r)
{
	return r->name ? snprintf(b, n, "region %u (%s)", r->id, r->name) : snprintf(b, n, "region %u", r->id);
}

/* Resolves the region field to an index, or fails with a message naming the line. */
static int resolve_region(const struct region_index *x, const char *s, size_t n, unsigned line, size_t *out,
			  struct pim_error *err)
{
	uint32_t id;
	size_t h;

	if (parse_id(s, n, &id) && (h = lookup_id(x, id)) != SIZE_MAX) {
		if (x->id_dup[h])
			return err_set(err, -EINVAL, "labels line %u: region id %u is shared by several regions",
				       line, id);
		*out = x->by_id[h];
		return 0;
	}
	h = lookup_name(x, s, n);
	if (h == SIZE_MAX)
		return err_set(err, -EINVAL, "labels line %u: unknown region '%.*s' (neither an id nor a name)",
			       line, (int)(n > 64 ? 64 : n), s);
	if (x->name_dup[h])
		return err_set(err, -EINVAL,
			       "labels line %u: region name '%.*s' is ambiguous (several regions): use the id",
			       line, (int)(n > 64 ? 64 : n), s);
	*out = x->by_name[h];
	return 0;
}

void calibrate_labels_free(struct calibrate_labels *l)
{
	if (!l)
		return;
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

int calibrate_parse_labels(const char *buf, size_t len, const struct placement_region *regions,
			   size_t n_regions, struct calibrate_labels *out, struct pim_error *err)
{
	_cleanup_(region_index_free) struct region_index x = { 0 };
	_cleanup_(freep) unsigned *seen = NULL; /* per region: line that labelled it, 0 none */
	_cleanup_(calibrate_labels_free) struct calibrate_labels l = { 0 };
	bool header = false;
	unsigned line = 0;
	int rc;

	if (!out)
		return err_set(err, -EINVAL, "labels: no result given");
	out->v = NULL;
	out->n = 0;
	if (len > 0 && !buf)
		return err_set(err, -EINVAL, "labels: no buffer");
	if (len > CALIBRATE_LABELS_MAX_BYTES)
		return err_set(err, -EFBIG, "labels: %zu bytes is more than the %u accepted", len,
			       CALIBRATE_LABELS_MAX_BYTES);
	if (n_regions > 0 && !regions)
		return err_set(err, -EINVAL, "labels: no regions to resolve against");
	rc = region_index_build(&x, regions, n_regions, err);
	if (rc < 0)
		return rc;
	seen = calloc(n_regions ? n_regions : 1, sizeof *seen);
	l.v = malloc((n_regions ? n_regions : 1) * sizeof *l.v);
	if (!seen || !l.v)
		return err_set(err, -ENOMEM, "labels: out of memory");

	for (size_t pos = 0; pos < len;) {
		const char *s = buf + pos, *nl = memchr(s, '\n', len - pos), *hash, *comma;
		size_t n = nl ? (size_t)(nl - s) : len - pos;

		pos += n + (nl ? 1 : 0);
		line++;
		if (memchr(s, '\0', n))
			return err_set(err, -EINVAL, "labels line %u: NUL byte in text", line);
		if (n > 0 && s[n - 1] == '\r')
			n--;
		if ((hash = memchr(s, '#', n)))
			n = (size_t)(hash - s);
		trim(&s, &n);
		if (n == 0)
			continue;

		comma = memchr(s, ',', n);
		if (!comma || memchr(comma + 1, ',', n - (size_t)(comma + 1 - s)))
			return err_set(err, -EINVAL, "labels line %u: expected two fields 'region,beneficial'%s",
				       line, comma ? ", got more" : ", found no comma");
		const char *f1 = s, *f2 = comma + 1;
		size_t n1 = (size_t)(comma - s), n2 = n - n1 - 1;
		trim(&f1, &n1);
		trim(&f2, &n2);

		if (!header) {
			if (!field_is(f1, n1, "region") || !field_is(f2, n2, "beneficial"))
				return err_set(err, -EINVAL,
					       "labels line %u: expected the header 'region,beneficial'", line);
			header = true;
			continue;
		}
		if (n1 == 0)
			return err_set(err, -EINVAL, "labels line %u: empty region field", line);
		if (n1 > FIELD_MAX)
			return err_set(err, -EINVAL, "labels line %u: region field longer than %d bytes", line,
				       FIELD_MAX);
		int b = parse_bool(f2, n2);
		if (b < 0)
			return err_set(err, -EINVAL,
				       "labels line %u: beneficial '%.*s' is not one of 1/0/yes/no/true/false",
				       line, (int)(n2 > 32 ? 32 : n2), f2);
		size_t ri = 0;
		rc = resolve_region(&x, f1, n1, line, &ri, err);
		if (rc < 0)
			return rc;
		if (seen[ri]) {
			char what[160];
			label_region_text(what, sizeof what, &regions[ri]);
			return err_set(err, -EINVAL, "labels line %u: %s already labelled on line %u", line, what,
				       seen[ri]);
		}
		seen[ri] = line;
		l.v[l.n++] = (struct calibrate_label){ .region = ri, .beneficial = b == 1, .line = line };
	}
	if (!header)
		return err_set(err, -EINVAL, "labels: no header line 'region,beneficial' (file is empty)");
	*out = l;
	l.v = NULL;
	l.n = 0;
	return 0;
}

/* ------------------------------------------------------------------ sweep */

struct calibrate_sweep calibrate_sweep_default(void)
{
	return (struct calibrate_sweep){ .theta_lo = 0.5e9, .theta_hi = 4.0e9, .theta_step = 0.01e9 };
}

void calibrate_result_free(struct calibrate_result *r)
{
	if (!r)
		return;
	free(r->points);
	free(r->suggestions);
	memset(r, 0, sizeof *r);
}

/* What the sweep needs of a labelled region: Stage 1 does not depend on θ or σ. */
struct labelled {
	bool stage1, beneficial;
	double bw, f_store; /* NAN: not evaluable */
};

/* The same comparisons as placement.c's C3/C4 (lhs >= rhs), at a given θ and σ. */
static void evaluate(const struct labelled *v, size_t n, double theta, double sigma, struct calibrate_point *pt)
{
	*pt = (struct calibrate_point){ .theta = theta, .sigma = sigma };
	for (size_t i = 0; i < n; i++) {
		bool sel = v[i].stage1 && ((!isnan(v[i].bw) && v[i].bw >= theta) ||
					   (!isnan(v[i].f_store) && v[i].f_store >= sigma));
		pt->selected += sel;
		if (sel)
			*(v[i].beneficial ? &pt->tp : &pt->fp) += 1;
		else
			*(v[i].beneficial ? &pt->fn : &pt->tn) += 1;
	}
	pt->accuracy = n ? (double)(pt->tp + pt->tn) / (double)n : 0;
}

/* Longest run of grid points minimising (FP, FN), first on ties; see calibrate.h. */
static void suggest(const struct calibrate_point *pts, size_t nt, const struct labelled *v, size_t n,
		    struct calibrate_suggestion *s)
{
	size_t best_fp = SIZE_MAX, best_fn = SIZE_MAX, run_start = 0, best_start = 0, best_len = 0;

	for (size_t t = 0; t < nt; t++)
		if (pts[t].fp < best_fp || (pts[t].fp == best_fp && pts[t].fn < best_fn))
			best_fp = pts[t].fp, best_fn = pts[t].fn;
	for (size_t t = 0; t <= nt; t++) {
		bool in = t < nt && pts[t].fp == best_fp && pts[t].fn == best_fn;
		bool was = t > 0 && pts[t - 1].fp == best_fp && pts[t - 1].fn == best_fn;

		if (in && !was)
			run_start = t;
		if (!in && was && t - run_start > best_len) {
			best_start = run_start;
			best_len = t - run_start;
		}
	}
	s->sigma = pts[0].sigma;
	s->lo = pts[best_start].theta;
	s->hi = pts[best_start + best_len - 1].theta;
	s->theta = (s->lo + s->hi) / 2;
	evaluate(v, n, s->theta, s->sigma, &s->at);
}

int calibrate_run(const struct placement_region *regions, size_t n, const struct placement_params *p,
		  const struct calibrate_labels *labels, const struct calibrate_sweep *sweep,
		  struct calibrate_result *out, struct pim_error *err)
{
	_cleanup_(freep) struct labelled *v = NULL;
	_cleanup_(calibrate_result_free) struct calibrate_result res = { 0 };
	struct calibrate_sweep ds = calibrate_sweep_default();
	double span;
	int rc;

	if (!out)
		return err_set(err, -EINVAL, "calibrate: no result given");
	memset(out, 0, sizeof *out);
	rc = placement_params_validate(p, err);
	if (rc < 0)
		return rc;
	if (!sweep)
		sweep = &ds;
	if (!labels || labels->n == 0)
		return err_set(err, -EINVAL, "calibrate: no labelled regions (labels file has only a header?)");
	if (!isfinite(sweep->theta_lo) || sweep->theta_lo < 0)
		return err_set(err, -EINVAL, "calibrate: theta_lo=%g must be a finite number >= 0 B/s",
			       sweep->theta_lo);
	if (!isfinite(sweep->theta_hi) || sweep->theta_hi < sweep->theta_lo)
		return err_set(err, -EINVAL, "calibrate: theta_hi=%g must be finite and >= theta_lo=%g",
			       sweep->theta_hi, sweep->theta_lo);
	if (!isfinite(sweep->theta_step) || sweep->theta_step <= 0)
		return err_set(err, -EINVAL, "calibrate: theta_step=%g must be a finite number > 0 B/s",
			       sweep->theta_step);
	/* tolerate hi landing a rounding error below a grid point (0.5 + 350·0.01 = 4.0) */
	span = (sweep->theta_hi - sweep->theta_lo) / sweep->theta_step;
	if (span >= CALIBRATE_MAX_POINTS)
		return err_set(err, -E2BIG, "calibrate: %.0f θ values exceed the limit of %u", span + 1,
			       CALIBRATE_MAX_POINTS);
	res.n_thetas = (size_t)floor(span + 1e-9) + 1;
	res.n_sigmas = sweep->sigmas && sweep->n_sigmas ? sweep->n_sigmas : 1;
	if (res.n_sigmas > CALIBRATE_MAX_POINTS / res.n_thetas)
		return err_set(err, -E2BIG, "calibrate: %zu θ values × %zu σ values exceed the limit of %u points",
			       res.n_thetas, res.n_sigmas, CALIBRATE_MAX_POINTS);
	for (size_t k = 0; sweep->sigmas && k < sweep->n_sigmas; k++)
		if (!isfinite(sweep->sigmas[k]) || sweep->sigmas[k] < 0 || sweep->sigmas[k] > 1)
			return err_set(err, -EINVAL, "calibrate: σ #%zu is %g: must lie in [0, 1]", k + 1,
				       sweep->sigmas[k]);

	v = calloc(labels->n, sizeof *v);
	if (!v)
		return err_set(err, -ENOMEM, "calibrate: out of memory");
	for (size_t i = 0; i < labels->n; i++) {
		const struct calibrate_label *lb = &labels->v[i];
		struct placement_decision d;

		if (lb->region >= n)
			return err_set(err, -EINVAL, "calibrate: label #%zu refers to region index %zu of %zu", i + 1,
				       lb->region, n);
		rc = placement_region_validate(&regions[lb->region], lb->region, err);
		if (rc < 0)
			return rc;
		placement_decide_region(&regions[lb->region], p, &d);
		/* The sweep's θ is this host's; counts measured on a host of another B_cpu compare with
		 * θ scaled by its B_cpu (θ = theta_ratio·B_cpu), i.e. their BW_read scaled to this host. */
		double src = regions[lb->region].b_cpu_source;
		v[i] = (struct labelled){
			.stage1 = d.cond[PL_C1].state == PL_COND_TRUE && d.cond[PL_C2].state == PL_COND_TRUE,
			.beneficial = lb->beneficial,
			.bw = d.cond[PL_C3].lhs * (src > 0 ? p->b_cpu / src : 1),
			.f_store = d.cond[PL_C4].lhs,
		};
		res.n_beneficial += lb->beneficial;
	}
	res.n_labelled = labels->n;

	res.points = calloc(res.n_thetas * res.n_sigmas, sizeof *res.points);
	res.suggestions = calloc(res.n_sigmas, sizeof *res.suggestions);
	if (!res.points || !res.suggestions)
		return err_set(err, -ENOMEM, "calibrate: out of memory for %zu points", res.n_thetas * res.n_sigmas);
	for (size_t s = 0; s < res.n_sigmas; s++) {
		double sigma = sweep->sigmas && sweep->n_sigmas ? sweep->sigmas[s] : p->sigma;
		struct calibrate_point *row = &res.points[s * res.n_thetas];

		for (size_t t = 0; t < res.n_thetas; t++)
			evaluate(v, labels->n, sweep->theta_lo + (double)t * sweep->theta_step, sigma, &row[t]);
		suggest(row, res.n_thetas, v, labels->n, &res.suggestions[s]);
		if (res.suggestions[s].at.accuracy > res.suggestions[res.best].at.accuracy)
			res.best = s;
	}
	*out = res;
	memset(&res, 0, sizeof res);
	return 0;
}
