// SPDX-License-Identifier: MIT
/*
 * xrtd: the knob runtime daemon. Owns the shared knob table and the control socket, applies
 * values through backends, journals before every change and restores the originals on exit,
 * SIGTERM, lease expiry and (by journal replay on start) after a crash.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include "control.h"
#include "xtune/sched_slice.h"

struct options {
	const char *socket_path;
	const char *state_dir;
	const char *shm_name;
	unsigned poll_us;      /* idle poll period of the table watcher */
	bool journal_sync_all; /* fdatasync every record, not only the originals */
	int rt_priority;       /* SCHED_FIFO priority of the table watcher, 0 = normal scheduling */
	unsigned slice_us; /* the watcher's scheduler slice under normal scheduling, 0 = default */
};

static void usage(FILE *f)
{
	fprintf(f, "usage: xrtd [--socket PATH] [--state-dir DIR] [--shm NAME]\n"
		   "            [--allow BACKEND:GLOB]... [--lease-action good|original]\n"
		   "            [--poll-us N] [--journal-sync originals|all] [--rt-priority N]\n"
		   "            [--slice-us N]\n"
		   "Applies knob values with journal, lease and rollback (runtime/README.md).\n");
}

static int parse_args(int argc, char **argv, struct options *opt)
{
	static const struct option longopts[] = {
		{"socket", required_argument, NULL, 's'},
		{"state-dir", required_argument, NULL, 'd'},
		{"shm", required_argument, NULL, 'm'},
		{"allow", required_argument, NULL, 'a'},
		{"lease-action", required_argument, NULL, 'l'},
		{"poll-us", required_argument, NULL, 'p'},
		{"journal-sync", required_argument, NULL, 'j'},
		{"rt-priority", required_argument, NULL, 'r'},
		{"slice-us", required_argument, NULL, 'S'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	char err[XRTD_ERR_LEN];
	char *end;
	long v;
	int c;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			opt->socket_path = optarg;
			break;
		case 'd':
			opt->state_dir = optarg;
			break;
		case 'm':
			if (optarg[0] == '/' || strchr(optarg, '/') || !optarg[0]) {
				fprintf(stderr, "xrtd: --shm %s: a name without '/'\n", optarg);
				return -1;
			}
			opt->shm_name = optarg;
			break;
		case 'a':
			if (allow_add(optarg, err)) {
				fprintf(stderr, "xrtd: %s\n", err);
				return -1;
			}
			break;
		case 'l':
			if (!strcmp(optarg, "good")) {
				lease_set_action(LEASE_TO_GOOD);
			} else if (!strcmp(optarg, "original")) {
				lease_set_action(LEASE_TO_ORIGINAL);
			} else {
				fprintf(stderr, "xrtd: --lease-action %s: good or original\n",
					optarg);
				return -1;
			}
			break;
		case 'p':
			v = strtol(optarg, &end, 10);
			if (*end || v < 10 || v > 1000000) {
				fprintf(stderr, "xrtd: --poll-us %s: 10..1000000\n", optarg);
				return -1;
			}
			opt->poll_us = v;
			break;
		case 'j':
			if (strcmp(optarg, "all") && strcmp(optarg, "originals")) {
				fprintf(stderr, "xrtd: --journal-sync %s: all or originals\n",
					optarg);
				return -1;
			}
			opt->journal_sync_all = !strcmp(optarg, "all");
			break;
		case 'r':
			v = strtol(optarg, &end, 10);
			if (*end || v < 0 || v > 99) {
				fprintf(stderr, "xrtd: --rt-priority %s: 0..99\n", optarg);
				return -1;
			}
			opt->rt_priority = v;
			break;
		case 'S':
			v = strtol(optarg, &end, 10);
			if (*end || (v && (v < XT_SLICE_MIN_US || v > XT_SLICE_MAX_US))) {
				fprintf(stderr,
					"xrtd: --slice-us %s: 0 (default slice) or 100..100000\n",
					optarg);
				return -1;
			}
			opt->slice_us = v;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "xrtd: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	return 0;
}

static int mkdirs(const char *path)
{
	char buf[4096];

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			if (mkdir(buf, 0700) && errno != EEXIST)
				return -errno;
			*p = '/';
		}
	if (mkdir(buf, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

static int socket_dir(const char *path)
{
	char dir[4096], *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = 0;
	return mkdirs(dir);
}

/* One xrtd per state dir: a second one would replay (and undo) the first one's live journal. */
static int lock_state_dir(const char *dir, char err[XRTD_ERR_LEN])
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/lock", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600); /* held open until exit */
	if (fd < 0)
		return xrtd_errf(err, errno, "%s: %s", path, strerror(errno));
	if (flock(fd, LOCK_EX | LOCK_NB))
		return xrtd_errf(err, errno, "state dir %s is in use by another xrtd", dir);
	return 0;
}

int main(int argc, char **argv)
{
	struct options opt = {
		.socket_path = "/run/xtune/xrtd.sock",
		.state_dir = "/var/lib/xtune",
		.shm_name = "xtune.knobs",
		.poll_us = 1000,
		.slice_us = 100,
	};
	char err[XRTD_ERR_LEN];
	sigset_t mask;
	int ret;

	if (parse_args(argc, argv, &opt))
		return 2;
	/* Signals are taken from a signalfd by the control loop; no thread gets them async. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);

	if ((ret = mkdirs(opt.state_dir)) || (ret = socket_dir(opt.socket_path))) {
		fprintf(stderr, "xrtd: cannot create state/socket directory: %s\n", strerror(-ret));
		return 1;
	}
	backend_set_state_dir(opt.state_dir);
	if (lock_state_dir(opt.state_dir, err) || audit_open(opt.state_dir, err)) {
		fprintf(stderr, "xrtd: %s\n", err);
		return 1;
	}
	ret = table_create(opt.shm_name);
	if (ret) {
		fprintf(stderr, "xrtd: /dev/shm/%s: %s\n", opt.shm_name,
			ret == -EADDRINUSE ? "in use by another running xrtd" : strerror(-ret));
		return 1;
	}
	/* Registrations come back into the table; the socket opens after replay. */
	if (recovery_run(opt.state_dir, opt.journal_sync_all, err) ||
	    control_listen(opt.socket_path, err)) {
		fprintf(stderr, "xrtd: %s\n", err);
		knobs_free_all();
		table_destroy();
		return 1;
	}
	ret = watcher_start(opt.poll_us, opt.rt_priority, opt.slice_us);
	if (!ret) {
		fprintf(stderr, "xrtd: ready, socket %s, table /dev/shm/%s, journal %s\n",
			opt.socket_path, opt.shm_name, journal_path());
		ret = control_run();
	}
	watcher_stop();
	apply_lock();
	knobs_restore_all("xrtd exiting");
	knobs_free_all();
	apply_unlock();
	control_close();
	journal_close();
	table_destroy();
	return ret ? 1 : 0;
}
