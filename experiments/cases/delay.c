// SPDX-License-Identifier: MIT
/*
 * xtune-delay: a fixed propagation delay for the network case's router, on a kernel without netem.
 *
 * It owns one TUN device (made here, gone when the process exits: not persistent). The router's
 * policy routes send the path's packets into the device; each packet read is held in a FIFO with
 * the CLOCK_MONOTONIC time it is due (read time + the delay) and written back at that time, when
 * the kernel forwards it on as if it had arrived on the device. One delay for every packet makes
 * the due times monotonic, so a FIFO keeps them in order; one thread waits in ppoll() until the
 * next packet is due or another arrives, at real-time priority (SCHED_FIFO) so that a busy host
 * does not stretch the delay. A full FIFO drops the packet (a router's tail drop) and counts it;
 * every count, and how many packets left more than 1 ms after their due time, is printed as one
 * JSON line on exit.
 *
 *   xtune-delay --dev NAME --delay-us N [--queue-packets N] [--parent PID]
 *
 * Prints "ready NAME" once the device exists; exits on SIGTERM, SIGINT or SIGHUP, and when its
 * parent dies (PR_SET_PDEATHSIG), so a run that is killed leaves no process holding its namespace.
 * --parent names the process that started it: one already gone before the signal was armed (the
 * parent it was started by is then not its parent) makes it exit at once.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define SLOT_BYTES   2048 /* above the device's MTU (1500): larger packets are counted, dropped */
#define READ_BYTES   65536
#define MAX_DELAY_US 10000000ULL

struct slot {
	uint64_t due_ns;
	uint32_t len;
	unsigned char data[SLOT_BYTES];
};

struct counts {
	unsigned long long forwarded, dropped_full, dropped_oversize, write_errors, max_queued;
	unsigned long long late_1ms,
		max_late_us; /* written after the due time: the wake-up's cost */
};

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int usage(const char *why)
{
	fprintf(stderr,
		"xtune-delay: %s\nusage: xtune-delay --dev NAME --delay-us N [--queue-packets N] "
		"[--parent PID]\n",
		why);
	return 2;
}

/* A whole decimal number in [min, max], or -1 (the caller names the option). */
static long long parse_count(const char *text, long long min, long long max)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(text, &end, 10);
	if (errno || end == text || *end || v < min || v > max)
		return -1;
	return v;
}

static int open_tun(const char *name)
{
	struct ifreq ifr = {0};
	int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "xtune-delay: /dev/net/tun: %s\n", strerror(errno));
		return -1;
	}
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI; /* bare IP packets, no header of tun's own */
	strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		fprintf(stderr, "xtune-delay: TUNSETIFF %s: %s\n", name, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Writes every packet whose time has come; returns how long until the next is due (-1: none). */
static int64_t release_due(int fd, struct slot *ring, size_t cap, size_t *head, size_t *queued,
			   struct counts *c)
{
	uint64_t now = now_ns();

	while (*queued) {
		struct slot *s = &ring[*head];

		if (s->due_ns > now)
			return (int64_t)(s->due_ns - now);
		if (now - s->due_ns > 1000000)
			c->late_1ms++;
		if ((now - s->due_ns) / 1000 > c->max_late_us)
			c->max_late_us = (now - s->due_ns) / 1000;
		if (write(fd, s->data, s->len) == (ssize_t)s->len)
			c->forwarded++;
		else
			c->write_errors++;
		*head = (*head + 1) % cap;
		(*queued)--;
	}
	return -1;
}

/* Reads every packet waiting on the device, each due `delay_ns` after it was read. */
static void take_arrivals(int fd, struct slot *ring, size_t cap, size_t head, size_t *queued,
			  uint64_t delay_ns, struct counts *c, unsigned char *buf)
{
	for (;;) {
		ssize_t n = read(fd, buf, READ_BYTES);
		struct slot *s;

		if (n <= 0)
			return; /* EAGAIN: drained; EINTR: the loop checks `stopping` */
		if (n > SLOT_BYTES) {
			c->dropped_oversize++;
			continue;
		}
		if (*queued == cap) {
			c->dropped_full++;
			continue;
		}
		s = &ring[(head + *queued) % cap];
		s->due_ns = now_ns() + delay_ns;
		s->len = (uint32_t)n;
		memcpy(s->data, buf, (size_t)n);
		(*queued)++;
		if (*queued > c->max_queued)
			c->max_queued = *queued;
	}
}

int main(int argc, char **argv)
{
	const char *dev = NULL;
	long long delay_us = -1, cap = 8192, started_by = 0;
	struct counts c = {0};
	struct sigaction sa = {0};
	sigset_t block, waitmask;
	size_t head = 0, queued = 0;
	struct sched_param rt = {.sched_priority = 10};
	struct slot *ring;
	unsigned char *buf;
	int realtime;
	int fd;

	for (int i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			return usage("every option takes a value");
		if (!strcmp(argv[i], "--dev"))
			dev = argv[++i];
		else if (!strcmp(argv[i], "--delay-us")) {
			if ((delay_us = parse_count(argv[++i], 0, MAX_DELAY_US)) < 0)
				return usage("--delay-us: a whole number of microseconds, 0 to "
					     "10000000");
		} else if (!strcmp(argv[i], "--queue-packets")) {
			if ((cap = parse_count(argv[++i], 1, 1 << 20)) < 0)
				return usage("--queue-packets: a whole number, 1 to 1048576");
		} else if (!strcmp(argv[i], "--parent")) {
			if ((started_by = parse_count(argv[++i], 1, INT_MAX)) < 0)
				return usage("--parent: a process id");
		} else {
			return usage("unknown option");
		}
	}
	if (!dev || !*dev || strlen(dev) >= IFNAMSIZ)
		return usage("--dev: a device name of 1 to 15 characters is required");
	if (delay_us < 0)
		return usage("--delay-us is required");

	/* Dies with the run that started it, even one killed by SIGKILL. */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (started_by && getppid() != (pid_t)started_by)
		return 1;
	prctl(PR_SET_TIMERSLACK, 1UL); /* wake at the due time, not up to 50 us after it */
	/* A wire is not late when the host is busy: run before the host's ordinary processes (it
	 * sleeps between packets, and the kernel's RT throttling bounds it anyway). */
	realtime = sched_setscheduler(0, SCHED_FIFO, &rt) == 0;

	/* Signals are taken only inside ppoll(): none is lost between the check and the wait. */
	sa.sa_handler = on_signal;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGHUP);
	sigprocmask(SIG_BLOCK, &block, &waitmask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigdelset(&waitmask, SIGTERM);
	sigdelset(&waitmask, SIGINT);
	sigdelset(&waitmask, SIGHUP);

	ring = calloc((size_t)cap, sizeof(*ring));
	buf = malloc(READ_BYTES);
	if (!ring || !buf) {
		fprintf(stderr, "xtune-delay: no memory for %lld packets\n", cap);
		return 1;
	}
	fd = open_tun(dev);
	if (fd < 0)
		return 1;
	printf("ready %s\n", dev);
	fflush(stdout);

	while (!stopping) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		int64_t wait_ns = release_due(fd, ring, (size_t)cap, &head, &queued, &c);
		struct timespec ts = {.tv_sec = wait_ns / 1000000000,
				      .tv_nsec = wait_ns % 1000000000};

		if (ppoll(&pfd, 1, wait_ns < 0 ? NULL : &ts, &waitmask) > 0)
			take_arrivals(fd, ring, (size_t)cap, head, &queued,
				      (uint64_t)delay_us * 1000, &c, buf);
	}
	printf("{\"forwarded\": %llu, \"dropped_full\": %llu, \"dropped_oversize\": %llu, "
	       "\"write_errors\": %llu, \"max_queued\": %llu, \"discarded_at_exit\": %zu, "
	       "\"late_1ms\": %llu, \"max_late_us\": %llu, \"realtime\": %s}\n",
	       c.forwarded, c.dropped_full, c.dropped_oversize, c.write_errors, c.max_queued,
	       queued, c.late_1ms, c.max_late_us, realtime ? "true" : "false");
	close(fd);
	free(ring);
	free(buf);
	return 0;
}
