#!/usr/bin/env bash
# ci/lint.sh: the lints the code relies on, as checks that fail (ci/test-all runs it first):
#   1. rustfmt: `cargo fmt --check` over the workspace, and the kernel glue (kmod/*.rs, which
#      Kbuild builds, not cargo) with the kernel's rustfmt settings (edition 2021, defaults);
#   2. clippy: `cargo clippy --workspace --all-targets -- -D warnings` (the workspace denies
#      clippy::undocumented_unsafe_blocks; the kernel crates add their no-panic lints);
#   3. the module: tcp_mltcp.ko built with the kernel's `make CLIPPY=1` (ci/build-module.sh
#      --clippy), failing on any warning;
#   4. the agent core's purity: no I/O crate in its dependency tree (ci/check-core-deps.sh), when
#      that check exists;
#   5. ci/vm-lib.sh's pure helpers (counters, guest instructions, per-ACK reports, t intervals) on
#      fixed inputs (ci/vm-lib-test.sh), with the host's awk and busybox's.
# Prints one line per check and a closing "N passed, M failed"; exits non-zero if any failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
cd "$REPO_ROOT"

passed=0 failed=0
check() {
  local name=$1; shift
  log "lint: $name"
  if "$@"; then
    passed=$((passed + 1)); echo "lint ok: $name"
  else
    failed=$((failed + 1)); echo "lint FAILED: $name"
  fi
}

check "cargo fmt --check" cargo fmt --all -- --check
# The kernel glue: rustfmt follows its #[path] modules into the no_std crates, already checked
# above with the same settings.
check "rustfmt --check kmod/*.rs" rustfmt --check --edition 2021 "$REPO_ROOT"/kmod/*.rs
check "cargo clippy -D warnings" cargo clippy --workspace --all-targets --locked --quiet -- -D warnings
check "tcp_mltcp.ko under make CLIPPY=1" "$here/build-module.sh" --clippy
if [ -x "$here/check-core-deps.sh" ]; then
  check "agent core free of I/O crates" "$here/check-core-deps.sh"
fi
check "ci/vm-lib.sh helpers (ci/vm-lib-test.sh)" sh -c '"$1" > /dev/null' sh "$here/vm-lib-test.sh"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
