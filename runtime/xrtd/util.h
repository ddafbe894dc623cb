/* SPDX-License-Identifier: MIT */
/* The bottom layer of xrtd: errors, the clock, text files (json.h is its fourth part). */
#ifndef XRTD_UTIL_H
#define XRTD_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define XRTD_ERR_LEN 256

/* errors.c: format `err` and return -errnum (-EINVAL when errnum is 0). */
int xrtd_errf(char err[XRTD_ERR_LEN], int errnum, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* clock.c: CLOCK_MONOTONIC in ns. */
uint64_t now_ns(void);

/* textfile.c: read a small text file (trailing newline stripped) / write one; errors name the path.
 */
int xrtd_read_file(const char *path, char *buf, size_t len, char err[XRTD_ERR_LEN]);
int xrtd_write_file(const char *path, const char *text, char err[XRTD_ERR_LEN]);

#endif /* XRTD_UTIL_H */
