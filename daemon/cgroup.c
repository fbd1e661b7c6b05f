/* SPDX-License-Identifier: MIT */
/*
 * cgroup.c: a cgroup v2 per profiling job in pimd's delegated subtree (cgroup.h).  The kernel's
 * rules followed here (Documentation/admin-guide/cgroup-v2.rst): a process moves by writing its
 * pid to the destination's cgroup.procs, which needs write access to the cgroup.procs of the
 * common ancestor; controllers are enabled for children in cgroup.subtree_control, only in a
 * cgroup without processes of its own; cgroup.kill (Linux 5.14) kills every process of a
 * cgroup, forks racing with it included; a cgroup is removed with rmdir once it is empty.
 */
#include "cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>

#define MAIN_NAME "main"
#define JOB_PREFIX "job-"
#define OWNER_PREFIX "pimd-"
#define NAME_MAX_LEN 32
#define KILL_ROUNDS 200           /* cgroup.procs re-read at most this often by the fallback */
#define PROCFILE_MAX (4u << 20)   /* /proc/self/mountinfo can be long on container hosts */

/* The cgroup v1 hierarchies a job may be put in (a hybrid or legacy host), in this order. */
enum { V1_PIDS, V1_MEMORY, V1_FREEZER, V1_N };
static const char *const v1_controller[V1_N] = { "pids", "memory", "freezer" };
static const unsigned v1_bit[V1_N] = { CGROUP_PIDS, CGROUP_MEMORY, CGROUP_FREEZER };

struct v1_hierarchy {
	int parent_fd;              /* pimd's own cgroup in it; -1: hierarchy not used */
	int dirfd;                  /* parent/pimd-<pid>-<start>: where pimd's jobs go */
	char path[CGROUP_PATH_MAX]; /* pimd's cgroup as /proc/self/cgroup says */
};

struct cgroup_tree {
	int dirfd;                  /* D in cgroup v2; -1: none (cgroup v1 only) */
	char dir[CGROUP_PATH_MAX];
	char path[CGROUP_PATH_MAX];
	unsigned controllers;       /* of D */
	bool has_kill;
	struct v1_hierarchy v1[V1_N];
	unsigned v1_controllers;
	char owner[NAME_MAX_LEN];   /* pimd-<pid>-<start> */
	char no_v2[512];            /* why cgroup v2 is not used (dirfd -1) */
	char pending[CGROUP_PENDING_MAX][NAME_MAX_LEN];
	unsigned n_pending;
};

struct cgroup_job {
	struct cgroup_tree *tree;
	int dirfd;                  /* in cgroup v2; -1: none */
	int procs_fd;
	int v1_dirfd[V1_N];         /* -1 where the hierarchy is not used */
	int v1_procs_fd[V1_N];
	char name[NAME_MAX_LEN];
};

/* closep, and the descriptor marked closed: a tree's and a job's descriptors say by -1 which
 * hierarchies are in use. */
static void fd_close(int *fd)
{
	closep(fd);
	*fd = -1;
}

/* ------------------------------------------------------------------ parsing */

/* The path that ends a /proc/self/cgroup line (p, up to the newline) into path. */
static int take_path(const char *p, char *path, size_t len)
{
	size_t n = strcspn(p, "\n");
	if (n == 0 || p[0] != '/' || n >= len)
		return -EINVAL;
	memcpy(path, p, n);
	path[n] = 0;
	return 0;
}

int cgroup_parse_self(const char *text, char *path, size_t len)
{
	for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
		if (strncmp(line, "0::", 3) == 0)
			return take_path(line + 3, path, len);
	return -ENOENT;
}

/* Copies the next space-separated field of a mountinfo line, decoding \ooo escapes. */
static const char *mi_field(const char *p, char *out, size_t len)
{
	size_t n = 0;
	while (*p == ' ')
		p++;
	while (*p && *p != ' ' && *p != '\n') {
		char c = *p++;
		if (c == '\\' && p[0] >= '0' && p[0] <= '3' && p[1] >= '0' && p[1] <= '7' &&
		    p[2] >= '0' && p[2] <= '7') {
			c = (char)((p[0] - '0') * 64 + (p[1] - '0') * 8 + (p[2] - '0'));
			p += 3;
		}
		if (n + 1 < len)
			out[n++] = c;
	}
	out[n] = 0;
	return p;
}

/* Whether root is a path prefix of path ("/" of everything, "/a" of "/a" and "/a/b"). */
static bool path_under(const char *path, const char *root)
{
	size_t n = strlen(root);
	if (strcmp(root, "/") == 0)
		return true;
	return strncmp(path, root, n) == 0 && (path[n] == 0 || path[n] == '/');
}

/* Whether a comma-separated list ("rw,pids", "cpu,cpuacct") names word. */
static bool comma_list_has(const char *list, size_t n, const char *word)
{
	size_t wl = strlen(word);
	for (const char *p = list, *end = list + n; p < end;) {
		const char *c = memchr(p, ',', (size_t)(end - p));
		size_t fl = c ? (size_t)(c - p) : (size_t)(end - p);
		if (fl == wl && memcmp(p, word, wl) == 0)
			return true;
		if (!c)
			break;
		p = c + 1;
	}
	return false;
}

int cgroup_parse_self_v1(const char *text, const char *controller, char *path, size_t len)
{
	for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		/* hierarchy-id:controller-list:path */
		const char *c1 = strchr(line, ':');
		const char *eol = line + strcspn(line, "\n");
		const char *c2 = c1 && c1 < eol ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1)) : NULL;
		if (c2 && comma_list_has(c1 + 1, (size_t)(c2 - c1 - 1), controller))
			return take_path(c2 + 1, path, len);
	}
	return -ENOENT;
}

/* The directory of path in the mount of type fstype (with controller among its super options
 * for "cgroup") whose root is the longest prefix of path. */
static int parse_mountinfo(const char *text, const char *fstype, const char *controller,
			   const char *path, char *dir, size_t len)
{
	char root[CGROUP_PATH_MAX], mnt[CGROUP_PATH_MAX], field[CGROUP_PATH_MAX];
	size_t best = 0;
	bool found = false;

	for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		/* id parent major:minor root mount-point options [optional...] - fstype source ... */
		const char *p = line;
		for (int i = 0; i < 3; i++)
			p = mi_field(p, field, sizeof field);
		p = mi_field(p, root, sizeof root);
		p = mi_field(p, mnt, sizeof mnt);
		const char *eol = strchr(p, '\n');
		const char *sep = strstr(p, " - ");
		if (!sep || (eol && sep > eol))
			continue;
		const char *q = mi_field(sep + 3, field, sizeof field);
		if (strcmp(field, fstype) != 0 || root[0] != '/' || mnt[0] != '/' ||
		    !path_under(path, root))
			continue;
		if (controller) { /* fstype source super-options */
			char opts[512];
			q = mi_field(q, opts, sizeof opts);
			mi_field(q, opts, sizeof opts);
			if (!comma_list_has(opts, strlen(opts), controller))
				continue;
		}
		size_t rl = strcmp(root, "/") == 0 ? 0 : strlen(root);
		if (found && rl < best)
			continue;
		const char *rest = strcmp(path + rl, "/") == 0 ? "" : path + rl;
		int n = snprintf(dir, len, "%s%s", strcmp(mnt, "/") == 0 && rest[0] ? "" : mnt, rest);
		if (n < 0 || (size_t)n >= len)
			return -ENAMETOOLONG;
		best = rl;
		found = true;
	}
	return found ? 0 : -ENOENT;
}

int cgroup_parse_mountinfo(const char *text, const char *path, char *dir, size_t len)
{
	return parse_mountinfo(text, "cgroup2", NULL, path, dir, len);
}

int cgroup_parse_mountinfo_v1(const char *text, const char *controller, const char *path,
			      char *dir, size_t len)
{
	return parse_mountinfo(text, "cgroup", controller, path, dir, len);
}

int cgroup_parse_starttime(const char *stat, uint64_t *start)
{
	/* pid (comm) state ppid ...: comm may hold spaces and parentheses, the last ')' ends it;
	 * starttime is field 22, the 20th after it */
	const char *p = strrchr(stat, ')');
	if (!p)
		return -EINVAL;
	p++;
	for (int field = 3; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return -EINVAL;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(p + 1, &end, 10);
	if (end == p + 1 || errno || (*end && *end != ' ' && *end != '\n'))
		return -EINVAL;
	*start = v;
	return 0;
}

int cgroup_parse_owner(const char *name, pid_t *pid, uint64_t *start)
{
	size_t pl = strlen(OWNER_PREFIX);
	if (strncmp(name, OWNER_PREFIX, pl) != 0 || name[pl] < '1' || name[pl] > '9')
		return -EINVAL;
	char *end;
	errno = 0;
	unsigned long p = strtoul(name + pl, &end, 10);
	if (errno || *end != '-' || p > INT32_MAX || end[1] < '0' || end[1] > '9')
		return -EINVAL;
	const char *s = end + 1;
	unsigned long long st = strtoull(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*pid = (pid_t)p;
	*start = st;
	return 0;
}

unsigned cgroup_v1_choose(bool v2_used, unsigned v2_controllers, unsigned v1_available)
{
	unsigned want = v1_available & (CGROUP_PIDS | CGROUP_MEMORY);
	if (v2_used)
		want &= ~v2_controllers;
	/* without cgroup.kill nothing else holds the job still while it is killed */
	if (want && !v2_used && (v1_available & CGROUP_FREEZER))
		want |= CGROUP_FREEZER;
	return want;
}

/* ------------------------------------------------------------------ files of a cgroup */

static int write_at(int dirfd, const char *file, const char *s)
{
	int fd = openat(dirfd, file, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, s, strlen(s));
	int r = n < 0 ? -errno : (size_t)n == strlen(s) ? 0 : -EIO;
	close(fd);
	return r;
}

/* Reads a small file of a cgroup into buf (NUL-terminated); its length or a negative errno. */
static ssize_t read_at(int dirfd, const char *file, char *buf, size_t len)
{
	int fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t have = 0;
	for (;;) {
		ssize_t n = read(fd, buf + have, len - 1 - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		if (n == 0 || (have += (size_t)n) == len - 1)
			break;
	}
	close(fd);
	buf[have] = 0;
	return (ssize_t)have;
}

/* The number after "key " in a flat-keyed file (cgroup.events, pids.events); 0 when absent. */
static uint64_t keyed_value(int dirfd, const char *file, const char *key)
{
	char buf[1024];
	if (read_at(dirfd, file, buf, sizeof buf) < 0)
		return 0;
	size_t kl = strlen(key);
	for (const char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
		if (strncmp(line, key, kl) == 0 && line[kl] == ' ')
			return strtoull(line + kl + 1, NULL, 10);
	return 0;
}

/* Whether a space-separated list (cgroup.controllers) names word. */
static bool list_has(const char *list, const char *word)
{
	size_t wl = strlen(word);
	for (const char *p = list; (p = strstr(p, word)); p += wl)
		if ((p == list || p[-1] == ' ') && (p[wl] == 0 || p[wl] == ' ' || p[wl] == '\n'))
			return true;
	return false;
}

/* Every pid of cgroup.procs of dirfd gets sig; the number signalled, or a negative errno. */
static int signal_procs(int dirfd, int sig)
{
	int fd = openat(dirfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	FILE *f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	int n = 0;
	long pid;
	while (fscanf(f, "%ld", &pid) == 1)
		if (pid > 0 && kill((pid_t)pid, sig) == 0)
			n++;
	fclose(f);
	return n;
}

/* A /proc file, whose size stat() does not tell: read to the end (at most PROCFILE_MAX). */
static int read_proc(const char *path, char **out)
{
	_cleanup_(closep) int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t cap = 16384, have = 0;
	_cleanup_(freep) char *buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (have + 1 == cap) {
			if (cap >= PROCFILE_MAX)
				return -EFBIG;
			char *nb = realloc(buf, cap *= 2);
			if (!nb)
				return -ENOMEM;
			buf = nb;
		}
		ssize_t n = read(fd, buf + have, cap - 1 - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		have += (size_t)n;
	}
	buf[have] = 0;
	*out = TAKE_PTR(buf);
	return 0;
}

/* The entries of the directory dirfd (which stays open); NULL when it cannot be read. */
static DIR *dir_at(int dirfd)
{
	int fd = dirfd >= 0 ? openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d)
		fd_close(&fd);
	return d;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int kill_each_at(int dirfd)
{
	/* frozen, nothing in it can fork while its pids are read; SIGKILL still ends a frozen
	 * process */
	int fr = write_at(dirfd, "cgroup.freeze", "1");
	int r = 0;
	for (int round = 0; round < KILL_ROUNDS; round++) {
		r = signal_procs(dirfd, SIGKILL);
		if (r <= 0)
			break;
		sleep_ms(1);
	}
	if (fr == 0)
		write_at(dirfd, "cgroup.freeze", "0");
	return r < 0 ? r : 0;
}

static int kill_at(int dirfd, bool has_kill)
{
	if (has_kill) {
		int r = write_at(dirfd, "cgroup.kill", "1");
		if (r != -ENOENT)
			return r;
	}
	return kill_each_at(dirfd);
}

/* ------------------------------------------------------------------ cgroup v1 */

/* cgroup v1 (Documentation/admin-guide/cgroup-v1/): no cgroup.kill, and a frozen task
 * (freezer.state FROZEN) keeps a SIGKILL pending until it is thawed.  So: frozen, every
 * process listed signalled, thawed (they die, and a task with SIGKILL pending cannot fork),
 * then signalled again until cgroup.procs lists nobody in any hierarchy. */
static void v1_freeze(int fd, const char *state)
{
	if (write_at(fd, "freezer.state", state) < 0 || strcmp(state, "FROZEN") != 0)
		return;
	char now[32];
	for (int i = 0; i < 100; i++) { /* FREEZING until every task has stopped */
		if (read_at(fd, "freezer.state", now, sizeof now) < 0 ||
		    strncmp(now, "FROZEN", 6) == 0)
			return;
		sleep_ms(1);
	}
}

static int v1_kill(const int fds[V1_N])
{
	bool frozen = fds[V1_FREEZER] >= 0;
	if (frozen)
		v1_freeze(fds[V1_FREEZER], "FROZEN");
	int r = 0;
	for (int round = 0; round < KILL_ROUNDS; round++) {
		int n = 0;
		for (int h = 0; h < V1_N; h++) {
			int k = fds[h] >= 0 ? signal_procs(fds[h], SIGKILL) : 0;
			if (k < 0 && k != -ENOENT)
				r = k;
			n += k > 0 ? k : 0;
		}
		if (frozen) {
			v1_freeze(fds[V1_FREEZER], "THAWED");
			frozen = false;
		} else if (n == 0) {
			break;
		}
		sleep_ms(1);
	}
	if (frozen)
		v1_freeze(fds[V1_FREEZER], "THAWED");
	return r;
}

/* Kills what is left in the directories name below parents[] and removes them: 0, or -EBUSY
 * while processes are still dying. */
static int v1_remove_job(const int parents[V1_N], const char *name)
{
	int fds[V1_N], r = 0;
	bool any = false;
	for (int h = 0; h < V1_N; h++) {
		fds[h] = parents[h] >= 0 ? openat(parents[h], name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
					 : -1;
		any |= fds[h] >= 0;
	}
	if (any)
		v1_kill(fds);
	for (int h = 0; h < V1_N; h++) {
		fd_close(&fds[h]);
		if (parents[h] >= 0 && unlinkat(parents[h], name, AT_REMOVEDIR) < 0 && errno != ENOENT)
			r = -errno;
	}
	return r;
}

/* Whether the pimd named by an owner directory ("pimd-<pid>-<start>") still runs. */
static bool owner_alive(const char *name)
{
	pid_t pid;
	uint64_t start, now;
	char p[64], stat[1024];
	if (cgroup_parse_owner(name, &pid, &start) < 0)
		return true; /* not one of ours: left alone */
	snprintf(p, sizeof p, "/proc/%d", (int)pid);
	int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return false;
	bool alive = read_at(fd, "stat", stat, sizeof stat) > 0 &&
		     cgroup_parse_starttime(stat, &now) == 0 && now == start;
	close(fd);
	return alive;
}

/* The job directories of a pimd that ended without removing them (its owner directory in any
 * hierarchy of pimd's own cgroup): killed and removed, then the owner directory. */
static void v1_remove_stale_owner(struct cgroup_tree *t, const char *owner)
{
	int parents[V1_N];
	for (int h = 0; h < V1_N; h++)
		parents[h] = t->v1[h].parent_fd >= 0 ? openat(t->v1[h].parent_fd, owner,
							      O_RDONLY | O_DIRECTORY | O_CLOEXEC)
						     : -1;
	for (int h = 0; h < V1_N; h++) {
		DIR *d = dir_at(parents[h]);
		if (!d)
			continue;
		struct dirent *e;
		while ((e = readdir(d)))
			if (e->d_type == DT_DIR && strncmp(e->d_name, JOB_PREFIX, strlen(JOB_PREFIX)) == 0)
				for (int i = 0; i < 100 && v1_remove_job(parents, e->d_name) == -EBUSY; i++)
					sleep_ms(10); /* while its processes die */
		closedir(d);
	}
	for (int h = 0; h < V1_N; h++) {
		fd_close(&parents[h]);
		if (t->v1[h].parent_fd >= 0)
			unlinkat(t->v1[h].parent_fd, owner, AT_REMOVEDIR);
	}
}

static void v1_remove_stale(struct cgroup_tree *t)
{
	for (int h = 0; h < V1_N; h++) {
		DIR *d = dir_at(t->v1[h].parent_fd);
		if (!d)
			continue;
		struct dirent *e;
		while ((e = readdir(d)))
			if (e->d_type == DT_DIR && strlen(e->d_name) < NAME_MAX_LEN &&
			    strcmp(e->d_name, t->owner) != 0 && !owner_alive(e->d_name))
				v1_remove_stale_owner(t, e->d_name);
		closedir(d);
	}
}

/* pimd's cgroup in the v1 hierarchy of controller h, and its owner directory made there;
 * -errno when the hierarchy is absent or pimd may not write to it. */
static int v1_open(struct cgroup_tree *t, int h, const char *self, const char *mounts)
{
	char dir[CGROUP_PATH_MAX];
	struct v1_hierarchy *v = &t->v1[h];
	int r = cgroup_parse_self_v1(self, v1_controller[h], v->path, sizeof v->path);
	if (r >= 0)
		r = cgroup_parse_mountinfo_v1(mounts, v1_controller[h], v->path, dir, sizeof dir);
	if (r < 0)
		return r;
	v->parent_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (v->parent_fd < 0)
		return -errno;
	if (mkdirat(v->parent_fd, t->owner, 0755) < 0 && errno != EEXIST)
		r = -errno; /* read-only (ProtectControlGroups=), or not pimd's */
	else if ((v->dirfd = openat(v->parent_fd, t->owner, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		r = -errno;
	if (r < 0) {
		unlinkat(v->parent_fd, t->owner, AT_REMOVEDIR);
		fd_close(&v->parent_fd);
	}
	return r;
}

static void v1_close(struct cgroup_tree *t, int h)
{
	struct v1_hierarchy *v = &t->v1[h];
	fd_close(&v->dirfd);
	if (v->parent_fd >= 0)
		unlinkat(v->parent_fd, t->owner, AT_REMOVEDIR);
	fd_close(&v->parent_fd);
	t->v1_controllers &= ~v1_bit[h];
}

/* The v1 hierarchies that cgroup_v1_choose picks, as far as pimd can write to them. */
static void v1_open_all(struct cgroup_tree *t)
{
	_cleanup_(freep) char *stat = NULL, *self = NULL, *mounts = NULL;
	uint64_t start;
	if (read_proc("/proc/self/stat", &stat) < 0 || cgroup_parse_starttime(stat, &start) < 0 ||
	    read_proc("/proc/self/cgroup", &self) < 0 || read_proc("/proc/self/mountinfo", &mounts) < 0)
		return;
	snprintf(t->owner, sizeof t->owner, OWNER_PREFIX "%d-%" PRIu64, (int)getpid(), start);
	unsigned got = 0;
	for (int h = 0; h < V1_N; h++)
		if (v1_open(t, h, self, mounts) == 0)
			got |= v1_bit[h];
	t->v1_controllers = cgroup_v1_choose(t->dirfd >= 0, t->controllers, got);
	for (int h = 0; h < V1_N; h++)
		if ((got & v1_bit[h]) && !(t->v1_controllers & v1_bit[h]))
			v1_close(t, h);
	if (t->v1_controllers)
		v1_remove_stale(t);
}

static void v1_parents(const struct cgroup_tree *t, int parents[V1_N])
{
	for (int h = 0; h < V1_N; h++)
		parents[h] = t->v1[h].dirfd;
}

/* Kills a job's processes and removes its directories (cgroup v2 and v1): 0, or -EBUSY while
 * they are still dying. */
static int remove_job_dir(struct cgroup_tree *t, const char *name)
{
	int r = 0;
	if (t->dirfd >= 0 && unlinkat(t->dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
		r = -errno;
		if (r == -EBUSY) {
			int fd = openat(t->dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (fd >= 0) {
				kill_at(fd, t->has_kill);
				close(fd);
			}
			r = unlinkat(t->dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT ? 0 : -errno;
		}
	}
	int parents[V1_N];
	v1_parents(t, parents);
	int r1 = t->v1_controllers ? v1_remove_job(parents, name) : 0;
	return r < 0 ? r : r1;
}

static void pending_add(struct cgroup_tree *t, const char *name)
{
	for (unsigned i = 0; i < t->n_pending; i++)
		if (strcmp(t->pending[i], name) == 0)
			return;
	if (t->n_pending < CGROUP_PENDING_MAX) /* else the next start removes it */
		snprintf(t->pending[t->n_pending++], NAME_MAX_LEN, "%s", name);
}

/* ------------------------------------------------------------------ the tree */

static bool delegated(int dirfd, char *why, size_t len)
{
	struct stat st = { .st_uid = (uid_t)-1 };
	char v[8];
	if (fstat(dirfd, &st) == 0 && geteuid() != 0 && st.st_uid == geteuid())
		return true;
	for (const char *name = "trusted.delegate"; name; name = name[0] == 't' ? "user.delegate" : NULL) {
		char proc[64];
		snprintf(proc, sizeof proc, "/proc/self/fd/%d", dirfd);
		ssize_t n = getxattr(proc, name, v, sizeof v - 1);
		if (n > 0) {
			v[n] = 0;
			if (strcmp(v, "1") == 0)
				return true;
		}
	}
	snprintf(why, len, "it belongs to uid %u and carries no trusted.delegate attribute: not "
		 "delegated to pimd (systemd's Delegate=)", (unsigned)st.st_uid);
	return false;
}

/* Moves every process of D into D/main (pimd first). */
static int enter_main(struct cgroup_tree *t, struct pim_error *err)
{
	if (mkdirat(t->dirfd, MAIN_NAME, 0755) < 0 && errno != EEXIST)
		return err_set(err, -errno, "cannot create the cgroup %s/%s: %s", t->dir, MAIN_NAME,
			       strerror(errno));
	int main_fd = openat(t->dirfd, MAIN_NAME, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (main_fd < 0)
		return err_set(err, -errno, "cannot open the cgroup %s/%s: %s", t->dir, MAIN_NAME,
			       strerror(errno));
	int r = write_at(main_fd, "cgroup.procs", "0");
	if (r < 0) {
		close(main_fd);
		return err_set(err, r, "cannot move pimd into the cgroup %s/%s: %s", t->dir,
			       MAIN_NAME, strerror(-r));
	}
	/* others that share D (a starter that is still there) go along: D must be empty */
	char buf[4096];
	if (read_at(t->dirfd, "cgroup.procs", buf, sizeof buf) > 0)
		for (char *p = buf, *end; *p; p = end) {
			long pid = strtol(p, &end, 10);
			if (end == p)
				break;
			char s[24];
			snprintf(s, sizeof s, "%ld", pid);
			write_at(main_fd, "cgroup.procs", s);
		}
	close(main_fd);
	return 0;
}

static void enable_controllers(struct cgroup_tree *t)
{
	char avail[512];
	if (read_at(t->dirfd, "cgroup.controllers", avail, sizeof avail) < 0)
		avail[0] = 0;
	if (list_has(avail, "pids"))
		write_at(t->dirfd, "cgroup.subtree_control", "+pids");
	if (list_has(avail, "memory"))
		write_at(t->dirfd, "cgroup.subtree_control", "+memory");
	char on[512];
	if (read_at(t->dirfd, "cgroup.subtree_control", on, sizeof on) < 0)
		on[0] = 0;
	t->controllers = (list_has(on, "pids") ? CGROUP_PIDS : 0) |
			 (list_has(on, "memory") ? CGROUP_MEMORY : 0);
}

/* Job directories of a pimd that ended without removing them. */
static void remove_stale_jobs(struct cgroup_tree *t)
{
	DIR *d = dir_at(t->dirfd);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_type == DT_DIR && strncmp(e->d_name, JOB_PREFIX, strlen(JOB_PREFIX)) == 0 &&
		    strlen(e->d_name) < NAME_MAX_LEN && remove_job_dir(t, e->d_name) < 0)
			pending_add(t, e->d_name);
	closedir(d);
}

static struct cgroup_tree *tree_alloc(void)
{
	struct cgroup_tree *t = calloc(1, sizeof *t);
	if (t) {
		t->dirfd = -1;
		for (int h = 0; h < V1_N; h++)
			t->v1[h].parent_fd = t->v1[h].dirfd = -1;
	}
	return t;
}

static int tree_open(const char *dir, const char *path, bool check_delegation,
		     struct cgroup_tree **out, char *why, size_t why_len, struct pim_error *err)
{
	*out = NULL;
	_cleanup_(freep) struct cgroup_tree *t = tree_alloc();
	if (!t)
		return err_set(err, -ENOMEM, "out of memory");
	snprintf(t->dir, sizeof t->dir, "%s", dir);
	snprintf(t->path, sizeof t->path, "%s", path);
	t->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (t->dirfd < 0)
		return err_set(err, -errno, "cannot open the cgroup %s: %s", dir, strerror(errno));
	static const char *const need[] = { ".", "cgroup.procs", "cgroup.subtree_control" };
	for (size_t i = 0; i < ELEMENTSOF(need); i++)
		if (faccessat(t->dirfd, need[i], W_OK, AT_EACCESS) < 0) {
			int e = errno;
			close(t->dirfd);
			snprintf(why, why_len, "%s%s%s is not writable (%s)", dir,
				 i ? "/" : "", i ? need[i] : "", strerror(e));
			return err_set(err, -e, "the cgroup %s cannot be pimd's: %s", dir, why);
		}
	if (check_delegation && !delegated(t->dirfd, why, why_len)) {
		close(t->dirfd);
		return err_set(err, -EPERM, "the cgroup %s cannot be pimd's: %s", dir, why);
	}
	int r = enter_main(t, err);
	if (r < 0) {
		close(t->dirfd);
		snprintf(why, why_len, "%s", err->msg);
		return r;
	}
	t->has_kill = faccessat(t->dirfd, MAIN_NAME "/cgroup.kill", F_OK, 0) == 0;
	enable_controllers(t);
	remove_stale_jobs(t);
	*out = TAKE_PTR(t);
	return 0;
}

int cgroup_tree_open_dir(const char *dir, bool check_delegation, struct cgroup_tree **out,
			 struct pim_error *err)
{
	char why[512];
	const char *mnt_path = dir; /* as the tests give it: the path under the mount is unknown */
	return tree_open(dir, mnt_path, check_delegation, out, why, sizeof why, err);
}

int cgroup_tree_open(enum cgroup_mode mode, struct cgroup_tree **out, char *why, size_t why_len,
		     struct pim_error *err)
{
	*out = NULL;
	why[0] = 0;
	if (mode == CGROUP_MODE_NO) {
		snprintf(why, why_len, "job_cgroups = no");
		return 0;
	}
	_cleanup_(freep) char *self = NULL, *mounts = NULL;
	char path[CGROUP_PATH_MAX], dir[CGROUP_PATH_MAX];
	int r = read_proc("/proc/self/cgroup", &self);
	if (r >= 0)
		r = cgroup_parse_self(self, path, sizeof path);
	if (r < 0)
		snprintf(why, why_len, "/proc/self/cgroup names no cgroup v2 (%s)", strerror(-r));
	else if (strcmp(path, "/") == 0)
		r = -EPERM, snprintf(why, why_len, "pimd runs in the root cgroup, which is nobody's "
				     "to delegate");
	if (r >= 0) {
		r = read_proc("/proc/self/mountinfo", &mounts);
		if (r >= 0)
			r = cgroup_parse_mountinfo(mounts, path, dir, sizeof dir);
		if (r < 0)
			snprintf(why, why_len, "no cgroup2 file system mounted that shows %s", path);
	}
	if (r >= 0)
		r = tree_open(dir, path, mode == CGROUP_MODE_AUTO, out, why, why_len, err);
	else
		err_set(err, r, "no cgroup for the jobs: %s", why);
	if (r < 0 && mode == CGROUP_MODE_YES)
		return r;
	/* pids and memory that cgroup v2 does not give, from cgroup v1 (a hybrid or legacy host) */
	struct cgroup_tree *t = *out ? *out : tree_alloc();
	if (!t)
		return 0;
	if (!*out)
		snprintf(t->no_v2, sizeof t->no_v2, "%s", why);
	v1_open_all(t);
	if (!*out && !t->v1_controllers) {
		size_t n = strlen(why);
		snprintf(why + n, why_len - n, "; no writable cgroup v1 pids or memory hierarchy "
			 "either");
		free(t);
		return 0;
	}
	*out = t;
	return 0;
}

unsigned cgroup_tree_sweep(struct cgroup_tree *t)
{
	unsigned kept = 0;
	for (unsigned i = 0; i < t->n_pending; i++)
		if (remove_job_dir(t, t->pending[i]) < 0)
			memmove(t->pending[kept++], t->pending[i], NAME_MAX_LEN);
	t->n_pending = kept;
	return kept;
}

unsigned cgroup_tree_free(struct cgroup_tree *t, unsigned wait_ms)
{
	if (!t)
		return 0;
	unsigned left = cgroup_tree_sweep(t);
	for (unsigned waited = 0; left > 0 && waited < wait_ms; waited += 10) {
		sleep_ms(10);
		left = cgroup_tree_sweep(t);
	}
	for (int h = 0; h < V1_N; h++)
		v1_close(t, h);
	fd_close(&t->dirfd);
	free(t);
	return left;
}

const char *cgroup_tree_dir(const struct cgroup_tree *t) { return t->dir; }
const char *cgroup_tree_path(const struct cgroup_tree *t) { return t->path; }
unsigned cgroup_tree_controllers(const struct cgroup_tree *t)
{
	return (t->controllers | t->v1_controllers) & (CGROUP_PIDS | CGROUP_MEMORY);
}
unsigned cgroup_tree_v1_controllers(const struct cgroup_tree *t) { return t->v1_controllers; }
bool cgroup_tree_has_kill(const struct cgroup_tree *t) { return t->has_kill; }

void cgroup_tree_describe(const struct cgroup_tree *t, char *buf, size_t len)
{
	size_t n = 0;
	buf[0] = 0;
	if (t->dirfd >= 0) {
		const char *ctl = t->controllers == (CGROUP_PIDS | CGROUP_MEMORY) ? "pids.max, memory.max"
				  : t->controllers == CGROUP_PIDS ? "pids.max; no memory controller"
				  : t->controllers == CGROUP_MEMORY ? "memory.max; no pids controller"
				  : "no pids or memory controller delegated: no limits of the cgroup";
		snprintf(buf, len, "a cgroup per job under %s (%s; %s)", t->path, ctl,
			 t->has_kill ? "cgroup.kill" : "no cgroup.kill: frozen and killed process by process");
		n = strlen(buf);
	}
	if (!t->v1_controllers)
		return;
	unsigned v = t->v1_controllers;
	snprintf(buf + n, len - n, "%scgroup v1 %s per job under ", n ? "; and " : "",
		 (v & CGROUP_PIDS) && (v & CGROUP_MEMORY) ? "pids+memory"
		 : v & CGROUP_PIDS ? "pids" : "memory");
	for (int h = 0; h < V1_N; h++) {
		n = strlen(buf);
		if (h != V1_FREEZER && (v & v1_bit[h]))
			snprintf(buf + n, len - n, "%s%s:%s/%s", h && (v & CGROUP_PIDS) ? ", " : "",
				 v1_controller[h], strcmp(t->v1[h].path, "/") ? t->v1[h].path : "",
				 t->owner);
	}
	n = strlen(buf);
	snprintf(buf + n, len - n, " (%s%s%s; %s)", v & CGROUP_PIDS ? "pids.max" : "",
		 (v & CGROUP_PIDS) && (v & CGROUP_MEMORY) ? ", " : "",
		 v & CGROUP_MEMORY ? "memory.limit_in_bytes" : "",
		 v & CGROUP_FREEZER ? "frozen by the v1 freezer and killed process by process"
		 : t->dirfd >= 0 ? "killed with the cgroup v2 one" : "killed process by process");
	if (t->dirfd < 0) {
		n = strlen(buf);
		snprintf(buf + n, len - n, ", and a process group per job; no cgroup v2: %s", t->no_v2);
	}
}

/* ------------------------------------------------------------------ jobs */

static void job_close(struct cgroup_job *j)
{
	fd_close(&j->dirfd);
	fd_close(&j->procs_fd);
	for (int h = 0; h < V1_N; h++) {
		fd_close(&j->v1_dirfd[h]);
		fd_close(&j->v1_procs_fd[h]);
	}
	free(j);
}

/* Makes the directory name below parent_fd (emptying one of a previous pimd with the same id
 * first) and opens it and its cgroup.procs: 0 or -errno. */
static int job_dir_make(struct cgroup_tree *t, int parent_fd, const char *name, int *dirfd,
			int *procs_fd)
{
	if (mkdirat(parent_fd, name, 0755) < 0) {
		int r = errno == EEXIST ? remove_job_dir(t, name) : -errno;
		if (r == 0 && mkdirat(parent_fd, name, 0755) < 0)
			r = -errno;
		if (r < 0)
			return r;
	}
	*dirfd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*dirfd >= 0)
		*procs_fd = openat(*dirfd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
	if (*procs_fd < 0) {
		int e = errno;
		unlinkat(parent_fd, name, AT_REMOVEDIR);
		return -e;
	}
	return 0;
}

/* The limits in cgroup v2: what failed, or NULL. */
static const char *limit_v2(int fd, const struct cgroup_limits *lim, unsigned ctl, int *r)
{
	char v[24];
	if (lim->pids_max && (ctl & CGROUP_PIDS)) {
		snprintf(v, sizeof v, "%" PRIu64, lim->pids_max);
		if ((*r = write_at(fd, "pids.max", v)) < 0)
			return "pids.max";
	}
	if (lim->memory_max && (ctl & CGROUP_MEMORY)) {
		snprintf(v, sizeof v, "%" PRIu64, lim->memory_max);
		if ((*r = write_at(fd, "memory.max", v)) < 0)
			return "memory.max";
		/* no swap beside it (the file is absent without swap accounting); one OOM kill
		 * ends the whole job */
		if ((*r = write_at(fd, "memory.swap.max", "0")) < 0 && *r != -ENOENT)
			return "memory.swap.max";
		*r = 0;
		write_at(fd, "memory.oom.group", "1");
	}
	return NULL;
}

/* The limits in cgroup v1 (cgroup-v1/pids.rst, memory.rst): what failed, or NULL. */
static const char *limit_v1(const int fds[V1_N], const struct cgroup_limits *lim, int *r)
{
	char v[24];
	if (lim->pids_max && fds[V1_PIDS] >= 0) {
		snprintf(v, sizeof v, "%" PRIu64, lim->pids_max);
		if ((*r = write_at(fds[V1_PIDS], "pids.max", v)) < 0)
			return "pids.max";
	}
	if (lim->memory_max && fds[V1_MEMORY] >= 0) {
		snprintf(v, sizeof v, "%" PRIu64, lim->memory_max);
		if ((*r = write_at(fds[V1_MEMORY], "memory.limit_in_bytes", v)) < 0)
			return "memory.limit_in_bytes";
		/* memory+swap at the same limit: swap does not extend it (the file is absent
		 * without swap accounting) */
		if ((*r = write_at(fds[V1_MEMORY], "memory.memsw.limit_in_bytes", v)) < 0 &&
		    *r != -ENOENT)
			return "memory.memsw.limit_in_bytes";
		/* the OOM killer on: a job at its limit is killed, not paused in the fault */
		if ((*r = write_at(fds[V1_MEMORY], "memory.oom_control", "0")) < 0)
			return "memory.oom_control";
	}
	*r = 0;
	return NULL;
}

int cgroup_job_new(struct cgroup_tree *t, uint64_t id, const struct cgroup_limits *lim,
		   struct cgroup_job **out, struct pim_error *err)
{
	*out = NULL;
	struct cgroup_job *j = calloc(1, sizeof *j);
	if (!j)
		return err_set(err, -ENOMEM, "out of memory");
	j->tree = t;
	j->dirfd = j->procs_fd = -1;
	for (int h = 0; h < V1_N; h++)
		j->v1_dirfd[h] = j->v1_procs_fd[h] = -1;
	snprintf(j->name, sizeof j->name, JOB_PREFIX "%" PRIu64, id);
	int r = 0;
	char where[CGROUP_PATH_MAX + NAME_MAX_LEN + 16];
	snprintf(where, sizeof where, "%s", t->dir);
	if (t->dirfd >= 0)
		r = job_dir_make(t, t->dirfd, j->name, &j->dirfd, &j->procs_fd);
	for (int h = 0; h < V1_N && r == 0; h++)
		if (t->v1[h].dirfd >= 0) {
			snprintf(where, sizeof where, "%s:%s/%s", v1_controller[h],
				 strcmp(t->v1[h].path, "/") ? t->v1[h].path : "", t->owner);
			r = job_dir_make(t, t->v1[h].dirfd, j->name, &j->v1_dirfd[h],
					 &j->v1_procs_fd[h]);
		}
	if (r < 0) {
		err_set(err, r, "cannot create the job's cgroup %s/%s: %s", where, j->name,
			strerror(-r));
		cgroup_job_end(j);
		return r;
	}
	const char *what = j->dirfd >= 0 ? limit_v2(j->dirfd, lim, t->controllers, &r) : NULL;
	if (!what)
		what = limit_v1(j->v1_dirfd, lim, &r);
	if (what) {
		err_set(err, r, "cannot set %s of the job's cgroup %s: %s", what, j->name,
			strerror(-r));
		cgroup_job_end(j);
		return r;
	}
	*out = j;
	return 0;
}

int cgroup_job_enter(const struct cgroup_job *j)
{
	if (j->procs_fd >= 0 && write(j->procs_fd, "0", 1) != 1)
		return -errno;
	for (int h = 0; h < V1_N; h++)
		if (j->v1_procs_fd[h] >= 0 && write(j->v1_procs_fd[h], "0", 1) != 1)
			return -errno;
	return 0;
}

const char *cgroup_job_name(const struct cgroup_job *j) { return j->name; }

int cgroup_job_kill(struct cgroup_job *j)
{
	int r = j->dirfd >= 0 ? kill_at(j->dirfd, j->tree->has_kill) : 0;
	int r1 = j->tree->v1_controllers ? v1_kill(j->v1_dirfd) : 0;
	return r < 0 ? r : r1;
}

int cgroup_job_kill_each(struct cgroup_job *j)
{
	int r = j->dirfd >= 0 ? kill_each_at(j->dirfd) : 0;
	int r1 = j->tree->v1_controllers ? v1_kill(j->v1_dirfd) : 0;
	return r < 0 ? r : r1;
}

int cgroup_job_populated(const struct cgroup_job *j)
{
	char buf[256];
	if (j->dirfd >= 0) {
		ssize_t n = read_at(j->dirfd, "cgroup.events", buf, sizeof buf);
		if (n < 0)
			return (int)n;
		const char *p = strstr(buf, "populated ");
		return p && (p == buf || p[-1] == '\n') && p[10] != '0';
	}
	/* cgroup v1 has no cgroup.events: anyone listed in a hierarchy */
	int r = -ENOENT;
	for (int h = 0; h < V1_N; h++) {
		if (j->v1_dirfd[h] < 0)
			continue;
		ssize_t n = read_at(j->v1_dirfd[h], "cgroup.procs", buf, sizeof buf);
		if (n < 0)
			return (int)n;
		if (n > 0)
			return 1;
		r = 0;
	}
	return r;
}

void cgroup_job_events(const struct cgroup_job *j, struct cgroup_job_events *ev)
{
	const struct cgroup_tree *t = j->tree;
	ev->pids_max_hits = t->controllers & CGROUP_PIDS ? keyed_value(j->dirfd, "pids.events", "max")
			    : j->v1_dirfd[V1_PIDS] >= 0 ? keyed_value(j->v1_dirfd[V1_PIDS], "pids.events", "max")
			    : 0;
	ev->memory_file = "memory.max";
	if (t->controllers & CGROUP_MEMORY) {
		ev->oom_kills = keyed_value(j->dirfd, "memory.events", "oom_kill");
	} else if (j->v1_dirfd[V1_MEMORY] >= 0) {
		ev->oom_kills = keyed_value(j->v1_dirfd[V1_MEMORY], "memory.oom_control", "oom_kill");
		ev->memory_file = "memory.limit_in_bytes";
	} else {
		ev->oom_kills = 0;
	}
}

void cgroup_job_end(struct cgroup_job *j)
{
	if (!j)
		return;
	struct cgroup_tree *t = j->tree;
	if (cgroup_job_populated(j) != 0)
		cgroup_job_kill(j);
	char name[NAME_MAX_LEN];
	snprintf(name, sizeof name, "%s", j->name);
	job_close(j);
	if (remove_job_dir(t, name) < 0)
		pending_add(t, name);
}
