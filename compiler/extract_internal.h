/* SPDX-License-Identifier: MIT */
/*
 * extract_internal.h: what the files of the extractor share, and nothing outside it uses.
 * extract.c parses and checks the input, rewrites it (stages 0 and 1) and runs the stages;
 * extract_regions.c discovers the regions (stages 2 to 4), extract_operands.c reads and
 * accounts each region's operands (stage 3), extract_manifest.c writes the manifest.  The
 * names have hidden visibility: no program or library linked with the extractor sees them.
 */
#ifndef PIM_COMPILER_EXTRACT_INTERNAL_H
#define PIM_COMPILER_EXTRACT_INTERNAL_H

#include "extract.h"
#include "cpulevel.h"
#include "hostcode.h"

#include <mlir-c/AffineExpr.h>
#include <mlir-c/AffineMap.h>
#include <mlir-c/BuiltinAttributes.h>
#include <mlir-c/BuiltinTypes.h>

#pragma GCC visibility push(hidden)

#define HOOK_ENTER "pim_region_enter"
#define HOOK_EXIT "pim_region_exit"

typedef int (*walk_fn)(struct extract *x, MlirOperation op, void *ud);

/* extract.c: small helpers. */
int extract_refuse(struct pim_error *err, const struct extract *x, MlirOperation op,
	const char *fmt, ...) _printf_(4, 5);
int walk_nested(struct extract *x, MlirOperation root, walk_fn fn, void *ud);
bool is_call_to(MlirOperation op, const char *callee);
int hook_id(MlirOperation call, int64_t *id);
uint64_t storage_bytes(unsigned bits);

/* extract_regions.c: stages 2 (instrument), 3 (the regions) and 4 (the loops). */
int instrument(struct extract *x, struct pim_error *err);
int read_regions(struct extract *x, struct pim_error *err);
int read_loops(struct extract *x, struct pim_error *err);

/* extract_operands.c: stage 3, the operands of one region and the entry's arguments. */
int read_operands(struct extract *x, MlirOperation entry, MlirOperation g,
	struct extract_region *reg, struct pim_error *err);
int read_init_input(struct extract *x, MlirOperation entry, MlirOperation init,
	struct extract_region *reg, struct pim_error *err);
int read_arguments(struct extract *x, MlirOperation entry, struct pim_error *err);

#pragma GCC visibility pop

#endif
