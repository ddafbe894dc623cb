// SPDX-License-Identifier: MIT
/*
 * bpf: one field of the value of a pinned BPF array map, key 0, named through the map's BTF:
 * target "/sys/fs/bpf/xcubic/params:hystart_low_window". The program reads the field each time
 * it uses it, so a write changes its next decision without reloading anything.
 */
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"

#define BPF_VALUE_MAX 4096

struct bpf_knob {
	int map_fd;
	uint32_t offset; /* of the field, bytes */
	uint32_t size;	 /* 1, 2, 4 or 8 */
	bool is_signed;
};

static int bpf_read_value(struct xrtd_knob *k, uint8_t *buf, char err[XRTD_ERR_LEN])
{
	struct bpf_knob *b = k->priv;
	uint32_t key = 0;

	if (bpf_map_lookup_elem(b->map_fd, &key, buf))
		return xrtd_errf(err, errno, "%s: map lookup: %s", k->target, strerror(errno));
	return 0;
}

static int bpf_read(struct xrtd_knob *k, int64_t *value, char err[XRTD_ERR_LEN])
{
	struct bpf_knob *b = k->priv;
	uint8_t buf[BPF_VALUE_MAX];
	uint64_t u = 0;
	int ret = bpf_read_value(k, buf, err);

	if (ret)
		return ret;
	memcpy(&u, buf + b->offset, b->size); /* little endian */
	if (b->is_signed && b->size < 8 && (u >> (b->size * 8 - 1)) & 1)
		u |= ~0ull << (b->size * 8);
	*value = (int64_t)u;
	return 0;
}

static int bpf_write(struct xrtd_knob *k, int64_t value, char err[XRTD_ERR_LEN])
{
	struct bpf_knob *b = k->priv;
	uint8_t buf[BPF_VALUE_MAX];
	uint64_t u = (uint64_t)value;
	uint32_t key = 0;
	int ret = bpf_read_value(k, buf, err);

	if (ret)
		return ret;
	memcpy(buf + b->offset, &u, b->size);
	if (bpf_map_update_elem(b->map_fd, &key, buf, BPF_EXIST))
		return xrtd_errf(err, errno, "%s: map update: %s", k->target, strerror(errno));
	return 0;
}

/* Find `field` in the map's value struct: its byte offset, size and signedness. */
static int find_field(struct xrtd_knob *k, struct bpf_knob *b, const struct bpf_map_info *info,
		      const char *field, char err[XRTD_ERR_LEN])
{
	const struct btf_type *t, *mt;
	const struct btf_member *m;
	struct btf *btf;
	int ret = 0;

	if (!info->btf_id || !info->btf_value_type_id)
		return xrtd_errf(err, EINVAL, "%s: the map has no BTF for its value", k->target);
	btf = btf__load_from_kernel_by_id(info->btf_id);
	if (!btf)
		return xrtd_errf(err, errno, "%s: loading the map's BTF: %s", k->target,
				 strerror(errno));
	t = btf__type_by_id(btf, btf__resolve_type(btf, info->btf_value_type_id));
	if (!t || !btf_is_struct(t)) {
		ret = xrtd_errf(err, EINVAL, "%s: the map's value is not a struct", k->target);
		goto out;
	}
	m = btf_members(t);
	for (int i = 0; i < btf_vlen(t); i++, m++) {
		const char *name = btf__name_by_offset(btf, m->name_off);
		int tid;

		if (strcmp(name, field))
			continue;
		if (btf_member_bitfield_size(t, i) || btf_member_bit_offset(t, i) % 8) {
			ret = xrtd_errf(err, EINVAL, "%s: field is a bitfield", k->target);
			goto out;
		}
		tid = btf__resolve_type(btf, m->type);
		mt = btf__type_by_id(btf, tid);
		if (!mt || !btf_is_int(mt) || btf_int_bits(mt) % 8 || btf_int_offset(mt)) {
			ret = xrtd_errf(err, EINVAL, "%s: field is not an integer", k->target);
			goto out;
		}
		b->offset = btf_member_bit_offset(t, i) / 8;
		b->size = btf_int_bits(mt) / 8;
		b->is_signed = btf_int_encoding(mt) & BTF_INT_SIGNED;
		if (b->size > 8 || b->offset + b->size > info->value_size)
			ret = xrtd_errf(err, EINVAL, "%s: field does not fit a 64-bit value",
					k->target);
		goto out;
	}
	ret = xrtd_errf(err, ENOENT, "%s: the map's value has no field '%s'", k->target, field);
out:
	btf__free(btf);
	return ret;
}

static int bpf_validate(struct xrtd_knob *k, char err[XRTD_ERR_LEN])
{
	struct bpf_map_info info = {0};
	uint32_t len = sizeof(info);
	char path[XT_KNOB_TARGET_LEN], *colon;
	struct bpf_knob *b;

	if (k->netns[0])
		return xrtd_errf(err, EINVAL, "knob %s: netns applies to sysctl knobs only",
				 k->name);
	snprintf(path, sizeof(path), "%s", k->target);
	colon = strrchr(path, ':');
	if (!colon || colon == path || !colon[1])
		return xrtd_errf(err, EINVAL, "bpf target '%s': expected PINNED_MAP:FIELD",
				 k->target);
	*colon = 0;
	if (!xrtd_allowed("bpf", path))
		return xrtd_errf(err, EPERM,
				 "bpf map %s is not on xrtd's allow-list (--allow "
				 "bpf:GLOB)",
				 path);
	b = calloc(1, sizeof(*b));
	if (!b)
		return xrtd_errf(err, ENOMEM, "out of memory");
	k->priv = b;
	b->map_fd = bpf_obj_get(path);
	if (b->map_fd < 0)
		return xrtd_errf(err, errno, "bpf map %s: %s", path, strerror(errno));
	if (bpf_obj_get_info_by_fd(b->map_fd, &info, &len))
		return xrtd_errf(err, errno, "bpf %s: %s", path, strerror(errno));
	if (info.type != BPF_MAP_TYPE_ARRAY || info.key_size != 4 ||
	    info.value_size > BPF_VALUE_MAX)
		return xrtd_errf(err, EINVAL,
				 "bpf %s: must be an array map with 4-byte keys and "
				 "values of at most %d bytes",
				 path, BPF_VALUE_MAX);
	return find_field(k, b, &info, colon + 1, err);
}

static void bpf_release(struct xrtd_knob *k)
{
	struct bpf_knob *b = k->priv;

	if (b && b->map_fd >= 0)
		close(b->map_fd);
	free(b);
	k->priv = NULL;
}

static const struct xrtd_backend backend_bpf = {
	.name = "bpf",
	.id = XT_BACKEND_BPF,
	.validate = bpf_validate,
	.read = bpf_read,
	.write = bpf_write,
	.release = bpf_release,
};
XRTD_BACKEND(backend_bpf);
