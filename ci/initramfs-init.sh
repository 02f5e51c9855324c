#!/bin/sh
# ci/initramfs-init.sh: the /init (PID 1) of the VM testbed's initramfs, installed by
# ci/build-initramfs.sh; runs under dash (/bin/sh in the image), busybox provides most commands.
# Not run on the host.
#
# Contract with ci/vm-run (the host side). Everything the run needs arrives in memory, as a second
# initramfs archive that the kernel unpacks under /host, so nothing is read from the host while
# SCRIPT runs (with the virtual clock, host I/O timing would otherwise reach the guest's timing):
#   /host/script          the user's SCRIPT; run as `sh /host/script ARGS...` (or executed directly
#                         when vm.conf says SCRIPT_MODE=exec, for ELF binaries), cwd /tmp, root,
#                         stdin /dev/null, output on the serial console
#   /host/args/0,1,...    one file per argument, exact bytes
#   /host/vm.conf         shell assignments: NO_MODULE=0|1, SCRIPT_MODE=sh|exec, SCRIPT_NAME=...,
#                         VM_CLOCK=virtual|real
#   /host/modules/*.ko    in-tree modules to load first (tcp_bbr, tcp_dctcp); when
#                         /host/modules/order exists, the ones it lists, in its order (a stock
#                         kernel's modules after their dependencies)
#   /host/boot/           a stock kernel's Kconfig (config-<release>), when vm-run has one
#   /host/tcp_mltcp.ko    our module, loaded unless NO_MODULE=1; a failed insmod fails the run
#   /host/bin, /host/libs project binaries (first on PATH) and the shared libraries they need
#   /host/ci/             guest-side helpers (vm-lib.sh, vm-tests/)
# After SCRIPT exits, the virtio-9p share (mount_tag `host`) is mounted at /share and receives:
#   /share/results        a copy of /results (what SCRIPT left for the host, plus vm-cpu.txt: the
#                         guest's CPU use while SCRIPT ran)
#   /share/status         SCRIPT's exit status (absent = the guest crashed)
#   /share/init-error     written when /init itself fails (insmod, missing payload)
# Then `poweroff -f` (ACPI), which ends qemu.

export PATH=/host/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/tmp TERM=dumb

# The initramfs may have no /dev/console: mount devtmpfs first, then attach stdio to the console.
mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1

say() { echo "vm-init: $*"; }
# share_mount: mount the 9p share at /share (once); only used after SCRIPT, or to report a failure.
share_mount() {
  grep -q ' /share ' /proc/mounts 2>/dev/null && return 0
  mkdir -p /share
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 host /share
}
fail() {
  say "error: $*"
  if share_mount; then echo "$*" > /share/init-error; sync
  else say "error: cannot mount the 9p share (mount_tag host) to report this to the host"; fi
  poweroff -f
  sleep 10
}
# cpu_jiffies: "busy total" jiffies summed over all CPUs from /proc/stat (busy = not idle/iowait).
cpu_jiffies() {
  awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t; exit }' /proc/stat
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

[ -f /host/vm.conf ] || fail "/host/vm.conf missing: the initramfs carries no payload (start the VM with ci/vm-run)"
NO_MODULE=0 SCRIPT_MODE=sh SCRIPT_NAME=script VM_CLOCK=real
. /host/vm.conf
mkdir -p /results

ip link set lo up || fail "cannot bring up lo"
if [ -d /host/libs ] && [ -n "$(ls /host/libs 2>/dev/null)" ]; then
  export LD_LIBRARY_PATH=/host/libs
fi

if [ -f /host/modules/order ]; then
  # A stock kernel's modules (vm-run --kernel-deb debian12), each after its dependencies.
  while IFS= read -r m; do
    insmod "/host/modules/$m" || say "warning: insmod $m failed"
  done < /host/modules/order
else
  for m in /host/modules/*.ko; do
    [ -e "$m" ] || continue
    insmod "$m" || say "warning: insmod $m failed"
  done
fi
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

export MLTCP_VM=1 MLTCP_VM_LIB=/host/ci/vm-lib.sh RESULTS=/results MLTCP_VM_CLOCK=$VM_CLOCK

# Let the boot's last clocksource switch happen before SCRIPT starts. The kernel boots on
# `tsc-early` and switches to the refined `tsc` about 1.3 s of guest time after boot, with a
# stop_machine() across both vCPUs; SCRIPT used to start at about 0.8 s, so the switch fell into
# its first work. Once in the test suite (2026-11-26, a fresh clone's .ci/run on the virtual
# clock) that stop_machine() stalled the vCPUs for 20 s of guest time (an RCU stall report and a
# clocksource watchdog "Long readout interval"), failing the dmesg check; the CCP overhead scenario
# met the same stall when it started a CPU-bound transfer before the switch. Waiting costs about
# 0.5 s of guest time. If the kernel never leaves tsc-early (a TSC judged unstable), give up after
# 10 s and say so.
cs=/sys/devices/system/clocksource/clocksource0/current_clocksource
i=0
while [ "$(cat $cs 2>/dev/null)" = tsc-early ] && [ $i -lt 100 ]; do
  sleep 0.1
  i=$((i + 1))
done
[ $i -lt 100 ] || say "warning: clocksource still tsc-early after 10 s; SCRIPT starts anyway"
cd /tmp
say "running $SCRIPT_NAME $* ($VM_CLOCK clock)"
cpu0=$(cpu_jiffies) up0=$(cut -d' ' -f1 /proc/uptime)
if [ "$SCRIPT_MODE" = exec ]; then
  /host/script "$@" </dev/null
else
  sh /host/script "$@" </dev/null
fi
status=$?
cpu1=$(cpu_jiffies) up1=$(cut -d' ' -f1 /proc/uptime)
cd /
# The guest's CPU use while SCRIPT ran: a run that kept the guest's CPUs busy measured the guest's
# CPU, not the network, and should not be trusted.
echo "$cpu0 $cpu1 $up0 $up1 $(nproc)" | awk '{
  busy = $3 - $1; total = $4 - $2; frac = total > 0 ? busy / total : 0
  printf "busy %.1f%% of %d CPUs over %.2f s of guest time\n", 100 * frac, $7, $6 - $5 }' > /results/vm-cpu.txt
share_mount || { say "error: cannot mount the 9p share to return the results"; poweroff -f; sleep 10; }
mkdir -p /share/results
cp -a /results/. /share/results/ || say "warning: copying /results to the host failed"
echo "$status" > /share/status
sync
say "$SCRIPT_NAME exited with status $status"
poweroff -f
sleep 10
