#!/bin/sh
# ci/scenarios/ccp-overhead-compare.sh: before/after table of two ccp-overhead.sh runs (host side).
#
#   ci/scenarios/ccp-overhead-compare.sh BEFORE_DIR AFTER_DIR
#
# BEFORE_DIR and AFTER_DIR are `ci/vm-run --results` directories of ci/scenarios/ccp-overhead.sh
# (e.g. the same commit's binaries with two builds of the module: MLTCP_KMOD_SRC=<old kmod/>
# for the first). For each kind: mean CPU s per GB over rounds, before and after, and the
# relative change after/before - 1 with a 95 % Welch t interval (the two runs are separate VMs,
# so rounds are not paired across them). For each within-run comparison of ccp-overhead.sh
# (per-round ratios, paired within a run): its mean before and after, and the change with a
# Welch interval.
set -eu
[ $# -eq 2 ] || { sed -n '2,12p' "$0"; exit 2; }
b=$1/ccp-overhead/runs.txt a=$2/ccp-overhead/runs.txt
[ -f "$b" ] && [ -f "$a" ] || { echo "no ccp-overhead/runs.txt in $1 or $2" >&2; exit 1; }
awk '
  function tq(df) {  # two-sided 95 % t quantile, df rounded down (>= 30: normal-ish)
    split("12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228 2.201 2.179 2.160 2.145 2.131 2.120 2.110 2.101 2.093 2.086 2.080 2.074 2.069 2.064 2.060 2.056 2.052 2.048 2.045", T, " ")
    df = int(df); if (df < 1) df = 1
    return (df <= 29) ? T[df] : 2.0
  }
  # welch(prefix_b, prefix_a): mean change a - b and 95 % half-width, from the arrays.
  function stats(k, x, n,    i, s, m, v) {
    s = 0; for (i = 1; i <= n; i++) s += x[k, i]; m = s / n
    v = 0; for (i = 1; i <= n; i++) v += (x[k, i] - m) ^ 2
    M = m; V = (n > 1) ? v / (n - 1) : 0
  }
  FNR == 1 { f++ }
  { k = $2; r = $1; val[f, k, r] = $5; if (!(k in seen)) { seen[k] = 1; order[++nk] = k } ; rounds[f, r] = 1 }
  END {
    printf "%-12s %-22s %-22s %s\n", "kind", "before (CPU s/GB)", "after (CPU s/GB)", "after/before - 1 [95 % Welch]"
    for (j = 1; j <= nk; j++) {
      k = order[j]
      for (g = 1; g <= 2; g++) { n[g] = 0; for (r = 1; r <= 99; r++) if ((g, k, r) in val) { n[g]++; x[g, n[g]] = val[g, k, r] } }
      if (n[1] < 2 || n[2] < 2) continue
      stats(1, x, n[1]); m1 = M; v1 = V; stats(2, x, n[2]); m2 = M; v2 = V
      se = sqrt(v1 / n[1] + v2 / n[2]); d = m2 - m1
      df = (se > 0) ? se ^ 4 / ((v1 / n[1]) ^ 2 / (n[1] - 1) + (v2 / n[2]) ^ 2 / (n[2] - 1)) : 1
      h = tq(df) * se
      printf "%-12s %.4f +- %.4f (n %d)  %.4f +- %.4f (n %d)  %+.2f %% [%+.2f, %+.2f]\n", k, m1, sqrt(v1), n[1], m2, sqrt(v2), n[2], d / m1 * 100, (d - h) / m1 * 100, (d + h) / m1 * 100
    }
    # Within-run paired ratios (per round), before and after.
    split("ccp1:reno mltcp:reno mltcp_cubic:cubic ccpF:ccp1 renoF:reno ccpF:renoF", P, " ")
    printf "\n%-20s %-28s %-28s %s\n", "paired (per round)", "before [95 % t]", "after [95 % t]", "change [95 % Welch]"
    for (p = 1; p <= 6; p++) {
      split(P[p], ab, ":")
      for (g = 1; g <= 2; g++) {
        n[g] = 0
        for (r = 1; r <= 99; r++) if (((g, ab[1], r) in val) && ((g, ab[2], r) in val) && val[g, ab[2], r] > 0) { n[g]++; y[g, n[g]] = (val[g, ab[1], r] / val[g, ab[2], r] - 1) * 100 }
      }
      if (n[1] < 2 || n[2] < 2) continue
      stats(1, y, n[1]); m1 = M; v1 = V; stats(2, y, n[2]); m2 = M; v2 = V
      h1 = tq(n[1] - 1) * sqrt(v1 / n[1]); h2 = tq(n[2] - 1) * sqrt(v2 / n[2])
      se = sqrt(v1 / n[1] + v2 / n[2])
      df = (se > 0) ? se ^ 4 / ((v1 / n[1]) ^ 2 / (n[1] - 1) + (v2 / n[2]) ^ 2 / (n[2] - 1)) : 1
      h = tq(df) * se
      printf "%-20s %+6.2f %% [%+6.2f, %+6.2f]    %+6.2f %% [%+6.2f, %+6.2f]    %+6.2f pp [%+6.2f, %+6.2f]\n", ab[1] " vs " ab[2], m1, m1 - h1, m1 + h1, m2, m2 - h2, m2 + h2, m2 - m1, m2 - m1 - h, m2 - m1 + h
    }
  }' "$b" "$a"
