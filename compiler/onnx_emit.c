/* SPDX-License-Identifier: MIT */
/*
 * onnx_emit.c: emission helpers of the importer (onnx_internal.h).  SSA names, constants
 * materialized as arith.constant, tensor.empty and linalg.fill, linalg.generic with its
 * indexing maps and payload template, broadcast, elementwise nests, copies and reshapes; and
 * the index arithmetic that folding at import shares (flattening, broadcast offsets, axes).
 */
#include "onnx_internal.h"

/* ---------------------------------------------------------------- emission */

long new_ssa(struct imp *m) { return m->ssa++; }

/* The payload converting one float type ($T) to another ($U): f16 and bf16, of one width,
 * go through f32. */
const char *float_conv(enum dt from, enum dt to)
{
	if (from == to)
		return "$0\n";
	if (DT_SIZE[to] > DT_SIZE[from])
		return "#0 = arith.extf $0 : $T to $U\n#0";
	if (DT_SIZE[to] < DT_SIZE[from])
		return "#0 = arith.truncf $0 : $T to $U\n#0";
	return "#0 = arith.extf $0 : $T to f32\n#1 = arith.truncf #0 : f32 to $U\n#1";
}

/* Counts the linalg ops made (the extractor names each region NODE.K from its location). */
void count_linalg(struct imp *m)
{
	m->nest++;
	m->n_linalg++;
}

/* The value as an SSA name: a constant is materialized once (arith.constant). */
long ssa_of(struct imp *m, struct val *v)
{
	if (v->ssa >= 0)
		return v->ssa;
	char ty[256];
	vtype(ty, sizeof ty, v);
	v->ssa = new_ssa(m);
	v->is_view = true;
	size_t bytes = (size_t)numel(v) * DT_SIZE[v->dt];
	if (m->zero_min && bytes >= m->zero_min) {
		/* --weights zero: the extractor turns this splat into a zeroed global; the text
		 * stays small whatever the weights weigh. */
		strbuf_printf(&m->body, "    %%v%ld = arith.constant dense<%s> : %s %s\n", v->ssa,
			dt_float(v->dt) ? "0.0" : "0", ty, m->loc);
		return v->ssa;
	}
	strbuf_printf(&m->body, "    %%v%ld = arith.constant dense<\"0x", v->ssa);
	static const char hex[] = "0123456789ABCDEF";
	const uint8_t *p = v->data;
	char chunk[1024];
	size_t k = 0;
	for (size_t i = 0; i < bytes; i++) {
		chunk[k++] = hex[p[i] >> 4];
		chunk[k++] = hex[p[i] & 15];
		if (k == sizeof chunk) {
			strbuf_put(&m->body, chunk, k);
			k = 0;
		}
	}
	strbuf_put(&m->body, chunk, k);
	strbuf_printf(&m->body, "\"> : %s %s\n", ty, m->loc);
	return v->ssa;
}

/* %vN = tensor.empty() : T */
long emit_empty(struct imp *m, enum dt t, size_t rank, const int64_t *dims)
{
	char ty[256];
	tensor_type(ty, sizeof ty, t, rank, dims);
	long id = new_ssa(m);
	strbuf_printf(&m->body, "    %%v%ld = tensor.empty() : %s %s\n", id, ty, m->loc);
	return id;
}

/* linalg.fill of a fresh tensor with a scalar literal. */
long emit_filled(struct imp *m, enum dt t, size_t rank, const int64_t *dims, const char *lit)
{
	char ty[256];
	tensor_type(ty, sizeof ty, t, rank, dims);
	long e = emit_empty(m, t, rank, dims);
	long c = new_ssa(m);
	strbuf_printf(&m->body, "    %%v%ld = arith.constant %s : %s %s\n", c, lit, DT_MLIR[t], m->loc);
	long f = new_ssa(m);
	count_linalg(m);
	strbuf_printf(&m->body, "    %%v%ld = linalg.fill ins(%%v%ld : %s) outs(%%v%ld : %s) -> %s %s\n", f, c,
		DT_MLIR[t], e, ty, ty, m->loc);
	return f;
}

void gop_set(struct gop *g, long ssa, enum dt t, size_t rank, const int64_t *dims)
{
	g->ssa = ssa;
	g->dt = t;
	tensor_type(g->type, sizeof g->type, t, rank, dims);
	g->map[0] = 0;
}

void map_add(struct gop *g, const char *fmt, ...)
{
	size_t k = strlen(g->map);
	va_list ap;
	if (k && k + 2 < sizeof g->map) {
		strcat(g->map, ", ");
		k += 2;
	}
	va_start(ap, fmt);
	vsnprintf(g->map + k, sizeof g->map - k, fmt, ap);
	va_end(ap);
}

/*
 * Writes a linalg.generic over ndims loops (red[i]: reduction) with the given ins and one
 * out, and the payload tmpl expanded: $0..$9 the ins' block arguments, $o the out's, $T the
 * element type of in 0, $U of the out, #0..#9 payload temporaries.  The last line of tmpl is
 * the yielded value.  Returns the result's SSA id.
 */
long emit_generic(struct imp *m, size_t ndims, const bool *red, const struct gop *ins,
			 size_t nins, const struct gop *out, const char *tmpl)
{
	long id = new_ssa(m);
	char dl[256] = "";
	size_t k = 0;

	for (size_t i = 0; i < ndims; i++)
		k += (size_t)snprintf(dl + k, sizeof dl - k, "%sd%zu", i ? ", " : "", i);
	strbuf_printf(&m->body, "    %%v%ld = linalg.generic {indexing_maps = [", id);
	for (size_t i = 0; i <= nins; i++) {
		const struct gop *g = i < nins ? &ins[i] : out;
		strbuf_printf(&m->body, "%saffine_map<(%s) -> (%s)>", i ? ", " : "", dl, g->map);
	}
	strbuf_puts(&m->body, "], iterator_types = [");
	for (size_t i = 0; i < ndims; i++)
		strbuf_printf(&m->body, "%s\"%s\"", i ? ", " : "", red && red[i] ? "reduction" : "parallel");
	count_linalg(m);
	strbuf_puts(&m->body, "]}");
	if (nins) {
		strbuf_puts(&m->body, " ins(");
		for (size_t i = 0; i < nins; i++)
			strbuf_printf(&m->body, "%s%%v%ld", i ? ", " : "", ins[i].ssa);
		strbuf_puts(&m->body, " : ");
		for (size_t i = 0; i < nins; i++)
			strbuf_printf(&m->body, "%s%s", i ? ", " : "", ins[i].type);
		strbuf_puts(&m->body, ")");
	}
	strbuf_printf(&m->body, " outs(%%v%ld : %s) {\n    ^bb0(", out->ssa, out->type);
	for (size_t i = 0; i < nins; i++)
		strbuf_printf(&m->body, "%%a%ld_%zu: %s, ", id, i, DT_MLIR[ins[i].dt]);
	strbuf_printf(&m->body, "%%a%ld_o: %s):\n      ", id, DT_MLIR[out->dt]);
	const char *last = tmpl;
	for (const char *p = tmpl; *p; p++)
		if (*p == '\n' && p[1])
			last = p + 1;
	for (const char *p = tmpl; *p; p++) {
		if (p == last) {
			strbuf_printf(&m->body, "linalg.yield ");
		}
		if (*p == '$' && p[1] >= '0' && p[1] <= '9') {
			strbuf_printf(&m->body, "%%a%ld_%c", id, p[1]);
			p++;
		} else if (*p == '$' && p[1] == 'o') {
			strbuf_printf(&m->body, "%%a%ld_o", id);
			p++;
		} else if (*p == '$' && p[1] == 'T') {
			strbuf_puts(&m->body, DT_MLIR[nins ? ins[0].dt : out->dt]);
			p++;
		} else if (*p == '$' && p[1] == 'U') {
			strbuf_puts(&m->body, DT_MLIR[out->dt]);
			p++;
		} else if (*p == '#' && p[1] >= '0' && p[1] <= '9') {
			strbuf_printf(&m->body, "%%t%ld_%c", id, p[1]);
			p++;
		} else if (*p == '\n') {
			if (p[1])
				strbuf_puts(&m->body, "\n      ");
		} else {
			strbuf_put(&m->body, p, 1);
		}
	}
	strbuf_printf(&m->body, " : %s\n    } -> %s %s\n", DT_MLIR[out->dt], out->type, m->loc);
	return id;
}

long generic(struct imp *m, size_t ndims, const bool *red, const struct gop *ins, size_t nins,
		    const struct gop *out, const char *tmpl)
{
	return emit_generic(m, ndims, red, ins, nins, out, tmpl);
}

/* An SSA-only value of the given shape. */
struct val *val_ssa(enum dt t, size_t rank, const int64_t *dims, long ssa)
{
	struct val *v = val_new(t, rank, dims);
	if (v)
		v->ssa = ssa;
	return v;
}

/* Broadcast of shapes (numpy rules). */
int broadcast(struct imp *m, struct val *const *in, size_t n, size_t *rank, int64_t *dims)
{
	*rank = 0;
	for (size_t i = 0; i < n; i++)
		if (in[i]->rank > *rank)
			*rank = in[i]->rank;
	for (size_t d = 0; d < *rank; d++)
		dims[d] = 1;
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < in[i]->rank; j++) {
			size_t d = *rank - in[i]->rank + j;
			int64_t a = dims[d], b = in[i]->dims[j];
			if (a == 1)
				dims[d] = b;
			else if (b != 1 && b != a)
				return refuse(m, "inputs do not broadcast (dimension %zu: %" PRId64 " and %" PRId64 ")",
					      d, a, b);
		}
	return 0;
}

/* The operand of v read at the loops of an output of rank/dims, right-aligned broadcast. */
void gop_bcast(struct imp *m, struct gop *g, struct val *v, size_t rank, const int64_t *dims)
{
	gop_set(g, ssa_of(m, v), v->dt, v->rank, v->dims);
	for (size_t j = 0; j < v->rank; j++) {
		size_t d = rank - v->rank + j;
		if (v->dims[j] == 1 && dims[d] != 1)
			map_add(g, "0");
		else
			map_add(g, "d%zu", d);
	}
}

void gop_identity(struct gop *g, size_t rank)
{
	for (size_t d = 0; d < rank; d++)
		map_add(g, "d%zu", d);
}

/* Elementwise op over broadcast inputs (at most EW_INPUTS_MAX) into a fresh tensor of type t. */
int emit_ew(struct imp *m, struct val *const *in, size_t n, enum dt t, const char *tmpl,
		   struct val **out)
{
	size_t rank = 0;
	int64_t dims[ONNX_RANK_MAX];
	struct gop ins[EW_INPUTS_MAX], o;
	int r = n <= EW_INPUTS_MAX ? broadcast(m, in, n, &rank, dims) : refuse(m, "more than %d inputs", EW_INPUTS_MAX);

	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		gop_bcast(m, &ins[i], in[i], rank, dims);
	gop_set(&o, emit_empty(m, t, rank, dims), t, rank, dims);
	gop_identity(&o, rank);
	long id = generic(m, rank, NULL, ins, n, &o, tmpl);
	if (!(*out = val_ssa(t, rank, dims, id)))
		return oom(m);
	return 0;
}

/* A copy of v into a fresh buffer (a graph output that would alias another buffer). */
long emit_copy(struct imp *m, struct val *v)
{
	struct gop in, o;
	gop_set(&in, ssa_of(m, v), v->dt, v->rank, v->dims);
	gop_identity(&in, v->rank);
	gop_set(&o, emit_empty(m, v->dt, v->rank, v->dims), v->dt, v->rank, v->dims);
	gop_identity(&o, v->rank);
	return generic(m, v->rank, NULL, &in, 1, &o, "$0\n");
}

/* Reshape (same element count) through collapse to 1-D and expand: views, no nest. */
int emit_reshape(struct imp *m, struct val *v, size_t rank, const int64_t *dims, struct val **out)
{
	char ty[256], ty1[256], tyo[256];
	int64_t n = numel(v);
	struct val *o;

	if (!(o = val_new(v->dt, rank, dims)))
		return oom(m);
	if (numel(o) != n) {
		int64_t got = numel(o);
		val_free(o);
		return refuse(m, "reshape from %" PRId64 " to %" PRId64 " elements", n, got);
	}
	o->is_view = true;
	if (v->zero_len) {
		val_free(o);
		if (!(o = val_zero(v->dt, rank, dims)))
			return oom(m);
		o->is_view = true;
		*out = o;
		return 0;
	}
	if (v->data) {
		o->data = malloc((size_t)n * DT_SIZE[v->dt]);
		if (!o->data) {
			val_free(o);
			return oom(m);
		}
		memcpy(o->data, v->data, (size_t)n * DT_SIZE[v->dt]);
		*out = o;
		return 0;
	}
	vtype(ty, sizeof ty, v);
	vtype(tyo, sizeof tyo, o);
	tensor_type(ty1, sizeof ty1, v->dt, 1, &n);
	long cur = ssa_of(m, v);
	if (v->rank != 1) {
		long id = new_ssa(m);
		if (v->rank == 0) {
			strbuf_printf(&m->body, "    %%v%ld = tensor.expand_shape %%v%ld [] output_shape [1] : %s into %s %s\n",
				id, cur, ty, ty1, m->loc);
		} else {
			strbuf_printf(&m->body, "    %%v%ld = tensor.collapse_shape %%v%ld [[", id, cur);
			for (size_t i = 0; i < v->rank; i++)
				strbuf_printf(&m->body, "%s%zu", i ? ", " : "", i);
			strbuf_printf(&m->body, "]] : %s into %s %s\n", ty, ty1, m->loc);
		}
		cur = id;
	}
	if (rank != 1) {
		long id = new_ssa(m);
		if (rank == 0) {
			strbuf_printf(&m->body, "    %%v%ld = tensor.collapse_shape %%v%ld [] : %s into %s %s\n", id, cur,
				ty1, tyo, m->loc);
		} else {
			strbuf_printf(&m->body, "    %%v%ld = tensor.expand_shape %%v%ld [[", id, cur);
			for (size_t i = 0; i < rank; i++)
				strbuf_printf(&m->body, "%s%zu", i ? ", " : "", i);
			strbuf_puts(&m->body, "]] output_shape [");
			for (size_t i = 0; i < rank; i++)
				strbuf_printf(&m->body, "%s%" PRId64, i ? ", " : "", dims[i]);
			strbuf_printf(&m->body, "] : %s into %s %s\n", ty1, tyo, m->loc);
		}
		cur = id;
	}
	o->ssa = cur;
	*out = o;
	return 0;
}

/* ---------------------------------------------------------------- folding helpers */

void unflatten(int64_t f, size_t rank, const int64_t *dims, int64_t *idx)
{
	for (size_t d = rank; d-- > 0;) {
		idx[d] = f % dims[d];
		f /= dims[d];
	}
}

int64_t flatten_idx(size_t rank, const int64_t *dims, const int64_t *idx)
{
	int64_t f = 0;
	for (size_t d = 0; d < rank; d++)
		f = f * dims[d] + idx[d];
	return f;
}

const char *zero_lit(enum dt t) { return dt_float(t) ? "0.0" : "0"; }

/* Offset in v of the element at flat index i of the broadcast shape rank/dims. */
int64_t bcast_off(const struct val *v, size_t rank, const int64_t *dims, int64_t flat)
{
	int64_t off = 0, stride = 1;

	for (size_t d = rank; d-- > 0;) {
		int64_t idx = flat % dims[d];
		flat /= dims[d];
		if (d + v->rank >= rank) {
			size_t j = d + v->rank - rank;
			if (v->dims[j] != 1)
				off += idx * stride;
			stride *= v->dims[j];
		}
	}
	return off;
}

/* A result of rank/dims may be computed at import (FOLD_MAX elements). */
bool fold_fits(size_t rank, const int64_t *dims)
{
	uint64_t n = 1;
	for (size_t d = 0; d < rank; d++)
		n *= (uint64_t)dims[d];
	return n <= FOLD_MAX;
}

bool all_const(struct val *const *in, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!in[i]->data)
			return false;
	return true;
}

int norm_axis(struct imp *m, int64_t axis, size_t rank, size_t *out)
{
	*out = 0;
	if (axis < -(int64_t)rank || axis >= (int64_t)rank)
		return refuse(m, "axis %" PRId64 " is out of range for rank %zu", axis, rank);
	*out = (size_t)(axis < 0 ? axis + (int64_t)rank : axis);
	return 0;
}

/* The values of a constant 1-D (or scalar) integer input. */
int const_ints(struct imp *m, struct val *v, const char *what, int64_t *out, size_t max, size_t *n)
{
	if (!v->data || v->rank > 1 || dt_float(v->dt))
		return refuse(m, "%s must be a constant integer list", what);
	if ((size_t)numel(v) > max)
		return refuse(m, "%s has %" PRId64 " values, at most %zu", what, numel(v), max);
	*n = (size_t)numel(v);
	for (size_t i = 0; i < *n; i++)
		out[i] = get_i(v, (int64_t)i);
	return 0;
}
