/* SPDX-License-Identifier: MIT */
/*
 * onnx_value.c: the importer's values and the node in hand (onnx_internal.h).  The element
 * types' half-precision conversions and rounding; MLIR text of names, float literals and
 * tensor types; refusals; the value table (lookup, define, the value constructors and element
 * access of host data); a node's attributes, inputs and outputs with their checks.
 */
#include "onnx_internal.h"

#include <sys/mman.h>

const char *const DT_MLIR[] = { "f32", "f64", "i64", "i32", "i8", "f16", "bf16" };
const size_t DT_SIZE[] = { 4, 8, 8, 4, 1, 2, 2 };

/* IEEE binary16 <-> binary32 (round to nearest even), and bfloat16, the upper half of a
 * binary32 (same rounding; a NaN stays a quiet NaN). */
float f16_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, f = h & 0x3ff, u;
	float x;

	if (e == 0x1f)
		u = sign | 0x7f800000 | (f << 13);
	else if (e)
		u = sign | ((e + 112) << 23) | (f << 13);
	else {
		x = (float)f * 0x1p-24f;  /* zero or subnormal: exact in binary32 */
		return sign ? -x : x;
	}
	memcpy(&x, &u, 4);
	return x;
}

uint16_t float_to_f16(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
	uint32_t a = u & 0x7fffffff;

	if (a > 0x7f800000)
		return sign | 0x7e00;                        /* NaN */
	if (a >= 0x477ff000)
		return sign | 0x7c00;                        /* rounds past 65504: inf */
	if (a < 0x38800000) {                                /* below 2^-14: subnormal or zero */
		float m = fabsf(x) * 0x1p24f;               /* in units of 2^-24 */
		return sign | (uint16_t)nearbyintf(m);       /* current mode: to nearest even */
	}
	uint32_t r = a + 0xfff + ((a >> 13) & 1);            /* to nearest, ties to even */
	return sign | (uint16_t)((r - 0x38000000) >> 13);
}

float bf16_to_float(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float x;
	memcpy(&x, &u, 4);
	return x;
}

uint16_t float_to_bf16(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	if ((u & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((u >> 16) | 0x40);
	return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

/* x rounded to the precision of float type t. */
double round_to(double x, enum dt t)
{
	switch (t) {
	case DT_F32: return (float)x;
	case DT_F16: return f16_to_float(float_to_f16((float)x));
	case DT_BF16: return bf16_to_float(float_to_bf16((float)x));
	default: return x;
	}
}

/* ---------------------------------------------------------------- text */

/* A string literal of MLIR (quotes and backslashes escaped, control bytes as \XX). */
void mlir_str(char *out, size_t n, const char *s)
{
	size_t k = 0;

	for (; *s && k + 4 < n; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\' || c < 0x20 || c >= 0x7f)
			k += (size_t)snprintf(out + k, n - k, "\\%02X", c);
		else
			out[k++] = (char)c;
	}
	out[k] = 0;
}

/* A float literal MLIR parses for type t (inf and nan as bit patterns). */
void fmt_float(char *out, size_t n, double v, enum dt t)
{
	v = round_to(v, t);
	if (isfinite(v)) {
		snprintf(out, n, "%.17g", v);
		if (!strpbrk(out, ".eEn"))
			strncat(out, ".0", n - strlen(out) - 1);
		return;
	}
	if (dt_half(t)) {
		snprintf(out, n, "0x%04X", t == DT_F16 ? float_to_f16((float)v) : float_to_bf16((float)v));
	} else if (t == DT_F32) {
		float f = (float)v;
		uint32_t u;
		memcpy(&u, &f, 4);
		snprintf(out, n, "0x%08" PRIX32, u);
	} else {
		uint64_t u;
		memcpy(&u, &v, 8);
		snprintf(out, n, "0x%016" PRIX64, u);
	}
}

void tensor_type(char *out, size_t n, enum dt t, size_t rank, const int64_t *dims)
{
	size_t k = (size_t)snprintf(out, n, "tensor<");
	for (size_t i = 0; i < rank && k < n; i++)
		k += (size_t)snprintf(out + k, n - k, "%" PRId64 "x", dims[i]);
	if (k < n)
		snprintf(out + k, n - k, "%s>", DT_MLIR[t]);
}

void vtype(char *out, size_t n, const struct val *v) { tensor_type(out, n, v->dt, v->rank, v->dims); }

/* ---------------------------------------------------------------- errors */

int refuse(struct imp *m, const char *fmt, ...)
{
	char msg[320];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (m->node)
		return err_set(m->err, -EINVAL, "%s: node %s (%s): %s", m->path, m->node_name,
			       m->node->op_type, msg);
	return err_set(m->err, -EINVAL, "%s: %s", m->path, msg);
}

int oom(struct imp *m) { return err_set(m->err, -ENOMEM, "out of memory"); }

/* ---------------------------------------------------------------- values */

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

struct val *lookup(struct imp *m, const char *name)
{
	if (!m->hash_cap)
		return NULL;
	for (size_t i = hash_str(name) & (m->hash_cap - 1);; i = (i + 1) & (m->hash_cap - 1)) {
		struct val *v = m->hash[i];
		if (!v)
			return NULL;
		if (strcmp(v->name, name) == 0)
			return v;
	}
}

int64_t numel(const struct val *v)
{
	int64_t n = 1;
	for (size_t i = 0; i < v->rank; i++)
		n *= v->dims[i];
	return n;
}

void val_free(struct val *v)
{
	if (!v)
		return;
	free(v->name);
	if (v->zero_len)
		munmap(v->data, v->zero_len);
	else
		free(v->data);
	free(v);
}

/* Checks a shape: rank, positive dims, element count. */
int check_shape(struct imp *m, const char *what, size_t rank, const int64_t *dims)
{
	uint64_t n = 1;

	if (rank > ONNX_RANK_MAX)
		return refuse(m, "%s has rank %zu, at most %d supported", what, rank, ONNX_RANK_MAX);
	for (size_t i = 0; i < rank; i++) {
		if (dims[i] <= 0)
			return refuse(m, "%s has dimension %zu of size %" PRId64 " (zero-sized tensors are not "
				      "supported)", what, i, dims[i]);
		if (!mul_u64(n, (uint64_t)dims[i], &n) || n > ELEMS_MAX)
			return refuse(m, "%s has more than %llu elements", what, (unsigned long long)ELEMS_MAX);
	}
	return 0;
}

/* Defines (or redefines: SSA form in ONNX makes that an error) a value named name. */
int define(struct imp *m, const char *name, struct val *v)
{
	if (!name || !*name)
		return refuse(m, "a value without a name");
	if (lookup(m, name)) {
		val_free(v);
		return refuse(m, "value \"%s\" is defined twice", name);
	}
	if (m->n_vals >= VALS_MAX) {
		val_free(v);
		return refuse(m, "more than %u values", VALS_MAX);
	}
	if (!(v->name = strdup(name))) {
		val_free(v);
		return oom(m);
	}
	if (m->n_vals == m->cap_vals) {
		size_t cap = m->cap_vals ? 2 * m->cap_vals : 256;
		struct val **p = realloc(m->vals, cap * sizeof *p);
		if (!p) {
			val_free(v);
			return oom(m);
		}
		m->vals = p;
		m->cap_vals = cap;
	}
	m->vals[m->n_vals++] = v;
	if (2 * m->n_vals > m->hash_cap) {
		size_t cap = m->hash_cap ? 2 * m->hash_cap : 1024;
		struct val **h = calloc(cap, sizeof *h);
		if (!h)
			return oom(m);
		free(m->hash);
		m->hash = h;
		m->hash_cap = cap;
		for (size_t i = 0; i < m->n_vals; i++) {
			size_t k = hash_str(m->vals[i]->name) & (cap - 1);
			while (h[k])
				k = (k + 1) & (cap - 1);
			h[k] = m->vals[i];
		}
	} else {
		size_t k = hash_str(name) & (m->hash_cap - 1);
		while (m->hash[k])
			k = (k + 1) & (m->hash_cap - 1);
		m->hash[k] = v;
	}
	return 0;
}

struct val *val_new(enum dt t, size_t rank, const int64_t *dims)
{
	struct val *v = calloc(1, sizeof *v);
	if (!v)
		return NULL;
	v->dt = t;
	v->rank = rank;
	if (rank)
		memcpy(v->dims, dims, rank * sizeof *dims);
	v->ssa = -1;
	return v;
}

/* A host-data value; data zeroed. */
struct val *val_const(enum dt t, size_t rank, const int64_t *dims)
{
	struct val *v = val_new(t, rank, dims);
	if (!v)
		return NULL;
	v->data = calloc((size_t)numel(v), DT_SIZE[t]);
	if (!v->data) {
		free(v);
		return NULL;
	}
	return v;
}

/* A host-data value of zeros that holds no memory (--weights zero): its data maps the zero
 * page read-only; reading it costs no resident memory, writing it faults. */
struct val *val_zero(enum dt t, size_t rank, const int64_t *dims)
{
	struct val *v = val_new(t, rank, dims);
	if (!v)
		return NULL;
	size_t len = (size_t)numel(v) * DT_SIZE[t];
	void *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		free(v);
		return NULL;
	}
	v->data = p;
	v->zero_len = len;
	return v;
}

/* A value of the given shape known at import: zero pages when every element comes from a
 * zero value (data movement of one), fresh zeroed memory otherwise. */
struct val *val_like(const struct val *src, enum dt t, size_t rank, const int64_t *dims)
{
	return src && src->zero_len ? val_zero(t, rank, dims) : val_const(t, rank, dims);
}

double get_d(const struct val *v, int64_t i)
{
	switch (v->dt) {
	case DT_F32: return ((const float *)v->data)[i];
	case DT_F64: return ((const double *)v->data)[i];
	case DT_I64: return (double)((const int64_t *)v->data)[i];
	case DT_I32: return ((const int32_t *)v->data)[i];
	case DT_BOOL: return ((const uint8_t *)v->data)[i];
	case DT_F16: return f16_to_float(((const uint16_t *)v->data)[i]);
	case DT_BF16: return bf16_to_float(((const uint16_t *)v->data)[i]);
	}
	return 0;
}

int64_t get_i(const struct val *v, int64_t i)
{
	switch (v->dt) {
	case DT_F32: return (int64_t)((const float *)v->data)[i];
	case DT_F64: return (int64_t)((const double *)v->data)[i];
	case DT_I64: return ((const int64_t *)v->data)[i];
	case DT_I32: return ((const int32_t *)v->data)[i];
	case DT_BOOL: return ((const uint8_t *)v->data)[i];
	case DT_F16: case DT_BF16: return (int64_t)get_d(v, i);
	}
	return 0;
}

void set_d(struct val *v, int64_t i, double x)
{
	switch (v->dt) {
	case DT_F32: ((float *)v->data)[i] = (float)x; break;
	case DT_F64: ((double *)v->data)[i] = x; break;
	case DT_I64: ((int64_t *)v->data)[i] = (int64_t)x; break;
	case DT_I32: ((int32_t *)v->data)[i] = (int32_t)x; break;
	case DT_BOOL: ((uint8_t *)v->data)[i] = x != 0; break;
	case DT_F16: ((uint16_t *)v->data)[i] = float_to_f16((float)x); break;
	case DT_BF16: ((uint16_t *)v->data)[i] = float_to_bf16((float)x); break;
	}
}

void set_i(struct val *v, int64_t i, int64_t x)
{
	switch (v->dt) {
	case DT_F32: ((float *)v->data)[i] = (float)x; break;
	case DT_F64: ((double *)v->data)[i] = (double)x; break;
	case DT_I64: ((int64_t *)v->data)[i] = x; break;
	case DT_I32: ((int32_t *)v->data)[i] = (int32_t)x; break;
	case DT_BOOL: ((uint8_t *)v->data)[i] = x != 0; break;
	case DT_F16: case DT_BF16: set_d(v, i, (double)x); break;
	}
}

/* ---------------------------------------------------------------- attributes */

const Onnx__AttributeProto *attr(const Onnx__NodeProto *n, const char *name)
{
	for (size_t i = 0; i < n->n_attribute; i++)
		if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0)
			return n->attribute[i];
	return NULL;
}

int attr_int(struct imp *m, const char *name, int64_t def, int64_t *out)
{
	const Onnx__AttributeProto *a = attr(m->node, name);
	*out = def;
	if (!a)
		return 0;
	if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)
		return refuse(m, "attribute %s: expected an integer", name);
	*out = a->i;
	return 0;
}

int attr_float(struct imp *m, const char *name, double def, double *out)
{
	const Onnx__AttributeProto *a = attr(m->node, name);
	*out = def;
	if (!a)
		return 0;
	if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT)
		return refuse(m, "attribute %s: expected a float", name);
	*out = a->f;
	return 0;
}

/* ints attribute: *n = -1 when absent. */
int attr_ints(struct imp *m, const char *name, int64_t *out, long *n)
{
	const Onnx__AttributeProto *a = attr(m->node, name);
	*n = -1;
	if (!a)
		return 0;
	if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS)
		return refuse(m, "attribute %s: expected a list of integers", name);
	if (a->n_ints > ONNX_RANK_MAX * 2)
		return refuse(m, "attribute %s: %zu values, at most %d", name, a->n_ints, ONNX_RANK_MAX * 2);
	for (size_t i = 0; i < a->n_ints; i++)
		out[i] = a->ints[i];
	*n = (long)a->n_ints;
	return 0;
}

int attr_str(struct imp *m, const char *name, const char *def, char *out, size_t n)
{
	const Onnx__AttributeProto *a = attr(m->node, name);
	snprintf(out, n, "%s", def);
	if (!a)
		return 0;
	if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING)
		return refuse(m, "attribute %s: expected a string", name);
	snprintf(out, n, "%.*s", (int)a->s.len, (const char *)a->s.data);
	return 0;
}

/* Every attribute of the node is in the allowed list (NULL-terminated). */
int attrs_allowed(struct imp *m, const char *const *allowed)
{
	for (size_t i = 0; i < m->node->n_attribute; i++) {
		const char *name = m->node->attribute[i]->name ? m->node->attribute[i]->name : "";
		bool ok = false;
		for (const char *const *a = allowed; *a; a++)
			ok = ok || strcmp(*a, name) == 0;
		if (!ok)
			return refuse(m, "attribute %s is not supported", name);
	}
	return 0;
}

/* ---------------------------------------------------------------- node inputs and outputs */

size_t n_in(const struct imp *m)
{
	/* Trailing empty names are absent optional inputs. */
	size_t n = m->node->n_input;
	while (n && (!m->node->input[n - 1] || !*m->node->input[n - 1]))
		n--;
	return n;
}

int input(struct imp *m, size_t i, struct val **out)
{
	*out = NULL;
	if (i >= m->node->n_input || !m->node->input[i] || !*m->node->input[i])
		return refuse(m, "input %zu is missing", i);
	if (!(*out = lookup(m, m->node->input[i])))
		return refuse(m, "input %zu (\"%s\") is not defined before the node", i, m->node->input[i]);
	return 0;
}

/* Optional input: NULL when absent. */
int input_opt(struct imp *m, size_t i, struct val **out)
{
	*out = NULL;
	if (i >= m->node->n_input || !m->node->input[i] || !*m->node->input[i])
		return 0;
	return input(m, i, out);
}

/* Input i must be known at import (initializer, Constant, or folded). */
int input_const(struct imp *m, size_t i, const char *what, struct val **out)
{
	int r = input(m, i, out);
	if (r < 0)
		return r;
	if (!(*out)->data)
		return refuse(m, "input %zu (%s) must be known at import (a constant or computed from "
			      "shapes), it is computed at run time", i, what);
	return 0;
}

int output(struct imp *m, size_t i, struct val *v)
{
	if (i >= m->node->n_output || !m->node->output[i] || !*m->node->output[i]) {
		val_free(v);
		return 0; /* an unused optional output */
	}
	return define(m, m->node->output[i], v);
}

/* Refuses optional outputs beyond the first n that the graph asks for. */
int outputs_max(struct imp *m, size_t n)
{
	for (size_t i = n; i < m->node->n_output; i++)
		if (m->node->output[i] && *m->node->output[i])
			return refuse(m, "output %zu (\"%s\") is not supported", i, m->node->output[i]);
	return 0;
}

int need_dt(struct imp *m, const struct val *v, bool float_only)
{
	if (float_only && !dt_float(v->dt))
		return refuse(m, "input \"%s\" has element type %s, only float, double, float16 and bfloat16 "
			      "are supported",
			      v->name, DT_MLIR[v->dt]);
	return 0;
}
