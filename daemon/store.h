/* SPDX-License-Identifier: MIT */
/*
 * store.h: pimd's SQLite store.  It owns the database connection and every prepared
 * statement; nothing else in pimd talks to SQLite.
 *
 * The schema is a list of numbered migrations (sql/NNNN-*.sql, embedded at build time).  Each
 * is applied in one transaction together with its PRAGMA user_version bump, so a crash leaves
 * the database at a whole version.  A database whose version is newer than the migrations this
 * build knows is refused.
 */
#ifndef PIMD_STORE_H
#define PIMD_STORE_H

#include <sys/types.h>

#include "placement.h"
#include "util.h"

struct store_migration {
	unsigned version;
	const char *name;
	const char *sql;
};

extern const struct store_migration store_migrations[];
extern const unsigned store_n_migrations;

struct store;

/* Opens (creating if needed) the database at path, sets WAL, synchronous=FULL (every commit is
 * on disk before the call returns), foreign_keys=ON and the busy timeout, refuses a damaged
 * database (store_quick_check) and migrates it to the latest version. */
int store_open(const char *path, unsigned busy_timeout_ms, struct store **out, struct pim_error *err);
/* Whether pimd may trust its state directory dir and the database db_path in it (and its
 * -wal and -shm files), as OpenSSH's StrictModes: each must belong to uid (pimd's
 * user) or root and be writable by neither group nor others; the files must not be symbolic
 * links.  -EPERM, -ELOOP (a link) or another negative errno, with a message that says what to
 * change. */
int store_check_trust(const char *dir, const char *db_path, uid_t uid, struct pim_error *err);
/* As store_open, with an explicit migration list (tests). */
int store_open_with(const char *path, unsigned busy_timeout_ms, const struct store_migration *migs,
		    unsigned n_migs, struct store **out, struct pim_error *err);
/* Another connection to the database of first, for another thread (an SQLite connection is
 * used by one thread at a time): the same settings, without the check and the migrations
 * store_open has done.  Writers of all connections take turns (busy_timeout_ms); readers
 * never wait (WAL). */
int store_open_again(const struct store *first, unsigned busy_timeout_ms, struct store **out,
		     struct pim_error *err);
void store_close(struct store *s);
/* Whether a statement of s failed because the database was read-only (SQLITE_READONLY: -EROFS)
 * or the connection is read-only: store_reconnect then opens it again. */
bool store_found_readonly(struct store *s);
/* Replaces the connection of s by a new one to the same file; s is unchanged on failure
 * (-EROFS while the database is still read-only). */
int store_reconnect(struct store *s, struct pim_error *err);
void store_set_busy_timeout(struct store *s, unsigned busy_timeout_ms);

unsigned store_schema_version(struct store *s);
/*
 * Commits made so far through any connection of this store's database (store_open_again's
 * too), each counted once it is visible to readers, so that a count that did not change means
 * nothing stored changed (answers.h).  Any thread; no query.
 *
 * store_changes counts the commits that may have changed anything; store_model_changes those
 * that changed model `name` only (a load, a replacement or a removal, store_commit_scope):
 * counted by a hash of the name, so another model's may be counted too (never fewer); with
 * name NULL, those of any model.
 */
uint64_t store_changes(const struct store *s);
uint64_t store_model_changes(const struct store *s, const char *name);
/*
 * The commits of s from here on change the n models named (and the list of models) and nothing
 * else, until store_commit_scope(s, NULL, 0) says they may change anything again (the default).
 * More than STORE_SCOPE_MAX names are taken as anything.  The names are borrowed until then.
 */
void store_commit_scope(struct store *s, const char *const *names, size_t n);
#define STORE_SCOPE_MAX 64u
#define STORE_MODEL_SLOTS 1024u
/* The log's size, in pages, from which a commit folds it into the database (SQLite's default
 * automatic checkpoint, which pimd's commit hook does in its place). */
#define STORE_WAL_AUTOCHECKPOINT 1000
const char *store_path(struct store *s);

/* Rows written or deleted per transaction for a large model (sql/0006-model-staging.sql):
 * other writers wait for one such part at most, not for the whole model. */
#define STORE_PART_ROWS 10000u

/*
 * A model as the store keeps it, in plain structs: the RPC layer (rpc.h) converts them from and
 * to pim.proto, so that the protocol never reaches SQLite.  Strings and arrays are borrowed
 * unless said otherwise; a string is never NULL ("" when absent).
 *
 * The enums' values are what the rows hold and what the content hash (store_model_hash) reads:
 * never renumber them.
 */
enum store_alloc_kind {
	STORE_ALLOC_UNSPECIFIED = 0,
	STORE_ALLOC_ARGUMENT = 1,  /* a function argument (input, output or weight passed in) */
	STORE_ALLOC_ALLOC = 2,     /* an intermediate buffer */
	STORE_ALLOC_GLOBAL = 3,    /* a constant (weights) */
};

enum store_operand_role {
	STORE_ROLE_UNSPECIFIED = 0,
	STORE_ROLE_IN = 1,
	STORE_ROLE_OUT = 2,
	STORE_ROLE_INOUT = 3,
};

/* Extents of each kind a region may have (manifest.h: MANIFEST_EXTENTS_MAX), and their text:
 * that many numbers of up to 20 digits. */
#define STORE_EXTENTS_MAX 16u
#define STORE_EXTENTS_TEXT (STORE_EXTENTS_MAX * 21 + 1)

struct store_allocation {
	uint32_t id;
	uint64_t bytes;
	enum store_alloc_kind kind;
	const char *name;
};

struct store_operand {
	uint32_t allocation_id;
	uint64_t bytes;            /* 1 .. INT64_MAX */
	const char *elem_type;     /* at most STORE_ELEM_TYPE_MAX bytes */
	uint32_t elem_bits;
	enum store_operand_role role;  /* in, out or inout */
};

/* A region's operands are one text of its row (sql/0012-operands-in-regions.sql): at most
 * STORE_OPERANDS_MAX (manifest.h: MANIFEST_OPERANDS_MAX) of at most STORE_OPERAND_TEXT bytes. */
#define STORE_ELEM_TYPE_MAX 16u
#define STORE_OPERANDS_MAX 1024u
#define STORE_OPERAND_TEXT 80u
/* The text of n operands into buf (n * STORE_OPERAND_TEXT + 1 bytes), NUL-terminated; returns
 * its end, or NULL when an operand is not one the text holds (role, bytes, elem_type above). */
char *store_operands_text(const struct store_operand *ops, size_t n, char *buf);
/* The operand at *p of such a text ending at end into o (its elem_type in type); *p moves past
 * it.  1: one read, 0: the text ends, -EIO: the text does not parse. */
int store_operand_next(const char **p, const char *end, struct store_operand *o,
		       char type[STORE_ELEM_TYPE_MAX + 1]);

struct store_region {
	uint32_t id, order;
	const char *name, *op, *location;
	uint64_t n_par, n_total;
	uint64_t trip;             /* 0 is stored as 1 */
	const uint64_t *parallel_extents, *reduction_extents; /* at most STORE_EXTENTS_MAX each */
	size_t n_parallel_extents, n_reduction_extents;
	const struct store_operand *operands; /* store_model_walk: none, they follow one at a time */
	size_t n_operands;
};

/* A whole manifest, its regions in program order (store_model_get: allocations by id). */
struct store_manifest {
	const char *name, *source;
	const struct store_allocation *allocations;
	size_t n_allocations;
	const struct store_region *regions;
	size_t n_regions;
};
/* Frees a manifest store_model_get made (and everything it points to). */
void store_manifest_free(struct store_manifest *m);

/*
 * A manifest handed over a piece at a time (a large one is never whole in memory: its regions
 * are decoded from the request's frame one by one).  allocation(ctx, i, a) fills *a with
 * allocation i, for any i in any order (its strings valid until the next call); region(ctx, i,
 * err) gives region i for i = 0, 1, ... in turn, valid until the next call, or NULL with err
 * set (which fails the put).
 */
struct store_manifest_src {
	const char *name, *source;
	size_t n_allocations, n_regions;
	void (*allocation)(void *ctx, size_t i, struct store_allocation *a);
	const struct store_region *(*region)(void *ctx, size_t i, struct pim_error *err);
	void *ctx;
};

/* A stored model's summary; its strings are the struct's own (store_model_info_clear). */
struct store_model_info {
	char *name, *source;
	uint32_t owner_uid;
	int64_t loaded_at;         /* seconds since the epoch */
	uint32_t regions, allocations;
	uint64_t allocation_bytes;
};
void store_model_info_clear(struct store_model_info *info);

/* Stores a validated manifest as model src->name, owned by uid.  An existing model of that name
 * is an error (-EEXIST) unless replace; replacing another user's model needs the owner's uid,
 * uid 0 or the daemon's own uid (-EPERM).  All or nothing: a manifest of more than
 * STORE_PART_ROWS regions and allocations is written in parts, under a staged row no reader
 * finds, and named by a last small transaction; a crash before leaves nothing visible, and
 * store_staged_cleanup deletes the parts at the next start.  info (if not NULL) receives the
 * stored model's summary; *replaced is the id of the model it replaced, 0 when none. */
int store_model_put_each(struct store *s, const struct store_manifest_src *src, uid_t uid, bool replace,
			 int64_t *replaced, struct store_model_info *info, struct pim_error *err);

/* store_model_put_each for a manifest whole in memory. */
int store_model_put(struct store *s, const struct store_manifest *m, uid_t uid, bool replace, bool *replaced,
		    struct store_model_info *info, struct pim_error *err);

/* Summaries of all models, by name; free with store_model_list_free. */
int store_model_list(struct store *s, struct store_model_info **out, size_t *n, struct pim_error *err);
void store_model_list_free(struct store_model_info *v, size_t n);

/* The summary of a model (info may be NULL) and, if manifest is not NULL, its stored manifest
 * (free with store_manifest_free), read in one state of the store; -ENOENT if absent. */
int store_model_get(struct store *s, const char *name, struct store_model_info *info,
		    struct store_manifest **manifest, struct pim_error *err);

struct store_model_walker {
	/* optional: every allocation, by id, before the regions (a valid during the call) */
	int (*allocation)(void *ctx, const struct store_allocation *a);
	/* a region (valid during the call), index counting them; its operands follow */
	int (*region)(void *ctx, size_t index, const struct store_region *r);
	/* an operand (valid during the call) of the region of that index */
	int (*operand)(void *ctx, size_t region, const struct store_operand *o);
	bool by_id; /* the regions by id rather than in program order (index counts them so) */
};

/* Calls w's functions for every allocation of a model (if w has that function), then for every
 * region in program order, each followed by its
 * operands, holding nothing of the model meanwhile (a model of a million regions need not be
 * in memory as a manifest); stops at the first negative return, which it returns.  Call it
 * inside a read transaction (store_read_begin) for one state of the model. */
int store_model_walk(struct store *s, int64_t model_id, const struct store_model_walker *w, void *ctx,
		     struct pim_error *err);

/* Deletes the rows of models a crash left staged, in parts; *n: how many models. */
int store_staged_cleanup(struct store *s, unsigned *n, struct pim_error *err);

/* Removes a model (*removed: its id, when not NULL); only its owner, uid 0 or the daemon's own
 * uid may (-EPERM).  A model of more
 * than STORE_PART_ROWS regions is staged (gone for every reader) in one small transaction, and
 * its rows deleted STORE_PART_ROWS at a time after.   When the file
 * system is full (-ENOSPC), the removal is retried with the reserve's room, and returns 1 if it
 * succeeded so. */
int store_model_remove(struct store *s, const char *name, uid_t uid, int64_t *removed, struct pim_error *err);

/* Room kept beside the database (path-reserve) for removing models on a full file system. */
#define STORE_RESERVE_BYTES (8u << 20)
/* False when the reserve could not be allocated (or was spent and not yet restored). */
bool store_reserve_held(struct store *s);

int store_model_count(struct store *s, unsigned *n, struct pim_error *err);
/* Another connection changed the models: forget what s keeps of them in memory (the count). */
void store_forget_cached(struct store *s);
/* A group of changes in one transaction and one fsync (group commit): after
 * store_group_begin, each change (store_model_put, store_model_remove, store_metrics_put, ...)
 * is kept or dropped on its own, and none is stored before store_group_commit returns 0.
 * On failure, *committed says whether the group was committed (and may not be on disk) or
 * rolled back (nothing of it is stored); the removal's retry with the reserve on a full
 * file system is for a change made alone. */
int store_group_begin(struct store *s, struct pim_error *err);
int store_group_commit(struct store *s, bool *committed, struct pim_error *err);

/*
 * A change written by another thread than the one that asks for it (pimd's writer thread,
 * threads.c), so that the asking thread never waits for SQLite's write lock or an fsync:
 * write() runs there, with that thread's connection, inside a group of changes; done() runs
 * back on the asking thread once the group is on disk, with write's result, or the group's
 * failure (then nothing of the change may be stored).  done() is called exactly once, also
 * when the writer stops, and never inside the call that handed the change over (so it may free
 * what the caller still uses); changes handed over are written in that order.
 */
struct store_write {
	int (*write)(struct store *s, void *data, struct pim_error *err);
	void (*done)(void *data, int r, const struct pim_error *err);
	void *data;
	/* a part (STORE_WRITE_AGAIN) is on disk: what write() did for it holds (writer thread) */
	void (*part_done)(void *data);
	struct store_write *next; /* store_write_via's, while it waits for store_write_settle */
};
/*
 * What write() returns when it wrote a part of a long change (the metrics of a large run): the
 * part is committed with its group, part_done() is called once it is on disk, and write() is
 * called again after the changes handed over meanwhile, until it returns something else; done()
 * comes once, after the last part.  A part whose group fails is written again (alone) as if
 * part_done() had not come for it: write() keeps what a part did apart until then.  In a group
 * only (store_in_group): alone, a change is written whole.
 */
#define STORE_WRITE_AGAIN 1
/* True while s makes a group of changes (store_group_begin .. store_group_commit). */
bool store_in_group(const struct store *s);
/* Who takes store_writes: submit() queues w and returns 0, or refuses it (negative errno, and
 * neither of w's functions is called); -ESHUTDOWN: it writes no more. */
struct store_writer {
	int (*submit)(void *owner, const struct store_write *w);
	void *owner;
};
/*
 * Hands w to wr.  Without a writer (wr or its submit NULL), or when it refuses w, w waits in s
 * (which keeps the pointer: w must stay valid until its done()) for store_write_settle, which
 * writes it with s alone and calls done().  Either way done() never runs inside this call.
 */
void store_write_via(const struct store_writer *wr, struct store *s, struct store_write *w);
/* Writes the changes waiting in s (store_write_via) and calls their done(), in the order they
 * came, also those handed over meanwhile by a done(); returns how many.  store_close settles
 * what is left. */
unsigned store_write_settle(struct store *s);

/*
 * pimd's event loop never queries SQLite (doc/design.md §6.1), and this guard checks it:
 * store_guard_thread(true) marks the calling thread as one that must not (false: none); from
 * then on each SQL statement a connection of the store runs on that thread is counted, save
 * the changes store_write_settle writes there because no writer took them (store_write_via).
 * store_guard_count says how many, and *sql (when not NULL) the last of them (its text, valid
 * on the guarded thread until the next).
 */
void store_guard_thread(bool on);
unsigned long store_guard_count(const char **sql);

/* The number of regions of a model, 0 if there is none of that name. */
int store_model_regions(struct store *s, const char *name, uint64_t *n, struct pim_error *err);

/* A read transaction: what is read between begin and end is one state of the database, whatever
 * other connections commit meanwhile. */
int store_read_begin(struct store *s, struct pim_error *err);
void store_read_end(struct store *s);

/* ---------------------------------------------------------------- platforms */

struct store_platform {
	char name[256];      /* identity: CPU model and PMU */
	char cpu_model[128];
	char pmu[64];
	char kernel[64];
	double b_cpu;        /* B/s; 0 when not measured */
	/* how b_cpu was measured (sql/0008): empty and 0 when not known (measured before 0008) */
	double b_cpu_spread;       /* relative spread of the figure between the probe's rounds */
	char b_cpu_method[160];    /* the probe, in words */
	int64_t b_cpu_measured_at; /* seconds since the epoch */
	bool b_cpu_busy;           /* the machine was busy while the probe ran */
	char b_cpu_load[160];      /* the load during the probe, in words */
	char b_cpu_host[64];       /* CPUs online and memory when measured: measured again if not so */
};

/* Finds the platform by name or creates it; *id is its row id.  A b_cpu > 0 in p is stored
 * with the b_cpu_ fields (store_platform_set_b_cpu); with b_cpu 0, p->b_cpu and the b_cpu_
 * fields receive the stored values (0 and empty if none). */
int store_platform_ensure(struct store *s, struct store_platform *p, int64_t *id,
			  struct pim_error *err);
/* Stores p's b_cpu (> 0) and the b_cpu_ fields as platform id's measured B_cpu. */
int store_platform_set_b_cpu(struct store *s, int64_t id, const struct store_platform *p,
			     struct pim_error *err);

/* ---------------------------------------------------------------- metrics and decisions */

/* The model's row id (-ENOENT if absent). */
int store_model_id(struct store *s, const char *name, int64_t *id, struct pim_error *err);
/* As store_model_id, and -EPERM unless uid owns the model, is 0 or is pimd's own uid (what
 * changes a model's metrics is held to the same rule as replacing it). */
int store_model_id_for(struct store *s, const char *name, uid_t uid, const char *what, int64_t *id,
		       struct pim_error *err);

/*
 * A region's metrics on a platform, as the store keeps them (the region_metrics table); the RPC
 * layer converts them from and to pim.RegionMetrics (placement_rpc.h).  Strings are borrowed.
 */
struct store_metrics {
	uint32_t region_id;
	enum placement_evidence evidence;
	double t_host;              /* seconds, one execution (median) */
	double t_host_spread;       /* (max - min) / median over repetitions, 0 if unknown */
	bool have_n_rd;
	double n_rd;
	bool have_store;            /* c_store and the three backend counts */
	double c_store, c_be1, c_be2, c_be3;
	double bw_read_estimate;    /* B/s, timing backend; 0: none */
	const char *source;         /* "perf stat import", "profile job 3", ... */
	int64_t updated_at;         /* when stored (read back only) */
	double source_b_cpu;        /* imported: B_cpu of the measuring host, B/s; 0 unknown */
	const char *origin_host;    /* from the fleet catalogue: who measured, when, its backend; */
	int64_t origin_measured_at; /* "" / 0 for this host's own metrics */
	const char *origin_backend;
};

/* Stores the metrics of one region (replacing earlier ones on this platform) and drops the
 * model's stored decisions, in one transaction.  -ENOENT for an unknown region. */
int store_metrics_put(struct store *s, int64_t model_id, int64_t platform_id, int64_t run_id,
		      const struct store_metrics *m, struct pim_error *err);

/*
 * Calls fn for each metrics row of a model on a platform, by region id; m and its strings are
 * valid during the call only.  A negative return of fn ends the walk and is returned (-ENOMEM
 * with a message in err).  Memory stays constant however many regions the model has.
 */
typedef int (*store_metrics_fn)(void *ctx, const struct store_metrics *m);
int store_metrics_each(struct store *s, int64_t model_id, int64_t platform_id, store_metrics_fn fn, void *ctx,
		       struct pim_error *err);

/* All metrics of a model on a platform, by region id (their strings copied); free with
 * store_metrics_list_free. */
int store_metrics_list(struct store *s, int64_t model_id, int64_t platform_id,
		       struct store_metrics **out, size_t *n, struct pim_error *err);
void store_metrics_list_free(struct store_metrics *v, size_t n);

/* A version of the model that changes with its manifest and with any of its metrics, and is
 * never given to another model (sql/0005-model-version.sql): placement answers are stored
 * under a key that includes it.  -ENOENT if the model is gone. */
int store_model_version(struct store *s, int64_t model_id, int64_t *version, struct pim_error *err);

/* A stored placement answer for (model, platform, key): 1 and the packed reply (free()), or 0.
 * At most STORE_DECISIONS_PER_MODEL answers are kept per model and platform, the newest. */
#define STORE_DECISIONS_PER_MODEL 64
int store_decision_get(struct store *s, int64_t model_id, int64_t platform_id, const char *key,
		       uint8_t **reply, size_t *len, struct pim_error *err);
int store_decision_put(struct store *s, int64_t model_id, int64_t platform_id, const char *key,
		       const uint8_t *reply, size_t len, struct pim_error *err);

/* ---------------------------------------------------------------- profile runs and samples */

struct store_sample {
	uint32_t region;
	uint32_t group;
	uint32_t rep;
	uint64_t executions;
	uint64_t time_ns;
	uint64_t time_enabled, time_running;
	unsigned n_values;
	const uint64_t *values;
};

int store_run_create(struct store *s, int64_t model_id, int64_t platform_id, uid_t uid,
		     unsigned warmups, unsigned reps, unsigned regions_total, int64_t *run_id,
		     struct pim_error *err);

/* What the daemon knows of a run; NULL/negative fields are left as they are. */
struct store_run_update {
	const char *state;          /* queued, running, done, failed */
	const char *backend;        /* timing, counters */
	const char *backend_reason;
	const char *message;
	int64_t worker_uid;         /* < 0: unchanged */
	int64_t regions_done;
	int64_t repetitions_done, repetitions_total;
	bool finished;              /* sets finished_at */
};
int store_run_update(struct store *s, int64_t run_id, const struct store_run_update *u,
		     struct pim_error *err);

/* Stores samples of a run in one transaction (and counts them in the run).  Nothing is
 * acknowledged before the commit. */
int store_samples_put(struct store *s, int64_t run_id, const struct store_sample *v, size_t n,
		      struct pim_error *err);

/* Calls fn for every sample of a run from region from_region on, ordered by region, group and
 * repetition (values point into a buffer valid during the call); stops at fn's first non-zero
 * return: a negative one is an error, a positive one is returned as it is. */
int store_samples_each(struct store *s, int64_t run_id, uint32_t from_region,
		       int (*fn)(void *ctx, const struct store_sample *sample), void *ctx,
		       struct pim_error *err);

/* A profile run as stored; its strings are the struct's own (store_run_clear). */
struct store_run {
	int64_t id;
	char *state;               /* queued, running, done, failed, cancelled */
	char *model;
	char *backend, *backend_reason;
	uint32_t regions_done, regions_total;
	uint64_t repetitions_done, repetitions_total;
	uint64_t samples;
	char *message;
	uint32_t uid;              /* the worker's */
	int64_t created_at, finished_at;
};
/* -ENOENT if there is no such run. */
int store_run_get(struct store *s, int64_t run_id, struct store_run *out, struct pim_error *err);
void store_run_clear(struct store_run *r);

/* Runs a previous pimd left queued or running are failed, saying so; returns how many. */
int store_runs_abandon(struct store *s, struct pim_error *err);

/* ---------------------------------------------------------------- the fleet catalogue */

/* The model's content hash (SHA-256 of its manifest without its name, as 64 hex digits): its
 * identity in the fleet catalogue.  Computed from the stored rows when first asked for, then
 * kept in the model's row. */
int store_model_hash(struct store *s, int64_t model_id, char hash[65], struct pim_error *err);

/* The model's id and whether it has metrics on the platform (-ENOENT: no such model). */
int store_model_measured(struct store *s, const char *name, int64_t platform_id, int64_t *model_id,
			 bool *measured, struct pim_error *err);

/*
 * Metrics fetched from the catalogue, in one transaction: begin, a row each (with origin_host
 * set; -ENOENT for a region the model lacks, the rest stands), end (keep: committed durably,
 * with the model's stored answers dropped; else nothing of it stays).  A statement fewer per
 * row than store_metrics_put: a new host's first answer waits for all of them.
 */
int store_fetched_begin(struct store *s, struct pim_error *err);
int store_fetched_put(struct store *s, int64_t model_id, int64_t platform_id, const struct store_metrics *m,
		      struct pim_error *err);
/* n rows, STORE_FETCHED_ROWS to a statement: 0 and *missing the rows of regions the model
 * lacks (not stored; the rest stand), or < 0 (-EINVAL: a row not valid; nothing of it stored). */
#define STORE_FETCHED_ROWS 64
int store_fetched_put_many(struct store *s, int64_t model_id, int64_t platform_id, const struct store_metrics *const *m,
			   size_t n, size_t *missing, struct pim_error *err);
int store_fetched_end(struct store *s, int64_t model_id, bool keep, struct pim_error *err);
/* As store_fetched_end; *version: the model's version as committed (store_model_version). */
int store_fetched_end_version(struct store *s, int64_t model_id, bool keep, int64_t *version, struct pim_error *err);

/* What a row of the outbox says of where its metrics come from (platform.h: fleet_key and
 * fleet_json). */
struct store_outbox_origin {
	const char *model_hash;
	const char *platform_key;
	const char *platform_json;
	const char *backend;       /* counters, timing */
};

/*
 * Queues run_id's metrics for the catalogue (sql/0010-catalogue-outbox.sql): a snapshot, as a
 * change (in a group, it stands or falls with the run's end, stored in the same group).
 */
int store_outbox_add_run(struct store *s, int64_t run_id, const struct store_outbox_origin *o,
			 const char *message, unsigned regions_measured, struct pim_error *err);
/* Queues the imported metrics of a region, labelled imported, with the importing uid. */
int store_outbox_add_import(struct store *s, int64_t model_id, int64_t platform_id, uint32_t region_id, uid_t uid,
			    const struct store_outbox_origin *o, struct pim_error *err);

struct store_outbox_row {
	int64_t id;
	char *kind, *publish_key, *model_name, *model_hash, *platform_key, *platform_json, *backend;
	char *payload;             /* JSON {"summary": {...}, "metrics": [...]} */
	int64_t regions, uid, measured_at;
};
/* The oldest row not refused: 1 and *o (store_outbox_row_free), or 0 when there is none. */
int store_outbox_next(struct store *s, struct store_outbox_row *o, struct pim_error *err);
void store_outbox_row_free(struct store_outbox_row *o);
/* Published: gone.  Refused for its content (why): kept, skipped from now on. */
int store_outbox_delete(struct store *s, int64_t id, struct pim_error *err);
int store_outbox_fail(struct store *s, int64_t id, const char *why, struct pim_error *err);
int store_outbox_attempt(struct store *s, int64_t id, struct pim_error *err);
int store_outbox_depth(struct store *s, uint64_t *pending, uint64_t *failed, struct pim_error *err);

/* What an operator is told to do with a damaged database. */
#define STORE_DAMAGED_ADVICE                                                                       \
	"; pimd will not serve from it.  Stop pimd and move the file aside (with its -wal file); "   \
	"restore it from a backup, or let pimd start with an empty store and load the models "      \
	"again (\"sqlite3 FILE .recover\" may save part of the old one)"

/* PRAGMA quick_check: -EUCLEAN with a message naming the file and what to do when the database
 * is damaged (store_open runs it, so a damaged store is refused rather than served in part). */
int store_quick_check(struct store *s, struct pim_error *err);

/* PRAGMA integrity_check == "ok". */
int store_check_integrity(struct store *s, struct pim_error *err);

#endif
