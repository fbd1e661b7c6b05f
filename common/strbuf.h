/* SPDX-License-Identifier: MIT */
/*
 * strbuf.h: a growing text buffer, the one behind pim-extract's MLIR and C text and the SVG
 * writer.  Pure: memory in, text out, no I/O.
 *
 * The text stays NUL-terminated.  The first failure (-ENOMEM, or -E2BIG past max) is kept in
 * b->error and every later call does nothing, so a writer checks once at the end.
 */
#ifndef PIMD_STRBUF_H
#define PIMD_STRBUF_H

#include "util.h"

struct strbuf {
	char *p;    /* the text, NUL-terminated; NULL while nothing was written */
	size_t len; /* bytes of text, without the NUL */
	size_t cap; /* bytes allocated */
	size_t max; /* the largest text allowed in bytes, NUL included; 0: no limit */
	int error;  /* 0, or the first failure (negative errno) */
};

void strbuf_put(struct strbuf *b, const char *s, size_t n);
void strbuf_puts(struct strbuf *b, const char *s);
void strbuf_printf(struct strbuf *b, const char *fmt, ...) _printf_(2, 3);
void strbuf_vprintf(struct strbuf *b, const char *fmt, va_list ap) _printf_(2, 0);

/* The text (never NULL: "" when empty; the caller frees it) and its length in *len when len is
 * not NULL; NULL with b->error kept when a write failed.  Either way b is empty afterwards
 * except for its error. */
char *strbuf_take(struct strbuf *b, size_t *len);
void strbuf_free(struct strbuf *b);

#endif
