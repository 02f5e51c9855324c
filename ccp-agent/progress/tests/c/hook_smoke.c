/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * hook_smoke.c: drives the MLTCP hook that the NCCL and libzmq patches add (mltcp_hook.{h,c},
 * extracted from the patch by tests/lib_patches.rs) against the real progress library.
 *
 * Usage: hook_smoke CC_OK CC_BAD. Environment: MLTCP_JOB_ID, MLTCP_BYTES_PER_ITER,
 * MLTCP_PROGRESS_DIR (set by the test).
 * Steps: TCP_CONGESTION=CC_OK on a socket, checked with getsockopt; CC_BAD twice (refused, the
 * socket keeps its algorithm, one message on stderr); a loopback connection tracked as a flow;
 * 600 + 600 + 600 bytes reported (two through mltcp_hook_sent on the tracked fd, one on an
 * untracked fd that must not count, one through mltcp_hook_add_bytes). Prints
 * "READY <iteration> <iter_bytes>", waits for a line on stdin, prints "CLOSED" and exits.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mltcp_hook.h"
#include "progress.h"

static void fail(const char *what)
{
	fprintf(stderr, "hook_smoke: %s\n", what);
	exit(1);
}

int main(int argc, char **argv)
{
	char cur[32] = {0};
	socklen_t len = sizeof(cur);
	struct sockaddr_in a;
	socklen_t alen = sizeof(a);
	struct mltcp_hook_job job;
	uint64_t it, ib;
	char line[16];
	int lfd, cfd, afd;

	if (argc != 3)
		fail("usage: hook_smoke CC_OK CC_BAD");
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || cfd < 0)
		fail("socket");

	setenv("MLTCP_CC", argv[1], 1);
	if (mltcp_hook_set_cc(cfd, "smoke") != 0)
		fail("set_cc CC_OK refused");
	if (getsockopt(cfd, IPPROTO_TCP, TCP_CONGESTION, cur, &len) != 0 || strcmp(cur, argv[1]) != 0)
		fail("getsockopt does not show CC_OK");
	setenv("MLTCP_CC", argv[2], 1);
	if (mltcp_hook_set_cc(cfd, "smoke") != 1 || mltcp_hook_set_cc(lfd, "smoke") != 1)
		fail("set_cc CC_BAD accepted");
	len = sizeof(cur);
	if (getsockopt(cfd, IPPROTO_TCP, TCP_CONGESTION, cur, &len) != 0 || strcmp(cur, argv[1]) != 0)
		fail("a refused algorithm changed the socket");
	setenv("MLTCP_CC", "none", 1);
	if (mltcp_hook_set_cc(cfd, "smoke") != 1)
		fail("MLTCP_CC=none did something");

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(lfd, 1) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&a, &alen) != 0 ||
	    connect(cfd, (struct sockaddr *)&a, sizeof(a)) != 0)
		fail("loopback connection");
	afd = accept(lfd, NULL, NULL);
	if (afd < 0)
		fail("accept");

	/* No region yet: bytes are dropped, not counted later. */
	mltcp_hook_add_bytes(5);
	job.job_id = NULL; /* $MLTCP_JOB_ID */
	job.fallback_id = "fallback";
	job.rank = 2;
	job.world_size = 4;
	job.paradigm = MLTCP_PARADIGM_RING;
	job.role = MLTCP_ROLE_WORKER;
	job.ring_pred = 1;
	job.ring_succ = 3;
	if (mltcp_hook_open(&job, "smoke") != 0)
		fail("mltcp_hook_open");
	job.rank = 7; /* a second open is ignored */
	if (mltcp_hook_open(&job, "smoke") != 0)
		fail("second mltcp_hook_open");
	mltcp_hook_add_flow(cfd, MLTCP_FLOW_RING_SEND, 3);
	mltcp_hook_track_fd(cfd);
	mltcp_hook_sent(cfd, 600);
	mltcp_hook_sent(afd, 600); /* not tracked */
	mltcp_hook_sent(cfd, 600);
	mltcp_hook_sent(cfd, -1);  /* an error: nothing */
	mltcp_hook_add_bytes(600);
	mltcp_hook_state(&it, &ib);
	printf("READY %llu %llu\n", (unsigned long long)it, (unsigned long long)ib);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		fail("stdin closed");
	printf("CLOSED\n");
	return 0;
}
