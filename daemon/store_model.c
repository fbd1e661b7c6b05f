/* SPDX-License-Identifier: MIT */
/* The store's models: written (whole or in parts), listed, walked, read back and removed. */
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

char *store_col_strdup(sqlite3_stmt *st, int i)
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
	m->name = store_col_strdup(st, 1);
	m->source = store_col_strdup(st, 2);
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
int store_model_find(struct store *s, const char *name, int64_t *id, uint32_t *owner,
		      Pim__ModelSummary **summary, struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_MODEL_FIND);
	int r;

	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	r = sqlite3_step(st);
	if (r == SQLITE_DONE) {
		sqlite3_reset(st);
		return 0;
	}
	if (r != SQLITE_ROW)
		return store_db_err(s, err, "looking up a model");
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

int store_may_modify(uid_t uid, uint32_t owner)
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

int store_step_done(struct store *s, sqlite3_stmt *st, const char *what, struct pim_error *err)
{
	int r = sqlite3_step(st);
	sqlite3_reset(st);
	return r == SQLITE_DONE ? 0 : store_db_err(s, err, what);
}

/* The model's row, named name (the rest: allocations_insert, regions_insert). */
static int model_row_insert(struct store *s, const Pim__Manifest *m, size_t n_regions, const char *name,
			    uid_t uid, int64_t *model_id, struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_MODEL_INSERT);
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
	if ((r = store_step_done(s, st, "inserting the model", err)) < 0)
		return r;
	*model_id = sqlite3_last_insert_rowid(s->db);
	return 0;
}

/* Allocations [from, to) of m. */
static int allocations_insert(struct store *s, const Pim__Manifest *m, int64_t model_id, size_t from,
			      size_t to, struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_ALLOC_INSERT);
	int r;

	for (size_t i = from; i < to; i++) {
		const Pim__Allocation *a = m->allocations[i];
		sqlite3_bind_int64(st, 1, model_id);
		sqlite3_bind_int64(st, 2, a->id);
		sqlite3_bind_int64(st, 3, (int64_t)a->bytes);
		sqlite3_bind_int(st, 4, a->kind);
		sqlite3_bind_text(st, 5, a->name ? a->name : "", -1, SQLITE_STATIC);
		if ((r = store_step_done(s, st, "inserting an allocation", err)) < 0)
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
	sqlite3_stmt *st = store_stmt_get(s, ST_REGION_INSERT);
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
	if ((r = store_step_done(s, st, "inserting a region", err)) < 0)
		return r;
	st = store_stmt_get(s, ST_OPERAND_INSERT);
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
		if ((r = store_step_done(s, st, "inserting an operand", err)) < 0)
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
	sqlite3_stmt *st = store_stmt_get(s, ST_MODEL_STAGE);
	sqlite3_bind_int64(st, 1, id);
	return store_step_done(s, st, "staging a model", err);
}

/* Whether m may be stored as uid asks: 1 and the id of the model it replaces, 0 if there is none,
 * or -EEXIST / -EPERM.  In a write transaction. */
static int model_may_put(struct store *s, const Pim__Manifest *m, uid_t uid, bool replace, int64_t *old_id,
			 struct pim_error *err)
{
	uint32_t owner;
	int r = store_model_find(s, m->name, old_id, &owner, NULL, err);

	if (r <= 0)
		return r;
	if (!replace)
		return err_set(err, -EEXIST, "model \"%s\" exists; remove it first or load with replace "
			       "(pimctl model load --replace)", m->name);
	if (!store_may_modify(uid, owner))
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
	return store_exec_simple(s, ST_BEGIN, err);
}

static int part_commit(struct store *s, int r, struct pim_error *err)
{
	if (r >= 0 && (r = store_commit_durable(s, err)) >= 0)
		return 0;
	store_rollback(s);
	return r;
}

/* 1 when the profile runs of model id hold more than n samples, 0 when not, or -errno. */
static int samples_more_than(struct store *s, int64_t id, unsigned n, struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_SAMPLES_MORE_THAN);
	int r;

	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, n);
	r = sqlite3_step(st);
	sqlite3_reset(st);
	if (r == SQLITE_ROW)
		return 1;
	return r == SQLITE_DONE ? 0 : store_db_err(s, err, "counting a model's samples");
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
			sqlite3_stmt *st = store_stmt_get(s, some[k]);
			sqlite3_bind_int64(st, 1, id);
			sqlite3_bind_int64(st, 2, STORE_PART_ROWS);
			r = store_step_done(s, st, "removing a model's rows", err);
			int changed = r >= 0 ? sqlite3_changes(s->db) : 0;
			if ((r = part_commit(s, r, err)) < 0)
				return r;
			if (!changed)
				break;
		}
	if ((r = part_begin(s, err)) < 0)
		return r;
	sqlite3_stmt *st = store_stmt_get(s, ST_MODEL_DELETE);
	sqlite3_bind_int64(st, 1, id);
	return part_commit(s, store_step_done(s, st, "removing a model", err), err);
}

/*
 * A model of more than STORE_PART_ROWS regions and allocations, written in parts
 * (sql/0006-model-staging.sql): the checks and the model's row, staged; allocations and regions,
 * about STORE_PART_ROWS rows per transaction; then one small transaction checks again, stages
 * the model it replaces and names the new one.  Until then no reader finds it; after a crash,
 * store_staged_cleanup deletes what was written.  The replaced model is deleted in parts after.
 */
static int model_put_parts(struct store *s, const Pim__Manifest *m, const struct regions_src *src, uid_t uid,
			   bool replace, int64_t *replaced, struct pim_error *err)
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
			sqlite3_stmt *st = store_stmt_get(s, ST_MODEL_UNSTAGE);
			sqlite3_bind_int64(st, 1, id);
			sqlite3_bind_text(st, 2, m->name, -1, SQLITE_STATIC);
			r = store_step_done(s, st, "naming the model", err);
		}
		r = part_commit(s, r, err);
	}
	if (r < 0) {
		/* what a failure here leaves, the next start deletes */
		(void)model_delete_parts(s, id, NULL);
		return r;
	}
	s->models = -1;
	*replaced = found > 0 ? old_id : 0;
	/* The replaced model is no longer found: deleting its rows may fail (the next start
	 * finishes it) without undoing the load. */
	if (found > 0)
		(void)model_delete_parts(s, old_id, NULL);
	return 0;
}

int store_model_put_each(struct store *s, const Pim__Manifest *m, size_t n_regions,
			 const Pim__Region *(*region)(void *ctx, size_t i, struct pim_error *err), void *ctx,
			 uid_t uid, bool replace, int64_t *replaced, Pim__ModelSummary **summary,
			 struct pim_error *err)
{
	const struct regions_src src = { n_regions, region, ctx };
	int64_t id, new_id;
	int r;

	*replaced = 0;
	/* (a group's change is a savepoint: the writer takes no model written in parts) */
	if (n_regions + m->n_allocations > STORE_PART_ROWS && !s->grouped) {
		r = model_put_parts(s, m, &src, uid, replace, replaced, err);
	} else {
		size_t i = 0;
		if ((r = store_change_begin(s, err)) < 0)
			return r;
		if ((r = model_may_put(s, m, uid, replace, &id, err)) > 0) {
			sqlite3_stmt *st = store_stmt_get(s, ST_MODEL_DELETE);
			sqlite3_bind_int64(st, 1, id);
			if ((r = store_step_done(s, st, "removing the old model", err)) >= 0)
				*replaced = id;
		}
		if (r >= 0 && (r = model_row_insert(s, m, n_regions, m->name, uid, &new_id, err)) >= 0 &&
		    (r = allocations_insert(s, m, new_id, 0, m->n_allocations, err)) >= 0)
			r = regions_insert(s, &src, new_id, &i, SIZE_MAX, err);
		if ((r = part_commit(s, r, err)) < 0) {
			*replaced = 0;
			return r;
		}
		s->models = -1;
	}
	if (r < 0)
		return r;
	if (summary) {
		r = store_model_find(s, m->name, &id, NULL, summary, err);
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
	int64_t gone;
	int r = store_model_put_each(s, m, m->n_regions, region_of, (void *)m, uid, replace, &gone, summary,
				     err);

	*replaced = gone != 0;
	return r;
}

int store_staged_cleanup(struct store *s, unsigned *n, struct pim_error *err)
{
	int r;

	*n = 0;
	for (;;) {
		sqlite3_stmt *st = store_stmt_get(s, ST_MODEL_STAGED);
		if ((r = sqlite3_step(st)) == SQLITE_DONE) {
			sqlite3_reset(st);
			return 0;
		}
		if (r != SQLITE_ROW) {
			sqlite3_reset(st);
			return store_db_err(s, err, "looking for staged models");
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
	sqlite3_stmt *st = store_stmt_get(s, ST_MODEL_LIST);
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
		r = store_db_err(s, err, "listing models");
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
	sqlite3_stmt *rs = store_stmt_get(s, w->by_id ? ST_REGION_SELECT_BY_ID : ST_REGION_SELECT),
		     *os = store_stmt_get(s, w->by_id ? ST_OPERAND_SELECT_BY_ID : ST_OPERAND_SELECT);
	struct store_region_row g;
	size_t index = 0;
	int r, ro = SQLITE_ROW, k = 0;
	bool op_pending = false;

	if (w->allocation) {
		sqlite3_stmt *as = store_stmt_get(s, ST_ALLOC_SELECT);
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
			k = store_db_err(s, err, "reading allocations");
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
			k = store_db_err(s, err, "reading operands");
			break;
		}
		index++;
	}
	if (k >= 0 && r != SQLITE_DONE && r != SQLITE_ROW)
		k = store_db_err(s, err, "reading regions");
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
		return store_db_err(s, err, "starting a read");
	r = store_model_find(s, name, &id, NULL, &sum, err);
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

static int model_remove_once(struct store *s, const char *name, uid_t uid, int64_t *removed,
			     struct pim_error *err)
{
	int64_t id;
	uint32_t owner;
	uint64_t regions = 0;
	int r;

	if ((r = store_change_begin(s, err)) < 0)
		return r;
	r = store_model_find(s, name, &id, &owner, NULL, err);
	if (r == 0)
		r = err_set(err, -ENOENT, "no model named \"%s\"", name);
	if (r < 0)
		goto fail;
	if (!store_may_modify(uid, owner)) {
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
	sqlite3_stmt *st = store_stmt_get(s, parts ? ST_MODEL_STAGE : ST_MODEL_DELETE);
	sqlite3_bind_int64(st, 1, id);
	if ((r = store_step_done(s, st, "removing the model", err)) < 0)
		goto fail;
	if ((r = store_commit_durable(s, err)) < 0)
		goto fail;
	s->models = -1;
	if (removed)
		*removed = id;
	/* gone for every reader: rows left by a failure here are deleted at the next start */
	if (parts)
		(void)model_delete_parts(s, id, NULL);
	return 0;
fail:
	store_rollback(s);
	return r;
}

int store_model_remove(struct store *s, const char *name, uid_t uid, int64_t *removed, struct pim_error *err)
{
	int r = model_remove_once(s, name, uid, removed, err);

	if (r == 0 && !s->reserve_held)
		(void)store_reserve_fill(s); /* room may have come back */
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
	store_reserve_release(s);
	sqlite3_exec(s->db, "PRAGMA wal_checkpoint(RESTART)", NULL, NULL, NULL);
	r = model_remove_once(s, name, uid, removed, err);
	sqlite3_exec(s->db, "PRAGMA wal_checkpoint(RESTART)", NULL, NULL, NULL);
	(void)store_reserve_fill(s);
	if (r == -ENOSPC)
		return err_prefix(err, "the file system is full, and the removal needs more room than "
				  "pimd's reserve of %u MiB; free some space", STORE_RESERVE_BYTES >> 20);
	return r < 0 ? r : 1;
}

void store_forget_cached(struct store *s) { s->models = -1; }
