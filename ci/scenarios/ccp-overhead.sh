#!/bin/sh
# ci/scenarios/ccp-overhead.sh: guest CPU per GB of the module's paths, paired over rounds (issue
# 20, item 5). In the VM, as root, sh = dash:
#
#   ci/vm-run --results DIR ci/scenarios/ccp-overhead.sh [--rounds N] [--secs S] [--flows F]
#                                                        [--shape RATE DELAY] [--kinds "K..."]
#                                                        [--app-rate MBIT] [--ccp-args "A..."]
#                                                        [--ccpx-args "A..."] [--ccpy-args "A..."]
#                                                        [--ccpz-args "A..."] [--heartbeat-ms N]
#                                                        [--interpret "K..."] [--per-ack]
#                                                        [--datapath module|bpf]
#                                                        [--iperf-args "A..."]
#
# Each round runs these iperf3 transfers from the sender to the receiver namespace, S seconds each
# (defaults: 5 rounds, 8 s, F = 64), in an order rotated by one from round to round:
#
#   reno, mltcp, cubic, mltcp_cubic      native algorithms, no agent, 1 flow
#   ccp1                                 mltcp with `ccp-test-agent reno` in charge, 1 flow
#   ccp64 (ccpF)                         the same with F parallel flows (iperf3 -P F)
#   reno64 (renoF)                       native reno with F parallel flows
#
#   ccpx1, ccpxF                         ccp1 and ccpF with the agent options of --ccpx-args
#   ccpy1, ccpyF, ccpz1, ccpzF           the same with --ccpy-args, --ccpz-args
#
# (`--kinds` runs a subset, e.g. --kinds "reno mltcp cubic mltcp_cubic ccp1 ccpF"; the default
# set has no ccpx kinds.) `--ccp-args "A..."` adds options to the agent of ccp1/ccpF
# (`ccp-test-agent reno A...`, default none); `--ccpx-args` gives the ccpx kinds theirs (and
# --ccpy-args, --ccpz-args the ccpy, ccpz kinds), so agent settings are compared in paired
# rounds of one run, e.g. --kinds "reno ccp1 ccpx1"
# --ccp-args "--update-unchanged" --ccpx-args "--min-report-us 1000" (added 2026-11-27; every
# earlier invocation means what it meant). `--interpret "K..."` runs the listed CCP kinds with the
# datapath's interpreter forced (module parameter ccp_interpret = 1 during their transfers) and
# every other kind with programs compiled (ccp_interpret = 0, the default), so compiled and
# interpreted compare in paired rounds, e.g. --kinds "reno ccpy1 ccpz1" with the same
# --ccpy-args and --ccpz-args and --interpret "ccpz1" (added 2026-11-29). `--per-ack` also
# counts, per transfer, the guest's instructions and the ACKs the sender received, and reports
# instructions per ACK for every kind, paired with the same round's reno (issue 38 item 4; added
# 2026-11-29): ACKs are the sender namespace's Tcp InSegs (every segment its TCP received: the
# data flows' ACKs and the few of iperf3's control connection; the receiver's Tcp OutSegs beside
# it as a check); instructions are the CPU meter's busy time on ci/vm-run's virtual clock, where
# guest time is qemu's instruction count (2^shift ns per instruction), so they count every
# instruction the guest ran outside the meter's spinners, system-wide: TCP in both namespaces,
# iperf3 and, for CCP kinds, the agent. Interrupt work that lands while a spinner runs is charged
# to the spinner (the kernel has no IRQ_TIME_ACCOUNTING) and is missed. No PMU counts them: TCG
# emulates none (the summary records what `perf stat -e instructions` says in the guest when perf
# is shipped with --extra /usr/bin/perf). Needs the virtual clock (vm-run's default). Read the
# per-ACK figures with the ACKs per GB beside them: the receiver's ACK rate depends on scheduling
# and was bimodal per transfer on 2026-11-29 (about 6,600 or 11,800 ACKs per GB, any kind), so
# system-wide instructions per ACK moved 1.7x within a kind (docs/results/ccp-overhead.md,
# "Instructions per ACK").
# `--datapath bpf` (added 2026-11-29; issue 36) runs the kinds mltcp and mltcp_cubic on
# mltcp-bpf's BPF struct_ops (docs/bpf.md) instead of tcp_mltcp.ko: the script runs `mltcp-bpf
# load` (defaults; HZ from the Kconfig, vm_bpf_kconfig) before the warm-up, and reno, cubic,
# renoF stay the kernel's native algorithms. It needs a kernel without tcp_mltcp.ko (which holds
# the same names) and with BTF, e.g. Debian 12's stock kernel:
#   ci/vm-run --kernel-deb debian12 --timeout 3600 --results DIR ci/scenarios/ccp-overhead.sh \
#     --datapath bpf --rounds 5 --secs 2 --app-rate 4000 --kinds "reno mltcp cubic mltcp_cubic"
# Its default kinds are "reno mltcp cubic mltcp_cubic"; the CCP kinds (ccp*), --interpret and
# --heartbeat-ms need the module and are refused, naming the kind or option. `--datapath module`
# (the default) is what every earlier invocation meant; without tcp_mltcp.ko loaded it refuses
# the kinds that need it (mltcp, mltcp_cubic, ccp*), naming them, and runs the native ones.
# `--iperf-args "A..."` (added 2026-11-30) adds options to every iperf3 client of the run, the
# warm-up included, e.g. "-w 200K": fixed socket buffers on both ends (SO_SNDBUF / SO_RCVBUF, which
# turns the kernel's buffer auto-tuning off), so that kinds whose windows differ (CCP Reno's agent
# grows its own) wait on send buffers of one size. Options iperf3 refuses fail the transfer.
# By default the veth is not shaped: the transfer is CPU-bound, so a kind that moves fewer bytes
# (CCP Reno's window lags its reports) also pays more per byte, and the comparison mixes the two.
# `--app-rate MBIT` makes iperf3 itself send at MBIT Mbit/s in all (iperf3 -b, split over the
# flows): every kind moves the same bytes over the bare veth, and CPU per GB compares the
# algorithms' per-ACK and per-report work at one rate. `--shape RATE DELAY` puts the suite's
# tbf + netem bottleneck in instead (its per-packet timers then cost more than the algorithms:
# 7.6-7.9 CPU s per GB at 1 Gbit/s against 0.70 unshaped, 2026-11-26).
#
# Per run: bytes received, the guest's busy CPU time while iperf3 ran, all CPUs (the agent's own
# CPU time is included: it is part of what CCP costs), CPU seconds per GB (1e9 bytes). Busy time
# comes from `trainemu cpu-meter` (one SCHED_IDLE spinner per CPU; busy = window - the spinners'
# run time, to the microsecond). It replaced the tick-sampled busy time of /proc/stat (HZ = 1000, no
# NO_HZ), which charged 2.60-2.95 s to the same 3.76 GB reno transfer; the meter gives 2.605-2.653 s
# (2026-11-26, 5 rounds). /proc/stat cannot serve as a control beside it: the spinners themselves
# show there as user time. On guest time (ci/vm-run --clock virtual, the default) instructions are
# the clock, so host load does not move these numbers.
#
# Paired comparisons, per round, as the ratio of CPU per GB minus 1, then the mean over rounds and
# its 95 % t interval: ccp1 vs reno (issue target <= +2 %), mltcp vs reno and mltcp_cubic vs cubic
# (<= +1 %), ccp64 vs ccp1 (what 64 concurrent CCP flows cost per byte against 1: the lock's cost
# shows here) and, as its control, reno64 vs reno.
# Files: /results/ccp-overhead/runs.txt ("round kind bytes busy_s cpu_s_per_GB reports": the
# datapath reports the agent handled, 0 without an agent), the iperf3 JSON, the meter's output,
# agent logs, summary.txt (also printed), and agent.txt for the CCP kinds ("round kind reports
# updates msgs_in msgs_out utime_us stime_us vol_ctxsw invol_ctxsw startup_us cwnd_segs": the
# agent's window updates sent, CCP messages received and sent, and its own CPU time from
# getrusage at exit, user and system, exact in sum; startup_us is its CPU time before iperf3
# started, from /proc/PID/stat at USER_HZ = 100, i.e. to 10 ms; cwnd_segs is the data flows'
# mean window when they closed, segments, from the agent's "flow closed" lines). From these the
# summary splits each CCP kind's extra busy time over the same round's reno, per report: agent
# user, agent system (its recv and send calls, including the module's netlink input, which runs
# in the sender's context), and the rest (the datapath's program runs and MEASURE multicasts in
# the ACK path, softirq, the wake-ups; everything not charged to the agent).

. "${MLTCP_VM_LIB:-/host/ci/vm-lib.sh}" || { echo "cannot source vm-lib.sh"; exit 1; }
ROUNDS=5 SECS=8 FLOWS=64 SHAPE_RATE="" SHAPE_DELAY="" APP_RATE_MBIT="" HEARTBEAT_MS="" CCP_ARGS="" CCPX_ARGS="" CCPY_ARGS="" CCPZ_ARGS="" INTERPRET="" PER_ACK=0 DATAPATH=module IPERF_ARGS=""
KINDS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS=$2; shift 2 ;;
    --secs) SECS=$2; shift 2 ;;
    --flows) FLOWS=$2; shift 2 ;;
    --kinds) KINDS=$2; shift 2 ;;
    --shape) SHAPE_RATE=$2 SHAPE_DELAY=$3; shift 3 ;;
    --ccp-args) CCP_ARGS=$2; shift 2 ;;
    --ccpx-args) CCPX_ARGS=$2; shift 2 ;;
    --ccpy-args) CCPY_ARGS=$2; shift 2 ;;
    --ccpz-args) CCPZ_ARGS=$2; shift 2 ;;
    --interpret)
      for _k in $2; do
        case "$_k" in ccp1|ccpF|ccpx1|ccpxF|ccpy1|ccpyF|ccpz1|ccpzF) ;; *) echo "ccp-overhead.sh: --interpret takes CCP kinds (ccp1 ... ccpzF), not '$_k'"; exit 2 ;; esac
      done
      INTERPRET=$2; shift 2 ;;
    --per-ack) PER_ACK=1; shift ;;
    --iperf-args) IPERF_ARGS=$2; shift 2 ;;
    --datapath)
      case "$2" in module|bpf) ;; *) echo "ccp-overhead.sh: --datapath takes module or bpf, not '$2'"; exit 2 ;; esac
      DATAPATH=$2; shift 2 ;;
    --heartbeat-ms)
      case "$2" in ''|*[!0-9]*) echo "ccp-overhead.sh: --heartbeat-ms takes a whole number of ms, not '$2'"; exit 2 ;; esac
      HEARTBEAT_MS=$2; shift 2 ;;
    --app-rate)
      case "$2" in ''|*[!0-9]*|0) echo "ccp-overhead.sh: --app-rate takes a whole number of Mbit/s > 0, not '$2'"; exit 2 ;; esac
      APP_RATE_MBIT=$2; shift 2 ;;
    *) echo "ccp-overhead.sh: unknown argument $1"; exit 2 ;;
  esac
done
OUT=${RESULTS:-/results}/ccp-overhead
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt RUNS=$OUT/runs.txt AGENT=$OUT/agent.txt ACKS=$OUT/acks.txt
: > "$SUMMARY"; : > "$RUNS"; : > "$AGENT"; : > "$ACKS"
say() { echo "$*" | tee -a "$SUMMARY"; }

if [ -z "$KINDS" ]; then
  if [ "$DATAPATH" = bpf ]; then KINDS="reno mltcp cubic mltcp_cubic"; else KINDS="reno mltcp cubic mltcp_cubic ccp1 ccpF renoF"; fi
fi
MODULE=0
grep -q '^tcp_mltcp ' /proc/modules 2>/dev/null && MODULE=1
# Every kind is known, and what needs tcp_mltcp.ko is refused before any transfer when it is not
# loaded (or, with --datapath bpf, in any case: the CCP datapath is the module's).
for _k in $KINDS; do
  case "$_k" in
    reno|cubic|renoF) ;;
    mltcp|mltcp_cubic)
      [ "$DATAPATH" = bpf ] || [ "$MODULE" = 1 ] \
        || { echo "ccp-overhead.sh: kind $_k needs tcp_mltcp.ko, which is not loaded (--datapath bpf runs it on mltcp-bpf)"; exit 1; } ;;
    ccp1|ccpF|ccpx1|ccpxF|ccpy1|ccpyF|ccpz1|ccpzF)
      [ "$DATAPATH" = module ] \
        || { echo "ccp-overhead.sh: kind $_k needs tcp_mltcp.ko's CCP datapath: not with --datapath bpf"; exit 1; }
      [ "$MODULE" = 1 ] || { echo "ccp-overhead.sh: kind $_k needs tcp_mltcp.ko, which is not loaded"; exit 1; } ;;
    *) echo "ccp-overhead.sh: unknown kind $_k"; exit 2 ;;
  esac
done
# needs_module OPTION VALUE: refuse a module parameter's option (given, VALUE not empty) without it.
needs_module() {
  [ -n "$2" ] || return 0
  [ "$DATAPATH" = module ] || { echo "ccp-overhead.sh: $1 sets a parameter of tcp_mltcp.ko: not with --datapath bpf"; exit 1; }
  [ "$MODULE" = 1 ] || { echo "ccp-overhead.sh: $1 sets a parameter of tcp_mltcp.ko, which is not loaded"; exit 1; }
}
needs_module --interpret "$INTERPRET"
needs_module --heartbeat-ms "$HEARTBEAT_MS"
if [ "$DATAPATH" = bpf ]; then
  why=$(vm_bpf_load "$OUT/mltcp-bpf-load.txt") || { echo "ccp-overhead.sh: --datapath bpf: $why"; exit 1; }
fi
# --heartbeat-ms N: the module's ccp_heartbeat_ms for the whole run (the CCP kinds' agents then
# need a keepalive shorter than N, e.g. --ccp-args "--keepalive-ms 200", or their flows fall back).
if [ -n "$HEARTBEAT_MS" ]; then
  echo "$HEARTBEAT_MS" > /sys/module/tcp_mltcp/parameters/ccp_heartbeat_ms \
    || { echo "cannot set ccp_heartbeat_ms to $HEARTBEAT_MS"; exit 1; }
fi
# The boot's switch to the TSC clocksource (a stop_machine() that stalled a CPU-bound transfer
# started before it) is over before SCRIPT starts: ci/initramfs-init.sh waits for it.
vm_net_setup || { echo "vm_net_setup failed"; exit 1; }
if [ -n "$SHAPE_RATE" ]; then
  vm_net_shape "$SHAPE_RATE" "$SHAPE_DELAY" || { echo "tc setup failed"; exit 1; }
  PATHDESC="tbf $SHAPE_RATE + netem $SHAPE_DELAY"
elif [ -n "$APP_RATE_MBIT" ]; then
  PATHDESC="unshaped veth, iperf3 at $APP_RATE_MBIT Mbit/s"
else
  PATHDESC="unshaped veth (CPU-bound)"
fi
if [ "$DATAPATH" = bpf ]; then
  DPDESC="kernel $(uname -r), mltcp and mltcp_cubic from mltcp-bpf (BPF struct_ops), reno and cubic native"
else
  DPDESC="module $(cat /sys/module/tcp_mltcp/srcversion 2>/dev/null || echo '?'), ccp_heartbeat_ms $(cat /sys/module/tcp_mltcp/parameters/ccp_heartbeat_ms 2>/dev/null || echo '?')"
fi
say "# guest CPU per GB: $PATHDESC, $ROUNDS rounds x ${SECS}s, F = $FLOWS; $DPDESC"
[ -z "$IPERF_ARGS" ] || say "# iperf3 clients with: $IPERF_ARGS"
[ "$DATAPATH" = bpf ] \
  || say "# agent: ccp kinds 'ccp-test-agent reno $CCP_ARGS', ccpx '... $CCPX_ARGS', ccpy '... $CCPY_ARGS', ccpz '... $CCPZ_ARGS'"
PARAM_INTERPRET=/sys/module/tcp_mltcp/parameters/ccp_interpret
if [ -n "$INTERPRET" ]; then
  [ -w "$PARAM_INTERPRET" ] || { echo "$PARAM_INTERPRET is not writable: this module has no compiled programs"; exit 1; }
  say "# programs: interpreted (ccp_interpret = 1) for $INTERPRET, compiled for the other kinds"
fi
_cols=""
if [ "$PER_ACK" = 1 ]; then
  vm_guest_instructions 1 >/dev/null || { echo "--per-ack needs ci/vm-run's virtual clock (instructions = guest ns)"; exit 1; }
  # What a PMU would say (with perf shipped): TCG emulates none, so this records its absence.
  _pmu="perf not shipped"
  if command -v perf >/dev/null; then
    echo -1 > /proc/sys/kernel/perf_event_paranoid 2>/dev/null
    _pmu=$(perf stat -x, -a -e instructions -- sleep 0.01 2>&1 | grep instructions | cut -d, -f1)
  fi
  say "# --per-ack: instructions = busy guest ns / 2^$(vm_clock_shift) (virtual clock); ACKs = the sender's Tcp InSegs; PMU instructions: ${_pmu:-no answer}"
  _cols="  instr/ACK  acks  rcv_outsegs"
fi
say "# round kind        GB      busy_s  cpu_s_per_GB  reports$_cols"

# run_one ROUND KIND: one transfer; appends "ROUND KIND BYTES BUSY_S CPU_S_PER_GB" to $RUNS.
run_one() {
  _r=$1 _kind=$2 _agent="" _p=1
  case "$_kind" in
    reno|mltcp|cubic|mltcp_cubic) _alg=$_kind ;;
    ccp1|ccpx1|ccpy1|ccpz1) _alg=mltcp ;;
    ccpF|ccpxF|ccpyF|ccpzF) _alg=mltcp _p=$FLOWS ;;
    renoF) _alg=reno _p=$FLOWS ;;
    *) echo "unknown kind $_kind"; return 1 ;;
  esac
  if [ -n "$INTERPRET" ]; then
    _interp=0
    for _k in $INTERPRET; do [ "$_k" != "$_kind" ] || _interp=1; done
    echo "$_interp" > "$PARAM_INTERPRET" || { echo "cannot set ccp_interpret to $_interp"; return 1; }
  fi
  case "$_kind" in
    ccp*)
      case "$_kind" in
        ccpx*) _aargs=$CCPX_ARGS ;;
        ccpy*) _aargs=$CCPY_ARGS ;;
        ccpz*) _aargs=$CCPZ_ARGS ;;
        *) _aargs=$CCP_ARGS ;;
      esac
      # shellcheck disable=SC2086 # the options are words
      ccp-test-agent reno $_aargs > "$OUT/agent.$_kind.$_r.log" 2>&1 &
      _agent=$!
      _i=0
      while ! grep -q "agent listening" "$OUT/agent.$_kind.$_r.log" 2>/dev/null; do
        _i=$((_i + 1)); [ $_i -lt 50 ] || { echo "agent did not start: $(tail -n 3 "$OUT/agent.$_kind.$_r.log")"; return 1; }
        sleep 0.1
      done ;;
  esac
  _meter_out=$OUT/meter.$_kind.$_r.txt
  # --per-ack: both namespaces' TCP counters, read outside the meter's window.
  if [ "$PER_ACK" = 1 ]; then
    vm_ns_counters "$VM_SND" > /tmp/ovh.snd.0 && vm_ns_counters "$VM_RCV" > /tmp/ovh.rcv.0 \
      || { echo "cannot read the TCP counters"; return 1; }
  fi
  vm_cpu_meter_start "$_meter_out" || return 1
  # The agent's CPU time so far (its start: compiling and installing the program), 10 ms ticks.
  _startup_us=0
  [ -z "$_agent" ] || _startup_us=$(awk '{ print ($14 + $15) * 10000 }' "/proc/$_agent/stat" 2>/dev/null || echo 0)
  # With --app-rate, each of the _p flows sends its share (iperf3's -b is per stream), in kbit/s.
  set -- -C "$_alg" -t "$SECS" -P "$_p"
  [ -z "$APP_RATE_MBIT" ] || set -- "$@" -b "$((APP_RATE_MBIT * 1000 / _p))K"
  # shellcheck disable=SC2086 # --iperf-args is a list of options
  set -- "$@" $IPERF_ARGS
  vm_iperf "$OUT/$_kind.$_r.json" "$@" || { kill "$VM_METER_PID"; return 1; }
  vm_cpu_meter_stop "$_meter_out" || return 1
  _busy_ns=$VM_METER_BUSY_NS
  _peracks=""
  if [ "$PER_ACK" = 1 ]; then
    vm_ns_counters "$VM_SND" > /tmp/ovh.snd.1 && vm_ns_counters "$VM_RCV" > /tmp/ovh.rcv.1 \
      || { echo "cannot read the TCP counters"; return 1; }
    _acks=$(vm_counter_delta /tmp/ovh.snd.0 /tmp/ovh.snd.1 Tcp.InSegs) \
      && _rsegs=$(vm_counter_delta /tmp/ovh.rcv.0 /tmp/ovh.rcv.1 Tcp.OutSegs) \
      && _instr=$(vm_guest_instructions "$_busy_ns") || { echo "no ACK or instruction count"; return 1; }
    _peracks=$(awk -v i="$_instr" -v a="$_acks" -v s="$_rsegs" 'BEGIN { printf "  %9.0f %5d %12d", (a > 0) ? i / a : 0, a, s }')
  fi
  _reports=0
  if [ -n "$_agent" ]; then
    kill "$_agent"; wait "$_agent" 2>/dev/null
    # The datapath's reports the agent handled (its "flow closed ... reports=N" lines, summed).
    _reports=$(grep -o 'reports=[0-9]*' "$OUT/agent.$_kind.$_r.log" | awk -F= '{ s += $2 } END { print s + 0 }')
    _n=$(grep -c "CREATE" "$OUT/agent.$_kind.$_r.log")
    [ "$_n" -ge "$_p" ] || { echo "the agent saw $_n of $_p flows"; return 1; }
    # Its counters and getrusage at exit ("agent stopped ... msgs_in=N ... invol_ctxsw=N").
    _updates=$(grep -o 'updates=[0-9]*' "$OUT/agent.$_kind.$_r.log" | awk -F= '{ s += $2 } END { print s + 0 }')
    _stop=$(grep 'agent stopped' "$OUT/agent.$_kind.$_r.log" | tail -n 1)
    _f() { echo "$_stop" | grep -o " $1=[0-9]*" | cut -d= -f2; }
    # The data flows' mean window at close, segments (`reno` logs cwnd_segs; const-rate does
    # not: 0). Flows without reports (iperf3's control connection) do not count.
    _segs=$(grep 'flow closed' "$OUT/agent.$_kind.$_r.log" | grep -v ' reports=0 ' | grep -o 'cwnd_segs=[0-9]*' | awk -F= '{ s += $2; n++ } END { printf "%d", n ? s / n : 0 }')
    echo "$_r $_kind $_reports $_updates $(_f msgs_in) $(_f msgs_out) $(_f utime_us) $(_f stime_us) $(_f vol_ctxsw) $(_f invol_ctxsw) $_startup_us $_segs" >> "$AGENT"
  fi
  _cc=$(vm_iperf_cc "$OUT/$_kind.$_r.json")
  [ "$_cc" = "$_alg" ] || { echo "iperf3 ran with '$_cc', not $_alg"; return 1; }
  _bytes=$(vm_iperf_bytes "$OUT/$_kind.$_r.json")
  _busy=$(awk -v ns="$_busy_ns" 'BEGIN { printf "%.6f", ns / 1e9 }')
  _pgb=$(awk -v c="$_busy" -v by="$_bytes" 'BEGIN { printf "%.5f", (by > 0) ? c / (by / 1e9) : 0 }')
  say "$(printf '%-5s %-11s %7.3f %9s  %12s %8s' "$_r" "$_kind" "$(awk -v b="$_bytes" 'BEGIN { print b / 1e9 }')" "$_busy" "$_pgb" "$_reports")$_peracks"
  echo "$_r $_kind $_bytes $_busy $_pgb $_reports" >> "$RUNS"
  [ "$PER_ACK" = 0 ] || echo "$_r $_kind $_bytes $_instr $_acks $_rsegs" >> "$ACKS"
}

NK=$(echo $KINDS | wc -w)
# One discarded run first: the first transfer after boot costs about half as much CPU again as
# the later ones (cold caches and first allocations), which would land on whichever kind ran first.
# shellcheck disable=SC2086 # --iperf-args is a list of options
vm_iperf "$OUT/warmup.json" -C reno -t "$SECS" ${APP_RATE_MBIT:+-b "${APP_RATE_MBIT}M"} $IPERF_ARGS || { echo "warm-up run failed"; exit 1; }
say "# warm-up (reno, discarded): $(vm_iperf_bytes "$OUT/warmup.json") bytes"
r=1
while [ "$r" -le "$ROUNDS" ]; do
  # Rotate the order by one per round, so no kind always runs first or after the same one.
  k=0
  while [ $k -lt $NK ]; do
    i=$(( (k + r - 1) % NK + 1 ))
    kind=$(echo $KINDS | cut -d' ' -f$i)
    run_one "$r" "$kind" || { echo "round $r: $kind failed"; exit 1; }
    k=$((k + 1))
  done
  r=$((r + 1))
done

# paired A B: per round (cpu/GB of A) / (cpu/GB of B) - 1, in %; mean and 95 % t interval.
paired() {
  awk -v a="$1" -v b="$2" "$VM_AWK_TCI"'
    $2 == a { x[$1] = $5 } $2 == b { y[$1] = $5 }
    END {
      n = 0
      for (r in x) if ((r in y) && y[r] > 0) { n++; d[n] = (x[r] / y[r] - 1) * 100 }
      if (n < 2) { printf "n/a (%d rounds)", n; exit }
      tci(d, n)
      printf "%+.2f %% [%+.2f, %+.2f] (n = %d, sd %.2f)", TCI_M, TCI_M - TCI_H, TCI_M + TCI_H, n, TCI_SD
    }' "$RUNS"
}
mean_of() { awk -v k="$1" '$2 == k { s += $5; n++ } END { if (n) printf "%.4f", s / n; else print "n/a" }' "$RUNS"; }

say ""
say "# mean CPU s per GB: reno $(mean_of reno), mltcp $(mean_of mltcp), cubic $(mean_of cubic), mltcp_cubic $(mean_of mltcp_cubic), ccp1 $(mean_of ccp1), ccp$FLOWS $(mean_of ccpF), reno$FLOWS $(mean_of renoF)"
say "# paired CPU per GB, mean over rounds [95 % t interval]:"
say "ccp1 (CCP reno, 1 flow) vs reno:      $(paired ccp1 reno)   (target <= +2 %)"
if [ "$DATAPATH" = bpf ]; then
  # Issue 36: BPF mltcp against native Reno on the same stock kernel.
  say "mltcp (BPF) vs reno:                  $(paired mltcp reno)   (target <= +3 %)"
  say "mltcp_cubic (BPF) vs cubic:           $(paired mltcp_cubic cubic)"
else
  say "mltcp vs reno:                        $(paired mltcp reno)   (target <= +1 %)"
  say "mltcp_cubic vs cubic:                 $(paired mltcp_cubic cubic)   (target <= +1 %)"
fi
say "ccp$FLOWS vs ccp1 (CCP, $FLOWS flows vs 1):      $(paired ccpF ccp1)"
say "reno$FLOWS vs reno (control, no CCP):       $(paired renoF reno)"
say "ccp$FLOWS vs reno$FLOWS (CCP at $FLOWS flows):        $(paired ccpF renoF)"
for v in x y z; do
  grep -q " ccp${v}1 " "$RUNS" && {
    say "ccp${v}1 vs ccp1 (agent options):        $(paired ccp${v}1 ccp1)"
    say "ccp${v}1 vs reno:                        $(paired ccp${v}1 reno)"
  }
  grep -q " ccp${v}F " "$RUNS" && say "ccp${v}$FLOWS vs ccp$FLOWS (agent options):      $(paired ccp${v}F ccpF)"
done

# Per report, for each 1-flow CCP kind and round: the extra busy time over the same round's
# reno scaled to the kind's bytes, split into the agent's user and system time (getrusage, minus
# its start) and the rest; and the messages per report. Means over rounds.
say "# per report (1 flow, vs the round's reno at equal bytes), mean over rounds: extra_us = agent user + agent sys + rest; msgs"
for k in ccp1 ccpx1 ccpy1 ccpz1; do
  awk -v k="$k" '
    FNR == NR { if ($2 == "reno") { rb[$1] = $3; rs[$1] = $4 } if ($2 == k) { kb[$1] = $3; ks[$1] = $4 } next }
    $2 == k && ($1 in rb) && ($1 in kb) && $3 > 0 {
      n++
      extra = (ks[$1] - rs[$1] * kb[$1] / rb[$1]) * 1e6 / $3
      su = ($7 - $11 * $7 / ($7 + $8 + 1e-9)) / $3; ss = ($8 - $11 * $8 / ($7 + $8 + 1e-9)) / $3
      e += extra; u += su; sy += ss; rep += $3 * 1e9 / kb[$1]
      upd += $4 / $3; mi += $5 / $3; mo += $6 / $3; vc += $9 / $3
      if (n == 1 || $12 < wlo) wlo = $12
      if (n == 1 || $12 > whi) whi = $12
    }
    END {
      if (!n) exit
      printf "%-6s extra %.1f us = agent user %.1f + agent sys %.1f + rest %.1f; reports/GB %.0f; per report: updates %.2f, msgs in %.2f, out %.2f, agent wake-ups %.2f; window at close %d-%d segments (%d rounds)\n",
        k, e / n, u / n, sy / n, (e - u - sy) / n, rep / n, upd / n, mi / n, mo / n, vc / n, wlo, whi, n
    }' "$RUNS" "$AGENT" | tee -a "$SUMMARY"
done
if [ "$PER_ACK" = 1 ]; then
  say "# per ACK (--per-ack; acks.txt: round kind bytes instructions acks rcv_outsegs), instructions system-wide:"
  vm_per_ack_report "$ACKS" reno | tee -a "$SUMMARY"
fi
# The BPF algorithms' counters (flows started): that the transfers ran on them.
[ "$DATAPATH" = module ] || mltcp-bpf status > "$OUT/mltcp-bpf-status.txt" 2>&1
vm_net_teardown
