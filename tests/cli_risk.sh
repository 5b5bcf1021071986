#!/usr/bin/env bash
# ghfit risk on 1, 2 and 3 ranks: the same bits whatever the rank count (the
# portfolios are split over the ranks), the file's datasets and attributes,
# ES >= VaR and VaR increasing in alpha; bad input on 2 ranks: exit 2, one
# "ghfit: error:" line naming the thing, every rank ends, no output left;
# an existing risk file, and an existing result file, are replaced.  (Accuracy: python/tests/test_risk.py
# and tests/test_uni1d.c.)
# usage: cli_risk.sh GHFIT WORKDIR
set -uo pipefail
G=$1; W=$2
PY=/usr/bin/python3
MPI="mpirun --oversubscribe"
. "$(dirname "$0")/lib.sh"
rm -rf "$W"; mkdir -p "$W"; cd "$W" || exit 1
fail=0
"$PY" -c "import h5py, numpy" 2>/dev/null || { echo "h5py/numpy not available at $PY (Debian python3-h5py; scripts/install-deps.sh)"; exit 1; }
"$G" generate --model gh --dim 3 --n 3000 --seed 4 --p -1.5 --out x.h5 >/dev/null || { echo "generate failed"; exit 1; }
"$G" fit --data x.h5 --model nig --out nig.h5 --quiet || { echo "fit failed"; exit 1; }
printf 'name: two\ndata: x.h5\nout: two.h5\nfamily: [gh, t]\nquiet: true\n' > two.yaml
"$G" run two.yaml >/dev/null || { echo "run failed"; exit 1; }
T=$("$PY" -c "import h5py; print([r['name'].decode() for r in h5py.File('two.h5', 'r')['summary'][()] if r['family'] == b't'][0])")
"$PY" - <<'PY' || exit 1
import h5py, numpy as np
rng = np.random.default_rng(1)
with h5py.File("w.h5", "w") as f:
    f["W"] = rng.normal(size=(257, 3))
    f["W"][0] = 0.0                    # w = 0: a point mass at 0
    f["W2"] = rng.normal(size=(4, 2))
    w = rng.normal(size=(9, 3)); w[7, 2] = np.nan
    f["Wnan"] = w
    f["Wint"] = np.array([[1, 0, 0], [0, 2, -1]], dtype=np.int32)
PY

for np_ in 1 2 3; do
  $MPI -np $np_ "$G" risk --model two.h5:/fits/$T --portfolios w.h5 --alpha 0.975,0.99,0.9999 --out r$np_.h5 \
    || { echo "FAIL: risk on $np_ ranks"; fail=1; }
done
"$G" risk --model nig.h5 --portfolios w.h5:/Wint --alpha 0.99 --out rint.h5 || { echo "FAIL: integer weights"; fail=1; }
"$G" risk --model nig.h5 --portfolios w.h5:/Wint --alpha 0.9 --out rint.h5 || { echo "FAIL: replacing a risk file"; fail=1; }
T=$T "$PY" - <<'PY' || fail=1
import h5py, numpy as np, os
r = [h5py.File(f"r{k}.h5", "r") for k in (1, 2, 3)]
for k in (1, 2):
    for ds in ("alpha", "var", "es"):
        assert np.array_equal(r[0][ds][()], r[k][ds][()]), f"{ds} differs between 1 and {k + 1} ranks"
a, v, e = r[0]["alpha"][()], r[0]["var"][()], r[0]["es"][()]
assert list(a) == [0.975, 0.99, 0.9999] and v.shape == (257, 3) and e.shape == (257, 3)
assert np.all(v[0] == 0) and np.all(e[0] == 0), (v[0], e[0])
assert np.all(np.isfinite(v)) and np.all(e[1:] > v[1:]) and np.all(np.diff(v[1:], axis=1) > 0)
at = r[0].attrs
for k, want in (("content", "risk"), ("fit", os.environ["T"]), ("family", "t"), ("model_file", "two.h5"),
                ("portfolios_file", "w.h5"), ("portfolios_dataset", "/W")):
    assert at[k] == want, (k, at[k])
assert at["n_portfolios"] == 257 and at["dim"] == 3 and "ghfit_version" in at
ri = h5py.File("rint.h5", "r")
assert ri["var"].shape == (2, 1) and ri["alpha"][0] == 0.9
print("ok   same bits on 1, 2, 3 ranks; attributes; w = 0; integer weights; replace")
PY

# a result file replaced by another fit holds the new fit only (the in-memory
# image of io/h5common.c once saved the old file back over a replaced output)
"$G" fit --data x.h5 --model gauss --out nig_copy.h5 --quiet && cp nig.h5 nig_copy.h5 &&
  "$G" fit --data x.h5 --model gauss --out nig_copy.h5 --quiet &&
  "$PY" -c "import h5py; k = list(h5py.File('nig_copy.h5', 'r')['fits']); assert k == ['gauss'], k" &&
  echo "ok   a replaced result file holds the new fit" || { echo "FAIL: replacing a result file"; fail=1; }

# expect PATTERN -- risk args...: refused (tests/lib.sh)
expect() { refused risk "$@"; }
expect "x.h5:/summary"                -- --model x.h5 --portfolios w.h5 --alpha 0.99 --out out.h5
expect "no fit named 'nope'"          -- --model two.h5:/fits/nope --portfolios w.h5 --alpha 0.99 --out out.h5
expect "holds 2 fits"                 -- --model two.h5 --portfolios w.h5 --alpha 0.99 --out out.h5
expect "weights have 2 columns"       -- --model nig.h5 --portfolios w.h5:/W2 --alpha 0.99 --out out.h5
expect "first at row 7"               -- --model nig.h5 --portfolios w.h5:/Wnan --alpha 0.99 --out out.h5
expect "w.h5:/Q: no such dataset"     -- --model nig.h5 --portfolios w.h5:/Q --alpha 0.99 --out out.h5
expect "'1' is not a level in (0, 1)" -- --model nig.h5 --portfolios w.h5 --alpha 0.99,1 --out out.h5
expect "'0' is not a level"           -- --model nig.h5 --portfolios w.h5 --alpha 0 --out out.h5
expect "'nan' is not a level"         -- --model nig.h5 --portfolios w.h5 --alpha nan --out out.h5
expect "--alpha is required"          -- --model nig.h5 --portfolios w.h5 --out out.h5
expect "--out x.h5"                   -- --model nig.h5 --portfolios w.h5 --alpha 0.99 --out x.h5
expect "not RESULT.h5 or"             -- --model nig.h5:/other --portfolios w.h5 --alpha 0.99 --out out.h5
[ $fail -eq 0 ] && echo "cli_risk: all passed"
exit $fail
