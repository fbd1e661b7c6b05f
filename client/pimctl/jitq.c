/* SPDX-License-Identifier: MIT */
/* pimctl jitq: JIT-Q plans, and MX quantization of tensor files through pimd. */
#include "pimctl.h"

static int read_times(const char *path, double **fwd, double **bwd, size_t *n)
{
	char *text;
	int r = read_text_file(path, 16u << 20, &text);
	if (r)
		return r;
	size_t cap = 0, cnt = 0;
	double *f = NULL, *b = NULL;
	unsigned lineno = 0;
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		lineno++;
		while (*line == ' ' || *line == '\t')
			line++;
		if (!*line || *line == '#' || *line == '\r')
			continue;
		char *end;
		double x = strtod(line, &end), y;
		if (end == line || *end != ',' || (y = strtod(end + 1, &end), !isfinite(x) || !isfinite(y)) ||
		    x <= 0 || y <= 0 || (*end && *end != '\r' && *end != ' ')) {
			fprintf(stderr, "pimctl: %s: line %u: expected FORWARD_SECONDS,BACKWARD_SECONDS\n", path,
				lineno);
			free(text);
			free(f);
			free(b);
			return EXIT_DAEMON;
		}
		if (cnt == cap) {
			cap = cap ? cap * 2 : 64;
			double *nf = realloc(f, cap * sizeof *f), *nb = nf ? realloc(b, cap * sizeof *b) : NULL;
			if (nf)
				f = nf;
			if (!nf || !nb) {
				free(text);
				free(f);
				free(b);
				fprintf(stderr, "pimctl: out of memory\n");
				return EXIT_DAEMON;
			}
			b = nb;
		}
		f[cnt] = x;
		b[cnt++] = y;
	}
	free(text);
	*fwd = f;
	*bwd = b;
	*n = cnt;
	return EXIT_OK;
}

static json_object *jitq_json(const struct pim_jitq_plan_reply *r)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "model", json_object_new_string(r->model));
	json_object_object_add(o, "layers", json_object_new_int64(r->layers));
	json_object_object_add(o, "model_layers", json_object_new_int64(r->model_layers));
	json_object_object_add(o, "pipeline", json_object_new_int64(r->pipeline));
	json_object_object_add(o, "kernel", json_object_new_string(r->kernel));
	json_object_object_add(o, "pim_tck_ns", jdouble(r->pim_tck_ns));
	json_object_object_add(o, "pim_stacks", json_object_new_int64(r->pim_stacks));
	json_object_object_add(o, "format", json_object_new_string(r->format));
	json_object_object_add(o, "source", json_object_new_string(r->source));
	json_object_object_add(o, "mapping", json_object_new_string(r->mapping));
	json_object_object_add(o, "loss", jdouble(r->loss));
	json_object_object_add(o, "loss_stall", jdouble(r->loss_stall));
	json_object_object_add(o, "loss_interference", jdouble(r->loss_interference));
	json_object *phases = json_object_new_array();
	for (size_t i = 0; i < r->n_phases; i++) {
		const struct pim_jitq_plan_phase *p = &r->phases[i];
		json_object *jp = json_object_new_object();
		json_object_object_add(jp, "phase", json_object_new_string(p->phase));
		json_object_object_add(jp, "lookahead", json_object_new_int64(p->lookahead));
		json_object_object_add(jp, "accel_s", jdouble(p->accel_s));
		json_object_object_add(jp, "pim_s", jdouble(p->pim_s));
		json_object_object_add(jp, "stall_s", jdouble(p->stall_s));
		json_object_object_add(jp, "pim_bound", json_object_new_boolean(p->pim_bound));
		json_object_object_add(jp, "overlap_s", jdouble(p->overlap_s));
		json_object_object_add(jp, "slack_min", jdouble(p->slack_min));
		json_object_object_add(jp, "slack_median", jdouble(p->slack_median));
		json_object_object_add(jp, "resident_bytes", json_object_new_int64((int64_t)p->resident_bytes));
		json_object *ls = json_object_new_array();
		for (size_t j = 0; j < p->n_launches; j++) {
			const struct pim_jitq_plan_launch *l = &p->launches[j];
			json_object *jl = json_object_new_object();
			json_object_object_add(jl, "block", json_object_new_int64(l->block));
			json_object_object_add(jl, "boundary", json_object_new_int64(l->boundary));
			json_object_object_add(jl, "tensor", json_object_new_string(l->tensor));
			json_object_object_add(jl, "direction", json_object_new_string(l->direction));
			json_object_object_add(jl, "rows", json_object_new_int64(l->rows));
			json_object_object_add(jl, "cols", json_object_new_int64(l->cols));
			json_object_object_add(jl, "bytes", json_object_new_int64((int64_t)l->bytes));
			json_object_object_add(jl, "pim_s", jdouble(l->pim_s));
			json_object_array_add(ls, jl);
		}
		json_object_object_add(jp, "launches", ls);
		json_object *bs = json_object_new_array();
		for (size_t j = 0; j < p->n_blocks; j++) {
			json_object *jb = json_object_new_object();
			json_object_object_add(jb, "accel_s", jdouble(p->blocks[j].accel_s));
			json_object_object_add(jb, "pim_s", jdouble(p->blocks[j].pim_s));
			json_object_object_add(jb, "slack", jdouble(p->blocks[j].slack));
			json_object_object_add(jb, "stall_s", jdouble(p->blocks[j].stall_s));
			json_object_object_add(jb, "launch_s", jdouble(p->blocks[j].launch_s));
			json_object_object_add(jb, "ready_s", jdouble(p->blocks[j].ready_s));
			json_object_object_add(jb, "start_s", jdouble(p->blocks[j].start_s));
			json_object_array_add(bs, jb);
		}
		json_object_object_add(jp, "blocks", bs);
		json_object_array_add(phases, jp);
	}
	json_object_object_add(o, "phases", phases);
	if (r->has_capacity) {
		const struct pim_jitq_capacity *c = &r->capacity;
		json_object *jc = json_object_new_object();
#define CAP(f) json_object_object_add(jc, #f, json_object_new_int64((int64_t)c->f))
		CAP(params);
		CAP(params_quant);
		CAP(master);
		CAP(grads);
		CAP(optim);
		CAP(acts);
		CAP(lp_both);
		CAP(lp_one);
		CAP(lp_jitq);
		CAP(total_both);
		CAP(total_one);
		CAP(total_jitq);
		CAP(saved_vs_both);
		CAP(saved_vs_one);
#undef CAP
		json_object_object_add(jc, "pct_vs_both", jdouble(c->pct_vs_both));
		json_object_object_add(jc, "pct_vs_one", jdouble(c->pct_vs_one));
		json_object_object_add(o, "capacity", jc);
	}
	json_object *as = json_object_new_array();
	for (size_t i = 0; i < r->n_assumptions; i++)
		json_object_array_add(as, json_object_new_string(r->assumptions[i]));
	json_object_object_add(o, "assumptions", as);
	return o;
}

static int cmd_jitq_plan(struct ctl *ctl, int argc, char **argv)
{
	enum { O_SET = 1, O_KERNEL, O_TCK, O_ACTIVATIONS, O_LAYOUT, O_MODEL, O_LAYERS, O_HIDDEN, O_HEADS, O_SEQ,
	       O_BATCH, O_TSLICE, O_PIPELINE, O_PRESET, O_FORMAT, O_FROM, O_MAPPING, O_PEAK_FLOPS,
	       O_EFFICIENCY, O_LOOKAHEAD, O_STACKS, O_TIMES, O_SVG, O_PER_BLOCK };
	static const struct option opts[] = {
		{ "set", required_argument, NULL, O_SET },
		{ "kernel", required_argument, NULL, O_KERNEL },
		{ "tck", required_argument, NULL, O_TCK },
		{ "activations", required_argument, NULL, O_ACTIVATIONS },
		{ "layout", required_argument, NULL, O_LAYOUT },
		{ "model", required_argument, NULL, O_MODEL },
		{ "layers", required_argument, NULL, O_LAYERS },
		{ "hidden", required_argument, NULL, O_HIDDEN },
		{ "heads", required_argument, NULL, O_HEADS },
		{ "seq", required_argument, NULL, O_SEQ },
		{ "batch", required_argument, NULL, O_BATCH },
		{ "tslice", required_argument, NULL, O_TSLICE },
		{ "pipeline", required_argument, NULL, O_PIPELINE },
		{ "preset", required_argument, NULL, O_PRESET },
		{ "format", required_argument, NULL, O_FORMAT },
		{ "from", required_argument, NULL, O_FROM },
		{ "mapping", required_argument, NULL, O_MAPPING },
		{ "peak-flops", required_argument, NULL, O_PEAK_FLOPS },
		{ "efficiency", required_argument, NULL, O_EFFICIENCY },
		{ "lookahead", required_argument, NULL, O_LOOKAHEAD },
		{ "stacks", required_argument, NULL, O_STACKS },
		{ "times", required_argument, NULL, O_TIMES },
		{ "svg", required_argument, NULL, O_SVG },
		{ "per-block", no_argument, NULL, O_PER_BLOCK },
		{ 0 }
	};
	/* the options that are shorthands for one --set KEY=VALUE (pimd validates) */
	static const char *const set_keys[] = { [O_SET] = "", [O_KERNEL] = "kernel", [O_TCK] = "tCK",
						[O_ACTIVATIONS] = "activations", [O_LAYOUT] = "layout" };
	struct cmd_getopt g = { .name = "jitq plan", .argc = argc, .argv = argv, .opts = opts };
	struct pim_jitq_plan_request rq = { 0 };
	double *fwd = NULL, *bwd = NULL;
	size_t n_times = 0;
	bool have_model = false;
	const char *svg = NULL, *v;
	int opt, r = 0;
	char *settings[64];
	size_t n_set = 0;

	while (r == 0 && (opt = cmd_getopt(&g, &v)) != -1) {
		if (opt >= O_SET && opt <= O_LAYOUT) {
			const char *key = set_keys[opt];
			if (n_set == ELEMENTSOF(settings)) {
				r = usage_error("jitq plan: at most %zu settings", ELEMENTSOF(settings));
				break;
			}
			if (*key ? asprintf(&settings[n_set], "%s=%s", key, v) < 0 : !(settings[n_set] = strdup(v))) {
				fprintf(stderr, "pimctl: out of memory\n");
				r = EXIT_DAEMON;
				break;
			}
			n_set++;
			if (!*key && !strchr(v, '='))
				r = usage_error("--set: '%s' is not KEY=VALUE", v);
			continue;
		}
		switch (opt) {
		case O_MODEL: rq.preset = v; have_model = true; break;
		case O_LAYERS: r = parse_u32("--layers", v, &rq.layers); have_model = true; break;
		case O_HIDDEN: r = parse_u32("--hidden", v, &rq.hidden); have_model = true; break;
		case O_HEADS: r = parse_u32("--heads", v, &rq.heads); break;
		case O_SEQ: r = parse_u32("--seq", v, &rq.seq); break;
		case O_BATCH: r = parse_u32("--batch", v, &rq.batch); break;
		case O_TSLICE: r = parse_u32("--tslice", v, &rq.tslice); break;
		case O_PIPELINE: r = parse_u32("--pipeline", v, &rq.pipeline); break;
		case O_PRESET: rq.config = v; break;
		case O_FORMAT: rq.format = v; break;
		case O_FROM: rq.source = v; break;
		case O_MAPPING: rq.mapping = v; break;
		case O_PEAK_FLOPS: r = parse_pos_double("--peak-flops", v, &rq.peak_flops); break;
		case O_EFFICIENCY: r = parse_pos_double("--efficiency", v, &rq.efficiency); break;
		case O_LOOKAHEAD: r = parse_u32("--lookahead", v, &rq.max_lookahead); break;
		case O_STACKS: r = parse_u32("--stacks", v, &rq.pim_stacks); break;
		case O_TIMES:
			free(fwd);
			free(bwd);
			fwd = bwd = NULL;
			r = read_times(v, &fwd, &bwd, &n_times);
			break;
		case O_SVG: svg = v; break;
		case O_PER_BLOCK: rq.per_block = 1; break;
		case 0: r = usage_error("jitq plan: unexpected argument '%s'", v); break;
		default: r = -opt;
		}
	}
	if (!r && !have_model)
		r = usage_error("jitq plan: give --model PRESET or a custom shape (--layers, --hidden, ...)");
	if (!r)
		r = connect_client(ctl);
	if (r) {
		free(fwd);
		free(bwd);
		for (size_t i = 0; i < n_set; i++)
			free(settings[i]);
		return r;
	}
	rq.settings = (const char *const *)settings;
	rq.n_settings = n_set;
	rq.fwd_s = fwd;
	rq.bwd_s = bwd;
	rq.n_times = n_times;
	struct pim_jitq_plan_reply *p, *full = NULL;
	r = pim_jitq_plan_get(ctl->client, &rq, &p);
	/* the chart needs every block's timeline: the same plan with its rows per block */
	if (r == 0 && svg && rq.per_block)
		full = p;
	else if (r == 0 && svg) {
		rq.per_block = 1;
		if ((r = pim_jitq_plan_get(ctl->client, &rq, &full)) < 0)
			pim_jitq_plan_reply_free(p);
	}
	free(fwd);
	free(bwd);
	for (size_t i = 0; i < n_set; i++)
		free(settings[i]);
	if (r < 0)
		return request_failed(ctl, r);
	if (ctl->json)
		print_json(jitq_json(p));
	else {
		for (size_t i = 0; i < p->n_assumptions; i++)
			if (strncmp(p->assumptions[i], "PIM:", 4) == 0 ||
			    strncmp(p->assumptions[i], "configuration:", 14) == 0)
				printf("%s\n", p->assumptions[i]);
		fputs(p->text, stdout);
	}
	r = EXIT_OK;
	if (svg) {
		struct drawn d = { 0 };
		r = write_svg(ctl, svg, chart_jitq(full, &d.text, &d.len, &d.e), &d);
		if (full != p)
			pim_jitq_plan_reply_free(full);
	}
	pim_jitq_plan_reply_free(p);
	return r;
}

/* --shape ROWSxCOLS: 0, or the usage exit status. */
static int parse_shape(const char *v, uint32_t *rows, uint32_t *cols)
{
	unsigned long rr, cc;
	char x;
	int end = -1;

	if (sscanf(v, "%lu%c%lu%n", &rr, &x, &cc, &end) != 3 || x != 'x' || end != (int)strlen(v) || !rr || !cc ||
	    rr > UINT32_MAX || cc > UINT32_MAX || v[0] == '-')
		return usage_error("--shape: expected ROWSxCOLS, got '%s'", v);
	*rows = (uint32_t)rr;
	*cols = (uint32_t)cc;
	return 0;
}

/* A whole binary file of at most max bytes: 0, or the exit status after saying why. */
static int read_binary_file(const char *path, size_t max, uint8_t **out, size_t *len)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		fprintf(stderr, "pimctl: %s: %s\n", path, strerror(errno));
		return EXIT_DAEMON;
	}
	uint8_t *data = malloc(max + 1);
	size_t n = data ? fread(data, 1, max + 1, f) : 0;
	int bad = ferror(f);
	fclose(f);
	if (!data || bad || n > max) {
		free(data);
		if (data && !bad)
			fprintf(stderr, "pimctl: %s: larger than %zu MiB\n", path, max >> 20);
		else
			fprintf(stderr, "pimctl: %s: %s\n", path, data ? "cannot read" : "out of memory");
		return EXIT_DAEMON;
	}
	*out = data;
	*len = n;
	return EXIT_OK;
}

/* The options jitq quantize and dequantize share, and those of quantize alone. */
enum { MX_O_FORMAT = 1, MX_O_DIRECTION, MX_O_SHAPE, MX_O_FROM, MX_O_ENGINE, MX_O_KERNEL };
#define MX_OPTS \
	{ "format", required_argument, NULL, MX_O_FORMAT }, \
	{ "direction", required_argument, NULL, MX_O_DIRECTION }, \
	{ "shape", required_argument, NULL, MX_O_SHAPE }

/*
 * Options and IN OUT of jitq quantize or dequantize into rq and pos: 0, or the usage exit status.
 */
static int mx_args(const char *name, int argc, char **argv, const struct option *opts,
		   struct pim_jitq_tensor_request *rq, const char *pos[2])
{
	struct cmd_getopt g = { .name = name, .argc = argc, .argv = argv, .opts = opts };
	bool have_shape = false;
	int npos = 0, opt, r = 0;
	const char *v;

	while (r == 0 && (opt = cmd_getopt(&g, &v)) != -1) {
		switch (opt) {
		case MX_O_FORMAT: rq->format = v; break;
		case MX_O_DIRECTION: rq->direction = v; break;
		case MX_O_SHAPE:
			r = parse_shape(v, &rq->rows, &rq->cols);
			have_shape = true;
			break;
		case MX_O_FROM: rq->source = v; break;
		case MX_O_ENGINE: rq->engine = v; break;
		case MX_O_KERNEL: rq->kernel = v; break;
		case 0:
			if (npos == 2)
				r = usage_error("%s: unexpected argument '%s'", name, v);
			else
				pos[npos++] = v;
			break;
		default: r = -opt;
		}
	}
	if (r)
		return r;
	if (npos != 2 || !have_shape)
		return usage_error("%s: expected --shape ROWSxCOLS IN OUT", name);
	return 0;
}

/* Reads IN (at most 256 MiB) into rq and connects: 0 or the exit status; *buf to free. */
static int mx_input(struct ctl *ctl, const char *path, struct pim_jitq_tensor_request *rq, uint8_t **buf)
{
	size_t n;
	int r;

	*buf = NULL;
	if ((r = read_binary_file(path, 256u << 20, buf, &n)))
		return r;
	rq->data = *buf;
	rq->len = n;
	return connect_client(ctl);
}

/* Writes a result to path: 0, or EXIT_DAEMON with the error printed. */
static int write_output(const char *path, const struct pim_jitq_tensor *t)
{
	FILE *o = fopen(path, "we");
	if (!o || fwrite(t->data, 1, t->len, o) != t->len || fclose(o) != 0) {
		fprintf(stderr, "pimctl: %s: %s\n", path, strerror(errno));
		return EXIT_DAEMON;
	}
	return 0;
}

static int cmd_jitq_quantize(struct ctl *ctl, int argc, char **argv)
{
	static const struct option opts[] = {
		MX_OPTS,
		{ "from", required_argument, NULL, MX_O_FROM },
		{ "engine", required_argument, NULL, MX_O_ENGINE },
		{ "kernel", required_argument, NULL, MX_O_KERNEL },
		{ 0 }
	};
	struct pim_jitq_tensor_request rq = { 0 };
	struct pim_jitq_tensor *q;
	const char *pos[2];
	uint8_t *buf;
	int r;

	if ((r = mx_args("jitq quantize", argc, argv, opts, &rq, pos)))
		return r;
	if ((r = mx_input(ctl, pos[0], &rq, &buf))) {
		free(buf);
		return r;
	}
	struct ticker tick;
	ticker_start(&tick, ctl, "%s: %.1f MiB to pimd and back", pos[0], (double)rq.len / (1 << 20));
	r = pim_jitq_quantize(ctl->client, &rq, &q);
	ctl_ticker_end(ctl);
	free(buf);
	if (r < 0)
		return request_failed(ctl, r);
	if ((r = write_output(pos[1], q))) {
		pim_jitq_tensor_free(q);
		return r;
	}
	bool pim = strcmp(q->engine, "reference") != 0;
	if (ctl->json) {
		json_object *jo = json_object_new_object();
		json_object_object_add(jo, "output", json_object_new_string(pos[1]));
		json_object_object_add(jo, "bytes", json_object_new_int64((int64_t)q->len));
		json_object_object_add(jo, "blocks", json_object_new_int64((int64_t)q->blocks));
		json_object_object_add(jo, "engine", json_object_new_string(q->engine));
		json_object_object_add(jo, "requests", json_object_new_int64(q->requests));
		if (pim) {
			json_object_object_add(jo, "pim_time_ns", jdouble(q->pim_time_ns));
			json_object_object_add(jo, "pim_commands", json_object_new_int64((int64_t)q->pim_commands));
		}
		print_json(jo);
	} else {
		printf("Wrote %zu bytes (%" PRIu64 " MX blocks) to %s with the %s engine", q->len, q->blocks, pos[1],
		       q->engine);
		if (pim)
			printf("; PIM model %.1f us, %" PRIu64 " commands, output identical to the reference",
			       q->pim_time_ns / 1e3, q->pim_commands);
		if (q->requests > 1)
			printf("; in %u parts that fit a frame", q->requests);
		printf("\n");
	}
	pim_jitq_tensor_free(q);
	return EXIT_OK;
}

static int cmd_jitq_dequantize(struct ctl *ctl, int argc, char **argv)
{
	static const struct option opts[] = { MX_OPTS, { 0 } };
	struct pim_jitq_tensor_request rq = { 0 };
	struct pim_jitq_tensor *q;
	const char *pos[2];
	uint8_t *buf;
	int r;

	if ((r = mx_args("jitq dequantize", argc, argv, opts, &rq, pos)))
		return r;
	if ((r = mx_input(ctl, pos[0], &rq, &buf))) {
		free(buf);
		return r;
	}
	struct ticker tick;
	ticker_start(&tick, ctl, "%s: %.1f MiB to pimd and back", pos[0], (double)rq.len / (1 << 20));
	r = pim_jitq_dequantize(ctl->client, &rq, &q);
	ctl_ticker_end(ctl);
	free(buf);
	if (r < 0)
		return request_failed(ctl, r);
	if ((r = write_output(pos[1], q))) {
		pim_jitq_tensor_free(q);
		return r;
	}
	if (ctl->json) {
		json_object *jo = json_object_new_object();
		json_object_object_add(jo, "output", json_object_new_string(pos[1]));
		json_object_object_add(jo, "bytes", json_object_new_int64((int64_t)q->len));
		json_object_object_add(jo, "blocks", json_object_new_int64((int64_t)q->blocks));
		json_object_object_add(jo, "nan_blocks", json_object_new_int64((int64_t)q->nan_blocks));
		json_object_object_add(jo, "requests", json_object_new_int64(q->requests));
		print_json(jo);
	} else {
		printf("Wrote %zu bytes (%u x %u FP32) from %" PRIu64 " MX blocks to %s", q->len, rq.rows, rq.cols,
		       q->blocks, pos[1]);
		if (q->nan_blocks)
			printf("; %" PRIu64 " NaN blocks", q->nan_blocks);
		if (q->requests > 1)
			printf("; in %u parts that fit a frame", q->requests);
		printf("\n");
	}
	pim_jitq_tensor_free(q);
	return EXIT_OK;
}

int run_jitq(struct ctl *ctl, int argc, char **argv)
{
	const char *sub = argc > 1 ? argv[1] : "";

	if (strcmp(sub, "plan") == 0)
		return cmd_jitq_plan(ctl, argc - 1, argv + 1);
	if (strcmp(sub, "quantize") == 0)
		return cmd_jitq_quantize(ctl, argc - 1, argv + 1);
	if (strcmp(sub, "dequantize") == 0)
		return cmd_jitq_dequantize(ctl, argc - 1, argv + 1);
	return usage_error("jitq: expected plan, quantize or dequantize");
}
