#!/usr/bin/env bash
# ci/fuzz.sh: run the CCP datapath's fuzz target (kmod/ccp-datapath/fuzz, target `datapath`: the
# compiled program against the interpreter, and SET_CLASS's rules, on every input) with cargo-fuzz
# on rustup's nightly toolchain, both installed by `ci/deps.sh --fuzz` (cargo-fuzz into the cache).
#
#   ci/fuzz.sh CORPUS_DIR [LIBFUZZER_ARGS...]      e.g. ci/fuzz.sh /tmp/corpus -runs=10000000
#
# CORPUS_DIR (created if needed; keep it outside the repository) receives the inputs libFuzzer
# finds; the checked-in seeds (kmod/ccp-datapath/fuzz/seeds) are read too, never written. One
# process, no -jobs: on the 2-core reference machine about 6500 executions per second. With
# -jobs=2 -workers=2 each job runs its own -runs, about 4150 per second each, and libFuzzer writes
# their logs to kmod/ccp-datapath/fuzz/fuzz-N.log. A failure
# leaves its input under kmod/ccp-datapath/fuzz/artifacts/datapath/ and exits non-zero;
# `cargo +nightly fuzz tmin datapath FILE` (from kmod/ccp-datapath/fuzz, with the cache's
# tools/bin on PATH) minimises it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=ci/lib.sh
. "$here/lib.sh"
[ $# -ge 1 ] || { sed -n '2,15p' "$0"; exit 2; }
corpus=$1; shift
[ -x "$CARGO_FUZZ" ] || "$here/deps.sh" --fuzz >&2
mkdir -p "$corpus"
corpus=$(cd "$corpus" && pwd)
cd "$REPO_ROOT/kmod/ccp-datapath/fuzz"
PATH=$(dirname "$CARGO_FUZZ"):$PATH exec cargo +nightly fuzz run datapath "$corpus" seeds -- "$@"
