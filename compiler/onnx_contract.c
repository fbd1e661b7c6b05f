/* SPDX-License-Identifier: MIT */
/*
 * onnx_contract.c: the contractions and windowed operators of the importer (onnx_internal.h):
 * MatMul and Gemm, then padding (tensor.pad), the spatial window geometry shared by Conv and
 * the pools, Conv, MaxPool and AveragePool.
 */
#include "onnx_internal.h"

/* ---------------------------------------------------------------- contractions */

static const char *MAC_F = "#0 = arith.mulf $0, $1 : $T\n#1 = arith.addf $o, #0 : $T\n#1";
static const char *MAC_I = "#0 = arith.muli $0, $1 : $T\n#1 = arith.addi $o, #0 : $T\n#1";

int op_matmul(struct imp *m)
{
	static const char *const none[] = { NULL };
	struct val *a, *b;
	int r;

	if ((r = attrs_allowed(m, none)) < 0 || (r = outputs_max(m, 1)) < 0 ||
	    (r = input(m, 0, &a)) < 0 || (r = input(m, 1, &b)) < 0)
		return r;
	if (a->dt != b->dt || a->dt == DT_BOOL)
		return refuse(m, "input types %s and %s are not supported", DT_MLIR[a->dt], DT_MLIR[b->dt]);
	if (!a->rank || !b->rank)
		return refuse(m, "scalar inputs");
	bool a1 = a->rank == 1, b1 = b->rank == 1;
	int64_t M = a1 ? 1 : a->dims[a->rank - 2], K = a->dims[a->rank - 1];
	int64_t Kb = b1 ? b->dims[0] : b->dims[b->rank - 2], N = b1 ? 1 : b->dims[b->rank - 1];
	if (K != Kb)
		return refuse(m, "inner dimensions differ (%" PRId64 " and %" PRId64 ")", K, Kb);
	size_t ra = a1 ? 0 : a->rank - 2, rb = b1 ? 0 : b->rank - 2;
	size_t nb = ra > rb ? ra : rb;
	int64_t bd[ONNX_RANK_MAX];
	for (size_t d = 0; d < nb; d++) {
		int64_t x = d + ra >= nb ? a->dims[d + ra - nb] : 1;
		int64_t y = d + rb >= nb ? b->dims[d + rb - nb] : 1;
		if (x != y && x != 1 && y != 1)
			return refuse(m, "batch dimensions do not broadcast (%" PRId64 " and %" PRId64 ")", x, y);
		bd[d] = x == 1 ? y : x;
	}
	size_t orank = nb + !a1 + !b1;
	if (orank > ONNX_RANK_MAX)
		return refuse(m, "result rank %zu", orank);
	int64_t od[ONNX_RANK_MAX];
	memcpy(od, bd, nb * sizeof *od);
	size_t k = nb;
	if (!a1)
		od[k++] = M;
	if (!b1)
		od[k++] = N;
	if ((r = check_shape(m, "the result", orank, od)) < 0)
		return r;
	/* Loops: batch..., m, n, k. */
	size_t dm = nb, dn = nb + !a1, dk = nb + !a1 + !b1;
	bool red[ONNX_RANK_MAX + 1] = { 0 };
	red[dk] = true;
	struct gop g[2], o;
	gop_set(&g[0], ssa_of(m, a), a->dt, a->rank, a->dims);
	for (size_t d = 0; d < ra; d++)
		if (a->dims[d] == 1 && bd[d + nb - ra] != 1)
			map_add(&g[0], "0");
		else
			map_add(&g[0], "d%zu", d + nb - ra);
	if (!a1)
		map_add(&g[0], "d%zu", dm);
	map_add(&g[0], "d%zu", dk);
	gop_set(&g[1], ssa_of(m, b), b->dt, b->rank, b->dims);
	for (size_t d = 0; d < rb; d++)
		if (b->dims[d] == 1 && bd[d + nb - rb] != 1)
			map_add(&g[1], "0");
		else
			map_add(&g[1], "d%zu", d + nb - rb);
	map_add(&g[1], "d%zu", dk);
	if (!b1)
		map_add(&g[1], "d%zu", dn);
	gop_set(&o, emit_filled(m, a->dt, orank, od, zero_lit(a->dt)), a->dt, orank, od);
	gop_identity(&o, orank);
	long id = generic(m, dk + 1, red, g, 2, &o, dt_float(a->dt) ? MAC_F : MAC_I);
	struct val *v = val_ssa(a->dt, orank, od, id);
	return v ? output(m, 0, v) : oom(m);
}

int op_gemm(struct imp *m)
{
	static const char *const allowed[] = { "alpha", "beta", "transA", "transB", NULL };
	struct val *a, *b, *c;
	int64_t ta, tb;
	double alpha, beta;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 ||
	    (r = attr_int(m, "transA", 0, &ta)) < 0 || (r = attr_int(m, "transB", 0, &tb)) < 0 ||
	    (r = attr_float(m, "alpha", 1.0, &alpha)) < 0 || (r = attr_float(m, "beta", 1.0, &beta)) < 0 ||
	    (r = input(m, 0, &a)) < 0 || (r = input(m, 1, &b)) < 0 || (r = input_opt(m, 2, &c)) < 0)
		return r;
	if ((r = need_dt(m, a, true)) < 0)
		return r;
	if (a->rank != 2 || b->rank != 2 || a->dt != b->dt || (c && c->dt != a->dt))
		return refuse(m, "A and B must be 2-D of one float type");
	int64_t M = ta ? a->dims[1] : a->dims[0], K = ta ? a->dims[0] : a->dims[1];
	int64_t Kb = tb ? b->dims[1] : b->dims[0], N = tb ? b->dims[0] : b->dims[1];
	if (K != Kb)
		return refuse(m, "inner dimensions differ (%" PRId64 " and %" PRId64 ")", K, Kb);
	int64_t od[2] = { M, N };
	bool red[3] = { false, false, true };
	struct gop g[2], o;
	gop_set(&g[0], ssa_of(m, a), a->dt, 2, a->dims);
	snprintf(g[0].map, sizeof g[0].map, ta ? "d2, d0" : "d0, d2");
	gop_set(&g[1], ssa_of(m, b), b->dt, 2, b->dims);
	snprintf(g[1].map, sizeof g[1].map, tb ? "d1, d2" : "d2, d1");
	gop_set(&o, emit_filled(m, a->dt, 2, od, "0.0"), a->dt, 2, od);
	gop_identity(&o, 2);
	long id = generic(m, 3, red, g, 2, &o, MAC_F);
	struct val *y = val_ssa(a->dt, 2, od, id);
	if (!y)
		return oom(m);
	if (alpha == 1.0 && (!c || beta == 0.0))
		return output(m, 0, y);
	char tmpl[400], la[64], lb[64];
	fmt_float(la, sizeof la, alpha, a->dt);
	fmt_float(lb, sizeof lb, beta, a->dt);
	struct val *ins[2] = { y, c };
	if (c && beta == 1.0 && alpha == 1.0)
		snprintf(tmpl, sizeof tmpl, "#0 = arith.addf $0, $1 : $T\n#0"); /* a bias, as MatMul + Add */
	else if (c && beta != 0.0)
		snprintf(tmpl, sizeof tmpl,
			 "#0 = arith.constant %s : $T\n#1 = arith.mulf $0, #0 : $T\n#2 = arith.constant %s : $T\n"
			 "#3 = arith.mulf $1, #2 : $T\n#4 = arith.addf #1, #3 : $T\n#4", la, lb);
	else
		snprintf(tmpl, sizeof tmpl, "#0 = arith.constant %s : $T\n#1 = arith.mulf $0, #0 : $T\n#1", la);
	struct val *o2 = NULL;
	if (c) {
		size_t rank;
		int64_t dims[ONNX_RANK_MAX];
		if ((r = broadcast(m, ins, 2, &rank, dims)) < 0 || rank != 2 || dims[0] != M || dims[1] != N) {
			val_free(y);
			return r < 0 ? r : refuse(m, "C does not broadcast to [%" PRId64 ", %" PRId64 "]", M, N);
		}
	}
	r = emit_ew(m, ins, c && beta != 0.0 ? 2 : 1, a->dt, tmpl, &o2);
	val_free(y);
	return r < 0 ? r : output(m, 0, o2);
}

/* ---------------------------------------------------------------- convolution and pooling */

/* tensor.pad of x with a literal at the low/high amounts of every dim. */
int emit_pad(struct imp *m, struct val *x, const int64_t *lo, const int64_t *hi, const char *lit,
		    struct val **out)
{
	int64_t od[ONNX_RANK_MAX];
	bool any = false;
	for (size_t d = 0; d < x->rank; d++) {
		if (lo[d] < 0 || hi[d] < 0)
			return refuse(m, "negative padding");
		od[d] = x->dims[d] + lo[d] + hi[d];
		any = any || lo[d] || hi[d];
	}
	if (!any) {
		*out = NULL;
		return 0;
	}
	int r = check_shape(m, "the padded input", x->rank, od);
	if (r < 0)
		return r;
	char ty[256], tyo[256];
	vtype(ty, sizeof ty, x);
	tensor_type(tyo, sizeof tyo, x->dt, x->rank, od);
	long src = ssa_of(m, x), c = new_ssa(m), id = new_ssa(m);
	strbuf_printf(&m->body, "    %%v%ld = arith.constant %s : %s %s\n", c, lit, DT_MLIR[x->dt], m->loc);
	strbuf_printf(&m->body, "    %%v%ld = tensor.pad %%v%ld low[", id, src);
	for (size_t d = 0; d < x->rank; d++)
		strbuf_printf(&m->body, "%s%" PRId64, d ? ", " : "", lo[d]);
	strbuf_puts(&m->body, "] high[");
	for (size_t d = 0; d < x->rank; d++)
		strbuf_printf(&m->body, "%s%" PRId64, d ? ", " : "", hi[d]);
	strbuf_puts(&m->body, "] {\n    ^bb0(");
	for (size_t d = 0; d < x->rank; d++)
		strbuf_printf(&m->body, "%s%%p%ld_%zu: index", d ? ", " : "", id, d);
	strbuf_printf(&m->body, "):\n      tensor.yield %%v%ld : %s\n    } : %s to %s %s\n", c, DT_MLIR[x->dt], ty, tyo,
		m->loc);
	return (*out = val_ssa(x->dt, x->rank, od, id)) ? 0 : oom(m);
}

/* Spatial geometry shared by Conv and the pools. */
struct window {
	size_t ns;  /* spatial dims */
	int64_t k[ONNX_RANK_MAX], s[ONNX_RANK_MAX], d[ONNX_RANK_MAX];
	int64_t pb[ONNX_RANK_MAX], pe[ONNX_RANK_MAX], extra[ONNX_RANK_MAX];
	int64_t o[ONNX_RANK_MAX];
};

static int window_get(struct imp *m, const struct val *x, const int64_t *kernel, bool ceil_mode, struct window *w)
{
	int64_t v[2 * ONNX_RANK_MAX];
	long n;
	char ap[32];
	int r;

	w->ns = x->rank - 2;
	for (size_t i = 0; i < w->ns; i++) {
		w->k[i] = kernel[i];
		w->s[i] = w->d[i] = 1;
		w->pb[i] = w->pe[i] = w->extra[i] = 0;
		if (w->k[i] <= 0)
			return refuse(m, "kernel dimension %zu is %" PRId64, i, w->k[i]);
	}
	if ((r = attr_ints(m, "strides", v, &n)) < 0)
		return r;
	if (n >= 0 && (size_t)n != w->ns)
		return refuse(m, "attribute strides has %ld values, expected %zu", n, w->ns);
	for (long i = 0; i < n; i++)
		if ((w->s[i] = v[i]) <= 0)
			return refuse(m, "attribute strides: %" PRId64 " is not positive", v[i]);
	if ((r = attr_ints(m, "dilations", v, &n)) < 0)
		return r;
	if (n >= 0 && (size_t)n != w->ns)
		return refuse(m, "attribute dilations has %ld values, expected %zu", n, w->ns);
	for (long i = 0; i < n; i++)
		if ((w->d[i] = v[i]) <= 0)
			return refuse(m, "attribute dilations: %" PRId64 " is not positive", v[i]);
	if ((r = attr_str(m, "auto_pad", "NOTSET", ap, sizeof ap)) < 0)
		return r;
	if ((r = attr_ints(m, "pads", v, &n)) < 0)
		return r;
	if (n >= 0 && (size_t)n != 2 * w->ns)
		return refuse(m, "attribute pads has %ld values, expected %zu", n, 2 * w->ns);
	if (n >= 0 && strcmp(ap, "NOTSET") != 0)
		return refuse(m, "attribute pads together with auto_pad=%s", ap);
	for (long i = 0; i < n; i++)
		if (v[i] < 0)
			return refuse(m, "attribute pads: %" PRId64 " is negative", v[i]);
	for (size_t i = 0; i < w->ns; i++) {
		int64_t in = x->dims[2 + i], span = (w->k[i] - 1) * w->d[i] + 1;
		if (!strcmp(ap, "NOTSET") || !strcmp(ap, "VALID")) {
			if (n >= 0) {
				w->pb[i] = v[i];
				w->pe[i] = v[w->ns + i];
			}
			int64_t full = in + w->pb[i] + w->pe[i] - span;
			if (full < 0)
				return refuse(m, "the window (%" PRId64 ") is larger than the padded input (%" PRId64 ")",
					      span, in + w->pb[i] + w->pe[i]);
			w->o[i] = (ceil_mode ? (full + w->s[i] - 1) / w->s[i] : full / w->s[i]) + 1;
			if (ceil_mode && (w->o[i] - 1) * w->s[i] >= in + w->pb[i])
				w->o[i]--;
		} else if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
			w->o[i] = (in + w->s[i] - 1) / w->s[i];
			int64_t total = (w->o[i] - 1) * w->s[i] + span - in;
			if (total < 0)
				total = 0;
			w->pb[i] = !strcmp(ap, "SAME_UPPER") ? total / 2 : total - total / 2;
			w->pe[i] = total - w->pb[i];
		} else {
			return refuse(m, "attribute auto_pad=%s is not supported", ap);
		}
		int64_t need = (w->o[i] - 1) * w->s[i] + span;
		if (need > in + w->pb[i] + w->pe[i])
			w->extra[i] = need - (in + w->pb[i] + w->pe[i]);
	}
	return 0;
}

/* "d<o> * s + d<k> * d" */
static void win_expr(struct gop *g, size_t dout, size_t dk, int64_t s, int64_t d)
{
	map_add(g, "d%zu * %" PRId64 " + d%zu * %" PRId64, dout, s, dk, d);
}

int op_conv(struct imp *m)
{
	static const char *const allowed[] = { "auto_pad", "dilations", "group", "kernel_shape", "pads", "strides", NULL };
	struct val *x, *w, *b;
	int64_t group, ks[2 * ONNX_RANK_MAX];
	long nks;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = input(m, 1, &w)) < 0 || (r = input_opt(m, 2, &b)) < 0 || (r = attr_int(m, "group", 1, &group)) < 0 ||
	    (r = attr_ints(m, "kernel_shape", ks, &nks)) < 0 || (r = need_dt(m, x, true)) < 0)
		return r;
	if (x->rank < 3 || x->rank + 1 > ONNX_RANK_MAX || w->rank != x->rank || w->dt != x->dt ||
	    (b && (b->rank != 1 || b->dt != x->dt)))
		return refuse(m, "X and W must have one float type and rank 3 to %d, B rank 1", ONNX_RANK_MAX - 1);
	int64_t N = x->dims[0], C = x->dims[1], M = w->dims[0];
	if (group <= 0 || C % group || M % group || w->dims[1] != C / group)
		return refuse(m, "attribute group=%" PRId64 " does not fit %" PRId64 " input and %" PRId64
			      " output channels (W has %" PRId64 " per group)", group, C, M, w->dims[1]);
	if (b && b->dims[0] != M)
		return refuse(m, "B has %" PRId64 " values, expected %" PRId64, b->dims[0], M);
	if (nks >= 0 && (size_t)nks != x->rank - 2)
		return refuse(m, "attribute kernel_shape has %ld values", nks);
	for (long i = 0; i < nks; i++)
		if (ks[i] != w->dims[2 + i])
			return refuse(m, "attribute kernel_shape differs from W's shape");
	struct window win;
	if ((r = window_get(m, x, w->dims + 2, false, &win)) < 0)
		return r;
	size_t ns = win.ns;
	int64_t G = group, Cg = C / G, Mg = M / G;
	int64_t lo[ONNX_RANK_MAX] = { 0 }, hi[ONNX_RANK_MAX] = { 0 };
	for (size_t i = 0; i < ns; i++) {
		lo[2 + i] = win.pb[i];
		hi[2 + i] = win.pe[i] + win.extra[i];
	}
	struct val *xp = NULL, *xg = NULL, *wg = NULL, *bg = NULL, *yg = NULL, *y = NULL;
	if ((r = emit_pad(m, x, lo, hi, "0.0", &xp)) < 0)
		return r;
	struct val *xs = xp ? xp : x;
	int64_t dx[ONNX_RANK_MAX], dw[ONNX_RANK_MAX], dy[ONNX_RANK_MAX], dyo[ONNX_RANK_MAX];
	dx[0] = N, dx[1] = G, dx[2] = Cg;
	dw[0] = G, dw[1] = Mg, dw[2] = Cg;
	dy[0] = N, dy[1] = G, dy[2] = Mg;
	dyo[0] = N, dyo[1] = M;
	for (size_t i = 0; i < ns; i++) {
		dx[3 + i] = xs->dims[2 + i];
		dw[3 + i] = w->dims[2 + i];
		dy[3 + i] = dyo[2 + i] = win.o[i];
	}
	if ((r = check_shape(m, "the result", ns + 2, dyo)) < 0)
		goto done;
	if ((r = emit_reshape(m, xs, ns + 3, dx, &xg)) < 0 || (r = emit_reshape(m, w, ns + 3, dw, &wg)) < 0)
		goto done;
	/* Loops: n, g, mg, o..., c, k... */
	size_t nd = 3 + ns + 1 + ns;
	bool red[2 * ONNX_RANK_MAX + 4] = { 0 };
	for (size_t i = 3 + ns; i < nd; i++)
		red[i] = true;
	struct gop g[2], o;
	long init;
	if (b) {
		int64_t db[2] = { G, Mg };
		if ((r = emit_reshape(m, b, 2, db, &bg)) < 0)
			goto done;
		struct gop gb, ob;
		gop_set(&gb, ssa_of(m, bg), bg->dt, 2, db);
		map_add(&gb, "d1, d2");
		gop_set(&ob, emit_empty(m, x->dt, ns + 3, dy), x->dt, ns + 3, dy);
		gop_identity(&ob, ns + 3);
		init = generic(m, ns + 3, NULL, &gb, 1, &ob, "$0\n");
	} else {
		init = emit_filled(m, x->dt, ns + 3, dy, "0.0");
	}
	gop_set(&g[0], ssa_of(m, xg), x->dt, ns + 3, dx);
	map_add(&g[0], "d0, d1, d%zu", 3 + ns);
	for (size_t i = 0; i < ns; i++)
		win_expr(&g[0], 3 + i, 4 + ns + i, win.s[i], win.d[i]);
	gop_set(&g[1], ssa_of(m, wg), x->dt, ns + 3, dw);
	map_add(&g[1], "d1, d2, d%zu", 3 + ns);
	for (size_t i = 0; i < ns; i++)
		map_add(&g[1], "d%zu", 4 + ns + i);
	gop_set(&o, init, x->dt, ns + 3, dy);
	gop_identity(&o, ns + 3);
	long id = generic(m, nd, red, g, 2, &o, MAC_F);
	if (!(yg = val_ssa(x->dt, ns + 3, dy, id))) {
		r = oom(m);
		goto done;
	}
	if ((r = emit_reshape(m, yg, ns + 2, dyo, &y)) < 0)
		goto done;
	y->is_view = false; /* the reshape of a fresh result */
	r = output(m, 0, y);
	y = NULL;
done:
	val_free(xp);
	val_free(xg);
	val_free(wg);
	val_free(bg);
	val_free(yg);
	val_free(y);
	return r;
}

int op_pool(struct imp *m)
{
	bool is_max = !strcmp(m->node->op_type, "MaxPool");
	static const char *const amax[] = { "auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads",
					    "storage_order", "strides", NULL };
	static const char *const aavg[] = { "auto_pad", "ceil_mode", "count_include_pad", "dilations",
					    "kernel_shape", "pads", "strides", NULL };
	struct val *x;
	int64_t ks[2 * ONNX_RANK_MAX], ceil_mode, cip, so;
	long nks;
	int r;

	if ((r = attrs_allowed(m, is_max ? amax : aavg)) < 0 || (r = outputs_max(m, 1)) < 0 ||
	    (r = input(m, 0, &x)) < 0 || (r = attr_ints(m, "kernel_shape", ks, &nks)) < 0 ||
	    (r = attr_int(m, "ceil_mode", 0, &ceil_mode)) < 0 || (r = attr_int(m, "count_include_pad", 0, &cip)) < 0 ||
	    (r = attr_int(m, "storage_order", 0, &so)) < 0 || (r = need_dt(m, x, true)) < 0)
		return r;
	if (x->rank < 3 || x->rank + 1 > ONNX_RANK_MAX)
		return refuse(m, "X has rank %zu, expected 3 to %d", x->rank, ONNX_RANK_MAX - 1);
	if (nks < 0 || (size_t)nks != x->rank - 2)
		return refuse(m, "attribute kernel_shape is missing or has the wrong length");
	if (so)
		return refuse(m, "attribute storage_order=%" PRId64 " is not supported", so);
	struct window win;
	if ((r = window_get(m, x, ks, ceil_mode != 0, &win)) < 0)
		return r;
	size_t ns = win.ns;
	int64_t lo[ONNX_RANK_MAX] = { 0 }, hi[ONNX_RANK_MAX] = { 0 }, dy[ONNX_RANK_MAX];
	for (size_t i = 0; i < ns; i++) {
		lo[2 + i] = win.pb[i];
		hi[2 + i] = win.pe[i] + win.extra[i];
	}
	dy[0] = x->dims[0];
	dy[1] = x->dims[1];
	for (size_t i = 0; i < ns; i++)
		dy[2 + i] = win.o[i];
	if ((r = check_shape(m, "the result", x->rank, dy)) < 0)
		return r;
	struct val *xp = NULL, *s = NULL, *div = NULL, *y = NULL;
	if ((r = emit_pad(m, x, lo, hi, is_max ? neg_inf(x->dt) : "0.0", &xp)) < 0)
		return r;
	struct val *xs = xp ? xp : x;
	/* Loops: n, c, o..., k... ; the window's extents come from an unused kernel-shaped operand. */
	size_t nd = 2 + 2 * ns;
	bool red[2 * ONNX_RANK_MAX + 2] = { 0 };
	for (size_t i = 2 + ns; i < nd; i++)
		red[i] = true;
	struct gop g[2], o;
	gop_set(&g[0], ssa_of(m, xs), x->dt, x->rank, xs->dims);
	map_add(&g[0], "d0, d1");
	for (size_t i = 0; i < ns; i++)
		win_expr(&g[0], 2 + i, 2 + ns + i, win.s[i], win.d[i]);
	gop_set(&g[1], emit_empty(m, x->dt, ns, win.k), x->dt, ns, win.k);
	for (size_t i = 0; i < ns; i++)
		map_add(&g[1], "d%zu", 2 + ns + i);
	gop_set(&o, emit_filled(m, x->dt, x->rank, dy, is_max ? neg_inf(x->dt) : "0.0"), x->dt, x->rank, dy);
	gop_identity(&o, x->rank);
	long id = generic(m, nd, red, g, 2, &o,
			  is_max ? "#0 = arith.maximumf $o, $0 : $T\n#0" : "#0 = arith.addf $o, $0 : $T\n#0");
	val_free(xp);
	if (!(s = val_ssa(x->dt, x->rank, dy, id)))
		return oom(m);
	if (is_max)
		return output(m, 0, s);
	/* The divisor of every output position: the window's elements inside the input (and the
	 * explicit padding when count_include_pad), known at import. */
	if (!(div = val_const(x->dt, ns, win.o))) {
		val_free(s);
		return oom(m);
	}
	for (int64_t f = 0, n = numel(div); f < n; f++) {
		int64_t rem = f, cnt = 1;
		for (size_t i = ns; i-- > 0;) {
			int64_t oi = rem % win.o[i], c = 0;
			rem /= win.o[i];
			int64_t lo_ok = cip ? -win.pb[i] : 0, hi_ok = x->dims[2 + i] + (cip ? win.pe[i] : 0);
			for (int64_t k = 0; k < win.k[i]; k++) {
				int64_t p = oi * win.s[i] - win.pb[i] + k * win.d[i];
				c += p >= lo_ok && p < hi_ok;
			}
			cnt *= c;
		}
		set_d(div, f, cnt ? (double)cnt : 1.0);
	}
	struct val *ins[2] = { s, div };
	r = emit_ew(m, ins, 2, x->dt, "#0 = arith.divf $0, $1 : $T\n#0", &y);
	val_free(s);
	val_free(div);
	return r < 0 ? r : output(m, 0, y);
}
