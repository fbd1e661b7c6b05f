/* SPDX-License-Identifier: MIT */
#include "platform.h"

#include <json-c/json.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "sys.h"

static void cpu_model(char *buf, size_t len)
{
	FILE *f = fopen("/proc/cpuinfo", "re");
	char line[512];

	snprintf(buf, len, "unknown CPU");
	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, "model name", 10) == 0) {
			char *c = strchr(line, ':');
			if (c) {
				c++;
				while (*c == ' ' || *c == '\t')
					c++;
				c[strcspn(c, "\n")] = 0;
				snprintf(buf, len, "%s", c);
			}
			break;
		}
	}
	fclose(f);
}

int platform_detect(struct platform *p, struct pim_error *err)
{
	struct events_host host;
	struct utsname u;
	struct pim_error e = { 0 };

	memset(p, 0, sizeof *p);
	cpu_model(p->id.cpu_model, sizeof p->id.cpu_model);
	if (uname(&u) == 0)
		snprintf(p->id.kernel, sizeof p->id.kernel, "%s", u.release);
	if (counters_detect_pmu(&host, &e) == 0) {
		snprintf(p->id.pmu, sizeof p->id.pmu, "%s", *host.pmu ? host.pmu : "generic");
		p->table = host.table;
	} else
		snprintf(p->id.pmu, sizeof p->id.pmu, "none");
	snprintf(p->id.name, sizeof p->id.name, "%s / %s", p->id.cpu_model, p->id.pmu);
	counters_probe(&p->probe);
	p->counters = p->probe.hw_ok;
	if (p->counters)
		snprintf(p->backend_reason, sizeof p->backend_reason,
			 "hardware counters available (core PMU %s); profiling with the counters backend",
			 p->id.pmu);
	else
		snprintf(p->backend_reason, sizeof p->backend_reason, "%s", p->probe.reason);
	(void)err;
	return 0;
}

/* ---------------------------------------------------------------- the fleet's platform key */

struct cpu_id {
	char vendor[64], family[32], model[32], stepping[32], microcode[32];
};

/* "key : value" of the first processor in /proc/cpuinfo (x86: vendor_id, cpu family, model,
 * stepping, microcode; Arm: CPU implementer, architecture, part, revision). */
static void cpu_id_read(struct cpu_id *c)
{
	static const struct { const char *key; size_t off, len; } fields[] = {
		{ "vendor_id", offsetof(struct cpu_id, vendor), sizeof c->vendor },
		{ "CPU implementer", offsetof(struct cpu_id, vendor), sizeof c->vendor },
		{ "cpu family", offsetof(struct cpu_id, family), sizeof c->family },
		{ "CPU architecture", offsetof(struct cpu_id, family), sizeof c->family },
		{ "model", offsetof(struct cpu_id, model), sizeof c->model },
		{ "CPU part", offsetof(struct cpu_id, model), sizeof c->model },
		{ "stepping", offsetof(struct cpu_id, stepping), sizeof c->stepping },
		{ "CPU revision", offsetof(struct cpu_id, stepping), sizeof c->stepping },
		{ "microcode", offsetof(struct cpu_id, microcode), sizeof c->microcode },
	};
	FILE *f = fopen("/proc/cpuinfo", "re");
	char line[512];

	snprintf(c->vendor, sizeof c->vendor, "unknown");
	snprintf(c->family, sizeof c->family, "?");
	snprintf(c->model, sizeof c->model, "?");
	snprintf(c->stepping, sizeof c->stepping, "?");
	snprintf(c->microcode, sizeof c->microcode, "unknown");
	if (!f)
		return;
	while (fgets(line, sizeof line, f) && line[0] != '\n') {
		char *colon = strchr(line, ':');
		if (!colon)
			continue;
		char *v = colon + 1, *k = line;
		while (colon > k && (colon[-1] == ' ' || colon[-1] == '\t'))
			colon--;
		*colon = 0;
		while (*v == ' ' || *v == '\t')
			v++;
		v[strcspn(v, "\n")] = 0;
		/* no space or ':' in a key's fields: the key stays one token per field */
		for (char *q = v; *q; q++)
			if (*q == ' ' || *q == ':' || *q == '"' || *q == '\\')
				*q = '_';
		for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
			if (strcmp(k, fields[i].key) == 0 && *v)
				snprintf((char *)c + fields[i].off, fields[i].len, "%s", v);
	}
	fclose(f);
}

static unsigned numa_nodes(void)
{
	FILE *f = fopen("/sys/devices/system/node/online", "re");
	unsigned n = 0, a, b;
	int k;

	if (!f)
		return 1;
	while ((k = fscanf(f, "%u-%u", &a, &b)) >= 1) {
		n += k == 2 && b >= a ? b - a + 1 : 1;
		if (fgetc(f) != ',')
			break;
	}
	fclose(f);
	return n ? n : 1;
}

void platform_fleet_describe(struct platform *p, const char *override)
{
	struct cpu_id c;
	long cpus = sysconf(_SC_NPROCESSORS_CONF), pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	/* MemTotal is what the kernel did not reserve: rounded to whole GiB, hosts with the same
	 * DIMMs and kernel agree */
	unsigned long long gib = pages > 0 && page > 0 ? ((unsigned long long)pages * (unsigned long long)page +
							  (1ull << 29)) >> 30 : 0;
	unsigned nodes = numa_nodes();
	char backend[96];

	cpu_id_read(&c);
	if (p->counters)
		snprintf(backend, sizeof backend, "counters-%s", p->id.pmu);
	else
		snprintf(backend, sizeof backend, "timing");
	if (override && *override)
		snprintf(p->fleet_key, sizeof p->fleet_key, "%s", override);
	else
		snprintf(p->fleet_key, sizeof p->fleet_key, "%s-%s-%s-%s:%ldcpu:%lluG:%un:%s", c.vendor, c.family,
			 c.model, c.stepping, cpus > 0 ? cpus : 1, gib, nodes, backend);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "vendor", json_object_new_string(c.vendor));
	json_object_object_add(o, "family", json_object_new_string(c.family));
	json_object_object_add(o, "model", json_object_new_string(c.model));
	json_object_object_add(o, "stepping", json_object_new_string(c.stepping));
	json_object_object_add(o, "microcode", json_object_new_string(c.microcode));
	json_object_object_add(o, "cpu_model", json_object_new_string(p->id.cpu_model));
	json_object_object_add(o, "cpus", json_object_new_int64(cpus > 0 ? cpus : 1));
	json_object_object_add(o, "memory_gib", json_object_new_int64((int64_t)gib));
	json_object_object_add(o, "numa_nodes", json_object_new_int64(nodes));
	json_object_object_add(o, "kernel", json_object_new_string(p->id.kernel));
	json_object_object_add(o, "backend", json_object_new_string(p->counters ? "counters" : "timing"));
	json_object_object_add(o, "pmu", json_object_new_string(p->id.pmu));
	json_object_object_add(o, "b_cpu", json_object_new_double(p->id.b_cpu));
	json_object_object_add(o, "b_cpu_spread", json_object_new_double(p->id.b_cpu_spread));
	json_object_object_add(o, "key_overridden", json_object_new_boolean(override && *override));
	snprintf(p->fleet_json, sizeof p->fleet_json, "%s", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
}

/* ---------------------------------------------------------------- B_cpu */

/* Evicts [p, p + n) from every cache level, so that the next read of it comes from memory. */
typedef void (*flush_fn)(const char *p, size_t n);

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>

__attribute__((target("clflushopt"))) static void flush_opt(const char *p, size_t n)
{
	for (size_t o = 0; o < n; o += 64)
		_mm_clflushopt((void *)(p + o));
	_mm_mfence();
}

static void flush_plain(const char *p, size_t n)
{
	for (size_t o = 0; o < n; o += 64)
		_mm_clflush(p + o);
	_mm_mfence();
}

static flush_fn flush_for_host(const char **name)
{
	unsigned a, b, c, d;
	if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 23))) {
		*name = "clflushopt";
		return flush_opt;
	}
	*name = "clflush";
	return flush_plain;
}
#elif defined(__aarch64__)
static void flush_dc(const char *p, size_t n)
{
	for (size_t o = 0; o < n; o += 64)
		__asm__ volatile("dc civac, %0" : : "r"(p + o) : "memory");
	__asm__ volatile("dsb ish" : : : "memory");
}

static flush_fn flush_for_host(const char **name)
{
	*name = "dc civac";
	return flush_dc;
}
#else
static flush_fn flush_for_host(const char **name)
{
	*name = NULL;
	return NULL;
}
#endif

/* Runnable tasks now (procs_running of /proc/stat, the caller included); 0 if unknown. */
static double runnable_now(void)
{
	FILE *f = fopen("/proc/stat", "re");
	char line[256];
	double n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "procs_running %lf", &n) == 1)
			break;
	fclose(f);
	return n;
}

static unsigned cpus_online(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

void platform_host_describe(char *buf, size_t len)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	unsigned n = cpus_online();
	double gib = pages > 0 && page > 0 ? (double)pages * (double)page / (1u << 30) : 0;

	snprintf(buf, len, "%u CPU%s, %.1f GiB", n, n == 1 ? "" : "s", gib);
}

/* The bandwidth of one read pass over [q, q + bytes), B/s. */
static double read_pass(const uint64_t *q, size_t bytes)
{
	size_t n = bytes / sizeof *q;
	uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, t0 = now_ns();

	for (size_t i = 0; i + 3 < n; i += 4) {
		s0 += q[i];
		s1 += q[i + 1];
		s2 += q[i + 2];
		s3 += q[i + 3];
	}
	uint64_t dt = now_ns() - t0;
	/* keep the sums alive without a volatile in the loop */
	__asm__ volatile("" : : "r"(s0 + s1 + s2 + s3));
	return (double)bytes * 1e9 / (double)(dt ? dt : 1);
}

#define PROBE_PASSES_PER_ROUND (PLATFORM_PROBE_BYTES / PLATFORM_PROBE_PASS_BYTES)

int platform_probe_bandwidth(struct store_platform *p, struct bandwidth_result *res,
			     struct pim_error *err)
{
	const char *flush_name;
	flush_fn flush = flush_for_host(&flush_name);
	size_t bytes = flush ? PLATFORM_PROBE_BYTES : PLATFORM_PROBE_BYTES_UNFLUSHED;
	size_t chunks = bytes / PLATFORM_PROBE_PASS_BYTES, n = 0, next = 0;
	double passes[PLATFORM_PROBE_ROUNDS * PROBE_PASSES_PER_ROUND], runnable[PLATFORM_PROBE_ROUNDS];
	struct bandwidth_result r;
	unsigned n_cpus = cpus_online();
	int k;

	char *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		return err_set(err, -errno, "bandwidth probe: cannot map %zu bytes: %s", bytes, strerror(errno));
	/* huge pages where the kernel has them: fewer faults now, no TLB walk per 4 KiB later */
	(void)madvise(buf, bytes, MADV_HUGEPAGE);
	for (size_t i = 0; i < bytes / sizeof(uint64_t); i++)
		((uint64_t *)buf)[i] = i;
	uint64_t t0 = now_ns();
	for (unsigned round = 0; round < PLATFORM_PROBE_ROUNDS; round++) {
		if (round) {
			/* passes spread over time catch the windows in which competitors are off
			 * the CPUs; a task that slept also runs at once when it wakes */
			struct timespec pause = { 0, PLATFORM_PROBE_PAUSE_MS * 1000000L };
			nanosleep(&pause, NULL);
		}
		runnable[round] = runnable_now();
		for (size_t i = 0; i < PROBE_PASSES_PER_ROUND; i++, next = (next + 1) % chunks) {
			const char *q = buf + next * PLATFORM_PROBE_PASS_BYTES;
			if (flush)
				flush(q, PLATFORM_PROBE_PASS_BYTES);
			passes[n++] = read_pass((const uint64_t *)q, PLATFORM_PROBE_PASS_BYTES);
		}
	}
	double took = (double)(now_ns() - t0) / 1e9;
	munmap(buf, bytes);
	if ((k = bandwidth_summarize(passes, n, BANDWIDTH_GROUPS, runnable, PLATFORM_PROBE_ROUNDS,
				     n_cpus, &r, err)) < 0)
		return k;
	p->b_cpu = r.b_cpu;
	p->b_cpu_spread = r.spread;
	if (flush)
		snprintf(p->b_cpu_method, sizeof p->b_cpu_method,
			 "1 thread, %.0fth percentile of %zu reads of %g MiB flushed by %s, %u rounds "
			 "in %.1f s", 100 * BANDWIDTH_QUANTILE, n, PLATFORM_PROBE_PASS_BYTES / 1048576.0, flush_name,
			 PLATFORM_PROBE_ROUNDS, took);
	else
		snprintf(p->b_cpu_method, sizeof p->b_cpu_method,
			 "1 thread, %.0fth percentile of %zu reads of %g MiB rotating through %zu MiB "
			 "(no cache flush here), %u rounds in %.1f s", 100 * BANDWIDTH_QUANTILE, n,
			 PLATFORM_PROBE_PASS_BYTES / 1048576.0, bytes >> 20, PLATFORM_PROBE_ROUNDS, took);
	p->b_cpu_measured_at = (int64_t)time(NULL);
	p->b_cpu_busy = r.busy;
	bandwidth_describe(&r, n_cpus, p->b_cpu_load, sizeof p->b_cpu_load);
	platform_host_describe(p->b_cpu_host, sizeof p->b_cpu_host);
	if (res)
		*res = r;
	return 0;
}
