/* SPDX-License-Identifier: MIT */
/* pimctl's shared pieces: usage errors, the connection, progress lines, JSON and number
 * formatting, option values, files. */
#include "pimctl.h"

int _printf_(1, 2) usage_error(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "pimctl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'pimctl --help'.\n");
	return EXIT_USAGE;
}

/* s as text for the terminal (text_for_terminal: controls and bidirectional controls escaped,
 * so that a name cannot rewrite or reorder what is shown); valid until 8 more calls. */
int cmd_getopt(struct cmd_getopt *st, const char **arg)
{
	if (!st->started) {
		optind = 0; /* glibc: start over, for each command */
		opterr = 0; /* the messages are usage_error()'s */
		st->started = true;
		st->pos_next = 0;
	}
	if (!st->pos_next) {
		/* '-': positional arguments come back in order as 1; ':': a missing value as ':' */
		int li = -1;
		int c = getopt_long(st->argc, st->argv, "-:", st->opts, &li);
		if (c == 1 && li < 0) { /* (an option whose id is 1 sets li) */
			*arg = optarg;
			return 0;
		}
		if (c == '?' || c == ':') {
			usage_error("%s: unknown option or missing value '%s'", st->name, st->argv[optind - 1]);
			return -EXIT_USAGE;
		}
		if (c != -1) {
			*arg = optarg;
			return c;
		}
		st->pos_next = optind; /* after "--": positional, whatever they look like */
	}
	if (st->pos_next < st->argc) {
		*arg = st->argv[st->pos_next++];
		return 0;
	}
	return -1;
}

int cmd_no_args(const char *name, int argc, char **argv)
{
	static const struct option none[] = { { 0 } };
	struct cmd_getopt g = { .name = name, .argc = argc, .argv = argv, .opts = none };
	const char *v;
	int o = cmd_getopt(&g, &v);

	if (o == 0)
		return usage_error("%s: unexpected argument '%s'", name, v);
	return o < 0 && o != -1 ? -o : 0;
}

const char *tty(const char *s)
{
	static char *ring[8];
	static unsigned next;
	char *e = text_for_terminal(s);

	free(ring[next % 8]);
	ring[next++ % 8] = e;
	return e ? e : "?";
}

int connect_client(struct ctl *ctl)
{
	ctl->client = pim_client_new();
	if (!ctl->client) {
		fprintf(stderr, "pimctl: out of memory\n");
		return EXIT_CONNECT;
	}
	int r = pim_client_connect(ctl->client, ctl->socket, "pimctl");
	if (r < 0) {
		fprintf(stderr, "pimctl: %s%s\n", tty(pim_client_error(ctl->client)),
			r == -ENOENT || r == -ECONNREFUSED ? "; --socket PATH selects another socket" : "");
		/* pimd answered but refused (too many clients, protocol version): a daemon error */
		return pim_client_remote_error(ctl->client) ? EXIT_DAEMON : EXIT_CONNECT;
	}
	return EXIT_OK;
}

/* A failed request: pimd refused it or it was invalid here (1), or the connection broke (3). */
int request_failed(struct ctl *ctl, int r)
{
	fprintf(stderr, "pimctl: %s\n", tty(pim_client_error(ctl->client)));
	if (pim_client_remote_error(ctl->client))
		return EXIT_DAEMON;
	switch (r) {
	case -ECONNRESET:
	case -EPIPE:
	case -ENOTCONN:
	case -ETIMEDOUT:
	case -EBADMSG:
		return EXIT_CONNECT;
	default:
		return EXIT_DAEMON;
	}
}
/* ---------------------------------------------------------------- progress on a terminal */

/*
 * A progress line, rewritten in place with \r and erased when the work ends: only when standard
 * output is a terminal and the output is not JSON, so pipes, files and scripts see nothing of it.
 */

void progress_init(struct progress *p, const struct ctl *ctl)
{
	p->on = !ctl->json && isatty(STDOUT_FILENO);
	p->shown = false;
	clock_gettime(CLOCK_MONOTONIC, &p->t0);
}

double progress_elapsed(const struct progress *p)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - p->t0.tv_sec) + (double)(t.tv_nsec - p->t0.tv_nsec) * 1e-9;
}

void _printf_(2, 3) progress_show(struct progress *p, const char *fmt, ...)
{
	va_list ap;
	if (!p->on)
		return;
	fputs("\r", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputs("\033[K", stdout);
	fflush(stdout);
	p->shown = true;
}

void progress_end(struct progress *p)
{
	if (p->shown) {
		fputs("\r\033[K", stdout);
		fflush(stdout);
	}
	p->shown = false;
}

/*
 * A request that answers once, at the end (a calibration sweep, a quantized file): a thread
 * shows what is being done and for how long until the answer comes.
 */

static void *ticker_main(void *arg)
{
	struct ticker *t = arg;
	double wait = 0.3; /* quick answers show nothing */
	pthread_mutex_lock(&t->mu);
	while (!t->stop) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += (long)(wait * 1e9);
		until.tv_sec += until.tv_nsec / 1000000000;
		until.tv_nsec %= 1000000000;
		if (pthread_cond_timedwait(&t->cv, &t->mu, &until) == ETIMEDOUT && !t->stop)
			progress_show(&t->p, "%s: %.1f s", t->what, progress_elapsed(&t->p));
		wait = 0.25;
	}
	pthread_mutex_unlock(&t->mu);
	return NULL;
}

/* Starts t for the next request, which call_body() ends before it prints anything. */
void _printf_(3, 4) ticker_start(struct ticker *t, struct ctl *ctl, const char *fmt, ...)
{
	va_list ap;
	*t = (struct ticker){ .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
	progress_init(&t->p, ctl);
	va_start(ap, fmt);
	vsnprintf(t->what, sizeof t->what, fmt, ap);
	va_end(ap);
	t->running = t->p.on && pthread_create(&t->thread, NULL, ticker_main, t) == 0;
	ctl->ticker = t;
}

void ticker_stop(struct ticker *t)
{
	if (!t->running)
		return;
	pthread_mutex_lock(&t->mu);
	t->stop = true;
	pthread_cond_signal(&t->cv);
	pthread_mutex_unlock(&t->mu);
	pthread_join(t->thread, NULL);
	progress_end(&t->p);
	t->running = false;
}

void ctl_ticker_end(struct ctl *ctl)
{
	if (ctl->ticker) {
		ticker_stop(ctl->ticker);
		ctl->ticker = NULL;
	}
}

void print_json(json_object *o)
{
	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
}

void human_bytes(char *buf, size_t cap, uint64_t b)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)b;
	unsigned u = 0;

	while (v >= 1024 && u + 1 < ELEMENTSOF(units)) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, cap, "%" PRIu64 " B", b);
	else
		snprintf(buf, cap, "%.1f %s", v, units[u]);
}

void format_time(char *buf, size_t cap, int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;
	if (localtime_r(&tt, &tm))
		strftime(buf, cap, "%Y-%m-%d %H:%M:%S", &tm);
	else
		snprintf(buf, cap, "%" PRId64, t);
}

json_object *model_info_json(const struct pim_model_info *m)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "name", json_object_new_string(m->name));
	json_object_object_add(o, "regions", json_object_new_int64(m->regions));
	json_object_object_add(o, "allocations", json_object_new_int64(m->allocations));
	json_object_object_add(o, "allocation_bytes", json_object_new_int64((int64_t)m->allocation_bytes));
	json_object_object_add(o, "owner_uid", json_object_new_int64(m->owner_uid));
	json_object_object_add(o, "loaded_at", json_object_new_int64(m->loaded_at));
	json_object_object_add(o, "source", json_object_new_string(m->source));
	return o;
}

int call_body(struct ctl *ctl, Pim__Request *req, Pim__Response__BodyCase want,
		     Pim__Response **out)
{
	size_t n = pim__request__get_packed_size(req);
	uint8_t *buf = malloc(n ? n : 1);
	void *rbuf;
	size_t rlen;
	int r;

	if (!buf) {
		fprintf(stderr, "pimctl: out of memory\n");
		return EXIT_DAEMON;
	}
	pim__request__pack(req, buf);
	r = pim_call(ctl->client, buf, n, &rbuf, &rlen);
	free(buf);
	ctl_ticker_end(ctl);
	if (r < 0)
		return request_failed(ctl, r);
	Pim__Response *resp = pim__response__unpack(NULL, rlen, rbuf);
	free(rbuf);
	if (!resp) {
		fprintf(stderr, "pimctl: pimd sent a response that does not decode\n");
		return EXIT_CONNECT;
	}
	if (resp->body_case == PIM__RESPONSE__BODY_ERROR) {
		fprintf(stderr, "pimctl: %s\n", tty(resp->error->message));
		pim__response__free_unpacked(resp, NULL);
		return EXIT_DAEMON;
	}
	if (resp->body_case != want) {
		fprintf(stderr, "pimctl: pimd answered with an unexpected message (%d); is it older than "
			"pimctl %s?\n", resp->body_case, PIMD_VERSION);
		pim__response__free_unpacked(resp, NULL);
		return EXIT_DAEMON;
	}
	*out = resp;
	return EXIT_OK;
}

const struct param_field param_fields[] = {
	{ "n_core", offsetof(struct pim_placement_params, n_core) },
	{ "f_pim", offsetof(struct pim_placement_params, f_pim) },
	{ "i_min", offsetof(struct pim_placement_params, i_min) },
	{ "t_ctx", offsetof(struct pim_placement_params, t_ctx) },
	{ "b_cpu", offsetof(struct pim_placement_params, b_cpu) },
	{ "theta", offsetof(struct pim_placement_params, theta) },
	{ "theta_ratio", offsetof(struct pim_placement_params, theta_ratio) },
	{ "sigma", offsetof(struct pim_placement_params, sigma) },
	{ "b_rd", offsetof(struct pim_placement_params, b_rd) },
	{ "b_wb", offsetof(struct pim_placement_params, b_wb) },
	{ "b_pim_core", offsetof(struct pim_placement_params, b_pim_core) },
	{ "line_bytes", offsetof(struct pim_placement_params, line_bytes) },
	{ "b_cpu_spread", offsetof(struct pim_placement_params, b_cpu_spread) },
};

/* --param NAME=VALUE: 0 ok, else the usage exit status. */
int parse_param(struct pim_placement_params *p, const char *arg)
{
	const char *eq = strchr(arg, '=');
	char *end;

	if (!eq)
		return usage_error("--param: expected NAME=VALUE, got '%s'", arg);
	for (size_t i = 0; i < ELEMENTSOF(param_fields); i++)
		if (strlen(param_fields[i].name) == (size_t)(eq - arg) &&
		    strncmp(param_fields[i].name, arg, (size_t)(eq - arg)) == 0) {
			errno = 0;
			double v = strtod(eq + 1, &end);
			if (errno || end == eq + 1 || *end || !isfinite(v) || v <= 0)
				return usage_error("--param %s: '%s' is not a positive number", param_fields[i].name,
						   eq + 1);
			*(double *)((char *)p + param_fields[i].offset) = v;
			return 0;
		}
	return usage_error("--param: unknown parameter '%.*s' (n_core, f_pim, i_min, t_ctx, b_cpu, theta, "
			   "theta_ratio, sigma, b_rd, b_wb, b_pim_core, line_bytes, b_cpu_spread)", (int)(eq - arg),
			   arg);
}

/* A comma-separated list of positive numbers. */
int parse_list(const char *opt, const char *arg, double *v, size_t max, size_t *n)
{
	const char *p = arg;
	char *end;

	*n = 0;
	while (*p) {
		if (*n == max)
			return usage_error("%s: at most %zu values", opt, max);
		errno = 0;
		double x = strtod(p, &end);
		if (errno || end == p || !isfinite(x) || x <= 0)
			return usage_error("%s: '%s' is not a list of positive numbers", opt, arg);
		v[(*n)++] = x;
		if (*end == ',')
			end++;
		else if (*end)
			return usage_error("%s: '%s' is not a list of positive numbers", opt, arg);
		p = end;
	}
	if (*n == 0)
		return usage_error("%s: empty list", opt);
	return 0;
}

void fmt_time(char *buf, size_t len, double s)
{
	if (!isfinite(s) || s <= 0)
		snprintf(buf, len, "-");
	else if (s < 1e-6)
		snprintf(buf, len, "%.0f ns", s * 1e9);
	else if (s < 1e-3)
		snprintf(buf, len, "%.2f us", s * 1e6);
	else if (s < 1)
		snprintf(buf, len, "%.2f ms", s * 1e3);
	else
		snprintf(buf, len, "%.3f s", s);
}

/* A time that is known to be 0 prints as 0 ('-' means unknown). */
void fmt_time0(char *buf, size_t len, double s)
{
	if (s == 0)
		snprintf(buf, len, "0");
	else
		fmt_time(buf, len, s);
}

const char *evidence_name(enum pim_evidence e)
{
	switch (e) {
	case PIM_EVIDENCE_COUNTERS: return "counters";
	case PIM_EVIDENCE_ESTIMATE: return "estimate";
	case PIM_EVIDENCE_IMPORTED: return "imported";
	default: return "none";
	}
}

json_object *jdouble(double v)
{
	return isfinite(v) ? json_object_new_double(v) : json_object_new_null();
}


/*
 * Writes a chart that chart.h drew into d (r: what the chart function returned) to path and says
 * so unless the output is JSON: 0, or EXIT_DAEMON with the error printed.  Frees d's text.
 */
int write_svg(const struct ctl *ctl, const char *path, int r, struct drawn *d)
{
	if (r < 0) {
		fprintf(stderr, "pimctl: %s\n", d->e.msg);
		return EXIT_DAEMON;
	}
	FILE *f = fopen(path, "we");
	if (!f || fwrite(d->text, 1, d->len, f) != d->len || fclose(f) != 0) {
		fprintf(stderr, "pimctl: %s: %s\n", path, strerror(errno));
		free(d->text);
		return EXIT_DAEMON;
	}
	free(d->text);
	if (!ctl->json)
		printf("Chart written to %s (%zu bytes of SVG)\n", path, d->len);
	return EXIT_OK;
}
int read_text_file(const char *path, size_t max, char **out)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		fprintf(stderr, "pimctl: %s: %s\n", path, strerror(errno));
		return EXIT_DAEMON;
	}
	char *buf = malloc(max + 1);
	size_t n = buf ? fread(buf, 1, max + 1, f) : 0;
	int bad = ferror(f);
	fclose(f);
	if (!buf || bad) {
		free(buf);
		fprintf(stderr, "pimctl: %s: cannot read\n", path);
		return EXIT_DAEMON;
	}
	if (n > max) {
		free(buf);
		fprintf(stderr, "pimctl: %s: larger than %zu bytes\n", path, max);
		return EXIT_DAEMON;
	}
	if (memchr(buf, 0, n)) {
		free(buf);
		fprintf(stderr, "pimctl: %s: contains a NUL byte; expected text\n", path);
		return EXIT_DAEMON;
	}
	buf[n] = 0;
	*out = buf;
	return EXIT_OK;
}
int parse_u32(const char *opt, const char *v, uint32_t *out)
{
	char *end;
	errno = 0;
	unsigned long x = strtoul(v, &end, 10);
	if (errno || *end || end == v || v[0] == '-' || x == 0 || x > UINT32_MAX)
		return usage_error("%s: '%s' is not a positive integer", opt, v);
	*out = (uint32_t)x;
	return 0;
}

int parse_pos_double(const char *opt, const char *v, double *out)
{
	char *end;
	errno = 0;
	double x = strtod(v, &end);
	if (errno || *end || end == v || !isfinite(x) || x <= 0)
		return usage_error("%s: '%s' is not a positive number", opt, v);
	*out = x;
	return 0;
}

/* --times FILE: one line per block, "FORWARD_SECONDS,BACKWARD_SECONDS"; '#' comments. */

/* ---------------------------------------------------------------- B_cpu, times */

const char *when_text(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (t <= 0 || !gmtime_r(&tt, &tm))
		return "never";
	strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm);
	return buf;
}

json_object *b_cpu_json(const struct pim_bandwidth_probe *p)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "b_cpu", json_object_new_double(p->b_cpu));
	json_object_object_add(o, "source", json_object_new_string(p->source));
	if (p->measured > 0) {
		json_object_object_add(o, "measured", json_object_new_double(p->measured));
		json_object_object_add(o, "spread", json_object_new_double(p->spread));
		json_object_object_add(o, "method", json_object_new_string(p->method));
		json_object_object_add(o, "measured_at", json_object_new_int64(p->measured_at));
		json_object_object_add(o, "busy", json_object_new_boolean(p->busy));
		json_object_object_add(o, "load", json_object_new_string(p->load));
		json_object_object_add(o, "host", json_object_new_string(p->host));
	}
	return o;
}

/* How the B_cpu of p was measured, on lines after a first of the caller's, each indented. */
void b_cpu_print(const struct pim_bandwidth_probe *p, const char *indent)
{
	char t[32];

	if (!p || p->measured <= 0) {
		if (p && strcmp(p->source, "measured") != 0)
			printf("%snot measured on this platform\n", indent);
		return;
	}
	format_time(t, sizeof t, p->measured_at);
	if (strcmp(p->source, "measured") != 0)
		printf("%sthe probe measured %.2f GB/s; the %s value is used instead\n", indent, p->measured / 1e9,
		       p->source);
	if (p->method[0])
		printf("%smeasured %s on %s, spread %.1f%% between rounds\n%s(%s)\n", indent, t, p->host,
		       100 * p->spread, indent, p->method);
	else
		printf("%smeasured by the single-pass probe of an earlier pimd (no spread known)\n", indent);
	if (p->load[0])
		printf("%s%s%s\n", indent, p->load,
		       p->busy ? "; measure again when it is quiet: pimctl platform probe" : "");
}

