#!/bin/sh
# ci/scenarios/ccp-bench.sh: the CCP benchmark (in the VM, as root, sh = dash):
# Reno computed by a portus agent (`ccp-test-agent reno`, driving `mltcp` flows through the
# module's CCP datapath over netlink) against the kernel's native `reno`, on the same
# 100 Mbit/s tbf + 10 ms netem bottleneck.
#
#   ci/vm-run --results DIR ci/scenarios/ccp-bench.sh [--rounds N] [--secs S] [--rate R] [--delay D]
#
# Each round runs native reno, then CCP reno (agent started before, stopped after), each for S
# seconds (defaults: 3 rounds, 10 s, 100mbit, 10ms). Per run: receiver goodput, retransmissions,
# the CPU time of the whole guest while it ran (busy jiffies of /proc/stat: user+nice+system+irq+
# softirq+steal, USER_HZ), and for CCP runs the agent's own CPU time (/proc/PID/stat). Reported:
# the goodput ratio CCP/native of the medians (target >= 0.95) and the CPU time per transferred
# GB of both (target: CCP overhead <= 2 %). Under TCG the CPU figures are emulated time, good for a
# comparison only. Then the agent -> datapath -> report round trip over netlink (tcp_mltcp.ko)
# and over unix-socket IPC (a user-space datapath on the same core), and their ratio.
# Files: /results/ccp-bench/*.json, agent logs, ping-*.txt, summary.txt (also printed).

. "${MLTCP_VM_LIB:-/host/ci/vm-lib.sh}" || { echo "cannot source vm-lib.sh"; exit 1; }
ROUNDS=3 SECS=10 RATE=100mbit DELAY=10ms
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --secs) SECS=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --delay) DELAY=$2; shift 2 ;;
    *) echo "ccp-bench.sh: unknown argument $1"; exit 2 ;;
  esac
done
OUT=${RESULTS:-/results}/ccp-bench
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }

# busy_jiffies: the guest's busy CPU time so far, USER_HZ ticks (all CPUs).
busy_jiffies() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
# proc_jiffies PID: utime + stime of a process, USER_HZ ticks.
proc_jiffies() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
HZ=$(getconf CLK_TCK 2>/dev/null || echo 100)

grep -q '^tcp_mltcp ' /proc/modules || { echo "tcp_mltcp not loaded"; exit 1; }
vm_net_setup || { echo "vm_net_setup failed"; exit 1; }
vm_net_shape "$RATE" "$DELAY" || { echo "tc setup failed"; exit 1; }
say "# CCP reno (ccp-test-agent reno over mltcp) vs native reno: tbf $RATE + netem $DELAY, $ROUNDS rounds x ${SECS}s"
say "# run            Mbit/s  retrans  guest_cpu_s  agent_cpu_s  cpu_s_per_GB"

# run_one KIND ROUND: one iperf3 run; appends "KIND MBPS CPU_S_PER_GB AGENT_S" to $OUT/runs.txt.
run_one() {
  _kind=$1 _r=$2 _agent="" _alg=reno
  if [ "$_kind" = ccp ]; then
    _alg=mltcp
    ccp-test-agent reno > "$OUT/agent.$_r.log" 2>&1 &
    _agent=$!
    _i=0
    while ! grep -q "agent listening" "$OUT/agent.$_r.log" 2>/dev/null; do
      _i=$((_i + 1)); [ $_i -lt 50 ] || { echo "agent did not start: $(tail -n 3 "$OUT/agent.$_r.log")"; return 1; }
      sleep 0.1
    done
    _a0=$(proc_jiffies $_agent)
  fi
  _c0=$(busy_jiffies)
  vm_iperf "$OUT/$_kind.$_r.json" -C "$_alg" -t "$SECS" || return 1
  _c1=$(busy_jiffies)
  _as=0
  if [ -n "$_agent" ]; then
    _as=$(awk -v a="$_a0" -v b="$(proc_jiffies $_agent)" -v hz="$HZ" 'BEGIN { printf "%.2f", (b - a) / hz }')
    kill "$_agent"; wait "$_agent" 2>/dev/null
    grep -q "CREATE" "$OUT/agent.$_r.log" || { echo "the agent never saw the flow"; return 1; }
  fi
  _cc=$(vm_iperf_cc "$OUT/$_kind.$_r.json")
  [ "$_cc" = "$_alg" ] || { echo "iperf3 ran with '$_cc', not $_alg"; return 1; }
  _mbps=$(vm_iperf_mbps "$OUT/$_kind.$_r.json")
  _bytes=$(vm_iperf_bytes "$OUT/$_kind.$_r.json")
  _re=$(vm_iperf_retrans "$OUT/$_kind.$_r.json")
  _cpu=$(awk -v a="$_c0" -v b="$_c1" -v hz="$HZ" 'BEGIN { printf "%.2f", (b - a) / hz }')
  _pgb=$(awk -v c="$_cpu" -v by="$_bytes" 'BEGIN { printf "%.3f", (by > 0) ? c / (by / 1e9) : 0 }')
  say "$(printf '%-14s %7s  %7s  %11s  %11s  %12s' "$_kind.$_r" "$_mbps" "$_re" "$_cpu" "$_as" "$_pgb")"
  echo "$_kind $_mbps $_pgb $_as" >> "$OUT/runs.txt"
}

: > "$OUT/runs.txt"
r=1
while [ $r -le "$ROUNDS" ]; do
  run_one native $r || { echo "native run $r failed"; exit 1; }
  run_one ccp $r || { echo "ccp run $r failed"; exit 1; }
  r=$((r + 1))
done

med() { awk -v k="$1" -v f="$2" '$1 == k { print $f }' "$OUT/runs.txt" | sort -n \
  | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print 0 }'; }
n_mbps=$(med native 2) c_mbps=$(med ccp 2)
n_cpu=$(med native 3) c_cpu=$(med ccp 3) c_agent=$(med ccp 4)
ratio=$(awk -v c="$c_mbps" -v n="$n_mbps" 'BEGIN { printf "%.3f", (n > 0) ? c / n : 0 }')
ovh=$(awk -v c="$c_cpu" -v n="$n_cpu" 'BEGIN { printf "%+.1f", (n > 0) ? (c / n - 1) * 100 : 0 }')
say "median goodput: native reno $n_mbps Mbit/s, CCP reno $c_mbps Mbit/s; ratio $ratio (target >= 0.95)"
say "median guest CPU per GB: native $n_cpu s, CCP $c_cpu s (CCP overhead $ovh %, target <= 2 %); agent alone $c_agent s per run"
tail -n 1 "$OUT"/agent.*.log 2>/dev/null | grep "flow closed" | sed 's/^.*flow closed/agent: flow closed/' | tee -a "$SUMMARY"

# The agent -> datapath -> report round trip (`ccp-test-agent ping`, PINGS samples each): over
# netlink to tcp_mltcp.ko on an unshaped iperf3 -C mltcp flow (the program runs per ACK, so the
# figure includes the wait for the next ACK), and over portus's unix-socket IPC to a user-space
# datapath on the same core (`userspace-dp`, program run as soon as the message arrives).
PINGS=2000
vm_net_unshape
ccp-test-agent ping --samples $PINGS --dst-port 5201 > "$OUT/ping-netlink.txt" 2> "$OUT/ping-netlink.log" &
_agent=$!
sleep 1
vm_iperf "$OUT/ping-netlink.json" -C mltcp -t 30 > /dev/null 2>&1 &
_iperf=$!
wait "$_agent"
pkill -f "iperf3 -c" 2>/dev/null; wait "$_iperf" 2>/dev/null
ccp-test-agent --ipc unix --unix-name ccp-bench ping --samples $PINGS > "$OUT/ping-unix.txt" 2> "$OUT/ping-unix.log" &
_agent=$!
sleep 1
ccp-test-agent --unix-name ccp-bench userspace-dp --secs 60 > "$OUT/userspace-dp.log" 2>&1 &
_dp=$!
wait "$_agent"
kill "$_dp" 2>/dev/null; wait "$_dp" 2>/dev/null
pn=$(cat "$OUT/ping-netlink.txt") pu=$(cat "$OUT/ping-unix.txt")
say "$pn"
say "$pu"
p50() { echo "$1" | sed -n 's/.* p50=\([0-9.]*\).*/\1/p'; }
say "round-trip ratio netlink/unix (p50): $(awk -v a="$(p50 "$pn")" -v b="$(p50 "$pu")" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')"
vm_net_teardown
awk -v r="$ratio" 'BEGIN { exit !(r >= 0.95) }'
