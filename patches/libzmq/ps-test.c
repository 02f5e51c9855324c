/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * ps-test.c: a parameter-server style job over (patched) libzmq, for the MLTCP VM tests
 * (patches/libzmq/README.md). Built by ci/build-libzmq.sh as <prefix>/bin/mltcp-ps-test.
 *
 *   mltcp-ps-test server BIND_ENDPOINT WORKERS ITERS BYTES
 *   mltcp-ps-test worker CONNECT_ENDPOINT ITERS BYTES [COMPUTE_MS]
 *
 * Like ps-lite's ZMQVan: the server binds a ROUTER, workers connect DEALERs. Each iteration every
 * worker pushes BYTES (its gradients) and waits; once the server has every worker's push it
 * answers each with BYTES (the updated parameters: the pull). A worker sleeps COMPUTE_MS between
 * iterations (the compute phase). Each side prints one line per iteration ("iter N ms T") and
 * "done iters=N sent=B" at the end (B: payload bytes this process sent). Run it with MLTCP_JOB_ID,
 * MLTCP_ROLE, MLTCP_RANK and MLTCP_BYTES_PER_ITER set to see it in mltcp-progress-dump.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

static void die(const char *what) __attribute__((noreturn));
static void die(const char *what)
{
	fprintf(stderr, "mltcp-ps-test: %s: %s\n", what, zmq_strerror(zmq_errno()));
	exit(1);
}

static unsigned long arg_ul(const char *s, const char *name)
{
	char *end = NULL;
	unsigned long v = strtoul(s, &end, 10);
	if (end == s || *end != '\0') {
		fprintf(stderr, "mltcp-ps-test: %s must be a number, got \"%s\"\n", name, s);
		exit(2);
	}
	return v;
}

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void usage(void) __attribute__((noreturn));
static void usage(void)
{
	fprintf(stderr, "usage: mltcp-ps-test server BIND_ENDPOINT WORKERS ITERS BYTES\n"
			"       mltcp-ps-test worker CONNECT_ENDPOINT ITERS BYTES [COMPUTE_MS]\n");
	exit(2);
}

static int server(void *ctx, const char *ep, unsigned long workers, unsigned long iters, size_t bytes)
{
	void *s = zmq_socket(ctx, ZMQ_ROUTER);
	char (*ids)[256] = calloc(workers, 256);
	size_t *idlen = calloc(workers, sizeof(size_t));
	char *buf = malloc(bytes ? bytes : 1);
	uint64_t sent = 0;
	if (!s || !ids || !idlen || !buf)
		die("setup");
	memset(buf, 0x5a, bytes);
	if (zmq_bind(s, ep) != 0)
		die("zmq_bind");
	for (unsigned long it = 0; it < iters; it++) {
		double t0 = now_ms();
		for (unsigned long w = 0; w < workers; w++) {
			int n = zmq_recv(s, ids[w], sizeof(ids[w]), 0);
			if (n < 0)
				die("zmq_recv identity");
			idlen[w] = (size_t)n;
			zmq_msg_t m;
			zmq_msg_init(&m);
			if (zmq_msg_recv(&m, s, 0) < 0)
				die("zmq_msg_recv push");
			if (zmq_msg_size(&m) != bytes) {
				fprintf(stderr, "mltcp-ps-test: push of %zu bytes, expected %zu\n", zmq_msg_size(&m), bytes);
				return 1;
			}
			zmq_msg_close(&m);
		}
		for (unsigned long w = 0; w < workers; w++) {
			if (zmq_send(s, ids[w], idlen[w], ZMQ_SNDMORE) < 0 || zmq_send(s, buf, bytes, 0) < 0)
				die("zmq_send pull");
			sent += bytes;
		}
		printf("iter %lu ms %.1f\n", it, now_ms() - t0);
		fflush(stdout);
	}
	printf("done iters=%lu sent=%llu\n", iters, (unsigned long long)sent);
	zmq_close(s);
	free(ids);
	free(idlen);
	free(buf);
	return 0;
}

static int worker(void *ctx, const char *ep, unsigned long iters, size_t bytes, unsigned long compute_ms)
{
	void *s = zmq_socket(ctx, ZMQ_DEALER);
	char *buf = malloc(bytes ? bytes : 1);
	uint64_t sent = 0;
	if (!s || !buf)
		die("setup");
	memset(buf, 0xa5, bytes);
	if (zmq_connect(s, ep) != 0)
		die("zmq_connect");
	for (unsigned long it = 0; it < iters; it++) {
		struct timespec c = {(time_t)(compute_ms / 1000), (long)(compute_ms % 1000) * 1000000L};
		nanosleep(&c, NULL);
		double t0 = now_ms();
		if (zmq_send(s, buf, bytes, 0) < 0)
			die("zmq_send push");
		sent += bytes;
		zmq_msg_t m;
		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, s, 0) < 0)
			die("zmq_msg_recv pull");
		if (zmq_msg_size(&m) != bytes) {
			fprintf(stderr, "mltcp-ps-test: pull of %zu bytes, expected %zu\n", zmq_msg_size(&m), bytes);
			return 1;
		}
		zmq_msg_close(&m);
		printf("iter %lu ms %.1f\n", it, now_ms() - t0);
		fflush(stdout);
	}
	printf("done iters=%lu sent=%llu\n", iters, (unsigned long long)sent);
	zmq_close(s);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	int rc = 2;
	if (argc < 2)
		usage();
	void *ctx = zmq_ctx_new();
	if (!ctx)
		die("zmq_ctx_new");
	if (strcmp(argv[1], "server") == 0 && argc == 6)
		rc = server(ctx, argv[2], arg_ul(argv[3], "WORKERS"), arg_ul(argv[4], "ITERS"),
			    (size_t)arg_ul(argv[5], "BYTES"));
	else if (strcmp(argv[1], "worker") == 0 && (argc == 5 || argc == 6))
		rc = worker(ctx, argv[2], arg_ul(argv[3], "ITERS"), (size_t)arg_ul(argv[4], "BYTES"),
			    argc == 6 ? arg_ul(argv[5], "COMPUTE_MS") : 0);
	else
		usage();
	zmq_ctx_term(ctx);
	return rc;
}
