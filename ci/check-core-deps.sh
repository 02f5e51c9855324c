#!/usr/bin/env bash
# ci/check-core-deps.sh: the agent core (ccp-agent/core, crate mlcc-agent-core) stays free of
# I/O. Lists its normal dependency tree (`cargo tree -e normal`: no build or dev dependencies)
# and fails, naming each one, if it holds an async runtime, the CCP runtime, an RPC or HTTP
# stack or a socket library: tokio, portus, tonic, hyper, mio, socket2. The core gets time,
# reports and answers as inputs and returns actions; the agent's shell does the I/O.
# Usage: ci/check-core-deps.sh (from anywhere in the repository; honours CARGO_TARGET_DIR).
set -euo pipefail

cd "$(dirname "$0")/.."
forbidden='^(tokio|portus|tonic|hyper|mio|socket2)( |$)'

tree=$(cargo tree --locked -p mlcc-agent-core -e normal --prefix none | sed 's/ (\*)$//' | sort -u)
found=$(printf '%s\n' "$tree" | grep -E "$forbidden" || true)
if [ -n "$found" ]; then
    echo "check-core-deps: mlcc-agent-core depends on crates that do I/O:" >&2
    printf '  %s\n' "$found" >&2
    echo "check-core-deps: (cargo tree -p mlcc-agent-core -e normal -i NAME shows the path)" >&2
    exit 1
fi
echo "check-core-deps: mlcc-agent-core's dependency tree holds none of tokio, portus, tonic, hyper, mio, socket2 ($(printf '%s\n' "$tree" | wc -l) crates)"
