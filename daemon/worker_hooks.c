/* SPDX-License-Identifier: MIT */
/*
 * worker_hooks.c: pim_region_enter/exit in profiling mode (doc/design.md §4.2) and the per-region
 * accumulators they fill.
 *
 * The hot path does no allocation and no system call except the counter group read: a bounds
 * check, two array lookups (id -> slot -> accumulator), a push on a fixed stack, one vDSO
 * clock_gettime and, with a group armed, one read() of the leader. Everything is allocated by
 * worker_hooks_setup() before the model runs.
 *
 * Timing brackets the counter reads from inside (enter: read then clock; exit: clock then read),
 * so T_host excludes them. A nested region's hooks run inside its parent's window and are part
 * of the parent's time and counts.
 *
 * Contract violations (re-entry of an open region, unknown region, exit without enter, exits
 * out of nesting order, a region still open when the model returns, calls from another thread)
 * are never miscounted silently: the first one is kept with a message and reported by
 * worker_hooks_end() as an ERROR record; the offending call is otherwise ignored.
 */
#include "worker.h"

#include <string.h>
#include <time.h>

#include "pim_hooks.h"

#define READ_WORDS (3 + COUNTERS_MAX_GROUP) /* PERF_FORMAT_GROUP: nr, enabled, running, v[] */

struct frame {
	int32_t slot;
	int32_t acc;
	uint64_t t0;
	uint64_t c0[READ_WORDS];
};

/* Accumulator layout, ACC_WORDS + n_values words per measured region. */
enum { A_EXEC, A_TIME, A_ENABLED, A_RUNNING, ACC_WORDS };

static struct {
	bool ready;
	uint32_t max_id;
	int32_t *slot_of;   /* region id -> manifest slot, -1: not in the manifest */
	int32_t *acc_of;    /* slot -> accumulator index, -1: not measured */
	int32_t *id_of;     /* slot -> region id */
	uint8_t *open;      /* slot -> currently entered */
	size_t n_slots;
	size_t n_acc;
	unsigned max_values;
	uint64_t *acc;      /* n_acc * stride words */
	size_t stride;

	int group_fd;       /* armed leader, -1: timing only */
	unsigned n_values;
	size_t read_bytes;

	unsigned depth;
	struct frame stack[WORKER_DEPTH_MAX];

	bool faulted;
	uint64_t faults;
	struct worker_error fault;
	uint64_t foreign;   /* calls from threads other than the runner (atomic) */
} H = { .group_fd = -1 };

/* Set on the thread running pim_model_entry between begin and end. Initial-exec TLS (this
 * object is built -fPIC but linked into executables): one %fs-relative load, no
 * __tls_get_addr call. */
static __thread bool runner __attribute__((tls_model("initial-exec")));

static inline uint64_t clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void fault(int code, int32_t region, const char *fmt, ...) _printf_(3, 4);
static void fault(int code, int32_t region, const char *fmt, ...)
{
	H.faults++;
	if (H.faulted)
		return;
	H.faulted = true;
	H.fault.code = code;
	H.fault.region = region;
	va_list ap;
	va_start(ap, fmt);
	/* vsnprintf with %d/%s/%u does not allocate */
	vsnprintf(H.fault.message, sizeof H.fault.message, fmt, ap);
	va_end(ap);
}

static inline int32_t slot_lookup(int32_t region)
{
	uint32_t id = (uint32_t)region; /* negative ids become huge and fail the bound */
	return id <= H.max_id ? H.slot_of[id] : -1;
}

static inline bool read_group(uint64_t *buf)
{
	return read(H.group_fd, buf, H.read_bytes) == (ssize_t)H.read_bytes;
}

static void foreign_call(void)
{
	if (H.ready)
		__atomic_fetch_add(&H.foreign, 1, __ATOMIC_RELAXED);
}

void worker_region_enter(int32_t region)
{
	if (__builtin_expect(!runner, 0)) {
		foreign_call();
		return;
	}
	int32_t slot = slot_lookup(region);
	if (__builtin_expect(slot < 0, 0)) {
		fault(-EPROTO, region, "pim_region_enter(%d): region %d is not in the manifest",
		      region, region);
		return;
	}
	if (__builtin_expect(H.open[slot], 0)) {
		fault(-EPROTO, region, "pim_region_enter(%d): re-entry of region %d, which is "
				       "already open (enter without exit, or recursion); its "
				       "measurement would be wrong", region, region);
		return;
	}
	if (__builtin_expect(H.depth == WORKER_DEPTH_MAX, 0)) {
		fault(-EPROTO, region, "pim_region_enter(%d): more than %u regions open at once",
		      region, WORKER_DEPTH_MAX);
		return;
	}
	H.open[slot] = 1;
	struct frame *f = &H.stack[H.depth++];
	f->slot = slot;
	f->acc = H.acc_of[slot];
	if (f->acc < 0)
		return;
	if (H.group_fd >= 0 && __builtin_expect(!read_group(f->c0), 0))
		fault(-EIO, region, "pim_region_enter(%d): reading the counter group failed: %s",
		      region, strerror(errno));
	f->t0 = clock_ns();
}

void worker_region_exit(int32_t region)
{
	if (__builtin_expect(!runner, 0)) {
		foreign_call();
		return;
	}
	int32_t slot = slot_lookup(region);
	if (__builtin_expect(slot < 0, 0)) {
		fault(-EPROTO, region, "pim_region_exit(%d): region %d is not in the manifest",
		      region, region);
		return;
	}
	if (__builtin_expect(!H.open[slot], 0)) {
		fault(-EPROTO, region, "pim_region_exit(%d): region %d is not open (exit without "
				       "enter)", region, region);
		return;
	}
	struct frame *f = &H.stack[H.depth - 1];
	if (__builtin_expect(f->slot != slot, 0)) {
		fault(-EPROTO, region, "pim_region_exit(%d): region %d, entered inside region %d, "
				       "is still open; regions must nest", region, H.id_of[f->slot],
		      region);
		return;
	}
	if (f->acc >= 0) {
		uint64_t t1 = clock_ns();
		uint64_t c1[READ_WORDS];
		uint64_t *a = H.acc + (size_t)f->acc * H.stride;
		a[A_EXEC]++;
		a[A_TIME] += t1 - f->t0;
		if (H.group_fd >= 0) {
			if (__builtin_expect(!read_group(c1), 0)) {
				fault(-EIO, region, "pim_region_exit(%d): reading the counter group "
						    "failed: %s", region, strerror(errno));
			} else {
				a[A_ENABLED] += c1[1] - f->c0[1];
				a[A_RUNNING] += c1[2] - f->c0[2];
				for (unsigned i = 0; i < H.n_values; i++)
					a[ACC_WORDS + i] += c1[3 + i] - f->c0[3 + i];
			}
		}
	}
	H.open[slot] = 0;
	H.depth--;
}

/* The ABI names (client/pim_hooks.h), the same code: no extra jump. */
void pim_region_enter(int32_t region) __attribute__((alias("worker_region_enter")));
void pim_region_exit(int32_t region) __attribute__((alias("worker_region_exit")));

void worker_hooks_teardown(void)
{
	runner = false;
	H.ready = false;
	free(H.slot_of);
	free(H.acc_of);
	free(H.id_of);
	free(H.open);
	free(H.acc);
	memset(&H, 0, sizeof H);
	H.group_fd = -1;
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

int worker_hooks_setup(const struct worker_job *job, unsigned n_values, struct pim_error *err)
{
	worker_hooks_teardown();
	if (n_values > COUNTERS_MAX_GROUP)
		return err_set(err, -E2BIG, "hooks: %u values per sample, at most %d", n_values,
			       COUNTERS_MAX_GROUP);
	if (job->n_regions == 0 || job->n_regions > WORKER_REGIONS_MAX || !job->regions)
		return err_set(err, -EINVAL, "hooks: %zu regions; need 1..%u", job->n_regions,
			       WORKER_REGIONS_MAX);

	int32_t max_id = 0;
	for (size_t i = 0; i < job->n_regions; i++) {
		int32_t id = job->regions[i];
		if (id < 0 || id > WORKER_REGION_ID_MAX)
			return err_set(err, -EINVAL, "hooks: region id %d out of range 0..%d", id,
				       WORKER_REGION_ID_MAX);
		if (id > max_id)
			max_id = id;
	}
	H.max_id = (uint32_t)max_id;
	H.n_slots = job->n_regions;
	H.slot_of = malloc(((size_t)max_id + 1) * sizeof *H.slot_of);
	H.acc_of = malloc(H.n_slots * sizeof *H.acc_of);
	H.id_of = malloc(H.n_slots * sizeof *H.id_of);
	H.open = calloc(H.n_slots, 1);
	if (!H.slot_of || !H.acc_of || !H.id_of || !H.open) {
		worker_hooks_teardown();
		return err_set(err, -ENOMEM, "hooks: out of memory for %zu regions", job->n_regions);
	}
	memset(H.slot_of, 0xff, ((size_t)max_id + 1) * sizeof *H.slot_of);
	for (size_t i = 0; i < H.n_slots; i++) {
		int32_t id = job->regions[i];
		if (H.slot_of[id] >= 0) {
			worker_hooks_teardown();
			return err_set(err, -EINVAL, "hooks: region id %d listed twice", id);
		}
		H.slot_of[id] = (int32_t)i;
		H.id_of[i] = id;
		H.acc_of[i] = job->measure ? -1 : (int32_t)i;
	}
	H.n_acc = job->measure ? 0 : H.n_slots;
	if (job->measure) {
		_cleanup_(freep) int32_t *m = malloc(job->n_measure * sizeof *m);
		if (!m && job->n_measure > 0) {
			worker_hooks_teardown();
			return err_set(err, -ENOMEM, "hooks: out of memory");
		}
		if (job->n_measure > 0)
			memcpy(m, job->measure, job->n_measure * sizeof *m);
		qsort(m, job->n_measure, sizeof *m, cmp_i32);
		for (size_t i = 0; i < job->n_measure; i++) {
			int32_t s = slot_lookup(m[i]);
			if (s < 0) {
				worker_hooks_teardown();
				return err_set(err, -EINVAL, "hooks: region %d to measure is not in "
							     "the manifest", m[i]);
			}
			if (H.acc_of[s] < 0)
				H.acc_of[s] = (int32_t)H.n_acc++;
		}
	}
	H.max_values = n_values;
	H.stride = ACC_WORDS + n_values;
	H.acc = calloc(H.n_acc ? H.n_acc * H.stride : 1, sizeof *H.acc);
	if (!H.acc) {
		worker_hooks_teardown();
		return err_set(err, -ENOMEM, "hooks: out of memory for %zu accumulators", H.n_acc);
	}
	H.group_fd = -1;
	H.ready = true;
	return 0;
}

void worker_hooks_arm(int leader_fd, unsigned n_values)
{
	if (n_values > H.max_values)
		n_values = H.max_values;
	H.group_fd = leader_fd;
	H.n_values = leader_fd >= 0 ? n_values : 0;
	H.read_bytes = (3 + (size_t)H.n_values) * sizeof(uint64_t);
}

void worker_hooks_begin(void)
{
	H.depth = 0;
	H.faulted = false;
	H.faults = 0;
	__atomic_store_n(&H.foreign, 0, __ATOMIC_RELAXED);
	runner = true;
}

int worker_hooks_end(uint32_t group, uint32_t rep,
		     void (*emit)(void *ctx, const struct worker_record *r), void *ctx,
		     struct worker_record *err_rec)
{
	runner = false;
	if (H.depth > 0 && !H.faulted) {
		int32_t id = H.id_of[H.stack[H.depth - 1].slot];
		fault(-EPROTO, id, "region %d is still open when pim_model_entry returned "
				   "(pim_region_exit(%d) missing)", id, id);
	}
	for (unsigned i = 0; i < H.depth; i++)
		H.open[H.stack[i].slot] = 0;
	H.depth = 0;
	uint64_t foreign = __atomic_load_n(&H.foreign, __ATOMIC_RELAXED);
	if (foreign > 0 && !H.faulted)
		fault(-EPROTO, -1, "%llu region hook calls came from threads other than the one "
				   "running pim_model_entry; the worker counts one thread only",
		      (unsigned long long)foreign);

	for (size_t s = 0; s < H.n_slots; s++) {
		int32_t ai = H.acc_of[s];
		if (ai < 0)
			continue;
		uint64_t *a = H.acc + (size_t)ai * H.stride;
		if (a[A_EXEC] == 0)
			continue;
		if (emit && !H.faulted) {
			struct worker_record r;
			memset(&r, 0, sizeof r);
			r.type = WORKER_REC_SAMPLE;
			r.sample.region = H.id_of[s];
			r.sample.group = group;
			r.sample.rep = rep;
			r.sample.n_values = H.group_fd >= 0 ? H.n_values : 0;
			r.sample.executions = a[A_EXEC];
			r.sample.time_ns = a[A_TIME];
			r.sample.time_enabled = a[A_ENABLED];
			r.sample.time_running = a[A_RUNNING];
			for (unsigned i = 0; i < r.sample.n_values; i++)
				r.sample.value[i] = a[ACC_WORDS + i];
			emit(ctx, &r);
		}
		memset(a, 0, H.stride * sizeof *a);
	}

	if (!H.faulted)
		return 0;
	if (err_rec) {
		memset(err_rec, 0, sizeof *err_rec);
		err_rec->type = WORKER_REC_ERROR;
		err_rec->error = H.fault;
		if (H.faults > 1) {
			size_t len = strlen(err_rec->error.message);
			snprintf(err_rec->error.message + len, sizeof err_rec->error.message - len,
				 " (and %llu more hook errors in this run)",
				 (unsigned long long)(H.faults - 1));
		}
	}
	H.faulted = false;
	return -EPROTO;
}
