/* SPDX-License-Identifier: MIT */
/* Unit tests of daemon/decode.c: a Request measured before it is decoded. */
#include <dirent.h>
#include <string.h>

#include "decode.h"
#include "manifest.h"
#include "test_util.h"
#include "util.h"

static size_t cost(size_t n) { return n + DECODE_HEADER; }

/* Request { id 1, hello { protocol_version 1, client_name "ab" } }, by hand. */
/* A Status read on the wire (decode_status_request) is what decode_request makes of the same
 * bytes; anything more or less than a Status with an id is left to decode_request. */
START_TEST(status_on_the_wire)
{
	static const struct {
		uint8_t b[16];
		size_t n;
		bool status;
		uint64_t id;
	} cases[] = {
		{ { 0x08, 0x05, 0x1a, 0x00 }, 4, true, 5 },                       /* as libpimclient */
		{ { 0x1a, 0x00, 0x08, 0xac, 0x02 }, 5, true, 300 },               /* id after the body */
		{ { 0x1a, 0x00 }, 2, true, 0 },                                   /* no id */
		{ { 0x08, 0x01, 0x08, 0x07, 0x1a, 0x00 }, 6, true, 7 },           /* the last id */
		{ { 0x08, 0x01, 0x1a, 0x03, 0xf8, 0x3f, 0x07 }, 7, true, 1 },     /* a later Status field */
		{ { 0x08, 0x01, 0x1a, 0x00, 0x1a, 0x00 }, 6, true, 1 },           /* merged */
		{ { 0x08, 0x01 }, 2, false, 0 },                                  /* no body */
		{ { 0x08, 0x01, 0x1a, 0x02, 0xf8, 0x3f }, 6, false, 0 },          /* a cut field inside */
		{ { 0x08, 0x01, 0x1a }, 3, false, 0 },                            /* cut */
		{ { 0x08, 0x01, 0x1a, 0x00, 0x12, 0x00 }, 6, false, 0 },          /* then a Hello */
		{ { 0x08, 0x01, 0x1a, 0x00, 0xf8, 0x3f, 0x07 }, 7, false, 0 },    /* an unknown field */
		{ { 0x08, 0x01, 0x18, 0x00 }, 4, false, 0 },                      /* field 3 as a varint */
		{ { 0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0x1a, 0x00 }, 11, false, 0 },   /* id of another type */
	};
	for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
		uint64_t id = 99;
		ck_assert_msg(decode_status_request(cases[k].b, cases[k].n, &id) == cases[k].status, "case %zu", k);
		if (!cases[k].status)
			continue;
		ck_assert_uint_eq(id, cases[k].id);
		struct decode_budget budget;
		struct pim_error err = { 0 }, text = { 0 };
		Pim__Request *req;
		ck_assert_int_ge(decode_request(cases[k].b, cases[k].n, &budget, &req, &text, &err), 0);
		ck_assert_int_eq(req->body_case, PIM__REQUEST__BODY_STATUS);
		ck_assert_uint_eq(req->id, cases[k].id);
		pim__request__free_unpacked(req, &budget.alloc);
	}
}
END_TEST

START_TEST(hello_by_hand)
{
	const uint8_t wire[] = { 0x08, 0x01, 0x12, 0x06, 0x08, 0x01, 0x12, 0x02, 'a', 'b' };
	struct pim_error err = { 0 };
	size_t bytes;

	ck_assert_int_eq(decode_measure(&pim__request__descriptor, wire, sizeof wire, NULL, 0, &bytes,
					&err), 0);
	/* the Request, the Hello and "ab" with its NUL, each with a header */
	ck_assert_uint_eq(bytes, cost(sizeof(Pim__Request)) + cost(sizeof(Pim__Hello)) + cost(3));
	struct decode_budget b;
	Pim__Request *req;
	ck_assert_int_eq(decode_request(wire, sizeof wire, &b, &req, NULL, &err), 0);
	ck_assert_str_eq(req->hello->client_name, "ab");
	ck_assert_uint_eq(b.peak, bytes); /* exact here */
	pim__request__free_unpacked(req, &b.alloc);
	ck_assert_uint_eq(b.used, 0);
}
END_TEST

/* A packed repeated field counts its entries; unknown fields are kept (entry + copy). */
START_TEST(packed_and_unknown)
{
	/* Region { parallel_extents [1, 300, 5] packed; field 99 varint 7 } */
	const uint8_t wire[] = { 0x42, 0x04, 0x01, 0xac, 0x02, 0x05, 0x98, 0x06, 0x07 };
	struct pim_error err = { 0 };
	size_t bytes;

	ck_assert_int_eq(decode_measure(&pim__region__descriptor, wire, sizeof wire, NULL, 0, &bytes,
					&err), 0);
	ck_assert_uint_eq(bytes, cost(sizeof(Pim__Region)) + cost(3 * sizeof(uint64_t)) + cost(3) +
				 cost(sizeof(ProtobufCMessageUnknownField)));
	Pim__Region *r = pim__region__unpack(NULL, sizeof wire, wire);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->n_parallel_extents, 3);
	ck_assert_uint_eq(r->parallel_extents[1], 300);
	pim__region__free_unpacked(r, NULL);
}
END_TEST

START_TEST(limits_and_malformed)
{
	struct pim_error err = { 0 };
	size_t bytes;
	/* 17 extents, one byte each, packed */
	uint8_t wire[2 + 17];
	wire[0] = 0x42;
	wire[1] = 17;
	memset(wire + 2, 1, 17);
	ck_assert_int_eq(decode_measure(&pim__region__descriptor, wire, sizeof wire, decode_request_limits,
					decode_request_limits_n, &bytes, &err), -E2BIG);
	ck_assert_str_eq(err.msg, "Region.parallel_extents: 17 entries, at most 16 allowed");
	wire[1] = 16;
	ck_assert_int_eq(decode_measure(&pim__region__descriptor, wire, 18, decode_request_limits,
					decode_request_limits_n, &bytes, &err), 0);
	/* truncated length, truncated varint, a group, field 0 */
	const uint8_t trunc[] = { 0x42, 0x05, 0x01 }, varint[] = { 0x08, 0x80 }, group[] = { 0x0b },
		      zero[] = { 0x00, 0x01 };
	ck_assert_int_eq(decode_measure(&pim__region__descriptor, trunc, sizeof trunc, NULL, 0, &bytes, &err), -EBADMSG);
	ck_assert_int_eq(decode_measure(&pim__region__descriptor, varint, sizeof varint, NULL, 0, &bytes, &err), -EBADMSG);
	ck_assert_int_eq(decode_measure(&pim__region__descriptor, group, sizeof group, NULL, 0, &bytes, &err), -EBADMSG);
	ck_assert_int_eq(decode_measure(&pim__region__descriptor, zero, sizeof zero, NULL, 0, &bytes, &err), -EBADMSG);
	struct decode_budget b;
	Pim__Request *req;
	ck_assert_int_eq(decode_request(varint, sizeof varint, &b, &req, NULL, &err), -EBADMSG);
	ck_assert_str_eq(err.msg, "request frame is not a valid Request message");
}
END_TEST

/* Request { model_load { manifest { ... } } } around a serialized Manifest. */
static uint8_t *wrap_manifest(const Pim__Manifest *m, size_t *len)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__ModelLoad ml = PIM__MODEL_LOAD__INIT;
	ml.manifest = (Pim__Manifest *)m;
	req.id = 7;
	req.body_case = PIM__REQUEST__BODY_MODEL_LOAD;
	req.model_load = &ml;
	*len = pim__request__get_packed_size(&req);
	uint8_t *buf = malloc(*len);
	ck_assert_ptr_nonnull(buf);
	pim__request__pack(&req, buf);
	return buf;
}

/* A valid manifest of n regions with one operand each, one-letter names and ops and nothing
 * optional: the densest legitimate request. */
static Pim__Manifest *compact_manifest(size_t n)
{
	Pim__Manifest *m = calloc(1, sizeof *m);
	pim__manifest__init(m);
	m->name = strdup("compact");
	m->n_allocations = 1;
	m->allocations = calloc(1, sizeof *m->allocations);
	m->allocations[0] = calloc(1, sizeof **m->allocations);
	pim__allocation__init(m->allocations[0]);
	m->allocations[0]->bytes = 4096;
	m->allocations[0]->kind = PIM__ALLOC_KIND__ALLOC_KIND_ARGUMENT;
	m->n_regions = n;
	m->regions = calloc(n, sizeof *m->regions);
	for (size_t i = 0; i < n; i++) {
		Pim__Region *r = calloc(1, sizeof *r);
		pim__region__init(r);
		r->id = (uint32_t)i;
		r->order = (uint32_t)i;
		r->name = strdup("r");
		r->op = strdup("x");
		r->n_par = 1;
		r->n_total = 1;
		r->n_operands = 1;
		r->operands = calloc(1, sizeof *r->operands);
		r->operands[0] = calloc(1, sizeof **r->operands);
		pim__operand__init(r->operands[0]);
		r->operands[0]->bytes = 1;
		r->operands[0]->role = PIM__OPERAND_ROLE__OPERAND_ROLE_IN;
		m->regions[i] = r;
	}
	return m;
}

/* 40,000 regions (refused with "empty repeated entries?" by the old budget of 12x + 1 MiB)
 * decode, and the bound is close to what is allocated. */
START_TEST(compact_manifest_decodes)
{
	struct pim_error err = { 0 };
	Pim__Manifest *m = compact_manifest(40000);
	ck_assert_msg(manifest_validate(m, &err) == 0, "%s", err.msg);
	size_t len, bytes;
	uint8_t *wire = wrap_manifest(m, &len);
	ck_assert_int_eq(decode_measure(&pim__request__descriptor, wire, len, decode_request_limits,
					decode_request_limits_n, &bytes, &err), 0);
	struct decode_budget b;
	Pim__Request *req;
	ck_assert_msg(decode_request(wire, len, &b, &req, NULL, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(req->model_load->manifest->n_regions, 40000);
	ck_assert_int_eq(manifest_validate(req->model_load->manifest, &err), 0);
	ck_assert_uint_gt(len * 12 + (1u << 20), 0);
	ck_assert_uint_gt(b.peak, len * 12 + (1u << 20)); /* what the old bound refused */
	ck_assert_uint_le(b.peak, bytes);
	ck_assert_uint_le(bytes, b.peak + b.peak / 4); /* the bound is tight */
	ck_assert_uint_le(bytes, len * DECODE_RATIO);
	printf("compact manifest: %zu regions, %zu bytes, bound %zu (%.1fx), allocated %zu (%.1fx)\n",
	       (size_t)40000, len, bytes, (double)bytes / (double)len, b.peak, (double)b.peak / (double)len);
	pim__request__free_unpacked(req, &b.alloc);
	ck_assert_uint_eq(b.used, 0);
	free(wire);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

/* A lean decode leaves the regions in the frame: the request decodes without them, they come one
 * at a time in order (0 starts again; another order is refused), the frame is measured and its
 * strings checked whole; other requests decode as decode_request does. */
START_TEST(lean_decode_leaves_regions_in_the_frame)
{
	struct pim_error err = { 0 }, text = { 0 };
	struct decode_budget b;
	struct decode_regions rs;
	Pim__Request *req;
	Pim__Manifest *m = compact_manifest(300);
	m->source = strdup("model.py");
	size_t len, full;
	uint8_t *wire = wrap_manifest(m, &len);

	ck_assert_int_eq(decode_request(wire, len, &b, &req, NULL, &err), 0);
	full = b.peak;
	pim__request__free_unpacked(req, &b.alloc);
	ck_assert_int_eq(decode_request_lean(wire, len, &b, &req, &rs, &text, &err), 0);
	ck_assert_int_eq(text.code, 0);
	ck_assert_uint_eq(req->id, 7);
	ck_assert_int_eq(req->body_case, PIM__REQUEST__BODY_MODEL_LOAD);
	ck_assert_str_eq(req->model_load->manifest->name, "compact");
	ck_assert_str_eq(req->model_load->manifest->source, "model.py");
	ck_assert_uint_eq(req->model_load->manifest->n_allocations, 1);
	ck_assert_uint_eq(req->model_load->manifest->n_regions, 0);
	ck_assert_ptr_nonnull(rs.manifest);
	ck_assert_uint_eq(rs.n, 300);
	ck_assert_uint_lt(b.peak * 50, full);  /* the regions were not decoded */
	for (size_t i = 0; i < 300; i++) {
		const Pim__Region *g = decode_regions_get(&rs, i, &err);
		ck_assert_ptr_nonnull(g);
		ck_assert_uint_eq(g->id, i);
		ck_assert_str_eq(g->name, "r");
		ck_assert_uint_eq(g->operands[0]->bytes, 1);
	}
	ck_assert_ptr_null(decode_regions_get(&rs, 300, &err));
	ck_assert_msg(strstr(err.msg, "the manifest has 300 regions"), "%s", err.msg);
	ck_assert_uint_eq(decode_regions_get(&rs, 0, &err)->id, 0);
	ck_assert_ptr_null(decode_regions_get(&rs, 5, &err));
	ck_assert_msg(strstr(err.msg, "regions[5] asked for after regions[1]"), "%s", err.msg);
	ck_assert_int_eq(manifest_validate_each(req->model_load->manifest, rs.n, decode_regions_get, &rs, &err), 0);
	decode_regions_free(&rs);
	pim__request__free_unpacked(req, &b.alloc);
	ck_assert_uint_eq(b.used, 0);
	free(wire);

	/* a bad string in a region is found though the region is not decoded */
	free(m->regions[250]->name);
	m->regions[250]->name = strdup("r\xff");
	wire = wrap_manifest(m, &len);
	ck_assert_int_eq(decode_request_lean(wire, len, &b, &req, &rs, &text, &err), 0);
	ck_assert_int_eq(text.code, -EINVAL);
	ck_assert_msg(strstr(text.msg, "model_load.manifest.regions[250].name"), "%s", text.msg);
	pim__request__free_unpacked(req, &b.alloc);
	free(wire);

	/* a status request: as decode_request */
	const uint8_t status[] = { 0x08, 0x02, 0x1a, 0x00 };
	ck_assert_int_eq(decode_request_lean(status, sizeof status, &b, &req, &rs, NULL, &err), 0);
	ck_assert_ptr_null(rs.manifest);
	pim__request__free_unpacked(req, &b.alloc);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

/* Allocations are the densest entries a valid manifest can have (6 bytes on the wire). */
START_TEST(allocation_heavy_manifest_decodes)
{
	struct pim_error err = { 0 };
	Pim__Manifest *m = compact_manifest(1);
	size_t n = 100000;
	pim__allocation__free_unpacked(m->allocations[0], NULL);
	free(m->allocations);
	m->allocations = calloc(n, sizeof *m->allocations);
	m->n_allocations = n;
	for (size_t i = 0; i < n; i++) {
		m->allocations[i] = calloc(1, sizeof **m->allocations);
		pim__allocation__init(m->allocations[i]);
		m->allocations[i]->id = (uint32_t)i;
		m->allocations[i]->bytes = 1;
		m->allocations[i]->kind = PIM__ALLOC_KIND__ALLOC_KIND_ALLOC;
	}
	ck_assert_msg(manifest_validate(m, &err) == 0, "%s", err.msg);
	size_t len, bytes;
	uint8_t *wire = wrap_manifest(m, &len);
	ck_assert_int_eq(decode_measure(&pim__request__descriptor, wire, len, decode_request_limits,
					decode_request_limits_n, &bytes, &err), 0);
	struct decode_budget b;
	Pim__Request *req;
	ck_assert_msg(decode_request(wire, len, &b, &req, NULL, &err) == 0, "%s", err.msg);
	printf("allocation-heavy manifest: %zu allocations, %zu bytes, bound %zu (%.1fx), allocated %zu "
	       "(%.1fx)\n", n, len, bytes, (double)bytes / (double)len, b.peak, (double)b.peak / (double)len);
	ck_assert_uint_le(b.peak, bytes);
	ck_assert_uint_le(bytes, b.peak + b.peak / 4);
	pim__request__free_unpacked(req, &b.alloc);
	free(wire);
	pim__manifest__free_unpacked(m, NULL);
}
END_TEST

/* Empty Region entries: 2 bytes each on the wire, ~160 bytes decoded. */
static uint8_t *empty_regions(size_t n, size_t *len)
{
	uint8_t *buf = malloc(2 * n + 32), *p = buf;
	size_t man_len = 2 * n, ml_len;
	uint8_t man_hdr[16], *q = man_hdr;
	*q++ = 0x0a;
	for (size_t v = man_len;; v >>= 7) { *q++ = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0)); if (v <= 0x7f) break; }
	ml_len = (size_t)(q - man_hdr) + man_len;
	*p++ = 0x22;
	for (size_t v = ml_len;; v >>= 7) { *p++ = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0)); if (v <= 0x7f) break; }
	memcpy(p, man_hdr, (size_t)(q - man_hdr));
	p += q - man_hdr;
	for (size_t i = 0; i < n; i++) {
		*p++ = 0x22;
		*p++ = 0x00;
	}
	*len = (size_t)(p - buf);
	return buf;
}

START_TEST(amplification_refused_before_allocating)
{
	struct pim_error err = { 0 };
	struct decode_budget b;
	Pim__Request *req = NULL;
	size_t len;
	/* more entries than the protocol allows */
	uint8_t *wire = empty_regions(MANIFEST_REGIONS_MAX + 1, &len);
	ck_assert_int_eq(decode_request(wire, len, &b, &req, NULL, &err), -E2BIG);
	ck_assert_str_eq(err.msg, "Manifest.regions: 1000001 entries, at most 1000000 allowed");
	ck_assert_uint_eq(b.peak, 0); /* nothing was allocated */
	free(wire);
	/* within the count, beyond what a valid request of that size needs */
	wire = empty_regions(900000, &len);
	ck_assert_int_eq(decode_request(wire, len, &b, &req, NULL, &err), -E2BIG);
	ck_assert_msg(strstr(err.msg, "decodes to more than") && strstr(err.msg, "empty repeated entries?"),
		      "%s", err.msg);
	ck_assert_uint_eq(b.peak, 0);
	free(wire);
	/* a few empty entries are fine (and left to manifest_validate) */
	wire = empty_regions(100, &len);
	ck_assert_int_eq(decode_request(wire, len, &b, &req, NULL, &err), 0);
	ck_assert_uint_le(b.peak, len * DECODE_RATIO + DECODE_SLACK);
	pim__request__free_unpacked(req, &b.alloc);
	free(wire);
}
END_TEST

/* Every request of the fuzz corpus: what is allocated never exceeds the bound. */
START_TEST(corpus_within_bound)
{
	DIR *d = opendir("tests/fuzz/corpus/request");
	ck_assert_ptr_nonnull(d);
	struct dirent *e;
	int n = 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char path[512];
		snprintf(path, sizeof path, "tests/fuzz/corpus/request/%s", e->d_name);
		char *buf = NULL;
		size_t len;
		struct pim_error err = { 0 };
		ck_assert_int_eq(read_file(path, 1 << 24, &buf, &len, &err), 0);
		size_t bytes;
		struct decode_budget b;
		Pim__Request *req;
		if (decode_measure(&pim__request__descriptor, (uint8_t *)buf, len, NULL, 0, &bytes, &err) == 0) {
			decode_budget_init(&b, SIZE_MAX / 2);
			req = pim__request__unpack(&b.alloc, len, (uint8_t *)buf);
			ck_assert_msg(b.peak <= bytes, "%s: %zu allocated, bound %zu", path, b.peak, bytes);
			ck_assert_msg(!req || bytes <= b.peak + b.peak / 4, "%s: %zu allocated, bound %zu",
				      path, b.peak, bytes);
			if (req)
				pim__request__free_unpacked(req, &b.alloc);
			n++;
		}
		free(buf);
	}
	closedir(d);
	ck_assert_int_gt(n, 5);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("decode");
	TCase *tc = test_case(s, "decode");
	tcase_add_test(tc, hello_by_hand);
	tcase_add_test(tc, status_on_the_wire);
	tcase_add_test(tc, packed_and_unknown);
	tcase_add_test(tc, limits_and_malformed);
	tcase_add_test(tc, compact_manifest_decodes);
	tcase_add_test(tc, lean_decode_leaves_regions_in_the_frame);
	tcase_add_test(tc, allocation_heavy_manifest_decodes);
	tcase_add_test(tc, amplification_refused_before_allocating);
	tcase_add_test(tc, corpus_within_bound);
	return test_run_suite(s);
}
