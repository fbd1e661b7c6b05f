/* SPDX-License-Identifier: MIT */
/*
 * hostcode.h: the host code of the model library is what a performance-minded CPU user would
 * run, so that the time pimd measures for a nest is the time its host would really take.
 *
 *   hostcode_order_loops (stage 3, on the bufferized generic ops): the loop dimensions of every
 *     linalg.generic are reordered so that the innermost one is the dimension the most operand
 *     bytes have as their last index, walked with unit stride (a GEMV whose weight is stored
 *     [in, out] streams the weight row by row instead of jumping a row per step).  Only the
 *     moved dimension changes place, so the reduction dimensions keep their order among
 *     themselves and every output element is accumulated in the same order as before.
 *   hostcode_prepare (model library, before lowering to LLVM): floating-point arithmetic may
 *     be reassociated and contracted (fastmath<reassoc,contract>, what -ffast-math gives C
 *     code's reductions; no finite-math or NaN assumptions), math.tanh and math.erf on f32
 *     become inline arithmetic around math.exp, which the vectoriser maps to the C library's
 *     vector functions (libmvec), instead of scalar calls of tanhf and erff (1 + tanh(u), the
 *     tanh GELU's, as 2 / (1 + exp(-2u))), and
 *     arith.maximumf/minimumf become llvm.intr.maximum/minimum, which vectorise as reductions.
 * The instruction set the library is built for is common/cpulevel.h's.
 */
#ifndef PIM_COMPILER_HOSTCODE_H
#define PIM_COMPILER_HOSTCODE_H

#include "extract.h"

int hostcode_order_loops(struct extract *x, struct pim_error *err);

/*
 * Stage 1 (tensors, before instrumentation), --nests fused: the nests a compiler makes for the
 * host.  A contraction whose zero-filled accumulator only a bias add reads starts from the bias
 * instead (BLAS's beta = 1, PyTorch's addmm: nn.Linear's MatMul and Add are one nest).  An elementwise op of one or two cheap arithmetic operations that several ops read in
 * full (a residual add, x - mean in a norm) is cloned for each reader; then
 * linalg-fuse-elementwise-ops fuses every elementwise producer with one use into its consumer
 * (chains of elementwise ops become one nest; a transpose that only feeds a contraction becomes
 * the contraction's indexing), except into a reduction that would compute the producer again
 * for every step of a loop the producer does not depend on (a normalised vector into the GEMV
 * that reads it); a pure copy is fused there too, since it computes nothing.
 */
int hostcode_fuse(struct extract *x, struct pim_error *err);

/* A generalized linalg.fill: ins(scalar) outs(buffer), a payload that yields the scalar. */
bool hostcode_is_fill(MlirOperation g);

/* A fill, or a copy of one buffer into another (ins(buffer) outs(buffer), all loops parallel,
 * a payload that yields the input: the bias hostcode_fuse made a contraction start from). */
bool hostcode_is_init(MlirOperation g);

/*
 * True when fill (an init, stage 3) only initialises an accumulator of next, a later op of its
 * block: next's payload reads the filled buffer as an output and only inert ops (constants,
 * allocations, views) and other inits lie between them.  Such an init belongs to next's nest,
 * as a compiler fuses it into the first iteration of the reduction: one region, whose bracket
 * holds both loops (extract.h: extract_region.folded_loops); an init's input is an operand of
 * the region.
 */
bool hostcode_fill_folds(MlirOperation fill, MlirOperation next);
int hostcode_prepare(struct extract *x, struct pim_error *err);

#endif
