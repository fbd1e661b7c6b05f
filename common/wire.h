/* SPDX-License-Identifier: MIT */
/*
 * wire.h: the few messages read and written by hand in protobuf's wire format.
 *
 * Status is the most frequent request and its answer the largest fixed one: pimd writes it and
 * libpimclient reads it without protobuf-c (whose generic packing and unpacking cost most of a
 * Status round trip), and pimd and libpimclient read a message's id and top-level fields on the
 * bytes.  Everything else goes through protobuf-c.
 *
 * The writers follow protobuf-c's packing of proto3 fields exactly: fields in the order they are
 * written (callers write them by field number, as protobuf-c does), a field holding its default
 * (0, 0.0 or -0.0, "", false) not written, and a message given as present written
 * even when empty; the tests compare their bytes with protobuf-c's.
 *
 * Plain C: no I/O, no protobuf-c.
 */
#ifndef PIM_WIRE_H
#define PIM_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum wire_type { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

/* One field as read: its number and type, the value of a varint, I64 or I32 field, and the
 * bytes of a LEN field. */
struct wire_field {
	uint32_t number;
	enum wire_type type;
	uint64_t v;
	const uint8_t *p;
	size_t len;
};

/*
 * Reads the field at p[*i] of a message of n bytes into *f and moves *i past it.  1 when a field
 * was read, 0 at the end of the message; WIRE_BAD_TAG when its tag is cut off or names field 0
 * or one over 2^29 - 1, WIRE_BAD_VALUE when its value is cut off or of a group or unknown type
 * (*i is then left as it was).
 */
#define WIRE_BAD_TAG (-1)
#define WIRE_BAD_VALUE (-2)

int wire_next(const uint8_t *p, size_t n, size_t *i, struct wire_field *f);

/* Whether p (n bytes) is a sequence of whole fields. */
bool wire_check(const uint8_t *p, size_t n);

/* Writers: each writes at out (NULL: only counts) and returns the bytes written. */
size_t wire_put_varint(uint8_t *out, uint64_t v);
/* A varint field (uint32, uint64, int64 as two's complement, bool); not written when v is 0. */
size_t wire_put_uint(uint8_t *out, uint32_t field, uint64_t v);
/* A double; not written when it is 0 or -0.0 (as protobuf-c does). */
size_t wire_put_double(uint8_t *out, uint32_t field, double v);
/* A string up to its NUL; not written when NULL or empty. */
size_t wire_put_string(uint8_t *out, uint32_t field, const char *s);
/* The tag and length of a LEN field whose len bytes the caller writes next (always written). */
size_t wire_put_len(uint8_t *out, uint32_t field, size_t len);

/*
 * Reading a message into a C struct by a table: each slot names a field's number, what to make
 * of it and where in the struct it goes.  A field not in the table is skipped (as protobuf
 * skips unknown fields); one whose wire type is not its slot's makes the message refused (as
 * protobuf-c refuses it); a field that comes twice keeps its last value (as protobuf does).
 * Strings are copied up to their first NUL and cut to fit (cap bytes with the NUL); a cut is
 * made at a character boundary of UTF-8.
 */
enum wire_slot_kind { WIRE_SLOT_U32, WIRE_SLOT_U64, WIRE_SLOT_I64, WIRE_SLOT_BOOL, WIRE_SLOT_DOUBLE,
		      WIRE_SLOT_STRING };

struct wire_slot {
	uint32_t number;
	enum wire_slot_kind kind;
	size_t offset;  /* in the struct */
	size_t cap;     /* WIRE_SLOT_STRING: the char array's size */
};

/* Reads p (n bytes) into base by the table (the fields it does not name are left as they are);
 * negative (as wire_next) when the bytes are not whole fields or a field is not of its slot's
 * type (base may then be partly written). */
int wire_read(const uint8_t *p, size_t n, const struct wire_slot *slots, size_t n_slots, void *base);

#endif
