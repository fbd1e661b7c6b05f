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
 */
#include "onnx.h"

#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "onnx.pb-c.h"
#include "strbuf.h"

#define VALS_MAX 1000000u
#define ELEMS_MAX (1ull << 31)   /* elements of one tensor */
#define FOLD_MAX (1ull << 24)    /* elements of a tensor folded at import */

enum dt { DT_F32, DT_F64, DT_I64, DT_I32, DT_BOOL, DT_F16, DT_BF16 };

static const char *const DT_MLIR[] = { "f32", "f64", "i64", "i32", "i8", "f16", "bf16" };
static const size_t DT_SIZE[] = { 4, 8, 8, 4, 1, 2, 2 };
#define DT_NAMES "float, double, float16, bfloat16, int64, int32, bool"

static bool dt_float(enum dt t) { return t == DT_F32 || t == DT_F64 || t == DT_F16 || t == DT_BF16; }
static bool dt_half(enum dt t) { return t == DT_F16 || t == DT_BF16; }

/* IEEE binary16 <-> binary32 (round to nearest even), and bfloat16, the upper half of a
 * binary32 (same rounding; a NaN stays a quiet NaN). */
static float f16_to_float(uint16_t h)
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

static uint16_t float_to_f16(float x)
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

static float bf16_to_float(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float x;
	memcpy(&x, &u, 4);
	return x;
}

static uint16_t float_to_bf16(float x)
{
	uint32_t u;
	memcpy(&u, &x, 4);
	if ((u & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((u >> 16) | 0x40);
	return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

/* x rounded to the precision of float type t. */
static double round_to(double x, enum dt t)
{
	switch (t) {
	case DT_F32: return (float)x;
	case DT_F16: return f16_to_float(float_to_f16((float)x));
	case DT_BF16: return bf16_to_float(float_to_bf16((float)x));
	default: return x;
	}
}

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

/* ---------------------------------------------------------------- text */

/* A string literal of MLIR (quotes and backslashes escaped, control bytes as \XX). */
static void mlir_str(char *out, size_t n, const char *s)
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
static void fmt_float(char *out, size_t n, double v, enum dt t)
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

static void tensor_type(char *out, size_t n, enum dt t, size_t rank, const int64_t *dims)
{
	size_t k = (size_t)snprintf(out, n, "tensor<");
	for (size_t i = 0; i < rank && k < n; i++)
		k += (size_t)snprintf(out + k, n - k, "%" PRId64 "x", dims[i]);
	if (k < n)
		snprintf(out + k, n - k, "%s>", DT_MLIR[t]);
}

static void vtype(char *out, size_t n, const struct val *v) { tensor_type(out, n, v->dt, v->rank, v->dims); }

/* ---------------------------------------------------------------- errors */

static int refuse(struct imp *m, const char *fmt, ...) _printf_(2, 3);
static int refuse(struct imp *m, const char *fmt, ...)
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

static int oom(struct imp *m) { return err_set(m->err, -ENOMEM, "out of memory"); }

/* ---------------------------------------------------------------- values */

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static struct val *lookup(struct imp *m, const char *name)
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

static int64_t numel(const struct val *v)
{
	int64_t n = 1;
	for (size_t i = 0; i < v->rank; i++)
		n *= v->dims[i];
	return n;
}

static void val_free(struct val *v)
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
static int check_shape(struct imp *m, const char *what, size_t rank, const int64_t *dims)
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
static int define(struct imp *m, const char *name, struct val *v)
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

static struct val *val_new(enum dt t, size_t rank, const int64_t *dims)
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
static struct val *val_const(enum dt t, size_t rank, const int64_t *dims)
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
static struct val *val_zero(enum dt t, size_t rank, const int64_t *dims)
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
static struct val *val_like(const struct val *src, enum dt t, size_t rank, const int64_t *dims)
{
	return src && src->zero_len ? val_zero(t, rank, dims) : val_const(t, rank, dims);
}

static double get_d(const struct val *v, int64_t i)
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

static int64_t get_i(const struct val *v, int64_t i)
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

static void set_d(struct val *v, int64_t i, double x)
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

static void set_i(struct val *v, int64_t i, int64_t x)
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

/* ---------------------------------------------------------------- tensors of the file */

static int onnx_dt(int32_t t, enum dt *out)
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

static const char *onnx_dt_name(int32_t t)
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
static int tensor_load(struct imp *m, const Onnx__TensorProto *t, const char *what, struct val **out)
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

/* ---------------------------------------------------------------- attributes */

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *n, const char *name)
{
	for (size_t i = 0; i < n->n_attribute; i++)
		if (n->attribute[i]->name && strcmp(n->attribute[i]->name, name) == 0)
			return n->attribute[i];
	return NULL;
}

static int attr_int(struct imp *m, const char *name, int64_t def, int64_t *out)
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

static int attr_float(struct imp *m, const char *name, double def, double *out)
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
static int attr_ints(struct imp *m, const char *name, int64_t *out, long *n)
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

static int attr_str(struct imp *m, const char *name, const char *def, char *out, size_t n)
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
static int attrs_allowed(struct imp *m, const char *const *allowed)
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

static size_t n_in(const struct imp *m)
{
	/* Trailing empty names are absent optional inputs. */
	size_t n = m->node->n_input;
	while (n && (!m->node->input[n - 1] || !*m->node->input[n - 1]))
		n--;
	return n;
}

static int input(struct imp *m, size_t i, struct val **out)
{
	*out = NULL;
	if (i >= m->node->n_input || !m->node->input[i] || !*m->node->input[i])
		return refuse(m, "input %zu is missing", i);
	if (!(*out = lookup(m, m->node->input[i])))
		return refuse(m, "input %zu (\"%s\") is not defined before the node", i, m->node->input[i]);
	return 0;
}

/* Optional input: NULL when absent. */
static int input_opt(struct imp *m, size_t i, struct val **out)
{
	*out = NULL;
	if (i >= m->node->n_input || !m->node->input[i] || !*m->node->input[i])
		return 0;
	return input(m, i, out);
}

/* Input i must be known at import (initializer, Constant, or folded). */
static int input_const(struct imp *m, size_t i, const char *what, struct val **out)
{
	int r = input(m, i, out);
	if (r < 0)
		return r;
	if (!(*out)->data)
		return refuse(m, "input %zu (%s) must be known at import (a constant or computed from "
			      "shapes), it is computed at run time", i, what);
	return 0;
}

static int output(struct imp *m, size_t i, struct val *v)
{
	if (i >= m->node->n_output || !m->node->output[i] || !*m->node->output[i]) {
		val_free(v);
		return 0; /* an unused optional output */
	}
	return define(m, m->node->output[i], v);
}

/* Refuses optional outputs beyond the first n that the graph asks for. */
static int outputs_max(struct imp *m, size_t n)
{
	for (size_t i = n; i < m->node->n_output; i++)
		if (m->node->output[i] && *m->node->output[i])
			return refuse(m, "output %zu (\"%s\") is not supported", i, m->node->output[i]);
	return 0;
}

static int need_dt(struct imp *m, const struct val *v, bool float_only)
{
	if (float_only && !dt_float(v->dt))
		return refuse(m, "input \"%s\" has element type %s, only float, double, float16 and bfloat16 "
			      "are supported",
			      v->name, DT_MLIR[v->dt]);
	return 0;
}

/* ---------------------------------------------------------------- emission */

static long new_ssa(struct imp *m) { return m->ssa++; }

/* The payload converting one float type ($T) to another ($U): f16 and bf16, of one width,
 * go through f32. */
static const char *float_conv(enum dt from, enum dt to)
{
	if (from == to)
		return "$0\n";
	if (DT_SIZE[to] > DT_SIZE[from])
		return "#0 = arith.extf $0 : $T to $U\n#0";
	if (DT_SIZE[to] < DT_SIZE[from])
		return "#0 = arith.truncf $0 : $T to $U\n#0";
	return "#0 = arith.extf $0 : $T to f32\n#1 = arith.truncf #0 : f32 to $U\n#1";
}

/* Counts the linalg ops made (the extractor names each region NODE.K from its location). */
static void count_linalg(struct imp *m)
{
	m->nest++;
	m->n_linalg++;
}

/* The value as an SSA name: a constant is materialized once (arith.constant). */
static long ssa_of(struct imp *m, struct val *v)
{
	if (v->ssa >= 0)
		return v->ssa;
	char ty[256];
	vtype(ty, sizeof ty, v);
	v->ssa = new_ssa(m);
	v->is_view = true;
	size_t bytes = (size_t)numel(v) * DT_SIZE[v->dt];
	if (m->zero_min && bytes >= m->zero_min) {
		/* --weights zero: the extractor turns this splat into a zeroed global; the text
		 * stays small whatever the weights weigh. */
		strbuf_printf(&m->body, "    %%v%ld = arith.constant dense<%s> : %s %s\n", v->ssa,
			dt_float(v->dt) ? "0.0" : "0", ty, m->loc);
		return v->ssa;
	}
	strbuf_printf(&m->body, "    %%v%ld = arith.constant dense<\"0x", v->ssa);
	static const char hex[] = "0123456789ABCDEF";
	const uint8_t *p = v->data;
	char chunk[1024];
	size_t k = 0;
	for (size_t i = 0; i < bytes; i++) {
		chunk[k++] = hex[p[i] >> 4];
		chunk[k++] = hex[p[i] & 15];
		if (k == sizeof chunk) {
			strbuf_put(&m->body, chunk, k);
			k = 0;
		}
	}
	strbuf_put(&m->body, chunk, k);
	strbuf_printf(&m->body, "\"> : %s %s\n", ty, m->loc);
	return v->ssa;
}

/* %vN = tensor.empty() : T */
static long emit_empty(struct imp *m, enum dt t, size_t rank, const int64_t *dims)
{
	char ty[256];
	tensor_type(ty, sizeof ty, t, rank, dims);
	long id = new_ssa(m);
	strbuf_printf(&m->body, "    %%v%ld = tensor.empty() : %s %s\n", id, ty, m->loc);
	return id;
}

/* linalg.fill of a fresh tensor with a scalar literal. */
static long emit_filled(struct imp *m, enum dt t, size_t rank, const int64_t *dims, const char *lit)
{
	char ty[256];
	tensor_type(ty, sizeof ty, t, rank, dims);
	long e = emit_empty(m, t, rank, dims);
	long c = new_ssa(m);
	strbuf_printf(&m->body, "    %%v%ld = arith.constant %s : %s %s\n", c, lit, DT_MLIR[t], m->loc);
	long f = new_ssa(m);
	count_linalg(m);
	strbuf_printf(&m->body, "    %%v%ld = linalg.fill ins(%%v%ld : %s) outs(%%v%ld : %s) -> %s %s\n", f, c,
		DT_MLIR[t], e, ty, ty, m->loc);
	return f;
}

/* An operand of a generic: its SSA value, element type, tensor type and the results of its
 * indexing map ("d0, 0, d2"). */
struct gop {
	long ssa;
	enum dt dt;
	char type[256];
	char map[256];
};

static void gop_set(struct gop *g, long ssa, enum dt t, size_t rank, const int64_t *dims)
{
	g->ssa = ssa;
	g->dt = t;
	tensor_type(g->type, sizeof g->type, t, rank, dims);
	g->map[0] = 0;
}

static void map_add(struct gop *g, const char *fmt, ...) _printf_(2, 3);
static void map_add(struct gop *g, const char *fmt, ...)
{
	size_t k = strlen(g->map);
	va_list ap;
	if (k && k + 2 < sizeof g->map) {
		strcat(g->map, ", ");
		k += 2;
	}
	va_start(ap, fmt);
	vsnprintf(g->map + k, sizeof g->map - k, fmt, ap);
	va_end(ap);
}

/*
 * Writes a linalg.generic over ndims loops (red[i]: reduction) with the given ins and one
 * out, and the payload tmpl expanded: $0..$9 the ins' block arguments, $o the out's, $T the
 * element type of in 0, $U of the out, #0..#9 payload temporaries.  The last line of tmpl is
 * the yielded value.  Returns the result's SSA id.
 */
static long emit_generic(struct imp *m, size_t ndims, const bool *red, const struct gop *ins,
			 size_t nins, const struct gop *out, const char *tmpl)
{
	long id = new_ssa(m);
	char dl[256] = "";
	size_t k = 0;

	for (size_t i = 0; i < ndims; i++)
		k += (size_t)snprintf(dl + k, sizeof dl - k, "%sd%zu", i ? ", " : "", i);
	strbuf_printf(&m->body, "    %%v%ld = linalg.generic {indexing_maps = [", id);
	for (size_t i = 0; i <= nins; i++) {
		const struct gop *g = i < nins ? &ins[i] : out;
		strbuf_printf(&m->body, "%saffine_map<(%s) -> (%s)>", i ? ", " : "", dl, g->map);
	}
	strbuf_puts(&m->body, "], iterator_types = [");
	for (size_t i = 0; i < ndims; i++)
		strbuf_printf(&m->body, "%s\"%s\"", i ? ", " : "", red && red[i] ? "reduction" : "parallel");
	count_linalg(m);
	strbuf_puts(&m->body, "]}");
	if (nins) {
		strbuf_puts(&m->body, " ins(");
		for (size_t i = 0; i < nins; i++)
			strbuf_printf(&m->body, "%s%%v%ld", i ? ", " : "", ins[i].ssa);
		strbuf_puts(&m->body, " : ");
		for (size_t i = 0; i < nins; i++)
			strbuf_printf(&m->body, "%s%s", i ? ", " : "", ins[i].type);
		strbuf_puts(&m->body, ")");
	}
	strbuf_printf(&m->body, " outs(%%v%ld : %s) {\n    ^bb0(", out->ssa, out->type);
	for (size_t i = 0; i < nins; i++)
		strbuf_printf(&m->body, "%%a%ld_%zu: %s, ", id, i, DT_MLIR[ins[i].dt]);
	strbuf_printf(&m->body, "%%a%ld_o: %s):\n      ", id, DT_MLIR[out->dt]);
	const char *last = tmpl;
	for (const char *p = tmpl; *p; p++)
		if (*p == '\n' && p[1])
			last = p + 1;
	for (const char *p = tmpl; *p; p++) {
		if (p == last) {
			strbuf_printf(&m->body, "linalg.yield ");
		}
		if (*p == '$' && p[1] >= '0' && p[1] <= '9') {
			strbuf_printf(&m->body, "%%a%ld_%c", id, p[1]);
			p++;
		} else if (*p == '$' && p[1] == 'o') {
			strbuf_printf(&m->body, "%%a%ld_o", id);
			p++;
		} else if (*p == '$' && p[1] == 'T') {
			strbuf_puts(&m->body, DT_MLIR[nins ? ins[0].dt : out->dt]);
			p++;
		} else if (*p == '$' && p[1] == 'U') {
			strbuf_puts(&m->body, DT_MLIR[out->dt]);
			p++;
		} else if (*p == '#' && p[1] >= '0' && p[1] <= '9') {
			strbuf_printf(&m->body, "%%t%ld_%c", id, p[1]);
			p++;
		} else if (*p == '\n') {
			if (p[1])
				strbuf_puts(&m->body, "\n      ");
		} else {
			strbuf_put(&m->body, p, 1);
		}
	}
	strbuf_printf(&m->body, " : %s\n    } -> %s %s\n", DT_MLIR[out->dt], out->type, m->loc);
	return id;
}

static long generic(struct imp *m, size_t ndims, const bool *red, const struct gop *ins, size_t nins,
		    const struct gop *out, const char *tmpl)
{
	return emit_generic(m, ndims, red, ins, nins, out, tmpl);
}

/* An SSA-only value of the given shape. */
static struct val *val_ssa(enum dt t, size_t rank, const int64_t *dims, long ssa)
{
	struct val *v = val_new(t, rank, dims);
	if (v)
		v->ssa = ssa;
	return v;
}

/* Broadcast of shapes (numpy rules). */
static int broadcast(struct imp *m, struct val *const *in, size_t n, size_t *rank, int64_t *dims)
{
	*rank = 0;
	for (size_t i = 0; i < n; i++)
		if (in[i]->rank > *rank)
			*rank = in[i]->rank;
	for (size_t d = 0; d < *rank; d++)
		dims[d] = 1;
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < in[i]->rank; j++) {
			size_t d = *rank - in[i]->rank + j;
			int64_t a = dims[d], b = in[i]->dims[j];
			if (a == 1)
				dims[d] = b;
			else if (b != 1 && b != a)
				return refuse(m, "inputs do not broadcast (dimension %zu: %" PRId64 " and %" PRId64 ")",
					      d, a, b);
		}
	return 0;
}

/* The operand of v read at the loops of an output of rank/dims, right-aligned broadcast. */
static void gop_bcast(struct imp *m, struct gop *g, struct val *v, size_t rank, const int64_t *dims)
{
	gop_set(g, ssa_of(m, v), v->dt, v->rank, v->dims);
	for (size_t j = 0; j < v->rank; j++) {
		size_t d = rank - v->rank + j;
		if (v->dims[j] == 1 && dims[d] != 1)
			map_add(g, "0");
		else
			map_add(g, "d%zu", d);
	}
}

static void gop_identity(struct gop *g, size_t rank)
{
	for (size_t d = 0; d < rank; d++)
		map_add(g, "d%zu", d);
}

/* Elementwise op over broadcast inputs (at most EW_INPUTS_MAX) into a fresh tensor of type t. */
#define EW_INPUTS_MAX 8
static int emit_ew(struct imp *m, struct val *const *in, size_t n, enum dt t, const char *tmpl,
		   struct val **out)
{
	size_t rank = 0;
	int64_t dims[ONNX_RANK_MAX];
	struct gop ins[EW_INPUTS_MAX], o;
	int r = n <= EW_INPUTS_MAX ? broadcast(m, in, n, &rank, dims) : refuse(m, "more than %d inputs", EW_INPUTS_MAX);

	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		gop_bcast(m, &ins[i], in[i], rank, dims);
	gop_set(&o, emit_empty(m, t, rank, dims), t, rank, dims);
	gop_identity(&o, rank);
	long id = generic(m, rank, NULL, ins, n, &o, tmpl);
	if (!(*out = val_ssa(t, rank, dims, id)))
		return oom(m);
	return 0;
}

/* A copy of v into a fresh buffer (a graph output that would alias another buffer). */
static long emit_copy(struct imp *m, struct val *v)
{
	struct gop in, o;
	gop_set(&in, ssa_of(m, v), v->dt, v->rank, v->dims);
	gop_identity(&in, v->rank);
	gop_set(&o, emit_empty(m, v->dt, v->rank, v->dims), v->dt, v->rank, v->dims);
	gop_identity(&o, v->rank);
	return generic(m, v->rank, NULL, &in, 1, &o, "$0\n");
}

/* Reshape (same element count) through collapse to 1-D and expand: views, no nest. */
static int emit_reshape(struct imp *m, struct val *v, size_t rank, const int64_t *dims, struct val **out)
{
	char ty[256], ty1[256], tyo[256];
	int64_t n = numel(v);
	struct val *o;

	if (!(o = val_new(v->dt, rank, dims)))
		return oom(m);
	if (numel(o) != n) {
		int64_t got = numel(o);
		val_free(o);
		return refuse(m, "reshape from %" PRId64 " to %" PRId64 " elements", n, got);
	}
	o->is_view = true;
	if (v->zero_len) {
		val_free(o);
		if (!(o = val_zero(v->dt, rank, dims)))
			return oom(m);
		o->is_view = true;
		*out = o;
		return 0;
	}
	if (v->data) {
		o->data = malloc((size_t)n * DT_SIZE[v->dt]);
		if (!o->data) {
			val_free(o);
			return oom(m);
		}
		memcpy(o->data, v->data, (size_t)n * DT_SIZE[v->dt]);
		*out = o;
		return 0;
	}
	vtype(ty, sizeof ty, v);
	vtype(tyo, sizeof tyo, o);
	tensor_type(ty1, sizeof ty1, v->dt, 1, &n);
	long cur = ssa_of(m, v);
	if (v->rank != 1) {
		long id = new_ssa(m);
		if (v->rank == 0) {
			strbuf_printf(&m->body, "    %%v%ld = tensor.expand_shape %%v%ld [] output_shape [1] : %s into %s %s\n",
				id, cur, ty, ty1, m->loc);
		} else {
			strbuf_printf(&m->body, "    %%v%ld = tensor.collapse_shape %%v%ld [[", id, cur);
			for (size_t i = 0; i < v->rank; i++)
				strbuf_printf(&m->body, "%s%zu", i ? ", " : "", i);
			strbuf_printf(&m->body, "]] : %s into %s %s\n", ty, ty1, m->loc);
		}
		cur = id;
	}
	if (rank != 1) {
		long id = new_ssa(m);
		if (rank == 0) {
			strbuf_printf(&m->body, "    %%v%ld = tensor.collapse_shape %%v%ld [] : %s into %s %s\n", id, cur,
				ty1, tyo, m->loc);
		} else {
			strbuf_printf(&m->body, "    %%v%ld = tensor.expand_shape %%v%ld [[", id, cur);
			for (size_t i = 0; i < rank; i++)
				strbuf_printf(&m->body, "%s%zu", i ? ", " : "", i);
			strbuf_puts(&m->body, "]] output_shape [");
			for (size_t i = 0; i < rank; i++)
				strbuf_printf(&m->body, "%s%" PRId64, i ? ", " : "", dims[i]);
			strbuf_printf(&m->body, "] : %s into %s %s\n", ty1, tyo, m->loc);
		}
		cur = id;
	}
	o->ssa = cur;
	*out = o;
	return 0;
}

/* ---------------------------------------------------------------- folding helpers */

static void unflatten(int64_t f, size_t rank, const int64_t *dims, int64_t *idx)
{
	for (size_t d = rank; d-- > 0;) {
		idx[d] = f % dims[d];
		f /= dims[d];
	}
}

static int64_t flatten_idx(size_t rank, const int64_t *dims, const int64_t *idx)
{
	int64_t f = 0;
	for (size_t d = 0; d < rank; d++)
		f = f * dims[d] + idx[d];
	return f;
}

static const char *zero_lit(enum dt t) { return dt_float(t) ? "0.0" : "0"; }

/* Offset in v of the element at flat index i of the broadcast shape rank/dims. */
static int64_t bcast_off(const struct val *v, size_t rank, const int64_t *dims, int64_t flat)
{
	int64_t off = 0, stride = 1;

	for (size_t d = rank; d-- > 0;) {
		int64_t idx = flat % dims[d];
		flat /= dims[d];
		if (d + v->rank >= rank) {
			size_t j = d + v->rank - rank;
			if (v->dims[j] != 1)
				off += idx * stride;
			stride *= v->dims[j];
		}
	}
	return off;
}

/* A result of rank/dims may be computed at import (FOLD_MAX elements). */
static bool fold_fits(size_t rank, const int64_t *dims)
{
	uint64_t n = 1;
	for (size_t d = 0; d < rank; d++)
		n *= (uint64_t)dims[d];
	return n <= FOLD_MAX;
}

static bool all_const(struct val *const *in, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!in[i]->data)
			return false;
	return true;
}

static int norm_axis(struct imp *m, int64_t axis, size_t rank, size_t *out)
{
	*out = 0;
	if (axis < -(int64_t)rank || axis >= (int64_t)rank)
		return refuse(m, "axis %" PRId64 " is out of range for rank %zu", axis, rank);
	*out = (size_t)(axis < 0 ? axis + (int64_t)rank : axis);
	return 0;
}

/* The values of a constant 1-D (or scalar) integer input. */
static int const_ints(struct imp *m, struct val *v, const char *what, int64_t *out, size_t max, size_t *n)
{
	if (!v->data || v->rank > 1 || dt_float(v->dt))
		return refuse(m, "%s must be a constant integer list", what);
	if ((size_t)numel(v) > max)
		return refuse(m, "%s has %" PRId64 " values, at most %zu", what, numel(v), max);
	*n = (size_t)numel(v);
	for (size_t i = 0; i < *n; i++)
		out[i] = get_i(v, (int64_t)i);
	return 0;
}

/* ---------------------------------------------------------------- elementwise operators */

enum ew_kind { EW_SAME, EW_BOOL, EW_SECOND };  /* result type: input's, bool, input 1's */

struct ewop {
	const char *name;
	size_t arity;
	enum ew_kind kind;
	const char *ftmpl;  /* float payload, or NULL */
	const char *itmpl;  /* integer payload (i64/i32/bool), or NULL */
};

static const struct ewop EWOPS[] = {
	{ "Add", 2, EW_SAME, "#0 = arith.addf $0, $1 : $T\n#0", "#0 = arith.addi $0, $1 : $T\n#0" },
	{ "Sub", 2, EW_SAME, "#0 = arith.subf $0, $1 : $T\n#0", "#0 = arith.subi $0, $1 : $T\n#0" },
	{ "Mul", 2, EW_SAME, "#0 = arith.mulf $0, $1 : $T\n#0", "#0 = arith.muli $0, $1 : $T\n#0" },
	{ "Div", 2, EW_SAME, "#0 = arith.divf $0, $1 : $T\n#0", "#0 = arith.divsi $0, $1 : $T\n#0" },
	{ "Pow", 2, EW_SAME, "#0 = math.powf $0, $1 : $T\n#0", NULL },
	{ "Relu", 1, EW_SAME, "#0 = arith.constant 0.0 : $T\n#1 = arith.maximumf $0, #0 : $T\n#1",
	  "#0 = arith.constant 0 : $T\n#1 = arith.maxsi $0, #0 : $T\n#1" },
	{ "Tanh", 1, EW_SAME, "#0 = math.tanh $0 : $T\n#0", NULL },
	{ "Erf", 1, EW_SAME, "#0 = math.erf $0 : $T\n#0", NULL },
	{ "Sqrt", 1, EW_SAME, "#0 = math.sqrt $0 : $T\n#0", NULL },
	{ "Exp", 1, EW_SAME, "#0 = math.exp $0 : $T\n#0", NULL },
	{ "Log", 1, EW_SAME, "#0 = math.log $0 : $T\n#0", NULL },
	{ "Sin", 1, EW_SAME, "#0 = math.sin $0 : $T\n#0", NULL },
	{ "Cos", 1, EW_SAME, "#0 = math.cos $0 : $T\n#0", NULL },
	{ "Floor", 1, EW_SAME, "#0 = math.floor $0 : $T\n#0", NULL },
	{ "Ceil", 1, EW_SAME, "#0 = math.ceil $0 : $T\n#0", NULL },
	{ "Abs", 1, EW_SAME, "#0 = math.absf $0 : $T\n#0", "#0 = math.absi $0 : $T\n#0" },
	{ "Neg", 1, EW_SAME, "#0 = arith.negf $0 : $T\n#0",
	  "#0 = arith.constant 0 : $T\n#1 = arith.subi #0, $0 : $T\n#1" },
	{ "Reciprocal", 1, EW_SAME, "#0 = arith.constant 1.0 : $T\n#1 = arith.divf #0, $0 : $T\n#1", NULL },
	{ "Sigmoid", 1, EW_SAME,
	  "#0 = arith.negf $0 : $T\n#1 = math.exp #0 : $T\n#2 = arith.constant 1.0 : $T\n"
	  "#3 = arith.addf #2, #1 : $T\n#4 = arith.divf #2, #3 : $T\n#4", NULL },
	{ "Equal", 2, EW_BOOL, "#0 = arith.cmpf oeq, $0, $1 : $T\n#1 = arith.extui #0 : i1 to i8\n#1",
	  "#0 = arith.cmpi eq, $0, $1 : $T\n#1 = arith.extui #0 : i1 to i8\n#1" },
	{ "Less", 2, EW_BOOL, "#0 = arith.cmpf olt, $0, $1 : $T\n#1 = arith.extui #0 : i1 to i8\n#1",
	  "#0 = arith.cmpi slt, $0, $1 : $T\n#1 = arith.extui #0 : i1 to i8\n#1" },
	{ "Greater", 2, EW_BOOL, "#0 = arith.cmpf ogt, $0, $1 : $T\n#1 = arith.extui #0 : i1 to i8\n#1",
	  "#0 = arith.cmpi sgt, $0, $1 : $T\n#1 = arith.extui #0 : i1 to i8\n#1" },
	{ "Not", 1, EW_SAME, NULL, "#0 = arith.constant 1 : i8\n#1 = arith.xori $0, #0 : i8\n#1" },
	{ "And", 2, EW_SAME, NULL, "#0 = arith.andi $0, $1 : i8\n#0" },
	{ "Or", 2, EW_SAME, NULL, "#0 = arith.ori $0, $1 : i8\n#0" },
	{ "Where", 3, EW_SECOND, NULL,
	  "#0 = arith.constant 0 : i8\n#1 = arith.cmpi ne, $0, #0 : i8\n#2 = arith.select #1, $1, $2 : $U\n#2" },
};

static double fold_d(const char *op, double a, double b)
{
	if (!strcmp(op, "Add")) return a + b;
	if (!strcmp(op, "Sub")) return a - b;
	if (!strcmp(op, "Mul")) return a * b;
	if (!strcmp(op, "Div")) return a / b;
	if (!strcmp(op, "Pow")) return pow(a, b);
	if (!strcmp(op, "Relu")) return a > 0 ? a : 0;
	if (!strcmp(op, "Tanh")) return tanh(a);
	if (!strcmp(op, "Erf")) return erf(a);
	if (!strcmp(op, "Sqrt")) return sqrt(a);
	if (!strcmp(op, "Exp")) return exp(a);
	if (!strcmp(op, "Log")) return log(a);
	if (!strcmp(op, "Sin")) return sin(a);
	if (!strcmp(op, "Cos")) return cos(a);
	if (!strcmp(op, "Floor")) return floor(a);
	if (!strcmp(op, "Ceil")) return ceil(a);
	if (!strcmp(op, "Abs")) return fabs(a);
	if (!strcmp(op, "Neg")) return -a;
	if (!strcmp(op, "Reciprocal")) return 1 / a;
	if (!strcmp(op, "Sigmoid")) return 1 / (1 + exp(-a));
	if (!strcmp(op, "Equal")) return a == b;
	if (!strcmp(op, "Less")) return a < b;
	if (!strcmp(op, "Greater")) return a > b;
	return 0;
}

static int64_t fold_i(const char *op, int64_t a, int64_t b, int64_t c)
{
	if (!strcmp(op, "Add")) return (int64_t)((uint64_t)a + (uint64_t)b);
	if (!strcmp(op, "Sub")) return (int64_t)((uint64_t)a - (uint64_t)b);
	if (!strcmp(op, "Mul")) return (int64_t)((uint64_t)a * (uint64_t)b);
	if (!strcmp(op, "Div")) return b == 0 || (a == INT64_MIN && b == -1) ? 0 : a / b;
	if (!strcmp(op, "Relu")) return a > 0 ? a : 0;
	if (!strcmp(op, "Abs")) return a < 0 ? -a : a;
	if (!strcmp(op, "Neg")) return -a;
	if (!strcmp(op, "Equal")) return a == b;
	if (!strcmp(op, "Less")) return a < b;
	if (!strcmp(op, "Greater")) return a > b;
	if (!strcmp(op, "Not")) return !a;
	if (!strcmp(op, "And")) return a && b;
	if (!strcmp(op, "Or")) return a || b;
	if (!strcmp(op, "Where")) return a ? b : c;
	return 0;
}

static int op_elementwise(struct imp *m, const struct ewop *e)
{
	struct val *in[3] = { NULL, NULL, NULL };
	int r;

	static const char *const none[] = { NULL };
	if ((r = attrs_allowed(m, none)) < 0 || (r = outputs_max(m, 1)) < 0)
		return r;
	if (n_in(m) != e->arity)
		return refuse(m, "%zu inputs, expected %zu", n_in(m), e->arity);
	for (size_t i = 0; i < e->arity; i++)
		if ((r = input(m, i, &in[i])) < 0)
			return r;
	/* Operand types: all equal (Where: the condition is bool, Pow: the exponent is cast). */
	struct val *ref = e->kind == EW_SECOND ? in[1] : in[0];
	bool is_float = dt_float(ref->dt);
	for (size_t i = 0; i < e->arity; i++) {
		if (e->kind == EW_SECOND && i == 0) {
			if (in[0]->dt != DT_BOOL)
				return refuse(m, "condition must be bool");
			continue;
		}
		if (in[i]->dt != ref->dt && strcmp(e->name, "Pow") != 0)
			return refuse(m, "inputs have different element types (%s, %s)", DT_MLIR[ref->dt],
				      DT_MLIR[in[i]->dt]);
	}
	if ((!strcmp(e->name, "Not") || !strcmp(e->name, "And") || !strcmp(e->name, "Or")) &&
	    ref->dt != DT_BOOL)
		return refuse(m, "input type %s, expected bool", DT_MLIR[ref->dt]);
	const char *tmpl = e->kind == EW_SECOND ? e->itmpl : is_float ? e->ftmpl : e->itmpl;
	if (!tmpl)
		return refuse(m, "element type %s is not supported", DT_MLIR[ref->dt]);
	enum dt out_dt = e->kind == EW_BOOL ? DT_BOOL : ref->dt;
	size_t rank;
	int64_t dims[ONNX_RANK_MAX];
	if ((r = broadcast(m, in, e->arity, &rank, dims)) < 0)
		return r;

	if (all_const(in, e->arity) && fold_fits(rank, dims)) {
		struct val *o = val_const(out_dt, rank, dims);
		if (!o)
			return oom(m);
		for (int64_t i = 0, n = numel(o); i < n; i++) {
			int64_t a = bcast_off(in[0], rank, dims, i);
			int64_t b = e->arity > 1 ? bcast_off(in[1], rank, dims, i) : 0;
			int64_t c = e->arity > 2 ? bcast_off(in[2], rank, dims, i) : 0;
			if (e->kind == EW_SECOND) {
				if (dt_float(out_dt))
					set_d(o, i, get_i(in[0], a) ? get_d(in[1], b) : get_d(in[2], c));
				else
					set_i(o, i, get_i(in[0], a) ? get_i(in[1], b) : get_i(in[2], c));
			} else if (is_float) {
				set_d(o, i, fold_d(e->name, get_d(in[0], a), e->arity > 1 ? get_d(in[1], b) : 0));
			} else {
				set_i(o, i, fold_i(e->name, get_i(in[0], a), e->arity > 1 ? get_i(in[1], b) : 0, 0));
			}
		}
		return output(m, 0, o);
	}
	struct val *ops[3] = { in[0], in[1], in[2] };
	struct val *tmp = NULL;
	if (!strcmp(e->name, "Pow") && in[1]->dt != in[0]->dt) {
		/* The exponent in the base's type. */
		struct gop g, o;
		gop_set(&g, ssa_of(m, in[1]), in[1]->dt, in[1]->rank, in[1]->dims);
		gop_identity(&g, in[1]->rank);
		gop_set(&o, emit_empty(m, in[0]->dt, in[1]->rank, in[1]->dims), in[0]->dt, in[1]->rank,
			in[1]->dims);
		gop_identity(&o, in[1]->rank);
		const char *cv = dt_float(in[1]->dt) ? float_conv(in[1]->dt, in[0]->dt)
						 : "#0 = arith.sitofp $0 : $T to $U\n#0";
		long id = generic(m, in[1]->rank, NULL, &g, 1, &o, cv);
		if (!(tmp = val_ssa(in[0]->dt, in[1]->rank, in[1]->dims, id)))
			return oom(m);
		ops[1] = tmp;
	}
	struct val *o = NULL;
	r = emit_ew(m, ops, e->arity, out_dt, tmpl, &o);
	val_free(tmp);
	if (r < 0)
		return r;
	return output(m, 0, o);
}

/* Clip: min(max(x, lo), hi), either bound optional (inputs from opset 11, attributes before);
 * a bound known at import is a literal of the payload, else an operand. */
static int op_clip(struct imp *m)
{
	static const char *const allowed[] = { "min", "max", NULL };
	struct val *x, *b[2] = { NULL, NULL };
	double ab[2];
	bool has[2] = { false, false };
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0)
		return r;
	if (x->dt == DT_BOOL)
		return refuse(m, "input \"%s\" has element type %s, float types, int64 and int32 are supported",
			      x->name, DT_MLIR[x->dt]);
	bool fl = dt_float(x->dt);
	for (size_t i = 0; i < 2; i++) {
		const char *what = i ? "max" : "min";
		if (m->opset < 11) {
			has[i] = attr(m->node, what) != NULL;
			if ((r = attr_float(m, what, 0, &ab[i])) < 0)
				return r;
			continue;
		}
		if ((r = input_opt(m, i + 1, &b[i])) < 0)
			return r;
		if (!b[i])
			continue;
		if (b[i]->dt != x->dt || numel(b[i]) != 1 || b[i]->rank > 1)
			return refuse(m, "input %zu (%s) must be a scalar of the input's element type %s", i + 1, what,
				      DT_MLIR[x->dt]);
		has[i] = true;
		if (b[i]->data) {
			ab[i] = get_d(b[i], 0);
			b[i] = NULL;  /* a literal */
		}
	}
	if (x->data && !b[0] && !b[1] && fold_fits(x->rank, x->dims)) {
		struct val *o = val_const(x->dt, x->rank, x->dims);
		if (!o)
			return oom(m);
		for (int64_t i = 0, n = numel(x); i < n; i++) {
			double v = get_d(x, i);
			int64_t vi = get_i(x, i);
			if (has[0] && (fl ? v < ab[0] : vi < (int64_t)ab[0]))
				v = ab[0], vi = (int64_t)ab[0];
			if (has[1] && (fl ? v > ab[1] : vi > (int64_t)ab[1]))
				v = ab[1], vi = (int64_t)ab[1];
			if (fl)
				set_d(o, i, v);
			else
				set_i(o, i, vi);
		}
		return output(m, 0, o);
	}
	/* $0 the input, $1.. the bounds given at run time; #0.. the payload's values. */
	struct val *ins[3] = { x, NULL, NULL };
	size_t nins = 1, t = 0;
	char tmpl[400] = "", cur[8] = "$0";
	for (size_t i = 0; i < 2; i++) {
		char ref[8], lit[64];
		if (!has[i])
			continue;
		if (b[i]) {
			ins[nins] = b[i];
			snprintf(ref, sizeof ref, "$%zu", nins++);
		} else {
			if (fl)
				fmt_float(lit, sizeof lit, ab[i], x->dt);
			else
				snprintf(lit, sizeof lit, "%" PRId64, (int64_t)ab[i]);
			snprintf(tmpl + strlen(tmpl), sizeof tmpl - strlen(tmpl), "#%zu = arith.constant %s : $T\n", t, lit);
			snprintf(ref, sizeof ref, "#%zu", t++);
		}
		snprintf(tmpl + strlen(tmpl), sizeof tmpl - strlen(tmpl), "#%zu = arith.%s %s, %s : $T\n", t,
			 fl ? (i ? "minimumf" : "maximumf") : (i ? "minsi" : "maxsi"), cur, ref);
		snprintf(cur, sizeof cur, "#%zu", t++);
	}
	snprintf(tmpl + strlen(tmpl), sizeof tmpl - strlen(tmpl), "%s\n", cur);
	struct val *o = NULL;
	if ((r = emit_ew(m, ins, nins, x->dt, tmpl, &o)) < 0)
		return r;
	return output(m, 0, o);
}

/* CumSum along a constant axis (exclusive, reverse).  linalg has no scan: the nest sums, for
 * each output element, the input elements at or before it along the axis (a reduction loop
 * over the axis, masked with linalg.index), i.e. n^2/2 additions along an axis of n. */
static int op_cumsum(struct imp *m)
{
	static const char *const allowed[] = { "exclusive", "reverse", NULL };
	struct val *x, *ax, *o;
	int64_t excl, rev;
	size_t a;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = input_const(m, 1, "axis", &ax)) < 0 || (r = attr_int(m, "exclusive", 0, &excl)) < 0 ||
	    (r = attr_int(m, "reverse", 0, &rev)) < 0)
		return r;
	if (x->dt == DT_BOOL)
		return refuse(m, "input \"%s\" has element type %s, float types, int64 and int32 are supported",
			      x->name, DT_MLIR[x->dt]);
	if (numel(ax) != 1 || ax->rank > 1 || dt_float(ax->dt))
		return refuse(m, "input 1 (axis) must be an integer scalar");
	if (!x->rank)
		return refuse(m, "scalar input");
	if ((r = norm_axis(m, get_i(ax, 0), x->rank, &a)) < 0)
		return r;
	bool fl = dt_float(x->dt);
	if (x->data && fold_fits(x->rank, x->dims)) {
		int64_t idx[ONNX_RANK_MAX], n = x->dims[a];
		if (!(o = val_const(x->dt, x->rank, x->dims)))
			return oom(m);
		for (int64_t f = 0, ne = numel(x); f < ne; f++) {
			unflatten(f, x->rank, x->dims, idx);
			if (idx[a] != (rev ? n - 1 : 0))
				continue;  /* one scan per line along the axis, from its first element */
			double s = 0;
			int64_t si = 0;
			for (int64_t k = 0; k < n; k++) {
				idx[a] = rev ? n - 1 - k : k;
				int64_t at = flatten_idx(x->rank, x->dims, idx);
				double v = get_d(x, at);
				int64_t vi = get_i(x, at);
				if (!excl)
					s += v, si = (int64_t)((uint64_t)si + (uint64_t)vi);
				if (fl)
					set_d(o, at, s);
				else
					set_i(o, at, si);
				if (excl)
					s += v, si = (int64_t)((uint64_t)si + (uint64_t)vi);
			}
		}
		return output(m, 0, o);
	}
	/* Loops: d0..d{r-1} the output, d{r} the input's position along the axis. */
	struct gop g, go;
	size_t rk = x->rank;
	gop_set(&g, ssa_of(m, x), x->dt, rk, x->dims);
	for (size_t d = 0; d < rk; d++)
		map_add(&g, "d%zu", d == a ? rk : d);
	gop_set(&go, emit_filled(m, x->dt, rk, x->dims, zero_lit(x->dt)), x->dt, rk, x->dims);
	gop_identity(&go, rk);
	bool red[ONNX_RANK_MAX + 1] = { 0 };
	red[rk] = true;
	/* The input position j counts toward output position i when j <= i (exclusive: j < i;
	 * reverse: j >= i, j > i). */
	static const char *const pred[2][2] = { { "ule", "ult" }, { "uge", "ugt" } };
	char tmpl[400];
	snprintf(tmpl, sizeof tmpl,
		 "#0 = linalg.index %zu : index\n#1 = linalg.index %zu : index\n#2 = arith.cmpi %s, #1, #0 : index\n"
		 "#3 = arith.%s $o, $0 : $T\n#4 = arith.select #2, #3, $o : $T\n#4\n",
		 a, rk, pred[rev != 0][excl != 0], fl ? "addf" : "addi");
	long id = generic(m, rk + 1, red, &g, 1, &go, tmpl);
	return (o = val_ssa(x->dt, rk, x->dims, id)) ? output(m, 0, o) : oom(m);
}

/* Max Min Sum Mean of 1 to EW_INPUTS_MAX broadcast inputs (Mean: float types only). */
static int op_variadic(struct imp *m)
{
	static const char *const none[] = { NULL };
	const char *op = m->node->op_type;
	bool mean = !strcmp(op, "Mean"), sum = mean || !strcmp(op, "Sum"), mx = !strcmp(op, "Max");
	struct val *in[EW_INPUTS_MAX];
	size_t n = n_in(m), rank;
	int64_t dims[ONNX_RANK_MAX];
	int r;

	if ((r = attrs_allowed(m, none)) < 0 || (r = outputs_max(m, 1)) < 0)
		return r;
	if (n == 0 || n > EW_INPUTS_MAX)
		return refuse(m, "%zu inputs, 1 to %d supported", n, EW_INPUTS_MAX);
	for (size_t i = 0; i < n; i++) {
		if ((r = input(m, i, &in[i])) < 0)
			return r;
		if (in[i]->dt != in[0]->dt)
			return refuse(m, "inputs have different element types (%s, %s)", DT_MLIR[in[0]->dt],
				      DT_MLIR[in[i]->dt]);
	}
	enum dt t = in[0]->dt;
	bool fl = dt_float(t);
	if (t == DT_BOOL || (mean && !fl))
		return refuse(m, "element type %s is not supported (%s)", DT_MLIR[t],
			      mean ? "float types" : "float types, int64 and int32");
	if ((r = broadcast(m, in, n, &rank, dims)) < 0)
		return r;
	if (all_const(in, n) && fold_fits(rank, dims)) {
		struct val *o = val_const(t, rank, dims);
		if (!o)
			return oom(m);
		for (int64_t f = 0, ne = numel(o); f < ne; f++) {
			double a = get_d(in[0], bcast_off(in[0], rank, dims, f));
			int64_t ai = get_i(in[0], bcast_off(in[0], rank, dims, f));
			for (size_t i = 1; i < n; i++) {
				int64_t k = bcast_off(in[i], rank, dims, f);
				double v = get_d(in[i], k);
				int64_t vi = get_i(in[i], k);
				a = sum ? a + v : isnan(v) || (mx ? v > a : v < a) ? v : a;
				ai = sum ? (int64_t)((uint64_t)ai + (uint64_t)vi) : mx ? (vi > ai ? vi : ai) : (vi < ai ? vi : ai);
			}
			if (fl)
				set_d(o, f, mean ? a / (double)n : a);
			else
				set_i(o, f, ai);
		}
		return output(m, 0, o);
	}
	const char *bin = sum ? (fl ? "addf" : "addi") : mx ? (fl ? "maximumf" : "maxsi") : (fl ? "minimumf" : "minsi");
	char tmpl[600] = "", cur[8] = "$0", lit[64];
	size_t k = 0;
	for (size_t i = 1; i < n; i++) {
		snprintf(tmpl + strlen(tmpl), sizeof tmpl - strlen(tmpl), "#%zu = arith.%s %s, $%zu : $T\n", k, bin,
			 cur, i);
		snprintf(cur, sizeof cur, "#%zu", k++);
	}
	if (mean && n > 1) {
		fmt_float(lit, sizeof lit, (double)n, t);
		snprintf(tmpl + strlen(tmpl), sizeof tmpl - strlen(tmpl),
			 "#%zu = arith.constant %s : $T\n#%zu = arith.divf %s, #%zu : $T\n", k, lit, k + 1, cur, k);
		snprintf(cur, sizeof cur, "#%zu", k + 1);
	}
	snprintf(tmpl + strlen(tmpl), sizeof tmpl - strlen(tmpl), "%s\n", cur);
	struct val *o = NULL;
	if ((r = emit_ew(m, in, n, t, tmpl, &o)) < 0)
		return r;
	return output(m, 0, o);
}

/* ---------------------------------------------------------------- contractions */

static const char *MAC_F = "#0 = arith.mulf $0, $1 : $T\n#1 = arith.addf $o, #0 : $T\n#1";
static const char *MAC_I = "#0 = arith.muli $0, $1 : $T\n#1 = arith.addi $o, #0 : $T\n#1";

static int op_matmul(struct imp *m)
{
	static const char *const none[] = { NULL };
	struct val *a, *b;
	int r;

	if ((r = attrs_allowed(m, none)) < 0 || (r = outputs_max(m, 1)) < 0 ||
	    (r = input(m, 0, &a)) < 0 || (r = input(m, 1, &b)) < 0)
		return r;
	if (a->dt != b->dt || a->dt == DT_BOOL)
		return refuse(m, "input types %s and %s are not supported", DT_MLIR[a->dt], DT_MLIR[b->dt]);
	if (!a->rank || !b->rank)
		return refuse(m, "scalar inputs");
	bool a1 = a->rank == 1, b1 = b->rank == 1;
	int64_t M = a1 ? 1 : a->dims[a->rank - 2], K = a->dims[a->rank - 1];
	int64_t Kb = b1 ? b->dims[0] : b->dims[b->rank - 2], N = b1 ? 1 : b->dims[b->rank - 1];
	if (K != Kb)
		return refuse(m, "inner dimensions differ (%" PRId64 " and %" PRId64 ")", K, Kb);
	size_t ra = a1 ? 0 : a->rank - 2, rb = b1 ? 0 : b->rank - 2;
	size_t nb = ra > rb ? ra : rb;
	int64_t bd[ONNX_RANK_MAX];
	for (size_t d = 0; d < nb; d++) {
		int64_t x = d + ra >= nb ? a->dims[d + ra - nb] : 1;
		int64_t y = d + rb >= nb ? b->dims[d + rb - nb] : 1;
		if (x != y && x != 1 && y != 1)
			return refuse(m, "batch dimensions do not broadcast (%" PRId64 " and %" PRId64 ")", x, y);
		bd[d] = x == 1 ? y : x;
	}
	size_t orank = nb + !a1 + !b1;
	if (orank > ONNX_RANK_MAX)
		return refuse(m, "result rank %zu", orank);
	int64_t od[ONNX_RANK_MAX];
	memcpy(od, bd, nb * sizeof *od);
	size_t k = nb;
	if (!a1)
		od[k++] = M;
	if (!b1)
		od[k++] = N;
	if ((r = check_shape(m, "the result", orank, od)) < 0)
		return r;
	/* Loops: batch..., m, n, k. */
	size_t dm = nb, dn = nb + !a1, dk = nb + !a1 + !b1;
	bool red[ONNX_RANK_MAX + 1] = { 0 };
	red[dk] = true;
	struct gop g[2], o;
	gop_set(&g[0], ssa_of(m, a), a->dt, a->rank, a->dims);
	for (size_t d = 0; d < ra; d++)
		if (a->dims[d] == 1 && bd[d + nb - ra] != 1)
			map_add(&g[0], "0");
		else
			map_add(&g[0], "d%zu", d + nb - ra);
	if (!a1)
		map_add(&g[0], "d%zu", dm);
	map_add(&g[0], "d%zu", dk);
	gop_set(&g[1], ssa_of(m, b), b->dt, b->rank, b->dims);
	for (size_t d = 0; d < rb; d++)
		if (b->dims[d] == 1 && bd[d + nb - rb] != 1)
			map_add(&g[1], "0");
		else
			map_add(&g[1], "d%zu", d + nb - rb);
	map_add(&g[1], "d%zu", dk);
	if (!b1)
		map_add(&g[1], "d%zu", dn);
	gop_set(&o, emit_filled(m, a->dt, orank, od, zero_lit(a->dt)), a->dt, orank, od);
	gop_identity(&o, orank);
	long id = generic(m, dk + 1, red, g, 2, &o, dt_float(a->dt) ? MAC_F : MAC_I);
	struct val *v = val_ssa(a->dt, orank, od, id);
	return v ? output(m, 0, v) : oom(m);
}

static int op_gemm(struct imp *m)
{
	static const char *const allowed[] = { "alpha", "beta", "transA", "transB", NULL };
	struct val *a, *b, *c;
	int64_t ta, tb;
	double alpha, beta;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 ||
	    (r = attr_int(m, "transA", 0, &ta)) < 0 || (r = attr_int(m, "transB", 0, &tb)) < 0 ||
	    (r = attr_float(m, "alpha", 1.0, &alpha)) < 0 || (r = attr_float(m, "beta", 1.0, &beta)) < 0 ||
	    (r = input(m, 0, &a)) < 0 || (r = input(m, 1, &b)) < 0 || (r = input_opt(m, 2, &c)) < 0)
		return r;
	if ((r = need_dt(m, a, true)) < 0)
		return r;
	if (a->rank != 2 || b->rank != 2 || a->dt != b->dt || (c && c->dt != a->dt))
		return refuse(m, "A and B must be 2-D of one float type");
	int64_t M = ta ? a->dims[1] : a->dims[0], K = ta ? a->dims[0] : a->dims[1];
	int64_t Kb = tb ? b->dims[1] : b->dims[0], N = tb ? b->dims[0] : b->dims[1];
	if (K != Kb)
		return refuse(m, "inner dimensions differ (%" PRId64 " and %" PRId64 ")", K, Kb);
	int64_t od[2] = { M, N };
	bool red[3] = { false, false, true };
	struct gop g[2], o;
	gop_set(&g[0], ssa_of(m, a), a->dt, 2, a->dims);
	snprintf(g[0].map, sizeof g[0].map, ta ? "d2, d0" : "d0, d2");
	gop_set(&g[1], ssa_of(m, b), b->dt, 2, b->dims);
	snprintf(g[1].map, sizeof g[1].map, tb ? "d1, d2" : "d2, d1");
	gop_set(&o, emit_filled(m, a->dt, 2, od, "0.0"), a->dt, 2, od);
	gop_identity(&o, 2);
	long id = generic(m, 3, red, g, 2, &o, MAC_F);
	struct val *y = val_ssa(a->dt, 2, od, id);
	if (!y)
		return oom(m);
	if (alpha == 1.0 && (!c || beta == 0.0))
		return output(m, 0, y);
	char tmpl[400], la[64], lb[64];
	fmt_float(la, sizeof la, alpha, a->dt);
	fmt_float(lb, sizeof lb, beta, a->dt);
	struct val *ins[2] = { y, c };
	if (c && beta == 1.0 && alpha == 1.0)
		snprintf(tmpl, sizeof tmpl, "#0 = arith.addf $0, $1 : $T\n#0"); /* a bias, as MatMul + Add */
	else if (c && beta != 0.0)
		snprintf(tmpl, sizeof tmpl,
			 "#0 = arith.constant %s : $T\n#1 = arith.mulf $0, #0 : $T\n#2 = arith.constant %s : $T\n"
			 "#3 = arith.mulf $1, #2 : $T\n#4 = arith.addf #1, #3 : $T\n#4", la, lb);
	else
		snprintf(tmpl, sizeof tmpl, "#0 = arith.constant %s : $T\n#1 = arith.mulf $0, #0 : $T\n#1", la);
	struct val *o2 = NULL;
	if (c) {
		size_t rank;
		int64_t dims[ONNX_RANK_MAX];
		if ((r = broadcast(m, ins, 2, &rank, dims)) < 0 || rank != 2 || dims[0] != M || dims[1] != N) {
			val_free(y);
			return r < 0 ? r : refuse(m, "C does not broadcast to [%" PRId64 ", %" PRId64 "]", M, N);
		}
	}
	r = emit_ew(m, ins, c && beta != 0.0 ? 2 : 1, a->dt, tmpl, &o2);
	val_free(y);
	return r < 0 ? r : output(m, 0, o2);
}

/* ---------------------------------------------------------------- reductions */

/* Reduces x over the dims with axes[d] set; init_lit fills the result; tmpl combines $0 into
 * $o.  keep: reduced dims stay with size 1. */
static int emit_reduce(struct imp *m, struct val *x, const bool *axes, const char *init_lit,
		       const char *tmpl, bool keep, struct val **out)
{
	int64_t od[ONNX_RANK_MAX];
	size_t orank = 0;
	struct gop g, o;

	gop_set(&g, ssa_of(m, x), x->dt, x->rank, x->dims);
	gop_identity(&g, x->rank);
	for (size_t d = 0; d < x->rank; d++)
		if (!axes[d])
			od[orank++] = x->dims[d];
		else if (keep)
			od[orank++] = 1;
	gop_set(&o, emit_filled(m, x->dt, orank, od, init_lit), x->dt, orank, od);
	for (size_t d = 0; d < x->rank; d++)
		if (!axes[d])
			map_add(&o, "d%zu", d);
		else if (keep)
			map_add(&o, "0");
	long id = generic(m, x->rank, axes, &g, 1, &o, tmpl);
	return (*out = val_ssa(x->dt, orank, od, id)) ? 0 : oom(m);
}

/* The identity of max (neg_inf) and min (pos_inf) as a literal of type t. */
static const char *neg_inf(enum dt t)
{
	static const char *const lit[] = { [DT_F32] = "0xFF800000", [DT_F64] = "0xFFF0000000000000",
		[DT_I64] = "-9223372036854775808", [DT_I32] = "-2147483648", [DT_BOOL] = "0",
		[DT_F16] = "0xFC00", [DT_BF16] = "0xFF80" };
	return lit[t];
}

static const char *pos_inf(enum dt t)
{
	static const char *const lit[] = { [DT_F32] = "0x7F800000", [DT_F64] = "0x7FF0000000000000",
		[DT_I64] = "9223372036854775807", [DT_I32] = "2147483647", [DT_BOOL] = "1",
		[DT_F16] = "0x7C00", [DT_BF16] = "0x7F80" };
	return lit[t];
}

/* x / n elementwise (n a literal). */
static int emit_div_const(struct imp *m, struct val *x, double n, struct val **out)
{
	char tmpl[200], lit[64];
	fmt_float(lit, sizeof lit, n, x->dt);
	snprintf(tmpl, sizeof tmpl, "#0 = arith.constant %s : $T\n#1 = arith.divf $0, #0 : $T\n#1", lit);
	return emit_ew(m, &x, 1, x->dt, tmpl, out);
}

enum red { RED_SUM, RED_MEAN, RED_MAX, RED_MIN, RED_PROD };

/* x reduced over red[] (kept as size 1 when keep) computed at import: accumulated in double
 * for floats, in 64-bit two's complement for integers. */
static int fold_reduce(struct imp *m, struct val *x, const bool *red, bool keep, enum red kind,
		       size_t orank, const int64_t *od, struct val **out)
{
	struct val *o = val_const(x->dt, orank, od);
	int64_t no = o ? numel(o) : 0, idx[ONNX_RANK_MAX], cnt = numel(x) / (no ? no : 1);
	bool fl = dt_float(x->dt);
	_cleanup_(freep) double *ad = o && fl ? calloc((size_t)no, sizeof *ad) : NULL;
	_cleanup_(freep) int64_t *ai = o && !fl ? calloc((size_t)no, sizeof *ai) : NULL;

	if (!o || (fl ? !ad : !ai)) {
		val_free(o);
		return oom(m);
	}
	for (int64_t i = 0; i < no; i++) {
		if (fl)
			ad[i] = kind == RED_PROD ? 1 : kind == RED_MAX ? -INFINITY : kind == RED_MIN ? INFINITY : 0;
		else
			ai[i] = kind == RED_PROD ? 1 : kind == RED_MAX ? INT64_MIN : kind == RED_MIN ? INT64_MAX : 0;
	}
	for (int64_t f = 0, n = numel(x); f < n; f++) {
		int64_t k = 0;
		size_t j = 0;
		unflatten(f, x->rank, x->dims, idx);
		for (size_t d = 0; d < x->rank; d++)
			if (!red[d])
				k = k * od[j++] + idx[d];
			else if (keep)
				j++;  /* a kept dimension of size 1: index 0 */
		if (fl) {
			double a = ad[k], v = get_d(x, f);
			ad[k] = kind == RED_SUM || kind == RED_MEAN ? a + v : kind == RED_PROD ? a * v
				: kind == RED_MAX ? (isnan(v) || v > a ? v : a) : (isnan(v) || v < a ? v : a);
		} else {
			uint64_t a = (uint64_t)ai[k], v = (uint64_t)get_i(x, f);
			ai[k] = kind == RED_SUM ? (int64_t)(a + v) : kind == RED_PROD ? (int64_t)(a * v)
				: kind == RED_MAX ? ((int64_t)v > (int64_t)a ? (int64_t)v : (int64_t)a)
						  : ((int64_t)v < (int64_t)a ? (int64_t)v : (int64_t)a);
		}
	}
	for (int64_t i = 0; i < no; i++)
		if (fl)
			set_d(o, i, kind == RED_MEAN ? ad[i] / (double)cnt : ad[i]);
		else
			set_i(o, i, ai[i]);
	*out = o;
	return 0;
}

/* ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd: float types, and integers but for
 * ReduceMean.  An input known at import (a Shape's, say: torch.var's ReduceProd) is folded. */
static int op_reduce(struct imp *m)
{
	static const char *const allowed[] = { "axes", "keepdims", "noop_with_empty_axes", NULL };
	static const char *const names[] = { [RED_SUM] = "ReduceSum", [RED_MEAN] = "ReduceMean",
		[RED_MAX] = "ReduceMax", [RED_MIN] = "ReduceMin", [RED_PROD] = "ReduceProd" };
	struct val *x, *ax = NULL;
	int64_t keep, noop, axes[2 * ONNX_RANK_MAX];
	long na = -1;
	size_t nax = 0;
	enum red kind = RED_SUM;
	int r;

	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (!strcmp(m->node->op_type, names[i]))
			kind = (enum red)i;
	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = input_opt(m, 1, &ax)) < 0 || (r = attr_int(m, "keepdims", 1, &keep)) < 0 ||
	    (r = attr_int(m, "noop_with_empty_axes", 0, &noop)) < 0 || (r = attr_ints(m, "axes", axes, &na)) < 0)
		return r;
	bool fl = dt_float(x->dt);
	if (x->dt == DT_BOOL || (kind == RED_MEAN && !fl))
		return refuse(m, "input \"%s\" has element type %s, %s are supported", x->name, DT_MLIR[x->dt],
			      kind == RED_MEAN ? "float types" : "float types, int64 and int32");
	if (ax) {
		if ((r = const_ints(m, ax, "axes", axes, ONNX_RANK_MAX, &nax)) < 0)
			return r;
	} else if (na >= 0) {
		nax = (size_t)na;
	}
	bool red[ONNX_RANK_MAX] = { 0 };
	double count = 1;
	for (size_t i = 0; i < nax; i++) {
		size_t d;
		if ((r = norm_axis(m, axes[i], x->rank, &d)) < 0)
			return r;
		red[d] = true;
	}
	if (nax == 0) {
		if (noop) {
			struct val *v = val_ssa(x->dt, x->rank, x->dims, emit_copy(m, x));
			return v ? output(m, 0, v) : oom(m);
		}
		for (size_t d = 0; d < x->rank; d++)
			red[d] = true;
	}
	int64_t od[ONNX_RANK_MAX];
	size_t orank = 0;
	for (size_t d = 0; d < x->rank; d++) {
		if (red[d])
			count *= (double)x->dims[d];
		if (!red[d] || keep)
			od[orank++] = red[d] ? 1 : x->dims[d];
	}
	struct val *s = NULL, *o = NULL;
	if (x->data && fold_fits(x->rank, x->dims)) {
		if ((r = fold_reduce(m, x, red, keep != 0, kind, orank, od, &s)) < 0)
			return r;
		return output(m, 0, s);
	}
	const char *init, *tmpl;
	switch (kind) {
	case RED_MAX:
		init = neg_inf(x->dt);
		tmpl = fl ? "#0 = arith.maximumf $o, $0 : $T\n#0" : "#0 = arith.maxsi $o, $0 : $T\n#0";
		break;
	case RED_MIN:
		init = pos_inf(x->dt);
		tmpl = fl ? "#0 = arith.minimumf $o, $0 : $T\n#0" : "#0 = arith.minsi $o, $0 : $T\n#0";
		break;
	case RED_PROD:
		init = fl ? "1.0" : "1";
		tmpl = fl ? "#0 = arith.mulf $o, $0 : $T\n#0" : "#0 = arith.muli $o, $0 : $T\n#0";
		break;
	default:
		init = zero_lit(x->dt);
		tmpl = fl ? "#0 = arith.addf $o, $0 : $T\n#0" : "#0 = arith.addi $o, $0 : $T\n#0";
		break;
	}
	if ((r = emit_reduce(m, x, red, init, tmpl, keep != 0, &s)) < 0)
		return r;
	if (kind != RED_MEAN)
		return output(m, 0, s);
	r = emit_div_const(m, s, count, &o);
	val_free(s);
	return r < 0 ? r : output(m, 0, o);
}

/* ArgMax ArgMin: the index (int64) of the first extreme along axis (the last with
 * select_last_index), one reduction nest with two results, the extreme and its index. */
static int op_argext(struct imp *m)
{
	static const char *const allowed[] = { "axis", "keepdims", "select_last_index", NULL };
	bool mx = !strcmp(m->node->op_type, "ArgMax");
	struct val *x, *o;
	int64_t axis, keep, last, od[ONNX_RANK_MAX];
	size_t a, orank = 0;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = attr_int(m, "axis", 0, &axis)) < 0 || (r = attr_int(m, "keepdims", 1, &keep)) < 0 ||
	    (r = attr_int(m, "select_last_index", 0, &last)) < 0)
		return r;
	if (x->dt == DT_BOOL)
		return refuse(m, "input \"%s\" has element type %s, float types, int64 and int32 are supported",
			      x->name, DT_MLIR[x->dt]);
	if (!x->rank)
		return refuse(m, "scalar input");
	if ((r = norm_axis(m, axis, x->rank, &a)) < 0)
		return r;
	for (size_t d = 0; d < x->rank; d++)
		if (d != a || keep)
			od[orank++] = d == a ? 1 : x->dims[d];
	bool fl = dt_float(x->dt);
	if (x->data && fold_fits(x->rank, x->dims)) {
		int64_t xi[ONNX_RANK_MAX], oi[ONNX_RANK_MAX];
		if (!(o = val_const(DT_I64, orank, od)))
			return oom(m);
		for (int64_t f = 0, n = numel(o); f < n; f++) {
			unflatten(f, orank, od, oi);
			for (size_t d = 0, j = 0; d < x->rank; d++) {
				if (d != a)
					xi[d] = oi[j++];
				else if (keep)
					j++;
			}
			int64_t best = 0;
			for (int64_t k = 0; k < x->dims[a]; k++) {
				xi[a] = k;
				int64_t at = flatten_idx(x->rank, x->dims, xi);
				xi[a] = best;
				int64_t bt = flatten_idx(x->rank, x->dims, xi);
				double v = get_d(x, at), b = get_d(x, bt);
				int64_t vi = get_i(x, at), bi = get_i(x, bt);
				bool better = fl ? (mx ? v > b : v < b) || (last && v == b)
						 : (mx ? vi > bi : vi < bi) || (last && vi == bi);
				if (better)
					best = k;
			}
			set_i(o, f, best);
		}
		return output(m, 0, o);
	}
	struct gop g, ov, oi;
	gop_set(&g, ssa_of(m, x), x->dt, x->rank, x->dims);
	gop_identity(&g, x->rank);
	gop_set(&ov, emit_filled(m, x->dt, orank, od, mx ? neg_inf(x->dt) : pos_inf(x->dt)), x->dt, orank, od);
	gop_set(&oi, emit_filled(m, DT_I64, orank, od, "0"), DT_I64, orank, od);
	for (size_t d = 0; d < x->rank; d++)
		if (d != a) {
			map_add(&ov, "d%zu", d);
			map_add(&oi, "d%zu", d);
		} else if (keep) {
			map_add(&ov, "0");
			map_add(&oi, "0");
		}
	/* Strictly better keeps the first index; or equal, the last.  The extreme's initial
	 * value is the type's identity, so index 0 wins when every element equals it. */
	static const char *const cmp[2][2][2] = { { { "slt", "sle" }, { "sgt", "sge" } },
						  { { "olt", "ole" }, { "ogt", "oge" } } };
	long id = new_ssa(m), vid = new_ssa(m);
	count_linalg(m);
	strbuf_printf(&m->body, "    %%v%ld, %%v%ld = linalg.generic {indexing_maps = [", vid, id);
	const struct gop *gs[3] = { &g, &ov, &oi };
	for (size_t i = 0; i < 3; i++) {
		strbuf_printf(&m->body, "%saffine_map<(", i ? ", " : "");
		for (size_t d = 0; d < x->rank; d++)
			strbuf_printf(&m->body, "%sd%zu", d ? ", " : "", d);
		strbuf_printf(&m->body, ") -> (%s)>", gs[i]->map);
	}
	strbuf_puts(&m->body, "], iterator_types = [");
	for (size_t d = 0; d < x->rank; d++)
		strbuf_printf(&m->body, "%s\"%s\"", d ? ", " : "", d == a ? "reduction" : "parallel");
	const char *t = DT_MLIR[x->dt];
	strbuf_printf(&m->body, "]} ins(%%v%ld : %s) outs(%%v%ld, %%v%ld : %s, %s) {\n", g.ssa, g.type, ov.ssa,
		      oi.ssa, ov.type, oi.type);
	strbuf_printf(&m->body, "    ^bb0(%%a%ld_0: %s, %%a%ld_v: %s, %%a%ld_i: i64):\n", id, t, id, t, id);
	strbuf_printf(&m->body, "      %%t%ld_0 = linalg.index %zu : index\n"
		      "      %%t%ld_1 = arith.index_cast %%t%ld_0 : index to i64\n"
		      "      %%t%ld_2 = arith.%s %s, %%a%ld_0, %%a%ld_v : %s\n"
		      "      %%t%ld_3 = arith.select %%t%ld_2, %%a%ld_0, %%a%ld_v : %s\n"
		      "      %%t%ld_4 = arith.select %%t%ld_2, %%t%ld_1, %%a%ld_i : i64\n"
		      "      linalg.yield %%t%ld_3, %%t%ld_4 : %s, i64\n"
		      "    } -> (%s, %s) %s\n",
		      id, a, id, id, id, fl ? "cmpf" : "cmpi", cmp[fl][mx][last != 0], id, id, t,
		      id, id, id, id, t, id, id, id, id, id, id, t, ov.type, oi.type, m->loc);
	return (o = val_ssa(DT_I64, orank, od, id)) ? output(m, 0, o) : oom(m);
}

static int op_softmax(struct imp *m)
{
	bool log_form = !strcmp(m->node->op_type, "LogSoftmax");
	static const char *const allowed[] = { "axis", NULL };
	struct val *x;
	int64_t axis;
	size_t a;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = attr_int(m, "axis", m->opset >= 13 ? -1 : 1, &axis)) < 0 || (r = need_dt(m, x, true)) < 0)
		return r;
	if (!x->rank)
		return refuse(m, "scalar input");
	if ((r = norm_axis(m, axis, x->rank, &a)) < 0)
		return r;
	bool red[ONNX_RANK_MAX] = { 0 };
	/* Opset < 13: the input is coerced to 2-D at axis, i.e. every dim from axis on. */
	for (size_t d = a; d < (m->opset >= 13 ? a + 1 : x->rank); d++)
		red[d] = true;
	struct val *mx = NULL, *e = NULL, *s = NULL, *y = NULL;
	if ((r = emit_reduce(m, x, red, neg_inf(x->dt), "#0 = arith.maximumf $o, $0 : $T\n#0", true, &mx)) < 0)
		return r;
	struct val *xe[2] = { x, mx };
	r = emit_ew(m, xe, 2, x->dt, "#0 = arith.subf $0, $1 : $T\n#1 = math.exp #0 : $T\n#1", &e);
	if (r == 0)
		r = emit_reduce(m, e, red, "0.0", "#0 = arith.addf $o, $0 : $T\n#0", true, &s);
	if (r == 0 && !log_form) {
		struct val *es[2] = { e, s };
		r = emit_ew(m, es, 2, x->dt, "#0 = arith.divf $0, $1 : $T\n#0", &y);
	} else if (r == 0) {
		struct val *xms[3] = { x, mx, s };
		r = emit_ew(m, xms, 3, x->dt,
			    "#0 = arith.subf $0, $1 : $T\n#1 = math.log $2 : $T\n#2 = arith.subf #0, #1 : $T\n#2", &y);
	}
	val_free(mx);
	val_free(e);
	val_free(s);
	return r < 0 ? r : output(m, 0, y);
}

static int op_layernorm(struct imp *m)
{
	static const char *const allowed[] = { "axis", "epsilon", "stash_type", NULL };
	struct val *x, *scale, *bias;
	int64_t axis, stash;
	double eps;
	size_t a;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 3)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = input(m, 1, &scale)) < 0 || (r = input_opt(m, 2, &bias)) < 0 ||
	    (r = attr_int(m, "axis", -1, &axis)) < 0 || (r = attr_int(m, "stash_type", 1, &stash)) < 0 ||
	    (r = attr_float(m, "epsilon", 1e-5, &eps)) < 0 || (r = need_dt(m, x, true)) < 0)
		return r;
	if (stash != 1)
		return refuse(m, "attribute stash_type=%" PRId64 " is not supported (1: float)", stash);
	if (!x->rank || (r = norm_axis(m, axis, x->rank, &a)) < 0)
		return x->rank ? r : refuse(m, "scalar input");
	if (scale->dt != x->dt || (bias && bias->dt != x->dt))
		return refuse(m, "Scale and B must have X's element type");
	bool red[ONNX_RANK_MAX] = { 0 };
	double n = 1;
	for (size_t d = a; d < x->rank; d++) {
		red[d] = true;
		n *= (double)x->dims[d];
	}
	char tmpl[400], ln[64], le[64];
	fmt_float(ln, sizeof ln, n, x->dt);
	fmt_float(le, sizeof le, eps, x->dt);
	struct val *s = NULL, *mean = NULL, *dev = NULL, *sq = NULL, *inv = NULL, *y = NULL;
	r = emit_reduce(m, x, red, "0.0", "#0 = arith.addf $o, $0 : $T\n#0", true, &s);
	if (r == 0)
		r = emit_div_const(m, s, n, &mean);
	if (r == 0) {
		struct val *xm[2] = { x, mean };
		r = emit_ew(m, xm, 2, x->dt, "#0 = arith.subf $0, $1 : $T\n#0", &dev);
	}
	if (r == 0)
		r = emit_reduce(m, dev, red, "0.0", "#0 = arith.mulf $0, $0 : $T\n#1 = arith.addf $o, #0 : $T\n#1",
				true, &sq);
	if (r == 0) {
		snprintf(tmpl, sizeof tmpl,
			 "#0 = arith.constant %s : $T\n#1 = arith.divf $0, #0 : $T\n#2 = arith.constant %s : $T\n"
			 "#3 = arith.addf #1, #2 : $T\n#4 = math.rsqrt #3 : $T\n#4", ln, le);
		r = emit_ew(m, &sq, 1, x->dt, tmpl, &inv);
	}
	if (r == 0) {
		struct val *ins[4] = { dev, inv, scale, bias };
		r = emit_ew(m, ins, bias ? 4 : 3, x->dt,
			    bias ? "#0 = arith.mulf $0, $1 : $T\n#1 = arith.mulf #0, $2 : $T\n#2 = arith.addf #1, $3 : $T\n#2"
				 : "#0 = arith.mulf $0, $1 : $T\n#1 = arith.mulf #0, $2 : $T\n#1", &y);
	}
	val_free(s);
	val_free(dev);
	val_free(sq);
	if (r == 0 && y && (y->rank != x->rank || memcmp(y->dims, x->dims, x->rank * sizeof *x->dims)))
		r = refuse(m, "Scale or B does not broadcast to the normalized dimensions");
	if (r < 0) {
		val_free(mean);
		val_free(inv);
		val_free(y);
		return r;
	}
	if ((r = output(m, 0, y)) < 0) {
		val_free(mean);
		val_free(inv);
		return r;
	}
	if ((r = output(m, 1, mean)) < 0) {
		val_free(inv);
		return r;
	}
	return output(m, 2, inv);
}

/* ---------------------------------------------------------------- convolution and pooling */

/* tensor.pad of x with a literal at the low/high amounts of every dim. */
static int emit_pad(struct imp *m, struct val *x, const int64_t *lo, const int64_t *hi, const char *lit,
		    struct val **out)
{
	int64_t od[ONNX_RANK_MAX];
	bool any = false;
	for (size_t d = 0; d < x->rank; d++) {
		if (lo[d] < 0 || hi[d] < 0)
			return refuse(m, "negative padding");
		od[d] = x->dims[d] + lo[d] + hi[d];
		any = any || lo[d] || hi[d];
	}
	if (!any) {
		*out = NULL;
		return 0;
	}
	int r = check_shape(m, "the padded input", x->rank, od);
	if (r < 0)
		return r;
	char ty[256], tyo[256];
	vtype(ty, sizeof ty, x);
	tensor_type(tyo, sizeof tyo, x->dt, x->rank, od);
	long src = ssa_of(m, x), c = new_ssa(m), id = new_ssa(m);
	strbuf_printf(&m->body, "    %%v%ld = arith.constant %s : %s %s\n", c, lit, DT_MLIR[x->dt], m->loc);
	strbuf_printf(&m->body, "    %%v%ld = tensor.pad %%v%ld low[", id, src);
	for (size_t d = 0; d < x->rank; d++)
		strbuf_printf(&m->body, "%s%" PRId64, d ? ", " : "", lo[d]);
	strbuf_puts(&m->body, "] high[");
	for (size_t d = 0; d < x->rank; d++)
		strbuf_printf(&m->body, "%s%" PRId64, d ? ", " : "", hi[d]);
	strbuf_puts(&m->body, "] {\n    ^bb0(");
	for (size_t d = 0; d < x->rank; d++)
		strbuf_printf(&m->body, "%s%%p%ld_%zu: index", d ? ", " : "", id, d);
	strbuf_printf(&m->body, "):\n      tensor.yield %%v%ld : %s\n    } : %s to %s %s\n", c, DT_MLIR[x->dt], ty, tyo,
		m->loc);
	return (*out = val_ssa(x->dt, x->rank, od, id)) ? 0 : oom(m);
}

/* Spatial geometry shared by Conv and the pools. */
struct window {
	size_t ns;  /* spatial dims */
	int64_t k[ONNX_RANK_MAX], s[ONNX_RANK_MAX], d[ONNX_RANK_MAX];
	int64_t pb[ONNX_RANK_MAX], pe[ONNX_RANK_MAX], extra[ONNX_RANK_MAX];
	int64_t o[ONNX_RANK_MAX];
};

static int window_get(struct imp *m, const struct val *x, const int64_t *kernel, bool ceil_mode, struct window *w)
{
	int64_t v[2 * ONNX_RANK_MAX];
	long n;
	char ap[32];
	int r;

	w->ns = x->rank - 2;
	for (size_t i = 0; i < w->ns; i++) {
		w->k[i] = kernel[i];
		w->s[i] = w->d[i] = 1;
		w->pb[i] = w->pe[i] = w->extra[i] = 0;
		if (w->k[i] <= 0)
			return refuse(m, "kernel dimension %zu is %" PRId64, i, w->k[i]);
	}
	if ((r = attr_ints(m, "strides", v, &n)) < 0)
		return r;
	if (n >= 0 && (size_t)n != w->ns)
		return refuse(m, "attribute strides has %ld values, expected %zu", n, w->ns);
	for (long i = 0; i < n; i++)
		if ((w->s[i] = v[i]) <= 0)
			return refuse(m, "attribute strides: %" PRId64 " is not positive", v[i]);
	if ((r = attr_ints(m, "dilations", v, &n)) < 0)
		return r;
	if (n >= 0 && (size_t)n != w->ns)
		return refuse(m, "attribute dilations has %ld values, expected %zu", n, w->ns);
	for (long i = 0; i < n; i++)
		if ((w->d[i] = v[i]) <= 0)
			return refuse(m, "attribute dilations: %" PRId64 " is not positive", v[i]);
	if ((r = attr_str(m, "auto_pad", "NOTSET", ap, sizeof ap)) < 0)
		return r;
	if ((r = attr_ints(m, "pads", v, &n)) < 0)
		return r;
	if (n >= 0 && (size_t)n != 2 * w->ns)
		return refuse(m, "attribute pads has %ld values, expected %zu", n, 2 * w->ns);
	if (n >= 0 && strcmp(ap, "NOTSET") != 0)
		return refuse(m, "attribute pads together with auto_pad=%s", ap);
	for (long i = 0; i < n; i++)
		if (v[i] < 0)
			return refuse(m, "attribute pads: %" PRId64 " is negative", v[i]);
	for (size_t i = 0; i < w->ns; i++) {
		int64_t in = x->dims[2 + i], span = (w->k[i] - 1) * w->d[i] + 1;
		if (!strcmp(ap, "NOTSET") || !strcmp(ap, "VALID")) {
			if (n >= 0) {
				w->pb[i] = v[i];
				w->pe[i] = v[w->ns + i];
			}
			int64_t full = in + w->pb[i] + w->pe[i] - span;
			if (full < 0)
				return refuse(m, "the window (%" PRId64 ") is larger than the padded input (%" PRId64 ")",
					      span, in + w->pb[i] + w->pe[i]);
			w->o[i] = (ceil_mode ? (full + w->s[i] - 1) / w->s[i] : full / w->s[i]) + 1;
			if (ceil_mode && (w->o[i] - 1) * w->s[i] >= in + w->pb[i])
				w->o[i]--;
		} else if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
			w->o[i] = (in + w->s[i] - 1) / w->s[i];
			int64_t total = (w->o[i] - 1) * w->s[i] + span - in;
			if (total < 0)
				total = 0;
			w->pb[i] = !strcmp(ap, "SAME_UPPER") ? total / 2 : total - total / 2;
			w->pe[i] = total - w->pb[i];
		} else {
			return refuse(m, "attribute auto_pad=%s is not supported", ap);
		}
		int64_t need = (w->o[i] - 1) * w->s[i] + span;
		if (need > in + w->pb[i] + w->pe[i])
			w->extra[i] = need - (in + w->pb[i] + w->pe[i]);
	}
	return 0;
}

/* "d<o> * s + d<k> * d" */
static void win_expr(struct gop *g, size_t dout, size_t dk, int64_t s, int64_t d)
{
	map_add(g, "d%zu * %" PRId64 " + d%zu * %" PRId64, dout, s, dk, d);
}

static int op_conv(struct imp *m)
{
	static const char *const allowed[] = { "auto_pad", "dilations", "group", "kernel_shape", "pads", "strides", NULL };
	struct val *x, *w, *b;
	int64_t group, ks[2 * ONNX_RANK_MAX];
	long nks;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = input(m, 1, &w)) < 0 || (r = input_opt(m, 2, &b)) < 0 || (r = attr_int(m, "group", 1, &group)) < 0 ||
	    (r = attr_ints(m, "kernel_shape", ks, &nks)) < 0 || (r = need_dt(m, x, true)) < 0)
		return r;
	if (x->rank < 3 || x->rank + 1 > ONNX_RANK_MAX || w->rank != x->rank || w->dt != x->dt ||
	    (b && (b->rank != 1 || b->dt != x->dt)))
		return refuse(m, "X and W must have one float type and rank 3 to %d, B rank 1", ONNX_RANK_MAX - 1);
	int64_t N = x->dims[0], C = x->dims[1], M = w->dims[0];
	if (group <= 0 || C % group || M % group || w->dims[1] != C / group)
		return refuse(m, "attribute group=%" PRId64 " does not fit %" PRId64 " input and %" PRId64
			      " output channels (W has %" PRId64 " per group)", group, C, M, w->dims[1]);
	if (b && b->dims[0] != M)
		return refuse(m, "B has %" PRId64 " values, expected %" PRId64, b->dims[0], M);
	if (nks >= 0 && (size_t)nks != x->rank - 2)
		return refuse(m, "attribute kernel_shape has %ld values", nks);
	for (long i = 0; i < nks; i++)
		if (ks[i] != w->dims[2 + i])
			return refuse(m, "attribute kernel_shape differs from W's shape");
	struct window win;
	if ((r = window_get(m, x, w->dims + 2, false, &win)) < 0)
		return r;
	size_t ns = win.ns;
	int64_t G = group, Cg = C / G, Mg = M / G;
	int64_t lo[ONNX_RANK_MAX] = { 0 }, hi[ONNX_RANK_MAX] = { 0 };
	for (size_t i = 0; i < ns; i++) {
		lo[2 + i] = win.pb[i];
		hi[2 + i] = win.pe[i] + win.extra[i];
	}
	struct val *xp = NULL, *xg = NULL, *wg = NULL, *bg = NULL, *yg = NULL, *y = NULL;
	if ((r = emit_pad(m, x, lo, hi, "0.0", &xp)) < 0)
		return r;
	struct val *xs = xp ? xp : x;
	int64_t dx[ONNX_RANK_MAX], dw[ONNX_RANK_MAX], dy[ONNX_RANK_MAX], dyo[ONNX_RANK_MAX];
	dx[0] = N, dx[1] = G, dx[2] = Cg;
	dw[0] = G, dw[1] = Mg, dw[2] = Cg;
	dy[0] = N, dy[1] = G, dy[2] = Mg;
	dyo[0] = N, dyo[1] = M;
	for (size_t i = 0; i < ns; i++) {
		dx[3 + i] = xs->dims[2 + i];
		dw[3 + i] = w->dims[2 + i];
		dy[3 + i] = dyo[2 + i] = win.o[i];
	}
	if ((r = check_shape(m, "the result", ns + 2, dyo)) < 0)
		goto done;
	if ((r = emit_reshape(m, xs, ns + 3, dx, &xg)) < 0 || (r = emit_reshape(m, w, ns + 3, dw, &wg)) < 0)
		goto done;
	/* Loops: n, g, mg, o..., c, k... */
	size_t nd = 3 + ns + 1 + ns;
	bool red[2 * ONNX_RANK_MAX + 4] = { 0 };
	for (size_t i = 3 + ns; i < nd; i++)
		red[i] = true;
	struct gop g[2], o;
	long init;
	if (b) {
		int64_t db[2] = { G, Mg };
		if ((r = emit_reshape(m, b, 2, db, &bg)) < 0)
			goto done;
		struct gop gb, ob;
		gop_set(&gb, ssa_of(m, bg), bg->dt, 2, db);
		map_add(&gb, "d1, d2");
		gop_set(&ob, emit_empty(m, x->dt, ns + 3, dy), x->dt, ns + 3, dy);
		gop_identity(&ob, ns + 3);
		init = generic(m, ns + 3, NULL, &gb, 1, &ob, "$0\n");
	} else {
		init = emit_filled(m, x->dt, ns + 3, dy, "0.0");
	}
	gop_set(&g[0], ssa_of(m, xg), x->dt, ns + 3, dx);
	map_add(&g[0], "d0, d1, d%zu", 3 + ns);
	for (size_t i = 0; i < ns; i++)
		win_expr(&g[0], 3 + i, 4 + ns + i, win.s[i], win.d[i]);
	gop_set(&g[1], ssa_of(m, wg), x->dt, ns + 3, dw);
	map_add(&g[1], "d1, d2, d%zu", 3 + ns);
	for (size_t i = 0; i < ns; i++)
		map_add(&g[1], "d%zu", 4 + ns + i);
	gop_set(&o, init, x->dt, ns + 3, dy);
	gop_identity(&o, ns + 3);
	long id = generic(m, nd, red, g, 2, &o, MAC_F);
	if (!(yg = val_ssa(x->dt, ns + 3, dy, id))) {
		r = oom(m);
		goto done;
	}
	if ((r = emit_reshape(m, yg, ns + 2, dyo, &y)) < 0)
		goto done;
	y->is_view = false; /* the reshape of a fresh result */
	r = output(m, 0, y);
	y = NULL;
done:
	val_free(xp);
	val_free(xg);
	val_free(wg);
	val_free(bg);
	val_free(yg);
	val_free(y);
	return r;
}

static int op_pool(struct imp *m)
{
	bool is_max = !strcmp(m->node->op_type, "MaxPool");
	static const char *const amax[] = { "auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads",
					    "storage_order", "strides", NULL };
	static const char *const aavg[] = { "auto_pad", "ceil_mode", "count_include_pad", "dilations",
					    "kernel_shape", "pads", "strides", NULL };
	struct val *x;
	int64_t ks[2 * ONNX_RANK_MAX], ceil_mode, cip, so;
	long nks;
	int r;

	if ((r = attrs_allowed(m, is_max ? amax : aavg)) < 0 || (r = outputs_max(m, 1)) < 0 ||
	    (r = input(m, 0, &x)) < 0 || (r = attr_ints(m, "kernel_shape", ks, &nks)) < 0 ||
	    (r = attr_int(m, "ceil_mode", 0, &ceil_mode)) < 0 || (r = attr_int(m, "count_include_pad", 0, &cip)) < 0 ||
	    (r = attr_int(m, "storage_order", 0, &so)) < 0 || (r = need_dt(m, x, true)) < 0)
		return r;
	if (x->rank < 3 || x->rank + 1 > ONNX_RANK_MAX)
		return refuse(m, "X has rank %zu, expected 3 to %d", x->rank, ONNX_RANK_MAX - 1);
	if (nks < 0 || (size_t)nks != x->rank - 2)
		return refuse(m, "attribute kernel_shape is missing or has the wrong length");
	if (so)
		return refuse(m, "attribute storage_order=%" PRId64 " is not supported", so);
	struct window win;
	if ((r = window_get(m, x, ks, ceil_mode != 0, &win)) < 0)
		return r;
	size_t ns = win.ns;
	int64_t lo[ONNX_RANK_MAX] = { 0 }, hi[ONNX_RANK_MAX] = { 0 }, dy[ONNX_RANK_MAX];
	for (size_t i = 0; i < ns; i++) {
		lo[2 + i] = win.pb[i];
		hi[2 + i] = win.pe[i] + win.extra[i];
	}
	dy[0] = x->dims[0];
	dy[1] = x->dims[1];
	for (size_t i = 0; i < ns; i++)
		dy[2 + i] = win.o[i];
	if ((r = check_shape(m, "the result", x->rank, dy)) < 0)
		return r;
	struct val *xp = NULL, *s = NULL, *div = NULL, *y = NULL;
	if ((r = emit_pad(m, x, lo, hi, is_max ? neg_inf(x->dt) : "0.0", &xp)) < 0)
		return r;
	struct val *xs = xp ? xp : x;
	/* Loops: n, c, o..., k... ; the window's extents come from an unused kernel-shaped operand. */
	size_t nd = 2 + 2 * ns;
	bool red[2 * ONNX_RANK_MAX + 2] = { 0 };
	for (size_t i = 2 + ns; i < nd; i++)
		red[i] = true;
	struct gop g[2], o;
	gop_set(&g[0], ssa_of(m, xs), x->dt, x->rank, xs->dims);
	map_add(&g[0], "d0, d1");
	for (size_t i = 0; i < ns; i++)
		win_expr(&g[0], 2 + i, 2 + ns + i, win.s[i], win.d[i]);
	gop_set(&g[1], emit_empty(m, x->dt, ns, win.k), x->dt, ns, win.k);
	for (size_t i = 0; i < ns; i++)
		map_add(&g[1], "d%zu", 2 + ns + i);
	gop_set(&o, emit_filled(m, x->dt, x->rank, dy, is_max ? neg_inf(x->dt) : "0.0"), x->dt, x->rank, dy);
	gop_identity(&o, x->rank);
	long id = generic(m, nd, red, g, 2, &o,
			  is_max ? "#0 = arith.maximumf $o, $0 : $T\n#0" : "#0 = arith.addf $o, $0 : $T\n#0");
	val_free(xp);
	if (!(s = val_ssa(x->dt, x->rank, dy, id)))
		return oom(m);
	if (is_max)
		return output(m, 0, s);
	/* The divisor of every output position: the window's elements inside the input (and the
	 * explicit padding when count_include_pad), known at import. */
	if (!(div = val_const(x->dt, ns, win.o))) {
		val_free(s);
		return oom(m);
	}
	for (int64_t f = 0, n = numel(div); f < n; f++) {
		int64_t rem = f, cnt = 1;
		for (size_t i = ns; i-- > 0;) {
			int64_t oi = rem % win.o[i], c = 0;
			rem /= win.o[i];
			int64_t lo_ok = cip ? -win.pb[i] : 0, hi_ok = x->dims[2 + i] + (cip ? win.pe[i] : 0);
			for (int64_t k = 0; k < win.k[i]; k++) {
				int64_t p = oi * win.s[i] - win.pb[i] + k * win.d[i];
				c += p >= lo_ok && p < hi_ok;
			}
			cnt *= c;
		}
		set_d(div, f, cnt ? (double)cnt : 1.0);
	}
	struct val *ins[2] = { s, div };
	r = emit_ew(m, ins, 2, x->dt, "#0 = arith.divf $0, $1 : $T\n#0", &y);
	val_free(s);
	val_free(div);
	return r < 0 ? r : output(m, 0, y);
}

/* ---------------------------------------------------------------- data movement */

static void copy_elem(struct val *dst, int64_t i, const struct val *src, int64_t j)
{
	size_t sz = DT_SIZE[src->dt];
	memcpy((char *)dst->data + (size_t)i * sz, (const char *)src->data + (size_t)j * sz, sz);
}

static int fold_limit(struct imp *m, size_t rank, const int64_t *dims)
{
	uint64_t n = 1;
	for (size_t d = 0; d < rank; d++)
		n *= (uint64_t)dims[d];
	if (n > FOLD_MAX)
		return refuse(m, "a constant of %" PRIu64 " elements would be computed at import (at most %llu)",
			      n, (unsigned long long)FOLD_MAX);
	return 0;
}

/* An output that is another value under a new name (Identity, a reshape of constant data). */
static int alias(struct imp *m, size_t i, struct val *v)
{
	struct val *o;
	int r = emit_reshape(m, v, v->rank, v->dims, &o);
	if (r < 0)
		return r;
	if (!v->data) {
		o->ssa = ssa_of(m, v);
		o->is_view = true;
	}
	return output(m, i, o);
}

static int op_reshape(struct imp *m)
{
	static const char *const allowed[] = { "allowzero", NULL };
	struct val *x, *s;
	int64_t shape[ONNX_RANK_MAX], allowzero;
	size_t n;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = input_const(m, 1, "shape", &s)) < 0 || (r = attr_int(m, "allowzero", 0, &allowzero)) < 0 ||
	    (r = const_ints(m, s, "shape", shape, ONNX_RANK_MAX, &n)) < 0)
		return r;
	int64_t known = 1;
	long infer = -1;
	for (size_t i = 0; i < n; i++) {
		if (shape[i] == 0 && !allowzero) {
			if (i >= x->rank)
				return refuse(m, "shape[%zu] = 0 copies a dimension the input does not have", i);
			shape[i] = x->dims[i];
		}
		if (shape[i] == -1) {
			if (infer >= 0)
				return refuse(m, "shape has two -1 entries");
			infer = (long)i;
			continue;
		}
		if (shape[i] <= 0)
			return refuse(m, "shape[%zu] = %" PRId64 " is not supported", i, shape[i]);
		known *= shape[i];
	}
	if (infer >= 0) {
		if (numel(x) % known)
			return refuse(m, "cannot infer the -1 entry of the shape");
		shape[infer] = numel(x) / known;
	}
	struct val *o;
	if ((r = emit_reshape(m, x, n, shape, &o)) < 0)
		return r;
	return output(m, 0, o);
}

static int op_flatten(struct imp *m)
{
	static const char *const allowed[] = { "axis", NULL };
	struct val *x, *o;
	int64_t axis;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = attr_int(m, "axis", 1, &axis)) < 0)
		return r;
	if (axis < -(int64_t)x->rank || axis > (int64_t)x->rank)
		return refuse(m, "attribute axis=%" PRId64 " is out of range", axis);
	if (axis < 0)
		axis += (int64_t)x->rank;
	int64_t d[2] = { 1, 1 };
	for (size_t i = 0; i < x->rank; i++)
		d[(int64_t)i < axis ? 0 : 1] *= x->dims[i];
	if ((r = emit_reshape(m, x, 2, d, &o)) < 0)
		return r;
	return output(m, 0, o);
}

static int op_squeeze(struct imp *m)
{
	bool un = !strcmp(m->node->op_type, "Unsqueeze");
	static const char *const allowed[] = { "axes", NULL };
	struct val *x, *ax = NULL, *o;
	int64_t axes[2 * ONNX_RANK_MAX];
	long na = -1;
	size_t n = 0;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = input_opt(m, 1, &ax)) < 0 || (r = attr_ints(m, "axes", axes, &na)) < 0)
		return r;
	if (ax) {
		if ((r = const_ints(m, ax, "axes", axes, ONNX_RANK_MAX, &n)) < 0)
			return r;
	} else if (na >= 0) {
		n = (size_t)na;
	} else if (un) {
		return refuse(m, "axes are missing");
	}
	int64_t d[ONNX_RANK_MAX];
	size_t rank = 0;
	if (un) {
		size_t orank = x->rank + n;
		bool ins[ONNX_RANK_MAX] = { 0 };
		if (orank > ONNX_RANK_MAX)
			return refuse(m, "result rank %zu, at most %d", orank, ONNX_RANK_MAX);
		for (size_t i = 0; i < n; i++) {
			size_t a;
			if ((r = norm_axis(m, axes[i], orank, &a)) < 0)
				return r;
			if (ins[a])
				return refuse(m, "axis %" PRId64 " given twice", axes[i]);
			ins[a] = true;
		}
		for (size_t i = 0, k = 0; i < orank; i++)
			d[rank++] = ins[i] ? 1 : x->dims[k++];
	} else {
		bool sq[ONNX_RANK_MAX] = { 0 };
		for (size_t i = 0; i < n; i++) {
			size_t a;
			if ((r = norm_axis(m, axes[i], x->rank, &a)) < 0)
				return r;
			if (x->dims[a] != 1)
				return refuse(m, "axis %" PRId64 " has size %" PRId64 ", not 1", axes[i], x->dims[a]);
			sq[a] = true;
		}
		for (size_t i = 0; i < x->rank; i++)
			if (!(n ? sq[i] : x->dims[i] == 1))
				d[rank++] = x->dims[i];
	}
	if ((r = emit_reshape(m, x, rank, d, &o)) < 0)
		return r;
	return output(m, 0, o);
}

static int op_identity(struct imp *m)
{
	static const char *const none[] = { NULL };
	static const char *const drop[] = { "ratio", "seed", "training_mode", NULL };
	struct val *x;
	int r;
	bool dropout = !strcmp(m->node->op_type, "Dropout");

	if ((r = attrs_allowed(m, dropout ? drop : none)) < 0 || (r = outputs_max(m, 1)) < 0 ||
	    (r = input(m, 0, &x)) < 0)
		return r;
	if (dropout && n_in(m) > 2) {
		struct val *t;
		if ((r = input_const(m, 2, "training_mode", &t)) < 0)
			return r;
		if (get_i(t, 0))
			return refuse(m, "training_mode is true");
	}
	return alias(m, 0, x);
}

static int op_transpose(struct imp *m)
{
	static const char *const allowed[] = { "perm", NULL };
	struct val *x, *o;
	int64_t perm[2 * ONNX_RANK_MAX], od[ONNX_RANK_MAX];
	long np;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = attr_ints(m, "perm", perm, &np)) < 0)
		return r;
	if (np < 0)
		for (size_t i = 0; i < x->rank; i++)
			perm[i] = (int64_t)(x->rank - 1 - i);
	else if ((size_t)np != x->rank)
		return refuse(m, "attribute perm has %ld values for rank %zu", np, x->rank);
	bool seen[ONNX_RANK_MAX] = { 0 };
	size_t inv[ONNX_RANK_MAX];
	for (size_t i = 0; i < x->rank; i++) {
		if (perm[i] < 0 || (size_t)perm[i] >= x->rank || seen[perm[i]])
			return refuse(m, "attribute perm is not a permutation");
		seen[perm[i]] = true;
		inv[perm[i]] = i;
		od[i] = x->dims[perm[i]];
	}
	if (x->data && fold_limit(m, x->rank, od) == 0) {
		if (!(o = val_like(x, x->dt, x->rank, od)))
			return oom(m);
		if (o->zero_len)
			return output(m, 0, o);
		int64_t oi[ONNX_RANK_MAX], ii[ONNX_RANK_MAX];
		for (int64_t f = 0, n = numel(o); f < n; f++) {
			unflatten(f, x->rank, od, oi);
			for (size_t d = 0; d < x->rank; d++)
				ii[perm[d]] = oi[d];
			copy_elem(o, f, x, flatten_idx(x->rank, x->dims, ii));
		}
		return output(m, 0, o);
	}
	struct gop g, go;
	gop_set(&g, ssa_of(m, x), x->dt, x->rank, x->dims);
	for (size_t j = 0; j < x->rank; j++)
		map_add(&g, "d%zu", inv[j]);
	gop_set(&go, emit_empty(m, x->dt, x->rank, od), x->dt, x->rank, od);
	gop_identity(&go, x->rank);
	long id = generic(m, x->rank, NULL, &g, 1, &go, "$0\n");
	return (o = val_ssa(x->dt, x->rank, od, id)) ? output(m, 0, o) : oom(m);
}

/* out[i] = x[start[d] + i[d] * step[d]] (a strided window of x), as a copy nest or folded. */
static int strided_copy(struct imp *m, struct val *x, const int64_t *start, const int64_t *step,
			const int64_t *od, size_t out_i)
{
	struct val *o;
	int r = check_shape(m, "the result", x->rank, od);
	if (r < 0)
		return r;
	if (x->data && fold_limit(m, x->rank, od) == 0) {
		if (!(o = val_like(x, x->dt, x->rank, od)))
			return oom(m);
		if (o->zero_len)
			return output(m, out_i, o);
		int64_t oi[ONNX_RANK_MAX];
		for (int64_t f = 0, n = numel(o); f < n; f++) {
			unflatten(f, x->rank, od, oi);
			for (size_t d = 0; d < x->rank; d++)
				oi[d] = start[d] + oi[d] * step[d];
			copy_elem(o, f, x, flatten_idx(x->rank, x->dims, oi));
		}
		return output(m, out_i, o);
	}
	/* Loop extents come from the first operand a loop dimension appears in alone, so the
	 * window is cut with tensor.extract_slice (a view) and copied by a nest; a negative step
	 * (not a valid slice stride) reads the input with tensor.extract in the payload. */
	char tx[256], ts[256], pos[256] = "", sz[256] = "", str[256] = "";
	size_t k1 = 0, k2 = 0, k3 = 0;
	bool neg = false;
	vtype(tx, sizeof tx, x);
	tensor_type(ts, sizeof ts, x->dt, x->rank, od);
	for (size_t d = 0; d < x->rank; d++) {
		neg = neg || step[d] < 0;
		k1 += (size_t)snprintf(pos + k1, sizeof pos - k1, "%s%" PRId64, d ? ", " : "", start[d]);
		k2 += (size_t)snprintf(sz + k2, sizeof sz - k2, "%s%" PRId64, d ? ", " : "", od[d]);
		k3 += (size_t)snprintf(str + k3, sizeof str - k3, "%s%" PRId64, d ? ", " : "", step[d]);
	}
	struct gop go;
	long src = ssa_of(m, x), id;
	gop_set(&go, emit_empty(m, x->dt, x->rank, od), x->dt, x->rank, od);
	gop_identity(&go, x->rank);
	if (!neg) {
		long sl = new_ssa(m);
		strbuf_printf(&m->body, "    %%v%ld = tensor.extract_slice %%v%ld[%s] [%s] [%s] : %s to %s %s\n", sl, src,
			pos, sz, str, tx, ts, m->loc);
		struct gop g;
		gop_set(&g, sl, x->dt, x->rank, od);
		gop_identity(&g, x->rank);
		id = generic(m, x->rank, NULL, &g, 1, &go, "$0\n");
	} else {
		struct strbuf t = { 0 };
		id = m->ssa; /* the id emit_generic takes */
		for (size_t d = 0; d < x->rank; d++)
			strbuf_printf(&t, "%%i%ld_%zu = linalg.index %zu : index\n%%j%ld_%zu = affine.apply "
				    "affine_map<(d0) -> (d0 * %" PRId64 " + %" PRId64 ")>(%%i%ld_%zu)\n",
				id, d, d, id, d, step[d], start[d], id, d);
		strbuf_printf(&t, "#0 = tensor.extract %%v%ld[", src);
		for (size_t d = 0; d < x->rank; d++)
			strbuf_printf(&t, "%s%%j%ld_%zu", d ? ", " : "", id, d);
		strbuf_printf(&t, "] : %s\n#0\n", tx);
		if (t.error)
			return oom(m);
		long got = generic(m, x->rank, NULL, NULL, 0, &go, t.p);
		free(t.p);
		if (got != id)
			return err_set(m->err, -EINVAL, "internal error: slice numbering");
	}
	return (o = val_ssa(x->dt, x->rank, od, id)) ? output(m, out_i, o) : oom(m);
}

static int op_slice(struct imp *m)
{
	static const char *const allowed[] = { "axes", "ends", "starts", NULL };
	struct val *x, *vs, *ve, *va = NULL, *vp = NULL;
	int64_t st[2 * ONNX_RANK_MAX], en[2 * ONNX_RANK_MAX], ax[2 * ONNX_RANK_MAX], sp[2 * ONNX_RANK_MAX];
	size_t n = 0, ne = 0, na = 0, nsp = 0;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0)
		return r;
	if (m->opset < 10) {
		long a, b, c;
		if ((r = attr_ints(m, "starts", st, &a)) < 0 || (r = attr_ints(m, "ends", en, &b)) < 0 ||
		    (r = attr_ints(m, "axes", ax, &c)) < 0)
			return r;
		if (a < 0 || b < 0)
			return refuse(m, "attributes starts and ends are required");
		n = (size_t)a, ne = (size_t)b, na = c < 0 ? 0 : (size_t)c;
	} else {
		if ((r = input_const(m, 1, "starts", &vs)) < 0 || (r = input_const(m, 2, "ends", &ve)) < 0 ||
		    (r = input_opt(m, 3, &va)) < 0 || (r = input_opt(m, 4, &vp)) < 0 ||
		    (r = const_ints(m, vs, "starts", st, ONNX_RANK_MAX, &n)) < 0 ||
		    (r = const_ints(m, ve, "ends", en, ONNX_RANK_MAX, &ne)) < 0 ||
		    (va && (r = const_ints(m, va, "axes", ax, ONNX_RANK_MAX, &na)) < 0) ||
		    (vp && (r = const_ints(m, vp, "steps", sp, ONNX_RANK_MAX, &nsp)) < 0))
			return r;
	}
	if (ne != n || (na && na != n) || (nsp && nsp != n))
		return refuse(m, "starts, ends, axes and steps differ in length");
	int64_t start[ONNX_RANK_MAX], step[ONNX_RANK_MAX], od[ONNX_RANK_MAX];
	for (size_t d = 0; d < x->rank; d++)
		start[d] = 0, step[d] = 1, od[d] = x->dims[d];
	bool seen[ONNX_RANK_MAX] = { 0 };
	for (size_t i = 0; i < n; i++) {
		size_t a;
		if ((r = norm_axis(m, na ? ax[i] : (int64_t)i, x->rank, &a)) < 0)
			return r;
		if (seen[a])
			return refuse(m, "axis %zu sliced twice", a);
		seen[a] = true;
		int64_t dim = x->dims[a], s = st[i], e = en[i], p = nsp ? sp[i] : 1;
		if (p == 0)
			return refuse(m, "step 0");
		if (s < 0)
			s += dim;
		if (e < 0 && e > INT64_MIN / 2)
			e += dim;
		if (p > 0) {
			s = s < 0 ? 0 : s > dim ? dim : s;
			e = e < 0 ? 0 : e > dim ? dim : e;
		} else {
			s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
			e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
		}
		int64_t cnt = p > 0 ? (e - s + p - 1) / p : (s - e + (-p) - 1) / (-p);
		if (cnt <= 0)
			return refuse(m, "the slice of axis %zu is empty (zero-sized tensors are not supported)", a);
		start[a] = s, step[a] = p, od[a] = cnt;
	}
	return strided_copy(m, x, start, step, od, 0);
}

static int op_split(struct imp *m)
{
	static const char *const allowed[] = { "axis", "split", "num_outputs", NULL };
	struct val *x, *vs = NULL;
	int64_t axis, split[2 * ONNX_RANK_MAX], numo;
	long nsa = -1;
	size_t ns = 0, a;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = input(m, 0, &x)) < 0 || (r = input_opt(m, 1, &vs)) < 0 ||
	    (r = attr_int(m, "axis", 0, &axis)) < 0 || (r = attr_ints(m, "split", split, &nsa)) < 0 ||
	    (r = attr_int(m, "num_outputs", 0, &numo)) < 0 || (r = norm_axis(m, axis, x->rank, &a)) < 0)
		return r;
	size_t nout = m->node->n_output;
	if (nout == 0 || nout > 2 * ONNX_RANK_MAX)
		return refuse(m, "%zu outputs, 1 to %d supported", nout, 2 * ONNX_RANK_MAX);
	int64_t dim = x->dims[a];
	if (vs) {
		if ((r = const_ints(m, vs, "split", split, 2 * ONNX_RANK_MAX, &ns)) < 0)
			return r;
	} else if (nsa >= 0) {
		ns = (size_t)nsa;
	} else {
		ns = nout;
		int64_t chunk = numo ? (dim + (int64_t)nout - 1) / (int64_t)nout : dim / (int64_t)nout;
		if (!numo && dim % (int64_t)nout)
			return refuse(m, "axis %zu (%" PRId64 ") does not split into %zu equal parts", a, dim, nout);
		for (size_t i = 0; i < nout; i++)
			split[i] = i + 1 < nout ? chunk : dim - chunk * (int64_t)(nout - 1);
	}
	if (ns != nout)
		return refuse(m, "split has %zu parts for %zu outputs", ns, nout);
	int64_t sum = 0;
	for (size_t i = 0; i < ns; i++)
		sum += split[i];
	if (sum != dim)
		return refuse(m, "split sums to %" PRId64 ", axis %zu has %" PRId64, sum, a, dim);
	int64_t off = 0;
	for (size_t i = 0; i < ns; i++) {
		int64_t start[ONNX_RANK_MAX] = { 0 }, step[ONNX_RANK_MAX], od[ONNX_RANK_MAX];
		for (size_t d = 0; d < x->rank; d++)
			step[d] = 1, od[d] = x->dims[d];
		start[a] = off;
		od[a] = split[i];
		off += split[i];
		if ((r = strided_copy(m, x, start, step, od, i)) < 0)
			return r;
	}
	return 0;
}

static int op_concat(struct imp *m)
{
	static const char *const allowed[] = { "axis", NULL };
	struct val *in[256];
	int64_t axis, od[ONNX_RANK_MAX];
	size_t n = n_in(m), a;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 ||
	    (r = attr_int(m, "axis", 0, &axis)) < 0)
		return r;
	if (n == 0 || n > ELEMENTSOF(in))
		return refuse(m, "%zu inputs, 1 to %zu supported", n, ELEMENTSOF(in));
	for (size_t i = 0; i < n; i++)
		if ((r = input(m, i, &in[i])) < 0)
			return r;
	if ((r = norm_axis(m, axis, in[0]->rank, &a)) < 0)
		return r;
	memcpy(od, in[0]->dims, in[0]->rank * sizeof *od);
	od[a] = 0;
	for (size_t i = 0; i < n; i++) {
		if (in[i]->rank != in[0]->rank || in[i]->dt != in[0]->dt)
			return refuse(m, "input %zu differs in rank or element type", i);
		for (size_t d = 0; d < in[0]->rank; d++)
			if (d != a && in[i]->dims[d] != in[0]->dims[d])
				return refuse(m, "input %zu differs in dimension %zu", i, d);
		od[a] += in[i]->dims[a];
	}
	size_t rank = in[0]->rank;
	enum dt t = in[0]->dt;
	struct val *o;
	if ((r = check_shape(m, "the result", rank, od)) < 0)
		return r;
	if (all_const(in, n) && fold_limit(m, rank, od) == 0) {
		bool zero = true;
		for (size_t i = 0; i < n; i++)
			zero = zero && in[i]->zero_len;
		if (!(o = val_like(zero ? in[0] : NULL, t, rank, od)))
			return oom(m);
		if (o->zero_len)
			return output(m, 0, o);
		int64_t oi[ONNX_RANK_MAX];
		for (int64_t f = 0, ne = numel(o); f < ne; f++) {
			unflatten(f, rank, od, oi);
			size_t k = 0;
			while (oi[a] >= in[k]->dims[a])
				oi[a] -= in[k++]->dims[a];
			copy_elem(o, f, in[k], flatten_idx(rank, in[k]->dims, oi));
		}
		return output(m, 0, o);
	}
	/* A fresh tensor; each input copied by a nest into its slice (one-shot bufferization keeps
	 * the extract_slice/insert_slice pair in place). */
	char to[256];
	tensor_type(to, sizeof to, t, rank, od);
	long cur = emit_empty(m, t, rank, od);
	int64_t off = 0;
	for (size_t i = 0; i < n; i++) {
		char ti[256], pos[200] = "", sz[200] = "", one[200] = "";
		size_t k1 = 0, k2 = 0, k3 = 0;
		vtype(ti, sizeof ti, in[i]);
		for (size_t d = 0; d < rank; d++) {
			k1 += (size_t)snprintf(pos + k1, sizeof pos - k1, "%s%" PRId64, d ? ", " : "", d == a ? off : 0);
			k2 += (size_t)snprintf(sz + k2, sizeof sz - k2, "%s%" PRId64, d ? ", " : "", in[i]->dims[d]);
			k3 += (size_t)snprintf(one + k3, sizeof one - k3, "%s1", d ? ", " : "");
		}
		long sl = new_ssa(m);
		strbuf_printf(&m->body, "    %%v%ld = tensor.extract_slice %%v%ld[%s] [%s] [%s] : %s to %s %s\n", sl, cur,
			pos, sz, one, to, ti, m->loc);
		struct gop g, go;
		gop_set(&g, ssa_of(m, in[i]), t, rank, in[i]->dims);
		gop_identity(&g, rank);
		gop_set(&go, sl, t, rank, in[i]->dims);
		gop_identity(&go, rank);
		long c = generic(m, rank, NULL, &g, 1, &go, "$0\n");
		long ins = new_ssa(m);
		strbuf_printf(&m->body, "    %%v%ld = tensor.insert_slice %%v%ld into %%v%ld[%s] [%s] [%s] : %s into %s %s\n",
			ins, c, cur, pos, sz, one, ti, to, m->loc);
		cur = ins;
		off += in[i]->dims[a];
	}
	return (o = val_ssa(t, rank, od, cur)) ? output(m, 0, o) : oom(m);
}

static int op_gather(struct imp *m)
{
	static const char *const allowed[] = { "axis", NULL };
	struct val *x, *ix, *o;
	int64_t axis, od[ONNX_RANK_MAX];
	size_t a;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = input(m, 1, &ix)) < 0 || (r = attr_int(m, "axis", 0, &axis)) < 0 ||
	    (r = norm_axis(m, axis, x->rank, &a)) < 0)
		return r;
	if (ix->dt != DT_I64 && ix->dt != DT_I32)
		return refuse(m, "indices must be int64 or int32");
	size_t orank = x->rank - 1 + ix->rank;
	if (orank > ONNX_RANK_MAX)
		return refuse(m, "result rank %zu, at most %d", orank, ONNX_RANK_MAX);
	size_t k = 0;
	for (size_t d = 0; d < a; d++)
		od[k++] = x->dims[d];
	for (size_t d = 0; d < ix->rank; d++)
		od[k++] = ix->dims[d];
	for (size_t d = a + 1; d < x->rank; d++)
		od[k++] = x->dims[d];
	if ((r = check_shape(m, "the result", orank, od)) < 0)
		return r;
	int64_t dim = x->dims[a];
	if (ix->data)
		for (int64_t i = 0, n = numel(ix); i < n; i++)
			if (get_i(ix, i) < -dim || get_i(ix, i) >= dim)
				return refuse(m, "index %" PRId64 " is out of range for axis %zu (%" PRId64 ")",
					      get_i(ix, i), a, dim);
	if (x->data && ix->data && fold_limit(m, orank, od) == 0) {
		if (!(o = val_like(x, x->dt, orank, od)))
			return oom(m);
		if (o->zero_len)
			return output(m, 0, o);
		int64_t oi[ONNX_RANK_MAX], xi[ONNX_RANK_MAX], ii[ONNX_RANK_MAX];
		for (int64_t f = 0, n = numel(o); f < n; f++) {
			unflatten(f, orank, od, oi);
			for (size_t d = 0; d < ix->rank; d++)
				ii[d] = oi[a + d];
			int64_t v = get_i(ix, flatten_idx(ix->rank, ix->dims, ii));
			for (size_t d = 0; d < x->rank; d++)
				xi[d] = d < a ? oi[d] : d == a ? (v < 0 ? v + dim : v) : oi[d - 1 + ix->rank];
			copy_elem(o, f, x, flatten_idx(x->rank, x->dims, xi));
		}
		return output(m, 0, o);
	}
	char tx[256];
	vtype(tx, sizeof tx, x);
	/* One index known at import (a layer's slice of a stacked cache): a view of x, as a
	 * compiler makes it; whoever reads it reads x in place. */
	if (ix->data && numel(ix) == 1) {
		int64_t v = get_i(ix, 0);
		char to[256], pos[200] = "", sz[200] = "", one[200] = "";
		size_t k1 = 0, k2 = 0, k3 = 0;
		tensor_type(to, sizeof to, x->dt, orank, od);
		for (size_t d = 0; d < x->rank; d++) {
			k1 += (size_t)snprintf(pos + k1, sizeof pos - k1, "%s%" PRId64, d ? ", " : "",
					       d == a ? (v < 0 ? v + dim : v) : 0);
			k2 += (size_t)snprintf(sz + k2, sizeof sz - k2, "%s%" PRId64, d ? ", " : "",
					       d == a ? 1 : x->dims[d]);
			k3 += (size_t)snprintf(one + k3, sizeof one - k3, "%s1", d ? ", " : "");
		}
		long sl = new_ssa(m);
		strbuf_printf(&m->body, "    %%v%ld = tensor.extract_slice %%v%ld[%s] [%s] [%s] : %s to %s %s\n", sl,
			      ssa_of(m, x), pos, sz, one, tx, to, m->loc);
		return (o = val_ssa(x->dt, orank, od, sl)) ? output(m, 0, o) : oom(m);
	}
	/* A nest over the result reading the indices; the table is read with tensor.extract. */
	long table = ssa_of(m, x);
	struct gop g, go;
	gop_set(&g, ssa_of(m, ix), ix->dt, ix->rank, ix->dims);
	for (size_t d = 0; d < ix->rank; d++)
		map_add(&g, "d%zu", a + d);
	gop_set(&go, emit_empty(m, x->dt, orank, od), x->dt, orank, od);
	gop_identity(&go, orank);
	long id = m->ssa; /* the id emit_generic takes */
	struct strbuf t = { 0 };
	strbuf_printf(&t, "#0 = arith.index_cast $0 : $T to index\n#1 = arith.constant 0 : index\n"
		    "#2 = arith.cmpi slt, #0, #1 : index\n#3 = arith.constant %" PRId64 " : index\n"
		    "#4 = arith.addi #0, #3 : index\n#5 = arith.select #2, #4, #0 : index\n", dim);
	for (size_t d = 0; d < x->rank; d++)
		if (d != a)
			strbuf_printf(&t, "%%i%ld_%zu = linalg.index %zu : index\n", id, d, d < a ? d : d - 1 + ix->rank);
	strbuf_printf(&t, "#6 = tensor.extract %%v%ld[", table);
	for (size_t d = 0; d < x->rank; d++) {
		if (d == a)
			strbuf_printf(&t, "%s#5", d ? ", " : "");
		else
			strbuf_printf(&t, "%s%%i%ld_%zu", d ? ", " : "", id, d);
	}
	strbuf_printf(&t, "] : %s\n#6\n", tx);
	if (t.error)
		return oom(m);
	long got = generic(m, orank, NULL, &g, 1, &go, t.p);
	free(t.p);
	if (got != id)
		return err_set(m->err, -EINVAL, "internal error: gather numbering");
	return (o = val_ssa(x->dt, orank, od, id)) ? output(m, 0, o) : oom(m);
}

static int op_expand(struct imp *m)
{
	static const char *const none[] = { NULL };
	struct val *x, *s, *o;
	int64_t shape[ONNX_RANK_MAX];
	size_t n;
	int r;

	if ((r = attrs_allowed(m, none)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = input_const(m, 1, "shape", &s)) < 0 || (r = const_ints(m, s, "shape", shape, ONNX_RANK_MAX, &n)) < 0)
		return r;
	struct val *t = val_new(x->dt, n, shape);
	if (!t)
		return oom(m);
	struct val *both[2] = { x, t };
	size_t rank;
	int64_t od[ONNX_RANK_MAX];
	r = broadcast(m, both, 2, &rank, od);
	val_free(t);
	if (r < 0 || (r = check_shape(m, "the result", rank, od)) < 0)
		return r;
	if (x->data && fold_limit(m, rank, od) == 0) {
		if (!(o = val_like(x, x->dt, rank, od)))
			return oom(m);
		for (int64_t f = 0, ne = o->zero_len ? 0 : numel(o); f < ne; f++)
			copy_elem(o, f, x, bcast_off(x, rank, od, f));
		return output(m, 0, o);
	}
	struct gop g, go;
	gop_bcast(m, &g, x, rank, od);
	gop_set(&go, emit_empty(m, x->dt, rank, od), x->dt, rank, od);
	gop_identity(&go, rank);
	long id = generic(m, rank, NULL, &g, 1, &go, "$0\n");
	return (o = val_ssa(x->dt, rank, od, id)) ? output(m, 0, o) : oom(m);
}

static int op_cast(struct imp *m)
{
	static const char *const allowed[] = { "to", "saturate", NULL };
	struct val *x, *o;
	int64_t to;
	enum dt t;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = attr_int(m, "to", -1, &to)) < 0)
		return r;
	if (to < 0 || to > INT32_MAX || onnx_dt((int32_t)to, &t) < 0)
		return refuse(m, "attribute to=%s is not supported (" DT_NAMES ")",
			      to < 0 ? "(missing)" : onnx_dt_name((int32_t)to));
	if (x->data) {
		if (!(o = val_like(x, t, x->rank, x->dims)))
			return oom(m);
		for (int64_t i = 0, n = o->zero_len ? 0 : numel(x); i < n; i++)
			if (dt_float(x->dt))
				set_d(o, i, get_d(x, i));
			else
				set_i(o, i, get_i(x, i));
		return output(m, 0, o);
	}
	const char *tmpl;
	bool ff = dt_float(x->dt), tf = dt_float(t);
	if (x->dt == t)
		tmpl = "$0\n";
	else if (t == DT_BOOL)
		tmpl = ff ? "#0 = arith.constant 0.0 : $T\n#1 = arith.cmpf une, $0, #0 : $T\n#2 = arith.extui #1 : i1 to i8\n#2"
			  : "#0 = arith.constant 0 : $T\n#1 = arith.cmpi ne, $0, #0 : $T\n#2 = arith.extui #1 : i1 to i8\n#2";
	else if (ff && tf)
		tmpl = float_conv(x->dt, t);
	else if (ff)
		tmpl = "#0 = arith.fptosi $0 : $T to $U\n#0";
	else if (tf)
		tmpl = x->dt == DT_BOOL ? "#0 = arith.uitofp $0 : $T to $U\n#0" : "#0 = arith.sitofp $0 : $T to $U\n#0";
	else if (x->dt == DT_BOOL)
		tmpl = "#0 = arith.extui $0 : $T to $U\n#0";
	else if (DT_SIZE[x->dt] > DT_SIZE[t])
		tmpl = "#0 = arith.trunci $0 : $T to $U\n#0";
	else
		tmpl = "#0 = arith.extsi $0 : $T to $U\n#0";
	if ((r = emit_ew(m, &x, 1, t, tmpl, &o)) < 0)
		return r;
	return output(m, 0, o);
}

static int op_constant(struct imp *m)
{
	struct val *o = NULL;
	int r;

	if (m->node->n_attribute != 1)
		return refuse(m, "expected exactly one attribute");
	const Onnx__AttributeProto *a = m->node->attribute[0];
	const char *name = a->name ? a->name : "";
	if ((r = outputs_max(m, 1)) < 0)
		return r;
	if (!strcmp(name, "value") && a->t) {
		if ((r = tensor_load(m, a->t, "attribute value", &o)) < 0)
			return r;
	} else if (!strcmp(name, "value_float") && a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT) {
		if (!(o = val_const(DT_F32, 0, NULL)))
			return oom(m);
		set_d(o, 0, a->f);
	} else if (!strcmp(name, "value_int") && a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) {
		if (!(o = val_const(DT_I64, 0, NULL)))
			return oom(m);
		set_i(o, 0, a->i);
	} else if (!strcmp(name, "value_floats") && a->n_floats > 0 && a->n_floats <= FOLD_MAX) {
		int64_t n = (int64_t)a->n_floats;
		if (!(o = val_const(DT_F32, 1, &n)))
			return oom(m);
		for (int64_t i = 0; i < n; i++)
			set_d(o, i, a->floats[i]);
	} else if (!strcmp(name, "value_ints") && a->n_ints > 0 && a->n_ints <= FOLD_MAX) {
		int64_t n = (int64_t)a->n_ints;
		if (!(o = val_const(DT_I64, 1, &n)))
			return oom(m);
		for (int64_t i = 0; i < n; i++)
			set_i(o, i, a->ints[i]);
	} else {
		return refuse(m, "attribute %s is not supported", name);
	}
	return output(m, 0, o);
}

static int op_constant_of_shape(struct imp *m)
{
	static const char *const allowed[] = { "value", NULL };
	struct val *s, *val = NULL, *o;
	int64_t shape[ONNX_RANK_MAX];
	size_t n;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 ||
	    (r = input_const(m, 0, "shape", &s)) < 0 || (r = const_ints(m, s, "shape", shape, ONNX_RANK_MAX, &n)) < 0 ||
	    (r = check_shape(m, "the result", n, shape)) < 0 || (r = fold_limit(m, n, shape)) < 0)
		return r;
	const Onnx__AttributeProto *a = attr(m->node, "value");
	if (a) {
		if (!a->t)
			return refuse(m, "attribute value must be a tensor");
		if ((r = tensor_load(m, a->t, "attribute value", &val)) < 0)
			return r;
		if (numel(val) != 1) {
			val_free(val);
			return refuse(m, "attribute value must hold one element");
		}
	}
	if (!(o = val_const(val ? val->dt : DT_F32, n, shape))) {
		val_free(val);
		return oom(m);
	}
	for (int64_t i = 0, ne = numel(o); val && i < ne; i++)
		copy_elem(o, i, val, 0);
	val_free(val);
	return output(m, 0, o);
}

static int op_range(struct imp *m)
{
	static const char *const none[] = { NULL };
	struct val *v[3], *o;
	int r;

	if ((r = attrs_allowed(m, none)) < 0 || (r = outputs_max(m, 1)) < 0)
		return r;
	for (size_t i = 0; i < 3; i++) {
		if ((r = input_const(m, i, i == 0 ? "start" : i == 1 ? "limit" : "delta", &v[i])) < 0)
			return r;
		if (numel(v[i]) != 1 || v[i]->dt != v[0]->dt)
			return refuse(m, "start, limit and delta must be scalars of one type");
	}
	double s = get_d(v[0], 0), l = get_d(v[1], 0), d = get_d(v[2], 0);
	if (d == 0)
		return refuse(m, "delta is 0");
	double cnt = ceil((l - s) / d);
	if (!(cnt >= 1))
		return refuse(m, "the range is empty (zero-sized tensors are not supported)");
	if (cnt > (double)FOLD_MAX)
		return refuse(m, "the range has more than %llu elements", (unsigned long long)FOLD_MAX);
	int64_t n = (int64_t)cnt;
	if (!(o = val_const(v[0]->dt, 1, &n)))
		return oom(m);
	for (int64_t i = 0; i < n; i++)
		if (dt_float(o->dt))
			set_d(o, i, s + (double)i * d);
		else
			set_i(o, i, get_i(v[0], 0) + i * get_i(v[2], 0));
	return output(m, 0, o);
}

static int op_shape(struct imp *m)
{
	bool size = !strcmp(m->node->op_type, "Size");
	static const char *const allowed[] = { "start", "end", NULL };
	static const char *const none[] = { NULL };
	struct val *x, *o;
	int64_t st, en;
	int r;

	if ((r = attrs_allowed(m, size ? none : allowed)) < 0 || (r = outputs_max(m, 1)) < 0 ||
	    (r = input(m, 0, &x)) < 0 || (r = attr_int(m, "start", 0, &st)) < 0 ||
	    (r = attr_int(m, "end", (int64_t)x->rank, &en)) < 0)
		return r;
	if (size) {
		if (!(o = val_const(DT_I64, 0, NULL)))
			return oom(m);
		set_i(o, 0, numel(x));
		return output(m, 0, o);
	}
	int64_t rk = (int64_t)x->rank;
	st = st < 0 ? st + rk : st;
	en = en < 0 ? en + rk : en;
	st = st < 0 ? 0 : st > rk ? rk : st;
	en = en < 0 ? 0 : en > rk ? rk : en;
	int64_t n = en - st;
	if (n <= 0)
		return refuse(m, "the shape slice is empty");
	if (!(o = val_const(DT_I64, 1, &n)))
		return oom(m);
	for (int64_t i = 0; i < n; i++)
		set_i(o, i, x->dims[st + i]);
	return output(m, 0, o);
}

static int op_pad(struct imp *m)
{
	static const char *const allowed[] = { "mode", "pads", "value", NULL };
	struct val *x, *vp = NULL, *vc = NULL, *va = NULL, *o = NULL;
	int64_t pads[2 * ONNX_RANK_MAX], axes[ONNX_RANK_MAX];
	size_t np = 0, na = 0;
	double cv = 0;
	char mode[32];
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = attr_str(m, "mode", "constant", mode, sizeof mode)) < 0)
		return r;
	if (strcmp(mode, "constant") != 0)
		return refuse(m, "attribute mode=%s is not supported (constant)", mode);
	if (m->opset < 11) {
		long n;
		if ((r = attr_ints(m, "pads", pads, &n)) < 0 || (r = attr_float(m, "value", 0.0, &cv)) < 0)
			return r;
		np = n < 0 ? 0 : (size_t)n;
	} else {
		if ((r = input_const(m, 1, "pads", &vp)) < 0 || (r = input_opt(m, 2, &vc)) < 0 ||
		    (r = input_opt(m, 3, &va)) < 0 ||
		    (r = const_ints(m, vp, "pads", pads, 2 * ONNX_RANK_MAX, &np)) < 0 ||
		    (va && (r = const_ints(m, va, "axes", axes, ONNX_RANK_MAX, &na)) < 0))
			return r;
		if (vc) {
			if (!vc->data || numel(vc) != 1)
				return refuse(m, "constant_value must be a constant scalar");
			cv = get_d(vc, 0);
		}
	}
	int64_t lo[ONNX_RANK_MAX] = { 0 }, hi[ONNX_RANK_MAX] = { 0 };
	size_t nax = va ? na : x->rank;
	if (np != 2 * nax)
		return refuse(m, "pads has %zu values, expected %zu", np, 2 * nax);
	for (size_t i = 0; i < nax; i++) {
		size_t a = i;
		if (va && (r = norm_axis(m, axes[i], x->rank, &a)) < 0)
			return r;
		if (pads[i] < 0 || pads[nax + i] < 0)
			return refuse(m, "negative pads (cropping) are not supported");
		lo[a] = pads[i];
		hi[a] = pads[nax + i];
	}
	if (x->data) {
		int64_t od[ONNX_RANK_MAX], oi[ONNX_RANK_MAX];
		for (size_t d = 0; d < x->rank; d++)
			od[d] = x->dims[d] + lo[d] + hi[d];
		if ((r = check_shape(m, "the result", x->rank, od)) < 0 || (r = fold_limit(m, x->rank, od)) < 0)
			return r;
		if (!(o = val_like(cv == 0 ? x : NULL, x->dt, x->rank, od)))
			return oom(m);
		for (int64_t f = 0, n = o->zero_len ? 0 : numel(o); f < n; f++) {
			unflatten(f, x->rank, od, oi);
			bool in = true;
			for (size_t d = 0; d < x->rank; d++) {
				oi[d] -= lo[d];
				in = in && oi[d] >= 0 && oi[d] < x->dims[d];
			}
			if (in)
				copy_elem(o, f, x, flatten_idx(x->rank, x->dims, oi));
			else
				set_d(o, f, cv);
		}
		return output(m, 0, o);
	}
	char lit[64];
	if (dt_float(x->dt))
		fmt_float(lit, sizeof lit, cv, x->dt);
	else
		snprintf(lit, sizeof lit, "%" PRId64, (int64_t)cv);
	if ((r = emit_pad(m, x, lo, hi, lit, &o)) < 0)
		return r;
	if (!o)
		return alias(m, 0, x);
	return output(m, 0, o);
}

static int op_trilu(struct imp *m)
{
	static const char *const allowed[] = { "upper", NULL };
	struct val *x, *vk = NULL, *o;
	int64_t upper, k = 0;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = input_opt(m, 1, &vk)) < 0 || (r = attr_int(m, "upper", 1, &upper)) < 0)
		return r;
	if (vk) {
		if (!vk->data || numel(vk) != 1)
			return refuse(m, "k must be a constant scalar");
		k = get_i(vk, 0);
	}
	if (x->rank < 2)
		return refuse(m, "input rank %zu, at least 2", x->rank);
	if (!x->data)
		return refuse(m, "input 0 must be known at import (only a constant Trilu is folded)");
	if ((r = fold_limit(m, x->rank, x->dims)) < 0)
		return r;
	if (!(o = val_const(x->dt, x->rank, x->dims)))
		return oom(m);
	int64_t idx[ONNX_RANK_MAX];
	for (int64_t f = 0, n = numel(o); f < n; f++) {
		unflatten(f, x->rank, x->dims, idx);
		int64_t i = idx[x->rank - 2], j = idx[x->rank - 1];
		if (upper ? j - i >= k : j - i <= k)
			copy_elem(o, f, x, f);
	}
	return output(m, 0, o);
}

static int op_batchnorm(struct imp *m)
{
	static const char *const allowed[] = { "epsilon", "momentum", "training_mode", "spatial", NULL };
	struct val *x, *p[4], *o = NULL;
	int64_t training;
	double eps;
	int r;

	if ((r = attrs_allowed(m, allowed)) < 0 || (r = outputs_max(m, 1)) < 0 || (r = input(m, 0, &x)) < 0 ||
	    (r = attr_float(m, "epsilon", 1e-5, &eps)) < 0 || (r = attr_int(m, "training_mode", 0, &training)) < 0 ||
	    (r = need_dt(m, x, true)) < 0)
		return r;
	if (training)
		return refuse(m, "attribute training_mode=%" PRId64 " is not supported (inference only)", training);
	static const char *const what[] = { "scale", "B", "input_mean", "input_var" };
	if (x->rank < 2)
		return refuse(m, "input rank %zu, at least 2", x->rank);
	int64_t C = x->dims[1];
	for (size_t i = 0; i < 4; i++) {
		if ((r = input_const(m, i + 1, what[i], &p[i])) < 0)
			return r;
		if (p[i]->rank != 1 || p[i]->dims[0] != C)
			return refuse(m, "%s must have %" PRId64 " values", what[i], C);
	}
	/* y = x * a + b per channel, a = scale / sqrt(var + eps), b = B - mean * a. */
	int64_t dims[ONNX_RANK_MAX];
	dims[0] = C;
	for (size_t d = 2; d < x->rank; d++)
		dims[d - 1] = 1;
	struct val *a = val_const(x->dt, x->rank - 1, dims), *b = val_const(x->dt, x->rank - 1, dims);
	if (!a || !b) {
		val_free(a);
		val_free(b);
		return oom(m);
	}
	for (int64_t c = 0; c < C; c++) {
		double sc = get_d(p[0], c) / sqrt(get_d(p[3], c) + eps);
		set_d(a, c, sc);
		set_d(b, c, get_d(p[1], c) - get_d(p[2], c) * sc);
	}
	struct val *ins[3] = { x, a, b };
	r = emit_ew(m, ins, 3, x->dt, "#0 = arith.mulf $0, $1 : $T\n#1 = arith.addf #0, $2 : $T\n#1", &o);
	val_free(a);
	val_free(b);
	return r < 0 ? r : output(m, 0, o);
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
	for (size_t i = 0; i < ELEMENTSOF(EWOPS); i++)
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

	for (size_t i = 0; i < ELEMENTSOF(EWOPS); i++)
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
