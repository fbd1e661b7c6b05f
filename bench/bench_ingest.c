/* SPDX-License-Identifier: MIT */
/*
 * bench_ingest: sample ingest into the store as the profiling service does it (batches of
 * 4096 samples per transaction, WAL, synchronous=FULL), in samples per second (goal:
 * at least 100k samples/s).  A fresh database in a temporary directory; 200,000 samples of a
 * 6-value counter group.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "manifest.h"
#include "rpc.h"
#include "store.h"

#define SAMPLES 200000u
#define BATCH 4096u

int main(void)
{
	char dir[] = "/tmp/pimd-ingest-XXXXXX", path[64], cmd[96];
	struct pim_error err = { 0 };
	struct store *s;
	bool replaced;

	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof path, "%s/pimd.db", dir);
	if (store_open(path, 5000, &s, &err) < 0) {
		fprintf(stderr, "bench_ingest: %s\n", err.msg);
		return 1;
	}
	const char *json = "{ \"name\": \"ingest\", \"allocations\": [ { \"id\": 0, \"bytes\": 64, \"kind\": "
			   "\"argument\" } ], \"regions\": [ { \"id\": 0, \"name\": \"r\", \"op\": \"op\", "
			   "\"order\": 0, \"n_par\": 1, \"n_total\": 1, \"operands\": [ { \"allocation\": 0, "
			   "\"bytes\": 64, \"role\": \"in\" } ] } ] }";
	Pim__Manifest *m;
	struct store_platform pf = { .name = "bench", .cpu_model = "bench", .pmu = "none", .kernel = "" };
	int64_t pid, mid, run;
	if (manifest_from_json(json, strlen(json), &m, &err) < 0 ||
	    rpc_model_put(s, m, 0, false, &replaced, NULL, &err) < 0 ||
	    store_platform_ensure(s, &pf, &pid, &err) < 0 || store_model_id(s, "ingest", &mid, &err) < 0 ||
	    store_run_create(s, mid, pid, 0, 1, SAMPLES, 1, &run, &err) < 0) {
		fprintf(stderr, "bench_ingest: %s\n", err.msg);
		return 1;
	}
	static uint64_t values[BATCH][6];
	static struct store_sample batch[BATCH];
	struct rusage ru0, ru1;
	getrusage(RUSAGE_SELF, &ru0);
	uint64_t t0 = now_ns();
	for (uint32_t done = 0; done < SAMPLES;) {
		uint32_t n = SAMPLES - done < BATCH ? SAMPLES - done : BATCH;
		for (uint32_t i = 0; i < n; i++) {
			for (int k = 0; k < 6; k++)
				values[i][k] = (uint64_t)(done + i) * 31 + (uint64_t)k;
			batch[i] = (struct store_sample){ .region = 0, .group = (done + i) % 2,
							  .rep = (done + i) / 2, .executions = 1,
							  .time_ns = 1000 + i, .time_enabled = 1000,
							  .time_running = 1000, .n_values = 6, .values = values[i] };
		}
		if (store_samples_put(s, run, batch, n, &err) < 0) {
			fprintf(stderr, "bench_ingest: %s\n", err.msg);
			return 1;
		}
		done += n;
	}
	double secs = (double)(now_ns() - t0) * 1e-9;
	getrusage(RUSAGE_SELF, &ru1);
	/* CPU time as well: on shared cores the wall time also measures the neighbours, and with
	 * synchronous=FULL the disk's fsync latency (one per batch). */
	double cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec + ru1.ru_stime.tv_sec -
			      ru0.ru_stime.tv_sec) +
		     (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec + ru1.ru_stime.tv_usec -
			      ru0.ru_stime.tv_usec) * 1e-6;
	int ok = store_check_integrity(s, &err) == 0;
	store_close(s);
	pim__manifest__free_unpacked(m, NULL);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		return 1;
	double rate = SAMPLES / secs;
	printf("sample ingest (synchronous=FULL): %u samples (6 counts each) in batches of %u: %.3f s, %.0f samples/s "
	       "(goal >= 100000: %s); %.3f s of CPU, %.0f samples per CPU second; integrity_check %s\n",
	       SAMPLES, BATCH, secs, rate, rate >= 100000 ? "met" : "missed", cpu, cpu > 0 ? SAMPLES / cpu : 0,
	       ok ? "ok" : "FAILED");
	return ok ? 0 : 1;
}
