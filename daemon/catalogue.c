/* SPDX-License-Identifier: MIT */
#include "catalogue.h"

#include <ctype.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

struct catalogue {
	char conninfo[CONFIG_CATALOGUE_MAX];
	char host_id[CONFIG_HOST_ID_MAX + 1];
	char platform_key[256];
	unsigned timeout_ms;

	pthread_t thread;
	bool started;
	pthread_mutex_t mu;          /* what follows, up to the connections */
	pthread_cond_t cv;
	bool stop;
	struct catalogue_status st;  /* outbox counts, errors, publishes, lookups */
	uint64_t retry_at_ns;        /* while unreachable: the next attempt (now_ns) */
	unsigned backoff_ms;

	struct store *store;         /* the publisher's connection to the local store */
	PGconn *pub;                 /* the publisher's */
	pthread_mutex_t look_mu;     /* the lookups' connection (the work thread's) */
	PGconn *look;
	/* the storer's connection to the local store (catalogue_fill); the rows it is storing for
	 * an answer being computed (the work thread's) */
	struct store *fill_store;
	/* under fill_mu, set under look_mu too: one storer at a time on fill_store, joined once,
	 * whichever work thread comes next */
	pthread_mutex_t fill_mu;
	struct catalogue_fetched *pending;
};

/* ---------------------------------------------------------------- errors and the status */

/* libpq's message on one line. */
static void pq_message(char *buf, size_t len, const char *msg)
{
	snprintf(buf, len, "%s", msg && *msg ? msg : "unknown error");
	for (char *p = buf; *p; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
	size_t n = strlen(buf);
	while (n && buf[n - 1] == ' ')
		buf[--n] = 0;
}

static int64_t wall_s(void) { return (int64_t)time(NULL); }

/* The catalogue failed (what, why): unreachable until an attempt succeeds; the next in backoff. */
static void note_failure(struct catalogue *c, const char *what, const char *why)
{
	char msg[512];

	pq_message(msg, sizeof msg, why);
	pthread_mutex_lock(&c->mu);
	bool was = c->st.reachable || !c->st.last_error[0] || strcmp(c->st.last_error + strlen(what) + 2, msg) != 0;
	c->st.reachable = false;
	snprintf(c->st.last_error, sizeof c->st.last_error, "%s: %s", what, msg);
	c->st.last_error_at = wall_s();
	c->backoff_ms = c->backoff_ms ? c->backoff_ms * 2 : CATALOGUE_BACKOFF_MIN_MS;
	if (c->backoff_ms > CATALOGUE_BACKOFF_MAX_MS)
		c->backoff_ms = CATALOGUE_BACKOFF_MAX_MS;
	c->retry_at_ns = now_ns() + (uint64_t)c->backoff_ms * 1000000u;
	pthread_mutex_unlock(&c->mu);
	/* the journal hears of a new failure, not of every retry */
	if (was)
		log_warning("Fleet catalogue %s: %s: %s; pimd keeps answering from its own store and "
			    "publishes what waits in its outbox when it can", c->st.target, what, msg);
}

static void note_success(struct catalogue *c)
{
	pthread_mutex_lock(&c->mu);
	bool was = c->st.reachable;
	c->st.reachable = true;
	c->backoff_ms = 0;
	c->retry_at_ns = 0;
	pthread_mutex_unlock(&c->mu);
	if (!was)
		log_info("Fleet catalogue %s reachable (host id %s, platform key %s)", c->st.target, c->host_id,
			 c->platform_key);
}

void catalogue_status(struct catalogue *c, struct catalogue_status *out)
{
	uint64_t now = now_ns();

	pthread_mutex_lock(&c->mu);
	*out = c->st;
	out->retry_in_ms = !c->st.reachable && c->retry_at_ns > now ? (uint32_t)((c->retry_at_ns - now) / 1000000u) : 0;
	pthread_mutex_unlock(&c->mu);
}

/* ---------------------------------------------------------------- connections and the schema */

static PGresult *exec(PGconn *pg, const char *sql, int n, const char *const *values)
{
	return PQexecParams(pg, sql, n, NULL, values, NULL, NULL, 0);
}

/* A statement that returns no rows: 0, or -EIO with libpq's message in err. */
static int exec_ok(PGconn *pg, const char *sql, int n, const char *const *values, struct pim_error *err)
{
	PGresult *res = exec(pg, sql, n, values);
	ExecStatusType k = PQresultStatus(res);
	int r = k == PGRES_COMMAND_OK || k == PGRES_TUPLES_OK ? 0
		: err_set(err, -EIO, "%s", PQresultErrorMessage(res));
	PQclear(res);
	return r;
}

/* The schema's version: 0 when it has none yet, -EIO on another failure. */
static int schema_version(PGconn *pg, unsigned *v, struct pim_error *err)
{
	PGresult *res = exec(pg, "SELECT coalesce(max(version), 0) FROM pim_catalogue.schema_migrations", 0, NULL);
	int r = 0;

	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
		*v = (unsigned)strtoul(PQgetvalue(res, 0, 0), NULL, 10);
	else if (strcmp(PQresultErrorField(res, PG_DIAG_SQLSTATE) ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : "",
			"42P01") == 0 || strcmp(PQresultErrorField(res, PG_DIAG_SQLSTATE) ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : "",
			"3F000") == 0)
		*v = 0; /* no table or no schema yet */
	else
		r = err_set(err, -EIO, "%s", PQresultErrorMessage(res));
	PQclear(res);
	return r;
}

/* Applies the migrations the catalogue lacks, one transaction each, under an advisory lock. */
static int migrate(PGconn *pg, unsigned *version, struct pim_error *err)
{
	unsigned v = 0;
	int r;

	if ((r = schema_version(pg, &v, err)) < 0)
		return r;
	if (v > catalogue_n_migrations)
		return err_set(err, -EPROTO, "the catalogue's schema is version %u, newer than this pimd knows "
			       "(%u): upgrade pimd", v, catalogue_n_migrations);
	while (v < catalogue_n_migrations) {
		const struct store_migration *m = &catalogue_migrations[v];
		char num[16];
		const char *vals[2] = { num, m->name };
		snprintf(num, sizeof num, "%u", m->version);
		if ((r = exec_ok(pg, "BEGIN", 0, NULL, err)) < 0)
			return r;
		if ((r = exec_ok(pg, "SELECT pg_advisory_xact_lock(7423001)", 0, NULL, err)) < 0 ||
		    (r = exec_ok(pg, "CREATE SCHEMA IF NOT EXISTS pim_catalogue", 0, NULL, err)) < 0 ||
		    (r = exec_ok(pg, "CREATE TABLE IF NOT EXISTS pim_catalogue.schema_migrations (version INTEGER "
				 "PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
				 0, NULL, err)) < 0 ||
		    (r = schema_version(pg, &v, err)) < 0)
			goto fail;
		if (v >= m->version) {
			/* another host applied it meanwhile */
			exec_ok(pg, "COMMIT", 0, NULL, NULL);
			continue;
		}
		PGresult *res = PQexec(pg, m->sql); /* several statements: the simple protocol */
		r = PQresultStatus(res) == PGRES_COMMAND_OK ? 0
		    : err_set(err, -EIO, "applying %s: %s", m->name, PQresultErrorMessage(res));
		PQclear(res);
		if (r < 0 || (r = exec_ok(pg, "INSERT INTO pim_catalogue.schema_migrations (version, name) "
					  "VALUES ($1, $2)", 2, vals, err)) < 0 ||
		    (r = exec_ok(pg, "COMMIT", 0, NULL, err)) < 0)
			goto fail;
		log_info("Fleet catalogue: applied schema migration %s", m->name);
		v = m->version;
	}
	*version = v;
	return 0;
fail:
	exec_ok(pg, "ROLLBACK", 0, NULL, NULL);
	return r;
}

PGconn *catalogue_pg_connect(const char *conninfo, unsigned timeout_ms, unsigned *version, struct pim_error *err)
{
	char timeout[16], options[64];
	/* libpq takes whole seconds, at least 2 */
	snprintf(timeout, sizeof timeout, "%u", timeout_ms < 2000 ? 2 : (timeout_ms + 999) / 1000);
	/* JIT compiles a plan for ~100 ms: more than a lookup of 10,000 regions takes without it */
	snprintf(options, sizeof options, "-c statement_timeout=%u -c jit=off", timeout_ms);
	const char *const keys[] = { "dbname", "connect_timeout", "options", "fallback_application_name", NULL };
	const char *const vals[] = { conninfo, timeout, options, "pimd", NULL };
	PGconn *pg = PQconnectdbParams(keys, vals, 1);

	if (!pg) {
		err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	if (PQstatus(pg) != CONNECTION_OK) {
		err_set(err, -ECONNREFUSED, "%s", PQerrorMessage(pg));
		PQfinish(pg);
		return NULL;
	}
	if (migrate(pg, version, err) < 0) {
		PQfinish(pg);
		return NULL;
	}
	return pg;
}

/* A connection to the catalogue, its schema current; NULL and err when not. */
static PGconn *connect_catalogue(struct catalogue *c, struct pim_error *err)
{
	unsigned version = 0;
	PGconn *pg = catalogue_pg_connect(c->conninfo, c->timeout_ms, &version, err);

	if (!pg)
		return NULL;
	pthread_mutex_lock(&c->mu);
	c->st.schema_version = version;
	pthread_mutex_unlock(&c->mu);
	return pg;
}

/* A statement failed on pg: was it the connection (retry later) or the data (1: skip it)? */
static int failure_kind(PGconn *pg, const PGresult *res)
{
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	if (PQstatus(pg) != CONNECTION_OK || !state)
		return 0;
	/* 22: data exception (a payload that is not JSON, a number out of range); 23: a constraint */
	return strncmp(state, "22", 2) == 0 || strncmp(state, "23", 2) == 0;
}

/* ---------------------------------------------------------------- publishing */

/* The platform and the model, if the catalogue does not know them yet. */
static const char SQL_PUBLISH_KEYS[] =
	"WITH p AS (INSERT INTO pim_catalogue.platforms (key, description) VALUES ($1, $2::jsonb) "
	"ON CONFLICT (key) DO NOTHING) "
	"INSERT INTO pim_catalogue.models (hash, name, regions) VALUES ($3, $4, $5) ON CONFLICT (hash) DO NOTHING";

/* The run and its metrics in one statement (atomic); no row for the run: it was there already. */
static const char SQL_PUBLISH_RUN[] =
	"WITH p AS (SELECT $9::jsonb AS j), "
	"run AS (INSERT INTO pim_catalogue.runs (host_id, publish_key, model_hash, platform_key, kind, backend, uid, "
	"platform, summary, regions, measured_at) SELECT $1, $2, $3, $4, $5, $6, $7, $8::jsonb, p.j->'summary', "
	"jsonb_array_length(p.j->'metrics'), to_timestamp($10) FROM p "
	"ON CONFLICT (host_id, publish_key) DO NOTHING RETURNING id), "
	"ins AS (INSERT INTO pim_catalogue.region_metrics (run_id, region_id, evidence, t_host, t_host_spread, n_rd, "
	"c_store, c_be1, c_be2, c_be3, bw_read_estimate, source_b_cpu) SELECT run.id, x.region_id, x.evidence, "
	"x.t_host, coalesce(x.t_host_spread, 0), x.n_rd, x.c_store, x.c_be1, x.c_be2, x.c_be3, x.bw_read_estimate, "
	"x.source_b_cpu FROM run, p, jsonb_to_recordset(p.j->'metrics') AS x(region_id integer, evidence text, "
	"t_host float8, t_host_spread float8, n_rd float8, c_store float8, c_be1 float8, c_be2 float8, "
	"c_be3 float8, bw_read_estimate float8, source_b_cpu float8) RETURNING 1) "
	"SELECT (SELECT id FROM run), (SELECT count(*) FROM ins)";

enum catalogue_publish catalogue_pg_publish(PGconn *pg, const char *host_id, const struct store_outbox_row *o,
					    char *why, size_t why_len)
{
	char regions[24], uid[24], at[24];
	snprintf(regions, sizeof regions, "%" PRId64, o->regions);
	snprintf(uid, sizeof uid, "%" PRId64, o->uid);
	snprintf(at, sizeof at, "%" PRId64, o->measured_at);
	const char *keys[5] = { o->platform_key, o->platform_json, o->model_hash, o->model_name, regions };
	const char *run[10] = { host_id, o->publish_key, o->model_hash, o->platform_key, o->kind,
				o->backend, uid, o->platform_json, o->payload, at };
	enum catalogue_publish out = CATALOGUE_PUBLISHED;

	PGresult *res = exec(pg, SQL_PUBLISH_KEYS, 5, keys);
	if (PQresultStatus(res) == PGRES_COMMAND_OK) {
		PQclear(res);
		res = exec(pg, SQL_PUBLISH_RUN, 10, run);
		if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
			if (PQgetisnull(res, 0, 0))
				out = CATALOGUE_ALREADY_THERE;
			PQclear(res);
			return out;
		}
	}
	pq_message(why, why_len, PQresultErrorMessage(res));
	out = failure_kind(pg, res) ? CATALOGUE_REFUSED : CATALOGUE_FAILED;
	PQclear(res);
	return out;
}

/* Publishes the outbox, oldest first, until it is empty (0) or the catalogue fails (< 0). */
static int drain(struct catalogue *c)
{
	struct pim_error err = { 0 };
	struct store_outbox_row o;
	char why[512];
	int r;

	for (;;) {
		pthread_mutex_lock(&c->mu);
		bool stop = c->stop;
		pthread_mutex_unlock(&c->mu);
		if (stop)
			return 0;
		if ((r = store_outbox_next(c->store, &o, &err)) <= 0) {
			if (r < 0)
				log_warning("Fleet catalogue: %s", err.msg);
			return r;
		}
		store_outbox_attempt(c->store, o.id, NULL);
		enum catalogue_publish k = catalogue_pg_publish(c->pub, c->host_id, &o, why, sizeof why);
		if (k == CATALOGUE_FAILED) {
			note_failure(c, "publishing", why);
			if (PQstatus(c->pub) != CONNECTION_OK) {
				PQfinish(c->pub);
				c->pub = NULL;
			}
			store_outbox_row_free(&o);
			return -EIO;
		}
		if (k == CATALOGUE_REFUSED) {
			log_error("Fleet catalogue refused %s of model \"%s\" (%s): %s; kept in the outbox, "
				  "skipped", o.publish_key, o.model_name, o.kind, why);
			r = store_outbox_fail(c->store, o.id, why, &err);
		} else {
			/* committed there: forgotten here (a crash before this publishes it again, and
			 * the catalogue keeps one) */
			r = store_outbox_delete(c->store, o.id, &err);
			pthread_mutex_lock(&c->mu);
			c->st.published += k == CATALOGUE_PUBLISHED;
			c->st.conflicts += k == CATALOGUE_ALREADY_THERE;
			c->st.last_publish_at = wall_s();
			pthread_mutex_unlock(&c->mu);
			log_debug("Fleet catalogue: published %s of model \"%s\"%s", o.publish_key, o.model_name,
				  k == CATALOGUE_ALREADY_THERE ? " (it was there already)" : "");
		}
		store_outbox_row_free(&o);
		if (r < 0) {
			log_warning("Fleet catalogue: %s", err.msg);
			return r;
		}
	}
}

static void count_outbox(struct catalogue *c)
{
	uint64_t pending = 0, failed = 0;

	if (store_outbox_depth(c->store, &pending, &failed, NULL) < 0)
		return;
	pthread_mutex_lock(&c->mu);
	c->st.outbox_depth = pending;
	c->st.outbox_failed = failed;
	pthread_mutex_unlock(&c->mu);
}

/* One round of the publisher: connected (or not), the outbox drained (or not). */
static void publish_round(struct catalogue *c)
{
	struct pim_error err = { 0 };
	uint64_t pending = 0, failed = 0;

	store_outbox_depth(c->store, &pending, &failed, NULL);
	if (!pending && c->pub) {
		count_outbox(c);
		return;
	}
	if (!c->pub && !(c->pub = connect_catalogue(c, &err))) {
		note_failure(c, "connecting", err.msg);
		count_outbox(c);
		return;
	}
	if (drain(c) == 0)
		note_success(c);
	count_outbox(c);
}

static void *publisher_main(void *data)
{
	struct catalogue *c = data;

	publish_round(c); /* at once: the status says whether the catalogue is reachable */
	pthread_mutex_lock(&c->mu);
	while (!c->stop) {
		uint64_t wait_ms = c->backoff_ms ? c->backoff_ms : CATALOGUE_POLL_MS;
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t ns = (uint64_t)ts.tv_nsec + wait_ms * 1000000u;
		ts.tv_sec += (time_t)(ns / 1000000000u);
		ts.tv_nsec = (long)(ns % 1000000000u);
		pthread_cond_timedwait(&c->cv, &c->mu, &ts);
		if (c->stop)
			break;
		pthread_mutex_unlock(&c->mu);
		publish_round(c);
		pthread_mutex_lock(&c->mu);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* ---------------------------------------------------------------- the lookups' connection */

/* The lookups' connection, under look_mu; NULL (and err) while the catalogue is unreachable:
 * a lookup then does not wait for a connection timeout again before the publisher's next
 * attempt. */
static PGconn *look_conn(struct catalogue *c, struct pim_error *err)
{
	if (c->look && PQstatus(c->look) == CONNECTION_OK)
		return c->look;
	if (c->look) {
		PQfinish(c->look);
		c->look = NULL;
	}
	pthread_mutex_lock(&c->mu);
	bool down = !c->st.reachable && c->retry_at_ns > now_ns();
	char last[512];
	snprintf(last, sizeof last, "%s", c->st.last_error);
	pthread_mutex_unlock(&c->mu);
	if (down) {
		err_set(err, -EHOSTUNREACH, "the fleet catalogue is unreachable (%s); not asked", last);
		return NULL;
	}
	if (!(c->look = connect_catalogue(c, err))) {
		note_failure(c, "looking up", err->msg);
		err_prefix(err, "the fleet catalogue did not answer");
	}
	return c->look;
}

/* ---------------------------------------------------------------- looking a model up */

#define SQL_LOOKUP_TEXT \
	"WITH best AS (SELECT id, host_id, measured_at, backend FROM pim_catalogue.runs WHERE model_hash = $1 AND " \
	"platform_key = $2 AND kind = 'measured' ORDER BY measured_at DESC, id DESC LIMIT 1), " \
	"pick AS (SELECT m.region_id, m.evidence, m.t_host, m.t_host_spread, m.n_rd, m.c_store, m.c_be1, m.c_be2, " \
	"m.c_be3, m.bw_read_estimate, m.source_b_cpu, b.host_id, b.measured_at, b.backend FROM best b " \
	"JOIN pim_catalogue.region_metrics m ON m.run_id = b.id " \
	"UNION ALL SELECT * FROM (SELECT DISTINCT ON (m.region_id) m.region_id, m.evidence, m.t_host, m.t_host_spread, " \
	"m.n_rd, m.c_store, m.c_be1, m.c_be2, m.c_be3, m.bw_read_estimate, m.source_b_cpu, r.host_id, r.measured_at, " \
	"r.backend FROM pim_catalogue.runs r JOIN pim_catalogue.region_metrics m ON m.run_id = r.id " \
	"WHERE r.model_hash = $1 AND r.platform_key = $2 AND r.kind = 'imported' AND NOT EXISTS (SELECT 1 FROM best b " \
	"JOIN pim_catalogue.region_metrics x ON x.run_id = b.id AND x.region_id = m.region_id) " \
	"ORDER BY m.region_id, r.measured_at DESC, r.id DESC) imported) " \
	"SELECT region_id, evidence, t_host, t_host_spread, n_rd, c_store, c_be1, c_be2, c_be3, bw_read_estimate, " \
	"source_b_cpu, host_id, extract(epoch FROM measured_at)::bigint, backend FROM pick ORDER BY region_id"
#define STRINGIFY_N_(x) #x
#define STRINGIFY_N(x) STRINGIFY_N_(x)
static const char SQL_LOOKUP_CURSOR[] = "DECLARE lookup NO SCROLL CURSOR FOR " SQL_LOOKUP_TEXT;

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

static bool lookup_types_ok(const PGresult *res)
{
	if (PQnfields(res) != 14)
		return false;
	for (int i = 0; i < 14; i++) {
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

static bool token_ok(const char *s, size_t max)
{
	size_t n = strlen(s);
	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= 0x20 || s[i] >= 0x7f || s[i] == '"' || s[i] == '\'' || s[i] == '\\')
			return false;
	return true;
}

/* A word of a row (libpq ends a binary value with a NUL too): token_ok, no NUL inside. */
static bool column_token(const PGresult *res, int row, int i, size_t max)
{
	const char *s = PQgetvalue(res, row, i);

	return !PQgetisnull(res, row, i) && token_ok(s, max) && strlen(s) == (size_t)PQgetlength(res, row, i);
}

/* A row of SQL_LOOKUP as metrics, each value checked (the catalogue is another host's word);
 * the host and backend point into res. */
static int lookup_row(const PGresult *res, int row, struct store_metrics *m)
{
	bool have, have_n_rd, have_store;

	if (PQgetisnull(res, row, 0) || PQgetlength(res, row, 0) != 4 || PQgetisnull(res, row, 12) ||
	    PQgetlength(res, row, 12) != 8 || !column_token(res, row, 1, 16))
		return -EINVAL;
	int32_t id = (int32_t)(uint32_t)column_be(res, row, 0, 4);
	int64_t at = (int64_t)column_be(res, row, 12, 8);
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
	if (!column_token(res, row, 11, CONFIG_HOST_ID_MAX) || !column_token(res, row, 13, 15))
		return -EINVAL;
	m->origin_measured_at = at;
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
};

/* One batch of the lookup's rows into lr (lr->n valid rows; others counted in p->bad); -EPROTO
 * when the batch is not what was asked for: other columns, more rows than the model has
 * regions, region ids not ascending (each region once). */
static int lookup_parse(PGresult *res, struct lookup_rows *lr, struct lookup_pos *p, struct pim_error *err)
{
	lr->n = 0;
	if (!lookup_types_ok(res) || PQntuples(res) > LOOKUP_BATCH)
		return err_set(err, -EPROTO, "the catalogue's lookup returned other columns than asked for");
	for (int i = 0; i < PQntuples(res); i++) {
		struct store_metrics *m = &lr->m[lr->n];
		if (++p->rows > p->n_regions)
			return err_set(err, -EPROTO, "the catalogue returned more rows than the model's %" PRIu64
				       " regions", p->n_regions);
		*m = (struct store_metrics){ 0 };
		if (lookup_row(res, i, m) < 0) {
			p->bad++;
			continue;
		}
		if ((int64_t)m->region_id <= p->last_id)
			return err_set(err, -EPROTO, "the catalogue's rows are not by region id (region %u after %" PRId64
				       ")", m->region_id, p->last_id);
		p->last_id = m->region_id;
		snprintf(lr->source[lr->n], sizeof lr->source[lr->n], "fleet catalogue: host %s, %s backend",
			 m->origin_host, m->origin_backend);
		m->source = lr->source[lr->n];
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
	const char *vals[2] = { hash, c->platform_key };
	struct store_batches sb = { .pos = { .n_regions = n_regions, .last_id = -1 }, .s = s, .model_id = model_id,
				    .platform_row = platform_row };
	int r;

	*store_failed = false;
	if ((r = exec_ok(pg, "BEGIN READ ONLY", 0, NULL, err)) < 0)
		return r;
	if ((r = exec_ok(pg, SQL_LOOKUP_CURSOR, 2, vals, err)) < 0)
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
	exec_ok(pg, r < 0 && PQtransactionStatus(pg) == PQTRANS_INERROR ? "ROLLBACK" : "COMMIT", 0, NULL, NULL);
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
	size_t rows;                       /* valid rows fetched */
	uint64_t t0, t_fetched, t_answered; /* now_ns: asked, all rows here, answered */
	char what[320];                    /* the model, for the journal: "name" (hash) */
};

/* The storer's nice value (setpriority), above pimd's own. */
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
	setpriority(PRIO_PROCESS, (id_t)gettid(), CATALOGUE_STORER_NICE);
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
					       int64_t version_before, uint64_t n_regions)
{
	struct catalogue_fetched *f = calloc(1, sizeof *f);

	if (!f)
		return NULL;
	f->s = fs;
	f->model_id = model_id;
	f->platform_row = platform_row;
	f->version_before = version_before;
	f->tail = &f->head;
	f->pos = (struct lookup_pos){ .n_regions = n_regions, .last_id = -1 };
	f->t0 = now_ns();
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cv, NULL);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int r = pthread_create(&f->thread, NULL, storer_main, f);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
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
	const char *vals[2] = { hash, c->platform_key };
	struct catalogue_fetched *f = NULL;
	int r;

	*out = NULL;
	if ((r = exec_ok(pg, "BEGIN READ ONLY", 0, NULL, err)) < 0)
		return r;
	if ((r = exec_ok(pg, SQL_LOOKUP_CURSOR, 2, vals, err)) >= 0 &&
	    !(f = fetched_start(c->fill_store, model_id, platform_row, version_before, n_regions)))
		r = err_set(err, -ENOMEM, "out of memory or threads");
	if (f) {
		r = lookup_fetch_all(pg, fetched_batch, f, err);
		f->t_fetched = now_ns();
		/* nothing of a failed lookup is kept: the next query asks again */
		fetched_close(f, r >= 0, r < 0);
	}
	exec_ok(pg, r < 0 && PQtransactionStatus(pg) == PQTRANS_INERROR ? "ROLLBACK" : "COMMIT", 0, NULL, NULL);
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
	return (int)f->rows;
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
static void fill_join(struct catalogue *c)
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
		fill_join(c);
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

int catalogue_fill(struct catalogue *c, struct store *s, int64_t platform_row, const char *model,
		   struct catalogue_fill *out, struct pim_error *err)
{
	struct pim_error e = { 0 };
	struct catalogue_fetched *f = NULL;
	char hash[65];
	int64_t model_id = 0, version = 0;
	uint64_t n_regions = 0;
	bool measured = false, store_failed;
	int r;

	memset(out, 0, sizeof *out);
	/* the last answer did not wait for the rows it fetched: they are stored before the store
	 * says whether this model is measured (it may be the same one) */
	fill_join(c);
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
	out->asked = true;
	out->model_id = model_id;
	out->version_before = version;
	bool keep = c->fill_store && n_regions <= CATALOGUE_FILL_MEMORY_REGIONS;
	pthread_mutex_lock(&c->mu);
	c->st.lookups++;
	pthread_mutex_unlock(&c->mu);
	pthread_mutex_lock(&c->look_mu);
	/* another work thread's lookup may have started a storer since: one at a time */
	if (keep)
		fill_join(c);
	uint64_t t0 = now_ns();
	PGconn *pg = look_conn(c, &e);
	r = pg ? lookup_once(c, pg, s, keep, out, platform_row, hash, n_regions, &f, &store_failed, &e) : e.code;
	if (pg && r < 0 && !store_failed && PQstatus(pg) != CONNECTION_OK) {
		/* a connection kept since before PostgreSQL restarted fails at its first use: once
		 * more on a new one */
		PQfinish(c->look);
		c->look = NULL;
		e = (struct pim_error){ 0 };
		pg = look_conn(c, &e);
		r = pg ? lookup_once(c, pg, s, keep, out, platform_row, hash, n_regions, &f, &store_failed, &e) : e.code;
	}
	if (f) {
		/* before look_mu goes: the next lookup joins it before starting its own */
		pthread_mutex_lock(&c->fill_mu);
		c->pending = f;
		pthread_mutex_unlock(&c->fill_mu);
	}
	if (pg && r < 0 && !store_failed) {
		note_failure(c, "looking up", e.msg);
		if (PQstatus(pg) != CONNECTION_OK) {
			PQfinish(c->look);
			c->look = NULL;
		}
	}
	pthread_mutex_unlock(&c->look_mu);
	if (r < 0 && pg && store_failed)
		return err_set(err, r, "%s", e.msg);
	if (r < 0) {
		snprintf(out->error, sizeof out->error, "%s", e.msg);
		return 0;
	}
	if (pg)
		note_success(c);
	pthread_mutex_lock(&c->mu);
	c->st.lookup_hits += r > 0;
	pthread_mutex_unlock(&c->mu);
	out->fetched = (size_t)r;
	if (f) {
		snprintf(f->what, sizeof f->what, "\"%s\" (%.12s)", model, hash);
		/* the answer is computed from these while the storer stores them; none: the
		 * (empty) transaction is committed now */
		out->rows = f;
		if (r == 0) {
			catalogue_fill_release(c, out, NULL);
			fill_join(c);
		}
		return 0;
	}
	if (r > 0)
		log_info("Model \"%s\" (%.12s) has no metrics here: %d regions taken from the fleet catalogue in "
			 "%.1f ms", model, hash, r, (double)(now_ns() - t0) / 1e6);
	return 0;
}

int catalogue_pg_lookup_rows(PGconn *pg, const char *hash, const char *platform_key, size_t *rows,
			     struct pim_error *err)
{
	const char *vals[2] = { hash, platform_key };
	int r;

	*rows = 0;
	if ((r = exec_ok(pg, "BEGIN READ ONLY", 0, NULL, err)) < 0)
		return r;
	if ((r = exec_ok(pg, SQL_LOOKUP_CURSOR, 2, vals, err)) >= 0)
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
	exec_ok(pg, r < 0 ? "ROLLBACK" : "COMMIT", 0, NULL, NULL);
	return r;
}

/* ---------------------------------------------------------------- listing */

static const char SQL_LIST[] =
	"SELECT r.model_hash, mo.name, r.platform_key, count(DISTINCT r.host_id), "
	"count(*) FILTER (WHERE r.kind = 'measured'), count(*) FILTER (WHERE r.kind = 'imported'), "
	"extract(epoch FROM max(r.measured_at))::bigint, mo.regions FROM pim_catalogue.runs r "
	"JOIN pim_catalogue.models mo ON mo.hash = r.model_hash GROUP BY r.model_hash, mo.name, r.platform_key, "
	"mo.regions ORDER BY mo.name, r.model_hash, r.platform_key LIMIT $1";

static int list_rows(PGresult *res, unsigned limit, int (*fn)(void *, const struct catalogue_entry *), void *ctx,
		     bool *truncated)
{
	int n = PQntuples(res);
	struct catalogue_entry *e = malloc(sizeof *e);

	if (!e)
		return -ENOMEM;
	*truncated = (unsigned)n > limit;
	for (int i = 0; i < n && (unsigned)i < limit; i++) {
		memset(e, 0, sizeof *e);
		snprintf(e->model_hash, sizeof e->model_hash, "%s", PQgetvalue(res, i, 0));
		snprintf(e->model_name, sizeof e->model_name, "%s", PQgetvalue(res, i, 1));
		snprintf(e->platform_key, sizeof e->platform_key, "%s", PQgetvalue(res, i, 2));
		e->hosts = (unsigned)strtoul(PQgetvalue(res, i, 3), NULL, 10);
		e->runs = (unsigned)strtoul(PQgetvalue(res, i, 4), NULL, 10);
		e->imports = (unsigned)strtoul(PQgetvalue(res, i, 5), NULL, 10);
		e->last_measured_at = strtoll(PQgetvalue(res, i, 6), NULL, 10);
		e->regions = (unsigned)strtoul(PQgetvalue(res, i, 7), NULL, 10);
		int r = fn(ctx, e);
		if (r < 0) {
			free(e);
			return r;
		}
	}
	free(e);
	return 0;
}

int catalogue_list(struct catalogue *c, unsigned limit, int (*fn)(void *ctx, const struct catalogue_entry *e),
		   void *ctx, bool *truncated, struct pim_error *err)
{
	char lim[16];
	const char *vals[1] = { lim };
	int r;

	if (limit == 0 || limit > CATALOGUE_LIST_MAX)
		limit = limit ? CATALOGUE_LIST_MAX : 1000;
	snprintf(lim, sizeof lim, "%u", limit + 1);
	pthread_mutex_lock(&c->look_mu);
	PGconn *pg = look_conn(c, err);
	if (!pg) {
		pthread_mutex_unlock(&c->look_mu);
		return err->code;
	}
	PGresult *res = exec(pg, SQL_LIST, 1, vals);
	if (PQresultStatus(res) != PGRES_TUPLES_OK && PQstatus(pg) != CONNECTION_OK) {
		/* kept since before PostgreSQL restarted: once more on a new connection */
		PQclear(res);
		PQfinish(c->look);
		c->look = NULL;
		if (!(pg = look_conn(c, err))) {
			pthread_mutex_unlock(&c->look_mu);
			return err->code;
		}
		res = exec(pg, SQL_LIST, 1, vals);
	}
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		char why[512];
		pq_message(why, sizeof why, PQresultErrorMessage(res));
		note_failure(c, "listing", why);
		r = err_set(err, -EIO, "the fleet catalogue did not answer: %s", why);
	} else {
		note_success(c);
		r = list_rows(res, limit, fn, ctx, truncated);
		if (r == -ENOMEM)
			err_set(err, r, "out of memory");
	}
	PQclear(res);
	pthread_mutex_unlock(&c->look_mu);
	return r;
}

/* ---------------------------------------------------------------- set-up */

void catalogue_default_host_id(char *buf, size_t len)
{
	FILE *f = fopen("/etc/machine-id", "re");
	char id[64] = "";

	if (f) {
		if (!fgets(id, sizeof id, f))
			id[0] = 0;
		fclose(f);
		id[strcspn(id, "\n")] = 0;
	}
	if (!token_ok(id, CONFIG_HOST_ID_MAX) && (gethostname(id, sizeof id) < 0 || !token_ok(id, CONFIG_HOST_ID_MAX)))
		snprintf(id, sizeof id, "unknown-host");
	snprintf(buf, len, "%s", id);
}

/* Where the catalogue is, in words for the status: the connection string's host, port,
 * database, user, service and sslmode (never its password: config.c refuses one anyway). */
static int describe_target(const char *conninfo, char *buf, size_t len, struct pim_error *err)
{
	static const char *const shown[] = { "service", "host", "hostaddr", "port", "dbname", "user", "sslmode" };
	char *why = NULL;
	PQconninfoOption *opts = PQconninfoParse(conninfo, &why);
	size_t pos = 0;

	if (!opts) {
		int r = err_set(err, -EINVAL, "catalogue: %s", why ? why : "not a libpq connection string");
		PQfreemem(why);
		return r;
	}
	buf[0] = 0;
	for (PQconninfoOption *o = opts; o->keyword; o++)
		for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++)
			if (strcmp(o->keyword, shown[i]) == 0 && o->val && *o->val && pos < len)
				pos += (size_t)snprintf(buf + pos, len - pos, "%s%s=%s", pos ? " " : "", o->keyword,
							o->val);
	PQconninfoFree(opts);
	if (!buf[0])
		snprintf(buf, len, "(libpq defaults: PGHOST, PGDATABASE...)");
	return 0;
}

int catalogue_check_config(const struct config *cfg, struct pim_error *err)
{
	char target[256];
	return cfg->catalogue[0] ? describe_target(cfg->catalogue, target, sizeof target, err) : 0;
}

int catalogue_new(const struct config *cfg, const struct platform *pf, const struct store *store,
		  struct catalogue **out, struct pim_error *err)
{
	struct catalogue *c = calloc(1, sizeof *c);
	int r;

	if (!c)
		return err_set(err, -ENOMEM, "out of memory");
	snprintf(c->conninfo, sizeof c->conninfo, "%s", cfg->catalogue);
	if (cfg->catalogue_host_id[0])
		snprintf(c->host_id, sizeof c->host_id, "%s", cfg->catalogue_host_id);
	else
		catalogue_default_host_id(c->host_id, sizeof c->host_id);
	snprintf(c->platform_key, sizeof c->platform_key, "%s", pf->fleet_key);
	c->timeout_ms = cfg->catalogue_timeout_ms;
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->look_mu, NULL);
	pthread_mutex_init(&c->fill_mu, NULL);
	/* the publisher's waits are timed on the monotonic clock */
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	snprintf(c->st.host_id, sizeof c->st.host_id, "%s", c->host_id);
	snprintf(c->st.platform_key, sizeof c->st.platform_key, "%s", c->platform_key);
	if ((r = describe_target(c->conninfo, c->st.target, sizeof c->st.target, err)) < 0 ||
	    (r = store_open_again(store, cfg->busy_timeout_ms, &c->store, err)) < 0 ||
	    (r = store_open_again(store, cfg->busy_timeout_ms, &c->fill_store, err)) < 0)
		goto fail;
	/* the thread takes no signals: they stay with the event loop's signalfd */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	r = -pthread_create(&c->thread, NULL, publisher_main, c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0) {
		err_set(err, r, "cannot start the catalogue's thread: %s", strerror(-r));
		goto fail;
	}
	c->started = true;
	log_info("Fleet catalogue %s: publishing as host %s, platform key %s", c->st.target, c->host_id,
		 c->platform_key);
	*out = c;
	return 0;
fail:
	catalogue_free(c);
	return r;
}

void catalogue_free(struct catalogue *c)
{
	if (!c)
		return;
	if (c->started) {
		pthread_mutex_lock(&c->mu);
		c->stop = true;
		pthread_cond_signal(&c->cv);
		pthread_mutex_unlock(&c->mu);
		pthread_join(c->thread, NULL);
	}
	if (c->pub)
		PQfinish(c->pub);
	if (c->look)
		PQfinish(c->look);
	fill_join(c);
	store_close(c->store);
	store_close(c->fill_store);
	pthread_mutex_destroy(&c->mu);
	pthread_mutex_destroy(&c->look_mu);
	pthread_mutex_destroy(&c->fill_mu);
	pthread_cond_destroy(&c->cv);
	free(c);
}
