#!/usr/bin/env bash
# ci/scenarios/run-scenario.sh: run training-traffic scenarios in the VM and report them (issue 3).
# Host side: validates the scenario files (nothing starts if one is invalid), boots the VM through
# ci/vm-run with ci/scenarios/in-vm.sh, passing each file by name (the defaults, built into
# trainemu) or as its text, then runs
# `trainemu report` on the host (table + PNG plots).
#
# Usage: ci/scenarios/run-scenario.sh [--results DIR] [--iterations N] [--ccs LIST]
#                                     [--timeout S] [--no-module] [--agent-log FILTER]
#                                     SCENARIO.toml...
#   --results DIR   results directory (default results/trainemu-<UTC time>); each scenario
#                   writes DIR/<name>/ (meta.json, runs/*, summary.txt, summary.json, *.png)
#   --iterations N  iterations per job, replacing the scenarios' (quick checks)
#   --ccs LIST      comma-separated congestion controls replacing the scenarios'
#   --timeout S     VM timeout (default 2400)
#   --no-module     boot without tcp_mltcp.ko (mltcp runs are then skipped)
#   --agent-log F   the ccp-agent's log filter in the +agent runs (RUST_LOG syntax; default info;
#                   e.g. "info,ccp_agent::plan=debug,ccp_agent::progress=debug" logs every
#                   planning decision and iteration change to runs/<run>/agent/agent.log)
# Model profiles come from ci/scenarios/models.toml, which is built into trainemu.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ci=$(dirname "$here")
# shellcheck source=ci/lib.sh
. "$ci/lib.sh"

results="" timeout_s=2400 vm_opts=() guest_opts=() files=()
while [ $# -gt 0 ]; do
  case "$1" in
    --results) results=$2; shift 2 ;;
    --iterations) guest_opts+=(--iterations "$2"); shift 2 ;;
    --ccs) guest_opts+=(--ccs "$2"); shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --no-module) vm_opts+=(--no-module); shift ;;
    --agent-log) guest_opts+=(--agent-log "$2"); shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) files+=("$1"); shift ;;
  esac
done
[ ${#files[@]} -gt 0 ] || die "no scenario file given (see --help)"
[ -n "$results" ] || results=$REPO_ROOT/results/trainemu-$(date -u +%Y%m%d-%H%M%S)

(cd "$REPO_ROOT" && cargo build --release --quiet -p trainemu) || die "building trainemu failed"
trainemu=$REPO_ROOT/target/release/trainemu
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
set +e
"$ci/vm-run" --results "$results" --timeout "$timeout_s" ${vm_opts[@]+"${vm_opts[@]}"} \
  "$here/in-vm.sh" ${guest_opts[@]+"${guest_opts[@]}"} "${inline[@]}"
rc=$?
set -e
log "VM exited with status $rc; reporting $results"
if ! "$trainemu" report "$results" && [ "$rc" = 0 ]; then rc=1; fi
exit "$rc"
