/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * shim/bpf/bpf_helpers.h: stands in for libbpf's header of the same name when the differential
 * test compiles kmod/mltcp-bpf/bpf/mltcp.bpf.c for user space. Section annotations vanish, map
 * definitions become ordinary globals, and the helpers the programs call are functions of the
 * test harness (harness.c): the map lookup and the jiffies clock, and the agent datapath's
 * helpers (socket storage, ring buffer, setsockopt, the monotonic clock), which behave as with
 * no agent attached.
 */
#ifndef MLTCP_SHIM_BPF_HELPERS_H
#define MLTCP_SHIM_BPF_HELPERS_H

#include <linux/types.h>

#define SEC(name)
#define __uint(name, val) int (*name)[val]
#define __type(name, val) __typeof__(val) *name
#define __kconfig
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

/* The harness's map storage; `map` is the address of one of the program's map globals. */
void *bpf_map_lookup_elem(void *map, const void *key);
/* The harness's clock, jiffies. */
__u64 bpf_jiffies64(void);
/* The agent datapath's helpers (harness.c: as with no agent attached). */
long bpf_map_delete_elem(void *map, const void *key);
__u64 bpf_ktime_get_ns(void);
__u32 bpf_get_smp_processor_id(void);
void *bpf_sk_storage_get(void *map, void *sk, void *value, __u64 flags);
void *bpf_ringbuf_reserve(void *ringbuf, __u64 size, __u64 flags);
void bpf_ringbuf_submit(void *data, __u64 flags);
long bpf_ringbuf_output(void *ringbuf, void *data, __u64 size, __u64 flags);
long bpf_setsockopt(void *sk, int level, int optname, void *optval, int optlen);

#endif
