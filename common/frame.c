/* SPDX-License-Identifier: MIT */
#include "frame.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sys.h"

void frame_put_header(uint8_t hdr[FRAME_HEADER_BYTES], uint32_t len)
{
	hdr[0] = (uint8_t)(len >> 24);
	hdr[1] = (uint8_t)(len >> 16);
	hdr[2] = (uint8_t)(len >> 8);
	hdr[3] = (uint8_t)len;
}

uint32_t frame_get_header(const uint8_t hdr[FRAME_HEADER_BYTES])
{
	return (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
}

void frame_reader_init(struct frame_reader *r, uint32_t max)
{
	memset(r, 0, sizeof *r);
	r->max = max;
	r->fd = -1;
}

void frame_reader_set_grow(struct frame_reader *r, frame_grow_fn fn, void *data)
{
	r->grow = fn;
	r->grow_data = data;
}

/* Ready for the next frame; the limit and the grow hook stay. */
static void frame_reader_next(struct frame_reader *r)
{
	frame_grow_fn fn = r->grow;
	void *data = r->grow_data;

	frame_reader_init(r, r->max);
	frame_reader_set_grow(r, fn, data);
}

void frame_reader_reset(struct frame_reader *r)
{
	free(r->buf);
	if (r->fd >= 0)
		close(r->fd);
	frame_reader_next(r);
}

/* Makes room for more payload: the next chunk, or double, never beyond the announced length. */
static int frame_reader_grow(struct frame_reader *r)
{
	uint32_t cap = r->cap ? r->cap : FRAME_READER_CHUNK / 2;
	cap = cap >= r->len / 2 ? r->len : cap * 2;
	if (cap < 1)
		cap = 1;
	if (r->grow) {
		int k = r->grow(r->grow_data, r->cap, cap);
		if (k < 0)
			return k;
	}
	uint8_t *b = realloc(r->buf, cap);
	if (!b)
		return -ENOMEM;
	r->buf = b;
	r->cap = cap;
	return 0;
}

/* read(2) that also collects descriptors passed with SCM_RIGHTS (at most one per frame). */
static ssize_t read_fds(struct frame_reader *r, int fd, void *buf, size_t len)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(4 * sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl,
			      .msg_controllen = sizeof ctl };
	ssize_t n;

	do
		n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == ENOTSOCK)
		do
			n = read(fd, buf, len);
		while (n < 0 && errno == EINTR);
	if (n < 0)
		return n;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int *fds = (int *)CMSG_DATA(c);
		for (size_t i = 0; i < k; i++) {
			int got;
			memcpy(&got, &fds[i], sizeof got);
			if (r->fd < 0) {
				r->fd = got;
			} else {
				close(got);
				r->extra_fds++;
			}
		}
	}
	if (msg.msg_flags & MSG_CTRUNC)
		r->extra_fds++;
	return n;
}

int frame_reader_partial(const struct frame_reader *r)
{
	return r->hdr_got > 0;
}

static int frame_reader_ready(const struct frame_reader *r)
{
	return r->hdr_got == FRAME_HEADER_BYTES && r->got == r->len;
}

int frame_reader_read(struct frame_reader *r, int fd)
{
	ssize_t n;

	if (frame_reader_ready(r))
		return 1;
	if (r->hdr_got < FRAME_HEADER_BYTES) {
		n = read_fds(r, fd, r->hdr + r->hdr_got, FRAME_HEADER_BYTES - r->hdr_got);
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
		if (n == 0)
			return r->hdr_got == 0 ? -ECONNRESET : -EPIPE;
		r->hdr_got += (uint32_t)n;
		if (r->hdr_got < FRAME_HEADER_BYTES)
			return 0;
		r->len = frame_get_header(r->hdr);
		/* The limit is checked before any allocation (doc/design.md §6). */
		if (r->len > r->max)
			return -EMSGSIZE;
		r->got = 0;
		if (r->buf && r->cap < r->len) {
			/* a buffer kept from a smaller frame: this one is read as if none were kept
			 * (grown chunk by chunk from it, the frame would take a read per chunk) */
			free(r->buf);
			r->buf = NULL;
			r->cap = 0;
		}
		if (r->len == 0) {
			if (!r->buf)
				r->buf = malloc(1);
			return r->buf ? 1 : -ENOMEM;
		}
	}
	/* (a buffer kept from the frame before may be larger than this one) */
	uint32_t room = r->cap < r->len ? r->cap : r->len;
	if (r->got == room) {
		/* The buffer follows the bytes that came, not the length announced. */
		int k = frame_reader_grow(r);
		if (k < 0)
			return k;
		room = r->cap;
	}
	n = read_fds(r, fd, r->buf + r->got, room - r->got);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
	if (n == 0)
		return -EPIPE;
	r->got += (uint32_t)n;
	return frame_reader_ready(r);
}

uint8_t *frame_reader_take(struct frame_reader *r, uint32_t *len, int *fd)
{
	uint8_t *p = r->buf;

	*len = r->len;
	if (fd)
		*fd = r->fd;
	else if (r->fd >= 0)
		close(r->fd);
	r->buf = NULL;
	frame_reader_next(r);
	return p;
}

const uint8_t *frame_reader_peek(const struct frame_reader *r, uint32_t *len)
{
	*len = r->len;
	return r->buf;
}

void frame_reader_done(struct frame_reader *r)
{
	uint8_t *b = r->buf;
	uint32_t cap = r->cap;

	if (r->fd >= 0)
		close(r->fd);
	frame_reader_next(r);
	if (cap <= FRAME_READER_KEEP) {
		r->buf = b;
		r->cap = cap;
	} else {
		free(b);
	}
}

static int send_all(int fd, const uint8_t *p, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int frame_send(int fd, const void *payload, uint32_t len)
{
	uint8_t hdr[FRAME_HEADER_BYTES];
	int r;

	frame_put_header(hdr, len);
	/* Small frames go out in one send to avoid a second wakeup on the peer. */
	if (len <= 4096) {
		uint8_t buf[FRAME_HEADER_BYTES + 4096];
		memcpy(buf, hdr, FRAME_HEADER_BYTES);
		if (len)
			memcpy(buf + FRAME_HEADER_BYTES, payload, len);
		return send_all(fd, buf, FRAME_HEADER_BYTES + len);
	}
	r = send_all(fd, hdr, FRAME_HEADER_BYTES);
	if (r < 0)
		return r;
	return send_all(fd, payload, len);
}

int frame_send_fd(int fd, const void *payload, uint32_t len, int pass_fd)
{
	uint8_t hdr[FRAME_HEADER_BYTES];
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = { .iov_base = hdr, .iov_len = 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl,
			      .msg_controllen = sizeof ctl };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	ssize_t n;

	frame_put_header(hdr, len);
	memset(&ctl, 0, sizeof ctl);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &pass_fd, sizeof pass_fd);
	/* The descriptor rides on the first byte of the frame; the rest follows normally. */
	do
		n = sendmsg(fd, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	int r = send_all(fd, hdr + 1, FRAME_HEADER_BYTES - 1);
	if (r < 0 || len == 0)
		return r;
	return send_all(fd, payload, len);
}

static int recv_all(int fd, uint8_t *p, size_t len, int at_boundary)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, p + got, len - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return at_boundary && got == 0 ? -ECONNRESET : -EPIPE;
		got += (size_t)n;
	}
	return 0;
}

int frame_recv(int fd, uint32_t max, uint8_t **payload, uint32_t *len)
{
	uint8_t hdr[FRAME_HEADER_BYTES];
	uint8_t *buf;
	uint32_t n;
	int r;

	r = recv_all(fd, hdr, sizeof hdr, 1);
	if (r < 0)
		return r;
	n = frame_get_header(hdr);
	if (n > max)
		return -EMSGSIZE;
	buf = malloc(n ? n : 1);
	if (!buf)
		return -ENOMEM;
	r = recv_all(fd, buf, n, 0);
	if (r < 0) {
		free(buf);
		return r;
	}
	*payload = buf;
	*len = n;
	return 0;
}

int frame_recv_wait(int fd, uint32_t max, int timeout_ms, uint8_t **payload, uint32_t *len)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint64_t until = timeout_ms >= 0 ? now_ns() + (uint64_t)timeout_ms * 1000000u : 0;
	int left = timeout_ms < 0 ? -1 : timeout_ms, n;

	/* readable, hung up or in error: the read says which */
	while ((n = poll(&p, 1, left)) <= 0) {
		if (n == 0)
			return -EAGAIN;
		if (errno != EINTR)
			return -errno;
		if (timeout_ms < 0)
			continue;
		uint64_t now = now_ns();
		if (now >= until || (left = (int)((until - now) / 1000000u)) <= 0)
			return -EAGAIN;
	}
	return frame_recv(fd, max, payload, len);
}
