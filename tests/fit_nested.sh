#!/usr/bin/env bash
# GH's nested NIG start (src/em/em_nested.c): the NIG run stops at tol 1e-6
# and is continued to --tol only when the GH fit ends close to it:
#   - GH data far from NIG: no continuation;
#   - Gaussian data (GH ends close to NIG): the NIG run is continued and GH
#     stays above it;
#   - Gaussian rows on which the continued NIG run ends above GH (--max-iter
#     200): GH restarts from it;
#   - in every case GH's log-likelihood is at least that of the NIG fit of
#     the same data and options (minus 1e-9 relative), and the restart case
#     gives the same log-likelihood and iterations on 1 and 2 ranks.
# usage: fit_nested.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
PY=/usr/bin/python3
. "$(dirname "$0")/lib.sh"
rm -rf "$W"; mkdir -p "$W"; cd "$W"
"$PY" -c "import h5py" 2>/dev/null || { echo "h5py not available at $PY"; exit 1; }
"$G" generate --model gh --dim 3 --n 20000 --seed 5 --p -1.5 --a 2 --b 1 --out far.h5 >/dev/null
"$G" generate --model gauss --dim 3 --n 5000 --seed 3 --out gauss.h5 >/dev/null
"$PY" -c "
import h5py, numpy as np
with h5py.File('rows.h5', 'w') as f: f['X'] = np.random.default_rng(20261201).standard_normal((5000, 3))"
fail=0
# case DATA EXPECT NP [fit options]: EXPECT none|continued|restarted
case_() {
  local data=$1 want=$2 np=$3; shift 3
  mpirun -np $np "$G" fit --data $data.h5 --model gh --out gh.h5 "$@" >gh.txt 2>err.txt || { echo "FAIL [$data]: gh exit $?"; cat err.txt; fail=1; return; }
  mpirun -np $np "$G" fit --data $data.h5 --model nig --out nig.h5 --quiet "$@" >/dev/null 2>err.txt || { echo "FAIL [$data]: nig exit $?"; cat err.txt; fail=1; return; }
  local got=none
  grep -q "nested NIG fit, continued" gh.txt && got=continued
  grep -q "restarted GH" gh.txt && got=restarted
  [ "$got" = "$want" ] || { echo "FAIL [$data np$np]: nested NIG run $got, expected $want"; grep nested gh.txt; fail=1; }
  LLG=$("$H" gh.h5 /fits/gh loglik); IT=$("$H" gh.h5 /fits/gh n_iter); LLN=$("$H" nig.h5 /fits/nig loglik)
  awk -v g="$LLG" -v n="$LLN" 'BEGIN { t = 1e-9 * (n < 0 ? -n : n); exit !(g >= n - t) }' &&
    echo "ok   [$data np$np]: $got; GH $LLG >= NIG $LLN" ||
    { echo "FAIL [$data np$np]: GH $LLG below NIG $LLN"; fail=1; }
}
case_ far none 1
case_ gauss continued 1
case_ rows restarted 1 --max-iter 200
ll1=$LLG; it1=$IT
case_ rows restarted 2 --max-iter 200
[ "$IT" = "$it1" ] && relcheck "$LLG" "$ll1" 1e-12 >/dev/null ||
  { echo "FAIL [rows]: 2 ranks $LLG after $IT iterations, 1 rank $ll1 after $it1"; fail=1; }
echo "fit_nested: $([ $fail -eq 0 ] && echo all passed || echo FAILURES)"
exit $fail
