/* SPDX-License-Identifier: MIT */
/*
 * util.h: small helpers shared by every module of pimd, pimctl and the tests.
 *
 * Conventions (README.md, "Conventions"):
 *   - functions return 0 (or a non-negative count) on success, a negative errno on failure;
 *   - modules that validate input fill a struct pim_error with a message that names what was
 *     wrong, so the caller can log it or send it to a client; modules never log;
 *   - _cleanup_ attributes instead of goto ladders.
 */
#ifndef PIMD_UTIL_H
#define PIMD_UTIL_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

#define TAKE_PTR(p)                                                                                \
	({                                                                                         \
		__typeof__(p) _p_ = (p);                                                           \
		(p) = NULL;                                                                        \
		_p_;                                                                               \
	})
#define TAKE_FD(fd)                                                                                \
	({                                                                                         \
		int _fd_ = (fd);                                                                   \
		(fd) = -1;                                                                         \
		_fd_;                                                                              \
	})

static inline void freep(void *p) { free(*(void **)p); }
static inline void closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}
static inline void fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}

/* An error with a message for a human; code is a negative errno. */
struct pim_error {
	int code;
	char msg[512];
};

/* Fills e (if not NULL) and returns code, so "return err_set(e, -EINVAL, ...)" reads well. */
int err_set(struct pim_error *e, int code, const char *fmt, ...) _printf_(3, 4);
/* Prefixes the existing message with "prefix: " (used to add context while unwinding). */
int err_prefix(struct pim_error *e, const char *fmt, ...) _printf_(2, 3);

/* Overflow-checked arithmetic; return false on overflow. */
static inline bool mul_u64(uint64_t a, uint64_t b, uint64_t *r) { return !__builtin_mul_overflow(a, b, r); }
static inline bool add_u64(uint64_t a, uint64_t b, uint64_t *r) { return !__builtin_add_overflow(a, b, r); }

/*
 * Text rules for every string a client sends that pimd stores or echoes (pimd(8), TEXT):
 * well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF), no
 * NUL byte, and no control character: C0 (U+0000-U+001F), DEL (U+007F) or C1 (U+0080-U+009F);
 * TEXT_LINES allows tab, line feed and carriage return (CSV bodies).  At most max bytes
 * (0: no limit); TEXT_REQUIRED refuses the empty string.  On failure -EINVAL and a message
 * that names the field and the byte, e.g. "regions[2].name: invalid UTF-8 at byte 3".
 */
#define TEXT_REQUIRED 1u
#define TEXT_LINES 2u
#define TEXT_ANY_CONTROL 4u   /* control characters are the field's business (wire-level check) */
int text_check_n(const char *field, const char *s, size_t len, size_t max, unsigned flags,
		 struct pim_error *err);
/* As text_check_n on a NUL-terminated string (NULL is the empty string). */
int text_check(const char *field, const char *s, size_t max, unsigned flags, struct pim_error *err);

/* Bytes of the longest prefix of s, at most max, made of whole, valid, non-control characters:
 * what a message may echo of a string that may be invalid or too long without cutting a
 * character in two.  TEXT_ECHO(s, max) gives the two arguments of a "%.*s". */
size_t text_prefix(const char *s, size_t max);
#define TEXT_ECHO(s, max) (int)text_prefix((s) ? (s) : "", (max)), ((s) ? (s) : "")

/* s (NULL: "") as text for a terminal, newly allocated (NULL: out of memory): a control
 * character (C0, DEL, C1) or a bidirectional control (U+061C, U+200E, U+200F, U+202A-U+202E,
 * U+2066-U+2069, which reorder the text a terminal shows after them) becomes "\uXXXX", a byte
 * that is not well-formed UTF-8 "\xXX"; everything else is kept.  pimctl's text output
 * (pimctl(1), --json keeps the bytes). */
char *text_for_terminal(const char *s);

/* Strips leading and trailing white space (isspace) in place; returns the first kept byte. */
char *text_trim(char *s);

/*
 * Configuration text: "key = value" lines (pimd.conf(5), the HBM-PIM parameter file).  Blank
 * lines and comments are skipped: a '#' starts a comment at the start of a line, or anywhere
 * with KV_INLINE_COMMENTS.  keys[0..n_keys) is the caller's table, stride bytes apart, each
 * entry starting with its const char *name.  Every key must be in it and appear at most once,
 * every value must be non-empty; set(ctx, i, value, where, err) then takes the value of
 * keys[i], where naming it ("origin:line").  Lines are at most line_max - 1 bytes (at most
 * KV_LINE_MAX), NUL bytes are refused.  0, or the first error (-EINVAL, or set's) with err
 * filled ("origin:line: unknown key \"x\"").
 */
#define KV_INLINE_COMMENTS 1u
#define KV_LINE_MAX 4096
#define KV_KEYS_MAX 64
int kv_parse(const char *buf, size_t len, const char *origin, unsigned flags, size_t line_max,
	     const void *keys, size_t n_keys, size_t stride,
	     int (*set)(void *ctx, size_t key, const char *value, const char *where,
			struct pim_error *err),
	     void *ctx, struct pim_error *err);

/* The file and clock helpers (sys.c): not for the pure modules (make check-purity). */
#include "sys.h"

#endif
