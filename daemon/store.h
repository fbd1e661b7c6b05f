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

#include "pim.pb-c.h"
#include "util.h"

/* Text form of a region's extents: at most 16 numbers of 20 digits. */
#define MANIFEST_EXTENTS_TEXT (16 * 21 + 1)

struct store_migration {
	unsigned version;
	const char *name;
	const char *sql;
};

extern const struct store_migration store_migrations[];
extern const unsigned store_n_migrations;

struct store;

/* Opens (creating if needed) the database at path, sets WAL, synchronous=NORMAL,
 * foreign_keys=ON and the busy timeout, and migrates it to the latest version. */
int store_open(const char *path, unsigned busy_timeout_ms, struct store **out, struct pim_error *err);
/* As store_open, with an explicit migration list (tests). */
int store_open_with(const char *path, unsigned busy_timeout_ms, const struct store_migration *migs,
		    unsigned n_migs, struct store **out, struct pim_error *err);
void store_close(struct store *s);
void store_set_busy_timeout(struct store *s, unsigned busy_timeout_ms);

unsigned store_schema_version(struct store *s);
const char *store_path(struct store *s);

/* Stores a validated manifest as model m->name, owned by uid.  An existing model of that name
 * is an error (-EEXIST) unless replace; replacing another user's model needs the owner's uid,
 * uid 0 or the daemon's own uid (-EPERM).  All or nothing. */
int store_model_put(struct store *s, const Pim__Manifest *m, uid_t uid, bool replace, bool *replaced,
		    Pim__ModelSummary **summary, struct pim_error *err);

/* Summaries of all models, by name.  Free each with pim__model_summary__free_unpacked and the
 * array with free. */
int store_model_list(struct store *s, Pim__ModelSummary ***out, size_t *n, struct pim_error *err);

/* The stored manifest of a model (-ENOENT if absent). */
int store_model_get(struct store *s, const char *name, Pim__ModelSummary **summary,
		    Pim__Manifest **manifest, struct pim_error *err);

/* Removes a model; only its owner, uid 0 or the daemon's own uid may (-EPERM). */
int store_model_remove(struct store *s, const char *name, uid_t uid, struct pim_error *err);

int store_model_count(struct store *s, unsigned *n, struct pim_error *err);

/* PRAGMA integrity_check == "ok". */
int store_check_integrity(struct store *s, struct pim_error *err);

#endif
