/* SPDX-License-Identifier: MIT */
/* pimctl: its help, its global options and the table of its commands. */
#include "pimctl.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: pimctl [--socket PATH] [--json] COMMAND [ARG]...\n"
		"Command line of pimd, the PIM placement service.\n\n"
		"Commands:\n"
		"  status                    daemon version, uptime, clients, models, store, B_cpu\n"
		"  platform probe            measure the host read bandwidth B_cpu again (root or\n"
		"                            pimd's user: it changes every user's answers)\n"
		"  model load FILE [--replace]\n"
		"                            load a manifest (JSON or protobuf binary)\n"
		"  model list                list loaded models\n"
		"  model show NAME           show a model's allocations and regions\n"
		"  model rm NAME             remove a model\n"
		"  profile MODEL --library PATH [--reps K] [--warmups W] [--regions ID,...]\n"
		"            [--timeout-ms N] [--no-wait]\n"
		"                            run the model library under counters (or timing) as you\n"
		"  profile --status JOB [--wait]\n"
		"                            a profiling job's state\n"
		"  profile --cancel JOB        cancel a queued or running job of yours\n"
		"  placement MODEL [--cores N,N...] [--granularity loop|operator|block]\n"
		"            [--movement upper|resident] [--param NAME=VALUE]... [--summary]\n"
		"            [--verbose] [--svg FILE]\n"
		"                            decide which regions run on PIM, with the estimate;\n"
		"                            --svg also draws it as an SVG picture\n"
		"  import-perf MODEL REGION FILE [--time SECONDS] [--executions N]\n"
		"            [--b-cpu BYTES_PER_S]\n"
		"                            store perf stat -x, counts measured elsewhere\n"
		"  calibrate MODEL --labels FILE [--theta LO:HI:STEP] [--sigma S,...]\n"
		"            [--param NAME=VALUE]... [--all] [--svg FILE]\n"
		"                            sweep theta (GB/s) against labelled regions;\n"
		"                            --svg also draws accuracy against theta\n"
		"  catalogue status          the fleet catalogue: reachable, outbox, last publish\n"
		"  catalogue list [--limit N]\n"
		"                            models and platforms measured across the fleet\n"
		"  jitq plan --model PRESET | --layers N --hidden H [--heads A] [--seq S] [--batch B]\n"
		"            [--tslice T] [--pipeline P] [--format mx9|mx6|mx4] [--from bf16|fp32]\n"
		"            [--mapping tiled|strided|strided-opt] [--peak-flops F] [--efficiency E]\n"
		"            [--times FILE] [--lookahead N] [--stacks N] [--preset default|paper]\n"
		"            [--kernel exact|paper] [--tck NS] [--activations full|selective|\n"
		"            recompute|none] [--layout in-out|out-in] [--set KEY=VALUE]... [--per-block]\n"
		"            [--svg FILE]\n"
		"                            schedule just-in-time weight quantization on PIM;\n"
		"                            --svg also draws one training step's timeline\n"
		"  jitq quantize --shape ROWSxCOLS [--format mx9|mx6|mx4|mxfp8-e4m3|mxfp8-e5m2|\n"
		"            mxfp6-e3m2|mxfp6-e2m3|mxfp4|mxint8] [--from bf16|fp32] [--direction row|col]\n"
		"            [--engine reference|tiled|strided|strided-opt] [--kernel exact|paper] IN OUT\n"
		"                            convert a raw tensor file to packed MX\n"
		"  jitq dequantize --shape ROWSxCOLS [--format FORMAT] [--direction row|col] IN OUT\n"
		"                            convert packed MX back to raw FP32\n\n"
		"Options:\n"
		"  -s, --socket PATH  pimd's socket (default $%s, else %s)\n"
		"  -j, --json         print JSON instead of tables\n"
		"  -h, --help         show this help\n"
		"  -V, --version      show the version\n\n"
		"On a terminal, profile, calibrate and jitq quantize/dequantize show a progress\n"
		"line; never in a pipe or with --json.\n\n"
		"Exit status: 0 ok, 1 the request failed (refused by pimd, or an invalid input file),\n"
		"2 usage error, 3 pimd could not be reached or the connection broke.\n",
		PIM_SOCKET_ENV, PIM_DEFAULT_SOCKET);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	struct ctl ctl = { 0 };
	int c, r;

	/* --json and --socket are global: accepted after the command too (pimctl placement m --json). */
	int k = 1;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0 || strcmp(argv[i], "-j") == 0) {
			ctl.json = true;
			continue;
		}
		if ((strcmp(argv[i], "--socket") == 0 || strcmp(argv[i], "-s") == 0) && i + 1 < argc) {
			ctl.socket = argv[++i];
			continue;
		}
		if (strncmp(argv[i], "--socket=", 9) == 0) {
			ctl.socket = argv[i] + 9;
			continue;
		}
		argv[k++] = argv[i];
	}
	argc = k;
	argv[argc] = NULL;
	/* '+': stop at the command so its own options (model load --replace) pass through. */
	while ((c = getopt_long(argc, argv, "+s:jhV", opts, NULL)) != -1) {
		switch (c) {
		case 's': ctl.socket = optarg; break;
		case 'j': ctl.json = true; break;
		case 'h': usage(stdout); return EXIT_OK;
		case 'V': printf("pimctl %s\n", PIMD_VERSION); return EXIT_OK;
		default:
			fprintf(stderr, "Try 'pimctl --help'.\n");
			return EXIT_USAGE;
		}
	}
	if (optind >= argc)
		return usage_error("missing command");
	static const struct {
		const char *name;
		int (*run)(struct ctl *ctl, int argc, char **argv);
	} commands[] = {
		{ "status", run_status },
		{ "platform", run_platform },
		{ "model", run_model },
		{ "catalogue", run_catalogue },
		{ "profile", cmd_profile },
		{ "placement", cmd_placement },
		{ "import-perf", cmd_import_perf },
		{ "calibrate", cmd_calibrate },
		{ "jitq", run_jitq },
	};
	const char *cmd = argv[optind];
	r = -1;
	for (size_t i = 0; i < ELEMENTSOF(commands); i++)
		if (strcmp(cmd, commands[i].name) == 0)
			r = commands[i].run(&ctl, argc - optind, argv + optind);
	if (r < 0 && strcmp(cmd, "help") == 0) {
		usage(stdout);
		r = EXIT_OK;
	} else if (r < 0)
		r = usage_error("unknown command '%s'", cmd);
	pim_client_free(ctl.client);
	return r;
}
