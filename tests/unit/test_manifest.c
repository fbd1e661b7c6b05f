/* SPDX-License-Identifier: MIT */
/* Unit tests of common/manifest.c: JSON and binary input, validation by field name. */
#include <fcntl.h>
#include <string.h>

#include "manifest.h"
#include "test_util.h"

/* A small valid manifest: two allocations, two regions (fill then an in-place update). */
static const char good[] =
	"{ \"name\": \"m1\", \"source\": \"test\",\n"
	"  \"allocations\": [ { \"id\": 7, \"bytes\": 4096, \"kind\": \"argument\", \"name\": \"%a\" },\n"
	"                     { \"id\": 9, \"bytes\": 1024, \"kind\": \"alloc\" } ],\n"
	"  \"regions\": [\n"
	"    { \"id\": 0, \"name\": \"fill\", \"op\": \"linalg.fill\", \"order\": 0, \"n_par\": 256,\n"
	"      \"n_total\": 256, \"parallel_extents\": [256], \"reduction_extents\": [],\n"
	"      \"operands\": [ { \"allocation\": 9, \"bytes\": 1024, \"elem_type\": \"f32\",\n"
	"                      \"elem_bits\": 32, \"role\": \"out\" } ] },\n"
	"    { \"id\": 1, \"name\": \"acc\", \"op\": \"linalg.matvec\", \"order\": 1, \"n_par\": 256,\n"
	"      \"n_total\": 1024, \"trip\": 3, \"parallel_extents\": [256], \"reduction_extents\": [4],\n"
	"      \"operands\": [ { \"allocation\": 7, \"bytes\": 4096, \"role\": \"in\" },\n"
	"                      { \"allocation\": 9, \"bytes\": 1024, \"role\": \"inout\" } ] } ] }\n";

static Pim__Manifest *parse_ok(const char *json)
{
	struct pim_error err = { 0 };
	Pim__Manifest *m = NULL;
	int r = manifest_from_json(json, strlen(json), &m, &err);
	ck_assert_msg(r == 0, "parse failed: %s", err.msg);
	r = manifest_validate(m, &err);
	ck_assert_msg(r == 0, "validation failed: %s", err.msg);
	return m;
}

/* Replaces the first occurrence of from with to in good and expects an error containing want. */
static void expect_error(const char *from, const char *to, const char *want)
{
	char buf[4096];
	const char *p = strstr(good, from);
	ck_assert_msg(p != NULL, "test bug: '%s' not in the manifest", from);
	snprintf(buf, sizeof buf, "%.*s%s%s", (int)(p - good), good, to, p + strlen(from));
	struct pim_error err = { 0 };
	Pim__Manifest *m = NULL;
	int r = manifest_from_json(buf, strlen(buf), &m, &err);
	if (r == 0) {
		r = manifest_validate(m, &err);
		pim__manifest__free_unpacked(m, NULL);
	}
	ck_assert_int_eq(r, -EINVAL);
	ck_assert_msg(strstr(err.msg, want) != NULL, "error \"%s\" lacks \"%s\"", err.msg, want);
}

START_TEST(good_manifest_parses)
{
	Pim__Manifest *m = parse_ok(good);
	ck_assert_str_eq(m->name, "m1");
	ck_assert_uint_eq(m->n_allocations, 2);
	ck_assert_uint_eq(m->n_regions, 2);
	ck_assert_uint_eq(m->regions[1]->trip, 3);
	ck_assert_uint_eq(m->regions[0]->trip, 0); /* omitted: means 1 */
	ck_assert_int_eq(m->regions[1]->operands[1]->role, PIM__OPERAND_ROLE__OPERAND_ROLE_INOUT);
	ck_assert_int_eq(m->allocations[1]->kind, PIM__ALLOC_KIND__ALLOC_KIND_ALLOC);
	ck_assert_uint_eq(manifest_allocation_bytes(m), 5120);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

START_TEST(errors_name_the_field)
{
	expect_error("\"id\": 9,", "\"id\": 7,", "allocations: id 7 appears more than once");
	expect_error("\"allocation\": 7,", "\"allocation\": 8,",
		     "regions[1].operands[0].allocation_id: 8 is not a known allocation");
	expect_error("\"bytes\": 1024, \"kind\"", "\"bytes\": 0, \"kind\"", "allocations[1].bytes: 0 is outside");
	expect_error("\"n_total\": 1024", "\"n_total\": 100", "regions[1].n_par: 256 exceeds n_total 100");
	expect_error("\"reduction_extents\": [4]", "\"reduction_extents\": [5]",
		     "regions[1].reduction_extents: parallel x reduction extents differ from n_total 1024");
	expect_error("\"order\": 1", "\"order\": 0", "regions: order: 0 appears more than once");
	expect_error("\"id\": 1,", "\"id\": 0,", "regions: id: 0 appears more than once");
	expect_error("\"name\": \"m1\"", "\"name\": \"../etc\"", "name: \"../etc\" is not a valid model name");
	expect_error("\"role\": \"in\"", "\"role\": \"sideways\"",
		     "regions[1].operands[0].role: \"sideways\" is not one of in, out, inout");
	expect_error("\"kind\": \"alloc\"", "\"kind\": \"heap\"", "allocations[1].kind");
	expect_error("\"bytes\": 4096, \"role\"", "\"bytes\": 8192, \"role\"",
		     "regions[1].operands[0].bytes: 8192 exceeds allocation 7 (4096 bytes)");
	expect_error("\"source\": \"test\"", "\"source\": \"test\", \"colour\": 1", "colour: unknown key");
	expect_error("\"trip\": 3", "\"trip\": -3", "regions[1].trip: must be a non-negative integer");
	expect_error("\"n_par\": 256,\n      \"n_total\": 1024", "\"n_par\": \"many\",\n      \"n_total\": 1024",
		     "regions[1].n_par: must be a non-negative integer");
	expect_error("\"op\": \"linalg.fill\",", "\"op\": \"\",", "regions[0].op: must not be empty");
	expect_error("\"elem_bits\": 32", "\"elem_bits\": 99999", "regions[0].operands[0].elem_bits");
	/* region ids index dense tables: bounded */
	expect_error("\"id\": 1,", "\"id\": 4294967295,", "regions[1].id: 4294967295 exceeds 1000000");
	/* a sum of allocations past the 1 PiB limit, each within it */
	expect_error("\"bytes\": 4096, \"kind\"", "\"bytes\": 1125899906842624, \"kind\"",
		     "allocations[1].bytes: the allocations add up to more than");
	/* an overflowing extent product */
	expect_error("\"parallel_extents\": [256], \"reduction_extents\": [4]",
		     "\"parallel_extents\": [4294967296, 4294967296], \"reduction_extents\": [4]",
		     "regions[1].parallel_extents: product exceeds");
	/* each failing field named, though names are written only on failure */
	expect_error("\"elem_type\": \"f32\"", "\"elem_type\": \"f32-but-much-too-long\"",
		     "regions[0].operands[0].elem_type: 21 bytes, at most 16 allowed");
	expect_error("\"name\": \"acc\"", "\"name\": \"acc\", \"location\": \"a\\u0001\"",
		     "regions[1].location: contains a control character (U+0001) at byte 1");
	expect_error("\"name\": \"%a\"", "\"name\": \"\\u0007\"",
		     "allocations[0].name: contains a control character (U+0007) at byte 0");
	expect_error("\"reduction_extents\": [4]", "\"reduction_extents\": [4, 0]",
		     "regions[1].reduction_extents[1]: must be at least 1");
}
END_TEST

START_TEST(json_syntax_errors_give_a_line)
{
	struct pim_error err = { 0 };
	Pim__Manifest *m = NULL;
	const char *bad = "{\n \"name\": \"x\",\n \"regions\": [ }\n";
	ck_assert_int_eq(manifest_from_json(bad, strlen(bad), &m, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "JSON syntax error near line 3"), "%s", err.msg);
	const char *two = "{ \"name\": \"x\" } { }";
	ck_assert_int_eq(manifest_from_json(two, strlen(two), &m, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "near line 1") || strstr(err.msg, "trailing data"), "%s", err.msg);
	const char *arr = "[1, 2]";
	ck_assert_int_eq(manifest_from_json(arr, strlen(arr), &m, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "top level must be a JSON object"), "%s", err.msg);
}
END_TEST

/* Absurd counts are refused by their count, before anything is dereferenced. */
START_TEST(absurd_counts_refused)
{
	struct pim_error err = { 0 };
	Pim__Manifest m = PIM__MANIFEST__INIT;
	Pim__Allocation a = PIM__ALLOCATION__INIT, *ap = &a;
	m.name = "big";
	m.n_allocations = MANIFEST_ALLOCATIONS_MAX + 1;
	m.n_regions = 1;
	ck_assert_int_eq(manifest_validate(&m, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "allocations: 1000001 allocations, at most 1000000"), "%s", err.msg);
	a.id = 1;
	a.bytes = 64;
	a.kind = PIM__ALLOC_KIND__ALLOC_KIND_ALLOC;
	m.allocations = &ap;
	m.n_allocations = 1;
	m.n_regions = MANIFEST_REGIONS_MAX + 1;
	ck_assert_int_eq(manifest_validate(&m, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "regions: 1000001 regions"), "%s", err.msg);
	m.n_regions = 0;
	ck_assert_int_eq(manifest_validate(&m, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "at least one region"), "%s", err.msg);
}
END_TEST

/* JSON → manifest → JSON → manifest keeps every field; binary files load the same. */
START_TEST(round_trips)
{
	Pim__Manifest *m = parse_ok(good), *m2 = NULL, *m3 = NULL;
	struct pim_error err = { 0 };
	json_object *j = manifest_to_json(m);
	const char *s = json_object_to_json_string(j);
	ck_assert_int_eq(manifest_from_json(s, strlen(s), &m2, &err), 0);
	size_t n1 = pim__manifest__get_packed_size(m), n2 = pim__manifest__get_packed_size(m2);
	uint8_t *b1 = malloc(n1), *b2 = malloc(n2);
	pim__manifest__pack(m, b1);
	pim__manifest__pack(m2, b2);
	/* trip 0 becomes 1 explicitly: the one intended difference */
	ck_assert_uint_eq(m2->regions[0]->trip, 1);
	m2->regions[0]->trip = 0;
	free(b2);
	n2 = pim__manifest__get_packed_size(m2);
	b2 = malloc(n2);
	pim__manifest__pack(m2, b2);
	ck_assert_uint_eq(n1, n2);
	ck_assert_mem_eq(b1, b2, n1);

	char path[] = "/tmp/pimd-test-manifest-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, b1, n1), (ssize_t)n1);
	close(fd);
	ck_assert_int_eq(manifest_read_file(path, &m3, &err), 0);
	ck_assert_str_eq(m3->regions[1]->op, "linalg.matvec");
	pim__manifest__free_unpacked(m3, NULL);
	/* garbage is neither form */
	fd = open(path, O_WRONLY | O_TRUNC);
	ck_assert_int_eq(write(fd, "\xff\xff\xff\xff", 4), 4);
	close(fd);
	ck_assert_int_eq(manifest_read_file(path, &m3, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "neither JSON nor a valid protobuf Manifest"), "%s", err.msg);
	unlink(path);
	ck_assert_int_eq(manifest_read_file(path, &m3, &err), -ENOENT);
	ck_assert_msg(strstr(err.msg, "No such file"), "%s", err.msg);
	free(b1);
	free(b2);
	json_object_put(j);
	pim__manifest__free_unpacked(m, NULL);
	pim__manifest__free_unpacked(m2, NULL);
}
END_TEST

START_TEST(bundled_example_is_valid)
{
	struct pim_error err = { 0 };
	Pim__Manifest *m = NULL;
	int r = manifest_read_file("examples/decoder-block.json", &m, &err);
	ck_assert_msg(r == 0, "%s", err.msg);
	ck_assert_uint_eq(m->n_regions, 17);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

START_TEST(names)
{
	ck_assert(manifest_name_valid("gpt-j.block_0"));
	ck_assert(!manifest_name_valid(""));
	ck_assert(!manifest_name_valid("-x"));
	ck_assert(!manifest_name_valid(".hidden"));
	ck_assert(!manifest_name_valid("a/b"));
	ck_assert(!manifest_name_valid("a b"));
	char longname[MANIFEST_NAME_MAX + 2];
	memset(longname, 'a', sizeof longname - 1);
	longname[sizeof longname - 1] = 0;
	ck_assert(!manifest_name_valid(longname));
	longname[MANIFEST_NAME_MAX] = 0;
	ck_assert(manifest_name_valid(longname));
}
END_TEST

/* The interface digest: names, sources and listing order do not count; sizes and loops do.
 * The value of the small manifest is FNV-1a 64 over the sequence of manifest.h, worked out with
 * an independent implementation (Python, the same 8-byte little-endian words). */
static Pim__Manifest *edited(const char *from, const char *to)
{
	char buf[4096];
	const char *p = strstr(good, from);
	ck_assert_msg(p != NULL, "test bug: '%s' not in the manifest", from);
	snprintf(buf, sizeof buf, "%.*s%s%s", (int)(p - good), good, to, p + strlen(from));
	return parse_ok(buf);
}

START_TEST(digest)
{
	Pim__Manifest *m = parse_ok(good);
	uint64_t d = manifest_digest(m);
	ck_assert_uint_eq(d, UINT64_C(0xccd630600cfca7a9));
	struct { const char *from, *to; bool same; } cases[] = {
		{ "\"name\": \"m1\"", "\"name\": \"renamed\"", true },
		{ "\"source\": \"test\"", "\"source\": \"elsewhere\"", true },
		{ "\"name\": \"fill\"", "\"name\": \"zero\"", true },
		{ "\"bytes\": 4096, \"kind\"", "\"bytes\": 8192, \"kind\"", false },
		{ "\"trip\": 3", "\"trip\": 4", false },
		{ "\"kind\": \"alloc\"", "\"kind\": \"global\"", false },
		{ "\"role\": \"in\"", "\"role\": \"inout\"", false },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		Pim__Manifest *e = edited(cases[i].from, cases[i].to);
		ck_assert_msg((manifest_digest(e) == d) == cases[i].same, "case %zu: %s", i, cases[i].to);
		pim__manifest__free_unpacked(e, NULL);
	}
	/* listing order does not count: swap the two allocations and the two regions */
	Pim__Allocation *a = m->allocations[0];
	m->allocations[0] = m->allocations[1];
	m->allocations[1] = a;
	Pim__Region *r = m->regions[0];
	m->regions[0] = m->regions[1];
	m->regions[1] = r;
	ck_assert_uint_eq(manifest_digest(m), d);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

/* Text rules (pimd(8), TEXT): UTF-8, no control characters (DEL and C1 included), no
 * duplicate keys; errors name the field. */
START_TEST(text_rules)
{
	/* invalid UTF-8 in a JSON manifest: json-c's tokener refuses it with the line */
	expect_error("\"name\": \"fill\"", "\"name\": \"fi\xffll\"", "JSON syntax error near line 5");
	/* DEL and a C1 control character (U+0085, NEL) are control characters */
	expect_error("\"name\": \"fill\"", "\"name\": \"fi\x7fll\"",
		     "regions[0].name: contains a control character (U+007F) at byte 2");
	expect_error("\"op\": \"linalg.matvec\"", "\"op\": \"linalg\xc2\x85matvec\"",
		     "regions[1].op: contains a control character (U+0085) at byte 6");
	expect_error("\"source\": \"test\"", "\"source\": \"te\\u0000st\"", "source: contains a NUL byte");
	/* other UTF-8 is welcome */
	char buf[4096];
	const char *p = strstr(good, "\"name\": \"fill\"");
	snprintf(buf, sizeof buf, "%.*s\"name\": \"f\xc3\xbcll \xe2\x86\x92 \xf0\x9f\x98\x80\"%s", (int)(p - good), good,
		 p + strlen("\"name\": \"fill\""));
	Pim__Manifest *m = parse_ok(buf);
	ck_assert_str_eq(m->regions[0]->name, "f\xc3\xbcll \xe2\x86\x92 \xf0\x9f\x98\x80");
	pim__manifest__free_unpacked(m, NULL);

	/* duplicate keys, at the top, in a region, in an operand, and spelt with an escape */
	expect_error("\"source\": \"test\"", "\"source\": \"test\", \"name\": \"m2\"",
		     "manifest: duplicate key \"name\" near line 1");
	expect_error("\"n_total\": 1024", "\"n_total\": 1024, \"n_par\": 1",
		     "manifest: duplicate key \"n_par\" near line 10");
	expect_error("\"role\": \"in\"", "\"role\": \"in\", \"role\": \"out\"",
		     "manifest: duplicate key \"role\" near line 11");
	expect_error("\"source\": \"test\"", "\"source\": \"test\", \"n\\u0061me\": \"m2\"",
		     "manifest: duplicate key \"name\"");
	/* the same key in two objects is no duplicate: the good manifest has "id" in each */

	/* a binary manifest is held to the same rules by manifest_validate */
	m = parse_ok(good);
	struct pim_error err = { 0 };
	free(m->regions[1]->name);
	m->regions[1]->name = strdup("acc\xe2\x82"); /* a character cut short */
	ck_assert_int_eq(manifest_validate(m, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "regions[1].name: invalid UTF-8 at byte 3");
	free(m->regions[1]->name);
	m->regions[1]->name = strdup("\xed\xa0\x80"); /* a UTF-16 surrogate */
	ck_assert_int_eq(manifest_validate(m, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "regions[1].name: invalid UTF-8 at byte 0");
	free(m->regions[1]->name);
	m->regions[1]->name = strdup("\xc0\xaf"); /* an overlong '/' */
	ck_assert_int_eq(manifest_validate(m, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "regions[1].name: invalid UTF-8 at byte 0");
	free(m->regions[1]->name);
	m->regions[1]->name = strdup("acc");
	/* a model name echoed in an error is cut at a character boundary, never inside one */
	free(m->name);
	char name[80];
	memset(name, 'a', 63);
	snprintf(name + 63, sizeof name - 63, "\xc3\xa9tail");  /* 'é' across byte 64 */
	m->name = strdup(name);
	ck_assert_int_eq(manifest_validate(m, &err), -EINVAL);
	char want[100];
	snprintf(want, sizeof want, "name: \"%.63s\" is not a valid model name", name);
	ck_assert_msg(strstr(err.msg, want), "%s", err.msg);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("manifest");
	TCase *tc = test_case(s, "manifest");
	tcase_add_test(tc, good_manifest_parses);
	tcase_add_test(tc, errors_name_the_field);
	tcase_add_test(tc, json_syntax_errors_give_a_line);
	tcase_add_test(tc, absurd_counts_refused);
	tcase_add_test(tc, round_trips);
	tcase_add_test(tc, bundled_example_is_valid);
	tcase_add_test(tc, names);
	tcase_add_test(tc, digest);
	tcase_add_test(tc, text_rules);
	return test_run_suite(s);
}
