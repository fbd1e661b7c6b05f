/* SPDX-License-Identifier: MIT */
/*
 * decode.h: decoding a Request within what it can legitimately expand to.
 *
 * protobuf-c allocates a structure per repeated entry however few bytes the entry takes on the
 * wire (an empty Region is 2 bytes and a 160-byte structure), so a frame within
 * max_frame_bytes could make pimd allocate gigabytes.  Before anything is allocated the frame
 * is walked once: every repeated field is held to the limit the protocol documents for it, and
 * the bytes protobuf-c will allocate are added up from the descriptors (an upper bound, which
 * must stay within DECODE_RATIO times the frame plus DECODE_SLACK).  Decoding then runs under
 * an allocator held to that bound, so a miscount fails safe.  The same walk checks every string
 * where its length is known, on the wire (protobuf-c hands strings over NUL-terminated).
 */
#ifndef PIMD_DECODE_H
#define PIMD_DECODE_H

#include "pim.pb-c.h"
#include "util.h"

/*
 * The densest valid manifest, of regions with one operand and one-letter names each, takes
 * 25 bytes a region on the wire and 344 decoded (Region, Operand, their pointers and arrays,
 * the strings, protobuf-c's scan slabs and the allocator's headers): 13.7 times as much;
 * allocations alone 12.4 times.  Empty entries expand 40 to 80 times.  The slack covers small
 * messages dense by nature: a SampleBatch of its 65536 samples, 4 bytes each, needs 8.5 MiB.
 */
#define DECODE_RATIO 16u
#define DECODE_SLACK (16u << 20)

/* A repeated field held to a number of entries (per message that holds it). */
struct decode_limit {
	const ProtobufCMessageDescriptor *message;
	uint32_t field_id;
	size_t max;
};

/* The limits pimd holds requests to (the manifest's, from manifest.h). */
extern const struct decode_limit decode_request_limits[];
extern const size_t decode_request_limits_n;

/*
 * Walks len bytes of a message of descriptor d without allocating and sets *bytes to an upper
 * bound of what protobuf_c_message_unpack() allocates for it (headers of DECODE_HEADER bytes
 * counted per allocation).  A repeated field over its limit fails with -E2BIG, a malformed wire
 * form (truncated varint or length, group, field number 0) with -EBADMSG, each with a message.
 */
#define DECODE_HEADER 16u
int decode_measure(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t len,
		   const struct decode_limit *limits, size_t n_limits, size_t *bytes,
		   struct pim_error *err);

/* An allocator that refuses to go beyond a limit (and remembers that it did), counting
 * DECODE_HEADER bytes per allocation as decode_measure() does; peak is the most it held. */
struct decode_budget {
	size_t used, peak, limit;
	bool exceeded;
	ProtobufCAllocator alloc;
};
void decode_budget_init(struct decode_budget *b, size_t limit);

/*
 * Decodes a Request of len bytes: measured against decode_request_limits and against
 * DECODE_RATIO * len + DECODE_SLACK first (-E2BIG with a message naming the field or the
 * sizes), then unpacked with budget (initialised here) held to the measured bound (-E2BIG too
 * if it is passed), or -EBADMSG when the frame is not a Request.  Free the result with
 * pim__request__free_unpacked(req, &budget->alloc).
 *
 * With text not NULL, every string field at any depth is checked on the wire against the rules
 * all strings share (util.h, text_check_n: UTF-8 without NUL; control characters are each
 * field's own business), and the first that breaks them is described in *text: code -EINVAL,
 * the message naming the field ("model_load.manifest.regions[2].name: invalid UTF-8 at byte
 * 3"); text->code is 0 when all are fine.  A request with a bad string still decodes: what it
 * deserves (an error, or closing a connection without Hello) is the caller's decision.
 */
int decode_request(const uint8_t *buf, size_t len, struct decode_budget *budget, Pim__Request **out,
		   struct pim_error *text, struct pim_error *err);

/*
 * Whether a Request of len bytes is a Status (the most frequent request) and nothing else: its
 * id (*id, 0 when it has none) and a Status whose fields are whole, and no other field.  Read on
 * the wire, nothing allocated; a request it does not take is decode_request's.
 */
bool decode_status_request(const uint8_t *buf, size_t len, uint64_t *id);

/*
 * The regions of a manifest left on the wire (decode_request_lean): a manifest of a million
 * regions is 26 MB as a frame and hundreds of MiB decoded, so they are decoded one at a time,
 * from the frame, which must outlive this.
 */
struct decode_regions {
	const uint8_t *manifest;  /* the Manifest's bytes in the frame; NULL: none left there */
	size_t len;
	size_t n;                 /* regions */
	size_t pos, next;         /* where the next one is sought, and its index */
	Pim__Region *cur;         /* the one decoded last */
};

/*
 * decode_request, except that the regions of a ModelLoad's manifest are not decoded: the
 * request's manifest has none, and *regions reads them from buf.  The whole frame is measured
 * and its strings checked as decode_request does.  For any other request (and a ModelLoad whose
 * message or manifest appears more than once, which protobuf merges) it is decode_request, and
 * regions->manifest is NULL.
 */
int decode_request_lean(const uint8_t *buf, size_t len, struct decode_budget *budget, Pim__Request **out,
			struct decode_regions *regions, struct pim_error *text, struct pim_error *err);

/* Region i of r (ctx), decoded; valid until the next call.  i must be 0 (from the start again) or
 * the one after the last (NULL with err set otherwise, or when it is not there). */
const Pim__Region *decode_regions_get(void *ctx, size_t i, struct pim_error *err);
void decode_regions_free(struct decode_regions *r);

#endif
