/* SPDX-License-Identifier: MIT */
/*
 * manifest.h: the model manifest (proto/pim.proto, message Manifest): reading it from a file in
 * protobuf binary or JSON form, validating it, and writing it as JSON.
 *
 * JSON form (documented in pimd(8), MANIFEST):
 *   { "name": "gemv", "source": "gemv.mlir",
 *     "allocations": [ { "id": 0, "bytes": 4194304, "kind": "argument", "name": "%arg0" } ],
 *     "regions": [ { "id": 0, "name": "matvec", "op": "linalg.matvec", "order": 0,
 *                    "n_par": 1024, "n_total": 1048576, "trip": 1,
 *                    "parallel_extents": [1024], "reduction_extents": [1024],
 *                    "location": "gemv.mlir:4:10",
 *                    "operands": [ { "allocation": 0, "bytes": 4194304,
 *                                    "elem_type": "f32", "elem_bits": 32, "role": "in" } ] } ] }
 * Unknown keys are errors.  "trip" may be omitted (1); extents may be omitted.
 */
#ifndef PIMD_MANIFEST_H
#define PIMD_MANIFEST_H

#include "pim.pb-c.h"
#include "util.h"

#include <json-c/json.h>

/* Limits on every count and size a manifest can state (doc/design.md §6). */
#define MANIFEST_NAME_MAX 128             /* model name */
#define MANIFEST_TEXT_MAX 256             /* region name, op, location, source, allocation name */
#define MANIFEST_ELEM_TYPE_MAX 16
#define MANIFEST_REGIONS_MAX 1000000u
#define MANIFEST_REGION_ID_MAX 1000000u   /* region ids are 0..this: dense tables are sized by them */
#define MANIFEST_ALLOCATIONS_MAX 1000000u
#define MANIFEST_OPERANDS_MAX 1024u       /* per region */
#define MANIFEST_EXTENTS_MAX 16u          /* per kind, per region */
#define MANIFEST_BYTES_MAX (UINT64_C(1) << 50)   /* 1 PiB: any allocation, and their sum */
#define MANIFEST_ITERATIONS_MAX (UINT64_C(1) << 62)
#define MANIFEST_FILE_MAX (256u * 1024u * 1024u)

/* True if name is a valid model name: 1..128 of [A-Za-z0-9._-], not starting with '.' or '-'. */
bool manifest_name_valid(const char *name);

/*
 * Checks everything: names, unique ids and orders, non-zero and non-overflowing sizes,
 * N_par <= N_total, extents consistent with N_par/N_total, operands referring to known
 * allocations and no larger than them.  On failure returns -EINVAL with a message naming the
 * field, e.g. "regions[3].operands[1].allocation_id: 17 is not a known allocation".
 */
int manifest_validate(const Pim__Manifest *m, struct pim_error *err);
/*
 * manifest_validate for a manifest whose n_regions regions are not in m but come one at a time:
 * region(ctx, i, err) for i = 0, 1, ... in turn gives region i, valid until the next call (NULL
 * on failure, err set).  m->regions is not read.
 */
int manifest_validate_each(const Pim__Manifest *m, size_t n_regions,
			   const Pim__Region *(*region)(void *ctx, size_t i, struct pim_error *err), void *ctx,
			   struct pim_error *err);

/* Parses a JSON manifest from a buffer; the result is freed with pim__manifest__free_unpacked(m, NULL). */
int manifest_from_json(const char *buf, size_t len, Pim__Manifest **out, struct pim_error *err);

/* Reads a file in either form ('{' as first non-blank byte selects JSON) and validates it. */
int manifest_read_file(const char *path, Pim__Manifest **out, struct pim_error *err);

/* JSON form of a manifest (the same shape manifest_from_json reads). */
json_object *manifest_to_json(const Pim__Manifest *m);

/* Total bytes of the allocations (validated manifests cannot overflow). */
uint64_t manifest_allocation_bytes(const Pim__Manifest *m);

/*
 * Digest of what a model library is built against: allocations (id, bytes, kind) and regions
 * (id, order, iteration counts, extents, operands), in id order; names, sources and locations
 * are left out, so renaming a model keeps its digest.  FNV-1a 64 over that sequence, version
 * MANIFEST_DIGEST_VERSION; never 0 (0 is "no digest"; also the answer when memory runs out).
 * pim-extract embeds it in the library as PIM_MODEL_DIGEST (client/pim_hooks.h) and the profiling
 * worker refuses a library whose digest differs from the stored manifest's.
 */
#define MANIFEST_DIGEST_VERSION 1u
uint64_t manifest_digest(const Pim__Manifest *m);
/*
 * The same digest of a manifest read piece by piece (never whole in memory): begin with the
 * number of allocations, add each allocation in id order, then the number of regions and each
 * region in id order, and end.
 */
uint64_t manifest_digest_begin(size_t n_allocations);
uint64_t manifest_digest_allocation(uint64_t h, const Pim__Allocation *a);
uint64_t manifest_digest_regions(uint64_t h, size_t n_regions);
uint64_t manifest_digest_region(uint64_t h, const Pim__Region *r);
uint64_t manifest_digest_end(uint64_t h);

const char *manifest_alloc_kind_name(Pim__AllocKind k);
const char *manifest_role_name(Pim__OperandRole r);

#endif
