#!/usr/bin/env bash
# Time per EM iteration of `ghfit fit` (CPU backend) at N = 1e6, d = 10, GH and
# NIG, on 1 and 2 ranks (1 OpenMP thread per rank) and on 1 rank x 2 threads.
# Plain EM (--accel none) with --tol 0 and a fixed iteration count, so every
# run does the same work; time per iteration = (estep + allreduce + mstep) /
# iterations from the result file's profile (max over ranks; the GH starts are in "init"), which excludes
# reading the file and the start.  Writes results/bench_fit.md.
# usage: bench/bench_fit.sh [BUILD_DIR] [N] [D] [ITERS]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$here/build}; N=${2:-1000000}; D=${3:-10}; IT=${4:-20}
G=$B/ghfit
. "$here/scripts/mpienv.sh"
out=$here/results; mkdir -p "$out/bench_fit"; W=$out/bench_fit
[ -f "$W/gh_${N}_${D}.h5" ] || "$G" generate --model gh --dim $D --n $N --seed 7 --p -1.5 --a 2 --b 1 --out "$W/gh_${N}_${D}.h5" >/dev/null
[ -f "$W/nig_${N}_${D}.h5" ] || "$G" generate --model nig --dim $D --n $N --seed 8 --out "$W/nig_${N}_${D}.h5" >/dev/null
py=/usr/bin/python3
report=$out/bench_fit.md
{
echo "# ghfit fit: time per EM iteration (CPU backend)"
echo
echo "N = $N, d = $D, $IT plain EM iterations (--accel none --tol 0), $(nproc) cores, $(date -u +%F)."
echo "ms/iter = (estep + allreduce + mstep seconds, max over ranks) / iterations."
echo
echo "| model | ranks x threads | ms/iter | estep ms | allreduce ms | mstep ms |"
echo "| --- | --- | --- | --- | --- | --- |"
} > "$report"
for model in gh nig; do
  for cfg in "1 1" "2 1" "1 2"; do
    set -- $cfg; np=$1; th=$2
    OMP_NUM_THREADS=$th mpirun -np $np --bind-to none "$G" fit --data "$W/${model}_${N}_${D}.h5" --model $model \
        --out "$W/r_${model}_${np}_${th}.h5" --max-iter $IT --tol 0 --accel none --quiet
    $py - "$W/r_${model}_${np}_${th}.h5" $model "$np x $th" >> "$report" <<'PY'
import sys, h5py
f = h5py.File(sys.argv[1], "r"); g = f["fits/" + sys.argv[2]]
names = [n.decode() if isinstance(n, bytes) else n for n in g["profile/phase_names"][()]]
mx = dict(zip(names, g["profile/max"][()]))
it = int(g.attrs["n_iter"]); e = mx["estep"]; a = mx["allreduce"]; m = mx["mstep"]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {1e3*(e+a+m)/(it+1):.1f} | {1e3*e/(it+1):.1f} | {1e3*a/(it+1):.2f} | {1e3*m/(it+1):.2f} |")
PY
  done
done
cat "$report"
