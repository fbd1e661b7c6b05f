/* SPDX-License-Identifier: MIT */
/*
 * profile_int.h: what the parts of the profiling service share (not for other modules):
 * the jobs, their changes for the writer thread and the profiler itself.  profile.c: the
 * profiler and the life of a job; profile_turns.c: which job starts next; profile_model.c:
 * reading a job's model; profile_pipe.c: reading a worker's pipe; profile_write.c: a job's
 * changes with the writer thread; profile_derive.c: the metrics at a run's end;
 * profile_rpc.c: who may profile, and the requests; profile_insitu.c: in-situ sampling.
 */
#ifndef PIMD_PROFILE_INT_H
#define PIMD_PROFILE_INT_H

#include "manifest.h"
#include "profile.h"
#include "worker.h"

#define SAMPLE_BATCH 4096          /* samples per transaction */
/* A job's open batch holds SAMPLE_BATCH samples and what one round of worker_next() may hand
 * over beyond them (its budget of 1024 records and the 64 of its buffer), so that reading stops
 * between rounds only. */
#define SAMPLE_ROOM (SAMPLE_BATCH + 2048)
/* A job's changes handed to the writer thread and not yet on disk, at most: beyond, its
 * worker's pipe is not read (the worker waits to write) until one is stored, so that what
 * waits for the disk stays bounded. */
#define BATCHES_WAITING 2
#define UNRECORDED_MAX 16
#define PROGRESS_STORE_NS 250000000ull /* progress written to the store at most 4 times a second */
#define TIMEOUT_TICK_MS 100

struct region_fact {
	int32_t id;
	uint64_t profile_read_bytes; /* unique bytes read (allocations with role in/inout), §4.4 */
};

struct job {
	struct job *next;
	struct profiler *pf;
	int64_t run;
	int64_t model_id;
	char model[MANIFEST_NAME_MAX + 1];
	int model_fd;
	uid_t uid;
	gid_t gid;
	unsigned reps, warmups, timeout_ms;
	int cpu; /* pinned to, -1 none */
	uint64_t *arg_bytes;
	uint64_t digest;          /* manifest_digest() of the stored manifest */
	size_t n_args;
	int32_t *regions;
	size_t n_regions;
	int32_t *measure;
	size_t n_measure;
	struct region_fact *facts; /* sorted by id */
	size_t n_facts;
	/* event plan (counters backend) */
	struct counters_event events[EVENTS_ROLE_MAX];
	int role_of[EVENTS_ROLE_MAX]; /* event index → role */
	struct worker_group groups[EVENTS_ROLE_MAX];
	unsigned n_groups;
	/* while running */
	struct worker *w;
	struct watch wfd, wpid;
	bool running, eof, exited;
	bool have_hello, have_error, done;
	struct worker_hello hello;
	struct worker_error error;
	/* the samples read since the last hand-over, in the write request that takes them to the
	 * writer (profile_pipe.c); the run's end goes in the last one.  NULL once that is handed
	 * over, and for an in-situ run (its batches are its connection's) */
	struct job_write *batch;
	uint64_t reps_done, reps_total;
	uint64_t progress_stored_ns;
	bool store_failed;
	char store_error[256];
	uint64_t samples_seen;
	bool cut;                  /* profile_max_samples reached: the worker was stopped */
	char note[128];            /* what pimd changed in the request, said in the final message */
	/* its changes are made by the writer thread (struct job_write) */
	unsigned writes;           /* handed over, not yet done */
	bool paused;               /* the worker's pipe is not read: a full batch waits */
	bool ending;               /* the worker ended (end); the run ends once writes is 0 */
	struct worker_status end;
	bool insitu;               /* an in-situ run: samples_seen counts what its client sent */
	bool creating;             /* queued, its run's row with the writer: it cannot start yet */
	/* cancelled (profile_job_cancel): it never starts, or its worker was killed; it ends failed with
	 * "cancelled: " and why.  gone: its model was removed or replaced, and its run with it */
	bool cancelled, gone, gone_seen;
	char cancel_why[96];
};

/*
 * A change of a job's run, made by the writer thread (store_write): its creation (an in-situ
 * run's first batch), a batch of samples, an update of its row; or its end: the rest of its
 * samples, the metrics derived from all of them, and its final row.  The writer reads only
 * what the event loop no longer changes: the job's facts, and at its end (nothing of it is
 * with the writer any more) its outcome.
 */
struct job_write {
	struct store_write sw;     /* as handed to the writer (store_write_via) */
	struct job *j;
	int64_t run;               /* j's run (the loop's j->run is not read on the writer) */
	struct store_sample *buf;  /* n samples (values in vals) */
	uint64_t (*vals)[COUNTERS_MAX_GROUP];
	size_t n;
	bool open;                 /* create the run first (sets run) */
	unsigned regions_total;    /* open: the regions it measures */
	bool update;
	struct store_run_update u;
	bool final;
	/* final, in parts: where the metrics go on and how many are stored, as of the parts on
	 * disk (derive_from, stored) and as of the part being written (the _next ones); whether
	 * the samples, run and update above are on disk already (head_done) */
	uint32_t derive_from, derive_next;
	unsigned stored_next;
	bool head_done;
	struct worker_status st;   /* final, of a profiling job: how its worker ended */
	bool ok;                   /* final: the run is done, not failed */
	unsigned stored;           /* final: regions with metrics */
	char msg[1024];            /* final: the run's message */
};


struct profiler {
	struct loop *loop;
	struct store *store;
	const struct platform *platform;
	unsigned concurrency, queue_max, reps, warmups, timeout_ms, cpu_seconds;
	uint64_t memory_bytes;
	unsigned max_samples, queue_per_uid, max_processes;
	bool allow_root_jobs;
	struct cgroup_tree *cgroup;                /* a cgroup per job (cgroup.h); NULL: none */
	char containment[640];                     /* what contains the jobs, in plain words */
	char group[CONFIG_NAME_MAX + 1];           /* profile_group; "": the socket's group */
	char socket_path[sizeof(((struct config *)0)->socket_path)];
	struct profile_turns turns;
	struct store_writer writer;                /* who makes the jobs' changes (store_write_via) */
	bool stopping;                             /* no job starts any more */
	uint64_t insitu_waiting;                   /* in-situ samples with the writer, not yet stored */
	/* Ends of jobs the store could not record (a full disk), told by ProfileStatus instead of
	 * the row's stale state until a restart fails them (store_runs_abandon); the latest. */
	struct {
		int64_t run;
		char message[512];
	} unrecorded[UNRECORDED_MAX];
	unsigned n_unrecorded;
	/* Jobs cancelled with their model, whose runs went with it: what ProfileStatus tells of
	 * them until a restart; the latest. */
	struct {
		int64_t run;
		uid_t uid;
		char model[MANIFEST_NAME_MAX + 1];
		char why[96];
	} gone[UNRECORDED_MAX];
	unsigned n_gone;
	/* Models removed or replaced (profiler_models_changed), the latest, by id: a Profile
	 * request whose model was read on a work thread meanwhile is checked against them. */
	struct {
		int64_t id;
		bool replaced;
	} models_gone[UNRECORDED_MAX];
	uint64_t models_gen; /* how many there were */
	char helper[PATH_MAX]; /* pimd-worker; "" when not found (jobs fail naming it) */
	struct job *jobs; /* queued and running, in arrival order */
	unsigned n_running, n_queued;
	struct watch timer;
};

/* The in-situ run of a connection; it is stored (opened) by its first batch. */
struct insitu {
	struct job *j;   /* not queued: holds the run, the model's facts and the store errors */
	uint64_t seq;    /* repetition numbers: unique per run */
	bool opened;     /* its run is stored */
	bool busy;       /* a batch of it is with the writer (its connection waits) */
	bool orphan;     /* its connection closed meanwhile: the batch's end ends the run */
	struct job_write end;
};

/* profile.c: the life of a job */
void profile_job_free(struct job *j);
void profile_job_unlink(struct job *j);
void profile_job_end(struct job *j);
void profile_job_ended(struct job *j, struct job_write *jw, int r, const struct pim_error *err);
void profile_job_try_finish(struct job *j);
void profile_job_stop(struct job *j);
void profile_job_cancel(struct job *j, const char *why, bool gone);
const char *profile_model_gone_since(const struct profiler *pf, uint64_t gen, int64_t model_id);
void profile_job_start(struct job *j);

/* profile_turns.c: which job starts next */
void profiler_kick(struct profiler *pf);

/* profile_model.c: reading a job's model */
void profile_plan_events(struct job *j, const struct platform *p);
uint64_t profile_read_bytes(Pim__Operand *const *ops, size_t n);
int profile_job_from_store(struct job *j, struct store *s, const char *what, const uint32_t *measure,
			   size_t n_measure, struct pim_error *err);

/* profile_pipe.c: reading a worker's pipe */
void profile_job_pause(struct job *j, bool pause);
void profile_on_worker_fd(struct watch *w, uint32_t events);
void profile_on_worker_exit(struct watch *w, uint32_t events);

/* profile_write.c: a job's changes with the writer thread */
void profile_job_store_error(struct job *j, const struct pim_error *err);
struct job_write *profile_batch_new(void);
void profile_job_write_free(struct job_write *jw);
int profile_job_write_run(struct store *s, void *data, struct pim_error *err);
void profile_job_write_part_done(void *data);
void profile_job_submit(struct job *j, struct job_write *jw);
bool profile_job_flush(struct job *j, const struct store_run_update *progress);
void profile_job_write_done(void *data, int r, const struct pim_error *err);

/* profile_derive.c: the metrics at a run's end */
const struct region_fact *profile_fact_of(const struct job *j, int32_t id);
int profile_job_end_run(struct store *s, struct job_write *jw, const char *failure, struct pim_error *err);

/* profile_rpc.c: the requests */
void profile_start_done(void *data, int r, const struct pim_error *err);

#endif
