/* SPDX-License-Identifier: MIT */
/* pimctl profile: start a profiling job, follow it, or cancel it. */
#include "pimctl.h"

static json_object *job_json(const struct pim_profile_job *j)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "job", json_object_new_int64((int64_t)j->id));
	json_object_object_add(o, "state", json_object_new_string(j->state));
	json_object_object_add(o, "model", json_object_new_string(j->model));
	json_object_object_add(o, "backend", json_object_new_string(j->backend));
	json_object_object_add(o, "backend_reason", json_object_new_string(j->backend_reason));
	json_object_object_add(o, "regions_done", json_object_new_int64(j->regions_done));
	json_object_object_add(o, "regions_total", json_object_new_int64(j->regions_total));
	json_object_object_add(o, "repetitions_done", json_object_new_int64((int64_t)j->repetitions_done));
	json_object_object_add(o, "repetitions_total", json_object_new_int64((int64_t)j->repetitions_total));
	json_object_object_add(o, "samples", json_object_new_int64((int64_t)j->samples));
	json_object_object_add(o, "uid", json_object_new_int64(j->uid));
	json_object_object_add(o, "message", json_object_new_string(j->message));
	return o;
}

static bool job_finished(const struct pim_profile_job *j)
{
	return strcmp(j->state, "done") == 0 || strcmp(j->state, "failed") == 0 ||
	       strcmp(j->state, "cancelled") == 0;
}

/* The progress line of a profiling job: its state, regions and repetitions done, and how long
 * its worker has run against its timeout (or how long it has waited in the queue). */
static void progress_job(struct progress *p, const struct pim_profile_job *q, const struct pim_profile_clock *k)
{
	char limit[64] = "";
	if (k->timeout_ms)
		snprintf(limit, sizeof limit, " of its %.4g s timeout", k->timeout_ms / 1e3);
	if (strcmp(q->state, "running") == 0)
		progress_show(p, "job %" PRIu64 " running: regions %u/%u, repetitions %" PRIu64 "/%" PRIu64
			      ", %.1f s%s", q->id, q->regions_done, q->regions_total, q->repetitions_done,
			      q->repetitions_total, k->running_ms / 1e3, limit);
	else
		progress_show(p, "job %" PRIu64 " %s: waiting %.1f s for a worker", q->id, q->state,
			      progress_elapsed(p));
}

/* Polls until the job ends, with a progress line on a terminal; j is its last state. */
static int profile_wait(struct ctl *ctl, struct pim_profile_job *j)
{
	struct pim_profile_clock clock;
	struct progress p;
	int r;

	progress_init(&p, ctl);
	while (!job_finished(j)) {
		if ((r = pim_profile_poll(ctl->client, j->id, j, &clock)) < 0) {
			progress_end(&p);
			return request_failed(ctl, r);
		}
		if (!job_finished(j)) {
			progress_job(&p, j, &clock);
			usleep(100000);
		}
	}
	progress_end(&p);
	return EXIT_OK;
}

static void job_print(const struct pim_profile_job *j)
{
	printf("Profile job %" PRIu64 " of %s: %s", j->id, j->model, j->state);
	if (job_finished(j))
		printf(" (%s backend, as uid %u): %s\n", j->backend, j->uid, j->message);
	else
		printf(", repetitions %" PRIu64 "/%" PRIu64 "; poll with: pimctl profile --status %" PRIu64 "\n",
		       j->repetitions_done, j->repetitions_total, j->id);
	if (job_finished(j))
		printf("  regions with metrics %u/%u, %" PRIu64 " samples stored\n", j->regions_done,
		       j->regions_total, j->samples);
	if (strcmp(j->backend, "timing") == 0 && j->backend_reason[0])
		printf("  %s\n", j->backend_reason);
}

int cmd_profile(struct ctl *ctl, int argc, char **argv)
{
	enum { O_LIBRARY = 1, O_REPS, O_WARMUPS, O_TIMEOUT_MS, O_REGIONS, O_STATUS, O_CANCEL, O_NO_WAIT, O_WAIT };
	static const struct option opts[] = {
		{ "library", required_argument, NULL, O_LIBRARY },
		{ "reps", required_argument, NULL, O_REPS },
		{ "warmups", required_argument, NULL, O_WARMUPS },
		{ "timeout-ms", required_argument, NULL, O_TIMEOUT_MS },
		{ "regions", required_argument, NULL, O_REGIONS },
		{ "status", required_argument, NULL, O_STATUS },
		{ "cancel", required_argument, NULL, O_CANCEL },
		{ "no-wait", no_argument, NULL, O_NO_WAIT },
		{ "wait", no_argument, NULL, O_WAIT },
		{ 0 }
	};
	struct cmd_getopt g = { .name = "profile", .argc = argc, .argv = argv, .opts = opts };
	struct pim_profile_options opt = { 0 };
	struct pim_profile_job job;
	const char *model = NULL, *library = NULL, *v;
	uint32_t regions[1024];
	int wait = -1; /* default: wait for a new job, not for --status */
	bool have_status = false, cancel = false;
	uint64_t status_id = 0;
	int oc, r = 0;

	while (r == 0 && (oc = cmd_getopt(&g, &v)) != -1) {
		switch (oc) {
		case O_LIBRARY: library = v; break;
		case O_REPS: r = parse_u32("--reps", v, &opt.repetitions); break;
		case O_WARMUPS: r = parse_u32("--warmups", v, &opt.warmups); break;
		case O_TIMEOUT_MS: r = parse_u32("--timeout-ms", v, &opt.timeout_ms); break;
		case O_REGIONS: {
			char buf[8192];
			snprintf(buf, sizeof buf, "%s", v);
			size_t k = 0;
			for (char *t = strtok(buf, ","); t && !r; t = strtok(NULL, ","), k++) {
				char *end;
				errno = 0;
				unsigned long x = strtoul(t, &end, 10);
				if (errno || *end || end == t || t[0] == '-' || x > UINT32_MAX || k == 1024)
					r = usage_error("--regions: '%s' is not a list of region ids", v);
				else
					regions[k] = (uint32_t)x;
			}
			if (k == 0)
				r = usage_error("--regions: empty list (leave the option out to measure every region)");
			opt.regions = regions;
			opt.n_regions = k;
			break;
		}
		case O_STATUS:
		case O_CANCEL: {
			const char *name = oc == O_CANCEL ? "--cancel" : "--status";
			char *end;
			errno = 0;
			status_id = strtoull(v, &end, 10);
			if (errno || *end || end == v || v[0] == '-')
				r = usage_error("%s: '%s' is not a job id", name, v);
			else if (have_status)
				r = usage_error("profile: --status and --cancel name one job, once");
			have_status = true;
			cancel = oc == O_CANCEL;
			break;
		}
		case O_NO_WAIT: wait = 0; break;
		case O_WAIT: wait = 1; break;
		case 0:
			if (model)
				r = usage_error("profile: unexpected argument '%s'", v);
			model = v;
			break;
		default: r = -oc;
		}
	}
	if (r)
		return r;
	if (wait < 0)
		wait = !have_status;
	if (have_status) {
		if (model || library || opt.repetitions || opt.warmups || opt.timeout_ms || opt.regions)
			return usage_error("profile %s JOB takes only --wait or --no-wait",
					   cancel ? "--cancel" : "--status");
		if ((r = connect_client(ctl)))
			return r;
		if ((r = cancel ? pim_profile_cancel(ctl->client, status_id, &job)
				: pim_profile_status(ctl->client, status_id, &job)) < 0)
			return request_failed(ctl, r);
	} else {
		if (!model || !library)
			return usage_error("profile: expected MODEL --library PATH");
		/* The library goes to pimd as an open descriptor: pimd never opens our paths. */
		int fd = open(library, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			fprintf(stderr, "pimctl: %s: %s\n", library, strerror(errno));
			return EXIT_DAEMON;
		}
		if ((r = connect_client(ctl))) {
			close(fd);
			return r;
		}
		r = pim_profile_start(ctl->client, model, fd, &opt, &job);
		close(fd);
		if (r < 0)
			return request_failed(ctl, r);
		if (!wait) {
			if (ctl->json)
				print_json(job_json(&job));
			else
				job_print(&job);
			return EXIT_OK;
		}
	}
	if (wait && (r = profile_wait(ctl, &job)))
		return r;
	if (ctl->json)
		print_json(job_json(&job));
	else
		job_print(&job);
	/* (a job waited for that failed or was cancelled did not run: an error; --cancel that
	 * cancelled it went well) */
	return (strcmp(job.state, "failed") == 0 || strcmp(job.state, "cancelled") == 0) && !cancel ?
		       EXIT_DAEMON : EXIT_OK;
}

