/* SPDX-License-Identifier: MIT */
/*
 * bench_mx: quantization throughput against memory copy bandwidth (doc/design.md §5.1, §7;
 * JIT-Q's question is whether quantization keeps up with memory).
 *
 *   bench_mx [MiB of source (default 64)] [rounds (default 7)]
 *
 * 1. BF16 -> MX9, MX6 and MX4, row blocking, against memcpy of the same source bytes: on one
 *    core every SIMD path this CPU runs, then on all the CPUs this process may use
 *    (sched_getaffinity) the threaded quantizer (mx_quantize_tensor_mt()) against memcpy split
 *    over as many threads. Goal: the best path >= 1.0x per format, on one core and on all
 *    threads (the limit is higher: MX6 writes 0.75 bytes per element where a copy writes 2).
 * 2. The same from FP32 (the same source bytes: half the elements), best path. Same goal.
 * 3. MX6 from BF16 on one core through the portable C and the reference quantizer, for scale.
 * 4. BF16 -> each OCP format, row blocking, one core and all threads, against memcpy. Goal
 *    >= 0.5x.
 * 5. The fast path on the other sources, directions and formats, in Melem/s.
 *
 * Copies and quantizers run in alternating rounds in one process, so frequency and cache
 * state affect them alike. ratio = t(copy) / t(quantizer), both moving the same source
 * bytes. GB/s are from median times; "median" is the median over rounds of each round's
 * ratio (copy and quantizer close together in time, which matters on a shared machine), and
 * the verdict uses it; "min" and "max" are the extreme rounds; "best" is the ratio of the
 * fastest copy to the fastest quantizer round, the figure least disturbed by other processes
 * (shown, not judged); "cpu" is the median of the rounds' ratios of the process's CPU time
 * (all threads) for the copy and for the quantizer, which leaves out the time either spent
 * waiting for a core other processes held (shown, not judged). The load average is printed at
 * the start and the end. Every output is compared with
 * the reference quantizer before timing.
 */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "mx.h"
#include "mx_ocp.h"

#define MAX_ROUNDS 51
#define MAX_JOBS 8

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, unsigned n)
{
	qsort(v, n, sizeof *v, cmp_u64);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* memcpy split over threads, like mx_split_blocks() splits the quantizers. */
struct copy_job {
	uint8_t *dst;
	const uint8_t *src;
	size_t len;
};

static int copy_part(void *arg, size_t b0, size_t b1, struct pim_error *err)
{
	const struct copy_job *j = arg;
	memcpy(j->dst + b0 * 4096, j->src + b0 * 4096, (b1 - b0) * 4096);
	return 0;
}

static uint64_t copy_timed(unsigned threads, uint8_t *dst, const uint8_t *src, size_t len)
{
	struct copy_job j = { dst, src, len };
	uint64_t t0 = now_ns();
	if (threads == 1)
		memcpy(dst, src, len);
	else
		mx_split_blocks(threads, len / 4096, 1, copy_part, &j, NULL);
	uint64_t t = now_ns() - t0;
	__asm__ volatile("" : : "r"(dst) : "memory");
	return t;
}

/* One quantizer to time: an MX or an OCP format through one implementation. */
struct job {
	bool ocp;
	enum mx_format f;
	enum mx_ocp_format of;
	const char *name;
	enum mx_impl impl;
	double goal; /* 0: no goal, shown for comparison */
};

/* The source tensor of a section and its copy baseline. */
struct bench_src {
	enum mx_src t;
	const void *src;
	size_t rows, cols, bytes;
	uint8_t *dst, *out, *out_ref;
	unsigned rounds;
};

static size_t job_size(const struct job *j, size_t rows, size_t cols)
{
	return j->ocp ? mx_ocp_packed_size(j->of, rows, cols, MX_DIR_ROW)
		      : mx_packed_size(j->f, rows, cols, MX_DIR_ROW);
}

static int job_run(const struct job *j, unsigned threads, enum mx_impl impl,
		   const struct bench_src *s, size_t rows, uint8_t *out, struct pim_error *err)
{
	size_t len = job_size(j, rows, s->cols);
	if (j->ocp)
		return mx_ocp_quantize_tensor_mt(threads, impl, j->of, s->t, s->src, rows, s->cols,
						 MX_DIR_ROW, out, len, err);
	return mx_quantize_tensor_mt(threads, impl, j->f, s->t, s->src, rows, s->cols, MX_DIR_ROW,
				     out, len, err);
}

/* The job's output == the reference's, on the first rows (the reference is slow). */
static int job_verify(const struct job *j, unsigned threads, const struct bench_src *s)
{
	struct pim_error err = { 0 };
	size_t r = s->rows < 256 ? s->rows : 256;

	if (job_run(j, threads, j->impl, s, r, s->out, &err) < 0 ||
	    job_run(j, 1, MX_IMPL_REF, s, r, s->out_ref, &err) < 0) {
		fprintf(stderr, "bench_mx: %s: %s\n", j->name, err.msg);
		return -1;
	}
	if (memcmp(s->out, s->out_ref, job_size(j, r, s->cols)) != 0) {
		fprintf(stderr, "bench_mx: %s: fast and reference outputs differ\n", j->name);
		return -1;
	}
	return 0;
}

/* The process's CPU time (all its threads), ns. */
static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double median_ratio(const uint64_t *a, const uint64_t *b, unsigned rounds)
{
	double ratios[MAX_ROUNDS];

	for (unsigned i = 0; i < rounds; i++)
		ratios[i] = (double)a[i] / (double)(b[i] ? b[i] : 1);
	qsort(ratios, rounds, sizeof *ratios, cmp_d);
	return rounds % 2 ? ratios[rounds / 2] : (ratios[rounds / 2 - 1] + ratios[rounds / 2]) / 2;
}

/* One line: GB/s of source, the ratio's median and extremes, the verdict; 1 if missed.
 * tc, tq: wall times of the copy and the quantizer; cc, cq: their CPU times. */
static int verdict(const char *what, const uint64_t *tc, const uint64_t *tq, const uint64_t *cc,
		   const uint64_t *cq, unsigned rounds, size_t src_bytes, double goal)
{
	uint64_t c[MAX_ROUNDS], q[MAX_ROUNDS];
	double ratios[MAX_ROUNDS];

	for (unsigned i = 0; i < rounds; i++)
		ratios[i] = (double)tc[i] / (double)tq[i];
	memcpy(c, tc, rounds * sizeof *c);
	memcpy(q, tq, rounds * sizeof *q);
	qsort(ratios, rounds, sizeof *ratios, cmp_d);
	double r = rounds % 2 ? ratios[rounds / 2]
			      : (ratios[rounds / 2 - 1] + ratios[rounds / 2]) / 2;
	uint64_t cbest = c[0], qbest = q[0];
	for (unsigned i = 1; i < rounds; i++) {
		cbest = c[i] < cbest ? c[i] : cbest;
		qbest = q[i] < qbest ? q[i] : qbest;
	}
	printf("%-24s %8.2f %9.2f %7.3f %7.3f %7.3f %7.3f %7.3f   ", what,
	       src_bytes / (double)median(q, rounds), src_bytes / (double)median(c, rounds), r,
	       ratios[0], ratios[rounds - 1], (double)cbest / (double)qbest,
	       median_ratio(cc, cq, rounds));
	if (goal <= 0) {
		printf("(no goal)\n");
		return 0;
	}
	printf(">= %.2f  %s\n", goal, r >= goal ? "met" : "missed");
	return r < goal;
}

/*
 * Times jobs on threads (1 or all) in alternating rounds with a copy on as many threads, and
 * prints a line per job; missed counts the goals missed.
 */
static int measure(const char *title, unsigned threads, const struct bench_src *s,
		   const struct job *jobs, size_t njobs, int *missed)
{
	uint64_t tc[MAX_ROUNDS], tq[MAX_JOBS][MAX_ROUNDS], cc[MAX_ROUNDS], cq[MAX_JOBS][MAX_ROUNDS];
	struct pim_error err = { 0 };

	for (size_t i = 0; i < njobs; i++)
		if (job_verify(&jobs[i], threads, s) < 0)
			return -1;
	/* round 0 warms up (page tables, frequency) and is not counted */
	for (unsigned r = 0; r <= s->rounds; r++) {
		uint64_t c0 = cpu_ns(), c = copy_timed(threads, s->dst, s->src, s->bytes);
		if (r) {
			tc[r - 1] = c;
			cc[r - 1] = cpu_ns() - c0;
		}
		for (size_t i = 0; i < njobs; i++) {
			uint64_t p0 = cpu_ns(), t0 = now_ns();
			int k = job_run(&jobs[i], threads, jobs[i].impl, s, s->rows, s->out, &err);
			if (r) {
				tq[i][r - 1] = now_ns() - t0;
				cq[i][r - 1] = cpu_ns() - p0;
			}
			if (k < 0) {
				fprintf(stderr, "bench_mx: %s\n", err.msg);
				return -1;
			}
			__asm__ volatile("" : : "r"(s->out) : "memory");
		}
	}
	printf("%-24s %8s %9s %7s %7s %7s %7s %7s   %s\n", title, "GB/s", "copy GB/s", "median",
	       "min", "max", "best", "cpu", "goal");
	for (size_t i = 0; i < njobs; i++) {
		char name[48];
		enum mx_impl impl = jobs[i].impl;
		if (impl == MX_IMPL_AUTO) /* the OCP quantizers: AVX-512 or the reference */
			impl = mx_impl_best() == MX_IMPL_AVX512 ? MX_IMPL_AVX512 : MX_IMPL_REF;
		snprintf(name, sizeof name, "%s %s", jobs[i].name, mx_impl_name(impl));
		*missed += verdict(name, tc, tq[i], cc, cq[i], s->rounds, s->bytes, jobs[i].goal);
	}
	return 0;
}

static bool impl_runs(enum mx_impl impl)
{
	uint8_t b[32];
	uint16_t x[16] = { 0 };

	return mx_quantize_tensor_impl(impl, MX_FMT_MX6, MX_SRC_BF16, x, 1, 16, MX_DIR_ROW, b,
				       sizeof b, NULL) == 0;
}

/* Section 1 or 2: MX9/MX6/MX4 through the best path (goal 1.0x) and, where that is
 * AVX-512 and all is set, through AVX2 too; one core, then all threads. */
static int mx_formats(const struct bench_src *s, bool all, unsigned threads, int *missed)
{
	static const enum mx_format fmts[] = { MX_FMT_MX9, MX_FMT_MX6, MX_FMT_MX4 };
	enum mx_impl best = mx_impl_best();
	struct job jobs[MAX_JOBS];
	size_t n = 0;
	char title[40];

	for (size_t i = 0; i < ELEMENTSOF(fmts); i++)
		jobs[n++] = (struct job){ .f = fmts[i], .name = mx_format_name(fmts[i]),
					  .impl = best, .goal = 1.0 };
	if (all && best == MX_IMPL_AVX512 && impl_runs(MX_IMPL_AVX2))
		for (size_t i = 0; i < ELEMENTSOF(fmts); i++)
			jobs[n++] = (struct job){ .f = fmts[i], .name = mx_format_name(fmts[i]),
						  .impl = MX_IMPL_AVX2 };
	if (measure("one core", 1, s, jobs, n, missed) < 0)
		return -1;
	if (threads < 2) {
		printf("(one CPU allowed: no threaded figures)\n");
		return 0;
	}
	snprintf(title, sizeof title, "%u threads", threads);
	return measure(title, threads, s, jobs, n, missed);
}

static const struct job ocp_jobs[] = {
	{ true, 0, MX_OCP_FP8_E4M3, "mxfp8-e4m3", MX_IMPL_AUTO, 0.5 },
	{ true, 0, MX_OCP_FP8_E5M2, "mxfp8-e5m2", MX_IMPL_AUTO, 0.5 },
	{ true, 0, MX_OCP_FP6_E3M2, "mxfp6-e3m2", MX_IMPL_AUTO, 0.5 },
	{ true, 0, MX_OCP_FP6_E2M3, "mxfp6-e2m3", MX_IMPL_AUTO, 0.5 },
	{ true, 0, MX_OCP_FP4_E2M1, "mxfp4", MX_IMPL_AUTO, 0.5 },
	{ true, 0, MX_OCP_INT8, "mxint8", MX_IMPL_AUTO, 0.5 },
};

/*
 * The fast path on the other sources, directions and formats, in million elements per second
 * (medians), for the first 2^23 elements of the BF16 data (and their FP32 widening).
 */
static int other_cases(const uint16_t *b16, size_t rows, size_t cols, unsigned rounds)
{
	static const enum mx_format fmts[] = { MX_FMT_MX9, MX_FMT_MX6, MX_FMT_MX4 };
	size_t r = rows < 2048 ? rows : 2048, n = r * cols;
	_cleanup_(freep) float *f32 = malloc(n * sizeof(float));
	_cleanup_(freep) uint8_t *out = malloc(mx_packed_size(MX_FMT_MX9, r, cols, MX_DIR_ROW));
	struct pim_error err = { 0 };

	if (!f32 || !out) {
		fprintf(stderr, "bench_mx: out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		f32[i] = mx_bf16_to_float(b16[i]);
	printf("\n5. %s path, %zu x %zu, one core, Melem/s (median of %u)\n",
	       mx_impl_name(mx_impl_best()), r, cols, rounds);
	printf("%-16s %10s %10s %10s\n", "source, blocking", "mx9", "mx6", "mx4");
	for (int s = 0; s < 2; s++)
		for (int d = 0; d < 2; d++) {
			printf("%-16s", s ? (d ? "bf16, col" : "bf16, row") :
					    (d ? "fp32, col" : "fp32, row"));
			for (size_t fi = 0; fi < ELEMENTSOF(fmts); fi++) {
				uint64_t t[MAX_ROUNDS];
				for (unsigned k = 0; k < rounds; k++) {
					uint64_t t0 = now_ns();
					int ret = mx_quantize_tensor(
						fmts[fi], s ? MX_SRC_BF16 : MX_SRC_FP32,
						s ? (const void *)b16 : (const void *)f32, r, cols, d,
						out, mx_packed_size(fmts[fi], r, cols, d), &err);
					t[k] = now_ns() - t0;
					if (ret < 0) {
						fprintf(stderr, "bench_mx: %s\n", err.msg);
						return 1;
					}
				}
				printf(" %10.0f", n / (median(t, rounds) / 1e3));
			}
			printf("\n");
		}
	return 0;
}

/* The load average (other processes share the cores and the memory: read the figures with it). */
static void print_load(const char *when)
{
	char buf[128] = "";
	FILE *f = fopen("/proc/loadavg", "re");

	if (f) {
		if (!fgets(buf, sizeof buf, f))
			buf[0] = 0;
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = 0;
	printf("load average %s: %s\n", when, buf[0] ? buf : "unknown");
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
	unsigned rounds = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 7;
	unsigned threads = mx_threads_allowed();
	int missed = 0;

	if (mib == 0 || mib > 4096 || rounds == 0 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "usage: bench_mx [MiB 1..4096] [rounds 1..%d]\n", MAX_ROUNDS);
		return 2;
	}

	/* rows x 4096 BF16 elements: 8 KiB rows, a transformer-like reduction dimension. */
	size_t cols = 4096, bytes = mib << 20, rows = bytes / (cols * sizeof(uint16_t));
	size_t n = rows * cols, src_bytes = n * sizeof(uint16_t);
	/* MX9 (18/16 bytes an element) or MXFP8 (33/32), whichever is larger */
	size_t out_len = mx_packed_size(MX_FMT_MX9, rows, cols, MX_DIR_ROW);
	size_t ocp_len = mx_ocp_packed_size(MX_OCP_FP8_E4M3, rows, cols, MX_DIR_ROW);
	out_len = ocp_len > out_len ? ocp_len : out_len;
	_cleanup_(freep) uint16_t *src = malloc(src_bytes);
	_cleanup_(freep) float *f32 = malloc(src_bytes);
	_cleanup_(freep) uint8_t *dst = malloc(src_bytes);
	_cleanup_(freep) uint8_t *out = malloc(out_len);
	_cleanup_(freep) uint8_t *out_ref = malloc(out_len);

	if (rows == 0 || !src || !f32 || !dst || !out || !out_ref) {
		fprintf(stderr, "bench_mx: cannot allocate %zu MiB\n", mib);
		return 1;
	}
	/* Normal-ish values (sum of uniforms), 0.02 std like trained weights, as BF16; the FP32
	 * source is the first half of them, widened (the same bytes). */
	for (size_t i = 0; i < n; i++) {
		double s = 0;
		for (int k = 0; k < 4; k++)
			s += (double)(rnd() >> 11) / 9007199254740992.0 - 0.5;
		src[i] = mx_float_to_bf16((float)(s * 0.0346));
	}
	for (size_t i = 0; i < n / 2; i++)
		f32[i] = mx_bf16_to_float(src[i]);
	memset(dst, 0, src_bytes); /* fault every page in before timing */
	memset(out, 0, out_len);
	memset(out_ref, 0, out_len);

	struct bench_src b16 = { MX_SRC_BF16, src, rows, cols, src_bytes, dst, out, out_ref,
				 rounds };
	struct bench_src b32 = { MX_SRC_FP32, f32, rows / 2, cols, src_bytes, dst, out, out_ref,
				 rounds };

	print_load("at the start");
	printf("1. BF16 -> MX, row blocking, %zu x %zu (%zu MiB source), %u rounds, against memcpy "
	       "of the source; best path here: %s\n",
	       rows, cols, src_bytes >> 20, rounds, mx_impl_name(mx_impl_best()));
	if (mx_formats(&b16, true, threads, &missed) < 0)
		return 1;
	printf("\n2. FP32 -> MX, row blocking, %zu x %zu (%zu MiB source), against memcpy\n",
	       rows / 2, cols, src_bytes >> 20);
	if (mx_formats(&b32, false, threads, &missed) < 0)
		return 1;

	printf("\n3. BF16 -> MX6, one core, the portable paths\n");
	static const struct job slow[] = {
		{ false, MX_FMT_MX6, 0, "mx6", MX_IMPL_GENERIC, 0 },
		{ false, MX_FMT_MX6, 0, "mx6", MX_IMPL_REF, 0 },
	};
	if (measure("one core", 1, &b16, slow, ELEMENTSOF(slow), &missed) < 0)
		return 1;

	printf("\n4. BF16 -> OCP MX formats, row blocking, against memcpy\n");
	if (measure("one core", 1, &b16, ocp_jobs, ELEMENTSOF(ocp_jobs), &missed) < 0)
		return 1;
	if (threads > 1) {
		char title[40];
		snprintf(title, sizeof title, "%u threads", threads);
		if (measure(title, threads, &b16, ocp_jobs, ELEMENTSOF(ocp_jobs), &missed) < 0)
			return 1;
	}
	printf("\n%d of the goals above missed\n", missed);
	print_load("after sections 1-4");
	return other_cases(src, rows, cols, rounds);
}
