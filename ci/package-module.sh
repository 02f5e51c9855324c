#!/usr/bin/env bash
# ci/package-module.sh: build tcp_mltcp.ko against a kernel headers package, the way an operator
# does on a host with nothing but that package installed, and package it for that kernel.
#
# Usage: ci/package-module.sh (--headers DIR | --headers-deb FILE) --deb OUTDIR
#
#   --headers DIR       an installed headers tree, e.g. /usr/src/linux-headers-6.12.57-mltcp
#                       (what /lib/modules/$(uname -r)/build points to);
#   --headers-deb FILE  or the linux-headers .deb of ci/package-kernel.sh, unpacked here first;
#   --deb OUTDIR        where tcp-mltcp-modules-<release>_<version>_amd64.deb goes (its path is
#                       printed).
#
# The build is `make -C kmod KDIR=<headers> RUSTC=/usr/bin/rustc` on a copy of kmod/ (the kernel's
# rustc: Debian's rustc-web, not rustup's, which would fail with E0514). The package holds
#   /lib/modules/<release>/updates/tcp_mltcp.ko   (depmod runs in postinst and postrm)
#   /etc/modules-load.d/tcp_mltcp.conf            load it at boot
#   /etc/modprobe.d/tcp_mltcp.conf                its parameters (the defaults, commented)
#   /etc/sysctl.d/60-mltcp.conf                   allowed algorithms; the default left to the operator
# and depends on linux-image-<release>. Rebuild it for each new kernel package.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }
headers="" headers_deb="" outdir=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --headers) [ $# -ge 2 ] || die "--headers needs a directory"; headers=$2; shift 2 ;;
    --headers-deb) [ $# -ge 2 ] || die "--headers-deb needs a file"; headers_deb=$2; shift 2 ;;
    --deb) [ $# -ge 2 ] || die "--deb needs a directory"; outdir=$2; shift 2 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done
[ -n "$outdir" ] && { [ -n "$headers" ] || [ -n "$headers_deb" ]; } \
  || { usage >&2; die "--deb and one of --headers / --headers-deb are required"; }
mkdir -p "$outdir"; outdir=$(cd "$outdir" && pwd)
[ -x "$KRUSTC" ] || "$here/deps.sh" >&2

work=$(mktemp -d "${TMPDIR:-/tmp}/mltcp-modpkg.XXXXXX")
trap 'rm -rf "$work"' EXIT
if [ -n "$headers_deb" ]; then
  [ -f "$headers_deb" ] || die "--headers-deb $headers_deb: no such file"
  dpkg-deb -x "$headers_deb" "$work/headers-root"
  headers=$(ls -d "$work"/headers-root/usr/src/linux-headers-* 2>/dev/null | head -n 1)
  [ -n "$headers" ] || die "$headers_deb holds no usr/src/linux-headers-*"
fi
[ -f "$headers/include/config/kernel.release" ] \
  || die "$headers is not a prepared kernel headers tree (no include/config/kernel.release)"
release=$(cat "$headers/include/config/kernel.release")
grep -q '^CONFIG_RUST=y' "$headers/include/config/auto.conf" \
  || die "$headers: kernel $release was built without CONFIG_RUST (use ci/package-kernel.sh)"
[ -f "$headers/rust/libkernel.rmeta" ] \
  || die "$headers: no rust/libkernel.rmeta: a headers package without the kernel's Rust artefacts (ci/package-kernel.sh adds them)"

# The user's build, on a copy of kmod/ (sources only), so no objects land in the repository.
build=$work/kmod
mkdir -p "$build"
(cd "$REPO_ROOT/kmod" && find . \( -name target -o -name fuzz -o -name packaging \) -prune -o -type f \
   \( -name '*.rs' -o -name Kbuild -o -name Makefile \) -print0 | cpio -0pdm --quiet "$build")
log "make -C kmod KDIR=$headers (kernel $release)"
make -s -C "$build" KDIR="$headers" RUSTC="$KRUSTC" >&2 \
  || die "building tcp_mltcp.ko against $headers failed"
[ -f "$build/tcp_mltcp.ko" ] || die "the build made no tcp_mltcp.ko"

version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO_ROOT/kmod/mltcp-math/Cargo.toml" | head -n 1)
pkg=tcp-mltcp-modules-$release
root=$work/pkg
install -D -m 0644 "$build/tcp_mltcp.ko" "$root/lib/modules/$release/updates/tcp_mltcp.ko"
for f in modules-load.d/tcp_mltcp.conf modprobe.d/tcp_mltcp.conf sysctl.d/60-mltcp.conf; do
  install -D -m 0644 "$REPO_ROOT/kmod/packaging/etc/$f" "$root/etc/$f"
done
install -D -m 0644 "$REPO_ROOT/README.md" "$root/usr/share/doc/$pkg/README.md"
mkdir -p "$root/DEBIAN"
cat > "$root/DEBIAN/control" <<CTRL
Package: $pkg
Version: $version
Architecture: amd64
Maintainer: MLTCP project <mltcp@users.noreply.github.com>
Depends: linux-image-$release, kmod
Provides: tcp-mltcp-modules
Section: kernel
Priority: optional
Description: MLTCP congestion controls (mltcp, mltcp_cubic, mltcp_dctcp) for Linux $release
 tcp_mltcp.ko scales the window increase of Reno, CUBIC and DCTCP by F(bytes_ratio), so that
 training jobs sharing a link slide into an interleaved schedule (MLTCP), and carries a CCP
 datapath through which ccp-agent sets per-flow rates. Built for linux-image-$release.
CTRL
printf '/etc/modules-load.d/tcp_mltcp.conf\n/etc/modprobe.d/tcp_mltcp.conf\n/etc/sysctl.d/60-mltcp.conf\n' \
  > "$root/DEBIAN/conffiles"
for s in postinst postrm; do
  cat > "$root/DEBIAN/$s" <<SCRIPT
#!/bin/sh
# $s of $pkg: refresh the module dependencies of kernel $release.
set -e
if [ -e /lib/modules/$release/modules.dep ] || [ "\$1" = configure ]; then
  depmod -a $release || true
fi
exit 0
SCRIPT
  chmod 0755 "$root/DEBIAN/$s"
done
(cd "$root" && find lib etc usr -type f -print0 | sort -z | xargs -0 md5sum > DEBIAN/md5sums)
deb=$outdir/${pkg}_${version}_amd64.deb
dpkg-deb --root-owner-group --build "$root" "$deb" >/dev/null
echo "$deb"
