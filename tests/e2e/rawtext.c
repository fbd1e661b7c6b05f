/* SPDX-License-Identifier: MIT */
/*
 * e2e-rawtext SOCKET: a client written from pimd(8), PROTOCOL, and proto/pim.proto alone (its
 * own framing and protobuf encoding, no libpimclient, no protobuf-c), that sends the strings
 * pimd(8), TEXT, forbids and checks each answer: the error code, the field named, and that
 * nothing was stored.  Exit 0 when pimd behaved as documented.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

static int failures;

static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("rawtext: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	failures++;
}

/* ---------------------------------------------------------------- protobuf encoding */

struct buf {
	uint8_t b[4096];
	size_t n;
};

static void put_varint(struct buf *b, uint64_t v)
{
	do {
		if (b->n == sizeof b->b)
			abort();
		b->b[b->n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
}

static void put_uint(struct buf *b, unsigned field, uint64_t v)
{
	put_varint(b, (uint64_t)field << 3 | 0);
	put_varint(b, v);
}

static void put_bytes(struct buf *b, unsigned field, const void *p, size_t n)
{
	put_varint(b, (uint64_t)field << 3 | 2);
	put_varint(b, n);
	if (b->n + n > sizeof b->b)
		abort();
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void put_str(struct buf *b, unsigned field, const char *s) { put_bytes(b, field, s, strlen(s)); }
static void put_msg(struct buf *b, unsigned field, const struct buf *m) { put_bytes(b, field, m->b, m->n); }

/* Request fields (pim.proto): id 1; hello 2, model_load 4, model_show 6, model_remove 7,
 * sample_batch 16.  Response: id 1; error 2 (code 1, message 2). */
enum { RQ_ID = 1, RQ_HELLO = 2, RQ_MODEL_LOAD = 4, RQ_MODEL_SHOW = 6, RQ_MODEL_REMOVE = 7,
       RQ_SAMPLE_BATCH = 16, RS_ERROR = 2 };
enum { ERROR_INVALID_ARGUMENT = 1, ERROR_NOT_FOUND = 2 };

/* A manifest of one allocation and one region, with the given model and region names. */
static void manifest(struct buf *m, const char *name, size_t name_len, const char *region,
		     size_t region_len)
{
	struct buf a = { 0 }, r = { 0 }, o = { 0 };
	put_uint(&a, 1, 0);          /* Allocation.id */
	put_uint(&a, 2, 4096);       /* bytes */
	put_uint(&a, 3, 1);          /* kind: ALLOC_KIND_ARGUMENT */
	put_uint(&o, 1, 0);          /* Operand.allocation_id */
	put_uint(&o, 2, 4096);       /* bytes */
	put_uint(&o, 5, 1);          /* role: OPERAND_ROLE_IN */
	put_uint(&r, 1, 0);          /* Region.id */
	put_bytes(&r, 2, region, region_len);
	put_str(&r, 3, "linalg.generic");
	put_uint(&r, 5, 16);         /* n_par */
	put_uint(&r, 6, 16);         /* n_total */
	put_msg(&r, 10, &o);
	put_bytes(m, 1, name, name_len);
	put_msg(m, 3, &a);
	put_msg(m, 4, &r);
}

/* ---------------------------------------------------------------- frames */

struct answer {
	uint64_t id;
	unsigned body;   /* field number of the Response body */
	uint64_t code;   /* of an Error */
	char message[1024];
};

static bool get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;
	for (unsigned s = 0; s < 64 && *p < end; s += 7) {
		uint8_t c = *(*p)++;
		x |= (uint64_t)(c & 0x7f) << s;
		if (!(c & 0x80)) {
			*v = x;
			return true;
		}
	}
	return false;
}

static bool parse_answer(const uint8_t *p, const uint8_t *end, struct answer *a, bool error)
{
	while (p < end) {
		uint64_t tag, v;
		if (!get_varint(&p, end, &tag))
			return false;
		unsigned field = (unsigned)(tag >> 3);
		switch (tag & 7) {
		case 0:
			if (!get_varint(&p, end, &v))
				return false;
			if (!error && field == 1)
				a->id = v;
			if (error && field == 1)
				a->code = v;
			break;
		case 1: p += 8; break;
		case 5: p += 4; break;
		case 2:
			if (!get_varint(&p, end, &v) || v > (uint64_t)(end - p))
				return false;
			if (!error && field >= 2) {
				a->body = field;
				if (field == RS_ERROR && !parse_answer(p, p + v, a, true))
					return false;
			}
			if (error && field == 2)
				snprintf(a->message, sizeof a->message, "%.*s", (int)v, (const char *)p);
			p += v;
			break;
		default:
			return false;
		}
	}
	return p == end;
}

static void full_write(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);
		if (k <= 0) {
			fail("write: %s", strerror(errno));
			exit(1);
		}
		p = (const uint8_t *)p + k;
		n -= (size_t)k;
	}
}

static bool full_read(int fd, void *p, size_t n)
{
	while (n) {
		ssize_t k = read(fd, p, n);
		if (k <= 0)
			return false;
		p = (uint8_t *)p + k;
		n -= (size_t)k;
	}
	return true;
}

/* Sends a Request of the given id and body and reads its Response. */
static struct answer ask(int fd, uint64_t id, unsigned body, const struct buf *m)
{
	struct buf rq = { 0 };
	struct answer a = { 0 };
	uint8_t hdr[4];
	static uint8_t in[1 << 20];

	put_uint(&rq, RQ_ID, id);
	put_msg(&rq, body, m);
	hdr[0] = (uint8_t)(rq.n >> 24), hdr[1] = (uint8_t)(rq.n >> 16);
	hdr[2] = (uint8_t)(rq.n >> 8), hdr[3] = (uint8_t)rq.n;
	full_write(fd, hdr, 4);
	full_write(fd, rq.b, rq.n);
	if (!full_read(fd, hdr, 4)) {
		fail("request %llu: no answer (connection closed)", (unsigned long long)id);
		exit(1);
	}
	uint32_t len = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
	if (len > sizeof in || !full_read(fd, in, len) || !parse_answer(in, in + len, &a, false)) {
		fail("request %llu: unreadable answer", (unsigned long long)id);
		exit(1);
	}
	if (a.id != id)
		fail("request %llu answered with id %llu", (unsigned long long)id, (unsigned long long)a.id);
	return a;
}

static void expect_error(struct answer a, uint64_t code, const char *want, const char *what)
{
	if (a.body != RS_ERROR || a.code != code || !strstr(a.message, want))
		fail("%s: got body %u code %llu \"%s\", want code %llu with \"%s\"", what, a.body,
		     (unsigned long long)a.code, a.message, (unsigned long long)code, want);
	else
		printf("ok: %s: %s\n", what, a.message);
}

static void expect_ok(struct answer a, unsigned body, const char *what)
{
	if (a.body != body)
		fail("%s: got body %u (%s), want %u", what, a.body, a.message, body);
	else
		printf("ok: %s\n", what);
}

/* True if every byte of s is part of well-formed UTF-8 (for the daemon's own messages). */
static bool utf8_ok(const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	while (*u) {
		int n = *u < 0x80 ? 1 : (*u & 0xe0) == 0xc0 ? 2 : (*u & 0xf0) == 0xe0 ? 3 : (*u & 0xf8) == 0xf0 ? 4 : 0;
		if (!n)
			return false;
		for (int i = 1; i < n; i++)
			if ((u[i] & 0xc0) != 0x80)
				return false;
		u += n;
	}
	return true;
}

int main(int argc, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct buf m, h;
	struct answer a;

	if (argc != 2) {
		fprintf(stderr, "usage: e2e-rawtext SOCKET\n");
		return 2;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", argv[1]);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		fprintf(stderr, "rawtext: connect %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	struct timeval tv = { .tv_sec = 10 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);

	/* Hello with a client_name that is not UTF-8: refused, and the connection still needs one */
	h = (struct buf){ 0 };
	put_uint(&h, 1, 1);
	put_str(&h, 2, "raw\xff");
	expect_error(ask(fd, 1, RQ_HELLO, &h), ERROR_INVALID_ARGUMENT, "hello.client_name: invalid UTF-8 at byte 3",
		     "a client_name of invalid UTF-8");
	h = (struct buf){ 0 };
	put_uint(&h, 1, 1);
	put_str(&h, 2, "rawtext \xe2\x9c\x93");
	expect_ok(ask(fd, 2, RQ_HELLO, &h), 3, "Hello with a UTF-8 client_name");

	/* a model name with a NUL inside (a string of given length): refused, "nul" not stored */
	m = (struct buf){ 0 };
	manifest(&m, "nul\0evil", 8, "r", 1);
	h = (struct buf){ 0 };
	put_msg(&h, 1, &m);
	expect_error(ask(fd, 3, RQ_MODEL_LOAD, &h), ERROR_INVALID_ARGUMENT,
		     "model_load.manifest.name: contains a NUL byte at byte 3", "model name \"nul\\0evil\"");
	m = (struct buf){ 0 };
	put_str(&m, 1, "nul");
	expect_error(ask(fd, 4, RQ_MODEL_SHOW, &m), ERROR_NOT_FOUND, "no model named \"nul\"",
		     "nothing was stored as \"nul\"");

	/* invalid UTF-8, DEL and a C1 control in a region name */
	const struct { const char *s; size_t n; const char *want; } bad[] = {
		{ "r\xc3", 2, "model_load.manifest.regions[0].name: invalid UTF-8 at byte 1" },
		{ "r\xed\xa0\x80", 4, "model_load.manifest.regions[0].name: invalid UTF-8 at byte 1" },
		{ "r\x7f", 2, "regions[0].name: contains a control character (U+007F) at byte 1" },
		{ "r\xc2\x9b", 3, "regions[0].name: contains a control character (U+009B) at byte 1" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		m = (struct buf){ 0 };
		manifest(&m, "rawtext-bad", 11, bad[i].s, bad[i].n);
		h = (struct buf){ 0 };
		put_msg(&h, 1, &m);
		char what[64];
		snprintf(what, sizeof what, "region name %zu of %zu", i + 1, sizeof bad / sizeof bad[0]);
		expect_error(ask(fd, 10 + i, RQ_MODEL_LOAD, &h), ERROR_INVALID_ARGUMENT, bad[i].want, what);
	}
	m = (struct buf){ 0 };
	put_str(&m, 1, "rawtext-bad");
	expect_error(ask(fd, 20, RQ_MODEL_SHOW, &m), ERROR_NOT_FOUND, "no model named", "none of them stored");

	/* a good manifest through the same encoder is stored (the encoder is right) */
	m = (struct buf){ 0 };
	manifest(&m, "rawtext-ok", 10, "r\xc3\xa9gion \xe2\x86\x92", 11);
	h = (struct buf){ 0 };
	put_msg(&h, 1, &m);
	expect_ok(ask(fd, 21, RQ_MODEL_LOAD, &h), 5, "a UTF-8 region name is stored");

	/* an invalid model name with a 2-byte character across byte 64: echoed whole or not at all */
	char name[80];
	memset(name, 'x', 63);
	snprintf(name + 63, sizeof name - 63, "\xc3\xa9zz");
	m = (struct buf){ 0 };
	put_str(&m, 1, name);
	a = ask(fd, 22, RQ_MODEL_SHOW, &m);
	expect_error(a, ERROR_INVALID_ARGUMENT, "is not a valid model name", "a long non-ASCII name");
	if (!utf8_ok(a.message) || !strstr(a.message, "xxx\" is not"))
		fail("the echoed name is cut inside a character: \"%s\"", a.message);

	/* time_ns of 2^64-1 in a sample batch: refused by field, nothing stored */
	struct buf sb = { 0 }, s = { 0 };
	put_uint(&s, 1, 0);
	put_uint(&s, 2, UINT64_MAX);
	put_str(&sb, 1, "rawtext-ok");
	put_msg(&sb, 2, &s);
	expect_error(ask(fd, 23, RQ_SAMPLE_BATCH, &sb), ERROR_INVALID_ARGUMENT,
		     "samples[0].time_ns: 18446744073709551615 exceeds 3600000000000", "time_ns of 2^64-1");

	m = (struct buf){ 0 };
	put_str(&m, 1, "rawtext-ok");
	expect_ok(ask(fd, 24, RQ_MODEL_REMOVE, &m), 8, "the good model is removed again");
	close(fd);
	if (failures)
		fprintf(stderr, "rawtext: %d failures\n", failures);
	return failures ? 1 : 0;
}
