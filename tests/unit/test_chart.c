/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the SVG writer (common/svg.c) and pimctl's charts (client/chart.c): escaping,
 * numbers, scales and ticks against hand-computed values, the size limit; the placement chart's
 * marks, θ and σ lines, Stage-1 rows, segments and speedup points against the reply they draw,
 * and a 10,000-region model drawn in bounded time and size; the calibration chart's curves and
 * chosen θ, thinned to the pixel columns; the JIT-Q timeline's blocks, stalls and memory.
 */
#include "chart.h"
#include "svg.h"

#include <check.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "test_util.h"

#define ck_has(hay, needle)                                                                         \
	ck_assert_msg(strstr((hay), (needle)) != NULL, "'%.400s' does not contain '%s'", (hay), (needle))
#define ck_hasnt(hay, needle)                                                                       \
	ck_assert_msg(strstr((hay), (needle)) == NULL, "'%.400s' contains '%s'", (hay), (needle))

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* The text of the first group whose opening tag is open, up to its </g> (groups of marks do
 * not nest); a static copy, valid until the next call. */
static const char *group(const char *doc, const char *open)
{
	static char buf[8 << 20];
	const char *a = strstr(doc, open);
	ck_assert_msg(a != NULL, "no group %s", open);
	const char *b = strstr(a, "</g>");
	ck_assert(b != NULL && (size_t)(b - a) < sizeof buf);
	memcpy(buf, a, (size_t)(b - a));
	buf[b - a] = '\0';
	return buf;
}

/* The value of attribute name in the element that carries needle (in an attribute or its title). */
static double attr_of(const char *doc, const char *needle, const char *name)
{
	const char *p = strstr(doc, needle);
	ck_assert_msg(p != NULL, "no element with %s", needle);
	const char *start = p;
	while (start > doc && (*start != '<' || strncmp(start, "<title>", 7) == 0))
		start--;
	char key[64];
	snprintf(key, sizeof key, " %s=\"", name);
	const char *a = strstr(start, key);
	ck_assert_msg(a != NULL && a < strchr(start, '>'), "%s has no %s", needle, name);
	return strtod(a + strlen(key), NULL);
}

/* ---------------------------------------------------------------- the writer */

START_TEST(test_escape_and_numbers)
{
	struct svg s;
	char *out;
	size_t len;

	svg_begin(&s, 100, 50, 1 << 20, "a & b", NULL);
	svg_text(&s, 1.25, NAN, "middle", "c\"d", "x<y & 'q' \x01 \xff ok \xc3\xa9");
	svg_rect(&s, -0.04, 2, -3, 4, &(struct svg_tag){ .title = "<t>" });
	ck_assert_int_eq(svg_take(&s, &out, &len), 0);
	ck_assert_uint_eq(len, strlen(out));
	ck_has(out, "<title>a &amp; b</title>");
	/* 1.25 rounds to a tenth; NaN is written as 0; the class's quote is escaped */
	ck_has(out, "<text x=\"1.3\" y=\"0\" text-anchor=\"middle\" class=\"c&quot;d\">");
	/* control characters and malformed UTF-8 become U+FFFD; well-formed UTF-8 stays */
	ck_has(out, "x&lt;y &amp; &#39;q&#39; \xef\xbf\xbd \xef\xbf\xbd ok \xc3\xa9</text>");
	/* -0.04 is 0, not -0; a negative size draws nothing */
	ck_has(out, "<rect x=\"0\" y=\"2\" width=\"0\" height=\"0\"><title>&lt;t&gt;</title></rect>");
	ck_assert(strncmp(out + len - 7, "</svg>\n", 7) == 0);
	free(out);
}
END_TEST

START_TEST(test_marks)
{
	struct svg s;
	char *out;
	size_t len;
	const struct svg_tag t = { .cls = "m", .fill = "#f00", .title = "x", .data = "region", .value = "7" };

	svg_begin(&s, 100, 50, 1 << 20, "", NULL);
	svg_mark(&s, SVG_CIRCLE, 10, 20, 4, &t);
	svg_mark(&s, SVG_TRIANGLE, 10, 20, 4, NULL);
	svg_mark(&s, SVG_DIAMOND, 10, 20, 4, NULL);
	svg_mark(&s, SVG_SQUARE, 10, 20, 4, NULL);
	svg_mark(&s, SVG_CROSS, 10, 20, 4, &(struct svg_tag){ .fill = "#0f0" });
	double x[] = { 1, 2 }, y[] = { 3, 4.44 };
	svg_polyline(&s, x, y, 2, &(struct svg_tag){ .stroke = "#00f" });
	ck_assert_int_eq(svg_take(&s, &out, &len), 0);
	ck_has(out, "<circle cx=\"10\" cy=\"20\" r=\"4\" class=\"m\" fill=\"#f00\" data-region=\"7\"><title>x</title>"
		    "</circle>");
	/* triangle: apex 1.2 r above the centre, sides 1.1 r out and 1.9 r down */
	ck_has(out, "<path d=\"M10,15.2l4.4,7.6h-8.8z\"/>");
	ck_has(out, "<path d=\"M10,15l5,5l-5,5l-5,-5z\"/>");
	ck_has(out, "<rect x=\"6\" y=\"16\" width=\"8\" height=\"8\"/>");
	ck_has(out, "<path d=\"M6,16l8,8m0,-8l-8,8\" stroke-width=\"1.5\" stroke=\"#0f0\" fill=\"#0f0\"/>");
	ck_has(out, "points=\"1,3 2,4.4\" stroke=\"#00f\"/>");
	free(out);
}
END_TEST

START_TEST(test_size_limit)
{
	struct svg s;
	char *out = NULL;
	size_t len = 0;

	svg_begin(&s, 100, 50, 600, "", NULL);
	for (int i = 0; i < 100; i++)
		svg_text(&s, 1, 2, NULL, NULL, "line %d", i);
	ck_assert_int_eq(s.text.error, -E2BIG);
	ck_assert_int_eq(svg_take(&s, &out, &len), -E2BIG);
	ck_assert_ptr_null(out);
	ck_assert_ptr_null(s.text.p);
}
END_TEST

START_TEST(test_scales_and_ticks)
{
	struct svg_scale lg = { .lo = 1e8, .hi = 1e11, .p0 = 0, .p1 = 300, .log = true };
	struct svg_scale ln = { .lo = 0, .hi = 1, .p0 = 330, .p1 = 100 };
	double t[32];

	ck_assert_double_eq_tol(svg_scale_at(&lg, 1e9), 100, 1e-9);
	ck_assert_double_eq_tol(svg_scale_at(&lg, 1e12), 300, 1e-9); /* clamped */
	ck_assert_double_eq_tol(svg_scale_at(&lg, 0), 0, 1e-9);      /* no log of 0 */
	ck_assert_double_eq_tol(svg_scale_at(&ln, 0.4), 238, 1e-9);  /* 330 - 0.4 × 230 */
	ck_assert_double_eq_tol(svg_scale_at(&ln, NAN), 330, 1e-9);
	/* four decades: powers of ten only */
	ck_assert_uint_eq(svg_ticks(&lg, t, 32), 4);
	ck_assert_double_eq_tol(t[0], 1e8, 1);
	ck_assert_double_eq_tol(t[3], 1e11, 1);
	/* two decades: 1, 2, 5 in each */
	lg.lo = 1e8;
	lg.hi = 1e10;
	ck_assert_uint_eq(svg_ticks(&lg, t, 32), 7);
	ck_assert_double_eq_tol(t[1], 2e8, 1);
	ck_assert_double_eq_tol(t[6], 1e10, 1);
	/* 0..1 in at most 8 intervals: steps of 0.2 */
	ck_assert_uint_eq(svg_ticks(&ln, t, 32), 6);
	ck_assert_double_eq_tol(t[2], 0.4, 1e-12);
	ck_assert_double_eq_tol(t[5], 1, 1e-12);
	ck_assert_uint_eq(svg_ticks(&ln, t, 3), 3);
}
END_TEST

/* ---------------------------------------------------------------- the placement chart */

struct fixture {
	struct pim_placement r;
	struct pim_placement_estimate est[2];
	struct pim_region_decision d[4];
};

static void region(struct fixture *f, int i, uint32_t id, const char *name, bool pim, enum pim_evidence ev,
		   bool c1, bool c2, double bw, double fstore, double t_host)
{
	struct pim_region_decision *d = &f->d[i];
	*d = (struct pim_region_decision){ 0 };
	d->region_id = id;
	d->name = name;
	d->op = "linalg.generic";
	d->order = (uint32_t)i;
	d->trip = 1;
	d->pim = pim;
	d->evidence = ev;
	d->t_host = t_host;
	d->reason = "because";
	d->t_pim_term = "";
	d->conditions[0].state = c1 ? PIM_COND_TRUE : PIM_COND_FALSE;
	d->conditions[1].state = c2 ? PIM_COND_TRUE : PIM_COND_FALSE;
	d->conditions[2].lhs = bw;
	d->conditions[2].state = bw >= 2e9 ? PIM_COND_TRUE : PIM_COND_FALSE;
	d->conditions[3].lhs = fstore;
	d->conditions[3].state = isnan(fstore) ? PIM_COND_NO_DATA : fstore >= 0.4 ? PIM_COND_TRUE : PIM_COND_FALSE;
	d->n_conditions = 4;
}

/*
 * Four regions at θ = 2 GB/s, σ = 0.4, 128 cores: 1 on PIM by C3 (counters), 2 on PIM by C4
 * (counters), 3 on the host (estimate, f_store unknown), 4 failing C1 (imported).  Two core
 * counts, 128 and 256.
 */
static void fixture_init(struct fixture *f)
{
	memset(f, 0, sizeof *f);
	f->r.params.theta = 2e9;
	f->r.params.sigma = 0.4;
	f->r.params.b_cpu = 16.754e9;
	f->r.params.t_ctx = 1e-5;
	f->r.params.f_pim = 350e6;
	f->r.model = "gemv<&>";
	f->r.granularity = "loop";
	f->r.movement = "upper";
	f->r.platform = "test CPU";
	region(f, 0, 1, "a", true, PIM_EVIDENCE_COUNTERS, true, true, 6e9, 0.1, 1e-3);
	region(f, 1, 2, "b", true, PIM_EVIDENCE_COUNTERS, true, true, 1e9, 0.6, 1e-3);
	/* region 2's f_store within the measured noise of σ: marginal on C4 */
	f->d[1].marginal = true;
	f->d[1].marginal_on = 1u << 3;
	region(f, 2, 3, "c<script>", false, PIM_EVIDENCE_ESTIMATE, true, true, 0.5e9, NAN, 2e-3);
	region(f, 3, 4, "d", false, PIM_EVIDENCE_IMPORTED, false, true, 3e9, NAN, 1e-6);
	for (int k = 0; k < 2; k++) {
		f->est[k].n_core = 128 << k;
		f->est[k].regions = f->d;
		f->est[k].n_regions = 4;
		f->est[k].movement = (struct pim_movement){ .model = "upper", .segments = 1, .transitions = 2 };
		f->est[k].speedup = 1.5 + k;
		f->est[k].bound_movement = 3;
		f->est[k].bound = 100; /* off the scale */
		f->est[k].marginal = 1;
	}
	f->r.estimates = f->est;
	f->r.n_estimates = 2;
}

START_TEST(test_placement_chart)
{
	struct fixture f;
	struct pim_error err = { 0 };
	char *out;
	size_t len;

	fixture_init(&f);
	ck_assert_int_eq(chart_placement(&f.r, &out, &len, &err), 0);
	ck_assert_uint_eq(strlen(out), len);
	ck_has(out, "<title>Placement of gemv&lt;&amp;&gt;: granularity loop, movement model upper</title>");
	ck_has(out, "Platform test CPU; θ 2.00 GB/s, σ 0.40");
	ck_hasnt(out, "<script>");
	ck_has(out, "c&lt;script&gt;");

	/* Stage 2: regions 1-3, one mark each, colour by decision, shape by evidence */
	const char *g2 = group(out, "<g class=\"stage2\">");
	ck_assert_uint_eq(count(g2, "data-region=\""), 3);
	ck_has(g2, "<circle cx=\"613.4\" cy=\"307\" r=\"4\" class=\"mark pim\" fill=\"" CHART_PIM_COLOUR
		   "\" data-region=\"1\">");
	ck_has(g2, "class=\"mark pim\" fill=\"" CHART_PIM_COLOUR "\" data-region=\"2\"");
	ck_has(g2, "class=\"mark host\" fill=\"" CHART_HOST_COLOUR "\" data-region=\"3\"");
	ck_hasnt(g2, "data-region=\"4\"");
	/* region 2 is marginal: its mark ringed, the ring counted apart from the regions */
	ck_assert_uint_eq(count(g2, "data-marginal=\""), 1);
	ck_has(g2, "<circle cx=\"380\" cy=\"192\" r=\"7\" class=\"marginal\" fill=\"none\" stroke=\"#111\" "
		   "data-marginal=\"2\"><title>region 2: marginal, within the measured noise of σ (C4)</title>");
	ck_has(g2, "<title>region 2 b (linalg.generic): PIM (marginal), evidence counters");
	ck_has(g2, "marginal: within the measured noise of σ (C4)</title>");
	/* x: log10 scale 1e8..1e10 over 80..680 px; y: f_store 0..1 over 330..100 px.
	 * Region 2 at BW 1e9 (x 380), f_store 0.6 (y 192), a circle (counters). */
	ck_assert_double_eq_tol(attr_of(g2, "data-region=\"2\"", "cx"), 380, 0.05);
	ck_assert_double_eq_tol(attr_of(g2, "data-region=\"2\"", "cy"), 192, 0.05);
	/* Region 3: an estimate, a triangle at BW 0.5e9 (x 80 + 600·(8.69897 − 8)/2 = 289.7) in the
	 * f_store-unknown band */
	ck_has(g2, "<path d=\"M289.7,347.2l");
	/* θ at 80 + 600·(9.30103 − 8)/2 = 470.3 px, σ at 330 − 0.4·230 = 238 px */
	ck_assert_double_eq_tol(attr_of(out, "data-theta=\"2000000000\"", "x1"), 470.3, 0.05);
	ck_assert_double_eq_tol(attr_of(out, "data-sigma=\"0.40000000000000002\"", "y1"), 238, 0.05);

	/* Stage 1: region 4 in the C1 row, with the failing condition named */
	const char *g1 = group(out, "<g class=\"stage1 c1\">");
	ck_assert_uint_eq(count(g1, "data-region=\""), 1);
	ck_has(g1, "data-region=\"4\"><title>region 4 d (linalg.generic): host, evidence imported");
	ck_has(out, "C1 fails: T_host &lt;= T_ctx + PIM compute (1)");
	ck_has(out, "<title>C1 does not hold: T_host &gt; T_ctx + N_total·I_min/(N_core·f_pim)</title>");
	ck_assert_uint_eq(count(group(out, "<g class=\"stage1 c2\">"), "data-region"), 0);

	/* the strip: every region once, in program order; one PIM segment over regions 1-2 */
	const char *gs = group(out, "<g class=\"strip\">");
	ck_assert_uint_eq(count(gs, "data-region=\""), 4);
	ck_assert_uint_eq(count(gs, "class=\"piece pim\""), 2);
	/* widths ∝ T_host: 1 + 1 + 2 + 0.001 ms over 840 px: region 3 is about half */
	ck_assert_double_eq_tol(attr_of(gs, "data-region=\"3\"", "width"), 840 * 2 / 4.001, 0.06);
	const char *seg = group(out, "<g class=\"segments\">"); /* reuses group()'s buffer */
	ck_assert_uint_eq(count(seg, "data-segments=\"1\""), 1);
	ck_has(out, "movement model upper: 1 segments, 2 transitions");
	ck_has(out, "PIM when C3 or C4 holds; marginal decisions (ringed): 1");
	ck_has(out, "class=\"legend marginal\" fill=\"none\" stroke=\"#111\"");
	ck_has(out, ">marginal: within the measured</text>");

	/* speedup: one point per core count; 1/residual above the scale is said, not drawn */
	ck_assert_uint_eq(count(out, "class=\"speedup\""), 2);
	ck_has(out, "data-cores=\"256\"><title>N_core 256: speedup 2.500x");
	ck_assert_uint_eq(count(out, "class=\"bound-move\""), 2);
	ck_assert_uint_eq(count(out, "class=\"bound\""), 0);
	ck_has(out, "1/residual above the scale: 100x");
	free(out);
}
END_TEST

START_TEST(test_placement_chart_empty)
{
	struct pim_placement r = { 0 };
	struct pim_error err = { 0 };
	char *out;
	size_t len;

	r.model = "m";
	r.granularity = "loop";
	r.movement = "upper";
	r.platform = "";
	ck_assert_int_eq(chart_placement(&r, &out, &len, &err), 0);
	ck_has(out, "The rule: no estimate in the answer");
	ck_assert_uint_eq(count(out, "data-region"), 0);
	free(out);
}
END_TEST

/* 10,000 regions scattered over the plane: aggregated marks, every region counted once. */
START_TEST(test_placement_chart_large)
{
	enum { N = 10000 };
	struct fixture f;
	static struct pim_region_decision d[N];
	struct pim_error err = { 0 };
	char *out;
	size_t len;

	fixture_init(&f);
	unsigned seed = 1;
	for (size_t i = 0; i < N; i++) {
		d[i] = f.d[i % 4];
		d[i].region_id = (uint32_t)i;
		d[i].order = (uint32_t)(N - i);
		d[i].pim = rand_r(&seed) % 2;
		d[i].marginal = i % 10 == 0;
		d[i].marginal_on = d[i].marginal ? 1u << 2 : 0;
		d[i].name = "some-long-region-name";
		d[i].conditions[2].lhs = pow(10, 7 + 4.0 * rand_r(&seed) / RAND_MAX);
		d[i].conditions[3].lhs = i % 7 ? (double)rand_r(&seed) / RAND_MAX : NAN;
	}
	f.est[0].regions = f.est[1].regions = d;
	f.est[0].n_regions = f.est[1].n_regions = N;
	/* CPU time: what the drawing costs, whatever else the machine runs */
	struct timespec t0, t1;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
	ck_assert_int_eq(chart_placement(&f.r, &out, &len, &err), 0);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
	double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	ck_assert_msg(took < 1.0, "10,000 regions took %.3f s of CPU", took);
	printf("placement chart of 10,000 regions: %.1f ms of CPU, %zu bytes\n", took * 1e3, len);
	ck_assert_msg(len < 4u << 20, "10,000 regions: %zu bytes", len);
	/* every region is in exactly one mark of the rule's panels */
	size_t regions = 0;
	for (const char *p = strstr(out, "data-region"); p; p = strstr(p + 1, "data-region")) {
		const char *tail = strchr(p, '>');
		if (strncmp(p, "data-regions=\"", 14) == 0)
			regions += strtoul(p + 14, NULL, 10);
		else
			regions++;
		(void)tail;
	}
	/* the rule's marks and the strip's pieces each count every region once */
	ck_assert_uint_eq(regions, 2 * N);
	/* and the rings every marginal decision once (one in ten), aggregated like the marks */
	size_t marginal = 0;
	for (const char *p = strstr(out, "data-marginal"); p; p = strstr(p + 1, "data-marginal"))
		marginal += strncmp(p, "data-marginals=\"", 16) == 0 ? strtoul(p + 16, NULL, 10) : 1;
	ck_assert_uint_eq(marginal, N / 10);
	ck_assert_uint_gt(count(out, "data-marginals=\""), 0);
	ck_assert_uint_gt(count(out, "data-regions=\""), 0); /* some aggregated */
	free(out);
}
END_TEST

/* ---------------------------------------------------------------- the calibration chart */

/* Two σ of five θ each (1 to 5 GB/s); σ 0.5 is chosen at θ 3.5 GB/s, interval [3, 4] GB/s. */
START_TEST(test_calibrate_chart)
{
	struct pim_calibration r = { 0 };
	struct pim_calibrate_point pt[10], sug[2];
	double lo[2] = { 2e9, 3e9 }, hi[2] = { 3e9, 4e9 };
	struct pim_error err = { 0 };
	char *out;
	size_t len;

	for (int i = 0; i < 10; i++) {
		pt[i] = (struct pim_calibrate_point){ 0 };
		pt[i].sigma = i < 5 ? 0.3 : 0.5;
		pt[i].theta = (1 + i % 5) * 1e9;
		pt[i].accuracy = 0.6 + 0.05 * (i % 5);
		pt[i].fp = (uint32_t)(5 - i % 5);
		pt[i].fn = (uint32_t)(i % 5);
	}
	for (int k = 0; k < 2; k++) {
		sug[k] = (struct pim_calibrate_point){ 0 };
		sug[k].sigma = k ? 0.5 : 0.3;
		sug[k].theta = k ? 3.5e9 : 2.5e9;
		sug[k].accuracy = k ? 0.9 : 0.8;
		sug[k].tp = 40;
		sug[k].tn = 5;
	}
	r.labelled = 50;
	r.beneficial = 42;
	r.points = pt;
	r.n_points = 10;
	r.suggestions = sug;
	r.n_suggestions = 2;
	r.suggestion_lo = lo;
	r.suggestion_hi = hi;
	r.best = 1;
	ck_assert_int_eq(chart_calibrate(&r, "m&m", &out, &len, &err), 0);
	ck_has(out, "<title>Calibration of m&amp;m: 50 labelled regions, 42 beneficial</title>");
	/* one accuracy curve per σ: θ 1..5 GB/s over 80..680 px, accuracy 0..1 over 330..90 px */
	ck_assert_uint_eq(count(out, "class=\"accuracy\""), 2);
	ck_has(out, "points=\"80,186 230,174 380,162 530,150 680,138\" class=\"accuracy\"");
	ck_has(out, "data-sigma=\"0.5\"");
	/* the chosen θ and its interval */
	ck_assert_double_eq_tol(attr_of(out, "data-theta=\"3500000000\"", "x1"), 455, 0.05);
	ck_assert_double_eq_tol(attr_of(out, "class=\"interval\"", "x"), 380, 0.05);
	ck_assert_double_eq_tol(attr_of(out, "class=\"interval\"", "width"), 150, 0.05);
	/* false positives and negatives of the chosen σ only: 0..5.5 regions over 600..400 px */
	ck_assert_uint_eq(count(out, "class=\"fp\""), 1);
	ck_assert_uint_eq(count(out, "class=\"fn dash\""), 1);
	ck_has(out, "points=\"80,418.2 230,454.5 380,490.9 530,527.3 680,563.6\" class=\"fp\"");
	ck_assert_uint_eq(count(out, "class=\"suggestion\""), 2);
	ck_has(out, "at σ 0.50: 0 selected, 0 false positives, 0 false negatives, accuracy 45/50 = 0.900");
	free(out);
}
END_TEST

/* 50,000 values of θ: at most four points per pixel column, and the extremes are kept. */
START_TEST(test_calibrate_chart_thin)
{
	enum { N = 50000 };
	static struct pim_calibrate_point pt[N];
	struct pim_calibration r = { 0 };
	struct pim_error err = { 0 };
	char *out;
	size_t len;

	for (int i = 0; i < N; i++) {
		pt[i] = (struct pim_calibrate_point){ 0 };
		pt[i].sigma = 0.4;
		pt[i].theta = 1e6 * (i + 1);
		pt[i].accuracy = i == 31337 ? 1.0 : 0.5;
	}
	r.points = pt;
	r.n_points = N;
	ck_assert_int_eq(chart_calibrate(&r, "m", &out, &len, &err), 0);
	ck_assert_msg(len < 200000, "%zu bytes", len);
	const char *a = strstr(out, "class=\"accuracy\"");
	ck_assert_ptr_nonnull(a);
	while (a > out && strncmp(a, "points=", 7) != 0)
		a--;
	size_t points = 0;
	for (const char *q = a; *q != '"' || q == a + 7; q++)
		points += *q == ',';
	ck_assert_msg(points <= 4 * 601, "%zu points", points);
	ck_has(a, ",90 "); /* the one point at accuracy 1 */
	free(out);
}
END_TEST

/* ---------------------------------------------------------------- the JIT-Q chart */

START_TEST(test_jitq_chart)
{
	struct pim_jitq_plan_reply r = { 0 };
	struct pim_jitq_plan_phase ph = { 0 };
	struct pim_jitq_plan_block b[3];
	struct pim_jitq_capacity cap = { 0 };
	struct pim_error err = { 0 };
	char *out;
	size_t len;

	/* blocks of 1 ms; each block's copies take 0.4 ms on PIM from its predecessor's start; the
	 * last waits 0.2 ms for them */
	for (int i = 0; i < 3; i++) {
		b[i] = (struct pim_jitq_plan_block){ 0 };
		b[i].accel_s = 1e-3;
		b[i].pim_s = 0.4e-3;
		b[i].start_s = i * 1e-3 + (i == 2 ? 0.2e-3 : 0);
		b[i].stall_s = i == 2 ? 0.2e-3 : 0;
		b[i].launch_s = i ? (i - 1) * 1e-3 : 0;
		b[i].ready_s = b[i].launch_s + 0.4e-3;
		b[i].slack = 2.5;
	}
	ph.phase = "forward";
	ph.lookahead = 1;
	ph.blocks = b;
	ph.n_blocks = 3;
	cap.lp_both = 2u << 30;
	cap.lp_one = 1u << 30;
	cap.lp_jitq = 256u << 20;
	cap.total_both = 10u << 30;
	cap.total_one = 9u << 30;
	cap.total_jitq = (8u << 30) + (256u << 20);
	r.model = "gpt";
	r.format = "mx6";
	r.source = "bf16";
	r.mapping = "strided-opt";
	r.layers = 3;
	r.phases = &ph;
	r.n_phases = 1;
	r.capacity = cap;
	r.has_capacity = 1;
	ck_assert_int_eq(chart_jitq(&r, &out, &len, &err), 0);
	ck_assert_uint_eq(count(out, "class=\"accel\""), 3);
	ck_assert_uint_eq(count(out, "class=\"quant\""), 3);
	ck_assert_uint_eq(count(out, "class=\"stall\""), 1);
	ck_assert_uint_eq(count(out, "class=\"launch\""), 3);
	/* time 0..3.2 ms over 80..920 px: block 1 starts at 342.5 px; block 2's stall from 2 ms */
	ck_assert_double_eq_tol(attr_of(out, "block 1 (forward)", "x"), 342.5, 0.05);
	ck_assert_double_eq_tol(attr_of(out, "class=\"stall\"", "x"), 605, 0.05);
	ck_has(out, "block 2 (forward): accelerator 1 ms from 2.2 ms; its copies quantized on PIM in 400 us, "
		    "launched at 1 ms, ready at 1.4 ms; slack 2.50x; stall 200 us");
	/* memory: six bars, JIT-Q's copies among them */
	ck_assert_uint_eq(count(out, "class=\"mem\""), 6);
	ck_has(out, "data-bytes=\"268435456\"");
	free(out);

	/* a prologue launch 0.5 ms before the first block (the head start): the time axis starts
	 * there, -0.5..3.2 ms over 80..920 px, so block 0 starts at 80 + 0.5 / 3.7 * 840 px */
	b[0].launch_s = -0.5e-3;
	b[0].ready_s = -0.1e-3;
	ck_assert_int_eq(chart_jitq(&r, &out, &len, &err), 0);
	ck_assert_double_eq_tol(attr_of(out, "class=\"launch\"", "x1"), 80, 0.05);
	ck_assert_double_eq_tol(attr_of(out, "block 0 (forward)", "x"), 193.51, 0.05);
	free(out);

	ph.n_blocks = 0;
	ck_assert_int_eq(chart_jitq(&r, &out, &len, &err), 0);
	ck_has(out, "No per-block rows in this plan");
	ck_assert_uint_eq(count(out, "class=\"accel\""), 0);
	free(out);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("chart");
	TCase *tc = test_case(s, "svg");
	tcase_add_test(tc, test_escape_and_numbers);
	tcase_add_test(tc, test_marks);
	tcase_add_test(tc, test_size_limit);
	tcase_add_test(tc, test_scales_and_ticks);
	tc = test_case(s, "placement");
	tcase_add_test(tc, test_placement_chart);
	tcase_add_test(tc, test_placement_chart_empty);
	tcase_add_test(tc, test_placement_chart_large);
	tc = test_case(s, "calibrate");
	tcase_add_test(tc, test_calibrate_chart);
	tcase_add_test(tc, test_calibrate_chart_thin);
	tc = test_case(s, "jitq");
	tcase_add_test(tc, test_jitq_chart);
	return test_run_suite(s);
}
