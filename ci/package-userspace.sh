#!/usr/bin/env bash
# ci/package-userspace.sh: build the user-space Debian packages with cargo-deb (installed by
# ci/deps.sh): ccp-agent (binary, systemd units ccp-agent.service and ccp-switch@.service, the
# datapath program, example configuration), mltcp-stat (mltcp-stat, mltcp-burst), ecn-qdisc,
# mltcp-preload (/usr/lib/mltcp/libmltcp_preload.so) and mltcp-bpf (the BPF struct_ops loader,
# mltcp-bpf.service, /etc/default/mltcp-bpf). Packaging metadata: [package.metadata.deb] in each
# crate's Cargo.toml.
#
# Usage: ci/package-userspace.sh OUTDIR     (prints the .deb paths, one per line)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
[ $# = 1 ] || die "usage: ci/package-userspace.sh OUTDIR"
out=$1
mkdir -p "$out"
out=$(cd "$out" && pwd)
"$here/deps.sh" >&2
cd "$REPO_ROOT"
for pkg in ccp-agent mltcp-stat ecn-qdisc mltcp-preload mltcp-bpf; do
  log "cargo deb -p $pkg"
  deb=$("$CARGO_DEB" deb --locked -p "$pkg" --output "$out" 2>"$out/$pkg.log" | tail -n 1) \
    || { cat "$out/$pkg.log" >&2; die "cargo deb -p $pkg failed (log above)"; }
  [ -f "$deb" ] || die "cargo deb -p $pkg printed no package path (got '$deb')"
  echo "$deb"
done
