/* SPDX-License-Identifier: MIT */
/* Unit tests of the text rules: util.c (text_check_n, text_prefix), the check of every
 * string of a request on the wire (decode.c, decode_request), and the growing text buffer
 * (strbuf.c). */
#include <string.h>

#include "decode.h"
#include "strbuf.h"
#include "test_util.h"

static const char *check(const char *s, size_t len, unsigned flags)
{
	static struct pim_error err;
	err = (struct pim_error){ 0 };
	int r = text_check_n("f", s, len, 16, flags, &err);
	ck_assert_int_eq(r, r ? -EINVAL : 0);
	return r ? err.msg : NULL;
}

START_TEST(utf8_and_control_characters)
{
	ck_assert_ptr_null(check("", 0, 0));
	ck_assert_str_eq(check("", 0, TEXT_REQUIRED), "f: must not be empty");
	ck_assert_ptr_null(check("abc", 3, 0));
	ck_assert_ptr_null(check("\xc3\xa9\xe2\x82\xac\xf4\x8f\xbf\xbf", 9, 0)); /* é € U+10FFFF */
	ck_assert_str_eq(check("0123456789abcdefg", 17, 0), "f: 17 bytes, at most 16 allowed");
	/* malformed: stray continuation, cut short, overlong, surrogate, beyond U+10FFFF, 0xff */
	ck_assert_str_eq(check("a\x80", 2, 0), "f: invalid UTF-8 at byte 1");
	ck_assert_str_eq(check("ab\xe2\x82", 4, 0), "f: invalid UTF-8 at byte 2");
	ck_assert_str_eq(check("\xc1\xbf", 2, 0), "f: invalid UTF-8 at byte 0");
	ck_assert_str_eq(check("\xe0\x80\xaf", 3, 0), "f: invalid UTF-8 at byte 0");
	ck_assert_str_eq(check("\xed\xbf\xbf", 3, 0), "f: invalid UTF-8 at byte 0");
	ck_assert_str_eq(check("\xf4\x90\x80\x80", 4, 0), "f: invalid UTF-8 at byte 0");
	ck_assert_str_eq(check("x\xff", 2, 0), "f: invalid UTF-8 at byte 1");
	/* NUL inside a string of given length */
	ck_assert_str_eq(check("nul\0evil", 8, 0), "f: contains a NUL byte at byte 3");
	ck_assert_str_eq(check("nul\0evil", 8, TEXT_ANY_CONTROL), "f: contains a NUL byte at byte 3");
	/* controls: C0, DEL, C1; lines where asked for; anything for the wire-level check */
	ck_assert_str_eq(check("a\tb", 3, 0), "f: contains a control character (U+0009) at byte 1");
	ck_assert_str_eq(check("a\x7f", 2, 0), "f: contains a control character (U+007F) at byte 1");
	ck_assert_str_eq(check("\xc2\x9b", 2, 0), "f: contains a control character (U+009B) at byte 0");
	ck_assert_str_eq(check("\x1b[2J", 4, 0), "f: contains a control character (U+001B) at byte 0");
	ck_assert_ptr_null(check("a,b\r\n\tc\n", 8, TEXT_LINES));
	ck_assert_str_eq(check("a\x7f\n", 3, TEXT_LINES), "f: contains a control character (U+007F) at byte 1");
	ck_assert_ptr_null(check("\x1b\x7f\xc2\x85", 4, TEXT_ANY_CONTROL));
	/* the NUL-terminated form */
	struct pim_error err = { 0 };
	ck_assert_int_eq(text_check("g", NULL, 4, 0, &err), 0);
	ck_assert_int_eq(text_check("g", NULL, 4, TEXT_REQUIRED, &err), -EINVAL);
	ck_assert_int_eq(text_check("g", "abcde", 4, 0, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "g: 5 bytes, at most 4 allowed");
}
END_TEST

START_TEST(prefixes_end_at_character_boundaries)
{
	ck_assert_uint_eq(text_prefix("abc", 64), 3);
	ck_assert_uint_eq(text_prefix("abc", 2), 2);
	ck_assert_uint_eq(text_prefix("", 2), 0);
	/* "aé": the 2-byte é does not fit in 2 bytes, whole in 3 */
	ck_assert_uint_eq(text_prefix("a\xc3\xa9", 2), 1);
	ck_assert_uint_eq(text_prefix("a\xc3\xa9", 3), 3);
	/* a 4-byte character at the limit */
	ck_assert_uint_eq(text_prefix("ab\xf0\x9f\x98\x80", 5), 2);
	ck_assert_uint_eq(text_prefix("ab\xf0\x9f\x98\x80", 6), 6);
	/* stops before invalid bytes and control characters */
	ck_assert_uint_eq(text_prefix("ab\xff" "cd", 64), 2);
	ck_assert_uint_eq(text_prefix("ab\x1b[31m", 64), 2);
	ck_assert_uint_eq(text_prefix("ab\x7f", 64), 2);
	char buf[80];
	int n = snprintf(buf, sizeof buf, "\"%.*s\"", TEXT_ECHO("xy\xe2\x82\xac", 4));
	ck_assert_int_eq(n, 4);
	ck_assert_str_eq(buf, "\"xy\"");
	n = snprintf(buf, sizeof buf, "\"%.*s\"", TEXT_ECHO((const char *)NULL, 4));
	ck_assert_str_eq(buf, "\"\"");
}
END_TEST

/* A packed Request with a model_load of manifest m. */
static uint8_t *packed_load(Pim__Manifest *m, size_t *len)
{
	Pim__ModelLoad ml = PIM__MODEL_LOAD__INIT;
	Pim__Request req = PIM__REQUEST__INIT;
	ml.manifest = m;
	req.id = 7;
	req.body_case = PIM__REQUEST__BODY_MODEL_LOAD;
	req.model_load = &ml;
	size_t n = pim__request__get_packed_size(&req);
	uint8_t *b = malloc(n);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(pim__request__pack(&req, b), n);
	*len = n;
	return b;
}

/* A packed Request with a model_load whose manifest has the given name and one region. */
static uint8_t *packed_request(const char *name, const char *region, size_t *len)
{
	Pim__Region r = PIM__REGION__INIT, *rs[1] = { &r };
	Pim__Manifest m = PIM__MANIFEST__INIT;
	r.name = (char *)region;
	r.op = "op";
	m.name = (char *)name;
	m.n_regions = 1;
	m.regions = rs;
	return packed_load(&m, len);
}

/* Decodes a frame as pimd does, with its strings checked: text.code, and its message in msg. */
static int wire_check(const uint8_t *b, size_t len, const char **msg)
{
	static struct pim_error text;
	struct pim_error err = { 0 };
	struct decode_budget budget;
	Pim__Request *req;
	int r = decode_request(b, len, &budget, &req, &text, &err);
	if (r < 0) {
		*msg = NULL;
		return r;
	}
	pim__request__free_unpacked(req, &budget.alloc);
	*msg = text.msg;
	return text.code;
}

START_TEST(strings_are_checked_on_the_wire)
{
	const char *msg;
	size_t len;

	/* a well-formed request passes */
	uint8_t *b = packed_request("m1", "r\xc3\xa9gion", &len);
	ck_assert_int_eq(wire_check(b, len, &msg), 0);
	free(b);

	/* "nul\0evil": protobuf-c itself hands the name over as "nul" */
	Pim__Manifest m = PIM__MANIFEST__INIT;
	m.name = "nulXevil";
	uint8_t buf[64];
	size_t n = pim__manifest__pack(&m, buf);
	uint8_t *x = memchr(buf, 'X', n);
	ck_assert_ptr_nonnull(x);
	*x = 0;
	Pim__Manifest *got = pim__manifest__unpack(NULL, n, buf);
	ck_assert_ptr_nonnull(got);
	ck_assert_str_eq(got->name, "nul");
	pim__manifest__free_unpacked(got, NULL);
	b = packed_request("nulXevil", "r", &len);
	x = memchr(b, 'X', len);
	*x = 0;
	ck_assert_int_eq(wire_check(b, len, &msg), -EINVAL);
	ck_assert_str_eq(msg, "model_load.manifest.name: contains a NUL byte at byte 3");
	free(b);

	/* the same deeper, with the path of the field */
	b = packed_request("m1", "regXon", &len);
	x = memchr(b, 'X', len);
	ck_assert_ptr_nonnull(x);
	*x = 0;
	ck_assert_int_eq(wire_check(b, len, &msg), -EINVAL);
	ck_assert_str_eq(msg, "model_load.manifest.regions[0].name: contains a NUL byte at byte 3");
	*x = 0xff;
	ck_assert_int_eq(wire_check(b, len, &msg), -EINVAL);
	ck_assert_str_eq(msg, "model_load.manifest.regions[0].name: invalid UTF-8 at byte 3");
	/* control characters are the fields' business, not the wire's */
	*x = 0x7f;
	ck_assert_int_eq(wire_check(b, len, &msg), 0);
	/* a length running past the end is not a message */
	ck_assert_int_eq(wire_check(b, len - 1, &msg), -EBADMSG);
	free(b);

	/* the index of a repeated message: the third region; the first bad string is named */
	Pim__Region r[3] = { PIM__REGION__INIT, PIM__REGION__INIT, PIM__REGION__INIT };
	Pim__Region *rs[3] = { &r[0], &r[1], &r[2] };
	r[0].name = "a";
	r[1].name = "b";
	r[2].name = "cXc";
	r[2].op = "dYd";
	m.name = "ok";
	m.n_regions = 3;
	m.regions = rs;
	b = packed_load(&m, &len);
	*(uint8_t *)memchr(b, 'X', len) = 0xc0;
	*(uint8_t *)memchr(b, 'Y', len) = 0;
	ck_assert_int_eq(wire_check(b, len, &msg), -EINVAL);
	ck_assert_str_eq(msg, "model_load.manifest.regions[2].name: invalid UTF-8 at byte 1");
	free(b);
	/* bytes fields and unknown fields are not strings: tag 15 (unknown) of a Manifest, wire
	 * type 2, inside a model_load (field 4 of Request, manifest field 1 of ModelLoad) */
	const uint8_t unknown[] = { 0x22, 0x06, 0x0a, 0x04, 0x7a, 0x02, 0xff, 0x00 };
	ck_assert_int_eq(wire_check(unknown, sizeof unknown, &msg), 0);
}
END_TEST

START_TEST(trim_in_place)
{
	char a[] = " \t key = 1 \r\n", b[] = "   ", c[] = "x";
	ck_assert_str_eq(text_trim(a), "key = 1");
	ck_assert_str_eq(text_trim(b), "");
	ck_assert_str_eq(text_trim(c), "x");
}
END_TEST

/* A table like pimd.conf's: each entry starts with its name. */
static const struct kv_test_key {
	const char *name;
	int id;
} kv_keys[] = { { "alpha", 10 }, { "beta", 20 } };

struct kv_seen {
	char got[128];
};

static int kv_collect(void *ctx, size_t key, const char *value, const char *where,
		      struct pim_error *err)
{
	struct kv_seen *s = ctx;
	if (strcmp(value, "bad") == 0)
		return err_set(err, -ERANGE, "%s: %s refused", where, kv_keys[key].name);
	size_t n = strlen(s->got);
	snprintf(s->got + n, sizeof s->got - n, "%d=%s;", kv_keys[key].id, value);
	return 0;
}

static int kv(const char *text, unsigned flags, size_t line_max, struct kv_seen *s,
	      struct pim_error *err)
{
	memset(s, 0, sizeof *s);
	return kv_parse(text, strlen(text), "f.conf", flags, line_max, kv_keys, 2,
			sizeof kv_keys[0], kv_collect, s, err);
}

START_TEST(key_value_lines)
{
	struct kv_seen s;
	struct pim_error err;

	/* blank lines, comment lines, spaces around key and value, CRLF */
	ck_assert_int_eq(kv("# c\n\n  alpha =  a b \r\nbeta=2\n", 0, 64, &s, &err), 0);
	ck_assert_str_eq(s.got, "10=a b;20=2;");
	/* a '#' after a value: part of it, unless inline comments are on */
	ck_assert_int_eq(kv("alpha = x # y\n", 0, 64, &s, &err), 0);
	ck_assert_str_eq(s.got, "10=x # y;");
	ck_assert_int_eq(kv("alpha = x # y\n", KV_INLINE_COMMENTS, 64, &s, &err), 0);
	ck_assert_str_eq(s.got, "10=x;");

	ck_assert_int_eq(kv("alpha 1\n", 0, 64, &s, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "f.conf:1: expected \"key = value\"");
	ck_assert_int_eq(kv("\ngamma = 1\n", 0, 64, &s, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "f.conf:2: unknown key \"gamma\"");
	ck_assert_int_eq(kv("beta = 1\nbeta = 2\n", 0, 64, &s, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "f.conf:2: key \"beta\" is set twice");
	ck_assert_int_eq(kv("alpha =  \n", 0, 64, &s, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "f.conf:1: key \"alpha\" has no value");
	ck_assert_int_eq(kv("alpha = 123456789\n", 0, 16, &s, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "f.conf:1: line longer than 15 bytes");
	ck_assert_int_eq(kv_parse("alpha = a\0b\n", 12, "f.conf", 0, 64, kv_keys, 2,
				  sizeof kv_keys[0], kv_collect, &s, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "f.conf:1: contains a NUL byte");
	/* the setter's error stops the parse, as it is */
	ck_assert_int_eq(kv("alpha = 1\nbeta = bad\nalpha = 3\n", 0, 64, &s, &err), -ERANGE);
	ck_assert_str_eq(err.msg, "f.conf:2: beta refused");
	ck_assert_str_eq(s.got, "10=1;");
}
END_TEST

START_TEST(strbuf_grows_and_stops_at_its_limit)
{
	struct strbuf b = { 0 };
	size_t len = 99;
	char *t = strbuf_take(&b, &len); /* nothing written: "", not NULL */
	ck_assert_str_eq(t, "");
	ck_assert_uint_eq(len, 0);
	free(t);

	/* 1000 pieces of 7 bytes: past the first 256-byte block and several doublings */
	for (int i = 0; i < 1000; i++)
		strbuf_printf(&b, "%06d,", i);
	ck_assert_int_eq(b.error, 0);
	ck_assert_uint_eq(b.len, 7000);
	ck_assert_uint_eq(b.cap, 8192);
	ck_assert_mem_eq(b.p + 6993, "000999,", 8);
	/* one piece bigger than all that is left (formatted twice: first into what is left) */
	char big[3000];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	strbuf_printf(&b, "[%s]", big);
	strbuf_put(&b, "a\0b", 3); /* bytes as given, NUL included */
	ck_assert_uint_eq(b.len, 7000 + 3001 + 3);
	ck_assert_int_eq(b.p[7000], '[');
	ck_assert_int_eq(b.p[10000], ']');
	ck_assert_mem_eq(b.p + 10001, "a\0b\0", 4);
	t = strbuf_take(&b, &len);
	ck_assert_uint_eq(len, 10004);
	ck_assert_ptr_null(b.p);
	free(t);

	/* max counts the NUL: 8 bytes hold 7 characters; the first refusal sticks */
	b = (struct strbuf){ .max = 8 };
	strbuf_puts(&b, "abc");
	strbuf_printf(&b, "%d", 1234);
	ck_assert_int_eq(b.error, 0);
	ck_assert_str_eq(b.p, "abc1234");
	strbuf_puts(&b, "x");
	ck_assert_int_eq(b.error, -E2BIG);
	ck_assert_str_eq(b.p, "abc1234"); /* what was there is whole */
	b.error = 0;
	strbuf_printf(&b, "%s", "yz"); /* fits in the allocation, not in max */
	ck_assert_int_eq(b.error, -E2BIG);
	ck_assert_str_eq(b.p, "abc1234");
	strbuf_puts(&b, "");
	ck_assert_ptr_null(strbuf_take(&b, &len));
	ck_assert_int_eq(b.error, -E2BIG);
	ck_assert_ptr_null(b.p);
}
END_TEST

/* Text for a terminal (pimctl): controls and bidirectional controls escaped, the rest kept. */
static void ck_terminal(const char *in, const char *want)
{
	char *got = text_for_terminal(in);
	ck_assert_ptr_nonnull(got);
	ck_assert_str_eq(got, want);
	free(got);
}

START_TEST(terminal_text_escapes_controls_and_bidi_overrides)
{
	ck_terminal(NULL, "");
	ck_terminal("decoder-block", "decoder-block");
	ck_terminal("\xc3\xa9\xe2\x82\xac\xe4\xb8\xad", "\xc3\xa9\xe2\x82\xac\xe4\xb8\xad"); /* é € 中 */
	/* "evil<RLO>txt.exe" shows as "evilexe.txt" on a terminal */
	ck_terminal("evil\xe2\x80\xaetxt.exe", "evil\\u202Etxt.exe");
	/* every bidirectional control: ALM, LRM, RLM, LRE..RLO, LRI..PDI */
	ck_terminal("\xd8\x9c\xe2\x80\x8e\xe2\x80\x8f", "\\u061C\\u200E\\u200F");
	ck_terminal("\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad\xe2\x80\xae",
		    "\\u202A\\u202B\\u202C\\u202D\\u202E");
	ck_terminal("\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9", "\\u2066\\u2067\\u2068\\u2069");
	/* their neighbours are ordinary characters: ZWJ U+200D, U+2029, U+202F, U+2065, U+206A */
	ck_terminal("\xe2\x80\x8d\xe2\x80\xa9\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa",
		    "\xe2\x80\x8d\xe2\x80\xa9\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa");
	/* C0 (an escape sequence), DEL, C1, and bytes that are not UTF-8 */
	ck_terminal("\x1b[2Jx\ty\x7f\xc2\x9b", "\\u001B[2Jx\\u0009y\\u007F\\u009B");
	ck_terminal("a\xff\xe2\x80", "a\\xFF\\xE2\\x80");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("text");
	TCase *tc = test_case(s, "text");
	tcase_add_test(tc, utf8_and_control_characters);
	tcase_add_test(tc, prefixes_end_at_character_boundaries);
	tcase_add_test(tc, strings_are_checked_on_the_wire);
	tcase_add_test(tc, trim_in_place);
	tcase_add_test(tc, key_value_lines);
	tcase_add_test(tc, strbuf_grows_and_stops_at_its_limit);
	tcase_add_test(tc, terminal_text_escapes_controls_and_bidi_overrides);
	return test_run_suite(s);
}
