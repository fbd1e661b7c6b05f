/* SPDX-License-Identifier: MIT */
/*
 * extract.h: from a linalg-on-tensors module to the facts of the model manifest.
 *
 * Stages (each a textual pass pipeline run in process, doc/mlir.md):
 *   0. parse and refuse what cannot be handled: parse errors, torch-dialect input, dynamic
 *      shapes, ops outside the accepted dialects; each refusal names the op and file:line:col;
 *   1. inline, symbol-dce: one entry function with every linalg op in it;
 *   2. instrument: func.call @pim_region_enter(k) / @pim_region_exit(k) around every linalg
 *      op k of the source.  The calls are the join key between the stages: they survive
 *      bufferization and generalization and bracket the op (doc/mlir.md pitfall 6);
 *   3. one-shot-bufferize (function boundaries, identity layouts), linalg-generalize-named-ops,
 *      buffer-results-to-out-params.  Every linalg op is now a region, in program order (region
 *      id = position), named after the source op of its bracket; the hooks are replaced by ones
 *      with the final ids, tight around the op, and each operand is read off the generic op
 *      (shape, element width, bytes, role, allocation through views);
 *      Before the operands are read, every generic's loops are put in the order a CPU runs
 *      fastest (hostcode.h: innermost loop unit-stride in the largest operand);
 *   4. buffer deallocation, convert-linalg-to-parallel-loops: the scf loops between the hooks
 *      give the parallel and reduction extents, the loops around them the trip count.
 * The module left behind (stage 4) is what model.c lowers into the model library, so region ids
 * of the library's hooks and of the manifest are the same by construction.
 */
#ifndef PIM_COMPILER_EXTRACT_H
#define PIM_COMPILER_EXTRACT_H

#include "manifest.h"
#include "mlirx.h"

struct extract_options {
	const char *input;       /* .mlir path */
	const char *name;        /* model name; NULL: the input's basename without .mlir */
	const char *entry;       /* entry function; NULL: the only public function */
	const char *save_temps;  /* directory for the IR of every stage, or NULL */
	/* Weights at real size for timing-only profiles: every tensor constant of at least
	 * EXTRACT_WEIGHTS_ZERO_MIN bytes becomes a zero-filled global (.bss, zeroed when the
	 * library is loaded), so the library stays small; the manifest's source says so. */
	bool weights_zero;
	/* Instruction set of the model library's host code: an x86-64 level (common/cpulevel.h),
	 * or NULL / "native" for the best one this CPU runs. */
	const char *target;
	/* Fuse elementwise chains and fold transposes into contractions (hostcode.h); false keeps
	 * one nest per source op. */
	bool fuse;
};

#define EXTRACT_WEIGHTS_ZERO_MIN (64u * 1024u)
#define EXTRACT_WEIGHTS_ZERO_PREFIX "pim_weights_zero_"

/* A constant replaced by --weights zero: global EXTRACT_WEIGHTS_ZERO_PREFIX<index>. */
struct extract_zero {
	char global[64];
	uint64_t bytes;
};

struct extract_operand {
	uint32_t alloc;  /* allocation id (index into extract.allocs) */
	uint64_t bytes;
	char elem_type[MANIFEST_ELEM_TYPE_MAX + 1];
	uint32_t elem_bits;
	Pim__OperandRole role;
	/* A buffer the payload reads element by element (memref.load from tensor.extract: an
	 * embedding table) rather than an operand of the op: loads per payload execution.  Its
	 * bytes become n_total x gather_loads x element bytes, at most its view's (stage 4). */
	uint32_t gather_loads;
	MlirValue gather_value;  /* the buffer loaded from (stage 3 only) */
};

#define EXTRACT_DIMS_MAX 32

struct extract_region {
	char name[MANIFEST_TEXT_MAX + 1];
	char op[MANIFEST_TEXT_MAX + 1];
	char location[MANIFEST_TEXT_MAX + 1];
	/* The framework operator (ONNX node) the nest comes from, or "": see extract_source. */
	char node[MANIFEST_TEXT_MAX + 1];
	bool node_named;  /* name is the node's; ".K" (K-th nest of the node) is appended */
	uint64_t n_par, n_total, trip;
	uint64_t par_ext[MANIFEST_EXTENTS_MAX], red_ext[MANIFEST_EXTENTS_MAX];
	size_t n_par_ext, n_red_ext;
	struct extract_operand *operands;
	size_t n_operands;
	/* From the generic op (stage 3), checked against the loops (stage 4). */
	size_t n_dims;
	bool dim_parallel[EXTRACT_DIMS_MAX];
	uint64_t dim_extent[EXTRACT_DIMS_MAX];  /* 0: not read off an operand shape */
	/* Loop nests of a fill folded into this one (hostcode_fill_folds): they run first inside
	 * the bracket and are not the region's dimensions. */
	uint32_t folded_loops;
};

struct extract_alloc {
	Pim__AllocKind kind;
	uint64_t bytes;
	char name[MANIFEST_TEXT_MAX + 1];
	void *key;  /* memref.alloc operation, for identity */
	char global[MANIFEST_TEXT_MAX + 1];
};

/*
 * A linalg op of the source (stage 2), before generalization and bufferization.  When its
 * location names a framework operator, loc("NODE"("OP_TYPE")) (mlirx_loc_node), the nest
 * belongs to that operator: op is OP_TYPE, location is NODE (one string for every nest of
 * the node, which is what operator granularity groups by) and the name NODE.K.
 */
struct extract_source {
	char name[MANIFEST_TEXT_MAX + 1];
	char op[MANIFEST_TEXT_MAX + 1];
	char location[MANIFEST_TEXT_MAX + 1];
	char node[MANIFEST_TEXT_MAX + 1];
	bool node_named;
};

/* A tensor op whose bufferization makes a loop nest (tensor.pad), by location. */
struct extract_origin {
	char location[MANIFEST_TEXT_MAX + 1];
	char op[64];
};

/* A memref argument of the entry function after bufferization (the model library's ABI). */
struct extract_arg {
	size_t rank;
	int64_t *shape;
};

struct extract {
	struct mlirx mx;
	MlirModule module;  /* stage 4 IR once extract_run succeeded */
	char entry[MANIFEST_TEXT_MAX + 1];
	char name[MANIFEST_NAME_MAX + 1];
	char source[MANIFEST_TEXT_MAX + 1];
	const char *save_temps;
	struct extract_region *regions;
	size_t n_regions;
	struct extract_source *sources;
	size_t n_sources;
	struct extract_origin *origins;
	size_t n_origins;
	struct extract_alloc *allocs;
	size_t n_allocs;
	struct extract_arg *args;  /* args[i] is allocation i */
	size_t n_args;
	bool weights_zero;
	char target[16];  /* x86-64 level of the host code, "" for the compiler's default */
	struct extract_zero *zeros;
	size_t n_zeros;
	uint64_t zero_bytes;
};

/* Runs stages 0-4.  On failure err says what was refused or failed, where (file:line:col) and
 * on which op; the return value is negative (-EINVAL for refused input). */
int extract_run(const struct extract_options *o, struct extract **out, struct pim_error *err);

/* Builds the manifest (validated with manifest_validate).  Free with
 * pim__manifest__free_unpacked(m, NULL). */
int extract_manifest(const struct extract *x, Pim__Manifest **out, struct pim_error *err);

void extract_free(struct extract *x);

/* The function op named x->entry in x->module, or a null op. */
MlirOperation extract_entry_op(const struct extract *x);

/* Writes the module to save_temps/NAME.STAGE.mlir when --save-temps is on. */
int extract_save_stage(const struct extract *x, const char *stage, struct pim_error *err);

#endif
