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
 * tells whether a model of that name was replaced; info (if not NULL) receives the summary.
 * (pim_model_load_json, below, takes the JSON form.) */
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
 * (its id is overwritten) and returns the serialized pim.Response as pimd sent it (its id and
 * top-level fields checked, the rest for the caller to decode), to release with free().
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

/* ---------------------------------------------------------------- placement
 *
 * The typed calls below return results that the library allocates and one call frees; their
 * strings stay valid until then.  Request structs are the caller's: zero them (= {0}) before
 * setting fields, so that a field added later means "pimd's default".
 */
enum pim_evidence {
	PIM_EVIDENCE_NONE = 0,     /* no metrics: Stage 2 cannot hold */
	PIM_EVIDENCE_COUNTERS = 1, /* hardware counters on this host */
	PIM_EVIDENCE_ESTIMATE = 2, /* timing backend: T_host measured, BW_read estimated */
	PIM_EVIDENCE_IMPORTED = 3  /* perf stat counts measured elsewhere */
};

enum pim_cond_state {
	PIM_COND_FALSE = 0,
	PIM_COND_TRUE = 1,
	PIM_COND_NO_DATA = 2,      /* not evaluable: the metric is missing */
	PIM_COND_SKIPPED = 3       /* not evaluated: Stage 1 failed */
};

/* Platform parameters; 0 in a request means pimd's configured value.  In a result: the values
 * used (n_core 0 when the answer holds several core counts). */
struct pim_placement_params {
	double n_core, f_pim, i_min, t_ctx, b_cpu, theta, theta_ratio, sigma, b_rd, b_wb, b_pim_core,
		line_bytes, b_cpu_spread;
};

struct pim_placement_request {
	struct pim_placement_params params;
	const char *granularity;   /* loop (NULL), operator, block */
	const char *movement;      /* upper (NULL), resident */
	const double *core_counts; /* estimates at these PIM core counts (at most 16); NULL: n_core */
	size_t n_core_counts;
	int summary_only;          /* estimates without per-region decisions */
};

struct pim_condition {
	enum pim_cond_state state;
	double lhs, rhs;
	double noise;              /* in lhs's unit; 0: not known */
	int marginal;              /* |lhs - rhs| <= noise */
};

struct pim_region_decision {
	uint32_t region_id;
	const char *name, *op;
	uint32_t order;
	uint64_t n_par, n_total, trip;
	int pim;                   /* placed on PIM */
	struct pim_condition conditions[4]; /* C1..C4 */
	size_t n_conditions;       /* 4, or 0 when pimd sent none */
	enum pim_evidence evidence;
	int bw_estimated;
	double t_host;             /* seconds, one execution */
	const char *reason;
	double t_pim;              /* seconds, all executions, when on PIM */
	uint64_t fetch_bytes, flush_bytes;
	uint32_t unit_size;        /* regions deciding together */
	const char *t_pim_term;    /* compute, bandwidth, measured; "" on the host */
	int marginal;              /* the noise of a condition can change the side */
	uint32_t marginal_on;      /* bit c: condition C(c+1)'s noise can */
};

struct pim_movement {
	const char *model;         /* upper or resident; NULL when pimd sent no movement */
	uint64_t segments, transitions, fetch_bytes, flush_bytes;
	double t_switch, t_fetch, t_flush, t_move;
};

struct pim_placement_estimate {
	double n_core;
	struct pim_region_decision *regions; /* none with summary_only */
	size_t n_regions;
	uint32_t offloaded, rejected_stage1, rejected_stage2;
	struct pim_movement movement;
	double t_cpu, t_host, t_pim, t_hybrid, speedup, captured_share, residual_share;
	double bound, bound_movement;        /* 0 when unbounded */
	double t_pim_compute, t_pim_bandwidth, t_pim_measured;
	uint32_t pim_compute, pim_bandwidth, pim_measured;
	uint32_t marginal, marginal_pim;
	uint32_t marginal_by_condition[4];
	size_t n_marginal_by_condition;
};

/* Where B_cpu comes from (pimd(8), "B_cpu"); source NULL when pimd sent none. */
struct pim_bandwidth_probe {
	double b_cpu;
	const char *source;        /* measured, configured, requested or default */
	double measured, spread;
	const char *method;
	int64_t measured_at;
	int busy;
	const char *load, *host;
};

/* Metrics of the answer taken from the fleet catalogue; host NULL when none were. */
struct pim_catalogue_origin {
	const char *host;
	int64_t measured_at;
	const char *backend;
	uint32_t regions, hosts;
	const char *model_hash, *platform_key;
	int fetched;
};

struct pim_placement {
	const char *model, *granularity, *movement, *platform;
	struct pim_placement_params params;
	struct pim_placement_estimate *estimates; /* one per core count */
	size_t n_estimates;
	int cached;
	uint32_t regions_with_metrics;
	const char *const *notes;
	size_t n_notes;
	struct pim_bandwidth_probe b_cpu_probe;
	struct pim_catalogue_origin catalogue;
	void *internal_;           /* the library's */
};

/* The placement of a loaded model (rq NULL: pimd's configuration). */
int pim_placement_get(pim_client *c, const char *model, const struct pim_placement_request *rq,
		      struct pim_placement **out);
void pim_placement_free(struct pim_placement *p);

#define PIM_NO_REGION 2            /* a decision table entry: the model has no region of that id */

/* A model's decisions as a table: place[id] is PIM_ON_HOST, PIM_ON_PIM or PIM_NO_REGION for
 * every id below id_limit.  rq's params, granularity and movement apply (NULL: pimd's). */
struct pim_decisions {
	const char *model;
	uint32_t id_limit;
	uint32_t offloaded;
	enum pim_evidence evidence; /* weakest evidence behind an offload decision */
	const uint8_t *place;
};

int pim_decisions_get(pim_client *c, const char *model, const struct pim_placement_request *rq,
		      struct pim_decisions **out);
void pim_decisions_free(struct pim_decisions *d);

/* ---------------------------------------------------------------- calibration */

struct pim_calibrate_request {
	const char *labels_csv;    /* region,beneficial lines (pimctl(1), calibrate) */
	struct pim_placement_params params;
	double theta_lo, theta_hi, theta_step; /* B/s; 0: 0.5e9, 4.0e9, 0.01e9 */
	const double *sigmas;      /* NULL: pimd's */
	size_t n_sigmas;
};

struct pim_calibrate_point {
	double theta, sigma;
	uint32_t selected, tp, fp, tn, fn;
	double accuracy;
};

struct pim_calibration {
	uint32_t labelled, beneficial;
	struct pim_calibrate_point *points;
	size_t n_points;
	/* per sigma: the midpoint theta of the best interval [lo, hi] */
	struct pim_calibrate_point *suggestions;
	double *suggestion_lo, *suggestion_hi;
	size_t n_suggestions;
	uint32_t best;             /* index into suggestions */
};

int pim_calibrate(pim_client *c, const char *model, const struct pim_calibrate_request *rq,
		  struct pim_calibration **out);
void pim_calibration_free(struct pim_calibration *cal);

/* ---------------------------------------------------------------- metrics, B_cpu, catalogue */

/* pim_status's answer with its strings whole, and where B_cpu comes from (b_cpu_probe.source
 * NULL: not sent). */
struct pim_daemon_status {
	const char *server_version;
	unsigned protocol_version;
	uint64_t uptime_ms;
	unsigned models, clients, schema_version;
	uint64_t requests;
	unsigned max_frame_bytes, pid;
	const char *database, *platform, *backend, *backend_reason;
	double b_cpu;
	const char *b_cpu_source;
	unsigned profile_jobs;
	const char *containment;
	struct pim_bandwidth_probe b_cpu_probe;
	void *internal_;
};

int pim_status_get(pim_client *c, struct pim_daemon_status **out);
void pim_daemon_status_free(struct pim_daemon_status *d);

/* A region's metrics on the daemon's platform (pimd(8), "Metrics"). */
struct pim_region_metrics {
	uint32_t region_id;
	enum pim_evidence evidence;
	double t_host;             /* seconds, one execution (median) */
	double t_host_spread;      /* (max - min) / median; 0 if unknown */
	int have_n_rd;
	double n_rd;
	int have_store;            /* c_store and the three backend counts */
	double c_store, c_be1, c_be2, c_be3;
	double bw_read_estimate;   /* B/s, timing backend; 0: none */
	const char *source;
	int64_t updated_at;
	double source_b_cpu;       /* imported: the measuring host's B_cpu; 0 unknown */
	const char *origin_host;   /* "" unless from the fleet catalogue */
	int64_t origin_measured_at;
	const char *origin_backend;
};

/* Counts measured elsewhere (perf stat -x, output) for one region of a model. */
struct pim_import_request {
	uint32_t region_id;
	const char *csv;
	double t_host;             /* seconds per execution; 0: from duration_time or task-clock */
	uint64_t executions;       /* executions the counts cover; 0 means 1 */
	double b_cpu;              /* B/s of the measuring host; 0: unknown */
};

struct pim_import {
	struct pim_region_metrics metrics; /* as stored */
	const char *const *notes;
	size_t n_notes;
	void *internal_;
};

int pim_import_perf(pim_client *c, const char *model, const struct pim_import_request *rq,
		    struct pim_import **out);
void pim_import_free(struct pim_import *imp);

/* ---------------------------------------------------------------- models, typed
 *
 * A manifest loaded from its JSON form (pimd(8), MANIFEST: what pimctl model load reads), and a
 * model shown, in plain structs.  The manifest is parsed and validated here, as pimd would:
 * one that is not valid fails with -EINVAL and a message naming the line or the field, and is
 * not sent.
 */
enum pim_alloc_kind {
	PIM_ALLOC_UNSPECIFIED = 0,
	PIM_ALLOC_ARGUMENT = 1,    /* a function argument: an input, output or weight passed in */
	PIM_ALLOC_ALLOC = 2,       /* an intermediate buffer */
	PIM_ALLOC_GLOBAL = 3       /* a constant (weights) */
};

enum pim_operand_role {
	PIM_ROLE_UNSPECIFIED = 0,
	PIM_ROLE_IN = 1,
	PIM_ROLE_OUT = 2,
	PIM_ROLE_INOUT = 3
};

struct pim_model_loaded {
	struct pim_model_info info; /* the model as stored */
	int replaced;              /* a model of that name was replaced (PIM_LOAD_REPLACE) */
};

/* Loads a manifest in JSON form, len bytes (at most 256 MiB: -EFBIG); flags: PIM_LOAD_REPLACE. */
int pim_model_load_json(pim_client *c, const char *json, size_t len, unsigned flags,
			struct pim_model_loaded **out);
/* As pim_model_load_json for the file at path, in JSON form or a serialized pim.Manifest (a
 * first non-blank byte '{' selects JSON); messages name the file. */
int pim_model_load_file(pim_client *c, const char *path, unsigned flags, struct pim_model_loaded **out);
void pim_model_loaded_free(struct pim_model_loaded *l);

struct pim_model_allocation {
	uint32_t id;
	uint64_t bytes;
	enum pim_alloc_kind kind;
	const char *name;          /* "" when the manifest gave none */
};

struct pim_model_operand {
	uint32_t allocation_id;
	uint64_t bytes;            /* of the operand's view */
	const char *elem_type;     /* "" when not given */
	uint32_t elem_bits;        /* 0 when not given */
	enum pim_operand_role role;
};

struct pim_model_region {
	uint32_t id, order;
	const char *name, *op, *location; /* location "" when not given */
	uint64_t n_par, n_total, trip;
	const uint64_t *parallel_extents, *reduction_extents;
	size_t n_parallel_extents, n_reduction_extents;
	const struct pim_model_operand *operands;
	size_t n_operands;
	const struct pim_region_metrics *metrics; /* on pimd's platform; NULL: none stored */
};

struct pim_model_detail {
	struct pim_model_info info;
	struct pim_model_allocation *allocations; /* by id */
	size_t n_allocations;
	struct pim_model_region *regions;          /* in program order */
	size_t n_regions;
	struct pim_region_metrics *metrics;        /* of the regions that have them, by region id */
	size_t n_metrics;
	void *internal_;
};

/* A loaded model: its summary, manifest and the metrics stored on pimd's platform. */
int pim_model_show_get(pim_client *c, const char *name, struct pim_model_detail **out);
void pim_model_detail_free(struct pim_model_detail *d);
/* The model's manifest in the JSON form pim_model_load_json and pimctl model load read, on
 * one line (free() it); NULL with errno EINVAL for a detail not from pim_model_show_get, or
 * ENOMEM. */
char *pim_model_detail_manifest_json(const struct pim_model_detail *d);

/* B_cpu measured again now (root or pimd's own user): the probe before and the new one. */
struct pim_probe_result {
	struct pim_bandwidth_probe previous, probe; /* source NULL when absent */
	void *internal_;
};

int pim_platform_probe(pim_client *c, struct pim_probe_result **out);
void pim_probe_result_free(struct pim_probe_result *p);

/* The fleet catalogue as the daemon sees it; the rest is empty unless configured. */
struct pim_catalogue_status {
	int configured, reachable;
	const char *target, *host_id, *platform_key;
	uint64_t outbox_depth, outbox_failed;
	int64_t last_publish_at;
	uint64_t published, conflicts;
	const char *last_error;
	int64_t last_error_at;
	uint32_t retry_in_ms, schema_version;
	uint64_t lookups, lookup_hits;
	void *internal_;
};

struct pim_catalogue_entry {
	const char *model_hash, *model_name, *platform_key;
	uint32_t hosts, runs, imports;
	int64_t last_measured_at;
	uint32_t regions;
};

struct pim_catalogue_list {
	struct pim_catalogue_entry *entries;
	size_t n_entries;
	int truncated;
	const char *platform_key;  /* this host's */
	void *internal_;
};

int pim_catalogue_status_get(pim_client *c, struct pim_catalogue_status **out);
void pim_catalogue_status_free(struct pim_catalogue_status *st);
/* At most limit rows (0: the daemon's 1000). */
int pim_catalogue_list_get(pim_client *c, unsigned limit, struct pim_catalogue_list **out);
void pim_catalogue_list_free(struct pim_catalogue_list *l);

/* A profiling job's clock, beside its struct pim_profile_job (pim_profile_poll). */
struct pim_profile_clock {
	uint32_t timeout_ms;       /* its wall-clock limit while queued or running; 0 after */
	uint64_t running_ms;       /* how long its worker has run so far */
	int64_t created_at, finished_at;
};

/* As pim_profile_status, and the job's clock. */
int pim_profile_poll(pim_client *c, uint64_t id, struct pim_profile_job *job, struct pim_profile_clock *clock);

/* ---------------------------------------------------------------- JIT-Q plans, whole
 *
 * What pimctl jitq plan shows: the schedule of both phases, per block with per_block, the
 * memory it saves and the daemon's text.  (pim_jitq_plan_fetch above indexes a plan for a
 * training runtime instead.)
 */
struct pim_jitq_plan_request {
	const char *preset;        /* bert-340M ... future-1T, or NULL for a custom model */
	unsigned layers, hidden, heads, seq, batch, tslice, vocab, pipeline; /* 0: the preset's */
	const char *format;        /* mx9, mx6 (NULL), mx4 */
	const char *source;        /* bf16 (NULL), fp32 */
	const char *mapping;       /* tiled, strided, strided-opt (NULL) */
	double peak_flops, efficiency; /* the accelerator; 0: the daemon's */
	const double *fwd_s, *bwd_s; /* measured seconds per block (both or neither) */
	size_t n_times;
	unsigned max_lookahead;    /* 0: the daemon's */
	int per_block;             /* each block's row and every launch */
	unsigned pim_stacks;       /* 0: 5 */
	const char *const *settings; /* "key=value" (pimctl(1), --set), at most 64 */
	size_t n_settings;
	const char *config;        /* NULL or "default"; "paper" */
	double speedup_mx9, speedup_mx6, speedup_mx4; /* 0: the daemon's */
};

struct pim_jitq_plan_launch {
	uint32_t block;
	int32_t boundary;          /* PIM_JITQ_PROLOGUE: before the phase's first block */
	const char *phase, *tensor, *direction;
	uint32_t rows, cols;
	uint64_t bytes;
	double pim_s;
	uint32_t chan_first, chan_count;
};

struct pim_jitq_plan_block {
	double accel_s, pim_s, slack, stall_s;
	double launch_s, ready_s, start_s; /* from the phase's start */
};

struct pim_jitq_plan_phase {
	const char *phase;
	uint32_t lookahead;
	double accel_s, pim_s, stall_s;
	int pim_bound;
	double overlap_s, slack_min, slack_median;
	uint64_t resident_bytes;
	struct pim_jitq_plan_launch *launches;
	size_t n_launches;
	struct pim_jitq_plan_block *blocks; /* with per_block */
	size_t n_blocks;
};

struct pim_jitq_capacity {
	uint64_t params, params_quant, master, grads, optim, acts, lp_both, lp_one, lp_jitq,
		total_both, total_one, total_jitq;
	int64_t saved_vs_both, saved_vs_one;
	double pct_vs_both, pct_vs_one;
};

struct pim_jitq_plan_reply {
	const char *model, *format, *source, *mapping, *kernel;
	uint32_t layers, model_layers, pipeline, pim_stacks;
	double pim_tck_ns;
	struct pim_jitq_plan_phase *phases;
	size_t n_phases;
	int has_capacity;
	struct pim_jitq_capacity capacity;
	double loss, loss_stall, loss_interference;
	const char *text;          /* the plan as the daemon renders it for people */
	const char *const *assumptions;
	size_t n_assumptions;
	void *internal_;
};

int pim_jitq_plan_get(pim_client *c, const struct pim_jitq_plan_request *rq, struct pim_jitq_plan_reply **out);
void pim_jitq_plan_reply_free(struct pim_jitq_plan_reply *p);

/* ---------------------------------------------------------------- MX quantization
 *
 * A tensor larger than one frame (max_frame_bytes) is sent in parts that fit: whole rows of a
 * row-blocked tensor, whole columns of a column-blocked one (the packed layout of pimd(8),
 * "Quantization", keeps either contiguous), and the answers joined; `requests` says how many.
 * A PIM engine (tiled, strided, strided-opt) is not split: pimd bounds its tensors itself.
 */
struct pim_jitq_tensor_request {
	const char *format;        /* mx9, mx6 (NULL), mx4, or an OCP format (mxfp8-e4m3, ...) */
	const char *source;        /* quantize: bf16 (NULL), fp32 */
	const char *direction;     /* row (NULL) or col */
	const char *engine;        /* quantize: reference (NULL) or a PIM mapping */
	const char *kernel;        /* quantize with a PIM mapping: exact, paper (NULL: pimd's) */
	uint32_t rows, cols;
	const void *data;          /* quantize: rows x cols raw; dequantize: the packed tensor */
	size_t len;
};

struct pim_jitq_tensor {
	void *data;                /* quantize: packed MX; dequantize: rows x cols FP32 */
	size_t len;
	uint64_t blocks;
	uint64_t nan_blocks;       /* dequantize: blocks whose scale marks them NaN */
	char engine[32];           /* quantize */
	double pim_time_ns;        /* quantize with a PIM mapping */
	uint64_t pim_commands;
	unsigned requests;         /* frames the tensor went in */
};

int pim_jitq_quantize(pim_client *c, const struct pim_jitq_tensor_request *rq,
		      struct pim_jitq_tensor **out);
int pim_jitq_dequantize(pim_client *c, const struct pim_jitq_tensor_request *rq,
			struct pim_jitq_tensor **out);
void pim_jitq_tensor_free(struct pim_jitq_tensor *t);

#ifdef __cplusplus
}
#endif

#endif
