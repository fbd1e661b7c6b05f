/* SPDX-License-Identifier: MIT */
/*
 * hostcode-run [--warmups W] [--runs N] [--max-runs M] [--seconds S] MANIFEST LIBRARY:
 * times the host code pim-extract built, region by region, as a CPU user would run it: the
 * model library is dlopen'ed here, this program defines the hooks pim_region_enter/exit
 * (client/pim_hooks.h) with clock_gettime(CLOCK_MONOTONIC), and the model runs W times to warm
 * up (default 2), then at least N times (default 5) and until S seconds of measured runs
 * (default 1.0) or M runs (default 1000).  No counters, no daemon: the timing
 * bench/bench_hostcode.sh sets beside PyTorch's for the same ONNX nodes.
 *
 * Arguments are the manifest's ARGUMENT allocations (the graph inputs, then the outputs),
 * allocated 64-byte aligned: float inputs filled with values in [-1, 1), integer ones with 0
 * (a valid embedding row).  Output, one line per region in manifest order, tab-separated:
 *
 *   region ID NAME OP LOCATION TRIP N_TOTAL MEDIAN_NS MIN_NS
 *
 * (the time of one run: all of the region's TRIP executions in it), then
 *
 *   total RUNS MEDIAN_NS MIN_NS
 *
 * for one whole call of the model (hooks included).  Exit status 0, or 2 with a message.
 */
#include <dlfcn.h>
#include <getopt.h>
#include <string.h>
#include <time.h>

#include "manifest.h"
#include "pim_hooks.h"

static uint64_t *started, *spent; /* per region id, this run */
static uint32_t n_ids;

static inline uint64_t clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void pim_region_enter(int32_t region)
{
	if (region >= 0 && (uint32_t)region < n_ids)
		started[region] = clock_ns();
}

void pim_region_exit(int32_t region)
{
	uint64_t t = clock_ns();
	if (region >= 0 && (uint32_t)region < n_ids)
		spent[region] += t - started[region];
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof *v, cmp_u64);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The element type of an allocation, from any operand that resolves to it ("f32", "i64"). */
static const char *alloc_elem_type(const Pim__Manifest *m, uint32_t id)
{
	for (size_t r = 0; r < m->n_regions; r++)
		for (size_t o = 0; o < m->regions[r]->n_operands; o++)
			if (m->regions[r]->operands[o]->allocation_id == id)
				return m->regions[r]->operands[o]->elem_type;
	return "";
}

static void fill(void *p, uint64_t bytes, const char *type)
{
	uint32_t x = 2463534242u;
	if (strcmp(type, "f32") == 0) {
		float *f = p;
		for (uint64_t i = 0; i < bytes / 4; i++) {
			x ^= x << 13, x ^= x >> 17, x ^= x << 5;
			f[i] = (float)((double)x / 2147483648.0 - 1.0);
		}
	} else if (strcmp(type, "f64") == 0) {
		double *f = p;
		for (uint64_t i = 0; i < bytes / 8; i++) {
			x ^= x << 13, x ^= x >> 17, x ^= x << 5;
			f[i] = (double)x / 2147483648.0 - 1.0;
		}
	} else {
		memset(p, 0, bytes); /* integers (indices), f16/bf16: zeros are valid values */
	}
}

int main(int argc, char **argv)
{
	unsigned warmups = 2, min_runs = 5, max_runs = 1000;
	double seconds = 1.0;
	static const struct option opts[] = {
		{ "warmups", required_argument, NULL, 'w' }, { "runs", required_argument, NULL, 'n' },
		{ "max-runs", required_argument, NULL, 'm' }, { "seconds", required_argument, NULL, 's' },
		{ 0 }
	};
	for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
		switch (c) {
		case 'w': warmups = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'n': min_runs = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'm': max_runs = (unsigned)strtoul(optarg, NULL, 10); break;
		case 's': seconds = strtod(optarg, NULL); break;
		default: goto usage;
		}
	}
	if (argc - optind != 2 || min_runs < 1 || max_runs < min_runs) {
usage:
		fprintf(stderr, "usage: hostcode-run [--warmups W] [--runs N] [--max-runs M] [--seconds S] "
				"MANIFEST LIBRARY\n");
		return 2;
	}
	struct pim_error err = { 0 };
	Pim__Manifest *m = NULL;
	if (manifest_read_file(argv[optind], &m, &err) < 0) {
		fprintf(stderr, "hostcode-run: %s\n", err.msg);
		return 2;
	}
	for (size_t r = 0; r < m->n_regions; r++)
		if (m->regions[r]->id + 1 > n_ids)
			n_ids = m->regions[r]->id + 1;
	started = calloc(n_ids + 1, sizeof *started);
	spent = calloc(n_ids + 1, sizeof *spent);
	uint64_t *samples = calloc((size_t)(n_ids + 1) * max_runs, sizeof *samples);
	uint64_t *totals = calloc(max_runs, sizeof *totals);
	if (!started || !spent || !samples || !totals) {
		fprintf(stderr, "hostcode-run: out of memory for %u regions x %u runs\n", n_ids, max_runs);
		return 2;
	}

	/* ARGUMENT allocations have ids 0..n-1 (compiler/README.md). */
	size_t n_args = 0;
	for (size_t i = 0; i < m->n_allocations; i++)
		if (m->allocations[i]->kind == PIM__ALLOC_KIND__ALLOC_KIND_ARGUMENT)
			n_args++;
	void **args = calloc(n_args ? n_args : 1, sizeof *args);
	for (size_t i = 0; i < m->n_allocations; i++) {
		const Pim__Allocation *a = m->allocations[i];
		if (a->kind != PIM__ALLOC_KIND__ALLOC_KIND_ARGUMENT)
			continue;
		if (a->id >= n_args) {
			fprintf(stderr, "hostcode-run: argument allocation %u is not among the first %zu\n", a->id,
				n_args);
			return 2;
		}
		size_t bytes = (size_t)(a->bytes ? a->bytes : 1);
		args[a->id] = aligned_alloc(64, (bytes + 63) / 64 * 64);
		if (!args[a->id]) {
			fprintf(stderr, "hostcode-run: cannot allocate argument %u (%zu bytes)\n", a->id, bytes);
			return 2;
		}
		fill(args[a->id], a->bytes, alloc_elem_type(m, a->id));
	}

	void *lib = dlopen(argv[optind + 1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "hostcode-run: dlopen %s: %s\n", argv[optind + 1], dlerror());
		return 2;
	}
	pim_model_entry_fn entry;
	*(void **)&entry = dlsym(lib, PIM_MODEL_ENTRY);
	if (!entry) {
		fprintf(stderr, "hostcode-run: %s has no %s\n", argv[optind + 1], PIM_MODEL_ENTRY);
		return 2;
	}

	for (unsigned i = 0; i < warmups; i++)
		if (entry(args, n_args) != 0) {
			fprintf(stderr, "hostcode-run: the library refused its %zu arguments\n", n_args);
			return 2;
		}
	unsigned runs = 0;
	uint64_t t_begin = clock_ns();
	while (runs < max_runs && (runs < min_runs || (double)(clock_ns() - t_begin) < seconds * 1e9)) {
		memset(spent, 0, (n_ids + 1) * sizeof *spent);
		uint64_t t0 = clock_ns();
		if (entry(args, n_args) != 0) {
			fprintf(stderr, "hostcode-run: the library refused its %zu arguments\n", n_args);
			return 2;
		}
		totals[runs] = clock_ns() - t0;
		for (uint32_t id = 0; id < n_ids; id++)
			samples[(size_t)id * max_runs + runs] = spent[id];
		runs++;
	}

	for (size_t r = 0; r < m->n_regions; r++) {
		const Pim__Region *g = m->regions[r];
		uint64_t *v = samples + (size_t)g->id * max_runs;
		uint64_t med = median(v, runs); /* sorted now: v[0] is the minimum */
		printf("region\t%u\t%s\t%s\t%s\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n", g->id, g->name,
		       g->op, g->location, g->trip ? g->trip : 1, g->n_total, med, v[0]);
	}
	uint64_t med = median(totals, runs);
	printf("total\t%u\t%" PRIu64 "\t%" PRIu64 "\n", runs, med, totals[0]);
	return 0;
}
