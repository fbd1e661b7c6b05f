/* SPDX-License-Identifier: MIT */
/*
 * onnx.c: ONNX ModelProto -> linalg-on-tensors MLIR text (onnx.h).
 *
 * One pass over the graph's nodes, in their (topological) order.  Each value has a static
 * shape and element type computed here (value_info of the file is not trusted) and either
 * host data (known at import: initializers, Constant, and everything folded from them) or an
 * SSA value of the function body, or both (a constant used by an emitted op is materialized
 * once as arith.constant).  Emitted ops are linalg.generic with explicit indexing maps, so the
 * extractor sees every nest the way it sees hand-written linalg.
 *
 * Element types: float -> f32, double -> f64, float16 -> f16, bfloat16 -> bf16, int64 -> i64,
 * int32 -> i32, bool -> i8 (0/1; an i1 buffer has no portable memory layout at the library's C
 * boundary).  Others are refused.  Half-precision values are moved and computed as stored
 * (2 bytes each); folding computes them in double and rounds to the type.
 *
 * --weights zero: an external-data initializer of zero_min bytes or more is never read (its
 * location, offset and length are checked against the file with fstat); it becomes a "zero"
 * value whose data is a read-only private anonymous mapping, i.e. the kernel's zero page, so
 * folding can read it and a small slice of it can be written out, at no resident memory
 * whatever its size.  Data movement of such a value at import (Reshape, Transpose, Slice,
 * Gather, Expand, Cast, ...) gives another zero value, again without memory.
 *
 * This file reads the model and its tensors and walks the graph; the rest of the importer is
 * split by concern, sharing onnx_internal.h: onnx_value.c (types, values, a node's
 * attributes and operands), onnx_emit.c (MLIR emission and folding helpers), and the
 * operators by family: onnx_elementwise.c, onnx_contract.c (MatMul, Gemm, Conv, pools),
 * onnx_reduce.c (reductions and normalizations) and onnx_movement.c (shapes, data movement,
 * constants).
 */
#include "onnx_internal.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------- tensors of the file */

int onnx_dt(int32_t t, enum dt *out)
{
	switch (t) {
	case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: *out = DT_F32; return 0;
	case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: *out = DT_F64; return 0;
	case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: *out = DT_I64; return 0;
	case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: *out = DT_I32; return 0;
	case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: *out = DT_BOOL; return 0;
	case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: *out = DT_F16; return 0;
	case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: *out = DT_BF16; return 0;
	}
	return -EINVAL;
}

const char *onnx_dt_name(int32_t t)
{
	static const char *const names[] = { "undefined", "float", "uint8", "int8", "uint16", "int16",
					     "int32", "int64", "string", "bool", "float16", "double",
					     "uint32", "uint64", "complex64", "complex128", "bfloat16" };
	return t >= 0 && (size_t)t < ELEMENTSOF(names) ? names[t] : "an unknown element type";
}

/* An external_data entry's value, or NULL. */
static const char *external_key(const Onnx__TensorProto *t, const char *key)
{
	for (size_t i = 0; i < t->n_external_data; i++)
		if (t->external_data[i]->key && !strcmp(t->external_data[i]->key, key))
			return t->external_data[i]->value ? t->external_data[i]->value : "";
	return NULL;
}

/* A decimal byte count of an external_data entry (digits only). */
static int external_number(struct imp *m, const char *what, const char *key, const char *s, uint64_t *out)
{
	char *end;

	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (*s < '0' || *s > '9' || *end || errno)
		return refuse(m, "%s: external data %s \"%.32s\" is not a byte count", what, key, s);
	*out = v;
	return 0;
}

/*
 * ONNX external data (onnx.proto, TensorProto.external_data: the tensor's raw bytes, little
 * endian, at `offset` of the file `location`, `length` bytes long; what models over protobuf's
 * 2 GB limit carry).  The location is relative to the model's directory and may not leave it
 * (no absolute path, no ".." component); the bytes must lie inside the regular file and be
 * exactly the tensor's size.  With --weights zero a tensor of zero_min bytes or more is only
 * checked (fstat), never read: it becomes a zero value, so that the import's memory does not
 * grow with the weights.  What is read is held in memory: at most ONNX_EXTERNAL_MAX in all.
 */
static int tensor_external(struct imp *m, const Onnx__TensorProto *t, const char *what, enum dt d,
			   size_t rank, const int64_t *dims, struct val **out)
{
	const char *loc = external_key(t, "location"), *off_s = external_key(t, "offset"),
		   *len_s = external_key(t, "length");
	uint64_t need = DT_SIZE[d], off = 0, len;
	int r;

	for (size_t i = 0; i < rank; i++)
		need *= (uint64_t)dims[i];  /* check_shape: at most 2^31 elements */
	len = need;
	if (t->has_raw_data)
		return refuse(m, "%s: both raw_data and external data", what);
	if (!loc || !*loc)
		return refuse(m, "%s: external data without a location", what);
	if (loc[0] == '/' || !strcmp(loc, "..") || !strncmp(loc, "../", 3) || strstr(loc, "/../") ||
	    (strlen(loc) >= 3 && !strcmp(loc + strlen(loc) - 3, "/..")))
		return refuse(m, "%s: external data location \"%.*s\" is outside the model's directory",
			      what, ONNX_NAME_MAX, loc);
	if ((off_s && (r = external_number(m, what, "offset", off_s, &off)) < 0) ||
	    (len_s && (r = external_number(m, what, "length", len_s, &len)) < 0))
		return r;
	if (len != need)
		return refuse(m, "%s: external data length %" PRIu64 ", the shape needs %" PRIu64, what, len, need);
	bool zero = m->zero_min && need >= m->zero_min;
	if (!zero && need > ONNX_EXTERNAL_MAX - m->external)
		return refuse(m, "%s: its %" PRIu64 " bytes of external data would bring what the import reads "
			      "and holds in memory past %llu bytes (ONNX_EXTERNAL_MAX, %" PRIu64 " read before it)%s",
			      what, need, (unsigned long long)ONNX_EXTERNAL_MAX, m->external,
			      m->zero_min ? "" : "; --weights zero does not read large constants");

	char dir[4096];
	const char *slash = strrchr(m->path, '/');
	snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - m->path + 1) : 1, slash ? m->path : ".");
	_cleanup_(closep) int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return err_set(m->err, -errno, "%s: %s: %s", m->path, dir, strerror(errno));
	_cleanup_(closep) int fd = openat(dfd, loc, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return refuse(m, "%s: external data file \"%.*s\": %s", what, ONNX_NAME_MAX, loc, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return refuse(m, "%s: external data file \"%.*s\" is not a regular file", what, ONNX_NAME_MAX, loc);
	if (off > (uint64_t)st.st_size || need > (uint64_t)st.st_size - off)
		return refuse(m, "%s: external data at offset %" PRIu64 ", %" PRIu64 " bytes, lies beyond the "
			      "end of \"%.*s\" (%jd bytes)", what, off, need, ONNX_NAME_MAX, loc, (intmax_t)st.st_size);
	struct val *v = zero ? val_zero(d, rank, dims) : val_const(d, rank, dims);
	if (!v)
		return oom(m);
	if (zero) {
		*out = v;
		return 0;
	}
	for (uint64_t done = 0; done < need;) {
		ssize_t k = pread(fd, (char *)v->data + done, need - done, (off_t)(off + done));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			r = refuse(m, "%s: reading external data file \"%.*s\": %s", what, ONNX_NAME_MAX,
				   loc, k < 0 ? strerror(errno) : "unexpected end of file");
			val_free(v);
			return r;
		}
		done += (uint64_t)k;
	}
	m->external += need;
	if (d == DT_BOOL)
		for (uint64_t i = 0; i < need; i++)
			((uint8_t *)v->data)[i] = ((uint8_t *)v->data)[i] != 0;
	*out = v;
	return 0;
}

/* A TensorProto's data as a host value (raw_data little-endian, the typed fields, or
 * external data). */
int tensor_load(struct imp *m, const Onnx__TensorProto *t, const char *what, struct val **out)
{
	enum dt d;

	if (onnx_dt(t->data_type, &d) < 0)
		return refuse(m, "%s: element type %s is not supported (" DT_NAMES ")",
			      what, onnx_dt_name(t->data_type));
	bool external = t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
	if (t->segment)
		return refuse(m, "%s: segmented tensors are not supported", what);
	int64_t dims[ONNX_RANK_MAX];
	if (t->n_dims > ONNX_RANK_MAX)
		return refuse(m, "%s has rank %zu, at most %d supported", what, t->n_dims, ONNX_RANK_MAX);
	for (size_t i = 0; i < t->n_dims; i++)
		dims[i] = t->dims[i];
	int r = check_shape(m, what, t->n_dims, dims);
	if (r < 0)
		return r;
	if (external)
		return tensor_external(m, t, what, d, t->n_dims, dims, out);
	struct val *v = val_const(d, t->n_dims, dims);
	if (!v)
		return oom(m);
	int64_t n = numel(v);
	size_t have = 0;
	if (t->has_raw_data) {
		if (t->raw_data.len != (size_t)n * DT_SIZE[d]) {
			val_free(v);
			return refuse(m, "%s: raw_data holds %zu bytes, the shape needs %zu", what,
				      t->raw_data.len, (size_t)n * DT_SIZE[d]);
		}
		memcpy(v->data, t->raw_data.data, t->raw_data.len);
		if (d == DT_BOOL)
			for (int64_t i = 0; i < n; i++)
				((uint8_t *)v->data)[i] = ((uint8_t *)v->data)[i] != 0;
		*out = v;
		return 0;
	}
	switch (d) {
	case DT_F32:
		have = t->n_float_data;
		for (size_t i = 0; i < have && i < (size_t)n; i++)
			set_d(v, (int64_t)i, t->float_data[i]);
		break;
	case DT_F64:
		have = t->n_double_data;
		for (size_t i = 0; i < have && i < (size_t)n; i++)
			set_d(v, (int64_t)i, t->double_data[i]);
		break;
	case DT_I64:
		have = t->n_int64_data;
		for (size_t i = 0; i < have && i < (size_t)n; i++)
			set_i(v, (int64_t)i, t->int64_data[i]);
		break;
	case DT_I32:
	case DT_BOOL:
		have = t->n_int32_data;
		for (size_t i = 0; i < have && i < (size_t)n; i++)
			set_i(v, (int64_t)i, t->int32_data[i]);
		break;
	case DT_F16:
	case DT_BF16:
		/* onnx.proto: each value's 16 bits in the low half of an int32_data entry. */
		have = t->n_int32_data;
		for (size_t i = 0; i < have && i < (size_t)n; i++)
			((uint16_t *)v->data)[i] = (uint16_t)t->int32_data[i];
		break;
	}
	if (have != (size_t)n) {
		val_free(v);
		return refuse(m, "%s: holds %zu elements, the shape needs %" PRId64, what, have, n);
	}
	*out = v;
	return 0;
}

/* ---------------------------------------------------------------- the graph */

/* The operators besides the elementwise ones (EWOPS); each handler reads the node's op_type
 * where one handles several. */
static const struct {
	const char *name;
	int (*fn)(struct imp *m);
} OPS[] = {
	{ "MatMul", op_matmul }, { "Gemm", op_gemm },
	{ "Softmax", op_softmax }, { "LogSoftmax", op_softmax },
	{ "LayerNormalization", op_layernorm }, { "BatchNormalization", op_batchnorm },
	{ "ReduceMean", op_reduce }, { "ReduceSum", op_reduce }, { "ReduceMax", op_reduce },
	{ "ReduceMin", op_reduce }, { "ReduceProd", op_reduce },
	{ "ArgMax", op_argext }, { "ArgMin", op_argext },
	{ "Max", op_variadic }, { "Min", op_variadic }, { "Sum", op_variadic }, { "Mean", op_variadic },
	{ "Clip", op_clip }, { "CumSum", op_cumsum },
	{ "Conv", op_conv }, { "MaxPool", op_pool }, { "AveragePool", op_pool },
	{ "Reshape", op_reshape }, { "Flatten", op_flatten }, { "Squeeze", op_squeeze },
	{ "Unsqueeze", op_squeeze }, { "Identity", op_identity }, { "Dropout", op_identity },
	{ "Transpose", op_transpose }, { "Slice", op_slice }, { "Split", op_split },
	{ "Concat", op_concat }, { "Gather", op_gather }, { "Expand", op_expand }, { "Cast", op_cast },
	{ "Constant", op_constant }, { "ConstantOfShape", op_constant_of_shape }, { "Range", op_range },
	{ "Pad", op_pad }, { "Trilu", op_trilu }, { "Shape", op_shape }, { "Size", op_shape },
};

static bool op_known(const char *op)
{
	for (size_t i = 0; i < N_EWOPS; i++)
		if (!strcmp(op, EWOPS[i].name))
			return true;
	for (size_t i = 0; i < ELEMENTSOF(OPS); i++)
		if (!strcmp(op, OPS[i].name))
			return true;
	return false;
}

static int dispatch(struct imp *m)
{
	const char *op = m->node->op_type ? m->node->op_type : "";

	for (size_t i = 0; i < N_EWOPS; i++)
		if (!strcmp(op, EWOPS[i].name))
			return op_elementwise(m, &EWOPS[i]);
	for (size_t i = 0; i < ELEMENTSOF(OPS); i++)
		if (!strcmp(op, OPS[i].name))
			return OPS[i].fn(m);
	return refuse(m, "operator %s is not supported", op);
}

static void set_node(struct imp *m, const Onnx__NodeProto *n, size_t index)
{
	char en[2 * ONNX_NAME_MAX + 16], eo[2 * ONNX_NAME_MAX];

	m->node = n;
	m->nest = 0;
	if (n->name && *n->name)
		snprintf(m->node_name, sizeof m->node_name, "%.*s", ONNX_NAME_MAX, n->name);
	else
		snprintf(m->node_name, sizeof m->node_name, "%.64s_%zu", n->op_type ? n->op_type : "?", index);
	mlir_str(en, sizeof en, m->node_name);
	mlir_str(eo, sizeof eo, n->op_type ? n->op_type : "?");
	snprintf(m->loc, sizeof m->loc, "loc(\"%s\"(\"%s\"))", en, eo);
}

static int graph_input(struct imp *m, const Onnx__ValueInfoProto *vi, const struct onnx_options *o,
		       bool *pinned_used, struct strbuf *sig, size_t k)
{
	const char *name = vi->name ? vi->name : "";
	const Onnx__TypeProto *tp = vi->type;
	enum dt t;

	if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
		return refuse(m, "graph input \"%s\" is not a tensor", name);
	const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
	if (onnx_dt(tt->elem_type, &t) < 0)
		return refuse(m, "graph input \"%s\": element type %s is not supported", name,
			      onnx_dt_name(tt->elem_type));
	const struct onnx_shape *pin = NULL;
	for (size_t i = 0; i < o->n_shapes; i++)
		if (!strcmp(o->shapes[i].name, name)) {
			pin = &o->shapes[i];
			pinned_used[i] = true;
		}
	if (!tt->shape && !pin)
		return refuse(m, "graph input \"%s\" has no shape: give it with --input-shape %s=D0xD1...", name, name);
	size_t rank = pin ? pin->rank : tt->shape->n_dim;
	int64_t dims[ONNX_RANK_MAX];
	if (rank > ONNX_RANK_MAX)
		return refuse(m, "graph input \"%s\" has rank %zu, at most %d", name, rank, ONNX_RANK_MAX);
	if (pin && tt->shape && tt->shape->n_dim != pin->rank)
		return refuse(m, "--input-shape %s has rank %zu, the model's input has rank %zu", name, pin->rank,
			      tt->shape->n_dim);
	for (size_t d = 0; d < rank; d++) {
		const Onnx__TensorShapeProto__Dimension *dim = tt->shape ? tt->shape->dim[d] : NULL;
		bool fixed = dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
		if (pin) {
			if (fixed && dim->dim_value != pin->dims[d])
				return refuse(m, "--input-shape %s: dimension %zu is %" PRId64 " in the model, not %" PRId64,
					      name, d, dim->dim_value, pin->dims[d]);
			dims[d] = pin->dims[d];
		} else if (fixed) {
			dims[d] = dim->dim_value;
		} else {
			const char *p = dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
						? dim->dim_param : "?";
			return refuse(m, "graph input \"%s\": dimension %zu (\"%s\") is symbolic: pin it with "
				      "--input-shape %s=D0xD1...", name, d, p, name);
		}
	}
	char what[ONNX_NAME_MAX + 32];
	snprintf(what, sizeof what, "graph input \"%s\"", name);
	int r = check_shape(m, what, rank, dims);
	if (r < 0)
		return r;
	struct val *v = val_new(t, rank, dims);
	if (!v)
		return oom(m);
	v->ssa = new_ssa(m);
	v->is_arg = true;
	char ty[256];
	vtype(ty, sizeof ty, v);
	strbuf_printf(sig, "%s%%v%ld: %s", k ? ", " : "", v->ssa, ty);
	return define(m, name, v);
}

/* --const-input: graph input vi is the tensor in c->path, of its declared element type and
 * shape (a symbolic dimension takes the file's size). */
static int const_input(struct imp *m, const Onnx__ValueInfoProto *vi, const struct onnx_const_input *c)
{
	char what[ONNX_NAME_MAX + 32];
	_cleanup_(freep) char *bytes = NULL;
	size_t n = 0;
	struct val *v;
	int r;

	snprintf(what, sizeof what, "--const-input %s", c->name);
	if ((r = read_file(c->path, ONNX_INPUT_MAX, &bytes, &n, m->err)) < 0) {
		err_prefix(m->err, "%s", what);
		return r;
	}
	Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, n, (const uint8_t *)bytes);
	if (!t)
		return refuse(m, "%s: %s is not a serialized TensorProto", what, c->path);
	r = tensor_load(m, t, what, &v);
	int32_t type = t->data_type;
	onnx__tensor_proto__free_unpacked(t, NULL);
	if (r < 0)
		return r;
	const Onnx__TypeProto *tp = vi->type;
	const Onnx__TypeProto__Tensor *tt = tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ? tp->tensor_type : NULL;
	if (tt && tt->has_elem_type && tt->elem_type != type) {
		val_free(v);
		return refuse(m, "%s: the file holds %s, the graph input is %s", what, onnx_dt_name(type),
			      onnx_dt_name(tt->elem_type));
	}
	if (tt && tt->shape) {
		bool ok = tt->shape->n_dim == v->rank;
		for (size_t d = 0; ok && d < v->rank; d++)
			ok = tt->shape->dim[d]->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
			     tt->shape->dim[d]->dim_value == v->dims[d];
		if (!ok) {
			val_free(v);
			return refuse(m, "%s: the file's shape is not the graph input's", what);
		}
	}
	return define(m, c->name, v);
}

/* Refuses a model with nodes of operators the importer lacks (or of another operator domain)
 * before anything else, naming all of them at once: the operator types with their counts, then
 * every node as NAME (OP_TYPE), as many as the message holds.  One such node gets the usual
 * "node NAME (OP_TYPE): operator OP_TYPE is not supported". */
static int check_operators(struct imp *m, const Onnx__GraphProto *g)
{
	struct { const char *op; size_t n; } types[16];
	size_t n_types = 0, bad = 0, listed = 0, first = 0;
	char list[400] = "", sum[160] = "";

	for (size_t i = 0; i < g->n_node; i++) {
		const Onnx__NodeProto *n = g->node[i];
		const char *op = n->op_type ? n->op_type : "", *dom = n->domain;
		bool foreign = dom && *dom && strcmp(dom, "ai.onnx") != 0;
		if (!foreign && op_known(op))
			continue;
		if (bad++ == 0)
			first = i;
		size_t t = 0;
		while (t < n_types && strcmp(types[t].op, op) != 0)
			t++;
		if (t == n_types && n_types < ELEMENTSOF(types))
			types[n_types++] = (typeof(types[0])){ op, 0 };
		if (t < n_types)
			types[t].n++;
		set_node(m, n, i);
		char item[ONNX_NAME_MAX + 160];
		if (foreign)
			snprintf(item, sizeof item, "%s%s (%.64s, domain %.64s)", listed ? ", " : "", m->node_name, op, dom);
		else
			snprintf(item, sizeof item, "%s%s (%.64s)", listed ? ", " : "", m->node_name, op);
		if (strlen(list) + strlen(item) < sizeof list - 32) {
			strcat(list, item);
			listed++;
		}
	}
	m->node = NULL;
	if (bad == 0)
		return 0;
	if (bad == 1) {
		const char *dom = g->node[first]->domain;
		set_node(m, g->node[first], first);
		if (dom && *dom && strcmp(dom, "ai.onnx") != 0)
			return refuse(m, "operator domain \"%s\" is not supported", dom);
		return refuse(m, "operator %s is not supported", m->node->op_type ? m->node->op_type : "");
	}
	for (size_t t = 0; t < n_types; t++)
		snprintf(sum + strlen(sum), sizeof sum - strlen(sum), "%s%.40s %zu", t ? ", " : "", types[t].op,
			 types[t].n);
	if (listed < bad)
		snprintf(list + strlen(list), sizeof list - strlen(list), ", and %zu more", bad - listed);
	return err_set(m->err, -EINVAL, "%s: %zu nodes are not supported (%s%s): %s", m->path, bad, sum,
		       n_types == ELEMENTSOF(types) ? ", ..." : "", list);
}

/* Refuses, before anything is read, a model whose external data to be read (all of it with
 * real weights; with --weights zero only tensors under zero_min bytes) exceeds
 * ONNX_EXTERNAL_MAX: it would be held in memory during the import. */
static int external_budget(struct imp *m, const Onnx__GraphProto *g)
{
	uint64_t total = 0, largest = 0;
	const char *name = "";

	for (size_t i = 0; i < g->n_initializer; i++) {
		const Onnx__TensorProto *t = g->initializer[i];
		enum dt d;
		uint64_t n;
		if (!(t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) ||
		    onnx_dt(t->data_type, &d) < 0 || t->n_dims > ONNX_RANK_MAX)
			continue;  /* tensor_load refuses it by name */
		n = DT_SIZE[d];
		bool bad = false;
		for (size_t k = 0; k < t->n_dims && !bad; k++)
			bad = t->dims[k] <= 0 || !mul_u64(n, (uint64_t)t->dims[k], &n) || n > ELEMS_MAX * 8;
		if (bad || (m->zero_min && n >= m->zero_min))
			continue;
		total += n;
		if (n > largest) {
			largest = n;
			name = t->name ? t->name : "";
		}
	}
	if (total <= ONNX_EXTERNAL_MAX)
		return 0;
	return refuse(m, "the model's external data to be read is %" PRIu64 " bytes (the largest tensor: "
		      "initializer \"%.*s\", %" PRIu64 " bytes), more than %llu (ONNX_EXTERNAL_MAX): real weights "
		      "are held in memory during the import%s", total, ONNX_NAME_MAX, name, largest,
		      (unsigned long long)ONNX_EXTERNAL_MAX,
		      m->zero_min ? "" : "; --weights zero does not read large constants");
}

static int import_graph(struct imp *m, const Onnx__ModelProto *model, const struct onnx_options *o,
			struct strbuf *out)
{
	const Onnx__GraphProto *g = model->graph;
	struct strbuf sig = { 0 }, ret = { 0 }, rty = { 0 };
	bool pinned_used[ONNX_SHAPES_MAX] = { 0 };
	int r = 0;

	if (!g)
		return refuse(m, "the model has no graph");
	for (size_t i = 0; i < model->n_opset_import; i++) {
		const Onnx__OperatorSetIdProto *op = model->opset_import[i];
		if (!op->domain || !*op->domain || !strcmp(op->domain, "ai.onnx"))
			m->opset = op->version;
	}
	if ((r = check_operators(m, g)) < 0 || (r = external_budget(m, g)) < 0)
		return r;
	for (size_t i = 0; i < g->n_initializer; i++) {
		struct val *v;
		char what[ONNX_NAME_MAX + 32];
		snprintf(what, sizeof what, "initializer \"%.*s\"", ONNX_NAME_MAX,
			 g->initializer[i]->name ? g->initializer[i]->name : "");
		if ((r = tensor_load(m, g->initializer[i], what, &v)) < 0 ||
		    (r = define(m, g->initializer[i]->name, v)) < 0)
			return r;
	}
	size_t k = 0, consts_used = 0;
	for (size_t i = 0; i < g->n_input; i++) {
		if (g->input[i]->name && lookup(m, g->input[i]->name))
			continue; /* an initializer listed as input (IR version < 4) */
		const struct onnx_const_input *c = NULL;
		for (size_t j = 0; j < o->n_consts; j++)
			if (g->input[i]->name && !strcmp(o->consts[j].name, g->input[i]->name))
				c = &o->consts[j];
		if (c) {
			consts_used++;
			if ((r = const_input(m, g->input[i], c)) < 0)
				goto done;
		} else if ((r = graph_input(m, g->input[i], o, pinned_used, &sig, k++)) < 0)
			goto done;
	}
	for (size_t i = 0; i < o->n_shapes; i++)
		if (!pinned_used[i]) {
			r = refuse(m, "--input-shape %s: the model has no input of that name", o->shapes[i].name);
			goto done;
		}
	for (size_t i = 0; i < o->n_consts && consts_used < o->n_consts; i++)
		if (!lookup(m, o->consts[i].name)) {
			r = refuse(m, "--const-input %s: the model has no input of that name", o->consts[i].name);
			goto done;
		}
	for (size_t i = 0; i < g->n_node; i++) {
		set_node(m, g->node[i], i);
		const char *dom = g->node[i]->domain;
		if (dom && *dom && strcmp(dom, "ai.onnx") != 0) {
			r = refuse(m, "operator domain \"%s\" is not supported", dom);
			goto done;
		}
		if (m->opset <= 0) {
			r = refuse(m, "the model imports no version of the default operator set");
			goto done;
		}
		if ((r = dispatch(m)) < 0)
			goto done;
		if (m->body.error) {
			r = oom(m);
			goto done;
		}
	}
	m->node = NULL;
	if (g->n_output == 0) {
		r = refuse(m, "the graph has no outputs");
		goto done;
	}
	long *seen = calloc(g->n_output, sizeof *seen);
	if (!seen) {
		r = oom(m);
		goto done;
	}
	for (size_t i = 0; i < g->n_output; i++) {
		const char *name = g->output[i]->name ? g->output[i]->name : "";
		struct val *v = lookup(m, name);
		if (!v) {
			free(seen);
			r = refuse(m, "graph output \"%s\" is not computed by any node", name);
			goto done;
		}
		const Onnx__TypeProto *tp = g->output[i]->type;
		if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type &&
		    tp->tensor_type->has_elem_type) {
			enum dt t;
			if (onnx_dt(tp->tensor_type->elem_type, &t) < 0 || t != v->dt) {
				free(seen);
				r = refuse(m, "graph output \"%s\": declared as %s, computed as %s", name,
					   onnx_dt_name(tp->tensor_type->elem_type), DT_MLIR[v->dt]);
				goto done;
			}
		}
		/* A fresh buffer per result: an argument, a constant, a view of another buffer, or a
		 * value returned twice gets a copy nest. */
		long id = ssa_of(m, v);
		bool dup = false;
		for (size_t j = 0; j < i; j++)
			dup = dup || seen[j] == id;
		char en[2 * ONNX_NAME_MAX];
		snprintf(m->node_name, sizeof m->node_name, "%.*s", ONNX_NAME_MAX, name);
		m->nest = 0;
		mlir_str(en, sizeof en, name);
		snprintf(m->loc, sizeof m->loc, "loc(\"%s\"(\"Identity\"))", en);
		/* A graph of views and pads only (no linalg op) gets its results copied too: the
		 * extractor needs a loop nest. */
		if (v->is_arg || v->is_view || dup || m->n_linalg == 0)
			id = emit_copy(m, v);
		seen[i] = id;
		char ty[256];
		vtype(ty, sizeof ty, v);
		strbuf_printf(&ret, "%s%%v%ld", i ? ", " : "", id);
		strbuf_printf(&rty, "%s%s", i ? ", " : "", ty);
	}
	free(seen);
	strbuf_printf(out, "module {\n  func.func @forward(%s) -> (%s) {\n", sig.p ? sig.p : "", rty.p);
	strbuf_put(out, m->body.p ? m->body.p : "", m->body.len);
	strbuf_printf(out, "    return %s : %s\n  }\n}\n", ret.p, rty.p);
	if (out->error || sig.error || ret.error || rty.error || m->body.error)
		r = oom(m);
done:
	free(sig.p);
	free(ret.p);
	free(rty.p);
	return r;
}

/* ---------------------------------------------------------------- public */

int onnx_parse_input_shape(const char *arg, struct onnx_shape *out, struct pim_error *err)
{
	const char *eq = strrchr(arg, '=');

	memset(out, 0, sizeof *out);
	if (!eq || eq == arg)
		return err_set(err, -EINVAL, "--input-shape %s: expected NAME=D0xD1x... (e.g. input_ids=1x128)", arg);
	if ((size_t)(eq - arg) > ONNX_NAME_MAX)
		return err_set(err, -EINVAL, "--input-shape: name longer than %d bytes", ONNX_NAME_MAX);
	memcpy(out->name, arg, (size_t)(eq - arg));
	const char *p = eq + 1;
	while (*p) {
		char *end;
		if (out->rank == ONNX_RANK_MAX)
			return err_set(err, -EINVAL, "--input-shape %s: more than %d dimensions", arg, ONNX_RANK_MAX);
		if (*p < '0' || *p > '9')
			return err_set(err, -EINVAL, "--input-shape %s: \"%s\" is not a dimension", arg, p);
		errno = 0;
		unsigned long long v = strtoull(p, &end, 10);
		if (errno || v == 0 || v > ELEMS_MAX)
			return err_set(err, -EINVAL, "--input-shape %s: dimension %zu must be 1 to %llu", arg,
				       out->rank, (unsigned long long)ELEMS_MAX);
		out->dims[out->rank++] = (int64_t)v;
		p = end;
		if (*p == 'x' && p[1])
			p++;
		else if (*p)
			return err_set(err, -EINVAL, "--input-shape %s: expected dimensions separated by 'x'", arg);
	}
	return 0;
}

int onnx_parse_const_input(const char *arg, struct onnx_const_input *out, struct pim_error *err)
{
	const char *eq = strchr(arg, '=');

	memset(out, 0, sizeof *out);
	if (!eq || eq == arg || !eq[1])
		return err_set(err, -EINVAL, "--const-input %s: expected NAME=FILE.pb", arg);
	if ((size_t)(eq - arg) > ONNX_NAME_MAX)
		return err_set(err, -EINVAL, "--const-input: name longer than %d bytes", ONNX_NAME_MAX);
	memcpy(out->name, arg, (size_t)(eq - arg));
	out->path = eq + 1;
	return 0;
}

bool onnx_is_model(const char *path)
{
	size_t n = strlen(path);
	if (n >= 5 && !strcmp(path + n - 5, ".onnx"))
		return true;
	FILE *f = fopen(path, "rb");
	if (!f)
		return false;
	unsigned char b[2] = { 0 };
	size_t got = fread(b, 1, 2, f);
	fclose(f);
	/* ModelProto field 1 (ir_version, varint): tag 0x08, then a small version number.  MLIR
	 * text never starts with a control byte. */
	return got == 2 && b[0] == 0x08 && b[1] > 0 && b[1] < 0x20;
}

int onnx_import(const struct onnx_options *o, char **mlir, size_t *len, struct pim_error *err)
{
	_cleanup_(freep) char *bytes = NULL;
	size_t n = 0;
	int r;

	if (o->n_shapes > ONNX_SHAPES_MAX || o->n_consts > ONNX_SHAPES_MAX)
		return err_set(err, -EINVAL, "more than %d --input-shape or --const-input options", ONNX_SHAPES_MAX);
	if ((r = read_file(o->input, ONNX_INPUT_MAX, &bytes, &n, err)) < 0)
		return r;
	Onnx__ModelProto *model = onnx__model_proto__unpack(NULL, n, (const uint8_t *)bytes);
	free(TAKE_PTR(bytes));  /* protobuf-c copied what it keeps: a big model is not held twice */
	if (!model)
		return err_set(err, -EINVAL, "%s: not a valid ONNX model (protobuf ModelProto)", o->input);
	struct imp m = { .path = o->input, .err = err, .zero_min = o->zero_min };
	struct strbuf out = { 0 };
	r = import_graph(&m, model, o, &out);
	for (size_t i = 0; i < m.n_vals; i++)
		val_free(m.vals[i]);
	free(m.vals);
	free(m.hash);
	free(m.body.p);
	onnx__model_proto__free_unpacked(model, NULL);
	if (r < 0) {
		free(out.p);
		return r;
	}
	*mlir = out.p;
	*len = out.len;
	return 0;
}
