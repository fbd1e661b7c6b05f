/* SPDX-License-Identifier: MIT */
/*
 * escape: tries to leave a process behind after the job, as a daemon would: fork, setsid() in
 * the child (ignoring a refusal), fork again, and the grandchild, named "pimd-escapee", sleeps.
 * With no arguments the grandchild closes its descriptors (the result pipe included); with one
 * it keeps them, so the result pipe stays open after the worker exits. Region 0 is entered
 * once the first child has exited; region 1 as well when setsid() succeeded.
 */
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pim_hooks.h"

int pim_model_entry(void *const *args, size_t n_args)
{
	(void)args;
	int fds[2];
	if (pipe(fds) < 0)
		return 10;
	pid_t child = fork();
	if (child < 0)
		return 11;
	if (child == 0) {
		char ok = setsid() >= 0;
		if (write(fds[1], &ok, 1) != 1)
			_exit(1);
		if (fork() == 0) {
			prctl(PR_SET_NAME, "pimd-escapee", 0, 0, 0);
			signal(SIGHUP, SIG_IGN);
			if (n_args == 0)
				for (int fd = 0; fd < 1024; fd++)
					close(fd);
			for (;;)
				pause();
		}
		_exit(0);
	}
	char ok = 0;
	if (read(fds[0], &ok, 1) != 1)
		return 12;
	close(fds[0]);
	close(fds[1]);
	int st;
	if (waitpid(child, &st, 0) != child)
		return 13;
	pim_region_enter(0);
	pim_region_exit(0);
	if (ok) {
		pim_region_enter(1);
		pim_region_exit(1);
	}
	return 0;
}
