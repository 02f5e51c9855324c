#!/usr/bin/env bash
# ci/scenarios/demo.sh: the project's main job (issue 3): DNN-training traffic on real TCP flows
# through tcp_mltcp.ko in the VM. Runs the default scenarios a, b, c (ci/scenarios/{a,b,c}.toml)
# once per congestion control (cubic, reno, mltcp, mltcp_cubic) plus each job alone, in one VM
# boot, and prints per scenario and congestion control: mean and p99 iteration time per job,
# speedup against cubic, the ideal C + M (M measured solo in the same run), the measured/ideal
# ratio and the iteration at which the jobs became interleaved. Writes the PNG plots (throughput
# on the bottleneck per run, iteration-time CDF) beside the tables.
#
# Usage: ci/scenarios/demo.sh [--results DIR] [--iterations N] [SCENARIO.toml...]
#   (default results/demo; ~15 minutes under qemu TCG; --iterations for a quick look)
# On a fresh Debian 12 machine it installs what is missing first (ci/deps.sh, as root).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ci=$(dirname "$here")
# shellcheck source=ci/lib.sh
. "$ci/lib.sh"

results=$REPO_ROOT/results/demo opts=() files=()
while [ $# -gt 0 ]; do
  case "$1" in
    --results) results=$2; shift 2 ;;
    --iterations) opts+=(--iterations "$2"); shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) files+=("$1"); shift ;;
  esac
done
[ ${#files[@]} -gt 0 ] || files=("$here/a.toml" "$here/b.toml" "$here/c.toml")

"$ci/deps.sh"
rm -rf "$results"
mkdir -p "$(dirname "$results")"
set +e
"$here/run-scenario.sh" --results "$results" --timeout 3000 ${opts[@]+"${opts[@]}"} "${files[@]}" 2>&1 \
  | tee "$results.log"
rc=${PIPESTATUS[0]}
set -e
echo
log "demo tables (also in $results/*/summary.txt; plots in $results/*/*.png; full log $results.log):"
for f in "$results"/*/summary.txt; do [ -f "$f" ] && { cat "$f"; echo; }; done
exit "$rc"
