/* SPDX-License-Identifier: MIT */
/*
 * test_cgroup.c: the cgroup per job (daemon/cgroup.c).  The parsers of /proc/self/cgroup and
 * /proc/self/mountinfo against hand-written files; then, as root on a writable cgroup2 mount,
 * the real thing: the test process takes a scratch cgroup as its delegated subtree, a job's
 * processes escape their session and process group, and the job's end still kills them all and
 * removes the job's directory, with cgroup.kill and with the frozen one-by-one fallback.
 * The same for cgroup v1 (a hybrid or legacy host): the parsers of its /proc/self/cgroup lines
 * and mounts, the owner directory's name and /proc/<pid>/stat's start time, the choice of
 * hierarchies; then, as root where the v1 pids and memory hierarchies are writable, a job's
 * limits, its escaped process killed, and a dead pimd's directories removed at start.
 */
#include <check.h>
#include <inttypes.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cgroup.h"
#include "test_util.h"

START_TEST(test_parse_self)
{
	char path[64];
	ck_assert_int_eq(cgroup_parse_self("12:pids:/user.slice\n1:name=systemd:/x\n"
					   "0::/system.slice/pimd.service\n", path, sizeof path), 0);
	ck_assert_str_eq(path, "/system.slice/pimd.service");
	ck_assert_int_eq(cgroup_parse_self("0::/\n", path, sizeof path), 0);
	ck_assert_str_eq(path, "/");
	/* cgroup v1 only: no "0::" line */
	ck_assert_int_eq(cgroup_parse_self("4:memory:/a\n3:pids:/\n", path, sizeof path), -ENOENT);
	ck_assert_int_eq(cgroup_parse_self("", path, sizeof path), -ENOENT);
	/* not an absolute path, or longer than the buffer */
	ck_assert_int_eq(cgroup_parse_self("0::relative\n", path, sizeof path), -EINVAL);
	ck_assert_int_eq(cgroup_parse_self("0::/a\n", path, 2), -EINVAL);
}
END_TEST

#define MI_V2 "30 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
#define MI_PROC "22 1 0:5 / /proc rw,nosuid - proc proc rw\n"

START_TEST(test_parse_mountinfo)
{
	char dir[256];
	/* a unified host */
	ck_assert_int_eq(cgroup_parse_mountinfo(MI_PROC MI_V2, "/system.slice/pimd.service", dir,
						sizeof dir), 0);
	ck_assert_str_eq(dir, "/sys/fs/cgroup/system.slice/pimd.service");
	ck_assert_int_eq(cgroup_parse_mountinfo(MI_V2, "/", dir, sizeof dir), 0);
	ck_assert_str_eq(dir, "/sys/fs/cgroup");
	/* a hybrid host: cgroup v1 hierarchies, the v2 one at .../unified */
	ck_assert_int_eq(cgroup_parse_mountinfo(
		"33 25 0:28 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n"
		"31 25 0:27 / /sys/fs/cgroup/unified rw,nosuid shared:5 - cgroup2 cgroup2 rw\n",
		"/pimd-test", dir, sizeof dir), 0);
	ck_assert_str_eq(dir, "/sys/fs/cgroup/unified/pimd-test");
	/* a service's own cgroup bound writable over a read-only view: the closest root wins */
	ck_assert_int_eq(cgroup_parse_mountinfo(
		MI_V2 "90 30 0:26 /system.slice/pimd.service /sys/fs/cgroup/system.slice/pimd.service "
		"rw,nosuid - cgroup2 cgroup2 rw\n", "/system.slice/pimd.service/main", dir,
		sizeof dir), 0);
	ck_assert_str_eq(dir, "/sys/fs/cgroup/system.slice/pimd.service/main");
	/* a container's mount shows only its subtree: the path is relative to that root */
	ck_assert_int_eq(cgroup_parse_mountinfo(
		"40 30 0:26 /machine.slice/c1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
		"/machine.slice/c1/system.slice/x.service", dir, sizeof dir), 0);
	ck_assert_str_eq(dir, "/sys/fs/cgroup/system.slice/x.service");
	/* ... and reaches nothing outside it; "/a" is no prefix of "/ab" */
	ck_assert_int_eq(cgroup_parse_mountinfo(
		"40 30 0:26 /machine.slice/c1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
		"/system.slice/x.service", dir, sizeof dir), -ENOENT);
	ck_assert_int_eq(cgroup_parse_mountinfo(
		"40 30 0:26 /a /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "/ab/c", dir, sizeof dir),
		-ENOENT);
	/* octal escapes in the mount point */
	ck_assert_int_eq(cgroup_parse_mountinfo("41 1 0:40 / /mnt/cg\\040v2 rw - cgroup2 none rw\n",
						"/j", dir, sizeof dir), 0);
	ck_assert_str_eq(dir, "/mnt/cg v2/j");
	/* no cgroup2 at all; a directory longer than the buffer */
	ck_assert_int_eq(cgroup_parse_mountinfo(MI_PROC, "/", dir, sizeof dir), -ENOENT);
	ck_assert_int_eq(cgroup_parse_mountinfo(MI_V2, "/system.slice/pimd.service", dir, 16),
			 -ENAMETOOLONG);
}
END_TEST

#define SELF_HYBRID "9:name=systemd:/\n8:pids:/user.slice\n4:memory:/process_api/dd8b\n" \
	"2:cpu,cpuacct:/a\n0::/\n"

START_TEST(test_parse_self_v1)
{
	char path[64];
	ck_assert_int_eq(cgroup_parse_self_v1(SELF_HYBRID, "pids", path, sizeof path), 0);
	ck_assert_str_eq(path, "/user.slice");
	ck_assert_int_eq(cgroup_parse_self_v1(SELF_HYBRID, "memory", path, sizeof path), 0);
	ck_assert_str_eq(path, "/process_api/dd8b");
	/* a hierarchy of two controllers names both */
	ck_assert_int_eq(cgroup_parse_self_v1(SELF_HYBRID, "cpuacct", path, sizeof path), 0);
	ck_assert_str_eq(path, "/a");
	ck_assert_int_eq(cgroup_parse_self_v1(SELF_HYBRID, "cpu", path, sizeof path), 0);
	ck_assert_str_eq(path, "/a");
	/* whole names only; the v2 line "0::/" names no controller */
	ck_assert_int_eq(cgroup_parse_self_v1(SELF_HYBRID, "mem", path, sizeof path), -ENOENT);
	ck_assert_int_eq(cgroup_parse_self_v1(SELF_HYBRID, "freezer", path, sizeof path), -ENOENT);
	ck_assert_int_eq(cgroup_parse_self_v1("0::/system.slice/pimd.service\n", "pids", path,
					      sizeof path), -ENOENT);
	ck_assert_int_eq(cgroup_parse_self_v1("", "pids", path, sizeof path), -ENOENT);
	/* not an absolute path, or longer than the buffer */
	ck_assert_int_eq(cgroup_parse_self_v1("3:pids:x\n", "pids", path, sizeof path), -EINVAL);
	ck_assert_int_eq(cgroup_parse_self_v1("3:pids:/ab\n", "pids", path, 3), -EINVAL);
}
END_TEST

#define MI_HYBRID \
	"31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n" \
	"34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" \
	"38 30 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n" \
	"39 30 0:36 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd\n" \
	"40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"

START_TEST(test_parse_mountinfo_v1)
{
	char dir[256];
	ck_assert_int_eq(cgroup_parse_mountinfo_v1(MI_PROC MI_HYBRID, "pids", "/user.slice", dir,
						   sizeof dir), 0);
	ck_assert_str_eq(dir, "/sys/fs/cgroup/pids/user.slice");
	ck_assert_int_eq(cgroup_parse_mountinfo_v1(MI_HYBRID, "memory", "/", dir, sizeof dir), 0);
	ck_assert_str_eq(dir, "/sys/fs/cgroup/memory");
	ck_assert_int_eq(cgroup_parse_mountinfo_v1(MI_HYBRID, "cpuacct", "/a", dir, sizeof dir), 0);
	ck_assert_str_eq(dir, "/sys/fs/cgroup/cpu,cpuacct/a");
	/* the controller among the super options, not a mount option or the mount point */
	ck_assert_int_eq(cgroup_parse_mountinfo_v1(
		"38 30 0:35 / /sys/fs/cgroup/pids rw,pids - cgroup cgroup rw,memory\n", "pids", "/",
		dir, sizeof dir), -ENOENT);
	/* a cgroup2 mount is no v1 hierarchy, nor is the named systemd one */
	ck_assert_int_eq(cgroup_parse_mountinfo_v1(MI_V2, "pids", "/", dir, sizeof dir), -ENOENT);
	ck_assert_int_eq(cgroup_parse_mountinfo_v1(MI_HYBRID, "freezer", "/", dir, sizeof dir),
			 -ENOENT);
	/* a container's mount of its own subtree */
	ck_assert_int_eq(cgroup_parse_mountinfo_v1(
		"50 30 0:35 /docker/c1 /sys/fs/cgroup/pids ro - cgroup cgroup rw,pids\n", "pids",
		"/docker/c1/x", dir, sizeof dir), 0);
	ck_assert_str_eq(dir, "/sys/fs/cgroup/pids/x");
	ck_assert_int_eq(cgroup_parse_mountinfo_v1(
		"50 30 0:35 /docker/c1 /sys/fs/cgroup/pids ro - cgroup cgroup rw,pids\n", "pids",
		"/docker/c2", dir, sizeof dir), -ENOENT);
	ck_assert_int_eq(cgroup_parse_mountinfo_v1(MI_HYBRID, "pids", "/user.slice", dir, 16),
			 -ENAMETOOLONG);
}
END_TEST

START_TEST(test_parse_starttime)
{
	uint64_t st = 0;
	/* 22 fields; the command name may hold ") " and digits */
	ck_assert_int_eq(cgroup_parse_starttime(
		"4242 (a) 1 2 b) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 3066677 "
		"1000 200 18446744073709551615\n", &st), 0);
	ck_assert_uint_eq(st, 3066677);
	ck_assert_int_eq(cgroup_parse_starttime("1 (init) S 0 1 1 0 -1 4194560 1 2 0 0 0 0 0 0 "
						"20 0 1 0 9\n", &st), 0);
	ck_assert_uint_eq(st, 9);
	/* cut short, no command name, not a number */
	ck_assert_int_eq(cgroup_parse_starttime("1 (init) S 0 1 1 0 -1 4194560 1 2 0 0 0 0 0 0 "
						"20 0 1 0\n", &st), -EINVAL);
	ck_assert_int_eq(cgroup_parse_starttime("1 S 0 1", &st), -EINVAL);
	ck_assert_int_eq(cgroup_parse_starttime("1 (init) S 0 1 1 0 -1 4194560 1 2 0 0 0 0 0 0 "
						"20 0 1 0 x9 5\n", &st), -EINVAL);
}
END_TEST

START_TEST(test_parse_owner)
{
	pid_t pid = 0;
	uint64_t st = 0;
	ck_assert_int_eq(cgroup_parse_owner("pimd-29035-3066677", &pid, &st), 0);
	ck_assert_int_eq(pid, 29035);
	ck_assert_uint_eq(st, 3066677);
	ck_assert_int_eq(cgroup_parse_owner("pimd-1-0", &pid, &st), 0);
	ck_assert_int_eq(pid, 1);
	ck_assert_uint_eq(st, 0);
	/* anything else is not a pimd's directory and is left alone */
	static const char *const not_ours[] = {
		"job-3", "pimd-", "pimd-12", "pimd-12-", "pimd-12-3x", "pimd-0-1", "pimd--1-2",
		"pimd-012-3", "pimd-12--3", "pimd-4294967296-1", "pimd-test-1", "process_api",
	};
	for (size_t i = 0; i < sizeof not_ours / sizeof not_ours[0]; i++)
		ck_assert_msg(cgroup_parse_owner(not_ours[i], &pid, &st) == -EINVAL, "%s",
			      not_ours[i]);
}
END_TEST

START_TEST(test_v1_choose)
{
	const unsigned P = CGROUP_PIDS, M = CGROUP_MEMORY, F = CGROUP_FREEZER;
	/* no cgroup v2: pids and memory, and the freezer to hold the job while it is killed */
	ck_assert_uint_eq(cgroup_v1_choose(false, 0, P | M | F), P | M | F);
	ck_assert_uint_eq(cgroup_v1_choose(false, 0, P | M), P | M);
	ck_assert_uint_eq(cgroup_v1_choose(false, 0, M | F), M | F);
	/* the freezer alone limits nothing */
	ck_assert_uint_eq(cgroup_v1_choose(false, 0, F), 0);
	ck_assert_uint_eq(cgroup_v1_choose(false, 0, 0), 0);
	/* beside cgroup v2 (which has cgroup.kill): what it does not give, and no freezer */
	ck_assert_uint_eq(cgroup_v1_choose(true, 0, P | M | F), P | M);
	ck_assert_uint_eq(cgroup_v1_choose(true, P, P | M | F), M);
	ck_assert_uint_eq(cgroup_v1_choose(true, M, P | F), P);
	ck_assert_uint_eq(cgroup_v1_choose(true, P | M, P | M | F), 0);
}
END_TEST

/* ------------------------------------------------------------------ on a real cgroup2 mount */

static char mount_dir[CGROUP_PATH_MAX];  /* the cgroup2 mount's root directory */
static char home_dir[CGROUP_PATH_MAX];   /* where the test process was */
static char scratch[CGROUP_PATH_MAX];

static bool read_text(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	size_t have = 0;
	ssize_t n;
	while (have + 1 < len && (n = read(fd, buf + have, len - 1 - have)) > 0)
		have += (size_t)n;
	close(fd);
	buf[have] = 0;
	return true;
}

static bool write_text(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool ok = write(fd, s, strlen(s)) == (ssize_t)strlen(s);
	close(fd);
	return ok;
}

/* Whether a cgroup can be made in dir (and it is removed again). */
static bool can_mkdir_in(const char *dir)
{
	char probe[CGROUP_PATH_MAX + 64];
	snprintf(probe, sizeof probe, "%s/pimd-unit-probe-%d", dir, (int)getpid());
	if (mkdir(probe, 0755) < 0)
		return false;
	rmdir(probe);
	return true;
}

/* Root, a cgroup2 mount that shows its whole tree, and the test process's place in it. */
static bool live_possible(void)
{
	static char mi[1 << 20], self[4096];
	char path[CGROUP_PATH_MAX];
	if (geteuid() != 0 || !read_text("/proc/self/mountinfo", mi, sizeof mi) ||
	    !read_text("/proc/self/cgroup", self, sizeof self) ||
	    cgroup_parse_mountinfo(mi, "/", mount_dir, sizeof mount_dir) < 0 ||
	    cgroup_parse_self(self, path, sizeof path) < 0 ||
	    cgroup_parse_mountinfo(mi, path, home_dir, sizeof home_dir) < 0)
		return false;
	return can_mkdir_in(mount_dir);
}

/* A scratch cgroup for the test process (one per case: check forks), and the move into it. */
static void scratch_make(void)
{
	snprintf(scratch, sizeof scratch, "%s/pimd-unit-%d", mount_dir, (int)getpid());
	ck_assert_msg(mkdir(scratch, 0755) == 0, "mkdir %s: %s", scratch, strerror(errno));
}

static void scratch_enter(void)
{
	char procs[CGROUP_PATH_MAX + 32];
	snprintf(procs, sizeof procs, "%s/cgroup.procs", scratch);
	ck_assert(write_text(procs, "0"));
}

/* The scratch cgroup as the test process's delegated subtree. */
static struct cgroup_tree *scratch_tree(void)
{
	scratch_make();
	scratch_enter();
	struct cgroup_tree *t;
	struct pim_error err = { 0 };
	int r = cgroup_tree_open_dir(scratch, false, &t, &err);
	ck_assert_msg(r == 0, "%s", err.msg);
	return t;
}

static void scratch_remove(void)
{
	char p[CGROUP_PATH_MAX + 32];
	snprintf(p, sizeof p, "%s/cgroup.procs", home_dir);
	write_text(p, "0");
	snprintf(p, sizeof p, "%s/main", scratch);
	rmdir(p);
	ck_assert_msg(rmdir(scratch) == 0, "rmdir %s: %s", scratch, strerror(errno));
}

static bool alive(pid_t pid)
{
	char p[64], st[512];
	snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
	if (!read_text(p, st, sizeof st))
		return false;
	const char *s = strrchr(st, ')');
	return s && s[1] == ' ' && s[2] != 'Z' && s[2] != 'X';
}

/* Starts in job j a child that leaves its session and process group and forks a grandchild
 * that outlives it; returns the grandchild's pid (the child has exited). */
static pid_t start_escapee(struct cgroup_job *j)
{
	int fds[2];
	ck_assert(pipe(fds) == 0);
	pid_t child = fork();
	ck_assert(child >= 0);
	if (child == 0) {
		if (cgroup_job_enter(j) < 0)
			_exit(1);
		setsid();
		pid_t gc = fork();
		if (gc == 0) {
			for (;;)
				pause();
		}
		_exit(write(fds[1], &gc, sizeof gc) == sizeof gc ? 0 : 1);
	}
	pid_t gc = 0;
	ck_assert(read(fds[0], &gc, sizeof gc) == sizeof gc);
	int st;
	ck_assert(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(fds[0]);
	close(fds[1]);
	ck_assert(alive(gc));
	return gc;
}

static bool gone_within(pid_t pid, int ms)
{
	for (int i = 0; i < ms && alive(pid); i++)
		usleep(1000);
	return !alive(pid);
}

static void end_of_job(struct cgroup_tree *t, struct cgroup_job *j, pid_t escapee, bool each)
{
	char dir[CGROUP_PATH_MAX + 32];
	snprintf(dir, sizeof dir, "%s/%s", scratch, cgroup_job_name(j));
	ck_assert_int_eq(cgroup_job_populated(j), 1);
	ck_assert_int_eq(each ? cgroup_job_kill_each(j) : cgroup_job_kill(j), 0);
	bool gone = gone_within(escapee, 2000);
	if (!gone)
		kill(escapee, SIGKILL); /* no process left to hold the test's output open */
	ck_assert_msg(gone, "pid %d outlived the kill", (int)escapee);
	ck_assert_int_eq(cgroup_job_populated(j), 0);
	cgroup_job_end(j);
	for (int i = 0; i < 2000 && cgroup_tree_sweep(t) > 0; i++)
		usleep(1000);
	ck_assert_msg(access(dir, F_OK) < 0 && errno == ENOENT, "%s is left", dir);
}

START_TEST(test_job_escapee_killed)
{
	struct cgroup_tree *t = scratch_tree();
	char main_procs[CGROUP_PATH_MAX + 32], buf[64];
	snprintf(main_procs, sizeof main_procs, "%s/main/cgroup.procs", scratch);
	ck_assert(read_text(main_procs, buf, sizeof buf));
	ck_assert_int_eq(atoi(buf), getpid()); /* the caller moved into D/main */

	struct cgroup_limits lim = { .pids_max = 16, .memory_max = 64 << 20 };
	struct cgroup_job *j;
	struct pim_error err = { 0 };
	int r = cgroup_job_new(t, 7, &lim, &j, &err);
	ck_assert_msg(r == 0, "%s", err.msg);
	ck_assert_str_eq(cgroup_job_name(j), "job-7");
	if (cgroup_tree_controllers(t) & CGROUP_PIDS) {
		char p[CGROUP_PATH_MAX + 32];
		snprintf(p, sizeof p, "%s/job-7/pids.max", scratch);
		ck_assert(read_text(p, buf, sizeof buf));
		ck_assert_str_eq(buf, "16\n");
	}
	pid_t escapee = start_escapee(j);
	ck_assert_int_ne(getsid(escapee), getsid(0)); /* out of our session: kill(-pgid) misses it */
	end_of_job(t, j, escapee, false);
	ck_assert_uint_eq(cgroup_tree_free(t, 1000), 0);
	scratch_remove();
}
END_TEST

START_TEST(test_job_killed_one_by_one)
{
	struct cgroup_tree *t = scratch_tree();
	struct cgroup_limits lim = { 0 };
	struct cgroup_job *j;
	struct pim_error err = { 0 };
	ck_assert_int_eq(cgroup_job_new(t, 8, &lim, &j, &err), 0);
	pid_t a = start_escapee(j), b = start_escapee(j);
	end_of_job(t, j, a, true);
	ck_assert(!alive(b));
	ck_assert_uint_eq(cgroup_tree_free(t, 1000), 0);
	scratch_remove();
}
END_TEST

/* A child that moves itself into the cgroup of procs (its cgroup.procs) and waits there. */
static pid_t start_sleeper(const char *procs)
{
	pid_t sleeper = fork();
	if (sleeper == 0) {
		if (!write_text(procs, "0"))
			_exit(1);
		for (;;)
			pause();
	}
	for (int i = 0; i < 1000; i++) {
		char buf[64] = "";
		if (read_text(procs, buf, sizeof buf) && atoi(buf) == sleeper)
			break;
		usleep(1000);
	}
	return sleeper;
}

/* Whether the sleeper died of SIGKILL within 2 s (else it is killed now, and reaped). */
static bool sleeper_killed(pid_t sleeper)
{
	int st = 0;
	pid_t w = 0;
	for (int i = 0; i < 2000 && (w = waitpid(sleeper, &st, WNOHANG)) == 0; i++)
		usleep(1000);
	if (w == 0) {
		kill(sleeper, SIGKILL);
		waitpid(sleeper, NULL, 0);
	}
	return w == sleeper && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
}

START_TEST(test_stale_job_removed_at_open)
{
	/* a job directory with a process, as a pimd that crashed leaves it */
	scratch_make();
	char p[CGROUP_PATH_MAX + 64];
	snprintf(p, sizeof p, "%s/job-3", scratch);
	ck_assert(mkdir(p, 0755) == 0);
	snprintf(p, sizeof p, "%s/job-3/cgroup.procs", scratch);
	pid_t sleeper = start_sleeper(p);
	scratch_enter();
	struct cgroup_tree *t;
	struct pim_error err = { 0 };
	ck_assert_int_eq(cgroup_tree_open_dir(scratch, false, &t, &err), 0);
	ck_assert_msg(sleeper_killed(sleeper), "the process in the stale job was not killed");
	for (int i = 0; i < 2000 && cgroup_tree_sweep(t) > 0; i++)
		usleep(1000);
	snprintf(p, sizeof p, "%s/job-3", scratch);
	ck_assert(access(p, F_OK) < 0);
	ck_assert_uint_eq(cgroup_tree_free(t, 1000), 0);
	scratch_remove();
}
END_TEST

START_TEST(test_not_delegated_refused)
{
	/* root's own directory without trusted.delegate is nobody's delegation */
	scratch_make();
	scratch_enter();
	char p[CGROUP_PATH_MAX + 32];
	struct cgroup_tree *t = NULL;
	struct pim_error err = { 0 };
	ck_assert_int_eq(cgroup_tree_open_dir(scratch, true, &t, &err), -EPERM);
	ck_assert_ptr_null(t);
	ck_assert_msg(strstr(err.msg, "not delegated to pimd"), "%s", err.msg);
	snprintf(p, sizeof p, "%s/main", scratch);
	ck_assert(access(p, F_OK) < 0); /* nothing was changed */
	scratch_remove();
}
END_TEST

/* ------------------------------------------------------------------ on cgroup v1 hierarchies */

static char v1_pids[CGROUP_PATH_MAX], v1_memory[CGROUP_PATH_MAX]; /* the test process's cgroups */

static bool v1_dir(const char *self, const char *mi, const char *controller, char *dir)
{
	char path[CGROUP_PATH_MAX];
	return cgroup_parse_self_v1(self, controller, path, sizeof path) == 0 &&
	       cgroup_parse_mountinfo_v1(mi, controller, path, dir, CGROUP_PATH_MAX) == 0 &&
	       can_mkdir_in(dir);
}

/* Root, writable v1 pids and memory hierarchies, and no cgroup v2 that job_cgroups = auto
 * would take (the test process in the root cgroup, or in none). */
static bool live_v1_possible(void)
{
	static char mi[1 << 20], self[4096];
	char path[CGROUP_PATH_MAX];
	if (geteuid() != 0 || !read_text("/proc/self/mountinfo", mi, sizeof mi) ||
	    !read_text("/proc/self/cgroup", self, sizeof self))
		return false;
	if (cgroup_parse_self(self, path, sizeof path) == 0 && strcmp(path, "/") != 0)
		return false;
	return v1_dir(self, mi, "pids", v1_pids) && v1_dir(self, mi, "memory", v1_memory);
}

/* dir/<the owner directory of this process>/rest */
static void v1_path(char *out, size_t len, const char *dir, const char *rest)
{
	char stat[1024];
	uint64_t start = 0;
	ck_assert(read_text("/proc/self/stat", stat, sizeof stat));
	ck_assert_int_eq(cgroup_parse_starttime(stat, &start), 0);
	snprintf(out, len, "%s/pimd-%d-%" PRIu64 "%s", dir, (int)getpid(), start, rest);
}

static struct cgroup_tree *v1_tree(void)
{
	struct cgroup_tree *t = NULL;
	struct pim_error err = { 0 };
	char why[512];
	ck_assert_int_eq(cgroup_tree_open(CGROUP_MODE_AUTO, &t, why, sizeof why, &err), 0);
	ck_assert_msg(t, "no cgroup: %s", why);
	ck_assert_uint_eq(cgroup_tree_controllers(t), CGROUP_PIDS | CGROUP_MEMORY);
	ck_assert(cgroup_tree_v1_controllers(t) & CGROUP_PIDS);
	ck_assert(cgroup_tree_v1_controllers(t) & CGROUP_MEMORY);
	return t;
}

START_TEST(test_v1_job_limits_and_kill)
{
	struct cgroup_tree *t = v1_tree();
	char desc[1024], p[CGROUP_PATH_MAX + 128], buf[64];
	cgroup_tree_describe(t, desc, sizeof desc);
	ck_assert_msg(strncmp(desc, "cgroup v1 pids+memory per job under pids:", 41) == 0, "%s", desc);
	ck_assert_msg(strstr(desc, "a process group per job; no cgroup v2: "), "%s", desc);

	struct cgroup_limits lim = { .pids_max = 16, .memory_max = 64 << 20 };
	struct cgroup_job *j;
	struct pim_error err = { 0 };
	int r = cgroup_job_new(t, 7, &lim, &j, &err);
	ck_assert_msg(r == 0, "%s", err.msg);
	v1_path(p, sizeof p, v1_pids, "/job-7/pids.max");
	ck_assert(read_text(p, buf, sizeof buf));
	ck_assert_str_eq(buf, "16\n");
	v1_path(p, sizeof p, v1_memory, "/job-7/memory.limit_in_bytes");
	ck_assert(read_text(p, buf, sizeof buf));
	ck_assert_str_eq(buf, "67108864\n");
	v1_path(p, sizeof p, v1_memory, "/job-7/memory.memsw.limit_in_bytes");
	if (read_text(p, buf, sizeof buf)) /* with swap accounting only */
		ck_assert_str_eq(buf, "67108864\n");
	v1_path(p, sizeof p, v1_memory, "/job-7/memory.oom_control");
	ck_assert(read_text(p, buf, sizeof buf));
	ck_assert_msg(strncmp(buf, "oom_kill_disable 0\n", 19) == 0, "%s", buf);

	ck_assert_int_eq(cgroup_job_populated(j), 0);
	pid_t escapee = start_escapee(j);
	ck_assert_int_ne(getsid(escapee), getsid(0));
	ck_assert_int_eq(cgroup_job_populated(j), 1);
	ck_assert_int_eq(cgroup_job_kill(j), 0);
	bool gone = gone_within(escapee, 2000);
	if (!gone)
		kill(escapee, SIGKILL);
	ck_assert_msg(gone, "pid %d outlived the kill", (int)escapee);
	cgroup_job_end(j);
	for (int i = 0; i < 2000 && cgroup_tree_sweep(t) > 0; i++)
		usleep(1000);
	v1_path(p, sizeof p, v1_pids, "/job-7");
	ck_assert_msg(access(p, F_OK) < 0, "%s is left", p);
	v1_path(p, sizeof p, v1_memory, "/job-7");
	ck_assert_msg(access(p, F_OK) < 0, "%s is left", p);
	ck_assert_uint_eq(cgroup_tree_free(t, 1000), 0);
	v1_path(p, sizeof p, v1_pids, "");
	ck_assert_msg(access(p, F_OK) < 0, "%s is left", p); /* the owner directory too */
}
END_TEST

START_TEST(test_v1_stale_owner_removed)
{
	/* the owner directory of a pimd that died (the pid of a child that exited, start time
	 * 1), with a job and its process in it; and one of a process that runs (pid 1 with its
	 * start time), left alone */
	pid_t dead = fork();
	if (dead == 0)
		_exit(0);
	ck_assert(waitpid(dead, NULL, 0) == dead);
	char stale[CGROUP_PATH_MAX + 64], job[CGROUP_PATH_MAX + 96], live[CGROUP_PATH_MAX + 64];
	char stat[1024];
	uint64_t init_start;
	snprintf(stale, sizeof stale, "%s/pimd-%d-1", v1_pids, (int)dead);
	snprintf(job, sizeof job, "%s/job-3", stale);
	ck_assert(mkdir(stale, 0755) == 0 && mkdir(job, 0755) == 0);
	ck_assert(read_text("/proc/1/stat", stat, sizeof stat));
	ck_assert_int_eq(cgroup_parse_starttime(stat, &init_start), 0);
	snprintf(live, sizeof live, "%s/pimd-1-%" PRIu64, v1_pids, init_start);
	ck_assert(mkdir(live, 0755) == 0);
	snprintf(job, sizeof job, "%s/job-3/cgroup.procs", stale);
	pid_t sleeper = start_sleeper(job);
	struct cgroup_tree *t = v1_tree();
	bool killed = sleeper_killed(sleeper);
	bool live_kept = access(live, F_OK) == 0;
	rmdir(live);
	ck_assert_msg(killed, "the process in the stale job was not killed");
	ck_assert_msg(access(stale, F_OK) < 0, "%s is left", stale);
	ck_assert_msg(live_kept, "the directory of a pimd that runs was removed");
	ck_assert_uint_eq(cgroup_tree_free(t, 1000), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("cgroup");
	TCase *tc = test_case(s, "parse");
	tcase_add_test(tc, test_parse_self);
	tcase_add_test(tc, test_parse_mountinfo);
	tcase_add_test(tc, test_parse_self_v1);
	tcase_add_test(tc, test_parse_mountinfo_v1);
	tcase_add_test(tc, test_parse_starttime);
	tcase_add_test(tc, test_parse_owner);
	tcase_add_test(tc, test_v1_choose);
	tc = test_case(s, "live");
	bool live = live_possible();
	const char *why = "needs root and a cgroup2 mount where a cgroup can be created";
	test_add_if(tc, test_job_escapee_killed, live, why);
	test_add_if(tc, test_job_killed_one_by_one, live, why);
	test_add_if(tc, test_stale_job_removed_at_open, live, why);
	test_add_if(tc, test_not_delegated_refused, live, why);
	bool live_v1 = live_v1_possible();
	const char *why_v1 = "needs root, writable cgroup v1 pids and memory hierarchies, and no "
			     "cgroup v2 of the test's own";
	test_add_if(tc, test_v1_job_limits_and_kill, live_v1, why_v1);
	test_add_if(tc, test_v1_stale_owner_removed, live_v1, why_v1);
	return s;
}

int main(void)
{
	return test_run_suite(suite());
}
