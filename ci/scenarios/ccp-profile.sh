#!/bin/sh
# ci/scenarios/ccp-profile.sh: where a CCP report's guest CPU goes (issue 20), by sampling the
# whole guest with perf during one CCP Reno transfer and one native reno transfer. In the VM, as
# root, sh = dash; perf comes from the host (Debian's linux-perf, installed by ci/deps.sh; any
# recent perf reads this kernel's samples):
#
#   ci/vm-run --extra /usr/bin/perf --results DIR ci/scenarios/ccp-profile.sh [--secs S]
#             [--app-rate MBIT] [--ccp-args "A..."]
#
# Each kind (reno, then ccp1: mltcp with `ccp-test-agent reno A...`) runs one iperf3 transfer of S
# seconds (default 2) at MBIT Mbit/s (default 4000, as ccp-overhead.sh --app-rate) from the
# sender to the receiver namespace under `perf record -a -e cpu-clock -F 4999` (a software
# timer: TCG emulates no PMU; on the guest clock a sample is a fixed count of instructions).
# perf costs CPU itself, so this gives where the time goes, not how much there is: the amounts
# come from ccp-overhead.sh. Files in /results/ccp-profile: KIND.sym.txt (samples by command and
# symbol, kernel and user), KIND.dso.txt (by command and object), KIND.mltcp.txt (tcp_mltcp's
# own symbols, all of them), the agent's log, and the iperf3 JSON. A single run: read it as an
# anecdote that points where to measure.

VM_LIB=${MLTCP_VM_LIB:-/host/ci/vm-lib.sh}
. "$VM_LIB" || { echo "cannot source vm-lib.sh"; exit 1; }
SECS=2 APP_RATE_MBIT=4000 CCP_ARGS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --secs) SECS=$2; shift 2 ;;
    --app-rate) APP_RATE_MBIT=$2; shift 2 ;;
    --ccp-args) CCP_ARGS=$2; shift 2 ;;
    *) echo "ccp-profile.sh: unknown argument $1"; exit 2 ;;
  esac
done
OUT=${RESULTS:-/results}/ccp-profile
mkdir -p "$OUT"
command -v perf >/dev/null || { echo "no perf: pass --extra /usr/bin/perf to ci/vm-run"; exit 1; }
grep -q '^tcp_mltcp ' /proc/modules || { echo "tcp_mltcp not loaded"; exit 1; }
vm_net_setup || { echo "vm_net_setup failed"; exit 1; }
echo 0 > /proc/sys/kernel/kptr_restrict 2>/dev/null
echo -1 > /proc/sys/kernel/perf_event_paranoid 2>/dev/null
# A discarded warm-up transfer (the first after boot costs more, see ccp-overhead.sh).
vm_iperf "$OUT/warmup.json" -C reno -t "$SECS" -b "${APP_RATE_MBIT}M" || exit 1

for kind in reno ccp1; do
  agent=""
  alg=reno
  if [ "$kind" = ccp1 ]; then
    alg=mltcp
    # shellcheck disable=SC2086 # the options are words
    ccp-test-agent reno $CCP_ARGS > "$OUT/agent.log" 2>&1 &
    agent=$!
    i=0
    while ! grep -q "agent listening" "$OUT/agent.log" 2>/dev/null; do
      i=$((i + 1)); [ $i -lt 50 ] || { echo "agent did not start"; exit 1; }
      sleep 0.1
    done
  fi
  perf record -q -a -e cpu-clock -F 4999 -o "$OUT/$kind.data" -- \
    sh -c ". \"$VM_LIB\"; vm_iperf \"$OUT/$kind.json\" -C $alg -t $SECS -b ${APP_RATE_MBIT}M" \
    || { echo "$kind: perf record failed"; exit 1; }
  if [ -n "$agent" ]; then kill "$agent"; wait "$agent" 2>/dev/null; fi
  perf report -i "$OUT/$kind.data" --stdio --no-children --sort comm,sym --percent-limit 0.3 \
    > "$OUT/$kind.sym.txt" 2>/dev/null
  perf report -i "$OUT/$kind.data" --stdio --no-children --sort comm,dso \
    > "$OUT/$kind.dso.txt" 2>/dev/null
  # The module's own symbols, every one (the per-ACK program and its glue under CCP).
  perf report -i "$OUT/$kind.data" --stdio --no-children --sort dso,sym --percent-limit 0 \
    2>/dev/null | grep 'tcp_mltcp' > "$OUT/$kind.mltcp.txt"
  rm -f "$OUT/$kind.data"
  echo "== $kind: $(vm_iperf_bytes "$OUT/$kind.json") bytes; top by command and object:"
  grep -v '^#' "$OUT/$kind.dso.txt" | grep -v '^$' | head -n 12
  echo "== $kind: top symbols:"
  grep -v '^#' "$OUT/$kind.sym.txt" | grep -v '^$' | head -n 40
done
grep 'agent stopped\|flow closed' "$OUT/agent.log"
vm_net_teardown
