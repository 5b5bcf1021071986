#!/usr/bin/env bash
# The cost of a mixture iteration (--components K; src/em/em_mixture.c)
# against the single law's, side by side in one run (issue 23, acceptance 4):
# NIG data, d = 10, N = 2e5 (ghfit generate), 2 ranks x 1 thread, plain EM
# (--accel none: one E-step per iteration), --tol 0 --max-iter ITERS
# --starts 1, REPS rounds alternating K = 1 and K = 4.  Per iteration: (estep
# + allreduce + mstep, max over ranks) / (n_iter + 1) from the result file's
# profile; medians and the ratio K = 4 / K = 1 (ideal: about 4, the E-step
# being per component).  K = 1 runs the CPU backend's block kernels, K = 4
# the mixture's own per-row E-step.  Writes results/mixture_bench.md and
# prints it.
#
# usage: bench/mixture_bench.sh [--build DIR] [--reps R] [--iters K] [--n N] [--d D] [--np P]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
B=$here/build; REPS=3; IT=10; N=200000; D=10; NP=2; K=4
while [ $# -gt 0 ]; do
  case $1 in
    --build) B=$2; shift 2;; --reps) REPS=$2; shift 2;; --iters) IT=$2; shift 2;;
    --n) N=$2; shift 2;; --d) D=$2; shift 2;; --np) NP=$2; shift 2;; --k) K=$2; shift 2;;
    *) echo "mixture_bench: unknown option $1" >&2; exit 2;;
  esac
done
G=$B/ghfit
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
export OMP_NUM_THREADS=1 OMPI_MCA_pml=ob1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none HDF5_USE_FILE_LOCKING=FALSE
"$G" generate --model nig --dim "$D" --n "$N" --seed 3 --out "$W/x.h5" >/dev/null
per_iter() { # FILE: ms per iteration
  /usr/bin/python3 - "$1" <<'EOF'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    g = f["fits"][list(f["fits"])[0]]
    names = [n.decode() if isinstance(n, bytes) else n for n in g["profile/phase_names"][()]]
    s = g["profile/seconds"][()]
    t = max(sum(s[r][names.index(p)] for p in ("estep", "allreduce", "mstep")) for r in range(s.shape[0]))
    print(1e3 * t / (int(g.attrs["n_iter"]) + 1))
EOF
}
one=(); mix=()
for ((r = 0; r < REPS; r++)); do
  for k in 1 "$K"; do
    mpirun -np "$NP" "$G" fit --data "$W/x.h5" --model nig --components "$k" --tol 0 --max-iter "$IT" --starts 1 \
      --accel none --quiet --out "$W/k$k.h5" >/dev/null
    v=$(per_iter "$W/k$k.h5")
    if [ "$k" = 1 ]; then one+=("$v"); else mix+=("$v"); fi
  done
done
med() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
m1=$(med "${one[@]}"); mk=$(med "${mix[@]}")
mkdir -p "$here/results"
{
  echo "# Mixture iteration cost (bench/mixture_bench.sh)"
  echo
  echo "NIG, d = $D, N = $N, $NP ranks x 1 thread, --accel none, $IT iterations, $REPS rounds; ms per iteration (estep + allreduce + mstep, max over ranks), median"
  echo
  echo "| K | ms/iteration | rounds |"
  echo "|---|---|---|"
  echo "| 1 | $m1 | ${one[*]} |"
  echo "| $K | $mk | ${mix[*]} |"
  echo
  awk -v a="$mk" -v b="$m1" -v k="$K" 'BEGIN { printf "ratio K = %d / K = 1: %.2f\n", k, a / b }'
} | tee "$here/results/mixture_bench.md"
