#!/bin/sh
# ci/vm-tests/ecn.sh: in-VM tests of mltcp_dctcp, sourced by suite.sh (uses its
# run_test/fail/note, vm-lib.sh's namespaces snd/rcv and the module under test):
#
#   ecn_mltcp_dctcp   through an ECN-marking bottleneck (tbf 100 Mbit/s whose queue is an
#                     fq_codel marking CE above 1 ms of sojourn time, 2 ms of delay on the ACK
#                     path) mltcp_dctcp negotiates ECN, sees CE echoes (TcpExt TCPDeliveredCE
#                     grows), keeps >= 80% of the rate and within 15% of Linux's tcp_dctcp.ko
#                     (best of up to 3 runs each: TCG on a shared host), with no more
#                     retransmissions than tcp_dctcp.ko (2x + 10); the receiver's socket runs mltcp_dctcp too, so its
#                     CE-echo state machine is exercised;
#   ecn_fallback      with ECN refused by the receiver (net.ipv4.tcp_ecn=0 there) mltcp_dctcp runs
#                     its Reno fallback: no CE echoes (its packets are not ECT), the transfer
#                     completes at >= 60% of the rate (Reno against CoDel's drops: 78-94% seen);
#   ecn_threshold_change  the PCN switch daemon's actuator (`ecn-qdisc`, the crate the daemon
#                     uses) changes a RED child's min/max and an fq_codel child's ce_threshold
#                     over rtnetlink in a named namespace, 20 times each while a flow fills the
#                     queue: every change succeeds, `tc -d` shows the new thresholds, RED keeps
#                     its ECN flag and EWMA weight, fq_codel keeps every other parameter; the
#                     time per change on an open socket (as the daemon keeps it) is reported.
#   ecn_fallback_setsockopt  mltcp_dctcp chosen by setsockopt before connect() (mltcp-burst
#                     --cc: the way the preload shim and the NCCL and libzmq patches choose it) to a
#                     peer that refuses ECN (a cubic listener: Linux accepts an ECT SYN's ECN
#                     request only for a listener or route whose algorithm needs ECN) runs the Reno
#                     fallback and sends no ECT data: the receiver counts (IpExt InECT0Pkts,
#                     InECT1Pkts, InCEPkts) at most one ECN-capable packet more than for Linux's
#                     dctcp chosen the same way (its ECN-setup SYN; ours adds the handshake's last
#                     ACK). Control: the same with the receiver's route naming dctcp (ECN
#                     negotiated), where it counts over 1000.
#   ecn_f_share       F's weighting on an ECN port: a routed port as in the
#                     scenarios (sender -- router holding tbf 100 Mbit/s + RED step marking at
#                     30 kB on forwarded packets -- receiver, 2 ms on the ACK path, one-MTU
#                     packets), an mltcp_dctcp flow with F forced by the module's parameters
#                     (slope_fx 0, intercept_fx F) beside Linux's dctcp flow, 8 s of both
#                     together: with F = 1 the pair shares about evenly (control: 0.5 +- 0.1),
#                     with F = 2 the mltcp_dctcp flow's share of the bytes acked is within 0.05
#                     of F's ratio 2/3, and the pair keeps >= 85 % of the port; with F = 2 and
#                     dctcp_scale_cut = 1 (the ECN cut divided by F) the share is larger, between
#                     F's ratio and F^2's (0.8), within 0.05.

ECN_RATE_MBIT=${SHAPED_RATE_MBIT:-100}

# ecn_shape: the marking bottleneck on snd's egress, the delay on rcv's (the ACK path), so the
# queue that builds is fq_codel's, where CE is marked.
ecn_shape() {
  vm_net_unshape
  vm_in_snd tc qdisc add dev "$VM_SND_DEV" root handle 1: tbf rate ${ECN_RATE_MBIT}mbit burst 64kb latency 100ms &&
  vm_in_snd tc qdisc add dev "$VM_SND_DEV" parent 1:1 handle 10: fq_codel ce_threshold 1ms ecn &&
  vm_in_rcv tc qdisc replace dev "$VM_RCV_DEV" root netem delay 2ms
}
ecn_unshape() {
  vm_net_unshape
  vm_in_rcv tc qdisc del dev "$VM_RCV_DEV" root 2>/dev/null
  vm_in_rcv sysctl -q -w net.ipv4.tcp_ecn=2
  vm_in_rcv ip route del "$VM_SRC/32" 2>/dev/null
  vm_in_snd ip route del "$VM_DST/32" 2>/dev/null
  return 0
}

# ecn_netstat NS TABLE REGEX: the sum of the /proc/net/netstat counters of TABLE (e.g. TcpExt)
# whose names match REGEX, in namespace NS.
ecn_netstat() {
  ip netns exec "$1" cat /proc/net/netstat | awk -v t="$2:" -v re="$3" '
    $1 == t && !h { for (i = 2; i <= NF; i++) n[i] = $i; h = 1; next }
    $1 == t && h  { for (i = 2; i <= NF; i++) if (n[i] ~ re) { s += $i; f = 1 } }
    END { if (f) print s }'
}

# ecn_delivered_ce: TcpExt TCPDeliveredCE in snd (packets whose ACK echoed CE, all sockets).
ecn_delivered_ce() { ecn_netstat "$VM_SND" TcpExt '^TCPDeliveredCE$'; }

# ecn_run NAME ALG: one 5 s iperf3 -C ALG; sets R_MBPS, R_CE (TCPDeliveredCE growth: packets
# whose ACK echoed CE) and R_RTX (retransmits). Both ends' routes name ALG as their congctl, the
# way DCTCP is deployed (RFC 8257 §3: both ends): Linux sends an ECN-setup SYN for an algorithm
# that needs ECN only if the socket has it when it connects (iperf3 sets -C after connect()), and
# accepts an ECT SYN's request only when the listener's algorithm, or the route's, needs ECN
# (tcp_ecn_create_request).
ecn_run() {
  _n=$1 _alg=$2
  vm_in_snd ip route replace "$VM_DST/32" dev "$VM_SND_DEV" congctl "$_alg" || fail "ip route ... congctl $_alg in snd failed"
  vm_in_rcv ip route replace "$VM_SRC/32" dev "$VM_RCV_DEV" congctl "$_alg" || fail "ip route ... congctl $_alg in rcv failed"
  _ce0=$(ecn_delivered_ce)
  vm_iperf "$OUT/$_n.json" -C "$_alg" -t 5 || fail "iperf3 -C $_alg failed"
  _cc=$(vm_iperf_cc "$OUT/$_n.json")
  [ "$_cc" = "$_alg" ] || fail "iperf3 -C $_alg ran with congestion control '$_cc'"
  R_MBPS=$(vm_iperf_mbps "$OUT/$_n.json") R_CE=$(( $(ecn_delivered_ce) - _ce0 )) R_RTX=$(vm_iperf_retrans "$OUT/$_n.json")
  vm_in_rcv ip route del "$VM_SRC/32" 2>/dev/null
  vm_in_snd ip route del "$VM_DST/32" 2>/dev/null
  return 0
}

test_ecn_mltcp_dctcp() {
  trap 'ecn_unshape' EXIT
  [ -n "$(ecn_delivered_ce)" ] || fail "no TCPDeliveredCE counter in /proc/net/netstat"
  grep -q '^tcp_dctcp ' /proc/modules || insmod /host/modules/tcp_dctcp.ko \
    || fail "cannot load /host/modules/tcp_dctcp.ko (the reference)"
  ecn_shape || fail "tc setup failed"
  best_m=0 best_d=0
  for attempt in 1 2 3; do
    ecn_run "ecn_dctcp_$attempt" dctcp
    d_mbps=$R_MBPS d_ce=$R_CE d_rtx=$R_RTX
    ecn_run "ecn_mltcp_dctcp_$attempt" "$ALG_DCTCP"
    m_mbps=$R_MBPS m_ce=$R_CE m_rtx=$R_RTX
    note "attempt $attempt: dctcp $d_mbps Mbit/s ($d_ce CE echoes, $d_rtx retransmits), $ALG_DCTCP $m_mbps Mbit/s ($m_ce CE echoes, $m_rtx retransmits)"
    rcc=$(vm_json_str "$OUT/ecn_mltcp_dctcp_$attempt.json" receiver_tcp_congestion)
    [ "$rcc" = "$ALG_DCTCP" ] || fail "the receiver's socket ran '$rcc', not $ALG_DCTCP"
    [ "$m_ce" -gt 0 ] || fail "$ALG_DCTCP saw no CE echo (TCPDeliveredCE did not grow): ECN not negotiated or not marked"
    [ "$d_ce" -gt 0 ] || fail "the reference dctcp saw no CE echo: the bottleneck does not mark"
    best_m=$(awk -v x="$best_m" -v y="$m_mbps" 'BEGIN { print (y > x) ? y : x }')
    best_d=$(awk -v x="$best_d" -v y="$d_mbps" 'BEGIN { print (y > x) ? y : x }')
    verdict=$(awk -v a="$best_m" -v b="$best_d" -v r="$ECN_RATE_MBIT" -v an="$ALG_DCTCP" 'BEGIN {
      if (a < 0.8 * r) { printf "%s %.1f Mbit/s < 80%% of %d Mbit/s", an, a, r; exit }
      d = (a - b) / b; if (d < 0) d = -d
      if (d > 0.15) printf "%s %.1f vs dctcp %.1f Mbit/s differ by %.0f%% > 15%%", an, a, b, d * 100 }')
    # Marks, not losses, carry the signal: no more retransmissions than the reference (slow
    # start's overshoot and TCG's timer jitter cost both a few).
    [ -z "$verdict" ] && [ "$m_rtx" -gt $((2 * d_rtx + 10)) ] && verdict="$ALG_DCTCP retransmitted $m_rtx segments, dctcp $d_rtx, through the same marking queue"
    [ -z "$verdict" ] && break
    note "$verdict"
  done
  [ -z "$verdict" ] || fail "$verdict"
}

test_ecn_fallback() {
  trap 'ecn_unshape' EXIT
  ecn_shape || fail "tc setup failed"
  vm_in_rcv sysctl -q -w net.ipv4.tcp_ecn=0 || fail "cannot disable ECN in rcv"
  # The receiver's listener (iperf3's, cubic) does not need ECN: without the route hint and with
  # tcp_ecn=0 it refuses the request.
  _ce0=$(ecn_delivered_ce)
  vm_iperf "$OUT/ecn_fallback.json" -C "$ALG_DCTCP" -t 5 || fail "iperf3 -C $ALG_DCTCP failed"
  [ "$(vm_iperf_cc "$OUT/ecn_fallback.json")" = "$ALG_DCTCP" ] || fail "ran with '$(vm_iperf_cc "$OUT/ecn_fallback.json")'"
  mbps=$(vm_iperf_mbps "$OUT/ecn_fallback.json") ce=$(( $(ecn_delivered_ce) - _ce0 ))
  note "$ALG_DCTCP without ECN: $mbps Mbit/s, $ce CE echoes, $(vm_iperf_retrans "$OUT/ecn_fallback.json") retransmits"
  [ "$ce" -eq 0 ] || fail "$ce CE echoes although the receiver refused ECN"
  awk -v a="$mbps" -v r="$ECN_RATE_MBIT" 'BEGIN { exit !(a >= 0.6 * r) }' \
    || fail "$ALG_DCTCP's Reno fallback reached only $mbps Mbit/s (< 60% of $ECN_RATE_MBIT)"
}

# ecn_tc_line NS DEV KIND: `tc -d qdisc show` line of DEV's qdisc of KIND in namespace NS.
ecn_tc_line() { ip netns exec "$1" tc -d qdisc show dev "$2" | grep "^qdisc $3 " | head -n 1; }

test_ecn_threshold_change() {
  command -v ecn-qdisc >/dev/null 2>&1 || fail "ecn-qdisc not on PATH (ci/vm-bins.txt)"
  trap 'ecn_unshape' EXIT
  vm_net_unshape
  vm_in_snd tc qdisc add dev "$VM_SND_DEV" root handle 1: tbf rate ${ECN_RATE_MBIT}mbit burst 64kb latency 100ms &&
  vm_in_snd tc qdisc add dev "$VM_SND_DEV" parent 1:1 handle 20: red limit 400000 min 30000 max 31500 avpkt 1500 burst 21 probability 1.0 ecn bandwidth ${ECN_RATE_MBIT}mbit &&
  vm_in_rcv tc qdisc add dev "$VM_RCV_DEV" root handle 1: tbf rate ${ECN_RATE_MBIT}mbit burst 64kb latency 100ms &&
  vm_in_rcv tc qdisc add dev "$VM_RCV_DEV" parent 1:1 handle 30: fq_codel ce_threshold 1ms ecn || fail "tc setup failed"
  red0=$(ecn_tc_line "$VM_SND" "$VM_SND_DEV" red) fq0=$(ecn_tc_line "$VM_RCV" "$VM_RCV_DEV" fq_codel)
  note "before: $red0 | $fq0"
  ewma0=$(echo "$red0" | sed -n 's/.* ewma \([0-9]*\).*/\1/p')
  [ -n "$ewma0" ] || fail "no ewma in: $red0"
  # A bulk flow keeps RED's queue busy while its thresholds change.
  vm_in_snd sysctl -q -w net.ipv4.tcp_ecn=1
  vm_iperf "$OUT/ecn_threshold_change.json" -C cubic -t 4 > /dev/null 2>&1 &
  ip=$!
  sleep 1
  : > /tmp/ecnq-times
  i=0
  while [ $i -lt 20 ]; do
    min=$(( i % 2 == 0 ? 12000 : 30000 )) ce=$(( i % 2 == 0 ? 100 : 1000 ))
    out=$(ecn-qdisc --netns "$VM_SND" --dev "$VM_SND_DEV" --parent 1:1 red --min-bytes $min --max-bytes $((min + 1500)) --rate-bps $((ECN_RATE_MBIT * 1000000)) 2>&1) \
      || fail "RED change $i to min $min failed: $out"
    line=$(ecn_tc_line "$VM_SND" "$VM_SND_DEV" red)
    echo "$line" | grep -q " min ${min}b max $((min + 1500))b " || fail "after change $i to min $min: $line"
    out=$(ecn-qdisc --netns "$VM_RCV" --dev "$VM_RCV_DEV" --parent 1:1 fq-codel --ce-threshold-us $ce 2>&1) \
      || fail "fq_codel change $i to $ce us failed: $out"
    i=$((i + 1))
  done
  # The daemon keeps its socket: time changes on one socket (the first opens it).
  out=$(ecn-qdisc --netns "$VM_SND" --dev "$VM_SND_DEV" --parent 1:1 --repeat 20 red --min-bytes 30000 --max-bytes 31500 --rate-bps $((ECN_RATE_MBIT * 1000000)) 2>&1) \
    || fail "repeated RED change failed: $out"
  echo "$out" | tail -n +2 | awk '{ print $3 }' > /tmp/ecnq-red
  note "RED change on an open socket during the flow (us): $(sort -n /tmp/ecnq-red | awk '{ a[NR] = $1 } END { printf "median %s, max %s of %d", a[int((NR + 1) / 2)], a[NR], NR }'); first (opens the socket): $(echo "$out" | head -n 1 | awk '{ print $3 }')"
  out=$(ecn-qdisc --netns "$VM_RCV" --dev "$VM_RCV_DEV" --parent 1:1 --repeat 20 fq-codel --ce-threshold-us 1000 2>&1) \
    || fail "repeated fq_codel change failed: $out"
  echo "$out" | tail -n +2 | awk '{ print $3 }' > /tmp/ecnq-fq
  note "fq_codel change on an open socket (us): $(sort -n /tmp/ecnq-fq | awk '{ a[NR] = $1 } END { printf "median %s, max %s of %d", a[int((NR + 1) / 2)], a[NR], NR }')"
  wait $ip
  red1=$(ecn_tc_line "$VM_SND" "$VM_SND_DEV" red) fq1=$(ecn_tc_line "$VM_RCV" "$VM_RCV_DEV" fq_codel)
  note "after: $red1 | $fq1"
  echo "$red1" | grep -q " ecn " || fail "RED lost its ecn flag: $red1"
  echo "$red1" | grep -q " ewma $ewma0 " || fail "RED's EWMA weight changed from $ewma0: $red1"
  # The last change set ce_threshold back to 1000 us (which the kernel shows as 999us, codel's
  # time unit), so the whole line is what it was: no other parameter moved.
  [ "$fq1" = "$fq0" ] || fail "fq_codel's parameters changed: '$fq0' -> '$fq1'"
  # An intermediate value shows up too.
  ecn-qdisc --netns "$VM_RCV" --dev "$VM_RCV_DEV" --parent 1:1 fq-codel --ce-threshold-us 250 > /dev/null \
    || fail "fq_codel change to 250 us failed"
  ecn_tc_line "$VM_RCV" "$VM_RCV_DEV" fq_codel | grep -q "ce_threshold 24[0-9]us\|ce_threshold 250us" \
    || fail "ce_threshold not 250us: $(ecn_tc_line "$VM_RCV" "$VM_RCV_DEV" fq_codel)"
  vm_in_snd sysctl -q -w net.ipv4.tcp_ecn=2
}


# ecn_ect_in: ECN-capable packets rcv has received so far (IpExt InECT0Pkts + InECT1Pkts +
# InCEPkts of its namespace: ECT(0), ECT(1), and CE-marked ones, which were ECT when sent).
ecn_ect_in() { ecn_netstat "$VM_RCV" IpExt '^In(ECT0|ECT1|CE)Pkts$'; }

# ecn_burst_ect NAME CC: two 10 MB bursts of CC, chosen before connect(), to mltcp-burst's sink
# on 5241; prints how many ECN-capable packets rcv received meanwhile.
ecn_burst_ect() {
  _m0=$(ecn_ect_in)
  ip netns exec "$VM_SND" mltcp-burst send --to "$VM_DST:5241" --cc "$2" --bursts 2 \
    --bytes 10000000 --gap-ms 100 > "$OUT/ecn_setsockopt_$1.log" 2>&1 || fail "mltcp-burst send failed: $(tail -n 2 "$OUT/ecn_setsockopt_$1.log")"
  echo $(( $(ecn_ect_in) - _m0 ))
}

test_ecn_fallback_setsockopt() {
  trap 'ecn_unshape; kill $ECN_SINK 2>/dev/null' EXIT
  ecn_shape || fail "tc setup failed"
  [ -n "$(ecn_ect_in)" ] || fail "no IpExt ECN counters in rcv's /proc/net/netstat"
  ip netns exec "$VM_RCV" mltcp-burst sink --listen "$VM_DST:5241" > /dev/null 2>&1 &
  ECN_SINK=$!
  sleep 0.5
  grep -q '^tcp_dctcp ' /proc/modules || insmod /host/modules/tcp_dctcp.ko \
    || fail "cannot load /host/modules/tcp_dctcp.ko (the reference)"
  reference=$(ecn_burst_ect reference dctcp)
  refused=$(ecn_burst_ect refused "$ALG_DCTCP")
  vm_in_rcv ip route replace "$VM_SRC/32" dev "$VM_RCV_DEV" congctl dctcp || fail "route congctl in rcv failed"
  negotiated=$(ecn_burst_ect negotiated "$ALG_DCTCP")
  vm_in_rcv ip route del "$VM_SRC/32" 2>/dev/null
  note "set before connect(), ECN-capable packets received: Linux's dctcp with ECN refused $reference; $ALG_DCTCP with ECN refused $refused, with ECN negotiated $negotiated"
  [ "$negotiated" -gt 1000 ] || fail "only $negotiated ECN-capable packets with ECN negotiated: the counters do not see ECT, the test proves nothing"
  # Linux's dctcp sends its SYN ECT (the ECN-setup SYN of an algorithm that needs ECN). The
  # fallback may send one packet more: the handshake's last ACK, which leaves between
  # tcp_init_congestion_control setting ECT again and the first data send, with no
  # congestion-control callback in between (tcp_mltcp.rs, Dctcp::cwnd_event).
  [ "$refused" -le $((reference + 1)) ] || fail "$refused of the fallback flow's packets were ECN-capable (Linux's dctcp: $reference): it sent ECT although the peer refused ECN (its CE marks go unechoed)"
}

# The routed port of ecn_f_share (vm-lib.sh's vm_routed_setup): fs-s (10.9.1.1) -- fs-m (router,
# the port on its egress fs-m:b-m) -- fs-r (10.9.2.1). The sender's device is capped at one-MTU
# packets: a marker fed 64 kB GSO super-packets locks one of two DCTCP flows out
# (docs/results/mltcp.md). The marking threshold in bytes is DCTCP's K.
ECN_FS_S=fs-s ECN_FS_M=fs-m ECN_FS_R=fs-r ECN_FS_DST=10.9.2.1 ECN_FS_K=30000

ecn_fs_teardown() { vm_routed_teardown $ECN_FS_S $ECN_FS_M $ECN_FS_R; }

ecn_fs_setup() {
  vm_routed_setup $ECN_FS_S $ECN_FS_M $ECN_FS_R || return 1
  ip -n $ECN_FS_S link set dev a-s gso_max_size 1514 || return 1
  ip netns exec $ECN_FS_M tc qdisc add dev b-m root handle 1: tbf rate ${ECN_RATE_MBIT}mbit burst 64kb latency 100ms &&
    ip netns exec $ECN_FS_M tc qdisc add dev b-m parent 1:1 handle 10: red limit 400000 min $ECN_FS_K max $((ECN_FS_K + 1500)) \
      avpkt 1500 burst 20 probability 1.0 ecn bandwidth ${ECN_RATE_MBIT}mbit
}

# ecn_fs_acked PORT: bytes acked on fs-s's sockets to fs-r's PORT.
ecn_fs_acked() { vm_acked $ECN_FS_S "$1"; }

ECN_SHARE_WINDOW_S=8

# ecn_share_pair F_FX NAME: an mltcp_dctcp flow with F forced to F_FX/1024 (mltcp-burst to the sink
# on 5231, chosen before connect(); two short warm-up bursts first, so the flow has the iteration
# estimate without which F stays 1) beside Linux's dctcp (iperf3 to 5232). Sets R_SHARE (the
# mltcp_dctcp flow's share of the bytes acked in the window), R_MBPS (both together) and R_F (F as
# mltcp-stat saw it mid-window).
ecn_share_pair() {
  _f=$1 _n=$2 _cut=${3:-0}
  echo 0 > "$ECN_P/slope_fx" && echo "$_f" > "$ECN_P/intercept_fx" || fail "cannot force F = $_f/1024"
  echo "$_cut" > "$ECN_P/dctcp_scale_cut" || fail "cannot set dctcp_scale_cut = $_cut"
  ip netns exec $ECN_FS_S iperf3 -c $ECN_FS_DST -p 5232 -C dctcp -t $((ECN_SHARE_WINDOW_S + 6)) > "$OUT/ecn_share_$_n.iperf3" 2>&1 &
  _pd=$!
  sleep 1
  # 140 MB: about 16 s at 2/3 of the port, longer than the window.
  ip netns exec $ECN_FS_S mltcp-burst send --to "$ECN_FS_DST:5231" --cc "$ALG_DCTCP" --warmup-bursts 2 \
    --warmup-bytes 200000 --gap-ms 100 --bursts 1 --bytes 140000000 > "$OUT/ecn_share_$_n.log" 2>&1 &
  _pm=$!
  sleep 3
  _m0=$(ecn_fs_acked 5231) _d0=$(ecn_fs_acked 5232)
  sleep $((ECN_SHARE_WINDOW_S / 2))
  ip netns exec $ECN_FS_S ss -tinH "( dport = :5231 or dport = :5232 )" > "$OUT/ecn_share_$_n.ss"
  R_F=$(ip netns exec $ECN_FS_S mltcp-stat --all --json | grep ':5231"' | grep -o '"f":[0-9.]*' | head -n 1 | cut -d: -f2)
  sleep $((ECN_SHARE_WINDOW_S - ECN_SHARE_WINDOW_S / 2))
  _m1=$(ecn_fs_acked 5231) _d1=$(ecn_fs_acked 5232)
  kill $_pm 2>/dev/null; wait $_pm 2>/dev/null
  wait $_pd || fail "iperf3 -C dctcp failed: $(tail -n 2 "$OUT/ecn_share_$_n.iperf3")"
  _dm=$((_m1 - _m0)) _dd=$((_d1 - _d0))
  [ $((_dm + _dd)) -gt 0 ] || fail "no bytes acked in the window"
  R_SHARE=$(awk -v m=$_dm -v d=$_dd 'BEGIN { printf "%.3f", m / (m + d) }')
  R_MBPS=$(awk -v m=$_dm -v d=$_dd -v w="$ECN_SHARE_WINDOW_S" 'BEGIN { printf "%.1f", (m + d) * 8 / w / 1e6 }')
  note "F = $_f/1024 (mltcp-stat: ${R_F:-none}), dctcp_scale_cut $_cut, beside dctcp, ${ECN_SHARE_WINDOW_S} s: $ALG_DCTCP $_dm bytes, dctcp $_dd bytes, share $R_SHARE, port $R_MBPS Mbit/s"
  note "  mid-window: $(tr -s ' \t' ' ' < "$OUT/ecn_share_$_n.ss" | grep -o 'cwnd:[0-9]*\|rtt:[0-9.]*/[0-9.]*\|dctcp:([^)]*)\|retrans:[0-9/]*' | tr '\n' ' ')"
}

test_ecn_f_share() {
  [ "$SUBSTITUTE" = 0 ] || skip "needs the module's parameters (a forced F)"
  need_module_params
  ECN_P=/sys/module/$PMOD/parameters
  slope0=$(cat "$ECN_P/slope_fx") icpt0=$(cat "$ECN_P/intercept_fx") cut0=$(cat "$ECN_P/dctcp_scale_cut")
  trap 'echo "$slope0" > "$ECN_P/slope_fx"; echo "$icpt0" > "$ECN_P/intercept_fx"; echo "$cut0" > "$ECN_P/dctcp_scale_cut"; kill $ECN_SINK $ECN_IPERF 2>/dev/null; ecn_fs_teardown' EXIT
  grep -q '^tcp_dctcp ' /proc/modules || insmod /host/modules/tcp_dctcp.ko \
    || fail "cannot load /host/modules/tcp_dctcp.ko (the reference)"
  ecn_fs_setup || fail "routed port setup failed"
  ip netns exec $ECN_FS_R mltcp-burst sink --listen "$ECN_FS_DST:5231" > /dev/null 2>&1 &
  ECN_SINK=$!
  ip netns exec $ECN_FS_R iperf3 -s -p 5232 > /dev/null 2>&1 &
  ECN_IPERF=$!
  sleep 0.5
  ecn_share_pair 1024 f1
  ref=$R_SHARE
  ecn_share_pair 2048 f2 0
  case "$R_F" in 2|2.0|2.00) ;; *) fail "mltcp-stat showed F = '${R_F:-none}' for the F-forced flow, not 2" ;; esac
  inc=$R_SHARE inc_mbps=$R_MBPS
  ecn_share_pair 2048 f2cut 1
  cut=$R_SHARE
  note "share of the mltcp_dctcp flow with F = 1: $ref; with F = 2: $inc (F's ratio 0.667), and with its cut divided by F too: $cut"
  verdict=$(awk -v ref="$ref" -v got="$inc" -v cut="$cut" -v mbps="$inc_mbps" -v r="$ECN_RATE_MBIT" 'BEGIN {
    want = 2 / 3
    if (ref < 0.4 || ref > 0.6) printf "with F = 1 the flow had %.3f of the port beside dctcp, not 0.5 +- 0.1 (the control)", ref
    else if (got < want - 0.05 || got > want + 0.05) printf "the F = 2 flow had %.3f of the port, not within 0.05 of 2/3", got
    else if (mbps < 0.85 * r) printf "the pair used %.1f Mbit/s of %d (< 85 %%)", mbps, r
    # dctcp_scale_cut = 1: increase x F and cut / F put the windows between F : 1 (a cut in
    # every window for both flows) and F^2 : 1 (cuts as often as a window is marked at all).
    else if (cut <= got || cut < want - 0.05 || cut > 0.8 + 0.05) printf "with the cut divided by F the F = 2 flow had %.3f, not above %.3f and within [0.617, 0.85]", cut, got }')
  [ -z "$verdict" ] || fail "$verdict"
}
