// SPDX-License-Identifier: MIT
/*
 * xcubic: load, unload and inspect the xcubic TCP congestion control.
 *
 *   xcubic load   [--pin DIR]   register "xcubic", pin DIR/{params,stats,ops}, set the defaults
 *   xcubic unload [--pin DIR]   unregister and remove the pins
 *   xcubic show   [--pin DIR]   print params and stats as JSON
 *
 * The registration outlives this process (the kernel holds the struct_ops map); xrtd tunes the
 * constants through DIR/params. Select it per socket (TCP_CONGESTION "xcubic") or globally
 * (net.ipv4.tcp_congestion_control).
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "xcubic.skel.h"
#include "xcubic.h"

#define DEFAULT_PIN "/sys/fs/bpf/xtune/xcubic"

static int pin_path(char *buf, size_t len, const char *dir, const char *name)
{
	return snprintf(buf, len, "%s/%s", dir, name) < (int)len ? 0 : -ENAMETOOLONG;
}

static int check_bpffs(const char *dir)
{
	char parent[4096], *slash;
	struct statfs st;

	snprintf(parent, sizeof(parent), "%s", dir);
	slash = strrchr(parent, '/');
	if (slash && slash != parent)
		*slash = 0;
	if (statfs(parent, &st) || st.f_type != BPF_FS_MAGIC) {
		fprintf(stderr,
			"xcubic: %s is not on a BPF filesystem (mount -t bpf bpf "
			"/sys/fs/bpf)\n",
			parent);
		return -EINVAL;
	}
	return 0;
}

static int load(const char *dir)
{
	struct xcubic_params defaults = XCUBIC_PARAMS_DEFAULT;
	struct xcubic_bpf *skel;
	struct bpf_link *link;
	char path[4096];
	__u32 zero = 0;
	int err;

	err = check_bpffs(dir);
	if (err)
		return err;
	if (mkdir(dir, 0700) && errno != EEXIST) {
		fprintf(stderr, "xcubic: mkdir %s: %s\n", dir, strerror(errno));
		return -errno;
	}
	skel = xcubic_bpf__open_and_load();
	if (!skel) {
		fprintf(stderr, "xcubic: loading the BPF object failed: %s\n", strerror(errno));
		return -errno;
	}
	err = bpf_map_update_elem(bpf_map__fd(skel->maps.params), &zero, &defaults, BPF_ANY);
	if (err)
		goto out;
	if ((err = pin_path(path, sizeof(path), dir, "params")) ||
	    (err = bpf_map__pin(skel->maps.params, path)) ||
	    (err = pin_path(path, sizeof(path), dir, "stats")) ||
	    (err = bpf_map__pin(skel->maps.stats, path)) ||
	    (err = pin_path(path, sizeof(path), dir, "ops")) ||
	    (err = bpf_map__pin(skel->maps.xcubic, path)))
		goto out;
	link = bpf_map__attach_struct_ops(skel->maps.xcubic);
	if (!link) {
		err = -errno;
		fprintf(stderr, "xcubic: registering the congestion control failed: %s%s\n",
			strerror(errno), errno == EEXIST ? " (already loaded? xcubic unload)" : "");
		goto out;
	}
	/* Legacy struct_ops: the registration stays after exit; unload deletes it. */
	bpf_link__disconnect(link);
	bpf_link__destroy(link);
	printf("{\"loaded\":\"xcubic\",\"pin\":\"%s\"}\n", dir);
out:
	if (err) {
		if (err != -EEXIST)
			fprintf(stderr, "xcubic: load failed: %s\n", strerror(-err));
		bpf_map__unpin(skel->maps.params, NULL);
		bpf_map__unpin(skel->maps.stats, NULL);
		bpf_map__unpin(skel->maps.xcubic, NULL);
		rmdir(dir);
	}
	xcubic_bpf__destroy(skel);
	return err;
}

static int unload(const char *dir)
{
	const char *names[] = {"ops", "params", "stats"};
	char path[4096];
	__u32 zero = 0;
	int fd, err = 0;

	pin_path(path, sizeof(path), dir, "ops");
	fd = bpf_obj_get(path);
	if (fd < 0) {
		fprintf(stderr, "xcubic: %s: %s (not loaded?)\n", path, strerror(errno));
		return -errno;
	}
	if (bpf_map_delete_elem(fd, &zero) && errno != ENOENT) {
		err = -errno;
		fprintf(stderr, "xcubic: unregistering failed: %s\n", strerror(errno));
	}
	close(fd);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		pin_path(path, sizeof(path), dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
	return err;
}

static int show(const char *dir)
{
	struct xcubic_params p;
	struct xcubic_stats s;
	char path[4096];
	__u32 zero = 0;
	int pfd, sfd, err = 0;

	pin_path(path, sizeof(path), dir, "params");
	pfd = bpf_obj_get(path);
	pin_path(path, sizeof(path), dir, "stats");
	sfd = bpf_obj_get(path);
	if (pfd < 0 || sfd < 0 || bpf_map_lookup_elem(pfd, &zero, &p) ||
	    bpf_map_lookup_elem(sfd, &zero, &s)) {
		fprintf(stderr, "xcubic: %s: %s (not loaded?)\n", dir, strerror(errno));
		err = -errno;
		goto out;
	}
	printf("{\"params\":{\"beta\":%u,\"bic_scale\":%u,\"fast_convergence\":%u,"
	       "\"tcp_friendliness\":%u,\"hystart\":%u,\"hystart_detect\":%u,"
	       "\"hystart_low_window\":%u,\"hystart_ack_delta_us\":%u,"
	       "\"hystart_delay_min_us\":%u,\"hystart_delay_max_us\":%u,"
	       "\"hystart_delay_shift\":%u},",
	       p.beta, p.bic_scale, p.fast_convergence, p.tcp_friendliness, p.hystart,
	       p.hystart_detect, p.hystart_low_window, p.hystart_ack_delta_us,
	       p.hystart_delay_min_us, p.hystart_delay_max_us, p.hystart_delay_shift);
	printf("\"stats\":{\"flows\":%llu,\"hystart_train_exits\":%llu,"
	       "\"hystart_delay_exits\":%llu,\"exit_cwnd_sum\":%llu,\"last_exit_cwnd\":%llu,"
	       "\"loss_events\":%llu}}\n",
	       s.flows, s.hystart_train_exits, s.hystart_delay_exits, s.exit_cwnd_sum,
	       s.last_exit_cwnd, s.loss_events);
out:
	if (pfd >= 0)
		close(pfd);
	if (sfd >= 0)
		close(sfd);
	return err;
}

int main(int argc, char **argv)
{
	const char *dir = DEFAULT_PIN;

	if (argc == 4 && !strcmp(argv[2], "--pin"))
		dir = argv[3];
	else if (argc != 2)
		goto usage;
	if (dir[0] != '/')
		goto usage;
	if (!strcmp(argv[1], "load"))
		return load(dir) ? 1 : 0;
	if (!strcmp(argv[1], "unload"))
		return unload(dir) ? 1 : 0;
	if (!strcmp(argv[1], "show"))
		return show(dir) ? 1 : 0;
usage:
	fprintf(stderr, "usage: xcubic load|unload|show [--pin DIR]   (default %s)\n", DEFAULT_PIN);
	return 2;
}
