#!/usr/bin/env bash
# ci/package-kernel.sh: a Linux 6.12 kernel that can load tcp_mltcp.ko, as Debian packages built
# from the operator's own kernel config.
#
# Usage: ci/package-kernel.sh --config FILE --deb OUTDIR [--jobs N] [--no-debug-info] [--config-only]
#                              [--reuse-tree DIR]
#
#   --config FILE   the kernel config to start from, e.g. /boot/config-$(uname -r) (a distribution
#                   config) or the testbed's (ci/build-kernel.sh's tree/.config).
#   --deb OUTDIR    where the packages go: linux-image-<release>, linux-headers-<release> and
#                   linux-libc-dev (and linux-image-<release>-dbg when the config keeps debug info).
#   --jobs N        parallel make jobs (default: nproc).
#   --no-debug-info drop the config's debug info (a distribution config's DWARF makes the build
#                   several times longer and adds a large -dbg package).
#   --config-only   stop after the configuration: write the merged config to OUTDIR/config-<release>
#                   and list what the merge changed against FILE (minutes, not hours: check a
#                   distribution config before committing to its build).
#   --reuse-tree DIR start from DIR, a kernel tree built by ci/build-kernel.sh from the same patched
#                   source (refused otherwise), instead of a fresh extraction: Kbuild then rebuilds
#                   only what the merged config and the -mltcp release change (for the testbed's
#                   own config, a few files and the modules: about a minute, not a whole kernel).
#                   The packages are the same as from a fresh tree, so the cache key ignores it.
#
# What it does: extracts Debian's linux-source-6.12, applies patches/linux-6.12/*.patch (the
# kernel abstractions the module uses), merges kmod/packaging/kernel-mltcp.config over FILE
# (CONFIG_RUST=y and what the module needs; it turns MODVERSIONS off, which Rust requires in 6.12),
# clears the distribution's certificate paths (SYSTEM_TRUSTED_KEYS, SYSTEM_REVOCATION_KEYS: Debian's
# name files that only exist in its own build), refuses a config where an option of the fragment
# did not survive (naming it), and runs `make bindeb-pkg` with LOCALVERSION=-mltcp, so the release
# reads e.g. 6.12.57-mltcp.
#
# Linux 6.12's headers package carries no Rust artefacts (scripts/package/install-extmod-build
# copies only C headers, scripts and Module.symvers), so an out-of-tree Rust module cannot be built
# against it. This script adds what the module build reads (scripts/Makefile.build: `--extern
# kernel -L $(objtree)/rust/`): rust/*.rmeta (core, compiler_builtins, kernel, bindings, uapi,
# ffi, build_error) and rust/libmacros.so (the kernel's proc macros), and repacks the headers
# package. Building a module against it then needs the same rustc as the kernel (Debian's
# rustc-web, /usr/bin/rustc: ci/deps.sh installs it), and no bindgen.
#
# Cached under $MLTCP_CACHE/kernel-deb/<key> (key: source package version, the config, the
# fragment, the patch series, rustc, bindgen, the options and this script): a second run copies the
# packages. Time on 2 cores: the testbed's small config about 6 minutes; a distribution config much
# longer (docs/results/packaging.md).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }
config="" outdir="" jobs=$(nproc) debug_info=1 config_only=0 reuse_tree=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --config) [ $# -ge 2 ] || die "--config needs a file"; config=$2; shift 2 ;;
    --deb) [ $# -ge 2 ] || die "--deb needs a directory"; outdir=$2; shift 2 ;;
    --jobs) [ $# -ge 2 ] || die "--jobs needs a number"; jobs=$2; shift 2 ;;
    --no-debug-info) debug_info=0; shift ;;
    --config-only) config_only=1; shift ;;
    --reuse-tree) [ $# -ge 2 ] || die "--reuse-tree needs a directory"; reuse_tree=$2; shift 2 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done
[ -n "$config" ] && [ -n "$outdir" ] || { usage >&2; die "--config and --deb are required"; }
[ -f "$config" ] || die "--config $config: no such file"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || die "--jobs must be a positive integer, not '$jobs'"
config=$(cd "$(dirname "$config")" && pwd)/$(basename "$config")
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
fragment=$REPO_ROOT/kmod/packaging/kernel-mltcp.config
localversion=-mltcp

"$here/deps.sh" >&2
key=$( {
  echo "debug_info=$debug_info localversion=$localversion"
  kernel_source_identity
  cat "$config" "$fragment" "$0"
} | sha256sum | cut -c1-16)
work=$MLTCP_CACHE/kernel-deb/$key

copy_out() {
  local n=0
  for d in "$work"/debs/*.deb; do cp "$d" "$outdir/"; echo "$outdir/$(basename "$d")"; n=$((n + 1)); done
  [ "$n" -gt 0 ] || die "no packages in $work/debs"
}
if [ "$config_only" = 1 ]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/mltcp-kconfig.XXXXXX")
  trap 'rm -rf "$work"' EXIT
elif [ -f "$work/.done" ]; then
  log "kernel packages cached ($key)"
  copy_out; exit 0
fi

log "kernel packages from $config (cache key $key)"
start=$(date +%s)
[ "$config_only" = 1 ] || rm -rf "$work"
mkdir -p "$work/debs"
if [ -n "$reuse_tree" ]; then
  # ci/build-kernel.sh writes the source identity beside each tree it builds; only a tree of the
  # same patched source may stand in for a fresh extraction.
  [ -f "$reuse_tree/../source-identity" ] && [ -f "$reuse_tree/.config" ] \
    || die "--reuse-tree $reuse_tree: not a tree built by ci/build-kernel.sh (no ../source-identity or .config)"
  cmp -s "$reuse_tree/../source-identity" <(kernel_source_identity) \
    || die "--reuse-tree $reuse_tree: built from another source, patch series or toolchain than this one"
  log "starting from the built tree $reuse_tree"
  # -a keeps the timestamps, so make sees the objects as up to date.
  cp -a "$reuse_tree" "$work/linux"
else
  extract_patched_kernel "$work"
fi
cd "$work/linux"

kmake() { make -s RUSTC="$KRUSTC" BINDGEN="$BINDGEN" LOCALVERSION="$localversion" "$@"; }
cp "$config" .config
# A distribution's certificate files are not in the source tree (Debian: debian/certs/...).
./scripts/config --set-str SYSTEM_TRUSTED_KEYS "" --set-str SYSTEM_REVOCATION_KEYS ""
if [ "$debug_info" = 0 ]; then
  ./scripts/config --disable DEBUG_INFO --disable DEBUG_INFO_DWARF_TOOLCHAIN_DEFAULT \
    --disable DEBUG_INFO_DWARF4 --disable DEBUG_INFO_DWARF5 --enable DEBUG_INFO_NONE
fi
./scripts/kconfig/merge_config.sh -m .config "$fragment" >/dev/null
kmake olddefconfig >/dev/null
missing=$(grep -E '^CONFIG_|^# CONFIG_.* is not set' "$fragment" | while IFS= read -r l; do
  case "$l" in
    "# "*) opt=${l#\# }; opt=${opt%% *}; ! grep -qE "^$opt=" .config || echo "$opt (must be off)" ;;
    *) grep -qxF "$l" .config || echo "$l" ;;
  esac
done)
if [ -n "$missing" ]; then
  die "options of kmod/packaging/kernel-mltcp.config lost by olddefconfig (a dependency of yours
turns them off; for CONFIG_RUST see init/Kconfig 'config RUST': e.g. RANDSTRUCT, GCC_PLUGINS,
DEBUG_INFO_BTF with an old pahole, CFI_CLANG): $missing"
fi
kmake rustavailable >/dev/null || die "the kernel does not accept rustc $("$KRUSTC" --version) / bindgen"
release=$(kmake -s kernelrelease)
if [ "$config_only" = 1 ]; then
  cp .config "$outdir/config-$release"
  log "merged config for $release: $outdir/config-$release; changed against $(basename "$config"):"
  ./scripts/diffconfig "$config" .config >&2 || true
  exit 0
fi
log "building $release with $jobs jobs"
kmake -j"$jobs" bindeb-pkg >&2 || die "make bindeb-pkg failed"
mv "$work"/*.deb "$work/debs/"
rm -f "$work"/*.buildinfo "$work"/*.changes

# Add the Rust artefacts to the headers package.
headers=$(ls "$work"/debs/linux-headers-"$release"_*.deb 2>/dev/null | head -n 1)
[ -n "$headers" ] || die "bindeb-pkg made no linux-headers-$release package"
rep=$work/headers-repack
rm -rf "$rep"; dpkg-deb -R "$headers" "$rep"
dst=$rep/usr/src/linux-headers-$release
[ -d "$dst" ] || die "$headers has no usr/src/linux-headers-$release"
mkdir -p "$dst/rust"
n=0
for f in rust/*.rmeta rust/libmacros.so; do
  [ -f "$f" ] || continue
  install -m 0644 "$f" "$dst/rust/"; n=$((n + 1))
done
[ -f "$dst/rust/libkernel.rmeta" ] && [ -f "$dst/rust/libmacros.so" ] \
  || die "rust/libkernel.rmeta or rust/libmacros.so missing from the build ($n files copied)"
(cd "$rep" && find usr -type f -print0 | sort -z | xargs -0 md5sum > DEBIAN/md5sums)
dpkg-deb --root-owner-group -Zxz --build "$rep" "$headers" >/dev/null
rm -rf "$rep"
log "added $n Rust artefacts to $(basename "$headers")"

touch "$work/.done"
log "kernel packages built in $(( $(date +%s) - start )) s"
# Keep the two newest package builds.
ls -1dt "$MLTCP_CACHE"/kernel-deb/*/ 2>/dev/null | tail -n +3 | xargs -r rm -rf
copy_out
