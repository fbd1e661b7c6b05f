/* SPDX-License-Identifier: MIT */
#include "decode.h"

#include <string.h>

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

static int read_varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *v)
{
	uint64_t x = 0;
	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (*pos >= len)
			return -EBADMSG;
		uint8_t b = p[(*pos)++];
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -EBADMSG;
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
		size_t start = pos;
		uint64_t tag, n = 0;
		if ((r = read_varint(p, len, &pos, &tag)) < 0 || tag >> 3 == 0 || tag >> 3 > UINT32_MAX)
			return err_set(w->err, -EBADMSG, "%s: bad field tag at byte %zu", d->short_name, start);
		unsigned wt = (unsigned)(tag & 7);
		size_t vstart = pos;
		switch (wt) {
		case 0:
			r = read_varint(p, len, &pos, &n);
			break;
		case 1:
			r = len - pos >= 8 ? (pos += 8, 0) : -EBADMSG;
			break;
		case 5:
			r = len - pos >= 4 ? (pos += 4, 0) : -EBADMSG;
			break;
		case 2:
			r = read_varint(p, len, &pos, &n);
			if (r == 0 && n > len - pos)
				r = -EBADMSG;
			vstart = pos;
			if (r == 0)
				pos += (size_t)n;
			break;
		default:
			r = -EBADMSG;
		}
		if (r < 0)
			return err_set(w->err, -EBADMSG, "%s: truncated or invalid field at byte %zu", d->short_name,
				       start);
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

int decode_request(const uint8_t *buf, size_t len, struct decode_budget *budget, Pim__Request **out,
		   struct pim_error *text, struct pim_error *err)
{
	size_t need, allowed = (size_t)len * DECODE_RATIO + DECODE_SLACK;
	int r;

	decode_budget_init(budget, 0);
	r = measure(&pim__request__descriptor, buf, len, decode_request_limits, decode_request_limits_n,
		    &need, text, err);
	if (r == -EBADMSG)
		return err_set(err, r, "request frame is not a valid Request message");
	if (r < 0)
		return r;
	if (need > allowed)
		return err_set(err, -E2BIG, "request of %zu bytes decodes to more than %zu bytes of "
			       "structures (%zu; empty repeated entries?)", len, allowed, need);
	decode_budget_init(budget, need);
	Pim__Request *req = pim__request__unpack(&budget->alloc, len, buf);
	if (!req && budget->exceeded)
		return err_set(err, -E2BIG, "request of %zu bytes decodes to more than %zu bytes of "
			       "structures", len, need);
	if (!req)
		return err_set(err, -EBADMSG, "request frame is not a valid Request message");
	*out = req;
	return 0;
}
