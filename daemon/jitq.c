/* SPDX-License-Identifier: MIT */
/*
 * jitq.c: the JIT-Q scheduler (see jitq.h; doc/design.md §5.3; JIT-Q, MLSys 2024).
 *
 * Lookahead.  A phase processes its blocks in order (forward 0..N−1, backward N−1..0).  With
 * lookahead L the copies of the k-th processed block are launched when block k−L starts (the
 * first L in the prologue, which begins head_start before the phase).  The PIM is one server:
 * launches run in FIFO order, each taking its PIM time; a block starts when the previous one has
 * finished and its copies are ready, and any wait is a stall.  The plan takes the smallest L in
 * 1..max_lookahead whose stall is the least.  This is where the model departs from a plain
 * "window ≥ PIM time" rule: a deeper lookahead helps when accelerator time per block varies
 * (measured times) or when the head start covers the deficit, but when PIM time exceeds the
 * accelerator time of every block the PIM falls behind by the difference each block whatever
 * L is, and the plan reports that as stall rather than as a fit.
 */
#include "jitq.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- presets ------------------------------------------------------------------------------ */

struct preset {
	const char *name;
	uint32_t layers, hidden, heads, seq, batch, tslice, pstages, vocab;
	const char *source;
};

/*
 * Shapes from the model papers (the model list from JIT-Q §5, Fig. 10-12).  The JIT-Q excerpt
 * does not give its per-device batch or tensor-slicing degree (its §5.1.3 is not in the seed);
 * where the model paper gives a slicing degree it is used, micro-batches are assumptions: larger
 * for the small models (JIT-Q §5: "increasing SL or B, as in bert-340M, gpt-2-1.5B, ..."), and
 * for the 175B and 1T models the least tokens per micro-batch, JITQ_PAPER_TOKENS (jitq.h).
 */
static const struct preset presets[] = {
	{ "bert-340M", 24, 1024, 16, 512, 16, 1, 1, 30522,
	  "BERT-Large, Devlin et al. NAACL 2019 (L 24, H 1024, A 16, seq 512, vocab 30522); "
	  "t 1 assumed, micro-batch 16 (8192 tokens, as gpt-2-1.5B: JIT-Q §5.2 names both among "
	  "the models whose sequence or batch raise the slack above the 4096-token floor)" },
	{ "gpt-2-1.5B", 48, 1600, 25, 1024, 8, 1, 2, 50257,
	  "GPT-2 XL, Radford et al. 2019 (48 layers, d 1600, context 1024, vocab 50257; 25 heads "
	  "in the released config); micro-batch 8, t 1 and 2 pipeline stages (a device's state "
	  "fits 80 GiB) assumed" },
	{ "mega-lm-8.3B", 72, 3072, 32, 1024, 8, 8, 1, 51200,
	  "Megatron-LM 8.3B, Shoeybi et al. 2019 Table 2 (72 layers, h 3072, 32 heads, 8-way model "
	  "parallel, seq 1024, vocab padded to 51200); micro-batch 8 assumed" },
	{ "t-nlg-17B", 78, 4256, 28, 1024, 8, 4, 2, 50257,
	  "Turing-NLG, Microsoft Research blog Feb 2020 (78 layers, h 4256, 28 heads, Megatron "
	  "tensor slicing over 4 GPUs); seq 1024, micro-batch 8, GPT-2 vocab and 2 pipeline "
	  "stages (a device's state fits 80 GiB) assumed" },
	{ "gpt-3-175B", 96, 12288, 96, 2048, 2, 8, 8, 50257,
	  "GPT-3, Brown et al. 2020 Table 2.1 (96 layers, d 12288, 96 heads, context 2048); t 8 "
	  "and p 8 (12 blocks per device) as the 145B row of Narayanan et al. SC'21 Table 1; "
	  "micro-batch 2 (4096 tokens: slack is proportional to tokens, and 4096 give JIT-Q's "
	  "BF16 -> MX9 slack floor, 3.7x, which no format assumption enters)" },
	{ "future-1T", 128, 25600, 160, 2048, 2, 8, 64, 51200,
	  "1T GPT of Narayanan et al. SC'21 Table 1 (128 layers, h 25600, 160 heads, t 8, p 64, "
	  "seq 2048, vocab 51200); micro-batch 2 (4096 tokens: slack is proportional to tokens, "
	  "and 4096 give JIT-Q's BF16 -> MX9 slack floor, 3.7x, which no format assumption "
	  "enters)" },
};

const char *jitq_model_preset_name(size_t i)
{
	return i < ELEMENTSOF(presets) ? presets[i].name : NULL;
}

int jitq_model_preset(const char *name, struct jitq_model *out)
{
	if (!name || !out)
		return -EINVAL;
	for (size_t i = 0; i < ELEMENTSOF(presets); i++) {
		const struct preset *p = &presets[i];
		if (strcasecmp(name, p->name) != 0)
			continue;
		memset(out, 0, sizeof *out);
		snprintf(out->name, sizeof out->name, "%s", p->name);
		out->layers = p->layers;
		out->hidden = p->hidden;
		out->heads = p->heads;
		out->seq = p->seq;
		out->batch = p->batch;
		out->tslice = p->tslice;
		out->pstages = p->pstages;
		out->vocab = p->vocab;
		out->source = p->source;
		return 0;
	}
	return -ENOENT;
}

static int check_range(struct pim_error *err, const char *field, uint64_t v, uint64_t lo,
		       uint64_t hi)
{
	if (v < lo || v > hi)
		return err_set(err, -EINVAL, "%s = %llu is out of range [%llu, %llu]", field,
			       (unsigned long long)v, (unsigned long long)lo,
			       (unsigned long long)hi);
	return 0;
}

int jitq_model_validate(const struct jitq_model *m, struct pim_error *err)
{
	int r;

	if (!m)
		return err_set(err, -EINVAL, "model is NULL");
	if ((r = check_range(err, "model.layers", m->layers, 1, JITQ_MAX_LAYERS)) < 0 ||
	    (r = check_range(err, "model.hidden", m->hidden, 16, JITQ_MAX_HIDDEN)) < 0 ||
	    (r = check_range(err, "model.heads", m->heads, 1, m->hidden)) < 0 ||
	    (r = check_range(err, "model.seq", m->seq, 1, JITQ_MAX_SEQ)) < 0 ||
	    (r = check_range(err, "model.batch", m->batch, 1, JITQ_MAX_BATCH)) < 0 ||
	    (r = check_range(err, "model.tslice", m->tslice, 1, JITQ_MAX_TSLICE)) < 0 ||
	    (r = check_range(err, "model.pstages", m->pstages ? m->pstages : 1, 1, m->layers)) < 0 ||
	    (r = check_range(err, "model.vocab", m->vocab, 0, JITQ_MAX_VOCAB)) < 0)
		return r;
	if (m->hidden % m->heads)
		return err_set(err, -EINVAL,
			       "model.hidden = %u is not a multiple of model.heads = %u (the head "
			       "dimension must be whole)",
			       m->hidden, m->heads);
	if (m->heads % m->tslice)
		return err_set(err, -EINVAL,
			       "model.heads = %u is not a multiple of model.tslice = %u (tensor "
			       "slicing splits attention by heads, Megatron-LM §3)",
			       m->heads, m->tslice);
	if (memchr(m->name, '\0', sizeof m->name) == NULL)
		return err_set(err, -EINVAL, "model.name is not NUL-terminated within %d bytes",
			       JITQ_NAME_MAX);
	return 0;
}

uint32_t jitq_local_layers(const struct jitq_model *m)
{
	uint32_t p = m->pstages ? m->pstages : 1;
	return (m->layers + p - 1) / p;
}

/* ---- names, formats ----------------------------------------------------------------------- */

const char *jitq_act_name(enum jitq_act a)
{
	static const char *const n[] = { "full", "selective", "recompute", "none" };
	return (unsigned)a < ELEMENTSOF(n) ? n[a] : "invalid";
}

int jitq_act_from_name(const char *s, enum jitq_act *out)
{
	for (unsigned a = 0; s && a <= JITQ_ACT_NONE; a++)
		if (strcasecmp(s, jitq_act_name(a)) == 0) {
			*out = a;
			return 0;
		}
	return -EINVAL;
}

const char *jitq_layout_name(enum jitq_layout l)
{
	return l == JITQ_LAYOUT_IN_OUT ? "in-out" : l == JITQ_LAYOUT_OUT_IN ? "out-in" : "invalid";
}

int jitq_layout_from_name(const char *s, enum jitq_layout *out)
{
	if (s && strcasecmp(s, "in-out") == 0)
		*out = JITQ_LAYOUT_IN_OUT;
	else if (s && strcasecmp(s, "out-in") == 0)
		*out = JITQ_LAYOUT_OUT_IN;
	else
		return -EINVAL;
	return 0;
}

const char *jitq_phase_name(enum jitq_phase ph)
{
	return ph == JITQ_PHASE_FWD ? "forward" : ph == JITQ_PHASE_BWD ? "backward" : "invalid";
}

const char *jitq_tensor_name(enum jitq_tensor t)
{
	static const char *const n[] = { "qkv", "attn-out", "mlp-up", "mlp-down" };
	return (unsigned)t < ELEMENTSOF(n) ? n[t] : "invalid";
}

const char *jitq_dir_name(enum mx_dir d)
{
	return d == MX_DIR_ROW ? "row" : d == MX_DIR_COL ? "col" : "invalid";
}

const char *jitq_src_name(enum mx_src s)
{
	return s == MX_SRC_BF16 ? "bf16" : s == MX_SRC_FP32 ? "fp32" : "invalid";
}

const char *jitq_fmt_name(enum mx_format f)
{
	return f == MX_FMT_MX9 ? "mx9" : f == MX_FMT_MX6 ? "mx6" : f == MX_FMT_MX4 ? "mx4" : "invalid";
}

int jitq_src_from_name(const char *s, enum mx_src *out)
{
	if (!s || !out)
		return -EINVAL;
	if (strcasecmp(s, "bf16") == 0)
		*out = MX_SRC_BF16;
	else if (strcasecmp(s, "fp32") == 0)
		*out = MX_SRC_FP32;
	else
		return -EINVAL;
	return 0;
}

static bool fmt_valid(enum mx_format f) { return f == MX_FMT_MX9 || f == MX_FMT_MX6 || f == MX_FMT_MX4; }
static bool src_valid(enum mx_src s) { return s == MX_SRC_BF16 || s == MX_SRC_FP32; }
static bool dir_valid(enum mx_dir d) { return d == MX_DIR_ROW || d == MX_DIR_COL; }

/* Bytes per 16-element block (doc/design.md §5.1: 8-bit E + 8 microexponent bits + 16·(1+m) bits). */
static unsigned fmt_block_bytes(enum mx_format f)
{
	return f == MX_FMT_MX9 ? 18 : f == MX_FMT_MX6 ? 12 : f == MX_FMT_MX4 ? 8 : 0;
}

static unsigned fmt_mantissa(enum mx_format f)
{
	return f == MX_FMT_MX9 ? 7 : f == MX_FMT_MX6 ? 4 : f == MX_FMT_MX4 ? 2 : 0;
}

static uint64_t ceil16(uint64_t x) { return (x + 15) / 16; }

uint64_t jitq_mx_bytes(enum mx_format f, uint64_t rows, uint64_t cols, enum mx_dir dir)
{
	uint64_t blocks = dir == MX_DIR_ROW ? rows * ceil16(cols) : ceil16(rows) * cols;
	return blocks * fmt_block_bytes(f);
}

/* ---- linear PIM cost (tests, bench; not pimsim) ------------------------------------------- */

void jitq_linear_pim_init(struct jitq_linear_pim *lp)
{
	lp->t_cmd_s = 4e-9;
	lp->t_act_s = 28e-9;
	lp->lanes = 5.0 * 128 * 16;
	lp->fixed_cmds = 5;
	lp->cmds_per_shift = 1;
	lp->words_per_act[MX_DIR_ROW] = 32;
	lp->words_per_act[MX_DIR_COL] = 16;
}

double jitq_linear_pim_time(void *ctx, uint64_t rows, uint64_t cols, enum mx_dir dir,
			    enum mx_format fmt, enum mx_src src)
{
	const struct jitq_linear_pim *lp = ctx;

	if (!lp || !dir_valid(dir) || !fmt_valid(fmt) || !src_valid(src))
		return NAN;
	double elems = dir == MX_DIR_ROW ? (double)rows * (double)(ceil16(cols) * 16)
					 : (double)(ceil16(rows) * 16) * (double)cols;
	double p = src == MX_SRC_BF16 ? 8 : 24;
	double cmds = lp->fixed_cmds + lp->cmds_per_shift * (p - fmt_mantissa(fmt));
	return elems * (cmds * lp->t_cmd_s + lp->t_act_s / lp->words_per_act[dir]) / lp->lanes;
}

/* ---- configuration ------------------------------------------------------------------------ */

void jitq_accel_speedup_bits(double speedup[3])
{
	/* Time per GEMM proportional to bits per element, 9 : 6 : 4, MX9 at the BF16 rate. */
	speedup[MX_FMT_MX9] = 9.0 / 9;
	speedup[MX_FMT_MX6] = 9.0 / 6;
	speedup[MX_FMT_MX4] = 9.0 / 4;
}

void jitq_config_init(struct jitq_config *c)
{
	memset(c, 0, sizeof *c);
	jitq_model_preset("gpt-3-175B", &c->model);
	c->accel.peak_flops = 312e12;
	c->accel.efficiency = 0.52;
	jitq_accel_speedup_bits(c->accel.speedup);
	c->pim.channels = 5 * 16;
	c->fp.grad_bytes = 2;
	c->fp.optim_bytes = 8;
	c->fp.optim_shards = 1;
	c->fp.act = JITQ_ACT_FULL;
	c->src = MX_SRC_BF16;
	c->fmt = MX_FMT_MX6;
	c->layout = JITQ_LAYOUT_IN_OUT;
	c->max_lookahead = 4;
	c->head_start_blocks = 1.0;
	c->bus_share = 0.5;
	c->mem_share = 0.1;
}

void jitq_config_paper(struct jitq_config *c)
{
	c->fp.grad_bytes = 2;
	c->fp.optim_bytes = 3;
	c->fp.optim_shards = 1;
	c->fp.act = JITQ_ACT_NONE;
}

int jitq_config_set(struct jitq_config *c, const char *key, const char *value,
		    struct pim_error *err)
{
	static const struct {
		const char *key;
		size_t off;
		unsigned lo, hi;
	} ints[] = {
		{ "grad_bytes", offsetof(struct jitq_config, fp.grad_bytes), 0, 16 },
		{ "optim_bytes", offsetof(struct jitq_config, fp.optim_bytes), 0, 64 },
		{ "optim_shards", offsetof(struct jitq_config, fp.optim_shards), 1, 1u << 20 },
		{ "lookahead", offsetof(struct jitq_config, max_lookahead), 1, JITQ_MAX_LOOKAHEAD },
	};
	static const struct {
		const char *key;
		size_t off;
		double hi;
	} reals[] = {
		{ "bus_share", offsetof(struct jitq_config, bus_share), 1 },
		{ "mem_share", offsetof(struct jitq_config, mem_share), 1 },
		{ "head_start", offsetof(struct jitq_config, head_start_blocks), 1e6 },
		{ "speedup_mx9", offsetof(struct jitq_config, accel.speedup[MX_FMT_MX9]),
		  JITQ_SPEEDUP_MAX },
		{ "speedup_mx6", offsetof(struct jitq_config, accel.speedup[MX_FMT_MX6]),
		  JITQ_SPEEDUP_MAX },
		{ "speedup_mx4", offsetof(struct jitq_config, accel.speedup[MX_FMT_MX4]),
		  JITQ_SPEEDUP_MAX },
	};
	char *end;

	for (size_t i = 0; i < ELEMENTSOF(ints); i++) {
		if (strcmp(key, ints[i].key) != 0)
			continue;
		errno = 0;
		unsigned long v = strtoul(value, &end, 10);
		if (errno || end == value || *end || value[0] == '-' || v < ints[i].lo ||
		    v > ints[i].hi)
			return err_set(err, -EINVAL, "%s \"%.*s\" must be an integer between %u and %u",
				       key, TEXT_ECHO(value, 32), ints[i].lo, ints[i].hi);
		*(uint32_t *)((char *)c + ints[i].off) = (uint32_t)v;
		return 0;
	}
	for (size_t i = 0; i < ELEMENTSOF(reals); i++) {
		if (strcmp(key, reals[i].key) != 0)
			continue;
		errno = 0;
		double v = strtod(value, &end);
		bool open0 = strncmp(key, "speedup_", 8) == 0; /* a throughput: 0 is no GEMM */
		if (errno || end == value || *end || !isfinite(v) || v < 0 || (open0 && v == 0) ||
		    v > reals[i].hi)
			return err_set(err, -EINVAL, "%s \"%.*s\" must be a number %s %g", key,
				       TEXT_ECHO(value, 32),
				       open0 ? "more than 0 and at most" : "between 0 and", reals[i].hi);
		*(double *)((char *)c + reals[i].off) = v;
		return 0;
	}
	if (strcmp(key, "activations") == 0) {
		if (jitq_act_from_name(value, &c->fp.act) < 0)
			return err_set(err, -EINVAL, "activations \"%.*s\" is not full, selective, "
				       "recompute or none", TEXT_ECHO(value, 32));
		return 0;
	}
	if (strcmp(key, "layout") == 0) {
		if (jitq_layout_from_name(value, &c->layout) < 0)
			return err_set(err, -EINVAL, "layout \"%.*s\" is not in-out or out-in",
					       TEXT_ECHO(value, 32));
		return 0;
	}
	return -ENOENT;
}

static int check_real(struct pim_error *err, const char *field, double v, double lo, double hi,
		      bool lo_open)
{
	if (!isfinite(v) || v < lo || (lo_open && v == lo) || v > hi)
		return err_set(err, -EINVAL, "%s = %g is out of range %s%g, %g]", field, v,
			       lo_open ? "(" : "[", lo, hi);
	return 0;
}

static int config_validate(const struct jitq_config *c, struct pim_error *err)
{
	int r;

	if ((r = jitq_model_validate(&c->model, err)) < 0)
		return r;
	if (!src_valid(c->src))
		return err_set(err, -EINVAL, "src = %d is not bf16 or fp32", (int)c->src);
	if (!fmt_valid(c->fmt))
		return err_set(err, -EINVAL, "fmt = %d is not mx9, mx6 or mx4", (int)c->fmt);
	if (c->layout != JITQ_LAYOUT_IN_OUT && c->layout != JITQ_LAYOUT_OUT_IN)
		return err_set(err, -EINVAL, "layout = %d is not in-out or out-in", (int)c->layout);
	if (!c->pim.quant_time_s)
		return err_set(err, -EINVAL,
			       "pim.quant_time_s is NULL: plug in the PIM model's estimate (or "
			       "jitq_linear_pim_time for a linear one)");
	if ((r = check_range(err, "pim.channels", c->pim.channels, 1, JITQ_MAX_CHANNELS)) < 0 ||
	    (r = check_range(err, "max_lookahead", c->max_lookahead, 1, JITQ_MAX_LOOKAHEAD)) < 0 ||
	    (r = check_range(err, "fp.grad_bytes", c->fp.grad_bytes, 0, 16)) < 0 ||
	    (r = check_range(err, "fp.optim_bytes", c->fp.optim_bytes, 0, 64)) < 0 ||
	    (r = check_range(err, "fp.optim_shards", c->fp.optim_shards, 1, 1u << 20)) < 0)
		return r;
	if ((unsigned)c->fp.act > JITQ_ACT_NONE)
		return err_set(err, -EINVAL, "fp.act = %d is not a known activation policy",
			       (int)c->fp.act);
	if ((r = check_real(err, "head_start_blocks", c->head_start_blocks, 0, 1e6, false)) < 0 ||
	    (r = check_real(err, "bus_share", c->bus_share, 0, 1, false)) < 0 ||
	    (r = check_real(err, "mem_share", c->mem_share, 0, 1, false)) < 0)
		return r;

	const struct jitq_accel *a = &c->accel;
	if (!a->fwd_s != !a->bwd_s)
		return err_set(err, -EINVAL,
			       "accel.fwd_s and accel.bwd_s: give both measured arrays or neither");
	if (a->fwd_s) {
		if (a->n_times != jitq_local_layers(&c->model))
			return err_set(err, -EINVAL,
				       "accel.n_times = %zu does not match the %u blocks of a device "
				       "(model.layers %u over %u pipeline stages)",
				       a->n_times, jitq_local_layers(&c->model), c->model.layers,
				       c->model.pstages ? c->model.pstages : 1);
		for (size_t i = 0; i < a->n_times; i++) {
			char f[48];
			snprintf(f, sizeof f, "accel.fwd_s[%zu]", i);
			if ((r = check_real(err, f, a->fwd_s[i], 0, 1e6, true)) < 0)
				return r;
			snprintf(f, sizeof f, "accel.bwd_s[%zu]", i);
			if ((r = check_real(err, f, a->bwd_s[i], 0, 1e6, true)) < 0)
				return r;
		}
	} else if ((r = check_real(err, "accel.peak_flops", a->peak_flops, 0, 1e21, true)) < 0 ||
		   (r = check_real(err, "accel.efficiency", a->efficiency, 0, 1, true)) < 0) {
		return r;
	}
	for (int f = 0; f < 3; f++) {
		char name[40];
		snprintf(name, sizeof name, "accel.speedup[%s]", jitq_fmt_name((enum mx_format)f));
		if ((r = check_real(err, name, a->speedup[f], 0, JITQ_SPEEDUP_MAX, true)) < 0)
			return r;
	}
	return 0;
}

/* ---- planning ----------------------------------------------------------------------------- */

/* Local slice shapes (Megatron-LM §3 splits), as [in × out]. */
static void tensor_shapes(const struct jitq_model *m, enum jitq_layout layout,
			  struct jitq_tensor_info t[JITQ_T_COUNT])
{
	uint64_t h = m->hidden, s = m->tslice;
	struct {
		uint64_t in, out;
		bool split_in;
	} io[JITQ_T_COUNT] = {
		[JITQ_T_QKV] = { h, 3 * h / s, false },      /* column-parallel */
		[JITQ_T_ATTN_OUT] = { h / s, h, true },      /* row-parallel */
		[JITQ_T_MLP_UP] = { h, 4 * h / s, false },   /* column-parallel */
		[JITQ_T_MLP_DOWN] = { 4 * h / s, h, true },  /* row-parallel */
	};

	for (int i = 0; i < JITQ_T_COUNT; i++) {
		bool in_out = layout == JITQ_LAYOUT_IN_OUT;
		t[i].rows = (uint32_t)(in_out ? io[i].in : io[i].out);
		t[i].cols = (uint32_t)(in_out ? io[i].out : io[i].in);
		t[i].split_rows = in_out ? io[i].split_in : !io[i].split_in;
		t[i].params = (uint64_t)t[i].rows * t[i].cols;
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Work arrays for one phase, in processing order. */
struct sim {
	size_t n;
	const double *a; /* accelerator time */
	const double *p; /* PIM time */
	double head;     /* head start before the first block */
	double *t;       /* block start */
	double *ps, *pf; /* PIM start, finish */
};

/* Runs the FIFO model with lookahead l; returns the total stall. */
static double simulate(struct sim *s, uint32_t l)
{
	double pim_free = -s->head, stall = 0;

	for (size_t k = 0; k < s->n; k++) {
		double launch = k < l ? -s->head : s->t[k - l];
		double start = launch > pim_free ? launch : pim_free;
		double fin = start + s->p[k];
		double earliest = k == 0 ? 0 : s->t[k - 1] + s->a[k - 1];

		pim_free = fin;
		s->ps[k] = start;
		s->pf[k] = fin;
		s->t[k] = fin > earliest ? fin : earliest;
		stall += s->t[k] - earliest;
	}
	return stall;
}

/* Time the PIM intervals overlap accelerator busy intervals (both sorted, disjoint). */
static double overlap(const struct sim *s)
{
	double sum = 0;
	size_t i = 0, j = 0;

	while (i < s->n && j < s->n) {
		double a0 = s->t[i], a1 = s->t[i] + s->a[i];
		double p0 = s->ps[j], p1 = s->pf[j];
		double lo = a0 > p0 ? a0 : p0, hi = a1 < p1 ? a1 : p1;
		if (hi > lo)
			sum += hi - lo;
		if (a1 < p1)
			i++;
		else
			j++;
	}
	return sum;
}

static int plan_phase(struct jitq_plan *plan, enum jitq_phase ph, const double *accel_layer,
		      enum mx_dir fwd_dir, struct pim_error *err)
{
	const struct jitq_config *c = &plan->cfg;
	struct jitq_phase_plan *pp = &plan->phase[ph];
	size_t n = plan->layers;
	enum mx_dir bwd_dir = fwd_dir == MX_DIR_ROW ? MX_DIR_COL : MX_DIR_ROW;
	enum mx_dir dirs[2];
	unsigned ndirs = 0;

	/* Forward needs the forward copy; backward the transposed one, plus the forward copy
	 * first when the block's forward is recomputed (Korthikanti et al. §4). */
	if (ph == JITQ_PHASE_FWD || c->fp.act == JITQ_ACT_RECOMPUTE)
		dirs[ndirs++] = fwd_dir;
	if (ph == JITQ_PHASE_BWD)
		dirs[ndirs++] = bwd_dir;
	pp->dir_mask = 0;
	double p_block = 0;
	uint64_t bytes_block = 0;
	for (unsigned d = 0; d < ndirs; d++) {
		pp->dir_mask |= 1u << dirs[d];
		for (int t = 0; t < JITQ_T_COUNT; t++) {
			p_block += plan->tensors[t].pim_s[dirs[d]];
			bytes_block += plan->tensors[t].bytes[dirs[d]];
		}
	}

	_cleanup_(freep) double *work = calloc(6 * n, sizeof(double));
	_cleanup_(freep) uint32_t *count = calloc(n + 2, sizeof(uint32_t));
	if (!work || !count)
		return err_set(err, -ENOMEM, "out of memory planning %zu blocks", n);
	double *a = work, *p = work + n;
	struct sim s = { .n = n, .a = a, .p = p, .t = work + 2 * n, .ps = work + 3 * n,
			 .pf = work + 4 * n };
	double *slack_sorted = work + 5 * n;

	/* Processing order: forward 0..N-1, backward N-1..0. */
#define LAYER_AT(k) (ph == JITQ_PHASE_FWD ? (k) : n - 1 - (k))
	for (size_t k = 0; k < n; k++) {
		a[k] = accel_layer[LAYER_AT(k)];
		p[k] = p_block;
	}
	s.head = c->head_start_blocks * a[0];

	uint32_t lmax = c->max_lookahead < n ? c->max_lookahead : (uint32_t)n;
	double accel_total = 0;
	for (size_t k = 0; k < n; k++)
		accel_total += a[k];
	/* rounding noise of the timeline sums: anything below is "equal" / "no stall" */
	double tol = 1e-9 * (accel_total + p_block * (double)n + s.head);
	uint32_t best = 1;
	memset(pp->stall_by_l, 0, sizeof pp->stall_by_l);
	for (uint32_t l = 1; l <= lmax; l++) {
		pp->stall_by_l[l] = simulate(&s, l);
		/* strictly better, else keep the smaller L (fewer resident copies) */
		if (pp->stall_by_l[l] < pp->stall_by_l[best] - tol)
			best = l;
	}
	pp->lookahead = best;
	pp->stall_s = simulate(&s, best);
	pp->pim_bound = pp->stall_s > tol;
	pp->overlap_s = overlap(&s);
	pp->accel_s = accel_total;
	pp->pim_s = p_block * (double)n;
	uint64_t held = (uint64_t)(best + 1 < n ? best + 1 : n);
	if (!mul_u64(held, bytes_block, &pp->resident_bytes))
		return err_set(err, -EOVERFLOW, "resident copy bytes overflow 64 bits");

	pp->blocks = calloc(n, sizeof *pp->blocks);
	pp->n_launches = n * ndirs * JITQ_T_COUNT;
	pp->launches = calloc(pp->n_launches, sizeof *pp->launches);
	pp->first = calloc(n + 2, sizeof *pp->first);
	if (!pp->blocks || !pp->launches || !pp->first)
		return err_set(err, -ENOMEM, "out of memory planning %zu blocks", n);

	for (size_t k = 0; k < n; k++) {
		struct jitq_block *b = &pp->blocks[LAYER_AT(k)];
		double win = k < best ? s.head : 0;
		for (size_t j = k < best ? 0 : k - best; j < k; j++)
			win += a[j];
		b->accel_s = a[k];
		b->pim_s = p[k];
		b->slack = a[k] / (k + 1 < n ? p[k + 1] : p[k]);
		b->window_s = win;
		b->launch_s = k < best ? -s.head : s.t[k - best];
		b->ready_s = s.pf[k];
		b->start_s = s.t[k];
		b->stall_s = s.t[k] - (k == 0 ? 0 : s.t[k - 1] + a[k - 1]);
		slack_sorted[k] = b->slack;
		/* boundary slot: 0 = prologue, layer L -> L + 1 */
		count[k < best ? 0 : LAYER_AT(k - best) + 1] += ndirs * JITQ_T_COUNT;
	}
	qsort(slack_sorted, n, sizeof *slack_sorted, cmp_double);
	pp->slack_min = slack_sorted[0];
	pp->slack_median = n % 2 ? slack_sorted[n / 2]
				 : (slack_sorted[n / 2 - 1] + slack_sorted[n / 2]) / 2;

	pp->first[0] = 0;
	for (size_t i = 0; i <= n; i++)
		pp->first[i + 1] = pp->first[i] + count[i];
	/* fill (count[] reused as the next free position per slot); processing order keeps the
	 * prologue in FIFO order */
	for (size_t i = 0; i <= n; i++)
		count[i] = pp->first[i];
	for (size_t k = 0; k < n; k++) {
		uint32_t layer = (uint32_t)LAYER_AT(k);
		int32_t boundary = k < best ? JITQ_PROLOGUE : (int32_t)LAYER_AT(k - best);
		size_t slot = (size_t)(boundary + 1);
		for (unsigned d = 0; d < ndirs; d++) {
			for (int t = 0; t < JITQ_T_COUNT; t++) {
				const struct jitq_tensor_info *ti = &plan->tensors[t];
				struct jitq_launch *L = &pp->launches[count[slot]++];
				L->block = layer;
				L->boundary = boundary;
				L->phase = (uint8_t)ph;
				L->tensor = (uint8_t)t;
				L->dir = (uint8_t)dirs[d];
				L->split_rows = ti->split_rows;
				L->rows = ti->rows;
				L->cols = ti->cols;
				L->chan_first = 0;
				L->chan_count = c->pim.channels;
				L->bytes = ti->bytes[dirs[d]];
				L->pim_s = ti->pim_s[dirs[d]];
			}
		}
	}
#undef LAYER_AT
	return 0;
}

/* Footprint and savings, overflow-checked; 0 or -EOVERFLOW. */
static int capacity(struct jitq_plan *plan, struct pim_error *err)
{
	const struct jitq_config *c = &plan->cfg;
	const struct jitq_model *m = &c->model;
	struct jitq_capacity *cap = &plan->cap;
	uint64_t n = plan->layers, per_block = 0, row = 0, col = 0, tmp;
	bool ok = true;

	for (int t = 0; t < JITQ_T_COUNT; t++) {
		per_block += plan->tensors[t].params;
		row += plan->tensors[t].bytes[MX_DIR_ROW];
		col += plan->tensors[t].bytes[MX_DIR_COL];
	}
	uint64_t emb = (((uint64_t)m->vocab + m->tslice - 1) / m->tslice) * m->hidden;
	ok = ok && mul_u64(per_block, n, &cap->params_quant);
	ok = ok && add_u64(cap->params_quant, emb, &cap->params);
	ok = ok && mul_u64(cap->params, c->src == MX_SRC_BF16 ? 2 : 4, &cap->master);
	ok = ok && mul_u64(cap->params, c->fp.grad_bytes, &cap->grads);
	ok = ok && mul_u64(cap->params, c->fp.optim_bytes, &cap->optim);
	cap->optim = (cap->optim + c->fp.optim_shards - 1) / c->fp.optim_shards;
	ok = ok && mul_u64(row + col, n, &cap->lp_both);
	ok = ok && mul_u64(row > col ? row : col, n, &cap->lp_one);
	if (!ok)
		return err_set(err, -EOVERFLOW, "weight footprint overflows 64 bits");

	/* Korthikanti et al. 2022 §4, bytes per block with tensor parallelism t, 16-bit values:
	 * sbh(10 + 24/t + 5as/(ht)) = (sbh(10t + 24) + 5as²b) / t. */
	uint64_t s = m->seq, b = m->batch, h = m->hidden, a = m->heads, t = m->tslice, sbh = 0,
		 per = 0, attn = 0;
	ok = mul_u64(s, b, &tmp) && mul_u64(tmp, h, &sbh);
	switch (c->fp.act) {
	case JITQ_ACT_FULL:
		ok = ok && mul_u64(5 * a, s, &tmp) && mul_u64(tmp, s, &tmp) &&
		     mul_u64(tmp, b, &attn);
		/* fallthrough */
	case JITQ_ACT_SELECTIVE:
		ok = ok && mul_u64(sbh, 10 * t + 24, &tmp) && add_u64(tmp, attn, &tmp);
		per = tmp / t;
		break;
	case JITQ_ACT_RECOMPUTE:
		ok = ok && mul_u64(sbh, 2, &per);
		break;
	case JITQ_ACT_NONE:
		per = 0;
		break;
	}
	ok = ok && mul_u64(per, n, &cap->acts);
	if (!ok)
		return err_set(err, -EOVERFLOW,
			       "activation footprint overflows 64 bits: reduce model.seq or "
			       "model.batch");

	cap->lp_jitq = plan->phase[0].resident_bytes > plan->phase[1].resident_bytes
			       ? plan->phase[0].resident_bytes
			       : plan->phase[1].resident_bytes;
	uint64_t base;
	ok = add_u64(cap->master, cap->grads, &base) && add_u64(base, cap->optim, &base) &&
	     add_u64(base, cap->acts, &base) && add_u64(base, cap->lp_both, &cap->total_both) &&
	     add_u64(base, cap->lp_one, &cap->total_one) &&
	     add_u64(base, cap->lp_jitq, &cap->total_jitq) && cap->total_both <= INT64_MAX;
	if (!ok)
		return err_set(err, -EOVERFLOW, "training footprint overflows 64 bits");
	cap->saved_vs_both = (int64_t)cap->total_both - (int64_t)cap->total_jitq;
	cap->saved_vs_one = (int64_t)cap->total_one - (int64_t)cap->total_jitq;
	cap->pct_vs_both = 100.0 * (double)cap->saved_vs_both / (double)cap->total_both;
	cap->pct_vs_one = 100.0 * (double)cap->saved_vs_one / (double)cap->total_one;
	return 0;
}

void jitq_plan_free(struct jitq_plan *p)
{
	if (!p)
		return;
	for (int i = 0; i < JITQ_PHASE_COUNT; i++) {
		free(p->phase[i].blocks);
		free(p->phase[i].launches);
		free(p->phase[i].first);
	}
	free(p);
}

int jitq_plan(const struct jitq_config *cfg, struct jitq_plan **out, struct pim_error *err)
{
	int r;

	if (!cfg || !out)
		return err_set(err, -EINVAL, "jitq_plan: NULL config or result pointer");
	*out = NULL;
	if ((r = config_validate(cfg, err)) < 0)
		return r;

	_cleanup_(jitq_plan_freep) struct jitq_plan *plan = calloc(1, sizeof *plan);
	if (!plan)
		return err_set(err, -ENOMEM, "out of memory");
	plan->cfg = *cfg;
	plan->cfg.accel.fwd_s = plan->cfg.accel.bwd_s = NULL;
	plan->cfg.accel.n_times = 0;
	const struct jitq_config *c = &plan->cfg;
	const struct jitq_model *m = &c->model;
	plan->layers = jitq_local_layers(m);
	size_t n = plan->layers;

	tensor_shapes(m, c->layout, plan->tensors);
	enum mx_dir fwd_dir = c->layout == JITQ_LAYOUT_IN_OUT ? MX_DIR_COL : MX_DIR_ROW;

	/* One PIM query per distinct shape and direction: all blocks share them. */
	for (int t = 0; t < JITQ_T_COUNT; t++) {
		struct jitq_tensor_info *ti = &plan->tensors[t];
		for (int d = 0; d < 2; d++) {
			ti->bytes[d] = jitq_mx_bytes(c->fmt, ti->rows, ti->cols, (enum mx_dir)d);
			double v = c->pim.quant_time_s(c->pim.ctx, ti->rows, ti->cols,
						       (enum mx_dir)d, c->fmt, c->src);
			plan->pim_queries++;
			if (!isfinite(v) || v <= 0 || v > 1e9)
				return err_set(err, -ERANGE,
					       "PIM cost of %s [%u x %u] %s-blocked %s->%s is %g s; "
					       "it must be finite, > 0 and <= 1e9",
					       jitq_tensor_name(t), ti->rows, ti->cols,
					       jitq_dir_name((enum mx_dir)d), jitq_src_name(c->src),
					       jitq_fmt_name(c->fmt), v);
			ti->pim_s[d] = v;
		}
	}

	/* Accelerator time per block (layer order). */
	_cleanup_(freep) double *times = calloc(2 * n, sizeof(double));
	if (!times)
		return err_set(err, -ENOMEM, "out of memory");
	if (cfg->accel.fwd_s) {
		memcpy(times, cfg->accel.fwd_s, n * sizeof(double));
		memcpy(times + n, cfg->accel.bwd_s, n * sizeof(double));
	} else {
		double b = m->batch, s = m->seq, h = m->hidden, t = m->tslice;
		double rate = c->accel.peak_flops * c->accel.efficiency * c->accel.speedup[c->fmt];
		plan->flops_fwd = (24 * b * s * h * h + 4 * b * s * s * h) / t;
		plan->flops_bwd = (c->fp.act == JITQ_ACT_RECOMPUTE ? 3 : 2) * plan->flops_fwd;
		for (size_t i = 0; i < n; i++) {
			times[i] = plan->flops_fwd / rate;
			times[n + i] = plan->flops_bwd / rate;
		}
	}

	if ((r = plan_phase(plan, JITQ_PHASE_FWD, times, fwd_dir, err)) < 0 ||
	    (r = plan_phase(plan, JITQ_PHASE_BWD, times + n, fwd_dir, err)) < 0 ||
	    (r = capacity(plan, err)) < 0)
		return r;

	double accel = 0, stall = 0, ov = 0;
	for (int i = 0; i < JITQ_PHASE_COUNT; i++) {
		accel += plan->phase[i].accel_s;
		stall += plan->phase[i].stall_s;
		ov += plan->phase[i].overlap_s;
	}
	plan->loss_stall = stall / accel;
	plan->loss_interference = ov * c->bus_share * c->mem_share / accel;
	plan->loss = plan->loss_stall + plan->loss_interference;

	*out = TAKE_PTR(plan);
	return 0;
}

const struct jitq_launch *jitq_launches_at(const struct jitq_plan *p, enum jitq_phase phase,
					   int32_t boundary, size_t *n)
{
	*n = 0;
	if (!p || (unsigned)phase >= JITQ_PHASE_COUNT || boundary < JITQ_PROLOGUE ||
	    boundary >= (int32_t)p->layers)
		return NULL;
	const struct jitq_phase_plan *pp = &p->phase[phase];
	size_t slot = (size_t)(boundary + 1);
	*n = pp->first[slot + 1] - pp->first[slot];
	return *n ? &pp->launches[pp->first[slot]] : NULL;
}

/* ---- formatting --------------------------------------------------------------------------- */

struct out {
	char *buf;
	size_t len, pos;
};

_printf_(2, 3) static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	size_t room = o->pos < o->len ? o->len - o->pos : 0;

	va_start(ap, fmt);
	int r = vsnprintf(room ? o->buf + o->pos : NULL, room, fmt, ap);
	va_end(ap);
	if (r > 0)
		o->pos += (size_t)r;
}

static double gib(uint64_t b) { return (double)b / (1024.0 * 1024 * 1024); }

static const char *act_desc(enum jitq_act a)
{
	switch (a) {
	case JITQ_ACT_FULL:
		return "all stored, s*b*h*(10 + 24/t + 5*a*s/(h*t)) B per block (Korthikanti et al. "
		       "2022 §4, 16-bit)";
	case JITQ_ACT_SELECTIVE:
		return "selective recomputation, s*b*h*(10 + 24/t) B per block (Korthikanti et al. "
		       "2022 §5)";
	case JITQ_ACT_RECOMPUTE:
		return "full recomputation, 2*s*b*h B per block (block input only; backward "
		       "re-runs forward: 3x FLOPs, both copies)";
	case JITQ_ACT_NONE:
		return "not counted";
	}
	return "invalid";
}

static bool speedup_is_bits(const double v[3])
{
	double b[3];
	jitq_accel_speedup_bits(b);
	return memcmp(b, v, sizeof b) == 0;
}

size_t jitq_plan_format(const struct jitq_plan *p, bool per_block, char *buf, size_t len)
{
	struct out o = { buf, len, 0 };
	const struct jitq_config *c = &p->cfg;
	const struct jitq_model *m = &c->model;
	const struct jitq_capacity *cap = &p->cap;

	if (len)
		buf[0] = '\0';
	put(&o, "model %s: %u layers, hidden %u, %u heads, seq %u, micro-batch %u, tensor slicing %u, "
		"pipeline %u (%u blocks per device), vocab %u\n",
	    m->name[0] ? m->name : "(custom)", m->layers, m->hidden, m->heads, m->seq, m->batch,
	    m->tslice, m->pstages ? m->pstages : 1, p->layers, m->vocab);
	if (m->source)
		put(&o, "  source: %s\n", m->source);
	put(&o, "quantize %s -> %s, weights stored %s (forward needs %s-blocked, backward %s)\n",
	    jitq_src_name(c->src), jitq_fmt_name(c->fmt),
	    c->layout == JITQ_LAYOUT_IN_OUT ? "[in x out]" : "[out x in]",
	    c->layout == JITQ_LAYOUT_IN_OUT ? "col" : "row",
	    c->layout == JITQ_LAYOUT_IN_OUT ? "row" : "col");
	if (p->flops_fwd > 0)
		put(&o, "accelerator: %.4g FLOP/s x %.3g x %s speedup %.3g; per block %.4g FLOP "
			"forward (24bsh^2 + 4bs^2h)/t, %.4g backward\n",
		    c->accel.peak_flops, c->accel.efficiency, jitq_fmt_name(c->fmt),
		    c->accel.speedup[c->fmt], p->flops_fwd, p->flops_bwd);
	else
		put(&o, "accelerator: measured per-block times\n");
	put(&o, "tensors per block (local slice, PIM time row / col, %u PIM cost queries):\n",
	    p->pim_queries);
	for (int t = 0; t < JITQ_T_COUNT; t++) {
		const struct jitq_tensor_info *ti = &p->tensors[t];
		put(&o, "  %-9s [%u x %u] split %s  %.4g ms / %.4g ms  %llu B\n",
		    jitq_tensor_name(t), ti->rows, ti->cols, ti->split_rows ? "rows" : "cols",
		    ti->pim_s[MX_DIR_ROW] * 1e3, ti->pim_s[MX_DIR_COL] * 1e3,
		    (unsigned long long)ti->bytes[MX_DIR_ROW]);
	}
	for (int ph = 0; ph < JITQ_PHASE_COUNT; ph++) {
		const struct jitq_phase_plan *pp = &p->phase[ph];
		put(&o,
		    "%-8s: lookahead i+%u, slack min %.3g median %.3g, block %.4g ms accel / %.4g ms "
		    "PIM, stall %.4g ms, overlap %.4g ms, resident %.4g GiB\n",
		    jitq_phase_name(ph), pp->lookahead, pp->slack_min, pp->slack_median,
		    pp->blocks[0].accel_s * 1e3, pp->blocks[0].pim_s * 1e3, pp->stall_s * 1e3,
		    pp->overlap_s * 1e3, gib(pp->resident_bytes));
		if (pp->pim_bound)
			put(&o, "          PIM-bound: no lookahead up to i+%u hides the quantization "
				"(%.4g ms exposed)\n",
			    c->max_lookahead, pp->stall_s * 1e3);
	}
	put(&o,
	    "capacity per device: master %.4g GiB, grads %.4g, optimizer %.4g, activations %.4g, "
	    "low-precision both %.4g / one %.4g / JIT-Q %.4g\n",
	    gib(cap->master), gib(cap->grads), gib(cap->optim), gib(cap->acts), gib(cap->lp_both),
	    gib(cap->lp_one), gib(cap->lp_jitq));
	put(&o, "  saved vs both copies: %.4g GiB (%.2f%%); vs one copy: %.4g GiB (%.2f%%)\n",
	    (double)cap->saved_vs_both / (1024.0 * 1024 * 1024), cap->pct_vs_both,
	    (double)cap->saved_vs_one / (1024.0 * 1024 * 1024), cap->pct_vs_one);
	put(&o, "throughput loss: %.3f%% (stall %.3f%%, interference %.3f%%)\n", 100 * p->loss,
	    100 * p->loss_stall, 100 * p->loss_interference);
	put(&o, "assumptions:\n");
	put(&o, "  master weights %s (%u B/param), gradients %u B/param, optimizer %u B/param "
		"over %u shard(s)\n",
	    jitq_src_name(c->src), c->src == MX_SRC_BF16 ? 2 : 4, c->fp.grad_bytes,
	    c->fp.optim_bytes, c->fp.optim_shards);
	put(&o, "  parameters: block weights 12h^2/t + embedding vocab*h/t; biases, layer norms "
		"left out; embedding never JIT-quantized\n");
	put(&o, "  activations: %s: %s\n", jitq_act_name(c->fp.act), act_desc(c->fp.act));
	put(&o, "  weight layout %s: forward reads the %s-blocked copy, backward the %s-blocked one%s\n",
	    jitq_layout_name(c->layout), c->layout == JITQ_LAYOUT_IN_OUT ? "col" : "row",
	    c->layout == JITQ_LAYOUT_IN_OUT ? "row" : "col",
	    c->fp.act == JITQ_ACT_RECOMPUTE ? " (and the forward one again)" : "");
	put(&o, "  parallelism: micro-batch %u, sequence %u, tensor %u, pipeline %u; the device "
		"planned holds %u blocks and the embedding\n",
	    m->batch, m->seq, m->tslice, m->pstages ? m->pstages : 1, p->layers);
	put(&o, "  MX %s: %u B per 16 elements; JIT-Q holds (lookahead + 1) blocks' copies\n",
	    jitq_fmt_name(c->fmt), fmt_block_bytes(c->fmt));
	put(&o, "  accelerator throughput per format, x the BF16 rate (peak x efficiency): mx9 %.3g, "
		"mx6 %.3g, mx4 %.3g%s\n",
	    c->accel.speedup[MX_FMT_MX9], c->accel.speedup[MX_FMT_MX6], c->accel.speedup[MX_FMT_MX4],
	    speedup_is_bits(c->accel.speedup)
		    ? " (time per GEMM 9 : 6 : 4, bits per element; MX9 at the BF16 rate)"
		    : "");
	put(&o, "  PIM: one FIFO server over %u pseudo-channels; head start %.3g block(s) before "
		"each phase; cost from the plugged-in PIM model\n",
	    c->pim.channels, c->head_start_blocks);
	put(&o, "  interference: loss = overlap x bus share %.3g x memory-bound share %.3g; "
		"stalls counted in full\n",
	    c->bus_share, c->mem_share);
	if (per_block) {
		for (int ph = 0; ph < JITQ_PHASE_COUNT; ph++) {
			put(&o, "%s launches:\n", jitq_phase_name(ph));
			for (int32_t bd = JITQ_PROLOGUE; bd < (int32_t)p->layers; bd++) {
				size_t nl;
				const struct jitq_launch *l = jitq_launches_at(p, ph, bd, &nl);
				char at[24];
				if (bd == JITQ_PROLOGUE)
					snprintf(at, sizeof at, "prologue");
				else
					snprintf(at, sizeof at, "block %d", bd);
				for (size_t i = 0; i < nl; i++)
					put(&o, "  at %-11s -> block %-5u %-9s %s [%u x %u] ch %u-%u "
						"%.4g ms\n",
					    at, l[i].block, jitq_tensor_name(l[i].tensor),
					    jitq_dir_name(l[i].dir), l[i].rows, l[i].cols,
					    l[i].chan_first, l[i].chan_first + l[i].chan_count - 1,
					    l[i].pim_s * 1e3);
			}
		}
	}
	return o.pos;
}
