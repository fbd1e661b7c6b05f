/* SPDX-License-Identifier: MIT */
#include "answers.h"

#include <stdlib.h>
#include <string.h>

#include "wire.h"

/* The tag of field 1 as a varint (Request.id and Response.id). */
#define ID_TAG 0x08u

struct entry {
	uint64_t hash;
	uint64_t version;
	uint32_t klen, n;
	uint8_t data[]; /* the key, then the answer */
};

struct answers {
	struct entry **slot; /* open addressing, cap a power of two, at most half full */
	unsigned cap, max_entries;
	size_t max_bytes;
	struct answers_stats st;
};

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
	uint64_t h = 14695981039346656037ull; /* FNV-1a */

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

/* The bytes of a message after its leading id field; false when the id is not a whole varint. */
static bool skip_id(const uint8_t *p, size_t n, const uint8_t **rest, size_t *rn)
{
	struct wire_field f;
	size_t k = 0;

	if (n && p[0] == ID_TAG) {
		if (wire_next(p, n, &k, &f) <= 0)
			return false;
	}
	*rest = p + k;
	*rn = n - k;
	return true;
}

struct answers *answers_new(unsigned max_entries, size_t max_bytes)
{
	struct answers *a = calloc(1, sizeof *a);

	if (!a)
		return NULL;
	a->max_entries = max_entries ? max_entries : ANSWERS_MAX_ENTRIES;
	a->max_bytes = max_bytes ? max_bytes : ANSWERS_MAX_BYTES;
	for (a->cap = 16; a->cap < 2 * a->max_entries; a->cap *= 2)
		;
	a->slot = calloc(a->cap, sizeof *a->slot);
	if (!a->slot) {
		free(a);
		return NULL;
	}
	return a;
}

static void empty(struct answers *a)
{
	if (!a->st.entries)
		return;
	for (unsigned i = 0; i < a->cap; i++) {
		free(a->slot[i]);
		a->slot[i] = NULL;
	}
	a->st.entries = 0;
	a->st.bytes = 0;
	a->st.emptied++;
}

void answers_free(struct answers *a)
{
	if (!a)
		return;
	empty(a);
	free(a->slot);
	free(a);
}

bool answers_key(const uint8_t *payload, size_t len, const uint8_t **key, size_t *klen)
{
	return len <= ANSWERS_MAX_KEY && skip_id(payload, len, key, klen);
}

/* The slot of key: where it is, or the empty one where it would go. */
static struct entry **find(struct answers *a, const uint8_t *key, size_t klen, uint64_t h)
{
	for (unsigned i = (unsigned)h & (a->cap - 1);; i = (i + 1) & (a->cap - 1)) {
		struct entry *e = a->slot[i];
		if (!e || (e->hash == h && e->klen == klen && !memcmp(e->data, key, klen)))
			return &a->slot[i];
	}
}

const uint8_t *answers_get(struct answers *a, const uint8_t *key, size_t klen, uint64_t version, size_t *n)
{
	struct entry *e = *find(a, key, klen, hash_bytes(key, klen));

	/* (one of a version gone by stays until an answer of the new one takes its place) */
	if (!e || e->version != version) {
		a->st.misses++;
		return NULL;
	}
	a->st.hits++;
	*n = e->n;
	return e->data + e->klen;
}

bool answers_put(struct answers *a, const uint8_t *key, size_t klen, uint64_t asked, uint64_t now,
		 const uint8_t *resp, size_t n)
{
	const uint8_t *body;
	size_t bn;

	if (asked != now || klen > ANSWERS_MAX_KEY || !skip_id(resp, n, &body, &bn) ||
	    klen + bn > a->max_bytes / 4 || bn > UINT32_MAX) {
		a->st.refused++;
		return false;
	}
	uint64_t h = hash_bytes(key, klen);
	struct entry **at = find(a, key, klen, h);
	size_t size = sizeof(struct entry) + klen + bn;
	if (*at && (*at)->version == now)
		return true; /* the same answer again (asked twice before it was kept): the first stays */
	struct entry *e = malloc(size);
	if (!e)
		return false;
	*e = (struct entry){ .hash = h, .version = now, .klen = (uint32_t)klen, .n = (uint32_t)bn };
	memcpy(e->data, key, klen);
	memcpy(e->data + klen, body, bn);
	if (*at) {
		/* one of a version gone by: this one takes its slot */
		a->st.bytes -= sizeof(struct entry) + (*at)->klen + (*at)->n;
		a->st.entries--;
		free(*at);
		*at = NULL;
	}
	if (a->st.entries + 1 > a->max_entries || a->st.bytes + size > a->max_bytes) {
		empty(a);
		at = find(a, key, klen, h);
	}
	*at = e;
	a->st.entries++;
	a->st.bytes += size;
	a->st.kept++;
	return true;
}

size_t answers_size(uint64_t id, size_t n)
{
	return wire_put_uint(NULL, 1, id) + n; /* (an id of 0 is not written) */
}

void answers_write(uint8_t *out, uint64_t id, const uint8_t *body, size_t n)
{
	out += wire_put_uint(out, 1, id);
	memcpy(out, body, n);
}

void answers_stats(const struct answers *a, struct answers_stats *st)
{
	*st = a->st;
}
