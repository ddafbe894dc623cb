/* SPDX-License-Identifier: MIT */
/*
 * The fourth layer of xrtd: what drives the apply layer. The control socket (control.c, its
 * requests answered by ops*.c) and the table watcher.
 */
#ifndef XRTD_CONTROL_H
#define XRTD_CONTROL_H

#include "apply.h"

/* control.c: the control socket; control_run() returns on SIGTERM, SIGINT or SIGHUP. */
int control_listen(const char *path, char err[XRTD_ERR_LEN]);
int control_run(void);
void control_close(void);

/* watcher.c: applies desired values written into the shared table, on its own thread. */
int watcher_start(unsigned poll_us, int rt_priority, unsigned slice_us);
void watcher_stop(void);

#endif /* XRTD_CONTROL_H */
