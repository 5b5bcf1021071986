#!/usr/bin/env bash
# Job keys after the fits (src/pipeline/postfit.c): a rolling sweep with
# `risk:` and `eval: next` on 1 and 2 ranks gives the same /backtest and
# risk datasets; VaR/ES equal those of `ghfit risk` on the same fit;
# exceedances, n_next, the backtest totals and Kupiec's LR and p-value are
# recomputed here from the data (python3 + h5py); loglik_next equals
# `ghfit eval` of the fit on the next window's rows and loglik_eval that of
# `eval: FILE`; bad keys: exit 2, one line naming the key, no output file.
# usage: jobpost.sh GHFIT WORKDIR
set -uo pipefail
G=$1; W=$2
PY=/usr/bin/python3
MPI="mpirun --oversubscribe"
rm -rf "$W"; mkdir -p "$W"; cd "$W" || exit 1
fail=0
"$PY" -c "import h5py, numpy" 2>/dev/null || { echo "h5py/numpy not available at $PY"; exit 1; }
"$G" generate --model nig --dim 2 --n 2000 --seed 3 --out x.h5 >/dev/null || { echo "generate failed"; exit 1; }
"$G" generate --model gh --dim 2 --n 300 --seed 5 --out y.h5 >/dev/null || { echo "generate failed"; exit 1; }
"$G" generate --model gh --dim 3 --n 50 --seed 5 --out y3.h5 >/dev/null || { echo "generate failed"; exit 1; }
"$PY" - <<'PY' || exit 1
import h5py, numpy as np
with h5py.File("w.h5", "w") as f:
    f["W"] = np.array([[1.0, 0.0], [0.5, 0.5], [1.0, -1.0]])
    f["W3"] = np.ones((2, 3))
PY
job() { # job NAME OUT EXTRA...: a rolling sweep job file
  local n=$1 o=$2; shift 2
  { printf 'data: x.h5\nout: %s\nfamily: [nig, gauss]\nquiet: true\n' "$o"; for l in "$@"; do printf '%s\n' "$l"; done; } > "$n"
}
job j.yaml r1.h5 'windows: {length: 500, step: 250}' 'risk: {portfolios: w.h5, alpha: [0.99, 0.95]}' 'eval: next'
"$G" run j.yaml > out1.txt || { echo "FAIL: run on 1 rank"; cat out1.txt; exit 1; }
sed 's/r1.h5/r2.h5/' j.yaml > j2.yaml
$MPI -np 2 "$G" run j2.yaml > out2.txt || { echo "FAIL: run on 2 ranks"; cat out2.txt; exit 1; }
grep -q "^backtest" out1.txt && grep -q "kupiec_lr" out1.txt || { echo "FAIL: no backtest table on stdout"; fail=1; }
job je.yaml re.h5 'eval: y.h5' 'risk: {portfolios: w.h5:/W, alpha: 0.975}'
"$G" run je.yaml > oute.txt || { echo "FAIL: run with eval: FILE"; exit 1; }

# ghfit risk and ghfit eval on single fits, for the comparisons below
NIG=nig_tol1e-10_s1
"$G" risk --model r1.h5:/fits/${NIG}_w000002 --portfolios w.h5 --alpha 0.99,0.95 --out risk2.h5 >/dev/null \
  || { echo "FAIL: ghfit risk"; fail=1; }
"$G" risk --model re.h5:/fits/nig_tol1e-10_s1 --portfolios w.h5 --alpha 0.975 --out riske.h5 >/dev/null \
  || { echo "FAIL: ghfit risk (no windows)"; fail=1; }
"$PY" -c "
import h5py
x = h5py.File('x.h5', 'r')['X'][()]
with h5py.File('next.h5', 'w') as f: f['X'] = x[1000:1250]  # the rows the next refit adds
" || exit 1
"$G" eval --model r1.h5:/fits/${NIG}_w000002 --data next.h5 --out ev2.h5 >/dev/null || { echo "FAIL: ghfit eval"; fail=1; }
"$G" eval --model re.h5:/fits/gauss_tol1e-10_s1 --data y.h5 --out eve.h5 >/dev/null || { echo "FAIL: ghfit eval y"; fail=1; }

NIG=$NIG "$PY" - <<'PY' || fail=1
import h5py, numpy as np, math, os
r1, r2 = h5py.File("r1.h5", "r"), h5py.File("r2.h5", "r")
x = h5py.File("x.h5", "r")["X"][()]
W = h5py.File("w.h5", "r")["W"][()]
alpha = np.array([0.99, 0.95])
# the same on 1 and 2 ranks
for c in r1["backtest"]:
    for ds in r1["backtest"][c]:
        assert np.array_equal(r1["backtest"][c][ds][()], r2["backtest"][c][ds][()]), (c, ds)
names = list(r1["fits"])
assert len(names) == 14 and sorted(r1["backtest"]) == ["gauss_tol1e-10_s1", "nig_tol1e-10_s1"], names
for n in names:
    for ds in ("alpha", "var", "es", "exceedances"):
        a, b = r1["fits"][n]["risk"][ds][()], r2["fits"][n]["risk"][ds][()]
        assert np.allclose(a, b, rtol=1e-12, atol=0), (n, ds, a, b)
    assert r1["fits"][n].attrs["n_next"] == r2["fits"][n].attrs["n_next"]
    l1, l2 = r1["fits"][n].attrs["loglik_next"], r2["fits"][n].attrs["loglik_next"]
    assert (np.isnan(l1) and np.isnan(l2)) or abs(l1 - l2) <= 1e-12 * abs(l1), (n, l1, l2)
print("ok   1 and 2 ranks: the same /backtest, risk datasets, loglik_next")
# VaR/ES as ghfit risk
nig = os.environ["NIG"]
g, rk = r1["fits"][nig + "_w000002"]["risk"], h5py.File("risk2.h5", "r")
for ds in ("var", "es"):
    a, b = g[ds][()], rk[ds][()]
    assert np.all(np.abs(a - b) <= 1e-12 * np.abs(b)), (ds, a, b)
assert np.array_equal(g["alpha"][()], alpha)
re_, rke = h5py.File("re.h5", "r"), h5py.File("riske.h5", "r")
assert np.all(np.abs(re_["fits/nig_tol1e-10_s1/risk/var"][()] - rke["var"][()]) <= 1e-12 * np.abs(rke["var"][()]))
assert "backtest" not in re_ and re_["fits/nig_tol1e-10_s1/risk"].attrs["n_next"] == 0
print("ok   VaR/ES = ghfit risk (1e-12)")
# exceedances, n_next and the backtest recomputed from the data
for chain in ("nig_tol1e-10_s1", "gauss_tol1e-10_s1"):
    tot, ntot = np.zeros((3, 2)), 0
    for w in range(7):
        f = r1["fits"][f"{chain}_w{w:06d}"]
        assert f.attrs["row_start"] == 250 * w and f.attrs["row_count"] == 500
        var = f["risk/var"][()]
        if w == 6:
            assert f.attrs["n_next"] == 0 and f["risk"].attrs["n_next"] == 0 and np.isnan(f.attrs["loglik_next"])
            assert np.all(f["risk/exceedances"][()] == 0)
            continue
        nx = x[250 * w + 500: 250 * (w + 1) + 500]       # after the window, to the end of the next
        L = -nx @ W.T                                   # [rows][P]
        exc = (L[:, :, None] > var[None, :, :]).sum(axis=0)
        assert np.array_equal(exc, f["risk/exceedances"][()]), (chain, w, exc, f["risk/exceedances"][()])
        assert f.attrs["n_next"] == len(nx) == f["risk"].attrs["n_next"]
        tot += exc; ntot += len(nx)
    b = r1["backtest"][chain]
    assert np.array_equal(b["exceedances"][()], tot) and np.all(b["n"][()] == ntot)
    assert np.allclose(b["expected"][()], (1 - alpha)[None, :] * ntot, rtol=1e-15)
    assert np.array_equal(b["alpha"][()], np.tile(alpha, (3, 1)))
    for p in range(3):
        for k in range(2):
            a, xx, n = alpha[k], tot[p, k], ntot
            lr = -2 * ((n - xx) * math.log(a) + xx * math.log(1 - a)
                       - (n - xx) * math.log(1 - xx / n) - (xx * math.log(xx / n) if xx > 0 else 0))
            pv = math.erfc(math.sqrt(lr / 2))           # chi2(1) upper tail
            assert abs(b["kupiec_lr"][p, k] - lr) <= 1e-9 * max(1, lr), (chain, p, k, b["kupiec_lr"][p, k], lr)
            assert abs(b["kupiec_p"][p, k] - pv) <= 1e-9, (chain, p, k, b["kupiec_p"][p, k], pv)
print("ok   exceedances, n_next, backtest totals, Kupiec LR and p recomputed")
# loglik_next = ghfit eval on the next window; loglik_eval = ghfit eval on y.h5
ev = h5py.File("ev2.h5", "r")
a, b = r1["fits"][nig + "_w000002"].attrs["loglik_next"], ev.attrs["loglik"]
assert abs(a - b) <= 1e-12 * abs(b), (a, b)
eve = h5py.File("eve.h5", "r")
f = re_["fits/gauss_tol1e-10_s1"]
assert abs(f.attrs["loglik_eval"] - eve.attrs["loglik"]) <= 1e-12 * abs(eve.attrs["loglik"])
assert f.attrs["n_eval"] == 300 and "loglik_next" not in f.attrs
cfg = r1["config"][()].decode()
assert "risk: {portfolios: 'w.h5:/W', alpha: [" in cfg and "eval: next" in cfg, cfg
assert "eval: 'y.h5:/X'" in re_["config"][()].decode()
print("ok   loglik_next / loglik_eval = ghfit eval (1e-12); /config records the keys")
PY

# a failed window fit (a constant column): exit 3, no risk group for it, the
# others and the backtest still written (its next window not counted)
"$PY" -c "
import h5py
x = h5py.File('x.h5', 'r')['X'][()]
x[1000:1500, 0] = 1.0
with h5py.File('xc.h5', 'w') as f: f['X'] = x
" || exit 1
job jf.yaml rf.h5 'windows: {length: 500, step: 500}' 'risk: {portfolios: w.h5, alpha: 0.99}' 'eval: next'
sed -i 's/^data: x.h5/data: xc.h5/; s/^family: .*/family: nig/' jf.yaml
"$G" run jf.yaml > outf.txt 2> errf.txt; rc=$?
[ $rc -eq 3 ] || { echo "FAIL: a failed window fit: rc $rc"; cat errf.txt; fail=1; }
"$PY" - <<'PY' || fail=1
import h5py, numpy as np
f = h5py.File("rf.h5", "r")
g = f["fits"]
assert g["nig_tol1e-10_s1_w000002"].attrs["status"].startswith("failed")
assert "risk" not in g["nig_tol1e-10_s1_w000002"] and "loglik_next" not in g["nig_tol1e-10_s1_w000002"].attrs
assert g["nig_tol1e-10_s1_w000001"]["risk"].attrs["n_next"] == 500   # the failed window's rows, still counted
assert np.all(f["backtest/nig_tol1e-10_s1/n"][()] == 1000)            # windows 0 and 1 (2 failed, 3 is last)
print("ok   a failed window fit: no risk for it, the backtest over the others")
PY

# bad input: exit 2, one line naming the key, no output file
bad() { # bad LABEL PATTERN NP EXTRA...
  local lab=$1 pat=$2 np_=$3; shift 3
  job b.yaml bad.h5 'windows: {length: 500, step: 250}' "$@"
  rm -f bad.h5
  $MPI -np "$np_" "$G" run b.yaml > b.out 2> b.err; local rc=$?
  local nl; nl=$(grep -c "^ghfit:" b.err)
  if [ $rc -ne 2 ] || [ "$nl" -ne 1 ] || ! grep -q "^ghfit: error: .*$pat" b.err || [ -e bad.h5 ] || ls bad.h5.tmp* >/dev/null 2>&1; then
    echo "FAIL: $lab: rc $rc, $nl lines:"; cat b.err; fail=1
  else echo "ok   $lab: $(grep "^ghfit:" b.err)"; fi
}
bad "missing weights file" "risk.portfolios" 2 'risk: {portfolios: nope.h5, alpha: 0.99}'
bad "missing weights dataset" "risk.portfolios" 1 'risk: {portfolios: "w.h5:/V", alpha: 0.99}'
bad "weights of another dimension" "risk.portfolios: w.h5:/W3 has 3 columns" 2 'risk: {portfolios: "w.h5:/W3", alpha: 0.99}'
bad "alpha outside (0, 1)" "risk.alpha: '1.5'" 2 'risk: {portfolios: w.h5, alpha: [0.99, 1.5]}'
bad "alpha 0" "risk.alpha: '0'" 1 'risk: {portfolios: w.h5, alpha: 0}'
bad "risk without alpha" "risk: 'alpha'" 1 'risk: {portfolios: w.h5}'
bad "eval data of another dimension" "eval: y3.h5:/X has 3 columns" 2 'eval: y3.h5'
bad "missing eval file" "eval: " 1 'eval: nope.h5'
printf 'data: x.h5\nout: bad.h5\nfamily: nig\neval: next\n' > b.yaml
rm -f bad.h5
"$G" run b.yaml > b.out 2> b.err; rc=$?
if [ $rc -ne 2 ] || [ "$(grep -c . b.err)" -ne 1 ] || ! grep -q "eval: 'next' needs rolling windows" b.err || [ -e bad.h5 ]; then
  echo "FAIL: eval: next without windows: rc $rc"; cat b.err; fail=1
else echo "ok   eval: next without windows: $(cat b.err)"; fi
exit $fail
