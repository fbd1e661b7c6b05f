/* SPDX-License-Identifier: MIT */
/*
 * counters.h: counting one perf_event group around a region (doc/design.md §4.2), probing what the host
 * can count (doc/design.md §4.4), group planning and CPU pinning.
 *
 * No silent multiplexing: a group that was not scheduled for the whole region is flagged
 * (scaled), one that never ran or could not be opened is an error, so the caller runs the
 * region again with another group.
 */
#ifndef PIMD_COUNTERS_H
#define PIMD_COUNTERS_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "events.h"
#include "util.h"

#define COUNTERS_MAX_GROUP 8          /* events per group (leader included) */
#define COUNTERS_MAX_EVENTS 32        /* events one plan can split */
#define COUNTERS_DEFAULT_PER_GROUP 4  /* general counters per thread with SMT on (Intel, AMD) */
#define COUNTERS_NAME_MAX 96

/* An event to count: its name (for messages) and its encoded attr (counters_encode_event, or by hand). */
struct counters_event {
	const char *name;
	struct perf_event_attr attr;
	bool fixed; /* served by a fixed counter: does not take a general one (planning only) */
};

/* An open group; fd[0] is the leader. Initialise with counters_group_init(). */
struct counters_group {
	unsigned n;
	int fd[COUNTERS_MAX_GROUP];
	char name[COUNTERS_MAX_GROUP][COUNTERS_NAME_MAX];
};

/* One read() of a group: cumulative values and times (ns). */
struct counters_sample {
	unsigned n;
	uint64_t value[COUNTERS_MAX_GROUP];
	uint64_t time_enabled;
	uint64_t time_running;
};

/* A region's counts: raw and scaled values, both times, and whether scaling happened. */
struct counters_reading {
	unsigned n;
	uint64_t raw[COUNTERS_MAX_GROUP];    /* counted while the group was on the PMU */
	uint64_t value[COUNTERS_MAX_GROUP];  /* raw·enabled/running when scaled, else raw */
	uint64_t time_enabled;
	uint64_t time_running;
	bool scaled;                         /* time_running < time_enabled */
};

/* A split of an ordered event list into contiguous groups. */
struct counters_plan {
	unsigned n_groups;
	unsigned first[COUNTERS_MAX_EVENTS]; /* index of a group's first event */
	unsigned count[COUNTERS_MAX_EVENTS]; /* events in the group */
};

/* What this host lets us count. */
struct counters_probe {
	bool hw_ok;           /* perf_event_open(PERF_TYPE_HARDWARE cycles) succeeded */
	int hw_errno;         /* its errno when it failed (positive), else 0 */
	bool sw_ok;           /* perf_event_open(task-clock) succeeded */
	int sw_errno;
	bool paranoid_known;
	int paranoid;         /* /proc/sys/kernel/perf_event_paranoid */
	bool cap_perfmon;     /* CAP_PERFMON in the effective set */
	bool cap_sys_admin;   /* CAP_SYS_ADMIN in the effective set */
	char reason[384];     /* plain words: what works, what not, what we do about it */
};

/* Finds the active core PMU through libpfm4 (initialised once, on first use: LIBPFM_ENCODE_INACTIVE
 * and LIBPFM_FORCE_PMU must be set before) and its row of events.c; a host without a known core
 * PMU gets "generic". */
int counters_detect_pmu(struct events_host *out, struct pim_error *err);

/* Encodes a libpfm4 event name into attr (zeroed first; size set; user space only:
 * exclude_kernel = 1). -ENOENT unknown event, -EINVAL bad umask/attribute. */
int counters_encode_event(const char *name, struct perf_event_attr *attr, struct pim_error *err);

void counters_group_init(struct counters_group *g);

/* Opens ev[0..n) as one group on task pid (0: the calling thread) and cpu (-1: any), disabled.
 * user space only (exclude_kernel, exclude_hv), PERF_FORMAT_GROUP|TOTAL_TIME_ENABLED|RUNNING,
 * close-on-exec. A member that does not fit (ENOSPC, EINVAL) or an event the host lacks (ENOENT)
 * fails the whole open with a message naming the event. */
int counters_open(struct counters_group *g, pid_t pid, int cpu, const struct counters_event *ev,
		  unsigned n, struct pim_error *err);
/* Resets and enables / disables the whole group (ioctl on the leader, PERF_IOC_FLAG_GROUP). */
int counters_enable(struct counters_group *g, struct pim_error *err);
int counters_disable(struct counters_group *g, struct pim_error *err);
/* One read() of the leader. */
int counters_read(const struct counters_group *g, struct counters_sample *s, struct pim_error *err);
/* Closes every fd; safe on an initialised or already closed group. */
void counters_close(struct counters_group *g);

/* Counts of one sample, scaled only when time_running < time_enabled. -ENOSPC when the group
 * was never scheduled (time_running == 0 with time_enabled > 0): run another group. */
int counters_scale(const struct counters_sample *s, struct counters_reading *out,
		   struct pim_error *err);
/* after - before, then as counters_scale(). -EINVAL when the samples don't match or go back. */
int counters_delta(const struct counters_sample *before, const struct counters_sample *after,
		   struct counters_reading *out, struct pim_error *err);

/* Splits ev[0..n) in order into groups of at most max_per_group general-counter events
 * (fixed events ride along) and at most COUNTERS_MAX_GROUP events in all. */
int counters_plan_groups(const struct counters_event *ev, unsigned n, unsigned max_per_group,
			 struct counters_plan *out, struct pim_error *err);

/* Probes hardware and software counting, perf_event_paranoid and capabilities. Always fills
 * out (reason included) and returns 0. */
int counters_probe(struct counters_probe *out);

/* Pins the calling thread to cpu (doc/design.md §4.2). -EINVAL when cpu is not allowed. */
int counters_pin_cpu(int cpu, struct pim_error *err);

#endif
