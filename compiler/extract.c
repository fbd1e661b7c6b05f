/* SPDX-License-Identifier: MIT */
/*
 * extract.c: the extractor's driver (extract.h): reading and parsing the input, stage 0's
 * refusals, stage 1's entry function and rewrites, and the run of every stage.  Region
 * discovery is in extract_regions.c, operand and byte accounting in extract_operands.c, the
 * manifest in extract_manifest.c (extract_internal.h joins them).
 */
#include "extract_internal.h"

#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>

#define INPUT_MAX (256u * 1024u * 1024u)

/* Pipelines of stages 1, 3 and 4 (extract.h).  The inliner's default simplification pipeline is canonicalize, which folds linalg ops away
 * (an identity generic, a fill into a pad): the manifest must describe the source's nests. */
static const char PIPE_INLINE[] = "inline{default-pipeline=},symbol-dce";
/* doc/mlir.md pitfall 3: without both function-boundary options arguments keep to_memref
 * casts or strided layouts.  allow-return-allocs-from-loops: an scf.for that yields a fresh
 * tensor each iteration (a layer loop) is legal input.  Results become out-params (ARGUMENT
 * allocations the caller passes), a result computed in place in an argument is dropped (the
 * caller has it already): MLIR 19's buffer-results-to-out-params{hoist-static-allocs} crashes
 * on a returned block argument, so drop-equivalent-buffer-results must run first.
 * Generalization comes after bufferization so that the ops bufferization itself makes are
 * generalized too (but for linalg.map, tensor.pad's padding, which MLIR 19 leaves named:
 * read_operands knows it). */
static const char PIPE_BUFFERIZE[] =
	"one-shot-bufferize{bufferize-function-boundaries "
	"function-boundary-type-conversion=identity-layout-map allow-return-allocs-from-loops},"
	"linalg-generalize-named-ops,"
	"drop-equivalent-buffer-results,buffer-results-to-out-params{hoist-static-allocs}";
/* Deallocation keeps a model library that runs thousands of times from leaking every
 * intermediate; canonicalize/cse of the usual deallocation pipeline are left out so that no
 * linalg op is folded away between stage 3 and stage 4.  doc/mlir.md pitfall 2: linalg is
 * lowered only once it is on buffers. */
static const char PIPE_LOOPS[] =
	"ownership-based-buffer-deallocation,buffer-deallocation-simplification,"
	"bufferization-lower-deallocations,convert-linalg-to-parallel-loops";

/* ---------------------------------------------------------------- small helpers */

/* "LOC: OPNAME: message" -- every refusal names the op and where it is. */
int extract_refuse(struct pim_error *err, const struct extract *x, MlirOperation op,
		  const char *fmt, ...)
{
	char loc[256], name[128], msg[400];
	va_list ap;

	mlirx_loc_where(&x->mx, mlirOperationGetLocation(op), loc, sizeof loc);
	mlirx_op_name(op, name, sizeof name);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return err_set(err, -EINVAL, "%s: %s: %s", loc[0] ? loc : x->mx.input, name, msg);
}

/* Pre-order walk over the ops nested in root (root excluded).  fn returns <0 to stop, 1 to
 * skip the op's regions, 0 to go on.  The next op is fetched after fn, so fn may insert ops
 * after the current one only if it wants them visited. */
int walk_nested(struct extract *x, MlirOperation root, walk_fn fn, void *ud)
{
	intptr_t nr = mlirOperationGetNumRegions(root);

	for (intptr_t i = 0; i < nr; i++) {
		MlirRegion reg = mlirOperationGetRegion(root, i);
		for (MlirBlock b = mlirRegionGetFirstBlock(reg); !mlirBlockIsNull(b);
		     b = mlirBlockGetNextInRegion(b)) {
			for (MlirOperation op = mlirBlockGetFirstOperation(b); !mlirOperationIsNull(op);
			     op = mlirOperationGetNextInBlock(op)) {
				int r = fn(x, op, ud);
				if (r < 0)
					return r;
				if (r == 0 && (r = walk_nested(x, op, fn, ud)) < 0)
					return r;
			}
		}
	}
	return 0;
}

bool is_call_to(MlirOperation op, const char *callee)
{
	char s[64];
	return mlirx_op_is(op, "func.call") &&
	       mlirx_attr_str(mlirOperationGetAttributeByName(op, mlirx_s("callee")), s, sizeof s) &&
	       strcmp(s, callee) == 0;
}

/* Region id of a hook call (its operand is the i32 constant stage 2 made). */
int hook_id(MlirOperation call, int64_t *id)
{
	if (mlirOperationGetNumOperands(call) != 1 ||
	    !mlirx_const_int(mlirOperationGetOperand(call, 0), id))
		return -EINVAL;
	return 0;
}

static bool func_has_body(MlirOperation f)
{
	MlirRegion r = mlirOperationGetRegion(f, 0);
	return !mlirBlockIsNull(mlirRegionGetFirstBlock(r));
}

static bool func_is_private(MlirOperation f)
{
	char vis[32];
	return mlirx_attr_str(mlirOperationGetAttributeByName(f, mlirx_s("sym_visibility")), vis,
			      sizeof vis) &&
	       strcmp(vis, "public") != 0;
}

static void func_name(MlirOperation f, char *out, size_t n)
{
	if (!mlirx_attr_str(mlirOperationGetAttributeByName(f, mlirx_s("sym_name")), out, n))
		snprintf(out, n, "?");
}

MlirOperation extract_entry_op(const struct extract *x)
{
	MlirBlock body = mlirModuleGetBody(x->module);
	char name[MANIFEST_TEXT_MAX + 1];

	for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
	     op = mlirOperationGetNextInBlock(op)) {
		if (!mlirx_op_is(op, "func.func"))
			continue;
		func_name(op, name, sizeof name);
		if (strcmp(name, x->entry) == 0)
			return op;
	}
	return (MlirOperation){ NULL };
}

int extract_save_stage(const struct extract *x, const char *stage, struct pim_error *err)
{
	char path[4096];

	if (!x->save_temps)
		return 0;
	snprintf(path, sizeof path, "%s/%s.%s.mlir", x->save_temps, x->name, stage);
	return mlirx_write_module(x->module, path, err);
}

static int read_input(const char *path, char **text, size_t *len, struct pim_error *err)
{
	_cleanup_(freep) char *buf = NULL;
	int r = read_file(path, INPUT_MAX, &buf, len, err);

	if (r < 0)
		return r;
	if (strlen(buf) != *len)
		return err_set(err, -EINVAL, "%s: contains a NUL byte; pim-extract reads MLIR text", path);
	*text = TAKE_PTR(buf);
	return 0;
}

/* ---------------------------------------------------------------- stage 0: parse, refuse */

static bool ident_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.' || c == '$';
}

/* First torch-dialect op (torch.aten.mm) or type (!torch.vtensor) outside // comments.
 * doc/mlir.md pitfall 8: Torch types do not parse; the parser's own message talks about an
 * unregistered dialect, which does not tell the user what to do. */
static bool find_torch(const char *text, unsigned *line, unsigned *col, char *tok, size_t n)
{
	bool found_type = false;
	unsigned tline = 0, tcol = 0;
	char ttok[96] = "";
	unsigned ln = 1;

	for (const char *l = text; *l; ln++) {
		const char *end = strchr(l, '\n');
		size_t len = end ? (size_t)(end - l) : strlen(l);
		const char *cmt = NULL;
		for (size_t i = 0; i + 1 < len; i++)
			if (l[i] == '/' && l[i + 1] == '/') {
				cmt = l + i;
				break;
			}
		size_t lim = cmt ? (size_t)(cmt - l) : len;
		for (size_t i = 0; i + 6 <= lim; i++) {
			bool is_torch = (strncmp(l + i, "torch.", 6) == 0) ||
					(i + 8 <= lim && strncmp(l + i, "torch_c.", 8) == 0);
			if (!is_torch || (i > 0 && ident_char(l[i - 1])))
				continue;
			size_t k = i;
			while (k < lim && ident_char(l[k]))
				k++;
			bool type = i > 0 && l[i - 1] == '!';
			if (!type) {
				*line = ln;
				*col = (unsigned)i + 1;
				snprintf(tok, n, "%.*s", (int)(k - i), l + i);
				return true;
			}
			if (!found_type) {
				found_type = true;
				tline = ln;
				tcol = (unsigned)i;
				snprintf(ttok, sizeof ttok, "!%.*s", (int)(k - i), l + i);
			}
		}
		if (!end)
			break;
		l = end + 1;
	}
	if (found_type) {
		*line = tline;
		*col = tcol;
		snprintf(tok, n, "%s", ttok);
	}
	return found_type;
}

/* The text of line `line` (1-based), trimmed, for messages. */
static void source_line(const char *text, const char *loc, char *out, size_t n)
{
	const char *c = strrchr(loc, ':');
	out[0] = '\0';
	if (!c || c == loc)
		return;
	const char *p = c - 1;
	while (p > loc && *p >= '0' && *p <= '9')
		p--;
	if (*p != ':')
		return;
	unsigned long want = strtoul(p + 1, NULL, 10), ln = 1;
	const char *l = text;
	while (ln < want && (l = strchr(l, '\n')) != NULL) {
		l++;
		ln++;
	}
	if (!l || ln != want)
		return;
	while (*l == ' ' || *l == '\t')
		l++;
	size_t len = strcspn(l, "\n");
	snprintf(out, n, "%.*s%s", (int)(len > 100 ? 100 : len), l, len > 100 ? "..." : "");
}

static int parse_failed(struct extract *x, const char *text, struct pim_error *err)
{
	unsigned line, col;
	char tok[96], src[128];

	if (find_torch(text, &line, &col, tok, sizeof tok))
		return err_set(err, -EINVAL, "%s:%u:%u: %s: torch-dialect input is not supported; export "
			       "the PyTorch model to ONNX with torch.onnx.export and pass the .onnx "
			       "file instead",
			       x->mx.input, line, col, tok);
	if (!x->mx.diag.have)
		return err_set(err, -EINVAL, "%s: parse error (MLIR gave no diagnostic)", x->mx.input);
	source_line(text, x->mx.diag.loc, src, sizeof src);
	return err_set(err, -EINVAL, "%s: parse error: %s%s%s%s", x->mx.diag.loc, x->mx.diag.msg,
		       src[0] ? " (in \"" : "", src, src[0] ? "\")" : "");
}

/* Static, ranked, non-empty shapes of supported scalar elements only. */
static int check_type(struct extract *x, MlirOperation op, MlirType t, const char *what,
		      struct pim_error *err)
{
	char ts[128];

	if (mlirTypeIsAVector(t) || mlirTypeIsAComplex(t) || mlirTypeIsANone(t)) {
		mlirx_type_str(t, ts, sizeof ts);
		return extract_refuse(err, x, op, "%s has type %s, which pim-extract does not support", what, ts);
	}
	if (mlirTypeIsAUnrankedTensor(t) || mlirTypeIsAUnrankedMemRef(t)) {
		mlirx_type_str(t, ts, sizeof ts);
		return extract_refuse(err, x, op, "%s has the unranked type %s; pim-extract needs static shapes",
			      what, ts);
	}
	if (!mlirTypeIsAShaped(t))
		return 0;
	mlirx_type_str(t, ts, sizeof ts);
	if (!mlirShapedTypeHasStaticShape(t))
		return extract_refuse(err, x, op, "%s has the dynamic shape %s; pim-extract needs static shapes "
			      "(export the model with fixed input sizes)", what, ts);
	for (intptr_t d = 0; d < mlirShapedTypeGetRank(t); d++)
		if (mlirShapedTypeGetDimSize(t, d) == 0)
			return extract_refuse(err, x, op, "%s has the empty shape %s", what, ts);
	if (mlirTypeIsARankedTensor(t) && !mlirAttributeIsNull(mlirRankedTensorTypeGetEncoding(t)))
		return extract_refuse(err, x, op, "%s has the encoded (sparse) type %s, which is not supported",
			      what, ts);
	if (mlirx_elem_bits(mlirShapedTypeGetElementType(t)) == 0)
		return extract_refuse(err, x, op, "%s has type %s, whose element type is not supported", what, ts);
	return 0;
}

/* Dialects of Torch-MLIR's linalg-on-tensors output, plus what bufferization leaves. */
static bool op_accepted(MlirOperation op)
{
	static const char *const dialects[] = { "arith", "math", "linalg", "tensor", "memref",
						"bufferization" };
	static const char *const ops[] = { "builtin.module", "func.func", "func.return", "func.call",
					   "scf.for", "scf.yield", "scf.if", "scf.while",
					   "scf.condition", "cf.assert", "affine.apply", "affine.min",
					   "affine.max" };
	for (size_t i = 0; i < ELEMENTSOF(ops); i++)
		if (mlirx_op_is(op, ops[i]))
			return true;
	for (size_t i = 0; i < ELEMENTSOF(dialects); i++)
		if (mlirx_op_in_dialect(op, dialects[i]))
			return true;
	return false;
}

/* Linalg ops that are not structured (no loop nest of their own): refused, not guessed. */
static bool linalg_aggregate(MlirOperation op)
{
	char name[128];
	mlirx_op_name(op, name, sizeof name);
	return strcmp(name, "linalg.softmax") == 0 || strncmp(name, "linalg.winograd_", 16) == 0;
}

static int validate_op(struct extract *x, MlirOperation op, void *ud)
{
	struct pim_error *err = ud;
	char what[64];
	int r;

	if (!op_accepted(op))
		return extract_refuse(err, x, op, "unsupported operation; pim-extract takes linalg on tensors "
			      "(dialects arith, math, linalg, tensor, func, scf.for/if/while and, for "
			      "pre-bufferized input, memref and bufferization)");
	if (linalg_aggregate(op))
		return extract_refuse(err, x, op, "unsupported operation: not a structured linalg op with a "
			      "loop nest of its own; decompose it into linalg.generic ops first");
	for (intptr_t i = 0; i < mlirOperationGetNumResults(op); i++) {
		snprintf(what, sizeof what, "result #%zd", (ssize_t)i);
		if ((r = check_type(x, op, mlirValueGetType(mlirOperationGetResult(op, i)), what, err)) < 0)
			return r;
	}
	for (intptr_t ri = 0; ri < mlirOperationGetNumRegions(op); ri++)
		for (MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, ri));
		     !mlirBlockIsNull(b); b = mlirBlockGetNextInRegion(b))
			for (intptr_t a = 0; a < mlirBlockGetNumArguments(b); a++) {
				snprintf(what, sizeof what, "block argument #%zd", (ssize_t)a);
				r = check_type(x, op, mlirValueGetType(mlirBlockGetArgument(b, a)), what, err);
				if (r < 0)
					return r;
			}
	return 0;
}

/* ---------------------------------------------------------------- stage 1: entry function */

static int choose_entry(struct extract *x, const char *want, struct pim_error *err)
{
	MlirBlock body = mlirModuleGetBody(x->module);
	char name[MANIFEST_TEXT_MAX + 1], list[256] = "";
	size_t n_public = 0;

	for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
	     op = mlirOperationGetNextInBlock(op)) {
		if (!mlirx_op_is(op, "func.func") || !func_has_body(op))
			continue;
		func_name(op, name, sizeof name);
		if (want) {
			if (strcmp(name, want) == 0)
				snprintf(x->entry, sizeof x->entry, "%s", name);
			continue;
		}
		if (func_is_private(op))
			continue;
		if (n_public++ == 0)
			snprintf(x->entry, sizeof x->entry, "%s", name);
		size_t l = strlen(list);
		snprintf(list + l, sizeof list - l, "%s@%s", l ? ", " : "", name);
	}
	if (want && !x->entry[0])
		return err_set(err, -EINVAL, "%s: no function @%s with a body (--entry)", x->mx.input, want);
	if (!want && n_public == 0)
		return err_set(err, -EINVAL, "%s: no public function with a body: nothing to extract",
			       x->mx.input);
	if (!want && n_public > 1)
		return err_set(err, -EINVAL, "%s: several public functions (%s); choose the model's entry "
			       "with --entry", x->mx.input, list);

	/* Everything else is gone after inlining (or unused): drop it, so that only the entry is
	 * bufferized and lowered. */
	for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);) {
		MlirOperation next = mlirOperationGetNextInBlock(op);
		if (mlirx_op_is(op, "func.func")) {
			func_name(op, name, sizeof name);
			if (strcmp(name, x->entry) != 0)
				mlirOperationDestroy(op);
		}
		op = next;
	}
	return 0;
}

static int check_entry_op(struct extract *x, MlirOperation op, void *ud)
{
	struct pim_error *err = ud;
	char callee[128] = "?";

	if (mlirx_op_is(op, "func.call")) {
		mlirx_attr_str(mlirOperationGetAttributeByName(op, mlirx_s("callee")), callee,
			       sizeof callee);
		return extract_refuse(err, x, op, "call of @%s, which has no body to inline; pim-extract needs "
			      "the whole model in one module", callee);
	}
	if (mlirx_op_is(op, "func.func")) {
		MlirType ft = mlirTypeAttrGetValue(mlirOperationGetAttributeByName(op,
										   mlirx_s("function_type")));
		for (intptr_t i = 0; i < mlirFunctionTypeGetNumInputs(ft); i++)
			if (!mlirTypeIsAShaped(mlirFunctionTypeGetInput(ft, i)))
				return extract_refuse(err, x, op, "argument #%zd of the entry function is not a "
					      "tensor; a model library passes every argument as a buffer",
					      (ssize_t)i);
		for (intptr_t i = 0; i < mlirFunctionTypeGetNumResults(ft); i++)
			if (!mlirTypeIsAShaped(mlirFunctionTypeGetResult(ft, i)))
				return extract_refuse(err, x, op, "result #%zd of the entry function is not a "
					      "tensor; a model library returns every result in a buffer",
					      (ssize_t)i);
	}
	return 0;
}

/* ---------------------------------------------------------------- stage 1: rewrites */

uint64_t storage_bytes(unsigned bits)
{
	return (bits + 7) / 8;
}

/*
 * tensor.concat does not bufferize in MLIR 19 ("op was not bufferized"): each one becomes a
 * tensor.empty of the result and one tensor.insert_slice per operand at its offset along the
 * concatenated dimension, which bufferize into copies (data movement, no loop nest).  Shapes
 * are static here (stage 0).
 */
static int lower_concat(struct extract *x, MlirOperation op, struct pim_error *err)
{
	MlirContext ctx = x->mx.ctx;
	MlirLocation loc = mlirOperationGetLocation(op);
	MlirBlock blk = mlirOperationGetBlock(op);
	MlirValue res = mlirOperationGetResult(op, 0);
	MlirType rt = mlirValueGetType(res);
	MlirAttribute dim_attr = mlirOperationGetAttributeByName(op, mlirx_s("dim"));
	intptr_t rank = mlirShapedTypeGetRank(rt);
	int64_t offsets[EXTRACT_DIMS_MAX] = { 0 }, sizes[EXTRACT_DIMS_MAX], strides[EXTRACT_DIMS_MAX];

	if (mlirAttributeIsNull(dim_attr) || !mlirAttributeIsAInteger(dim_attr) || rank > EXTRACT_DIMS_MAX)
		return extract_refuse(err, x, op, "cannot lower it: no integer dim attribute or rank above %d",
			      EXTRACT_DIMS_MAX);
	int64_t dim = mlirIntegerAttrGetValueInt(dim_attr);
	if (dim < 0 || dim >= rank)
		return extract_refuse(err, x, op, "dim %" PRId64 " is outside the rank %zd", dim, (ssize_t)rank);
	for (intptr_t d = 0; d < rank; d++)
		strides[d] = 1;

	MlirOperationState st = mlirOperationStateGet(mlirx_s("tensor.empty"), loc);
	mlirOperationStateAddResults(&st, 1, &rt);
	MlirOperation empty = mlirOperationCreate(&st);
	if (mlirOperationIsNull(empty))
		return err_set(err, -EINVAL, "internal error: cannot build tensor.empty");
	mlirBlockInsertOwnedOperationBefore(blk, op, empty);
	MlirValue dest = mlirOperationGetResult(empty, 0);
	for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); i++) {
		MlirValue src = mlirOperationGetOperand(op, i);
		MlirType t = mlirValueGetType(src);
		for (intptr_t d = 0; d < rank; d++)
			sizes[d] = mlirShapedTypeGetDimSize(t, d);
		MlirValue opnds[2] = { src, dest };
		const int32_t seg[5] = { 1, 1, 0, 0, 0 };
		MlirNamedAttribute attrs[4] = {
			mlirNamedAttributeGet(mlirIdentifierGet(ctx, mlirx_s("static_offsets")),
					      mlirDenseI64ArrayGet(ctx, rank, offsets)),
			mlirNamedAttributeGet(mlirIdentifierGet(ctx, mlirx_s("static_sizes")),
					      mlirDenseI64ArrayGet(ctx, rank, sizes)),
			mlirNamedAttributeGet(mlirIdentifierGet(ctx, mlirx_s("static_strides")),
					      mlirDenseI64ArrayGet(ctx, rank, strides)),
			mlirNamedAttributeGet(mlirIdentifierGet(ctx, mlirx_s("operandSegmentSizes")),
					      mlirDenseI32ArrayGet(ctx, 5, seg)),
		};
		st = mlirOperationStateGet(mlirx_s("tensor.insert_slice"), loc);
		mlirOperationStateAddOperands(&st, 2, opnds);
		mlirOperationStateAddAttributes(&st, 4, attrs);
		mlirOperationStateAddResults(&st, 1, &rt);
		MlirOperation ins = mlirOperationCreate(&st);
		if (mlirOperationIsNull(ins))
			return err_set(err, -EINVAL, "internal error: cannot build tensor.insert_slice");
		mlirBlockInsertOwnedOperationBefore(blk, op, ins);
		dest = mlirOperationGetResult(ins, 0);
		offsets[dim] += sizes[dim];
	}
	if (offsets[dim] != mlirShapedTypeGetDimSize(rt, dim))
		return extract_refuse(err, x, op, "the operands' sizes along dim %" PRId64 " do not add up to the "
			      "result's", dim);
	mlirValueReplaceAllUsesOfWith(res, dest);
	return 0; /* op has no use left: the caller destroys it */
}

static int collect_concat(struct extract *x, MlirOperation op, void *ud)
{
	struct mlirx_ops *l = ud;

	if (!mlirx_op_is(op, "tensor.concat"))
		return 0;
	if (mlirx_ops_add(l, op) < 0)
		return -ENOMEM;
	return 1;
}

/*
 * A function returning one tensor twice makes MLIR 19's buffer-results-to-out-params crash.
 * Every repeated result gets a copy of its own (bufferization.alloc_tensor copy(...): an
 * allocation and a memref.copy, no loop nest), so each result keeps its out-param.
 */
static int distinct_results(struct extract *x, MlirOperation entry, struct pim_error *err)
{
	MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(entry, 0));
	MlirOperation ret = mlirBlockGetTerminator(body);

	if (mlirOperationIsNull(ret) || !mlirx_op_is(ret, "func.return"))
		return 0;
	for (intptr_t j = 1; j < mlirOperationGetNumOperands(ret); j++) {
		MlirValue v = mlirOperationGetOperand(ret, j);
		bool dup = false;
		for (intptr_t i = 0; i < j && !dup; i++)
			dup = mlirValueEqual(mlirOperationGetOperand(ret, i), v);
		if (!dup)
			continue;
		MlirType t = mlirValueGetType(v);
		const int32_t seg[3] = { 0, 1, 0 };
		MlirNamedAttribute a = mlirNamedAttributeGet(
			mlirIdentifierGet(x->mx.ctx, mlirx_s("operandSegmentSizes")),
			mlirDenseI32ArrayGet(x->mx.ctx, 3, seg));
		MlirOperationState st = mlirOperationStateGet(mlirx_s("bufferization.alloc_tensor"),
							      mlirOperationGetLocation(ret));
		mlirOperationStateAddOperands(&st, 1, &v);
		mlirOperationStateAddAttributes(&st, 1, &a);
		mlirOperationStateAddResults(&st, 1, &t);
		MlirOperation copy = mlirOperationCreate(&st);
		if (mlirOperationIsNull(copy))
			return err_set(err, -EINVAL, "internal error: cannot build bufferization.alloc_tensor");
		mlirBlockInsertOwnedOperationBefore(body, ret, copy);
		mlirOperationSetOperand(ret, j, mlirOperationGetResult(copy, 0));
	}
	return 0;
}

/*
 * --weights zero: a tensor constant of at least EXTRACT_WEIGHTS_ZERO_MIN bytes becomes
 *   memref.global @pim_weights_zero_K : memref<...> = dense<0>  (public, not constant)
 *   bufferization.to_tensor (memref.get_global @pim_weights_zero_K) restrict
 * A public, writable global with a zero initializer lands in .bss: the library does not carry
 * the weights, and LLVM can neither fold its loads to zeros nor drop them (another translation
 * unit, the wrapper, writes it: model.c zeroes every such global when the library is loaded,
 * which also gives each page a frame of its own instead of the shared zero page).  to_tensor
 * without `writable` is read-only to bufferization, as the constant was.
 */
static int zero_weights(struct extract *x, MlirOperation op, void *ud)
{
	struct pim_error *err = ud;
	char ts[256], text[512], elem[64];

	if (!mlirx_op_is(op, "arith.constant") || mlirOperationGetNumResults(op) != 1)
		return 0;
	MlirValue res = mlirOperationGetResult(op, 0);
	MlirType t = mlirValueGetType(res);
	if (!mlirTypeIsARankedTensor(t) || !mlirShapedTypeHasStaticShape(t))
		return 0;
	MlirType et = mlirShapedTypeGetElementType(t);
	uint64_t bytes = storage_bytes(mlirx_elem_bits(et));
	intptr_t rank = mlirShapedTypeGetRank(t);
	int64_t shape[EXTRACT_DIMS_MAX];
	if (rank > EXTRACT_DIMS_MAX)
		return 0;
	for (intptr_t d = 0; d < rank; d++) {
		shape[d] = mlirShapedTypeGetDimSize(t, d);
		if (!mul_u64(bytes, (uint64_t)shape[d], &bytes))
			return extract_refuse(err, x, op, "constant too large");
	}
	if (bytes < EXTRACT_WEIGHTS_ZERO_MIN)
		return 0;
	if (x->n_zeros >= MANIFEST_REGIONS_MAX)
		return extract_refuse(err, x, op, "more than %u constants to zero", MANIFEST_REGIONS_MAX);
	struct extract_zero *z = realloc(x->zeros, (x->n_zeros + 1) * sizeof *z);
	if (!z)
		return err_set(err, -ENOMEM, "out of memory");
	x->zeros = z;
	z = &x->zeros[x->n_zeros];
	snprintf(z->global, sizeof z->global, EXTRACT_WEIGHTS_ZERO_PREFIX "%zu", x->n_zeros);
	z->bytes = bytes;

	MlirType mt = mlirMemRefTypeContiguousGet(et, rank, shape, mlirAttributeGetNull());
	mlirx_type_str(mt, ts, sizeof ts);
	mlirx_type_str(et, elem, sizeof elem);
	snprintf(text, sizeof text, "memref.global @%s : %s = dense<%s> {alignment = 64 : i64}", z->global,
		 ts, mlirTypeIsAFloat(et) ? "0.0" : "0");
	MlirOperation g = mlirOperationCreateParse(x->mx.ctx, mlirx_s(text), mlirx_s("pim-extract"));
	if (mlirOperationIsNull(g))
		return extract_refuse(err, x, op, "cannot zero this constant of type %s (element %s)", ts, elem);
	mlirBlockInsertOwnedOperation(mlirModuleGetBody(x->module), 0, g);

	MlirContext ctx = x->mx.ctx;
	MlirLocation loc = mlirOperationGetLocation(op);
	MlirBlock blk = mlirOperationGetBlock(op);
	MlirNamedAttribute sym = mlirNamedAttributeGet(mlirIdentifierGet(ctx, mlirx_s("name")),
						       mlirFlatSymbolRefAttrGet(ctx, mlirx_s(z->global)));
	MlirOperationState st = mlirOperationStateGet(mlirx_s("memref.get_global"), loc);
	mlirOperationStateAddResults(&st, 1, &mt);
	mlirOperationStateAddAttributes(&st, 1, &sym);
	MlirOperation get = mlirOperationCreate(&st);
	if (mlirOperationIsNull(get))
		return err_set(err, -EINVAL, "internal error: cannot build memref.get_global");
	mlirBlockInsertOwnedOperationBefore(blk, op, get);
	MlirValue m = mlirOperationGetResult(get, 0);
	MlirNamedAttribute restrict_ = mlirNamedAttributeGet(mlirIdentifierGet(ctx, mlirx_s("restrict")),
							     mlirUnitAttrGet(ctx));
	st = mlirOperationStateGet(mlirx_s("bufferization.to_tensor"), loc);
	mlirOperationStateAddOperands(&st, 1, &m);
	mlirOperationStateAddResults(&st, 1, &t);
	mlirOperationStateAddAttributes(&st, 1, &restrict_);
	MlirOperation tt = mlirOperationCreate(&st);
	if (mlirOperationIsNull(tt))
		return err_set(err, -EINVAL, "internal error: cannot build bufferization.to_tensor");
	mlirBlockInsertOwnedOperationBefore(blk, op, tt);
	mlirValueReplaceAllUsesOfWith(res, mlirOperationGetResult(tt, 0));
	x->n_zeros++;
	x->zero_bytes += bytes;
	return 0;
}

static int collect_constants(struct extract *x, MlirOperation op, void *ud)
{
	struct mlirx_ops *l = ud;

	if (!mlirx_op_is(op, "arith.constant"))
		return 0;
	if (mlirx_ops_add(l, op) < 0)
		return -ENOMEM;
	return 0;
}

/* --weights zero over the entry function (zero_weights). */
static int zero_all_weights(struct extract *x, MlirOperation entry, struct pim_error *err)
{
	struct mlirx_ops l = { 0 };
	int r = walk_nested(x, entry, collect_constants, &l);

	if (r < 0) {
		free(l.ops);
		return err_set(err, r, "out of memory");
	}
	for (size_t i = 0; i < l.n && r >= 0; i++) {
		size_t before = x->n_zeros;
		if ((r = zero_weights(x, l.ops[i], err)) >= 0 && x->n_zeros > before)
			mlirOperationDestroy(l.ops[i]);
	}
	free(l.ops);
	return r < 0 ? r : 0;
}

/* Stage 1, after inlining: what MLIR 19 cannot bufferize is rewritten into what it can. */
static int rewrite_for_bufferization(struct extract *x, struct pim_error *err)
{
	MlirOperation entry = extract_entry_op(x);
	struct mlirx_ops l = { 0 };
	int r = walk_nested(x, entry, collect_concat, &l);

	if (r < 0) {
		free(l.ops);
		return err_set(err, r, "out of memory");
	}
	for (size_t i = 0; i < l.n && r >= 0; i++)
		if ((r = lower_concat(x, l.ops[i], err)) >= 0)
			mlirOperationDestroy(l.ops[i]);
	free(l.ops);
	if (r < 0)
		return r;
	if (x->weights_zero && (r = zero_all_weights(x, entry, err)) < 0)
		return r;
	return distinct_results(x, entry, err);
}

/* ---------------------------------------------------------------- driver */

static int model_name_from(const char *input, const char *name, char *out, size_t n,
			   struct pim_error *err)
{
	if (name)
		snprintf(out, n, "%s", name);
	else {
		const char *b = strrchr(input, '/');
		b = b ? b + 1 : input;
		size_t len = strlen(b);
		if (len > 5 && strcmp(b + len - 5, ".mlir") == 0)
			len -= 5;
		snprintf(out, n, "%.*s", (int)len, b);
	}
	if (!manifest_name_valid(out))
		return err_set(err, -EINVAL, "model name \"%.64s\" is not valid (1-%d characters of A-Z a-z "
			       "0-9 . _ -, not starting with . or -); give one with --name", out,
			       MANIFEST_NAME_MAX);
	return 0;
}

static int allocation_names(struct extract *x)
{
	size_t k = 0;

	for (size_t i = 0; i < x->n_allocs; i++) {
		struct extract_alloc *a = &x->allocs[i];
		if (a->kind == PIM__ALLOC_KIND__ALLOC_KIND_ARGUMENT)
			snprintf(a->name, sizeof a->name, "%%arg%zu", i);
		else if (a->kind == PIM__ALLOC_KIND__ALLOC_KIND_GLOBAL)
			snprintf(a->name, sizeof a->name, "@%s", a->global);
		else
			snprintf(a->name, sizeof a->name, "%%alloc%zu", k++);
	}
	return 0;
}

int extract_run(const struct extract_options *o, struct extract **out, struct pim_error *err)
{
	_cleanup_(freep) char *text = NULL;
	struct extract *x = calloc(1, sizeof *x);
	size_t len = 0;
	int r;

	if (!x)
		return err_set(err, -ENOMEM, "out of memory");
	x->save_temps = o->save_temps;
	x->weights_zero = o->weights_zero;
	if (!o->target || !strcmp(o->target, "native"))
		snprintf(x->target, sizeof x->target, "%s", cpulevel_native());
	else if (cpulevel_valid(o->target))
		snprintf(x->target, sizeof x->target, "%s", o->target);
	else {
		r = err_set(err, -EINVAL, "target \"%.32s\" is not native, x86-64, x86-64-v2, x86-64-v3 "
			    "or x86-64-v4", o->target);
		goto fail;
	}
	snprintf(x->source, sizeof x->source, "%s", o->input);
	if ((r = model_name_from(o->input, o->name, x->name, sizeof x->name, err)) < 0)
		goto fail;
	if ((r = read_input(o->input, &text, &len, err)) < 0)
		goto fail;
	if ((r = mlirx_init(&x->mx, o->input, err)) < 0)
		goto fail;

	/* Stage 0. */
	mlirx_diag_clear(&x->mx);
	x->module = mlirModuleCreateParse(x->mx.ctx, (MlirStringRef){ text, len });
	if (mlirModuleIsNull(x->module)) {
		r = parse_failed(x, text, err);
		goto fail;
	}
	if ((r = walk_nested(x, mlirModuleGetOperation(x->module), validate_op, err)) < 0)
		goto fail;
	if ((r = extract_save_stage(x, "0-input", err)) < 0)
		goto fail;

	/* Stage 1. */
	if ((r = mlirx_run_passes(&x->mx, x->module, "inlining", PIPE_INLINE, err)) < 0)
		goto fail;
	if ((r = choose_entry(x, o->entry, err)) < 0)
		goto fail;
	MlirOperation entry = extract_entry_op(x);
	if ((r = check_entry_op(x, entry, err)) < 0 || (r = walk_nested(x, entry, check_entry_op, err)) < 0)
		goto fail;
	if ((r = rewrite_for_bufferization(x, err)) < 0)
		goto fail;
	/* The nests a performance-minded compiler makes (hostcode.h): after the weights became
	 * globals, so no weight is folded into a payload as a constant. */
	if (o->fuse && (r = hostcode_fuse(x, err)) < 0)
		goto fail;

	/* Stage 2. */
	if ((r = instrument(x, err)) < 0)
		goto fail;
	if ((r = extract_save_stage(x, "1-instrumented", err)) < 0)
		goto fail;

	/* Stage 3. */
	if ((r = mlirx_run_passes(&x->mx, x->module, "bufferization", PIPE_BUFFERIZE, err)) < 0)
		goto fail;
	if ((r = hostcode_order_loops(x, err)) < 0)
		goto fail;
	if ((r = read_regions(x, err)) < 0)
		goto fail;
	if ((r = extract_save_stage(x, "2-bufferized", err)) < 0)
		goto fail;

	/* Stage 4. */
	if ((r = mlirx_run_passes(&x->mx, x->module, "lowering to loops", PIPE_LOOPS, err)) < 0)
		goto fail;
	if ((r = extract_save_stage(x, "3-loops", err)) < 0)
		goto fail;
	if ((r = read_loops(x, err)) < 0)
		goto fail;
	allocation_names(x);
	*out = x;
	return 0;
fail:
	extract_free(x);
	return r;
}

void extract_free(struct extract *x)
{
	if (!x)
		return;
	for (size_t i = 0; i < x->n_regions; i++)
		free(x->regions[i].operands);
	free(x->regions);
	free(x->sources);
	free(x->origins);
	free(x->allocs);
	free(x->zeros);
	for (size_t i = 0; i < x->n_args; i++)
		free(x->args[i].shape);
	free(x->args);
	if (!mlirModuleIsNull(x->module))
		mlirModuleDestroy(x->module);
	mlirx_done(&x->mx);
	free(x);
}
