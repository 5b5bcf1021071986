#!/usr/bin/env bash
# ghfit optimize: min-risk, target-return, tangency and frontier files on 1, 2
# and 3 ranks (rank 0 optimises: the same bits), their datasets and
# attributes, the constraints held (budget, long-only, bounds, per-asset
# bounds, target), a frontier's returns increasing with ES >= VaR, a point
# no worse than the equal-weight portfolio (as ghfit risk computes it), an
# existing optimize file replaced; bad input on 2 ranks: exit 2, one
# "ghfit: error:" line naming the thing, no output left, and `ghfit check
# optimize` refusing with the same line.  (Optimality: tests/test_portopt.c.)
# usage: cli_optimize.sh GHFIT WORKDIR
set -uo pipefail
G=$1; W=$2
PY=/usr/bin/python3
MPI="mpirun --oversubscribe"
. "$(dirname "$0")/lib.sh"
rm -rf "$W"; mkdir -p "$W"; cd "$W" || exit 1
fail=0
"$PY" -c "import h5py, numpy" 2>/dev/null || { echo "h5py/numpy not available at $PY (Debian python3-h5py; scripts/install-deps.sh)"; exit 1; }
"$G" generate --model gh --dim 4 --n 3000 --seed 4 --p -1.5 --out x.h5 >/dev/null || { echo "generate failed"; exit 1; }
"$G" fit --data x.h5 --model nig --out nig.h5 --quiet || { echo "fit failed"; exit 1; }
"$G" fit --data x.h5 --model t --out t.h5 --quiet || { echo "fit failed"; exit 1; }
"$PY" - <<'PY' || exit 1
import h5py, numpy as np, shutil
for name, p in (("t15", -0.75), ("t3", -1.5)):      # t with nu = 1.5 and nu = 3 (skewed)
    shutil.copy("t.h5", f"{name}.h5")
    with h5py.File(f"{name}.h5", "r+") as f:
        f["fits/t/params/p"][()] = p
shutil.copy("nig.h5", "failed.h5")
with h5py.File("failed.h5", "r+") as f:
    m = f["fits/nig/params/mu"][()]; m[0] = np.nan; f["fits/nig/params/mu"][()] = m
with h5py.File("b.h5", "w") as f:
    f["B"] = np.array([[0.0, 0.5], [0.1, 0.4], [0.0, 0.3], [0.05, 0.6]])
    f["B3"] = np.zeros((3, 2))
    f["W"] = np.full((1, 4), 0.25)
PY

for np_ in 1 2 3; do
  $MPI -np $np_ "$G" optimize --model nig.h5 --measure es --alpha 0.975 --long-only --out m$np_.h5 >m$np_.txt \
    || { echo "FAIL: optimize on $np_ ranks"; fail=1; }
done
run() { "$G" optimize "$@" >/dev/null || { echo "FAIL: optimize $*"; fail=1; }; }
run --model nig.h5 --measure var --alpha 0.99 --bounds -0.2,0.6 --out var.h5
run --model nig.h5 --measure es --frontier 6 --long-only --out fr.h5
run --model nig.h5 --measure sd --tangency --risk-free 0.001 --out tan.h5
run --model nig.h5 --measure es --bounds b.h5:/B --target-return 0.06 --out tgt.h5
run --model t3.h5 --measure es --losses --long-only --out t3.h5.opt
run --model nig.h5 --measure sd --long-only --budget 2 --out fr.h5     # replaces an optimize file
"$G" risk --model nig.h5 --portfolios b.h5:/W --alpha 0.975 --out eq.h5 >/dev/null || { echo "FAIL: risk"; fail=1; }
"$PY" - <<'PY' || fail=1
import h5py, numpy as np
m = [h5py.File(f"m{k}.h5", "r") for k in (1, 2, 3)]
for k in (1, 2):
    for ds in ("weights", "expected_return", "risk", "sd", "var", "es", "status", "converged", "kkt"):
        assert np.array_equal(m[0][ds][()], m[k][ds][()], equal_nan=True), f"{ds} differs between 1 and {k + 1} ranks"
f = m[0]; w = f["weights"][()]
assert w.shape == (1, 4) and abs(w.sum() - 1) < 1e-12 and (w >= 0).all(), w
assert f["converged"][0] == 1 and f["kkt"][0] < 1e-6 and f["risk"][0] == f["es"][0] and f["es"][0] > f["var"][0]
at = f.attrs
for k, want in (("content", "optimize"), ("measure", "es"), ("type", "min-risk"), ("fit", "nig"), ("family", "nig"),
                ("model_file", "nig.h5"), ("sense", "returns"), ("data_file", "x.h5"), ("dataset", "/X")):
    assert at[k] == want, (k, at[k])
assert at["alpha"] == 0.975 and at["budget"] == 1 and at["dim"] == 4 and at["n_points"] == 1 and at["row_count"] == 3000
assert (f["lower"][()] == 0).all() and np.isinf(f["upper"][()]).all()
eq = h5py.File("eq.h5", "r")["es"][0, 0]
assert f["es"][0] <= eq * (1 + 1e-12), (f["es"][0], eq)     # no worse than the equal-weight portfolio
v = h5py.File("var.h5", "r"); w = v["weights"][0]
assert abs(w.sum() - 1) < 1e-12 and (w >= -0.2 - 1e-12).all() and (w <= 0.6 + 1e-12).all() and v.attrs["measure"] == "var"
assert v["risk"][0] == v["var"][0] and v["converged"][0] == 1
t = h5py.File("tgt.h5", "r"); w = t["weights"][0]; B = h5py.File("b.h5", "r")["B"][()]
assert abs(t["expected_return"][0] - 0.06) < 1e-12 and (w >= B[:, 0] - 1e-12).all() and (w <= B[:, 1] + 1e-12).all()
assert np.array_equal(t["lower"][()], B[:, 0]) and t.attrs["target_return"] == 0.06 and t["converged"][0] == 1
s = h5py.File("fr.h5", "r")                                   # replaced: sd, budget 2
assert s.attrs["measure"] == "sd" and s["weights"].shape == (1, 4) and abs(s["weights"][0].sum() - 2) < 1e-12
tn = h5py.File("tan.h5", "r"); assert tn.attrs["risk_free"] == 0.001 and tn["converged"][0] == 1
l = h5py.File("t3.h5.opt", "r"); assert l.attrs["sense"] == "losses" and l["converged"][0] == 1
print("ok   same bits on 1, 2, 3 ranks; attributes; constraints; no worse than equal weights; replace")
PY
"$G" optimize --model nig.h5 --measure es --frontier 6 --long-only --out fr6.h5 >/dev/null
"$PY" - <<'PY' || fail=1
import h5py, numpy as np
f = h5py.File("fr6.h5", "r"); r, e, v = f["expected_return"][()], f["es"][()], f["var"][()]
assert f["weights"].shape == (6, 4) and (np.diff(r) > 0).all() and (np.diff(e) >= -1e-12 * abs(e[:-1])).all()
assert (e > v).all() and (f["converged"][()] == 1).all() and f["status"][5] == 0     # the top: the LP's vertex
print("ok   frontier: returns increasing, ES non-decreasing, ES > VaR, the top the LP's vertex")
PY

# ghfit check optimize: a valid call says ok and creates nothing
"$G" check optimize --model nig.h5 --measure es --bounds b.h5:/B --out chk.h5 >chk.txt 2>&1 && grep -q "ghfit check: ok: .ghfit optimize. would optimize" chk.txt \
  && ! ls chk.h5* >/dev/null 2>&1 && echo "ok   check optimize: ok, nothing created" || { echo "FAIL: check optimize"; cat chk.txt; fail=1; }

# expect PATTERN -- optimize args...: refused by the run on 2 ranks (tests/lib.sh) and by check with the same line
expect() {
  refused optimize "$@"
  local line; line=$(grep '^ghfit: error:' stderr.txt)
  shift 2
  "$G" check optimize "$@" >/dev/null 2>check.txt; local rc=$?
  if [ $rc -ne 2 ] || [ "$(grep '^ghfit: error:' check.txt)" != "$line" ]; then
    echo "FAIL [check optimize $*]: exit $rc, '$(grep '^ghfit:' check.txt)' vs '$line'"; fail=1; fi
}
expect "no portfolio within the bounds sums to the budget 1" -- --model nig.h5 --measure es --bounds 0,0.2 --out out.h5
expect "above the highest expected return attainable"      -- --model nig.h5 --measure es --long-only --target-return 1 --out out.h5
expect "'1.5' is not a level in (0, 1)"                    -- --model nig.h5 --measure es --alpha 1.5 --out out.h5
expect "'0' is not a level in (0, 1)"                      -- --model nig.h5 --measure var --alpha 0 --out out.h5
expect "b.h5:/B3: has shape \[3\]\[2\], but the fit nig.h5:/fits/nig has dimension 4" -- --model nig.h5 --measure es --bounds b.h5:/B3 --out out.h5
expect "the fit's variance does not exist"                 -- --model t3.h5 --measure sd --out out.h5
expect "the fit's mean does not exist"                     -- --model t15.h5 --measure es --out out.h5
expect "the fit's mean does not exist"                     -- --model t15.h5 --measure var --out out.h5
expect "failed.h5:/fits/nig: the fit has no usable law"    -- --model failed.h5 --measure es --out out.h5
expect "the expected return is unbounded"                  -- --model nig.h5 --measure es --frontier 5 --out out.h5
expect "'ghfit' is not sd, var or es"                      -- --model nig.h5 --measure ghfit --out out.h5
expect "--budget: '0' is not a finite non-zero number"     -- --model nig.h5 --measure es --budget 0 --out out.h5
expect "--risk-free applies to --tangency only"            -- --model nig.h5 --measure es --risk-free 0.01 --out out.h5
expect "--measure is required"                             -- --model nig.h5 --out out.h5
"$G" fit --data x.h5 --model gauss --out out.h5 --quiet
"$G" optimize --model nig.h5 --measure es --out out.h5 >/dev/null 2>err.txt; rc=$?
if [ $rc -eq 2 ] && grep -q "exists and is not a ghfit optimize output.*(it is a ghfit fit result)" err.txt && "$PY" -c "import h5py; assert list(h5py.File('out.h5')['fits']) == ['gauss']"; then
  echo "ok   a result file as --out is refused and kept"; else echo "FAIL: --out over a result file: rc $rc"; cat err.txt; fail=1; fi
rm -f out.h5

# the job key optimize: per fit /fits/<name>/optimize (the same portfolio as ghfit optimize on that fit), and
# with rolling windows /backtest/<chain>/optimize (recomputed here from the data), on 1 and 2 ranks
cat > bt.yaml <<'YAML'
data: x.h5
out: bt1.h5
family: [nig, gauss]
windows: {length: 1000, step: 500}
quiet: true
optimize: {measure: es, alpha: 0.975, type: min-risk, long_only: true}
YAML
"$G" run bt.yaml >bt1.txt || { echo "FAIL: run with optimize"; fail=1; }
$MPI -np 2 "$G" run bt.yaml --out bt2.h5 >bt2.txt || { echo "FAIL: run with optimize on 2 ranks"; fail=1; }
grep -q "gaussian-min-variance" bt1.txt || { echo "FAIL: no optimize backtest lines"; cat bt1.txt; fail=1; }
"$G" optimize --model bt1.h5:/fits/nig_tol1e-10_s1_w000001 --measure es --alpha 0.975 --long-only --out one.h5 >/dev/null \
  || { echo "FAIL: optimize on a job's fit"; fail=1; }
"$PY" - <<'PY' || fail=1
import h5py, numpy as np, math
a, b = h5py.File("bt1.h5", "r"), h5py.File("bt2.h5", "r")
for c in a["backtest"]:
    for k in a[f"backtest/{c}/optimize"]:
        assert np.array_equal(a[f"backtest/{c}/optimize/{k}"][()], b[f"backtest/{c}/optimize/{k}"][()]), (c, k)
one = h5py.File("one.h5", "r")
o = a["fits/nig_tol1e-10_s1_w000001/optimize"]
assert np.array_equal(o["weights"][()], one["weights"][0]) and o["es"][()] == one["es"][0] and o["converged"][()] == 1
X = h5py.File("x.h5", "r")["X"][()]
for chain in ("nig_tol1e-10_s1", "gauss_tol1e-10_s1"):
    fits = sorted(k for k in a["fits"] if k.startswith(chain + "_w"))
    R, turn = [], []
    for i, f in enumerate(fits[:-1]):
        g, h = a["fits"][f], a["fits"][fits[i + 1]]
        r0 = g.attrs["row_start"] + g.attrs["row_count"]; r1 = h.attrs["row_start"] + h.attrs["row_count"]
        w = g["optimize/weights"][()]
        R += list(X[r0:r1] @ w)
        if i: turn.append(np.abs(w - a["fits"][fits[i - 1]]["optimize/weights"][()]).sum())
    R = np.array(R); bt = a[f"backtest/{chain}/optimize"]
    assert bt.attrs["n"] == len(R) == 2000 and np.allclose(bt["returns"][:, 0], R, rtol=0, atol=1e-13)
    assert np.allclose(bt["returns"][:, 1], (X[1000:3000] @ np.full(4, 0.25)), atol=1e-13)
    L = np.sort(-R)[::-1]; k = math.ceil(0.025 * len(R) - 1e-9)
    assert abs(bt["realised_es"][0] - L[:k].mean()) < 1e-12 and abs(bt["mean_return"][0] - R.mean()) < 1e-14
    assert abs(bt["volatility"][0] - R.std(ddof=1)) < 1e-12 and abs(bt["turnover"][0] - np.mean(turn)) < 1e-12
    assert bt["turnover"][1] == 0
print("ok   job key optimize: the same portfolio as ghfit optimize, the backtest recomputed, 1 and 2 ranks the same")
PY
printf 'data: x.h5\nout: out.h5\nfamily: nig\noptimize: {measure: es, bounds: [0, 0.2]}\n' > bad1.yaml
printf 'data: x.h5\nout: out.h5\nfamily: nig\noptimize: {measure: cvar}\n' > bad2.yaml
refused run "bt.yaml: optimize: infeasible constraints\|bad1.yaml: optimize: infeasible constraints" -- bad1.yaml
refused run "optimize.measure: expected sd, var or es" -- bad2.yaml
for y in bad1 bad2; do  # ghfit check run refuses them with the run's line
  refused run "" -- $y.yaml; line=$(grep '^ghfit: error:' stderr.txt)
  "$G" check run $y.yaml >/dev/null 2>check.txt; rc=$?
  if [ $rc -ne 2 ] || [ "$(grep '^ghfit: error:' check.txt)" != "$line" ]; then
    echo "FAIL [check run $y.yaml]: exit $rc, '$(grep '^ghfit:' check.txt)' vs '$line'"; fail=1; else echo "ok   check run $y.yaml: the run's line"; fi
done
[ $fail -eq 0 ] && echo "cli_optimize: all passed"
exit $fail
