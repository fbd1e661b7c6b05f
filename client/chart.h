/* SPDX-License-Identifier: MIT */
/*
 * chart.h: pimctl's pictures, drawn as SVG with svg.h from pimd's answers.
 *
 * Pure: each function takes an answer (libpimclient's typed results) and returns the text of
 * one self-contained SVG document; no I/O, no global state.  What cannot be seen is aggregated
 * so that a model of any size draws in a bounded time and size: above CHART_MARKS_ONE regions,
 * the marks of one cell of CHART_CELL_PX pixels with the same decision and evidence become one
 * mark that says how many regions it stands for; regions narrower than a pixel in the
 * program-order strip merge with their neighbours of the same decision.
 *
 * Every mark carries a <title> (a browser shows it on hover) and a data- attribute that ties it
 * to the data: data-region="ID" for one region, data-regions="N" for an aggregate.
 */
#ifndef PIMD_CHART_H
#define PIMD_CHART_H

#include "pim.h"
#include "util.h"

#define CHART_MARKS_ONE 2000 /* up to this many regions in a panel: one mark each */
#define CHART_CELL_PX 4.0    /* above it: one mark per cell of this many pixels */
#define CHART_MAX_BYTES (64u << 20)

/* The colours of the two decisions and of the evidence shapes' legend. */
#define CHART_PIM_COLOUR "#d95f02"
#define CHART_HOST_COLOUR "#1f78b4"

/*
 * The placement of r (its first estimate's decisions): the rule's geometry (BW_read against
 * f_store, θ and σ, Stage-1 failures apart), the model as a program-order strip, the speedup
 * against PIM cores with its bounds.  0 with *out and *len, or -ENOMEM/-E2BIG with err.
 */
int chart_placement(const struct pim_placement *r, char **out, size_t *len, struct pim_error *err);

/* Accuracy against θ per σ, the chosen θ and its interval, false positives and negatives. */
int chart_calibrate(const struct pim_calibration *r, const char *model, char **out, size_t *len,
		    struct pim_error *err);

/*
 * One training step of a JIT-Q plan (which needs its per-block rows): accelerator compute per
 * block, the PIM quantizations and when they are ready, slack and stalls, forward and
 * backward; the memory JIT-Q's copies hold beside the resident copies it saves.
 */
int chart_jitq(const struct pim_jitq_plan_reply *r, char **out, size_t *len, struct pim_error *err);

#endif
