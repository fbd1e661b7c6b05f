/* SPDX-License-Identifier: MIT */
/*
 * onnx_movement.c: data movement, shapes and constants in the importer (onnx_internal.h):
 * Reshape, Flatten, Squeeze/Unsqueeze, Identity, Transpose, Slice, Split, Concat, Gather,
 * Expand, Cast, Constant, ConstantOfShape, Range, Shape/Size, Pad and Trilu, each folded at
 * import when its inputs are known there (a zero value stays one) and emitted otherwise.
 */
#include "onnx_internal.h"

/* ---------------------------------------------------------------- data movement */

static void copy_elem(struct val *dst, int64_t i, const struct val *src, int64_t j)
{
	size_t sz = DT_SIZE[src->dt];
	memcpy((char *)dst->data + (size_t)i * sz, (const char *)src->data + (size_t)j * sz, sz);
}

static int fold_limit(struct imp *m, size_t rank, const int64_t *dims)
{
	uint64_t n = 1;
	for (size_t d = 0; d < rank; d++)
		n *= (uint64_t)dims[d];
	if (n > FOLD_MAX)
		return refuse(m, "a constant of %" PRIu64 " elements would be computed at import (at most %llu)",
			      n, (unsigned long long)FOLD_MAX);
	return 0;
}

/* An output that is another value under a new name (Identity, a reshape of constant data). */
static int alias(struct imp *m, size_t i, struct val *v)
{
	struct val *o;
	int r = emit_reshape(m, v, v->rank, v->dims, &o);
	if (r < 0)
		return r;
	if (!v->data) {
		o->ssa = ssa_of(m, v);
		o->is_view = true;
	}
	return output(m, i, o);
}

int op_reshape(struct imp *m)
{
	static const char *const allowed[] = { "allowzero", NULL };
	struct val *x, *s;
	int64_t shape[ONNX_RANK_MAX], allowzero;
	size_t n;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = input_const(m, 1, "shape", &s)) < 0 || (r = attr_int(m, "allowzero", 0, &allowzero)) < 0 ||
	    (r = const_ints(m, s, "shape", shape, ONNX_RANK_MAX, &n)) < 0)
		return r;
	int64_t known = 1;
	long infer = -1;
	for (size_t i = 0; i < n; i++) {
		if (shape[i] == 0 && !allowzero) {
			if (i >= x->rank)
				return refuse(m, "shape[%zu] = 0 copies a dimension the input does not have", i);
			shape[i] = x->dims[i];
		}
		if (shape[i] == -1) {
			if (infer >= 0)
				return refuse(m, "shape has two -1 entries");
			infer = (long)i;
			continue;
		}
		if (shape[i] <= 0)
			return refuse(m, "shape[%zu] = %" PRId64 " is not supported", i, shape[i]);
		known *= shape[i];
	}
	if (infer >= 0) {
		if (numel(x) % known)
			return refuse(m, "cannot infer the -1 entry of the shape");
		shape[infer] = numel(x) / known;
	}
	struct val *o;
	if ((r = emit_reshape(m, x, n, shape, &o)) < 0)
		return r;
	return output(m, 0, o);
}

int op_flatten(struct imp *m)
{
	static const char *const allowed[] = { "axis", NULL };
	struct val *x, *o;
	int64_t axis;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = attr_int(m, "axis", 1, &axis)) < 0)
		return r;
	if (axis < -(int64_t)x->rank || axis > (int64_t)x->rank)
		return refuse(m, "attribute axis=%" PRId64 " is out of range", axis);
	if (axis < 0)
		axis += (int64_t)x->rank;
	int64_t d[2] = { 1, 1 };
	for (size_t i = 0; i < x->rank; i++)
		d[(int64_t)i < axis ? 0 : 1] *= x->dims[i];
	if ((r = emit_reshape(m, x, 2, d, &o)) < 0)
		return r;
	return output(m, 0, o);
}

int op_squeeze(struct imp *m)
{
	bool un = !strcmp(m->node->op_type, "Unsqueeze");
	static const char *const allowed[] = { "axes", NULL };
	struct val *x, *ax = NULL, *o;
	int64_t axes[2 * ONNX_RANK_MAX];
	long na = -1;
	size_t n = 0;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = input_opt(m, 1, &ax)) < 0 || (r = attr_ints(m, "axes", axes, &na)) < 0)
		return r;
	if (ax) {
		if ((r = const_ints(m, ax, "axes", axes, ONNX_RANK_MAX, &n)) < 0)
			return r;
	} else if (na >= 0) {
		n = (size_t)na;
	} else if (un) {
		return refuse(m, "axes are missing");
	}
	int64_t d[ONNX_RANK_MAX];
	size_t rank = 0;
	if (un) {
		size_t orank = x->rank + n;
		bool ins[ONNX_RANK_MAX] = { 0 };
		if (orank > ONNX_RANK_MAX)
			return refuse(m, "result rank %zu, at most %d", orank, ONNX_RANK_MAX);
		for (size_t i = 0; i < n; i++) {
			size_t a;
			if ((r = norm_axis(m, axes[i], orank, &a)) < 0)
				return r;
			if (ins[a])
				return refuse(m, "axis %" PRId64 " given twice", axes[i]);
			ins[a] = true;
		}
		for (size_t i = 0, k = 0; i < orank; i++)
			d[rank++] = ins[i] ? 1 : x->dims[k++];
	} else {
		bool sq[ONNX_RANK_MAX] = { 0 };
		for (size_t i = 0; i < n; i++) {
			size_t a;
			if ((r = norm_axis(m, axes[i], x->rank, &a)) < 0)
				return r;
			if (x->dims[a] != 1)
				return refuse(m, "axis %" PRId64 " has size %" PRId64 ", not 1", axes[i], x->dims[a]);
			sq[a] = true;
		}
		for (size_t i = 0; i < x->rank; i++)
			if (!(n ? sq[i] : x->dims[i] == 1))
				d[rank++] = x->dims[i];
	}
	if ((r = emit_reshape(m, x, rank, d, &o)) < 0)
		return r;
	return output(m, 0, o);
}

int op_identity(struct imp *m)
{
	static const char *const none[] = { NULL };
	static const char *const drop[] = { "ratio", "seed", "training_mode", NULL };
	struct val *x;
	int r;
	bool dropout = !strcmp(m->node->op_type, "Dropout");

	if ((r = attrs_allowed(m, dropout ? drop : none)) < 0 || (r = outputs_max(m, 1)) < 0 ||
	    (r = input(m, 0, &x)) < 0)
		return r;
	if (dropout && n_in(m) > 2) {
		struct val *t;
		if ((r = input_const(m, 2, "training_mode", &t)) < 0)
			return r;
		if (get_i(t, 0))
			return refuse(m, "training_mode is true");
	}
	return alias(m, 0, x);
}

int op_transpose(struct imp *m)
{
	static const char *const allowed[] = { "perm", NULL };
	struct val *x, *o;
	int64_t perm[2 * ONNX_RANK_MAX], od[ONNX_RANK_MAX];
	long np;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = attr_ints(m, "perm", perm, &np)) < 0)
		return r;
	if (np < 0)
		for (size_t i = 0; i < x->rank; i++)
			perm[i] = (int64_t)(x->rank - 1 - i);
	else if ((size_t)np != x->rank)
		return refuse(m, "attribute perm has %ld values for rank %zu", np, x->rank);
	bool seen[ONNX_RANK_MAX] = { 0 };
	size_t inv[ONNX_RANK_MAX];
	for (size_t i = 0; i < x->rank; i++) {
		if (perm[i] < 0 || (size_t)perm[i] >= x->rank || seen[perm[i]])
			return refuse(m, "attribute perm is not a permutation");
		seen[perm[i]] = true;
		inv[perm[i]] = i;
		od[i] = x->dims[perm[i]];
	}
	if (x->data && fold_limit(m, x->rank, od) == 0) {
		if (!(o = val_like(x, x->dt, x->rank, od)))
			return oom(m);
		if (o->zero_len)
			return output(m, 0, o);
		int64_t oi[ONNX_RANK_MAX], ii[ONNX_RANK_MAX];
		for (int64_t f = 0, n = numel(o); f < n; f++) {
			unflatten(f, x->rank, od, oi);
			for (size_t d = 0; d < x->rank; d++)
				ii[perm[d]] = oi[d];
			copy_elem(o, f, x, flatten_idx(x->rank, x->dims, ii));
		}
		return output(m, 0, o);
	}
	struct gop g, go;
	gop_set(&g, ssa_of(m, x), x->dt, x->rank, x->dims);
	for (size_t j = 0; j < x->rank; j++)
		map_add(&g, "d%zu", inv[j]);
	gop_set(&go, emit_empty(m, x->dt, x->rank, od), x->dt, x->rank, od);
	gop_identity(&go, x->rank);
	long id = generic(m, x->rank, NULL, &g, 1, &go, "$0\n");
	return (o = val_ssa(x->dt, x->rank, od, id)) ? output(m, 0, o) : oom(m);
}

/* out[i] = x[start[d] + i[d] * step[d]] (a strided window of x), as a copy nest or folded. */
static int strided_copy(struct imp *m, struct val *x, const int64_t *start, const int64_t *step,
			const int64_t *od, size_t out_i)
{
	struct val *o;
	int r = check_shape(m, "the result", x->rank, od);
	if (r < 0)
		return r;
	if (x->data && fold_limit(m, x->rank, od) == 0) {
		if (!(o = val_like(x, x->dt, x->rank, od)))
			return oom(m);
		if (o->zero_len)
			return output(m, out_i, o);
		int64_t oi[ONNX_RANK_MAX];
		for (int64_t f = 0, n = numel(o); f < n; f++) {
			unflatten(f, x->rank, od, oi);
			for (size_t d = 0; d < x->rank; d++)
				oi[d] = start[d] + oi[d] * step[d];
			copy_elem(o, f, x, flatten_idx(x->rank, x->dims, oi));
		}
		return output(m, out_i, o);
	}
	/* Loop extents come from the first operand a loop dimension appears in alone, so the
	 * window is cut with tensor.extract_slice (a view) and copied by a nest; a negative step
	 * (not a valid slice stride) reads the input with tensor.extract in the payload. */
	char tx[256], ts[256], pos[256] = "", sz[256] = "", str[256] = "";
	size_t k1 = 0, k2 = 0, k3 = 0;
	bool neg = false;
	vtype(tx, sizeof tx, x);
	tensor_type(ts, sizeof ts, x->dt, x->rank, od);
	for (size_t d = 0; d < x->rank; d++) {
		neg = neg || step[d] < 0;
		k1 += (size_t)snprintf(pos + k1, sizeof pos - k1, "%s%" PRId64, d ? ", " : "", start[d]);
		k2 += (size_t)snprintf(sz + k2, sizeof sz - k2, "%s%" PRId64, d ? ", " : "", od[d]);
		k3 += (size_t)snprintf(str + k3, sizeof str - k3, "%s%" PRId64, d ? ", " : "", step[d]);
	}
	struct gop go;
	long src = ssa_of(m, x), id;
	gop_set(&go, emit_empty(m, x->dt, x->rank, od), x->dt, x->rank, od);
	gop_identity(&go, x->rank);
	if (!neg) {
		long sl = new_ssa(m);
		strbuf_printf(&m->body, "    %%v%ld = tensor.extract_slice %%v%ld[%s] [%s] [%s] : %s to %s %s\n", sl, src,
			pos, sz, str, tx, ts, m->loc);
		struct gop g;
		gop_set(&g, sl, x->dt, x->rank, od);
		gop_identity(&g, x->rank);
		id = generic(m, x->rank, NULL, &g, 1, &go, "$0\n");
	} else {
		struct strbuf t = { 0 };
		id = m->ssa; /* the id emit_generic takes */
		for (size_t d = 0; d < x->rank; d++)
			strbuf_printf(&t, "%%i%ld_%zu = linalg.index %zu : index\n%%j%ld_%zu = affine.apply "
				    "affine_map<(d0) -> (d0 * %" PRId64 " + %" PRId64 ")>(%%i%ld_%zu)\n",
				id, d, d, id, d, step[d], start[d], id, d);
		strbuf_printf(&t, "#0 = tensor.extract %%v%ld[", src);
		for (size_t d = 0; d < x->rank; d++)
			strbuf_printf(&t, "%s%%j%ld_%zu", d ? ", " : "", id, d);
		strbuf_printf(&t, "] : %s\n#0\n", tx);
		if (t.error)
			return oom(m);
		long got = generic(m, x->rank, NULL, NULL, 0, &go, t.p);
		free(t.p);
		if (got != id)
			return err_set(m->err, -EINVAL, "internal error: slice numbering");
	}
	return (o = val_ssa(x->dt, x->rank, od, id)) ? output(m, out_i, o) : oom(m);
}

int op_slice(struct imp *m)
{
	static const char *const allowed[] = { "axes", "ends", "starts", NULL };
	struct val *x, *vs, *ve, *va = NULL, *vp = NULL;
	int64_t st[2 * ONNX_RANK_MAX], en[2 * ONNX_RANK_MAX], ax[2 * ONNX_RANK_MAX], sp[2 * ONNX_RANK_MAX];
	size_t n = 0, ne = 0, na = 0, nsp = 0;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0)
		return r;
	if (m->opset < 10) {
		long a, b, c;
		if ((r = attr_ints(m, "starts", st, &a)) < 0 || (r = attr_ints(m, "ends", en, &b)) < 0 ||
		    (r = attr_ints(m, "axes", ax, &c)) < 0)
			return r;
		if (a < 0 || b < 0)
			return refuse(m, "attributes starts and ends are required");
		n = (size_t)a, ne = (size_t)b, na = c < 0 ? 0 : (size_t)c;
	} else {
		if ((r = input_const(m, 1, "starts", &vs)) < 0 || (r = input_const(m, 2, "ends", &ve)) < 0 ||
		    (r = input_opt(m, 3, &va)) < 0 || (r = input_opt(m, 4, &vp)) < 0 ||
		    (r = const_ints(m, vs, "starts", st, ONNX_RANK_MAX, &n)) < 0 ||
		    (r = const_ints(m, ve, "ends", en, ONNX_RANK_MAX, &ne)) < 0 ||
		    (va && (r = const_ints(m, va, "axes", ax, ONNX_RANK_MAX, &na)) < 0) ||
		    (vp && (r = const_ints(m, vp, "steps", sp, ONNX_RANK_MAX, &nsp)) < 0))
			return r;
	}
	if (ne != n || (na && na != n) || (nsp && nsp != n))
		return refuse(m, "starts, ends, axes and steps differ in length");
	int64_t start[ONNX_RANK_MAX], step[ONNX_RANK_MAX], od[ONNX_RANK_MAX];
	for (size_t d = 0; d < x->rank; d++)
		start[d] = 0, step[d] = 1, od[d] = x->dims[d];
	bool seen[ONNX_RANK_MAX] = { 0 };
	for (size_t i = 0; i < n; i++) {
		size_t a;
		if ((r = norm_axis(m, na ? ax[i] : (int64_t)i, x->rank, &a)) < 0)
			return r;
		if (seen[a])
			return refuse(m, "axis %zu sliced twice", a);
		seen[a] = true;
		int64_t dim = x->dims[a], s = st[i], e = en[i], p = nsp ? sp[i] : 1;
		if (p == 0)
			return refuse(m, "step 0");
		if (s < 0)
			s += dim;
		if (e < 0 && e > INT64_MIN / 2)
			e += dim;
		if (p > 0) {
			s = s < 0 ? 0 : s > dim ? dim : s;
			e = e < 0 ? 0 : e > dim ? dim : e;
		} else {
			s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
			e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
		}
		int64_t cnt = p > 0 ? (e - s + p - 1) / p : (s - e + (-p) - 1) / (-p);
		if (cnt <= 0)
			return refuse(m, "the slice of axis %zu is empty (zero-sized tensors are not supported)", a);
		start[a] = s, step[a] = p, od[a] = cnt;
	}
	return strided_copy(m, x, start, step, od, 0);
}

int op_split(struct imp *m)
{
	static const char *const allowed[] = { "axis", "split", "num_outputs", NULL };
	struct val *x, *vs = NULL;
	int64_t axis, split[2 * ONNX_RANK_MAX], numo;
	long nsa = -1;
	size_t ns = 0, a;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = input(m, 0, &x)) < 0 || (r = input_opt(m, 1, &vs)) < 0 ||
	    (r = attr_int(m, "axis", 0, &axis)) < 0 || (r = attr_ints(m, "split", split, &nsa)) < 0 ||
	    (r = attr_int(m, "num_outputs", 0, &numo)) < 0 || (r = norm_axis(m, axis, x->rank, &a)) < 0)
		return r;
	size_t nout = m->node->n_output;
	if (nout == 0 || nout > 2 * ONNX_RANK_MAX)
		return refuse(m, "%zu outputs, 1 to %d supported", nout, 2 * ONNX_RANK_MAX);
	int64_t dim = x->dims[a];
	if (vs) {
		if ((r = const_ints(m, vs, "split", split, 2 * ONNX_RANK_MAX, &ns)) < 0)
			return r;
	} else if (nsa >= 0) {
		ns = (size_t)nsa;
	} else {
		ns = nout;
		int64_t chunk = numo ? (dim + (int64_t)nout - 1) / (int64_t)nout : dim / (int64_t)nout;
		if (!numo && dim % (int64_t)nout)
			return refuse(m, "axis %zu (%" PRId64 ") does not split into %zu equal parts", a, dim, nout);
		for (size_t i = 0; i < nout; i++)
			split[i] = i + 1 < nout ? chunk : dim - chunk * (int64_t)(nout - 1);
	}
	if (ns != nout)
		return refuse(m, "split has %zu parts for %zu outputs", ns, nout);
	int64_t sum = 0;
	for (size_t i = 0; i < ns; i++)
		sum += split[i];
	if (sum != dim)
		return refuse(m, "split sums to %" PRId64 ", axis %zu has %" PRId64, sum, a, dim);
	int64_t off = 0;
	for (size_t i = 0; i < ns; i++) {
		int64_t start[ONNX_RANK_MAX] = { 0 }, step[ONNX_RANK_MAX], od[ONNX_RANK_MAX];
		for (size_t d = 0; d < x->rank; d++)
			step[d] = 1, od[d] = x->dims[d];
		start[a] = off;
		od[a] = split[i];
		off += split[i];
		if ((r = strided_copy(m, x, start, step, od, i)) < 0)
			return r;
	}
	return 0;
}

int op_concat(struct imp *m)
{
	static const char *const allowed[] = { "axis", NULL };
	struct val *in[256];
	int64_t axis, od[ONNX_RANK_MAX];
	size_t n = n_in(m), a;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 ||
	    (r = attr_int(m, "axis", 0, &axis)) < 0)
		return r;
	if (n == 0 || n > ELEMENTSOF(in))
		return refuse(m, "%zu inputs, 1 to %zu supported", n, ELEMENTSOF(in));
	for (size_t i = 0; i < n; i++)
		if ((r = input(m, i, &in[i])) < 0)
			return r;
	if ((r = norm_axis(m, axis, in[0]->rank, &a)) < 0)
		return r;
	memcpy(od, in[0]->dims, in[0]->rank * sizeof *od);
	od[a] = 0;
	for (size_t i = 0; i < n; i++) {
		if (in[i]->rank != in[0]->rank || in[i]->dt != in[0]->dt)
			return refuse(m, "input %zu differs in rank or element type", i);
		for (size_t d = 0; d < in[0]->rank; d++)
			if (d != a && in[i]->dims[d] != in[0]->dims[d])
				return refuse(m, "input %zu differs in dimension %zu", i, d);
		od[a] += in[i]->dims[a];
	}
	size_t rank = in[0]->rank;
	enum dt t = in[0]->dt;
	struct val *o;
	if ((r = check_shape(m, "the result", rank, od)) < 0)
		return r;
	if (all_const(in, n) && fold_limit(m, rank, od) == 0) {
		bool zero = true;
		for (size_t i = 0; i < n; i++)
			zero = zero && in[i]->zero_len;
		if (!(o = val_like(zero ? in[0] : NULL, t, rank, od)))
			return oom(m);
		if (o->zero_len)
			return output(m, 0, o);
		int64_t oi[ONNX_RANK_MAX];
		for (int64_t f = 0, ne = numel(o); f < ne; f++) {
			unflatten(f, rank, od, oi);
			size_t k = 0;
			while (oi[a] >= in[k]->dims[a])
				oi[a] -= in[k++]->dims[a];
			copy_elem(o, f, in[k], flatten_idx(rank, in[k]->dims, oi));
		}
		return output(m, 0, o);
	}
	/* A fresh tensor; each input copied by a nest into its slice (one-shot bufferization keeps
	 * the extract_slice/insert_slice pair in place). */
	char to[256];
	tensor_type(to, sizeof to, t, rank, od);
	long cur = emit_empty(m, t, rank, od);
	int64_t off = 0;
	for (size_t i = 0; i < n; i++) {
		char ti[256], pos[200] = "", sz[200] = "", one[200] = "";
		size_t k1 = 0, k2 = 0, k3 = 0;
		vtype(ti, sizeof ti, in[i]);
		for (size_t d = 0; d < rank; d++) {
			k1 += (size_t)snprintf(pos + k1, sizeof pos - k1, "%s%" PRId64, d ? ", " : "", d == a ? off : 0);
			k2 += (size_t)snprintf(sz + k2, sizeof sz - k2, "%s%" PRId64, d ? ", " : "", in[i]->dims[d]);
			k3 += (size_t)snprintf(one + k3, sizeof one - k3, "%s1", d ? ", " : "");
		}
		long sl = new_ssa(m);
		strbuf_printf(&m->body, "    %%v%ld = tensor.extract_slice %%v%ld[%s] [%s] [%s] : %s to %s %s\n", sl, cur,
			pos, sz, one, to, ti, m->loc);
		struct gop g, go;
		gop_set(&g, ssa_of(m, in[i]), t, rank, in[i]->dims);
		gop_identity(&g, rank);
		gop_set(&go, sl, t, rank, in[i]->dims);
		gop_identity(&go, rank);
		long c = generic(m, rank, NULL, &g, 1, &go, "$0\n");
		long ins = new_ssa(m);
		strbuf_printf(&m->body, "    %%v%ld = tensor.insert_slice %%v%ld into %%v%ld[%s] [%s] [%s] : %s into %s %s\n",
			ins, c, cur, pos, sz, one, ti, to, m->loc);
		cur = ins;
		off += in[i]->dims[a];
	}
	return (o = val_ssa(t, rank, od, cur)) ? output(m, 0, o) : oom(m);
}

int op_gather(struct imp *m)
{
	static const char *const allowed[] = { "axis", NULL };
	struct val *x, *ix, *o;
	int64_t axis, od[ONNX_RANK_MAX];
	size_t a;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = input(m, 1, &ix)) < 0 || (r = attr_int(m, "axis", 0, &axis)) < 0 ||
	    (r = norm_axis(m, axis, x->rank, &a)) < 0)
		return r;
	if (ix->dt != DT_I64 && ix->dt != DT_I32)
		return refuse(m, "indices must be int64 or int32");
	size_t orank = x->rank - 1 + ix->rank;
	if (orank > ONNX_RANK_MAX)
		return refuse(m, "result rank %zu, at most %d", orank, ONNX_RANK_MAX);
	size_t k = 0;
	for (size_t d = 0; d < a; d++)
		od[k++] = x->dims[d];
	for (size_t d = 0; d < ix->rank; d++)
		od[k++] = ix->dims[d];
	for (size_t d = a + 1; d < x->rank; d++)
		od[k++] = x->dims[d];
	if ((r = check_shape(m, "the result", orank, od)) < 0)
		return r;
	int64_t dim = x->dims[a];
	if (ix->data)
		for (int64_t i = 0, n = numel(ix); i < n; i++)
			if (get_i(ix, i) < -dim || get_i(ix, i) >= dim)
				return refuse(m, "index %" PRId64 " is out of range for axis %zu (%" PRId64 ")",
					      get_i(ix, i), a, dim);
	if (x->data && ix->data && fold_limit(m, orank, od) == 0) {
		if (!(o = val_like(x, x->dt, orank, od)))
			return oom(m);
		if (o->zero_len)
			return output(m, 0, o);
		int64_t oi[ONNX_RANK_MAX], xi[ONNX_RANK_MAX], ii[ONNX_RANK_MAX];
		for (int64_t f = 0, n = numel(o); f < n; f++) {
			unflatten(f, orank, od, oi);
			for (size_t d = 0; d < ix->rank; d++)
				ii[d] = oi[a + d];
			int64_t v = get_i(ix, flatten_idx(ix->rank, ix->dims, ii));
			for (size_t d = 0; d < x->rank; d++)
				xi[d] = d < a ? oi[d] : d == a ? (v < 0 ? v + dim : v) : oi[d - 1 + ix->rank];
			copy_elem(o, f, x, flatten_idx(x->rank, x->dims, xi));
		}
		return output(m, 0, o);
	}
	char tx[256];
	vtype(tx, sizeof tx, x);
	/* One index known at import (a layer's slice of a stacked cache): a view of x, as a
	 * compiler makes it; whoever reads it reads x in place. */
	if (ix->data && numel(ix) == 1) {
		int64_t v = get_i(ix, 0);
		char to[256], pos[200] = "", sz[200] = "", one[200] = "";
		size_t k1 = 0, k2 = 0, k3 = 0;
		tensor_type(to, sizeof to, x->dt, orank, od);
		for (size_t d = 0; d < x->rank; d++) {
			k1 += (size_t)snprintf(pos + k1, sizeof pos - k1, "%s%" PRId64, d ? ", " : "",
					       d == a ? (v < 0 ? v + dim : v) : 0);
			k2 += (size_t)snprintf(sz + k2, sizeof sz - k2, "%s%" PRId64, d ? ", " : "",
					       d == a ? 1 : x->dims[d]);
			k3 += (size_t)snprintf(one + k3, sizeof one - k3, "%s1", d ? ", " : "");
		}
		long sl = new_ssa(m);
		strbuf_printf(&m->body, "    %%v%ld = tensor.extract_slice %%v%ld[%s] [%s] [%s] : %s to %s %s\n", sl,
			      ssa_of(m, x), pos, sz, one, tx, to, m->loc);
		return (o = val_ssa(x->dt, orank, od, sl)) ? output(m, 0, o) : oom(m);
	}
	/* A nest over the result reading the indices; the table is read with tensor.extract. */
	long table = ssa_of(m, x);
	struct gop g, go;
	gop_set(&g, ssa_of(m, ix), ix->dt, ix->rank, ix->dims);
	for (size_t d = 0; d < ix->rank; d++)
		map_add(&g, "d%zu", a + d);
	gop_set(&go, emit_empty(m, x->dt, orank, od), x->dt, orank, od);
	gop_identity(&go, orank);
	long id = m->ssa; /* the id emit_generic takes */
	struct strbuf t = { 0 };
	strbuf_printf(&t, "#0 = arith.index_cast $0 : $T to index\n#1 = arith.constant 0 : index\n"
		    "#2 = arith.cmpi slt, #0, #1 : index\n#3 = arith.constant %" PRId64 " : index\n"
		    "#4 = arith.addi #0, #3 : index\n#5 = arith.select #2, #4, #0 : index\n", dim);
	for (size_t d = 0; d < x->rank; d++)
		if (d != a)
			strbuf_printf(&t, "%%i%ld_%zu = linalg.index %zu : index\n", id, d, d < a ? d : d - 1 + ix->rank);
	strbuf_printf(&t, "#6 = tensor.extract %%v%ld[", table);
	for (size_t d = 0; d < x->rank; d++) {
		if (d == a)
			strbuf_printf(&t, "%s#5", d ? ", " : "");
		else
			strbuf_printf(&t, "%s%%i%ld_%zu", d ? ", " : "", id, d);
	}
	strbuf_printf(&t, "] : %s\n#6\n", tx);
	if (t.error)
		return oom(m);
	long got = generic(m, orank, NULL, &g, 1, &go, t.p);
	free(t.p);
	if (got != id)
		return err_set(m->err, -EINVAL, "internal error: gather numbering");
	return (o = val_ssa(x->dt, orank, od, id)) ? output(m, 0, o) : oom(m);
}

int op_expand(struct imp *m)
{
	static const char *const none[] = { NULL };
	struct val *x, *s, *o;
	int64_t shape[ONNX_RANK_MAX];
	size_t n;
	int r;

	if ((r = attrs_allowed(m, none)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = input_const(m, 1, "shape", &s)) < 0 || (r = const_ints(m, s, "shape", shape, ONNX_RANK_MAX, &n)) < 0)
		return r;
	struct val *t = val_new(x->dt, n, shape);
	if (!t)
		return oom(m);
	struct val *both[2] = { x, t };
	size_t rank;
	int64_t od[ONNX_RANK_MAX];
	r = broadcast(m, both, 2, &rank, od);
	val_free(t);
	if (r < 0 || (r = check_shape(m, "the result", rank, od)) < 0)
		return r;
	if (x->data && fold_limit(m, rank, od) == 0) {
		if (!(o = val_like(x, x->dt, rank, od)))
			return oom(m);
		for (int64_t f = 0, ne = o->zero_len ? 0 : numel(o); f < ne; f++)
			copy_elem(o, f, x, bcast_off(x, rank, od, f));
		return output(m, 0, o);
	}
	struct gop g, go;
	gop_bcast(m, &g, x, rank, od);
	gop_set(&go, emit_empty(m, x->dt, rank, od), x->dt, rank, od);
	gop_identity(&go, rank);
	long id = generic(m, rank, NULL, &g, 1, &go, "$0\n");
	return (o = val_ssa(x->dt, rank, od, id)) ? output(m, 0, o) : oom(m);
}

int op_cast(struct imp *m)
{
	static const char *const allowed[] = { "to", "saturate", NULL };
	struct val *x, *o;
	int64_t to;
	enum dt t;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = attr_int(m, "to", -1, &to)) < 0)
		return r;
	if (to < 0 || to > INT32_MAX || onnx_dt((int32_t)to, &t) < 0)
		return refuse(m, "attribute to=%s is not supported (" DT_NAMES ")",
			      to < 0 ? "(missing)" : onnx_dt_name((int32_t)to));
	if (x->data) {
		if (!(o = val_like(x, t, x->rank, x->dims)))
			return oom(m);
		for (int64_t i = 0, n = o->zero_len ? 0 : numel(x); i < n; i++)
			if (dt_float(x->dt))
				set_d(o, i, get_d(x, i));
			else
				set_i(o, i, get_i(x, i));
		return output(m, 0, o);
	}
	const char *tmpl;
	bool ff = dt_float(x->dt), tf = dt_float(t);
	if (x->dt == t)
		tmpl = "$0\n";
	else if (t == DT_BOOL)
		tmpl = ff ? "#0 = arith.constant 0.0 : $T\n#1 = arith.cmpf une, $0, #0 : $T\n#2 = arith.extui #1 : i1 to i8\n#2"
			  : "#0 = arith.constant 0 : $T\n#1 = arith.cmpi ne, $0, #0 : $T\n#2 = arith.extui #1 : i1 to i8\n#2";
	else if (ff && tf)
		tmpl = float_conv(x->dt, t);
	else if (ff)
		tmpl = "#0 = arith.fptosi $0 : $T to $U\n#0";
	else if (tf)
		tmpl = x->dt == DT_BOOL ? "#0 = arith.uitofp $0 : $T to $U\n#0" : "#0 = arith.sitofp $0 : $T to $U\n#0";
	else if (x->dt == DT_BOOL)
		tmpl = "#0 = arith.extui $0 : $T to $U\n#0";
	else if (DT_SIZE[x->dt] > DT_SIZE[t])
		tmpl = "#0 = arith.trunci $0 : $T to $U\n#0";
	else
		tmpl = "#0 = arith.extsi $0 : $T to $U\n#0";
	if ((r = emit_ew(m, &x, 1, t, tmpl, &o)) < 0)
		return r;
	return output(m, 0, o);
}

int op_constant(struct imp *m)
{
	struct val *o = NULL;
	int r;

	if (m->node->n_attribute != 1)
		return refuse(m, "expected exactly one attribute");
	const Onnx__AttributeProto *a = m->node->attribute[0];
	const char *name = a->name ? a->name : "";
	if ((r = outputs_max(m, 1)) < 0)
		return r;
	if (!strcmp(name, "value") && a->t) {
		if ((r = tensor_load(m, a->t, "attribute value", &o)) < 0)
			return r;
	} else if (!strcmp(name, "value_float") && a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT) {
		if (!(o = val_const(DT_F32, 0, NULL)))
			return oom(m);
		set_d(o, 0, a->f);
	} else if (!strcmp(name, "value_int") && a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) {
		if (!(o = val_const(DT_I64, 0, NULL)))
			return oom(m);
		set_i(o, 0, a->i);
	} else if (!strcmp(name, "value_floats") && a->n_floats > 0 && a->n_floats <= FOLD_MAX) {
		int64_t n = (int64_t)a->n_floats;
		if (!(o = val_const(DT_F32, 1, &n)))
			return oom(m);
		for (int64_t i = 0; i < n; i++)
			set_d(o, i, a->floats[i]);
	} else if (!strcmp(name, "value_ints") && a->n_ints > 0 && a->n_ints <= FOLD_MAX) {
		int64_t n = (int64_t)a->n_ints;
		if (!(o = val_const(DT_I64, 1, &n)))
			return oom(m);
		for (int64_t i = 0; i < n; i++)
			set_i(o, i, a->ints[i]);
	} else {
		return refuse(m, "attribute %s is not supported", name);
	}
	return output(m, 0, o);
}

int op_constant_of_shape(struct imp *m)
{
	static const char *const allowed[] = { "value", NULL };
	struct val *s, *val = NULL, *o;
	int64_t shape[ONNX_RANK_MAX];
	size_t n;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 ||
	    (r = input_const(m, 0, "shape", &s)) < 0 || (r = const_ints(m, s, "shape", shape, ONNX_RANK_MAX, &n)) < 0 ||
	    (r = check_shape(m, "the result", n, shape)) < 0 || (r = fold_limit(m, n, shape)) < 0)
		return r;
	const Onnx__AttributeProto *a = attr(m->node, "value");
	if (a) {
		if (!a->t)
			return refuse(m, "attribute value must be a tensor");
		if ((r = tensor_load(m, a->t, "attribute value", &val)) < 0)
			return r;
		if (numel(val) != 1) {
			val_free(val);
			return refuse(m, "attribute value must hold one element");
		}
	}
	if (!(o = val_const(val ? val->dt : DT_F32, n, shape))) {
		val_free(val);
		return oom(m);
	}
	for (int64_t i = 0, ne = numel(o); val && i < ne; i++)
		copy_elem(o, i, val, 0);
	val_free(val);
	return output(m, 0, o);
}

int op_range(struct imp *m)
{
	static const char *const none[] = { NULL };
	struct val *v[3], *o;
	int r;

	if ((r = attrs_allowed(m, none)) < 0 || (r = outputs_max(m, 1)) < 0)
		return r;
	for (size_t i = 0; i < 3; i++) {
		if ((r = input_const(m, i, i == 0 ? "start" : i == 1 ? "limit" : "delta", &v[i])) < 0)
			return r;
		if (numel(v[i]) != 1 || v[i]->dt != v[0]->dt)
			return refuse(m, "start, limit and delta must be scalars of one type");
	}
	double s = get_d(v[0], 0), l = get_d(v[1], 0), d = get_d(v[2], 0);
	if (d == 0)
		return refuse(m, "delta is 0");
	double cnt = ceil((l - s) / d);
	if (!(cnt >= 1))
		return refuse(m, "the range is empty (zero-sized tensors are not supported)");
	if (cnt > (double)FOLD_MAX)
		return refuse(m, "the range has more than %llu elements", (unsigned long long)FOLD_MAX);
	int64_t n = (int64_t)cnt;
	if (!(o = val_const(v[0]->dt, 1, &n)))
		return oom(m);
	for (int64_t i = 0; i < n; i++)
		if (dt_float(o->dt))
			set_d(o, i, s + (double)i * d);
		else
			set_i(o, i, get_i(v[0], 0) + i * get_i(v[2], 0));
	return output(m, 0, o);
}

int op_shape(struct imp *m)
{
	bool size = !strcmp(m->node->op_type, "Size");
	static const char *const allowed[] = { "start", "end", NULL };
	static const char *const none[] = { NULL };
	struct val *x, *o;
	int64_t st, en;
	int r;

	if ((r = attrs_allowed(m, size ? none : allowed)) < 0 || (r = outputs_max(m, 1)) < 0 ||
	    (r = input(m, 0, &x)) < 0 || (r = attr_int(m, "start", 0, &st)) < 0 ||
	    (r = attr_int(m, "end", (int64_t)x->rank, &en)) < 0)
		return r;
	if (size) {
		if (!(o = val_const(DT_I64, 0, NULL)))
			return oom(m);
		set_i(o, 0, numel(x));
		return output(m, 0, o);
	}
	int64_t rk = (int64_t)x->rank;
	st = st < 0 ? st + rk : st;
	en = en < 0 ? en + rk : en;
	st = st < 0 ? 0 : st > rk ? rk : st;
	en = en < 0 ? 0 : en > rk ? rk : en;
	int64_t n = en - st;
	if (n <= 0)
		return refuse(m, "the shape slice is empty");
	if (!(o = val_const(DT_I64, 1, &n)))
		return oom(m);
	for (int64_t i = 0; i < n; i++)
		set_i(o, i, x->dims[st + i]);
	return output(m, 0, o);
}

int op_pad(struct imp *m)
{
	static const char *const allowed[] = { "mode", "pads", "value", NULL };
	struct val *x, *vp = NULL, *vc = NULL, *va = NULL, *o = NULL;
	int64_t pads[2 * ONNX_RANK_MAX], axes[ONNX_RANK_MAX];
	size_t np = 0, na = 0;
	double cv = 0;
	char mode[32];
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = attr_str(m, "mode", "constant", mode, sizeof mode)) < 0)
		return r;
	if (strcmp(mode, "constant") != 0)
		return refuse(m, "attribute mode=%s is not supported (constant)", mode);
	if (m->opset < 11) {
		long n;
		if ((r = attr_ints(m, "pads", pads, &n)) < 0 || (r = attr_float(m, "value", 0.0, &cv)) < 0)
			return r;
		np = n < 0 ? 0 : (size_t)n;
	} else {
		if ((r = input_const(m, 1, "pads", &vp)) < 0 || (r = input_opt(m, 2, &vc)) < 0 ||
		    (r = input_opt(m, 3, &va)) < 0 ||
		    (r = const_ints(m, vp, "pads", pads, 2 * ONNX_RANK_MAX, &np)) < 0 ||
		    (va && (r = const_ints(m, va, "axes", axes, ONNX_RANK_MAX, &na)) < 0))
			return r;
		if (vc) {
			if (!vc->data || numel(vc) != 1)
				return refuse(m, "constant_value must be a constant scalar");
			cv = get_d(vc, 0);
		}
	}
	int64_t lo[ONNX_RANK_MAX] = { 0 }, hi[ONNX_RANK_MAX] = { 0 };
	size_t nax = va ? na : x->rank;
	if (np != 2 * nax)
		return refuse(m, "pads has %zu values, expected %zu", np, 2 * nax);
	for (size_t i = 0; i < nax; i++) {
		size_t a = i;
		if (va && (r = norm_axis(m, axes[i], x->rank, &a)) < 0)
			return r;
		if (pads[i] < 0 || pads[nax + i] < 0)
			return refuse(m, "negative pads (cropping) are not supported");
		lo[a] = pads[i];
		hi[a] = pads[nax + i];
	}
	if (x->data) {
		int64_t od[ONNX_RANK_MAX], oi[ONNX_RANK_MAX];
		for (size_t d = 0; d < x->rank; d++)
			od[d] = x->dims[d] + lo[d] + hi[d];
		if ((r = check_shape(m, "the result", x->rank, od)) < 0 || (r = fold_limit(m, x->rank, od)) < 0)
			return r;
		if (!(o = val_like(cv == 0 ? x : NULL, x->dt, x->rank, od)))
			return oom(m);
		for (int64_t f = 0, n = o->zero_len ? 0 : numel(o); f < n; f++) {
			unflatten(f, x->rank, od, oi);
			bool in = true;
			for (size_t d = 0; d < x->rank; d++) {
				oi[d] -= lo[d];
				in = in && oi[d] >= 0 && oi[d] < x->dims[d];
			}
			if (in)
				copy_elem(o, f, x, flatten_idx(x->rank, x->dims, oi));
			else
				set_d(o, f, cv);
		}
		return output(m, 0, o);
	}
	char lit[64];
	if (dt_float(x->dt))
		fmt_float(lit, sizeof lit, cv, x->dt);
	else
		snprintf(lit, sizeof lit, "%" PRId64, (int64_t)cv);
	if ((r = emit_pad(m, x, lo, hi, lit, &o)) < 0)
		return r;
	if (!o)
		return alias(m, 0, x);
	return output(m, 0, o);
}

int op_trilu(struct imp *m)
{
	static const char *const allowed[] = { "upper", NULL };
	struct val *x, *vk = NULL, *o;
	int64_t upper, k = 0;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = input_opt(m, 1, &vk)) < 0 || (r = attr_int(m, "upper", 1, &upper)) < 0)
		return r;
	if (vk) {
		if (!vk->data || numel(vk) != 1)
			return refuse(m, "k must be a constant scalar");
		k = get_i(vk, 0);
	}
	if (x->rank < 2)
		return refuse(m, "input rank %zu, at least 2", x->rank);
	if (!x->data)
		return refuse(m, "input 0 must be known at import (only a constant Trilu is folded)");
	if ((r = fold_limit(m, x->rank, x->dims)) < 0)
		return r;
	if (!(o = val_const(x->dt, x->rank, x->dims)))
		return oom(m);
	int64_t idx[ONNX_RANK_MAX];
	for (int64_t f = 0, n = numel(o); f < n; f++) {
		unflatten(f, x->rank, x->dims, idx);
		int64_t i = idx[x->rank - 2], j = idx[x->rank - 1];
		if (upper ? j - i >= k : j - i <= k)
			copy_elem(o, f, x, f);
	}
	return output(m, 0, o);
}
