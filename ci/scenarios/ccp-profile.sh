#!/bin/sh
# ci/scenarios/ccp-profile.sh: where a CCP report's guest CPU goes, by sampling the
# whole guest with perf during one CCP Reno transfer and one native reno transfer. In the VM, as
# root, sh = dash; perf comes from the host (Debian's linux-perf, installed by ci/deps.sh; any
# recent perf reads this kernel's samples):
#
#   ci/vm-run --extra /usr/bin/perf [--extra /usr/bin/nstat] --results DIR
#             ci/scenarios/ccp-profile.sh [--secs S] [--app-rate MBIT] [--ccp-args "A..."]
#             [--rounds N] [--meter]
#
# Each kind (reno, then ccp1: mltcp with `ccp-test-agent reno A...`) runs one iperf3 transfer of S
# seconds (default 2) at MBIT Mbit/s (default 4000, as ccp-overhead.sh --app-rate) from the
# sender to the receiver namespace under `perf record -a -e cpu-clock -F 4999` (a software
# timer: TCG emulates no PMU; on the guest clock a sample is a fixed count of instructions);
# --rounds N repeats the pair N times (default 1), so a difference can be set beside the spread
# between rounds of one kind. --meter runs ccp-overhead.sh's CPU meter (`trainemu cpu-meter`: a
# SCHED_IDLE spinner per CPU, so the CPU never idles) beside each transfer, profiles the guest in
# the state ccp-overhead.sh measures it in, and prints busy CPU s per GB over the meter's window
# (KIND.R.meter.txt), which includes perf's own start and end: compare the spinner's share of the
# samples, not these. perf costs CPU itself, so this gives where the time goes, not how much
# there is: the amounts come from ccp-overhead.sh. Files in /results/ccp-profile, per kind
# and round (KIND.R): KIND.R.sym.txt (samples by command and symbol, kernel and user, above
# 0.3 %), KIND.R.allsym.txt (by symbol alone, every symbol above 0.01 %: the one to diff),
# KIND.R.dso.txt (by command and object), KIND.R.mltcp.txt (tcp_mltcp's own symbols, all of
# them), KIND.R.link.txt (packets and bytes each veth end sent and received: skbs, so bytes per
# packet is the GSO size), KIND.R.nstat.txt (with nstat shipped: the change of every SNMP and
# TcpExt counter in the sender's and the receiver's namespace), the agent's log and the iperf3
# JSON. A few runs: read them as anecdotes that point where to measure.

VM_LIB=${MLTCP_VM_LIB:-/host/ci/vm-lib.sh}
. "$VM_LIB" || { echo "cannot source vm-lib.sh"; exit 1; }
SECS=2 APP_RATE_MBIT=4000 CCP_ARGS="" ROUNDS=1 METER=0
while [ $# -gt 0 ]; do
  case "$1" in
    --secs) SECS=$2; shift 2 ;;
    --app-rate) APP_RATE_MBIT=$2; shift 2 ;;
    --ccp-args) CCP_ARGS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --meter) METER=1; shift ;;
    *) echo "ccp-profile.sh: unknown argument $1"; exit 2 ;;
  esac
done
OUT=${RESULTS:-/results}/ccp-profile
mkdir -p "$OUT"
case "$ROUNDS" in ''|*[!0-9]*|0) echo "ccp-profile.sh: --rounds must be a positive integer, got '$ROUNDS'"; exit 2 ;; esac
command -v perf >/dev/null || { echo "no perf: pass --extra /usr/bin/perf to ci/vm-run"; exit 1; }
command -v nstat >/dev/null || echo "no nstat (--extra /usr/bin/nstat): counters not recorded"
grep -q '^tcp_mltcp ' /proc/modules || { echo "tcp_mltcp not loaded"; exit 1; }
vm_net_setup || { echo "vm_net_setup failed"; exit 1; }
echo 0 > /proc/sys/kernel/kptr_restrict 2>/dev/null
echo -1 > /proc/sys/kernel/perf_event_paranoid 2>/dev/null
# A discarded warm-up transfer (the first after boot costs more, see ccp-overhead.sh).
vm_iperf "$OUT/warmup.json" -C reno -t "$SECS" -b "${APP_RATE_MBIT}M" || exit 1

# counters NS: the SNMP and TcpExt counters of namespace NS, absolute ("name value" lines).
counters() { ip netns exec "$1" nstat -asz 2>/dev/null | awk 'NF >= 2 && $1 !~ /^#/ { print $1, $2 }'; }
# link_stats NS DEV: "DEV tx_packets tx_bytes rx_packets rx_bytes" of one veth end.
link_stats() {
  _d=/sys/class/net/$2/statistics
  ip netns exec "$1" sh -c "echo $2 \$(cat $_d/tx_packets $_d/tx_bytes $_d/rx_packets $_d/rx_bytes)"
}
# snapshot SUFFIX: both veth ends' counts into /tmp/link.SUFFIX and, with nstat, both
# namespaces' counters (prefixed snd. and rcv.) into /tmp/nstat.SUFFIX.
snapshot() {
  { link_stats "$VM_SND" "$VM_SND_DEV"; link_stats "$VM_RCV" "$VM_RCV_DEV"; } > "/tmp/link.$1"
  if command -v nstat >/dev/null; then
    { counters "$VM_SND" | sed 's/^/snd./'; counters "$VM_RCV" | sed 's/^/rcv./'; } > "/tmp/nstat.$1"
  fi
}
# delta BEFORE AFTER: per key (first field), AFTER's numbers minus BEFORE's.
delta() {
  awk 'NR == FNR { for (i = 2; i <= NF; i++) b[$1, i] = $i; next }
       { printf "%s", $1; for (i = 2; i <= NF; i++) printf " %.0f", $i - b[$1, i]; print "" }' "$1" "$2"
}

r=1
while [ $r -le "$ROUNDS" ]; do
for kind in reno ccp1; do
  agent=""
  alg=reno
  tag=$kind.$r
  if [ "$kind" = ccp1 ]; then
    alg=mltcp
    # shellcheck disable=SC2086 # the options are words
    ccp-test-agent reno $CCP_ARGS > "$OUT/agent.$r.log" 2>&1 &
    agent=$!
    i=0
    while ! grep -q "agent listening" "$OUT/agent.$r.log" 2>/dev/null; do
      i=$((i + 1)); [ $i -lt 50 ] || { echo "agent did not start"; exit 1; }
      sleep 0.1
    done
  fi
  snapshot before
  [ "$METER" = 0 ] || vm_cpu_meter_start "$OUT/$tag.meter.txt" || exit 1
  perf record -q -a -e cpu-clock -F 4999 -o "$OUT/$tag.data" -- \
    sh -c ". \"$VM_LIB\"; vm_iperf \"$OUT/$tag.json\" -C $alg -t $SECS -b ${APP_RATE_MBIT}M" \
    || { echo "$tag: perf record failed"; exit 1; }
  if [ "$METER" = 1 ]; then
    vm_cpu_meter_stop "$OUT/$tag.meter.txt" || exit 1
    busy_ns=$VM_METER_BUSY_NS
    echo "== $tag: busy $busy_ns ns, $(awk -v b="$busy_ns" -v n="$(vm_iperf_bytes "$OUT/$tag.json")" \
      'BEGIN { printf "%.4f", b / 1e9 / (n / 1e9) }') CPU s per GB (perf's own start and end included)"
  fi
  snapshot after
  delta /tmp/link.before /tmp/link.after > "$OUT/$tag.link.txt"
  if command -v nstat >/dev/null; then
    delta /tmp/nstat.before /tmp/nstat.after | awk '$2 != 0' > "$OUT/$tag.nstat.txt"
  fi
  if [ -n "$agent" ]; then kill "$agent"; wait "$agent" 2>/dev/null; fi
  perf report -i "$OUT/$tag.data" --stdio --no-children --sort comm,sym --percent-limit 0.3 \
    > "$OUT/$tag.sym.txt" 2>/dev/null
  perf report -i "$OUT/$tag.data" --stdio --no-children --sort sym --percent-limit 0.01 \
    > "$OUT/$tag.allsym.txt" 2>/dev/null
  perf report -i "$OUT/$tag.data" --stdio --no-children --sort comm,dso \
    > "$OUT/$tag.dso.txt" 2>/dev/null
  # The module's own symbols, every one (the per-ACK program and its glue under CCP).
  perf report -i "$OUT/$tag.data" --stdio --no-children --sort dso,sym --percent-limit 0 \
    2>/dev/null | grep 'tcp_mltcp' > "$OUT/$tag.mltcp.txt"
  rm -f "$OUT/$tag.data"
  echo "== $tag: $(vm_iperf_bytes "$OUT/$tag.json") bytes; veth (dev tx_pkts tx_bytes rx_pkts rx_bytes):"
  cat "$OUT/$tag.link.txt"
  echo "== $tag: top by command and object:"
  grep -v '^#' "$OUT/$tag.dso.txt" | grep -v '^$' | head -n 12
  echo "== $tag: top symbols:"
  grep -v '^#' "$OUT/$tag.sym.txt" | grep -v '^$' | head -n 40
done
r=$((r + 1))
done
cat "$OUT"/agent.*.log | grep 'agent stopped\|flow closed'
vm_net_teardown
