/* SPDX-License-Identifier: MIT */
/*
 * pim_hooks.h: the ABI between lowered model code and the process that runs it.
 * See libpimclient(3), MODEL LIBRARIES.
 *
 * A model library is a shared object produced by pim-extract (or written by hand) that
 *   - calls pim_region_enter(id) before and pim_region_exit(id) after every loop nest, with the
 *     region id of the model's manifest;
 *   - exports PIM_MODEL_ENTRY, which runs the model once on caller-provided buffers: args[i]
 *     points to the i-th ARGUMENT allocation of the manifest, in increasing allocation id
 *     order, of the manifest's size in bytes.  It returns 0, or nonzero on failure;
 *   - may export PIM_MODEL_DIGEST, a const uint64_t: the digest of the manifest it was built
 *     against (pim-extract writes it; pimd(8), MODEL LIBRARIES).  pimd refuses to profile a
 *     library whose digest differs from the loaded manifest's; without the symbol it does not
 *     check;
 *   - may export PIM_MODEL_TARGET, a NUL-terminated const char array: the x86-64 level its code
 *     was built for ("x86-64-v4", "x86-64-v3", "x86-64-v2", "x86-64"; pim-extract --target).
 *     pimd refuses to profile a library built for a level the CPU lacks, naming it, rather
 *     than have it die of SIGILL; without the symbol, or with "", it does not check.
 *
 * The two hook symbols are resolved when the library is loaded: the profiling worker of pimd
 * provides counting versions, libpimclient provides the decided-path versions.
 *
 * C99; no dependency on the rest of libpimclient.
 */
#ifndef PIM_HOOKS_H
#define PIM_HOOKS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void pim_region_enter(int32_t region);
void pim_region_exit(int32_t region);

#define PIM_MODEL_ENTRY "pim_model_entry"
typedef int (*pim_model_entry_fn)(void *const *args, size_t n_args);
#define PIM_MODEL_DIGEST "pim_model_manifest_digest"
#define PIM_MODEL_TARGET "pim_model_target"

#ifdef __cplusplus
}
#endif

#endif
