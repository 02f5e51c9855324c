/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * mltcp_agent.h: the layouts the BPF agent datapath (mltcp.bpf.c) shares with ccp-agent's `bpf`
 * IPC backend (ccp-agent/ccp-ipc/src/bpf.rs): the ring buffer's records, the agent's attach
 * entry and the per-flow control entry. All fields are host-endian; the Rust side reads and
 * writes the same offsets (its constants are checked against the sizes asserted here by
 * ccp-ipc's tests, and the records are decoded by length). Map names (at most 15 characters,
 * found again through the kernel's map IDs): mltcp_events, mltcp_agent, mltcp_ctl.
 */
#ifndef MLTCP_AGENT_H
#define MLTCP_AGENT_H

#include <linux/types.h>
#include "mltcp_slot.h"

/* Record kinds. */
#define MLTCP_REC_CREATE 1
#define MLTCP_REC_MEASURE 2
#define MLTCP_REC_CLOSE 3

/* The algorithm a CREATE names (the CCP CREATE's algorithm name). */
#define MLTCP_REC_ALG_RENO 0	/* "mltcp" */
#define MLTCP_REC_ALG_CUBIC 1	/* "mltcp_cubic" */

/* A new flow under `mltcp` or `mltcp_cubic` while an agent is attached (from init): the CCP
 * CREATE. */
struct mltcp_rec_create {
	__u32 kind;		/* MLTCP_REC_CREATE */
	__u32 sid;		/* the flow's id (never 0), the CCP socket id */
	__u32 init_cwnd;	/* bytes */
	__u32 mss;		/* bytes */
	__u32 src_ip;		/* IPv4, network order as the socket keeps it (0 for IPv6) */
	__u32 dst_ip;
	__u32 src_port;		/* network order (as tcp_mltcp's CREATE) */
	__u32 dst_port;
	__u32 family;		/* AF_INET 2, AF_INET6 10 */
	__u32 alg;		/* MLTCP_REC_ALG_RENO (mltcp) or MLTCP_REC_ALG_CUBIC (mltcp_cubic) */
};

/* One report of the slot program (mm_slot_run): the CCP MEASURE. */
struct mltcp_rec_measure {
	__u32 kind;		/* MLTCP_REC_MEASURE */
	__u32 sid;
	__u64 fields[MLTCP_SLOT_REPORT_FIELDS];	/* struct mltcp_slot_report, in order */
};

/* The flow released the algorithm (closed, or another congestion control selected): the CCP
 * closing MEASURE. */
struct mltcp_rec_close {
	__u32 kind;		/* MLTCP_REC_CLOSE */
	__u32 sid;
};

/* mltcp_agent[0], written by the backend: flows are offered to the agent and follow its
 * controls only while heartbeat_ns is within timeout_ns of bpf_ktime_get_ns (CLOCK_MONOTONIC);
 * 0 = detached. A killed agent stops refreshing it, so its flows return to plain mltcp within
 * timeout_ns. The datapath's own counters live in mltcp_agent_cnt, so the backend's writes of
 * this entry clobber nothing. */
struct mltcp_agent_attach {
	__u64 heartbeat_ns;	/* CLOCK_MONOTONIC of the agent's last refresh, ns; 0 = detached */
	__u64 timeout_ns;	/* how long a heartbeat holds, ns */
};

/* mltcp_agent_cnt[0], per CPU: the datapath's counters. */
struct mltcp_agent_cnt {
	__u32 next_sid;		/* flows offered on this CPU (the high 24 bits of their ids) */
	__u32 drops;		/* records the ring buffer had no room for */
	__u32 dead;		/* flows whose slot program stopped (back to plain mltcp for good) */
	__u32 pad;
};

/* mltcp_ctl[sid], written by the backend: the agent's controls of one flow. Its presence means
 * the agent installed the slot program on the flow (CHANGE_PROG). Cwnd and Rate are applied
 * once per change of their generation, as CCP stages them; the Control registers are read at
 * every ACK. */
struct mltcp_agent_ctl {
	__u64 rate;		/* Rate, bytes/s (pacing limit; 0 = none) */
	__u64 cwnd;		/* Cwnd, bytes */
	__u64 slot_us;		/* Control.slot_us, µs */
	__u64 cwnd_cap;		/* Control.cwnd_cap, bytes */
	__u64 scavenge_us;	/* Control.scavenge_us, µs */
	__u32 rate_gen;		/* changes when the agent sets Rate */
	__u32 cwnd_gen;		/* changes when the agent sets Cwnd */
	__u32 dscp;		/* the traffic class, 0..63; MLTCP_NO_CLASS: the socket's own */
	__u32 pad;
};

#define MLTCP_NO_CLASS 0xff

_Static_assert(sizeof(struct mltcp_rec_create) == 40, "create record");
_Static_assert(sizeof(struct mltcp_rec_measure) == 120, "measure record");
_Static_assert(sizeof(struct mltcp_rec_close) == 8, "close record");
_Static_assert(sizeof(struct mltcp_agent_attach) == 16, "attach entry");
_Static_assert(sizeof(struct mltcp_agent_ctl) == 56, "control entry");

#endif
