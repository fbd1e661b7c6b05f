/* SPDX-License-Identifier: MIT */
/*
 * counters.c: perf_event groups for one thread (doc/design.md §4.2), the no-PMU probe (doc/design.md §4.4),
 * group planning and CPU pinning.
 *
 * rdpmc through the mmap'ed perf_event_mmap_page (doc/pmu.md: ~140 cycles vs ~1000 for read())
 * is deliberately left out: it needs a hardware counter with cap_user_rdpmc to be tested, and no
 * machine of this project's CI has one. Regions are read with one read() of the group leader.
 */
#include "counters.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

/* linux/perf_event.h (via counters.h) must come first: libpfm4's perfmon/perf_event.h then skips
 * its own copy of struct perf_event_attr; it gives the perf_event_open() syscall stub. */
#include <perfmon/pfmlib_perf_event.h>

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif

/* ---- libpfm4: the host's core PMU and event encoding ---------------------------------------- */

static bool pfm_ready; /* libpfm4 keeps process-wide state; initialised once, on first use */

/* libpfm4 errors to negative errno values. */
static int pfm_to_errno(int ret)
{
	switch (ret) {
	case PFM_ERR_NOTSUPP:
		return -EOPNOTSUPP;
	case PFM_ERR_NOTFOUND:
		return -ENOENT;
	case PFM_ERR_NOMEM:
		return -ENOMEM;
	case PFM_ERR_NOINIT:
		return -ENODEV;
	case PFM_ERR_TOOSMALL:
		return -ENOBUFS;
	default:
		return -EINVAL;
	}
}

static int pfm_init(struct pim_error *err)
{
	if (pfm_ready)
		return 0;
	int ret = pfm_initialize();
	if (ret != PFM_SUCCESS)
		return err_set(err, pfm_to_errno(ret), "libpfm4 initialisation failed: %s",
			       pfm_strerror(ret));
	pfm_ready = true;
	return 0;
}

int counters_detect_pmu(struct events_host *out, struct pim_error *err)
{
	int r = pfm_init(err);
	if (r < 0)
		return r;

	memset(out, 0, sizeof *out);
	char unknown[64] = "";
	int pmu;
	pfm_for_all_pmus(pmu) {
		pfm_pmu_info_t info;
		memset(&info, 0, sizeof info);
		info.size = sizeof info;
		if (pfm_get_pmu_info(pmu, &info) != PFM_SUCCESS || !info.is_present ||
		    info.type != PFM_PMU_TYPE_CORE)
			continue;
		out->n_core_pmus++;
		const struct event_table *t = events_table_for_pmu(info.name);
		if (!t) {
			if (!unknown[0])
				snprintf(unknown, sizeof unknown, "%s", info.name);
			continue;
		}
		if (out->table)
			continue; /* hybrid: keep the first core PMU with a table */
		out->table = t;
		snprintf(out->pmu, sizeof out->pmu, "%s", info.name);
		snprintf(out->pmu_desc, sizeof out->pmu_desc, "%s", info.desc ? info.desc : "");
		out->num_cntrs = info.num_cntrs;
		out->num_fixed_cntrs = info.num_fixed_cntrs;
	}

	if (out->table)
		snprintf(out->reason, sizeof out->reason,
			 "core PMU %s (%s) uses the %s event table%s", out->pmu, out->pmu_desc,
			 out->table->model,
			 out->n_core_pmus > 1 ? "; hybrid CPU with several core PMUs: pin the "
						"worker to a CPU of this PMU" : "");
	else if (unknown[0])
		snprintf(out->reason, sizeof out->reason,
			 "core PMU %s has no pimd event table; using the generic perf:: events "
			 "(C4 not evaluable)", unknown);
	else
		snprintf(out->reason, sizeof out->reason,
			 "libpfm4 finds no core PMU on this host; using the generic perf:: events "
			 "(C4 not evaluable)");
	if (!out->table)
		out->table = events_table_by_model("generic");
	return 0;
}

int counters_encode_event(const char *name, struct perf_event_attr *attr, struct pim_error *err)
{
	if (!name || !*name || !attr)
		return err_set(err, -EINVAL, "counters_encode_event: empty event name");
	int r = pfm_init(err);
	if (r < 0)
		return r;

	memset(attr, 0, sizeof *attr);
	attr->size = sizeof *attr; /* libpfm4 reads it to know how much it may write */

	pfm_perf_encode_arg_t arg;
	memset(&arg, 0, sizeof arg);
	arg.attr = attr;
	arg.size = sizeof arg;

	int ret = pfm_get_os_event_encoding(name, PFM_PLM3, PFM_OS_PERF_EVENT_EXT, &arg);
	if (ret != PFM_SUCCESS) {
		const char *hint = "";
		if (ret == PFM_ERR_NOTFOUND)
			hint = "; check the PMU prefix (e.g. icx::) and the name with libpfm4's "
			       "showevtinfo";
		else if (ret == PFM_ERR_ATTR || ret == PFM_ERR_UMASK)
			hint = "; the unit mask or modifier is not known for this PMU";
		return err_set(err, pfm_to_errno(ret), "libpfm4 cannot encode event '%s': %s%s",
			       name, pfm_strerror(ret), hint);
	}
	attr->size = sizeof *attr;
	attr->exclude_kernel = 1; /* doc/design.md §4.2: user space only */
	return 0;
}

/* ---- perf_event groups ------------------------------------------------------------------- */

#define READ_FORMAT                                                                                \
	(PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING)

static const char *errno_name(int e)
{
	const char *s = strerrorname_np(e);
	return s ? s : "an unknown errno";
}

void counters_group_init(struct counters_group *g)
{
	memset(g, 0, sizeof *g);
	for (unsigned i = 0; i < COUNTERS_MAX_GROUP; i++)
		g->fd[i] = -1;
}

void counters_close(struct counters_group *g)
{
	/* members first, leader last */
	for (unsigned i = COUNTERS_MAX_GROUP; i-- > 0;) {
		closep(&g->fd[i]);
		g->fd[i] = -1;
	}
	g->n = 0;
}

/* The message for a failed perf_event_open() of member i (0 = leader). */
static int open_error(const struct counters_group *g, unsigned i, const char *name, int e,
		      struct pim_error *err)
{
	switch (e) {
	case ENOENT:
	case ENODEV:
	case EOPNOTSUPP:
		return err_set(err, -e, "perf_event_open(%s) failed with %s: this host does not "
					"count the event (no hardware PMU, or not this PMU's event)",
			       name, errno_name(e));
	case EACCES:
	case EPERM:
		return err_set(err, -e, "perf_event_open(%s) failed with %s: not permitted; grant "
					"CAP_PERFMON or lower kernel.perf_event_paranoid",
			       name, errno_name(e));
	case ENOSPC:
	case EINVAL:
		if (i > 0)
			return err_set(err, -e, "perf_event_open(%s) failed with %s as member %u of "
						"the group led by %s: the group does not fit the "
						"PMU; run this event in another group",
				       name, errno_name(e), i, g->name[0]);
		return err_set(err, -e, "perf_event_open(%s) failed with %s: the event is "
					"invalid for this PMU", name, errno_name(e));
	default:
		return err_set(err, -e, "perf_event_open(%s) failed with %s (%s)", name,
			       errno_name(e), strerror(e));
	}
}

int counters_open(struct counters_group *g, pid_t pid, int cpu, const struct counters_event *ev,
		  unsigned n, struct pim_error *err)
{
	counters_group_init(g);
	if (!ev || n == 0)
		return err_set(err, -EINVAL, "counters_open: empty event group");
	if (n > COUNTERS_MAX_GROUP)
		return err_set(err, -E2BIG, "counters_open: %u events in one group, at most %d; "
					    "split them with counters_plan_groups()",
			       n, COUNTERS_MAX_GROUP);

	for (unsigned i = 0; i < n; i++) {
		const char *name = ev[i].name ? ev[i].name : "unnamed event";
		snprintf(g->name[i], sizeof g->name[i], "%s", name);

		struct perf_event_attr attr = ev[i].attr;
		attr.size = sizeof attr;
		attr.read_format = READ_FORMAT;
		attr.exclude_kernel = 1; /* doc/design.md §4.2: user space only */
		attr.exclude_hv = 1;
		attr.inherit = 0;        /* inherit does not work with PERF_FORMAT_GROUP */
		attr.pinned = 0;
		attr.disabled = i == 0;  /* members follow the leader */

		int fd = perf_event_open(&attr, pid, cpu, i == 0 ? -1 : g->fd[0],
					 PERF_FLAG_FD_CLOEXEC);
		if (fd < 0) {
			int e = errno;
			open_error(g, i, g->name[i], e, err);
			counters_close(g);
			return -e;
		}
		g->fd[i] = fd;
		g->n = i + 1;
	}
	return 0;
}

static int group_ioctl(struct counters_group *g, unsigned long req, const char *what,
		       struct pim_error *err)
{
	if (g->n == 0 || g->fd[0] < 0)
		return err_set(err, -EBADF, "counters: %s on a group that is not open", what);
	if (ioctl(g->fd[0], req, PERF_IOC_FLAG_GROUP) < 0)
		return err_set(err, -errno, "counters: %s of the group led by %s failed: %s", what,
			       g->name[0], strerror(errno));
	return 0;
}

int counters_enable(struct counters_group *g, struct pim_error *err)
{
	int r = group_ioctl(g, PERF_EVENT_IOC_RESET, "reset", err);
	if (r < 0)
		return r;
	return group_ioctl(g, PERF_EVENT_IOC_ENABLE, "enable", err);
}

int counters_disable(struct counters_group *g, struct pim_error *err)
{
	return group_ioctl(g, PERF_EVENT_IOC_DISABLE, "disable", err);
}

int counters_read(const struct counters_group *g, struct counters_sample *s, struct pim_error *err)
{
	/* PERF_FORMAT_GROUP layout: nr, time_enabled, time_running, value[nr] */
	uint64_t buf[3 + COUNTERS_MAX_GROUP];
	size_t want = (3 + (size_t)g->n) * sizeof buf[0];

	if (g->n == 0 || g->fd[0] < 0)
		return err_set(err, -EBADF, "counters: read of a group that is not open");
	ssize_t r;
	do
		r = read(g->fd[0], buf, want);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return err_set(err, -errno, "counters: read of the group led by %s failed: %s",
			       g->name[0], strerror(errno));
	if (r == 0)
		return err_set(err, -ENOSPC, "counters: the group led by %s is in error state "
					     "(it could not be scheduled); run another group",
			       g->name[0]);
	if ((size_t)r != want || buf[0] != g->n)
		return err_set(err, -EIO, "counters: short read of the group led by %s: %zd bytes, "
					  "%llu events, expected %zu bytes, %u events",
			       g->name[0], r, (unsigned long long)buf[0], want, g->n);

	memset(s, 0, sizeof *s);
	s->n = g->n;
	s->time_enabled = buf[1];
	s->time_running = buf[2];
	for (unsigned i = 0; i < g->n; i++)
		s->value[i] = buf[3 + i];
	return 0;
}

int counters_scale(const struct counters_sample *s, struct counters_reading *out,
		   struct pim_error *err)
{
	if (s->n > COUNTERS_MAX_GROUP)
		return err_set(err, -EINVAL, "counters: sample of %u events, at most %d", s->n,
			       COUNTERS_MAX_GROUP);
	if (s->time_running > s->time_enabled)
		return err_set(err, -EINVAL, "counters: time_running %llu ns exceeds time_enabled "
					     "%llu ns",
			       (unsigned long long)s->time_running,
			       (unsigned long long)s->time_enabled);
	if (s->time_enabled > 0 && s->time_running == 0)
		return err_set(err, -ENOSPC, "counters: the group was enabled for %llu ns but never "
					     "scheduled on the PMU (time_running 0); run it as "
					     "another group",
			       (unsigned long long)s->time_enabled);

	memset(out, 0, sizeof *out);
	out->n = s->n;
	out->time_enabled = s->time_enabled;
	out->time_running = s->time_running;
	/* Scale only when the group was multiplexed (doc/design.md §4.2); raw stays alongside. */
	out->scaled = s->time_running < s->time_enabled;
	for (unsigned i = 0; i < s->n; i++) {
		out->raw[i] = s->value[i];
		if (!out->scaled) {
			out->value[i] = s->value[i];
			continue;
		}
		unsigned __int128 v = (unsigned __int128)s->value[i] * s->time_enabled;
		v = (v + s->time_running / 2) / s->time_running;
		out->value[i] = v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
	}
	return 0;
}

int counters_delta(const struct counters_sample *before, const struct counters_sample *after,
		   struct counters_reading *out, struct pim_error *err)
{
	if (before->n != after->n)
		return err_set(err, -EINVAL, "counters: samples of %u and %u events cannot be "
					     "subtracted", before->n, after->n);
	if (after->time_enabled < before->time_enabled || after->time_running < before->time_running)
		return err_set(err, -EINVAL, "counters: the later sample has smaller times "
					     "(enabled %llu < %llu or running %llu < %llu)",
			       (unsigned long long)after->time_enabled,
			       (unsigned long long)before->time_enabled,
			       (unsigned long long)after->time_running,
			       (unsigned long long)before->time_running);

	struct counters_sample d = {
		.n = after->n,
		.time_enabled = after->time_enabled - before->time_enabled,
		.time_running = after->time_running - before->time_running,
	};
	for (unsigned i = 0; i < d.n && i < COUNTERS_MAX_GROUP; i++) {
		if (after->value[i] < before->value[i])
			return err_set(err, -EINVAL, "counters: event %u went back (%llu -> %llu); "
						     "was the group reset between the samples?",
				       i, (unsigned long long)before->value[i],
				       (unsigned long long)after->value[i]);
		d.value[i] = after->value[i] - before->value[i];
	}
	return counters_scale(&d, out, err);
}

int counters_plan_groups(const struct counters_event *ev, unsigned n, unsigned max_per_group,
			 struct counters_plan *out, struct pim_error *err)
{
	memset(out, 0, sizeof *out);
	if (max_per_group == 0)
		return err_set(err, -EINVAL, "counters: max_per_group must be at least 1");
	if (n > COUNTERS_MAX_EVENTS)
		return err_set(err, -E2BIG, "counters: %u events to plan, at most %d", n,
			       COUNTERS_MAX_EVENTS);
	if (n > 0 && !ev)
		return err_set(err, -EINVAL, "counters: no events to plan");

	unsigned general = 0;
	for (unsigned i = 0; i < n; i++) {
		unsigned cost = ev[i].fixed ? 0 : 1;
		unsigned g = out->n_groups;
		if (g == 0 || general + cost > max_per_group ||
		    out->count[g - 1] + 1 > COUNTERS_MAX_GROUP) {
			out->first[g] = i;
			out->n_groups = ++g;
			general = 0;
		}
		out->count[g - 1]++;
		general += cost;
	}
	return (int)out->n_groups;
}

static bool read_paranoid(int *out)
{
	_cleanup_(fclosep) FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
	return f && fscanf(f, "%d", out) == 1;
}

static void read_caps(struct counters_probe *p)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	memset(data, 0, sizeof data);
	if (syscall(SYS_capget, &hdr, data) < 0)
		return;
	p->cap_sys_admin = data[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective & CAP_TO_MASK(CAP_SYS_ADMIN);
	p->cap_perfmon = data[CAP_TO_INDEX(CAP_PERFMON)].effective & CAP_TO_MASK(CAP_PERFMON);
}

/* Opens one event on the calling thread and closes it again; 0 or the errno. */
static int try_open(uint32_t type, uint64_t config)
{
	struct perf_event_attr attr;
	memset(&attr, 0, sizeof attr);
	attr.size = sizeof attr;
	attr.type = type;
	attr.config = config;
	attr.disabled = 1;
	attr.exclude_kernel = 1;
	attr.exclude_hv = 1;
	int fd = perf_event_open(&attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

int counters_probe(struct counters_probe *out)
{
	memset(out, 0, sizeof *out);
	out->hw_errno = try_open(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES);
	out->hw_ok = out->hw_errno == 0;
	out->sw_errno = try_open(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK);
	out->sw_ok = out->sw_errno == 0;
	out->paranoid_known = read_paranoid(&out->paranoid);
	read_caps(out);

	char *p = out->reason;
	size_t left = sizeof out->reason;
	int n;
	int e = out->hw_errno;
	if (out->hw_ok)
		n = snprintf(p, left, "hardware counters available: perf_event_open(cycles) "
				      "succeeded");
	else if (e == ENOENT || e == ENODEV || e == EOPNOTSUPP)
		n = snprintf(p, left, "PMU unavailable: perf_event_open(cycles) failed with %s; "
				      "this host exports no hardware counters; profiling with "
				      "the timing backend", errno_name(e));
	else if (e == EACCES || e == EPERM) {
		char par[32] = "unknown";
		if (out->paranoid_known)
			snprintf(par, sizeof par, "%d", out->paranoid);
		n = snprintf(p, left, "PMU not permitted: perf_event_open(cycles) failed with %s; "
				      "perf_event_paranoid is %s and CAP_PERFMON is %s the "
				      "effective set; grant CAP_PERFMON or lower "
				      "kernel.perf_event_paranoid; profiling with the timing "
				      "backend", errno_name(e), par,
			     out->cap_perfmon ? "in" : "not in");
	} else
		n = snprintf(p, left, "PMU unavailable: perf_event_open(cycles) failed with %s "
				      "(%s); profiling with the timing backend",
			     errno_name(e), strerror(e));
	if (n > 0 && (size_t)n < left && !out->sw_ok)
		snprintf(p + n, left - (size_t)n, "; software events unavailable too: "
						  "perf_event_open(task-clock) failed with %s",
			 errno_name(out->sw_errno));
	return 0;
}

int counters_pin_cpu(int cpu, struct pim_error *err)
{
	if (cpu < 0 || cpu >= CPU_SETSIZE)
		return err_set(err, -EINVAL, "cannot pin to CPU %d: out of range 0..%d", cpu,
			       CPU_SETSIZE - 1);
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set) < 0) {
		int e = errno;
		if (e == EINVAL)
			return err_set(err, -e, "cannot pin to CPU %d: it is offline or outside this "
						"thread's cpuset", cpu);
		return err_set(err, -e, "cannot pin to CPU %d: sched_setaffinity failed: %s", cpu,
			       strerror(e));
	}
	return 0;
}
