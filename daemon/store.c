/* SPDX-License-Identifier: MIT */
#include "store.h"

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sha256.h"
#include "sys.h"

enum stmt_id {
	ST_BEGIN,
	ST_BEGIN_READ,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_SAVEPOINT,
	ST_RELEASE,
	ST_ROLLBACK_TO,
	ST_MODEL_FIND,
	ST_MODEL_INSERT,
	ST_MODEL_DELETE,
	ST_MODEL_LIST,
	ST_MODEL_COUNT,
	ST_MODEL_STAGE,
	ST_MODEL_UNSTAGE,
	ST_MODEL_STAGED,
	ST_REGIONS_DELETE_SOME,
	ST_ALLOCS_DELETE_SOME,
	ST_ALLOC_INSERT,
	ST_REGION_INSERT,
	ST_OPERAND_INSERT,
	ST_ALLOC_SELECT,
	ST_REGION_SELECT,
	ST_OPERAND_SELECT,
	ST_REGION_SELECT_BY_ID,
	ST_SAMPLES_DELETE_SOME,
	ST_SAMPLES_MORE_THAN,
	ST_OPERAND_SELECT_BY_ID,
	ST_PLATFORM_FIND,
	ST_PLATFORM_INSERT,
	ST_PLATFORM_UPDATE,
	ST_PLATFORM_SET_B_CPU,
	ST_MODEL_ID,
	ST_MODEL_VERSION,
	ST_REGION_EXISTS,
	ST_METRICS_UPSERT,
	ST_METRICS_SELECT,
	ST_DECISIONS_DELETE,
	ST_DECISION_SELECT,
	ST_DECISION_UPSERT,
	ST_DECISIONS_TRIM,
	ST_RUN_INSERT,
	ST_RUN_UPDATE,
	ST_SAMPLE_INSERT,
	ST_RUN_ADD_SAMPLES,
	ST_RUN_SELECT,
	ST_RUNS_ABANDON,
	ST_SAMPLES_SELECT,
	ST_MODEL_HASH_GET,
	ST_MODEL_HASH_SET,
	ST_MODEL_MEASURED,
	ST_OUTBOX_ADD_RUN,
	ST_OUTBOX_ADD_IMPORT,
	ST_OUTBOX_NEXT,
	ST_OUTBOX_DELETE,
	ST_OUTBOX_FAIL,
	ST_OUTBOX_ATTEMPT,
	ST_OUTBOX_DEPTH,
	ST_METRICS_FETCHED,
	ST_METRICS_FETCHED_MANY,
	ST_VERSION_BUMP,
	ST_MODEL_VERSION_SET,
	ST__MAX
};

/* One row of ST_METRICS_FETCHED_MANY's values (18 parameters, numbered in order), and 64 */
#define FETCHED_V "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
#define FETCHED_V4 FETCHED_V ", " FETCHED_V ", " FETCHED_V ", " FETCHED_V
#define FETCHED_V16 FETCHED_V4 ", " FETCHED_V4 ", " FETCHED_V4 ", " FETCHED_V4
#define FETCHED_V64 FETCHED_V16 ", " FETCHED_V16 ", " FETCHED_V16 ", " FETCHED_V16
#define FETCHED_COLUMNS 18
_Static_assert(STORE_FETCHED_ROWS == 64, "FETCHED_V64 has STORE_FETCHED_ROWS rows");

static const char *const stmt_sql[ST__MAX] = {
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_BEGIN_READ] = "BEGIN",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	/* one change of a group (store_group_begin) */
	[ST_SAVEPOINT] = "SAVEPOINT change",
	[ST_RELEASE] = "RELEASE change",
	[ST_ROLLBACK_TO] = "ROLLBACK TO change",
	[ST_MODEL_FIND] = "SELECT id, name, source, owner_uid, loaded_at, n_regions, n_allocations, "
			  "allocation_bytes FROM models WHERE name = ?1 AND staging = 0",
	[ST_MODEL_INSERT] = "INSERT INTO models (name, source, owner_uid, loaded_at, n_regions, "
			    "n_allocations, allocation_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
	[ST_MODEL_DELETE] = "DELETE FROM models WHERE id = ?1",
	[ST_MODEL_LIST] = "SELECT id, name, source, owner_uid, loaded_at, n_regions, n_allocations, "
			  "allocation_bytes FROM models WHERE staging = 0 ORDER BY name",
	[ST_MODEL_COUNT] = "SELECT count(*) FROM models WHERE staging = 0",
	/* sql/0006-model-staging.sql */
	[ST_MODEL_STAGE] = "UPDATE models SET staging = 1, name = ' staging ' || id WHERE id = ?1",
	[ST_MODEL_UNSTAGE] = "UPDATE models SET staging = 0, name = ?2 WHERE id = ?1",
	[ST_MODEL_STAGED] = "SELECT id FROM models WHERE staging = 1 LIMIT 1",
	[ST_REGIONS_DELETE_SOME] = "DELETE FROM regions WHERE model_id = ?1 AND region_id IN "
				   "(SELECT region_id FROM regions WHERE model_id = ?1 LIMIT ?2)",
	[ST_ALLOCS_DELETE_SOME] = "DELETE FROM allocations WHERE model_id = ?1 AND alloc_id IN "
				  "(SELECT alloc_id FROM allocations WHERE model_id = ?1 LIMIT ?2)",
	[ST_SAMPLES_DELETE_SOME] = "DELETE FROM samples WHERE (run_id, region_id, grp, rep) IN "
				   "(SELECT s.run_id, s.region_id, s.grp, s.rep FROM samples s JOIN profile_runs r "
				   "ON r.id = s.run_id WHERE r.model_id = ?1 LIMIT ?2)",
	[ST_SAMPLES_MORE_THAN] = "SELECT 1 FROM samples s JOIN profile_runs r ON r.id = s.run_id "
				 "WHERE r.model_id = ?1 LIMIT 1 OFFSET ?2",
	[ST_ALLOC_INSERT] = "INSERT INTO allocations (model_id, alloc_id, bytes, kind, name) "
			    "VALUES (?1, ?2, ?3, ?4, ?5)",
	[ST_REGION_INSERT] = "INSERT INTO regions (model_id, region_id, name, op, ord, n_par, n_total, "
			     "trip, parallel_extents, reduction_extents, location) "
			     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
	[ST_OPERAND_INSERT] = "INSERT INTO operands (model_id, region_id, idx, alloc_id, bytes, "
			      "elem_type, elem_bits, role) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
	[ST_ALLOC_SELECT] = "SELECT alloc_id, bytes, kind, name FROM allocations WHERE model_id = ?1 "
			    "ORDER BY alloc_id",
	[ST_REGION_SELECT] = "SELECT region_id, name, op, ord, n_par, n_total, trip, parallel_extents, "
			     "reduction_extents, location FROM regions WHERE model_id = ?1 ORDER BY ord",
	[ST_OPERAND_SELECT] = "SELECT r.ord, o.alloc_id, o.bytes, o.elem_type, o.elem_bits, o.role "
			      "FROM operands o JOIN regions r ON r.model_id = o.model_id AND "
			      "r.region_id = o.region_id WHERE o.model_id = ?1 ORDER BY r.ord, o.idx",
	[ST_REGION_SELECT_BY_ID] = "SELECT region_id, name, op, ord, n_par, n_total, trip, parallel_extents, "
				   "reduction_extents, location FROM regions WHERE model_id = ?1 "
				   "ORDER BY region_id",
	[ST_OPERAND_SELECT_BY_ID] = "SELECT region_id, alloc_id, bytes, elem_type, elem_bits, role FROM operands "
				    "WHERE model_id = ?1 ORDER BY region_id, idx",
	[ST_PLATFORM_FIND] = "SELECT id, b_cpu, b_cpu_spread, b_cpu_method, b_cpu_measured_at, b_cpu_busy, "
			     "b_cpu_load, b_cpu_host FROM platforms WHERE name = ?1",
	[ST_PLATFORM_INSERT] = "INSERT INTO platforms (name, cpu_model, pmu, kernel, created_at) "
			       "VALUES (?1, ?2, ?3, ?4, ?5)",
	[ST_PLATFORM_UPDATE] = "UPDATE platforms SET kernel = ?2 WHERE id = ?1",
	[ST_PLATFORM_SET_B_CPU] = "UPDATE platforms SET b_cpu = ?2, b_cpu_spread = ?3, b_cpu_method = ?4, "
				  "b_cpu_measured_at = ?5, b_cpu_busy = ?6, b_cpu_load = ?7, b_cpu_host = ?8 "
				  "WHERE id = ?1",
	[ST_MODEL_ID] = "SELECT id FROM models WHERE name = ?1 AND staging = 0",
	[ST_MODEL_VERSION] = "SELECT version FROM models WHERE id = ?1",
	[ST_REGION_EXISTS] = "SELECT 1 FROM regions WHERE model_id = ?1 AND region_id = ?2",
	[ST_METRICS_UPSERT] = "INSERT OR REPLACE INTO metrics (model_id, region_id, platform_id, run_id, "
			      "evidence, t_host, t_host_spread, n_rd, c_store, c_be1, c_be2, c_be3, "
			      "bw_read_estimate, source, updated_at, source_b_cpu, origin_host, origin_measured_at, "
			      "origin_backend) VALUES (?1, ?2, ?3, ?4, "
			      "?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
	[ST_METRICS_SELECT] = "SELECT region_id, evidence, t_host, t_host_spread, n_rd, c_store, c_be1, "
			      "c_be2, c_be3, bw_read_estimate, source, updated_at, source_b_cpu, origin_host, "
			      "origin_measured_at, origin_backend FROM metrics "
			      "WHERE model_id = ?1 AND platform_id = ?2 ORDER BY region_id",
	[ST_DECISIONS_DELETE] = "DELETE FROM decisions WHERE model_id = ?1",
	[ST_DECISION_SELECT] = "SELECT reply FROM decisions WHERE model_id = ?1 AND platform_id = ?2 "
			       "AND params_key = ?3",
	[ST_DECISION_UPSERT] = "INSERT OR REPLACE INTO decisions (model_id, platform_id, params_key, reply, "
			       "created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
	/* keep the STORE_DECISIONS_PER_MODEL newest answers of a model on a platform */
	[ST_DECISIONS_TRIM] = "DELETE FROM decisions WHERE model_id = ?1 AND platform_id = ?2 AND params_key "
			      "NOT IN (SELECT params_key FROM decisions WHERE model_id = ?1 AND platform_id = ?2 "
			      "ORDER BY created_at DESC, params_key LIMIT ?3)",
	/* Ids above every id ever given (sql/0003-run-ids.sql), not max(id) + 1. */
	[ST_RUN_INSERT] = "INSERT INTO profile_runs (id, model_id, platform_id, owner_uid, backend, state, "
			  "warmup, repetitions, regions_total, created_at) VALUES ((SELECT id + 1 FROM "
			  "run_id_high), ?1, ?2, ?3, 'pending', 'queued', ?4, ?5, ?6, ?7)",
	[ST_RUN_UPDATE] = "UPDATE profile_runs SET state = coalesce(?2, state), backend = coalesce(?3, backend), "
			  "backend_reason = coalesce(?4, backend_reason), message = coalesce(?5, message), "
			  "worker_uid = coalesce(?6, worker_uid), regions_done = coalesce(?7, regions_done), "
			  "repetitions_done = coalesce(?8, repetitions_done), "
			  "repetitions_total = coalesce(?9, repetitions_total), "
			  "finished_at = CASE WHEN ?10 THEN ?11 ELSE finished_at END WHERE id = ?1",
	[ST_SAMPLE_INSERT] = "INSERT OR REPLACE INTO samples (run_id, region_id, grp, rep, executions, time_ns, "
			     "time_enabled, time_running, n_values, values_blob) "
			     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
	[ST_RUN_ADD_SAMPLES] = "UPDATE profile_runs SET samples = samples + ?2 WHERE id = ?1",
	[ST_RUN_SELECT] = "SELECT r.id, r.state, m.name, r.backend, r.backend_reason, r.regions_done, "
			  "r.regions_total, r.repetitions_done, r.repetitions_total, r.samples, r.message, "
			  "coalesce(r.worker_uid, r.owner_uid), r.created_at, coalesce(r.finished_at, 0) "
			  "FROM profile_runs r JOIN models m ON m.id = r.model_id WHERE r.id = ?1",
	[ST_RUNS_ABANDON] = "UPDATE profile_runs SET state = 'failed', finished_at = ?1, message = "
			    "'pimd stopped before the job finished; run it again' "
			    "WHERE state IN ('queued', 'running')",
	[ST_SAMPLES_SELECT] = "SELECT region_id, grp, rep, executions, time_ns, time_enabled, time_running, "
			      "n_values, values_blob FROM samples WHERE run_id = ?1 AND region_id >= ?2 "
			      "ORDER BY region_id, grp, rep",
	/* sql/0010-catalogue-outbox.sql */
	[ST_MODEL_HASH_GET] = "SELECT content_hash FROM models WHERE id = ?1",
	[ST_MODEL_HASH_SET] = "UPDATE models SET content_hash = ?2 WHERE id = ?1",
	[ST_MODEL_MEASURED] = "SELECT m.id, EXISTS (SELECT 1 FROM metrics x WHERE x.model_id = m.id AND "
			      "x.platform_id = ?2) FROM models m WHERE m.name = ?1 AND m.staging = 0",
	/* a snapshot of the run's metrics (JSON, sql/catalogue: region_metrics' columns) */
	[ST_OUTBOX_ADD_RUN] = "INSERT INTO catalogue_outbox (kind, publish_key, model_name, model_hash, regions, "
			      "platform_key, platform, uid, backend, measured_at, payload) "
			      "SELECT 'measured', 'run:' || r.id || ':' || r.created_at, m.name, ?2, m.n_regions, ?3, ?4, "
			      "r.owner_uid, ?5, ?6, json_object('summary', json_object('run', r.id, 'message', ?7, "
			      "'warmup', r.warmup, 'repetitions', r.repetitions, 'regions_measured', ?8, "
			      "'regions_total', r.regions_total, 'samples', r.samples), 'metrics', "
			      "(SELECT json_group_array(json_object('region_id', x.region_id, 'evidence', x.evidence, "
			      "'t_host', x.t_host, 't_host_spread', x.t_host_spread, 'n_rd', x.n_rd, 'c_store', "
			      "x.c_store, 'c_be1', x.c_be1, 'c_be2', x.c_be2, 'c_be3', x.c_be3, 'bw_read_estimate', "
			      "x.bw_read_estimate, 'source_b_cpu', x.source_b_cpu)) FROM metrics x WHERE x.run_id = r.id)) "
			      "FROM profile_runs r JOIN models m ON m.id = r.model_id WHERE r.id = ?1",
	[ST_OUTBOX_ADD_IMPORT] = "INSERT INTO catalogue_outbox (kind, publish_key, model_name, model_hash, regions, "
				 "platform_key, platform, uid, backend, measured_at, payload) "
				 "SELECT 'imported', 'import:' || ?1 || ':' || ?2 || ':' || ?9, m.name, ?4, m.n_regions, "
				 "?5, ?6, ?7, 'imported', ?8, json_object('summary', json_object('source', x.source, "
				 "'region_id', x.region_id), 'metrics', json_array(json_object('region_id', x.region_id, "
				 "'evidence', x.evidence, 't_host', x.t_host, 't_host_spread', x.t_host_spread, 'n_rd', "
				 "x.n_rd, 'c_store', x.c_store, 'c_be1', x.c_be1, 'c_be2', x.c_be2, 'c_be3', x.c_be3, "
				 "'bw_read_estimate', x.bw_read_estimate, 'source_b_cpu', x.source_b_cpu))) "
				 "FROM metrics x JOIN models m ON m.id = x.model_id WHERE x.model_id = ?1 AND "
				 "x.region_id = ?2 AND x.platform_id = ?3",
	[ST_OUTBOX_NEXT] = "SELECT id, kind, publish_key, model_name, model_hash, regions, platform_key, platform, "
			   "uid, backend, measured_at, payload FROM catalogue_outbox WHERE failed IS NULL "
			   "ORDER BY id LIMIT 1",
	[ST_OUTBOX_DELETE] = "DELETE FROM catalogue_outbox WHERE id = ?1",
	[ST_OUTBOX_FAIL] = "UPDATE catalogue_outbox SET failed = ?2 WHERE id = ?1",
	[ST_OUTBOX_ATTEMPT] = "UPDATE catalogue_outbox SET attempts = attempts + 1 WHERE id = ?1",
	/* metrics from the catalogue: a region the model lacks fails the foreign key */
	[ST_METRICS_FETCHED] = "INSERT OR REPLACE INTO metrics (model_id, region_id, platform_id, evidence, t_host, "
			       "t_host_spread, n_rd, c_store, c_be1, c_be2, c_be3, bw_read_estimate, source, updated_at, "
			       "source_b_cpu, origin_host, origin_measured_at, origin_backend) VALUES (?1, ?2, ?3, ?4, "
			       "?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
	/* STORE_FETCHED_ROWS of them in one statement: a statement's own work (its start, its
	 * statement journal, its end) once per 64 rows, not per row */
	[ST_METRICS_FETCHED_MANY] = "INSERT OR REPLACE INTO metrics (model_id, region_id, platform_id, evidence, "
				    "t_host, t_host_spread, n_rd, c_store, c_be1, c_be2, c_be3, bw_read_estimate, "
				    "source, updated_at, source_b_cpu, origin_host, origin_measured_at, "
				    "origin_backend) VALUES " FETCHED_V64,
	/* the metrics_version trigger's work, once for all rows fetched (sql/0010) */
	[ST_VERSION_BUMP] = "UPDATE model_version_high SET n = n + 1",
	[ST_MODEL_VERSION_SET] = "UPDATE models SET version = (SELECT n FROM model_version_high) WHERE id = ?1",
	[ST_OUTBOX_DEPTH] = "SELECT count(*) FILTER (WHERE failed IS NULL), count(*) FILTER (WHERE failed IS NOT NULL) "
			    "FROM catalogue_outbox",
};

/*
 * What the connections of one pimd to its database share (store_open and store_open_again):
 * when one of them last waited for the write lock, and which.  SQLite's own busy handler backs
 * off to 100 ms sleeps, and a writer that commits a part and begins the next at once
 * (model_put_parts) would take the lock again before such a sleeper wakes: the sleeper could wait
 * for the whole model.  So waiters poll each millisecond (busy_wait), and a writer of parts lets
 * a waiter in between two parts (part_yield).
 */
struct store_shared {
	atomic_uint refs;
	_Atomic uint64_t waited_ns;   /* now_ns() of the last poll of a waiting connection */
	_Atomic(const struct store *) waiter;
};

struct store {
	sqlite3 *db;
	struct store_shared *shared;
	unsigned busy_timeout_ms;
	uint64_t busy_since_ns;
	char *path;
	char *reserve_path;  /* path + "-reserve" */
	bool reserve_held;   /* it holds STORE_RESERVE_BYTES */
	unsigned version;
	int models;  /* cached model count (-1: unknown); pimd is the only writer of its store */
	bool grouped; /* in a group of changes: each one is a savepoint (store_group_begin) */
	bool found_readonly; /* a statement failed with SQLITE_READONLY: store_reconnect */
	sqlite3_stmt *stmt[ST__MAX];
	/* changes no writer took (store_write_via), waiting for store_write_settle */
	struct store_write *later, **later_tail;
};

static int db_err(struct store *s, struct pim_error *err, const char *what)
{
	int code = sqlite3_extended_errcode(s->db);
	int e = (code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED ? -EBUSY
		: (code & 0xff) == SQLITE_FULL ? -ENOSPC
		: (code & 0xff) == SQLITE_CONSTRAINT ? -EINVAL
		: (code & 0xff) == SQLITE_READONLY || (code & 0xff) == SQLITE_PERM ? -EROFS
		: -EIO;
	if (e == -EROFS) {
		/* not a refusal of the client: the file, its directory or the file system */
		s->found_readonly = true;
		return err_set(err, e, "%s: %s: read-only database (%s); pimd needs to write the "
			       "database, its directory and its -wal and -shm files", s->path, what,
			       sqlite3_errmsg(s->db));
	}
	return err_set(err, e, "%s: %s: %s", s->path, what, sqlite3_errmsg(s->db));
}

static sqlite3_stmt *stmt_get(struct store *s, enum stmt_id id)
{
	sqlite3_stmt *st = s->stmt[id];
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return st;
}

static int exec_simple(struct store *s, enum stmt_id id, struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, id);
	int r = sqlite3_step(st);
	sqlite3_reset(st);
	if (r != SQLITE_DONE)
		return db_err(s, err, stmt_sql[id]);
	return 0;
}

/*
 * After a commit returned, asks the file system once more whether the write-ahead log is on
 * disk (fdatasync again; nothing is left to write, so it costs a device flush).  A commit whose
 * fsync was under way when the file system failed can be told it succeeded: ext4 (Linux 6.18
 * at least) answers an fsync whose journal transaction was closed by the abort without its
 * commit record as done (jbd2_complete_transaction finds the transaction no longer running
 * and does not look at the abort), so the log's last frames and the commit in them are gone
 * after the journal is replayed.  Any later fsync sees the failed file system and fails;
 * so a change is acknowledged only when this one succeeds.  pimd(8), DATABASE.
 */
static int sync_verify(struct store *s, struct pim_error *err)
{
	sqlite3_file *wal = NULL;

	if (sqlite3_file_control(s->db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal) != SQLITE_OK ||
	    !wal || !wal->pMethods)
		return 0; /* no log open: the commit wrote the database itself */
	int rc = wal->pMethods->xSync(wal, SQLITE_SYNC_NORMAL | SQLITE_SYNC_DATAONLY);
	if (rc != SQLITE_OK)
		return err_set(err, -EIO, "%s: the file system failed while the change was committed "
			       "(fsync: %s); it may not be stored: look at the system log, then ask "
			       "for it again", s->path, sqlite3_errstr(rc));
	return 0;
}

/* SQLite ended a group's transaction (an I/O error or a full disk in one of its changes). */
static int group_rolled_back(struct store *s, struct pim_error *err)
{
	return err_set(err, -EIO, "%s: a change written together with this one failed, and the "
		       "transaction of both was rolled back", s->path);
}

/* Begins a change: a transaction of its own, or a savepoint in a group. */
static int change_begin(struct store *s, struct pim_error *err)
{
	/* a savepoint outside a transaction would commit on its own at its release */
	if (s->grouped && sqlite3_get_autocommit(s->db))
		return group_rolled_back(s, err);
	return exec_simple(s, s->grouped ? ST_SAVEPOINT : ST_BEGIN, err);
}

/* COMMIT, acknowledged only once it is on disk (sync_verify); in a group, the change is kept
 * for the group's commit. */
static int commit_durable(struct store *s, struct pim_error *err)
{
	if (s->grouped)
		return exec_simple(s, ST_RELEASE, err);
	int r = exec_simple(s, ST_COMMIT, err);

	if (r == 0 && (r = sync_verify(s, err)) < 0)
		s->models = -1; /* committed here, whatever the disk holds */
	return r;
}

static void rollback(struct store *s)
{
	if (s->grouped) {
		/* the group goes on without this change (unless SQLite ended the transaction) */
		if (!sqlite3_get_autocommit(s->db) && exec_simple(s, ST_ROLLBACK_TO, NULL) == 0)
			exec_simple(s, ST_RELEASE, NULL);
	} else if (!sqlite3_get_autocommit(s->db))
		exec_simple(s, ST_ROLLBACK, NULL);
}

static int read_user_version(sqlite3 *db, unsigned *v)
{
	sqlite3_stmt *st;
	int r = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL);
	if (r != SQLITE_OK)
		return r;
	r = sqlite3_step(st);
	if (r == SQLITE_ROW) {
		*v = (unsigned)sqlite3_column_int(st, 0);
		r = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return r;
}

/* True (and *msg a description to sqlite3_free) when PRAGMA foreign_key_check finds a row
 * whose reference has no parent, or cannot run. */
static bool foreign_keys_broken(sqlite3 *db, char **msg)
{
	sqlite3_stmt *st;
	bool broken;

	if (sqlite3_prepare_v2(db, "PRAGMA foreign_key_check", -1, &st, NULL) != SQLITE_OK) {
		*msg = sqlite3_mprintf("PRAGMA foreign_key_check: %s", sqlite3_errmsg(db));
		return true;
	}
	int r = sqlite3_step(st);
	broken = r != SQLITE_DONE;
	if (r == SQLITE_ROW)
		*msg = sqlite3_mprintf("a row of table %s refers to a missing row of %s",
				       (const char *)sqlite3_column_text(st, 0),
				       (const char *)sqlite3_column_text(st, 2));
	else if (broken)
		*msg = sqlite3_mprintf("PRAGMA foreign_key_check: %s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return broken;
}

static int migrate(struct store *s, const struct store_migration *migs, unsigned n,
		   struct pim_error *err)
{
	unsigned v = 0;

	if (read_user_version(s->db, &v) != SQLITE_OK)
		return db_err(s, err, "reading PRAGMA user_version");
	if (v > n)
		return err_set(err, -EPROTONOSUPPORT, "%s: database schema version %u is newer than "
			       "this pimd knows (%u); use a newer pimd or another state directory",
			       s->path, v, n);
	/* Foreign keys off while migrations run (a table made again is dropped, and with them
	 * on, dropping it would delete the rows that reference it), checked before each commits. */
	if (v < n && sqlite3_exec(s->db, "PRAGMA foreign_keys = OFF", NULL, NULL, NULL) != SQLITE_OK)
		return db_err(s, err, "turning foreign keys off for the migrations");
	for (unsigned i = v; i < n; i++) {
		char *msg = NULL;
		char bump[64];
		if (migs[i].version != i + 1) {
			sqlite3_exec(s->db, "PRAGMA foreign_keys = ON", NULL, NULL, NULL);
			return err_set(err, -EINVAL, "migration %s has version %u, expected %u",
				       migs[i].name, migs[i].version, i + 1);
		}
		/* The migration and its version bump commit together or not at all. */
		if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, &msg) != SQLITE_OK)
			goto fail;
		if (sqlite3_exec(s->db, migs[i].sql, NULL, NULL, &msg) != SQLITE_OK)
			goto fail;
		if (foreign_keys_broken(s->db, &msg))
			goto fail;
		snprintf(bump, sizeof bump, "PRAGMA user_version = %u", i + 1);
		if (sqlite3_exec(s->db, bump, NULL, NULL, &msg) != SQLITE_OK)
			goto fail;
		if (sqlite3_exec(s->db, "COMMIT", NULL, NULL, &msg) != SQLITE_OK)
			goto fail;
		continue;
	fail:
		err_set(err, -EIO, "%s: migration %s failed: %s", s->path, migs[i].name,
			msg ? msg : sqlite3_errmsg(s->db));
		sqlite3_free(msg);
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		sqlite3_exec(s->db, "PRAGMA foreign_keys = ON", NULL, NULL, NULL);
		return err->code ? err->code : -EIO;
	}
	if (v < n && sqlite3_exec(s->db, "PRAGMA foreign_keys = ON", NULL, NULL, NULL) != SQLITE_OK)
		return db_err(s, err, "turning foreign keys on after the migrations");
	s->version = n;
	return 0;
}

/* ---------------------------------------------------------------- the reserve
 *
 * SQLite needs room to delete: the write-ahead log grows by every page a removal touches
 * before the pages are free in the database.  So that a model can be removed while the file
 * system is full, the store keeps STORE_RESERVE_BYTES allocated in a file beside the database
 * and gives them up for a removal that fails for lack of room (store_model_remove). */

static int reserve_fill(struct store *s)
{
	_cleanup_(closep) int fd = open(s->reserve_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	int r;

	if (fd < 0)
		return -errno;
	r = posix_fallocate(fd, 0, STORE_RESERVE_BYTES);
	if (r != 0) {
		/* all or nothing: a part would only be taken from what the database needs */
		if (ftruncate(fd, 0) < 0)
			return -errno;
		return -r;
	}
	s->reserve_held = true;
	return 0;
}

static void reserve_release(struct store *s)
{
	if (truncate(s->reserve_path, 0) == 0 || errno == ENOENT)
		s->reserve_held = false;
}

bool store_reserve_held(struct store *s) { return s->reserve_held; }

/* Opens the connection of s to path with the settings every connection has (pimd(8),
 * DATABASE); -EUCLEAN when the file is not a database or is damaged at its start. */
static int store_connect(struct store *s, const char *path, unsigned busy_timeout_ms,
			 struct pim_error *err)
{
	char *msg = NULL;
	int r;

	s->models = -1;
	s->path = strdup(path);
	if (!s->path || asprintf(&s->reserve_path, "%s-reserve", path) < 0)
		return err_set(err, -ENOMEM, "out of memory");
	/* NOFOLLOW: a symbolic link put in place of the database is refused, not written through
	 * (pimd(8), SECURITY). */
	r = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
			    SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE | SQLITE_OPEN_NOFOLLOW, NULL);
	if (r != SQLITE_OK)
		return s->db ? db_err(s, err, "opening the database")
			     : err_set(err, -ENOMEM, "out of memory opening %s", path);
	/* SQLITE_OPEN_READWRITE opens a file it may not write read-only, silently, and the
	 * connection would stay so after the file is writable again: refused instead, and the
	 * next connection is tried afresh (store_reconnect). */
	if (sqlite3_db_readonly(s->db, "main") == 1)
		return err_set(err, -EROFS, "%s: read-only database: pimd's user cannot write it (mode, "
			       "immutable attribute or read-only file system); make it writable for "
			       "pimd's user", path);
	store_set_busy_timeout(s, busy_timeout_ms);
	/* synchronous=FULL: in WAL mode every commit is fsync()ed before it returns, so what a
	 * client is told is stored survives an OS crash or a filesystem going read-only (NORMAL
	 * may lose the last commits there).  pimd(8), DATABASE. */
	if (sqlite3_exec(s->db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; "
			 "PRAGMA foreign_keys = ON;", NULL, NULL, &msg) != SQLITE_OK) {
		int code = sqlite3_errcode(s->db);
		if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT)
			r = err_set(err, -EUCLEAN, "%s: the database is damaged (%s)%s", path, msg,
				    STORE_DAMAGED_ADVICE);
		else
			r = err_set(err, -EIO, "%s: setting up the database: %s", path, msg);
		sqlite3_free(msg);
		return r;
	}
	return 0;
}

static int store_prepare(struct store *s, struct pim_error *err)
{
	for (int i = 0; i < ST__MAX; i++)
		if (sqlite3_prepare_v3(s->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &s->stmt[i],
				       NULL) != SQLITE_OK)
			/* Only reachable with a migration list that lacks the tables. */
			return db_err(s, err, "preparing statements");
	return 0;
}

int store_open_with(const char *path, unsigned busy_timeout_ms, const struct store_migration *migs,
		    unsigned n_migs, struct store **out, struct pim_error *err)
{
	struct store *s = calloc(1, sizeof *s);
	int r;

	if (s && !(s->shared = calloc(1, sizeof *s->shared))) {
		free(s);
		s = NULL;
	}
	if (!s)
		return err_set(err, -ENOMEM, "out of memory");
	atomic_init(&s->shared->refs, 1);
	if ((r = store_connect(s, path, busy_timeout_ms, err)) < 0 ||
	    (r = store_quick_check(s, err)) < 0 || (r = migrate(s, migs, n_migs, err)) < 0 ||
	    (r = store_prepare(s, err)) < 0) {
		store_close(s);
		return r;
	}
	/* Without room for the reserve the store still works; store_reserve_held tells. */
	(void)reserve_fill(s);
	*out = s;
	return 0;
}

int store_open_again(const struct store *first, unsigned busy_timeout_ms, struct store **out,
		     struct pim_error *err)
{
	struct store *s = calloc(1, sizeof *s);
	int r;

	if (!s)
		return err_set(err, -ENOMEM, "out of memory");
	s->shared = first->shared;
	atomic_fetch_add(&s->shared->refs, 1);
	s->version = first->version;
	s->reserve_held = first->reserve_held;
	if ((r = store_connect(s, first->path, busy_timeout_ms, err)) < 0 ||
	    (r = store_prepare(s, err)) < 0) {
		store_close(s);
		return r;
	}
	*out = s;
	return 0;
}

/* ---------------------------------------------------------------- whom the store trusts
 *
 * As OpenSSH's StrictModes: what another user can write, another user can make pimd believe
 * (a database in which they own root's models, or a link that makes pimd write elsewhere). */

static int check_owner(const char *what, const char *path, const struct stat *st, uid_t uid,
		       struct pim_error *err)
{
	if (st->st_uid != uid && st->st_uid != 0)
		return err_set(err, -EPERM, "%s %s belongs to uid %u, not to pimd's user (uid %u) or "
			       "root: refused, another user could have changed it; chown it to uid %u "
			       "or use another state directory", what, path, (unsigned)st->st_uid,
			       (unsigned)uid, (unsigned)uid);
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return err_set(err, -EPERM, "%s %s is writable by %s (mode %04o): refused, another "
			       "user could replace the database; chmod go-w %s", what, path,
			       st->st_mode & S_IWOTH ? "others" : "its group",
			       (unsigned)(st->st_mode & 07777), path);
	return 0;
}

int store_check_trust(const char *dir, const char *db_path, uid_t uid, struct pim_error *err)
{
	/* (the reserve is opened without following a link, and is only room: reserve_fill) */
	static const char *const sidecar[] = { "", "-wal", "-shm" };
	struct stat st;
	int r;

	if (stat(dir, &st) < 0)
		return err_set(err, -errno, "state directory %s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return err_set(err, -ENOTDIR, "state directory %s: not a directory", dir);
	if ((r = check_owner("state directory", dir, &st, uid, err)) < 0)
		return r;
	for (size_t i = 0; i < sizeof sidecar / sizeof *sidecar; i++) {
		char path[PATH_MAX];
		if ((size_t)snprintf(path, sizeof path, "%s%s", db_path, sidecar[i]) >= sizeof path)
			return err_set(err, -ENAMETOOLONG, "%s%s: path too long", db_path, sidecar[i]);
		if (lstat(path, &st) < 0) {
			if (errno == ENOENT)
				continue; /* made by pimd */
			return err_set(err, -errno, "database file %s: %s", path, strerror(errno));
		}
		if (S_ISLNK(st.st_mode))
			return err_set(err, -ELOOP, "database file %s is a symbolic link: refused, pimd "
				       "writes its database only in its state directory; remove the link "
				       "(and move the file it points to there, if it is pimd's)", path);
		if (!S_ISREG(st.st_mode))
			return err_set(err, -EINVAL, "database file %s: not a regular file", path);
		if ((r = check_owner("database file", path, &st, uid, err)) < 0)
			return r;
	}
	return 0;
}

bool store_found_readonly(struct store *s)
{
	return s->found_readonly || sqlite3_db_readonly(s->db, "main") == 1;
}

int store_reconnect(struct store *s, struct pim_error *err)
{
	struct store t = { .shared = s->shared };
	int r;

	/* a new connection first: s keeps its own until the new one is ready */
	if ((r = store_connect(&t, s->path, s->busy_timeout_ms, err)) < 0 ||
	    (r = store_prepare(&t, err)) < 0) {
		for (int i = 0; i < ST__MAX; i++)
			sqlite3_finalize(t.stmt[i]);
		sqlite3_close(t.db);
		free(t.path);
		free(t.reserve_path);
		return r;
	}
	for (int i = 0; i < ST__MAX; i++) {
		sqlite3_finalize(s->stmt[i]);
		s->stmt[i] = t.stmt[i];
	}
	sqlite3_close(s->db);
	s->db = t.db;
	free(t.path);
	free(t.reserve_path);
	s->models = -1;
	s->found_readonly = false;
	store_set_busy_timeout(s, s->busy_timeout_ms); /* the busy handler's data is s */
	return 0;
}

int store_open(const char *path, unsigned busy_timeout_ms, struct store **out, struct pim_error *err)
{
	return store_open_with(path, busy_timeout_ms, store_migrations, store_n_migrations, out, err);
}

void store_close(struct store *s)
{
	if (!s)
		return;
	store_write_settle(s);
	if (s->shared && atomic_fetch_sub(&s->shared->refs, 1) == 1)
		free(s->shared);
	for (int i = 0; i < ST__MAX; i++)
		sqlite3_finalize(s->stmt[i]);
	sqlite3_close(s->db);  /* NULL when it was never opened */
	free(s->path);
	free(s->reserve_path);
	free(s);
}

/* SQLite's busy handler: polls each millisecond for up to busy_timeout_ms, saying so to the
 * other connections (struct store_shared). */
static int busy_wait(void *data, int count)
{
	struct store *s = data;
	uint64_t now = now_ns();

	if (count == 0)
		s->busy_since_ns = now;
	if (now - s->busy_since_ns >= (uint64_t)s->busy_timeout_ms * 1000000)
		return 0;
	atomic_store(&s->shared->waiter, s);
	atomic_store(&s->shared->waited_ns, now);
	usleep(1000);
	return 1;
}

void store_set_busy_timeout(struct store *s, unsigned busy_timeout_ms)
{
	s->busy_timeout_ms = busy_timeout_ms;
	sqlite3_busy_handler(s->db, busy_wait, s);
}

unsigned store_schema_version(struct store *s) { return s->version; }
const char *store_path(struct store *s) { return s->path; }

static char *col_strdup(sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);
	return strdup(t ? (const char *)t : "");
}

static Pim__ModelSummary *summary_from_row(sqlite3_stmt *st)
{
	Pim__ModelSummary *m = malloc(sizeof *m);
	if (!m)
		return NULL;
	pim__model_summary__init(m);
	m->name = col_strdup(st, 1);
	m->source = col_strdup(st, 2);
	if (!m->name || !m->source) {
		pim__model_summary__free_unpacked(m, NULL);
		return NULL;
	}
	m->owner_uid = (uint32_t)sqlite3_column_int64(st, 3);
	m->loaded_at = sqlite3_column_int64(st, 4);
	m->regions = (uint32_t)sqlite3_column_int64(st, 5);
	m->allocations = (uint32_t)sqlite3_column_int64(st, 6);
	m->allocation_bytes = (uint64_t)sqlite3_column_int64(st, 7);
	return m;
}

/* Finds a model: 1 and its id (and summary) if present, 0 if not. */
static int model_find(struct store *s, const char *name, int64_t *id, uint32_t *owner,
		      Pim__ModelSummary **summary, struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_MODEL_FIND);
	int r;

	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	r = sqlite3_step(st);
	if (r == SQLITE_DONE) {
		sqlite3_reset(st);
		return 0;
	}
	if (r != SQLITE_ROW)
		return db_err(s, err, "looking up a model");
	*id = sqlite3_column_int64(st, 0);
	if (owner)
		*owner = (uint32_t)sqlite3_column_int64(st, 3);
	if (summary) {
		*summary = summary_from_row(st);
		if (!*summary) {
			sqlite3_reset(st);
			return err_set(err, -ENOMEM, "out of memory");
		}
	}
	sqlite3_reset(st);
	return 1;
}

static int may_modify(uid_t uid, uint32_t owner)
{
	return uid == 0 || uid == owner || uid == geteuid();
}

static void join_extents(char *buf, size_t cap, const uint64_t *e, size_t n)
{
	size_t pos = 0;
	buf[0] = 0;
	for (size_t i = 0; i < n && pos < cap; i++)
		pos += (size_t)snprintf(buf + pos, cap - pos, "%s%" PRIu64, i ? "," : "", e[i]);
}

static int step_done(struct store *s, sqlite3_stmt *st, const char *what, struct pim_error *err)
{
	int r = sqlite3_step(st);
	sqlite3_reset(st);
	return r == SQLITE_DONE ? 0 : db_err(s, err, what);
}

/* The model's row, named name (the rest: allocations_insert, regions_insert). */
static int model_row_insert(struct store *s, const Pim__Manifest *m, size_t n_regions, const char *name,
			    uid_t uid, int64_t *model_id, struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_MODEL_INSERT);
	uint64_t bytes = 0;
	int r;

	for (size_t i = 0; i < m->n_allocations; i++)
		bytes += m->allocations[i]->bytes;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, m->source ? m->source : "", -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, uid);
	sqlite3_bind_int64(st, 4, (int64_t)time(NULL));
	sqlite3_bind_int64(st, 5, (int64_t)n_regions);
	sqlite3_bind_int64(st, 6, (int64_t)m->n_allocations);
	sqlite3_bind_int64(st, 7, (int64_t)bytes);
	if ((r = step_done(s, st, "inserting the model", err)) < 0)
		return r;
	*model_id = sqlite3_last_insert_rowid(s->db);
	return 0;
}

/* Allocations [from, to) of m. */
static int allocations_insert(struct store *s, const Pim__Manifest *m, int64_t model_id, size_t from,
			      size_t to, struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_ALLOC_INSERT);
	int r;

	for (size_t i = from; i < to; i++) {
		const Pim__Allocation *a = m->allocations[i];
		sqlite3_bind_int64(st, 1, model_id);
		sqlite3_bind_int64(st, 2, a->id);
		sqlite3_bind_int64(st, 3, (int64_t)a->bytes);
		sqlite3_bind_int(st, 4, a->kind);
		sqlite3_bind_text(st, 5, a->name ? a->name : "", -1, SQLITE_STATIC);
		if ((r = step_done(s, st, "inserting an allocation", err)) < 0)
			return r;
	}
	return 0;
}

/* A region with its operands. */
static int region_insert(struct store *s, const Pim__Region *g, int64_t model_id, struct pim_error *err)
{
	char pe[MANIFEST_EXTENTS_TEXT], re[MANIFEST_EXTENTS_TEXT];
	int r;

	join_extents(pe, sizeof pe, g->parallel_extents, g->n_parallel_extents);
	join_extents(re, sizeof re, g->reduction_extents, g->n_reduction_extents);
	sqlite3_stmt *st = stmt_get(s, ST_REGION_INSERT);
	sqlite3_bind_int64(st, 1, model_id);
	sqlite3_bind_int64(st, 2, g->id);
	sqlite3_bind_text(st, 3, g->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, g->op, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, g->order);
	sqlite3_bind_int64(st, 6, (int64_t)g->n_par);
	sqlite3_bind_int64(st, 7, (int64_t)g->n_total);
	sqlite3_bind_int64(st, 8, (int64_t)(g->trip ? g->trip : 1));
	sqlite3_bind_text(st, 9, pe, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 10, re, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 11, g->location ? g->location : "", -1, SQLITE_STATIC);
	if ((r = step_done(s, st, "inserting a region", err)) < 0)
		return r;
	st = stmt_get(s, ST_OPERAND_INSERT);
	for (size_t j = 0; j < g->n_operands; j++) {
		const Pim__Operand *o = g->operands[j];
		sqlite3_bind_int64(st, 1, model_id);
		sqlite3_bind_int64(st, 2, g->id);
		sqlite3_bind_int64(st, 3, (int64_t)j);
		sqlite3_bind_int64(st, 4, o->allocation_id);
		sqlite3_bind_int64(st, 5, (int64_t)o->bytes);
		sqlite3_bind_text(st, 6, o->elem_type ? o->elem_type : "", -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 7, o->elem_bits);
		sqlite3_bind_int(st, 8, o->role);
		if ((r = step_done(s, st, "inserting an operand", err)) < 0)
			return r;
	}
	return 0;
}

/* The regions of a manifest, as store_model_put_each takes them. */
struct regions_src {
	size_t n;
	const Pim__Region *(*get)(void *ctx, size_t i, struct pim_error *err);
	void *ctx;
};

/* Regions from *i on, until about STORE_PART_ROWS rows are written (max_rows: all); *i moves on. */
static int regions_insert(struct store *s, const struct regions_src *src, int64_t model_id, size_t *i,
			  size_t max_rows, struct pim_error *err)
{
	int r = 0;

	for (size_t rows = 0; *i < src->n && rows < max_rows && r >= 0; (*i)++) {
		const Pim__Region *g = src->get(src->ctx, *i, err);
		if (!g)
			return err->code < 0 ? err->code : err_set(err, -EIO, "regions[%zu]: unreadable", *i);
		r = region_insert(s, g, model_id, err);
		rows += 1 + g->n_operands;
	}
	return r;
}

static int model_stage(struct store *s, int64_t id, struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_MODEL_STAGE);
	sqlite3_bind_int64(st, 1, id);
	return step_done(s, st, "staging a model", err);
}

/* Whether m may be stored as uid asks: 1 and the id of the model it replaces, 0 if there is none,
 * or -EEXIST / -EPERM.  In a write transaction. */
static int model_may_put(struct store *s, const Pim__Manifest *m, uid_t uid, bool replace, int64_t *old_id,
			 struct pim_error *err)
{
	uint32_t owner;
	int r = model_find(s, m->name, old_id, &owner, NULL, err);

	if (r <= 0)
		return r;
	if (!replace)
		return err_set(err, -EEXIST, "model \"%s\" exists; remove it first or load with replace "
			       "(pimctl model load --replace)", m->name);
	if (!may_modify(uid, owner))
		return err_set(err, -EPERM, "model \"%s\" belongs to uid %u; only its owner, root or pimd's "
			       "own user may replace it", m->name, owner);
	return 1;
}

/* Lets another connection that waits for the write lock (busy_wait) in before the next part:
 * while one has polled in the last 3 ms, up to a second. */
static void part_yield(struct store *s)
{
	for (int i = 0; i < 1000; i++) {
		if (atomic_load(&s->shared->waiter) == s ||
		    now_ns() - atomic_load(&s->shared->waited_ns) > 3000000)
			return;
		usleep(1000);
	}
}

/* One part of a staged write or removal: a transaction of its own, after any other writer that
 * waits. */
static int part_begin(struct store *s, struct pim_error *err)
{
	part_yield(s);
	return exec_simple(s, ST_BEGIN, err);
}

static int part_commit(struct store *s, int r, struct pim_error *err)
{
	if (r >= 0 && (r = commit_durable(s, err)) >= 0)
		return 0;
	rollback(s);
	return r;
}

/* 1 when the profile runs of model id hold more than n samples, 0 when not, or -errno. */
static int samples_more_than(struct store *s, int64_t id, unsigned n, struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_SAMPLES_MORE_THAN);
	int r;

	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, n);
	r = sqlite3_step(st);
	sqlite3_reset(st);
	if (r == SQLITE_ROW)
		return 1;
	return r == SQLITE_DONE ? 0 : db_err(s, err, "counting a model's samples");
}

/* Deletes the rows of a staged model, STORE_PART_ROWS samples of its profile runs, then as many
 * regions (with their operands and metrics), then allocations, per transaction, then its row
 * (and its runs with it).  Left to the model's row, the samples of an in-situ run (up to
 * 4,000,000) would all go in its one transaction, holding every other writer that long. */
static int model_delete_parts(struct store *s, int64_t id, struct pim_error *err)
{
	static const enum stmt_id some[] = { ST_SAMPLES_DELETE_SOME, ST_REGIONS_DELETE_SOME,
					     ST_ALLOCS_DELETE_SOME };
	int r;

	for (size_t k = 0; k < ELEMENTSOF(some); k++)
		for (;;) {
			if ((r = part_begin(s, err)) < 0)
				return r;
			sqlite3_stmt *st = stmt_get(s, some[k]);
			sqlite3_bind_int64(st, 1, id);
			sqlite3_bind_int64(st, 2, STORE_PART_ROWS);
			r = step_done(s, st, "removing a model's rows", err);
			int changed = r >= 0 ? sqlite3_changes(s->db) : 0;
			if ((r = part_commit(s, r, err)) < 0)
				return r;
			if (!changed)
				break;
		}
	if ((r = part_begin(s, err)) < 0)
		return r;
	sqlite3_stmt *st = stmt_get(s, ST_MODEL_DELETE);
	sqlite3_bind_int64(st, 1, id);
	return part_commit(s, step_done(s, st, "removing a model", err), err);
}

/*
 * A model of more than STORE_PART_ROWS regions and allocations, written in parts
 * (sql/0006-model-staging.sql): the checks and the model's row, staged; allocations and regions,
 * about STORE_PART_ROWS rows per transaction; then one small transaction checks again, stages
 * the model it replaces and names the new one.  Until then no reader finds it; after a crash,
 * store_staged_cleanup deletes what was written.  The replaced model is deleted in parts after.
 */
static int model_put_parts(struct store *s, const Pim__Manifest *m, const struct regions_src *src, uid_t uid,
			   bool replace, bool *replaced, struct pim_error *err)
{
	int64_t id = -1, old_id;
	int r;

	if ((r = part_begin(s, err)) < 0)
		return r;
	if ((r = model_may_put(s, m, uid, replace, &old_id, err)) >= 0 &&
	    (r = model_row_insert(s, m, src->n, " staging", uid, &id, err)) >= 0)
		r = model_stage(s, id, err);  /* named by its id: the name may be taken */
	if ((r = part_commit(s, r, err)) < 0)
		return r;
	for (size_t i = 0; i < m->n_allocations && r >= 0; i += STORE_PART_ROWS) {
		size_t to = i + STORE_PART_ROWS < m->n_allocations ? i + STORE_PART_ROWS : m->n_allocations;
		if ((r = part_begin(s, err)) >= 0)
			r = part_commit(s, allocations_insert(s, m, id, i, to, err), err);
	}
	for (size_t i = 0; i < src->n && r >= 0;)
		if ((r = part_begin(s, err)) >= 0)
			r = part_commit(s, regions_insert(s, src, id, &i, STORE_PART_ROWS, err), err);
	int found = 0;
	if (r >= 0 && (r = part_begin(s, err)) >= 0) {
		if ((r = found = model_may_put(s, m, uid, replace, &old_id, err)) > 0)
			r = model_stage(s, old_id, err);
		if (r >= 0) {
			sqlite3_stmt *st = stmt_get(s, ST_MODEL_UNSTAGE);
			sqlite3_bind_int64(st, 1, id);
			sqlite3_bind_text(st, 2, m->name, -1, SQLITE_STATIC);
			r = step_done(s, st, "naming the model", err);
		}
		r = part_commit(s, r, err);
	}
	if (r < 0) {
		/* what a failure here leaves, the next start deletes */
		(void)model_delete_parts(s, id, NULL);
		return r;
	}
	s->models = -1;
	*replaced = found > 0;
	/* The replaced model is no longer found: deleting its rows may fail (the next start
	 * finishes it) without undoing the load. */
	if (found > 0)
		(void)model_delete_parts(s, old_id, NULL);
	return 0;
}

int store_model_put_each(struct store *s, const Pim__Manifest *m, size_t n_regions,
			 const Pim__Region *(*region)(void *ctx, size_t i, struct pim_error *err), void *ctx,
			 uid_t uid, bool replace, bool *replaced, Pim__ModelSummary **summary,
			 struct pim_error *err)
{
	const struct regions_src src = { n_regions, region, ctx };
	int64_t id, new_id;
	int r;

	*replaced = false;
	/* (a group's change is a savepoint: the writer takes no model written in parts) */
	if (n_regions + m->n_allocations > STORE_PART_ROWS && !s->grouped) {
		r = model_put_parts(s, m, &src, uid, replace, replaced, err);
	} else {
		size_t i = 0;
		if ((r = change_begin(s, err)) < 0)
			return r;
		if ((r = model_may_put(s, m, uid, replace, &id, err)) > 0) {
			sqlite3_stmt *st = stmt_get(s, ST_MODEL_DELETE);
			sqlite3_bind_int64(st, 1, id);
			if ((r = step_done(s, st, "removing the old model", err)) >= 0)
				*replaced = true;
		}
		if (r >= 0 && (r = model_row_insert(s, m, n_regions, m->name, uid, &new_id, err)) >= 0 &&
		    (r = allocations_insert(s, m, new_id, 0, m->n_allocations, err)) >= 0)
			r = regions_insert(s, &src, new_id, &i, SIZE_MAX, err);
		if ((r = part_commit(s, r, err)) < 0) {
			*replaced = false;
			return r;
		}
		s->models = -1;
	}
	if (r < 0)
		return r;
	if (summary) {
		r = model_find(s, m->name, &id, NULL, summary, err);
		if (r <= 0)
			return r < 0 ? r : err_set(err, -EIO, "model vanished after commit");
	}
	return 0;
}

static const Pim__Region *region_of(void *ctx, size_t i, struct pim_error *err)
{
	return ((const Pim__Manifest *)ctx)->regions[i];
}

int store_model_put(struct store *s, const Pim__Manifest *m, uid_t uid, bool replace, bool *replaced,
		    Pim__ModelSummary **summary, struct pim_error *err)
{
	return store_model_put_each(s, m, m->n_regions, region_of, (void *)m, uid, replace, replaced, summary,
				    err);
}

int store_staged_cleanup(struct store *s, unsigned *n, struct pim_error *err)
{
	int r;

	*n = 0;
	for (;;) {
		sqlite3_stmt *st = stmt_get(s, ST_MODEL_STAGED);
		if ((r = sqlite3_step(st)) == SQLITE_DONE) {
			sqlite3_reset(st);
			return 0;
		}
		if (r != SQLITE_ROW) {
			sqlite3_reset(st);
			return db_err(s, err, "looking for staged models");
		}
		int64_t id = sqlite3_column_int64(st, 0);
		sqlite3_reset(st);
		if ((r = model_delete_parts(s, id, err)) < 0)
			return r;
		(*n)++;
	}
}

int store_model_list(struct store *s, Pim__ModelSummary ***out, size_t *n, struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_MODEL_LIST);
	Pim__ModelSummary **v = NULL;
	size_t len = 0, cap = 0;
	int r;

	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		if (len == cap) {
			cap = cap ? cap * 2 : 16;
			Pim__ModelSummary **nv = realloc(v, cap * sizeof *v);
			if (!nv)
				goto oom;
			v = nv;
		}
		v[len] = summary_from_row(st);
		if (!v[len])
			goto oom;
		len++;
	}
	sqlite3_reset(st);
	if (r != SQLITE_DONE) {
		r = db_err(s, err, "listing models");
		goto fail;
	}
	*out = v;
	*n = len;
	return 0;
oom:
	sqlite3_reset(st);
	r = err_set(err, -ENOMEM, "out of memory");
fail:
	for (size_t i = 0; i < len; i++)
		pim__model_summary__free_unpacked(v[i], NULL);
	free(v);
	return r;
}

/* "3,4,5" into e (at most MANIFEST_EXTENTS_MAX numbers, as stored by join_extents). */
static int parse_extents(const char *t, uint64_t *e, size_t *n)
{
	size_t cnt = 0;

	*n = 0;
	while (t && *t) {
		char *end;
		uint64_t x = strtoull(t, &end, 10);
		if (end == t)
			break;
		if (cnt == MANIFEST_EXTENTS_MAX)
			return -E2BIG;
		e[cnt++] = x;
		t = *end == ',' ? end + 1 : end;
	}
	*n = cnt;
	return 0;
}

/* Fills a walker's row from a row of ST_REGION_SELECT; false if the extents do not parse. */
static bool region_row(sqlite3_stmt *st, struct store_region_row *g)
{
	const unsigned char *t;

	g->id = (uint32_t)sqlite3_column_int64(st, 0);
	g->name = (t = sqlite3_column_text(st, 1)) ? (const char *)t : "";
	g->op = (t = sqlite3_column_text(st, 2)) ? (const char *)t : "";
	g->order = (uint32_t)sqlite3_column_int64(st, 3);
	g->n_par = (uint64_t)sqlite3_column_int64(st, 4);
	g->n_total = (uint64_t)sqlite3_column_int64(st, 5);
	g->trip = (uint64_t)sqlite3_column_int64(st, 6);
	g->location = (t = sqlite3_column_text(st, 9)) ? (const char *)t : "";
	return parse_extents((const char *)sqlite3_column_text(st, 7), g->parallel_extents,
			     &g->n_parallel_extents) == 0 &&
	       parse_extents((const char *)sqlite3_column_text(st, 8), g->reduction_extents,
			     &g->n_reduction_extents) == 0;
}

void store_region_msg_start(struct store_region_msg *m, const struct store_region_row *r)
{
	pim__region__init(&m->g);
	m->g.id = r->id;
	m->g.order = r->order;
	m->g.n_par = r->n_par;
	m->g.n_total = r->n_total;
	m->g.trip = r->trip;
	memcpy(m->pe, r->parallel_extents, sizeof m->pe);
	memcpy(m->re, r->reduction_extents, sizeof m->re);
	m->g.parallel_extents = m->pe;
	m->g.n_parallel_extents = r->n_parallel_extents;
	m->g.reduction_extents = m->re;
	m->g.n_reduction_extents = r->n_reduction_extents;
	m->g.operands = m->opp;
}

Pim__Operand *store_region_msg_operand(struct store_region_msg *m, const struct store_operand_row *o)
{
	size_t i = m->g.n_operands;

	if (i == MANIFEST_OPERANDS_MAX)
		return NULL;
	Pim__Operand *p = m->opp[i] = &m->ops[i];
	pim__operand__init(p);
	p->allocation_id = o->allocation_id;
	p->bytes = o->bytes;
	p->elem_bits = o->elem_bits;
	p->role = o->role;
	m->g.n_operands++;
	return p;
}

int store_model_walk(struct store *s, int64_t model_id, const struct store_model_walker *w, void *ctx,
		     struct pim_error *err)
{
	/* Regions in program order (or by id), and beside them their operands (ordered by the
	 * region's order or id, then index): one pass over each, nothing of the model held here. */
	sqlite3_stmt *rs = stmt_get(s, w->by_id ? ST_REGION_SELECT_BY_ID : ST_REGION_SELECT),
		     *os = stmt_get(s, w->by_id ? ST_OPERAND_SELECT_BY_ID : ST_OPERAND_SELECT);
	struct store_region_row g;
	size_t index = 0;
	int r, ro = SQLITE_ROW, k = 0;
	bool op_pending = false;

	if (w->allocation) {
		sqlite3_stmt *as = stmt_get(s, ST_ALLOC_SELECT);
		sqlite3_bind_int64(as, 1, model_id);
		while (k >= 0 && (r = sqlite3_step(as)) == SQLITE_ROW) {
			const unsigned char *t = sqlite3_column_text(as, 3);
			Pim__Allocation a = PIM__ALLOCATION__INIT;
			a.id = (uint32_t)sqlite3_column_int64(as, 0);
			a.bytes = (uint64_t)sqlite3_column_int64(as, 1);
			a.kind = (Pim__AllocKind)sqlite3_column_int(as, 2);
			a.name = (char *)(t ? (const char *)t : "");
			k = w->allocation(ctx, &a);
		}
		if (k >= 0 && r != SQLITE_DONE)
			k = db_err(s, err, "reading allocations");
		sqlite3_reset(as);
		if (k < 0)
			return k;
	}
	sqlite3_bind_int64(rs, 1, model_id);
	sqlite3_bind_int64(os, 1, model_id);
	while (k >= 0 && (r = sqlite3_step(rs)) == SQLITE_ROW) {
		if (!region_row(rs, &g)) {
			k = err_set(err, -EIO, "%s: region %u of model %" PRId64 " has unreadable extents",
				    s->path, g.id, model_id);
			break;
		}
		if ((k = w->region(ctx, index, &g)) < 0)
			break;
		for (;;) {
			if (!op_pending && (ro = sqlite3_step(os)) != SQLITE_ROW)
				break;
			op_pending = true;
			uint32_t key = (uint32_t)sqlite3_column_int64(os, 0), want = w->by_id ? g.id : g.order;
			if (key > want)
				break;  /* the next region's */
			op_pending = false;
			if (key < want)
				continue;  /* of no region (cannot happen: a foreign key) */
			const unsigned char *t = sqlite3_column_text(os, 3);
			struct store_operand_row o = {
				.region = index,
				.allocation_id = (uint32_t)sqlite3_column_int64(os, 1),
				.bytes = (uint64_t)sqlite3_column_int64(os, 2),
				.elem_type = t ? (const char *)t : "",
				.elem_bits = (uint32_t)sqlite3_column_int64(os, 4),
				.role = (Pim__OperandRole)sqlite3_column_int(os, 5),
			};
			if ((k = w->operand(ctx, &o)) < 0)
				break;
		}
		if (k < 0)
			break;
		if (ro != SQLITE_ROW && ro != SQLITE_DONE) {
			k = db_err(s, err, "reading operands");
			break;
		}
		index++;
	}
	if (k >= 0 && r != SQLITE_DONE && r != SQLITE_ROW)
		k = db_err(s, err, "reading regions");
	sqlite3_reset(rs);
	sqlite3_reset(os);
	return k < 0 ? k : 0;
}

/* store_model_walk building a Pim__Manifest. */
struct manifest_build {
	Pim__Manifest *m;
	size_t want, cap;  /* regions announced; operands room of the last region */
	size_t want_allocations;
	struct pim_error *err;
};

static uint64_t *extents_dup(const uint64_t *e, size_t n, bool *oom)
{
	if (!n)
		return NULL;
	uint64_t *v = malloc(n * sizeof *v);
	if (!v)
		*oom = true;
	else
		memcpy(v, e, n * sizeof *v);
	return v;
}

static int build_region(void *ctx, size_t index, const struct store_region_row *r)
{
	struct manifest_build *b = ctx;
	Pim__Manifest *m = b->m;
	bool oom = false;

	if (m->n_regions == b->want)
		return err_set(b->err, -EIO, "model \"%s\" has more regions than its summary says", m->name);
	Pim__Region *g = malloc(sizeof *g);
	if (!g)
		return err_set(b->err, -ENOMEM, "out of memory");
	pim__region__init(g);
	m->regions[m->n_regions++] = g;
	b->cap = 0;
	g->id = r->id;
	g->name = strdup(r->name);
	g->op = strdup(r->op);
	g->order = r->order;
	g->n_par = r->n_par;
	g->n_total = r->n_total;
	g->trip = r->trip;
	g->location = strdup(r->location);
	g->parallel_extents = extents_dup(r->parallel_extents, r->n_parallel_extents, &oom);
	g->n_parallel_extents = g->parallel_extents ? r->n_parallel_extents : 0;
	g->reduction_extents = extents_dup(r->reduction_extents, r->n_reduction_extents, &oom);
	g->n_reduction_extents = g->reduction_extents ? r->n_reduction_extents : 0;
	if (!g->name || !g->op || !g->location || oom)
		return err_set(b->err, -ENOMEM, "out of memory");
	return 0;
}

static int build_operand(void *ctx, const struct store_operand_row *o)
{
	struct manifest_build *b = ctx;
	Pim__Region *g = b->m->regions[o->region];

	if (g->n_operands == b->cap) {
		b->cap = b->cap ? b->cap * 2 : 4;
		Pim__Operand **nv = realloc(g->operands, b->cap * sizeof *nv);
		if (!nv)
			return err_set(b->err, -ENOMEM, "out of memory");
		g->operands = nv;
	}
	Pim__Operand *p = malloc(sizeof *p);
	if (!p)
		return err_set(b->err, -ENOMEM, "out of memory");
	pim__operand__init(p);
	g->operands[g->n_operands++] = p;
	p->allocation_id = o->allocation_id;
	p->bytes = o->bytes;
	p->elem_type = strdup(o->elem_type);
	p->elem_bits = o->elem_bits;
	p->role = o->role;
	return p->elem_type ? 0 : err_set(b->err, -ENOMEM, "out of memory");
}

static int build_allocation(void *ctx, const Pim__Allocation *a)
{
	struct manifest_build *b = ctx;
	Pim__Manifest *m = b->m;

	if (m->n_allocations == b->want_allocations)
		return err_set(b->err, -EIO, "model \"%s\" has more allocations than its summary says", m->name);
	Pim__Allocation *c = malloc(sizeof *c);
	if (!c)
		return err_set(b->err, -ENOMEM, "out of memory");
	*c = *a;
	m->allocations[m->n_allocations++] = c;
	c->name = strdup(a->name);
	return c->name ? 0 : err_set(b->err, -ENOMEM, "out of memory");
}

static int load_manifest(struct store *s, int64_t model_id, Pim__Manifest *m, struct pim_error *err)
{
	static const struct store_model_walker build = {
		.allocation = build_allocation, .region = build_region, .operand = build_operand };
	struct manifest_build b = { .m = m, .want = m->n_regions, .want_allocations = m->n_allocations,
				    .err = err };

	m->n_allocations = 0;
	m->n_regions = 0;
	m->allocations = calloc(b.want_allocations ? b.want_allocations : 1, sizeof *m->allocations);
	m->regions = calloc(b.want ? b.want : 1, sizeof *m->regions);
	if (!m->allocations || !m->regions)
		return err_set(err, -ENOMEM, "out of memory");
	return store_model_walk(s, model_id, &build, &b, err);
}

int store_model_get(struct store *s, const char *name, Pim__ModelSummary **summary,
		    Pim__Manifest **manifest, struct pim_error *err)
{
	Pim__ModelSummary *sum = NULL;
	Pim__Manifest *m = NULL;
	int64_t id;
	int r;

	/* One read transaction, so the parts come from the same version of the model (begun here
	 * only when none is open, and then ended here). */
	bool own = sqlite3_get_autocommit(s->db);
	if (own && sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
		return db_err(s, err, "starting a read");
	r = model_find(s, name, &id, NULL, &sum, err);
	if (r == 0)
		r = err_set(err, -ENOENT, "no model named \"%s\"", name);
	if (r < 0)
		goto out;
	if (manifest) {
		m = malloc(sizeof *m);
		if (!m) {
			r = err_set(err, -ENOMEM, "out of memory");
			goto out;
		}
		pim__manifest__init(m);
		m->name = strdup(sum->name);
		m->source = strdup(sum->source);
		m->n_allocations = sum->allocations;
		m->n_regions = sum->regions;
		if (!m->name || !m->source) {
			r = err_set(err, -ENOMEM, "out of memory");
			goto out;
		}
		r = load_manifest(s, id, m, err);
		if (r < 0)
			goto out;
	}
	r = 0;
out:
	if (own && sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	if (r < 0) {
		if (sum)
			pim__model_summary__free_unpacked(sum, NULL);
		if (m)
			pim__manifest__free_unpacked(m, NULL);
		return r;
	}
	if (summary)
		*summary = sum;
	else
		pim__model_summary__free_unpacked(sum, NULL);
	if (manifest)
		*manifest = m;
	return 0;
}

static int model_remove_once(struct store *s, const char *name, uid_t uid, struct pim_error *err)
{
	int64_t id;
	uint32_t owner;
	uint64_t regions = 0;
	int r;

	if ((r = change_begin(s, err)) < 0)
		return r;
	r = model_find(s, name, &id, &owner, NULL, err);
	if (r == 0)
		r = err_set(err, -ENOENT, "no model named \"%s\"", name);
	if (r < 0)
		goto fail;
	if (!may_modify(uid, owner)) {
		r = err_set(err, -EPERM, "model \"%s\" belongs to uid %u; only its owner, root or pimd's "
			    "own user may remove it", name, owner);
		goto fail;
	}
	if ((r = store_model_regions(s, name, &regions, err)) < 0)
		goto fail;
	/* A large model, or one with many samples, is staged (no longer found) here, and its rows
	 * deleted in parts after (not in a group, whose changes are savepoints of one transaction). */
	bool parts = false;
	if (!s->grouped && (r = regions > STORE_PART_ROWS ? 1 : samples_more_than(s, id, STORE_PART_ROWS, err)) < 0)
		goto fail;
	parts = r > 0;
	sqlite3_stmt *st = stmt_get(s, parts ? ST_MODEL_STAGE : ST_MODEL_DELETE);
	sqlite3_bind_int64(st, 1, id);
	if ((r = step_done(s, st, "removing the model", err)) < 0)
		goto fail;
	if ((r = commit_durable(s, err)) < 0)
		goto fail;
	s->models = -1;
	/* gone for every reader: rows left by a failure here are deleted at the next start */
	if (parts)
		(void)model_delete_parts(s, id, NULL);
	return 0;
fail:
	rollback(s);
	return r;
}

int store_model_remove(struct store *s, const char *name, uid_t uid, struct pim_error *err)
{
	int r = model_remove_once(s, name, uid, err);

	if (r == 0 && !s->reserve_held)
		(void)reserve_fill(s); /* room may have come back */
	if (r != -ENOSPC || s->grouped)
		return r; /* a group's failure is retried change by change (store_group_commit) */
	if (!s->reserve_held)
		return err_prefix(err, "the file system is full and pimd holds no reserve (it could not "
				  "allocate it, or spent it); free some space");
	/* Give up the reserve; fold the log into the database so that the removal writes the
	 * log from its start, over room it already has (RESTART), using the reserve's room only
	 * for what does not fit; remove; fold that in too, so the next change reuses the log's
	 * room in turn.  The reserve is taken back only if the room is there: the log keeps its
	 * size, and the removed model's pages are free inside the database for later changes. */
	reserve_release(s);
	sqlite3_exec(s->db, "PRAGMA wal_checkpoint(RESTART)", NULL, NULL, NULL);
	r = model_remove_once(s, name, uid, err);
	sqlite3_exec(s->db, "PRAGMA wal_checkpoint(RESTART)", NULL, NULL, NULL);
	(void)reserve_fill(s);
	if (r == -ENOSPC)
		return err_prefix(err, "the file system is full, and the removal needs more room than "
				  "pimd's reserve of %u MiB; free some space", STORE_RESERVE_BYTES >> 20);
	return r < 0 ? r : 1;
}

void store_forget_cached(struct store *s) { s->models = -1; }

/* ---------------------------------------------------------------- groups of changes
 *
 * Group commit: changes asked for by several clients at once are written in one transaction
 * and synced once.  Inside a group each change is a savepoint of its own, so that one that
 * fails leaves the others; none is on disk before the group's commit. */

int store_group_begin(struct store *s, struct pim_error *err)
{
	int r = exec_simple(s, ST_BEGIN, err);

	if (r == 0)
		s->grouped = true;
	return r;
}

int store_group_commit(struct store *s, bool *committed, struct pim_error *err)
{
	s->grouped = false;
	s->models = -1;
	*committed = false;
	if (sqlite3_get_autocommit(s->db))
		return group_rolled_back(s, err);
	int r = exec_simple(s, ST_COMMIT, err);
	if (r < 0) {
		rollback(s);
		return r;
	}
	*committed = true;
	return sync_verify(s, err);
}

bool store_in_group(const struct store *s)
{
	return s->grouped;
}

void store_write_via(const struct store_writer *wr, struct store *s, struct store_write *w)
{
	if (wr && wr->submit && wr->submit(wr->owner, w) == 0)
		return;
	/* refused, or nobody to hand it to: it waits here (no allocation, so nothing fails) */
	w->next = NULL;
	if (!s->later)
		s->later_tail = &s->later;
	*s->later_tail = w;
	s->later_tail = &w->next;
}

unsigned store_write_settle(struct store *s)
{
	unsigned n = 0;

	while (s->later) {
		struct store_write *w = s->later;
		struct pim_error err = { 0 };
		s->later = w->next;
		w->next = NULL;
		/* alone: written whole, never STORE_WRITE_AGAIN (store_in_group is false) */
		int r = w->write(s, w->data, &err);
		w->done(w->data, r, &err); /* (may free w, and hand over more) */
		n++;
	}
	return n;
}

int store_model_count(struct store *s, unsigned *n, struct pim_error *err)
{
	/* Status asks on every call: answer from memory (a query costs a WAL read lock). */
	if (s->models >= 0) {
		*n = (unsigned)s->models;
		return 0;
	}
	sqlite3_stmt *st = stmt_get(s, ST_MODEL_COUNT);
	int r = sqlite3_step(st);
	if (r != SQLITE_ROW) {
		sqlite3_reset(st);
		return db_err(s, err, "counting models");
	}
	*n = (unsigned)sqlite3_column_int64(st, 0);
	s->models = (int)*n;
	sqlite3_reset(st);
	return 0;
}

int store_quick_check(struct store *s, struct pim_error *err)
{
	sqlite3_stmt *st;
	int r;

	if (sqlite3_prepare_v2(s->db, "PRAGMA quick_check(1)", -1, &st, NULL) != SQLITE_OK)
		return db_err(s, err, "quick_check");
	r = sqlite3_step(st);
	if (r == SQLITE_ROW) {
		const char *res = (const char *)sqlite3_column_text(st, 0);
		char what[160];
		/* SQLite's report spans lines ("*** in database main ***\nPage 7: ..."): one line */
		snprintf(what, sizeof what, "%s", res ? res : "no result");
		for (char *p = what; *p; p++)
			if (*p == '\n')
				*p = ' ';
		r = res && strcmp(res, "ok") == 0 ? 0
			: err_set(err, -EUCLEAN, "%s: the database is damaged (quick_check: %s)%s", s->path,
				  what, STORE_DAMAGED_ADVICE);
	} else {
		int code = sqlite3_errcode(s->db);
		r = code == SQLITE_CORRUPT || code == SQLITE_NOTADB
			? err_set(err, -EUCLEAN, "%s: the database is damaged (quick_check: %s)%s",
				  s->path, sqlite3_errmsg(s->db), STORE_DAMAGED_ADVICE)
			: db_err(s, err, "quick_check");
	}
	sqlite3_finalize(st);
	return r;
}

int store_check_integrity(struct store *s, struct pim_error *err)
{
	sqlite3_stmt *st;
	int r;

	if (sqlite3_prepare_v2(s->db, "PRAGMA integrity_check", -1, &st, NULL) != SQLITE_OK)
		return db_err(s, err, "integrity check");
	r = sqlite3_step(st);
	if (r != SQLITE_ROW) {
		sqlite3_finalize(st);
		return db_err(s, err, "integrity check");
	}
	const char *res = (const char *)sqlite3_column_text(st, 0);
	r = res && strcmp(res, "ok") == 0 ? 0
		: err_set(err, -EIO, "%s: integrity check: %s", s->path, res ? res : "(null)");
	sqlite3_finalize(st);
	return r;
}

/* ---------------------------------------------------------------- platforms */

static void column_text(sqlite3_stmt *st, int col, char *buf, size_t len)
{
	const char *t = (const char *)sqlite3_column_text(st, col);
	snprintf(buf, len, "%s", t ? t : "");
}

int store_platform_ensure(struct store *s, struct store_platform *p, int64_t *id,
			  struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_PLATFORM_FIND);
	int r;

	sqlite3_bind_text(st, 1, p->name, -1, SQLITE_STATIC);
	r = sqlite3_step(st);
	if (r == SQLITE_ROW) {
		*id = sqlite3_column_int64(st, 0);
		if (p->b_cpu <= 0 && sqlite3_column_type(st, 1) != SQLITE_NULL) {
			p->b_cpu = sqlite3_column_double(st, 1);
			p->b_cpu_spread = sqlite3_column_double(st, 2); /* NULL reads as 0 */
			column_text(st, 3, p->b_cpu_method, sizeof p->b_cpu_method);
			p->b_cpu_measured_at = sqlite3_column_int64(st, 4);
			p->b_cpu_busy = sqlite3_column_int(st, 5) != 0;
			column_text(st, 6, p->b_cpu_load, sizeof p->b_cpu_load);
			column_text(st, 7, p->b_cpu_host, sizeof p->b_cpu_host);
		}
		sqlite3_reset(st);
		st = stmt_get(s, ST_PLATFORM_UPDATE);
		sqlite3_bind_int64(st, 1, *id);
		sqlite3_bind_text(st, 2, p->kernel, -1, SQLITE_STATIC);
		if ((r = step_done(s, st, "updating the platform", err)) < 0)
			return r;
	} else {
		sqlite3_reset(st);
		if (r != SQLITE_DONE)
			return db_err(s, err, "looking up the platform");
		st = stmt_get(s, ST_PLATFORM_INSERT);
		sqlite3_bind_text(st, 1, p->name, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, p->cpu_model, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, p->pmu, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 4, p->kernel, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 5, (int64_t)time(NULL));
		if ((r = step_done(s, st, "adding the platform", err)) < 0)
			return r;
		*id = sqlite3_last_insert_rowid(s->db);
	}
	return p->b_cpu > 0 ? store_platform_set_b_cpu(s, *id, p, err) : 0;
}

int store_platform_set_b_cpu(struct store *s, int64_t id, const struct store_platform *p,
			     struct pim_error *err)
{
	if (!isfinite(p->b_cpu) || p->b_cpu <= 0 || !isfinite(p->b_cpu_spread) || p->b_cpu_spread < 0)
		return err_set(err, -EINVAL, "B_cpu %g B/s with spread %g: not a measurement", p->b_cpu,
			       p->b_cpu_spread);
	sqlite3_stmt *st = stmt_get(s, ST_PLATFORM_SET_B_CPU);
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_double(st, 2, p->b_cpu);
	sqlite3_bind_double(st, 3, p->b_cpu_spread);
	sqlite3_bind_text(st, 4, p->b_cpu_method, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, p->b_cpu_measured_at);
	sqlite3_bind_int(st, 6, p->b_cpu_busy);
	sqlite3_bind_text(st, 7, p->b_cpu_load, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 8, p->b_cpu_host, -1, SQLITE_STATIC);
	return step_done(s, st, "storing the measured B_cpu", err);
}

/* ---------------------------------------------------------------- metrics and decisions */

int store_model_id(struct store *s, const char *name, int64_t *id, struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_MODEL_ID);
	int r;

	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	r = sqlite3_step(st);
	if (r == SQLITE_ROW) {
		*id = sqlite3_column_int64(st, 0);
		sqlite3_reset(st);
		return 0;
	}
	sqlite3_reset(st);
	if (r != SQLITE_DONE)
		return db_err(s, err, "looking up a model");
	return err_set(err, -ENOENT, "no model named \"%s\"", name);
}

int store_model_regions(struct store *s, const char *name, uint64_t *n, struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_MODEL_FIND);
	int r;

	*n = 0;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	r = sqlite3_step(st);
	if (r == SQLITE_ROW)
		*n = (uint64_t)sqlite3_column_int64(st, 5);
	sqlite3_reset(st);
	return r == SQLITE_ROW || r == SQLITE_DONE ? 0 : db_err(s, err, "looking up a model");
}

int store_model_version(struct store *s, int64_t model_id, int64_t *version, struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_MODEL_VERSION);
	int r;

	sqlite3_bind_int64(st, 1, model_id);
	r = sqlite3_step(st);
	if (r == SQLITE_ROW)
		*version = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	if (r == SQLITE_ROW)
		return 0;
	return r == SQLITE_DONE ? err_set(err, -ENOENT, "the model was removed meanwhile")
				: db_err(s, err, "reading a model's version");
}

int store_read_begin(struct store *s, struct pim_error *err)
{
	return exec_simple(s, ST_BEGIN_READ, err);
}

void store_read_end(struct store *s)
{
	if (!sqlite3_get_autocommit(s->db))
		exec_simple(s, ST_COMMIT, NULL);
}

int store_model_id_for(struct store *s, const char *name, uid_t uid, const char *what, int64_t *id,
		       struct pim_error *err)
{
	uint32_t owner;
	int r = model_find(s, name, id, &owner, NULL, err);
	if (r == 0)
		return err_set(err, -ENOENT, "no model named \"%s\"", name);
	if (r < 0)
		return r;
	if (!may_modify(uid, owner))
		return err_set(err, -EPERM, "model \"%s\" belongs to uid %u; only its owner, root or pimd's "
			       "own user may %s", name, owner, what);
	return 0;
}

static const char *evidence_text(Pim__Evidence e)
{
	switch (e) {
	case PIM__EVIDENCE__EVIDENCE_COUNTERS: return "counters";
	case PIM__EVIDENCE__EVIDENCE_ESTIMATE: return "estimate";
	case PIM__EVIDENCE__EVIDENCE_IMPORTED: return "imported";
	default: return NULL;
	}
}

static Pim__Evidence evidence_from_text(const char *t)
{
	if (t && strcmp(t, "counters") == 0)
		return PIM__EVIDENCE__EVIDENCE_COUNTERS;
	if (t && strcmp(t, "estimate") == 0)
		return PIM__EVIDENCE__EVIDENCE_ESTIMATE;
	if (t && strcmp(t, "imported") == 0)
		return PIM__EVIDENCE__EVIDENCE_IMPORTED;
	return PIM__EVIDENCE__EVIDENCE_NONE;
}

static void bind_opt(sqlite3_stmt *st, int i, bool have, double v)
{
	if (have)
		sqlite3_bind_double(st, i, v);
	else
		sqlite3_bind_null(st, i);
}

int store_metrics_put(struct store *s, int64_t model_id, int64_t platform_id, int64_t run_id,
		      const Pim__RegionMetrics *m, struct pim_error *err)
{
	const char *ev = evidence_text(m->evidence);
	sqlite3_stmt *st;
	int r;

	if (!ev)
		return err_set(err, -EINVAL, "metrics of region %u: no evidence kind", m->region_id);
	if (!(m->t_host > 0))
		return err_set(err, -EINVAL, "metrics of region %u: T_host must be positive", m->region_id);
	if (!isfinite(m->source_b_cpu) || m->source_b_cpu < 0)
		return err_set(err, -EINVAL, "metrics of region %u: the measuring host's B_cpu must be a "
			       "finite number >= 0 B/s", m->region_id);
	if ((r = change_begin(s, err)) < 0)
		return r;
	st = stmt_get(s, ST_REGION_EXISTS);
	sqlite3_bind_int64(st, 1, model_id);
	sqlite3_bind_int64(st, 2, m->region_id);
	r = sqlite3_step(st);
	sqlite3_reset(st);
	if (r == SQLITE_DONE) {
		r = err_set(err, -ENOENT, "the model has no region %u", m->region_id);
		goto fail;
	}
	if (r != SQLITE_ROW) {
		r = db_err(s, err, "looking up a region");
		goto fail;
	}
	st = stmt_get(s, ST_METRICS_UPSERT);
	sqlite3_bind_int64(st, 1, model_id);
	sqlite3_bind_int64(st, 2, m->region_id);
	sqlite3_bind_int64(st, 3, platform_id);
	if (run_id > 0)
		sqlite3_bind_int64(st, 4, run_id);
	sqlite3_bind_text(st, 5, ev, -1, SQLITE_STATIC);
	sqlite3_bind_double(st, 6, m->t_host);
	sqlite3_bind_double(st, 7, m->t_host_spread);
	bind_opt(st, 8, m->have_n_rd, m->n_rd);
	bind_opt(st, 9, m->have_store, m->c_store);
	bind_opt(st, 10, m->have_store, m->c_be1);
	bind_opt(st, 11, m->have_store, m->c_be2);
	bind_opt(st, 12, m->have_store, m->c_be3);
	bind_opt(st, 13, m->bw_read_estimate > 0, m->bw_read_estimate);
	sqlite3_bind_text(st, 14, m->source ? m->source : "", -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 15, (int64_t)time(NULL));
	bind_opt(st, 16, m->source_b_cpu > 0, m->source_b_cpu);
	if (m->origin_host && *m->origin_host) {
		sqlite3_bind_text(st, 17, m->origin_host, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 18, m->origin_measured_at);
		sqlite3_bind_text(st, 19, m->origin_backend ? m->origin_backend : "", -1, SQLITE_STATIC);
	}
	if ((r = step_done(s, st, "storing metrics", err)) < 0)
		goto fail;
	/* Stored answers rest on the old metrics: drop them with the change. */
	st = stmt_get(s, ST_DECISIONS_DELETE);
	sqlite3_bind_int64(st, 1, model_id);
	if ((r = step_done(s, st, "dropping stored decisions", err)) < 0)
		goto fail;
	if ((r = commit_durable(s, err)) < 0)
		goto fail;
	return 0;
fail:
	rollback(s);
	return r;
}

int store_metrics_each(struct store *s, int64_t model_id, int64_t platform_id, store_metrics_fn fn, void *ctx,
		       struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_METRICS_SELECT);
	int r;

	sqlite3_bind_int64(st, 1, model_id);
	sqlite3_bind_int64(st, 2, platform_id);
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		Pim__RegionMetrics m = PIM__REGION_METRICS__INIT;
		const unsigned char *source = sqlite3_column_text(st, 10);

		m.region_id = (uint32_t)sqlite3_column_int64(st, 0);
		m.evidence = evidence_from_text((const char *)sqlite3_column_text(st, 1));
		m.t_host = sqlite3_column_double(st, 2);
		m.t_host_spread = sqlite3_column_double(st, 3);
		if (sqlite3_column_type(st, 4) != SQLITE_NULL) {
			m.have_n_rd = true;
			m.n_rd = sqlite3_column_double(st, 4);
		}
		if (sqlite3_column_type(st, 5) != SQLITE_NULL) {
			m.have_store = true;
			m.c_store = sqlite3_column_double(st, 5);
			m.c_be1 = sqlite3_column_double(st, 6);
			m.c_be2 = sqlite3_column_double(st, 7);
			m.c_be3 = sqlite3_column_double(st, 8);
		}
		m.bw_read_estimate = sqlite3_column_double(st, 9);
		m.source = (char *)(source ? (const char *)source : "");
		m.updated_at = sqlite3_column_int64(st, 11);
		m.source_b_cpu = sqlite3_column_double(st, 12); /* NULL reads as 0: unknown */
		const unsigned char *oh = sqlite3_column_text(st, 13), *ob = sqlite3_column_text(st, 15);
		m.origin_host = (char *)(oh ? (const char *)oh : "");
		m.origin_measured_at = sqlite3_column_int64(st, 14);
		m.origin_backend = (char *)(ob ? (const char *)ob : "");
		if ((r = fn(ctx, &m)) < 0) {
			sqlite3_reset(st);
			return r == -ENOMEM ? err_set(err, -ENOMEM, "out of memory reading metrics") : r;
		}
	}
	sqlite3_reset(st);
	if (r != SQLITE_DONE)
		return db_err(s, err, "reading metrics");
	return 0;
}

struct metrics_vec {
	Pim__RegionMetrics **v;
	size_t len, cap;
};

static int metrics_keep(void *ctx, const Pim__RegionMetrics *m)
{
	struct metrics_vec *mv = ctx;

	if (mv->len == mv->cap) {
		size_t cap = mv->cap ? mv->cap * 2 : 64;
		Pim__RegionMetrics **nv = realloc(mv->v, cap * sizeof *nv);
		if (!nv)
			return -ENOMEM;
		mv->v = nv;
		mv->cap = cap;
	}
	Pim__RegionMetrics *c = malloc(sizeof *c);
	if (!c)
		return -ENOMEM;
	*c = *m;
	c->origin_host = c->origin_backend = NULL;
	if (!(c->source = strdup(m->source)) || !(c->origin_host = strdup(m->origin_host)) ||
	    !(c->origin_backend = strdup(m->origin_backend))) {
		free(c->source);
		free(c->origin_host);
		free(c);
		return -ENOMEM;
	}
	mv->v[mv->len++] = c;
	return 0;
}

int store_metrics_list(struct store *s, int64_t model_id, int64_t platform_id,
		       Pim__RegionMetrics ***out, size_t *n, struct pim_error *err)
{
	struct metrics_vec mv = { 0 };
	int r = store_metrics_each(s, model_id, platform_id, metrics_keep, &mv, err);

	if (r < 0) {
		for (size_t i = 0; i < mv.len; i++)
			pim__region_metrics__free_unpacked(mv.v[i], NULL);
		free(mv.v);
		return r;
	}
	*out = mv.v;
	*n = mv.len;
	return 0;
}

int store_decision_get(struct store *s, int64_t model_id, int64_t platform_id, const char *key,
		       uint8_t **reply, size_t *len, struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_DECISION_SELECT);
	int r;

	sqlite3_bind_int64(st, 1, model_id);
	sqlite3_bind_int64(st, 2, platform_id);
	sqlite3_bind_text(st, 3, key, -1, SQLITE_STATIC);
	r = sqlite3_step(st);
	if (r == SQLITE_DONE) {
		sqlite3_reset(st);
		return 0;
	}
	if (r != SQLITE_ROW) {
		sqlite3_reset(st);
		return db_err(s, err, "reading a stored decision");
	}
	int n = sqlite3_column_bytes(st, 0);
	uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
	if (!b) {
		sqlite3_reset(st);
		return err_set(err, -ENOMEM, "out of memory");
	}
	if (n > 0)
		memcpy(b, sqlite3_column_blob(st, 0), (size_t)n);
	sqlite3_reset(st);
	*reply = b;
	*len = (size_t)n;
	return 1;
}

int store_decision_put(struct store *s, int64_t model_id, int64_t platform_id, const char *key,
		       const uint8_t *reply, size_t len, struct pim_error *err)
{
	sqlite3_stmt *st;
	int r;

	if (len > INT32_MAX)
		return err_set(err, -EFBIG, "a stored decision of %zu bytes is too large", len);
	if ((r = change_begin(s, err)) < 0)
		return r;
	st = stmt_get(s, ST_DECISION_UPSERT);
	sqlite3_bind_int64(st, 1, model_id);
	sqlite3_bind_int64(st, 2, platform_id);
	sqlite3_bind_text(st, 3, key, -1, SQLITE_STATIC);
	sqlite3_bind_blob(st, 4, reply, (int)len, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, (int64_t)time(NULL));
	if ((r = step_done(s, st, "storing a decision", err)) < 0)
		goto fail;
	/* Any client may vary parameters: bound what their answers take in the store. */
	st = stmt_get(s, ST_DECISIONS_TRIM);
	sqlite3_bind_int64(st, 1, model_id);
	sqlite3_bind_int64(st, 2, platform_id);
	sqlite3_bind_int(st, 3, STORE_DECISIONS_PER_MODEL);
	if ((r = step_done(s, st, "trimming stored decisions", err)) < 0)
		goto fail;
	if ((r = commit_durable(s, err)) < 0)
		goto fail;
	return 0;
fail:
	rollback(s);
	return r;
}

/* ---------------------------------------------------------------- profile runs and samples */

int store_run_create(struct store *s, int64_t model_id, int64_t platform_id, uid_t uid,
		     unsigned warmups, unsigned reps, unsigned regions_total, int64_t *run_id,
		     struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_RUN_INSERT);
	int r;

	sqlite3_bind_int64(st, 1, model_id);
	sqlite3_bind_int64(st, 2, platform_id);
	sqlite3_bind_int64(st, 3, uid);
	sqlite3_bind_int64(st, 4, warmups);
	sqlite3_bind_int64(st, 5, reps);
	sqlite3_bind_int64(st, 6, regions_total);
	sqlite3_bind_int64(st, 7, (int64_t)time(NULL));
	if ((r = change_begin(s, err)) < 0)
		return r;
	if ((r = step_done(s, st, "recording a profile run", err)) < 0)
		goto fail;
	*run_id = sqlite3_last_insert_rowid(s->db);
	if ((r = commit_durable(s, err)) < 0)
		goto fail;
	return 0;
fail:
	rollback(s);
	return r;
}

static void bind_text_opt(sqlite3_stmt *st, int i, const char *t)
{
	if (t)
		sqlite3_bind_text(st, i, t, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, i);
}

static void bind_int_opt(sqlite3_stmt *st, int i, int64_t v)
{
	if (v >= 0)
		sqlite3_bind_int64(st, i, v);
	else
		sqlite3_bind_null(st, i);
}

int store_run_update(struct store *s, int64_t run_id, const struct store_run_update *u,
		     struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_RUN_UPDATE);

	sqlite3_bind_int64(st, 1, run_id);
	bind_text_opt(st, 2, u->state);
	bind_text_opt(st, 3, u->backend);
	bind_text_opt(st, 4, u->backend_reason);
	bind_text_opt(st, 5, u->message);
	bind_int_opt(st, 6, u->worker_uid);
	bind_int_opt(st, 7, u->regions_done);
	bind_int_opt(st, 8, u->repetitions_done);
	bind_int_opt(st, 9, u->repetitions_total);
	sqlite3_bind_int(st, 10, u->finished);
	sqlite3_bind_int64(st, 11, (int64_t)time(NULL));
	return step_done(s, st, "updating a profile run", err);
}

int store_samples_put(struct store *s, int64_t run_id, const struct store_sample *v, size_t n,
		      struct pim_error *err)
{
	sqlite3_stmt *st;
	int r;

	if (n == 0)
		return 0;
	if ((r = change_begin(s, err)) < 0)
		return r;
	st = stmt_get(s, ST_SAMPLE_INSERT);
	for (size_t i = 0; i < n; i++) {
		uint8_t blob[8 * 16];
		unsigned nv = v[i].n_values < 16 ? v[i].n_values : 16;
		for (unsigned k = 0; k < nv; k++)
			for (int b = 0; b < 8; b++)
				blob[8 * k + b] = (uint8_t)(v[i].values[k] >> (8 * b));
		sqlite3_bind_int64(st, 1, run_id);
		sqlite3_bind_int64(st, 2, v[i].region);
		sqlite3_bind_int64(st, 3, v[i].group);
		sqlite3_bind_int64(st, 4, v[i].rep);
		sqlite3_bind_int64(st, 5, (int64_t)v[i].executions);
		sqlite3_bind_int64(st, 6, (int64_t)v[i].time_ns);
		sqlite3_bind_int64(st, 7, (int64_t)v[i].time_enabled);
		sqlite3_bind_int64(st, 8, (int64_t)v[i].time_running);
		sqlite3_bind_int64(st, 9, nv);
		if (nv)
			sqlite3_bind_blob(st, 10, blob, (int)(8 * nv), SQLITE_TRANSIENT);
		else
			sqlite3_bind_null(st, 10);
		r = sqlite3_step(st);
		sqlite3_reset(st);
		if (r != SQLITE_DONE) {
			r = db_err(s, err, "storing samples");
			goto fail;
		}
	}
	st = stmt_get(s, ST_RUN_ADD_SAMPLES);
	sqlite3_bind_int64(st, 1, run_id);
	sqlite3_bind_int64(st, 2, (int64_t)n);
	if ((r = step_done(s, st, "counting samples", err)) < 0)
		goto fail;
	if ((r = commit_durable(s, err)) < 0)
		goto fail;
	return 0;
fail:
	rollback(s);
	return r;
}

int store_run_get(struct store *s, int64_t run_id, Pim__ProfileReply **out, struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_RUN_SELECT);
	int r;

	sqlite3_bind_int64(st, 1, run_id);
	r = sqlite3_step(st);
	if (r == SQLITE_DONE) {
		sqlite3_reset(st);
		return err_set(err, -ENOENT, "no profile job %lld", (long long)run_id);
	}
	if (r != SQLITE_ROW) {
		sqlite3_reset(st);
		return db_err(s, err, "reading a profile run");
	}
	Pim__ProfileReply *p = malloc(sizeof *p);
	if (!p) {
		sqlite3_reset(st);
		return err_set(err, -ENOMEM, "out of memory");
	}
	pim__profile_reply__init(p);
	p->job = (uint64_t)sqlite3_column_int64(st, 0);
	p->state = col_strdup(st, 1);
	p->model = col_strdup(st, 2);
	p->backend = col_strdup(st, 3);
	p->backend_reason = col_strdup(st, 4);
	p->regions_done = (uint32_t)sqlite3_column_int64(st, 5);
	p->regions_total = (uint32_t)sqlite3_column_int64(st, 6);
	p->repetitions_done = (uint64_t)sqlite3_column_int64(st, 7);
	p->repetitions_total = (uint64_t)sqlite3_column_int64(st, 8);
	p->samples = (uint64_t)sqlite3_column_int64(st, 9);
	p->message = col_strdup(st, 10);
	p->uid = (uint32_t)sqlite3_column_int64(st, 11);
	p->created_at = sqlite3_column_int64(st, 12);
	p->finished_at = sqlite3_column_int64(st, 13);
	sqlite3_reset(st);
	if (!p->state || !p->model || !p->backend || !p->backend_reason || !p->message) {
		pim__profile_reply__free_unpacked(p, NULL);
		return err_set(err, -ENOMEM, "out of memory");
	}
	*out = p;
	return 0;
}

int store_runs_abandon(struct store *s, struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_RUNS_ABANDON);
	int r;

	sqlite3_bind_int64(st, 1, (int64_t)time(NULL));
	if ((r = step_done(s, st, "failing abandoned profile runs", err)) < 0)
		return r;
	return sqlite3_changes(s->db);
}

int store_samples_each(struct store *s, int64_t run_id, uint32_t from_region,
		       int (*fn)(void *ctx, const struct store_sample *sample), void *ctx,
		       struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_SAMPLES_SELECT);
	int r;

	sqlite3_bind_int64(st, 1, run_id);
	sqlite3_bind_int64(st, 2, from_region);
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		uint64_t values[16] = { 0 };
		struct store_sample x = {
			.region = (uint32_t)sqlite3_column_int64(st, 0),
			.group = (uint32_t)sqlite3_column_int64(st, 1),
			.rep = (uint32_t)sqlite3_column_int64(st, 2),
			.executions = (uint64_t)sqlite3_column_int64(st, 3),
			.time_ns = (uint64_t)sqlite3_column_int64(st, 4),
			.time_enabled = (uint64_t)sqlite3_column_int64(st, 5),
			.time_running = (uint64_t)sqlite3_column_int64(st, 6),
			.values = values,
		};
		unsigned nv = (unsigned)sqlite3_column_int64(st, 7);
		const uint8_t *blob = sqlite3_column_blob(st, 8);
		int bytes = sqlite3_column_bytes(st, 8);
		if (nv > 16 || (nv && (!blob || bytes < (int)(8 * nv)))) {
			sqlite3_reset(st);
			return err_set(err, -EIO, "%s: sample of run %lld region %u is damaged", s->path,
				       (long long)run_id, x.region);
		}
		for (unsigned k = 0; k < nv; k++)
			for (int b = 0; b < 8; b++)
				values[k] |= (uint64_t)blob[8 * k + b] << (8 * b);
		x.n_values = nv;
		int k = fn(ctx, &x);
		if (k < 0) {
			sqlite3_reset(st);
			return err_set(err, k, "processing samples of run %lld: %s", (long long)run_id,
				       strerror(-k));
		}
		if (k > 0) {
			sqlite3_reset(st);
			return k;
		}
	}
	sqlite3_reset(st);
	if (r != SQLITE_DONE)
		return db_err(s, err, "reading samples");
	return 0;
}

/* ---------------------------------------------------------------- the fleet catalogue */

/* The model's content hash: its manifest in a canonical text, without its name (sha256.h). */
struct hash_walk {
	struct sha256 h;
	char line[MANIFEST_EXTENTS_TEXT * 2 + 1024];
};

static void hash_line(struct hash_walk *hw, int n)
{
	if (n > 0)
		sha256_update(&hw->h, hw->line, (size_t)n < sizeof hw->line ? (size_t)n : sizeof hw->line - 1);
}

static int hash_allocation(void *ctx, const Pim__Allocation *a)
{
	struct hash_walk *hw = ctx;
	hash_line(hw, snprintf(hw->line, sizeof hw->line, "a %u %" PRIu64 " %d %s\n", a->id, a->bytes,
			       (int)a->kind, a->name ? a->name : ""));
	return 0;
}

static void extents_text(char *buf, size_t len, const uint64_t *e, size_t n)
{
	size_t pos = 0;
	buf[0] = 0;
	for (size_t i = 0; i < n && pos < len; i++)
		pos += (size_t)snprintf(buf + pos, len - pos, "%s%" PRIu64, i ? "," : "", e[i]);
}

static int hash_region(void *ctx, size_t index, const struct store_region_row *g)
{
	struct hash_walk *hw = ctx;
	char pe[MANIFEST_EXTENTS_TEXT], re[MANIFEST_EXTENTS_TEXT];

	extents_text(pe, sizeof pe, g->parallel_extents, g->n_parallel_extents);
	extents_text(re, sizeof re, g->reduction_extents, g->n_reduction_extents);
	hash_line(hw, snprintf(hw->line, sizeof hw->line, "r %u %u %s %s %" PRIu64 " %" PRIu64 " %" PRIu64
			       " [%s] [%s] %s\n", g->id, g->order, g->name, g->op, g->n_par, g->n_total, g->trip,
			       pe, re, g->location));
	return 0;
}

static int hash_operand(void *ctx, const struct store_operand_row *o)
{
	struct hash_walk *hw = ctx;
	hash_line(hw, snprintf(hw->line, sizeof hw->line, "o %u %" PRIu64 " %s %u %d\n", o->allocation_id,
			       o->bytes, o->elem_type, o->elem_bits, (int)o->role));
	return 0;
}

int store_model_hash(struct store *s, int64_t model_id, char hash[65], struct pim_error *err)
{
	static const struct store_model_walker walker = {
		.allocation = hash_allocation, .region = hash_region, .operand = hash_operand };
	sqlite3_stmt *st = stmt_get(s, ST_MODEL_HASH_GET);
	int r;

	sqlite3_bind_int64(st, 1, model_id);
	r = sqlite3_step(st);
	if (r == SQLITE_ROW) {
		const unsigned char *t = sqlite3_column_text(st, 0);
		snprintf(hash, 65, "%s", t ? (const char *)t : "");
	}
	sqlite3_reset(st);
	if (r == SQLITE_DONE)
		return err_set(err, -ENOENT, "no model %" PRId64, model_id);
	if (r != SQLITE_ROW)
		return db_err(s, err, "reading a model's content hash");
	if (strlen(hash) == 64)
		return 0;
	struct hash_walk *hw = malloc(sizeof *hw);
	if (!hw)
		return err_set(err, -ENOMEM, "out of memory");
	sha256_init(&hw->h);
	r = store_model_walk(s, model_id, &walker, hw, err);
	sha256_final_hex(&hw->h, hash);
	free(hw);
	if (r < 0)
		return r;
	/* kept: a model's rows never change (replacing it makes a new row); a failure to keep it
	 * costs the walk again next time */
	st = stmt_get(s, ST_MODEL_HASH_SET);
	sqlite3_bind_int64(st, 1, model_id);
	sqlite3_bind_text(st, 2, hash, -1, SQLITE_STATIC);
	sqlite3_step(st);
	sqlite3_reset(st);
	return 0;
}

int store_model_measured(struct store *s, const char *name, int64_t platform_id, int64_t *model_id,
			 bool *measured, struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_MODEL_MEASURED);
	int r;

	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, platform_id);
	r = sqlite3_step(st);
	if (r == SQLITE_ROW) {
		*model_id = sqlite3_column_int64(st, 0);
		*measured = sqlite3_column_int(st, 1) != 0;
	}
	sqlite3_reset(st);
	if (r == SQLITE_DONE)
		return err_set(err, -ENOENT, "no model \"%.*s\"", TEXT_ECHO(name, 64));
	return r == SQLITE_ROW ? 0 : db_err(s, err, "looking for a model's metrics");
}

/* One row into the outbox, as a change (a savepoint in a group); 1 if the statement added none. */
static int outbox_insert(struct store *s, sqlite3_stmt *st, const char *what, struct pim_error *err)
{
	int r = change_begin(s, err);

	if (r < 0) {
		sqlite3_reset(st);
		return r;
	}
	if ((r = step_done(s, st, what, err)) < 0) {
		rollback(s);
		return r;
	}
	bool none = sqlite3_changes(s->db) == 0;
	if ((r = commit_durable(s, err)) < 0) {
		rollback(s);
		return r;
	}
	return none;
}

int store_outbox_add_run(struct store *s, int64_t run_id, const struct store_outbox_origin *o,
			 const char *message, unsigned regions_measured, struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_OUTBOX_ADD_RUN);

	sqlite3_bind_int64(st, 1, run_id);
	sqlite3_bind_text(st, 2, o->model_hash, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, o->platform_key, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, o->platform_json, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, o->backend, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 6, (int64_t)time(NULL));
	sqlite3_bind_text(st, 7, message, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 8, regions_measured);
	int r = outbox_insert(s, st, "queueing a run for the catalogue", err);
	return r > 0 ? err_set(err, -ENOENT, "no profile run %" PRId64, run_id) : r;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int store_outbox_add_import(struct store *s, int64_t model_id, int64_t platform_id, uint32_t region_id, uid_t uid,
			    const struct store_outbox_origin *o, struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_OUTBOX_ADD_IMPORT);

	sqlite3_bind_int64(st, 1, model_id);
	sqlite3_bind_int64(st, 2, region_id);
	sqlite3_bind_int64(st, 3, platform_id);
	sqlite3_bind_text(st, 4, o->model_hash, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, o->platform_key, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 6, o->platform_json, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 7, uid);
	sqlite3_bind_int64(st, 8, (int64_t)time(NULL));
	sqlite3_bind_int64(st, 9, (int64_t)realtime_ns());
	int r = outbox_insert(s, st, "queueing imported counts for the catalogue", err);
	return r > 0 ? err_set(err, -ENOENT, "no metrics of region %u to queue", region_id) : r;
}

static char *column_dup(sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);
	return strdup(t ? (const char *)t : "");
}

void store_outbox_row_free(struct store_outbox_row *o)
{
	free(o->kind);
	free(o->publish_key);
	free(o->model_name);
	free(o->model_hash);
	free(o->platform_key);
	free(o->platform_json);
	free(o->backend);
	free(o->payload);
	memset(o, 0, sizeof *o);
}

int store_outbox_next(struct store *s, struct store_outbox_row *o, struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_OUTBOX_NEXT);
	int r = sqlite3_step(st);

	memset(o, 0, sizeof *o);
	if (r == SQLITE_ROW) {
		o->id = sqlite3_column_int64(st, 0);
		o->kind = column_dup(st, 1);
		o->publish_key = column_dup(st, 2);
		o->model_name = column_dup(st, 3);
		o->model_hash = column_dup(st, 4);
		o->regions = sqlite3_column_int64(st, 5);
		o->platform_key = column_dup(st, 6);
		o->platform_json = column_dup(st, 7);
		o->uid = sqlite3_column_int64(st, 8);
		o->backend = column_dup(st, 9);
		o->measured_at = sqlite3_column_int64(st, 10);
		o->payload = column_dup(st, 11);
	}
	sqlite3_reset(st);
	if (r == SQLITE_DONE)
		return 0;
	if (r != SQLITE_ROW)
		return db_err(s, err, "reading the catalogue outbox");
	if (!o->kind || !o->publish_key || !o->model_name || !o->model_hash || !o->platform_key ||
	    !o->platform_json || !o->backend || !o->payload) {
		store_outbox_row_free(o);
		return err_set(err, -ENOMEM, "out of memory reading the catalogue outbox");
	}
	return 1;
}

static int outbox_exec(struct store *s, enum stmt_id id, int64_t row, const char *text, const char *what,
		       struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, id);
	int r;

	sqlite3_bind_int64(st, 1, row);
	if (text)
		sqlite3_bind_text(st, 2, text, -1, SQLITE_STATIC);
	if ((r = change_begin(s, err)) < 0) {
		sqlite3_reset(st);
		return r;
	}
	if ((r = step_done(s, st, what, err)) < 0 || (r = commit_durable(s, err)) < 0)
		rollback(s);
	return r;
}

int store_outbox_delete(struct store *s, int64_t id, struct pim_error *err)
{
	return outbox_exec(s, ST_OUTBOX_DELETE, id, NULL, "forgetting a published outbox row", err);
}

int store_outbox_fail(struct store *s, int64_t id, const char *why, struct pim_error *err)
{
	return outbox_exec(s, ST_OUTBOX_FAIL, id, why, "marking an outbox row refused", err);
}

int store_outbox_attempt(struct store *s, int64_t id, struct pim_error *err)
{
	return outbox_exec(s, ST_OUTBOX_ATTEMPT, id, NULL, "counting a publish attempt", err);
}

int store_fetched_begin(struct store *s, struct pim_error *err)
{
	return exec_simple(s, ST_BEGIN, err);
}

static bool fetched_valid(const Pim__RegionMetrics *m)
{
	return evidence_text(m->evidence) && m->t_host > 0 && isfinite(m->t_host) && m->origin_host &&
	       *m->origin_host;
}

/* Binds row m of fetched metrics to st's parameters after base. */
static void fetched_bind(sqlite3_stmt *st, int base, int64_t model_id, int64_t platform_id, int64_t now,
			 const Pim__RegionMetrics *m)
{
	sqlite3_bind_int64(st, base + 1, model_id);
	sqlite3_bind_int64(st, base + 2, m->region_id);
	sqlite3_bind_int64(st, base + 3, platform_id);
	sqlite3_bind_text(st, base + 4, evidence_text(m->evidence), -1, SQLITE_STATIC);
	sqlite3_bind_double(st, base + 5, m->t_host);
	sqlite3_bind_double(st, base + 6, m->t_host_spread);
	bind_opt(st, base + 7, m->have_n_rd, m->n_rd);
	bind_opt(st, base + 8, m->have_store, m->c_store);
	bind_opt(st, base + 9, m->have_store, m->c_be1);
	bind_opt(st, base + 10, m->have_store, m->c_be2);
	bind_opt(st, base + 11, m->have_store, m->c_be3);
	bind_opt(st, base + 12, m->bw_read_estimate > 0, m->bw_read_estimate);
	sqlite3_bind_text(st, base + 13, m->source ? m->source : "", -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, base + 14, now);
	bind_opt(st, base + 15, m->source_b_cpu > 0, m->source_b_cpu);
	sqlite3_bind_text(st, base + 16, m->origin_host, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, base + 17, m->origin_measured_at);
	sqlite3_bind_text(st, base + 18, m->origin_backend ? m->origin_backend : "", -1, SQLITE_STATIC);
}

int store_fetched_put(struct store *s, int64_t model_id, int64_t platform_id, const Pim__RegionMetrics *m,
		      struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_METRICS_FETCHED);

	if (!fetched_valid(m))
		return err_set(err, -EINVAL, "metrics of region %u: not valid", m->region_id);
	fetched_bind(st, 0, model_id, platform_id, (int64_t)time(NULL), m);
	int r = sqlite3_step(st);
	sqlite3_reset(st);
	if (r == SQLITE_DONE)
		return 0;
	if (sqlite3_extended_errcode(s->db) == SQLITE_CONSTRAINT_FOREIGNKEY)
		return err_set(err, -ENOENT, "the model has no region %u", m->region_id);
	return db_err(s, err, "storing metrics from the catalogue");
}

/* STORE_FETCHED_ROWS rows in one statement: 0, -ENOENT when one names a region the model lacks
 * (the statement then stored none of them), or < 0 and err. */
static int fetched_put_chunk(struct store *s, int64_t model_id, int64_t platform_id, int64_t now,
			     const Pim__RegionMetrics *const *m, struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_METRICS_FETCHED_MANY);

	for (int i = 0; i < STORE_FETCHED_ROWS; i++)
		fetched_bind(st, i * FETCHED_COLUMNS, model_id, platform_id, now, m[i]);
	int r = sqlite3_step(st);
	sqlite3_reset(st);
	if (r == SQLITE_DONE)
		return 0;
	if (sqlite3_extended_errcode(s->db) == SQLITE_CONSTRAINT_FOREIGNKEY)
		return -ENOENT;
	return db_err(s, err, "storing metrics from the catalogue");
}

int store_fetched_put_many(struct store *s, int64_t model_id, int64_t platform_id, const Pim__RegionMetrics *const *m,
			   size_t n, size_t *missing, struct pim_error *err)
{
	int64_t now = (int64_t)time(NULL);
	size_t i = 0;
	int r;

	*missing = 0;
	for (size_t k = 0; k < n; k++)
		if (!fetched_valid(m[k]))
			return err_set(err, -EINVAL, "metrics of region %u: not valid", m[k]->region_id);
	for (; i + STORE_FETCHED_ROWS <= n; i += STORE_FETCHED_ROWS) {
		if ((r = fetched_put_chunk(s, model_id, platform_id, now, m + i, err)) == 0)
			continue;
		if (r != -ENOENT)
			return r;
		break; /* a region the model lacks: the rest row by row, to keep the others */
	}
	for (; i < n; i++) {
		if ((r = store_fetched_put(s, model_id, platform_id, m[i], err)) == -ENOENT)
			++*missing;
		else if (r < 0)
			return r;
	}
	return 0;
}

int store_fetched_end(struct store *s, int64_t model_id, bool keep, struct pim_error *err)
{
	int r;

	if (!keep) {
		rollback(s);
		return 0;
	}
	sqlite3_stmt *st = stmt_get(s, ST_DECISIONS_DELETE);
	sqlite3_bind_int64(st, 1, model_id);
	if ((r = step_done(s, st, "dropping stored decisions", err)) < 0 ||
	    (r = exec_simple(s, ST_VERSION_BUMP, err)) < 0)
		goto fail;
	st = stmt_get(s, ST_MODEL_VERSION_SET);
	sqlite3_bind_int64(st, 1, model_id);
	if ((r = step_done(s, st, "changing the model's version", err)) < 0 || (r = commit_durable(s, err)) < 0)
		goto fail;
	return 0;
fail:
	rollback(s);
	return r;
}

int store_outbox_depth(struct store *s, uint64_t *pending, uint64_t *failed, struct pim_error *err)
{
	sqlite3_stmt *st = stmt_get(s, ST_OUTBOX_DEPTH);
	int r = sqlite3_step(st);

	if (r == SQLITE_ROW) {
		*pending = (uint64_t)sqlite3_column_int64(st, 0);
		*failed = (uint64_t)sqlite3_column_int64(st, 1);
	}
	sqlite3_reset(st);
	return r == SQLITE_ROW ? 0 : db_err(s, err, "counting the catalogue outbox");
}
