/* SPDX-License-Identifier: MIT */
#include "model.h"
#include "hostcode.h"

#include <mlir-c/BuiltinAttributes.h>
#include <mlir-c/Target/LLVMIR.h>
#include <llvm-c/BitWriter.h>
#include <llvm-c/Core.h>

#include <fcntl.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

extern char **environ;

/*
 * To the LLVM dialect.  finalize-memref-to-llvm{use-generic-functions}: buffers come from
 * _mlir_memref_to_llvm_alloc/free, defined in the wrapper (another translation unit), so LLVM
 * cannot prove an intermediate buffer dead or private and delete or move a loop nest across
 * the hook calls.  math-to-llvm first, then math-to-libm for what has no LLVM intrinsic (tanh,
 * erf); the library links -lm.
 *
 * bf16 first: LLVM lowers bf16 arithmetic and conversions to calls of __truncsfbf2 and friends,
 * which Debian 12's libgcc lacks (the library would not load).  Arithmetic and math ops on bf16
 * are done in f32 (extf, op, truncf), then the bf16 conversions themselves are expanded into
 * integer operations (round to nearest even), so no soft-float helper is left.
 */
static const char PIPE_FLOATS[] =
	"func.func(arith-emulate-unsupported-floats{source-types=bf16 target-type=f32}),"
	"func.func(math-legalize-to-f32)";
/* After hostcode_prepare: its math helpers are inlined into the loops that call them. */
static const char PIPE_LLVM[] =
	"inline{default-pipeline=},symbol-dce,func.func(arith-expand{include-bf16}),"
	"convert-scf-to-cf,expand-strided-metadata,lower-affine,"
	"finalize-memref-to-llvm{use-generic-functions},convert-math-to-llvm,convert-math-to-libm,"
	"convert-arith-to-llvm,convert-index-to-llvm,convert-func-to-llvm,convert-cf-to-llvm,"
	"reconcile-unrealized-casts";

static const char memref_copy_source[] =
	"struct pim_unranked { int64_t rank; void *desc; };\n"
	"struct pim_strided { char *allocated, *aligned; int64_t offset, sizes_strides[]; };\n\n"
	"__attribute__((visibility(\"hidden\"))) void memrefCopy(int64_t elem, struct pim_unranked *src,\n"
	"\t\t\t\t\t\t   struct pim_unranked *dst)\n"
	"{\n"
	"\tconst struct pim_strided *s = src->desc, *d = dst->desc;\n"
	"\tint64_t rank = src->rank, idx[64] = { 0 }, rd = 0, wr = 0;\n"
	"\tconst int64_t *sz = s->sizes_strides, *ss = s->sizes_strides + rank, *ds = d->sizes_strides + rank;\n"
	"\tchar *sp = s->aligned + s->offset * elem, *dp = d->aligned + d->offset * elem;\n\n"
	"\tif (rank > 64)\n\t\tabort();\n"
	"\tfor (int64_t a = 0; a < rank; a++)\n\t\tif (sz[a] == 0)\n\t\t\treturn;\n"
	"\tfor (;;) {\n"
	"\t\tmemcpy(dp + wr * elem, sp + rd * elem, (size_t)elem);\n"
	"\t\tint64_t a = rank - 1;\n"
	"\t\tfor (; a >= 0; a--) {\n"
	"\t\t\trd += ss[a];\n\t\t\twr += ds[a];\n"
	"\t\t\tif (++idx[a] < sz[a])\n\t\t\t\tbreak;\n"
	"\t\t\trd -= sz[a] * ss[a];\n\t\t\twr -= sz[a] * ds[a];\n\t\t\tidx[a] = 0;\n"
	"\t\t}\n"
	"\t\tif (a < 0)\n\t\t\treturn;\n"
	"\t}\n"
	"}\n\n";

/*
 * Buffers of the model (finalize-memref-to-llvm{use-generic-functions}), kept for the next
 * buffer of the same size and alignment as a runtime's arena keeps them: malloc gives large
 * blocks and the top of the heap back to the kernel when they are freed, and every call would
 * fault those pages in again inside the nests that first write them (30 us for 16 KiB).  Each
 * call of a model asks for the same sizes, so after the first every buffer is one the last call
 * used.  The cache holds at most PIM_BUF_SLOTS blocks and PIM_BUF_BYTES bytes, freed when the
 * library is unloaded; the block's size and alignment sit in the 16 bytes before what the
 * caller gets.
 */
static const char buffers_source[] =
	"#include <pthread.h>\n\n"
	"#define PIM_BUF_SLOTS 512\n#define PIM_BUF_BYTES ((size_t)1 << 31)\n"
	"static struct { char *p; size_t n, a; } pim_buf[PIM_BUF_SLOTS];\n"
	"static size_t pim_buf_n, pim_buf_bytes;\n"
	"static pthread_mutex_t pim_buf_lock = PTHREAD_MUTEX_INITIALIZER;\n\n"
	"static void *pim_buf_get(size_t a, size_t n)\n{\n"
	"\tchar *p = NULL;\n\n"
	"\tif (a < 16)\n\t\ta = 16;\n"
	"\tpthread_mutex_lock(&pim_buf_lock);\n"
	"\tfor (size_t i = pim_buf_n; i-- > 0;)\n"
	"\t\tif (pim_buf[i].n == n && pim_buf[i].a == a) {\n"
	"\t\t\tp = pim_buf[i].p;\n\t\t\tpim_buf_bytes -= n;\n"
	"\t\t\tpim_buf[i] = pim_buf[--pim_buf_n];\n\t\t\tbreak;\n\t\t}\n"
	"\tpthread_mutex_unlock(&pim_buf_lock);\n"
	"\tif (p)\n\t\treturn p;\n"
	"\tif (n > SIZE_MAX / 2 - a)\n\t\treturn NULL;\n"
	"\tchar *base = aligned_alloc(a, (a + n + a - 1) / a * a);\n"
	"\tif (!base)\n\t\treturn NULL;\n"
	"\tp = base + a;\n"
	"\tmemcpy(p - 16, &n, sizeof n);\n\tmemcpy(p - 8, &a, sizeof a);\n"
	"\treturn p;\n}\n\n"
	"__attribute__((visibility(\"hidden\"))) void *_mlir_memref_to_llvm_alloc(size_t n)\n"
	"{\n\treturn pim_buf_get(16, n);\n}\n\n"
	"__attribute__((visibility(\"hidden\"))) void *_mlir_memref_to_llvm_aligned_alloc(size_t a, size_t n)\n"
	"{\n\treturn pim_buf_get(a, n);\n}\n\n"
	"__attribute__((visibility(\"hidden\"))) void _mlir_memref_to_llvm_free(void *v)\n{\n"
	"\tchar *p = v;\n\tsize_t n, a;\n\n"
	"\tif (!p)\n\t\treturn;\n"
	"\tmemcpy(&n, p - 16, sizeof n);\n\tmemcpy(&a, p - 8, sizeof a);\n"
	"\tpthread_mutex_lock(&pim_buf_lock);\n"
	"\tif (pim_buf_n < PIM_BUF_SLOTS && n <= PIM_BUF_BYTES - pim_buf_bytes) {\n"
	"\t\tpim_buf[pim_buf_n].p = p;\n\t\tpim_buf[pim_buf_n].n = n;\n\t\tpim_buf[pim_buf_n++].a = a;\n"
	"\t\tpim_buf_bytes += n;\n\t\tp = NULL;\n\t}\n"
	"\tpthread_mutex_unlock(&pim_buf_lock);\n"
	"\tif (p)\n\t\tfree(p - a);\n}\n\n"
	"/* What the cache holds goes when the library is unloaded. */\n"
	"__attribute__((destructor)) static void pim_buf_drop(void)\n{\n"
	"\tfor (size_t i = 0; i < pim_buf_n; i++)\n\t\tfree(pim_buf[i].p - pim_buf[i].a);\n"
	"\tpim_buf_n = 0;\n\tpim_buf_bytes = 0;\n}\n\n";

char *model_wrapper_source(const struct extract *x, uint64_t digest)
{
	struct strbuf b = { 0 };
	bool ranks[64] = { false };

	strbuf_printf(&b, "/* Generated by pim-extract from %s (model %s); do not edit.\n"
		   " * pim_model_entry: client/pim_hooks.h.  args[i] is ARGUMENT allocation i of the "
		   "manifest. */\n"
		   "#include <stddef.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n\n",
		   x->source, x->name);
	/* One descriptor struct per rank (the C interface's StridedMemRefType layout). */
	for (size_t i = 0; i < x->n_args; i++) {
		size_t r = x->args[i].rank;
		if (r >= ELEMENTSOF(ranks) || ranks[r])
			continue;
		ranks[r] = true;
		if (r == 0)
			strbuf_printf(&b, "struct pim_md0 { void *allocated, *aligned; int64_t offset; };\n");
		else
			strbuf_printf(&b, "struct pim_md%zu { void *allocated, *aligned; int64_t offset, "
				   "sizes[%zu], strides[%zu]; };\n", r, r, r);
	}
	strbuf_printf(&b, "\nextern void pim_mlir_entry(");
	for (size_t i = 0; i < x->n_args; i++)
		strbuf_printf(&b, "%sstruct pim_md%zu *", i ? ", " : "", x->args[i].rank);
	strbuf_printf(&b, "%s) __asm__(\"_mlir_ciface_%s\");\n\n", x->n_args ? "" : "void", x->entry);
	strbuf_printf(&b, "%s", buffers_source);
	/* memref.copy between strided views (a pad's interior) lowers to a call of the MLIR
	 * runtime's memrefCopy; this is that function, so the library needs no MLIR runtime. */
	strbuf_printf(&b, "%s", memref_copy_source);
	strbuf_printf(&b, "/* The manifest this library was built against (pim_hooks.h PIM_MODEL_DIGEST). */\n"
		   "__attribute__((visibility(\"default\"))) const uint64_t pim_model_manifest_digest = "
		   "UINT64_C(0x%016llx);\n\n", (unsigned long long)digest);
	strbuf_printf(&b, "/* The instruction set of the host code (pim_hooks.h PIM_MODEL_TARGET). */\n"
		   "__attribute__((visibility(\"default\"))) const char pim_model_target[] = \"%s\";\n\n",
		   x->target);
	/* --weights zero (extract.h): the zero-weight globals live in .bss; zeroing them once when
	 * the library is loaded gives every page a frame of its own, so the nests read real memory
	 * rather than the kernel's shared zero page, and keeps LLVM from treating them as constant. */
	if (x->n_zeros) {
		for (size_t i = 0; i < x->n_zeros; i++)
			strbuf_printf(&b, "extern char %s[] __attribute__((visibility(\"hidden\")));\n",
				   x->zeros[i].global);
		strbuf_printf(&b, "\n__attribute__((constructor)) static void pim_weights_zero(void)\n{\n");
		for (size_t i = 0; i < x->n_zeros; i++)
			strbuf_printf(&b, "\tmemset(%s, 0, %lluu);\n", x->zeros[i].global,
				   (unsigned long long)x->zeros[i].bytes);
		strbuf_printf(&b, "}\n\n");
	}
	strbuf_printf(&b, "__attribute__((visibility(\"default\"))) int pim_model_entry(void *const *args, "
		   "size_t n_args)\n{\n\tif (n_args != %zu || (n_args && !args))\n\t\treturn -1;\n"
		   "\tfor (size_t i = 0; i < n_args; i++)\n\t\tif (!args[i])\n\t\t\treturn -1;\n", x->n_args);
	for (size_t i = 0; i < x->n_args; i++) {
		const struct extract_arg *a = &x->args[i];
		strbuf_printf(&b, "\tstruct pim_md%zu a%zu = { args[%zu], args[%zu], 0", a->rank, i, i, i);
		if (a->rank) {
			int64_t stride = 1;
			strbuf_printf(&b, ", {");
			for (size_t d = 0; d < a->rank; d++)
				strbuf_printf(&b, "%s%lld", d ? ", " : " ", (long long)a->shape[d]);
			strbuf_printf(&b, " }, {");
			/* Row-major strides: identity layouts (doc/mlir.md pitfall 3). */
			int64_t strides[64];
			for (size_t d = a->rank; d-- > 0;) {
				if (d < ELEMENTSOF(strides))
					strides[d] = stride;
				stride *= a->shape[d];
			}
			for (size_t d = 0; d < a->rank && d < ELEMENTSOF(strides); d++)
				strbuf_printf(&b, "%s%lld", d ? ", " : " ", (long long)strides[d]);
			strbuf_printf(&b, " }");
		}
		strbuf_printf(&b, " };\n");
	}
	strbuf_printf(&b, "\tpim_mlir_entry(");
	for (size_t i = 0; i < x->n_args; i++)
		strbuf_printf(&b, "%s&a%zu", i ? ", " : "", i);
	strbuf_printf(&b, ");\n\treturn 0;\n}\n");
	return strbuf_take(&b, NULL);
}

static int write_file(const char *path, const char *text, struct pim_error *err)
{
	_cleanup_(fclosep) FILE *f = fopen(path, "we");

	if (!f)
		return err_set(err, -errno, "%s: %s", path, strerror(errno));
	if (fputs(text, f) < 0 || fflush(f) != 0)
		return err_set(err, -EIO, "%s: write failed", path);
	return 0;
}

/* Runs argv with stderr into log; returns 0 if it exited 0. */
static int run_tool(char *const argv[], const char *log, struct pim_error *err)
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int status, r;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (r != 0)
		return err_set(err, -r, "cannot run %s: %s%s", argv[0], strerror(r),
			       r == ENOENT ? " (install clang-19: make deps)" : "");
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return err_set(err, -errno, "waitpid(%s): %s", argv[0], strerror(errno));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	char first[300] = "";
	_cleanup_(fclosep) FILE *f = fopen(log, "re");
	if (f && fgets(first, sizeof first, f))
		first[strcspn(first, "\n")] = '\0';
	if (WIFSIGNALED(status))
		return err_set(err, -ECHILD, "%s was killed by signal %d", argv[0], WTERMSIG(status));
	return err_set(err, -ECHILD, "%s failed (exit status %d)%s%s", argv[0], WEXITSTATUS(status),
		       first[0] ? ": " : "", first);
}

static void rm_rf_tmp(char *dir)
{
	static const char *const files[] = { "model.bc", "wrapper.c", "cc.log" };
	char p[4200];

	for (size_t i = 0; i < ELEMENTSOF(files); i++) {
		snprintf(p, sizeof p, "%s/%s", dir, files[i]);
		unlink(p);
	}
	rmdir(dir);
}

int model_emit(struct extract *x, const char *out_path, const char *cc, uint64_t digest,
	       struct pim_error *err)
{
	MlirOperation entry = extract_entry_op(x);
	char tmpl[4096], bc[4200], wrapper[4200], log[4200];
	const char *dir;
	bool tmp = false;
	int r;

	if (mlirOperationIsNull(entry))
		return err_set(err, -EINVAL, "internal error: no entry function @%s", x->entry);
	/* _mlir_ciface_<entry>(descriptor *...): the wrapper's calling convention. */
	mlirOperationSetDiscardableAttributeByName(entry, mlirx_s("llvm.emit_c_interface"),
						   mlirUnitAttrGet(x->mx.ctx));
	if ((r = mlirx_run_passes(&x->mx, x->module, "lowering to the LLVM dialect", PIPE_FLOATS, err)) < 0 ||
	    (r = hostcode_prepare(x, err)) < 0 ||
	    (r = mlirx_run_passes(&x->mx, x->module, "lowering to the LLVM dialect", PIPE_LLVM, err)) < 0)
		return r;
	if ((r = extract_save_stage(x, "4-llvm", err)) < 0)
		return r;

	if (x->save_temps)
		dir = x->save_temps;
	else {
		const char *t = getenv("TMPDIR");
		snprintf(tmpl, sizeof tmpl, "%s/pim-extract.XXXXXX", t && *t ? t : "/tmp");
		if (!mkdtemp(tmpl))
			return err_set(err, -errno, "mkdtemp(%s): %s", tmpl, strerror(errno));
		dir = tmpl;
		tmp = true;
	}
	snprintf(bc, sizeof bc, "%s/%s%smodel.bc", dir, tmp ? "" : x->name, tmp ? "" : ".");
	snprintf(wrapper, sizeof wrapper, "%s/%s%swrapper.c", dir, tmp ? "" : x->name, tmp ? "" : ".");
	snprintf(log, sizeof log, "%s/%s%scc.log", dir, tmp ? "" : x->name, tmp ? "" : ".");

	LLVMContextRef lctx = LLVMContextCreate();
	mlirx_diag_clear(&x->mx);
	LLVMModuleRef lm = mlirTranslateModuleToLLVMIR(mlirModuleGetOperation(x->module), lctx);
	if (!lm)
		r = err_set(err, -EINVAL, "%s%stranslation to LLVM IR failed: %s", x->mx.diag.loc,
			    x->mx.diag.loc[0] ? ": " : "", x->mx.diag.have ? x->mx.diag.msg : "no diagnostic");
	else if (LLVMWriteBitcodeToFile(lm, bc) != 0)
		r = err_set(err, -EIO, "%s: cannot write LLVM bitcode", bc);
	if (lm)
		LLVMDisposeModule(lm);
	LLVMContextDispose(lctx);

	if (r == 0) {
		_cleanup_(freep) char *src = model_wrapper_source(x, digest);
		if (!src)
			r = err_set(err, -ENOMEM, "out of memory");
		else
			r = write_file(wrapper, src, err);
	}
	if (r == 0) {
		char march[32];
		snprintf(march, sizeof march, "-march=%s", x->target[0] ? x->target : "x86-64");
		/* -O3 for the target's vectors; libmvec for vector exp, pow, log, ...; the medium code
		 * model puts every global over 64 KiB (real-size weights) in .lbss/.ldata, reached with
		 * 64-bit offsets, so a library of any size links. */
		char *const argv[] = { (char *)cc, "-O3", march, "-fveclib=libmvec", "-mcmodel=medium",
				       "-shared", "-fPIC",
				       "-fvisibility=hidden", "-Wno-override-module", "-o", (char *)out_path,
				       bc, wrapper, "-lmvec", "-lm", NULL };
		r = run_tool(argv, log, err);
		if (r < 0)
			err_prefix(err, "building the model library");
	}
	if (tmp)
		rm_rf_tmp(tmpl);
	return r;
}
