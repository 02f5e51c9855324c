#!/usr/bin/env bash
# ci/scenarios/repeat-check.sh: is the virtual-clock testbed a repeatable instrument? Runs the same
# scenario with the same seed in two VMs at once (ci/vm-run --clock virtual; the two VMs load both
# host cores, so each runs on a busy host) and compares every (seed, run, job) mean iteration time
# with `trainemu compare`: they must agree within the tolerance
# (0.5 %). Used by ci/test-all on the short e2e scenario.
#
# Usage: ci/scenarios/repeat-check.sh [--results DIR] [--tolerance-pct P] [--ccs LIST]
#                                     [--seeds N] [--iterations N] [SCENARIO.toml]
#   defaults: $MLTCP_CACHE/repeat-check, 0.5 %, the scenario's ccs, 1 seed, ci/scenarios/e2e.toml
# Prints `ok - repeat_<scenario>` or `not ok - repeat_<scenario>: REASON`, then
# `N passed, M failed`; exit status 0 when the two runs agree.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ci=$(dirname "$here")
# shellcheck source=ci/lib.sh
. "$ci/lib.sh"

results=$MLTCP_CACHE/repeat-check tolerance=0.5 opts=() seeds=1 file=$here/e2e.toml
while [ $# -gt 0 ]; do
  case "$1" in
    --results) results=$2; shift 2 ;;
    --tolerance-pct) tolerance=$2; shift 2 ;;
    --ccs) opts+=(--ccs "$2"); shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --iterations) opts+=(--iterations "$2"); shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) file=$1; shift ;;
  esac
done
name=$(basename "$file" .toml)

rm -rf "$results"
mkdir -p "$results"
pids=()
for k in 1 2; do
  "$here/run-scenario.sh" --results "$results/run-$k" --clock virtual --vms 1 --seeds "$seeds" \
    ${opts[@]+"${opts[@]}"} "$file" > "$results/run-$k.log" 2>&1 &
  pids+=($!)
  # The second run starts after the first has taken the build lock, so it never builds anything.
  sleep 1
done
fail=""
for k in 1 2; do
  st=0; wait "${pids[$((k - 1))]}" || st=$?
  [ "$st" = 0 ] || fail="${fail:+$fail; }run $k exited with status $st (log: $results/run-$k.log: $(tail -n 2 "$results/run-$k.log" | tr '\n' ' '))"
done
if [ -z "$fail" ]; then
  if "$TARGET_DIR/release/trainemu" compare --tolerance-pct "$tolerance" \
      "$results/run-1" "$results/run-2" > "$results/compare.txt" 2>&1; then
    :
  else
    fail="the two runs differ by more than $tolerance %"
  fi
  sed 's/^/# /' "$results/compare.txt"
fi
if [ -z "$fail" ]; then
  echo "ok - repeat_$name"
  echo "1 passed, 0 failed"
else
  echo "not ok - repeat_$name: $fail"
  echo "0 passed, 1 failed"
  exit 1
fi
