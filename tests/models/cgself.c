/* SPDX-License-Identifier: MIT */
/*
 * cgself: says through its regions where the job's processes run.  Region 0 always; region 1
 * when the library's constructor, which runs at dlopen() before any other code of the model,
 * found itself in a job's own cgroup (its cgroup v2 path ends in "/job-<digits>"); region 2 when
 * a child it forks is in that same cgroup.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pim_hooks.h"

static char loaded_in[4096];

/* The cgroup v2 path of the calling process ("" when there is none). */
static void own_cgroup(char *path, size_t len)
{
	char line[4096];
	path[0] = 0;
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return;
	while (fgets(line, sizeof line, f))
		if (strncmp(line, "0::", 3) == 0) {
			line[strcspn(line, "\n")] = 0;
			snprintf(path, len, "%s", line + 3);
		}
	fclose(f);
}

static bool in_job_cgroup(const char *path)
{
	const char *last = strrchr(path, '/');
	if (!last || strncmp(last, "/job-", 5) != 0 || !last[5])
		return false;
	for (const char *p = last + 5; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

__attribute__((constructor)) static void at_load(void)
{
	own_cgroup(loaded_in, sizeof loaded_in);
}

int pim_model_entry(void *const *args, size_t n_args)
{
	(void)args;
	(void)n_args;
	char now[4096], child[4096] = "";
	own_cgroup(now, sizeof now);
	int fds[2];
	if (pipe(fds) < 0)
		return 10;
	pid_t pid = fork();
	if (pid < 0)
		return 11;
	if (pid == 0) {
		own_cgroup(child, sizeof child);
		ssize_t w = write(fds[1], child, strlen(child) + 1);
		_exit(w > 0 ? 0 : 1);
	}
	close(fds[1]);
	ssize_t n = read(fds[0], child, sizeof child - 1);
	child[n > 0 ? n : 0] = 0;
	close(fds[0]);
	waitpid(pid, NULL, 0);

	pim_region_enter(0);
	pim_region_exit(0);
	if (in_job_cgroup(loaded_in) && strcmp(loaded_in, now) == 0) {
		pim_region_enter(1);
		pim_region_exit(1);
	}
	if (in_job_cgroup(now) && strcmp(child, now) == 0) {
		pim_region_enter(2);
		pim_region_exit(2);
	}
	return 0;
}
