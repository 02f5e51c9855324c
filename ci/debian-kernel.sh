#!/usr/bin/env bash
# ci/debian-kernel.sh [debian12|debian12-backports]: fetch one of Debian's stock kernels (the
# package linux-image-amd64 depends on) with `apt-get download`, unpack it, index its modules
# (depmod) and print the directory: boot/vmlinuz-*, boot/config-*, lib/modules/<release>/ with
# modules.dep (the modules may be compressed, e.g. *.ko.xz on 6.12). ci/vm-run --kernel-deb KEYWORD
# boots it.
#
#   debian12 (the default)  Debian 12's kernel (6.1, e.g. linux-image-6.1.0-56-amd64), as the
#       machine's own apt configuration resolves linux-image-amd64 (a Debian 12 machine's
#       bookworm and bookworm-security). Cached under $MLTCP_CACHE/debian-kernel/.
#   debian12-backports      the 6.12 kernel of bookworm-backports (e.g.
#       linux-image-6.12.95+deb12-amd64), the one Debian 13 (trixie) ships too. The machine's apt
#       configuration is not used or changed: a project-owned one lives in
#       $MLTCP_CACHE/debian-kernel/bookworm-backports/apt/ (a sources.list naming only
#       bookworm-backports main, signed by /usr/share/keyrings/debian-archive-keyring.gpg, and its
#       own package lists and caches), passed to apt-get and apt-cache with -o options. Its lists
#       are fetched when missing and refreshed when older than a day (when the refresh fails, the
#       old lists are used, with a warning). Mirror: $MLTCP_DEBIAN_MIRROR (default
#       http://deb.debian.org/debian). Cached under $MLTCP_CACHE/debian-kernel/bookworm-backports/.
#
# Each kernel is keyed by the package's version as apt resolves it now (for debian12, run
# `apt-get update` to follow Debian's updates); a hit costs an apt-cache lookup. The newest two
# unpacked kernels of each keyword are kept.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=ci/lib.sh
. "$here/lib.sh"

keyword=${1:-debian12}
[ $# -le 1 ] || die "usage: ci/debian-kernel.sh [debian12|debian12-backports]"
# suite: the Debian suite fetched with the project's own apt configuration (empty: the machine's);
# series: the kernel version the keyword stands for (a different one is warned about).
case "$keyword" in
  debian12) suite="" series=6.1 out_dir=$MLTCP_CACHE/debian-kernel ;;
  debian12-backports) suite=bookworm-backports series=6.12 out_dir=$MLTCP_CACHE/debian-kernel/$suite ;;
  *) die "unknown kernel keyword '$keyword' (known: debian12, debian12-backports)" ;;
esac

command -v depmod >/dev/null || die "depmod missing (package kmod; run ci/deps.sh)"
apt_opts=()
if [ -n "$suite" ]; then
  keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  [ -f "$keyring" ] || die "$keyring missing (package debian-archive-keyring): cannot check $suite's signature"
  mirror=${MLTCP_DEBIAN_MIRROR:-http://deb.debian.org/debian}
  apt_dir=$out_dir/apt
  mkdir -p "$apt_dir"/{lists/partial,cache/archives/partial,sources.list.d,preferences.d}
  # Rewritten each time, so a changed mirror or keyring takes effect (apt then refetches).
  sources="deb [signed-by=$keyring] $mirror $suite main"
  if [ "$(cat "$apt_dir/sources.list" 2>/dev/null)" != "$sources" ]; then
    echo "$sources" > "$apt_dir/sources.list"
    rm -f "$apt_dir/updated"
  fi
  # Only this file's sources, no pins of the machine's, this directory's lists and caches; root
  # downloads (the _apt sandbox user cannot write under $MLTCP_CACHE); no translations.
  apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list"
    -o "Dir::Etc::SourceParts=$apt_dir/sources.list.d"
    -o "Dir::Etc::Preferences=$apt_dir/preferences"
    -o "Dir::Etc::PreferencesParts=$apt_dir/preferences.d"
    -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
    -o APT::Sandbox::User=root -o Acquire::Languages=none)
  if [ -z "$(find "$apt_dir/updated" -mmin -1440 2>/dev/null)" ]; then
    log "apt-get update of $suite ($mirror) into $apt_dir"
    if apt-get "${apt_opts[@]}" update -qq --error-on=any >&2; then
      touch "$apt_dir/updated"
    elif [ -f "$apt_dir/updated" ]; then
      log "warning: apt-get update of $suite failed: using its package lists of $(date -u -r "$apt_dir/updated" '+%Y-%m-%d %H:%M UTC')"
    else
      die "apt-get update of $suite from $mirror failed (network? a mirror in MLTCP_DEBIAN_MIRROR?)"
    fi
  fi
fi
kernel_pkg() {
  apt-cache "${apt_opts[@]}" depends linux-image-amd64 2>/dev/null \
    | awk '/Depends: linux-image-[0-9]/ { print $2; exit }'
}
pkg=$(kernel_pkg)
if [ -z "$pkg" ] && [ -z "$suite" ]; then
  # A machine whose package lists were never fetched (ci/deps.sh fetches them only when it
  # installs something): fetch them once.
  log "apt knows no linux-image-amd64: apt-get update"
  apt-get update -qq || die "apt-get update failed"
  pkg=$(kernel_pkg)
fi
where="the machine's apt sources"
[ -z "$suite" ] || where=$suite
[ -n "$pkg" ] || die "apt knows no linux-image-amd64 with a linux-image-<version> dependency in $where (apt-get update?)"
ver=$(apt-cache "${apt_opts[@]}" policy "$pkg" | awk '/Candidate:/ { print $2; exit }')
[ -n "$ver" ] && [ "$ver" != "(none)" ] || die "apt has no candidate version of $pkg in $where"
case "$ver" in
  "$series".*) ;;
  *) log "warning: $keyword stands for Linux $series but $where now has $pkg $ver" ;;
esac
out=$out_dir/${pkg}_$ver
if [ -f "$out/.complete" ]; then
  echo "$out"; exit 0
fi

log "fetching $pkg $ver from $where (apt-get download)"
mkdir -p "$out_dir"
stage=$(mktemp -d "$out_dir/stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
(cd "$stage" && apt-get "${apt_opts[@]}" download -o APT::Sandbox::User=root "$pkg=$ver" >/dev/null) \
  || die "apt-get download $pkg=$ver from $where failed"
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
# Keep this keyword's two newest.
ls -1dt "$out_dir"/linux-image-*_* 2>/dev/null | tail -n +3 | xargs -r rm -rf
echo "$out"
