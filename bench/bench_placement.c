/* SPDX-License-Identifier: MIT */
/*
 * bench_placement: cost of placement_run() on synthetic models of 10,000 and 100,000 regions
 * (goal: a 100,000-region model well under a second, cost linear in
 * regions).  Prints the median of several runs and the time per region for both sizes; equal
 * per-region times show linear cost.  Also the size of a fresh result's block per region.
 *
 * The generator (fixed seed, same for both sizes) makes a transformer-like chain: each region
 * reads the previous region's output and a weight of its own (read-only), writes its own output,
 * and every fourth region works in place; eight consecutive regions share a source operator;
 * sizes and metrics are drawn so that roughly a third of the regions go to PIM.
 *
 * Usage: bench_placement [runs]   (default 7)
 */
#include "placement.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

struct model {
	struct placement_region *r;
	struct placement_operand *ops;
	char (*opname)[24];
	size_t n;
};

static uint64_t rng_state = UINT64_C(0x9e3779b97f4a7c15);

static uint64_t rng(void)
{
	/* xorshift64*: deterministic, good enough for drawing synthetic metrics */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * UINT64_C(2685821657736338717);
}

static double urand(void)
{
	return (double)(rng() >> 11) / 9007199254740992.0;
}

static void model_free(struct model *m)
{
	free(m->r);
	free(m->ops);
	free(m->opname);
}

static int model_make(struct model *m, size_t n)
{
	rng_state = UINT64_C(0x9e3779b97f4a7c15);
	m->n = n;
	m->r = calloc(n, sizeof *m->r);
	m->ops = calloc(3 * n, sizeof *m->ops);
	m->opname = calloc(n, sizeof *m->opname);
	if (!m->r || !m->ops || !m->opname)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct placement_region *r = &m->r[i];
		struct placement_operand *o = &m->ops[3 * i];
		uint64_t elems = UINT64_C(1) << (10 + rng() % 14); /* 1 Ki .. 8 Mi elements */
		uint64_t bytes = 4 * elems;
		double bw = 0.2e9 + urand() * 8e9;

		snprintf(m->opname[i], sizeof m->opname[i], "op%zu", i / 8);
		o[0] = (struct placement_operand){ (uint32_t)(2 * i), bytes, PL_IN };        /* previous output */
		o[1] = (struct placement_operand){ (uint32_t)(2 * i + 1), bytes / 4, PL_IN }; /* weight */
		o[2] = (struct placement_operand){ (uint32_t)(i % 4 == 3 ? 2 * i : 2 * i + 2), bytes, PL_OUT };
		*r = (struct placement_region){
			.id = (uint32_t)i,
			.op = m->opname[i],
			.order = (uint32_t)i,
			.n_par = rng() % 3 == 0 ? 16 : elems,
			.n_total = elems * (1 + rng() % 4),
			.trip = 1 + rng() % 3,
			.operands = o,
			.n_operands = 3,
			.evidence = PL_EVIDENCE_COUNTERS,
			.have_n_rd = true,
			.have_store = true,
		};
		if (r->n_par > r->n_total)
			r->n_par = r->n_total;
		r->t_host = (double)bytes / (bw + 1e9);
		r->n_rd = bw * r->t_host / 64;
		r->c_store = urand() * 50;
		r->c_be1 = 30, r->c_be2 = 20, r->c_be3 = 10;
	}
	return 0;
}

/* CPU time of this thread: on a shared machine, time other processes take is not ours */
static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* minor page faults of this thread so far: first touches of fresh memory */
static uint64_t minor_faults(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return (uint64_t)ru.ru_minflt;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Write a buffer larger than any cache, so that the next call finds none of its data cached. */
static void evict_caches(void)
{
	static char *junk;
	enum { JUNK = 256 << 20 };

	if (!junk)
		junk = malloc(JUNK);
	if (junk)
		memset(junk, (int)(rng() & 0xff), JUNK);
}

/*
 * Median wall and CPU time of `runs` placement_run_reuse calls, in ns, the page faults per call and
 * the last result's stats.  res is the caller's result, reused from call to call; NULL: a fresh
 * result every call (placement_run), for comparison.
 */
static int bench(const struct model *m, const struct placement_params *p, const struct placement_query *q,
		 struct placement_result *res, bool cold,
		 int runs, uint64_t *median, uint64_t *median_cpu, uint64_t *faults, size_t *offloaded,
		 double *speedup)
{
	struct placement_result fresh = { 0 }, *last = res ? res : &fresh;
	uint64_t f0 = 0;
	uint64_t t[64], c[64];
	struct pim_error err = { 0 };

	/* one untimed run first: the result's memory reaches the size a daemon reuses */
	for (int k = -1; k < runs; k++) {
		uint64_t t0, c0;

		if (k == 0)
			f0 = minor_faults();
		if (cold)
			evict_caches();
		t0 = now_ns(), c0 = cpu_ns();
		int rc = res ? placement_run_reuse(m->r, m->n, p, q, res, &err)
			     : placement_run(m->r, m->n, p, q, &fresh, &err);

		if (k >= 0) {
			t[k] = now_ns() - t0;
			c[k] = cpu_ns() - c0;
		}
		if (rc < 0) {
			fprintf(stderr, "placement_run: %s\n", err.msg);
			return rc;
		}
		*offloaded = last->estimates[0].n_offloaded;
		*speedup = last->estimates[0].speedup;
		placement_result_free(&fresh);
	}
	*faults = (minor_faults() - f0) / (uint64_t)runs;
	qsort(t, (size_t)runs, sizeof t[0], cmp_u64);
	qsort(c, (size_t)runs, sizeof c[0], cmp_u64);
	*median = t[runs / 2];
	*median_cpu = c[runs / 2];
	return 0;
}

/* A row of the table for a variant of the first mode. */
static void print_variant(size_t n, const struct placement_query *q, uint64_t wall, uint64_t cpu, uint64_t faults,
			  const char *what)
{
	printf("%-9zu %-9s %-8s %7.2f ms %9.1f ns %9.1f ns %12llu   (%s)\n", n,
	       placement_granularity_name(q->granularity), placement_movement_model_name(q->movement),
	       (double)wall / 1e6, (double)wall / (double)n, (double)cpu / (double)n,
	       (unsigned long long)faults, what);
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 10000, 100000 };
	static const double cores[] = { 32, 64, 128 };
	static const struct {
		enum placement_granularity g;
		enum placement_movement_model m;
	} modes[] = {
		{ PL_GRAN_LOOP, PL_MOVE_UPPER },
		{ PL_GRAN_OPERATOR, PL_MOVE_RESIDENT },
		{ PL_GRAN_BLOCK, PL_MOVE_UPPER },
	};
	struct placement_params p = placement_params_default();
	struct placement_result res = { 0 };
	uint64_t total_cpu[ELEMENTSOF(modes)] = { 0 }, reused_faults = 0, fresh_cpu = 0, fresh_faults = 0, cold_cpu = 0;
	int runs = argc > 1 ? atoi(argv[1]) : 7;
	double per_region[ELEMENTSOF(modes)][ELEMENTSOF(sizes)], per_region_cpu[ELEMENTSOF(modes)][ELEMENTSOF(sizes)];
	double block_bytes[ELEMENTSOF(modes)][ELEMENTSOF(sizes)] = { { 0 } }; /* a fresh result's block */

	if (runs < 1 || runs > 64) {
		fprintf(stderr, "runs must be 1..64\n");
		return 2;
	}
	printf("placement_run, 3 core counts (32, 64, 128) per call, median of %d runs\n", runs);
	printf("%-9s %-9s %-8s %10s %12s %12s %12s %10s %9s\n", "regions", "gran", "movement", "wall", "per region",
	       "CPU/region", "faults/run", "offloaded", "speedup");
	for (size_t s = 0; s < ELEMENTSOF(sizes); s++) {
		struct model m = { 0 };

		if (model_make(&m, sizes[s]) < 0) {
			fprintf(stderr, "out of memory\n");
			model_free(&m);
			return 1;
		}
		for (size_t k = 0; k < ELEMENTSOF(modes); k++) {
			struct placement_query q = { modes[k].g, modes[k].m, cores, ELEMENTSOF(cores) };
			uint64_t med, med_cpu, faults;
			size_t off;
			double sp;

			if (bench(&m, &p, &q, &res, false, runs, &med, &med_cpu, &faults, &off, &sp) < 0) {
				model_free(&m);
				return 1;
			}
			total_cpu[k] = med_cpu;
			struct placement_result fr = { 0 };
			struct pim_error err = { 0 };
			if (placement_run(m.r, m.n, &p, &q, &fr, &err) == 0)
				block_bytes[k][s] = (double)fr.mem_size / (double)sizes[s];
			placement_result_free(&fr);
			if (k == 0)
				reused_faults = faults;
			per_region[k][s] = (double)med / (double)sizes[s];
			per_region_cpu[k][s] = (double)med_cpu / (double)sizes[s];
			printf("%-9zu %-9s %-8s %7.2f ms %9.1f ns %9.1f ns %12llu %10zu %8.2fx\n", sizes[s],
			       placement_granularity_name(modes[k].g), placement_movement_model_name(modes[k].m),
			       (double)med / 1e6, per_region[k][s], per_region_cpu[k][s],
			       (unsigned long long)faults, off, sp);
		}
		if (s == 0) {
			/* the same first mode with the caches emptied before each call, as at 100k */
			struct placement_query q = { modes[0].g, modes[0].m, cores, ELEMENTSOF(cores) };
			uint64_t med, faults;
			size_t off;
			double sp;

			evict_caches(); /* its buffer's first touch is not a call's */
			if (bench(&m, &p, &q, &res, true, runs, &med, &cold_cpu, &faults, &off, &sp) < 0) {
				model_free(&m);
				return 1;
			}
			print_variant(sizes[s], &q, med, cold_cpu, faults, "caches emptied before each call");
		}
		if (s == ELEMENTSOF(sizes) - 1) {
			/* the same first mode with a fresh result every call: what reuse spares */
			struct placement_query q = { modes[0].g, modes[0].m, cores, ELEMENTSOF(cores) };
			uint64_t med;
			size_t off;
			double sp;

			if (bench(&m, &p, &q, NULL, false, runs, &med, &fresh_cpu, &fresh_faults, &off, &sp) < 0) {
				model_free(&m);
				return 1;
			}
			print_variant(sizes[s], &q, med, fresh_cpu, fresh_faults, "fresh result every call");
		}
		model_free(&m);
	}
	placement_result_free(&res);
	/* CPU time of this thread: on a shared machine the wall time includes other processes' turns */
	for (size_t k = 0; k < ELEMENTSOF(modes); k++) {
		double ratio = per_region_cpu[k][1] / per_region_cpu[k][0];
		double ms = (double)total_cpu[k] / 1e6;

		printf("placement %s/%s: per-region CPU cost 100k/10k %.2f (goal <= 1.20: %s); "
		       "100k regions, 3 core counts: %.1f ms CPU (goal <= 50 ms: %s); wall ratio %.2f; "
		       "result block %.0f / %.0f bytes a region (10k / 100k)\n",
		       placement_granularity_name(modes[k].g), placement_movement_model_name(modes[k].m), ratio,
		       ratio <= 1.2 ? "met" : "missed", ms, ms <= 50 ? "met" : "missed",
		       per_region[k][1] / per_region[k][0], block_bytes[k][0], block_bytes[k][1]);
	}
	printf("placement %s/%s: per-region CPU cost 100k / 10k with the caches emptied first: %.2f (the rest of "
	       "the gap above is the 10k run's data staying cached)\n", placement_granularity_name(modes[0].g),
	       placement_movement_model_name(modes[0].m),
	       (double)total_cpu[0] / (double)sizes[1] / ((double)cold_cpu / (double)sizes[0]));
	printf("placement 100k, reused vs fresh result: CPU %.2fx, page faults %llu vs %llu per call\n",
	       (double)total_cpu[0] / (double)fresh_cpu, (unsigned long long)reused_faults,
	       (unsigned long long)fresh_faults);
	return 0;
}
