/* SPDX-License-Identifier: MIT */
/* strbuf.c: the growing text buffer of strbuf.h; the capacity doubles from 256 bytes. */
#include <string.h>

#include "strbuf.h"

/* Room for n more bytes and the NUL; false (b->error set) when there is none. */
static bool reserve(struct strbuf *b, size_t n)
{
	if (b->error)
		return false;
	if (n > SIZE_MAX - b->len - 1 || (b->max && b->len + n + 1 > b->max)) {
		b->error = -E2BIG;
		return false;
	}
	size_t need = b->len + n + 1;
	if (need <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	if (b->max && cap > b->max)
		cap = b->max;
	char *p = realloc(b->p, cap);
	if (!p) {
		b->error = -ENOMEM;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

void strbuf_put(struct strbuf *b, const char *s, size_t n)
{
	if (!reserve(b, n))
		return;
	if (n) /* s may be NULL when n is 0 (an empty MLIR string reference) */
		memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void strbuf_puts(struct strbuf *b, const char *s)
{
	strbuf_put(b, s, strlen(s));
}

void strbuf_vprintf(struct strbuf *b, const char *fmt, va_list ap)
{
	va_list aq;

	if (b->error)
		return;
	/* Most pieces fit in what is left: format once, straight into the buffer. */
	va_copy(aq, ap);
	int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, aq);
	va_end(aq);
	if (n < 0) {
		b->error = -EINVAL;
		return;
	}
	if (b->p && (size_t)n < b->cap - b->len) { /* and so within max: cap <= max */
		b->len += (size_t)n;
		return;
	}
	if (!reserve(b, (size_t)n)) {
		if (b->p)
			b->p[b->len] = '\0';
		return;
	}
	vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	b->len += (size_t)n;
}

void strbuf_printf(struct strbuf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	strbuf_vprintf(b, fmt, ap);
	va_end(ap);
}

char *strbuf_take(struct strbuf *b, size_t *len)
{
	char *p = NULL;

	if (!b->error) {
		p = b->p ? b->p : strdup("");
		if (!p)
			b->error = -ENOMEM;
		else if (len)
			*len = b->p ? b->len : 0;
		b->p = NULL;
	}
	strbuf_free(b);
	return p;
}

void strbuf_free(struct strbuf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}
