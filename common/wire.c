/* SPDX-License-Identifier: MIT */
#include "wire.h"

#include <string.h>

/* The varint at p[*i] (of n bytes) into *v; false when it is cut off or over 10 bytes. */
static inline bool get_varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v)
{
	uint64_t x = 0;

	if (*i < n && p[*i] < 0x80) { /* (tags and small numbers: one byte) */
		*v = p[(*i)++];
		return true;
	}
	for (unsigned k = 0; k < 10 && *i < n; k++) {
		uint8_t b = p[(*i)++];
		x |= (uint64_t)(b & 0x7f) << (7 * k);
		if (!(b & 0x80)) {
			*v = x;
			return true;
		}
	}
	return false;
}

static uint64_t get_le(const uint8_t *p, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned k = 0; k < bytes; k++)
		v |= (uint64_t)p[k] << (8 * k);
	return v;
}

/* wire_next, inlined where a message is read field by field (wire_read) */
static inline int next_field(const uint8_t *p, size_t n, size_t *i, struct wire_field *f)
{
	size_t at = *i;
	uint64_t tag;

	if (at >= n)
		return 0;
	if (!get_varint(p, n, &at, &tag) || tag >> 3 == 0 || tag >> 3 > 0x1fffffff)
		return WIRE_BAD_TAG;
	f->number = (uint32_t)(tag >> 3);
	f->type = (enum wire_type)(tag & 7);
	f->p = NULL;
	f->len = 0;
	f->v = 0;
	switch (f->type) {
	case WIRE_VARINT:
		if (!get_varint(p, n, &at, &f->v))
			return WIRE_BAD_VALUE;
		break;
	case WIRE_I64:
	case WIRE_I32: {
		unsigned bytes = f->type == WIRE_I64 ? 8 : 4;
		if (n - at < bytes)
			return WIRE_BAD_VALUE;
		f->v = get_le(p + at, bytes);
		at += bytes;
		break;
	}
	case WIRE_LEN:
		if (!get_varint(p, n, &at, &f->v) || f->v > n - at)
			return WIRE_BAD_VALUE;
		f->p = p + at;
		f->len = (size_t)f->v;
		at += f->len;
		break;
	default: /* groups (3, 4), and 6 and 7 which are none */
		return WIRE_BAD_VALUE;
	}
	*i = at;
	return 1;
}

int wire_next(const uint8_t *p, size_t n, size_t *i, struct wire_field *f)
{
	return next_field(p, n, i, f);
}

bool wire_check(const uint8_t *p, size_t n)
{
	struct wire_field f;
	size_t i = 0;
	int r;

	while ((r = wire_next(p, n, &i, &f)) > 0)
		;
	return r == 0;
}

size_t wire_put_varint(uint8_t *out, uint64_t v)
{
	size_t n = 0;

	do {
		if (out)
			out[n] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		n++;
		v >>= 7;
	} while (v);
	return n;
}

static size_t put_tag(uint8_t *out, uint32_t field, enum wire_type type)
{
	return wire_put_varint(out, (uint64_t)field << 3 | type);
}

size_t wire_put_uint(uint8_t *out, uint32_t field, uint64_t v)
{
	if (!v)
		return 0;
	size_t n = put_tag(out, field, WIRE_VARINT);
	return n + wire_put_varint(out ? out + n : NULL, v);
}

size_t wire_put_double(uint8_t *out, uint32_t field, double v)
{
	uint64_t bits;

	if (v == 0) /* (-0.0 too, as protobuf-c) */
		return 0;
	memcpy(&bits, &v, sizeof bits);
	size_t n = put_tag(out, field, WIRE_I64);
	if (out)
		for (unsigned k = 0; k < 8; k++)
			out[n + k] = (uint8_t)(bits >> (8 * k));
	return n + 8;
}

size_t wire_put_len(uint8_t *out, uint32_t field, size_t len)
{
	size_t n = put_tag(out, field, WIRE_LEN);
	return n + wire_put_varint(out ? out + n : NULL, len);
}

size_t wire_put_string(uint8_t *out, uint32_t field, const char *s)
{
	size_t len = s ? strlen(s) : 0;

	if (!len)
		return 0;
	size_t n = wire_put_len(out, field, len);
	if (out)
		memcpy(out + n, s, len);
	return n + len;
}

/* s (len bytes) into dst of cap bytes: up to its first NUL, cut at a UTF-8 character boundary. */
static void copy_string(char *dst, size_t cap, const uint8_t *s, size_t len)
{
	if (!cap)
		return;
	const uint8_t *nul = memchr(s, 0, len < cap ? len : cap); /* (past cap - 1 it is cut anyway) */
	if (nul)
		len = (size_t)(nul - s);
	if (len > cap - 1) {
		len = cap - 1;
		while (len > 0 && (s[len] & 0xc0) == 0x80)
			len--;
	}
	memcpy(dst, s, len);
	dst[len] = 0;
}

static bool slot_type_matches(enum wire_slot_kind kind, enum wire_type type)
{
	switch (kind) {
	case WIRE_SLOT_DOUBLE:
		return type == WIRE_I64;
	case WIRE_SLOT_STRING:
		return type == WIRE_LEN;
	default:
		return type == WIRE_VARINT;
	}
}

static void slot_store(const struct wire_slot *s, const struct wire_field *f, uint8_t *base)
{
	void *at = base + s->offset;

	switch (s->kind) {
	case WIRE_SLOT_U32: {
		uint32_t v = (uint32_t)f->v; /* (protobuf keeps the low 32 bits) */
		memcpy(at, &v, sizeof v);
		break;
	}
	case WIRE_SLOT_U64:
		memcpy(at, &f->v, sizeof f->v);
		break;
	case WIRE_SLOT_I64: {
		int64_t v = (int64_t)f->v;
		memcpy(at, &v, sizeof v);
		break;
	}
	case WIRE_SLOT_BOOL: {
		bool v = f->v != 0;
		memcpy(at, &v, sizeof v);
		break;
	}
	case WIRE_SLOT_DOUBLE: {
		double v;
		memcpy(&v, &f->v, sizeof v);
		memcpy(at, &v, sizeof v);
		break;
	}
	case WIRE_SLOT_STRING:
		copy_string(at, s->cap, f->p, f->len);
		break;
	}
}

int wire_read(const uint8_t *p, size_t n, const struct wire_slot *slots, size_t n_slots, void *base)
{
	struct wire_field f;
	size_t i = 0;
	int r;

	while ((r = next_field(p, n, &i, &f)) > 0) {
		const struct wire_slot *s = NULL;
		/* a table in field order from 1 is indexed by number */
		if (f.number <= n_slots && slots[f.number - 1].number == f.number)
			s = &slots[f.number - 1];
		for (size_t k = 0; !s && k < n_slots; k++)
			if (slots[k].number == f.number)
				s = &slots[k];
		if (s && !slot_type_matches(s->kind, f.type))
			return WIRE_BAD_VALUE;
		if (s)
			slot_store(s, &f, base);
	}
	return r;
}
