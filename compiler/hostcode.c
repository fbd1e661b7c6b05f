/* SPDX-License-Identifier: MIT */
#include "hostcode.h"

#include <mlir-c/AffineExpr.h>
#include <mlir-c/AffineMap.h>
#include <mlir-c/BuiltinAttributes.h>
#include <mlir-c/BuiltinTypes.h>

#include <string.h>

/* ---------------------------------------------------------------- walking */

/* ---------------------------------------------------------------- loop order */

static uint64_t shaped_bytes(MlirType t)
{
	uint64_t n = 1;

	if (!mlirTypeIsAShaped(t) || !mlirShapedTypeHasStaticShape(t))
		return 0;
	for (intptr_t d = 0; d < mlirShapedTypeGetRank(t); d++)
		n *= (uint64_t)mlirShapedTypeGetDimSize(t, d);
	return n * ((mlirx_elem_bits(mlirShapedTypeGetElementType(t)) + 7) / 8);
}

/*
 * The dimension to run innermost, or -1 to keep the order: the loop dimension that the most
 * operand bytes have as their last index (a plain dimension of extent > 1: walked with unit
 * stride when it runs innermost), when that is more than the innermost one has already.  A
 * GEMV with its weight [in, out] runs over the weight's rows and the output; a GEMM whose right
 * operand is stored [k, n] runs its n loop innermost (the ikj order), over that operand and the
 * output; ties keep the order.
 */
static intptr_t innermost_wanted(MlirOperation g, MlirAttribute maps, intptr_t n)
{
	intptr_t nm = mlirArrayAttrGetNumElements(maps), want = n - 1;
	uint64_t score[EXTRACT_DIMS_MAX] = { 0 };

	for (intptr_t i = 0; i < nm && i < mlirOperationGetNumOperands(g); i++) {
		MlirType t = mlirValueGetType(mlirOperationGetOperand(g, i));
		uint64_t b = shaped_bytes(t);
		if (!b || mlirShapedTypeGetRank(t) == 0)
			continue;
		MlirAffineMap am = mlirAffineMapAttrGetValue(mlirArrayAttrGetElement(maps, i));
		intptr_t nr = mlirAffineMapGetNumResults(am);
		if (nr != mlirShapedTypeGetRank(t) || nr == 0)
			continue;
		MlirAffineExpr last = mlirAffineMapGetResult(am, nr - 1);
		if (!mlirAffineExprIsADim(last) || mlirShapedTypeGetDimSize(t, nr - 1) <= 1)
			continue;
		intptr_t d = mlirAffineDimExprGetPosition(last);
		if (d >= 0 && d < n)
			score[d] += b;
	}
	for (intptr_t d = 0; d < n; d++)
		if (score[d] > score[want])
			want = d;
	return want == n - 1 ? -1 : want;
}

/* Moves loop dimension j of generic g to the innermost place. */
static int move_innermost(MlirContext ctx, MlirOperation g, MlirAttribute maps, MlirAttribute it,
			  intptr_t n, intptr_t j)
{
	intptr_t pos[EXTRACT_DIMS_MAX], order[EXTRACT_DIMS_MAX], k = 0;
	MlirAffineExpr sub[EXTRACT_DIMS_MAX];

	for (intptr_t d = 0; d < n; d++)
		if (d != j)
			order[k++] = d;
	order[k] = j;
	for (intptr_t p = 0; p < n; p++)
		pos[order[p]] = p;
	for (intptr_t d = 0; d < n; d++)
		sub[d] = mlirAffineDimExprGet(ctx, pos[d]);
	MlirAffineMap rename = mlirAffineMapGet(ctx, n, 0, n, sub);

	intptr_t nm = mlirArrayAttrGetNumElements(maps);
	MlirAttribute *nmaps = calloc((size_t)nm, sizeof *nmaps);
	MlirAffineExpr *res = NULL;
	if (!nmaps)
		return -ENOMEM;
	for (intptr_t i = 0; i < nm; i++) {
		MlirAffineMap am = mlirAffineMapAttrGetValue(mlirArrayAttrGetElement(maps, i));
		intptr_t nr = mlirAffineMapGetNumResults(am);
		MlirAffineExpr *r2 = realloc(res, (size_t)(nr ? nr : 1) * sizeof *r2);
		if (!r2) {
			free(res);
			free(nmaps);
			return -ENOMEM;
		}
		res = r2;
		for (intptr_t r = 0; r < nr; r++)
			res[r] = mlirAffineExprCompose(mlirAffineMapGetResult(am, r), rename);
		nmaps[i] = mlirAffineMapAttrGet(mlirAffineMapGet(ctx, n, mlirAffineMapGetNumSymbols(am), nr, res));
	}
	free(res);
	MlirAttribute nit[EXTRACT_DIMS_MAX];
	for (intptr_t p = 0; p < n; p++)
		nit[p] = mlirArrayAttrGetElement(it, order[p]);
	mlirOperationSetAttributeByName(g, mlirx_s("indexing_maps"), mlirArrayAttrGet(ctx, nm, nmaps));
	mlirOperationSetAttributeByName(g, mlirx_s("iterator_types"), mlirArrayAttrGet(ctx, n, nit));
	free(nmaps);

	/* linalg.index D in the payload names a loop dimension too. */
	struct mlirx_ops idx = { 0 };
	int r = mlirx_ops_collect(g, "linalg.index", &idx);
	for (size_t i = 0; r == 0 && i < idx.n; i++) {
		MlirAttribute a = mlirOperationGetAttributeByName(idx.ops[i], mlirx_s("dim"));
		int64_t d = mlirAttributeIsNull(a) ? -1 : mlirIntegerAttrGetValueInt(a);
		if (d < 0 || d >= n)
			r = -EINVAL;
		else
			mlirOperationSetAttributeByName(idx.ops[i], mlirx_s("dim"),
							mlirIntegerAttrGet(mlirAttributeGetType(a), pos[d]));
	}
	free(idx.ops);
	return r;
}

int hostcode_order_loops(struct extract *x, struct pim_error *err)
{
	MlirOperation entry = extract_entry_op(x);
	struct mlirx_ops l = { 0 };
	int r;

	if (mlirOperationIsNull(entry))
		return err_set(err, -EINVAL, "internal error: @%s disappeared", x->entry);
	if ((r = mlirx_ops_collect(entry, "linalg.generic", &l)) < 0) {
		free(l.ops);
		return err_set(err, r, "out of memory");
	}
	for (size_t i = 0; i < l.n && r == 0; i++) {
		MlirOperation g = l.ops[i];
		MlirAttribute it = mlirOperationGetAttributeByName(g, mlirx_s("iterator_types"));
		MlirAttribute maps = mlirOperationGetAttributeByName(g, mlirx_s("indexing_maps"));
		if (mlirAttributeIsNull(it) || mlirAttributeIsNull(maps) || !mlirAttributeIsAArray(it) ||
		    !mlirAttributeIsAArray(maps))
			continue;
		intptr_t n = mlirArrayAttrGetNumElements(it);
		if (n < 2 || n > EXTRACT_DIMS_MAX)
			continue;
		intptr_t j = innermost_wanted(g, maps, n);
		if (j >= 0 && (r = move_innermost(x->mx.ctx, g, maps, it, n, j)) < 0) {
			char where[MANIFEST_TEXT_MAX + 1];
			mlirx_op_loc(&x->mx, g, where, sizeof where);
			r = err_set(err, r, "%s: reordering the loops of a linalg.generic: %s", where,
				    r == -ENOMEM ? "out of memory" : "linalg.index names no loop dimension");
		}
	}
	free(l.ops);
	return r;
}

/* ---------------------------------------------------------------- fusion */

static const char PIPE_FUSE[] = "func.func(linalg-fuse-elementwise-ops)";
#define KEEP_PREFIX "pim_fuse_keep_"

static bool has_one_use(MlirValue v)
{
	MlirOpOperand u = mlirValueGetFirstUse(v);
	return !mlirOpOperandIsNull(u) && mlirOpOperandIsNull(mlirOpOperandGetNextUse(u));
}

static bool all_parallel(MlirOperation g)
{
	MlirAttribute it = mlirOperationGetAttributeByName(g, mlirx_s("iterator_types"));
	struct strbuf b = { 0 };
	bool all = true;

	if (mlirAttributeIsNull(it) || !mlirAttributeIsAArray(it))
		return false;
	for (intptr_t d = 0; all && d < mlirArrayAttrGetNumElements(it); d++) {
		b.len = 0;
		mlirAttributePrint(mlirArrayAttrGetElement(it, d), mlirx_buf_cb, &b);
		all = b.p && strstr(b.p, "parallel");
	}
	strbuf_free(&b);
	return all;
}

/* A payload that only yields one of its inputs: a transpose, broadcast or slice copy, which
 * costs nothing to repeat once fused (its consumer reads the source through a new map). */
static bool is_copy(MlirOperation g)
{
	MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(g, 0));
	MlirOperation y = mlirBlockIsNull(b) ? (MlirOperation){ NULL } : mlirBlockGetFirstOperation(b);

	if (mlirOperationIsNull(y) || !mlirx_op_is(y, "linalg.yield") || mlirOperationGetNumOperands(y) != 1)
		return false;
	MlirValue v = mlirOperationGetOperand(y, 0);
	return mlirValueIsABlockArgument(v) && mlirBlockEqual(mlirBlockArgumentGetOwner(v), b);
}

/*
 * How many times consumer g would compute each element of its input i if the producer were
 * fused into it: the product of the extents of g's loops that input i's indexing map does not
 * use (a broadcast across them).
 */
static uint64_t recompute_factor(MlirOperation g, intptr_t i)
{
	MlirAttribute maps = mlirOperationGetAttributeByName(g, mlirx_s("indexing_maps"));
	uint64_t ext[EXTRACT_DIMS_MAX] = { 0 }, f = 1;
	bool used[EXTRACT_DIMS_MAX] = { false };

	if (mlirAttributeIsNull(maps) || !mlirAttributeIsAArray(maps))
		return 1;
	intptr_t nm = mlirArrayAttrGetNumElements(maps), n = 0;
	for (intptr_t j = 0; j < nm && j < mlirOperationGetNumOperands(g); j++) {
		MlirType t = mlirValueGetType(mlirOperationGetOperand(g, j));
		MlirAffineMap am = mlirAffineMapAttrGetValue(mlirArrayAttrGetElement(maps, j));
		n = mlirAffineMapGetNumDims(am);
		if (!mlirTypeIsAShaped(t) || n > EXTRACT_DIMS_MAX)
			continue;
		for (intptr_t r = 0; r < mlirAffineMapGetNumResults(am) && r < mlirShapedTypeGetRank(t); r++) {
			MlirAffineExpr e = mlirAffineMapGetResult(am, r);
			if (mlirAffineExprIsADim(e))
				ext[mlirAffineDimExprGetPosition(e)] = (uint64_t)mlirShapedTypeGetDimSize(t, r);
			if (j == i)
				for (intptr_t d = 0; d < n; d++)
					used[d] |= mlirAffineExprIsFunctionOfDim(e, d);
		}
	}
	for (intptr_t d = 0; d < n && d < EXTRACT_DIMS_MAX; d++)
		if (!used[d] && ext[d] > 1)
			f *= ext[d];
	return f;
}

/* A call of a body-less function @KEEP_PREFIX<k> taking v, after op: a second use of v. */
static int add_keep_use(struct extract *x, MlirOperation op, MlirValue v, unsigned k)
{
	char name[64], type[512], text[700];
	MlirContext ctx = x->mx.ctx;

	snprintf(name, sizeof name, KEEP_PREFIX "%u", k);
	mlirx_type_str(mlirValueGetType(v), type, sizeof type);
	snprintf(text, sizeof text, "func.func private @%s(%s)", name, type);
	MlirOperation decl = mlirOperationCreateParse(ctx, mlirx_s(text), mlirx_s("pim-extract"));
	if (mlirOperationIsNull(decl))
		return -EINVAL;
	mlirBlockAppendOwnedOperation(mlirModuleGetBody(x->module), decl);
	MlirOperationState st = mlirOperationStateGet(mlirx_s("func.call"), mlirOperationGetLocation(op));
	MlirNamedAttribute a = mlirNamedAttributeGet(mlirIdentifierGet(ctx, mlirx_s("callee")),
						     mlirFlatSymbolRefAttrGet(ctx, mlirx_s(name)));
	mlirOperationStateAddOperands(&st, 1, &v);
	mlirOperationStateAddAttributes(&st, 1, &a);
	MlirOperation call = mlirOperationCreate(&st);
	if (mlirOperationIsNull(call))
		return -EINVAL;
	mlirBlockInsertOwnedOperationAfter(mlirOperationGetBlock(op), op, call);
	return 0;
}

/* The calls and declarations add_keep_use made. */
static void remove_keep_uses(struct extract *x)
{
	struct mlirx_ops l = { 0 };
	char name[128];

	if (mlirx_ops_collect(mlirModuleGetOperation(x->module), NULL, &l) < 0) {
		free(l.ops);
		return;
	}
	for (size_t i = l.n; i-- > 0;) {
		MlirOperation op = l.ops[i];
		MlirAttribute a = mlirx_op_is(op, "func.call") ?
					  mlirOperationGetAttributeByName(op, mlirx_s("callee")) :
				  mlirx_op_is(op, "func.func") ?
					  mlirOperationGetAttributeByName(op, mlirx_s("sym_name")) :
					  (MlirAttribute){ NULL };
		if (!mlirAttributeIsNull(a) && mlirx_attr_str(a, name, sizeof name) &&
		    strstr(name, KEEP_PREFIX))
			mlirOperationDestroy(op);
	}
	free(l.ops);
}

/* Ops in the payload of g but its terminator, or SIZE_MAX when one of them is not cheap
 * arithmetic (math functions, calls, loads). */
static size_t cheap_payload_ops(MlirOperation g)
{
	MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(g, 0));
	size_t n = 0;

	for (MlirOperation op = mlirBlockGetFirstOperation(b); !mlirOperationIsNull(op);
	     op = mlirOperationGetNextInBlock(op)) {
		if (mlirx_op_is(op, "linalg.yield"))
			continue;
		if (!mlirx_op_in_dialect(op, "arith") || mlirx_op_is(op, "arith.divf") ||
		    mlirx_op_is(op, "arith.remf"))
			return SIZE_MAX;
		n++;
	}
	return n;
}

/* True when generic g reads operand k as an input the fusion pass will fuse producer p into:
 * in p's block, and every element once (no broadcast across a loop of g, see below). */
static bool reads_fusably(MlirOperation g, intptr_t k, MlirOperation p)
{
	if (!mlirx_op_is(g, "linalg.generic") ||
	    !mlirBlockEqual(mlirOperationGetBlock(g), mlirOperationGetBlock(p)))
		return false;
	MlirAttribute seg = mlirOperationGetAttributeByName(g, mlirx_s("operandSegmentSizes"));
	if (mlirAttributeIsNull(seg) || !mlirAttributeIsADenseI32Array(seg) ||
	    mlirDenseArrayGetNumElements(seg) != 2 || k >= mlirDenseI32ArrayGetElement(seg, 0))
		return false;
	return recompute_factor(g, k) == 1;
}

/*
 * An elementwise producer of a few cheap operations (x - mean in a norm) whose result several
 * generics read is cloned for each of them, so that each clone is fused into its reader: the
 * readers compute it again instead of the host writing it to memory and reading it back.
 */
static int clone_cheap_producers(struct mlirx_ops *l)
{
	/* Last first: a reader that is itself cloned has its clones in place before its producer
	 * counts its readers. */
	for (size_t i = l->n; i-- > 0;) {
		MlirOperation p = l->ops[i];
		if (mlirOperationGetNumResults(p) != 1 || !all_parallel(p) || cheap_payload_ops(p) > 2)
			continue;
		MlirValue v = mlirOperationGetResult(p, 0);
		MlirOpOperand u = mlirValueGetFirstUse(v);
		if (mlirOpOperandIsNull(u) || mlirOpOperandIsNull(mlirOpOperandGetNextUse(u)))
			continue;
		bool fusable = true;
		for (MlirOpOperand w = u; fusable && !mlirOpOperandIsNull(w); w = mlirOpOperandGetNextUse(w))
			fusable = reads_fusably(mlirOpOperandGetOwner(w), mlirOpOperandGetOperandNumber(w), p);
		if (!fusable)
			continue;
		/* Every use but the first gets a clone of its own, right before its reader. */
		for (u = mlirOpOperandGetNextUse(mlirValueGetFirstUse(v)); !mlirOpOperandIsNull(u);
		     u = mlirOpOperandGetNextUse(mlirValueGetFirstUse(v))) {
			MlirOperation reader = mlirOpOperandGetOwner(u);
			MlirOperation c = mlirOperationClone(p);
			if (mlirOperationIsNull(c))
				return -ENOMEM;
			mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(reader), reader, c);
			mlirOperationSetOperand(reader, mlirOpOperandGetOperandNumber(u), mlirOperationGetResult(c, 0));
		}
	}
	return 0;
}

/* ---------------------------------------------------------------- bias into the accumulator */

/* True when v is an arith.constant float zero (either sign). */
static bool is_float_zero(MlirValue v)
{
	if (!mlirValueIsAOpResult(v))
		return false;
	MlirOperation c = mlirOpResultGetOwner(v);
	if (!mlirx_op_is(c, "arith.constant"))
		return false;
	MlirAttribute a = mlirOperationGetAttributeByName(c, mlirx_s("value"));
	return !mlirAttributeIsNull(a) && mlirAttributeIsAFloat(a) && mlirFloatAttrGetValueDouble(a) == 0.0;
}

/* True when v is available before op: an argument of op's block or the result of an op that
 * precedes op in it. */
static bool defined_before(MlirValue v, MlirOperation op)
{
	MlirBlock b = mlirOperationGetBlock(op);

	if (mlirValueIsABlockArgument(v))
		return mlirBlockEqual(mlirBlockArgumentGetOwner(v), b);
	MlirOperation d = mlirOpResultGetOwner(v);
	if (!mlirBlockEqual(mlirOperationGetBlock(d), b))
		return false;
	for (MlirOperation p = d; !mlirOperationIsNull(p); p = mlirOperationGetNextInBlock(p))
		if (mlirOperationEqual(p, op))
			return true;
	return false;
}

/* Makes v available before op: true when it is, or when its definition is a constant or a
 * view of a global (what the weights are) whose own operands can be made available, which is
 * then moved before op. */
static bool hoist_before(MlirValue v, MlirOperation op, int depth)
{
	static const char *const movable[] = { "arith.constant", "memref.get_global",
					       "bufferization.to_tensor", "tensor.empty" };

	if (defined_before(v, op))
		return true;
	if (depth > 3 || !mlirValueIsAOpResult(v))
		return false;
	MlirOperation d = mlirOpResultGetOwner(v);
	size_t i = 0;
	while (i < ELEMENTSOF(movable) && !mlirx_op_is(d, movable[i]))
		i++;
	if (i == ELEMENTSOF(movable) || !mlirBlockEqual(mlirOperationGetBlock(d), mlirOperationGetBlock(op)) ||
	    mlirOperationGetNumRegions(d) != 0)
		return false;
	for (intptr_t k = 0; k < mlirOperationGetNumOperands(d); k++)
		if (!hoist_before(mlirOperationGetOperand(d, k), op, depth + 1))
			return false;
	mlirOperationMoveBefore(d, op);
	return true;
}

static bool map_is_identity(MlirAttribute maps, intptr_t i)
{
	return mlirAffineMapIsIdentity(mlirAffineMapAttrGetValue(mlirArrayAttrGetElement(maps, i)));
}

/*
 * The input (0 or 1) that e adds to its input k, when e is an all-parallel generic of two
 * inputs and one output whose payload is only that addition (a bias add), reading input k and
 * writing its output through identity maps; -1 otherwise.
 */
static intptr_t bias_add_other(MlirOperation e, intptr_t k)
{
	MlirAttribute seg = mlirOperationGetAttributeByName(e, mlirx_s("operandSegmentSizes"));
	MlirAttribute maps = mlirOperationGetAttributeByName(e, mlirx_s("indexing_maps"));

	if (!mlirx_op_is(e, "linalg.generic") || mlirOperationGetNumResults(e) != 1 || !all_parallel(e) ||
	    mlirAttributeIsNull(seg) || !mlirAttributeIsADenseI32Array(seg) ||
	    mlirDenseArrayGetNumElements(seg) != 2 || mlirDenseI32ArrayGetElement(seg, 0) != 2 ||
	    mlirDenseI32ArrayGetElement(seg, 1) != 1 || mlirAttributeIsNull(maps) ||
	    mlirArrayAttrGetNumElements(maps) != 3 || k > 1 || !map_is_identity(maps, k) ||
	    !map_is_identity(maps, 2))
		return -1;
	MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(e, 0));
	MlirOperation add = mlirBlockIsNull(b) ? (MlirOperation){ NULL } : mlirBlockGetFirstOperation(b);
	if (mlirOperationIsNull(add) || !mlirx_op_is(add, "arith.addf") || mlirBlockGetNumArguments(b) != 3)
		return -1;
	MlirOperation y = mlirOperationGetNextInBlock(add);
	if (mlirOperationIsNull(y) || !mlirx_op_is(y, "linalg.yield") || mlirOperationGetNumOperands(y) != 1 ||
	    !mlirValueEqual(mlirOperationGetOperand(y, 0), mlirOperationGetResult(add, 0)))
		return -1;
	MlirValue a0 = mlirOperationGetOperand(add, 0), a1 = mlirOperationGetOperand(add, 1);
	MlirValue bk = mlirBlockGetArgument(b, k), bj = mlirBlockGetArgument(b, 1 - k);
	if (!(mlirValueEqual(a0, bk) && mlirValueEqual(a1, bj)) && !(mlirValueEqual(a0, bj) && mlirValueEqual(a1, bk)))
		return -1;
	/* A bias is broadcast (indexed by fewer dimensions than the sum): a residual, of the
	 * sum's shape and often of its size, is added after the products as the source does, or
	 * the products would be rounded at the residual's magnitude. */
	MlirAffineMap bm = mlirAffineMapAttrGetValue(mlirArrayAttrGetElement(maps, 1 - k));
	return mlirAffineMapGetNumResults(bm) < mlirAffineMapGetNumDims(bm) ? 1 - k : -1;
}

/*
 * A contraction whose accumulator is zero-filled and whose only reader adds a bias to it
 * (nn.Linear's MatMul and Add, Gemm's C) starts from the bias instead: the add becomes the
 * broadcast copy that initialises the accumulator, the way BLAS's beta = 1 and PyTorch's addmm
 * do, so the host does not write the product to memory and read it back for one addition.
 * Reassociates the sum (hostcode_prepare's fastmath<reassoc> allows as much).
 */
static int fold_bias(MlirOperation c)
{
	intptr_t n = mlirOperationGetNumOperands(c);

	if (all_parallel(c) || mlirOperationGetNumResults(c) != 1 || n < 1)
		return 0;
	MlirValue init = mlirOperationGetOperand(c, n - 1), res = mlirOperationGetResult(c, 0);
	if (!mlirValueIsAOpResult(init) || !has_one_use(init) || !has_one_use(res))
		return 0;
	MlirOperation f = mlirOpResultGetOwner(init);
	if (!mlirx_op_is(f, "linalg.fill") || mlirOperationGetNumOperands(f) != 2 ||
	    !is_float_zero(mlirOperationGetOperand(f, 0)))
		return 0;
	MlirOpOperand u = mlirValueGetFirstUse(res);
	MlirOperation e = mlirOpOperandGetOwner(u);
	intptr_t k = (intptr_t)mlirOpOperandGetOperandNumber(u), j = bias_add_other(e, k);
	if (j < 0 || !mlirBlockEqual(mlirOperationGetBlock(e), mlirOperationGetBlock(c)) ||
	    !mlirTypeEqual(mlirValueGetType(mlirOperationGetResult(e, 0)), mlirValueGetType(res)))
		return 0;
	MlirValue bias = mlirOperationGetOperand(e, j), empty = mlirOperationGetOperand(f, 1);
	if (!defined_before(empty, c) || !hoist_before(bias, c, 0))
		return 0;

	/* e: ins(bias) outs(the accumulator's empty tensor), yielding the bias, before c. */
	MlirContext ctx = mlirOperationGetContext(e);
	MlirAttribute maps = mlirOperationGetAttributeByName(e, mlirx_s("indexing_maps"));
	MlirAttribute nmaps[2] = { mlirArrayAttrGetElement(maps, j), mlirArrayAttrGetElement(maps, 2) };
	MlirValue ops[2] = { bias, empty };
	MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(e, 0));
	MlirOperation add = mlirBlockGetFirstOperation(b), y = mlirOperationGetNextInBlock(add);
	MlirOperation old_out = mlirValueIsAOpResult(mlirOperationGetOperand(e, 2)) ?
					mlirOpResultGetOwner(mlirOperationGetOperand(e, 2)) :
					(MlirOperation){ NULL };
	int32_t seg[2] = { 1, 1 };

	mlirOperationSetOperand(y, 0, mlirBlockGetArgument(b, j));
	mlirOperationDestroy(add);
	mlirBlockEraseArgument(b, (unsigned)k);
	mlirOperationSetOperands(e, 2, ops);
	mlirOperationSetAttributeByName(e, mlirx_s("operandSegmentSizes"), mlirDenseI32ArrayGet(ctx, 2, seg));
	mlirOperationSetAttributeByName(e, mlirx_s("indexing_maps"), mlirArrayAttrGet(ctx, 2, nmaps));
	mlirOperationMoveBefore(e, c);
	/* Readers of the sum read the contraction, which now accumulates into the bias. */
	MlirValue sum = mlirOperationGetResult(e, 0);
	mlirValueReplaceAllUsesOfWith(sum, res);
	mlirOperationSetOperand(c, n - 1, sum);
	mlirOperationDestroy(f);
	if (!mlirOperationIsNull(old_out) && mlirx_op_is(old_out, "tensor.empty") &&
	    mlirOpOperandIsNull(mlirValueGetFirstUse(mlirOperationGetResult(old_out, 0))))
		mlirOperationDestroy(old_out);
	return 1;
}

/* pim.name of the generics that have one, by location: a fused op is made afresh at its
 * consumer's location, without the consumer's attributes. */
struct named {
	char loc[MANIFEST_TEXT_MAX + 1];
	MlirAttribute name;
};

static int collect_names(struct extract *x, const struct mlirx_ops *l, struct named **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	for (size_t i = 0; i < l->n; i++) {
		MlirAttribute a = mlirOperationGetAttributeByName(l->ops[i], mlirx_s("pim.name"));
		if (mlirAttributeIsNull(a))
			continue;
		struct named *p = realloc(*out, (*n + 1) * sizeof *p);
		if (!p)
			return -ENOMEM;
		*out = p;
		mlirx_op_loc(&x->mx, l->ops[i], p[*n].loc, sizeof p[*n].loc);
		p[(*n)++].name = a;
	}
	return 0;
}

static int restore_names(struct extract *x, const struct named *nm, size_t n)
{
	struct mlirx_ops l = { 0 };
	char loc[MANIFEST_TEXT_MAX + 1];
	int r;

	if (!n)
		return 0;
	if ((r = mlirx_ops_collect(extract_entry_op(x), "linalg.generic", &l)) < 0) {
		free(l.ops);
		return r;
	}
	for (size_t i = 0; i < l.n; i++) {
		if (!mlirAttributeIsNull(mlirOperationGetAttributeByName(l.ops[i], mlirx_s("pim.name"))))
			continue;
		mlirx_op_loc(&x->mx, l.ops[i], loc, sizeof loc);
		for (size_t k = 0; k < n; k++)
			if (!strcmp(nm[k].loc, loc)) {
				mlirOperationSetAttributeByName(l.ops[i], mlirx_s("pim.name"), nm[k].name);
				break;
			}
	}
	free(l.ops);
	return 0;
}

static bool has_linalg(MlirOperation entry)
{
	struct mlirx_ops l = { 0 };
	bool any = !mlirOperationIsNull(entry) && mlirx_ops_collect(entry, NULL, &l) == 0 && l.n > 0;
	size_t k = 0;
	while (any && k < l.n && !mlirx_op_in_dialect(l.ops[k], "linalg"))
		k++;
	free(l.ops);
	return any && k < l.n;
}

int hostcode_fuse(struct extract *x, struct pim_error *err)
{
	struct named *names = NULL;
	size_t n_names = 0;
	MlirOperation entry;
	struct mlirx_ops l = { 0 };
	unsigned kept = 0;
	int r;

	entry = extract_entry_op(x);
	if (mlirOperationIsNull(entry))
		return err_set(err, -EINVAL, "internal error: @%s disappeared", x->entry);
	if ((r = mlirx_ops_collect(entry, "linalg.generic", &l)) < 0) {
		free(l.ops);
		return err_set(err, r, "out of memory");
	}
	for (size_t i = 0; i < l.n; i++)
		fold_bias(l.ops[i]);
	l.n = 0;
	if ((r = mlirx_ops_collect(entry, "linalg.generic", &l)) < 0 || (r = clone_cheap_producers(&l)) < 0) {
		free(l.ops);
		return err_set(err, r, "out of memory");
	}
	l.n = 0;
	if ((r = mlirx_ops_collect(entry, "linalg.generic", &l)) < 0) {
		free(l.ops);
		return err_set(err, r, "out of memory");
	}
	/* An elementwise producer is not fused into a reduction that would compute it again for
	 * every step of a loop it does not depend on (a normalised vector into the GEMV reading
	 * it: once per output column); a copy (transpose, broadcast) is, since it computes
	 * nothing.  A second use keeps the pass from fusing it. */
	for (size_t i = 0; i < l.n && r == 0; i++) {
		MlirOperation g = l.ops[i];
		if (all_parallel(g))
			continue;
		for (intptr_t j = 0; j < mlirOperationGetNumOperands(g) && r == 0; j++) {
			MlirValue v = mlirOperationGetOperand(g, j);
			if (!mlirValueIsAOpResult(v) || !has_one_use(v))
				continue;
			MlirOperation p = mlirOpResultGetOwner(v);
			if (mlirx_op_is(p, "linalg.generic") && all_parallel(p) && !is_copy(p) &&
			    recompute_factor(g, j) > 1)
				r = add_keep_use(x, g, v, kept++);
		}
	}
	if (r == 0)
		r = collect_names(x, &l, &names, &n_names);
	free(l.ops);
	if (r < 0) {
		remove_keep_uses(x);
		free(names);
		return err_set(err, r, "internal error: cannot keep a producer from fusing");
	}
	/* A model whose every nest is a copy fusion would erase keeps its source nests. */
	MlirOperation saved = mlirOperationClone(mlirModuleGetOperation(x->module));
	r = mlirx_run_passes(&x->mx, x->module, "fusing elementwise ops", PIPE_FUSE, err);
	if (r == 0 && !has_linalg(extract_entry_op(x))) {
		mlirModuleDestroy(x->module);
		x->module = mlirModuleFromOperation(saved);
		saved = (MlirOperation){ NULL };
	}
	if (!mlirOperationIsNull(saved))
		mlirOperationDestroy(saved);
	remove_keep_uses(x);
	if (r == 0 && (r = restore_names(x, names, n_names)) < 0)
		r = err_set(err, r, "out of memory");
	free(names);
	return r;
}

/* ---------------------------------------------------------------- fills */

bool hostcode_is_fill(MlirOperation g)
{
	intptr_t n = mlirOperationGetNumOperands(g);

	if (!mlirx_op_is(g, "linalg.generic") || n < 1 || n > 2 ||
	    !mlirTypeIsAShaped(mlirValueGetType(mlirOperationGetOperand(g, n - 1))) ||
	    (n == 2 && mlirTypeIsAShaped(mlirValueGetType(mlirOperationGetOperand(g, 0)))))
		return false;
	MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(g, 0));
	MlirOperation y = mlirBlockIsNull(b) ? (MlirOperation){ NULL } : mlirBlockGetFirstOperation(b);
	if (mlirOperationIsNull(y) || !mlirx_op_is(y, "linalg.yield") || mlirOperationGetNumOperands(y) != 1)
		return false;
	MlirValue v = mlirOperationGetOperand(y, 0);
	/* ins(scalar) yielding it, or no ins and a value from outside the payload (the scalar
	 * folded into it by linalg-fuse-elementwise-ops). */
	if (n == 2)
		return mlirValueEqual(v, mlirBlockGetArgument(b, 0));
	return !mlirValueIsABlockArgument(v) || !mlirBlockEqual(mlirBlockArgumentGetOwner(v), b);
}

bool hostcode_is_init(MlirOperation g)
{
	if (hostcode_is_fill(g))
		return true;
	MlirAttribute seg = mlirOperationGetAttributeByName(g, mlirx_s("operandSegmentSizes"));
	return mlirx_op_is(g, "linalg.generic") && mlirOperationGetNumOperands(g) == 2 && !mlirAttributeIsNull(seg) &&
	       mlirAttributeIsADenseI32Array(seg) && mlirDenseArrayGetNumElements(seg) == 2 &&
	       mlirDenseI32ArrayGetElement(seg, 0) == 1 && all_parallel(g) && is_copy(g);
}

/* Ops that may sit between a fill and its contraction inside one bracket: they do no work. */
static bool inert(MlirOperation op)
{
	static const char *const names[] = { "arith.constant", "memref.alloc", "memref.subview",
					     "memref.cast", "memref.collapse_shape", "memref.expand_shape",
					     "memref.reinterpret_cast", "memref.get_global" };
	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (mlirx_op_is(op, names[i]))
			return true;
	return false;
}

bool hostcode_fill_folds(MlirOperation fill, MlirOperation next)
{
	if (!hostcode_is_init(fill) || !mlirx_op_is(next, "linalg.generic") ||
	    !mlirBlockEqual(mlirOperationGetBlock(fill), mlirOperationGetBlock(next)))
		return false;
	for (MlirOperation op = mlirOperationGetNextInBlock(fill); !mlirOperationEqual(op, next);
	     op = mlirOperationGetNextInBlock(op))
		if (mlirOperationIsNull(op) || !(inert(op) || hostcode_is_init(op)))
			return false;
	MlirAttribute seg = mlirOperationGetAttributeByName(next, mlirx_s("operandSegmentSizes"));
	if (mlirAttributeIsNull(seg) || !mlirAttributeIsADenseI32Array(seg) ||
	    mlirDenseArrayGetNumElements(seg) != 2)
		return false;
	intptr_t n_in = mlirDenseI32ArrayGetElement(seg, 0), n_out = mlirDenseI32ArrayGetElement(seg, 1);
	MlirValue buf = mlirOperationGetOperand(fill, mlirOperationGetNumOperands(fill) - 1);
	MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(next, 0));
	if (mlirBlockIsNull(body) || mlirBlockGetNumArguments(body) != n_in + n_out)
		return false;
	/* The next op accumulates into the filled buffer: an output its payload reads. */
	for (intptr_t i = n_in; i < n_in + n_out; i++)
		if (mlirValueEqual(mlirOperationGetOperand(next, i), buf) &&
		    !mlirOpOperandIsNull(mlirValueGetFirstUse(mlirBlockGetArgument(body, i))))
			return true;
	return false;
}

/* ---------------------------------------------------------------- arithmetic and math */

/*
 * tanh(x) = sign(x)·(e - 1)/(e + 1), e = exp(2·min(|x|, 9)) (tanh 9 rounds to 1 in f32), and
 * its odd series below |x| = 1/16, where (e - 1) would cancel: x·(1 - x²/3 + 2x⁴/15 - 17x⁶/315),
 * truncation 3e-10 relative there.  erf(x) = sign(x)·(1 - (a1 t + ... + a5 t⁵)·exp(-x²)),
 * t = 1/(1 + p|x|) (Abramowitz and Stegun 7.1.26, absolute error ≤ 1.5e-7), and its series
 * 2/√π·x·(1 - x²/3 + x⁴/10 - x⁶/42 + x⁸/216 - x¹⁰/1320) below |x| = 1/2 (relative 1.4e-8).
 * Both branches are computed and one is selected, so the loop body has no branch.
 */
static const char MATH_HELPERS[] =
	"func.func private @pim_tanh_f32(%x: f32) -> f32 {\n"
	"  %ax = math.absf %x : f32\n"
	"  %c9 = arith.constant 9.0 : f32\n"
	"  %c2 = arith.constant 2.0 : f32\n"
	"  %one = arith.constant 1.0 : f32\n"
	"  %lim = arith.constant 0.0625 : f32\n"
	"  %k3 = arith.constant -0.333333333333 : f32\n"
	"  %k5 = arith.constant 0.133333333333 : f32\n"
	"  %k7 = arith.constant -0.053968253968 : f32\n"
	"  %cx = arith.minimumf %ax, %c9 : f32\n"
	"  %tx = arith.mulf %cx, %c2 : f32\n"
	"  %e = math.exp %tx : f32\n"
	"  %num = arith.subf %e, %one : f32\n"
	"  %den = arith.addf %e, %one : f32\n"
	"  %big = arith.divf %num, %den : f32\n"
	"  %x2 = arith.mulf %ax, %ax : f32\n"
	"  %p1 = arith.mulf %x2, %k7 : f32\n"
	"  %p2 = arith.addf %p1, %k5 : f32\n"
	"  %p3 = arith.mulf %x2, %p2 : f32\n"
	"  %p4 = arith.addf %p3, %k3 : f32\n"
	"  %p5 = arith.mulf %x2, %p4 : f32\n"
	"  %p6 = arith.mulf %ax, %p5 : f32\n"
	"  %small = arith.addf %ax, %p6 : f32\n"
	"  %isSmall = arith.cmpf olt, %ax, %lim : f32\n"
	"  %m = arith.select %isSmall, %small, %big : f32\n"
	"  %r = math.copysign %m, %x : f32\n"
	"  return %r : f32\n"
	"}\n"
	"func.func private @pim_one_plus_tanh_f32(%u: f32) -> f32 {\n"
	"  %m2 = arith.constant -2.0 : f32\n"
	"  %one = arith.constant 1.0 : f32\n"
	"  %two = arith.constant 2.0 : f32\n"
	"  %t = arith.mulf %u, %m2 : f32\n"
	"  %e = math.exp %t : f32\n"
	"  %d = arith.addf %e, %one : f32\n"
	"  %r = arith.divf %two, %d : f32\n"
	"  return %r : f32\n"
	"}\n"
	"func.func private @pim_erf_f32(%x: f32) -> f32 {\n"
	"  %ax = math.absf %x : f32\n"
	"  %one = arith.constant 1.0 : f32\n"
	"  %p = arith.constant 0.3275911 : f32\n"
	"  %a1 = arith.constant 0.254829592 : f32\n"
	"  %a2 = arith.constant -0.284496736 : f32\n"
	"  %a3 = arith.constant 1.421413741 : f32\n"
	"  %a4 = arith.constant -1.453152027 : f32\n"
	"  %a5 = arith.constant 1.061405429 : f32\n"
	"  %lim = arith.constant 0.5 : f32\n"
	"  %s0 = arith.constant 1.1283791670955126 : f32\n"
	"  %s3 = arith.constant -0.333333333333 : f32\n"
	"  %s5 = arith.constant 0.1 : f32\n"
	"  %s7 = arith.constant -0.0238095238095 : f32\n"
	"  %s9 = arith.constant 0.00462962962963 : f32\n"
	"  %s11 = arith.constant -0.000757575757576 : f32\n"
	"  %px = arith.mulf %p, %ax : f32\n"
	"  %d = arith.addf %one, %px : f32\n"
	"  %t = arith.divf %one, %d : f32\n"
	"  %q1 = arith.mulf %a5, %t : f32\n"
	"  %q2 = arith.addf %q1, %a4 : f32\n"
	"  %q3 = arith.mulf %q2, %t : f32\n"
	"  %q4 = arith.addf %q3, %a3 : f32\n"
	"  %q5 = arith.mulf %q4, %t : f32\n"
	"  %q6 = arith.addf %q5, %a2 : f32\n"
	"  %q7 = arith.mulf %q6, %t : f32\n"
	"  %q8 = arith.addf %q7, %a1 : f32\n"
	"  %q9 = arith.mulf %q8, %t : f32\n"
	"  %x2 = arith.mulf %ax, %ax : f32\n"
	"  %nx2 = arith.negf %x2 : f32\n"
	"  %e = math.exp %nx2 : f32\n"
	"  %qe = arith.mulf %q9, %e : f32\n"
	"  %big = arith.subf %one, %qe : f32\n"
	"  %r1 = arith.mulf %x2, %s11 : f32\n"
	"  %r2 = arith.addf %r1, %s9 : f32\n"
	"  %r3 = arith.mulf %x2, %r2 : f32\n"
	"  %r4 = arith.addf %r3, %s7 : f32\n"
	"  %r5 = arith.mulf %x2, %r4 : f32\n"
	"  %r6 = arith.addf %r5, %s5 : f32\n"
	"  %r7 = arith.mulf %x2, %r6 : f32\n"
	"  %r8 = arith.addf %r7, %s3 : f32\n"
	"  %r9 = arith.mulf %x2, %r8 : f32\n"
	"  %r10 = arith.addf %r9, %one : f32\n"
	"  %r11 = arith.mulf %ax, %r10 : f32\n"
	"  %small = arith.mulf %r11, %s0 : f32\n"
	"  %isSmall = arith.cmpf olt, %ax, %lim : f32\n"
	"  %m = arith.select %isSmall, %small, %big : f32\n"
	"  %r = math.copysign %m, %x : f32\n"
	"  return %r : f32\n"
	"}\n";

static bool is_f32(MlirValue v)
{
	return mlirTypeIsAF32(mlirValueGetType(v));
}

static bool is_const(MlirValue v, double want)
{
	if (!mlirValueIsAOpResult(v) || !mlirx_op_is(mlirOpResultGetOwner(v), "arith.constant"))
		return false;
	MlirAttribute a = mlirOperationGetAttributeByName(mlirOpResultGetOwner(v), mlirx_s("value"));
	return !mlirAttributeIsNull(a) && mlirAttributeIsAFloat(a) && mlirFloatAttrGetValueDouble(a) == want;
}

/* Replaces op (one f32 result) by a call of @callee on arg (f32). */
static int replace_by_call(MlirOperation op, const char *callee, MlirValue arg)
{
	MlirLocation loc = mlirOperationGetLocation(op);
	MlirContext ctx = mlirOperationGetContext(op);
	MlirType f32 = mlirF32TypeGet(ctx);
	MlirOperationState st = mlirOperationStateGet(mlirx_s("func.call"), loc);
	MlirNamedAttribute a = mlirNamedAttributeGet(
		mlirIdentifierGet(ctx, mlirx_s("callee")),
		mlirFlatSymbolRefAttrGet(ctx, mlirx_s(callee)));

	mlirOperationStateAddOperands(&st, 1, &arg);
	mlirOperationStateAddResults(&st, 1, &f32);
	mlirOperationStateAddAttributes(&st, 1, &a);
	MlirOperation call = mlirOperationCreate(&st);
	if (mlirOperationIsNull(call))
		return -EINVAL;
	mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(op), op, call);
	mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(op, 0), mlirOperationGetResult(call, 0));
	mlirOperationDestroy(op);
	return 0;
}

/*
 * 1 + tanh(u) on f32 (the tanh GELU: 0.5 x (1 + tanh(u))) as 2 / (1 + exp(-2u)): the same value
 * with one exp and one divide, and no cancellation where tanh(u) is near -1.  Returns 1 when op
 * was such an add and is gone.
 */
static int one_plus_tanh(MlirOperation op)
{
	if (!mlirx_op_is(op, "arith.addf") || mlirOperationGetNumOperands(op) != 2 ||
	    !is_f32(mlirOperationGetResult(op, 0)))
		return 0;
	for (int k = 0; k < 2; k++) {
		MlirValue t = mlirOperationGetOperand(op, k), c = mlirOperationGetOperand(op, 1 - k);
		if (!mlirValueIsAOpResult(t) || !mlirx_op_is(mlirOpResultGetOwner(t), "math.tanh") ||
		    !is_const(c, 1.0))
			continue;
		MlirOpOperand u = mlirValueGetFirstUse(t);
		if (mlirOpOperandIsNull(u) || !mlirOpOperandIsNull(mlirOpOperandGetNextUse(u)))
			continue;
		MlirOperation tanh = mlirOpResultGetOwner(t);
		if (replace_by_call(op, "pim_one_plus_tanh_f32", mlirOperationGetOperand(tanh, 0)) < 0)
			return -EINVAL;
		mlirOperationDestroy(tanh);
		return 1;
	}
	return 0;
}


/* arith.maximumf/minimumf on f32 or f64 as LLVM's llvm.intr.maximum/minimum: arith-expand
 * (which the model's pipeline runs for bf16) would otherwise rewrite them into compares and
 * selects, a form the vectoriser does not take for a reduction (softmax's max). */
static int max_min_to_llvm(MlirOperation op)
{
	const char *name = mlirx_op_is(op, "arith.maximumf") ? "llvm.intr.maximum" :
			   mlirx_op_is(op, "arith.minimumf") ? "llvm.intr.minimum" : NULL;
	if (!name || mlirOperationGetNumOperands(op) != 2 || mlirOperationGetNumResults(op) != 1)
		return 0;
	MlirType t = mlirValueGetType(mlirOperationGetResult(op, 0));
	if (!mlirTypeIsAF32(t) && !mlirTypeIsAF64(t))
		return 0;
	MlirValue args[2] = { mlirOperationGetOperand(op, 0), mlirOperationGetOperand(op, 1) };
	MlirOperationState st = mlirOperationStateGet(mlirx_s(name), mlirOperationGetLocation(op));
	mlirOperationStateAddOperands(&st, 2, args);
	mlirOperationStateAddResults(&st, 1, &t);
	MlirOperation m = mlirOperationCreate(&st);
	if (mlirOperationIsNull(m))
		return -EINVAL;
	mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(op), op, m);
	mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(op, 0), mlirOperationGetResult(m, 0));
	mlirOperationDestroy(op);
	return 1;
}

static bool fastmath_op(MlirOperation op)
{
	static const char *const names[] = { "arith.addf", "arith.subf", "arith.mulf", "arith.divf",
					     "arith.negf", "arith.maxnumf", "arith.minnumf" };
	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (mlirx_op_is(op, names[i]))
			return true;
	return false;
}

int hostcode_prepare(struct extract *x, struct pim_error *err)
{
	MlirOperation mod = mlirModuleGetOperation(x->module);
	MlirContext ctx = x->mx.ctx;
	struct mlirx_ops l = { 0 };
	bool need_helpers = false;
	int r;

	if ((r = mlirx_ops_collect(mod, NULL, &l)) < 0) {
		free(l.ops);
		return err_set(err, r, "out of memory");
	}
	MlirAttribute fm = mlirAttributeParseGet(ctx, mlirx_s("#arith.fastmath<reassoc,contract>"));
	if (mlirAttributeIsNull(fm)) {
		free(l.ops);
		return err_set(err, -EINVAL, "internal error: cannot make the fastmath attribute");
	}
	/* First 1 + tanh(u) (it removes tanh ops), then the rest on a fresh list. */
	for (size_t i = 0; i < l.n; i++) {
		if (!mlirx_op_is(l.ops[i], "arith.addf"))
			continue;
		if ((r = one_plus_tanh(l.ops[i])) < 0) {
			free(l.ops);
			return err_set(err, r, "internal error: cannot build a call of @pim_one_plus_tanh_f32");
		}
		need_helpers = need_helpers || r > 0;
	}
	l.n = 0;
	if ((r = mlirx_ops_collect(mod, NULL, &l)) < 0) {
		free(l.ops);
		return err_set(err, r, "out of memory");
	}
	for (size_t i = 0; i < l.n; i++) {
		MlirOperation op = l.ops[i];
		if ((r = max_min_to_llvm(op)) != 0) {
			if (r < 0) {
				free(l.ops);
				return err_set(err, r, "internal error: cannot build llvm.intr.maximum");
			}
			continue;
		}
		if (fastmath_op(op))
			mlirOperationSetAttributeByName(op, mlirx_s("fastmath"), fm);
		else if ((mlirx_op_is(op, "math.tanh") || mlirx_op_is(op, "math.erf")) &&
			 mlirOperationGetNumOperands(op) == 1 && is_f32(mlirOperationGetOperand(op, 0)) &&
			 mlirOperationGetNumResults(op) == 1 && is_f32(mlirOperationGetResult(op, 0))) {
			const char *callee = mlirx_op_is(op, "math.tanh") ? "pim_tanh_f32" : "pim_erf_f32";
			if (replace_by_call(op, callee, mlirOperationGetOperand(op, 0)) < 0) {
				free(l.ops);
				return err_set(err, -EINVAL, "internal error: cannot build a call of @%s", callee);
			}
			need_helpers = true;
		}
	}
	free(l.ops);
	if (!need_helpers)
		return 0;
	/* The helpers go into the module and are inlined into every call by the caller's
	 * pipeline (hostcode_prepare runs before it; see model.c). */
	MlirModule h = mlirModuleCreateParse(ctx, mlirx_s(MATH_HELPERS));
	if (mlirModuleIsNull(h))
		return err_set(err, -EINVAL, "internal error: the math helpers do not parse");
	MlirBlock dst = mlirModuleGetBody(x->module);
	MlirBlock src = mlirModuleGetBody(h);
	for (MlirOperation f = mlirBlockGetFirstOperation(src); !mlirOperationIsNull(f);) {
		MlirOperation next = mlirOperationGetNextInBlock(f);
		for (MlirOperation op = mlirBlockGetFirstOperation(mlirRegionGetFirstBlock(mlirOperationGetRegion(f, 0)));
		     !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op))
			if (fastmath_op(op))
				mlirOperationSetAttributeByName(op, mlirx_s("fastmath"), fm);
		mlirOperationRemoveFromParent(f);
		mlirBlockAppendOwnedOperation(dst, f);
		f = next;
	}
	mlirModuleDestroy(h);
	return 0;
}
