/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <string.h>

static int log_level = LOG_INFO;

static const char *const level_names[] = {
	[LOG_EMERG] = "emerg", [LOG_ALERT] = "alert", [LOG_CRIT] = "crit", [LOG_ERR] = "err",
	[LOG_WARNING] = "warning", [LOG_NOTICE] = "notice", [LOG_INFO] = "info", [LOG_DEBUG] = "debug",
};

void log_set_level(int level) { log_level = level; }
int log_get_level(void) { return log_level; }

int log_level_from_name(const char *s)
{
	for (int i = LOG_ERR; i <= LOG_DEBUG; i++)
		if (strcmp(s, level_names[i]) == 0)
			return i;
	if (strcmp(s, "error") == 0)
		return LOG_ERR;
	return -EINVAL;
}

const char *log_level_name(int level)
{
	return level >= 0 && level <= LOG_DEBUG ? level_names[level] : "invalid";
}

void log_full(int level, const char *fmt, ...)
{
	char line[2048];
	va_list ap;
	int saved = errno;

	if (level > log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	/* One write per line so lines from concurrent processes do not interleave. */
	fprintf(stderr, "<%d>%s\n", level, line);
	errno = saved;
}
