/* SPDX-License-Identifier: MIT */
/*
 * mx_avx2.c: the AVX2 MX quantizer (rows four blocks per step, columns eight at a time), chosen
 * at run time with __builtin_cpu_supports("avx2"); bit-identical to the reference in mx.c.
 */
#include "mx_simd.h"

#if MX_HAVE_X86

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

AVX2_INLINE __m256i avx2_exp(__m256i x)
{
	return _mm256_and_si256(_mm256_srli_epi32(x, FP32_MANT_BITS), _mm256_set1_epi32(0xff));
}

/*
 * Row blocks, four per step, one block per vector of 16 16-bit lanes: BF16 as it is, FP32
 * narrowed as for AVX-512 (avx512_load_f32(): exponent and significand bits 22..15 with a
 * sticky bit, the signs apart). AVX2 has no 16-bit variable shift, so the rounding
 * multiplies: with b = 2^(15 - sh), vpmulhrsw(v, b) = (v * b + 2^14) >> 15 = RHU(v / 2^sh),
 * which is one too large exactly on the ties (v * b = 2^14 modulo 2^15) whose truncated
 * quotient (bit 15 of v * b) is even: where the low 16 bits of v * b (vpmullw) are 0x4000.
 * sh >= 16 gives b = 0 and 0.
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
	__m256i v = _mm256_or_si256(_mm256_and_si256(x, _mm256_set1_epi16(f32 ? 0xff : 0x7f)),
				    _mm256_set1_epi16(f32 ? 0x100 : 0x80));
	/* RHU, then -1 on the ties whose quotient would be even: v * b = 2^14 modulo 2^16 */
	__m256i q = _mm256_add_epi16(_mm256_mulhrs_epi16(v, b),
				     _mm256_cmpeq_epi16(_mm256_mullo_epi16(v, b),
							_mm256_set1_epi16(0x4000)));

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
 * Column blocking, 8 columns at a time: lane c of the vector loaded from row r is element r
 * of block (rb, c), so the max and the pair test are vertical (no shuffles), and only the
 * final bit packing needs the 16 fields of one block side by side (avx2_transpose_fields()).
 */
/* Column blocks (rb, c .. c + 7), written to their places in out. */
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
AVX2 void mx_quant_avx2(enum mx_format f, enum mx_src t, const void *src, size_t rows,
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

AVX2 void mx_avx2_col_tail(enum mx_format f, enum mx_src t, const void *src, size_t cols,
			   size_t rblocks, size_t rb, size_t c0, uint8_t *out)
{
	switch (f) {
	case MX_FMT_MX9:
		avx2_col_from(7, t, src, cols, rblocks, rb, c0, out);
		break;
	case MX_FMT_MX6:
		avx2_col_from(4, t, src, cols, rblocks, rb, c0, out);
		break;
	case MX_FMT_MX4:
		avx2_col_from(2, t, src, cols, rblocks, rb, c0, out);
		break;
	}
}

/* No cache of our own (the module keeps no state): libgcc's __cpu_model answers in a few loads. */
bool mx_have_avx2(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2");
}
#else
bool mx_have_avx2(void) { return false; }
#endif
