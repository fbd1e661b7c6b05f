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

/* 16 fields (each < 256) in two vectors of u32 -> 16 bytes in element order. */
AVX2_INLINE __m128i avx2_fields_to_bytes(__m256i f0, __m256i f1)
{
	__m256i w = _mm256_packus_epi32(f0, f1); /* 0-3, 8-11, 4-7, 12-15 as u16 */
	w = _mm256_permute4x64_epi64(w, 0xd8);   /* 0-15 */
	return _mm_packus_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
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

/* Masks d0 (pairs 0-3) and d1 (pairs 4-7), each lane of a pair equal -> 8 micro bits. */
AVX2_INLINE unsigned avx2_micro8(__m256i d0, __m256i d1)
{
	unsigned mm = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(d0)) |
		      (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(d1)) << 8;
	/* keep the even bits and squeeze them together */
	mm &= 0x5555;
	mm = (mm | mm >> 1) & 0x3333;
	mm = (mm | mm >> 2) & 0x0f0f;
	return (mm | mm >> 4) & 0xff;
}

AVX2_INLINE __m256i avx2_exp(__m256i x)
{
	return _mm256_and_si256(_mm256_srli_epi32(x, FP32_MANT_BITS), _mm256_set1_epi32(0xff));
}

/* One row block from its 16 elements in x0 (0-7) and x1 (8-15). */
AVX2_INLINE void avx2_row_block(__m256i x0, __m256i x1, unsigned m, uint8_t *out)
{
	__m256i e0 = avx2_exp(x0), e1 = avx2_exp(x1);
	__m256i E = _mm256_max_epu32(e0, e1);
	E = _mm256_max_epu32(E, _mm256_permute2x128_si256(E, E, 1));
	E = _mm256_max_epu32(E, _mm256_shuffle_epi32(E, 0x4e));
	E = _mm256_max_epu32(E, _mm256_shuffle_epi32(E, 0xb1)); /* E in every lane */
	unsigned Es = (unsigned)_mm256_cvtsi256_si32(E);

	if (__builtin_expect(Es == MX_EXP_NAN, 0)) {
		memset(out, 0, 2 + MX_BLOCK * (1 + m) / 8);
		out[0] = MX_EXP_NAN;
		return;
	}
	/* d = both elements of the pair below E: AND each lane with its pair neighbour. */
	__m256i lt0 = _mm256_cmpgt_epi32(E, e0), lt1 = _mm256_cmpgt_epi32(E, e1);
	__m256i d0 = _mm256_and_si256(lt0, _mm256_shuffle_epi32(lt0, 0xb1));
	__m256i d1 = _mm256_and_si256(lt1, _mm256_shuffle_epi32(lt1, 0xb1));
	__m256i f0 = avx2_fields(x0, e0, E, d0, m), f1 = avx2_fields(x1, e1, E, d1, m);

	out[0] = (uint8_t)Es;
	out[1] = (uint8_t)avx2_micro8(d0, d1);
	avx2_store_stream(avx2_fields_to_bytes(f0, f1), m, out + 2);
}

/*
 * BF16 row blocks, a whole block in one vector of 16-bit lanes. A BF16 significand has 8 bits
 * (hidden + 7), so with v16 = v32 >> 16 the FP32 shift sh becomes sh - 16 =
 * 8 - m + (E - e) - d, between 1 and 9 after clamping (v16 < 2^8: 9 rounds everything to 0).
 * AVX2 has no variable 16-bit shift, so v >> sh is mulhi(v, 2^(16 - sh)), with 2^(16 - sh)
 * and 2^(sh - 1) - 1 read from 16-entry byte tables by pshufb (entry 0, never a valid sh,
 * is 0, which also zeroes the byte of each lane whose index is the lane's zero high byte).
 */
AVX2_INLINE void avx2_row_block_bf16(__m256i x, unsigned m, uint8_t *out)
{
	const __m256i ff = _mm256_set1_epi16(0xff), one = _mm256_set1_epi16(1);
	const __m256i t_plo = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, (char)0x80, 0, 0, 0, 0,
					       0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, (char)0x80, 0, 0,
					       0, 0, 0, 0);
	const __m256i t_phi = _mm256_setr_epi8(0, (char)0x80, 0x40, 0x20, 0x10, 8, 4, 2, 1, 0, 0,
					       0, 0, 0, 0, 0, 0, (char)0x80, 0x40, 0x20, 0x10, 8,
					       4, 2, 1, 0, 0, 0, 0, 0, 0, 0);
	const __m256i t_hm1 = _mm256_setr_epi8(0, 0, 1, 3, 7, 15, 31, 63, 127, (char)255, 0, 0,
					       0, 0, 0, 0, 0, 0, 1, 3, 7, 15, 31, 63, 127,
					       (char)255, 0, 0, 0, 0, 0, 0);
	__m256i e = _mm256_and_si256(_mm256_srli_epi16(x, 7), ff);

	/* E = 255 - min(255 - e): phminposuw does the horizontal part in one instruction. */
	__m128i e8 = _mm_max_epu16(_mm256_castsi256_si128(e), _mm256_extracti128_si256(e, 1));
	__m128i mn = _mm_minpos_epu16(_mm_xor_si128(e8, _mm256_castsi256_si128(ff)));
	unsigned Es = 255 ^ ((unsigned)_mm_cvtsi128_si32(mn) & 0xffff);

	if (__builtin_expect(Es == MX_EXP_NAN, 0)) {
		memset(out, 0, 2 + MX_BLOCK * (1 + m) / 8);
		out[0] = MX_EXP_NAN;
		return;
	}
	__m256i E = _mm256_set1_epi16((short)Es);
	/* d: a 32-bit lane is one pair; both 16-bit halves below E <=> the lane is all ones. */
	__m256i d = _mm256_cmpeq_epi32(_mm256_cmpgt_epi16(E, e), _mm256_set1_epi32(-1));
	__m256i v = _mm256_or_si256(_mm256_and_si256(x, _mm256_set1_epi16(0x7f)),
				    _mm256_set1_epi16(0x80));
	v = _mm256_andnot_si256(_mm256_cmpeq_epi16(e, _mm256_setzero_si256()), v);
	__m256i sh = _mm256_add_epi16(_mm256_sub_epi16(E, e), d);
	sh = _mm256_add_epi16(sh, _mm256_set1_epi16((short)(8 - m)));
	sh = _mm256_min_epu16(sh, _mm256_set1_epi16(9));
	__m256i p = _mm256_or_si256(_mm256_shuffle_epi8(t_plo, sh),
				    _mm256_shuffle_epi8(t_phi, _mm256_slli_epi16(sh, 8)));
	__m256i hm1 = _mm256_shuffle_epi8(t_hm1, sh);
	__m256i lsb = _mm256_and_si256(_mm256_mulhi_epu16(v, p), one);
	__m256i q = _mm256_mulhi_epu16(_mm256_add_epi16(_mm256_add_epi16(v, hm1), lsb), p);
	q = _mm256_min_epu16(q, _mm256_set1_epi16((short)((1u << m) - 1)));
	__m256i f = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(x, (int)(15 - m)),
						     _mm256_set1_epi16((short)(1u << m))),
				    q);

	uint16_t hdr = (uint16_t)(Es | (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(d)) << 8);
	memcpy(out, &hdr, 2);
	out += 2;
	if (m == 7) {
		_mm_storeu_si128((__m128i *)out,
				 _mm_packus_epi16(_mm256_castsi256_si128(f),
						  _mm256_extracti128_si256(f, 1)));
		return;
	}
	/* 2 fields per u32 (2w bits), 4 per u64 (4w bits), then 8 per 128-bit half. */
	const unsigned w = 1 + m;
	__m256i y = _mm256_madd_epi16(f, _mm256_set1_epi32(1 | (1 << w) << 16));
	y = _mm256_or_si256(y, _mm256_srli_epi64(y, (int)(32 - 2 * w)));
	y = _mm256_and_si256(y, _mm256_set1_epi64x((1ll << (4 * w)) - 1));
	y = _mm256_or_si256(y, _mm256_slli_epi64(_mm256_shuffle_epi32(y, 0x4e), (int)(4 * w)));
	uint64_t z0 = (uint64_t)_mm_cvtsi128_si64(_mm256_castsi256_si128(y));
	uint64_t z1 = (uint64_t)_mm_cvtsi128_si64(_mm256_extracti128_si256(y, 1));
	uint64_t lo = z0 | z1 << (8 * w);
	if (w == 5) { /* 80 bits */
		uint16_t hi = (uint16_t)(z1 >> (64 - 8 * w));
		memcpy(out, &lo, 8);
		memcpy(out + 8, &hi, 2);
	} else { /* w == 3: 48 bits */
		uint32_t a = (uint32_t)lo;
		uint16_t b = (uint16_t)(lo >> 32);
		memcpy(out, &a, 4);
		memcpy(out + 4, &b, 2);
	}
}

AVX2_INLINE void avx2_row(unsigned m, enum mx_src t, const void *src, size_t nblocks,
			  uint8_t *out)
{
	const size_t bb = 2 + MX_BLOCK * (1 + m) / 8;

	if (t == MX_SRC_BF16) {
		const uint16_t *s = src;
		for (size_t b = 0; b < nblocks; b++, s += MX_BLOCK)
			avx2_row_block_bf16(_mm256_loadu_si256((const __m256i *)s), m, out + b * bb);
	} else {
		const float *s = src;
		for (size_t b = 0; b < nblocks; b++, s += MX_BLOCK) {
			__m256i x0 = _mm256_loadu_si256((const __m256i *)s);
			__m256i x1 = _mm256_loadu_si256((const __m256i *)(s + 8));
			avx2_row_block(x0, x1, m, out + b * bb);
		}
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
 * AVX-512 CPU has AVX2). Same arithmetic as avx2_fields() and avx2_row_block_bf16(), with the
 * variable 16-bit shifts (vpsrlvw) and mask registers that AVX2 lacks; two blocks per step,
 * packed by one byte permutation (vpermt2b) and one store.
 */
/* Source prefetch distance in bytes for the row loops (helps a single core keep enough
 * DRAM reads in flight). */
#define MX_PREFETCH 4096
#define AVX512_TARGET "avx2,avx512f,avx512bw,avx512vl,avx512vbmi,bmi,bmi2"
#define AVX512 __attribute__((target(AVX512_TARGET)))
#define AVX512_INLINE static inline __attribute__((always_inline, target(AVX512_TARGET)))

/*
 * Byte permutation for avx512_pack2(): output byte i of the two packed blocks comes from the
 * merged fields (indices 0-63) or the 4 header bytes E0, micro0, E1, micro1 (64-67). After the
 * merge in avx512_pack2(), 128-bit lane l holds in its low w bytes the stream of fields
 * 8l .. 8l + 7 (8 fields of w bits are w whole bytes); for w = 8 the fields are the low bytes
 * of the 16-bit lanes.
 */
static AVX512 __m512i avx512_pack_index(unsigned m)
{
	const unsigned w = 1 + m, bb = 2 + MX_BLOCK * w / 8;
	uint8_t idx[64] = { 0 };

	for (unsigned k = 0; k < 2; k++) {
		uint8_t *o = idx + k * bb;
		o[0] = (uint8_t)(64 + 2 * k);
		o[1] = (uint8_t)(64 + 2 * k + 1);
		for (unsigned i = 0; i < 2 * w; i++) {
			if (w == 8)
				o[2 + i] = (uint8_t)(2 * (MX_BLOCK * k + i));
			else
				o[2 + i] = (uint8_t)((2 * k + i / w) * 16 + i % w);
		}
	}
	return _mm512_loadu_si512(idx);
}

/*
 * Packs two blocks from their 32 fields (16-bit lanes, block 0 in lanes 0-15) and headers
 * (hdr = E0 | micro0 << 8 | E1 << 16 | micro1 << 24) into out: 2 * bb bytes, or bb if !two.
 * room is the number of bytes that may be written at out; with 64 or more, one full-width
 * store (the bytes past the blocks are rewritten by the next step), else a masked one.
 */
AVX512_INLINE void avx512_pack2(__m512i f, uint32_t hdr, __m512i idx, unsigned m, bool two,
				size_t room, uint8_t *out)
{
	const unsigned w = 1 + m, bb = 2 + MX_BLOCK * w / 8;
	__m512i y = f;

	if (w != 8) {
		/* 2 fields per u32 (2w bits), 4 per u64 (4w bits), 8 per 128-bit lane (w bytes). */
		y = _mm512_madd_epi16(f, _mm512_set1_epi32(1 | (1 << w) << 16));
		y = _mm512_or_si512(y, _mm512_srli_epi64(y, 32 - 2 * w));
		y = _mm512_and_si512(y, _mm512_set1_epi64((1ll << (4 * w)) - 1));
		y = _mm512_or_si512(y, _mm512_slli_epi64(_mm512_shuffle_epi32(y, (_MM_PERM_ENUM)0x4e),
							 4 * w));
	}
	__m512i p = _mm512_permutex2var_epi8(y, idx, _mm512_castsi128_si512(_mm_cvtsi32_si128((int)hdr)));
	unsigned n = two ? 2 * bb : bb;

	if (room >= 64)
		_mm512_storeu_si512(out, p);
	else
		_mm512_mask_storeu_epi8(out, (__mmask64)((1ull << n) - 1), p);
	/* NaN blocks (rare): canonical form over whatever was computed for them. */
	for (unsigned k = 0; k < (two ? 2u : 1u); k++)
		if (__builtin_expect(((hdr >> (16 * k)) & 0xff) == MX_EXP_NAN, 0)) {
			memset(out + k * bb, 0, bb);
			out[k * bb] = MX_EXP_NAN;
		}
}

/*
 * The fields of two BF16 row blocks in one vector of 32 16-bit lanes (block 0 in lanes 0-15)
 * and their headers. Shift counts as in avx2_row_block_bf16(): sh = 8 - m + (E - e) - d
 * clamped at 9, where v < 2^8 rounds to 0; 2^(sh-1) - 1 = 0xffff >> (17 - sh).
 */
AVX512_INLINE __m512i avx512_bf16_fields2(__m512i x, unsigned m, uint32_t *hdr)
{
	const __m512i one = _mm512_set1_epi16(1);
	__m512i e = _mm512_and_si512(_mm512_srli_epi16(x, 7), _mm512_set1_epi16(0xff));

	/* E of each 256-bit half in all of its lanes: swap 128-bit lanes, then 64, 32, 16 bits. */
	__m512i E = _mm512_max_epu16(e, _mm512_shuffle_i64x2(e, e, 0xb1));
	E = _mm512_max_epu16(E, _mm512_shuffle_epi32(E, (_MM_PERM_ENUM)0x4e));
	E = _mm512_max_epu16(E, _mm512_shuffle_epi32(E, (_MM_PERM_ENUM)0xb1));
	E = _mm512_max_epu16(E, _mm512_rol_epi32(E, 16));
	unsigned E0 = (unsigned)_mm_cvtsi128_si32(_mm512_castsi512_si128(E)) & 0xff;
	unsigned E1 = (unsigned)_mm_cvtsi128_si32(_mm512_extracti32x4_epi32(E, 2)) & 0xff;

	/* d = both elements of the pair below E: mask bits j and j + 1, j even. */
	uint32_t lt = (uint32_t)_mm512_cmpgt_epu16_mask(E, e);
	uint32_t pairs = lt & lt >> 1 & 0x55555555u;
	__m512i v = _mm512_maskz_mov_epi16(_mm512_test_epi16_mask(e, e),
					   _mm512_or_si512(_mm512_and_si512(x, _mm512_set1_epi16(0x7f)),
							   _mm512_set1_epi16(0x80)));
	__m512i sh = _mm512_add_epi16(_mm512_sub_epi16(E, e), _mm512_set1_epi16((short)(8 - m)));
	sh = _mm512_mask_sub_epi16(sh, pairs | pairs << 1, sh, one);
	sh = _mm512_min_epu16(sh, _mm512_set1_epi16(9));
	__m512i lsb = _mm512_and_si512(_mm512_srlv_epi16(v, sh), one);
	__m512i hm1 = _mm512_srlv_epi16(_mm512_set1_epi16(-1),
					_mm512_sub_epi16(_mm512_set1_epi16(17), sh));
	__m512i q = _mm512_srlv_epi16(_mm512_add_epi16(_mm512_add_epi16(v, hm1), lsb), sh);
	q = _mm512_min_epu16(q, _mm512_set1_epi16((short)((1u << m) - 1)));
	unsigned micro = (unsigned)_pext_u32(pairs, 0x55555555u);

	*hdr = E0 | (micro & 0xff) << 8 | E1 << 16 | (micro >> 8) << 24;
	return _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(x, 15 - m),
						_mm512_set1_epi16((short)(1u << m))),
			       q);
}

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

/* The 16 fields (as 16-bit lanes) and header (E | micro << 8) of one FP32 row block in 16
 * 32-bit lanes. */
AVX512_INLINE __m256i avx512_f32_fields(__m512i x, unsigned m, uint32_t *hdr)
{
	__m512i e = avx512_exp32(x);
	unsigned Es = _mm512_reduce_max_epu32(e);
	__m512i E = _mm512_set1_epi32((int)Es);
	uint32_t lt = (uint32_t)_mm512_cmpgt_epu32_mask(E, e);
	uint32_t pairs = lt & lt >> 1 & 0x5555u;

	*hdr = Es | (uint32_t)_pext_u32(pairs, 0x5555u) << 8;
	return _mm512_cvtepi32_epi16(avx512_fields32(x, e, E, (__mmask16)(pairs | pairs << 1), m));
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

AVX512_INLINE void avx512_row(unsigned m, enum mx_src t, const void *src, size_t nblocks,
			      uint8_t *out)
{
	const size_t bb = 2 + MX_BLOCK * (1 + m) / 8, total = nblocks * bb;
	const __m512i idx = avx512_pack_index(m);
	uint32_t h0, h1;

	for (size_t b = 0; b < nblocks; b += 2) {
		bool two = b + 1 < nblocks;
		__m512i f;
		if (t == MX_SRC_BF16) {
			const uint16_t *s = (const uint16_t *)src + b * MX_BLOCK;
			_mm_prefetch((const char *)s + MX_PREFETCH, _MM_HINT_T0);
			/* the last odd block alone: upper half masked off, nothing read past it */
			__m512i x = two ? _mm512_loadu_si512(s) : _mm512_maskz_loadu_epi16(0xffff, s);
			f = avx512_bf16_fields2(x, m, &h0);
		} else {
			const float *s = (const float *)src + b * MX_BLOCK;
			__m256i f0 = avx512_f32_fields(_mm512_loadu_si512(s), m, &h0);
			__m256i f1 = _mm256_setzero_si256();
			h1 = 0;
			if (two)
				f1 = avx512_f32_fields(_mm512_loadu_si512(s + MX_BLOCK), m, &h1);
			f = _mm512_inserti64x4(_mm512_castsi256_si512(f0), f1, 1);
			h0 |= h1 << 16;
		}
		avx512_pack2(f, h0, idx, m, two, total - b * bb, out + b * bb);
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
