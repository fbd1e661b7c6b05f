/* SPDX-License-Identifier: MIT */
#include "mlirx.h"

#include <mlir-c/BuiltinAttributes.h>
#include <mlir-c/BuiltinTypes.h>
#include <mlir-c/Diagnostics.h>
#include <mlir-c/Pass.h>
#include <mlir-c/RegisterEverything.h>

#include <string.h>

void mlirx_buf_cb(MlirStringRef s, void *userdata)
{
	strbuf_put(userdata, s.data, s.length);
}

char *mlirx_module_text(MlirModule module)
{
	struct strbuf b = { 0 };

	mlirOperationPrint(mlirModuleGetOperation(module), mlirx_buf_cb, &b);
	return strbuf_take(&b, NULL);
}

/* Copies at most n-1 bytes of s and terminates. */
static void copy_ref(MlirStringRef s, char *out, size_t n)
{
	size_t k = s.length < n - 1 ? s.length : n - 1;
	memcpy(out, s.data, k);
	out[k] = '\0';
}

void mlirx_loc_str(const struct mlirx *m, MlirLocation loc, char *out, size_t n)
{
	struct strbuf b = { 0 };

	out[0] = '\0';
	mlirLocationPrint(loc, mlirx_buf_cb, &b);
	if (!b.p)
		return;
	/* Find the first "file":line:col; skip quoted strings that are names ("name"(...)). */
	for (const char *p = b.p; (p = strchr(p, '"')) != NULL;) {
		const char *start = ++p;
		while (*p && *p != '"')
			p += (*p == '\\' && p[1]) ? 2 : 1;
		if (!*p)
			break;
		const char *end = p++;
		const char *q = p;
		if (*q != ':' || q[1] < '0' || q[1] > '9')
			continue;
		q++;
		while (*q >= '0' && *q <= '9')
			q++;
		if (*q != ':' || q[1] < '0' || q[1] > '9')
			continue;
		q++;
		while (*q >= '0' && *q <= '9')
			q++;
		int flen = (int)(end - start);
		const char *file = start;
		if ((flen == 1 && *start == '-') || flen == 0) {
			file = m->input ? m->input : "-";
			flen = (int)strlen(file);
		}
		snprintf(out, n, "%.*s%.*s", flen, file, (int)(q - end - 1), end + 1);
		break;
	}
	strbuf_free(&b);
}

/* End of the quoted string starting at p (p points at the opening quote): the closing quote. */
static const char *quoted_end(const char *p)
{
	for (p++; *p && *p != '"';)
		p += (*p == '\\' && p[1]) ? 2 : 1;
	return *p ? p : NULL;
}

bool mlirx_loc_node(MlirLocation loc, char *node, size_t nn, char *type, size_t nt)
{
	struct strbuf b = { 0 };
	bool found = false;

	node[0] = type[0] = '\0';
	mlirLocationPrint(loc, mlirx_buf_cb, &b);
	if (!b.p)
		return false;
	/* "NODE"("TYPE") followed by ")" (no child) or "(" (the type's own child location); a
	 * NameLoc around a file location, "name"("f.mlir":1:2), is not a framework operator. */
	for (const char *p = b.p; !found && (p = strchr(p, '"')) != NULL;) {
		const char *e1 = quoted_end(p);
		if (!e1)
			break;
		if (e1[1] == '(' && e1[2] == '"') {
			const char *e2 = quoted_end(e1 + 2);
			if (e2 && (e2[1] == ')' || e2[1] == '(') && e1 > p + 1 && e2 > e1 + 3) {
				snprintf(node, nn, "%.*s", (int)(e1 - p - 1), p + 1);
				snprintf(type, nt, "%.*s", (int)(e2 - e1 - 3), e1 + 3);
				found = true;
			}
		}
		p = e1 + 1;
	}
	strbuf_free(&b);
	return found;
}

void mlirx_loc_where(const struct mlirx *m, MlirLocation loc, char *out, size_t n)
{
	char node[128], type[64];

	mlirx_loc_str(m, loc, out, n);
	if (!out[0] && mlirx_loc_node(loc, node, sizeof node, type, sizeof type))
		snprintf(out, n, "%s: node %s (%s)", m->input ? m->input : "-", node, type);
}

void mlirx_op_loc(const struct mlirx *m, MlirOperation op, char *out, size_t n)
{
	mlirx_loc_str(m, mlirOperationGetLocation(op), out, n);
}

void mlirx_op_name(MlirOperation op, char *out, size_t n)
{
	copy_ref(mlirIdentifierStr(mlirOperationGetName(op)), out, n);
}

bool mlirx_op_is(MlirOperation op, const char *name)
{
	MlirStringRef s = mlirIdentifierStr(mlirOperationGetName(op));
	return s.length == strlen(name) && memcmp(s.data, name, s.length) == 0;
}

bool mlirx_op_in_dialect(MlirOperation op, const char *dialect)
{
	MlirStringRef s = mlirIdentifierStr(mlirOperationGetName(op));
	size_t d = strlen(dialect);
	return s.length > d && memcmp(s.data, dialect, d) == 0 && s.data[d] == '.';
}

void mlirx_type_str(MlirType t, char *out, size_t n)
{
	struct strbuf b = { 0 };

	mlirTypePrint(t, mlirx_buf_cb, &b);
	snprintf(out, n, "%s", b.p ? b.p : "?");
	strbuf_free(&b);
}

bool mlirx_const_int(MlirValue v, int64_t *out)
{
	if (!mlirValueIsAOpResult(v))
		return false;
	MlirOperation def = mlirOpResultGetOwner(v);
	if (!mlirx_op_is(def, "arith.constant"))
		return false;
	MlirAttribute a = mlirOperationGetAttributeByName(def, mlirx_s("value"));
	if (mlirAttributeIsNull(a) || !mlirAttributeIsAInteger(a))
		return false;
	*out = mlirIntegerAttrGetValueInt(a);
	return true;
}

unsigned mlirx_elem_bits(MlirType t)
{
	if (mlirTypeIsAIndex(t))
		return 64;
	if (mlirTypeIsAInteger(t))
		return mlirIntegerTypeGetWidth(t);
	if (mlirTypeIsAFloat(t))
		return mlirFloatTypeGetWidth(t);
	return 0;
}

bool mlirx_attr_str(MlirAttribute a, char *out, size_t n)
{
	if (mlirAttributeIsNull(a))
		return false;
	if (mlirAttributeIsAString(a))
		copy_ref(mlirStringAttrGetValue(a), out, n);
	else if (mlirAttributeIsAFlatSymbolRef(a))
		copy_ref(mlirFlatSymbolRefAttrGetValue(a), out, n);
	else
		return false;
	return true;
}

/* ---------------------------------------------------------------- context and diagnostics */

static MlirLogicalResult diag_handler(MlirDiagnostic d, void *userdata)
{
	struct mlirx *m = userdata;

	if (mlirDiagnosticGetSeverity(d) == MlirDiagnosticError && !m->diag.have) {
		struct strbuf b = { 0 };
		mlirDiagnosticPrint(d, mlirx_buf_cb, &b);
		snprintf(m->diag.msg, sizeof m->diag.msg, "%s", b.p ? b.p : "(no message)");
		strbuf_free(&b);
		mlirx_loc_where(m, mlirDiagnosticGetLocation(d), m->diag.loc, sizeof m->diag.loc);
		m->diag.have = true;
	}
	/* Handled: nothing reaches stderr behind the caller's back (library code never prints). */
	return mlirLogicalResultSuccess();
}

void mlirx_diag_clear(struct mlirx *m)
{
	m->diag = (struct mlirx_diag){ 0 };
}

int mlirx_init(struct mlirx *m, const char *input, struct pim_error *err)
{
	*m = (struct mlirx){ .input = input };
	/* doc/mlir.md pitfall 7: register all dialects and passes before parsing pipelines. */
	MlirDialectRegistry reg = mlirDialectRegistryCreate();
	if (mlirDialectRegistryIsNull(reg))
		return err_set(err, -ENOMEM, "cannot create the MLIR dialect registry");
	mlirRegisterAllDialects(reg);
	m->ctx = mlirContextCreateWithRegistry(reg, false);
	mlirDialectRegistryDestroy(reg);
	if (mlirContextIsNull(m->ctx))
		return err_set(err, -ENOMEM, "cannot create the MLIR context");
	mlirContextLoadAllAvailableDialects(m->ctx);
	mlirRegisterAllPasses();
	mlirRegisterAllLLVMTranslations(m->ctx);
	mlirContextAttachDiagnosticHandler(m->ctx, diag_handler, m, NULL);
	return 0;
}

void mlirx_done(struct mlirx *m)
{
	if (!mlirContextIsNull(m->ctx))
		mlirContextDestroy(m->ctx);
	m->ctx = (MlirContext){ NULL };
}

int mlirx_run_passes(struct mlirx *m, MlirModule module, const char *stage, const char *pipeline,
		     struct pim_error *err)
{
	struct strbuf perr = { 0 };
	/* doc/mlir.md pitfall 1: a manager created with mlirPassManagerCreate() is anchored on
	 * "any"; nesting builtin.module(...) in it never runs and still reports success. */
	MlirPassManager pm = mlirPassManagerCreateOnOperation(m->ctx, mlirx_s("builtin.module"));
	int r = 0;

	if (mlirPassManagerIsNull(pm))
		return err_set(err, -ENOMEM, "%s: cannot create a pass manager", stage);
	if (mlirLogicalResultIsFailure(mlirOpPassManagerAddPipeline(mlirPassManagerGetAsOpPassManager(pm),
							     mlirx_s(pipeline), mlirx_buf_cb, &perr))) {
		r = err_set(err, -EINVAL, "%s: invalid pass pipeline \"%s\": %s", stage, pipeline,
			    perr.p ? perr.p : "?");
		goto out;
	}
	mlirx_diag_clear(m);
	if (mlirLogicalResultIsFailure(mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module)))) {
		if (m->diag.have)
			r = err_set(err, -EINVAL, "%s%s%s failed: %s", m->diag.loc,
				    m->diag.loc[0] ? ": " : "", stage, m->diag.msg);
		else
			r = err_set(err, -EINVAL, "%s failed (MLIR gave no diagnostic)", stage);
	}
out:
	strbuf_free(&perr);
	mlirPassManagerDestroy(pm);
	return r;
}

int mlirx_write_module(MlirModule module, const char *path, struct pim_error *err)
{
	_cleanup_(freep) char *text = mlirx_module_text(module);
	_cleanup_(fclosep) FILE *f = NULL;

	if (!text)
		return err_set(err, -ENOMEM, "out of memory printing the module");
	f = fopen(path, "we");
	if (!f)
		return err_set(err, -errno, "%s: %s", path, strerror(errno));
	if (fputs(text, f) < 0 || fflush(f) != 0)
		return err_set(err, -EIO, "%s: write failed", path);
	return 0;
}

/* ---------------------------------------------------------------- operation lists */

int mlirx_ops_add(struct mlirx_ops *l, MlirOperation op)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		MlirOperation *p = realloc(l->ops, cap * sizeof *p);
		if (!p)
			return -ENOMEM;
		l->ops = p;
		l->cap = cap;
	}
	l->ops[l->n++] = op;
	return 0;
}

int mlirx_ops_collect(MlirOperation root, const char *name, struct mlirx_ops *l)
{
	for (intptr_t r = 0; r < mlirOperationGetNumRegions(root); r++) {
		MlirRegion reg = mlirOperationGetRegion(root, r);
		for (MlirBlock b = mlirRegionGetFirstBlock(reg); !mlirBlockIsNull(b); b = mlirBlockGetNextInRegion(b))
			for (MlirOperation op = mlirBlockGetFirstOperation(b); !mlirOperationIsNull(op);
			     op = mlirOperationGetNextInBlock(op)) {
				int k;
				if ((!name || mlirx_op_is(op, name)) && (k = mlirx_ops_add(l, op)) < 0)
					return k;
				if ((k = mlirx_ops_collect(op, name, l)) < 0)
					return k;
			}
	}
	return 0;
}
