/* SPDX-License-Identifier: MIT */
/*
 * onnx-run MANIFEST LIBRARY TESTDIR [RTOL ATOL]: runs a model library pim-extract built from
 * TESTDIR/model.onnx on every TESTDIR/test_data_set_N/input_K.pb (serialized TensorProto, the
 * layout of ONNX's backend tests) and compares its results with output_K.pb: floats within
 * |got - want| <= ATOL + RTOL * |want| (ONNX's defaults 1e-3, 1e-7), integers and bools exactly.
 * float16 and bfloat16 tensors are 2 bytes per element (raw_data, or int32_data holding each
 * value's bits) and are compared as floats.  A uint16 tensor (the importer takes no uint16
 * model) is bfloat16 bits, as ONNX's backend tests store bfloat16 for want of a numpy type:
 * it is compared as ONNX's runner compares it, the 16-bit numbers within the tolerances.
 *
 * The library's arguments (client/pim_hooks.h) are the manifest's ARGUMENT allocations: the
 * graph inputs in order, then one per graph output; each one's size is checked against the
 * tensor it carries.  Bool tensors are one byte per element (onnx.h).
 *
 * Exit status: 0 every output matched, 1 an output differs, 2 the run could not be made
 * (missing files, sizes that disagree, the library refused its arguments).
 *
 * onnx-run --import [--const-input NAME=FILE.pb]... MODEL.onnx: only the importer of
 * pim-extract (compiler/onnx.c), without MLIR: exit 0 when it accepts the model, 1 with its
 * refusal on standard error.  The backend test runner uses it to sort out refused tests
 * cheaply before running pim-extract.
 *
 * onnx-run --inputs MODEL.onnx: the graph inputs that are not initializers, one line each:
 * "K NAME ELEM_TYPE" (K counts them from 0, as input_K.pb does; ELEM_TYPE is TensorProto's
 * number, 7 for int64).
 *
 * onnx-run --skip-input K ... MANIFEST LIBRARY TESTDIR: input_K.pb is not an argument of the
 * library (the model was extracted with --const-input pinning that input to it).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "manifest.h"
#include "onnx.h"
#include "onnx.pb-c.h"
#include "pim_hooks.h"

static uint64_t hooks;

void pim_region_enter(int32_t region) { (void)region; hooks++; }
void pim_region_exit(int32_t region) { (void)region; hooks++; }

struct tensor {
	int32_t type;     /* ONNX TensorProto.DataType */
	size_t elem;      /* bytes per element in the library's layout */
	size_t n;         /* elements */
	void *data;
};

static int elem_size(int32_t t, size_t *out)
{
	switch (t) {
	case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: *out = 4; return 0;
	case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: *out = 8; return 0;
	case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: *out = 1; return 0;
	case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16:
	case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: *out = 2; return 0;
	}
	return -1;
}

static bool is_float(int32_t t)
{
	return t == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || t == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ||
	       t == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 || t == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16 ||
	       t == ONNX__TENSOR_PROTO__DATA_TYPE__UINT16;
}

/* IEEE binary16 bits to a double (exact). */
static double f16_value(uint16_t h)
{
	int e = (h >> 10) & 0x1f, f = h & 0x3ff;
	double v = e == 0x1f ? (f ? NAN : INFINITY) : e ? ldexp(1024 + f, e - 25) : ldexp(f, -24);
	return h & 0x8000 ? -v : v;
}

/* bfloat16 bits: the upper half of a binary32. */
static double bf16_value(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float x;
	memcpy(&x, &u, 4);
	return x;
}

/* Reads a TensorProto file into the library's layout. */
static int load_tensor(const char *path, struct tensor *t)
{
	char *bytes = NULL;
	size_t len = 0;
	struct pim_error err = { 0 };

	if (read_file(path, 1u << 30, &bytes, &len, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	Onnx__TensorProto *p = onnx__tensor_proto__unpack(NULL, len, (const uint8_t *)bytes);
	free(bytes);
	if (!p) {
		fprintf(stderr, "%s: not a TensorProto\n", path);
		return -1;
	}
	int rc = -1;
	t->type = p->data_type;
	if (elem_size(p->data_type, &t->elem) < 0) {
		fprintf(stderr, "%s: element type %d not handled\n", path, p->data_type);
		goto out;
	}
	t->n = 1;
	for (size_t i = 0; i < p->n_dims; i++)
		t->n *= (size_t)p->dims[i];
	t->data = calloc(t->n ? t->n : 1, t->elem);
	if (!t->data)
		goto out;
	if (p->has_raw_data) {
		if (p->raw_data.len != t->n * t->elem) {
			fprintf(stderr, "%s: raw_data has %zu bytes, expected %zu\n", path, p->raw_data.len,
				t->n * t->elem);
			goto out;
		}
		memcpy(t->data, p->raw_data.data, p->raw_data.len);
		rc = 0;
		goto out;
	}
	size_t have = 0;
	for (size_t i = 0; i < t->n; i++) {
		switch (p->data_type) {
		case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
			have = p->n_float_data;
			if (i < have) ((float *)t->data)[i] = p->float_data[i];
			break;
		case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
			have = p->n_double_data;
			if (i < have) ((double *)t->data)[i] = p->double_data[i];
			break;
		case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
			have = p->n_int64_data;
			if (i < have) ((int64_t *)t->data)[i] = p->int64_data[i];
			break;
		case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
			have = p->n_int32_data;
			if (i < have) ((int32_t *)t->data)[i] = p->int32_data[i];
			break;
		case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
			have = p->n_int32_data;
			if (i < have) ((uint8_t *)t->data)[i] = p->int32_data[i] != 0;
			break;
		case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
		case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16:
		case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
			have = p->n_int32_data;
			if (i < have) ((uint16_t *)t->data)[i] = (uint16_t)p->int32_data[i];
			break;
		}
	}
	if (have < t->n) {
		fprintf(stderr, "%s: %zu elements stored, %zu expected\n", path, have, t->n);
		goto out;
	}
	rc = 0;
out:
	onnx__tensor_proto__free_unpacked(p, NULL);
	return rc;
}

static double as_double(const struct tensor *t, size_t i)
{
	switch (t->type) {
	case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: return ((const float *)t->data)[i];
	case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: return ((const double *)t->data)[i];
	case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: return (double)((const int64_t *)t->data)[i];
	case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: return ((const int32_t *)t->data)[i];
	case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: return f16_value(((const uint16_t *)t->data)[i]);
	case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: return bf16_value(((const uint16_t *)t->data)[i]);
	case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16: return ((const uint16_t *)t->data)[i];
	default: return ((const uint8_t *)t->data)[i];
	}
}

static int count_files(const char *dir, const char *prefix)
{
	char path[4096];
	int n = 0;
	for (;; n++) {
		snprintf(path, sizeof path, "%s/%s_%d.pb", dir, prefix, n);
		if (access(path, R_OK) != 0)
			return n;
	}
}

/* The manifest's ARGUMENT allocations by increasing id. */
static size_t arguments(const Pim__Manifest *m, const Pim__Allocation **out, size_t max)
{
	size_t n = 0;
	for (uint32_t id = 0; n < max; id++) {
		const Pim__Allocation *a = NULL;
		for (size_t i = 0; i < m->n_allocations; i++)
			if (m->allocations[i]->id == id)
				a = m->allocations[i];
		if (!a || a->kind != PIM__ALLOC_KIND__ALLOC_KIND_ARGUMENT)
			break;
		out[n++] = a;
	}
	return n;
}

/* input_K.pb files pinned as constants (--skip-input K): not arguments. */
static bool skipped[256];

static int run_set(const Pim__Manifest *m, pim_model_entry_fn entry, const char *set, double rtol, double atol)
{
	const Pim__Allocation *args[256];
	size_t n_args = arguments(m, args, 256);
	int n_files = count_files(set, "input"), n_in = 0, n_out = count_files(set, "output");
	int file_of[256];
	struct tensor t[256];
	void *ptrs[256];
	char path[4096];
	int rc = 2;

	for (int k = 0; k < n_files && k < 256; k++)
		if (!skipped[k])
			file_of[n_in++] = k;
	if ((size_t)(n_in + n_out) != n_args || n_in + n_out > 256) {
		fprintf(stderr, "%s: %d inputs and %d outputs, the library takes %zu arguments\n", set, n_in, n_out,
			n_args);
		return 2;
	}
	memset(t, 0, sizeof t);
	for (int i = 0; i < n_in + n_out; i++) {
		bool in = i < n_in;
		snprintf(path, sizeof path, "%s/%s_%d.pb", set, in ? "input" : "output", in ? file_of[i] : i - n_in);
		if (load_tensor(path, &t[i]) < 0)
			goto out;
		size_t bytes = t[i].n * t[i].elem;
		if (args[i]->bytes != bytes) {
			fprintf(stderr, "%s: %zu bytes, the library's argument %d has %" PRIu64 "\n", path, bytes, i,
				args[i]->bytes);
			goto out;
		}
		size_t cap = (bytes + 63) / 64 * 64;
		ptrs[i] = aligned_alloc(64, cap ? cap : 64);
		if (!ptrs[i])
			goto out;
		if (in)
			memcpy(ptrs[i], t[i].data, bytes);
		else
			memset(ptrs[i], 0xA5, bytes); /* not a plausible result */
	}
	if (entry(ptrs, n_args) != 0) {
		fprintf(stderr, "%s: the library refused its arguments\n", set);
		goto out;
	}
	rc = 0;
	for (int i = n_in; i < n_in + n_out && rc == 0; i++) {
		struct tensor got = t[i];
		got.data = ptrs[i];
		bool fl = is_float(t[i].type);
		for (size_t k = 0; k < t[i].n; k++) {
			double g = as_double(&got, k), w = as_double(&t[i], k);
			bool ok = fl ? (isnan(w) ? isnan(g) : (isinf(w) ? g == w : fabs(g - w) <= atol + rtol * fabs(w)))
				     : memcmp((char *)got.data + k * t[i].elem, (char *)t[i].data + k * t[i].elem, t[i].elem) == 0;
			if (!ok) {
				fprintf(stderr, "%s: output %d element %zu: got %.9g, expected %.9g\n", set, i - n_in, k, g, w);
				rc = 1;
				break;
			}
		}
	}
out:
	for (int i = 0; i < n_in + n_out; i++) {
		free(t[i].data);
		if (i < n_in + n_out && t[i].elem)
			free(ptrs[i]);
	}
	return rc;
}

/* --inputs: the graph inputs that are not initializers. */
static int list_inputs(const char *path)
{
	char *bytes = NULL;
	size_t len = 0;
	struct pim_error err = { 0 };

	if (read_file(path, ONNX_INPUT_MAX, &bytes, &len, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 2;
	}
	Onnx__ModelProto *model = onnx__model_proto__unpack(NULL, len, (const uint8_t *)bytes);
	free(bytes);
	if (!model || !model->graph) {
		fprintf(stderr, "%s: not an ONNX model\n", path);
		return 2;
	}
	const Onnx__GraphProto *g = model->graph;
	int k = 0;
	for (size_t i = 0; i < g->n_input; i++) {
		const char *name = g->input[i]->name ? g->input[i]->name : "";
		bool init = false;
		for (size_t j = 0; j < g->n_initializer; j++)
			init = init || (g->initializer[j]->name && !strcmp(g->initializer[j]->name, name));
		if (init)
			continue;
		const Onnx__TypeProto *tp = g->input[i]->type;
		int32_t et = tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && tp->tensor_type ?
				     tp->tensor_type->elem_type : 0;
		printf("%d %s %d\n", k++, name, et);
	}
	onnx__model_proto__free_unpacked(model, NULL);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--inputs") == 0)
		return list_inputs(argv[2]);
	if (argc >= 3 && strcmp(argv[1], "--import") == 0) {
		static struct onnx_const_input consts[ONNX_SHAPES_MAX];
		struct onnx_options oo = { .input = argv[argc - 1], .consts = consts };
		struct pim_error e = { 0 };
		char *text = NULL;
		size_t n = 0;
		for (int i = 2; i + 1 < argc; i += 2) {
			if (strcmp(argv[i], "--const-input") != 0 || i + 2 >= argc || oo.n_consts == ONNX_SHAPES_MAX ||
			    onnx_parse_const_input(argv[i + 1], &consts[oo.n_consts++], &e) < 0) {
				fprintf(stderr, "usage: onnx-run --import [--const-input NAME=FILE.pb]... MODEL.onnx %s\n", e.msg);
				return 2;
			}
		}
		if (onnx_import(&oo, &text, &n, &e) < 0) {
			fprintf(stderr, "pim-extract: %s\n", e.msg);
			return 1;
		}
		free(text);
		return 0;
	}
	while (argc > 2 && strcmp(argv[1], "--skip-input") == 0) {
		char *end;
		long k = strtol(argv[2], &end, 10);
		if (*end || k < 0 || k >= 256) {
			fprintf(stderr, "onnx-run: --skip-input takes 0 to 255\n");
			return 2;
		}
		skipped[k] = true;
		argc -= 2;
		argv += 2;
	}
	if (argc != 4 && argc != 6) {
		fprintf(stderr, "usage: onnx-run [--skip-input K]... MANIFEST LIBRARY TESTDIR [RTOL ATOL]\n");
		return 2;
	}
	double rtol = argc == 6 ? strtod(argv[4], NULL) : 1e-3, atol = argc == 6 ? strtod(argv[5], NULL) : 1e-7;
	struct pim_error err = { 0 };
	Pim__Manifest *m = NULL;
	if (manifest_read_file(argv[1], &m, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 2;
	}
	void *lib = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "dlopen %s: %s\n", argv[2], dlerror());
		return 2;
	}
	pim_model_entry_fn entry;
	*(void **)&entry = dlsym(lib, PIM_MODEL_ENTRY);
	if (!entry) {
		fprintf(stderr, "%s: no %s\n", argv[2], PIM_MODEL_ENTRY);
		return 2;
	}
	int rc = 0, sets = 0;
	char set[4096];
	for (int k = 0;; k++) {
		snprintf(set, sizeof set, "%s/test_data_set_%d", argv[3], k);
		DIR *d = opendir(set);
		if (!d)
			break;
		closedir(d);
		int r = run_set(m, entry, set, rtol, atol);
		sets++;
		if (r > rc)
			rc = r;
	}
	if (!sets) {
		fprintf(stderr, "%s: no test_data_set_N\n", argv[3]);
		rc = 2;
	}
	if (rc == 0 && hooks == 0) {
		fprintf(stderr, "%s: no region hook fired\n", argv[2]);
		rc = 2;
	}
	pim__manifest__free_unpacked(m, NULL);
	return rc;
}
