#!/usr/bin/env bash
# ci/ack-instructions.sh: instructions per ACK of the CCP datapath's program path on the host,
# counted exactly by valgrind's callgrind (issue 38 item 4's host figure; the guest has no PMU).
# Builds kmod/ccp-datapath's example `ack_instructions` with the kernel's code-generation flags
# that change its shape (-Cjump-tables=n and -Copt-level=2, as the kernel's Makefiles give Rust
# code on x86), runs it under callgrind at two ACK counts for each program and form, and prints
# (instructions(N2) - instructions(N1)) / (N2 - N1): set-up cancels, the flow's per-ACK path
# (`Datapath::flow_invoke`: lookup, primitives, the run, enforcement, the report every 1000 ACKs
# for Reno) stays. On demand; no test runs it.
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
    cargo build --release --locked -q -p ccp-datapath --example ack_instructions )
bin=$target/release/examples/ack_instructions
n1=1000 n2=11000
count() { # PROGRAM MODE ACKS -> instructions the whole process ran
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$1" "$2" "$3" 2>&1 |
    awk '/Collected :/ { print $NF }'
}
printf '%-10s %-12s %s\n' program form instructions_per_ack
for p in $programs; do
  for m in compiled interpreted; do
    a=$(count "$p" "$m" $n1); b=$(count "$p" "$m" $n2)
    [ -n "$a" ] && [ -n "$b" ] || die "ack-instructions: callgrind gave no count for $p $m"
    printf '%-10s %-12s %s\n' "$p" "$m" "$(( (b - a) / (n2 - n1) ))"
  done
done
