#!/usr/bin/env bash
#!/usr/bin/env bash
# ci/scenarios/demo.sh: the project's main job: DNN-training traffic on real TCP flows through
# tcp_mltcp.ko in the VM, on guest time (ci/vm-run --clock virtual) over seeds. Runs scenarios
# (a) two identical VGG16 ring jobs and (b) three identical jobs on drop-tail ports
# (ci/scenarios/{a,b}.toml) under cubic, reno and mltcp, and (d) scenario (a)'s jobs on ECN-marking
# ports, from seeded start offsets and from exact collisions (ci/scenarios/{d,d-collide}.toml)
# under dctcp, mltcp_dctcp and cubic (their files' lists), once per congestion control and seed,
# plus each job alone per seed (its M), with the seeds split over two VMs, and prints per scenario
# and congestion control: mean/ideal with a 95 % confidence interval over seeds, the paired
# differences between congestion controls, the distribution of the iteration at which the jobs
# interleaved, mean/ideal after convergence, the job spread and the share of the link the
# higher-F flow got against F's ratio; the PNG plots (with the intervals) beside the tables.
#
# Usage: ci/scenarios/demo.sh [--results DIR] [--iterations N] [--seeds N] [--vms J]
#                             [--ccs LIST] [--clock virtual|real] [SCENARIO.toml...]
#   defaults: results/demo, 30 iterations, 10 seeds, 2 VMs, virtual clock, scenarios a, b, d and
#   d-collide; congestion controls: cubic,reno,mltcp for a and b, each other file's own list
#   (--ccs replaces them all); c, a-wan, agent, ecn and the sweeps on demand
# On a fresh Debian 12 machine it installs what is missing first (ci/deps.sh, as root).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ci=$(dirname "$here")
# shellcheck source=ci/lib.sh
. "$ci/lib.sh"

results=$REPO_ROOT/results/demo files=()
# 30 iterations: long enough to see interleaving within 15 iterations and to average 15 after it;
# 10 seeds: the issue's default; on a and b cubic, reno, mltcp: MLTCP against fair sharing and its
# own base (a.toml's own list adds parameter variants, run on demand).
iterations=30 seeds=10 vms=2 ccs="" clock=virtual
drop_tail_ccs=cubic,reno,mltcp
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
[ ${#files[@]} -gt 0 ] || files=("$here/a.toml" "$here/b.toml" "$here/d.toml" "$here/d-collide.toml")
# Two groups: the files whose congestion controls the demo sets (a and b, unless --ccs), the
# files that keep their own (the others; all of them under --ccs, with its list).
fixed=() own=()
for f in "${files[@]}"; do
  case "$(basename "$f")" in
    a.toml|b.toml) if [ -n "$ccs" ]; then own+=("$f"); else fixed+=("$f"); fi ;;
    *) own+=("$f") ;;
  esac
done

"$ci/deps.sh"
rm -rf "$results"
mkdir -p "$(dirname "$results")"
set +e
start=$(date +%s)
rc=0
: > "$results.log"
# run GROUP_CCS FILE...: one run-scenario.sh invocation into $results (GROUP_CCS empty: the
# files' own lists); its status folds into rc.
run() {
  local group_ccs=$1; shift
  [ $# -gt 0 ] || return 0
  local opts=(--results "$results" --iterations "$iterations" --seeds "$seeds" --vms "$vms" --clock "$clock")
  [ -z "$group_ccs" ] || opts+=(--ccs "$group_ccs")
  "$here/run-scenario.sh" "${opts[@]}" "$@" 2>&1 | tee -a "$results.log"
  local st=${PIPESTATUS[0]}
  [ "$st" = 0 ] || rc=$st
}
run "$drop_tail_ccs" ${fixed[@]+"${fixed[@]}"}
run "$ccs" ${own[@]+"${own[@]}"}
set -e
echo
log "demo tables (also in $results/*/summary.txt; plots in $results/*/*.png; full log $results.log):"
for f in "$results"/*/summary.txt; do [ -f "$f" ] && { cat "$f"; echo; }; done
log "demo took $(( $(date +%s) - start )) s of wall time"
exit "$rc"
