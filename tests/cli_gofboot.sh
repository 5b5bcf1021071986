#!/usr/bin/env bash
# ghfit gof --bootstrap and the job key gof: (src/pipeline/gofboot.c).
# Small sizes (N = 300, d = 2, B = 19):
#  - NIG data fitted as NIG: every bootstrap p-value is (1 + k)/(B + 1) in
#    [1/20, 1]; the files of 1 and 3 ranks hold the same datasets, bit for bit;
#  - t(3)-like data fitted as gauss: rejected by the bootstrap too (every
#    margin's KS/AD/CvM p_boot and the radial ones at their floor 1/20);
#  - a refit that fails (GHFIT_TEST_FAIL=gofboot@1: rank 1's replicates) is
#    counted in bootstrap_failed and left out; exit 0, no hang; refits
#    stopped by --max-iter kept and counted in bootstrap_max_iter;
#  - bad --bootstrap/--seed values: exit 2, one line naming the option;
#  - the job key gof: {bootstrap: 19, ...} on 1 and 2 ranks writes under
#    /fits/<name>/gof/ exactly what `ghfit gof` writes for the fit's rows;
#    bad gof: values: exit 2, one line naming the key, no result file.
# usage: cli_gofboot.sh GHFIT WORKDIR
set -uo pipefail
G=$1; W=$2
PY=/usr/bin/python3
MPI="mpirun --oversubscribe"
. "$(dirname "$0")/lib.sh"
rm -rf "$W"; mkdir -p "$W"; cd "$W" || exit 1
fail=0
"$PY" -c "import h5py, numpy" 2>/dev/null || { echo "h5py/numpy not available at $PY (Debian python3-h5py)"; exit 1; }
"$G" generate --model nig --dim 2 --n 300 --seed 4 --gamma 0.5,-0.3 --out x.h5 >/dev/null || { echo "generate failed"; exit 1; }
"$G" fit --data x.h5 --model nig --out nig.h5 --quiet || { echo "fit nig failed"; exit 1; }
"$PY" - <<'PY' || exit 1
import h5py, numpy as np
rng = np.random.default_rng(8)
c = np.array([[1.0, 0.5], [0.5, 2.0]])
with h5py.File("heavy.h5", "w") as f:
    z = rng.multivariate_normal([0.0, 0.0], c, size=300)
    f["X"] = z / np.sqrt(rng.chisquare(3, size=300) / 3)[:, None]
with h5py.File("y3.h5", "w") as f:
    f["X"] = rng.normal(size=(40, 3))
PY
"$G" fit --data heavy.h5 --model gauss --out fh.h5 --quiet || { echo "fit heavy failed"; exit 1; }

run() { "$@" >run.out 2>run.err || { echo "FAIL: $*"; cat run.err; fail=1; }; }
run "$G" gof --model nig.h5 --data x.h5 --out b1.h5 --bootstrap 19 --seed 3 --qq 20
grep -q "bootstrap: 19 of 19 replicates refitted" run.out || { echo "FAIL: no bootstrap summary line"; cat run.out; fail=1; }
grep -q "about .*/19 replicates done" run.out || { echo "FAIL: no progress lines"; fail=1; }
run $MPI -np 3 "$G" gof --model nig.h5 --data x.h5 --out b3.h5 --bootstrap 19 --seed 3 --qq 20
run "$G" gof --model fh.h5 --data heavy.h5 --out bh.h5 --bootstrap 19 --seed 5 --qq 20 --quiet
[ -s run.out ] && { echo "FAIL: --quiet printed"; cat run.out; fail=1; }
GHFIT_TEST_FAIL=gofboot@1 run $MPI -np 2 "$G" gof --model nig.h5 --data x.h5 --out bf.h5 --bootstrap 19 --seed 3 --qq 20
grep -q "9 of 19 bootstrap replicates failed" run.err || { echo "FAIL: the failed replicates are not reported"; cat run.out run.err; fail=1; }
run "$G" gof --model nig.h5 --data x.h5 --out bm.h5 --bootstrap 5 --seed 3 --qq 20 --max-iter 2 --quiet

# the job key: gof on each fit's own rows, 1 and 2 ranks
printf 'data: x.h5\nout: r1.h5\nfamily: [nig, gauss]\ngof: {bootstrap: 19, qq: 20, seed: 3}\nquiet: true\n' > j.yaml
run "$G" run j.yaml
run $MPI -np 2 "$G" run j.yaml --out r2.h5
run "$G" gof --model r1.h5:/fits/gauss_tol1e-10_s1 --data x.h5 --out bg.h5 --bootstrap 19 --seed 3 --qq 20

"$PY" - <<'PY' || fail=1
import h5py, numpy as np
def names(g, pre=""):
    for k in g:
        if isinstance(g[k], h5py.Group): yield from names(g[k], pre + k + "/")
        else: yield pre + k
def same(a, b, what):
    ka, kb = sorted(names(a)), sorted(names(b))
    assert ka == kb, f"{what}: datasets differ: {set(ka) ^ set(kb)}"
    diff = [k for k in ka if not np.array_equal(a[k][()], b[k][()], equal_nan=True)]
    assert not diff, f"{what}: {diff} differ"
    print(f"ok   {what}: {len(ka)} datasets, bit for bit")
boot = [m + k + "_p_boot" for m in ("margins/", "radial/") for k in ("ks", "ad", "cvm")]
b1, b3 = h5py.File("b1.h5", "r"), h5py.File("b3.h5", "r")
for k in boot:
    v = np.atleast_1d(b1[k][()])
    assert np.all(v >= 1 / 20) and np.all(v <= 1), (k, v)
    assert np.allclose(v * 20, np.round(v * 20), rtol=0, atol=1e-12), (k, v)
assert b1["margins/ks_p_boot"].shape == (2,) and b1["radial/ks_p_boot"].shape == ()
for k, want in (("bootstrap", 19), ("seed", 3), ("bootstrap_failed", 0), ("bootstrap_max_iter", 0)):
    assert b1.attrs[k] == want and b3.attrs[k] == want, (k, b1.attrs[k], b3.attrs[k])
print("ok   p_boot = (1 + k)/20 in [1/20, 1]:", {k: np.round(np.atleast_1d(b1[k][()]), 3).tolist() for k in boot})
same(b1, b3, "1 and 3 ranks")
h = h5py.File("bh.h5", "r")
ph = np.concatenate([np.atleast_1d(h[k][()]) for k in boot])
print(f"{'ok  ' if np.all(ph <= 1 / 20 + 1e-12) else 'FAIL'} t(3) data fitted as gauss: every p_boot {ph.max():.3g} (floor 1/20)")
assert np.all(ph <= 1 / 20 + 1e-12)
f = h5py.File("bf.h5", "r")
assert f.attrs["bootstrap_failed"] == 9 and "replicate 2:" in f.attrs["bootstrap_note"], dict(f.attrs)
v = np.concatenate([np.atleast_1d(f[k][()]) for k in boot])
assert np.allclose(v * 11, np.round(v * 11), rtol=0, atol=1e-12), v
print("ok   failed refits: bootstrap_failed = 9, p-values over the 10 others:", f.attrs["bootstrap_note"])
m = h5py.File("bm.h5", "r")
assert m.attrs["bootstrap_max_iter"] == 5 and m.attrs["bootstrap_failed"] == 0, dict(m.attrs)
print("ok   refits capped by --max-iter 2 kept and counted: bootstrap_max_iter = 5")
r1, r2 = h5py.File("r1.h5", "r"), h5py.File("r2.h5", "r")
for fit, ref in (("nig_tol1e-10_s1", b1), ("gauss_tol1e-10_s1", h5py.File("bg.h5", "r"))):
    g1, g2 = r1[f"fits/{fit}/gof"], r2[f"fits/{fit}/gof"]
    same(ref, g1, f"job key gof ({fit}, 1 rank) and ghfit gof")
    same(g1, g2, f"job key gof ({fit}): 1 and 2 ranks")
    assert g1.attrs["bootstrap"] == 19 and g1.attrs["seed"] == 3 and g1.attrs["n_obs"] == 300
PY

expect() { refused gof "$@"; }
for b in 0 -3 abc 1.5 100001 ""; do
  expect "--bootstrap: '$b'" -- --model nig.h5 --data x.h5 --out out.h5 --bootstrap "$b"
done
expect "--seed: '-1'" -- --model nig.h5 --data x.h5 --out out.h5 --bootstrap 5 --seed -1
expect "--tol: '0'" -- --model nig.h5 --data x.h5 --out out.h5 --bootstrap 5 --tol 0

bad() { # bad PATTERN NP GOF-VALUE: the job refused, exit 2, one line naming the key, no result file
  local pat=$1 np=$2
  printf 'data: x.h5\nout: bad.h5\nfamily: nig\nquiet: true\ngof: %s\n' "$3" > b.yaml
  rm -f bad.h5*
  timeout 120 $MPI -np "$np" "$G" run b.yaml >b.out 2>b.err
  local rc=$?
  if [ $rc -ne 2 ] || [ "$(grep -c "^ghfit: " b.err)" -ne 1 ] || ! grep -q -- "^ghfit: error: .*$pat" b.err || ls bad.h5* >/dev/null 2>&1; then
    echo "FAIL [gof: $3]: exit $rc"; cat b.err; fail=1
  else echo "ok   [gof: $3]: $(grep "^ghfit: " b.err)"; fi
}
bad "gof.bootstrap: '-1'" 1 '{bootstrap: -1}'
bad "gof.qq: '0'" 2 '{qq: 0}'
bad "gof: expected true, false" 1 'maybe'
bad "unknown key 'boot' in gof" 1 '{boot: 5}'
bad "gof.data: y3.h5:/X has 3 columns" 2 '{data: y3.h5}'
bad "gof.data: " 2 '{data: nope.h5}'
[ $fail -eq 0 ] && echo "cli_gofboot: all passed"
exit $fail
