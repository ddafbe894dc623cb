// SPDX-License-Identifier: MIT
/* Runs a corpus program built as a shared library: dlopen(argv[1]) and call its main(). */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	void *lib = argc == 2 ? dlopen(argv[1], RTLD_NOW) : NULL;
	int (*entry)(void) = lib ? (int (*)(void))dlsym(lib, "main") : NULL;

	if (!entry) {
		fprintf(stderr, "usage: so_main LIBRARY (a library with main): %s\n", dlerror());
		return 2;
	}
	return entry();
}
