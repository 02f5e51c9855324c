#!/bin/sh
# ci/scenarios/ecn-lockout.sh: in-VM probe of how two bulk flows share one ECN-marking switch
# port, with the port seeing GSO super-packets (Linux's default on a veth) and one-MTU packets.
# Run: ci/vm-run --results DIR ci/scenarios/ecn-lockout.sh [CC_A CC_B]   (default dctcp dctcp)
#
# Three namespaces as a scenario's star (vm-lib.sh's vm_routed_setup): el-s (sender) -- el-m
# (router, the port: its egress toward el-r, tbf 100 Mbit/s with a marker under it) -- el-r (receiver, 2 ms of delay on its
# egress: the ACK path). The port is on forwarded packets, as in the scenarios: a bottleneck on
# the sender's own device is held short by TCP small queues (a socket keeps about 1 ms of its
# pacing rate in the qdisc), so it hardly marks. Both hosts have net.ipv4.tcp_ecn = 1, and the
# receiver's listeners are iperf3's, whose sockets iperf3 -C sets after accept: the route of the
# receiver names dctcp as congctl, so an ECT SYN's request is accepted (Linux accepts it only when
# the listener's or the route's algorithm needs ECN). Per marker (a RED step at 30 kB, min = max,
# probability 1, as DCTCP's K; a RED ramp 15-45 kB; fq_codel with one flow queue marking CE
# above 2.4 ms of sojourn), two iperf3 flows (CC_A to port 5231, CC_B to 5232) start together
# for 10 s; prints the bytes each got acked over 3-8 s, the first flow's share, and both sockets'
# RTT, cwnd and DCTCP alpha where `ss` shows it. First with GSO, then with the sender's device
# capped at one-MTU packets (gso_max_size 1514, what a scenario's `[topology] gso = false` does).
# docs/results/mltcp.md ("MLTCP on ECN ports") has what it showed.
cc_a=${1:-dctcp} cc_b=${2:-dctcp}
. "${MLTCP_VM_LIB:-/host/ci/vm-lib.sh}" || { echo "cannot source vm-lib.sh"; exit 1; }
grep -q '^tcp_dctcp ' /proc/modules || insmod /host/modules/tcp_dctcp.ko || exit 1
vm_routed_setup el-s el-m el-r || exit 1
for q in 5231 5232; do ip netns exec el-r iperf3 -s -D -p $q || exit 1; done
sleep 0.5

# acked PORT: bytes acked so far on the sender's sockets to PORT (data and iperf3's control).
acked() { vm_acked el-s "$1"; }

# probe NAME QDISC-ARGS...: one pair of flows through the port's tbf + the given marker.
probe() {
  name=$1; shift
  ip netns exec el-m tc qdisc del dev b-m root 2>/dev/null
  ip netns exec el-m tc qdisc add dev b-m root handle 1: tbf rate 100mbit burst 64kb latency 100ms &&
    ip netns exec el-m tc qdisc add dev b-m parent 1:1 handle 10: "$@" || { echo "$name: tc failed"; return 1; }
  ip netns exec el-s iperf3 -c 10.9.2.1 -p 5231 -C "$cc_a" -t 10 > /dev/null 2>&1 &
  pa=$!
  ip netns exec el-s iperf3 -c 10.9.2.1 -p 5232 -C "$cc_b" -t 10 > /dev/null 2>&1 &
  pb=$!
  sleep 3; a0=$(acked 5231) b0=$(acked 5232)
  sleep 5; a1=$(acked 5231) b1=$(acked 5232)
  st=$(ip netns exec el-s ss -tinH "( dport = :5231 or dport = :5232 )" | grep -v 'bytes_acked:[0-9]\{1,4\} ' \
    | tr ' ' '\n' | grep '^rtt:\|^cwnd:\|^dctcp:' | tr '\n' ' ')
  wait $pa; wait $pb
  echo "$name: $cc_a $((a1 - a0)) bytes, $cc_b $((b1 - b0)) bytes, share of $cc_a $(awk -v a=$((a1 - a0)) -v b=$((b1 - b0)) 'BEGIN { printf "%.3f", a / (a + b) }') | $st"
}

markers() {
  probe "red-step-30kB$1" red limit 400000 min 30000 max 31500 avpkt 1500 burst 20 probability 1.0 ecn bandwidth 100mbit
  probe "red-ramp-15-45kB$1" red limit 400000 min 15000 max 45000 avpkt 1500 burst 20 probability 1.0 ecn bandwidth 100mbit
  probe "fq_codel-1flow-2.4ms$1" fq_codel flows 1 ce_threshold 2400us ecn
}
markers " (GSO)"
ip -n el-s link set dev a-s gso_max_size 1514 || exit 1
markers " (one MTU)"
