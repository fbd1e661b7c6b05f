/* SPDX-License-Identifier: MIT */
/*
 * model.h: the instrumented model library (client/pim_hooks.h, libpimclient(3) MODEL LIBRARIES).
 *
 * The stage-4 module of extract.c already calls pim_region_enter(id)/pim_region_exit(id) around
 * every loop nest.  model_emit lowers it to the LLVM dialect with the C interface on the entry
 * function, translates it to LLVM bitcode in process, generates a small C wrapper exporting
 * pim_model_entry(args, n_args) that builds the memref descriptors from the static shapes, and
 * links both with the C compiler (clang-19) into a shared object.  The hooks stay undefined:
 * the process that dlopens the library provides them.
 */
#ifndef PIM_COMPILER_MODEL_H
#define PIM_COMPILER_MODEL_H

#include "extract.h"

#define MODEL_CC_DEFAULT "clang-19"

/* Lowers x->module (consumed: it is LLVM dialect afterwards) and writes the library to
 * out_path.  cc: the compiler to run (a clang that reads LLVM 19 bitcode).  digest: the
 * manifest_digest() of the manifest written beside the library, exported as PIM_MODEL_DIGEST. */
int model_emit(struct extract *x, const char *out_path, const char *cc, uint64_t digest,
	       struct pim_error *err);

/* The C wrapper's text for x (exposed for tests and --save-temps). */
char *model_wrapper_source(const struct extract *x, uint64_t digest);

#endif
