/* SPDX-License-Identifier: MIT */
/*
 * pim-extract: a linalg-on-tensors MLIR module (Torch-MLIR's linalg backend output, static
 * shapes) or an ONNX model (onnx.h imports it to such a module) in; the pimd model manifest
 * (proto/pim.proto, message Manifest; JSON or protobuf) and optionally the instrumented model
 * library out.  See compiler/README.md.
 *
 * Exit status: 0 done, 1 the input was refused or a step failed (nothing written), 2 usage.
 */
#include <fcntl.h>
#include <getopt.h>
#include <json-c/json.h>
#include <libgen.h>
#include <string.h>
#include <sys/stat.h>

#include "cpulevel.h"
#include "extract.h"
#include "manifest.h"
#include "model.h"
#include "onnx.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: pim-extract [OPTIONS] INPUT.mlir|INPUT.onnx\n"
		"Turns a linalg-on-tensors module with static shapes, or an ONNX model, into a pimd\n"
		"model manifest: one region per loop nest, in program order.\n\n"
		"  -o, --output FILE      write the manifest to FILE (default: standard output)\n"
		"      --binary           write the manifest as protobuf (default: JSON)\n"
		"      --name NAME        model name (default: INPUT's basename without .mlir/.onnx)\n"
		"      --entry FUNC       entry function (default: the only public function)\n"
		"      --emit-model SO    also build the instrumented model library SO\n"
		"      --cc PROGRAM       compiler for --emit-model (default: $PIM_EXTRACT_CC or %s)\n"
		"      --save-temps DIR   keep the IR of every stage and the library's sources in DIR\n"
		"                         (created with its parents if missing)\n"
		"      --nests fused|source\n"
		"                         fused (default): the nests a compiler makes for the host,\n"
		"                         elementwise chains fused, a transpose that only feeds a\n"
		"                         contraction folded into its indexing; source: one nest per\n"
		"                         linalg op of the input (each fill folded into the contraction\n"
		"                         it initialises either way)\n"
		"      --target LEVEL     instruction set of the library's host code: native (the\n"
		"                         best x86-64 level this CPU runs, the default), x86-64,\n"
		"                         x86-64-v2, x86-64-v3 (AVX2, FMA) or x86-64-v4 (AVX-512)\n"
		"      --weights real|zero\n"
		"                         zero: every tensor constant of %u KiB or more becomes a\n"
		"                         zero-filled buffer allocated when the library is loaded\n"
		"                         (small library, timing-only outputs; the manifest's source\n"
		"                         says so; ONNX external data of that size is not read);\n"
		"                         default real\n"
		"      --input-shape NAME=D0xD1...\n"
		"                         ONNX input: the static shape of graph input NAME (pins its\n"
		"                         symbolic dimensions; repeatable)\n"
		"      --const-input NAME=FILE.pb\n"
		"                         ONNX input: graph input NAME is the constant tensor in\n"
		"                         FILE.pb (a serialized TensorProto), folded at import, not\n"
		"                         an argument of the library (repeatable)\n"
		"  -h, --help             this text\n"
		"      --version          the version\n\n"
		"Refused input (parse errors, torch-dialect input, dynamic shapes, unsupported ops,\n"
		"loops without constant bounds) is reported with its op and file:line:col, for ONNX\n"
		"with the node's name, op type and attribute; the exit status is then 1 and no output\n"
		"file is written.  INPUT is ONNX when it ends in .onnx or starts like a ModelProto.\n",
		MODEL_CC_DEFAULT, EXTRACT_WEIGHTS_ZERO_MIN / 1024);
}

/* A file written next to its destination and renamed over it once everything succeeded. */
struct staged {
	char final[4096];
	char tmp[4096];
	bool active;
};

static void staged_discard(struct staged *s)
{
	if (s->active)
		unlink(s->tmp);
	s->active = false;
}

static int staged_open(struct staged *s, const char *path, struct pim_error *err)
{
	char copy[4096];

	snprintf(s->final, sizeof s->final, "%s", path);
	snprintf(copy, sizeof copy, "%s", path);
	char *dir = dirname(copy);
	snprintf(s->tmp, sizeof s->tmp, "%s/.pim-extract.XXXXXX", dir);
	int fd = mkostemp(s->tmp, O_CLOEXEC);
	if (fd < 0)
		return err_set(err, -errno, "cannot create a file in %s: %s", dir, strerror(errno));
	s->active = true;
	return fd;
}

static int staged_commit(struct staged *s, mode_t mode, struct pim_error *err)
{
	mode_t um = umask(0);

	umask(um);
	if (chmod(s->tmp, mode & ~um) < 0 || rename(s->tmp, s->final) < 0)
		return err_set(err, -errno, "%s: %s", s->final, strerror(errno));
	s->active = false;
	return 0;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void manifest_freep(Pim__Manifest **m)
{
	if (*m)
		pim__manifest__free_unpacked(*m, NULL);
}

static void extract_freep(struct extract **x)
{
	extract_free(*x);
}

/* The manifest's bytes in the chosen form. */
static int serialize(const Pim__Manifest *m, bool binary, uint8_t **out, size_t *len,
		     struct pim_error *err)
{
	if (binary) {
		*len = pim__manifest__get_packed_size(m);
		*out = malloc(*len ? *len : 1);
		if (!*out)
			return err_set(err, -ENOMEM, "out of memory");
		pim__manifest__pack(m, *out);
		return 0;
	}
	json_object *j = manifest_to_json(m);
	if (!j)
		return err_set(err, -ENOMEM, "out of memory");
	const char *s = json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
							  JSON_C_TO_STRING_NOSLASHESCAPE);
	*len = s ? strlen(s) + 1 : 0;
	*out = s ? malloc(*len) : NULL;
	if (*out) {
		memcpy(*out, s, *len - 1);
		(*out)[*len - 1] = '\n';
	}
	json_object_put(j);
	return *out ? 0 : err_set(err, -ENOMEM, "out of memory");
}

/* An ONNX model imported to MLIR text in a file of its own (DIR/NAME.onnx.mlir with
 * --save-temps, else a private temporary directory removed at exit). */
struct imported {
	char dir[4096];
	char path[4096];
	bool temp;
};

static void imported_done(struct imported *im)
{
	if (!im->temp)
		return;
	unlink(im->path);
	rmdir(im->dir);
	im->temp = false;
}

static int import_onnx(const char *name, struct onnx_options *oo, bool weights_zero,
		       const char *save_temps, struct imported *im, struct pim_error *err)
{
	oo->zero_min = weights_zero ? EXTRACT_WEIGHTS_ZERO_MIN : 0;
	_cleanup_(freep) char *text = NULL;
	size_t len = 0;
	int r;

	if ((r = onnx_import(oo, &text, &len, err)) < 0)
		return r;
	if (save_temps) {
		snprintf(im->path, sizeof im->path, "%s/%s.onnx.mlir", save_temps, name);
	} else {
		const char *tmp = getenv("TMPDIR");
		snprintf(im->dir, sizeof im->dir, "%s/pim-extract.XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(im->dir))
			return err_set(err, -errno, "cannot create a directory in %s: %s",
				       tmp && *tmp ? tmp : "/tmp", strerror(errno));
		snprintf(im->path, sizeof im->path, "%s/%s.mlir", im->dir, name);
		im->temp = true;
	}
	_cleanup_(closep) int fd = open(im->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return err_set(err, -errno, "%s: %s", im->path, strerror(errno));
	if ((r = write_all(fd, text, len)) < 0)
		return err_set(err, r, "%s: %s", im->path, strerror(-r));
	return 0;
}

/* mkdir -p DIR, mode 0755 (less the umask) for what it creates: --save-temps names a
 * directory that need not exist yet. */
static int mkdir_parents(const char *dir, struct pim_error *err)
{
	char p[4096];
	size_t n = strlen(dir);

	if (n == 0 || n >= sizeof p)
		return err_set(err, -ENAMETOOLONG, "--save-temps: a directory name of 1 to %zu bytes is needed",
			       sizeof p - 1);
	memcpy(p, dir, n + 1);
	for (char *s = p + 1;; s++) {
		if (*s && *s != '/')
			continue;
		char c = *s;
		*s = 0;
		struct stat st;
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return err_set(err, -errno, "--save-temps %s: cannot create %s: %s", dir, p, strerror(errno));
		if (stat(p, &st) < 0 || !S_ISDIR(st.st_mode))
			return err_set(err, -ENOTDIR, "--save-temps %s: %s is not a directory", dir, p);
		if (!c)
			return 0;
		*s = c;
	}
}

/* The default model name of an ONNX input: its basename without .onnx. */
static void onnx_model_name(const char *input, char *out, size_t n)
{
	const char *b = strrchr(input, '/');
	b = b ? b + 1 : input;
	size_t len = strlen(b);
	if (len > 5 && strcmp(b + len - 5, ".onnx") == 0)
		len -= 5;
	snprintf(out, n, "%.*s", (int)len, b);
}

/* Messages of the pipeline name the imported text's path: name the model instead. */
static void rename_in_message(struct pim_error *err, const char *from, const char *to)
{
	char *p = *from ? strstr(err->msg, from) : NULL;
	if (!p && err->msg[0] == ':') {
		/* A location without a file: the imported ops carry node names instead. */
		char tail[sizeof err->msg];
		snprintf(tail, sizeof tail, "%s", err->msg);
		snprintf(err->msg, sizeof err->msg, "%s (imported)%s", to, tail);
		return;
	}
	if (!p)
		return;
	char tail[sizeof err->msg];
	snprintf(tail, sizeof tail, "%s", p + strlen(from));
	snprintf(p, sizeof err->msg - (size_t)(p - err->msg), "%s (imported)%s", to, tail);
}

int main(int argc, char **argv)
{
	enum { OPT_BINARY = 256, OPT_NAME, OPT_ENTRY, OPT_EMIT_MODEL, OPT_CC, OPT_SAVE_TEMPS, OPT_WEIGHTS, OPT_TARGET, OPT_NESTS,
	       OPT_VERSION, OPT_INPUT_SHAPE, OPT_CONST_INPUT };
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "binary", no_argument, NULL, OPT_BINARY },
		{ "name", required_argument, NULL, OPT_NAME },
		{ "entry", required_argument, NULL, OPT_ENTRY },
		{ "emit-model", required_argument, NULL, OPT_EMIT_MODEL },
		{ "cc", required_argument, NULL, OPT_CC },
		{ "save-temps", required_argument, NULL, OPT_SAVE_TEMPS },
		{ "weights", required_argument, NULL, OPT_WEIGHTS },
		{ "target", required_argument, NULL, OPT_TARGET },
		{ "nests", required_argument, NULL, OPT_NESTS },
		{ "input-shape", required_argument, NULL, OPT_INPUT_SHAPE },
		{ "const-input", required_argument, NULL, OPT_CONST_INPUT },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	struct extract_options o = { .fuse = true };
	const char *output = NULL, *model = NULL, *cc = getenv("PIM_EXTRACT_CC");
	bool binary = false;
	static struct onnx_shape shapes[ONNX_SHAPES_MAX];
	static struct onnx_const_input consts[ONNX_SHAPES_MAX];
	size_t n_shapes = 0, n_consts = 0;
	struct pim_error err = { 0 };
	int c;

	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o': output = optarg; break;
		case OPT_BINARY: binary = true; break;
		case OPT_NAME: o.name = optarg; break;
		case OPT_ENTRY: o.entry = optarg; break;
		case OPT_EMIT_MODEL: model = optarg; break;
		case OPT_CC: cc = optarg; break;
		case OPT_SAVE_TEMPS: o.save_temps = optarg; break;
		case OPT_NESTS:
			if (!strcmp(optarg, "fused") || !strcmp(optarg, "source"))
				o.fuse = !strcmp(optarg, "fused");
			else {
				fprintf(stderr, "pim-extract: --nests takes fused or source, not \"%s\"\n", optarg);
				return 2;
			}
			break;
		case OPT_TARGET:
			if (strcmp(optarg, "native") && !cpulevel_valid(optarg)) {
				fprintf(stderr, "pim-extract: --target takes native, x86-64, x86-64-v2, "
					"x86-64-v3 or x86-64-v4, not \"%s\"\n", optarg);
				return 2;
			}
			o.target = optarg;
			break;
		case OPT_WEIGHTS:
			if (strcmp(optarg, "zero") == 0)
				o.weights_zero = true;
			else if (strcmp(optarg, "real") == 0)
				o.weights_zero = false;
			else {
				fprintf(stderr, "pim-extract: --weights takes real or zero, not \"%s\"\n", optarg);
				return 2;
			}
			break;
		case OPT_INPUT_SHAPE:
			if (n_shapes == ONNX_SHAPES_MAX) {
				fprintf(stderr, "pim-extract: at most %d --input-shape options\n", ONNX_SHAPES_MAX);
				return 2;
			}
			if (onnx_parse_input_shape(optarg, &shapes[n_shapes++], &err) < 0) {
				fprintf(stderr, "pim-extract: %s\n", err.msg);
				return 2;
			}
			break;
		case OPT_CONST_INPUT:
			if (n_consts == ONNX_SHAPES_MAX) {
				fprintf(stderr, "pim-extract: at most %d --const-input options\n", ONNX_SHAPES_MAX);
				return 2;
			}
			if (onnx_parse_const_input(optarg, &consts[n_consts++], &err) < 0) {
				fprintf(stderr, "pim-extract: %s\n", err.msg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		case OPT_VERSION: printf("pim-extract %s (MLIR 19)\n", PIMD_VERSION); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "pim-extract: expected one INPUT.mlir or INPUT.onnx (see --help)\n");
		return 2;
	}
	o.input = argv[optind];
	if (!cc || !*cc)
		cc = MODEL_CC_DEFAULT;
	bool is_onnx = onnx_is_model(o.input);
	if ((n_shapes || n_consts) && !is_onnx) {
		fprintf(stderr, "pim-extract: --input-shape and --const-input apply to ONNX input only\n");
		return 2;
	}

	_cleanup_(imported_done) struct imported im = { 0 };
	char onnx_name[MANIFEST_NAME_MAX + 1];
	_cleanup_(extract_freep) struct extract *x = NULL;
	_cleanup_(manifest_freep) Pim__Manifest *m = NULL;
	_cleanup_(freep) uint8_t *bytes = NULL;
	struct staged out_manifest = { 0 }, out_model = { 0 };
	size_t len = 0;
	int r;

	if (o.save_temps && (r = mkdir_parents(o.save_temps, &err)) < 0) {
		fprintf(stderr, "pim-extract: %s\n", err.msg);
		return 1;
	}
	if (is_onnx) {
		if (!o.name) {
			onnx_model_name(o.input, onnx_name, sizeof onnx_name);
			o.name = onnx_name;
		}
		struct onnx_options oo = { .input = o.input, .shapes = shapes, .n_shapes = n_shapes,
					   .consts = consts, .n_consts = n_consts };
		if ((r = import_onnx(o.name, &oo, o.weights_zero, o.save_temps, &im, &err)) < 0)
			goto fail;
		o.input = im.path;
	}
	if ((r = extract_run(&o, &x, &err)) < 0 || (r = extract_manifest(x, &m, &err)) < 0)
		goto fail;
	if (is_onnx) {
		/* The manifest names the model file, not the imported text (a label after the
		 * path, --weights zero's, stays). */
		size_t n = strlen(im.path);
		const char *rest = strncmp(m->source, im.path, n) == 0 ? m->source + n : "";
		char *src = NULL;
		if (asprintf(&src, "%s%s", argv[optind], rest) < 0)
			src = NULL;
		if (!src) {
			r = err_set(&err, -ENOMEM, "out of memory");
			goto fail;
		}
		free(m->source);
		m->source = src;
	}
	if ((r = serialize(m, binary, &bytes, &len, &err)) < 0)
		goto fail;
	if (model) {
		if ((r = staged_open(&out_model, model, &err)) < 0)
			goto fail;
		close(r);
		if ((r = model_emit(x, out_model.tmp, cc, manifest_digest(m), &err)) < 0) {
			err_prefix(&err, "%s", model);
			goto fail;
		}
	}
	if (output) {
		int fd = r = staged_open(&out_manifest, output, &err);
		if (r < 0)
			goto fail;
		r = write_all(fd, bytes, len);
		if (close(fd) < 0 && r == 0)
			r = -errno;
		if (r < 0) {
			err_set(&err, r, "%s: %s", output, strerror(-r));
			goto fail;
		}
	}
	/* Everything is built: only now do the outputs appear, all of them. */
	if (model && (r = staged_commit(&out_model, 0777, &err)) < 0)
		goto fail;
	if (output && (r = staged_commit(&out_manifest, 0666, &err)) < 0)
		goto fail;
	if (!output && (r = write_all(STDOUT_FILENO, bytes, len)) < 0) {
		err_set(&err, r, "standard output: %s", strerror(-r));
		goto fail;
	}
	return 0;
fail:
	staged_discard(&out_model);
	staged_discard(&out_manifest);
	if (is_onnx && *im.path)
		rename_in_message(&err, im.path, argv[optind]);
	fprintf(stderr, "pim-extract: %s\n", err.msg);
	return 1;
}
