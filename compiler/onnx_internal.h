/* SPDX-License-Identifier: MIT */
/*
 * onnx_internal.h: what the files of the ONNX importer share, and nothing outside it uses.
 * onnx.c reads the model and walks its graph, dispatching each node to an operator of
 * onnx_elementwise.c, onnx_contract.c, onnx_reduce.c or onnx_movement.c; those build on the
 * values and node access of onnx_value.c and the emission and folding helpers of onnx_emit.c.
 * The names are the importer's own (once static in one file); they have hidden visibility so
 * that no program or model library linked with the importer sees them.
 */
#ifndef PIM_COMPILER_ONNX_INTERNAL_H
#define PIM_COMPILER_ONNX_INTERNAL_H

#include "onnx.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "onnx.pb-c.h"
#include "strbuf.h"

#pragma GCC visibility push(hidden)

#define VALS_MAX 1000000u
#define ELEMS_MAX (1ull << 31)   /* elements of one tensor */
#define FOLD_MAX (1ull << 24)    /* elements of a tensor folded at import */

enum dt { DT_F32, DT_F64, DT_I64, DT_I32, DT_BOOL, DT_F16, DT_BF16 };

extern const char *const DT_MLIR[];
extern const size_t DT_SIZE[];
#define DT_NAMES "float, double, float16, bfloat16, int64, int32, bool"

static inline bool dt_float(enum dt t) { return t == DT_F32 || t == DT_F64 || t == DT_F16 || t == DT_BF16; }
static inline bool dt_half(enum dt t) { return t == DT_F16 || t == DT_BF16; }

struct val {
	char *name;
	enum dt dt;
	size_t rank;
	int64_t dims[ONNX_RANK_MAX];
	void *data;       /* host data, or NULL */
	long ssa;         /* %vN in the body, or -1 */
	bool is_arg;      /* a function argument */
	bool is_view;     /* its buffer is another value's (reshape/slice view, constant) */
	size_t zero_len;  /* a zero value (--weights zero): data maps this many bytes of zero pages */
};

struct imp {
	const char *path;
	struct pim_error *err;
	uint64_t zero_min;     /* --weights zero: constants of this many bytes or more are zeros */
	uint64_t external;     /* bytes read from external data so far */
	int64_t opset;
	struct val **vals;
	size_t n_vals, cap_vals;
	struct val **hash;
	size_t hash_cap;
	struct strbuf body;
	long ssa;
	/* The node being imported (for refusals and locations). */
	const Onnx__NodeProto *node;
	char node_name[ONNX_NAME_MAX + 16];
	char loc[2 * ONNX_NAME_MAX + 64];
	unsigned nest;  /* linalg ops made for the node so far */
	size_t n_linalg;  /* linalg ops made in all */
};

/* An operand of a generic: its SSA value, element type, tensor type and the results of its
 * indexing map ("d0, 0, d2"). */
struct gop {
	long ssa;
	enum dt dt;
	char type[256];
	char map[256];
};

/* The most inputs of an elementwise op (emit_ew). */
#define EW_INPUTS_MAX 8

enum ew_kind { EW_SAME, EW_BOOL, EW_SECOND };  /* result type: input's, bool, input 1's */

struct ewop {
	const char *name;
	size_t arity;
	enum ew_kind kind;
	const char *ftmpl;  /* float payload, or NULL */
	const char *itmpl;  /* integer payload (i64/i32/bool), or NULL */
};

/* The elementwise operators with one payload (onnx_elementwise.c), N_EWOPS of them. */
extern const struct ewop EWOPS[];
extern const size_t N_EWOPS;

/* onnx.c: tensors of the file. */
int onnx_dt(int32_t t, enum dt *out);
const char *onnx_dt_name(int32_t t);
int tensor_load(struct imp *m, const Onnx__TensorProto *t, const char *what, struct val **out);

/* onnx_value.c: types, text, refusals, values, attributes, node inputs and outputs. */
float f16_to_float(uint16_t h);
uint16_t float_to_f16(float x);
float bf16_to_float(uint16_t h);
uint16_t float_to_bf16(float x);
double round_to(double x, enum dt t);
void mlir_str(char *out, size_t n, const char *s);
void fmt_float(char *out, size_t n, double v, enum dt t);
void tensor_type(char *out, size_t n, enum dt t, size_t rank, const int64_t *dims);
void vtype(char *out, size_t n, const struct val *v);
int refuse(struct imp *m, const char *fmt, ...) _printf_(2, 3);
int oom(struct imp *m);
struct val *lookup(struct imp *m, const char *name);
int64_t numel(const struct val *v);
void val_free(struct val *v);
int check_shape(struct imp *m, const char *what, size_t rank, const int64_t *dims);
int define(struct imp *m, const char *name, struct val *v);
struct val *val_new(enum dt t, size_t rank, const int64_t *dims);
struct val *val_const(enum dt t, size_t rank, const int64_t *dims);
struct val *val_zero(enum dt t, size_t rank, const int64_t *dims);
struct val *val_like(const struct val *src, enum dt t, size_t rank, const int64_t *dims);
double get_d(const struct val *v, int64_t i);
int64_t get_i(const struct val *v, int64_t i);
void set_d(struct val *v, int64_t i, double x);
void set_i(struct val *v, int64_t i, int64_t x);
const Onnx__AttributeProto *attr(const Onnx__NodeProto *n, const char *name);
int attr_int(struct imp *m, const char *name, int64_t def, int64_t *out);
int attr_float(struct imp *m, const char *name, double def, double *out);
int attr_ints(struct imp *m, const char *name, int64_t *out, long *n);
int attr_str(struct imp *m, const char *name, const char *def, char *out, size_t n);
int attrs_allowed(struct imp *m, const char *const *allowed);
size_t n_in(const struct imp *m);
int input(struct imp *m, size_t i, struct val **out);
int input_opt(struct imp *m, size_t i, struct val **out);
int input_const(struct imp *m, size_t i, const char *what, struct val **out);
int output(struct imp *m, size_t i, struct val *v);
int outputs_max(struct imp *m, size_t n);
int need_dt(struct imp *m, const struct val *v, bool float_only);

/* onnx_emit.c: emission and the folding helpers. */
long new_ssa(struct imp *m);
const char *float_conv(enum dt from, enum dt to);
void count_linalg(struct imp *m);
long ssa_of(struct imp *m, struct val *v);
long emit_empty(struct imp *m, enum dt t, size_t rank, const int64_t *dims);
long emit_filled(struct imp *m, enum dt t, size_t rank, const int64_t *dims, const char *lit);
void gop_set(struct gop *g, long ssa, enum dt t, size_t rank, const int64_t *dims);
void map_add(struct gop *g, const char *fmt, ...) _printf_(2, 3);
long emit_generic(struct imp *m, size_t ndims, const bool *red, const struct gop *ins,
	size_t nins, const struct gop *out, const char *tmpl);
long generic(struct imp *m, size_t ndims, const bool *red, const struct gop *ins, size_t nins,
	const struct gop *out, const char *tmpl);
struct val *val_ssa(enum dt t, size_t rank, const int64_t *dims, long ssa);
int broadcast(struct imp *m, struct val *const *in, size_t n, size_t *rank, int64_t *dims);
void gop_bcast(struct imp *m, struct gop *g, struct val *v, size_t rank, const int64_t *dims);
void gop_identity(struct gop *g, size_t rank);
int emit_ew(struct imp *m, struct val *const *in, size_t n, enum dt t, const char *tmpl,
	struct val **out);
long emit_copy(struct imp *m, struct val *v);
int emit_reshape(struct imp *m, struct val *v, size_t rank, const int64_t *dims, struct val **out);
void unflatten(int64_t f, size_t rank, const int64_t *dims, int64_t *idx);
int64_t flatten_idx(size_t rank, const int64_t *dims, const int64_t *idx);
const char *zero_lit(enum dt t);
int64_t bcast_off(const struct val *v, size_t rank, const int64_t *dims, int64_t flat);
bool fold_fits(size_t rank, const int64_t *dims);
bool all_const(struct val *const *in, size_t n);
int norm_axis(struct imp *m, int64_t axis, size_t rank, size_t *out);
int const_ints(struct imp *m, struct val *v, const char *what, int64_t *out, size_t max, size_t *n);

/* onnx_elementwise.c */
int op_elementwise(struct imp *m, const struct ewop *e);
int op_clip(struct imp *m);
int op_cumsum(struct imp *m);
int op_variadic(struct imp *m);

/* onnx_contract.c */
int op_matmul(struct imp *m);
int op_gemm(struct imp *m);
int emit_pad(struct imp *m, struct val *x, const int64_t *lo, const int64_t *hi, const char *lit,
	struct val **out);
int op_conv(struct imp *m);
int op_pool(struct imp *m);

/* onnx_reduce.c */
const char *neg_inf(enum dt t);
int op_reduce(struct imp *m);
int op_argext(struct imp *m);
int op_softmax(struct imp *m);
int op_layernorm(struct imp *m);
int op_batchnorm(struct imp *m);

/* onnx_movement.c */
int op_reshape(struct imp *m);
int op_flatten(struct imp *m);
int op_squeeze(struct imp *m);
int op_identity(struct imp *m);
int op_transpose(struct imp *m);
int op_slice(struct imp *m);
int op_split(struct imp *m);
int op_concat(struct imp *m);
int op_gather(struct imp *m);
int op_expand(struct imp *m);
int op_cast(struct imp *m);
int op_constant(struct imp *m);
int op_constant_of_shape(struct imp *m);
int op_range(struct imp *m);
int op_shape(struct imp *m);
int op_pad(struct imp *m);
int op_trilu(struct imp *m);

#pragma GCC visibility pop

#endif
