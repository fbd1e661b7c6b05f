/* SPDX-License-Identifier: MIT */
#include "extract.h"
#include "cpulevel.h"
#include "hostcode.h"

#include <mlir-c/AffineExpr.h>
#include <mlir-c/AffineMap.h>
#include <mlir-c/BuiltinAttributes.h>
#include <mlir-c/BuiltinTypes.h>

#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>

#define HOOK_ENTER "pim_region_enter"
#define HOOK_EXIT "pim_region_exit"
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

static int refuse(struct pim_error *err, const struct extract *x, MlirOperation op,
		  const char *fmt, ...) _printf_(4, 5);

/* "LOC: OPNAME: message" -- every refusal names the op and where it is. */
static int refuse(struct pim_error *err, const struct extract *x, MlirOperation op,
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

typedef int (*walk_fn)(struct extract *x, MlirOperation op, void *ud);

/* Pre-order walk over the ops nested in root (root excluded).  fn returns <0 to stop, 1 to
 * skip the op's regions, 0 to go on.  The next op is fetched after fn, so fn may insert ops
 * after the current one only if it wants them visited. */
static int walk_nested(struct extract *x, MlirOperation root, walk_fn fn, void *ud)
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

static bool is_call_to(MlirOperation op, const char *callee)
{
	char s[64];
	return mlirx_op_is(op, "func.call") &&
	       mlirx_attr_str(mlirOperationGetAttributeByName(op, mlirx_s("callee")), s, sizeof s) &&
	       strcmp(s, callee) == 0;
}

/* Region id of a hook call (its operand is the i32 constant stage 2 made). */
static int hook_id(MlirOperation call, int64_t *id)
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
		return refuse(err, x, op, "%s has type %s, which pim-extract does not support", what, ts);
	}
	if (mlirTypeIsAUnrankedTensor(t) || mlirTypeIsAUnrankedMemRef(t)) {
		mlirx_type_str(t, ts, sizeof ts);
		return refuse(err, x, op, "%s has the unranked type %s; pim-extract needs static shapes",
			      what, ts);
	}
	if (!mlirTypeIsAShaped(t))
		return 0;
	mlirx_type_str(t, ts, sizeof ts);
	if (!mlirShapedTypeHasStaticShape(t))
		return refuse(err, x, op, "%s has the dynamic shape %s; pim-extract needs static shapes "
			      "(export the model with fixed input sizes)", what, ts);
	for (intptr_t d = 0; d < mlirShapedTypeGetRank(t); d++)
		if (mlirShapedTypeGetDimSize(t, d) == 0)
			return refuse(err, x, op, "%s has the empty shape %s", what, ts);
	if (mlirTypeIsARankedTensor(t) && !mlirAttributeIsNull(mlirRankedTensorTypeGetEncoding(t)))
		return refuse(err, x, op, "%s has the encoded (sparse) type %s, which is not supported",
			      what, ts);
	if (mlirx_elem_bits(mlirShapedTypeGetElementType(t)) == 0)
		return refuse(err, x, op, "%s has type %s, whose element type is not supported", what, ts);
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
		return refuse(err, x, op, "unsupported operation; pim-extract takes linalg on tensors "
			      "(dialects arith, math, linalg, tensor, func, scf.for/if/while and, for "
			      "pre-bufferized input, memref and bufferization)");
	if (linalg_aggregate(op))
		return refuse(err, x, op, "unsupported operation: not a structured linalg op with a "
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
		return refuse(err, x, op, "call of @%s, which has no body to inline; pim-extract needs "
			      "the whole model in one module", callee);
	}
	if (mlirx_op_is(op, "func.func")) {
		MlirType ft = mlirTypeAttrGetValue(mlirOperationGetAttributeByName(op,
										   mlirx_s("function_type")));
		for (intptr_t i = 0; i < mlirFunctionTypeGetNumInputs(ft); i++)
			if (!mlirTypeIsAShaped(mlirFunctionTypeGetInput(ft, i)))
				return refuse(err, x, op, "argument #%zd of the entry function is not a "
					      "tensor; a model library passes every argument as a buffer",
					      (ssize_t)i);
		for (intptr_t i = 0; i < mlirFunctionTypeGetNumResults(ft); i++)
			if (!mlirTypeIsAShaped(mlirFunctionTypeGetResult(ft, i)))
				return refuse(err, x, op, "result #%zd of the entry function is not a "
					      "tensor; a model library returns every result in a buffer",
					      (ssize_t)i);
	}
	return 0;
}

/* ---------------------------------------------------------------- stage 1: rewrites */

static uint64_t storage_bytes(unsigned bits)
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
		return refuse(err, x, op, "cannot lower it: no integer dim attribute or rank above %d",
			      EXTRACT_DIMS_MAX);
	int64_t dim = mlirIntegerAttrGetValueInt(dim_attr);
	if (dim < 0 || dim >= rank)
		return refuse(err, x, op, "dim %" PRId64 " is outside the rank %zd", dim, (ssize_t)rank);
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
		return refuse(err, x, op, "the operands' sizes along dim %" PRId64 " do not add up to the "
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
			return refuse(err, x, op, "constant too large");
	}
	if (bytes < EXTRACT_WEIGHTS_ZERO_MIN)
		return 0;
	if (x->n_zeros >= MANIFEST_REGIONS_MAX)
		return refuse(err, x, op, "more than %u constants to zero", MANIFEST_REGIONS_MAX);
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
		return refuse(err, x, op, "cannot zero this constant of type %s (element %s)", ts, elem);
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
static int instrument(struct extract *x, struct pim_error *err)
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
			return refuse(err, x, user, "operand #%zd is a block argument of %s; pim-extract "
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
				return refuse(err, x, d, "allocation without a static size");
			if (add_alloc(x, PIM__ALLOC_KIND__ALLOC_KIND_ALLOC, bytes, d.ptr, NULL, id) < 0)
				return err_set(err, -ENOMEM, "out of memory");
			return 0;
		}
		if (mlirx_op_is(d, "memref.get_global")) {
			if (!mlirx_attr_str(mlirOperationGetAttributeByName(d, mlirx_s("name")), name, sizeof name))
				return refuse(err, x, d, "memref.get_global without a symbol");
			for (size_t i = 0; i < x->n_allocs; i++)
				if (x->allocs[i].kind == PIM__ALLOC_KIND__ALLOC_KIND_GLOBAL &&
				    strcmp(x->allocs[i].global, name) == 0) {
					*id = (uint32_t)i;
					return 0;
				}
			uint64_t bytes = memref_bytes(mlirValueGetType(v));
			if (!bytes)
				return refuse(err, x, d, "global without a static size");
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
		return refuse(err, x, user, "operand #%zd comes from %s, which pim-extract cannot trace to "
			      "an allocation (function argument, memref.alloc or memref.global)",
			      (ssize_t)opnd, name);
	}
	return refuse(err, x, user, "operand #%zd: cannot trace it to an allocation", (ssize_t)opnd);
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
		return refuse(err, x, g, "internal error: generalized op without iterator_types or "
			      "indexing_maps (doc/mlir.md pitfall 4)");
	intptr_t n = mlirArrayAttrGetNumElements(it);
	if (n > EXTRACT_DIMS_MAX)
		return refuse(err, x, g, "%zd loop dimensions, at most %d supported", (ssize_t)n,
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
			return refuse(err, x, ops[i], "reads a buffer without a static size");
		if ((r = resolve_alloc(x, entry, ops[i], 0, v, &p->alloc, err)) < 0)
			return r;
		reg->n_operands++;
	}
	return 0;
}

static int read_operands(struct extract *x, MlirOperation entry, MlirOperation g,
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
			return refuse(err, x, g, "internal error: payload arguments do not match the operands");
	} else {
		if (mlirAttributeIsNull(seg) || !mlirAttributeIsADenseI32Array(seg) ||
		    mlirDenseArrayGetNumElements(seg) != 2)
			return refuse(err, x, g, "internal error: no operandSegmentSizes on a linalg.generic");
		n_ins = mlirDenseI32ArrayGetElement(seg, 0);
		if (mlirBlockIsNull(body) || mlirBlockGetNumArguments(body) != nops)
			return refuse(err, x, g, "internal error: payload arguments do not match the operands");
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
			return refuse(err, x, g, "operand #%zd is not a buffer after bufferization", (ssize_t)i);
		struct extract_operand *o = &reg->operands[reg->n_operands];
		MlirType et = mlirShapedTypeGetElementType(t);
		o->elem_bits = mlirx_elem_bits(et);
		mlirx_type_str(et, o->elem_type, sizeof o->elem_type);
		o->bytes = memref_bytes(t);
		if (!o->bytes)
			return refuse(err, x, g, "operand #%zd has no static size", (ssize_t)i);
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
		return refuse(err, x, g, "no buffer operand");
	if (map) {
		/* Every dimension of the init is a parallel loop. */
		MlirType t = mlirValueGetType(mlirOperationGetOperand(g, nops - 1));
		intptr_t rank = mlirShapedTypeGetRank(t);
		if (rank > EXTRACT_DIMS_MAX)
			return refuse(err, x, g, "%zd loop dimensions, at most %d supported", (ssize_t)rank,
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
static int read_init_input(struct extract *x, MlirOperation entry, MlirOperation init,
			   struct extract_region *reg, struct pim_error *err)
{
	MlirValue v = mlirOperationGetOperand(init, 0);
	MlirType t = mlirValueGetType(v);

	if (!mlirTypeIsAShaped(t))
		return 0;
	if (!mlirTypeIsAMemRef(t) || !memref_bytes(t))
		return refuse(err, x, init, "the input of an accumulator's init is not a static buffer");
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

static int read_arguments(struct extract *x, MlirOperation entry, struct pim_error *err)
{
	MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(entry, 0));
	MlirType ft = mlirTypeAttrGetValue(mlirOperationGetAttributeByName(entry, mlirx_s("function_type")));
	intptr_t n = mlirBlockGetNumArguments(b);

	if (mlirFunctionTypeGetNumResults(ft) != 0)
		return refuse(err, x, entry, "internal error: results left after buffer-results-to-out-params");
	x->args = calloc(n ? (size_t)n : 1, sizeof *x->args);
	if (!x->args)
		return err_set(err, -ENOMEM, "out of memory");
	for (intptr_t i = 0; i < n; i++) {
		MlirType t = mlirValueGetType(mlirBlockGetArgument(b, i));
		uint64_t bytes = memref_bytes(t);
		uint32_t id;
		if (!bytes)
			return refuse(err, x, entry, "argument #%zd is not a static buffer after bufferization",
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
			r = refuse(err, x, h.ops[i], "internal error: region hook lost or duplicated by a pass");
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
static int read_regions(struct extract *x, struct pim_error *err)
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
			return refuse(err, x, enter, "internal error: region %zu has no exit hook", k);
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
			return refuse(err, x, g, "unsupported operation: linalg-generalize-named-ops left it "
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
		return refuse(err, x, loop, "%slower bound is not a constant; pim-extract needs constant "
			      "loop bounds to count iterations", which);
	if (!mlirx_const_int(ub, &u))
		return refuse(err, x, loop, "%supper bound is not a constant; pim-extract needs constant "
			      "loop bounds to count iterations", which);
	if (!mlirx_const_int(step, &s))
		return refuse(err, x, loop, "%sstep is not a constant; pim-extract needs constant loop "
			      "bounds to count iterations", which);
	if (s <= 0)
		return refuse(err, x, loop, "%sstep %" PRId64 " is not positive", which, s);
	if (u <= l)
		return refuse(err, x, loop, "%sruns no iteration (%" PRId64 " to %" PRId64 "): the loop "
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
		return refuse(err, x, p, "internal error: scf.parallel without operandSegmentSizes");
	intptr_t d = mlirDenseI32ArrayGetElement(seg, 0);
	if ((size_t)d > max)
		return refuse(err, x, p, "%zd parallel dimensions, at most %zu supported", (ssize_t)d, max);
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
			return refuse(n->err, x, op, "more than %d loops in one nest", EXTRACT_DIMS_MAX);
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
			return refuse(err, x, p, "the loop nest of %s at %s runs under this op, whose number "
				      "of executions is not known at compile time; only scf.for and "
				      "scf.parallel with constant bounds may enclose a linalg op",
				      reg->op, reg->location);
		if (!mul_u64(trip, c, &trip) || trip > MANIFEST_ITERATIONS_MAX)
			return refuse(err, x, p, "trip count of the enclosing loops overflows");
	}
	reg->trip = trip;
	return 0;
}

static int read_loops(struct extract *x, struct pim_error *err)
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
			return refuse(err, x, by_id[i], "internal error: region %zu has no exit hook", i);
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

/* ---------------------------------------------------------------- manifest */

static void manifest_freep(Pim__Manifest **m)
{
	if (*m)
		pim__manifest__free_unpacked(*m, NULL);
}

static char *dup_str(const char *s)
{
	return strdup(s ? s : "");
}

int extract_manifest(const struct extract *x, Pim__Manifest **out, struct pim_error *err)
{
	_cleanup_(manifest_freep) Pim__Manifest *m = malloc(sizeof *m);
	int r;

	if (!m)
		return err_set(err, -ENOMEM, "out of memory");
	pim__manifest__init(m);
	/* Every field is malloc'd, so pim__manifest__free_unpacked(m, NULL) frees it all. */
	m->name = dup_str(x->name);
	/* The labels pimctl model show prints: the instruction set of the library's host code
	 * and, with --weights zero, that its outputs are not the model's. */
	char label[128] = "";
	int w = 0;
	if (x->weights_zero)
		w = snprintf(label, sizeof label, " (--weights zero: %zu constants, %" PRIu64 " bytes zeroed)",
			     x->n_zeros, x->zero_bytes);
	if (x->target[0])
		w += snprintf(label + w, sizeof label - (size_t)w, " (host code %s)", x->target);
	if (asprintf(&m->source, "%.*s%s", (int)(MANIFEST_TEXT_MAX - (size_t)w), x->source, label) < 0)
		m->source = NULL;
	m->allocations = calloc(x->n_allocs ? x->n_allocs : 1, sizeof *m->allocations);
	m->regions = calloc(x->n_regions ? x->n_regions : 1, sizeof *m->regions);
	if (!m->name || !m->source || !m->allocations || !m->regions)
		return err_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < x->n_allocs; i++) {
		Pim__Allocation *a = malloc(sizeof *a);
		if (!a)
			return err_set(err, -ENOMEM, "out of memory");
		pim__allocation__init(a);
		m->allocations[m->n_allocations++] = a;
		a->id = (uint32_t)i;
		a->bytes = x->allocs[i].bytes;
		a->kind = x->allocs[i].kind;
		if (!(a->name = dup_str(x->allocs[i].name)))
			return err_set(err, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < x->n_regions; i++) {
		const struct extract_region *s = &x->regions[i];
		Pim__Region *g = malloc(sizeof *g);
		if (!g)
			return err_set(err, -ENOMEM, "out of memory");
		pim__region__init(g);
		m->regions[m->n_regions++] = g;
		g->id = g->order = (uint32_t)i;
		g->n_par = s->n_par;
		g->n_total = s->n_total;
		g->trip = s->trip;
		g->name = dup_str(s->name);
		g->op = dup_str(s->op);
		g->location = dup_str(s->location);
		g->parallel_extents = malloc((s->n_par_ext ? s->n_par_ext : 1) * sizeof(uint64_t));
		g->reduction_extents = malloc((s->n_red_ext ? s->n_red_ext : 1) * sizeof(uint64_t));
		g->operands = calloc(s->n_operands ? s->n_operands : 1, sizeof *g->operands);
		if (!g->name || !g->op || !g->location || !g->parallel_extents || !g->reduction_extents ||
		    !g->operands)
			return err_set(err, -ENOMEM, "out of memory");
		memcpy(g->parallel_extents, s->par_ext, s->n_par_ext * sizeof(uint64_t));
		g->n_parallel_extents = s->n_par_ext;
		memcpy(g->reduction_extents, s->red_ext, s->n_red_ext * sizeof(uint64_t));
		g->n_reduction_extents = s->n_red_ext;
		for (size_t j = 0; j < s->n_operands; j++) {
			Pim__Operand *p = malloc(sizeof *p);
			if (!p)
				return err_set(err, -ENOMEM, "out of memory");
			pim__operand__init(p);
			g->operands[g->n_operands++] = p;
			p->allocation_id = s->operands[j].alloc;
			p->bytes = s->operands[j].bytes;
			p->elem_bits = s->operands[j].elem_bits;
			p->role = s->operands[j].role;
			if (!(p->elem_type = dup_str(s->operands[j].elem_type)))
				return err_set(err, -ENOMEM, "out of memory");
		}
	}
	if ((r = manifest_validate(m, err)) < 0)
		return err_prefix(err, "internal error: the manifest of %s does not validate", x->source);
	*out = TAKE_PTR(m);
	return 0;
}
