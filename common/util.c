/* SPDX-License-Identifier: MIT */
#include "util.h"

#include <ctype.h>
#include <limits.h>
#include <string.h>

int err_set(struct pim_error *e, int code, const char *fmt, ...)
{
	if (e) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(e->msg, sizeof e->msg, fmt, ap);
		va_end(ap);
		e->code = code;
	}
	return code;
}

int err_prefix(struct pim_error *e, const char *fmt, ...)
{
	if (!e)
		return 0;
	char prefix[256], old[sizeof e->msg];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof prefix, fmt, ap);
	va_end(ap);
	memcpy(old, e->msg, sizeof old);
	/* Truncating a long message is intended: it stays a bounded, readable line. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-truncation"
	snprintf(e->msg, sizeof e->msg, "%s: %s", prefix, old);
#pragma GCC diagnostic pop
	return e->code;
}

/* Decodes one UTF-8 character of s[0..n): its length (1-4) and code point, or 0 if the bytes
 * there are not a well-formed character (RFC 3629, Table 3-7 of the Unicode standard). */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
	unsigned char c = s[0];
	size_t len;
	uint32_t v, min;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, v = c & 0x1f, min = 0x80;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, v = c & 0x0f, min = 0x800;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, v = c & 0x07, min = 0x10000;
	else
		return 0; /* a continuation byte, an overlong lead (C0, C1) or beyond U+10FFFF */
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (s[i] & 0x3f);
	}
	if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return len;
}

static bool is_control(uint32_t cp)
{
	return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f);
}

/* Unicode's Bidi_Control characters (UAX #9): ALM, LRM and RLM, LRE..RLO (U+202A-U+202E),
 * LRI..PDI (U+2066-U+2069).  On a terminal they reorder what follows them: "abc\u202Etxt.exe"
 * shows as "abcexe.txt". */
static bool is_bidi_control(uint32_t cp)
{
	return cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
	       (cp >= 0x2066 && cp <= 0x2069);
}

char *text_for_terminal(const char *s)
{
	const unsigned char *u = (const unsigned char *)(s ? s : "");
	size_t n = strlen((const char *)u), o = 0;
	char *out = malloc(6 * n + 1); /* at most "\u001B" (6 bytes) for each byte */

	if (!out)
		return NULL;
	for (size_t i = 0; i < n;) {
		uint32_t cp;
		size_t k = utf8_decode(u + i, n - i, &cp);
		if (k == 0 || is_control(cp) || is_bidi_control(cp)) {
			/* \xFF for a byte, \u202E for a character (every one escaped is below U+10000) */
			unsigned digits = k == 0 ? 2 : 4;
			uint32_t v = k == 0 ? u[i] : cp;
			out[o++] = '\\';
			out[o++] = k == 0 ? 'x' : 'u';
			for (unsigned d = digits; d-- > 0;)
				out[o++] = "0123456789ABCDEF"[(v >> (4 * d)) & 0xf];
			i += k == 0 ? 1 : k;
			continue;
		}
		memcpy(out + o, u + i, k);
		o += k;
		i += k;
	}
	out[o] = 0;
	return out;
}

int text_check_n(const char *field, const char *s, size_t len, size_t max, unsigned flags,
		 struct pim_error *err)
{
	const unsigned char *u = (const unsigned char *)s;

	if ((flags & TEXT_REQUIRED) && len == 0)
		return err_set(err, -EINVAL, "%s: must not be empty", field);
	if (max && len > max)
		return err_set(err, -EINVAL, "%s: %zu bytes, at most %zu allowed", field, len, max);
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t k = utf8_decode(u + i, len - i, &cp);
		if (k == 0)
			return err_set(err, -EINVAL, "%s: invalid UTF-8 at byte %zu", field, i);
		if (cp == 0)
			return err_set(err, -EINVAL, "%s: contains a NUL byte at byte %zu", field, i);
		if (is_control(cp) && !(flags & TEXT_ANY_CONTROL) &&
		    !((flags & TEXT_LINES) && (cp == '\t' || cp == '\n' || cp == '\r')))
			return err_set(err, -EINVAL, "%s: contains a control character (U+%04X) at byte %zu",
				       field, (unsigned)cp, i);
		i += k;
	}
	return 0;
}

int text_check(const char *field, const char *s, size_t max, unsigned flags, struct pim_error *err)
{
	return text_check_n(field, s ? s : "", s ? strlen(s) : 0, max, flags, err);
}

size_t text_prefix(const char *s, size_t max)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n = strnlen(s, max + 4), i = 0;

	while (i < n) {
		uint32_t cp;
		size_t k = utf8_decode(u + i, n - i, &cp);
		if (k == 0 || is_control(cp) || i + k > max)
			break;
		i += k;
	}
	return i;
}

char *text_trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

/* The index in keys of name, or n_keys. */
static size_t kv_find(const void *keys, size_t n_keys, size_t stride, const char *name)
{
	size_t i;

	for (i = 0; i < n_keys; i++)
		if (strcmp(*(const char *const *)((const char *)keys + i * stride), name) == 0)
			break;
	return i;
}

int kv_parse(const char *buf, size_t len, const char *origin, unsigned flags, size_t line_max,
	     const void *keys, size_t n_keys, size_t stride,
	     int (*set)(void *ctx, size_t key, const char *value, const char *where,
			struct pim_error *err),
	     void *ctx, struct pim_error *err)
{
	bool seen[KV_KEYS_MAX] = { false };
	size_t pos = 0;
	unsigned lineno = 0;

	if (n_keys > KV_KEYS_MAX || line_max < 2 || line_max > KV_LINE_MAX)
		return err_set(err, -EINVAL, "kv_parse: %zu keys (at most %d), lines of %zu bytes",
			       n_keys, KV_KEYS_MAX, line_max);
	while (pos < len) {
		char line[KV_LINE_MAX], where[PATH_MAX + 32];
		size_t end = pos;
		while (end < len && buf[end] != '\n')
			end++;
		lineno++;
		snprintf(where, sizeof where, "%s:%u", origin, lineno);
		if (end - pos >= line_max)
			return err_set(err, -EINVAL, "%s: line longer than %zu bytes", where, line_max - 1);
		if (memchr(buf + pos, 0, end - pos))
			return err_set(err, -EINVAL, "%s: contains a NUL byte", where);
		memcpy(line, buf + pos, end - pos);
		line[end - pos] = 0;
		pos = end + 1;

		char *hash = flags & KV_INLINE_COMMENTS ? strchr(line, '#') : NULL;
		if (hash)
			*hash = 0;
		char *s = text_trim(line);
		if (*s == 0 || *s == '#')
			continue;
		char *eq = strchr(s, '=');
		if (!eq)
			return err_set(err, -EINVAL, "%s: expected \"key = value\"", where);
		*eq = 0;
		char *key = text_trim(s), *val = text_trim(eq + 1);
		size_t i = kv_find(keys, n_keys, stride, key);
		if (i == n_keys)
			return err_set(err, -EINVAL, "%s: unknown key \"%s\"", where, key);
		if (seen[i])
			return err_set(err, -EINVAL, "%s: key \"%s\" is set twice", where, key);
		seen[i] = true;
		if (*val == 0)
			return err_set(err, -EINVAL, "%s: key \"%s\" has no value", where, key);
		int r = set(ctx, i, val, where, err);
		if (r < 0)
			return r;
	}
	return 0;
}
