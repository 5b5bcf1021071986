#!/usr/bin/env bash
# Sweeps (`ghfit run`, 2 ranks):
#  1. one window with a constant column and one with a NaN row: their fits are
#     recorded with status "failed: ...", NaN parameters and log-likelihood
#     (/fits and /summary), every other fit runs and is the same as in a sweep
#     without the bad windows; exit 3 with one error line counting them;
#  2. tol and p values that print alike with %g get distinct fit names (the
#     others keep theirs); names that would still be too long: exit 2 when
#     the job is expanded, one line naming the values, nothing written.
# usage: faults_sweep.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
PY=/usr/bin/python3
SRC=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$W"; mkdir -p "$W/in"; cd "$W"
. "$SRC/tests/faults_lib.sh"

"$PY" - <<'PY'
import h5py, numpy as np
r = np.random.default_rng(7)
x = r.standard_t(6, size=(5000, 3)) * [1.0, 2.0, 0.5] + [0.1, -0.2, 0.0]
with h5py.File("in/good.h5", "w") as f: f["X"] = x
x[1000:2000, 1] = 4.0          # window 1: a constant column
x[3500, 2] = float("nan")      # window 3: a NaN
with h5py.File("in/bad.h5", "w") as f: f["X"] = x
PY
snapshot in > in.sha
cat > sw.yaml <<'YAML'
data: in/bad.h5
out: sw.h5
family: [nig, gh]
tol: 1e-8
windows: {start: 0, length: 1000, count: 5}
warm_start: true
quiet: true
YAML
# --- 1. fits that fail on their data ------------------------------------------------------
run_t 120 r1.txt mpirun -np 2 "$G" run sw.yaml; rc=$?
outcome "two bad windows of five" $rc 3 r1.txt error \
  "^ghfit: error: 4 of 10 fits failed \(their status in sw.h5 starts with 'failed:'\); the first: nig_tol1e-08_s1_w000001: in/bad.h5:/X rows 1000..1999 \(fit nig_tol1e-08_s1_w000001\): column 1 is constant"
[ "$(h5ls sw.h5/fits 2>/dev/null | grep -c Group)" = 10 ] && ok "the result file holds all 10 fits" || die "the result file does not hold 10 fits"
for fam in nig gh; do
  pre=$([ $fam = gh ] && echo gh_pfree || echo nig)
  for w in 1 3; do
    n=${pre}_tol1e-08_s1_w00000$w
    st=$("$H" sw.h5 /fits/$n status); ll=$("$H" sw.h5 /fits/$n loglik); mu=$("$H" sw.h5 /fits/$n/params/mu | head -1)
    case "$st" in failed:*) ;; *) die "$n: status '$st'";; esac
    [ "$ll" = nan ] && [ "$mu" = nan ] && ok "$n: $st (loglik $ll, mu $mu)" || die "$n: loglik '$ll', mu '$mu' (NaN expected)"
  done
done
grep -q "^failed: rows 3000..3999: in/bad.h5:/X: 1 row contains non-finite values (first at row 3500)" <("$H" sw.h5 /fits/nig_tol1e-08_s1_w000003 status) \
  && ok "the NaN window names its non-finite values" || die "the NaN window's status: $("$H" sw.h5 /fits/nig_tol1e-08_s1_w000003 status)"
"$PY" - sw.h5 <<'PY' && ok "/summary: 4 rows with status 'failed: ...' and NaN log-likelihood" || die "/summary lacks the failed status"
import sys, math, h5py
with h5py.File(sys.argv[1], "r") as f:
    s = f["summary"][()]
bad = [r for r in s if r["status"].decode().startswith("failed: ")]
sys.exit(0 if len(bad) == 4 and all(math.isnan(r["loglik"]) for r in bad) and len(s) == 10 else 1)
PY
"$G" summary sw.h5 > sum.txt 2>&1 && [ "$(grep -c ' fail ' sum.txt)" = 4 ] && ok "ghfit summary marks the 4 failed fits" \
  || { cat sum.txt; die "ghfit summary"; }
# the good windows are fitted as in a sweep of the same windows of clean data
# (window 0 is never warm-started, windows 2 and 4 start cold after a failed one)
sed 's#in/bad.h5#in/good.h5#; s#sw.h5#good.h5#' sw.yaml > good.yaml
run_t 120 r2.txt mpirun -np 2 "$G" run good.yaml || { cat r2.txt; die "clean sweep"; }
for n in nig_tol1e-08_s1_w000000 gh_pfree_tol1e-08_s1_w000000; do
  same_fit good.h5 sw.h5 $n && ok "$n: the same as in the clean sweep (bitwise)" || die "$n differs from the clean sweep"
done
for n in nig_tol1e-08_s1_w000002 gh_pfree_tol1e-08_s1_w000004; do
  ll=$("$H" sw.h5 /fits/$n loglik); c=$("$H" sw.h5 /fits/$n converged)
  [ "$c" = 1 ] && ok "$n after a failed window: converged, loglik $ll" || die "$n: converged '$c'"
done
ls *.tmp* sw.h5.* > /dev/null 2>&1 && die "temporary files left"

# --- 2. fit names -------------------------------------------------------------------------------
cat > nm.yaml <<'YAML'
data: in/good.h5
out: nm.h5
family: gh
p: [free, 0.5, 0.500000001]
tol: [1e-8, 1.0000001e-8, 1e-6]
max_iter: 2
windows: {length: 1000, count: 2}
quiet: true
YAML
run_t 120 n1.txt mpirun -np 2 "$G" run nm.yaml; rc=$?
[ $rc = 0 ] && [ "$(h5ls nm.h5/fits | grep -c Group)" = 18 ] && ok "18 fits with distinct names" || { cat n1.txt; die "names: exit $rc"; }
for n in gh_pfree_tol1e-08_s1_w000000 gh_pfree_tol1.0000001e-08_s1_w000001 gh_p0.5_tol1e-06_s1_w000000 \
         gh_p0.500000001_tol1e-08_s1_w000001; do
  "$H" nm.h5 /fits/$n n_iter > /dev/null 2>&1 && ok "fit $n" || die "no fit $n"
done
cat > long.yaml <<'YAML'
data: in/good.h5
out: long.h5
family: gh
p: [-0.1234567890123456, -0.1234567890123457]
tol: [1.234567890123456e-8, 1.234567890123457e-8]
seed: 9223372036854775807
windows: {length: 1000, count: 2}
YAML
t0=$(date +%s)
run_t 60 n2.txt mpirun -np 2 "$G" run long.yaml; rc=$?
outcome "names too long to tell apart" $rc 2 n2.txt error \
  "^ghfit: error: long.yaml: the fit name gh_p-0.1234567890123456_tol1.234567890123456e-08_s9223372036854775807_w000001 \(p -0.1234567890123456, tol 1.2345678901234559e-08, seed 9223372036854775807\) is longer than 63 characters"
[ $(( $(date +%s) - t0 )) -le 20 ] || die "the name check came late ($(( $(date +%s) - t0 )) s)"
ls long.h5* > /dev/null 2>&1 && die "output written"

same_files "inputs" in.sha in
[ $fail -eq 0 ] && echo "faults_sweep: all passed" || echo "faults_sweep: FAILED"
exit $fail
