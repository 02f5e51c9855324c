/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * mltcp_kern.h: the few kernel types and constants the MLTCP struct_ops programs touch, written
 * here by hand (no vmlinux.h). Under the BPF target every struct is marked
 * preserve_access_index, so clang records each field access as a CO-RE relocation and libbpf
 * rewrites the offsets from the running kernel's BTF at load time: the field order and padding
 * below do not have to match any kernel, only the type and field names do (include/net/sock.h,
 * include/net/inet_connection_sock.h, include/linux/tcp.h, include/net/tcp.h). Compiled for user
 * space (the differential test) the same structs are plain C structs.
 */
#ifndef MLTCP_KERN_H
#define MLTCP_KERN_H

#include <linux/types.h>

#if defined(__bpf__)
#define MLTCP_CORE __attribute__((preserve_access_index))
#else
#define MLTCP_CORE
#endif

/* include/net/sock.h: the flow's addresses (in anonymous unions there; CO-RE finds members
 * of anonymous structs and unions by name), for the agent datapath's CREATE record. */
struct sock_common {
	__be32 skc_daddr;		/* network order */
	__be32 skc_rcv_saddr;		/* network order */
	__be16 skc_dport;		/* network order */
	__u16 skc_num;			/* host order */
	unsigned short skc_family;	/* AF_INET, AF_INET6 */
} MLTCP_CORE;

/* include/net/sock.h: the fields of struct sock the programs read. */
struct sock {
	struct sock_common __sk_common;
	__u32 sk_pacing_status;		/* enum sk_pacing; SK_PACING_NONE = 0 */
	unsigned long sk_pacing_rate;	/* bytes per second */
	unsigned int sk_gso_max_size;	/* bytes */
	__u32 sk_priority;
} MLTCP_CORE;

/* include/net/inet_sock.h */
struct inet_sock {
	struct sock sk;
	__u8 tos;			/* IP_TOS: DSCP << 2 | ECN */
} MLTCP_CORE;

/* include/net/inet_connection_sock.h: the congestion control's private area (104 bytes on 6.1
 * and 6.12; the state structs are checked against MLTCP_ICSK_CA_PRIV_SIZE at build time). */
struct inet_connection_sock {
	struct inet_sock icsk_inet;
	__u64 icsk_ca_priv[13];
} MLTCP_CORE;

/* include/linux/tcp.h */
struct tcp_sock {
	struct inet_connection_sock inet_conn;
	__u32 snd_nxt;
	__u64 bytes_acked;
	__u32 snd_una;
	__u32 lsndtime;
	__u8 is_cwnd_limited:1;
	__u64 tcp_mstamp;
	__u32 srtt_us;			/* smoothed RTT << 3, µs */
	__u32 max_packets_out;
	__u32 snd_ssthresh;
	__u32 snd_cwnd;
	__u32 snd_cwnd_cnt;
	__u32 snd_cwnd_clamp;
	__u32 prior_cwnd;
	__u32 mss_cache;		/* bytes */
	__u32 lost;			/* packets lost, total */
	__u32 packets_out;
	__u32 sacked_out;
	__u32 lost_out;
	__u32 retrans_out;
	__u32 rate_delivered;		/* packets of the last rate sample */
	__u32 rate_interval_us;		/* µs of the last rate sample */
} MLTCP_CORE;

/* include/net/tcp.h */
struct ack_sample {
	__u32 pkts_acked;
	__s32 rtt_us;
	__u32 in_flight;
} MLTCP_CORE;

/* include/net/tcp.h: the callbacks struct_ops fills in, matched to the kernel's
 * struct tcp_congestion_ops by member name when libbpf loads the struct_ops map. */
struct tcp_congestion_ops {
	__u32 (*ssthresh)(struct sock *sk);
	void (*cong_avoid)(struct sock *sk, __u32 ack, __u32 acked);
	void (*set_state)(struct sock *sk, __u8 new_state);
	void (*cwnd_event)(struct sock *sk, int ev);
	void (*pkts_acked)(struct sock *sk, const struct ack_sample *sample);
	__u32 (*undo_cwnd)(struct sock *sk);
	void (*init)(struct sock *sk);
	void (*release)(struct sock *sk);
	char name[16];			/* TCP_CA_NAME_MAX */
	__u32 flags;
} MLTCP_CORE;

/* enum tcp_ca_event (include/net/tcp.h): first transmit when no packets are in flight. */
#define CA_EVENT_TX_START 0
/* enum tcp_ca_state (include/uapi/linux/tcp.h): RTO recovery. */
#define TCP_CA_Loss 4
/* enum sk_pacing (include/net/sock.h) */
#define SK_PACING_NONE 0
/* include/linux/socket.h, include/uapi/asm-generic/socket.h, include/uapi/linux/in.h,
 * include/uapi/linux/in6.h: what the agent datapath sets through bpf_setsockopt. */
#define MLTCP_AF_INET 2
#define MLTCP_AF_INET6 10
#define MLTCP_SOL_SOCKET 1
#define MLTCP_SOL_IP 0
#define MLTCP_SOL_IPV6 41
#define MLTCP_SO_PRIORITY 12
#define MLTCP_SO_MAX_PACING_RATE 47
#define MLTCP_IP_TOS 1
#define MLTCP_IPV6_TCLASS 67

static __always_inline struct tcp_sock *tcp_sk(struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline void *inet_csk_ca(struct sock *sk)
{
	return (void *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

#endif
