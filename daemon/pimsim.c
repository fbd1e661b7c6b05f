/* SPDX-License-Identifier: MIT */
/*
 * pimsim.c: HBM-PIM model of JIT-Q's MX quantization kernel (pimsim.h has the model, the
 * command set and the layouts). Parts, in order:
 *   names and the op table; configuration; the timing engine; the common preparation of a
 *   job; the public entry points for the stream, the estimate and the cost.
 * The command stream is generated in pimsim_stream.c (the kernel context; the round template,
 * the command sequences of JIT-Q §4 written once per round with bank-relative addresses; the
 * stream, rounds instantiated with absolute rows, ACT/PRE inserted where a bank's open row
 * changes), and executed functionally, with the read-back of the results, in pimsim_exec.c
 * (pimsim_quantize); pimsim_internal.h joins the three.
 */
#include "pimsim_internal.h"

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

/* ---- timing ----------------------------------------------------------------------------- */

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

void timing_init(struct timing *tm, const struct pimsim_params *p)
{
	memset(tm, 0, sizeof *tm);
	tm->p = p;
}

void timing_cmd(struct timing *tm, const struct pimsim_cmd *c)
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

int job_init(struct job *j, const struct pimsim_params *p, enum pimsim_mapping map,
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

void job_stats(const struct pimsim_params *p, const struct job *j, const struct tsnap *s,
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
