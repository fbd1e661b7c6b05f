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

void store_model_info_clear(struct store_model_info *info)
{
	free(info->name);
	free(info->source);
	*info = (struct store_model_info){ 0 };
}

void store_model_list_free(struct store_model_info *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		store_model_info_clear(&v[i]);
	free(v);
}

/* A row of ST_MODEL_FIND or ST_MODEL_LIST; false when out of memory (info holds nothing). */
static bool info_from_row(sqlite3_stmt *st, struct store_model_info *info)
{
	*info = (struct store_model_info){
		.name = store_col_strdup(st, 1),
		.source = store_col_strdup(st, 2),
		.owner_uid = (uint32_t)sqlite3_column_int64(st, 3),
		.loaded_at = sqlite3_column_int64(st, 4),
		.regions = (uint32_t)sqlite3_column_int64(st, 5),
		.allocations = (uint32_t)sqlite3_column_int64(st, 6),
		.allocation_bytes = (uint64_t)sqlite3_column_int64(st, 7),
	};
	if (info->name && info->source)
		return true;
	store_model_info_clear(info);
	return false;
}

/* Finds a model: 1 and its id (and summary) if present, 0 if not. */
int store_model_find(struct store *s, const char *name, int64_t *id, uint32_t *owner,
		      struct store_model_info *info, struct pim_error *err)
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
	if (info && !info_from_row(st, info)) {
		sqlite3_reset(st);
		return err_set(err, -ENOMEM, "out of memory");
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
static int model_row_insert(struct store *s, const struct store_manifest_src *src, const char *name,
			    uid_t uid, int64_t *model_id, struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_MODEL_INSERT);
	uint64_t bytes = 0;
	int r;

	for (size_t i = 0; i < src->n_allocations; i++) {
		struct store_allocation a;
		src->allocation(src->ctx, i, &a);
		bytes += a.bytes;
	}
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, src->source ? src->source : "", -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, uid);
	sqlite3_bind_int64(st, 4, (int64_t)time(NULL));
	sqlite3_bind_int64(st, 5, (int64_t)src->n_regions);
	sqlite3_bind_int64(st, 6, (int64_t)src->n_allocations);
	sqlite3_bind_int64(st, 7, (int64_t)bytes);
	if ((r = store_step_done(s, st, "inserting the model", err)) < 0)
		return r;
	*model_id = sqlite3_last_insert_rowid(s->db);
	return 0;
}

/* Allocations [from, to) of src. */
static int allocations_insert(struct store *s, const struct store_manifest_src *src, int64_t model_id,
			      size_t from, size_t to, struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_ALLOC_INSERT);
	int r;

	for (size_t i = from; i < to; i++) {
		struct store_allocation a;
		src->allocation(src->ctx, i, &a);
		sqlite3_bind_int64(st, 1, model_id);
		sqlite3_bind_int64(st, 2, a.id);
		sqlite3_bind_int64(st, 3, (int64_t)a.bytes);
		sqlite3_bind_int(st, 4, (int)a.kind);
		sqlite3_bind_text(st, 5, a.name ? a.name : "", -1, SQLITE_STATIC);
		if ((r = store_step_done(s, st, "inserting an allocation", err)) < 0)
			return r;
	}
	return 0;
}

/* Rows of one table bound into its STORE_INSERT_ROWS-row statement, written when it is full or
 * at the end (batch_flush). */
struct batch {
	sqlite3_stmt *st;
	int cols;
	unsigned n;
	const char *what;
};

static int batch_flush(struct store *s, struct batch *b, struct pim_error *err)
{
	if (!b->n)
		return 0;
	sqlite3_bind_int(b->st, STORE_INSERT_ROWS * b->cols + 1, (int)b->n);
	b->n = 0;
	return store_step_done(s, b->st, b->what, err);
}

/* The first parameter of the next row (1-based); the batch is written first when full. */
static int batch_row(struct store *s, struct batch *b, struct pim_error *err)
{
	int r = b->n == STORE_INSERT_ROWS ? batch_flush(s, b, err) : 0;

	if (r < 0)
		return r;
	if (!b->n) {
		sqlite3_reset(b->st);
		sqlite3_clear_bindings(b->st);
	}
	return (int)(b->n++) * b->cols + 1;
}

/* Decimal digits of x at p (at least one); returns their end. */
static char *put_u64(char *p, uint64_t x)
{
	char tmp[20];
	size_t n = 0;

	do
		tmp[n++] = (char)('0' + x % 10);
	while ((x /= 10));
	while (n)
		*p++ = tmp[--n];
	return p;
}

char *store_operands_text(const struct store_operand *ops, size_t n, char *buf)
{
	char *p = buf;

	for (size_t j = 0; j < n; j++) {
		const struct store_operand *o = &ops[j];
		const char *t = o->elem_type ? o->elem_type : "";
		size_t tl = strnlen(t, STORE_ELEM_TYPE_MAX + 1);
		if (o->role < STORE_ROLE_IN || o->role > STORE_ROLE_INOUT || !o->bytes || o->bytes > INT64_MAX ||
		    tl > STORE_ELEM_TYPE_MAX)
			return NULL;
		if (j)
			*p++ = ';';
		p = put_u64(p, o->allocation_id);
		*p++ = ' ';
		p = put_u64(p, o->bytes);
		*p++ = ' ';
		p = put_u64(p, (uint64_t)o->role);
		*p++ = ' ';
		p = put_u64(p, o->elem_bits);
		*p++ = ' ';
		p = put_u64(p, tl);
		*p++ = ':';
		memcpy(p, t, tl);
		p += tl;
	}
	*p = 0;
	return p;
}

/* A decimal number of at most max at *p, *p moved past it; false if none or larger. */
static bool get_u64(const char **p, const char *end, uint64_t max, uint64_t *x)
{
	const char *q = *p;
	uint64_t v = 0;

	if (q == end || *q < '0' || *q > '9')
		return false;
	for (; q < end && *q >= '0' && *q <= '9'; q++) {
		unsigned d = (unsigned)(*q - '0');
		if (d > max || v > (max - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*x = v;
	*p = q;
	return true;
}

static bool get_sep(const char **p, const char *end, char c)
{
	if (*p == end || **p != c)
		return false;
	(*p)++;
	return true;
}

int store_operand_next(const char **p, const char *end, struct store_operand *o,
		       char type[STORE_ELEM_TYPE_MAX + 1])
{
	uint64_t alloc, bytes, role, bits, tl;
	const char *q = *p;

	if (q == end)
		return 0;
	if (!get_u64(&q, end, UINT32_MAX, &alloc) || !get_sep(&q, end, ' ') ||
	    !get_u64(&q, end, INT64_MAX, &bytes) || !bytes || !get_sep(&q, end, ' ') ||
	    !get_u64(&q, end, STORE_ROLE_INOUT, &role) || role < STORE_ROLE_IN || !get_sep(&q, end, ' ') ||
	    !get_u64(&q, end, UINT32_MAX, &bits) || !get_sep(&q, end, ' ') ||
	    !get_u64(&q, end, STORE_ELEM_TYPE_MAX, &tl) || !get_sep(&q, end, ':') || (size_t)(end - q) < tl)
		return -EIO;
	memcpy(type, q, tl);
	type[tl] = 0;
	q += tl;
	/* one more follows after a ';', or the text ends here */
	if (q != end && (!get_sep(&q, end, ';') || q == end))
		return -EIO;
	*o = (struct store_operand){ .allocation_id = (uint32_t)alloc, .bytes = bytes, .elem_type = type,
				     .elem_bits = (uint32_t)bits, .role = (enum store_operand_role)role };
	*p = q;
	return 1;
}

/* Region g with its operands into the batch (texts copied: g may not outlive the call); ot holds
 * STORE_OPERAND_TEXT bytes per operand. */
static int region_insert(struct store *s, struct batch *rb, const struct store_region *g, int64_t model_id,
			 char *ot, struct pim_error *err)
{
	char pe[STORE_EXTENTS_TEXT], re[STORE_EXTENTS_TEXT];
	int k = batch_row(s, rb, err);

	if (k < 0)
		return k;
	join_extents(pe, sizeof pe, g->parallel_extents, g->n_parallel_extents);
	join_extents(re, sizeof re, g->reduction_extents, g->n_reduction_extents);
	sqlite3_stmt *st = rb->st;
	sqlite3_bind_int64(st, k, model_id);
	sqlite3_bind_int64(st, k + 1, g->id);
	sqlite3_bind_text(st, k + 2, g->name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, k + 3, g->op, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, k + 4, g->order);
	sqlite3_bind_int64(st, k + 5, (int64_t)g->n_par);
	sqlite3_bind_int64(st, k + 6, (int64_t)g->n_total);
	sqlite3_bind_int64(st, k + 7, (int64_t)(g->trip ? g->trip : 1));
	sqlite3_bind_text(st, k + 8, pe, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, k + 9, re, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, k + 10, g->location ? g->location : "", -1, SQLITE_TRANSIENT);
	char *end = store_operands_text(g->operands, g->n_operands, ot);
	if (!end)
		return err_set(err, -EINVAL, "region %u: an operand with no role, no bytes or an element type "
			       "of more than %u bytes", g->id, STORE_ELEM_TYPE_MAX);
	sqlite3_bind_text(st, k + 11, ot, (int)(end - ot), SQLITE_TRANSIENT);
	return 0;
}

/* Regions from *i on, until about STORE_PART_ROWS rows are written (max_rows: all); *i moves on. */
static int regions_insert(struct store *s, const struct store_manifest_src *src, int64_t model_id, size_t *i,
			  size_t max_rows, struct pim_error *err)
{
	struct batch rb = { store_stmt_get(s, ST_REGION_INSERT_MANY), REGION_COLUMNS, 0, "inserting regions" };
	char small[8 * STORE_OPERAND_TEXT], *ot = small, *big = NULL;
	size_t cap = sizeof small;
	int r = 0;

	/* rows counts a region's operands too: about as many bytes as that many rows */
	for (size_t rows = 0; *i < src->n_regions && rows < max_rows && r >= 0; (*i)++) {
		const struct store_region *g = src->region(src->ctx, *i, err);
		if (!g) {
			r = err->code < 0 ? err->code : err_set(err, -EIO, "regions[%zu]: unreadable", *i);
			break;
		}
		if (g->n_operands > STORE_OPERANDS_MAX) {
			r = err_set(err, -E2BIG, "regions[%zu]: %zu operands (at most %u)", *i, g->n_operands,
				    STORE_OPERANDS_MAX);
			break;
		}
		if (g->n_operands * STORE_OPERAND_TEXT + 1 > cap) {
			cap = STORE_OPERANDS_MAX * STORE_OPERAND_TEXT + 1;
			if (!big && !(big = malloc(cap))) {
				r = err_set(err, -ENOMEM, "out of memory");
				break;
			}
			ot = big;
		}
		r = region_insert(s, &rb, g, model_id, ot, err);
		rows += 1 + g->n_operands;
	}
	if (r >= 0)
		r = batch_flush(s, &rb, err);
	free(big);
	return r;
}

static int model_stage(struct store *s, int64_t id, struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_MODEL_STAGE);
	sqlite3_bind_int64(st, 1, id);
	return store_step_done(s, st, "staging a model", err);
}

/* Whether a model named name may be stored as uid asks: 1 and the id of the model it replaces,
 * 0 if there is none, or -EEXIST / -EPERM.  In a write transaction. */
static int model_may_put(struct store *s, const char *name, uid_t uid, bool replace, int64_t *old_id,
			 struct pim_error *err)
{
	uint32_t owner;
	int r = store_model_find(s, name, old_id, &owner, NULL, err);

	if (r <= 0)
		return r;
	if (!replace)
		return err_set(err, -EEXIST, "model \"%s\" exists; remove it first or load with replace "
			       "(pimctl model load --replace)", name);
	if (!store_may_modify(uid, owner))
		return err_set(err, -EPERM, "model \"%s\" belongs to uid %u; only its owner, root or pimd's "
			       "own user may replace it", name, owner);
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

/* Deletes model id and everything of it, in a change begun by the caller. */
static int model_delete(struct store *s, int64_t id, const char *what, struct pim_error *err)
{
	static const enum stmt_id order[] = { ST_METRICS_DELETE, ST_REGIONS_DELETE, ST_ALLOCS_DELETE,
					      ST_MODEL_DELETE };
	int r = 0;

	for (size_t k = 0; k < ELEMENTSOF(order) && r >= 0; k++) {
		sqlite3_stmt *st = store_stmt_get(s, order[k]);
		sqlite3_bind_int64(st, 1, id);
		r = store_step_done(s, st, what, err);
	}
	return r;
}

/* Deletes the rows of a staged model, STORE_PART_ROWS samples of its profile runs, then as many
 * metrics, regions (with their operands), then allocations, per transaction, then its row (and
 * its runs with it).  Left to the model's row, the samples of an in-situ run (up to 4,000,000)
 * would all go in its one transaction, holding every other writer that long. */
static int model_delete_parts(struct store *s, int64_t id, struct pim_error *err)
{
	static const enum stmt_id some[] = { ST_SAMPLES_DELETE_SOME, ST_METRICS_DELETE_SOME,
					     ST_REGIONS_DELETE_SOME, ST_ALLOCS_DELETE_SOME };
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
static int model_put_parts(struct store *s, const struct store_manifest_src *src, uid_t uid, bool replace,
			   int64_t *replaced, struct pim_error *err)
{
	int64_t id = -1, old_id;
	int r;

	if ((r = part_begin(s, err)) < 0)
		return r;
	if ((r = model_may_put(s, src->name, uid, replace, &old_id, err)) >= 0 &&
	    (r = model_row_insert(s, src, " staging", uid, &id, err)) >= 0)
		r = model_stage(s, id, err);  /* named by its id: the name may be taken */
	if ((r = part_commit(s, r, err)) < 0)
		return r;
	for (size_t i = 0; i < src->n_allocations && r >= 0; i += STORE_PART_ROWS) {
		size_t to = i + STORE_PART_ROWS < src->n_allocations ? i + STORE_PART_ROWS : src->n_allocations;
		if ((r = part_begin(s, err)) >= 0)
			r = part_commit(s, allocations_insert(s, src, id, i, to, err), err);
	}
	for (size_t i = 0; i < src->n_regions && r >= 0;)
		if ((r = part_begin(s, err)) >= 0)
			r = part_commit(s, regions_insert(s, src, id, &i, STORE_PART_ROWS, err), err);
	int found = 0;
	if (r >= 0 && (r = part_begin(s, err)) >= 0) {
		if ((r = found = model_may_put(s, src->name, uid, replace, &old_id, err)) > 0)
			r = model_stage(s, old_id, err);
		if (r >= 0) {
			sqlite3_stmt *st = store_stmt_get(s, ST_MODEL_UNSTAGE);
			sqlite3_bind_int64(st, 1, id);
			sqlite3_bind_text(st, 2, src->name, -1, SQLITE_STATIC);
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

int store_model_put_each(struct store *s, const struct store_manifest_src *src, uid_t uid, bool replace,
			 int64_t *replaced, struct store_model_info *info, struct pim_error *err)
{
	int64_t id, new_id;
	int r;

	*replaced = 0;
	/* (a group's change is a savepoint: the writer takes no model written in parts) */
	if (src->n_regions + src->n_allocations > STORE_PART_ROWS && !s->grouped) {
		r = model_put_parts(s, src, uid, replace, replaced, err);
	} else {
		size_t i = 0;
		if ((r = store_change_begin(s, err)) < 0)
			return r;
		if ((r = model_may_put(s, src->name, uid, replace, &id, err)) > 0) {
			if ((r = model_delete(s, id, "removing the old model", err)) >= 0)
				*replaced = id;
		}
		if (r >= 0 && (r = model_row_insert(s, src, src->name, uid, &new_id, err)) >= 0 &&
		    (r = allocations_insert(s, src, new_id, 0, src->n_allocations, err)) >= 0)
			r = regions_insert(s, src, new_id, &i, SIZE_MAX, err);
		if ((r = part_commit(s, r, err)) < 0) {
			*replaced = 0;
			return r;
		}
		s->models = -1;
	}
	if (r < 0)
		return r;
	if (info) {
		r = store_model_find(s, src->name, &id, NULL, info, err);
		if (r <= 0)
			return r < 0 ? r : err_set(err, -EIO, "model vanished after commit");
	}
	return 0;
}

static void allocation_of(void *ctx, size_t i, struct store_allocation *a)
{
	*a = ((const struct store_manifest *)ctx)->allocations[i];
}

static const struct store_region *region_of(void *ctx, size_t i, struct pim_error *err)
{
	return &((const struct store_manifest *)ctx)->regions[i];
}

int store_model_put(struct store *s, const struct store_manifest *m, uid_t uid, bool replace, bool *replaced,
		    struct store_model_info *info, struct pim_error *err)
{
	const struct store_manifest_src src = {
		.name = m->name, .source = m->source, .n_allocations = m->n_allocations,
		.n_regions = m->n_regions, .allocation = allocation_of, .region = region_of, .ctx = (void *)m,
	};
	int64_t gone;
	int r = store_model_put_each(s, &src, uid, replace, &gone, info, err);

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

int store_model_list(struct store *s, struct store_model_info **out, size_t *n, struct pim_error *err)
{
	sqlite3_stmt *st = store_stmt_get(s, ST_MODEL_LIST);
	struct store_model_info *v = NULL;
	size_t len = 0, cap = 0;
	int r;

	while ((r = sqlite3_step(st)) == SQLITE_ROW) {
		if (len == cap) {
			cap = cap ? cap * 2 : 16;
			struct store_model_info *nv = realloc(v, cap * sizeof *v);
			if (!nv)
				goto oom;
			v = nv;
		}
		if (!info_from_row(st, &v[len]))
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
	store_model_list_free(v, len);
	return r;
}

/* "3,4,5" into e (at most STORE_EXTENTS_MAX numbers, as stored by join_extents). */
static int parse_extents(const char *t, uint64_t *e, size_t *n)
{
	size_t cnt = 0;

	*n = 0;
	while (t && *t) {
		char *end;
		uint64_t x = strtoull(t, &end, 10);
		if (end == t)
			break;
		if (cnt == STORE_EXTENTS_MAX)
			return -E2BIG;
		e[cnt++] = x;
		t = *end == ',' ? end + 1 : end;
	}
	*n = cnt;
	return 0;
}

/* Fills a walker's region from a row of ST_REGION_SELECT, its extents into pe and re (its
 * strings valid until the next step); false if the extents do not parse. */
static bool region_row(sqlite3_stmt *st, struct store_region *g, uint64_t *pe, uint64_t *re)
{
	const unsigned char *t;

	*g = (struct store_region){
		.id = (uint32_t)sqlite3_column_int64(st, 0),
		.name = (t = sqlite3_column_text(st, 1)) ? (const char *)t : "",
		.op = (t = sqlite3_column_text(st, 2)) ? (const char *)t : "",
		.order = (uint32_t)sqlite3_column_int64(st, 3),
		.n_par = (uint64_t)sqlite3_column_int64(st, 4),
		.n_total = (uint64_t)sqlite3_column_int64(st, 5),
		.trip = (uint64_t)sqlite3_column_int64(st, 6),
		.location = (t = sqlite3_column_text(st, 9)) ? (const char *)t : "",
		.parallel_extents = pe,
		.reduction_extents = re,
	};
	return parse_extents((const char *)sqlite3_column_text(st, 7), pe, &g->n_parallel_extents) == 0 &&
	       parse_extents((const char *)sqlite3_column_text(st, 8), re, &g->n_reduction_extents) == 0;
}

int store_model_walk(struct store *s, int64_t model_id, const struct store_model_walker *w, void *ctx,
		     struct pim_error *err)
{
	/* Regions in program order (or by id), each with its operands: one pass, nothing of the
	 * model held here. */
	sqlite3_stmt *rs = store_stmt_get(s, w->by_id ? ST_REGION_SELECT_BY_ID : ST_REGION_SELECT);
	struct store_region g;
	uint64_t pe[STORE_EXTENTS_MAX], re[STORE_EXTENTS_MAX];
	char type[STORE_ELEM_TYPE_MAX + 1];
	size_t index = 0;
	int r, k = 0;

	if (w->allocation) {
		sqlite3_stmt *as = store_stmt_get(s, ST_ALLOC_SELECT);
		sqlite3_bind_int64(as, 1, model_id);
		while (k >= 0 && (r = sqlite3_step(as)) == SQLITE_ROW) {
			const unsigned char *t = sqlite3_column_text(as, 3);
			const struct store_allocation a = {
				.id = (uint32_t)sqlite3_column_int64(as, 0),
				.bytes = (uint64_t)sqlite3_column_int64(as, 1),
				.kind = (enum store_alloc_kind)sqlite3_column_int(as, 2),
				.name = t ? (const char *)t : "",
			};
			k = w->allocation(ctx, &a);
		}
		if (k >= 0 && r != SQLITE_DONE)
			k = store_db_err(s, err, "reading allocations");
		sqlite3_reset(as);
		if (k < 0)
			return k;
	}
	sqlite3_bind_int64(rs, 1, model_id);
	while (k >= 0 && (r = sqlite3_step(rs)) == SQLITE_ROW) {
		if (!region_row(rs, &g, pe, re)) {
			k = err_set(err, -EIO, "%s: region %u of model %" PRId64 " has unreadable extents",
				    s->path, g.id, model_id);
			break;
		}
		/* (the text stays valid until the next step: the walker's calls do not step rs) */
		const char *p = (const char *)sqlite3_column_text(rs, 10);
		const char *end = p ? p + sqlite3_column_bytes(rs, 10) : NULL;
		if ((k = w->region(ctx, index, &g)) < 0)
			break;
		struct store_operand o;
		size_t n = 0;
		int got = 0;
		while (p && (got = store_operand_next(&p, end, &o, type)) > 0 && n++ < STORE_OPERANDS_MAX)
			if ((k = w->operand(ctx, index, &o)) < 0)
				break;
		if (k < 0)
			break;
		if (p && (got < 0 || n > STORE_OPERANDS_MAX)) {
			k = err_set(err, -EIO, "%s: region %u of model %" PRId64 " has unreadable operands",
				    s->path, g.id, model_id);
			break;
		}
		index++;
	}
	if (k >= 0 && r != SQLITE_DONE && r != SQLITE_ROW)
		k = store_db_err(s, err, "reading regions");
	sqlite3_reset(rs);
	return k < 0 ? k : 0;
}

/* store_model_walk building a store_manifest: every string and array an allocation of its own
 * (store_manifest_free).  The arrays are written here through b's pointers. */
struct manifest_build {
	struct store_manifest *m;
	struct store_allocation *allocations;
	struct store_region *regions;
	struct store_operand *ops;  /* the last region's, cap of them */
	size_t cap;
	size_t want, want_allocations;  /* as the summary says */
	struct pim_error *err;
};

void store_manifest_free(struct store_manifest *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n_regions; i++) {
		const struct store_region *g = &m->regions[i];
		free((char *)g->name);
		free((char *)g->op);
		free((char *)g->location);
		free((uint64_t *)g->parallel_extents);
		free((uint64_t *)g->reduction_extents);
		for (size_t j = 0; j < g->n_operands; j++)
			free((char *)g->operands[j].elem_type);
		free((struct store_operand *)g->operands);
	}
	for (size_t i = 0; i < m->n_allocations; i++)
		free((char *)m->allocations[i].name);
	free((struct store_region *)m->regions);
	free((struct store_allocation *)m->allocations);
	free((char *)m->name);
	free((char *)m->source);
	free(m);
}

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

static int build_region(void *ctx, size_t index, const struct store_region *r)
{
	struct manifest_build *b = ctx;
	struct store_manifest *m = b->m;
	bool oom = false;

	if (m->n_regions == b->want)
		return err_set(b->err, -EIO, "model \"%s\" has more regions than its summary says", m->name);
	struct store_region *g = &b->regions[m->n_regions++];
	*g = (struct store_region){
		.id = r->id,
		.order = r->order,
		.name = strdup(r->name),
		.op = strdup(r->op),
		.location = strdup(r->location),
		.n_par = r->n_par,
		.n_total = r->n_total,
		.trip = r->trip,
		.parallel_extents = extents_dup(r->parallel_extents, r->n_parallel_extents, &oom),
		.reduction_extents = extents_dup(r->reduction_extents, r->n_reduction_extents, &oom),
	};
	g->n_parallel_extents = g->parallel_extents ? r->n_parallel_extents : 0;
	g->n_reduction_extents = g->reduction_extents ? r->n_reduction_extents : 0;
	b->ops = NULL;
	b->cap = 0;
	if (!g->name || !g->op || !g->location || oom)
		return err_set(b->err, -ENOMEM, "out of memory");
	return 0;
}

static int build_operand(void *ctx, size_t region, const struct store_operand *o)
{
	struct manifest_build *b = ctx;
	struct store_region *g = &b->regions[region];

	if (g->n_operands == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4;
		struct store_operand *nv = realloc(b->ops, cap * sizeof *nv);
		if (!nv)
			return err_set(b->err, -ENOMEM, "out of memory");
		g->operands = b->ops = nv;
		b->cap = cap;
	}
	struct store_operand *p = &b->ops[g->n_operands++];
	*p = *o;
	p->elem_type = strdup(o->elem_type);
	return p->elem_type ? 0 : err_set(b->err, -ENOMEM, "out of memory");
}

static int build_allocation(void *ctx, const struct store_allocation *a)
{
	struct manifest_build *b = ctx;
	struct store_manifest *m = b->m;

	if (m->n_allocations == b->want_allocations)
		return err_set(b->err, -EIO, "model \"%s\" has more allocations than its summary says", m->name);
	struct store_allocation *c = &b->allocations[m->n_allocations++];
	*c = *a;
	c->name = strdup(a->name);
	return c->name ? 0 : err_set(b->err, -ENOMEM, "out of memory");
}

/* m's allocations and regions, of which the summary says there are n_allocations and n_regions. */
static int load_manifest(struct store *s, int64_t model_id, struct store_manifest *m, size_t n_allocations,
			 size_t n_regions, struct pim_error *err)
{
	static const struct store_model_walker build = {
		.allocation = build_allocation, .region = build_region, .operand = build_operand };
	struct manifest_build b = { .m = m, .want = n_regions, .want_allocations = n_allocations, .err = err };

	m->allocations = b.allocations = calloc(n_allocations ? n_allocations : 1, sizeof *b.allocations);
	m->regions = b.regions = calloc(n_regions ? n_regions : 1, sizeof *b.regions);
	if (!m->allocations || !m->regions)
		return err_set(err, -ENOMEM, "out of memory");
	return store_model_walk(s, model_id, &build, &b, err);
}

int store_model_get(struct store *s, const char *name, struct store_model_info *info,
		    struct store_manifest **manifest, struct pim_error *err)
{
	struct store_model_info sum = { 0 };
	struct store_manifest *m = NULL;
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
		m = calloc(1, sizeof *m);
		if (!m || !(m->name = strdup(sum.name)) || !(m->source = strdup(sum.source))) {
			r = err_set(err, -ENOMEM, "out of memory");
			goto out;
		}
		if ((r = load_manifest(s, id, m, sum.allocations, sum.regions, err)) < 0)
			goto out;
	}
	r = 0;
out:
	if (own && sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	if (r < 0) {
		store_model_info_clear(&sum);
		store_manifest_free(m);
		return r;
	}
	if (info)
		*info = sum;
	else
		store_model_info_clear(&sum);
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
	if (parts)
		r = model_stage(s, id, err);
	else
		r = model_delete(s, id, "removing the model", err);
	if (r < 0)
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
