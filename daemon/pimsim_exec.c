/* SPDX-License-Identifier: MIT */
/*
 * pimsim_exec.c: the functional model of the HBM-PIM kernel (pimsim.h): a machine that holds
 * the banks' words and registers and executes the stream command by command, the loading of
 * the source tensor into the banks and the read-back of the MX results, and
 * pimsim_quantize(), which runs it and checks its timing beside the output.
 */
#include "pimsim_internal.h"

#include <inttypes.h>
#include <string.h>

/* ---- functional executor ------------------------------------------------------------------- */

struct machine {
	const struct kctx *k;
	unsigned units;
	uint64_t nrows;
	uint8_t *mem;    /* [pch][unit][bank][row][col][32] */
	uint32_t *regs;  /* [pch][unit][reg][lane] */
	uint8_t *cnt;    /* [pch][unit][lane] */
	struct {
		uint64_t rounds;
		int64_t open[2]; /* row open in the even / odd banks */
	} *pch;
};

static uint8_t *word_ptr(struct machine *M, unsigned pch, unsigned u, unsigned b, uint64_t row,
			 unsigned col)
{
	uint64_t i = (((uint64_t)pch * M->units + u) * 2 + b) * M->nrows + row;
	return M->mem + (i * M->k->wpr + col) * 32;
}

static void word_to_lanes(const struct kctx *k, const uint8_t *w, uint32_t *lanes)
{
	unsigned bytes = k->lw / 8;
	for (unsigned l = 0; l < k->nl; l++) {
		uint32_t v = 0;
		for (unsigned i = 0; i < bytes; i++)
			v |= (uint32_t)w[l * bytes + i] << (8 * i);
		lanes[l] = v;
	}
}

static void lanes_to_word(const struct kctx *k, const uint32_t *lanes, uint8_t *w)
{
	unsigned bytes = k->lw / 8;
	for (unsigned l = 0; l < k->nl; l++)
		for (unsigned i = 0; i < bytes; i++)
			w[l * bytes + i] = (uint8_t)(lanes[l] >> (8 * i));
}

static int exec_cmd(struct machine *M, unsigned pch, const struct pimsim_cmd *c,
		    struct pim_error *err)
{
	const struct kctx *k = M->k;
	const unsigned nl = k->nl;
	const uint32_t mask = k->lane_mask;
	unsigned b = c->bank & 1;

	switch ((enum pimsim_op)c->op) {
	case PIMSIM_OP_ACT:
		if (c->row >= M->nrows)
			return err_set(err, -EFAULT, "ACT of row %u beyond the %" PRIu64
				       " rows modelled", c->row, M->nrows);
		M->pch[pch].open[b] = c->row;
		return 0;
	case PIMSIM_OP_PRE:
		M->pch[pch].open[b] = -1;
		return 0;
	case PIMSIM_OP_SETS:
		return 0; /* immediates travel in the commands */
	case PIMSIM_OP_MOVR:
	case PIMSIM_OP_MOVW:
		if (M->pch[pch].open[b] != (int64_t)c->row)
			return err_set(err, -EFAULT, "%s to row %u of bank %u while row %" PRId64
				       " is open (command generator bug)", pimsim_op_name(c->op),
				       c->row, b, M->pch[pch].open[b]);
		break;
	default:
		break;
	}
	if (c->dst >= PIMSIM_NREGS || c->a >= PIMSIM_NREGS || c->b >= PIMSIM_NREGS ||
	    c->c >= PIMSIM_NREGS)
		return err_set(err, -EFAULT, "register out of range in %s", pimsim_op_name(c->op));

	for (unsigned u = 0; u < M->units; u++) {
		uint32_t *R = M->regs + ((size_t)pch * M->units + u) * PIMSIM_NREGS * 16;
		uint8_t *S = M->cnt + ((size_t)pch * M->units + u) * 16;
		uint32_t *d = R + c->dst * 16, *a = R + c->a * 16, *bb = R + c->b * 16;
		uint32_t *cc = R + c->c * 16, tmp[16];
		bool imm = c->flags & PIMSIM_F_IMM;

		for (unsigned l = 0; l < nl; l++)
			tmp[l] = imm ? c->imm & mask : bb[l];
		switch ((enum pimsim_op)c->op) {
		case PIMSIM_OP_MOVR:
			word_to_lanes(k, word_ptr(M, pch, u, b, c->row, c->col), d);
			break;
		case PIMSIM_OP_MOVW:
			lanes_to_word(k, a, word_ptr(M, pch, u, b, c->row, c->col));
			break;
		case PIMSIM_OP_AND:
			for (unsigned l = 0; l < nl; l++)
				d[l] = a[l] & tmp[l];
			break;
		case PIMSIM_OP_OR:
			for (unsigned l = 0; l < nl; l++)
				d[l] = a[l] | tmp[l];
			break;
		case PIMSIM_OP_ADD:
			for (unsigned l = 0; l < nl; l++)
				d[l] = (a[l] + tmp[l]) & mask;
			break;
		case PIMSIM_OP_SUB:
			for (unsigned l = 0; l < nl; l++)
				d[l] = (a[l] - tmp[l]) & mask;
			break;
		case PIMSIM_OP_MAX:
			for (unsigned l = 0; l < nl; l++)
				d[l] = a[l] > tmp[l] ? a[l] : tmp[l];
			break;
		case PIMSIM_OP_MIN:
			for (unsigned l = 0; l < nl; l++)
				d[l] = a[l] < tmp[l] ? a[l] : tmp[l];
			break;
		case PIMSIM_OP_CMPLT:
			for (unsigned l = 0; l < nl; l++)
				d[l] = a[l] < tmp[l] ? mask : 0;
			break;
		case PIMSIM_OP_CMPGT:
			for (unsigned l = 0; l < nl; l++)
				d[l] = a[l] > tmp[l] ? mask : 0;
			break;
		case PIMSIM_OP_BSHR:
			for (unsigned l = 0; l < nl; l++)
				d[l] = a[l] >> 1;
			break;
		case PIMSIM_OP_BSHL:
			for (unsigned l = 0; l < nl; l++)
				d[l] = (a[l] << 1) & mask;
			break;
		case PIMSIM_OP_BSHRJ:
			for (unsigned l = 0; l < nl; l++)
				d[l] = a[l] >> 1 | (a[l] & 1);
			break;
		case PIMSIM_OP_LSHU:
		case PIMSIM_OP_LSHD: {
			uint32_t src[16];
			unsigned sh = (c->imm ? c->imm : 1) % nl;
			memcpy(src, a, sizeof src);
			for (unsigned l = 0; l < nl; l++)
				d[l] = src[c->op == PIMSIM_OP_LSHU ? (l + sh) % nl : (l + nl - sh) % nl];
			break;
		}
		case PIMSIM_OP_LDCNT:
			for (unsigned l = 0; l < nl; l++)
				S[l] = (uint8_t)((a[l] >> k->expshift) > 255 ? 255 : a[l] >> k->expshift);
			break;
		case PIMSIM_OP_CSHRJ:
			for (unsigned l = 0; l < nl; l++)
				if (S[l]) {
					d[l] = a[l] >> 1 | (a[l] & 1);
					S[l]--;
				} else {
					d[l] = a[l];
				}
			break;
		case PIMSIM_OP_CSHR:
			for (unsigned l = 0; l < nl; l++)
				if (S[l]) {
					d[l] = a[l] >> 1;
					S[l]--;
				} else {
					d[l] = a[l];
				}
			break;
		case PIMSIM_OP_SEL:
			for (unsigned l = 0; l < nl; l++)
				d[l] = (bb[l] & a[l]) | (cc[l] & ~a[l]);
			break;
		case PIMSIM_OP_SETC:
			for (unsigned l = 0; l < nl; l++)
				d[l] = l % 2 ? c->imm2 : c->imm;
			break;
		default:
			return err_set(err, -EFAULT, "unknown PIM command %u", c->op);
		}
	}
	return 0;
}

/* Where element (r, c) of the tile in slot `slot` of a pack lives: word and lane. */
static void elem_pos(const struct kctx *k, unsigned slot, unsigned r, unsigned c, unsigned *w,
		     unsigned *lane)
{
	if (k->map == PIMSIM_TILED) {
		unsigned nw = 16 / k->nl;
		*w = r * nw + c / k->nl;
		*lane = c % k->nl;
	} else {
		*w = 16 * r + c;
		*lane = slot;
	}
}

/* Pack number -> pseudo-channel, unit, round. */
static void pack_place(const struct layout *L, const struct kctx *k, uint64_t pack, unsigned *pch,
		       unsigned *unit, uint64_t *round)
{
	uint64_t q = pack / L->P;
	*pch = (unsigned)(pack % L->P);
	*unit = (unsigned)(q % k->units);
	*round = q / k->units;
}

static uint32_t src_elem(enum mx_src t, const void *src, size_t i)
{
	if (t == MX_SRC_BF16)
		return ((const uint16_t *)src)[i];
	uint32_t u;
	memcpy(&u, (const char *)src + i * 4, 4);
	return u;
}

static void load_tensor(struct machine *M, const struct layout *L, const void *src, size_t rows,
			size_t cols)
{
	const struct kctx *k = M->k;

	for (uint64_t tile = 0; tile < L->tiles; tile++) {
		uint64_t ti = tile / L->tiles_c, tj = tile % L->tiles_c, round;
		unsigned pch, unit, slot = (unsigned)(tile % k->tiles_per_pack);
		pack_place(L, k, tile / k->tiles_per_pack, &pch, &unit, &round);
		for (unsigned r = 0; r < 16; r++)
			for (unsigned c = 0; c < 16; c++) {
				size_t R = ti * 16 + r, C = tj * 16 + c;
				if (R >= rows || C >= cols)
					continue; /* zero padding */
				unsigned w, lane, b;
				elem_pos(k, slot, r, c, &w, &lane);
				b = word_bank(k, w);
				uint64_t addr = round * k->half + (w - b * k->half);
				uint8_t *p = word_ptr(M, pch, unit, b, addr / k->wpr,
						      (unsigned)(addr % k->wpr));
				uint32_t v = src_elem(k->src, src, R * cols + C);
				for (unsigned i = 0; i < k->lw / 8; i++)
					p[lane * (k->lw / 8) + i] = (uint8_t)(v >> (8 * i));
			}
	}
}

static uint32_t read_lane(struct machine *M, const struct layout *L, const struct tmpl *t,
			  unsigned pch, unsigned unit, uint64_t round, struct loc lo, unsigned lane)
{
	const struct kctx *k = M->k;
	uint64_t addr = L->out_base_row * k->wpr + round * t->out_round + lo.rel;
	uint32_t lanes[16];

	word_to_lanes(k, word_ptr(M, pch, unit, lo.bank, addr / k->wpr, (unsigned)(addr % k->wpr)),
		      lanes);
	return lanes[lane];
}

/* Reads the results back into the mx.h packed layout, checking every bit of them. */
static int unload(struct machine *M, const struct layout *L, const struct tmpl *t, size_t rows,
		  size_t cols, uint8_t *out, struct pim_error *err)
{
	const struct kctx *k = M->k;
	const size_t bb = mx_block_bytes(k->fmt);
	const uint32_t field_mask = k->sign | ((2u << k->m) - 1);

	for (uint64_t tile = 0; tile < L->tiles; tile++) {
		uint64_t ti = tile / L->tiles_c, tj = tile % L->tiles_c, round;
		unsigned pch, unit, slot = (unsigned)(tile % k->tiles_per_pack);
		pack_place(L, k, tile / k->tiles_per_pack, &pch, &unit, &round);
		for (unsigned i = 0; i < 16; i++) {
			/* Block i of the tile: tile row i (row blocking) or column i. */
			size_t R0 = ti * 16 + (k->dir == MX_DIR_ROW ? i : 0);
			size_t C0 = tj * 16 + (k->dir == MX_DIR_ROW ? 0 : i);
			if (R0 >= rows || C0 >= cols)
				continue; /* padding block */
			size_t blk = k->dir == MX_DIR_ROW ? R0 * (cols / 16) + C0 / 16
							  : C0 * (rows / 16) + R0 / 16;
			struct mx_block mb = { 0 };
			uint32_t hdr;
			unsigned g, glane, w, lane;

			/* Header: group and lane of the block, or every lane (tiled rows). */
			if (k->cross) {
				g = i, glane = 0;
			} else if (k->map == PIMSIM_TILED) {
				elem_pos(k, slot, 0, i, &w, &lane);
				g = w, glane = lane;
			} else {
				g = i, glane = slot;
			}
			hdr = read_lane(M, L, t, pch, unit, round, t->hdr_out[g], glane);
			if (k->cross)
				for (unsigned l = 1; l < k->nl; l++)
					if (read_lane(M, L, t, pch, unit, round, t->hdr_out[g], l) != hdr)
						return err_set(err, -EBADMSG, "block %zu: header lanes "
							       "disagree", blk);
			if (hdr & ~k->expmask)
				return err_set(err, -EBADMSG, "block %zu: header 0x%x has bits outside "
					       "the exponent field", blk, hdr);
			mb.exp = (uint8_t)(hdr >> k->expshift);
			for (unsigned j = 0; j < 16; j++) {
				unsigned r = k->dir == MX_DIR_ROW ? i : j, c = k->dir == MX_DIR_ROW ? j : i;
				elem_pos(k, slot, r, c, &w, &lane);
				uint32_t v = read_lane(M, L, t, pch, unit, round, t->elem_out[w], lane);
				if (v & ~field_mask)
					return err_set(err, -EBADMSG, "block %zu element %u: output "
						       "lane 0x%x has stray bits", blk, j, v);
				unsigned d = (v >> k->m) & 1;
				if (j % 2 && d != ((mb.micro >> (j / 2)) & 1))
					return err_set(err, -EBADMSG, "block %zu pair %u: the two "
						       "elements disagree on d", blk, j / 2);
				mb.micro |= (uint8_t)(d << (j / 2));
				mb.sign |= (uint16_t)((v >> (k->lw - 1)) << j);
				mb.mag[j] = (uint8_t)(v & ((1u << k->m) - 1));
			}
			mx_pack_block(k->fmt, &mb, out + blk * bb);
		}
	}
	return 0;
}

/* ---- public: quantize ---------------------------------------------------------------------- */

static void machine_free(struct machine *M)
{
	free(M->mem);
	free(M->regs);
	free(M->cnt);
	free(M->pch);
}

/* Loads the tensor, runs every pseudo-channel's rounds and times the critical one. */
static int machine_run(struct machine *M, const struct pimsim_params *p, const struct job *j,
		       const void *src, size_t rows, size_t cols, struct tsnap *timed,
		       struct pim_error *err)
{
	struct timing tm;
	_cleanup_(freep) struct pimsim_cmd *cmds = NULL;
	struct cmdbuf b = { 0 };
	struct rowstate rs = { { -1, -1 } };
	uint64_t words = (uint64_t)j->L.pch_used * j->k.units * 2 * j->L.rows_needed * j->k.wpr;
	int r;

	if (words > (1ull << 31))
		return err_set(err, -E2BIG, "tensor %zux%zu is too large for the functional model",
			       rows, cols);
	M->k = &j->k;
	M->units = j->k.units;
	M->nrows = j->L.rows_needed;
	M->mem = calloc(words, 32);
	M->regs = calloc((size_t)j->L.pch_used * M->units * PIMSIM_NREGS * 16, sizeof *M->regs);
	M->cnt = calloc((size_t)j->L.pch_used * M->units * 16, 1);
	M->pch = calloc(j->L.pch_used, sizeof *M->pch);
	if (!M->mem || !M->regs || !M->cnt || !M->pch)
		return err_set(err, -ENOMEM, "out of memory for the PIM model of a %zux%zu tensor",
			       rows, cols);
	load_tensor(M, &j->L, src, rows, cols);
	for (unsigned pch = 0; pch < j->L.pch_used; pch++) {
		M->pch[pch].rounds = pch_rounds(&j->L, &j->k, pch);
		M->pch[pch].open[0] = M->pch[pch].open[1] = -1;
	}

	/* Every pseudo-channel runs the same stream (pCH 0 the longest); time it once. */
	timing_init(&tm, p);
	for (unsigned i = 0; i < j->t.nsetup; i++) {
		timing_cmd(&tm, &j->t.setup[i]);
		for (unsigned pch = 0; pch < j->L.pch_used; pch++) {
			r = exec_cmd(M, pch, &j->t.setup[i], err);
			if (r < 0)
				return r;
		}
	}
	for (uint64_t q = 0; q < j->L.rounds; q++) {
		b.n = 0;
		round_emit(&b, &j->t, &j->k, &j->L, &rs, q);
		cmds = b.v;
		if (b.err)
			return err_set(err, b.err, "out of memory");
		for (size_t i = 0; i < b.n; i++)
			timing_cmd(&tm, &b.v[i]);
		for (unsigned pch = 0; pch < j->L.pch_used; pch++) {
			if (q >= M->pch[pch].rounds)
				continue;
			for (size_t i = 0; i < b.n; i++) {
				r = exec_cmd(M, pch, &b.v[i], err);
				if (r < 0)
					return r;
			}
		}
	}
	*timed = tm.s;
	return 0;
}

int pimsim_quantize(const struct pimsim_params *p, enum pimsim_mapping map, enum mx_dir dir,
		    enum mx_format f, enum mx_src src_type, const void *src, size_t rows,
		    size_t cols, uint8_t *out, size_t out_len, struct pimsim_stats *stats,
		    struct pim_error *err)
{
	struct job j;
	struct machine M = { 0 };
	struct tsnap timed;
	size_t need;
	int r;

	r = job_init(&j, p, map, dir, f, src_type, rows, cols, err);
	if (r < 0)
		return r;
	need = mx_packed_size(f, rows, cols, dir);
	if (!src || !out)
		r = err_set(err, -EINVAL, "NULL tensor buffer");
	else if (need == 0 || out_len < need)
		r = err_set(err, -EINVAL, "output buffer of %zu bytes is smaller than the %zu the "
			    "packed tensor needs", out_len, need);
	else if (j.L.rows_needed > p->rows_per_bank)
		r = err_set(err, -E2BIG, "tensor %zux%zu needs %" PRIu64 " rows per bank (input and "
			    "output) but a bank has %u; add stacks or split the tensor", rows, cols,
			    j.L.rows_needed, p->rows_per_bank);
	else
		r = machine_run(&M, p, &j, src, rows, cols, &timed, err);
	if (r == 0)
		r = unload(&M, &j.L, &j.t, rows, cols, out, err);
	if (r == 0 && stats)
		job_stats(p, &j, &timed, stats);
	machine_free(&M);
	tmpl_free(&j.t);
	return r;
}
