/* SPDX-License-Identifier: MIT */
#include "util.h"

#include <string.h>
#include <time.h>

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

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
