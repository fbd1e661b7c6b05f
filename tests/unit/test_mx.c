/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/mx.c (doc/design.md §5.1): hand-worked blocks for MX9/MX6/MX4, the packed
 * layout of mx.h byte by byte, error bounds, row vs column blocking, and the fast paths
 * against the scalar reference bit for bit.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "mx.h"

#define N_FMT 3
static const enum mx_format all_fmt[N_FMT] = { MX_FMT_MX9, MX_FMT_MX6, MX_FMT_MX4 };

static float bits_f(uint32_t u)
{
	float x;
	memcpy(&x, &u, sizeof x);
	return x;
}

static uint32_t f_bits(float x)
{
	uint32_t u;
	memcpy(&u, &x, sizeof u);
	return u;
}

/* splitmix64: deterministic, so a failure reproduces. */
static uint64_t rng_state;
static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double rnd_unit(void) { return ((double)(rnd() >> 11) + 0.5) / 9007199254740992.0; }

static double rnd_normal(void)
{
	return sqrt(-2.0 * log(rnd_unit())) * cos(2.0 * M_PI * rnd_unit());
}

static void check_block(const struct mx_block *b, unsigned exp, unsigned micro, unsigned sign,
			const uint8_t mag[16])
{
	ck_assert_uint_eq(b->exp, exp);
	ck_assert_uint_eq(b->micro, micro);
	ck_assert_uint_eq(b->sign, sign);
	for (unsigned j = 0; j < 16; j++)
		ck_assert_msg(b->mag[j] == mag[j], "mag[%u] = %u, expected %u", j, b->mag[j],
			      mag[j]);
}

/* Whether this CPU runs an implementation (AVX-512 implies AVX2, see mx_impl_best()). */
static bool impl_runs(enum mx_impl impl)
{
	enum mx_impl best = mx_impl_best();

	if (impl == MX_IMPL_AVX512)
		return best == MX_IMPL_AVX512;
	if (impl == MX_IMPL_AVX2)
		return best == MX_IMPL_AVX512 || best == MX_IMPL_AVX2;
	return true;
}

/* Quantize one block through every path (block API, tensor ref/generic/avx2, FP32) and
 * require the same packed bytes. */
static void check_all_paths_f32(enum mx_format f, const float in[16], const struct mx_block *b)
{
	uint8_t want[MX_BLOCK_BYTES_MAX], got[MX_BLOCK_BYTES_MAX];
	size_t bb = mx_block_bytes(f);
	enum mx_impl impls[] = { MX_IMPL_REF, MX_IMPL_GENERIC, MX_IMPL_AVX2, MX_IMPL_AVX512 };

	mx_pack_block(f, b, want);
	for (size_t i = 0; i < ELEMENTSOF(impls); i++) {
		if (!impl_runs(impls[i]))
			continue;
		for (int dir = 0; dir < 2; dir++) {
			struct pim_error e = { 0 };
			size_t rows = dir == MX_DIR_ROW ? 1 : 16, cols = dir == MX_DIR_ROW ? 16 : 1;
			memset(got, 0xee, sizeof got);
			ck_assert_int_eq(mx_quantize_tensor_impl(impls[i], f, MX_SRC_FP32, in, rows,
								 cols, dir, got, bb, &e),
					 0);
			ck_assert_msg(memcmp(got, want, bb) == 0, "impl %s dir %d differs",
				      mx_impl_name(impls[i]), dir);
		}
	}
}

/*
 * Block A. E = 128 (3.0 = 1.1b * 2^1 is among the largest).
 *   MX6 (m = 4): step 2^(E-127-d+1-m) = 2^-2 = 0.25 for d = 0, 0.125 for d = 1.
 *   pair 0: 1.5 (e 127), 0.25 (e 125): both < 128 -> d = 1: M = 1.5/0.125 = 12, 0.25/0.125 = 2
 *   pair 1: 3.0 (e 128), -1.0: d = 0: M = 12, 4 (sign)
 *   pair 2: 2.125 = 8.5 steps -> tie, even down to 8; 2.375 = 9.5 -> tie, even up to 10; d = 0
 *   pair 3: 1.0625 = 8.5 steps of 0.125 -> 8; -1.1875 = 9.5 -> 10 (sign); both e 127: d = 1
 *   pair 4: 3.9375 = 15.75 -> 16 -> saturates at 15; 3.875 = 15.5 -> tie to even 16 -> 15; d = 0
 *   pair 5: subnormal 1e-40 and -2^-127 flush: M = 0, second keeps its sign; d = 1 (e 0 < 128)
 *   pair 6: 0.0625 = 0.5 steps of 0.125 -> tie to 0; 0.1875 = 1.5 -> tie to 2; d = 1
 *   pair 7: 0.5 (e 126) with -2.5 (e 128): not both below -> d = 0: M = 2, 10 (sign)
 *   micro = pairs 0,3,5,6 = 0b01101001 = 0x69; sign = elements 3,7,11,15 = 0x8888.
 */
static const float block_a[16] = { 1.5f,    0.25f,   3.0f,    -1.0f,   2.125f, 2.375f,
				   1.0625f, -1.1875f, 3.9375f, 3.875f,  1e-40f, -0x1p-127f,
				   0.0625f, 0.1875f, 0.5f,    -2.5f };

START_TEST(test_block_a_mx6)
{
	static const uint8_t mag[16] = { 12, 2, 12, 4, 8, 10, 8, 10, 15, 15, 0, 0, 0, 2, 2, 10 };
	static const float deq[16] = { 1.5f,  0.25f, 3.0f, -1.0f, 2.0f, 2.5f, 1.0f,  -1.25f,
				       3.75f, 3.75f, 0.0f, -0.0f, 0.0f, 0.25f, 0.5f, -2.5f };
	struct mx_block b;
	float out[16];

	ck_assert(fpclassify(block_a[10]) == FP_SUBNORMAL);
	ck_assert(fpclassify(block_a[11]) == FP_SUBNORMAL);
	mx_quantize_block(MX_FMT_MX6, block_a, &b);
	check_block(&b, 128, 0x69, 0x8888, mag);
	mx_dequantize_block(MX_FMT_MX6, &b, out);
	for (unsigned j = 0; j < 16; j++) {
		ck_assert_msg(f_bits(out[j]) == f_bits(deq[j]), "deq[%u] = %a, expected %a", j,
			      out[j], deq[j]);
	}
	check_all_paths_f32(MX_FMT_MX6, block_a, &b);
}
END_TEST

/*
 * Block A in MX9 (m = 7): steps 2^-5 (d = 0) and 2^-6 (d = 1); E, micro, signs as in MX6.
 *   M: 1.5/2^-6 = 96, 0.25/2^-6 = 16, 3/2^-5 = 96, 1/2^-5 = 32, 2.125/2^-5 = 68,
 *   2.375/2^-5 = 76, 1.0625/2^-6 = 68, 1.1875/2^-6 = 76, 3.9375/2^-5 = 126, 3.875/2^-5 = 124,
 *   0, 0, 0.0625/2^-6 = 4, 0.1875/2^-6 = 12, 0.5/2^-5 = 16, 2.5/2^-5 = 80 (all exact).
 */
START_TEST(test_block_a_mx9)
{
	static const uint8_t mag[16] = { 96, 16, 96, 32, 68, 76, 68, 76,
					 126, 124, 0, 0, 4, 12, 16, 80 };
	struct mx_block b;
	float out[16];

	mx_quantize_block(MX_FMT_MX9, block_a, &b);
	check_block(&b, 128, 0x69, 0x8888, mag);
	/* Every input but the flushed subnormals is representable: exact round trip. */
	mx_dequantize_block(MX_FMT_MX9, &b, out);
	for (unsigned j = 0; j < 16; j++)
		if (j != 10 && j != 11)
			ck_assert_float_eq(out[j], block_a[j]);
	ck_assert_uint_eq(f_bits(out[11]), 0x80000000u); /* -0.0 */
	check_all_paths_f32(MX_FMT_MX9, block_a, &b);
}
END_TEST

/*
 * Block A in MX4 (m = 2): steps 2^0 = 1 (d = 0) and 0.5 (d = 1).
 *   1.5/0.5 = 3; 0.25/0.5 = 0.5 tie -> 0; 3/1 = 3; 1 -> 1; 2.125 -> 2; 2.375 -> 2;
 *   1.0625/0.5 = 2.125 -> 2; 1.1875/0.5 = 2.375 -> 2; 3.9375 -> 4 saturates to 3;
 *   3.875 -> 4 -> 3; 0; 0; 0.0625/0.5 = 0.125 -> 0; 0.1875/0.5 = 0.375 -> 0;
 *   0.5/1 = 0.5 tie -> 0 (even, down); 2.5 tie -> 2 (even, down).
 */
START_TEST(test_block_a_mx4)
{
	static const uint8_t mag[16] = { 3, 0, 3, 1, 2, 2, 2, 2, 3, 3, 0, 0, 0, 0, 0, 2 };
	struct mx_block b;

	mx_quantize_block(MX_FMT_MX4, block_a, &b);
	check_block(&b, 128, 0x69, 0x8888, mag);
	check_all_paths_f32(MX_FMT_MX4, block_a, &b);
}
END_TEST

/*
 * MX4 ties rounding up, and the smallest E. Block: 3.0 (E = 128, step 1 for d = 0),
 *   pair 0: 3.0 -> 3, 1.5 = 1.5 steps -> tie to even 2 (up); d = 0
 *   pair 1: 0.75, 0.25 both below -> d = 1, step 0.5: 1.5 -> 2 (up), 0.5 -> 0 (down)
 *   pairs 2-7: zeros (e 0 < 128) -> d = 1; micro = 0b11111110 = 0xfe.
 */
START_TEST(test_block_mx4_ties_up)
{
	float in[16] = { 3.0f, 1.5f, 0.75f, 0.25f };
	static const uint8_t mag[16] = { 3, 2, 2, 0 };
	struct mx_block b;

	mx_quantize_block(MX_FMT_MX4, in, &b);
	check_block(&b, 128, 0xfe, 0, mag);
	check_all_paths_f32(MX_FMT_MX4, in, &b);
}
END_TEST

/*
 * MX9 ties and saturation. E = 127 (from 1.0), step 2^(127-127+1-7) = 2^-6 for d = 0.
 *   pair 0: 1.0 -> 64; 1 + 2^-7 = 64.5 steps -> tie, even down to 64       (d = 0)
 *   pair 1: 1 + 3*2^-7 = 65.5 -> 66 (up); the largest float below 2, (2 - 2^-23)/2^-6
 *           = 128 - 2^-17 -> 128 -> saturates at 127                       (d = 0)
 *   pair 2: -0.5 - 2^-8 (e 126) and 0.25 + 2^-8 (e 125): both below -> d = 1, step 2^-7:
 *           64.5 -> 64 (sign), 32.5 -> 32 (ties, even down)
 *   pair 3: 0.5 + 3*2^-8 = 65.5 steps -> 66; 2^-126 (smallest normal, e 1) -> 2^-119 steps
 *           -> 0; d = 1
 *   pairs 4-7: zero; -0.0 at element 15 keeps its sign bit. micro = 0b11111100.
 */
START_TEST(test_block_mx9_ties_saturation)
{
	float in[16] = { 1.0f,
			 1.0f + 0x1p-7f,
			 1.0f + 3 * 0x1p-7f,
			 bits_f(0x3fffffff),
			 -0.5f - 0x1p-8f,
			 0.25f + 0x1p-8f,
			 0.5f + 3 * 0x1p-8f,
			 FLT_MIN };
	static const uint8_t mag[16] = { 64, 64, 66, 127, 64, 32, 66, 0 };
	struct mx_block b;
	float out[16];

	in[15] = -0.0f;
	ck_assert_float_eq(in[3], nextafterf(2.0f, 0.0f));
	mx_quantize_block(MX_FMT_MX9, in, &b);
	check_block(&b, 127, 0xfc, 0x8010, mag);
	mx_dequantize_block(MX_FMT_MX9, &b, out);
	ck_assert_float_eq(out[3], 127 * 0x1p-6f); /* saturated: 1.984375 */
	ck_assert_float_eq(out[4], -0.5f);
	ck_assert_uint_eq(f_bits(out[15]), 0x80000000u);
	check_all_paths_f32(MX_FMT_MX9, in, &b);
}
END_TEST

/* A NaN or an Inf anywhere makes the whole block the canonical NaN block (mx.h). */
START_TEST(test_block_nan_inf)
{
	static const uint8_t zero[16] = { 0 };
	const uint32_t specials[] = { 0x7fc00000, 0xffc00001, 0x7f800001, 0x7f800000, 0xff800000 };

	for (unsigned fi = 0; fi < N_FMT; fi++)
		for (size_t s = 0; s < ELEMENTSOF(specials); s++)
			for (unsigned pos = 0; pos < 16; pos += 5) {
				float in[16], out[16];
				struct mx_block b;

				for (unsigned j = 0; j < 16; j++)
					in[j] = (j & 1 ? -1.0f : 1.0f) * (float)(j + 1);
				in[pos] = bits_f(specials[s]);
				mx_quantize_block(all_fmt[fi], in, &b);
				check_block(&b, 255, 0, 0, zero);
				mx_dequantize_block(all_fmt[fi], &b, out);
				for (unsigned j = 0; j < 16; j++)
					ck_assert_uint_eq(f_bits(out[j]), 0x7fc00000u);
				check_all_paths_f32(all_fmt[fi], in, &b);
			}

	/* Any block with exp 255 dequantizes to NaN, whatever its other fields hold. */
	struct mx_block junk = { .exp = 255, .micro = 0x5a, .sign = 0x1234, .mag = { 1, 2, 3 } };
	float out[16];
	mx_dequantize_block(MX_FMT_MX6, &junk, out);
	for (unsigned j = 0; j < 16; j++)
		ck_assert(isnan(out[j]));
}
END_TEST

/* All zeros (and all subnormals): E = 0, micro = 0, M = 0; signs of -0.0 kept. */
START_TEST(test_block_zero)
{
	static const uint8_t zero[16] = { 0 };
	float in[16] = { 0 }, out[16];
	struct mx_block b;

	in[3] = -0.0f;
	in[7] = 0x1p-149f;   /* smallest subnormal */
	in[8] = -0x1p-127f;  /* negative subnormal */
	for (unsigned fi = 0; fi < N_FMT; fi++) {
		mx_quantize_block(all_fmt[fi], in, &b);
		check_block(&b, 0, 0, (1u << 3) | (1u << 8), zero);
		mx_dequantize_block(all_fmt[fi], &b, out);
		for (unsigned j = 0; j < 16; j++)
			ck_assert_uint_eq(f_bits(out[j]), j == 3 || j == 8 ? 0x80000000u : 0u);
		check_all_paths_f32(all_fmt[fi], in, &b);
	}
}
END_TEST

/* Extreme exponents: E = 254 with saturation must not overflow to Inf on dequantization. */
START_TEST(test_block_extremes)
{
	float in[16] = { FLT_MAX, -FLT_MAX, 0x1p127f, FLT_MIN }, out[16];
	struct mx_block b;

	for (unsigned fi = 0; fi < N_FMT; fi++) {
		unsigned m = mx_mantissa_bits(all_fmt[fi]);
		mx_quantize_block(all_fmt[fi], in, &b);
		ck_assert_uint_eq(b.exp, 254);
		ck_assert_uint_eq(b.mag[0], (1u << m) - 1); /* FLT_MAX rounds up, saturates */
		ck_assert_uint_eq(b.mag[2], 1u << (m - 1));
		ck_assert_uint_eq(b.mag[3], 0);
		mx_dequantize_block(all_fmt[fi], &b, out);
		/* (2^m - 1) * 2^(254 - 127 + 1 - m) = 2^128 - 2^(128-m) */
		ck_assert_float_eq(out[0], ldexpf((float)((1u << m) - 1), 128 - (int)m));
		ck_assert_float_eq(out[1], -out[0]);
		ck_assert_float_eq(out[2], 0x1p127f);
		ck_assert(isfinite(out[0]));
		check_all_paths_f32(all_fmt[fi], in, &b);
	}
	/* Blocks below the normal range dequantize exactly to subnormals: the smallest scale is
	 * 2^(0 - 127 - 1 + 1 - 7) = 2^-134 (MX9, E = 0, d = 1); 127 * 2^-134 = 0x7f * 2^-134. */
	struct mx_block tiny = { .exp = 0, .micro = 1, .sign = 2, .mag = { 127, 1 } };
	mx_dequantize_block(MX_FMT_MX9, &tiny, out);
	ck_assert_uint_eq(f_bits(out[0]), 127u << 15); /* 127 * 2^-134 = 127 * 2^15 * 2^-149 */
	ck_assert_uint_eq(f_bits(out[1]), 0x80000000u | 1u << 15); /* -2^-134 */
}
END_TEST

/* BF16 input: widened exactly, then the same rules (block A is BF16-representable). */
START_TEST(test_block_bf16)
{
	static const uint8_t mag6[16] = { 12, 2, 12, 4, 8, 10, 8, 10, 15, 15, 0, 0, 0, 2, 2, 10 };
	uint16_t in[16];
	uint8_t got[MX_BLOCK_BYTES_MAX];
	struct mx_block b;
	struct pim_error e = { 0 };
	enum mx_impl impls[] = { MX_IMPL_REF, MX_IMPL_GENERIC, MX_IMPL_AVX2, MX_IMPL_AVX512 };

	ck_assert_float_eq(mx_bf16_to_float(0x3f80), 1.0f);
	ck_assert_float_eq(mx_bf16_to_float(0xc049), -3.140625f);
	ck_assert_float_eq(mx_bf16_to_float(0x0001), 0x1p-133f);
	ck_assert(isinf(mx_bf16_to_float(0xff80)));
	ck_assert(isnan(mx_bf16_to_float(0x7fc1)));
	ck_assert_uint_eq(mx_float_to_bf16(1.0f + 0x1p-8f), 0x3f80);          /* tie, even down */
	ck_assert_uint_eq(mx_float_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);      /* tie, even up */

	for (unsigned j = 0; j < 16; j++)
		in[j] = mx_float_to_bf16(block_a[j]);
	in[10] = 0x0001; /* BF16 subnormals flush too */
	in[11] = 0x8040; /* -2^-127 */
	for (unsigned j = 0; j < 16; j++)
		if (j != 10)
			ck_assert_float_eq(mx_bf16_to_float(in[j]), block_a[j]);

	for (size_t i = 0; i < ELEMENTSOF(impls); i++) {
		if (!impl_runs(impls[i]))
			continue;
		ck_assert_int_eq(mx_quantize_tensor_impl(impls[i], MX_FMT_MX6, MX_SRC_BF16, in, 1,
							 16, MX_DIR_ROW, got, sizeof got, &e),
				 0);
		mx_unpack_block(MX_FMT_MX6, got, &b);
		check_block(&b, 128, 0x69, 0x8888, mag6);
	}

	/* A BF16 NaN poisons its block only. */
	uint16_t two[32];
	for (unsigned j = 0; j < 32; j++)
		two[j] = 0x3f80; /* 1.0 */
	two[20] = 0x7fc0;
	uint8_t packed[2 * 12];
	ck_assert_int_eq(mx_quantize_tensor(MX_FMT_MX6, MX_SRC_BF16, two, 2, 16, MX_DIR_ROW, packed,
					    sizeof packed, &e),
			 0);
	ck_assert_uint_eq(packed[0], 127);
	ck_assert_uint_eq(packed[12], 255);
}
END_TEST

/* The packed layout of mx.h, byte by byte. */
/*
 * The paper kernel's reference (mx_quantize_block_trunc), MX6 (m = 4), by hand:
 *   1.0 (e 127, fraction 0) and 0.9375 (e 126, fraction 0x700000), rest 0: E = 127, pair 0
 *   d = 0: M0 = 0x800000 >> 20 = 8, M1 = 0xf00000 >> 21 = 7 (RNE: 7.5 -> 8). Pairs 1-7 have
 *   e = 0 < 127: d = 1, and 0x800000 >> (20 + 127 - 1) = 0.
 *   All zeros: E = 0, d = 0, the hidden bit is not cleared: M = 0x800000 >> 20 = 8 (RNE: 0).
 *   NaN (0x7fc00000) and 1.0: E = 255 kept, pair d = 0, M(NaN) = 0xc00000 >> 20 = 12,
 *   M(1.0) = 0x800000 >> (20 + 128) = 0.
 */
START_TEST(test_block_trunc)
{
	float in[16] = { 1.0f, 0.9375f };
	struct mx_block b, r;

	mx_quantize_block_trunc(MX_FMT_MX6, in, &b);
	mx_quantize_block(MX_FMT_MX6, in, &r);
	ck_assert_uint_eq(b.exp, 127);
	ck_assert_uint_eq(b.micro, 0xfe);
	ck_assert_uint_eq(b.mag[0], 8);
	ck_assert_uint_eq(b.mag[1], 7);
	ck_assert_uint_eq(r.mag[1], 8);
	for (unsigned j = 2; j < 16; j++)
		ck_assert_uint_eq(b.mag[j], 0);

	memset(in, 0, sizeof in);
	in[3] = -0.0f;
	mx_quantize_block_trunc(MX_FMT_MX6, in, &b);
	ck_assert_uint_eq(b.exp, 0);
	ck_assert_uint_eq(b.micro, 0);
	ck_assert_uint_eq(b.sign, 1u << 3);
	for (unsigned j = 0; j < 16; j++)
		ck_assert_uint_eq(b.mag[j], 8);

	memset(in, 0, sizeof in);
	in[0] = mx_f32_from_bits(0x7fc00000u);
	in[1] = 1.0f;
	mx_quantize_block_trunc(MX_FMT_MX6, in, &b);
	ck_assert_uint_eq(b.exp, 255);
	ck_assert_uint_eq(b.micro & 1, 0);
	ck_assert_uint_eq(b.mag[0], 12);
	ck_assert_uint_eq(b.mag[1], 0);

	uint8_t out[12];
	struct pim_error err;
	ck_assert_int_eq(mx_quantize_tensor_trunc(MX_FMT_MX6, MX_SRC_FP32, in, 1, 16, MX_DIR_ROW, out,
						  11, &err), -EINVAL);
	ck_assert_int_eq(mx_quantize_tensor_trunc(MX_FMT_MX6, MX_SRC_FP32, in, 1, 16, MX_DIR_ROW, out,
						  sizeof out, &err), 0);
	ck_assert_uint_eq(out[0], 255);
}
END_TEST

START_TEST(test_pack_layout)
{
	/*
	 * exp 0x80, micro 0xa5, element 0 negative with M 1, M 2, M 3, element 15 negative M 0.
	 * MX4 3-bit fields s<<2|M: f0 = 101b, f1 = 010b, f2 = 011b, f15 = 100b.
	 *   stream bits 0-8: 1,0,1, 0,1,0, 1,1,0 -> byte 2 = 0b11010101 = 0xd5, byte 3 = 0;
	 *   f15 sign = stream bit 45 + 2 = 47 -> byte 7 bit 7.
	 * MX6 5-bit fields s<<4|M: f0 = 10001b, f1 = 00010b, f2 = 00011b.
	 *   stream bits 0-15: 1,0,0,0,1, 0,1,0,0,0, 1,1,0,0,0, 0 -> 0x51, 0x0c;
	 *   f15 sign = stream bit 75 + 4 = 79 -> byte 11 bit 7.
	 * MX9 8-bit fields: 0x81, 0x02, 0x03, ..., byte 17 = 0x80.
	 */
	struct mx_block b = { .exp = 0x80, .micro = 0xa5, .sign = 0x8001, .mag = { 1, 2, 3 } };
	static const uint8_t want4[8] = { 0x80, 0xa5, 0xd5, 0x00, 0, 0, 0, 0x80 };
	static const uint8_t want6[12] = { 0x80, 0xa5, 0x51, 0x0c, 0, 0, 0, 0, 0, 0, 0, 0x80 };
	static const uint8_t want9[18] = { 0x80, 0xa5, 0x81, 0x02, 0x03, 0, 0, 0, 0,
					   0,    0,    0,    0,    0,    0, 0, 0, 0x80 };
	uint8_t got[MX_BLOCK_BYTES_MAX];
	struct mx_block back;

	ck_assert_uint_eq(mx_block_bytes(MX_FMT_MX4), 8);
	ck_assert_uint_eq(mx_block_bytes(MX_FMT_MX6), 12);
	ck_assert_uint_eq(mx_block_bytes(MX_FMT_MX9), 18);

	mx_pack_block(MX_FMT_MX4, &b, got);
	ck_assert_mem_eq(got, want4, 8);
	mx_pack_block(MX_FMT_MX6, &b, got);
	ck_assert_mem_eq(got, want6, 12);
	mx_pack_block(MX_FMT_MX9, &b, got);
	ck_assert_mem_eq(got, want9, 18);
	mx_unpack_block(MX_FMT_MX6, want6, &back);
	ck_assert_mem_eq(&back, &b, sizeof b);
}
END_TEST

START_TEST(test_pack_roundtrip)
{
	rng_state = 1;
	for (unsigned fi = 0; fi < N_FMT; fi++) {
		enum mx_format f = all_fmt[fi];
		unsigned m = mx_mantissa_bits(f);
		size_t bb = mx_block_bytes(f);
		for (unsigned it = 0; it < 20000; it++) {
			struct mx_block b, back;
			uint8_t bytes[MX_BLOCK_BYTES_MAX], again[MX_BLOCK_BYTES_MAX];
			uint64_t r = rnd();

			b.exp = (uint8_t)r;
			b.micro = (uint8_t)(r >> 8);
			b.sign = (uint16_t)(r >> 16);
			for (unsigned j = 0; j < 16; j++)
				b.mag[j] = (uint8_t)(rnd() & ((1u << m) - 1));
			mx_pack_block(f, &b, bytes);
			mx_unpack_block(f, bytes, &back);
			ck_assert_mem_eq(&back, &b, sizeof b);

			/* Dequantization is the formula, exactly, for any block (mx.h). */
			float deq[16];
			mx_dequantize_block(f, &b, deq);
			for (unsigned j = 0; j < 16 && b.exp != 255; j++) {
				int d = (b.micro >> (j / 2)) & 1;
				double want = ldexp(b.mag[j], b.exp - 127 - d + 1 - (int)m);
				if ((b.sign >> j) & 1)
					want = -want;
				ck_assert_msg((double)deq[j] == want && !signbit(deq[j]) == !signbit(want),
					      "exp %u d %d M %u: %a != %a", b.exp, d, b.mag[j], deq[j],
					      want);
			}

			/* Every packed bit means something: bytes -> block -> bytes is identity. */
			for (size_t k = 0; k < bb; k++)
				bytes[k] = (uint8_t)rnd();
			mx_unpack_block(f, bytes, &back);
			mx_pack_block(f, &back, again);
			ck_assert_mem_eq(again, bytes, bb);
		}
	}
}
END_TEST

START_TEST(test_names)
{
	enum mx_format f = MX_FMT_MX9;

	ck_assert_uint_eq(mx_mantissa_bits(MX_FMT_MX9), 7);
	ck_assert_uint_eq(mx_mantissa_bits(MX_FMT_MX6), 4);
	ck_assert_uint_eq(mx_mantissa_bits(MX_FMT_MX4), 2);
	ck_assert_str_eq(mx_format_name(MX_FMT_MX6), "mx6");
	ck_assert_int_eq(mx_format_from_name("mx4", &f), 0);
	ck_assert_int_eq(f, MX_FMT_MX4);
	ck_assert_int_eq(mx_format_from_name("MX6", &f), 0);
	ck_assert_int_eq(f, MX_FMT_MX6);
	ck_assert_int_eq(mx_format_from_name("mxfp8", &f), -EINVAL);
	ck_assert_int_eq(mx_format_from_name(NULL, &f), -EINVAL);
	ck_assert_int_eq(f, MX_FMT_MX6);
	ck_assert_str_eq(mx_format_name((enum mx_format)7), "invalid");
	ck_assert_uint_eq(mx_block_bytes((enum mx_format)7), 0);
}
END_TEST

/*
 * Error bound over random data. For an element with microexponent d the step is
 * q = 2^(E-127-d+1-m). Round-to-nearest gives |x - x^| <= q/2 unless M saturated at 2^m - 1,
 * where x < 2^m q so |x - x^| < q. Since the block max is >= 2^(E-127) and q <= 2^(E-126-m),
 * every element also satisfies |x - x^| <= max|x| * 2^(1-m) (and <= max|x| * 2^-m when not
 * saturated). The test also requires the q/2 bound to be nearly reached, so it is not vacuous.
 */
START_TEST(test_error_bound)
{
	enum { ROWS = 64, COLS = 1024 };
	static float src[ROWS * COLS], deq[ROWS * COLS];
	static uint8_t packed[ROWS * COLS / 16 * 18];
	struct pim_error e = { 0 };

	rng_state = 2;
	for (size_t i = 0; i < ROWS * COLS; i += 16) {
		double scale = ldexp(1.0, (int)(rnd() % 61) - 30);
		for (unsigned k = 0; k < 16; k++)
			src[i + k] = (float)(rnd_normal() * scale);
	}
	for (unsigned fi = 0; fi < N_FMT; fi++) {
		enum mx_format f = all_fmt[fi];
		unsigned m = mx_mantissa_bits(f);
		double worst_ratio = 0;

		ck_assert_int_eq(mx_quantize_tensor(f, MX_SRC_FP32, src, ROWS, COLS, MX_DIR_ROW,
						    packed, sizeof packed, &e),
				 0);
		ck_assert_int_eq(mx_dequantize_tensor(f, packed, sizeof packed, ROWS, COLS,
						      MX_DIR_ROW, deq, ROWS * COLS, &e),
				 0);
		for (size_t blk = 0; blk < ROWS * COLS / 16; blk++) {
			struct mx_block b;
			double maxabs = 0;

			mx_unpack_block(f, packed + blk * mx_block_bytes(f), &b);
			for (unsigned k = 0; k < 16; k++)
				maxabs = fmax(maxabs, fabs(src[blk * 16 + k]));
			ck_assert_uint_eq(b.exp, (f_bits((float)maxabs) >> 23) & 0xff);
			for (unsigned k = 0; k < 16; k++) {
				unsigned d = (b.micro >> (k / 2)) & 1;
				double q = ldexp(1.0, (int)b.exp - 127 - (int)d + 1 - (int)m);
				double x = src[blk * 16 + k], y = deq[blk * 16 + k];
				double err = fabs(x - y);
				bool sat = b.mag[k] == (1u << m) - 1;

				ck_assert(signbit(x) == signbit(y));
				ck_assert_msg(err <= maxabs * ldexp(1.0, 1 - (int)m),
					      "block %zu elem %u: err %g > max %g * 2^(1-m)", blk, k,
					      err, maxabs);
				if (sat) {
					ck_assert(err < q);
				} else {
					ck_assert_msg(err <= q / 2, "block %zu elem %u: err %g > q/2 %g",
						      blk, k, err, q / 2);
					ck_assert(err <= maxabs * ldexp(1.0, -(int)m));
					worst_ratio = fmax(worst_ratio, err / (q / 2));
				}
			}
		}
		ck_assert_msg(worst_ratio > 0.99, "%s: worst err/(q/2) only %g",
			      mx_format_name(f), worst_ratio);
	}
}
END_TEST

/* Column blocking of A == row blocking of A^T, byte for byte, for every impl and source. */
START_TEST(test_row_vs_col)
{
	enum { R = 32, C = 48 };
	float a[R * C], at[C * R], deq_col[R * C], deq_row[C * R];
	uint16_t ab[R * C], abt[C * R];
	uint8_t col[R * C / 16 * 18], row[R * C / 16 * 18];
	struct pim_error e = { 0 };
	enum mx_impl impls[] = { MX_IMPL_REF, MX_IMPL_GENERIC, MX_IMPL_AVX2, MX_IMPL_AVX512 };

	rng_state = 3;
	for (unsigned r = 0; r < R; r++)
		for (unsigned c = 0; c < C; c++) {
			float v = (float)(rnd_normal() * ldexp(1.0, (int)(rnd() % 9) - 4));
			a[r * C + c] = at[c * R + r] = v;
			ab[r * C + c] = abt[c * R + r] = mx_float_to_bf16(v);
		}
	for (unsigned fi = 0; fi < N_FMT; fi++) {
		enum mx_format f = all_fmt[fi];
		size_t sz = mx_packed_size(f, R, C, MX_DIR_COL);

		ck_assert_uint_eq(sz, R * C / 16 * mx_block_bytes(f));
		ck_assert_uint_eq(mx_packed_size(f, C, R, MX_DIR_ROW), sz);
		for (size_t i = 0; i < ELEMENTSOF(impls); i++) {
			if (!impl_runs(impls[i]))
				continue;
			for (int s = 0; s < 2; s++) {
				const void *src = s ? (const void *)ab : (const void *)a;
				const void *srct = s ? (const void *)abt : (const void *)at;
				memset(col, 0, sizeof col);
				memset(row, 1, sizeof row);
				ck_assert_int_eq(mx_quantize_tensor_impl(impls[i], f, s, src, R, C,
									 MX_DIR_COL, col, sz, &e),
						 0);
				ck_assert_int_eq(mx_quantize_tensor_impl(impls[i], f, s, srct, C, R,
									 MX_DIR_ROW, row, sz, &e),
						 0);
				ck_assert_msg(memcmp(col, row, sz) == 0, "%s %s src %d",
					      mx_format_name(f), mx_impl_name(impls[i]), s);
			}
		}
		/* Dequantization puts every element back where it came from. */
		ck_assert_int_eq(mx_dequantize_tensor(f, col, sz, R, C, MX_DIR_COL, deq_col,
						      R * C, &e),
				 0);
		ck_assert_int_eq(mx_dequantize_tensor(f, row, sz, C, R, MX_DIR_ROW, deq_row,
						      R * C, &e),
				 0);
		for (unsigned r = 0; r < R; r++)
			for (unsigned c = 0; c < C; c++)
				ck_assert_uint_eq(f_bits(deq_col[r * C + c]),
						  f_bits(deq_row[c * R + r]));
	}
	/* Column blocks are not row blocks: on this data the two packings differ. */
	uint8_t rowa[R * C / 16 * 12];
	ck_assert_int_eq(mx_quantize_tensor(MX_FMT_MX6, MX_SRC_FP32, a, R, C, MX_DIR_ROW, rowa,
					    sizeof rowa, &e),
			 0);
	ck_assert_int_eq(mx_quantize_tensor(MX_FMT_MX6, MX_SRC_FP32, a, R, C, MX_DIR_COL, col,
					    sizeof rowa, &e),
			 0);
	ck_assert(memcmp(rowa, col, sizeof rowa) != 0);
	/* Column block (rb = 1, c = 5) is block index 5 * (32/16) + 1 = 11: E of a[16..31][5]. */
	unsigned E = 0;
	for (unsigned r = 16; r < 32; r++)
	{
		unsigned er = (f_bits(a[r * C + 5]) >> 23) & 0xff;
		E = er > E ? er : E;
	}
	ck_assert_uint_eq(col[11 * 12], E);
}
END_TEST

/* Random FP32 bit patterns biased toward the interesting cases. */
static uint32_t rnd_f32_bits(uint32_t base_exp)
{
	uint64_t r = rnd();
	uint32_t mant = (uint32_t)r & 0x7fffff, s = (uint32_t)(r >> 23) & 1, e;

	switch ((r >> 24) & 63) {
	case 0:
		return (uint32_t)(r >> 32); /* anything: NaN, Inf, subnormal, ... */
	case 1:
		return s << 31; /* +-0 */
	case 2:
		return s << 31 | mant; /* subnormal (or zero) */
	case 3:
		return s << 31 | 0x7f800000u | ((r >> 40) & 1 ? mant : 0); /* Inf / NaN */
	default:
		break;
	}
	/* Exponents near the block's base so E, d and ties all vary. */
	unsigned down = (r >> 30) & 7;
	e = base_exp > down ? base_exp - down : 1;
	switch ((r >> 33) & 3) {
	case 0: /* exact ties for some m: a 1 then zeros in the low bits */
		mant = (mant & ~((1u << ((r >> 35) % 23)) - 1)) | (1u << ((r >> 35) % 23));
		mant &= 0x7fffff;
		break;
	case 1: /* all-ones mantissa: saturation after rounding up */
		mant = 0x7fffff;
		break;
	default:
		break;
	}
	return s << 31 | e << 23 | mant;
}

static void compare_impls(enum mx_src t, const void *src, size_t rows, size_t cols,
			  enum mx_dir dir)
{
	static uint8_t ref[1 << 20], fast[1 << 20];
	enum mx_impl impls[] = { MX_IMPL_GENERIC, MX_IMPL_AVX2, MX_IMPL_AVX512, MX_IMPL_AUTO };
	struct pim_error e = { 0 };

	for (unsigned fi = 0; fi < N_FMT; fi++) {
		enum mx_format f = all_fmt[fi];
		size_t sz = mx_packed_size(f, rows, cols, dir);

		ck_assert(sz > 0 && sz + 64 <= sizeof ref);
		ck_assert_int_eq(mx_quantize_tensor_ref(f, t, src, rows, cols, dir, ref, sz, &e), 0);
		for (size_t i = 0; i < ELEMENTSOF(impls); i++) {
			if (!impl_runs(impls[i]))
				continue;
			memset(fast, 0xa5, sz + 64); /* + a guard zone that must stay */
			ck_assert_int_eq(mx_quantize_tensor_impl(impls[i], f, t, src, rows, cols,
								 dir, fast, sz, &e),
					 0);
			for (size_t k = sz; k < sz + 64; k++)
				ck_assert_msg(fast[k] == 0xa5, "%s %s wrote past the end (byte %zu)",
					      mx_format_name(f), mx_impl_name(impls[i]), k - sz);
			if (memcmp(ref, fast, sz) != 0) {
				size_t k = 0;
				while (ref[k] == fast[k])
					k++;
				ck_abort_msg("%s %s src %d dir %d %zux%zu: byte %zu (block %zu) "
					     "ref %02x fast %02x",
					     mx_format_name(f), mx_impl_name(impls[i]), t, dir, rows,
					     cols, k, k / mx_block_bytes(f), ref[k], fast[k]);
			}
		}
	}
}

/* Shapes: row 256 x 1024; column 512 x 525 (32 x 16 + 8 + 5 columns: the AVX-512 path's 16, 8
 * and single-column steps, the AVX2 path's 8 and single ones).
 * Each test below thus feeds about 1.05 million values (both sources, both directions) to
 * every format and implementation. */
static const size_t shapes[2][2] = { { 256, 1024 }, { 512, 525 } };

START_TEST(test_fast_eq_ref_bits)
{
	enum { N = 512 * 525 };
	static uint32_t f32[N];
	static uint16_t b16[N];

	rng_state = 4 + (uint64_t)_i;
	for (int dir = 0; dir < 2; dir++) {
		size_t rows = shapes[dir][0], cols = shapes[dir][1];
		for (size_t i = 0; i < rows * cols; i++) {
			/* base exponent changes every 16 elements along memory; column blocks
			 * see 16 different bases, which is fine. */
			uint32_t base = (uint32_t)((i / 16 * 2654435761u) % 254) + 1;
			f32[i] = rnd_f32_bits(base);
			b16[i] = (uint16_t)(rnd_f32_bits(base) >> 16);
			if (_i == 1) /* plain random bits */
				f32[i] = (uint32_t)rnd(), b16[i] = (uint16_t)rnd();
		}
		compare_impls(MX_SRC_FP32, f32, rows, cols, dir);
		compare_impls(MX_SRC_BF16, b16, rows, cols, dir);
	}
	/* Odd block counts (the AVX-512 BF16 path does two blocks a step) and single blocks,
	 * on the same adversarial values; sizes are exact, so a write past the end shows. */
	static const size_t odd[][2] = { { 1, 16 }, { 3, 48 }, { 5, 80 }, { 1, 32 }, { 16, 1 } };
	for (size_t k = 0; k < ELEMENTSOF(odd); k++) {
		compare_impls(MX_SRC_FP32, f32, odd[k][0], odd[k][1], odd[k][1] == 1);
		compare_impls(MX_SRC_BF16, b16, odd[k][0], odd[k][1], odd[k][1] == 1);
	}
}
END_TEST

/*
 * Edge blocks for the fast paths, as FP32 bit patterns with shared exponent E (bf16: every value
 * a BF16, i.e. low 16 bits zero). Kinds, which the fast paths treat apart or where a narrowing
 * or a shortcut could go wrong:
 */
enum edge_kind {
	EDGE_ZERO,      /* +-0 only: E = 0 */
	EDGE_SUBNORMAL, /* subnormals and zeros only: E = 0, signs kept */
	EDGE_ANCHORED,  /* one element at E, the rest subnormal or zero (E near 16, where the
			 * fast paths stop testing for flushes) */
	EDGE_NAN,       /* a NaN somewhere */
	EDGE_INF,       /* an Inf somewhere */
	EDGE_MAX,       /* largest exponent, significands that round up past 2^m - 1 */
	EDGE_TIE9,      /* exact ties for m = 7, 4, 2, with d = 0 and 1, quotients odd and even */
	EDGE_TIE6,
	EDGE_TIE4,
	EDGE_TIE_NEAR,  /* ties plus or minus the lowest significand bit */
	EDGE_SPREAD,    /* exponents E, E-1, ... so d and the shifts differ per pair */
	EDGE_RANDOM,    /* random values at a random E */
	EDGE_KINDS      /* 12: over 8 x 12 blocks every kind meets every position in 4 and 8 */
};

static uint32_t edge_f32(unsigned s, unsigned e, uint32_t v24)
{
	return s << 31 | e << 23 | (v24 & 0x7fffff);
}

/* Elements 2 .. 15: ties of the format with m magnitude bits at E - k (d from the pair). */
static void edge_ties(uint32_t u[16], unsigned E, unsigned m, bool bf16, int near)
{
	for (unsigned j = 2; j < 16; j++) {
		unsigned k = (unsigned)(rnd() % 3), d = k > 0 && (j % 2 ? u[j - 1] >> 23 & 0xff : 0) < E;
		/* sh = 24 - m + k - d; a tie is q * 2^sh + 2^(sh-1), 2^23 <= it < 2^24 */
		unsigned sh = 24 - m + k - d;
		uint32_t qlo = 1u << (23 - sh), q = qlo + (uint32_t)(rnd() % qlo);
		uint32_t v = q << sh | 1u << (sh - 1);

		if (near)
			v += bf16 ? (uint32_t)near << 16 : (uint32_t)near;
		if (E < k + 1 || v < 0x800000 || v > 0xffffff) {
			u[j] = 0;
			continue;
		}
		u[j] = edge_f32((unsigned)(rnd() & 1), E - k, v);
	}
	/* elements 0 and 1 pin E and, for odd j above, make d = 1 possible */
	u[0] = edge_f32(0, E, 0x800000);
	u[1] = edge_f32(1, E > 1 ? E - 1 : E, 0xc00000);
}

static void edge_block(enum edge_kind kind, bool bf16, uint32_t u[16])
{
	static const unsigned near16[] = { 1, 2, 14, 15, 16, 17, 18 };
	unsigned E = 1 + (unsigned)(rnd() % 254), p = (unsigned)(rnd() % 16);

	for (unsigned j = 0; j < 16; j++)
		u[j] = (uint32_t)(rnd() & 1) << 31;
	switch (kind) {
	case EDGE_ZERO:
		break;
	case EDGE_SUBNORMAL:
		for (unsigned j = 0; j < 16; j++)
			u[j] |= (uint32_t)rnd() & 0x7fffff & (rnd() % 4 ? ~0u : 0);
		break;
	case EDGE_ANCHORED:
		E = near16[rnd() % ELEMENTSOF(near16)];
		for (unsigned j = 0; j < 16; j++)
			u[j] |= (uint32_t)rnd() & 0x7fffff & (rnd() % 4 ? ~0u : 0);
		u[p] = edge_f32(0, E, (uint32_t)rnd());
		break;
	case EDGE_NAN:
	case EDGE_INF:
		for (unsigned j = 0; j < 16; j++)
			u[j] = edge_f32((unsigned)(rnd() & 1), E, (uint32_t)rnd());
		u[p] = edge_f32((unsigned)(rnd() & 1), 255,
				kind == EDGE_INF ? 0 : 1u << 22 | (uint32_t)rnd() >> 10);
		break;
	case EDGE_MAX:
		for (unsigned j = 0; j < 16; j++)
			u[j] = edge_f32((unsigned)(rnd() & 1), 254 - (unsigned)(rnd() % 3) * (j % 2),
					rnd() % 2 ? 0xffffff : (uint32_t)rnd());
		break;
	case EDGE_TIE9:
	case EDGE_TIE6:
	case EDGE_TIE4:
		edge_ties(u, E, kind == EDGE_TIE9 ? 7 : kind == EDGE_TIE6 ? 4 : 2, bf16, 0);
		break;
	case EDGE_TIE_NEAR:
		edge_ties(u, E, (unsigned[]){ 7, 4, 2 }[rnd() % 3], bf16, rnd() % 2 ? 1 : -1);
		break;
	case EDGE_SPREAD:
		for (unsigned j = 0; j < 16; j++) {
			unsigned k = (j + p) % 16;
			u[j] = edge_f32((unsigned)(rnd() & 1), E > k ? E - k : 0, (uint32_t)rnd());
		}
		break;
	default:
		for (unsigned j = 0; j < 16; j++)
			u[j] = edge_f32((unsigned)(rnd() & 1), E > 6 ? E - (unsigned)(rnd() % 6) : E,
					(uint32_t)rnd());
		break;
	}
	if (bf16)
		for (unsigned j = 0; j < 16; j++)
			u[j] &= 0xffff0000u;
}

/*
 * Every implementation equals the reference on edge blocks, at every position in a step of the
 * fast paths, and on row tensors of 1 to 20 blocks (every partial last step); the data reach
 * the cases they are made for (E = 0, 15, 16, 254, 255 occur).
 */
START_TEST(test_fast_eq_ref_edges)
{
	enum { NB = 8 * EDGE_KINDS * 4 };
	static uint32_t f32[NB * 16];
	static uint16_t b16[NB * 16];
	static uint8_t ref[NB * 18];
	struct pim_error e = { 0 };
	bool seen[256] = { false };

	rng_state = 1000 + (uint64_t)_i;
	for (size_t b = 0; b < NB; b++) {
		uint32_t u[16];
		/* kind (b + b / 96) % 12: each kind at every position modulo 8 */
		enum edge_kind kind = (enum edge_kind)((b + b / (8 * EDGE_KINDS)) % EDGE_KINDS);
		edge_block(kind, false, f32 + 16 * b);
		edge_block(kind, true, u);
		for (unsigned j = 0; j < 16; j++)
			b16[16 * b + j] = (uint16_t)(u[j] >> 16);
	}
	compare_impls(MX_SRC_FP32, f32, 4 * EDGE_KINDS, 128, MX_DIR_ROW);
	compare_impls(MX_SRC_BF16, b16, 4 * EDGE_KINDS, 128, MX_DIR_ROW);
	compare_impls(MX_SRC_FP32, f32, 128, 4 * EDGE_KINDS, MX_DIR_COL);
	compare_impls(MX_SRC_BF16, b16, 128, 4 * EDGE_KINDS, MX_DIR_COL);
	for (size_t n = 1; n <= 20; n++) {
		compare_impls(MX_SRC_FP32, f32 + 16 * (n * 7 % 64), 1, 16 * n, MX_DIR_ROW);
		compare_impls(MX_SRC_BF16, b16 + 16 * (n * 7 % 64), 1, 16 * n, MX_DIR_ROW);
	}
	for (int s = 0; s < 2; s++) {
		ck_assert_int_eq(mx_quantize_tensor_ref(MX_FMT_MX6, s, s ? (void *)b16 : (void *)f32,
							1, NB * 16, MX_DIR_ROW, ref, sizeof ref,
							&e),
				 0);
		for (size_t b = 0; b < NB; b++)
			seen[ref[12 * b]] = true;
	}
	ck_assert(seen[0] && seen[15] && seen[16] && seen[254] && seen[255]);
}
END_TEST

/*
 * Every BF16 value in a block with every shared exponent from its own to 11 above it: for each
 * E = 1 .. 254 all the values of exponent E - 10 .. E (both signs, every significand), shuffled
 * so that pairs mix exponents (d = 0 and 1), fifteen a block beside an element that pins E at
 * a moving position. Each implementation must equal the reference bit for bit.
 */
START_TEST(test_fast_eq_ref_bf16_all)
{
	enum { PER_E = 11 * 256, BLOCKS_E = (PER_E + 14) / 15, GROUP = 16 };
	static uint16_t b16[GROUP * BLOCKS_E * 16];
	static uint16_t vals[PER_E];

	rng_state = 77;
	for (unsigned E0 = 1; E0 <= 254; E0 += GROUP) {
		size_t nb = 0;
		for (unsigned E = E0; E < E0 + GROUP && E <= 254; E++) {
			unsigned n = 0;
			for (unsigned e = E > 10 ? E - 10 : 0; e <= E; e++)
				for (unsigned v = 0; v < 256; v++) /* sign and significand */
					vals[n++] = (uint16_t)((v >> 7) << 15 | e << 7 | (v & 0x7f));
			for (unsigned k = n - 1; k > 0; k--) { /* Fisher-Yates */
				unsigned r = (unsigned)(rnd() % (k + 1));
				uint16_t t = vals[k];
				vals[k] = vals[r];
				vals[r] = t;
			}
			for (unsigned k = 0; k < n; k += 15, nb++) {
				uint16_t *blk = b16 + 16 * nb;
				unsigned pin = (unsigned)(nb % 16);
				for (unsigned j = 0, i = k; j < 16; j++)
					blk[j] = j == pin ? (uint16_t)(E << 7 | (rnd() & 0x807f))
					       : i < n	  ? vals[i++]
							  : 0;
			}
		}
		compare_impls(MX_SRC_BF16, b16, 1, nb * 16, MX_DIR_ROW);
	}
}
END_TEST

/*
 * A large MX4 output, which the AVX-512 rows write with non-temporal stores from the first
 * 64-byte line on (MX_STREAM_MIN: 4 MiB): equal to the reference at output addresses on a line,
 * 8 bytes past one (a head of blocks stored as usual first) and 4 past one (no streaming), with
 * a partial last step, and nothing written outside the output.
 */
START_TEST(test_fast_eq_ref_stream)
{
	const size_t nb = ((size_t)4 << 20) / 8 + 13, n = nb * 16, sz = nb * 8;
	static const size_t offs[] = { 0, 8, 24, 4 };
	struct pim_error e = { 0 };
	uint32_t *f32 = malloc(n * sizeof *f32);
	uint16_t *b16 = malloc(n * sizeof *b16);
	uint8_t *ref = malloc(sz), *buf = malloc(sz + 256);

	ck_assert(f32 && b16 && ref && buf);
	rng_state = 99;
	for (size_t i = 0; i < n; i++) {
		uint32_t base = (uint32_t)((i / 16 * 2654435761u) % 254) + 1;
		f32[i] = rnd_f32_bits(base);
		b16[i] = (uint16_t)(rnd_f32_bits(base) >> 16);
	}
	for (int t = 0; t < 2; t++) {
		const void *src = t ? (const void *)b16 : (const void *)f32;
		ck_assert_int_eq(mx_quantize_tensor_ref(MX_FMT_MX4, t, src, 1, n, MX_DIR_ROW, ref, sz,
							&e),
				 0);
		for (size_t k = 0; k < ELEMENTSOF(offs); k++) {
			/* buf + 64 is on a line when malloc aligns to 64; else the offsets still
			 * differ in their alignment */
			uint8_t *base = buf + 64 - (uintptr_t)buf % 64, *o = base + offs[k];
			memset(buf, 0xa5, sz + 256);
			ck_assert_int_eq(mx_quantize_tensor(MX_FMT_MX4, t, src, 1, n, MX_DIR_ROW, o,
							    sz, &e),
					 0);
			ck_assert_msg(memcmp(o, ref, sz) == 0, "src %d offset %zu differs", t, offs[k]);
			for (uint8_t *p = buf; p < o; p++)
				ck_assert_msg(*p == 0xa5, "src %d offset %zu: wrote before the output", t,
					      offs[k]);
			for (uint8_t *p = o + sz; p < buf + sz + 256; p++)
				ck_assert_msg(*p == 0xa5, "src %d offset %zu: wrote past the output", t,
					      offs[k]);
		}
	}
	free(f32);
	free(b16);
	free(ref);
	free(buf);
}
END_TEST

START_TEST(test_fast_eq_ref_normal)
{
	enum { N = 512 * 525 };
	static float f32[N];
	static uint16_t b16[N];

	rng_state = 10;
	for (int dir = 0; dir < 2; dir++) {
		size_t rows = shapes[dir][0], cols = shapes[dir][1];
		for (size_t i = 0; i < rows * cols; i++) {
			f32[i] = (float)(rnd_normal() * 0.02);
			b16[i] = mx_float_to_bf16((float)rnd_normal());
		}
		compare_impls(MX_SRC_FP32, f32, rows, cols, dir);
		compare_impls(MX_SRC_BF16, b16, rows, cols, dir);
	}
}
END_TEST

START_TEST(test_errors)
{
	float src[64 * 16] = { 0 }, out[64 * 16];
	uint8_t buf[64 * 18];
	struct pim_error e = { 0 };

	/* Row blocking needs cols % 16 == 0. */
	ck_assert_int_eq(mx_quantize_tensor(MX_FMT_MX6, MX_SRC_FP32, src, 16, 24, MX_DIR_ROW, buf,
					    sizeof buf, &e),
			 -EINVAL);
	ck_assert_int_eq(e.code, -EINVAL);
	ck_assert_msg(strstr(e.msg, "row blocking needs cols to be a multiple of 16, got 16x24"),
		      "%s", e.msg);
	/* Column blocking needs rows % 16 == 0 (16x24 is fine for it). */
	ck_assert_int_eq(mx_quantize_tensor(MX_FMT_MX6, MX_SRC_FP32, src, 24, 16, MX_DIR_COL, buf,
					    sizeof buf, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "column blocking needs rows to be a multiple of 16, got 24x16"),
		      "%s", e.msg);
	ck_assert_int_eq(mx_quantize_tensor(MX_FMT_MX6, MX_SRC_FP32, src, 16, 24, MX_DIR_COL, buf,
					    sizeof buf, &e),
			 0);
	ck_assert_int_eq(mx_quantize_tensor_ref(MX_FMT_MX9, MX_SRC_BF16, src, 0, 16, MX_DIR_ROW,
						buf, sizeof buf, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "empty tensor 0x16"), "%s", e.msg);

	/* Output too small: 4 x 32 in MX9 = 8 blocks = 144 bytes. */
	ck_assert_uint_eq(mx_packed_size(MX_FMT_MX9, 4, 32, MX_DIR_ROW), 144);
	ck_assert_int_eq(mx_quantize_tensor(MX_FMT_MX9, MX_SRC_FP32, src, 4, 32, MX_DIR_ROW, buf,
					    143, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "output buffer too small for mx9 of 4x32: 143 bytes, need 144"),
		      "%s", e.msg);
	ck_assert_int_eq(mx_quantize_tensor(MX_FMT_MX9, MX_SRC_FP32, src, 4, 32, MX_DIR_ROW, buf,
					    144, &e),
			 0);

	/* Bad enums and NULL buffers. */
	ck_assert_int_eq(mx_quantize_tensor((enum mx_format)9, MX_SRC_FP32, src, 16, 16,
					    MX_DIR_ROW, buf, sizeof buf, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "invalid MX format 9"), "%s", e.msg);
	ck_assert_int_eq(mx_quantize_tensor(MX_FMT_MX4, (enum mx_src)5, src, 16, 16, MX_DIR_ROW,
					    buf, sizeof buf, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "invalid source type 5"), "%s", e.msg);
	ck_assert_int_eq(mx_quantize_tensor(MX_FMT_MX4, MX_SRC_FP32, src, 16, 16, (enum mx_dir)2,
					    buf, sizeof buf, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "invalid blocking direction 2"), "%s", e.msg);
	ck_assert_int_eq(mx_quantize_tensor(MX_FMT_MX4, MX_SRC_FP32, src, 16, 16, MX_DIR_ROW,
					    NULL, sizeof buf, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "NULL output buffer"), "%s", e.msg);
	ck_assert_int_eq(mx_quantize_tensor_impl((enum mx_impl)42, MX_FMT_MX4, MX_SRC_FP32, src,
						 16, 16, MX_DIR_ROW, buf, sizeof buf, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "invalid MX implementation 42"), "%s", e.msg);
	if (!impl_runs(MX_IMPL_AVX512)) {
		ck_assert_int_eq(mx_quantize_tensor_impl(MX_IMPL_AVX512, MX_FMT_MX4, MX_SRC_FP32,
							 src, 16, 16, MX_DIR_ROW, buf, sizeof buf,
							 &e),
				 -ENOTSUP);
		ck_assert_msg(strstr(e.msg, "needs a CPU with AVX-512"), "%s", e.msg);
	}
	if (!impl_runs(MX_IMPL_AVX2)) {
		ck_assert_int_eq(mx_quantize_tensor_impl(MX_IMPL_AVX2, MX_FMT_MX4, MX_SRC_FP32, src,
							 16, 16, MX_DIR_ROW, buf, sizeof buf, &e),
				 -ENOTSUP);
		ck_assert_msg(strstr(e.msg, "needs a CPU with AVX2"), "%s", e.msg);
	}
	/* err may be NULL. */
	ck_assert_int_eq(mx_quantize_tensor(MX_FMT_MX4, MX_SRC_FP32, src, 16, 15, MX_DIR_ROW, buf,
					    sizeof buf, NULL),
			 -EINVAL);

	/* Overflow: the size computations must not wrap. */
	ck_assert_uint_eq(mx_packed_size(MX_FMT_MX6, SIZE_MAX / 2, 32, MX_DIR_ROW), 0);
	ck_assert_uint_eq(mx_packed_size(MX_FMT_MX6, (size_t)1 << 62, 16, MX_DIR_COL), 0);
	ck_assert_int_eq(mx_quantize_tensor(MX_FMT_MX6, MX_SRC_FP32, src, (size_t)1 << 60, 16,
					    MX_DIR_ROW, buf, sizeof buf, &e),
			 -EOVERFLOW);
	ck_assert_msg(strstr(e.msg, "too large"), "%s", e.msg);
	ck_assert_uint_eq(mx_packed_size(MX_FMT_MX6, 16, 15, MX_DIR_ROW), 0);
	ck_assert_uint_eq(mx_packed_size(MX_FMT_MX6, 16, 15, MX_DIR_COL), 15 * 12);

	/* Dequantization checks its input length and output count. */
	ck_assert_int_eq(mx_dequantize_tensor(MX_FMT_MX6, buf, 11, 1, 16, MX_DIR_ROW, out, 16,
					      &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "packed mx6 input too short for 1x16: 11 bytes, need 12"),
		      "%s", e.msg);
	ck_assert_int_eq(mx_dequantize_tensor(MX_FMT_MX6, buf, 12, 1, 16, MX_DIR_ROW, out, 15,
					      &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "output too small for 1x16: 15 elements, need 16"), "%s",
		      e.msg);
	ck_assert_int_eq(mx_dequantize_tensor(MX_FMT_MX6, buf, 12, 16, 1, MX_DIR_ROW, out, 16,
					      &e),
			 -EINVAL);
}
END_TEST

/* ---- threads ---------------------------------------------------------------------------- */

struct split_rec {
	unsigned hits[1000];
	unsigned calls;
	size_t fail_block; /* the range holding it fails; SIZE_MAX: none */
};

static int split_fn(void *arg, size_t b0, size_t b1, struct pim_error *err)
{
	struct split_rec *r = arg;

	__atomic_fetch_add(&r->calls, 1, __ATOMIC_RELAXED);
	for (size_t b = b0; b < b1; b++)
		r->hits[b]++; /* ranges are disjoint: no two threads touch one entry */
	if (r->fail_block >= b0 && r->fail_block < b1)
		return err_set(err, -EIO, "range %zu..%zu failed", b0, b1);
	return 0;
}

/* Ranges cover [0, n) exactly once; their count follows threads and min_blocks. */
START_TEST(test_split_blocks)
{
	static const struct {
		unsigned threads;
		size_t n, min, parts;
	} cases[] = { { 4, 10, 1, 4 },	  { 3, 100, 40, 2 },   { 5, 5, 10, 1 },
		      { 200, 1000, 1, MX_THREADS_MAX }, { 1, 1000, 1, 1 }, { 7, 1000, 0, 7 },
		      { 2, 0, 1, 1 } };
	struct pim_error e = { 0 };

	ck_assert_uint_ge(mx_threads_allowed(), 1);
	ck_assert_uint_le(mx_threads_allowed(), MX_THREADS_MAX);
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		static struct split_rec r;
		memset(&r, 0, sizeof r);
		r.fail_block = SIZE_MAX;
		ck_assert_int_eq(mx_split_blocks(cases[i].threads, cases[i].n, cases[i].min, split_fn,
						 &r, &e),
				 0);
		ck_assert_uint_eq(r.calls, cases[i].parts);
		for (size_t b = 0; b < cases[i].n; b++)
			ck_assert_msg(r.hits[b] == 1, "case %zu block %zu: %u hits", i, b, r.hits[b]);
	}
	/* threads 0: the allowed CPUs */
	static struct split_rec r;
	memset(&r, 0, sizeof r);
	r.fail_block = SIZE_MAX;
	ck_assert_int_eq(mx_split_blocks(0, 1000, 1, split_fn, &r, &e), 0);
	ck_assert_uint_eq(r.calls, mx_threads_allowed());
	/* A failing range's error comes back, the others still ran. */
	memset(&r, 0, sizeof r);
	r.fail_block = 777;
	ck_assert_int_eq(mx_split_blocks(4, 1000, 1, split_fn, &r, &e), -EIO);
	ck_assert_msg(strstr(e.msg, "range 750..1000 failed"), "%s", e.msg);
	for (size_t b = 0; b < 1000; b++)
		ck_assert_uint_eq(r.hits[b], 1);
}
END_TEST

/* Threaded quantization is byte-identical to one thread, for every format, source and
 * implementation, on adversarial values; argument errors are the whole tensor's. */
START_TEST(test_mt_eq_single)
{
	enum { R = 64, C = 16384 + 16 }; /* 65600 blocks: 4 ranges of >= 16384, uneven */
	static uint32_t f32[R * C];
	static uint16_t b16[R * C];
	static uint8_t one[R * C / 16 * 18], many[R * C / 16 * 18 + 64];
	enum mx_impl impls[] = { MX_IMPL_GENERIC, MX_IMPL_AVX2, MX_IMPL_AVX512, MX_IMPL_AUTO };
	struct pim_error e = { 0 };

	rng_state = 99;
	for (size_t i = 0; i < (size_t)R * C; i++) {
		uint32_t base = (uint32_t)((i / 16 * 2654435761u) % 254) + 1;
		f32[i] = rnd_f32_bits(base);
		b16[i] = (uint16_t)(rnd_f32_bits(base) >> 16);
	}
	for (unsigned fi = 0; fi < N_FMT; fi++)
		for (int s = 0; s < 2; s++)
			for (size_t i = 0; i < ELEMENTSOF(impls); i++) {
				enum mx_format f = all_fmt[fi];
				const void *src = s ? (const void *)b16 : (const void *)f32;
				size_t sz = mx_packed_size(f, R, C, MX_DIR_ROW);
				if (!impl_runs(impls[i]))
					continue;
				ck_assert_int_eq(mx_quantize_tensor_impl(impls[i], f, s, src, R, C,
									 MX_DIR_ROW, one, sz, &e),
						 0);
				for (unsigned th = 2; th <= 5; th += 3) {
					memset(many, 0x5a, sz + 64);
					ck_assert_int_eq(mx_quantize_tensor_mt(th, impls[i], f, s, src, R,
									       C, MX_DIR_ROW, many, sz,
									       &e),
							 0);
					ck_assert_msg(memcmp(one, many, sz) == 0, "%s %s src %d, %u threads",
						      mx_format_name(f), mx_impl_name(impls[i]), s, th);
					for (size_t k = sz; k < sz + 64; k++)
						ck_assert_uint_eq(many[k], 0x5a);
				}
			}
	/* Column blocking (one thread) through the same entry point. */
	size_t sz = mx_packed_size(MX_FMT_MX6, R, C, MX_DIR_COL);
	ck_assert_int_eq(mx_quantize_tensor_ref(MX_FMT_MX6, MX_SRC_BF16, b16, R, C, MX_DIR_COL, one,
						sz, &e),
			 0);
	ck_assert_int_eq(mx_quantize_tensor_mt(0, MX_IMPL_AUTO, MX_FMT_MX6, MX_SRC_BF16, b16, R, C,
					       MX_DIR_COL, many, sz, &e),
			 0);
	ck_assert(memcmp(one, many, sz) == 0);
	/* Errors name the whole tensor, not a range. */
	sz = mx_packed_size(MX_FMT_MX6, R, C, MX_DIR_ROW);
	ck_assert_int_eq(mx_quantize_tensor_mt(4, MX_IMPL_AUTO, MX_FMT_MX6, MX_SRC_BF16, b16, R, C,
					       MX_DIR_ROW, many, sz - 1, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "too small for mx6 of 64x16400"), "%s", e.msg);
	ck_assert_int_eq(mx_quantize_tensor_mt(4, MX_IMPL_AUTO, MX_FMT_MX6, (enum mx_src)5, b16, R,
					       C, MX_DIR_ROW, many, sz, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "invalid source type 5"), "%s", e.msg);
	ck_assert_int_eq(mx_quantize_tensor_mt(4, (enum mx_impl)42, MX_FMT_MX6, MX_SRC_BF16, b16, R,
					       C, MX_DIR_ROW, many, sz, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "invalid MX implementation 42"), "%s", e.msg);
}
END_TEST

static Suite *mx_suite(void)
{
	Suite *s = suite_create("mx");
	TCase *tc;

	tc = tcase_create("blocks");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_block_a_mx6);
	tcase_add_test(tc, test_block_a_mx9);
	tcase_add_test(tc, test_block_a_mx4);
	tcase_add_test(tc, test_block_mx4_ties_up);
	tcase_add_test(tc, test_block_mx9_ties_saturation);
	tcase_add_test(tc, test_block_nan_inf);
	tcase_add_test(tc, test_block_zero);
	tcase_add_test(tc, test_block_extremes);
	tcase_add_test(tc, test_block_bf16);
	tcase_add_test(tc, test_block_trunc);
	suite_add_tcase(s, tc);

	tc = tcase_create("layout");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_pack_layout);
	tcase_add_test(tc, test_pack_roundtrip);
	tcase_add_test(tc, test_names);
	suite_add_tcase(s, tc);

	tc = tcase_create("tensor");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_error_bound);
	tcase_add_test(tc, test_row_vs_col);
	tcase_add_test(tc, test_errors);
	suite_add_tcase(s, tc);

	tc = tcase_create("fast_path");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_fast_eq_ref_bits, 0, 2);
	tcase_add_test(tc, test_fast_eq_ref_normal);
	tcase_add_test(tc, test_fast_eq_ref_bf16_all);
	tcase_add_test(tc, test_fast_eq_ref_stream);
	tcase_add_loop_test(tc, test_fast_eq_ref_edges, 0, 4);
	tcase_add_test(tc, test_split_blocks);
	tcase_add_test(tc, test_mt_eq_single);
	suite_add_tcase(s, tc);

	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(mx_suite());
	int failed;

	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
