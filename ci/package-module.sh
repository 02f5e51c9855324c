#!/usr/bin/env bash
# ci/package-module.sh: build tcp_mltcp.ko against a kernel headers package, the way an operator
# does on a host with nothing but that package installed, and package it for that kernel; or
# package the module's source for DKMS, which rebuilds it for each kernel the host installs.
#
# Usage: ci/package-module.sh (--headers DIR | --headers-deb FILE) --deb OUTDIR
#        ci/package-module.sh --dkms --deb OUTDIR
#
#   --headers DIR       an installed headers tree, e.g. /usr/src/linux-headers-6.12.57-mltcp
#                       (what /lib/modules/$(uname -r)/build points to);
#   --headers-deb FILE  or the linux-headers .deb of ci/package-kernel.sh, unpacked here first;
#   --dkms              instead of a build: tcp-mltcp-dkms_<version>_all.deb, the module's source
#                       for DKMS (no headers needed here);
#   --deb OUTDIR        where the package goes (its path is printed).
#
# The build is `make -C kmod KDIR=<headers> RUSTC=/usr/bin/rustc` on a copy of kmod/ (the kernel's
# rustc: Debian's rustc-web, not rustup's, which would fail with E0514). The package holds
#   /lib/modules/<release>/updates/tcp_mltcp.ko   (depmod runs in postinst and postrm)
#   /etc/modules-load.d/tcp_mltcp.conf            load it at boot
#   /etc/modprobe.d/tcp_mltcp.conf                its parameters (the defaults, commented)
#   /etc/sysctl.d/60-mltcp.conf                   allowed algorithms; the default left to the operator
# and depends on linux-image-<release>. Rebuild it for each new kernel package.
#
# The DKMS package (tcp-mltcp-dkms) holds the same three files under /etc and the sources under
# /usr/src/tcp-mltcp-<version>/ with kmod/packaging/dkms.conf: dkms builds them with the same make
# command against /lib/modules/<kernel>/build, for every installed kernel whose release ends in
# -mltcp (ci/package-kernel.sh's), now (postinst) and for each such kernel installed later
# (AUTOINSTALL). It needs dkms, make and the kernel's rustc on the host, and conflicts with the
# prebuilt tcp-mltcp-modules-<release> packages (the same files).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }
headers="" headers_deb="" outdir="" dkms=0
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --headers) [ $# -ge 2 ] || die "--headers needs a directory"; headers=$2; shift 2 ;;
    --headers-deb) [ $# -ge 2 ] || die "--headers-deb needs a file"; headers_deb=$2; shift 2 ;;
    --deb) [ $# -ge 2 ] || die "--deb needs a directory"; outdir=$2; shift 2 ;;
    --dkms) dkms=1; shift ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done
if [ "$dkms" = 1 ]; then
  [ -n "$outdir" ] && [ -z "$headers$headers_deb" ] \
    || { usage >&2; die "--dkms needs --deb and takes no --headers / --headers-deb (DKMS builds on the host)"; }
else
  [ -n "$outdir" ] && { [ -n "$headers" ] || [ -n "$headers_deb" ]; } \
    || { usage >&2; die "--deb and one of --headers / --headers-deb (or --dkms) are required"; }
fi
mkdir -p "$outdir"; outdir=$(cd "$outdir" && pwd)
[ "$dkms" = 1 ] || [ -x "$KRUSTC" ] || "$here/deps.sh" >&2

work=$(mktemp -d "${TMPDIR:-/tmp}/mltcp-modpkg.XXXXXX")
trap 'rm -rf "$work"' EXIT
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO_ROOT/kmod/mltcp-math/Cargo.toml" | head -n 1)
[ -n "$version" ] || die "no version in kmod/mltcp-math/Cargo.toml"
maintainer="MLTCP project <mltcp@users.noreply.github.com>"
description="tcp_mltcp.ko scales the window increase of Reno, CUBIC and DCTCP by F(bytes_ratio), so that
 training jobs sharing a link slide into an interleaved schedule (MLTCP), and carries a CCP
 datapath through which ccp-agent sets per-flow rates."

# copy_kmod_sources DEST: the module's sources (kmod/ without objects, fuzzing or packaging).
copy_kmod_sources() {
  mkdir -p "$1"
  (cd "$REPO_ROOT/kmod" && find . \( -name target -o -name fuzz -o -name packaging \) -prune -o -type f \
     \( -name '*.rs' -o -name Kbuild -o -name Makefile \) -print0 | cpio -0pdm --quiet "$1")
}

# install_common ROOT PKG: the modules-load.d / modprobe.d / sysctl.d snippets (conffiles), the
# README and the module's reference (docs/module.md: parameters, per-socket state), under ROOT.
install_common() {
  local f
  for f in modules-load.d/tcp_mltcp.conf modprobe.d/tcp_mltcp.conf sysctl.d/60-mltcp.conf; do
    install -D -m 0644 "$REPO_ROOT/kmod/packaging/etc/$f" "$1/etc/$f"
  done
  install -D -m 0644 "$REPO_ROOT/README.md" "$1/usr/share/doc/$2/README.md"
  install -D -m 0644 "$REPO_ROOT/docs/module.md" "$1/usr/share/doc/$2/module.md"
  mkdir -p "$1/DEBIAN"
  printf '/etc/modules-load.d/tcp_mltcp.conf\n/etc/modprobe.d/tcp_mltcp.conf\n/etc/sysctl.d/60-mltcp.conf\n' \
    > "$1/DEBIAN/conffiles"
}

# build_deb ROOT DEB: md5sums, then the package; prints its path.
build_deb() {
  (cd "$1" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum > DEBIAN/md5sums)
  dpkg-deb --root-owner-group --build "$1" "$2" >/dev/null || die "dpkg-deb --build $2 failed"
  echo "$2"
}

if [ "$dkms" = 1 ]; then
  pkg=tcp-mltcp-dkms name=tcp-mltcp
  root=$work/pkg
  src=$root/usr/src/$name-$version
  copy_kmod_sources "$src"
  sed "s/@VERSION@/$version/" "$REPO_ROOT/kmod/packaging/dkms.conf" > "$src/dkms.conf"
  grep -q "^PACKAGE_VERSION=\"$version\"$" "$src/dkms.conf" \
    || die "kmod/packaging/dkms.conf: no PACKAGE_VERSION=\"@VERSION@\" line to fill in"
  install_common "$root" "$pkg"
  cat > "$root/DEBIAN/control" <<CTRL
Package: $pkg
Version: $version
Architecture: all
Maintainer: $maintainer
Depends: dkms (>= 3.0), make, rustc-web | rustc, kmod
Conflicts: tcp-mltcp-modules
Replaces: tcp-mltcp-modules
Section: kernel
Priority: optional
Description: MLTCP congestion controls (mltcp, mltcp_cubic, mltcp_dctcp), DKMS source
 $description
 DKMS builds it for every installed kernel whose release ends in -mltcp (the kernels of
 ci/package-kernel.sh, with CONFIG_RUST and the project's patch series) and has its headers
 package, with the kernel's own rustc (/usr/bin/rustc).
CTRL
  # What dh_dkms would write: add, build and install for the installed kernels on configure
  # (Debian's common.postinst: kernels it must skip, BUILD_EXCLUSIVE_KERNEL, are skipped), and
  # remove every build before removal or upgrade.
  cat > "$root/DEBIAN/postinst" <<SCRIPT
#!/bin/sh
# postinst of $pkg: add $name $version to DKMS, build and install it for the installed kernels.
set -e
if [ "\$1" = configure ]; then
  /usr/lib/dkms/common.postinst $name $version "" "" "\$2"
fi
exit 0
SCRIPT
  cat > "$root/DEBIAN/prerm" <<SCRIPT
#!/bin/sh
# prerm of $pkg: remove $name $version from DKMS (every kernel's build and installed module).
set -e
case "\$1" in
  remove|upgrade|deconfigure)
    if [ -n "\$(dkms status -m $name -v $version)" ]; then
      dkms remove -m $name -v $version --all
    fi ;;
esac
exit 0
SCRIPT
  chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm"
  build_deb "$root" "$outdir/${pkg}_${version}_all.deb"
  exit 0
fi

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
copy_kmod_sources "$build"
log "make -C kmod KDIR=$headers (kernel $release)"
make -s -C "$build" KDIR="$headers" RUSTC="$KRUSTC" >&2 \
  || die "building tcp_mltcp.ko against $headers failed"
[ -f "$build/tcp_mltcp.ko" ] || die "the build made no tcp_mltcp.ko"

pkg=tcp-mltcp-modules-$release
root=$work/pkg
install -D -m 0644 "$build/tcp_mltcp.ko" "$root/lib/modules/$release/updates/tcp_mltcp.ko"
install_common "$root" "$pkg"
cat > "$root/DEBIAN/control" <<CTRL
Package: $pkg
Version: $version
Architecture: amd64
Maintainer: $maintainer
Depends: linux-image-$release, kmod
Provides: tcp-mltcp-modules
Conflicts: tcp-mltcp-dkms
Replaces: tcp-mltcp-dkms
Section: kernel
Priority: optional
Description: MLTCP congestion controls (mltcp, mltcp_cubic, mltcp_dctcp) for Linux $release
 $description
 Built for linux-image-$release.
CTRL
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
build_deb "$root" "$outdir/${pkg}_${version}_amd64.deb"
