/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * shim/bpf/bpf_helpers.h: stands in for libbpf's header of the same name when the differential
 * test compiles kmod/mltcp-bpf/bpf/mltcp.bpf.c for user space. Section annotations vanish, map
 * definitions become ordinary globals, and the two helpers the programs call are functions of the
 * test harness (harness.c): the map lookup and the jiffies clock.
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

#endif
