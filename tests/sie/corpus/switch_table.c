// SPDX-License-Identifier: MIT
/* SIE corpus: switch_table (a dense switch: a jump table at -O2) */
#include <stdio.h>
#include <stdlib.h>

#define K 64

__attribute__((noinline)) long compute(long n)
{
	long r = n;

	switch (n % 9) {
	case 0:
		r = (n >> 2) + K / 8;
		break;
	case 1:
		r = n - 7;
		/* fall through */
	case 2:
		r = (r << 2) ^ 5;
		break;
	case 3:
		r = n / 7 + (n >> 3);
		break;
	case 4:
		r = n * n - K / 8;
		break;
	case 5:
		r = n + 11;
		/* fall through */
	case 6:
		r = r * 5 - n;
		break;
	case 7:
		r = (n ^ 0x55) + (n >> 1);
		break;
	default:
		r = -n;
	}
	return r;
}

int main(void)
{
	char line[64];

	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin))
		fprintf(stdout, "%ld\n", compute(atol(line)));
	return 0;
}
