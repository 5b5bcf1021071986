#!/usr/bin/env bash
# Bad input to `ghfit fit` and `ghfit generate`: each case must exit with the
# documented status, print exactly one "ghfit: error:" line that names the
# file/dataset/option/row, leave no output file, and (under mpirun -np 2)
# end every rank.
# usage: bad_input.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
PY=/usr/bin/python3
rm -rf "$W"; mkdir -p "$W"; cd "$W"
fail=0; n=0
"$G" generate --model nig --dim 3 --n 500 --seed 1 --out good.h5 >/dev/null || { echo "cannot make good.h5"; exit 1; }

# expect STATUS PATTERN -- args...   (singleton run: stderr must be one line)
expect() {
  local want=$1 pat=$2; shift 3
  n=$((n+1))
  rm -f out.h5
  "$G" "$@" >stdout.txt 2>stderr.txt
  local rc=$?
  local lines; lines=$(grep -c . stderr.txt)
  if [ $rc -ne "$want" ]; then echo "FAIL [$*]: exit $rc, expected $want"; cat stderr.txt; fail=1; return; fi
  if [ "$want" -ne 0 ]; then
    if [ "$lines" -ne 1 ] || ! grep -q "^ghfit: error: " stderr.txt; then
      echo "FAIL [$*]: expected one 'ghfit: error:' line, got:"; cat stderr.txt; fail=1; return; fi
    if ! grep -q -- "$pat" stderr.txt; then echo "FAIL [$*]: message lacks '$pat':"; cat stderr.txt; fail=1; return; fi
    if ls out.h5* >/dev/null 2>&1; then echo "FAIL [$*]: output file left behind"; ls -l out.h5*; fail=1; return; fi
  fi
  echo "ok   [$*] -> $rc: $(head -c 200 stderr.txt)"
}

expect 2 "missing.h5" -- fit --data missing.h5 --model gh --out out.h5
echo "this is not HDF5" > text.h5
expect 2 "text.h5" -- fit --data text.h5 --model gh --out out.h5
head -c 1500 good.h5 > trunc.h5
expect 2 "trunc.h5" -- fit --data trunc.h5 --model gh --out out.h5
expect 2 "/nope" -- fit --data good.h5 --dataset /nope --model gh --out out.h5
expect 2 "model" -- fit --data good.h5 --model frobnic --out out.h5
expect 2 "tol" -- fit --data good.h5 --model gh --out out.h5 --tol abc
expect 2 "max-iter" -- fit --data good.h5 --model gh --out out.h5 --max-iter 1.5
expect 2 "backend" -- fit --data good.h5 --model gh --out out.h5 --backend tpu
expect 2 "no-such-dir" -- fit --data good.h5 --model gh --out no-such-dir/out.h5
expect 2 "frobnicate" -- fit --data good.h5 --model gh --out out.h5 --frobnicate
expect 2 "dim" -- generate --model gh --dim x --n 10 --seed 1 --out out.h5
"$G" generate --model gh --dim 5 --n 4 --seed 1 --out few.h5 >/dev/null
expect 2 "d + 1" -- fit --data few.h5 --model gh --out out.h5
if [ -x "$PY" ] && "$PY" -c "import h5py" 2>/dev/null; then
  "$PY" - <<'PY'
import h5py, numpy as np
rng = np.random.default_rng(0)
x = rng.standard_normal((400, 3))
x[17, 1] = np.nan; x[250, 0] = np.inf; x[300, 2] = np.nan
with h5py.File("nan.h5", "w") as f: f["X"] = x
with h5py.File("onedim.h5", "w") as f: f["X"] = rng.standard_normal(100)
with h5py.File("threedim.h5", "w") as f: f["X"] = rng.standard_normal((10, 3, 2))
with h5py.File("strings.h5", "w") as f: f["X"] = np.array([b"a", b"b"], dtype="S1").reshape(2, 1)
y = rng.standard_normal((400, 3)); y[:, 1] = 3.0
with h5py.File("const.h5", "w") as f: f["X"] = y
z = rng.standard_normal((400, 3)); z[:, 2] = z[:, 0]
with h5py.File("dup.h5", "w") as f: f["X"] = z
w = rng.standard_normal((400, 2)) * 1e300
with h5py.File("huge.h5", "w") as f: f["X"] = w
with h5py.File("tiny.h5", "w") as f: f["X"] = w * 1e-300 * 1e-300
t = rng.standard_normal((400, 2)); t[:200] = [0.3, -0.1]
with h5py.File("ties.h5", "w") as f: f["X"] = t
PY
  expect 2 "row 17" -- fit --data nan.h5 --model nig --out out.h5
  expect 2 "3 rows" -- fit --data nan.h5 --model nig --out out.h5
  expect 0 "" -- fit --data nan.h5 --model nig --out out.h5 --drop-nonfinite --quiet
  dropped=$("$H" out.h5 /fits/nig n_dropped 2>/dev/null || echo missing)
  nobs=$("$H" out.h5 /fits/nig n_obs 2>/dev/null || echo missing)
  if [ "$dropped" != "3" ] || [ "$nobs" != "397" ]; then echo "FAIL: --drop-nonfinite recorded n_dropped=$dropped n_obs=$nobs"; fail=1; fi
  expect 2 "onedim.h5" -- fit --data onedim.h5 --model gh --out out.h5
  expect 2 "threedim.h5" -- fit --data threedim.h5 --model gh --out out.h5
  expect 2 "strings.h5" -- fit --data strings.h5 --model gh --out out.h5
  expect 2 "column 1" -- fit --data const.h5 --model gh --out out.h5
  # degenerate but not invalid: a finite fit or one clear failure, never a crash
  for f in dup huge tiny ties; do
    for m in gh nig; do
      n=$((n+1)); rm -f out.h5
      "$G" fit --data $f.h5 --model $m --out out.h5 --quiet --max-iter 300 >stdout.txt 2>stderr.txt; rc=$?
      if [ $rc -eq 0 ]; then
        ll=$("$H" out.h5 /fits/$m loglik); st=$("$H" out.h5 /fits/$m status)
        case "$ll" in *nan*|*inf*) echo "FAIL [$f $m]: non-finite loglik $ll"; fail=1;; *) echo "ok   [$f $m]: $st (loglik $ll)";; esac
      elif [ $rc -eq 1 ] || [ $rc -eq 2 ]; then
        if [ "$(grep -c . stderr.txt)" -ne 1 ]; then echo "FAIL [$f $m]: exit $rc without one clear line"; cat stderr.txt; fail=1
        else echo "ok   [$f $m]: exit $rc: $(cat stderr.txt)"; fi
      else echo "FAIL [$f $m]: exit $rc (crash?)"; cat stderr.txt; fail=1; fi
    done
  done
else
  echo "h5py not available at $PY: skipping the h5py-made cases"; fail=1
fi
# the same errors under mpirun -np 2: every rank ends, with the status
for args in "--data missing.h5" "--data good.h5 --dataset /nope" "--data few.h5"; do
  n=$((n+1)); rm -f out.h5
  timeout 60 mpirun -np 2 "$G" fit $args --model gh --out out.h5 >/dev/null 2>stderr.txt; rc=$?
  if [ $rc -eq 124 ]; then echo "FAIL [mpirun $args]: hung"; fail=1
  elif [ $rc -eq 0 ]; then echo "FAIL [mpirun $args]: exit 0"; fail=1
  elif ls out.h5* >/dev/null 2>&1; then echo "FAIL [mpirun $args]: output left"; fail=1
  else echo "ok   [mpirun -np 2 $args] -> $rc"; fi
done
echo "bad_input: $((n)) cases, $([ $fail -eq 0 ] && echo all passed || echo FAILURES)"
exit $fail
