/* SPDX-License-Identifier: MIT */
/*
 * pimsim.h: functional and timing model of MX quantization on HBM-PIM (doc/design.md §5.2; JIT-Q,
 * Ibrahim et al. MLSys 2024, §4; HBM-PIM/FIMDRAM, Lee et al. ISCA 2021).
 *
 * What is modelled
 *   Organisation. stacks x pseudo-channels (pCH) x banks; one PIM unit per bank pair
 *   (even bank 2u, odd bank 2u+1), so 8 units per 16-bank pCH. A DRAM word is one column
 *   access of 32 bytes (256 bits); a row holds row_bytes / 32 words; each bank has one row
 *   buffer. Every PIM command is broadcast to all units of a pCH (all-bank PIM mode), and the
 *   pCHs run the same command stream in parallel on different tiles, so the time of a
 *   tensor is the time of the pCH with the most work.
 *
 *   SIMD lanes. A unit's ALU is 256 bits wide. The lane width is the source element width:
 *   16 lanes of 16 bits for BF16 (the FP16 lanes of HBM-PIM, holding BF16 bit patterns) and
 *   8 lanes of 32 bits for FP32 (FP32 needs its 23-bit mantissa and a 32-bit exponent field,
 *   and a 32-bit element cannot live in a 16-bit lane). A word of FP32 therefore holds 8
 *   elements, and FP32 needs twice the commands of BF16 for the same tensor. Integer lane
 *   operations work on the raw bit patterns.
 *
 *   Registers per unit: GRF_A[8] and GRF_B[8] (vector registers 0-7 and 8-15), scalar
 *   operands from the SRF (every immediate in a command is an SRF scalar, written once per
 *   kernel by a SETS command), and for strided-opt a per-lane shift counter (JIT-Q §4.1).
 *
 * The command set (enum pimsim_op). Register operands are vector registers; "imm" is an
 * SRF scalar broadcast to all lanes. Comparisons give all-ones / all-zeros lane masks.
 *   ACT b,row  PRE b      open / close a row in the even (b = 0) or odd (b = 1) bank of
 *                         every unit of the pCH
 *   MOVR d <- b[col]      row buffer -> register (one column read)
 *   MOVW b[col] <- a      register -> row buffer (one column write)
 *   AND OR ADD SUB d,a,b|imm   bitwise / integer lane arithmetic
 *   MAX MIN d,a,b|imm     unsigned lane maximum / minimum (pim-MAX, JIT-Q's pim-CMP family)
 *   CMPLT CMPGT d,a,b|imm unsigned compare to a lane mask (pim-CMP)
 *   BSHR BSHL d,a         shift every lane right / left by one bit (pim-bitSHIFT)
 *   LSHU LSHD d,a,n       move every lane n lanes up / down (n = imm, 1 unless the setting
 *                         lane_shift_lanes allows more), as a ring: lane l receives lane
 *                         l+n (LSHU) or l-n (LSHD) (pim-laneSHIFT)
 *   LDCNT a               load the per-lane shift counters S[l] = exponent field of a[l]
 *                         (saturating at 255)
 *                         (strided-opt: "stores the per-lane shift amount in a register")
 *   CSHR d                the same conditional shift without the sticky bit (paper kernel)
 *   SETS imm  SETC d      kernel setup: write one SRF scalar / one vector constant
 * Extra commands, beyond the paper's list (counted in pimsim_stats.extra_cmds):
 *   BSHRJ d,a             one-bit right shift that ORs the bit shifted out into bit 0
 *                         ("sticky" or "jamming" shift). Round-to-nearest-even needs to know
 *                         whether any bit below the rounding position was 1; with a plain
 *                         shift that costs an AND and an OR per shifted bit.
 *   CSHRJ d               strided-opt's conditional shift (lanes with S[l] > 0 shift and
 *                         decrement S[l]), in its sticky form for the same reason.
 *   SEL d,m,a,b           d = m ? a : b per bit; the merge step of a conditional shift
 *                         without the opt counter (JIT-Q §4.1: "three PIM commands (pim-CMP,
 *                         pim-bitSHIFT, and pim-ADD) are used for a single bit shift"; the
 *                         third command here is SEL, since an ADD cannot merge two values
 *                         under a mask in one step).
 *
 * The kernel (see pimsim_gen.c for the exact sequences). Per MX block: E = max of the
 * exponent fields (AND + MAX, exponents kept in place in the FP exponent field, so no shifts
 * are needed to extract them); notnan = E < 255; per pair d = both exponents < E; per
 * element the significand (hidden bit, subnormals flushed) is shifted right with sticky by
 * a constant C - 2 unconditionally and by k = E - e - d conditionally (at most m + 1 times:
 * beyond that the result is 0 whatever k), then rounded to nearest even on the two guard
 * bits with BSHR/AND/ADD, saturated with MIN, and the sign, d and NaN poisoning are applied
 * with AND/OR. Mappings (JIT-Q §4.2, Figure 6):
 *   tiled        one 16x16 tile per bank pair, row-major inside the tile: a BF16 tile row is
 *                one word (FP32: two). Row blocking has a block inside a word, so the max
 *                and the pair partner need lane shifts; column blocking is lane-parallel.
 *                Conditional shifts use CMP + BSHRJ + SEL.
 *   strided      tile element (r, c) in word 16r + c, one tile per lane (16 BF16 / 8 FP32
 *                tiles per bank pair): both directions are lane-parallel; conditional
 *                shifts as in tiled.
 *   strided-opt  strided, conditional shifts with the per-lane counter (LDCNT + CSHRJ).
 * Tile rows 0-7 go to the even bank, 8-15 to the odd bank (JIT-Q: "spread the input tile
 * over the even and odd banks"). Outputs are written to the other bank of the pair than the
 * input word they come from, appended in the order they are produced, so reads and writes
 * of one group do not fight over a row buffer.
 *
 * Output layout in PIM memory (what the executor writes; the MX bit packing into the
 * 18/12/8-byte stream of mx.h is left to the reader of the quantized tensor and is not part
 * of the command stream): for every input word one output word whose lane holds the
 * element's sign in the lane's top bit, its pair's microexponent d in bit m and M in bits
 * 0..m-1; per group of blocks one header word whose lane holds E in the exponent field
 * (tiled row blocking: one header word per block, E in every lane). pimsim_quantize() reads
 * this back, checks that every other bit is zero and that all copies agree, and returns the
 * mx.h packed layout, which the tests compare with mx_quantize_tensor_ref() bit for bit.
 *
 * Timing. Commands issue in order. Every PIM command (ALU or MOV) occupies tCCD_L: in
 * HBM-PIM each instruction is triggered by a column command sent to all banks at once.
 * SETS/SETC are host register writes spaced by tCCD_S. ACT waits tRP after PRE, tRC and
 * tRRD_L and tFAW after earlier ACTs; PRE waits tRAS after ACT and write recovery
 * (WL + BL/2 + tWR) after the last write; a column command waits tRCDRD / tRCDWR after ACT.
 * With rw_turnaround a MOVW waits tRTW after the last read-type column command and the
 * next read-type command waits tWTR after it. Refresh: floor(t / tREFI) refreshes of tRFC,
 * each with refresh_reopen also tRP + tRRD_L + tRCDRD (precharge all, re-open both rows). Time is split as in JIT-Q Figure 9 into lane shifts
 * (LSHU/LSHD), bit shifts (BSHR/BSHL/BSHRJ/CSHRJ) and other (every other command, row
 * activation stalls and refresh).
 */
#ifndef PIMD_PIMSIM_H
#define PIMD_PIMSIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mx.h"
#include "util.h"

enum pimsim_mapping { PIMSIM_TILED, PIMSIM_STRIDED, PIMSIM_STRIDED_OPT };

/*
 * The kernel's arithmetic.
 *   exact  round to nearest even, saturation, NaN/Inf blocks and flushed subnormals, bit for
 *          bit mx_quantize_tensor_ref() (doc/design.md §5.1); constant shifts are one sticky BSHRJ
 *          each, only the data-dependent m + 1 are conditional.
 *   paper  JIT-Q §4.1 as written: the significand (hidden bit always set, so zero and
 *          subnormal inputs are not special, nor are NaN/Inf) is truncated by C + k one-bit
 *          shifts, C = significand bits - m, k = E - e - d, and every one of them is a
 *          per-lane conditional shift: CMPGT + BSHR + SEL without the opt counter (the
 *          paper's "three PIM commands ... for a single bit shift"), one CSHR with it. Its
 *          two unknowns are settings: cond_shift_range (the k covered: 0 = m, the least that
 *          gives every input the truncated result) and lane_shift_lanes (lanes one LSHU/LSHD
 *          moves). Bit for bit mx_quantize_tensor_trunc().
 */
enum pimsim_kernel { PIMSIM_KERNEL_EXACT, PIMSIM_KERNEL_PAPER };

/* "exact", "paper"; 0 or -EINVAL. */
const char *pimsim_kernel_name(enum pimsim_kernel k);
int pimsim_kernel_from_name(const char *s, enum pimsim_kernel *out);

/* "tiled", "strided", "strided-opt"; from_name also accepts "opt". 0 or -EINVAL. */
const char *pimsim_mapping_name(enum pimsim_mapping m);
int pimsim_mapping_from_name(const char *s, enum pimsim_mapping *out);

/* Organisation and timing. Timing values are in tCK cycles, tck_ps is one cycle. */
struct pimsim_params {
	unsigned stacks;
	unsigned pch_per_stack;  /* pseudo-channels per stack */
	unsigned banks_per_pch;  /* even; one PIM unit per two banks */
	unsigned row_bytes;      /* row buffer (page) size, a multiple of 32 */
	unsigned rows_per_bank;
	unsigned tck_ps;
	unsigned tCCDS, tCCDL, tRCDRD, tRCDWR, tRAS, tRP, tRC, tRRDL, tFAW, tWR, WL, BL;
	unsigned tREFI, tRFC; /* tREFI = 0: no refresh */
	/* Bus turnaround around writes (on by default, HBM2 values of PIMSimulator): a MOVW
	 * issues tRTW after the previous read-type column command (MOVR and every register-only
	 * command, which HBM-PIM triggers by an all-bank column read), and the next read-type
	 * command issues tWTR after the MOVW. Off: every column command is tCCD_L apart. */
	unsigned rw_turnaround, tRTW, tWTR;
	/* Refresh (every tREFI cycles of command time): tRFC, and with refresh_reopen (default)
	 * the all-bank precharge before it (tRP) and the re-activation of the two open rows after
	 * it (tRRD_L + tRCDRD). */
	unsigned refresh_reopen;
	unsigned kernel;           /* enum pimsim_kernel; default exact */
	unsigned lane_shift_lanes; /* lanes one LSHU/LSHD moves (tiled row blocking); default 1 */
	unsigned cond_shift_range; /* paper kernel: conditional shift steps beyond C; 0 = m */
};

/* The defaults of examples/hbm-pim.conf (sources cited there). */
void pimsim_params_default(struct pimsim_params *p);
/*
 * The PIM part of the JIT-Q paper configuration, over *p: kernel = paper with a
 * conditional-shift range of 8 (the paper gives none; 8 binades of exponent difference), tCK
 * 0.833 ns (one PIM command per tCCD_L = 4 tCK at the 300 MHz of HBM-PIM, Lee et al. 2021) and
 * 5 stacks (an A100's HBM). Organisation, DRAM timing, turnaround and refresh are kept.
 */
void pimsim_params_paper(struct pimsim_params *p);
/*
 * Parses "key = value" lines ('#' comments, blank lines) over *p; keys not given keep their
 * value. origin names the buffer in messages ("origin:line: ..."). Unknown keys, repeated
 * keys, bad values and inconsistent results are errors; *p is untouched on error.
 */
int pimsim_params_parse(struct pimsim_params *p, const char *buf, size_t len, const char *origin,
			struct pim_error *err);
/* The largest parameter file the shells read (with read_file) before pimsim_params_parse. */
#define PIMSIM_CONF_MAX (64 * 1024)

/* ---- commands ------------------------------------------------------------------------ */

enum pimsim_op {
	PIMSIM_OP_ACT,
	PIMSIM_OP_PRE,
	PIMSIM_OP_MOVR,
	PIMSIM_OP_MOVW,
	PIMSIM_OP_AND,
	PIMSIM_OP_OR,
	PIMSIM_OP_ADD,
	PIMSIM_OP_SUB,
	PIMSIM_OP_MAX,
	PIMSIM_OP_MIN,
	PIMSIM_OP_CMPLT,
	PIMSIM_OP_CMPGT,
	PIMSIM_OP_BSHR,
	PIMSIM_OP_BSHL,
	PIMSIM_OP_BSHRJ, /* extra */
	PIMSIM_OP_LSHU,
	PIMSIM_OP_LSHD,
	PIMSIM_OP_LDCNT,
	PIMSIM_OP_CSHRJ, /* extra (sticky form of the opt conditional shift) */
	PIMSIM_OP_SEL,   /* extra */
	PIMSIM_OP_CSHR,  /* paper kernel: the opt conditional shift, plain */
	PIMSIM_OP_SETS,
	PIMSIM_OP_SETC,
	PIMSIM_OP_COUNT
};

/* Figure 9 classes. ROW: ACT/PRE (their time is the row-open overhead, part of "other"). */
enum pimsim_class {
	PIMSIM_CLASS_LANE_SHIFT,
	PIMSIM_CLASS_BIT_SHIFT,
	PIMSIM_CLASS_OTHER,
	PIMSIM_CLASS_ROW
};

const char *pimsim_op_name(enum pimsim_op op);
enum pimsim_class pimsim_op_class(enum pimsim_op op);
bool pimsim_op_is_extra(enum pimsim_op op);

#define PIMSIM_NREGS 16 /* GRF_A[8] = registers 0-7, GRF_B[8] = 8-15 */
#define PIMSIM_F_IMM 1  /* operand b is the SRF scalar imm */

struct pimsim_cmd {
	uint8_t op;
	uint8_t dst, a, b, c; /* registers; SEL: dst = a ? b : c */
	uint8_t flags;
	uint8_t bank;         /* 0 even, 1 odd (ACT, PRE, MOVR, MOVW) */
	uint16_t col;         /* word within the row (MOVR, MOVW) */
	uint32_t row;         /* ACT, and the row MOVR/MOVW expect to be open */
	uint32_t imm;         /* SRF scalar; SETC: value of even lanes, imm2 of odd lanes */
	uint32_t imm2;
};

/*
 * The command stream of one pseudo-channel for the given number of rounds (a round is one
 * tile or one lane-pack of tiles per PIM unit), exactly as pimsim_quantize() runs it:
 * kernel setup, then every round's commands with ACT/PRE where rows change.
 * round_end[q] is the index one past the last command of round q.
 */
struct pimsim_stream {
	struct pimsim_cmd *cmds;
	size_t n, cap;
	size_t *round_end;
	unsigned rounds;
};
int pimsim_stream_build(const struct pimsim_params *p, enum pimsim_mapping map, enum mx_dir dir,
			enum mx_format f, enum mx_src src_type, unsigned rounds,
			struct pimsim_stream *s, struct pim_error *err);
void pimsim_stream_free(struct pimsim_stream *s);

/* ---- quantization and its cost ------------------------------------------------------- */

struct pimsim_stats {
	/* Time of the critical pseudo-channel (the one with the most rounds), in cycles; the
	 * Figure 9 split lane_shift + bit_shift + other == cycles. */
	uint64_t cycles;
	uint64_t lane_shift_cycles, bit_shift_cycles, other_cycles;
	uint64_t row_cycles;     /* part of other: ACT/PRE and the stalls they cause */
	uint64_t turnaround_cycles; /* part of other: read/write bus turnaround stalls */
	uint64_t refresh_cycles; /* part of other (with refresh_reopen: PRE + REF + re-ACT) */
	uint64_t refreshes;
	double time_ns;          /* cycles * tCK */
	/* Commands on the critical pseudo-channel. */
	uint64_t ops[PIMSIM_OP_COUNT];
	uint64_t lane_shift_cmds, bit_shift_cmds, other_cmds; /* PIM commands, no ACT/PRE */
	uint64_t extra_cmds;    /* BSHRJ + CSHRJ + SEL, included in the counts above */
	uint64_t activations;   /* ACT commands (each opens a row in 8 banks at once) */
	uint64_t total_cmds;    /* PIM commands summed over every pseudo-channel used */
	/* Work distribution. */
	uint64_t tiles, packs;  /* 16x16 tiles (padded), tiles per unit per round */
	uint64_t rounds;        /* rounds of the critical pseudo-channel */
	unsigned period;        /* rounds after which its row pattern repeats (estimate) */
	unsigned pch_used, pim_units;
	unsigned srf_scalars;   /* distinct SRF scalars the kernel uses */
	uint64_t rows_per_bank_needed; /* input + output rows in the busiest bank */
	bool fits;              /* rows_per_bank_needed <= params rows_per_bank */
};

/*
 * Quantizes src (rows x cols row-major FP32 floats or BF16 bit patterns) to MX by running
 * the command stream of the mapping on the functional model, and writes the mx.h packed
 * layout (blocked along dir) to out (out_len >= mx_packed_size()). stats (may be NULL) gets
 * what ran. The shape rules are those of mx_quantize_tensor(); the other dimension is padded
 * to a multiple of 16 with zero tiles. 0 or negative errno with err filled; -ENOMEM if the
 * model's memory cannot be allocated, -E2BIG if the tensor does not fit the PIM memory.
 */
int pimsim_quantize(const struct pimsim_params *p, enum pimsim_mapping map, enum mx_dir dir,
		    enum mx_format f, enum mx_src src_type, const void *src, size_t rows,
		    size_t cols, uint8_t *out, size_t out_len, struct pimsim_stats *stats,
		    struct pim_error *err);

/*
 * The same statistics without data, for the scheduler: time and counts of quantizing a
 * rows x cols weight tensor of src_type to format f, blocked along dir, with the mapping.
 * The stream of the critical pseudo-channel is generated and timed for a few rounds and
 * extrapolated by the period after which its row pattern repeats, so the cost is
 * independent of the tensor size; the result equals pimsim_quantize()'s statistics exactly
 * (tested). stats->time_ns is the number to use; stats->fits says whether the tensor (and
 * its output) fits the PIM memory of the configuration at all. Example:
 *   struct pimsim_params p; struct pimsim_stats st;
 *   pimsim_params_default(&p);
 *   pimsim_estimate(&p, PIMSIM_STRIDED_OPT, MX_DIR_ROW, MX_FMT_MX6, MX_SRC_BF16,
 *                   12288, 12288, &st, &err);   // st.time_ns
 */
int pimsim_estimate(const struct pimsim_params *p, enum pimsim_mapping map, enum mx_dir dir,
		    enum mx_format f, enum mx_src src_type, size_t rows, size_t cols,
		    struct pimsim_stats *stats, struct pim_error *err);

/*
 * The cost of one quantization in seconds, in the shape the JIT-Q scheduler takes
 * (jitq.h, jitq_quant_time_fn): ctx is a struct pimsim_cost.  Both dimensions are rounded up to
 * a multiple of 16 (a partial block is zero-padded).  Returns NaN and records the first failure
 * in ctx on error.
 */
struct pimsim_cost {
	const struct pimsim_params *params;
	enum pimsim_mapping mapping;
	int error;
	struct pim_error err;
};
double pimsim_cost_s(void *ctx, uint64_t rows, uint64_t cols, enum mx_dir dir, enum mx_format fmt,
		     enum mx_src src);

#endif
