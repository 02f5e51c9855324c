/* SPDX-License-Identifier: GPL-2.0-only OR MIT */
/*
 * shim/bpf/bpf_tracing.h: user-space stand-in for libbpf's header. BPF_PROG(name, args...)
 * there defines a program taking the raw context array; here it is a plain C function with the
 * callback's own arguments, so the harness calls it through the struct_ops table directly.
 */
#ifndef MLTCP_SHIM_BPF_TRACING_H
#define MLTCP_SHIM_BPF_TRACING_H

#define BPF_PROG(name, args...) name(args)

#endif
