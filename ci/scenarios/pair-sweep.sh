#!/usr/bin/env bash
# ci/scenarios/pair-sweep.sh: sweeps over scenario (a)'s two identical VGG16 ring jobs on guest
# time (MLTCP's own experiment, docs/results/mltcp.md). Every combination of
#   --offsets: job B's start OFFSET % of the nominal communication time M after job A (M = the
#              per-worker ring bytes 2(W-1)/W x G over the 100 Mbit/s link = 268 ms), fixed for
#              every seed (`[jitter] start_ms = 0`: the seeds draw only the compute jitter); or
#              `seeded`: a.toml's 25 ms plus the seeded offset uniform in [0, C) (seed 1: none);
#   --ssai:    net.ipv4.tcp_slow_start_after_idle, 1 (Linux's default) or 0 (common on training
#              clusters);
#   --cm:      the compute time C as a multiple of M (compute_ms = CM x M / time_scale); `a`
#              keeps VGG16's own (C = 352 ms, ~1.25 M). Two jobs interleave only while C >= M;
#   --queue:   both switch ports' queue limit, ms (a.toml: 5). The queue sets the RTT under load
#              and so how many RTTs and loss cycles a communication phase spans (about 35 RTTs
#              of ~8 ms and one or two loss cycles with 5 ms), which MLTCP's window-increase
#              weighting needs to take effect;
#   --time-scale: one value for both jobs (a.toml: 2.5): stretches compute time and gradient
#              bytes alike, so a burst spans proportionally more RTTs and loss cycles (wall time
#              grows with it); M scales with it;
# becomes a scenario `pair_o<OFFSET>_s<SSAI>_c<CM>_q<QUEUE>_t<SCALE>` generated from a.toml (each edit
# checked, so a changed a.toml fails loudly), run with every congestion control under every seed
# (paired), over --vms parallel VMs. Prints trainemu's summary per scenario: mean/ideal with 95 %
# intervals, paired differences, the distribution of the interleaving iteration (target: mltcp
# within 15 iterations in >= 90 % of seeds), the uncontended-burst cost and the share of bursts
# that still overlap.
#
# Usage: ci/scenarios/pair-sweep.sh [--results DIR] [--offsets LIST] [--ssai LIST] [--cm LIST]
#                                   [--queue LIST] [--time-scale S]
#                                   [--ccs LIST] [--seeds N] [--vms J] [--iterations N]
#   defaults: results/pair-sweep, offsets 0,1,5,20, ssai 1,0, cm a, queue 5, cubic,reno,mltcp,
#   time scale 2.5, 5 seeds, 1 VM, 20 iterations (solo runs: 4 iterations per job and seed)
# Examples:
#   ci/scenarios/pair-sweep.sh --ccs cubic,mltcp --iterations 15            # collision starts
#   ci/scenarios/pair-sweep.sh --offsets seeded --ssai 1 --cm 2,1.05,0.95   # C/M across C = M
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ci=$(dirname "$here")
# shellcheck source=ci/lib.sh
. "$ci/lib.sh"

results=$REPO_ROOT/results/pair-sweep offsets=0,1,5,20 ssais=1,0 cms=a queues=5 ccs=cubic,reno,mltcp
seeds=5 vms=1 iterations=20 time_scale=2.5
while [ $# -gt 0 ]; do
  case "$1" in
    --results) results=$2; shift 2 ;;
    --offsets) offsets=$2; shift 2 ;;
    --ssai) ssais=$2; shift 2 ;;
    --cm) cms=$2; shift 2 ;;
    --queue) queues=$2; shift 2 ;;
    --time-scale) time_scale=$2; shift 2 ;;
    --ccs) ccs=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --vms) vms=$2; shift 2 ;;
    --iterations) iterations=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done

[[ $time_scale =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--time-scale: '$time_scale' is not a number"
# Nominal M of a.toml's jobs, ms: VGG16's gradient x time_scale 2.5 = 3 348 312 bytes (trainemu
# validate prints it), ring W = 2 sends 2(W-1)/W x G = G per worker, at 100 Mbit/s; M scales
# with the time scale.
m_ms=$(awk -v s="$time_scale" 'BEGIN { printf "%.3f", 3348312 / 2.5 * s * 8 / 100e6 * 1000 }')
gen=$(mktemp -d)
trap 'rm -rf "$gen"' EXIT
files=()
for pct in ${offsets//,/ }; do
  [[ $pct =~ ^([0-9]+(\.[0-9]+)?|seeded)$ ]] || die "--offsets: '$pct' is neither a percentage nor 'seeded'"
  for ssai in ${ssais//,/ }; do
    [[ $ssai =~ ^[01]$ ]] || die "--ssai: '$ssai' must be 0 or 1"
    for cm in ${cms//,/ }; do
      [[ $cm =~ ^([0-9]+(\.[0-9]+)?|a)$ ]] || die "--cm: '$cm' is neither a number nor 'a'"
     for q in ${queues//,/ }; do
      [[ $q =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--queue: '$q' is not a number of ms"
      name="pair_o${pct//./p}_s${ssai}_c${cm//./p}_q${q//./p}_t${time_scale//./p}"
      f=$gen/$name.toml
      sed -e "s/^name = \"a\"/name = \"$name\"/" -e "s/^solo_iterations = .*/solo_iterations = 4/" \
        "$here/a.toml" > "$f"
      grep -q "^name = \"$name\"" "$f" || die "a.toml no longer has name = \"a\": update $0"
      sed -i "s/^time_scale = 2.5$/time_scale = $time_scale/" "$f"
      [ "$(grep -c "^time_scale = $time_scale$" "$f")" = 2 ] \
        || die "a.toml's two jobs no longer have time_scale = 2.5: update $0"
      if [ "$pct" != seeded ]; then
        off=$(awk -v p="$pct" -v m="$m_ms" 'BEGIN { printf "%.3f", p / 100 * m }')
        sed -i "s/^start_offset_ms = 25$/start_offset_ms = $off/" "$f"
        grep -q "^start_offset_ms = $off$" "$f" \
          || die "a.toml no longer has B's start_offset_ms = 25: update $0"
      fi
      if [ "$cm" != a ]; then
        c=$(awk -v k="$cm" -v m="$m_ms" -v s="$time_scale" 'BEGIN { printf "%.3f", k * m / s }')
        sed -i "s/^time_scale = $time_scale$/time_scale = $time_scale\ncompute_ms = $c/" "$f"
        [ "$(grep -c "^compute_ms = $c$" "$f")" = 2 ] \
          || die "a.toml's two jobs no longer have time_scale = $time_scale: update $0"
      fi
      sed -i "s/queue_ms = 5 }/queue_ms = $q }/" "$f"
      [ "$(grep -c "queue_ms = $q }" "$f")" = 2 ] \
        || die "a.toml's two hosts no longer have queue_ms = 5: update $0"
      printf '\n[sysctl]\ntcp_slow_start_after_idle = %s\n' "$ssai" >> "$f"
      [ "$pct" = seeded ] || printf '\n[jitter]\nstart_ms = 0\n' >> "$f"
      files+=("$f")
     done
    done
  done
done

log "pair sweep: M = $m_ms ms; offsets $offsets (% of M); tcp_slow_start_after_idle $ssais; C/M $cms; queue $queues ms; time scale $time_scale"
"$here/run-scenario.sh" --results "$results" --iterations "$iterations" --seeds "$seeds" \
  --vms "$vms" --ccs "$ccs" "${files[@]}"
for f in "$results"/pair_*/summary.txt; do [ -f "$f" ] && { cat "$f"; echo; }; done
