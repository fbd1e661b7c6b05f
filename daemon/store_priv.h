/* SPDX-License-Identifier: MIT */
/*
 * store_priv.h: what the files of the store share and nobody else sees: the connection, its
 * prepared statements, and the helpers of its transactions.  store.c opens, migrates and
 * commits; store_model.c, store_metrics.c and store_run.c read and write their tables.
 */
#ifndef PIMD_STORE_PRIV_H
#define PIMD_STORE_PRIV_H

#include <sqlite3.h>
#include <stdatomic.h>

#include "store.h"

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
	ST_REGION_INSERT_MANY,
	ST_METRICS_DELETE,
	ST_REGIONS_DELETE,
	ST_ALLOCS_DELETE,
	ST_METRICS_DELETE_SOME,
	ST_REGIONS_DELETE_SOME,
	ST_ALLOCS_DELETE_SOME,
	ST_ALLOC_INSERT,
	ST_ALLOC_SELECT,
	ST_REGION_SELECT,
	ST_REGION_SELECT_BY_ID,
	ST_SAMPLES_DELETE_SOME,
	ST_SAMPLES_MORE_THAN,
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
/* A model's regions (with their operands: sql/0012) are inserted STORE_INSERT_ROWS to a
 * statement (the first n of its rows: LIMIT), so that a statement's own work is done once per
 * batch, not per row. */
#define STORE_INSERT_ROWS 16
#define REGION_COLUMNS 12
#define REGION_V "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
#define ROWS4(v) v ", " v ", " v ", " v
#define ROWS16(v) ROWS4(v) ", " ROWS4(v) ", " ROWS4(v) ", " ROWS4(v)
_Static_assert(STORE_FETCHED_ROWS == 64, "FETCHED_V64 has STORE_FETCHED_ROWS rows");

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
	/* commits of any connection so far, counted once each is done (store_changes): those
	 * that changed only some models are counted per model instead (store_commit_scope) */
	_Atomic uint64_t changes;
	_Atomic uint64_t models_changes;                  /* commits of a scope */
	_Atomic uint64_t model_changes[STORE_MODEL_SLOTS]; /* by a hash of the model's name */
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
	/* the models the next commits change, and nothing else (store_commit_scope) */
	const char *scope[STORE_SCOPE_MAX];
	unsigned n_scope;
	bool scoped;
	/* changes no writer took (store_write_via), waiting for store_write_settle */
	struct store_write *later, **later_tail;
};

int store_change_begin(struct store *s, struct pim_error *err);
int store_commit_durable(struct store *s, struct pim_error *err);
int store_db_err(struct store *s, struct pim_error *err, const char *what);
int store_exec_simple(struct store *s, enum stmt_id id, struct pim_error *err);
int store_reserve_fill(struct store *s);
void store_reserve_release(struct store *s);
void store_rollback(struct store *s);
sqlite3_stmt *store_stmt_get(struct store *s, enum stmt_id id);
char *store_col_strdup(sqlite3_stmt *st, int i);
int store_may_modify(uid_t uid, uint32_t owner);
int store_model_find(struct store *s, const char *name, int64_t *id, uint32_t *owner,
		      struct store_model_info *info, struct pim_error *err);
int store_step_done(struct store *s, sqlite3_stmt *st, const char *what, struct pim_error *err);

#endif
