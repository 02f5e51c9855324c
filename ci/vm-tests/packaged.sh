# ci/vm-tests/packaged.sh: run in the VM booted from the packaged kernel (ci/vm-run --kernel-deb
# linux-image-*.deb --module tcp_mltcp.ko, the module built against the linux-headers package by
# ci/package-module.sh): the kernel is ours (release ends in -mltcp), the module built the way a
# user builds it loads into it, and one mltcp flow runs through it. Called by ci/packaging-check.sh.
# Output: one "ok NAME" / "FAIL NAME: reason" line per check, then "N passed, M failed".
set -u
. "$MLTCP_VM_LIB"
passed=0 failed=0
ok() { echo "ok $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1: $2"; failed=$((failed + 1)); }

rel=$(uname -r)
case "$rel" in *-mltcp) ok "kernel_release ($rel)" ;; *) bad kernel_release "uname -r is '$rel', not a -mltcp release" ;; esac
if grep -q '^tcp_mltcp ' /proc/modules; then ok module_loaded; else bad module_loaded "tcp_mltcp not in /proc/modules"; fi
vermagic=$(tr '\0' '\n' < /host/tcp_mltcp.ko | sed -n 's/^vermagic=//p' | head -n 1)
case "$vermagic" in "$rel "*) ok "module_vermagic ($vermagic)" ;; *) bad module_vermagic "vermagic '$vermagic' does not start with '$rel '" ;; esac
avail=$(cat /proc/sys/net/ipv4/tcp_available_congestion_control)
missing=""
for a in mltcp mltcp_cubic mltcp_dctcp; do case " $avail " in *" $a "*) ;; *) missing="$missing $a" ;; esac; done
if [ -z "$missing" ]; then ok "algorithms ($avail)"; else bad algorithms "missing:$missing (available: $avail)"; fi

mkdir -p "$RESULTS/packaged"
vm_net_setup || bad net_setup "vm_net_setup failed"
vm_net_shape 100mbit 1ms || bad net_shape "tc setup failed"
j=$RESULTS/packaged/mltcp.json
if vm_iperf "$j" -C mltcp -t 3; then
  cc=$(vm_iperf_cc "$j") mbps=$(vm_iperf_mbps "$j")
  if [ "$cc" = mltcp ] && [ "${mbps%.*}" -ge 50 ]; then ok "mltcp_flow ($mbps Mbit/s)"
  else bad mltcp_flow "congestion control '$cc', $mbps Mbit/s (expected mltcp, >= 50 on the 100 Mbit/s link)"; fi
else
  bad mltcp_flow "iperf3 -C mltcp failed"
fi
vm_net_teardown
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
