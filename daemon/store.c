/* SPDX-License-Identifier: MIT */
#include "store.h"

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sha256.h"
#include "sys.h"
#include "store_priv.h"

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
	/* A model's rows, each table's by the range of its key, before the model's row takes the
	 * rest (its runs, answers): its metrics before its regions (sql/0011-rows-by-model.sql), so
	 * that no foreign key is looked up or acted on per row.  Its operands are its regions'
	 * (sql/0012-operands-in-regions.sql). */
	[ST_METRICS_DELETE] = "DELETE FROM metrics WHERE model_id = ?1",
	[ST_REGIONS_DELETE] = "DELETE FROM regions WHERE model_id = ?1",
	[ST_ALLOCS_DELETE] = "DELETE FROM allocations WHERE model_id = ?1",
	[ST_METRICS_DELETE_SOME] = "DELETE FROM metrics WHERE model_id = ?1 AND (platform_id, region_id) IN "
				   "(SELECT platform_id, region_id FROM metrics WHERE model_id = ?1 LIMIT ?2)",
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
	/* the first n of STORE_INSERT_ROWS rows, n the last parameter (LIMIT): store_model.c batches */
	[ST_REGION_INSERT_MANY] = "INSERT INTO regions (model_id, region_id, name, op, ord, n_par, n_total, trip, "
				  "parallel_extents, reduction_extents, location, operands) SELECT * FROM (VALUES "
				  ROWS16(REGION_V) ") LIMIT ?",
	[ST_ALLOC_SELECT] = "SELECT alloc_id, bytes, kind, name FROM allocations WHERE model_id = ?1 "
			    "ORDER BY alloc_id",
	[ST_REGION_SELECT] = "SELECT region_id, name, op, ord, n_par, n_total, trip, parallel_extents, "
			     "reduction_extents, location, operands FROM regions WHERE model_id = ?1 ORDER BY ord",
	[ST_REGION_SELECT_BY_ID] = "SELECT region_id, name, op, ord, n_par, n_total, trip, parallel_extents, "
				   "reduction_extents, location, operands FROM regions WHERE model_id = ?1 "
				   "ORDER BY region_id",
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


int store_db_err(struct store *s, struct pim_error *err, const char *what)
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

/* ---------------------------------------------------------------- the event loop's guard */

static pthread_t guard_thread;     /* set before guard_on, by the guarded thread */
static atomic_bool guard_on;
static atomic_ulong guard_count;
static char guard_sql[256];        /* the last statement counted; the guarded thread's own */
static _Thread_local bool settling; /* in store_write_settle: its changes are not counted */

/* sqlite3_trace_v2, SQLITE_TRACE_STMT: a statement starts on some connection. */
static int guard_trace(unsigned type, void *ctx, void *stmt, void *sql)
{
	if (!atomic_load_explicit(&guard_on, memory_order_acquire) || settling ||
	    !pthread_equal(pthread_self(), guard_thread))
		return 0;
	atomic_fetch_add(&guard_count, 1);
	snprintf(guard_sql, sizeof guard_sql, "%s", sqlite3_sql(stmt) ? sqlite3_sql(stmt) : (const char *)sql);
	return 0;
}

void store_guard_thread(bool on)
{
	if (on)
		guard_thread = pthread_self();
	atomic_store_explicit(&guard_on, on, memory_order_release);
}

unsigned long store_guard_count(const char **sql)
{
	if (sql)
		*sql = guard_sql;
	return atomic_load(&guard_count);
}

sqlite3_stmt *store_stmt_get(struct store *s, enum stmt_id id)
{
	sqlite3_stmt *st = s->stmt[id];
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return st;
}

int store_exec_simple(struct store *s, enum stmt_id id, struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, id);
	int r = sqlite3_step(st);
	sqlite3_reset(st);
	if (r != SQLITE_DONE)
		return store_db_err(s, err, stmt_sql[id]);
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
int store_change_begin(struct store *s, struct pim_error *err)
{
	/* a savepoint outside a transaction would commit on its own at its release */
	if (s->grouped && sqlite3_get_autocommit(s->db))
		return group_rolled_back(s, err);
	return store_exec_simple(s, s->grouped ? ST_SAVEPOINT : ST_BEGIN, err);
}

/* COMMIT, acknowledged only once it is on disk (sync_verify); in a group, the change is kept
 * for the group's commit. */
int store_commit_durable(struct store *s, struct pim_error *err)
{
	if (s->grouped)
		return store_exec_simple(s, ST_RELEASE, err);
	int r = store_exec_simple(s, ST_COMMIT, err);

	if (r == 0 && (r = sync_verify(s, err)) < 0)
		s->models = -1; /* committed here, whatever the disk holds */
	return r;
}

void store_rollback(struct store *s)
{
	if (s->grouped) {
		/* the group goes on without this change (unless SQLite ended the transaction) */
		if (!sqlite3_get_autocommit(s->db) && store_exec_simple(s, ST_ROLLBACK_TO, NULL) == 0)
			store_exec_simple(s, ST_RELEASE, NULL);
	} else if (!sqlite3_get_autocommit(s->db))
		store_exec_simple(s, ST_ROLLBACK, NULL);
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
		return store_db_err(s, err, "reading PRAGMA user_version");
	if (v > n)
		return err_set(err, -EPROTONOSUPPORT, "%s: database schema version %u is newer than "
			       "this pimd knows (%u); use a newer pimd or another state directory",
			       s->path, v, n);
	/* Foreign keys off while migrations run (a table made again is dropped, and with them
	 * on, dropping it would delete the rows that reference it), checked before each commits. */
	if (v < n && sqlite3_exec(s->db, "PRAGMA foreign_keys = OFF", NULL, NULL, NULL) != SQLITE_OK)
		return store_db_err(s, err, "turning foreign keys off for the migrations");
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
		return store_db_err(s, err, "turning foreign keys on after the migrations");
	s->version = n;
	return 0;
}

/* ---------------------------------------------------------------- the reserve
 *
 * SQLite needs room to delete: the write-ahead log grows by every page a removal touches
 * before the pages are free in the database.  So that a model can be removed while the file
 * system is full, the store keeps STORE_RESERVE_BYTES allocated in a file beside the database
 * and gives them up for a removal that fails for lack of room (store_model_remove). */

int store_reserve_fill(struct store *s)
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

void store_reserve_release(struct store *s)
{
	if (truncate(s->reserve_path, 0) == 0 || errno == ENOENT)
		s->reserve_held = false;
}

bool store_reserve_held(struct store *s) { return s->reserve_held; }

/* The counter of model name's commits (store_model_changes). */
static unsigned model_slot(const char *name)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (; *name; name++)
		h = (h ^ (uint8_t)*name) * 16777619u;
	return h % STORE_MODEL_SLOTS;
}

/*
 * SQLite calls this after each commit of a connection, once the commit is done and the write
 * lock given back: the change is visible to every reader from here on, so a count taken after
 * it (store_changes) is never older than what a reader reads.  It stands in for SQLite's own
 * automatic checkpoint, which it replaces: the same passive checkpoint at the same size.
 */
static int wal_committed(void *data, sqlite3 *db, const char *name, int frames)
{
	struct store *s = data;
	struct store_shared *sh = s->shared;

	if (s->scoped) {
		for (unsigned i = 0; i < s->n_scope; i++)
			atomic_fetch_add(&sh->model_changes[model_slot(s->scope[i])], 1);
		atomic_fetch_add(&sh->models_changes, 1);
	} else {
		atomic_fetch_add(&sh->changes, 1);
	}
	if (frames >= STORE_WAL_AUTOCHECKPOINT)
		sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
	return SQLITE_OK;
}

uint64_t store_changes(const struct store *s)
{
	return atomic_load(&s->shared->changes);
}

uint64_t store_model_changes(const struct store *s, const char *name)
{
	return name ? atomic_load(&s->shared->model_changes[model_slot(name)])
		    : atomic_load(&s->shared->models_changes);
}

void store_commit_scope(struct store *s, const char *const *names, size_t n)
{
	s->scoped = n > 0 && n <= STORE_SCOPE_MAX;
	s->n_scope = s->scoped ? (unsigned)n : 0;
	for (unsigned i = 0; i < s->n_scope; i++)
		s->scope[i] = names[i];
}

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
		return s->db ? store_db_err(s, err, "opening the database")
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
	/* from here on every statement it runs passes the event loop's guard */
	sqlite3_trace_v2(s->db, SQLITE_TRACE_STMT, guard_trace, NULL);
	sqlite3_wal_hook(s->db, wal_committed, s);
	return 0;
}

static int store_prepare(struct store *s, struct pim_error *err)
{
	for (int i = 0; i < ST__MAX; i++)
		if (sqlite3_prepare_v3(s->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &s->stmt[i],
				       NULL) != SQLITE_OK)
			/* Only reachable with a migration list that lacks the tables. */
			return store_db_err(s, err, "preparing statements");
	return 0;
}

/* Before SQLite's first use: no statistics of its memory (nothing reads them), so that its
 * allocations take no global mutex; every thread's connection allocates on its own. */
static void sqlite_configure(void)
{
	(void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); /* (refused once SQLite is in use) */
}

int store_open_with(const char *path, unsigned busy_timeout_ms, const struct store_migration *migs,
		    unsigned n_migs, struct store **out, struct pim_error *err)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct store *s;
	int r;

	pthread_once(&once, sqlite_configure);
	s = calloc(1, sizeof *s);

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
	(void)store_reserve_fill(s);
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
	sqlite3_wal_hook(s->db, wal_committed, s);     /* and the commit hook's */
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

/* ---------------------------------------------------------------- groups of changes
 *
 * Group commit: changes asked for by several clients at once are written in one transaction
 * and synced once.  Inside a group each change is a savepoint of its own, so that one that
 * fails leaves the others; none is on disk before the group's commit. */

int store_group_begin(struct store *s, struct pim_error *err)
{
	int r = store_exec_simple(s, ST_BEGIN, err);

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
	int r = store_exec_simple(s, ST_COMMIT, err);
	if (r < 0) {
		store_rollback(s);
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
	bool was = settling;

	settling = true; /* (the event loop's guard lets these pass: no writer took them) */
	while (s->later) {
		struct store_write *w = s->later;
		struct pim_error err = { 0 };
		s->later = w->next;
		w->next = NULL;
		/* alone: written whole, never STORE_WRITE_AGAIN (store_in_group is false) */
		int r = w->write(s, w->data, &err);
		settling = was;
		w->done(w->data, r, &err); /* (may free w, and hand over more) */
		settling = true;
		n++;
	}
	settling = was;
	return n;
}

int store_model_count(struct store *s, unsigned *n, struct pim_error *err)
{
	/* Status asks on every call: answer from memory (a query costs a WAL read lock). */
	if (s->models >= 0) {
		*n = (unsigned)s->models;
		return 0;
	}
	sqlite3_stmt *st = store_stmt_get(s, ST_MODEL_COUNT);
	int r = sqlite3_step(st);
	if (r != SQLITE_ROW) {
		sqlite3_reset(st);
		return store_db_err(s, err, "counting models");
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
		return store_db_err(s, err, "quick_check");
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
			: store_db_err(s, err, "quick_check");
	}
	sqlite3_finalize(st);
	return r;
}

int store_check_integrity(struct store *s, struct pim_error *err)
{
	sqlite3_stmt *st;
	int r;

	if (sqlite3_prepare_v2(s->db, "PRAGMA integrity_check", -1, &st, NULL) != SQLITE_OK)
		return store_db_err(s, err, "integrity check");
	r = sqlite3_step(st);
	if (r != SQLITE_ROW) {
		sqlite3_finalize(st);
		return store_db_err(s, err, "integrity check");
	}
	const char *res = (const char *)sqlite3_column_text(st, 0);
	r = res && strcmp(res, "ok") == 0 ? 0
		: err_set(err, -EIO, "%s: integrity check: %s", s->path, res ? res : "(null)");
	sqlite3_finalize(st);
	return r;
}
