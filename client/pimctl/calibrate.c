/* SPDX-License-Identifier: MIT */
/* pimctl import-perf and calibrate: counts measured elsewhere, and θ swept against labels. */
#include "pimctl.h"

int cmd_import_perf(struct ctl *ctl, int argc, char **argv)
{
	enum { O_TIME = 1, O_B_CPU, O_EXECUTIONS };
	static const struct option opts[] = {
		{ "time", required_argument, NULL, O_TIME },
		{ "b-cpu", required_argument, NULL, O_B_CPU },
		{ "executions", required_argument, NULL, O_EXECUTIONS },
		{ 0 }
	};
	struct cmd_getopt g = { .name = "import-perf", .argc = argc, .argv = argv, .opts = opts };
	struct pim_import_request rq = { 0 };
	const char *pos[3], *v;
	int npos = 0, opt, r;
	char *end;

	while ((opt = cmd_getopt(&g, &v)) != -1) {
		switch (opt) {
		case O_TIME:
			errno = 0;
			rq.t_host = strtod(v, &end);
			if (errno || *end || end == v || !isfinite(rq.t_host) || rq.t_host <= 0)
				return usage_error("--time: '%s' is not a positive number of seconds", v);
			break;
		case O_B_CPU:
			errno = 0;
			rq.b_cpu = strtod(v, &end);
			if (errno || *end || end == v || !isfinite(rq.b_cpu) || rq.b_cpu <= 0)
				return usage_error("--b-cpu: '%s' is not a positive number of bytes per second", v);
			break;
		case O_EXECUTIONS: {
			errno = 0;
			unsigned long long e = strtoull(v, &end, 10);
			if (errno || *end || end == v || e == 0 || v[0] == '-')
				return usage_error("--executions: '%s' is not a positive integer", v);
			rq.executions = e;
			break;
		}
		case 0:
			if (npos == 3)
				return usage_error("import-perf: unexpected argument '%s'", v);
			pos[npos++] = v;
			break;
		default:
			return -opt;
		}
	}
	if (npos != 3)
		return usage_error("import-perf: expected MODEL REGION FILE");
	errno = 0;
	unsigned long region = strtoul(pos[1], &end, 10);
	if (errno || *end || end == pos[1] || region > UINT32_MAX || pos[1][0] == '-')
		return usage_error("import-perf: REGION '%s' is not a region id", pos[1]);
	char *csv;
	if ((r = read_text_file(pos[2], 1u << 20, &csv)))
		return r;
	if ((r = connect_client(ctl))) {
		free(csv);
		return r;
	}
	rq.region_id = (uint32_t)region;
	rq.csv = csv;
	struct pim_import *imp;
	r = pim_import_perf(ctl->client, pos[0], &rq, &imp);
	free(csv);
	if (r < 0)
		return request_failed(ctl, r);
	const struct pim_region_metrics *m = &imp->metrics;
	if (ctl->json) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "model", json_object_new_string(pos[0]));
		json_object_object_add(o, "region", json_object_new_int64(m->region_id));
		json_object_object_add(o, "evidence", json_object_new_string(evidence_name(m->evidence)));
		json_object_object_add(o, "t_host", jdouble(m->t_host));
		json_object_object_add(o, "n_rd", m->have_n_rd ? jdouble(m->n_rd) : json_object_new_null());
		json_object_object_add(o, "c_store", m->have_store ? jdouble(m->c_store) : json_object_new_null());
		json_object_object_add(o, "c_be1", m->have_store ? jdouble(m->c_be1) : json_object_new_null());
		json_object_object_add(o, "c_be2", m->have_store ? jdouble(m->c_be2) : json_object_new_null());
		json_object_object_add(o, "c_be3", m->have_store ? jdouble(m->c_be3) : json_object_new_null());
		json_object_object_add(o, "source", json_object_new_string(m->source));
		json_object_object_add(o, "b_cpu", m->source_b_cpu > 0 ? jdouble(m->source_b_cpu)
								      : json_object_new_null());
		json_object *notes = json_object_new_array();
		for (size_t i = 0; i < imp->n_notes; i++)
			json_object_array_add(notes, json_object_new_string(imp->notes[i]));
		json_object_object_add(o, "notes", notes);
		print_json(o);
	} else {
		char t[32];
		fmt_time(t, sizeof t, m->t_host);
		printf("Imported region %u of %s: T_host %s", m->region_id, pos[0], t);
		if (m->have_n_rd)
			printf(", n_rd %.0f (BW_read %.2f GB/s)", m->n_rd, m->n_rd * 64 / m->t_host / 1e9);
		if (m->have_store)
			printf(", f_store %.3f", m->c_store / (m->c_be1 + m->c_be2 + m->c_be3 + m->c_store));
		if (m->source_b_cpu > 0)
			printf("; measured on a host with B_cpu %.2f GB/s", m->source_b_cpu / 1e9);
		printf("\n");
		for (size_t i = 0; i < imp->n_notes; i++)
			printf("note: %s\n", imp->notes[i]);
	}
	pim_import_free(imp);
	return EXIT_OK;
}

/* The sweep as a table: every point with --all, else only where a count changes; the
 * suggested theta per sigma. */
static void calibrate_print(const struct pim_calibration *c, const char *model, bool all)
{
	printf("Calibration of %s: %u labelled regions, %u beneficial\n", tty(model), c->labelled,
	       c->beneficial);
	printf("%11s %5s %9s %6s %6s %9s\n", "THETA", "SIGMA", "SELECTED", "FP", "FN", "ACCURACY");
	for (size_t i = 0; i < c->n_points; i++) {
		const struct pim_calibrate_point *p = &c->points[i], *q = i ? &c->points[i - 1] : NULL;
		/* Without --all, print only where a count changes (and the ends). */
		const struct pim_calibrate_point *nx = i + 1 < c->n_points ? &c->points[i + 1] : NULL;
		bool changed = !q || q->sigma != p->sigma || q->selected != p->selected || q->fp != p->fp ||
			       q->fn != p->fn || !nx || nx->sigma != p->sigma;
		if (all || changed)
			printf("%6.2f GB/s %5.2f %9u %6u %6u %9.3f\n", p->theta / 1e9, p->sigma, p->selected,
			       p->fp, p->fn, p->accuracy);
	}
	for (size_t i = 0; i < c->n_suggestions; i++) {
		const struct pim_calibrate_point *s = &c->suggestions[i];
		printf("%s sigma %.2f: theta %.3f GB/s, the midpoint of [%.2f, %.2f] GB/s (fewest false "
		       "positives); %u selected, accuracy %u/%u = %.3f\n", i == c->best ? "suggested" : "         ",
		       s->sigma, s->theta / 1e9, c->suggestion_lo[i] / 1e9, c->suggestion_hi[i] / 1e9,
		       s->selected, s->tp + s->tn, c->labelled, s->accuracy);
	}
}

int cmd_calibrate(struct ctl *ctl, int argc, char **argv)
{
	enum { O_LABELS = 1, O_THETA, O_SIGMA, O_PARAM, O_SVG, O_ALL };
	static const struct option opts[] = {
		{ "labels", required_argument, NULL, O_LABELS },
		{ "theta", required_argument, NULL, O_THETA },
		{ "sigma", required_argument, NULL, O_SIGMA },
		{ "param", required_argument, NULL, O_PARAM },
		{ "svg", required_argument, NULL, O_SVG },
		{ "all", no_argument, NULL, O_ALL },
		{ 0 }
	};
	struct cmd_getopt g = { .name = "calibrate", .argc = argc, .argv = argv, .opts = opts };
	struct pim_calibrate_request rq = { 0 };
	const char *labels = NULL, *model = NULL, *svg = NULL, *v;
	double sig[16], th[3];
	size_t n_th = 0;
	bool all = false;
	int opt, r = 0;

	while (r == 0 && (opt = cmd_getopt(&g, &v)) != -1) {
		switch (opt) {
		case O_LABELS: labels = v; break;
		case O_THETA: {
			/* LO:HI:STEP in GB/s */
			char tmp[128];
			snprintf(tmp, sizeof tmp, "%s", v);
			for (char *c = tmp; *c; c++)
				if (*c == ':')
					*c = ',';
			if (parse_list("--theta", tmp, th, 3, &n_th) != 0 || n_th != 3 || th[0] > th[1])
				return usage_error("--theta: expected LO:HI:STEP in GB/s with LO <= HI, got '%s'", v);
			break;
		}
		case O_SIGMA: r = parse_list("--sigma", v, sig, ELEMENTSOF(sig), &rq.n_sigmas); break;
		case O_PARAM: r = parse_param(&rq.params, v); break;
		case O_SVG: svg = v; break;
		case O_ALL: all = true; break;
		case 0:
			if (model)
				r = usage_error("calibrate: unexpected argument '%s'", v);
			model = v;
			break;
		default: r = -opt;
		}
	}
	if (r)
		return r;
	if (!model || !labels)
		return usage_error("calibrate: expected MODEL --labels FILE");
	char *csv;
	if ((r = read_text_file(labels, 64u << 20, &csv)))
		return r;
	if ((r = connect_client(ctl))) {
		free(csv);
		return r;
	}
	rq.labels_csv = csv;
	if (n_th == 3) {
		rq.theta_lo = th[0] * 1e9;
		rq.theta_hi = th[1] * 1e9;
		rq.theta_step = th[2] * 1e9;
	}
	rq.sigmas = sig;
	struct pim_calibration *c;
	struct ticker tick;
	ticker_start(&tick, ctl, "calibrating %s against %s", model, labels);
	r = pim_calibrate(ctl->client, model, &rq, &c);
	ctl_ticker_end(ctl);
	free(csv);
	if (r < 0)
		return request_failed(ctl, r);
	if (ctl->json) {
		json_object *o = json_object_new_object(), *pts = json_object_new_array(),
			    *sug = json_object_new_array();
		json_object_object_add(o, "labelled", json_object_new_int64(c->labelled));
		json_object_object_add(o, "beneficial", json_object_new_int64(c->beneficial));
		for (size_t i = 0; i < c->n_points; i++) {
			const struct pim_calibrate_point *p = &c->points[i];
			json_object *jp = json_object_new_object();
			json_object_object_add(jp, "theta", jdouble(p->theta));
			json_object_object_add(jp, "sigma", jdouble(p->sigma));
			json_object_object_add(jp, "selected", json_object_new_int64(p->selected));
			json_object_object_add(jp, "false_positives", json_object_new_int64(p->fp));
			json_object_object_add(jp, "false_negatives", json_object_new_int64(p->fn));
			json_object_object_add(jp, "accuracy", jdouble(p->accuracy));
			json_object_array_add(pts, jp);
		}
		for (size_t i = 0; i < c->n_suggestions; i++) {
			json_object *js = json_object_new_object();
			json_object_object_add(js, "sigma", jdouble(c->suggestions[i].sigma));
			json_object_object_add(js, "theta", jdouble(c->suggestions[i].theta));
			json_object_object_add(js, "interval_lo", jdouble(c->suggestion_lo[i]));
			json_object_object_add(js, "interval_hi", jdouble(c->suggestion_hi[i]));
			json_object_object_add(js, "selected", json_object_new_int64(c->suggestions[i].selected));
			json_object_object_add(js, "accuracy", jdouble(c->suggestions[i].accuracy));
			json_object_array_add(sug, js);
		}
		json_object_object_add(o, "points", pts);
		json_object_object_add(o, "suggestions", sug);
		json_object_object_add(o, "best", json_object_new_int64(c->best));
		print_json(o);
	} else
		calibrate_print(c, model, all);
	if (svg) {
		struct drawn d = { 0 };
		r = write_svg(ctl, svg, chart_calibrate(c, model, &d.text, &d.len, &d.e), &d);
	}
	pim_calibration_free(c);
	return r;
}

