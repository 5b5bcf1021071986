#!/usr/bin/env bash
# gof_rejection.sh - a benchmark (not a test) of `ghfit gof`'s calibration:
# R samples of N rows drawn from one fitted law (ghfit sample, seeds 1..R)
# are checked against that same law; prints, per statistic (margin 1's
# KS/AD/CvM and the radial KS/AD/CvM), the share of p-values below 0.05
# (nominal 5 %) and below 0.01.
# usage: bench/gof_rejection.sh GHFIT WORKDIR [R=200] [N=2000] [FAMILY=gh] [D=3] [SEED0=0]
# (seeds SEED0+1 .. SEED0+R)
set -euo pipefail
G=$(realpath "$1"); W=$2; R=${3:-200}; N=${4:-2000}; FAM=${5:-gh}; D=${6:-3}; S0=${7:-0}
PY=/usr/bin/python3
mkdir -p "$W"; cd "$W"
"$G" generate --model gh --dim "$D" --n 5000 --seed 4 --p -1.5 --out x.h5 >/dev/null
"$G" fit --data x.h5 --model "$FAM" --out fit.h5 --quiet
rm -f g*.h5
for s in $(seq $((S0 + 1)) $((S0 + R))); do
  "$G" sample --model fit.h5 --n "$N" --seed "$s" --out s.h5 >/dev/null
  "$G" gof --model fit.h5 --data s.h5 --out "g$s.h5" --quiet --qq 20
done
R=$R S0=$S0 "$PY" - <<'PY'
import h5py, numpy as np, os
R, S0 = int(os.environ["R"]), int(os.environ["S0"])
rows = []
for s in range(S0 + 1, S0 + R + 1):
    f = h5py.File(f"g{s}.h5", "r")
    rows.append([f["margins/ks_p"][0], f["margins/ad_p"][0], f["margins/cvm_p"][0],
                 f["radial/ks_p"][()], f["radial/ad_p"][()], f["radial/cvm_p"][()]])
p = np.array(rows)
names = ["margin1 KS", "margin1 AD", "margin1 CvM", "radial KS", "radial AD", "radial CvM"]
print(f"{R} replications (seeds {S0 + 1}..{S0 + R}); share of p < 0.05 (p < 0.01)")
for j, n in enumerate(names):
    print(f"  {n:12s} {np.mean(p[:, j] < 0.05) * 100:5.1f} % ({np.mean(p[:, j] < 0.01) * 100:4.1f} %)")
PY
