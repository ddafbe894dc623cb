// SPDX-License-Identifier: MIT
/*
 * An engine (`xsie-user run`) disarms when xrtd's control stream closes. If it dies too (killed
 * with xrtd, or by the OOM killer), the process keeps running the patched code with the last
 * value, and the restarted xrtd, whose read of a sie-user knob is its own record, would report
 * the original over it. So before a new engine on a process, the plan and state files a dead
 * engine left in the state dir are used to disarm what it armed (`xsie-user disarm`: original
 * bytes back, its pages unmapped): the process computes with its original values again in fact.
 * When that fails the files stay and the registration is refused saying what to do.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sie.h"
#include "sie_leftover.h"

#define TRACER_WAIT_MS 5000 /* a previous engine still disarming on its own */

int sie_user_tool(char path[PATH_MAX], char err[XRTD_ERR_LEN])
{
	ssize_t n = readlink("/proc/self/exe", path, PATH_MAX - 16);

	if (n < 0)
		return xrtd_errf(err, errno, "sie-user: /proc/self/exe: %s", strerror(errno));
	path[n] = 0;
	strcpy(strrchr(path, '/') + 1, "xsie-user");
	return 0;
}

static pid_t tracer_of(pid_t pid)
{
	char path[64], line[128];
	int tracer = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "TracerPid: %d", &tracer) == 1)
			break;
	fclose(f);
	return tracer;
}

/* `xsie-user disarm`; its stderr line is the reason when it fails. */
static int run_disarm(const char *plan, const char *state, char why[XRTD_ERR_LEN])
{
	char tool[PATH_MAX], out[XRTD_ERR_LEN] = "";
	int fds[2], st = 0;
	size_t got = 0;
	ssize_t n;
	pid_t child;

	if (sie_user_tool(tool, why))
		return -1;
	if (pipe2(fds, O_CLOEXEC))
		return xrtd_errf(why, errno, "pipe: %s", strerror(errno));
	child = fork();
	if (child == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(fds[1], 2);
		execv(tool, (char *[]){tool, "disarm", "--plan", (char *)plan, "--state",
				       (char *)state, NULL});
		_exit(127);
	}
	close(fds[1]);
	while (child > 0 && got < sizeof(out) - 1 &&
	       (n = read(fds[0], out + got, sizeof(out) - 1 - got)) > 0)
		got += (size_t)n;
	close(fds[0]);
	if (child < 0)
		return xrtd_errf(why, errno, "cannot run %s", tool);
	waitpid(child, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	out[strcspn(out, "\n")] = 0;
	return xrtd_errf(why, EIO, "%s",
			 out[0] ? out + (strncmp(out, "xsie-user: ", 11) ? 0 : 11)
				: "xsie-user disarm failed");
}

/* One leftover (PATH.state with PATH.plan beside it): disarmed, or gone with its process. */
static int undo_one(pid_t pid, const char *base, char err[XRTD_ERR_LEN])
{
	char plan[PATH_MAX], state[PATH_MAX], why[XRTD_ERR_LEN], serr[SIE_ERR_LEN];
	struct sie_state s;
	int waited = 0;

	snprintf(plan, sizeof(plan), "%s.plan", base);
	snprintf(state, sizeof(state), "%s.state", base);
	if (sie_state_read(state, &s, serr) || s.start_time != sie_start_time(pid))
		goto done; /* not armed (unreadable: never written), or the armed process is gone */
	while (tracer_of(pid) && waited < TRACER_WAIT_MS) {
		if (access(state, F_OK))
			goto done; /* the previous engine disarmed and removed its state */
		usleep(10000);
		waited += 10;
	}
	if (run_disarm(plan, state, why))
		return xrtd_errf(
			err, EIO,
			"sie-user: pid %d runs code armed by an engine that died with xrtd "
			"(undo: %.50s); restart it, or run xsie-user disarm --plan %s.plan "
			"--state %s.state in the state dir's sie-user/",
			pid, why, strrchr(base, '/') + 1, strrchr(base, '/') + 1);
	fprintf(stderr, "xrtd: sie-user: pid %d: disarmed what a dead engine left (%s)\n", pid,
		state);
done:
	unlink(state);
	unlink(plan);
	return 0;
}

int sie_leftover_disarm(pid_t pid, const char *dir, char err[XRTD_ERR_LEN])
{
	char base[PATH_MAX - 16]; /* room for the .plan and .state suffixes */
	struct dirent *d;
	DIR *dp = opendir(dir);
	int ret = 0;

	if (!dp)
		return 0; /* no state dir yet: nothing was ever armed */
	while (!ret && (d = readdir(dp))) {
		int p = 0, serial = 0, end = 0;

		if (sscanf(d->d_name, "%d.%d.state%n", &p, &serial, &end) != 2 || p != pid ||
		    d->d_name[end])
			continue;
		snprintf(base, sizeof(base), "%s/%d.%d", dir, p, serial);
		ret = undo_one(pid, base, err);
	}
	closedir(dp);
	return ret;
}
