/* SPDX-License-Identifier: MIT */
/*
 * mx_ocp.h: the OCP Microscaling (MX) formats, OCP "Microscaling Formats (MX) Specification"
 * v1.0 (2023): MXFP8 (E4M3, E5M2), MXFP6 (E3M2, E2M3), MXFP4 (E2M1) and MXINT8. This is the
 * second MX family of doc/design.md §5.1 ("a welcome second family, not a substitute"); the
 * shared-microexponent MX9/MX6/MX4 of mx.h are unchanged and independent of this file.
 *
 * A block holds MX_OCP_BLOCK = 32 consecutive elements V_0..V_31 along the reduction
 * dimension and is stored as one E8M0 scale X and 32 element codes P_i; value_i = X * P_i.
 *
 * Element types (sign bit = top bit of the code; bias, smallest subnormal, largest normal):
 *   fp8 e4m3  bias 7,  2^-9,  448   = 1.75 * 2^8   no Inf; S.1111.111 is NaN   emax_elem 8
 *   fp8 e5m2  bias 15, 2^-16, 57344 = 1.75 * 2^15  E=31: Inf (M=0) / NaN       emax_elem 15
 *   fp6 e3m2  bias 3,  2^-4,  28    = 1.75 * 2^4   no Inf/NaN                  emax_elem 4
 *   fp6 e2m3  bias 1,  2^-3,  7.5   = 1.875 * 2^2  no Inf/NaN                  emax_elem 2
 *   fp4 e2m1  bias 1,  2^-1,  6     = 1.5 * 2^2    no Inf/NaN                  emax_elem 2
 *   int8      two's complement with an implicit scale 2^-6 (Q1.6): code c means c / 64,
 *             so the largest value is 127/64 = 1.984375 and -128 means -2.  emax_elem 0
 * emax_elem is "the exponent of the largest normal number in the element data type" (OCP MX
 * §6.3, Algorithm 1). For int8 that number is 1.984375, so emax_elem = 0, as in
 * microsoft/microxcaling (formats.py: int8 emax = 0, max_norm = 127/64) and Arm's TOSA
 * conformance types (mxint8 "strictly more like Q1.6"). Reading int8 codes as plain integers
 * would need emax_elem = 6 and give a scale byte 6 smaller for the same values; that is not
 * the OCP encoding, so it is not what is stored here.
 *
 * E8M0 scale: byte b in 0..254 means X = 2^(b - 127); b = 255 (MX_OCP_SCALE_NAN) is NaN.
 *
 * Quantization of one block (OCP MX §6.3, Algorithm 1, with the decisions below; computed
 * exactly on the integer significands, one rounding per element, no float arithmetic):
 *   - NaN or Inf anywhere in the block: the whole block is NaN: scale = 0xFF and every
 *     element code 0 (canonical, so equal inputs give equal bytes). This is Algorithm 1
 *     applied literally (max|V_i| is NaN or Inf, so is log2 of it, and X is the E8M0 NaN),
 *     what microxcaling does (torch.max propagates NaN; shared_exp > 127 becomes NaN), and
 *     the rule mx.h uses. Inf is not kept even in e5m2, whose scale would still be NaN.
 *   - shared_exp = floor(log2(max_i |V_i|)) - emax_elem, clamped below to -127 (E8M0's
 *     smallest scale; microxcaling clamps the same way). It never exceeds 127 - emax_elem.
 *     An all-zero block has max = 0, log2 = -inf, hence shared_exp = -127: scale byte 0.
 *   - FP32 subnormal inputs are NOT flushed: they are exact values like any other (the OCP
 *     spec does not call for flushing; microxcaling's default mx_flush_fp32_subnorms = False).
 *     Unlike mx.h's MX9/MX6/MX4, whose rule (doc/design.md §5.1) flushes them. BF16 inputs are widened
 *     exactly to FP32 first.
 *   - P_i = V_i / X rounded to the element type, round to nearest, ties to even, with
 *     subnormal element values used (gradual underflow); magnitudes above the largest normal
 *     saturate to it, keeping the sign (the spec's "clamping normal numbers"; values that
 *     would round up past the largest normal, or to e4m3's NaN code or e5m2's Inf, saturate
 *     too). Since max|V_i| / X < 2^(emax_elem + 1), saturation only affects values in
 *     (max normal, 2^(emax_elem+1)) * X, e.g. (448, 512) * X for e4m3.
 *   - Signs: floating-point elements keep the input's sign bit, so -0.0 and negative values
 *     that round to zero give the negative-zero code and dequantize to -0.0. int8 has no
 *     negative zero: they give code 0 (+0.0). int8 saturates symmetrically to [-127, 127]
 *     (the spec allows restricting -2 away; microxcaling's int8 is sign-magnitude, also
 *     symmetric), so the quantizer never emits 0x80, which still dequantizes to -2 * X.
 *
 * Dequantization to FP32: X * P_i, exact for every block the quantizer produces (at most 8
 * significant bits, and the smallest nonzero result 2^-16 * 2^-127 = 2^-143 is still a
 * multiple of 2^-149). Scale 0xFF gives the quiet NaN 0x7fc00000 for all 32 elements,
 * whatever the codes. With a finite scale, e4m3's NaN codes and e5m2's NaN codes give
 * 0x7fc00000 and e5m2's Inf codes give +-Inf (OCP MX §5.2: elements may encode their own
 * special values when X is not NaN). A hand-made block whose scale byte exceeds
 * 254 - emax_elem can overflow FP32 and decode to +-Inf; the quantizer never produces one.
 *
 * Packed block, mx_ocp_block_bytes(f) = 1 + 32 * w / 8 bytes (w = element bits):
 *   33 for fp8 and int8 (w = 8), 25 for fp6 (w = 6), 17 for fp4 (w = 4).
 *   byte 0     the E8M0 scale
 *   bytes 1..  32 element codes of w bits in a little-endian bit stream: element j occupies
 *              stream bits [j*w, (j+1)*w), stream bit k being bit (k % 8) of byte 1 + k / 8.
 *   So fp8/int8 element j is byte 1 + j (int8 as its two's complement byte); fp4 elements
 *   2i and 2i+1 share byte 1 + i, element 2i in the low nibble; fp6 packs 4 elements into
 *   every 3 bytes. (The spec leaves the physical layout to implementations.)
 *
 * Tensors: as in mx.h, 2-D, row-major [rows x cols], FP32 or BF16 (uint16_t bit patterns).
 *   MX_DIR_ROW: a block is 32 consecutive elements of a row; block (r, c / 32) is at index
 *     r * (cols / 32) + c / 32.
 *   MX_DIR_COL: a block is 32 consecutive elements down a column; block (r / 32, c) is at
 *     index c * (rows / 32) + r / 32, so the column-blocked packing of A is byte-identical
 *     to the row-blocked packing of A^T.
 *   Block b starts at byte b * mx_ocp_block_bytes(f). The blocked dimension must be a
 *   non-zero multiple of 32 and the other one non-zero; anything else is -EINVAL (no
 *   implicit padding).
 */
#ifndef PIMD_MX_OCP_H
#define PIMD_MX_OCP_H

#include <stddef.h>
#include <stdint.h>

#include "mx.h"
#include "util.h"

enum mx_ocp_format {
	MX_OCP_FP8_E4M3,
	MX_OCP_FP8_E5M2,
	MX_OCP_FP6_E3M2,
	MX_OCP_FP6_E2M3,
	MX_OCP_FP4_E2M1,
	MX_OCP_INT8,
};

#define MX_OCP_BLOCK 32
#define MX_OCP_SCALE_BIAS 127
#define MX_OCP_SCALE_NAN 0xff
#define MX_OCP_BLOCK_BYTES_MAX 33

struct mx_ocp_block {
	uint8_t scale;    /* E8M0: X = 2^(scale - 127); 0xFF: NaN block */
	uint8_t elem[32]; /* element codes, w bits each (int8: two's complement byte) */
};

/* Format properties; an out-of-range format gives 0 / -1 / "invalid". */
unsigned mx_ocp_elem_bits(enum mx_ocp_format f);      /* 8, 8, 6, 6, 4, 8 */
size_t mx_ocp_block_bytes(enum mx_ocp_format f);      /* 33, 33, 25, 25, 17, 33 */
int mx_ocp_emax_elem(enum mx_ocp_format f);           /* 8, 15, 4, 2, 2, 0 */
/* "mxfp8-e4m3", "mxfp8-e5m2", "mxfp6-e3m2", "mxfp6-e2m3", "mxfp4", "mxint8" */
const char *mx_ocp_format_name(enum mx_ocp_format f);
/* Accepts the names above in any case; 0 or -EINVAL (*out untouched). */
int mx_ocp_format_from_name(const char *s, enum mx_ocp_format *out);

/*
 * The value of one element code with X = 1 (bits of code above w are ignored): e.g. 448
 * for e4m3 0x7E, -2 for int8 0x80, NaN for e4m3 0x7F, +Inf for e5m2 0x7C. NaN for an
 * invalid format.
 */
float mx_ocp_elem_value(enum mx_ocp_format f, uint8_t code);
/* The largest normal element value (448, 57344, 28, 7.5, 6, 1.984375); NaN if invalid. */
float mx_ocp_elem_max(enum mx_ocp_format f);

/* Scalar reference quantizer of one block (the specification above). */
void mx_ocp_quantize_block(enum mx_ocp_format f, const float in[32], struct mx_ocp_block *out);
void mx_ocp_dequantize_block(enum mx_ocp_format f, const struct mx_ocp_block *b, float out[32]);
/* Bits of elem[] above w are ignored by pack; unpack leaves them 0. */
void mx_ocp_pack_block(enum mx_ocp_format f, const struct mx_ocp_block *b, uint8_t *out);
void mx_ocp_unpack_block(enum mx_ocp_format f, const uint8_t *in, struct mx_ocp_block *b);

/*
 * Bytes of the packed form of a rows x cols tensor blocked along dir; 0 if the format or
 * shape is invalid or the size, or the source size in FP32, would overflow size_t.
 */
size_t mx_ocp_packed_size(enum mx_ocp_format f, size_t rows, size_t cols, enum mx_dir dir);

/*
 * Quantizes src (rows x cols, row-major, FP32 floats or BF16 bit patterns) into out, blocked
 * along dir, packed as above; out_len (bytes) must be at least mx_ocp_packed_size().
 * Returns 0, or -EINVAL (bad format, source type, direction, shape, NULL buffer, out too
 * small) / -EOVERFLOW (size overflow) with err filled (err may be NULL).
 */
int mx_ocp_quantize_tensor(enum mx_ocp_format f, enum mx_src src_type, const void *src,
			   size_t rows, size_t cols, enum mx_dir dir, uint8_t *out, size_t out_len,
			   struct pim_error *err);
/*
 * Same with a chosen implementation (mx.h's enum mx_impl): MX_IMPL_REF (and MX_IMPL_GENERIC,
 * the same code) is the scalar reference; MX_IMPL_AVX512 the AVX-512 path, every format and
 * both directions; MX_IMPL_AUTO the AVX-512 path where mx_impl_best() is MX_IMPL_AVX512, else
 * the reference. -ENOTSUP for MX_IMPL_AVX2 (there is none) or an AVX-512 path this CPU
 * cannot run.
 */
int mx_ocp_quantize_tensor_impl(enum mx_impl impl, enum mx_ocp_format f, enum mx_src src_type,
				const void *src, size_t rows, size_t cols, enum mx_dir dir,
				uint8_t *out, size_t out_len, struct pim_error *err);

/* mx_ocp_quantize_tensor_impl() split over threads as mx_quantize_tensor_mt() (mx.h). */
int mx_ocp_quantize_tensor_mt(unsigned threads, enum mx_impl impl, enum mx_ocp_format f,
			      enum mx_src src_type, const void *src, size_t rows, size_t cols,
			      enum mx_dir dir, uint8_t *out, size_t out_len,
			      struct pim_error *err);

/*
 * Dequantizes a packed tensor (in_len bytes, at least mx_ocp_packed_size()) into out, rows x
 * cols FP32 row-major, out_count elements (at least rows * cols). 0 or negative errno as above.
 */
int mx_ocp_dequantize_tensor(enum mx_ocp_format f, const uint8_t *in, size_t in_len,
			     size_t rows, size_t cols, enum mx_dir dir, float *out,
			     size_t out_count, struct pim_error *err);

#endif
