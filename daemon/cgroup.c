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
#define NAME_MAX_LEN 32
#define KILL_ROUNDS 200           /* cgroup.procs re-read at most this often by the fallback */
#define PROCFILE_MAX (4u << 20)   /* /proc/self/mountinfo can be long on container hosts */

struct cgroup_tree {
	int dirfd;
	char dir[CGROUP_PATH_MAX];
	char path[CGROUP_PATH_MAX];
	unsigned controllers;
	bool has_kill;
	char pending[CGROUP_PENDING_MAX][NAME_MAX_LEN];
	unsigned n_pending;
};

struct cgroup_job {
	struct cgroup_tree *tree;
	int dirfd;
	int procs_fd;
	char name[NAME_MAX_LEN];
};

/* ------------------------------------------------------------------ parsing */

int cgroup_parse_self(const char *text, char *path, size_t len)
{
	for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		if (strncmp(line, "0::", 3) != 0)
			continue;
		const char *p = line + 3;
		size_t n = strcspn(p, "\n");
		if (n == 0 || p[0] != '/' || n >= len)
			return -EINVAL;
		memcpy(path, p, n);
		path[n] = 0;
		return 0;
	}
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

int cgroup_parse_mountinfo(const char *text, const char *path, char *dir, size_t len)
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
		mi_field(sep + 3, field, sizeof field);
		if (strcmp(field, "cgroup2") != 0 || root[0] != '/' || mnt[0] != '/' ||
		    !path_under(path, root))
			continue;
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

/* Kills a job directory's processes and removes it: 0, or -EBUSY while they are still dying. */
static int remove_job_dir(struct cgroup_tree *t, const char *name)
{
	if (unlinkat(t->dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
		return 0;
	if (errno != EBUSY)
		return -errno;
	int fd = openat(t->dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		kill_at(fd, t->has_kill);
		close(fd);
	}
	if (unlinkat(t->dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
		return 0;
	return -errno;
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
	int fd = openat(t->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		closep(&fd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_type == DT_DIR && strncmp(e->d_name, JOB_PREFIX, strlen(JOB_PREFIX)) == 0 &&
		    strlen(e->d_name) < NAME_MAX_LEN && remove_job_dir(t, e->d_name) < 0)
			pending_add(t, e->d_name);
	closedir(d);
}

static int tree_open(const char *dir, const char *path, bool check_delegation,
		     struct cgroup_tree **out, char *why, size_t why_len, struct pim_error *err)
{
	*out = NULL;
	_cleanup_(freep) struct cgroup_tree *t = calloc(1, sizeof *t);
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
	if (r < 0 && mode == CGROUP_MODE_AUTO)
		return 0;
	return r;
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
	close(t->dirfd);
	free(t);
	return left;
}

const char *cgroup_tree_dir(const struct cgroup_tree *t) { return t->dir; }
const char *cgroup_tree_path(const struct cgroup_tree *t) { return t->path; }
unsigned cgroup_tree_controllers(const struct cgroup_tree *t) { return t->controllers; }
bool cgroup_tree_has_kill(const struct cgroup_tree *t) { return t->has_kill; }

void cgroup_tree_describe(const struct cgroup_tree *t, char *buf, size_t len)
{
	const char *ctl = t->controllers == (CGROUP_PIDS | CGROUP_MEMORY) ? "pids.max, memory.max"
			  : t->controllers == CGROUP_PIDS		   ? "pids.max; no memory controller"
			  : t->controllers == CGROUP_MEMORY		   ? "memory.max; no pids controller"
			  : "no pids or memory controller delegated: no limits of the cgroup";
	snprintf(buf, len, "a cgroup per job under %s (%s; %s)", t->path, ctl,
		 t->has_kill ? "cgroup.kill" : "no cgroup.kill: frozen and killed process by process");
}

/* ------------------------------------------------------------------ jobs */

static void job_close(struct cgroup_job *j)
{
	closep(&j->dirfd);
	closep(&j->procs_fd);
	free(j);
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
	snprintf(j->name, sizeof j->name, JOB_PREFIX "%" PRIu64, id);
	if (mkdirat(t->dirfd, j->name, 0755) < 0) {
		/* a job of a previous pimd with the same id: empty it first */
		if (errno != EEXIST || remove_job_dir(t, j->name) < 0 ||
		    mkdirat(t->dirfd, j->name, 0755) < 0) {
			int e = errno;
			err_set(err, -e, "cannot create the job's cgroup %s/%s: %s", t->dir, j->name,
				strerror(e));
			job_close(j);
			return -e;
		}
	}
	j->dirfd = openat(t->dirfd, j->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (j->dirfd >= 0)
		j->procs_fd = openat(j->dirfd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
	if (j->procs_fd < 0) {
		int e = errno;
		unlinkat(t->dirfd, j->name, AT_REMOVEDIR);
		err_set(err, -e, "cannot open the job's cgroup %s/%s: %s", t->dir, j->name, strerror(e));
		job_close(j);
		return -e;
	}
	char v[24];
	int r = 0;
	const char *what = NULL;
	if (lim->pids_max && (t->controllers & CGROUP_PIDS)) {
		snprintf(v, sizeof v, "%" PRIu64, lim->pids_max);
		if ((r = write_at(j->dirfd, "pids.max", v)) < 0)
			what = "pids.max";
	}
	if (r == 0 && lim->memory_max && (t->controllers & CGROUP_MEMORY)) {
		snprintf(v, sizeof v, "%" PRIu64, lim->memory_max);
		if ((r = write_at(j->dirfd, "memory.max", v)) < 0)
			what = "memory.max";
		/* no swap beside it (the file is absent without swap accounting); one OOM kill
		 * ends the whole job */
		else if ((r = write_at(j->dirfd, "memory.swap.max", "0")) == -ENOENT)
			r = 0;
		else if (r < 0)
			what = "memory.swap.max";
		if (r == 0)
			write_at(j->dirfd, "memory.oom.group", "1");
	}
	if (r < 0) {
		err_set(err, r, "cannot set %s of the job's cgroup %s/%s: %s", what, t->dir, j->name,
			strerror(-r));
		cgroup_job_end(j);
		return r;
	}
	*out = j;
	return 0;
}

int cgroup_job_procs_fd(const struct cgroup_job *j) { return j->procs_fd; }
const char *cgroup_job_name(const struct cgroup_job *j) { return j->name; }

int cgroup_job_kill(struct cgroup_job *j)
{
	return kill_at(j->dirfd, j->tree->has_kill);
}

int cgroup_job_kill_each(struct cgroup_job *j)
{
	return kill_each_at(j->dirfd);
}

int cgroup_job_populated(const struct cgroup_job *j)
{
	char buf[256];
	ssize_t n = read_at(j->dirfd, "cgroup.events", buf, sizeof buf);
	if (n < 0)
		return (int)n;
	const char *p = strstr(buf, "populated ");
	return p && (p == buf || p[-1] == '\n') && p[10] != '0';
}

void cgroup_job_events(const struct cgroup_job *j, struct cgroup_job_events *ev)
{
	ev->pids_max_hits = keyed_value(j->dirfd, "pids.events", "max");
	ev->oom_kills = keyed_value(j->dirfd, "memory.events", "oom_kill");
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
