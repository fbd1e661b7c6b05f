/* SPDX-License-Identifier: MIT */
#include "loop.h"

struct loop {
	int epfd;
	bool quit;
	int code;
};

int loop_new(struct loop **out)
{
	struct loop *l = calloc(1, sizeof *l);
	if (!l)
		return -ENOMEM;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		int r = -errno;
		free(l);
		return r;
	}
	*out = l;
	return 0;
}

void loop_free(struct loop *l)
{
	if (!l)
		return;
	close(l->epfd);
	free(l);
}

int loop_add(struct loop *l, struct watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };
	w->events = events;
	return epoll_ctl(l->epfd, EPOLL_CTL_ADD, w->fd, &ev) < 0 ? -errno : 0;
}

int loop_mod(struct loop *l, struct watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };
	if (w->events == events)
		return 0;
	w->events = events;
	return epoll_ctl(l->epfd, EPOLL_CTL_MOD, w->fd, &ev) < 0 ? -errno : 0;
}

void loop_del(struct loop *l, struct watch *w)
{
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
}

void loop_quit(struct loop *l, int code)
{
	l->quit = true;
	l->code = code;
}

int loop_run(struct loop *l)
{
	struct epoll_event ev[64];

	while (!l->quit) {
		int n = epoll_wait(l->epfd, ev, (int)ELEMENTSOF(ev), -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (int i = 0; i < n && !l->quit; i++) {
			struct watch *w = ev[i].data.ptr;
			w->fn(w, ev[i].events);
		}
	}
	return l->code;
}
