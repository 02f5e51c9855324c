#!/usr/bin/env bash
# ci/check-core-deps.sh: the agent core (ccp-agent/core, crate mlcc-agent-core) stays free of
# I/O. Lists its normal dependency tree (`cargo tree -e normal`: no build or dev dependencies)
# and fails, naming each one, if it holds an async runtime, the CCP runtime, an RPC or HTTP
# stack or a socket library: tokio, portus, tonic, hyper, mio, socket2. The core gets time,
# reports and answers as inputs and returns actions; the agent's shell does the I/O. Also fails,
# naming file and line, where the core's sources (src/, tests included; not build.rs, which
# reads the schema) use std's files, sockets, clocks, threads, processes or environment.
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
io_apis='std::(fs|env|thread|process|io)\b|std::net::(Tcp|Udp)|std::os::unix::net|SystemTime|Instant'
uses=$(grep -rnE "$io_apis" ccp-agent/core/src || true)
if [ -n "$uses" ]; then
    echo "check-core-deps: mlcc-agent-core's sources use std I/O, clocks or threads:" >&2
    printf '%s\n' "$uses" | sed 's/^/  /' >&2
    exit 1
fi
echo "check-core-deps: mlcc-agent-core's dependency tree holds none of tokio, portus, tonic, hyper, mio, socket2 ($(printf '%s\n' "$tree" | wc -l) crates), and its sources no std file, socket, clock, thread or process"
