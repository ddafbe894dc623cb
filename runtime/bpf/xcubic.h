/* SPDX-License-Identifier: MIT */
/*
 * xcubic: CUBIC as a struct_ops TCP congestion control whose constants live in a map.
 * Shared by xcubic.bpf.c and the xcubic loader; xrtd's bpf backend finds the fields by name
 * through the map's BTF ("<pin dir>/params:hystart_low_window").
 */
#ifndef XCUBIC_H
#define XCUBIC_H

/* The constants, read from the `params` map each time they are used. */
struct xcubic_params {
	__u32 beta;		    /* multiplicative decrease, /1024 (717 ≈ 0.7) */
	__u32 bic_scale;	    /* cubic scaling C, /1024 · 10 (41 ≈ 0.4) */
	__u32 fast_convergence;	    /* 0 or 1 */
	__u32 tcp_friendliness;	    /* 0 or 1 */
	__u32 hystart;		    /* 0 or 1 */
	__u32 hystart_detect;	    /* bit 0: ack train, bit 1: delay increase */
	__u32 hystart_low_window;   /* HyStart only runs once cwnd reaches this (packets) */
	__u32 hystart_ack_delta_us; /* acks this close belong to one train */
	__u32 hystart_delay_min_us; /* HYSTART_DELAY_MIN: lower clamp of the delay threshold */
	__u32 hystart_delay_max_us; /* HYSTART_DELAY_MAX: upper clamp */
	__u32 hystart_delay_shift;  /* threshold = clamp(delay_min >> shift, MIN, MAX) */
};

#define XCUBIC_PARAMS_DEFAULT                                                                      \
	{                                                                                          \
		.beta = 717, .bic_scale = 41, .fast_convergence = 1, .tcp_friendliness = 1,        \
		.hystart = 1, .hystart_detect = 3, .hystart_low_window = 16,                       \
		.hystart_ack_delta_us = 2000, .hystart_delay_min_us = 4000,                        \
		.hystart_delay_max_us = 16000, .hystart_delay_shift = 3,                           \
	}

/* What xcubic did, for tests and benchmarks (array map, key 0). */
struct xcubic_stats {
	__u64 flows;		   /* connections initialized */
	__u64 hystart_train_exits; /* slow start left by the ack-train test */
	__u64 hystart_delay_exits; /* slow start left by the delay-increase test */
	__u64 exit_cwnd_sum;	   /* sum of cwnd at those exits */
	__u64 last_exit_cwnd;	   /* cwnd at the latest exit */
	__u64 loss_events;	   /* ssthresh recalculations (losses, ECN) */
};

#endif /* XCUBIC_H */
