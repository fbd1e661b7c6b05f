/* SPDX-License-Identifier: MIT */
/*
 * chart.c: the three pictures of chart.h.  The geometry is the Torch-PIM rule's (Stage 1: C1,
 * C2; Stage 2: C3 BW_read >= θ, C4 f_store >= σ; Eq. 8's segments and transitions) and the JIT-Q
 * paper's schedule (a block's copies quantized on PIM while the accelerator computes earlier
 * blocks).
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "chart.h"
#include "svg.h"

#define WIDTH 960.0
#define PX0 80.0  /* plot area, left */
#define PX1 680.0 /* plot area, right */
#define NOTE_WIDTH 160 /* characters of a note's line */

static const char CSS[] =
	"text.title{font-size:16px;font-weight:bold}text.head{font-size:13px;font-weight:bold}"
	"text.sub{fill:#333}text.tick{fill:#555;font-size:10px}text.note{fill:#555;font-size:10px}"
	".dash{stroke-dasharray:6 3}.dot{stroke-dasharray:2 3}.marginal{stroke-width:1.5}";

/* ---------------------------------------------------------------- shared helpers */

/* Seconds with three significant digits in the largest unit below them. */
static void fmt_seconds(char *buf, size_t len, double s)
{
	static const struct {
		double scale;
		const char *unit;
	} units[] = { { 1, "s" }, { 1e3, "ms" }, { 1e6, "us" }, { 1e9, "ns" } };
	size_t u = 0;
	if (!isfinite(s) || s < 0) {
		snprintf(buf, len, "unknown");
		return;
	}
	while (s > 0 && s * units[u].scale < 1 && u + 1 < ELEMENTSOF(units))
		u++;
	snprintf(buf, len, "%.3g %s", s * units[u].scale, units[u].unit);
}

static void fmt_bytes(char *buf, size_t len, double b)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	size_t u = 0;
	while (fabs(b) >= 1024 && u + 1 < ELEMENTSOF(unit)) {
		b /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.2f %s" : "%.0f %s", b, unit[u]);
}

static int finish(struct svg *s, char **out, size_t *len, struct pim_error *err, const char *what)
{
	int r = svg_take(s, out, len);
	if (r == -E2BIG)
		return err_set(err, r, "%s chart: larger than %u MiB", what, CHART_MAX_BYTES >> 20);
	if (r < 0)
		return err_set(err, r, "%s chart: out of memory", what);
	return 0;
}

static void legend_mark(struct svg *s, double x, double y, enum svg_shape shape, const char *fill,
			const char *text)
{
	const struct svg_tag t = { .cls = "legend", .fill = fill };
	svg_mark(s, shape, x, y - 4, 4.5, &t);
	svg_text(s, x + 12, y, "start", "sub", "%s", text);
}

static void legend_line(struct svg *s, double x, double y, const char *cls, const char *stroke,
			const char *text)
{
	const struct svg_tag t = { .cls = cls, .stroke = stroke };
	svg_line(s, x - 6, y - 4, x + 8, y - 4, &t);
	svg_text(s, x + 12, y, "start", "sub", "%s", text);
}

/*
 * Draws text from (x, y) in lines of at most width characters, broken at spaces, and returns the
 * number of lines; with s NULL it only counts them.
 */
static size_t text_wrapped(struct svg *s, double x, double y, size_t width, const char *cls, const char *text)
{
	size_t lines = 0;
	const char *p = text;
	while (*p) {
		size_t n = strlen(p), cut = n;
		if (n > width) {
			/* the last space within the width (counting bytes: a little short for UTF-8) */
			cut = width;
			while (cut > 0 && p[cut] != ' ')
				cut--;
			if (cut == 0)
				cut = width;
		}
		if (s)
			svg_text(s, x + (lines ? 12 : 0), y + 13.0 * (double)lines, "start", cls, "%.*s", (int)cut, p);
		lines++;
		p += cut;
		while (*p == ' ')
			p++;
	}
	return lines;
}

/* ---------------------------------------------------------------- placement */

static const char *evidence_word(enum pim_evidence e)
{
	switch (e) {
	case PIM_EVIDENCE_COUNTERS: return "counters";
	case PIM_EVIDENCE_ESTIMATE: return "estimate";
	case PIM_EVIDENCE_IMPORTED: return "imported";
	default: return "none";
	}
}

/* Shape by evidence: counters a circle, estimate a triangle, imported a diamond, none a cross. */
static enum svg_shape evidence_shape(enum pim_evidence e)
{
	switch (e) {
	case PIM_EVIDENCE_COUNTERS: return SVG_CIRCLE;
	case PIM_EVIDENCE_ESTIMATE: return SVG_TRIANGLE;
	case PIM_EVIDENCE_IMPORTED: return SVG_DIAMOND;
	default: return SVG_CROSS;
	}
}

static enum pim_cond_state cond_state(const struct pim_region_decision *d, int c)
{
	return d->n_conditions == 4 ? d->conditions[c].state : PIM_COND_SKIPPED;
}

static double cond_lhs(const struct pim_region_decision *d, int c)
{
	return d->n_conditions == 4 ? d->conditions[c].lhs : NAN;
}

static char cond_char(enum pim_cond_state st)
{
	switch (st) {
	case PIM_COND_TRUE: return 'y';
	case PIM_COND_FALSE: return 'n';
	case PIM_COND_NO_DATA: return '?';
	default: return '.';
	}
}

/* The colour of the ring around a marginal decision's mark. */
#define CHART_MARGINAL_COLOUR "#111"

/* "T_ctx (C1) and θ (C3)": the thresholds whose measured noise can change d's side. */
static void marginal_words(const struct pim_region_decision *d, char *buf, size_t len)
{
	static const char *const what[4] = { "T_ctx (C1)", "N_core (C2)", "θ (C3)", "σ (C4)" };
	size_t pos = 0;

	buf[0] = '\0';
	for (int c = 0; c < 4 && pos < len; c++)
		if (d->marginal_on & 1u << c) {
			int k = snprintf(buf + pos, len - pos, "%s%s", pos ? " and " : "", what[c]);
			pos += k > 0 ? (size_t)k : 0;
		}
}

static void region_title(const struct pim_region_decision *d, char *buf, size_t len)
{
	char bw[48], fs[32], t[32], marg[96] = "";
	double b = cond_lhs(d, 2), f = cond_lhs(d, 3);
	if (isfinite(b))
		snprintf(bw, sizeof bw, "%.3g GB/s%s", b / 1e9, d->bw_estimated ? " (estimated)" : "");
	else
		snprintf(bw, sizeof bw, "unknown");
	if (isfinite(f))
		snprintf(fs, sizeof fs, "%.3f", f);
	else
		snprintf(fs, sizeof fs, "unknown");
	fmt_seconds(t, sizeof t, d->t_host);
	if (d->marginal)
		marginal_words(d, marg, sizeof marg);
	snprintf(buf, len, "region %u %s (%s): %s%s, evidence %s\nBW_read %s, f_store %s, T_host %s x trip %" PRIu64
		 "\nC1 %c C2 %c C3 %c C4 %c: %s", d->region_id, d->name, d->op, d->pim ? "PIM" : "host",
		 d->marginal ? " (marginal)" : "", evidence_word(d->evidence), bw, fs, t, d->trip ? d->trip : 1,
		 cond_char(cond_state(d, 0)), cond_char(cond_state(d, 1)), cond_char(cond_state(d, 2)),
		 cond_char(cond_state(d, 3)), d->reason);
	if (d->marginal) {
		size_t n = strlen(buf);
		snprintf(buf + n, len - n, "\nmarginal: within the measured noise of %s", marg);
	}
}

/*
 * A ring around the mark at (x, y) of a marginal decision: of region id (count 1), or of count
 * regions aggregated into one mark.  Its data-marginal (one) or data-marginals (several) attribute
 * counts marginal decisions apart from data-region(s), which count regions.
 */
static void marginal_ring(struct svg *s, double x, double y, double r, const struct pim_region_decision *d,
			  size_t count)
{
	char title[160], value[32], marg[96];

	marginal_words(d, marg, sizeof marg);
	if (count == 1) {
		snprintf(title, sizeof title, "region %u: marginal, within the measured noise of %s", d->region_id,
			 marg);
		snprintf(value, sizeof value, "%u", d->region_id);
	} else {
		snprintf(title, sizeof title, "%zu marginal decisions here, e.g. region %u: within the measured "
			 "noise of %s", count, d->region_id, marg);
		snprintf(value, sizeof value, "%zu", count);
	}
	svg_mark(s, SVG_CIRCLE, x, y, r, &(struct svg_tag){ .cls = "marginal", .fill = "none",
							    .stroke = CHART_MARGINAL_COLOUR, .title = title,
							    .data = count == 1 ? "marginal" : "marginals",
							    .value = value });
}

/* A region's place in the rule's picture. */
struct item {
	double x, y;
	const struct pim_region_decision *d;
	uint64_t cell; /* aggregation key: cell, decision, marginal, evidence */
};

static int item_cmp(const void *a, const void *b)
{
	const struct item *p = a, *q = b;
	if (p->cell != q->cell)
		return p->cell < q->cell ? -1 : 1;
	return p->d->region_id < q->d->region_id ? -1 : p->d->region_id > q->d->region_id;
}

/* One mark per item, or (above CHART_MARKS_ONE) one per cell, decision, marginal and evidence; a
 * marginal decision's mark is ringed. */
static void draw_items(struct svg *s, struct item *it, size_t n)
{
	char title[1024], value[32];
	if (n <= CHART_MARKS_ONE) {
		for (size_t i = 0; i < n; i++) {
			const struct pim_region_decision *d = it[i].d;
			region_title(d, title, sizeof title);
			snprintf(value, sizeof value, "%u", d->region_id);
			const struct svg_tag t = { .cls = d->pim ? "mark pim" : "mark host",
						   .fill = d->pim ? CHART_PIM_COLOUR : CHART_HOST_COLOUR,
						   .title = title, .data = "region", .value = value };
			svg_mark(s, evidence_shape(d->evidence), it[i].x, it[i].y, 4, &t);
			if (d->marginal)
				marginal_ring(s, it[i].x, it[i].y, 7, d, 1);
		}
		return;
	}
	for (size_t i = 0; i < n; i++) {
		long cx = lround(it[i].x / CHART_CELL_PX), cy = lround(it[i].y / CHART_CELL_PX);
		it[i].cell = ((uint64_t)(cx & 0xffff) << 32) | ((uint64_t)(cy & 0xffff) << 16) |
			     ((uint64_t)it[i].d->pim << 9) | ((uint64_t)it[i].d->marginal << 8) |
			     (uint64_t)(it[i].d->evidence & 0xff);
	}
	qsort(it, n, sizeof *it, item_cmp);
	for (size_t i = 0; i < n;) {
		size_t j = i;
		double lo = HUGE_VAL, hi = -HUGE_VAL;
		while (j < n && it[j].cell == it[i].cell) {
			double b = cond_lhs(it[j].d, 2);
			if (isfinite(b)) {
				lo = fmin(lo, b);
				hi = fmax(hi, b);
			}
			j++;
		}
		const struct pim_region_decision *d = it[i].d;
		if (j - i == 1)
			region_title(d, title, sizeof title);
		else
			snprintf(title, sizeof title, "%zu regions here (%s, evidence %s), e.g. region %u %s; BW_read "
				 "%.3g to %.3g GB/s", j - i, d->pim ? "PIM" : "host", evidence_word(d->evidence),
				 d->region_id, d->name, isfinite(lo) ? lo / 1e9 : NAN, isfinite(hi) ? hi / 1e9 : NAN);
		if (j - i == 1)
			snprintf(value, sizeof value, "%u", d->region_id);
		else
			snprintf(value, sizeof value, "%zu", j - i);
		const struct svg_tag t = { .cls = d->pim ? "mark pim" : "mark host",
					   .fill = d->pim ? CHART_PIM_COLOUR : CHART_HOST_COLOUR, .title = title,
					   .data = j - i == 1 ? "region" : "regions", .value = value };
		svg_mark(s, evidence_shape(d->evidence), it[i].x, it[i].y, j - i == 1 ? 4 : 5, &t);
		if (d->marginal)
			marginal_ring(s, it[i].x, it[i].y, j - i == 1 ? 7 : 8, d, j - i);
		i = j;
	}
}

static int order_cmp(const void *a, const void *b)
{
	const struct pim_region_decision *p = *(const struct pim_region_decision *const *)a, *q = *(const struct pim_region_decision *const *)b;
	return p->order < q->order ? -1 : p->order > q->order;
}

static double host_time(const struct pim_region_decision *d)
{
	double t = d->t_host * (double)(d->trip ? d->trip : 1);
	return isfinite(t) && t > 0 ? t : 0;
}

/* A region's width in the strip: its share of the all-host time, or equal shares when none was
 * measured. */
static double piece_width(const struct pim_region_decision *d, bool equal, double total, double span, size_t n)
{
	return equal ? span / (double)n : host_time(d) / total * span;
}

/* The model in program order: width ∝ T_host × trip, colour by decision, PIM segments above. */
static double draw_strip(struct svg *s, const struct pim_placement *r, const struct pim_placement_estimate *e,
			 double top)
{
	const double x0 = PX0, x1 = WIDTH - 40, h = 26;
	size_t n = e->n_regions;
	char title[1024], value[32];

	svg_text(s, PX0 - 60, top, "start", "head", "The model in program order (width: T_host x trip; "
		 "brackets: PIM segments)");
	top += 18;
	const struct pim_region_decision **ord = malloc((n ? n : 1) * sizeof *ord);
	if (!ord) {
		s->text.error = s->text.error ? s->text.error : -ENOMEM;
		return top + h + 40;
	}
	double total = 0;
	for (size_t i = 0; i < n; i++) {
		ord[i] = &e->regions[i];
		total += host_time(ord[i]);
	}
	qsort(ord, n, sizeof *ord, order_cmp);
	bool equal = !(total > 0);
	double span = x1 - x0, x = x0;
	svg_group(s, &(struct svg_tag){ .cls = "strip" });
	/* runs narrower than 2 px with one decision merge into one rectangle */
	for (size_t i = 0; i < n;) {
		double w = piece_width(ord[i], equal, total, span, n);
		size_t j = i + 1;
		if (w < 2)
			while (j < n && w < 2 && ord[j]->pim == ord[i]->pim &&
			       piece_width(ord[j], equal, total, span, n) < 2)
				w += piece_width(ord[j++], equal, total, span, n);
		const struct pim_region_decision *d = ord[i];
		if (j - i == 1) {
			region_title(d, title, sizeof title);
			snprintf(value, sizeof value, "%u", d->region_id);
		} else {
			snprintf(title, sizeof title, "%zu regions in program order, from region %u %s to region %u %s: %s",
				 j - i, d->region_id, d->name, ord[j - 1]->region_id, ord[j - 1]->name,
				 d->pim ? "PIM" : "host");
			snprintf(value, sizeof value, "%zu", j - i);
		}
		const struct svg_tag t = { .cls = d->pim ? "piece pim" : "piece host",
					   .fill = d->pim ? CHART_PIM_COLOUR : CHART_HOST_COLOUR, .title = title,
					   .data = j - i == 1 ? "region" : "regions", .value = value };
		svg_rect(s, x, top + 8, w, h, &t);
		x += w;
		i = j;
	}
	svg_group_end(s);
	/* PIM segments: maximal runs of consecutive PIM regions; each is two transitions (Eq. 8) */
	svg_group(s, &(struct svg_tag){ .cls = "segments" });
	x = x0;
	double bx0 = 0, bx1 = -1e9;
	size_t bcount = 0, seg = 0, first = 0;
	for (size_t i = 0; i <= n; i++) {
		bool pim = i < n && ord[i]->pim, prev = i > 0 && ord[i - 1]->pim;
		if (pim && !prev) {
			/* a segment starts: join the open bracket when it is less than a pixel away */
			if (bcount && x - bx1 >= 1) {
				snprintf(value, sizeof value, "%zu", bcount);
				snprintf(title, sizeof title, "%zu PIM segment%s (%zu transitions), from region %u", bcount,
					 bcount == 1 ? "" : "s", 2 * bcount, ord[first]->region_id);
				svg_rect(s, bx0, top, fmax(bx1 - bx0, 1), 5,
					 &(struct svg_tag){ .cls = "segment", .fill = "#555", .title = title,
							    .data = "segments", .value = value });
				bcount = 0;
			}
			if (!bcount) {
				bx0 = x;
				first = i;
			}
			bcount++;
			seg++;
		}
		if (i == n)
			break;
		x += piece_width(ord[i], equal, total, span, n);
		if (pim)
			bx1 = x;
	}
	if (bcount) {
		snprintf(value, sizeof value, "%zu", bcount);
		snprintf(title, sizeof title, "%zu PIM segment%s (%zu transitions), from region %u", bcount,
			 bcount == 1 ? "" : "s", 2 * bcount, ord[first]->region_id);
		svg_rect(s, bx0, top, fmax(bx1 - bx0, 1), 5,
			 &(struct svg_tag){ .cls = "segment", .fill = "#555", .title = title, .data = "segments",
					    .value = value });
	}
	svg_group_end(s);
	free(ord);
	const struct pim_movement *m = e->movement.model ? &e->movement : NULL;
	char tm[32];
	fmt_seconds(tm, sizeof tm, m ? m->t_move : NAN);
	svg_text(s, x0, top + h + 24, "start", "sub",
		 "%zu regions, %zu PIM segments in program order; movement model %s: %" PRIu64 " segments, %" PRIu64
		 " transitions, T_move %s%s", n, seg, m ? m->model : r->movement, m ? m->segments : 0,
		 m ? m->transitions : 0, tm, equal ? " (no T_host measured: equal widths)" : "");
	return top + h + 40;
}

/* Speedup against PIM cores, with the movement-aware bound and 1/residual. */
static double draw_speedup(struct svg *s, const struct pim_placement *r, double top)
{
	const double y0 = top + 24, y1 = top + 214;
	size_t n = r->n_estimates;
	double cmin = HUGE_VAL, cmax = 0, ymax = 1;
	char title[256], value[32];

	svg_text(s, PX0 - 60, top, "start", "head", "Estimated speedup against PIM cores (an estimate: "
		 "T_pim from its compute or bandwidth term)");
	for (size_t i = 0; i < n; i++) {
		const struct pim_placement_estimate *e = &r->estimates[i];
		cmin = fmin(cmin, e->n_core);
		cmax = fmax(cmax, e->n_core);
		if (isfinite(e->speedup))
			ymax = fmax(ymax, e->speedup);
		if (e->bound_movement > 0 && isfinite(e->bound_movement))
			ymax = fmax(ymax, e->bound_movement);
	}
	/* 1/residual joins the scale unless it would flatten the rest */
	double top_all = ymax;
	for (size_t i = 0; i < n; i++)
		if (isfinite(r->estimates[i].bound) && r->estimates[i].bound <= 4 * ymax)
			top_all = fmax(top_all, r->estimates[i].bound);
	ymax = top_all * 1.15;
	bool one = !(cmax > cmin);
	struct svg_scale xs = { .lo = one ? cmin / 2 : cmin / 1.3, .hi = one ? cmin * 2 : cmax * 1.3, .p0 = PX0,
				.p1 = PX1, .log = true };
	struct svg_scale ys = { .lo = 0, .hi = ymax, .p0 = y1, .p1 = y0 };
	if (!(cmin > 0))
		xs = (struct svg_scale){ .lo = 0, .hi = 1, .p0 = PX0, .p1 = PX1 };
	svg_axis(s, &ys, true, PX0, 1, "speedup (x)");
	svg_line(s, PX0, y1, PX1, y1, &(struct svg_tag){ .cls = "axis", .stroke = "#333" });
	for (size_t i = 0; i < n; i++) {
		double x = svg_scale_at(&xs, r->estimates[i].n_core);
		svg_line(s, x, y1, x, y1 + 4, &(struct svg_tag){ .stroke = "#333" });
		svg_text(s, x, y1 + 15, "middle", "tick", "%g", r->estimates[i].n_core);
	}
	svg_text(s, (PX0 + PX1) / 2, y1 + 30, "middle", "label", "PIM cores (N_core)");
	double one_y = svg_scale_at(&ys, 1);
	svg_line(s, PX0, one_y, PX1, one_y, &(struct svg_tag){ .cls = "dot", .stroke = "#999",
							       .title = "1x: everything on the host" });
	double *px = malloc((2 * n + 1) * sizeof *px), *py = px ? px + n : NULL;
	if (!px) {
		s->text.error = s->text.error ? s->text.error : -ENOMEM;
		return y1 + 50;
	}
	/* the three series: speedup, movement-aware bound, 1/residual when it fits the scale */
	for (int series = 0; series < 3; series++) {
		size_t k = 0;
		static const char *const cls[] = { "speedup", "bound-move", "bound" };
		static const char *const colour[] = { "#222", "#7570b3", "#1b9e77" };
		for (size_t i = 0; i < n; i++) {
			const struct pim_placement_estimate *e = &r->estimates[i];
			double v = series == 0 ? e->speedup : series == 1 ? e->bound_movement : e->bound;
			if (!(v > 0) || !isfinite(v) || v > ymax)
				continue;
			px[k] = svg_scale_at(&xs, e->n_core);
			py[k] = svg_scale_at(&ys, v);
			if (series == 0)
				snprintf(title, sizeof title, "N_core %g: speedup %.3fx (estimate), %u regions on PIM, "
					 "captured %.1f%%, residual %.1f%%", e->n_core, v, e->offloaded,
					 100 * e->captured_share, 100 * e->residual_share);
			else if (series == 1)
				snprintf(title, sizeof title, "N_core %g: %.3fx as N_core grows without limit (T_move "
					 "stays)", e->n_core, v);
			else
				snprintf(title, sizeof title, "N_core %g: %.3fx = 1/residual (no movement, no PIM time)",
					 e->n_core, v);
			snprintf(value, sizeof value, "%g", e->n_core);
			svg_mark(s, series == 0 ? SVG_CIRCLE : SVG_SQUARE, px[k], py[k], series == 0 ? 4 : 3,
				 &(struct svg_tag){ .cls = cls[series], .fill = colour[series], .title = title,
						    .data = "cores", .value = value });
			k++;
		}
		if (k > 1)
			svg_polyline(s, px, py, k, &(struct svg_tag){ .cls = series ? "dash" : NULL,
								       .stroke = colour[series] });
	}
	free(px);
	double ly = y0 + 10;
	legend_mark(s, PX1 + 40, ly, SVG_CIRCLE, "#222", "estimated speedup");
	legend_mark(s, PX1 + 40, ly + 18, SVG_SQUARE, "#7570b3", "bound with movement (N_core -> inf)");
	legend_mark(s, PX1 + 40, ly + 36, SVG_SQUARE, "#1b9e77", "1/residual (no movement)");
	for (size_t i = 0; i < n; i++)
		if (r->estimates[i].bound > ymax && isfinite(r->estimates[i].bound)) {
			svg_text(s, PX1 + 40, ly + 58, "start", "note", "1/residual above the scale: %.3gx",
				 r->estimates[i].bound);
			break;
		}
	return y1 + 50;
}

int chart_placement(const struct pim_placement *r, char **out, size_t *len, struct pim_error *err)
{
	struct svg s;
	const struct pim_placement_estimate *e = r->n_estimates ? &r->estimates[0] : NULL;
	size_t n = e ? e->n_regions : 0;
	double theta = r->params.theta > 0 ? r->params.theta : NAN, sigma = r->params.theta > 0 ? r->params.sigma : NAN;
	size_t note_lines = 0;
	for (size_t i = 0; i < r->n_notes; i++)
		note_lines += text_wrapped(NULL, 0, 0, NOTE_WIDTH, NULL, r->notes[i]) ;
	double height = 1010 + 13.0 * (double)note_lines;
	char title[512];

	snprintf(title, sizeof title, "Placement of %s: granularity %s, movement model %s", r->model,
		 r->granularity, r->movement);
	svg_begin(&s, WIDTH, height, CHART_MAX_BYTES, title, CSS);
	svg_text(&s, 20, 26, "start", "title", "%s", title);
	if (r->params.theta > 0)
		svg_text(&s, 20, 44, "start", "sub", "Platform %s; θ %.2f GB/s, σ %.2f, T_ctx %g s, f_pim %g Hz, "
			 "B_cpu %.2f GB/s%s", r->platform, theta / 1e9, sigma, r->params.t_ctx, r->params.f_pim,
			 r->params.b_cpu / 1e9, r->cached ? " (stored answer)" : "");

	/* -------- the rule: BW_read (log) against f_store, Stage-1 failures apart */
	const double y0 = 100, y1 = 330, unknown_y = 352, s1_top = 425;
	struct item *stage2 = calloc(n ? n : 1, sizeof *stage2), *stage1 = calloc(n ? n : 1, sizeof *stage1);
	size_t n2 = 0, n1 = 0, n1_by[3] = { 0 };
	if (!stage2 || !stage1) {
		free(stage2);
		free(stage1);
		svg_free(&s);
		return err_set(err, -ENOMEM, "placement chart: out of memory");
	}
	double lo = HUGE_VAL, hi = 0;
	if (theta > 0) {
		lo = hi = theta;
	}
	for (size_t i = 0; i < n; i++) {
		double b = cond_lhs(&e->regions[i], 2);
		if (b > 0 && isfinite(b)) {
			lo = fmin(lo, b);
			hi = fmax(hi, b);
		}
	}
	if (!(hi > 0)) {
		lo = 1e9;
		hi = 1e10;
	}
	struct svg_scale xs = { .lo = pow(10, floor(log10(lo / 1.5))), .hi = pow(10, ceil(log10(hi * 1.5))),
				.p0 = PX0, .p1 = PX1, .log = true };
	struct svg_scale ys = { .lo = 0, .hi = 1, .p0 = y1, .p1 = y0 };
	const double unknown_x = PX0 - 16;
	for (size_t i = 0; i < n; i++) {
		const struct pim_region_decision *d = &e->regions[i];
		double b = cond_lhs(d, 2), f = cond_lhs(d, 3);
		double x = b > 0 && isfinite(b) ? svg_scale_at(&xs, b) : unknown_x;
		bool c1 = cond_state(d, 0) == PIM_COND_TRUE, c2 = cond_state(d, 1) == PIM_COND_TRUE;
		if (c1 && c2) {
			stage2[n2++] = (struct item){ .x = x, .y = isfinite(f) ? svg_scale_at(&ys, f) : unknown_y, .d = d };
			continue;
		}
		int row = !c1 && !c2 ? 2 : !c1 ? 0 : 1;
		n1_by[row]++;
		stage1[n1++] = (struct item){ .x = x, .y = s1_top + 26 + 20 * row, .d = d };
	}
	char head[256];
	if (e)
		snprintf(head, sizeof head, "The rule at N_core = %g: %zu regions passed Stage 1 (C1, C2); "
			 "PIM when C3 or C4 holds; marginal decisions (ringed): %u", e->n_core, n2, e->marginal);
	else
		snprintf(head, sizeof head, "The rule: no estimate in the answer");
	svg_text(&s, PX0 - 60, 74, "start", "head", "%s", head);
	svg_axis(&s, &ys, true, PX0 - 30, 1, "f_store (C4)");
	svg_axis(&s, &xs, false, unknown_y + 14, 1e-9, NULL);
	svg_text(&s, unknown_x - 18, unknown_y + 4, "end", "tick", "f_store ?");
	svg_text(&s, unknown_x, unknown_y + 29, "middle", "tick", "?");
	svg_text(&s, (PX0 + PX1) / 2, unknown_y + 44, "middle", "label", "BW_read (GB/s, log scale; C3)");
	/* θ and σ: the thresholds of Stage 2 */
	char tv[64], lt[96];
	if (theta > 0) {
		double tx = svg_scale_at(&xs, theta);
		snprintf(tv, sizeof tv, "%.17g", theta);
		snprintf(lt, sizeof lt, "θ = %.2f GB/s: C3 holds at and right of this line", theta / 1e9);
		svg_line(&s, tx, y0 - 6, tx, unknown_y + 10, &(struct svg_tag){ .cls = "theta dash", .stroke = "#c00",
										 .title = lt, .data = "theta", .value = tv });
		svg_text(&s, tx + 4, y0 - 8, "start", "sub", "θ %.2f GB/s", theta / 1e9);
	}
	if (sigma >= 0 && sigma <= 1) {
		double sy = svg_scale_at(&ys, sigma);
		snprintf(tv, sizeof tv, "%.17g", sigma);
		snprintf(lt, sizeof lt, "σ = %.2f: C4 holds at and above this line", sigma);
		svg_line(&s, PX0 - 30, sy, PX1, sy, &(struct svg_tag){ .cls = "sigma dash", .stroke = "#c00",
									.title = lt, .data = "sigma", .value = tv });
		svg_text(&s, PX1 + 4, sy + 4, "start", "sub", "σ %.2f", sigma);
	}
	svg_group(&s, &(struct svg_tag){ .cls = "stage2" });
	draw_items(&s, stage2, n2);
	svg_group_end(&s);

	/* legend beside the rule */
	double lx = PX1 + 60, ly = y0 + 20;
	svg_text(&s, lx - 10, ly - 16, "start", "head", "Legend");
	legend_mark(&s, lx, ly, SVG_SQUARE, CHART_PIM_COLOUR, "runs on PIM");
	legend_mark(&s, lx, ly + 18, SVG_SQUARE, CHART_HOST_COLOUR, "stays on the host");
	legend_mark(&s, lx, ly + 44, SVG_CIRCLE, "#666", "hardware counters");
	legend_mark(&s, lx, ly + 62, SVG_TRIANGLE, "#666", "estimate (timing backend)");
	legend_mark(&s, lx, ly + 80, SVG_DIAMOND, "#666", "imported (perf stat)");
	legend_mark(&s, lx, ly + 98, SVG_CROSS, "#666", "no measurements");
	svg_mark(&s, SVG_CIRCLE, lx, ly + 116 - 4, 7, &(struct svg_tag){ .cls = "legend marginal", .fill = "none",
									  .stroke = CHART_MARGINAL_COLOUR });
	svg_text(&s, lx + 12, ly + 116, "start", "sub", "marginal: within the measured");
	svg_text(&s, lx + 12, ly + 130, "start", "sub", "noise of T_ctx, θ or σ");
	legend_line(&s, lx, ly + 156, "dash", "#c00", "thresholds θ (C3), σ (C4)");
	svg_text(&s, lx - 10, ly + 182, "start", "note", "a larger mark stands for several");
	svg_text(&s, lx - 10, ly + 196, "start", "note", "regions (hover for the count)");

	/* Stage-1 failures: the same BW_read axis, one row per failing condition */
	static const char *const s1_text[3] = {
		"C1 fails: T_host <= T_ctx + PIM compute",
		"C2 fails: N_par < N_core",
		"C1 and C2 fail",
	};
	static const char *const s1_formula[3] = {
		"C1 does not hold: T_host > T_ctx + N_total·I_min/(N_core·f_pim)",
		"C2 does not hold: N_par >= N_core",
		"neither C1 nor C2 holds",
	};
	static const char *const s1_cls[3] = { "stage1 c1", "stage1 c2", "stage1 c1 c2" };
	svg_text(&s, PX0 - 60, s1_top, "start", "head", "Stage 1 failures (%zu regions; stay on the host, "
		 "Stage 2 not evaluated)", n1);
	for (int row = 0; row < 3; row++) {
		double y = s1_top + 26 + 20 * row;
		svg_line(&s, PX0, y, PX1, y, &(struct svg_tag){ .stroke = "#eee" });
		svg_group(&s, &(struct svg_tag){ .title = s1_formula[row] });
		svg_text(&s, PX1 + 10, y + 4, "start", "sub", "%s (%zu)", s1_text[row], n1_by[row]);
		svg_group_end(&s);
	}
	for (int row = 0; row < 3; row++) {
		size_t k = 0;
		for (size_t i = 0; i < n1; i++)
			if (lround((stage1[i].y - s1_top - 26) / 20) == row)
				stage2[k++] = stage1[i]; /* stage2's array is free to reuse now */
		svg_group(&s, &(struct svg_tag){ .cls = s1_cls[row] });
		draw_items(&s, stage2, k);
		svg_group_end(&s);
	}
	free(stage1);
	free(stage2);

	double y = s1_top + 105;
	if (e)
		y = draw_strip(&s, r, e, y);
	y = draw_speedup(&s, r, y + 10);
	for (size_t i = 0; i < r->n_notes; i++) {
		char note[1024];
		snprintf(note, sizeof note, "note: %s", r->notes[i]);
		y += 13.0 * (double)text_wrapped(&s, 20, y, NOTE_WIDTH, "note", note);
	}
	return finish(&s, out, len, err, "placement");
}

/* ---------------------------------------------------------------- calibration */

static const char *const palette[] = { "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02",
				       "#a6761d", "#666666" };

/*
 * A series drawn as a polyline of at most about two points per pixel column: above that, each
 * column keeps its first, lowest, highest and last point in θ order (what a line shows there).
 */
static void series(struct svg *s, const struct pim_calibrate_point *pts, size_t n, const struct svg_scale *xs,
		   const struct svg_scale *ys, double (*value)(const struct pim_calibrate_point *), const struct svg_tag *t)
{
	double *px = malloc((n ? n : 1) * 2 * sizeof *px), *py = px ? px + n : NULL;
	size_t k = 0;
	if (!px) {
		s->text.error = s->text.error ? s->text.error : -ENOMEM;
		return;
	}
	bool thin = n > 2 * (size_t)fabs(xs->p1 - xs->p0);
	for (size_t i = 0; i < n;) {
		double x = svg_scale_at(xs, pts[i].theta);
		size_t j = i + 1;
		if (thin)
			while (j < n && lround(svg_scale_at(xs, pts[j].theta)) == lround(x))
				j++;
		/* the column's first, lowest, highest and last points, in θ order */
		size_t lo = i, hi = i;
		for (size_t q = i; q < j; q++) {
			if (value(&pts[q]) < value(&pts[lo]))
				lo = q;
			if (value(&pts[q]) > value(&pts[hi]))
				hi = q;
		}
		size_t keep[4] = { i, lo < hi ? lo : hi, lo < hi ? hi : lo, j - 1 };
		for (size_t q = 0; q < 4; q++) {
			if (q && keep[q] == keep[q - 1])
				continue;
			px[k] = svg_scale_at(xs, pts[keep[q]].theta);
			py[k++] = svg_scale_at(ys, value(&pts[keep[q]]));
		}
		i = j;
	}
	svg_polyline(s, px, py, k, t);
	free(px);
}

static double point_accuracy(const struct pim_calibrate_point *p) { return p->accuracy; }
static double point_fp(const struct pim_calibrate_point *p) { return p->fp; }
static double point_fn(const struct pim_calibrate_point *p) { return p->fn; }

int chart_calibrate(const struct pim_calibration *r, const char *model, char **out, size_t *len,
		    struct pim_error *err)
{
	struct svg s;
	char title[512], value[64], tip[512];
	const double y0 = 90, y1 = 330, f0 = 400, f1 = 600;
	double lo = HUGE_VAL, hi = -HUGE_VAL, errmax = 1;
	const struct pim_calibrate_point *best = r->best < r->n_suggestions ? &r->suggestions[r->best] : NULL;

	snprintf(title, sizeof title, "Calibration of %s: %u labelled regions, %u beneficial", model, r->labelled,
		 r->beneficial);
	svg_begin(&s, WIDTH, 700, CHART_MAX_BYTES, title, CSS);
	svg_text(&s, 20, 26, "start", "title", "%s", title);
	for (size_t i = 0; i < r->n_points; i++) {
		lo = fmin(lo, r->points[i].theta);
		hi = fmax(hi, r->points[i].theta);
		if (!best || r->points[i].sigma == best->sigma)
			errmax = fmax(errmax, fmax(r->points[i].fp, r->points[i].fn));
	}
	if (!(hi > lo)) {
		lo = isfinite(lo) ? lo / 2 : 0;
		hi = isfinite(hi) && hi > 0 ? hi * 2 : 1;
	}
	struct svg_scale xs = { .lo = lo, .hi = hi, .p0 = PX0, .p1 = PX1 };
	struct svg_scale ys = { .lo = 0, .hi = 1, .p0 = y1, .p1 = y0 };
	struct svg_scale es = { .lo = 0, .hi = errmax * 1.1, .p0 = f1, .p1 = f0 };

	svg_text(&s, PX0 - 60, y0 - 24, "start", "head", "Accuracy against θ (the share of labelled regions "
		 "decided as their label says)");
	/* the chosen θ: the midpoint of the interval with the fewest false positives at the best σ;
	 * the interval shaded behind both plots */
	if (best) {
		double a = svg_scale_at(&xs, r->suggestion_lo[r->best]), b = svg_scale_at(&xs, r->suggestion_hi[r->best]);
		snprintf(tip, sizeof tip, "θ from %.3f to %.3f GB/s: the fewest false positives at σ %.2f",
			 r->suggestion_lo[r->best] / 1e9, r->suggestion_hi[r->best] / 1e9, best->sigma);
		svg_rect(&s, a, y0, fmax(b - a, 1), y1 - y0, &(struct svg_tag){ .cls = "interval", .fill = "#f3e3d3",
										 .title = tip });
		svg_rect(&s, a, f0, fmax(b - a, 1), f1 - f0, &(struct svg_tag){ .fill = "#f3e3d3", .title = tip });
	}
	svg_axis(&s, &ys, true, PX0, 1, "accuracy");
	svg_axis(&s, &xs, false, y1, 1e-9, "θ (GB/s)");
	if (best) {
		double x = svg_scale_at(&xs, best->theta);
		snprintf(value, sizeof value, "%.17g", best->theta);
		snprintf(tip, sizeof tip, "chosen θ %.3f GB/s at σ %.2f: %u selected, %u false positives, %u false "
			 "negatives, accuracy %.3f", best->theta / 1e9, best->sigma, best->selected, best->fp, best->fn,
			 best->accuracy);
		svg_line(&s, x, y0 - 6, x, f1, &(struct svg_tag){ .cls = "chosen dash", .stroke = "#c00", .title = tip,
								   .data = "theta", .value = value });
		/* right of the line, or left of it near the plot's right edge (the legend is there) */
		bool left = x > PX1 - 150;
		svg_text(&s, left ? x - 4 : x + 4, y0 - 8, left ? "end" : "start", "sub", "chosen θ %.3f GB/s",
			 best->theta / 1e9);
	}
	/* one accuracy curve per σ (points arrive grouped by σ, θ ascending) */
	size_t curves = 0;
	for (size_t i = 0; i < r->n_points;) {
		size_t j = i;
		while (j < r->n_points && r->points[j].sigma == r->points[i].sigma)
			j++;
		const char *colour = palette[curves % ELEMENTSOF(palette)];
		snprintf(value, sizeof value, "%.17g", r->points[i].sigma);
		snprintf(tip, sizeof tip, "accuracy at σ %.2f, θ %.3f to %.3f GB/s (%zu values)", r->points[i].sigma,
			 r->points[i].theta / 1e9, r->points[j - 1].theta / 1e9, j - i);
		series(&s, r->points + i, j - i, &xs, &ys, point_accuracy,
		       &(struct svg_tag){ .cls = "accuracy", .stroke = colour, .title = tip, .data = "sigma",
					  .value = value });
		char label[64];
		snprintf(label, sizeof label, "accuracy at σ %.2f", r->points[i].sigma);
		legend_line(&s, PX1 + 60, y0 + 18.0 * (double)curves, NULL, colour, label);
		curves++;
		i = j;
	}
	for (size_t i = 0; i < r->n_suggestions; i++) {
		const struct pim_calibrate_point *p = &r->suggestions[i];
		snprintf(value, sizeof value, "%.17g", p->sigma);
		snprintf(tip, sizeof tip, "σ %.2f: θ %.3f GB/s suggested, accuracy %.3f%s", p->sigma, p->theta / 1e9,
			 p->accuracy, i == r->best ? " (chosen)" : "");
		svg_mark(&s, SVG_CIRCLE, svg_scale_at(&xs, p->theta), svg_scale_at(&ys, p->accuracy), i == r->best ? 5 : 3.5,
			 &(struct svg_tag){ .cls = "suggestion", .fill = palette[i % ELEMENTSOF(palette)], .title = tip,
					    .data = "sigma", .value = value });
	}

	/* false positives and false negatives at the chosen σ */
	svg_text(&s, PX0 - 60, f0 - 24, "start", "head", "False positives (offloaded, not beneficial) and false "
		 "negatives (beneficial, kept) at σ %.2f", best ? best->sigma : r->n_points ? r->points[0].sigma : 0);
	svg_axis(&s, &es, true, PX0, 1, "regions");
	svg_axis(&s, &xs, false, f1, 1e-9, "θ (GB/s)");
	for (size_t i = 0; i < r->n_points;) {
		size_t j = i;
		while (j < r->n_points && r->points[j].sigma == r->points[i].sigma)
			j++;
		if (!best || r->points[i].sigma == best->sigma) {
			series(&s, r->points + i, j - i, &xs, &es, point_fp,
			       &(struct svg_tag){ .cls = "fp", .stroke = "#c00", .title = "false positives" });
			series(&s, r->points + i, j - i, &xs, &es, point_fn,
			       &(struct svg_tag){ .cls = "fn dash", .stroke = "#7570b3", .title = "false negatives" });
			break;
		}
		i = j;
	}
	legend_line(&s, PX1 + 60, f0 + 10, NULL, "#c00", "false positives");
	legend_line(&s, PX1 + 60, f0 + 28, "dash", "#7570b3", "false negatives");
	if (best)
		svg_text(&s, 20, 670, "start", "sub", "Chosen θ %.3f GB/s, the midpoint of [%.3f, %.3f] GB/s, at σ %.2f: "
			 "%u selected, %u false positives, %u false negatives, accuracy %u/%u = %.3f", best->theta / 1e9,
			 r->suggestion_lo[r->best] / 1e9, r->suggestion_hi[r->best] / 1e9, best->sigma, best->selected,
			 best->fp, best->fn, best->tp + best->tn, r->labelled, best->accuracy);
	return finish(&s, out, len, err, "calibration");
}

/* ---------------------------------------------------------------- JIT-Q */

/* A block of a phase in processing order. */
struct jblock {
	double start, accel, stall, launch, ready, pim, slack;
	uint32_t layer;
};

static int jblock_cmp(const void *a, const void *b)
{
	const struct jblock *p = a, *q = b;
	return p->start < q->start ? -1 : p->start > q->start;
}

#define JITQ_BLOCKS_ONE 512 /* more blocks in a phase than this: consecutive ones merge */

/* One phase's timeline: the accelerator's lane above the PIM's; returns the height used. */
static double draw_phase(struct svg *s, const struct pim_jitq_plan_phase *p, double top)
{
	size_t n = p->n_blocks;
	char tip[512], value[32], a[32], b[32], c[32];
	struct jblock *v = calloc(n ? n : 1, sizeof *v);
	if (!v) {
		s->text.error = s->text.error ? s->text.error : -ENOMEM;
		return 0;
	}
	/* t = 0 is the first block's start; the prologue's launches come before it (the head start) */
	double begin = 0, end = 0;
	for (size_t i = 0; i < n; i++) {
		const struct pim_jitq_plan_block *k = &p->blocks[i];
		v[i] = (struct jblock){ .start = k->start_s, .accel = k->accel_s, .stall = k->stall_s,
					.launch = k->launch_s, .ready = k->ready_s, .pim = k->pim_s, .slack = k->slack,
					.layer = (uint32_t)i };
		begin = fmin(begin, fmin(k->launch_s, k->ready_s - k->pim_s));
		end = fmax(end, fmax(k->start_s + k->accel_s, k->ready_s));
	}
	qsort(v, n, sizeof *v, jblock_cmp);
	fmt_seconds(a, sizeof a, p->accel_s);
	fmt_seconds(b, sizeof b, p->pim_s);
	fmt_seconds(c, sizeof c, p->stall_s);
	svg_text(s, PX0 - 60, top, "start", "head", "%s: %zu blocks, lookahead %u; accelerator %s, PIM %s, stall %s; "
		 "slack least %.2fx, median %.2fx", p->phase, n, p->lookahead, a, b, c, p->slack_min, p->slack_median);
	const double acc_y = top + 14, pim_y = top + 44, h = 22;
	struct svg_scale xs = { .lo = begin, .hi = end > begin ? end : begin + 1, .p0 = PX0, .p1 = WIDTH - 40 };
	svg_text(s, PX0 - 6, acc_y + 15, "end", "sub", "accel.");
	svg_text(s, PX0 - 6, pim_y + 15, "end", "sub", "PIM");
	size_t per = n > JITQ_BLOCKS_ONE ? (n + JITQ_BLOCKS_ONE - 1) / JITQ_BLOCKS_ONE : 1;
	svg_group(s, &(struct svg_tag){ .cls = "blocks", .data = "phase", .value = p->phase });
	for (size_t i = 0; i < n; i += per) {
		size_t j = i + per < n ? i + per : n;
		struct jblock m = v[i];
		double stall = 0, pim = 0, slack = HUGE_VAL;
		for (size_t q = i; q < j; q++) {
			stall += v[q].stall;
			pim += v[q].pim;
			slack = fmin(slack, v[q].slack);
		}
		double acc_end = v[j - 1].start + v[j - 1].accel, ready = v[j - 1].ready;
		fmt_seconds(a, sizeof a, acc_end - m.start);
		fmt_seconds(b, sizeof b, pim);
		fmt_seconds(c, sizeof c, stall);
		if (j - i == 1)
			snprintf(tip, sizeof tip, "block %u (%s): accelerator %s from %.4g ms; its copies quantized on PIM in "
				 "%s, launched at %.4g ms, ready at %.4g ms; slack %.2fx; stall %s", m.layer, p->phase, a,
				 m.start * 1e3, b, m.launch * 1e3, ready * 1e3, m.slack, c);
		else
			snprintf(tip, sizeof tip, "blocks %u to %u (%zu, %s): accelerator %s from %.4g ms; PIM %s; least "
				 "slack %.2fx; stall %s", m.layer, v[j - 1].layer, j - i, p->phase, a, m.start * 1e3, b, slack, c);
		snprintf(value, sizeof value, "%zu", j - i);
		double x0 = svg_scale_at(&xs, m.start), x1 = svg_scale_at(&xs, acc_end);
		svg_rect(s, x0, acc_y, fmax(x1 - x0 - 0.5, 0.5), h,
			 &(struct svg_tag){ .cls = "accel", .fill = (i / per) % 2 ? "#6a8caf" : "#4b6f94", .title = tip,
					    .data = "blocks", .value = value });
		if (stall > 0) {
			double sx = svg_scale_at(&xs, m.start - stall);
			svg_rect(s, sx, acc_y, fmax(x0 - sx, 0.5), h,
				 &(struct svg_tag){ .cls = "stall", .fill = "#c00", .title = tip });
		}
		/* the PIM quantizes a block's copies in the span that ends when they are ready */
		double px0 = svg_scale_at(&xs, ready - pim), px1 = svg_scale_at(&xs, ready);
		svg_rect(s, px0, pim_y, fmax(px1 - px0 - 0.5, 0.5), h,
			 &(struct svg_tag){ .cls = "quant", .fill = (i / per) % 2 ? "#f08a3c" : CHART_PIM_COLOUR,
					    .title = tip, .data = "blocks", .value = value });
		double lx = svg_scale_at(&xs, m.launch);
		svg_line(s, lx, pim_y + h, lx, pim_y + h + 5, &(struct svg_tag){ .cls = "launch", .stroke = "#333" });
	}
	svg_group_end(s);
	svg_axis(s, &xs, false, pim_y + h + 8, 1e3, NULL);
	svg_text(s, WIDTH - 40, pim_y + h + 40, "end", "tick", "time in the phase (ms)");
	free(v);
	return 120;
}

static void memory_bar(struct svg *s, double y, double bytes, const struct svg_scale *xs, const char *fill,
		       const char *label)
{
	char b[32], tip[256], value[32];
	fmt_bytes(b, sizeof b, bytes);
	snprintf(tip, sizeof tip, "%s: %s", label, b);
	snprintf(value, sizeof value, "%.0f", bytes);
	svg_text(s, PX0 + 150, y + 13, "end", "sub", "%s", label);
	double x = svg_scale_at(xs, bytes);
	svg_rect(s, PX0 + 160, y, fmax(x - (PX0 + 160), 0.5), 18,
		 &(struct svg_tag){ .cls = "mem", .fill = fill, .title = tip, .data = "bytes", .value = value });
	svg_text(s, x + 6, y + 13, "start", "sub", "%s", b);
}

int chart_jitq(const struct pim_jitq_plan_reply *r, char **out, size_t *len, struct pim_error *err)
{
	struct svg s;
	char title[512];
	double height = 140 + 130.0 * (double)r->n_phases + 200;

	snprintf(title, sizeof title, "JIT-Q plan of %s: %s from %s, %s mapping, %u blocks on this device", r->model,
		 r->format, r->source, r->mapping, r->layers);
	svg_begin(&s, WIDTH, height, CHART_MAX_BYTES, title, CSS);
	svg_text(&s, 20, 26, "start", "title", "%s", title);
	svg_text(&s, 20, 44, "start", "sub", "One training step: each block's accelerator compute above, below the PIM "
		 "quantizing the copies of a later block (ticks: launches); red: the accelerator waits");
	double y = 76;
	bool blocks = false;
	for (size_t i = 0; i < r->n_phases; i++)
		blocks |= r->phases[i].n_blocks > 0;
	if (!blocks)
		svg_text(&s, 20, y, "start", "head", "No per-block rows in this plan (pimctl asks for them with --svg)");
	for (size_t i = 0; i < r->n_phases && blocks; i++)
		y += draw_phase(&s, &r->phases[i], y) + 10;
	legend_mark(&s, PX0, y, SVG_SQUARE, "#4b6f94", "accelerator compute per block");
	legend_mark(&s, PX0 + 230, y, SVG_SQUARE, CHART_PIM_COLOUR, "PIM quantization of a block's copies");
	legend_mark(&s, PX0 + 500, y, SVG_SQUARE, "#c00", "stall: the copies are not ready");
	y += 30;
	if (r->has_capacity) {
		const struct pim_jitq_capacity *c = &r->capacity;
		double top = (double)c->total_both;
		top = fmax(top, fmax((double)c->total_one, (double)c->total_jitq));
		struct svg_scale xs = { .lo = 0, .hi = top > 0 ? top : 1, .p0 = PX0 + 160, .p1 = WIDTH - 120 };
		svg_text(&s, PX0 - 60, y, "start", "head", "Memory per device: JIT-Q saves %.1f%% against both resident "
			 "copies, %.1f%% against one", c->pct_vs_both, c->pct_vs_one);
		y += 12;
		svg_group(&s, &(struct svg_tag){ .cls = "memory" });
		memory_bar(&s, y, (double)c->lp_both, &xs, "#999", "both copies resident");
		memory_bar(&s, y + 22, (double)c->lp_one, &xs, "#bbb", "one copy resident");
		memory_bar(&s, y + 44, (double)c->lp_jitq, &xs, CHART_PIM_COLOUR, "JIT-Q's copies (peak)");
		memory_bar(&s, y + 76, (double)c->total_both, &xs, "#999", "footprint, both copies");
		memory_bar(&s, y + 98, (double)c->total_one, &xs, "#bbb", "footprint, one copy");
		memory_bar(&s, y + 120, (double)c->total_jitq, &xs, CHART_PIM_COLOUR, "footprint with JIT-Q");
		svg_group_end(&s);
	}
	return finish(&s, out, len, err, "JIT-Q");
}
