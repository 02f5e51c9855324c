#!/bin/sh
# ci/vm-tests/bpf.sh: in-VM tests of mltcp-bpf (docs/bpf.md), the BPF struct_ops mltcp and
# mltcp_cubic, on Debian's stock kernels (12's 6.1, and bookworm-backports' 6.12), which cannot
# load tcp_mltcp.ko, and on the testbed's own kernel booted without it (--no-module; it has BTF
# since 2026-11-29). Sourced by suite.sh (uses its run_test/fail/note/allow_cc and vm-lib.sh's
# namespaces snd/rcv); run only when named, `bpf` naming them all:
#
#   ci/vm-run --kernel-deb debian12 ci/vm-tests/suite.sh bpf
#   ci/vm-run --kernel-deb debian12-backports ci/vm-tests/suite.sh bpf
#   ci/vm-run --no-module ci/vm-tests/suite.sh bpf
#
#   bpf_load          load (libbpf reads CONFIG_HZ from the Kconfig vm-run ships as
#                     /host/boot/config-<release>, or on the testbed's kernel from
#                     /proc/config.gz); both algorithms registered
#   bpf_bad_input     unknown parameter, out-of-range value, malformed pair, a second load:
#                     refused, each with its cause
#   bpf_setsockopt    a 4 s transfer on each algorithm selected by setsockopt (iperf3 -C), over
#                     100 Mbit/s: `ss -ti` names the algorithm, > 50 Mbit/s, status counts flows
#   bpf_sysctl        mltcp_cubic as snd's default (sysctl) selects it
#   bpf_iterations    iteration-shaped traffic (mltcp-burst, 5 bursts of 500 kB, 300 ms apart
#                     so that the socket drains between them: a boundary needs a send with
#                     nothing in flight): status counts >= 3 measured iterations
#   bpf_set           set changes parameters, status shows them; a second `load --exist-ok
#                     NAME=VALUE` (the boot unit's and the init container's) keeps the
#                     registration and sets the defaults changed by NAME=VALUE
#   bpf_unload_in_use unload while a flow uses mltcp: unregistered at once, the flow finishes,
#                     a new socket cannot select it, a second unload says there is nothing
#   bpf_agent         `ccp-agent run --ipc bpf` (the BPF agent datapath) schedules the ring job
#                     of ccp.sh's ccp_agent_smoke on BPF mltcp: every iteration completes, its
#                     status lists the job's flows with a scheduled rate and, from the
#                     datapath's reports, an achieved rate or RTT; no message refused;
#                     then kill -9 of the agent: a new mltcp flow runs unpaced (> 50 Mbit/s)
#                     once the heartbeat has expired (1 s). Run after bpf_load.
#   bpf_agent_hold    an agent on the BPF datapath holds one long flow at the rate it commands,
#                     and the same flow runs free once the agent is killed: `ccp-test-agent
#                     --ipc bpf const-rate --rate-mbit 20` (ccp-ipc's bpf backend, the one
#                     `ccp-agent run --ipc bpf` uses; it installs the slot program and sets Rate)
#                     and one 14 s `iperf3 -C mltcp` over tbf 100 Mbit/s (the 5 ms delay on the
#                     receiver's egress, the ACK path: under TCG, TCP's internal pacing behind a
#                     netem on the sender delivers only ~75 % of its rate, see ccp.sh); kill -9
#                     of the agent at ~5.5 s. The agent saw the flow's CREATE; from the
#                     receiver's 0.5 s intervals: held from 1 s to the kill at 20 Mbit/s ±30 %
#                     (no interval above 30); the socket's pacing limit (`ss -ti`, "pacing_rate
#                     R/LIMIT") is 20 Mbit/s ±1 % while held and gone 4 s after the kill; from
#                     1.5 s after the kill (heartbeat 1 s) > 60 Mbit/s; no interval below 1 Mbit/s
#                     (no stall at the release). Run after bpf_load.
#   bpf_agent_class   the agent's traffic class on the wire through the BPF datapath: `ccp-test-agent
#                     --ipc bpf const-rate --rate-mbit 1000 --dscp 46` (a rate above the link's:
#                     the agent only marks) under a 7 s `iperf3 -C mltcp` into a 40 Mbit/s tbf
#                     with a prio qdisc whose u32 filter sends DSCP 46 to band 10:1 (ccp.sh's
#                     ccp_class_shape): under the agent band 10:1 carries > 1 MB and > 10x the
#                     default band's bytes; kill -9 of the agent, and from 2 s to 4 s after it
#                     (heartbeat 1 s, then the next ACK gives the socket its own TOS back) band
#                     10:1 grows by at most 64 kB while 10:2 carries > 1 MB. Run after bpf_load.
#   bpf_agent_cubic   the same agent (const-rate 20 Mbit/s over --ipc bpf) holds an `mltcp_cubic`
#                     flow: one 6 s `iperf3 -C mltcp_cubic` over tbf 100 Mbit/s; the agent saw
#                     its CREATE, the socket's pacing limit is 20 Mbit/s ±1 %, the receiver's
#                     intervals from 1 s to 5 s average 20 Mbit/s ±30 %. Run after bpf_load.
# Files: /results/suite/bpf/ (bpf_agent_hold, bpf_agent_class, bpf_agent_cubic:
# /results/suite/bpf/hold/).

BPF_TESTS="bpf_load bpf_bad_input bpf_setsockopt bpf_sysctl bpf_iterations bpf_set bpf_agent bpf_agent_hold bpf_agent_class bpf_agent_cubic bpf_unload_in_use"
BPF_OUT=/results/suite/bpf

bpf_available() { cat /proc/sys/net/ipv4/tcp_available_congestion_control; }

# bpf_expect_error OUTFILE TEXT CMD...: CMD must fail and say TEXT.
bpf_expect_error() {
  _f=$1 _t=$2; shift 2
  if "$@" > "$_f" 2>&1; then fail "'$*' succeeded"; fi
  grep -qF "$_t" "$_f" || fail "'$*' did not say '$_t': $(tail -n 2 "$_f")"
  note "$* -> $(grep -F "$_t" "$_f" | head -n 1)"
}

# bpf_stat_field ALG FIELD: a number of `mltcp-bpf status`'s counter line of ALG ("flows started",
# "iterations").
bpf_stat_field() {
  mltcp-bpf status 2>/dev/null | grep "^$1: flows" | sed "s/.*$2 \([0-9]*\).*/\1/"
}

test_bpf_load() {
  [ -e /sys/kernel/btf/vmlinux ] || fail "kernel $(uname -r) has no /sys/kernel/btf/vmlinux (CONFIG_DEBUG_INFO_BTF)"
  mkdir -p "$BPF_OUT"
  kconfig=$(vm_bpf_kconfig) \
    || fail "no Kconfig: neither /proc/config.gz (CONFIG_IKCONFIG_PROC) nor one shipped in /host/boot (ci/vm-run --kernel-deb)"
  note "kernel $(uname -r), HZ from $kconfig"
  mltcp-bpf load > "$BPF_OUT/load.txt" 2>&1 || fail "mltcp-bpf load failed: $(tail -n 5 "$BPF_OUT/load.txt")"
  for a in mltcp mltcp_cubic; do
    bpf_available | grep -qw "$a" || fail "$a not registered after load: $(bpf_available)"
  done
  note "available: $(bpf_available)"
}

test_bpf_bad_input() {
  bpf_expect_error "$BPF_OUT/bad1.txt" 'unknown parameter "nosuch"' mltcp-bpf set nosuch=1
  bpf_expect_error "$BPF_OUT/bad2.txt" "idle_gap_us = 5 is out of range [100, 10000000]" mltcp-bpf set idle_gap_us=5
  bpf_expect_error "$BPF_OUT/bad3.txt" "already registered" mltcp-bpf load
  bpf_expect_error "$BPF_OUT/bad4.txt" "is not NAME=VALUE" mltcp-bpf set slope_fx
}

# bpf_transfer NAME ALG: a 4 s iperf3 -C ALG over the shaped link; `ss -ti` must name ALG while it runs.
bpf_transfer() {
  vm_iperf "$BPF_OUT/$1.json" -C "$2" -t 4 & _pid=$!
  sleep 2
  vm_in_snd ss -tin state established dst "$VM_DST" > "$BPF_OUT/$1-ss.txt" 2>&1
  wait "$_pid" || fail "iperf3 -C $2 failed: $(tail -n 3 "$BPF_OUT/$1.json")"
  [ "$(vm_iperf_cc "$BPF_OUT/$1.json")" = "$2" ] || fail "iperf3 ran with '$(vm_iperf_cc "$BPF_OUT/$1.json")', not $2"
  grep -qw "$2" "$BPF_OUT/$1-ss.txt" || fail "ss -ti did not show $2: $(head -n 4 "$BPF_OUT/$1-ss.txt")"
  _mbps=$(vm_iperf_mbps "$BPF_OUT/$1.json")
  note "$2: ${_mbps} Mbit/s on a 100 Mbit/s link, $(vm_iperf_retrans "$BPF_OUT/$1.json") retransmissions"
  awk -v m="$_mbps" 'BEGIN { exit !(m > 50) }' || fail "$2 reached only $_mbps Mbit/s of 100"
}

test_bpf_setsockopt() {
  vm_net_setup || fail "network setup failed"
  vm_net_shape 100mbit 5ms || fail "tc shaping failed"
  _s0=$(bpf_stat_field mltcp "flows started")
  bpf_transfer setsockopt-mltcp mltcp
  bpf_transfer setsockopt-mltcp_cubic mltcp_cubic
  _s1=$(bpf_stat_field mltcp "flows started")
  [ "${_s1:-0}" -gt "${_s0:-0}" ] || fail "status counted no new mltcp flow ($_s0 -> $_s1)"
  note "mltcp flows started: $_s0 -> $_s1"
}

test_bpf_sysctl() {
  vm_net_setup && vm_net_shape 100mbit 5ms || fail "network setup failed"
  # Another namespace than the initial one may default only to an allowed algorithm.
  allow_cc mltcp_cubic || fail "cannot allow mltcp_cubic"
  vm_in_snd sysctl -q -w net.ipv4.tcp_congestion_control=mltcp_cubic \
    || fail "sysctl tcp_congestion_control=mltcp_cubic refused"
  vm_iperf "$BPF_OUT/sysctl.json" -t 2 || fail "iperf3 failed"
  [ "$(vm_iperf_cc "$BPF_OUT/sysctl.json")" = mltcp_cubic ] \
    || fail "the default selected '$(vm_iperf_cc "$BPF_OUT/sysctl.json")', not mltcp_cubic"
}

test_bpf_iterations() {
  vm_net_setup && vm_net_shape 100mbit 5ms || fail "network setup failed"
  _i0=$(bpf_stat_field mltcp iterations)
  vm_in_rcv mltcp-burst sink --listen "$VM_DST:7000" > "$BPF_OUT/sink.txt" 2>&1 & _sink=$!
  sleep 0.5
  vm_in_snd mltcp-burst send --to "$VM_DST:7000" --bursts 5 --bytes 500000 --gap-ms 300 --cc mltcp \
    > "$BPF_OUT/burst.txt" 2>&1 || { kill "$_sink"; fail "mltcp-burst send failed: $(tail -n 3 "$BPF_OUT/burst.txt")"; }
  kill "$_sink" 2>/dev/null
  _i1=$(bpf_stat_field mltcp iterations)
  note "mltcp iterations measured: $_i0 -> $_i1 (of 5 bursts, the first boundary only aligns: 3 are measured)"
  [ $((_i1 - _i0)) -ge 3 ] || fail "only $((_i1 - _i0)) iterations measured over 5 bursts"
}

test_bpf_set() {
  mltcp-bpf set slope_fx=2048 scale_decrease=1 > "$BPF_OUT/set.txt" 2>&1 || fail "set failed: $(cat "$BPF_OUT/set.txt")"
  mltcp-bpf status > "$BPF_OUT/status.txt" 2>&1 || fail "status failed"
  grep -qx "slope_fx = 2048" "$BPF_OUT/status.txt" || fail "status does not show slope_fx = 2048"
  grep -qx "scale_decrease = 1" "$BPF_OUT/status.txt" || fail "status does not show scale_decrease = 1"
  mltcp-bpf load --exist-ok idle_gap_us=5000 > "$BPF_OUT/exist-ok.txt" 2>&1 \
    || fail "load --exist-ok over mltcp-bpf's registration failed: $(tail -n 3 "$BPF_OUT/exist-ok.txt")"
  mltcp-bpf status > "$BPF_OUT/status2.txt" 2>&1 || fail "status failed"
  grep -qx "idle_gap_us = 5000" "$BPF_OUT/status2.txt" || fail "load --exist-ok did not set idle_gap_us = 5000"
  grep -qx "scale_decrease = 2" "$BPF_OUT/status2.txt" || fail "load --exist-ok did not reset scale_decrease to its default"
  note "load --exist-ok: $(tail -n 1 "$BPF_OUT/exist-ok.txt")"
  mltcp-bpf load --exist-ok >/dev/null 2>&1 || fail "setting the defaults back failed"
}

# Unload does not wait for the sockets using the algorithm: they keep its programs until they
# close, new ones cannot select it.
test_bpf_unload_in_use() {
  vm_net_setup && vm_net_shape 100mbit 5ms || fail "network setup failed"
  vm_iperf "$BPF_OUT/unload.json" -C mltcp -t 5 & _pid=$!
  sleep 2
  mltcp-bpf unload > "$BPF_OUT/unload.txt" 2>&1 || { wait "$_pid"; fail "unload failed: $(cat "$BPF_OUT/unload.txt")"; }
  bpf_available | grep -qw mltcp && fail "mltcp still registered after unload: $(bpf_available)"
  wait "$_pid" || fail "the flow using mltcp failed after unload: $(tail -n 3 "$BPF_OUT/unload.json")"
  note "the running flow finished after unload: $(vm_iperf_mbps "$BPF_OUT/unload.json") Mbit/s"
  if vm_iperf "$BPF_OUT/after-unload.json" -C mltcp -t 1 2>/dev/null; then
    fail "a new socket could still select mltcp after unload"
  fi
  bpf_expect_error "$BPF_OUT/unload2.txt" "nothing to unload" mltcp-bpf unload
}

test_bpf_agent() {
  # ccp.sh's agent job helpers (sourced under suite.sh, it only defines them).
  . "$TESTS_DIR/ccp.sh" || fail "cannot source $TESTS_DIR/ccp.sh"
  CCP_OUT=$BPF_OUT/agent
  ccp_agent_job_files /tmp/bpf-agent bpf_agent
  ccp_agent_run_job bpf_agent bpf-agent --ipc bpf
  # The agent's status every 0.5 s while the job runs: an achieved rate or an RTT above 0 comes
  # only from the datapath's MEASURE records.
  : > "$CCP_OUT/bpf_agent.statuses"
  while kill -0 $te 2>/dev/null; do
    ccp-agent status --config "$d/agent.toml" >> "$CCP_OUT/bpf_agent.statuses" 2>&1
    sleep 0.5
  done
  wait $te || fail "trainemu failed: $(tail -n 5 "$CCP_OUT/bpf_agent.trainemu.log")"
  kill -0 "$CCP_AGENT_PID" 2>/dev/null || fail "ccp-agent died during the job: $(tail -n 5 "$log")"
  st=$(grep "^mltcp.R " "$CCP_OUT/bpf_agent.statuses")
  reported=$(echo "$st" | awk '$6 + 0 > 0 || $8 + 0 > 0' | wc -l | tr -d ' ')
  note "status lines of the job's flows: $(echo "$st" | wc -l | tr -d ' '), with an achieved rate or RTT from reports: $reported"
  echo "$st" | awk '$6 + 0 > 0' | head -n 2 | sed 's/^/  /'
  [ "$reported" -gt 0 ] || fail "no report reached the agent (achieved rate and RTT 0 throughout)"
  recs=$(cat "$CCP_OUT"/bpf-agent/bpf_agent/runs/mltcp/s1/iterations.jsonl 2>/dev/null | wc -l | tr -d ' ')
  note "trainemu: $recs iteration records (want 2 workers x 25)"
  [ "$recs" = 50 ] || fail "the job did not complete all iterations ($recs records)"
  echo "$st" | grep "^mltcp.R " | awk '{ if ($5 + 0 > 0) ok = 1 } END { exit !ok }' \
    || fail "no flow of the job has a scheduled rate: $st"
  grep -q "refused" "$log" && fail "the BPF datapath refused a message: $(grep refused "$log" | head -n 2)"
  kill -9 "$CCP_AGENT_PID"
  wait "$CCP_AGENT_PID" 2>/dev/null
  CCP_AGENT_PID=""
  sleep 1.5
  vm_net_setup && vm_net_shape 100mbit 5ms || fail "network setup failed"
  bpf_transfer after-agent-kill mltcp
}

# bpf_pacing_limit WHEN [CC]: the pacing limit (SO_MAX_PACING_RATE) of the sender's CC socket
# (default mltcp) to port $CCP_PORT in bit/s, from `ss -ti`'s "pacing_rate RATE/LIMIT" (no
# "/LIMIT": no limit, empty output); ss's raw output in $CCP_OUT/hold-ss-WHEN.txt.
bpf_pacing_limit() {
  vm_in_snd ss -tinH state established "( dport = :$CCP_PORT )" > "$CCP_OUT/hold-ss-$1.txt" 2>&1
  grep -w "${2:-mltcp}" "$CCP_OUT/hold-ss-$1.txt" | grep -o 'pacing_rate [^ ]*/[^ ]*' | head -n 1 | sed 's|.*/||' \
    | awk '{ v = $0; m = 1; if (v ~ /Gbps$/) m = 1e9; else if (v ~ /Mbps$/) m = 1e6; else if (v ~ /Kbps$/) m = 1e3
             sub(/[KMG]?bps$/, "", v); printf "%.0f\n", v * m }'
}

# bpf_limit_is LIMIT MBIT: is the pacing limit LIMIT (bit/s, bpf_pacing_limit) MBIT Mbit/s ±1 %?
bpf_limit_is() {
  awk -v x="$1" -v r="$2" 'BEGIN { exit !(x != "" && x >= 0.99 * r * 1e6 && x <= 1.01 * r * 1e6) }'
}

# bpf_hold_setup: ccp.sh's set-up with tbf 100 Mbit/s on the sender and 5 ms of netem on the
# receiver's egress (the ACK path), torn down at the test's exit.
bpf_hold_setup() {
  ccp_setup
  trap 'ccp_agent_stop; vm_net_unshape; vm_in_rcv tc qdisc del dev "$VM_RCV_DEV" root 2>/dev/null' EXIT
  vm_in_snd tc qdisc add dev "$VM_SND_DEV" root handle 1: tbf rate 100mbit burst 64kb latency 100ms \
    || fail "tbf on the sender failed"
  vm_in_rcv tc qdisc add dev "$VM_RCV_DEV" root netem delay 5ms || fail "netem on the receiver failed"
}

# bpf_agent_start LOG CONST_RATE_ARGS...: `ccp-test-agent --ipc bpf const-rate ARGS` attached to
# the BPF agent datapath, its output in LOG.
bpf_agent_start() {
  _log=$1; shift
  ccp_agent_start "$_log" --ipc bpf const-rate "$@" || fail "ccp-test-agent --ipc bpf did not start"
  grep -q "attached to the BPF agent datapath" "$_log" || fail "the agent did not attach: $(tail -n 3 "$_log")"
}

# ccp.sh's const-rate helpers over the BPF agent datapath: the agent commands a rate well below
# the link's, the same flow must follow it and run free after kill -9 of the agent.
test_bpf_agent_hold() {
  . "$TESTS_DIR/ccp.sh" || fail "cannot source $TESTS_DIR/ccp.sh"
  CCP_OUT=$BPF_OUT/hold
  rate=20 link=100
  bpf_hold_setup
  log=$CCP_OUT/hold.agent.log
  bpf_agent_start "$log" --rate-mbit $rate
  ccp_iperf_bg hold 14
  ccp_wait_create "$log" || fail "no CREATE within 10 s: $(tail -n 3 "$log")"
  sleep 4.5
  held_limit=$(bpf_pacing_limit held)
  sleep 1
  kill -0 "$CCP_AGENT_PID" 2>/dev/null || fail "the agent died under the flow: $(tail -n 3 "$log")"
  kill -9 "$CCP_AGENT_PID"
  tk=$(awk -v a="$CCP_T0" -v b="$(ccp_uptime)" 'BEGIN { printf "%.2f", b - a }')
  wait "$CCP_AGENT_PID" 2>/dev/null; CCP_AGENT_PID=""
  sleep 4
  released_limit=$(bpf_pacing_limit released)
  wait "$CCP_IPERF_PID" || fail "iperf3 failed"
  ccp_check_cc hold
  j=$CCP_OUT/hold.json
  note "commanded $rate Mbit/s on a $link Mbit/s link; CREATEs the agent saw: $(grep CREATE "$log" | grep -o 'src=[^ ]* dst=[^ ]*' | tr '\n' ';' | sed 's/;$//'); kill -9 at t=${tk}s"
  note "intervals: $(ccp_show_intervals "$j")"
  note "the socket's pacing limit (ss): ${held_limit:-none} bit/s while held, ${released_limit:-none} 4 s after the kill"
  held=$(ccp_mean "$j" 1 "$(awk -v t="$tk" 'BEGIN { print t - 0.3 }')")
  held_max=$(ccp_intervals "$j" | awk -v t="$tk" '$1 >= 1 && $2 <= t - 0.28 { if ($3 > m) m = $3 } END { print m + 0 }')
  released=$(ccp_mean "$j" "$(awk -v t="$tk" 'BEGIN { print t + 1.5 }')" 100)
  freed_at=$(ccp_intervals "$j" | awk -v t="$tk" '$1 >= t && $3 > 60 { printf "%.2f", $2 - t; exit }')
  minimum=$(ccp_intervals "$j" | awk 'NR == 1 || $3 < m { m = $3 } END { print m + 0 }')
  note "held: mean $held Mbit/s (highest interval $held_max) for a commanded $rate; released: mean $released Mbit/s from 1.5 s after the kill (first interval above 60 ends ${freed_at:-never} s after it); lowest interval $minimum Mbit/s"
  grep CREATE "$log" | grep -q "dst=$VM_DST:$CCP_PORT " || fail "the agent never saw the CREATE of the flow to $VM_DST:$CCP_PORT"
  ccp_within "$held" $rate 30 || fail "held at $held Mbit/s, not within ±30% of the commanded $rate Mbit/s"
  awk -v x="$held_max" -v r=$rate 'BEGIN { exit !(x <= 1.5 * r) }' \
    || fail "an interval under the agent reached $held_max Mbit/s (commanded $rate)"
  bpf_limit_is "$held_limit" $rate \
    || fail "the socket's pacing limit while held was '${held_limit:-none}' bit/s, not the commanded $rate Mbit/s"
  [ -z "$released_limit" ] || fail "the socket still had a pacing limit of $released_limit bit/s 4 s after the kill"
  awk -v x="$released" 'BEGIN { exit !(x != "nan" && x > 60) }' \
    || fail "after the kill the flow ran at $released Mbit/s, not > 60 of $link"
  awk -v m="$minimum" 'BEGIN { exit !(m >= 1) }' || fail "an interval fell to $minimum Mbit/s (stall)"
}

test_bpf_agent_class() {
  . "$TESTS_DIR/ccp.sh" || fail "cannot source $TESTS_DIR/ccp.sh"
  CCP_OUT=$BPF_OUT/hold
  ccp_setup
  trap 'ccp_agent_stop; vm_net_unshape' EXIT
  ccp_class_shape 40mbit || fail "tc setup (tbf + prio + u32 on the DS field) failed"
  log=$CCP_OUT/class.agent.log
  bpf_agent_start "$log" --rate-mbit 1000 --dscp 46
  ccp_iperf_bg class 7
  ccp_wait_create "$log" || fail "no CREATE within 10 s: $(tail -n 3 "$log")"
  ccp_class_kill_samples "$log" 2
  wait "$CCP_IPERF_PID" || fail "iperf3 failed"
  ccp_check_cc class
  grep -q "SET_CLASS sent" "$log" || fail "the agent sent no SET_CLASS: $(tail -n 3 "$log")"
  note "bands 10:1 (DSCP 46) / 10:2 (default): 2.5 s after the CREATE $a1 / $a2, 2 s after the kill $b1 / $b2, 4 s after $c1 / $c2 bytes"
  ccp_class_moved "$a1" "$a2" "$b1" "$b2" "$c1" "$c2" "from 2 to 4 s"
}

test_bpf_agent_cubic() {
  . "$TESTS_DIR/ccp.sh" || fail "cannot source $TESTS_DIR/ccp.sh"
  CCP_OUT=$BPF_OUT/hold
  rate=20
  bpf_hold_setup
  log=$CCP_OUT/cubic.agent.log
  bpf_agent_start "$log" --rate-mbit $rate
  ccp_iperf_bg cubic 6 mltcp_cubic
  ccp_wait_create "$log" || fail "no CREATE of the mltcp_cubic flow within 10 s: $(tail -n 3 "$log")"
  sleep 3
  limit=$(bpf_pacing_limit cubic mltcp_cubic)
  wait "$CCP_IPERF_PID" || fail "iperf3 failed"
  ccp_check_cc cubic mltcp_cubic
  held=$(ccp_mean "$CCP_OUT/cubic.json" 1 5)
  note "mltcp_cubic under the agent: intervals $(ccp_show_intervals "$CCP_OUT/cubic.json"); mean from 1 to 5 s $held Mbit/s for a commanded $rate; pacing limit (ss) ${limit:-none} bit/s"
  bpf_limit_is "$limit" $rate \
    || fail "the mltcp_cubic socket's pacing limit was '${limit:-none}' bit/s, not the commanded $rate Mbit/s"
  ccp_within "$held" $rate 30 || fail "the mltcp_cubic flow ran at $held Mbit/s, not within ±30% of the commanded $rate Mbit/s"
}
