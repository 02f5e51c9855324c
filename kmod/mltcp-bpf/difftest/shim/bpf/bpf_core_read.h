/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * shim/bpf/bpf_core_read.h: user-space stand-in for libbpf's header: without CO-RE relocations
 * a bitfield is read as the C bitfield it is.
 */
#ifndef MLTCP_SHIM_BPF_CORE_READ_H
#define MLTCP_SHIM_BPF_CORE_READ_H

#define BPF_CORE_READ_BITFIELD(s, field) ((s)->field)

#endif
