// SPDX-License-Identifier: MIT
/*
 * What /proc tells of a process, read in one place: its mappings (/proc/PID/maps, line by line)
 * and its start time (against pid reuse). The engine uses both; xrtd links this file to tell a
 * process from another one that reused its pid.
 */
#include <stdio.h>
#include <string.h>

#include "sie.h"

FILE *sie_maps_open(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	return fopen(path, "r");
}

int sie_maps_next(FILE *f, struct sie_mapping *m)
{
	char line[SIE_PATH_LEN + 128];
	int name_at = 0;

	while (fgets(line, sizeof(line), f)) {
		size_t n;

		m->name[0] = 0;
		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &m->start, &m->end, m->perms,
			   &m->offset, &name_at) < 4)
			continue;
		/* The name is the rest of the line: a path may hold spaces (or end in "(deleted)").
		 */
		if (name_at > 0 && (size_t)name_at < strlen(line))
			snprintf(m->name, sizeof(m->name), "%s", line + name_at);
		n = strlen(m->name);
		if (n && m->name[n - 1] == '\n')
			m->name[n - 1] = 0;
		return 1;
	}
	return 0;
}

unsigned long long sie_start_time(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
		sscanf(p + 2,
		       "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d "
		       "%*d %llu",
		       &start);
	fclose(f);
	return start;
}
