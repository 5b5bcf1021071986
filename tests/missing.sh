#!/usr/bin/env bash
# Missing coordinates (--missing em):
#  - no missing entries: today's result bitwise;
#  - 10% and 40% of the entries missing at random (GH, NIG): the fit
#    converges, its log-likelihood trace never decreases (1e-12 relative),
#    the recorded counts are right, empty rows are dropped and counted;
#  - the same fit on 1-4 ranks (log-likelihood to 1e-12);
#  - integer weights with missing entries == the rows repeated;
#  - a staggered-start panel fits and predicts fresh rows better than drop;
#  - bad input: exit 2, one line, no result file.
# usage: missing.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$SRC/tests/lib.sh"
PY=/usr/bin/python3
rm -rf "$W"; mkdir -p "$W"; cd "$W"
fail=0
die() { echo "FAIL: $*"; fail=1; }

"$G" generate --model gh --dim 3 --n 3000 --seed 21 --p -1 --a 1.5 --b 0.7 --gamma 0.3,-0.2,0.1 --out d.h5 \
  >/dev/null || { echo "cannot generate"; exit 1; }
"$G" generate --model gh --dim 3 --n 3000 --seed 22 --p -1 --a 1.5 --b 0.7 --gamma 0.3,-0.2,0.1 --out fresh.h5 \
  >/dev/null || { echo "cannot generate"; exit 1; }
"$PY" - <<'EOF' || { echo "cannot write the data"; exit 1; }
import h5py, numpy as np
with h5py.File('d.h5', 'a') as f:
    X = f['/X'][...]
    rng = np.random.default_rng(3)
    for frac in (10, 40):
        M = X.copy(); M[rng.random(X.shape) < frac / 100.0] = np.nan
        M[7, :] = np.nan                      # an empty row: dropped and counted
        f['/M%d' % frac] = M
    w = rng.integers(0, 3, size=X.shape[0]).astype(float); f['/w'] = w
    S = X.copy(); S[:800, 1] = np.nan; S[:1500, 2] = np.nan   # staggered starts
    f['/S'] = S
    f['/Sdrop'] = X[1500:]
    B = X.copy(); B[11, 2] = np.inf; f['/Inf'] = B
    f['/E'] = np.full_like(X, np.nan)
with h5py.File('rep.h5', 'w') as g:
    with h5py.File('d.h5', 'r') as f:
        g['/X'] = np.repeat(f['/M10'][...], f['/w'][...].astype(int), axis=0)
EOF

# 1. no missing entries: bitwise
mpirun -np 2 "$G" fit --data d.h5 --model gh --out a.h5 --quiet || die "plain fit"
mpirun -np 2 "$G" fit --data d.h5 --model gh --missing em --out b.h5 --quiet || die "--missing em fit"
for ds in params/mu params/gamma params/sigma params/p params/a params/b loglik; do
  cmp -s <("$H" a.h5 /fits/gh/$ds) <("$H" b.h5 /fits/gh/$ds) || die "no missing entries: $ds differs"
done
echo "no missing entries: bitwise today's fit"

# 2. 10% and 40% missing: convergence, a monotone trace, the counts
for frac in 10 40; do
  for m in gh nig; do
    mpirun -np 2 "$G" fit --data d.h5 --dataset /M$frac --missing em --model $m --out m${frac}_$m.h5 --quiet \
      --tol 1e-11 || die "$frac% $m fit"
    st=$("$H" m${frac}_$m.h5 /fits/$m status)
    case "$st" in converged*) ;; *) die "$frac% $m: status $st";; esac
    "$H" m${frac}_$m.h5 /fits/$m/loglik | awk -v lab="$frac% $m" '
      NR > 1 && $1 < prev - 1e-12 * (prev < 0 ? -prev : prev) { bad++; printf "  %s: iteration %d: %.17g < %.17g\n", lab, NR - 1, $1, prev }
      { prev = $1 } END { exit bad > 0 }' || die "$frac% $m: the log-likelihood decreased"
    echo "$frac% missing, $m: $st, loglik $("$H" m${frac}_$m.h5 /fits/$m loglik), monotone"
  done
  "$PY" - $frac <<'EOF' || die "$frac%: recorded counts"
import sys, h5py, numpy as np
frac = sys.argv[1]
with h5py.File('d.h5', 'r') as f: M = f['/M' + frac][...]
nm = np.isnan(M).sum(axis=1); keep = nm < M.shape[1]
with h5py.File('m%s_gh.h5' % frac, 'r') as r:
    a = r['/fits/gh'].attrs
    assert a['n_dropped'] == (~keep).sum() >= 1, a['n_dropped']
    assert a['n_obs'] == keep.sum()
    assert a['n_incomplete'] == ((nm > 0) & keep).sum()
    assert abs(a['missing_fraction'] - nm[keep].sum() / (keep.sum() * 3)) < 1e-15
    assert a['missing'] == 'em' or a['missing'] == b'em'
    c = r['/fits/gh/missing_counts'][...]
    assert list(c) == [((nm == k) & keep).sum() for k in range(4)], c
print("%s%%: n_dropped, n_incomplete, missing_fraction, missing_counts ok" % frac)
EOF
done

# 3. ranks 1-4
ref=""
for np in 1 2 3 4; do
  mpirun -np $np "$G" fit --data d.h5 --dataset /M40 --missing em --model nig --out r$np.h5 --quiet || die "np $np"
  ll=$("$H" r$np.h5 /fits/nig loglik); echo "np $np: loglik $ll"
  [ -z "$ref" ] && { ref=$ll; continue; }
  relcheck "$ll" "$ref" 1e-12 || die "rank invariance np $np"
done

# 4. integer weights with missing entries == the rows repeated
mpirun -np 2 "$G" fit --data d.h5 --dataset /M10 --missing em --weights /w --model nig --tol 1e-12 --out wm.h5 \
  --quiet || die "weighted fit with missing entries"
mpirun -np 2 "$G" fit --data rep.h5 --missing em --model nig --tol 1e-12 --out wr.h5 --quiet || die "repeated rows"
echo "weights with missing entries vs repeated rows"
relcheck "$("$H" wm.h5 /fits/nig loglik)" "$("$H" wr.h5 /fits/nig loglik)" 1e-12 || die "weights + missing"
relcheck "$("$H" wm.h5 /fits/nig/params/a)" "$("$H" wr.h5 /fits/nig/params/a)" 1e-9 || die "weights + missing: a"

# 5. a staggered-start panel: fits, and scores fresh rows better than the rows left by drop
mpirun -np 2 "$G" fit --data d.h5 --dataset /S --missing em --model nig --out sem.h5 --quiet || die "staggered em"
mpirun -np 2 "$G" fit --data d.h5 --dataset /Sdrop --model nig --out sdrop.h5 --quiet || die "staggered drop"
mpirun -np 2 "$G" fit --data d.h5 --dataset /S --missing drop --model nig --out sdrop2.h5 --quiet || die "--missing drop"
[ "$("$H" sdrop2.h5 /fits/nig loglik)" = "$("$H" sdrop.h5 /fits/nig loglik)" ] || die "--missing drop != the complete rows"
mpirun -np 2 "$G" eval --model sem.h5 --data fresh.h5 --out e_em.h5 --quiet || die "eval em"
mpirun -np 2 "$G" eval --model sdrop.h5 --data fresh.h5 --out e_drop.h5 --quiet || die "eval drop"
le=$("$H" e_em.h5 / mean_loglik); ld=$("$H" e_drop.h5 / mean_loglik)
echo "staggered panel: mean log-density of 3000 fresh rows: em $le, drop $ld"
awk -v a="$le" -v b="$ld" 'BEGIN { exit !(a > b) }' || die "em does not beat drop on fresh rows"

# 6. bad input
bad() { # bad WANT ARGS...
  local want=$1; shift
  rm -f bad.h5
  mpirun -np 2 "$G" fit --data d.h5 --model nig --out bad.h5 --quiet "$@" > bad.txt 2>&1; local rc=$?
  [ $rc = 2 ] || { cat bad.txt; die "$*: exit $rc, expected 2"; return; }
  [ "$(grep -c '^ghfit: error:' bad.txt)" = 1 ] || { cat bad.txt; die "$*: not one error line"; }
  grep -q "^ghfit: error: .*$want" bad.txt || { cat bad.txt; die "$*: message lacks '$want'"; }
  [ ! -e bad.h5 ] || die "$*: result file left behind"
  echo "bad input ($*): $(grep '^ghfit: error:' bad.txt)"
}
bad "cannot be combined with --drop-nonfinite" --dataset /M10 --missing em --drop-nonfinite
bad "every one of the 3000 rows is empty" --dataset /E --missing em
bad "infinite values (first at row 11)" --dataset /Inf --missing em
bad "does not apply to the gauss family" --dataset /M10 --missing em --model gauss
# --backend cuda is no longer refused for this: it fits where every rank has
# a GPU, elsewhere fails only for the missing device or CUDA build
cuda_fits_or_no_gpu --dataset /M10 --missing em
bad "--missing: 'maybe' is not drop, em or error" --missing maybe
bad "non-finite values" --dataset /M10

[ $fail -eq 0 ] && echo "missing: all passed" || echo "missing: FAILED"
exit $fail
