// SPDX-License-Identifier: GPL-2.0-only OR MIT
/*
 * shim/harness.c: the user-space harness of the differential test. It compiles the BPF program
 * source itself (kmod/mltcp-bpf/bpf/mltcp.bpf.c, behind the shim headers of shim/bpf/), backs
 * its maps, kconfig value and clock with plain globals, and exposes a flat socket and one
 * function per callback, called through the program's struct_ops tables (`mltcp`,
 * `mltcp_cubic`) exactly as the kernel would. The Rust side is src/lib.rs.
 */
#include <stdlib.h>
#include <string.h>

#include "mltcp.bpf.c"
#include "mltcp_slot.h"

unsigned long CONFIG_HZ;
static __u64 dt_jiffies;
static struct mltcp_params dt_params;
static struct mltcp_stats dt_stats[2];

static void *agent_lookup(void *map, __u32 k);

void *bpf_map_lookup_elem(void *map, const void *key)
{
	__u32 k = *(const __u32 *)key;

	if (map == (void *)&mltcp_params)
		return k == 0 ? &dt_params : NULL;
	if (map == (void *)&mltcp_stats)
		return k < 2 ? &dt_stats[k] : NULL;
	return agent_lookup(map, k);
}

__u64 bpf_jiffies64(void)
{
	return dt_jiffies;
}

/* The agent datapath's helpers and maps: an attach entry and counters, a few control entries,
 * one storage per socket (a side table), the ring buffer as a byte log of records, and a log of
 * setsockopt calls; all empty (no agent attached) until a test sets them. */
static struct mltcp_agent_attach dt_attach;
static struct mltcp_agent_cnt dt_cnt;
static __u64 dt_ktime;
#define DT_CTLS 8
static struct { __u32 sid; int used; struct mltcp_agent_ctl v; } dt_ctls[DT_CTLS];
#define DT_SOCKS 8
static struct { void *sk; struct mltcp_agent_flow *f; } dt_storage[DT_SOCKS];
static unsigned char dt_ring[1 << 16];
static __u32 dt_ring_len;
static __u64 dt_ring_tmp[64];
#define DT_OPTS 64
static int dt_opts[DT_OPTS][3];
static __u32 dt_nopts;

static void *agent_lookup(void *map, __u32 k)
{
	int i;

	if (map == (void *)&mltcp_agent)
		return k == 0 && dt_attach.timeout_ns ? &dt_attach : NULL;
	if (map == (void *)&mltcp_agent_cnt)
		return k == 0 ? &dt_cnt : NULL;
	if (map == (void *)&mltcp_ctl)
		for (i = 0; i < DT_CTLS; i++)
			if (dt_ctls[i].used && dt_ctls[i].sid == k)
				return &dt_ctls[i].v;
	return NULL;
}

long bpf_map_delete_elem(void *map, const void *key)
{
	__u32 k = *(const __u32 *)key;
	int i;

	if (map == (void *)&mltcp_ctl)
		for (i = 0; i < DT_CTLS; i++)
			if (dt_ctls[i].used && dt_ctls[i].sid == k) {
				dt_ctls[i].used = 0;
				return 0;
			}
	return -1;
}

__u64 bpf_ktime_get_ns(void)
{
	return dt_ktime;
}

__u32 bpf_get_smp_processor_id(void)
{
	return 0;
}

void *bpf_sk_storage_get(void *map, void *sk, void *value, __u64 flags)
{
	int i;

	for (i = 0; i < DT_SOCKS; i++)
		if (dt_storage[i].sk == sk)
			return dt_storage[i].f;
	if (!(flags & BPF_SK_STORAGE_GET_F_CREATE))
		return NULL;
	for (i = 0; i < DT_SOCKS; i++)
		if (!dt_storage[i].sk) {
			dt_storage[i].f = calloc(1, sizeof(struct mltcp_agent_flow));
			if (!dt_storage[i].f)
				return NULL;
			dt_storage[i].sk = sk;
			return dt_storage[i].f;
		}
	return NULL;
}

long bpf_ringbuf_output(void *ringbuf, void *data, __u64 size, __u64 flags)
{
	if (size > 0xffff || dt_ring_len + 4 + size > sizeof(dt_ring))
		return -1;
	memcpy(dt_ring + dt_ring_len, &(__u32){ (__u32)size }, 4);
	memcpy(dt_ring + dt_ring_len + 4, data, size);
	dt_ring_len += 4 + (__u32)size;
	return 0;
}

void *bpf_ringbuf_reserve(void *ringbuf, __u64 size, __u64 flags)
{
	return size <= sizeof(dt_ring_tmp) ? dt_ring_tmp : NULL;
}

void bpf_ringbuf_submit(void *data, __u64 flags)
{
	/* Only the create record is reserved. */
	bpf_ringbuf_output(NULL, data, sizeof(struct mltcp_rec_create), 0);
}

long bpf_setsockopt(void *sk, int level, int optname, void *optval, int optlen)
{
	if (optlen != sizeof(int) || dt_nopts >= DT_OPTS)
		return -1;
	dt_opts[dt_nopts][0] = level;
	dt_opts[dt_nopts][1] = optname;
	memcpy(&dt_opts[dt_nopts][2], optval, sizeof(int));
	dt_nopts++;
	return 0;
}

/* The test's side of the agent maps (tests/agent.rs). */
void dt_agent_reset(void)
{
	int i;

	memset(&dt_attach, 0, sizeof(dt_attach));
	memset(&dt_cnt, 0, sizeof(dt_cnt));
	memset(dt_ctls, 0, sizeof(dt_ctls));
	for (i = 0; i < DT_SOCKS; i++) {
		free(dt_storage[i].f);
		dt_storage[i].f = NULL;
		dt_storage[i].sk = NULL;
	}
	dt_ring_len = 0;
	dt_nopts = 0;
	dt_ktime = 0;
}

void dt_agent_set(__u64 heartbeat_ns, __u64 timeout_ns, __u64 ktime_ns)
{
	dt_attach.heartbeat_ns = heartbeat_ns;
	dt_attach.timeout_ns = timeout_ns;
	dt_ktime = ktime_ns;
}

/* Writes flow sid's control entry (CTL_LEN bytes in mltcp_agent.h's layout); -1 when full. */
int dt_agent_ctl(__u32 sid, const void *v)
{
	int i, free_i = -1;

	for (i = 0; i < DT_CTLS; i++) {
		if (dt_ctls[i].used && dt_ctls[i].sid == sid) {
			memcpy(&dt_ctls[i].v, v, sizeof(dt_ctls[i].v));
			return 0;
		}
		if (!dt_ctls[i].used && free_i < 0)
			free_i = i;
	}
	if (free_i < 0)
		return -1;
	dt_ctls[free_i].used = 1;
	dt_ctls[free_i].sid = sid;
	memcpy(&dt_ctls[free_i].v, v, sizeof(dt_ctls[free_i].v));
	return 0;
}

/* Copies out the ring log (u32 length + record, repeated) and empties it; returns its length. */
__u32 dt_agent_ring(void *out, __u32 cap)
{
	__u32 n = dt_ring_len < cap ? dt_ring_len : cap;

	memcpy(out, dt_ring, n);
	dt_ring_len = 0;
	return n;
}

/* Copies out the setsockopt log ((level, optname, value) triples) and empties it. */
__u32 dt_agent_opts(int *out, __u32 cap)
{
	__u32 n = dt_nopts < cap ? dt_nopts : cap;

	memcpy(out, dt_opts, n * sizeof(dt_opts[0]));
	dt_nopts = 0;
	return n;
}

/* The socket fields only the agent datapath reads. */
void dt_sock_set_agent(struct tcp_sock *tp, __u32 mss, __u32 lost, __u32 packets_out,
		       __u32 family, __u32 saddr, __u32 daddr, __u16 sport, __u16 dport_be)
{
	struct sock *sk = (struct sock *)tp;

	tp->mss_cache = mss;
	tp->lost = lost;
	tp->packets_out = packets_out;
	sk->__sk_common.skc_family = (unsigned short)family;
	sk->__sk_common.skc_rcv_saddr = saddr;
	sk->__sk_common.skc_daddr = daddr;
	sk->__sk_common.skc_num = sport;
	sk->__sk_common.skc_dport = dport_be;
}

/* The socket fields the programs read or write, flat (the Rust `Fields`, same order). */
struct dt_fields {
	__u32 cwnd, cwnd_cnt, ssthresh, cwnd_clamp, prior_cwnd;
	__u32 snd_nxt, snd_una, lsndtime, srtt_us, max_packets_out;
	__u32 is_cwnd_limited, pacing_status, gso_max_size, pad;
	__u64 bytes_acked, tcp_mstamp, pacing_rate;
};

void dt_set_clock(unsigned long hz, __u64 jiffies)
{
	CONFIG_HZ = hz;
	dt_jiffies = jiffies;
}

/* Sets the parameter map's value from n u32 values in struct mltcp_params's field order;
 * returns -1 (and changes nothing) when n is not its number of fields. */
int dt_set_params(const __u32 *v, __u32 n)
{
	if (n * sizeof(__u32) != sizeof(dt_params))
		return -1;
	memcpy(&dt_params, v, sizeof(dt_params));
	return 0;
}

void dt_get_stats(__u32 alg, struct mltcp_stats *out)
{
	*out = dt_stats[alg & 1];
}

void dt_reset_stats(void)
{
	memset(dt_stats, 0, sizeof(dt_stats));
}

struct tcp_sock *dt_sock_new(void)
{
	return calloc(1, sizeof(struct tcp_sock));
}

void dt_sock_free(struct tcp_sock *tp)
{
	free(tp);
}

void dt_sock_set(struct tcp_sock *tp, const struct dt_fields *f)
{
	struct sock *sk = (struct sock *)tp;

	tp->snd_cwnd = f->cwnd;
	tp->snd_cwnd_cnt = f->cwnd_cnt;
	tp->snd_ssthresh = f->ssthresh;
	tp->snd_cwnd_clamp = f->cwnd_clamp;
	tp->prior_cwnd = f->prior_cwnd;
	tp->snd_nxt = f->snd_nxt;
	tp->snd_una = f->snd_una;
	tp->lsndtime = f->lsndtime;
	tp->srtt_us = f->srtt_us;
	tp->max_packets_out = f->max_packets_out;
	tp->is_cwnd_limited = f->is_cwnd_limited & 1;
	tp->bytes_acked = f->bytes_acked;
	tp->tcp_mstamp = f->tcp_mstamp;
	sk->sk_pacing_status = f->pacing_status;
	sk->sk_pacing_rate = f->pacing_rate;
	sk->sk_gso_max_size = f->gso_max_size;
}

void dt_sock_get(const struct tcp_sock *tp, struct dt_fields *f)
{
	f->cwnd = tp->snd_cwnd;
	f->cwnd_cnt = tp->snd_cwnd_cnt;
	f->ssthresh = tp->snd_ssthresh;
}

const void *dt_sock_priv(const struct tcp_sock *tp)
{
	return tp->inet_conn.icsk_ca_priv;
}

static const struct tcp_congestion_ops *ops(__u32 alg)
{
	return alg == MLTCP_ALG_CUBIC ? &mltcp_cubic : &mltcp;
}

/* Fills *name (16 bytes) with the algorithm's name. */
void dt_name(__u32 alg, char *name)
{
	memcpy(name, ops(alg)->name, sizeof(ops(alg)->name));
}

void dt_init(__u32 alg, struct tcp_sock *tp)
{
	ops(alg)->init((struct sock *)tp);
}

void dt_release(__u32 alg, struct tcp_sock *tp)
{
	ops(alg)->release((struct sock *)tp);
}

__u32 dt_ssthresh(__u32 alg, struct tcp_sock *tp)
{
	return ops(alg)->ssthresh((struct sock *)tp);
}

__u32 dt_undo_cwnd(__u32 alg, struct tcp_sock *tp)
{
	return ops(alg)->undo_cwnd((struct sock *)tp);
}

void dt_cong_avoid(__u32 alg, struct tcp_sock *tp, __u32 ack, __u32 acked)
{
	ops(alg)->cong_avoid((struct sock *)tp, ack, acked);
}

void dt_cwnd_event(__u32 alg, struct tcp_sock *tp, int ev)
{
	if (ops(alg)->cwnd_event)
		ops(alg)->cwnd_event((struct sock *)tp, ev);
}

void dt_set_state(__u32 alg, struct tcp_sock *tp, __u8 state)
{
	if (ops(alg)->set_state)
		ops(alg)->set_state((struct sock *)tp, state);
}

void dt_pkts_acked(__u32 alg, struct tcp_sock *tp, __u32 pkts, __s32 rtt_us)
{
	struct ack_sample s = { .pkts_acked = pkts, .rtt_us = rtt_us, .in_flight = 0 };

	if (ops(alg)->pkts_acked)
		ops(alg)->pkts_acked((struct sock *)tp, &s);
}

/* One invocation of the slot program's C rule (mltcp_slot.h), for tests/slot.rs. */
int dt_slot_run(struct mltcp_slot_state *s, const struct mltcp_slot_ctl *c,
		const struct mltcp_slot_ack *a, __u64 clock_us, struct mltcp_slot_report *out)
{
	return mm_slot_run(s, c, a, clock_us, out);
}

void dt_slot_start(struct mltcp_slot_state *s, __u64 clock_us)
{
	mm_slot_start(s, clock_us);
}
