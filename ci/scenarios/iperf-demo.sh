#!/bin/sh
# ci/scenarios/iperf-demo.sh: in-VM iperf3 throughput demo and benchmark.
# Runs in the guest (sh = dash) through ci/vm-run; ci/demo is the host-side command:
#
#   ci/vm-run ci/scenarios/iperf-demo.sh [--runs N] [--secs S] [--algs "cubic reno ..."]
#
# For each path -- `shaped` (tbf 100 Mbit/s + netem 10 ms on the sender's egress) and `unshaped`
# (bare veth) -- and each run, every algorithm sends for S seconds (iperf3 -C ALG; order rotated
# between runs). Prints a table of median Mbit/s and the ratios mltcp/reno and mltcp_cubic/cubic,
# and writes /results/throughput.csv (path,algorithm,run,mbit_s,retransmits,socket_cc -- what
# the socket really used, e.g. dctcp-reno when dctcp falls back without ECN) and
# /results/throughput.txt (the table). Algorithms that are not loaded (e.g. under --no-module)
# show as n/a. dctcp runs without ECN marking on this path, so it reacts to loss like Reno.

. "${MLTCP_VM_LIB:-/host/ci/vm-lib.sh}" || { echo "cannot source vm-lib.sh"; exit 1; }

RUNS=3 SECS=5 ALGS="cubic reno mltcp mltcp_cubic bbr dctcp"
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS=$2; shift 2 ;;
    --secs) SECS=$2; shift 2 ;;
    --algs) ALGS=$2; shift 2 ;;
    *) echo "iperf-demo: unknown argument $1 (--runs N, --secs S, --algs LIST)"; exit 2 ;;
  esac
done
CSV=/results/throughput.csv
RAW=/results/iperf-demo
mkdir -p "$RAW"

present="" missing=""
for a in $ALGS; do
  if vm_cc_available "$a"; then present="$present $a"; else missing="$missing $a"; fi
done
echo "iperf-demo: kernel $(uname -r), $(nproc) CPUs, $RUNS runs x ${SECS}s per algorithm and path"
echo "iperf-demo: algorithms:$present${missing:+ (not loaded:$missing)}"
vm_net_setup || { echo "iperf-demo: network setup failed"; exit 1; }

echo "path,algorithm,run,mbit_s,retransmits,socket_cc" > "$CSV"
errors=0
for path in shaped unshaped; do
  if [ "$path" = shaped ]; then vm_net_shape 100mbit 10ms || exit 1; else vm_net_unshape; fi
  run=1
  while [ $run -le "$RUNS" ]; do
    # Rotate the order so no algorithm always runs first (TCG timing drifts).
    order=$(echo $present | awk -v r="$run" '{ n = NF; for (i = 0; i < n; i++) printf "%s ", $(((i + r - 1) % n) + 1) }')
    for a in $order; do
      j=$RAW/$path-$a-$run.json
      if vm_iperf "$j" -C "$a" -t "$SECS"; then
        m=$(vm_iperf_mbps "$j") rt=$(vm_iperf_retrans "$j") cc=$(vm_iperf_cc "$j")
        echo "$path,$a,$run,$m,$rt,$cc" >> "$CSV"
        printf 'iperf-demo: %-8s run %d %-12s %8s Mbit/s %6s retransmits (socket: %s)\n' "$path" "$run" "$a" "$m" "$rt" "$cc"
      else
        errors=$((errors + 1))
      fi
    done
    run=$((run + 1))
  done
done
vm_net_teardown

median_of() { # PATH ALG
  vals=$(awk -F, -v p="$1" -v a="$2" '$1 == p && $2 == a { print $4 }' "$CSV")
  [ -n "$vals" ] && vm_median $vals
}
{
  echo
  printf '%-12s %12s %12s   (median of %d runs x %ds, Mbit/s)\n' algorithm shaped unshaped "$RUNS" "$SECS"
  for a in $ALGS; do
    s=$(median_of shaped "$a") u=$(median_of unshaped "$a")
    printf '%-12s %12s %12s\n' "$a" "${s:-n/a}" "${u:-n/a}"
  done
  echo
  for pair in mltcp/reno mltcp_cubic/cubic; do
    n=${pair%/*} d=${pair#*/}
    for path in shaped unshaped; do
      x=$(median_of $path "$n") y=$(median_of $path "$d")
      if [ -n "$x" ] && [ -n "$y" ]; then
        r=$(awk -v x="$x" -v y="$y" 'BEGIN { printf "%.3f", x / y }')
      else r=n/a; fi
      printf 'ratio %-18s %-9s %s\n' "$pair" "$path" "$r"
    done
  done
  echo "(shaped: tbf 100 Mbit/s, burst 64 kB + netem 10 ms; unshaped: veth under qemu TCG; target: unshaped ratios >= 0.97)"
} | tee /results/throughput.txt
[ "$errors" = 0 ] || { echo "iperf-demo: $errors iperf3 run(s) failed"; exit 1; }
