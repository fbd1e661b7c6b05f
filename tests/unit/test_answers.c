/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of daemon/answers.c: the answers kept in memory on the event loop.  The wire bytes
 * are checked against protobuf-c's own packing and unpacking of pim.proto's messages.
 */
#include <string.h>

#include "answers.h"
#include "pim.pb-c.h"
#include "test_util.h"

/* A packed Request asking for model `name` (a ModelShow), with id. */
static size_t show_request(uint8_t *buf, uint64_t id, const char *name)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__ModelShow show = PIM__MODEL_SHOW__INIT;

	show.name = (char *)name;
	req.id = id;
	req.body_case = PIM__REQUEST__BODY_MODEL_SHOW;
	req.model_show = &show;
	ck_assert_uint_le(pim__request__get_packed_size(&req), 256);
	return pim__request__pack(&req, buf);
}

/* A packed Response with id: an Error whose message is msg (any body does). */
static size_t response(uint8_t *buf, uint64_t id, const char *msg)
{
	Pim__Response r = PIM__RESPONSE__INIT;
	Pim__Error e = PIM__ERROR__INIT;

	e.message = (char *)msg;
	r.id = id;
	r.body_case = PIM__RESPONSE__BODY_ERROR;
	r.error = &e;
	ck_assert_uint_le(pim__response__get_packed_size(&r), 4096);
	return pim__response__pack(&r, buf);
}

START_TEST(key_leaves_the_id_out)
{
	uint8_t a[256], b[256], c[256];
	const uint8_t *ka, *kb, *kc;
	size_t na = show_request(a, 1, "gemv"), nb = show_request(b, 300000, "gemv"),
	       nc = show_request(c, 1, "gemw"), la, lb, lc;

	ck_assert(answers_key(a, na, &ka, &la));
	ck_assert(answers_key(b, nb, &kb, &lb));
	ck_assert(answers_key(c, nc, &kc, &lc));
	/* the same request under two ids: one key, 2 and 4 bytes shorter than each */
	ck_assert_uint_eq(la, lb);
	ck_assert_uint_eq(la, na - 2);
	ck_assert_uint_eq(lb, nb - 4);
	ck_assert_mem_eq(ka, kb, la);
	/* another model: another key */
	ck_assert_uint_eq(la, lc);
	ck_assert(memcmp(ka, kc, la) != 0);
	/* id 0 is not written: the whole payload is the key */
	size_t n0 = show_request(a, 0, "gemv");
	ck_assert(answers_key(a, n0, &ka, &la));
	ck_assert_ptr_eq(ka, a);
	ck_assert_uint_eq(la, n0);
	/* an id cut off in the middle of its varint, and a request over the limit: no key */
	const uint8_t cut[] = { 0x08, 0x80, 0x80 };
	ck_assert(!answers_key(cut, sizeof cut, &ka, &la));
	static uint8_t big[ANSWERS_MAX_KEY + 1];
	ck_assert(!answers_key(big, sizeof big, &ka, &la));
	ck_assert(answers_key(big, sizeof big - 1, &ka, &la));
}
END_TEST

START_TEST(an_answer_kept_is_sent_with_the_asking_id)
{
	struct answers *a = answers_new(0, 0);
	uint8_t req[256], resp[4096], out[4200];
	const uint8_t *key, *body;
	size_t klen, n;
	size_t rn = show_request(req, 7, "gemv");
	size_t pn = response(resp, 7, "the answer");

	ck_assert(answers_key(req, rn, &key, &klen));
	ck_assert_ptr_null(answers_get(a, key, klen, 5, &n));
	ck_assert(answers_put(a, key, klen, 5, 5, resp, pn));
	ck_assert_ptr_nonnull(body = answers_get(a, key, klen, 5, &n));
	ck_assert_uint_eq(n, pn - 2); /* without its id */
	const uint64_t ids[] = { 0, 1, 127, 128, 300000, UINT64_MAX };
	for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
		size_t m = answers_size(ids[i], n);
		ck_assert_uint_le(m, sizeof out);
		answers_write(out, ids[i], body, n);
		Pim__Response *r = pim__response__unpack(NULL, m, out);
		ck_assert_ptr_nonnull(r);
		ck_assert_uint_eq(r->id, ids[i]);
		ck_assert_int_eq(r->body_case, PIM__RESPONSE__BODY_ERROR);
		ck_assert_str_eq(r->error->message, "the answer");
		/* byte for byte what protobuf-c packs for that id */
		uint8_t want[4200];
		ck_assert_uint_eq(response(want, ids[i], "the answer"), m);
		ck_assert_mem_eq(out, want, m);
		pim__response__free_unpacked(r, NULL);
	}
	struct answers_stats st;
	answers_stats(a, &st);
	ck_assert_uint_eq(st.hits, 1);
	ck_assert_uint_eq(st.misses, 1);
	ck_assert_uint_eq(st.kept, 1);
	ck_assert_uint_eq(st.entries, 1);
	answers_free(a);
}
END_TEST

START_TEST(a_version_gone_by_is_never_answered)
{
	struct answers *a = answers_new(0, 0);
	uint8_t req[256], resp[4096];
	const uint8_t *key, *body;
	size_t klen, n;
	size_t rn = show_request(req, 1, "gemv");
	size_t pn = response(resp, 1, "old");

	ck_assert(answers_key(req, rn, &key, &klen));
	/* asked at 3, back at 4 (something changed meanwhile): not kept */
	ck_assert(!answers_put(a, key, klen, 3, 4, resp, pn));
	ck_assert_ptr_null(answers_get(a, key, klen, 4, &n));
	/* kept at 4; asked at 5: not answered */
	ck_assert(answers_put(a, key, klen, 4, 4, resp, pn));
	ck_assert_ptr_nonnull(answers_get(a, key, klen, 4, &n));
	ck_assert_ptr_null(answers_get(a, key, klen, 5, &n));
	/* the new version's answer takes its place */
	pn = response(resp, 1, "new");
	ck_assert(answers_put(a, key, klen, 5, 5, resp, pn));
	ck_assert_ptr_nonnull(body = answers_get(a, key, klen, 5, &n));
	Pim__Response *r = pim__response__unpack(NULL, n, body);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(r->error->message, "new");
	pim__response__free_unpacked(r, NULL);
	/* an answer of the same version asked twice: the first stays */
	pn = response(resp, 1, "newer");
	ck_assert(answers_put(a, key, klen, 5, 5, resp, pn));
	body = answers_get(a, key, klen, 5, &n);
	r = pim__response__unpack(NULL, n, body);
	ck_assert_str_eq(r->error->message, "new");
	pim__response__free_unpacked(r, NULL);
	struct answers_stats st;
	answers_stats(a, &st);
	ck_assert_uint_eq(st.entries, 1);
	ck_assert_uint_eq(st.refused, 1);
	answers_free(a);
}
END_TEST

START_TEST(the_limits_hold)
{
	/* 4 answers at most, in 4 KiB */
	struct answers *a = answers_new(4, 4096);
	uint8_t req[256], resp[4096];
	const uint8_t *key;
	size_t klen, n;
	char name[32];
	struct answers_stats st;

	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof name, "model%d", i);
		size_t rn = show_request(req, 1, name), pn = response(resp, 1, "x");
		ck_assert(answers_key(req, rn, &key, &klen));
		ck_assert(answers_put(a, key, klen, 1, 1, resp, pn));
		answers_stats(a, &st);
		ck_assert_uint_le(st.entries, 4);
		ck_assert_uint_le(st.bytes, 4096);
		ck_assert_ptr_nonnull(answers_get(a, key, klen, 1, &n));
	}
	answers_stats(a, &st);
	ck_assert_uint_ge(st.emptied, 2); /* full after 4, then after 8 */
	/* an answer over a quarter of the cache is not kept */
	static char big[1100];
	memset(big, 'b', sizeof big - 1);
	size_t rn = show_request(req, 1, "big"), pn = response(resp, 1, big);
	ck_assert(answers_key(req, rn, &key, &klen));
	ck_assert(!answers_put(a, key, klen, 1, 1, resp, pn));
	ck_assert_ptr_null(answers_get(a, key, klen, 1, &n));
	/* nor one whose id is cut off */
	const uint8_t cut[] = { 0x08, 0xff };
	ck_assert(!answers_put(a, key, klen, 1, 1, cut, sizeof cut));
	answers_free(a);
}
END_TEST

/* Many keys in a small table, half of them replaced by a later version: each is found. */
START_TEST(every_key_is_found_among_many)
{
	struct answers *a = answers_new(64, 0);
	uint8_t req[256], resp[4096];
	const uint8_t *key, *body;
	size_t klen, n;
	char name[32];

	for (int v = 1; v <= 2; v++)
		for (int i = 0; i < 64; i += v) {
			snprintf(name, sizeof name, "m%d", i);
			size_t rn = show_request(req, (uint64_t)i, name);
			snprintf(name, sizeof name, "v%d-%d", v, i);
			size_t pn = response(resp, (uint64_t)i, name);
			ck_assert(answers_key(req, rn, &key, &klen));
			ck_assert(answers_put(a, key, klen, (uint64_t)(v == 2 ? 2 : 1), (uint64_t)(v == 2 ? 2 : 1),
					      resp, pn));
		}
	for (int i = 0; i < 64; i++) {
		snprintf(name, sizeof name, "m%d", i);
		size_t rn = show_request(req, 9, name);
		ck_assert(answers_key(req, rn, &key, &klen));
		uint64_t v = i % 2 ? 1 : 2;
		ck_assert_ptr_nonnull(body = answers_get(a, key, klen, v, &n));
		Pim__Response *r = pim__response__unpack(NULL, n, body);
		snprintf(name, sizeof name, "v%d-%d", (int)v, i);
		ck_assert_str_eq(r->error->message, name);
		pim__response__free_unpacked(r, NULL);
	}
	struct answers_stats st;
	answers_stats(a, &st);
	ck_assert_uint_eq(st.entries, 64);
	ck_assert_uint_eq(st.emptied, 0);
	answers_free(a);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("answers");
	TCase *tc = test_case(s, "answers");

	tcase_add_test(tc, key_leaves_the_id_out);
	tcase_add_test(tc, an_answer_kept_is_sent_with_the_asking_id);
	tcase_add_test(tc, a_version_gone_by_is_never_answered);
	tcase_add_test(tc, the_limits_hold);
	tcase_add_test(tc, every_key_is_found_among_many);
	return test_run_suite(s);
}
