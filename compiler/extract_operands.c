/* SPDX-License-Identifier: MIT */
/*
 * extract_operands.c: operand and byte accounting of stage 3 (extract.h).  Each operand of a
 * region's generic op is read off the op: its shape, element width, bytes and role, and the
 * allocation it lives in, followed through views, loops and casts to an argument, a constant
 * or an allocation of the function; gathered operands count the bytes their loads touch.
 */
#include "extract_internal.h"

#include <inttypes.h>
#include <string.h>

/* ---------------------------------------------------------------- stage 3: operands */

/* Bytes of a static memref type; 0 if not one. */
static uint64_t memref_bytes(MlirType t)
{
	uint64_t n = storage_bytes(mlirx_elem_bits(mlirShapedTypeGetElementType(t)));

	if (!mlirTypeIsAMemRef(t) || !mlirShapedTypeHasStaticShape(t))
		return 0;
	for (intptr_t d = 0; d < mlirShapedTypeGetRank(t); d++)
		if (!mul_u64(n, (uint64_t)mlirShapedTypeGetDimSize(t, d), &n))
			return 0;
	return n;
}

static int add_alloc(struct extract *x, Pim__AllocKind kind, uint64_t bytes, void *key,
		     const char *global, uint32_t *id)
{
	struct extract_alloc *p = realloc(x->allocs, (x->n_allocs + 1) * sizeof *p);

	if (!p)
		return -ENOMEM;
	x->allocs = p;
	p = &x->allocs[x->n_allocs];
	*p = (struct extract_alloc){ .kind = kind, .bytes = bytes, .key = key };
	if (global)
		snprintf(p->global, sizeof p->global, "%s", global);
	*id = (uint32_t)x->n_allocs++;
	return 0;
}

static bool is_view_op(MlirOperation op)
{
	static const char *const views[] = { "memref.subview", "memref.cast", "memref.collapse_shape",
					     "memref.expand_shape", "memref.reinterpret_cast",
					     "memref.reshape", "memref.transpose", "memref.view",
					     "memref.memory_space_cast" };
	for (size_t i = 0; i < ELEMENTSOF(views); i++)
		if (mlirx_op_is(op, views[i]))
			return true;
	return false;
}

/* The yielded value #k of the first block of region ri of op (scf.for body, scf.if then). */
static MlirValue yielded(MlirOperation op, intptr_t ri, intptr_t k)
{
	MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, ri));
	MlirOperation t = mlirBlockIsNull(b) ? (MlirOperation){ NULL } : mlirBlockGetTerminator(b);
	if (mlirOperationIsNull(t) || k >= mlirOperationGetNumOperands(t))
		return (MlirValue){ NULL };
	return mlirOperationGetOperand(t, k);
}

/*
 * The allocation a memref value resolves to (doc/mlir.md pitfall 9): through view ops to a
 * function argument, a memref.alloc or a memref.global.  A loop-carried buffer counts as the
 * buffer it starts from (an scf.for block argument is its init value), a loop's or an if's
 * result as the buffer yielded by its (then) body.
 */
static int resolve_alloc(struct extract *x, MlirOperation entry, MlirOperation user, intptr_t opnd,
			 MlirValue v, uint32_t *id, struct pim_error *err)
{
	for (int steps = 0; steps < 256; steps++) {
		if (mlirValueIsABlockArgument(v)) {
			MlirBlock b = mlirBlockArgumentGetOwner(v);
			MlirOperation p = mlirBlockGetParentOperation(b);
			intptr_t k = mlirBlockArgumentGetArgNumber(v);
			if (mlirOperationEqual(p, entry)) {
				*id = (uint32_t)k; /* arguments are allocations 0..n_args-1 */
				return 0;
			}
			if (mlirx_op_is(p, "scf.for") && k >= 1 && 3 + (k - 1) < mlirOperationGetNumOperands(p)) {
				v = mlirOperationGetOperand(p, 3 + (k - 1));
				continue;
			}
			return extract_refuse(err, x, user, "operand #%zd is a block argument of %s; pim-extract "
				      "cannot trace it to an allocation", (ssize_t)opnd,
				      mlirx_op_is(p, "scf.for") ? "scf.for (induction variable)" : "an op");
		}
		MlirOperation d = mlirOpResultGetOwner(v);
		intptr_t k = mlirOpResultGetResultNumber(v);
		char name[96];
		if (mlirx_op_is(d, "memref.alloc") || mlirx_op_is(d, "memref.alloca")) {
			for (size_t i = 0; i < x->n_allocs; i++)
				if (x->allocs[i].key == d.ptr) {
					*id = (uint32_t)i;
					return 0;
				}
			uint64_t bytes = memref_bytes(mlirValueGetType(v));
			if (!bytes)
				return extract_refuse(err, x, d, "allocation without a static size");
			if (add_alloc(x, PIM__ALLOC_KIND__ALLOC_KIND_ALLOC, bytes, d.ptr, NULL, id) < 0)
				return err_set(err, -ENOMEM, "out of memory");
			return 0;
		}
		if (mlirx_op_is(d, "memref.get_global")) {
			if (!mlirx_attr_str(mlirOperationGetAttributeByName(d, mlirx_s("name")), name, sizeof name))
				return extract_refuse(err, x, d, "memref.get_global without a symbol");
			for (size_t i = 0; i < x->n_allocs; i++)
				if (x->allocs[i].kind == PIM__ALLOC_KIND__ALLOC_KIND_GLOBAL &&
				    strcmp(x->allocs[i].global, name) == 0) {
					*id = (uint32_t)i;
					return 0;
				}
			uint64_t bytes = memref_bytes(mlirValueGetType(v));
			if (!bytes)
				return extract_refuse(err, x, d, "global without a static size");
			if (add_alloc(x, PIM__ALLOC_KIND__ALLOC_KIND_GLOBAL, bytes, NULL, name, id) < 0)
				return err_set(err, -ENOMEM, "out of memory");
			return 0;
		}
		if (is_view_op(d)) {
			v = mlirOperationGetOperand(d, 0);
			continue;
		}
		if (mlirx_op_is(d, "scf.for") || mlirx_op_is(d, "scf.if")) {
			v = yielded(d, 0, k);
			if (mlirValueIsNull(v))
				break;
			continue;
		}
		mlirx_op_name(d, name, sizeof name);
		return extract_refuse(err, x, user, "operand #%zd comes from %s, which pim-extract cannot trace to "
			      "an allocation (function argument, memref.alloc or memref.global)",
			      (ssize_t)opnd, name);
	}
	return extract_refuse(err, x, user, "operand #%zd: cannot trace it to an allocation", (ssize_t)opnd);
}

static bool value_used(MlirValue v)
{
	return !mlirOpOperandIsNull(mlirValueGetFirstUse(v));
}

/* Iterator kinds and operand-derived extents of a generic op (cross-checked in stage 4). */
static int read_dims(struct extract *x, MlirOperation g, struct extract_region *reg,
		     struct pim_error *err)
{
	MlirAttribute it = mlirOperationGetAttributeByName(g, mlirx_s("iterator_types"));
	MlirAttribute maps = mlirOperationGetAttributeByName(g, mlirx_s("indexing_maps"));
	struct strbuf b = { 0 };

	if (mlirAttributeIsNull(it) || !mlirAttributeIsAArray(it) || mlirAttributeIsNull(maps) ||
	    !mlirAttributeIsAArray(maps))
		return extract_refuse(err, x, g, "internal error: generalized op without iterator_types or "
			      "indexing_maps (doc/mlir.md pitfall 4)");
	intptr_t n = mlirArrayAttrGetNumElements(it);
	if (n > EXTRACT_DIMS_MAX)
		return extract_refuse(err, x, g, "%zd loop dimensions, at most %d supported", (ssize_t)n,
			      EXTRACT_DIMS_MAX);
	reg->n_dims = (size_t)n;
	for (intptr_t d = 0; d < n; d++) {
		b.len = 0;
		mlirAttributePrint(mlirArrayAttrGetElement(it, d), mlirx_buf_cb, &b);
		reg->dim_parallel[d] = b.p && strstr(b.p, "parallel") != NULL;
		reg->dim_extent[d] = 0;
	}
	strbuf_free(&b);
	intptr_t nm = mlirArrayAttrGetNumElements(maps);
	for (intptr_t i = 0; i < nm && i < mlirOperationGetNumOperands(g); i++) {
		MlirType t = mlirValueGetType(mlirOperationGetOperand(g, i));
		if (!mlirTypeIsAShaped(t))
			continue;
		MlirAffineMap am = mlirAffineMapAttrGetValue(mlirArrayAttrGetElement(maps, i));
		for (intptr_t j = 0; j < mlirAffineMapGetNumResults(am) && j < mlirShapedTypeGetRank(t); j++) {
			MlirAffineExpr e = mlirAffineMapGetResult(am, j);
			if (!mlirAffineExprIsADim(e))
				continue;
			intptr_t d = mlirAffineDimExprGetPosition(e);
			if (d >= 0 && d < n && reg->dim_extent[d] == 0)
				reg->dim_extent[d] = (uint64_t)mlirShapedTypeGetDimSize(t, j);
		}
	}
	return 0;
}

/* True when v is defined inside op g: an argument of one of its blocks or a result of an op
 * nested in it (not a result of g itself). */
static bool defined_inside(MlirValue v, MlirOperation g)
{
	MlirOperation p = mlirValueIsABlockArgument(v) ?
				  mlirBlockGetParentOperation(mlirBlockArgumentGetOwner(v)) :
				  mlirOperationGetParentOperation(mlirOpResultGetOwner(v));

	for (; !mlirOperationIsNull(p); p = mlirOperationGetParentOperation(p))
		if (mlirOperationEqual(p, g))
			return true;
	return false;
}

struct payload_loads {
	MlirOperation g;
	struct mlirx_ops loads;
};

static int collect_loads(struct extract *x, MlirOperation op, void *ud)
{
	struct payload_loads *pl = ud;
	struct mlirx_ops *l = &pl->loads;

	if (!mlirx_op_is(op, "memref.load") || mlirOperationGetNumOperands(op) < 1 ||
	    defined_inside(mlirOperationGetOperand(op, 0), pl->g))
		return 0;
	if (mlirx_ops_add(l, op) < 0)
		return -ENOMEM;
	return 0;
}

/*
 * Buffers the payload reads without them being operands of the op: a tensor.extract in the
 * payload (an embedding lookup, ONNX Gather) is a memref.load of a buffer from outside once
 * bufferized.  Each such buffer is an `in` operand; its bytes are fixed in stage 4.
 */
static int read_gathers(struct extract *x, MlirOperation entry, MlirOperation g,
			struct extract_region *reg, struct pim_error *err)
{
	struct payload_loads pl = { .g = g };
	int r = walk_nested(x, g, collect_loads, &pl);
	_cleanup_(freep) MlirOperation *ops = pl.loads.ops;

	if (r < 0)
		return err_set(err, r, "out of memory");
	for (size_t i = 0; i < pl.loads.n; i++) {
		MlirValue v = mlirOperationGetOperand(ops[i], 0);
		size_t k = 0;
		/* One operand per buffer value; several loads of it count several elements. */
		for (size_t j = 0; j < i; j++)
			if (mlirValueEqual(mlirOperationGetOperand(ops[j], 0), v))
				k++;
		if (k) {
			for (size_t j = 0; j < reg->n_operands; j++)
				if (reg->operands[j].gather_loads && mlirValueEqual(reg->operands[j].gather_value, v))
					reg->operands[j].gather_loads++;
			continue;
		}
		struct extract_operand *p = realloc(reg->operands, (reg->n_operands + 1) * sizeof *p);
		if (!p)
			return err_set(err, -ENOMEM, "out of memory");
		reg->operands = p;
		p = &reg->operands[reg->n_operands];
		*p = (struct extract_operand){ .role = PIM__OPERAND_ROLE__OPERAND_ROLE_IN, .gather_loads = 1,
					       .gather_value = v };
		MlirType t = mlirValueGetType(v);
		MlirType et = mlirShapedTypeGetElementType(t);
		p->elem_bits = mlirx_elem_bits(et);
		mlirx_type_str(et, p->elem_type, sizeof p->elem_type);
		p->bytes = memref_bytes(t);
		if (!p->bytes)
			return extract_refuse(err, x, ops[i], "reads a buffer without a static size");
		if ((r = resolve_alloc(x, entry, ops[i], 0, v, &p->alloc, err)) < 0)
			return r;
		reg->n_operands++;
	}
	return 0;
}

int read_operands(struct extract *x, MlirOperation entry, MlirOperation g,
			 struct extract_region *reg, struct pim_error *err)
{
	MlirAttribute seg = mlirOperationGetAttributeByName(g, mlirx_s("operandSegmentSizes"));
	intptr_t nops = mlirOperationGetNumOperands(g), n_ins;
	bool map = mlirx_op_is(g, "linalg.map");
	int r;

	MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(g, 0));
	if (map) {
		/* linalg.map (what tensor.pad bufferizes into) stays named in MLIR 19: inputs, then
		 * one init its payload never reads. */
		n_ins = nops - 1;
		if (mlirBlockIsNull(body) || mlirBlockGetNumArguments(body) != n_ins)
			return extract_refuse(err, x, g, "internal error: payload arguments do not match the operands");
	} else {
		if (mlirAttributeIsNull(seg) || !mlirAttributeIsADenseI32Array(seg) ||
		    mlirDenseArrayGetNumElements(seg) != 2)
			return extract_refuse(err, x, g, "internal error: no operandSegmentSizes on a linalg.generic");
		n_ins = mlirDenseI32ArrayGetElement(seg, 0);
		if (mlirBlockIsNull(body) || mlirBlockGetNumArguments(body) != nops)
			return extract_refuse(err, x, g, "internal error: payload arguments do not match the operands");
	}
	reg->operands = calloc((size_t)nops, sizeof *reg->operands);
	if (!reg->operands)
		return err_set(err, -ENOMEM, "out of memory");
	for (intptr_t i = 0; i < nops; i++) {
		MlirValue v = mlirOperationGetOperand(g, i);
		MlirType t = mlirValueGetType(v);
		/* doc/mlir.md pitfall 4: a generalized fill has a scalar ins operand; only buffers
		 * are operands of the manifest. */
		if (!mlirTypeIsAShaped(t))
			continue;
		if (!mlirTypeIsAMemRef(t))
			return extract_refuse(err, x, g, "operand #%zd is not a buffer after bufferization", (ssize_t)i);
		struct extract_operand *o = &reg->operands[reg->n_operands];
		MlirType et = mlirShapedTypeGetElementType(t);
		o->elem_bits = mlirx_elem_bits(et);
		mlirx_type_str(et, o->elem_type, sizeof o->elem_type);
		o->bytes = memref_bytes(t);
		if (!o->bytes)
			return extract_refuse(err, x, g, "operand #%zd has no static size", (ssize_t)i);
		if (i < n_ins)
			o->role = PIM__OPERAND_ROLE__OPERAND_ROLE_IN;
		else if (map || !value_used(mlirBlockGetArgument(body, i)))
			o->role = PIM__OPERAND_ROLE__OPERAND_ROLE_OUT;
		else
			o->role = PIM__OPERAND_ROLE__OPERAND_ROLE_INOUT;
		if ((r = resolve_alloc(x, entry, g, i, v, &o->alloc, err)) < 0)
			return r;
		reg->n_operands++;
	}
	if ((r = read_gathers(x, entry, g, reg, err)) < 0)
		return r;
	if (reg->n_operands == 0)
		return extract_refuse(err, x, g, "no buffer operand");
	if (map) {
		/* Every dimension of the init is a parallel loop. */
		MlirType t = mlirValueGetType(mlirOperationGetOperand(g, nops - 1));
		intptr_t rank = mlirShapedTypeGetRank(t);
		if (rank > EXTRACT_DIMS_MAX)
			return extract_refuse(err, x, g, "%zd loop dimensions, at most %d supported", (ssize_t)rank,
				      EXTRACT_DIMS_MAX);
		reg->n_dims = (size_t)rank;
		for (intptr_t d = 0; d < rank; d++) {
			reg->dim_parallel[d] = true;
			reg->dim_extent[d] = (uint64_t)mlirShapedTypeGetDimSize(t, d);
		}
		return 0;
	}
	return read_dims(x, g, reg, err);
}

/* The input of an init folded into reg's nest (a bias the accumulator starts from), read
 * once as the nest begins: an operand of the region. */
int read_init_input(struct extract *x, MlirOperation entry, MlirOperation init,
			   struct extract_region *reg, struct pim_error *err)
{
	MlirValue v = mlirOperationGetOperand(init, 0);
	MlirType t = mlirValueGetType(v);

	if (!mlirTypeIsAShaped(t))
		return 0;
	if (!mlirTypeIsAMemRef(t) || !memref_bytes(t))
		return extract_refuse(err, x, init, "the input of an accumulator's init is not a static buffer");
	struct extract_operand *p = realloc(reg->operands, (reg->n_operands + 1) * sizeof *p);
	if (!p)
		return err_set(err, -ENOMEM, "out of memory");
	reg->operands = p;
	struct extract_operand *o = &p[reg->n_operands];
	*o = (struct extract_operand){ .bytes = memref_bytes(t), .role = PIM__OPERAND_ROLE__OPERAND_ROLE_IN };
	MlirType et = mlirShapedTypeGetElementType(t);
	o->elem_bits = mlirx_elem_bits(et);
	mlirx_type_str(et, o->elem_type, sizeof o->elem_type);
	int r = resolve_alloc(x, entry, init, 0, v, &o->alloc, err);
	if (r == 0)
		reg->n_operands++;
	return r;
}

int read_arguments(struct extract *x, MlirOperation entry, struct pim_error *err)
{
	MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(entry, 0));
	MlirType ft = mlirTypeAttrGetValue(mlirOperationGetAttributeByName(entry, mlirx_s("function_type")));
	intptr_t n = mlirBlockGetNumArguments(b);

	if (mlirFunctionTypeGetNumResults(ft) != 0)
		return extract_refuse(err, x, entry, "internal error: results left after buffer-results-to-out-params");
	x->args = calloc(n ? (size_t)n : 1, sizeof *x->args);
	if (!x->args)
		return err_set(err, -ENOMEM, "out of memory");
	for (intptr_t i = 0; i < n; i++) {
		MlirType t = mlirValueGetType(mlirBlockGetArgument(b, i));
		uint64_t bytes = memref_bytes(t);
		uint32_t id;
		if (!bytes)
			return extract_refuse(err, x, entry, "argument #%zd is not a static buffer after bufferization",
				      (ssize_t)i);
		struct extract_arg *a = &x->args[x->n_args++];
		a->rank = (size_t)mlirShapedTypeGetRank(t);
		a->shape = calloc(a->rank ? a->rank : 1, sizeof *a->shape);
		if (!a->shape)
			return err_set(err, -ENOMEM, "out of memory");
		for (size_t d = 0; d < a->rank; d++)
			a->shape[d] = mlirShapedTypeGetDimSize(t, (intptr_t)d);
		if (add_alloc(x, PIM__ALLOC_KIND__ALLOC_KIND_ARGUMENT, bytes, NULL, NULL, &id) < 0)
			return err_set(err, -ENOMEM, "out of memory");
	}
	return 0;
}
