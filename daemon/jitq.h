/* SPDX-License-Identifier: MIT */
/*
 * jitq.h: the JIT-Q scheduler (doc/design.md §5.3; Ibrahim et al., "JIT-Q: Just-in-time Quantization
 * with Processing-In-Memory for Efficient ML Training", MLSys 2024, arXiv 2311.05034).
 *
 * Mixed-precision MX training keeps a high-precision master copy of every weight plus two
 * low-precision copies (row- and column-blocked, JIT-Q §2.2, Fig. 4).  JIT-Q keeps only the
 * master copy and has PIM produce the copy a transformer block needs while the accelerator
 * computes an earlier block.  jitq_plan() answers, for one model on one accelerator:
 *   - per phase (forward, backward) and block: the accelerator time, the PIM time of the block's
 *     copies, the slack ratio, and the launches (tensor, direction, slice, channels, boundary);
 *   - the lookahead per phase (i+1, else i+2, ...), chosen by simulating the PIM as one FIFO
 *     server next to the accelerator (see "Lookahead" below);
 *   - the capacity saved against keeping both low-precision copies and against keeping one,
 *     with every footprint assumption in struct jitq_footprint;
 *   - a throughput-loss estimate (exposed quantization + interference, see jitq_config).
 *
 * Pure: no I/O, no logging, no global state.  Cost is O(layers × max_lookahead) plus one PIM
 * cost query per distinct (tensor shape, direction): at most 8, whatever the parameter count.
 *
 * Weight layout and directions.  With JITQ_LAYOUT_IN_OUT (default; the [h × 3h] notation of
 * Megatron-LM) a weight W is [in × out] and Y = X·W: the forward GEMM reduces over W's rows, so
 * it needs W blocked down columns (MX_DIR_COL); the backward data-gradient GEMM dX = dY·Wᵀ
 * reduces over W's columns, so it needs W blocked along rows (MX_DIR_ROW); the weight-gradient
 * GEMM dW = Xᵀ·dY does not read W (JIT-Q §2.2: "quantized along the reduction dimension").
 * JITQ_LAYOUT_OUT_IN (PyTorch nn.Linear, [out × in]) transposes shapes and swaps directions.
 * With full activation recomputation the backward phase re-runs the block's forward first, so it
 * needs both copies.
 *
 * Tensor slicing (Shoeybi et al. 2019, Megatron-LM §3): QKV and MLP-up are column-parallel
 * (output dimension split by t), attention-out and MLP-down row-parallel (input dimension split).
 * Each device quantizes its own slice; the slice is interleaved over all PIM pseudo-channels of
 * the device (JIT-Q §4.2, last paragraph), so every launch covers channels [0, channels).
 */
#ifndef PIMD_JITQ_H
#define PIMD_JITQ_H

#include <stdbool.h>
#include <stdint.h>

#include "mx.h"
#include "util.h"

/* Limits on every size a caller controls. */
#define JITQ_MAX_LAYERS 4096u
#define JITQ_MAX_HIDDEN 262144u /* 10x future-1T's 25600 */
#define JITQ_MAX_SEQ 1048576u
#define JITQ_MAX_BATCH 65536u
#define JITQ_MAX_TSLICE 4096u
#define JITQ_MAX_VOCAB 16777216u
#define JITQ_MAX_LOOKAHEAD 16u
#define JITQ_MAX_CHANNELS 65536u
#define JITQ_NAME_MAX 32

/* Boundary value of the phase prologue (before the phase's first block starts). */
#define JITQ_PROLOGUE (-1)

enum jitq_phase { JITQ_PHASE_FWD, JITQ_PHASE_BWD, JITQ_PHASE_COUNT };

/* The four weight matrices of a transformer block. */
enum jitq_tensor { JITQ_T_QKV, JITQ_T_ATTN_OUT, JITQ_T_MLP_UP, JITQ_T_MLP_DOWN, JITQ_T_COUNT };

enum jitq_layout {
	JITQ_LAYOUT_IN_OUT, /* W is [in × out], Y = X·W (default) */
	JITQ_LAYOUT_OUT_IN, /* W is [out × in], Y = X·Wᵀ (PyTorch nn.Linear) */
};

/* Which activations are kept for the backward phase (Korthikanti et al. 2022, MLSys 2023,
 * "Reducing Activation Recomputation in Large Transformer Models", §4, 16-bit activations). */
enum jitq_act {
	JITQ_ACT_FULL,      /* everything: s·b·h·(10 + 24/t + 5·a·s/(h·t)) bytes per block */
	JITQ_ACT_SELECTIVE, /* attention scores recomputed: s·b·h·(10 + 24/t) */
	JITQ_ACT_RECOMPUTE, /* block input only, 2·s·b·h; backward re-runs the forward (3x FLOPs,
			       both weight copies needed in the backward phase) */
	JITQ_ACT_NONE,      /* activations left out of the footprint */
};

struct jitq_model {
	char name[JITQ_NAME_MAX];
	uint32_t layers; /* transformer blocks */
	uint32_t hidden; /* h */
	uint32_t heads;  /* a */
	uint32_t seq;    /* s */
	uint32_t batch;  /* b: micro-batch per accelerator (one forward/backward pass) */
	uint32_t tslice; /* t: tensor-slicing degree */
	uint32_t pstages; /* p: pipeline stages; a device holds ceil(layers / p) blocks (the first
			     stage, with the embedding, is the one planned); 0 is taken as 1 */
	uint32_t vocab;  /* embedding rows (high precision, never JIT-quantized); 0: not counted */
	const char *source; /* citation of shape and defaults (static string); NULL for custom */
};

/*
 * The level of the slack: tokens per micro-batch (b·s) of the presets with the fewest, gpt-3-175B
 * and future-1T (micro-batch 2 at sequence 2048).  JIT-Q §5.2 puts all variation of the slack
 * across its models on sequence length and batch ("increasing SL or B ... increases the input
 * tensor size, but does not impact weight tensors"): per block the GEMM FLOPs and the weights to
 * quantize both scale with h²/t, so slack ∝ b·s, and the paper's "at least" figures are those of
 * its models with the fewest tokens.  Its BF16 -> MX9 floor, 3.7x, is the one figure no format
 * assumption enters (MX9 runs at the BF16 rate, accel.speedup): micro-batch 1 (2048 tokens) puts
 * it at half that, 4096 tokens meets it.  This one figure sets the level; the other five slack
 * figures (MX6, MX4; FP32 MX9, MX6, MX4) follow from it and the format ratios.
 */
#define JITQ_PAPER_TOKENS 4096u

/* Fills out with a preset ("bert-340M", "gpt-2-1.5B", "mega-lm-8.3B", "t-nlg-17B",
 * "gpt-3-175B", "future-1T"; case-insensitive).  0 or -ENOENT. */
int jitq_model_preset(const char *name, struct jitq_model *out);
/* Preset names in order; NULL past the end. */
const char *jitq_model_preset_name(size_t i);
/* 0, or -EINVAL with a message naming the field ("model.hidden = ..."). */
int jitq_model_validate(const struct jitq_model *m, struct pim_error *err);
/* Blocks on one device: ceil(layers / pstages). */
uint32_t jitq_local_layers(const struct jitq_model *m);

/*
 * Accelerator.  Without measured times a block's forward time is
 *   F_fwd / (peak_flops · efficiency · speedup[fmt]),  F_fwd = (24·b·s·h² + 4·b·s²·h) / t
 * and backward is 2·F_fwd (3·F_fwd with JITQ_ACT_RECOMPUTE).  With measured times (per block,
 * in layer order, seconds, both arrays of `layers` entries) those are used instead.
 *
 * Throughput per format.  The GEMMs of a block run in the MX target format, and JIT-Q (§1)
 * names "higher throughput compute" as what low-precision formats buy; its slack figures
 * (BF16 source: MX9 3.7, MX6 2.4, MX4 1.6 = 9 : 6 : 4 within 3%; FP32: MX6 0.76, MX4 0.51 =
 * 6 : 4) are those of an accelerator whose time per GEMM is proportional to the format's bits
 * per element while the PIM time hardly depends on the format.  speedup[f] states that
 * throughput as a multiple of the BF16 rate peak_flops · efficiency.  Default (the paper's
 * ratios): MX9 runs at the BF16 rate (its elements carry BF16's sign and 7 mantissa bits, the
 * 8-bit exponent moves into the block's shared scale, so an MX9 product needs the BF16
 * multiplier), MX6 at 9/6 = 1.5x and MX4 at 9/4 = 2.25x: time per GEMM 9 : 6 : 4.
 */
#define JITQ_SPEEDUP_MAX 64.0
struct jitq_accel {
	double peak_flops; /* FLOP/s; default 312e12 (A100 BF16 dense, NVIDIA A100 datasheet) */
	double efficiency; /* default 0.52 (163 of 312 TFLOP/s per GPU for the 1T model,
			      Narayanan et al. SC'21 "Efficient Large-Scale Language Model Training
			      on GPU Clusters Using Megatron-LM") */
	double speedup[3]; /* [enum mx_format]: GEMM throughput in the format / the BF16 rate,
			      (0, JITQ_SPEEDUP_MAX]; default 1, 1.5, 2.25 (time 9 : 6 : 4) */
	const double *fwd_s; /* measured forward time per block, or NULL */
	const double *bwd_s; /* measured backward time per block, or NULL (both or neither) */
	size_t n_times;      /* entries in each array (must equal the device's blocks,
				jitq_local_layers()) */
};

/*
 * PIM quantization cost of one weight slice (rows × cols as stored, blocked along dir, from src
 * into fmt), in seconds; must be finite and >= 0.  The daemon plugs in pimsim's estimate for the
 * chosen mapping; tests and the bench use jitq_linear_pim_time().
 */
typedef double (*jitq_quant_time_fn)(void *ctx, uint64_t rows, uint64_t cols, enum mx_dir dir,
				     enum mx_format fmt, enum mx_src src);

struct jitq_pim_cost {
	jitq_quant_time_fn quant_time_s;
	void *ctx;
	uint32_t channels; /* PIM pseudo-channels a launch spans (default 80: 5 HBM-PIM stacks ×
			      16 pCH, Lee et al. ISCA 2021 organisation) */
};

/*
 * Training footprint per device.  Master weights are the high-precision source format
 * (config.src: BF16 2 B or FP32 4 B per parameter).  Parameters are the local slices of the
 * block weights (12·h²/t per block) plus the embedding (vocab·h/t, Megatron vocab-parallel);
 * biases and layer norms (O(h) per block) are left out.
 */
struct jitq_footprint {
	uint32_t grad_bytes;  /* per parameter; default 2 (BF16 gradients) */
	uint32_t optim_bytes; /* per parameter; default 8 (Adam m and v in FP32: Kingma & Ba 2015;
				 the 12-byte "K" of ZeRO, Rajbhandari et al. 2020, less the FP32
				 master, which is counted as the master copy here) */
	uint32_t optim_shards; /* optimizer state partitioned over this many data-parallel ranks
				  (ZeRO stage 1, Rajbhandari et al. 2020); default 1 (unsharded) */
	enum jitq_act act;    /* default JITQ_ACT_FULL */
};

struct jitq_config {
	struct jitq_model model;
	struct jitq_accel accel;
	struct jitq_pim_cost pim;
	struct jitq_footprint fp;
	enum mx_src src;    /* high-precision master format; default BF16 */
	enum mx_format fmt; /* MX target; default MX6 */
	enum jitq_layout layout;
	uint32_t max_lookahead;   /* 1..JITQ_MAX_LOOKAHEAD; default 4 */
	/* PIM time available before a phase's first block, in units of that block's accelerator
	 * time (the LM head and loss before backward, the embedding before forward); default 1. */
	double head_start_blocks;
	/*
	 * Interference: while a quantization runs, PIM commands take a share of the memory command
	 * bus (bus_share) and the accelerator's memory-bound share of time (mem_share) slows by
	 * that much; the compute-bound part is unaffected.  Loss during overlap = bus_share ·
	 * mem_share.  Defaults 0.5 (PIM command rate "typically 2x lower than baseline",
	 * AMDGeniePIM cost template) and 0.1 (assumption: GEMM-dominated blocks, element-wise and
	 * normalisation kernels ~10% of block time).  JIT-Q §5 reports the resulting loss (1.6%
	 * average, up to 2.4% in the abstract), not these inputs.
	 */
	double bus_share;
	double mem_share;
};

/* The default accel.speedup: time per GEMM proportional to the format's bits per element,
 * MX9 : MX6 : MX4 = 9 : 6 : 4, MX9 at the BF16 rate (1, 1.5, 2.25). */
void jitq_accel_speedup_bits(double speedup[3]);

/* Defaults above, with a NULL PIM cost (the caller must set pim.quant_time_s) and model
 * gpt-3-175B. */
void jitq_config_init(struct jitq_config *c);

/*
 * The scheduler's part of the paper configuration (the PIM part is pimsim_params_paper()):
 * the footprint the JIT-Q paper's capacity figures imply.  All six of its capacity figures
 * (MX4/MX6/MX9, both copies and one copy, "up to") equal copies / (7 B/param + copies) with
 * activations left out: master BF16 2 B + gradients 2 B + optimizer 3 B per parameter,
 * activations JITQ_ACT_NONE.  Everything else keeps the defaults above.
 */
void jitq_config_paper(struct jitq_config *c);

/*
 * Sets one scheduler assumption by name: grad_bytes, optim_bytes, optim_shards (integers),
 * activations (full|selective|recompute|none), layout (in-out|out-in), bus_share, mem_share
 * (0 to 1), head_start (blocks, 0 to 1e6), lookahead (1 to JITQ_MAX_LOOKAHEAD), speedup_mx9,
 * speedup_mx6, speedup_mx4 (accel.speedup, more than 0 to JITQ_SPEEDUP_MAX).  0; -ENOENT for
 * a key that is not the scheduler's (err untouched); -EINVAL with err for a bad value.
 */
int jitq_config_set(struct jitq_config *c, const char *key, const char *value,
		    struct pim_error *err);

/* "full", "selective", "recompute", "none" and "in-out", "out-in"; 0 or -EINVAL. */
const char *jitq_act_name(enum jitq_act a);
int jitq_act_from_name(const char *s, enum jitq_act *out);
const char *jitq_layout_name(enum jitq_layout l);
int jitq_layout_from_name(const char *s, enum jitq_layout *out);

/*
 * Linear PIM cost for tests and for the bench until pimsim is joined (NOT pimsim's model).
 * Per element, with the blocked dimension padded to a multiple of 16:
 *   t = [ (fixed_cmds + cmds_per_shift · (p − m)) · t_cmd_s + t_act_s / words_per_act[dir] ]
 *       / lanes
 * p = 8 (BF16 significand with hidden bit) or 24 (FP32), m = 7/4/2 (MX9/6/4): the block
 * maximum is shifted right by p − m bits (JIT-Q §5: shifts grow with the input mantissa).
 * Defaults: fixed_cmds 5 (MOV in, MAX, CMP, ADD round, MOV out), cmds_per_shift 1 (strided-opt
 * conditional shift; 3 = CMP+bitSHIFT+ADD without it, JIT-Q §4.1), t_cmd_s 4 ns (tCCD_L = 4 tCK
 * at 1 GHz, PIMSimulator HBM2 2 Gbps), t_act_s 28 ns (tRP + tRCD = 14 + 14 tCK), words_per_act
 * row 32 (1 KiB row / 32 B word), col 16 (assumption: column blocking of a row-major tile opens
 * each row twice, JIT-Q §5 attributes its slower column quantization to extra activations),
 * lanes 10240 (5 stacks × 128 PIM units × 16 lanes, Lee et al. 2021).
 */
struct jitq_linear_pim {
	double t_cmd_s;
	double t_act_s;
	double lanes;
	double fixed_cmds;
	double cmds_per_shift;
	double words_per_act[2]; /* [MX_DIR_ROW], [MX_DIR_COL] */
};
void jitq_linear_pim_init(struct jitq_linear_pim *lp);
/* ctx is a struct jitq_linear_pim *. */
double jitq_linear_pim_time(void *ctx, uint64_t rows, uint64_t cols, enum mx_dir dir,
			    enum mx_format fmt, enum mx_src src);

/* One quantization to launch. */
struct jitq_launch {
	uint32_t block;     /* the block whose weights this produces (layer index) */
	int32_t boundary;   /* launched when block `boundary` starts; JITQ_PROLOGUE: before the
			       phase's first block */
	uint8_t phase;      /* enum jitq_phase */
	uint8_t tensor;     /* enum jitq_tensor */
	uint8_t dir;        /* enum mx_dir */
	uint8_t split_rows; /* 1: slice splits rows (row-parallel), 0: columns */
	uint32_t rows, cols; /* local slice as stored */
	uint32_t chan_first, chan_count;
	uint64_t bytes;     /* packed MX output */
	double pim_s;       /* PIM time of this launch */
};

/* Per block and phase (indexed by layer). */
struct jitq_block {
	double accel_s;  /* accelerator time of this block in this phase */
	double pim_s;    /* PIM time of the copies this block needs in this phase */
	double slack;    /* accel_s / PIM time of the next-processed block's copies (the i+1 window);
			    for the phase's last block accel_s / pim_s */
	double window_s; /* accelerator time from the launch boundary to the block's start (sum of
			    `lookahead` blocks; the head start for prologue launches) */
	double launch_s, ready_s, start_s; /* timeline: launch, PIM done, block starts (phase t=0
					       at the first block's no-stall start) */
	double stall_s;  /* accelerator wait for this block's copies */
};

struct jitq_phase_plan {
	uint32_t lookahead;   /* chosen L: block j's copies launch at the start of block j − L */
	uint32_t dir_mask;    /* bit d set: direction d is quantized in this phase */
	double accel_s;       /* sum of block accelerator times (no stalls) */
	double pim_s;         /* sum of PIM time */
	double stall_s;       /* exposed quantization with the chosen L */
	bool pim_bound;       /* stall_s > 0: the PIM cannot keep up and no lookahead up to
				 max_lookahead hides it (the plan reports it, it does not fit it) */
	double stall_by_l[JITQ_MAX_LOOKAHEAD + 1]; /* [L]: stall for each candidate L (1..max) */
	double overlap_s;     /* PIM time overlapping accelerator compute */
	double slack_min, slack_median;
	uint64_t resident_bytes; /* peak low-precision bytes held: (L + 1) blocks' copies */
	struct jitq_block *blocks;    /* [layers] */
	struct jitq_launch *launches; /* sorted by boundary slot (prologue, block 0, 1, ...) */
	size_t n_launches;
	uint32_t *first; /* [layers + 2]: launches at boundary b are [first[b+1], first[b+2]) */
};

/* A distinct tensor shape of every block (local slice). */
struct jitq_tensor_info {
	uint32_t rows, cols;
	uint8_t split_rows;
	uint64_t params;
	uint64_t bytes[2];  /* packed MX bytes blocked [MX_DIR_ROW], [MX_DIR_COL] */
	double pim_s[2];    /* PIM time by direction */
};

/* Capacity per device, bytes. */
struct jitq_capacity {
	uint64_t params;        /* block weights + embedding (local) */
	uint64_t params_quant;  /* block weights (the JIT-quantized ones) */
	uint64_t master, grads, optim, acts;
	uint64_t lp_both;       /* both low-precision copies of every block */
	uint64_t lp_one;        /* one copy (the larger direction) */
	uint64_t lp_jitq;       /* JIT-Q peak transient copies (max over phases) */
	uint64_t total_both, total_one, total_jitq;
	int64_t saved_vs_both, saved_vs_one; /* total_both/one − total_jitq (negative if JIT-Q's
						peak transient copies outweigh one resident copy) */
	double pct_vs_both, pct_vs_one;      /* saved / baseline total, percent */
};

struct jitq_plan {
	struct jitq_config cfg; /* copy; accel.fwd_s/bwd_s are NULL (times are in blocks[]);
				   pim.ctx is the caller's and is never called through again */
	uint32_t layers;        /* blocks on this device: jitq_local_layers(&cfg.model); every
				   per-block array and boundary below counts these */
	double flops_fwd;       /* per block, local (analytic; 0 with measured times) */
	double flops_bwd;
	struct jitq_tensor_info tensors[JITQ_T_COUNT];
	unsigned pim_queries;   /* calls made to the PIM cost function */
	struct jitq_phase_plan phase[JITQ_PHASE_COUNT];
	struct jitq_capacity cap;
	double loss;              /* throughput loss fraction: (stall + interference) / accel time */
	double loss_stall;        /* of which exposed quantization */
	double loss_interference; /* of which overlap · bus_share · mem_share */
};

/* Plans; 0 with *out set, or -EINVAL/-EOVERFLOW/-ENOMEM/-ERANGE with err naming the cause. */
int jitq_plan(const struct jitq_config *cfg, struct jitq_plan **out, struct pim_error *err);
void jitq_plan_free(struct jitq_plan *p);
static inline void jitq_plan_freep(struct jitq_plan **p) { jitq_plan_free(*p); }

/*
 * The launches a runtime issues when block `boundary` starts (or JITQ_PROLOGUE) in `phase`:
 * a pointer into the plan and the count in *n; NULL with *n = 0 when there are none or the
 * arguments are out of range.  An array lookup: no allocation, no system call.
 */
const struct jitq_launch *jitq_launches_at(const struct jitq_plan *p, enum jitq_phase phase,
					   int32_t boundary, size_t *n);

/* Names for printing: "forward"/"backward", "qkv"/"attn-out"/"mlp-up"/"mlp-down",
 * "row"/"col", "bf16"/"fp32", "mx9"/"mx6"/"mx4". */
const char *jitq_phase_name(enum jitq_phase ph);
const char *jitq_tensor_name(enum jitq_tensor t);
const char *jitq_dir_name(enum mx_dir d);
const char *jitq_src_name(enum mx_src s);
const char *jitq_fmt_name(enum mx_format f);
/* "bf16"/"fp32", case-insensitive; 0 or -EINVAL. */
int jitq_src_from_name(const char *s, enum mx_src *out);
/* MX packed bytes of a rows × cols slice blocked along dir (blocked dimension padded to 16). */
uint64_t jitq_mx_bytes(enum mx_format f, uint64_t rows, uint64_t cols, enum mx_dir dir);

/*
 * Human-readable plan: model, formats, per-phase summary, capacity, loss, every assumption, and
 * with per_block the launches of each boundary.  snprintf semantics: returns the length the full
 * text needs (excluding the NUL); writes at most len bytes, NUL-terminated when len > 0.
 */
size_t jitq_plan_format(const struct jitq_plan *p, bool per_block, char *buf, size_t len);

#endif
