/* SPDX-License-Identifier: MIT */
#include "platform.h"

#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>

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

int platform_probe_bandwidth(size_t bytes, double *bps, struct pim_error *err)
{
	uint64_t *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	size_t n = bytes / sizeof *buf;
	double best = 0;

	if (buf == MAP_FAILED)
		return err_set(err, -errno, "bandwidth probe: cannot map %zu bytes: %s", bytes, strerror(errno));
	for (size_t i = 0; i < n; i++)
		buf[i] = i;
	for (int pass = 0; pass < 3; pass++) {
		uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, t0 = now_ns();
		for (size_t i = 0; i + 3 < n; i += 4) {
			s0 += buf[i];
			s1 += buf[i + 1];
			s2 += buf[i + 2];
			s3 += buf[i + 3];
		}
		uint64_t dt = now_ns() - t0;
		/* keep the sums alive without a volatile in the loop */
		__asm__ volatile("" : : "r"(s0 + s1 + s2 + s3));
		double b = dt ? (double)bytes * 1e9 / (double)dt : 0;
		if (b > best)
			best = b;
	}
	munmap(buf, bytes);
	if (!(best > 0))
		return err_set(err, -EIO, "bandwidth probe: no time elapsed");
	*bps = best;
	return 0;
}
