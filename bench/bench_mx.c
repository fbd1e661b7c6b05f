/* SPDX-License-Identifier: MIT */
/*
 * bench_mx: BF16 -> MX6 row-blocked quantization throughput on one core, as a fraction of
 * memcpy bandwidth over the same source buffer (BRIEF §5.1; JIT-Q's question is whether
 * quantization keeps up with memory). memcpy and every quantizer run in alternating rounds
 * in the same process, so frequency and cache state affect them alike; medians are reported.
 *
 *   bench_mx [MiB of BF16 source (default 64)] [rounds (default 7)]
 *
 * ratio = t(memcpy) / t(quantizer), both moving the same source bytes; 1.0 would mean the
 * quantizer reads its input as fast as memcpy copies it.
 */
#include <math.h>
#include <string.h>

#include "mx.h"

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

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
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
	printf("\n%s path, %zu x %zu, Melem/s (median of %u)\n", mx_impl_name(mx_impl_best()),
	       r, cols, rounds);
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
	enum mx_impl impls[] = { MX_IMPL_AUTO, MX_IMPL_GENERIC, MX_IMPL_REF };
	enum { N_IMPL = 3 };
	uint64_t t_copy[MAX_ROUNDS], t_q[N_IMPL][MAX_ROUNDS];
	struct pim_error err = { 0 };

	if (mib == 0 || mib > 4096 || rounds == 0 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "usage: bench_mx [MiB 1..4096] [rounds 1..%d]\n", MAX_ROUNDS);
		return 2;
	}

	/* rows x 4096 BF16 elements: 8 KiB rows, a transformer-like reduction dimension. */
	size_t cols = 4096, bytes = mib << 20, rows = bytes / (cols * sizeof(uint16_t));
	size_t n = rows * cols, src_bytes = n * sizeof(uint16_t);
	size_t out_len = mx_packed_size(MX_FMT_MX6, rows, cols, MX_DIR_ROW);
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

	for (unsigned r = 0; r < rounds; r++) {
		uint64_t t0 = now_ns();
		memcpy(dst, src, src_bytes);
		t_copy[r] = now_ns() - t0;
		__asm__ volatile("" : : "r"(dst) : "memory");

		for (unsigned i = 0; i < N_IMPL; i++) {
			uint8_t *o = impls[i] == MX_IMPL_REF ? out_ref : out;
			t0 = now_ns();
			int k = mx_quantize_tensor_impl(impls[i], MX_FMT_MX6, MX_SRC_BF16, src, rows,
							cols, MX_DIR_ROW, o, out_len, &err);
			t_q[i][r] = now_ns() - t0;
			if (k < 0) {
				fprintf(stderr, "bench_mx: %s\n", err.msg);
				return 1;
			}
			__asm__ volatile("" : : "r"(o) : "memory");
		}
		if (memcmp(out, out_ref, out_len) != 0) {
			fprintf(stderr, "bench_mx: fast and reference outputs differ\n");
			return 1;
		}
	}

	uint64_t mc = median(t_copy, rounds);
	printf("BF16 -> MX6, row blocking, %zu x %zu (%zu MiB source, %zu MiB packed), "
	       "%u rounds, one core\n",
	       rows, cols, src_bytes >> 20, out_len >> 20, rounds);
	printf("%-16s %12s %12s %10s\n", "path", "median ms", "src GB/s", "vs memcpy");
	printf("%-16s %12.2f %12.2f %10.3f\n", "memcpy", mc / 1e6, src_bytes / (double)mc, 1.0);
	for (unsigned i = 0; i < N_IMPL; i++) {
		uint64_t t = median(t_q[i], rounds);
		char name[32];
		snprintf(name, sizeof name, "mx %s%s%s", mx_impl_name(impls[i]),
			 impls[i] == MX_IMPL_AUTO ? "=" : "",
			 impls[i] == MX_IMPL_AUTO ? mx_impl_name(mx_impl_best()) : "");
		printf("%-16s %12.2f %12.2f %10.3f\n", name, t / 1e6, src_bytes / (double)t,
		       (double)mc / (double)t);
	}
	return other_cases(src, rows, cols, rounds);
}
