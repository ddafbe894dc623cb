// SPDX-License-Identifier: MIT
/*
 * xsie-user: the user-space SIE engine's command line (driven by `xtune sie`).
 *
 *   xsie-user arm    --pid PID --plan PLAN --state STATE [--timeout-ms N]
 *   xsie-user disarm --plan PLAN --state STATE [--timeout-ms N]
 *   xsie-user serve  --pid PID --plan PLAN --state STATE [--timeout-ms N]
 *   xsie-user run    --pid PID --plan PLAN --state STATE [--timeout-ms N] [--control SOCKET]
 *                    [--share-values]
 *
 * `serve` is the int3 fallback: it arms, prints "armed" once the state file is written, stays
 * attached serving breakpoint hits, and disarms on SIGTERM/SIGINT (then removes the state file).
 * `run` arms with engine-owned values, prints "armed" (state file written) and takes "set NAME
 * VALUE" lines, answering each once the value is in effect ("ok ...") or refused ("err ..."): on
 * stdin/stdout (xrtd's sie-user backend; the end of stdin disarms), or with --control one command
 * per connection on a unix socket it creates (`xtune sie`; SIGTERM or "disarm" disarms).
 * --timeout-ms bounds each change's wait for quiescence. --share-values (stdin/stdout a unix
 * stream, as xrtd's): after "armed", a line "values" carries the value page's memfd, through which
 * the controller changes a perf-const read once per pass itself (`sie_ctl`); "values none: WHY"
 * when it cannot be shared.
 *
 * Exit status 0 on success; otherwise one line on stderr says what was refused and why, and the
 * target is left running unpatched (arm) or as it was (disarm).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "sie.h"
#include "xtune/sched_slice.h"

static volatile int stop;
static const char *state_path;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static void served(const struct sie_state *st)
{
	char err[SIE_ERR_LEN];

	if (sie_state_write(state_path, st, err))
		fprintf(stderr, "xsie-user: %s\n", err);
	printf("armed pid %d (engine pid %d)\n", st->pid, st->server);
	fflush(stdout);
}

static int serve(int pid, struct sie_plan *plan, const struct sie_opts *o, struct sie_state *st,
		 char err[SIE_ERR_LEN])
{
	struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: waitpid returns */

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (sie_serve(pid, plan, o, st, &stop, served, err))
		return -1;
	unlink(state_path);
	return 0;
}

/* A unix socket only we can reach; an existing file of that name is refused, not replaced. */
static int control_socket(const char *path, char err[SIE_ERR_LEN])
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(a.sun_path)) {
		snprintf(err, SIE_ERR_LEN, "control socket %s: path too long", path);
		return -1;
	}
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	umask(077);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 16)) {
		snprintf(err, SIE_ERR_LEN, "control socket %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int run(int pid, struct sie_plan *plan, const struct sie_opts *o, struct sie_state *st,
	       const char *control, int share_values, char err[SIE_ERR_LEN])
{
	struct sie_ctl ctl = {.in = 0, .out = 1, .listen_fd = -1, .share_values = share_values};
	int rc;

	signal(SIGPIPE, SIG_IGN);
	/* Each change is a wake-up on the tick → effect path: see xtune/sched_slice.h. A policy
	 * inherited from xrtd (SCHED_FIFO with --rt-priority) is kept. */
	if (sched_getscheduler(0) == SCHED_OTHER && (rc = xt_sched_set(0, XT_SLICE_MIN_US)))
		fprintf(stderr, "xsie-user: cannot set a short scheduler slice (%s)\n",
			strerror(-rc));
	if (control && (ctl.listen_fd = control_socket(control, err)) < 0)
		return -1;
	rc = sie_run(pid, plan, o, st, &ctl, served, err);
	if (control)
		unlink(control);
	if (!rc)
		unlink(state_path);
	return rc;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: xsie-user arm --pid PID --plan PLAN --state STATE [--timeout-ms N]\n"
		"       xsie-user disarm --plan PLAN --state STATE [--timeout-ms N]\n"
		"       xsie-user serve|run --pid PID --plan PLAN --state STATE [--timeout-ms "
		"N]\n"
		"       (run: [--control SOCKET] [--share-values])\n");
	exit(2);
}

static double ms_since(const struct timespec *a)
{
	struct timespec b;

	clock_gettime(CLOCK_MONOTONIC, &b);
	return (double)(b.tv_sec - a->tv_sec) * 1e3 + (double)(b.tv_nsec - a->tv_nsec) / 1e6;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"pid", required_argument, 0, 'p'},    {"plan", required_argument, 0, 'l'},
		{"state", required_argument, 0, 's'},  {"timeout-ms", required_argument, 0, 't'},
		{"verbose", no_argument, 0, 'v'},      {"control", required_argument, 0, 'c'},
		{"share-values", no_argument, 0, 'S'}, {0, 0, 0, 0},
	};
	static struct sie_plan plan;
	struct sie_opts o = {.timeout_ms = 2000};
	const char *plan_path = NULL, *control = NULL;
	int share_values = 0;
	struct sie_state st;
	char err[SIE_ERR_LEN] = "";
	struct timespec t0;
	int pid = 0, c, rc;

	if (argc < 2)
		usage();
	while ((c = getopt_long(argc - 1, argv + 1, "", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			pid = atoi(optarg);
			break;
		case 'l':
			plan_path = optarg;
			break;
		case 's':
			state_path = optarg;
			break;
		case 't':
			o.timeout_ms = atoi(optarg);
			break;
		case 'v':
			o.verbose = 1;
			break;
		case 'c':
			control = optarg;
			break;
		case 'S':
			share_values = 1;
			break;
		default:
			usage();
		}
	}
	if (!plan_path || !state_path)
		usage();
	srand((unsigned int)time(NULL));
	if (sie_plan_read(plan_path, &plan, err)) {
		fprintf(stderr, "xsie-user: %s\n", err);
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (!strcmp(argv[1], "arm")) {
		if (pid <= 0)
			usage();
		rc = sie_arm(pid, &plan, &o, &st, err);
		if (!rc && sie_state_write(state_path, &st, err)) {
			sie_disarm(&plan, &o, &st, err);
			rc = -1;
		}
	} else if (!strcmp(argv[1], "serve")) {
		if (pid <= 0)
			usage();
		rc = serve(pid, &plan, &o, &st, err);
	} else if (!strcmp(argv[1], "run")) {
		if (pid <= 0)
			usage();
		rc = run(pid, &plan, &o, &st, control, share_values, err);
		if (rc)
			printf("err %s\n", err);
	} else if (!strcmp(argv[1], "disarm")) {
		rc = sie_state_read(state_path, &st, err);
		if (!rc)
			rc = sie_disarm(&plan, &o, &st, err);
	} else {
		usage();
		return 2;
	}
	if (rc) {
		fprintf(stderr, "xsie-user: %s\n", err);
		return 1;
	}
	printf("%s pid %d spans %d in %.3f ms\n", argv[1], st.pid, plan.nspans, ms_since(&t0));
	return 0;
}
