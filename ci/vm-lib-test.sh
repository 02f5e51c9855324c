#!/bin/sh
# ci/vm-lib-test.sh: host-side tests of ci/vm-lib.sh's pure helpers (parsing and arithmetic that
# the in-VM scenarios use: counters, guest instructions, per-ACK reports, t intervals; and
# vm_bpf_load's refusals), on fixed inputs with hand-computed answers. Runs each test with the
# host's awk and, when busybox is installed (ci/deps.sh: busybox-static), again with busybox's
# awk, the guest's. ci/lint.sh runs
# it. Prints "ok - NAME" / "not ok - NAME" per test and closes with "N passed, M failed".
here=$(cd "$(dirname "$0")" && pwd)
MLTCP_VM_LIB=$here/vm-lib.sh
. "$MLTCP_VM_LIB" || { echo "cannot source vm-lib.sh"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vm-lib-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
# check NAME EXPECTED ACTUAL
check() {
  if [ "$2" = "$3" ]; then
    passed=$((passed + 1)); echo "ok - $1 ($AWK_NAME)"
  else
    failed=$((failed + 1)); echo "not ok - $1 ($AWK_NAME): expected"; echo "$2"; echo "got"; echo "$3"
  fi
}

run_tests() {
  # /proc/net/snmp and /proc/net/netstat layout: a line of names, then one of values.
  printf '%s\n' 'Ip: Forwarding DefaultTTL' 'Ip: 1 64' \
    'Tcp: RtoAlgorithm ActiveOpens InSegs OutSegs' 'Tcp: 1 2 1000 900' > "$tmp/snmp0"
  printf '%s\n' 'TcpExt: SyncookiesSent TCPPureAcks' 'TcpExt: 0 17' > "$tmp/netstat0"
  check snmp_parse "$(printf '%s\n' 'Ip.Forwarding 1' 'Ip.DefaultTTL 64' 'Tcp.RtoAlgorithm 1' \
    'Tcp.ActiveOpens 2' 'Tcp.InSegs 1000' 'Tcp.OutSegs 900' 'TcpExt.SyncookiesSent 0' 'TcpExt.TCPPureAcks 17')" \
    "$(cat "$tmp/snmp0" "$tmp/netstat0" | vm_snmp_parse)"

  printf '%s\n' 'Tcp.InSegs 1000' 'Tcp.OutSegs 900' > "$tmp/c0"
  printf '%s\n' 'Tcp.InSegs 4294968296' 'Tcp.OutSegs 950' > "$tmp/c1"
  check counter_delta 4294967296 "$(vm_counter_delta "$tmp/c0" "$tmp/c1" Tcp.InSegs)"
  vm_counter_delta "$tmp/c0" "$tmp/c1" Tcp.NoSuch >/dev/null; check counter_delta_missing_fails 1 "$?"

  printf '%s\n' NO_MODULE=0 VM_CLOCK=virtual VM_SHIFT=0 > "$tmp/conf0"
  printf '%s\n' VM_CLOCK=virtual VM_SHIFT=3 > "$tmp/conf3"
  printf '%s\n' VM_CLOCK=real VM_SHIFT=0 > "$tmp/confr"
  check instructions_shift0 2605000123 "$(VM_CONF=$tmp/conf0 vm_guest_instructions 2605000123)"
  check instructions_shift3 325625015 "$(VM_CONF=$tmp/conf3 vm_guest_instructions 2605000123)"
  VM_CONF=$tmp/confr vm_guest_instructions 5 >/dev/null 2>&1; check instructions_real_clock_fails 1 "$?"

  # tci: d = 1, 2, 3: mean 2, sd 1, half-width 4.303 / sqrt(3) = 2.4843.
  check tci "2.0000 1.0000 2.4843" "$(awk "$VM_AWK_TCI"'BEGIN { d[1] = 1; d[2] = 2; d[3] = 3; tci(d, 3); printf "%.4f %.4f %.4f", TCI_M, TCI_SD, TCI_H }')"

  # Two rounds. reno: 30000 and 26000 instructions per ACK, 20000 and 25000 ACKs per GB.
  # ccp1: 36000 (+20 %) and 28000 (+7.692 %) per ACK; extra at equal bytes (720e6 - 600e6) /
  # 20000 = 6000 and (1.4e9 - 650e6 * 2) / 50000 = 2000. Means +13.846 % and 4000; sd 8.7029 and
  # 2828.4; half-widths 12.706 * sd / sqrt(2): 78.19 and 25412.
  printf '%s\n' '1 reno 1000000000 600000000 20000 19990' '1 ccp1 1000000000 720000000 20000 20001' \
    '2 ccp1 2000000000 1400000000 50000 50002' '2 reno 1000000000 650000000 25000 25003' \
    '3 mltcp 1000000000 600000000 0 0' > "$tmp/acks"
  check per_ack_report "$(printf '%s\n' \
    'reno   instructions/ACK 28000 (rounds: 30000, 26000); ACKs/GB 22500' \
    'ccp1   instructions/ACK 32000 (rounds: 36000, 28000); ACKs/GB 22500' \
    '       vs reno (2 rounds): instructions/ACK +13.8 % [-64.3, +92.0]; extra per ACK at equal bytes +4000 [-21412, +29412]')" \
    "$(vm_per_ack_report "$tmp/acks" reno)"
  printf '%s\n' '1 reno 1000000000 600000000 20000 1' '1 ccpy1 1000000000 630000000 21000 1' > "$tmp/acks1"
  check per_ack_report_one_round "$(printf '%s\n' \
    'reno   instructions/ACK 30000 (rounds: 30000); ACKs/GB 20000' \
    'ccpy1  instructions/ACK 30000 (rounds: 30000); ACKs/GB 21000' \
    '       vs reno (1 rounds): instructions/ACK +0.0 %; extra per ACK at equal bytes +1429')" \
    "$(vm_per_ack_report "$tmp/acks1" reno)"

  # vm_bpf_load's refusals, before it loads anything (a stub mltcp-bpf that must not run).
  mkdir -p "$tmp/nobpf" "$tmp/stub"
  printf '#!/bin/sh\necho ran > "%s"\n' "$tmp/stub-ran" > "$tmp/stub/mltcp-bpf"
  chmod +x "$tmp/stub/mltcp-bpf"
  printf '%s\n' 'tcp_mltcp 4096 0 - Live 0x0' > "$tmp/modules1"
  printf '%s\n' 'veth 4096 0 - Live 0x0' > "$tmp/modules0"
  out=$(PATH=$tmp/nobpf:/usr/bin:/bin vm_bpf_load "$tmp/load.txt"); rc=$?
  check bpf_load_needs_the_cli "1: mltcp-bpf not on PATH (is it in ci/vm-bins.txt?)" "$rc: $out"
  out=$(PATH=$tmp/stub:$PATH VM_PROC_MODULES=$tmp/modules1 vm_bpf_load "$tmp/load.txt"); rc=$?
  check bpf_load_refuses_the_module \
    "1: tcp_mltcp.ko is loaded and holds the names mltcp and mltcp_cubic (boot with ci/vm-run --no-module or --kernel-deb debian12)" \
    "$rc: $out"
  out=$(PATH=$tmp/stub:$PATH VM_PROC_MODULES=$tmp/modules0 VM_BTF=$tmp/nosuch vm_bpf_load "$tmp/load.txt"); rc=$?
  check bpf_load_needs_btf \
    "1: kernel $(uname -r) has no BTF (/sys/kernel/btf/vmlinux; CONFIG_DEBUG_INFO_BTF), so mltcp-bpf cannot load" \
    "$rc: $out"
  check bpf_load_ran_nothing no "$([ -e "$tmp/stub-ran" ] && echo yes || echo no)"
}

AWK_NAME="host awk"
run_tests
if command -v busybox >/dev/null; then
  mkdir -p "$tmp/bb" && ln -s "$(command -v busybox)" "$tmp/bb/awk"
  AWK_NAME="busybox awk"
  PATH=$tmp/bb:$PATH run_tests
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
