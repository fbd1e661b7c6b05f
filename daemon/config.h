/* SPDX-License-Identifier: MIT */
/*
 * config.h: pimd.conf(5), a "key = value" file.  Lines are trimmed; empty lines and lines
 * starting with '#' are ignored; an unknown key, a repeated key or a bad value is an error that
 * names the file and line.  Sizes take an optional K, M or G suffix (powers of 1024).
 */
#ifndef PIMD_CONFIG_H
#define PIMD_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <sys/un.h>

#include "cgroup.h"
#include "placement.h"
#include "util.h"

#define CONFIG_DEFAULT_PATH "/etc/pimd/pimd.conf"
#define CONFIG_DEFAULT_SOCKET "/run/pimd/pimd.sock"
#define CONFIG_DEFAULT_STATE_DIR "/var/lib/pimd"
#define CONFIG_FILE_MAX (1024 * 1024)
#define CONFIG_NAME_MAX 64                /* a group name or number */
#define CONFIG_CATALOGUE_MAX 1024         /* the catalogue's connection string */
#define CONFIG_HOST_ID_MAX 64
#define CONFIG_PLATFORM_KEY_MAX 255

struct config {
	char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char state_dir[PATH_MAX];
	char pim_config[PATH_MAX];        /* HBM-PIM organisation and timing for JIT-Q; "" = defaults */
	int log_level;                    /* LOG_ERR .. LOG_DEBUG */
	uint32_t max_frame_bytes;         /* largest frame accepted or sent */
	uint32_t max_clients;             /* connections served at once */
	uint64_t max_pending_bytes;       /* per connection: unsent response bytes before reading pauses */
	uint32_t max_requests_in_flight;  /* per connection: unanswered requests before reading pauses */
	uint32_t max_clients_per_uid;     /* connections of one uid at once */
	uint32_t handshake_timeout_ms;    /* from accept to a complete Hello */
	uint32_t idle_timeout_s;          /* without a complete request or a sent byte; 0: never */
	uint64_t max_buffered_bytes;      /* all connections: request and response bytes held */
	uint32_t busy_timeout_ms;         /* SQLite busy timeout */
	struct placement_params placement; /* platform parameters of the placement rule (doc/design.md §3) */
	double jitq_speedup[3];           /* speedup_mx9/mx6/mx4: the accelerator's GEMM throughput per
					     MX format x its BF16 rate (JIT-Q plans); 0 = the default */
	uint32_t profile_concurrency;     /* profiling workers at once (1: measurements don't disturb) */
	uint32_t profile_queue_max;       /* jobs waiting at most */
	uint32_t profile_repetitions;     /* K, when a request gives none */
	uint32_t profile_warmups;
	uint32_t profile_timeout_ms;      /* wall clock per job */
	uint32_t profile_cpu_seconds;     /* RLIMIT_CPU of a worker */
	uint64_t profile_memory_bytes;    /* address space a worker's model may add (RLIMIT_AS) */
	uint32_t profile_max_samples;     /* samples one job may store; the worker is stopped there */
	uint32_t profile_queue_per_uid;   /* jobs one uid may have waiting */
	uint32_t profile_max_processes;   /* RLIMIT_NPROC of a worker; pids.max of a job's cgroup */
	enum cgroup_mode job_cgroups;     /* a cgroup per job: auto, yes, no (read at start) */
	bool allow_root_jobs;             /* run jobs for uid 0 */
	char profile_group[CONFIG_NAME_MAX + 1]; /* users jobs may run as; "": the socket's group */
	/* The fleet catalogue (catalogue.h): a libpq URI or "service=NAME"; "": none.  Never a
	 * password (config_parse refuses one): PGPASSFILE. */
	char catalogue[CONFIG_CATALOGUE_MAX];
	char catalogue_host_id[CONFIG_HOST_ID_MAX + 1];     /* "": /etc/machine-id */
	char catalogue_platform[CONFIG_PLATFORM_KEY_MAX + 1]; /* "": the detected platform key */
	uint32_t catalogue_timeout_ms;    /* connect and statement timeout */
};

void config_init(struct config *c);

/* Parses buf (origin names it in errors) on top of the values already in c.  On error c is
 * left unchanged. */
int config_parse(struct config *c, const char *buf, size_t len, const char *origin,
		 struct pim_error *err);

/* Reads and parses path: 0.  A missing file is not an error when missing_ok: 1 (the values in
 * c stand). */
int config_load(struct config *c, const char *path, bool missing_ok, struct pim_error *err);

#endif
