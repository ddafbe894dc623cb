// SPDX-License-Identifier: MIT
/* The backend registry: every XRTD_BACKEND() of the binary, found through its linker section. */
#include <string.h>

#include "backend.h"

extern const struct xrtd_backend *const __start_xrtd_backends[];
extern const struct xrtd_backend *const __stop_xrtd_backends[];

static const char *state_dir;

const struct xrtd_backend *xrtd_backend_by_name(const char *name)
{
	for (const struct xrtd_backend *const *b = __start_xrtd_backends; b < __stop_xrtd_backends;
	     b++)
		if (!strcmp((*b)->name, name))
			return *b;
	return NULL;
}

void backend_set_state_dir(const char *dir)
{
	state_dir = dir;
}

const char *backend_state_dir(void)
{
	return state_dir;
}
