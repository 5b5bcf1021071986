#!/usr/bin/env bash
# ghfit gof without gathering the rows (src/pipeline/gofdist.c): the file of
# 1, 2, 3 and 4 ranks holds the same datasets and attributes, bit for bit
# (but n_ranks, command_line and created), for data with ties (values rounded to 0.05)
# and a non-finite row dropped, 4999 rows (uneven shards): once with every
# PIT exact and once with knots and interpolation (--exact-max 500 --knots
# 64), the per-row PITs included.  The interpolated PITs stay within the
# reported error of the exact ones.  A cdf failing on one rank
# (GHFIT_TEST_FAIL=gofcdf@RANK) ends every rank with exit 1 and one error line.
# 2^31 rows x 1 (more than 2^31 values): refused on 1 rank (a rank's share),
# accepted by `ghfit check --ranks 2 gof`.
# usage: cli_gofdist.sh GHFIT WORKDIR
set -uo pipefail
G=$1; W=$2
PY=/usr/bin/python3
MPI="mpirun --oversubscribe"
rm -rf "$W"; mkdir -p "$W"; cd "$W" || exit 1
fail=0
"$PY" -c "import h5py, numpy" 2>/dev/null || { echo "h5py/numpy not available at $PY (Debian python3-h5py)"; exit 1; }
"$G" generate --model gh --dim 3 --n 5000 --seed 7 --p -1.0 --gamma 0.4,-0.2,0.1 --out g.h5 >/dev/null || { echo "generate failed"; exit 1; }
"$PY" - <<'PY' || exit 1
import h5py, numpy as np
x = np.round(h5py.File("g.h5", "r")["X"][()] * 20) / 20   # ties everywhere
x[1234, 2] = np.nan                                        # dropped: rows after it shift
with h5py.File("x.h5", "w") as f:
    f["X"] = x
PY
"$G" fit --data g.h5 --model t --out t.h5 --quiet || { echo "fit failed"; exit 1; }

run() { "$@" >/dev/null || { echo "FAIL: $*"; fail=1; }; }
for np in 1 2 3 4; do
  run $MPI -np $np "$G" gof --model t.h5 --data x.h5 --drop-nonfinite --qq 25 --out e$np.h5 --quiet
  run $MPI -np $np "$G" gof --model t.h5 --data x.h5 --drop-nonfinite --qq 25 --exact-max 500 --knots 64 \
      --out k$np.h5 --quiet
done
"$PY" - <<'PY' || fail=1
import h5py, numpy as np
def items(g, pre=""):
    for k, v in g.attrs.items():
        if k not in ("n_ranks", "command_line", "created"): yield pre + "@" + k, v
    for k in g:
        if isinstance(g[k], h5py.Group): yield from items(g[k], pre + k + "/")
        else:
            yield pre + k, g[k][()]
            yield from ((pre + k + "@" + a, v) for a, v in g[k].attrs.items())
def same(fa, fb):
    a, b = dict(items(h5py.File(fa, "r"))), dict(items(h5py.File(fb, "r")))
    assert a.keys() == b.keys(), f"{fa} vs {fb}: {set(a) ^ set(b)}"
    bad = [k for k in a if not (np.asarray(a[k]).tobytes() == np.asarray(b[k]).tobytes())]
    assert not bad, f"{fa} vs {fb}: {bad} differ"
    return len(a)
for p in ("e", "k"):
    for np_ in (2, 3, 4):
        n = same(f"{p}1.h5", f"{p}{np_}.h5")
    print(f"ok   {'exact' if p == 'e' else 'interpolated'} PITs: 1, 2, 3 and 4 ranks, {n} datasets and attributes bit for bit")
e, k = h5py.File("e1.h5", "r"), h5py.File("k1.h5", "r")
assert e.attrs["n_obs"] == 4999 and e.attrs["n_dropped"] == 1 and e["margins/pit"].shape == (4999, 3)
assert e.attrs["pit_max_error"] == 0 and "exact" in e.attrs["pit_method"] and "interpolated" in k.attrs["pit_method"]
err = k.attrs["pit_max_error"]
dp = np.abs(e["margins/pit"][()] - k["margins/pit"][()]).max()
assert 0 < err < 1e-3 and dp < 10 * err, (err, dp)
# ties: equal values have equal PITs
x = np.round(h5py.File("x.h5", "r")["X"][()], 10); x = x[np.isfinite(x).all(axis=1)]
u = k["margins/pit"][()]
for j in range(3):
    order = np.lexsort((u[:, j], x[:, j]))
    xs, us = x[order, j], u[order, j]
    assert np.all(np.diff(us)[np.diff(xs) == 0] == 0) and np.all(np.diff(us) >= 0)
print(f"ok   interpolated vs exact PITs: largest difference {dp:.2g} (reported error {err:.2g}); ties share a PIT")
PY
# a cdf that fails on one rank only (GHFIT_TEST_FAIL=gofcdf@RANK): every
# rank leaves (no hang), exit 1, one error line, no output file
for mode in "" "--exact-max 500 --knots 64"; do
  for r in 0 2; do
    rm -f out.h5*
    GHFIT_TEST_FAIL=gofcdf@$r timeout 60 $MPI -np 3 "$G" gof --model t.h5 --data x.h5 --drop-nonfinite --qq 25 \
        $mode --out out.h5 --quiet >stdout.txt 2>stderr.txt
    rc=$?
    if [ $rc -eq 1 ] && [ "$(grep -c '^ghfit: ' stderr.txt)" -eq 1 ] && grep -q "^ghfit: error: gof: the cdf of margin 0 failed" stderr.txt \
       && ! ls out.h5* >/dev/null 2>&1; then
      echo "ok   cdf failing on rank $r (${mode:-exact}): $(cat stderr.txt)"
    else
      echo "FAIL cdf failing on rank $r (${mode:-exact}): exit $rc"; cat stderr.txt; fail=1
    fi
  done
done
# more than 2^31 values (2^31 rows x 1, every chunk the same compressed
# block: a 17 MB file): no longer refused for N d > INT_MAX, but a rank's share
# must stay below 2^31 rows: 1 rank is refused before reading (exit 2, one
# line, no file); `ghfit check --ranks 2 gof` accepts it
"$PY" - <<'PY' || exit 1
import h5py, numpy as np, zlib
rows, n = 1 << 22, 1 << 31
block = np.tile(np.random.default_rng(1).normal(size=(256, 1)), (rows // 256, 1))
comp = zlib.compress(block.tobytes(), 9)
with h5py.File("huge.h5", "w") as f:
    ds = f.create_dataset("X", shape=(n, 1), dtype="f8", chunks=(rows, 1), compression="gzip")
    for r0 in range(0, n, rows):
        ds.id.write_direct_chunk((r0, 0), comp)
    f["S"] = block[:2000]
PY
"$G" fit --data huge.h5 --dataset /S --model gauss --out f1.h5 --quiet || { echo "fit d = 1 failed"; fail=1; }
rm -f out.h5*
timeout 60 "$G" gof --model f1.h5 --data huge.h5 --out out.h5 --quiet >stdout.txt 2>stderr.txt
rc=$?
if [ $rc -eq 2 ] && [ "$(grep -c '^ghfit: ' stderr.txt)" -eq 1 ] && grep -q "2147483648 rows on 1 rank: .*use at least 2 ranks" stderr.txt \
   && ! ls out.h5* >/dev/null 2>&1; then
  echo "ok   2^31 rows on 1 rank refused: $(cat stderr.txt)"
else
  echo "FAIL 2^31 rows on 1 rank: exit $rc"; cat stderr.txt; fail=1
fi
if "$G" check --ranks 2 gof --model f1.h5 --data huge.h5 --out out.h5 >stdout.txt 2>stderr.txt \
   && grep -q "would check 2147483648 rows" stdout.txt stderr.txt; then
  echo "ok   ghfit check --ranks 2 gof: $(grep -h 'would check' stdout.txt stderr.txt)"
else
  echo "FAIL ghfit check --ranks 2 gof on 2^31 rows"; cat stdout.txt stderr.txt; fail=1
fi
rm -f huge.h5
[ $fail -eq 0 ] && echo "cli_gofdist: all passed"
exit $fail
