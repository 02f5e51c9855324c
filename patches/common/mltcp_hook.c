/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * mltcp_hook.c: TCP_CONGESTION from $MLTCP_CC and progress reporting for patched NCCL and libzmq
 * (MLTCP project, patches/common/; see mltcp_hook.h). Added unchanged by both patches, as
 * src/misc/mltcp_hook.cc (NCCL) and src/mltcp_hook.cpp (libzmq).
 *
 * Environment:
 *   MLTCP_CC              congestion control of data sockets (default "mltcp"; "" or "none": off)
 *   MLTCP_JOB_ID          job id of the progress region (default: the library's, e.g. NCCL's
 *                         communicator hash)
 *   MLTCP_BYTES_PER_ITER  bytes per training iteration, set by the launcher (unset or 0: the agent
 *                         learns them from the first iterations)
 *   MLTCP_PROGRESS_DIR    region directory (read by the progress library itself)
 */
#include "mltcp_hook.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#ifdef MLTCP_HOOK_PROGRESS
#include "progress.h"
#endif

#define MLTCP_HOOK_DEFAULT_CC "mltcp"
/* Descriptors below this bound can be tracked (one bit each, 8 KiB). */
#define MLTCP_HOOK_MAX_FD 65536

static pthread_mutex_t mltcp_hook_lock = PTHREAD_MUTEX_INITIALIZER;
static int mltcp_hook_cc_warned;
static unsigned char mltcp_hook_fds[MLTCP_HOOK_MAX_FD / 8];

int mltcp_hook_set_cc(int fd, const char *lib)
{
	const char *cc = getenv("MLTCP_CC");
	int warn;
	if (cc == NULL)
		cc = MLTCP_HOOK_DEFAULT_CC;
	if (cc[0] == '\0' || strcmp(cc, "none") == 0)
		return 1;
	if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc)) == 0)
		return 0;
	{
		int err = errno;
		pthread_mutex_lock(&mltcp_hook_lock);
		warn = !mltcp_hook_cc_warned;
		mltcp_hook_cc_warned = 1;
		pthread_mutex_unlock(&mltcp_hook_lock);
		if (warn)
			fprintf(stderr,
				"%s mltcp: setsockopt(TCP_CONGESTION, \"%s\") failed: %s; data sockets keep the "
				"system default congestion control (load tcp_mltcp, or set MLTCP_CC; said once)\n",
				lib ? lib : "mltcp_hook", cc, strerror(err));
	}
	return 1;
}

void mltcp_hook_track_fd(int fd)
{
	if (fd < 0 || fd >= MLTCP_HOOK_MAX_FD)
		return;
	__atomic_fetch_or(&mltcp_hook_fds[fd / 8], (unsigned char)(1u << (fd % 8)), __ATOMIC_RELAXED);
}

#ifdef MLTCP_HOOK_PROGRESS

static mltcp_progress *mltcp_hook_handle;
static int mltcp_hook_opened; /* 1 once mltcp_hook_open ran, whatever its outcome */
static uint64_t mltcp_hook_bpi;  /* bytes per iteration, 0 = unknown */
static uint64_t mltcp_hook_iter;
static uint64_t mltcp_hook_iter_bytes;

static uint64_t mltcp_hook_env_u64(const char *name)
{
	const char *v = getenv(name);
	char *end = NULL;
	unsigned long long x;
	if (v == NULL || v[0] == '\0')
		return 0;
	errno = 0;
	x = strtoull(v, &end, 10);
	if (errno != 0 || end == v || *end != '\0') {
		fprintf(stderr, "mltcp: ignoring %s=\"%s\" (not a byte count)\n", name, v);
		return 0;
	}
	return (uint64_t)x;
}

int mltcp_hook_open(const struct mltcp_hook_job *job, const char *lib)
{
	const char *id;
	int rc = 0;
	pthread_mutex_lock(&mltcp_hook_lock);
	if (mltcp_hook_opened)
		goto out;
	mltcp_hook_opened = 1;
	id = job->job_id ? job->job_id : getenv("MLTCP_JOB_ID");
	if (id == NULL || id[0] == '\0')
		id = job->fallback_id;
	if (id == NULL) {
		rc = -EINVAL;
		goto fail;
	}
	rc = mltcp_progress_open(id, job->rank, NULL, 0, &mltcp_hook_handle);
	if (rc != 0)
		goto fail;
	mltcp_progress_set_job(mltcp_hook_handle, job->paradigm, job->role, job->world_size);
	mltcp_progress_set_ring(mltcp_hook_handle, job->ring_pred, job->ring_succ);
	mltcp_hook_bpi = mltcp_hook_env_u64("MLTCP_BYTES_PER_ITER");
	mltcp_progress_set_bytes_per_iteration(mltcp_hook_handle, mltcp_hook_bpi);
	goto out;
fail:
	mltcp_hook_handle = NULL;
	fprintf(stderr, "%s mltcp: no progress reporting: cannot open the region of job \"%s\" rank %u: %s\n",
		lib ? lib : "mltcp_hook", id ? id : "(none)", (unsigned)job->rank, strerror(-rc));
out:
	pthread_mutex_unlock(&mltcp_hook_lock);
	return rc;
}

void mltcp_hook_set_ring(uint32_t pred, uint32_t succ)
{
	pthread_mutex_lock(&mltcp_hook_lock);
	if (mltcp_hook_handle)
		mltcp_progress_set_ring(mltcp_hook_handle, pred, succ);
	pthread_mutex_unlock(&mltcp_hook_lock);
}

void mltcp_hook_add_flow(int fd, uint16_t kind, uint32_t peer_rank)
{
	pthread_mutex_lock(&mltcp_hook_lock);
	if (mltcp_hook_handle)
		(void)mltcp_progress_add_flow_fd(mltcp_hook_handle, fd, kind, peer_rank);
	pthread_mutex_unlock(&mltcp_hook_lock);
}

void mltcp_hook_add_bytes(uint64_t bytes)
{
	pthread_mutex_lock(&mltcp_hook_lock);
	if (mltcp_hook_handle == NULL)
		goto out;
	while (mltcp_hook_bpi != 0 && bytes >= mltcp_hook_bpi - mltcp_hook_iter_bytes) {
		uint64_t part = mltcp_hook_bpi - mltcp_hook_iter_bytes;
		mltcp_progress_add_bytes(mltcp_hook_handle, part);
		bytes -= part;
		mltcp_hook_iter++;
		mltcp_hook_iter_bytes = 0;
		mltcp_progress_begin_iteration(mltcp_hook_handle, mltcp_hook_iter);
	}
	if (bytes > 0) {
		mltcp_progress_add_bytes(mltcp_hook_handle, bytes);
		mltcp_hook_iter_bytes += bytes;
	}
out:
	pthread_mutex_unlock(&mltcp_hook_lock);
}

void mltcp_hook_state(uint64_t *iteration, uint64_t *iter_bytes)
{
	pthread_mutex_lock(&mltcp_hook_lock);
	*iteration = mltcp_hook_iter;
	*iter_bytes = mltcp_hook_iter_bytes;
	pthread_mutex_unlock(&mltcp_hook_lock);
}

#else /* !MLTCP_HOOK_PROGRESS: built without the progress library */

int mltcp_hook_open(const struct mltcp_hook_job *job, const char *lib)
{
	(void)job;
	(void)lib;
	return -ENOSYS;
}
void mltcp_hook_set_ring(uint32_t pred, uint32_t succ)
{
	(void)pred;
	(void)succ;
}
void mltcp_hook_add_flow(int fd, uint16_t kind, uint32_t peer_rank)
{
	(void)fd;
	(void)kind;
	(void)peer_rank;
}
void mltcp_hook_add_bytes(uint64_t bytes)
{
	(void)bytes;
}
void mltcp_hook_state(uint64_t *iteration, uint64_t *iter_bytes)
{
	*iteration = 0;
	*iter_bytes = 0;
}

#endif /* MLTCP_HOOK_PROGRESS */

void mltcp_hook_sent(int fd, long bytes)
{
	if (bytes <= 0 || fd < 0 || fd >= MLTCP_HOOK_MAX_FD)
		return;
	if (__atomic_load_n(&mltcp_hook_fds[fd / 8], __ATOMIC_RELAXED) & (1u << (fd % 8)))
		mltcp_hook_add_bytes((uint64_t)bytes);
}
