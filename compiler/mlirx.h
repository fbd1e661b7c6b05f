/* SPDX-License-Identifier: MIT */
/*
 * mlirx.h: small helpers over the MLIR 19 C API used by pim-extract: a context with every
 * dialect and pass registered, diagnostics captured instead of printed, textual pass pipelines
 * run in process, and the string forms (op names, types, file:line:col locations) the manifest
 * and the error messages need.  Facts and pitfalls: doc/mlir.md.
 */
#ifndef PIM_COMPILER_MLIRX_H
#define PIM_COMPILER_MLIRX_H

#include "strbuf.h"
#include <mlir-c/IR.h>

#include <stdbool.h>
#include <stdint.h>

#include "util.h"

/* The first error diagnostic MLIR reported since the last mlirx_diag_clear(). */
struct mlirx_diag {
	bool have;
	char loc[256];  /* file:line:col, or "" */
	char msg[400];
};

struct mlirx {
	MlirContext ctx;
	struct mlirx_diag diag;
	const char *input;  /* path shown in locations that came from the input text */
};

/* Creates the context (every dialect loaded, every pass registered, single-threaded). */
int mlirx_init(struct mlirx *m, const char *input, struct pim_error *err);
void mlirx_done(struct mlirx *m);
void mlirx_diag_clear(struct mlirx *m);

/* Runs a textual pass pipeline (bare pass list) on the module.  On failure the message names
 * the stage and carries MLIR's first error with its location. */
int mlirx_run_passes(struct mlirx *m, MlirModule module, const char *stage, const char *pipeline,
		     struct pim_error *err);

/* Writes the module's text to path (for --save-temps). */
int mlirx_write_module(MlirModule module, const char *path, struct pim_error *err);

/* The print callback of the MLIR C API appending to the struct strbuf userdata. */
void mlirx_buf_cb(MlirStringRef s, void *userdata);
/* Module text; NULL when out of memory.  Free with free(). */
char *mlirx_module_text(MlirModule module);

/* "file:line:col" of the first file location inside loc (call sites and fused locations
 * included); the parser names text without a file "-", shown as m->input.  "" if none. */
void mlirx_loc_str(const struct mlirx *m, MlirLocation loc, char *out, size_t n);
void mlirx_op_loc(const struct mlirx *m, MlirOperation op, char *out, size_t n);

/* The framework operator a location names: the first NameLoc whose child is itself a NameLoc,
 * loc("NODE"("OP_TYPE")) (the form the ONNX importer gives every op made for node NODE of type
 * OP_TYPE), also inside FusedLoc and CallSiteLoc.  Both strings as printed (escapes kept, no
 * quotes).  False, with both empty, when there is none. */
bool mlirx_loc_node(MlirLocation loc, char *node, size_t nn, char *type, size_t nt);
/* Where loc is, for messages: "file:line:col", else "INPUT: node NODE (OP_TYPE)" for a
 * framework operator's location, else "". */
void mlirx_loc_where(const struct mlirx *m, MlirLocation loc, char *out, size_t n);

/* The op's name ("linalg.matvec") into out. */
void mlirx_op_name(MlirOperation op, char *out, size_t n);
bool mlirx_op_is(MlirOperation op, const char *name);
/* The dialect namespace of an op name (text before the first '.'). */
bool mlirx_op_in_dialect(MlirOperation op, const char *dialect);
void mlirx_type_str(MlirType t, char *out, size_t n);

/* Value of an integer constant (arith.constant with an integer attribute); false otherwise. */
bool mlirx_const_int(MlirValue v, int64_t *out);

/* Bits of a scalar element type (index counts 64); 0 for anything else. */
unsigned mlirx_elem_bits(MlirType t);

/* String of a string attribute or a flat symbol reference; NULL-terminated copy into out. */
bool mlirx_attr_str(MlirAttribute a, char *out, size_t n);

/* A growing list of operations (free ops when done). */
struct mlirx_ops {
	MlirOperation *ops;
	size_t n, cap;
};

/* Appends op; -ENOMEM when the list cannot grow. */
int mlirx_ops_add(struct mlirx_ops *l, MlirOperation op);
/* Appends every operation nested in root (not root itself) named name, or every one when name
 * is NULL, in pre-order. */
int mlirx_ops_collect(MlirOperation root, const char *name, struct mlirx_ops *l);

static inline MlirStringRef mlirx_s(const char *s) { return mlirStringRefCreateFromCString(s); }

#endif
