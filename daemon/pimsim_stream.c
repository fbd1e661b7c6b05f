/* SPDX-License-Identifier: MIT */
/*
 * pimsim_stream.c: command-stream generation of the HBM-PIM model (pimsim.h).  The kernel
 * context's constants, the round template (the command sequences of JIT-Q §4, written once
 * per round with bank-relative addresses and register allocation), the work distribution
 * (tiles and packs over pseudo-channels, units and rounds) and the stream itself: a round
 * instantiated with absolute rows, ACT/PRE inserted where a bank's open row changes.
 */
#include "pimsim_internal.h"

#include <inttypes.h>
#include <string.h>

/* ---- kernel context ---------------------------------------------------------------------- */

int kctx_init(struct kctx *k, const struct pimsim_params *p, enum pimsim_mapping map,
		     enum mx_dir dir, enum mx_format f, enum mx_src src, struct pim_error *err)
{
	unsigned bits;

	memset(k, 0, sizeof *k);
	if (map != PIMSIM_TILED && map != PIMSIM_STRIDED && map != PIMSIM_STRIDED_OPT)
		return err_set(err, -EINVAL, "invalid PIM mapping %d", (int)map);
	if (dir != MX_DIR_ROW && dir != MX_DIR_COL)
		return err_set(err, -EINVAL, "invalid blocking direction %d", (int)dir);
	k->m = mx_mantissa_bits(f);
	if (!k->m)
		return err_set(err, -EINVAL, "invalid MX format %d", (int)f);
	if (src == MX_SRC_FP32) {
		k->lw = 32, k->expshift = 23, bits = 24;
		k->lane_mask = 0xffffffffu;
	} else if (src == MX_SRC_BF16) {
		k->lw = 16, k->expshift = 7, bits = 8;
		k->lane_mask = 0xffffu;
	} else {
		return err_set(err, -EINVAL, "invalid source type %d", (int)src);
	}
	k->map = map, k->dir = dir, k->fmt = f, k->src = src;
	k->nl = 256 / k->lw;
	k->expmask = 0xffu << k->expshift;
	k->mantmask = (1u << k->expshift) - 1;
	k->hidden = 1u << k->expshift;
	k->unit = 1u << k->expshift;
	k->sign = 1u << (k->lw - 1);
	/*
	 * M = rne(v / 2^(C + k)) with v the significand (bits wide, hidden bit included),
	 * C = bits - m and k = E - e - d (mx.c: sh = 24 - m + (E - e) - d in FP32 terms; BF16
	 * has the same value with 16 fewer bits). Sticky-shifting by C + k - 2 keeps two guard
	 * bits for the final rounding; BF16 MX9 has C = 1 and needs one left shift first.
	 * For k >= m + 1, v / 2^(C + k) < 1/2 rounds to 0, so K = m + 1 conditional steps are
	 * enough whatever the data, which is what a broadcast kernel needs.
	 */
	unsigned C = bits - k->m;
	k->C = C;
	k->paper = p->kernel == PIMSIM_KERNEL_PAPER;
	k->lsw = p->lane_shift_lanes ? p->lane_shift_lanes : 1;
	if (k->paper) {
		/* Truncation: v / 2^(C + k) < 1 for k >= m, so K = m steps give every input its
		 * truncated M; fewer would leave wrong bits for large k. */
		if (p->cond_shift_range && p->cond_shift_range < k->m)
			return err_set(err, -EINVAL, "cond_shift_range = %u is below m = %u of %s: "
				       "the paper kernel would not truncate every input correctly",
				       p->cond_shift_range, k->m, mx_format_name(f));
		k->pre = k->cj = 0;
		k->K = p->cond_shift_range ? p->cond_shift_range : k->m;
	} else {
		k->pre = C < 2 ? 2 - C : 0;
		k->cj = C + k->pre - 2;
		k->K = k->m + 1;
	}
	k->opt = map == PIMSIM_STRIDED_OPT;
	k->cross = map == PIMSIM_TILED && dir == MX_DIR_ROW;
	k->tiles_per_pack = map == PIMSIM_TILED ? 1 : k->nl;
	/* A tiled pack is one tile: 256 elements of lw bits; a strided pack is 256 words. */
	k->wp = map == PIMSIM_TILED ? k->lw : 256;
	k->half = k->wp / 2;
	k->wpr = p->row_bytes / 32;
	k->units = p->banks_per_pch / 2;
	return 0;
}

/* ---- round template --------------------------------------------------------------------- */

enum {
	R_E = 0,   /* shared exponent, in place */
	R_NN = 1,  /* not-NaN mask of the block */
	R_U0 = 2,  /* input words */
	R_U1 = 3,
	R_E0 = 4,  /* their exponents, then the conditional shift amount k */
	R_E1 = 5,
	R_LT = 6,  /* e < E, then the pair mask d */
	R_ED = 7,  /* E - d */
	R_DB = 8,  /* output bit d << m */
	R_X = 9,   /* significand being shifted */
	R_T0 = 10, /* temporaries */
	R_T1 = 11,
	R_T2 = 12,
	R_T3 = 13,
	R_EVEN = 14, /* lane constants (tiled row blocking) */
	R_ODD = 15,
};

static void t_push(struct tmpl *t, const struct pimsim_cmd *c, bool out, uint32_t rel)
{
	if (t->err)
		return;
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 1024;
		struct tcmd *v = realloc(t->v, cap * sizeof *v);
		if (!v) {
			t->err = -ENOMEM;
			return;
		}
		t->v = v, t->cap = cap;
	}
	t->v[t->n++] = (struct tcmd){ .c = *c, .out = out, .rel = rel };
}

static void t_srf(struct tmpl *t, uint32_t imm)
{
	for (unsigned i = 0; i < t->nsrf; i++)
		if (t->srf[i] == imm)
			return;
	if (t->nsrf == ELEMENTSOF(t->srf)) {
		t->err = -E2BIG;
		return;
	}
	t->srf[t->nsrf++] = imm;
}

static void alu(struct tmpl *t, enum pimsim_op op, unsigned d, unsigned a, unsigned b)
{
	struct pimsim_cmd c = { .op = (uint8_t)op, .dst = (uint8_t)d, .a = (uint8_t)a,
				.b = (uint8_t)b };
	t_push(t, &c, false, 0);
}

static void alui(struct tmpl *t, enum pimsim_op op, unsigned d, unsigned a, uint32_t imm)
{
	struct pimsim_cmd c = { .op = (uint8_t)op, .dst = (uint8_t)d, .a = (uint8_t)a,
				.flags = PIMSIM_F_IMM, .imm = imm };
	t_srf(t, imm);
	t_push(t, &c, false, 0);
}

static void un(struct tmpl *t, enum pimsim_op op, unsigned d, unsigned a)
{
	alu(t, op, d, a, 0);
}

/* A lane shift by n lanes (imm, not an SRF scalar: it is part of the command). */
static void lsh(struct tmpl *t, enum pimsim_op op, unsigned d, unsigned a, unsigned n)
{
	struct pimsim_cmd c = { .op = (uint8_t)op, .dst = (uint8_t)d, .a = (uint8_t)a, .imm = n };
	t_push(t, &c, false, 0);
}

static void sel(struct tmpl *t, unsigned d, unsigned m, unsigned a, unsigned b)
{
	struct pimsim_cmd c = { .op = PIMSIM_OP_SEL, .dst = (uint8_t)d, .a = (uint8_t)m,
				.b = (uint8_t)a, .c = (uint8_t)b };
	t_push(t, &c, false, 0);
}

static void movr(struct tmpl *t, const struct kctx *k, unsigned d, unsigned w)
{
	unsigned b = word_bank(k, w);
	struct pimsim_cmd c = { .op = PIMSIM_OP_MOVR, .dst = (uint8_t)d, .bank = (uint8_t)b };
	t_push(t, &c, false, w - b * k->half);
}

static struct loc movw(struct tmpl *t, unsigned a, unsigned bank)
{
	struct pimsim_cmd c = { .op = PIMSIM_OP_MOVW, .a = (uint8_t)a, .bank = (uint8_t)bank };
	struct loc l = { (uint8_t)bank, t->out_count[bank]++ };
	t_push(t, &c, true, l.rel);
	return l;
}

/*
 * One element: u holds the input word, e its exponent field (in place), R_ED the pair's
 * E - d, R_DB the output d bit. Leaves the output lane (sign | d << m | M) in R_X and
 * overwrites e with k = E - d - e.
 */
static void emit_element_paper(struct tmpl *t, const struct kctx *k, unsigned u, unsigned e)
{
	unsigned steps = k->C + k->K;

	alui(t, PIMSIM_OP_AND, R_X, u, k->mantmask);
	alui(t, PIMSIM_OP_OR, R_X, R_X, k->hidden); /* no zero/subnormal test */
	alu(t, PIMSIM_OP_SUB, e, R_ED, e);          /* k = E - d - e */
	if (k->C)
		alui(t, PIMSIM_OP_ADD, e, e, k->C * k->unit); /* the whole shift C + k */
	if (k->opt) {
		un(t, PIMSIM_OP_LDCNT, 0, e);
		for (unsigned i = 0; i < steps; i++)
			un(t, PIMSIM_OP_CSHR, R_X, R_X);
	} else {
		for (unsigned i = 0; i < steps; i++) {
			alui(t, PIMSIM_OP_CMPGT, R_T0, e, i * k->unit);
			un(t, PIMSIM_OP_BSHR, R_T1, R_X);
			sel(t, R_X, R_T0, R_T1, R_X);
		}
	}
	alui(t, PIMSIM_OP_AND, R_T0, u, k->sign);
	alu(t, PIMSIM_OP_OR, R_X, R_X, R_T0);
	alu(t, PIMSIM_OP_OR, R_X, R_X, R_DB);
}

static void emit_element(struct tmpl *t, const struct kctx *k, unsigned u, unsigned e)
{
	if (k->paper) {
		emit_element_paper(t, k, u, e);
		return;
	}
	alui(t, PIMSIM_OP_AND, R_X, u, k->mantmask);
	alui(t, PIMSIM_OP_OR, R_X, R_X, k->hidden);
	alui(t, PIMSIM_OP_CMPGT, R_T0, e, 0); /* e = 0: zero or subnormal, flushed */
	alu(t, PIMSIM_OP_AND, R_X, R_X, R_T0);
	alu(t, PIMSIM_OP_SUB, e, R_ED, e); /* k = E - d - e, in the exponent field */
	for (unsigned i = 0; i < k->pre; i++)
		un(t, PIMSIM_OP_BSHL, R_X, R_X);
	for (unsigned i = 0; i < k->cj; i++)
		un(t, PIMSIM_OP_BSHRJ, R_X, R_X);
	if (k->opt) {
		/* JIT-Q §4.1 optimization: one command per conditional bit shift. */
		un(t, PIMSIM_OP_LDCNT, 0, e);
		for (unsigned i = 0; i < k->K; i++)
			un(t, PIMSIM_OP_CSHRJ, R_X, R_X);
	} else {
		/* Without it: compare, shift, merge per conditional bit shift. */
		for (unsigned i = 0; i < k->K; i++) {
			alui(t, PIMSIM_OP_CMPGT, R_T0, e, i * k->unit);
			un(t, PIMSIM_OP_BSHRJ, R_T1, R_X);
			sel(t, R_X, R_T0, R_T1, R_X);
		}
	}
	/* Round to nearest even on the two guard bits: (x + 1 + bit2(x)) >> 2. */
	un(t, PIMSIM_OP_BSHR, R_T0, R_X);
	un(t, PIMSIM_OP_BSHR, R_T0, R_T0);
	alui(t, PIMSIM_OP_AND, R_T0, R_T0, 1);
	alu(t, PIMSIM_OP_ADD, R_X, R_X, R_T0);
	alui(t, PIMSIM_OP_ADD, R_X, R_X, 1);
	un(t, PIMSIM_OP_BSHR, R_X, R_X);
	un(t, PIMSIM_OP_BSHR, R_X, R_X);
	alui(t, PIMSIM_OP_MIN, R_X, R_X, (1u << k->m) - 1); /* saturate (doc/design.md §5.1) */
	alui(t, PIMSIM_OP_AND, R_T0, u, k->sign);
	alu(t, PIMSIM_OP_OR, R_X, R_X, R_T0);
	alu(t, PIMSIM_OP_AND, R_X, R_X, R_NN); /* NaN/Inf block: all zero */
	alu(t, PIMSIM_OP_OR, R_X, R_X, R_DB);
}

/* The pair part shared by both kernels: R_LT holds d as a mask; make R_ED and R_DB. */
static void emit_pair_tail(struct tmpl *t, const struct kctx *k)
{
	alui(t, PIMSIM_OP_AND, R_ED, R_LT, k->unit);
	alu(t, PIMSIM_OP_SUB, R_ED, R_E, R_ED);
	if (k->paper) {
		alui(t, PIMSIM_OP_AND, R_DB, R_LT, 1u << k->m); /* no NaN block */
		return;
	}
	alu(t, PIMSIM_OP_AND, R_DB, R_LT, R_NN);
	alui(t, PIMSIM_OP_AND, R_DB, R_DB, 1u << k->m);
}

/*
 * Lane-parallel group: 16 words w[0..15], element j of the block of lane l in lane l of
 * w[j] (strided both directions, tiled column blocking). Two passes: the max, then pairs.
 */
static void emit_lane_group(struct tmpl *t, const struct kctx *k, const unsigned w[16],
			    unsigned g)
{
	for (unsigned j = 0; j < 16; j++) {
		movr(t, k, R_U0, w[j]);
		if (j == 0) {
			alui(t, PIMSIM_OP_AND, R_E, R_U0, k->expmask);
		} else {
			alui(t, PIMSIM_OP_AND, R_U0, R_U0, k->expmask);
			alu(t, PIMSIM_OP_MAX, R_E, R_E, R_U0);
		}
	}
	if (!k->paper)
		alui(t, PIMSIM_OP_CMPLT, R_NN, R_E, k->expmask); /* E < 255 */
	t->hdr_out[g] = movw(t, R_E, 1 - word_bank(k, w[0]));
	for (unsigned i = 0; i < 8; i++) {
		movr(t, k, R_U0, w[2 * i]);
		movr(t, k, R_U1, w[2 * i + 1]);
		alui(t, PIMSIM_OP_AND, R_E0, R_U0, k->expmask);
		alui(t, PIMSIM_OP_AND, R_E1, R_U1, k->expmask);
		alu(t, PIMSIM_OP_CMPLT, R_LT, R_E0, R_E);
		alu(t, PIMSIM_OP_CMPLT, R_T1, R_E1, R_E);
		alu(t, PIMSIM_OP_AND, R_LT, R_LT, R_T1);
		emit_pair_tail(t, k);
		emit_element(t, k, R_U0, R_E0);
		t->elem_out[w[2 * i]] = movw(t, R_X, 1 - word_bank(k, w[2 * i]));
		emit_element(t, k, R_U1, R_E1);
		t->elem_out[w[2 * i + 1]] = movw(t, R_X, 1 - word_bank(k, w[2 * i + 1]));
	}
}

/*
 * Tiled, row blocking: block r is in word r (BF16) or words 2r, 2r+1 (FP32), element j in
 * lane j % nl. The max is an all-reduce over the lanes by rotations (JIT-Q's lane shifts:
 * one lane per command), the pair partner comes from the neighbouring lanes.
 */
static void emit_cross_block(struct tmpl *t, const struct kctx *k, unsigned r)
{
	unsigned nw = 16 / k->nl, w[2], src;

	for (unsigned h = 0; h < nw; h++) {
		w[h] = r * nw + h;
		movr(t, k, R_U0 + h, w[h]);
		alui(t, PIMSIM_OP_AND, R_E0 + h, R_U0 + h, k->expmask);
	}
	src = R_E0;
	if (nw == 2) {
		alu(t, PIMSIM_OP_MAX, R_E, R_E0, R_E1);
		src = R_E;
	}
	for (unsigned s = k->nl / 2; s >= 1; s /= 2) {
		/* A rotation by s lanes: lsw lanes per command. */
		unsigned left = s, from = src;
		while (left) {
			unsigned n = left < k->lsw ? left : k->lsw;
			lsh(t, PIMSIM_OP_LSHU, R_T2, from, n);
			from = R_T2;
			left -= n;
		}
		alu(t, PIMSIM_OP_MAX, R_E, src, R_T2);
		src = R_E;
	}
	if (!k->paper)
		alui(t, PIMSIM_OP_CMPLT, R_NN, R_E, k->expmask);
	t->hdr_out[r] = movw(t, R_E, 1 - word_bank(k, w[0]));
	for (unsigned h = 0; h < nw; h++) {
		alu(t, PIMSIM_OP_CMPLT, R_LT, R_E0 + h, R_E);
		lsh(t, PIMSIM_OP_LSHU, R_T2, R_LT, 1); /* lane l gets lane l+1: partner of even l */
		lsh(t, PIMSIM_OP_LSHD, R_T3, R_LT, 1); /* lane l gets lane l-1: partner of odd l */
		alu(t, PIMSIM_OP_AND, R_T2, R_T2, R_EVEN);
		alu(t, PIMSIM_OP_AND, R_T3, R_T3, R_ODD);
		alu(t, PIMSIM_OP_OR, R_T2, R_T2, R_T3);
		alu(t, PIMSIM_OP_AND, R_LT, R_LT, R_T2);
		emit_pair_tail(t, k);
		emit_element(t, k, R_U0 + h, R_E0 + h);
		t->elem_out[w[h]] = movw(t, R_X, 1 - word_bank(k, w[h]));
	}
}

void tmpl_free(struct tmpl *t)
{
	free(t->v);
	t->v = NULL;
}

int tmpl_build(struct tmpl *t, const struct kctx *k)
{
	memset(t, 0, sizeof *t);
	if (k->cross) {
		for (unsigned r = 0; r < 16; r++)
			emit_cross_block(t, k, r);
	} else if (k->map == PIMSIM_TILED) {
		/* Column blocking of a tile: one group per word column (FP32: two). */
		unsigned nw = 16 / k->nl, w[16];
		for (unsigned h = 0; h < nw; h++) {
			for (unsigned j = 0; j < 16; j++)
				w[j] = j * nw + h;
			emit_lane_group(t, k, w, h);
		}
	} else {
		unsigned w[16];
		for (unsigned g = 0; g < 16; g++) {
			for (unsigned j = 0; j < 16; j++)
				w[j] = k->dir == MX_DIR_ROW ? 16 * g + j : 16 * j + g;
			emit_lane_group(t, k, w, g);
		}
	}
	if (t->err)
		return t->err;
	t->out_round = t->out_count[0] > t->out_count[1] ? t->out_count[0] : t->out_count[1];
	/* Setup: every SRF scalar once, the lane constants of the cross-lane kernel. */
	for (unsigned i = 0; i < t->nsrf; i++)
		t->setup[t->nsetup++] = (struct pimsim_cmd){ .op = PIMSIM_OP_SETS,
							     .flags = PIMSIM_F_IMM,
							     .imm = t->srf[i] };
	if (k->cross) {
		t->setup[t->nsetup++] = (struct pimsim_cmd){ .op = PIMSIM_OP_SETC, .dst = R_EVEN,
							     .imm = k->lane_mask };
		t->setup[t->nsetup++] = (struct pimsim_cmd){ .op = PIMSIM_OP_SETC, .dst = R_ODD,
							     .imm2 = k->lane_mask };
	}
	return 0;
}

/* ---- work distribution ------------------------------------------------------------------- */

static uint64_t div_up(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

static uint64_t gcd_u64(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t r = a % b;
		a = b, b = r;
	}
	return a;
}

/* Packs go round-robin over the pseudo-channels, then over the units, then rounds. */
uint64_t pch_rounds(const struct layout *L, const struct kctx *k, unsigned pch)
{
	uint64_t n = L->packs > pch ? div_up(L->packs - pch, L->P) : 0;
	return div_up(n, k->units);
}

int check_shape(enum mx_dir dir, size_t rows, size_t cols, struct pim_error *err)
{
	if (rows == 0 || cols == 0)
		return err_set(err, -EINVAL, "empty tensor %zux%zu: both dimensions must be non-zero",
			       rows, cols);
	if (dir == MX_DIR_ROW && cols % MX_BLOCK)
		return err_set(err, -EINVAL, "row blocking needs cols to be a multiple of %d, got "
			       "%zux%zu", MX_BLOCK, rows, cols);
	if (dir == MX_DIR_COL && rows % MX_BLOCK)
		return err_set(err, -EINVAL, "column blocking needs rows to be a multiple of %d, "
			       "got %zux%zu", MX_BLOCK, rows, cols);
	if (rows > (1ull << 40) || cols > (1ull << 40) ||
	    div_up(rows, 16) * div_up(cols, 16) > (1ull << 40))
		return err_set(err, -EOVERFLOW, "tensor %zux%zu is too large", rows, cols);
	return 0;
}

int layout_init(struct layout *L, const struct pimsim_params *p, const struct kctx *k,
		       const struct tmpl *t, size_t rows, size_t cols, struct pim_error *err)
{
	memset(L, 0, sizeof *L);
	L->tiles_r = div_up(rows, 16);
	L->tiles_c = div_up(cols, 16);
	L->tiles = L->tiles_r * L->tiles_c;
	L->packs = div_up(L->tiles, k->tiles_per_pack);
	L->P = p->stacks * p->pch_per_stack;
	L->pch_used = L->packs < L->P ? (unsigned)L->packs : L->P;
	L->rounds = pch_rounds(L, k, 0);
	if (L->rounds > UINT32_MAX / 4)
		return err_set(err, -EOVERFLOW, "%" PRIu64 " rounds per pseudo-channel: too many",
			       L->rounds);
	L->out_base_row = div_up(L->rounds * k->half, k->wpr);
	L->rows_needed = L->out_base_row + div_up(L->rounds * t->out_round, k->wpr);
	uint64_t per_in = k->wpr / gcd_u64(k->wpr, k->half);
	uint64_t per_out = k->wpr / gcd_u64(k->wpr, t->out_round);
	L->period = (unsigned)(per_in / gcd_u64(per_in, per_out) * per_out);
	return 0;
}

/* ---- stream: a round with absolute rows, ACT/PRE where rows change ---------------------- */

void cb_push(struct cmdbuf *b, const struct pimsim_cmd *c)
{
	if (b->err)
		return;
	if (b->n == b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 4096;
		struct pimsim_cmd *v = realloc(b->v, cap * sizeof *v);
		if (!v) {
			b->err = -ENOMEM;
			return;
		}
		b->v = v, b->cap = cap;
	}
	b->v[b->n++] = *c;
}

void round_emit(struct cmdbuf *b, const struct tmpl *t, const struct kctx *k,
		       const struct layout *L, struct rowstate *rs, uint64_t q)
{
	for (size_t i = 0; i < t->n; i++) {
		struct pimsim_cmd c = t->v[i].c;
		if (c.op == PIMSIM_OP_MOVR || c.op == PIMSIM_OP_MOVW) {
			uint64_t addr = t->v[i].out ? L->out_base_row * k->wpr + q * t->out_round +
							      t->v[i].rel
						    : q * k->half + t->v[i].rel;
			uint64_t row = addr / k->wpr;
			if (rs->open[c.bank] != (int64_t)row) {
				if (rs->open[c.bank] >= 0)
					cb_push(b, &(struct pimsim_cmd){ .op = PIMSIM_OP_PRE,
									 .bank = c.bank });
				cb_push(b, &(struct pimsim_cmd){ .op = PIMSIM_OP_ACT, .bank = c.bank,
								 .row = (uint32_t)row });
				rs->open[c.bank] = (int64_t)row;
			}
			c.row = (uint32_t)row;
			c.col = (uint16_t)(addr % k->wpr);
		}
		cb_push(b, &c);
	}
}
