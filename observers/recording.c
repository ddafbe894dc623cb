// SPDX-License-Identifier: MIT
/* Recording writer: appends records to a file (format in xtune/recording.h, README.md). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "observer.h"

static int fd = -1;
static const char *rec_path;

/*
 * The end of the last complete record: a writer that crashed mid-record leaves a torn tail,
 * which appending would bury in the middle of the file.
 */
static off_t complete_end(off_t size)
{
	struct xt_rec_file_header fh;
	struct xt_rec_header rh;
	off_t off;

	if (pread(fd, &fh, sizeof(fh), 0) != sizeof(fh) || memcmp(fh.magic, XT_REC_MAGIC, 8) ||
	    fh.version != XT_REC_VERSION)
		return -1;
	off = fh.header_size;
	while (off + (off_t)sizeof(rh) <= size && pread(fd, &rh, sizeof(rh), off) == sizeof(rh) &&
	       off + (off_t)sizeof(rh) + rh.size <= size)
		off += sizeof(rh) + rh.size;
	return off;
}

int xt_rec_open(const char *path)
{
	struct xt_rec_file_header fh = {.version = XT_REC_VERSION, .header_size = sizeof(fh)};
	struct timespec now;
	struct stat st;
	off_t end;

	rec_path = path;
	fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0 || fstat(fd, &st))
		goto fail;
	if (st.st_size == 0) {
		memcpy(fh.magic, XT_REC_MAGIC, 8);
		clock_gettime(CLOCK_REALTIME, &now);
		fh.created_unix_ns = (uint64_t)now.tv_sec * 1000000000ull + now.tv_nsec;
		if (write(fd, &fh, sizeof(fh)) != sizeof(fh))
			goto fail;
		return 0;
	}
	end = complete_end(st.st_size);
	if (end < 0) {
		fprintf(stderr,
			"xobserve: %s is not an xtune recording (version %d); not appending\n",
			path, XT_REC_VERSION);
		close(fd);
		fd = -1;
		return -1;
	}
	if (end < st.st_size && ftruncate(fd, end))
		goto fail;
	return 0;
fail:
	fprintf(stderr, "xobserve: cannot write recording %s: %s\n", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	fd = -1;
	return -1;
}

int xt_rec_write(uint16_t type, const void *data, size_t len)
{
	struct xt_rec_header rh = {.type = type, .size = len, .time_ns = xt_now_ns()};
	struct iovec iov[2] = {{&rh, sizeof(rh)}, {(void *)data, len}};

	if (fd < 0)
		return -1;
	if (writev(fd, iov, 2) != (ssize_t)(sizeof(rh) + len)) {
		fprintf(stderr, "xobserve: recording %s: write failed: %s\n", rec_path,
			strerror(errno));
		return -1;
	}
	return 0;
}

void xt_rec_close(void)
{
	if (fd >= 0)
		close(fd);
	fd = -1;
}
