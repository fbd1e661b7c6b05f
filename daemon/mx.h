/* SPDX-License-Identifier: MIT */
/*
 * mx.h: MX9/MX6/MX4 shared-microexponent formats (doc/design.md §5.1; Darvish Rouhani et al. 2023,
 * "With shared microexponents, a little shifting goes a long way"; JIT-Q §2.2).
 *
 * A block holds MX_BLOCK = 16 consecutive elements along the reduction dimension:
 *   E   8-bit shared exponent = max FP32 biased exponent of the 16 inputs;
 *   d   1-bit microexponent per pair (elements 2i, 2i+1): d = 1 iff both biased exponents < E;
 *   s,M per element: sign bit and an unsigned m-bit magnitude, no hidden bit
 *       (m = 7 / 4 / 2 for MX9 / MX6 / MX4).
 *   value = (-1)^s * M * 2^(E - 127 - d + 1 - m)
 * Since E is the largest exponent, the largest element lies in [2^(E-127), 2^(E-126)), so
 * M = |x| / 2^(E-127+1-m) lies in [2^(m-1), 2^m): the block maximum keeps all m bits.
 *
 * Decided edge cases (doc/design.md §5.1 plus the choices below, all implemented identically by the
 * reference and the fast path):
 *   - M = |x| / 2^(E-127-d+1-m) rounded to nearest, ties to even, computed exactly on the
 *     integer significand (one rounding, no float arithmetic); M saturates at 2^m - 1.
 *   - FP32 subnormal inputs (biased exponent 0) flush to zero: their exponent counts as 0,
 *     M = 0. BF16 inputs are widened exactly to FP32 first, so BF16 subnormals flush too.
 *   - The sign bit is always the input's sign bit (so -0.0, a flushed negative subnormal, or a
 *     negative value that rounds to M = 0 dequantize to -0.0).
 *   - A NaN or Inf anywhere in a block makes the whole block NaN: exp = 255, micro = 0,
 *     sign = 0, mag[] = 0 (canonical, so equal inputs give equal bytes). Dequantizing any block
 *     with exp = 255 gives the quiet NaN 0x7fc00000 for all 16 elements, whatever else it holds.
 *   - A block whose inputs are all zero or subnormal has E = 0, micro = 0, mag[] = 0 (signs
 *     kept as above). d is 0 there because no exponent is below E = 0.
 *   - Dequantization is exact for every block: M < 2^m <= 2^7 and the scale 2^k has
 *     k = E - 127 - d + 1 - m >= -134 and k <= 128 - m, so M * 2^k is a multiple of 2^-149
 *     below 2^128, i.e. an FP32 number (normal or subnormal), never Inf.
 *
 * Packed block (mx_block_bytes(f) = 18 / 12 / 8 bytes for MX9 / MX6 / MX4):
 *   byte 0     E
 *   byte 1     microexponent bits, bit i (LSB = bit 0) = d of pair i
 *   bytes 2..  16 fields of (1 + m) bits, one per element j = 0..15, in a little-endian bit
 *              stream: field j occupies stream bits [j(1+m), (j+1)(1+m)), stream bit k being
 *              bit (k % 8) of byte 2 + k / 8. Inside a field the magnitude M is in the low m
 *              bits and the sign in the top bit: field = s << m | M.
 *   MX9 fields are thus whole bytes (byte 2 + j = s << 7 | M_j).
 *
 * Tensors are 2-D, row-major, [rows x cols], FP32 or BF16 (uint16_t bit patterns).
 *   MX_DIR_ROW: a block is 16 consecutive elements of a row (reduction dimension = cols);
 *     block (r, c / 16) is at index r * (cols / 16) + c / 16.
 *   MX_DIR_COL: a block is 16 consecutive elements down a column (reduction dimension = rows);
 *     block (r / 16, c) is at index c * (rows / 16) + r / 16.
 *     The column-blocked packing of A is therefore byte-identical to the row-blocked packing
 *     of A^T, which is the layout a GEMM consumer wants (each output column's blocks along K
 *     are contiguous).
 *   Block b starts at byte b * mx_block_bytes(f).
 * The blocked dimension must be a non-zero multiple of 16 and the other one non-zero; anything
 * else is refused with -EINVAL (no implicit padding: padding would change E for nothing and
 * make sizes ambiguous; transformer hidden sizes are multiples of 16).
 */
#ifndef PIMD_MX_H
#define PIMD_MX_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util.h"

enum mx_format { MX_FMT_MX9, MX_FMT_MX6, MX_FMT_MX4 };
enum mx_src { MX_SRC_FP32, MX_SRC_BF16 };
enum mx_dir { MX_DIR_ROW, MX_DIR_COL };

#define MX_BLOCK 16
#define MX_EXP_NAN 255
#define MX_BLOCK_BYTES_MAX 18

struct mx_block {
	uint8_t exp;     /* shared biased exponent E (255: NaN block) */
	uint8_t micro;   /* bit i: microexponent d of pair i (elements 2i, 2i+1) */
	uint16_t sign;   /* bit j: sign of element j */
	uint8_t mag[16]; /* M_j, m bits */
};

/* Format properties; an out-of-range format gives 0 / 0 / "invalid". */
unsigned mx_mantissa_bits(enum mx_format f);  /* 7, 4, 2 */
size_t mx_block_bytes(enum mx_format f);      /* 18, 12, 8 */
const char *mx_format_name(enum mx_format f); /* "mx9", "mx6", "mx4" */
/* Accepts "mx9"/"mx6"/"mx4" in any case; 0 or -EINVAL (*out untouched). */
int mx_format_from_name(const char *s, enum mx_format *out);

/* Scalar reference quantizer of one block (the specification, doc/design.md §5.1). */
void mx_quantize_block(enum mx_format f, const float in[16], struct mx_block *out);
/*
 * The arithmetic of the JIT-Q paper's PIM kernel (pimsim's kernel = paper), as a reference for
 * it: the same E and d, but M = (2^23 | fraction) >> (24 - m + E - e - d), truncated, with the
 * hidden bit set whatever the exponent (zero and subnormal inputs are not flushed) and no
 * NaN/Inf block (E = 255 is kept as any other exponent). Not the specification of §5.1.
 */
void mx_quantize_block_trunc(enum mx_format f, const float in[16], struct mx_block *out);
void mx_dequantize_block(enum mx_format f, const struct mx_block *b, float out[16]);
/* Bits of mag[] above m are ignored by pack; unpack leaves them 0. */
void mx_pack_block(enum mx_format f, const struct mx_block *b, uint8_t *out);
void mx_unpack_block(enum mx_format f, const uint8_t *in, struct mx_block *b);

/* The bits of an FP32 value and back (exact; no aliasing games). */
static inline uint32_t mx_f32_bits(float x)
{
	uint32_t u;
	memcpy(&u, &x, sizeof u);
	return u;
}

static inline float mx_f32_from_bits(uint32_t u)
{
	float x;
	memcpy(&x, &u, sizeof x);
	return x;
}

static inline float mx_bf16_to_float(uint16_t v)
{
	uint32_t u = (uint32_t)v << 16;
	float x;
	memcpy(&x, &u, sizeof x);
	return x;
}

/* FP32 -> BF16, round to nearest even; NaN stays a (quiet) NaN. For tests and callers. */
static inline uint16_t mx_float_to_bf16(float x)
{
	uint32_t u;
	memcpy(&u, &x, sizeof u);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

/*
 * Bytes of the packed form of a rows x cols tensor blocked along dir; 0 if the shape is
 * invalid (see above) or the size, or the source size in FP32, would overflow size_t.
 */
size_t mx_packed_size(enum mx_format f, size_t rows, size_t cols, enum mx_dir dir);

/* Implementations of the tensor quantizer; all are bit-identical to the reference. */
enum mx_impl {
	MX_IMPL_AUTO,    /* best available on this CPU */
	MX_IMPL_REF,     /* mx_quantize_block() + mx_pack_block() per block */
	MX_IMPL_GENERIC, /* branch-light portable C */
	MX_IMPL_AVX2,    /* AVX2 intrinsics, chosen at run time */
	MX_IMPL_AVX512,  /* AVX-512 F/BW/VL/VBMI + BMI2, at run time */
};
const char *mx_impl_name(enum mx_impl impl);
/* What MX_IMPL_AUTO resolves to on this CPU (MX_IMPL_AVX512, MX_IMPL_AVX2 or
 * MX_IMPL_GENERIC). */
enum mx_impl mx_impl_best(void);

/*
 * Quantizes src (rows x cols, row-major, FP32 floats or BF16 bit patterns) into out, blocked
 * along dir, packed as described above. out_len is the size of out in bytes and must be at
 * least mx_packed_size(). Returns 0, or -EINVAL (bad format, source type, direction, shape,
 * NULL buffer, or out too small) / -EOVERFLOW (size overflow) with err filled.
 */
int mx_quantize_tensor(enum mx_format f, enum mx_src src_type, const void *src, size_t rows,
		       size_t cols, enum mx_dir dir, uint8_t *out, size_t out_len,
		       struct pim_error *err);
/* Same with the scalar reference (slow; the specification the fast path is tested against). */
int mx_quantize_tensor_ref(enum mx_format f, enum mx_src src_type, const void *src, size_t rows,
			   size_t cols, enum mx_dir dir, uint8_t *out, size_t out_len,
			   struct pim_error *err);
/* Same with mx_quantize_block_trunc() (the paper kernel's reference). */
int mx_quantize_tensor_trunc(enum mx_format f, enum mx_src src_type, const void *src, size_t rows,
			     size_t cols, enum mx_dir dir, uint8_t *out, size_t out_len,
			     struct pim_error *err);
/* Same with a chosen implementation; -ENOTSUP if this CPU cannot run it. */
int mx_quantize_tensor_impl(enum mx_impl impl, enum mx_format f, enum mx_src src_type,
			    const void *src, size_t rows, size_t cols, enum mx_dir dir,
			    uint8_t *out, size_t out_len, struct pim_error *err);

/*
 * Threads. MX_THREADS_MAX bounds every thread count; mx_threads_allowed() is the number of
 * CPUs this process may run on (sched_getaffinity), at least 1, at most MX_THREADS_MAX.
 */
#define MX_THREADS_MAX 64
#define MX_MT_MIN_BLOCKS 16384 /* blocks per thread at least (256 Ki elements) */
unsigned mx_threads_allowed(void);

/*
 * Runs fn over the blocks [0, nblocks) split into contiguous ranges [b0, b1), one per
 * thread: up to threads of them (0: mx_threads_allowed()), each at least min_blocks long,
 * so small jobs run on the calling thread alone. A range whose thread cannot be created
 * runs on the calling thread. Returns 0 or the first range's negative result (with its err).
 */
int mx_split_blocks(unsigned threads, size_t nblocks, size_t min_blocks,
		    int (*fn)(void *arg, size_t b0, size_t b1, struct pim_error *err), void *arg,
		    struct pim_error *err);

/*
 * mx_quantize_tensor_impl() with row-blocked tensors split over threads (as
 * mx_split_blocks(); threads 0: the allowed CPUs). Blocks are independent, so the output is
 * the same bytes whatever the thread count. Column blocking runs on one thread.
 */
int mx_quantize_tensor_mt(unsigned threads, enum mx_impl impl, enum mx_format f,
			  enum mx_src src_type, const void *src, size_t rows, size_t cols,
			  enum mx_dir dir, uint8_t *out, size_t out_len, struct pim_error *err);

/*
 * Blocked tensors: what the MX (16-element blocks, here) and the OCP MX (32-element blocks,
 * mx_ocp.c) quantizers share. Only the block size and a block's packed bytes differ; the
 * format's own work comes through the callbacks.
 */
#define MX_BLOCKED_MAX 32 /* the largest block of either family (OCP MX) */
struct mx_blocked {
	unsigned block;     /* elements per block: MX_BLOCK or MX_OCP_BLOCK (<= MX_BLOCKED_MAX) */
	size_t block_bytes; /* packed bytes of one block */
	const char *name;   /* the format's name, for messages */
	const void *fmt;    /* the format, handed to the callbacks */
	/* Unpacks and dequantizes one packed block into block floats. */
	void (*decode)(const void *fmt, const uint8_t *in, float *out);
	/* Quantizes the 1 x cols row-blocked tensor src (the parts of mx_blocked_quantize_mt). */
	int (*quantize_row)(const void *fmt, enum mx_impl impl, enum mx_src t, const void *src,
			    size_t cols, uint8_t *out, size_t out_len, struct pim_error *err);
};

/* The shape rules above for m's block (the format itself already checked); *bytes the packed
 * size. -EINVAL or -EOVERFLOW with err filled. */
int mx_blocked_shape(const struct mx_blocked *m, size_t rows, size_t cols, enum mx_dir dir,
		     size_t *bytes, struct pim_error *err);
/* mx_blocked_shape() and a quantizer's other arguments: the source type, the buffers, out_len. */
int mx_blocked_check_quantize(const struct mx_blocked *m, enum mx_src t, const void *src,
			      size_t rows, size_t cols, enum mx_dir dir, const uint8_t *out,
			      size_t out_len, struct pim_error *err);

/*
 * Element k of block b: its flat index in the row-major tensor. Row blocking: the blocks are
 * consecutive runs of block elements. Column blocking: block b = c * (rows / block) + rb.
 */
static inline size_t mx_blocked_elem(unsigned block, size_t rows, size_t cols, enum mx_dir dir,
				     size_t b, unsigned k)
{
	if (dir == MX_DIR_ROW)
		return b * block + k;
	size_t rblocks = rows / block, c = b / rblocks, rb = b % rblocks;
	return (rb * block + k) * cols + c;
}

/* Element i of a source tensor as FP32 bits (BF16 widened exactly). */
static inline uint32_t mx_src_bits(enum mx_src t, const void *src, size_t i)
{
	if (t == MX_SRC_BF16)
		return (uint32_t)((const uint16_t *)src)[i] << 16;
	uint32_t u;
	memcpy(&u, (const char *)src + i * sizeof(float), sizeof u);
	return u;
}

/* Dequantizes a packed tensor of m's format (as mx_dequantize_tensor()). */
int mx_blocked_dequantize(const struct mx_blocked *m, const uint8_t *in, size_t in_len,
			  size_t rows, size_t cols, enum mx_dir dir, float *out, size_t out_count,
			  struct pim_error *err);
/* Quantizes a checked row-blocked tensor of nblocks blocks with m->quantize_row, split over
 * threads as mx_split_blocks() (at least min_blocks per thread). */
int mx_blocked_quantize_mt(const struct mx_blocked *m, unsigned threads, enum mx_impl impl,
			   enum mx_src t, const void *src, size_t nblocks, uint8_t *out,
			   size_t min_blocks, struct pim_error *err);

/*
 * Dequantizes a packed tensor (in_len bytes, at least mx_packed_size()) into out, rows x cols
 * FP32 row-major, out_count elements (at least rows * cols). 0 or negative errno as above.
 */
int mx_dequantize_tensor(enum mx_format f, const uint8_t *in, size_t in_len, size_t rows,
			 size_t cols, enum mx_dir dir, float *out, size_t out_count,
			 struct pim_error *err);

#endif
