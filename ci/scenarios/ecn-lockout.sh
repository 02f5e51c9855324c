#!/bin/sh
# ci/scenarios/ecn-lockout.sh: in-VM probe of how two bulk flows share one ECN-marking FIFO,
# with the marker seeing GSO super-packets (Linux's default on a veth) and one-MTU packets.
# Run: ci/vm-run --results DIR ci/scenarios/ecn-lockout.sh [CC_A CC_B]   (default dctcp dctcp)
#
# snd's egress: tbf 100 Mbit/s, under it each marker in turn (a RED step marker at 30 kB, min =
# max, probability 1; fq_codel with one flow queue marking CE above 2.4 ms), 2 ms of delay on the
# ACK path; both ends' routes name dctcp as congctl, so both connections negotiate ECN. Per
# marker, two iperf3 flows (CC_A to port 5221, CC_B to 5222) for 6 s; prints the bytes each got
# acked over the window 2-5 s, the first flow's share and both sockets' cwnd (and DCTCP's alpha
# where `ss` shows it). Then snd's device is capped at one-MTU packets (gso_max_size 1514) and
# the markers run again. docs/results/mltcp.md ("MLTCP on ECN ports") has what it showed.
. "$MLTCP_VM_LIB" || { echo "cannot source vm-lib.sh"; exit 1; }
cc_a=${1:-dctcp} cc_b=${2:-dctcp}
vm_net_setup || exit 1
grep -q '^tcp_dctcp ' /proc/modules || insmod /host/modules/tcp_dctcp.ko || exit 1
vm_in_snd ip route replace "$VM_DST/32" dev "$VM_SND_DEV" congctl dctcp || exit 1
vm_in_rcv ip route replace "$VM_SRC/32" dev "$VM_RCV_DEV" congctl dctcp || exit 1
for q in 5221 5222; do vm_in_rcv iperf3 -s -D -p $q || exit 1; done
sleep 0.5

# acked PORT: bytes acked so far on snd's sockets to PORT (data and iperf3's control connection).
acked() { vm_in_snd ss -tinH "dport = :$1" | tr ' ' '\n' | awk -F: '$1 == "bytes_acked" { s += $2 } END { print s + 0 }'; }

# probe NAME QDISC-ARGS...: one pair of flows through tbf + the given marker.
probe() {
  name=$1; shift
  vm_net_unshape
  vm_in_snd tc qdisc add dev "$VM_SND_DEV" root handle 1: tbf rate 100mbit burst 64kb latency 100ms &&
    vm_in_snd tc qdisc add dev "$VM_SND_DEV" parent 1:1 handle 10: "$@" &&
    vm_in_rcv tc qdisc replace dev "$VM_RCV_DEV" root netem delay 2ms || { echo "$name: tc failed"; return 1; }
  ip netns exec "$VM_SND" iperf3 -c "$VM_DST" -p 5221 -C "$cc_a" -t 6 > /dev/null 2>&1 &
  ip netns exec "$VM_SND" iperf3 -c "$VM_DST" -p 5222 -C "$cc_b" -t 6 > /dev/null 2>&1 &
  sleep 2; a0=$(acked 5221) b0=$(acked 5222)
  sleep 3; a1=$(acked 5221) b1=$(acked 5222)
  st=$(vm_in_snd ss -tinH "( dport = :5221 or dport = :5222 )" | tr ' ' '\n' | grep '^cwnd:\|^dctcp:' | tr '\n' ' ')
  wait
  echo "$name: $cc_a $((a1 - a0)) bytes, $cc_b $((b1 - b0)) bytes, share of $cc_a $(awk -v a=$((a1 - a0)) -v b=$((b1 - b0)) 'BEGIN { printf "%.3f", a / (a + b) }') | $st"
}

markers() {
  probe "red-step-30kB$1" red limit 400000 min 30000 max 31500 avpkt 1500 burst 20 probability 1.0 ecn bandwidth 100mbit
  probe "fq_codel-1flow-2.4ms$1" fq_codel flows 1 ce_threshold 2400us ecn
}
markers " (GSO)"
vm_in_snd ip link set dev "$VM_SND_DEV" gso_max_size 1514 || exit 1
markers " (one MTU)"
vm_net_unshape
