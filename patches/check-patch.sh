#!/usr/bin/env bash
# patches/check-patch.sh: check (and optionally apply) one of the library patches of patches/ on a
# pristine source tree of the release it targets, by content hash.
#
# Usage: patches/check-patch.sh PATCH_DIR SRC_DIR [--apply]
#   PATCH_DIR  patches/nccl or patches/libzmq: holds one *.patch, SHA256SUMS.base (the files the
#              patch changes, as released) and SHA256SUMS.patched (every file it changes or adds,
#              after the patch)
#   SRC_DIR    the library's source tree (NCCL: the repository root; libzmq: the tree with
#              CMakeLists.txt, e.g. the zeromq-src crate's vendor/ directory, copied)
#   --apply    apply the patch in SRC_DIR, then check SHA256SUMS.patched
# Without --apply SRC_DIR is not changed. Exits non-zero, saying why, when SRC_DIR is not the
# release the patch targets, the patch does not apply, or the result differs from the recorded one.
set -euo pipefail
die() { printf 'check-patch: error: %s\n' "$*" >&2; exit 1; }
[ $# -ge 2 ] && [ $# -le 3 ] || die "usage: $0 PATCH_DIR SRC_DIR [--apply]"
pdir=$(cd "$1" && pwd) || die "no directory $1"
src=$2
apply=0
if [ $# -eq 3 ]; then
  [ "$3" = --apply ] || die "unknown option $3"
  apply=1
fi
[ -d "$src" ] || die "no source directory $src"
shopt -s nullglob
patches=("$pdir"/*.patch)
[ ${#patches[@]} -eq 1 ] || die "expected exactly one *.patch in $pdir, found ${#patches[@]}"
patch_file=${patches[0]}
for f in SHA256SUMS.base SHA256SUMS.patched; do
  [ -f "$pdir/$f" ] || die "missing $pdir/$f"
done

cd "$src"
sha256sum --quiet -c "$pdir/SHA256SUMS.base" >/dev/null 2>&1 \
  || die "$src is not the release $(basename "$patch_file") targets (or is already patched): \
sha256sum -c $pdir/SHA256SUMS.base fails"
patch -p1 --dry-run --forward --quiet <"$patch_file" >/dev/null \
  || die "$(basename "$patch_file") does not apply to $src"
echo "check-patch: $(basename "$patch_file") applies to $src"
if [ $apply = 1 ]; then
  patch -p1 --forward --quiet <"$patch_file" || die "patch failed in $src"
  sha256sum --quiet -c "$pdir/SHA256SUMS.patched" \
    || die "patched files differ from $pdir/SHA256SUMS.patched"
  echo "check-patch: applied; patched files match SHA256SUMS.patched"
fi
