/* SPDX-License-Identifier: MIT */
#include "platform.h"

#include <string.h>
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
	if (events_detect(&host, &e) == 0) {
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
