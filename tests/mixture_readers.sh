#!/usr/bin/env bash
# The commands that read a mixture fit (issue 23; docs/output-schema.md
# "Mixtures"), on result files made by tests/make_mixture_fit.py from a real
# `ghfit fit` (a 3-component gh mixture, d = 3, known parameters):
#   * sample: the same rows on 1 and 3 ranks; the sample's mean and
#     covariance are the mixture's (moments/mean, moments/cov);
#   * eval of the sample: the same bytes on 1, 2 and 3 ranks; /logpdf is the
#     log-sum-exp of log pi_k + the log-density of each component evaluated
#     on its own (a single-law file per component); /responsibility rows sum
#     to 1 and are pi_k f_k / f; /cluster is their argmax and its
#     frequencies are the proportions within binomial error; e_y the
#     posterior mean over the components; a NaN row is flagged with NaN
#     responsibilities and cluster -1; root attribute n_components;
#   * risk: the same values on 1 and 3 ranks; VaR and ES against a Monte
#     Carlo of 400,000 draws; a mixture of K identical components gives the
#     single law's VaR and ES;
#   * gof: the margins' PITs are sum_k pi_k (the PIT under component k,
#     from gof of each component on its own), the same on 1 and 3 ranks,
#     p-values not small on draws from the mixture, tiny on other data; no
#     radial statistic (NaN);
#   * summary: K and ICL columns; --lrt tests no mixture;
#   * refusals (exit 2, one line naming the file, fit and dataset, no
#     output): proportions not summing to 1, components/ not holding K,
#     a component of the wrong dimension, a Sigma not positive definite;
#     optimize and gof --bootstrap of a mixture; `ghfit check` finds the same.
# usage: mixture_readers.sh GHFIT WORKDIR
set -euo pipefail
G=$1; W=$2
SRC=$(cd "$(dirname "$0")" && pwd)
. "$SRC/lib.sh"
PY=/usr/bin/python3
"$PY" -c 'import h5py, numpy' 2>/dev/null || { echo "h5py is not available at $PY (Debian python3-h5py)"; exit 1; }
MPI=mpirun
rm -rf "$W"; mkdir -p "$W"; cd "$W"
fail=0
"$G" generate --model gh --dim 3 --n 2000 --seed 3 --out d.h5 >/dev/null
"$G" fit --data d.h5 --model gh --out r.h5 --quiet
"$PY" "$SRC/make_mixture_fit.py" r.h5 m3.h5 --singles c --bad bad_
"$PY" "$SRC/make_mixture_fit.py" r.h5 mid.h5 --case identical --singles id
"$PY" "$SRC/make_mixture_fit.py" r.h5 sweep.h5 --sweep --k 3

# --- sample and eval -----------------------------------------------------------
"$G" sample --model m3.h5 --n 20000 --seed 5 --out s1.h5 | grep -q "3-component mixture" || { echo "FAIL: sample line"; fail=1; }
$MPI -np 3 "$G" sample --model m3.h5 --n 20000 --seed 5 --out s3.h5 --quiet
"$PY" - <<'EOF' s1.h5 s3.h5
import sys, h5py, numpy as np
a = h5py.File(sys.argv[1], "r")["X"][...]
b = h5py.File(sys.argv[2], "r")["X"][...]
x = a
nan = x.copy(); nan[7, 1] = np.nan
with h5py.File("snan.h5", "w") as f:
    f["X"] = nan
assert np.array_equal(a, b), "sample: 1 and 3 ranks differ"
EOF
"$G" eval --model m3.h5 --data s1.h5 --out e1.h5 --quiet
for np_ in 2 3; do $MPI -np $np_ "$G" eval --model m3.h5 --data s1.h5 --out e$np_.h5 --quiet; done
for k in 0 1 2; do "$G" eval --model c$k.h5 --data s1.h5 --out ec$k.h5 --quiet; done
"$G" eval --model m3.h5 --data snan.h5 --out enan.h5 --quiet
for np_ in 2 3; do cmp -s e1.h5 e$np_.h5 || { echo "FAIL: eval on $np_ ranks differs from 1 rank"; fail=1; }; done
"$PY" - <<'EOF' || fail=1
import h5py, numpy as np
m = h5py.File("m3.h5", "r")["fits/gh"]
prop = m["proportions"][...]
x = h5py.File("s1.h5", "r")["X"][...]
n = len(x)
bad = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok: bad.append(what)
# the sample's moments are the mixture's
EX, CX = m["moments/mean"][...], m["moments/cov"][...]
z = (x.mean(0) - EX) / np.sqrt(np.diag(CX) / n)
check(np.all(np.abs(z) < 4.5), "sample mean vs the mixture's (z %s)" % np.round(z, 2))
rc = np.abs(np.cov(x.T) - CX) / np.sqrt(np.outer(np.diag(CX), np.diag(CX)))
check(rc.max() < 0.05, "sample covariance vs the mixture's (largest relative deviation %.3g)" % rc.max())
e = h5py.File("e1.h5", "r")
tau, cl, ll = e["responsibility"][...], e["cluster"][...], e["logpdf"][...]
check(int(e.attrs["n_components"]) == 3 and tau.shape == (n, 3) and cl.dtype == np.int32, "shapes, n_components")
L = np.stack([h5py.File("ec%d.h5" % k, "r")["logpdf"][...] for k in range(3)], 1) + np.log(prop)
mx = L.max(1)
ref = mx + np.log(np.exp(L - mx[:, None]).sum(1))
check(np.abs(ll - ref).max() <= 1e-12 * np.abs(ref).max(), "logpdf = log-sum-exp of the components' (%.3g)" % np.abs(ll - ref).max())
check(abs(e.attrs["loglik"] - ref.sum()) <= 1e-12 * abs(ref.sum()), "loglik attribute = sum of the rows")
check(np.abs(tau.sum(1) - 1).max() < 1e-12, "responsibility rows sum to 1")
check(np.abs(tau - np.exp(L - ref[:, None])).max() < 1e-12, "responsibility = pi_k f_k / f")
check(np.array_equal(cl, tau.argmax(1)), "cluster = argmax responsibility")
freq = np.bincount(cl, minlength=3) / n
se = np.sqrt(prop * (1 - prop) / n)
check(np.all(np.abs(freq - prop) < 4 * se + 0.005), "cluster frequencies %s vs proportions %s" % (freq, prop))
ey = np.stack([h5py.File("ec%d.h5" % k, "r")["e_y"][...] for k in range(3)], 1)
check(np.abs((tau * ey).sum(1) - e["e_y"][...]).max() < 1e-12 * ey.max(), "e_y = sum_k tau_k E_k[Y|x]")
q = np.stack([h5py.File("ec%d.h5" % k, "r")["mahalanobis"][...] for k in range(3)], 1)
check(np.array_equal(e["mahalanobis"][...], q[np.arange(n), cl]), "mahalanobis under the MAP component")
f = h5py.File("enan.h5", "r")
check(f["nonfinite"][7] == 1 and f["cluster"][7] == -1 and np.all(np.isnan(f["responsibility"][7])), "NaN row flagged")
keep = np.arange(n) != 7
check(np.array_equal(f["logpdf"][...][keep], ll[keep]) and f.attrs["n_obs"] == n - 1, "other rows unchanged")
raise SystemExit(1 if bad else 0)
EOF

# --- risk ----------------------------------------------------------------------
"$PY" -c "
import h5py, numpy as np
h5py.File('w.h5', 'w')['W'] = np.array([[1, 0, 0], [0.3, 0.3, 0.4], [0, -1, 0.5], [0.2, 0.5, -0.1]], float)"
"$G" risk --model m3.h5 --portfolios w.h5 --alpha 0.95,0.99 --out rk1.h5 >/dev/null
$MPI -np 3 "$G" risk --model m3.h5 --portfolios w.h5 --alpha 0.95,0.99 --out rk3.h5 >/dev/null
"$G" risk --model mid.h5 --portfolios w.h5 --alpha 0.95,0.99 --out rid.h5 >/dev/null
"$G" risk --model id0.h5 --portfolios w.h5 --alpha 0.95,0.99 --out rid0.h5 >/dev/null
"$G" sample --model m3.h5 --n 400000 --seed 9 --out big.h5 --quiet
"$PY" - <<'EOF' || fail=1
import h5py, numpy as np
bad = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok: bad.append(what)
r1, r3 = h5py.File("rk1.h5", "r"), h5py.File("rk3.h5", "r")
check(np.array_equal(r1["var"][...], r3["var"][...]) and np.array_equal(r1["es"][...], r3["es"][...]), "risk: 1 and 3 ranks")
check(r1.attrs["n_components"] == 3 and "n_components" not in h5py.File("rid0.h5", "r").attrs, "risk: n_components")
x = h5py.File("big.h5", "r")["X"][...]
W = h5py.File("w.h5", "r")["W"][...]
L = -(x @ W.T)
for j, a in enumerate(r1["alpha"][...]):
    q = np.quantile(L, a, axis=0)
    es = np.array([L[:, i][L[:, i] >= q[i]].mean() for i in range(L.shape[1])])
    dv = np.abs(r1["var"][:, j] / q - 1).max()
    de = np.abs(r1["es"][:, j] / es - 1).max()
    check(dv < 0.01 and de < 0.02, "alpha %g: VaR within %.2g, ES within %.2g of a 400,000-draw Monte Carlo" % (a, dv, de))
a, b = h5py.File("rid.h5", "r"), h5py.File("rid0.h5", "r")
dv = np.abs(a["var"][...] / b["var"][...] - 1).max()
de = np.abs(a["es"][...] / b["es"][...] - 1).max()
check(dv < 1e-12 and de < 1e-12, "identical components: the single law's VaR (%.2g) and ES (%.2g)" % (dv, de))
raise SystemExit(1 if bad else 0)
EOF

# --- gof: the margins through the mixture cdf ----------------------------------------
"$G" sample --model m3.h5 --n 800 --seed 11 --out gs.h5 --quiet
"$G" sample --model c0.h5 --n 800 --seed 11 --out gs0.h5 --quiet
"$G" gof --model m3.h5 --data gs.h5 --out gof1.h5 --quiet
$MPI -np 3 "$G" gof --model m3.h5 --data gs.h5 --out gof3.h5 --quiet
"$G" gof --model m3.h5 --data gs0.h5 --out gofd.h5 --quiet
for k in 0 1 2; do "$G" gof --model c$k.h5 --data gs.h5 --out gofc$k.h5 --quiet; done
"$PY" - <<'EOF' || fail=1
import h5py, numpy as np
bad = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok: bad.append(what)
def walk(g, p=""):
    out = {}
    for k, v in g.items():
        out.update(walk(v, p + k + "/") if isinstance(v, h5py.Group) else {p + k: v[()]})
    return out
a, b = walk(h5py.File("gof1.h5", "r")), walk(h5py.File("gof3.h5", "r"))
check(a.keys() == b.keys() and all(np.array_equal(a[k], b[k], equal_nan=True) for k in a), "gof: 1 and 3 ranks")
prop = h5py.File("m3.h5", "r")["fits/gh/proportions"][()]
u = sum(prop[k] * h5py.File("gofc%d.h5" % k, "r")["margins/pit"][()] for k in range(3))
check(np.abs(a["margins/pit"] - u).max() < 1e-12, "margin PITs = sum_k pi_k (PIT under component k alone) (%.2g)"
      % np.abs(a["margins/pit"] - u).max())
check(np.all(a["margins/ks_p"] > 1e-3) and np.all(a["margins/ad_p"] > 1e-3), "draws from the mixture: p-values %s"
      % np.round(a["margins/ks_p"], 3))
check(np.all(np.isnan(a["radial/ks"])) and np.all(np.isnan(a["radial/qq"])), "no radial statistic (NaN)")
check(h5py.File("gof1.h5", "r").attrs["n_components"] == 3, "attribute n_components")
d = walk(h5py.File("gofd.h5", "r"))
check(d["margins/ks_p"].min() < 1e-6, "draws from component 0 alone: smallest KS p %.2g" % d["margins/ks_p"].min())
raise SystemExit(1 if bad else 0)
EOF

# --- summary -------------------------------------------------------------------
"$G" summary sweep.h5 --sort icl --lrt > sum.txt
awk '$2 == "gh_k3" && $9 == 3 { k3 = 1 } $2 == "gh_k1" && $9 == 1 && $10 == $8 { k1 = 1 }
     END { exit !(k3 && k1) }' sum.txt || { echo "FAIL: summary K/icl columns"; cat sum.txt; fail=1; }
grep -q "2 mixture fits (n_components >= 2) not tested" sum.txt && ! grep -q "chi2(" sum.txt \
  || { echo "FAIL: summary --lrt of mixtures"; cat sum.txt; fail=1; }

# --- refusals ------------------------------------------------------------------
set +e # refused() looks at the exit status itself
for c in sum count dim pd; do
  case $c in
    sum) pat="bad_sum.h5:/fits/gh/proportions: the 3 proportions sum to 0.9, not 1" ;;
    count) pat="bad_count.h5:/fits/gh/components: holds 2 components, but n_components = 3" ;;
    dim) pat="bad_dim.h5:/fits/gh/components/1/params/mu: missing or not of the fit's dimension 3" ;;
    pd) pat="bad_pd.h5:/fits/gh/components/1/params/sigma: not positive definite" ;;
  esac
  if [ $c = sum ]; then # on 2 ranks (refused: mpirun); the others on one process (the verdict is rank 0's, agreed)
    refused eval "$pat" -- --model bad_$c.h5 --data d.h5 --out out.h5
    refused sample "$pat" -- --model bad_$c.h5 --n 10 --seed 1 --out out.h5
    refused risk "$pat" -- --model bad_$c.h5 --portfolios w.h5 --alpha 0.9 --out out.h5
  else
    for cmd in "eval --data d.h5" "sample --n 5 --seed 1" "risk --portfolios w.h5 --alpha 0.9"; do
      "$G" $cmd --model bad_$c.h5 --out out.h5 > one.txt 2>&1
      rc=$?
      [ $rc = 2 ] && [ "$(grep -c '^ghfit: ' one.txt)" = 1 ] && grep -q -- "^ghfit: error: $pat" one.txt && [ ! -e out.h5 ] \
        && echo "ok   [${cmd%% *} bad_$c.h5]: $(cat one.txt)" || { echo "FAIL: ${cmd%% *} bad_$c.h5: exit $rc"; cat one.txt; fail=1; }
    done
  fi
  "$G" check eval --model bad_$c.h5 --data d.h5 --out out.h5 > chk.txt 2>&1 && { echo "FAIL: check eval bad_$c"; fail=1; }
  grep -q -- "$pat" chk.txt || { echo "FAIL: check eval bad_$c message"; cat chk.txt; fail=1; }
done
refused optimize "m3.h5:/fits/gh is a 3-component mixture; optimize needs a single law" -- --model m3.h5 --measure sd --out out.h5
refused gof "m3.h5:/fits/gh is a 3-component mixture; gof --bootstrap needs a single law" -- --model m3.h5 --data d.h5 \
  --out out.h5 --bootstrap 9
for cmd in "eval --data d.h5" "sample --n 5 --seed 1" "risk --portfolios w.h5 --alpha 0.9" "gof --data d.h5"; do
  "$G" check $cmd --model m3.h5 --out out.h5 > chk.txt 2>&1 && grep -q "3-component mixture of gh" chk.txt \
    || { echo "FAIL: check $cmd of a mixture"; cat chk.txt; fail=1; }
done
[ $fail = 0 ] && echo "mixture readers: all checks passed"
exit $fail
