#!/usr/bin/env bash
# Per-iteration time of plain EM (--accel none) without and with observation
# weights, and with 10% of the entries missing at random (--missing em), at
# N = 2e5, d = 10 (a benchmark, not a test): the difference of a 60- and a
# 10-iteration fit over 50 iterations, median of 3 (a shared machine is noisy).
# usage: bench/missing_bench.sh GHFIT H5GET WORKDIR [NP]
set -euo pipefail
G=$1; H=$2; W=$3; NP=${4:-1}
PY=/usr/bin/python3
mkdir -p "$W"; cd "$W"
[ -e b10.h5 ] || {
  "$G" generate --model nig --dim 10 --n 200000 --seed 4 --out b10.h5 >/dev/null
  "$PY" -c "
import h5py, numpy as np
with h5py.File('b10.h5', 'a') as f:
    X = f['/X'][...]; M = X.copy(); M[np.random.default_rng(1).random(X.shape) < 0.1] = np.nan
    f['/M'] = M; f['/w'] = np.random.default_rng(2).random(X.shape[0])"
}
per_iter() {
  local v=()
  for _ in 1 2 3; do
    local t=()
    for it in 10 60; do
      mpirun -np "$NP" "$G" fit --data b10.h5 "$@" --model nig --accel none --max-iter $it --tol 0 --out bt.h5 --quiet
      t+=("$("$H" bt.h5 /fits/nig elapsed_s)")
    done
    v+=("$(awk -v a="${t[0]}" -v b="${t[1]}" 'BEGIN { print (b - a) / 50 * 1000 }')")
  done
  printf "%s\n" "${v[@]}" | sort -g | sed -n 2p
}
p=$(per_iter); w=$(per_iter --weights /w); m=$(per_iter --dataset /M --missing em)
echo "N=2e5 d=10 nig, $NP rank(s), ms per EM iteration: plain $p, weighted $w, 10% missing (--missing em) $m"
awk -v p="$p" -v w="$w" -v m="$m" 'BEGIN { printf "ratios: weighted %.2fx, missing %.2fx\n", w / p, m / p }'
