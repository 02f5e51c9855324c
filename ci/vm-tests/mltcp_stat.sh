#!/bin/sh
# ci/vm-tests/mltcp_stat.sh: in-VM test of `mltcp-stat` (kmod/mltcp-stat) against tcp_mltcp.ko:
# the MLTCP block the module reports over sock_diag must show the training iterations of a flow
# that sends 6 bursts of 2 MB, separated by 1 s pauses, through ONE connection.
#
# How it is meant to be called: as root in the guest of ci/vm-run, by a POSIX sh (the guest's
# /bin/sh is dash, see ci/build-initramfs.sh; nc, head, sleep, mkfifo are busybox applets), with
# `mltcp-stat` on PATH through /host/bin (ci/vm-bins.txt lists it):
#
#   . mltcp_stat.sh                       # defines test_mltcp_stat_iterations, runs nothing
#   test_mltcp_stat_iterations            # returns 0 (pass) or 1 (fail, reason printed)
#
# In the suite (ci/vm-tests/suite.sh) add it like the other tests: paste the functions below (or
# source this file: ci/vm-run ships only ci/vm-lib.sh under /host/ci today) and register
#
#   run_test mltcp_stat_iterations
#
# before `run_test dmesg_clean`. Inside the suite it uses the suite's helpers when they exist:
# `fail REASON` (so run_test reports `not ok - mltcp_stat_iterations: REASON`), `skip` in
# --substitute mode (bbr has no MLTCP block), `note`, $ALG (the algorithm; default mltcp) and
# $OUT (where the samples go; default /results). Standalone, it prints
# `mltcp_stat_iterations: FAIL: REASON` and returns 1.
#
# What it does: makes its own namespace pair (mstat_s 10.77.0.1 <-veth-> mstat_r 10.77.0.2, so it
# does not touch vm-lib.sh's snd/rcv), sets `net.ipv4.tcp_congestion_control=mltcp` in the
# sender's namespace, starts `nc -l` in the receiver's, and sends
#   (for i in 1 2 3 4 5 6; do head -c 2000000 /dev/zero; sleep 0.2; done) | nc 10.77.0.2 PORT
# While that runs, `mltcp-stat --json --watch 100` samples the sender's namespace every 100 ms
# (one process, so no fork per sample stalls the sender for more than the 20 ms idle gap); the
# samples cover the last burst, before it ends, and the last sample of the connection that
# carries the MLTCP block is judged: a sample taken while the sender's socket is torn down, after
# the module's release has run, legitimately has none (seen once in CI: the very last sample,
# 100 ms after the sender exited, had "mltcp":null and the one before it the full block).
# Pass: the connection was listed, every sample shows algorithm mltcp, and the judged sample has
# iterations >= 2 and bytes_per_iteration within 20% of 2,000,000. Then it restores cubic and
# deletes the namespaces.
#
# Why iterations >= 2: the module counts an iteration when a send follows an idle gap longer than
# idle_gap_us (20 ms) and 2 smoothed RTTs; the first burst is not aligned (no gap before it), so
# bursts 2, 3, ... are measured as bursts 3, 4, ... start: 3-4 by the last burst.
#
# Receiver stdin: busybox nc half-closes the connection (shutdown SHUT_WR) on EOF of its stdin,
# and the sending nc exits on that EOF. A background job's stdin is /dev/null, so the receiver
# reads a FIFO opened read-write instead (`<>`), which never reaches EOF.
#
# Tunables (environment): MLTCP_STAT_PORT (5301), MLTCP_STAT_GAP (1.0, seconds between bursts),
# MLTCP_STAT_TIMEOUT (60, seconds before the sender is given up on).
# Files: $OUT/mltcp_stat.jsonl (the connection's samples; /tmp when $OUT is not a directory).

_MSTAT_NS_S=mstat_s _MSTAT_NS_R=mstat_r _MSTAT_DEV_S=mstat-s _MSTAT_DEV_R=mstat-r
_MSTAT_SRC=10.77.0.1 _MSTAT_DST=10.77.0.2
_MSTAT_BURST=2000000

_mstat_note() {
  case "$(type note 2>/dev/null)" in *function*) note "$*" ;; *) echo "# $*" ;; esac
}

# _mstat_cleanup: stop the nc processes, restore cubic, delete the namespaces. Idempotent.
_mstat_cleanup() {
  [ -n "${_mstat_old_gap:-}" ] && echo "$_mstat_old_gap" > "$_mstat_gap_param"
  [ -n "${_mstat_old_weight:-}" ] && echo "$_mstat_old_weight" > "$_mstat_weight_param"
  _mstat_old_gap="" _mstat_old_weight=""
  [ -n "${_mstat_snd_pid:-}" ] && kill "$_mstat_snd_pid" 2>/dev/null
  [ -n "${_mstat_rcv_pid:-}" ] && kill "$_mstat_rcv_pid" 2>/dev/null
  [ -n "${_mstat_stat_pid:-}" ] && kill "$_mstat_stat_pid" 2>/dev/null
  _mstat_snd_pid="" _mstat_rcv_pid="" _mstat_stat_pid=""
  ip netns exec "$_MSTAT_NS_S" sysctl -q -w net.ipv4.tcp_congestion_control=cubic 2>/dev/null
  ip netns del "$_MSTAT_NS_S" 2>/dev/null
  ip netns del "$_MSTAT_NS_R" 2>/dev/null
  rm -f "${_mstat_fifo:-/nonexistent}" "${_mstat_done:-/nonexistent}" "${_all:-/nonexistent}" \
    "${_err:-/nonexistent}"
  return 0
}

# _mstat_fail REASON: clean up, then report through the suite's `fail` (which exits the test's
# subshell) when there is one, else print the reason; callers `return 1` after it.
_mstat_fail() {
  _mstat_cleanup
  case "$(type fail 2>/dev/null)" in *function*) fail "$*" ;; esac
  echo "mltcp_stat_iterations: FAIL: $*"
}

# _mstat_field LINE KEY: the number after "KEY": in the JSON line (empty when absent or null).
_mstat_field() { echo "$1" | grep -o "\"$2\":[0-9.]*" | head -n 1 | cut -d: -f2; }

test_mltcp_stat_iterations() {
  _alg=${ALG:-mltcp}
  _port=${MLTCP_STAT_PORT:-5301}
  _gap=${MLTCP_STAT_GAP:-1.0}
  # Under qemu TCG on a busy host the guest can be descheduled for 100+ ms inside a burst (seen:
  # the sender or the receiver stalls, the flow drains, the next send looks like a new
  # iteration), which the default 20 ms idle gap counts as an iteration boundary. Use 1 s pauses
  # and idle_gap_us = 500 ms for this test (a run-time parameter write too); _mstat_cleanup
  # restores the old value. Such a stall can still split one burst now and then; with
  # ewma_weight_fx = 1024 the estimate is the last completed iteration alone, so one split
  # earlier in the run does not fail the check (the EWMA itself is unit-tested in mltcp-math).
  _mstat_gap_param=/sys/module/tcp_mltcp/parameters/idle_gap_us
  _mstat_weight_param=/sys/module/tcp_mltcp/parameters/ewma_weight_fx
  if [ -w "$_mstat_gap_param" ]; then
    _mstat_old_gap=$(cat "$_mstat_gap_param")
    echo 500000 > "$_mstat_gap_param" || { _mstat_fail "cannot set idle_gap_us=500000"; return 1; }
    _mstat_old_weight=$(cat "$_mstat_weight_param")
    echo 1024 > "$_mstat_weight_param" || { _mstat_fail "cannot set ewma_weight_fx=1024"; return 1; }
  fi
  _timeout=${MLTCP_STAT_TIMEOUT:-60}
  _out=${OUT:-/results}
  [ -d "$_out" ] || _out=/tmp
  _samples=$_out/mltcp_stat.jsonl _all=/tmp/mstat-all.jsonl _err=/tmp/mstat-stat.err
  _mstat_fifo=/tmp/mstat-rcv.fifo _mstat_done=/tmp/mstat-send.done
  _mstat_snd_pid="" _mstat_rcv_pid="" _mstat_stat_pid=""

  if [ "${SUBSTITUTE:-0}" = 1 ]; then
    case "$(type skip 2>/dev/null)" in *function*) skip "--substitute: $_alg has no MLTCP block" ;; esac
    echo "mltcp_stat_iterations: skipped (--substitute)"; return 0
  fi
  command -v mltcp-stat >/dev/null 2>&1 \
    || { _mstat_fail "mltcp-stat not on PATH (is it in ci/vm-bins.txt?)"; return 1; }
  grep -qw "$_alg" /proc/sys/net/ipv4/tcp_available_congestion_control \
    || { _mstat_fail "$_alg not in tcp_available_congestion_control (module not loaded?)"; return 1; }

  # --- the namespace pair and the receiver ---
  _mstat_cleanup
  ip netns add "$_MSTAT_NS_S" && ip netns add "$_MSTAT_NS_R" \
    && ip link add "$_MSTAT_DEV_S" netns "$_MSTAT_NS_S" type veth peer name "$_MSTAT_DEV_R" netns "$_MSTAT_NS_R" \
    && ip -n "$_MSTAT_NS_S" addr add "$_MSTAT_SRC/24" dev "$_MSTAT_DEV_S" \
    && ip -n "$_MSTAT_NS_R" addr add "$_MSTAT_DST/24" dev "$_MSTAT_DEV_R" \
    && ip -n "$_MSTAT_NS_S" link set lo up && ip -n "$_MSTAT_NS_R" link set lo up \
    && ip -n "$_MSTAT_NS_S" link set "$_MSTAT_DEV_S" up && ip -n "$_MSTAT_NS_R" link set "$_MSTAT_DEV_R" up \
    || { _mstat_fail "cannot set up namespaces $_MSTAT_NS_S/$_MSTAT_NS_R"; return 1; }
  # A non-initial namespace may only default to algorithms in tcp_allowed_congestion_control.
  _allowed=$(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control)
  case " $_allowed " in *" $_alg "*) ;; *)
    sysctl -q -w net.ipv4.tcp_allowed_congestion_control="$_allowed $_alg" ;; esac
  ip netns exec "$_MSTAT_NS_S" sysctl -q -w net.ipv4.tcp_congestion_control="$_alg" \
    || { _mstat_fail "sysctl -w net.ipv4.tcp_congestion_control=$_alg failed"; return 1; }
  rm -f "$_mstat_done"
  command -v mltcp-burst >/dev/null 2>&1 \
    || { _mstat_fail "mltcp-burst not on PATH (is it in ci/vm-bins.txt?)"; return 1; }
  ip netns exec "$_MSTAT_NS_R" mltcp-burst sink --listen "$_MSTAT_DST:$_port" &
  _mstat_rcv_pid=$!
  _i=0
  while ! ip netns exec "$_MSTAT_NS_R" ss -ltn 2>/dev/null | grep -q ":$_port "; do
    _i=$((_i + 1))
    [ $_i -lt 50 ] || { _mstat_fail "mltcp-burst sink did not start listening on $_port"; return 1; }
    sleep 0.1
  done

  # --- mltcp-stat samples every 100 ms (one process: no fork per sample perturbing the flow) ---
  ip netns exec "$_MSTAT_NS_S" mltcp-stat --json --watch 100 > "$_all" 2> "$_err" &
  _mstat_stat_pid=$!

  # --- the sender: 6 bursts through one connection; $_mstat_done appears after the last ---
  _gap_ms=$(echo "$_gap" | awk '{ printf "%d", $1 * 1000 }')
  ( ip netns exec "$_MSTAT_NS_S" mltcp-burst send --to "$_MSTAT_DST:$_port" --bursts 6 \
      --bytes "$_MSTAT_BURST" --gap-ms "$_gap_ms" > /tmp/mstat-send.log 2>&1 && : > "$_mstat_done" ) &
  _mstat_snd_pid=$!

  _t0=$(date +%s)
  while [ ! -f "$_mstat_done" ] && kill -0 "$_mstat_snd_pid" 2>/dev/null; do
    if [ $(( $(date +%s) - _t0 )) -ge "$_timeout" ]; then
      _mstat_fail "sender still running after ${_timeout}s"; return 1
    fi
    kill -0 "$_mstat_stat_pid" 2>/dev/null \
      || { _mstat_fail "mltcp-stat --json --watch 100 exited: $(cat "$_err")"; return 1; }
    sleep 0.1
  done
  sleep 0.1 # one more sample
  kill "$_mstat_stat_pid" 2>/dev/null; wait "$_mstat_stat_pid" 2>/dev/null; _mstat_stat_pid=""
  [ -s "$_err" ] && { _mstat_fail "mltcp-stat --json --watch 100 wrote errors: $(cat "$_err")"; return 1; }
  _sender_done=0
  [ -f "$_mstat_done" ] && _sender_done=1
  grep "\"remote\":\"$_MSTAT_DST:$_port\"" "$_all" > "$_samples"
  _n=$(wc -l < "$_samples" | tr -d ' ')
  _last=$(tail -n 1 "$_samples")
  _judged=$(grep '"mltcp":{' "$_samples" | tail -n 1)
  _noblock=$(grep -c '"mltcp":null' "$_samples")
  _maxit=$(grep -o '"iterations":[0-9]*' "$_samples" | cut -d: -f2 | sort -n | tail -n 1)

  # --- verdict on the last sample taken while the bursts ran ---
  _mstat_note "$_n samples (in $_samples, $_noblock without the MLTCP block), max iterations $_maxit; last: $_last"
  if [ "$_sender_done" = 0 ]; then
    _mstat_fail "the sender ended before its 6 bursts: $(cat /tmp/mstat-send.log)"; return 1
  fi
  [ -n "$_last" ] || { _mstat_fail "mltcp-stat never listed the connection to $_MSTAT_DST:$_port"; return 1; }
  _other=$(grep -v "\"cc\":\"$_alg\"" "$_samples" | head -n 1)
  [ -z "$_other" ] || { _mstat_fail "connection does not use $_alg: $_other"; return 1; }
  [ -n "$_judged" ] \
    || { _mstat_fail "no MLTCP block (attribute 0x2000) in any of the $_n answers; last: $_last"; return 1; }
  _it=$(_mstat_field "$_judged" iterations)
  _bpi=$(_mstat_field "$_judged" bytes_per_iteration)
  [ -n "$_it" ] && [ "$_it" -ge 2 ] \
    || { _mstat_fail "iterations = ${_it:-?} (< 2) in the last sample with the block: $_judged"; return 1; }
  _lo=$((_MSTAT_BURST * 8 / 10)) _hi=$((_MSTAT_BURST * 12 / 10))
  [ -n "$_bpi" ] && [ "$_bpi" -ge "$_lo" ] && [ "$_bpi" -le "$_hi" ] \
    || { _mstat_fail "bytes_per_iteration = ${_bpi:-?}, not within 20% of $_MSTAT_BURST: $_judged"; return 1; }
  _mstat_note "ok: iterations $_it, bytes_per_iteration $_bpi"
  _mstat_cleanup
  return 0
}
