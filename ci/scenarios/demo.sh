#!/usr/bin/env bash
#!/usr/bin/env bash
# ci/scenarios/demo.sh: the project's main job: DNN-training traffic on real TCP flows through
# tcp_mltcp.ko in the VM, on guest time (ci/vm-run --clock virtual) over seeds. Runs scenarios
# (a) two identical VGG16 ring jobs and (b) three identical jobs (ci/scenarios/{a,b}.toml) once
# per congestion control and seed, plus each job alone per seed (its M), with the seeds split
# over two VMs, and prints per scenario and congestion control: mean/ideal with a 95 % confidence
# interval over seeds, the paired difference against cubic and reno, the distribution of the
# iteration at which the jobs interleaved, mean/ideal after convergence and the job spread; the
# PNG plots (with the intervals) beside the tables.
#
# Usage: ci/scenarios/demo.sh [--results DIR] [--iterations N] [--seeds N] [--vms J]
#                             [--ccs LIST] [--clock virtual|real] [SCENARIO.toml...]
#   defaults: results/demo, 30 iterations, 10 seeds, 2 VMs, cubic,reno,mltcp, virtual clock,
#   scenarios a and b (c, a-wan, agent, ecn and the sweeps on demand)
# On a fresh Debian 12 machine it installs what is missing first (ci/deps.sh, as root).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ci=$(dirname "$here")
# shellcheck source=ci/lib.sh
. "$ci/lib.sh"

results=$REPO_ROOT/results/demo files=()
# 30 iterations: long enough to see interleaving within 15 iterations and to average 15 after it;
# 10 seeds: the issue's default; cubic, reno, mltcp: MLTCP against fair sharing and its own base.
iterations=30 seeds=10 vms=2 ccs=cubic,reno,mltcp clock=virtual
while [ $# -gt 0 ]; do
  case "$1" in
    --results) results=$2; shift 2 ;;
    --iterations) iterations=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --vms) vms=$2; shift 2 ;;
    --ccs) ccs=$2; shift 2 ;;
    --clock) clock=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) files+=("$1"); shift ;;
  esac
done
[ ${#files[@]} -gt 0 ] || files=("$here/a.toml" "$here/b.toml")

"$ci/deps.sh"
rm -rf "$results"
mkdir -p "$(dirname "$results")"
set +e
start=$(date +%s)
"$here/run-scenario.sh" --results "$results" --iterations "$iterations" --seeds "$seeds" \
  --vms "$vms" --ccs "$ccs" --clock "$clock" "${files[@]}" 2>&1 \
  | tee "$results.log"
rc=${PIPESTATUS[0]}
set -e
echo
log "demo tables (also in $results/*/summary.txt; plots in $results/*/*.png; full log $results.log):"
for f in "$results"/*/summary.txt; do [ -f "$f" ] && { cat "$f"; echo; }; done
log "demo took $(( $(date +%s) - start )) s of wall time"
exit "$rc"
