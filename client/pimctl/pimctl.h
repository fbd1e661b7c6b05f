/* SPDX-License-Identifier: MIT */
/*
 * pimctl: the command line of pimd.  See pimctl(1).
 * Exit status: 0 success, 1 the request failed (pimd refused it, or the input file is invalid),
 * 2 usage error, 3 pimd could not be reached or the connection broke.
 *
 * One file per command family (status.c, model.c, placement.c, calibrate.c, jitq.c,
 * profile.c), each command's options in a getopt_long table of its own (cmd_getopt); main.c
 * dispatches, common.c holds what they share.
 */
#ifndef PIMCTL_H
#define PIMCTL_H

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chart.h"
#include "manifest.h"
#include "pim.h"

enum { EXIT_OK = 0, EXIT_DAEMON = 1, EXIT_USAGE = 2, EXIT_CONNECT = 3 };

struct ticker;

struct ctl {
	const char *socket;
	bool json;
	pim_client *client;
	struct ticker *ticker; /* the progress line of the request under way; call_body ends it */
};

/* The one usage error: "pimctl: MESSAGE" and the hint to --help on stderr; EXIT_USAGE. */
int _printf_(1, 2) usage_error(const char *fmt, ...);

/*
 * getopt_long over a command's arguments (argv[0] is the command's word, skipped; name is
 * how messages call the command), with opts its table (flag NULL, val the option's id; no short options).
 * Returns an option's id with *arg its value, 0 for each positional argument (in *arg, in
 * order), -1 at the end, or EXIT_USAGE negated after usage_error() named the unknown option or
 * missing value.  Call it until it returns -1 or a negative status; *st holds its place.
 */
struct cmd_getopt {
	const char *name; /* for messages: "placement", "jitq quantize" */
	int argc;
	char **argv;
	const struct option *opts;
	bool started;
	int pos_next; /* positionals after the options (permuted to the end by getopt_long) */
};
int cmd_getopt(struct cmd_getopt *st, const char **arg);

/* A command that takes no options or arguments: 0, or the usage exit status. */
int cmd_no_args(const char *name, int argc, char **argv);

/* s as text for the terminal (controls escaped); valid until 8 more calls. */
const char *tty(const char *s);
int connect_client(struct ctl *ctl);
/* A failed library call: the message printed, pimd's refusal (1) or a broken connection (3). */
int request_failed(struct ctl *ctl, int r);

/* A progress line on a terminal (never in a pipe or with --json). */
struct progress {
	bool on, shown;
	struct timespec t0;
};
void progress_init(struct progress *p, const struct ctl *ctl);
double progress_elapsed(const struct progress *p);
void _printf_(2, 3) progress_show(struct progress *p, const char *fmt, ...);
void progress_end(struct progress *p);

/* A request that answers once, at the end: a thread shows what is being done meanwhile. */
struct ticker {
	struct progress p;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop, running;
	char what[256];
};
void _printf_(3, 4) ticker_start(struct ticker *t, struct ctl *ctl, const char *fmt, ...);
void ticker_stop(struct ticker *t);
/* Ends ctl's ticker, if one runs (before anything is printed). */
void ctl_ticker_end(struct ctl *ctl);

void print_json(json_object *o);
json_object *jdouble(double v);
json_object *model_info_json(const struct pim_model_info *m);
void human_bytes(char *buf, size_t cap, uint64_t b);
void format_time(char *buf, size_t cap, int64_t t);
void fmt_time(char *buf, size_t len, double s);
void fmt_time0(char *buf, size_t len, double s);
const char *evidence_name(enum pim_evidence e);
/* A time in seconds since the epoch as UTC text into buf, or "never". */
const char *when_text(int64_t t, char *buf, size_t len);
json_object *b_cpu_json(const struct pim_bandwidth_probe *p);
/* How p's B_cpu was measured, on lines after a first of the caller's, each indented. */
void b_cpu_print(const struct pim_bandwidth_probe *p, const char *indent);

/* Sends req through pim_call and returns the decoded answer; an Error is printed and mapped
 * to an exit status.  For the requests libpimclient has no typed call for yet. */
int call_body(struct ctl *ctl, Pim__Request *req, Pim__Response__BodyCase want, Pim__Response **out);

/* Option values: 0, or the usage exit status after saying what is wrong. */
struct param_field {
	const char *name;
	size_t offset; /* in struct pim_placement_params */
};
#define PARAM_FIELDS 13
extern const struct param_field param_fields[PARAM_FIELDS];
int parse_param(struct pim_placement_params *p, const char *arg);
int parse_list(const char *opt, const char *arg, double *v, size_t max, size_t *n);
int parse_u32(const char *opt, const char *v, uint32_t *out);
int parse_pos_double(const char *opt, const char *v, double *out);

/* A chart as chart.h draws it: its text and length, or the error. */
struct drawn {
	char *text;
	size_t len;
	struct pim_error e;
};
int write_svg(const struct ctl *ctl, const char *path, int r, struct drawn *d);
int read_text_file(const char *path, size_t max, char **out);

/* The commands: argc/argv from the command's name on. */
int run_status(struct ctl *ctl, int argc, char **argv);
int run_platform(struct ctl *ctl, int argc, char **argv);
int run_catalogue(struct ctl *ctl, int argc, char **argv);
int run_model(struct ctl *ctl, int argc, char **argv);
int cmd_placement(struct ctl *ctl, int argc, char **argv);
int cmd_import_perf(struct ctl *ctl, int argc, char **argv);
int cmd_calibrate(struct ctl *ctl, int argc, char **argv);
int run_jitq(struct ctl *ctl, int argc, char **argv);
int cmd_profile(struct ctl *ctl, int argc, char **argv);

#endif
