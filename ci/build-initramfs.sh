#!/usr/bin/env bash
# ci/build-initramfs.sh: build the VM testbed's initramfs (gzip'd newc cpio) and print its path.
#
# Content: busybox-static with its applet links (the busybox binary itself is never overwritten),
# iproute2's ip, tc and ss, iperf3, dash as /bin/sh and coreutils' timeout/env/nohup/nice, xargs
# and setsid (see below why), every shared library they load (found with ldd, plus
# libgcc_s for Rust binaries shipped later through the share), tc's distribution tables, and
# ci/initramfs-init.sh as /init. `ip` and `tc` always resolve to iproute2 (busybox's applets have no
# netns and few qdiscs): their busybox links are removed and no busybox shell or exec-ing applet
# stands between a script and PATH.
#
# Cached under $MLTCP_CACHE/initramfs/<key>.cpio.gz; the key covers the package versions of
# busybox-static, iproute2, iperf3 and libiperf0, the contents of every copied binary and library,
# ci/initramfs-init.sh and this script. A hit costs ~0.1 s. The newest three images are kept.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=ci/lib.sh
. "$here/lib.sh"

init_script=$here/initramfs-init.sh
[ -f "$init_script" ] || die "missing $init_script"

need_pkgs=(busybox-static iproute2 iperf3 cpio)
for p in "${need_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || {
    "$here/deps.sh" >&2; break; }
done

# Locate a program wherever Debian put it (/bin vs /usr/bin under merged or split /usr).
locate_prog() {
  local d
  for d in /usr/sbin /usr/bin /sbin /bin; do
    if [ -x "$d/$1" ]; then readlink -f "$d/$1"; return 0; fi
  done
  die "cannot find program $1 (package missing? run ci/deps.sh)"
}
BUSYBOX=$(locate_prog busybox)
ldd "$BUSYBOX" >/dev/null 2>&1 && die "$BUSYBOX is dynamically linked: install busybox-static"
# Destination in the image -> source on the host.
declare -A progs=(
  [usr/sbin/ip]=$(locate_prog ip)
  [usr/sbin/tc]=$(locate_prog tc)
  [usr/bin/ss]=$(locate_prog ss)
  [usr/bin/iperf3]=$(locate_prog iperf3)
  # Debian's busybox is built with SH_STANDALONE and PREFER_APPLETS: its sh runs its own applets
  # (its `ip` has no netns) before searching PATH, and its timeout/env/xargs/... exec applets
  # likewise. So /bin/sh is dash, and the applets that run other programs are the real ones.
  [bin/dash]=$(locate_prog dash)
  [usr/bin/timeout]=$(locate_prog timeout)
  [usr/bin/env]=$(locate_prog env)
  [usr/bin/nohup]=$(locate_prog nohup)
  [usr/bin/nice]=$(locate_prog nice)
  [usr/bin/xargs]=$(locate_prog xargs)
  [usr/bin/setsid]=$(locate_prog setsid)
)

# Shared libraries (and the ELF interpreter) every program needs, as paths ldd reports.
libs_of() {
  ldd "$1" 2>/dev/null | awk '
    /=> not found/ { print "MISSING " $1; next }
    /=> \// { print $3; next }
    /^[ \t]*\// { print $1 }'
}
declare -A libs=()
for dst in "${!progs[@]}"; do
  while IFS= read -r l; do
    case "$l" in MISSING*) die "${progs[$dst]} needs ${l#MISSING } which is not installed";; esac
    libs[$l]=1
  done < <(libs_of "${progs[$dst]}")
done
# Rust binaries (shipped later through the share) need libgcc_s for unwinding.
for gcc_s in /lib/x86_64-linux-gnu/libgcc_s.so.1 /usr/lib/x86_64-linux-gnu/libgcc_s.so.1; do
  if [ -e "$gcc_s" ]; then libs[$gcc_s]=1; break; fi
done
tc_dist_dir=""
for d in /usr/lib/x86_64-linux-gnu/tc /usr/lib/tc /usr/lib64/tc; do
  if compgen -G "$d/*.dist" >/dev/null; then tc_dist_dir=$d; break; fi
done

key=$( {
  for p in busybox-static iproute2 iperf3 libiperf0; do
    echo "$p $(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || echo none)"
  done
  { echo "$BUSYBOX"; printf '%s\n' "${progs[@]}" "${!libs[@]}"; } | sort | while IFS= read -r f; do
    sha256sum "$f"
  done
  [ -n "$tc_dist_dir" ] && (cd "$tc_dist_dir" && sha256sum ./*.dist)
  cat "$init_script" "$0"
} | sha256sum | cut -c1-16)
out_dir=$MLTCP_CACHE/initramfs
out=$out_dir/$key.cpio.gz
if [ -s "$out" ]; then
  echo "$out"; exit 0
fi

log "initramfs cache miss ($key): building"
mkdir -p "$out_dir"
stage=$(mktemp -d "$out_dir/stage.XXXXXX")
trap 'rm -rf "$stage"' EXIT
cd "$stage"
mkdir -p bin sbin usr/bin usr/sbin lib lib64 etc dev proc sys tmp run root host results var
ln -s ../run var/run   # iproute2 keeps network namespaces in /var/run/netns

# busybox and its applet links (relative to /; never one named busybox).
install -m 0755 "$BUSYBOX" bin/busybox
"$BUSYBOX" --list-full | while IFS= read -r applet; do
  [ "$(basename "$applet")" = busybox ] && continue
  [ -e "$applet" ] || [ -L "$applet" ] && continue
  mkdir -p "$(dirname "$applet")"
  ln -s /bin/busybox "$applet"
done

# iproute2 and iperf3 replace any busybox applet of the same name, in every bin directory.
for dst in "${!progs[@]}"; do
  name=$(basename "$dst")
  rm -f bin/"$name" sbin/"$name" usr/bin/"$name" usr/sbin/"$name"
  install -m 0755 "${progs[$dst]}" "$dst"
  for d in bin sbin usr/bin usr/sbin; do
    [ "$d/$name" = "$dst" ] || ln -s "/$dst" "$d/$name"
  done
done
rm -f bin/sh sbin/sh usr/bin/sh usr/sbin/sh
ln -s dash bin/sh
[ "$(readlink -f bin/busybox)" = "$stage/bin/busybox" ] || die "bin/busybox was replaced: bug in $0"
for l in "${!libs[@]}"; do
  mkdir -p ".$(dirname "$l")"
  cp -L "$l" ".$l"
done
if [ -n "$tc_dist_dir" ]; then
  mkdir -p ".$tc_dist_dir"
  cp "$tc_dist_dir"/*.dist ".$tc_dist_dir/"
fi
[ -d /etc/iproute2 ] && cp -rL /etc/iproute2 etc/
printf 'root:x:0:0:root:/root:/bin/sh\n' > etc/passwd
printf 'root:x:0:\n' > etc/group
printf '127.0.0.1 localhost\n::1 localhost\n' > etc/hosts
install -m 0755 "$init_script" init
# A /dev/console node lets the kernel give /init a console before devtmpfs is mounted (needs root;
# /init re-attaches to the console after mounting devtmpfs anyway).
mknod -m 600 dev/console c 5 1 2>/dev/null || true

tmp=$(mktemp "$out_dir/.tmp.XXXXXX")
find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet | gzip -6 > "$tmp"
chmod 0644 "$tmp"
mv "$tmp" "$out"
log "initramfs built: $out ($(du -h "$out" | cut -f1))"
# Keep the three newest images.
ls -1t "$out_dir"/*.cpio.gz 2>/dev/null | tail -n +4 | xargs -r rm -f
echo "$out"
