/* SPDX-License-Identifier: MIT */
/*
 * onnx_reduce.c: reductions and normalizations of the importer (onnx_internal.h): the Reduce*
 * family (emitted, or folded at import), ArgMax/ArgMin, Softmax and LogSoftmax,
 * LayerNormalization and BatchNormalization (inference form).
 */
#include "onnx_internal.h"

/* ---------------------------------------------------------------- reductions */

/* Reduces x over the dims with axes[d] set; init_lit fills the result; tmpl combines $0 into
 * $o.  keep: reduced dims stay with size 1. */
static int emit_reduce(struct imp *m, struct val *x, const bool *axes, const char *init_lit,
		       const char *tmpl, bool keep, struct val **out)
{
	int64_t od[ONNX_RANK_MAX];
	size_t orank = 0;
	struct gop g, o;

	gop_set(&g, ssa_of(m, x), x->dt, x->rank, x->dims);
	gop_identity(&g, x->rank);
	for (size_t d = 0; d < x->rank; d++)
		if (!axes[d])
			od[orank++] = x->dims[d];
		else if (keep)
			od[orank++] = 1;
	gop_set(&o, emit_filled(m, x->dt, orank, od, init_lit), x->dt, orank, od);
	for (size_t d = 0; d < x->rank; d++)
		if (!axes[d])
			map_add(&o, "d%zu", d);
		else if (keep)
			map_add(&o, "0");
	long id = generic(m, x->rank, axes, &g, 1, &o, tmpl);
	return (*out = val_ssa(x->dt, orank, od, id)) ? 0 : oom(m);
}

/* The identity of max (neg_inf) and min (pos_inf) as a literal of type t. */
const char *neg_inf(enum dt t)
{
	static const char *const lit[] = { [DT_F32] = "0xFF800000", [DT_F64] = "0xFFF0000000000000",
		[DT_I64] = "-9223372036854775808", [DT_I32] = "-2147483648", [DT_BOOL] = "0",
		[DT_F16] = "0xFC00", [DT_BF16] = "0xFF80" };
	return lit[t];
}

static const char *pos_inf(enum dt t)
{
	static const char *const lit[] = { [DT_F32] = "0x7F800000", [DT_F64] = "0x7FF0000000000000",
		[DT_I64] = "9223372036854775807", [DT_I32] = "2147483647", [DT_BOOL] = "1",
		[DT_F16] = "0x7C00", [DT_BF16] = "0x7F80" };
	return lit[t];
}

/* x / n elementwise (n a literal). */
static int emit_div_const(struct imp *m, struct val *x, double n, struct val **out)
{
	char tmpl[200], lit[64];
	fmt_float(lit, sizeof lit, n, x->dt);
	snprintf(tmpl, sizeof tmpl, "#0 = arith.constant %s : $T\n#1 = arith.divf $0, #0 : $T\n#1", lit);
	return emit_ew(m, &x, 1, x->dt, tmpl, out);
}

enum red { RED_SUM, RED_MEAN, RED_MAX, RED_MIN, RED_PROD };

/* x reduced over red[] (kept as size 1 when keep) computed at import: accumulated in double
 * for floats, in 64-bit two's complement for integers. */
static int fold_reduce(struct imp *m, struct val *x, const bool *red, bool keep, enum red kind,
		       size_t orank, const int64_t *od, struct val **out)
{
	struct val *o = val_const(x->dt, orank, od);
	int64_t no = o ? numel(o) : 0, idx[ONNX_RANK_MAX], cnt = numel(x) / (no ? no : 1);
	bool fl = dt_float(x->dt);
	_cleanup_(freep) double *ad = o && fl ? calloc((size_t)no, sizeof *ad) : NULL;
	_cleanup_(freep) int64_t *ai = o && !fl ? calloc((size_t)no, sizeof *ai) : NULL;

	if (!o || (fl ? !ad : !ai)) {
		val_free(o);
		return oom(m);
	}
	for (int64_t i = 0; i < no; i++) {
		if (fl)
			ad[i] = kind == RED_PROD ? 1 : kind == RED_MAX ? -INFINITY : kind == RED_MIN ? INFINITY : 0;
		else
			ai[i] = kind == RED_PROD ? 1 : kind == RED_MAX ? INT64_MIN : kind == RED_MIN ? INT64_MAX : 0;
	}
	for (int64_t f = 0, n = numel(x); f < n; f++) {
		int64_t k = 0;
		size_t j = 0;
		unflatten(f, x->rank, x->dims, idx);
		for (size_t d = 0; d < x->rank; d++)
			if (!red[d])
				k = k * od[j++] + idx[d];
			else if (keep)
				j++;  /* a kept dimension of size 1: index 0 */
		if (fl) {
			double a = ad[k], v = get_d(x, f);
			ad[k] = kind == RED_SUM || kind == RED_MEAN ? a + v : kind == RED_PROD ? a * v
				: kind == RED_MAX ? (isnan(v) || v > a ? v : a) : (isnan(v) || v < a ? v : a);
		} else {
			uint64_t a = (uint64_t)ai[k], v = (uint64_t)get_i(x, f);
			ai[k] = kind == RED_SUM ? (int64_t)(a + v) : kind == RED_PROD ? (int64_t)(a * v)
				: kind == RED_MAX ? ((int64_t)v > (int64_t)a ? (int64_t)v : (int64_t)a)
						  : ((int64_t)v < (int64_t)a ? (int64_t)v : (int64_t)a);
		}
	}
	for (int64_t i = 0; i < no; i++)
		if (fl)
			set_d(o, i, kind == RED_MEAN ? ad[i] / (double)cnt : ad[i]);
		else
			set_i(o, i, ai[i]);
	*out = o;
	return 0;
}

/* ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd: float types, and integers but for
 * ReduceMean.  An input known at import (a Shape's, say: torch.var's ReduceProd) is folded. */
int op_reduce(struct imp *m)
{
	static const char *const allowed[] = { "axes", "keepdims", "noop_with_empty_axes", NULL };
	static const char *const names[] = { [RED_SUM] = "ReduceSum", [RED_MEAN] = "ReduceMean",
		[RED_MAX] = "ReduceMax", [RED_MIN] = "ReduceMin", [RED_PROD] = "ReduceProd" };
	struct val *x, *ax = NULL;
	int64_t keep, noop, axes[2 * ONNX_RANK_MAX];
	long na = -1;
	size_t nax = 0;
	enum red kind = RED_SUM;
	int r;

	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (!strcmp(m->node->op_type, names[i]))
			kind = (enum red)i;
	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = input_opt(m, 1, &ax)) < 0 || (r = attr_int(m, "keepdims", 1, &keep)) < 0 ||
	    (r = attr_int(m, "noop_with_empty_axes", 0, &noop)) < 0 || (r = attr_ints(m, "axes", axes, &na)) < 0)
		return r;
	bool fl = dt_float(x->dt);
	if (x->dt == DT_BOOL || (kind == RED_MEAN && !fl))
		return refuse(m, "input \"%s\" has element type %s, %s are supported", x->name, DT_MLIR[x->dt],
			      kind == RED_MEAN ? "float types" : "float types, int64 and int32");
	if (ax) {
		if ((r = const_ints(m, ax, "axes", axes, ONNX_RANK_MAX, &nax)) < 0)
			return r;
	} else if (na >= 0) {
		nax = (size_t)na;
	}
	bool red[ONNX_RANK_MAX] = { 0 };
	double count = 1;
	for (size_t i = 0; i < nax; i++) {
		size_t d;
		if ((r = norm_axis(m, axes[i], x->rank, &d)) < 0)
			return r;
		red[d] = true;
	}
	if (nax == 0) {
		if (noop) {
			struct val *v = val_ssa(x->dt, x->rank, x->dims, emit_copy(m, x));
			return v ? output(m, 0, v) : oom(m);
		}
		for (size_t d = 0; d < x->rank; d++)
			red[d] = true;
	}
	int64_t od[ONNX_RANK_MAX];
	size_t orank = 0;
	for (size_t d = 0; d < x->rank; d++) {
		if (red[d])
			count *= (double)x->dims[d];
		if (!red[d] || keep)
			od[orank++] = red[d] ? 1 : x->dims[d];
	}
	struct val *s = NULL, *o = NULL;
	if (x->data && fold_fits(x->rank, x->dims)) {
		if ((r = fold_reduce(m, x, red, keep != 0, kind, orank, od, &s)) < 0)
			return r;
		return output(m, 0, s);
	}
	const char *init, *tmpl;
	switch (kind) {
	case RED_MAX:
		init = neg_inf(x->dt);
		tmpl = fl ? "#0 = arith.maximumf $o, $0 : $T\n#0" : "#0 = arith.maxsi $o, $0 : $T\n#0";
		break;
	case RED_MIN:
		init = pos_inf(x->dt);
		tmpl = fl ? "#0 = arith.minimumf $o, $0 : $T\n#0" : "#0 = arith.minsi $o, $0 : $T\n#0";
		break;
	case RED_PROD:
		init = fl ? "1.0" : "1";
		tmpl = fl ? "#0 = arith.mulf $o, $0 : $T\n#0" : "#0 = arith.muli $o, $0 : $T\n#0";
		break;
	default:
		init = zero_lit(x->dt);
		tmpl = fl ? "#0 = arith.addf $o, $0 : $T\n#0" : "#0 = arith.addi $o, $0 : $T\n#0";
		break;
	}
	if ((r = emit_reduce(m, x, red, init, tmpl, keep != 0, &s)) < 0)
		return r;
	if (kind != RED_MEAN)
		return output(m, 0, s);
	r = emit_div_const(m, s, count, &o);
	val_free(s);
	return r < 0 ? r : output(m, 0, o);
}

/* ArgMax ArgMin: the index (int64) of the first extreme along axis (the last with
 * select_last_index), one reduction nest with two results, the extreme and its index. */
int op_argext(struct imp *m)
{
	static const char *const allowed[] = { "axis", "keepdims", "select_last_index", NULL };
	bool mx = !strcmp(m->node->op_type, "ArgMax");
	struct val *x, *o;
	int64_t axis, keep, last, od[ONNX_RANK_MAX];
	size_t a, orank = 0;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = attr_int(m, "axis", 0, &axis)) < 0 || (r = attr_int(m, "keepdims", 1, &keep)) < 0 ||
	    (r = attr_int(m, "select_last_index", 0, &last)) < 0)
		return r;
	if (x->dt == DT_BOOL)
		return refuse(m, "input \"%s\" has element type %s, float types, int64 and int32 are supported",
			      x->name, DT_MLIR[x->dt]);
	if (!x->rank)
		return refuse(m, "scalar input");
	if ((r = norm_axis(m, axis, x->rank, &a)) < 0)
		return r;
	for (size_t d = 0; d < x->rank; d++)
		if (d != a || keep)
			od[orank++] = d == a ? 1 : x->dims[d];
	bool fl = dt_float(x->dt);
	if (x->data && fold_fits(x->rank, x->dims)) {
		int64_t xi[ONNX_RANK_MAX], oi[ONNX_RANK_MAX];
		if (!(o = val_const(DT_I64, orank, od)))
			return oom(m);
		for (int64_t f = 0, n = numel(o); f < n; f++) {
			unflatten(f, orank, od, oi);
			for (size_t d = 0, j = 0; d < x->rank; d++) {
				if (d != a)
					xi[d] = oi[j++];
				else if (keep)
					j++;
			}
			int64_t best = 0;
			for (int64_t k = 0; k < x->dims[a]; k++) {
				xi[a] = k;
				int64_t at = flatten_idx(x->rank, x->dims, xi);
				xi[a] = best;
				int64_t bt = flatten_idx(x->rank, x->dims, xi);
				double v = get_d(x, at), b = get_d(x, bt);
				int64_t vi = get_i(x, at), bi = get_i(x, bt);
				bool better = fl ? (mx ? v > b : v < b) || (last && v == b)
						 : (mx ? vi > bi : vi < bi) || (last && vi == bi);
				if (better)
					best = k;
			}
			set_i(o, f, best);
		}
		return output(m, 0, o);
	}
	struct gop g, ov, oi;
	gop_set(&g, ssa_of(m, x), x->dt, x->rank, x->dims);
	gop_identity(&g, x->rank);
	gop_set(&ov, emit_filled(m, x->dt, orank, od, mx ? neg_inf(x->dt) : pos_inf(x->dt)), x->dt, orank, od);
	gop_set(&oi, emit_filled(m, DT_I64, orank, od, "0"), DT_I64, orank, od);
	for (size_t d = 0; d < x->rank; d++)
		if (d != a) {
			map_add(&ov, "d%zu", d);
			map_add(&oi, "d%zu", d);
		} else if (keep) {
			map_add(&ov, "0");
			map_add(&oi, "0");
		}
	/* Strictly better keeps the first index; or equal, the last.  The extreme's initial
	 * value is the type's identity, so index 0 wins when every element equals it. */
	static const char *const cmp[2][2][2] = { { { "slt", "sle" }, { "sgt", "sge" } },
						  { { "olt", "ole" }, { "ogt", "oge" } } };
	long id = new_ssa(m), vid = new_ssa(m);
	count_linalg(m);
	strbuf_printf(&m->body, "    %%v%ld, %%v%ld = linalg.generic {indexing_maps = [", vid, id);
	const struct gop *gs[3] = { &g, &ov, &oi };
	for (size_t i = 0; i < 3; i++) {
		strbuf_printf(&m->body, "%saffine_map<(", i ? ", " : "");
		for (size_t d = 0; d < x->rank; d++)
			strbuf_printf(&m->body, "%sd%zu", d ? ", " : "", d);
		strbuf_printf(&m->body, ") -> (%s)>", gs[i]->map);
	}
	strbuf_puts(&m->body, "], iterator_types = [");
	for (size_t d = 0; d < x->rank; d++)
		strbuf_printf(&m->body, "%s\"%s\"", d ? ", " : "", d == a ? "reduction" : "parallel");
	const char *t = DT_MLIR[x->dt];
	strbuf_printf(&m->body, "]} ins(%%v%ld : %s) outs(%%v%ld, %%v%ld : %s, %s) {\n", g.ssa, g.type, ov.ssa,
		      oi.ssa, ov.type, oi.type);
	strbuf_printf(&m->body, "    ^bb0(%%a%ld_0: %s, %%a%ld_v: %s, %%a%ld_i: i64):\n", id, t, id, t, id);
	strbuf_printf(&m->body, "      %%t%ld_0 = linalg.index %zu : index\n"
		      "      %%t%ld_1 = arith.index_cast %%t%ld_0 : index to i64\n"
		      "      %%t%ld_2 = arith.%s %s, %%a%ld_0, %%a%ld_v : %s\n"
		      "      %%t%ld_3 = arith.select %%t%ld_2, %%a%ld_0, %%a%ld_v : %s\n"
		      "      %%t%ld_4 = arith.select %%t%ld_2, %%t%ld_1, %%a%ld_i : i64\n"
		      "      linalg.yield %%t%ld_3, %%t%ld_4 : %s, i64\n"
		      "    } -> (%s, %s) %s\n",
		      id, a, id, id, id, fl ? "cmpf" : "cmpi", cmp[fl][mx][last != 0], id, id, t,
		      id, id, id, id, t, id, id, id, id, id, id, t, ov.type, oi.type, m->loc);
	return (o = val_ssa(DT_I64, orank, od, id)) ? output(m, 0, o) : oom(m);
}

int op_softmax(struct imp *m)
{
	bool log_form = !strcmp(m->node->op_type, "LogSoftmax");
	static const char *const allowed[] = { "axis", NULL };
	struct val *x;
	int64_t axis;
	size_t a;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = attr_int(m, "axis", m->opset >= 13 ? -1 : 1, &axis)) < 0 || (r = need_dt(m, x, true)) < 0)
		return r;
	if (!x->rank)
		return refuse(m, "scalar input");
	if ((r = norm_axis(m, axis, x->rank, &a)) < 0)
		return r;
	bool red[ONNX_RANK_MAX] = { 0 };
	/* Opset < 13: the input is coerced to 2-D at axis, i.e. every dim from axis on. */
	for (size_t d = a; d < (m->opset >= 13 ? a + 1 : x->rank); d++)
		red[d] = true;
	struct val *mx = NULL, *e = NULL, *s = NULL, *y = NULL;
	if ((r = emit_reduce(m, x, red, neg_inf(x->dt), "#0 = arith.maximumf $o, $0 : $T\n#0", true, &mx)) < 0)
		return r;
	struct val *xe[2] = { x, mx };
	r = emit_ew(m, xe, 2, x->dt, "#0 = arith.subf $0, $1 : $T\n#1 = math.exp #0 : $T\n#1", &e);
	if (r == 0)
		r = emit_reduce(m, e, red, "0.0", "#0 = arith.addf $o, $0 : $T\n#0", true, &s);
	if (r == 0 && !log_form) {
		struct val *es[2] = { e, s };
		r = emit_ew(m, es, 2, x->dt, "#0 = arith.divf $0, $1 : $T\n#0", &y);
	} else if (r == 0) {
		struct val *xms[3] = { x, mx, s };
		r = emit_ew(m, xms, 3, x->dt,
			    "#0 = arith.subf $0, $1 : $T\n#1 = math.log $2 : $T\n#2 = arith.subf #0, #1 : $T\n#2", &y);
	}
	val_free(mx);
	val_free(e);
	val_free(s);
	return r < 0 ? r : output(m, 0, y);
}

int op_layernorm(struct imp *m)
{
	static const char *const allowed[] = { "axis", "epsilon", "stash_type", NULL };
	struct val *x, *scale, *bias;
	int64_t axis, stash;
	double eps;
	size_t a;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 3)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = input(m, 1, &scale)) < 0 || (r = input_opt(m, 2, &bias)) < 0 ||
	    (r = attr_int(m, "axis", -1, &axis)) < 0 || (r = attr_int(m, "stash_type", 1, &stash)) < 0 ||
	    (r = attr_float(m, "epsilon", 1e-5, &eps)) < 0 || (r = need_dt(m, x, true)) < 0)
		return r;
	if (stash != 1)
		return refuse(m, "attribute stash_type=%" PRId64 " is not supported (1: float)", stash);
	if (!x->rank || (r = norm_axis(m, axis, x->rank, &a)) < 0)
		return x->rank ? r : refuse(m, "scalar input");
	if (scale->dt != x->dt || (bias && bias->dt != x->dt))
		return refuse(m, "Scale and B must have X's element type");
	bool red[ONNX_RANK_MAX] = { 0 };
	double n = 1;
	for (size_t d = a; d < x->rank; d++) {
		red[d] = true;
		n *= (double)x->dims[d];
	}
	char tmpl[400], ln[64], le[64];
	fmt_float(ln, sizeof ln, n, x->dt);
	fmt_float(le, sizeof le, eps, x->dt);
	struct val *s = NULL, *mean = NULL, *dev = NULL, *sq = NULL, *inv = NULL, *y = NULL;
	r = emit_reduce(m, x, red, "0.0", "#0 = arith.addf $o, $0 : $T\n#0", true, &s);
	if (r == 0)
		r = emit_div_const(m, s, n, &mean);
	if (r == 0) {
		struct val *xm[2] = { x, mean };
		r = emit_ew(m, xm, 2, x->dt, "#0 = arith.subf $0, $1 : $T\n#0", &dev);
	}
	if (r == 0)
		r = emit_reduce(m, dev, red, "0.0", "#0 = arith.mulf $0, $0 : $T\n#1 = arith.addf $o, #0 : $T\n#1",
				true, &sq);
	if (r == 0) {
		snprintf(tmpl, sizeof tmpl,
			 "#0 = arith.constant %s : $T\n#1 = arith.divf $0, #0 : $T\n#2 = arith.constant %s : $T\n"
			 "#3 = arith.addf #1, #2 : $T\n#4 = math.rsqrt #3 : $T\n#4", ln, le);
		r = emit_ew(m, &sq, 1, x->dt, tmpl, &inv);
	}
	if (r == 0) {
		struct val *ins[4] = { dev, inv, scale, bias };
		r = emit_ew(m, ins, bias ? 4 : 3, x->dt,
			    bias ? "#0 = arith.mulf $0, $1 : $T\n#1 = arith.mulf #0, $2 : $T\n#2 = arith.addf #1, $3 : $T\n#2"
				 : "#0 = arith.mulf $0, $1 : $T\n#1 = arith.mulf #0, $2 : $T\n#1", &y);
	}
	val_free(s);
	val_free(dev);
	val_free(sq);
	if (r == 0 && y && (y->rank != x->rank || memcmp(y->dims, x->dims, x->rank * sizeof *x->dims)))
		r = refuse(m, "Scale or B does not broadcast to the normalized dimensions");
	if (r < 0) {
		val_free(mean);
		val_free(inv);
		val_free(y);
		return r;
	}
	if ((r = output(m, 0, y)) < 0) {
		val_free(mean);
		val_free(inv);
		return r;
	}
	if ((r = output(m, 1, mean)) < 0) {
		val_free(inv);
		return r;
	}
	return output(m, 2, inv);
}

int op_batchnorm(struct imp *m)
{
	static const char *const allowed[] = { "epsilon", "momentum", "training_mode", "spatial", NULL };
	struct val *x, *p[4], *o = NULL;
	int64_t training;
	double eps;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = attr_float(m, "epsilon", 1e-5, &eps)) < 0 || (r = attr_int(m, "training_mode", 0, &training)) < 0 ||
	    (r = need_dt(m, x, true)) < 0)
		return r;
	if (training)
		return refuse(m, "attribute training_mode=%" PRId64 " is not supported (inference only)", training);
	static const char *const what[] = { "scale", "B", "input_mean", "input_var" };
	if (x->rank < 2)
		return refuse(m, "input rank %zu, at least 2", x->rank);
	int64_t C = x->dims[1];
	for (size_t i = 0; i < 4; i++) {
		if ((r = input_const(m, i + 1, what[i], &p[i])) < 0)
			return r;
		if (p[i]->rank != 1 || p[i]->dims[0] != C)
			return refuse(m, "%s must have %" PRId64 " values", what[i], C);
	}
	/* y = x * a + b per channel, a = scale / sqrt(var + eps), b = B - mean * a. */
	int64_t dims[ONNX_RANK_MAX];
	dims[0] = C;
	for (size_t d = 2; d < x->rank; d++)
		dims[d - 1] = 1;
	struct val *a = val_const(x->dt, x->rank - 1, dims), *b = val_const(x->dt, x->rank - 1, dims);
	if (!a || !b) {
		val_free(a);
		val_free(b);
		return oom(m);
	}
	for (int64_t c = 0; c < C; c++) {
		double sc = get_d(p[0], c) / sqrt(get_d(p[3], c) + eps);
		set_d(a, c, sc);
		set_d(b, c, get_d(p[1], c) - get_d(p[2], c) * sc);
	}
	struct val *ins[3] = { x, a, b };
	r = emit_ew(m, ins, 3, x->dt, "#0 = arith.mulf $0, $1 : $T\n#1 = arith.addf #0, $2 : $T\n#1", &o);
	val_free(a);
	val_free(b);
	return r < 0 ? r : output(m, 0, o);
}
