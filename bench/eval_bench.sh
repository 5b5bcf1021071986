#!/usr/bin/env bash
# `ghfit eval` against a fit's time per EM iteration (issue 11, acceptance 7:
# eval costs at most one E-step per row).  Generates N x D GH rows, fits GH
# with ITERS plain EM iterations (--accel none --tol 0), then scores the same
# rows with `ghfit eval` on the same ranks.  Per iteration = (estep +
# allreduce + mstep seconds, max over ranks, from the result file's profile:
# phases read init estep allreduce mstep write total) / (iterations + 1);
# eval = its own "eval" seconds (backend set-up, the pass, the exact sums;
# reading and writing are reported apart).  Prints a markdown table.
# usage: bench/eval_bench.sh [BUILD_DIR] [N] [D] [RANKS] [ITERS]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$here/build}; N=${2:-1000000}; D=${3:-10}; NP=${4:-2}; IT=${5:-10}
G=$B/ghfit; H=$B/h5get
. "$here/scripts/mpienv.sh"
# one OpenMP thread per rank unless told otherwise (ranks x threads must not
# oversubscribe the cores)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
W=$B/work/bench_eval; mkdir -p "$W"
data=$W/gh_${N}_${D}.h5
[ -f "$data" ] || mpirun -np $NP "$G" generate --model gh --dim $D --n $N --seed 7 --p -1.5 --a 2 --b 1 --out "$data" >/dev/null
rm -f "$W/fit.h5" # a fresh result file
mpirun -np $NP --bind-to none "$G" fit --data "$data" --model gh --out "$W/fit.h5" --max-iter $IT --tol 0 --accel none --quiet
line=$(mpirun -np $NP --bind-to none "$G" eval --model "$W/fit.h5" --data "$data" --out "$W/scores.h5")
"$H" "$W/fit.h5" /fits/gh/profile/max | awk -v it="$("$H" "$W/fit.h5" /fits/gh n_iter)" -v line="$line" \
    -v n=$N -v d=$D -v np=$NP '
  { v[NR] = $1 }
  END {
    per = (v[3] + v[4] + v[5]) / (it + 1); es = (v[3] + v[4]) / (it + 1)
    match(line, /read [0-9.]+ s/); rd = substr(line, RSTART + 5, RLENGTH - 7)
    match(line, /eval [0-9.]+ s/); ev = substr(line, RSTART + 5, RLENGTH - 7)
    match(line, /write [0-9.]+ s/); wr = substr(line, RSTART + 6, RLENGTH - 8)
    printf "| N | d | ranks | fit s/iter | fit E-step s/iter | eval s | eval / E-step | eval read s | eval write s |\n"
    printf "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    printf "| %d | %d | %d | %.3f | %.3f | %.3f | %.2f | %.3f | %.3f |\n", n, d, np, per, es, ev, ev / es, rd, wr
  }'
