/* SPDX-License-Identifier: MIT */
/*
 * frame.h: the wire framing shared by pimd and libpimclient.
 *
 * A frame is a 4-byte big-endian length followed by that many bytes (one protobuf message).
 * The length is checked against a hard maximum before anything is allocated.
 */
#ifndef PIM_FRAME_H
#define PIM_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define FRAME_HEADER_BYTES 4u
#define FRAME_MAX_DEFAULT (16u * 1024u * 1024u)
#define FRAME_MAX_LIMIT (256u * 1024u * 1024u) /* no configuration may exceed this */
#define FRAME_MAX_MIN 4096u

/* The payload buffer of a frame_reader starts at this size (or the frame's, if smaller) and
 * doubles as bytes arrive, so an announced length costs nothing until it is sent. */
#define FRAME_READER_CHUNK (16u * 1024u)

/*
 * Asked before the payload buffer grows from old_cap to new_cap bytes; a negative errno refuses
 * (frame_reader_read() then returns it, the bytes so far kept, and may be called again later).
 */
typedef int (*frame_grow_fn)(void *data, uint32_t old_cap, uint32_t new_cap);

/* Incremental reader for non-blocking sockets. */
struct frame_reader {
	uint32_t max;   /* largest acceptable payload */
	uint8_t hdr[FRAME_HEADER_BYTES];
	uint32_t hdr_got;
	uint32_t len;   /* payload length once the header is complete */
	uint32_t got;   /* payload bytes received */
	uint32_t cap;   /* bytes allocated at buf (<= len) */
	uint8_t *buf;   /* payload, grown towards len bytes as they arrive */
	int fd;         /* a file descriptor that came with the frame (SCM_RIGHTS), or -1 */
	int extra_fds;  /* descriptors beyond one per frame: closed on arrival, counted */
	frame_grow_fn grow;  /* optional, kept across frames */
	void *grow_data;
};

void frame_reader_init(struct frame_reader *r, uint32_t max);
/* Sets the hook asked before the payload buffer grows (NULL: always grow). */
void frame_reader_set_grow(struct frame_reader *r, frame_grow_fn fn, void *data);
void frame_reader_reset(struct frame_reader *r);  /* frees the payload */

/*
 * Reads what is available from fd (one read(2) per call at most into the current frame).
 * Returns 1 when a complete frame is ready (take it with frame_reader_take()), 0 when more
 * bytes are needed (EAGAIN), -ECONNRESET when the peer closed at a frame boundary, -EPIPE when
 * it closed in the middle of a frame (truncated), -EMSGSIZE when the announced length exceeds
 * the maximum, -ENOMEM, the error of the grow hook, or another negative errno from read(2).
 */
int frame_reader_read(struct frame_reader *r, int fd);

/* Hands over the completed payload (caller frees it) and resets the reader for the next frame.
 * The descriptor that came with the frame, if any, goes to *fd (-1 if none; caller closes it);
 * fd may be NULL, then it is closed.  Descriptors are only accepted on sockets: a frame
 * carrying more than one has extra_fds > 0 before it is taken. */
uint8_t *frame_reader_take(struct frame_reader *r, uint32_t *len, int *fd);

/*
 * The completed payload (len bytes), left in the reader: frame_reader_done() then drops it (and
 * the descriptor that came with it) and readies the reader for the next frame, keeping a buffer
 * of at most FRAME_READER_KEEP bytes for it, so that small frames answered in place cost no
 * allocation each.
 */
#define FRAME_READER_KEEP 512u
const uint8_t *frame_reader_peek(const struct frame_reader *r, uint32_t *len);
void frame_reader_done(struct frame_reader *r);

/* True if the reader holds part of a frame. */
int frame_reader_partial(const struct frame_reader *r);

void frame_put_header(uint8_t hdr[FRAME_HEADER_BYTES], uint32_t len);
uint32_t frame_get_header(const uint8_t hdr[FRAME_HEADER_BYTES]);

/* Blocking helpers (for clients): write/read a whole frame, retrying on EINTR and partial I/O.
 * Sends use MSG_NOSIGNAL, so a closed peer gives -EPIPE rather than SIGPIPE. */
int frame_send(int fd, const void *payload, uint32_t len);
/* As frame_send, passing pass_fd along with the frame's first byte (SCM_RIGHTS). */
int frame_send_fd(int fd, const void *payload, uint32_t len, int pass_fd);
int frame_recv(int fd, uint32_t max, uint8_t **payload, uint32_t *len);
/* As frame_recv, after waiting with poll(2) for the frame to begin, at most timeout_ms (< 0: for
 * ever): -EAGAIN when it did not.  A reader asleep in read(2) on a Unix stream socket is woken
 * each time the peer reads what it sent (write space came back) and goes to sleep again, at the
 * cost of a wakeup on each side; a poll(2) for POLLIN is woken only by what it waits for. */
int frame_recv_wait(int fd, uint32_t max, int timeout_ms, uint8_t **payload, uint32_t *len);

#endif
