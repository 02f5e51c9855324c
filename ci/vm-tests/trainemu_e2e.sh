#!/bin/sh
# ci/vm-tests/trainemu_e2e.sh: in-VM end-to-end check of the training-traffic emulator `trainemu`:
# jobs run on real sockets between network namespaces, results are written, and
# every iteration of every worker is accounted for. A behaviour check, not a speed check.
#
# How it is meant to be called: as root in the guest of ci/vm-run, by a POSIX sh (dash), with
# `trainemu` on PATH through /host/bin (ci/vm-bins.txt lists it):
#
#   . trainemu_e2e.sh          # defines test_trainemu_e2e, runs nothing
#   test_trainemu_e2e          # returns 0 (pass) or 1 (fail, reason printed)
#
# or alone: `ci/vm-run ci/vm-tests/trainemu_e2e.sh --run` (last line `N passed, M failed`).
#
# In the suite (ci/vm-tests/suite.sh): paste or source it and `run_test trainemu_e2e` before
# `run_test dmesg_clean`. It uses the suite's `fail` (so run_test reports
# `not ok - trainemu_e2e: REASON`), `note`, $OUT (results; default /results) and, in
# --substitute mode ($SUBSTITUTE=1), runs cubic + reno instead of cubic + mltcp.
# Standalone it prints `trainemu_e2e: FAIL: REASON` and returns 1.
#
# What it checks, on the built-in scenario e2e.toml (ci/scenarios/e2e.toml: hosts h1, h2, h3; a
# ring all-reduce job `ring3` with 3 workers and a parameter-server job `ps2` with 2 workers and
# its PS on h3; 6 iterations; solo runs of 3 iterations):
#   1. an invalid scenario (a worker on an unknown host) is refused with exit status 2 and an
#      error naming the file, the field and the value, and creates nothing;
#   2. `trainemu run` exits 0 and writes meta.json and, per run (solo-ring3, solo-ps2, cubic and
#      mltcp), iterations.jsonl, flows.json and samples.csv;
#   3. every (job, role, worker, iteration) appears exactly once: per together run 3x6 ring3
#      worker records, 2x6 ps2 worker records and 6 PS records (solo: 3 iterations);
#   4. every record carries the expected payload bytes (ring3: 2(W-1)/W of its gradient summed
#      over the workers = 2(W-1) G per iteration; ps2: G each way per worker);
#   5. flows.json shows the run's congestion control read back from every socket, samples.csv has
#      samples, and `trainemu report --no-plots` prints the table.
# Its namespaces (te-sw, te-h1..te-h3) are deleted by trainemu at the end.

_te_note() {
  case "$(type note 2>/dev/null)" in *function*) note "$*" ;; *) echo "# $*" ;; esac
}
_te_fail() {
  case "$(type fail 2>/dev/null)" in *function*) fail "$*" ;; esac
  echo "trainemu_e2e: FAIL: $*"
}

# _te_count FILE PATTERN: lines of FILE matching the fixed string PATTERN.
_te_count() { grep -cF "$2" "$1" 2>/dev/null || true; }

# _te_check_run DIR RUN JOB ROLE WORKERS ITERS: each (worker, iter) of JOB/ROLE exactly once.
_te_check_run() {
  _f=$1/runs/$2/s1/iterations.jsonl
  [ -s "$_f" ] || { echo "run $2: $_f missing or empty"; return 1; }
  _n=$(grep -F "\"job\":\"$3\",\"role\":\"$4\"" "$_f" | grep -o '"worker":[0-9]*,"host":"[a-z0-9]*","iter":[0-9]*' \
       | sort -u | wc -l | tr -d ' ')
  _all=$(_te_count "$_f" "\"job\":\"$3\",\"role\":\"$4\"")
  _want=$(($5 * $6))
  [ "$_n" = "$_want" ] && [ "$_all" = "$_want" ] \
    || { echo "run $2: job $3 $4 records: $_all lines, $_n distinct (worker, iteration), want $_want"; return 1; }
  return 0
}

test_trainemu_e2e() {
  _out=${OUT:-/results}
  [ -d "$_out" ] || _out=/tmp
  _dir=$_out/trainemu-e2e
  _cc2=mltcp
  [ "${SUBSTITUTE:-0}" = 1 ] && _cc2=reno
  command -v trainemu >/dev/null 2>&1 || { _te_fail "trainemu not on PATH (is it in ci/vm-bins.txt?)"; return 1; }
  grep -qw "$_cc2" /proc/sys/net/ipv4/tcp_available_congestion_control \
    || { _te_fail "$_cc2 not in tcp_available_congestion_control (module not loaded?)"; return 1; }
  rm -rf "$_dir"

  # 1. Refusal before anything starts.
  _bad=/tmp/trainemu-bad.toml
  cat > "$_bad" <<'TOML'
name = "bad"
iterations = 2
ccs = ["cubic"]
[topology]
bottleneck = "h1"
hosts = [ { name = "h1" }, { name = "h2" } ]
[[jobs]]
name = "A"
model = "vgg16"
paradigm = "ring"
workers = ["h1", "h7"]
TOML
  trainemu run --out "$_dir" "$_bad" > /tmp/trainemu-bad.out 2>&1
  _rc=$?
  [ "$_rc" = 2 ] || { _te_fail "invalid scenario: exit status $_rc, want 2: $(cat /tmp/trainemu-bad.out)"; return 1; }
  for _w in "$_bad" "jobs[0].workers[1]" '"h7"'; do
    grep -qF "$_w" /tmp/trainemu-bad.out \
      || { _te_fail "invalid scenario: error does not name $_w: $(cat /tmp/trainemu-bad.out)"; return 1; }
  done
  [ ! -e "$_dir/bad" ] && ! ip netns list 2>/dev/null | grep -q '^te-' \
    || { _te_fail "invalid scenario: something was created before the refusal"; return 1; }
  _te_note "invalid scenario refused: $(head -n 1 /tmp/trainemu-bad.out)"

  # 2. The run.
  trainemu run --seeds 1 --out "$_dir" --ccs "cubic,$_cc2" e2e.toml > /tmp/trainemu-e2e.out 2>&1
  _rc=$?
  sed 's/^/  /' /tmp/trainemu-e2e.out | tail -n 12 | while IFS= read -r l; do _te_note "$l"; done
  [ "$_rc" = 0 ] || { _te_fail "trainemu run e2e.toml exited with $_rc: $(grep -E 'ERROR|error' /tmp/trainemu-e2e.out | head -n 3)"; return 1; }
  _d=$_dir/e2e
  [ -s "$_d/meta.json" ] || { _te_fail "$_d/meta.json missing"; return 1; }
  for _r in solo-ring3 solo-ps2 cubic "$_cc2"; do
    for _f in iterations.jsonl flows.json samples.csv; do
      [ -s "$_d/runs/$_r/s1/$_f" ] || { _te_fail "run $_r: $_f missing or empty"; return 1; }
    done
    [ "$(wc -l < "$_d/runs/$_r/s1/samples.csv")" -gt 10 ] || { _te_fail "run $_r: fewer than 10 throughput samples"; return 1; }
  done

  # 3. Every iteration accounted for.
  _msg=$(_te_check_run "$_d" solo-ring3 ring3 worker 3 3) || { _te_fail "$_msg"; return 1; }
  _msg=$(_te_check_run "$_d" solo-ps2 ps2 worker 2 3) || { _te_fail "$_msg"; return 1; }
  _msg=$(_te_check_run "$_d" solo-ps2 ps2 ps 1 3) || { _te_fail "$_msg"; return 1; }
  for _r in cubic "$_cc2"; do
    _msg=$(_te_check_run "$_d" "$_r" ring3 worker 3 6) || { _te_fail "$_msg"; return 1; }
    _msg=$(_te_check_run "$_d" "$_r" ps2 worker 2 6) || { _te_fail "$_msg"; return 1; }
    _msg=$(_te_check_run "$_d" "$_r" ps2 ps 1 6) || { _te_fail "$_msg"; return 1; }
  done

  # 4. Bytes: ring3 sums to 2(W-1) G per iteration; ps2 workers send and receive G.
  _g_ring=$(tr -d ' \n' < "$_d/meta.json" | grep -o '"name":"ring3","model":"[a-z0-9]*","paradigm":"ring"[^}]*"gradient_bytes":[0-9]*' | grep -o '[0-9]*$')
  _g_ps=$(tr -d ' \n' < "$_d/meta.json" | grep -o '"name":"ps2","model":"[a-z0-9]*","paradigm":"ps"[^}]*"gradient_bytes":[0-9]*' | grep -o '[0-9]*$')
  [ -n "$_g_ring" ] && [ -n "$_g_ps" ] || { _te_fail "cannot read the gradient sizes from meta.json"; return 1; }
  for _r in cubic "$_cc2"; do
    _f=$_d/runs/$_r/s1/iterations.jsonl
    _bad_iter=$(grep -F '"job":"ring3","role":"worker"' "$_f" | sed 's/.*"iter":\([0-9]*\).*"bytes_sent":\([0-9]*\).*/\1 \2/' \
      | awk -v want=$((4 * _g_ring)) '{ s[$1] += $2 } END { for (k in s) if (s[k] != want) print k ": " s[k] " != " want }')
    [ -z "$_bad_iter" ] || { _te_fail "run $_r: ring3 bytes per iteration: $_bad_iter"; return 1; }
    _n=$(grep -F '"job":"ps2","role":"worker"' "$_f" | grep -cF "\"bytes_sent\":$_g_ps,\"bytes_recv\":$_g_ps")
    [ "$_n" = 12 ] || { _te_fail "run $_r: $_n of 12 ps2 worker records carry G = $_g_ps bytes each way"; return 1; }
    # 5. The congestion control read back from every socket.
    _flows=$(grep -c '"id"' "$_d/runs/$_r/s1/flows.json")
    _ok=$(grep -c "\"cc\": \"$_r\"" "$_d/runs/$_r/s1/flows.json")
    [ "$_flows" = 7 ] && [ "$_ok" = 7 ] \
      || { _te_fail "run $_r: flows.json lists $_flows flows, $_ok with cc $_r (want 7 and 7)"; return 1; }
  done
  trainemu report --no-plots "$_d" > /tmp/trainemu-report.out 2>&1 \
    || { _te_fail "trainemu report failed: $(tail -n 3 /tmp/trainemu-report.out)"; return 1; }
  grep -q "^$_cc2 " /tmp/trainemu-report.out || { _te_fail "report has no $_cc2 row: $(cat /tmp/trainemu-report.out)"; return 1; }
  while IFS= read -r l; do _te_note "$l"; done < /tmp/trainemu-report.out
  if ip netns list 2>/dev/null | grep -q '^te-'; then _te_fail "namespaces left behind: $(ip netns list | grep '^te-')"; return 1; fi
  _te_note "ok: 4 runs, every iteration accounted for, bytes and congestion controls as expected"
  return 0
}

# Run directly: `ci/vm-run ci/vm-tests/trainemu_e2e.sh --run` (when sourced, the caller's
# arguments never include --run).
if [ "${1:-}" = --run ]; then
  test_trainemu_e2e && { echo "ok - trainemu_e2e"; echo "1 passed, 0 failed"; exit 0; }
  echo "not ok - trainemu_e2e"; echo "0 passed, 1 failed"; exit 1
fi
