#!/usr/bin/env bash
# risk_bench.sh - `ghfit risk` end to end on 10,000 portfolios of a d = 10
# fit per family (a benchmark, not a test): wall and CPU seconds of the
# command (start-up, reading, computing, writing) on OMP_NUM_THREADS threads.
# usage: bench/risk_bench.sh [GHFIT] [WORKDIR] [P] [ALPHAS]
set -euo pipefail
G=${1:-build/ghfit}; G=$(cd "$(dirname "$G")" && pwd)/$(basename "$G")
W=${2:-build/work/risk_bench}; P=${3:-10000}; A=${4:-0.975,0.99,0.999}
PY=/usr/bin/python3
mkdir -p "$W"; cd "$W"
"$G" generate --model gh --dim 10 --n 20000 --seed 3 --p -1.5 --out x.h5 >/dev/null
"$PY" -c "
import h5py, numpy as np
with h5py.File('w.h5', 'w') as f: f['W'] = np.random.default_rng(5).normal(size=($P, 10))"
printf 'name: fams\ndata: x.h5\nout: fams.h5\nfamily: [gh, hyp, nig, vg, t, gauss]\nquiet: true\n' > fams.yaml
"$G" run fams.yaml >/dev/null
names=$("$PY" -c "import h5py; print(' '.join(r['name'].decode() for r in h5py.File('fams.h5', 'r')['summary'][()]))")
echo "ghfit risk: $P portfolios, d = 10, alpha $A, OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}"
printf '%-28s %8s %8s\n' fit wall_s cpu_s
for n in $names; do
  /usr/bin/time -f "%e %U %S" -o t.txt "$G" risk --model fams.h5:/fits/$n --portfolios w.h5 --alpha $A --out r.h5
  read -r wall u s < t.txt
  printf '%-28s %8s %8.2f\n' "$n" "$wall" "$(echo "$u + $s" | bc)"
done
