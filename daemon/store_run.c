/* SPDX-License-Identifier: MIT */
/* The store's profile runs and their samples, models' content hashes and the catalogue outbox. */
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
#include "store_priv.h"

/* ---------------------------------------------------------------- profile runs and samples */

int store_run_create(struct store *s, int64_t model_id, int64_t platform_id, uid_t uid,
		     unsigned warmups, unsigned reps, unsigned regions_total, int64_t *run_id,
		     struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_RUN_INSERT);
	int r;

	sqlite3_bind_int64(st, 1, model_id);
	sqlite3_bind_int64(st, 2, platform_id);
	sqlite3_bind_int64(st, 3, uid);
	sqlite3_bind_int64(st, 4, warmups);
	sqlite3_bind_int64(st, 5, reps);
	sqlite3_bind_int64(st, 6, regions_total);
	sqlite3_bind_int64(st, 7, (int64_t)time(NULL));
	if ((r = store_change_begin(s, err)) < 0)
		return r;
	if ((r = store_step_done(s, st, "recording a profile run", err)) < 0)
		goto fail;
	*run_id = sqlite3_last_insert_rowid(s->db);
	if ((r = store_commit_durable(s, err)) < 0)
		goto fail;
	return 0;
fail:
	store_rollback(s);
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
	sqlite3_stmt *st = store_stmt_get(s, ST_RUN_UPDATE);

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
	return store_step_done(s, st, "updating a profile run", err);
}

int store_samples_put(struct store *s, int64_t run_id, const struct store_sample *v, size_t n,
		      struct pim_error *err)
{
	sqlite3_stmt *st;
	int r;

	if (n == 0)
		return 0;
	if ((r = store_change_begin(s, err)) < 0)
		return r;
	st = store_stmt_get(s, ST_SAMPLE_INSERT);
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
			r = store_db_err(s, err, "storing samples");
			goto fail;
		}
	}
	st = store_stmt_get(s, ST_RUN_ADD_SAMPLES);
	sqlite3_bind_int64(st, 1, run_id);
	sqlite3_bind_int64(st, 2, (int64_t)n);
	if ((r = store_step_done(s, st, "counting samples", err)) < 0)
		goto fail;
	if ((r = store_commit_durable(s, err)) < 0)
		goto fail;
	return 0;
fail:
	store_rollback(s);
	return r;
}

void store_run_clear(struct store_run *r)
{
	free(r->state);
	free(r->model);
	free(r->backend);
	free(r->backend_reason);
	free(r->message);
	*r = (struct store_run){ 0 };
}

int store_run_get(struct store *s, int64_t run_id, struct store_run *out, struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_RUN_SELECT);
	int r;

	sqlite3_bind_int64(st, 1, run_id);
	r = sqlite3_step(st);
	if (r == SQLITE_DONE) {
		sqlite3_reset(st);
		return err_set(err, -ENOENT, "no profile job %lld", (long long)run_id);
	}
	if (r != SQLITE_ROW) {
		sqlite3_reset(st);
		return store_db_err(s, err, "reading a profile run");
	}
	struct store_run p = {
		.id = sqlite3_column_int64(st, 0),
		.state = store_col_strdup(st, 1),
		.model = store_col_strdup(st, 2),
		.backend = store_col_strdup(st, 3),
		.backend_reason = store_col_strdup(st, 4),
		.regions_done = (uint32_t)sqlite3_column_int64(st, 5),
		.regions_total = (uint32_t)sqlite3_column_int64(st, 6),
		.repetitions_done = (uint64_t)sqlite3_column_int64(st, 7),
		.repetitions_total = (uint64_t)sqlite3_column_int64(st, 8),
		.samples = (uint64_t)sqlite3_column_int64(st, 9),
		.message = store_col_strdup(st, 10),
		.uid = (uint32_t)sqlite3_column_int64(st, 11),
		.created_at = sqlite3_column_int64(st, 12),
		.finished_at = sqlite3_column_int64(st, 13),
	};
	sqlite3_reset(st);
	if (!p.state || !p.model || !p.backend || !p.backend_reason || !p.message) {
		store_run_clear(&p);
		return err_set(err, -ENOMEM, "out of memory");
	}
	*out = p;
	return 0;
}

int store_runs_abandon(struct store *s, struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_RUNS_ABANDON);
	int r;

	sqlite3_bind_int64(st, 1, (int64_t)time(NULL));
	if ((r = store_step_done(s, st, "failing abandoned profile runs", err)) < 0)
		return r;
	return sqlite3_changes(s->db);
}

int store_samples_each(struct store *s, int64_t run_id, uint32_t from_region,
		       int (*fn)(void *ctx, const struct store_sample *sample), void *ctx,
		       struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_SAMPLES_SELECT);
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
		return store_db_err(s, err, "reading samples");
	return 0;
}

/* ---------------------------------------------------------------- the fleet catalogue */

/* The model's content hash: its manifest in a canonical text, without its name (sha256.h). */
struct hash_walk {
	struct sha256 h;
	char line[STORE_EXTENTS_TEXT * 2 + 1024];
};

static void hash_line(struct hash_walk *hw, int n)
{
	if (n > 0)
		sha256_update(&hw->h, hw->line, (size_t)n < sizeof hw->line ? (size_t)n : sizeof hw->line - 1);
}

static int hash_allocation(void *ctx, const struct store_allocation *a)
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

static int hash_region(void *ctx, size_t index, const struct store_region *g)
{
	struct hash_walk *hw = ctx;
	char pe[STORE_EXTENTS_TEXT], re[STORE_EXTENTS_TEXT];

	extents_text(pe, sizeof pe, g->parallel_extents, g->n_parallel_extents);
	extents_text(re, sizeof re, g->reduction_extents, g->n_reduction_extents);
	hash_line(hw, snprintf(hw->line, sizeof hw->line, "r %u %u %s %s %" PRIu64 " %" PRIu64 " %" PRIu64
			       " [%s] [%s] %s\n", g->id, g->order, g->name, g->op, g->n_par, g->n_total, g->trip,
			       pe, re, g->location));
	return 0;
}

static int hash_operand(void *ctx, size_t region, const struct store_operand *o)
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
	sqlite3_stmt *st = store_stmt_get(s, ST_MODEL_HASH_GET);
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
		return store_db_err(s, err, "reading a model's content hash");
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
	st = store_stmt_get(s, ST_MODEL_HASH_SET);
	sqlite3_bind_int64(st, 1, model_id);
	sqlite3_bind_text(st, 2, hash, -1, SQLITE_STATIC);
	sqlite3_step(st);
	sqlite3_reset(st);
	return 0;
}

int store_model_measured(struct store *s, const char *name, int64_t platform_id, int64_t *model_id,
			 bool *measured, struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_MODEL_MEASURED);
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
	return r == SQLITE_ROW ? 0 : store_db_err(s, err, "looking for a model's metrics");
}

/* One row into the outbox, as a change (a savepoint in a group); 1 if the statement added none. */
static int outbox_insert(struct store *s, sqlite3_stmt *st, const char *what, struct pim_error *err)
{
	int r = store_change_begin(s, err);

	if (r < 0) {
		sqlite3_reset(st);
		return r;
	}
	if ((r = store_step_done(s, st, what, err)) < 0) {
		store_rollback(s);
		return r;
	}
	bool none = sqlite3_changes(s->db) == 0;
	if ((r = store_commit_durable(s, err)) < 0) {
		store_rollback(s);
		return r;
	}
	return none;
}

int store_outbox_add_run(struct store *s, int64_t run_id, const struct store_outbox_origin *o,
			 const char *message, unsigned regions_measured, struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_OUTBOX_ADD_RUN);

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
	sqlite3_stmt *st = store_stmt_get(s, ST_OUTBOX_ADD_IMPORT);

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
	sqlite3_stmt *st = store_stmt_get(s, ST_OUTBOX_NEXT);
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
		return store_db_err(s, err, "reading the catalogue outbox");
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
	sqlite3_stmt *st = store_stmt_get(s, id);
	int r;

	sqlite3_bind_int64(st, 1, row);
	if (text)
		sqlite3_bind_text(st, 2, text, -1, SQLITE_STATIC);
	if ((r = store_change_begin(s, err)) < 0) {
		sqlite3_reset(st);
		return r;
	}
	if ((r = store_step_done(s, st, what, err)) < 0 || (r = store_commit_durable(s, err)) < 0)
		store_rollback(s);
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

int store_outbox_depth(struct store *s, uint64_t *pending, uint64_t *failed, struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_OUTBOX_DEPTH);
	int r = sqlite3_step(st);

	if (r == SQLITE_ROW) {
		*pending = (uint64_t)sqlite3_column_int64(st, 0);
		*failed = (uint64_t)sqlite3_column_int64(st, 1);
	}
	sqlite3_reset(st);
	return r == SQLITE_ROW ? 0 : store_db_err(s, err, "counting the catalogue outbox");
}
