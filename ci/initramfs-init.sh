#!/bin/sh
# ci/initramfs-init.sh: the /init (PID 1) of the VM testbed's initramfs, installed by
# ci/build-initramfs.sh; runs under dash (/bin/sh in the image), busybox provides most commands.
# Not run on the host.
#
# Contract with ci/vm-run (the host side), all through the virtio-9p share (mount_tag `host`):
#   /host/script          the user's SCRIPT; run as `sh /host/script ARGS...` (or executed directly
#                         when vm.conf says SCRIPT_MODE=exec, for ELF binaries), cwd /tmp, root,
#                         stdin /dev/null, output on the serial console
#   /host/args/0,1,...    one file per argument, exact bytes
#   /host/vm.conf         shell assignments: NO_MODULE=0|1, SCRIPT_MODE=sh|exec, SCRIPT_NAME=...
#   /host/modules/*.ko    in-tree modules to load first (tcp_bbr, tcp_dctcp)
#   /host/tcp_mltcp.ko    our module, loaded unless NO_MODULE=1; a failed insmod fails the run
#   /host/bin, /host/libs project binaries (first on PATH) and the shared libraries they need
#   /host/ci/             guest-side helpers (vm-lib.sh)
#   /host/results         bind-mounted at /results; ci/vm-run copies it back to the host
#   /host/status          written here: SCRIPT's exit status (absent = the guest crashed)
#   /host/init-error      written here when /init itself fails (9p, insmod)
# Then `poweroff -f` (ACPI), which ends qemu.

export PATH=/host/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/tmp TERM=dumb

# The initramfs may have no /dev/console: mount devtmpfs first, then attach stdio to the console.
mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1

say() { echo "vm-init: $*"; }
fail() {
  say "error: $*"
  if [ -d /host/args ]; then echo "$*" > /host/init-error; sync; fi
  poweroff -f
  sleep 10
}

mount -t proc proc /proc || fail "cannot mount /proc"
mount -t sysfs sysfs /sys || fail "cannot mount /sys"
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts 2>/dev/null
mount -t tmpfs -o mode=1777 tmpfs /tmp || fail "cannot mount tmpfs on /tmp"
mount -t tmpfs -o mode=755 tmpfs /run || fail "cannot mount tmpfs on /run"
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
[ -e /dev/stdin ] || ln -s /proc/self/fd/0 /dev/stdin
[ -e /dev/stdout ] || ln -s /proc/self/fd/1 /dev/stdout
[ -e /dev/stderr ] || ln -s /proc/self/fd/2 /dev/stderr

mkdir -p /host
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 host /host \
  || fail "cannot mount the 9p share (mount_tag host): is qemu started with -virtfs ...,mount_tag=host?"
[ -f /host/vm.conf ] || fail "/host/vm.conf missing: the share was not prepared by ci/vm-run"
NO_MODULE=0 SCRIPT_MODE=sh SCRIPT_NAME=script
. /host/vm.conf

mkdir -p /host/results /results
mount -o bind /host/results /results || fail "cannot bind /host/results to /results"

ip link set lo up || fail "cannot bring up lo"
if [ -d /host/libs ] && [ -n "$(ls /host/libs 2>/dev/null)" ]; then
  export LD_LIBRARY_PATH=/host/libs
fi

for m in /host/modules/*.ko; do
  [ -e "$m" ] || continue
  insmod "$m" || say "warning: insmod $m failed"
done
if [ "$NO_MODULE" = 1 ]; then
  say "--no-module: tcp_mltcp.ko not loaded"
else
  if ! insmod /host/tcp_mltcp.ko; then
    dmesg | tail -n 30
    fail "insmod /host/tcp_mltcp.ko failed (kernel messages above)"
  fi
  say "tcp_mltcp loaded; available: $(cat /proc/sys/net/ipv4/tcp_available_congestion_control)"
fi

# Rebuild "$@" from /host/args/N (exact bytes: the trailing x protects trailing newlines).
set --
i=0
while [ -e "/host/args/$i" ]; do
  a=$(cat "/host/args/$i"; echo x)
  set -- "$@" "${a%x}"
  i=$((i + 1))
done

export MLTCP_VM=1 MLTCP_VM_LIB=/host/ci/vm-lib.sh RESULTS=/results
cd /tmp
say "running $SCRIPT_NAME $*"
if [ "$SCRIPT_MODE" = exec ]; then
  /host/script "$@" </dev/null
else
  sh /host/script "$@" </dev/null
fi
status=$?
cd /
echo "$status" > /host/status
sync
say "$SCRIPT_NAME exited with status $status"
poweroff -f
sleep 10
