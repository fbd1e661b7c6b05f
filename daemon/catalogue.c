/* SPDX-License-Identifier: MIT */
#include "catalogue_int.h"

#include <ctype.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "priority.h"

/* struct catalogue: catalogue_int.h */

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
void catalogue_note_failure(struct catalogue *c, const char *what, const char *why)
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

void catalogue_note_success(struct catalogue *c)
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

PGresult *catalogue_exec(PGconn *pg, const char *sql, int n, const char *const *values)
{
	return PQexecParams(pg, sql, n, NULL, values, NULL, NULL, 0);
}

/* A statement that returns no rows: 0, or -EIO with libpq's message in err. */
int catalogue_exec_ok(PGconn *pg, const char *sql, int n, const char *const *values, struct pim_error *err)
{
	PGresult *res = catalogue_exec(pg, sql, n, values);
	ExecStatusType k = PQresultStatus(res);
	int r = k == PGRES_COMMAND_OK || k == PGRES_TUPLES_OK ? 0
		: err_set(err, -EIO, "%s", PQresultErrorMessage(res));
	PQclear(res);
	return r;
}

/* The schema's version: 0 when it has none yet, -EIO on another failure. */
static int schema_version(PGconn *pg, unsigned *v, struct pim_error *err)
{
	PGresult *res = catalogue_exec(pg, "SELECT coalesce(max(version), 0) FROM pim_catalogue.schema_migrations", 0, NULL);
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
		if ((r = catalogue_exec_ok(pg, "BEGIN", 0, NULL, err)) < 0)
			return r;
		if ((r = catalogue_exec_ok(pg, "SELECT pg_advisory_xact_lock(7423001)", 0, NULL, err)) < 0 ||
		    (r = catalogue_exec_ok(pg, "CREATE SCHEMA IF NOT EXISTS pim_catalogue", 0, NULL, err)) < 0 ||
		    (r = catalogue_exec_ok(pg, "CREATE TABLE IF NOT EXISTS pim_catalogue.schema_migrations (version INTEGER "
				 "PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
				 0, NULL, err)) < 0 ||
		    (r = schema_version(pg, &v, err)) < 0)
			goto fail;
		if (v >= m->version) {
			/* another host applied it meanwhile */
			catalogue_exec_ok(pg, "COMMIT", 0, NULL, NULL);
			continue;
		}
		PGresult *res = PQexec(pg, m->sql); /* several statements: the simple protocol */
		r = PQresultStatus(res) == PGRES_COMMAND_OK ? 0
		    : err_set(err, -EIO, "applying %s: %s", m->name, PQresultErrorMessage(res));
		PQclear(res);
		if (r < 0 || (r = catalogue_exec_ok(pg, "INSERT INTO pim_catalogue.schema_migrations (version, name) "
					  "VALUES ($1, $2)", 2, vals, err)) < 0 ||
		    (r = catalogue_exec_ok(pg, "COMMIT", 0, NULL, err)) < 0)
			goto fail;
		log_info("Fleet catalogue: applied schema migration %s", m->name);
		v = m->version;
	}
	*version = v;
	return 0;
fail:
	catalogue_exec_ok(pg, "ROLLBACK", 0, NULL, NULL);
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
PGconn *catalogue_connect(struct catalogue *c, struct pim_error *err)
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

	PGresult *res = catalogue_exec(pg, SQL_PUBLISH_KEYS, 5, keys);
	if (PQresultStatus(res) == PGRES_COMMAND_OK) {
		PQclear(res);
		res = catalogue_exec(pg, SQL_PUBLISH_RUN, 10, run);
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
			catalogue_note_failure(c, "publishing", why);
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
	if (!c->pub && !(c->pub = catalogue_connect(c, &err))) {
		catalogue_note_failure(c, "connecting", err.msg);
		count_outbox(c);
		return;
	}
	if (drain(c) == 0)
		catalogue_note_success(c);
	count_outbox(c);
}

static void *publisher_main(void *data)
{
	struct catalogue *c = data;

	priority_unboost(0); /* (started on the loop's thread) */
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
PGconn *catalogue_look_conn(struct catalogue *c, struct pim_error *err)
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
	if (!(c->look = catalogue_connect(c, err))) {
		catalogue_note_failure(c, "looking up", err->msg);
		err_prefix(err, "the fleet catalogue did not answer");
	}
	return c->look;
}

bool catalogue_token_ok(const char *s, size_t max)
{
	size_t n = strlen(s);
	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= 0x20 || s[i] >= 0x7f || s[i] == '"' || s[i] == '\'' || s[i] == '\\')
			return false;
	return true;
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
	PGconn *pg = catalogue_look_conn(c, err);
	if (!pg) {
		pthread_mutex_unlock(&c->look_mu);
		return err->code;
	}
	PGresult *res = catalogue_exec(pg, SQL_LIST, 1, vals);
	if (PQresultStatus(res) != PGRES_TUPLES_OK && PQstatus(pg) != CONNECTION_OK) {
		/* kept since before PostgreSQL restarted: once more on a new connection */
		PQclear(res);
		PQfinish(c->look);
		c->look = NULL;
		if (!(pg = catalogue_look_conn(c, err))) {
			pthread_mutex_unlock(&c->look_mu);
			return err->code;
		}
		res = catalogue_exec(pg, SQL_LIST, 1, vals);
	}
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		char why[512];
		pq_message(why, sizeof why, PQresultErrorMessage(res));
		catalogue_note_failure(c, "listing", why);
		r = err_set(err, -EIO, "the fleet catalogue did not answer: %s", why);
	} else {
		catalogue_note_success(c);
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
	if (!catalogue_token_ok(id, CONFIG_HOST_ID_MAX) && (gethostname(id, sizeof id) < 0 || !catalogue_token_ok(id, CONFIG_HOST_ID_MAX)))
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
	if (r == 0)
		pthread_setname_np(c->thread, "pimd-catalogue"); /* (top -H, ps -L) */
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
	catalogue_fill_join(c);
	store_close(c->store);
	store_close(c->fill_store);
	pthread_mutex_destroy(&c->mu);
	pthread_mutex_destroy(&c->look_mu);
	pthread_mutex_destroy(&c->fill_mu);
	pthread_cond_destroy(&c->cv);
	free(c);
}
