/* SPDX-License-Identifier: MIT */
/*
 * whoami: reports the identity it runs under through the regions it enters: region getuid()
 * and region 200000 + getgid() (so a 65534 worker enters 65534 and 265534). It first checks the
 * containment the worker promises and returns a nonzero code naming what is missing:
 *   10 capabilities left (permitted, effective or inheritable)   11 an ambient capability
 *   12 NO_NEW_PRIVS not set   13 supplementary groups   14 real != effective ids
 *   15 dumpable   16 core dumps allowed   17 address space unlimited
 *   18 processes unlimited (RLIMIT_NPROC)   19 files unlimited (RLIMIT_NOFILE)
 *   20 setpgid() allowed (a process could leave the worker's process group; the worker
 *      leads its group, so setsid() would fail anyway and proves nothing)
 *   21 an environment variable beyond the helper's fixed PATH, HOME and LC_ALL
 *   22 a nice value below 0, or leave to lower it (RLIMIT_NICE)
 */
#include <errno.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pim_hooks.h"

#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_IS_SET 1
#endif

int pim_model_entry(void *const *args, size_t n_args)
{
	(void)args;
	(void)n_args;
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	if (syscall(SYS_capget, &hdr, d) < 0)
		return 10;
	for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
		if (d[i].permitted || d[i].effective || d[i].inheritable)
			return 10;
	for (int c = 0; c < 64; c++)
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, c, 0, 0) == 1)
			return 11;
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		return 12;
	if (getgroups(0, NULL) != 0)
		return 13;
	if (getuid() != geteuid() || getgid() != getegid())
		return 14;
	if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
		return 15;
	struct rlimit rl;
	if (getrlimit(RLIMIT_CORE, &rl) < 0 || rl.rlim_max != 0)
		return 16;
	if (getrlimit(RLIMIT_AS, &rl) < 0 || rl.rlim_max == RLIM_INFINITY)
		return 17;
	if (getrlimit(RLIMIT_NPROC, &rl) < 0 || rl.rlim_max == RLIM_INFINITY)
		return 18;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 65536)
		return 19;
	if (setpgid(0, 0) == 0 || errno != EPERM)
		return 20;
	errno = 0;
	int nice_now = getpriority(PRIO_PROCESS, 0);
	if ((!errno && nice_now < 0) || getrlimit(RLIMIT_NICE, &rl) < 0 || rl.rlim_max != 0)
		return 22;
	extern char **environ;
	for (char **e = environ; e && *e; e++)
		if (strncmp(*e, "PATH=", 5) && strncmp(*e, "HOME=", 5) && strncmp(*e, "LC_ALL=", 7))
			return 21;

	int32_t uid_region = (int32_t)getuid(), gid_region = 200000 + (int32_t)getgid();
	pim_region_enter(uid_region);
	pim_region_exit(uid_region);
	pim_region_enter(gid_region);
	pim_region_exit(gid_region);
	return 0;
}
