/* SPDX-License-Identifier: MIT */
/*
 * pim.h: libpimclient, the client library of pimd.  See libpimclient(3).
 *
 * Every function returns 0 (or a count) on success and a negative errno on failure; the
 * message of the last failure on a handle is pim_client_error().  The library never logs and
 * keeps no global state: each pim_client is independent, and calls on one handle may come from
 * several threads (they are serialized).
 *
 * This header is C99.
 */
#ifndef PIM_H
#define PIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PIM_PROTOCOL_VERSION 1
#define PIM_DEFAULT_SOCKET "/run/pimd/pimd.sock"
#define PIM_SOCKET_ENV "PIMD_SOCKET"

typedef struct pim_client pim_client;

/* Error codes of the daemon (pim.proto ErrorCode), as pim_client_remote_error() returns them. */
enum pim_remote_error {
	PIM_REMOTE_NONE = 0,             /* the failure was local or in the transport */
	PIM_REMOTE_INVALID_ARGUMENT = 1, /* returned as -EINVAL */
	PIM_REMOTE_NOT_FOUND = 2,        /* -ENOENT */
	PIM_REMOTE_ALREADY_EXISTS = 3,   /* -EEXIST */
	PIM_REMOTE_PROTOCOL = 4,         /* -EPROTO */
	PIM_REMOTE_UNSUPPORTED_VERSION = 5, /* -EPROTONOSUPPORT */
	PIM_REMOTE_INTERNAL = 6,         /* -EIO */
	PIM_REMOTE_BUSY = 7,             /* -EBUSY */
	PIM_REMOTE_PERMISSION_DENIED = 8, /* -EACCES */
	PIM_REMOTE_UNIMPLEMENTED = 9     /* -EOPNOTSUPP */
};

pim_client *pim_client_new(void);
void pim_client_free(pim_client *c);

/* Connects to path (NULL: $PIMD_SOCKET, else PIM_DEFAULT_SOCKET) and sends Hello with
 * client_name (NULL: "libpimclient").  -ENOENT/-ECONNREFUSED/-EACCES when nobody listens or
 * access is denied; the message names the path tried. */
int pim_client_connect(pim_client *c, const char *path, const char *client_name);

/* Receive timeout for later calls on the current connection, in milliseconds (0: wait forever,
 * the default); a new pim_client_connect() starts without one. */
int pim_client_set_timeout(pim_client *c, unsigned timeout_ms);

/* The message of the last failure on c ("" if none); valid until the next call on c. */
const char *pim_client_error(const pim_client *c);
/* Whether the last failure was an answer of the daemon (enum pim_remote_error) or local. */
int pim_client_remote_error(const pim_client *c);
/* The socket path of the last connect attempt. */
const char *pim_client_socket_path(const pim_client *c);
/* The daemon's version from its Hello reply. */
const char *pim_client_server_version(const pim_client *c);

struct pim_status {
	char server_version[32];
	unsigned protocol_version;
	uint64_t uptime_ms;
	unsigned models;
	unsigned clients;
	unsigned schema_version;
	uint64_t requests;
	unsigned max_frame_bytes;
	unsigned pid;              /* process id of pimd */
	char database[512];
	char platform[256];        /* CPU model and core PMU */
	char backend[16];          /* profiling backend: counters or timing */
	char backend_reason[512];  /* why, in plain words */
	double b_cpu;              /* host read bandwidth behind theta, B/s */
	char b_cpu_source[32];     /* measured, configured or default */
	unsigned profile_jobs;     /* queued and running */
	char containment[640];     /* what contains a profiling job, in plain words */
};

int pim_status(pim_client *c, struct pim_status *st);

struct pim_model_info {
	char name[129];
	char source[257];
	uint32_t regions;
	uint32_t allocations;
	uint32_t owner_uid;
	int64_t loaded_at;         /* seconds since the epoch */
	uint64_t allocation_bytes;
};

#define PIM_LOAD_REPLACE 1u

/* Loads a manifest given as a serialized pim.Manifest (protobuf).  *replaced (if not NULL)
 * tells whether a model of that name was replaced; info (if not NULL) receives the summary. */
int pim_model_load(pim_client *c, const void *manifest, size_t len, unsigned flags,
		   struct pim_model_info *info, int *replaced);

/* All models; *models is an array of *n entries to release with free(). */
int pim_model_list(pim_client *c, struct pim_model_info **models, size_t *n);

/* One model: its summary and (if manifest is not NULL) its manifest as a serialized
 * pim.Manifest, to release with free(). */
int pim_model_show(pim_client *c, const char *name, struct pim_model_info *info, void **manifest,
		   size_t *manifest_len);

int pim_model_remove(pim_client *c, const char *name);

/* Raw access for requests this header has no function for: sends a serialized pim.Request
 * (its id is overwritten) and returns the serialized pim.Response, to release with free().
 * An Error response is returned as data, not as a failure. */
int pim_call(pim_client *c, const void *request, size_t len, void **response, size_t *response_len);

/* ---------------------------------------------------------------- profiling
 *
 * pim_profile_start() sends the model library as a descriptor (SCM_RIGHTS) with the request;
 * pimd runs it in a worker under the caller's uid and gid and stores what it measures.  The
 * job runs on; poll it with pim_profile_status() until state is "done", "failed" or
 * "cancelled".
 */
struct pim_profile_options {
	unsigned repetitions;      /* 0: pimd's default */
	unsigned warmups;          /* 0: pimd's default */
	unsigned timeout_ms;       /* 0: pimd's default */
	const uint32_t *regions;   /* regions to measure; NULL: all */
	size_t n_regions;
};

struct pim_profile_job {
	uint64_t id;
	char state[16];            /* queued, running, done, failed, cancelled */
	char model[129];
	char backend[16];          /* counters, timing (pending until the worker starts) */
	char backend_reason[512];
	char message[512];         /* failure (the signal or limit named; "cancelled: " and why)
				    * or summary */
	unsigned regions_done, regions_total;
	uint64_t repetitions_done, repetitions_total;
	uint64_t samples;
	unsigned uid;              /* the worker's uid */
};

int pim_profile_start(pim_client *c, const char *model, int library_fd,
		      const struct pim_profile_options *opt, struct pim_profile_job *job);
int pim_profile_status(pim_client *c, uint64_t id, struct pim_profile_job *job);
/* Cancels a queued or running job of the caller's (root: anyone's); job is its state after,
 * "failed" with the message "cancelled: by uid N".  A job that has ended, or another user's,
 * is refused. */
int pim_profile_cancel(pim_client *c, uint64_t id, struct pim_profile_job *job);

/* ---------------------------------------------------------------- JIT-Q plans
 *
 * A training runtime fetches a plan once; at each block boundary pim_jitq_launches_at() says
 * which weight quantizations to start on PIM: an array lookup into the plan, no system call.
 */
typedef struct pim_jitq_plan pim_jitq_plan;

struct pim_jitq_request {
	const char *preset;        /* bert-340M ... future-1T, or NULL for a custom model */
	unsigned layers, hidden, heads, seq, batch, tslice; /* custom shape, or overrides (0: keep) */
	const char *format;        /* mx9, mx6, mx4 (NULL: mx6) */
	const char *source;        /* bf16, fp32 (NULL: bf16) */
	const char *mapping;       /* tiled, strided, strided-opt (NULL: strided-opt) */
	unsigned pim_stacks;       /* 0: pimd's pim_config, else 5 */
	const double *fwd_s, *bwd_s; /* measured seconds per block, or NULL */
	size_t n_times;
};

enum pim_jitq_phase { PIM_JITQ_FORWARD = 0, PIM_JITQ_BACKWARD = 1 };
#define PIM_JITQ_PROLOGUE (-1)     /* the boundary before a phase's first block */

struct pim_jitq_launch {
	uint32_t block;            /* the block whose weights this quantizes */
	int32_t boundary;          /* start it when block `boundary` starts (or PIM_JITQ_PROLOGUE) */
	char tensor[16];           /* qkv, attn-out, mlp-up, mlp-down */
	int column;                /* 0: row-blocked copy, 1: column-blocked */
	uint32_t rows, cols;       /* the local slice */
	uint64_t bytes;            /* packed MX output */
	double pim_s;              /* PIM time */
};

int pim_jitq_plan_fetch(pim_client *c, const struct pim_jitq_request *rq, pim_jitq_plan **out);
void pim_jitq_plan_free(pim_jitq_plan *p);
/* The launches to start at a boundary of a phase (*n of them; NULL when none). */
const struct pim_jitq_launch *pim_jitq_launches_at(const pim_jitq_plan *p, enum pim_jitq_phase phase,
						   int32_t boundary, size_t *n);
unsigned pim_jitq_lookahead(const pim_jitq_plan *p, enum pim_jitq_phase phase);
/* Blocks on the device planned: the model's layers over its pipeline stages, rounded up. */
unsigned pim_jitq_layers(const pim_jitq_plan *p);

/* ---------------------------------------------------------------- the decided path
 *
 * pim_model_open() fetches a model's placement once (the daemon's configured parameters,
 * loop granularity); afterwards pim_model_region_enter() answers PIM_ON_HOST or PIM_ON_PIM for
 * a region with an array lookup: no system call, no lock, no allocation.  An id the model does
 * not have answers PIM_ON_HOST and is counted.  A pim_model is independent of its client
 * handle once opened, and may be used from any number of threads.
 */
typedef struct pim_model pim_model;

enum pim_place { PIM_ON_HOST = 0, PIM_ON_PIM = 1 };

int pim_model_open(pim_client *c, const char *name, pim_model **out);
void pim_model_close(pim_model *m);
int pim_model_region_enter(pim_model *m, uint32_t region);
void pim_model_region_exit(pim_model *m, uint32_t region);
/* Regions placed on PIM, and region ids seen that the model does not have. */
unsigned pim_model_offloaded(const pim_model *m);
uint64_t pim_model_unknown_regions(const pim_model *m);

/* In-situ profiling: from now on 1 in every one_in executions of each region (entered through
 * pim_model_region_enter/exit or the hooks) is timed, and a background thread sends the
 * samples to pimd in batches over a connection of its own (socket_path as for
 * pim_client_connect), where they become a profile run of the model with timing-backend
 * metrics.  An unsampled boundary costs one increment and compare more than the decided path;
 * a sampled one two clock reads.  Nothing blocks the calling threads: samples that cannot be
 * sent are dropped and counted.  one_in = 0 stops sampling, sends what is left and has pimd
 * derive the metrics.  The model must be owned by the caller's user (as for profiling). */
int pim_model_sample(pim_model *m, const char *socket_path, unsigned one_in);
/* Samples sent to pimd and samples dropped so far. */
uint64_t pim_model_samples_sent(const pim_model *m);
uint64_t pim_model_samples_dropped(const pim_model *m);

/* Makes the model-library hooks of pim_hooks.h (pim_region_enter/exit, called by code that
 * pim-extract emitted) consult m in this process; NULL unbinds (everything on the host).  The
 * binding is the one process-wide state of the library, because emitted code passes no handle. */
void pim_model_bind_hooks(pim_model *m);

#ifdef __cplusplus
}
#endif

#endif
