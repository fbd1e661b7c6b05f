/* SPDX-License-Identifier: MIT */
/* Unit tests of common/frame.c: the length-prefixed framing shared by pimd and libpimclient. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frame.h"
#include "test_util.h"

static void pair(int sv[2], int nonblock_reader)
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	if (nonblock_reader)
		fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
}

START_TEST(header_is_big_endian)
{
	uint8_t h[4];
	frame_put_header(h, 0x01020304u);
	ck_assert_int_eq(h[0], 1);
	ck_assert_int_eq(h[3], 4);
	ck_assert_uint_eq(frame_get_header(h), 0x01020304u);
	frame_put_header(h, 0xffffffffu);
	ck_assert_uint_eq(frame_get_header(h), 0xffffffffu);
}
END_TEST

/* A frame delivered one byte at a time is assembled across many reads. */
START_TEST(reader_assembles_partial_frames)
{
	int sv[2];
	struct frame_reader r;
	const char msg[] = "hello, pimd";
	uint8_t hdr[4];
	uint32_t len;

	pair(sv, 1);
	frame_reader_init(&r, 1024);
	frame_put_header(hdr, sizeof msg);
	ck_assert_int_eq(frame_reader_read(&r, sv[0]), 0); /* nothing yet: EAGAIN → 0 */
	for (size_t i = 0; i < 4; i++) {
		ck_assert_int_eq(write(sv[1], hdr + i, 1), 1);
		ck_assert_int_eq(frame_reader_read(&r, sv[0]), 0);
	}
	ck_assert(frame_reader_partial(&r));
	for (size_t i = 0; i < sizeof msg; i++) {
		ck_assert_int_eq(write(sv[1], msg + i, 1), 1);
		int k = frame_reader_read(&r, sv[0]);
		ck_assert_int_eq(k, i + 1 == sizeof msg ? 1 : 0);
	}
	uint8_t *p = frame_reader_take(&r, &len, NULL);
	ck_assert_uint_eq(len, sizeof msg);
	ck_assert_mem_eq(p, msg, sizeof msg);
	ck_assert(!frame_reader_partial(&r));
	free(p);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* An announced length above the maximum is refused before any payload is read or allocated. */
START_TEST(reader_refuses_oversized_before_allocating)
{
	int sv[2];
	struct frame_reader r;
	uint8_t hdr[4];

	pair(sv, 1);
	frame_reader_init(&r, 4096);
	frame_put_header(hdr, 0xffffffffu);
	ck_assert_int_eq(write(sv[1], hdr, 4), 4);
	ck_assert_int_eq(frame_reader_read(&r, sv[0]), -EMSGSIZE);
	ck_assert_ptr_null(r.buf);
	ck_assert_uint_eq(r.len, 0xffffffffu);
	frame_reader_reset(&r);
	/* the maximum itself is fine */
	frame_put_header(hdr, 4096);
	ck_assert_int_eq(write(sv[1], hdr, 4), 4);
	ck_assert_int_eq(frame_reader_read(&r, sv[0]), 0);
	ck_assert_ptr_nonnull(r.buf);
	frame_reader_reset(&r);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

START_TEST(reader_reports_truncation_and_clean_eof)
{
	int sv[2];
	struct frame_reader r;
	uint8_t hdr[4];

	/* EOF at a frame boundary: a clean close */
	pair(sv, 1);
	frame_reader_init(&r, 1024);
	close(sv[1]);
	ck_assert_int_eq(frame_reader_read(&r, sv[0]), -ECONNRESET);
	close(sv[0]);

	/* EOF inside the header */
	pair(sv, 1);
	ck_assert_int_eq(write(sv[1], "\0\0", 2), 2);
	close(sv[1]);
	ck_assert_int_eq(frame_reader_read(&r, sv[0]), 0);
	ck_assert_int_eq(frame_reader_read(&r, sv[0]), -EPIPE);
	frame_reader_reset(&r);
	close(sv[0]);

	/* EOF inside the payload */
	pair(sv, 1);
	frame_put_header(hdr, 10);
	ck_assert_int_eq(write(sv[1], hdr, 4), 4);
	ck_assert_int_eq(write(sv[1], "abc", 3), 3);
	close(sv[1]);
	int k;
	while ((k = frame_reader_read(&r, sv[0])) == 0)
		;
	ck_assert_int_eq(k, -EPIPE);
	frame_reader_reset(&r);
	close(sv[0]);
}
END_TEST

START_TEST(zero_length_frame)
{
	int sv[2];
	struct frame_reader r;
	uint32_t len = 99;

	pair(sv, 1);
	frame_reader_init(&r, 1024);
	ck_assert_int_eq(frame_send(sv[1], NULL, 0), 0);
	ck_assert_int_eq(frame_reader_read(&r, sv[0]), 1);
	free(frame_reader_take(&r, &len, NULL));
	ck_assert_uint_eq(len, 0);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* 4 MiB through a socket buffer far smaller than that: partial writes and reads on both sides. */
START_TEST(blocking_round_trip_large)
{
	int sv[2];
	size_t n = 4u << 20;
	uint8_t *buf = malloc(n), *got;
	uint32_t len;

	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)(i * 131 + 7);
	pair(sv, 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(sv[0]);
		_exit(frame_send(sv[1], buf, (uint32_t)n) == 0 ? 0 : 1);
	}
	close(sv[1]);
	ck_assert_int_eq(frame_recv(sv[0], n, &got, &len), 0);
	ck_assert_uint_eq(len, n);
	ck_assert_mem_eq(got, buf, n);
	free(got);
	/* the sender is gone: next read is a clean EOF */
	ck_assert_int_eq(frame_recv(sv[0], n, &got, &len), -ECONNRESET);
	int st;
	waitpid(pid, &st, 0);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* blocking receive also refuses oversize */
	int sv2[2];
	pair(sv2, 0);
	ck_assert_int_eq(frame_send(sv2[1], buf, 5000), 0);
	ck_assert_int_eq(frame_recv(sv2[0], 4096, &got, &len), -EMSGSIZE);
	close(sv2[0]);
	close(sv2[1]);
	free(buf);
	close(sv[0]);
}
END_TEST

/* Sending to a closed peer gives -EPIPE, not SIGPIPE (MSG_NOSIGNAL). */
START_TEST(send_to_closed_peer_is_epipe)
{
	int sv[2];
	pair(sv, 0);
	close(sv[0]);
	ck_assert_int_eq(frame_send(sv[1], "x", 1), -EPIPE);
	close(sv[1]);
}
END_TEST

/* A descriptor sent with a frame arrives with it; a second one is counted and closed. */
START_TEST(descriptor_travels_with_the_frame)
{
	int sv[2], fd = -1, p[2];
	struct frame_reader r;
	uint32_t len;

	pair(sv, 1);
	ck_assert_int_eq(pipe(p), 0);
	frame_reader_init(&r, 1024);
	ck_assert_int_eq(frame_send_fd(sv[1], "abc", 3, p[1]), 0);
	int k;
	while ((k = frame_reader_read(&r, sv[0])) == 0)
		;
	ck_assert_int_eq(k, 1);
	ck_assert_int_eq(r.extra_fds, 0);
	uint8_t *b = frame_reader_take(&r, &len, &fd);
	ck_assert_uint_eq(len, 3);
	ck_assert_int_ge(fd, 0);
	/* the received descriptor is the pipe's write end: a byte written arrives at p[0] */
	ck_assert_int_eq(write(fd, "x", 1), 1);
	char c;
	ck_assert_int_eq(read(p[0], &c, 1), 1);
	ck_assert_int_eq(c, 'x');
	close(fd);
	free(b);

	/* two frames each with a descriptor, read as one stream before either is taken: the reader
	 * stops at the first frame's end, so the second descriptor waits for the second frame */
	ck_assert_int_eq(frame_send_fd(sv[1], "d", 1, p[0]), 0);
	while ((k = frame_reader_read(&r, sv[0])) == 0)
		;
	b = frame_reader_take(&r, &len, NULL); /* NULL: the descriptor is closed for us */
	free(b);
	ck_assert_int_eq(r.fd, -1);
	close(p[0]);
	close(p[1]);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* The buffer follows the bytes that arrived, not the length announced: a header announcing
 * 1 MiB costs 16 KiB until more comes; the grow hook can refuse, and reading resumes later. */
static uint32_t grow_allowed;
static int grow_calls;
static int grow_hook(void *data, uint32_t old_cap, uint32_t new_cap)
{
	grow_calls++;
	ck_assert_ptr_eq(data, &grow_allowed);
	ck_assert_uint_lt(old_cap, new_cap);
	return new_cap <= grow_allowed ? 0 : -ENOBUFS;
}

START_TEST(reader_grows_with_the_bytes_that_arrive)
{
	int sv[2];
	struct frame_reader r;
	uint8_t hdr[4];
	static uint8_t data[1 << 20];
	uint32_t len;

	pair(sv, 1);
	frame_reader_init(&r, 2u << 20);
	frame_reader_set_grow(&r, grow_hook, &grow_allowed);
	grow_allowed = 64 * 1024;
	frame_put_header(hdr, sizeof data);
	ck_assert_int_eq(write(sv[1], hdr, 4), 4);
	ck_assert_int_eq(frame_reader_read(&r, sv[0]), 0);
	ck_assert_uint_eq(r.cap, FRAME_READER_CHUNK); /* not the 1 MiB announced */
	for (size_t i = 0; i < sizeof data; i++)
		data[i] = (uint8_t)(i * 7);
	ck_assert_int_eq(write(sv[1], data, 10), 10);
	ck_assert_int_eq(frame_reader_read(&r, sv[0]), 0);
	ck_assert_uint_eq(r.cap, FRAME_READER_CHUNK);
	ck_assert_uint_eq(r.got, 10);
	/* 100 KiB more: 16 → 32 → 64 KiB allowed, then 128 KiB refused */
	ck_assert_int_eq(write(sv[1], data + 10, 100 * 1024), 100 * 1024);
	int k;
	while ((k = frame_reader_read(&r, sv[0])) == 0)
		;
	ck_assert_int_eq(k, -ENOBUFS);
	ck_assert_uint_eq(r.cap, 64 * 1024);
	ck_assert_uint_eq(r.got, 64 * 1024);
	/* allowed again: the rest is read, doubling up to the announced length exactly */
	grow_allowed = UINT32_MAX;
	pid_t kid = fork();
	if (kid == 0) {
		ssize_t n = write(sv[1], data + 10 + 100 * 1024, sizeof data - 10 - 100 * 1024);
		_exit(n == (ssize_t)(sizeof data - 10 - 100 * 1024) ? 0 : 1);
	}
	while ((k = frame_reader_read(&r, sv[0])) == 0)
		;
	ck_assert_int_eq(k, 1);
	ck_assert_uint_eq(r.cap, sizeof data);
	uint8_t *p = frame_reader_take(&r, &len, NULL);
	ck_assert_uint_eq(len, sizeof data);
	ck_assert_mem_eq(p, data, sizeof data);
	free(p);
	/* the hook stays for the next frame; a small frame takes its own size */
	ck_assert_ptr_eq(r.grow_data, &grow_allowed);
	frame_put_header(hdr, 100);
	ck_assert_int_eq(write(sv[1], hdr, 4), 4);
	ck_assert_int_eq(write(sv[1], data, 100), 100);
	while ((k = frame_reader_read(&r, sv[0])) == 0)
		;
	ck_assert_int_eq(k, 1);
	ck_assert_uint_eq(r.cap, 100);
	free(frame_reader_take(&r, &len, NULL));
	int st;
	waitpid(kid, &st, 0);
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

/* A frame answered in place (peek, done) leaves its small buffer for the next: frames of other
 * sizes after it are read whole and alone, never into the next one's bytes, a larger one in one
 * read as without the kept buffer; a large buffer is not kept. */
/* A client that sent a request and waits for the answer (frame_recv_wait, or frame_recv when
 * plain): how often it went to sleep meanwhile. */
struct waiter {
	int fd;
	bool plain;
	long sleeps;
	int r;
};

static void *wait_answer(void *p)
{
	struct waiter *w = p;
	struct rusage a, b;
	uint8_t *got = NULL;
	uint32_t len;

	w->r = frame_send(w->fd, "ask", 3);
	getrusage(RUSAGE_THREAD, &a);
	if (w->r == 0)
		w->r = w->plain ? frame_recv(w->fd, 64, &got, &len) : frame_recv_wait(w->fd, 64, -1, &got, &len);
	getrusage(RUSAGE_THREAD, &b);
	w->sleeps = b.ru_nvcsw - a.ru_nvcsw;
	if (w->r == 0 && (len != 6 || memcmp(got, "answer", 6) != 0))
		w->r = -EBADMSG;
	free(got);
	return NULL;
}

static void pause_ms(long ms)
{
	struct timespec t = { 0, ms * 1000000L };
	nanosleep(&t, NULL);
}

/* frame_recv_wait: the answer, -EAGAIN after the timeout, the peer's end; and the waiter sleeps
 * once, not woken when the other side reads its request (which a read(2) is, on Linux). */
START_TEST(wait_for_the_answer_asleep_once)
{
	int sv[2];
	uint8_t *got = NULL;
	uint32_t len;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ck_assert_int_eq(frame_recv_wait(sv[0], 64, 0, &got, &len), -EAGAIN);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(frame_recv_wait(sv[0], 64, 30, &got, &len), -EAGAIN);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_int_ge((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000, 29);
	ck_assert_int_eq(frame_send(sv[1], "xy", 2), 0);
	ck_assert_int_eq(frame_recv_wait(sv[0], 64, 1000, &got, &len), 0);
	ck_assert_uint_eq(len, 2);
	free(got);

	for (int k = 0; k < 3; k++) {
		struct waiter w = { .fd = sv[0] };
		pthread_t t;
		ck_assert_int_eq(pthread_create(&t, NULL, wait_answer, &w), 0);
		pause_ms(40);
		/* the request read: the waiter's socket has write space again */
		ck_assert_int_eq(frame_recv(sv[1], 64, &got, &len), 0);
		ck_assert_uint_eq(len, 3);
		free(got);
		pause_ms(40);
		ck_assert_int_eq(frame_send(sv[1], "answer", 6), 0);
		pthread_join(t, NULL);
		ck_assert_int_eq(w.r, 0);
		ck_assert_msg(w.sleeps == 1, "the waiter went to sleep %ld times", w.sleeps);
	}
	close(sv[1]);
	ck_assert_int_eq(frame_recv_wait(sv[0], 64, 1000, &got, &len), -ECONNRESET);
	close(sv[0]);
}
END_TEST

START_TEST(frames_answered_in_place)
{
	int sv[2];
	struct frame_reader r;
	uint8_t a[300], b[10], c[2000], out[FRAME_HEADER_BYTES * 3 + sizeof a + sizeof b + sizeof c];
	size_t n = 0;
	uint32_t len;
	int k;

	memset(a, 'a', sizeof a);
	memset(b, 'b', sizeof b);
	memset(c, 'c', sizeof c);
	frame_put_header(out, sizeof a);
	memcpy(out + FRAME_HEADER_BYTES, a, sizeof a);
	n = FRAME_HEADER_BYTES + sizeof a;
	frame_put_header(out + n, sizeof b);
	memcpy(out + n + FRAME_HEADER_BYTES, b, sizeof b);
	n += FRAME_HEADER_BYTES + sizeof b;
	frame_put_header(out + n, sizeof c);
	memcpy(out + n + FRAME_HEADER_BYTES, c, sizeof c);
	n += FRAME_HEADER_BYTES + sizeof c;
	pair(sv, 1);
	ck_assert_int_eq(write(sv[1], out, n), (ssize_t)n);
	frame_reader_init(&r, 1 << 20);

	while ((k = frame_reader_read(&r, sv[0])) == 0)
		;
	ck_assert_int_eq(k, 1);
	const uint8_t *p = frame_reader_peek(&r, &len);
	ck_assert_uint_eq(len, sizeof a);
	ck_assert_mem_eq(p, a, sizeof a);
	frame_reader_done(&r);
	ck_assert_ptr_eq(r.buf, p); /* kept */
	ck_assert_int_eq(frame_reader_partial(&r), 0);

	while ((k = frame_reader_read(&r, sv[0])) == 0)
		;
	ck_assert_int_eq(k, 1);
	p = frame_reader_peek(&r, &len);
	ck_assert_uint_eq(len, sizeof b);
	ck_assert_mem_eq(p, b, sizeof b);
	frame_reader_done(&r);

	/* all there: read in one call, not chunk by chunk from the kept buffer */
	ck_assert_int_eq(frame_reader_read(&r, sv[0]), 1);
	p = frame_reader_peek(&r, &len);
	ck_assert_uint_eq(len, sizeof c);
	ck_assert_mem_eq(p, c, sizeof c);
	ck_assert_uint_gt(r.cap, FRAME_READER_KEEP);
	frame_reader_done(&r);
	ck_assert_ptr_null(r.buf); /* too large to keep */
	ck_assert_int_eq(frame_reader_read(&r, sv[0]), 0);

	/* a kept buffer is taken like any other, and an empty frame uses it */
	frame_put_header(out, sizeof b);
	memcpy(out + FRAME_HEADER_BYTES, b, sizeof b);
	frame_put_header(out + FRAME_HEADER_BYTES + sizeof b, 0);
	ck_assert_int_eq(write(sv[1], out, 2 * FRAME_HEADER_BYTES + sizeof b), (ssize_t)(2 * FRAME_HEADER_BYTES + sizeof b));
	while ((k = frame_reader_read(&r, sv[0])) == 0)
		;
	frame_reader_done(&r);
	while ((k = frame_reader_read(&r, sv[0])) == 0)
		;
	ck_assert_int_eq(k, 1);
	uint8_t *taken = frame_reader_take(&r, &len, NULL);
	ck_assert_uint_eq(len, 0);
	ck_assert_ptr_nonnull(taken);
	free(taken);
	ck_assert_ptr_null(r.buf);
	frame_reader_reset(&r);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("frame");
	TCase *tc = test_case(s, "frame");
	tcase_add_test(tc, header_is_big_endian);
	tcase_add_test(tc, reader_assembles_partial_frames);
	tcase_add_test(tc, reader_refuses_oversized_before_allocating);
	tcase_add_test(tc, reader_reports_truncation_and_clean_eof);
	tcase_add_test(tc, zero_length_frame);
	tcase_add_test(tc, reader_grows_with_the_bytes_that_arrive);
	tcase_add_test(tc, blocking_round_trip_large);
	tcase_add_test(tc, send_to_closed_peer_is_epipe);
	tcase_add_test(tc, descriptor_travels_with_the_frame);
	tcase_add_test(tc, frames_answered_in_place);
	tcase_add_test(tc, wait_for_the_answer_asleep_once);
	return test_run_suite(s);
}
