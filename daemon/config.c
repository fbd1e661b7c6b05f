/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>

#include <assert.h>
#include <math.h>

#include "frame.h"
#include "log.h"

void config_init(struct config *c)
{
	memset(c, 0, sizeof *c);
	snprintf(c->socket_path, sizeof c->socket_path, "%s", CONFIG_DEFAULT_SOCKET);
	snprintf(c->state_dir, sizeof c->state_dir, "%s", CONFIG_DEFAULT_STATE_DIR);
	c->log_level = LOG_INFO;
	c->max_frame_bytes = FRAME_MAX_DEFAULT;
	c->max_clients = 256;
	c->max_pending_bytes = 64ull * 1024 * 1024;
	c->max_requests_in_flight = 64;
	c->max_clients_per_uid = 64;
	c->handshake_timeout_ms = 5000;
	c->idle_timeout_s = 600;
	c->max_buffered_bytes = 128ull * 1024 * 1024;
	c->busy_timeout_ms = 5000;
	c->placement = placement_params_default();
	c->placement.b_cpu = 0; /* 0: the bandwidth measured on this platform (pimd's probe) */
	c->profile_concurrency = 1;
	c->profile_queue_max = 32;
	c->profile_repetitions = 10;
	c->profile_warmups = 1;
	c->profile_timeout_ms = 120000;
	c->profile_cpu_seconds = 60;
	c->profile_memory_bytes = 4ull << 30;
	c->profile_max_samples = 10000000;
	c->profile_queue_per_uid = 8;
	c->profile_max_processes = 256;
	c->job_cgroups = CGROUP_MODE_AUTO;
	c->allow_root_jobs = false;
	c->profile_group[0] = 0;
	c->catalogue_timeout_ms = 5000;
}

static int parse_size(const char *v, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	uint64_t n, mult = 1;

	if (!isdigit((unsigned char)*v))
		return -EINVAL;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno)
		return -EINVAL;
	if (*end == 'K' || *end == 'k')
		mult = 1024, end++;
	else if (*end == 'M')
		mult = 1024 * 1024, end++;
	else if (*end == 'G')
		mult = 1024 * 1024 * 1024, end++;
	if (*end)
		return -EINVAL;
	if (!mul_u64(n, mult, &n) || n < min || n > max)
		return -ERANGE;
	*out = n;
	return 0;
}

enum key_type { KEY_PATH_SOCKET, KEY_PATH_DIR, KEY_PATH_FILE, KEY_LOG_LEVEL, KEY_U32, KEY_U64, KEY_DOUBLE,
		KEY_BOOL, KEY_GROUP, KEY_CGROUP_MODE, KEY_CATALOGUE, KEY_HOST_ID, KEY_PLATFORM_KEY };

struct key {
	const char *name;
	enum key_type type;
	size_t offset;
	uint64_t min, max;
};

#define U32(field, lo, hi) KEY_U32, offsetof(struct config, field), lo, hi
#define U64(field, lo, hi) KEY_U64, offsetof(struct config, field), lo, hi
#define DBL(field) KEY_DOUBLE, offsetof(struct config, placement.field), 0, 0

static const struct key keys[] = {
	{ "socket", KEY_PATH_SOCKET, offsetof(struct config, socket_path), 0, 0 },
	{ "state_dir", KEY_PATH_DIR, offsetof(struct config, state_dir), 0, 0 },
	{ "pim_config", KEY_PATH_FILE, offsetof(struct config, pim_config), 0, 0 },
	{ "log_level", KEY_LOG_LEVEL, offsetof(struct config, log_level), 0, 0 },
	{ "max_frame_bytes", U32(max_frame_bytes, FRAME_MAX_MIN, FRAME_MAX_LIMIT) },
	{ "max_clients", U32(max_clients, 1, 65536) },
	{ "max_pending_bytes", U64(max_pending_bytes, 64 * 1024, 16ull << 30) },
	{ "max_requests_in_flight", U32(max_requests_in_flight, 1, 65536) },
	{ "max_clients_per_uid", U32(max_clients_per_uid, 1, 65536) },
	{ "handshake_timeout_ms", U32(handshake_timeout_ms, 100, 600000) },
	{ "idle_timeout_s", U32(idle_timeout_s, 0, 604800) },
	{ "max_buffered_bytes", U64(max_buffered_bytes, 1024 * 1024, 64ull << 30) },
	{ "busy_timeout_ms", U32(busy_timeout_ms, 0, 600000) },
	{ "profile_concurrency", U32(profile_concurrency, 1, 64) },
	{ "profile_queue_max", U32(profile_queue_max, 1, 4096) },
	{ "profile_repetitions", U32(profile_repetitions, 1, 100000) },
	{ "profile_warmups", U32(profile_warmups, 0, 1000) },
	{ "profile_timeout_ms", U32(profile_timeout_ms, 100, 86400000) },
	{ "profile_cpu_seconds", U32(profile_cpu_seconds, 1, 86400) },
	{ "profile_memory_bytes", U64(profile_memory_bytes, 16 << 20, 1ull << 44) },
	{ "profile_max_samples", U32(profile_max_samples, 1, 1000000000) },
	{ "profile_queue_per_uid", U32(profile_queue_per_uid, 1, 4096) },
	{ "profile_max_processes", U32(profile_max_processes, 8, 1u << 22) },
	{ "job_cgroups", KEY_CGROUP_MODE, offsetof(struct config, job_cgroups), 0, 0 },
	{ "allow_root_jobs", KEY_BOOL, offsetof(struct config, allow_root_jobs), 0, 0 },
	{ "profile_group", KEY_GROUP, offsetof(struct config, profile_group), 0, 0 },
	/* the fleet catalogue */
	{ "catalogue", KEY_CATALOGUE, offsetof(struct config, catalogue), 0, 0 },
	{ "catalogue_host_id", KEY_HOST_ID, offsetof(struct config, catalogue_host_id), 0, 0 },
	{ "catalogue_platform", KEY_PLATFORM_KEY, offsetof(struct config, catalogue_platform), 0, 0 },
	{ "catalogue_timeout_ms", U32(catalogue_timeout_ms, 1000, 600000) },
	/* placement parameters: the same names as in pimctl placement --param and PlacementParams */
	{ "n_core", DBL(n_core) },
	{ "f_pim", DBL(f_pim) },
	{ "i_min", DBL(i_min) },
	{ "t_ctx", DBL(t_ctx) },
	{ "b_cpu", DBL(b_cpu) },
	{ "theta", DBL(theta) },
	{ "theta_ratio", DBL(theta_ratio) },
	{ "sigma", DBL(sigma) },
	{ "b_rd", DBL(b_rd) },
	{ "b_wb", DBL(b_wb) },
	{ "b_pim_core", DBL(b_pim_core) },
	{ "line_bytes", DBL(line_bytes) },
	/* JIT-Q plans: the same names as in pimctl jitq plan --set and JitqPlan */
	{ "speedup_mx9", KEY_DOUBLE, offsetof(struct config, jitq_speedup[0]), 0, 64 },
	{ "speedup_mx6", KEY_DOUBLE, offsetof(struct config, jitq_speedup[1]), 0, 64 },
	{ "speedup_mx4", KEY_DOUBLE, offsetof(struct config, jitq_speedup[2]), 0, 64 },
};

/*
 * A libpq connection string as the catalogue key takes it: a postgresql:// (or postgres://) URI,
 * or keyword=value pairs (service=NAME).  A password in it is refused: pimd.conf is readable by
 * more than pimd, and libpq reads the password from PGPASSFILE (pimd(8), Fleet catalogue).
 */
static int check_catalogue(const char *v, const char *where, struct pim_error *err)
{
	bool uri = strncmp(v, "postgresql://", 13) == 0 || strncmp(v, "postgres://", 11) == 0;

	for (const char *p = v; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return err_set(err, -EINVAL, "%s: catalogue contains a control character", where);
	if (uri) {
		const char *auth = strstr(v, "://") + 3;
		size_t n = strcspn(auth, "/?");
		const char *at = memchr(auth, '@', n);
		if ((at && memchr(auth, ':', (size_t)(at - auth))) || strstr(v, "password="))
			return err_set(err, -EINVAL, "%s: catalogue must not carry a password: put it in a "
				       "credentials file (PGPASSFILE, pimd(8))", where);
		return 0;
	}
	if (!strchr(v, '='))
		return err_set(err, -EINVAL, "%s: catalogue \"%s\" is neither a postgresql:// URI nor "
			       "keyword=value pairs (service=NAME)", where, v);
	if (strstr(v, "password"))
		return err_set(err, -EINVAL, "%s: catalogue must not carry a password: put it in a "
			       "credentials file (PGPASSFILE, pimd(8))", where);
	return 0;
}

/* A host id or platform key: printable ASCII without spaces or quotes, 1..max bytes. */
static int check_token(const char *v, size_t max, const char *name, const char *where,
		       struct pim_error *err)
{
	size_t len = strlen(v);
	bool ok = len > 0 && len <= max;

	for (size_t i = 0; ok && i < len; i++)
		ok = v[i] > 0x20 && v[i] < 0x7f && v[i] != '"' && v[i] != '\'' && v[i] != '\\';
	if (!ok)
		return err_set(err, -EINVAL, "%s: %s must be 1..%zu printable characters without spaces "
			       "or quotes", where, name, max);
	return 0;
}

static int set_key(struct config *c, const struct key *k, const char *v, const char *where,
		   struct pim_error *err)
{
	char *field = (char *)c + k->offset;
	uint64_t n;
	int r;

	switch (k->type) {
	case KEY_PATH_SOCKET:
	case KEY_PATH_DIR:
	case KEY_PATH_FILE: {
		size_t cap = k->type == KEY_PATH_SOCKET ? sizeof c->socket_path : sizeof c->state_dir;
		static_assert(sizeof c->state_dir == sizeof c->pim_config, "path fields share a size");
		if (v[0] != '/')
			return err_set(err, -EINVAL, "%s: %s must be an absolute path", where, k->name);
		if (strlen(v) >= cap)
			return err_set(err, -ENAMETOOLONG, "%s: %s is longer than %zu bytes", where,
				       k->name, cap - 1);
		memcpy(field, v, strlen(v) + 1);
		return 0;
	}
	case KEY_LOG_LEVEL:
		r = log_level_from_name(v);
		if (r < 0)
			return err_set(err, -EINVAL, "%s: log_level \"%s\" is not one of err, warning, "
				       "notice, info, debug", where, v);
		*(int *)field = r;
		return 0;
	case KEY_BOOL:
		if (strcmp(v, "yes") == 0 || strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
			*(bool *)field = true;
		else if (strcmp(v, "no") == 0 || strcmp(v, "false") == 0 || strcmp(v, "0") == 0)
			*(bool *)field = false;
		else
			return err_set(err, -EINVAL, "%s: %s \"%s\" must be yes or no", where, k->name, v);
		return 0;
	case KEY_CGROUP_MODE:
		if (strcmp(v, "auto") == 0)
			*(enum cgroup_mode *)field = CGROUP_MODE_AUTO;
		else if (strcmp(v, "yes") == 0)
			*(enum cgroup_mode *)field = CGROUP_MODE_YES;
		else if (strcmp(v, "no") == 0)
			*(enum cgroup_mode *)field = CGROUP_MODE_NO;
		else
			return err_set(err, -EINVAL, "%s: %s \"%s\" must be auto, yes or no", where,
				       k->name, v);
		return 0;
	case KEY_CATALOGUE:
		if (strlen(v) >= CONFIG_CATALOGUE_MAX)
			return err_set(err, -ENAMETOOLONG, "%s: catalogue is longer than %d bytes", where,
				       CONFIG_CATALOGUE_MAX - 1);
		if ((r = check_catalogue(v, where, err)) < 0)
			return r;
		memcpy(field, v, strlen(v) + 1);
		return 0;
	case KEY_HOST_ID:
	case KEY_PLATFORM_KEY: {
		size_t max = k->type == KEY_HOST_ID ? CONFIG_HOST_ID_MAX : CONFIG_PLATFORM_KEY_MAX;
		if ((r = check_token(v, max, k->name, where, err)) < 0)
			return r;
		memcpy(field, v, strlen(v) + 1);
		return 0;
	}
	case KEY_GROUP: {
		/* a name as useradd(8) takes it, or a number; resolved when a job needs it */
		size_t len = strlen(v);
		bool ok = len > 0 && len <= CONFIG_NAME_MAX && v[0] != '-';
		for (size_t i = 0; ok && i < len; i++)
			ok = isalnum((unsigned char)v[i]) || v[i] == '_' || v[i] == '-' || v[i] == '.';
		if (!ok)
			return err_set(err, -EINVAL, "%s: %s \"%s\" is not a group name or number (letters, "
				       "digits, '_', '-', '.'; at most %d)", where, k->name, v, CONFIG_NAME_MAX);
		memcpy(field, v, len + 1);
		return 0;
	}
	case KEY_DOUBLE: {
		char *end;
		errno = 0;
		double d = strtod(v, &end);
		if (errno || end == v || *end || !isfinite(d) || d < 0)
			return err_set(err, -EINVAL, "%s: %s \"%s\" must be a finite number >= 0 (e.g. 2.0e9)",
				       where, k->name, v);
		if (k->max && d > (double)k->max)
			return err_set(err, -EINVAL, "%s: %s \"%s\" must be at most %" PRIu64, where,
				       k->name, v, k->max);
		*(double *)field = d;
		return 0;
	}
	case KEY_U32:
	case KEY_U64:
		r = parse_size(v, k->min, k->max, &n);
		if (r < 0)
			return err_set(err, -EINVAL, "%s: %s \"%s\" must be an integer (optional K, M, G "
				       "suffix) between %" PRIu64 " and %" PRIu64, where, k->name, v,
				       k->min, k->max);
		if (k->type == KEY_U32)
			*(uint32_t *)field = (uint32_t)n;
		else
			*(uint64_t *)field = n;
		return 0;
	}
	return -EINVAL;
}

static int config_set(void *ctx, size_t key, const char *value, const char *where,
		      struct pim_error *err)
{
	return set_key(ctx, &keys[key], value, where, err);
}

int config_parse(struct config *c, const char *buf, size_t len, const char *origin,
		 struct pim_error *err)
{
	struct config tmp = *c;
	int r;

	r = kv_parse(buf, len, origin, 0, KV_LINE_MAX, keys, ELEMENTSOF(keys), sizeof keys[0],
		     config_set, &tmp, err);
	if (r < 0)
		return r;
	/* Each value may be fine alone and the set still not (theta 0 needs theta_ratio).
	 * b_cpu 0 stands for the measured bandwidth, which is positive. */
	struct placement_params check = tmp.placement;
	if (check.b_cpu == 0)
		check.b_cpu = 1;
	if (placement_params_validate(&check, err) < 0)
		return err_prefix(err, "%s", origin);
	/* One frame of the largest size must fit in the buffers of all connections together. */
	if (tmp.max_buffered_bytes < tmp.max_frame_bytes)
		return err_set(err, -EINVAL, "%s: max_buffered_bytes (%" PRIu64 ") is smaller than "
			       "max_frame_bytes (%u)", origin, tmp.max_buffered_bytes, tmp.max_frame_bytes);
	*c = tmp;
	return 0;
}

int config_load(struct config *c, const char *path, bool missing_ok, struct pim_error *err)
{
	_cleanup_(freep) char *buf = NULL;
	size_t len;
	int r = read_file(path, CONFIG_FILE_MAX, &buf, &len, err);

	if (r == -ENOENT && missing_ok)
		return 1;
	if (r < 0)
		return r;
	return config_parse(c, buf, len, path, err);
}
