/* SPDX-License-Identifier: MIT */
/*
 * Looking a model up in the fleet catalogue (catalogue.h, catalogue_fill): the lookup's
 * statements, its rows read and checked, stored first (a large model) or kept in memory for the
 * answer while a storer thread stores them, and the lookup on a thread of its own while the
 * answer reads the model.  The catalogue's connections, publisher and listing are catalogue.c.
 */
#include "catalogue_int.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "priority.h"

/* ---------------------------------------------------------------- looking a model up */

/*
 * A lookup in two steps, in one snapshot (REPEATABLE READ): SQL_LOOKUP_RUN finds the newest
 * measured run of the model on the platform (who measured it, when, with which backend: said
 * once, not on each row) and whether imported counts exist for them; SQL_LOOKUP_REGIONS then
 * reads that run's rows in the primary key's order (no sort: the first rows come at once).
 * Only where imported counts exist does SQL_LOOKUP_MIXED add, to the run's rows, the newest
 * imported row of each region the run lacks, each row naming its own origin.
 */
static const char SQL_LOOKUP_RUN[] =
	"SELECT b.id, b.host_id, extract(epoch FROM b.measured_at)::bigint, b.backend, EXISTS (SELECT 1 FROM "
	"pim_catalogue.runs r WHERE r.model_hash = $1 AND r.platform_key = $2 AND r.kind = 'imported') FROM (SELECT 1) "
	"one LEFT JOIN LATERAL (SELECT id, host_id, measured_at, backend FROM pim_catalogue.runs WHERE model_hash = $1 "
	"AND platform_key = $2 AND kind = 'measured' ORDER BY measured_at DESC, id DESC LIMIT 1) b ON true";
#define LOOKUP_COLUMNS \
	"m.region_id, m.evidence, m.t_host, m.t_host_spread, m.n_rd, m.c_store, m.c_be1, m.c_be2, m.c_be3, " \
	"m.bw_read_estimate, m.source_b_cpu"
static const char SQL_LOOKUP_REGIONS[] = "DECLARE lookup NO SCROLL CURSOR FOR SELECT " LOOKUP_COLUMNS
					 " FROM pim_catalogue.region_metrics m WHERE m.run_id = $1 ORDER BY m.region_id";
static const char SQL_LOOKUP_MIXED[] =
	"DECLARE lookup NO SCROLL CURSOR FOR "
	"WITH best AS (SELECT id, host_id, measured_at, backend FROM pim_catalogue.runs WHERE id = $3::bigint), "
	"pick AS (SELECT " LOOKUP_COLUMNS ", b.host_id, b.measured_at, b.backend FROM best b "
	"JOIN pim_catalogue.region_metrics m ON m.run_id = b.id "
	"UNION ALL SELECT * FROM (SELECT DISTINCT ON (m.region_id) " LOOKUP_COLUMNS ", r.host_id, r.measured_at, "
	"r.backend FROM pim_catalogue.runs r JOIN pim_catalogue.region_metrics m ON m.run_id = r.id "
	"WHERE r.model_hash = $1 AND r.platform_key = $2 AND r.kind = 'imported' AND NOT EXISTS (SELECT 1 FROM best b "
	"JOIN pim_catalogue.region_metrics x ON x.run_id = b.id AND x.region_id = m.region_id) "
	"ORDER BY m.region_id, r.measured_at DESC, r.id DESC) imported) "
	"SELECT region_id, evidence, t_host, t_host_spread, n_rd, c_store, c_be1, c_be2, c_be3, bw_read_estimate, "
	"source_b_cpu, host_id, extract(epoch FROM measured_at)::bigint, backend FROM pick ORDER BY region_id";
#define STRINGIFY_N_(x) #x
#define STRINGIFY_N(x) STRINGIFY_N_(x)

/*
 * The lookup's rows come in binary: PostgreSQL does not print 10,000 x 9 doubles as text, nor
 * does pimd parse them back.  Its columns' types, checked once per batch (int8 for the epoch,
 * text or varchar for the words).
 */
#define OID_INT8 20
#define OID_INT4 23
#define OID_TEXT 25
#define OID_FLOAT8 701
#define OID_VARCHAR 1043
static const unsigned lookup_types[14] = { OID_INT4, OID_TEXT, OID_FLOAT8, OID_FLOAT8, OID_FLOAT8, OID_FLOAT8,
					   OID_FLOAT8, OID_FLOAT8, OID_FLOAT8, OID_FLOAT8, OID_FLOAT8, OID_TEXT,
					   OID_INT8, OID_TEXT };

/* Who measured the run a lookup reads (SQL_LOOKUP_RUN), said once for all its rows. */
struct lookup_origin {
	bool mixed;                        /* imported counts too: each row names its origin */
	char run[24];                      /* the run's id, as text; "" when none was measured */
	char host[CONFIG_HOST_ID_MAX + 1];
	char backend[16];
	int64_t at;
	char source[CONFIG_HOST_ID_MAX + 64]; /* "fleet catalogue: host H, B backend" */
};

static bool lookup_types_ok(const PGresult *res, bool mixed)
{
	int n = mixed ? 14 : 11;

	if (PQnfields(res) != n)
		return false;
	for (int i = 0; i < n; i++) {
		Oid t = PQftype(res, i);
		if (PQfformat(res, i) != 1 || !(t == lookup_types[i] || (lookup_types[i] == OID_TEXT && t == OID_VARCHAR)))
			return false;
	}
	return true;
}

static uint64_t column_be(const PGresult *res, int row, int i, int len)
{
	const unsigned char *p = (const unsigned char *)PQgetvalue(res, row, i);
	uint64_t v = 0;

	for (int k = 0; k < len; k++)
		v = v << 8 | p[k];
	return v;
}

/* A double of a row: finite and >= 0; NULL is absent (*have false) where it may be. */
static int column_number(const PGresult *res, int row, int i, double *v, bool *have)
{
	*v = 0;
	if (have)
		*have = false;
	if (PQgetisnull(res, row, i))
		return have ? 0 : -EINVAL;
	if (PQgetlength(res, row, i) != 8)
		return -EINVAL;
	uint64_t bits = column_be(res, row, i, 8);
	memcpy(v, &bits, sizeof *v);
	if (!isfinite(*v) || *v < 0)
		return -EINVAL;
	if (have)
		*have = true;
	return 0;
}

/* A word of a row (libpq ends a binary value with a NUL too): token_ok, no NUL inside. */
static bool column_token(const PGresult *res, int row, int i, size_t max)
{
	const char *s = PQgetvalue(res, row, i);

	return !PQgetisnull(res, row, i) && catalogue_token_ok(s, max) && strlen(s) == (size_t)PQgetlength(res, row, i);
}

/* A row of the lookup as metrics, each value checked (the catalogue is another host's word);
 * the host and backend point into res (a mixed lookup's) or into o. */
static int lookup_row(const PGresult *res, int row, const struct lookup_origin *o, struct store_metrics *m)
{
	bool have, have_n_rd, have_store;

	if (PQgetisnull(res, row, 0) || PQgetlength(res, row, 0) != 4 || !column_token(res, row, 1, 16))
		return -EINVAL;
	if (o->mixed && (PQgetisnull(res, row, 12) || PQgetlength(res, row, 12) != 8))
		return -EINVAL;
	int32_t id = (int32_t)(uint32_t)column_be(res, row, 0, 4);
	int64_t at = o->mixed ? (int64_t)column_be(res, row, 12, 8) : o->at;
	const char *ev = PQgetvalue(res, row, 1);

	if (id < 0 || at < 0)
		return -EINVAL;
	m->region_id = (uint32_t)id;
	m->evidence = strcmp(ev, "counters") == 0 ? PL_EVIDENCE_COUNTERS
		      : strcmp(ev, "estimate") == 0 ? PL_EVIDENCE_ESTIMATE
		      : strcmp(ev, "imported") == 0 ? PL_EVIDENCE_IMPORTED : PL_EVIDENCE_NONE;
	if (m->evidence == PL_EVIDENCE_NONE || column_number(res, row, 2, &m->t_host, NULL) < 0 ||
	    !(m->t_host > 0) || column_number(res, row, 3, &m->t_host_spread, &have) < 0 ||
	    column_number(res, row, 4, &m->n_rd, &have_n_rd) < 0 || column_number(res, row, 5, &m->c_store, &have_store) < 0)
		return -EINVAL;
	m->have_n_rd = have_n_rd;
	m->have_store = have_store;
	/* the three backend events come with the store-bound count, or not at all */
	if (m->have_store && (column_number(res, row, 6, &m->c_be1, NULL) < 0 || column_number(res, row, 7, &m->c_be2, NULL) < 0 ||
			      column_number(res, row, 8, &m->c_be3, NULL) < 0))
		return -EINVAL;
	if (column_number(res, row, 9, &m->bw_read_estimate, &have) < 0 || column_number(res, row, 10, &m->source_b_cpu, &have) < 0)
		return -EINVAL;
	m->origin_measured_at = at;
	if (!o->mixed) {
		m->origin_host = o->host;
		m->origin_backend = o->backend;
		m->source = o->source;
		return 0;
	}
	if (!column_token(res, row, 11, CONFIG_HOST_ID_MAX) || !column_token(res, row, 13, 15))
		return -EINVAL;
	m->origin_host = PQgetvalue(res, row, 11);
	m->origin_backend = PQgetvalue(res, row, 13);
	return 0;
}

/* Rows of the lookup fetched at a time (a cursor): memory stays bounded whatever the model, and
 * the next batch is on its way while one is stored (lookup_into). */
#define LOOKUP_BATCH 1024

/* What one batch of the lookup is read into before it is stored; kept, with its result (the
 * strings point into it), while the first answer is computed from memory (struct fetched). */
struct lookup_rows {
	struct store_metrics m[LOOKUP_BATCH];
	const struct store_metrics *ptr[LOOKUP_BATCH];
	char source[LOOKUP_BATCH][96];
	size_t n;
	PGresult *res;
	struct lookup_rows *next;
};

/* Where a lookup is in its rows: counted, and the last region id (they come by region id). */
struct lookup_pos {
	uint64_t rows, n_regions;
	int64_t last_id;
	int bad;
	const struct lookup_origin *origin;
};

/* One batch of the lookup's rows into lr (lr->n valid rows; others counted in p->bad); -EPROTO
 * when the batch is not what was asked for: other columns, more rows than the model has
 * regions, region ids not ascending (each region once). */
static int lookup_parse(PGresult *res, struct lookup_rows *lr, struct lookup_pos *p, struct pim_error *err)
{
	lr->n = 0;
	if (!lookup_types_ok(res, p->origin->mixed) || PQntuples(res) > LOOKUP_BATCH)
		return err_set(err, -EPROTO, "the catalogue's lookup returned other columns than asked for");
	for (int i = 0; i < PQntuples(res); i++) {
		struct store_metrics *m = &lr->m[lr->n];
		if (++p->rows > p->n_regions)
			return err_set(err, -EPROTO, "the catalogue returned more rows than the model's %" PRIu64
				       " regions", p->n_regions);
		*m = (struct store_metrics){ 0 };
		if (lookup_row(res, i, p->origin, m) < 0) {
			p->bad++;
			continue;
		}
		if ((int64_t)m->region_id <= p->last_id)
			return err_set(err, -EPROTO, "the catalogue's rows are not by region id (region %u after %" PRId64
				       ")", m->region_id, p->last_id);
		p->last_id = m->region_id;
		if (p->origin->mixed) {
			snprintf(lr->source[lr->n], sizeof lr->source[lr->n], "fleet catalogue: host %s, %s backend",
				 m->origin_host, m->origin_backend);
			m->source = lr->source[lr->n];
		}
		lr->ptr[lr->n++] = m;
	}
	return 0;
}

/* Asks for the lookup's next batch, in binary; fetch_take waits for it. */
static int fetch_send(PGconn *pg, struct pim_error *err)
{
	if (!PQsendQueryParams(pg, "FETCH " STRINGIFY_N(LOOKUP_BATCH) " FROM lookup", 0, NULL, NULL, NULL, NULL, 1))
		return err_set(err, -EIO, "%s", PQerrorMessage(pg));
	return 0;
}

static PGresult *fetch_take(PGconn *pg, struct pim_error *err)
{
	PGresult *res = PQgetResult(pg), *more;

	while ((more = PQgetResult(pg)))
		PQclear(more);
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		return res;
	err_set(err, -EIO, "%s", res ? PQresultErrorMessage(res) : PQerrorMessage(pg));
	PQclear(res);
	return NULL;
}

/*
 * Begins a lookup of model hash on platform in pg: a transaction in one snapshot, SQL_LOOKUP_RUN
 * into *o, then the cursor "lookup" declared.  1 when there is a cursor to read, 0 when the
 * catalogue has nothing of the model on the platform, < 0 on failure; the caller ends the
 * transaction (lookup_end) in every case.
 */
static int lookup_begin(PGconn *pg, const char *hash, const char *platform, struct lookup_origin *o,
			struct pim_error *err)
{
	const char *vals[3] = { hash, platform, NULL };
	int r;

	memset(o, 0, sizeof *o);
	if ((r = catalogue_exec_ok(pg, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL, err)) < 0)
		return r;
	PGresult *res = catalogue_exec(pg, SQL_LOOKUP_RUN, 2, vals);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		r = err_set(err, -EIO, "%s", PQresultErrorMessage(res));
		PQclear(res);
		return r;
	}
	if (PQntuples(res) != 1 || PQnfields(res) != 5) {
		PQclear(res);
		return err_set(err, -EPROTO, "the catalogue's lookup returned other columns than asked for");
	}
	o->mixed = strcmp(PQgetvalue(res, 0, 4), "t") == 0;
	if (!PQgetisnull(res, 0, 0)) {
		const char *id = PQgetvalue(res, 0, 0), *at = PQgetvalue(res, 0, 2);
		char *end;
		errno = 0;
		long long v = strtoll(at, &end, 10);
		if (strlen(id) >= sizeof o->run || !catalogue_token_ok(PQgetvalue(res, 0, 1), CONFIG_HOST_ID_MAX) ||
		    !catalogue_token_ok(PQgetvalue(res, 0, 3), 15) || errno || *end || end == at || v < 0) {
			PQclear(res);
			return err_set(err, -EPROTO, "the catalogue's newest run of the model is not valid");
		}
		snprintf(o->run, sizeof o->run, "%s", id);
		snprintf(o->host, sizeof o->host, "%s", PQgetvalue(res, 0, 1));
		snprintf(o->backend, sizeof o->backend, "%s", PQgetvalue(res, 0, 3));
		o->at = v;
		snprintf(o->source, sizeof o->source, "fleet catalogue: host %s, %s backend", o->host, o->backend);
	}
	PQclear(res);
	if (!o->mixed && !o->run[0])
		return 0;
	vals[0] = o->mixed ? hash : o->run;
	vals[1] = platform;
	vals[2] = o->run[0] ? o->run : NULL;
	if ((r = catalogue_exec_ok(pg, o->mixed ? SQL_LOOKUP_MIXED : SQL_LOOKUP_REGIONS, o->mixed ? 3 : 1, vals, err)) < 0)
		return r;
	return 1;
}

/* Ends a lookup's transaction (rolled back when it failed). */
static void lookup_end(PGconn *pg, bool failed)
{
	catalogue_exec_ok(pg, failed && PQtransactionStatus(pg) == PQTRANS_INERROR ? "ROLLBACK" : "COMMIT", 0, NULL, NULL);
}

/*
 * The lookup's batches, each to batch(ctx, res, err) while the next one comes (PostgreSQL reads
 * and sends it on its own core meanwhile).  batch returns 1 when it keeps res (it clears it
 * then), 0 when res may be cleared, < 0 to stop.
 */
static int lookup_fetch_all(PGconn *pg, int (*batch)(void *ctx, PGresult *res, struct pim_error *err), void *ctx,
			    struct pim_error *err)
{
	bool more = true;
	int r;

	if ((r = fetch_send(pg, err)) < 0)
		more = false;
	while (more) {
		PGresult *res = fetch_take(pg, err);
		if (!res) {
			r = -EIO;
			break;
		}
		int n = PQntuples(res), k = 0;
		more = n == LOOKUP_BATCH;
		if (more && (r = fetch_send(pg, err)) < 0)
			more = false;
		if (r >= 0 && n > 0 && (k = batch(ctx, res, err)) < 0)
			r = k;
		if (k != 1)
			PQclear(res);
		if (r < 0 && more) {
			/* the batch asked for is not wanted any more */
			PGresult *rest;
			while ((rest = PQgetResult(pg)))
				PQclear(rest);
			more = false;
		}
	}
	return r < 0 ? r : 0;
}

/* ------------------------------------------ a large model: stored first, then read back */

struct store_batches {
	struct lookup_rows *lr;
	struct lookup_pos pos;
	struct store *s;
	int64_t model_id, platform_row;
	uint64_t stored;
	bool store_failed;
};

/* A batch into the store, on the asking thread. */
static int store_batch(void *ctx, PGresult *res, struct pim_error *err)
{
	struct store_batches *sb = ctx;
	struct pim_error e = { 0 };
	size_t missing;
	int r = lookup_parse(res, sb->lr, &sb->pos, err);

	if (r < 0)
		return r;
	if (store_fetched_put_many(sb->s, sb->model_id, sb->platform_row, sb->lr->ptr, sb->lr->n, &missing, &e) < 0) {
		sb->store_failed = true;
		return err_set(err, e.code, "%s", e.msg);
	}
	sb->pos.bad += (int)missing; /* regions the model lacks */
	sb->stored += sb->lr->n - missing;
	return 0;
}

/* The model's metrics from the catalogue into s (one transaction, fetched through a cursor):
 * the number of regions stored, or < 0 (*store_failed says whether the store failed). */
static int lookup_into(struct catalogue *c, PGconn *pg, struct store *s, int64_t model_id, int64_t platform_row,
		       const char *hash, uint64_t n_regions, bool *store_failed, struct pim_error *err)
{
	struct lookup_origin o;
	struct store_batches sb = { .pos = { .n_regions = n_regions, .last_id = -1, .origin = &o }, .s = s,
				    .model_id = model_id, .platform_row = platform_row };
	int r;

	*store_failed = false;
	if ((r = lookup_begin(pg, hash, c->platform_key, &o, err)) <= 0)
		goto out;
	if (!(sb.lr = malloc(sizeof *sb.lr))) {
		r = err_set(err, -ENOMEM, "out of memory");
		goto out;
	}
	if ((r = store_fetched_begin(s, err)) < 0) {
		*store_failed = true;
		goto out;
	}
	r = lookup_fetch_all(pg, store_batch, &sb, err);
	*store_failed = sb.store_failed;
	/* nothing of a failed lookup is kept: the next query asks again */
	int k = store_fetched_end(s, model_id, r >= 0, r >= 0 ? err : NULL);
	if (r >= 0 && k < 0) {
		*store_failed = true;
		r = k;
	}
out:
	free(sb.lr);
	lookup_end(pg, r < 0);
	if (sb.pos.bad)
		log_warning("Fleet catalogue: %d rows for model %s were not valid metrics of its regions; skipped",
			    sb.pos.bad, hash);
	return r < 0 ? r : (int)sb.stored;
}

/* ------------------------------------------ answered from memory while another thread stores */

/*
 * The rows of a lookup, kept in memory for the answer that asked for them, while the storer (a
 * thread of its own, on the catalogue's second connection to the local store) stores them in one
 * transaction as they come: the answer waits neither for SQLite's 10,000 upserts nor for their
 * commit, nor reads back what it just fetched.  The storer stores the answer too, once the rows
 * are committed (catalogue_fill_release), and the next lookup waits for it (catalogue_fill).
 */
struct catalogue_fetched {
	struct store *s;                   /* the catalogue's fill_store */
	int64_t model_id, platform_row;
	int64_t version_before;            /* the model's version when it was found unmeasured */
	pthread_t thread;
	pthread_mutex_t mu;                /* what follows */
	pthread_cond_t cv;
	struct lookup_rows *head, **tail;  /* every batch, by region id: the answer reads these */
	struct lookup_rows *next;          /* the first batch the storer has not taken */
	bool closed, keep;                 /* no more batches: commit (keep) or roll back */
	bool released;                     /* the answer is done with the rows (answer: what to store) */
	struct catalogue_answer answer;
	struct lookup_pos pos;
	struct lookup_origin origin;       /* (pos.origin) */
	size_t rows;                       /* valid rows fetched */
	uint64_t t0, t_fetched, t_answered; /* now_ns: asked, all rows here, answered */
	char what[320];                    /* the model, for the journal: "name" (hash) */
};

/* The storer's nice value above pimd's own (priority_unboost). */
#define CATALOGUE_STORER_NICE 10

static void *storer_main(void *data)
{
	struct catalogue_fetched *f = data;
	struct pim_error e = { 0 };
	uint64_t stored = 0, missing_all = 0;
	int64_t v_begin = 0, version = 0;
	int r;

	/* the answer waiting for the rows goes first where cores are short: storing them is for
	 * the next answers (a failure leaves the thread as it was) */
	priority_unboost(CATALOGUE_STORER_NICE);
	if (store_found_readonly(f->s))
		store_reconnect(f->s, NULL);
	/* the write lock from here to the commit: a change another connection makes to the model
	 * comes before (the version tells) or after (it sees these rows) */
	if ((r = store_fetched_begin(f->s, &e)) >= 0 && (r = store_model_version(f->s, f->model_id, &v_begin, &e)) < 0)
		store_fetched_end(f->s, f->model_id, false, NULL);
	bool begun = r >= 0;
	pthread_mutex_lock(&f->mu);
	for (;;) {
		while (!f->next && !f->closed)
			pthread_cond_wait(&f->cv, &f->mu);
		struct lookup_rows *lr = f->next;
		if (!lr)
			break;
		f->next = lr->next;
		pthread_mutex_unlock(&f->mu);
		size_t missing;
		if (r >= 0 && (r = store_fetched_put_many(f->s, f->model_id, f->platform_row, lr->ptr, lr->n, &missing,
							  &e)) >= 0) {
			stored += lr->n - missing;
			missing_all += missing;
		}
		pthread_mutex_lock(&f->mu);
	}
	bool keep = f->keep;
	pthread_mutex_unlock(&f->mu);
	if (begun && r >= 0)
		r = store_fetched_end_version(f->s, f->model_id, keep, &version, &e);
	else if (begun)
		store_fetched_end(f->s, f->model_id, false, NULL);
	uint64_t t_stored = now_ns();
	/* the answer computed from the rows is stored once they are: under the version committed,
	 * unless another change to the model came first */
	pthread_mutex_lock(&f->mu);
	while (!f->released)
		pthread_cond_wait(&f->cv, &f->mu);
	struct catalogue_answer a = f->answer;
	pthread_mutex_unlock(&f->mu);
	if (keep && r >= 0 && a.put && v_begin == f->version_before)
		a.put(a.data, f->s, version);
	if (a.release)
		a.release(a.data);
	/* (a failed lookup was not kept: the asking thread said why) */
	if (keep && r < 0)
		log_warning("Fleet catalogue: the metrics of model %s fetched for an answer were not stored (%s); "
			    "the next answer asks the catalogue again", f->what, e.msg);
	else if (keep) {
		if (missing_all)
			log_warning("Fleet catalogue: %" PRIu64 " rows for model %s name regions it lacks; not stored",
				    missing_all, f->what);
		if (stored)
			log_info("Model %s has no metrics here: %" PRIu64 " regions taken from the fleet catalogue "
				 "(fetched in %.1f ms, answered from them at %.1f ms, stored at %.1f ms)", f->what, stored,
				 (double)(f->t_fetched - f->t0) / 1e6, (double)(f->t_answered - f->t0) / 1e6,
				 (double)(t_stored - f->t0) / 1e6);
	}
	/* the rows are not needed any more */
	for (struct lookup_rows *lr = f->head, *next; lr; lr = next) {
		next = lr->next;
		PQclear(lr->res);
		free(lr);
	}
	f->head = NULL;
	return NULL;
}

static void fetched_free(struct catalogue_fetched *f)
{
	if (!f)
		return;
	for (struct lookup_rows *lr = f->head, *next; lr; lr = next) {
		next = lr->next;
		PQclear(lr->res);
		free(lr);
	}
	pthread_mutex_destroy(&f->mu);
	pthread_cond_destroy(&f->cv);
	free(f);
}

/* The storer for model_id's rows, started (waiting for them); NULL when out of memory or
 * threads. */
static struct catalogue_fetched *fetched_start(struct store *fs, int64_t model_id, int64_t platform_row,
					       int64_t version_before, uint64_t n_regions, const struct lookup_origin *o,
					       uint64_t t0)
{
	struct catalogue_fetched *f = calloc(1, sizeof *f);

	if (!f)
		return NULL;
	f->s = fs;
	f->model_id = model_id;
	f->platform_row = platform_row;
	f->version_before = version_before;
	f->tail = &f->head;
	f->origin = *o;
	f->pos = (struct lookup_pos){ .n_regions = n_regions, .last_id = -1, .origin = &f->origin };
	f->t0 = t0;
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cv, NULL);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int r = pthread_create(&f->thread, NULL, storer_main, f);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r == 0)
		pthread_setname_np(f->thread, "pimd-storer");
	if (r) {
		fetched_free(f);
		return NULL;
	}
	return f;
}

/* A batch kept in memory and handed to the storer. */
static int fetched_batch(void *ctx, PGresult *res, struct pim_error *err)
{
	struct catalogue_fetched *f = ctx;
	struct lookup_rows *lr = malloc(sizeof *lr);
	int r;

	if (!lr)
		return err_set(err, -ENOMEM, "out of memory");
	if ((r = lookup_parse(res, lr, &f->pos, err)) < 0 || lr->n == 0) {
		free(lr);
		return r < 0 ? r : 0;
	}
	lr->res = res;
	lr->next = NULL;
	f->rows += lr->n;
	pthread_mutex_lock(&f->mu);
	*f->tail = lr;
	f->tail = &lr->next;
	if (!f->next)
		f->next = lr;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
	return 1;
}

/* No more rows: the storer commits them (keep) or rolls them back; waits for it when wait. */
static void fetched_close(struct catalogue_fetched *f, bool keep, bool wait)
{
	pthread_mutex_lock(&f->mu);
	f->closed = true;
	f->keep = keep;
	f->released |= wait; /* (nothing is answered from rows not kept) */
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
	if (wait)
		pthread_join(f->thread, NULL);
}

/* As lookup_into, the rows kept in memory (*out) while the storer stores them: the number of
 * valid rows, or < 0 (nothing kept). */
static int lookup_keep(struct catalogue *c, PGconn *pg, int64_t model_id, int64_t platform_row, int64_t version_before,
		       const char *hash, uint64_t n_regions, struct catalogue_fetched **out, struct pim_error *err)
{
	struct catalogue_fetched *f = NULL;
	struct lookup_origin o;
	uint64_t t0 = now_ns();
	int r;

	*out = NULL;
	if ((r = lookup_begin(pg, hash, c->platform_key, &o, err)) > 0 &&
	    !(f = fetched_start(c->fill_store, model_id, platform_row, version_before, n_regions, &o, t0)))
		r = err_set(err, -ENOMEM, "out of memory or threads");
	if (f) {
		r = lookup_fetch_all(pg, fetched_batch, f, err);
		f->t_fetched = now_ns();
		/* nothing of a failed lookup is kept: the next query asks again */
		fetched_close(f, r >= 0, r < 0);
	}
	lookup_end(pg, r < 0);
	if (f && f->pos.bad)
		log_warning("Fleet catalogue: %d rows for model %s were not valid metrics; skipped", f->pos.bad, hash);
	if (r < 0) {
		if (f) {
			/* (the storer rolled back: closed and waited for above) */
			f->released = true;
			fetched_free(f);
		}
		return r;
	}
	*out = f;
	return f ? (int)f->rows : 0;
}

int catalogue_fill_each(const struct catalogue_fill *fill, store_metrics_fn fn, void *ctx)
{
	if (!fill->rows)
		return 0;
	for (const struct lookup_rows *lr = fill->rows->head; lr; lr = lr->next)
		for (size_t i = 0; i < lr->n; i++) {
			int r = fn(ctx, lr->ptr[i]);
			if (r < 0)
				return r;
		}
	return 0;
}

void catalogue_fill_release(struct catalogue *c, struct catalogue_fill *fill, const struct catalogue_answer *a)
{
	struct pim_error e = { 0 };

	catalogue_fill_wait(fill, &e); /* (a store failure was the storer's to say) */
	struct catalogue_fetched *f = fill->rows;

	if (!f) {
		if (a && a->release)
			a->release(a->data);
		return;
	}
	fill->rows = NULL;
	pthread_mutex_lock(&f->mu);
	f->released = true;
	f->t_answered = now_ns();
	if (a)
		f->answer = *a;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->mu);
}

/* Waits for the storer of the last lookup (its rows and answer on disk, or rolled back).  Work
 * threads come here at once: one joins it while the others wait on fill_mu, so none goes on
 * before the rows are stored.  (The storer waits only for its own answer's release, which takes
 * no lock of these.) */
void catalogue_fill_join(struct catalogue *c)
{
	pthread_mutex_lock(&c->fill_mu);
	struct catalogue_fetched *f = c->pending;
	if (f) {
		pthread_join(f->thread, NULL);
		c->pending = NULL;
		fetched_free(f);
	}
	pthread_mutex_unlock(&c->fill_mu);
}

void catalogue_settle(struct catalogue *c)
{
	if (c)
		catalogue_fill_join(c);
}

/* One attempt at the lookup: into memory (*f, stored meanwhile) when keep, else into s first. */
static int lookup_once(struct catalogue *c, PGconn *pg, struct store *s, bool keep, const struct catalogue_fill *out,
		       int64_t platform_row, const char *hash, uint64_t n_regions, struct catalogue_fetched **f,
		       bool *store_failed, struct pim_error *err)
{
	*store_failed = false;
	return keep ? lookup_keep(c, pg, out->model_id, platform_row, out->version_before, hash, n_regions, f, err)
		    : lookup_into(c, pg, s, out->model_id, platform_row, hash, n_regions, store_failed, err);
}

/*
 * The part of catalogue_fill that asks PostgreSQL, under look_mu: on the work thread for a model
 * stored before it is answered, on a thread of its own (ask_main) for one answered from memory,
 * while the work thread reads the model from its store.
 */
struct catalogue_ask {
	struct catalogue *c;
	struct store *s;                  /* the work thread's store (lookup_into only) */
	bool keep;                        /* into memory: lookup_keep */
	struct catalogue_fill in;         /* model_id, version_before */
	int64_t platform_row;
	uint64_t n_regions;
	char hash[65];
	pthread_t thread;
	/* the outcome, for ask_finish */
	int r;
	bool pg, store_failed;
	struct catalogue_fetched *f;
	struct pim_error e;
	uint64_t t0;
};

static void ask_run(struct catalogue_ask *a)
{
	struct catalogue *c = a->c;
	PGconn *pg;

	pthread_mutex_lock(&c->look_mu);
	/* another work thread's lookup may have started a storer since: one at a time */
	if (a->keep)
		catalogue_fill_join(c);
	a->t0 = now_ns();
	pg = catalogue_look_conn(c, &a->e);
	a->r = pg ? lookup_once(c, pg, a->s, a->keep, &a->in, a->platform_row, a->hash, a->n_regions, &a->f,
				&a->store_failed, &a->e)
		  : a->e.code;
	if (pg && a->r < 0 && !a->store_failed && PQstatus(pg) != CONNECTION_OK) {
		/* a connection kept since before PostgreSQL restarted fails at its first use: once
		 * more on a new one */
		PQfinish(c->look);
		c->look = NULL;
		a->e = (struct pim_error){ 0 };
		pg = catalogue_look_conn(c, &a->e);
		a->r = pg ? lookup_once(c, pg, a->s, a->keep, &a->in, a->platform_row, a->hash, a->n_regions, &a->f,
					&a->store_failed, &a->e)
			  : a->e.code;
	}
	if (a->f) {
		/* before look_mu goes: the next lookup joins it before starting its own */
		pthread_mutex_lock(&c->fill_mu);
		c->pending = a->f;
		pthread_mutex_unlock(&c->fill_mu);
	}
	if (pg && a->r < 0 && !a->store_failed) {
		catalogue_note_failure(c, "looking up", a->e.msg);
		if (PQstatus(pg) != CONNECTION_OK) {
			PQfinish(c->look);
			c->look = NULL;
		}
	}
	pthread_mutex_unlock(&c->look_mu);
	a->pg = pg != NULL;
}

static void *ask_main(void *data)
{
	priority_unboost(0); /* (started on a thread of pimd's, maybe the loop's) */
	ask_run(data);
	return NULL;
}

/* What the ask found, into out (catalogue_fill's contract). */
static int ask_finish(struct catalogue_ask *a, const char *model, struct catalogue_fill *out, struct pim_error *err)
{
	struct catalogue *c = a->c;
	int r = a->r;

	if (r < 0 && a->pg && a->store_failed)
		return err_set(err, r, "%s", a->e.msg);
	if (r < 0) {
		snprintf(out->error, sizeof out->error, "%s", a->e.msg);
		return 0;
	}
	if (a->pg)
		catalogue_note_success(c);
	pthread_mutex_lock(&c->mu);
	c->st.lookup_hits += r > 0;
	pthread_mutex_unlock(&c->mu);
	out->fetched = (size_t)r;
	if (a->f) {
		snprintf(a->f->what, sizeof a->f->what, "\"%s\" (%.12s)", model, a->hash);
		/* the answer is computed from these while the storer stores them; none: the
		 * (empty) transaction is committed now */
		out->rows = a->f;
		if (r == 0) {
			catalogue_fill_release(c, out, NULL);
			catalogue_fill_join(c);
		}
		return 0;
	}
	if (r > 0)
		log_info("Model \"%s\" (%.12s) has no metrics here: %d regions taken from the fleet catalogue in "
			 "%.1f ms", model, a->hash, r, (double)(now_ns() - a->t0) / 1e6);
	return 0;
}

int catalogue_fill(struct catalogue *c, struct store *s, int64_t platform_row, const char *model,
		   struct catalogue_fill *out, struct pim_error *err)
{
	struct pim_error e = { 0 };
	struct catalogue_ask *a;
	int64_t model_id = 0, version = 0;
	uint64_t n_regions = 0;
	bool measured = false;
	char hash[65];
	int r;

	memset(out, 0, sizeof *out);
	/* the last answer did not wait for the rows it fetched: they are stored before the store
	 * says whether this model is measured (it may be the same one) */
	catalogue_fill_join(c);
	/* whether the model is measured here, and its version then, as of one state of the store */
	if (store_read_begin(s, &e) < 0)
		return 0; /* (loading the model says what fails) */
	r = store_model_measured(s, model, platform_row, &model_id, &measured, &e);
	if (r >= 0 && !measured)
		r = store_model_version(s, model_id, &version, &e);
	store_read_end(s);
	if (r < 0 || measured)
		return 0; /* unknown model (the handler says so) or measured here: nothing to ask */
	if ((r = store_model_regions(s, model, &n_regions, err)) < 0 || (r = store_model_hash(s, model_id, hash, err)) < 0)
		return r;
	if (!(a = calloc(1, sizeof *a)))
		return err_set(err, -ENOMEM, "out of memory");
	out->asked = true;
	out->model_id = model_id;
	out->version_before = version;
	*a = (struct catalogue_ask){ .c = c, .s = s, .in = *out, .platform_row = platform_row, .n_regions = n_regions,
				     .keep = c->fill_store && n_regions <= CATALOGUE_FILL_MEMORY_REGIONS };
	memcpy(a->hash, hash, sizeof hash);
	snprintf(out->model, sizeof out->model, "%s", model);
	pthread_mutex_lock(&c->mu);
	c->st.lookups++;
	pthread_mutex_unlock(&c->mu);
	if (a->keep) {
		/* the rows come while the caller reads the model (catalogue_fill_wait) */
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		int k = pthread_create(&a->thread, NULL, ask_main, a);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (k == 0) {
			pthread_setname_np(a->thread, "pimd-ask");
			out->ask = a;
			return 0;
		}
	}
	ask_run(a);
	r = ask_finish(a, model, out, err);
	free(a);
	return r;
}

int catalogue_fill_wait(struct catalogue_fill *fill, struct pim_error *err)
{
	struct catalogue_ask *a = fill->ask;

	if (!a)
		return 0;
	fill->ask = NULL;
	pthread_join(a->thread, NULL);
	int r = ask_finish(a, fill->model, fill, err);
	free(a);
	return r;
}

int catalogue_pg_lookup_rows(PGconn *pg, const char *hash, const char *platform_key, size_t *rows,
			     struct pim_error *err)
{
	struct lookup_origin o;
	int r;

	*rows = 0;
	if ((r = lookup_begin(pg, hash, platform_key, &o, err)) > 0)
		for (;;) {
			PGresult *res = fetch_send(pg, err) < 0 ? NULL : fetch_take(pg, err);
			int n = res ? PQntuples(res) : 0;
			if (!res)
				r = -EIO;
			*rows += (size_t)n;
			PQclear(res);
			if (r < 0 || n < LOOKUP_BATCH)
				break;
		}
	lookup_end(pg, r < 0);
	return r < 0 ? r : 0;
}
