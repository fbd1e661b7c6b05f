/* SPDX-License-Identifier: MIT */
/*
 * worker_child.c: the forked child of a profiling worker: pimd's image, no client code; it arranges
 * the descriptors, opens the counters, switches credentials, drops privileges and executes the
 * helper (the order and why: worker.c).
 */
#include "worker_int.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "pim_hooks.h"
#include "cpulevel.h"

static void reset_signals(void);
static int setup_fds(int pipe_fd, int model_fd, int output_fd, int job_fd, int helper_fd,
		     struct pim_error *err);
static int switch_credentials(uid_t uid, gid_t gid, struct pim_error *err);
static int capget_self(struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3]);
static bool has_setpcap(void);
static void drop_bounding_set(void);
static int drop_privileges(struct pim_error *err);

static void reset_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_DFL;
	for (int sig = 1; sig < _NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			sigaction(sig, &sa, NULL); /* glibc-reserved signals fail: fine */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

/* 0 = /dev/null, 1 and 2 = output, 3 = result pipe, 4 = model library, 5 = the encoded job,
 * 6 = the helper executable (close-on-exec); everything else closed. */
static int setup_fds(int pipe_fd, int model_fd, int output_fd, int job_fd, int helper_fd,
		     struct pim_error *err)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0)
		return err_set(err, -errno, "cannot open /dev/null: %s", strerror(errno));
	/* copies above every target first, so that no dup2 clobbers a source */
	int p = fcntl(pipe_fd, F_DUPFD_CLOEXEC, WORKER_FD_COUNTERS);
	int m = fcntl(model_fd, F_DUPFD_CLOEXEC, WORKER_FD_COUNTERS);
	int o = fcntl(output_fd >= 0 ? output_fd : null, F_DUPFD_CLOEXEC, WORKER_FD_COUNTERS);
	int n = fcntl(null, F_DUPFD_CLOEXEC, WORKER_FD_COUNTERS);
	int j = fcntl(job_fd, F_DUPFD_CLOEXEC, WORKER_FD_COUNTERS);
	int h = fcntl(helper_fd, F_DUPFD_CLOEXEC, WORKER_FD_COUNTERS);
	if (p < 0 || m < 0 || o < 0 || n < 0 || j < 0 || h < 0)
		return err_set(err, -errno, "cannot arrange the worker's file descriptors: %s",
			       strerror(errno));
	/* the helper inherits 0-5; 6 only serves execveat() */
	if (dup2(n, 0) < 0 || dup2(o, 1) < 0 || dup2(o, 2) < 0 || dup2(p, WORKER_FD_PIPE) < 0 ||
	    dup2(m, WORKER_FD_MODEL) < 0 || dup2(j, WORKER_FD_JOB) < 0 ||
	    dup3(h, WORKER_FD_HELPER, O_CLOEXEC) < 0)
		return err_set(err, -errno, "cannot arrange the worker's file descriptors: %s",
			       strerror(errno));
	if (close_range(WORKER_FD_COUNTERS, ~0U, 0) < 0)
		for (int fd = WORKER_FD_COUNTERS; fd < 65536; fd++)
			close(fd);
	return 0;
}

static int switch_credentials(uid_t uid, gid_t gid, struct pim_error *err)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;
	getresuid(&ru, &eu, &su);
	getresgid(&rg, &eg, &sg);
	bool same = ru == uid && eu == uid && su == uid && rg == gid && eg == gid && sg == gid;

	if (same) {
		/* nothing to switch; drop the daemon's supplementary groups when allowed */
		if (setgroups(0, NULL) < 0 && errno != EPERM)
			return err_set(err, -errno, "setgroups(0) failed: %s", strerror(errno));
		return 0;
	}
	const char *what = NULL;
	const char *cap = NULL;
	if (setgroups(0, NULL) < 0)
		what = "setgroups(0)", cap = "CAP_SETGID";
	else if (setresgid(gid, gid, gid) < 0)
		what = "setresgid", cap = "CAP_SETGID";
	else if (setresuid(uid, uid, uid) < 0)
		what = "setresuid", cap = "CAP_SETUID";
	if (what) {
		int e = errno;
		if (e == EPERM)
			return err_set(err, -EPERM, "cannot run the model as uid %u gid %u: %s failed "
						    "with EPERM; pimd (uid %u) lacks %s; refusing "
						    "to run it under any other identity",
				       (unsigned)uid, (unsigned)gid, what, (unsigned)eu, cap);
		return err_set(err, -e, "cannot run the model as uid %u gid %u: %s failed: %s",
			       (unsigned)uid, (unsigned)gid, what, strerror(e));
	}
	getresuid(&ru, &eu, &su);
	getresgid(&rg, &eg, &sg);
	if (ru != uid || eu != uid || su != uid || rg != gid || eg != gid || sg != gid ||
	    getgroups(0, NULL) != 0)
		return err_set(err, -EPERM, "credential switch to uid %u gid %u did not take effect",
			       (unsigned)uid, (unsigned)gid);
	return 0;
}

static int capget_self(struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3])
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	memset(data, 0, sizeof(*data) * _LINUX_CAPABILITY_U32S_3);
	return (int)syscall(SYS_capget, &hdr, data);
}

static bool has_setpcap(void)
{
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	return capget_self(data) == 0 &&
	       (data[CAP_TO_INDEX(CAP_SETPCAP)].effective & CAP_TO_MASK(CAP_SETPCAP));
}

/* Before the credential switch, which takes CAP_SETPCAP away from a root parent: empty the
 * bounding set when permitted (pimd under systemd is not; NO_NEW_PRIVS covers that case). */
static void drop_bounding_set(void)
{
	if (!has_setpcap())
		return;
	for (int c = 0; c < 64; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno == EINVAL)
			break;
}

static int drop_privileges(struct pim_error *err)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return err_set(err, -errno, "prctl(PR_SET_NO_NEW_PRIVS) failed: %s", strerror(errno));
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return err_set(err, -errno, "clearing ambient capabilities failed: %s",
			       strerror(errno));

	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	if (has_setpcap())
		/* a uid-0 job: lock the securebits (NOROOT, NO_SETUID_FIXUP, KEEP_CAPS, ambient
		 * raise, each with its lock), so that not even an execve() regains capabilities */
		prctl(PR_SET_SECUREBITS, 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80, 0, 0, 0);
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	memset(data, 0, sizeof data);
	if (syscall(SYS_capset, &hdr, data) < 0)
		return err_set(err, -errno, "capset(empty) failed: %s", strerror(errno));
	if (capget_self(data) < 0)
		return err_set(err, -errno, "capget failed: %s", strerror(errno));
	for (int i = 0; i < _LINUX_CAPABILITY_U32S_3; i++)
		if (data[i].effective || data[i].permitted || data[i].inheritable)
			return err_set(err, -EPERM, "capabilities remain after capset(empty)");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return err_set(err, -errno, "prctl(PR_SET_DUMPABLE) failed: %s", strerror(errno));
	return 0;
}

/* The forked child: pimd's image, no client code. Arranges the fds, opens the counters,
 * switches credentials, drops privileges and executes the helper. */
_Noreturn void worker_child_main(const struct worker_job *job, int pipe_fd, int job_fd,
				 int helper_fd, const struct cgroup_job *cg, pid_t parent)
{
	struct pim_error err = { 0 };
	static struct out o; /* 16 KiB: not on the stack */
	static struct counters_group groups[WORKER_GROUPS_MAX];

	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != parent)
		_exit(EXIT_PIPE);
	o.fd = pipe_fd;
	/* into the job's cgroup before anything else: whatever the model starts is born there.
	 * The child moves itself rather than being cloned into the cgroup (clone3 with
	 * CLONE_INTO_CGROUP): a raw clone3 skips glibc's fork handlers, and the child of a
	 * multithreaded pimd could then find malloc's locks held; no code of the model runs
	 * before this write either way. */
	int r = cg ? cgroup_job_enter(cg) : 0;
	if (r < 0)
		worker_child_fail(&o, r, -1, "worker setup: cannot enter the job's cgroup: %s",
			   strerror(-r));
	reset_signals();
	setpgid(0, 0);
	/* forked by the event loop, at its nice value: the job runs at pimd's (raising it is
	 * always allowed; the helper keeps the model at 0 or above) */
	if (setpriority(PRIO_PROCESS, 0, job->nice) < 0)
		worker_child_fail(&o, -errno, -1, "worker setup: setpriority(%d) failed: %s", job->nice,
				  strerror(errno));

	if (setup_fds(pipe_fd, job->model_fd, job->output_fd, job_fd, helper_fd, &err) < 0)
		worker_child_fail(&o, err.code, -1, "worker setup: %s", err.msg);
	o.fd = WORKER_FD_PIPE;
	if (chdir("/") < 0)
		worker_child_fail(&o, -errno, -1, "worker setup: chdir(/) failed: %s", strerror(errno));

	/* while CAP_PERFMON is held; then at fixed numbers, inherited by the helper */
	int next = WORKER_FD_COUNTERS;
	for (unsigned g = 0; g < job->n_groups; g++) {
		if (counters_open(&groups[g], 0, -1, job->groups[g].events, job->groups[g].n,
				  &err) < 0)
			worker_child_fail(&o, err.code, -1, "event group %u: %s", g, err.msg);
		for (unsigned i = 0; i < groups[g].n; i++, next++) {
			if (groups[g].fd[i] != next) {
				if (fcntl(groups[g].fd[i], F_DUPFD, next) != next)
					worker_child_fail(&o, -EBADF, -1, "worker setup: event group %u: "
						   "cannot move its descriptors", g);
				close(groups[g].fd[i]);
				groups[g].fd[i] = next;
			} else if (fcntl(next, F_SETFD, 0) < 0) {
				worker_child_fail(&o, -errno, -1, "worker setup: %s", strerror(errno));
			}
		}
	}

	drop_bounding_set();
	if (switch_credentials(job->uid, job->gid, &err) < 0)
		worker_child_fail(&o, err.code, -1, "%s", err.msg);
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0); /* cleared by the credential change */
	if (getppid() != parent)
		_exit(EXIT_PIPE);
	if (drop_privileges(&err) < 0)
		worker_child_fail(&o, err.code, -1, "dropping privileges: %s", err.msg);

	/* A fresh image: the model never sees pimd's memory, nor its environment. */
	char *const argv[] = { (char *)WORKER_HELPER_NAME, NULL };
	char *const envp[] = { (char *)"PATH=/usr/bin:/bin", (char *)"HOME=/",
			       (char *)"LC_ALL=C", NULL };
	syscall(SYS_execveat, WORKER_FD_HELPER, "", argv, envp, AT_EMPTY_PATH);
	worker_child_fail(&o, -errno, -1, "cannot start the worker helper %s as uid %u: execveat "
		   "failed: %s", WORKER_HELPER_NAME, (unsigned)job->uid, strerror(errno));
}
