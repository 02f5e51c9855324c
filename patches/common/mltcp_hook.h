/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * mltcp_hook.h: the MLTCP hook that the NCCL and libzmq patches add to those libraries (MLTCP
 * project, patches/common/). One source for both patches: each patch adds this file and
 * mltcp_hook.c (renamed to the library's source suffix) unchanged; a test checks they match.
 *
 * Two jobs:
 *  - mltcp_hook_set_cc(fd): setsockopt(TCP_CONGESTION) with $MLTCP_CC (default "mltcp"). When the
 *    kernel refuses it (algorithm not loaded or not allowed), the socket keeps the system default
 *    and the library says so once on stderr. MLTCP_CC="" or "none" disables it.
 *  - progress reporting through the MLTCP progress interface (ccp-agent/progress/include/progress.h),
 *    compiled in only with -DMLTCP_HOOK_PROGRESS (else every mltcp_hook_* below is a cheap no-op
 *    apart from set_cc): one region per process, opened on the first report, iteration boundaries
 *    cut from $MLTCP_BYTES_PER_ITER when the launcher sets it (else the agent learns them).
 *
 * Written in the common subset of C99 and C++11: NCCL and libzmq compile it as C++.
 */
#ifndef MLTCP_HOOK_H
#define MLTCP_HOOK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MLTCP_HOOK_API __attribute__((visibility("hidden")))
#else
#define MLTCP_HOOK_API
#endif

/* Values of mltcp_hook_job.paradigm / .role: the MLTCP_PARADIGM_* / MLTCP_ROLE_* of progress.h. */
struct mltcp_hook_job {
	const char *job_id;  /* NULL: $MLTCP_JOB_ID, else the library's default passed as fallback_id */
	const char *fallback_id; /* used when job_id is NULL and $MLTCP_JOB_ID is unset */
	uint32_t rank;       /* this process's rank in the job */
	uint32_t world_size; /* processes in the job, 0 = unknown */
	uint32_t paradigm;   /* MLTCP_PARADIGM_* */
	uint32_t role;       /* MLTCP_ROLE_* */
	uint32_t ring_pred;  /* ring predecessor rank, UINT32_MAX = none */
	uint32_t ring_succ;  /* ring successor rank, UINT32_MAX = none */
};

/* Sets TCP_CONGESTION on `fd` from $MLTCP_CC. Returns 0 when set, 1 when disabled or refused (the
 * socket keeps the system default; logged once per process, with `lib` naming the library). */
MLTCP_HOOK_API int mltcp_hook_set_cc(int fd, const char *lib);

/* Remembers `fd` as a TCP data socket: later mltcp_hook_sent(fd, ...) calls count its bytes. */
MLTCP_HOOK_API void mltcp_hook_track_fd(int fd);

/* Opens this process's progress region (first call only; later calls are ignored, so a process
 * reports for the first job it announces). Returns 0, or a negative errno (logged once). */
MLTCP_HOOK_API int mltcp_hook_open(const struct mltcp_hook_job *job, const char *lib);

/* Updates the ring peers of the open region (no-op when none is open). */
MLTCP_HOOK_API void mltcp_hook_set_ring(uint32_t pred, uint32_t succ);

/* Adds `fd` (connected) to the region's flows, kind MLTCP_FLOW_*, peer rank or UINT32_MAX. */
MLTCP_HOOK_API void mltcp_hook_add_flow(int fd, uint16_t kind, uint32_t peer_rank);

/* Adds `bytes` to this iteration, starting the next iteration each time the count reaches
 * $MLTCP_BYTES_PER_ITER (bytes that cross a boundary go to the next iteration). */
MLTCP_HOOK_API void mltcp_hook_add_bytes(uint64_t bytes);

/* mltcp_hook_add_bytes(bytes) if `fd` was tracked with mltcp_hook_track_fd and bytes > 0. */
MLTCP_HOOK_API void mltcp_hook_sent(int fd, long bytes);

/* Iteration number and bytes in it as this hook counts them (tests; 0/0 without a region). */
MLTCP_HOOK_API void mltcp_hook_state(uint64_t *iteration, uint64_t *iter_bytes);

#ifdef __cplusplus
}
#endif

#endif /* MLTCP_HOOK_H */
