/* SPDX-License-Identifier: MIT */
/* The store's platforms, region metrics, stored decisions and metrics fetched from the fleet
 * catalogue. */
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

/* ---------------------------------------------------------------- platforms */

static void column_text(sqlite3_stmt *st, int col, char *buf, size_t len)
{
	const char *t = (const char *)sqlite3_column_text(st, col);
	snprintf(buf, len, "%s", t ? t : "");
}

int store_platform_ensure(struct store *s, struct store_platform *p, int64_t *id,
			  struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_PLATFORM_FIND);
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
		st = store_stmt_get(s, ST_PLATFORM_UPDATE);
		sqlite3_bind_int64(st, 1, *id);
		sqlite3_bind_text(st, 2, p->kernel, -1, SQLITE_STATIC);
		if ((r = store_step_done(s, st, "updating the platform", err)) < 0)
			return r;
	} else {
		sqlite3_reset(st);
		if (r != SQLITE_DONE)
			return store_db_err(s, err, "looking up the platform");
		st = store_stmt_get(s, ST_PLATFORM_INSERT);
		sqlite3_bind_text(st, 1, p->name, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, p->cpu_model, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, p->pmu, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 4, p->kernel, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 5, (int64_t)time(NULL));
		if ((r = store_step_done(s, st, "adding the platform", err)) < 0)
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
	sqlite3_stmt *st = store_stmt_get(s, ST_PLATFORM_SET_B_CPU);
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_double(st, 2, p->b_cpu);
	sqlite3_bind_double(st, 3, p->b_cpu_spread);
	sqlite3_bind_text(st, 4, p->b_cpu_method, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, p->b_cpu_measured_at);
	sqlite3_bind_int(st, 6, p->b_cpu_busy);
	sqlite3_bind_text(st, 7, p->b_cpu_load, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 8, p->b_cpu_host, -1, SQLITE_STATIC);
	return store_step_done(s, st, "storing the measured B_cpu", err);
}

/* ---------------------------------------------------------------- metrics and decisions */

int store_model_id(struct store *s, const char *name, int64_t *id, struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_MODEL_ID);
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
		return store_db_err(s, err, "looking up a model");
	return err_set(err, -ENOENT, "no model named \"%s\"", name);
}

int store_model_regions(struct store *s, const char *name, uint64_t *n, struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_MODEL_FIND);
	int r;

	*n = 0;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	r = sqlite3_step(st);
	if (r == SQLITE_ROW)
		*n = (uint64_t)sqlite3_column_int64(st, 5);
	sqlite3_reset(st);
	return r == SQLITE_ROW || r == SQLITE_DONE ? 0 : store_db_err(s, err, "looking up a model");
}

int store_model_version(struct store *s, int64_t model_id, int64_t *version, struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_MODEL_VERSION);
	int r;

	sqlite3_bind_int64(st, 1, model_id);
	r = sqlite3_step(st);
	if (r == SQLITE_ROW)
		*version = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	if (r == SQLITE_ROW)
		return 0;
	return r == SQLITE_DONE ? err_set(err, -ENOENT, "the model was removed meanwhile")
				: store_db_err(s, err, "reading a model's version");
}

int store_read_begin(struct store *s, struct pim_error *err)
{
	return store_exec_simple(s, ST_BEGIN_READ, err);
}

void store_read_end(struct store *s)
{
	if (!sqlite3_get_autocommit(s->db))
		store_exec_simple(s, ST_COMMIT, NULL);
}

int store_model_id_for(struct store *s, const char *name, uid_t uid, const char *what, int64_t *id,
		       struct pim_error *err)
{
	uint32_t owner;
	int r = store_model_find(s, name, id, &owner, NULL, err);
	if (r == 0)
		return err_set(err, -ENOENT, "no model named \"%s\"", name);
	if (r < 0)
		return r;
	if (!store_may_modify(uid, owner))
		return err_set(err, -EPERM, "model \"%s\" belongs to uid %u; only its owner, root or pimd's "
			       "own user may %s", name, owner, what);
	return 0;
}

static const char *evidence_text(enum placement_evidence e)
{
	switch (e) {
	case PL_EVIDENCE_COUNTERS: return "counters";
	case PL_EVIDENCE_ESTIMATE: return "estimate";
	case PL_EVIDENCE_IMPORTED: return "imported";
	default: return NULL;
	}
}

static enum placement_evidence evidence_from_text(const char *t)
{
	if (t && strcmp(t, "counters") == 0)
		return PL_EVIDENCE_COUNTERS;
	if (t && strcmp(t, "estimate") == 0)
		return PL_EVIDENCE_ESTIMATE;
	if (t && strcmp(t, "imported") == 0)
		return PL_EVIDENCE_IMPORTED;
	return PL_EVIDENCE_NONE;
}

static void bind_opt(sqlite3_stmt *st, int i, bool have, double v)
{
	if (have)
		sqlite3_bind_double(st, i, v);
	else
		sqlite3_bind_null(st, i);
}

int store_metrics_put(struct store *s, int64_t model_id, int64_t platform_id, int64_t run_id,
		      const struct store_metrics *m, struct pim_error *err)
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
	if ((r = store_change_begin(s, err)) < 0)
		return r;
	st = store_stmt_get(s, ST_REGION_EXISTS);
	sqlite3_bind_int64(st, 1, model_id);
	sqlite3_bind_int64(st, 2, m->region_id);
	r = sqlite3_step(st);
	sqlite3_reset(st);
	if (r == SQLITE_DONE) {
		r = err_set(err, -ENOENT, "the model has no region %u", m->region_id);
		goto fail;
	}
	if (r != SQLITE_ROW) {
		r = store_db_err(s, err, "looking up a region");
		goto fail;
	}
	st = store_stmt_get(s, ST_METRICS_UPSERT);
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
	if ((r = store_step_done(s, st, "storing metrics", err)) < 0)
		goto fail;
	/* Stored answers rest on the old metrics: drop them with the change. */
	st = store_stmt_get(s, ST_DECISIONS_DELETE);
	sqlite3_bind_int64(st, 1, model_id);
	if ((r = store_step_done(s, st, "dropping stored decisions", err)) < 0)
		goto fail;
	if ((r = store_commit_durable(s, err)) < 0)
		goto fail;
	return 0;
fail:
	store_rollback(s);
	return r;
}

int store_metrics_each(struct store *s, int64_t model_id, int64_t platform_id, store_metrics_fn fn, void *ctx,
		       struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_METRICS_SELECT);
	int r;

	sqlite3_bind_int64(st, 1, model_id);
	sqlite3_bind_int64(st, 2, platform_id);
	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_metrics m = { 0 };
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
		m.source = source ? (const char *)source : "";
		m.updated_at = sqlite3_column_int64(st, 11);
		m.source_b_cpu = sqlite3_column_double(st, 12); /* NULL reads as 0: unknown */
		const unsigned char *oh = sqlite3_column_text(st, 13), *ob = sqlite3_column_text(st, 15);
		m.origin_host = oh ? (const char *)oh : "";
		m.origin_measured_at = sqlite3_column_int64(st, 14);
		m.origin_backend = ob ? (const char *)ob : "";
		if ((r = fn(ctx, &m)) < 0) {
			sqlite3_reset(st);
			return r == -ENOMEM ? err_set(err, -ENOMEM, "out of memory reading metrics") : r;
		}
	}
	sqlite3_reset(st);
	if (r != SQLITE_DONE)
		return store_db_err(s, err, "reading metrics");
	return 0;
}

struct metrics_vec {
	struct store_metrics *v;
	size_t len, cap;
};

void store_metrics_list_free(struct store_metrics *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free((char *)v[i].source);
		free((char *)v[i].origin_host);
		free((char *)v[i].origin_backend);
	}
	free(v);
}

static int metrics_keep(void *ctx, const struct store_metrics *m)
{
	struct metrics_vec *mv = ctx;

	if (mv->len == mv->cap) {
		size_t cap = mv->cap ? mv->cap * 2 : 64;
		struct store_metrics *nv = realloc(mv->v, cap * sizeof *nv);
		if (!nv)
			return -ENOMEM;
		mv->v = nv;
		mv->cap = cap;
	}
	struct store_metrics *c = &mv->v[mv->len];
	*c = *m;
	c->source = strdup(m->source);
	c->origin_host = strdup(m->origin_host);
	c->origin_backend = strdup(m->origin_backend);
	mv->len++; /* freed with the rest, also when a copy failed */
	return c->source && c->origin_host && c->origin_backend ? 0 : -ENOMEM;
}

int store_metrics_list(struct store *s, int64_t model_id, int64_t platform_id,
		       struct store_metrics **out, size_t *n, struct pim_error *err)
{
	struct metrics_vec mv = { 0 };
	int r = store_metrics_each(s, model_id, platform_id, metrics_keep, &mv, err);

	if (r < 0) {
		store_metrics_list_free(mv.v, mv.len);
		return r;
	}
	*out = mv.v;
	*n = mv.len;
	return 0;
}

int store_decision_get(struct store *s, int64_t model_id, int64_t platform_id, const char *key,
		       uint8_t **reply, size_t *len, struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_DECISION_SELECT);
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
		return store_db_err(s, err, "reading a stored decision");
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
	if ((r = store_change_begin(s, err)) < 0)
		return r;
	st = store_stmt_get(s, ST_DECISION_UPSERT);
	sqlite3_bind_int64(st, 1, model_id);
	sqlite3_bind_int64(st, 2, platform_id);
	sqlite3_bind_text(st, 3, key, -1, SQLITE_STATIC);
	sqlite3_bind_blob(st, 4, reply, (int)len, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, (int64_t)time(NULL));
	if ((r = store_step_done(s, st, "storing a decision", err)) < 0)
		goto fail;
	/* Any client may vary parameters: bound what their answers take in the store. */
	st = store_stmt_get(s, ST_DECISIONS_TRIM);
	sqlite3_bind_int64(st, 1, model_id);
	sqlite3_bind_int64(st, 2, platform_id);
	sqlite3_bind_int(st, 3, STORE_DECISIONS_PER_MODEL);
	if ((r = store_step_done(s, st, "trimming stored decisions", err)) < 0)
		goto fail;
	if ((r = store_commit_durable(s, err)) < 0)
		goto fail;
	return 0;
fail:
	store_rollback(s);
	return r;
}

int store_fetched_begin(struct store *s, struct pim_error *err)
{
	return store_exec_simple(s, ST_BEGIN, err);
}

static bool fetched_valid(const struct store_metrics *m)
{
	return evidence_text(m->evidence) && m->t_host > 0 && isfinite(m->t_host) && m->origin_host &&
	       *m->origin_host;
}

/* Binds row m of fetched metrics to st's parameters after base. */
static void fetched_bind(sqlite3_stmt *st, int base, int64_t model_id, int64_t platform_id, int64_t now,
			 const struct store_metrics *m)
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

int store_fetched_put(struct store *s, int64_t model_id, int64_t platform_id, const struct store_metrics *m,
		      struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_METRICS_FETCHED);

	if (!fetched_valid(m))
		return err_set(err, -EINVAL, "metrics of region %u: not valid", m->region_id);
	fetched_bind(st, 0, model_id, platform_id, (int64_t)time(NULL), m);
	int r = sqlite3_step(st);
	sqlite3_reset(st);
	if (r == SQLITE_DONE)
		return 0;
	if (sqlite3_extended_errcode(s->db) == SQLITE_CONSTRAINT_FOREIGNKEY)
		return err_set(err, -ENOENT, "the model has no region %u", m->region_id);
	return store_db_err(s, err, "storing metrics from the catalogue");
}

/* STORE_FETCHED_ROWS rows in one statement: 0, -ENOENT when one names a region the model lacks
 * (the statement then stored none of them), or < 0 and err. */
static int fetched_put_chunk(struct store *s, int64_t model_id, int64_t platform_id, int64_t now,
			     const struct store_metrics *const *m, struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_METRICS_FETCHED_MANY);

	for (int i = 0; i < STORE_FETCHED_ROWS; i++)
		fetched_bind(st, i * FETCHED_COLUMNS, model_id, platform_id, now, m[i]);
	int r = sqlite3_step(st);
	sqlite3_reset(st);
	if (r == SQLITE_DONE)
		return 0;
	if (sqlite3_extended_errcode(s->db) == SQLITE_CONSTRAINT_FOREIGNKEY)
		return -ENOENT;
	return store_db_err(s, err, "storing metrics from the catalogue");
}

int store_fetched_put_many(struct store *s, int64_t model_id, int64_t platform_id, const struct store_metrics *const *m,
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
	return store_fetched_end_version(s, model_id, keep, NULL, err);
}

int store_fetched_end_version(struct store *s, int64_t model_id, bool keep, int64_t *version, struct pim_error *err)
{
	int r;

	if (!keep) {
		store_rollback(s);
		return 0;
	}
	sqlite3_stmt *st = store_stmt_get(s, ST_DECISIONS_DELETE);
	sqlite3_bind_int64(st, 1, model_id);
	if ((r = store_step_done(s, st, "dropping stored decisions", err)) < 0 ||
	    (r = store_exec_simple(s, ST_VERSION_BUMP, err)) < 0)
		goto fail;
	st = store_stmt_get(s, ST_MODEL_VERSION_SET);
	sqlite3_bind_int64(st, 1, model_id);
	if ((r = store_step_done(s, st, "changing the model's version", err)) < 0 ||
	    (version && (r = store_model_version(s, model_id, version, err)) < 0) || (r = store_commit_durable(s, err)) < 0)
		goto fail;
	return 0;
fail:
	store_rollback(s);
	return r;
}
