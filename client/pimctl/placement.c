/* SPDX-License-Identifier: MIT */
/* pimctl placement: the decisions of a model and the estimate, as a table, JSON or SVG. */
#include "pimctl.h"

/* The conditions as --json names them, and the threshold each compares with. */
static const char *const cond_key[4] = { "c1", "c2", "c3", "c4" };
static const char *const cond_threshold[4] = { "t_ctx", "n_core", "theta", "sigma" };


/* Which term set the estimate's T_pim: one name, "mixed", or NULL when nothing is on PIM. */
static const char *t_pim_by(const struct pim_placement_estimate *e)
{
	unsigned kinds = (e->pim_compute > 0) + (e->pim_bandwidth > 0) + (e->pim_measured > 0);

	if (kinds == 0)
		return NULL;
	if (kinds > 1)
		return "mixed";
	return e->pim_compute ? "compute" : e->pim_bandwidth ? "bandwidth" : "measured";
}

static char cond_char(const struct pim_condition *c)
{
	switch (c->state) {
	case PIM_COND_TRUE: return 'y';
	case PIM_COND_FALSE: return 'n';
	case PIM_COND_NO_DATA: return '?';
	default: return '.';
	}
}


static json_object *placement_json(const struct pim_placement *r)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "model", json_object_new_string(r->model));
	json_object_object_add(o, "granularity", json_object_new_string(r->granularity));
	json_object_object_add(o, "movement", json_object_new_string(r->movement));
	json_object_object_add(o, "platform", json_object_new_string(r->platform));
	json_object_object_add(o, "cached", json_object_new_boolean(r->cached));
	json_object_object_add(o, "regions_with_metrics", json_object_new_int64(r->regions_with_metrics));
	if (r->catalogue.host) {
		const struct pim_catalogue_origin *c = &r->catalogue;
		json_object *jc = json_object_new_object();
		json_object_object_add(jc, "host", json_object_new_string(c->host));
		json_object_object_add(jc, "measured_at", json_object_new_int64(c->measured_at));
		json_object_object_add(jc, "backend", json_object_new_string(c->backend));
		json_object_object_add(jc, "regions", json_object_new_int64(c->regions));
		json_object_object_add(jc, "hosts", json_object_new_int64(c->hosts));
		json_object_object_add(jc, "model_hash", json_object_new_string(c->model_hash));
		json_object_object_add(jc, "platform_key", json_object_new_string(c->platform_key));
		json_object_object_add(jc, "fetched", json_object_new_boolean(c->fetched));
		json_object_object_add(o, "catalogue", jc);
	}
	if (r->b_cpu_probe.source)
		json_object_object_add(o, "b_cpu_probe", b_cpu_json(&r->b_cpu_probe));
	json_object *pp = json_object_new_object();
	for (size_t i = 0; i < PARAM_FIELDS; i++) {
		double v = *(const double *)((const char *)&r->params + param_fields[i].offset);
		/* n_core is 0 when the answer holds several core counts: each estimate has its own */
		bool none = param_fields[i].offset == offsetof(struct pim_placement_params, n_core) && v == 0;
		json_object_object_add(pp, param_fields[i].name, none ? json_object_new_null() : jdouble(v));
	}
	json_object_object_add(o, "params", pp);
	json_object *notes = json_object_new_array();
	for (size_t i = 0; i < r->n_notes; i++)
		json_object_array_add(notes, json_object_new_string(r->notes[i]));
	json_object_object_add(o, "notes", notes);
	json_object *ests = json_object_new_array();
	for (size_t i = 0; i < r->n_estimates; i++) {
		const struct pim_placement_estimate *e = &r->estimates[i];
		json_object *je = json_object_new_object();
		json_object_object_add(je, "n_core", jdouble(e->n_core));
		json_object_object_add(je, "offloaded", json_object_new_int64(e->offloaded));
		json_object_object_add(je, "rejected_stage1", json_object_new_int64(e->rejected_stage1));
		json_object_object_add(je, "rejected_stage2", json_object_new_int64(e->rejected_stage2));
		json_object_object_add(je, "marginal", json_object_new_int64(e->marginal));
		json_object_object_add(je, "marginal_pim", json_object_new_int64(e->marginal_pim));
		json_object *mb = json_object_new_object();
		for (size_t c = 0; c < e->n_marginal_by_condition && c < 4; c++)
			json_object_object_add(mb, cond_key[c], json_object_new_int64(e->marginal_by_condition[c]));
		json_object_object_add(je, "marginal_by_condition", mb);
		json_object_object_add(je, "t_cpu", jdouble(e->t_cpu));
		json_object_object_add(je, "t_host", jdouble(e->t_host));
		json_object_object_add(je, "t_pim", jdouble(e->t_pim));
		json_object_object_add(je, "t_hybrid", jdouble(e->t_hybrid));
		json_object_object_add(je, "speedup", jdouble(e->speedup));
		json_object_object_add(je, "speedup_kind", json_object_new_string("estimate"));
		const char *by = t_pim_by(e);
		json_object_object_add(je, "t_pim_term", by ? json_object_new_string(by) : json_object_new_null());
		json_object *tb = json_object_new_object();
		json_object_object_add(tb, "compute", jdouble(e->t_pim_compute));
		json_object_object_add(tb, "bandwidth", jdouble(e->t_pim_bandwidth));
		json_object_object_add(tb, "measured", jdouble(e->t_pim_measured));
		json_object_object_add(je, "t_pim_by_term", tb);
		json_object *nb = json_object_new_object();
		json_object_object_add(nb, "compute", json_object_new_int64(e->pim_compute));
		json_object_object_add(nb, "bandwidth", json_object_new_int64(e->pim_bandwidth));
		json_object_object_add(nb, "measured", json_object_new_int64(e->pim_measured));
		json_object_object_add(je, "regions_by_term", nb);
		json_object_object_add(je, "captured_share", jdouble(e->captured_share));
		json_object_object_add(je, "residual_share", jdouble(e->residual_share));
		json_object_object_add(je, "bound", e->bound > 0 ? jdouble(e->bound) : json_object_new_null());
		json_object_object_add(je, "bound_movement",
				       e->bound_movement > 0 ? jdouble(e->bound_movement) : json_object_new_null());
		if (e->movement.model) {
			json_object *m = json_object_new_object();
			json_object_object_add(m, "model", json_object_new_string(e->movement.model));
			json_object_object_add(m, "segments", json_object_new_int64((int64_t)e->movement.segments));
			json_object_object_add(m, "transitions", json_object_new_int64((int64_t)e->movement.transitions));
			json_object_object_add(m, "fetch_bytes", json_object_new_int64((int64_t)e->movement.fetch_bytes));
			json_object_object_add(m, "flush_bytes", json_object_new_int64((int64_t)e->movement.flush_bytes));
			json_object_object_add(m, "t_switch", jdouble(e->movement.t_switch));
			json_object_object_add(m, "t_fetch", jdouble(e->movement.t_fetch));
			json_object_object_add(m, "t_flush", jdouble(e->movement.t_flush));
			json_object_object_add(m, "t_move", jdouble(e->movement.t_move));
			json_object_object_add(je, "movement", m);
		}
		json_object *regs = json_object_new_array();
		for (size_t j = 0; j < e->n_regions; j++) {
			const struct pim_region_decision *d = &e->regions[j];
			json_object *jr = json_object_new_object();
			json_object_object_add(jr, "region", json_object_new_int64(d->region_id));
			json_object_object_add(jr, "name", json_object_new_string(d->name));
			json_object_object_add(jr, "op", json_object_new_string(d->op));
			json_object_object_add(jr, "order", json_object_new_int64(d->order));
			json_object_object_add(jr, "n_par", json_object_new_int64((int64_t)d->n_par));
			json_object_object_add(jr, "n_total", json_object_new_int64((int64_t)d->n_total));
			json_object_object_add(jr, "trip", json_object_new_int64((int64_t)d->trip));
			json_object_object_add(jr, "place", json_object_new_string(d->pim ? "pim" : "host"));
			json_object_object_add(jr, "evidence", json_object_new_string(evidence_name(d->evidence)));
			json_object_object_add(jr, "t_host", jdouble(d->t_host));
			static const char *const st[] = { "false", "true", "no_data", "skipped" };
			for (size_t c = 0; c < d->n_conditions && c < 4; c++) {
				json_object *jc = json_object_new_object();
				json_object_object_add(jc, "state", json_object_new_string(
					(unsigned)d->conditions[c].state < 4 ? st[d->conditions[c].state] : "?"));
				json_object_object_add(jc, "lhs", jdouble(d->conditions[c].lhs));
				json_object_object_add(jc, "rhs", jdouble(d->conditions[c].rhs));
				json_object_object_add(jc, "noise", jdouble(d->conditions[c].noise));
				json_object_object_add(jc, "marginal", json_object_new_boolean(d->conditions[c].marginal));
				json_object_object_add(jr, cond_key[c], jc);
			}
			json_object_object_add(jr, "marginal", json_object_new_boolean(d->marginal));
			json_object *on = json_object_new_array();
			for (int c = 0; c < 4; c++)
				if (d->marginal_on & 1u << c)
					json_object_array_add(on, json_object_new_string(cond_threshold[c]));
			json_object_object_add(jr, "marginal_on", on);
			json_object_object_add(jr, "bw_estimated", json_object_new_boolean(d->bw_estimated));
			json_object_object_add(jr, "reason", json_object_new_string(d->reason));
			json_object_object_add(jr, "t_pim", d->pim ? jdouble(d->t_pim) : json_object_new_null());
			json_object_object_add(jr, "t_pim_term", d->pim && d->t_pim_term && *d->t_pim_term
					       ? json_object_new_string(d->t_pim_term) : json_object_new_null());
			json_object_object_add(jr, "fetch_bytes", json_object_new_int64((int64_t)d->fetch_bytes));
			json_object_object_add(jr, "flush_bytes", json_object_new_int64((int64_t)d->flush_bytes));
			json_object_array_add(regs, jr);
		}
		json_object_object_add(je, "regions", regs);
		json_object_array_add(ests, je);
	}
	json_object_object_add(o, "estimates", ests);
	return o;
}

static void decision_row(const struct pim_region_decision *d, bool verbose)
{
	char t[32], bw[32], fs[32], conds[5] = "....";
	fmt_time(t, sizeof t, d->t_host);
	snprintf(bw, sizeof bw, "-");
	snprintf(fs, sizeof fs, "-");
	if (d->n_conditions == 4) {
		for (int c = 0; c < 4; c++)
			conds[c] = cond_char(&d->conditions[c]);
		double b = d->conditions[2].lhs, f = d->conditions[3].lhs;
		if (isfinite(b))
			snprintf(bw, sizeof bw, "%.2f%s", b / 1e9, d->bw_estimated ? "e" : "");
		if (isfinite(f))
			snprintf(fs, sizeof fs, "%.2f", f);
	}
	/* ~: marginal, the noise of a condition can change the side */
	char place[8];
	snprintf(place, sizeof place, "%s%s", d->pim ? "PIM" : "host", d->marginal ? "~" : "");
	printf("%6u %-18.18s %-16.16s %10" PRIu64 " %12" PRIu64 " %10s %9s %7s %-5s %-*s%s%s\n", d->region_id,
	       tty(d->name), tty(d->op), d->n_par, d->n_total, t, bw, fs, conds, verbose ? 5 : 0, place,
	       verbose ? " " : "", verbose ? tty(d->reason) : "");
}

static void decision_header(bool verbose)
{
	printf("%6s %-18s %-16s %10s %12s %10s %9s %7s %-5s %s%s\n", "REGION", "NAME", "OPERATOR", "N_PAR",
	       "N_TOTAL", "T_HOST", "BW_READ", "F_STORE", "C1234", verbose ? "PLACE " : "PLACE",
	       verbose ? "REASON" : "");
}

/*
 * Below a table: how many of its regions each condition kept on the host or sent to PIM, with
 * the condition's text once.  A region failing C1 and C2 counts under both.
 */
static void reason_summary(const struct pim_placement *r, const struct pim_placement_estimate *e,
			   const struct pim_placement_estimate *first)
{
	enum { C1_FAIL, C2_FAIL, S2_FAIL, C3_FAIL, C3_NODATA, C4_FAIL, C4_NODATA, NO_METRICS, C3_HOLD, C4_HOLD,
	       N_WHY };
	size_t n[N_WHY] = { 0 }, marginal = 0, marginal_on[4] = { 0 };
	char theta[64] = "θ", sigma[64] = "σ";

	if (r->params.theta > 0) {
		/* this host's θ; imported counts may carry their own (see --verbose) */
		snprintf(theta, sizeof theta, "θ %.2f GB/s", r->params.theta / 1e9);
		snprintf(sigma, sizeof sigma, "σ %.2f", r->params.sigma);
	}
	for (size_t j = 0; j < e->n_regions; j++) {
		const struct pim_region_decision *d = &e->regions[j];
		if (first && (j >= first->n_regions || d->pim == first->regions[j].pim))
			continue;
		if (d->n_conditions != 4)
			continue;
		enum pim_cond_state c1 = d->conditions[0].state, c2 = d->conditions[1].state;
		enum pim_cond_state c3 = d->conditions[2].state, c4 = d->conditions[3].state;
		marginal += d->marginal;
		for (int c = 0; c < 4; c++)
			marginal_on[c] += d->marginal && (d->marginal_on & 1u << c);
		if (d->pim) {
			n[C3_HOLD] += c3 == PIM_COND_TRUE;
			n[C4_HOLD] += c4 == PIM_COND_TRUE;
			continue;
		}
		if (d->evidence == PIM_EVIDENCE_NONE)
			n[NO_METRICS]++;
		n[C1_FAIL] += c1 != PIM_COND_TRUE;
		n[C2_FAIL] += c2 != PIM_COND_TRUE;
		if (c1 == PIM_COND_TRUE && c2 == PIM_COND_TRUE) {
			n[S2_FAIL]++;
			n[C3_FAIL] += c3 == PIM_COND_FALSE;
			n[C3_NODATA] += c3 == PIM_COND_NO_DATA;
			n[C4_FAIL] += c4 == PIM_COND_FALSE;
			n[C4_NODATA] += c4 == PIM_COND_NO_DATA;
		}
	}
	char c2text[96], theta_lt[96], theta_ge[96], sigma_lt[64], sigma_ge[64];
	snprintf(c2text, sizeof c2text, "C2 fails: N_par < N_core %g", e->n_core);
	snprintf(theta_lt, sizeof theta_lt, "  C3 fails: BW_read < %s", theta);
	snprintf(theta_ge, sizeof theta_ge, "C3 holds: BW_read >= %s", theta);
	snprintf(sigma_lt, sizeof sigma_lt, "  C4 fails: f_store < %s", sigma);
	snprintf(sigma_ge, sizeof sigma_ge, "C4 holds: f_store >= %s", sigma);
	const char *text[N_WHY] = {
		[C1_FAIL] = "C1 fails: T_host <= T_ctx + N_total·I_min/(N_core·f_pim)",
		[C2_FAIL] = c2text,
		[S2_FAIL] = "Stage 1 holds but Stage 2 fails (neither C3 nor C4), of which:",
		[C3_FAIL] = theta_lt,
		[C3_NODATA] = "  C3 not evaluable (no read counts)",
		[C4_FAIL] = sigma_lt,
		[C4_NODATA] = "  C4 not evaluable (no store counts)",
		[NO_METRICS] = "no measurements: T_host is taken as 0",
		[C3_HOLD] = theta_ge,
		[C4_HOLD] = sigma_ge,
	};
	printf("Why, by condition (--verbose gives each region's reason):\n");
	for (int k = 0; k < N_WHY; k++)
		if (n[k])
			printf("  %-4s %6zu  %s\n", k >= C3_HOLD ? "PIM" : "host", n[k], text[k]);
	if (marginal) {
		static const char *const what[4] = { "T_ctx (C1)", "N_core (C2)", "θ (C3)", "σ (C4)" };
		const char *sep = "";
		printf("  %-4s %6zu  marginal, within the measured noise of ", "~", marginal);
		for (int c = 0; c < 4; c++)
			if (marginal_on[c]) {
				printf("%s%s: %zu", sep, what[c], marginal_on[c]);
				sep = ", ";
			}
		printf("\n");
	}
}

static void placement_print(const struct pim_placement *r, bool verbose)
{
	printf("Placement of %s: granularity %s, movement model %s%s\n", tty(r->model), r->granularity,
	       r->movement, r->cached ? " (stored answer)" : "");
	if (r->params.theta > 0)
		printf("Platform %s; theta %.2f GB/s, sigma %.2f, T_ctx %g s, f_pim %g Hz, B_cpu %.2f GB/s\n",
		       r->platform, r->params.theta / 1e9, r->params.sigma, r->params.t_ctx,
		       r->params.f_pim, r->params.b_cpu / 1e9);
	if (r->catalogue.host) {
		char when[40];
		printf("Metrics of %u regions from the fleet catalogue: host %s, %s, %s backend%s\n",
		       r->catalogue.regions, tty(r->catalogue.host),
		       when_text(r->catalogue.measured_at, when, sizeof when), tty(r->catalogue.backend),
		       r->catalogue.fetched ? " (fetched now)" : "");
	}
	if (r->b_cpu_probe.source) {
		printf("B_cpu %s:\n", r->b_cpu_probe.source);
		b_cpu_print(&r->b_cpu_probe, "  ");
	}
	const struct pim_placement_estimate *first = r->n_estimates ? &r->estimates[0] : NULL;
	for (size_t i = 0; i < r->n_estimates; i++) {
		const struct pim_placement_estimate *e = &r->estimates[i];
		if (!e->n_regions)
			continue;
		if (i == 0) {
			printf("\nN_core = %g (conditions: y holds, n fails, ? no data, . not evaluated)\n", e->n_core);
			decision_header(verbose);
			for (size_t j = 0; j < e->n_regions; j++)
				decision_row(&e->regions[j], verbose);
			if (!verbose)
				reason_summary(r, e, NULL);
			continue;
		}
		/* Later core counts: only the regions whose placement differs from the first. */
		size_t changed = 0;
		for (size_t j = 0; j < e->n_regions && j < first->n_regions; j++)
			changed += e->regions[j].pim != first->regions[j].pim;
		if (!changed) {
			printf("\nN_core = %g: the same placement as N_core = %g\n", e->n_core, first->n_core);
			continue;
		}
		printf("\nN_core = %g: %zu regions placed differently than at N_core = %g\n", e->n_core, changed,
		       first->n_core);
		decision_header(verbose);
		for (size_t j = 0; j < e->n_regions && j < first->n_regions; j++)
			if (e->regions[j].pim != first->regions[j].pim)
				decision_row(&e->regions[j], verbose);
		if (!verbose)
			reason_summary(r, e, first);
	}
	if (first && first->n_regions)
		printf("(BW_READ in GB/s; 'e': estimated by the timing backend%s)\n",
		       first->marginal ? "; PLACE ~: marginal, within the measured noise of T_ctx (C1), θ (C3) or "
		       "σ (C4), so that it may change from run to run" : "");
	printf("\n%7s %9s %8s %10s %10s %-9s %10s %10s %9s %10s %11s %9s %9s  %s\n", "N_CORE", "OFFLOADED",
	       "MARGINAL", "T_CPU", "T_PIM", "T_PIM_BY", "T_MOVE", "T_HYBRID", "SPEEDUP~", "BOUND_MOVE",
	       "BOUND_RESID", "CAPTURED", "RESIDUAL", "MOVEMENT");
	for (size_t i = 0; i < r->n_estimates; i++) {
		const struct pim_placement_estimate *e = &r->estimates[i];
		char a[32], p[32], b[32], c[32], bound[32], bmove[32];
		const char *by = t_pim_by(e);
		fmt_time0(a, sizeof a, e->t_cpu);
		fmt_time0(p, sizeof p, e->t_pim);
		fmt_time0(b, sizeof b, e->t_hybrid);
		fmt_time0(c, sizeof c, e->movement.model ? e->movement.t_move : 0);
		if (e->bound > 0)
			snprintf(bound, sizeof bound, "%.3fx", e->bound);
		else
			snprintf(bound, sizeof bound, "-");
		if (e->bound_movement > 0)
			snprintf(bmove, sizeof bmove, "%.3fx", e->bound_movement);
		else
			snprintf(bmove, sizeof bmove, "-");
		printf("%7g %9u %8u %10s %10s %-9s %10s %10s %8.3fx %10s %11s %8.1f%% %8.1f%%  %s: %" PRIu64
		       " transitions, %" PRIu64 " B fetched, %" PRIu64 " B flushed\n",
		       e->n_core, e->offloaded, e->marginal, a, p, by ? by : "-", c, b, e->speedup, bmove, bound,
		       100 * e->captured_share, 100 * e->residual_share, e->movement.model ? e->movement.model : "?",
		       e->movement.model ? e->movement.transitions : 0, e->movement.model ? e->movement.fetch_bytes : 0,
		       e->movement.model ? e->movement.flush_bytes : 0);
	}
	printf("(SPEEDUP~ is an estimate; MARGINAL: decisions within the measured noise of their threshold; "
	       "T_PIM_BY: the term that set T_PIM,\n compute (a lower bound), bandwidth (assumed b_pim_core), "
	       "measured or mixed; BOUND_MOVE: the speedup as N_core grows without limit,\n T_MOVE staying; "
	       "BOUND_RESID: 1/RESIDUAL, without any movement)\n");
	for (size_t i = 0; i < r->n_notes; i++)
		printf("note: %s\n", r->notes[i]);
}
int cmd_placement(struct ctl *ctl, int argc, char **argv)
{
	enum { O_CORES = 1, O_GRANULARITY, O_MOVEMENT, O_PARAM, O_SVG, O_SUMMARY, O_VERBOSE };
	static const struct option opts[] = {
		{ "cores", required_argument, NULL, O_CORES },
		{ "granularity", required_argument, NULL, O_GRANULARITY },
		{ "movement", required_argument, NULL, O_MOVEMENT },
		{ "param", required_argument, NULL, O_PARAM },
		{ "svg", required_argument, NULL, O_SVG },
		{ "summary", no_argument, NULL, O_SUMMARY },
		{ "verbose", no_argument, NULL, O_VERBOSE },
		{ 0 }
	};
	struct cmd_getopt g = { .name = "placement", .argc = argc, .argv = argv, .opts = opts };
	struct pim_placement_request rq = { 0 };
	const char *model = NULL, *svg = NULL, *v;
	double cores[16];
	bool verbose = false;
	int opt, r = 0;

	while (r == 0 && (opt = cmd_getopt(&g, &v)) != -1) {
		switch (opt) {
		case O_CORES: r = parse_list("--cores", v, cores, ELEMENTSOF(cores), &rq.n_core_counts); break;
		case O_GRANULARITY: rq.granularity = v; break;
		case O_MOVEMENT: rq.movement = v; break;
		case O_PARAM: r = parse_param(&rq.params, v); break;
		case O_SVG: svg = v; break;
		case O_SUMMARY: rq.summary_only = 1; break;
		case O_VERBOSE: verbose = true; break;
		case 0:
			if (model)
				r = usage_error("placement: unexpected argument '%s'", v);
			model = v;
			break;
		default: r = -opt;
		}
	}
	if (r)
		return r;
	if (!model)
		return usage_error("placement: missing MODEL");
	if ((r = connect_client(ctl)))
		return r;
	rq.core_counts = cores;
	struct pim_placement *p;
	if ((r = pim_placement_get(ctl->client, model, &rq, &p)) < 0)
		return request_failed(ctl, r);
	if (ctl->json)
		print_json(placement_json(p));
	else
		placement_print(p, verbose);
	r = EXIT_OK;
	if (svg) {
		struct drawn d = { 0 };
		r = write_svg(ctl, svg, chart_placement(p, &d.text, &d.len, &d.e), &d);
	}
	pim_placement_free(p);
	return r;
}
