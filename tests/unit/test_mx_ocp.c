/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for daemon/mx_ocp.c (OCP MX formats, mx_ocp.h): hand-worked blocks for every
 * element type (scale, ties to even, saturation, element subnormals, zeros, NaN/Inf blocks),
 * a brute-force nearest-value oracle and error bounds on random data, every representable
 * element value round-tripping, row vs column blocking, the packed layout, error paths, and
 * the fast paths against the reference on adversarial blocks.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "mx_ocp.h"
#include "test_util.h"

/*
 * check records the location of every passing ck_assert with a write(); in the hot loops
 * below only a failure calls into check.
 */
#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond))                                                                       \
			ck_abort_msg(__VA_ARGS__);                                                 \
	} while (0)

#define N_FMT 6
static const enum mx_ocp_format all_fmt[N_FMT] = { MX_OCP_FP8_E4M3, MX_OCP_FP8_E5M2,
						   MX_OCP_FP6_E3M2, MX_OCP_FP6_E2M3,
						   MX_OCP_FP4_E2M1, MX_OCP_INT8 };

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

static bool is_int8(enum mx_ocp_format f) { return f == MX_OCP_INT8; }

/* Largest magnitude code (the largest normal): mx_ocp.h's table. */
static unsigned max_code(enum mx_ocp_format f)
{
	switch (f) {
	case MX_OCP_FP8_E4M3:
		return 0x7e;
	case MX_OCP_FP8_E5M2:
		return 0x7b;
	case MX_OCP_FP6_E3M2:
	case MX_OCP_FP6_E2M3:
		return 0x1f;
	case MX_OCP_FP4_E2M1:
		return 0x07;
	case MX_OCP_INT8:
		return 0x7f;
	}
	return 0;
}

/* Codes the quantizer may emit: everything but NaN/Inf codes and int8's -128. */
static bool code_valid(enum mx_ocp_format f, unsigned c)
{
	unsigned w = mx_ocp_elem_bits(f);
	if (is_int8(f))
		return c != 0x80;
	unsigned mag = c & ((1u << (w - 1)) - 1);
	return mag <= max_code(f);
}

/* ---- hand-worked blocks ----------------------------------------------------------------- */

struct hand {
	float in;
	uint8_t code;
	float deq;
};

/*
 * Quantizes in[0..n) followed by zeros, checks the scale byte, every code and every
 * dequantized value bit for bit, and that the tensor API gives the packed bytes of the block
 * in both directions (1 x 32 rows, 32 x 1 columns).
 */
static void check_hand(enum mx_ocp_format f, unsigned scale, const struct hand *h, size_t n)
{
	float in[32] = { 0 }, out[32];
	struct mx_ocp_block b;
	uint8_t want[MX_OCP_BLOCK_BYTES_MAX], got[MX_OCP_BLOCK_BYTES_MAX];
	size_t bb = mx_ocp_block_bytes(f);

	ck_assert_uint_le(n, 32);
	for (size_t j = 0; j < n; j++)
		in[j] = h[j].in;
	mx_ocp_quantize_block(f, in, &b);
	ck_assert_msg(b.scale == scale, "%s: scale %u, expected %u", mx_ocp_format_name(f),
		      b.scale, scale);
	mx_ocp_dequantize_block(f, &b, out);
	for (size_t j = 0; j < 32; j++) {
		uint8_t code = j < n ? h[j].code : 0;
		float deq = j < n ? h[j].deq : 0.0f;
		ck_assert_msg(b.elem[j] == code, "%s: elem[%zu] (in %a) = 0x%02x, expected 0x%02x",
			      mx_ocp_format_name(f), j, in[j], b.elem[j], code);
		ck_assert_msg(f_bits(out[j]) == f_bits(deq), "%s: deq[%zu] = %a, expected %a",
			      mx_ocp_format_name(f), j, out[j], deq);
	}
	mx_ocp_pack_block(f, &b, want);
	for (int dir = 0; dir < 2; dir++) {
		struct pim_error e = { 0 };
		size_t rows = dir == MX_DIR_ROW ? 1 : 32, cols = dir == MX_DIR_ROW ? 32 : 1;
		float back[32];
		memset(got, 0xee, sizeof got);
		ck_assert_int_eq(mx_ocp_quantize_tensor(f, MX_SRC_FP32, in, rows, cols, dir, got,
							bb, &e),
				 0);
		ck_assert_msg(memcmp(got, want, bb) == 0, "%s dir %d: tensor bytes differ",
			      mx_ocp_format_name(f), dir);
		ck_assert_int_eq(mx_ocp_dequantize_tensor(f, got, bb, rows, cols, dir, back, 32, &e),
				 0);
		ck_assert(memcmp(back, out, sizeof out) == 0);
	}
}

/*
 * E4M3 (bias 7, 3 mantissa bits, max 448 = 1.75 * 2^8, emax_elem 8). max|x| = 3.9375:
 * floor(log2) = 1, shared_exp = 1 - 8 = -7, scale byte 120, X = 2^-7, V/X = 128 V.
 *   3.0 -> 384 = 1.5 * 2^8: E = 15, m = 100b -> 0x7C; 1.0 -> 2^7: E = 14 -> 0x70
 *   1.0625 -> 136, halfway between 128 (m 0) and 144 (m 1): even -> 128, 0x70
 *   1.1875 -> 152, halfway between 144 (m 1) and 160 (m 2): even -> 160, 0x72 (1.25)
 *   3.5 -> 448 = max normal 0x7E; 3.5625 -> 456, halfway 448 / 480: even (m 110) -> 448
 *   3.75 -> 480 would be S.1111.111 (NaN): saturates to 448; -3.9375 -> -504: -448 (0xFE)
 * Element subnormals (quantum 2^-9, i.e. 2^-16 in input units):
 *   3 * 2^-16 -> 3 quanta: 0x03; 2^-17 -> half a quantum: tie, even -> 0
 *   1.5 quanta -> 2 (0x02, 2^-15); -2.5 quanta -> -2 (0x82); 2^-18 -> 0
 *   7.5 quanta -> 8: carries into the smallest normal 2^-6 (0x08), 2^-13 in input units
 *   0.0 -> 0x00; -0.0 -> 0x80 (-0.0); -1.0 -> 0xF0
 */
START_TEST(test_hand_e4m3)
{
	static const struct hand h[] = {
		{ 3.0f, 0x7c, 3.0f },		{ 1.0f, 0x70, 1.0f },
		{ 1.0625f, 0x70, 1.0f },	{ 1.1875f, 0x72, 1.25f },
		{ 3.5f, 0x7e, 3.5f },		{ 3.5625f, 0x7e, 3.5f },
		{ 3.75f, 0x7e, 3.5f },		{ -3.9375f, 0xfe, -3.5f },
		{ 0x1.8p-15f, 0x03, 0x1.8p-15f }, { 0x1p-17f, 0x00, 0.0f },
		{ 0x1.8p-16f, 0x02, 0x1p-15f }, { -0x1.4p-15f, 0x82, -0x1p-15f },
		{ 0x1p-18f, 0x00, 0.0f },	{ 0x1.ep-14f, 0x08, 0x1p-13f },
		{ 0.0f, 0x00, 0.0f },		{ -0.0f, 0x80, -0.0f },
		{ -1.0f, 0xf0, -1.0f },
	};
	check_hand(MX_OCP_FP8_E4M3, 120, h, ELEMENTSOF(h));
}
END_TEST

/*
 * E5M2 (bias 15, 2 mantissa bits, max 57344 = 1.75 * 2^15, emax_elem 15). max|x| = 1.99:
 * shared_exp = 0 - 15, scale byte 112, X = 2^-15.
 *   1.0 -> 2^15: E = 30 -> 0x78; 1.75 -> max normal 0x7B
 *   1.875: halfway 1.75 / 2.0, even -> 2.0 = the Inf code 0x7C: saturates to 0x7B
 *   -1.99 -> saturates to -1.75 (0xFB)
 *   1.125: halfway 1.0 / 1.25 -> 1.0; 1.375: halfway 1.25 / 1.5 -> 1.5 (0x7A)
 * Subnormals (quantum 2^-16, 2^-31 in input units): 1 -> 0x01; 1.5 -> 2 (0x02);
 *   0.5 -> 0; -0.5 -> -0 (0x80); 3.5 -> 4 = smallest normal 2^-14 (0x04), 2^-29.
 */
START_TEST(test_hand_e5m2)
{
	static const struct hand h[] = {
		{ 1.0f, 0x78, 1.0f },		{ 1.75f, 0x7b, 1.75f },
		{ 1.875f, 0x7b, 1.75f },	{ -1.99f, 0xfb, -1.75f },
		{ 1.125f, 0x78, 1.0f },		{ 1.375f, 0x7a, 1.5f },
		{ 0x1p-31f, 0x01, 0x1p-31f },	{ 0x1.8p-31f, 0x02, 0x1p-30f },
		{ 0x1p-32f, 0x00, 0.0f },	{ -0x1p-32f, 0x80, -0.0f },
		{ 0x1.cp-30f, 0x04, 0x1p-29f }, { 0.0f, 0x00, 0.0f },
	};
	check_hand(MX_OCP_FP8_E5M2, 112, h, ELEMENTSOF(h));
}
END_TEST

/*
 * E3M2 (bias 3, 2 mantissa bits, max 28 = 1.75 * 2^4, emax_elem 4). max|x| = 7.875:
 * floor(log2) = 2, shared_exp = -2, scale byte 125, X = 1/4, V/X = 4 V.
 *   7.0 -> 28 = max 0x1F; 7.5 -> 30, halfway 28 / 32, even -> 32: saturates to 28
 *   -7.875 -> -31.5: -28 (0x3F)
 *   2.25 -> 9, halfway 8 (m 0) / 10 (m 1): 8, E = 6 -> 0x18 (2.0)
 *   2.75 -> 11, halfway 10 / 12 (m 2): 12 -> 0x1A (3.0); 1.0 -> 4 = 2^2: E = 5 -> 0x14
 * Subnormals (quantum 2^-4, 2^-6 in input units): 3 -> 0x03; 0.5 -> 0; 1.5 -> 2 (0x02);
 *   -1.5 -> -2 (0x22); 3.5 -> 4 = smallest normal 0.25 (0x04), 2^-4 in input units;
 *   -0.0 -> 0x20.
 */
START_TEST(test_hand_e3m2)
{
	static const struct hand h[] = {
		{ 7.0f, 0x1f, 7.0f },		{ 7.5f, 0x1f, 7.0f },
		{ -7.875f, 0x3f, -7.0f },	{ 2.25f, 0x18, 2.0f },
		{ 2.75f, 0x1a, 3.0f },		{ 1.0f, 0x14, 1.0f },
		{ 0x1.8p-5f, 0x03, 0x1.8p-5f }, { 0x1p-7f, 0x00, 0.0f },
		{ 0x1.8p-6f, 0x02, 0x1p-5f },	{ -0x1.8p-6f, 0x22, -0x1p-5f },
		{ 0x1.cp-5f, 0x04, 0x1p-4f },	{ -0.0f, 0x20, -0.0f },
	};
	check_hand(MX_OCP_FP6_E3M2, 125, h, ELEMENTSOF(h));
}
END_TEST

/*
 * E2M3 (bias 1, 3 mantissa bits, max 7.5 = 1.875 * 2^2, emax_elem 2). max|x| = 1020:
 * floor(log2) = 9, shared_exp = 7, scale byte 134, X = 128.
 *   960 -> 7.5 = max 0x1F; 1000 -> 7.8125: saturates; -1020: -7.5 (0x3F)
 *   992 -> 7.75, halfway 7.5 / 8.0, even -> 8.0: saturates to 7.5
 *   544 -> 4.25, halfway 4.0 (m 0) / 4.5: 4.0, E = 3 -> 0x18 (512)
 *   608 -> 4.75, halfway 4.5 / 5.0 (m 2): 5.0 -> 0x1A (640)
 * Subnormals (quantum 1/8, 16 in input units): 48 -> 3 quanta 0x03; 8 -> 0.5: 0;
 *   24 -> 1.5: 2 (0x02, 32); 120 -> 7.5: 8 = smallest normal 1.0 (0x08, 128);
 *   -48 -> 0x23; -8 -> -0 (0x20).
 */
START_TEST(test_hand_e2m3)
{
	static const struct hand h[] = {
		{ 960.0f, 0x1f, 960.0f }, { 1000.0f, 0x1f, 960.0f }, { -1020.0f, 0x3f, -960.0f },
		{ 992.0f, 0x1f, 960.0f }, { 544.0f, 0x18, 512.0f },  { 608.0f, 0x1a, 640.0f },
		{ 48.0f, 0x03, 48.0f },	  { 8.0f, 0x00, 0.0f },	     { 24.0f, 0x02, 32.0f },
		{ 120.0f, 0x08, 128.0f }, { -48.0f, 0x23, -48.0f },  { -8.0f, 0x20, -0.0f },
	};
	check_hand(MX_OCP_FP6_E2M3, 134, h, ELEMENTSOF(h));
}
END_TEST

/*
 * E2M1 (values 0, 0.5, 1, 1.5, 2, 3, 4, 6; emax_elem 2). max|x| = 0.99: floor(log2) = -1,
 * shared_exp = -3, scale byte 124, X = 1/8, V/X = 8 V.
 *   0.75 -> 6 = max 0x7; 0.875 -> 7, halfway 6 / 8: even -> 8: saturates to 6
 *   -0.99 -> -7.92: -6 (0xF)
 *   0.3125 -> 2.5, halfway 2 (code 4) / 3 (code 5): 2, 0x4
 *   0.4375 -> 3.5, halfway 3 / 4 (code 6): 4, 0x6; 0.625 -> 5, halfway 4 / 6: 4, 0x6
 *   0.1875 -> 1.5 exactly 0x3; -0.25 -> -2: 0xC
 * Subnormal: 0.0625 -> 0.5 (0x1); 0.03125 -> 0.25, halfway 0 / 0.5: 0;
 *   0.09375 -> 0.75, halfway 0.5 / 1.0: 1.0 (0x2); -0.03125 -> -0 (0x8).
 */
START_TEST(test_hand_e2m1)
{
	static const struct hand h[] = {
		{ 0.75f, 0x7, 0.75f },	  { 0.875f, 0x7, 0.75f },   { -0.99f, 0xf, -0.75f },
		{ 0.3125f, 0x4, 0.25f },  { 0.4375f, 0x6, 0.5f },   { 0.625f, 0x6, 0.5f },
		{ 0.1875f, 0x3, 0.1875f }, { -0.25f, 0xc, -0.25f }, { 0.0625f, 0x1, 0.0625f },
		{ 0.03125f, 0x0, 0.0f },  { 0.09375f, 0x2, 0.125f }, { -0.03125f, 0x8, -0.0f },
	};
	check_hand(MX_OCP_FP4_E2M1, 124, h, ELEMENTSOF(h));
}
END_TEST

/*
 * INT8 (Q1.6: code c is c/64, emax_elem 0). max|x| = 127.6: floor(log2) = 6, shared_exp = 6,
 * scale byte 133, X = 64, so code = round(V) here.
 *   100 -> 100; 2.5 -> 2 and 3.5 -> 4 and 1.5 -> 2 (ties to even); -2.5 -> -2 (0xFE)
 *   0.5 -> 0; -0.5 -> 0 (no negative zero: +0.0); -0.0 -> 0; 0.25 -> 0; -1 -> 0xFF
 *   127.6 -> 128: saturates to 127; 127.5 -> tie, even 128: 127
 *   -127.5 -> -128: saturates symmetrically to -127 (0x81); -127 -> 0x81
 */
START_TEST(test_hand_int8)
{
	static const struct hand h[] = {
		{ 100.0f, 100, 100.0f }, { 2.5f, 2, 2.0f },	    { 3.5f, 4, 4.0f },
		{ 1.5f, 2, 2.0f },	 { -2.5f, 0xfe, -2.0f },    { 0.5f, 0, 0.0f },
		{ -0.5f, 0, 0.0f },	 { -0.0f, 0, 0.0f },	    { 0.25f, 0, 0.0f },
		{ -1.0f, 0xff, -1.0f },	 { 127.6f, 0x7f, 127.0f },  { 127.5f, 0x7f, 127.0f },
		{ -127.5f, 0x81, -127.0f }, { -127.0f, 0x81, -127.0f },
	};
	check_hand(MX_OCP_INT8, 133, h, ELEMENTSOF(h));
}
END_TEST

/* NaN or Inf anywhere: scale 0xFF, codes 0; a NaN-scale block decodes to NaN everywhere. */
START_TEST(test_nan_blocks)
{
	const float specials[] = { NAN, -NAN, INFINITY, -INFINITY, bits_f(0x7f800001u) };

	for (int i = 0; i < N_FMT; i++) {
		enum mx_ocp_format f = all_fmt[i];
		for (size_t s = 0; s < ELEMENTSOF(specials); s++) {
			float in[32], out[32];
			struct mx_ocp_block b;
			for (int j = 0; j < 32; j++)
				in[j] = (float)(j - 16) * 0.37f;
			in[(5 + 7 * s) % 32] = specials[s];
			mx_ocp_quantize_block(f, in, &b);
			ck_assert_uint_eq(b.scale, 0xff);
			for (int j = 0; j < 32; j++)
				ck_assert_uint_eq(b.elem[j], 0);
			mx_ocp_dequantize_block(f, &b, out);
			for (int j = 0; j < 32; j++)
				ck_assert_uint_eq(f_bits(out[j]), 0x7fc00000u);
		}
		/* Whatever the codes, a NaN scale means NaN. */
		struct mx_ocp_block b = { .scale = 0xff };
		float out[32];
		for (int j = 0; j < 32; j++)
			b.elem[j] = (uint8_t)(j * 7 + 1);
		mx_ocp_dequantize_block(f, &b, out);
		for (int j = 0; j < 32; j++)
			ck_assert_uint_eq(f_bits(out[j]), 0x7fc00000u);
	}

	/* With a finite scale, element specials: e4m3 NaN codes, e5m2 Inf and NaN codes. */
	struct mx_ocp_block b = { .scale = 127 };
	float out[32];
	b.elem[0] = 0x7f;
	b.elem[1] = 0xff;
	b.elem[2] = 0x7e;
	mx_ocp_dequantize_block(MX_OCP_FP8_E4M3, &b, out);
	ck_assert_uint_eq(f_bits(out[0]), 0x7fc00000u);
	ck_assert_uint_eq(f_bits(out[1]), 0x7fc00000u);
	ck_assert(out[2] == 448.0f);
	b.elem[0] = 0x7c;
	b.elem[1] = 0xfc;
	b.elem[2] = 0x7d;
	b.elem[3] = 0xff;
	mx_ocp_dequantize_block(MX_OCP_FP8_E5M2, &b, out);
	ck_assert(out[0] == INFINITY);
	ck_assert(out[1] == -INFINITY);
	ck_assert_uint_eq(f_bits(out[2]), 0x7fc00000u);
	ck_assert_uint_eq(f_bits(out[3]), 0x7fc00000u);
}
END_TEST

/* All zeros: max = 0, shared_exp clamps to -127 (byte 0); signs kept for fp elements. */
START_TEST(test_zero_block)
{
	for (int i = 0; i < N_FMT; i++) {
		enum mx_ocp_format f = all_fmt[i];
		unsigned sbit = is_int8(f) ? 0 : 1u << (mx_ocp_elem_bits(f) - 1);
		float in[32], out[32];
		struct mx_ocp_block b;
		for (int j = 0; j < 32; j++)
			in[j] = j % 3 == 1 ? -0.0f : 0.0f;
		mx_ocp_quantize_block(f, in, &b);
		ck_assert_uint_eq(b.scale, 0);
		mx_ocp_dequantize_block(f, &b, out);
		for (int j = 0; j < 32; j++) {
			bool neg = j % 3 == 1 && !is_int8(f);
			ck_assert_uint_eq(b.elem[j], neg ? sbit : 0);
			ck_assert_uint_eq(f_bits(out[j]), neg ? 0x80000000u : 0);
		}
	}
}
END_TEST

/*
 * Range ends. FLT_MAX: floor(log2) = 127, scale byte 254 - emax_elem, saturated max code.
 * Tiny blocks clamp the scale at 2^-127 (byte 0) and keep FP32 subnormal inputs (no flush):
 *   e5m2, max 2^-140: V/X = 2^-13, a normal e5m2 (E = 2): 0x08, dequantized exactly;
 *     3 * 2^-145 -> 0.75 quanta of 2^-16: 1 (0x01, 2^-143); 2^-144 -> half a quantum: 0;
 *     2^-149 -> 0
 *   e2m1, max 2^-126: V/X = 2 (0x4); 2^-128 -> 0.5 (0x1, an FP32 subnormal out);
 *     3 * 2^-129 -> 0.75, halfway 0.5 / 1.0: 1.0 (0x2, 2^-127)
 */
START_TEST(test_extremes)
{
	for (int i = 0; i < N_FMT; i++) {
		enum mx_ocp_format f = all_fmt[i];
		float in[32] = { 0 }, out[32];
		struct mx_ocp_block b;
		in[3] = FLT_MAX;
		in[4] = -FLT_MAX;
		mx_ocp_quantize_block(f, in, &b);
		ck_assert_uint_eq(b.scale, 254 - mx_ocp_emax_elem(f));
		unsigned neg = is_int8(f) ? 0x81 : (1u << (mx_ocp_elem_bits(f) - 1)) | max_code(f);
		ck_assert_uint_eq(b.elem[3], max_code(f));
		ck_assert_uint_eq(b.elem[4], neg);
		mx_ocp_dequantize_block(f, &b, out);
		float want = ldexpf(mx_ocp_elem_max(f), 127 - mx_ocp_emax_elem(f));
		ck_assert(isfinite(want));
		ck_assert(out[3] == want && out[4] == -want);
	}

	float in[32] = { 0 }, out[32];
	struct mx_ocp_block b;
	in[0] = 0x1p-140f;
	in[1] = 0x1.8p-144f;
	in[2] = 0x1p-144f;
	in[3] = 0x1p-149f;
	ck_assert(fpclassify(in[0]) == FP_SUBNORMAL);
	mx_ocp_quantize_block(MX_OCP_FP8_E5M2, in, &b);
	ck_assert_uint_eq(b.scale, 0);
	ck_assert_uint_eq(b.elem[0], 0x08);
	ck_assert_uint_eq(b.elem[1], 0x01);
	ck_assert_uint_eq(b.elem[2], 0x00);
	ck_assert_uint_eq(b.elem[3], 0x00);
	mx_ocp_dequantize_block(MX_OCP_FP8_E5M2, &b, out);
	ck_assert(out[0] == 0x1p-140f && out[1] == 0x1p-143f && out[2] == 0.0f);

	memset(in, 0, sizeof in);
	in[0] = 0x1p-126f;
	in[1] = 0x1p-128f;
	in[2] = 0x1.8p-128f;
	mx_ocp_quantize_block(MX_OCP_FP4_E2M1, in, &b);
	ck_assert_uint_eq(b.scale, 0);
	ck_assert_uint_eq(b.elem[0], 0x4);
	ck_assert_uint_eq(b.elem[1], 0x1);
	ck_assert_uint_eq(b.elem[2], 0x2);
	mx_ocp_dequantize_block(MX_OCP_FP4_E2M1, &b, out);
	ck_assert(out[0] == 0x1p-126f && out[1] == 0x1p-128f && out[2] == 0x1p-127f);
}
END_TEST

/*
 * int8 on FP32 subnormals, against MX6 on the same 32 inputs (pimd(8) documents the contrast).
 * max|x| = 2^-130: floor(log2) - emax_elem (0) = -130 clamps to -127: scale byte 0, X = 2^-127,
 * and a code c means c/64 * 2^-127 = c * 2^-133:
 *   2^-130 -> 8 (0x08), back to 2^-130 exactly (an FP32 subnormal: not flushed)
 *   -2^-133 -> -1 (0xFF), back to -2^-133
 *   3 * 2^-134 -> 1.5 quanta, tie, even -> 2 (0x02), 2^-132
 *   2^-135 -> 0.25 quanta -> 0; -2^-135 -> 0 too: int8 has no negative zero, +0.0 out
 *   -0.0 -> 0, +0.0 out
 * MX6 flushes FP32 subnormal inputs to zero: E = 0, every magnitude 0, signs kept, so the same
 * 16 first inputs come back as +-0.0.
 */
START_TEST(test_int8_subnormals_kept_unlike_mx)
{
	static const struct hand h[] = {
		{ 0x1p-130f, 0x08, 0x1p-130f }, { -0x1p-133f, 0xff, -0x1p-133f },
		{ 0x1.8p-133f, 0x02, 0x1p-132f }, { 0x1p-135f, 0x00, 0.0f },
		{ -0x1p-135f, 0x00, 0.0f },	{ -0.0f, 0x00, 0.0f },
	};
	check_hand(MX_OCP_INT8, 0, h, ELEMENTSOF(h));

	float in[16] = { 0 }, out[16];
	struct mx_block b;
	for (size_t j = 0; j < ELEMENTSOF(h); j++)
		in[j] = h[j].in;
	mx_quantize_block(MX_FMT_MX6, in, &b);
	ck_assert_uint_eq(b.exp, 0);
	mx_dequantize_block(MX_FMT_MX6, &b, out);
	for (size_t j = 0; j < 16; j++) {
		ck_assert_uint_eq(b.mag[j], 0);
		ck_assert_uint_eq(f_bits(out[j]), signbit(in[j]) ? 0x80000000u : 0);
	}
}
END_TEST

/* ---- element values --------------------------------------------------------------------- */

START_TEST(test_elem_values)
{
	static const float e2m1[8] = { 0, 0.5f, 1, 1.5f, 2, 3, 4, 6 };
	for (unsigned c = 0; c < 16; c++) {
		float v = mx_ocp_elem_value(MX_OCP_FP4_E2M1, (uint8_t)c);
		float want = c & 8 ? -e2m1[c & 7] : e2m1[c & 7];
		ck_assert_uint_eq(f_bits(v), f_bits(want));
	}
	struct {
		enum mx_ocp_format f;
		uint8_t code;
		float v;
	} spot[] = {
		{ MX_OCP_FP8_E4M3, 0x01, 0x1p-9f },   { MX_OCP_FP8_E4M3, 0x08, 0x1p-6f },
		{ MX_OCP_FP8_E4M3, 0x7e, 448.0f },    { MX_OCP_FP8_E4M3, 0xfe, -448.0f },
		{ MX_OCP_FP8_E5M2, 0x01, 0x1p-16f },  { MX_OCP_FP8_E5M2, 0x04, 0x1p-14f },
		{ MX_OCP_FP8_E5M2, 0x7b, 57344.0f },  { MX_OCP_FP6_E3M2, 0x01, 0x1p-4f },
		{ MX_OCP_FP6_E3M2, 0x04, 0.25f },     { MX_OCP_FP6_E3M2, 0x1f, 28.0f },
		{ MX_OCP_FP6_E3M2, 0x3f, -28.0f },    { MX_OCP_FP6_E2M3, 0x01, 0.125f },
		{ MX_OCP_FP6_E2M3, 0x08, 1.0f },      { MX_OCP_FP6_E2M3, 0x1f, 7.5f },
		{ MX_OCP_INT8, 0x01, 1.0f / 64 },     { MX_OCP_INT8, 0x7f, 127.0f / 64 },
		{ MX_OCP_INT8, 0x80, -2.0f },	      { MX_OCP_INT8, 0xff, -1.0f / 64 },
	};
	for (size_t i = 0; i < ELEMENTSOF(spot); i++)
		CHECK(mx_ocp_elem_value(spot[i].f, spot[i].code) == spot[i].v,
			      "%s 0x%02x = %a", mx_ocp_format_name(spot[i].f), spot[i].code,
			      mx_ocp_elem_value(spot[i].f, spot[i].code));
	ck_assert(isnan(mx_ocp_elem_value(MX_OCP_FP8_E4M3, 0x7f)));
	ck_assert(mx_ocp_elem_value(MX_OCP_FP8_E5M2, 0xfc) == -INFINITY);

	/* Largest normals, and magnitude codes strictly increasing in value up to them. */
	static const float maxv[N_FMT] = { 448, 57344, 28, 7.5f, 6, 127.0f / 64 };
	for (int i = 0; i < N_FMT; i++) {
		enum mx_ocp_format f = all_fmt[i];
		ck_assert(mx_ocp_elem_max(f) == maxv[i]);
		ck_assert(mx_ocp_elem_value(f, (uint8_t)max_code(f)) == maxv[i]);
		for (unsigned c = 1; c <= max_code(f); c++)
			CHECK(mx_ocp_elem_value(f, (uint8_t)c) >
				      mx_ocp_elem_value(f, (uint8_t)(c - 1)),
			      "%s: not increasing at 0x%02x", mx_ocp_format_name(f), c);
	}
	ck_assert(isnan(mx_ocp_elem_max((enum mx_ocp_format)6)));
}
END_TEST

/*
 * Every valid element code, under every scale byte whose blocks stay finite in FP32
 * (0..254 - emax_elem), dequantizes and requantizes to itself. Each block holds the largest
 * normal as element 0 (so the requantized scale is the same) and 31 other codes.
 */
START_TEST(test_all_codes_roundtrip)
{
	for (int i = 0; i < N_FMT; i++) {
		enum mx_ocp_format f = all_fmt[i];
		unsigned w = mx_ocp_elem_bits(f), codes[256], n = 0;
		for (unsigned c = 0; c < (1u << w); c++)
			if (code_valid(f, c))
				codes[n++] = c;
		ck_assert_uint_eq(n, f == MX_OCP_FP8_E4M3	? 254
				     : f == MX_OCP_FP8_E5M2 ? 248
				     : is_int8(f)	    ? 255
							    : (1u << w));
		for (unsigned s = 0; s <= 254u - (unsigned)mx_ocp_emax_elem(f); s++) {
			for (unsigned k = 0; k < n; k += 31) {
				struct mx_ocp_block b = { .scale = (uint8_t)s }, q;
				float v[32];
				b.elem[0] = (uint8_t)max_code(f);
				for (unsigned j = 1; j < 32; j++)
					b.elem[j] = (uint8_t)codes[(k + j - 1) % n];
				mx_ocp_dequantize_block(f, &b, v);
				mx_ocp_quantize_block(f, v, &q);
				CHECK(q.scale == s, "%s scale %u -> %u", mx_ocp_format_name(f),
					      s, q.scale);
				for (unsigned j = 0; j < 32; j++)
					CHECK(q.elem[j] == b.elem[j],
						      "%s scale %u: code 0x%02x -> %a -> 0x%02x",
						      mx_ocp_format_name(f), s, b.elem[j], v[j],
						      q.elem[j]);
			}
		}
	}
}
END_TEST

/* ---- random data: brute-force oracle and error bounds ---------------------------------- */

/* Scale exponent by Algorithm 1 in double arithmetic (independent of mx_ocp.c). */
static int oracle_scale(enum mx_ocp_format f, const float in[32])
{
	double m = 0;
	for (int j = 0; j < 32; j++)
		m = fmax(m, fabs((double)in[j]));
	if (m == 0)
		return -127;
	int ex;
	frexp(m, &ex); /* m = g * 2^ex, g in [0.5, 1): floor(log2 m) = ex - 1 */
	int s = ex - 1 - mx_ocp_emax_elem(f);
	return s < -127 ? -127 : s;
}

/* Nearest magnitude code to |t| by enumeration, ties to the even code (even mantissa). */
static unsigned oracle_mag(enum mx_ocp_format f, double t)
{
	unsigned best = 0;
	double bd = INFINITY;
	for (unsigned c = 0; c <= max_code(f); c++) {
		double d = fabs(fabs(t) - (double)mx_ocp_elem_value(f, (uint8_t)c));
		if (d < bd || (d == bd && !(c & 1))) {
			bd = d;
			best = c;
		}
	}
	return best;
}

static double sq_err, sq_ref;

/* Compares a quantized block with the oracle and checks the per-element error bound. */
static void check_random_block(enum mx_ocp_format f, const float in[32])
{
	struct mx_ocp_block b;
	float out[32];
	int s = oracle_scale(f, in);
	double X = ldexp(1.0, s), maxv = mx_ocp_elem_max(f);
	unsigned w = mx_ocp_elem_bits(f);

	mx_ocp_quantize_block(f, in, &b);
	CHECK(b.scale == s + 127, "%s: scale %u, oracle %d", mx_ocp_format_name(f), b.scale, s + 127);
	mx_ocp_dequantize_block(f, &b, out);
	for (int j = 0; j < 32; j++) {
		double t = (double)in[j] / X; /* exact: a power-of-two scale */
		unsigned mag = oracle_mag(f, t);
		bool neg = signbit(in[j]);
		unsigned want = is_int8(f) ? (uint8_t)(neg ? -mag : mag)
					   : (neg ? 1u << (w - 1) : 0) | mag;
		CHECK(b.elem[j] == want, "%s: %a (t = %a) -> 0x%02x, oracle 0x%02x",
			      mx_ocp_format_name(f), in[j], t, b.elem[j], want);

		/* Error bound: half the quantum of t's binade (subnormal quantum below the
		 * smallest normal; 2^-6 for int8), or exact saturation above the max. */
		double err = fabs((double)out[j] - (double)in[j]);
		if (fabs(t) > maxv) {
			CHECK(fabs((double)out[j]) == maxv * X, "%s: %a saturates to %a", mx_ocp_format_name(f), in[j], out[j]);
		} else if (t != 0) {
			int ex;
			frexp(fabs(t), &ex);
			int e = ex - 1, mbits, emin;
			switch (f) {
			case MX_OCP_FP8_E4M3: mbits = 3; emin = -6; break;
			case MX_OCP_FP8_E5M2: mbits = 2; emin = -14; break;
			case MX_OCP_FP6_E3M2: mbits = 2; emin = -2; break;
			case MX_OCP_FP6_E2M3: mbits = 3; emin = 0; break;
			case MX_OCP_FP4_E2M1: mbits = 1; emin = 0; break;
			default: mbits = 6; emin = e = 0; break; /* int8: fixed quantum 2^-6 */
			}
			if (e < emin)
				e = emin;
			CHECK(err <= ldexp(X, e - mbits - 1), "%s: %a -> %a",
				      mx_ocp_format_name(f), in[j], out[j]);
		}
		/* Signs: fp elements keep the input's; int8 has no -0. */
		if (!is_int8(f) || out[j] != 0)
			CHECK(!!signbit(out[j]) == neg, "%s: sign of %a -> %a", mx_ocp_format_name(f), in[j], out[j]);
		else
			CHECK(!signbit(out[j]), "int8: -0 for %a", in[j]);
		sq_err += err * err;
		sq_ref += (double)in[j] * in[j];
	}
}

START_TEST(test_random_oracle)
{
	for (int i = 0; i < N_FMT; i++) {
		enum mx_ocp_format f = all_fmt[i];
		double maxv = mx_ocp_elem_max(f);
		rng_state = 0x5eed0000u + (unsigned)i;

		/* Gaussian blocks at scales 2^-40 .. 2^40: the error ratio is format-bound. */
		sq_err = sq_ref = 0;
		for (int n = 0; n < 1500; n++) {
			float in[32];
			double sc = ldexp(1.0, (int)(rnd() % 81) - 40);
			for (int j = 0; j < 32; j++)
				in[j] = (float)(rnd_normal() * sc);
			check_random_block(f, in);
		}
		double rel = sqrt(sq_err / sq_ref);
		/* Half-ulp relative error is 2^-(mbits+1); saturation and the coarse
		 * subnormal range add to it; a loose ceiling catches gross errors. */
		static const double ceil_rel[N_FMT] = { 0.06, 0.12, 0.12, 0.06, 0.25, 0.02 };
		CHECK(rel < ceil_rel[i], "%s: relative RMS error %g",
			      mx_ocp_format_name(f), rel);

		/* Random finite bit patterns (subnormals included), narrow exponent spread. */
		for (int n = 0; n < 1500; n++) {
			float in[32];
			uint32_t base = (uint32_t)(rnd() % 254);
			for (int j = 0; j < 32; j++) {
				uint32_t e = base + (uint32_t)(rnd() % 12);
				e = e > 254 ? 254 : e;
				if (rnd() % 8 == 0)
					e = 0; /* zero or subnormal */
				in[j] = bits_f((uint32_t)(rnd() & 0x807fffffu) | e << 23);
			}
			check_random_block(f, in);
		}

		/* Exact ties: midpoints of adjacent element values, with the largest normal in
		 * element 0 fixing the scale. */
		for (int n = 0; n < 1500; n++) {
			float in[32];
			int s = (int)(rnd() % 255) - 127;
			if (s > 127 - mx_ocp_emax_elem(f))
				s = 127 - mx_ocp_emax_elem(f);
			in[0] = (float)ldexp(maxv, s);
			for (int j = 1; j < 32; j++) {
				unsigned c = (unsigned)(rnd() % max_code(f));
				double mid = ((double)mx_ocp_elem_value(f, (uint8_t)c) +
					      (double)mx_ocp_elem_value(f, (uint8_t)(c + 1))) / 2;
				in[j] = (float)ldexp(rnd() & 1 ? -mid : mid, s);
				CHECK(fabs((double)in[j]) == ldexp(mid, s), "inexact tie"); /* exact */
			}
			check_random_block(f, in);
		}
	}
}
END_TEST

/* BF16 sources give exactly what their FP32 widening gives. */
START_TEST(test_bf16_source)
{
	enum { R = 32, C = 64 };
	static uint16_t b16[R * C];
	static float f32[R * C];
	static uint8_t a[R * C * 2], b[R * C * 2];
	struct pim_error e = { 0 };

	rng_state = 77;
	for (int i = 0; i < R * C; i++) {
		b16[i] = mx_float_to_bf16((float)(rnd_normal() * 3.0));
		f32[i] = mx_bf16_to_float(b16[i]);
	}
	for (int i = 0; i < N_FMT; i++)
		for (int dir = 0; dir < 2; dir++) {
			enum mx_ocp_format f = all_fmt[i];
			size_t n = mx_ocp_packed_size(f, R, C, dir);
			ck_assert_uint_gt(n, 0);
			ck_assert_int_eq(mx_ocp_quantize_tensor(f, MX_SRC_BF16, b16, R, C, dir, a,
								sizeof a, &e),
					 0);
			ck_assert_int_eq(mx_ocp_quantize_tensor(f, MX_SRC_FP32, f32, R, C, dir, b,
								sizeof b, &e),
					 0);
			ck_assert(memcmp(a, b, n) == 0);
		}
}
END_TEST

/*
 * Column blocking of A (64 x 96 and 64 x 40) is byte-identical to row blocking of A^T, and
 * the dequantized tensors are transposes of each other.
 */
START_TEST(test_row_vs_col)
{
	static const size_t shapes[][2] = { { 64, 96 }, { 64, 40 }, { 32, 3 } };

	rng_state = 1234;
	for (size_t si = 0; si < ELEMENTSOF(shapes); si++) {
		size_t R = shapes[si][0], C = shapes[si][1];
		float *A = malloc(R * C * sizeof *A), *AT = malloc(R * C * sizeof *AT);
		float *dc = malloc(R * C * sizeof *dc), *dr = malloc(R * C * sizeof *dr);
		uint8_t *pc = malloc(R * C * 2), *pr = malloc(R * C * 2);
		ck_assert(A && AT && dc && dr && pc && pr);
		for (size_t r = 0; r < R; r++)
			for (size_t c = 0; c < C; c++) {
				double v = rnd_normal() * ldexp(1.0, (int)(r % 7) - (int)(c % 5));
				A[r * C + c] = (float)v;
				AT[c * R + r] = (float)v;
			}
		for (int i = 0; i < N_FMT; i++) {
			enum mx_ocp_format f = all_fmt[i];
			struct pim_error e = { 0 };
			size_t n = mx_ocp_packed_size(f, R, C, MX_DIR_COL);
			ck_assert_uint_eq(n, mx_ocp_packed_size(f, C, R, MX_DIR_ROW));
			ck_assert_uint_eq(n, R * C / 32 * mx_ocp_block_bytes(f));
			ck_assert_int_eq(mx_ocp_quantize_tensor(f, MX_SRC_FP32, A, R, C, MX_DIR_COL,
								pc, n, &e),
					 0);
			ck_assert_int_eq(mx_ocp_quantize_tensor(f, MX_SRC_FP32, AT, C, R, MX_DIR_ROW,
								pr, n, &e),
					 0);
			ck_assert_msg(memcmp(pc, pr, n) == 0, "%s %zux%zu", mx_ocp_format_name(f), R,
				      C);
			ck_assert_int_eq(mx_ocp_dequantize_tensor(f, pc, n, R, C, MX_DIR_COL, dc,
								  R * C, &e),
					 0);
			ck_assert_int_eq(mx_ocp_dequantize_tensor(f, pr, n, C, R, MX_DIR_ROW, dr,
								  R * C, &e),
					 0);
			for (size_t r = 0; r < R; r++)
				for (size_t c = 0; c < C; c++)
					CHECK(f_bits(dc[r * C + c]) == f_bits(dr[c * R + r]),
					      "%s: (%zu, %zu) differs", mx_ocp_format_name(f), r, c);
			/* And a column block is the block of that column's 32 values. */
			float col[32], deq[32];
			struct mx_ocp_block blk, got;
			size_t c = C - 1, rb = R / 32 - 1;
			for (int k = 0; k < 32; k++)
				col[k] = A[(rb * 32 + k) * C + c];
			mx_ocp_quantize_block(f, col, &blk);
			mx_ocp_unpack_block(f, pc + (c * (R / 32) + rb) * mx_ocp_block_bytes(f),
					    &got);
			ck_assert(memcmp(&blk, &got, sizeof blk) == 0);
			mx_ocp_dequantize_block(f, &blk, deq);
			for (int k = 0; k < 32; k++)
				CHECK(f_bits(deq[k]) == f_bits(dc[(rb * 32 + k) * C + c]), "column %d", k);
		}
		free(A);
		free(AT);
		free(dc);
		free(dr);
		free(pc);
		free(pr);
	}
}
END_TEST

/* ---- layout ----------------------------------------------------------------------------- */

START_TEST(test_pack_layout)
{
	struct mx_ocp_block b = { .scale = 0x85 };
	uint8_t out[MX_OCP_BLOCK_BYTES_MAX];

	for (int j = 0; j < 32; j++)
		b.elem[j] = (uint8_t)(0xa0 + j);
	/* fp8 / int8: byte 1 + j is element j. */
	mx_ocp_pack_block(MX_OCP_FP8_E5M2, &b, out);
	ck_assert_uint_eq(out[0], 0x85);
	for (int j = 0; j < 32; j++)
		ck_assert_uint_eq(out[1 + j], 0xa0 + j);
	/* fp4: element 2i in the low nibble of byte 1 + i. */
	mx_ocp_pack_block(MX_OCP_FP4_E2M1, &b, out);
	for (int i = 0; i < 16; i++)
		ck_assert_uint_eq(out[1 + i], ((0xa0 + 2 * i) & 15) | ((0xa0 + 2 * i + 1) & 15) << 4);
	/* fp6: 4 elements per 3 bytes, little-endian bit stream. a=3F b=00 c=15 d=2A:
	 * byte 1 = a | b << 6 = 0x3F, byte 2 = b >> 2 | c << 4 = 0x50, byte 3 = c >> 4 | d << 2
	 * = 0xA9. High bits beyond 6 are ignored. */
	b.elem[0] = 0x3f | 0xc0;
	b.elem[1] = 0x00;
	b.elem[2] = 0x15;
	b.elem[3] = 0x2a;
	mx_ocp_pack_block(MX_OCP_FP6_E2M3, &b, out);
	ck_assert_uint_eq(out[1], 0x3f);
	ck_assert_uint_eq(out[2], 0x50);
	ck_assert_uint_eq(out[3], 0xa9);
}
END_TEST

START_TEST(test_pack_roundtrip)
{
	rng_state = 99;
	for (int i = 0; i < N_FMT; i++) {
		enum mx_ocp_format f = all_fmt[i];
		unsigned mask = (1u << mx_ocp_elem_bits(f)) - 1;
		size_t bb = mx_ocp_block_bytes(f);
		for (int n = 0; n < 2000; n++) {
			struct mx_ocp_block b, u;
			uint8_t p[MX_OCP_BLOCK_BYTES_MAX], q[MX_OCP_BLOCK_BYTES_MAX];
			b.scale = (uint8_t)rnd();
			for (int j = 0; j < 32; j++)
				b.elem[j] = (uint8_t)rnd();
			mx_ocp_pack_block(f, &b, p);
			mx_ocp_unpack_block(f, p, &u);
			CHECK(u.scale == b.scale, "scale");
			for (int j = 0; j < 32; j++)
				CHECK(u.elem[j] == (b.elem[j] & mask), "%s: elem %d",
				      mx_ocp_format_name(f), j);
			/* bytes -> block -> bytes */
			for (size_t k = 0; k < bb; k++)
				p[k] = (uint8_t)rnd();
			mx_ocp_unpack_block(f, p, &u);
			mx_ocp_pack_block(f, &u, q);
			CHECK(memcmp(p, q, bb) == 0, "%s: bytes differ", mx_ocp_format_name(f));
		}
	}
}
END_TEST

START_TEST(test_names)
{
	static const char *names[N_FMT] = { "mxfp8-e4m3", "mxfp8-e5m2", "mxfp6-e3m2",
					    "mxfp6-e2m3", "mxfp4",	"mxint8" };
	static const unsigned bits[N_FMT] = { 8, 8, 6, 6, 4, 8 };
	static const size_t bytes[N_FMT] = { 33, 33, 25, 25, 17, 33 };
	static const int emax[N_FMT] = { 8, 15, 4, 2, 2, 0 };

	for (int i = 0; i < N_FMT; i++) {
		enum mx_ocp_format f = all_fmt[i], g = MX_OCP_INT8;
		ck_assert_str_eq(mx_ocp_format_name(f), names[i]);
		ck_assert_uint_eq(mx_ocp_elem_bits(f), bits[i]);
		ck_assert_uint_eq(mx_ocp_block_bytes(f), bytes[i]);
		ck_assert_int_eq(mx_ocp_emax_elem(f), emax[i]);
		ck_assert_int_eq(mx_ocp_format_from_name(names[i], &g), 0);
		ck_assert_int_eq(g, f);
	}
	enum mx_ocp_format g = MX_OCP_FP4_E2M1;
	ck_assert_int_eq(mx_ocp_format_from_name("MXFP8-E5M2", &g), 0);
	ck_assert_int_eq(g, MX_OCP_FP8_E5M2);
	ck_assert_int_eq(mx_ocp_format_from_name("mxfp8", &g), -EINVAL);
	ck_assert_int_eq(mx_ocp_format_from_name("mx6", &g), -EINVAL);
	ck_assert_int_eq(mx_ocp_format_from_name(NULL, &g), -EINVAL);
	ck_assert_int_eq(g, MX_OCP_FP8_E5M2);
	ck_assert_int_eq(mx_ocp_format_from_name("mxint8", NULL), 0);
	ck_assert_str_eq(mx_ocp_format_name((enum mx_ocp_format)6), "invalid");
	ck_assert_uint_eq(mx_ocp_elem_bits((enum mx_ocp_format)-1), 0);
	ck_assert_uint_eq(mx_ocp_block_bytes((enum mx_ocp_format)6), 0);
	ck_assert_int_eq(mx_ocp_emax_elem((enum mx_ocp_format)6), -1);
}
END_TEST

/* ---- errors ----------------------------------------------------------------------------- */

START_TEST(test_errors)
{
	static float src[64 * 32], out[64 * 32];
	static uint8_t buf[64 * 33];
	struct pim_error e = { 0 };

	/* Row blocking needs cols % 32 == 0; column blocking rows % 32 == 0. */
	ck_assert_int_eq(mx_ocp_quantize_tensor(MX_OCP_FP4_E2M1, MX_SRC_FP32, src, 32, 48,
						MX_DIR_ROW, buf, sizeof buf, &e),
			 -EINVAL);
	ck_assert_int_eq(e.code, -EINVAL);
	ck_assert_msg(strstr(e.msg, "row blocking needs cols to be a multiple of 32, got 32x48"),
		      "%s", e.msg);
	ck_assert_int_eq(mx_ocp_quantize_tensor(MX_OCP_FP4_E2M1, MX_SRC_FP32, src, 48, 32,
						MX_DIR_COL, buf, sizeof buf, &e),
			 -EINVAL);
	ck_assert_msg(
		strstr(e.msg, "column blocking needs rows to be a multiple of 32, got 48x32"),
		"%s", e.msg);
	/* 16 is MX9's block, not OCP's. */
	ck_assert_int_eq(mx_ocp_quantize_tensor(MX_OCP_INT8, MX_SRC_FP32, src, 1, 16, MX_DIR_ROW,
						buf, sizeof buf, &e),
			 -EINVAL);
	ck_assert_int_eq(mx_ocp_quantize_tensor(MX_OCP_FP4_E2M1, MX_SRC_FP32, src, 32, 48,
						MX_DIR_COL, buf, sizeof buf, &e),
			 0);
	ck_assert_int_eq(mx_ocp_quantize_tensor(MX_OCP_INT8, MX_SRC_BF16, src, 0, 32, MX_DIR_ROW,
						buf, sizeof buf, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "empty tensor 0x32"), "%s", e.msg);

	/* Output too small: 4 x 64 in mxfp6 = 8 blocks of 25 = 200 bytes. */
	ck_assert_uint_eq(mx_ocp_packed_size(MX_OCP_FP6_E3M2, 4, 64, MX_DIR_ROW), 200);
	ck_assert_int_eq(mx_ocp_quantize_tensor(MX_OCP_FP6_E3M2, MX_SRC_FP32, src, 4, 64,
						MX_DIR_ROW, buf, 199, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "output buffer too small for mxfp6-e3m2 of 4x64: 199 bytes, "
				    "need 200"),
		      "%s", e.msg);
	ck_assert_int_eq(mx_ocp_quantize_tensor(MX_OCP_FP6_E3M2, MX_SRC_FP32, src, 4, 64,
						MX_DIR_ROW, buf, 200, &e),
			 0);

	/* Bad enums and NULL buffers. */
	ck_assert_int_eq(mx_ocp_quantize_tensor((enum mx_ocp_format)9, MX_SRC_FP32, src, 32, 32,
						MX_DIR_ROW, buf, sizeof buf, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "invalid MX OCP format 9"), "%s", e.msg);
	ck_assert_int_eq(mx_ocp_quantize_tensor(MX_OCP_INT8, (enum mx_src)5, src, 32, 32,
						MX_DIR_ROW, buf, sizeof buf, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "invalid source type 5"), "%s", e.msg);
	ck_assert_int_eq(mx_ocp_quantize_tensor(MX_OCP_INT8, MX_SRC_FP32, src, 32, 32,
						(enum mx_dir)2, buf, sizeof buf, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "invalid blocking direction 2"), "%s", e.msg);
	ck_assert_int_eq(mx_ocp_quantize_tensor(MX_OCP_INT8, MX_SRC_FP32, src, 32, 32,
						MX_DIR_ROW, NULL, sizeof buf, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "NULL output buffer"), "%s", e.msg);
	ck_assert_int_eq(mx_ocp_quantize_tensor(MX_OCP_INT8, MX_SRC_FP32, NULL, 32, 32,
						MX_DIR_ROW, buf, sizeof buf, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "NULL source buffer"), "%s", e.msg);
	/* err may be NULL. */
	ck_assert_int_eq(mx_ocp_quantize_tensor(MX_OCP_INT8, MX_SRC_FP32, src, 32, 31,
						MX_DIR_ROW, buf, sizeof buf, NULL),
			 -EINVAL);

	/* Overflow: the size computations must not wrap. */
	ck_assert_uint_eq(mx_ocp_packed_size(MX_OCP_FP8_E4M3, SIZE_MAX / 2, 32, MX_DIR_ROW), 0);
	ck_assert_uint_eq(mx_ocp_packed_size(MX_OCP_FP8_E4M3, (size_t)1 << 62, 32, MX_DIR_COL),
			  0);
	ck_assert_int_eq(mx_ocp_quantize_tensor(MX_OCP_FP8_E4M3, MX_SRC_FP32, src,
						(size_t)1 << 60, 32, MX_DIR_ROW, buf, sizeof buf,
						&e),
			 -EOVERFLOW);
	ck_assert_msg(strstr(e.msg, "too large"), "%s", e.msg);
	ck_assert_uint_eq(mx_ocp_packed_size(MX_OCP_FP4_E2M1, 32, 15, MX_DIR_ROW), 0);
	ck_assert_uint_eq(mx_ocp_packed_size(MX_OCP_FP4_E2M1, 32, 15, MX_DIR_COL), 15 * 17);
	ck_assert_uint_eq(mx_ocp_packed_size((enum mx_ocp_format)-1, 32, 32, MX_DIR_ROW), 0);

	/* Dequantization checks its input length and output count. */
	ck_assert_int_eq(mx_ocp_dequantize_tensor(MX_OCP_FP6_E2M3, buf, 24, 1, 32, MX_DIR_ROW,
						  out, 32, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "packed mxfp6-e2m3 input too short for 1x32: 24 bytes, "
				    "need 25"),
		      "%s", e.msg);
	ck_assert_int_eq(mx_ocp_dequantize_tensor(MX_OCP_FP6_E2M3, buf, 25, 1, 32, MX_DIR_ROW,
						  out, 31, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "output too small for 1x32: 31 elements, need 32"), "%s",
		      e.msg);
	ck_assert_int_eq(mx_ocp_dequantize_tensor(MX_OCP_FP6_E2M3, buf, 25, 32, 1, MX_DIR_ROW,
						  out, 32, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "row blocking needs cols"), "%s", e.msg);
	ck_assert_int_eq(mx_ocp_dequantize_tensor(MX_OCP_FP6_E2M3, NULL, 25, 1, 32, MX_DIR_ROW,
						  out, 32, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "NULL input buffer"), "%s", e.msg);
	ck_assert_int_eq(mx_ocp_dequantize_tensor(MX_OCP_FP6_E2M3, buf, 25, 32, 1, MX_DIR_COL,
						  out, 32, &e),
			 0);
}
END_TEST

/* ---- fast paths ------------------------------------------------------------------------- */

/* Whether this CPU runs an implementation of mx_ocp_quantize_tensor_impl(). */
static bool ocp_impl_runs(enum mx_impl impl)
{
	if (impl == MX_IMPL_AVX512)
		return mx_impl_best() == MX_IMPL_AVX512;
	return impl != MX_IMPL_AVX2;
}

/*
 * One adversarial block of 32 FP32 bit patterns for format f, of a kind chosen at random:
 * random bits (NaN, Inf, subnormals anywhere), zeros, subnormals only, a NaN or Inf among
 * normals, exact ties of f's element values at a random scale (the largest exponents
 * included), values near FLT_MAX, a narrow exponent spread with zeros and subnormals, and
 * Gaussians at scales 2^-140 .. 2^120.
 */
static void adversarial_block(enum mx_ocp_format f, uint32_t u[32])
{
	unsigned kind = (unsigned)(rnd() % 8);
	uint32_t base = (uint32_t)(rnd() % 254);

	for (int j = 0; j < 32; j++) {
		uint64_t r = rnd();
		uint32_t sgn = (uint32_t)(r >> 63) << 31, mant = (uint32_t)r & 0x7fffffu;
		switch (kind) {
		case 0:
			u[j] = (uint32_t)(r >> 16);
			break;
		case 1:
			u[j] = sgn;
			break;
		case 2:
			u[j] = sgn | (mant >> (r >> 40) % 23);
			break;
		case 3:
			u[j] = sgn | (uint32_t)(1 + (r >> 32) % 254) << 23 | mant;
			if (j == (int)(base % 32))
				u[j] = sgn | 0x7f800000u | (base & 1 ? mant : 0);
			break;
		case 4: {
			int s = (int)(base % 255) - 127;
			if (s > 127 - mx_ocp_emax_elem(f))
				s = 127 - mx_ocp_emax_elem(f);
			unsigned mc = max_code(f);
			double v = (double)mx_ocp_elem_max(f);
			if (j > 0) {
				unsigned c = (unsigned)((r >> 8) % mc);
				v = ((double)mx_ocp_elem_value(f, (uint8_t)c) +
				     (double)mx_ocp_elem_value(f, (uint8_t)(c + 1))) / 2;
			}
			u[j] = sgn | f_bits((float)ldexp(v, s));
			break;
		}
		case 5:
			u[j] = sgn | (j % 3 ? 254u : (uint32_t)((r >> 32) % 255)) << 23 | mant;
			break;
		case 6: {
			uint32_t e = base + (uint32_t)((r >> 32) % 12);
			e = e > 254 ? 254 : e;
			if ((r >> 48) % 8 == 0)
				e = 0;
			u[j] = sgn | e << 23 | mant;
			break;
		}
		default:
			u[j] = f_bits((float)(rnd_normal() * ldexp(1.0, (int)(base % 261) - 140)));
			break;
		}
	}
}

/*
 * Every implementation against the reference, byte for byte, for one format, source and
 * direction on rows x cols of adversarial blocks (generated in block order, so ties stay in
 * their blocks in both directions), with a guard zone after the output.
 */
static void ocp_compare(enum mx_ocp_format f, enum mx_src t, size_t rows, size_t cols,
			enum mx_dir dir)
{
	static const enum mx_impl impls[] = { MX_IMPL_GENERIC, MX_IMPL_AVX512, MX_IMPL_AUTO };
	size_t n = rows * cols, sz = mx_ocp_packed_size(f, rows, cols, dir);
	uint32_t *u = malloc(n * sizeof *u);
	uint16_t *b16 = malloc(n * sizeof *b16);
	uint8_t *ref = malloc(sz), *fast = malloc(sz + 64);
	struct pim_error e = { 0 };

	ck_assert(sz > 0 && u && b16 && ref && fast);
	for (size_t b = 0; b < n / 32; b++) {
		uint32_t blk[32];
		adversarial_block(f, blk);
		for (size_t k = 0; k < 32; k++) {
			size_t i = dir == MX_DIR_ROW ? b * 32 + k :
				   ((b % (rows / 32)) * 32 + k) * cols + b / (rows / 32);
			u[i] = blk[k];
			b16[i] = (uint16_t)(blk[k] >> 16);
		}
	}
	const void *src = t == MX_SRC_BF16 ? (const void *)b16 : (const void *)u;
	ck_assert_int_eq(mx_ocp_quantize_tensor_impl(MX_IMPL_REF, f, t, src, rows, cols, dir, ref,
						     sz, &e),
			 0);
	for (size_t i = 0; i < ELEMENTSOF(impls); i++) {
		if (!ocp_impl_runs(impls[i]))
			continue;
		memset(fast, 0xa5, sz + 64);
		ck_assert_int_eq(mx_ocp_quantize_tensor_impl(impls[i], f, t, src, rows, cols, dir,
							     fast, sz, &e),
				 0);
		if (memcmp(ref, fast, sz) != 0) {
			size_t k = 0;
			while (ref[k] == fast[k])
				k++;
			size_t bb = mx_ocp_block_bytes(f);
			ck_abort_msg("%s %s src %d dir %d %zux%zu: byte %zu of block %zu: ref %02x "
				     "fast %02x",
				     mx_ocp_format_name(f), mx_impl_name(impls[i]), t, dir, rows, cols,
				     k % bb, k / bb, ref[k], fast[k]);
		}
		for (size_t k = sz; k < sz + 64; k++)
			CHECK(fast[k] == 0xa5, "%s %s wrote past the end", mx_ocp_format_name(f),
			      mx_impl_name(impls[i]));
	}
	free(u);
	free(b16);
	free(ref);
	free(fast);
}

/* Row shapes with 1, 3 and 4096 blocks; column shapes with odd column counts. */
START_TEST(test_fast_eq_ref)
{
	static const size_t shapes[][3] = { { 1, 32, MX_DIR_ROW },    { 3, 32, MX_DIR_ROW },
					    { 128, 1024, MX_DIR_ROW }, { 32, 1, MX_DIR_COL },
					    { 96, 7, MX_DIR_COL },     { 256, 129, MX_DIR_COL } };

	rng_state = 0xfa57u + (uint64_t)_i;
	for (int i = 0; i < N_FMT; i++)
		for (size_t k = 0; k < ELEMENTSOF(shapes); k++)
			for (int t = 0; t < 2; t++)
				ocp_compare(all_fmt[i], t ? MX_SRC_BF16 : MX_SRC_FP32, shapes[k][0],
					    shapes[k][1], (enum mx_dir)shapes[k][2]);
}
END_TEST

START_TEST(test_impl_errors)
{
	float src[32] = { 0 };
	uint8_t out[33];
	struct pim_error e = { 0 };

	ck_assert_int_eq(mx_ocp_quantize_tensor_impl(MX_IMPL_AVX2, MX_OCP_INT8, MX_SRC_FP32, src,
						     1, 32, MX_DIR_ROW, out, sizeof out, &e),
			 -ENOTSUP);
	ck_assert_msg(strstr(e.msg, "no avx2 MX OCP quantizer"), "%s", e.msg);
	ck_assert_int_eq(mx_ocp_quantize_tensor_impl((enum mx_impl)42, MX_OCP_INT8, MX_SRC_FP32,
						     src, 1, 32, MX_DIR_ROW, out, sizeof out, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "invalid MX implementation 42"), "%s", e.msg);
	if (!ocp_impl_runs(MX_IMPL_AVX512)) {
		ck_assert_int_eq(mx_ocp_quantize_tensor_impl(MX_IMPL_AVX512, MX_OCP_INT8,
							     MX_SRC_FP32, src, 1, 32, MX_DIR_ROW,
							     out, sizeof out, &e),
				 -ENOTSUP);
		ck_assert_msg(strstr(e.msg, "needs a CPU with AVX-512"), "%s", e.msg);
	}
	/* Shape errors come before the implementation is looked at. */
	ck_assert_int_eq(mx_ocp_quantize_tensor_impl(MX_IMPL_AVX512, MX_OCP_INT8, MX_SRC_FP32, src,
						     1, 31, MX_DIR_ROW, out, sizeof out, &e),
			 -EINVAL);
}
END_TEST

/* Threaded quantization is byte-identical to one thread (mx_ocp_quantize_tensor_mt). */
START_TEST(test_mt_eq_single)
{
	enum { R = 64, C = 8192 + 32 }; /* 16448 blocks: 2 ranges of >= 8192 with 3 threads */
	static uint32_t u[R * C];
	static uint8_t one[R * C / 32 * 33], many[R * C / 32 * 33 + 64];
	struct pim_error e = { 0 };

	rng_state = 4242;
	for (size_t b = 0; b < (size_t)R * C / 32; b++)
		adversarial_block(MX_OCP_FP8_E4M3, u + b * 32);
	for (int i = 0; i < N_FMT; i++) {
		enum mx_ocp_format f = all_fmt[i];
		size_t sz = mx_ocp_packed_size(f, R, C, MX_DIR_ROW);
		ck_assert_int_eq(mx_ocp_quantize_tensor_impl(MX_IMPL_REF, f, MX_SRC_FP32, u, R, C,
							     MX_DIR_ROW, one, sz, &e),
				 0);
		memset(many, 0x5a, sz + 64);
		ck_assert_int_eq(mx_ocp_quantize_tensor_mt(3, MX_IMPL_AUTO, f, MX_SRC_FP32, u, R, C,
							   MX_DIR_ROW, many, sz, &e),
				 0);
		ck_assert_msg(memcmp(one, many, sz) == 0, "%s", mx_ocp_format_name(f));
		for (size_t k = sz; k < sz + 64; k++)
			ck_assert_uint_eq(many[k], 0x5a);
	}
	size_t sz = mx_ocp_packed_size(MX_OCP_INT8, R, C, MX_DIR_ROW);
	ck_assert_int_eq(mx_ocp_quantize_tensor_mt(3, MX_IMPL_AUTO, MX_OCP_INT8, MX_SRC_FP32, u, R,
						   C, MX_DIR_ROW, many, sz - 1, &e),
			 -EINVAL);
	ck_assert_msg(strstr(e.msg, "too small for mxint8 of 64x8224"), "%s", e.msg);
}
END_TEST

static Suite *mx_ocp_suite(void)
{
	Suite *s = suite_create("mx_ocp");
	TCase *tc;

	tc = test_case(s, "blocks");
	tcase_add_test(tc, test_hand_e4m3);
	tcase_add_test(tc, test_hand_e5m2);
	tcase_add_test(tc, test_hand_e3m2);
	tcase_add_test(tc, test_hand_e2m3);
	tcase_add_test(tc, test_hand_e2m1);
	tcase_add_test(tc, test_hand_int8);
	tcase_add_test(tc, test_nan_blocks);
	tcase_add_test(tc, test_zero_block);
	tcase_add_test(tc, test_extremes);
	tcase_add_test(tc, test_int8_subnormals_kept_unlike_mx);

	tc = test_case(s, "elements");
	tcase_add_test(tc, test_elem_values);
	tcase_add_test(tc, test_all_codes_roundtrip);

	tc = test_case(s, "random");
	tcase_add_test(tc, test_random_oracle);
	tcase_add_test(tc, test_bf16_source);

	tc = test_case(s, "tensor");
	tcase_add_test(tc, test_row_vs_col);
	tcase_add_test(tc, test_pack_layout);
	tcase_add_test(tc, test_pack_roundtrip);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_errors);

	tc = test_case(s, "fast");
	tcase_add_loop_test(tc, test_fast_eq_ref, 0, 3);
	tcase_add_test(tc, test_impl_errors);
	tcase_add_test(tc, test_mt_eq_single);

	return s;
}

int main(void)
{
	return test_run_suite(mx_ocp_suite());
}
