/* SPDX-License-Identifier: MIT */
/*
 * Tests of pim-extract (compiler/): the manifests of the examples against numbers derived by
 * hand below, the in-place and loop cases, every refusal, and the model libraries run through
 * pim_model_entry with the hooks defined here (linked -rdynamic, as the profiling worker does).
 *
 * Environment (tests/compiler/run.sh sets it): PIM_EXTRACT (the binary), PIM_EXAMPLES_OUT
 * (where "make compiler-examples" put NAME.manifest.json and NAME.so), PIM_TEST_INPUTS
 * (tests/compiler/inputs).  Run from the repository root.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <glob.h>
#include <math.h>
#include <spawn.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "cpulevel.h"
#include "manifest.h"
#include "pim_hooks.h"
#include "test_util.h"

extern char **environ;

/* ---------------------------------------------------------------- hooks (the ABI under test) */

#define HOOK_LOG_MAX 4096
static int32_t hook_log[HOOK_LOG_MAX]; /* enter r: r + 1, exit r: -(r + 1) */
static size_t hook_n;
/* Time of the last bracket of regions 0..HOOK_TIMED-1, ns. */
#define HOOK_TIMED 8
static uint64_t hook_t0[HOOK_TIMED], hook_ns[HOOK_TIMED];

static uint64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void pim_region_enter(int32_t region)
{
	if (hook_n < HOOK_LOG_MAX)
		hook_log[hook_n] = region + 1;
	hook_n++;
	if (region >= 0 && region < HOOK_TIMED)
		hook_t0[region] = mono_ns();
}

void pim_region_exit(int32_t region)
{
	if (region >= 0 && region < HOOK_TIMED)
		hook_ns[region] = mono_ns() - hook_t0[region];
	if (hook_n < HOOK_LOG_MAX)
		hook_log[hook_n] = -(region + 1);
	hook_n++;
}

/* ---------------------------------------------------------------- helpers */

static const char *env(const char *name)
{
	const char *v = getenv(name);
	ck_assert_msg(v && *v, "%s is not set (run through tests/compiler/run.sh)", name);
	return v;
}

static Pim__Manifest *load(const char *path)
{
	struct pim_error err = { 0 };
	Pim__Manifest *m = NULL;
	int r = manifest_read_file(path, &m, &err);
	ck_assert_msg(r == 0, "manifest_read_file(%s): %s", path, err.msg);
	return m;
}

static Pim__Manifest *load_example(const char *name)
{
	char p[1024];
	snprintf(p, sizeof p, "%s/%s.manifest.json", env("PIM_EXAMPLES_OUT"), name);
	return load(p);
}

static const Pim__Allocation *alloc_of(const Pim__Manifest *m, uint32_t id)
{
	for (size_t i = 0; i < m->n_allocations; i++)
		if (m->allocations[i]->id == id)
			return m->allocations[i];
	ck_abort_msg("allocation %u not in the manifest", id);
	return NULL;
}

static const Pim__Region *region_named(const Pim__Manifest *m, const char *name)
{
	for (size_t i = 0; i < m->n_regions; i++)
		if (strcmp(m->regions[i]->name, name) == 0)
			return m->regions[i];
	ck_abort_msg("no region named %s", name);
	return NULL;
}

/* Unique bytes a nest reads (want_read) or writes: each allocation once, at the size of its
 * largest view among the operands in that direction (inout counts both ways). */
static uint64_t unique_bytes(const Pim__Region *r, bool want_read)
{
	uint32_t seen[64];
	uint64_t size[64];
	size_t n = 0;
	uint64_t total = 0;

	for (size_t i = 0; i < r->n_operands; i++) {
		const Pim__Operand *o = r->operands[i];
		bool rd = o->role == PIM__OPERAND_ROLE__OPERAND_ROLE_IN ||
			  o->role == PIM__OPERAND_ROLE__OPERAND_ROLE_INOUT;
		bool wr = o->role == PIM__OPERAND_ROLE__OPERAND_ROLE_OUT ||
			  o->role == PIM__OPERAND_ROLE__OPERAND_ROLE_INOUT;
		if (want_read ? !rd : !wr)
			continue;
		size_t k = 0;
		while (k < n && seen[k] != o->allocation_id)
			k++;
		if (k == n) {
			ck_assert_uint_lt(n, 64);
			seen[n] = o->allocation_id;
			size[n++] = 0;
		}
		if (o->bytes > size[k])
			size[k] = o->bytes;
	}
	for (size_t k = 0; k < n; k++)
		total += size[k];
	return total;
}

static void check_extents(const Pim__Region *r, const uint64_t *par, size_t n_par, const uint64_t *red,
			  size_t n_red)
{
	ck_assert_uint_eq(r->n_parallel_extents, n_par);
	ck_assert_uint_eq(r->n_reduction_extents, n_red);
	for (size_t i = 0; i < n_par; i++)
		ck_assert_uint_eq(r->parallel_extents[i], par[i]);
	for (size_t i = 0; i < n_red; i++)
		ck_assert_uint_eq(r->reduction_extents[i], red[i]);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && strcmp(s + n - k, suffix) == 0;
}

static uint64_t trip_of(const Pim__Region *r)
{
	return r->trip ? r->trip : 1;
}

/* A private scratch directory per test (check forks each test). */
static void scratch(char *dir, size_t n)
{
	const char *t = getenv("TMPDIR");
	snprintf(dir, n, "%s/pim-extract-test.XXXXXX", t && *t ? t : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void rm_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[2048];

	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
			continue;
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		unlink(p);
	}
	closedir(d);
	rmdir(dir);
}

static size_t dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* Runs pim-extract with args; its stderr goes to err (NUL-terminated).  Returns the exit status. */
static int run_extract(const char *const *args, char *errbuf, size_t errlen, const char *dir)
{
	char log[1024];
	char *argv[16];
	size_t n = 0;
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int status;

	snprintf(log, sizeof log, "%s/stderr.log", dir);
	argv[n++] = (char *)env("PIM_EXTRACT");
	for (; *args && n < 15; args++)
		argv[n++] = (char *)*args;
	argv[n] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	ck_assert_int_eq(posix_spawn(&pid, argv[0], &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	errbuf[0] = '\0';
	FILE *f = fopen(log, "re");
	if (f) {
		size_t k = fread(errbuf, 1, errlen - 1, f);
		errbuf[k] = '\0';
		fclose(f);
	}
	unlink(log);
	ck_assert_msg(WIFEXITED(status), "pim-extract died: %s", errbuf);
	return WEXITSTATUS(status);
}

/* pim-extract INPUT -o DIR/NAME.json [--emit-model DIR/NAME.so] [extra]; asserts success. */
static Pim__Manifest *extract_input(const char *input, const char *dir, bool model, const char *extra)
{
	char in[1024], out[1024], so[1024], errbuf[2048];
	const char *args[10];
	size_t n = 0;

	snprintf(in, sizeof in, "%s/%s.mlir", env("PIM_TEST_INPUTS"), input);
	snprintf(out, sizeof out, "%s/%s.json", dir, input);
	snprintf(so, sizeof so, "%s/%s.so", dir, input);
	args[n++] = in;
	args[n++] = "-o";
	args[n++] = out;
	if (model) {
		args[n++] = "--emit-model";
		args[n++] = so;
	}
	if (extra)
		args[n++] = extra;
	args[n] = NULL;
	int rc = run_extract(args, errbuf, sizeof errbuf, dir);
	ck_assert_msg(rc == 0, "pim-extract %s failed (%d): %s", in, rc, errbuf);
	return load(out);
}

/* ---------------------------------------------------------------- model libraries */

struct model_run {
	void *lib;
	pim_model_entry_fn entry;
	void **args;
	size_t n_args;
};

static void model_open(struct model_run *mr, const char *so, const Pim__Manifest *m)
{
	mr->lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	ck_assert_msg(mr->lib != NULL, "dlopen(%s): %s", so, dlerror());
	*(void **)&mr->entry = dlsym(mr->lib, PIM_MODEL_ENTRY);
	ck_assert_msg(mr->entry != NULL, "%s: no %s", so, PIM_MODEL_ENTRY);
	/* args[i]: the i-th ARGUMENT allocation in increasing id order (client/pim_hooks.h). */
	uint32_t last = 0;
	bool first = true;
	mr->args = calloc(m->n_allocations, sizeof *mr->args);
	mr->n_args = 0;
	for (;;) {
		const Pim__Allocation *next = NULL;
		for (size_t i = 0; i < m->n_allocations; i++) {
			const Pim__Allocation *a = m->allocations[i];
			if (a->kind == PIM__ALLOC_KIND__ALLOC_KIND_ARGUMENT && (first || a->id > last) &&
			    (!next || a->id < next->id))
				next = a;
		}
		if (!next)
			break;
		/* Small positive values: every example stays finite (exp, division). */
		float *p = aligned_alloc(64, (next->bytes + 63) / 64 * 64);
		ck_assert_ptr_nonnull(p);
		for (size_t k = 0; k < next->bytes / sizeof(float); k++)
			p[k] = 0.001f * (float)(k % 17);
		mr->args[mr->n_args++] = p;
		last = next->id;
		first = false;
	}
}

static void model_close(struct model_run *mr)
{
	for (size_t i = 0; i < mr->n_args; i++)
		free(mr->args[i]);
	free(mr->args);
	dlclose(mr->lib);
}

/* Hooks of `runs` runs: every region once per run, entered and exited in program order. */
static void expect_program_order(const Pim__Manifest *m, size_t runs)
{
	ck_assert_uint_eq(hook_n, runs * 2 * m->n_regions);
	for (size_t run = 0, k = 0; run < runs; run++)
		for (size_t i = 0; i < m->n_regions; i++) {
			/* The manifest lists regions in program order (order == position). */
			int32_t id = (int32_t)m->regions[i]->id;
			ck_assert_uint_eq(m->regions[i]->order, i);
			ck_assert_int_eq(hook_log[k++], id + 1);
			ck_assert_int_eq(hook_log[k++], -(id + 1));
		}
}

/* ---------------------------------------------------------------- the examples */

/* Nest counts derived from each example's source (see the comment at the top of each file): a
 * fill that only initialises the accumulator of the next op is part of that op's nest, and an
 * elementwise op whose result only the next elementwise op reads is fused into it. */
static const struct {
	const char *name;
	size_t nests;
} examples[] = {
	{ "add", 1 },	      { "mul", 1 },	    { "scale", 1 },	  { "relu", 1 },
	{ "copy", 1 },	      { "exp", 1 },	    { "tanh", 1 },	  { "gelu", 1 },
	{ "softmax", 4 },     { "layernorm", 4 },   { "rmsnorm", 2 },	  { "matmul", 1 },
	{ "gemv", 1 },	      { "mac", 1 },	    { "depthwise_conv", 1 },
	{ "mlp", 4 },	      { "attention", 8 },  { "decoder-block", 17 },
};

START_TEST(every_example_is_tested)
{
	glob_t g;
	ck_assert_int_eq(glob("examples/*.mlir", 0, NULL, &g), 0);
	ck_assert_uint_eq(g.gl_pathc, ELEMENTSOF(examples));
	for (size_t i = 0; i < g.gl_pathc; i++) {
		bool found = false;
		for (size_t j = 0; j < ELEMENTSOF(examples); j++) {
			char p[256];
			snprintf(p, sizeof p, "examples/%s.mlir", examples[j].name);
			found |= strcmp(p, g.gl_pathv[i]) == 0;
		}
		ck_assert_msg(found, "%s has no expected nest count in this test", g.gl_pathv[i]);
	}
	globfree(&g);
}
END_TEST

START_TEST(example_nest_count)
{
	const char *name = examples[_i].name;
	Pim__Manifest *m = load_example(name);
	char loc[256];

	ck_assert_str_eq(m->name, name);
	ck_assert_uint_eq(m->n_regions, examples[_i].nests);
	snprintf(loc, sizeof loc, "examples/%s.mlir:", name);
	for (size_t i = 0; i < m->n_regions; i++) {
		const Pim__Region *r = m->regions[i];
		ck_assert_uint_eq(r->id, i);
		ck_assert_msg(strncmp(r->location, loc, strlen(loc)) == 0, "region %zu location %s", i,
			      r->location);
		ck_assert_msg(strncmp(r->op, "linalg.", 7) == 0, "region %zu op %s", i, r->op);
		ck_assert_uint_eq(trip_of(r), 1);
	}
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

START_TEST(example_model_runs)
{
	char so[1024];
	Pim__Manifest *m = load_example(examples[_i].name);
	struct model_run mr;

	snprintf(so, sizeof so, "%s/%s.so", env("PIM_EXAMPLES_OUT"), examples[_i].name);
	model_open(&mr, so, m);
	hook_n = 0;
	ck_assert_int_eq(mr.entry(mr.args, mr.n_args), 0);
	ck_assert_int_eq(mr.entry(mr.args, mr.n_args), 0);
	expect_program_order(m, 2);
	/* A caller with the wrong number of buffers is refused, no hook fires. */
	hook_n = 0;
	ck_assert_int_ne(mr.entry(mr.args, mr.n_args + 1), 0);
	ck_assert_uint_eq(hook_n, 0);
	model_close(&mr);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

/* gemv, A [1024x1024] f32: y = 0 then y += A x, one nest (the fill is its first step):
 * N_par 1024, N_total 2^20; reads A (4,194,304) + x (4,096) + y (4,096, the accumulator) =
 * 4,202,496 bytes, writes y. */
START_TEST(gemv_facts)
{
	Pim__Manifest *m = load_example("gemv");
	const Pim__Region *mv = m->regions[0];
	static const uint64_t p1024[] = { 1024 };

	ck_assert_uint_eq(m->n_regions, 1);
	ck_assert_str_eq(mv->op, "linalg.matvec");
	ck_assert_str_eq(mv->location, "examples/gemv.mlir:7:8");
	ck_assert_uint_eq(mv->n_par, 1024);
	ck_assert_uint_eq(mv->n_total, 1048576);
	ck_assert_uint_eq(trip_of(mv), 1);
	check_extents(mv, p1024, 1, p1024, 1);
	ck_assert_uint_eq(unique_bytes(mv, true), 4202496);
	ck_assert_uint_eq(unique_bytes(mv, false), 4096);
	ck_assert_uint_eq(mv->n_operands, 3);
	/* A and x are the function's arguments 0 and 1; y is the result, passed in as argument 2
	 * (buffer-results-to-out-params), the buffer the folded fill zeroes. */
	const Pim__Allocation *a = alloc_of(m, mv->operands[0]->allocation_id);
	ck_assert_uint_eq(a->id, 0);
	ck_assert_int_eq(a->kind, PIM__ALLOC_KIND__ALLOC_KIND_ARGUMENT);
	ck_assert_uint_eq(a->bytes, 4194304);
	ck_assert_uint_eq(mv->operands[1]->allocation_id, 1);
	ck_assert_str_eq(mv->operands[0]->elem_type, "f32");
	ck_assert_uint_eq(mv->operands[0]->elem_bits, 32);
	ck_assert_int_eq(mv->operands[2]->role, PIM__OPERAND_ROLE__OPERAND_ROLE_INOUT);
	ck_assert_uint_eq(mv->operands[2]->allocation_id, 2);
	ck_assert_int_eq(alloc_of(m, 2)->kind, PIM__ALLOC_KIND__ALLOC_KIND_ARGUMENT);
	ck_assert_uint_eq(m->n_allocations, 3);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

/* matmul [64x128] x [128x64]: N_par 64*64, N_total 64*64*128; reads 32768 + 32768 + 16384. */
START_TEST(matmul_facts)
{
	Pim__Manifest *m = load_example("matmul");
	const Pim__Region *mm = m->regions[0];
	static const uint64_t par[] = { 64, 64 }, red[] = { 128 };

	ck_assert_str_eq(mm->op, "linalg.matmul");
	ck_assert_uint_eq(mm->n_par, 4096);
	ck_assert_uint_eq(mm->n_total, 524288);
	check_extents(mm, par, 2, red, 1);
	ck_assert_uint_eq(unique_bytes(mm, true), 81920);
	ck_assert_uint_eq(unique_bytes(mm, false), 16384);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

/* depthwise 3x3 over [1x34x34x32] -> [1x32x32x32]: parallel n,h,w,c = 1,32,32,32 (32768),
 * reduction kh,kw = 3,3: N_total 294912.  Reads input 1*34*34*32*4 = 147968, filter
 * 3*3*32*4 = 1152 and the accumulator 131072 = 280192 bytes. */
START_TEST(depthwise_conv_facts)
{
	Pim__Manifest *m = load_example("depthwise_conv");
	const Pim__Region *c = m->regions[0];
	static const uint64_t par[] = { 1, 32, 32, 32 }, red[] = { 3, 3 };

	ck_assert_str_eq(c->op, "linalg.depthwise_conv_2d_nhwc_hwc");
	ck_assert_uint_eq(c->n_par, 32768);
	ck_assert_uint_eq(c->n_total, 294912);
	check_extents(c, par, 4, red, 2);
	ck_assert_uint_eq(unique_bytes(c, true), 280192);
	ck_assert_uint_eq(unique_bytes(c, false), 131072);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

/* softmax [16x512]: the max nest reduces 512 per row (N_par 16, N_total 8192) into the f32
 * maxima (16*4 bytes), filled with -inf first inside its bracket; the argmax indices nobody
 * reads are dropped by fusion; the final division writes the result argument. */
START_TEST(softmax_facts)
{
	Pim__Manifest *m = load_example("softmax");
	const Pim__Region *mx = m->regions[0], *div = m->regions[3];

	ck_assert_uint_eq(mx->n_par, 16);
	ck_assert_uint_eq(mx->n_total, 8192);
	ck_assert_uint_eq(mx->n_operands, 2);
	ck_assert_uint_eq(mx->operands[0]->allocation_id, 0);
	ck_assert_int_eq(mx->operands[1]->role, PIM__OPERAND_ROLE__OPERAND_ROLE_INOUT);
	ck_assert_int_eq(alloc_of(m, mx->operands[1]->allocation_id)->kind, PIM__ALLOC_KIND__ALLOC_KIND_ALLOC);
	ck_assert_uint_eq(mx->operands[1]->bytes, 64);
	ck_assert_uint_eq(div->n_par, 8192);
	ck_assert_uint_eq(div->operands[div->n_operands - 1]->allocation_id, 1);
	ck_assert_int_eq(alloc_of(m, 1)->kind, PIM__ALLOC_KIND__ALLOC_KIND_ARGUMENT);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

/* The decoder block: views and globals resolve to their allocations. */
START_TEST(decoder_block_facts)
{
	Pim__Manifest *m = load_example("decoder-block");
	const Pim__Region *qkv = region_named(m, "qkv.matmul"), *qk = region_named(m, "scores.qk");
	const Pim__Region *r1 = region_named(m, "rms1.scale"), *r2 = region_named(m, "rms2.scale");
	const Pim__Region *down = region_named(m, "down.matmul");
	static const uint64_t qk_par[] = { 4, 64 }, qk_red[] = { 64 };

	/* 1x256 by 256x768: N_par 768, N_total 196608; reads x_norm 1 KiB, W_qkv 768 KiB and the
	 * 3 KiB accumulator. */
	ck_assert_uint_eq(qkv->n_par, 768);
	ck_assert_uint_eq(qkv->n_total, 196608);
	ck_assert_uint_eq(unique_bytes(qkv, true), 1024 + 786432 + 3072);
	ck_assert_uint_eq(qkv->operands[1]->allocation_id, 1); /* %w_qkv, argument 1 */
	/* scores: 4 heads x 64 positions, reducing over 64 dims; q is a 1 KiB view (subview +
	 * expand_shape) of the 3 KiB qkv buffer, so it resolves to the qkv matmul's output. */
	ck_assert_uint_eq(qk->n_par, 256);
	ck_assert_uint_eq(qk->n_total, 16384);
	check_extents(qk, qk_par, 2, qk_red, 1);
	ck_assert_uint_eq(qk->operands[0]->allocation_id, qkv->operands[2]->allocation_id);
	ck_assert_uint_eq(qk->operands[0]->bytes, 1024);
	ck_assert_uint_eq(alloc_of(m, qk->operands[0]->allocation_id)->bytes, 3072);
	ck_assert_uint_eq(qk->operands[1]->allocation_id, 2); /* %k_cache */
	ck_assert_uint_eq(qk->operands[1]->bytes, 65536);
	/* The norms' constant weights (256 ones) are folded into the scaling payloads: each reads
	 * its input and its 4-byte sum of squares and writes the normalised vector, and the model
	 * has no global left.  The second norm's input is the first residual add, x + out, which
	 * its nests compute again rather than read (the add is cheap: cloned into each reader). */
	for (size_t k = 0; k < 2; k++) {
		const Pim__Region *rn = k ? r2 : r1;
		ck_assert_uint_eq(rn->n_operands, 3 + k);
		ck_assert_uint_eq(rn->operands[1 + k]->bytes, 4);
		ck_assert_int_eq(rn->operands[2 + k]->role, PIM__OPERAND_ROLE__OPERAND_ROLE_OUT);
	}
	for (size_t i = 0; i < m->n_allocations; i++)
		ck_assert_int_ne(m->allocations[i]->kind, PIM__ALLOC_KIND__ALLOC_KIND_GLOBAL);
	/* 1x688 by 688x256. */
	ck_assert_uint_eq(down->n_par, 256);
	ck_assert_uint_eq(down->n_total, 176128);
	/* 8 arguments and the result as an out-param. */
	size_t n_args = 0;
	for (size_t i = 0; i < m->n_allocations; i++)
		n_args += m->allocations[i]->kind == PIM__ALLOC_KIND__ALLOC_KIND_ARGUMENT;
	ck_assert_uint_eq(n_args, 9);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

/* mac: the accumulator is an argument read and written in one operand (inout). */
START_TEST(mac_facts)
{
	Pim__Manifest *m = load_example("mac");
	const Pim__Region *r = m->regions[0];

	ck_assert_uint_eq(m->n_allocations, 3);
	ck_assert_uint_eq(r->n_operands, 3);
	ck_assert_int_eq(r->operands[2]->role, PIM__OPERAND_ROLE__OPERAND_ROLE_INOUT);
	ck_assert_uint_eq(r->operands[2]->allocation_id, 2);
	ck_assert_uint_eq(unique_bytes(r, true), 3 * 1048576);
	ck_assert_uint_eq(unique_bytes(r, false), 1048576);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

/* The libraries compute what the source says (descriptors built right by the wrapper). */
START_TEST(model_values)
{
	char so[1024];
	struct model_run mr;
	Pim__Manifest *m = load_example("gemv");

	snprintf(so, sizeof so, "%s/gemv.so", env("PIM_EXAMPLES_OUT"));
	model_open(&mr, so, m);
	float *a = mr.args[0], *x = mr.args[1], *y = mr.args[2];
	for (size_t i = 0; i < 1024; i++) {
		x[i] = (float)(i % 7);
		for (size_t j = 0; j < 1024; j++)
			a[i * 1024 + j] = (j == i) ? 2.0f : (j == (i + 1) % 1024 ? 1.0f : 0.0f);
	}
	ck_assert_int_eq(mr.entry(mr.args, mr.n_args), 0);
	for (size_t i = 0; i < 1024; i++)
		ck_assert_float_eq(y[i], 2.0f * (float)(i % 7) + (float)(((i + 1) % 1024) % 7));
	model_close(&mr);
	pim__manifest__free_unpacked(m, NULL);

	m = load_example("softmax");
	snprintf(so, sizeof so, "%s/softmax.so", env("PIM_EXAMPLES_OUT"));
	model_open(&mr, so, m);
	ck_assert_int_eq(mr.entry(mr.args, mr.n_args), 0);
	float *p = mr.args[1];
	for (size_t r = 0; r < 16; r++) {
		double s = 0;
		for (size_t c = 0; c < 512; c++)
			s += p[r * 512 + c];
		ck_assert_double_eq_tol(s, 1.0, 1e-4);
	}
	model_close(&mr);
	pim__manifest__free_unpacked(m, NULL);

	m = load_example("mac");
	snprintf(so, sizeof so, "%s/mac.so", env("PIM_EXAMPLES_OUT"));
	model_open(&mr, so, m);
	float *ma = mr.args[0], *mb = mr.args[1], *acc = mr.args[2];
	for (size_t i = 0; i < 262144; i++) {
		ma[i] = 2.0f;
		mb[i] = (float)(i % 5);
		acc[i] = 1.0f;
	}
	ck_assert_int_eq(mr.entry(mr.args, mr.n_args), 0);
	ck_assert_int_eq(mr.entry(mr.args, mr.n_args), 0);
	for (size_t i = 0; i < 262144; i += 4099)
		ck_assert_float_eq(acc[i], 1.0f + 4.0f * (float)(i % 5));
	model_close(&mr);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

/* ---------------------------------------------------------------- in place, loops, forms */

/* Region 1's outs is region 0's result: one intermediate buffer is read and written by it. */
START_TEST(in_place_update)
{
	char dir[256];
	scratch(dir, sizeof dir);
	Pim__Manifest *m = extract_input("inplace", dir, false, "--nests=source");
	const Pim__Region *r = m->regions[1];

	ck_assert_uint_eq(m->n_regions, 3);
	ck_assert_uint_eq(r->n_operands, 3);
	ck_assert_int_eq(r->operands[0]->role, PIM__OPERAND_ROLE__OPERAND_ROLE_IN);
	ck_assert_int_eq(r->operands[2]->role, PIM__OPERAND_ROLE__OPERAND_ROLE_OUT);
	ck_assert_uint_eq(r->operands[0]->allocation_id, r->operands[2]->allocation_id);
	ck_assert_uint_eq(r->operands[0]->allocation_id, m->regions[0]->operands[1]->allocation_id);
	const Pim__Allocation *a = alloc_of(m, r->operands[0]->allocation_id);
	ck_assert_int_eq(a->kind, PIM__ALLOC_KIND__ALLOC_KIND_ALLOC);
	ck_assert_uint_eq(a->bytes, 4096);
	/* Counted once each way: 4096 (t) + 4096 (b) read, 4096 written. */
	ck_assert_uint_eq(unique_bytes(r, true), 8192);
	ck_assert_uint_eq(unique_bytes(r, false), 4096);
	pim__manifest__free_unpacked(m, NULL);
	rm_dir(dir);
}
END_TEST

/* Trips: 4 around region 0, 4 x 3 around region 1, none around region 2; the library's hooks
 * fire in that pattern. */
START_TEST(loop_trip_counts)
{
	char dir[256], so[512];
	struct model_run mr;
	scratch(dir, sizeof dir);
	Pim__Manifest *m = extract_input("loop", dir, true, NULL);
	static const uint64_t p64[] = { 64 };

	ck_assert_uint_eq(m->n_regions, 3);
	ck_assert_uint_eq(trip_of(m->regions[0]), 4);
	ck_assert_uint_eq(trip_of(m->regions[1]), 12);
	ck_assert_uint_eq(trip_of(m->regions[2]), 1);
	for (size_t i = 0; i < 3; i++) {
		ck_assert_uint_eq(m->regions[i]->n_par, 64);
		ck_assert_uint_eq(m->regions[i]->n_total, 64);
		check_extents(m->regions[i], p64, 1, NULL, 0);
	}
	/* The loop-carried buffer resolves to where it starts: argument 0 for region 0, region
	 * 0's output for region 1; region 2 reads what the last inner iteration yields. */
	ck_assert_uint_eq(m->regions[0]->operands[0]->allocation_id, 0);
	ck_assert_uint_eq(m->regions[1]->operands[0]->allocation_id, m->regions[0]->operands[2]->allocation_id);
	ck_assert_uint_eq(m->regions[2]->operands[0]->allocation_id, m->regions[1]->operands[1]->allocation_id);

	snprintf(so, sizeof so, "%s/loop.so", dir);
	model_open(&mr, so, m);
	hook_n = 0;
	ck_assert_int_eq(mr.entry(mr.args, mr.n_args), 0);
	size_t k = 0;
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(hook_log[k++], 1);
		ck_assert_int_eq(hook_log[k++], -1);
		for (int j = 0; j < 3; j++) {
			ck_assert_int_eq(hook_log[k++], 2);
			ck_assert_int_eq(hook_log[k++], -2);
		}
	}
	ck_assert_int_eq(hook_log[k++], 3);
	ck_assert_int_eq(hook_log[k++], -3);
	ck_assert_uint_eq(hook_n, k);
	model_close(&mr);
	pim__manifest__free_unpacked(m, NULL);
	rm_dir(dir);
}
END_TEST

/* tensor.pad bufferizes into a nest of its own (writing the padding value into a fresh buffer)
 * that the source has no linalg op for: it is a region, named after tensor.pad, and the
 * convolution reads that buffer.  Padded [1x10x10x4] f32: 400 iterations, 1600 bytes. */
START_TEST(pad_nest)
{
	char dir[256], so[512];
	struct model_run mr;
	scratch(dir, sizeof dir);
	Pim__Manifest *m = extract_input("pad", dir, true, NULL);
	static const uint64_t par[] = { 1, 10, 10, 4 };

	ck_assert_uint_eq(m->n_regions, 2);
	const Pim__Region *pad = m->regions[0], *conv = m->regions[1];
	ck_assert_str_eq(pad->op, "tensor.pad");
	ck_assert_str_eq(pad->name, "pad");
	ck_assert_msg(ends_with(pad->location, "/inputs/pad.mlir:6:8"), "location %s", pad->location);
	ck_assert_uint_eq(pad->n_par, 400);
	ck_assert_uint_eq(pad->n_total, 400);
	check_extents(pad, par, 4, NULL, 0);
	ck_assert_uint_eq(pad->n_operands, 1);
	ck_assert_int_eq(pad->operands[0]->role, PIM__OPERAND_ROLE__OPERAND_ROLE_OUT);
	const Pim__Allocation *a = alloc_of(m, pad->operands[0]->allocation_id);
	ck_assert_int_eq(a->kind, PIM__ALLOC_KIND__ALLOC_KIND_ALLOC);
	ck_assert_uint_eq(a->bytes, 1600);
	ck_assert_str_eq(conv->op, "linalg.depthwise_conv_2d_nhwc_hwc");
	ck_assert_uint_eq(conv->operands[0]->allocation_id, a->id);
	ck_assert_uint_eq(conv->n_total, 8 * 8 * 4 * 9);

	snprintf(so, sizeof so, "%s/pad.so", dir);
	model_open(&mr, so, m);
	/* All-ones input and filter: each output counts the in-bounds taps of its 3x3 window (4 in
	 * a corner, 6 on an edge, 9 inside), which checks the padding and the interior copy. */
	float *in = mr.args[0], *f = mr.args[1], *out = mr.args[2];
	for (size_t i = 0; i < 8 * 8 * 4; i++)
		in[i] = 1.0f;
	for (size_t i = 0; i < 3 * 3 * 4; i++)
		f[i] = 1.0f;
	hook_n = 0;
	ck_assert_int_eq(mr.entry(mr.args, mr.n_args), 0);
	expect_program_order(m, 1);
	for (int h = 0; h < 8; h++)
		for (int w = 0; w < 8; w++) {
			int taps = (h == 0 || h == 7 ? 2 : 3) * (w == 0 || w == 7 ? 2 : 3);
			for (int c = 0; c < 4; c++)
				ck_assert_float_eq(out[(h * 8 + w) * 4 + c], (float)taps);
		}
	model_close(&mr);
	pim__manifest__free_unpacked(m, NULL);
	rm_dir(dir);
}
END_TEST

/* A helper called twice is inlined twice: two nests at the helper's line, chained through an
 * intermediate buffer (a multiply by 1.0 the inliner's canonicalizer would otherwise fold). */
START_TEST(inlined_calls)
{
	char dir[256];
	scratch(dir, sizeof dir);
	Pim__Manifest *m = extract_input("inline", dir, false, "--nests=source");

	ck_assert_uint_eq(m->n_regions, 2);
	for (size_t i = 0; i < 2; i++) {
		ck_assert_msg(ends_with(m->regions[i]->location, "/inputs/inline.mlir:7:8"), "location %s",
			      m->regions[i]->location);
		ck_assert_str_eq(m->regions[i]->name, "generic.mulf");
		ck_assert_uint_eq(m->regions[i]->n_par, 256);
	}
	ck_assert_uint_eq(m->regions[0]->operands[0]->allocation_id, 0);
	ck_assert_uint_eq(m->regions[0]->operands[1]->allocation_id, m->regions[1]->operands[0]->allocation_id);
	ck_assert_int_eq(alloc_of(m, m->regions[1]->operands[0]->allocation_id)->kind,
			 PIM__ALLOC_KIND__ALLOC_KIND_ALLOC);
	ck_assert_uint_eq(m->regions[1]->operands[1]->allocation_id, 1);
	pim__manifest__free_unpacked(m, NULL);
	rm_dir(dir);
}
END_TEST

/* ---------------------------------------------------------------- defects found by exporters */

static uint16_t to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return (uint16_t)(u >> 16); /* exact for the small integers and halves used here */
}

/* bf16 arithmetic: the library loads (no __truncsfbf2 left) and computes exactly what the
 * source says: out[i][j] = exp(0) * (sum_k a[i][k] b[k][j] + c[i][j]) with a = 1,
 * b[k][j] = (k + j) % 3 and c = 0.5, all exact in bf16. */
START_TEST(bf16_library)
{
	char dir[256], so[512];
	struct model_run mr;
	scratch(dir, sizeof dir);
	Pim__Manifest *m = extract_input("bf16", dir, true, NULL);

	ck_assert_uint_eq(m->n_regions, 2);
	ck_assert_str_eq(m->regions[0]->op, "linalg.matmul");
	ck_assert_str_eq(m->regions[0]->operands[0]->elem_type, "bf16");
	ck_assert_uint_eq(m->regions[0]->operands[0]->elem_bits, 16);
	ck_assert_uint_eq(m->regions[0]->operands[0]->bytes, 16 * 32 * 2);
	snprintf(so, sizeof so, "%s/bf16.so", dir);
	model_open(&mr, so, m);
	uint16_t *a = mr.args[0], *b = mr.args[1], *c = mr.args[2], *out = mr.args[3];
	for (size_t i = 0; i < 16 * 32; i++)
		a[i] = to_bf16(1.0f);
	for (size_t k = 0; k < 32; k++)
		for (size_t j = 0; j < 8; j++)
			b[k * 8 + j] = to_bf16((float)((k + j) % 3));
	for (size_t i = 0; i < 16 * 8; i++)
		c[i] = to_bf16(0.5f);
	hook_n = 0;
	ck_assert_int_eq(mr.entry(mr.args, mr.n_args), 0);
	expect_program_order(m, 1);
	for (size_t j = 0; j < 8; j++) {
		float sum = 0.5f;
		for (size_t k = 0; k < 32; k++)
			sum += (float)((k + j) % 3);
		for (size_t i = 0; i < 16; i++)
			ck_assert_uint_eq(out[i * 8 + j], to_bf16(sum));
	}
	model_close(&mr);
	pim__manifest__free_unpacked(m, NULL);
	rm_dir(dir);
}
END_TEST

/* One tensor returned twice: no crash in bufferization; each result has its own out-param
 * (arguments 1 and 2) and both hold x * x. */
START_TEST(duplicate_result)
{
	char dir[256], so[512];
	struct model_run mr;
	scratch(dir, sizeof dir);
	Pim__Manifest *m = extract_input("dup-result", dir, true, NULL);

	ck_assert_uint_eq(m->n_regions, 1);
	ck_assert_uint_eq(m->n_allocations, 3);
	for (uint32_t i = 0; i < 3; i++) {
		ck_assert_int_eq(alloc_of(m, i)->kind, PIM__ALLOC_KIND__ALLOC_KIND_ARGUMENT);
		ck_assert_uint_eq(alloc_of(m, i)->bytes, 256);
	}
	snprintf(so, sizeof so, "%s/dup-result.so", dir);
	model_open(&mr, so, m);
	ck_assert_uint_eq(mr.n_args, 3);
	float *x = mr.args[0], *r0 = mr.args[1], *r1 = mr.args[2];
	for (size_t i = 0; i < 64; i++) {
		x[i] = (float)i - 20.0f;
		r0[i] = r1[i] = -1.0f;
	}
	ck_assert_int_eq(mr.entry(mr.args, mr.n_args), 0);
	for (size_t i = 0; i < 64; i++) {
		ck_assert_float_eq(r0[i], x[i] * x[i]);
		ck_assert_float_eq(r1[i], x[i] * x[i]);
	}
	model_close(&mr);
	pim__manifest__free_unpacked(m, NULL);
	rm_dir(dir);
}
END_TEST

/* An embedding lookup reads the table through tensor.extract: the table (argument 0) is an
 * `in` operand of the nest, at the 8 x 64 x 4 = 2048 bytes gathered (not its 256000), so the
 * nest reads 64 (ids) + 2048 bytes; the library gathers the right rows. */
START_TEST(gather_reads_table)
{
	char dir[256], so[512];
	struct model_run mr;
	scratch(dir, sizeof dir);
	Pim__Manifest *m = extract_input("gather", dir, true, NULL);
	static const int64_t ids[8] = { 5, 999, 0, 17, 5, 3, 998, 1 };

	ck_assert_uint_eq(m->n_regions, 1);
	const Pim__Region *r = m->regions[0];
	ck_assert_uint_eq(r->n_total, 512);
	ck_assert_uint_eq(r->n_operands, 3);
	const Pim__Operand *t = r->operands[2];
	ck_assert_uint_eq(t->allocation_id, 0);
	ck_assert_int_eq(t->role, PIM__OPERAND_ROLE__OPERAND_ROLE_IN);
	ck_assert_str_eq(t->elem_type, "f32");
	ck_assert_uint_eq(t->bytes, 2048);
	ck_assert_uint_eq(alloc_of(m, 0)->bytes, 256000);
	ck_assert_uint_eq(unique_bytes(r, true), 64 + 2048);
	ck_assert_uint_eq(unique_bytes(r, false), 2048);

	snprintf(so, sizeof so, "%s/gather.so", dir);
	model_open(&mr, so, m);
	float *table = mr.args[0], *out = mr.args[2];
	for (size_t i = 0; i < 1000 * 64; i++)
		table[i] = (float)i;
	memcpy(mr.args[1], ids, sizeof ids);
	ck_assert_int_eq(mr.entry(mr.args, mr.n_args), 0);
	for (size_t i = 0; i < 8; i++)
		for (size_t j = 0; j < 64; j++)
			ck_assert_float_eq(out[i * 64 + j], (float)(ids[i] * 64 + (int64_t)j));
	model_close(&mr);
	pim__manifest__free_unpacked(m, NULL);
	rm_dir(dir);
}
END_TEST

/* tensor.concat is lowered to copies (no region of its own): one nest, reading the 512-byte
 * concatenation (an intermediate buffer), and the library computes 2 * [a | b]. */
START_TEST(concat_lowered)
{
	char dir[256], so[512];
	struct model_run mr;
	scratch(dir, sizeof dir);
	Pim__Manifest *m = extract_input("concat", dir, true, NULL);

	ck_assert_uint_eq(m->n_regions, 1);
	const Pim__Region *r = m->regions[0];
	ck_assert_uint_eq(r->n_par, 128);
	ck_assert_uint_eq(r->operands[0]->bytes, 512);
	ck_assert_int_eq(alloc_of(m, r->operands[0]->allocation_id)->kind, PIM__ALLOC_KIND__ALLOC_KIND_ALLOC);
	snprintf(so, sizeof so, "%s/concat.so", dir);
	model_open(&mr, so, m);
	float *a = mr.args[0], *b = mr.args[1], *out = mr.args[2];
	for (size_t i = 0; i < 4 * 8; i++)
		a[i] = (float)i;
	for (size_t i = 0; i < 4 * 24; i++)
		b[i] = 1000.0f + (float)i;
	ck_assert_int_eq(mr.entry(mr.args, mr.n_args), 0);
	for (size_t i = 0; i < 4; i++)
		for (size_t j = 0; j < 32; j++)
			ck_assert_float_eq(out[i * 32 + j], 2.0f * (j < 8 ? a[i * 8 + j] : b[i * 24 + j - 8]));
	model_close(&mr);
	pim__manifest__free_unpacked(m, NULL);
	rm_dir(dir);
}
END_TEST

/* ---------------------------------------------------------------- host code */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The GEMV with its weight stored [in, out] is no slower than with [out, in] (by more than
 * 1.3x, medians of runs side by side), and both compute x W exactly (sums of small integers):
 * the loops were put in the order that reads the weight with unit stride. */
START_TEST(gemv_weight_layouts)
{
	enum { D = 1024, RUNS = 31 };
	char dir[256], so[512];
	struct model_run mr;
	scratch(dir, sizeof dir);
	Pim__Manifest *m = extract_input("gemv-orders", dir, true, NULL);
	uint64_t ta[RUNS], tb[RUNS];

	ck_assert_uint_eq(m->n_regions, 2);
	for (size_t i = 0; i < 2; i++) {
		ck_assert_uint_eq(m->regions[i]->n_par, D);
		ck_assert_uint_eq(m->regions[i]->n_total, (uint64_t)D * D);
	}
	snprintf(so, sizeof so, "%s/gemv-orders.so", dir);
	model_open(&mr, so, m);
	ck_assert_uint_eq(mr.n_args, 5);
	float *x = mr.args[0], *wa = mr.args[1], *wb = mr.args[2], *ya = mr.args[3], *yb = mr.args[4];
	for (size_t k = 0; k < D; k++) {
		x[k] = (float)(k % 3);
		for (size_t n = 0; n < D; n++) {
			wa[k * D + n] = (float)((k + 2 * n) % 5);  /* W[k][n], stored [in, out] */
			wb[n * D + k] = (float)((k + 2 * n) % 5);  /* the same W, stored [out, in] */
		}
	}
	for (size_t r = 0; r < RUNS; r++) {
		ck_assert_int_eq(mr.entry(mr.args, mr.n_args), 0);
		ta[r] = hook_ns[0];
		tb[r] = hook_ns[1];
	}
	for (size_t n = 0; n < D; n++) {
		float want = 0;
		for (size_t k = 0; k < D; k++)
			want += (float)(k % 3) * (float)((k + 2 * n) % 5);
		ck_assert_float_eq(ya[n], want);
		ck_assert_float_eq(yb[n], want);
	}
	qsort(ta, RUNS, sizeof *ta, cmp_u64);
	qsort(tb, RUNS, sizeof *tb, cmp_u64);
	ck_assert_msg(ta[RUNS / 2] <= tb[RUNS / 2] * 13 / 10,
		      "GEMV [in, out] %.1f us, [out, in] %.1f us (medians of %d): more than 1.3x slower",
		      ta[RUNS / 2] / 1e3, tb[RUNS / 2] / 1e3, RUNS);
	model_close(&mr);
	pim__manifest__free_unpacked(m, NULL);
	rm_dir(dir);
}
END_TEST

/* A bias add that is the only reader of a GEMV's product becomes the accumulator's start
 * (one region, the bias an operand of it); one whose product has another reader stays a nest.
 * Both give x W + b. */
START_TEST(gemv_bias_folded)
{
	enum { K = 64, N = 32 };
	char dir[256], so[512];
	struct model_run mr;
	scratch(dir, sizeof dir);
	Pim__Manifest *m = extract_input("gemv-bias", dir, true, NULL);

	ck_assert_uint_eq(m->n_regions, 3);
	ck_assert_uint_eq(m->regions[0]->n_total, (uint64_t)K * N);
	ck_assert_uint_eq(m->regions[0]->n_operands, 4);
	ck_assert_uint_eq(m->regions[0]->operands[3]->bytes, N * 4);
	ck_assert_int_eq(m->regions[0]->operands[3]->role, PIM__OPERAND_ROLE__OPERAND_ROLE_IN);
	ck_assert_uint_eq(m->regions[1]->n_operands, 3);
	ck_assert_uint_eq(m->regions[2]->n_total, N);
	snprintf(so, sizeof so, "%s/gemv-bias.so", dir);
	model_open(&mr, so, m);
	ck_assert_uint_eq(mr.n_args, 7);
	float *x = mr.args[0], *w1 = mr.args[1], *w2 = mr.args[2], *b = mr.args[3];
	float *y1 = mr.args[4], *y2 = mr.args[5], *p2 = mr.args[6];
	for (size_t k = 0; k < K; k++) {
		x[k] = (float)(k % 3);
		for (size_t n = 0; n < N; n++) {
			w1[k * N + n] = (float)((k + 2 * n) % 5);
			w2[k * N + n] = (float)((2 * k + n) % 7);
		}
	}
	for (size_t n = 0; n < N; n++)
		b[n] = (float)n - 7.5f;
	for (int r = 0; r < 2; r++) /* the second run must not add the bias twice */
		ck_assert_int_eq(mr.entry(mr.args, mr.n_args), 0);
	for (size_t n = 0; n < N; n++) {
		float s1 = 0, s2 = 0;
		for (size_t k = 0; k < K; k++) {
			s1 += (float)(k % 3) * (float)((k + 2 * n) % 5);
			s2 += (float)(k % 3) * (float)((2 * k + n) % 7);
		}
		ck_assert_float_eq(y1[n], s1 + b[n]);
		ck_assert_float_eq(y2[n], s2 + b[n]);
		ck_assert_float_eq(p2[n], s2);
	}
	model_close(&mr);
	pim__manifest__free_unpacked(m, NULL);
	rm_dir(dir);
}
END_TEST

/* The library keeps the buffers it frees for the next call (model.c): after the first call no
 * call faults in fresh pages for its 33 MiB intermediate, and what it computes stays right. */
START_TEST(buffers_reused)
{
	enum { M = 2048, N = 4224, CALLS = 20 };
	char dir[256], so[512];
	struct model_run mr;
	struct rusage r0, r1;
	scratch(dir, sizeof dir);
	Pim__Manifest *m = extract_input("buffers", dir, true, NULL);

	ck_assert_uint_eq(m->n_regions, 3);
	snprintf(so, sizeof so, "%s/buffers.so", dir);
	model_open(&mr, so, m);
	ck_assert_uint_eq(mr.n_args, 3);
	float *x = mr.args[0], *s = mr.args[1], *u = mr.args[2];
	for (size_t i = 0; i < (size_t)M * N; i++)
		x[i] = (float)(i % 7) / 8.0f;
	ck_assert_int_eq(mr.entry(mr.args, mr.n_args), 0);
	ck_assert_int_eq(mr.entry(mr.args, mr.n_args), 0);
	getrusage(RUSAGE_SELF, &r0);
	for (int c = 0; c < CALLS; c++)
		ck_assert_int_eq(mr.entry(mr.args, mr.n_args), 0);
	getrusage(RUSAGE_SELF, &r1);
	/* the buffer faulted in again would be 8448 faults a call */
	ck_assert_msg(r1.ru_minflt - r0.ru_minflt < CALLS, "%ld page faults in %d calls",
		      r1.ru_minflt - r0.ru_minflt, CALLS);
	for (size_t i = 0; i < M; i++) {
		float want = 0;
		for (size_t j = 0; j < N; j++)
			want += expf((float)((i * N + j) % 7) / 8.0f);
		ck_assert_float_eq_tol(s[i], want, want * 1e-4f);
		ck_assert_float_eq_tol(u[i * N + 3], 2 * expf((float)((i * N + 3) % 7) / 8.0f), 1e-5f);
	}
	model_close(&mr);
	pim__manifest__free_unpacked(m, NULL);
	rm_dir(dir);
}
END_TEST

/* tanh, erf and 1 + tanh, computed inline (compiler/hostcode.c), against libm over [-12, 12],
 * tiny and special values: |error| <= 4e-7 + 2e-6 |want|; NaN stays NaN, ±inf gives ±1, -0
 * gives -0. */
START_TEST(math_inline_accuracy)
{
	enum { N = 4096 };
	char dir[256], so[512];
	struct model_run mr;
	scratch(dir, sizeof dir);
	Pim__Manifest *m = extract_input("math", dir, true, NULL);

	snprintf(so, sizeof so, "%s/math.so", dir);
	model_open(&mr, so, m);
	float *x = mr.args[0], *t = mr.args[1], *e = mr.args[2], *g = mr.args[3];
	for (size_t i = 0; i < N - 8; i++)
		x[i] = -12.0f + 24.0f * (float)i / (float)(N - 9);
	const float special[8] = { 1e-30f, -3e-5f, 0.0624f, 0.0626f, -0.0f, INFINITY, -INFINITY, NAN };
	memcpy(x + N - 8, special, sizeof special);
	ck_assert_int_eq(mr.entry(mr.args, mr.n_args), 0);
	for (size_t i = 0; i < N; i++) {
		float wt = tanhf(x[i]), we = erff(x[i]);
		if (isnan(x[i])) {
			ck_assert(isnan(t[i]) && isnan(e[i]) && isnan(g[i]));
			continue;
		}
		ck_assert_msg(fabsf(t[i] - wt) <= 4e-7f + 2e-6f * fabsf(wt), "tanh(%g) = %.9g, libm %.9g",
			      (double)x[i], (double)t[i], (double)wt);
		ck_assert_msg(fabsf(e[i] - we) <= 4e-7f + 2e-6f * fabsf(we), "erf(%g) = %.9g, libm %.9g",
			      (double)x[i], (double)e[i], (double)we);
		ck_assert(signbit(t[i]) == signbit(x[i]) && signbit(e[i]) == signbit(x[i]));
		/* 1 + tanh as 2 / (1 + exp(-2x)): no cancellation near tanh = -1, so against the
		 * double-precision value it is within a few ulp relative, where 1 + tanhf is not. */
		double wg = 1.0 + tanh((double)x[i]);
		ck_assert_msg(fabs(g[i] - wg) <= 1e-7 + 1e-6 * fabs(wg), "1 + tanh(%g) = %.9g, want %.9g",
			      (double)x[i], (double)g[i], wg);
	}
	/* No call of libm's scalar tanhf or erff is left: their names are not in the library's
	 * dynamic string table. */
	FILE *f = fopen(so, "rb");
	ck_assert_ptr_nonnull(f);
	static char img[1 << 20];
	size_t len = fread(img, 1, sizeof img, f);
	fclose(f);
	ck_assert_uint_gt(len, 0);
	ck_assert_ptr_null(memmem(img, len, "\0tanhf\0", 7));
	ck_assert_ptr_null(memmem(img, len, "\0erff\0", 6));
	ck_assert_ptr_nonnull(memmem(img, len, "\0pim_region_enter\0", 18));
	model_close(&mr);
	pim__manifest__free_unpacked(m, NULL);
	rm_dir(dir);
}
END_TEST

/* The max reduction lowered as llvm.maximum (so that it vectorises, make bench-hostcode's
 * softmax): each row's maximum, NaN where a row holds one, +0 over -0. */
START_TEST(max_reduction)
{
	char dir[256], so[512];
	struct model_run mr;
	scratch(dir, sizeof dir);
	Pim__Manifest *m = extract_input("maxred", dir, true, NULL);

	ck_assert_uint_eq(m->n_regions, 1);
	snprintf(so, sizeof so, "%s/maxred.so", dir);
	model_open(&mr, so, m);
	float *x = mr.args[0], *y = mr.args[1];
	for (size_t r = 0; r < 8; r++)
		for (size_t c = 0; c < 512; c++)
			x[r * 512 + c] = (float)((int)((r * 131 + c * 37) % 1001) - 700) / 8.0f;
	x[3 * 512 + 17] = NAN;
	x[5 * 512 + 511] = NAN;
	for (size_t c = 0; c < 512; c++)
		x[6 * 512 + c] = c % 2 ? -0.0f : -1.0f;
	x[6 * 512 + 200] = 0.0f;
	ck_assert_int_eq(mr.entry(mr.args, mr.n_args), 0);
	for (size_t r = 0; r < 8; r++) {
		float want = -INFINITY;
		bool nan = false;
		for (size_t c = 0; c < 512; c++) {
			float v = x[r * 512 + c];
			nan |= isnan(v);
			if (v > want || (v == 0 && want == 0 && !signbit(v)))
				want = v;
		}
		if (nan)
			ck_assert_msg(isnan(y[r]), "row %zu: %g, want NaN", r, (double)y[r]);
		else
			ck_assert_msg(y[r] == want && signbit(y[r]) == signbit(want), "row %zu: %g, want %g", r,
				      (double)y[r], (double)want);
	}
	model_close(&mr);
	pim__manifest__free_unpacked(m, NULL);
	rm_dir(dir);
}
END_TEST

/* ---------------------------------------------------------------- framework operators */

/* Nests carry the framework operator their location names, loc("NODE"("TYPE")): op TYPE, name
 * NODE.K (K-th nest of the node), and one location per node (what operator granularity groups
 * by), also through a CallSiteLoc (inlined call) and a FusedLoc; a plain location keeps the
 * linalg naming and file:line:col. */
START_TEST(operator_groups)
{
	char dir[256], so[512];
	struct model_run mr;
	scratch(dir, sizeof dir);
	Pim__Manifest *m = extract_input("onnx-locs", dir, true, "--nests=source");
	static const char *const names[] = { "/h.0/attn/MatMul.0", "/h.0/attn/MatMul.1", "/h.0/attn/Add.0",
					     "/h.0/mlp/Relu.0", "/h.0/mlp/Mul.0", "generic.negf" };
	static const char *const ops[] = { "MatMul", "MatMul", "Add", "Relu", "Mul", "linalg.generic" };

	ck_assert_uint_eq(m->n_regions, 6);
	for (size_t i = 0; i < 6; i++) {
		ck_assert_str_eq(m->regions[i]->name, names[i]);
		ck_assert_str_eq(m->regions[i]->op, ops[i]);
	}
	/* The matmul (its fill folded in) and the scaling of node /h.0/attn/MatMul: one operator
	 * (same location); every other nest an operator of its own. */
	ck_assert_str_eq(m->regions[0]->location, "/h.0/attn/MatMul");
	ck_assert_str_eq(m->regions[1]->location, "/h.0/attn/MatMul");
	for (size_t i = 1; i < 6; i++)
		for (size_t j = i + 1; j < 6; j++)
			ck_assert_str_ne(m->regions[i]->location, m->regions[j]->location);
	ck_assert_str_eq(m->regions[2]->location, "/h.0/attn/Add");
	ck_assert_str_eq(m->regions[3]->location, "/h.0/mlp/Relu");
	ck_assert_str_eq(m->regions[4]->location, "/h.0/mlp/Mul");
	ck_assert_msg(ends_with(m->regions[5]->location, "/inputs/onnx-locs.mlir:49:8"), "%s",
		      m->regions[5]->location);
	ck_assert_uint_eq(m->regions[0]->n_total, 32 * 64);
	ck_assert_uint_eq(m->regions[1]->n_total, 32);

	snprintf(so, sizeof so, "%s/onnx-locs.so", dir);
	model_open(&mr, so, m);
	hook_n = 0;
	ck_assert_int_eq(mr.entry(mr.args, mr.n_args), 0);
	expect_program_order(m, 1);
	model_close(&mr);
	pim__manifest__free_unpacked(m, NULL);
	rm_dir(dir);
}
END_TEST

/* ---------------------------------------------------------------- --weights zero */

/* y = x W + 1.5 with a 1 MiB constant W [1024x256], W[k][j] = (7 (256 k + j)) % 5, written as
 * MLIR's hex form, and a 1 KiB bias constant (below the 64 KiB threshold: it stays real). */
static float big_w(size_t k, size_t j)
{
	return (float)((7 * (256 * k + j)) % 5);
}

static void write_big_model(const char *path)
{
	FILE *f = fopen(path, "we");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "#map = affine_map<(d0, d1) -> (d0, d1)>\n"
		   "func.func @forward(%%x: tensor<1x1024xf32>) -> tensor<1x256xf32> {\n"
		   "  %%w = arith.constant dense<\"0x");
	for (size_t k = 0; k < 1024; k++)
		for (size_t j = 0; j < 256; j++) {
			float v = big_w(k, j);
			uint8_t b[4];
			memcpy(b, &v, 4); /* little-endian host, as MLIR's hex form */
			fprintf(f, "%02X%02X%02X%02X", b[0], b[1], b[2], b[3]);
		}
	fprintf(f, "\"> : tensor<1024x256xf32>\n"
		   "  %%b = arith.constant dense<1.5> : tensor<1x256xf32>\n"
		   "  %%zero = arith.constant 0.0 : f32\n"
		   "  %%e = tensor.empty() : tensor<1x256xf32>\n"
		   "  %%z = linalg.fill ins(%%zero : f32) outs(%%e : tensor<1x256xf32>) -> tensor<1x256xf32>\n"
		   "  %%m = linalg.matmul ins(%%x, %%w : tensor<1x1024xf32>, tensor<1024x256xf32>)\n"
		   "      outs(%%z : tensor<1x256xf32>) -> tensor<1x256xf32>\n"
		   "  %%e2 = tensor.empty() : tensor<1x256xf32>\n"
		   "  %%r = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = [\"parallel\", \"parallel\"]}\n"
		   "      ins(%%m, %%b : tensor<1x256xf32>, tensor<1x256xf32>) outs(%%e2 : tensor<1x256xf32>) {\n"
		   "  ^bb0(%%p: f32, %%q: f32, %%o: f32):\n"
		   "    %%v = arith.addf %%p, %%q : f32\n"
		   "    linalg.yield %%v : f32\n"
		   "  } -> tensor<1x256xf32>\n"
		   "  return %%r : tensor<1x256xf32>\n"
		   "}\n");
	ck_assert_int_eq(fclose(f), 0);
}

static off_t file_size(const char *path)
{
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	return st.st_size;
}

/* The same model extracted with real weights and with --weights zero: the same regions and
 * allocations, but the zero library does not carry the 1 MiB (it is in .bss, zeroed at load),
 * the manifest says so, and the library runs: y = 0 + 1.5 where the real one gives x W + 1.5. */
START_TEST(weights_zero)
{
	char dir[256], in[512], rj[512], rs[512], zj[512], zs[512], errbuf[2048];
	struct model_run mr;
	scratch(dir, sizeof dir);
	snprintf(in, sizeof in, "%s/big.mlir", dir);
	snprintf(rj, sizeof rj, "%s/real.json", dir);
	snprintf(rs, sizeof rs, "%s/real.so", dir);
	snprintf(zj, sizeof zj, "%s/zero.json", dir);
	snprintf(zs, sizeof zs, "%s/zero.so", dir);
	write_big_model(in);
	const char *real[] = { in, "-o", rj, "--emit-model", rs, NULL };
	const char *zero[] = { in, "--weights", "zero", "-o", zj, "--emit-model", zs, NULL };
	ck_assert_msg(run_extract(real, errbuf, sizeof errbuf, dir) == 0, "%s", errbuf);
	ck_assert_msg(run_extract(zero, errbuf, sizeof errbuf, dir) == 0, "%s", errbuf);
	ck_assert_int_gt(file_size(rs), 1048576);
	ck_assert_int_lt(file_size(zs), 65536);

	Pim__Manifest *r = load(rj), *z = load(zj);
	ck_assert_ptr_null(strstr(r->source, "--weights"));
	ck_assert_msg(strstr(z->source, "/big.mlir (--weights zero: 1 constants, 1048576 bytes zeroed)"),
		      "source %s", z->source);
	/* The instruction set of the host code follows (common/cpulevel.h). */
	if (cpulevel_native()[0]) {
		char want[64];
		snprintf(want, sizeof want, " (host code %s)", cpulevel_native());
		ck_assert_msg(ends_with(z->source, want), "source %s", z->source);
		ck_assert_msg(ends_with(r->source, want), "source %s", r->source);
	}
	ck_assert_uint_eq(z->n_regions, 2);
	ck_assert_uint_eq(r->n_regions, 2);
	ck_assert_uint_eq(z->n_allocations, r->n_allocations);
	for (size_t i = 0; i < z->n_regions; i++) {
		ck_assert_uint_eq(z->regions[i]->n_total, r->regions[i]->n_total);
		ck_assert_uint_eq(unique_bytes(z->regions[i], true), unique_bytes(r->regions[i], true));
	}
	/* The matmul reads W from the zero global (1 MiB, a GLOBAL allocation like the real one);
	 * the add adds the bias, a real constant. */
	const Pim__Allocation *w = alloc_of(z, z->regions[0]->operands[1]->allocation_id);
	ck_assert_str_eq(w->name, "@pim_weights_zero_0");
	ck_assert_int_eq(w->kind, PIM__ALLOC_KIND__ALLOC_KIND_GLOBAL);
	ck_assert_uint_eq(w->bytes, 1048576);
	ck_assert_int_eq(alloc_of(r, r->regions[0]->operands[1]->allocation_id)->kind,
			 PIM__ALLOC_KIND__ALLOC_KIND_GLOBAL);
	/* The bias, a splat constant under the threshold, stays real: folded into the add's
	 * payload, which reads y alone. */
	ck_assert_uint_eq(z->regions[1]->n_operands, 2);
	ck_assert_uint_eq(z->regions[1]->operands[0]->allocation_id, z->regions[0]->operands[2]->allocation_id);

	/* x[k] = 1 for k % 3 == 0, else 0: sums of small integers, exact in f32. */
	model_open(&mr, zs, z);
	float *x = mr.args[0], *y = mr.args[1];
	for (size_t k = 0; k < 1024; k++)
		x[k] = k % 3 == 0 ? 1.0f : 0.0f;
	hook_n = 0;
	ck_assert_int_eq(mr.entry(mr.args, mr.n_args), 0);
	expect_program_order(z, 1);
	for (size_t j = 0; j < 256; j++)
		ck_assert_float_eq(y[j], 1.5f);
	model_close(&mr);
	model_open(&mr, rs, r);
	x = mr.args[0];
	y = mr.args[1];
	for (size_t k = 0; k < 1024; k++)
		x[k] = k % 3 == 0 ? 1.0f : 0.0f;
	ck_assert_int_eq(mr.entry(mr.args, mr.n_args), 0);
	for (size_t j = 0; j < 256; j++) {
		float want = 1.5f;
		for (size_t k = 0; k < 1024; k += 3)
			want += big_w(k, j);
		ck_assert_float_eq(y[j], want);
	}
	model_close(&mr);
	pim__manifest__free_unpacked(r, NULL);
	pim__manifest__free_unpacked(z, NULL);

	/* Only real and zero are modes. */
	const char *bad[] = { in, "--weights", "random", NULL };
	ck_assert_int_eq(run_extract(bad, errbuf, sizeof errbuf, dir), 2);
	ck_assert_ptr_nonnull(strstr(errbuf, "--weights takes real or zero"));
	unlink(in);
	unlink(rj);
	unlink(rs);
	unlink(zj);
	unlink(zs);
	rm_dir(dir);
}
END_TEST

/* --binary writes the same manifest as protobuf; --name renames the model. */
START_TEST(binary_and_name)
{
	char dir[256], out[512], errbuf[2048];
	scratch(dir, sizeof dir);
	snprintf(out, sizeof out, "%s/gemv.pb", dir);
	const char *args[] = { "examples/gemv.mlir", "--binary", "--name", "gemv-bin", "-o", out, NULL };
	ck_assert_int_eq(run_extract(args, errbuf, sizeof errbuf, dir), 0);
	int fd = open(out, O_RDONLY | O_CLOEXEC);
	char c = 0;
	ck_assert_int_eq(read(fd, &c, 1), 1);
	close(fd);
	ck_assert_int_ne(c, '{');
	Pim__Manifest *b = load(out), *j = load_example("gemv");
	ck_assert_str_eq(b->name, "gemv-bin");
	ck_assert_uint_eq(b->n_regions, j->n_regions);
	ck_assert_uint_eq(b->n_allocations, j->n_allocations);
	for (size_t i = 0; i < b->n_regions; i++) {
		ck_assert_uint_eq(b->regions[i]->n_total, j->regions[i]->n_total);
		ck_assert_uint_eq(unique_bytes(b->regions[i], true), unique_bytes(j->regions[i], true));
		ck_assert_str_eq(b->regions[i]->location, j->regions[i]->location);
	}
	pim__manifest__free_unpacked(b, NULL);
	pim__manifest__free_unpacked(j, NULL);
	rm_dir(dir);
}
END_TEST

/* ---------------------------------------------------------------- refusals */

static const struct {
	const char *input;
	const char *want[3]; /* substrings of the message: location, op, reason */
} refusals[] = {
	{ "bad-dynamic", { "bad-dynamic.mlir:4:8: tensor.empty:", "dynamic shape tensor<?x64xf32>",
			   "static shapes" } },
	{ "bad-torch", { "bad-torch.mlir:3:8: torch.aten.relu:", "torch-dialect input is not supported",
			 "export the PyTorch model to ONNX with torch.onnx.export and pass the .onnx file" } },
	{ "bad-softmax", { "bad-softmax.mlir:4:8: linalg.softmax:", "unsupported operation",
			   "not a structured linalg op" } },
	{ "bad-vector", { "bad-vector.mlir:4:8: vector.broadcast:", "unsupported operation", "dialects" } },
	{ "bad-call", { "bad-call.mlir:4:8: func.call:", "@external", "no body" } },
	{ "bad-bounds", { "bad-bounds.mlir:8:8: scf.for:", "upper bound is not a constant",
			  "encloses linalg.generic at" } },
	{ "bad-parse", { "bad-parse.mlir:4:8: parse error:", "linalg.matmull", "is unknown" } },
	{ "bad-scalar-arg", { "bad-scalar-arg.mlir:3:1: func.func:", "argument #1", "not a tensor" } },
	{ "bad-node", { "bad-node.mlir: node /h.0/attn/Softmax (Softmax): linalg.softmax:",
			"unsupported operation", "not a structured linalg op" } },
};

START_TEST(refusal)
{
	char dir[256], in[512], out[512], so[512], errbuf[2048];
	scratch(dir, sizeof dir);
	snprintf(in, sizeof in, "%s/%s.mlir", env("PIM_TEST_INPUTS"), refusals[_i].input);
	snprintf(out, sizeof out, "%s/out.json", dir);
	snprintf(so, sizeof so, "%s/out.so", dir);
	const char *args[] = { in, "-o", out, "--emit-model", so, NULL };

	ck_assert_int_eq(run_extract(args, errbuf, sizeof errbuf, dir), 1);
	ck_assert_msg(strncmp(errbuf, "pim-extract: ", 13) == 0, "message: %s", errbuf);
	for (size_t k = 0; k < 3; k++)
		ck_assert_msg(strstr(errbuf, refusals[_i].want[k]) != NULL, "\"%s\" lacks \"%s\"", errbuf,
			      refusals[_i].want[k]);
	ck_assert_msg(strchr(errbuf, '\n') == errbuf + strlen(errbuf) - 1, "one line: %s", errbuf);
	/* Nothing written, not even a temporary. */
	ck_assert_uint_eq(dir_entries(dir), 0);
	rm_dir(dir);
}
END_TEST

/* A failing model build leaves neither the library nor the manifest behind. */
START_TEST(model_failure_writes_nothing)
{
	char dir[256], out[512], so[512], errbuf[2048];
	scratch(dir, sizeof dir);
	snprintf(out, sizeof out, "%s/add.json", dir);
	snprintf(so, sizeof so, "%s/add.so", dir);
	const char *args[] = { "examples/add.mlir", "-o", out, "--emit-model", so, "--cc", "/bin/false", NULL };

	ck_assert_int_eq(run_extract(args, errbuf, sizeof errbuf, dir), 1);
	ck_assert_msg(strstr(errbuf, "add.so: building the model library: /bin/false failed") != NULL,
		      "message: %s", errbuf);
	ck_assert_uint_eq(dir_entries(dir), 0);
	rm_dir(dir);
}
END_TEST

START_TEST(usage_errors)
{
	char dir[256], errbuf[2048];
	scratch(dir, sizeof dir);
	const char *none[] = { NULL };
	ck_assert_int_eq(run_extract(none, errbuf, sizeof errbuf, dir), 2);
	const char *missing[] = { "/nonexistent/model.mlir", NULL };
	ck_assert_int_eq(run_extract(missing, errbuf, sizeof errbuf, dir), 1);
	ck_assert_ptr_nonnull(strstr(errbuf, "/nonexistent/model.mlir: No such file"));
	const char *badname[] = { "examples/add.mlir", "--name", "-bad", NULL };
	ck_assert_int_eq(run_extract(badname, errbuf, sizeof errbuf, dir), 1);
	ck_assert_ptr_nonnull(strstr(errbuf, "model name \"-bad\" is not valid"));
	const char *entry[] = { "examples/add.mlir", "--entry", "nope", NULL };
	ck_assert_int_eq(run_extract(entry, errbuf, sizeof errbuf, dir), 1);
	ck_assert_ptr_nonnull(strstr(errbuf, "no function @nope"));
	rm_dir(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pim-extract");
	TCase *tc = test_case(s, "examples");
	tcase_add_test(tc, every_example_is_tested);
	tcase_add_loop_test(tc, example_nest_count, 0, ELEMENTSOF(examples));
	tcase_add_test(tc, gemv_facts);
	tcase_add_test(tc, matmul_facts);
	tcase_add_test(tc, depthwise_conv_facts);
	tcase_add_test(tc, softmax_facts);
	tcase_add_test(tc, decoder_block_facts);
	tcase_add_test(tc, mac_facts);
	tc = test_case(s, "models");
	tcase_add_loop_test(tc, example_model_runs, 0, ELEMENTSOF(examples));
	tcase_add_test(tc, model_values);
	tc = test_case(s, "inputs");
	tcase_add_test(tc, in_place_update);
	tcase_add_test(tc, loop_trip_counts);
	tcase_add_test(tc, pad_nest);
	tcase_add_test(tc, inlined_calls);
	tcase_add_test(tc, binary_and_name);
	tcase_add_test(tc, operator_groups);
	tcase_add_test(tc, weights_zero);
	tcase_add_test(tc, gemv_weight_layouts);
	tcase_add_test(tc, gemv_bias_folded);
	tcase_add_test(tc, buffers_reused);
	tcase_add_test(tc, math_inline_accuracy);
	tcase_add_test(tc, max_reduction);
	tc = test_case(s, "exporter defects");
	tcase_add_test(tc, bf16_library);
	tcase_add_test(tc, duplicate_result);
	tcase_add_test(tc, gather_reads_table);
	tcase_add_test(tc, concat_lowered);
	tc = test_case(s, "refusals");
	tcase_add_loop_test(tc, refusal, 0, ELEMENTSOF(refusals));
	tcase_add_test(tc, usage_errors);
	tcase_add_test(tc, model_failure_writes_nothing);
	return test_run_suite(s);
}
