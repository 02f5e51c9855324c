#!/bin/sh
# ci/vm-tests/guest_clock.sh: the guest side of ci/scenarios/clock-check.sh. Measures, in guest time
# (/proc/timer_list's "now", ns), a fixed amount of guest work: a shell loop of 100 000 steps (CPU)
# and a 2 s reno flow through the testbed's bottleneck (tbf 100 Mbit/s + netem 1 ms: bytes carried).
# Writes /results/guest-clock.txt with `loop_ns N` and `iperf_bytes N`.
. "${MLTCP_VM_LIB:-/host/ci/vm-lib.sh}" || { echo "cannot source vm-lib.sh"; exit 1; }
now_ns() { awk '/^now at/ { print $3; exit }' /proc/timer_list; }
out=${RESULTS:-/results}/guest-clock.txt
# Let the kernel's boot-time deferred work (clocksource refinement, RCU, module loading's
# aftermath) finish first: it shares the vCPUs with the loop. Idle guest time costs no wall time
# on the virtual clock.
sleep 3
t0=$(now_ns)
i=0; while [ $i -lt 100000 ]; do i=$((i + 1)); done
t1=$(now_ns)
echo "loop_ns $((t1 - t0))" > "$out"
vm_net_setup || { echo "vm_net_setup failed"; exit 1; }
vm_net_shape 100mbit 1ms || { echo "vm_net_shape failed"; exit 1; }
vm_iperf /tmp/gc.json -t 2 -C reno || exit 1
echo "iperf_bytes $(vm_iperf_bytes /tmp/gc.json)" >> "$out"
vm_net_teardown
cat "$out"
