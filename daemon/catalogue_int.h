/* SPDX-License-Identifier: MIT */
/* What catalogue.c and catalogue_lookup.c share: the catalogue's state and its helpers. */
#ifndef PIMD_CATALOGUE_INT_H
#define PIMD_CATALOGUE_INT_H

#include <libpq-fe.h>
#include <pthread.h>

#include "catalogue.h"

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

/* The last failure (what was being done, why) and the backoff; a success clears them. */
void catalogue_note_failure(struct catalogue *c, const char *what, const char *why);
void catalogue_note_success(struct catalogue *c);
/* A statement with text parameters, text results; _ok: one that returns no rows (0, or -EIO with
 * libpq's message in err). */
PGresult *catalogue_exec(PGconn *pg, const char *sql, int n, const char *const *values);
int catalogue_exec_ok(PGconn *pg, const char *sql, int n, const char *const *values, struct pim_error *err);
/* A new connection to the catalogue, its schema migrated; NULL and err when it fails. */
PGconn *catalogue_connect(struct catalogue *c, struct pim_error *err);
/* The lookups' connection, under look_mu (catalogue.c). */
PGconn *catalogue_look_conn(struct catalogue *c, struct pim_error *err);
/* A word from the catalogue or the configuration: 1..max printable characters, no quotes. */
bool catalogue_token_ok(const char *s, size_t max);
/* Waits for the storer of the last lookup (catalogue_lookup.c). */
void catalogue_fill_join(struct catalogue *c);

#endif
