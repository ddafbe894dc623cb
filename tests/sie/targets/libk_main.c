// SPDX-License-Identifier: MIT
/*
 * Loads shared libraries on demand: "load PATH" dlopens one (prints "loaded" or the error); a
 * number prints compute(n) of the first library loaded.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
	long (*compute)(long) = NULL;
	char line[4096], path[4096];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin)) {
		if (sscanf(line, "load %4095s", path) == 1) {
			void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);

			if (lib && !compute)
				compute = (long (*)(long))dlsym(lib, "compute");
			printf("%s\n", lib ? "loaded" : dlerror());
		} else if (compute) {
			printf("%ld\n", compute(atol(line)));
		} else {
			printf("no library\n");
		}
	}
	return 0;
}
