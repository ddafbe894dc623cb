// SPDX-License-Identifier: GPL-2.0
/*
 * xcubic: the CUBIC algorithm (Ha, Rhee, Xu; RFC 9438) with HyStart, written for struct_ops.
 * Every constant comes from the `params` map at the moment it is used, so a write by xrtd
 * changes the next decision of every flow, with no reload. The time base is the socket's
 * microsecond clock (tcp_mstamp) rather than jiffies, and K = cbrt(...) is an exact integer
 * cube root.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "xcubic.h"

char LICENSE[] SEC("license") = "GPL";

#define BETA_SCALE		1024
#define CUBE_TIME_SHIFT		10 /* time unit of the cubic function: 2^-10 s */
#define HYSTART_ACK_TRAIN	1
#define HYSTART_DELAY		2
#define HYSTART_MIN_SAMPLES	8
#define USEC_PER_SEC		1000000ull
#define USEC_PER_MSEC		1000ull
#define TCP_CONG_NON_RESTRICTED 0x1 /* include/net/tcp.h, not in BTF */

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xcubic_params);
} params SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct xcubic_stats);
} stats SEC(".maps");

extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;
extern void tcp_cong_avoid_ai(struct tcp_sock *tp, __u32 w, __u32 acked) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;
extern unsigned long CONFIG_HZ __kconfig;

/* Per-connection state, in icsk_ca_priv. Times are tcp_mstamp microseconds (low 32 bits). */
struct xcubic {
	__u32 cnt;	     /* grow cwnd by one every cnt acked packets */
	__u32 last_max_cwnd; /* W_max */
	__u32 last_cwnd;     /* cwnd when the target was last computed */
	__u32 last_time;     /* ... and when */
	__u32 origin_point;  /* cwnd at the plateau of the cubic function */
	__u32 k;	     /* time from epoch start to the plateau, 2^-10 s */
	__u32 delay_min;     /* minimum RTT seen, µs */
	__u32 epoch_start;   /* start of the current congestion-avoidance epoch, 0 = none */
	__u32 ack_cnt;	     /* packets acked in this epoch (for the Reno estimate) */
	__u32 tcp_cwnd;	     /* what Reno would have now */
	__u32 round_start;   /* HyStart: start of the current round */
	__u32 end_seq;	     /* HyStart: snd_nxt when the round started */
	__u32 last_ack;	     /* HyStart: time of the last ack of the current train */
	__u32 curr_rtt;	     /* HyStart: minimum RTT of the current round */
	__u8 sample_cnt;     /* HyStart: RTT samples in this round */
	__u8 found;	     /* HyStart: slow start exit found */
};

static const struct xcubic_params fallback = XCUBIC_PARAMS_DEFAULT;

/* The constants now; out-of-range values written by hand fall back to the defaults. */
static __always_inline const struct xcubic_params *constants(void)
{
	__u32 zero = 0;
	const struct xcubic_params *p = bpf_map_lookup_elem(&params, &zero);

	if (!p || !p->bic_scale || p->beta >= BETA_SCALE || p->hystart_delay_shift > 31)
		return &fallback;
	return p;
}

static __always_inline struct xcubic_stats *counters(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&stats, &zero);
}

static __always_inline struct xcubic *ca_of(struct sock *sk)
{
	return (struct xcubic *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline __u32 clock_us(const struct tcp_sock *tp)
{
	return (__u32)tp->tcp_mstamp;
}

static __always_inline bool before32(__u32 a, __u32 b)
{
	return (__s32)(a - b) < 0;
}

static __always_inline bool in_slow_start(const struct tcp_sock *tp)
{
	return tp->snd_cwnd < tp->snd_ssthresh;
}

static __always_inline bool cwnd_limited(const struct tcp_sock *tp)
{
	if (tp->is_cwnd_limited)
		return true;
	/* In slow start, cwnd may grow to twice what is in flight. */
	if (in_slow_start(tp))
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return false;
}

/*
 * Integer cube root: start from a power of two at or above the root (from the bit length),
 * then Newton steps x = (2x + a/x^2) / 3, which approach the root from above. Branch-free
 * steps keep the verifier's path count small.
 */
static __always_inline __u32 cbrt64(__u64 a)
{
	__u64 v = a, x;
	__u32 bits = 0;

	if (!a)
		return 0;
	if (v >> 32) {
		bits += 32;
		v >>= 32;
	}
	if (v >> 16) {
		bits += 16;
		v >>= 16;
	}
	if (v >> 8) {
		bits += 8;
		v >>= 8;
	}
	if (v >> 4) {
		bits += 4;
		v >>= 4;
	}
	if (v >> 2) {
		bits += 2;
		v >>= 2;
	}
	if (v >> 1)
		bits += 1;
	x = 1ull << ((bits + 3) / 3);
	for (int i = 0; i < 6; i++)
		x = (2 * x + a / (x * x)) / 3;
	return x;
}

static __always_inline void reset_epoch_state(struct xcubic *ca)
{
	ca->cnt = 0;
	ca->last_max_cwnd = 0;
	ca->last_cwnd = 0;
	ca->last_time = 0;
	ca->origin_point = 0;
	ca->k = 0;
	ca->delay_min = 0;
	ca->epoch_start = 0;
	ca->ack_cnt = 0;
	ca->tcp_cwnd = 0;
	ca->found = 0;
}

static __always_inline void hystart_new_round(struct tcp_sock *tp, struct xcubic *ca)
{
	ca->round_start = ca->last_ack = clock_us(tp);
	ca->end_seq = tp->snd_nxt;
	ca->curr_rtt = ~0U;
	ca->sample_cnt = 0;
}

SEC("struct_ops/xcubic_init")
void BPF_PROG(xcubic_init, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct xcubic *ca = ca_of(sk);
	struct xcubic_stats *st = counters();

	reset_epoch_state(ca);
	hystart_new_round(tp, ca);
	if (st)
		__sync_fetch_and_add(&st->flows, 1);
}

SEC("struct_ops/xcubic_cwnd_event")
void BPF_PROG(xcubic_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct xcubic *ca = ca_of(sk);
	__u32 now, idle_us;
	__s32 idle;

	if (event != CA_EVENT_TX_START || !ca->epoch_start)
		return;
	/* Sending again after idle: shift the epoch so the idle time does not count as growth. */
	idle = (__u32)bpf_jiffies64() - tp->lsndtime;
	if (idle <= 0)
		return;
	idle_us = (__u64)idle * USEC_PER_SEC / CONFIG_HZ;
	now = clock_us(tp);
	ca->epoch_start += idle_us;
	if (before32(now, ca->epoch_start))
		ca->epoch_start = now;
}

/* Compute ca->cnt: how many acked packets per cwnd increment to follow the cubic curve. */
static __always_inline void cubic_update(struct tcp_sock *tp, struct xcubic *ca, __u32 cwnd,
					 __u32 acked, const struct xcubic_params *p)
{
	__u64 rtt_scale = p->bic_scale * 10ull;
	__u64 cube_factor = (1ull << (10 + 3 * CUBE_TIME_SHIFT)) / rtt_scale;
	__u32 now = clock_us(tp), target, beta_scale, reno_delta;
	__u64 t, offs, delta;

	ca->ack_cnt += acked;
	if (ca->last_cwnd == cwnd && (__s32)(now - ca->last_time) <= (__s32)(USEC_PER_SEC / 32))
		return;
	ca->last_cwnd = cwnd;
	ca->last_time = now;
	if (!ca->epoch_start) {
		ca->epoch_start = now ? now : 1;
		ca->ack_cnt = acked;
		ca->tcp_cwnd = cwnd;
		if (ca->last_max_cwnd <= cwnd) {
			ca->k = 0;
			ca->origin_point = cwnd;
		} else {
			ca->k = cbrt64(cube_factor * (ca->last_max_cwnd - cwnd));
			ca->origin_point = ca->last_max_cwnd;
		}
	}
	/* Time since the epoch began, plus one minimum RTT: where the curve will be. */
	t = (__u64)(__u32)(now - ca->epoch_start) + ca->delay_min;
	t = (t << CUBE_TIME_SHIFT) / USEC_PER_SEC;
	offs = t < ca->k ? ca->k - t : t - ca->k;
	delta = (rtt_scale * offs * offs * offs) >> (10 + 3 * CUBE_TIME_SHIFT);
	target = t < ca->k ? ca->origin_point - delta : ca->origin_point + delta;
	if (target > cwnd)
		ca->cnt = cwnd / (target - cwnd);
	else
		ca->cnt = 100 * cwnd; /* very slow growth at the plateau */
	if (!ca->last_max_cwnd && ca->cnt > 20)
		ca->cnt = 20; /* no loss yet: at least 5% growth per RTT */

	if (p->tcp_friendliness) {
		/* Never grow slower than Reno would with the same beta. */
		beta_scale = 8 * (BETA_SCALE + p->beta) / 3 / (BETA_SCALE - p->beta);
		reno_delta = (cwnd * beta_scale) >> 3;
		if (reno_delta) {
			for (int i = 0; i < 64 && ca->ack_cnt > reno_delta; i++) {
				ca->ack_cnt -= reno_delta;
				ca->tcp_cwnd++;
			}
		}
		if (ca->tcp_cwnd > cwnd) {
			__u32 max_cnt = cwnd / (ca->tcp_cwnd - cwnd);

			if (ca->cnt > max_cnt)
				ca->cnt = max_cnt;
		}
	}
	if (ca->cnt < 2)
		ca->cnt = 2;
}

SEC("struct_ops/xcubic_cong_avoid")
void BPF_PROG(xcubic_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct xcubic *ca = ca_of(sk);

	if (!cwnd_limited(tp))
		return;
	if (in_slow_start(tp)) {
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	cubic_update(tp, ca, tp->snd_cwnd, acked, constants());
	tcp_cong_avoid_ai(tp, ca->cnt, acked);
}

SEC("struct_ops/xcubic_recalc_ssthresh")
__u32 BPF_PROG(xcubic_recalc_ssthresh, struct sock *sk)
{
	const struct tcp_sock *tp = (struct tcp_sock *)sk;
	const struct xcubic_params *p = constants();
	struct xcubic *ca = ca_of(sk);
	struct xcubic_stats *st = counters();
	__u32 cwnd = tp->snd_cwnd, ssthresh;

	ca->epoch_start = 0;
	/* Fast convergence: yield to newer flows by remembering a lower W_max. */
	if (cwnd < ca->last_max_cwnd && p->fast_convergence)
		ca->last_max_cwnd = (cwnd * (BETA_SCALE + p->beta)) / (2 * BETA_SCALE);
	else
		ca->last_max_cwnd = cwnd;
	if (st)
		__sync_fetch_and_add(&st->loss_events, 1);
	ssthresh = (cwnd * p->beta) / BETA_SCALE;
	return ssthresh > 2 ? ssthresh : 2;
}

SEC("struct_ops/xcubic_state")
void BPF_PROG(xcubic_state, struct sock *sk, __u8 new_state)
{
	if (new_state == TCP_CA_Loss) {
		reset_epoch_state(ca_of(sk));
		hystart_new_round((struct tcp_sock *)sk, ca_of(sk));
	}
}

/* Extra ack spacing that pacing may introduce (at most 1 ms). */
static __always_inline __u32 pacing_ack_delay(struct sock *sk)
{
	__u64 rate = sk->sk_pacing_rate, d;

	if (!rate)
		return 0;
	d = (__u64)sk->sk_gso_max_size * 4 * USEC_PER_SEC / rate;
	return d < USEC_PER_MSEC ? d : USEC_PER_MSEC;
}

static __always_inline void hystart_exit(struct tcp_sock *tp, struct xcubic *ca, bool train)
{
	struct xcubic_stats *st = counters();

	ca->found = 1;
	tp->snd_ssthresh = tp->snd_cwnd;
	if (!st)
		return;
	__sync_fetch_and_add(train ? &st->hystart_train_exits : &st->hystart_delay_exits, 1);
	__sync_fetch_and_add(&st->exit_cwnd_sum, tp->snd_cwnd);
	st->last_exit_cwnd = tp->snd_cwnd;
}

static __always_inline void hystart_update(struct sock *sk, struct xcubic *ca, __u32 delay,
					   const struct xcubic_params *p)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 threshold, now;

	if (before32(ca->end_seq, tp->snd_una))
		hystart_new_round(tp, ca);

	if (p->hystart_detect & HYSTART_ACK_TRAIN) {
		now = clock_us(tp);
		/* A train of closely spaced acks longer than half the minimum RTT: the pipe is
		 * full. */
		if ((__s32)(now - ca->last_ack) <= (__s32)p->hystart_ack_delta_us) {
			ca->last_ack = now;
			threshold = ca->delay_min + pacing_ack_delay(sk);
			if (sk->sk_pacing_status == SK_PACING_NONE)
				threshold >>= 1;
			if ((__s32)(now - ca->round_start) > (__s32)threshold) {
				hystart_exit(tp, ca, true);
				return;
			}
		}
	}
	if (p->hystart_detect & HYSTART_DELAY) {
		/* The round's minimum RTT rose by more than the clamped threshold: a queue builds.
		 */
		if (ca->curr_rtt > delay)
			ca->curr_rtt = delay;
		if (ca->sample_cnt < HYSTART_MIN_SAMPLES) {
			ca->sample_cnt++;
			return;
		}
		threshold = ca->delay_min >> p->hystart_delay_shift;
		if (threshold < p->hystart_delay_min_us)
			threshold = p->hystart_delay_min_us;
		if (threshold > p->hystart_delay_max_us)
			threshold = p->hystart_delay_max_us;
		if (ca->curr_rtt > ca->delay_min + threshold)
			hystart_exit(tp, ca, false);
	}
}

SEC("struct_ops/xcubic_acked")
void BPF_PROG(xcubic_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	const struct xcubic_params *p;
	struct xcubic *ca = ca_of(sk);
	__u32 delay;

	if (sample->rtt_us < 0)
		return; /* duplicate without a timestamp */
	/* Right after a loss, RTT samples still carry the queue of the old window. */
	if (ca->epoch_start && (__s32)(clock_us(tp) - ca->epoch_start) < (__s32)USEC_PER_SEC)
		return;
	delay = sample->rtt_us ? sample->rtt_us : 1;
	if (!ca->delay_min || ca->delay_min > delay)
		ca->delay_min = delay;
	p = constants();
	if (!ca->found && in_slow_start(tp) && p->hystart && tp->snd_cwnd >= p->hystart_low_window)
		hystart_update(sk, ca, delay, p);
}

SEC("struct_ops/xcubic_undo_cwnd")
__u32 BPF_PROG(xcubic_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops xcubic = {
	.init = (void *)xcubic_init,
	.ssthresh = (void *)xcubic_recalc_ssthresh,
	.cong_avoid = (void *)xcubic_cong_avoid,
	.set_state = (void *)xcubic_state,
	.undo_cwnd = (void *)xcubic_undo_cwnd,
	.cwnd_event = (void *)xcubic_cwnd_event,
	.pkts_acked = (void *)xcubic_acked,
	/* Non-restricted, like cubic: a network namespace may make it its default. */
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "xcubic",
};
