/* SPDX-License-Identifier: MIT */
/* What an engine that died with a previous xrtd left in a process (sie_leftover.c). */
#ifndef XRTD_SIE_LEFTOVER_H
#define XRTD_SIE_LEFTOVER_H

#include <limits.h>
#include <sys/types.h>

#include "util.h"

/* The xsie-user tool installed next to xrtd. */
int sie_user_tool(char path[PATH_MAX], char err[XRTD_ERR_LEN]);

/*
 * Before a new engine on `pid`: undo what an engine of a previous xrtd left armed there (its plan
 * and state files in `dir`), so the process computes with its original values again. Refused,
 * with what to do, when it cannot be undone; files of a process that is gone are removed.
 */
int sie_leftover_disarm(pid_t pid, const char *dir, char err[XRTD_ERR_LEN]);

#endif
