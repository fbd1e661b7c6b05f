/* SPDX-License-Identifier: MIT */
/*
 * bench_models: the writer's cost of loading and removing a model, in CPU time per model, side
 * by side with a floor: the same rows written and deleted by plain SQL in the same kind of
 * database (the same columns and primary keys, no foreign keys, checks or other indexes, one
 * prepared single-row INSERT per row and one DELETE per table).
 *
 * A model of 30 regions with 2 operands each and 2 allocations (bench_query's mixed workload
 * loads and removes such models), beside 64 others; ROUNDS loads and removals in groups of 20
 * changes per transaction, as the writer thread commits them.  Rounds alternate between the
 * store and the floor, so drift hits both alike; the figure is the median of per-round ratios.
 * Reported, no goal: the store checks what the floor does not (its model row, the owner, the
 * unique program order, the replacement rules).
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "manifest.h"
#include "rpc.h"
#include "store.h"

#define REGIONS 30
#define ROUNDS 10
#define PER_ROUND 200
#define GROUP 20

static double cpu_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static Pim__Manifest *model(void)
{
	static char buf[16384];
	size_t pos = (size_t)snprintf(buf, sizeof buf, "{ \"name\": \"m\", \"allocations\": [ { \"id\": 0, "
				      "\"bytes\": 1048576, \"kind\": \"alloc\", \"name\": \"in\" }, { \"id\": 1, "
				      "\"bytes\": 1048576, \"kind\": \"alloc\", \"name\": \"out\" } ], \"regions\": [");
	for (int i = 0; i < REGIONS; i++)
		pos += (size_t)snprintf(buf + pos, sizeof buf - pos,
					"%s{ \"id\": %d, \"name\": \"r%d\", \"op\": \"linalg.generic\", \"order\": %d, "
					"\"n_par\": 262144, \"n_total\": 262144, \"operands\": [ { \"allocation\": %d, "
					"\"bytes\": 1048576, \"role\": \"in\" }, { \"allocation\": %d, \"bytes\": "
					"1048576, \"role\": \"out\" } ] }", i ? ", " : "", i, i, i, i % 2, (i + 1) % 2);
	snprintf(buf + pos, sizeof buf - pos, "] }");
	struct pim_error err = { 0 };
	Pim__Manifest *m;
	if (manifest_from_json(buf, strlen(buf), &m, &err) < 0 || manifest_validate(m, &err) < 0) {
		fprintf(stderr, "bench_models: %s\n", err.msg);
		exit(1);
	}
	return m;
}

/* PER_ROUND loads and removals through the store; CPU seconds of each kind added to t. */
static int store_round(struct store *s, const Pim__Manifest *m, double t[2])
{
	struct pim_error err = { 0 };
	bool replaced, committed;

	for (int k = 0; k < PER_ROUND; k++) {
		if (k % GROUP == 0 && store_group_begin(s, &err) < 0)
			break;
		double a = cpu_s();
		if (rpc_model_put(s, m, 0, false, &replaced, NULL, &err) < 0)
			break;
		double b = cpu_s();
		if (store_model_remove(s, m->name, 0, NULL, &err) < 0)
			break;
		t[0] += b - a;
		t[1] += cpu_s() - b;
		if (k % GROUP == GROUP - 1 && store_group_commit(s, &committed, &err) < 0)
			break;
	}
	if (err.code) {
		fprintf(stderr, "bench_models: %s\n", err.msg);
		return -1;
	}
	return 0;
}

static const char floor_schema[] =
	"PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;"
	"CREATE TABLE models (id INTEGER PRIMARY KEY, name TEXT);"
	"CREATE TABLE allocations (model_id INTEGER, alloc_id INTEGER, bytes INTEGER, kind INTEGER, name TEXT, "
	"PRIMARY KEY (model_id, alloc_id)) WITHOUT ROWID;"
	"CREATE TABLE regions (model_id INTEGER, region_id INTEGER, name TEXT, op TEXT, ord INTEGER, "
	"n_par INTEGER, n_total INTEGER, trip INTEGER, parallel_extents TEXT, reduction_extents TEXT, "
	"location TEXT, operands TEXT, PRIMARY KEY (model_id, region_id)) WITHOUT ROWID;";

#define FLOOR_STMTS 6
#define FLOOR_DELETES 3
static const char *const floor_sql[FLOOR_STMTS] = {
	"INSERT INTO models (id, name) VALUES (?, ?)",
	"INSERT INTO allocations VALUES (?, ?, ?, ?, ?)",
	"INSERT INTO regions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
	"DELETE FROM regions WHERE model_id = ?",
	"DELETE FROM allocations WHERE model_id = ?",
	"DELETE FROM models WHERE id = ?",
};

static int step(sqlite3_stmt *st)
{
	int r = sqlite3_step(st);
	sqlite3_reset(st);
	return r == SQLITE_DONE ? 0 : -1;
}

/* The same rows as store_round, by plain SQL. */
static int floor_load(sqlite3_stmt *const st[FLOOR_STMTS], const Pim__Manifest *m, int64_t id)
{
	int r = 0;

	sqlite3_bind_int64(st[0], 1, id);
	sqlite3_bind_text(st[0], 2, m->name, -1, SQLITE_STATIC);
	r |= step(st[0]);
	for (size_t i = 0; i < m->n_allocations; i++) {
		const Pim__Allocation *al = m->allocations[i];
		sqlite3_bind_int64(st[1], 1, id);
		sqlite3_bind_int64(st[1], 2, al->id);
		sqlite3_bind_int64(st[1], 3, (int64_t)al->bytes);
		sqlite3_bind_int(st[1], 4, (int)al->kind);
		sqlite3_bind_text(st[1], 5, al->name, -1, SQLITE_STATIC);
		r |= step(st[1]);
	}
	for (size_t i = 0; i < m->n_regions; i++) {
		const Pim__Region *g = m->regions[i];
		sqlite3_bind_int64(st[2], 1, id);
		sqlite3_bind_int64(st[2], 2, g->id);
		sqlite3_bind_text(st[2], 3, g->name, -1, SQLITE_STATIC);
		sqlite3_bind_text(st[2], 4, g->op, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st[2], 5, g->order);
		sqlite3_bind_int64(st[2], 6, (int64_t)g->n_par);
		sqlite3_bind_int64(st[2], 7, (int64_t)g->n_total);
		sqlite3_bind_int64(st[2], 8, 1);
		sqlite3_bind_text(st[2], 9, "", -1, SQLITE_STATIC);
		sqlite3_bind_text(st[2], 10, "", -1, SQLITE_STATIC);
		sqlite3_bind_text(st[2], 11, g->location, -1, SQLITE_STATIC);
		/* the operands' text as the store writes it (sql/0012) */
		struct store_operand ops[2];
		char text[2 * STORE_OPERAND_TEXT + 1];
		size_t n = g->n_operands < 2 ? g->n_operands : 2;
		for (size_t j = 0; j < n; j++)
			ops[j] = (struct store_operand){ .allocation_id = g->operands[j]->allocation_id,
							 .bytes = g->operands[j]->bytes,
							 .elem_type = g->operands[j]->elem_type,
							 .elem_bits = g->operands[j]->elem_bits,
							 .role = rpc_role_from_wire(g->operands[j]->role) };
		char *end = store_operands_text(ops, n, text);
		if (!end)
			return -1;
		sqlite3_bind_text(st[2], 12, text, (int)(end - text), SQLITE_STATIC);
		r |= step(st[2]);
	}
	return r;
}

static int floor_round(sqlite3 *db, sqlite3_stmt *const st[FLOOR_STMTS], const Pim__Manifest *m,
		       int64_t *next_id, double t[2])
{
	for (int k = 0; k < PER_ROUND; k++) {
		if (k % GROUP == 0 && sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
			break;
		int64_t id = (*next_id)++;
		double a = cpu_s();
		int r = floor_load(st, m, id);
		double b = cpu_s();
		for (int q = FLOOR_STMTS - FLOOR_DELETES; q < FLOOR_STMTS; q++) {
			sqlite3_bind_int64(st[q], 1, id);
			r |= step(st[q]);
		}
		t[0] += b - a;
		t[1] += cpu_s() - b;
		if (r < 0 || (k % GROUP == GROUP - 1 && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)) {
			fprintf(stderr, "bench_models: floor: %s\n", sqlite3_errmsg(db));
			return -1;
		}
	}
	return 0;
}

int main(void)
{
	char dir[] = "/tmp/pimd-models-XXXXXX", path[64], fpath[64], cmd[96];
	struct pim_error err = { 0 };
	struct store *s = NULL;
	sqlite3 *db = NULL;
	sqlite3_stmt *st[FLOOR_STMTS] = { 0 };
	Pim__Manifest *m = model();
	double ratio[2][ROUNDS], tot[2][2] = { { 0 } };
	int64_t next_id = 1000;
	bool replaced;
	int rc = 1;

	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof path, "%s/pimd.db", dir);
	snprintf(fpath, sizeof fpath, "%s/floor.db", dir);
	if (store_open(path, 5000, &s, &err) < 0) {
		fprintf(stderr, "bench_models: %s\n", err.msg);
		goto out;
	}
	if (sqlite3_open(fpath, &db) != SQLITE_OK || sqlite3_exec(db, floor_schema, NULL, NULL, NULL) != SQLITE_OK)
		goto sqlerr;
	for (int i = 0; i < FLOOR_STMTS; i++)
		if (sqlite3_prepare_v2(db, floor_sql[i], -1, &st[i], NULL) != SQLITE_OK)
			goto sqlerr;
	/* 64 other models in both */
	for (int k = 0; k < 64; k++) {
		char name[16];
		snprintf(name, sizeof name, "other%d", k);
		const char *own = m->name;
		m->name = name;
		int r = rpc_model_put(s, m, 0, false, &replaced, NULL, &err);
		if (r == 0)
			r = floor_load(st, m, k + 1);
		m->name = (char *)own;
		if (r < 0) {
			fprintf(stderr, "bench_models: %s\n", err.code ? err.msg : sqlite3_errmsg(db));
			goto out;
		}
	}
	printf("bench_models: a model of %d regions (%d operands, 2 allocations) loaded and removed, %d rounds "
	       "of %d, %d changes per transaction, alternating with the same rows by plain SQL\n",
	       REGIONS, 2 * REGIONS, ROUNDS, PER_ROUND, GROUP);
	for (int r = 0; r < ROUNDS; r++) {
		double ts[2] = { 0, 0 }, tf[2] = { 0, 0 };
		int bad = r % 2 ? floor_round(db, st, m, &next_id, tf) || store_round(s, m, ts)
				: store_round(s, m, ts) || floor_round(db, st, m, &next_id, tf);
		if (bad)
			goto out;
		for (int k = 0; k < 2; k++) {
			ratio[k][r] = ts[k] / tf[k];
			tot[0][k] += ts[k];
			tot[1][k] += tf[k];
		}
	}
	static const char *const what[2] = { "load", "removal" };
	for (int k = 0; k < 2; k++) {
		qsort(ratio[k], ROUNDS, sizeof ratio[k][0], cmp_d);
		printf("  %-8s store %7.1f us, plain SQL %7.1f us of CPU per model: %.2fx (median of per-round "
		       "ratios; range %.2fx .. %.2fx)\n", what[k], 1e6 * tot[0][k] / (ROUNDS * PER_ROUND),
		       1e6 * tot[1][k] / (ROUNDS * PER_ROUND), (ratio[k][ROUNDS / 2 - 1] + ratio[k][ROUNDS / 2]) / 2,
		       ratio[k][0], ratio[k][ROUNDS - 1]);
	}
	rc = 0;
	goto out;
sqlerr:
	fprintf(stderr, "bench_models: floor: %s\n", db ? sqlite3_errmsg(db) : "out of memory");
out:
	for (int i = 0; i < FLOOR_STMTS; i++)
		sqlite3_finalize(st[i]);
	sqlite3_close(db);
	store_close(s);
	pim__manifest__free_unpacked(m, NULL);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		rc = 1;
	return rc;
}
