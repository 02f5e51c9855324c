# ci/vm-lib.sh: guest-side helpers for scripts run through ci/vm-run (POSIX sh, sourced:
# `. "$MLTCP_VM_LIB"`). ci/vm-run ships it as /host/ci/vm-lib.sh.
#
# Topology made by vm_net_setup: two network namespaces joined by a veth pair,
#   $VM_SND (10.0.0.1, dev $VM_SND_DEV)  <--veth-->  $VM_RCV (10.0.0.2, dev $VM_RCV_DEV)
# with an iperf3 server (daemon) listening in $VM_RCV. Senders run in $VM_SND; shaping
# (vm_net_shape) is on the sender's egress: tbf (the bottleneck) with netem (delay, loss) as its child.
# iperf3 results are kept as --json files and parsed with busybox tr/grep/awk (no jq in the guest).

VM_SND=snd VM_RCV=rcv VM_SND_DEV=veth-s VM_RCV_DEV=veth-r
VM_SRC=10.0.0.1 VM_DST=10.0.0.2
VM_IPERF_PIDFILE=/tmp/vm-iperf3-server.pid

vm_in_snd() { ip netns exec "$VM_SND" "$@"; }
vm_in_rcv() { ip netns exec "$VM_RCV" "$@"; }

# vm_net_setup: create the namespaces, the veth pair and the iperf3 server. Idempotent.
vm_net_setup() {
  vm_net_teardown
  ip netns add "$VM_SND" && ip netns add "$VM_RCV" || return 1
  ip link add "$VM_SND_DEV" netns "$VM_SND" type veth peer name "$VM_RCV_DEV" netns "$VM_RCV" || return 1
  vm_in_snd ip addr add "$VM_SRC/24" dev "$VM_SND_DEV" &&
  vm_in_rcv ip addr add "$VM_DST/24" dev "$VM_RCV_DEV" &&
  vm_in_snd ip link set lo up && vm_in_rcv ip link set lo up &&
  vm_in_snd ip link set "$VM_SND_DEV" up && vm_in_rcv ip link set "$VM_RCV_DEV" up || return 1
  # --json: with --get-server-output the client gets the receiver's intervals as JSON.
  vm_in_rcv iperf3 -s -D -J -I "$VM_IPERF_PIDFILE" || return 1
  # Wait until the server listens and the link carries packets.
  i=0
  while ! vm_in_rcv ss -ltn 2>/dev/null | grep -q ':5201 '; do
    i=$((i + 1)); [ $i -lt 50 ] || { echo "vm_net_setup: iperf3 server did not start" >&2; return 1; }
    sleep 0.1
  done
  vm_in_snd ping -c 1 -W 5 "$VM_DST" >/dev/null || { echo "vm_net_setup: $VM_DST unreachable" >&2; return 1; }
}

# vm_net_teardown: stop the iperf3 server and delete the namespaces (and with them the veth pair).
vm_net_teardown() {
  if [ -f "$VM_IPERF_PIDFILE" ]; then
    kill "$(cat "$VM_IPERF_PIDFILE")" 2>/dev/null
    rm -f "$VM_IPERF_PIDFILE"
  fi
  ip netns del "$VM_SND" 2>/dev/null
  ip netns del "$VM_RCV" 2>/dev/null
  return 0
}

# vm_net_shape RATE DELAY [NETEM_ARGS...]: e.g. `vm_net_shape 100mbit 10ms loss 1%`.
# The tbf burst (64 kB) is above rate/HZ at 100 Mbit/s and HZ=1000, so it does not cap throughput.
vm_net_shape() {
  _rate=$1 _delay=$2; shift 2
  vm_net_unshape
  vm_in_snd tc qdisc add dev "$VM_SND_DEV" root handle 1: tbf rate "$_rate" burst 64kb latency 100ms &&
  vm_in_snd tc qdisc add dev "$VM_SND_DEV" parent 1:1 handle 10: netem delay "$_delay" "$@"
}

# vm_net_unshape: back to the bare veth.
vm_net_unshape() { vm_in_snd tc qdisc del dev "$VM_SND_DEV" root 2>/dev/null; return 0; }

# vm_iperf OUT.json [IPERF3 CLIENT ARGS...]: one iperf3 client run from $VM_SND to $VM_DST, --json
# output in OUT.json; fails (with iperf3's error message) when iperf3 reports an error.
# The client is killed after $VM_IPERF_TIMEOUT seconds (default 120).
vm_iperf() {
  _out=$1; shift
  timeout "${VM_IPERF_TIMEOUT:-120}" ip netns exec "$VM_SND" iperf3 -c "$VM_DST" --json "$@" > "$_out" 2>&1
  _rc=$?
  _err=$(vm_json_str "$_out" error)
  if [ $_rc -ne 0 ] || [ -n "$_err" ]; then
    echo "iperf3 $* failed (exit $_rc): ${_err:-$(tail -n 3 "$_out")}" >&2
    return 1
  fi
}

# vm_json_flat FILE: the JSON on one line without whitespace (for numbers; strings lose their spaces).
vm_json_flat() { tr -d ' \t\r\n' < "$1"; }

# vm_json_str FILE KEY: the first string value of "KEY" in FILE (empty when absent).
vm_json_str() {
  tr -d '\t\r\n' < "$1" | grep -o "\"$2\": *\"[^\"]*\"" | head -n 1 | sed 's/^[^:]*: *"//; s/"$//'
}

# vm_iperf_mbps FILE: receiver-side goodput in Mbit/s (end.sum_received.bits_per_second).
vm_iperf_mbps() {
  vm_json_flat "$1" | grep -o '"sum_received":{[^}]*}' | head -n 1 \
    | grep -o '"bits_per_second":[0-9.eE+-]*' | awk -F: '{ printf "%.1f\n", $2 / 1e6 }'
}

# vm_iperf_bytes FILE: bytes the receiver got (end.sum_received.bytes).
vm_iperf_bytes() {
  vm_json_flat "$1" | grep -o '"sum_received":{[^}]*}' | head -n 1 \
    | grep -o '"bytes":[0-9]*' | cut -d: -f2
}

# vm_iperf_sent_bytes FILE: bytes the sender wrote (end.sum_sent.bytes; with -n, the requested size).
vm_iperf_sent_bytes() {
  vm_json_flat "$1" | grep -o '"sum_sent":{[^}]*}' | head -n 1 \
    | grep -o '"bytes":[0-9]*' | cut -d: -f2
}

# vm_iperf_retrans FILE: sender retransmissions (end.sum_sent.retransmits).
vm_iperf_retrans() {
  vm_json_flat "$1" | grep -o '"sum_sent":{[^}]*}' | head -n 1 \
    | grep -o '"retransmits":[0-9]*' | cut -d: -f2
}

# vm_iperf_cc FILE: the congestion control iperf3 read back from the sending socket.
vm_iperf_cc() { vm_json_str "$1" sender_tcp_congestion; }

# vm_iperf_intervals FILE [sender|receiver]: one line per reporting interval, "START END Mbit/s",
# of the sender (default) or of the receiver (needs a run with --get-server-output), leaving out
# intervals shorter than 0.5 s (the last one can be a sliver).
vm_iperf_intervals() {
  _side=true; [ "${2:-sender}" = receiver ] && _side=false
  vm_json_flat "$1" | grep -o '"sum":{[^}]*}' | awk -v side="$_side" '{
    s = $0; gsub(/[{}"]/, "", s); n = split(s, kv, ",")
    for (i = 1; i <= n; i++) { split(kv[i], p, ":"); if (p[1] == "sum") { p[1] = p[2]; p[2] = p[3] } v[p[1]] = p[2] }
    if (v["sender"] == side && v["seconds"] + 0 >= 0.5)
      printf "%.2f %.2f %.1f\n", v["start"], v["end"], v["bits_per_second"] / 1e6
  }'
}

# vm_median X...: median of numbers (middle one; for an even count the lower middle).
vm_median() {
  printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)] }'
}

# vm_cc_available ALG: is ALG registered?
vm_cc_available() {
  grep -qw "$1" /proc/sys/net/ipv4/tcp_available_congestion_control
}

# vm_bpf_kconfig: makes the running kernel's Kconfig readable where libbpf looks for CONFIG_HZ
# (mltcp-bpf's struct_ops read it): /proc/config.gz on the testbed's kernel (IKCONFIG_PROC), else
# the config-<release> that `ci/vm-run --kernel-deb` ships in /host/boot, copied to /boot
# (Debian's kernels). Prints the file used; fails when there is neither. Leaves the caller's
# globbing setting as it found it.
vm_bpf_kconfig() {
  [ -e /proc/config.gz ] && { echo /proc/config.gz; return 0; }
  _kc_noglob=0
  case $- in *f*) _kc_noglob=1; set +f ;; esac
  _kc_rc=1
  mkdir -p /boot && cp /host/boot/config-* /boot/ 2>/dev/null && _kc_rc=0
  [ "$_kc_rc" = 0 ] && echo /boot/config-*
  [ "$_kc_noglob" = 1 ] && set -f
  return "$_kc_rc"
}

# vm_bpf_load FILE: registers mltcp and mltcp_cubic as BPF struct_ops with `mltcp-bpf load`
# (its output in FILE), on a kernel that runs without tcp_mltcp.ko (docs/bpf.md). On failure
# prints why (mltcp-bpf not on PATH; tcp_mltcp.ko loaded, holding the names; no BTF; no Kconfig
# for HZ, vm_bpf_kconfig; the load's own error) and returns 1. VM_PROC_MODULES and VM_BTF stand
# in for /proc/modules and /sys/kernel/btf/vmlinux (ci/vm-lib-test.sh).
vm_bpf_load() {
  command -v mltcp-bpf >/dev/null 2>&1 \
    || { echo "mltcp-bpf not on PATH (is it in ci/vm-bins.txt?)"; return 1; }
  if grep -q '^tcp_mltcp ' "${VM_PROC_MODULES:-/proc/modules}" 2>/dev/null; then
    echo "tcp_mltcp.ko is loaded and holds the names mltcp and mltcp_cubic (boot with ci/vm-run --no-module or --kernel-deb debian12)"
    return 1
  fi
  [ -e "${VM_BTF:-/sys/kernel/btf/vmlinux}" ] \
    || { echo "kernel $(uname -r) has no BTF (/sys/kernel/btf/vmlinux; CONFIG_DEBUG_INFO_BTF), so mltcp-bpf cannot load"; return 1; }
  vm_bpf_kconfig >/dev/null \
    || { echo "no Kconfig for HZ: neither /proc/config.gz (CONFIG_IKCONFIG_PROC) nor /host/boot/config-* (ci/vm-run --kernel-deb ships it)"; return 1; }
  mltcp-bpf load > "$1" 2>&1 || { echo "mltcp-bpf load failed: $(tail -n 5 "$1")"; return 1; }
}

# vm_cpu_meter_start FILE: start `trainemu cpu-meter` (one SCHED_IDLE spinner per CPU; busy =
# its window minus the spinners' run time, to the microsecond) with its output in FILE, and wait
# until it measures. Sets VM_METER_PID. Fails (saying why) when it does not start within 5 s.
vm_cpu_meter_start() {
  trainemu cpu-meter > "$1" 2>&1 &
  VM_METER_PID=$!
  _i=0
  while ! grep -q '^ready' "$1" 2>/dev/null; do
    _i=$((_i + 1))
    if [ $_i -ge 50 ]; then
      echo "cpu-meter did not start: $(tail -n 3 "$1")" >&2
      kill "$VM_METER_PID" 2>/dev/null
      return 1
    fi
    sleep 0.1
  done
}

# vm_cpu_meter_stop FILE: stop the meter started by vm_cpu_meter_start FILE and set
# VM_METER_BUSY_NS to the busy time of all CPUs over its window, ns. Fails (saying why) when the
# meter gave no reading. Call it in the shell that started the meter, not in $(...): a subshell
# cannot wait for the meter, and would read FILE before the meter writes its reading.
vm_cpu_meter_stop() {
  kill -TERM "$VM_METER_PID"; wait "$VM_METER_PID"
  VM_METER_BUSY_NS=$(awk '$1 == "cpus" { print $6 }' "$1")
  [ -n "$VM_METER_BUSY_NS" ] || { echo "cpu-meter gave no reading: $(tail -n 3 "$1")" >&2; return 1; }
}

# vm_routed_setup S M R: a routed port for ECN probes, three namespaces S (10.9.1.1) -- M (the
# router, 10.9.1.254 / 10.9.2.254) -- R (10.9.2.1), veths S:a-s/M:a-m and M:b-m/R:b-r, 2 ms of
# delay on R's egress (the ACK path). The port is M's egress b-m, on forwarded packets: on the
# sender's own device TCP small queues hold each socket to about 1 ms of its pacing rate, so a
# queue there hardly reaches a marking threshold. R's route back names dctcp as congctl (Linux
# accepts an ECT SYN's ECN request only when the listener's or the route's algorithm needs ECN,
# tcp_ecn_create_request); S and R ask for ECN (tcp_ecn = 1). The caller installs the port's qdisc.
vm_routed_setup() {
  vm_routed_teardown "$@"
  for _n in "$1" "$2" "$3"; do ip netns add "$_n" && ip -n "$_n" link set lo up || return 1; done
  ip link add a-s netns "$1" type veth peer name a-m netns "$2" &&
    ip link add b-m netns "$2" type veth peer name b-r netns "$3" || return 1
  ip -n "$1" addr add 10.9.1.1/24 dev a-s && ip -n "$2" addr add 10.9.1.254/24 dev a-m &&
    ip -n "$2" addr add 10.9.2.254/24 dev b-m && ip -n "$3" addr add 10.9.2.1/24 dev b-r || return 1
  ip -n "$1" link set a-s up && ip -n "$2" link set a-m up && ip -n "$2" link set b-m up &&
    ip -n "$3" link set b-r up || return 1
  ip -n "$1" route add default via 10.9.1.254 &&
    ip -n "$3" route add 10.9.1.0/24 via 10.9.2.254 congctl dctcp || return 1
  ip netns exec "$2" sysctl -q -w net.ipv4.ip_forward=1 &&
    ip netns exec "$1" sysctl -q -w net.ipv4.tcp_ecn=1 &&
    ip netns exec "$3" sysctl -q -w net.ipv4.tcp_ecn=1 || return 1
  ip netns exec "$3" tc qdisc add dev b-r root netem delay "${VM_ROUTED_DELAY_MS:-2}ms" || return 1
  ip netns exec "$1" ping -c 1 -W 5 10.9.2.1 > /dev/null
}

# vm_routed_teardown S M R: delete the three namespaces (and their veths).
vm_routed_teardown() {
  for _n in "$1" "$2" "$3"; do ip netns del "$_n" 2>/dev/null; done
  return 0
}

# vm_acked NS PORT: bytes_acked summed over NS's TCP sockets to remote PORT, from `ss -tin`.
vm_acked() {
  ip netns exec "$1" ss -tinH "dport = :$2" | tr ' ' '\n' | awk -F: '$1 == "bytes_acked" { s += $2 } END { print s + 0 }'
}

# VM_AWK_TCI: awk functions for a 95 % t interval (paste in front of an awk program):
# root(v), a square root by Newton iteration (busybox awk may be built without math), and
# tci(d, n), which sets TCI_M (the mean of d[1..n]), TCI_H (its interval's half-width, 0 when
# n < 2) and TCI_SD.
VM_AWK_TCI='
function root(v,    r, i) { if (v <= 0) return 0; r = v; for (i = 0; i < 60; i++) r = (r + v / r) / 2; return r }
function tci(d, n,    t, s, v, i, q) {
  split("12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228 2.201 2.179 2.160 2.145 2.131 2.120 2.110 2.101 2.093 2.086", t, " ")
  s = 0; for (i = 1; i <= n; i++) s += d[i]; TCI_M = (n > 0) ? s / n : 0
  TCI_H = 0; TCI_SD = 0
  if (n < 2) return
  v = 0; for (i = 1; i <= n; i++) v += (d[i] - TCI_M) * (d[i] - TCI_M); TCI_SD = root(v / (n - 1))
  q = (n - 1 <= 20) ? t[n - 1] : 1.96
  TCI_H = q * TCI_SD / root(n)
}
'

# vm_snmp_parse: /proc/net/snmp or /proc/net/netstat text on stdin (for each protocol a line of
# names, "Tcp: RtoAlgorithm RtoMin ...", then one of values, "Tcp: 1 200 ...") as one
# "Proto.Name VALUE" line per counter, e.g. "Tcp.InSegs 1234", "TcpExt.TCPPureAcks 56".
vm_snmp_parse() {
  awk '{ p = $1; sub(/:$/, "", p)
         if (!(p in names)) { names[p] = $0; next }
         n = split(names[p], h, " ")
         for (i = 2; i <= n && i <= NF; i++) print p "." h[i], $i
         delete names[p] }'
}

# vm_ns_counters NS: the SNMP and TcpExt counters of network namespace NS, as vm_snmp_parse
# prints them (no nstat needed).
vm_ns_counters() { ip netns exec "$1" cat /proc/net/snmp /proc/net/netstat | vm_snmp_parse; }

# vm_counter_delta BEFORE AFTER NAME: NAME's value in file AFTER minus its value in file BEFORE
# (both vm_ns_counters output); fails when NAME is in neither.
vm_counter_delta() {
  awk -v k="$3" 'FNR == NR { if ($1 == k) b = $2; next } $1 == k { a = $2; found = 1 }
    END { if (!found) exit 1; printf "%.0f\n", a - b }' "$1" "$2"
}

# vm_clock_shift: ci/vm-run's qemu -icount shift N (2^N ns per instruction on the virtual clock),
# from ${VM_CONF:-/host/vm.conf}; empty when the file names none.
vm_clock_shift() { sed -n 's/^VM_SHIFT=//p' "${VM_CONF:-/host/vm.conf}"; }

# vm_guest_instructions NS: guest instructions in NS nanoseconds of guest time on ci/vm-run's
# virtual clock (qemu -icount shift=N: 2^N ns per instruction; the shift is read from
# ${VM_CONF:-/host/vm.conf}). The CPU meter's busy time is then the count of instructions the
# guest ran outside the meter's spinners. Fails on the real clock, where time is not a count.
vm_guest_instructions() {
  _vc=$(sed -n 's/^VM_CLOCK=//p' "${VM_CONF:-/host/vm.conf}")
  _vs=$(vm_clock_shift)
  [ "$_vc" = virtual ] && [ -n "$_vs" ] || { echo "vm_guest_instructions: not on the virtual clock" >&2; return 1; }
  awk -v ns="$1" -v s="$_vs" 'BEGIN { d = 1; for (i = 0; i < s; i++) d *= 2; printf "%.0f\n", ns / d }'
}

# vm_per_ack_report FILE BASE: instructions per ACK from FILE's lines "ROUND KIND BYTES
# INSTRUCTIONS ACKS", for each kind in the order first seen: the mean over rounds of
# instructions / ACKs and of ACKs per GB (1e9 bytes), the per-round values, and for every kind
# but BASE two paired comparisons with the same round's BASE, as the mean over rounds with its
# 95 % t interval (with two rounds or more): the ratio of instructions per ACK minus 1 (%), and
# the extra instructions per ACK, (INSTRUCTIONS - BASE's INSTRUCTIONS * BYTES / BASE's BYTES) / ACKS: what the kind adds over
# BASE at equal bytes, spread over the kind's own ACKs.
vm_per_ack_report() {
  awk -v base="$2" "$VM_AWK_TCI"'
    NF >= 5 && $5 > 0 {
      if (!($2 in seen)) { seen[$2] = 1; order[++nk] = $2 }
      by[$2, $1] = $3; ins[$2, $1] = $4; ack[$2, $1] = $5
      if (!(($2, "n") in cnt)) cnt[$2, "n"] = 0
      cnt[$2, "n"]++; rid[$2, cnt[$2, "n"]] = $1
    }
    END {
      for (j = 1; j <= nk; j++) {
        k = order[j]; n = cnt[k, "n"]; vals = ""; sa = 0; sg = 0
        for (i = 1; i <= n; i++) {
          r = rid[k, i]; v = ins[k, r] / ack[k, r]
          sa += v; sg += ack[k, r] * 1e9 / by[k, r]
          vals = vals sprintf("%s%.0f", (i > 1) ? ", " : "", v)
        }
        printf "%-6s instructions/ACK %.0f (rounds: %s); ACKs/GB %.0f\n", k, sa / n, vals, sg / n
        if (k == base) continue
        m = 0
        for (i = 1; i <= n; i++) {
          r = rid[k, i]
          if (!((base, r) in ack) || by[base, r] <= 0) continue
          m++
          q[m] = (ins[k, r] / ack[k, r]) / (ins[base, r] / ack[base, r]) * 100 - 100
          x[m] = (ins[k, r] - ins[base, r] * by[k, r] / by[base, r]) / ack[k, r]
        }
        if (m == 0) { printf "       vs %s: no paired round\n", base; continue }
        tci(q, m); printf "       vs %s (%d rounds): instructions/ACK %+.1f %%", base, m, TCI_M
        if (m > 1) printf " [%+.1f, %+.1f]", TCI_M - TCI_H, TCI_M + TCI_H
        tci(x, m); printf "; extra per ACK at equal bytes %+.0f", TCI_M
        if (m > 1) printf " [%+.0f, %+.0f]", TCI_M - TCI_H, TCI_M + TCI_H
        printf "\n"
      }
    }' "$1"
}
