/* SPDX-License-Identifier: MIT */
/*
 * fleet-hosts: many simulated hosts against one fleet catalogue (make bench-fleet, under
 * pg_virtualenv: libpq takes PGHOST, PGPORT, PGUSER, PGPASSWORD from there).  Each host has its
 * own host id and publishes one run of a model of --regions regions with pimd's own publishing
 * code (catalogue_pg_publish, the statements pimd's catalogue thread sends); --threads
 * connections share the hosts.  Then --lookups lookups of the model on the platform
 * (catalogue_pg_lookup_rows, the statement a new host's first placement sends), and round trips
 * of "SELECT 1" for comparison.  Prints key=value lines: publishes/s, region rows/s, publish
 * p50/p99, lookup p50/p99, round trip p50, the catalogue's bytes per run.
 */
#include <inttypes.h>
#include <libpq-fe.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalogue.h"
#include "strbuf.h"
#include "sys.h"

struct bench {
	unsigned hosts, regions, threads, lookups;
	const char *hash, *platform;
	unsigned next_host;        /* under mu */
	pthread_mutex_t mu;
	double *publish_s, *lookup_s;
	unsigned failures;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double quantile(double *v, size_t n, double q)
{
	qsort(v, n, sizeof *v, cmp_double);
	return n ? v[(size_t)floor(q * (double)(n - 1) + 0.5)] : 0;
}

/* One host's run: counters-backend metrics of every region, a little different per host. */
static char *payload(unsigned host, unsigned regions)
{
	struct strbuf b = { 0 };
	strbuf_printf(&b, "{\"summary\":{\"run\":1,\"message\":\"fleet-hosts\",\"regions_measured\":%u},\"metrics\":[",
		      regions);
	for (unsigned r = 0; r < regions; r++) {
		double t = 1e-5 * (1 + r % 7) * (1 + 1e-4 * (host % 97));
		strbuf_printf(&b, "%s{\"region_id\":%u,\"evidence\":\"counters\",\"t_host\":%.17g,\"t_host_spread\":0.02,"
			      "\"n_rd\":%.17g,\"c_store\":%.17g,\"c_be1\":%.17g,\"c_be2\":%.17g,\"c_be3\":%.17g,"
			      "\"bw_read_estimate\":null,\"source_b_cpu\":null}", r ? "," : "", r, t, 4096.0 * (1 + r % 5),
			      1000.0 * (r % 3), 5000.0, 2000.0, 1000.0);
	}
	strbuf_printf(&b, "]}");
	return strbuf_take(&b, NULL);
}

static void *publisher(void *data)
{
	struct bench *bn = data;
	struct pim_error err = { 0 };
	unsigned v;
	PGconn *pg = catalogue_pg_connect("", 60000, &v, &err);
	char why[512], host[32], key[32], regions[16];

	if (!pg) {
		fprintf(stderr, "fleet-hosts: %s\n", err.msg);
		pthread_mutex_lock(&bn->mu);
		bn->failures++;
		pthread_mutex_unlock(&bn->mu);
		return NULL;
	}
	snprintf(regions, sizeof regions, "%u", bn->regions);
	for (;;) {
		pthread_mutex_lock(&bn->mu);
		unsigned h = bn->next_host < bn->hosts ? bn->next_host++ : UINT32_MAX;
		pthread_mutex_unlock(&bn->mu);
		if (h == UINT32_MAX)
			break;
		char *p = payload(h, bn->regions);
		snprintf(host, sizeof host, "sim-host-%05u", h);
		snprintf(key, sizeof key, "run:1:%u", h);
		struct store_outbox_row o = { .kind = "measured", .publish_key = key, .model_name = "fleet-bench",
					      .model_hash = (char *)bn->hash, .regions = bn->regions,
					      .platform_key = (char *)bn->platform,
					      .platform_json = "{\"vendor\":\"simulated\"}", .backend = "counters",
					      .payload = p, .uid = 1000, .measured_at = 1700000000 + h };
		uint64_t t0 = now_ns();
		enum catalogue_publish k = catalogue_pg_publish(pg, host, &o, why, sizeof why);
		bn->publish_s[h] = (double)(now_ns() - t0) / 1e9;
		free(p);
		if (k != CATALOGUE_PUBLISHED) {
			fprintf(stderr, "fleet-hosts: host %u: %s\n", h, k == CATALOGUE_ALREADY_THERE ? "already there" : why);
			pthread_mutex_lock(&bn->mu);
			bn->failures++;
			pthread_mutex_unlock(&bn->mu);
		}
	}
	PQfinish(pg);
	return NULL;
}

static int lookups(struct bench *bn, PGconn *pg)
{
	struct pim_error err = { 0 };

	for (unsigned i = 0; i < bn->lookups; i++) {
		size_t rows;
		uint64_t t0 = now_ns();
		if (catalogue_pg_lookup_rows(pg, bn->hash, bn->platform, &rows, &err) < 0) {
			fprintf(stderr, "fleet-hosts: lookup: %s\n", err.msg);
			return -1;
		}
		bn->lookup_s[i] = (double)(now_ns() - t0) / 1e9;
		if (rows != bn->regions) {
			fprintf(stderr, "fleet-hosts: lookup returned %zu rows, want %u\n", rows, bn->regions);
			return -1;
		}
	}
	return 0;
}

static double round_trip(PGconn *pg)
{
	double v[200];
	for (int i = 0; i < 200; i++) {
		uint64_t t0 = now_ns();
		PQclear(PQexec(pg, "SELECT 1"));
		v[i] = (double)(now_ns() - t0) / 1e9;
	}
	return quantile(v, 200, 0.5);
}

static double bytes_per_run(PGconn *pg)
{
	PGresult *res = PQexec(pg, "SELECT (pg_total_relation_size('pim_catalogue.region_metrics') + "
			       "pg_total_relation_size('pim_catalogue.runs'))::float8 / greatest(count(*), 1) "
			       "FROM pim_catalogue.runs");
	double b = PQresultStatus(res) == PGRES_TUPLES_OK ? strtod(PQgetvalue(res, 0, 0), NULL) : 0;
	PQclear(res);
	return b;
}

static unsigned arg(int argc, char **argv, const char *name, unsigned def)
{
	for (int i = 1; i + 1 < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return (unsigned)strtoul(argv[i + 1], NULL, 10);
	return def;
}

static const char *sarg(int argc, char **argv, const char *name, const char *def)
{
	for (int i = 1; i + 1 < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return argv[i + 1];
	return def;
}

int main(int argc, char **argv)
{
	struct bench bn = { .hosts = arg(argc, argv, "--hosts", 1000), .regions = arg(argc, argv, "--regions", 10000),
			    .threads = arg(argc, argv, "--threads", 4), .lookups = arg(argc, argv, "--lookups", 100),
			    .hash = sarg(argc, argv, "--hash", NULL), .platform = sarg(argc, argv, "--platform", "bench") };
	struct pim_error err = { 0 };
	unsigned v;

	if (!bn.hash || strlen(bn.hash) != 64 || !bn.hosts || !bn.regions || !bn.threads || bn.threads > 64 ||
	    !bn.lookups) {
		fprintf(stderr, "usage: fleet-hosts --hash SHA256 [--platform KEY] [--hosts N] [--regions R] "
			"[--threads T] [--lookups L]\n");
		return 2;
	}
	pthread_mutex_init(&bn.mu, NULL);
	bn.publish_s = calloc(bn.hosts, sizeof *bn.publish_s);
	bn.lookup_s = calloc(bn.lookups, sizeof *bn.lookup_s);
	pthread_t th[64];
	uint64_t t0 = now_ns();
	for (unsigned i = 0; i < bn.threads; i++)
		pthread_create(&th[i], NULL, publisher, &bn);
	for (unsigned i = 0; i < bn.threads; i++)
		pthread_join(th[i], NULL);
	double wall = (double)(now_ns() - t0) / 1e9;
	if (bn.failures) {
		fprintf(stderr, "fleet-hosts: %u publishes failed\n", bn.failures);
		return 1;
	}
	PGconn *pg = catalogue_pg_connect("", 60000, &v, &err);
	if (!pg) {
		fprintf(stderr, "fleet-hosts: %s\n", err.msg);
		return 1;
	}
	PQclear(PQexec(pg, "ANALYZE"));
	if (lookups(&bn, pg) < 0)
		return 1;
	printf("hosts=%u\nregions=%u\nthreads=%u\npublish_wall_s=%.2f\npublishes_per_s=%.1f\nrows_per_s=%.0f\n",
	       bn.hosts, bn.regions, bn.threads, wall, bn.hosts / wall, (double)bn.hosts * bn.regions / wall);
	printf("publish_p50_ms=%.1f\npublish_p99_ms=%.1f\n", 1e3 * quantile(bn.publish_s, bn.hosts, 0.5),
	       1e3 * quantile(bn.publish_s, bn.hosts, 0.99));
	printf("lookup_p50_ms=%.2f\nlookup_p99_ms=%.2f\nround_trip_ms=%.3f\nbytes_per_run=%.0f\n",
	       1e3 * quantile(bn.lookup_s, bn.lookups, 0.5), 1e3 * quantile(bn.lookup_s, bn.lookups, 0.99),
	       1e3 * round_trip(pg), bytes_per_run(pg));
	PQfinish(pg);
	return 0;
}
