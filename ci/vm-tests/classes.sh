#!/bin/sh
# ci/vm-tests/classes.sh: in-VM test of the testbed's switch-port traffic classes, sourced by
# suite.sh (uses its run_test/fail/note and vm-lib.sh's namespaces snd/rcv):
#
#   port_classes  snd's egress built by `trainemu port --classes 2` (what a scenario's
#                 `classes = { training = 2 }` port gets, the classes installed over rtnetlink
#                 by ecn_qdisc as `ccp-agent switch` installs them: tbf 40 Mbit/s, HTB weighting
#                 the training group 1:1 against the rest, strict priority between AF41 and
#                 AF31, u32 on the DS field). Two CUBIC flows, AF41 (TOS 0x88) and AF31 (0x68):
#                 in a 3 s window while both send, AF41's band carries >= 80 % of the training
#                 bytes (strict) and the port sends >= 85 % of its rate (work-conserving).
#   port_classes_weighting  (run only when named) the same port, AF41 beside an unmarked CUBIC
#                 flow (TOS 0): each group carries 30-70 % of the port's bytes (1:1). It fails
#                 intermittently: one group got 4 % (three runs inside the full suite, one with
#                 the AF41 group starved, in a VM of its own with two vCPUs) and passed exactly
#                 1:1 in others; docs/results/classes.md#port-classes-in-the-suite.
# Byte counts from `tc -s class show` (bands 31:1, 31:2, the other group 30:20); each test has
# its own iperf3 servers.

CLASSES_RATE_MBIT=40
CLASSES_PORTS="5211 5212 5213 5214"

# classes_bytes CLASS: bytes class CLASS (e.g. 31:1) of snd's egress has sent so far.
classes_bytes() {
  vm_in_snd tc -s class show dev "$VM_SND_DEV" | awk -v c="$1" '
    $1 == "class" && $3 == c { want = 1; next }
    want && $1 == "Sent" { print $2; exit }'
}

# classes_window SECONDS CLASS...: the bytes each CLASS sent over the next SECONDS, on one line.
classes_window() {
  _w=$1; shift
  _before=""
  for _c in "$@"; do _before="$_before $(classes_bytes "$_c")"; done
  sleep "$_w"
  _i=0 _out=""
  for _c in "$@"; do
    _i=$((_i + 1))
    _b=$(echo $_before | cut -d' ' -f$_i)
    _out="$_out $(( $(classes_bytes "$_c") - _b ))"
  done
  echo $_out
}

# classes_pair PORT_A TOS_A PORT_B TOS_B CLASS...: two CUBIC flows of 8 s, marked TOS_A and
# TOS_B, to the servers on PORT_A and PORT_B; after 3 s, the bytes of each CLASS over a 3 s
# window (classes_window).
classes_pair() {
  _pta=$1 _ta=$2 _ptb=$3 _tb=$4; shift 4
  vm_iperf "$CCP_CLASSES_OUT/$_pta.json" -p "$_pta" -C cubic -t 8 -S "$_ta" > /dev/null 2>&1 &
  _pa=$!
  vm_iperf "$CCP_CLASSES_OUT/$_ptb.json" -p "$_ptb" -C cubic -t 8 -S "$_tb" > /dev/null 2>&1 &
  _pb=$!
  sleep 3
  classes_window 3 "$@"
  wait $_pa; _ra=$?
  wait $_pb; _rb=$?
  [ $_ra -eq 0 ] && [ $_rb -eq 0 ]
}

# classes_setup: the port and the iperf3 servers; sets window_bytes.
classes_setup() {
  CCP_CLASSES_OUT=/results/suite/classes
  mkdir -p "$CCP_CLASSES_OUT"
  vm_net_unshape
  trap 'vm_net_unshape; for p in $CLASSES_PORTS; do kill "$(cat /tmp/classes-iperf3-$p.pid)" 2>/dev/null; done' EXIT
  trainemu port --ns "$VM_SND" --dev "$VM_SND_DEV" --rate-mbit $CLASSES_RATE_MBIT \
    --queue-ms 20 --classes 2 || fail "trainemu port failed"
  note "qdiscs: $(vm_in_snd tc qdisc show dev "$VM_SND_DEV" | awk '{ print $2 " " $3 }' | tr '\n' ' ')"
  for p in $CLASSES_PORTS; do
    vm_in_rcv iperf3 -s -D -J -p "$p" -I "/tmp/classes-iperf3-$p.pid" || fail "iperf3 server on $p failed"
  done
  sleep 0.5
  window_bytes=$((CLASSES_RATE_MBIT * 1000000 / 8 * 3))
}

test_port_classes() {
  classes_setup
  # Strict priority: AF41 against AF31.
  w=$(classes_pair 5213 0x88 5214 0x68 31:1 31:2) || fail "an iperf3 flow failed (AF41/AF31)"
  set -- $w
  note "AF41 against AF31, 3 s window: band 31:1 $1 bytes, 31:2 $2 bytes (port: $window_bytes)"
  [ $(( ($1 + $2) * 100 )) -ge $((window_bytes * 85)) ] || fail "the port sent $(( $1 + $2 )) bytes of $window_bytes in 3 s (< 85 %)"
  [ $(( $1 * 100 )) -ge $(( ($1 + $2) * 80 )) ] || fail "AF41 had $1 of $(( $1 + $2 )) training bytes (< 80 %): no strict priority"
}

test_port_classes_weighting() {
  classes_setup
  # 1:1 between the training group and the rest: AF41 against an unmarked flow.
  w=$(classes_pair 5211 0x88 5212 0 31:1 30:20) || fail "an iperf3 flow failed (AF41/unmarked)"
  set -- $w
  note "AF41 against unmarked, 3 s window: band 31:1 $1 bytes, other group 30:20 $2 bytes"
  total=$(( $1 + $2 ))
  [ $((total * 100)) -ge $((window_bytes * 85)) ] || fail "the port sent $total bytes of $window_bytes in 3 s (< 85 %)"
  for b in $1 $2; do
    [ $((b * 100)) -ge $((total * 30)) ] && [ $((b * 100)) -le $((total * 70)) ] \
      || fail "a group had $b of $total bytes: not within 30-70 % (1:1 weighting)"
  done
}
