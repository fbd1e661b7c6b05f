/* SPDX-License-Identifier: MIT */
/* Unit tests of common/wire.c: protobuf's wire format read and written by hand, against
 * protobuf-c's packing and unpacking of the same messages. */
#include <float.h>
#include <stddef.h>
#include <string.h>

#include "pim.pb-c.h"
#include "wire.h"
#include "test_util.h"

/* Protobuf varints: 7 bits a byte, low first, the high bit saying more follow. */
START_TEST(varints)
{
	uint8_t b[10];
	ck_assert_uint_eq(wire_put_varint(b, 0), 1);
	ck_assert_uint_eq(b[0], 0);
	ck_assert_uint_eq(wire_put_varint(b, 127), 1);
	ck_assert_uint_eq(b[0], 0x7f);
	ck_assert_uint_eq(wire_put_varint(b, 300), 2);
	ck_assert(b[0] == 0xac && b[1] == 0x02);
	ck_assert_uint_eq(wire_put_varint(NULL, 300), 2);
	ck_assert_uint_eq(wire_put_varint(b, UINT64_MAX), 10);
	ck_assert(b[0] == 0xff && b[8] == 0xff && b[9] == 0x01);
}
END_TEST

/* Each type of field read back, then what is not a field. */
START_TEST(fields_and_what_is_not_one)
{
	/* field 1 varint 300, field 2 I64, field 3 "abc", field 4 I32, field 2^29-1 varint 1 */
	const uint8_t m[] = { 0x08, 0xac, 0x02, 0x11, 1, 2, 3, 4, 5, 6, 7, 8, 0x1a, 3, 'a', 'b', 'c',
			      0x25, 9, 0, 0, 0, 0xf8, 0xff, 0xff, 0xff, 0x0f, 0x01 };
	struct wire_field f;
	size_t i = 0;

	ck_assert_int_eq(wire_next(m, sizeof m, &i, &f), 1);
	ck_assert(f.number == 1 && f.type == WIRE_VARINT && f.v == 300);
	ck_assert_int_eq(wire_next(m, sizeof m, &i, &f), 1);
	ck_assert(f.number == 2 && f.type == WIRE_I64 && f.v == 0x0807060504030201ull);
	ck_assert_int_eq(wire_next(m, sizeof m, &i, &f), 1);
	ck_assert(f.number == 3 && f.type == WIRE_LEN && f.len == 3 && memcmp(f.p, "abc", 3) == 0);
	ck_assert_int_eq(wire_next(m, sizeof m, &i, &f), 1);
	ck_assert(f.number == 4 && f.type == WIRE_I32 && f.v == 9);
	ck_assert_int_eq(wire_next(m, sizeof m, &i, &f), 1);
	ck_assert(f.number == 0x1fffffff && f.v == 1);
	ck_assert_int_eq(wire_next(m, sizeof m, &i, &f), 0);
	ck_assert_uint_eq(i, sizeof m);
	ck_assert(wire_check(m, sizeof m));
	ck_assert(wire_check(m, 0));

	/* every cut of it but at a field's end is refused, and leaves the position */
	const size_t ends[] = { 0, 3, 12, 17, 22, sizeof m };
	for (size_t n = 0; n <= sizeof m; n++) {
		bool end = false;
		for (size_t k = 0; k < sizeof ends / sizeof *ends; k++)
			end = end || ends[k] == n;
		ck_assert_msg(wire_check(m, n) == end, "cut at %zu", n);
	}
	static const struct {
		uint8_t b[12];
		size_t n;
		int r;
	} bad[] = {
		{ { 0x00, 0x01 }, 2, WIRE_BAD_TAG },                            /* field 0 */
		{ { 0x80 }, 1, WIRE_BAD_TAG },                                  /* a cut tag */
		{ { 0x80, 0x80, 0x80, 0x80, 0x10, 0x00 }, 6, WIRE_BAD_TAG },   /* field 2^29 */
		{ { 0x0b }, 1, WIRE_BAD_VALUE },                                /* a group */
		{ { 0x0e }, 1, WIRE_BAD_VALUE },                                /* type 6 */
		{ { 0x0a, 0x05, 'a' }, 3, WIRE_BAD_VALUE },                     /* longer than there is */
		{ { 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 }, 12,
		  WIRE_BAD_VALUE },                                             /* an 11-byte varint */
		{ { 0x09, 1, 2 }, 3, WIRE_BAD_VALUE },                          /* a cut I64 */
	};
	for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
		i = 0;
		ck_assert_msg(wire_next(bad[k].b, bad[k].n, &i, &f) == bad[k].r, "case %zu", k);
		ck_assert_uint_eq(i, 0);
	}
}
END_TEST

/* The writers write what protobuf-c packs, field for field: defaults (-0.0 too) not written. */
START_TEST(writers_pack_as_protobuf_c)
{
	Pim__BandwidthProbe m = PIM__BANDWIDTH_PROBE__INIT;
	uint8_t want[512], got[512];

	for (int round = 0; round < 3; round++) {
		if (round == 1) {
			m.b_cpu = 16.754e9;
			m.source = (char *)"measured";
			m.spread = -0.0;
			m.method = (char *)"1 thread, 90th percentile of 9 rounds";
			m.measured_at = -5; /* int64: ten bytes of two's complement */
			m.busy = 1;
			m.host = (char *)"2 CPUs, 24 GiB";
		}
		if (round == 2) {
			m.measured = DBL_MAX;
			m.load = (char *)"";
			m.measured_at = INT64_MAX;
		}
		size_t wn = pim__bandwidth_probe__pack(&m, want);
		size_t n = 0;
		for (int pass = 0; pass < 2; pass++) {
			uint8_t *o = pass ? got : NULL;
			n = 0;
			n += wire_put_double(o ? o + n : NULL, 1, m.b_cpu);
			n += wire_put_string(o ? o + n : NULL, 2, m.source);
			n += wire_put_double(o ? o + n : NULL, 3, m.measured);
			n += wire_put_double(o ? o + n : NULL, 4, m.spread);
			n += wire_put_string(o ? o + n : NULL, 5, m.method);
			n += wire_put_uint(o ? o + n : NULL, 6, (uint64_t)m.measured_at);
			n += wire_put_uint(o ? o + n : NULL, 7, m.busy);
			n += wire_put_string(o ? o + n : NULL, 8, m.load);
			n += wire_put_string(o ? o + n : NULL, 9, m.host);
		}
		ck_assert_uint_eq(n, wn);
		ck_assert_mem_eq(got, want, wn);
	}
	/* a message present but empty: its tag and a length of 0 */
	Pim__Response r = PIM__RESPONSE__INIT;
	Pim__StatusReply s = PIM__STATUS_REPLY__INIT;
	r.body_case = PIM__RESPONSE__BODY_STATUS;
	r.status = &s;
	size_t wn = pim__response__pack(&r, want);
	ck_assert_uint_eq(wire_put_uint(got, 1, 0) + wire_put_len(got, PIM__RESPONSE__BODY_STATUS, 0), wn);
	ck_assert_mem_eq(got, want, wn);
}
END_TEST

struct probe_c {
	double b_cpu, measured, spread;
	char source[8];
	char method[64];
	int64_t measured_at;
	bool busy;
	char load[16];
	uint32_t low;
	uint64_t wide;
};

#define STR(num, f) { num, WIRE_SLOT_STRING, offsetof(struct probe_c, f), sizeof(((struct probe_c *)0)->f) }
#define NUM(num, kind, f) { num, kind, offsetof(struct probe_c, f), 0 }
static const struct wire_slot probe_slots[] = {
	NUM(1, WIRE_SLOT_DOUBLE, b_cpu), STR(2, source), NUM(3, WIRE_SLOT_DOUBLE, measured),
	NUM(4, WIRE_SLOT_DOUBLE, spread), STR(5, method), NUM(6, WIRE_SLOT_I64, measured_at),
	NUM(7, WIRE_SLOT_BOOL, busy), STR(8, load), NUM(10, WIRE_SLOT_U32, low), NUM(11, WIRE_SLOT_U64, wide),
};
#define N_PROBE_SLOTS (sizeof probe_slots / sizeof *probe_slots)

/* A table reads what protobuf-c packed: strings cut to fit at a character's start, an unknown
 * field skipped, the last of a field twice kept; bytes that are not whole fields, or a field of
 * another type than its slot's, refused. */
START_TEST(read_by_table)
{
	Pim__BandwidthProbe m = PIM__BANDWIDTH_PROBE__INIT;
	uint8_t b[512];
	struct probe_c c;

	m.b_cpu = 12.5e9;
	m.measured = -1.25;
	m.spread = 0.5;
	m.source = (char *)"configured";                /* 10 bytes into 8: "configu" */
	m.method = (char *)"90th percentile \xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
			   "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9";
	m.measured_at = -7;
	m.busy = 1;
	m.load = (char *)"load 0.1";
	m.host = (char *)"not in the table";             /* field 9 */
	size_t n = pim__bandwidth_probe__pack(&m, b);
	/* field 6 again at the end */
	b[n++] = 0x30;
	b[n++] = 0x05;
	memset(&c, 0x5a, sizeof c);
	c.wide = 77;
	c.low = 11;
	ck_assert_int_eq(wire_read(b, n, probe_slots, N_PROBE_SLOTS, &c), 0);
	ck_assert(c.b_cpu == 12.5e9 && c.measured == -1.25 && c.spread == 0.5);
	ck_assert_str_eq(c.source, "configu");
	ck_assert_uint_eq(strlen(c.method), 62);     /* 16 + 23 whole characters of 2 bytes */
	ck_assert_int_eq(strncmp(c.method, m.method, 62), 0);
	ck_assert_int_eq(c.measured_at, 5);           /* the last one */
	ck_assert(c.busy);
	ck_assert_str_eq(c.load, "load 0.1");
	ck_assert_uint_eq(c.low, 11);                 /* untouched */
	ck_assert_uint_eq(c.wide, 77);

	/* a NUL ends a string; the low 32 bits of a varint into U32, all 64 into U64 */
	const uint8_t nul[] = { 0x12, 4, 'a', 0, 'b', 'c', 0x50, 0x80, 0x80, 0x80, 0x80, 0x10,
				0x58, 0x80, 0x80, 0x80, 0x80, 0x10 };
	ck_assert_int_eq(wire_read(nul, sizeof nul, probe_slots, N_PROBE_SLOTS, &c), 0);
	ck_assert_str_eq(c.source, "a");
	ck_assert_uint_eq(c.low, 0);
	ck_assert_uint_eq(c.wide, 1ull << 32);
	/* a cut message; a string slot's field as a varint, a double's as a varint */
	ck_assert_int_lt(wire_read(b, n - 1, probe_slots, N_PROBE_SLOTS, &c), 0);
	const uint8_t str_as_varint[] = { 0x10, 0x01 }, dbl_as_varint[] = { 0x08, 0x01 };
	ck_assert_int_eq(wire_read(str_as_varint, 2, probe_slots, N_PROBE_SLOTS, &c), WIRE_BAD_VALUE);
	ck_assert_int_eq(wire_read(dbl_as_varint, 2, probe_slots, N_PROBE_SLOTS, &c), WIRE_BAD_VALUE);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("wire");
	TCase *tc = test_case(s, "wire");
	tcase_add_test(tc, varints);
	tcase_add_test(tc, fields_and_what_is_not_one);
	tcase_add_test(tc, writers_pack_as_protobuf_c);
	tcase_add_test(tc, read_by_table);
	return test_run_suite(s);
}
