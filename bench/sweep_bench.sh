#!/usr/bin/env bash
# Sweep benchmark (not a test): 1,000 rolling windows of 1,000 rows of d = 10
# heavy-tailed "returns" (NIG, Sigma diagonal 1e-4, rho 0.3, a = b = 0.6), GH and
# NIG, tol 1e-8: 2,000 fits with `ghfit run` on NP ranks (default 2).  Prints the
# wall time, fits per second, and iteration statistics per family.
# BACKEND=cuda (default cpu) fits on the GPUs (--backend auto's device choice
# for one-rank groups: spread over the node's GPUs, shared when fewer).
# The "wrote" line gives the fitting time and the result-file time apart.
# usage: [BACKEND=cpu|cuda|auto] bench/sweep_bench.sh GHFIT - [WORKDIR] [NP] [WINDOWS] [ghfit run overrides, e.g. --warm-start]
set -euo pipefail
G=$1; H=$2; W=${3:-/tmp/ghfit-sweep-bench}; NP=${4:-2}; NW=${5:-1000}
mkdir -p "$W"; cd "$W"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMP_NUM_THREADS=1 HDF5_USE_FILE_LOCKING=FALSE
N=$((NW * 1000 + 1000))
if [ ! -e returns.h5 ] || [ "$(cat returns.n 2>/dev/null)" != "$N" ]; then
  mpirun -np "$NP" "$G" generate --model nig --dim 10 --n $N --seed 2024 --sigma 1e-4 --rho 0.3 \
    --gamma 1e-5 --mu 2e-4 --a 0.6 --b 0.6 --out returns.h5 > /dev/null
  echo $N > returns.n
fi
cat > bench.yaml <<YAML
data: returns.h5
out: bench.h5
family: [gh, nig]
tol: 1e-8
windows: {start: 0, length: 1000, step: 1000, count: $NW}
quiet: false
backend: ${BACKEND:-cpu}
YAML
t0=$(date +%s.%N)
mpirun -np "$NP" "$G" run bench.yaml "${@:6}" > bench.txt
t1=$(date +%s.%N)
grep "^wrote" bench.txt
python3 - "$t0" "$t1" bench.txt "$NW" "$NP" <<'PY'
import sys, statistics as st
t0, t1, path, nw, np_ = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
rows = [l.split() for l in open(path) if l.startswith(("gh_", "nig_"))]
wall = t1 - t0
import os
be = os.environ.get("BACKEND", "cpu")
print(f"sweep ({be}): {len(rows)} fits ({nw} windows x GH, NIG; d = 10, 1000 rows each) on {np_} ranks: {wall:.1f} s wall, {len(rows)/wall:.1f} fits/s")
for fam in ("gh", "nig"):
    r = [x for x in rows if x[1] == fam]
    if not r: continue
    it = [int(x[7]) for x in r]; sec = [float(x[9]) for x in r]; conv = sum(x[8] == "yes" for x in r)
    print(f"  {fam:3s}: {len(r)} fits, converged {conv}, iterations mean {st.mean(it):.1f} median {st.median(it)} max {max(it)}, "
          f"seconds/fit mean {st.mean(sec)*1e3:.1f} ms (sum {sum(sec):.1f} s)")
PY
