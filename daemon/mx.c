/* SPDX-License-Identifier: MIT */
/*
 * mx.c: MX9/MX6/MX4 quantization (doc/design.md §5.1). The layout and every edge case are documented
 * in mx.h; this file has three quantizers that must agree bit for bit:
 *   - the scalar reference mx_quantize_block(), written to read like the specification;
 *   - a branch-light portable version working on FP32 bit patterns (quant_bits_generic());
 *   - an AVX2 version chosen at run time with __builtin_cpu_supports("avx2");
 *   - an AVX-512 (F/BW/VL/VBMI + BMI2) version for row blocking, chosen the same way.
 * tests/unit/test_mx.c compares them on millions of random values.
 */
#include "mx.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <strings.h>

#if defined(__x86_64__)
#define MX_HAVE_X86 1
#include <immintrin.h>
#else
#define MX_HAVE_X86 0
#endif

#define FP32_BIAS 127
#define FP32_MANT_BITS 23
#define FP32_MANT_MASK 0x007fffffu
#define FP32_HIDDEN 0x00800000u
#define FP32_QNAN 0x7fc00000u

unsigned mx_mantissa_bits(enum mx_format f)
{
	switch (f) {
	case MX_FMT_MX9:
		return 7;
	case MX_FMT_MX6:
		return 4;
	case MX_FMT_MX4:
		return 2;
	}
	return 0;
}

size_t mx_block_bytes(enum mx_format f)
{
	unsigned m = mx_mantissa_bits(f);

	/* E + 8 microexponent bits + 16 x (1 + m) bits: 18 / 12 / 8 bytes. */
	return m ? 2 + MX_BLOCK * (1 + m) / 8 : 0;
}

const char *mx_format_name(enum mx_format f)
{
	switch (f) {
	case MX_FMT_MX9:
		return "mx9";
	case MX_FMT_MX6:
		return "mx6";
	case MX_FMT_MX4:
		return "mx4";
	}
	return "invalid";
}

int mx_format_from_name(const char *s, enum mx_format *out)
{
	static const enum mx_format all[] = { MX_FMT_MX9, MX_FMT_MX6, MX_FMT_MX4 };

	if (!s)
		return -EINVAL;
	for (size_t i = 0; i < ELEMENTSOF(all); i++)
		if (strcasecmp(s, mx_format_name(all[i])) == 0) {
			if (out)
				*out = all[i];
			return 0;
		}
	return -EINVAL;
}


/* ---- scalar reference ---------------------------------------------------------------- */

/*
 * v / 2^sh rounded to nearest, ties to even, for a significand v < 2^24 and sh >= 1.
 * For sh >= 25 the half-ulp 2^(sh-1) exceeds v, so the result is 0.
 */
static uint32_t rne_shift_right(uint32_t v, unsigned sh)
{
	if (sh >= 25)
		return 0;
	uint32_t q = v >> sh, r = v & ((1u << sh) - 1), half = 1u << (sh - 1);
	if (r > half || (r == half && (q & 1)))
		q++;
	return q;
}

void mx_quantize_block(enum mx_format f, const float in[16], struct mx_block *out)
{
	unsigned m = mx_mantissa_bits(f), e[MX_BLOCK], E = 0;
	uint32_t u[MX_BLOCK];

	memset(out, 0, sizeof *out);
	if (!m)
		return;

	/* Level-1 exponent: the largest FP32 biased exponent. Subnormals (field 0) flush to
	 * zero and so contribute 0; NaN/Inf (field 255) win the max and mark the block. */
	for (unsigned j = 0; j < MX_BLOCK; j++) {
		u[j] = mx_f32_bits(in[j]);
		e[j] = (u[j] >> FP32_MANT_BITS) & 0xff;
		if (e[j] > E)
			E = e[j];
	}
	if (E == MX_EXP_NAN) {
		out->exp = MX_EXP_NAN; /* canonical NaN block: everything else 0 (mx.h) */
		return;
	}
	out->exp = (uint8_t)E;

	for (unsigned i = 0; i < MX_BLOCK / 2; i++) {
		/* Level-2 exponent: d = 1 iff both elements of the pair are below E. */
		unsigned d = e[2 * i] < E && e[2 * i + 1] < E;
		out->micro |= (uint8_t)(d << i);

		for (unsigned j = 2 * i; j < 2 * i + 2; j++) {
			out->sign |= (uint16_t)((u[j] >> 31) << j);
			if (e[j] == 0)
				continue; /* zero or flushed subnormal: M = 0 */
			/*
			 * |x| = (2^23 + frac) * 2^(e - 127 - 23) and the step is
			 * 2^(E - 127 - d + 1 - m), so M = (2^23 + frac) / 2^sh with
			 * sh = 24 - m + (E - e) - d. d = 1 only when e < E, so
			 * sh >= 24 - m >= 17: a single exact rounding of an integer.
			 */
			uint32_t v = FP32_HIDDEN | (u[j] & FP32_MANT_MASK);
			unsigned sh = 24 - m + (E - e[j]) - d;
			uint32_t q = rne_shift_right(v, sh);
			uint32_t max = (1u << m) - 1;
			out->mag[j] = (uint8_t)(q > max ? max : q); /* saturate (doc/design.md §5.1) */
		}
	}
}

void mx_quantize_block_trunc(enum mx_format f, const float in[16], struct mx_block *out)
{
	unsigned m = mx_mantissa_bits(f), e[MX_BLOCK], E = 0;
	uint32_t u[MX_BLOCK];

	memset(out, 0, sizeof *out);
	if (!m)
		return;
	for (unsigned j = 0; j < MX_BLOCK; j++) {
		u[j] = mx_f32_bits(in[j]);
		e[j] = (u[j] >> FP32_MANT_BITS) & 0xff;
		if (e[j] > E)
			E = e[j];
	}
	out->exp = (uint8_t)E; /* 255 is not special here */
	for (unsigned i = 0; i < MX_BLOCK / 2; i++) {
		unsigned d = e[2 * i] < E && e[2 * i + 1] < E;
		out->micro |= (uint8_t)(d << i);
		for (unsigned j = 2 * i; j < 2 * i + 2; j++) {
			/* The hidden bit is set whatever e is; sh >= 24 - m >= 17, and v < 2^24 so
			 * any sh >= 24 gives 0. M < 2^m always: no saturation. */
			uint32_t v = FP32_HIDDEN | (u[j] & FP32_MANT_MASK);
			unsigned sh = 24 - m + (E - e[j]) - d;
			out->sign |= (uint16_t)((u[j] >> 31) << j);
			out->mag[j] = (uint8_t)(sh >= 24 ? 0 : v >> sh);
		}
	}
}

/*
 * M * 2^k as FP32: built directly when the result is normal, else by ldexpf(), which is exact
 * here too since k >= -134 makes the value a multiple of 2^-149 (mx.h).
 */
static float mx_scale(uint32_t M, int k)
{
	if (M == 0)
		return 0.0f;
	int p = 31 - __builtin_clz(M);
	int biased = p + k + FP32_BIAS;
	if (biased >= 1 && biased <= 254)
		return mx_f32_from_bits((uint32_t)biased << FP32_MANT_BITS |
				     ((M << (FP32_MANT_BITS - p)) & FP32_MANT_MASK));
	return ldexpf((float)M, k);
}

void mx_dequantize_block(enum mx_format f, const struct mx_block *b, float out[16])
{
	unsigned m = mx_mantissa_bits(f);

	if (!m || b->exp == MX_EXP_NAN) {
		for (unsigned j = 0; j < MX_BLOCK; j++)
			out[j] = mx_f32_from_bits(FP32_QNAN);
		return;
	}
	for (unsigned j = 0; j < MX_BLOCK; j++) {
		unsigned d = (b->micro >> (j / 2)) & 1;
		int k = (int)b->exp - FP32_BIAS - (int)d + 1 - (int)m; /* doc/design.md §5.1 */
		float v = mx_scale(b->mag[j] & ((1u << m) - 1), k);
		out[j] = (b->sign >> j) & 1 ? -v : v;
	}
}

/* Stream of 16 (1+m)-bit fields, LSB first; at most 16 x 8 = 128 bits. */
typedef unsigned __int128 mx_u128;

static void put_stream(mx_u128 acc, unsigned nbytes, uint8_t *out)
{
	for (unsigned i = 0; i < nbytes; i++)
		out[i] = (uint8_t)(acc >> (8 * i));
}

void mx_pack_block(enum mx_format f, const struct mx_block *b, uint8_t *out)
{
	unsigned m = mx_mantissa_bits(f), w = 1 + m;
	mx_u128 acc = 0;

	if (!m)
		return;
	out[0] = b->exp;
	out[1] = b->micro;
	for (unsigned j = 0; j < MX_BLOCK; j++) {
		uint32_t field = ((uint32_t)(b->sign >> j) & 1) << m | (b->mag[j] & ((1u << m) - 1));
		acc |= (mx_u128)field << (w * j);
	}
	put_stream(acc, MX_BLOCK * w / 8, out + 2);
}

void mx_unpack_block(enum mx_format f, const uint8_t *in, struct mx_block *b)
{
	unsigned m = mx_mantissa_bits(f), w = 1 + m;
	mx_u128 acc = 0;

	memset(b, 0, sizeof *b);
	if (!m)
		return;
	b->exp = in[0];
	b->micro = in[1];
	for (unsigned i = 0; i < MX_BLOCK * w / 8; i++)
		acc |= (mx_u128)in[2 + i] << (8 * i);
	for (unsigned j = 0; j < MX_BLOCK; j++) {
		uint32_t field = (uint32_t)(acc >> (w * j)) & ((1u << w) - 1);
		b->mag[j] = (uint8_t)(field & ((1u << m) - 1));
		b->sign |= (uint16_t)((field >> m) << j);
	}
}

/* ---- shape checks --------------------------------------------------------------------- */

static void decode_block(const void *fmt, const uint8_t *in, float *out)
{
	enum mx_format f = *(const enum mx_format *)fmt;
	struct mx_block b;

	mx_unpack_block(f, in, &b);
	mx_dequantize_block(f, &b, out);
}

static int quantize_row(const void *fmt, enum mx_impl impl, enum mx_src t, const void *src,
			size_t cols, uint8_t *out, size_t out_len, struct pim_error *err)
{
	return mx_quantize_tensor_impl(impl, *(const enum mx_format *)fmt, t, src, 1, cols,
				       MX_DIR_ROW, out, out_len, err);
}

/* The blocked-tensor description of format *f (which must outlive it). */
static int blocked(const enum mx_format *f, struct mx_blocked *m, struct pim_error *err)
{
	if (!mx_mantissa_bits(*f))
		return err_set(err, -EINVAL, "invalid MX format %d", (int)*f);
	*m = (struct mx_blocked){ .block = MX_BLOCK, .block_bytes = mx_block_bytes(*f),
				  .name = mx_format_name(*f), .fmt = f, .decode = decode_block,
				  .quantize_row = quantize_row };
	return 0;
}

int mx_blocked_shape(const struct mx_blocked *m, size_t rows, size_t cols, enum mx_dir dir,
		     size_t *bytes, struct pim_error *err)
{
	uint64_t n, sz;

	if (dir != MX_DIR_ROW && dir != MX_DIR_COL)
		return err_set(err, -EINVAL, "invalid blocking direction %d", (int)dir);
	if (rows == 0 || cols == 0)
		return err_set(err, -EINVAL, "empty tensor %zux%zu: both dimensions must be non-zero",
			       rows, cols);
	if (dir == MX_DIR_ROW && cols % m->block)
		return err_set(err, -EINVAL,
			       "row blocking needs cols to be a multiple of %u, got %zux%zu "
			       "(pad the tensor or block along the other dimension)",
			       m->block, rows, cols);
	if (dir == MX_DIR_COL && rows % m->block)
		return err_set(err, -EINVAL,
			       "column blocking needs rows to be a multiple of %u, got %zux%zu "
			       "(pad the tensor or block along the other dimension)",
			       m->block, rows, cols);
	/* The FP32 source and the FP32 dequantized output must be addressable too. */
	if (!mul_u64(rows, cols, &n) || !mul_u64(n, sizeof(float), &sz) || sz > SIZE_MAX)
		return err_set(err, -EOVERFLOW, "tensor %zux%zu is too large", rows, cols);
	if (!mul_u64(n / m->block, m->block_bytes, &sz) || sz > SIZE_MAX)
		return err_set(err, -EOVERFLOW, "packed size of tensor %zux%zu overflows", rows,
			       cols);
	*bytes = (size_t)sz;
	return 0;
}

int mx_blocked_check_quantize(const struct mx_blocked *m, enum mx_src t, const void *src,
			      size_t rows, size_t cols, enum mx_dir dir, const uint8_t *out,
			      size_t out_len, struct pim_error *err)
{
	size_t need = 0;
	int r = mx_blocked_shape(m, rows, cols, dir, &need, err);

	if (r < 0)
		return r;
	if (t != MX_SRC_FP32 && t != MX_SRC_BF16)
		return err_set(err, -EINVAL, "invalid source type %d", (int)t);
	if (!src || !out)
		return err_set(err, -EINVAL, "NULL %s buffer", src ? "output" : "source");
	if (out_len < need)
		return err_set(err, -EINVAL,
			       "output buffer too small for %s of %zux%zu: %zu bytes, need %zu",
			       m->name, rows, cols, out_len, need);
	return 0;
}

int mx_blocked_dequantize(const struct mx_blocked *m, const uint8_t *in, size_t in_len,
			  size_t rows, size_t cols, enum mx_dir dir, float *out, size_t out_count,
			  struct pim_error *err)
{
	size_t need = 0, nblocks;
	int r = mx_blocked_shape(m, rows, cols, dir, &need, err);

	if (r < 0)
		return r;
	if (!in || !out)
		return err_set(err, -EINVAL, "NULL %s buffer", in ? "output" : "input");
	if (in_len < need)
		return err_set(err, -EINVAL,
			       "packed %s input too short for %zux%zu: %zu bytes, need %zu", m->name,
			       rows, cols, in_len, need);
	if (out_count < rows * cols) /* rows * cols checked by mx_blocked_shape() */
		return err_set(err, -EINVAL,
			       "output too small for %zux%zu: %zu elements, need %zu", rows, cols,
			       out_count, rows * cols);

	nblocks = rows * cols / m->block;
	for (size_t b = 0; b < nblocks; b++) {
		float v[MX_BLOCKED_MAX];

		m->decode(m->fmt, in + b * m->block_bytes, v);
		for (unsigned k = 0; k < m->block; k++)
			out[mx_blocked_elem(m->block, rows, cols, dir, b, k)] = v[k];
	}
	return 0;
}

size_t mx_packed_size(enum mx_format f, size_t rows, size_t cols, enum mx_dir dir)
{
	struct mx_blocked m;
	size_t bytes = 0;

	if (blocked(&f, &m, NULL) < 0 || mx_blocked_shape(&m, rows, cols, dir, &bytes, NULL) < 0)
		return 0;
	return bytes;
}

/* ---- reference tensor quantizer -------------------------------------------------------- */

static void quant_ref(enum mx_format f, enum mx_src t, const void *src, size_t rows, size_t cols,
		      enum mx_dir dir, uint8_t *out, bool trunc)
{
	size_t nblocks = rows * cols / MX_BLOCK, bb = mx_block_bytes(f);

	for (size_t b = 0; b < nblocks; b++) {
		float in[MX_BLOCK];
		struct mx_block blk;

		for (unsigned k = 0; k < MX_BLOCK; k++)
			in[k] = mx_f32_from_bits(
				mx_src_bits(t, src, mx_blocked_elem(MX_BLOCK, rows, cols, dir, b, k)));
		if (trunc)
			mx_quantize_block_trunc(f, in, &blk);
		else
			mx_quantize_block(f, in, &blk);
		mx_pack_block(f, &blk, out + b * bb);
	}
}

/* ---- portable fast path ---------------------------------------------------------------- */

/* Little-endian store of the low n bytes of x (n <= 8); compilers merge it into one store. */
static inline void put_le(uint64_t x, unsigned n, uint8_t *out)
{
	for (unsigned i = 0; i < n; i++)
		out[i] = (uint8_t)(x >> (8 * i));
}

/*
 * One block from 16 FP32 bit patterns straight to packed bytes, written as simple loops over
 * the 16 lanes without data-dependent branches (except the rare NaN block), so compilers can
 * vectorize them where the target has variable shifts. m is a constant after inlining.
 * Same arithmetic as mx_quantize_block(), with the round-half-even written as
 * (v + 2^(sh-1) - 1 + bit sh of v) >> sh.
 */
static inline __attribute__((always_inline)) void quant_bits_generic(const uint32_t u[16],
								     unsigned m, uint8_t *out)
{
	const unsigned w = 1 + m;
	const uint32_t max = (1u << m) - 1;
	uint32_t e[MX_BLOCK], lt[MX_BLOCK], f[MX_BLOCK], E = 0, micro = 0;
	uint64_t lo = 0, hi = 0;

	for (unsigned j = 0; j < MX_BLOCK; j++)
		e[j] = (u[j] >> FP32_MANT_BITS) & 0xff;
	for (unsigned j = 0; j < MX_BLOCK; j++)
		E = e[j] > E ? e[j] : E;
	if (__builtin_expect(E == MX_EXP_NAN, 0)) {
		memset(out, 0, 2 + MX_BLOCK * w / 8);
		out[0] = MX_EXP_NAN;
		return;
	}
	for (unsigned j = 0; j < MX_BLOCK; j++)
		lt[j] = e[j] < E;
	for (unsigned j = 0; j < MX_BLOCK; j++) {
		uint32_t d = lt[j] & lt[j ^ 1]; /* both elements of the pair below E */
		/* Zero significand for zeros and subnormals (flush, doc/design.md §5.1). */
		uint32_t v = (FP32_HIDDEN | (u[j] & FP32_MANT_MASK)) & -(uint32_t)(e[j] != 0);
		uint32_t sh = 24 - m + (E - e[j]) - d;
		sh = sh > 25 ? 25 : sh; /* v < 2^24 rounds to 0 from 25 on */
		uint32_t q = (v + ((1u << (sh - 1)) - 1) + ((v >> sh) & 1)) >> sh;
		q = q > max ? max : q;
		f[j] = (u[j] >> 31) << m | q;
	}
	for (unsigned i = 0; i < MX_BLOCK / 2; i++)
		micro |= (lt[2 * i] & lt[2 * i + 1]) << i;
#pragma GCC unroll 16
	for (unsigned j = 0; j < MX_BLOCK; j++) {
		unsigned bit = w * j;
		if (bit < 64) {
			lo |= (uint64_t)f[j] << bit;
			if (bit + w > 64)
				hi |= (uint64_t)f[j] >> (64 - bit);
		} else {
			hi |= (uint64_t)f[j] << (bit - 64);
		}
	}
	out[0] = (uint8_t)E;
	out[1] = (uint8_t)micro;
	if (w == 3) {
		put_le(lo, 6, out + 2);
	} else {
		put_le(lo, 8, out + 2);
		put_le(hi, MX_BLOCK * w / 8 - 8, out + 10);
	}
}

static inline __attribute__((always_inline)) void
quant_generic_m(unsigned m, enum mx_src t, const void *src, size_t rows, size_t cols,
		enum mx_dir dir, uint8_t *out)
{
	size_t nblocks = rows * cols / MX_BLOCK, bb = 2 + MX_BLOCK * (1 + m) / 8;
	size_t rblocks = rows / MX_BLOCK;
	uint32_t u[MX_BLOCK];

	if (dir == MX_DIR_ROW) {
		for (size_t b = 0; b < nblocks; b++) {
			if (t == MX_SRC_BF16) {
				const uint16_t *s = (const uint16_t *)src + b * MX_BLOCK;
				for (unsigned k = 0; k < MX_BLOCK; k++)
					u[k] = (uint32_t)s[k] << 16;
			} else {
				memcpy(u, (const float *)src + b * MX_BLOCK, sizeof u);
			}
			quant_bits_generic(u, m, out + b * bb);
		}
		return;
	}
	/* Column blocks, rows of 16 at a time so the reads stay close together. */
	for (size_t rb = 0; rb < rblocks; rb++)
		for (size_t c = 0; c < cols; c++) {
			for (unsigned k = 0; k < MX_BLOCK; k++)
				u[k] = mx_src_bits(t, src, (rb * MX_BLOCK + k) * cols + c);
			quant_bits_generic(u, m, out + (c * rblocks + rb) * bb);
		}
}

static void quant_generic(enum mx_format f, enum mx_src t, const void *src, size_t rows,
			  size_t cols, enum mx_dir dir, uint8_t *out)
{
	switch (f) {
	case MX_FMT_MX9:
		quant_generic_m(7, t, src, rows, cols, dir, out);
		break;
	case MX_FMT_MX6:
		quant_generic_m(4, t, src, rows, cols, dir, out);
		break;
	case MX_FMT_MX4:
		quant_generic_m(2, t, src, rows, cols, dir, out);
		break;
	}
}

/* ---- AVX2 fast path -------------------------------------------------------------------- */

#if MX_HAVE_X86
#define AVX2 __attribute__((target("avx2")))
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2")))

/*
 * The per-lane part of the quantizer for 8 elements: x are FP32 bit patterns, e their
 * exponent fields, E the shared exponent in every lane, d all-ones where the microexponent
 * is 1. Returns the (1+m)-bit fields s << m | M. Same result as quant_bits_generic(); the
 * round-half-even is done as (v + 2^(sh-1) - 1 + lsb) >> sh, lsb being bit sh of v, which
 * is the same integer rounding in fewer vector operations.
 */
AVX2_INLINE __m256i avx2_fields(__m256i x, __m256i e, __m256i E, __m256i d, unsigned m)
{
	const __m256i one = _mm256_set1_epi32(1);
	__m256i v = _mm256_or_si256(_mm256_and_si256(x, _mm256_set1_epi32(FP32_MANT_MASK)),
				    _mm256_set1_epi32(FP32_HIDDEN));
	/* Zeros and subnormals flush (doc/design.md §5.1). */
	v = _mm256_andnot_si256(_mm256_cmpeq_epi32(e, _mm256_setzero_si256()), v);
	/* sh = 24 - m + (E - e) - d, d being -1 in the mask: adding it subtracts 1. Clamped at
	 * 25, where v < 2^24 rounds to 0, so the 32-bit arithmetic below cannot wrap. */
	__m256i sh = _mm256_add_epi32(_mm256_sub_epi32(E, e), d);
	sh = _mm256_add_epi32(sh, _mm256_set1_epi32((int)(24 - m)));
	sh = _mm256_min_epu32(sh, _mm256_set1_epi32(25));
	__m256i lsb = _mm256_and_si256(_mm256_srlv_epi32(v, sh), one);
	/* 2^(sh-1) - 1 = 0xffffffff >> (33 - sh) */
	__m256i halfm1 = _mm256_srlv_epi32(_mm256_set1_epi32(-1),
					   _mm256_sub_epi32(_mm256_set1_epi32(33), sh));
	__m256i q = _mm256_srlv_epi32(_mm256_add_epi32(_mm256_add_epi32(v, halfm1), lsb), sh);
	q = _mm256_min_epu32(q, _mm256_set1_epi32((int)((1u << m) - 1))); /* saturate */
	/* sign bit 31 -> bit m of the field */
	__m256i s = _mm256_and_si256(_mm256_srli_epi32(x, (int)(31 - m)),
				     _mm256_set1_epi32((int)(1u << m)));
	return _mm256_or_si256(s, q);
}

/* Packs 16 field bytes (element order) into the (1+m)-bit stream of mx.h at out (byte 2 of
 * the block). */
AVX2_INLINE void avx2_store_stream(__m128i b, unsigned m, uint8_t *out)
{
	const unsigned w = 1 + m;

	if (w == 8) {
		_mm_storeu_si128((__m128i *)out, b);
		return;
	}
	/* Pairwise merge: bytes -> 2w-bit u16 -> 4w-bit u32 -> 8w-bit u64 lanes. */
	__m128i p16 = _mm_maddubs_epi16(b, _mm_set1_epi16((short)(1 | (1 << w) << 8)));
	__m128i p32 = _mm_madd_epi16(p16, _mm_set1_epi32(1 | (1 << (2 * w)) << 16));
	__m128i p64 = _mm_or_si128(_mm_and_si128(p32, _mm_set1_epi64x(0xffffffff)),
				   _mm_slli_epi64(_mm_srli_epi64(p32, 32), (int)(4 * w)));
	/* z0 holds fields 0-7 (8w bits), z1 fields 8-15. */
	uint64_t z0 = (uint64_t)_mm_cvtsi128_si64(p64);
	uint64_t z1 = (uint64_t)_mm_extract_epi64(p64, 1);
	uint64_t lo = z0 | z1 << (8 * w);
	if (w == 5) { /* 80 bits */
		uint16_t hi = (uint16_t)(z1 >> (64 - 8 * w));
		memcpy(out, &lo, 8);
		memcpy(out + 8, &hi, 2);
	} else { /* w == 3: 48 bits */
		uint32_t a = (uint32_t)lo;
		uint16_t b2 = (uint16_t)(lo >> 32);
		memcpy(out, &a, 4);
		memcpy(out + 4, &b2, 2);
	}
}

AVX2_INLINE __m256i avx2_exp(__m256i x)
{
	return _mm256_and_si256(_mm256_srli_epi32(x, FP32_MANT_BITS), _mm256_set1_epi32(0xff));
}

/*
 * Row blocks, four per step, one block per vector of 16 16-bit lanes: BF16 as it is, FP32
 * narrowed as for AVX-512 (avx512_load_f32(): exponent and significand bits 22..15 with a
 * sticky bit, the signs apart). AVX2 has no 16-bit variable shift, so the rounding
 * multiplies: with b = 2^(15 - sh), bit 15 of v * b (vpmullw) is the quotient's lsb, and
 * vpmulhrsw(y, b) = (y * b + 2^14) >> 15 = RHU(y / 2^sh), so
 * RNE(v / 2^sh) = vpmulhrsw(v - 1 + lsb, b); sh >= 16 gives b = 0 and 0.
 */
struct avx2_grp {
	__m256i x[4];   /* block i's lanes */
	__m256i sgn[4]; /* FP32: all ones where negative */
	__m256i e[4];   /* the exponent field in both bytes of each lane */
	__m256i Q;      /* E of block k in dword k of both 128-bit lanes, in every byte */
};

AVX2_INLINE void avx2_load_bf16(struct avx2_grp *g, const uint16_t *s, unsigned n)
{
#pragma GCC unroll 4
	for (unsigned i = 0; i < 4; i++)
		g->x[i] = i < n ? _mm256_loadu_si256((const __m256i *)(s + MX_BLOCK * i))
				: _mm256_setzero_si256();
}

/* e8 << 8 | significand bits 22..15 of 8 FP32 lanes, bit 0 ORed with bits 14..0: with
 * z = x << 1, the carry out of (z & 0xffff) + 0xffff is that sticky bit. */
AVX2_INLINE __m256i avx2_narrow32(__m256i x)
{
	__m256i z = _mm256_slli_epi32(x, 1);
	__m256i c = _mm256_add_epi32(_mm256_and_si256(z, _mm256_set1_epi32(0xffff)),
				     _mm256_set1_epi32(0xffff));
	return _mm256_srli_epi32(_mm256_or_si256(z, c), 16);
}

AVX2_INLINE void avx2_load_f32(struct avx2_grp *g, const float *s, unsigned n)
{
#pragma GCC unroll 4
	for (unsigned i = 0; i < 4; i++) {
		if (i >= n) {
			g->x[i] = g->sgn[i] = _mm256_setzero_si256();
			continue;
		}
		__m256i a = _mm256_loadu_si256((const __m256i *)(s + MX_BLOCK * i));
		__m256i b = _mm256_loadu_si256((const __m256i *)(s + MX_BLOCK * i + 8));
		/* the packs keep 128-bit lanes (0-3, 8-11 | 4-7, 12-15); the permutes restore
		 * the element order */
		g->x[i] = _mm256_permute4x64_epi64(
			_mm256_packus_epi32(avx2_narrow32(a), avx2_narrow32(b)), 0xd8);
		g->sgn[i] = _mm256_permute4x64_epi64(
			_mm256_packs_epi32(_mm256_srai_epi32(a, 31), _mm256_srai_epi32(b, 31)), 0xd8);
	}
}

/* The exponents and E of the four blocks, reduced across the vectors as in avx512_exps(). */
AVX2_INLINE void avx2_exps(struct avx2_grp *g, bool f32)
{
	/* byte 1 of each lane (the exponent, BF16's sign shifted out) into both bytes */
	const __m256i dup = _mm256_setr_epi8(1, 1, 3, 3, 5, 5, 7, 7, 9, 9, 11, 11, 13, 13, 15, 15,
					     1, 1, 3, 3, 5, 5, 7, 7, 9, 9, 11, 11, 13, 13, 15, 15);
	const __m256i swap = _mm256_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13,
					      2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
	__m256 p[4];

#pragma GCC unroll 4
	for (unsigned i = 0; i < 4; i++) {
		__m256i y = f32 ? g->x[i] : _mm256_add_epi16(g->x[i], g->x[i]);
		g->e[i] = _mm256_shuffle_epi8(y, dup);
		p[i] = _mm256_castsi256_ps(g->e[i]);
	}
	/* dwords first (each 128-bit lane's four to one per block), words last */
	__m256 r01 = _mm256_castsi256_ps(
		_mm256_max_epu16(_mm256_castps_si256(_mm256_shuffle_ps(p[0], p[1], 0x88)),
				 _mm256_castps_si256(_mm256_shuffle_ps(p[0], p[1], 0xdd))));
	__m256 r23 = _mm256_castsi256_ps(
		_mm256_max_epu16(_mm256_castps_si256(_mm256_shuffle_ps(p[2], p[3], 0x88)),
				 _mm256_castps_si256(_mm256_shuffle_ps(p[2], p[3], 0xdd))));
	__m256i q = _mm256_max_epu16(_mm256_castps_si256(_mm256_shuffle_ps(r01, r23, 0x88)),
				     _mm256_castps_si256(_mm256_shuffle_ps(r01, r23, 0xdd)));
	q = _mm256_max_epu16(q, _mm256_permute2x128_si256(q, q, 1));
	g->Q = _mm256_max_epu16(q, _mm256_shuffle_epi8(q, swap));
}

/* E < 16 or E = 255 in one of the blocks (see avx512_front()). */
AVX2_INLINE bool avx2_special(__m256i Q)
{
	__m256i t = _mm256_sub_epi8(Q, _mm256_set1_epi8(16)); /* >= 239 exactly then */
	__m256i u = _mm256_subs_epu8(t, _mm256_set1_epi8((char)238));
	return !_mm256_testz_si256(u, u);
}

AVX2_INLINE __m256i avx2_bcast(__m256i Q, unsigned i)
{
	switch (i) {
	case 0:
		return _mm256_shuffle_epi32(Q, 0x00);
	case 1:
		return _mm256_shuffle_epi32(Q, 0x55);
	case 2:
		return _mm256_shuffle_epi32(Q, 0xaa);
	default:
		return _mm256_shuffle_epi32(Q, 0xff);
	}
}

/*
 * The fields of block i and its microexponent bits. b = 2^(15 - sh) is read from a 16-byte
 * table by vpshufb, indexed in each byte of the lane: sh + 0x70 in the low byte and sh + 0x78
 * in the high one, both saturating, so that the byte is 0 (index bit 7 set) from sh = 16, or
 * from sh = 8 for the high byte. sh = c + E - e - d is computed on the duplicated exponent
 * bytes, where E - e needs no borrow.
 */
AVX2_INLINE __m256i avx2_fields16(const struct avx2_grp *g, unsigned i, unsigned m, bool f32,
				  bool careful, unsigned *micro)
{
	const __m256i pow = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, (char)128, 64, 32, 16, 8, 4,
					     2, 1, 0, 0, 0, 0, 0, 0, 0, 0, (char)128, 64, 32, 16, 8,
					     4, 2, 1);
	const unsigned c = f32 ? 9 - m : 8 - m;
	const __m256i E = avx2_bcast(g->Q, i), e = g->e[i], x = g->x[i];
	/* d: neither element of the pair equals E (so both are below it) */
	__m256i d = _mm256_cmpeq_epi32(_mm256_cmpeq_epi16(e, E), _mm256_setzero_si256());

	*micro = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(d));
	__m256i I = _mm256_adds_epu8(_mm256_sub_epi8(E, e),
				     _mm256_set1_epi16((short)((0x78 + c) << 8 | (0x70 + c))));
	I = _mm256_add_epi8(I, d); /* - d: d's bytes are 0xff (a saturated 255 stays >= 0x80) */
	__m256i b = _mm256_shuffle_epi8(pow, I);
	__m256i mant = _mm256_and_si256(x, _mm256_set1_epi16(f32 ? 0xff : 0x7f));
	__m256i v = _mm256_or_si256(mant, _mm256_set1_epi16(f32 ? 0x100 : 0x80));
	__m256i vm1 = _mm256_add_epi16(mant, _mm256_set1_epi16(f32 ? 0xff : 0x7f));
	__m256i lsb = _mm256_srai_epi16(_mm256_mullo_epi16(v, b), 15); /* 0 or -1 */
	__m256i q = _mm256_mulhrs_epi16(_mm256_sub_epi16(vm1, lsb), b);

	q = _mm256_min_epu16(q, _mm256_set1_epi16((short)((1u << m) - 1)));
	if (careful) /* zeros and subnormals flush */
		q = _mm256_andnot_si256(_mm256_cmpeq_epi16(e, _mm256_setzero_si256()), q);
	__m256i s = f32 ? g->sgn[i] : _mm256_srai_epi16(x, 15);
	return _mm256_or_si256(q, _mm256_and_si256(s, _mm256_set1_epi16((short)(1u << m))));
}

/*
 * Blocks a and b (fields fa, fb) at oa and oa + bb: header, then the stream as a 16-byte
 * store at byte 2, which may run past the block (the next block's header and stream are
 * stored after it). w < 8: the fields become bytes, then 2 per 16 bits (vpmaddubsw) and 4 per
 * 32 (vpmaddwd), then 8 per 32 (MX4: w = 3, a pack and vpmaddwd again) or per 64 (MX6: a
 * shift and a merge), w whole bytes each, gathered per block by vpshufb.
 */
AVX2_INLINE void avx2_put_pair(__m256i fa, __m256i fb, const uint16_t hdr[2], unsigned m,
			       uint8_t *oa)
{
	const unsigned w = 1 + m, bb = 2 + MX_BLOCK * w / 8;
	__m256i n = _mm256_packus_epi16(fa, fb); /* a 0-7, b 0-7 | a 8-15, b 8-15 */
	__m256i s;

	if (w == 8) {
		s = _mm256_permute4x64_epi64(n, 0xd8);
	} else {
		__m256i p = _mm256_maddubs_epi16(n, _mm256_set1_epi16((short)(1 | (1 << w) << 8)));
		p = _mm256_madd_epi16(p, _mm256_set1_epi32(1 | (1 << (2 * w)) << 16));
		if (w == 3) {
			/* dwords a 0-7, b 0-7 (24 bits) in both 128-bit lanes' low half */
			p = _mm256_madd_epi16(_mm256_packus_epi32(p, p),
					      _mm256_set1_epi32(1 | (1 << 12) << 16));
			p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 0, 0, 1, 5, 1, 1));
			s = _mm256_shuffle_epi8(p, _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 0, 0, 0, 0, 0,
								    0, 0, 0, 0, 0, 0, 1, 2, 4, 5, 6,
								    0, 0, 0, 0, 0, 0, 0, 0, 0, 0));
		} else {
			/* qwords a 0-7, b 0-7 | a 8-15, b 8-15 (40 bits) */
			const __m256i lo = _mm256_set1_epi64x((1ll << (4 * w)) - 1);
			p = _mm256_or_si256(_mm256_and_si256(p, lo),
					    _mm256_andnot_si256(lo, _mm256_srli_epi64(p, 32 - 4 * w)));
			p = _mm256_permute4x64_epi64(p, 0xd8);
			s = _mm256_shuffle_epi8(p, _mm256_setr_epi8(0, 1, 2, 3, 4, 8, 9, 10, 11, 12, 0,
								    0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 8,
								    9, 10, 11, 12, 0, 0, 0, 0, 0, 0));
		}
	}
	memcpy(oa, &hdr[0], 2);
	_mm_storeu_si128((__m128i *)(oa + 2), _mm256_castsi256_si128(s));
	memcpy(oa + bb, &hdr[1], 2);
	_mm_storeu_si128((__m128i *)(oa + bb + 2), _mm256_extracti128_si256(s, 1));
}

/* One step: n (1-4) blocks to o. With room < 4 blocks + 16 bytes (the last steps), through a
 * buffer, so that nothing past the tensor's end is written. */
AVX2_INLINE void avx2_group(struct avx2_grp *g, unsigned m, bool f32, bool careful, unsigned n,
			    uint8_t *o, size_t room)
{
	const size_t bb = 2 + MX_BLOCK * (1 + m) / 8;
	uint8_t buf[4 * MX_BLOCK_BYTES_MAX + 16];
	uint8_t *at = room >= 4 * bb + 16 ? o : buf;
	uint32_t Ev[8];
	uint16_t hdr[4];
	__m256i f[4];

	_mm256_storeu_si256((__m256i *)Ev, g->Q);
#pragma GCC unroll 4
	for (unsigned i = 0; i < 4; i++) {
		unsigned micro;
		f[i] = avx2_fields16(g, i, m, f32, careful, &micro);
		hdr[i] = (uint16_t)((Ev[i] & 0xff) | micro << 8);
	}
	avx2_put_pair(f[0], f[1], hdr, m, at);
	avx2_put_pair(f[2], f[3], hdr + 2, m, at + 2 * bb);
	if (at == buf)
		memcpy(o, buf, n * bb);
	for (unsigned k = 0; careful && k < n; k++)
		if ((Ev[k] & 0xff) == MX_EXP_NAN) { /* NaN block: canonical */
			memset(o + k * bb, 0, bb);
			o[k * bb] = MX_EXP_NAN;
		}
}

AVX2_INLINE bool avx2_front(struct avx2_grp *g, bool f32, const void *src, size_t b, unsigned n)
{
	if (f32)
		avx2_load_f32(g, (const float *)src + b * MX_BLOCK, n);
	else
		avx2_load_bf16(g, (const uint16_t *)src + b * MX_BLOCK, n);
	avx2_exps(g, f32);
	return avx2_special(g->Q);
}

/* Software-pipelined as avx512_row(). */
AVX2_INLINE void avx2_row(unsigned m, enum mx_src t, const void *src, size_t nblocks,
			  uint8_t *out)
{
	const size_t bb = 2 + MX_BLOCK * (1 + m) / 8, total = nblocks * bb;
	const bool f32 = t == MX_SRC_FP32;
	struct avx2_grp g, next;
	bool careful, careful_next = false;

	if (!nblocks)
		return;
	careful = avx2_front(&g, f32, src, 0, nblocks < 4 ? (unsigned)nblocks : 4);
	for (size_t b = 0; b < nblocks; b += 4) {
		unsigned n = nblocks - b < 4 ? (unsigned)(nblocks - b) : 4;
		size_t b2 = b + 4;

		if (b2 < nblocks)
			careful_next = avx2_front(&next, f32, src, b2,
						  nblocks - b2 < 4 ? (unsigned)(nblocks - b2) : 4);
		if (__builtin_expect(careful, 0))
			avx2_group(&g, m, f32, true, n, out + b * bb, total - b * bb);
		else
			avx2_group(&g, m, f32, false, n, out + b * bb, total - b * bb);
		g = next;
		careful = careful_next;
	}
}

AVX2_INLINE __m256i avx2_load8(enum mx_src t, const void *src, size_t i)
{
	if (t == MX_SRC_BF16)
		return _mm256_slli_epi32(
			_mm256_cvtepu16_epi32(_mm_loadu_si128(
				(const __m128i *)((const uint16_t *)src + i))),
			16);
	return _mm256_loadu_si256((const __m256i *)((const float *)src + i));
}

/*
 * Column blocking's transposition: f[k] holds field k of 8 blocks (one per lane); returns in
 * bytes[l] the 16 fields of block l in element order. Fields are < 256, so two saturating
 * packs narrow them to bytes, leaving per 128-bit half a 4 x 4 (row x lane) byte matrix per
 * group of 4 rows; pshufb transposes each, and 32/64-bit unpacks gather the 4 groups.
 */
AVX2_INLINE void avx2_transpose_fields(const __m256i f[16], __m128i bytes[8])
{
	const __m256i tr = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
					    0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
	__m256i g[4];

	for (unsigned j = 0; j < 4; j++) {
		__m256i a = _mm256_packus_epi32(f[4 * j], f[4 * j + 1]);
		__m256i b = _mm256_packus_epi32(f[4 * j + 2], f[4 * j + 3]);
		/* per half: byte row * 4 + lane, then lane * 4 + row */
		g[j] = _mm256_shuffle_epi8(_mm256_packus_epi16(a, b), tr);
	}
	__m256i c0 = _mm256_unpacklo_epi32(g[0], g[1]), c1 = _mm256_unpackhi_epi32(g[0], g[1]);
	__m256i c2 = _mm256_unpacklo_epi32(g[2], g[3]), c3 = _mm256_unpackhi_epi32(g[2], g[3]);
	__m256i d0 = _mm256_unpacklo_epi64(c0, c2), d1 = _mm256_unpackhi_epi64(c0, c2);
	__m256i d2 = _mm256_unpacklo_epi64(c1, c3), d3 = _mm256_unpackhi_epi64(c1, c3);

	bytes[0] = _mm256_castsi256_si128(d0);
	bytes[1] = _mm256_castsi256_si128(d1);
	bytes[2] = _mm256_castsi256_si128(d2);
	bytes[3] = _mm256_castsi256_si128(d3);
	bytes[4] = _mm256_extracti128_si256(d0, 1);
	bytes[5] = _mm256_extracti128_si256(d1, 1);
	bytes[6] = _mm256_extracti128_si256(d2, 1);
	bytes[7] = _mm256_extracti128_si256(d3, 1);
}

/*
 * Column blocking, 8 columns at a time: lane c of the vector loaded from row r is element r
 * of block (rb, c), so the max and the pair test are vertical (no shuffles), and only the
 * final bit packing needs the 16 fields of one block side by side (avx2_transpose_fields()).
 */
/* Column blocks (rb, c .. c + 7), written to their places in out. */
/* One column block at o: its header and stream, or the canonical NaN block. */
AVX2_INLINE void avx2_col_put(unsigned m, uint32_t E, uint32_t micro, __m128i bytes, uint8_t *o)
{
	if (__builtin_expect(E == MX_EXP_NAN, 0)) {
		memset(o, 0, 2 + MX_BLOCK * (1 + m) / 8);
		o[0] = MX_EXP_NAN;
		return;
	}
	o[0] = (uint8_t)E;
	o[1] = (uint8_t)micro;
	avx2_store_stream(bytes, m, o + 2);
}

AVX2_INLINE void avx2_col8(unsigned m, enum mx_src t, const void *src, size_t cols,
			   size_t rblocks, size_t rb, size_t c, uint8_t *out)
{
	const size_t bb = 2 + MX_BLOCK * (1 + m) / 8, r0 = rb * MX_BLOCK;
	__m256i x[MX_BLOCK], e[MX_BLOCK], f[MX_BLOCK], E = _mm256_setzero_si256();
	__m256i mic = _mm256_setzero_si256();
	__m128i bytes[8];
	uint32_t Ev[8] __attribute__((aligned(32)));
	uint32_t micro[8] __attribute__((aligned(32)));

	for (unsigned k = 0; k < MX_BLOCK; k++) {
		x[k] = avx2_load8(t, src, (r0 + k) * cols + c);
		e[k] = avx2_exp(x[k]);
		E = _mm256_max_epu32(E, e[k]);
	}
	for (unsigned i = 0; i < MX_BLOCK / 2; i++) {
		__m256i d = _mm256_and_si256(_mm256_cmpgt_epi32(E, e[2 * i]),
					     _mm256_cmpgt_epi32(E, e[2 * i + 1]));
		mic = _mm256_or_si256(mic, _mm256_and_si256(d, _mm256_set1_epi32(1 << i)));
		f[2 * i] = avx2_fields(x[2 * i], e[2 * i], E, d, m);
		f[2 * i + 1] = avx2_fields(x[2 * i + 1], e[2 * i + 1], E, d, m);
	}
	avx2_transpose_fields(f, bytes);
	_mm256_store_si256((__m256i *)micro, mic);
	_mm256_store_si256((__m256i *)Ev, E);
	for (unsigned l = 0; l < 8; l++)
		avx2_col_put(m, Ev[l], micro[l], bytes[l], out + ((c + l) * rblocks + rb) * bb);
}

/* Column blocks (rb, c0 .. cols - 1): 8 at a time, then the rest (cols % 8) one by one. */
AVX2_INLINE void avx2_col_from(unsigned m, enum mx_src t, const void *src, size_t cols,
			       size_t rblocks, size_t rb, size_t c0, uint8_t *out)
{
	const size_t bb = 2 + MX_BLOCK * (1 + m) / 8;
	size_t c = c0;

	for (; c + 8 <= cols; c += 8)
		avx2_col8(m, t, src, cols, rblocks, rb, c, out);
	for (; c < cols; c++) {
		uint32_t u[MX_BLOCK];
		for (unsigned k = 0; k < MX_BLOCK; k++)
			u[k] = mx_src_bits(t, src, (rb * MX_BLOCK + k) * cols + c);
		quant_bits_generic(u, m, out + (c * rblocks + rb) * bb);
	}
}

AVX2_INLINE void avx2_col(unsigned m, enum mx_src t, const void *src, size_t rows, size_t cols,
			  uint8_t *out)
{
	const size_t rblocks = rows / MX_BLOCK;

	for (size_t rb = 0; rb < rblocks; rb++)
		avx2_col_from(m, t, src, cols, rblocks, rb, 0, out);
}

AVX2_INLINE void avx2_m(unsigned m, enum mx_src t, const void *src, size_t rows, size_t cols,
			enum mx_dir dir, uint8_t *out)
{
	if (dir == MX_DIR_ROW)
		avx2_row(m, t, src, rows * cols / MX_BLOCK, out);
	else
		avx2_col(m, t, src, rows, cols, out);
}

/* Specialized for each format and source type (constants after inlining, no inner branches). */
static AVX2 void quant_avx2(enum mx_format f, enum mx_src t, const void *src, size_t rows,
			    size_t cols, enum mx_dir dir, uint8_t *out)
{
	unsigned m = mx_mantissa_bits(f);

#define AVX2_CASE(M, T)                                                                            \
	case M * 2 + T:                                                                            \
		avx2_m(M, T, src, rows, cols, dir, out);                                          \
		break
	switch (m * 2 + (t == MX_SRC_BF16)) {
		AVX2_CASE(7, MX_SRC_FP32);
		AVX2_CASE(7, MX_SRC_BF16);
		AVX2_CASE(4, MX_SRC_FP32);
		AVX2_CASE(4, MX_SRC_BF16);
		AVX2_CASE(2, MX_SRC_FP32);
		AVX2_CASE(2, MX_SRC_BF16);
	}
#undef AVX2_CASE
}

/* No cache of our own (the module keeps no state): libgcc's __cpu_model answers in a few loads. */
static bool have_avx2(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2");
}
#else
static bool have_avx2(void) { return false; }
#endif

/* ---- AVX-512 fast path ----------------------------------------------------------------- */

#if MX_HAVE_X86
/*
 * AVX-512 F/BW/VL/VBMI with BMI2, chosen at run time like the AVX2 path (no -march flag: only
 * these functions are compiled for the wider target). Row blocking only; column blocking,
 * whose cost is the strided gather rather than the arithmetic, uses the AVX2 code (every
 * AVX-512 CPU has AVX2). The rows use the variable 16-bit shifts (vpsrlvw), mask registers and
 * byte permutations (vpermt2b) that AVX2 lacks, eight blocks per step (see avx512_row()).
 */
#define AVX512_TARGET "avx2,avx512f,avx512bw,avx512vl,avx512vbmi,bmi,bmi2"
#define AVX512 __attribute__((target(AVX512_TARGET)))
#define AVX512_INLINE static inline __attribute__((always_inline, target(AVX512_TARGET)))

/*
 * The (1+m)-bit fields of 16 FP32 elements in 32-bit lanes: x the bit patterns, e their exponent
 * fields, E the shared exponent of each lane's block, d the lanes whose microexponent is 1; the
 * lane arithmetic of avx2_fields().
 */
AVX512_INLINE __m512i avx512_fields32(__m512i x, __m512i e, __m512i E, __mmask16 d, unsigned m)
{
	const __m512i one = _mm512_set1_epi32(1);
	__m512i v = _mm512_maskz_mov_epi32(
		_mm512_test_epi32_mask(e, e),
		_mm512_or_si512(_mm512_and_si512(x, _mm512_set1_epi32(FP32_MANT_MASK)),
				_mm512_set1_epi32(FP32_HIDDEN)));
	__m512i sh = _mm512_add_epi32(_mm512_sub_epi32(E, e), _mm512_set1_epi32((int)(24 - m)));
	sh = _mm512_mask_sub_epi32(sh, d, sh, one);
	sh = _mm512_min_epu32(sh, _mm512_set1_epi32(25));
	__m512i lsb = _mm512_and_si512(_mm512_srlv_epi32(v, sh), one);
	__m512i hm1 = _mm512_srlv_epi32(_mm512_set1_epi32(-1),
					_mm512_sub_epi32(_mm512_set1_epi32(33), sh));
	__m512i q = _mm512_srlv_epi32(_mm512_add_epi32(_mm512_add_epi32(v, hm1), lsb), sh);
	q = _mm512_min_epu32(q, _mm512_set1_epi32((int)((1u << m) - 1)));
	return _mm512_or_si512(
		_mm512_and_si512(_mm512_srli_epi32(x, 31 - m), _mm512_set1_epi32((int)(1u << m))), q);
}

AVX512_INLINE __m512i avx512_exp32(__m512i x)
{
	return _mm512_and_si512(_mm512_srli_epi32(x, FP32_MANT_BITS), _mm512_set1_epi32(0xff));
}

/*
 * Column blocking, 16 columns at a time: avx2_col8() on 16 lanes (the max and the pair test
 * vertical), the transposition as two of 8 columns.
 */
AVX512_INLINE void avx512_col16(unsigned m, enum mx_src t, const void *src, size_t cols,
				size_t rblocks, size_t rb, size_t c, uint8_t *out)
{
	const size_t bb = 2 + MX_BLOCK * (1 + m) / 8, r0 = rb * MX_BLOCK;
	/* the exponents are taken again where needed: 16 rows of x and of e would not fit in the 32
	 * vector registers */
	__m512i x[MX_BLOCK], E = _mm512_setzero_si512(), mic = _mm512_setzero_si512();
	__m256i lo[MX_BLOCK], hi[MX_BLOCK];
	__m128i bytes[16];
	uint32_t Ev[16] __attribute__((aligned(64)));
	uint32_t micro[16] __attribute__((aligned(64)));

	for (unsigned k = 0; k < MX_BLOCK; k++) {
		size_t i = (r0 + k) * cols + c;
		x[k] = t == MX_SRC_BF16 ? _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(
								    (const __m256i *)((const uint16_t *)src + i))),
							    16)
					: _mm512_loadu_si512((const float *)src + i);
		E = _mm512_max_epu32(E, avx512_exp32(x[k]));
	}
	for (unsigned i = 0; i < MX_BLOCK / 2; i++) {
		__m512i e0 = avx512_exp32(x[2 * i]), e1 = avx512_exp32(x[2 * i + 1]);
		__mmask16 d = _mm512_cmpgt_epu32_mask(E, e0) & _mm512_cmpgt_epu32_mask(E, e1);
		mic = _mm512_mask_or_epi32(mic, d, mic, _mm512_set1_epi32(1 << i));
		for (unsigned j = 0; j < 2; j++) {
			__m512i f = avx512_fields32(x[2 * i + j], j ? e1 : e0, E, d, m);
			lo[2 * i + j] = _mm512_castsi512_si256(f);
			hi[2 * i + j] = _mm512_extracti64x4_epi64(f, 1);
		}
	}
	avx2_transpose_fields(lo, bytes);
	avx2_transpose_fields(hi, bytes + 8);
	_mm512_store_si512(micro, mic);
	_mm512_store_si512(Ev, E);
	for (unsigned l = 0; l < 16; l++)
		avx2_col_put(m, Ev[l], micro[l], bytes[l], out + ((c + l) * rblocks + rb) * bb);
}

AVX512_INLINE void avx512_col(unsigned m, enum mx_src t, const void *src, size_t rows, size_t cols,
			      uint8_t *out)
{
	const size_t rblocks = rows / MX_BLOCK;

	for (size_t rb = 0; rb < rblocks; rb++) {
		size_t c = 0;
		for (; c + 16 <= cols; c += 16)
			avx512_col16(m, t, src, cols, rblocks, rb, c, out);
		avx2_col_from(m, t, src, cols, rblocks, rb, c, out);
	}
}

/*
 * Row blocks, eight per step (256 bytes of BF16, 512 of FP32), in four vectors of 32 16-bit
 * lanes: vector i holds block 2i in lanes 0-15 and block 2i + 1 in lanes 16-31.
 *
 * BF16 lanes are the inputs themselves (s | e8 | m7). FP32 is narrowed to that width first
 * without changing any result: M = RNE(v24 / 2^sh) with sh >= 17 (mx.h), so significand bits
 * 14..0 only ever act as a sticky bit. A lane is e8 << 8 | significand bits 22..15 with the
 * sticky bit (any of bits 14..0 set) ORed into bit 0, below every rounding position; the
 * signs go to a mask.
 */
struct avx512_grp {
	__m512i x[4];      /* the lanes above */
	__mmask32 sign[4]; /* FP32: the signs */
	/* exponents as bytes: eb[j] holds blocks 4j .. 4j + 3, block 4j + l in 128-bit lane l */
	__m512i eb[2];
	__m512i pm[2];     /* the larger exponent of each pair, in both of its bytes */
	/* E: 128-bit lane l holds E of block l in bytes 0-7, of block 4 + l in bytes 8-15 */
	__m512i r;
};

/* The first n (1-8) blocks at s; a short last step reads nothing past them (zeros instead). */
AVX512_INLINE void avx512_load_bf16(struct avx512_grp *g, const uint16_t *s, unsigned n)
{
#pragma GCC unroll 4
	for (unsigned i = 0; i < 4; i++) {
		if (n >= 8) {
			g->x[i] = _mm512_loadu_si512(s + 32 * i);
			continue;
		}
		unsigned k = n <= 2 * i ? 0 : n == 2 * i + 1 ? 16 : 32;
		g->x[i] = _mm512_maskz_loadu_epi16((__mmask32)_bzhi_u64(~0ull, k), s + 32 * i);
	}
}

AVX512_INLINE void avx512_load_f32(struct avx512_grp *g, const float *s, unsigned n,
				   __m512i narrow)
{
	const __m512i low15 = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);

#pragma GCC unroll 4
	for (unsigned i = 0; i < 4; i++) {
		__m512i a, b;
		if (n >= 8) {
			a = _mm512_loadu_si512(s + 32 * i);
			b = _mm512_loadu_si512(s + 32 * i + 16);
		} else {
			a = _mm512_maskz_loadu_epi32(n > 2 * i ? 0xffff : 0, s + 32 * i);
			b = _mm512_maskz_loadu_epi32(n > 2 * i + 1 ? 0xffff : 0, s + 32 * i + 16);
		}
		__m512i ya = _mm512_srli_epi32(a, 15), yb = _mm512_srli_epi32(b, 15);
		ya = _mm512_mask_or_epi32(ya, _mm512_test_epi32_mask(a, low15), ya, one);
		yb = _mm512_mask_or_epi32(yb, _mm512_test_epi32_mask(b, low15), yb, one);
		g->sign[i] = _mm512_kunpackw(_mm512_cmplt_epi32_mask(b, _mm512_setzero_si512()),
					     _mm512_cmplt_epi32_mask(a, _mm512_setzero_si512()));
		g->x[i] = _mm512_permutex2var_epi16(ya, narrow, yb);
	}
}

/* Byte permutations, built once per call (avx512_idx_init()). */
struct avx512_idx {
	__m512i lo;        /* the low bytes of two vectors of 16-bit lanes */
	__m512i hi;        /* their high bytes */
	__m512i spread[2]; /* bytes 32h .. 32h + 31 into the low bytes of 16-bit lanes */
	__m512i out[2]; /* w < 8: blocks 4h .. 4h + 3 from their stream (0-63) and header (64-127) */
	/* w = 8: bytes 0-63 from fields 0-3 and header; 64-127 from fields 0-7, then header */
	__m512i hdr1;
	__mmask64 hdr1_mask;
};

/*
 * The exponents and E of the eight blocks, on bytes: a lane's exponent is its high byte
 * (BF16 once doubled, which shifts the sign out), so 64 of them fill a vector, a block per
 * 128-bit lane, and the reduction takes 7 operations for the eight blocks.
 */
AVX512_INLINE void avx512_exps(struct avx512_grp *g, bool f32, const struct avx512_idx *ix)
{
	/* swaps the two bytes of each 16-bit lane (the elements of a pair) */
	const __m512i swap = _mm512_set_epi64(0x0e0f0c0d0a0b0809ll, 0x0607040502030001ll,
					      0x0e0f0c0d0a0b0809ll, 0x0607040502030001ll,
					      0x0e0f0c0d0a0b0809ll, 0x0607040502030001ll,
					      0x0e0f0c0d0a0b0809ll, 0x0607040502030001ll);
	__m512 p[2];

#pragma GCC unroll 2
	for (unsigned j = 0; j < 2; j++) {
		__m512i a = g->x[2 * j], b = g->x[2 * j + 1];
		if (!f32) {
			a = _mm512_add_epi16(a, a);
			b = _mm512_add_epi16(b, b);
		}
		g->eb[j] = _mm512_permutex2var_epi8(a, ix->hi, b);
		g->pm[j] = _mm512_max_epu8(g->eb[j], _mm512_shuffle_epi8(g->eb[j], swap));
		p[j] = _mm512_castsi512_ps(g->pm[j]);
	}
	/* lane l: dwords 0-1 two partial maxima of block l, dwords 2-3 of block 4 + l */
	__m512i r = _mm512_max_epu8(_mm512_castps_si512(_mm512_shuffle_ps(p[0], p[1], 0x88)),
				    _mm512_castps_si512(_mm512_shuffle_ps(p[0], p[1], 0xdd)));
	r = _mm512_max_epu8(r, _mm512_shuffle_epi32(r, (_MM_PERM_ENUM)0xb1));
	g->r = _mm512_max_epu8(r, _mm512_rol_epi32(r, 16));
}

/*
 * The (1+m)-bit fields s << m | M of vector i (16-bit lanes) and the microexponent masks.
 * With sh1 = sh - 1 (sh as in mx.h, counted on the lane's significand v: 8 bits for BF16,
 * 9 for narrowed FP32): t = v >> sh1 holds the quotient's lsb in bit 1, and
 * RNE(v / 2^sh) = RHU((v - 1 + lsb) / 2^sh) = ((y >> sh1) + 1) >> 1 (vpavgw with 0).
 * A shift of 16 or more gives 0, so no clamp is needed. careful: zeros and subnormals are
 * flushed by a test; otherwise every block has E >= 16, where their shift is at least 16.
 */
AVX512_INLINE __m512i avx512_fields(const struct avx512_grp *g, unsigned i, __m512i sh1,
				    unsigned m, bool f32, bool careful)
{
	const __m512i one = _mm512_set1_epi16(1), x = g->x[i];
	const __m512i max = _mm512_set1_epi16((short)((1u << m) - 1));
	/* v = x & 0x7f | 0x80, or x & 0xff | 0x100 */
	__m512i v = _mm512_ternarylogic_epi32(x, _mm512_set1_epi16(f32 ? 0xff : 0x7f),
					      _mm512_set1_epi16(f32 ? 0x100 : 0x80), 0xea);
	__mmask32 even = _mm512_testn_epi16_mask(_mm512_srlv_epi16(v, sh1), _mm512_set1_epi16(2));
	__m512i y = _mm512_mask_sub_epi16(v, even, v, one);
	__m512i q = _mm512_avg_epu16(_mm512_srlv_epi16(y, sh1), _mm512_setzero_si512());

	if (careful)
		q = _mm512_maskz_min_epu16(
			_mm512_test_epi16_mask(x, _mm512_set1_epi16(f32 ? 0xff00 : 0x7f80)), q, max);
	else
		q = _mm512_min_epu16(q, max);
	if (f32)
		return _mm512_mask_add_epi16(q, g->sign[i], q, _mm512_set1_epi16((short)(1u << m)));
	/* q | (x >> (15 - m)) & 1 << m */
	return _mm512_ternarylogic_epi32(q, _mm512_srli_epi16(x, 15 - m),
					 _mm512_set1_epi16((short)(1u << m)), 0xf8);
}

/* Where the header vector of half h (avx512_group()) has E and the micro bits of its block k
 * (0-3). */
static unsigned avx512_hpos(unsigned r, unsigned k)
{
	return r == 0 ? 16 * k : 4 + k;
}

static AVX512 void avx512_idx_init(struct avx512_idx *x, unsigned m)
{
	const unsigned w = 1 + m, bb = 2 + MX_BLOCK * w / 8;
	uint8_t lo[64], o[2][64] = { { 0 } }, h1[64] = { 0 };
	uint64_t hm = 0;

	for (unsigned k = 0; k < 64; k++)
		lo[k] = (uint8_t)(k < 32 ? 2 * k : 64 + 2 * (k - 32));
	x->lo = _mm512_loadu_si512(lo);
	for (unsigned k = 0; k < 64; k++)
		lo[k]++;
	x->hi = _mm512_loadu_si512(lo);
	for (unsigned h = 0; h < 2; h++) {
		for (unsigned k = 0; k < 64; k++)
			lo[k] = (uint8_t)(32 * h + k / 2); /* odd bytes are masked off */
		x->spread[h] = _mm512_loadu_si512(lo);
	}
	for (unsigned h = 0; h < 2; h++)
		for (unsigned p = 0; p < 64; p++) {
			unsigned P = 64 * h * (w == 8) + p, k = P / bb, r = P % bb;
			uint8_t *at = &o[h][p];
			if (w != 8) {
				if (k >= 4)
					continue;
				k += 4 * h; /* block of the group */
			}
			if (r < 2) {
				unsigned hb = avx512_hpos(r, k % 4);
				if (w == 8 && h == 1) {
					h1[p] = (uint8_t)hb;
					hm |= 1ull << p;
				} else {
					*at = (uint8_t)(64 + hb);
				}
			} else if (w != 8) {
				/* stream byte j of block k: w bytes of each of its two qwords */
				unsigned j = r - 2, kk = k % 4;
				*at = (uint8_t)(16 * kk + (j < w ? j : 8 + j - w));
			} else {
				*at = (uint8_t)(16 * k + r - 2); /* 0-63 fields 0-3, 64-127 fields 4-7 */
			}
		}
	x->out[0] = _mm512_loadu_si512(o[0]);
	x->out[1] = _mm512_loadu_si512(o[1]);
	x->hdr1 = _mm512_loadu_si512(h1);
	x->hdr1_mask = hm;
}

/* v's first min(room, 64) bytes at o. */
AVX512_INLINE void avx512_put(uint8_t *o, __m512i v, size_t room)
{
	if (room >= 64)
		_mm512_storeu_si512(o, v);
	else if (room)
		_mm512_mask_storeu_epi8(o, (__mmask64)_bzhi_u64(~0ull, (unsigned)room), v);
}

/*
 * Packs and stores the eight blocks of a step at o (room: bytes that may be written there).
 * w < 8: the fields of four blocks become bytes, then 2 per 16 bits (vpmaddubsw), 4 per 32
 * (vpmaddwd) and 8 per 64: w whole bytes per qword, which one byte permutation puts in place
 * beside the header bytes. MX6's two stores overlap; none writes more than room allows.
 */
AVX512_INLINE void avx512_put_group(const __m512i f[4], const __m512i H[2],
				    const struct avx512_idx *ix, unsigned m, uint8_t *o, size_t room)
{
	const unsigned w = 1 + m, bb = 2 + MX_BLOCK * w / 8;
	__m512i n01 = _mm512_permutex2var_epi8(f[0], ix->lo, f[1]);
	__m512i n23 = _mm512_permutex2var_epi8(f[2], ix->lo, f[3]);

	if (w == 8) {
		__m512i o1 = _mm512_permutex2var_epi8(n01, ix->out[1], n23);
		o1 = _mm512_mask_permutexvar_epi8(o1, ix->hdr1_mask, ix->hdr1, H[1]);
		avx512_put(o, _mm512_permutex2var_epi8(n01, ix->out[0], H[0]), room);
		avx512_put(o + 64, o1, room > 64 ? room - 64 : 0);
		if (room >= 144)
			_mm_storeu_si128((__m128i *)(o + 128), _mm512_extracti32x4_epi32(n23, 3));
		else if (room > 128)
			_mm_mask_storeu_epi8(o + 128, (__mmask16)_bzhi_u32(~0u, (unsigned)room - 128),
					     _mm512_extracti32x4_epi32(n23, 3));
		return;
	}
	__m512i p[2];
#pragma GCC unroll 2
	for (unsigned h = 0; h < 2; h++) {
		__m512i n = h ? n23 : n01;
		__m512i y = _mm512_maddubs_epi16(n, _mm512_set1_epi16((short)(1 | (1 << w) << 8)));
		y = _mm512_madd_epi16(y, _mm512_set1_epi32(1 | (1 << (2 * w)) << 16));
		/* low 4w bits from the low dword, the next 4w from the high one */
		y = _mm512_ternarylogic_epi64(y, _mm512_srli_epi64(y, 32 - 4 * w),
					      _mm512_set1_epi64((1ll << (4 * w)) - 1), 0xe4);
		p[h] = _mm512_permutex2var_epi8(y, ix->out[h], H[h]);
	}
	if (w == 3) { /* 2 x 32 bytes: one store */
		avx512_put(o, _mm512_inserti64x4(p[0], _mm512_castsi512_si256(p[1]), 1), room);
		return;
	}
	avx512_put(o, p[0], room);
	avx512_put(o + 4 * bb, p[1], room > 4 * bb ? room - 4 * bb : 0);
}

/*
 * One step: n (1-8) blocks from src to o. The shift counts sh1 = c + E - e - d (see
 * avx512_fields()) are computed on bytes too, then spread to 16-bit lanes: E - e needs no
 * borrow, and the saturating add only ever caps counts that give 0 anyway.
 */
AVX512_INLINE void avx512_group(struct avx512_grp *g, unsigned m, bool f32, bool careful,
				const struct avx512_idx *ix, unsigned n, uint8_t *o, size_t room)
{
	const unsigned bb = 2 + MX_BLOCK * (1 + m) / 8;
	const __m512i c = _mm512_set1_epi8((char)(f32 ? 8 - m : 7 - m));
	__m512i sh[2], H[2], f[4];

#pragma GCC unroll 2
	for (unsigned j = 0; j < 2; j++) {
		__m512i E = _mm512_shuffle_epi32(g->r, j ? (_MM_PERM_ENUM)0xaa : (_MM_PERM_ENUM)0x00);
		__mmask64 d = _mm512_cmplt_epu8_mask(g->pm[j], E);
		__m512i t = _mm512_adds_epu8(_mm512_sub_epi8(E, g->eb[j]), c);
		sh[j] = _mm512_mask_sub_epi8(t, d, t, _mm512_set1_epi8(1));
		/* the header: E of block k at byte 16k, the micro bits (d's even bits) at 4 + k */
		H[j] = _mm512_mask_set1_epi32(E, 0x0002,
					      (int)_pext_u64(d, 0x5555555555555555ull));
	}
#pragma GCC unroll 4
	for (unsigned i = 0; i < 4; i++)
		f[i] = avx512_fields(g, i,
				     _mm512_maskz_permutexvar_epi8(0x5555555555555555ull,
								   ix->spread[i % 2], sh[i / 2]),
				     m, f32, careful);
	avx512_put_group(f, H, ix, m, o, room);
	if (!careful)
		return;
	/* NaN blocks: the canonical form over what was computed for them */
	uint64_t nan = _mm512_cmpeq_epi8_mask(g->r, _mm512_set1_epi8((char)MX_EXP_NAN)) &
		       0x0101010101010101ull;
	while (nan) {
		unsigned bit = (unsigned)__builtin_ctzll(nan), b = bit / 16 + (bit % 16 ? 4 : 0);
		nan &= nan - 1;
		if (b < n) {
			memset(o + b * bb, 0, bb);
			o[b * bb] = MX_EXP_NAN;
		}
	}
}

/* Loads blocks [b, b + n) and finds their exponents; whether they need the careful step. */
AVX512_INLINE bool avx512_front(struct avx512_grp *g, bool f32, const void *src, size_t b,
				unsigned n, __m512i narrow, const struct avx512_idx *ix)
{
	/* No software prefetch: the hardware's stream prefetch does as well here (measured: 1 to
	 * 4 lines a step, 4 to 32 KiB ahead, into L1 or L2, and prefetchw on the output). */
	if (f32)
		avx512_load_f32(g, (const float *)src + b * MX_BLOCK, n, narrow);
	else
		avx512_load_bf16(g, (const uint16_t *)src + b * MX_BLOCK, n);
	avx512_exps(g, f32, ix);
	/* E < 16 (zeros and subnormals need their own flush) or E = 255 (a NaN block): both
	 * rare, so the common step leaves their tests out */
	return _mm512_cmpge_epu8_mask(_mm512_sub_epi8(g->r, _mm512_set1_epi8(16)),
				      _mm512_set1_epi8((char)239)) != 0;
}

/*
 * Software-pipelined: the next step's loads and exponent reduction come before this step's
 * fields and packing in program order, so the core overlaps the two dependency chains.
 */
AVX512_INLINE void avx512_row(unsigned m, enum mx_src t, const void *src, size_t nblocks,
			      uint8_t *out)
{
	const size_t bb = 2 + MX_BLOCK * (1 + m) / 8, total = nblocks * bb;
	const bool f32 = t == MX_SRC_FP32;
	const __m512i narrow = _mm512_set_epi16(62, 60, 58, 56, 54, 52, 50, 48, 46, 44, 42, 40, 38,
						36, 34, 32, 30, 28, 26, 24, 22, 20, 18, 16, 14, 12,
						10, 8, 6, 4, 2, 0);
	struct avx512_idx ix;
	struct avx512_grp g, next;
	bool careful, careful_next = false;

	if (!nblocks)
		return;
	avx512_idx_init(&ix, m);
	careful = avx512_front(&g, f32, src, 0, nblocks < 8 ? (unsigned)nblocks : 8, narrow, &ix);
	for (size_t b = 0; b < nblocks; b += 8) {
		unsigned n = nblocks - b < 8 ? (unsigned)(nblocks - b) : 8;
		size_t b2 = b + 8;

		if (b2 < nblocks)
			careful_next = avx512_front(&next, f32, src, b2,
						    nblocks - b2 < 8 ? (unsigned)(nblocks - b2) : 8,
						    narrow, &ix);
		if (__builtin_expect(careful, 0))
			avx512_group(&g, m, f32, true, &ix, n, out + b * bb, total - b * bb);
		else
			avx512_group(&g, m, f32, false, &ix, n, out + b * bb, total - b * bb);
		g = next;
		careful = careful_next;
	}
}

AVX512_INLINE void avx512_m(unsigned m, enum mx_src t, const void *src, size_t rows,
			    size_t cols, enum mx_dir dir, uint8_t *out)
{
	if (dir == MX_DIR_ROW)
		avx512_row(m, t, src, rows * cols / MX_BLOCK, out);
	else
		avx512_col(m, t, src, rows, cols, out);
}

/* Specialized for each format and source type, as quant_avx2(). */
static AVX512 void quant_avx512(enum mx_format f, enum mx_src t, const void *src, size_t rows,
				size_t cols, enum mx_dir dir, uint8_t *out)
{
	unsigned m = mx_mantissa_bits(f);

#define AVX512_CASE(M, T)                                                                          \
	case M * 2 + T:                                                                            \
		avx512_m(M, T, src, rows, cols, dir, out);                                        \
		break
	switch (m * 2 + (t == MX_SRC_BF16)) {
		AVX512_CASE(7, MX_SRC_FP32);
		AVX512_CASE(7, MX_SRC_BF16);
		AVX512_CASE(4, MX_SRC_FP32);
		AVX512_CASE(4, MX_SRC_BF16);
		AVX512_CASE(2, MX_SRC_FP32);
		AVX512_CASE(2, MX_SRC_BF16);
	}
#undef AVX512_CASE
}

static bool have_avx512(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f") &&
	       __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
	       __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("bmi") &&
	       __builtin_cpu_supports("bmi2");
}
#else
static bool have_avx512(void) { return false; }
#endif

/* ---- tensor entry points --------------------------------------------------------------- */

const char *mx_impl_name(enum mx_impl impl)
{
	switch (impl) {
	case MX_IMPL_AUTO:
		return "auto";
	case MX_IMPL_REF:
		return "ref";
	case MX_IMPL_GENERIC:
		return "generic";
	case MX_IMPL_AVX2:
		return "avx2";
	case MX_IMPL_AVX512:
		return "avx512";
	}
	return "invalid";
}

enum mx_impl mx_impl_best(void)
{
	if (have_avx512())
		return MX_IMPL_AVX512;
	return have_avx2() ? MX_IMPL_AVX2 : MX_IMPL_GENERIC;
}

int mx_quantize_tensor_impl(enum mx_impl impl, enum mx_format f, enum mx_src src_type,
			    const void *src, size_t rows, size_t cols, enum mx_dir dir,
			    uint8_t *out, size_t out_len, struct pim_error *err)
{
	struct mx_blocked m;
	int r;

	if ((r = blocked(&f, &m, err)) < 0 ||
	    (r = mx_blocked_check_quantize(&m, src_type, src, rows, cols, dir, out, out_len, err)) < 0)
		return r;
	if (impl == MX_IMPL_AUTO)
		impl = mx_impl_best();

	switch (impl) {
	case MX_IMPL_REF:
		quant_ref(f, src_type, src, rows, cols, dir, out, false);
		return 0;
	case MX_IMPL_GENERIC:
		quant_generic(f, src_type, src, rows, cols, dir, out);
		return 0;
	case MX_IMPL_AVX2:
#if MX_HAVE_X86
		if (have_avx2()) {
			quant_avx2(f, src_type, src, rows, cols, dir, out);
			return 0;
		}
#endif
		return err_set(err, -ENOTSUP, "the avx2 MX quantizer needs a CPU with AVX2");
	case MX_IMPL_AVX512:
#if MX_HAVE_X86
		if (have_avx512()) {
			quant_avx512(f, src_type, src, rows, cols, dir, out);
			return 0;
		}
#endif
		return err_set(err, -ENOTSUP,
			       "the avx512 MX quantizer needs a CPU with AVX-512 F/BW/VL/VBMI and BMI2");
	default:
		return err_set(err, -EINVAL, "invalid MX implementation %d", (int)impl);
	}
}

int mx_quantize_tensor(enum mx_format f, enum mx_src src_type, const void *src, size_t rows,
		       size_t cols, enum mx_dir dir, uint8_t *out, size_t out_len,
		       struct pim_error *err)
{
	return mx_quantize_tensor_impl(MX_IMPL_AUTO, f, src_type, src, rows, cols, dir, out,
				       out_len, err);
}

int mx_quantize_tensor_ref(enum mx_format f, enum mx_src src_type, const void *src, size_t rows,
			   size_t cols, enum mx_dir dir, uint8_t *out, size_t out_len,
			   struct pim_error *err)
{
	return mx_quantize_tensor_impl(MX_IMPL_REF, f, src_type, src, rows, cols, dir, out,
				       out_len, err);
}

int mx_quantize_tensor_trunc(enum mx_format f, enum mx_src src_type, const void *src, size_t rows,
			     size_t cols, enum mx_dir dir, uint8_t *out, size_t out_len,
			     struct pim_error *err)
{
	struct mx_blocked m;
	int r;

	if ((r = blocked(&f, &m, err)) < 0 ||
	    (r = mx_blocked_check_quantize(&m, src_type, src, rows, cols, dir, out, out_len, err)) < 0)
		return r;
	quant_ref(f, src_type, src, rows, cols, dir, out, true);
	return 0;
}

/* ---- threads ----------------------------------------------------------------------------- */

unsigned mx_threads_allowed(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof set, &set) < 0)
		return 1;
	int n = CPU_COUNT(&set);
	return n < 1 ? 1 : n > MX_THREADS_MAX ? MX_THREADS_MAX : (unsigned)n;
}

struct mx_split_part {
	int (*fn)(void *arg, size_t b0, size_t b1, struct pim_error *err);
	void *arg;
	size_t b0, b1;
	int ret;
	struct pim_error err;
};

static void *mx_split_thread(void *p)
{
	struct mx_split_part *part = p;

	part->ret = part->fn(part->arg, part->b0, part->b1, &part->err);
	return NULL;
}

int mx_split_blocks(unsigned threads, size_t nblocks, size_t min_blocks,
		    int (*fn)(void *arg, size_t b0, size_t b1, struct pim_error *err), void *arg,
		    struct pim_error *err)
{
	struct mx_split_part parts[MX_THREADS_MAX];
	pthread_t tid[MX_THREADS_MAX];
	bool started[MX_THREADS_MAX] = { false };
	size_t n;

	if (threads == 0)
		threads = mx_threads_allowed();
	if (threads > MX_THREADS_MAX)
		threads = MX_THREADS_MAX;
	if (min_blocks == 0)
		min_blocks = 1;
	n = nblocks / min_blocks;
	if (n > threads)
		n = threads;
	if (n <= 1)
		return fn(arg, 0, nblocks, err);

	for (size_t i = 0; i < n; i++) {
		parts[i] = (struct mx_split_part){ .fn = fn, .arg = arg, .b0 = nblocks * i / n,
						   .b1 = nblocks * (i + 1) / n };
		/* Part 0 runs here; a part whose thread cannot start runs here too. */
		if (i > 0)
			started[i] = pthread_create(&tid[i], NULL, mx_split_thread, &parts[i]) == 0;
	}
	mx_split_thread(&parts[0]);
	for (size_t i = 1; i < n; i++) {
		if (started[i])
			pthread_join(tid[i], NULL);
		else
			mx_split_thread(&parts[i]);
	}
	for (size_t i = 0; i < n; i++)
		if (parts[i].ret < 0) {
			if (err)
				*err = parts[i].err;
			return parts[i].ret;
		}
	return 0;
}

struct blocked_job {
	const struct mx_blocked *m;
	enum mx_impl impl;
	enum mx_src t;
	const void *src;
	uint8_t *out;
};

/* Blocks [b0, b1) of a row-blocked tensor are the 1 x block·(b1 - b0) tensor at block b0. */
static int blocked_part(void *arg, size_t b0, size_t b1, struct pim_error *err)
{
	const struct blocked_job *j = arg;
	size_t elem = j->t == MX_SRC_BF16 ? 2 : 4, bb = j->m->block_bytes;

	return j->m->quantize_row(j->m->fmt, j->impl, j->t,
				  (const char *)j->src + b0 * j->m->block * elem,
				  (b1 - b0) * j->m->block, j->out + b0 * bb, (b1 - b0) * bb, err);
}

int mx_blocked_quantize_mt(const struct mx_blocked *m, unsigned threads, enum mx_impl impl,
			   enum mx_src t, const void *src, size_t nblocks, uint8_t *out,
			   size_t min_blocks, struct pim_error *err)
{
	struct blocked_job job = { m, impl, t, src, out };

	return mx_split_blocks(threads, nblocks, min_blocks, blocked_part, &job, err);
}

int mx_quantize_tensor_mt(unsigned threads, enum mx_impl impl, enum mx_format f,
			  enum mx_src src_type, const void *src, size_t rows, size_t cols,
			  enum mx_dir dir, uint8_t *out, size_t out_len, struct pim_error *err)
{
	struct mx_blocked m;

	/* All argument errors, reported for the whole tensor, before anything is split. */
	if (blocked(&f, &m, NULL) < 0 || dir != MX_DIR_ROW || threads == 1 ||
	    mx_blocked_check_quantize(&m, src_type, src, rows, cols, dir, out, out_len, NULL) < 0)
		return mx_quantize_tensor_impl(impl, f, src_type, src, rows, cols, dir, out,
					       out_len, err);
	return mx_blocked_quantize_mt(&m, threads, impl, src_type, src, rows * cols / MX_BLOCK, out,
				      MX_MT_MIN_BLOCKS, err);
}

int mx_dequantize_tensor(enum mx_format f, const uint8_t *in, size_t in_len, size_t rows,
			 size_t cols, enum mx_dir dir, float *out, size_t out_count,
			 struct pim_error *err)
{
	struct mx_blocked m;
	int r = blocked(&f, &m, err);

	return r < 0 ? r : mx_blocked_dequantize(&m, in, in_len, rows, cols, dir, out, out_count, err);
}
