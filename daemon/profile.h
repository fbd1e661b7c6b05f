/* SPDX-License-Identifier: MIT */
/*
 * profile.h: the profiling service of pimd (doc/design.md §4): a queue of jobs, each run by a forked
 * worker (worker.c) as the requesting client's user, whose samples are stored in batched
 * transactions and turned into per-region metrics when the job ends.
 */
#ifndef PIMD_PROFILE_H
#define PIMD_PROFILE_H

#include <stdint.h>
#include <sys/types.h>

#include "cgroup.h"
#include "config.h"
#include "loop.h"
#include "platform.h"
#include "reply.h"
#include "store.h"

struct profiler;

int profiler_new(struct loop *loop, struct store *store, const struct platform *platform,
		 const struct config *cfg, struct profiler **out, struct pim_error *err);
/* Who makes the jobs' changes (samples, progress, metrics, ends of runs; in-situ batches): the
 * writer thread (server_writer), so that the event loop never waits for the store; NULL: they
 * wait in the profiler's store until it is settled (store_write_settle: pimd does after each
 * batch of events, and profiler_free). */
void profiler_set_writer(struct profiler *pf, const struct store_writer *writer);
/* No job starts any more (pimd is stopping). */
void profiler_stop(struct profiler *pf);
/* Kills running workers and fails their jobs (stored as failed, at once: call it after the
 * writer is gone). */
void profiler_free(struct profiler *pf);
void profiler_apply_config(struct profiler *pf, const struct config *cfg);
/* Reaps the daemon's children that are none of its workers (worker_reap_strays): on SIGCHLD,
 * and after each job. */
void profiler_reap_strays(struct profiler *pf);
unsigned profiler_active(const struct profiler *pf);
/* How jobs are contained: a cgroup per job in cgroup (kept by the caller, freed after the
 * profiler), or the process groups alone when NULL; containment says it for pimctl status. */
void profiler_set_containment(struct profiler *pf, struct cgroup_tree *cgroup,
			      const char *containment);
const char *profiler_containment(const struct profiler *pf);

/* Requests, answered on the event loop, through defer: what they read of the store is read on a
 * work thread (the loop never queries it).  Profile (takes peer->passed_fd; its model read
 * there, then answered once its run is stored, by the writer) and ProfileStatus (the run's row
 * read there). */
Pim__Response *profiler_rpc_start(struct profiler *pf, struct rpc_peer *peer, const Pim__Request *req,
				  struct rpc_deferred *defer);
Pim__Response *profiler_rpc_status(struct profiler *pf, const Pim__Request *req, struct rpc_deferred *defer);
/* ProfileCancel: the owner of a queued or running job, or root, cancels it; it ends failed with
 * "cancelled: by uid N". */
Pim__Response *profiler_rpc_cancel(struct profiler *pf, struct rpc_peer *peer, const Pim__Request *req,
				   struct rpc_deferred *defer);
/* The model of id model_id was removed, or replaced by a load: its jobs are cancelled
 * ("cancelled: model replaced", "cancelled: model removed"), the running ones' workers killed at
 * once.  (Told by the transport from what the change's thread saw: nothing is looked up.) */
void profiler_models_changed(struct profiler *pf, int64_t model_id, bool replaced);

/* In-situ samples (SampleBatch) of a connection, answered once they are stored (by the writer,
 * through defer), and its end. */
Pim__Response *profiler_rpc_samples(struct profiler *pf, struct rpc_peer *peer, const Pim__Request *req,
				    struct rpc_deferred *defer);
void profiler_insitu_close(struct profiler *pf, struct rpc_peer *peer);

/* Turns between uids in the profiling queue: the next job to start is the oldest waiting one
 * of the uid whose last job started longest ago (a uid never served, or forgotten, first). */
#define PROFILE_TURNS_MAX 256 /* uids remembered; beyond, the one served longest ago is forgotten */
struct profile_turns {
	struct {
		uid_t uid;
		uint64_t last; /* clock value of its last start */
	} slot[PROFILE_TURNS_MAX];
	unsigned n;
	uint64_t clock;
};
/* Index into uids[0..n) (the waiting jobs' uids in arrival order, n > 0) of the job to start. */
size_t profile_turns_pick(const struct profile_turns *t, const uid_t *uids, size_t n);
/* Records that a job of uid started. */
void profile_turns_take(struct profile_turns *t, uid_t uid);

#endif
