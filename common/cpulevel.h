/* SPDX-License-Identifier: MIT */
/*
 * cpulevel.h: the x86-64 micro-architecture levels of the psABI (x86-64, x86-64-v2, -v3 with
 * AVX2 and FMA, -v4 with AVX-512) that pim-extract builds model libraries for, and whether the
 * CPU running now has one.  A model library exports the level it was built for
 * (PIM_MODEL_TARGET, client/pim_hooks.h); the profiling worker refuses to run one this CPU
 * lacks instead of dying of SIGILL.
 */
#ifndef PIM_COMMON_CPULEVEL_H
#define PIM_COMMON_CPULEVEL_H

#include <stdbool.h>

/* The best level this CPU runs ("x86-64-v4" ... "x86-64"), or "" on another architecture. */
const char *cpulevel_native(void);
/* True for "x86-64", "x86-64-v2", "x86-64-v3" and "x86-64-v4". */
bool cpulevel_valid(const char *level);
/* True when this CPU runs code built for level (false for an unknown level). */
bool cpulevel_runs_here(const char *level);
/* What the level needs, for messages: "AVX-512 (F, BW, CD, DQ, VL)", ... */
const char *cpulevel_needs(const char *level);

#endif
