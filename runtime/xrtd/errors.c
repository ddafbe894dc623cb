// SPDX-License-Identifier: MIT
/* Error messages: every failure carries a sentence naming what failed. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "util.h"

int xrtd_errf(char err[XRTD_ERR_LEN], int errnum, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, XRTD_ERR_LEN, fmt, ap);
	va_end(ap);
	return -(errnum ? errnum : EINVAL);
}
