/* SPDX-License-Identifier: MIT */
/*
 * mx_simd.h: what the MX quantizer's files share (internal to mx.c, mx_avx2.c, mx_avx512.c).
 * mx.c has the reference, the portable path and the dispatch; the SIMD paths live in files of
 * their own, each function compiled for its target by a target attribute (no -m flag), and are
 * only called after mx_have_avx2() / mx_have_avx512() said the CPU runs them.
 */
#ifndef PIMD_MX_SIMD_H
#define PIMD_MX_SIMD_H

#include "mx.h"

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

/* ---- portable fast path (also the SIMD paths' column tails) ---------------------------- */

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

/* An MX4 output of this many bytes or more (per call: per thread's part) is written around
 * the caches by the AVX-512 rows (mx_avx512.c): larger than a core's share of L3, it would
 * only evict lines on its way to memory. */
#define MX_STREAM_MIN ((size_t)4 << 20)

/* Whether this CPU runs the AVX2 / AVX-512 paths (false where not x86-64). */
bool mx_have_avx2(void);
bool mx_have_avx512(void);

#if MX_HAVE_X86
/* Quantize a checked tensor (mx_quantize_tensor_impl()); only after mx_have_avx2() /
 * mx_have_avx512(). */
void mx_quant_avx2(enum mx_format f, enum mx_src t, const void *src, size_t rows, size_t cols,
		   enum mx_dir dir, uint8_t *out);
void mx_quant_avx512(enum mx_format f, enum mx_src t, const void *src, size_t rows, size_t cols,
		     enum mx_dir dir, uint8_t *out);
/* Column blocks (rb, c0 .. cols - 1) of a rows x cols tensor (rblocks = rows / 16) through the
 * AVX2 column code: the columns the AVX-512 path leaves (cols % 16). */
void mx_avx2_col_tail(enum mx_format f, enum mx_src t, const void *src, size_t cols,
		      size_t rblocks, size_t rb, size_t c0, uint8_t *out);

/* ---- AVX2 column helpers, shared with the AVX-512 column path ------------------------- */

#define AVX2 __attribute__((target("avx2")))
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2")))

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
#endif

#endif
