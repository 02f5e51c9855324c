#!/usr/bin/env bash
# ci/scenarios/run-scenario.sh: run training-traffic scenarios in the VM and report them.
# Host side: validates the scenario files (nothing starts if one is invalid), boots the VM through
# ci/vm-run with ci/scenarios/in-vm.sh, passing each file by name (the defaults, built into
# trainemu) or as its text, then runs `trainemu report` on the host (table + PNG plots).
# The seeds are split over parallel VMs (one host core each on the virtual clock, so they do not
# disturb each other's timing), whose runs/ folders are merged before the report.
#
# Usage: ci/scenarios/run-scenario.sh [--results DIR] [--iterations N] [--ccs LIST]
#                                     [--seeds N | --seed-list LIST] [--vms J]
#                                     [--clock virtual|real] [--timeout S] [--no-module]
#                                     [--kernel-deb debian12|debian12-backports]
#                                     [--datapath module|bpf] [--agent-log FILTER]
#                                     SCENARIO.toml...
#   --results DIR   results directory (default results/trainemu-<UTC time>); each scenario
#                   writes DIR/<name>/ (meta.json, runs/<run>/s<seed>/, summary.txt,
#                   summary.json, *.png); DIR/vm-K/ keeps VM K's console log and CPU use
#   --iterations N  iterations per job, replacing the scenarios' (quick checks)
#   --ccs LIST      comma-separated congestion controls replacing the scenarios'
#   --seeds N       seeds 1..N for every congestion control (default 10; paired comparisons)
#   --seed-list L   explicit comma-separated seeds instead
#   --vms J         VMs run in parallel, each taking a share of the seeds (default 2, at most
#                   the number of seeds; each needs one host core and --mem of memory)
#   --clock C       the VMs' clock (ci/vm-run --clock; default virtual)
#   --timeout S     per-VM timeout in wall seconds (default 7200)
#   --no-module     boot without tcp_mltcp.ko (mltcp runs are then skipped)
#   --kernel-deb K  boot Debian's stock kernel (ci/vm-run --kernel-deb K; debian12: 6.1,
#                   debian12-backports: 6.12), where no tcp_mltcp.ko loads: the guest runs
#                   `mltcp-bpf load` and trainemu runs with --datapath bpf (mltcp and
#                   mltcp_cubic as BPF struct_ops, the agent on `ccp-agent run --ipc bpf`; ccs
#                   entries the BPF path cannot run, e.g. mltcp_dctcp or module parameters,
#                   are refused before any run starts). Added 2026-11-29.
#   --datapath D    what provides mltcp and mltcp_cubic: module (tcp_mltcp.ko; the default on
#                   the testbed's kernel) or bpf (mltcp-bpf's struct_ops, as with --kernel-deb).
#                   `--datapath bpf` without --kernel-deb boots the testbed's own kernel (it has
#                   BTF since 2026-11-29) without tcp_mltcp.ko, so the two datapaths can be
#                   compared on the same kernel; with --kernel-deb it is implied, and
#                   `--datapath module` is refused there. Added 2026-11-29.
#   --agent-log F   the ccp-agent's log filter in the +agent runs (RUST_LOG syntax; default info;
#                   e.g. "info,ccp_agent::plan=debug,ccp_agent::progress=debug" logs every
#                   planning decision and iteration change to runs/<run>/s<seed>/agent/agent.log)
# Model profiles come from ci/scenarios/models.toml, which is built into trainemu.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ci=$(dirname "$here")
# shellcheck source=ci/lib.sh
. "$ci/lib.sh"

results="" timeout_s=7200 vm_opts=() guest_opts=() files=() seeds=10 seed_list="" vms=2
kernel_deb="" datapath="" no_module=0
clock=${MLTCP_VM_CLOCK:-virtual}
while [ $# -gt 0 ]; do
  case "$1" in
    --results) results=$2; shift 2 ;;
    --iterations) guest_opts+=(--iterations "$2"); shift 2 ;;
    --ccs) guest_opts+=(--ccs "$2"); shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --seed-list) seed_list=$2; shift 2 ;;
    --vms) vms=$2; shift 2 ;;
    --clock) clock=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --no-module) no_module=1; shift ;;
    --kernel-deb)
      [ $# -ge 2 ] || die "--kernel-deb needs debian12 or debian12-backports"
      case "$2" in
        debian12|debian12-backports) ;;
        *) die "--kernel-deb '$2': debian12 or debian12-backports (Debian's stock kernels, run on the BPF path; another kernel package: ci/vm-run --kernel-deb FILE --module FILE)" ;;
      esac
      kernel_deb=$2; shift 2 ;;
    --datapath)
      [ $# -ge 2 ] || die "--datapath needs module or bpf"
      case "$2" in
        module|bpf) datapath=$2 ;;
        *) die "--datapath '$2': module (tcp_mltcp.ko) or bpf (mltcp-bpf's struct_ops)" ;;
      esac
      shift 2 ;;
    --agent-log) guest_opts+=(--agent-log "$2"); shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) files+=("$1"); shift ;;
  esac
done
[ ${#files[@]} -gt 0 ] || die "no scenario file given (see --help)"
# The datapath: a stock kernel has only the BPF one; on the testbed's kernel bpf boots without
# tcp_mltcp.ko (which would hold the names mltcp and mltcp_cubic).
if [ -n "$kernel_deb" ]; then
  [ "$datapath" != module ] \
    || die "--datapath module with --kernel-deb $kernel_deb: Debian's stock kernels cannot load tcp_mltcp.ko (use --datapath bpf, or drop --kernel-deb)"
  datapath=bpf
  vm_opts+=(--kernel-deb "$kernel_deb")
else
  [ -n "$datapath" ] || datapath=module
  if [ "$datapath" = bpf ] || [ "$no_module" = 1 ]; then vm_opts+=(--no-module); fi
fi
[ "$datapath" = module ] || guest_opts+=(--datapath "$datapath")
[[ "$vms" =~ ^[1-9][0-9]*$ ]] || die "--vms must be a positive integer, not '$vms'"
if [ -n "$seed_list" ]; then
  [[ "$seed_list" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "--seed-list must be seeds >= 1 separated by commas, not '$seed_list'"
  IFS=, read -r -a all_seeds <<<"$seed_list"
else
  [[ "$seeds" =~ ^[1-9][0-9]*$ ]] || die "--seeds must be a positive integer, not '$seeds'"
  mapfile -t all_seeds < <(seq 1 "$seeds")
fi
[ "$vms" -le "${#all_seeds[@]}" ] || vms=${#all_seeds[@]}
[ -n "$results" ] || results=$REPO_ROOT/results/trainemu-$(date -u +%Y%m%d-%H%M%S)
vm_opts+=(--clock "$clock")

(cd "$REPO_ROOT" && cargo build --release --quiet -p trainemu) || die "building trainemu failed"
trainemu=$TARGET_DIR/release/trainemu
"$trainemu" validate "${files[@]}" || die "invalid scenario (nothing was started)"

# The default scenarios are built into trainemu (rebuilt by ci/vm-run), so they pass by name;
# any other file passes as its text.
inline=()
for f in "${files[@]}"; do
  b=$(basename "$f")
  if [ "$(cd "$(dirname "$f")" && pwd)" = "$here" ] && [[ " a.toml b.toml c.toml e2e.toml " == *" $b "* ]]; then
    inline+=("$b")
  else
    inline+=(--inline "$b" "$(cat "$f")")
  fi
done
mkdir -p "$results"
# Seeds dealt round robin over the VMs (seed k to VM (k-1) mod J), so each VM gets a mix of
# early and late seeds and the VMs finish at about the same time.
rc=0 pids=()
for ((v = 0; v < vms; v++)); do
  list=""
  for ((k = v; k < ${#all_seeds[@]}; k += vms)); do list=${list:+$list,}${all_seeds[$k]}; done
  out=$results/vm-$((v + 1))
  rm -rf "$out"; mkdir -p "$out"
  log "VM $((v + 1)) of $vms: seeds $list"
  "$ci/vm-run" --results "$out" --timeout "$timeout_s" ${vm_opts[@]+"${vm_opts[@]}"} \
    "$here/in-vm.sh" --seed-list "$list" ${guest_opts[@]+"${guest_opts[@]}"} "${inline[@]}" \
    > "$out/vm-run.log" 2>&1 &
  pids+=($!)
done
# Follow the first VM's output here; the others' is in DIR/vm-K/vm-run.log.
tail -n +1 -f --pid="${pids[0]}" "$results/vm-1/vm-run.log" 2>/dev/null || true
for ((v = 0; v < vms; v++)); do
  st=0; wait "${pids[$v]}" || st=$?
  [ "$st" = 0 ] || { log "VM $((v + 1)) exited with status $st (see $results/vm-$((v + 1))/vm-run.log)"; rc=$st; }
done
# Merge: each scenario directory of every VM into DIR/<scenario>/ (meta.json from the first VM
# that has one; runs/<run>/s<seed>/ from all; trainemu report checks they are one scenario).
for ((v = 0; v < vms; v++)); do
  for sd in "$results/vm-$((v + 1))"/*/; do
    [ -f "$sd/meta.json" ] || continue
    name=$(basename "$sd") dst=$results/$(basename "$sd")
    mkdir -p "$dst/runs"
    [ -f "$dst/meta.json" ] || cp "$sd/meta.json" "$dst/"
    [ -f "$sd/scenario.toml" ] && [ ! -f "$dst/scenario.toml" ] && cp "$sd/scenario.toml" "$dst/"
    [ -d "$sd/runs" ] && cp -a "$sd/runs/." "$dst/runs/"
    rm -rf "$sd"
  done
done
log "VMs exited with status $rc; reporting $results"
scen_dirs=()
for sd in "$results"/*/; do [ -f "$sd/meta.json" ] && scen_dirs+=("$sd"); done
if [ ${#scen_dirs[@]} -eq 0 ]; then
  log "error: no scenario results in $results"
  [ "$rc" != 0 ] || rc=1
elif ! "$trainemu" report "${scen_dirs[@]}" && [ "$rc" = 0 ]; then
  rc=1
fi
exit "$rc"
