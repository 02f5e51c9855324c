#!/bin/sh
# ci/vm-tests/libs.sh: in-VM tests of how communication libraries pick up mltcp,
# sourced by suite.sh (uses its run_test/fail/note and vm-lib.sh's namespaces snd/rcv):
#
#   preload_iperf3       an unmodified `iperf3` (no -C) under LD_PRELOAD=libmltcp_preload.so uses
#                        mltcp on its data connection (iperf3's own report and `ss -ti`);
#   preload_unknown_cc   MLTCP_CC=no_such_cc: iperf3 still runs, on the default algorithm, and the
#                        shim says so exactly once;
#   libzmq_ps            a parameter-server job (1 server in namespace rcv, 2 workers in snd) over
#                        the patched libzmq (ci/build-libzmq.sh: mltcp-ps-test): `ss -ti` shows mltcp on
#                        all 4 sockets, and the progress regions (read by mltcp-progress-dump, the
#                        agent's own reader) show each process's iterations and bytes matching what
#                        it sent (payload plus ZMTP framing), push and pull flows listed;
#   libzmq_ecn           the same job with MLTCP_CC=mltcp_dctcp, no route hint, through ecn.sh's
#                        CE-marking bottleneck: the patched libzmq sets the algorithm before
#                        connect() and listen(), so the connections negotiate ECN in their
#                        handshake and the workers see CE echoes (TcpExt TCPDeliveredCE); set
#                        only after the handshake, as libzmq's own tuning does, none would.
#
# libzmq_ecn also uses ecn.sh's ecn_shape, ecn_unshape and ecn_delivered_ce.
# Needs what ci/test-all ships with `ci/vm-run --extra`: libmltcp_preload.so (in /host/libs) and
# mltcp-ps-test (in /host/bin); a test whose file is missing fails and names it.

# libs_preload_path: the shim's path in the guest, or fail.
libs_preload_path() {
  for d in /host/libs /host/bin; do
    [ -f "$d/libmltcp_preload.so" ] && { echo "$d/libmltcp_preload.so"; return 0; }
  done
  fail "libmltcp_preload.so not shipped (ci/vm-run --extra target/release/libmltcp_preload.so)"
}

test_preload_iperf3() {
  so=$(libs_preload_path) || exit 1
  out=$OUT/preload_iperf3.json
  vm_in_snd env LD_PRELOAD="$so" MLTCP_CC="$ALG" MLTCP_PORTS=5201 \
    iperf3 -c "$VM_DST" --json -t 4 > "$out" 2> "$OUT/preload_iperf3.err" &
  pid=$!
  # While it runs: its sockets as ss sees them (polled: the start is slow under TCG).
  ss_line="" i=0
  while [ $i -lt 30 ]; do
    sleep 0.1
    ss_line=$(vm_in_snd ss -tinH "( dport = :5201 )" 2>/dev/null | tr '\n' ' ')
    echo "$ss_line" | grep -q ESTAB && echo "$ss_line" | grep -qw "$ALG" && break
    i=$((i + 1))
  done
  wait "$pid" || fail "iperf3 under the shim failed: $(cat "$OUT/preload_iperf3.err")"
  cc=$(vm_iperf_cc "$out")
  note "iperf3 (no -C) under the shim: sender_tcp_congestion=$cc; ss: $(echo "$ss_line" | grep -o "$ALG" | head -n 1)"
  [ "$cc" = "$ALG" ] || fail "iperf3 reports congestion control '$cc', not $ALG"
  echo "$ss_line" | grep -qw "$ALG" || fail "ss -ti does not show $ALG: $ss_line"
}

test_preload_unknown_cc() {
  so=$(libs_preload_path) || exit 1
  out=$OUT/preload_unknown.json err=$OUT/preload_unknown.err
  vm_in_snd env LD_PRELOAD="$so" MLTCP_CC=no_such_cc iperf3 -c "$VM_DST" --json -t 1 > "$out" 2> "$err" \
    || fail "iperf3 failed with MLTCP_CC=no_such_cc: $(cat "$err")"
  cc=$(vm_iperf_cc "$out")
  n=$(grep -c "no_such_cc" "$err" || true)
  note "MLTCP_CC=no_such_cc: ran on '$cc'; shim lines about it: $n ($(head -n 1 "$err"))"
  [ -n "$cc" ] && [ "$cc" != no_such_cc ] || fail "iperf3 reports congestion control '$cc'"
  [ "$n" = 1 ] || fail "the shim said $n times that no_such_cc is unavailable (want exactly once)"
}

# libs_poll_ss PORT ALG FILE PID: `ss -ti` of the job's sockets on PORT (server in rcv, clients in
# snd) into FILE. The connections come up a while after the processes start under TCG on a busy
# host: polls every 0.2 s, while PID runs and 30 s at most, until all four sockets show ALG,
# keeping the last view.
libs_poll_ss() {
  sleep 0.5
  _i=0
  while :; do
    { vm_in_rcv ss -tinH "( sport = :$1 )"; vm_in_snd ss -tinH "( dport = :$1 )"; } > "$3" 2>&1
    [ "$(grep -cE "^[[:space:]]+$2( |\$)" "$3")" -ge 4 ] && break
    _i=$((_i + 1)); [ $_i -lt 150 ] && kill -0 "$4" 2>/dev/null || break
    sleep 0.2
  done
}

test_libzmq_ps() {
  command -v mltcp-ps-test >/dev/null 2>&1 \
    || fail "mltcp-ps-test not shipped (ci/build-libzmq.sh; ci/vm-run --extra PREFIX/bin/mltcp-ps-test)"
  command -v mltcp-progress-dump >/dev/null 2>&1 || fail "mltcp-progress-dump not on PATH (ci/vm-bins.txt)"
  w=/tmp/libzmq-ps
  rm -rf "$w"; mkdir -p "$w"
  iters=10 bytes=300000 compute_ms=100 port=5601
  export MLTCP_PROGRESS_DIR=$w/regions MLTCP_JOB_ID=pstest MLTCP_CC="$ALG" MLTCP_WORLD_SIZE=3
  vm_in_rcv env MLTCP_ROLE=ps MLTCP_RANK=0 MLTCP_BYTES_PER_ITER=$((2 * bytes)) \
    mltcp-ps-test server "tcp://$VM_DST:$port" 2 $iters $bytes > "$w/r0.out" 2> "$w/r0.err" &
  p0=$!
  sleep 0.5
  vm_in_snd env MLTCP_ROLE=worker MLTCP_RANK=1 MLTCP_BYTES_PER_ITER=$bytes \
    mltcp-ps-test worker "tcp://$VM_DST:$port" $iters $bytes $compute_ms > "$w/r1.out" 2> "$w/r1.err" &
  p1=$!
  vm_in_snd env MLTCP_ROLE=worker MLTCP_RANK=2 MLTCP_BYTES_PER_ITER=$bytes \
    mltcp-ps-test worker "tcp://$VM_DST:$port" $iters $bytes $compute_ms > "$w/r2.out" 2> "$w/r2.err" &
  p2=$!
  libs_poll_ss "$port" "$ALG" "$w/ss" $p0
  mltcp-progress-dump "$w/regions" > "$w/dump.running" 2>&1
  for p in $p0 $p1 $p2; do wait "$p" || fail "a process of the job failed: $(cat "$w"/r*.err | head -n 5)"; done
  unset MLTCP_PROGRESS_DIR MLTCP_JOB_ID MLTCP_CC MLTCP_WORLD_SIZE
  cp "$w"/ss "$w"/dump.running "$OUT/" 2>/dev/null
  est=$(grep -c '^ESTAB' "$w/ss" || true)
  ncc=$(grep -cE "^[[:space:]]+$ALG( |\$)" "$w/ss" || true)
  note "ss: $est established sockets on port $port, $ncc with $ALG"
  [ "$est" = 4 ] || fail "expected 4 established sockets (2 per namespace), ss shows $est: $(cat "$w/ss")"
  [ "$ncc" = 4 ] || fail "expected $ALG on all 4 sockets, ss shows $ncc: $(cat "$w/ss")"
  mltcp-progress-dump "$w/regions" > "$w/dump" 2>&1 || fail "mltcp-progress-dump failed: $(cat "$w/dump")"
  cp "$w/dump" "$OUT/libzmq_ps.dump"
  for r in 0 1 2; do
    line=$(grep "/pstest.$r.region " "$w/dump") || fail "no progress region of rank $r: $(cat "$w/dump")"
    grep -q "paradigm=ParameterServer" "$w/dump.running" || fail "the regions did not say ParameterServer while running"
    it=$(echo "$line" | sed -n 's/.* iteration=\([0-9]*\) .*/\1/p')
    total=$(echo "$line" | sed -n 's/.* total_bytes=\([0-9]*\) .*/\1/p')
    sent=$(sed -n 's/^done iters=[0-9]* sent=\([0-9]*\)$/\1/p' "$w/r$r.out")
    note "rank $r: region iteration $it, total_bytes $total; the job sent $sent payload bytes"
    [ "$it" = "$iters" ] || fail "rank $r: region iteration '$it', the job ran $iters"
    [ -n "$sent" ] || fail "rank $r did not finish: $(tail -n 1 "$w/r$r.out")"
    [ "$total" -ge "$sent" ] && [ "$total" -le $((sent + iters * 64 + 1024)) ] \
      || fail "rank $r: region total_bytes $total, the job sent $sent payload bytes (+ framing)"
  done
  [ "$(grep -c 'kind=PsPush' "$w/dump" || true)" = 2 ] || fail "expected 2 PsPush flows: $(cat "$w/dump")"
  [ "$(grep -c 'kind=PsPull' "$w/dump" || true)" = 2 ] || fail "expected 2 PsPull flows: $(cat "$w/dump")"
}

test_libzmq_ecn() {
  command -v mltcp-ps-test >/dev/null 2>&1 \
    || fail "mltcp-ps-test not shipped (ci/build-libzmq.sh; ci/vm-run --extra PREFIX/bin/mltcp-ps-test)"
  # The workers' pushes (snd -> rcv) cross ecn.sh's marking bottleneck: tbf 100 Mbit/s with an
  # fq_codel child marking CE above 1 ms. Only ECT packets can be marked, so CE echoes
  # (TcpExt TCPDeliveredCE in snd) prove that the connections negotiated ECN.
  trap 'ecn_unshape' EXIT
  ecn_shape || fail "tc setup failed"
  w=/tmp/libzmq-ecn
  rm -rf "$w"; mkdir -p "$w"
  iters=20 bytes=1000000 compute_ms=50 port=5602
  ce0=$(ecn_delivered_ce)
  vm_in_rcv env MLTCP_CC="$ALG_DCTCP" mltcp-ps-test server "tcp://$VM_DST:$port" 2 $iters $bytes > "$w/r0.out" 2> "$w/r0.err" &
  p0=$!
  sleep 0.5
  vm_in_snd env MLTCP_CC="$ALG_DCTCP" mltcp-ps-test worker "tcp://$VM_DST:$port" $iters $bytes $compute_ms > "$w/r1.out" 2> "$w/r1.err" &
  p1=$!
  vm_in_snd env MLTCP_CC="$ALG_DCTCP" mltcp-ps-test worker "tcp://$VM_DST:$port" $iters $bytes $compute_ms > "$w/r2.out" 2> "$w/r2.err" &
  p2=$!
  libs_poll_ss "$port" "$ALG_DCTCP" "$w/ss" $p0
  for p in $p0 $p1 $p2; do wait "$p" || fail "a process of the job failed: $(cat "$w"/r*.err | head -n 5)"; done
  ce=$(( $(ecn_delivered_ce) - ce0 ))
  ncc=$(grep -cE "^[[:space:]]+$ALG_DCTCP( |\$)" "$w/ss" || true)
  note "$ncc sockets with $ALG_DCTCP; $ce CE echoes on the workers' pushes"
  [ "$ncc" = 4 ] || fail "expected $ALG_DCTCP on all 4 sockets, ss shows $ncc: $(cat "$w/ss")"
  [ "$ce" -gt 0 ] || fail "no CE echo: the connections did not negotiate ECN"
}
