/* SPDX-License-Identifier: MIT */
/*
 * onnx_elementwise.c: the elementwise operators of the importer (onnx_internal.h): the table
 * of one-payload operators (EWOPS: arithmetic, comparisons, logic, unary math, activations)
 * with their folding at import, and Clip, CumSum and the variadic Max, Min, Sum and Mean.
 */
#include "onnx_internal.h"

/* ---------------------------------------------------------------- elementwise operators */

const struct ewop EWOPS[] = {
	{ "Add", 2, EW_SAME, "#0 = arith.addf $0, $1 : $T\n#0", "#0 = arith.addi $0, $1 : $T\n#0" },
	{ "Sub", 2, EW_SAME, "#0 = arith.subf $0, $1 : $T\n#0", "#0 = arith.subi $0, $1 : $T\n#0" },
	{ "Mul", 2, EW_SAME, "#0 = arith.mulf $0, $1 : $T\n#0", "#0 = arith.muli $0, $1 : $T\n#0" },
	{ "Div", 2, EW_SAME, "#0 = arith.divf $0, $1 : $T\n#0", "#0 = arith.divsi $0, $1 : $T\n#0" },
	{ "Pow", 2, EW_SAME, "#0 = math.powf $0, $1 : $T\n#0", NULL },
	{ "Relu", 1, EW_SAME, "#0 = arith.constant 0.0 : $T\n#1 = arith.maximumf $0, #0 : $T\n#1",
	  "#0 = arith.constant 0 : $T\n#1 = arith.maxsi $0, #0 : $T\n#1" },
	{ "Tanh", 1, EW_SAME, "#0 = math.tanh $0 : $T\n#0", NULL },
	{ "Erf", 1, EW_SAME, "#0 = math.erf $0 : $T\n#0", NULL },
	{ "Sqrt", 1, EW_SAME, "#0 = math.sqrt $0 : $T\n#0", NULL },
	{ "Exp", 1, EW_SAME, "#0 = math.exp $0 : $T\n#0", NULL },
	{ "Log", 1, EW_SAME, "#0 = math.log $0 : $T\n#0", NULL },
	{ "Sin", 1, EW_SAME, "#0 = math.sin $0 : $T\n#0", NULL },
	{ "Cos", 1, EW_SAME, "#0 = math.cos $0 : $T\n#0", NULL },
	{ "Floor", 1, EW_SAME, "#0 = math.floor $0 : $T\n#0", NULL },
	{ "Ceil", 1, EW_SAME, "#0 = math.ceil $0 : $T\n#0", NULL },
	{ "Abs", 1, EW_SAME, "#0 = math.absf $0 : $T\n#0", "#0 = math.absi $0 : $T\n#0" },
	{ "Neg", 1, EW_SAME, "#0 = arith.negf $0 : $T\n#0",
	  "#0 = arith.constant 0 : $T\n#1 = arith.subi #0, $0 : $T\n#1" },
	{ "Reciprocal", 1, EW_SAME, "#0 = arith.constant 1.0 : $T\n#1 = arith.divf #0, $0 : $T\n#1", NULL },
	{ "Sigmoid", 1, EW_SAME,
	  "#0 = arith.negf $0 : $T\n#1 = math.exp #0 : $T\n#2 = arith.constant 1.0 : $T\n"
	  "#3 = arith.addf #2, #1 : $T\n#4 = arith.divf #2, #3 : $T\n#4", NULL },
	{ "Equal", 2, EW_BOOL, "#0 = arith.cmpf oeq, $0, $1 : $T\n#1 = arith.extui #0 : i1 to i8\n#1",
	  "#0 = arith.cmpi eq, $0, $1 : $T\n#1 = arith.extui #0 : i1 to i8\n#1" },
	{ "Less", 2, EW_BOOL, "#0 = arith.cmpf olt, $0, $1 : $T\n#1 = arith.extui #0 : i1 to i8\n#1",
	  "#0 = arith.cmpi slt, $0, $1 : $T\n#1 = arith.extui #0 : i1 to i8\n#1" },
	{ "Greater", 2, EW_BOOL, "#0 = arith.cmpf ogt, $0, $1 : $T\n#1 = arith.extui #0 : i1 to i8\n#1",
	  "#0 = arith.cmpi sgt, $0, $1 : $T\n#1 = arith.extui #0 : i1 to i8\n#1" },
	{ "Not", 1, EW_SAME, NULL, "#0 = arith.constant 1 : i8\n#1 = arith.xori $0, #0 : i8\n#1" },
	{ "And", 2, EW_SAME, NULL, "#0 = arith.andi $0, $1 : i8\n#0" },
	{ "Or", 2, EW_SAME, NULL, "#0 = arith.ori $0, $1 : i8\n#0" },
	{ "Where", 3, EW_SECOND, NULL,
	  "#0 = arith.constant 0 : i8\n#1 = arith.cmpi ne, $0, #0 : i8\n#2 = arith.select #1, $1, $2 : $U\n#2" },
};
const size_t N_EWOPS = ELEMENTSOF(EWOPS);

static double fold_d(const char *op, double a, double b)
{
	if (!strcmp(op, "Add")) return a + b;
	if (!strcmp(op, "Sub")) return a - b;
	if (!strcmp(op, "Mul")) return a * b;
	if (!strcmp(op, "Div")) return a / b;
	if (!strcmp(op, "Pow")) return pow(a, b);
	if (!strcmp(op, "Relu")) return a > 0 ? a : 0;
	if (!strcmp(op, "Tanh")) return tanh(a);
	if (!strcmp(op, "Erf")) return erf(a);
	if (!strcmp(op, "Sqrt")) return sqrt(a);
	if (!strcmp(op, "Exp")) return exp(a);
	if (!strcmp(op, "Log")) return log(a);
	if (!strcmp(op, "Sin")) return sin(a);
	if (!strcmp(op, "Cos")) return cos(a);
	if (!strcmp(op, "Floor")) return floor(a);
	if (!strcmp(op, "Ceil")) return ceil(a);
	if (!strcmp(op, "Abs")) return fabs(a);
	if (!strcmp(op, "Neg")) return -a;
	if (!strcmp(op, "Reciprocal")) return 1 / a;
	if (!strcmp(op, "Sigmoid")) return 1 / (1 + exp(-a));
	if (!strcmp(op, "Equal")) return a == b;
	if (!strcmp(op, "Less")) return a < b;
	if (!strcmp(op, "Greater")) return a > b;
	return 0;
}

static int64_t fold_i(const char *op, int64_t a, int64_t b, int64_t c)
{
	if (!strcmp(op, "Add")) return (int64_t)((uint64_t)a + (uint64_t)b);
	if (!strcmp(op, "Sub")) return (int64_t)((uint64_t)a - (uint64_t)b);
	if (!strcmp(op, "Mul")) return (int64_t)((uint64_t)a * (uint64_t)b);
	if (!strcmp(op, "Div")) return b == 0 || (a == INT64_MIN && b == -1) ? 0 : a / b;
	if (!strcmp(op, "Relu")) return a > 0 ? a : 0;
	if (!strcmp(op, "Abs")) return a < 0 ? -a : a;
	if (!strcmp(op, "Neg")) return -a;
	if (!strcmp(op, "Equal")) return a == b;
	if (!strcmp(op, "Less")) return a < b;
	if (!strcmp(op, "Greater")) return a > b;
	if (!strcmp(op, "Not")) return !a;
	if (!strcmp(op, "And")) return a && b;
	if (!strcmp(op, "Or")) return a || b;
	if (!strcmp(op, "Where")) return a ? b : c;
	return 0;
}

int op_elementwise(struct imp *m, const struct ewop *e)
{
	struct val *in[3] = { NULL, NULL, NULL };
	int r;

	static const char *const none[] = { NULL };
	if ((r = attrs_allowed(m, none)) < 0 || (r = outputs_max(m, 1)) < 0)
		return r;
	if (n_in(m) != e->arity)
		return refuse(m, "%zu inputs, expected %zu", n_in(m), e->arity);
	for (size_t i = 0; i < e->arity; i++)
		if ((r = input(m, i, &in[i])) < 0)
			return r;
	/* Operand types: all equal (Where: the condition is bool, Pow: the exponent is cast). */
	struct val *ref = e->kind == EW_SECOND ? in[1] : in[0];
	bool is_float = dt_float(ref->dt);
	for (size_t i = 0; i < e->arity; i++) {
		if (e->kind == EW_SECOND && i == 0) {
			if (in[0]->dt != DT_BOOL)
				return refuse(m, "condition must be bool");
			continue;
		}
		if (in[i]->dt != ref->dt && strcmp(e->name, "Pow") != 0)
			return refuse(m, "inputs have different element types (%s, %s)", DT_MLIR[ref->dt],
				      DT_MLIR[in[i]->dt]);
	}
	if ((!strcmp(e->name, "Not") || !strcmp(e->name, "And") || !strcmp(e->name, "Or")) &&
	    ref->dt != DT_BOOL)
		return refuse(m, "input type %s, expected bool", DT_MLIR[ref->dt]);
	const char *tmpl = e->kind == EW_SECOND ? e->itmpl : is_float ? e->ftmpl : e->itmpl;
	if (!tmpl)
		return refuse(m, "element type %s is not supported", DT_MLIR[ref->dt]);
	enum dt out_dt = e->kind == EW_BOOL ? DT_BOOL : ref->dt;
	size_t rank;
	int64_t dims[ONNX_RANK_MAX];
	if ((r = broadcast(m, in, e->arity, &rank, dims)) < 0)
		return r;

	if (all_const(in, e->arity) && fold_fits(rank, dims)) {
		struct val *o = val_const(out_dt, rank, dims);
		if (!o)
			return oom(m);
		for (int64_t i = 0, n = numel(o); i < n; i++) {
			int64_t a = bcast_off(in[0], rank, dims, i);
			int64_t b = e->arity > 1 ? bcast_off(in[1], rank, dims, i) : 0;
			int64_t c = e->arity > 2 ? bcast_off(in[2], rank, dims, i) : 0;
			if (e->kind == EW_SECOND) {
				if (dt_float(out_dt))
					set_d(o, i, get_i(in[0], a) ? get_d(in[1], b) : get_d(in[2], c));
				else
					set_i(o, i, get_i(in[0], a) ? get_i(in[1], b) : get_i(in[2], c));
			} else if (is_float) {
				set_d(o, i, fold_d(e->name, get_d(in[0], a), e->arity > 1 ? get_d(in[1], b) : 0));
			} else {
				set_i(o, i, fold_i(e->name, get_i(in[0], a), e->arity > 1 ? get_i(in[1], b) : 0, 0));
			}
		}
		return output(m, 0, o);
	}
	struct val *ops[3] = { in[0], in[1], in[2] };
	struct val *tmp = NULL;
	if (!strcmp(e->name, "Pow") && in[1]->dt != in[0]->dt) {
		/* The exponent in the base's type. */
		struct gop g, o;
		gop_set(&g, ssa_of(m, in[1]), in[1]->dt, in[1]->rank, in[1]->dims);
		gop_identity(&g, in[1]->rank);
		gop_set(&o, emit_empty(m, in[0]->dt, in[1]->rank, in[1]->dims), in[0]->dt, in[1]->rank,
			in[1]->dims);
		gop_identity(&o, in[1]->rank);
		const char *cv = dt_float(in[1]->dt) ? float_conv(in[1]->dt, in[0]->dt)
						 : "#0 = arith.sitofp $0 : $T to $U\n#0";
		long id = generic(m, in[1]->rank, NULL, &g, 1, &o, cv);
		if (!(tmp = val_ssa(in[0]->dt, in[1]->rank, in[1]->dims, id)))
			return oom(m);
		ops[1] = tmp;
	}
	struct val *o = NULL;
	r = emit_ew(m, ops, e->arity, out_dt, tmpl, &o);
	val_free(tmp);
	if (r < 0)
		return r;
	return output(m, 0, o);
}

/* Clip: min(max(x, lo), hi), either bound optional (inputs from opset 11, attributes before);
 * a bound known at import is a literal of the payload, else an operand. */
int op_clip(struct imp *m)
{
	static const char *const allowed[] = { "min", "max", NULL };
	struct val *x, *b[2] = { NULL, NULL };
	double ab[2];
	bool has[2] = { false, false };
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0)
		return r;
	if (x->dt == DT_BOOL)
		return refuse(m, "input \"%s\" has element type %s, float types, int64 and int32 are supported",
			      x->name, DT_MLIR[x->dt]);
	bool fl = dt_float(x->dt);
	for (size_t i = 0; i < 2; i++) {
		const char *what = i ? "max" : "min";
		if (m->opset < 11) {
			has[i] = attr(m->node, what) != NULL;
			if ((r = attr_float(m, what, 0, &ab[i])) < 0)
				return r;
			continue;
		}
		if ((r = input_opt(m, i + 1, &b[i])) < 0)
			return r;
		if (!b[i])
			continue;
		if (b[i]->dt != x->dt || numel(b[i]) != 1 || b[i]->rank > 1)
			return refuse(m, "input %zu (%s) must be a scalar of the input's element type %s", i + 1, what,
				      DT_MLIR[x->dt]);
		has[i] = true;
		if (b[i]->data) {
			ab[i] = get_d(b[i], 0);
			b[i] = NULL;  /* a literal */
		}
	}
	if (x->data && !b[0] && !b[1] && fold_fits(x->rank, x->dims)) {
		struct val *o = val_const(x->dt, x->rank, x->dims);
		if (!o)
			return oom(m);
		for (int64_t i = 0, n = numel(x); i < n; i++) {
			double v = get_d(x, i);
			int64_t vi = get_i(x, i);
			if (has[0] && (fl ? v < ab[0] : vi < (int64_t)ab[0]))
				v = ab[0], vi = (int64_t)ab[0];
			if (has[1] && (fl ? v > ab[1] : vi > (int64_t)ab[1]))
				v = ab[1], vi = (int64_t)ab[1];
			if (fl)
				set_d(o, i, v);
			else
				set_i(o, i, vi);
		}
		return output(m, 0, o);
	}
	/* $0 the input, $1.. the bounds given at run time; #0.. the payload's values. */
	struct val *ins[3] = { x, NULL, NULL };
	size_t nins = 1, t = 0;
	char tmpl[400] = "", cur[8] = "$0";
	for (size_t i = 0; i < 2; i++) {
		char ref[8], lit[64];
		if (!has[i])
			continue;
		if (b[i]) {
			ins[nins] = b[i];
			snprintf(ref, sizeof ref, "$%zu", nins++);
		} else {
			if (fl)
				fmt_float(lit, sizeof lit, ab[i], x->dt);
			else
				snprintf(lit, sizeof lit, "%" PRId64, (int64_t)ab[i]);
			snprintf(tmpl + strlen(tmpl), sizeof tmpl - strlen(tmpl), "#%zu = arith.constant %s : $T\n", t, lit);
			snprintf(ref, sizeof ref, "#%zu", t++);
		}
		snprintf(tmpl + strlen(tmpl), sizeof tmpl - strlen(tmpl), "#%zu = arith.%s %s, %s : $T\n", t,
			 fl ? (i ? "minimumf" : "maximumf") : (i ? "minsi" : "maxsi"), cur, ref);
		snprintf(cur, sizeof cur, "#%zu", t++);
	}
	snprintf(tmpl + strlen(tmpl), sizeof tmpl - strlen(tmpl), "%s\n", cur);
	struct val *o = NULL;
	if ((r = emit_ew(m, ins, nins, x->dt, tmpl, &o)) < 0)
		return r;
	return output(m, 0, o);
}

/* CumSum along a constant axis (exclusive, reverse).  linalg has no scan: the nest sums, for
 * each output element, the input elements at or before it along the axis (a reduction loop
 * over the axis, masked with linalg.index), i.e. n^2/2 additions along an axis of n. */
int op_cumsum(struct imp *m)
{
	static const char *const allowed[] = { "exclusive", "reverse", NULL };
	struct val *x, *ax, *o;
	int64_t excl, rev;
	size_t a;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = input_const(m, 1, "axis", &ax)) < 0 || (r = attr_int(m, "exclusive", 0, &excl)) < 0 ||
	    (r = attr_int(m, "reverse", 0, &rev)) < 0)
		return r;
	if (x->dt == DT_BOOL)
		return refuse(m, "input \"%s\" has element type %s, float types, int64 and int32 are supported",
			      x->name, DT_MLIR[x->dt]);
	if (numel(ax) != 1 || ax->rank > 1 || dt_float(ax->dt))
		return refuse(m, "input 1 (axis) must be an integer scalar");
	if (!x->rank)
		return refuse(m, "scalar input");
	if ((r = norm_axis(m, get_i(ax, 0), x->rank, &a)) < 0)
		return r;
	bool fl = dt_float(x->dt);
	if (x->data && fold_fits(x->rank, x->dims)) {
		int64_t idx[ONNX_RANK_MAX], n = x->dims[a];
		if (!(o = val_const(x->dt, x->rank, x->dims)))
			return oom(m);
		for (int64_t f = 0, ne = numel(x); f < ne; f++) {
			unflatten(f, x->rank, x->dims, idx);
			if (idx[a] != (rev ? n - 1 : 0))
				continue;  /* one scan per line along the axis, from its first element */
			double s = 0;
			int64_t si = 0;
			for (int64_t k = 0; k < n; k++) {
				idx[a] = rev ? n - 1 - k : k;
				int64_t at = flatten_idx(x->rank, x->dims, idx);
				double v = get_d(x, at);
				int64_t vi = get_i(x, at);
				if (!excl)
					s += v, si = (int64_t)((uint64_t)si + (uint64_t)vi);
				if (fl)
					set_d(o, at, s);
				else
					set_i(o, at, si);
				if (excl)
					s += v, si = (int64_t)((uint64_t)si + (uint64_t)vi);
			}
		}
		return output(m, 0, o);
	}
	/* Loops: d0..d{r-1} the output, d{r} the input's position along the axis. */
	struct gop g, go;
	size_t rk = x->rank;
	gop_set(&g, ssa_of(m, x), x->dt, rk, x->dims);
	for (size_t d = 0; d < rk; d++)
		map_add(&g, "d%zu", d == a ? rk : d);
	gop_set(&go, emit_filled(m, x->dt, rk, x->dims, zero_lit(x->dt)), x->dt, rk, x->dims);
	gop_identity(&go, rk);
	bool red[ONNX_RANK_MAX + 1] = { 0 };
	red[rk] = true;
	/* The input position j counts toward output position i when j <= i (exclusive: j < i;
	 * reverse: j >= i, j > i). */
	static const char *const pred[2][2] = { { "ule", "ult" }, { "uge", "ugt" } };
	char tmpl[400];
	snprintf(tmpl, sizeof tmpl,
		 "#0 = linalg.index %zu : index\n#1 = linalg.index %zu : index\n#2 = arith.cmpi %s, #1, #0 : index\n"
		 "#3 = arith.%s $o, $0 : $T\n#4 = arith.select #2, #3, $o : $T\n#4\n",
		 a, rk, pred[rev != 0][excl != 0], fl ? "addf" : "addi");
	long id = generic(m, rk + 1, red, &g, 1, &go, tmpl);
	return (o = val_ssa(x->dt, rk, x->dims, id)) ? output(m, 0, o) : oom(m);
}

/* Max Min Sum Mean of 1 to EW_INPUTS_MAX broadcast inputs (Mean: float types only). */
int op_variadic(struct imp *m)
{
	static const char *const none[] = { NULL };
	const char *op = m->node->op_type;
	bool mean = !strcmp(op, "Mean"), sum = mean || !strcmp(op, "Sum"), mx = !strcmp(op, "Max");
	struct val *in[EW_INPUTS_MAX];
	size_t n = n_in(m), rank;
	int64_t dims[ONNX_RANK_MAX];
	int r;

	if ((r = attrs_allowed(m, none)) < 0 || (r = outputs_max(m, 1)) < 0)
		return r;
	if (n == 0 || n > EW_INPUTS_MAX)
		return refuse(m, "%zu inputs, 1 to %d supported", n, EW_INPUTS_MAX);
	for (size_t i = 0; i < n; i++) {
		if ((r = input(m, i, &in[i])) < 0)
			return r;
		if (in[i]->dt != in[0]->dt)
			return refuse(m, "inputs have different element types (%s, %s)", DT_MLIR[in[0]->dt],
				      DT_MLIR[in[i]->dt]);
	}
	enum dt t = in[0]->dt;
	bool fl = dt_float(t);
	if (t == DT_BOOL || (mean && !fl))
		return refuse(m, "element type %s is not supported (%s)", DT_MLIR[t],
			      mean ? "float types" : "float types, int64 and int32");
	if ((r = broadcast(m, in, n, &rank, dims)) < 0)
		return r;
	if (all_const(in, n) && fold_fits(rank, dims)) {
		struct val *o = val_const(t, rank, dims);
		if (!o)
			return oom(m);
		for (int64_t f = 0, ne = numel(o); f < ne; f++) {
			double a = get_d(in[0], bcast_off(in[0], rank, dims, f));
			int64_t ai = get_i(in[0], bcast_off(in[0], rank, dims, f));
			for (size_t i = 1; i < n; i++) {
				int64_t k = bcast_off(in[i], rank, dims, f);
				double v = get_d(in[i], k);
				int64_t vi = get_i(in[i], k);
				a = sum ? a + v : isnan(v) || (mx ? v > a : v < a) ? v : a;
				ai = sum ? (int64_t)((uint64_t)ai + (uint64_t)vi) : mx ? (vi > ai ? vi : ai) : (vi < ai ? vi : ai);
			}
			if (fl)
				set_d(o, f, mean ? a / (double)n : a);
			else
				set_i(o, f, ai);
		}
		return output(m, 0, o);
	}
	const char *bin = sum ? (fl ? "addf" : "addi") : mx ? (fl ? "maximumf" : "maxsi") : (fl ? "minimumf" : "minsi");
	char tmpl[600] = "", cur[8] = "$0", lit[64];
	size_t k = 0;
	for (size_t i = 1; i < n; i++) {
		snprintf(tmpl + strlen(tmpl), sizeof tmpl - strlen(tmpl), "#%zu = arith.%s %s, $%zu : $T\n", k, bin,
			 cur, i);
		snprintf(cur, sizeof cur, "#%zu", k++);
	}
	if (mean && n > 1) {
		fmt_float(lit, sizeof lit, (double)n, t);
		snprintf(tmpl + strlen(tmpl), sizeof tmpl - strlen(tmpl),
			 "#%zu = arith.constant %s : $T\n#%zu = arith.divf %s, #%zu : $T\n", k, lit, k + 1, cur, k);
		snprintf(cur, sizeof cur, "#%zu", k + 1);
	}
	snprintf(tmpl + strlen(tmpl), sizeof tmpl - strlen(tmpl), "%s\n", cur);
	struct val *o = NULL;
	if ((r = emit_ew(m, in, n, t, tmpl, &o)) < 0)
		return r;
	return output(m, 0, o);
}
