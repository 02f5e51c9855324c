/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * progress_test.c: a library's use of progress.h, compiled and driven by tests/c_abi.rs.
 *
 * Usage: progress_test DIR. Opens job "cjob" rank 1 in DIR, checks the error returns, describes
 * a ring job with one given and one real (loopback) flow, reports iteration 42 with 1234 bytes,
 * then prints "READY <port of the real flow's local end>" and, for each line read on stdin,
 * makes one mltcp_progress_before_burst call (timeouts 5 s, then 20 ms) and prints
 * "BURST <result>". Prints "CLOSED" after closing; exits 0 if every check held.
 */
#include "progress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

_Static_assert(sizeof(struct mltcp_flow) == 48, "struct mltcp_flow is 48 bytes");
_Static_assert(offsetof(struct mltcp_flow, peer_rank) == 8, "peer_rank at 8");
_Static_assert(offsetof(struct mltcp_flow, local_addr) == 16, "local_addr at 16");
_Static_assert(offsetof(struct mltcp_flow, remote_addr) == 32, "remote_addr at 32");

#define EXPECT(call, want)                                                                   \
	do {                                                                                 \
		int got_ = (call);                                                           \
		if (got_ != (want)) {                                                        \
			fprintf(stderr, "%s:%d: %s = %d, expected %d\n", __FILE__, __LINE__, \
				#call, got_, (want));                                        \
			return 1;                                                            \
		}                                                                            \
	} while (0)

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : NULL;
	mltcp_progress *h = NULL, *h2 = NULL;
	struct mltcp_flow f;
	struct sockaddr_in a;
	socklen_t alen = sizeof(a);
	char line[64];
	int l, c, sv[2];

	EXPECT((int)mltcp_progress_abi_version(), MLTCP_PROGRESS_VERSION);

	/* Errors come back as negative errno values. */
	EXPECT(mltcp_progress_open("bad/id", 0, dir, 0, &h), -EINVAL);
	EXPECT(mltcp_progress_open("cjob", 0, dir, MLTCP_PROGRESS_MAX_FLOWS + 1, &h), -EINVAL);
	EXPECT(mltcp_progress_open(NULL, 0, dir, 0, &h), -EINVAL);
	EXPECT(mltcp_progress_set_job(NULL, MLTCP_PARADIGM_RING, MLTCP_ROLE_WORKER, 3), -EINVAL);
	EXPECT(mltcp_progress_add_bytes(NULL, 1), -EINVAL);
	EXPECT(mltcp_progress_close(NULL), 0);

	EXPECT(mltcp_progress_open("cjob", 1, dir, 4, &h), 0);
	EXPECT(mltcp_progress_open("cjob", 1, dir, 4, &h2), -EEXIST);
	EXPECT(mltcp_progress_set_job(h, 7, MLTCP_ROLE_WORKER, 3), -EINVAL);
	EXPECT(mltcp_progress_set_job(h, MLTCP_PARADIGM_RING, MLTCP_ROLE_WORKER, 3), 0);
	EXPECT(mltcp_progress_set_ring(h, 0, 2), 0);
	EXPECT(mltcp_progress_set_bytes_per_iteration(h, 3000000), 0);

	/* One flow given as a record... */
	memset(&f, 0, sizeof(f));
	f.family = MLTCP_FAMILY_IPV4;
	f.kind = MLTCP_FLOW_RING_SEND;
	f.local_port = 40000;
	f.remote_port = 5000;
	f.peer_rank = 2;
	inet_pton(AF_INET, "10.0.0.1", f.local_addr);
	inet_pton(AF_INET, "10.0.0.2", f.remote_addr);
	EXPECT(mltcp_progress_set_flows(h, &f, 1), 0);
	f.family = 5;
	EXPECT(mltcp_progress_set_flows(h, &f, 1), -EINVAL);

	/* ...and one read from a connected loopback socket. */
	l = socket(AF_INET, SOCK_STREAM, 0);
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &alen)) {
		perror("listen");
		return 1;
	}
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a))) {
		perror("connect");
		return 1;
	}
	EXPECT(mltcp_progress_add_flow_fd(h, l, MLTCP_FLOW_RING_RECV, 0), -ENOTCONN);
	EXPECT(mltcp_progress_add_flow_fd(h, -1, MLTCP_FLOW_RING_RECV, 0), -EBADF);
	EXPECT(mltcp_progress_add_flow_fd(h, c, 99, 0), -EINVAL);
	EXPECT(mltcp_progress_add_flow_fd(h, 0, MLTCP_FLOW_RING_RECV, 0), -ENOTSOCK); /* stdin: a pipe */
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		perror("socketpair");
		return 1;
	}
	EXPECT(mltcp_progress_add_flow_fd(h, sv[0], MLTCP_FLOW_RING_RECV, 0), -EINVAL);
	close(sv[0]);
	close(sv[1]);
	EXPECT(mltcp_progress_add_flow_fd(h, c, MLTCP_FLOW_RING_RECV, 0), 0);

	EXPECT(mltcp_progress_begin_iteration(h, 41), 0);
	EXPECT(mltcp_progress_add_bytes(h, 999), 0);
	EXPECT(mltcp_progress_begin_iteration(h, 42), 0);
	EXPECT(mltcp_progress_add_bytes(h, 1000), 0);
	EXPECT(mltcp_progress_add_bytes(h, 234), 0);

	/* No agent yet: returns at once. */
	EXPECT(mltcp_progress_before_burst(h, 5000000), MLTCP_BURST_NO_AGENT);

	alen = sizeof(a);
	getsockname(c, (struct sockaddr *)&a, &alen);
	printf("READY %u\n", (unsigned)ntohs(a.sin_port));
	fflush(stdout);

	if (!fgets(line, sizeof(line), stdin))
		return 1;
	printf("BURST %d\n", mltcp_progress_before_burst(h, 5000000));
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	printf("BURST %d\n", mltcp_progress_before_burst(h, 20000));
	fflush(stdout);

	EXPECT(mltcp_progress_close(h), 0);
	close(c);
	close(l);
	printf("CLOSED\n");
	return 0;
}
