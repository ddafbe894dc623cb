// SPDX-License-Identifier: MIT
/*
 * Open-loop load generator with Poisson arrivals whose number of concurrent flows changes over
 * time. Each flow is a UDP socket; requests carry their send time and the reply's arrival gives
 * the request's latency. Phases run back to back; at the start of each phase "phase I" is printed
 * (a driver may retune the server then), and at the end one JSON line per phase.
 *
 *   loadgen [--series MS] PORT SECONDS:RATE:FLOWS [SECONDS:RATE:FLOWS ...]
 *
 * With --series, one more line: the p99 latency of the requests sent in each MS-long slice of the
 * run (the tail over time, with the count answered per slice).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_FLOWS  256
#define MAX_PHASES 32
#define MAX_LAT	   (1 << 21)

struct req {
	int64_t sent_ns;
	uint32_t phase;
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static int64_t *lat[MAX_PHASES];
static long nlat[MAX_PHASES], sent[MAX_PHASES];
static int64_t run_start;
/* With --series: each answered request's latency, under the slice its send time falls in. */
static int64_t series_ns;
static struct answer {
	int64_t slice, lat;
} * answers;
static long nanswers;

/* Take the replies that arrived, waiting for them at most until `until` (CLOCK_MONOTONIC ns). */
static void drain(int ep, int64_t until)
{
	struct epoll_event evs[64];
	int64_t left = until - now_ns();
	struct timespec ts = {left > 0 ? left / 1000000000 : 0, left > 0 ? left % 1000000000 : 0};
	struct req r;
	int n = epoll_pwait2(ep, evs, 64, &ts, NULL);

	for (int i = 0; i < n; i++)
		while (recv(evs[i].data.fd, &r, sizeof(r), MSG_DONTWAIT) == sizeof(r))
			if (r.phase < MAX_PHASES && nlat[r.phase] < MAX_LAT) {
				int64_t l = now_ns() - r.sent_ns;

				lat[r.phase][nlat[r.phase]++] = l;
				if (answers && nanswers < MAX_LAT)
					answers[nanswers++] = (struct answer){
						(r.sent_ns - run_start) / series_ns, l};
			}
}

static int cmp_answer(const void *a, const void *b)
{
	const struct answer *x = a, *y = b;

	if (x->slice != y->slice)
		return (x->slice > y->slice) - (x->slice < y->slice);
	return (x->lat > y->lat) - (x->lat < y->lat);
}

/* The --series line: per slice of the run, the p99 (µs) and the count of its answered requests. */
static void print_series(int64_t slices)
{
	long i = 0;

	qsort(answers, (size_t)nanswers, sizeof(*answers), cmp_answer);
	printf("{\"series_ms\": %g, \"p99_us\": [", series_ns / 1e6);
	for (int64_t s = 0; s < slices; s++) {
		long first = i;

		while (i < nanswers && answers[i].slice == s)
			i++;
		printf("%s%.1f", s ? ", " : "",
		       i > first ? answers[first + (i - first) * 99 / 100].lat / 1e3 : 0.0);
	}
	printf("], \"answered\": [");
	i = 0;
	for (int64_t s = 0; s < slices; s++) {
		long first = i;

		while (i < nanswers && answers[i].slice == s)
			i++;
		printf("%s%ld", s ? ", " : "", i - first);
	}
	printf("]}\n");
}

/* One more line, phase "all": every answered request of the run pooled (a run's own p99). */
static void print_pooled(int nphases)
{
	long n = 0, total_sent = 0;
	int64_t *all;

	for (int p = 0; p < nphases; p++)
		n += nlat[p], total_sent += sent[p];
	all = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
	if (!all) {
		perror("loadgen: malloc");
		exit(1);
	}
	n = 0;
	for (int p = 0; p < nphases; p++)
		for (long i = 0; i < nlat[p]; i++)
			all[n++] = lat[p][i];
	qsort(all, (size_t)n, sizeof(int64_t), cmp_i64);
	printf("{\"phase\": \"all\", \"sent\": %ld, \"answered\": %ld, \"p50_us\": %.1f, "
	       "\"p99_us\": %.1f}\n",
	       total_sent, n, n ? all[n / 2] / 1e3 : 0.0, n ? all[n * 99 / 100] / 1e3 : 0.0);
	free(all);
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	double secs[MAX_PHASES], rate[MAX_PHASES];
	int flows[MAX_PHASES], fds[MAX_FLOWS], nphases, ep;
	unsigned int seed = 5;
	double total = 0;

	if (argc > 2 && !strcmp(argv[1], "--series")) {
		double ms = atof(argv[2]);

		if (ms <= 0) {
			fprintf(stderr, "loadgen: --series needs a slice length in ms, not %s\n",
				argv[2]);
			return 2;
		}
		series_ns = (int64_t)(ms * 1e6);
		answers = calloc(MAX_LAT, sizeof(*answers));
		argc -= 2, argv += 2;
	}
	nphases = argc - 2;
	if (argc < 3 || nphases > MAX_PHASES) {
		fprintf(stderr, "usage: %s [--series MS] PORT SECONDS:RATE:FLOWS...\n", argv[0]);
		return 2;
	}
	a.sin_port = htons((unsigned short)atoi(argv[1]));
	for (int p = 0; p < nphases; p++) {
		if (sscanf(argv[p + 2], "%lf:%lf:%d", &secs[p], &rate[p], &flows[p]) != 3 ||
		    flows[p] < 1 || flows[p] > MAX_FLOWS || rate[p] <= 0) {
			fprintf(stderr, "loadgen: bad phase %s\n", argv[p + 2]);
			return 2;
		}
		lat[p] = calloc(MAX_LAT, sizeof(int64_t));
		total += secs[p];
	}
	ep = epoll_create1(0);
	for (int f = 0; f < MAX_FLOWS; f++) {
		struct epoll_event ev = {.events = EPOLLIN};

		fds[f] = socket(AF_INET, SOCK_DGRAM, 0);
		if (fds[f] < 0 || connect(fds[f], (struct sockaddr *)&a, sizeof(a))) {
			perror("loadgen: socket");
			return 1;
		}
		ev.data.fd = fds[f];
		epoll_ctl(ep, EPOLL_CTL_ADD, fds[f], &ev);
	}
	run_start = now_ns();
	for (int p = 0; p < nphases; p++) {
		int64_t start = now_ns(), end = start + (int64_t)(secs[p] * 1e9), next = start;

		printf("phase %d\n", p);
		fflush(stdout);
		while (next < end) {
			struct req r = {.phase = (uint32_t)p};
			int64_t t;

			while ((t = now_ns()) < next)
				drain(ep, next);
			r.sent_ns = t;
			send(fds[rand_r(&seed) % flows[p]], &r, sizeof(r), MSG_DONTWAIT);
			sent[p]++;
			/* Exponential inter-arrival time: a Poisson process of the phase's rate. */
			next += (int64_t)(-log(1.0 - rand_r(&seed) / (RAND_MAX + 1.0)) / rate[p] *
					  1e9);
		}
	}
	for (int64_t stop = now_ns() + 300000000; now_ns() < stop;)
		drain(ep, stop);
	for (int p = 0; p < nphases; p++) {
		long n = nlat[p];

		qsort(lat[p], (size_t)n, sizeof(int64_t), cmp_i64);
		printf("{\"phase\": %d, \"seconds\": %g, \"rate\": %g, \"flows\": %d, \"sent\": "
		       "%ld, "
		       "\"answered\": %ld, \"p50_us\": %.1f, \"p99_us\": %.1f}\n",
		       p, secs[p], rate[p], flows[p], sent[p], n, n ? lat[p][n / 2] / 1e3 : 0.0,
		       n ? lat[p][n * 99 / 100] / 1e3 : 0.0);
	}
	print_pooled(nphases);
	if (answers)
		print_series((int64_t)(total * 1e9 / series_ns) + 1);
	return 0;
}
