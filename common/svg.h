/* SPDX-License-Identifier: MIT */
/*
 * svg.h: a small SVG 1.1 writer shared by pimctl's charts (placement, calibration, JIT-Q plan).
 *
 * Pure: data in, text out.  The document grows in one strbuf owned by struct svg; no I/O,
 * no global state.  Every string that reaches the document (text, titles, classes, colours,
 * data- attributes) is escaped for XML, and bytes that are not well-formed UTF-8 or are control
 * characters XML 1.0 cannot carry become U+FFFD, so any input gives a well-formed document.
 * Coordinates that are not finite are written as 0, so no NaN reaches a renderer.
 *
 * Errors are sticky: the first failure (-ENOMEM, or -E2BIG when the document would pass the
 * size given to svg_begin) is kept in s->text.error, later calls do nothing, and svg_take() returns
 * it.  Callers draw without checking each call.
 */
#ifndef PIMD_SVG_H
#define PIMD_SVG_H

#include <stdbool.h>
#include <stddef.h>

#include "strbuf.h"
#include "util.h"

struct svg {
	struct strbuf text; /* its max: the largest document allowed; its error: the first failure */
};

/* What an element carries besides its geometry.  NULL fields are left out. */
struct svg_tag {
	const char *cls;    /* class attribute */
	const char *fill;   /* fill colour */
	const char *stroke; /* stroke colour */
	const char *title;  /* <title> child: the hover text of a browser */
	const char *data;   /* the name of one data- attribute, without "data-" */
	const char *value;  /* its value */
};

enum svg_shape {
	SVG_CIRCLE,
	SVG_TRIANGLE,
	SVG_DIAMOND,
	SVG_SQUARE,
	SVG_CROSS,
};

/*
 * Starts a document of width × height user units (also its pixel size) whose text may not
 * exceed max_bytes; title becomes the document's <title>, css (may be NULL) its <style>.
 */
void svg_begin(struct svg *s, double width, double height, size_t max_bytes, const char *title,
	       const char *css);
/* Closes the document and hands its text over: 0 with *out (NUL-terminated, caller frees) and
 * *len, or s->error.  Either way s is empty afterwards. */
int svg_take(struct svg *s, char **out, size_t *len);
void svg_free(struct svg *s);

void svg_group(struct svg *s, const struct svg_tag *t); /* <g ...> */
void svg_group_end(struct svg *s);
void svg_rect(struct svg *s, double x, double y, double w, double h, const struct svg_tag *t);
void svg_line(struct svg *s, double x1, double y1, double x2, double y2, const struct svg_tag *t);
/* An open polyline through n points. */
void svg_polyline(struct svg *s, const double *x, const double *y, size_t n, const struct svg_tag *t);
/* A mark of radius r centred on (x, y). */
void svg_mark(struct svg *s, enum svg_shape shape, double x, double y, double r, const struct svg_tag *t);
/* Text at (x, y); anchor "start", "middle" or "end"; cls may be NULL. */
void svg_text(struct svg *s, double x, double y, const char *anchor, const char *cls, const char *fmt, ...)
	_printf_(6, 7);
/* The same, rotated by -90 degrees about (x, y): a vertical axis title. */
void svg_text_up(struct svg *s, double x, double y, const char *cls, const char *fmt, ...) _printf_(5, 6);

/*
 * A scale from data values [lo, hi] to positions [p0, p1] (p1 < p0 for a vertical axis that
 * grows upwards), linear or logarithmic (lo > 0).  Values outside [lo, hi] map to the nearer
 * end; on a log scale a value <= 0 maps to p0.
 */
struct svg_scale {
	double lo, hi;
	double p0, p1;
	bool log;
};
double svg_scale_at(const struct svg_scale *sc, double v);
/*
 * Tick values inside [lo, hi], at most max of them, ascending: on a log scale the powers of
 * ten (with 2 and 5 between them when the range spans fewer than three decades), on a linear
 * one multiples of 1, 2 or 5 × 10^k.  Returns how many were written.
 */
size_t svg_ticks(const struct svg_scale *sc, double *ticks, size_t max);
/*
 * Draws an axis: its line at x = at (vertical) or y = at (horizontal), ticks with labels
 * "%g" of value × label_factor, and the axis title.
 */
void svg_axis(struct svg *s, const struct svg_scale *sc, bool vertical, double at, double label_factor,
	      const char *title);

#endif
