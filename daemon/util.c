/* SPDX-License-Identifier: MIT */
#include "util.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
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

int read_file(const char *path, size_t max, char **out, size_t *len, struct pim_error *err)
{
	_cleanup_(closep) int fd = open(path, O_RDONLY | O_CLOEXEC);
	_cleanup_(freep) char *buf = NULL;
	struct stat st;
	size_t n = 0;

	if (fd < 0)
		return err_set(err, -errno, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0)
		return err_set(err, -errno, "%s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return err_set(err, -EINVAL, "%s: not a regular file", path);
	if ((uint64_t)st.st_size > max)
		return err_set(err, -EFBIG, "%s: %jd bytes, at most %zu accepted", path, (intmax_t)st.st_size,
			       max);
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return err_set(err, -ENOMEM, "out of memory reading %s", path);
	while (n < (size_t)st.st_size) {
		ssize_t k = read(fd, buf + n, (size_t)st.st_size - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return err_set(err, -errno, "%s: %s", path, strerror(errno));
		if (k == 0)
			break;
		n += (size_t)k;
	}
	buf[n] = 0;
	*out = TAKE_PTR(buf);
	*len = n;
	return 0;
}
