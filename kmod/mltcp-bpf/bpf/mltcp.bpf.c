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
 * The agent datapath (`mltcp` and `mltcp_cubic`): while ccp-agent's `bpf` IPC backend is
 * attached (mltcp_agent's heartbeat is fresh), new flows of either algorithm are offered to it
 * through the ring buffer mltcp_events (the CREATE names the algorithm), and a flow the agent has
 * installed its slot program on (an entry in mltcp_ctl) runs that program's fixed C form
 * (mltcp_slot.h) instead of MLTCP's growth, as tcp_mltcp's CCP datapath runs it (kmod/ccp.rs):
 * per-slot reports, the program's window, the agent's rate as the pacing limit
 * (SO_MAX_PACING_RATE) and its class as DSCP (IP_TOS / IPV6_TCLASS, and SO_PRIORITY). Without a
 * fresh heartbeat, or a flow whose program run fails, the flow is plain `mltcp` (or
 * `mltcp_cubic`) again, its pacing limit and marking restored.
 *
 * What the kernel's BPF struct_ops cannot do that the module does: get_info (bpf_tcp_ca refuses
 * it, so `ss -i`/mltcp-stat show no MLTCP block), any CCP program other than the agent's slot
 * program, and mltcp_dctcp.
 */
#include "mltcp_kern.h"
#include "mltcp_math.h"
#include "mltcp_slot.h"
#include "mltcp_agent.h"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

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

/* ---- the agent datapath ---- */

/* Records to the agent: struct mltcp_rec_* of mltcp_agent.h. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} mltcp_events SEC(".maps");

/* The agent's attach entry (struct mltcp_agent_attach), written by the backend. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mltcp_agent_attach);
} mltcp_agent SEC(".maps");

/* The datapath's counters per CPU (struct mltcp_agent_cnt). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct mltcp_agent_cnt);
} mltcp_agent_cnt SEC(".maps");

/* The agent's controls per flow id (struct mltcp_agent_ctl), written by the backend. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct mltcp_agent_ctl);
} mltcp_ctl SEC(".maps");

/* One offered flow's datapath state (tcp_mltcp's FlowExtra and the CCP flow's registers). */
struct mltcp_agent_flow {
	struct mltcp_slot_state st;	/* the program's registers */
	struct mltcp_rec_measure rep;	/* the report being sent */
	__u64 last_bytes_acked;		/* tp->bytes_acked at the last ACK, bytes */
	__u64 cwnd_bytes;		/* the window last enforced, bytes (0: none yet) */
	__u64 rate;			/* the rate last enforced, bytes/s (0: none) */
	__u32 last_lost;		/* tp->lost at the last ACK */
	__u32 sid;
	__u32 rate_gen, cwnd_gen;	/* the control entry's generations applied */
	__u32 applied_rate;		/* SO_MAX_PACING_RATE in force, bytes/s (0: never set) */
	__u32 own_priority;		/* sk_priority before the agent's class */
	__u8 started;			/* the program runs (its registers are initialised) */
	__u8 controlled;		/* the agent's window/rate/class are in force */
	__u8 dead;			/* a program run failed: plain mltcp for good */
	__u8 class_applied;		/* the agent's class is on the socket */
	__u8 applied_dscp;
	__u8 own_tos;			/* the socket's TOS / traffic class before the agent's */
	__u8 pad[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct mltcp_agent_flow);
} mltcp_flows SEC(".maps");

static __always_inline struct mltcp_agent_cnt *agent_cnt(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&mltcp_agent_cnt, &zero);
}

/* Whether an agent is attached: its heartbeat is fresh. */
static __always_inline int agent_up(void)
{
	__u32 zero = 0;
	struct mltcp_agent_attach *a = bpf_map_lookup_elem(&mltcp_agent, &zero);
	__u64 now;

	if (!a || a->heartbeat_ns == 0)
		return 0;
	now = bpf_ktime_get_ns();
	return now >= a->heartbeat_ns && now - a->heartbeat_ns < a->timeout_ns;
}

/* Offers a new flow to the agent (tcp_mltcp's flow_init): a flow id, the per-socket state and
 * the CREATE record. A flow that cannot be offered stays plain mltcp. */
static __always_inline void agent_flow_init(struct sock *sk, __u32 alg)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct mltcp_agent_cnt *cnt;
	struct mltcp_agent_flow *f;
	struct mltcp_rec_create *rec;
	__u32 sid;

	if (!agent_up())
		return;
	cnt = agent_cnt();
	if (!cnt)
		return;
	f = bpf_sk_storage_get(&mltcp_flows, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!f)
		return;
	__builtin_memset(f, 0, sizeof(*f));
	/* Unique without atomics: this CPU's count in the high 24 bits, the CPU in the low 8
	 * (ids repeat after 2^24 flows of one CPU, or with more than 256 CPUs, long after the
	 * flows they named have closed in practice; never 0). */
	cnt->next_sid += 1;
	sid = (cnt->next_sid << 8) | (bpf_get_smp_processor_id() & 0xff);
	if (sid == 0) {
		cnt->next_sid += 1;
		sid = cnt->next_sid << 8;
	}
	f->sid = sid;
	f->last_bytes_acked = tp->bytes_acked;
	f->last_lost = tp->lost;
	rec = bpf_ringbuf_reserve(&mltcp_events, sizeof(*rec), 0);
	if (!rec) {
		cnt->drops += 1;
		f->dead = 1;
		return;
	}
	rec->kind = MLTCP_REC_CREATE;
	rec->sid = sid;
	rec->mss = tp->mss_cache;
	rec->init_cwnd = tp->snd_cwnd * tp->mss_cache;
	rec->family = sk->__sk_common.skc_family;
	if (rec->family == MLTCP_AF_INET) {
		rec->src_ip = sk->__sk_common.skc_rcv_saddr;
		rec->dst_ip = sk->__sk_common.skc_daddr;
	} else {
		rec->src_ip = 0;
		rec->dst_ip = 0;
	}
	rec->src_port = bpf_htons(sk->__sk_common.skc_num);
	rec->dst_port = sk->__sk_common.skc_dport;
	rec->alg = alg;
	bpf_ringbuf_submit(rec, 0);
}

/* The flow released the algorithm: the closing record. */
static __always_inline void agent_flow_release(struct sock *sk)
{
	struct mltcp_agent_flow *f = bpf_sk_storage_get(&mltcp_flows, sk, 0, 0);
	struct mltcp_rec_close rec;
	struct mltcp_agent_cnt *cnt;

	if (!f || f->sid == 0)
		return;
	rec.kind = MLTCP_REC_CLOSE;
	rec.sid = f->sid;
	f->sid = 0;
	bpf_map_delete_elem(&mltcp_ctl, &rec.sid);
	if (bpf_ringbuf_output(&mltcp_events, &rec, sizeof(rec), 0)) {
		cnt = agent_cnt();
		if (cnt)
			cnt->drops += 1;
	}
}

static __always_inline int set_int_opt(struct sock *sk, int level, int opt, int val)
{
	return bpf_setsockopt(sk, level, opt, &val, sizeof(val));
}

/* Marks the flow with the agent's class as tcp_mltcp's apply_class: TOS (IPv6 traffic class)
 * DSCP << 2, sk_priority the DSCP's precedence (RFC 2474, Sec. 4.2.2.2); the socket's own are
 * saved first. `dscp` MLTCP_NO_CLASS gives the socket back its own. */
static __always_inline void agent_set_class(struct sock *sk, struct mltcp_agent_flow *f, __u32 dscp)
{
	int level = sk->__sk_common.skc_family == MLTCP_AF_INET6 ? MLTCP_SOL_IPV6 : MLTCP_SOL_IP;
	int opt = level == MLTCP_SOL_IPV6 ? MLTCP_IPV6_TCLASS : MLTCP_IP_TOS;

	if (dscp > 63) {
		if (f->class_applied) {
			set_int_opt(sk, level, opt, f->own_tos);
			set_int_opt(sk, MLTCP_SOL_SOCKET, MLTCP_SO_PRIORITY, f->own_priority);
			f->class_applied = 0;
		}
		return;
	}
	if (f->class_applied && f->applied_dscp == dscp)
		return;
	if (!f->class_applied) {
		f->own_tos = ((struct inet_sock *)sk)->tos;
		f->own_priority = sk->sk_priority;
	}
	set_int_opt(sk, level, opt, (int)(dscp << 2));
	set_int_opt(sk, MLTCP_SOL_SOCKET, MLTCP_SO_PRIORITY, (int)(dscp >> 3));
	f->class_applied = 1;
	f->applied_dscp = dscp;
}

/* Gives the flow back to plain mltcp (tcp_mltcp's release_control): no pacing limit, the
 * socket's own marking. */
static __always_inline void agent_release_control(struct sock *sk, struct mltcp_agent_flow *f)
{
	if (!f->controlled)
		return;
	if (f->applied_rate) {
		/* ~0U: no limit (sk_setsockopt, net/core/sock.c). */
		set_int_opt(sk, MLTCP_SOL_SOCKET, MLTCP_SO_MAX_PACING_RATE, -1);
		f->applied_rate = 0;
	}
	agent_set_class(sk, f, MLTCP_NO_CLASS);
	f->controlled = 0;
}

/* The agent's rate as the pacing limit (bpf_setsockopt accepts SO_MAX_PACING_RATE as an int:
 * rates above 2^32 - 2 bytes/s are clamped there) and its class. */
static __always_inline void agent_take_control(struct sock *sk, struct mltcp_agent_flow *f,
					       __u32 dscp)
{
	__u32 r;

	if (f->rate) {
		r = f->rate > 0xfffffffeULL ? 0xfffffffeU : (__u32)f->rate;
		if (r != f->applied_rate && set_int_opt(sk, MLTCP_SOL_SOCKET,
							MLTCP_SO_MAX_PACING_RATE, (int)r) == 0)
			f->applied_rate = r;
	} else if (f->applied_rate) {
		set_int_opt(sk, MLTCP_SOL_SOCKET, MLTCP_SO_MAX_PACING_RATE, -1);
		f->applied_rate = 0;
	}
	f->controlled = 1;
	agent_set_class(sk, f, dscp);
}

/* tcp_mltcp's delivery_rate_bps: the last rate sample, bytes/s. */
static __always_inline __u64 delivery_rate(struct tcp_sock *tp, __u64 mss)
{
	__u32 interval = tp->rate_interval_us;

	if (interval == 0)
		return 0;
	return sat_mul_u64(sat_mul_u64(tp->rate_delivered, mss), 1000000) / interval;
}

/* One ACK of an offered flow (tcp_mltcp's on_ack): returns 1 when the agent's program ran and
 * set the window (plain mltcp's growth is then skipped), 0 when plain mltcp runs. */
static __always_inline int agent_on_ack(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct mltcp_agent_flow *f = bpf_sk_storage_get(&mltcp_flows, sk, 0, 0);
	struct mltcp_agent_ctl *ctl;
	struct mltcp_slot_ctl c;
	struct mltcp_slot_ack a;
	struct mltcp_agent_cnt *cnt;
	__u64 mss, now, segs, clamp;
	__u32 sid, lost;
	int rc;

	if (!f || f->sid == 0)
		return 0;
	if (f->dead || !agent_up()) {
		agent_release_control(sk, f);
		return 0;
	}
	mss = tp->mss_cache ? tp->mss_cache : 1;
	now = tp->tcp_mstamp;
	lost = tp->lost;
	a.bytes_acked = tp->bytes_acked - f->last_bytes_acked;
	a.lost_pkts = lost - f->last_lost;
	a.rtt_us = tp->srtt_us >> 3;
	a.rate_in = delivery_rate(tp, mss);
	a.rate_out = a.rate_in;
	a.now_us = now;
	a.in_flight = (__u64)tp->packets_out - (tp->sacked_out + tp->lost_out) + tp->retrans_out;
	a.in_flight &= 0xffffffffULL;	/* tcp_packets_in_flight's u32 arithmetic */
	f->last_bytes_acked = tp->bytes_acked;
	f->last_lost = lost;
	sid = f->sid;
	ctl = bpf_map_lookup_elem(&mltcp_ctl, &sid);
	if (!ctl) {
		/* Offered, no program installed yet (CCP's NoProgram). */
		agent_release_control(sk, f);
		return 0;
	}
	f->st.cwnd = f->cwnd_bytes ? f->cwnd_bytes : (__u64)tp->snd_cwnd * mss;
	f->st.rate = f->rate;
	if (!f->started) {
		mm_slot_start(&f->st, now);
		f->started = 1;
	}
	if (ctl->cwnd_gen != f->cwnd_gen) {
		f->cwnd_gen = ctl->cwnd_gen;
		f->st.cwnd = ctl->cwnd;
	}
	if (ctl->rate_gen != f->rate_gen) {
		f->rate_gen = ctl->rate_gen;
		f->st.rate = ctl->rate;
	}
	c.slot_us = ctl->slot_us;
	c.cwnd_cap = ctl->cwnd_cap;
	c.scavenge_us = ctl->scavenge_us;
	rc = mm_slot_run(&f->st, &c, &a, now, (struct mltcp_slot_report *)f->rep.fields);
	if (!rc) {
		f->dead = 1;
		cnt = agent_cnt();
		if (cnt)
			cnt->dead += 1;
		agent_release_control(sk, f);
		return 0;
	}
	if (f->st.cwnd > 0) {
		f->cwnd_bytes = f->st.cwnd;
		segs = f->st.cwnd / mss;
		clamp = tp->snd_cwnd_clamp ? tp->snd_cwnd_clamp : 1;
		if (segs < 1)
			segs = 1;
		if (segs > clamp)
			segs = clamp;
		tp->snd_cwnd = (__u32)segs;
	}
	if (f->st.rate)
		f->rate = f->st.rate;
	agent_take_control(sk, f, ctl->dscp);
	if (rc & MLTCP_SLOT_REPORT) {
		f->rep.kind = MLTCP_REC_MEASURE;
		f->rep.sid = sid;
		if (bpf_ringbuf_output(&mltcp_events, &f->rep, sizeof(f->rep), 0)) {
			cnt = agent_cnt();
			if (cnt)
				cnt->drops += 1;
		}
	}
	return 1;
}

/* ---- mltcp: Reno with an F-scaled additive increase ---- */

SEC("struct_ops/mltcp_init")
void BPF_PROG(mltcp_init, struct sock *sk)
{
	struct mltcp_reno_state *st = inet_csk_ca(sk);

	__builtin_memset(st, 0, sizeof(*st));
	mm_iter_init(&st->iter, tcp_sk(sk)->bytes_acked);
	count_start(MLTCP_ALG_RENO);
	agent_flow_init(sk, MLTCP_REC_ALG_RENO);
}

SEC("struct_ops/mltcp_release")
void BPF_PROG(mltcp_release, struct sock *sk)
{
	count_release(MLTCP_ALG_RENO);
	agent_flow_release(sk);
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

	if (agent_on_ack(sk))
		return;
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
	agent_flow_init(sk, MLTCP_REC_ALG_CUBIC);
}

SEC("struct_ops/mltcp_cubic_release")
void BPF_PROG(mltcp_cubic_release, struct sock *sk)
{
	count_release(MLTCP_ALG_CUBIC);
	agent_flow_release(sk);
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

	/* Under the agent's program the window is the program's, as for `mltcp` (CUBIC's epoch and
	 * HyStart state stay as they were, and resume when the flow falls back). */
	if (agent_on_ack(sk))
		return;
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
