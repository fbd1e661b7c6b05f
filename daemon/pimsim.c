/* SPDX-License-Identifier: MIT */
/*
 * pimsim.c: HBM-PIM model of JIT-Q's MX quantization kernel (pimsim.h has the model, the
 * command set and the layouts). Parts, in order:
 *   names and the op table; configuration; the kernel context; the round template (the
 *   command sequences of JIT-Q §4, written once per round with bank-relative addresses);
 *   the stream (rounds instantiated with absolute rows, ACT/PRE inserted where a bank's
 *   open row changes); the timing engine; the functional executor; the read-back of the
 *   results; the public entry points.
 */
#include "pimsim.h"

#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* ---- names ------------------------------------------------------------------------------ */

const char *pimsim_mapping_name(enum pimsim_mapping m)
{
	switch (m) {
	case PIMSIM_TILED:
		return "tiled";
	case PIMSIM_STRIDED:
		return "strided";
	case PIMSIM_STRIDED_OPT:
		return "strided-opt";
	}
	return "invalid";
}

int pimsim_mapping_from_name(const char *s, enum pimsim_mapping *out)
{
	static const enum pimsim_mapping all[] = { PIMSIM_TILED, PIMSIM_STRIDED,
						   PIMSIM_STRIDED_OPT };

	if (!s)
		return -EINVAL;
	for (size_t i = 0; i < ELEMENTSOF(all); i++)
		if (strcasecmp(s, pimsim_mapping_name(all[i])) == 0) {
			if (out)
				*out = all[i];
			return 0;
		}
	if (strcasecmp(s, "opt") == 0) {
		if (out)
			*out = PIMSIM_STRIDED_OPT;
		return 0;
	}
	return -EINVAL;
}

const char *pimsim_kernel_name(enum pimsim_kernel k)
{
	return k == PIMSIM_KERNEL_EXACT ? "exact" : k == PIMSIM_KERNEL_PAPER ? "paper" : "invalid";
}

int pimsim_kernel_from_name(const char *s, enum pimsim_kernel *out)
{
	if (!s)
		return -EINVAL;
	if (strcasecmp(s, "exact") == 0) {
		if (out)
			*out = PIMSIM_KERNEL_EXACT;
		return 0;
	}
	if (strcasecmp(s, "paper") == 0) {
		if (out)
			*out = PIMSIM_KERNEL_PAPER;
		return 0;
	}
	return -EINVAL;
}

static const struct {
	const char *name;
	enum pimsim_class cls;
	bool extra;
} op_info[PIMSIM_OP_COUNT] = {
	[PIMSIM_OP_ACT] = { "ACT", PIMSIM_CLASS_ROW, false },
	[PIMSIM_OP_PRE] = { "PRE", PIMSIM_CLASS_ROW, false },
	[PIMSIM_OP_MOVR] = { "MOVR", PIMSIM_CLASS_OTHER, false },
	[PIMSIM_OP_MOVW] = { "MOVW", PIMSIM_CLASS_OTHER, false },
	[PIMSIM_OP_AND] = { "AND", PIMSIM_CLASS_OTHER, false },
	[PIMSIM_OP_OR] = { "OR", PIMSIM_CLASS_OTHER, false },
	[PIMSIM_OP_ADD] = { "ADD", PIMSIM_CLASS_OTHER, false },
	[PIMSIM_OP_SUB] = { "SUB", PIMSIM_CLASS_OTHER, false },
	[PIMSIM_OP_MAX] = { "MAX", PIMSIM_CLASS_OTHER, false },
	[PIMSIM_OP_MIN] = { "MIN", PIMSIM_CLASS_OTHER, false },
	[PIMSIM_OP_CMPLT] = { "CMPLT", PIMSIM_CLASS_OTHER, false },
	[PIMSIM_OP_CMPGT] = { "CMPGT", PIMSIM_CLASS_OTHER, false },
	[PIMSIM_OP_BSHR] = { "BSHR", PIMSIM_CLASS_BIT_SHIFT, false },
	[PIMSIM_OP_BSHL] = { "BSHL", PIMSIM_CLASS_BIT_SHIFT, false },
	[PIMSIM_OP_BSHRJ] = { "BSHRJ", PIMSIM_CLASS_BIT_SHIFT, true },
	[PIMSIM_OP_LSHU] = { "LSHU", PIMSIM_CLASS_LANE_SHIFT, false },
	[PIMSIM_OP_LSHD] = { "LSHD", PIMSIM_CLASS_LANE_SHIFT, false },
	[PIMSIM_OP_LDCNT] = { "LDCNT", PIMSIM_CLASS_OTHER, false },
	[PIMSIM_OP_CSHRJ] = { "CSHRJ", PIMSIM_CLASS_BIT_SHIFT, true },
	[PIMSIM_OP_SEL] = { "SEL", PIMSIM_CLASS_OTHER, true },
	[PIMSIM_OP_CSHR] = { "CSHR", PIMSIM_CLASS_BIT_SHIFT, false },
	[PIMSIM_OP_SETS] = { "SETS", PIMSIM_CLASS_OTHER, false },
	[PIMSIM_OP_SETC] = { "SETC", PIMSIM_CLASS_OTHER, false },
};

const char *pimsim_op_name(enum pimsim_op op)
{
	return (unsigned)op < PIMSIM_OP_COUNT ? op_info[op].name : "invalid";
}

enum pimsim_class pimsim_op_class(enum pimsim_op op)
{
	return (unsigned)op < PIMSIM_OP_COUNT ? op_info[op].cls : PIMSIM_CLASS_OTHER;
}

bool pimsim_op_is_extra(enum pimsim_op op)
{
	return (unsigned)op < PIMSIM_OP_COUNT && op_info[op].extra;
}

/* ---- configuration ---------------------------------------------------------------------- */

/* Keep in sync with examples/hbm-pim.conf, which cites the source of every value. */
void pimsim_params_default(struct pimsim_params *p)
{
	*p = (struct pimsim_params){
		.stacks = 1,
		.pch_per_stack = 16,
		.banks_per_pch = 16,
		.row_bytes = 1024,
		.rows_per_bank = 8192,
		.tck_ps = 1000,
		.tCCDS = 2,
		.tCCDL = 4,
		.tRCDRD = 14,
		.tRCDWR = 10,
		.tRAS = 33,
		.tRP = 14,
		.tRC = 47,
		.tRRDL = 6,
		.tFAW = 16,
		.tWR = 16,
		.WL = 8,
		.BL = 4,
		.tREFI = 3900,
		.tRFC = 350,
		.rw_turnaround = 1,
		.tRTW = 15,
		.tWTR = 19,
		.refresh_reopen = 1,
		.kernel = PIMSIM_KERNEL_EXACT,
		.lane_shift_lanes = 1,
		.cond_shift_range = 0,
	};
}

void pimsim_params_paper(struct pimsim_params *p)
{
	p->kernel = PIMSIM_KERNEL_PAPER;
	p->cond_shift_range = 8;
	p->tck_ps = 833;
	p->stacks = 5;
}

enum pkey_type { PKEY_UINT, PKEY_NS, PKEY_BOOL, PKEY_KERNEL };

static const struct pkey {
	const char *name;
	enum pkey_type type;
	size_t off;
	unsigned min, max;
} pkeys[] = {
	{ "stacks", PKEY_UINT, offsetof(struct pimsim_params, stacks), 1, 64 },
	{ "pseudo_channels_per_stack", PKEY_UINT, offsetof(struct pimsim_params, pch_per_stack), 1,
	  64 },
	{ "banks_per_pseudo_channel", PKEY_UINT, offsetof(struct pimsim_params, banks_per_pch), 2,
	  64 },
	{ "row_bytes", PKEY_UINT, offsetof(struct pimsim_params, row_bytes), 64, 65536 },
	{ "rows_per_bank", PKEY_UINT, offsetof(struct pimsim_params, rows_per_bank), 1, 1u << 24 },
	{ "tCK", PKEY_NS, offsetof(struct pimsim_params, tck_ps), 100, 100000 },
	{ "tCCDS", PKEY_UINT, offsetof(struct pimsim_params, tCCDS), 1, 1000 },
	{ "tCCDL", PKEY_UINT, offsetof(struct pimsim_params, tCCDL), 1, 1000 },
	{ "tRCDRD", PKEY_UINT, offsetof(struct pimsim_params, tRCDRD), 0, 1000 },
	{ "tRCDWR", PKEY_UINT, offsetof(struct pimsim_params, tRCDWR), 0, 1000 },
	{ "tRAS", PKEY_UINT, offsetof(struct pimsim_params, tRAS), 0, 1000 },
	{ "tRP", PKEY_UINT, offsetof(struct pimsim_params, tRP), 0, 1000 },
	{ "tRC", PKEY_UINT, offsetof(struct pimsim_params, tRC), 0, 2000 },
	{ "tRRDL", PKEY_UINT, offsetof(struct pimsim_params, tRRDL), 0, 1000 },
	{ "tFAW", PKEY_UINT, offsetof(struct pimsim_params, tFAW), 0, 1000 },
	{ "tWR", PKEY_UINT, offsetof(struct pimsim_params, tWR), 0, 1000 },
	{ "WL", PKEY_UINT, offsetof(struct pimsim_params, WL), 0, 1000 },
	{ "BL", PKEY_UINT, offsetof(struct pimsim_params, BL), 1, 64 },
	{ "tREFI", PKEY_UINT, offsetof(struct pimsim_params, tREFI), 0, 1000000 },
	{ "tRFC", PKEY_UINT, offsetof(struct pimsim_params, tRFC), 0, 100000 },
	{ "rw_turnaround", PKEY_BOOL, offsetof(struct pimsim_params, rw_turnaround), 0, 1 },
	{ "tRTW", PKEY_UINT, offsetof(struct pimsim_params, tRTW), 0, 1000 },
	{ "tWTR", PKEY_UINT, offsetof(struct pimsim_params, tWTR), 0, 1000 },
	{ "refresh_reopen", PKEY_BOOL, offsetof(struct pimsim_params, refresh_reopen), 0, 1 },
	{ "kernel", PKEY_KERNEL, offsetof(struct pimsim_params, kernel), 0, 1 },
	{ "lane_shift_lanes", PKEY_UINT, offsetof(struct pimsim_params, lane_shift_lanes), 1, 16 },
	{ "cond_shift_range", PKEY_UINT, offsetof(struct pimsim_params, cond_shift_range), 0, 32 },
};

/* Decimal integer, or for PKEY_NS nanoseconds with up to 3 decimals, to picoseconds. */
static int parse_value(const struct pkey *k, const char *v, unsigned *out)
{
	uint64_t n = 0, scale = k->type == PKEY_NS ? 1000 : 1;
	unsigned decimals = 0;
	bool digits = false, dot = false;

	if (k->type == PKEY_BOOL) {
		if (strcmp(v, "on") == 0 || strcmp(v, "yes") == 0 || strcmp(v, "1") == 0)
			*out = 1;
		else if (strcmp(v, "off") == 0 || strcmp(v, "no") == 0 || strcmp(v, "0") == 0)
			*out = 0;
		else
			return -EINVAL;
		return 0;
	}
	if (k->type == PKEY_KERNEL) {
		enum pimsim_kernel kk;
		if (pimsim_kernel_from_name(v, &kk) < 0)
			return -EINVAL;
		*out = (unsigned)kk;
		return 0;
	}
	for (const char *s = v; *s; s++) {
		if (*s == '.' && k->type == PKEY_NS && !dot) {
			dot = true;
			continue;
		}
		if (!isdigit((unsigned char)*s))
			return -EINVAL;
		if (dot && ++decimals > 3)
			return -EINVAL;
		digits = true;
		n = n * 10 + (uint64_t)(*s - '0');
		if (n > 1000000000ull)
			return -ERANGE;
	}
	if (!digits)
		return -EINVAL;
	while (decimals-- > 0)
		scale /= 10;
	n *= scale;
	if (n < k->min || n > k->max)
		return -ERANGE;
	*out = (unsigned)n;
	return 0;
}

/* Cycles one refresh takes away from the command stream. */
static unsigned refresh_cost(const struct pimsim_params *p)
{
	return p->tRFC + (p->refresh_reopen ? p->tRP + p->tRRDL + p->tRCDRD : 0);
}

static int params_check(const struct pimsim_params *p, const char *origin, struct pim_error *err)
{
	if (!p->stacks || !p->pch_per_stack || p->stacks * p->pch_per_stack > 4096)
		return err_set(err, -EINVAL, "%s: %u stacks x %u pseudo-channels: need 1 to 4096 "
			       "pseudo-channels", origin, p->stacks, p->pch_per_stack);
	if (p->banks_per_pch < 2 || p->row_bytes < 64 || !p->rows_per_bank || !p->tCCDL ||
	    !p->tCCDS || !p->tck_ps)
		return err_set(err, -EINVAL, "%s: banks_per_pseudo_channel >= 2, row_bytes >= 64, "
			       "rows_per_bank, tCCDS, tCCDL and tCK must be set", origin);
	if (p->banks_per_pch % 2)
		return err_set(err, -EINVAL, "%s: banks_per_pseudo_channel = %u must be even (one PIM "
			       "unit per bank pair)", origin, p->banks_per_pch);
	if (p->row_bytes % 32)
		return err_set(err, -EINVAL, "%s: row_bytes = %u must be a multiple of the 32-byte "
			       "column access", origin, p->row_bytes);
	unsigned per_ref = refresh_cost(p);
	if (p->tREFI && p->tREFI <= per_ref)
		return err_set(err, -EINVAL, "%s: tREFI = %u must exceed the %u cycles of one refresh "
			       "(tRFC%s), or be 0 to leave refresh out", origin, p->tREFI, per_ref,
			       p->refresh_reopen ? " + tRP + tRRDL + tRCDRD" : "");
	if (p->kernel > PIMSIM_KERNEL_PAPER || p->rw_turnaround > 1 || p->refresh_reopen > 1)
		return err_set(err, -EINVAL, "%s: kernel, rw_turnaround or refresh_reopen out of "
			       "range", origin);
	if (p->lane_shift_lanes < 1 || p->lane_shift_lanes > 16 || p->cond_shift_range > 32)
		return err_set(err, -EINVAL, "%s: lane_shift_lanes = %u must be 1 to 16 and "
			       "cond_shift_range = %u at most 32", origin, p->lane_shift_lanes,
			       p->cond_shift_range);
	return 0;
}

/* kv_parse's set: one value of the parameter file. */
static int params_set(void *ctx, size_t key, const char *val, const char *where,
		      struct pim_error *err)
{
	const struct pkey *k = &pkeys[key];
	unsigned v;

	if (parse_value(k, val, &v) < 0) {
		if (k->type == PKEY_BOOL)
			return err_set(err, -EINVAL, "%s: %s \"%s\" must be on or off", where,
				       k->name, val);
		if (k->type == PKEY_KERNEL)
			return err_set(err, -EINVAL, "%s: %s \"%s\" must be exact or paper", where,
				       k->name, val);
		if (k->type == PKEY_NS)
			return err_set(err, -EINVAL, "%s: %s \"%s\" must be a time in ns (up to 3 "
				       "decimals) between %u and %u ps", where, k->name, val, k->min,
				       k->max);
		return err_set(err, -EINVAL, "%s: %s \"%s\" must be an integer between %u and %u",
			       where, k->name, val, k->min, k->max);
	}
	*(unsigned *)((char *)ctx + k->off) = v;
	return 0;
}

int pimsim_params_parse(struct pimsim_params *p, const char *buf, size_t len, const char *origin,
			struct pim_error *err)
{
	struct pimsim_params tmp = *p;

	if (!origin)
		origin = "<config>";
	int r = kv_parse(buf, len, origin, KV_INLINE_COMMENTS, 1024, pkeys, ELEMENTSOF(pkeys),
			 sizeof pkeys[0], params_set, &tmp, err);
	if (r < 0)
		return r;
	r = params_check(&tmp, origin, err);
	if (r < 0)
		return r;
	*p = tmp;
	return 0;
}

/* ---- kernel context ---------------------------------------------------------------------- */

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

static int kctx_init(struct kctx *k, const struct pimsim_params *p, enum pimsim_mapping map,
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

static unsigned word_bank(const struct kctx *k, unsigned w) { return w >= k->half; }

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

static void tmpl_free(struct tmpl *t)
{
	free(t->v);
	t->v = NULL;
}

static int tmpl_build(struct tmpl *t, const struct kctx *k)
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

struct layout {
	uint64_t tiles_r, tiles_c, tiles, packs;
	unsigned P;            /* pseudo-channels in the system */
	unsigned pch_used;
	uint64_t rounds;       /* of pCH 0, the busiest */
	uint64_t out_base_row; /* first output row of every bank */
	uint64_t rows_needed;
	unsigned period;       /* rounds after which the row pattern repeats */
};

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
static uint64_t pch_rounds(const struct layout *L, const struct kctx *k, unsigned pch)
{
	uint64_t n = L->packs > pch ? div_up(L->packs - pch, L->P) : 0;
	return div_up(n, k->units);
}

static int check_shape(enum mx_dir dir, size_t rows, size_t cols, struct pim_error *err)
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

static int layout_init(struct layout *L, const struct pimsim_params *p, const struct kctx *k,
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

struct rowstate {
	int64_t open[2];
};

struct cmdbuf {
	struct pimsim_cmd *v;
	size_t n, cap;
	int err;
};

static void cb_push(struct cmdbuf *b, const struct pimsim_cmd *c)
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

static void round_emit(struct cmdbuf *b, const struct tmpl *t, const struct kctx *k,
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

/* ---- timing ----------------------------------------------------------------------------- */

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

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static void timing_init(struct timing *tm, const struct pimsim_params *p)
{
	memset(tm, 0, sizeof *tm);
	tm->p = p;
}

static void timing_cmd(struct timing *tm, const struct pimsim_cmd *c)
{
	const struct pimsim_params *p = tm->p;
	uint64_t ti = tm->s.t;
	unsigned b = c->bank & 1;

	tm->s.ops[c->op]++;
	switch ((enum pimsim_op)c->op) {
	case PIMSIM_OP_ACT:
		if (tm->pred[b])
			ti = max_u64(ti, tm->t_pre[b] + p->tRP);
		if (tm->acted[b])
			ti = max_u64(ti, tm->t_act[b] + p->tRC);
		if (tm->nact)
			ti = max_u64(ti, tm->act_hist[(tm->nact - 1) % 4] + p->tRRDL);
		if (tm->nact >= 4)
			ti = max_u64(ti, tm->act_hist[tm->nact % 4] + p->tFAW);
		tm->act_hist[tm->nact++ % 4] = ti;
		tm->t_act[b] = ti, tm->acted[b] = true;
		tm->s.t = ti + 1; /* one command-bus slot */
		return;
	case PIMSIM_OP_PRE:
		ti = max_u64(ti, tm->t_act[b] + p->tRAS);
		ti = max_u64(ti, tm->t_wr[b]);
		tm->t_pre[b] = ti, tm->pred[b] = true;
		tm->s.t = ti + 1;
		return;
	case PIMSIM_OP_SETS:
	case PIMSIM_OP_SETC:
		tm->s.occ[2] += p->tCCDS;
		tm->s.t = ti + p->tCCDS;
		return;
	case PIMSIM_OP_MOVR:
		ti = max_u64(ti, tm->t_act[b] + p->tRCDRD);
		break;
	case PIMSIM_OP_MOVW:
		ti = max_u64(ti, tm->t_act[b] + p->tRCDWR);
		break;
	default:
		break;
	}
	if (p->rw_turnaround) {
		uint64_t t0 = ti;
		if (c->op == PIMSIM_OP_MOVW && tm->rd)
			ti = max_u64(ti, tm->t_rd + p->tRTW);
		else if (c->op != PIMSIM_OP_MOVW && tm->wr)
			ti = max_u64(ti, tm->t_wr_cmd + p->tWTR);
		tm->s.turn += ti - t0;
	}
	if (c->op == PIMSIM_OP_MOVW) {
		tm->t_wr[b] = ti + p->WL + p->BL / 2 + p->tWR; /* write recovery before PRE */
		tm->t_wr_cmd = ti, tm->wr = true;
	} else {
		tm->t_rd = ti, tm->rd = true;
	}
	enum pimsim_class cls = op_info[c->op].cls;
	tm->s.occ[cls == PIMSIM_CLASS_LANE_SHIFT ? 0 : cls == PIMSIM_CLASS_BIT_SHIFT ? 1 : 2] +=
		p->tCCDL;
	tm->s.t = ti + p->tCCDL;
}

static void snap_stats(const struct pimsim_params *p, const struct tsnap *s,
		       struct pimsim_stats *st)
{
	uint64_t busy = s->occ[0] + s->occ[1] + s->occ[2];

	st->refreshes = p->tREFI ? s->t / p->tREFI : 0;
	st->refresh_cycles = st->refreshes * refresh_cost(p);
	st->cycles = s->t + st->refresh_cycles;
	st->lane_shift_cycles = s->occ[0];
	st->bit_shift_cycles = s->occ[1];
	st->other_cycles = st->cycles - s->occ[0] - s->occ[1];
	st->row_cycles = s->t - busy - s->turn;
	st->turnaround_cycles = s->turn;
	st->time_ns = (double)st->cycles * p->tck_ps / 1000.0;
	memcpy(st->ops, s->ops, sizeof st->ops);
	st->lane_shift_cmds = st->bit_shift_cmds = st->other_cmds = st->extra_cmds = 0;
	for (unsigned op = 0; op < PIMSIM_OP_COUNT; op++) {
		switch (op_info[op].cls) {
		case PIMSIM_CLASS_LANE_SHIFT:
			st->lane_shift_cmds += s->ops[op];
			break;
		case PIMSIM_CLASS_BIT_SHIFT:
			st->bit_shift_cmds += s->ops[op];
			break;
		case PIMSIM_CLASS_OTHER:
			st->other_cmds += s->ops[op];
			break;
		case PIMSIM_CLASS_ROW:
			break;
		}
		if (op_info[op].extra)
			st->extra_cmds += s->ops[op];
	}
	st->activations = s->ops[PIMSIM_OP_ACT];
}

/* a + n * (b - a), field by field (b >= a: every field only grows with rounds). */
static void snap_extrapolate(const struct tsnap *a, const struct tsnap *b, uint64_t n,
			     struct tsnap *out)
{
	*out = *a;
	out->t += n * (b->t - a->t);
	out->turn += n * (b->turn - a->turn);
	for (unsigned i = 0; i < 3; i++)
		out->occ[i] += n * (b->occ[i] - a->occ[i]);
	for (unsigned i = 0; i < PIMSIM_OP_COUNT; i++)
		out->ops[i] += n * (b->ops[i] - a->ops[i]);
}

/* ---- common preparation ------------------------------------------------------------------ */

struct job {
	struct kctx k;
	struct tmpl t;
	struct layout L;
};

static int job_init(struct job *j, const struct pimsim_params *p, enum pimsim_mapping map,
		    enum mx_dir dir, enum mx_format f, enum mx_src src, size_t rows, size_t cols,
		    struct pim_error *err)
{
	int r;

	memset(j, 0, sizeof *j);
	if (!p)
		return err_set(err, -EINVAL, "no PIM parameters");
	r = params_check(p, "PIM parameters", err);
	if (r < 0)
		return r;
	r = kctx_init(&j->k, p, map, dir, f, src, err);
	if (r < 0)
		return r;
	r = check_shape(dir, rows, cols, err);
	if (r < 0)
		return r;
	r = tmpl_build(&j->t, &j->k);
	if (r < 0) {
		tmpl_free(&j->t);
		return err_set(err, r, "cannot build the PIM kernel: %s", strerror(-r));
	}
	r = layout_init(&j->L, p, &j->k, &j->t, rows, cols, err);
	if (r < 0)
		tmpl_free(&j->t);
	return r;
}

static void job_stats(const struct pimsim_params *p, const struct job *j, const struct tsnap *s,
		      struct pimsim_stats *st)
{
	memset(st, 0, sizeof *st);
	snap_stats(p, s, st);
	st->tiles = j->L.tiles;
	st->packs = j->L.packs;
	st->rounds = j->L.rounds;
	st->period = j->L.period;
	st->pch_used = j->L.pch_used;
	st->pim_units = j->L.P * j->k.units;
	st->srf_scalars = j->t.nsrf;
	st->rows_per_bank_needed = j->L.rows_needed;
	st->fits = j->L.rows_needed <= p->rows_per_bank;
	/* PIM commands (no ACT/PRE) over every pseudo-channel: setup + rounds x template. */
	for (unsigned pch = 0; pch < j->L.pch_used; pch++)
		st->total_cmds += j->t.nsetup + pch_rounds(&j->L, &j->k, pch) * j->t.n;
}

/* ---- public: stream ----------------------------------------------------------------------- */

void pimsim_stream_free(struct pimsim_stream *s)
{
	if (!s)
		return;
	free(s->cmds);
	free(s->round_end);
	memset(s, 0, sizeof *s);
}

int pimsim_stream_build(const struct pimsim_params *p, enum pimsim_mapping map, enum mx_dir dir,
			enum mx_format f, enum mx_src src_type, unsigned rounds,
			struct pimsim_stream *s, struct pim_error *err)
{
	struct job j;
	struct cmdbuf b = { 0 };
	struct rowstate rs = { { -1, -1 } };
	int r;

	if (!p || !s)
		return err_set(err, -EINVAL, "no PIM parameters or stream");
	memset(s, 0, sizeof *s);
	/* A round is up to ~20,000 commands; keep the materialized stream bounded. */
	if (rounds == 0 || rounds > 4096)
		return err_set(err, -EINVAL, "rounds = %u must be between 1 and 4096", rounds);
	/* A tensor with exactly that many rounds on pseudo-channel 0 of a one-pCH system. */
	struct pimsim_params one = *p;
	one.stacks = 1, one.pch_per_stack = 1;
	r = kctx_init(&j.k, p, map, dir, f, src_type, err);
	if (r < 0)
		return r;
	size_t tiles = (size_t)rounds * j.k.units * j.k.tiles_per_pack;
	r = job_init(&j, &one, map, dir, f, src_type, 16 * tiles, 16, err);
	if (r < 0)
		return r;
	s->round_end = calloc(rounds, sizeof *s->round_end);
	if (!s->round_end) {
		tmpl_free(&j.t);
		return err_set(err, -ENOMEM, "out of memory");
	}
	for (unsigned i = 0; i < j.t.nsetup; i++)
		cb_push(&b, &j.t.setup[i]);
	for (unsigned q = 0; q < rounds; q++) {
		round_emit(&b, &j.t, &j.k, &j.L, &rs, q);
		s->round_end[q] = b.n;
	}
	tmpl_free(&j.t);
	if (b.err) {
		free(b.v);
		pimsim_stream_free(s);
		return err_set(err, b.err, "out of memory");
	}
	s->cmds = b.v, s->n = b.n, s->cap = b.cap, s->rounds = rounds;
	return 0;
}

/* ---- public: estimate --------------------------------------------------------------------- */

int pimsim_estimate(const struct pimsim_params *p, enum pimsim_mapping map, enum mx_dir dir,
		    enum mx_format f, enum mx_src src_type, size_t rows, size_t cols,
		    struct pimsim_stats *stats, struct pim_error *err)
{
	struct job j;
	struct timing tm;
	struct cmdbuf b = { 0 };
	struct rowstate rs = { { -1, -1 } };
	struct tsnap *snaps, final;
	uint64_t R, per, nsim;
	int r;

	if (!stats)
		return err_set(err, -EINVAL, "no statistics buffer");
	r = job_init(&j, p, map, dir, f, src_type, rows, cols, err);
	if (r < 0)
		return r;
	/*
	 * Every round runs the same commands; only the rows differ, and their pattern repeats
	 * every `per` rounds. Time R = a * per + b rounds exactly when R <= 3 per; otherwise
	 * time per + b rounds and 2 per + b rounds and add (a - 1) times the difference (the
	 * first period absorbs the start from closed banks). The unit test checks this against
	 * full runs.
	 */
	R = j.L.rounds;
	per = j.L.period;
	nsim = R <= 3 * per ? R : 2 * per + R % per;
	snaps = calloc(nsim + 1, sizeof *snaps);
	if (!snaps) {
		tmpl_free(&j.t);
		return err_set(err, -ENOMEM, "out of memory");
	}
	timing_init(&tm, p);
	for (unsigned i = 0; i < j.t.nsetup; i++)
		timing_cmd(&tm, &j.t.setup[i]);
	snaps[0] = tm.s;
	for (uint64_t q = 0; q < nsim && !b.err; q++) {
		b.n = 0;
		round_emit(&b, &j.t, &j.k, &j.L, &rs, q);
		for (size_t i = 0; i < b.n; i++)
			timing_cmd(&tm, &b.v[i]);
		snaps[q + 1] = tm.s;
	}
	if (b.err) {
		r = err_set(err, b.err, "out of memory");
	} else {
		if (nsim == R)
			final = snaps[R];
		else
			snap_extrapolate(&snaps[per + R % per], &snaps[2 * per + R % per],
					 R / per - 1, &final);
		job_stats(p, &j, &final, stats);
		r = 0;
	}
	free(b.v);
	free(snaps);
	tmpl_free(&j.t);
	return r;
}

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
				       " is open (command generator bug)", op_info[c->op].name,
				       c->row, b, M->pch[pch].open[b]);
		break;
	default:
		break;
	}
	if (c->dst >= PIMSIM_NREGS || c->a >= PIMSIM_NREGS || c->b >= PIMSIM_NREGS ||
	    c->c >= PIMSIM_NREGS)
		return err_set(err, -EFAULT, "register out of range in %s", op_info[c->op].name);

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

double pimsim_cost_s(void *ctx, uint64_t rows, uint64_t cols, enum mx_dir dir, enum mx_format fmt,
		     enum mx_src src)
{
	struct pimsim_cost *c = ctx;
	struct pimsim_stats st;

	/* A weight slice whose blocked dimension is not a multiple of 16 is quantized with its
	 * last block zero-padded (MX blocks are 16 elements): cost the padded shape. */
	rows = (rows + 15) / 16 * 16;
	cols = (cols + 15) / 16 * 16;
	if (pimsim_estimate(c->params, c->mapping, dir, fmt, src, rows, cols, &st, &c->err) < 0) {
		if (!c->error)
			c->error = c->err.code ? c->err.code : -EINVAL;
		return NAN;
	}
	return st.time_ns * 1e-9;
}
