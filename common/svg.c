/* SPDX-License-Identifier: MIT */
/*
 * svg.c: the SVG writer of svg.h.  One growing text (strbuf.h); every string escaped; numbers
 * with one decimal (a tenth of a pixel), which keeps a chart of 10,000 marks near a megabyte.
 */
#include <math.h>
#include <string.h>

#include "svg.h"

/* A coordinate: one decimal, no "-0.0", 0 for what is not finite. */
static void num(struct svg *s, double v)
{
	if (!isfinite(v))
		v = 0;
	v = round(v * 10) / 10;
	if (v == 0)
		v = 0; /* -0 */
	if (v == floor(v) && fabs(v) < 1e15)
		strbuf_printf(&s->text, "%.0f", v);
	else
		strbuf_printf(&s->text, "%.1f", v);
}

/* "cmd" then "a,b": a point of a path or a polyline. */
static void point(struct svg *s, const char *cmd, double a, double b)
{
	strbuf_puts(&s->text, cmd);
	num(s, a);
	strbuf_put(&s->text, ",", 1);
	num(s, b);
}

/* Length of the well-formed UTF-8 sequence at p (RFC 3629), or 0. */
static size_t utf8_len(const unsigned char *p)
{
	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		return (p[1] & 0xc0) == 0x80 ? 2 : 0;
	if (p[0] >= 0xe0 && p[0] <= 0xef) {
		unsigned lo = p[0] == 0xe0 ? 0xa0 : 0x80, hi = p[0] == 0xed ? 0x9f : 0xbf;
		return p[1] >= lo && p[1] <= hi && (p[2] & 0xc0) == 0x80 ? 3 : 0;
	}
	if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		unsigned lo = p[0] == 0xf0 ? 0x90 : 0x80, hi = p[0] == 0xf4 ? 0x8f : 0xbf;
		return p[1] >= lo && p[1] <= hi && (p[2] & 0xc0) == 0x80 && (p[3] & 0xc0) == 0x80 ? 4 : 0;
	}
	return 0;
}

/* str as XML character data or an attribute value (quotes escaped too). */
static void esc(struct svg *s, const char *str)
{
	const unsigned char *p = (const unsigned char *)str;
	while (*p && !s->text.error) {
		const unsigned char *run = p;
		size_t n = 0;
		/* copy the longest run that needs no escaping at once */
		while (*p && *p != '&' && *p != '<' && *p != '>' && *p != '"' && *p != '\'' &&
		       (*p >= 0x20 || *p == '\t' || *p == '\n') && *p != 0x7f && (n = utf8_len(p)) > 0) {
			/* U+0080..U+009F (C1 controls) are discouraged in XML: replace them too */
			if (n == 2 && p[0] == 0xc2 && p[1] < 0xa0)
				break;
			/* U+FFFE and U+FFFF are not XML characters */
			if (n == 3 && p[0] == 0xef && p[1] == 0xbf && p[2] >= 0xbe)
				break;
			p += n;
		}
		strbuf_put(&s->text, (const char *)run, (size_t)(p - run));
		if (!*p)
			break;
		switch (*p) {
		case '&': strbuf_puts(&s->text, "&amp;"); p++; continue;
		case '<': strbuf_puts(&s->text, "&lt;"); p++; continue;
		case '>': strbuf_puts(&s->text, "&gt;"); p++; continue;
		case '"': strbuf_puts(&s->text, "&quot;"); p++; continue;
		case '\'': strbuf_puts(&s->text, "&#39;"); p++; continue;
		default: break;
		}
		/* a control character, C1, a non-character or a malformed sequence: one U+FFFD */
		n = utf8_len(p);
		p += n ? n : 1;
		strbuf_puts(&s->text, "\xef\xbf\xbd");
	}
}

static void attr(struct svg *s, const char *name, const char *value)
{
	if (!value)
		return;
	strbuf_printf(&s->text, " %s=\"", name);
	esc(s, value);
	strbuf_put(&s->text, "\"", 1);
}

static void attrn(struct svg *s, const char *name, double v)
{
	strbuf_printf(&s->text, " %s=\"", name);
	num(s, v);
	strbuf_put(&s->text, "\"", 1);
}

static void tag_attrs(struct svg *s, const struct svg_tag *t)
{
	if (!t)
		return;
	attr(s, "class", t->cls);
	attr(s, "fill", t->fill);
	attr(s, "stroke", t->stroke);
	if (t->data && t->value) {
		char name[64];
		snprintf(name, sizeof name, "data-%s", t->data);
		attr(s, name, t->value);
	}
}

/* Ends an element: with a <title> child when t has one, else self-closed. */
static void close_elem(struct svg *s, const char *name, const struct svg_tag *t)
{
	if (t && t->title) {
		strbuf_puts(&s->text, "><title>");
		esc(s, t->title);
		strbuf_printf(&s->text, "</title></%s>\n", name);
	} else
		strbuf_puts(&s->text, "/>\n");
}

/* An element of n numeric attributes and the tag's. */
static void elem(struct svg *s, const char *name, const char *const *keys, const double *values, size_t n,
		 const struct svg_tag *t)
{
	strbuf_printf(&s->text, "<%s", name);
	for (size_t i = 0; i < n; i++)
		attrn(s, keys[i], values[i]);
	tag_attrs(s, t);
	close_elem(s, name, t);
}

void svg_begin(struct svg *s, double width, double height, size_t max_bytes, const char *title,
	       const char *css)
{
	*s = (struct svg){ .text = { .max = max_bytes } };
	strbuf_puts(&s->text, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
		 "version=\"1.1\"");
	attrn(s, "width", width);
	attrn(s, "height", height);
	strbuf_puts(&s->text, " viewBox=\"0 0 ");
	num(s, width);
	strbuf_put(&s->text, " ", 1);
	num(s, height);
	strbuf_puts(&s->text, "\" font-family=\"sans-serif\" font-size=\"11\">\n<title>");
	esc(s, title ? title : "");
	strbuf_puts(&s->text, "</title>\n");
	if (css) {
		strbuf_puts(&s->text, "<style>");
		esc(s, css);
		strbuf_puts(&s->text, "</style>\n");
	}
	strbuf_puts(&s->text, "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n");
}

int svg_take(struct svg *s, char **out, size_t *len)
{
	strbuf_puts(&s->text, "</svg>\n");
	*out = strbuf_take(&s->text, len);
	int r = *out ? 0 : s->text.error;
	*s = (struct svg){ 0 };
	return r;
}

void svg_free(struct svg *s)
{
	strbuf_free(&s->text);
	*s = (struct svg){ 0 };
}

void svg_group(struct svg *s, const struct svg_tag *t)
{
	strbuf_puts(&s->text, "<g");
	tag_attrs(s, t);
	strbuf_puts(&s->text, ">\n");
	if (t && t->title) {
		strbuf_puts(&s->text, "<title>");
		esc(s, t->title);
		strbuf_puts(&s->text, "</title>\n");
	}
}

void svg_group_end(struct svg *s)
{
	strbuf_puts(&s->text, "</g>\n");
}

void svg_rect(struct svg *s, double x, double y, double w, double h, const struct svg_tag *t)
{
	if (!(w > 0) || !(h > 0)) /* also NaN */
		w = h = 0;
	elem(s, "rect", (const char *const[]){ "x", "y", "width", "height" }, (const double[]){ x, y, w, h }, 4, t);
}

void svg_line(struct svg *s, double x1, double y1, double x2, double y2, const struct svg_tag *t)
{
	elem(s, "line", (const char *const[]){ "x1", "y1", "x2", "y2" }, (const double[]){ x1, y1, x2, y2 }, 4, t);
}

void svg_polyline(struct svg *s, const double *x, const double *y, size_t n, const struct svg_tag *t)
{
	strbuf_puts(&s->text, "<polyline fill=\"none\" points=\"");
	for (size_t i = 0; i < n; i++)
		point(s, i ? " " : "", x[i], y[i]);
	strbuf_put(&s->text, "\"", 1);
	tag_attrs(s, t);
	close_elem(s, "polyline", t);
}

void svg_mark(struct svg *s, enum svg_shape shape, double x, double y, double r, const struct svg_tag *t)
{
	if (!(r > 0))
		r = 0;
	switch (shape) {
	case SVG_CIRCLE:
		elem(s, "circle", (const char *const[]){ "cx", "cy", "r" }, (const double[]){ x, y, r }, 3, t);
		return;
	case SVG_SQUARE:
		svg_rect(s, x - r, y - r, 2 * r, 2 * r, t);
		return;
	default:
		break;
	}
	/* the others as one path, relative moves after the first point */
	double k = 1.25 * r;
	strbuf_puts(&s->text, "<path d=\"");
	if (shape == SVG_TRIANGLE) {
		point(s, "M", x, y - 1.2 * r);
		point(s, "l", 1.1 * r, 1.9 * r);
		strbuf_puts(&s->text, "h");
		num(s, -2.2 * r);
		strbuf_puts(&s->text, "z\"");
	} else if (shape == SVG_DIAMOND) {
		point(s, "M", x, y - k);
		point(s, "l", k, k);
		point(s, "l", -k, k);
		point(s, "l", -k, -k);
		strbuf_puts(&s->text, "z\"");
	} else { /* SVG_CROSS: two strokes; drawn in the fill colour */
		point(s, "M", x - r, y - r);
		point(s, "l", 2 * r, 2 * r);
		point(s, "m", 0, -2 * r);
		point(s, "l", -2 * r, 2 * r);
		strbuf_puts(&s->text, "\" stroke-width=\"1.5\"");
		if (t && t->fill && !t->stroke)
			attr(s, "stroke", t->fill);
	}
	tag_attrs(s, t);
	close_elem(s, "path", t);
}

static void _printf_(7, 0) text_v(struct svg *s, double x, double y, const char *anchor, const char *cls,
				  const char *transform, const char *fmt, va_list ap)
{
	struct strbuf str = { 0 }; /* the text, escaped below */
	strbuf_vprintf(&str, fmt, ap);
	if (str.error) {
		s->text.error = s->text.error ? s->text.error : str.error;
		strbuf_free(&str);
		return;
	}
	strbuf_puts(&s->text, "<text");
	attrn(s, "x", x);
	attrn(s, "y", y);
	if (anchor && strcmp(anchor, "start") != 0)
		attr(s, "text-anchor", anchor);
	attr(s, "class", cls);
	if (transform)
		attr(s, "transform", transform);
	strbuf_put(&s->text, ">", 1);
	esc(s, str.p ? str.p : "");
	strbuf_puts(&s->text, "</text>\n");
	strbuf_free(&str);
}

void svg_text(struct svg *s, double x, double y, const char *anchor, const char *cls, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	text_v(s, x, y, anchor, cls, NULL, fmt, ap);
	va_end(ap);
}

void svg_text_up(struct svg *s, double x, double y, const char *cls, const char *fmt, ...)
{
	char tr[96];
	va_list ap;
	snprintf(tr, sizeof tr, "rotate(-90 %.1f %.1f)", isfinite(x) ? x : 0, isfinite(y) ? y : 0);
	va_start(ap, fmt);
	text_v(s, x, y, "middle", cls, tr, fmt, ap);
	va_end(ap);
}

double svg_scale_at(const struct svg_scale *sc, double v)
{
	double lo = sc->lo, hi = sc->hi, f;
	if (sc->log) {
		if (!(v > 0) || !(lo > 0) || !(hi > lo))
			return sc->p0;
		f = (log10(v) - log10(lo)) / (log10(hi) - log10(lo));
	} else {
		if (!(hi > lo) || isnan(v))
			return sc->p0;
		f = (v - lo) / (hi - lo);
	}
	if (f < 0)
		f = 0;
	if (f > 1)
		f = 1;
	return sc->p0 + f * (sc->p1 - sc->p0);
}

size_t svg_ticks(const struct svg_scale *sc, double *ticks, size_t max)
{
	size_t n = 0;
	double lo = sc->lo, hi = sc->hi;
	if (!(hi > lo) || !isfinite(lo) || !isfinite(hi) || max == 0)
		return 0;
	if (sc->log) {
		if (!(lo > 0))
			return 0;
		int d0 = (int)floor(log10(lo) + 1e-9), d1 = (int)floor(log10(hi) + 1e-9);
		static const double sub[] = { 1, 2, 5 };
		bool fine = d1 - d0 < 3;
		for (int d = d0; d <= d1 && n < max; d++)
			for (size_t k = 0; k < (fine ? 3u : 1u) && n < max; k++) {
				double v = sub[k] * pow(10, d);
				if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9))
					ticks[n++] = v;
			}
		return n;
	}
	/* the smallest step of 1, 2 or 5 × 10^k giving at most 8 intervals */
	double raw = (hi - lo) / 8, mag = pow(10, floor(log10(raw))), step = mag;
	static const double mult[] = { 1, 2, 5, 10 };
	for (size_t k = 0; k < ELEMENTSOF(mult); k++)
		if (mult[k] * mag >= raw * (1 - 1e-9)) {
			step = mult[k] * mag;
			break;
		}
	for (double v = ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9 && n < max; v += step)
		ticks[n++] = fabs(v) < step * 1e-9 ? 0 : v;
	return n;
}

void svg_axis(struct svg *s, const struct svg_scale *sc, bool vertical, double at, double label_factor,
	      const char *title)
{
	static const struct svg_tag axis = { .cls = "axis", .stroke = "#333" };
	double ticks[32];
	size_t n = svg_ticks(sc, ticks, ELEMENTSOF(ticks));
	double a = sc->p0, b = sc->p1;

	for (size_t i = 0; i < n; i++) {
		double p = svg_scale_at(sc, ticks[i]);
		if (vertical) {
			svg_line(s, at - 4, p, at, p, &axis);
			svg_text(s, at - 6, p + 4, "end", "tick", "%g", ticks[i] * label_factor);
		} else {
			svg_line(s, p, at, p, at + 4, &axis);
			svg_text(s, p, at + 15, "middle", "tick", "%g", ticks[i] * label_factor);
		}
	}
	if (vertical) {
		svg_line(s, at, a, at, b, &axis);
		if (title)
			svg_text_up(s, at - 40, (a + b) / 2, "label", "%s", title);
	} else {
		svg_line(s, a, at, b, at, &axis);
		if (title)
			svg_text(s, (a + b) / 2, at + 30, "middle", "label", "%s", title);
	}
}
