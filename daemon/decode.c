/* SPDX-License-Identifier: MIT */
#include "decode.h"

#include <string.h>

#include "frame.h"
#include "wire.h"
#include "manifest.h"

/* Messages nest at most this deep in pim.proto (Request > ModelLoad > Manifest > Region >
 * Operand); an unknown field is skipped, not walked, so no input goes deeper. */
#define DECODE_DEPTH_MAX 16
/* Fields a message of pim.proto has at most (Request has the most). */
#define DECODE_FIELDS_MAX 64
/* protobuf-c notes each field it scans in a ScannedMember (32 bytes on LP64): 16 on the stack,
 * then slabs of 32, 64, 128... entries from the allocator. */
#define SCANNED_MEMBER_BYTES 32u
#define SCANNED_ON_STACK 16u

const struct decode_limit decode_request_limits[] = {
	{ &pim__manifest__descriptor, 3, MANIFEST_ALLOCATIONS_MAX },  /* allocations */
	{ &pim__manifest__descriptor, 4, MANIFEST_REGIONS_MAX },      /* regions */
	{ &pim__region__descriptor, 8, MANIFEST_EXTENTS_MAX },        /* parallel_extents */
	{ &pim__region__descriptor, 9, MANIFEST_EXTENTS_MAX },        /* reduction_extents */
	{ &pim__region__descriptor, 10, MANIFEST_OPERANDS_MAX },      /* operands */
};
const size_t decode_request_limits_n = ELEMENTSOF(decode_request_limits);

static size_t cost(size_t n) { return n + DECODE_HEADER; }

/* A field on the wire (wire.h): where it starts, its tag, and its value: n (a varint's value, or
 * a length-delimited field's length) and where a length-delimited value's bytes start. */
struct field_at {
	uint64_t tag, n;
	unsigned wt;
	size_t start, vstart;
};

/* Reads the field at *pos (advanced past it): -EBADMSG for a bad tag, -EPROTO for a truncated
 * or unsupported (group) value. */
static int next_field(const uint8_t *p, size_t len, size_t *pos, struct field_at *f)
{
	struct wire_field w;
	int r;

	f->start = f->vstart = *pos;
	f->n = 0;
	if ((r = wire_next(p, len, pos, &w)) <= 0)
		return r == WIRE_BAD_TAG ? -EBADMSG : -EPROTO;
	f->wt = w.type;
	f->tag = (uint64_t)w.number << 3 | w.type;
	f->n = w.type == WIRE_LEN ? w.len : w.type == WIRE_VARINT ? w.v : 0;
	if (w.type == WIRE_LEN)
		f->vstart = (size_t)(w.p - p);
	return 0;
}

bool decode_status_request(const uint8_t *buf, size_t len, uint64_t *id)
{
	struct wire_field f;
	size_t i = 0;
	bool status = false;
	int r;

	*id = 0;
	while ((r = wire_next(buf, len, &i, &f)) > 0) {
		if (f.number == 1 && f.type == WIRE_VARINT)
			*id = f.v;
		else if (f.number == PIM__REQUEST__BODY_STATUS && f.type == WIRE_LEN && wire_check(f.p, f.len))
			status = true; /* (its fields are none known: a later protocol's are skipped) */
		else
			return false;
	}
	return r == 0 && status;
}

/* Bytes one entry takes in a repeated field's array (protobuf-c's layout). */
static size_t element_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_FLOAT:
	case PROTOBUF_C_TYPE_ENUM:
		return 4;
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	default:
		return sizeof(void *);
	}
}

/* Entries in a packed run of len bytes of a scalar type. */
static size_t packed_count(ProtobufCType t, const uint8_t *p, size_t len)
{
	size_t n = 0;

	switch (t) {
	case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_SFIXED64: case PROTOBUF_C_TYPE_DOUBLE:
		return len / 8;
	case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_SFIXED32: case PROTOBUF_C_TYPE_FLOAT:
		return len / 4;
	default:
		for (size_t i = 0; i < len; i++)
			n += !(p[i] & 0x80);
		return n;
	}
}

static bool scalar(ProtobufCType t)
{
	return t != PROTOBUF_C_TYPE_STRING && t != PROTOBUF_C_TYPE_BYTES && t != PROTOBUF_C_TYPE_MESSAGE;
}

struct walk {
	const struct decode_limit *limits;
	size_t n_limits;
	struct pim_error *text; /* the first string that breaks the text rules, or NULL: unchecked */
	struct pim_error *err;
	/* the fields that lead to the message being walked, each with its index if repeated */
	struct {
		const ProtobufCFieldDescriptor *f;
		size_t nth;
	} path[DECODE_DEPTH_MAX + 2];
};

/* Checks a string field against the rules all strings share (util.h, text_check_n): UTF-8
 * without NUL.  protobuf-c checks neither, and hands a string over NUL-terminated, so
 * "nul\0evil" would reach the handlers as "nul".  Control characters are each field's own
 * business (manifest.c, the name rules).  The first failure is kept, named by its path. */
static void check_text(struct walk *w, unsigned depth, const ProtobufCFieldDescriptor *f, size_t nth,
		       const uint8_t *p, size_t len)
{
	char path[192];
	size_t at = 0;

	if (!w->text || w->text->code < 0)
		return;
	w->path[depth].f = f;
	w->path[depth].nth = nth;
	for (unsigned i = 1; i <= depth && at < sizeof path; i++) {
		const ProtobufCFieldDescriptor *g = w->path[i].f;
		int n = g->label == PROTOBUF_C_LABEL_REPEATED
			? snprintf(path + at, sizeof path - at, "%s%s[%zu]", i > 1 ? "." : "", g->name, w->path[i].nth)
			: snprintf(path + at, sizeof path - at, "%s%s", i > 1 ? "." : "", g->name);
		at += n > 0 ? (size_t)n : 0;
	}
	text_check_n(path, (const char *)p, len, 0, TEXT_ANY_CONTROL, w->text);
}

static int walk_message(struct walk *w, const ProtobufCMessageDescriptor *d, const uint8_t *p,
			size_t len, unsigned depth, size_t *bytes)
{
	size_t counts[DECODE_FIELDS_MAX] = { 0 };
	bool seen[DECODE_FIELDS_MAX] = { false };
	size_t total = cost(d->sizeof_message), scanned = 0, unknown = 0, pos = 0;
	int r;

	if (depth > DECODE_DEPTH_MAX || d->n_fields > DECODE_FIELDS_MAX)
		return err_set(w->err, -E2BIG, "%s: nested too deep", d->short_name);
	while (pos < len) {
		struct field_at wf;
		if ((r = next_field(p, len, &pos, &wf)) == -EBADMSG)
			return err_set(w->err, -EBADMSG, "%s: bad field tag at byte %zu", d->short_name, wf.start);
		if (r < 0)
			return err_set(w->err, -EBADMSG, "%s: truncated or invalid field at byte %zu", d->short_name,
				       wf.start);
		size_t start = wf.start, vstart = wf.vstart;
		uint64_t tag = wf.tag, n = wf.n;
		unsigned wt = wf.wt;
		scanned++;
		const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, (unsigned)(tag >> 3));
		if (!f) {
			/* kept as an unknown field: its entry and a copy of its bytes */
			unknown++;
			total += cost(pos - start);
			continue;
		}
		size_t i = (size_t)(f - d->fields), sub = 0;
		if (wt == 2 && f->type == PROTOBUF_C_TYPE_MESSAGE) {
			w->path[depth + 1].f = f;
			w->path[depth + 1].nth = counts[i];
			if ((r = walk_message(w, f->descriptor, p + vstart, (size_t)n, depth + 1, &sub)) < 0)
				return r;
		} else if (wt == 2 && f->type == PROTOBUF_C_TYPE_STRING) {
			check_text(w, depth + 1, f, counts[i], p + vstart, (size_t)n);
			sub = cost((size_t)n + 1);
		} else if (wt == 2 && f->type == PROTOBUF_C_TYPE_BYTES) {
			sub = cost((size_t)n);
		}
		if (f->label == PROTOBUF_C_LABEL_REPEATED)
			counts[i] += wt == 2 && scalar(f->type) ? packed_count(f->type, p + vstart, (size_t)n) : 1;
		else if (seen[i] && f->type == PROTOBUF_C_TYPE_MESSAGE)
			sub *= 2;  /* a repeated occurrence is merged into a copy of the first */
		seen[i] = true;
		total += sub;
	}
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		if (!counts[i])
			continue;
		for (size_t k = 0; k < w->n_limits; k++)
			if (w->limits[k].message == d && w->limits[k].field_id == f->id && counts[i] > w->limits[k].max)
				return err_set(w->err, -E2BIG, "%s.%s: %zu entries, at most %zu allowed", d->short_name,
					       f->name, counts[i], w->limits[k].max);
		total += cost(counts[i] * element_size(f->type));
	}
	if (unknown)
		total += cost(unknown * sizeof(ProtobufCMessageUnknownField));
	for (size_t have = SCANNED_ON_STACK, slab = 2 * SCANNED_ON_STACK; have < scanned; have += slab, slab *= 2)
		total += cost(slab * SCANNED_MEMBER_BYTES);
	*bytes = total;
	return 0;
}

static int measure(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t len,
		   const struct decode_limit *limits, size_t n_limits, size_t *bytes,
		   struct pim_error *text, struct pim_error *err)
{
	struct walk w = { .limits = limits, .n_limits = n_limits, .text = text, .err = err };
	if (text)
		*text = (struct pim_error){ 0 };
	return walk_message(&w, d, buf, len, 0, bytes);
}

int decode_measure(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t len,
		   const struct decode_limit *limits, size_t n_limits, size_t *bytes,
		   struct pim_error *err)
{
	return measure(d, buf, len, limits, n_limits, bytes, NULL, err);
}

static void *budget_alloc(void *data, size_t size)
{
	struct decode_budget *b = data;
	if (size > b->limit || b->used + size + DECODE_HEADER > b->limit) {
		b->exceeded = true;
		return NULL;
	}
	uint8_t *p = malloc(size + DECODE_HEADER);
	if (!p)
		return NULL;
	memcpy(p, &size, sizeof size);
	b->used += size + DECODE_HEADER;
	if (b->used > b->peak)
		b->peak = b->used;
	return p + DECODE_HEADER;
}

static void budget_free(void *data, void *ptr)
{
	struct decode_budget *b = data;
	size_t size;
	if (!ptr)
		return;
	uint8_t *p = (uint8_t *)ptr - DECODE_HEADER;
	memcpy(&size, p, sizeof size);
	b->used -= size + DECODE_HEADER;
	free(p);
}

void decode_budget_init(struct decode_budget *b, size_t limit)
{
	*b = (struct decode_budget){ .limit = limit };
	b->alloc = (ProtobufCAllocator){ .alloc = budget_alloc, .free = budget_free, .allocator_data = b };
}

/* The field number of Manifest.regions, and the messages that lead to it in a Request. */
#define MANIFEST_REGIONS_FIELD 4u

static bool leads_to_regions(const ProtobufCMessageDescriptor *d)
{
	return d == &pim__model_load__descriptor || d == &pim__manifest__descriptor;
}

/* The one field of message d at p that leads to the manifest: 1 and its value's span, or 0 when
 * there is none or more than one (protobuf merges repeated messages: left to protobuf-c). */
static int only_path_field(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len,
			   const uint8_t **at, size_t *at_len)
{
	struct field_at w;
	size_t pos = 0;
	int found = 0;

	while (pos < len && next_field(p, len, &pos, &w) == 0) {
		const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, (unsigned)(w.tag >> 3));
		if (w.wt != 2 || !f || f->type != PROTOBUF_C_TYPE_MESSAGE || !leads_to_regions(f->descriptor))
			continue;
		*at = p + w.vstart;
		*at_len = (size_t)w.n;
		found++;
	}
	return found == 1;
}

/* Message d at p without the entries of Manifest.regions, written to out (NULL: measured);
 * returns its length.  The messages on the way are written again with their new lengths. */
static size_t strip_regions(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len, uint8_t *out)
{
	struct field_at w;
	size_t pos = 0, n = 0;

	while (pos < len && next_field(p, len, &pos, &w) == 0) {
		const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, (unsigned)(w.tag >> 3));
		if (d == &pim__manifest__descriptor && w.tag >> 3 == MANIFEST_REGIONS_FIELD)
			continue;
		if (w.wt == 2 && f && f->type == PROTOBUF_C_TYPE_MESSAGE && leads_to_regions(f->descriptor)) {
			size_t inner = strip_regions(f->descriptor, p + w.vstart, (size_t)w.n, NULL);
			n += wire_put_varint(out ? out + n : NULL, w.tag);
			n += wire_put_varint(out ? out + n : NULL, inner);
			if (out)
				strip_regions(f->descriptor, p + w.vstart, (size_t)w.n, out + n);
			n += inner;
		} else {
			if (out)
				memcpy(out + n, p + w.start, pos - w.start);
			n += pos - w.start;
		}
	}
	return n;
}

/* Decodes as decode_request says, without the manifest's regions when regions is not NULL and
 * the request holds a model_load. */
static int decode(const uint8_t *buf, size_t len, struct decode_budget *budget, Pim__Request **out,
		  struct decode_regions *regions, struct pim_error *text, struct pim_error *err)
{
	size_t need, allowed = (size_t)len * DECODE_RATIO + DECODE_SLACK, ml_len, m_len;
	const uint8_t *ml, *m;
	uint8_t *lean = NULL;
	int r;

	decode_budget_init(budget, 0);
	if (regions)
		*regions = (struct decode_regions){ 0 };
	r = measure(&pim__request__descriptor, buf, len, decode_request_limits, decode_request_limits_n,
		    &need, text, err);
	if (r == -EBADMSG)
		return err_set(err, r, "request frame is not a valid Request message");
	if (r < 0)
		return r;
	if (need > allowed)
		return err_set(err, -E2BIG, "request of %zu bytes decodes to more than %zu bytes of "
			       "structures (%zu; empty repeated entries?)", len, allowed, need);
	size_t n_regions = 0;
	bool lean_ok = regions && only_path_field(&pim__request__descriptor, buf, len, &ml, &ml_len) &&
		       only_path_field(&pim__model_load__descriptor, ml, ml_len, &m, &m_len);
	for (size_t pos = 0; lean_ok && pos < m_len;) {
		/* regions of another wire type: protobuf-c refuses the request, so left to it */
		struct field_at w;
		lean_ok = next_field(m, m_len, &pos, &w) == 0 &&
			  (w.tag >> 3 != MANIFEST_REGIONS_FIELD || w.wt == 2);
		n_regions += w.tag >> 3 == MANIFEST_REGIONS_FIELD;
	}
	if (lean_ok) {
		size_t lean_len = strip_regions(&pim__request__descriptor, buf, len, NULL);
		if (!(lean = malloc(lean_len ? lean_len : 1)))
			return err_set(err, -ENOMEM, "out of memory decoding a request");
		strip_regions(&pim__request__descriptor, buf, len, lean);
		*regions = (struct decode_regions){ .manifest = m, .len = m_len, .n = n_regions };
		buf = lean;
		len = lean_len;
	}
	decode_budget_init(budget, need);
	Pim__Request *req = pim__request__unpack(&budget->alloc, len, buf);
	free(lean);
	if (!req && regions)
		*regions = (struct decode_regions){ 0 };
	if (!req && budget->exceeded)
		return err_set(err, -E2BIG, "request of %zu bytes decodes to more than %zu bytes of "
			       "structures", len, need);
	if (!req)
		return err_set(err, -EBADMSG, "request frame is not a valid Request message");
	*out = req;
	return 0;
}

int decode_request(const uint8_t *buf, size_t len, struct decode_budget *budget, Pim__Request **out,
		   struct pim_error *text, struct pim_error *err)
{
	return decode(buf, len, budget, out, NULL, text, err);
}

int decode_request_lean(const uint8_t *buf, size_t len, struct decode_budget *budget, Pim__Request **out,
			struct decode_regions *regions, struct pim_error *text, struct pim_error *err)
{
	return decode(buf, len, budget, out, regions, text, err);
}

const Pim__Region *decode_regions_get(void *ctx, size_t i, struct pim_error *err)
{
	struct decode_regions *r = ctx;
	struct field_at w;

	if (i == 0) {
		r->pos = 0;
		r->next = 0;
	}
	if (i != r->next) {
		err_set(err, -EINVAL, "regions[%zu] asked for after regions[%zu]", i, r->next);
		return NULL;
	}
	if (r->cur)
		pim__region__free_unpacked(r->cur, NULL);
	r->cur = NULL;
	while (r->pos < r->len && next_field(r->manifest, r->len, &r->pos, &w) == 0) {
		if (w.tag >> 3 != MANIFEST_REGIONS_FIELD)
			continue;
		/* measured with the whole request already: within its bound */
		r->cur = pim__region__unpack(NULL, (size_t)w.n, r->manifest + w.vstart);
		if (!r->cur)
			err_set(err, -EBADMSG, "regions[%zu] does not decode", i);
		r->next++;
		return r->cur;
	}
	err_set(err, -EINVAL, "regions[%zu]: the manifest has %zu regions", i, r->n);
	return NULL;
}

void decode_regions_free(struct decode_regions *r)
{
	if (r->cur)
		pim__region__free_unpacked(r->cur, NULL);
	r->cur = NULL;
}
