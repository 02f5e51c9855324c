#!/bin/sh
# ci/scenarios/in-vm.sh: guest side of the training-traffic scenarios. Runs in the VM
# (sh = dash, as root) through ci/vm-run; ci/scenarios/run-scenario.sh is the host-side command:
#
#   ci/vm-run --results DIR ci/scenarios/in-vm.sh [OPTIONS] SCENARIO...
#
# SCENARIO is a path inside the guest, or the name of a default scenario (a.toml, b.toml, c.toml,
# e2e.toml, also as ci/scenarios/a.toml): those are built into `trainemu` (only the binaries of
# ci/vm-bins.txt and ci/vm-lib.sh cross into the VM).
# Options:
#   --inline NAME TEXT   a scenario given as its text (run-scenario.sh passes host files this way)
#   --iterations N       iterations per job, replacing the scenarios' (quick checks)
#   --ccs LIST           comma-separated congestion controls replacing the scenarios'
#   --agent-log FILTER   the ccp-agent's log filter (MLTCP_AGENT_LOG, RUST_LOG syntax)
#   --seeds N            seeds 1..N (trainemu run --seeds; default trainemu's, 10)
#   --seed-list LIST     comma-separated seeds (trainemu run --seed-list)
#   --datapath bpf       a kernel without tcp_mltcp.ko: a stock kernel (ci/vm-run --kernel-deb
#                        debian12...) or the testbed's own (ci/vm-run --no-module; it has BTF).
#                        `mltcp-bpf load` registers mltcp and mltcp_cubic (HZ from the Kconfig
#                        vm-run ships in /host/boot, or from /proc/config.gz) before the runs, and
#                        trainemu runs with --datapath bpf (the agent on `ccp-agent run --ipc
#                        bpf`); `mltcp-bpf status` is printed after them. `module` (the default)
#                        changes nothing.
# Writes /results/<scenario>/ (see `trainemu run --help`) and prints each scenario's table
# (`trainemu report --no-plots`; the PNGs are drawn on the host). Exit status: trainemu run's.

OUT=${RESULTS:-/results}
SCEN_DIR=/tmp/trainemu-scenarios
mkdir -p "$SCEN_DIR" "$OUT"
set -f   # no globbing of scenario names
opts="" files="" datapath=module
while [ $# -gt 0 ]; do
  case "$1" in
    --inline)
      [ $# -ge 3 ] || { echo "in-vm.sh: --inline needs NAME and TEXT"; exit 2; }
      case "$2" in */*|"") echo "in-vm.sh: bad --inline name '$2'"; exit 2 ;; esac
      printf '%s\n' "$3" > "$SCEN_DIR/$2"
      files="$files $SCEN_DIR/$2"; shift 3 ;;
    --iterations) [ $# -ge 2 ] || { echo "in-vm.sh: --iterations needs N"; exit 2; }
      opts="$opts --iterations $2"; shift 2 ;;
    --ccs) [ $# -ge 2 ] || { echo "in-vm.sh: --ccs needs a list"; exit 2; }
      opts="$opts --ccs $2"; shift 2 ;;
    --seeds) [ $# -ge 2 ] || { echo "in-vm.sh: --seeds needs N"; exit 2; }
      opts="$opts --seeds $2"; shift 2 ;;
    --seed-list) [ $# -ge 2 ] || { echo "in-vm.sh: --seed-list needs a list"; exit 2; }
      opts="$opts --seed-list $2"; shift 2 ;;
    --datapath) [ $# -ge 2 ] || { echo "in-vm.sh: --datapath needs module or bpf"; exit 2; }
      case "$2" in module|bpf) datapath=$2 ;; *) echo "in-vm.sh: --datapath '$2': module or bpf"; exit 2 ;; esac
      opts="$opts --datapath $2"; shift 2 ;;
    --agent-log) [ $# -ge 2 ] || { echo "in-vm.sh: --agent-log needs a filter"; exit 2; }
      export MLTCP_AGENT_LOG="$2"; shift 2 ;;
    -*) echo "in-vm.sh: unknown option $1"; exit 2 ;;
    *) files="$files $1"; shift ;;
  esac
done
[ -n "$files" ] || { echo "in-vm.sh: no scenario given"; exit 2; }
command -v trainemu >/dev/null 2>&1 || { echo "in-vm.sh: trainemu not on PATH (is it in ci/vm-bins.txt?)"; exit 1; }

if [ "$datapath" = bpf ]; then
  # No tcp_mltcp.ko: the BPF struct_ops take its names. libbpf reads HZ from
  # /boot/config-$(uname -r) (Debian's kernels: vm-run ships it) or /proc/config.gz (ours).
  . "${MLTCP_VM_LIB:-/host/ci/vm-lib.sh}" || { echo "in-vm.sh: cannot source vm-lib.sh"; exit 1; }
  why=$(vm_bpf_load "$OUT/mltcp-bpf-load.txt") || { echo "in-vm.sh: --datapath bpf: $why"; exit 1; }
  echo "in-vm.sh: mltcp-bpf load: mltcp and mltcp_cubic registered as BPF struct_ops"
fi
echo "in-vm.sh: kernel $(uname -r), $(nproc) CPUs; congestion controls: $(cat /proc/sys/net/ipv4/tcp_available_congestion_control)"
# shellcheck disable=SC2086 # word splitting of the option and file lists is intended
trainemu run --out "$OUT" $opts $files
rc=$?
echo "in-vm.sh: trainemu run exited with $rc"
if [ "$datapath" = bpf ]; then
  mltcp-bpf status > "$OUT/mltcp-bpf-status.txt" 2>&1
  sed 's/^/in-vm.sh: mltcp-bpf status: /' "$OUT/mltcp-bpf-status.txt"
fi
trainemu report --no-plots "$OUT" || [ $rc -ne 0 ] || rc=1
exit $rc
