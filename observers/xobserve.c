// SPDX-License-Identifier: MIT
/*
 * xobserve: load the signal families' BPF programs, close one window every --window-ms, and
 * publish each window as a frame to the shared-memory ring, ZeroMQ and a recording.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <bpf/libbpf.h>

#include "observer.h"
#include "xtune/sched_slice.h"

#define XT_FAMILY(n) extern const struct xt_family n##_family;
#include "families.inc"
#undef XT_FAMILY
#define XT_FAMILY(n) &n##_family,
static const struct xt_family *families[] = {
#include "families.inc"
};
#undef XT_FAMILY
#define NR_FAMILIES (sizeof(families) / sizeof(families[0]))

#define EXIT_USAGE 2

static volatile sig_atomic_t stopping;
static bool running[NR_FAMILIES];

struct settings {
	struct xt_options opt;
	bool selected[NR_FAMILIES];
	bool list, once;
	uint64_t window_ns;
	double duration_s;
	const char *zmq_endpoint, *shm_name, *record_path;
	const char *zmq_curve_dir, *zmq_keygen_dir;
	bool zmq_insecure;
	uint32_t shm_slots;
	int rt_priority;
	unsigned slice_us;
	int zmq_hwm;
};

static const char usage_text[] =
	"usage: xobserve [options]\n"
	"  --list                 families usable here (and why not for the others)\n"
	"  --families a,b         families to run (default: all; syscall and func only\n"
	"                         when their target is given)\n"
	"  --window-ms N          window length, 1..10000 ms (default 10)\n"
	"  --duration S           stop after S seconds (default: at SIGINT/SIGTERM)\n"
	"  --once                 print one frame as JSON and exit\n"
	"  --zmq ENDPOINT         ZeroMQ PUB endpoint (default tcp://127.0.0.1:5557)\n"
	"  --shm NAME             ring /dev/shm/NAME (default xtune.signals)\n"
	"  --shm-slots N          ring slots, a power of two (default 1024)\n"
	"  --zmq-hwm N            messages queued per ZeroMQ subscriber, then drops (10000)\n"
	"  --zmq-curve DIR        ZeroMQ with CURVE: server.key from DIR, clients whose\n"
	"                         public keys are in DIR/authorized_clients\n"
	"  --zmq-insecure         allow --zmq on a non-loopback address without CURVE\n"
	"  --zmq-keygen DIR       create the missing CURVE keys in DIR (0600), then exit\n"
	"  --record FILE          append the catalog and every frame to a recording\n"
	"  --rt-priority N        close windows as SCHED_FIFO N (1..99), memory locked\n"
	"  --slice-us N           else the window loop's scheduler slice, 100..100000 us,\n"
	"                         0 = the kernel's default (default 100)\n"
	"  --block-dev MAJ:MIN    block family: only this device\n"
	"  --pid PID, --comm NAME syscall, func (and sched target) families: only this\n"
	"                         process or command\n"
	"  --cgroup PATH          sched target: the tasks directly in this cgroup (v2; PATH\n"
	"                         under /sys/fs/cgroup or absolute), not --pid/--comm's\n"
	"  --netns NAME|PATH      tcp family: only sockets of this network namespace\n"
	"                         (a name under /run/netns, or e.g. /proc/PID/ns/net)\n"
	"  --port N               tcp family: only connections with this local or remote port\n"
	"  --func BINARY:FUNCTION[:argN[/32]=NAME]...\n"
	"                         func family: uprobe this function (up to 8 times), with\n"
	"                         the window mean and max of integer argument N (0..4;\n"
	"                         /32: an int) as func.FUNCTION.NAME.mean/max\n"
	"families:";

static void usage(FILE *out)
{
	size_t i;

	fputs(usage_text, out);
	for (i = 0; i < NR_FAMILIES; i++)
		fprintf(out, "%s %s", i ? "," : "", families[i]->name);
	fprintf(out, "\n");
}

static void die_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "xobserve: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	usage(stderr);
	exit(EXIT_USAGE);
}

static int family_index(const char *name, size_t len)
{
	size_t i;

	for (i = 0; i < NR_FAMILIES; i++)
		if (strlen(families[i]->name) == len && !strncmp(families[i]->name, name, len))
			return i;
	return -1;
}

static void parse_families(struct settings *s, const char *list)
{
	const char *p = list, *end;
	int idx;

	memset(s->selected, 0, sizeof(s->selected));
	while (*p) {
		end = strchrnul(p, ',');
		idx = family_index(p, end - p);
		if (idx < 0)
			die_usage("unknown family '%.*s' in --families %s", (int)(end - p), p,
				  list);
		s->selected[idx] = true;
		p = *end ? end + 1 : end;
	}
}

/* The inode of a network namespace given by name (/run/netns/NAME) or path. */
static uint32_t netns_inode(const char *arg)
{
	char path[512];
	struct statfs fs;
	struct stat st;

	snprintf(path, sizeof(path), strchr(arg, '/') ? "%s" : "/run/netns/%s", arg);
	if (stat(path, &st) || statfs(path, &fs))
		die_usage("--netns %s: %s: %s", arg, path, strerror(errno));
	/* Any other file has an inode too, which no socket would match: every signal would read 0.
	 */
	if (fs.f_type != 0x6e736673 /* NSFS_MAGIC */)
		die_usage("--netns %s: %s is not a network namespace (a name under /run/netns, or "
			  "/proc/PID/ns/net)",
			  arg, path);
	return (uint32_t)st.st_ino;
}

/* A cgroup v2 directory's id (its inode number), by path under /sys/fs/cgroup or absolute. */
static uint64_t cgroup_id(const char *arg)
{
	char path[512];
	struct statfs fs;
	struct stat st;

	snprintf(path, sizeof(path), arg[0] == '/' ? "%s" : "/sys/fs/cgroup/%s", arg);
	if (stat(path, &st) || statfs(path, &fs))
		die_usage("--cgroup %s: %s: %s", arg, path, strerror(errno));
	if (!S_ISDIR(st.st_mode) || fs.f_type != 0x63677270 /* CGROUP2_SUPER_MAGIC */)
		die_usage("--cgroup %s: %s is not a cgroup v2 directory", arg, path);
	return st.st_ino;
}

static double parse_number(const char *opt, const char *arg, double min, double max)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || *end || v < min || v > max)
		die_usage("%s wants a number in [%g, %g], not '%s'", opt, min, max, arg);
	return v;
}

static void parse_args(int argc, char **argv, struct settings *s)
{
	static const struct option longopts[] = {
		{"list", no_argument, 0, 'l'},
		{"families", required_argument, 0, 'f'},
		{"window-ms", required_argument, 0, 'w'},
		{"duration", required_argument, 0, 'd'},
		{"once", no_argument, 0, '1'},
		{"zmq", required_argument, 0, 'z'},
		{"shm", required_argument, 0, 's'},
		{"shm-slots", required_argument, 0, 'S'},
		{"record", required_argument, 0, 'r'},
		{"zmq-hwm", required_argument, 0, 'H'},
		{"zmq-curve", required_argument, 0, 'C'},
		{"zmq-insecure", no_argument, 0, 'I'},
		{"zmq-keygen", required_argument, 0, 'K'},
		{"pid", required_argument, 0, 'p'},
		{"comm", required_argument, 0, 'c'},
		{"cgroup", required_argument, 0, 'g'},
		{"netns", required_argument, 0, 'n'},
		{"port", required_argument, 0, 'P'},
		{"func", required_argument, 0, 'F'},
		{"block-dev", required_argument, 0, 'b'},
		{"rt-priority", required_argument, 0, 'R'},
		{"slice-us", required_argument, 0, 'L'},
		{"help", no_argument, 0, 'h'},
		{0, 0, 0, 0},
	};
	bool families_given = false;
	uint32_t slots;
	size_t i;
	struct xt_func_spec spec;
	char tail, err[256];
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'l':
			s->list = true;
			break;
		case 'f':
			parse_families(s, optarg);
			families_given = true;
			break;
		case 'w':
			s->window_ns = parse_number("--window-ms", optarg, 1, 10000) * 1e6;
			break;
		case 'd':
			s->duration_s = parse_number("--duration", optarg, 0.001, 1e9);
			break;
		case '1':
			s->once = true;
			break;
		case 'z':
			s->zmq_endpoint = optarg;
			break;
		case 's':
			if (!*optarg || strchr(optarg, '/'))
				die_usage("--shm wants a name without '/', not '%s'", optarg);
			s->shm_name = optarg;
			break;
		case 'S':
			slots = parse_number("--shm-slots", optarg, 2, 1 << 20);
			if (slots & (slots - 1))
				die_usage("--shm-slots wants a power of two, not %u", slots);
			s->shm_slots = slots;
			break;
		case 'r':
			s->record_path = optarg;
			break;
		case 'p':
			s->opt.target_pid = parse_number("--pid", optarg, 1, 1 << 30);
			break;
		case 'c':
			s->opt.target_comm = optarg;
			break;
		case 'g':
			s->opt.target_cgroup = cgroup_id(optarg);
			break;
		case 'n':
			s->opt.netns_ino = netns_inode(optarg);
			break;
		case 'P':
			s->opt.port = parse_number("--port", optarg, 1, 65535);
			break;
		case 'F':
			if (s->opt.nr_funcs == XT_MAX_FUNCS)
				die_usage("at most %d --func", XT_MAX_FUNCS);
			if (xt_func_spec_parse(optarg, &spec, err, sizeof(err)))
				die_usage("--func: %s", err);
			s->opt.funcs[s->opt.nr_funcs++] = optarg;
			break;
		case 'b':
			if (sscanf(optarg, "%d:%d%c", &s->opt.block_major, &s->opt.block_minor,
				   &tail) != 2 ||
			    s->opt.block_major < 0 || s->opt.block_minor < 0)
				die_usage("--block-dev wants MAJOR:MINOR (see lsblk), not '%s'",
					  optarg);
			break;
		case 'H':
			s->zmq_hwm = parse_number("--zmq-hwm", optarg, 1, 1 << 24);
			break;
		case 'C':
			s->zmq_curve_dir = optarg;
			break;
		case 'I':
			s->zmq_insecure = true;
			break;
		case 'K':
			s->zmq_keygen_dir = optarg;
			break;
		case 'R':
			s->rt_priority = parse_number("--rt-priority", optarg, 1, 99);
			break;
		case 'L':
			s->slice_us = parse_number("--slice-us", optarg, 0, XT_SLICE_MAX_US);
			if (s->slice_us && s->slice_us < XT_SLICE_MIN_US)
				die_usage("--slice-us wants 0 or %u..%u, not '%s'", XT_SLICE_MIN_US,
					  XT_SLICE_MAX_US, optarg);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			if (optopt)
				die_usage("option '%s' needs a value", argv[optind - 1]);
			die_usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	/* By default: every family but the two that watch a target, unless the target is given. */
	if (!families_given)
		for (i = 0; i < NR_FAMILIES; i++)
			s->selected[i] = (strcmp(families[i]->name, "func") || s->opt.nr_funcs) &&
					 (strcmp(families[i]->name, "syscall") ||
					  s->opt.target_pid || s->opt.target_comm);
	/* A filter for a family that does not run would change nothing: say so instead. */
	for (i = 0; i < NR_FAMILIES; i++) {
		if (!strcmp(families[i]->name, "tcp") && !s->selected[i] &&
		    (s->opt.netns_ino || s->opt.port))
			die_usage(
				"--netns and --port filter the tcp family, which is not selected");
		if (!strcmp(families[i]->name, "sched") && !s->selected[i] && s->opt.target_cgroup)
			die_usage("--cgroup sets the sched family's target, which is not selected");
	}
}

/* libbpf's messages are kept (not printed) so that a failure can show the verifier log's tail. */
#define LOG_LINES 64
static char log_lines[LOG_LINES][256];
static unsigned int log_next;

static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	static char buf[256 * 1024]; /* a whole verifier log arrives as one message */
	char *line, *save;

	(void)level;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		snprintf(log_lines[log_next++ % LOG_LINES], sizeof(log_lines[0]), "%s", line);
	return 0;
}

void xt_libbpf_log_reset(void)
{
	log_next = 0;
}

void xt_libbpf_log_tail(int lines)
{
	unsigned int i = log_next > (unsigned int)lines ? log_next - lines : 0;

	for (; i < log_next; i++)
		fprintf(stderr, "    | %s\n", log_lines[i % LOG_LINES]);
}

static int start_family(size_t i, const struct xt_options *opt, bool quiet)
{
	int err;

	xt_libbpf_log_reset();
	err = families[i]->start(opt);
	if (!err)
		return 0;
	families[i]->stop();
	if (!quiet) {
		fprintf(stderr, "xobserve: family %s failed to start: %s\n", families[i]->name,
			strerror(err < 0 ? -err : err));
		if (log_next) {
			fprintf(stderr, "  last libbpf/verifier messages:\n");
			xt_libbpf_log_tail(16);
		}
	}
	return err;
}

static int list_families(const struct xt_options *opt)
{
	size_t i;
	int err;

	for (i = 0; i < NR_FAMILIES; i++) {
		if (!strcmp(families[i]->name, "func") && !opt->nr_funcs) {
			printf("%-8s usable with --func BINARY:FUNCTION (%s)\n", families[i]->name,
			       families[i]->summary);
			continue;
		}
		err = start_family(i, opt, true);
		if (err) {
			printf("%-8s not usable: %s\n", families[i]->name,
			       strerror(err < 0 ? -err : err));
			continue;
		}
		families[i]->stop();
		printf("%-8s usable (%s)%s\n", families[i]->name, families[i]->summary,
		       !strcmp(families[i]->name, "pmu") && !xt_catalog_pmu()
			       ? "; pmu: unavailable (no hardware counters on this host)"
			       : "");
	}
	return 0;
}

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static void print_frame_json(void)
{
	const struct xt_frame_header *h;
	const struct xt_signal_item *it;
	const char *sep = "";
	size_t len;
	uint32_t i;

	h = xt_frame_bytes(&len);
	it = (const struct xt_signal_item *)(h + 1);
	printf("{\"seq\": %llu, \"window_ns\": %llu, \"window_start_ns\": %llu, "
	       "\"window_end_ns\": %llu, \"dropped\": %llu, \"signals\": {",
	       (unsigned long long)h->seq,
	       (unsigned long long)(h->window_end_ns - h->window_start_ns),
	       (unsigned long long)h->window_start_ns, (unsigned long long)h->window_end_ns,
	       (unsigned long long)h->dropped);
	for (i = 0; i < h->count; i++)
		printf("%s\"%s\": %.17g", i ? ", " : "", xt_signal_name(it[i].id), it[i].value);
	printf("}, \"empty\": [");
	for (i = 0; i < h->count; i++) {
		if (!(it[i].flags & XT_ITEM_EMPTY))
			continue;
		printf("%s\"%s\"", sep, xt_signal_name(it[i].id));
		sep = ", ";
	}
	printf("]}\n");
	fflush(stdout);
}

/*
 * The catalog goes to every output when it changes; ZeroMQ also gets it for each new subscriber
 * and once a second (the ring and the recording keep theirs).
 */
static void publish_catalog(const struct settings *s, bool zmq_only)
{
	size_t len;
	const char *json = xt_catalog_json(s->window_ns, &len);

	if (s->zmq_endpoint)
		xt_zmq_publish(XT_ZMQ_TOPIC_CATALOG, json, len);
	if (zmq_only)
		return;
	if (s->shm_name)
		xt_ring_set_catalog(json, len);
	if (s->record_path)
		xt_rec_write(XT_REC_CATALOG, json, len);
}

static uint64_t publish_frame(const struct settings *s)
{
	const void *bytes;
	uint64_t lost = 0;
	size_t len;

	bytes = xt_frame_bytes(&len);
	if (s->shm_name)
		xt_ring_publish(bytes, len);
	if (s->zmq_endpoint && xt_zmq_publish(XT_ZMQ_TOPIC_FRAME, bytes, len))
		lost++;
	if (s->record_path && xt_rec_write(XT_REC_FRAME, bytes, len))
		lost++;
	return lost;
}

static int open_outputs(const struct settings *s)
{
	if (s->shm_name && xt_ring_open(s->shm_name, s->shm_slots, s->window_ns))
		return -1;
	if (s->zmq_endpoint && xt_zmq_open(s->zmq_endpoint, s->zmq_hwm, s->zmq_curve_dir))
		return -1;
	if (s->record_path && xt_rec_open(s->record_path))
		return -1;
	return 0;
}

static void close_outputs(void)
{
	xt_rec_close();
	xt_zmq_close();
	xt_ring_close();
}

/*
 * A window closes on time even on a busy host when the loop runs SCHED_FIFO; it sleeps between
 * windows, so it takes little from others. Set before ZeroMQ starts its I/O thread, which
 * inherits the policy.
 */
static int go_realtime(int priority)
{
	struct sched_param sp = {.sched_priority = priority};

	if (mlockall(MCL_CURRENT | MCL_FUTURE) || sched_setscheduler(0, SCHED_FIFO, &sp)) {
		fprintf(stderr, "xobserve: --rt-priority %d: %s\n", priority, strerror(errno));
		return -1;
	}
	return 0;
}

static int run(struct settings *s)
{
	uint64_t start, end, next, deadline = 0, dropped = 0, seq = 0, catalog_gen = 0;
	uint64_t last_catalog = 0, t0;
	struct timespec ts;
	int id_collect, id_late, ret;
	size_t i;

	id_collect = xt_signal_add("xobserve.collect_us", "us", "gauge", "xobserve");
	id_late = xt_signal_add("xobserve.late_windows", "windows", "counter", "xobserve");
	if (s->rt_priority && go_realtime(s->rt_priority))
		return 1;
	/* A window closes on time under normal scheduling too: see xtune/sched_slice.h. */
	if (!s->rt_priority && (ret = xt_sched_set(0, s->slice_us)))
		fprintf(stderr,
			"xobserve: --slice-us %u: cannot set the slice (%s), default kept\n",
			s->slice_us, strerror(-ret));
	if (open_outputs(s)) {
		close_outputs();
		return 1;
	}
	catalog_gen = xt_catalog_generation();
	publish_catalog(s, false);
	start = last_catalog = xt_now_ns();
	next = start + s->window_ns;
	if (s->duration_s)
		deadline = start + (uint64_t)(s->duration_s * 1e9);
	while (!stopping) {
		ts.tv_sec = next / 1000000000ull;
		ts.tv_nsec = next % 1000000000ull;
		if (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			continue;
		end = xt_now_ns();
		xt_frame_begin(++seq, start, end, dropped);
		for (i = 0; i < NR_FAMILIES; i++)
			if (running[i])
				families[i]->collect(end - start);
		t0 = xt_now_ns();
		xt_emit(id_collect, (t0 - end) / 1e3);
		/* A window that closes more than a window late is a longer window, not a loss. */
		next += s->window_ns;
		xt_emit(id_late, next < t0);
		if (next < t0)
			next = t0 + s->window_ns;
		if (xt_catalog_generation() != catalog_gen) {
			catalog_gen = xt_catalog_generation();
			last_catalog = end;
			publish_catalog(s, false);
		} else if (s->zmq_endpoint &&
			   (xt_zmq_new_subscriber() || end - last_catalog > 1000000000ull)) {
			last_catalog = end;
			publish_catalog(s, true);
		}
		dropped += publish_frame(s);
		if (s->shm_name)
			xt_ring_set_dropped(dropped);
		if (s->once) {
			print_frame_json();
			break;
		}
		if (deadline && end >= deadline)
			break;
		start = end;
	}
	close_outputs();
	return 0;
}

int main(int argc, char **argv)
{
	struct settings s = {
		.window_ns = 10000000ull,
		.shm_slots = 1024,
		.zmq_hwm = 10000,
		.slice_us = 100,
		.opt = {.block_major = -1, .block_minor = -1},
	};
	struct sigaction sa = {.sa_handler = on_signal};
	int started = 0, rc;
	size_t i;

	parse_args(argc, argv, &s);
	if (s.zmq_keygen_dir)
		return xt_keys_generate(s.zmq_keygen_dir) ? 1 : 0;
	if (!s.once && !s.list) {
		s.zmq_endpoint = s.zmq_endpoint ?: "tcp://127.0.0.1:5557";
		s.shm_name = s.shm_name ?: "xtune.signals";
	}
	/* Local by default: frames leave the host in clear only when asked for by name. */
	if (s.zmq_endpoint && !s.zmq_curve_dir && !s.zmq_insecure &&
	    !xt_zmq_endpoint_is_loopback(s.zmq_endpoint))
		die_usage("--zmq %s is not a loopback address: give --zmq-curve DIR "
			  "(authenticated and encrypted) or --zmq-insecure (frames in clear)",
			  s.zmq_endpoint);
	if (s.zmq_endpoint && s.zmq_curve_dir && xt_keys_check(s.zmq_curve_dir))
		return 1;
	if (geteuid() != 0) {
		fprintf(stderr, "xobserve: must run as root (loading BPF programs and opening "
				"perf events need CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN)\n");
		return 1;
	}
	if (xt_nr_cpus() > XT_MAX_CPUS) {
		fprintf(stderr, "xobserve: %d CPUs, built for at most %d\n", xt_nr_cpus(),
			XT_MAX_CPUS);
		return 1;
	}
	libbpf_set_print(libbpf_log);
	/* Wake at the window boundary, not up to 50 us later (the default timer slack). */
	prctl(PR_SET_TIMERSLACK, 1UL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (s.list)
		return list_families(&s.opt);

	for (i = 0; i < NR_FAMILIES && !stopping; i++) {
		if (!s.selected[i])
			continue;
		running[i] = !start_family(i, &s.opt, false);
		started += running[i];
	}
	if (!started || stopping) {
		if (!started)
			fprintf(stderr, "xobserve: no family could start\n");
		rc = 1;
	} else {
		rc = run(&s);
	}
	for (i = 0; i < NR_FAMILIES; i++)
		if (running[i])
			families[i]->stop();
	return rc;
}
