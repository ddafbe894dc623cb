// SPDX-License-Identifier: GPL-2.0
/*
 * xsiectl: drive /dev/xsie from the shell (the guest tests, and people).
 *
 *   xsiectl load FILE             load the spans file (written by `xtune analyze --kernel`)
 *   xsiectl set ID VALUE          set V (refused unless valid: range and constraints; on an
 *                                 armed const with several spans a flip: `wait` until it is in
 *                                 effect)
 *   xsiectl store ID VALUE        store V into the value page (no system call; a value not
 *                                 valid is not applied; a const with several spans ignores it)
 *   xsiectl arm ID MODE           MODE: immediate | per-thread | global
 *   xsiectl txn MODE ID...        arm several consts in one transaction
 *   xsiectl txn-abort ID...       begin, add, abort: nothing may change
 *   xsiectl disarm ID | unload ID
 *   xsiectl status ID             one line of key=value
 *   xsiectl wait ID MS            wait until armed, no transition or flip pending (exit 1 on
 *                                 timeout)
 *   xsiectl clock                 CLOCK_MONOTONIC in ns (busybox has no finer clock)
 *   xsiectl mark-arming ID MODE   only the console line `arm` and `txn` print before arming
 *                                 (for other clients that arm, such as xrtd)
 *
 * Spans file lines:
 *   kernel BUILD_ID               (first: the kernel build the spans are for)
 *   span ID set|scale|cmp|shift FUNC CHECK_OFF HEXBYTES PROBE_OFF REG WIDTH A B V0 [PRE_ADD]
 *   safe ID FUNC EXIT[,EXIT...]
 *   range ID MIN MAX [MULTIPLE_OF POWER_OF_TWO]
 *                                 (after the const's spans: V in [MIN, MAX], a multiple of
 *                                 MULTIPLE_OF, a power of two if POWER_OF_TWO is 1)
 * Every command prints how long the kernel took (…_ns=) so benchmarks can use it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "xtune/xsie.h"

static const char *const reg_names[XSIE_REG_COUNT] = {
	"ax", "bx",  "cx",  "dx",  "si",  "di",	 "bp",	"r8",
	"r9", "r10", "r11", "r12", "r13", "r14", "r15",
};
static const char *const mode_names[] = {"immediate", "per-thread", "global"};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

static int die(const char *what)
{
	fprintf(stderr, "xsiectl: %s: %s\n", what, strerror(errno));
	return 1;
}

/*
 * The host's harness boots a stalled guest again only when nothing was armed before the stall
 * (kmod/harness/run-guest.sh): every arm says so on the console first. Through printk at error
 * level, which writes the console synchronously, rather than stdout, whose tty output a stalled
 * guest may never send. Arming is refused when the line cannot be written.
 */
static int mark_arming(const char *ids, const char *mode)
{
	char line[128];
	int n = snprintf(line, sizeof(line), "<3>XSIE-ARMING id=%s mode=%s\n", ids, mode);
	int fd = open("/dev/kmsg", O_WRONLY);
	/* one write() is one record: dprintf's pieces are refused (EINVAL) */
	int ok = fd >= 0 && n > 0 && n < (int)sizeof(line) && write(fd, line, n) == n;

	if (fd >= 0)
		close(fd);
	return ok ? 0 : die("marking the arm on the console (/dev/kmsg)");
}

static int lookup(const char *name, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(name, names[i]))
			return i;
	return -1;
}

static int parse_span(char *args, struct xsie_span_desc *d, const char *where)
{
	char upd[16], reg[8], hex[2 * XSIE_MAX_BYTES + 1];
	long long a, b, v0, pre_add = 0;
	int n;

	memset(d, 0, sizeof(*d));
	n = sscanf(args, "%u %15s %127s %i %64s %i %7s %u %lld %lld %lld %lld", &d->const_id, upd,
		   d->func, &d->check_offset, hex, &d->probe_offset, reg, &d->width, &a, &b, &v0,
		   &pre_add);
	if (n != 11 && n != 12) {
		fprintf(stderr, "xsiectl: %s: a span needs 11 or 12 fields\n", where);
		return -1;
	}
	d->update = !strcmp(upd, "set")	    ? XSIE_UPD_SET
		    : !strcmp(upd, "scale") ? XSIE_UPD_SCALE
		    : !strcmp(upd, "cmp")   ? XSIE_UPD_CMP
		    : !strcmp(upd, "shift") ? XSIE_UPD_SHIFT
					    : 0;
	d->reg = lookup(reg, reg_names, XSIE_REG_COUNT);
	d->nbytes = strlen(hex) / 2;
	for (unsigned int i = 0; i < d->nbytes; i++)
		sscanf(hex + 2 * i, "%2hhx", &d->bytes[i]);
	d->a = a;
	d->b = b;
	d->v0 = v0;
	d->pre_add = pre_add;
	if (!d->update || (int)d->reg < 0) {
		fprintf(stderr, "xsiectl: %s: unknown update '%s' or register '%s'\n", where, upd,
			reg);
		return -1;
	}
	return 0;
}

static int parse_safe(char *args, struct xsie_safe_desc *d, const char *where)
{
	char exits[256], *tok, *save;

	memset(d, 0, sizeof(*d));
	if (sscanf(args, "%u %127s %255s", &d->const_id, d->func, exits) != 3) {
		fprintf(stderr, "xsiectl: %s: a safe span needs ID FUNC EXITS\n", where);
		return -1;
	}
	for (tok = strtok_r(exits, ",", &save); tok && d->nexits < XSIE_MAX_EXITS;
	     tok = strtok_r(NULL, ",", &save))
		d->exits[d->nexits++] = strtoul(tok, NULL, 0);
	return 0;
}

static int cmd_load(int fd, const char *path)
{
	char line[512], where[300];
	int lineno = 0, spans = 0, safes = 0;
	uint64_t t0, spent = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return die(path);
	while (fgets(line, sizeof(line), f)) {
		struct xsie_span_desc span;
		struct xsie_safe_desc safe;
		int ret;

		lineno++;
		snprintf(where, sizeof(where), "%s:%d", path, lineno);
		if (!strncmp(line, "span ", 5)) {
			if (parse_span(line + 5, &span, where))
				return 1;
			t0 = now_ns();
			ret = ioctl(fd, XSIE_IOC_LOAD_SPAN, &span);
			spent += now_ns() - t0;
			if (ret)
				return die(where);
			spans++;
		} else if (!strncmp(line, "kernel ", 7)) {
			struct xsie_kernel k = {0};
			char hex[2 * XSIE_BUILD_ID_LEN + 1] = "";

			if (sscanf(line + 7, "%40s", hex) != 1 ||
			    strlen(hex) != 2 * XSIE_BUILD_ID_LEN) {
				fprintf(stderr,
					"xsiectl: %s: a kernel line needs a 20-byte build id\n",
					where);
				return 1;
			}
			for (int i = 0; i < XSIE_BUILD_ID_LEN; i++)
				sscanf(hex + 2 * i, "%2hhx", &k.build_id[i]);
			if (ioctl(fd, XSIE_IOC_KERNEL, &k))
				return die(where);
		} else if (!strncmp(line, "range ", 6)) {
			struct xsie_range range = {0};
			long long min, max, multiple = 1;
			unsigned int power = 0;
			int n = sscanf(line + 6, "%u %lld %lld %lld %u", &range.const_id, &min,
				       &max, &multiple, &power);

			if ((n != 3 && n != 5) || power > 1) {
				fprintf(stderr,
					"xsiectl: %s: a range needs ID MIN MAX [MULTIPLE_OF "
					"POWER_OF_TWO(0|1)]\n",
					where);
				return 1;
			}
			range.min = min;
			range.max = max;
			range.multiple_of = multiple;
			range.flags = power ? XSIE_RANGE_POWER_OF_TWO : 0;
			if (ioctl(fd, XSIE_IOC_LOAD_RANGE, &range))
				return die(where);
		} else if (!strncmp(line, "safe ", 5)) {
			if (parse_safe(line + 5, &safe, where))
				return 1;
			t0 = now_ns();
			ret = ioctl(fd, XSIE_IOC_LOAD_SAFE, &safe);
			spent += now_ns() - t0;
			if (ret)
				return die(where);
			safes++;
		}
	}
	fclose(f);
	printf("loaded spans=%d safe=%d load_ns=%llu\n", spans, safes, (unsigned long long)spent);
	return 0;
}

static int cmd_status(int fd, uint32_t id, struct xsie_status *st, int print)
{
	memset(st, 0, sizeof(*st));
	st->const_id = id;
	if (ioctl(fd, XSIE_IOC_STATUS, st))
		return die("status");
	if (print)
		printf("id=%u state=%u mode=%s group=%u spans=%u optimized=%u int3=%u inside=%lld "
		       "hits=%llu applied=%llu old_value_hits=%llu transition_ns=%llu "
		       "refcount_updates=%llu\n",
		       id, st->state, mode_names[st->mode % 3], st->group, st->nspans,
		       st->optimized, st->int3, (long long)st->inside, (unsigned long long)st->hits,
		       (unsigned long long)st->applied, (unsigned long long)st->old_value_hits,
		       (unsigned long long)st->transition_ns,
		       (unsigned long long)st->refcount_updates);
	return 0;
}

static int parse_mode(const char *s)
{
	int m = lookup(s, mode_names, 3);

	if (m < 0)
		fprintf(stderr, "xsiectl: unknown mode '%s' (immediate, per-thread, global)\n", s);
	return m;
}

static int cmd_txn(int fd, int argc, char **argv, int commit)
{
	int mode = commit ? parse_mode(argv[0]) : 0;
	uint64_t t0;

	if (mode < 0)
		return 1;
	if (ioctl(fd, XSIE_IOC_TXN_BEGIN))
		return die("begin");
	for (int i = commit; i < argc; i++) {
		struct xsie_arm arm = {.const_id = strtoul(argv[i], NULL, 0)};

		if (ioctl(fd, XSIE_IOC_ARM, &arm))
			return die("arm in transaction");
	}
	t0 = now_ns();
	if (!commit)
		return ioctl(fd, XSIE_IOC_TXN_ABORT) ? die("abort") : 0;
	if (mark_arming("txn", argv[0]))
		return 1;
	if (ioctl(fd, XSIE_IOC_TXN_COMMIT, (uint32_t *)&mode))
		return die("commit");
	printf("armed transaction arm_ns=%llu\n", (unsigned long long)(now_ns() - t0));
	return 0;
}

int main(int argc, char **argv)
{
	struct xsie_status st;
	uint32_t id;
	uint64_t t0;
	int fd;

	if (argc == 2 && !strcmp(argv[1], "clock")) {
		printf("%llu\n", (unsigned long long)now_ns());
		return 0;
	}
	if (argc < 3) {
		fprintf(stderr,
			"usage: xsiectl load FILE | set ID V | store ID V | arm ID MODE | txn MODE "
			"ID... | "
			"txn-abort ID... | disarm ID | unload ID | status ID | wait ID MS | "
			"mark-arming ID MODE\n");
		return 2;
	}
	fd = open(XSIE_DEVICE, O_RDWR);
	if (fd < 0)
		return die(XSIE_DEVICE);
	if (!strcmp(argv[1], "load"))
		return cmd_load(fd, argv[2]);
	if (!strcmp(argv[1], "txn"))
		return cmd_txn(fd, argc - 2, argv + 2, 1);
	if (!strcmp(argv[1], "txn-abort"))
		return cmd_txn(fd, argc - 2, argv + 2, 0);
	id = strtoul(argv[2], NULL, 0);
	if (!strcmp(argv[1], "set") && argc == 4) {
		struct xsie_value v = {.const_id = id, .value = strtoll(argv[3], NULL, 0)};

		if (!ioctl(fd, XSIE_IOC_SET, &v))
			return 0;
		if (errno == ERANGE) {
			fprintf(stderr,
				"xsiectl: set: %lld refused: not a valid value of const %u "
				"(its range, multiple or power of two: the kernel log says "
				"which)\n",
				(long long)v.value, id);
			return 1;
		}
		return die("set");
	}
	if (!strcmp(argv[1], "store") && argc == 4) {
		struct xsie_value_page *page =
			mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

		if (page == MAP_FAILED || id >= XSIE_MAX_CONSTS)
			return die("value page");
		__atomic_store_n(&page->value[id], strtoll(argv[3], NULL, 0), __ATOMIC_RELEASE);
		return 0;
	}
	if (!strcmp(argv[1], "arm") && argc == 4) {
		struct xsie_arm arm = {.const_id = id, .mode = parse_mode(argv[3])};

		if ((int)arm.mode < 0 || mark_arming(argv[2], argv[3]))
			return 1;
		t0 = now_ns();
		if (ioctl(fd, XSIE_IOC_ARM, &arm))
			return die("arm");
		printf("armed id=%u arm_ns=%llu\n", id, (unsigned long long)(now_ns() - t0));
		return 0;
	}
	if (!strcmp(argv[1], "mark-arming") && argc == 4)
		return parse_mode(argv[3]) < 0 ? 1 : mark_arming(argv[2], argv[3]);
	if (!strcmp(argv[1], "disarm") || !strcmp(argv[1], "unload")) {
		unsigned long req = argv[1][0] == 'd' ? XSIE_IOC_DISARM : XSIE_IOC_UNLOAD;

		t0 = now_ns();
		if (ioctl(fd, req, &id))
			return die(argv[1]);
		printf("%s id=%u ns=%llu\n", argv[1], id, (unsigned long long)(now_ns() - t0));
		return 0;
	}
	if (!strcmp(argv[1], "status"))
		return cmd_status(fd, id, &st, 1);
	if (!strcmp(argv[1], "wait") && argc == 4) {
		uint64_t deadline = now_ns() + strtoull(argv[3], NULL, 0) * 1000000u;

		do {
			if (cmd_status(fd, id, &st, 0))
				return 1;
			if (st.state == XSIE_ARMED)
				return cmd_status(fd, id, &st, 1);
			usleep(1000);
		} while (now_ns() < deadline);
		cmd_status(fd, id, &st, 1);
		return 1;
	}
	fprintf(stderr, "xsiectl: bad command '%s'\n", argv[1]);
	return 2;
}
