#!/usr/bin/env bash
# ci/ack-instructions.sh: instructions per ACK of the CCP datapath's program path and of the
# native window update on the host, counted exactly by valgrind's callgrind (issue 38's host
# figure; the guest has no PMU). Builds the examples `ack_instructions` of kmod/ccp-datapath (one
# flow's `Datapath::flow_invoke`: lookup, primitives, the program's run, enforcement, the report
# every 1000 ACKs for Reno) and `native_ack_instructions` of kmod/mltcp-math (native Reno's and
# MLTCP's per-ACK window update) with the code-generation flags the kernel gives Rust on x86 that
# change code shape (-Cjump-tables=n, -Copt-level=2), runs each under callgrind at two ACK counts,
# and prints (instructions(N2) - instructions(N1)) / (N2 - N1), so that set-up cancels. User-space
# code of the same sources, not the module: the kernel's glue around it (locks, socket reads) is
# not counted, and the module's build can differ (rustc version, no cross-crate inlining of core).
# On demand; no test runs it.
#
#   ci/ack-instructions.sh [PROGRAMS]     PROGRAMS default "reno mlcc-slot"
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=ci/lib.sh
. "$here/lib.sh"
programs=${1:-reno mlcc-slot}
command -v valgrind >/dev/null || "$here/deps.sh" >&2
target="$MLTCP_CACHE/ack-instructions-target"
( cd "$REPO_ROOT" &&
  CARGO_TARGET_DIR=$target RUSTFLAGS="-Cjump-tables=n -Copt-level=2" \
    cargo build --release --locked -q -p ccp-datapath -p mltcp-math \
      --example ack_instructions --example native_ack_instructions )
ccp=$target/release/examples/ack_instructions
native=$target/release/examples/native_ack_instructions
n1=1000 n2=11000
count() { # BINARY ARGS... ACKS -> instructions the whole process ran
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 |
    awk '/Collected :/ { print $NF }'
}
per_ack() { # BINARY ARGS... -> instructions per ACK
  local a b
  a=$(count "$@" $n1); b=$(count "$@" $n2)
  [ -n "$a" ] && [ -n "$b" ] || die "ack-instructions: callgrind gave no count for $*"
  echo $(( (b - a) / (n2 - n1) ))
}
reno=$(per_ack "$native" reno)
printf '%-22s %-12s %8s %s\n' path form instr/ACK "x native Reno"
printf '%-22s %-12s %8s %s\n' "native Reno" - "$reno" 1.0
m=$(per_ack "$native" mltcp)
printf '%-22s %-12s %8s %s\n' "native MLTCP (Reno)" - "$m" "$(awk -v a="$m" -v b="$reno" 'BEGIN { printf "%.1f", a / b }')"
for p in $programs; do
  for f in compiled interpreted; do
    c=$(per_ack "$ccp" "$p" "$f")
    printf '%-22s %-12s %8s %s\n' "CCP $p" "$f" "$c" "$(awk -v a="$c" -v b="$reno" 'BEGIN { printf "%.1f", a / b }')"
  done
done
