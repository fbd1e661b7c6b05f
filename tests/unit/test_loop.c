/* SPDX-License-Identifier: MIT */
/* Unit tests of daemon/loop.c: the event loop's dispatch and its time of the batch. */
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "loop.h"
#include "test_util.h"

struct probe {
	struct watch w;
	struct loop *l;
	int calls;
	uint64_t seen[2];   /* loop_now() as the callback starts, then after it slept */
	uint64_t clock_at;  /* now_ns() as it starts */
};

static int calls, quit_at; /* the callbacks' calls in all; the loop quits at quit_at of them */

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { 0, (long)ms * 1000000L };
	while (nanosleep(&ts, &ts) < 0)
		;
}

static void on_readable(struct watch *w, uint32_t events)
{
	struct probe *p = w->data;
	char b[16];

	(void)events;
	while (read(w->fd, b, sizeof b) > 0)
		;
	p->calls++;
	p->clock_at = now_ns();
	p->seen[0] = loop_now(p->l);
	sleep_ms(3);
	p->seen[1] = loop_now(p->l);
	if (++calls == quit_at)
		loop_quit(p->l, 7);
}

static void watch_pipe(struct loop *l, struct probe *p, int fds[2])
{
	ck_assert_int_eq(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
	p->w = (struct watch){ .fd = fds[0], .fn = on_readable, .data = p };
	p->l = l;
	ck_assert_int_eq(loop_add(l, &p->w, EPOLLIN), 0);
}

/* loop_now is the clock read once as the loop woke up: the same for every callback of a batch
 * however long they take, never ahead of the clock, and read again at the next wakeup. */
START_TEST(time_of_the_batch)
{
	struct loop *l;
	struct probe a = { 0 }, b = { 0 };
	int pa[2], pb[2];

	uint64_t before = now_ns();
	ck_assert_int_eq(loop_new(&l), 0);
	ck_assert_uint_ge(loop_now(l), before); /* (set before the first wakeup) */
	ck_assert_uint_le(loop_now(l), now_ns());
	watch_pipe(l, &a, pa);
	watch_pipe(l, &b, pb);

	/* both readable before the loop runs: one batch, whose first callback takes 3 ms */
	uint64_t written = now_ns();
	ck_assert_int_eq(write(pa[1], "x", 1), 1);
	ck_assert_int_eq(write(pb[1], "y", 1), 1);
	sleep_ms(2);
	quit_at = 2;
	ck_assert_int_eq(loop_run(l), 7);
	ck_assert_int_eq(a.calls, 1);
	ck_assert_int_eq(b.calls, 1);
	uint64_t batch = a.seen[0];
	ck_assert_uint_ge(batch, written + 2000000); /* read after the wakeup */
	uint64_t first = a.clock_at < b.clock_at ? a.clock_at : b.clock_at;
	uint64_t second = a.clock_at < b.clock_at ? b.clock_at : a.clock_at;
	ck_assert_uint_le(batch, first);
	ck_assert_uint_eq(a.seen[1], batch);         /* 3 ms later: the batch's time */
	ck_assert_uint_eq(b.seen[0], batch);         /* the other callback, 3 ms later: the same */
	ck_assert_uint_eq(b.seen[1], batch);
	ck_assert_uint_ge(second, batch + 3000000);

	/* the next wakeup reads the clock again */
	sleep_ms(2);
	ck_assert_int_eq(write(pa[1], "z", 1), 1);
	quit_at = 3;
	ck_assert_int_eq(loop_run(l), 7);
	ck_assert_int_eq(a.calls, 2);
	ck_assert_int_eq(b.calls, 1);
	ck_assert_uint_ge(a.seen[0], batch + 3000000 + 2000000); /* the 3 ms and the 2 since */
	ck_assert_uint_le(a.seen[0], a.clock_at);

	loop_del(l, &a.w);
	loop_del(l, &b.w);
	for (int i = 0; i < 2; i++) {
		close(pa[i]);
		close(pb[i]);
	}
	loop_free(l);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("loop");
	TCase *tc = test_case(s, "loop");
	tcase_add_test(tc, time_of_the_batch);
	return test_run_suite(s);
}
