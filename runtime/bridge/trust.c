// SPDX-License-Identifier: MIT
/*
 * Who may change the bridge's keys. authorized_clients decides who may change this host's knobs,
 * so it, server.key and the directory holding them must be writable by their owner only, and the
 * owner must be root or the user the bridge runs as; anything else is refused before serving.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bridge.h"

static int trusted(const char *path)
{
	struct stat st;

	if (stat(path, &st)) {
		fprintf(stderr, "xrtd-bridge: %s: %s\n", path, strerror(errno));
		return 0;
	}
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		fprintf(stderr,
			"xrtd-bridge: %s: owned by uid %u, not root or the bridge's user (uid %u): "
			"refused, anyone owning it could authorize clients (chown it)\n",
			path, (unsigned)st.st_uid, (unsigned)geteuid());
		return 0;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		fprintf(stderr,
			"xrtd-bridge: %s: mode %04o is writable by group or others: refused, they "
			"could authorize clients (chmod go-w)\n",
			path, (unsigned)(st.st_mode & 07777));
		return 0;
	}
	return 1;
}

int keys_trusted(const char *dir)
{
	static const char *const names[] = {"server.key", "authorized_clients"};
	char path[4096];
	int ok = trusted(dir);

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		/* A missing file is xt_keys_check's to name. */
		ok &= access(path, F_OK) || trusted(path);
	}
	return ok;
}
