/* SPDX-License-Identifier: MIT */
/* loop.h: the single-threaded epoll event loop of pimd. */
#ifndef PIMD_LOOP_H
#define PIMD_LOOP_H

#include <sys/epoll.h>

#include "util.h"

struct watch;
typedef void (*watch_fn)(struct watch *w, uint32_t events);

struct watch {
	int fd;
	watch_fn fn;
	void *data;
	uint32_t events;
};

struct loop;

int loop_new(struct loop **out);
void loop_free(struct loop *l);
int loop_add(struct loop *l, struct watch *w, uint32_t events);
int loop_mod(struct loop *l, struct watch *w, uint32_t events);
void loop_del(struct loop *l, struct watch *w);
/* Dispatches events until loop_quit(); returns the exit code given to loop_quit().  A later
 * loop_run dispatches again. */
int loop_run(struct loop *l);
void loop_quit(struct loop *l, int code);
/* CLOCK_MONOTONIC in ns, read once as the loop woke up for the batch being dispatched (the
 * clock's time at the wakeup, behind it by what the batch's callbacks took so far): per-request
 * times that need no more (idle timeouts, Status's uptime) take it instead of a clock read each. */
uint64_t loop_now(const struct loop *l);
/* fn(data) runs after each batch of events (pimd: the changes no writer took, store.h). */
void loop_set_after(struct loop *l, void (*fn)(void *data), void *data);

#endif
