#!/usr/bin/env bash
# ci/build-module.sh: build kmod/ (tcp_mltcp.ko) against the testbed kernel from ci/build-kernel.sh.
# The sources are copied to a build directory in the cache so Kbuild's objects stay out of the
# repository. Prints the path of tcp_mltcp.ko on stdout. About 2 s once the kernel is built.
# Environment: MLTCP_KMOD_SRC (another kmod/ tree to build), MLTCP_KERNEL_DIR (see build-kernel.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

# MLTCP_KMOD_SRC: build the module from another copy of kmod/ (module development).
src=${MLTCP_KMOD_SRC:-$REPO_ROOT/kmod}
kdir=$("$here/build-kernel.sh")
# One build directory per kernel tree, so runs against different kernels never share objects.
build=$MLTCP_CACHE/kmod-build/$(echo "$kdir $src" | sha256sum | cut -c1-12)
mkdir -p "$build"
# One build at a time per directory: several ci/vm-run started together (parallel seeds) would
# otherwise mirror and compile into the same tree at once. The lock ends with this script.
exec 9>"$build.lock"
flock 9
# Mirror kmod/ (sources only) into the build directory; keep old objects for incremental builds.
(cd "$src" && find . \( -name target -o -name fuzz \) -prune -o -type f \
   \( -name '*.rs' -o -name Kbuild -o -name Makefile \) -print0 | cpio -0pdmu --quiet "$build")
make -s -C "$kdir" M="$build" RUSTC="$KRUSTC" BINDGEN="$BINDGEN" modules >&2 \
  || die "building tcp_mltcp.ko against $kdir failed"
echo "$build/tcp_mltcp.ko"
