/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the JIT-Q scheduler (daemon/jitq.c, doc/design.md §5.3).  Every expected number is
 * worked out by hand in the comment next to it.
 *
 * The small model of small_config(): 4 layers, h 64, 4 heads, s 32, b 2, t 1, no vocab.
 *   Block weights (t 1, [in × out]): QKV [64 × 192], attn-out [64 × 64], MLP-up [64 × 256],
 *   MLP-down [256 × 64] = 12288 + 4096 + 16384 + 16384 = 49152 = 12·64² elements.
 * The test PIM cost is elements × k[dir], k_row = 2^-14 s, k_col = 2^-13 s, so one block costs
 *   row: 49152 · 2^-14 = 3 s,  col: 49152 · 2^-13 = 6 s  (exact in binary).
 * With the default layout the forward phase needs col (6 s per block), backward row (3 s).
 */
#include "jitq.h"

#include <check.h>
#include <math.h>
#include <string.h>

#include "test_util.h"

#define ck_rel(a, b)                                                                                \
	do {                                                                                       \
		double a_ = (a), b_ = (b);                                                         \
		ck_assert_msg(fabs(a_ - b_) <= 1e-9 * fabs(b_) + 1e-15, "%s = %.15g, expected %.15g", \
			      #a, a_, b_);                                                          \
	} while (0)

#define ck_has(hay, needle)                                                                         \
	ck_assert_msg(strstr((hay), (needle)) != NULL, "'%s' does not contain '%s'", (hay), (needle))

struct test_cost {
	double k[2];
	unsigned calls;
	double ret; /* when non-zero: returned as is (for the error path) */
};

static double test_cost_fn(void *ctx, uint64_t rows, uint64_t cols, enum mx_dir dir,
			   enum mx_format fmt, enum mx_src src)
{
	struct test_cost *tc = ctx;
	tc->calls++;
	if (tc->ret != 0)
		return tc->ret;
	return (double)rows * (double)cols * tc->k[dir];
}

static struct test_cost tcost;

static struct jitq_config small_config(void)
{
	struct jitq_config c;

	jitq_config_init(&c);
	memset(&c.model, 0, sizeof c.model);
	snprintf(c.model.name, sizeof c.model.name, "small");
	c.model.layers = 4;
	c.model.hidden = 64;
	c.model.heads = 4;
	c.model.seq = 32;
	c.model.batch = 2;
	c.model.tslice = 1;
	c.accel.peak_flops = 1e9;
	c.accel.efficiency = 0.5;
	/* One speed for every format here; test_speedup_per_format checks the default ratios. */
	for (int f = 0; f < 3; f++)
		c.accel.speedup[f] = 1;
	tcost = (struct test_cost){ .k = { 0x1p-14, 0x1p-13 } };
	c.pim.quant_time_s = test_cost_fn;
	c.pim.ctx = &tcost;
	c.pim.channels = 16;
	return c;
}

static struct jitq_plan *plan_ok(const struct jitq_config *c)
{
	struct jitq_plan *p = NULL;
	struct pim_error err = { 0 };
	int r = jitq_plan(c, &p, &err);
	ck_assert_msg(r == 0, "jitq_plan failed: %d %s", r, err.msg);
	ck_assert_ptr_nonnull(p);
	return p;
}

static void plan_fails(const struct jitq_config *c, int code, const char *msg)
{
	struct jitq_plan *p = (struct jitq_plan *)0x1;
	struct pim_error err = { 0 };
	int r = jitq_plan(c, &p, &err);
	ck_assert_int_eq(r, code);
	ck_assert_ptr_null(p);
	ck_has(err.msg, msg);
}

/* ---- FLOPs, accelerator time, shapes ------------------------------------------------------ */

START_TEST(test_speedup_per_format)
{
	struct jitq_config c = small_config();
	struct pim_error err = { 0 };
	/* The default: time per GEMM 9 : 6 : 4, MX9 at the BF16 rate. */
	static const double want[3] = { 1.0, 1.5, 2.25 };
	double slack[3];

	jitq_accel_speedup_bits(c.accel.speedup);
	for (int f = 0; f < 3; f++) {
		c.fmt = (enum mx_format)f;
		struct jitq_plan *p = plan_ok(&c);
		ck_assert_double_eq(p->cfg.accel.speedup[f], want[f]);
		/* 6815744 FLOP / (1e9 · 0.5 · speedup): 13.631488 ms, 9.0876587 ms, 6.0584391 ms */
		ck_rel(p->phase[JITQ_PHASE_FWD].blocks[0].accel_s, 6815744.0 / 5e8 / want[f]);
		ck_rel(p->phase[JITQ_PHASE_BWD].blocks[0].accel_s, 2 * 6815744.0 / 5e8 / want[f]);
		slack[f] = p->phase[JITQ_PHASE_FWD].slack_min;
		char buf[8192];
		jitq_plan_format(p, false, buf, sizeof buf);
		ck_has(buf, "accelerator throughput per format, x the BF16 rate (peak x efficiency): "
			    "mx9 1, mx6 1.5, mx4 2.25 (time per GEMM 9 : 6 : 4");
		jitq_plan_free(p);
	}
	/* The PIM cost of this test does not depend on the format: slack 9 : 6 : 4. */
	ck_rel(slack[MX_FMT_MX9] / slack[MX_FMT_MX6], 1.5);
	ck_rel(slack[MX_FMT_MX9] / slack[MX_FMT_MX4], 2.25);

	ck_assert_int_eq(jitq_config_set(&c, "speedup_mx4", "3", &err), 0);
	ck_assert_double_eq(c.accel.speedup[MX_FMT_MX4], 3);
	ck_assert_int_eq(jitq_config_set(&c, "speedup_mx6", "0", &err), -EINVAL);
	ck_assert_str_eq(err.msg, "speedup_mx6 \"0\" must be a number more than 0 and at most 64");
	ck_assert_int_eq(jitq_config_set(&c, "speedup_mx9", "65", &err), -EINVAL);
	c.accel.speedup[MX_FMT_MX9] = -1;
	plan_fails(&c, -EINVAL, "accel.speedup[mx9] = -1 is out of range (0, 64]");
}
END_TEST

START_TEST(test_flops_and_times)
{
	struct jitq_config c = small_config();
	struct jitq_plan *p = plan_ok(&c);

	/* 24·b·s·h² = 24·2·32·4096 = 6291456; 4·b·s²·h = 4·2·1024·64 = 524288; sum 6815744 */
	ck_rel(p->flops_fwd, 6815744);
	ck_rel(p->flops_bwd, 2 * 6815744.0);
	/* 6815744 / (1e9 · 0.5) = 0.013631488 s; backward twice that */
	ck_rel(p->phase[JITQ_PHASE_FWD].blocks[0].accel_s, 0.013631488);
	ck_rel(p->phase[JITQ_PHASE_BWD].blocks[3].accel_s, 0.027262976);
	ck_rel(p->phase[JITQ_PHASE_FWD].accel_s, 4 * 0.013631488);
	jitq_plan_free(p);

	/* t = 2 halves the FLOPs: 3407872 */
	c = small_config();
	c.model.tslice = 2;
	p = plan_ok(&c);
	ck_rel(p->flops_fwd, 3407872);
	/* column-parallel QKV [64 × 96], row-parallel attn-out [32 × 64], MLP [64 × 128],
	 * [128 × 64] */
	ck_assert_uint_eq(p->tensors[JITQ_T_QKV].rows, 64);
	ck_assert_uint_eq(p->tensors[JITQ_T_QKV].cols, 96);
	ck_assert_uint_eq(p->tensors[JITQ_T_QKV].split_rows, 0);
	ck_assert_uint_eq(p->tensors[JITQ_T_ATTN_OUT].rows, 32);
	ck_assert_uint_eq(p->tensors[JITQ_T_ATTN_OUT].cols, 64);
	ck_assert_uint_eq(p->tensors[JITQ_T_ATTN_OUT].split_rows, 1);
	ck_assert_uint_eq(p->tensors[JITQ_T_MLP_UP].cols, 128);
	ck_assert_uint_eq(p->tensors[JITQ_T_MLP_DOWN].rows, 128);
	/* QKV PIM time: 64·96 = 6144 elements · 2^-14 = 0.375 s row, 0.75 s col */
	ck_rel(p->tensors[JITQ_T_QKV].pim_s[MX_DIR_ROW], 0.375);
	ck_rel(p->tensors[JITQ_T_QKV].pim_s[MX_DIR_COL], 0.75);
	jitq_plan_free(p);

	/* PyTorch layout transposes: QKV [96 × 64], split rows; forward then needs row */
	c.layout = JITQ_LAYOUT_OUT_IN;
	p = plan_ok(&c);
	ck_assert_uint_eq(p->tensors[JITQ_T_QKV].rows, 96);
	ck_assert_uint_eq(p->tensors[JITQ_T_QKV].cols, 64);
	ck_assert_uint_eq(p->tensors[JITQ_T_QKV].split_rows, 1);
	ck_assert_uint_eq(p->phase[JITQ_PHASE_FWD].dir_mask, 1u << MX_DIR_ROW);
	ck_assert_uint_eq(p->phase[JITQ_PHASE_BWD].dir_mask, 1u << MX_DIR_COL);
	jitq_plan_free(p);
}
END_TEST

START_TEST(test_measured_times)
{
	struct jitq_config c = small_config();
	static const double fwd[4] = { 1, 2, 3, 4 }, bwd[4] = { 5, 6, 7, 8 };
	c.accel.fwd_s = fwd;
	c.accel.bwd_s = bwd;
	c.accel.n_times = 4;
	c.accel.peak_flops = 0; /* ignored with measured times */
	struct jitq_plan *p = plan_ok(&c);

	ck_rel(p->flops_fwd, 0);
	ck_rel(p->phase[JITQ_PHASE_FWD].blocks[2].accel_s, 3);
	ck_rel(p->phase[JITQ_PHASE_BWD].blocks[0].accel_s, 5);
	ck_rel(p->phase[JITQ_PHASE_FWD].accel_s, 10);
	ck_rel(p->phase[JITQ_PHASE_BWD].accel_s, 26);
	/* the plan does not keep the caller's pointers */
	ck_assert_ptr_null(p->cfg.accel.fwd_s);
	jitq_plan_free(p);
}
END_TEST

/* ---- slack and lookahead ------------------------------------------------------------------ */

START_TEST(test_slack_lookahead_i1)
{
	struct jitq_config c = small_config();
	/* rate = 6815744 / 12 / 0.5 FLOP/s -> forward block 12 s, backward 24 s */
	c.accel.peak_flops = 6815744.0 / 12 / 0.5;
	struct jitq_plan *p = plan_ok(&c);
	const struct jitq_phase_plan *fw = &p->phase[JITQ_PHASE_FWD], *bw = &p->phase[JITQ_PHASE_BWD];

	/* forward: 12 s accel / 6 s col = 2; backward: 24 s / 3 s row = 8 */
	ck_rel(fw->slack_min, 2);
	ck_rel(fw->slack_median, 2);
	ck_rel(bw->slack_min, 8);
	ck_assert_uint_eq(fw->lookahead, 1);
	ck_assert_uint_eq(bw->lookahead, 1);
	ck_rel(fw->stall_s, 0);
	ck_assert(!fw->pim_bound);
	/* timeline: head start 1 block = 12 s; block 0 quantized in [-12, -6]; block 1 launched
	 * at block 0's start (t 0), ready at 6, starts at 12 with no stall */
	ck_rel(fw->blocks[0].launch_s, -12);
	ck_rel(fw->blocks[0].ready_s, -6);
	ck_rel(fw->blocks[1].launch_s, 0);
	ck_rel(fw->blocks[1].ready_s, 6);
	ck_rel(fw->blocks[1].start_s, 12);
	ck_rel(fw->blocks[1].window_s, 12);
	/* backward runs 3, 2, 1, 0: block 2 is launched when block 3 starts (t 0) */
	ck_rel(bw->blocks[3].start_s, 0);
	ck_rel(bw->blocks[2].launch_s, 0);
	ck_rel(bw->blocks[2].ready_s, 3);
	ck_rel(bw->blocks[0].start_s, 72);
	/* every PIM second overlaps the accelerator except the prologue: forward 3 × 6 = 18,
	 * backward 3 × 3 = 9 */
	ck_rel(fw->overlap_s, 18);
	ck_rel(bw->overlap_s, 9);
	/* loss = overlap · 0.5 · 0.1 / accel = 27 · 0.05 / (48 + 96) = 0.009375 */
	ck_rel(p->loss_stall, 0);
	ck_rel(p->loss_interference, 27 * 0.05 / 144);
	ck_rel(p->loss, 27 * 0.05 / 144);
	jitq_plan_free(p);
}
END_TEST

START_TEST(test_slack_lookahead_i2)
{
	/*
	 * Forward times alternate 10, 2 s over 6 blocks; PIM needs 6 s per block (col).
	 * Slack per block (accel / PIM of the next block): 10/6, 2/6, ...; min 1/3, median of
	 * {1/3 ×3, 5/3 ×3} = 1.  Head start 1 block = 10 s.
	 *
	 * i+1: b0 PIM [-10,-4], starts 0.  b1 launched at 0: [0,6], needed at 10: ok.
	 *      b2 launched at 10: [10,16], needed at 12: stall 4, starts 16.
	 *      b3 launched at 16: [16,22], needed at 26: ok.  b4 launched at 26: [26,32], needed
	 *      at 28: stall 4.  b5 [32,38], needed at 42: ok.  Total stall 8.
	 * i+2: b0, b1 in the prologue: [-10,-4], [-4,2].  b2 launched at b0's start (0), PIM free
	 *      at 2: [2,8], needed at 12.  b3 at b1's start (10): [10,16], needed 22.  b4 at 12:
	 *      [16,22], needed 24.  b5 at 22: [22,28], needed 34.  No stall: lookahead 2.
	 */
	struct jitq_config c = small_config();
	static const double fwd[6] = { 10, 2, 10, 2, 10, 2 }, bwd[6] = { 20, 20, 20, 20, 20, 20 };
	c.model.layers = 6;
	c.accel.fwd_s = fwd;
	c.accel.bwd_s = bwd;
	c.accel.n_times = 6;
	c.mem_share = 0.2; /* interference 0.5 · 0.2 = 0.1 */
	struct jitq_plan *p = plan_ok(&c);
	const struct jitq_phase_plan *fw = &p->phase[JITQ_PHASE_FWD], *bw = &p->phase[JITQ_PHASE_BWD];

	ck_rel(fw->stall_by_l[1], 8);
	ck_rel(fw->stall_by_l[2], 0);
	ck_assert_uint_eq(fw->lookahead, 2);
	ck_rel(fw->stall_s, 0);
	ck_rel(fw->slack_min, 2.0 / 6);
	ck_rel(fw->slack_median, 1);
	ck_rel(fw->blocks[2].ready_s, 8);
	ck_rel(fw->blocks[2].start_s, 12);
	ck_rel(fw->blocks[2].window_s, 12); /* blocks 0 and 1: 10 + 2 */
	ck_rel(fw->blocks[1].window_s, 20); /* prologue: head start 10 + block 0 */
	ck_rel(fw->blocks[5].ready_s, 28);
	/* resident copies: (2 + 1) blocks × 36864 B (MX6: 49152 elements · 12/16) */
	ck_assert_uint_eq(fw->resident_bytes, 3 * 36864);
	/* backward 20 s per block vs 3 s: i+1, slack 20/3 */
	ck_assert_uint_eq(bw->lookahead, 1);
	ck_rel(bw->slack_min, 20.0 / 3);
	/*
	 * Overlap, forward (accelerator busy [0,10] [10,12] [12,22] [22,24] [24,34] [34,36]):
	 * b1 [-4,2] -> 2, b2 [2,8] -> 6, b3 [10,16] -> 6, b4 [16,22] -> 6, b5 [22,28] -> 6: 26.
	 * Backward: 5 launches of 3 s inside 20 s blocks: 15.  Loss = 41 · 0.1 / (36 + 120).
	 */
	ck_rel(fw->overlap_s, 26);
	ck_rel(bw->overlap_s, 15);
	ck_rel(p->loss, 41 * 0.1 / 156);

	/* launches: prologue holds blocks 0 and 1 (4 tensors each, col), in FIFO order */
	size_t n;
	const struct jitq_launch *l = jitq_launches_at(p, JITQ_PHASE_FWD, JITQ_PROLOGUE, &n);
	ck_assert_uint_eq(n, 8);
	ck_assert_uint_eq(l[0].block, 0);
	ck_assert_uint_eq(l[0].tensor, JITQ_T_QKV);
	ck_assert_uint_eq(l[3].tensor, JITQ_T_MLP_DOWN);
	ck_assert_uint_eq(l[4].block, 1);
	for (size_t i = 0; i < n; i++) {
		ck_assert_uint_eq(l[i].dir, MX_DIR_COL);
		ck_assert_int_eq(l[i].boundary, JITQ_PROLOGUE);
	}
	/* at block 0's start: block 2; at block 3's: block 5; at blocks 4, 5: nothing */
	l = jitq_launches_at(p, JITQ_PHASE_FWD, 0, &n);
	ck_assert_uint_eq(n, 4);
	ck_assert_uint_eq(l[0].block, 2);
	l = jitq_launches_at(p, JITQ_PHASE_FWD, 3, &n);
	ck_assert_uint_eq(n, 4);
	ck_assert_uint_eq(l[2].block, 5);
	ck_assert_uint_eq(l[2].tensor, JITQ_T_MLP_UP);
	/* MLP-up [64 × 256]: 16384 · 2^-13 = 2 s col; MX6 64 · 256 / 16 · 12 = 12288 B */
	ck_rel(l[2].pim_s, 2);
	ck_assert_uint_eq(l[2].bytes, 12288);
	ck_assert_uint_eq(l[2].chan_first, 0);
	ck_assert_uint_eq(l[2].chan_count, 16);
	ck_assert_ptr_null(jitq_launches_at(p, JITQ_PHASE_FWD, 4, &n));
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_null(jitq_launches_at(p, JITQ_PHASE_FWD, 5, &n));
	/* backward (i+1, order 5..0): prologue block 5, block 5's start launches block 4 (row) */
	l = jitq_launches_at(p, JITQ_PHASE_BWD, JITQ_PROLOGUE, &n);
	ck_assert_uint_eq(n, 4);
	ck_assert_uint_eq(l[0].block, 5);
	l = jitq_launches_at(p, JITQ_PHASE_BWD, 5, &n);
	ck_assert_uint_eq(n, 4);
	ck_assert_uint_eq(l[0].block, 4);
	ck_assert_uint_eq(l[0].dir, MX_DIR_ROW);
	ck_assert_ptr_null(jitq_launches_at(p, JITQ_PHASE_BWD, 0, &n));
	jitq_plan_free(p);
}
END_TEST

START_TEST(test_pim_bound)
{
	/*
	 * Uniform 4 s blocks, 6 s PIM (slack 2/3).  i+1, head start 4: b0 [-4,2] stall 2; b1
	 * [2,8] needed at 6, stall 2; b2 [8,14] needed at 12, stall 2; b3 [14,20] needed at 18,
	 * stall 2: 8.  A deeper lookahead only queues more behind the same server: i+3 gives
	 * [-4,2] [2,8] [8,14] then b3 launched at 2 runs [14,20]: the same 8.  L stays 1.
	 */
	struct jitq_config c = small_config();
	static const double fwd[4] = { 4, 4, 4, 4 }, bwd[4] = { 8, 8, 8, 8 };
	c.accel.fwd_s = fwd;
	c.accel.bwd_s = bwd;
	c.accel.n_times = 4;
	struct jitq_plan *p = plan_ok(&c);
	const struct jitq_phase_plan *fw = &p->phase[JITQ_PHASE_FWD];

	for (unsigned l = 1; l <= 4; l++)
		ck_rel(fw->stall_by_l[l], 8);
	ck_assert_uint_eq(fw->lookahead, 1);
	ck_assert(fw->pim_bound);
	ck_rel(fw->stall_s, 8);
	ck_rel(fw->blocks[3].start_s, 20);
	/* backward 8 s vs 3 s is fine */
	ck_assert(!p->phase[JITQ_PHASE_BWD].pim_bound);
	/* loss: stall 8 of 16 + 32 accel seconds */
	ck_rel(p->loss_stall, 8.0 / 48);

	/* a head start of 4 blocks (16 s) covers the 4 × 2 s deficit, but only a lookahead that
	 * queues work into it can use it */
	jitq_plan_free(p);
	c.head_start_blocks = 4;
	p = plan_ok(&c);
	fw = &p->phase[JITQ_PHASE_FWD];
	/* i+1: b0 [-16,-10]; b1 [0,6] need 4 -> 2; b2 [6,12] need 10 -> 2; b3 [12,18] -> 2: 6.
	 * i+2: b0 [-16,-10] b1 [-10,-4]; b2 at b0's start 0: [0,6] need 8; b3 at 4: [6,12] need
	 * 12: 0.  So i+2. */
	ck_rel(fw->stall_by_l[1], 6);
	ck_rel(fw->stall_by_l[2], 0);
	ck_assert_uint_eq(fw->lookahead, 2);
	ck_assert(!fw->pim_bound);
	jitq_plan_free(p);
}
END_TEST

START_TEST(test_recompute_both_copies)
{
	struct jitq_config c = small_config();
	c.fp.act = JITQ_ACT_RECOMPUTE;
	struct jitq_plan *p = plan_ok(&c);
	const struct jitq_phase_plan *bw = &p->phase[JITQ_PHASE_BWD];

	/* backward = recomputed forward + backward: 3 × 6815744 FLOPs */
	ck_rel(p->flops_bwd, 3 * 6815744.0);
	ck_assert_uint_eq(bw->dir_mask, (1u << MX_DIR_ROW) | (1u << MX_DIR_COL));
	/* PIM per block: 6 s col + 3 s row */
	ck_rel(bw->blocks[0].pim_s, 9);
	size_t n;
	const struct jitq_launch *l = jitq_launches_at(p, JITQ_PHASE_BWD, JITQ_PROLOGUE, &n);
	ck_assert_uint_eq(n, 8);
	/* the recomputed forward comes first, so the col copy is launched first */
	ck_assert_uint_eq(l[0].dir, MX_DIR_COL);
	ck_assert_uint_eq(l[4].dir, MX_DIR_ROW);
	/* activations 2·s·b·h = 2·32·2·64 = 8192 B per block, 32768 in all */
	ck_assert_uint_eq(p->cap.acts, 32768);
	jitq_plan_free(p);
}
END_TEST

/* ---- capacity ----------------------------------------------------------------------------- */

START_TEST(test_capacity_small)
{
	struct jitq_config c = small_config();
	c.model.vocab = 100;
	struct jitq_plan *p = plan_ok(&c);
	const struct jitq_capacity *cap = &p->cap;

	/* params: 4 × 49152 = 196608 quantized + 100 · 64 = 6400 embedding = 203008 */
	ck_assert_uint_eq(cap->params_quant, 196608);
	ck_assert_uint_eq(cap->params, 203008);
	/* BF16 master 2 B, grads 2 B, Adam 8 B */
	ck_assert_uint_eq(cap->master, 406016);
	ck_assert_uint_eq(cap->grads, 406016);
	ck_assert_uint_eq(cap->optim, 1624064);
	/* activations (t 1): s·b·h·34 + 5·a·s²·b = 4096·34 + 5·4·1024·2 = 139264 + 40960 = 180224
	 * per block, 720896 for 4 */
	ck_assert_uint_eq(cap->acts, 720896);
	/* MX6 copies: 49152 elements · 12/16 = 36864 B per block per direction */
	ck_assert_uint_eq(p->tensors[JITQ_T_QKV].bytes[MX_DIR_ROW], 64 * 12 * 12);
	ck_assert_uint_eq(cap->lp_both, 4 * 2 * 36864);
	ck_assert_uint_eq(cap->lp_one, 4 * 36864);
	/* JIT-Q: lookahead 1, (1 + 1) blocks of one copy */
	ck_assert_uint_eq(cap->lp_jitq, 2 * 36864);
	/* base 406016 + 406016 + 1624064 + 720896 = 3156992 */
	ck_assert_uint_eq(cap->total_both, 3156992 + 294912);
	ck_assert_uint_eq(cap->total_one, 3156992 + 147456);
	ck_assert_uint_eq(cap->total_jitq, 3156992 + 73728);
	ck_assert_int_eq(cap->saved_vs_both, 221184);
	ck_assert_int_eq(cap->saved_vs_one, 73728);
	ck_rel(cap->pct_vs_both, 100.0 * 221184 / 3451904);
	ck_rel(cap->pct_vs_one, 100.0 * 73728 / 3304448);
	jitq_plan_free(p);

	/* FP32 master (4 B), optimizer over 4 shards, no activations:
	 * 203008·4 + 203008·2 + 203008·8/4 = 812032 + 406016 + 406016 = 1624064 */
	c.src = MX_SRC_FP32;
	c.fp.optim_shards = 4;
	c.fp.act = JITQ_ACT_NONE;
	p = plan_ok(&c);
	ck_assert_uint_eq(p->cap.master, 812032);
	ck_assert_uint_eq(p->cap.optim, 406016);
	ck_assert_uint_eq(p->cap.acts, 0);
	ck_assert_uint_eq(p->cap.total_jitq, 1624064 + 73728);
	jitq_plan_free(p);

	/* selective recomputation with t 2: s·b·h·(10 + 24/2) = 4096 · 22 = 90112 per block */
	c = small_config();
	c.model.tslice = 2;
	c.fp.act = JITQ_ACT_SELECTIVE;
	p = plan_ok(&c);
	ck_assert_uint_eq(p->cap.acts, 4 * 90112);
	jitq_plan_free(p);
}
END_TEST

START_TEST(test_mx_bytes)
{
	/* 16 elements per block: MX9 18 B, MX6 12 B, MX4 8 B; blocked dimension padded */
	ck_assert_uint_eq(jitq_mx_bytes(MX_FMT_MX9, 1, 16, MX_DIR_ROW), 18);
	ck_assert_uint_eq(jitq_mx_bytes(MX_FMT_MX6, 16, 1, MX_DIR_COL), 12);
	ck_assert_uint_eq(jitq_mx_bytes(MX_FMT_MX4, 32, 32, MX_DIR_ROW), 32 * 2 * 8);
	/* [20 × 33]: row 20 · ceil(33/16)=3 · 18 = 1080; col ceil(20/16)=2 · 33 · 18 = 1188 */
	ck_assert_uint_eq(jitq_mx_bytes(MX_FMT_MX9, 20, 33, MX_DIR_ROW), 1080);
	ck_assert_uint_eq(jitq_mx_bytes(MX_FMT_MX9, 20, 33, MX_DIR_COL), 1188);
}
END_TEST

START_TEST(test_linear_pim)
{
	struct jitq_linear_pim lp;
	jitq_linear_pim_init(&lp);

	/* 16 × 16 BF16 -> MX6 row: 256 · ((5 + (8 - 4)) · 4 ns + 28 ns / 32) / 10240
	 * = 256 · 36.875e-9 / 10240 = 9.21875e-10 s */
	ck_rel(jitq_linear_pim_time(&lp, 16, 16, MX_DIR_ROW, MX_FMT_MX6, MX_SRC_BF16), 9.21875e-10);
	/* col: 256 · (36 + 28/16) ns / 10240 = 9.4375e-10 */
	ck_rel(jitq_linear_pim_time(&lp, 16, 16, MX_DIR_COL, MX_FMT_MX6, MX_SRC_BF16), 9.4375e-10);
	/* FP32 -> MX4 row: 256 · ((5 + 22) · 4 + 0.875) ns / 10240 = 256 · 108.875e-9 / 10240 */
	ck_rel(jitq_linear_pim_time(&lp, 16, 16, MX_DIR_ROW, MX_FMT_MX4, MX_SRC_FP32),
	       256 * 108.875e-9 / 10240);
	/* padding: 1 × 17 row-blocked counts 1 × 32 elements */
	ck_rel(jitq_linear_pim_time(&lp, 1, 17, MX_DIR_ROW, MX_FMT_MX6, MX_SRC_BF16),
	       32 * 36.875e-9 / 10240);
	/* strided without the conditional shift: 3 commands per bit, 5 + 12 = 17 */
	lp.cmds_per_shift = 3;
	ck_rel(jitq_linear_pim_time(&lp, 16, 16, MX_DIR_ROW, MX_FMT_MX6, MX_SRC_BF16),
	       256 * (17 * 4e-9 + 0.875e-9) / 10240);
	ck_assert(isnan(jitq_linear_pim_time(&lp, 16, 16, 7, MX_FMT_MX6, MX_SRC_BF16)));
}
END_TEST

/* ---- presets, validation ------------------------------------------------------------------ */

START_TEST(test_presets)
{
	static const struct {
		const char *name;
		uint32_t layers, hidden, heads, seq, tslice;
	} want[] = {
		{ "bert-340M", 24, 1024, 16, 512, 1 },      { "gpt-2-1.5B", 48, 1600, 25, 1024, 1 },
		{ "mega-lm-8.3B", 72, 3072, 32, 1024, 8 },  { "t-nlg-17B", 78, 4256, 28, 1024, 4 },
		{ "gpt-3-175B", 96, 12288, 96, 2048, 8 },   { "future-1T", 128, 25600, 160, 2048, 8 },
	};
	struct jitq_model m;
	size_t i;

	for (i = 0; jitq_model_preset_name(i); i++) {
		ck_assert_uint_lt(i, ELEMENTSOF(want));
		ck_assert_str_eq(jitq_model_preset_name(i), want[i].name);
		ck_assert_int_eq(jitq_model_preset(want[i].name, &m), 0);
		ck_assert_str_eq(m.name, want[i].name);
		ck_assert_uint_eq(m.layers, want[i].layers);
		ck_assert_uint_eq(m.hidden, want[i].hidden);
		ck_assert_uint_eq(m.heads, want[i].heads);
		ck_assert_uint_eq(m.seq, want[i].seq);
		ck_assert_uint_eq(m.tslice, want[i].tslice);
		/* tokens per micro-batch: the slack floor's level for the two largest, twice it
		 * for the models JIT-Q names as having more (bert-340M, gpt-2-1.5B) */
		if (i >= 4)
			ck_assert_uint_eq(m.batch * m.seq, JITQ_PAPER_TOKENS);
		else if (i < 2)
			ck_assert_uint_eq(m.batch * m.seq, 2 * JITQ_PAPER_TOKENS);
		ck_assert_ptr_nonnull(m.source);
		ck_assert_int_eq(jitq_model_validate(&m, NULL), 0);

		/* every preset plans with the linear cost; 8 PIM queries whatever the size */
		struct jitq_config c;
		struct jitq_linear_pim lp;
		jitq_linear_pim_init(&lp);
		jitq_config_init(&c);
		c.model = m;
		c.pim.quant_time_s = jitq_linear_pim_time;
		c.pim.ctx = &lp;
		struct jitq_plan *p = plan_ok(&c);
		ck_assert_uint_eq(p->pim_queries, 8);
		ck_assert_double_gt(p->cap.pct_vs_both, p->cap.pct_vs_one);
		/* The pipeline split fits a real device, an 80 GiB A100 (Narayanan et al.'s), with
		 * both copies kept. */
		ck_assert_msg(p->cap.total_both <= 80ull << 30, "%s needs %.1f GiB per device",
			      m.name, p->cap.total_both / 1073741824.0);
		ck_assert_uint_eq(p->layers, (m.layers + m.pstages - 1) / m.pstages);
		jitq_plan_free(p);
	}
	ck_assert_uint_eq(i, ELEMENTSOF(want));
	/* lookup is case-insensitive; unknown names are -ENOENT */
	ck_assert_int_eq(jitq_model_preset("GPT-3-175b", &m), 0);
	ck_assert_uint_eq(m.hidden, 12288);
	ck_assert_int_eq(jitq_model_preset("gpt-4", &m), -ENOENT);
	/* GPT-3 params per device, 96 / 8 = 12 blocks: 12 · 12 · 12288² / 8 + ceil(50257 / 8) ·
	 * 12288 = 2717908992 + 6283 · 12288 = 2717908992 + 77205504 = 2795114496 */
	struct jitq_config c;
	struct jitq_linear_pim lp;
	jitq_linear_pim_init(&lp);
	jitq_config_init(&c);
	c.pim.quant_time_s = jitq_linear_pim_time;
	c.pim.ctx = &lp;
	struct jitq_plan *p = plan_ok(&c);
	ck_assert_uint_eq(p->cap.params, 2795114496ull);
	ck_assert_uint_eq(p->layers, 12);
	ck_assert_uint_eq(p->phase[JITQ_PHASE_FWD].n_launches, 12 * 4);
	jitq_plan_free(p);
}
END_TEST

/*
 * Pipeline stages, the settings by name and the paper footprint, small model by hand:
 * h 64, 4 layers over 2 stages -> 2 blocks per device; block params 12 · 64² = 49152, so
 * 98304 quantized parameters, no embedding. Paper footprint: 2 (BF16 master) + 2 + 3 = 7 B per
 * parameter = 688128 B, no activations. MX6 copies: 12 B per 16 elements, per direction
 * 49152 / 16 · 12 = 36864 B per block: both copies of 2 blocks 147456 B. JIT-Q holds
 * min(L + 1, 2) = 2 blocks of one direction per phase: 73728 B. Saved 147456 - 73728 = 73728
 * of 688128 + 147456 = 835584: 8.8235%.
 */
START_TEST(test_pipeline_settings_paper)
{
	struct jitq_config c = small_config();
	struct pim_error err = { 0 };

	c.model.pstages = 2;
	jitq_config_paper(&c);
	struct jitq_plan *p = plan_ok(&c);
	ck_assert_uint_eq(p->layers, 2);
	ck_assert_uint_eq(p->cap.params_quant, 98304);
	ck_assert_uint_eq(p->cap.master + p->cap.grads + p->cap.optim, 688128);
	ck_assert_uint_eq(p->cap.acts, 0);
	ck_assert_uint_eq(p->cap.lp_both, 147456);
	ck_assert_uint_eq(p->cap.lp_jitq, 73728);
	ck_assert_double_eq_tol(p->cap.pct_vs_both, 100.0 * 73728 / 835584, 1e-9);
	ck_assert_uint_eq(p->phase[JITQ_PHASE_BWD].n_launches, 2 * 4);
	jitq_plan_free(p);

	ck_assert_int_eq(jitq_config_set(&c, "optim_bytes", "12", &err), 0);
	ck_assert_uint_eq(c.fp.optim_bytes, 12);
	ck_assert_int_eq(jitq_config_set(&c, "optim_shards", "0", &err), -EINVAL);
	ck_assert_str_eq(err.msg, "optim_shards \"0\" must be an integer between 1 and 1048576");
	ck_assert_int_eq(jitq_config_set(&c, "activations", "selective", &err), 0);
	ck_assert_int_eq(c.fp.act, JITQ_ACT_SELECTIVE);
	ck_assert_int_eq(jitq_config_set(&c, "activations", "some", &err), -EINVAL);
	ck_assert_int_eq(jitq_config_set(&c, "layout", "out-in", &err), 0);
	ck_assert_int_eq(c.layout, JITQ_LAYOUT_OUT_IN);
	ck_assert_int_eq(jitq_config_set(&c, "bus_share", "0.25", &err), 0);
	ck_assert_double_eq(c.bus_share, 0.25);
	ck_assert_int_eq(jitq_config_set(&c, "mem_share", "1.5", &err), -EINVAL);
	ck_assert_str_eq(err.msg, "mem_share \"1.5\" must be a number between 0 and 1");
	ck_assert_int_eq(jitq_config_set(&c, "head_start", "nan", &err), -EINVAL);
	ck_assert_int_eq(jitq_config_set(&c, "tCK", "1.0", &err), -ENOENT);
	ck_assert_str_eq(jitq_act_name(JITQ_ACT_NONE), "none");
	ck_assert_str_eq(jitq_layout_name(JITQ_LAYOUT_IN_OUT), "in-out");
}
END_TEST

START_TEST(test_invalid)
{
	struct jitq_config c;
	struct pim_error err = { 0 };

	c = small_config();
	c.model.hidden = 0;
	plan_fails(&c, -EINVAL, "model.hidden = 0 is out of range");
	c = small_config();
	c.model.layers = JITQ_MAX_LAYERS + 1;
	plan_fails(&c, -EINVAL, "model.layers = 4097");
	c = small_config();
	c.model.hidden = 100;
	c.model.heads = 3;
	plan_fails(&c, -EINVAL, "model.hidden = 100 is not a multiple of model.heads = 3");
	c = small_config();
	c.model.tslice = 3;
	plan_fails(&c, -EINVAL, "model.heads = 4 is not a multiple of model.tslice = 3");
	c = small_config();
	c.model.seq = 0;
	plan_fails(&c, -EINVAL, "model.seq = 0");
	c = small_config();
	c.model.batch = JITQ_MAX_BATCH + 1;
	plan_fails(&c, -EINVAL, "model.batch");
	c = small_config();
	c.model.vocab = JITQ_MAX_VOCAB + 1;
	plan_fails(&c, -EINVAL, "model.vocab");
	c = small_config();
	c.pim.quant_time_s = NULL;
	plan_fails(&c, -EINVAL, "pim.quant_time_s is NULL");
	c = small_config();
	c.pim.channels = 0;
	plan_fails(&c, -EINVAL, "pim.channels = 0");
	c = small_config();
	c.accel.efficiency = 1.5;
	plan_fails(&c, -EINVAL, "accel.efficiency = 1.5 is out of range (0, 1]");
	c = small_config();
	c.accel.peak_flops = NAN;
	plan_fails(&c, -EINVAL, "accel.peak_flops");
	c = small_config();
	c.max_lookahead = 0;
	plan_fails(&c, -EINVAL, "max_lookahead = 0");
	c = small_config();
	c.max_lookahead = JITQ_MAX_LOOKAHEAD + 1;
	plan_fails(&c, -EINVAL, "max_lookahead = 17");
	c = small_config();
	c.bus_share = -0.1;
	plan_fails(&c, -EINVAL, "bus_share");
	c = small_config();
	c.fmt = (enum mx_format)9;
	plan_fails(&c, -EINVAL, "fmt = 9");
	c = small_config();
	c.src = (enum mx_src)9;
	plan_fails(&c, -EINVAL, "src = 9");
	c = small_config();
	c.fp.optim_shards = 0;
	plan_fails(&c, -EINVAL, "fp.optim_shards = 0");

	static const double t4[4] = { 1, 1, -1, 1 }, t3[3] = { 1, 1, 1 };
	c = small_config();
	c.accel.fwd_s = t3;
	plan_fails(&c, -EINVAL, "give both measured arrays or neither");
	c.accel.bwd_s = t3;
	c.accel.n_times = 3;
	plan_fails(&c, -EINVAL, "accel.n_times = 3 does not match the 4 blocks of a device");
	c.accel.fwd_s = t4;
	c.accel.bwd_s = t4;
	c.accel.n_times = 4;
	plan_fails(&c, -EINVAL, "accel.fwd_s[2] = -1");

	/* a PIM model answering NaN or 0 is refused, naming the tensor */
	c = small_config();
	tcost.ret = NAN;
	plan_fails(&c, -ERANGE, "PIM cost of qkv [64 x 192] row-blocked bf16->mx6 is nan");
	c = small_config();
	tcost.ret = -1;
	plan_fails(&c, -ERANGE, "must be finite, > 0");

	/* activation bytes beyond 64 bits: 5·a·s²·b = 5 · 2^18 · 2^40 · 2^16 */
	c = small_config();
	c.model.layers = 1;
	c.model.hidden = JITQ_MAX_HIDDEN;
	c.model.heads = JITQ_MAX_HIDDEN;
	c.model.seq = JITQ_MAX_SEQ;
	c.model.batch = JITQ_MAX_BATCH;
	tcost.k[0] = tcost.k[1] = 1e-12;
	plan_fails(&c, -EOVERFLOW, "activation footprint overflows 64 bits");
	c = small_config();
	c.model.pstages = c.model.layers + 1;
	plan_fails(&c, -EINVAL, "model.pstages = 5 is out of range [1, 4]");

	ck_assert_int_eq(jitq_plan(NULL, NULL, &err), -EINVAL);
	ck_assert_int_eq(jitq_model_validate(NULL, &err), -EINVAL);
}
END_TEST

/* ---- cost: distinct shapes, not parameters ------------------------------------------------ */

START_TEST(test_distinct_shapes_and_1t_time)
{
	struct jitq_config c = small_config();
	struct jitq_plan *p = plan_ok(&c);
	ck_assert_uint_eq(tcost.calls, 8);
	ck_assert_uint_eq(p->pim_queries, 8);
	jitq_plan_free(p);

	/* future-1T: 128 layers, still 8 queries; the plan must take well under a second (the
	 * bound is generous for a loaded 2-core machine; bench_jitq prints the real figure) */
	c = small_config();
	ck_assert_int_eq(jitq_model_preset("future-1T", &c.model), 0);
	c.model.pstages = 1; /* all 128 blocks on the device planned */
	tcost.k[0] = tcost.k[1] = 1e-12;
	uint64_t t0 = now_ns();
	p = plan_ok(&c);
	uint64_t dt = now_ns() - t0;
	ck_assert_msg(dt < 500000000ull, "future-1T plan took %llu ns", (unsigned long long)dt);
	ck_assert_uint_eq(tcost.calls, 8);
	ck_assert_uint_eq(p->phase[JITQ_PHASE_FWD].n_launches, 128 * 4);
	jitq_plan_free(p);

	/* the largest model the limits allow in layers (4096) is still fast */
	c.model.layers = JITQ_MAX_LAYERS;
	t0 = now_ns();
	p = plan_ok(&c);
	dt = now_ns() - t0;
	ck_assert_msg(dt < 500000000ull, "4096-layer plan took %llu ns", (unsigned long long)dt);
	jitq_plan_free(p);
}
END_TEST

/* ---- launches_at and format --------------------------------------------------------------- */

START_TEST(test_launches_at_edges)
{
	struct jitq_config c = small_config();
	struct jitq_plan *p = plan_ok(&c);
	size_t n = 99;

	ck_assert_ptr_null(jitq_launches_at(p, JITQ_PHASE_FWD, -2, &n));
	ck_assert_uint_eq(n, 0);
	n = 99;
	ck_assert_ptr_null(jitq_launches_at(p, JITQ_PHASE_FWD, 4, &n));
	ck_assert_uint_eq(n, 0);
	ck_assert_ptr_null(jitq_launches_at(p, JITQ_PHASE_COUNT, 0, &n));
	ck_assert_ptr_null(jitq_launches_at(NULL, JITQ_PHASE_FWD, 0, &n));
	/* i+1 forward: prologue -> block 0, block b -> block b+1, block 3 -> none */
	size_t total = 0;
	for (int32_t b = JITQ_PROLOGUE; b < 4; b++) {
		const struct jitq_launch *l = jitq_launches_at(p, JITQ_PHASE_FWD, b, &n);
		total += n;
		if (b == 3) {
			ck_assert_uint_eq(n, 0);
			continue;
		}
		ck_assert_uint_eq(n, 4);
		for (size_t i = 0; i < n; i++) {
			ck_assert_uint_eq(l[i].block, (uint32_t)(b + 1));
			ck_assert_int_eq(l[i].boundary, b);
			ck_assert_uint_eq(l[i].phase, JITQ_PHASE_FWD);
			ck_assert_uint_eq(l[i].tensor, i);
		}
	}
	ck_assert_uint_eq(total, p->phase[JITQ_PHASE_FWD].n_launches);
	jitq_plan_free(p);
}
END_TEST

START_TEST(test_format)
{
	struct jitq_config c = small_config();
	struct jitq_plan *p = plan_ok(&c);
	char small[16];
	size_t need = jitq_plan_format(p, true, NULL, 0);
	char *buf = malloc(need + 1);

	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(jitq_plan_format(p, true, buf, need + 1), need);
	ck_assert_uint_eq(strlen(buf), need);
	ck_has(buf, "model small: 4 layers, hidden 64");
	ck_has(buf, "quantize bf16 -> mx6");
	ck_has(buf, "forward : lookahead i+1");
	ck_has(buf, "master weights bf16 (2 B/param), gradients 2 B/param, optimizer 8 B/param");
	ck_has(buf, "Korthikanti");
	ck_has(buf, "bus share 0.5");
	ck_has(buf, "at prologue    -> block 0     qkv       col [64 x 192] ch 0-15");
	ck_has(buf, "at block 3     -> block 2     qkv       row");
	/* truncation keeps snprintf semantics */
	ck_assert_uint_eq(jitq_plan_format(p, true, small, sizeof small), need);
	ck_assert_uint_eq(strlen(small), sizeof small - 1);
	free(buf);
	jitq_plan_free(p);

	/* a PIM-bound phase says so */
	static const double fwd[4] = { 4, 4, 4, 4 }, bwd[4] = { 8, 8, 8, 8 };
	c = small_config();
	c.accel.fwd_s = fwd;
	c.accel.bwd_s = bwd;
	c.accel.n_times = 4;
	p = plan_ok(&c);
	char text[8192];
	jitq_plan_format(p, false, text, sizeof text);
	ck_has(text, "PIM-bound: no lookahead up to i+4 hides the quantization (8000 ms exposed)");
	ck_has(text, "accelerator: measured per-block times");
	jitq_plan_free(p);
}
END_TEST

START_TEST(test_names)
{
	enum mx_src s;
	ck_assert_str_eq(jitq_phase_name(JITQ_PHASE_BWD), "backward");
	ck_assert_str_eq(jitq_tensor_name(JITQ_T_MLP_DOWN), "mlp-down");
	ck_assert_str_eq(jitq_dir_name(MX_DIR_COL), "col");
	ck_assert_str_eq(jitq_fmt_name(MX_FMT_MX4), "mx4");
	ck_assert_int_eq(jitq_src_from_name("FP32", &s), 0);
	ck_assert_int_eq(s, MX_SRC_FP32);
	ck_assert_int_eq(jitq_src_from_name("fp16", &s), -EINVAL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("jitq");
	TCase *tc;

	tc = test_case(s, "times");
	tcase_add_test(tc, test_flops_and_times);
	tcase_add_test(tc, test_speedup_per_format);
	tcase_add_test(tc, test_measured_times);
	tc = test_case(s, "lookahead");
	tcase_add_test(tc, test_slack_lookahead_i1);
	tcase_add_test(tc, test_slack_lookahead_i2);
	tcase_add_test(tc, test_pim_bound);
	tcase_add_test(tc, test_recompute_both_copies);
	tc = test_case(s, "capacity");
	tcase_add_test(tc, test_capacity_small);
	tcase_add_test(tc, test_mx_bytes);
	tcase_add_test(tc, test_linear_pim);
	tc = test_case(s, "inputs");
	tcase_add_test(tc, test_presets);
	tcase_add_test(tc, test_invalid);
	tcase_add_test(tc, test_pipeline_settings_paper);
	tcase_add_test(tc, test_names);
	tc = test_case(s, "cost");
	tcase_add_test(tc, test_distinct_shapes_and_1t_time);
	tc = test_case(s, "lookup");
	tcase_add_test(tc, test_launches_at_edges);
	tcase_add_test(tc, test_format);
	return test_run_suite(s);
}
