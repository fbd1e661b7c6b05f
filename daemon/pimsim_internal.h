/* SPDX-License-Identifier: MIT */
/*
 * pimsim_internal.h: what the files of the HBM-PIM model share, and nothing outside it uses.
 * pimsim_stream.c generates the command stream (kernel context, round template, work
 * distribution, rows); pimsim.c holds the names, the configuration, the timing engine and the
 * public stream and estimate; pimsim_exec.c executes the stream functionally.  The names have
 * hidden visibility: no program or library linked with pimd's core sees them.
 */
#ifndef PIMD_PIMSIM_INTERNAL_H
#define PIMD_PIMSIM_INTERNAL_H

#include "pimsim.h"

#pragma GCC visibility push(hidden)

/* ---- kernel context (pimsim_stream.c) ---------------------------------------------------- */

struct kctx {
	enum pimsim_mapping map;
	enum mx_dir dir;
	enum mx_format fmt;
	enum mx_src src;
	unsigned m;        /* MX magnitude bits */
	unsigned lw, nl;   /* lane width in bits, lanes per word */
	unsigned expshift; /* position of the exponent field (23 / 7) */
	uint32_t lane_mask, expmask, mantmask, hidden, sign, unit;
	unsigned pre;      /* left shifts to make room for two guard bits */
	unsigned cj;       /* unconditional sticky right shifts */
	unsigned K;        /* conditional sticky right shifts (worst case, data-independent) */
	bool opt, cross;   /* strided-opt counter; block inside a word (tiled, row blocking) */
	bool paper;        /* paper kernel: truncation, C + K conditional shifts */
	unsigned C;        /* significand bits - m */
	unsigned lsw;      /* lanes per lane-shift command */
	unsigned wp, half; /* words per pack, per bank */
	unsigned wpr;      /* words per DRAM row */
	unsigned units;    /* PIM units per pCH */
	unsigned tiles_per_pack;
};

/*
 * The commands of one round with bank-relative word addresses: inputs are relative to the
 * round's input area of the bank (rel < half), outputs to its output area (appended in
 * order, per bank). Also records where each output went, for the read-back.
 */
struct tcmd {
	struct pimsim_cmd c;
	bool out;
	uint32_t rel;
};

struct loc {
	uint8_t bank;
	uint32_t rel;
};

struct tmpl {
	struct tcmd *v;
	size_t n, cap;
	struct pimsim_cmd setup[80];
	unsigned nsetup;
	uint32_t srf[72];
	unsigned nsrf;
	uint32_t out_count[2], out_round;
	struct loc elem_out[256]; /* by input word of the pack */
	struct loc hdr_out[16];   /* by group (lane-parallel) or block (tiled row) */
	int err;
};

/* Register allocation (16 vector registers, GRF_A = 0-7, GRF_B = 8-15). */

/* ---- work distribution (pimsim_stream.c) ----------------------------------------------- */

struct layout {
	uint64_t tiles_r, tiles_c, tiles, packs;
	unsigned P;            /* pseudo-channels in the system */
	unsigned pch_used;
	uint64_t rounds;       /* of pCH 0, the busiest */
	uint64_t out_base_row; /* first output row of every bank */
	uint64_t rows_needed;
	unsigned period;       /* rounds after which the row pattern repeats */
};

/* ---- stream (pimsim_stream.c) ----------------------------------------------------------- */

struct rowstate {
	int64_t open[2];
};

struct cmdbuf {
	struct pimsim_cmd *v;
	size_t n, cap;
	int err;
};

/* ---- timing (pimsim.c) ------------------------------------------------------------------ */

struct tsnap {
	uint64_t t;      /* earliest issue time of the next command = end of the last one */
	uint64_t occ[3]; /* occupancy of lane-shift, bit-shift and other PIM commands */
	uint64_t turn;   /* stalls for read/write bus turnaround */
	uint64_t ops[PIMSIM_OP_COUNT];
};

struct timing {
	const struct pimsim_params *p;
	struct tsnap s;
	uint64_t t_act[2], t_pre[2], t_wr[2];
	bool acted[2], pred[2];
	uint64_t t_rd, t_wr_cmd; /* issue of the last read-type / write column command */
	bool rd, wr;
	uint64_t act_hist[4];
	uint64_t nact;
};

/* ---- common preparation (pimsim.c) ------------------------------------------------------ */

struct job {
	struct kctx k;
	struct tmpl t;
	struct layout L;
};

/* Functions of pimsim_stream.c. */
static inline unsigned word_bank(const struct kctx *k, unsigned w) { return w >= k->half; }
int kctx_init(struct kctx *k, const struct pimsim_params *p, enum pimsim_mapping map,
	enum mx_dir dir, enum mx_format f, enum mx_src src, struct pim_error *err);
void tmpl_free(struct tmpl *t);
int tmpl_build(struct tmpl *t, const struct kctx *k);
uint64_t pch_rounds(const struct layout *L, const struct kctx *k, unsigned pch);
int check_shape(enum mx_dir dir, size_t rows, size_t cols, struct pim_error *err);
int layout_init(struct layout *L, const struct pimsim_params *p, const struct kctx *k,
	const struct tmpl *t, size_t rows, size_t cols, struct pim_error *err);
void cb_push(struct cmdbuf *b, const struct pimsim_cmd *c);
void round_emit(struct cmdbuf *b, const struct tmpl *t, const struct kctx *k,
	const struct layout *L, struct rowstate *rs, uint64_t q);

/* Functions of pimsim.c. */
void timing_init(struct timing *tm, const struct pimsim_params *p);
void timing_cmd(struct timing *tm, const struct pimsim_cmd *c);
int job_init(struct job *j, const struct pimsim_params *p, enum pimsim_mapping map,
	enum mx_dir dir, enum mx_format f, enum mx_src src, size_t rows, size_t cols,
	struct pim_error *err);
void job_stats(const struct pimsim_params *p, const struct job *j, const struct tsnap *s,
	struct pimsim_stats *st);

#pragma GCC visibility pop

#endif
