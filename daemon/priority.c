/* SPDX-License-Identifier: MIT */
#include "priority.h"

#include <errno.h>
#include <sys/resource.h>
#include <unistd.h>

#include "log.h"

/* Written on the loop's thread before it starts another: read by those without a lock. */
static bool recorded, boosted;
static int base;
static bool writer_told; /* (the writer's notice; one writer at a time) */

/* On Linux PRIO_PROCESS with a thread id is that thread's nice value. */
static int nice_get(int *out)
{
	errno = 0;
	int v = getpriority(PRIO_PROCESS, (id_t)gettid());
	if (errno)
		return -errno;
	*out = v;
	return 0;
}

static int clamp(int v)
{
	return v < -20 ? -20 : v > 19 ? 19 : v;
}

static int nice_set(int v)
{
	return setpriority(PRIO_PROCESS, (id_t)gettid(), clamp(v)) < 0 ? -errno : 0;
}

bool priority_boost_loop(void)
{
	if (recorded || nice_get(&base) < 0)
		return boosted;
	recorded = true;
	int want = clamp(base - PRIORITY_LOOP_BOOST);
	if (want == base) /* at -20 already */
		return false;
	if (nice_set(want) < 0) {
		int w = clamp(base - PRIORITY_WRITER_BOOST);
		log_notice("The event loop and the writer thread run at pimd's nice value %d, not %d "
			   "and %d: that takes CAP_SYS_NICE or an RLIMIT_NICE of %d (LimitNICE=%d in "
			   "pimd.service)", base, want, w, 20 - w, w);
	} else
		boosted = true;
	return boosted;
}

int priority_base(void)
{
	int v = 0;
	if (recorded)
		return base;
	return nice_get(&v) < 0 ? 0 : v;
}

void priority_unboost(int more)
{
	/* raising one's nice value is always allowed; nothing to do when nothing was lowered
	 * and nothing more is asked */
	if (boosted || more > 0)
		(void)nice_set(priority_base() + more);
}

void priority_boost_writer(void)
{
	int want = clamp(base - PRIORITY_WRITER_BOOST);
	/* where the loop could not lower its own, the writer cannot either (one notice said so) */
	if (!boosted || nice_set(want) == 0 || writer_told)
		return;
	writer_told = true;
	log_notice("The writer thread runs at the event loop's nice value %d, not %d: that takes "
		   "CAP_SYS_NICE or an RLIMIT_NICE of %d (LimitNICE=%d in pimd.service)",
		   clamp(base - PRIORITY_LOOP_BOOST), want, 20 - want, want);
}
