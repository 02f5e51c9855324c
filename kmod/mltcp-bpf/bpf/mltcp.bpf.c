// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * mltcp.bpf.c: MLTCP's `mltcp` (Reno based) and `mltcp_cubic` (CUBIC + HyStart based) as BPF
 * struct_ops tcp_congestion_ops, for kernels that cannot load tcp_mltcp.ko. The same names,
 * parameters, defaults and per-ACK behaviour as the module (kmod/tcp_mltcp.rs, whose glue this
 * file follows callback for callback), on the math of mltcp_math.h, which is kmod/mltcp-math's
 * in C. Loaded by `mltcp-bpf load` (kmod/mltcp-bpf/src/main.rs); the differential test
 * (kmod/mltcp-bpf/difftest) compiles this very file for user space behind a shim of the libbpf
 * headers and compares it with mltcp-math.
 *
 * What the kernel's BPF struct_ops cannot do that the module does: get_info (bpf_tcp_ca refuses
 * it, so `ss -i`/mltcp-stat show no MLTCP block), the CCP datapath and mltcp_dctcp.
 */
#include "mltcp_kern.h"
#include "mltcp_math.h"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char _license[] SEC("license") = "Dual MIT/GPL";

/* The kernel's HZ (tcp_jiffies32 ticks per second), from its Kconfig at load time. */
extern unsigned long CONFIG_HZ __kconfig;

/* Per-socket private data, in icsk_ca_priv (zeroed by the kernel before init), as the module's
 * MltcpRenoState and MltcpCubicState (kmod/mltcp-math/src/mltcp.rs). */
struct mltcp_reno_state {
	struct mltcp_iter iter;
};

struct mltcp_cubic_state {
	struct mltcp_bictcp cubic;
	struct mltcp_iter iter;
};

_Static_assert(sizeof(struct mltcp_iter) == 32, "struct Iteration is 32 bytes");
_Static_assert(sizeof(struct mltcp_bictcp) == 60, "struct Cubic is 60 bytes");
_Static_assert(sizeof(struct mltcp_reno_state) == MLTCP_RENO_STATE_SIZE, "MltcpRenoState layout");
_Static_assert(sizeof(struct mltcp_cubic_state) == MLTCP_CUBIC_STATE_SIZE, "MltcpCubicState layout");
_Static_assert(sizeof(struct mltcp_cubic_state) <= MLTCP_ICSK_CA_PRIV_SIZE, "fits icsk_ca_priv");

/* The tunables (the module's parameters of the same names), written by `mltcp-bpf load` (the
 * defaults) and `mltcp-bpf set`; read on every callback. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mltcp_params);
} mltcp_params SEC(".maps");

/* Counters per algorithm (index MLTCP_ALG_*), summed over CPUs by `mltcp-bpf status`;
 * struct mltcp_stats is the generated header's (mltcp_math::c_header::BpfStats). */
#define MLTCP_ALG_RENO 0
#define MLTCP_ALG_CUBIC 1

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct mltcp_stats);
} mltcp_stats SEC(".maps");

static __always_inline struct mltcp_stats *stats(__u32 alg)
{
	return bpf_map_lookup_elem(&mltcp_stats, &alg);
}

/* The current parameters; the compiled-in defaults should the map be unreadable. */
static __always_inline void get_params(struct mltcp_params *p)
{
	__u32 zero = 0;
	struct mltcp_params *v = bpf_map_lookup_elem(&mltcp_params, &zero);
	struct mltcp_params d = MLTCP_PARAMS_DEFAULT;

	*p = v ? *v : d;
}

static __always_inline __u32 tcp_jiffies32(void)
{
	return (__u32)bpf_jiffies64();
}

static __always_inline __u32 kernel_hz(void)
{
	return (__u32)CONFIG_HZ;
}

/* jiffies_to_usecs (include/linux/jiffies.h), truncated to 32 bits as it returns. */
static __always_inline __u32 jiffies_to_usecs(__u32 j)
{
	__u32 hz = kernel_hz();

	return hz ? (__u32)(((__u64)j * 1000000) / hz) : 0;
}

/* tcp_is_cwnd_limited (include/net/tcp.h) */
static __always_inline int is_cwnd_limited(struct tcp_sock *tp)
{
	if (BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited))
		return 1;
	if (tp->snd_cwnd < tp->snd_ssthresh)
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return 0;
}

static __always_inline void read_window(struct tcp_sock *tp, struct mltcp_window *w)
{
	w->cwnd = tp->snd_cwnd;
	w->cwnd_cnt = tp->snd_cwnd_cnt;
	w->ssthresh = tp->snd_ssthresh;
	w->cwnd_clamp = tp->snd_cwnd_clamp;
}

/* Writes back what the math changed (the module's apply()). */
static __always_inline void apply_window(struct tcp_sock *tp, const struct mltcp_window *before,
					 const struct mltcp_window *after)
{
	if (after->cwnd != before->cwnd)
		tp->snd_cwnd = after->cwnd;
	if (after->cwnd_cnt != before->cwnd_cnt)
		tp->snd_cwnd_cnt = after->cwnd_cnt;
	if (after->ssthresh != before->ssthresh)
		tp->snd_ssthresh = after->ssthresh;
}

static __always_inline void read_clock(struct sock *sk, struct mltcp_clock *clk)
{
	struct tcp_sock *tp = tcp_sk(sk);

	clk->now_jiffies = tcp_jiffies32();
	clk->now_us = (__u32)tp->tcp_mstamp;
	clk->snd_nxt = tp->snd_nxt;
	clk->snd_una = tp->snd_una;
	clk->pacing_enabled = sk->sk_pacing_status != SK_PACING_NONE;
}

/* The wrapper's CA_EVENT_TX_START: iteration tracking (Mltcp::cwnd_event). */
static __always_inline void iter_tx_start(struct sock *sk, struct mltcp_iter *it, __u32 alg)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct mltcp_params p;
	struct mltcp_stats *s;
	__u32 idle_us = jiffies_to_usecs(tcp_jiffies32() - tp->lsndtime);

	get_params(&p);
	if (mm_iter_tx_start(it, &p, idle_us, tp->srtt_us >> 3, tp->bytes_acked)) {
		s = stats(alg);
		if (s)
			s->iterations += 1;
	}
}

static __always_inline void count_start(__u32 alg)
{
	struct mltcp_stats *s = stats(alg);

	if (s)
		s->flows_started += 1;
}

static __always_inline void count_release(__u32 alg)
{
	struct mltcp_stats *s = stats(alg);

	if (s)
		s->flows_released += 1;
}

static __always_inline void count_loss(__u32 alg)
{
	struct mltcp_stats *s = stats(alg);

	if (s)
		s->losses += 1;
}

/* undo_cwnd of both algorithms: tcp_reno_undo_cwnd. */
static __always_inline __u32 undo_cwnd(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);

	return mm_undo_cwnd(tp->snd_cwnd, tp->prior_cwnd);
}

/* ---- mltcp: Reno with an F-scaled additive increase ---- */

SEC("struct_ops/mltcp_init")
void BPF_PROG(mltcp_init, struct sock *sk)
{
	struct mltcp_reno_state *st = inet_csk_ca(sk);

	__builtin_memset(st, 0, sizeof(*st));
	mm_iter_init(&st->iter, tcp_sk(sk)->bytes_acked);
	count_start(MLTCP_ALG_RENO);
}

SEC("struct_ops/mltcp_release")
void BPF_PROG(mltcp_release, struct sock *sk)
{
	count_release(MLTCP_ALG_RENO);
}

SEC("struct_ops/mltcp_ssthresh")
__u32 BPF_PROG(mltcp_ssthresh, struct sock *sk)
{
	struct mltcp_reno_state *st = inet_csk_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	struct mltcp_params p;
	__u32 f_fx;

	count_loss(MLTCP_ALG_RENO);
	get_params(&p);
	if (p.scale_decrease == 0)
		return mm_reno_ssthresh(tp->snd_cwnd);
	f_fx = mm_scale_fx(&st->iter, &p, tp->bytes_acked);
	return mm_scaled_ssthresh(tp->snd_cwnd, f_fx, p.scale_decrease);
}

SEC("struct_ops/mltcp_undo_cwnd")
__u32 BPF_PROG(mltcp_undo_cwnd, struct sock *sk)
{
	return undo_cwnd(sk);
}

SEC("struct_ops/mltcp_cong_avoid")
void BPF_PROG(mltcp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct mltcp_reno_state *st = inet_csk_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	struct mltcp_window before, w;
	struct mltcp_params p;
	__u32 f_fx;

	get_params(&p);
	f_fx = mm_scale_fx(&st->iter, &p, tp->bytes_acked);
	read_window(tp, &before);
	w = before;
	mm_reno_cong_avoid(&w, acked, is_cwnd_limited(tp), f_fx, mm_slow_start_gain(&p, f_fx));
	apply_window(tp, &before, &w);
}

SEC("struct_ops/mltcp_cwnd_event")
void BPF_PROG(mltcp_cwnd_event, struct sock *sk, int ev)
{
	struct mltcp_reno_state *st = inet_csk_ca(sk);

	if (ev == CA_EVENT_TX_START)
		iter_tx_start(sk, &st->iter, MLTCP_ALG_RENO);
}

SEC(".struct_ops")
struct tcp_congestion_ops mltcp = {
	.init = (void *)mltcp_init,
	.release = (void *)mltcp_release,
	.ssthresh = (void *)mltcp_ssthresh,
	.undo_cwnd = (void *)mltcp_undo_cwnd,
	.cong_avoid = (void *)mltcp_cong_avoid,
	.cwnd_event = (void *)mltcp_cwnd_event,
	.name = "mltcp",
};

/* ---- mltcp_cubic: CUBIC with HyStart whose per-ACK growth is scaled by F ---- */

SEC("struct_ops/mltcp_cubic_init")
void BPF_PROG(mltcp_cubic_init, struct sock *sk)
{
	struct mltcp_cubic_state *st = inet_csk_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	struct mltcp_window before, w;
	struct mltcp_clock clk;

	__builtin_memset(st, 0, sizeof(*st));
	mm_iter_init(&st->iter, tp->bytes_acked);
	read_clock(sk, &clk);
	read_window(tp, &before);
	w = before;
	mm_cubic_init(&st->cubic, &w, &clk);
	apply_window(tp, &before, &w);
	count_start(MLTCP_ALG_CUBIC);
}

SEC("struct_ops/mltcp_cubic_release")
void BPF_PROG(mltcp_cubic_release, struct sock *sk)
{
	count_release(MLTCP_ALG_CUBIC);
}

SEC("struct_ops/mltcp_cubic_ssthresh")
__u32 BPF_PROG(mltcp_cubic_ssthresh, struct sock *sk)
{
	struct mltcp_cubic_state *st = inet_csk_ca(sk);
	struct mltcp_window w;

	count_loss(MLTCP_ALG_CUBIC);
	read_window(tcp_sk(sk), &w);
	return mm_cubic_ssthresh(&st->cubic, &w);
}

SEC("struct_ops/mltcp_cubic_undo_cwnd")
__u32 BPF_PROG(mltcp_cubic_undo_cwnd, struct sock *sk)
{
	return undo_cwnd(sk);
}

SEC("struct_ops/mltcp_cubic_cong_avoid")
void BPF_PROG(mltcp_cubic_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct mltcp_cubic_state *st = inet_csk_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	struct mltcp_window before, w;
	struct mltcp_params p;
	struct mltcp_clock clk;
	__u32 f_fx;
	int limited;

	read_clock(sk, &clk);
	limited = is_cwnd_limited(tp);
	read_window(tp, &before);
	w = before;
	get_params(&p);
	f_fx = mm_scale_fx(&st->iter, &p, tp->bytes_acked);
	mm_cubic_cong_avoid(&st->cubic, kernel_hz(), &w, acked, limited, &clk, f_fx,
			       mm_slow_start_gain(&p, f_fx));
	apply_window(tp, &before, &w);
}

SEC("struct_ops/mltcp_cubic_set_state")
void BPF_PROG(mltcp_cubic_set_state, struct sock *sk, __u8 new_state)
{
	struct mltcp_cubic_state *st = inet_csk_ca(sk);
	struct mltcp_clock clk;

	if (new_state == TCP_CA_Loss) {
		read_clock(sk, &clk);
		mm_cubic_loss_state(&st->cubic, &clk);
	}
}

SEC("struct_ops/mltcp_cubic_cwnd_event")
void BPF_PROG(mltcp_cubic_cwnd_event, struct sock *sk, int ev)
{
	struct mltcp_cubic_state *st = inet_csk_ca(sk);
	struct mltcp_clock clk;

	if (ev != CA_EVENT_TX_START)
		return;
	/* The wrapper's iteration tracking first, then the base's epoch shift, as the module. */
	iter_tx_start(sk, &st->iter, MLTCP_ALG_CUBIC);
	read_clock(sk, &clk);
	mm_cubic_tx_start(&st->cubic, &clk, tcp_sk(sk)->lsndtime);
}

SEC("struct_ops/mltcp_cubic_pkts_acked")
void BPF_PROG(mltcp_cubic_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct mltcp_cubic_state *st = inet_csk_ca(sk);
	struct tcp_sock *tp = tcp_sk(sk);
	struct mltcp_window before, w;
	struct mltcp_clock clk;

	read_clock(sk, &clk);
	read_window(tp, &before);
	w = before;
	mm_cubic_pkts_acked(&st->cubic, kernel_hz(), &w, sample->rtt_us, &clk, sk->sk_pacing_rate,
			       sk->sk_gso_max_size);
	apply_window(tp, &before, &w);
}

SEC(".struct_ops")
struct tcp_congestion_ops mltcp_cubic = {
	.init = (void *)mltcp_cubic_init,
	.release = (void *)mltcp_cubic_release,
	.ssthresh = (void *)mltcp_cubic_ssthresh,
	.undo_cwnd = (void *)mltcp_cubic_undo_cwnd,
	.cong_avoid = (void *)mltcp_cubic_cong_avoid,
	.set_state = (void *)mltcp_cubic_set_state,
	.cwnd_event = (void *)mltcp_cubic_cwnd_event,
	.pkts_acked = (void *)mltcp_cubic_pkts_acked,
	.name = "mltcp_cubic",
};
