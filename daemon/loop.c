/* SPDX-License-Identifier: MIT */
#include "loop.h"

struct loop {
	int epfd;
	bool quit;
	int code;
	/* the batch being dispatched: a watch deleted by an earlier callback of the batch must not
	 * be called (its owner may have freed it) */
	struct epoll_event *batch;
	int batch_n, batch_i;
	void (*after)(void *data);
	void *after_data;
	uint64_t now; /* CLOCK_MONOTONIC when the batch began (loop_now) */
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
	l->now = now_ns();
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
	for (int i = l->batch_i + 1; i < l->batch_n; i++)
		if (l->batch[i].data.ptr == w)
			l->batch[i].data.ptr = NULL;
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
		l->now = now_ns();
		l->batch = ev;
		l->batch_n = n;
		for (l->batch_i = 0; l->batch_i < n && !l->quit; l->batch_i++) {
			struct watch *w = ev[l->batch_i].data.ptr;
			if (w)
				w->fn(w, ev[l->batch_i].events);
		}
		l->batch_n = 0;
		if (l->after)
			l->after(l->after_data);
	}
	l->quit = false; /* (a later loop_run runs again) */
	return l->code;
}

uint64_t loop_now(const struct loop *l)
{
	return l->now;
}

void loop_set_after(struct loop *l, void (*fn)(void *data), void *data)
{
	l->after = fn;
	l->after_data = data;
}
