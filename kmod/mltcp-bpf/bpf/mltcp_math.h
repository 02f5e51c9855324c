/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * mltcp_math.h: MLTCP's window math in C for the BPF struct_ops programs, operation for
 * operation the integer arithmetic of kmod/mltcp-math (the Rust crate compiled into
 * tcp_mltcp.ko): fixed.rs, iteration.rs, reno.rs, cubic.rs. Where the Rust saturates, wraps or
 * takes a checked path, this code does the same, so that the differential test
 * (kmod/mltcp-bpf/difftest) can compare both bit for bit. The constants come from the header
 * generated from mltcp-math (mltcp_consts.h); none is repeated here.
 *
 * Sources of the algorithms (as in the Rust): MLTCP, Rajasekaran et al., HotNets '24 and the MIT
 * thesis "Cassini and MLTCP" ch. 1 and 5 (F(bytes_ratio) = slope * bytes_ratio + intercept);
 * net/ipv4/tcp_cong.c (Reno, RFC 5681); net/ipv4/tcp_cubic.c (CUBIC, RFC 9438; HyStart, Ha and
 * Rhee, "Taming the Elephants: New TCP Slow Start").
 *
 * Plain C with no kernel or libc dependency beyond __u32/__u64: it compiles for the BPF target
 * (no loops, no 128-bit arithmetic, no division by a value that can be 0) and for user space.
 */
#ifndef MLTCP_MATH_H
#define MLTCP_MATH_H

#include <linux/types.h>
#include "mltcp_consts.h"

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

#define MLTCP_U32_MAX 0xffffffffU
#define MLTCP_U64_MAX 0xffffffffffffffffULL
#define MLTCP_FX_MASK ((__u64)MLTCP_FX_ONE - 1)

/* ---- integer helpers (Rust's saturating_* / checked_* / min / max) ---- */

static __always_inline __u32 min_u32(__u32 a, __u32 b) { return a < b ? a : b; }
static __always_inline __u32 max_u32(__u32 a, __u32 b) { return a > b ? a : b; }
static __always_inline __u64 min_u64(__u64 a, __u64 b) { return a < b ? a : b; }

static __always_inline __u32 sat_add_u32(__u32 a, __u32 b)
{
	__u32 s = a + b;
	return s < a ? MLTCP_U32_MAX : s;
}

static __always_inline __u32 sat_sub_u32(__u32 a, __u32 b) { return a > b ? a - b : 0; }

static __always_inline __u32 sat_mul_u32(__u32 a, __u32 b)
{
	__u64 p = (__u64)a * b;
	return p > MLTCP_U32_MAX ? MLTCP_U32_MAX : (__u32)p;
}

static __always_inline __u64 sat_add_u64(__u64 a, __u64 b)
{
	__u64 s = a + b;
	return s < a ? MLTCP_U64_MAX : s;
}

static __always_inline __u64 sat_sub_u64(__u64 a, __u64 b) { return a > b ? a - b : 0; }

/* a * b into *out; returns 0 on overflow (Rust's checked_mul returning None). By 32-bit halves:
 * clang lowers the usual `b > MAX / a` test to a 128-bit multiply, which the BPF target lacks. */
static __always_inline int checked_mul_u64(__u64 a, __u64 b, __u64 *out)
{
	__u64 ah = a >> 32, al = a & MLTCP_U32_MAX, bh = b >> 32, bl = b & MLTCP_U32_MAX;
	__u64 cross, lo, r;

	if (ah && bh)
		return 0;
	cross = ah * bl + al * bh;	/* one term is 0, the other < 2^64 */
	if (cross >> 32)
		return 0;
	lo = al * bl;
	r = lo + (cross << 32);
	if (r < lo)
		return 0;
	*out = r;
	return 1;
}

static __always_inline __u64 sat_mul_u64(__u64 a, __u64 b)
{
	__u64 p;
	return checked_mul_u64(a, b, &p) ? p : MLTCP_U64_MAX;
}

/* u64 -> u32, saturating (Rust's u32::try_from(v).unwrap_or(u32::MAX)). */
static __always_inline __u32 sat_u32(__u64 v) { return v > MLTCP_U32_MAX ? MLTCP_U32_MAX : (__u32)v; }

/* Number of significant bits of x (fls64; 64 - leading_zeros), by binary search: no loop. */
static __always_inline __u32 fls64(__u64 x)
{
	__u32 n = 0;
	if (x == 0)
		return 0;
	if (x >> 32) { n += 32; x >>= 32; }
	if (x >> 16) { n += 16; x >>= 16; }
	if (x >> 8) { n += 8; x >>= 8; }
	if (x >> 4) { n += 4; x >>= 4; }
	if (x >> 2) { n += 2; x >>= 2; }
	if (x >> 1) { n += 1; x >>= 1; }
	return n + (__u32)x;
}

/* ---- fixed.rs ---- */

/* a * b_fx / FX_ONE rounded down, saturating (mul_fx_u64). */
static __always_inline __u64 mm_mul_fx(__u64 a, __u32 b_fx)
{
	__u64 hi = sat_mul_u64(a >> MLTCP_FX_SHIFT, b_fx);
	__u64 lo = ((a & MLTCP_FX_MASK) * b_fx) >> MLTCP_FX_SHIFT;
	return sat_add_u64(hi, lo);
}

/* num / den in fixed point clamped to [0, FX_ONE] (ratio_fx). */
static __always_inline __u32 mm_ratio_fx(__u64 num, __u64 den)
{
	__u32 bits, shift;
	__u64 n, d, r;

	if (num >= den)
		return MLTCP_FX_ONE;
	bits = fls64(den);
	shift = sat_sub_u32(bits, 64 - MLTCP_FX_SHIFT);
	n = num >> shift;
	d = den >> shift;
	if (d == 0)
		return MLTCP_FX_ONE - 1;
	r = (n << MLTCP_FX_SHIFT) / d;
	return r < MLTCP_FX_ONE ? (__u32)r : MLTCP_FX_ONE - 1;
}

/* ---- iteration.rs ---- */

/* struct Iteration (repr(C), 32 bytes). */
struct mltcp_iter {
	__u64 start_bytes_acked;	/* tp->bytes_acked when the iteration began, bytes */
	__u64 est_bytes;		/* bytes per iteration in use, 0 = none */
	__u64 ewma_bytes;		/* EWMA of completed iterations, bytes */
	__u32 iterations;		/* completed (measured) iterations */
	__u32 flags;			/* MLTCP_FLAG_PINNED | MLTCP_FLAG_ALIGNED */
};

static __always_inline void mm_iter_init(struct mltcp_iter *it, __u64 bytes_acked)
{
	it->start_bytes_acked = bytes_acked;
	it->est_bytes = 0;
	it->ewma_bytes = 0;
	it->iterations = 0;
	it->flags = 0;
}

/* EWMA step old + w * (sample - old), rounded toward old; old == 0 takes the sample. */
static __always_inline __u64 mm_ewma(__u64 old, __u64 sample, __u32 weight_fx)
{
	__u32 w;

	if (old == 0)
		return sample;
	w = min_u32(weight_fx, MLTCP_FX_ONE);
	if (sample >= old)
		return sat_add_u64(old, mm_mul_fx(sample - old, w));
	return sat_sub_u64(old, mm_mul_fx(old - sample, w));
}

/* CA_EVENT_TX_START: a send after idle_us > max(idle_gap_us, 2 * srtt_us) begins an iteration
 * (Iteration::on_tx_start). Returns 1 when a measured iteration completed. */
static __always_inline int mm_iter_tx_start(struct mltcp_iter *it, const struct mltcp_params *p,
					       __u32 idle_us, __u32 srtt_us, __u64 bytes_acked)
{
	__u32 threshold = max_u32(p->idle_gap_us, sat_mul_u32(srtt_us, 2));
	__u64 finished;
	int measured;

	if (bytes_acked < it->start_bytes_acked) {
		it->start_bytes_acked = bytes_acked;
		it->flags &= ~MLTCP_FLAG_ALIGNED;
		return 0;
	}
	if (idle_us <= threshold)
		return 0;
	finished = bytes_acked - it->start_bytes_acked;
	measured = (it->flags & MLTCP_FLAG_ALIGNED) && finished > 0;
	if (measured) {
		it->ewma_bytes = mm_ewma(it->ewma_bytes, finished, p->ewma_weight_fx);
		if (!(it->flags & MLTCP_FLAG_PINNED))
			it->est_bytes = it->ewma_bytes;
		it->iterations += 1;
	}
	it->start_bytes_acked = bytes_acked;
	it->flags |= MLTCP_FLAG_ALIGNED;
	return measured;
}

/* F(bytes_ratio) = intercept + slope * bytes_ratio, fixed point (f_fx). */
static __always_inline __u32 mm_f_fx(const struct mltcp_params *p, __u32 ratio_fx)
{
	__u64 r = min_u32(ratio_fx, MLTCP_FX_ONE);
	__u64 inc = ((__u64)p->slope_fx * r) >> MLTCP_FX_SHIFT;
	return sat_u32((__u64)p->intercept_fx + inc);
}

/* F for the current ACK: FX_ONE until an estimate exists (Iteration::scale_fx). */
static __always_inline __u32 mm_scale_fx(const struct mltcp_iter *it, const struct mltcp_params *p,
					    __u64 bytes_acked)
{
	if (it->est_bytes == 0)
		return MLTCP_FX_ONE;
	return mm_f_fx(p, mm_ratio_fx(sat_sub_u64(bytes_acked, it->start_bytes_acked),
					    it->est_bytes));
}

/* min(F, 1) with scale_slow_start on, else FX_ONE (slow_start_gain_fx). */
static __always_inline __u32 mm_slow_start_gain(const struct mltcp_params *p, __u32 f_fx)
{
	return p->scale_slow_start ? min_u32(f_fx, MLTCP_FX_ONE) : MLTCP_FX_ONE;
}

/* ---- reno.rs ---- */

/* struct Window: the tcp_sock window fields, segments. */
struct mltcp_window {
	__u32 cwnd;
	__u32 cwnd_cnt;
	__u32 ssthresh;
	__u32 cwnd_clamp;
};

static __always_inline int mm_in_slow_start(const struct mltcp_window *w)
{
	return w->cwnd < w->ssthresh;
}

/* tcp_slow_start (net/ipv4/tcp_cong.c): returns the ACKs left over. */
static __always_inline __u32 mm_reno_slow_start(struct mltcp_window *w, __u32 acked)
{
	__u32 cwnd = min_u32(sat_add_u32(w->cwnd, acked), w->ssthresh);
	__u32 left = acked - (cwnd - w->cwnd);

	w->cwnd = min_u32(cwnd, w->cwnd_clamp);
	return left;
}

/* tcp_cong_avoid_ai (net/ipv4/tcp_cong.c): +1 segment per ai_w ACKed segments. */
static __always_inline void mm_cong_avoid_ai(struct mltcp_window *w, __u32 ai_w, __u32 acked)
{
	ai_w = max_u32(ai_w, 1);
	if (w->cwnd_cnt >= ai_w) {
		w->cwnd_cnt = 0;
		w->cwnd = sat_add_u32(w->cwnd, 1);
	}
	w->cwnd_cnt = sat_add_u32(w->cwnd_cnt, acked);
	if (w->cwnd_cnt >= ai_w) {
		__u32 delta = w->cwnd_cnt / ai_w;

		w->cwnd_cnt -= delta * ai_w;
		w->cwnd = sat_add_u32(w->cwnd, delta);
	}
	w->cwnd = min_u32(w->cwnd, w->cwnd_clamp);
}

/* ACKs per +1 segment for F segments per RTT: max(cwnd * FX_ONE / f_fx, 1) (mltcp_ai_w). */
static __always_inline __u32 mm_ai_w(__u32 cwnd, __u32 f_fx)
{
	if (f_fx == 0)
		return MLTCP_U32_MAX;
	return max_u32(sat_u32(((__u64)cwnd << MLTCP_FX_SHIFT) / f_fx), 1);
}

/* Slow start with the increase scaled by ss_f_fx, the fraction carried in cwnd_cnt
 * (mltcp_slow_start). */
static __always_inline __u32 mm_slow_start(struct mltcp_window *w, __u32 acked, __u32 ss_f_fx)
{
	__u32 room;
	__u64 carry, total_fx, inc, need_fx, used;

	if (ss_f_fx == MLTCP_FX_ONE)
		return mm_reno_slow_start(w, acked);
	if (ss_f_fx == 0)
		return 0;
	room = sat_sub_u32(w->ssthresh, w->cwnd);
	carry = min_u32(w->cwnd_cnt, MLTCP_FX_ONE - 1);
	total_fx = sat_add_u64(sat_mul_u64(acked, ss_f_fx), carry);
	inc = total_fx >> MLTCP_FX_SHIFT;
	if (inc < room) {
		w->cwnd = min_u32(sat_add_u32(w->cwnd, (__u32)inc), w->cwnd_clamp);
		w->cwnd_cnt = (__u32)(total_fx & MLTCP_FX_MASK);
		return 0;
	}
	need_fx = sat_sub_u64((__u64)room << MLTCP_FX_SHIFT, carry);
	used = need_fx / ss_f_fx + (need_fx % ss_f_fx != 0);
	w->cwnd = min_u32(sat_add_u32(w->cwnd, room), w->cwnd_clamp);
	w->cwnd_cnt = 0;
	return sat_sub_u32(acked, sat_u32(used));
}

/* The head both cong_avoid ops share (Cubic::prepare's first half): nothing unless
 * cwnd-limited, slow start scaled by ss_f_fx below ssthresh; returns the ACKed segments left
 * for the window increase, 0 when there are none. */
static __always_inline __u32 mm_cong_avoid_head(struct mltcp_window *w, __u32 acked, int cwnd_limited,
						__u32 ss_f_fx)
{
	if (!cwnd_limited)
		return 0;
	if (mm_in_slow_start(w))
		return mm_slow_start(w, acked, ss_f_fx);
	return acked;
}

/* MLTCP-Reno's cong_avoid: F segments per RTT in congestion avoidance, slow start scaled by
 * ss_f_fx (mltcp_cong_avoid). */
static __always_inline void mm_reno_cong_avoid(struct mltcp_window *w, __u32 acked, int cwnd_limited,
						  __u32 f_fx, __u32 ss_f_fx)
{
	acked = mm_cong_avoid_head(w, acked, cwnd_limited, ss_f_fx);
	if (acked == 0)
		return;
	mm_cong_avoid_ai(w, mm_ai_w(w->cwnd, f_fx), acked);
}

/* tcp_reno_ssthresh: half the window, at least 2. */
static __always_inline __u32 mm_reno_ssthresh(__u32 cwnd) { return max_u32(cwnd >> 1, 2); }

/* 1 - 1/(2F) in fixed point within [MIN_KEEP_FX, MAX_KEEP_FX] (decrease_keep_fx). */
static __always_inline __u32 mm_decrease_keep_fx(__u32 f_fx)
{
	__u64 drop_fx, keep;
	__u32 k;

	drop_fx = f_fx == 0 ? MLTCP_U64_MAX :
		((__u64)MLTCP_FX_ONE << MLTCP_FX_SHIFT) / ((__u64)f_fx * 2);
	keep = sat_sub_u64(MLTCP_FX_ONE, drop_fx);
	k = keep > MLTCP_U32_MAX ? MLTCP_MAX_KEEP_FX : (__u32)keep;
	return k < MLTCP_MIN_KEEP_FX ? MLTCP_MIN_KEEP_FX : (k > MLTCP_MAX_KEEP_FX ? MLTCP_MAX_KEEP_FX : k);
}

/* ssthresh after a loss with the decrease scaled by F: scale_decrease 1 both ways, 2 (or more)
 * raise only (mltcp_ssthresh with DecreaseScaling::Both / RaiseOnly). */
static __always_inline __u32 mm_scaled_ssthresh(__u32 cwnd, __u32 f_fx, __u32 scale_decrease)
{
	__u32 keep_fx = mm_decrease_keep_fx(f_fx);

	if (scale_decrease != 1)
		keep_fx = max_u32(keep_fx, MLTCP_FX_ONE / 2);
	return max_u32(sat_u32(((__u64)cwnd * keep_fx) >> MLTCP_FX_SHIFT), 2);
}

/* tcp_reno_undo_cwnd */
static __always_inline __u32 mm_undo_cwnd(__u32 cwnd, __u32 prior_cwnd) { return max_u32(cwnd, prior_cwnd); }

/* ---- cubic.rs ---- */

/* struct bictcp of tcp_cubic.c (struct Cubic, repr(C), 60 bytes). */
struct mltcp_bictcp {
	__u32 cnt;
	__u32 last_max_cwnd;
	__u32 last_cwnd;
	__u32 last_time;
	__u32 bic_origin_point;
	__u32 bic_k;
	__u32 delay_min;
	__u32 epoch_start;
	__u32 ack_cnt;
	__u32 tcp_cwnd;
	__u16 ack_frac_fx;
	__u8 sample_cnt;
	__u8 found;
	__u32 round_start;
	__u32 end_seq;
	__u32 last_ack;
	__u32 curr_rtt;
};

/* What the CUBIC updates read from the socket (struct Clock). */
struct mltcp_clock {
	__u32 now_jiffies;	/* tcp_jiffies32 */
	__u32 now_us;		/* tp->tcp_mstamp truncated */
	__u32 snd_nxt;
	__u32 snd_una;
	int pacing_enabled;	/* sk->sk_pacing_status != SK_PACING_NONE */
};

/* after() of include/net/tcp.h */
static __always_inline int mm_after(__u32 a, __u32 b) { return (__s32)(b - a) < 0; }

/* usecs_to_jiffies, rounding up, in 64 bits. */
static __always_inline __u64 mm_usecs_to_jiffies(__u32 us, __u32 hz)
{
	return ((__u64)us * hz + 999999) / 1000000;
}

/* C * offs^3 >> (10 + 3 * BICTCP_HZ), saturating (cubic_delta). */
static __always_inline __u32 mm_cubic_delta(__u32 scale, __u64 offs)
{
	__u64 v, o;

	if (checked_mul_u64(scale, offs, &v) && checked_mul_u64(v, offs, &v) &&
	    checked_mul_u64(v, offs, &v))
		return sat_u32(v >> (10 + 3 * BICTCP_HZ));
	o = offs >> BICTCP_HZ;
	if (checked_mul_u64(scale, o, &v) && checked_mul_u64(v, o, &v) && checked_mul_u64(v, o, &v))
		return sat_u32(v >> 10);
	return MLTCP_U32_MAX;
}

/* cbrt(x * 2^18) - 1 for x in [0, 63]: the values of tcp_cubic.c's cubic_root() table, so that
 * K is bit for bit the kernel's (the same table as mltcp-math's CBRT_TABLE). */
static const __u8 mltcp_cbrt_table[64] = {
	0, 54, 54, 54, 118, 118, 118, 118,
	123, 129, 134, 138, 143, 147, 151, 156,
	157, 161, 164, 168, 170, 173, 176, 179,
	181, 185, 187, 190, 192, 194, 197, 199,
	200, 202, 204, 206, 209, 211, 213, 215,
	217, 219, 221, 222, 224, 225, 227, 229,
	231, 232, 234, 236, 237, 239, 240, 242,
	244, 245, 246, 248, 250, 251, 252, 254,
};

static __always_inline __u32 mm_cbrt_lookup(__u64 i)
{
	return i < 64 ? mltcp_cbrt_table[i] : 0;
}

/* Integer cube root: table lookup plus one Newton-Raphson step (cubic_root). */
static __always_inline __u32 mm_cubic_root(__u64 a)
{
	__u32 bits = fls64(a), b, x, q;
	__u64 div;

	if (bits < 7)
		return (mm_cbrt_lookup(a) + 35) >> 6;
	b = ((bits * 84) >> 8) - 1;
	x = ((mm_cbrt_lookup(a >> ((b * 3) & 63)) + 10) << (b & 31)) >> 6;
	div = (__u64)x * (__u64)(x - 1);
	q = div ? (__u32)(a / div) : 0;
	x = x * 2 + q;
	return (x * 341) >> 10;
}

/* max(cnt * FX_ONE / f_fx, 1) (mltcp_scale_cnt). */
static __always_inline __u32 mm_scale_cnt(__u32 cnt, __u32 f_fx)
{
	if (f_fx == 0)
		return MLTCP_U32_MAX;
	return max_u32(sat_u32(((__u64)cnt << MLTCP_FX_SHIFT) / f_fx), 1);
}

/* bictcp_reset: clears all but ack_frac_fx and the HyStart round. */
static __always_inline void mm_cubic_reset(struct mltcp_bictcp *ca)
{
	ca->cnt = 0;
	ca->last_max_cwnd = 0;
	ca->last_cwnd = 0;
	ca->last_time = 0;
	ca->bic_origin_point = 0;
	ca->bic_k = 0;
	ca->delay_min = 0;
	ca->epoch_start = 0;
	ca->ack_cnt = 0;
	ca->tcp_cwnd = 0;
	ca->found = 0;
}

/* bictcp_hystart_reset */
static __always_inline void mm_hystart_reset(struct mltcp_bictcp *ca, const struct mltcp_clock *clk)
{
	ca->round_start = clk->now_us;
	ca->last_ack = clk->now_us;
	ca->end_seq = clk->snd_nxt;
	ca->curr_rtt = MLTCP_U32_MAX;
	ca->sample_cnt = 0;
}

/* cubictcp_init */
static __always_inline void mm_cubic_init(struct mltcp_bictcp *ca, struct mltcp_window *w,
					     const struct mltcp_clock *clk)
{
	mm_cubic_reset(ca);
	if (CUBIC_HYSTART)
		mm_hystart_reset(ca, clk);
	if (!CUBIC_HYSTART && CUBIC_INITIAL_SSTHRESH)
		w->ssthresh = CUBIC_INITIAL_SSTHRESH;
}

/* cubictcp_cwnd_event(CA_EVENT_TX_START): shift the epoch by the idle time. */
static __always_inline void mm_cubic_tx_start(struct mltcp_bictcp *ca, const struct mltcp_clock *clk,
						 __u32 lsndtime)
{
	__u32 now = clk->now_jiffies;
	__s32 delta = (__s32)(now - lsndtime);

	if (ca->epoch_start && delta > 0) {
		ca->epoch_start += (__u32)delta;
		if (mm_after(ca->epoch_start, now))
			ca->epoch_start = now;
	}
}

/* acked * f_fx / FX_ONE ACKs, the fraction carried in ack_frac_fx. */
static __always_inline __u32 mm_cubic_scaled_acked(struct mltcp_bictcp *ca, __u32 acked, __u32 f_fx)
{
	__u64 total = (__u64)acked * f_fx + ((__u64)ca->ack_frac_fx & MLTCP_FX_MASK);

	ca->ack_frac_fx = (__u16)(total & MLTCP_FX_MASK);
	return sat_u32(total >> MLTCP_FX_SHIFT);
}

/* The cubic-curve part of bictcp_update. */
static __always_inline void mm_cubic_cnt(struct mltcp_bictcp *ca, __u32 hz, __u32 cwnd, __u32 acked,
					    __u32 now)
{
	__u64 elapsed, t_jiffies, t, k, offs;
	__u32 delta, target;
	int below;

	ca->last_cwnd = cwnd;
	ca->last_time = now;
	if (ca->epoch_start == 0) {
		ca->epoch_start = now;
		ca->ack_cnt = acked;
		ca->tcp_cwnd = cwnd;
		if (ca->last_max_cwnd <= cwnd) {
			ca->bic_k = 0;
			ca->bic_origin_point = cwnd;
		} else {
			__u64 gap = ca->last_max_cwnd - cwnd;

			ca->bic_k = mm_cubic_root(sat_mul_u64(CUBIC_CUBE_FACTOR, gap));
			ca->bic_origin_point = ca->last_max_cwnd;
		}
	}
	elapsed = (__u32)(now - ca->epoch_start);
	t_jiffies = elapsed + mm_usecs_to_jiffies(ca->delay_min, hz);
	t = hz ? (t_jiffies << BICTCP_HZ) / hz : 0;
	k = ca->bic_k;
	below = t < k;
	offs = below ? k - t : t - k;
	delta = mm_cubic_delta(CUBIC_CUBE_RTT_SCALE, offs);
	target = below ? sat_sub_u32(ca->bic_origin_point, delta) : sat_add_u32(ca->bic_origin_point, delta);
	if (target > cwnd)
		ca->cnt = cwnd / (target - cwnd);
	else
		ca->cnt = sat_mul_u32(cwnd, 100);
	if (ca->last_max_cwnd == 0 && ca->cnt > 20)
		ca->cnt = 20;
}

/* The Reno-friendly region of bictcp_update (RFC 9438 section 4.3), the loop as one division. */
static __always_inline void mm_cubic_reno_friendly(struct mltcp_bictcp *ca, __u32 cwnd)
{
	__u32 step = sat_u32(((__u64)cwnd * CUBIC_BETA_SCALE) >> 3);

	if (step != 0 && ca->ack_cnt > step) {
		__u32 n = (ca->ack_cnt - 1) / step;

		ca->ack_cnt -= n * step;
		ca->tcp_cwnd = sat_add_u32(ca->tcp_cwnd, n);
	}
	if (ca->tcp_cwnd > cwnd) {
		__u32 max_cnt = cwnd / (ca->tcp_cwnd - cwnd);

		if (ca->cnt > max_cnt)
			ca->cnt = max_cnt;
	}
}

/* bictcp_update with the Reno emulation's ACK count scaled by F. */
static __always_inline void mm_cubic_update(struct mltcp_bictcp *ca, __u32 hz, __u32 cwnd, __u32 acked,
					       __u32 now, __u32 f_fx)
{
	__s32 since_last;

	acked = mm_cubic_scaled_acked(ca, acked, f_fx);
	ca->ack_cnt += acked;
	since_last = (__s32)(now - ca->last_time);
	if (ca->last_cwnd == cwnd && (__s64)since_last <= (__s64)(hz / 32))
		return;
	if (!(ca->epoch_start && now == ca->last_time))
		mm_cubic_cnt(ca, hz, cwnd, acked, now);
	if (CUBIC_TCP_FRIENDLINESS)
		mm_cubic_reno_friendly(ca, cwnd);
	ca->cnt = max_u32(ca->cnt, 2);
}

/* MLTCP-CUBIC's cong_avoid (Cubic::mltcp_cong_avoid). */
static __always_inline void mm_cubic_cong_avoid(struct mltcp_bictcp *ca, __u32 hz, struct mltcp_window *w,
						   __u32 acked, int cwnd_limited, const struct mltcp_clock *clk,
						   __u32 f_fx, __u32 ss_f_fx)
{
	acked = mm_cong_avoid_head(w, acked, cwnd_limited, ss_f_fx);
	if (acked == 0)
		return;
	mm_cubic_update(ca, hz, w->cwnd, acked, clk->now_jiffies, f_fx);
	mm_cong_avoid_ai(w, mm_scale_cnt(ca->cnt, f_fx), acked);
}

/* cubictcp_recalc_ssthresh, products in 64 bits. */
static __always_inline __u32 mm_cubic_ssthresh(struct mltcp_bictcp *ca, const struct mltcp_window *w)
{
	__u64 cwnd = w->cwnd;

	ca->epoch_start = 0;
	if (w->cwnd < ca->last_max_cwnd && CUBIC_FAST_CONVERGENCE)
		ca->last_max_cwnd = sat_u32(cwnd * (BICTCP_BETA_SCALE + CUBIC_BETA) / (2 * BICTCP_BETA_SCALE));
	else
		ca->last_max_cwnd = w->cwnd;
	return max_u32(sat_u32(cwnd * CUBIC_BETA / BICTCP_BETA_SCALE), 2);
}

/* cubictcp_state(TCP_CA_Loss) */
static __always_inline void mm_cubic_loss_state(struct mltcp_bictcp *ca, const struct mltcp_clock *clk)
{
	mm_cubic_reset(ca);
	mm_hystart_reset(ca, clk);
}

/* hystart_ack_delay: time for 4 GSO packets at the pacing rate, at most 1 ms, µs. */
static __always_inline __u32 mm_hystart_ack_delay(__u64 pacing_rate, __u32 gso_max_size)
{
	if (pacing_rate == 0)
		return 0;
	return (__u32)min_u64(((__u64)gso_max_size * 4000000) / pacing_rate, 1000);
}

/* hystart_update: the ACK-train and delay-increase detectors. */
static __always_inline void mm_hystart_update(struct mltcp_bictcp *ca, struct mltcp_window *w, __u32 delay,
						 const struct mltcp_clock *clk, __u64 pacing_rate,
						 __u32 gso_max_size)
{
	if (mm_after(clk->snd_una, ca->end_seq))
		mm_hystart_reset(ca, clk);
	if (w->cwnd < CUBIC_HYSTART_LOW_WINDOW)
		return;
	if (CUBIC_HYSTART_DETECT & HYSTART_ACK_TRAIN) {
		__u32 now = clk->now_us;
		__s32 gap = (__s32)(now - ca->last_ack);

		if ((__s64)gap <= (__s64)CUBIC_HYSTART_ACK_DELTA_US) {
			__u32 threshold;

			ca->last_ack = now;
			threshold = sat_add_u32(ca->delay_min, mm_hystart_ack_delay(pacing_rate, gso_max_size));
			if (!clk->pacing_enabled)
				threshold >>= 1;
			if (now - ca->round_start > threshold) {
				ca->found = 1;
				w->ssthresh = w->cwnd;
			}
		}
	}
	if (CUBIC_HYSTART_DETECT & HYSTART_DELAY) {
		if (ca->curr_rtt > delay)
			ca->curr_rtt = delay;
		if (ca->sample_cnt < HYSTART_MIN_SAMPLES) {
			ca->sample_cnt += 1;
		} else {
			__u32 eta = ca->delay_min >> 3;

			eta = eta < HYSTART_DELAY_MIN ? HYSTART_DELAY_MIN :
			      (eta > HYSTART_DELAY_MAX ? HYSTART_DELAY_MAX : eta);
			if (ca->curr_rtt > sat_add_u32(ca->delay_min, eta)) {
				ca->found = 1;
				w->ssthresh = w->cwnd;
			}
		}
	}
}

/* cubictcp_acked: minimum RTT and HyStart in slow start. */
static __always_inline void mm_cubic_pkts_acked(struct mltcp_bictcp *ca, __u32 hz, struct mltcp_window *w,
						   __s32 rtt_us, const struct mltcp_clock *clk,
						   __u64 pacing_rate, __u32 gso_max_size)
{
	__s32 since_epoch;
	__u32 delay;

	if (rtt_us < 0)
		return;
	since_epoch = (__s32)(clk->now_jiffies - ca->epoch_start);
	if (ca->epoch_start && (__s64)since_epoch < (__s64)hz)
		return;
	delay = max_u32((__u32)rtt_us, 1);
	if (ca->delay_min == 0 || ca->delay_min > delay)
		ca->delay_min = delay;
	if (!ca->found && mm_in_slow_start(w) && CUBIC_HYSTART)
		mm_hystart_update(ca, w, delay, clk, pacing_rate, gso_max_size);
}

#endif
