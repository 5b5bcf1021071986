#!/usr/bin/env bash
# Per-iteration time of plain EM (--accel none) without and with observation
# weights, and with 10% of the entries missing at random (--missing em), at
# d = 10 (a benchmark, not a test): the difference of a long and a short fit
# (IT1 and IT0 iterations, default 60 and 10) per iteration, median of 3 (a
# shared machine is noisy).  With a second ghfit (BEFORE), both binaries are
# timed side by side, their runs interleaved.  CPUTIME=1 measures CPU
# seconds (user + sys of mpirun and its ranks) instead of the fit's wall
# time: steadier on a loaded machine, but only with NP=1 (waiting ranks spin).
# usage: bench/missing_bench.sh GHFIT H5GET WORKDIR [NP] [N] [BEFORE]
#   e.g. OMP_NUM_THREADS=1 bench/missing_bench.sh build/ghfit build/h5get /tmp/mb 2 1000000 /tmp/ghfit.main
#        OMP_NUM_THREADS=1 CPUTIME=1 IT0=5 IT1=45 bench/missing_bench.sh ... /tmp/mb 1 500000 /tmp/ghfit.main
set -euo pipefail
G=$(realpath "$1"); H=$(realpath "$2"); W=$3; NP=${4:-1}; N=${5:-200000}
B=${6:+$(realpath "$6")}
IT0=${IT0:-10}; IT1=${IT1:-60}
PY=/usr/bin/python3
mkdir -p "$W"; cd "$W"
D=b10_$N.h5
[ -e "$D" ] || {
  "$G" generate --model nig --dim 10 --n "$N" --seed 4 --out "$D" >/dev/null
  "$PY" -c "
import h5py, numpy as np
with h5py.File('$D', 'a') as f:
    X = f['/X'][...]; M = X.copy(); M[np.random.default_rng(1).random(X.shape) < 0.1] = np.nan
    f['/M'] = M; f['/w'] = np.random.default_rng(2).random(X.shape[0])"
}
# ms per iteration of binary $1 with options $2..: one sample
sample() {
  local g=$1; shift
  local t=()
  for it in $IT0 $IT1; do
    if [ "${CPUTIME:-0}" = 1 ]; then
      /usr/bin/time -f "%U %S" -o cpu.txt mpirun -np "$NP" "$g" fit --data "$D" "$@" --model nig --accel none \
        --max-iter $it --tol 0 --out bt.h5 --quiet
      t+=("$(awk '{ print $1 + $2 }' cpu.txt)")
    else
      mpirun -np "$NP" "$g" fit --data "$D" "$@" --model nig --accel none --max-iter $it --tol 0 --out bt.h5 --quiet
      t+=("$("$H" bt.h5 /fits/nig elapsed_s)")
    fi
  done
  awk -v a="${t[0]}" -v b="${t[1]}" -v n=$((IT1 - IT0)) 'BEGIN { print (b - a) / n * 1000 }'
}
median() { printf "%s\n" "$@" | sort -g | sed -n 2p; }
declare -A res
for c in plain weighted missing; do
  case $c in plain) o=();; weighted) o=(--weights /w);; missing) o=(--dataset /M --missing em);; esac
  a=(); b=()
  for _ in 1 2 3; do
    a+=("$(sample "$G" "${o[@]}")")
    [ -n "$B" ] && b+=("$(sample "$B" "${o[@]}")")
  done
  res[$c]=$(median "${a[@]}")
  [ -n "$B" ] && res[b$c]=$(median "${b[@]}")
done
report() { # label plain weighted missing
  echo "$1: N=$N d=10 nig, $NP rank(s), OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}, $([ "${CPUTIME:-0}" = 1 ] && echo CPU || echo wall) ms per EM iteration: plain $2, weighted $3, 10% missing (--missing em) $4"
  awk -v p="$2" -v w="$3" -v m="$4" 'BEGIN { printf "  ratios: weighted %.2fx, missing %.2fx\n", w / p, m / p }'
}
report "ghfit" "${res[plain]}" "${res[weighted]}" "${res[missing]}"
[ -n "$B" ] && report "before ($B)" "${res[bplain]}" "${res[bweighted]}" "${res[bmissing]}"
exit 0
