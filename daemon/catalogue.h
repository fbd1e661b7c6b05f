/* SPDX-License-Identifier: MIT */
/*
 * catalogue.h: the fleet catalogue, a PostgreSQL database many hosts share (pimd(8), Fleet
 * catalogue; pimd.conf(5), catalogue).  This module owns libpq; nothing else in pimd talks to
 * PostgreSQL.
 *
 * Who does what:
 *  - the writer thread queues what is to be published in the local store's outbox, in the
 *    transaction that stores it (store.h: store_outbox_add_run, store_outbox_add_import);
 *  - the catalogue's own thread (the publisher) publishes the outbox's rows oldest first, with
 *    its own connections to SQLite and PostgreSQL, and forgets a row only once PostgreSQL has
 *    committed it; it backs off while PostgreSQL fails, and applies the catalogue's schema
 *    (sql/catalogue/) when it connects;
 *  - the work thread looks models up (catalogue_fill) and lists the catalogue, on a connection
 *    of its own; the event loop never waits for PostgreSQL (catalogue_status reads what the
 *    threads last saw);
 *  - a storer thread, one per lookup, stores the rows of a lookup on the catalogue's second
 *    connection to the local store while the work thread answers from them (catalogue_fill).
 */
#ifndef PIMD_CATALOGUE_H
#define PIMD_CATALOGUE_H

#include "config.h"
#include "manifest.h"
#include "platform.h"
#include "store.h"

extern const struct store_migration catalogue_migrations[];
extern const unsigned catalogue_n_migrations;

struct catalogue;

/* Polls the outbox this often when idle (a row queued is published within it). */
#define CATALOGUE_POLL_MS 250u
/* Waits between failed attempts: doubled from the first to the last. */
#define CATALOGUE_BACKOFF_MIN_MS 500u
#define CATALOGUE_BACKOFF_MAX_MS 30000u
/* Rows of a list at most. */
#define CATALOGUE_LIST_MAX 10000u

/*
 * Checks cfg's catalogue key (a libpq connection string), and starts the publisher with its own
 * connection to store's database.  pf's fleet_key and fleet_json must be set
 * (platform_fleet_describe).  Does not connect to PostgreSQL: the publisher does, and keeps
 * trying.
 */
int catalogue_new(const struct config *cfg, const struct platform *pf, const struct store *store,
		  struct catalogue **out, struct pim_error *err);
/* Whether libpq takes cfg's catalogue key (no connection is made): 0, or -EINVAL and why. */
int catalogue_check_config(const struct config *cfg, struct pim_error *err);
/* Stops the publisher (after the PostgreSQL call it is in, at most catalogue_timeout_ms). */
void catalogue_free(struct catalogue *c);

struct catalogue_status {
	bool reachable;
	char target[256];          /* host, port, database, sslmode: never a password */
	char host_id[CONFIG_HOST_ID_MAX + 1];
	char platform_key[256];
	uint64_t outbox_depth, outbox_failed;
	int64_t last_publish_at;   /* seconds since the epoch; 0: never */
	uint64_t published, conflicts;
	char last_error[512];
	int64_t last_error_at;
	uint32_t retry_in_ms;
	unsigned schema_version;
	uint64_t lookups, lookup_hits;
};
/* What the threads last saw; quick (a mutex), for the event loop. */
void catalogue_status(struct catalogue *c, struct catalogue_status *out);

/* Models of at most this many regions are answered from the fetched rows in memory while they
 * are stored (catalogue_fill); larger ones are stored first and read back, so that memory stays
 * bounded (about 600 bytes a row while the answer is computed). */
#define CATALOGUE_FILL_MEMORY_REGIONS 100000u

struct catalogue_fetched;

/* What catalogue_fill found for a model. */
struct catalogue_fill {
	bool asked;                /* the model had no metrics here: the catalogue was asked */
	size_t fetched;            /* regions from the catalogue */
	char error[512];           /* why it was not asked or did not answer ("" when it did) */
	int64_t model_id;          /* the model asked for, and its version then (store_model_version) */
	int64_t version_before;
	/* the rows fetched, kept in memory while another connection stores them: the answer is
	 * computed from these (catalogue_fill_each) when it reads the model at version_before;
	 * NULL when there are none or they are stored already */
	struct catalogue_fetched *rows;
	/* the lookup while it runs on a thread of its own (catalogue_fill_wait), and the model
	 * asked for */
	struct catalogue_ask *ask;
	char model[MANIFEST_NAME_MAX + 1];
};

/*
 * For a model this host has no metrics of (on platform_row): the metrics hosts of the same
 * platform key measured for the same content hash, for the local store (which then answers, and
 * is preferred to the catalogue from then on), each with its origin (the host, when, the
 * backend).  A measured run beats imported counts: the newest measured run gives its regions,
 * imported counts only the regions it lacks.  Blocks for up to catalogue_timeout_ms: never on
 * the event loop.  Returns 0 whatever the catalogue did (out says); < 0 only for a failure of
 * the local store.
 *
 * A model of up to CATALOGUE_FILL_MEMORY_REGIONS regions is answered from the fetched rows
 * (out->rows): the catalogue's storer stores them meanwhile, on a connection of its own, in one
 * transaction, and the caller calls catalogue_fill_release once its answer is computed, without
 * waiting for the commit; the next catalogue_fill (so the next answer that may ask the catalogue)
 * waits for it, and then finds the model measured here.  A larger model is stored before
 * catalogue_fill returns.
 */
int catalogue_fill(struct catalogue *c, struct store *s, int64_t platform_row, const char *model,
		   struct catalogue_fill *out, struct pim_error *err);
/* A model answered from memory is looked up on a thread of its own while the caller reads the
 * model from its store: out->ask is set, and asked, model_id and version_before only, until
 * catalogue_fill_wait (called by catalogue_fill_release too) has fetched and stored, rows and
 * error are set as above; returns as catalogue_fill. */
int catalogue_fill_wait(struct catalogue_fill *fill, struct pim_error *err);
/* fn for each row of fill->rows by region id (none without rows), as store_metrics_each. */
int catalogue_fill_each(const struct catalogue_fill *fill, store_metrics_fn fn, void *ctx);

/* An answer computed from the rows of a catalogue_fill, to be stored once they are committed. */
struct catalogue_answer {
	/* On the storer's thread, with its connection s, once the rows are committed durably: the
	 * answer is stored under the model's version as committed; not called when the rows were
	 * not stored, or another change to the model came first. */
	void (*put)(void *data, struct store *s, int64_t version);
	/* Called once in any case, after put. */
	void (*release)(void *data);
	void *data;
};
/* The caller is done with fill->rows (and a, if not NULL: its answer from them, to be stored
 * with them); returns at once. */
void catalogue_fill_release(struct catalogue *c, struct catalogue_fill *fill, const struct catalogue_answer *a);
/* Waits until the rows a first answer was computed from are stored (or rolled back), so that
 * what the store says of the model next includes them (model show); c may be NULL. */
void catalogue_settle(struct catalogue *c);

struct catalogue_entry {
	char model_hash[65];
	char model_name[256];
	char platform_key[256];
	unsigned hosts, runs, imports, regions;
	int64_t last_measured_at;
};
/* Models and platforms measured across the fleet, by name and platform, at most limit rows
 * (fn once each); *truncated when there are more.  Blocks: never on the event loop. */
int catalogue_list(struct catalogue *c, unsigned limit, int (*fn)(void *ctx, const struct catalogue_entry *e),
		   void *ctx, bool *truncated, struct pim_error *err);

/*
 * What the publisher and the lookups say to PostgreSQL, on a connection of the caller's (libpq's
 * PGconn; catalogue.c and the fleet benchmark, which speaks for many hosts, use these).
 */
typedef struct pg_conn PGconn;
/* A connection, the catalogue's schema migrated; NULL and err when not. */
PGconn *catalogue_pg_connect(const char *conninfo, unsigned timeout_ms, unsigned *version, struct pim_error *err);
enum catalogue_publish {
	CATALOGUE_PUBLISHED,
	CATALOGUE_ALREADY_THERE, /* published before (idempotent): nothing new */
	CATALOGUE_REFUSED,       /* for its content: publishing it again will not help */
	CATALOGUE_FAILED,        /* the connection or the server: try again later */
};
/* Publishes an outbox row as host host_id (why: the error, unless published). */
enum catalogue_publish catalogue_pg_publish(PGconn *pg, const char *host_id, const struct store_outbox_row *o,
					    char *why, size_t why_len);
/* The lookup of catalogue_fill for a content hash on a platform key, rows counted, not stored. */
int catalogue_pg_lookup_rows(PGconn *pg, const char *hash, const char *platform_key, size_t *rows,
			     struct pim_error *err);

/* The host id of this host: the configured one, else /etc/machine-id, else the host name. */
void catalogue_default_host_id(char *buf, size_t len);

#endif
