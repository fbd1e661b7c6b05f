/* SPDX-License-Identifier: MIT */
/*
 * mx_ocp.c: OCP MX formats (MXFP8/6/4, MXINT8): the scalar reference and an AVX-512 fast
 * path that must agree with it bit for bit. The formats, the layout and every edge case are
 * documented in mx_ocp.h. All arithmetic is exact integer work on
 * the FP32 significands: the scale is a power of two, so V_i / X only moves the exponent,
 * and each element is rounded once (to nearest, ties to even) straight from the input.
 */
#include "mx_ocp.h"

#include <math.h>
#include <string.h>
#include <strings.h>

#define FP32_MANT_BITS 23
#define FP32_MANT_MASK 0x007fffffu
#define FP32_HIDDEN 0x00800000u
#define FP32_QNAN 0x7fc00000u
#define SCALE_MIN (-127) /* E8M0 byte 0 */

/* Element type parameters (mx_ocp.h). For int8, mbits is the number of fraction bits. */
struct elem_fmt {
	const char *name;
	unsigned w;        /* bits per element */
	int mbits;         /* explicit mantissa bits (int8: 6 fraction bits of Q1.6) */
	int bias;          /* exponent bias (unused for int8) */
	int emax;          /* emax_elem: exponent of the largest normal */
	uint8_t max_code;  /* magnitude code of the largest normal (int8: 127) */
	bool is_int;
};

static const struct elem_fmt fmts[] = {
	[MX_OCP_FP8_E4M3] = { "mxfp8-e4m3", 8, 3, 7, 8, 0x7e, false },
	[MX_OCP_FP8_E5M2] = { "mxfp8-e5m2", 8, 2, 15, 15, 0x7b, false },
	[MX_OCP_FP6_E3M2] = { "mxfp6-e3m2", 6, 2, 3, 4, 0x1f, false },
	[MX_OCP_FP6_E2M3] = { "mxfp6-e2m3", 6, 3, 1, 2, 0x1f, false },
	[MX_OCP_FP4_E2M1] = { "mxfp4", 4, 1, 1, 2, 0x07, false },
	[MX_OCP_INT8] = { "mxint8", 8, 6, 0, 0, 0x7f, true },
};

static const struct elem_fmt *fmt_get(enum mx_ocp_format f)
{
	return (unsigned)f < ELEMENTSOF(fmts) ? &fmts[f] : NULL;
}

unsigned mx_ocp_elem_bits(enum mx_ocp_format f)
{
	const struct elem_fmt *p = fmt_get(f);
	return p ? p->w : 0;
}

size_t mx_ocp_block_bytes(enum mx_ocp_format f)
{
	const struct elem_fmt *p = fmt_get(f);
	return p ? 1 + MX_OCP_BLOCK * p->w / 8 : 0;
}

int mx_ocp_emax_elem(enum mx_ocp_format f)
{
	const struct elem_fmt *p = fmt_get(f);
	return p ? p->emax : -1;
}

const char *mx_ocp_format_name(enum mx_ocp_format f)
{
	const struct elem_fmt *p = fmt_get(f);
	return p ? p->name : "invalid";
}

int mx_ocp_format_from_name(const char *s, enum mx_ocp_format *out)
{
	if (!s)
		return -EINVAL;
	for (size_t i = 0; i < ELEMENTSOF(fmts); i++)
		if (strcasecmp(s, fmts[i].name) == 0) {
			if (out)
				*out = (enum mx_ocp_format)i;
			return 0;
		}
	return -EINVAL;
}


/* ---- element codes ---------------------------------------------------------------------- */

/*
 * sig * 2^n rounded to an integer, to nearest, ties to even, for 0 < sig < 2^24. A left
 * shift (n >= 0) is only asked for when the result is known to be small (< 2^8).
 */
static uint32_t rne_scale(uint32_t sig, int n)
{
	if (n >= 0)
		return sig << n;
	unsigned sh = (unsigned)-n;
	if (sh >= 26) /* half an ulp 2^(sh-1) >= 2^25 > sig: rounds to 0 */
		return 0;
	uint32_t q = sig >> sh, r = sig & ((1u << sh) - 1), half = 1u << (sh - 1);
	if (r > half || (r == half && (q & 1)))
		q++;
	return q;
}

/*
 * Magnitude code of the element nearest to sig * 2^q (sig != 0), saturated at the largest
 * normal. Floating-point elements: the value's exponent e_v = floor(log2), its quantum
 * 2^(max(e_v, emin) - mbits) (the subnormal quantum below emin), M = value / quantum rounded;
 * code = (max(e_v, emin) - emin) << mbits + M, which is the IEEE-style encoding for normal
 * and subnormal M alike, and carries into the exponent field when M rounds up to
 * 2^(mbits+1). Codes are monotonic in magnitude, so saturation is a min with max_code, and
 * it also keeps e4m3's NaN code 0x7F and e5m2's Inf 0x7C out.
 */
static uint32_t enc_mag(const struct elem_fmt *p, uint32_t sig, int q)
{
	int e_v = q + 31 - __builtin_clz(sig);

	if (p->is_int) {
		if (e_v >= 1) /* |value| >= 2 > 127/64 */
			return p->max_code;
		uint32_t M = rne_scale(sig, q + p->mbits); /* value * 64 < 128 */
		return M > p->max_code ? p->max_code : M;
	}
	if (e_v > p->emax)
		return p->max_code;
	int emin = 1 - p->bias;
	int e = e_v < emin ? emin : e_v;
	uint32_t M = rne_scale(sig, q - (e - p->mbits)); /* < 2^(mbits+1) before rounding */
	uint32_t code = ((uint32_t)(e - emin) << p->mbits) + M;
	return code > p->max_code ? p->max_code : code;
}

/* code * 2^s as FP32 (mx_ocp.h: exact for blocks the quantizer makes, else correctly rounded). */
static float dec_elem(const struct elem_fmt *p, uint8_t code, int s)
{
	code &= (uint8_t)((1u << p->w) - 1);
	if (p->is_int)
		return ldexpf((float)(int8_t)code, s - p->mbits);

	unsigned sign = code >> (p->w - 1), mag = code & ((1u << (p->w - 1)) - 1);
	unsigned E = mag >> p->mbits, m = mag & ((1u << p->mbits) - 1);
	int emin = 1 - p->bias;
	float v;

	if (p == &fmts[MX_OCP_FP8_E4M3] && mag == 0x7f)
		return mx_f32_from_bits(FP32_QNAN);
	if (p == &fmts[MX_OCP_FP8_E5M2] && E == 31) {
		if (m)
			return mx_f32_from_bits(FP32_QNAN);
		return sign ? -INFINITY : INFINITY;
	}
	if (E == 0)
		v = ldexpf((float)m, emin - p->mbits + s);
	else
		v = ldexpf((float)(m | 1u << p->mbits), (int)E - p->bias - p->mbits + s);
	return sign ? -v : v;
}

float mx_ocp_elem_value(enum mx_ocp_format f, uint8_t code)
{
	const struct elem_fmt *p = fmt_get(f);
	return p ? dec_elem(p, code, 0) : mx_f32_from_bits(FP32_QNAN);
}

float mx_ocp_elem_max(enum mx_ocp_format f)
{
	const struct elem_fmt *p = fmt_get(f);
	return p ? dec_elem(p, p->max_code, 0) : mx_f32_from_bits(FP32_QNAN);
}

/* ---- blocks ----------------------------------------------------------------------------- */

void mx_ocp_quantize_block(enum mx_ocp_format f, const float in[32], struct mx_ocp_block *out)
{
	const struct elem_fmt *p = fmt_get(f);
	uint32_t u[MX_OCP_BLOCK], amax = 0;

	memset(out, 0, sizeof *out);
	if (!p)
		return;
	for (unsigned j = 0; j < MX_OCP_BLOCK; j++) {
		u[j] = mx_f32_bits(in[j]);
		uint32_t a = u[j] & 0x7fffffffu; /* |x|; integer order = value order */
		if (a >= 0x7f800000u) {
			out->scale = MX_OCP_SCALE_NAN; /* NaN or Inf: NaN block, codes 0 */
			return;
		}
		if (a > amax)
			amax = a;
	}

	/* shared_exp = floor(log2 max|V|) - emax_elem, clamped to E8M0's 2^-127 (also for
	 * max = 0). floor(log2) <= 127 and emax_elem >= 0, so it never exceeds 127. */
	int s = SCALE_MIN;
	if (amax) {
		unsigned ea = amax >> FP32_MANT_BITS;
		int lg = ea ? (int)ea - 127 : 31 - __builtin_clz(amax) - 149;
		s = lg - p->emax;
		if (s < SCALE_MIN)
			s = SCALE_MIN;
	}
	out->scale = (uint8_t)(s + MX_OCP_SCALE_BIAS);

	for (unsigned j = 0; j < MX_OCP_BLOCK; j++) {
		unsigned e = (u[j] >> FP32_MANT_BITS) & 0xff, neg = u[j] >> 31;
		/* |V| = sig * 2^q exactly; subnormals included (not flushed). */
		uint32_t sig = e ? FP32_HIDDEN | (u[j] & FP32_MANT_MASK) : u[j] & FP32_MANT_MASK;
		int q = e ? (int)e - 150 : -149;
		uint32_t mag = sig ? enc_mag(p, sig, q - s) : 0;

		if (p->is_int)
			out->elem[j] = (uint8_t)(neg ? -mag : mag); /* two's complement, no -0 */
		else
			out->elem[j] = (uint8_t)(neg << (p->w - 1) | mag); /* sign bit kept */
	}
}

void mx_ocp_dequantize_block(enum mx_ocp_format f, const struct mx_ocp_block *b, float out[32])
{
	const struct elem_fmt *p = fmt_get(f);

	if (!p || b->scale == MX_OCP_SCALE_NAN) {
		for (unsigned j = 0; j < MX_OCP_BLOCK; j++)
			out[j] = mx_f32_from_bits(FP32_QNAN);
		return;
	}
	for (unsigned j = 0; j < MX_OCP_BLOCK; j++)
		out[j] = dec_elem(p, b->elem[j], (int)b->scale - MX_OCP_SCALE_BIAS);
}

/*
 * Element j of width w (4, 6 or 8) sits at stream bit j*w; with these widths a field spans
 * at most two bytes.
 */
void mx_ocp_pack_block(enum mx_ocp_format f, const struct mx_ocp_block *b, uint8_t *out)
{
	const struct elem_fmt *p = fmt_get(f);

	if (!p)
		return;
	unsigned w = p->w, mask = (1u << w) - 1, n = MX_OCP_BLOCK * w / 8;
	out[0] = b->scale;
	memset(out + 1, 0, n);
	for (unsigned j = 0; j < MX_OCP_BLOCK; j++) {
		unsigned pos = j * w, byte = 1 + pos / 8, sh = pos % 8, field = b->elem[j] & mask;
		out[byte] |= (uint8_t)(field << sh);
		if (sh + w > 8)
			out[byte + 1] |= (uint8_t)(field >> (8 - sh));
	}
}

void mx_ocp_unpack_block(enum mx_ocp_format f, const uint8_t *in, struct mx_ocp_block *b)
{
	const struct elem_fmt *p = fmt_get(f);

	memset(b, 0, sizeof *b);
	if (!p)
		return;
	unsigned w = p->w, mask = (1u << w) - 1;
	b->scale = in[0];
	for (unsigned j = 0; j < MX_OCP_BLOCK; j++) {
		unsigned pos = j * w, byte = 1 + pos / 8, sh = pos % 8;
		unsigned field = (unsigned)in[byte] >> sh;
		if (sh + w > 8)
			field |= (unsigned)in[byte + 1] << (8 - sh);
		b->elem[j] = (uint8_t)(field & mask);
	}
}

/* ---- tensors ---------------------------------------------------------------------------- */

static void decode_block(const void *fmt, const uint8_t *in, float *out)
{
	enum mx_ocp_format f = *(const enum mx_ocp_format *)fmt;
	struct mx_ocp_block b;

	mx_ocp_unpack_block(f, in, &b);
	mx_ocp_dequantize_block(f, &b, out);
}

static int quantize_row(const void *fmt, enum mx_impl impl, enum mx_src t, const void *src,
			size_t cols, uint8_t *out, size_t out_len, struct pim_error *err)
{
	return mx_ocp_quantize_tensor_impl(impl, *(const enum mx_ocp_format *)fmt, t, src, 1, cols,
					   MX_DIR_ROW, out, out_len, err);
}

/* The blocked-tensor description (mx.h) of format *f (which must outlive it). */
static int blocked(const enum mx_ocp_format *f, struct mx_blocked *m, struct pim_error *err)
{
	if (!fmt_get(*f))
		return err_set(err, -EINVAL, "invalid MX OCP format %d", (int)*f);
	*m = (struct mx_blocked){ .block = MX_OCP_BLOCK, .block_bytes = mx_ocp_block_bytes(*f),
				  .name = mx_ocp_format_name(*f), .fmt = f, .decode = decode_block,
				  .quantize_row = quantize_row };
	return 0;
}

size_t mx_ocp_packed_size(enum mx_ocp_format f, size_t rows, size_t cols, enum mx_dir dir)
{
	struct mx_blocked m;
	size_t bytes = 0;

	if (blocked(&f, &m, NULL) < 0 || mx_blocked_shape(&m, rows, cols, dir, &bytes, NULL) < 0)
		return 0;
	return bytes;
}

static inline float src_value(enum mx_src t, const void *src, size_t i)
{
	return mx_f32_from_bits(mx_src_bits(t, src, i)); /* BF16: exact widening */
}

/* ---- AVX-512 fast path ------------------------------------------------------------------ */

#if defined(__x86_64__)
#include <immintrin.h>

/*
 * AVX-512 F/BW/VL quantizer, chosen at run time (mx_impl_best() == MX_IMPL_AVX512), bit-
 * identical to mx_ocp_quantize_block() + mx_ocp_pack_block(). 32 elements are two vectors of
 * 16 FP32 bit patterns. The reference's integer rounding is done here in FP32 arithmetic,
 * which is exact at every step that matters:
 *   - y = |V| * 2^-s is a power-of-two scaling, exact unless y < 2^-126; such y are below
 *     half the smallest element step of every format (2^-17 at the least), so both round
 *     them to 0. |V| < 2^(s + emax_elem + 1), so y never overflows and e_v <= emax_elem.
 *   - e = max(floor(log2 y), emin) is y's exponent field; y * 2^(mbits - e) is exact and
 *     below 2^(mbits+1), and vcvtps2dq with explicit round-to-nearest-even gives the
 *     reference's M (the MXCSR mode is not used). code = (e - emin) << mbits + M carries
 *     into the exponent exactly as enc_mag() does; then the same saturation.
 *   - int8: M = rne(y * 64) <= 128, saturated at 127, negated for negative inputs.
 * Most blocks take ocp_codes16_direct(), which folds the two scalings into one; blocks with a
 * tiny scale take ocp_codes16(). Column blocking gathers each block's 32 elements first.
 */
#define OCP_AVX512_TARGET "avx2,avx512f,avx512bw,avx512vl"
#define OCP_AVX512 __attribute__((target(OCP_AVX512_TARGET)))
#define OCP_AVX512_INLINE static inline __attribute__((always_inline, target(OCP_AVX512_TARGET)))

/* Codes (32-bit lanes, low w bits) of 16 elements x (FP32 bits) with scaling factor fac. */
OCP_AVX512_INLINE __m512i ocp_codes16(const struct elem_fmt *p, __m512i x, __m512 fac)
{
	const __m512i abs = _mm512_set1_epi32(0x7fffffff);
	__m512 y = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_and_si512(x, abs)), fac);

	if (p->is_int) {
		__m512i M = _mm512_cvt_roundps_epi32(_mm512_mul_ps(y, _mm512_set1_ps(64.0f)),
						     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		M = _mm512_min_epi32(M, _mm512_set1_epi32(p->max_code));
		__mmask16 neg = _mm512_cmplt_epi32_mask(x, _mm512_setzero_si512());
		return _mm512_mask_sub_epi32(M, neg, _mm512_setzero_si512(), M);
	}
	const int emin = 1 - p->bias;
	__m512i e = _mm512_sub_epi32(_mm512_srli_epi32(_mm512_castps_si512(y), FP32_MANT_BITS),
				     _mm512_set1_epi32(127));
	e = _mm512_max_epi32(e, _mm512_set1_epi32(emin));
	/* 2^(mbits - e) as FP32 bits: mbits - e lies in [mbits - emax, mbits - emin]. */
	__m512i sc = _mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(127 + p->mbits), e),
				       FP32_MANT_BITS);
	__m512i M = _mm512_cvt_roundps_epi32(_mm512_mul_ps(y, _mm512_castsi512_ps(sc)),
					     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512i code = _mm512_add_epi32(
		_mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(emin)), (unsigned)p->mbits),
		M);
	code = _mm512_min_epu32(code, _mm512_set1_epi32(p->max_code));
	/* sign bit 31 -> bit w - 1 */
	return _mm512_or_si512(code, _mm512_and_si512(_mm512_srli_epi32(x, 32 - p->w),
						      _mm512_set1_epi32(1 << (p->w - 1))));
}

/*
 * The same codes with one multiplication instead of two, for blocks whose scale is not tiny
 * (ocp_direct_ok()): M = rne(|x| * 2^(mbits - e - s)) with e + s + 127 = max(ex, L), ex the
 * FP32 exponent field of x and L = 127 + s + emin, which is e = max(e_v, emin) as above
 * (an FP32 subnormal x has e_v <= -127 - s < emin there, so e = emin). 2^(127 + mbits -
 * max(ex, L)) is a normal FP32 number when L > mbits; int8's 2^(6 - s) when s >= -121.
 */
static inline bool ocp_direct_ok(const struct elem_fmt *p, int s)
{
	return p->is_int ? s >= -121 : 127 + s + (1 - p->bias) > p->mbits;
}

OCP_AVX512_INLINE __m512i ocp_codes16_direct(const struct elem_fmt *p, __m512i x, int s)
{
	__m512i a = _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff));

	if (p->is_int) {
		__m512 fac = _mm512_castsi512_ps(_mm512_set1_epi32((127 + 6 - s) << FP32_MANT_BITS));
		__m512i M = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_castsi512_ps(a), fac),
						     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		M = _mm512_min_epi32(M, _mm512_set1_epi32(p->max_code));
		__mmask16 neg = _mm512_cmplt_epi32_mask(x, _mm512_setzero_si512());
		return _mm512_mask_sub_epi32(M, neg, _mm512_setzero_si512(), M);
	}
	const __m512i L = _mm512_set1_epi32(127 + s + 1 - p->bias);
	__m512i eb = _mm512_max_epi32(_mm512_srli_epi32(a, FP32_MANT_BITS), L);
	/* 2^(127 + mbits - eb) as FP32 bits: biased exponent 254 + mbits - eb */
	__m512i sc = _mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(254 + p->mbits), eb),
				       FP32_MANT_BITS);
	__m512i M = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_castsi512_ps(a),
							   _mm512_castsi512_ps(sc)),
					     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512i code = _mm512_add_epi32(_mm512_slli_epi32(_mm512_sub_epi32(eb, L),
							  (unsigned)p->mbits),
					M);
	code = _mm512_min_epu32(code, _mm512_set1_epi32(p->max_code));
	/* code | (sign bit 31 -> bit w - 1) */
	return _mm512_ternarylogic_epi32(code, _mm512_srli_epi32(x, 32 - p->w),
					 _mm512_set1_epi32(1 << (p->w - 1)), 0xf8);
}

/* One block from its 32 FP32 bit patterns (x0: 0-15, x1: 16-31) to packed bytes at out. */
OCP_AVX512_INLINE void ocp_block_avx512(const struct elem_fmt *p, __m512i x0, __m512i x1,
					uint8_t *out)
{
	const __m512i abs = _mm512_set1_epi32(0x7fffffff);
	uint32_t amax = _mm512_reduce_max_epu32(
		_mm512_max_epu32(_mm512_and_si512(x0, abs), _mm512_and_si512(x1, abs)));

	if (__builtin_expect(amax >= 0x7f800000u, 0)) { /* NaN or Inf: NaN block, codes 0 */
		memset(out, 0, 1 + MX_OCP_BLOCK * p->w / 8);
		out[0] = MX_OCP_SCALE_NAN;
		return;
	}
	int s = SCALE_MIN;
	if (amax) {
		unsigned ea = amax >> FP32_MANT_BITS;
		int lg = ea ? (int)ea - 127 : 31 - __builtin_clz(amax) - 149;
		s = lg - p->emax;
		if (s < SCALE_MIN)
			s = SCALE_MIN;
	}
	out[0] = (uint8_t)(s + MX_OCP_SCALE_BIAS);
	__m128i c0, c1;
	if (__builtin_expect(ocp_direct_ok(p, s), 1)) {
		c0 = _mm512_cvtepi32_epi8(ocp_codes16_direct(p, x0, s));
		c1 = _mm512_cvtepi32_epi8(ocp_codes16_direct(p, x1, s));
	} else {
		/* 2^-s; -s = 127 (int8 with the largest finite max) is FP32's subnormal 2^-127. */
		int k = -s;
		__m512 fac = _mm512_castsi512_ps(_mm512_set1_epi32(
			k >= -126 ? (k + 127) << FP32_MANT_BITS : 1 << (k + 149)));
		c0 = _mm512_cvtepi32_epi8(ocp_codes16(p, x0, fac));
		c1 = _mm512_cvtepi32_epi8(ocp_codes16(p, x1, fac));
	}

	if (p->w == 8) {
		_mm_storeu_si128((__m128i *)(out + 1), c0);
		_mm_storeu_si128((__m128i *)(out + 17), c1);
	} else if (p->w == 4) {
		/* element 2i in the low nibble of byte i */
		__m256i c = _mm256_inserti128_si256(_mm256_castsi128_si256(c0), c1, 1);
		c = _mm256_or_si256(_mm256_and_si256(c, _mm256_set1_epi16(0x0f)),
				    _mm256_and_si256(_mm256_srli_epi16(c, 4), _mm256_set1_epi16(0xf0)));
		_mm_storeu_si128((__m128i *)(out + 1), _mm256_cvtepi16_epi8(c));
	} else { /* w == 6: 4 codes -> 24 bits -> 3 bytes */
		__m256i c = _mm256_inserti128_si256(_mm256_castsi128_si256(c0), c1, 1);
		c = _mm256_maddubs_epi16(c, _mm256_set1_epi16(1 | 64 << 8));
		c = _mm256_madd_epi16(c, _mm256_set1_epi32(1 | 4096 << 16));
		c = _mm256_shuffle_epi8(c, _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14,
							    -1, -1, -1, -1, 0, 1, 2, 4, 5, 6, 8, 9,
							    10, 12, 13, 14, -1, -1, -1, -1));
		uint8_t tmp[32];
		_mm256_storeu_si256((__m256i *)tmp, c);
		memcpy(out + 1, tmp, 12);
		memcpy(out + 13, tmp + 16, 12);
	}
}

OCP_AVX512_INLINE __m512i ocp_load16(enum mx_src t, const void *src, size_t i)
{
	if (t == MX_SRC_BF16)
		return _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(
						 (const __m256i *)((const uint16_t *)src + i))),
					 16);
	return _mm512_loadu_si512((const float *)src + i);
}

OCP_AVX512_INLINE void ocp_tensor_avx512(const struct elem_fmt *p, enum mx_src t,
					 const void *src, size_t rows, size_t cols,
					 enum mx_dir dir, uint8_t *out)
{
	const size_t bb = 1 + MX_OCP_BLOCK * p->w / 8, nblocks = rows * cols / MX_OCP_BLOCK;

	if (dir == MX_DIR_ROW) {
		for (size_t b = 0; b < nblocks; b++) {
			/* one source line ahead of each 64 bytes read (mx.c's row loops do the same) */
			_mm_prefetch((const char *)src + b * MX_OCP_BLOCK * (t == MX_SRC_BF16 ? 2 : 4) +
					     4096,
				     _MM_HINT_T0);
			ocp_block_avx512(p, ocp_load16(t, src, b * MX_OCP_BLOCK),
					 ocp_load16(t, src, b * MX_OCP_BLOCK + 16), out + b * bb);
		}
		return;
	}
	/* Column blocks, rows of 32 at a time so the reads stay close together. */
	const size_t rblocks = rows / MX_OCP_BLOCK;
	uint32_t u[MX_OCP_BLOCK];
	for (size_t rb = 0; rb < rblocks; rb++)
		for (size_t c = 0; c < cols; c++) {
			for (unsigned k = 0; k < MX_OCP_BLOCK; k++)
				u[k] = mx_f32_bits(src_value(t, src, (rb * MX_OCP_BLOCK + k) * cols + c));
			ocp_block_avx512(p, _mm512_loadu_si512(u), _mm512_loadu_si512(u + 16),
					 out + (c * rblocks + rb) * bb);
		}
}

/* Specialized for each format and source type (constants after inlining). */
static OCP_AVX512 void quant_ocp_avx512(enum mx_ocp_format f, enum mx_src t, const void *src,
					size_t rows, size_t cols, enum mx_dir dir, uint8_t *out)
{
#define OCP_CASE(F)                                                                                \
	case F:                                                                                    \
		if (t == MX_SRC_BF16)                                                              \
			ocp_tensor_avx512(&fmts[F], MX_SRC_BF16, src, rows, cols, dir, out);       \
		else                                                                               \
			ocp_tensor_avx512(&fmts[F], MX_SRC_FP32, src, rows, cols, dir, out);       \
		break
	switch (f) {
		OCP_CASE(MX_OCP_FP8_E4M3);
		OCP_CASE(MX_OCP_FP8_E5M2);
		OCP_CASE(MX_OCP_FP6_E3M2);
		OCP_CASE(MX_OCP_FP6_E2M3);
		OCP_CASE(MX_OCP_FP4_E2M1);
		OCP_CASE(MX_OCP_INT8);
	}
#undef OCP_CASE
}
#endif

static void quant_ocp_ref(enum mx_ocp_format f, enum mx_src t, const void *src, size_t rows,
			  size_t cols, enum mx_dir dir, uint8_t *out)
{
	size_t nblocks = rows * cols / MX_OCP_BLOCK, bb = mx_ocp_block_bytes(f);

	for (size_t b = 0; b < nblocks; b++) {
		float in[MX_OCP_BLOCK];
		struct mx_ocp_block blk;

		for (unsigned k = 0; k < MX_OCP_BLOCK; k++)
			in[k] = src_value(t, src, mx_blocked_elem(MX_OCP_BLOCK, rows, cols, dir, b, k));
		mx_ocp_quantize_block(f, in, &blk);
		mx_ocp_pack_block(f, &blk, out + b * bb);
	}
}

int mx_ocp_quantize_tensor_impl(enum mx_impl impl, enum mx_ocp_format f, enum mx_src src_type,
				const void *src, size_t rows, size_t cols, enum mx_dir dir,
				uint8_t *out, size_t out_len, struct pim_error *err)
{
	struct mx_blocked m;
	int r;

	if ((r = blocked(&f, &m, err)) < 0 ||
	    (r = mx_blocked_check_quantize(&m, src_type, src, rows, cols, dir, out, out_len, err)) < 0)
		return r;
	if (impl == MX_IMPL_AUTO)
		impl = mx_impl_best() == MX_IMPL_AVX512 ? MX_IMPL_AVX512 : MX_IMPL_REF;

	switch (impl) {
	case MX_IMPL_REF:
	case MX_IMPL_GENERIC:
		quant_ocp_ref(f, src_type, src, rows, cols, dir, out);
		return 0;
	case MX_IMPL_AVX2:
		return err_set(err, -ENOTSUP, "there is no avx2 MX OCP quantizer");
	case MX_IMPL_AVX512:
#if defined(__x86_64__)
		if (mx_impl_best() == MX_IMPL_AVX512) {
			quant_ocp_avx512(f, src_type, src, rows, cols, dir, out);
			return 0;
		}
#endif
		return err_set(err, -ENOTSUP,
			       "the avx512 MX OCP quantizer needs a CPU with AVX-512 F/BW/VL/VBMI "
			       "and BMI2");
	default:
		return err_set(err, -EINVAL, "invalid MX implementation %d", (int)impl);
	}
}

int mx_ocp_quantize_tensor(enum mx_ocp_format f, enum mx_src src_type, const void *src,
			   size_t rows, size_t cols, enum mx_dir dir, uint8_t *out, size_t out_len,
			   struct pim_error *err)
{
	return mx_ocp_quantize_tensor_impl(MX_IMPL_AUTO, f, src_type, src, rows, cols, dir, out,
					   out_len, err);
}

int mx_ocp_quantize_tensor_mt(unsigned threads, enum mx_impl impl, enum mx_ocp_format f,
			      enum mx_src src_type, const void *src, size_t rows, size_t cols,
			      enum mx_dir dir, uint8_t *out, size_t out_len,
			      struct pim_error *err)
{
	struct mx_blocked m;

	/* All argument errors, reported for the whole tensor, before anything is split. */
	if (blocked(&f, &m, NULL) < 0 || dir != MX_DIR_ROW || threads == 1 ||
	    mx_blocked_check_quantize(&m, src_type, src, rows, cols, dir, out, out_len, NULL) < 0)
		return mx_ocp_quantize_tensor_impl(impl, f, src_type, src, rows, cols, dir, out,
						   out_len, err);
	/* 32-element blocks: half as many per thread as mx.h's 16-element ones. */
	return mx_blocked_quantize_mt(&m, threads, impl, src_type, src, rows * cols / MX_OCP_BLOCK,
				      out, MX_MT_MIN_BLOCKS / 2, err);
}

int mx_ocp_dequantize_tensor(enum mx_ocp_format f, const uint8_t *in, size_t in_len,
			     size_t rows, size_t cols, enum mx_dir dir, float *out,
			     size_t out_count, struct pim_error *err)
{
	struct mx_blocked m;
	int r = blocked(&f, &m, err);

	return r < 0 ? r : mx_blocked_dequantize(&m, in, in_len, rows, cols, dir, out, out_count, err);
}
