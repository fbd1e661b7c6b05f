/* SPDX-License-Identifier: MIT */
/*
 * mx.c: MX9/MX6/MX4 quantization (doc/design.md §5.1). The layout and every edge case are documented
 * in mx.h; four quantizers must agree bit for bit:
 *   - the scalar reference mx_quantize_block(), written to read like the specification (here);
 *   - a branch-light portable version working on FP32 bit patterns (quant_bits_generic(),
 *     mx_simd.h);
 *   - an AVX2 version chosen at run time with __builtin_cpu_supports("avx2") (mx_avx2.c);
 *   - an AVX-512 (F/BW/VL/VBMI + BMI2) version, chosen the same way (mx_avx512.c).
 * This file also has the shape checks, the dispatch, the threads and the dequantizer.
 * tests/unit/test_mx.c compares them on millions of random values.
 */
#include "mx_simd.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <strings.h>

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
	if (mx_have_avx512())
		return MX_IMPL_AVX512;
	return mx_have_avx2() ? MX_IMPL_AVX2 : MX_IMPL_GENERIC;
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
		if (mx_have_avx2()) {
			mx_quant_avx2(f, src_type, src, rows, cols, dir, out);
			return 0;
		}
#endif
		return err_set(err, -ENOTSUP, "the avx2 MX quantizer needs a CPU with AVX2");
	case MX_IMPL_AVX512:
#if MX_HAVE_X86
		if (mx_have_avx512()) {
			mx_quant_avx512(f, src_type, src, rows, cols, dir, out);
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
