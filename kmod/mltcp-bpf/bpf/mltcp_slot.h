/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * mltcp_slot.h: the agent's slot program (datapath-programs/mlcc-slot.ccp) as fixed C, for the
 * BPF agent datapath of mltcp.bpf.c (the stock-kernel stand-in for tcp_mltcp's CCP datapath).
 * One call of mm_slot_run is one invocation of the program on one ACK, as kmod/ccp-datapath's
 * interpreter runs it (machine.rs: `FlowState::invoke`): the same registers, the same rule order,
 * the same u64 arithmetic, including the runs the interpreter stops (an add that overflows, a
 * subtraction that underflows: no window, no report). The differential test
 * (kmod/mltcp-bpf/difftest, tests/slot.rs) drives this code and the interpreted program through
 * the same ACK sequences and compares the window and every report field exactly.
 *
 * The window rule (see the program's header comment): Reno (RFC 5681) within the agent's ceiling
 * Control.cwnd_cap, halved on loss at most once per RTT, slow start toward a raised ceiling; in
 * scavenger mode (Control.scavenge_us > 0) LEDBAT (RFC 6817, Sec. 2.4.2) with GAIN 1 and
 * TARGET = Control.scavenge_us. Windows in bytes, times in microseconds, rates in bytes/s.
 *
 * Plain C over __u64 (no loops, no division by a value that can be 0): it compiles for the BPF
 * target and for user space.
 */
#ifndef MLTCP_SLOT_H
#define MLTCP_SLOT_H

#include <linux/types.h>

/* The program's constants (mlcc-slot.ccp): one segment, the loss floor (4 segments), LEDBAT's
 * MIN_CWND and INIT_CWND (2 segments), the initial base delay (2^31 - 1) and the value a missing
 * RTT sample reads as (ccp-datapath's Primitives: 0 reads as 0xffff_ffff). */
#define MLTCP_SLOT_MSS 1448ULL
#define MLTCP_SLOT_LOSS_FLOOR 5792ULL
#define MLTCP_SLOT_SCAV_MIN 2896ULL
#define MLTCP_SLOT_BASE_RTT_INIT 2147483647ULL
#define MLTCP_SLOT_NO_RTT 0xffffffffULL

/* Number of report fields, and their defaults (the program's `def`s). */
#define MLTCP_SLOT_REPORT_FIELDS 14
#define MLTCP_SLOT_DEFAULT_SLOT_US 60000ULL
#define MLTCP_SLOT_DEFAULT_CWND_CAP 16777216ULL

/* The Report registers, in the order the program declares them (the MEASURE's field order). */
struct mltcp_slot_report {
	__u64 acked;		/* bytes acknowledged in the slot (volatile) */
	__u64 lost;		/* packets lost in the slot (volatile) */
	__u64 rtt;		/* latest RTT sample, µs */
	__u64 rin;		/* delivery rate, bytes/s */
	__u64 rout;		/* sending rate, bytes/s */
	__u64 rate;		/* the pacing rate in force, bytes/s */
	__u64 micros;		/* length of the reported slot, µs (volatile) */
	__u64 now;		/* Ack.now at the reporting ACK, µs */
	__u64 ssthresh;		/* slow-start threshold, bytes */
	__u64 cap_seen;		/* the last Control.cwnd_cap seen, bytes */
	__u64 cut_us;		/* Ack.now of the last window reduction, µs */
	__u64 base_rtt;		/* least RTT sample, µs */
	__u64 qdelay;		/* latest queueing delay, µs */
	__u64 scav_seen;	/* the last Control.scavenge_us seen, µs */
};

/* The Control registers the agent sets (UPDATE_FIELDS / CHANGE_PROG). */
struct mltcp_slot_ctl {
	__u64 slot_us;		/* Control.slot_us, µs */
	__u64 cwnd_cap;		/* Control.cwnd_cap, bytes */
	__u64 scavenge_us;	/* Control.scavenge_us: LEDBAT's TARGET, µs; 0 = Reno */
};

/* The primitives of one ACK, as tcp_mltcp's glue (kmod/ccp.rs, on_ack) fills them. */
struct mltcp_slot_ack {
	__u64 bytes_acked;	/* Ack.bytes_acked: tp->bytes_acked since the last invocation */
	__u64 lost_pkts;	/* Ack.lost_pkts_sample: tp->lost since the last invocation */
	__u64 rtt_us;		/* Flow.rtt_sample_us: srtt, µs (0: no sample) */
	__u64 rate_in;		/* Flow.rate_incoming, bytes/s */
	__u64 rate_out;		/* Flow.rate_outgoing, bytes/s */
	__u64 now_us;		/* Ack.now, µs of the datapath's clock */
	__u64 in_flight;	/* Flow.packets_in_flight */
};

/* One flow's program state: the Report registers, the implicit Cwnd and Rate, and the clock
 * value at which `Micros` was last 0. */
struct mltcp_slot_state {
	struct mltcp_slot_report r;
	__u64 cwnd;		/* Cwnd, bytes (what the datapath enforces) */
	__u64 rate;		/* Rate, bytes/s (0: none) */
	__u64 time_zero_us;	/* clock at Micros = 0, µs */
};

/* mm_slot_run's result bits. */
#define MLTCP_SLOT_RAN 1	/* the run completed: enforce cwnd (when > 0) and rate (when != 0) */
#define MLTCP_SLOT_REPORT 2	/* report s->r (before the reset mm_slot_run already did: see out) */

/* A program switch (CHANGE_PROG): the Report registers to their defaults, Micros to 0 at
 * `clock_us`. Cwnd and Rate are kept (the agent sets them with the switch). */
static __always_inline void mm_slot_start(struct mltcp_slot_state *s, __u64 clock_us)
{
	__builtin_memset(&s->r, 0, sizeof(s->r));
	s->r.base_rtt = MLTCP_SLOT_BASE_RTT_INIT;
	s->time_zero_us = clock_us;
}

static __always_inline __u64 slot_min(__u64 a, __u64 b) { return a < b ? a : b; }
static __always_inline __u64 slot_max(__u64 a, __u64 b) { return a > b ? a : b; }

/* (* a b) of the interpreter: wrapping, failing where libccp's check does (r < a and b > 0). */
static __always_inline int slot_mul(__u64 a, __u64 b, __u64 *r)
{
	*r = a * b;
	return !(*r < a && b > 0);
}

/* (/ (* (* 1448 acked) d) (* target (max cwnd 1))): LEDBAT's step, bytes; 0 from a failed run
 * is signalled by returning 0 in *ok. */
static __always_inline __u64 slot_ledbat_step(__u64 acked, __u64 d, __u64 target, __u64 cwnd,
					      int *ok)
{
	__u64 a, num, den;

	if (!slot_mul(MLTCP_SLOT_MSS, acked, &a) || !slot_mul(a, d, &num) ||
	    !slot_mul(target, slot_max(cwnd, 1), &den) || den == 0) {
		*ok = 0;
		return 0;
	}
	return num / den;
}

/*
 * One invocation of mlcc-slot.ccp on ACK `a` at clock `clock_us` (the flow's clock for Micros),
 * with the agent's controls `c`. `s->cwnd` and `s->rate` hold Cwnd and Rate as loaded for this
 * run (the window last enforced, the agent's rate). On a report, `out` receives the Report
 * registers as reported and the volatile ones (acked, lost, micros) are reset in `s->r`.
 *
 * Returns 0 when the run stops on an arithmetic failure (the interpreter's AddOverflow,
 * SubUnderflow, MulOverflow, DivByZero: nothing enforced, nothing reported, the registers as far
 * as the run got), else MLTCP_SLOT_RAN, with MLTCP_SLOT_REPORT when it reported.
 */
static __always_inline int mm_slot_run(struct mltcp_slot_state *s, const struct mltcp_slot_ctl *c,
				       const struct mltcp_slot_ack *a, __u64 clock_us,
				       struct mltcp_slot_report *out)
{
	struct mltcp_slot_report *r = &s->r;
	__u64 rtt = a->rtt_us ? a->rtt_us : MLTCP_SLOT_NO_RTT;
	__u64 micros = clock_us - s->time_zero_us;
	__u64 cwnd = s->cwnd, t, step;
	int ok = 1, report = 0;

	/* (when true ...): the slot's accumulators and the latest samples. */
	t = r->acked + a->bytes_acked;
	if (t < r->acked)
		return 0;
	r->acked = t;
	t = r->lost + a->lost_pkts;
	if (t < r->lost)
		return 0;
	r->lost = t;
	r->rtt = rtt;
	r->rin = a->rate_in;
	r->rout = a->rate_out;
	r->rate = s->rate;
	r->now = a->now_us;
	if (c->cwnd_cap > r->cap_seen)
		r->ssthresh = c->cwnd_cap;
	r->cap_seen = c->cwnd_cap;
	r->base_rtt = slot_min(r->base_rtt, rtt);
	if (rtt < MLTCP_SLOT_BASE_RTT_INIT)
		r->qdelay = rtt - r->base_rtt;

	/* Scavenger mode switch: entering starts from at most 2 segments; leaving restarts slow
	 * start toward the ceiling. */
	if (c->scavenge_us > r->scav_seen)
		cwnd = slot_min(cwnd, MLTCP_SLOT_SCAV_MIN);
	if (r->scav_seen > c->scavenge_us)
		r->ssthresh = c->cwnd_cap;
	r->scav_seen = c->scavenge_us;

	/* Loss: halve, to no less than 4 segments, once per RTT. */
	if (a->now_us < r->cut_us)
		goto fail;
	if (a->lost_pkts > 0 && a->now_us - r->cut_us > rtt) {
		r->ssthresh = slot_max(cwnd / 2, MLTCP_SLOT_LOSS_FLOOR);
		cwnd = slot_min(cwnd, r->ssthresh);
		r->cut_us = a->now_us;
	}

	/* Reno: slow start below ssthresh, one segment per window above it (RFC 5681). */
	if (c->scavenge_us == 0 && cwnd < r->ssthresh) {
		t = cwnd + a->bytes_acked;
		if (t < cwnd)
			goto fail;
		cwnd = t;
	}
	if (cwnd + 1 < cwnd)
		goto fail;
	if (c->scavenge_us == 0 && r->ssthresh < cwnd + 1) {
		if (!slot_mul(MLTCP_SLOT_MSS, a->bytes_acked, &t))
			goto fail;
		step = t / slot_max(cwnd, 1);
		if (cwnd + step < cwnd)
			goto fail;
		cwnd += step;
	}

	/* LEDBAT (RFC 6817, Sec. 2.4.2): grow below the target, shrink above it to 2 segments. */
	if (c->scavenge_us > r->qdelay) {
		step = slot_ledbat_step(a->bytes_acked, c->scavenge_us - r->qdelay, c->scavenge_us,
					cwnd, &ok);
		if (!ok || cwnd + step < cwnd)
			goto fail;
		cwnd += step;
	}
	if (c->scavenge_us > 0 && r->qdelay > c->scavenge_us) {
		step = slot_ledbat_step(a->bytes_acked, r->qdelay - c->scavenge_us, c->scavenge_us,
					cwnd, &ok);
		if (!ok)
			goto fail;
		cwnd = slot_max(cwnd - slot_min(cwnd, step), MLTCP_SLOT_SCAV_MIN);
	}

	/* The ceiling. */
	cwnd = slot_min(cwnd, c->cwnd_cap);

	/* The slot's end, or nothing left in flight: report and start a new slot. Both rules run
	 * when both hold: the first event's (fallthrough) leaves the interpreter's continue flag
	 * set for the rest of the run (libccp's semantics), so the second one reports the new
	 * slot's Micros, 0. */
	if (micros > c->slot_us) {
		r->micros = micros;
		micros = 0;
		s->time_zero_us = clock_us;
		report = 1;
	}
	if (a->in_flight == 0 && r->acked > 0) {
		r->micros = micros;
		s->time_zero_us = clock_us;
		report = 1;
	}
	if (report) {
		*out = *r;
		r->acked = 0;
		r->lost = 0;
		r->micros = 0;
	}
	s->cwnd = cwnd;
	return MLTCP_SLOT_RAN | (report ? MLTCP_SLOT_REPORT : 0);
fail:
	s->cwnd = cwnd;
	return 0;
}

#endif
