/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * shim/bpf/bpf_endian.h: libbpf's bpf_endian.h for the user-space build of the differential
 * test: byte order conversion through the C library's.
 */
#ifndef MLTCP_SHIM_BPF_ENDIAN_H
#define MLTCP_SHIM_BPF_ENDIAN_H

#include <arpa/inet.h>

#define bpf_htons(x) htons(x)

#endif
