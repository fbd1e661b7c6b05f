/* SPDX-License-Identifier: MIT */
/*
 * extract_regions.c: region discovery (extract.h, stages 2 to 4).  Stage 2 finds every linalg
 * op of the source, names it after its ONNX node or location and brackets it with the region
 * hooks; stage 3 finds the brackets again after bufferization, makes one region per generic
 * (in program order, hooks tight around it) and has its operands read (extract_operands.c);
 * stage 4 reads each region's parallel and reduction extents and trip count off the loops.
 */
#include "extract_internal.h"

#include <inttypes.h>
#include <string.h>

/* ---------------------------------------------------------------- stage 2: instrument */

static int collect_linalg(struct extract *x, MlirOperation op, void *ud)
{
	struct mlirx_ops *l = ud;

	if (!mlirx_op_in_dialect(op, "linalg"))
		return 0;
	if (mlirx_ops_add(l, op) < 0)
		return -ENOMEM;
	return 1; /* the payload of a linalg op is not a region of its own */
}

/* Region name: the op's pim.name attribute if the source gives one, else the op's short name,
 * for linalg.generic followed by the payload's ops ("generic.subf.exp"). */
static void region_name(MlirOperation op, char *out, size_t n)
{
	char s[128];

	if (mlirx_attr_str(mlirOperationGetDiscardableAttributeByName(op, mlirx_s("pim.name")), out, n) &&
	    out[0])
		return;
	mlirx_op_name(op, s, sizeof s);
	snprintf(out, n, "%s", strncmp(s, "linalg.", 7) == 0 ? s + 7 : s);
	if (strcmp(s, "linalg.generic") != 0 || mlirOperationGetNumRegions(op) < 1)
		return;
	MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, 0));
	size_t k = 0;
	for (MlirOperation p = mlirBlockIsNull(b) ? (MlirOperation){ NULL } : mlirBlockGetFirstOperation(b);
	     !mlirOperationIsNull(p) && k < 4; p = mlirOperationGetNextInBlock(p)) {
		if (mlirx_op_is(p, "linalg.yield"))
			continue;
		mlirx_op_name(p, s, sizeof s);
		const char *dot = strchr(s, '.');
		size_t l = strlen(out);
		snprintf(out + l, n - l, ".%s", dot ? dot + 1 : s);
		k++;
	}
}

/* Operator facts of an op whose location names a framework operator (extract_source); false
 * and nothing changed if it names none.  The name becomes the node's unless the source gave one
 * (pim.name). */
static bool node_facts(const struct extract *x, MlirOperation op, char *node, bool *node_named,
		       char *name, char *opname, char *location)
{
	char n[MANIFEST_TEXT_MAX + 1], t[MANIFEST_TEXT_MAX + 1];
	char pim_name[8];

	if (!mlirx_loc_node(mlirOperationGetLocation(op), n, sizeof n, t, sizeof t))
		return false;
	snprintf(node, MANIFEST_TEXT_MAX + 1, "%s", n);
	snprintf(opname, MANIFEST_TEXT_MAX + 1, "%s", t);
	snprintf(location, MANIFEST_TEXT_MAX + 1, "%s", n);
	*node_named = !mlirx_attr_str(mlirOperationGetDiscardableAttributeByName(op, mlirx_s("pim.name")),
				      pim_name, sizeof pim_name) || !pim_name[0];
	if (*node_named)
		snprintf(name, MANIFEST_TEXT_MAX + 1, "%s", n);
	return true;
}

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/* NODE.K for the K-th nest (program order) of each framework operator that names its nests
 * (the count per node kept in an open-addressing table of region indices). */
static int number_node_nests(struct extract *x)
{
	size_t cap = 16;
	while (cap < 2 * x->n_regions)
		cap *= 2;
	_cleanup_(freep) size_t *slot = malloc(cap * sizeof *slot);
	_cleanup_(freep) size_t *count = calloc(x->n_regions ? x->n_regions : 1, sizeof *count);

	if (!slot || !count)
		return -ENOMEM;
	for (size_t i = 0; i < cap; i++)
		slot[i] = SIZE_MAX;
	for (size_t i = 0; i < x->n_regions; i++) {
		struct extract_region *r = &x->regions[i];
		if (!r->node[0])
			continue;
		size_t h = hash_str(r->node) & (cap - 1);
		while (slot[h] != SIZE_MAX && strcmp(x->regions[slot[h]].node, r->node) != 0)
			h = (h + 1) & (cap - 1);
		if (slot[h] == SIZE_MAX)
			slot[h] = i;
		size_t k = count[slot[h]]++;
		if (!r->node_named)
			continue;
		char idx[24];
		int w = snprintf(idx, sizeof idx, ".%zu", k);
		snprintf(r->name, sizeof r->name, "%.*s%s", (int)(sizeof r->name - 1 - (size_t)w), r->node,
			 idx);
	}
	return 0;
}

static MlirOperation make_i32_const(MlirContext ctx, MlirLocation loc, int32_t v)
{
	MlirType i32 = mlirIntegerTypeGet(ctx, 32);
	MlirOperationState st = mlirOperationStateGet(mlirx_s("arith.constant"), loc);
	MlirNamedAttribute a = mlirNamedAttributeGet(mlirIdentifierGet(ctx, mlirx_s("value")),
						     mlirIntegerAttrGet(i32, v));
	mlirOperationStateAddResults(&st, 1, &i32);
	mlirOperationStateAddAttributes(&st, 1, &a);
	return mlirOperationCreate(&st);
}

static MlirOperation make_hook_call(MlirContext ctx, MlirLocation loc, const char *hook, MlirValue id)
{
	MlirOperationState st = mlirOperationStateGet(mlirx_s("func.call"), loc);
	MlirNamedAttribute a = mlirNamedAttributeGet(mlirIdentifierGet(ctx, mlirx_s("callee")),
						     mlirFlatSymbolRefAttrGet(ctx, mlirx_s(hook)));
	mlirOperationStateAddOperands(&st, 1, &id);
	mlirOperationStateAddAttributes(&st, 1, &a);
	return mlirOperationCreate(&st);
}

static int declare_hooks(struct extract *x, struct pim_error *err)
{
	static const char *const decl[] = { "func.func private @" HOOK_ENTER "(i32)",
					    "func.func private @" HOOK_EXIT "(i32)" };
	MlirBlock body = mlirModuleGetBody(x->module);

	for (size_t i = 0; i < ELEMENTSOF(decl); i++) {
		MlirOperation f = mlirOperationCreateParse(x->mx.ctx, mlirx_s(decl[i]), mlirx_s("pim-extract"));
		if (mlirOperationIsNull(f))
			return err_set(err, -EINVAL, "internal error: cannot build \"%s\"", decl[i]);
		mlirBlockInsertOwnedOperation(body, 0, f);
	}
	return 0;
}

/* const + enter before first, exit after last (the same op, or a fill and the contraction it
 * folds into): the bracket of region id. */
static int insert_hooks(struct extract *x, MlirOperation first, MlirOperation last, int32_t id,
			struct pim_error *err)
{
	MlirLocation loc = mlirOperationGetLocation(last);
	MlirBlock b = mlirOperationGetBlock(last);
	MlirOperation c = make_i32_const(x->mx.ctx, loc, id);

	if (mlirOperationIsNull(c))
		return err_set(err, -EINVAL, "internal error: cannot build a region id constant");
	MlirValue v = mlirOperationGetResult(c, 0);
	MlirOperation enter = make_hook_call(x->mx.ctx, loc, HOOK_ENTER, v);
	MlirOperation exit_ = make_hook_call(x->mx.ctx, loc, HOOK_EXIT, v);
	if (mlirOperationIsNull(enter) || mlirOperationIsNull(exit_))
		return err_set(err, -EINVAL, "internal error: cannot build a hook call");
	mlirBlockInsertOwnedOperationBefore(b, first, c);
	mlirBlockInsertOwnedOperationBefore(b, first, enter);
	mlirBlockInsertOwnedOperationAfter(b, last, exit_);
	return 0;
}

/* Tensor ops whose bufferization makes a loop nest of its own (tensor.pad: a linalg.map that
 * writes the padding value), by location, to name those nests after their source. */
static int collect_origins(struct extract *x, MlirOperation op, void *ud)
{
	(void)ud;
	if (!mlirx_op_is(op, "tensor.pad") && !mlirx_op_is(op, "tensor.generate") &&
	    !mlirx_op_is(op, "tensor.splat"))
		return 0;
	struct extract_origin *p = realloc(x->origins, (x->n_origins + 1) * sizeof *p);
	if (!p)
		return -ENOMEM;
	x->origins = p;
	p = &x->origins[x->n_origins++];
	mlirx_op_loc(&x->mx, op, p->location, sizeof p->location);
	mlirx_op_name(op, p->op, sizeof p->op);
	return 0;
}

/* Stage 2: the source's linalg ops, bracketed by hooks whose ids index x->sources.  These
 * brackets are only the join key across bufferization (doc/mlir.md pitfall 6: the named
 * op's name is gone once generalized, and locations need not be unique); read_regions puts
 * the final hooks in. */
int instrument(struct extract *x, struct pim_error *err)
{
	MlirOperation entry = extract_entry_op(x);
	_cleanup_(freep) MlirOperation *ops = NULL;
	struct mlirx_ops l = { 0 };
	int r = walk_nested(x, entry, collect_linalg, &l);

	ops = l.ops;
	if (r < 0)
		return err_set(err, r, "out of memory collecting linalg ops");
	if (l.n == 0)
		return err_set(err, -EINVAL, "%s: @%s has no linalg operation: no loop nest to extract",
			       x->mx.input, x->entry);
	if (l.n > MANIFEST_REGIONS_MAX || l.n > INT32_MAX)
		return err_set(err, -E2BIG, "%s: %zu linalg operations, at most %u supported",
			       x->mx.input, l.n, MANIFEST_REGIONS_MAX);
	x->sources = calloc(l.n, sizeof *x->sources);
	if (!x->sources)
		return err_set(err, -ENOMEM, "out of memory");
	x->n_sources = l.n;
	for (size_t i = 0; i < l.n; i++) {
		struct extract_source *src = &x->sources[i];
		mlirx_op_name(l.ops[i], src->op, sizeof src->op);
		region_name(l.ops[i], src->name, sizeof src->name);
		mlirx_op_loc(&x->mx, l.ops[i], src->location, sizeof src->location);
		node_facts(x, l.ops[i], src->node, &src->node_named, src->name, src->op, src->location);
		if ((r = insert_hooks(x, l.ops[i], l.ops[i], (int32_t)i, err)) < 0)
			return r;
	}
	if ((r = walk_nested(x, entry, collect_origins, NULL)) < 0)
		return err_set(err, r, "out of memory");
	return declare_hooks(x, err);
}

/* ---------------------------------------------------------------- stage 3: regions */

static int collect_enters(struct extract *x, MlirOperation op, void *ud)
{
	if (!is_call_to(op, HOOK_ENTER))
		return 0;
	if (mlirx_ops_add(ud, op) < 0)
		return -ENOMEM;
	return 1;
}

/* The enter call of every bracket 0..n-1; each must appear exactly once. */
static int find_brackets(struct extract *x, MlirOperation entry, MlirOperation *by_id, size_t n,
			 struct pim_error *err)
{
	struct mlirx_ops h = { 0 };
	int r = walk_nested(x, entry, collect_enters, &h);

	if (r < 0) {
		free(h.ops);
		return err_set(err, r, "out of memory");
	}
	for (size_t i = 0; i < n; i++)
		by_id[i] = (MlirOperation){ NULL };
	for (size_t i = 0; i < h.n; i++) {
		int64_t id;
		if (hook_id(h.ops[i], &id) < 0 || id < 0 || (uint64_t)id >= n ||
		    !mlirOperationIsNull(by_id[id])) {
			r = extract_refuse(err, x, h.ops[i], "internal error: region hook lost or duplicated by a pass");
			break;
		}
		by_id[id] = h.ops[i];
	}
	free(h.ops);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		if (mlirOperationIsNull(by_id[i]))
			return err_set(err, -EINVAL, "%s: internal error: the hook of region %zu was lost by "
				       "a pass", x->mx.input, i);
	return 0;
}

/* The exit call matching an enter call, in the same block. */
static MlirOperation bracket_exit(MlirOperation enter, int64_t id)
{
	for (MlirOperation op = mlirOperationGetNextInBlock(enter); !mlirOperationIsNull(op);
	     op = mlirOperationGetNextInBlock(op)) {
		int64_t k;
		if (is_call_to(op, HOOK_EXIT) && hook_id(op, &k) == 0 && k == id)
			return op;
	}
	return (MlirOperation){ NULL };
}

/* Removes a bracket's hooks and the id constant they share. */
static void remove_hooks(MlirOperation enter, MlirOperation exit_)
{
	MlirValue id = mlirOperationGetOperand(enter, 0);

	mlirOperationDestroy(enter);
	mlirOperationDestroy(exit_);
	if (mlirValueIsAOpResult(id) && mlirOpOperandIsNull(mlirValueGetFirstUse(id)))
		mlirOperationDestroy(mlirOpResultGetOwner(id));
}

/* Region facts of a linalg op that has no source bracket: bufferization made it (tensor.pad). */
static void region_from_origin(struct extract *x, MlirOperation op, struct extract_region *reg)
{
	mlirx_op_loc(&x->mx, op, reg->location, sizeof reg->location);
	mlirx_op_name(op, reg->op, sizeof reg->op);
	region_name(op, reg->name, sizeof reg->name);
	for (size_t i = 0; i < x->n_origins; i++)
		if (strcmp(x->origins[i].location, reg->location) == 0) {
			snprintf(reg->op, sizeof reg->op, "%s", x->origins[i].op);
			snprintf(reg->name, sizeof reg->name, "%s", strchr(reg->op, '.') + 1);
			break;
		}
	node_facts(x, op, reg->node, &reg->node_named, reg->name, reg->op, reg->location);
}

/*
 * Stage 3.  Every linalg op of the entry function, in program order, becomes a region: the
 * source bracket it sits in gives its name, operator and location (a nest bufferization made,
 * e.g. the padding of tensor.pad, is named after its origin).  The stage-2 hooks go; fresh ones
 * with the final ids go tight around each op (an allocation or a copy bufferization put next
 * to the op is not part of its loop nest).  Then the operands are read.
 */
int read_regions(struct extract *x, struct pim_error *err)
{
	MlirOperation entry = extract_entry_op(x);
	size_t n_src = x->n_sources;
	_cleanup_(freep) MlirOperation *by_id = calloc(n_src, sizeof *by_id);
	_cleanup_(freep) MlirOperation *src_op = calloc(n_src, sizeof *src_op);
	_cleanup_(freep) MlirOperation *ops = NULL;
	struct mlirx_ops l = { 0 };
	int r;

	if (!by_id || !src_op)
		return err_set(err, -ENOMEM, "out of memory");
	if (mlirOperationIsNull(entry))
		return err_set(err, -EINVAL, "internal error: @%s disappeared", x->entry);
	if ((r = read_arguments(x, entry, err)) < 0)
		return r;
	if ((r = find_brackets(x, entry, by_id, n_src, err)) < 0)
		return r;
	for (size_t k = 0; k < n_src; k++) {
		MlirOperation enter = by_id[k], exit_ = bracket_exit(enter, (int64_t)k);
		size_t n_linalg = 0;
		if (mlirOperationIsNull(exit_))
			return extract_refuse(err, x, enter, "internal error: region %zu has no exit hook", k);
		for (MlirOperation op = mlirOperationGetNextInBlock(enter); !mlirOperationEqual(op, exit_);
		     op = mlirOperationGetNextInBlock(op))
			if (mlirx_op_in_dialect(op, "linalg")) {
				src_op[k] = op;
				n_linalg++;
			}
		if (n_linalg != 1)
			return err_set(err, -EINVAL, "%s: %s: internal error: %zu linalg ops between the hooks "
				       "of the op after bufferization", x->sources[k].location,
				       x->sources[k].op, n_linalg);
		remove_hooks(enter, exit_);
	}

	r = walk_nested(x, entry, collect_linalg, &l);
	ops = l.ops;
	if (r < 0)
		return err_set(err, r, "out of memory collecting linalg ops");
	if (l.n > MANIFEST_REGIONS_MAX)
		return err_set(err, -E2BIG, "%s: %zu loop nests, at most %u supported", x->mx.input, l.n,
			       MANIFEST_REGIONS_MAX);
	x->regions = calloc(l.n ? l.n : 1, sizeof *x->regions);
	if (!x->regions)
		return err_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < l.n; i++) {
		MlirOperation first = l.ops[i], g = first;
		struct extract_region *reg = &x->regions[x->n_regions];
		size_t k = 0;
		/* Fills that only initialise the accumulators of the op after them are part of its
		 * nest (softmax's max: the maxima and their indices). */
		size_t t = i;
		while (t < l.n && hostcode_is_init(l.ops[t]))
			t++;
		bool fold = t > i && t < l.n;
		for (size_t f = i; fold && f < t; f++)
			fold = hostcode_fill_folds(l.ops[f], l.ops[t]);
		for (size_t f = i; fold && f < t; f++)
			reg->folded_loops += mlirShapedTypeGetRank(mlirValueGetType(mlirOperationGetOperand(
				l.ops[f], mlirOperationGetNumOperands(l.ops[f]) - 1))) > 0;
		if (fold)
			g = l.ops[i = t];
		while (k < n_src && !mlirOperationEqual(src_op[k], g))
			k++;
		if (k < n_src) {
			snprintf(reg->name, sizeof reg->name, "%s", x->sources[k].name);
			snprintf(reg->op, sizeof reg->op, "%s", x->sources[k].op);
			snprintf(reg->location, sizeof reg->location, "%s", x->sources[k].location);
			snprintf(reg->node, sizeof reg->node, "%s", x->sources[k].node);
			reg->node_named = x->sources[k].node_named;
		} else
			region_from_origin(x, g, reg);
		if (!mlirx_op_is(g, "linalg.generic") && !mlirx_op_is(g, "linalg.map"))
			return extract_refuse(err, x, g, "unsupported operation: linalg-generalize-named-ops left it "
				      "as is, so it has no loop nest pim-extract can read");
		if ((r = insert_hooks(x, first, g, (int32_t)x->n_regions, err)) < 0)
			return r;
		x->n_regions++;
		if ((r = read_operands(x, entry, g, reg, err)) < 0)
			return r;
		for (MlirOperation f = first; fold && !mlirOperationEqual(f, g); f = mlirOperationGetNextInBlock(f))
			if (hostcode_is_init(f) && !hostcode_is_fill(f) &&
			    (r = read_init_input(x, entry, f, reg, err)) < 0)
				return r;
	}
	if (number_node_nests(x) < 0)
		return err_set(err, -ENOMEM, "out of memory");
	return 0;
}

/* ---------------------------------------------------------------- stage 4: loops */

static int loop_count(struct extract *x, MlirOperation loop, MlirValue lb, MlirValue ub, MlirValue step,
		      const char *which, uint64_t *count, struct pim_error *err)
{
	int64_t l, u, s;

	if (!mlirx_const_int(lb, &l))
		return extract_refuse(err, x, loop, "%slower bound is not a constant; pim-extract needs constant "
			      "loop bounds to count iterations", which);
	if (!mlirx_const_int(ub, &u))
		return extract_refuse(err, x, loop, "%supper bound is not a constant; pim-extract needs constant "
			      "loop bounds to count iterations", which);
	if (!mlirx_const_int(step, &s))
		return extract_refuse(err, x, loop, "%sstep is not a constant; pim-extract needs constant loop "
			      "bounds to count iterations", which);
	if (s <= 0)
		return extract_refuse(err, x, loop, "%sstep %" PRId64 " is not positive", which, s);
	if (u <= l)
		return extract_refuse(err, x, loop, "%sruns no iteration (%" PRId64 " to %" PRId64 "): the loop "
			      "nest inside never runs", which, l, u);
	*count = (uint64_t)((u - l) + s - 1) / (uint64_t)s;
	return 0;
}

/* Constant extents of an scf.parallel's dims. */
static int parallel_dims(struct extract *x, MlirOperation p, uint64_t *ext, size_t max, size_t *n,
			 struct pim_error *err)
{
	MlirAttribute seg = mlirOperationGetAttributeByName(p, mlirx_s("operandSegmentSizes"));
	int r;

	if (mlirAttributeIsNull(seg) || !mlirAttributeIsADenseI32Array(seg) ||
	    mlirDenseArrayGetNumElements(seg) < 3)
		return extract_refuse(err, x, p, "internal error: scf.parallel without operandSegmentSizes");
	intptr_t d = mlirDenseI32ArrayGetElement(seg, 0);
	if ((size_t)d > max)
		return extract_refuse(err, x, p, "%zd parallel dimensions, at most %zu supported", (ssize_t)d, max);
	for (intptr_t i = 0; i < d; i++) {
		char which[48];
		snprintf(which, sizeof which, "dimension %zd: ", (ssize_t)i);
		r = loop_count(x, p, mlirOperationGetOperand(p, i), mlirOperationGetOperand(p, d + i),
			       mlirOperationGetOperand(p, 2 * d + i), which, &ext[i], err);
		if (r < 0)
			return r;
	}
	*n = (size_t)d;
	return 0;
}

struct nest {
	struct extract_region *reg;
	size_t n_dims;
	bool par[EXTRACT_DIMS_MAX];
	uint64_t ext[EXTRACT_DIMS_MAX];
	struct pim_error *err;
};

static int nest_loop(struct extract *x, MlirOperation op, void *ud)
{
	struct nest *n = ud;
	uint64_t ext[EXTRACT_DIMS_MAX];
	size_t k = 0;
	int r;

	if (mlirx_op_is(op, "scf.parallel")) {
		if ((r = parallel_dims(x, op, ext, EXTRACT_DIMS_MAX, &k, n->err)) < 0)
			return r;
	} else if (mlirx_op_is(op, "scf.for")) {
		r = loop_count(x, op, mlirOperationGetOperand(op, 0), mlirOperationGetOperand(op, 1),
			       mlirOperationGetOperand(op, 2), "", &ext[0], n->err);
		if (r < 0)
			return r;
		k = 1;
	} else
		return 0;
	for (size_t i = 0; i < k; i++) {
		if (n->n_dims == EXTRACT_DIMS_MAX)
			return extract_refuse(n->err, x, op, "more than %d loops in one nest", EXTRACT_DIMS_MAX);
		n->par[n->n_dims] = mlirx_op_is(op, "scf.parallel");
		n->ext[n->n_dims++] = ext[i];
	}
	return 0;
}

/* Product of the trip counts of the loops around the nest, up to the entry function. */
static int enclosing_trip(struct extract *x, MlirOperation entry, MlirOperation enter,
			  struct extract_region *reg, struct pim_error *err)
{
	uint64_t trip = 1;
	int r;

	for (MlirOperation p = mlirOperationGetParentOperation(enter);
	     !mlirOperationIsNull(p) && !mlirOperationEqual(p, entry); p = mlirOperationGetParentOperation(p)) {
		uint64_t c = 1, ext[EXTRACT_DIMS_MAX];
		size_t k;
		if (mlirx_op_is(p, "scf.for")) {
			r = loop_count(x, p, mlirOperationGetOperand(p, 0), mlirOperationGetOperand(p, 1),
				       mlirOperationGetOperand(p, 2), "", &c, err);
			if (r < 0) {
				size_t l = strlen(err->msg);
				snprintf(err->msg + l, sizeof err->msg - l, " (the loop encloses %s at %s)",
					 reg->op, reg->location);
				return r;
			}
		} else if (mlirx_op_is(p, "scf.parallel")) {
			if ((r = parallel_dims(x, p, ext, EXTRACT_DIMS_MAX, &k, err)) < 0)
				return r;
			for (size_t i = 0; i < k; i++)
				c *= ext[i];
		} else
			return extract_refuse(err, x, p, "the loop nest of %s at %s runs under this op, whose number "
				      "of executions is not known at compile time; only scf.for and "
				      "scf.parallel with constant bounds may enclose a linalg op",
				      reg->op, reg->location);
		if (!mul_u64(trip, c, &trip) || trip > MANIFEST_ITERATIONS_MAX)
			return extract_refuse(err, x, p, "trip count of the enclosing loops overflows");
	}
	reg->trip = trip;
	return 0;
}

int read_loops(struct extract *x, struct pim_error *err)
{
	MlirOperation entry = extract_entry_op(x);
	_cleanup_(freep) MlirOperation *by_id = calloc(x->n_regions, sizeof *by_id);
	int r;

	if (!by_id)
		return err_set(err, -ENOMEM, "out of memory");
	if ((r = find_brackets(x, entry, by_id, x->n_regions, err)) < 0)
		return r;
	for (size_t i = 0; i < x->n_regions; i++) {
		struct extract_region *reg = &x->regions[i];
		struct nest n = { .reg = reg, .err = err };
		MlirOperation exit_ = bracket_exit(by_id[i], (int64_t)i);

		if (mlirOperationIsNull(exit_))
			return extract_refuse(err, x, by_id[i], "internal error: region %zu has no exit hook", i);
		if ((r = enclosing_trip(x, entry, by_id[i], reg, err)) < 0)
			return r;
		uint32_t skip = reg->folded_loops;
		for (MlirOperation op = mlirOperationGetNextInBlock(by_id[i]); !mlirOperationEqual(op, exit_);
		     op = mlirOperationGetNextInBlock(op)) {
			/* The loops of a fill folded into the nest come first (read_regions). */
			if (skip && (mlirx_op_is(op, "scf.parallel") || mlirx_op_is(op, "scf.for"))) {
				skip--;
				continue;
			}
			if ((r = nest_loop(x, op, &n)) < 0)
				return r;
			if ((r = walk_nested(x, op, nest_loop, &n)) < 0)
				return r;
		}
		/* convert-linalg-to-parallel-loops makes one loop dimension per iterator, in order:
		 * consecutive parallel dims share one scf.parallel, each reduction dim has its own
		 * scf.for (doc/mlir.md).  Anything else means the join went wrong. */
		if (n.n_dims != reg->n_dims)
			return err_set(err, -EINVAL, "%s: %s: internal error: %zu loops for %zu iterators",
				       reg->location, reg->op, n.n_dims, reg->n_dims);
		reg->n_par = reg->n_total = 1;
		for (size_t d = 0; d < n.n_dims; d++) {
			if (n.par[d] != reg->dim_parallel[d] ||
			    (reg->dim_extent[d] && reg->dim_extent[d] != n.ext[d]))
				return err_set(err, -EINVAL, "%s: %s: internal error: loop %zu (%s, %" PRIu64
					       ") does not match iterator %zu (%s, %" PRIu64 ")",
					       reg->location, reg->op, d, n.par[d] ? "parallel" : "sequential",
					       n.ext[d], d, reg->dim_parallel[d] ? "parallel" : "reduction",
					       reg->dim_extent[d]);
			uint64_t *e = n.par[d] ? reg->par_ext : reg->red_ext;
			size_t *ne = n.par[d] ? &reg->n_par_ext : &reg->n_red_ext;
			if (*ne == MANIFEST_EXTENTS_MAX)
				return err_set(err, -E2BIG, "%s: %s: more than %u %s dimensions", reg->location,
					       reg->op, MANIFEST_EXTENTS_MAX, n.par[d] ? "parallel" : "reduction");
			e[(*ne)++] = n.ext[d];
			if ((n.par[d] && !mul_u64(reg->n_par, n.ext[d], &reg->n_par)) ||
			    !mul_u64(reg->n_total, n.ext[d], &reg->n_total) ||
			    reg->n_total > MANIFEST_ITERATIONS_MAX)
				return err_set(err, -E2BIG, "%s: %s: iteration count overflows", reg->location,
					       reg->op);
		}
		/* A gathered buffer: the elements the nest loads, not the whole table. */
		for (size_t j = 0; j < reg->n_operands; j++) {
			struct extract_operand *o = &reg->operands[j];
			uint64_t b;
			if (o->gather_loads && mul_u64(reg->n_total, o->gather_loads, &b) &&
			    mul_u64(b, storage_bytes(o->elem_bits), &b) && b < o->bytes)
				o->bytes = b;
		}
	}
	return 0;
}
