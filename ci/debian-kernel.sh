#!/usr/bin/env bash
# ci/debian-kernel.sh: fetch Debian's stock kernel (the package linux-image-amd64 depends on, e.g.
# linux-image-6.1.0-56-amd64 on Debian 12) with `apt-get download`, unpack it, index its modules
# (depmod) and print the directory: boot/vmlinuz-*, boot/config-*, lib/modules/<release>/ with
# modules.dep. ci/vm-run --kernel-deb debian12 boots it.
#
# Cached under $MLTCP_CACHE/debian-kernel/<package>_<version>/, keyed by the package's version as
# apt resolves it now (run `apt-get update` to follow Debian's updates); a hit costs an apt-cache
# lookup. The newest two unpacked kernels are kept.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=ci/lib.sh
. "$here/lib.sh"

command -v depmod >/dev/null || die "depmod missing (package kmod; run ci/deps.sh)"
kernel_pkg() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }'; }
pkg=$(kernel_pkg)
if [ -z "$pkg" ]; then
  # A machine whose package lists were never fetched (ci/deps.sh fetches them only when it
  # installs something): fetch them once.
  log "apt knows no linux-image-amd64: apt-get update"
  apt-get update -qq || die "apt-get update failed"
  pkg=$(kernel_pkg)
fi
[ -n "$pkg" ] || die "apt knows no linux-image-amd64 with a linux-image-<version> dependency (apt-get update?)"
ver=$(apt-cache policy "$pkg" | awk '/Candidate:/ { print $2; exit }')
[ -n "$ver" ] && [ "$ver" != "(none)" ] || die "apt has no candidate version of $pkg"
out_dir=$MLTCP_CACHE/debian-kernel
out=$out_dir/${pkg}_$ver
if [ -f "$out/.complete" ]; then
  echo "$out"; exit 0
fi

log "fetching $pkg $ver (apt-get download)"
mkdir -p "$out_dir"
stage=$(mktemp -d "$out_dir/stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
(cd "$stage" && apt-get download -o APT::Sandbox::User=root "$pkg=$ver" >/dev/null) || die "apt-get download $pkg=$ver failed"
deb=$(ls "$stage"/*.deb)
dpkg-deb -x "$deb" "$stage/tree" || die "cannot unpack $deb"
rm -f "$deb"
release=$(ls "$stage/tree/lib/modules")
[ -n "$release" ] && [ -d "$stage/tree/lib/modules/$release/kernel" ] || die "$pkg has no lib/modules/<release>/kernel"
ls "$stage"/tree/boot/vmlinuz-* >/dev/null 2>&1 || die "$pkg has no boot/vmlinuz-*"
depmod -b "$stage/tree" "$release" || die "depmod of $pkg failed"
touch "$stage/tree/.complete"
rm -rf "$out"
mv "$stage/tree" "$out"
log "Debian kernel $release unpacked: $out"
# Keep the two newest.
ls -1dt "$out_dir"/*_* 2>/dev/null | tail -n +3 | xargs -r rm -rf
echo "$out"
