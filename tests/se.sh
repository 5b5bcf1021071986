#!/usr/bin/env bash
# Standard errors (--se, se: true; src/infer/), the parts that need no Python
# package (python/tests/test_se.py checks the information itself against a
# finite-difference Hessian):
#   * the same SEs and param_cov on 1 and 3 ranks (1e-10 relative);
#   * the interpolated posterior and the exact quadrature, and the threads'
#     own matrices and one shared matrix, give the same SEs (1e-10);
#   * the subset method agrees with the full one where both exist (1e-9),
#     and writes NaN for the off-diagonal entries of Sigma and Cov X;
#   * a boundary fit and a fit on a face of GIG domain: exit 0, status
#     unchanged, NaN SEs with the reason, no param_cov;
#   * job files: `se: true` and `se: subset`, `ghfit run --se`, the config
#     text, NaN SEs for a fit that failed; bad values are one error line and
#     exit 2 with no output.
# usage: se.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$SRC/tests/lib.sh"
PY=/usr/bin/python3
rm -rf "$W"; mkdir -p "$W"; cd "$W"
fail=0
die() { echo "FAIL: $*"; fail=1; }

# values of two datasets, equal to TOL relative (NaN only where the other is NaN)
same() { # file1 file2 dataset tol
  paste <("$H" "$1" "$3") <("$H" "$2" "$3") | awk -v t="$4" -v ds="$3" '
    { n++; a = $1; b = $2
      if (a ~ /nan/ || b ~ /nan/) { if (!(a ~ /nan/ && b ~ /nan/)) { bad = 1; print "  " ds ": NaN in one only: " a " " b } ; next }
      r = (a - b) / (b == 0 ? 1 : b); if (r < 0) r = -r; if (r > m) m = r }
    END { if (n == 0) { print "  " ds ": empty"; exit 1 }
          if (m > t) printf "  %s: relative difference %.3e > %g\n", ds, m, t; exit (bad || m > t) }'
}
SE_SETS="mu gamma sigma p a b mean cov sqrt_ab"

"$G" generate --model gh --dim 3 --n 20000 --seed 9 --p -1 --a 1.5 --b 0.7 --out gh3.h5 >/dev/null || exit 1

# --- 1 and 3 ranks ---------------------------------------------------------
"$G" fit --data gh3.h5 --model gh --out r1.h5 --quiet --se || die "fit --se on 1 rank"
mpirun -np 3 "$G" fit --data gh3.h5 --model gh --out r3.h5 --quiet --se || die "fit --se on 3 ranks"
for s in $SE_SETS; do same r1.h5 r3.h5 /fits/gh/se/$s 1e-10 || die "se/$s differs between 1 and 3 ranks"; done
same r1.h5 r3.h5 /fits/gh/param_cov 1e-9 || die "param_cov differs between 1 and 3 ranks"
[ "$("$H" r1.h5 /fits/gh/se method)" = full ] || die "method is not full"
[ "$("$H" r1.h5 /fits/gh/se computed_on)" = cpu ] || die "computed_on is not cpu"
[ -z "$("$H" r1.h5 /fits/gh/se reason)" ] || die "a reason on a regular fit: $("$H" r1.h5 /fits/gh/se reason)"
cond=$("$H" r1.h5 /fits/gh/se condition_number)
awk -v c="$cond" 'BEGIN { exit !(c > 1 && c < 1e6) }' || die "condition number $cond"
nd=$("$H" r1.h5 /fits/gh/se newton_decrement)
awk -v c="$nd" 'BEGIN { exit !(c >= 0 && c < 1e-3) }' || die "Newton decrement $nd"
echo "1 vs 3 ranks: same SEs; condition number $cond, Newton decrement $nd"

# --- the posterior by quadrature, one shared matrix --------------------------
GHFIT_TEST_SE=exact,shared "$G" fit --data gh3.h5 --model gh --out rx.h5 --quiet --se || die "fit --se (exact, shared)"
for s in $SE_SETS; do same r1.h5 rx.h5 /fits/gh/se/$s 1e-10 || die "se/$s: plan vs quadrature, own vs shared matrix"; done
echo "interpolated posterior and shared matrix: same SEs"

# --- subset vs full ----------------------------------------------------------
for m in gh nig; do
  "$G" fit --data gh3.h5 --model $m --out f_$m.h5 --quiet --se-method full || die "$m --se-method full"
  "$G" fit --data gh3.h5 --model $m --out s_$m.h5 --quiet --se-method subset || die "$m --se-method subset"
  [ "$("$H" s_$m.h5 /fits/$m/se method)" = subset ] || die "$m: method is not subset"
  for s in mu gamma p a b mean sqrt_ab; do same f_$m.h5 s_$m.h5 /fits/$m/se/$s 1e-9 || die "$m subset se/$s"; done
  for s in sigma cov; do # the diagonal agrees, the rest is NaN
    paste <("$H" f_$m.h5 /fits/$m/se/$s) <("$H" s_$m.h5 /fits/$m/se/$s) | awk '
      { i = NR - 1; r = int(i / 3); c = i % 3
        if (r == c) { x = ($1 - $2) / $1; if (x < 0) x = -x; if (x > 1e-9) bad = 1 }
        else if ($2 !~ /nan/) bad = 1 }
      END { exit bad }' || die "$m subset se/$s: not the full diagonal and NaN elsewhere"
  done
  "$H" s_$m.h5 /fits/$m/se reason | grep -q "subset method" || die "$m: the subset is not said in reason"
  n=$("$H" s_$m.h5 /fits/$m/se n_params)
  want=$([ $m = gh ] && echo 12 || echo 11) # mu 3, gamma 3, diag Sigma 3, (p,) a, b
  [ "$n" = "$want" ] || die "$m subset: $n rows in param_cov, expected $want"
done
echo "subset = full on mu, gamma, p, a, b, diag Sigma, E X, diag Cov X"

# --- boundary and face: NaN with the reason, exit 0 --------------------------
"$PY" -c "
import h5py, numpy as np
rng = np.random.default_rng(5)
with h5py.File('gauss.h5', 'w') as f: f['X'] = rng.standard_normal((3000, 2))
" || die "cannot write gauss.h5"
"$G" fit --data gauss.h5 --model nig --out bnd0.h5 --quiet >/dev/null 2>&1
st=$("$H" bnd0.h5 /fits/nig status)
"$G" fit --data gauss.h5 --model nig --out bnd.h5 --quiet --se > out.txt 2> err.txt; rc=$?
[ $rc = 0 ] && [ ! -s err.txt ] || die "boundary fit with --se: exit $rc, stderr $(cat err.txt)"
case $st in boundary*) ;; *) die "expected a boundary fit, got '$st'";; esac
[ "$("$H" bnd.h5 /fits/nig status)" = "$st" ] || die "the status changed with --se"
"$H" bnd.h5 /fits/nig/se reason | grep -q "boundary of the parameter space" || die "no boundary reason"
for s in mu gamma sigma a b mean cov; do
  "$H" bnd.h5 /fits/nig/se/$s | awk '$1 !~ /nan/ { bad = 1 } END { exit bad }' || die "boundary: se/$s not NaN"
done
"$H" bnd.h5 /fits/nig/param_cov >/dev/null 2>&1 && die "boundary: a param_cov was written"
echo "boundary fit: exit 0, '$st', NaN SEs with the reason"
# GH data fitted as hyperbolic: the fit runs to the face b = 0 (sqrt(ab) ~ 1e-9)
"$G" generate --model gh --dim 3 --n 1500 --seed 14 --p -1 --a 1.2 --b 0.8 --out face.h5 >/dev/null
"$G" fit --data face.h5 --model hyp --out face_r.h5 --quiet --se 2> err.txt || die "face fit exited $?"
"$H" face_r.h5 /fits/hyp/se reason | grep -q "on the face b = 0" || die "no face reason: $("$H" face_r.h5 /fits/hyp/se reason)"
"$H" face_r.h5 /fits/hyp/se/p | grep -q nan || die "face: se/p not NaN"
echo "face b = 0: NaN SEs with the reason"

# --- job files -----------------------------------------------------------------
"$PY" -c "
import h5py, numpy as np
rng = np.random.default_rng(8)
x = rng.standard_normal((3000, 2)) * np.sqrt(rng.gamma(3.0, 1/3.0, (3000, 1)))
x[2000:, 1] = 1.5   # the last window has a constant column: that fit fails
with h5py.File('win.h5', 'w') as f: f['X'] = x
" || die "cannot write win.h5"
cat > job.yaml <<'EOF'
data: win.h5
out: job.h5
family: [nig]
windows: {start: 0, length: 1000, step: 1000, count: 3}
se: true
quiet: true
EOF
mpirun -np 2 "$G" run job.yaml > run.txt 2>&1; rc=$?
[ $rc = 3 ] || die "job with a failing window: exit $rc (expected 3)"
h5dump -d /config job.h5 2>/dev/null | grep -q "se: true" || die "/config lacks se: true"
for w in 0 1; do
  [ "$("$H" job.h5 /fits/nig_tol1e-10_s1_w00000$w/se method)" = full ] || die "window $w: no full SEs"
  "$H" job.h5 /fits/nig_tol1e-10_s1_w00000$w/param_cov >/dev/null || die "window $w: no param_cov"
done
"$H" job.h5 /fits/nig_tol1e-10_s1_w000002/se reason | grep -q "the fit failed" || die "failed fit: no NaN SEs"
"$G" fit --data win.h5 --model nig --rows 1000:1000 --out one.h5 --quiet --se || die "fit of window 1"
paste <("$H" one.h5 /fits/nig/se/mu) <("$H" job.h5 /fits/nig_tol1e-10_s1_w000001/se/mu) |
  awk '{ r = ($1 - $2) / $1; if (r < 0) r = -r; if (r > 1e-10) bad = 1 } END { exit bad }' ||
  die "window 1 of the sweep: SEs differ from ghfit fit --rows"
sed -e 's/^se: true/se: subset/' -e 's/job.h5/jobs.h5/' job.yaml > jobs.yaml
mpirun -np 2 "$G" run jobs.yaml > run.txt 2>&1
[ "$("$H" jobs.h5 /fits/nig_tol1e-10_s1_w000000/se method)" = subset ] || die "se: subset not applied"
sed -e '/^se:/d' -e 's/job.h5/joboff.h5/' job.yaml > joboff.yaml
mpirun -np 2 "$G" run joboff.yaml > run.txt 2>&1
"$H" joboff.h5 /fits/nig_tol1e-10_s1_w000000/se/mu >/dev/null 2>&1 && die "SEs without se:"
mpirun -np 2 "$G" run joboff.yaml --se --out jobo2.h5 > run.txt 2>&1
[ "$("$H" jobo2.h5 /fits/nig_tol1e-10_s1_w000000/se method)" = full ] || die "ghfit run --se did not apply"
echo "job files: se: true, se: subset, run --se, a failed fit's NaN SEs"

# --- bad input ------------------------------------------------------------------
sed -e 's/^se: true/se: maybe/' -e 's/job.h5/bad.h5/' job.yaml > bad.yaml
"$G" run bad.yaml > out.txt 2> err.txt; rc=$?
[ $rc = 2 ] && [ "$(wc -l < err.txt)" = 1 ] && grep -q "bad.yaml:5: se: expected true, false, full or subset" err.txt ||
  die "se: maybe: exit $rc, $(cat err.txt)"
[ ! -e bad.h5 ] || die "bad job left bad.h5"
"$G" fit --data gh3.h5 --model gh --out bad2.h5 --se-method exact > out.txt 2> err.txt; rc=$?
[ $rc = 2 ] && [ "$(wc -l < err.txt)" = 1 ] && grep -q -- "--se-method: 'exact' is not auto, full or subset" err.txt ||
  die "--se-method exact: exit $rc, $(cat err.txt)"
[ ! -e bad2.h5 ] || die "bad option left bad2.h5"
echo "bad se values: exit 2 with one line"

[ $fail = 0 ] && echo "se: all checks passed"
exit $fail
