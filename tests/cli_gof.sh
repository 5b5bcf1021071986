#!/usr/bin/env bash
# ghfit gof end to end.  Data sampled from a fit (ghfit sample, fixed seeds)
# are not rejected: every margin's and the radial statistic's KS/AD/CvM
# p-value > 0.001 (the radial one is the Monte Carlo check of the radial law,
# gamma != 0 included: gh and t fits); Gaussian data fitted as gauss are not
# rejected; heavy-tailed (t with 3 degrees of freedom) data fitted as gauss
# are (KS p < 1e-6); 1 and 2 ranks give the same statistics; the
# interpolated PITs of a large sample agree with the exact ones; bad input on
# 2 ranks: exit 2, one "ghfit: error:" line naming the thing, no output left.
# usage: cli_gof.sh GHFIT WORKDIR
set -uo pipefail
G=$1; W=$2
PY=/usr/bin/python3
MPI="mpirun --oversubscribe"
. "$(dirname "$0")/lib.sh"
rm -rf "$W"; mkdir -p "$W"; cd "$W" || exit 1
fail=0
"$PY" -c "import h5py, numpy" 2>/dev/null || { echo "h5py/numpy not available at $PY (Debian python3-h5py)"; exit 1; }
"$G" generate --model gh --dim 3 --n 4000 --seed 4 --p -1.5 --gamma 0.5,-0.3,0.2 --out x.h5 >/dev/null || { echo "generate failed"; exit 1; }
"$G" fit --data x.h5 --model gh --out gh.h5 --quiet || { echo "fit gh failed"; exit 1; }
"$G" fit --data x.h5 --model t --out t.h5 --quiet || { echo "fit t failed"; exit 1; }
"$G" sample --model gh.h5 --n 20000 --seed 11 --out sgh.h5 >/dev/null || { echo "sample gh failed"; exit 1; }
"$G" sample --model t.h5 --n 20000 --seed 12 --out st.h5 >/dev/null || { echo "sample t failed"; exit 1; }
"$PY" - <<'PY' || exit 1
import h5py, numpy as np
rng = np.random.default_rng(5)
c = np.array([[1.0, 0.5], [0.5, 2.0]])
with h5py.File("gauss.h5", "w") as f:
    f["X"] = rng.multivariate_normal([1.0, -1.0], c, size=5000)
with h5py.File("heavy.h5", "w") as f:
    z = rng.multivariate_normal([0.0, 0.0], c, size=5000)
    f["X"] = z / np.sqrt(rng.chisquare(3, size=5000) / 3)[:, None]
with h5py.File("bad.h5", "w") as f:
    x = rng.normal(size=(50, 3)); x[17, 1] = np.nan
    f["X"] = x
    f["X2"] = rng.normal(size=(50, 2))
PY
"$G" fit --data gauss.h5 --model gauss --out fg.h5 --quiet || { echo "fit gauss failed"; exit 1; }
"$G" fit --data heavy.h5 --model gauss --out fh.h5 --quiet || { echo "fit heavy failed"; exit 1; }

run() { "$@" >/dev/null || { echo "FAIL: $*"; fail=1; }; }
run "$G" gof --model gh.h5 --data sgh.h5 --out g_gh.h5
run $MPI -np 2 "$G" gof --model gh.h5 --data sgh.h5 --out g_gh2.h5
run "$G" gof --model t.h5 --data st.h5 --out g_t.h5 --qq 50
run "$G" gof --model fg.h5 --data gauss.h5 --out g_g.h5
run "$G" gof --model fh.h5 --data heavy.h5 --out g_h.h5
run "$G" gof --model gh.h5 --data sgh.h5 --out g_int.h5 --exact-max 1000 --knots 1024
run "$G" gof --model gh.h5 --data bad.h5 --out g_drop.h5 --drop-nonfinite
"$PY" - <<'PY' || fail=1
import h5py, numpy as np
def pv(fn):
    f = h5py.File(fn, "r")
    return {k: np.append(f["margins/" + k][()], f["radial/" + k][()]) for k in ("ks_p", "ad_p", "cvm_p")}, f
ok = True
for fn, what in (("g_gh.h5", "gh sample"), ("g_t.h5", "t sample"), ("g_g.h5", "gauss data, gauss fit")):
    p, f = pv(fn)
    worst = min(v.min() for v in p.values())
    print(f"{'ok  ' if worst > 1e-3 else 'FAIL'} {what}: smallest p-value {worst:.3g} (margins and radial)")
    ok &= worst > 1e-3
    d, Q = f.attrs["dim"], f.attrs["n_qq"]
    assert f["margins/qq"].shape == (d, Q, 2) and f["radial/qq"].shape == (Q, 2)
    assert f["margins/pit"].shape == (f.attrs["n_obs"], d)
    for k in ("ks", "ad", "cvm"): assert f["margins/" + k].shape == (d,)
    qq = f["margins/qq"][()]
    assert np.all(np.diff(qq[:, :, 0], axis=1) > 0) and np.all(np.diff(qq[:, :, 1], axis=1) >= 0)
p, f = pv("g_h.h5")
print(f"{'ok  ' if p['ks_p'][:-1].max() < 1e-6 else 'FAIL'} t(3) data fitted as gauss: margin KS p {p['ks_p'][:-1]}, radial {p['ks_p'][-1]:.3g}")
ok &= p["ks_p"][:-1].max() < 1e-6 and p["ks_p"][-1] < 1e-6
a, b = h5py.File("g_gh.h5", "r"), h5py.File("g_gh2.h5", "r")
for k in ("margins/ks", "margins/ad", "margins/cvm", "margins/qq", "radial/ks", "radial/qq", "margins/pit"):
    assert np.array_equal(a[k][()], b[k][()]), f"{k} differs between 1 and 2 ranks"
print("ok   1 and 2 ranks: the same statistics")
at = a.attrs
for k, want in (("content", "gof"), ("fit_name", "gh"), ("family", "gh"), ("model_file", "gh.h5")):
    assert at[k] == want, (k, at[k])
assert at["n_obs"] == 20000 and at["dim"] == 3 and "ghfit_version" in at and at["pit_max_error"] == 0
i = h5py.File("g_int.h5", "r")
e = i.attrs["pit_max_error"]
dk = np.abs(i["margins/ks"][()] - a["margins/ks"][()]).max()
dp = np.abs(i["margins/pit"][()] - a["margins/pit"][()]).max()
print(f"{'ok  ' if 0 < e < 2e-5 and dp < 2e-5 and dk < 2e-5 else 'FAIL'} interpolated PITs (1024 knots): reported error {e:.2g}, "
      f"largest PIT difference {dp:.2g}, KS difference {dk:.2g}")
ok &= 0 < e < 2e-5 and dp < 2e-5 and dk < 2e-5
dr = h5py.File("g_drop.h5", "r")
assert dr.attrs["n_obs"] == 49 and dr.attrs["n_dropped"] == 1
print("ok   --drop-nonfinite")
assert ok
PY

# expect PATTERN -- gof args...: refused (tests/lib.sh)
expect() { refused gof "$@"; }
expect "x.h5"                   -- --model x.h5 --data sgh.h5 --out out.h5
expect "no fit named 'nope'"    -- --model gh.h5:/fits/nope --data sgh.h5 --out out.h5
expect "2 columns, but the fit" -- --model gh.h5 --data bad.h5 --dataset /X2 --out out.h5
expect "/Q"                     -- --model gh.h5 --data bad.h5 --dataset /Q --out out.h5
expect "row 17"                 -- --model gh.h5 --data bad.h5 --out out.h5
expect "--qq"                   -- --model gh.h5 --data sgh.h5 --out out.h5 --qq 0
expect "--data is required"     -- --model gh.h5 --out out.h5
expect "--out x.h5"             -- --model gh.h5 --data sgh.h5 --out x.h5
[ $fail -eq 0 ] && echo "cli_gof: all passed"
exit $fail
