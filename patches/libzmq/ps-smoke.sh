#!/usr/bin/env bash
# patches/libzmq/ps-smoke.sh: run a small parameter-server job (1 server, 2 workers) over the
# patched libzmq and check that (1) its TCP sockets use the congestion control asked for, on both
# ends, per `ss -ti`; (2) every process's progress region, read by mltcp-progress-dump, shows the
# job's iteration count and at least the bytes it sent (plus ZMTP framing only); (3) with an
# algorithm that does not exist, the job still runs, on the default, and each process says so once.
# Runs on a host (loopback) or in the VM; it is what a VM test of the libzmq patch would call with
# CC=mltcp once tcp_mltcp.ko is loaded.
#
# Usage: patches/libzmq/ps-smoke.sh PREFIX DUMP [CC] [HOST]
#   PREFIX  install prefix printed by ci/build-libzmq.sh (has bin/mltcp-ps-test)
#   DUMP    path of mltcp-progress-dump (cargo build -p mltcp-progress)
#   CC      congestion control to expect (default mltcp; reno works on any Linux host)
#   HOST    address the server binds and the workers connect to (default 127.0.0.1)
# Prints "ps-smoke: ok" and exits 0 when every check passes; else names the failed check.
set -euo pipefail
die() { printf 'ps-smoke: FAIL: %s\n' "$*" >&2; exit 1; }
[ $# -ge 2 ] && [ $# -le 4 ] || die "usage: $0 PREFIX DUMP [CC] [HOST]"
bin=$1/bin/mltcp-ps-test
dump=$2
cc=${3:-mltcp}
host=${4:-127.0.0.1}
[ -x "$bin" ] || die "no $bin (run ci/build-libzmq.sh)"
[ -x "$dump" ] || die "no $dump"
iters=20 bytes=500000 compute_ms=100 port=$((20000 + RANDOM % 20000))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run_job CC: runs the job in the background with MLTCP_CC=CC; pids in $pids.
run_job() {
  export MLTCP_PROGRESS_DIR=$work/regions MLTCP_JOB_ID=pssmoke MLTCP_CC=$1 MLTCP_WORLD_SIZE=3
  MLTCP_ROLE=ps MLTCP_RANK=0 MLTCP_BYTES_PER_ITER=$((2 * bytes)) \
    "$bin" server "tcp://$host:$port" 2 "$iters" "$bytes" >"$work/r0.out" 2>"$work/r0.err" &
  pids=($!)
  for r in 1 2; do
    MLTCP_ROLE=worker MLTCP_RANK=$r MLTCP_BYTES_PER_ITER=$bytes \
      "$bin" worker "tcp://$host:$port" "$iters" "$bytes" "$compute_ms" >"$work/r$r.out" 2>"$work/r$r.err" &
    pids+=($!)
  done
}
wait_job() {
  for p in "${pids[@]}"; do wait "$p" || die "a process of the job failed: $(cat "$work"/r*.err)"; done
  for r in 0 1 2; do
    grep -q "^done iters=$iters " "$work/r$r.out" || die "rank $r did not finish: $(tail -1 "$work/r$r.out")"
  done
}

# 1. The algorithm on every socket of the job, both ends (4 sockets: 2 connections).
run_job "$cc"
sleep 1
ss -tinH "( sport = :$port or dport = :$port )" >"$work/ss" || die "ss failed"
n_est=$(grep -c '^ESTAB' "$work/ss" || true)
n_cc=$(grep -Ec "^[[:space:]]+$cc( |$)" "$work/ss" || true)
[ "$n_est" -eq 4 ] || die "expected 4 established sockets on port $port, ss shows $n_est"
[ "$n_cc" -eq 4 ] || die "expected 4 sockets with $cc, ss shows $n_cc: $(cat "$work/ss")"
"$dump" "$work/regions" >"$work/dump.running" || die "mltcp-progress-dump failed"
wait_job
echo "ps-smoke: 4/4 sockets use $cc"

# 2. Progress: iteration = iters on every rank, bytes = what it sent + framing.
for r in 0 1 2; do
  line=$(grep "/pssmoke.$r.region " "$work/dump.running") || die "no region of rank $r in the dump"
  grep -q "paradigm=ParameterServer" <<<"$line" || die "rank $r: $line"
done
"$dump" "$work/regions" >"$work/dump" || die "mltcp-progress-dump failed"
for r in 0 1 2; do
  line=$(grep "/pssmoke.$r.region " "$work/dump") || die "no region of rank $r after the job"
  it=$(sed -n 's/.* iteration=\([0-9]*\) .*/\1/p' <<<"$line")
  total=$(sed -n 's/.* total_bytes=\([0-9]*\) .*/\1/p' <<<"$line")
  sent=$(sed -n 's/^done iters=[0-9]* sent=\([0-9]*\)$/\1/p' "$work/r$r.out")
  [ "$it" = "$iters" ] || die "rank $r: region iteration $it, the job ran $iters: $line"
  [ "$total" -ge "$sent" ] && [ "$total" -le $((sent + iters * 64 + 1024)) ] \
    || die "rank $r: region total_bytes $total, the job sent $sent payload bytes"
  echo "ps-smoke: rank $r: iteration $it, total_bytes $total (payload $sent)"
done
# Flows: each worker's connection as a push, both on the server as pulls.
[ "$(grep -c 'kind=PsPush' "$work/dump" || true)" -eq 2 ] || die "expected 2 PsPush flows: $(cat "$work/dump")"
[ "$(grep -c 'kind=PsPull' "$work/dump" || true)" -eq 2 ] || die "expected 2 PsPull flows: $(cat "$work/dump")"

# 3. An algorithm that is not there: the job runs on the default, each process says it once.
rm -rf "$work/regions"
port=$((port + 1))
run_job no_such_cc
wait_job
for r in 0 1 2; do
  n=$(grep -c 'setsockopt(TCP_CONGESTION, "no_such_cc") failed' "$work/r$r.err" || true)
  [ "$n" -eq 1 ] || die "rank $r: expected one refusal message, got $n: $(cat "$work/r$r.err")"
done
echo "ps-smoke: unknown algorithm: job ran, one message per process"
echo "ps-smoke: ok"
