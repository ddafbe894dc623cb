// SPDX-License-Identifier: MIT
/*
 * CURVE key files of a ZeroMQ server (xobserve's publisher, xrtd-bridge): one Z85 key (40
 * characters) per file, text, mode 0600. DIR/server.key + server.pub: the server's keypair;
 * DIR/client.key + client.pub: a client's; DIR/authorized_clients: the public keys the server
 * accepts, one a line ('#' starts a comment).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "xtune/zmq_curve.h"

static int fail(const char *dir, const char *name, const char *why)
{
	fprintf(stderr, "%s: %s/%s: %s\n", program_invocation_short_name, dir, name, why);
	return -1;
}

/* A key file's text, at most len - 1 bytes; secret files must be private to their owner. */
static int read_text(const char *dir, const char *name, bool secret, char *buf, size_t len)
{
	char path[4096], why[160];
	struct stat st;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return fail(dir, name, strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return fail(dir, name, "not a regular file");
	}
	if (secret && (st.st_mode & (S_IRWXG | S_IRWXO))) {
		close(fd);
		snprintf(why, sizeof(why),
			 "secret key readable by group or others (mode %04o): refused; "
			 "chmod 600 it",
			 st.st_mode & 07777);
		return fail(dir, name, why);
	}
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return fail(dir, name, strerror(errno));
	buf[n] = 0;
	return 0;
}

/* A Z85 key from the start of line (up to blank or end); 0 if it decodes to 32 bytes. */
static int parse_key(const char *line, char z85[XT_Z85_KEY_LEN + 1], uint8_t bin[32])
{
	size_t n = strcspn(line, " \t\r\n");

	if (n != XT_Z85_KEY_LEN)
		return -1;
	memcpy(z85, line, n);
	z85[n] = 0;
	return zmq_z85_decode(bin, z85) ? 0 : -1;
}

int xt_key_read(const char *dir, const char *name, bool secret, char z85[XT_Z85_KEY_LEN + 1])
{
	char text[128];
	uint8_t bin[32];

	if (read_text(dir, name, secret, text, sizeof(text)))
		return -1;
	if (parse_key(text, z85, bin))
		return fail(dir, name, "not a Z85 CURVE key (40 characters)");
	return 0;
}

int xt_keys_authorized(const char *dir, uint8_t (*keys)[32], int max)
{
	char text[XT_MAX_CLIENT_KEYS * 128], z85[XT_Z85_KEY_LEN + 1], why[96];
	char *line, *save;
	int n = 0, lineno = 0;

	if (read_text(dir, "authorized_clients", false, text, sizeof(text)))
		return -1;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		lineno++;
		line += strspn(line, " \t\r");
		if (!*line || *line == '#')
			continue;
		if (n == max || parse_key(line, z85, keys[n])) {
			snprintf(why, sizeof(why), "line %d: %s", lineno,
				 n == max ? "too many keys" : "not a Z85 CURVE public key");
			return fail(dir, "authorized_clients", why);
		}
		n++;
	}
	if (!n)
		return fail(dir, "authorized_clients",
			    "no client key: every client would be refused");
	return n;
}

int xt_keys_check(const char *dir)
{
	uint8_t keys[XT_MAX_CLIENT_KEYS][32];
	char secret[XT_Z85_KEY_LEN + 1];

	if (xt_key_read(dir, "server.key", true, secret))
		return -1;
	return xt_keys_authorized(dir, keys, XT_MAX_CLIENT_KEYS) < 0 ? -1 : 0;
}

/* Written under a temporary name, then renamed: a reader never sees half a key. */
static int write_text(const char *dir, const char *name, const char *text, int flags)
{
	char path[4096], tmp[4200];
	size_t len = strlen(text);
	int fd, ok;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (flags & O_APPEND)
		fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
	else
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return fail(dir, name, strerror(errno));
	ok = !fchmod(fd, 0600) && write(fd, text, len) == (ssize_t)len && !fsync(fd);
	close(fd);
	if (ok && !(flags & O_APPEND) && rename(tmp, path))
		ok = 0;
	return ok ? 0 : fail(dir, name, strerror(errno));
}

static bool exists(const char *dir, const char *name)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return !access(path, F_OK);
}

/* One keypair NAME.key + NAME.pub: kept when there, made when not; its public key in pub. */
static int keypair(const char *dir, const char *name, char pub[XT_Z85_KEY_LEN + 1])
{
	char sec[XT_Z85_KEY_LEN + 1], line[XT_Z85_KEY_LEN + 2], key[64], pubname[64];
	bool made = false;

	snprintf(key, sizeof(key), "%s.key", name);
	snprintf(pubname, sizeof(pubname), "%s.pub", name);
	if (exists(dir, key)) {
		if (xt_key_read(dir, key, true, sec) || zmq_curve_public(pub, sec))
			return -1;
	} else {
		if (exists(dir, pubname))
			return fail(dir, pubname,
				    "public key without its secret key: not replaced");
		if (zmq_curve_keypair(pub, sec))
			return fail(dir, key, zmq_strerror(zmq_errno()));
		snprintf(line, sizeof(line), "%s\n", sec);
		if (write_text(dir, key, line, 0))
			return -1;
		made = true;
	}
	if (!exists(dir, pubname)) {
		snprintf(line, sizeof(line), "%s\n", pub);
		if (write_text(dir, pubname, line, 0))
			return -1;
	}
	printf("%s/%s %s\n", dir, key, made ? "created" : "kept");
	return 0;
}

int xt_keys_generate(const char *dir)
{
	char server[XT_Z85_KEY_LEN + 1], client[XT_Z85_KEY_LEN + 1], other[XT_Z85_KEY_LEN + 1];
	char text[XT_MAX_CLIENT_KEYS * 128], line[64];
	uint8_t bin[32];
	const char *p;

	if (mkdir(dir, 0700) && errno != EEXIST)
		return fail(dir, "", strerror(errno));
	if (keypair(dir, "server", server) || keypair(dir, "client", client))
		return -1;
	snprintf(line, sizeof(line), "%s client\n", client);
	if (!exists(dir, "authorized_clients"))
		return write_text(dir, "authorized_clients", line, 0);
	if (read_text(dir, "authorized_clients", false, text, sizeof(text)))
		return -1;
	for (p = text; p; p = strchr(p, '\n'), p = p ? p + 1 : p) {
		p += strspn(p, " \t");
		if (!parse_key(p, other, bin) && !strcmp(other, client))
			return 0;
	}
	/* A last line without its newline keeps its key. */
	if (*text && text[strlen(text) - 1] != '\n')
		snprintf(line, sizeof(line), "\n%s client\n", client);
	return write_text(dir, "authorized_clients", line, O_APPEND);
}
