/* SPDX-License-Identifier: MIT */
/* Unit tests of daemon/store.c: migrations, the model tables, ownership. */
#include <pthread.h>
#include <sqlite3.h>
#include <string.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "manifest.h"
#include "rpc.h"
#include "store.c" /* its connection, to make it read-only (connection_found_read_only_reconnects) */
#include "test_util.h"

static char dir[64];
static char path[128];

static void setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/pimd-test-store-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/pimd.db", dir);
}

static void teardown(void)
{
	char cmd[200];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static int raw_int(const char *sql)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	int v = -1;
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

static void raw_exec(const char *sql)
{
	sqlite3 *db;
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

START_TEST(fresh_database_is_migrated)
{
	struct store *s;
	struct pim_error err = { 0 };
	int r = store_open(path, 1000, &s, &err);
	ck_assert_msg(r == 0, "%s", err.msg);
	ck_assert_uint_eq(store_schema_version(s), store_n_migrations);
	ck_assert_int_eq(store_check_integrity(s, &err), 0);
	store_close(s);
	ck_assert_int_eq(raw_int("PRAGMA user_version"), (int)store_n_migrations);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM sqlite_master WHERE name IN "
				 "('platforms','models','regions','allocations')"), 4);
	/* a region's operands are a column of its row (sql/0012) */
	ck_assert_int_eq(raw_int("SELECT count(*) FROM sqlite_master WHERE name = 'operands'"), 0);
	/* WAL persists in the file */
	ck_assert_int_eq(raw_int("SELECT journal_mode = 'wal' FROM pragma_journal_mode"), 1);
	/* reopening applies nothing and succeeds */
	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	store_close(s);
}
END_TEST

START_TEST(newer_database_is_refused)
{
	struct store *s;
	struct pim_error err = { 0 };
	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	store_close(s);
	raw_exec("PRAGMA user_version = 999");
	ck_assert_int_eq(store_open(path, 1000, &s, &err), -EPROTONOSUPPORT);
	ck_assert_msg(strstr(err.msg, "schema version 999 is newer than this pimd knows"), "%s", err.msg);
	/* and left untouched */
	ck_assert_int_eq(raw_int("PRAGMA user_version"), 999);
}
END_TEST

/* A database as pimd left it at schema version v, with rows (SQL) of that version; then opened
 * by this pimd: migrated to the last version, whole. */
static void open_from_schema(unsigned v, const char *rows, struct store **s)
{
	struct pim_error err = { 0 };

	ck_assert_uint_gt(store_n_migrations, v);
	for (unsigned i = 0; i < v; i++)
		raw_exec(store_migrations[i].sql);
	char sql[64];
	snprintf(sql, sizeof sql, "PRAGMA user_version = %u", v);
	raw_exec(sql);
	raw_exec(rows);
	ck_assert_int_eq(store_open(path, 1000, s, &err), 0);
	ck_assert_uint_eq(store_schema_version(*s), store_n_migrations);
	ck_assert_int_eq(store_check_integrity(*s, &err), 0);
}

/* A failing migration leaves the database at the previous whole version. */
START_TEST(failed_migration_rolls_back)
{
	unsigned n = store_n_migrations;
	struct store_migration migs[16];
	struct store *s;
	struct pim_error err = { 0 };
	char name[] = "9999-broken.sql";

	ck_assert_uint_lt(n, ELEMENTSOF(migs));
	memcpy(migs, store_migrations, n * sizeof *migs);
	migs[n] = (struct store_migration){ n + 1, name, "CREATE TABLE half (x INTEGER); THIS IS NOT SQL;" };
	ck_assert_int_lt(store_open_with(path, 1000, migs, n + 1, &s, &err), 0);
	ck_assert_msg(strstr(err.msg, "migration 9999-broken.sql failed"), "%s", err.msg);
	ck_assert_int_eq(raw_int("PRAGMA user_version"), (int)n);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM sqlite_master WHERE name = 'half'"), 0);
	/* fixing the migration lets it apply */
	migs[n].sql = "CREATE TABLE half (x INTEGER);";
	ck_assert_int_eq(store_open_with(path, 1000, migs, n + 1, &s, &err), 0);
	store_close(s);
	ck_assert_int_eq(raw_int("PRAGMA user_version"), (int)n + 1);
}
END_TEST

/* 0009 makes profile_runs again to allow 'cancelled': a store at version 8 keeps every run,
 * sample and decision, its cancelled runs read 'cancelled', and the references, the cascade on
 * a model's removal and the run id high-water mark work as before. */
START_TEST(cancelled_runs_migrated)
{
	struct store *s;
	struct pim_error err = { 0 };

	/* a database as pimd left it at schema version 8 (this pimd's statements need all) */
	open_from_schema(8, "INSERT INTO platforms (id, name, created_at) VALUES (1, 'p', 0);"
		 "INSERT INTO models (id, name, owner_uid, loaded_at, n_regions, n_allocations, allocation_bytes) "
		 "VALUES (1, 'm', 5, 0, 1, 1, 64);"
		 "INSERT INTO profile_runs (id, model_id, platform_id, owner_uid, backend, state, message, created_at) VALUES "
		 "(7, 1, 1, 5, 'timing', 'failed', 'cancelled: by uid 5', 0), "
		 "(8, 1, 1, 5, 'timing', 'failed', 'the worker failed', 0), "
		 "(9, 1, 1, 5, 'timing', 'done', '1 regions measured', 0);"
		 "INSERT INTO samples (run_id, region_id, grp, rep, time_ns) VALUES (7, 0, 0, 0, 5), (9, 0, 0, 0, 6);", &s);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM samples"), 2);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM profile_runs WHERE id = 7 AND state = 'cancelled' "
				 "AND message = 'cancelled: by uid 5'"), 1);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM profile_runs WHERE id = 8 AND state = 'failed'"), 1);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM profile_runs WHERE id = 9 AND state = 'done'"), 1);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM pragma_foreign_key_check"), 0);
	/* the new state is accepted, another is not */
	raw_exec("UPDATE profile_runs SET state = 'cancelled' WHERE id = 8");
	ck_assert_int_eq(raw_int("SELECT count(*) FROM profile_runs WHERE state = 'cancelled'"), 2);
	/* the trigger of 0003 is back: a new run raises the high-water mark */
	raw_exec("INSERT INTO profile_runs (id, model_id, platform_id, owner_uid, backend, state, created_at) "
		 "VALUES (12, 1, 1, 5, 'timing', 'queued', 0)");
	ck_assert_int_eq(raw_int("SELECT id FROM run_id_high"), 12);
	/* pimd's connection has foreign keys on again: removing the model removes its runs and
	 * their samples */
	ck_assert_int_eq(store_model_remove(s, "m", 0, NULL, &err), 0);
	store_close(s);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM profile_runs"), 0);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM samples"), 0);
}
END_TEST

/* 0011: a database at schema 10 keeps its operands and metrics; the model's removal takes them
 * with it; metrics naming a region the model lacks are still refused. */
START_TEST(rows_by_model_migrated)
{
	struct store *s;
	struct pim_error err = { 0 };

	open_from_schema(10, "INSERT INTO platforms (id, name, created_at) VALUES (1, 'p', 0);"
		 "INSERT INTO models (id, name, owner_uid, loaded_at, n_regions, n_allocations, allocation_bytes) "
		 "VALUES (1, 'm', 5, 0, 2, 1, 64), (2, 'n', 5, 0, 1, 1, 64);"
		 "INSERT INTO allocations (model_id, alloc_id, bytes, kind) VALUES (1, 0, 64, 1), (2, 0, 64, 1);"
		 "INSERT INTO regions (model_id, region_id, name, op, ord, n_par, n_total, trip) VALUES "
		 "(1, 0, 'a', 'op', 0, 1, 1, 1), (1, 1, 'b', 'op', 1, 1, 1, 1), (2, 0, 'c', 'op', 0, 1, 1, 1);"
		 "INSERT INTO operands (model_id, region_id, idx, alloc_id, bytes, role) VALUES "
		 "(1, 0, 0, 0, 64, 1), (1, 1, 0, 0, 64, 2), (2, 0, 0, 0, 64, 1);"
		 "INSERT INTO metrics (model_id, region_id, platform_id, evidence, t_host, updated_at, source_b_cpu) "
		 "VALUES (1, 0, 1, 'estimate', 0.5, 0, 1e10), (2, 0, 1, 'imported', 0.25, 0, NULL);", &s);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM regions WHERE operands != ''"), 3);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM metrics WHERE model_id = 1 AND t_host = 0.5 "
				 "AND source_b_cpu = 1e10"), 1);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM pragma_foreign_key_check"), 0);
	/* the trigger came back with the table: a measurement of this host's raises the version */
	int v = raw_int("SELECT version FROM models WHERE id = 2");
	raw_exec("PRAGMA foreign_keys = ON; INSERT OR REPLACE INTO metrics (model_id, region_id, platform_id, "
		 "evidence, t_host, updated_at) VALUES (2, 0, 1, 'estimate', 1, 0)");
	ck_assert_int_gt(raw_int("SELECT version FROM models WHERE id = 2"), v);
	/* a region the model lacks: refused by the foreign key still */
	sqlite3 *db;
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, "PRAGMA foreign_keys = ON; INSERT INTO metrics (model_id, region_id, "
				      "platform_id, evidence, t_host, updated_at) VALUES (2, 7, 1, 'estimate', 1, 0)",
				      NULL, NULL, NULL), SQLITE_CONSTRAINT);
	ck_assert_int_eq(sqlite3_extended_errcode(db), SQLITE_CONSTRAINT_FOREIGNKEY);
	sqlite3_close(db);
	/* the removal takes the model's operands and metrics with it, not the other's */
	ck_assert_int_eq(store_model_remove(s, "m", 0, NULL, &err), 0);
	store_close(s);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM metrics"), 1);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM regions"), 1);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM pragma_foreign_key_check"), 0);
}
END_TEST

static Pim__Manifest *manifest(const char *name, unsigned regions);

/* 0012: a database at schema 11 keeps every operand, in order, as its region's text: element
 * types holding the text's own separators, a region of none, operands written out of order. */
START_TEST(operands_in_regions_migrated)
{
	struct store *s;
	struct pim_error err = { 0 };
	struct store_model_info sum;
	struct store_manifest *got;

	open_from_schema(11, "INSERT INTO models (id, name, owner_uid, loaded_at, n_regions, n_allocations, allocation_bytes) "
		 "VALUES (1, 'm', 5, 0, 3, 2, 128);"
		 "INSERT INTO allocations (model_id, alloc_id, bytes, kind) VALUES (1, 0, 64, 1), (1, 7, 64, 2);"
		 "INSERT INTO regions (model_id, region_id, name, op, ord, n_par, n_total, trip) VALUES "
		 "(1, 4, 'a', 'op', 0, 1, 1, 1), (1, 5, 'b', 'op', 1, 1, 1, 1), (1, 6, 'c', 'op', 2, 1, 1, 1);"
		 "INSERT INTO operands (model_id, region_id, idx, alloc_id, bytes, elem_type, elem_bits, role) VALUES "
		 "(1, 4, 2, 0, 4294967296, '', 0, 3), (1, 4, 0, 7, 64, 'f 1;2:3', 16, 1), "
		 "(1, 4, 1, 0, 8, '\xc3\xa9', 8, 2), (1, 6, 0, 7, 1, 'bf16', 16, 2);", &s);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM sqlite_master WHERE name = 'operands'"), 0);
	ck_assert_int_eq(store_model_get(s, "m", &sum, &got, &err), 0);
	ck_assert_uint_eq(got->n_regions, 3);
	const struct store_region *a = &got->regions[0], *b = &got->regions[1], *c = &got->regions[2];
	ck_assert_uint_eq(a->n_operands, 3);
	ck_assert_uint_eq(a->operands[0].allocation_id, 7);
	ck_assert_uint_eq(a->operands[0].bytes, 64);
	ck_assert_str_eq(a->operands[0].elem_type, "f 1;2:3");
	ck_assert_uint_eq(a->operands[0].elem_bits, 16);
	ck_assert_int_eq(a->operands[0].role, STORE_ROLE_IN);
	ck_assert_str_eq(a->operands[1].elem_type, "\xc3\xa9");
	ck_assert_int_eq(a->operands[1].role, STORE_ROLE_OUT);
	ck_assert_uint_eq(a->operands[2].bytes, 4294967296ull);
	ck_assert_str_eq(a->operands[2].elem_type, "");
	ck_assert_int_eq(a->operands[2].role, STORE_ROLE_INOUT);
	ck_assert_uint_eq(b->n_operands, 0);
	ck_assert_uint_eq(c->n_operands, 1);
	ck_assert_str_eq(c->operands[0].elem_type, "bf16");
	store_manifest_free(got);
	store_model_info_clear(&sum);
	/* what the migration wrote is what the store writes */
	struct store_operand ops[3];
	char text[3 * STORE_OPERAND_TEXT + 1];
	ck_assert_int_eq(raw_int("SELECT operands = '7 64 1 16 7:f 1;2:3;0 8 2 8 2:\xc3\xa9;0 4294967296 3 0 0:' "
				 "FROM regions WHERE region_id = 4"), 1);
	ops[0] = (struct store_operand){ 7, 64, "f 1;2:3", 16, STORE_ROLE_IN };
	ops[1] = (struct store_operand){ 0, 8, "\xc3\xa9", 8, STORE_ROLE_OUT };
	ops[2] = (struct store_operand){ 0, 4294967296ull, NULL, 0, STORE_ROLE_INOUT };
	ck_assert_ptr_nonnull(store_operands_text(ops, 3, text));
	ck_assert_str_eq(text, "7 64 1 16 7:f 1;2:3;0 8 2 8 2:\xc3\xa9;0 4294967296 3 0 0:");
	store_close(s);
}
END_TEST

/* The operands' text: read back as written; anything else in a region's row is refused as a
 * damaged database, by the walk, with the region named. */
START_TEST(operands_text)
{
	struct store_operand ops[2] = { { UINT32_MAX, INT64_MAX, "abcdefghijklmnop", UINT32_MAX, STORE_ROLE_OUT },
					{ 0, 1, ";", 0, STORE_ROLE_IN } }, o;
	char text[2 * STORE_OPERAND_TEXT + 1], type[STORE_ELEM_TYPE_MAX + 1];
	char *end = store_operands_text(ops, 2, text);

	ck_assert_ptr_nonnull(end);
	ck_assert_uint_le((size_t)(end - text), 2 * STORE_OPERAND_TEXT);
	ck_assert_str_eq(text, "4294967295 9223372036854775807 2 4294967295 16:abcdefghijklmnop;0 1 1 0 1:;");
	const char *p = text;
	ck_assert_int_eq(store_operand_next(&p, end, &o, type), 1);
	ck_assert_uint_eq(o.allocation_id, UINT32_MAX);
	ck_assert_uint_eq(o.bytes, INT64_MAX);
	ck_assert_str_eq(o.elem_type, "abcdefghijklmnop");
	ck_assert_uint_eq(o.elem_bits, UINT32_MAX);
	ck_assert_int_eq(o.role, STORE_ROLE_OUT);
	ck_assert_int_eq(store_operand_next(&p, end, &o, type), 1);
	ck_assert_str_eq(o.elem_type, ";");
	ck_assert_int_eq(o.role, STORE_ROLE_IN);
	ck_assert_int_eq(store_operand_next(&p, end, &o, type), 0);
	/* none: the empty text */
	ck_assert_ptr_eq(store_operands_text(ops, 0, text), text);
	ck_assert_str_eq(text, "");
	/* what the text cannot hold is refused, not cut */
	ops[1].role = STORE_ROLE_UNSPECIFIED;
	ck_assert_ptr_null(store_operands_text(ops, 2, text));
	ops[1].role = STORE_ROLE_IN;
	ops[1].bytes = 0;
	ck_assert_ptr_null(store_operands_text(ops, 2, text));
	ops[1].bytes = (uint64_t)INT64_MAX + 1;
	ck_assert_ptr_null(store_operands_text(ops, 2, text));
	ops[1].bytes = 1;
	ops[1].elem_type = "abcdefghijklmnopq";
	ck_assert_ptr_null(store_operands_text(ops, 2, text));

	static const char *const bad[] = {
		"1 2 3 4 0:;",                   /* a ';' with nothing after it */
		"1 2 3 4 1:",                    /* the type shorter than its length */
		"1 2 3 4 17:abcdefghijklmnopq",  /* longer than an element type may be */
		"1 2 4 4 0:",                    /* no such role */
		"1 2 0 4 0:",
		"1 0 1 4 0:",                    /* no bytes */
		"1 9223372036854775808 1 4 0:",
		"4294967296 2 1 4 0:",           /* past 32 bits */
		"1 2 1 4294967296 0:",
		"1 2 1 4 0:x",                   /* more than its length */
		"1 2 1 4 0",
		"1  2 1 4 0:",
		"-1 2 1 4 0:",
		"1 2 1 4 0:;;1 2 1 4 0:",
		" 1 2 1 4 0:",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		const char *q = bad[i], *qe = q + strlen(q);
		int k;
		while ((k = store_operand_next(&q, qe, &o, type)) > 0)
			;
		ck_assert_msg(k == -EIO, "\"%s\" read as operands", bad[i]);
	}

	/* a damaged row: the walk says which region of which model */
	struct store *s;
	struct pim_error err = { 0 };
	struct store_model_info sum;
	struct store_manifest *got = NULL;
	bool replaced;
	Pim__Manifest *m = manifest("delta", 2);
	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	ck_assert_int_eq(rpc_model_put(s, m, 0, false, &replaced, NULL, &err), 0);
	raw_exec("UPDATE regions SET operands = '1 2 3 4 0:;' WHERE region_id = 11");
	ck_assert_int_eq(store_model_get(s, "delta", &sum, &got, &err), -EIO);
	ck_assert_msg(strstr(err.msg, "region 11 of model") && strstr(err.msg, "unreadable operands"), "%s",
		      err.msg);
	store_close(s);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

static Pim__Manifest *manifest(const char *name, unsigned regions)
{
	char buf[8192];
	size_t pos = (size_t)snprintf(buf, sizeof buf,
		"{ \"name\": \"%s\", \"allocations\": [ { \"id\": 1, \"bytes\": 64, \"kind\": \"alloc\" },"
		"{ \"id\": 2, \"bytes\": 128, \"kind\": \"global\" } ], \"regions\": [", name);
	for (unsigned i = 0; i < regions; i++)
		pos += (size_t)snprintf(buf + pos, sizeof buf - pos,
			"%s{ \"id\": %u, \"name\": \"r%u\", \"op\": \"op\", \"order\": %u, \"n_par\": 4, "
			"\"n_total\": 8, \"trip\": 2, \"parallel_extents\": [4], \"reduction_extents\": [2], "
			"\"operands\": [ { \"allocation\": 2, \"bytes\": 128, \"role\": \"in\" }, "
			"{ \"allocation\": 1, \"bytes\": 64, \"elem_type\": \"f32\", \"elem_bits\": 32, "
			"\"role\": \"out\" } ] }", i ? "," : "", 10 + i, i, regions - i);
	snprintf(buf + pos, sizeof buf - pos, "] }");
	struct pim_error err = { 0 };
	Pim__Manifest *m;
	ck_assert_msg(manifest_from_json(buf, strlen(buf), &m, &err) == 0, "%s", err.msg);
	ck_assert_msg(manifest_validate(m, &err) == 0, "%s", err.msg);
	return m;
}

/* Commits are counted once visible, by any connection; a load's or a removal's under its
 * model alone when scoped (store_commit_scope), anything else's as a change of everything. */
START_TEST(commits_are_counted)
{
	struct store *s, *t;
	struct pim_error err = { 0 };
	bool replaced;
	Pim__Manifest *m = manifest("counted", 2);
	const char *name = "counted";

	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	ck_assert_int_eq(store_open_again(s, 1000, &t, &err), 0);
	uint64_t all = store_changes(s), models = store_model_changes(s, NULL),
		 mine = store_model_changes(s, name), other = store_model_changes(s, "other");
	/* unscoped: a change of anything, seen through the other connection too */
	ck_assert_int_eq(rpc_model_put(t, m, 1000, false, &replaced, NULL, &err), 0);
	ck_assert_uint_gt(store_changes(s), all);
	ck_assert_uint_eq(store_model_changes(s, NULL), models);
	all = store_changes(s);
	/* scoped to the model: its count and the models' grow, not the others' */
	store_commit_scope(t, &name, 1);
	ck_assert_int_eq(rpc_model_put(t, m, 1000, true, &replaced, NULL, &err), 0);
	ck_assert(replaced);
	ck_assert_uint_gt(store_model_changes(s, name), mine);
	ck_assert_uint_gt(store_model_changes(s, NULL), models);
	ck_assert_uint_eq(store_model_changes(s, "other"), other);
	ck_assert_uint_eq(store_changes(s), all);
	mine = store_model_changes(s, name);
	ck_assert_int_eq(store_model_remove(t, name, 1000, NULL, &err), 0);
	ck_assert_uint_gt(store_model_changes(s, name), mine);
	ck_assert_uint_eq(store_changes(s), all);
	/* back to anything; a read commits nothing */
	store_commit_scope(t, NULL, 0);
	struct store_model_info *list;
	size_t n;
	ck_assert_int_eq(store_model_list(t, &list, &n, &err), 0);
	store_model_list_free(list, n);
	ck_assert_uint_eq(store_changes(s), all);
	ck_assert_int_eq(rpc_model_put(t, m, 1000, false, &replaced, NULL, &err), 0);
	ck_assert_uint_gt(store_changes(s), all);
	pim__manifest__free_unpacked(m, NULL);
	store_close(t);
	store_close(s);
}
END_TEST

START_TEST(models_round_trip)
{
	struct store *s;
	struct pim_error err = { 0 };
	bool replaced;
	struct store_model_info sum, *list;
	struct store_manifest *got;
	Pim__Manifest *m = manifest("alpha", 3);
	size_t n;
	int64_t id;
	char hash[65], again[65];

	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	ck_assert_int_eq(rpc_model_put(s, m, 1000, false, &replaced, &sum, &err), 0);
	ck_assert(!replaced);
	ck_assert_str_eq(sum.name, "alpha");
	ck_assert_str_eq(sum.source, "");
	ck_assert_uint_eq(sum.regions, 3);
	ck_assert_uint_eq(sum.allocations, 2);
	ck_assert_uint_eq(sum.allocation_bytes, 192);
	ck_assert_uint_eq(sum.owner_uid, 1000);
	store_model_info_clear(&sum);

	/* the stored manifest, as the store's structs */
	ck_assert_int_eq(store_model_get(s, "alpha", NULL, &got, &err), 0);
	ck_assert_str_eq(got->name, "alpha");
	ck_assert_uint_eq(got->n_allocations, 2);
	ck_assert_uint_eq(got->allocations[0].id, 1);
	ck_assert_int_eq(got->allocations[0].kind, STORE_ALLOC_ALLOC);
	ck_assert_uint_eq(got->allocations[1].bytes, 128);
	ck_assert_int_eq(got->allocations[1].kind, STORE_ALLOC_GLOBAL);
	ck_assert_str_eq(got->allocations[1].name, "");
	/* regions come back in program order: r2 (order 1), r1, r0 */
	ck_assert_uint_eq(got->n_regions, 3);
	ck_assert_str_eq(got->regions[0].name, "r2");
	ck_assert_uint_eq(got->regions[0].id, 12);
	ck_assert_uint_eq(got->regions[0].order, 1);
	ck_assert_uint_eq(got->regions[0].trip, 2);
	ck_assert_uint_eq(got->regions[0].n_parallel_extents, 1);
	ck_assert_uint_eq(got->regions[0].parallel_extents[0], 4);
	ck_assert_uint_eq(got->regions[0].reduction_extents[0], 2);
	ck_assert_uint_eq(got->regions[0].n_operands, 2);
	ck_assert_int_eq(got->regions[0].operands[0].role, STORE_ROLE_IN);
	ck_assert_str_eq(got->regions[0].operands[0].elem_type, "");
	ck_assert_int_eq(got->regions[0].operands[1].role, STORE_ROLE_OUT);
	ck_assert_str_eq(got->regions[0].operands[1].elem_type, "f32");
	ck_assert_uint_eq(got->regions[0].operands[1].elem_bits, 32);
	ck_assert_str_eq(got->regions[2].name, "r0");
	/* stored again under another name from the store's own structs: the same content */
	const char *own = got->name;
	got->name = "alpha-again";
	ck_assert_int_eq(store_model_put(s, got, 1000, false, &replaced, NULL, &err), 0);
	got->name = own;
	store_manifest_free(got);
	ck_assert_int_eq(store_model_id(s, "alpha", &id, &err), 0);
	ck_assert_int_eq(store_model_hash(s, id, hash, &err), 0);
	ck_assert_int_eq(store_model_id(s, "alpha-again", &id, &err), 0);
	ck_assert_int_eq(store_model_hash(s, id, again, &err), 0);
	ck_assert_str_eq(again, hash);
	ck_assert_int_eq(store_model_remove(s, "alpha-again", 1000, NULL, &err), 0);

	/* duplicates need replace; replacing someone else's model needs ownership */
	ck_assert_int_eq(rpc_model_put(s, m, 1000, false, &replaced, NULL, &err), -EEXIST);
	ck_assert_int_eq(rpc_model_put(s, m, 1001, true, &replaced, NULL, &err), -EPERM);
	ck_assert_msg(strstr(err.msg, "belongs to uid 1000"), "%s", err.msg);
	Pim__Manifest *m5 = manifest("alpha", 5);
	ck_assert_int_eq(rpc_model_put(s, m5, 0, true, &replaced, NULL, &err), 0);
	ck_assert(replaced);
	ck_assert_int_eq(store_model_get(s, "alpha", &sum, NULL, &err), 0);
	ck_assert_uint_eq(sum.regions, 5);
	ck_assert_uint_eq(sum.owner_uid, 0);
	store_model_info_clear(&sum);

	Pim__Manifest *b = manifest("beta", 1);
	ck_assert_int_eq(rpc_model_put(s, b, 1000, false, &replaced, NULL, &err), 0);
	ck_assert(!replaced);
	/* what a put replaced and a removal removed is said by id (the profiler cancels its jobs) */
	int64_t alpha_id, beta_id, gone = -1;
	ck_assert_int_eq(store_model_id(s, "alpha", &alpha_id, &err), 0);
	ck_assert_int_eq(store_model_id(s, "beta", &beta_id, &err), 0);
	ck_assert_int_eq(rpc_model_put_each(s, m5, m5->n_regions, NULL, NULL, 0, true, &gone, NULL, &err), 0);
	ck_assert_int_eq(gone, alpha_id);
	ck_assert_int_eq(rpc_model_put_each(s, m, m->n_regions, NULL, NULL, 0, false, &gone, NULL, &err), -EEXIST);
	ck_assert_int_eq(gone, 0);
	ck_assert_int_eq(store_model_list(s, &list, &n, &err), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(list[0].name, "alpha");
	ck_assert_uint_eq(list[0].regions, 5);
	ck_assert_str_eq(list[1].name, "beta");
	ck_assert_uint_eq(list[1].owner_uid, 1000);
	store_model_list_free(list, n);

	gone = -1;
	ck_assert_int_eq(store_model_remove(s, "beta", 1001, &gone, &err), -EPERM);
	ck_assert_int_eq(gone, -1);
	ck_assert_int_eq(store_model_remove(s, "beta", 1000, &gone, &err), 0);
	ck_assert_int_eq(gone, beta_id);
	ck_assert_int_eq(store_model_remove(s, "beta", 1000, NULL, &err), -ENOENT);
	ck_assert_msg(strstr(err.msg, "no model named \"beta\""), "%s", err.msg);
	ck_assert_int_eq(store_model_get(s, "beta", &sum, NULL, &err), -ENOENT);
	ck_assert_int_eq(store_check_integrity(s, &err), 0);
	store_close(s);
	/* cascades removed beta's rows */
	ck_assert_int_eq(raw_int("SELECT count(*) FROM regions"), 5);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM regions WHERE operands != ''"), 5);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM allocations"), 2);
	pim__manifest__free_unpacked(m, NULL);
	pim__manifest__free_unpacked(m5, NULL);
	pim__manifest__free_unpacked(b, NULL);
}
END_TEST

/* What a walk saw: "id:name/op/location[extents] (alloc,bytes,role)..." per region. */
struct walk_log {
	char text[1024];
	size_t len;
	int stop_at;  /* region index whose callback fails with -ECANCELED, or -1 */
};

static int walk_region(void *ctx, size_t index, const struct store_region *r)
{
	struct walk_log *w = ctx;
	if ((int)index == w->stop_at)
		return -ECANCELED;
	w->len += (size_t)snprintf(w->text + w->len, sizeof w->text - w->len, "%s%zu=%u:%s/%s/%s[%zu:%llu,%zu:%llu]",
				   index ? " " : "", index, r->id, r->name, r->op, r->location,
				   r->n_parallel_extents, (unsigned long long)r->parallel_extents[0],
				   r->n_reduction_extents, (unsigned long long)r->reduction_extents[0]);
	return 0;
}

static int walk_operand(void *ctx, size_t region, const struct store_operand *o)
{
	struct walk_log *w = ctx;
	w->len += (size_t)snprintf(w->text + w->len, sizeof w->text - w->len, "(%zu:%u,%llu,%s,%d)", region,
				   o->allocation_id, (unsigned long long)o->bytes, o->elem_type, (int)o->role);
	return 0;
}

/* A walk gives the regions in program order, each followed by its operands, as stored; it stops
 * at the first failing callback and returns its error. */
START_TEST(model_walk_in_program_order)
{
	static const struct store_model_walker walker = { .region = walk_region, .operand = walk_operand };
	struct store *s;
	struct pim_error err = { 0 };
	bool replaced;
	int64_t id;
	Pim__Manifest *m = manifest("gamma", 3);
	struct walk_log w = { .stop_at = -1 };

	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	ck_assert_int_eq(rpc_model_put(s, m, 1000, false, &replaced, NULL, &err), 0);
	ck_assert_int_eq(store_model_id(s, "gamma", &id, &err), 0);
	ck_assert_int_eq(store_model_walk(s, id, &walker, &w, &err), 0);
	/* manifest(): region i has id 10+i and order 3-i; operands alloc 2 (in), alloc 1 (out) */
	ck_assert_str_eq(w.text, "0=12:r2/op/[1:4,1:2](0:2,128,,1)(0:1,64,f32,2) "
				 "1=11:r1/op/[1:4,1:2](1:2,128,,1)(1:1,64,f32,2) "
				 "2=10:r0/op/[1:4,1:2](2:2,128,,1)(2:1,64,f32,2)");
	w = (struct walk_log){ .stop_at = 1 };
	ck_assert_int_eq(store_model_walk(s, id, &walker, &w, &err), -ECANCELED);
	ck_assert_str_eq(w.text, "0=12:r2/op/[1:4,1:2](0:2,128,,1)(0:1,64,f32,2)");
	/* the statements were reset: the store carries on */
	w = (struct walk_log){ .stop_at = -1 };
	ck_assert_int_eq(store_model_walk(s, id, &walker, &w, &err), 0);
	ck_assert_uint_eq(w.len, 140);
	/* an unknown model has no regions */
	w = (struct walk_log){ .stop_at = -1 };
	ck_assert_int_eq(store_model_walk(s, id + 1, &walker, &w, &err), 0);
	ck_assert_uint_eq(w.len, 0);
	store_close(s);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

/* A manifest with every field set: sources, allocation names of every kind, locations,
 * element types, several extents, all three roles, ids and orders not in file order. */
static const char pinned_json[] =
	"{ \"name\": \"pinned\", \"source\": \"pinned.mlir\","
	" \"allocations\": [ { \"id\": 3, \"bytes\": 4096, \"kind\": \"argument\", \"name\": \"%arg0\" },"
	" { \"id\": 1, \"bytes\": 1024, \"kind\": \"alloc\", \"name\": \"%alloc\" },"
	" { \"id\": 7, \"bytes\": 65536, \"kind\": \"global\", \"name\": \"@weights\" } ],"
	" \"regions\": [ { \"id\": 5, \"name\": \"matvec\", \"op\": \"linalg.matvec\", \"order\": 1, \"n_par\": 16,"
	" \"n_total\": 4096, \"trip\": 3, \"parallel_extents\": [16], \"reduction_extents\": [256],"
	" \"location\": \"m.mlir:4:10\", \"operands\": ["
	" { \"allocation\": 7, \"bytes\": 16384, \"elem_type\": \"f32\", \"elem_bits\": 32, \"role\": \"in\" },"
	" { \"allocation\": 3, \"bytes\": 1024, \"elem_type\": \"f32\", \"elem_bits\": 32, \"role\": \"in\" },"
	" { \"allocation\": 1, \"bytes\": 64, \"elem_type\": \"f32\", \"elem_bits\": 32, \"role\": \"out\" } ] },"
	" { \"id\": 2, \"name\": \"relu\", \"op\": \"linalg.generic\", \"order\": 0, \"n_par\": 256, \"n_total\": 256,"
	" \"parallel_extents\": [16, 16], \"location\": \"m.mlir:9:3\", \"operands\": ["
	" { \"allocation\": 1, \"bytes\": 1024, \"elem_type\": \"bf16\", \"elem_bits\": 16, \"role\": \"inout\" } ] } ] }";

/* A model's content hash is its identity in the fleet catalogue, shared by hosts of different
 * pimd versions: it must never change for the same manifest.  The value was computed when the
 * store's rows were first hashed; a change here orphans every published measurement. */
START_TEST(content_hash_is_pinned)
{
	struct store *s;
	struct pim_error err = { 0 };
	bool replaced;
	int64_t id, other;
	char hash[65], again[65];
	Pim__Manifest *m;

	ck_assert_msg(manifest_from_json(pinned_json, strlen(pinned_json), &m, &err) == 0, "%s", err.msg);
	ck_assert_msg(manifest_validate(m, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	ck_assert_int_eq(rpc_model_put(s, m, 0, false, &replaced, NULL, &err), 0);
	ck_assert_int_eq(store_model_id(s, "pinned", &id, &err), 0);
	ck_assert_int_eq(store_model_hash(s, id, hash, &err), 0);
	ck_assert_str_eq(hash, "f511e3d168f0227c4d6c0008fe22e48ebe6b4d8aab603a7e7278013276ab8e11");
	/* kept in the model's row: asked again, the same */
	ck_assert_int_eq(raw_int("SELECT count(*) FROM models WHERE content_hash = "
				 "'f511e3d168f0227c4d6c0008fe22e48ebe6b4d8aab603a7e7278013276ab8e11'"), 1);
	ck_assert_int_eq(store_model_hash(s, id, again, &err), 0);
	ck_assert_str_eq(again, hash);
	/* the name is not part of it; anything else is (one operand's bytes) */
	free(m->name);
	m->name = strdup("renamed");
	ck_assert_int_eq(rpc_model_put(s, m, 0, false, &replaced, NULL, &err), 0);
	ck_assert_int_eq(store_model_id(s, "renamed", &other, &err), 0);
	ck_assert_int_eq(store_model_hash(s, other, again, &err), 0);
	ck_assert_str_eq(again, hash);
	free(m->name);
	m->name = strdup("changed");
	m->regions[0]->operands[2]->bytes = 128;
	ck_assert_int_eq(rpc_model_put(s, m, 0, false, &replaced, NULL, &err), 0);
	ck_assert_int_eq(store_model_id(s, "changed", &other, &err), 0);
	ck_assert_int_eq(store_model_hash(s, other, again, &err), 0);
	ck_assert_str_ne(again, hash);
	ck_assert_int_eq(store_model_hash(s, other + 1, again, &err), -ENOENT);
	store_close(s);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

/* A manifest of n regions of one operand each over one allocation (free with large_free). */
static Pim__Manifest *large(const char *name, size_t n)
{
	Pim__Manifest *m = calloc(1, sizeof *m);
	Pim__Allocation *a = calloc(1, sizeof *a);
	Pim__Region *g = calloc(n, sizeof *g);
	Pim__Operand *o = calloc(1, sizeof *o);
	Pim__Operand **ops = calloc(1, sizeof *ops); /* every region's one operand */
	ck_assert(m && a && g && o && ops);
	ops[0] = o;
	pim__manifest__init(m);
	pim__allocation__init(a);
	pim__operand__init(o);
	m->name = (char *)name;
	a->id = 1;
	a->bytes = 64;
	a->kind = PIM__ALLOC_KIND__ALLOC_KIND_ARGUMENT;
	m->allocations = calloc(1, sizeof *m->allocations);
	m->allocations[0] = a;
	m->n_allocations = 1;
	o->allocation_id = 1;
	o->bytes = 64;
	o->role = PIM__OPERAND_ROLE__OPERAND_ROLE_IN;
	m->regions = calloc(n, sizeof *m->regions);
	ck_assert(m->allocations && m->regions);
	for (size_t i = 0; i < n; i++) {
		pim__region__init(&g[i]);
		g[i].id = (uint32_t)i;
		g[i].order = (uint32_t)i;
		g[i].name = "r";
		g[i].op = "x";
		g[i].n_par = g[i].n_total = 1;
		g[i].operands = ops;
		g[i].n_operands = 1;
		m->regions[i] = &g[i];
	}
	m->n_regions = n;
	return m;
}

static void large_free(Pim__Manifest *m)
{
	free(m->regions[0]->operands[0]);
	free(m->regions[0]->operands);
	free(m->regions[0]);
	free(m->regions);
	free(m->allocations[0]);
	free(m->allocations);
	free(m);
}

/* A model of more than STORE_PART_ROWS rows is written in parts and named last; replacing and
 * removing it delete the old rows in parts; staged rows a crash left are deleted by
 * store_staged_cleanup and never listed, counted or found meanwhile. */
START_TEST(large_models_in_parts)
{
	const size_t n = STORE_PART_ROWS + 7;  /* 20,015 rows: three parts */
	struct store *s;
	struct pim_error err = { 0 };
	bool replaced;
	unsigned count, cleaned;
	uint64_t regions;
	struct store_model_info sum;
	struct store_manifest *got;
	Pim__Manifest *m = large("big", n), *small = manifest("big", 2);

	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	ck_assert_msg(rpc_model_put(s, m, 1000, false, &replaced, &sum, &err) == 0, "%s", err.msg);
	ck_assert(!replaced);
	ck_assert_str_eq(sum.name, "big");
	ck_assert_uint_eq(sum.regions, n);
	store_model_info_clear(&sum);
	ck_assert_int_eq(store_model_get(s, "big", NULL, &got, &err), 0);
	ck_assert_uint_eq(got->n_regions, n);
	ck_assert_uint_eq(got->regions[n - 1].id, n - 1);
	ck_assert_uint_eq(got->regions[n - 1].n_operands, 1);
	ck_assert_int_eq(got->regions[n - 1].operands[0].role, STORE_ROLE_IN);
	store_manifest_free(got);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM models WHERE staging = 1"), 0);
	/* the checks come before any part is written */
	ck_assert_int_eq(rpc_model_put(s, m, 1000, false, &replaced, NULL, &err), -EEXIST);
	ck_assert_int_eq(rpc_model_put(s, m, 1001, true, &replaced, NULL, &err), -EPERM);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM models"), 1);

	/* replaced by itself, then by a small model: the old rows are gone */
	ck_assert_int_eq(rpc_model_put(s, m, 1000, true, &replaced, NULL, &err), 0);
	ck_assert(replaced);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM regions"), (int)n);
	ck_assert_int_eq(rpc_model_put(s, small, 1000, true, &replaced, NULL, &err), 0);
	ck_assert(replaced);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM regions"), 2);
	/* a small model replaced by a large one */
	ck_assert_int_eq(rpc_model_put(s, m, 1000, true, &replaced, NULL, &err), 0);
	ck_assert(replaced);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM regions WHERE operands != ''"), (int)n);

	/* a part that fails (a duplicate region id in the second part) leaves the old model as it
	 * was, and nothing staged */
	m->regions[STORE_PART_ROWS / 2 + 5]->id = 3;
	ck_assert_int_eq(rpc_model_put(s, m, 1000, true, &replaced, NULL, &err), -EINVAL);
	ck_assert(!replaced);
	m->regions[STORE_PART_ROWS / 2 + 5]->id = STORE_PART_ROWS / 2 + 5;
	ck_assert_int_eq(store_model_regions(s, "big", &regions, &err), 0);
	ck_assert_uint_eq(regions, n);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM models"), 1);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM regions"), (int)n);

	/* removed: staged at once, deleted in parts */
	ck_assert_int_eq(store_model_remove(s, "big", 1001, NULL, &err), -EPERM);
	ck_assert_int_eq(store_model_remove(s, "big", 1000, NULL, &err), 0);
	ck_assert_int_eq(store_model_regions(s, "big", &regions, &err), 0);
	ck_assert_uint_eq(regions, 0);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM models"), 0);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM regions"), 0);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM allocations"), 0);

	/* what a crash between parts leaves: a staged row and its rows */
	ck_assert_int_eq(rpc_model_put(s, small, 1000, false, &replaced, NULL, &err), 0);
	raw_exec("UPDATE models SET staging = 1, name = ' staging ' || id WHERE name = 'big'");
	ck_assert_int_eq(store_model_count(s, &count, &err), 0);
	store_forget_cached(s);
	ck_assert_int_eq(store_model_count(s, &count, &err), 0);
	ck_assert_uint_eq(count, 0);
	ck_assert_int_eq(store_model_get(s, " staging 1", NULL, NULL, &err), -ENOENT);
	struct store_model_info *list;
	size_t nl;
	ck_assert_int_eq(store_model_list(s, &list, &nl, &err), 0);
	ck_assert_uint_eq(nl, 0);
	store_model_list_free(list, nl);
	ck_assert_int_eq(store_staged_cleanup(s, &cleaned, &err), 0);
	ck_assert_uint_eq(cleaned, 1);
	ck_assert_int_eq(store_staged_cleanup(s, &cleaned, &err), 0);
	ck_assert_uint_eq(cleaned, 0);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM models"), 0);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM regions"), 0);
	ck_assert_int_eq(store_check_integrity(s, &err), 0);
	store_close(s);
	large_free(m);
	pim__manifest__free_unpacked(small, NULL);
}
END_TEST

/* A failure in the middle of a load leaves nothing half-stored. */
START_TEST(failed_put_leaves_nothing)
{
	struct store *s;
	struct pim_error err = { 0 };
	bool replaced;
	Pim__Manifest *m = manifest("gamma", 2);

	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	/* bypass validation: an operand of no bytes is refused in the second region */
	m->regions[1]->operands[0]->bytes = 0;
	ck_assert_int_lt(rpc_model_put(s, m, 0, false, &replaced, NULL, &err), 0);
	ck_assert_msg(strstr(err.msg, "region 11: an operand with no role, no bytes"), "%s", err.msg);
	unsigned cnt = 9;
	ck_assert_int_eq(store_model_count(s, &cnt, &err), 0);
	ck_assert_uint_eq(cnt, 0);
	store_close(s);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM regions"), 0);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

/* Metrics replace earlier ones, drop stored decisions, and refuse unknown regions. */
struct seen_metrics {
	size_t n;
	uint32_t last_id;
	char source[32];
	int fail;
};

static int see_metrics(void *ctx, const struct store_metrics *m)
{
	struct seen_metrics *sm = ctx;
	sm->n++;
	sm->last_id = m->region_id;
	snprintf(sm->source, sizeof sm->source, "%s", m->source);
	return sm->fail;
}

START_TEST(metrics_and_decisions)
{
	struct store *s;
	struct pim_error err = { 0 };
	bool replaced;
	Pim__Manifest *m = manifest("delta", 2);
	struct store_platform pf = { .name = "test cpu / none", .cpu_model = "test cpu", .pmu = "none",
				     .kernel = "6.1" };
	int64_t pid, pid2, mid;

	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	ck_assert_int_eq(store_platform_ensure(s, &pf, &pid, &err), 0);
	ck_assert_int_eq(store_platform_ensure(s, &pf, &pid2, &err), 0);
	ck_assert_int_eq(pid, pid2); /* found, not duplicated */
	ck_assert(pf.b_cpu == 0 && !pf.b_cpu_method[0]); /* not measured */
	/* a measured B_cpu with how it was measured (sql/0008), read back when b_cpu is 0 */
	struct store_platform probe = pf;
	probe.b_cpu = 17.5e9;
	probe.b_cpu_spread = 0.04;
	snprintf(probe.b_cpu_method, sizeof probe.b_cpu_method, "test probe");
	probe.b_cpu_measured_at = 1700000000;
	probe.b_cpu_busy = true;
	snprintf(probe.b_cpu_load, sizeof probe.b_cpu_load, "busy: 4 runnable tasks on 2 CPUs");
	snprintf(probe.b_cpu_host, sizeof probe.b_cpu_host, "2 CPUs, 23.5 GiB");
	ck_assert_int_eq(store_platform_set_b_cpu(s, pid, &probe, &err), 0);
	ck_assert_int_eq(store_platform_ensure(s, &pf, &pid2, &err), 0);
	ck_assert(pf.b_cpu == 17.5e9 && pf.b_cpu_spread == 0.04 && pf.b_cpu_busy);
	ck_assert_str_eq(pf.b_cpu_method, "test probe");
	ck_assert_int_eq(pf.b_cpu_measured_at, 1700000000);
	ck_assert_str_eq(pf.b_cpu_load, "busy: 4 runnable tasks on 2 CPUs");
	ck_assert_str_eq(pf.b_cpu_host, "2 CPUs, 23.5 GiB");
	probe.b_cpu = 0;
	ck_assert_int_eq(store_platform_set_b_cpu(s, pid, &probe, &err), -EINVAL);
	ck_assert_int_eq(rpc_model_put(s, m, 0, false, &replaced, NULL, &err), 0);
	ck_assert_int_eq(store_model_id(s, "delta", &mid, &err), 0);

	struct store_metrics rm = { 0 };
	rm.region_id = 10;
	rm.evidence = PL_EVIDENCE_IMPORTED;
	rm.t_host = 2e-3;
	rm.have_n_rd = true;
	rm.n_rd = 1000;
	rm.source = "test";
	ck_assert_int_eq(store_metrics_put(s, mid, pid, 0, &rm, &err), 0);
	const uint8_t blob[] = { 1, 2, 3 };
	ck_assert_int_eq(store_decision_put(s, mid, pid, "k", blob, sizeof blob, &err), 0);
	uint8_t *got;
	size_t len;
	ck_assert_int_eq(store_decision_get(s, mid, pid, "k", &got, &len, &err), 1);
	ck_assert_uint_eq(len, 3);
	ck_assert_mem_eq(got, blob, 3);
	free(got);
	ck_assert_int_eq(store_decision_get(s, mid, pid, "other", &got, &len, &err), 0);

	/* new metrics: the stored decision is gone, the metrics replaced */
	rm.t_host = 4e-3;
	rm.have_n_rd = false;
	ck_assert_int_eq(store_metrics_put(s, mid, pid, 0, &rm, &err), 0);
	ck_assert_int_eq(store_decision_get(s, mid, pid, "k", &got, &len, &err), 0);
	struct store_metrics *v;
	size_t n;
	ck_assert_int_eq(store_metrics_list(s, mid, pid, &v, &n, &err), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert(v[0].t_host == 4e-3);
	ck_assert(!v[0].have_n_rd);
	ck_assert_int_eq(v[0].evidence, PL_EVIDENCE_IMPORTED);
	ck_assert(v[0].source_b_cpu == 0); /* not given: NULL, read back as unknown */
	store_metrics_list_free(v, n);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM metrics WHERE source_b_cpu IS NULL"), 1);

	/* the measuring host's B_cpu is kept with imported counts (migration 0004) */
	rm.source_b_cpu = 13.6e9;
	ck_assert_int_eq(store_metrics_put(s, mid, pid, 0, &rm, &err), 0);
	ck_assert_int_eq(store_metrics_list(s, mid, pid, &v, &n, &err), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert(v[0].source_b_cpu == 13.6e9);
	store_metrics_list_free(v, n);
	/* row by row: what the callback sees, and a callback's error ends the walk */
	struct seen_metrics seen = { 0 };
	ck_assert_int_eq(store_metrics_each(s, mid, pid, see_metrics, &seen, &err), 0);
	ck_assert_uint_eq(seen.n, 1);
	ck_assert_uint_eq(seen.last_id, 10);
	ck_assert_str_eq(seen.source, "test");
	seen.fail = -ECANCELED;
	ck_assert_int_eq(store_metrics_each(s, mid, pid, see_metrics, &seen, &err), -ECANCELED);
	ck_assert_uint_eq(seen.n, 2);
	seen.fail = -ENOMEM;
	ck_assert_int_eq(store_metrics_each(s, mid, pid, see_metrics, &seen, &err), -ENOMEM);
	ck_assert_msg(strstr(err.msg, "out of memory reading metrics"), "%s", err.msg);
	seen.fail = 0;
	ck_assert_int_eq(store_metrics_each(s, mid, pid, see_metrics, &seen, &err), 0); /* reset after a stop */
	ck_assert_uint_eq(seen.n, 4);
	ck_assert_int_eq(store_metrics_each(s, mid, pid2 + 1, see_metrics, &seen, &err), 0); /* other platform */
	ck_assert_uint_eq(seen.n, 4);
	rm.source_b_cpu = -1;
	ck_assert_int_eq(store_metrics_put(s, mid, pid, 0, &rm, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "measuring host's B_cpu"), "%s", err.msg);
	rm.source_b_cpu = 0;

	rm.region_id = 99;
	ck_assert_int_eq(store_metrics_put(s, mid, pid, 0, &rm, &err), -ENOENT);
	ck_assert_msg(strstr(err.msg, "no region 99"), "%s", err.msg);
	rm.region_id = 10;
	rm.t_host = 0;
	ck_assert_int_eq(store_metrics_put(s, mid, pid, 0, &rm, &err), -EINVAL);
	/* removing the model removes its metrics */
	ck_assert_int_eq(store_model_remove(s, "delta", 0, NULL, &err), 0);
	store_close(s);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM metrics"), 0);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

/*
 * A model's version changes with its metrics and its manifest, and is never handed out again,
 * though the model's id is (a removed model's id goes to the next one): placement answers are
 * stored under it.  A second connection (pimd's work thread) sees and makes the same changes.
 */
START_TEST(model_versions_and_a_second_connection)
{
	struct store *s, *t;
	struct pim_error err = { 0 };
	bool replaced;
	Pim__Manifest *m = manifest("delta", 2), *e = manifest("echo", 1);
	struct store_platform pf = { .name = "test cpu / none", .cpu_model = "test cpu", .pmu = "none",
				     .kernel = "6.1" };
	int64_t pid, mid, mid2, v1, v2, v3, v4, v5;
	unsigned count;
	uint64_t regions;

	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	ck_assert_int_eq(store_platform_ensure(s, &pf, &pid, &err), 0);
	ck_assert_int_eq(rpc_model_put(s, m, 0, false, &replaced, NULL, &err), 0);
	ck_assert_int_eq(store_model_id(s, "delta", &mid, &err), 0);
	ck_assert_int_eq(store_model_version(s, mid, &v1, &err), 0);
	ck_assert_int_eq(v1, 1); /* the first version handed out */
	ck_assert_int_eq(store_model_regions(s, "delta", &regions, &err), 0);
	ck_assert_uint_eq(regions, 2);
	ck_assert_int_eq(store_model_regions(s, "nothing", &regions, &err), 0);
	ck_assert_uint_eq(regions, 0);

	struct store_metrics rm = { 0 };
	rm.region_id = 10;
	rm.evidence = PL_EVIDENCE_IMPORTED;
	rm.t_host = 2e-3;
	rm.source = "test";
	ck_assert_int_eq(store_metrics_put(s, mid, pid, 0, &rm, &err), 0);
	ck_assert_int_eq(store_model_version(s, mid, &v2, &err), 0);
	ck_assert_int_eq(v2, 2);
	/* a refused change changes nothing */
	rm.region_id = 99;
	ck_assert_int_eq(store_metrics_put(s, mid, pid, 0, &rm, &err), -ENOENT);
	ck_assert_int_eq(store_model_version(s, mid, &v3, &err), 0);
	ck_assert_int_eq(v3, v2);

	/* the second connection: reads what the first committed, writes what the first reads */
	ck_assert_int_eq(store_open_again(s, 1000, &t, &err), 0);
	ck_assert_int_eq(store_model_count(s, &count, &err), 0);
	ck_assert_uint_eq(count, 1);
	ck_assert_int_eq(store_model_version(t, mid, &v3, &err), 0);
	ck_assert_int_eq(v3, v2);
	ck_assert_int_eq(rpc_model_put(t, e, 0, false, &replaced, NULL, &err), 0);
	store_forget_cached(s);
	ck_assert_int_eq(store_model_count(s, &count, &err), 0);
	ck_assert_uint_eq(count, 2);

	/* a read transaction sees one state, whatever the other connection commits meanwhile */
	ck_assert_int_eq(store_read_begin(t, &err), 0);
	ck_assert_int_eq(store_model_version(t, mid, &v3, &err), 0);
	rm.region_id = 11;
	ck_assert_int_eq(store_metrics_put(s, mid, pid, 0, &rm, &err), 0);
	ck_assert_int_eq(store_model_version(t, mid, &v4, &err), 0);
	ck_assert_int_eq(v4, v3);
	store_read_end(t);
	ck_assert_int_eq(store_model_version(t, mid, &v4, &err), 0);
	ck_assert_int_gt(v4, v3);

	/* removed, and the id given to the next model: its version is new */
	ck_assert_int_eq(store_model_remove(t, "echo", 0, NULL, &err), 0);
	ck_assert_int_eq(store_model_remove(t, "delta", 0, NULL, &err), 0);
	ck_assert_int_eq(store_model_version(s, mid, &v5, &err), -ENOENT);
	ck_assert_int_eq(rpc_model_put(s, m, 0, false, &replaced, NULL, &err), 0);
	ck_assert_int_eq(store_model_id(s, "delta", &mid2, &err), 0);
	ck_assert_int_eq(mid2, mid);
	ck_assert_int_eq(store_model_version(s, mid2, &v5, &err), 0);
	ck_assert_int_gt(v5, v4);
	store_close(t);
	store_close(s);
	pim__manifest__free_unpacked(m, NULL);
	pim__manifest__free_unpacked(e, NULL);
}
END_TEST

/* Job (run) ids are never reused, though replacing or removing a model deletes its runs. */
START_TEST(run_ids_stay_unique)
{
	struct store *s;
	struct pim_error err = { 0 };
	bool replaced;
	Pim__Manifest *m = manifest("delta", 2);
	struct store_platform pf = { .name = "test cpu / none", .cpu_model = "test cpu", .pmu = "none",
				     .kernel = "6.1" };
	int64_t pid, mid, r1, r2, r3, r4;

	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	ck_assert_int_eq(store_platform_ensure(s, &pf, &pid, &err), 0);
	ck_assert_int_eq(rpc_model_put(s, m, 0, false, &replaced, NULL, &err), 0);
	ck_assert_int_eq(store_model_id(s, "delta", &mid, &err), 0);
	ck_assert_int_eq(store_run_create(s, mid, pid, 0, 1, 1, 2, &r1, &err), 0);
	ck_assert_int_eq(store_run_create(s, mid, pid, 0, 1, 1, 2, &r2, &err), 0);
	ck_assert_int_eq(r1, 1);
	ck_assert_int_eq(r2, 2);
	/* the replacement deletes runs 1 and 2; the next id is 3, not 1 */
	ck_assert_int_eq(rpc_model_put(s, m, 0, true, &replaced, NULL, &err), 0);
	ck_assert(replaced);
	ck_assert_int_eq(store_model_id(s, "delta", &mid, &err), 0);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM profile_runs"), 0);
	ck_assert_int_eq(store_run_create(s, mid, pid, 0, 1, 1, 2, &r3, &err), 0);
	ck_assert_int_eq(r3, 3);
	ck_assert_int_eq(store_model_remove(s, "delta", 0, NULL, &err), 0);
	store_close(s);
	/* and across a restart */
	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	ck_assert_int_eq(rpc_model_put(s, m, 0, false, &replaced, NULL, &err), 0);
	ck_assert_int_eq(store_model_id(s, "delta", &mid, &err), 0);
	ck_assert_int_eq(store_run_create(s, mid, pid, 0, 1, 1, 2, &r4, &err), 0);
	ck_assert_int_eq(r4, 4);
	store_close(s);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

/* ---------------------------------------------------------------- durability */

/* A VFS over the default one that counts xSync calls, to see what reaches the disk.  With
 * fail_in_sync set to n, the file system "fails" during the n-th sync from then on as ext4
 * does when its journal is aborted under a running fsync: that call still reports success,
 * every later write and sync fails. */
static sqlite3_vfs *real_vfs;
static sqlite3_vfs counting_vfs;
static int syncs;
static int fail_in_sync;
static bool fs_failed;

struct counting_file {
	sqlite3_file base;
	sqlite3_file *real; /* follows this struct in the same allocation */
};

#define REAL(f) (((struct counting_file *)(f))->real)
static int cf_close(sqlite3_file *f) { return REAL(f)->pMethods->xClose(REAL(f)); }
static int cf_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o) { return REAL(f)->pMethods->xRead(REAL(f), b, n, o); }
static int cf_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o)
{
	return fs_failed ? SQLITE_IOERR_WRITE : REAL(f)->pMethods->xWrite(REAL(f), b, n, o);
}
static int cf_truncate(sqlite3_file *f, sqlite3_int64 n) { return REAL(f)->pMethods->xTruncate(REAL(f), n); }
static int cf_sync(sqlite3_file *f, int flags)
{
	syncs++;
	if (fs_failed)
		return SQLITE_IOERR_FSYNC;
	if (fail_in_sync > 0 && --fail_in_sync == 0)
		fs_failed = true;
	return REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int cf_size(sqlite3_file *f, sqlite3_int64 *n) { return REAL(f)->pMethods->xFileSize(REAL(f), n); }
static int cf_lock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xLock(REAL(f), l); }
static int cf_unlock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xUnlock(REAL(f), l); }
static int cf_reserved(sqlite3_file *f, int *r) { return REAL(f)->pMethods->xCheckReservedLock(REAL(f), r); }
static int cf_control(sqlite3_file *f, int op, void *a) { return REAL(f)->pMethods->xFileControl(REAL(f), op, a); }
static int cf_sector(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int cf_dev(sqlite3_file *f) { return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); }
static int cf_shm_map(sqlite3_file *f, int i, int sz, int ext, void volatile **p) { return REAL(f)->pMethods->xShmMap(REAL(f), i, sz, ext, p); }
static int cf_shm_lock(sqlite3_file *f, int o, int n, int fl) { return REAL(f)->pMethods->xShmLock(REAL(f), o, n, fl); }
static void cf_shm_barrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int cf_shm_unmap(sqlite3_file *f, int d) { return REAL(f)->pMethods->xShmUnmap(REAL(f), d); }
static int cf_fetch(sqlite3_file *f, sqlite3_int64 o, int n, void **p) { return REAL(f)->pMethods->xFetch(REAL(f), o, n, p); }
static int cf_unfetch(sqlite3_file *f, sqlite3_int64 o, void *p) { return REAL(f)->pMethods->xUnfetch(REAL(f), o, p); }

static const sqlite3_io_methods counting_methods = {
	3, cf_close, cf_read, cf_write, cf_truncate, cf_sync, cf_size, cf_lock, cf_unlock, cf_reserved,
	cf_control, cf_sector, cf_dev, cf_shm_map, cf_shm_lock, cf_shm_barrier, cf_shm_unmap, cf_fetch,
	cf_unfetch,
};

static int cv_open(sqlite3_vfs *v, sqlite3_filename name, sqlite3_file *f, int flags, int *out)
{
	struct counting_file *cf = (struct counting_file *)f;
	cf->real = (sqlite3_file *)(cf + 1);
	int r = real_vfs->xOpen(real_vfs, name, cf->real, flags, out);
	cf->base.pMethods = r == SQLITE_OK && cf->real->pMethods ? &counting_methods : NULL;
	return r;
}

static void counting_vfs_install(void)
{
	real_vfs = sqlite3_vfs_find(NULL);
	ck_assert_ptr_nonnull(real_vfs);
	counting_vfs = *real_vfs;
	counting_vfs.zName = "pimd-test-counting";
	counting_vfs.szOsFile = (int)sizeof(struct counting_file) + real_vfs->szOsFile;
	counting_vfs.xOpen = cv_open;
	ck_assert_int_eq(sqlite3_vfs_register(&counting_vfs, 1), SQLITE_OK);
}

/* What a client is told is stored has been synced to disk when the call returns: every
 * acknowledged write (a model, a removal, a batch of samples) costs at least one fsync of the
 * write-ahead log (synchronous=FULL; with NORMAL a commit syncs nothing until a checkpoint). */
START_TEST(acknowledged_writes_are_synced)
{
	struct store *s;
	struct pim_error err = { 0 };
	bool replaced;
	Pim__Manifest *m = manifest("durable", 2);
	struct store_platform pf = { .name = "p", .cpu_model = "p", .pmu = "none", .kernel = "" };
	int64_t pid, mid, run;

	counting_vfs_install();
	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	ck_assert_int_eq(store_platform_ensure(s, &pf, &pid, &err), 0);
	syncs = 0;
	ck_assert_int_eq(rpc_model_put(s, m, 0, false, &replaced, NULL, &err), 0);
	ck_assert_int_ge(syncs, 1);
	ck_assert_int_eq(store_model_id(s, "durable", &mid, &err), 0);
	ck_assert_int_eq(store_run_create(s, mid, pid, 0, 0, 0, 2, &run, &err), 0);
	syncs = 0;
	struct store_sample x = { .region = 10, .rep = 0, .executions = 1, .time_ns = 5 };
	ck_assert_int_eq(store_samples_put(s, run, &x, 1, &err), 0);
	ck_assert_int_ge(syncs, 1);
	syncs = 0;
	ck_assert_int_eq(store_model_remove(s, "durable", 0, NULL, &err), 0);
	ck_assert_int_ge(syncs, 1);
	/* a read syncs nothing */
	syncs = 0;
	unsigned n;
	ck_assert_int_eq(store_model_count(s, &n, &err), 0);
	ck_assert_int_eq(syncs, 0);
	store_close(s);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

struct seen_samples {
	unsigned n, stop_at;
	uint32_t first, last;
};

static int see_sample(void *ctx, const struct store_sample *x)
{
	struct seen_samples *ss = ctx;
	if (ss->n == 0)
		ss->first = x->region;
	ss->last = x->region;
	return ++ss->n == ss->stop_at ? 7 : 0;
}

/* A run's samples from a region on, and a walk a callback stops without an error (the metrics
 * of a large run are derived in parts). */
START_TEST(samples_from_a_region_on)
{
	struct store *s;
	struct pim_error err = { 0 };
	bool replaced;
	struct store_platform pf = { .name = "p", .cpu_model = "p", .pmu = "none", .kernel = "" };
	int64_t pid, mid, run;
	Pim__Manifest *m = manifest("parts", 3);
	struct store_sample v[6];

	for (unsigned i = 0; i < 6; i++)
		v[i] = (struct store_sample){ .region = 10 + i / 2, .rep = i % 2, .executions = 1, .time_ns = 5 };
	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	ck_assert_int_eq(store_platform_ensure(s, &pf, &pid, &err), 0);
	ck_assert_int_eq(rpc_model_put(s, m, 0, false, &replaced, NULL, &err), 0);
	ck_assert_int_eq(store_model_id(s, "parts", &mid, &err), 0);
	ck_assert_int_eq(store_run_create(s, mid, pid, 0, 0, 0, 3, &run, &err), 0);
	ck_assert_int_eq(store_samples_put(s, run, v, 6, &err), 0);
	struct seen_samples all = { 0 }, from = { 0 }, stopped = { .stop_at = 3 };
	ck_assert_int_eq(store_samples_each(s, run, 0, see_sample, &all, &err), 0);
	ck_assert_uint_eq(all.n, 6);
	ck_assert_int_eq(store_samples_each(s, run, 11, see_sample, &from, &err), 0);
	ck_assert_uint_eq(from.n, 4);
	ck_assert_uint_eq(from.first, 11);
	ck_assert_uint_eq(from.last, 12);
	ck_assert_int_eq(store_samples_each(s, run, 0, see_sample, &stopped, &err), 7);
	ck_assert_uint_eq(stopped.n, 3);
	ck_assert_uint_eq(stopped.last, 11);
	ck_assert(!store_in_group(s));
	ck_assert_int_eq(store_group_begin(s, &err), 0);
	ck_assert(store_in_group(s));
	bool committed;
	ck_assert_int_eq(store_group_commit(s, &committed, &err), 0);
	ck_assert(!store_in_group(s));
	store_close(s);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

/* A model whose profile runs hold more samples than one part is removed in parts, its samples
 * first (an in-situ run may hold 4,000,000): more commits than a model with few samples takes,
 * and nothing of it left.  The metrics' foreign keys have indexes of their own (sql/0007). */
START_TEST(many_samples_removed_in_parts)
{
	struct store *s;
	struct pim_error err = { 0 };
	bool replaced;
	struct store_platform pf = { .name = "p", .cpu_model = "p", .pmu = "none", .kernel = "" };
	int64_t pid, mid, run;
	unsigned few_syncs, many_syncs;
	size_t n = STORE_PART_ROWS + 5;
	struct store_sample *v = calloc(n, sizeof *v);

	ck_assert_ptr_nonnull(v);
	for (size_t i = 0; i < n; i++)
		v[i] = (struct store_sample){ .region = 10, .rep = (uint32_t)i, .executions = 1, .time_ns = 5 };
	counting_vfs_install();
	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	ck_assert_int_eq(store_platform_ensure(s, &pf, &pid, &err), 0);
	for (int k = 0; k < 2; k++) {
		Pim__Manifest *m = manifest("sampled", 2);
		size_t count = k ? n : 10;
		ck_assert_int_eq(rpc_model_put(s, m, 0, false, &replaced, NULL, &err), 0);
		ck_assert_int_eq(store_model_id(s, "sampled", &mid, &err), 0);
		ck_assert_int_eq(store_run_create(s, mid, pid, 0, 0, 0, 2, &run, &err), 0);
		ck_assert_int_eq(store_samples_put(s, run, v, count, &err), 0);
		ck_assert_int_eq(raw_int("SELECT count(*) FROM samples"), (int)count);
		syncs = 0;
		ck_assert_msg(store_model_remove(s, "sampled", 0, NULL, &err) == 0, "%s", err.msg);
		*(k ? &many_syncs : &few_syncs) = syncs;
		ck_assert_int_eq(raw_int("SELECT count(*) FROM samples"), 0);
		ck_assert_int_eq(raw_int("SELECT count(*) FROM profile_runs"), 0);
		ck_assert_int_eq(raw_int("SELECT count(*) FROM models"), 0);
		pim__manifest__free_unpacked(m, NULL);
	}
	/* staged, two parts of samples and one more that finds none, regions, allocations, the row */
	ck_assert_uint_ge(many_syncs, few_syncs + 4);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN "
				 "('metrics_by_region', 'metrics_by_run')"), 2);
	store_close(s);
	free(v);
}
END_TEST

/* A commit whose fsync reports success while the file system fails under it is not
 * acknowledged: the store asks the file system again after the commit, and that fails. */
START_TEST(commit_during_a_file_system_failure_is_not_acknowledged)
{
	struct store *s;
	struct pim_error err = { 0 };
	bool replaced;
	Pim__Manifest *m = manifest("first", 2), *m2 = manifest("second", 2);

	counting_vfs_install();
	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	/* a healthy file system: the check after the commit passes */
	ck_assert_int_eq(rpc_model_put(s, m, 0, false, &replaced, NULL, &err), 0);
	fs_failed = false;
	fail_in_sync = 1; /* the commit's own fsync */
	ck_assert_int_eq(rpc_model_put(s, m2, 0, false, &replaced, NULL, &err), -EIO);
	ck_assert_ptr_nonnull(strstr(err.msg, "the file system failed while the change was committed"));
	ck_assert_ptr_nonnull(strstr(err.msg, "it may not be stored"));
	/* the failure stays: the next change fails at once */
	err = (struct pim_error){ 0 };
	ck_assert_int_lt(store_model_remove(s, "first", 0, NULL, &err), 0);
	store_close(s);
	fs_failed = false;
	fail_in_sync = 0;
	pim__manifest__free_unpacked(m, NULL);
	pim__manifest__free_unpacked(m2, NULL);
}
END_TEST

/* Group commit: changes of several clients in one transaction and one sync; one that fails
 * on its own leaves the others; a failure of the file system at the group's commit is
 * reported with committed set, a group SQLite rolled back with it clear. */
START_TEST(group_of_changes_commits_once)
{
	struct store *s;
	struct pim_error err = { 0 };
	bool replaced, committed;
	Pim__Manifest *a = manifest("a", 2), *b = manifest("b", 2), *c = manifest("c", 2);
	unsigned n;

	counting_vfs_install();
	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	ck_assert_int_eq(rpc_model_put(s, a, 0, false, &replaced, NULL, &err), 0);
	syncs = 0;
	ck_assert_int_eq(store_group_begin(s, &err), 0);
	ck_assert_int_eq(rpc_model_put(s, b, 0, false, &replaced, NULL, &err), 0);
	/* taken: this change fails, the group goes on */
	ck_assert_int_eq(rpc_model_put(s, a, 0, false, &replaced, NULL, &err), -EEXIST);
	ck_assert_int_eq(store_model_remove(s, "a", 0, NULL, &err), 0);
	ck_assert_int_eq(rpc_model_put(s, c, 0, false, &replaced, NULL, &err), 0);
	ck_assert_int_eq(syncs, 0); /* nothing on disk before the group's commit */
	ck_assert_int_eq(store_group_commit(s, &committed, &err), 0);
	ck_assert(committed);
	ck_assert_int_eq(syncs, 2); /* the commit's and the check's, for the three changes */
	ck_assert_int_eq(store_model_count(s, &n, &err), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM models WHERE name IN ('b', 'c')"), 2);

	/* the file system fails under the group's commit: every change of it may be lost */
	ck_assert_int_eq(store_group_begin(s, &err), 0);
	ck_assert_int_eq(rpc_model_put(s, a, 0, false, &replaced, NULL, &err), 0);
	fail_in_sync = 1;
	ck_assert_int_eq(store_group_commit(s, &committed, &err), -EIO);
	ck_assert(committed);
	ck_assert_ptr_nonnull(strstr(err.msg, "it may not be stored"));
	store_close(s);
	fs_failed = false;
	fail_in_sync = 0;
	pim__manifest__free_unpacked(a, NULL);
	pim__manifest__free_unpacked(b, NULL);
	pim__manifest__free_unpacked(c, NULL);
}
END_TEST

/* A change handed to a writer (store_write_via): a run's row, its samples and its end. */
struct change {
	int64_t model_id, platform_id, run;
	int written, done, r;
};

static int change_write(struct store *s, void *data, struct pim_error *err)
{
	struct change *c = data;
	uint64_t v[2] = { 7, 9 };
	struct store_sample x = { .region = 0, .rep = 0, .executions = 1, .time_ns = 1000, .n_values = 2,
				  .values = v };
	struct store_run_update u = { .state = "done", .message = "ok", .worker_uid = -1, .regions_done = 1,
				      .repetitions_done = -1, .repetitions_total = -1, .finished = true };
	int r;

	c->written++;
	if ((r = store_run_create(s, c->model_id, c->platform_id, 0, 0, 1, 1, &c->run, err)) < 0 ||
	    (r = store_samples_put(s, c->run, &x, 1, err)) < 0)
		return r;
	return store_run_update(s, c->run, &u, err);
}

static void change_done(void *data, int r, const struct pim_error *err)
{
	struct change *c = data;
	c->done++;
	c->r = r;
}

static int refused;
static struct store_write taken;
static int writer_refuses(void *owner, const struct store_write *w) { return refused; }
static int writer_takes(void *owner, const struct store_write *w)
{
	taken = *w;
	return 0;
}

START_TEST(changes_handed_to_a_writer)
{
	struct store *s;
	struct pim_error err = { 0 };
	bool replaced, committed;
	Pim__Manifest *m = manifest("w", 1);
	struct store_platform pf = { .name = "test cpu / none", .cpu_model = "test cpu", .pmu = "none",
				     .kernel = "6.1" };
	struct change c = { 0 };

	counting_vfs_install();
	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	ck_assert_int_eq(store_platform_ensure(s, &pf, &c.platform_id, &err), 0);
	ck_assert_int_eq(rpc_model_put(s, m, 0, false, &replaced, NULL, &err), 0);
	ck_assert_int_eq(store_model_id(s, "w", &c.model_id, &err), 0);
	struct store_write w = { change_write, change_done, &c, NULL, NULL };

	/* no writer, or one that refuses it: it waits in the store, and is written (done told)
	 * when the store is settled, never inside store_write_via */
	store_write_via(NULL, s, &w);
	ck_assert_int_eq(c.written, 0);
	ck_assert_int_eq(c.done, 0);
	ck_assert_uint_eq(store_write_settle(s), 1);
	ck_assert_int_eq(c.written, 1);
	ck_assert_int_eq(c.done, 1);
	ck_assert_int_eq(c.r, 0);
	refused = -ESHUTDOWN;
	store_write_via(&(struct store_writer){ writer_refuses, NULL }, s, &w);
	ck_assert_int_eq(c.done, 1);
	ck_assert_uint_eq(store_write_settle(s), 1);
	ck_assert_int_eq(c.written, 2);
	ck_assert_int_eq(c.done, 2);
	ck_assert_uint_eq(store_write_settle(s), 0);
	/* taken: the writer calls it later */
	store_write_via(&(struct store_writer){ writer_takes, NULL }, s, &w);
	ck_assert_int_eq(c.written, 2);
	ck_assert_ptr_eq(taken.data, &c);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM profile_runs WHERE state = 'done' AND samples = 1"), 2);

	/* as the writer thread makes it: in a group, stored by the group's commit and its one sync */
	syncs = 0;
	ck_assert_int_eq(store_group_begin(s, &err), 0);
	ck_assert_int_eq(taken.write(s, taken.data, &err), 0);
	ck_assert_int_eq(syncs, 0);
	ck_assert_int_eq(store_group_commit(s, &committed, &err), 0);
	ck_assert_int_eq(syncs, 2);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM profile_runs WHERE state = 'done' AND samples = 1"), 3);
	/* a group rolled back leaves nothing of it, the run's row included */
	ck_assert_int_eq(store_group_begin(s, &err), 0);
	ck_assert_int_eq(taken.write(s, taken.data, &err), 0);
	store_close(s); /* closing rolls the open transaction back */
	ck_assert_int_eq(raw_int("SELECT count(*) FROM profile_runs"), 3);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM samples"), 3);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

/* A database whose last pages are damaged is refused with a message that names the file and
 * says what to do, instead of being served in part. */
START_TEST(damaged_database_is_refused)
{
	struct store *s;
	struct pim_error err = { 0 };
	bool replaced;

	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	for (int i = 0; i < 60; i++) {
		char name[16];
		snprintf(name, sizeof name, "m%02d", i);
		Pim__Manifest *m = manifest(name, 8);
		ck_assert_int_eq(rpc_model_put(s, m, 0, false, &replaced, NULL, &err), 0);
		pim__manifest__free_unpacked(m, NULL);
	}
	store_close(s); /* checkpoints the WAL into the file */
	ck_assert_int_eq(raw_int("SELECT count(*) FROM models"), 60);
	int pages = raw_int("PRAGMA page_count"), psize = raw_int("PRAGMA page_size");
	ck_assert_int_gt(pages, 4);

	/* overwrite the last two pages with garbage */
	FILE *f = fopen(path, "r+b");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fseek(f, (long)(pages - 2) * psize, SEEK_SET), 0);
	for (int i = 0; i < 2 * psize; i++)
		fputc((i * 131 + 7) & 0xff, f);
	ck_assert_int_eq(fclose(f), 0);

	err = (struct pim_error){ 0 };
	ck_assert_int_eq(store_open(path, 1000, &s, &err), -EUCLEAN);
	ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "the database is damaged") &&
		      strstr(err.msg, "move the file aside"), "%s", err.msg);

	/* a file that is not a database at all */
	f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	for (int i = 0; i < 8192; i++)
		fputc(i & 0xff, f);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_int_eq(store_open(path, 1000, &s, &err), -EUCLEAN);
	ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "move the file aside"), "%s", err.msg);
}
END_TEST

/* The reserve for removals on a full file system: allocated beside the database; a store
 * without room for it still works and says so. */
START_TEST(reserve_beside_the_database)
{
	struct store *s;
	struct pim_error err = { 0 };
	char reserve[160];
	struct stat st;

	snprintf(reserve, sizeof reserve, "%s-reserve", path);
	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	ck_assert(store_reserve_held(s));
	ck_assert_int_eq(stat(reserve, &st), 0);
	ck_assert_int_eq(st.st_size, STORE_RESERVE_BYTES);
	ck_assert_int_ge((long long)st.st_blocks * 512, STORE_RESERVE_BYTES); /* allocated, not sparse */
	ck_assert_int_eq(st.st_mode & 0777, 0600);
	store_close(s);
	ck_assert_int_eq(unlink(reserve), 0);
	ck_assert_int_eq(mkdir(reserve, 0700), 0);
	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	ck_assert(!store_reserve_held(s));
	unsigned n = 9;
	ck_assert_int_eq(store_model_count(s, &n, &err), 0);
	ck_assert_uint_eq(n, 0);
	store_close(s);
}
END_TEST

/* The steps of read_only_database_is_refused, as a user the file mode binds; 0, or the failed
 * step with its message in msg. */
static int read_only_steps(char *msg, size_t len)
{
	struct store *s, *s2;
	struct pim_error err = { 0 };
	bool replaced;
	int step = 0;
#define STEP(cond)                                                                   \
	do {                                                                         \
		step++;                                                              \
		if (!(cond)) {                                                       \
			snprintf(msg, len, "step %d: %s", step, err.msg);            \
			return step;                                                 \
		}                                                                    \
	} while (0)

	STEP(store_open(path, 1000, &s, &err) == 0);
	/* 0444 while pimd runs: a new connection (a thread's first) is refused, not opened
	 * read-only for good */
	STEP(chmod(path, 0444) == 0);
	STEP(store_open_again(s, 1000, &s2, &err) == -EROFS);
	STEP(strstr(err.msg, "read-only database") && strstr(err.msg, path));
	STEP(store_open(path, 1000, &s2, &err) == -EROFS);
	/* writable again: the next connection writes */
	STEP(chmod(path, 0644) == 0);
	STEP(store_open_again(s, 1000, &s2, &err) == 0);
	STEP(!store_found_readonly(s2));
	Pim__Manifest *m = manifest("after", 2);
	STEP(rpc_model_put(s2, m, getuid(), false, &replaced, NULL, &err) == 0);
	pim__manifest__free_unpacked(m, NULL);
	store_close(s2);
	store_close(s);
	return 0;
#undef STEP
}

/* A database that is read-only when a connection opens: refused (SQLite would open it
 * read-only, silently, for as long as the connection lives), and opened once writable. */
START_TEST(read_only_database_is_refused)
{
	char msg[600] = "";
	int fds[2];
	ck_assert_int_eq(pipe(fds), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(fds[0]);
		/* root writes a 0444 file anyway: the steps run as nobody */
		if (geteuid() == 0 && (chown(dir, 65534, 65534) < 0 || setgroups(0, NULL) < 0 ||
				       setresgid(65534, 65534, 65534) < 0 ||
				       setresuid(65534, 65534, 65534) < 0))
			_exit(99);
		int r = read_only_steps(msg, sizeof msg);
		if (write(fds[1], msg, strlen(msg)) < 0)
			r = 98;
		_exit(r);
	}
	close(fds[1]);
	ssize_t n = read(fds[0], msg, sizeof msg - 1);
	msg[n > 0 ? n : 0] = 0;
	close(fds[0]);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit %d: %s",
		      WIFEXITED(status) ? WEXITSTATUS(status) : -1, msg);
}
END_TEST

/* A connection whose writes fail for a read-only database (SQLITE_READONLY, here from
 * query_only) says so, not "permission denied", and is opened again. */
START_TEST(connection_found_read_only_reconnects)
{
	struct store *s;
	struct pim_error err = { 0 };
	bool replaced;

	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	ck_assert(!store_found_readonly(s));
	ck_assert_int_eq(sqlite3_exec(s->db, "PRAGMA query_only = ON", NULL, NULL, NULL), SQLITE_OK);
	Pim__Manifest *m = manifest("moved", 2);
	int r = rpc_model_put(s, m, 0, false, &replaced, NULL, &err);
	ck_assert_msg(r == -EROFS, "%d %s", r, err.msg);
	ck_assert_msg(strstr(err.msg, "read-only database"), "%s", err.msg);
	ck_assert(store_found_readonly(s));
	ck_assert_msg(store_reconnect(s, &err) == 0, "%s", err.msg);
	ck_assert(!store_found_readonly(s));
	ck_assert_msg(rpc_model_put(s, m, 0, false, &replaced, NULL, &err) == 0, "%s", err.msg);
	unsigned n = 0;
	ck_assert_int_eq(store_model_count(s, &n, &err), 0);
	ck_assert_uint_eq(n, 1);
	pim__manifest__free_unpacked(m, NULL);
	store_close(s);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM models WHERE name = 'moved'"), 1);
}
END_TEST

/* StrictModes: a state directory or database another user can write or own, and a database
 * that is a symbolic link, are refused; what pimd made itself is trusted. */
START_TEST(untrusted_state_directory_is_refused)
{
	struct pim_error err = { 0 };
	struct store *s;
	char link[200], other[200];
	uid_t me = geteuid();

	ck_assert_msg(store_check_trust(dir, path, me, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	store_close(s);
	ck_assert_msg(store_check_trust(dir, path, me, &err) == 0, "%s", err.msg);

	ck_assert_int_eq(chmod(dir, 0777), 0);
	ck_assert_int_eq(store_check_trust(dir, path, me, &err), -EPERM);
	ck_assert_msg(strstr(err.msg, "state directory") && strstr(err.msg, "writable by others") &&
		      strstr(err.msg, "mode 0777"), "%s", err.msg);
	ck_assert_int_eq(chmod(dir, 0770), 0);
	ck_assert_int_eq(store_check_trust(dir, path, me, &err), -EPERM);
	ck_assert_msg(strstr(err.msg, "writable by its group"), "%s", err.msg);
	ck_assert_int_eq(chmod(dir, 0750), 0); /* StateDirectoryMode=0750 */
	ck_assert_msg(store_check_trust(dir, path, me, &err) == 0, "%s", err.msg);

	ck_assert_int_eq(chmod(path, 0666), 0);
	ck_assert_int_eq(store_check_trust(dir, path, me, &err), -EPERM);
	ck_assert_msg(strstr(err.msg, "database file") && strstr(err.msg, "writable by others"), "%s",
		      err.msg);
	ck_assert_int_eq(chmod(path, 0600), 0);

	/* owned by another user (root may own it: it is trusted anyway) */
	if (me == 0) {
		ck_assert_int_eq(chown(path, 65534, 65534), 0);
		ck_assert_int_eq(store_check_trust(dir, path, 0, &err), -EPERM);
		ck_assert_int_eq(chown(path, 0, 0), 0);
	} else
		ck_assert_int_eq(store_check_trust(dir, path, me + 1, &err), -EPERM);
	ck_assert_msg(strstr(err.msg, "belongs to uid") && strstr(err.msg, "not to pimd's user"), "%s",
		      err.msg);

	/* the database or its write-ahead log as a link, to a file or to nothing */
	snprintf(other, sizeof other, "%s/elsewhere.db", dir);
	snprintf(link, sizeof link, "%s-wal", path);
	unlink(link);
	ck_assert_int_eq(symlink(other, link), 0);
	ck_assert_int_eq(store_check_trust(dir, path, me, &err), -ELOOP);
	ck_assert_msg(strstr(err.msg, "is a symbolic link"), "%s", err.msg);
	ck_assert_int_eq(unlink(link), 0);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(symlink(other, path), 0);
	ck_assert_int_eq(store_check_trust(dir, path, me, &err), -ELOOP);
	/* and opening through it writes nothing there */
	ck_assert_int_lt(store_open(path, 1000, &s, &err), 0);
	ck_assert_int_eq(access(other, F_OK), -1);
}
END_TEST

/* Metrics from the catalogue go in STORE_FETCHED_ROWS to a statement; a row of a region the
 * model lacks is left out and the others of its statement are kept; nothing of a lookup that is
 * not kept stays. */
START_TEST(fetched_metrics_many_to_a_statement)
{
	const size_t n = 200;
	struct store *s;
	struct pim_error err = { 0 };
	bool replaced;
	size_t missing;
	Pim__Manifest *m = large("fetched", n);
	struct store_platform pf = { .name = "test cpu / none", .cpu_model = "test cpu", .pmu = "none",
				     .kernel = "6.1" };
	struct store_metrics rows[200];
	const struct store_metrics *ptr[200];
	int64_t pid, mid;

	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	ck_assert_int_eq(store_platform_ensure(s, &pf, &pid, &err), 0);
	ck_assert_msg(rpc_model_put(s, m, 0, false, &replaced, NULL, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(store_model_id(s, "fetched", &mid, &err), 0);
	for (size_t i = 0; i < n; i++) {
		rows[i] = (struct store_metrics){ 0 };
		rows[i].region_id = (uint32_t)i;
		rows[i].evidence = PL_EVIDENCE_COUNTERS;
		rows[i].t_host = 1e-3 * (double)(i + 1);
		rows[i].origin_host = "host-a";
		rows[i].origin_backend = "counters";
		rows[i].source = "fleet catalogue: host host-a, counters backend";
		ptr[i] = &rows[i];
	}
	rows[70].region_id = 5000; /* in the second statement of 64 */

	/* not kept: nothing stays */
	ck_assert_int_eq(store_fetched_begin(s, &err), 0);
	ck_assert_int_eq(store_fetched_put_many(s, mid, pid, ptr, n, &missing, &err), 0);
	ck_assert_int_eq(store_fetched_end(s, mid, false, &err), 0);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM metrics"), 0);

	/* a row not valid: refused before anything of the call is stored */
	rows[130].t_host = 0;
	ck_assert_int_eq(store_fetched_begin(s, &err), 0);
	ck_assert_int_eq(store_fetched_put_many(s, mid, pid, ptr, n, &missing, &err), -EINVAL);
	ck_assert_int_eq(store_fetched_end(s, mid, false, &err), 0);
	rows[130].t_host = 1e-3 * 131;

	/* kept: all but the missing region, in two calls (the second's rows too few for a
	 * statement of many) */
	ck_assert_int_eq(store_fetched_begin(s, &err), 0);
	ck_assert_int_eq(store_fetched_put_many(s, mid, pid, ptr, 150, &missing, &err), 0);
	ck_assert_uint_eq(missing, 1);
	ck_assert_int_eq(store_fetched_put_many(s, mid, pid, ptr + 150, n - 150, &missing, &err), 0);
	ck_assert_uint_eq(missing, 0);
	ck_assert_int_eq(store_fetched_end(s, mid, true, &err), 0);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM metrics WHERE origin_host = 'host-a' AND "
				 "origin_backend = 'counters'"), (int)n - 1);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM metrics WHERE region_id = 70"), 0);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM metrics WHERE abs(t_host - 1e-3 * (region_id + 1)) < 1e-12"),
			 (int)n - 1);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM metrics WHERE region_id = 199 AND evidence = 'counters' AND "
				 "source = 'fleet catalogue: host host-a, counters backend'"), 1);

	/* kept again, the version as committed said: a new one, the model's now */
	int64_t before, committed, now;
	ck_assert_int_eq(store_model_version(s, mid, &before, &err), 0);
	ck_assert_int_eq(store_fetched_begin(s, &err), 0);
	ck_assert_int_eq(store_fetched_put_many(s, mid, pid, ptr, 10, &missing, &err), 0);
	ck_assert_int_eq(store_fetched_end_version(s, mid, true, &committed, &err), 0);
	ck_assert_int_eq(store_model_version(s, mid, &now, &err), 0);
	ck_assert_int_gt(committed, before);
	ck_assert_int_eq(committed, now);
	store_close(s);
	large_free(m);
}
END_TEST

/* ---------------------------------------------------------------- the event loop's guard */

static int guard_probe(struct store *s, void *data, struct pim_error *err)
{
	int64_t id;
	return store_model_id(s, "none", &id, err) == -ENOENT ? 0 : -EIO;
}

static void guard_probe_done(void *data, int r, const struct pim_error *err)
{
	ck_assert_int_eq(r, 0);
	(*(int *)data)++;
}

static void *guard_other_thread(void *data)
{
	int64_t id;
	struct pim_error err = { 0 };
	ck_assert_int_eq(store_model_id(data, "none", &id, &err), -ENOENT);
	return NULL;
}

/* What pimd's event loop is held to (store_guard_thread): every statement run on the guarded
 * thread counts, named; another thread's do not, nor the changes store_write_settle writes
 * there because no writer took them; and nothing once the guard is off. */
START_TEST(guard_counts_the_guarded_thread)
{
	struct store *s, *t;
	struct pim_error err = { 0 };
	const char *sql;
	int64_t id;
	int done = 0;
	pthread_t other;

	ck_assert_int_eq(store_open(path, 1000, &s, &err), 0);
	ck_assert_int_eq(store_open_again(s, 1000, &t, &err), 0);
	unsigned long n = store_guard_count(NULL);
	store_guard_thread(true);
	ck_assert_int_eq(store_model_id(s, "none", &id, &err), -ENOENT);
	ck_assert_uint_eq(store_guard_count(&sql), n + 1);
	ck_assert_msg(strstr(sql, "FROM models"), "%s", sql);
	ck_assert_int_eq(store_model_id(t, "none", &id, &err), -ENOENT); /* any connection */
	ck_assert_uint_eq(store_guard_count(NULL), n + 2);
	ck_assert_int_eq(pthread_create(&other, NULL, guard_other_thread, t), 0);
	ck_assert_int_eq(pthread_join(other, NULL), 0);
	ck_assert_uint_eq(store_guard_count(NULL), n + 2);
	struct store_write w = { guard_probe, guard_probe_done, &done, NULL, NULL };
	store_write_via(NULL, s, &w);
	ck_assert_uint_eq(store_write_settle(s), 1);
	ck_assert_int_eq(done, 1);
	ck_assert_uint_eq(store_guard_count(NULL), n + 2);
	store_guard_thread(false);
	ck_assert_int_eq(store_model_id(s, "none", &id, &err), -ENOENT);
	ck_assert_uint_eq(store_guard_count(NULL), n + 2);
	store_close(t);
	store_close(s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store");
	TCase *tc = test_case(s, "store");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, fresh_database_is_migrated);
	tcase_add_test(tc, newer_database_is_refused);
	tcase_add_test(tc, failed_migration_rolls_back);
	tcase_add_test(tc, cancelled_runs_migrated);
	tcase_add_test(tc, rows_by_model_migrated);
	tcase_add_test(tc, operands_in_regions_migrated);
	tcase_add_test(tc, operands_text);
	tcase_add_test(tc, models_round_trip);
	tcase_add_test(tc, commits_are_counted);
	tcase_add_test(tc, model_walk_in_program_order);
	tcase_add_test(tc, content_hash_is_pinned);
	tcase_add_test(tc, failed_put_leaves_nothing);
	tcase_add_test(tc, large_models_in_parts);
	tcase_add_test(tc, metrics_and_decisions);
	tcase_add_test(tc, fetched_metrics_many_to_a_statement);
	tcase_add_test(tc, model_versions_and_a_second_connection);
	tcase_add_test(tc, run_ids_stay_unique);
	tcase_add_test(tc, acknowledged_writes_are_synced);
	tcase_add_test(tc, many_samples_removed_in_parts);
	tcase_add_test(tc, samples_from_a_region_on);
	tcase_add_test(tc, commit_during_a_file_system_failure_is_not_acknowledged);
	tcase_add_test(tc, group_of_changes_commits_once);
	tcase_add_test(tc, changes_handed_to_a_writer);
	tcase_add_test(tc, damaged_database_is_refused);
	tcase_add_test(tc, reserve_beside_the_database);
	tcase_add_test(tc, read_only_database_is_refused);
	tcase_add_test(tc, connection_found_read_only_reconnects);
	tcase_add_test(tc, untrusted_state_directory_is_refused);
	tcase_add_test(tc, guard_counts_the_guarded_thread);
	return test_run_suite(s);
}
