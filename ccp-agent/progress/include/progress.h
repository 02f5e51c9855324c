/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * progress.h: the MLTCP progress interface, version 1 (C ABI of the mltcp-progress crate,
 * ccp-agent/progress/).
 *
 * A communication library (patched NCCL, libzmq/ps-lite, the traffic emulator) tells the local
 * ccp-agent about the training job it serves through one shared-memory region per process:
 * <dir>/<job_id>.<rank>.region, with dir = the `dir` argument, else $MLTCP_PROGRESS_DIR, else
 * /dev/shm/mltcp-progress (created with mode 1777 if missing). Updates are a few memory stores
 * (no system call) under a seqlock; the agent reads the region once per scheduling slot. The
 * region's byte layout and the reasons for this mechanism are documented in the crate
 * (ccp-agent/progress/src/layout.rs and src/lib.rs).
 *
 * Link: libmltcp_progress.a (with -lpthread -ldl -lm -lrt -lgcc_s, or let the compiler driver add
 * them) or libmltcp_progress.so.
 *
 * Conventions:
 *  - Every function returning int returns 0 (or a documented non-negative value) on success and a
 *    negative errno on failure; none aborts or unwinds into the caller.
 *  - A handle may be used from several threads at once (calls are serialized internally), except
 *    mltcp_progress_close, which must be the handle's last use. After fork(), only the process
 *    that opened a handle may use it (the child shares the parent's region).
 *  - Byte counts are bytes handed to the network (written to sockets or queued for them).
 */
#ifndef MLTCP_PROGRESS_H
#define MLTCP_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Layout version of the regions (and of this ABI). */
#define MLTCP_PROGRESS_VERSION 1

/* Paradigm of a job (mltcp_progress_set_job). */
#define MLTCP_PARADIGM_UNKNOWN 0
#define MLTCP_PARADIGM_RING 1 /* ring all-reduce */
#define MLTCP_PARADIGM_PS 2   /* parameter server */

/* Role of this process (mltcp_progress_set_job). */
#define MLTCP_ROLE_UNKNOWN 0
#define MLTCP_ROLE_WORKER 1 /* ring member or parameter-server client */
#define MLTCP_ROLE_PS 2     /* parameter server */

/* A rank that names no process (ring predecessor/successor, flow peer). */
#define MLTCP_NO_RANK UINT32_MAX

/* What a flow carries, seen from this process (struct mltcp_flow.kind). */
#define MLTCP_FLOW_UNSPECIFIED 0
#define MLTCP_FLOW_RING_SEND 1 /* to the ring successor */
#define MLTCP_FLOW_RING_RECV 2 /* from the ring predecessor */
#define MLTCP_FLOW_PS_PUSH 3   /* worker -> server (aggregation), on either end */
#define MLTCP_FLOW_PS_PULL 4   /* server -> worker (broadcast), on either end */

/* Address family of a flow (struct mltcp_flow.family). */
#define MLTCP_FAMILY_IPV4 4
#define MLTCP_FAMILY_IPV6 6

/* Default number of flow slots of a region (max_flows = 0), and the largest allowed. */
#define MLTCP_PROGRESS_DEFAULT_FLOWS 64
#define MLTCP_PROGRESS_MAX_FLOWS 4096

/* Return values of mltcp_progress_before_burst. */
#define MLTCP_BURST_GRANTED 0   /* the agent granted the burst */
#define MLTCP_BURST_NO_AGENT 1  /* no live agent attached: returned at once */
#define MLTCP_BURST_TIMED_OUT 2 /* an agent is attached but did not answer in time */

/*
 * One flow: a TCP connection's 4-tuple, 48 bytes, stored as is in the region.
 * Ports in host byte order; addresses in network byte order (IPv4: first 4 bytes, rest 0).
 */
struct mltcp_flow {
	uint16_t family;         /* MLTCP_FAMILY_IPV4 or MLTCP_FAMILY_IPV6 */
	uint16_t kind;           /* MLTCP_FLOW_* */
	uint16_t local_port;     /* this process's port */
	uint16_t remote_port;    /* the peer's port */
	uint32_t peer_rank;      /* the peer's rank in the job, or MLTCP_NO_RANK */
	uint32_t reserved;       /* 0 */
	uint8_t local_addr[16];  /* this process's address */
	uint8_t remote_addr[16]; /* the peer's address */
};

/* The handle of an open region. */
typedef struct mltcp_progress mltcp_progress;

/* MLTCP_PROGRESS_VERSION of the library actually linked. */
uint32_t mltcp_progress_abi_version(void);

/*
 * Creates the region of job `job_id` (1..63 bytes of [A-Za-z0-9._-], not starting with '.'),
 * process `rank`, in `dir` (NULL: $MLTCP_PROGRESS_DIR or /dev/shm/mltcp-progress), with
 * `max_flows` flow slots (0: MLTCP_PROGRESS_DEFAULT_FLOWS). On success stores the handle in *out.
 * The region starts with paradigm/role unknown, no ring peers, no flows, bytes per iteration
 * unknown (0), iteration 0 and no bytes. A region of the same job and rank left by a dead process
 * is replaced. Errors: -EINVAL (bad job id, max_flows, NULL argument), -EEXIST (a live process
 * writes that region), or the errno of creating the directory or file.
 */
int mltcp_progress_open(const char *job_id, uint32_t rank, const char *dir, uint32_t max_flows,
			mltcp_progress **out);

/* Sets the paradigm (MLTCP_PARADIGM_*), this process's role (MLTCP_ROLE_*) and the number of
 * processes in the job (0: unknown). -EINVAL on an unknown paradigm or role. */
int mltcp_progress_set_job(mltcp_progress *h, uint32_t paradigm, uint32_t role, uint32_t world_size);

/* Sets the ring predecessor and successor ranks (MLTCP_NO_RANK: none). */
int mltcp_progress_set_ring(mltcp_progress *h, uint32_t pred, uint32_t succ);

/* Sets the bytes this process hands to the network per iteration (the model's gradient bytes for
 * its share); 0 = unknown, the agent then learns it from the first iterations. */
int mltcp_progress_set_bytes_per_iteration(mltcp_progress *h, uint64_t bytes);

/* Replaces the flow list with flows[0..n). -EINVAL (nothing changed) if n exceeds the region's
 * slots or a record has a bad family or kind. */
int mltcp_progress_set_flows(mltcp_progress *h, const struct mltcp_flow *flows, size_t n);

/* Appends the connected TCP socket `fd` as a flow (its 4-tuple read with getsockname and
 * getpeername) of kind MLTCP_FLOW_* to peer `peer_rank`. `fd` must stay open during the call.
 * -ENOSPC when every slot is used; -EBADF for a descriptor that is not open; the errno of
 * getpeername (e.g. -ENOTCONN, -ENOTSOCK); -EINVAL for a non-IP socket or an unknown kind. */
int mltcp_progress_add_flow_fd(mltcp_progress *h, int fd, uint16_t kind, uint32_t peer_rank);

/* Starts iteration `iteration`: the iteration's byte count goes back to 0. */
int mltcp_progress_begin_iteration(mltcp_progress *h, uint64_t iteration);

/* Adds `bytes` handed to the network, to this iteration's count and to the running total
 * (saturating). Cheap: a few memory stores, no system call but a clock read. */
int mltcp_progress_add_bytes(mltcp_progress *h, uint64_t bytes);

/*
 * Optional bounded wait before a burst. Records a burst request in the region, then:
 *  - no live agent attached (none ever, detached, or its heartbeat older than 2 s):
 *    returns MLTCP_BURST_NO_AGENT at once;
 *  - else waits until the agent grants the request, returning MLTCP_BURST_GRANTED, or at most
 *    `timeout_us` microseconds, returning MLTCP_BURST_TIMED_OUT (MLTCP_BURST_NO_AGENT if the agent
 *    goes away meanwhile). timeout_us = 0 only checks once.
 * The caller sends its burst in every case: the call only delays it. Other threads may keep
 * calling mltcp_progress_add_bytes on the handle while one waits here.
 */
int mltcp_progress_before_burst(mltcp_progress *h, uint32_t timeout_us);

/* Marks the region closed, removes its file and frees the handle. NULL is accepted (returns 0). */
int mltcp_progress_close(mltcp_progress *h);

#ifdef __cplusplus
}
#endif

#endif /* MLTCP_PROGRESS_H */
