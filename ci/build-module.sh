#!/usr/bin/env bash
# ci/build-module.sh: build kmod/ (tcp_mltcp.ko) against the testbed kernel from ci/build-kernel.sh.
# The sources are copied to a build directory in the cache so Kbuild's objects stay out of the
# repository. Prints the path of tcp_mltcp.ko on stdout. About 2 s once the kernel is built.
# Environment: MLTCP_KMOD_SRC (another kmod/ tree to build), MLTCP_KERNEL_DIR (see build-kernel.sh).
#
# --clippy: lint instead (ci/test-all's lint step): build with the kernel's `make CLIPPY=1`, whose
# clippy-driver must be the kernel rustc's own (Debian's rust-web-clippy, /usr/bin/clippy-driver),
# into a build directory of its own from scratch (so every file is linted, not only changed ones),
# and fail if the build prints any warning (the kernel's clippy lints include
# undocumented_unsafe_blocks; objtool's warnings count too). Prints nothing on stdout.
set -euo pipefail
clippy=0
case "${1:-}" in
  --clippy) clippy=1 ;;
  "") ;;
  *) echo "usage: ci/build-module.sh [--clippy]" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

# MLTCP_KMOD_SRC: build the module from another copy of kmod/ (module development).
src=${MLTCP_KMOD_SRC:-$REPO_ROOT/kmod}
kdir=$("$here/build-kernel.sh")
# One build directory per kernel tree, so runs against different kernels never share objects.
build=$MLTCP_CACHE/kmod-build/$(echo "$kdir $src" | sha256sum | cut -c1-12)
[ "$clippy" = 0 ] || { build=$build-clippy; rm -rf "$build"; }
mkdir -p "$build"
# One build at a time per directory: several ci/vm-run started together (parallel seeds) would
# otherwise mirror and compile into the same tree at once. The lock ends with this script.
exec 9>"$build.lock"
flock 9
# Mirror kmod/ (sources only) into the build directory; keep old objects for incremental builds.
(cd "$src" && find . \( -name target -o -name fuzz \) -prune -o -type f \
   \( -name '*.rs' -o -name Kbuild -o -name Makefile \) -print0 | cpio -0pdmu --quiet "$build")
if [ "$clippy" = 1 ]; then
  clippy_driver=$(dirname "$KRUSTC")/clippy-driver
  [ -x "$clippy_driver" ] || die "$clippy_driver missing (Debian package rust-web-clippy; ci/deps.sh installs it)"
  log "clippy on tcp_mltcp (make CLIPPY=1, $("$clippy_driver" --version))"
  out=$(make -s -C "$kdir" M="$build" RUSTC="$KRUSTC" BINDGEN="$BINDGEN" CLIPPY=1 \
    CLIPPY_DRIVER="$clippy_driver" modules 2>&1) || { printf '%s\n' "$out" >&2; die "CLIPPY=1 build of tcp_mltcp.ko failed"; }
  printf '%s\n' "$out" >&2
  n=$(printf '%s\n' "$out" | grep -c 'warning' || true)
  [ "$n" = 0 ] || die "the CLIPPY=1 build of tcp_mltcp.ko printed $n warning line(s) (above)"
  log "tcp_mltcp: no clippy warning"
  exit 0
fi
make -s -C "$kdir" M="$build" RUSTC="$KRUSTC" BINDGEN="$BINDGEN" modules >&2 \
  || die "building tcp_mltcp.ko against $kdir failed"
echo "$build/tcp_mltcp.ko"
