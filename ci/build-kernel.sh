#!/usr/bin/env bash
# ci/build-kernel.sh: build the VM testbed's Linux 6.12 (Rust enabled, our patch series applied),
# cached outside the repository. Prints the kernel build directory on stdout.
#
# Cache key: Debian's linux-source-6.12 package version, ci/kernel.config, every patch in
# patches/linux-6.12/, the kernel rustc and bindgen versions, and this script. A hit costs nothing;
# a miss extracts the source, applies the series, runs tinyconfig + the fragment, and builds
# bzImage and the in-tree modules (tcp_bbr.ko, tcp_dctcp.ko; ~5 min on 2 cores). Only the newest two builds are kept.
#
# Environment: MLTCP_CACHE (cache root, default ~/.cache/mltcp), MLTCP_KERNEL_DIR (use this
# already-built tree instead: for kernel development).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

if [ -n "${MLTCP_KERNEL_DIR:-}" ]; then
  [ -f "$MLTCP_KERNEL_DIR/arch/x86/boot/bzImage" ] || die "MLTCP_KERNEL_DIR=$MLTCP_KERNEL_DIR has no bzImage"
  echo "$MLTCP_KERNEL_DIR"; exit 0
fi

"$here/deps.sh" >&2
src_pkg_version=$(dpkg-query -W -f='${Version}' linux-source-6.12)
key=$( {
  kernel_source_identity
  cat "$here/kernel.config" "$0"
} | sha256sum | cut -c1-16)
out=$MLTCP_CACHE/kernel/$key
if [ -f "$out/.done" ]; then
  echo "$out/linux"; exit 0
fi

log "kernel cache miss ($key): building Linux $src_pkg_version with Rust (about 5 minutes on 2 cores)"
start=$(date +%s)
rm -rf "$out"; mkdir -p "$out"
extract_patched_kernel "$out"
cd "$out/linux"

kmake() { make -s RUSTC="$KRUSTC" BINDGEN="$BINDGEN" "$@"; }
kmake tinyconfig >/dev/null
./scripts/kconfig/merge_config.sh -m .config "$here/kernel.config" >/dev/null
kmake olddefconfig >/dev/null
# Refuse a silently dropped option (a missing dependency in the fragment).
missing=$(grep -E '^CONFIG_' "$here/kernel.config" | while IFS= read -r l; do grep -qxF "$l" .config || echo "$l"; done)
[ -z "$missing" ] || die "ci/kernel.config options not in the final .config (missing dependencies?): $missing"
kmake rustavailable >/dev/null || die "the kernel does not accept rustc $("$KRUSTC" --version) / bindgen"
kmake -j"$(nproc)" bzImage modules >&2
# What the tree was built from, so ci/package-kernel.sh --reuse-tree can check it is the same.
kernel_source_identity > "$out/source-identity"
touch "$out/.done"
log "kernel built in $(( $(date +%s) - start )) s: $out/linux"

# Keep the two newest builds.
ls -1dt "$MLTCP_CACHE"/kernel/*/ 2>/dev/null | tail -n +3 | xargs -r rm -rf
echo "$out/linux"
