#!/usr/bin/env bash
# ci/scenarios/clock-check.sh: does host load move the guest's timing? Runs ci/vm-tests/guest_clock.sh
# (a fixed CPU loop timed in guest ns, and a 2 s reno flow's bytes through tbf 100 Mbit/s) in the VM
# twice: once on the otherwise idle host, once with both host cores kept busy by two CPU burners
# (bounded: they stop with the VM, or after --timeout). On the virtual clock (ci/vm-run --clock
# virtual) the loop's guest duration must agree within the tolerance; on the real clock it does
# not, which is what `--clock real` shows (the check then fails: the instrument would be unfit).
# The flow's bytes are reported, not checked: one short TCP flow is chaotic (a loss one
# nanosecond earlier or later changes its recovery), so on the real clock two runs of it differ by
# a few percent; on the virtual clock runs repeat to the bit (ci/README.md, "Clocks"; checked by
# ci/scenarios/repeat-check.sh), so the two counts should be equal there.
#
# Usage: ci/scenarios/clock-check.sh [--clock virtual|real] [--tolerance-pct P] [--results DIR]
#   defaults: virtual, 0.5 %, $MLTCP_CACHE/clock-check
# Prints `ok - guest_clock_<clock>` or `not ok - ...: REASON`, then `N passed, M failed`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ci=$(dirname "$here")
# shellcheck source=ci/lib.sh
. "$ci/lib.sh"

clock=virtual tolerance=0.5 results=$MLTCP_CACHE/clock-check timeout_s=600
while [ $# -gt 0 ]; do
  case "$1" in
    --clock) clock=$2; shift 2 ;;
    --tolerance-pct) tolerance=$2; shift 2 ;;
    --results) results=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
rm -rf "$results"; mkdir -p "$results"

run() {  # run NAME: one VM run into $results/NAME
  "$ci/vm-run" --clock "$clock" --no-module --timeout "$timeout_s" --results "$results/$1" \
    "$ci/vm-tests/guest_clock.sh" > "$results/$1.log" 2>&1 \
    || { log "error: the $1 run failed: $(tail -n 3 "$results/$1.log" | tr '\n' ' ')"; return 1; }
}
value() { awk -v k="$2" '$1 == k { print $2 }' "$results/$1/guest-clock.txt" 2>/dev/null; }

fail=""
run idle || fail="the idle-host run failed"
if [ -z "$fail" ]; then
  burners=()
  for _ in 1 2; do timeout "$timeout_s" sh -c 'while :; do :; done' & burners+=($!); done
  run loaded || fail="the loaded-host run failed"
  kill "${burners[@]}" 2>/dev/null || true
  wait "${burners[@]}" 2>/dev/null || true
fi
if [ -z "$fail" ]; then
  for k in loop_ns iperf_bytes; do
    checked=1; [ "$k" = iperf_bytes ] && checked=0
    a=$(value idle "$k") b=$(value loaded "$k")
    [ -n "$a" ] && [ -n "$b" ] || { fail="${fail:+$fail; }$k missing"; continue; }
    verdict=$(awk -v a="$a" -v b="$b" -v t="$tolerance" 'BEGIN {
      lo = a < b ? a : b; d = lo > 0 ? (a > b ? a - b : b - a) / lo * 100 : 1e9
      printf "%.4f %s", d, (d <= t ? "ok" : "over") }')
    if [ "$checked" = 1 ]; then
      echo "# $k: idle host $a, loaded host $b: differ by ${verdict% *} % (tolerance $tolerance %)"
      [ "${verdict#* }" = ok ] || fail="${fail:+$fail; }$k differs by ${verdict% *} %"
    else
      echo "# $k (reported, not checked): idle host $a, loaded host $b: differ by ${verdict% *} %"
    fi
  done
fi
if [ -z "$fail" ]; then
  echo "ok - guest_clock_$clock"; echo "1 passed, 0 failed"
else
  echo "not ok - guest_clock_$clock: $fail"; echo "0 passed, 1 failed"; exit 1
fi
