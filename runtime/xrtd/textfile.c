// SPDX-License-Identifier: MIT
/* Reading and writing the one-line text files of /proc/sys and /sys. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

int xrtd_read_file(const char *path, char *buf, size_t len, char err[XRTD_ERR_LEN])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return xrtd_errf(err, errno, "%s: %s", path, strerror(errno));
	n = read(fd, buf, len - 1);
	if (n < 0) {
		int e = errno;

		close(fd);
		return xrtd_errf(err, e, "%s: read: %s", path, strerror(e));
	}
	close(fd);
	if ((size_t)n == len - 1)
		return xrtd_errf(err, EFBIG, "%s: longer than %zu bytes", path, len - 1);
	buf[n] = 0;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = 0;
	return 0;
}

int xrtd_write_file(const char *path, const char *text, char err[XRTD_ERR_LEN])
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	size_t len = strlen(text);
	ssize_t n;

	if (fd < 0)
		return xrtd_errf(err, errno, "%s: %s", path, strerror(errno));
	n = write(fd, text, len);
	if (n != (ssize_t)len) {
		int e = n < 0 ? errno : EIO;

		close(fd);
		return xrtd_errf(err, e, "%s: write '%s': %s", path, text, strerror(e));
	}
	if (close(fd))
		return xrtd_errf(err, errno, "%s: write '%s': %s", path, text, strerror(errno));
	return 0;
}
