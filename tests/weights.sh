#!/usr/bin/env bash
# Observation weights (weighted EM, --weights / --halflife):
#  - integer weights give the fit of the data with each row repeated w times
#    (log-likelihood to 1e-12, parameters to 1e-9), GH and NIG;
#  - weights all equal to 1 give the unweighted result bitwise;
#  - the same weighted fit on 1-4 ranks (log-likelihood to 1e-12), also with
#    --drop-nonfinite (a row's weight goes with it);
#  - --halflife in a rolling sweep equals separate --rows --halflife fits of
#    each window (and a --weights dataset of the same decay);
#  - the recorded attributes (weights, weight_sum, n_eff, loglik_unweighted);
#  - bad input: exit 2, one line naming the thing, no result file.
# usage: weights.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$SRC/tests/lib.sh"
PY=/usr/bin/python3
rm -rf "$W"; mkdir -p "$W"; cd "$W"
fail=0
die() { echo "FAIL: $*"; fail=1; }

"$G" generate --model gh --dim 3 --n 2500 --seed 5 --p -1 --a 1.5 --b 0.7 --gamma 0.2,-0.1,0 --out d.h5 >/dev/null \
  || { echo "cannot generate"; exit 1; }
# weights: integers 0..3 (/w, 1-D), the same as n x 1 (/w2), ones, a decay
# (/hl: 2^(-(N-1-i)/H) over rows 500..1499), bad ones; rep.h5: rows repeated
"$PY" - <<'EOF' || { echo "cannot write the weights"; exit 1; }
import h5py, numpy as np
with h5py.File('d.h5', 'a') as f:
    X = f['/X'][...]
    n = X.shape[0]
    w = np.random.default_rng(1).integers(0, 4, size=n).astype(float)
    f['/w'] = w
    f['/w2'] = w.reshape(-1, 1)
    f['/ones'] = np.ones(n)
    neg = w.copy(); neg[17] = -1.0; f['/neg'] = neg
    nan = w.copy(); nan[23] = np.nan; f['/nan'] = nan
    f['/zero'] = np.zeros(n)
    f['/short'] = w[:-1]
    f['/mat'] = np.ones((n, 2))
    hl = np.zeros(n); i = np.arange(1000); hl[500:1500] = np.exp2(-(999 - i) / 300.0); f['/hl'] = hl
    Xn = X.copy(); Xn[[5, 700, 1900], 1] = np.nan; f['/Xnan'] = Xn
with h5py.File('rep.h5', 'w') as g:
    g['/X'] = np.repeat(X, w.astype(int), axis=0)
EOF

# 1. integer weights == repeated rows
for m in gh nig; do
  mpirun -np 2 "$G" fit --data d.h5 --weights /w --model $m --out w_$m.h5 --quiet --tol 1e-13 || die "$m weighted fit"
  mpirun -np 2 "$G" fit --data rep.h5 --model $m --out r_$m.h5 --quiet --tol 1e-13 || die "$m repeated fit"
  echo "$m: weighted vs repeated rows"
  relcheck "$("$H" w_$m.h5 /fits/$m loglik)" "$("$H" r_$m.h5 /fits/$m loglik)" 1e-12 || die "$m loglik"
  for ds in mu gamma sigma; do
    paste <("$H" w_$m.h5 /fits/$m/params/$ds) <("$H" r_$m.h5 /fits/$m/params/$ds) | while read -r a b; do
      relcheck "$a" "$b" 1e-9 >/dev/null || { echo "  $ds: $a vs $b"; exit 1; }
    done || die "$m $ds differs beyond 1e-9"
  done
  for a in p a b; do
    relcheck "$("$H" w_$m.h5 /fits/$m/params/$a)" "$("$H" r_$m.h5 /fits/$m/params/$a)" 1e-9 || die "$m $a"
  done
  ws=$("$H" w_$m.h5 /fits/$m weight_sum); nr=$("$H" r_$m.h5 /fits/$m n_obs)
  [ "$ws" = "$nr" ] || die "$m weight_sum $ws != repeated rows $nr"
done
# every other family: the same log-likelihood (1e-12) and Sigma (1e-9)
for m in hyp vg t gauss; do
  mpirun -np 2 "$G" fit --data d.h5 --weights /w --model $m --out w_$m.h5 --quiet --tol 1e-13 || die "$m weighted fit"
  mpirun -np 2 "$G" fit --data rep.h5 --model $m --out r_$m.h5 --quiet --tol 1e-13 || die "$m repeated fit"
  echo "$m: weighted vs repeated rows"
  relcheck "$("$H" w_$m.h5 /fits/$m loglik)" "$("$H" r_$m.h5 /fits/$m loglik)" 1e-12 || die "$m loglik"
  paste <("$H" w_$m.h5 /fits/$m/params/sigma) <("$H" r_$m.h5 /fits/$m/params/sigma) | while read -r a b; do
    relcheck "$a" "$b" 1e-9 >/dev/null || { echo "  sigma: $a vs $b"; exit 1; }
  done || die "$m sigma differs beyond 1e-9"
done
# the attributes: label, n_eff = (sum w)^2 / sum w^2, the unweighted log-likelihood, BIC with n_eff
lab=$("$H" w_gh.h5 /fits/gh weights); [ "$lab" = "d.h5:/w" ] || die "weights attribute '$lab'"
"$PY" - <<'EOF' || die "attributes"
import h5py, numpy as np
with h5py.File('d.h5', 'r') as f: w = f['/w'][...]
with h5py.File('w_gh.h5', 'r') as r:
    a = r['/fits/gh'].attrs
    neff = w.sum() ** 2 / (w * w).sum()
    assert abs(a['n_eff'] - neff) <= 1e-12 * neff, (a['n_eff'], neff)
    k = round((a['aic'] + 2 * a['loglik']) / 2)
    assert abs(a['bic'] - (k * np.log(neff) - 2 * a['loglik'])) < 1e-8 * abs(a['bic']), 'bic'
    llu = a['loglik_unweighted']
    assert np.isfinite(llu) and llu != a['loglik'], llu
print("attributes: n_eff, bic, loglik_unweighted ok")
EOF

# 2. weights of 1: today's result bitwise (params, loglik, trace)
mpirun -np 2 "$G" fit --data d.h5 --weights /ones --model gh --out ones.h5 --quiet || die "ones fit"
mpirun -np 2 "$G" fit --data d.h5 --model gh --out plain.h5 --quiet || die "plain fit"
for ds in params/mu params/gamma params/sigma params/p params/a params/b loglik; do
  cmp -s <("$H" ones.h5 /fits/gh/$ds) <("$H" plain.h5 /fits/gh/$ds) || die "weights of 1: $ds differs"
done
for a in loglik aic bic n_iter; do
  [ "$("$H" ones.h5 /fits/gh $a)" = "$("$H" plain.h5 /fits/gh $a)" ] || die "weights of 1: $a differs"
done
[ "$("$H" ones.h5 /fits/gh loglik_unweighted)" = "$("$H" plain.h5 /fits/gh loglik)" ] || die "ones: loglik_unweighted"
echo "weights of 1: bitwise the unweighted fit"

# 3. ranks 1-4 (1-D and n x 1 datasets; with dropped rows)
ref=""; refd=""
for np in 1 2 3 4; do
  ds=/w; [ $np -ge 3 ] && ds=/w2
  mpirun -np $np "$G" fit --data d.h5 --weights "d.h5:$ds" --model nig --out k$np.h5 --quiet || die "np $np"
  mpirun -np $np "$G" fit --data d.h5 --dataset /Xnan --drop-nonfinite --weights /w --model nig --out kd$np.h5 \
    --quiet || die "np $np drop"
  ll=$("$H" k$np.h5 /fits/nig loglik); lld=$("$H" kd$np.h5 /fits/nig loglik)
  echo "np $np: loglik $ll, with 3 rows dropped $lld"
  [ -z "$ref" ] && { ref=$ll; refd=$lld; continue; }
  relcheck "$ll" "$ref" 1e-12 || die "rank invariance np $np"
  relcheck "$lld" "$refd" 1e-12 || die "rank invariance (dropped rows) np $np"
done
[ "$("$H" kd2.h5 /fits/nig n_dropped)" = 3 ] || die "n_dropped"

# 4. --halflife in a rolling sweep == separate fits of each window
cat > sweep.yaml <<'EOF'
data: d.h5
out: sweep.h5
family: [nig]
tol: 1e-11
windows: {start: 0, length: 1000, step: 500, count: 3}
halflife: 300
warm_start: false
quiet: true
EOF
mpirun -np 2 "$G" run sweep.yaml > run.txt 2>&1 || { cat run.txt; die "halflife sweep"; }
for k in 0 1 2; do
  name=$(printf "nig_tol1e-11_w%06d" $k)
  "$H" sweep.h5 /fits/$name loglik >/dev/null 2>&1 || name=$("$PY" -c "import h5py; print(sorted(h5py.File('sweep.h5','r')['/fits'])[$k])")
  mpirun -np 1 "$G" fit --data d.h5 --rows $((k * 500)):1000 --halflife 300 --model nig --tol 1e-11 --out s$k.h5 \
    --quiet || die "window $k fit"
  echo "window $k ($name): sweep vs separate fit"
  relcheck "$("$H" sweep.h5 /fits/$name loglik)" "$("$H" s$k.h5 /fits/nig loglik)" 1e-12 || die "window $k loglik"
  relcheck "$("$H" sweep.h5 /fits/$name/params/a)" "$("$H" s$k.h5 /fits/nig/params/a)" 1e-9 || die "window $k a"
  [ "$("$H" sweep.h5 /fits/$name weights)" = "halflife 300" ] || die "window $k weights attribute"
done
# a weights dataset in a sweep: each window takes its rows' weights (window 1 == a --rows fit)
sed -e 's/^halflife: 300$/weights: \/w/' -e 's/sweep.h5/sweepw.h5/' sweep.yaml > sweepw.yaml
mpirun -np 2 "$G" run sweepw.yaml > runw.txt 2>&1 || { cat runw.txt; die "weights sweep"; }
name=$("$PY" -c "import h5py; print(sorted(h5py.File('sweepw.h5','r')['/fits'])[1])")
mpirun -np 2 "$G" fit --data d.h5 --rows 500:1000 --weights /w --model nig --tol 1e-11 --out sw1.h5 --quiet \
  || die "window 1 weighted fit"
echo "weights sweep, window 1 ($name) vs a --rows fit"
relcheck "$("$H" sweepw.h5 /fits/$name loglik)" "$("$H" sw1.h5 /fits/nig loglik)" 1e-12 || die "weights sweep window 1"
[ "$("$H" sweepw.h5 /fits/$name weights)" = "d.h5:/w" ] || die "weights sweep: attribute"
# the decay as a dataset gives the same fit as --halflife (window 1: rows 500..1499)
mpirun -np 2 "$G" fit --data d.h5 --rows 500:1000 --weights /hl --model nig --tol 1e-11 --out hlds.h5 --quiet \
  || die "decay dataset fit"
relcheck "$("$H" hlds.h5 /fits/nig loglik)" "$("$H" s1.h5 /fits/nig loglik)" 1e-12 || die "halflife vs dataset"

# 5. checkpoints: a resume with other weights is refused; with the same weights it ends where an
#    uninterrupted fit ends
FITC=(fit --data d.h5 --weights /w --model gh --quiet --max-iter 400)
GHFIT_TEST_ITER_SLEEP=150 mpirun -np 2 "$G" "${FITC[@]}" --out ck_r.h5 --checkpoint ck.h5 --checkpoint-every 2 \
  > ck1.txt 2>&1 & bg=$!
for _ in $(seq 1 300); do [ -e ck.h5 ] && break; sleep 0.2; done
sleep 0.5; kill -USR1 $bg 2>/dev/null; wait $bg; rc=$?
if [ $rc = 75 ] && [ -e ck.h5 ]; then
  mpirun -np 2 "$G" fit --data d.h5 --weights /w2 --model gh --quiet --max-iter 400 --out ck_r.h5 \
    --checkpoint ck.h5 --resume > ck2.txt 2>&1; rc=$?
  [ $rc = 2 ] && grep -q "other options" ck2.txt || { cat ck2.txt; die "resume with other weights: exit $rc"; }
  [ ! -e ck_r.h5 ] || die "resume with other weights left a result"
  mpirun -np 2 "$G" "${FITC[@]}" --out ck_r.h5 --checkpoint ck.h5 --resume > ck3.txt 2>&1 || { cat ck3.txt; die "resume"; }
  mpirun -np 2 "$G" "${FITC[@]}" --out ck_full.h5 || die "uninterrupted fit"
  [ "$("$H" ck_r.h5 /fits/gh loglik)" = "$("$H" ck_full.h5 /fits/gh loglik)" ] || die "resumed fit != uninterrupted"
  [ "$("$H" ck_r.h5 /fits/gh weights)" = "d.h5:/w" ] || die "resumed fit: weights attribute"
  echo "checkpoint: other weights refused, resume == uninterrupted"
else
  cat ck1.txt; die "no checkpoint of the weighted fit (exit $rc)"
fi

# 6. bad input: exit 2, one error line naming the thing, no result file
bad() { # bad WANT ARGS...
  local want=$1; shift
  rm -f bad.h5
  mpirun -np 2 "$G" fit --data d.h5 --model nig --out bad.h5 --quiet "$@" > bad.txt 2>&1; local rc=$?
  [ $rc = 2 ] || { cat bad.txt; die "$*: exit $rc, expected 2"; return; }
  [ "$(grep -c '^ghfit: error:' bad.txt)" = 1 ] || { cat bad.txt; die "$*: not one error line"; }
  grep -q "^ghfit: error: .*$want" bad.txt || { cat bad.txt; die "$*: message lacks '$want'"; }
  [ ! -e bad.h5 ] || die "$*: result file left behind"
  ls | grep -q '\.tmp' && die "$*: temporary file left behind"
  echo "bad input ($*): $(grep '^ghfit: error:' bad.txt)"
}
bad "/neg: row 17: weight -1" --weights /neg
bad "/nan: row 23: weight nan" --weights /nan
bad "every weight of the fit's rows is 0" --weights /zero
bad "2499 values, but the data d.h5:/X have 2500 rows" --weights /short
bad "must be a vector" --weights /mat
bad "nothere" --weights /nothere
bad "halflife: '0' is not a positive" --halflife 0
bad "halflife: '-5' is not a positive" --halflife -5
bad "cannot be combined" --weights /w --halflife 10
# --backend cuda is no longer refused for this: it fits where every rank has
# a GPU, elsewhere fails only for the missing device or CUDA build
cuda_fits_or_no_gpu --weights /w
bad "not available for weighted fits" --weights /w --se
# a data set given as 1-D is still refused (only weights may be vectors)
rm -f bad.h5; mpirun -np 2 "$G" fit --data d.h5 --dataset /w --model nig --out bad.h5 --quiet > bad.txt 2>&1
[ $? = 2 ] && grep -q "expected 2-D" bad.txt || { cat bad.txt; die "1-D data accepted"; }
# job files: halflife is one value
printf 'data: d.h5\nout: bad.h5\nfamily: nig\nhalflife: [10, 20]\n' > badjob.yaml
mpirun -np 2 "$G" run badjob.yaml > bad.txt 2>&1; rc=$?
[ $rc = 2 ] && grep -q "halflife: expected a positive number" bad.txt || { cat bad.txt; die "halflife list accepted"; }

[ $fail -eq 0 ] && echo "weights: all passed" || echo "weights: FAILED"
exit $fail
