// SPDX-License-Identifier: MIT
/*
 * sie-kernel: a perf-const of the running kernel, through xsie.ko (kmod/). The target is
 * "xsie:<const id>" for a const whose spans were loaded from the scope table (`xsiectl load`).
 * Values go through XSIE_IOC_SET, which refuses values outside the analysis's range; the value
 * page (mapped once) is only read back. The first write arms the const with the global
 * transition (no thread inside its safe spans); a later write of a const with several spans is
 * a flip made when no thread is inside them (refused while an earlier one waits), of a const
 * with one span the next hit's value. Restore puts the compiled value back and disarms, which
 * removes every probe and leaves the kernel text byte-exact.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "xtune/xsie.h"
#include "backend.h"

struct sie_kernel {
	int fd;
	uint32_t id;
	struct xsie_value_page *page;
};

static int sie_kernel_status(struct sie_kernel *s, struct xsie_status *st, char err[XRTD_ERR_LEN])
{
	memset(st, 0, sizeof(*st));
	st->const_id = s->id;
	if (ioctl(s->fd, XSIE_IOC_STATUS, st))
		return xrtd_errf(err, errno, "xsie const %u: status: %s", s->id, strerror(errno));
	return 0;
}

static void sie_kernel_release(struct xrtd_knob *k)
{
	struct sie_kernel *s = k->priv;

	if (!s)
		return;
	if (s->page != MAP_FAILED)
		munmap(s->page, 4096);
	close(s->fd);
	free(s);
	k->priv = NULL;
}

static int sie_kernel_validate(struct xrtd_knob *k, char err[XRTD_ERR_LEN])
{
	struct xsie_status st;
	struct sie_kernel *s;
	char *end;
	unsigned long id;
	int ret;

	if (strncmp(k->target, "xsie:", 5))
		return xrtd_errf(err, EINVAL, "sie-kernel target '%s': expected xsie:<const id>",
				 k->target);
	id = strtoul(k->target + 5, &end, 10);
	if (end == k->target + 5 || *end || id >= XSIE_MAX_CONSTS)
		return xrtd_errf(err, EINVAL, "sie-kernel target '%s': const id must be 0..%d",
				 k->target, XSIE_MAX_CONSTS - 1);
	if (!xrtd_allowed("sie-kernel", k->target))
		return xrtd_errf(
			err, EPERM,
			"sie-kernel %s is not on xrtd's allow-list (--allow sie-kernel:GLOB)",
			k->target);
	s = calloc(1, sizeof(*s));
	if (!s)
		return xrtd_errf(err, ENOMEM, "sie-kernel: out of memory");
	s->id = id;
	s->page = MAP_FAILED;
	s->fd = open(XSIE_DEVICE, O_RDWR | O_CLOEXEC);
	k->priv = s;
	if (s->fd < 0) {
		ret = xrtd_errf(err, errno, "sie-kernel: %s: %s (is xsie.ko loaded?)", XSIE_DEVICE,
				strerror(errno));
		goto fail;
	}
	ret = sie_kernel_status(s, &st, err);
	if (ret)
		goto fail;
	if (st.state == XSIE_UNUSED) {
		ret = xrtd_errf(err, ENOENT, "sie-kernel %s: no spans loaded (xsiectl load SPANS)",
				k->target);
		goto fail;
	}
	s->page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	if (s->page == MAP_FAILED) {
		ret = xrtd_errf(err, errno, "sie-kernel: mapping the value page: %s",
				strerror(errno));
		goto fail;
	}
	return 0;
fail:
	sie_kernel_release(k);
	return ret;
}

static int sie_kernel_read(struct xrtd_knob *k, int64_t *value, char err[XRTD_ERR_LEN])
{
	struct sie_kernel *s = k->priv;

	(void)err;
	*value = __atomic_load_n(&s->page->value[s->id], __ATOMIC_ACQUIRE);
	return 0;
}

static int sie_kernel_write(struct xrtd_knob *k, int64_t value, char err[XRTD_ERR_LEN])
{
	struct sie_kernel *s = k->priv;
	struct xsie_arm arm = {.const_id = s->id, .mode = XSIE_MODE_GLOBAL};
	struct xsie_value v = {.const_id = s->id, .value = value};
	struct xsie_status st;
	int ret;

	if (ioctl(s->fd, XSIE_IOC_SET, &v)) {
		if (errno == ERANGE)
			return xrtd_errf(
				err, errno,
				"sie-kernel %s: %lld is outside the range the analysis holds "
				"for (the kernel log names it)",
				k->target, (long long)value);
		if (errno == EBUSY)
			return xrtd_errf(
				err, errno,
				"sie-kernel %s: %lld refused: an earlier change still waits "
				"for threads to leave the safe spans",
				k->target, (long long)value);
		return xrtd_errf(err, errno, "sie-kernel %s: set %lld: %s", k->target,
				 (long long)value, strerror(errno));
	}
	ret = sie_kernel_status(s, &st, err);
	if (ret || st.state != XSIE_LOADED)
		return ret;
	if (ioctl(s->fd, XSIE_IOC_ARM, &arm))
		return xrtd_errf(err, errno, "sie-kernel %s: arm: %s", k->target, strerror(errno));
	return 0;
}

static int sie_kernel_restore(struct xrtd_knob *k, int64_t original, char err[XRTD_ERR_LEN])
{
	struct sie_kernel *s = k->priv;
	struct xsie_status st;
	int ret;

	__atomic_store_n(&s->page->value[s->id], original, __ATOMIC_RELEASE);
	ret = sie_kernel_status(s, &st, err);
	if (ret || st.state < XSIE_TRANSITION)
		return ret;
	if (ioctl(s->fd, XSIE_IOC_DISARM, &s->id))
		return xrtd_errf(err, errno, "sie-kernel %s: disarm: %s", k->target,
				 strerror(errno));
	return 0;
}

static const struct xrtd_backend backend_sie_kernel = {
	.name = "sie-kernel",
	.id = XT_BACKEND_SIE_KERNEL,
	.validate = sie_kernel_validate,
	.read = sie_kernel_read,
	.write = sie_kernel_write,
	.restore = sie_kernel_restore,
	.release = sie_kernel_release,
};
XRTD_BACKEND(backend_sie_kernel);
