/* SPDX-License-Identifier: MIT */
/*
 * mx_avx512.c: the AVX-512 MX quantizer, bit-identical to the reference in mx.c.
 *
 * AVX-512 F/BW/VL/VBMI with BMI2, chosen at run time like the AVX2 path (no -march flag: only
 * these functions are compiled for the wider target). Rows, eight blocks per step (see
 * avx512_row()), use what AVX2 lacks: mask registers, byte permutations (vpermt2b), and for
 * the shifts that round, vpmultishiftqb on bytes (BF16) or vpsrlvw on 16-bit lanes (FP32).
 * Columns, whose cost is the strided gather rather than the arithmetic, go 16 at a time with
 * the AVX2 path's transposition, and the last cols % 16 through the AVX2 code (every AVX-512
 * CPU has AVX2).
 */
#include "mx_simd.h"

#if MX_HAVE_X86
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
		if (c < cols) /* the last cols % 16 columns */
			mx_avx2_col_tail(m == 7 ? MX_FMT_MX9 : m == 4 ? MX_FMT_MX6 : MX_FMT_MX4, t, src, cols, rblocks, rb, c, out);
	}
}

/*
 * Row blocks, eight per step (256 bytes of BF16, 512 of FP32), in four vectors of 32 16-bit
 * lanes: vector i holds block 2i in lanes 0-15 and block 2i + 1 in lanes 16-31.
 *
 * BF16 lanes are the inputs themselves (s | e8 | m7), whose fields avx512_fields8() then
 * computes on bytes, 64 a vector. FP32 is narrowed to that width first
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
	/* BF16 on bytes (avx512_fields8()), indexed by vpshufb with s1 + 0x78: */
	__m512i keep; /* 0xff >> s1: the bits of y >> s1 that belong to y */
	__m512i lsb;  /* 1 << (s1 + 1): the quotient's lsb in v (0 from s1 = 7 on) */
	__m512i at;   /* 8 (k % 8) + 8 for byte k: s1 + 0x78 + at is the bit offset of y >> s1 in
		       * byte k's qword, modulo 64 (vpmultishiftqb's count) */
	bool stream;  /* MX4: each step's 64 bytes are a line, stored non-temporally (avx512_row()) */
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
 * FP32: the (1+m)-bit fields s << m | M of vector i (16-bit lanes).
 * With sh1 = sh - 1 (sh as in mx.h, counted on the lane's 9-bit significand v, the narrowed
 * FP32 one): t = v >> sh1 holds the quotient's lsb in bit 1, and
 * RNE(v / 2^sh) = RHU((v - 1 + lsb) / 2^sh) = ((y >> sh1) + 1) >> 1 (vpavgw with 0).
 * A shift of 16 or more gives 0, so no clamp is needed. careful: zeros and subnormals are
 * flushed by a test; otherwise every block has E >= 16, where their shift is at least 16.
 */
AVX512_INLINE __m512i avx512_fields(const struct avx512_grp *g, unsigned i, __m512i sh1,
				    unsigned m, bool careful)
{
	const __m512i one = _mm512_set1_epi16(1), x = g->x[i];
	const __m512i max = _mm512_set1_epi16((short)((1u << m) - 1));
	/* v = x & 0xff | 0x100 */
	__m512i v = _mm512_ternarylogic_epi32(x, _mm512_set1_epi16(0xff),
					      _mm512_set1_epi16(0x100), 0xea);
	__mmask32 even = _mm512_testn_epi16_mask(_mm512_srlv_epi16(v, sh1), _mm512_set1_epi16(2));
	__m512i y = _mm512_mask_sub_epi16(v, even, v, one);
	__m512i q = _mm512_avg_epu16(_mm512_srlv_epi16(y, sh1), _mm512_setzero_si512());

	if (careful)
		q = _mm512_maskz_min_epu16(_mm512_test_epi16_mask(x, _mm512_set1_epi16(0xff00)), q,
					   max);
	else
		q = _mm512_min_epu16(q, max);
	return _mm512_mask_add_epi16(q, g->sign[i], q, _mm512_set1_epi16((short)(1u << m)));
}

/*
 * BF16: the fields of the four blocks of half j on bytes, 64 elements a vector, in eb[j]'s order
 * (block 4j + l in 128-bit lane l), which is the order avx512_put_group() packs. sb holds
 * s1 + 0x78 for each element (s1 = sh - 1, sh as in mx.h counted on the 8-bit significand
 * v = 1.m6..m0), saturated: from 0x80 on (s1 >= 8) the quotient is 0, and vpshufb's tables
 * give 0 there. The arithmetic of avx512_fields() with the shift done by vpmultishiftqb,
 * which takes 8 bits at any offset of a qword: at offset 8 (k % 8) + s1, byte k's y >> s1 and
 * the low bits of the next byte, which the keep mask clears.
 */
AVX512_INLINE __m512i avx512_fields8(const struct avx512_grp *g, unsigned j, __m512i sb,
				     unsigned m, bool careful, const struct avx512_idx *ix)
{
	const __m512i a = g->x[2 * j], b = g->x[2 * j + 1];
	const __m512i max = _mm512_set1_epi8((char)((1u << m) - 1));
	/* the elements' low bytes (e0 m6..m0) and high bytes (s e7..e1) */
	__m512i lo = _mm512_permutex2var_epi8(a, ix->lo, b);
	__m512i hi = _mm512_permutex2var_epi8(a, ix->hi, b);
	__m512i v = _mm512_or_si512(lo, _mm512_set1_epi8((char)0x80));
	__mmask64 even = _mm512_testn_epi8_mask(v, _mm512_shuffle_epi8(ix->lsb, sb));
	__m512i y = _mm512_mask_sub_epi8(v, even, v, _mm512_set1_epi8(1));
	__m512i t = _mm512_multishift_epi64_epi8(_mm512_add_epi8(sb, ix->at), y);
	__m512i q = _mm512_avg_epu8(_mm512_and_si512(t, _mm512_shuffle_epi8(ix->keep, sb)),
				    _mm512_setzero_si512());

	if (careful) /* zeros and subnormals flush */
		q = _mm512_maskz_min_epu8(_mm512_test_epi8_mask(g->eb[j], g->eb[j]), q, max);
	else
		q = _mm512_min_epu8(q, max);
	if (m == 7) /* the sign is bit 7 of the field: q | hi & 0x80 */
		return _mm512_ternarylogic_epi32(q, hi, _mm512_set1_epi8((char)0x80), 0xf8);
	return _mm512_mask_add_epi8(q, _mm512_movepi8_mask(hi), q, _mm512_set1_epi8((char)(1u << m)));
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
	for (unsigned k = 0; k < 64; k++) {
		unsigned n = k % 16, s1 = n - 8;
		o[0][k] = (uint8_t)(n < 8 ? 0 : 0xff >> s1);
		o[1][k] = (uint8_t)(n < 8 || s1 >= 7 ? 0 : 1u << (s1 + 1));
		lo[k] = (uint8_t)(8 * (k % 8) + 8);
	}
	x->keep = _mm512_loadu_si512(o[0]);
	x->lsb = _mm512_loadu_si512(o[1]);
	x->at = _mm512_loadu_si512(lo);
	memset(o, 0, sizeof o);
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
	if (w == 3) /* one vector for the eight blocks: see avx512_put_group() */
		for (unsigned p = 0; p < 64; p++) {
			unsigned k = p / 8, r = p % 8, l = k % 4, hi8 = k < 4 ? 0 : 8;
			o[0][p] = (uint8_t)(r == 0   ? 64 + 16 * l + hi8
					    : r == 1 ? 64 + 4 + hi8 + l
					    : r < 5  ? 16 * l + hi8 + r - 2
						     : 16 * l + hi8 + 4 + r - 5);
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
 * Packs and stores the eight blocks of a step at o (room: bytes that may be written there),
 * from their field bytes: n01 blocks 0-3, n23 blocks 4-7, block k % 4 in 128-bit lane k % 4.
 * w < 8: the fields of four blocks, 2 per 16 bits (vpmaddubsw), 4 per 32
 * (vpmaddwd) and 8 per 64: w whole bytes per qword, which one byte permutation puts in place
 * beside the header bytes. MX6's two stores overlap; none writes more than room allows.
 */
AVX512_INLINE void avx512_put_group(__m512i n01, __m512i n23, const __m512i H[2],
				    const struct avx512_idx *ix, unsigned m, uint8_t *o, size_t room)
{
	const unsigned w = 1 + m, bb = 2 + MX_BLOCK * w / 8;

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
	if (w == 3) {
		/*
		 * MX4: after vpmaddwd a dword holds 4 fields (12 bits); vpackusdw puts both
		 * halves' in one vector (128-bit lane l: words 0-3 block l, 4-7 block 4 + l) and
		 * vpmaddwd again makes dwords of 8 fields, 3 bytes each: fields 0-7 and 8-15 of
		 * block l, then of block 4 + l. H[0] has the header bytes of all eight blocks:
		 * E of block l at byte 16l, of block 4 + l at 16l + 8, and the micro bits of
		 * blocks 0-3 at bytes 4-7, of blocks 4-7 at 12-15.
		 */
		const __m512i m2 = _mm512_set1_epi16((short)(1 | (1 << w) << 8));
		const __m512i m4 = _mm512_set1_epi32(1 | (1 << (2 * w)) << 16);
		__m512i z = _mm512_packus_epi32(_mm512_madd_epi16(_mm512_maddubs_epi16(n01, m2), m4),
						_mm512_madd_epi16(_mm512_maddubs_epi16(n23, m2), m4));
		z = _mm512_madd_epi16(z, _mm512_set1_epi32(1 | (1 << (4 * w)) << 16));
		z = _mm512_permutex2var_epi8(z, ix->out[0], H[0]);
		if (ix->stream && room >= 64)
			_mm512_stream_si512((void *)o, z);
		else
			avx512_put(o, z, room);
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
	avx512_put(o, p[0], room);
	avx512_put(o + 4 * bb, p[1], room > 4 * bb ? room - 4 * bb : 0);
}

/*
 * One step: n (1-8) blocks from src to o. The shift counts sh1 = c + E - e - d (see
 * avx512_fields() and avx512_fields8()) are computed on bytes: E - e needs no borrow, and
 * the saturating add only ever caps counts that give 0 anyway. FP32 spreads them to its
 * 16-bit lanes; BF16 computes on bytes throughout.
 */
AVX512_INLINE void avx512_group(struct avx512_grp *g, unsigned m, bool f32, bool careful,
				const struct avx512_idx *ix, unsigned n, uint8_t *o, size_t room)
{
	const unsigned bb = 2 + MX_BLOCK * (1 + m) / 8;
	/* s1 = sh - 1 = c + E - e - d; BF16 adds 0x78 for avx512_fields8() */
	const __m512i c = _mm512_set1_epi8((char)(f32 ? 8 - m : 0x7f - m));
	__m512i sh[2], H[2];

#pragma GCC unroll 2
	for (unsigned j = 0; j < 2; j++) {
		/* (an immediate each: clang takes no expression there) */
		__m512i E = j ? _mm512_shuffle_epi32(g->r, (_MM_PERM_ENUM)0xaa) : _mm512_shuffle_epi32(g->r, (_MM_PERM_ENUM)0x00);
		__mmask64 d = _mm512_cmplt_epu8_mask(g->pm[j], E);
		__m512i t = _mm512_adds_epu8(_mm512_sub_epi8(E, g->eb[j]), c);
		sh[j] = _mm512_mask_sub_epi8(t, d, t, _mm512_set1_epi8(1));
		/* the header: E of block k at byte 16k, the micro bits (d's even bits) at 4 + k;
		 * MX4 has both halves' in H[0] (avx512_put_group()) */
		int micro = (int)_pext_u64(d, 0x5555555555555555ull);
		if (m == 2)
			H[0] = _mm512_mask_set1_epi32(j ? H[0] : g->r, j ? 0x0008 : 0x0002, micro);
		else
			H[j] = _mm512_mask_set1_epi32(E, 0x0002, micro);
	}
	if (f32) {
		__m512i f[4];
#pragma GCC unroll 4
		for (unsigned i = 0; i < 4; i++)
			f[i] = avx512_fields(g, i,
					     _mm512_maskz_permutexvar_epi8(0x5555555555555555ull,
									   ix->spread[i % 2],
									   sh[i / 2]),
					     m, careful);
		avx512_put_group(_mm512_permutex2var_epi8(f[0], ix->lo, f[1]),
				 _mm512_permutex2var_epi8(f[2], ix->lo, f[3]), H, ix, m, o, room);
	} else {
		avx512_put_group(avx512_fields8(g, 0, sh[0], m, careful, ix),
				 avx512_fields8(g, 1, sh[1], m, careful, ix), H, ix, m, o, room);
	}
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
 * stream: MX4 only, out on a 64-byte line (see avx512_row()).
 */
AVX512_INLINE void avx512_rows(unsigned m, enum mx_src t, const void *src, size_t nblocks,
			       uint8_t *out, bool stream)
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
	ix.stream = stream;
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

/*
 * A large MX4 output (MX_STREAM_MIN bytes or more) goes around the caches: from the first
 * block on a 64-byte line on, each step's 8 blocks fill a line, which a non-temporal store
 * writes without reading it first (read for ownership) or evicting the source's lines. Other
 * formats store as usual: there a step's output does not fill whole lines, and the staging
 * it would need did not pay here.
 */
AVX512_INLINE void avx512_row(unsigned m, enum mx_src t, const void *src, size_t nblocks,
			      uint8_t *out)
{
	const size_t bb = 2 + MX_BLOCK * (1 + m) / 8, esz = t == MX_SRC_FP32 ? 4 : 2;

	if (m == 2 && nblocks * bb >= MX_STREAM_MIN && (uintptr_t)out % bb == 0) {
		size_t head = (64 - (uintptr_t)out % 64) % 64 / bb;
		avx512_rows(m, t, src, head, out, false);
		avx512_rows(m, t, (const char *)src + head * MX_BLOCK * esz, nblocks - head,
			    out + head * bb, true);
		_mm_sfence(); /* the non-temporal stores are weakly ordered: done before returning */
		return;
	}
	avx512_rows(m, t, src, nblocks, out, false);
}

AVX512_INLINE void avx512_m(unsigned m, enum mx_src t, const void *src, size_t rows,
			    size_t cols, enum mx_dir dir, uint8_t *out)
{
	if (dir == MX_DIR_ROW)
		avx512_row(m, t, src, rows * cols / MX_BLOCK, out);
	else
		avx512_col(m, t, src, rows, cols, out);
}

/* Specialized for each format and source type, as mx_quant_avx2(). */
AVX512 void mx_quant_avx512(enum mx_format f, enum mx_src t, const void *src, size_t rows,
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

bool mx_have_avx512(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512f") &&
	       __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
	       __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("bmi") &&
	       __builtin_cpu_supports("bmi2");
}
#else
bool mx_have_avx512(void) { return false; }
#endif
