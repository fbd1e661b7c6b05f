/* SPDX-License-Identifier: MIT */
/*
 * bench_mx: quantization throughput against memory copy bandwidth (doc/design.md §5.1, §7;
 * JIT-Q's question is whether quantization keeps up with memory).
 *
 *   bench_mx [MiB of BF16 source (default 64)] [rounds (default 7)]
 *
 * 1. BF16 -> MX6, row blocking, one core, every implementation this CPU runs, against memcpy
 *    of the same source bytes. Goal: the best path >= 0.8x memcpy.
 * 2. BF16 -> each OCP format, row blocking, one core, against memcpy. Goal >= 0.5x.
 * 3. The same on all the CPUs this process may use (sched_getaffinity): the threaded
 *    quantizers (mx_quantize_tensor_mt(), mx_ocp_quantize_tensor_mt()) against the machine's
 *    copy bandwidth, measured as memcpy split over as many threads. Same goals.
 * 4. The fast path on the other sources, directions and formats, in Melem/s.
 *
 * Copies and quantizers run in alternating rounds in one process, so frequency and cache
 * state affect them alike. ratio = t(copy) / t(quantizer), both moving the same source
 * bytes. GB/s are from median times; "median" is the median over rounds of each round's
 * ratio (copy and quantizer close together in time, which matters on a shared machine), and
 * the verdict uses it; "best" is the ratio of the fastest rounds. Fast outputs are compared
 * with the reference before timing.
 */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "mx.h"
#include "mx_ocp.h"

#define MAX_ROUNDS 51

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

static double median_d(double *v, unsigned n)
{
	qsort(v, n, sizeof *v, cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t best(const uint64_t *v, unsigned n)
{
	uint64_t m = v[0];
	for (unsigned i = 1; i < n; i++)
		m = v[i] < m ? v[i] : m;
	return m;
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

/* One figure against a goal; returns 1 if missed. */
static int verdict(const char *what, const uint64_t *tc, const uint64_t *tq, unsigned rounds,
		   size_t src_bytes, double goal)
{
	uint64_t c[MAX_ROUNDS], q[MAX_ROUNDS];
	memcpy(c, tc, rounds * sizeof *c);
	memcpy(q, tq, rounds * sizeof *q);
	double ratios[MAX_ROUNDS];
	for (unsigned i = 0; i < rounds; i++)
		ratios[i] = (double)tc[i] / (double)tq[i];
	uint64_t mc = median(c, rounds), mq = median(q, rounds);
	double r = median_d(ratios, rounds), rb = (double)best(c, rounds) / (double)best(q, rounds);
	printf("%-26s %9.2f %9.2f %8.3f %8.3f   >= %.2f  %s\n", what, src_bytes / (double)mq,
	       src_bytes / (double)mc, r, rb, goal, r >= goal ? "met" : "missed");
	return r < goal;
}

static const char *const ratio_hdr = "%-26s %9s %9s %8s %8s   %s\n";

struct mx_case {
	bool ocp;
	enum mx_format f;
	enum mx_ocp_format of;
	const char *name;
	double goal;
};

static const struct mx_case cases[] = {
	{ false, MX_FMT_MX6, 0, "mx6", 0.8 },
	{ true, 0, MX_OCP_FP8_E4M3, "mxfp8-e4m3", 0.5 },
	{ true, 0, MX_OCP_FP8_E5M2, "mxfp8-e5m2", 0.5 },
	{ true, 0, MX_OCP_FP6_E3M2, "mxfp6-e3m2", 0.5 },
	{ true, 0, MX_OCP_FP6_E2M3, "mxfp6-e2m3", 0.5 },
	{ true, 0, MX_OCP_FP4_E2M1, "mxfp4", 0.5 },
	{ true, 0, MX_OCP_INT8, "mxint8", 0.5 },
};

static size_t case_size(const struct mx_case *c, size_t rows, size_t cols)
{
	return c->ocp ? mx_ocp_packed_size(c->of, rows, cols, MX_DIR_ROW)
		      : mx_packed_size(c->f, rows, cols, MX_DIR_ROW);
}

static int case_run(const struct mx_case *c, unsigned threads, enum mx_impl impl,
		    const uint16_t *src, size_t rows, size_t cols, uint8_t *out,
		    struct pim_error *err)
{
	size_t len = case_size(c, rows, cols);
	if (c->ocp)
		return mx_ocp_quantize_tensor_mt(threads, impl, c->of, MX_SRC_BF16, src, rows, cols,
						 MX_DIR_ROW, out, len, err);
	return mx_quantize_tensor_mt(threads, impl, c->f, MX_SRC_BF16, src, rows, cols,
				     MX_DIR_ROW, out, len, err);
}

/* Fast (threaded) output == reference, on the first rows (the reference is slow). */
static int case_verify(const struct mx_case *c, unsigned threads, const uint16_t *src,
		       size_t rows, size_t cols, uint8_t *a, uint8_t *b)
{
	struct pim_error err = { 0 };
	size_t r = rows < 256 ? rows : 256, len = case_size(c, r, cols);

	if (case_run(c, threads, MX_IMPL_AUTO, src, r, cols, a, &err) < 0 ||
	    case_run(c, 1, MX_IMPL_REF, src, r, cols, b, &err) < 0) {
		fprintf(stderr, "bench_mx: %s: %s\n", c->name, err.msg);
		return -1;
	}
	if (memcmp(a, b, len) != 0) {
		fprintf(stderr, "bench_mx: %s: fast and reference outputs differ\n", c->name);
		return -1;
	}
	return 0;
}

/* Sections 2 and 3: every case on threads (1 or all), against a copy on as many threads. */
static int formats(unsigned threads, const uint16_t *src, size_t rows, size_t cols,
		   uint8_t *dst, uint8_t *out, uint8_t *out2, unsigned rounds, int *missed)
{
	enum { N = ELEMENTSOF(cases) };
	uint64_t tc[MAX_ROUNDS], tq[N][MAX_ROUNDS];
	size_t src_bytes = rows * cols * sizeof(uint16_t);
	struct pim_error err = { 0 };

	for (size_t i = 0; i < N; i++)
		if (case_verify(&cases[i], threads, src, rows, cols, out, out2) < 0)
			return -1;
	for (unsigned r = 0; r < rounds; r++) {
		tc[r] = copy_timed(threads, dst, (const uint8_t *)src, src_bytes);
		for (size_t i = 0; i < N; i++) {
			uint64_t t0 = now_ns();
			int k = case_run(&cases[i], threads, MX_IMPL_AUTO, src, rows, cols, out, &err);
			tq[i][r] = now_ns() - t0;
			if (k < 0) {
				fprintf(stderr, "bench_mx: %s\n", err.msg);
				return -1;
			}
			__asm__ volatile("" : : "r"(out) : "memory");
		}
	}
	printf(ratio_hdr, "BF16 ->", "GB/s", "copy GB/s", "median", "best", "goal");
	for (size_t i = 0; i < N; i++) {
		char name[40];
		snprintf(name, sizeof name, "%s (%s)", cases[i].name,
			 cases[i].ocp && mx_impl_best() != MX_IMPL_AVX512 ? "ref" :
									     mx_impl_name(mx_impl_best()));
		*missed += verdict(name, tc, tq[i], rounds, src_bytes, cases[i].goal);
	}
	return 0;
}

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
	printf("\n%s path, %zu x %zu, one core, Melem/s (median of %u)\n",
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

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
	unsigned rounds = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 7;
	enum mx_impl impls[] = { MX_IMPL_AVX512, MX_IMPL_AVX2, MX_IMPL_GENERIC, MX_IMPL_REF };
	enum { N_IMPL = 4 };
	bool runs[N_IMPL];
	uint64_t t_copy[MAX_ROUNDS], t_q[N_IMPL][MAX_ROUNDS];
	struct pim_error err = { 0 };
	unsigned threads = mx_threads_allowed();
	int missed = 0;

	if (mib == 0 || mib > 4096 || rounds == 0 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "usage: bench_mx [MiB 1..4096] [rounds 1..%d]\n", MAX_ROUNDS);
		return 2;
	}

	/* rows x 4096 BF16 elements: 8 KiB rows, a transformer-like reduction dimension. */
	size_t cols = 4096, bytes = mib << 20, rows = bytes / (cols * sizeof(uint16_t));
	size_t n = rows * cols, src_bytes = n * sizeof(uint16_t);
	size_t out_len = mx_ocp_packed_size(MX_OCP_FP8_E4M3, rows, cols, MX_DIR_ROW);
	_cleanup_(freep) uint16_t *src = malloc(src_bytes);
	_cleanup_(freep) uint8_t *dst = malloc(src_bytes);
	_cleanup_(freep) uint8_t *out = malloc(out_len);
	_cleanup_(freep) uint8_t *out_ref = malloc(out_len);

	if (!src || !dst || !out || !out_ref || out_len == 0) {
		fprintf(stderr, "bench_mx: cannot allocate %zu MiB\n", mib);
		return 1;
	}
	/* Normal-ish values (sum of uniforms), 0.02 std like trained weights, as BF16. */
	for (size_t i = 0; i < n; i++) {
		double s = 0;
		for (int k = 0; k < 4; k++)
			s += (double)(rnd() >> 11) / 9007199254740992.0 - 0.5;
		src[i] = mx_float_to_bf16((float)(s * 0.0346));
	}
	memset(dst, 0, src_bytes); /* fault every page in before timing */
	memset(out, 0, out_len);
	memset(out_ref, 0, out_len);

	size_t mx6_len = mx_packed_size(MX_FMT_MX6, rows, cols, MX_DIR_ROW);
	for (unsigned i = 0; i < N_IMPL; i++) {
		uint8_t b[32];
		runs[i] = mx_quantize_tensor_impl(impls[i], MX_FMT_MX6, MX_SRC_BF16, src, 1, 16,
						  MX_DIR_ROW, b, sizeof b, NULL) == 0;
	}
	for (unsigned r = 0; r < rounds; r++) {
		t_copy[r] = copy_timed(1, dst, (const uint8_t *)src, src_bytes);
		for (unsigned i = 0; i < N_IMPL; i++) {
			if (!runs[i])
				continue;
			uint8_t *o = impls[i] == MX_IMPL_REF ? out_ref : out;
			uint64_t t0 = now_ns();
			int k = mx_quantize_tensor_impl(impls[i], MX_FMT_MX6, MX_SRC_BF16, src, rows,
							cols, MX_DIR_ROW, o, mx6_len, &err);
			t_q[i][r] = now_ns() - t0;
			if (k < 0) {
				fprintf(stderr, "bench_mx: %s\n", err.msg);
				return 1;
			}
			__asm__ volatile("" : : "r"(o) : "memory");
		}
	}
	if (memcmp(out, out_ref, mx6_len) != 0) {
		fprintf(stderr, "bench_mx: fast and reference outputs differ\n");
		return 1;
	}

	printf("1. BF16 -> MX6, row blocking, %zu x %zu (%zu MiB source, %zu MiB packed), "
	       "%u rounds, one core; best path here: %s\n",
	       rows, cols, src_bytes >> 20, mx6_len >> 20, rounds, mx_impl_name(mx_impl_best()));
	printf(ratio_hdr, "path", "GB/s", "copy GB/s", "median", "best", "goal");
	for (unsigned i = 0; i < N_IMPL; i++) {
		char name[32];
		if (!runs[i]) {
			printf("%-26s (this CPU cannot run it)\n", mx_impl_name(impls[i]));
			continue;
		}
		snprintf(name, sizeof name, "mx6 %s", mx_impl_name(impls[i]));
		if (impls[i] == mx_impl_best())
			missed += verdict(name, t_copy, t_q[i], rounds, src_bytes, 0.8);
		else
			verdict(name, t_copy, t_q[i], rounds, src_bytes, 0.0);
	}

	printf("\n2. BF16 -> every format, row blocking, one core, against memcpy\n");
	if (formats(1, src, rows, cols, dst, out, out_ref, rounds, &missed) < 0)
		return 1;
	printf("\n3. BF16 -> every format, row blocking, %u threads (the CPUs allowed), against "
	       "memcpy on %u threads\n",
	       threads, threads);
	if (formats(threads, src, rows, cols, dst, out, out_ref, rounds, &missed) < 0)
		return 1;
	printf("\n%d of the goals above missed\n", missed);
	return other_cases(src, rows, cols, rounds);
}
