#!/usr/bin/env bash
# The start of a GH fit (profile phase "init": the subordinator starts and the
# nested NIG fit) against the EM proper, for one or two ghfit binaries side by
# side (e.g. before and after a change): N rows of GH data (p = -1.5, a = 2,
# b = 1, seed 7) in d = 3 and d = 10, 2 ranks x 1 OpenMP thread, default
# options; each configuration R times, alternating binaries, the fastest run
# kept (the machine may be shared).  Prints a markdown table: init, EM
# (estep + allreduce + mstep), total (max over ranks), iterations, the final
# log-likelihood.
# usage: bench/bench_init.sh GHFIT [GHFIT_OTHER] [N] [R] [WORKDIR]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
A=$1; Bin=${2:-}; N=${3:-1000000}; R=${4:-3}; W=${5:-$here/results/bench_init}
. "$here/scripts/mpienv.sh"
mkdir -p "$W"; rm -f "$W/runs.txt"
py=/usr/bin/python3
for D in 3 10; do
  [ -f "$W/gh_${N}_$D.h5" ] || "$A" generate --model gh --dim $D --n $N --seed 7 --p -1.5 --a 2 --b 1 \
      --out "$W/gh_${N}_$D.h5" >/dev/null
done
echo "| binary | d | init s | EM s | total s | iterations | loglik |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for D in 3 10; do
  for r in $(seq "$R"); do
    for G in $A $Bin; do
      OMP_NUM_THREADS=1 mpirun -np 2 --bind-to none "$G" fit --data "$W/gh_${N}_$D.h5" --model gh \
          --out "$W/r.h5" --quiet
      "$py" - "$W/r.h5" "$G" "$D" >> "$W/runs.txt" <<'PY'
import sys, h5py
g = h5py.File(sys.argv[1], "r")["fits/gh"]
names = [n.decode() if isinstance(n, bytes) else n for n in g["profile/phase_names"][()]]
mx = dict(zip(names, g["profile/max"][()]))
em = mx["estep"] + mx["allreduce"] + mx["mstep"]
print(sys.argv[2], sys.argv[3], mx["init"], em, mx["total"], int(g.attrs["n_iter"]), repr(float(g.attrs["loglik"])))
PY
    done
  done
  for G in $A $Bin; do
    awk -v g="$G" -v d=$D '$1 == g && $2 == d && (best == "" || $5 < best) { best = $5; l = $0 } END { print l }' "$W/runs.txt"
  done
done | awk '{ printf "| %s | %s | %.2f | %.2f | %.2f | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7 }'
rm -f "$W/runs.txt" "$W/r.h5"
