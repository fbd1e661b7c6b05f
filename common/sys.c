/* SPDX-License-Identifier: MIT */
#include "sys.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

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
