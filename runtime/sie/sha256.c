// SPDX-License-Identifier: MIT
/*
 * The SHA-256 of a whole file (libcrypto's EVP, as the analysis's hashlib computes it): the
 * identity of a binary linked without a build id. Read through the descriptor the caller opened
 * (/proc/PID/exe: the file the process mapped, not what its path names now).
 */
#include <openssl/evp.h>
#include <stdio.h>
#include <unistd.h>

#include "sie.h"

int sie_sha256_fd(int fd, char out[65])
{
	static uint8_t buf[1 << 16];
	unsigned char md[32];
	unsigned int mdlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	off_t at = 0;
	ssize_t n;
	int ok;

	ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	while (ok && (n = pread(fd, buf, sizeof(buf), at)) > 0) {
		ok = EVP_DigestUpdate(ctx, buf, (size_t)n);
		at += n;
	}
	ok = ok && n == 0 && EVP_DigestFinal_ex(ctx, md, &mdlen) && mdlen == sizeof(md);
	EVP_MD_CTX_free(ctx);
	if (!ok)
		return -1;
	for (unsigned int i = 0; i < mdlen; i++)
		sprintf(out + 2 * i, "%02x", md[i]);
	return 0;
}
