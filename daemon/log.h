/* SPDX-License-Identifier: MIT */
/*
 * log.h: pimd's one logging family.  Lines go to stderr with a "<N>" syslog priority prefix,
 * which journald turns into the message priority.  Only pimd's main program and its shells
 * log; the pure modules return errors instead.
 */
#ifndef PIMD_LOG_H
#define PIMD_LOG_H

#include <syslog.h>

#include "util.h"

void log_set_level(int level);
int log_get_level(void);
/* "err", "warning", "notice", "info", "debug" → LOG_*; -EINVAL otherwise. */
int log_level_from_name(const char *s);
const char *log_level_name(int level);

void log_full(int level, const char *fmt, ...) _printf_(2, 3);

#define log_error(...) log_full(LOG_ERR, __VA_ARGS__)
#define log_warning(...) log_full(LOG_WARNING, __VA_ARGS__)
#define log_notice(...) log_full(LOG_NOTICE, __VA_ARGS__)
#define log_info(...) log_full(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_full(LOG_DEBUG, __VA_ARGS__)

#endif
