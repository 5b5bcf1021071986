#!/usr/bin/env bash
# Weights, --missing em and float32 storage on the GPU (label gpu):
#  - float32 data: the fit of a float32 dataset on the CUDA backend (kept
#    float32 on the device) equals the fit of the same numbers stored as
#    float64 (log-likelihood and parameters to 1e-12 relative, the same
#    iteration count), d = 3 and d = 10 (fused path) and d = 16 (cuBLAS path);
#  - weighted EM: --backend cuda equals --backend cpu (log-likelihood and
#    loglik_unweighted to 1e-10, the same iteration count), GH and NIG, with
#    weights that include zeros, also on float32 data and with --halflife;
#  - --missing em: --backend cuda (complete rows on the GPU, the others on
#    the host) equals --backend cpu (1e-10, the same iteration count; at
#    most 400 iterations: EM over missing data converges slowly) and says
#    once that the incomplete rows run on the host.
# Skips (77) where no NVIDIA GPU is visible.
# usage: cuda_wmf.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
. "$(dirname "$0")/lib.sh"
if ! nvidia-smi -L >/dev/null 2>&1; then echo "SKIP: no NVIDIA GPU here"; exit 77; fi
PY=/usr/bin/python3
rm -rf "$W"; mkdir -p "$W"; cd "$W" || exit 1
fail=0
die() { echo "FAIL: $*"; fail=1; }

for d in 3 10 16; do
  "$G" generate --model gh --dim $d --n 40000 --seed $((10 + d)) --p 1.2 --a 2 --b 1 --dtype float32 --out f$d.h5 \
    >/dev/null || die "generate d=$d"
done
"$PY" - <<'EOF' || { echo "cannot write the data sets"; exit 1; }
import h5py, numpy as np
for d in (3, 10, 16):
    with h5py.File('f%d.h5' % d, 'a') as f:
        X = f['/X'][...]
        assert X.dtype == np.float32
        n = X.shape[0]
        f['/X64'] = X.astype(np.float64)          # the same numbers as float64
        rng = np.random.default_rng(d)
        w = rng.uniform(0.0, 2.0, size=n); w[::9] = 0.0
        f['/w'] = w
        M = X.astype(np.float64).copy()
        M[rng.random(M.shape) < 0.1] = np.nan      # 10% missing at random
        M[np.isnan(M).all(axis=1), 0] = 0.5        # no empty row
        f['/M'] = M
EOF

cmp_fit() { # cmp_fit A.h5 B.h5 MODEL TOL [params]
  local A=$1 B=$2 m=$3 tol=$4 par=${5:-}
  local la lb ia ib
  la=$("$H" $A /fits/$m loglik); lb=$("$H" $B /fits/$m loglik)
  ia=$("$H" $A /fits/$m n_iter); ib=$("$H" $B /fits/$m n_iter)
  echo "  $A vs $B ($m): loglik $la vs $lb, iterations $ia vs $ib"
  relcheck "$la" "$lb" "$tol" || die "$A vs $B: log-likelihoods differ"
  [ "$ia" = "$ib" ] || die "$A vs $B: iteration counts $ia vs $ib"
  local ua ub
  if ua=$("$H" $A /fits/$m loglik_unweighted 2>/dev/null) && ub=$("$H" $B /fits/$m loglik_unweighted 2>/dev/null); then
    relcheck "$ua" "$ub" "$tol" || die "$A vs $B: loglik_unweighted differs"
  fi
  if [ -n "$par" ]; then
    for ds in mu gamma sigma p a b; do
      paste <("$H" $A /fits/$m/params/$ds) <("$H" $B /fits/$m/params/$ds) | while read -r x y; do
        relcheck "$x" "$y" "$tol" >/dev/null || { echo "  $ds: $x vs $y"; exit 1; }
      done || die "$A vs $B: $ds differs beyond $tol"
    done
  fi
}

# 1. float32 storage == the float64 fit of the same numbers
for d in 3 10 16; do
  "$G" fit --data f$d.h5 --dataset /X --model gh --backend cuda --out f32_$d.h5 --quiet --max-iter 3000 \
    > f32_$d.txt 2>&1 || die "float32 d=$d: $(tail -1 f32_$d.txt)"
  "$G" fit --data f$d.h5 --dataset /X64 --model gh --backend cuda --out f64_$d.h5 --quiet --max-iter 3000 \
    > f64_$d.txt 2>&1 || die "float64 d=$d: $(tail -1 f64_$d.txt)"
  [ -f f32_$d.h5 ] && [ -f f64_$d.h5 ] && cmp_fit f32_$d.h5 f64_$d.h5 gh 1e-12 params
done

# 2. weighted EM: cuda == cpu (float64 data; float32 data; --halflife)
for m in gh nig; do
  for be in cpu cuda; do
    "$G" fit --data f10.h5 --dataset /X64 --weights /w --model $m --backend $be --out w_${m}_$be.h5 --quiet \
      --max-iter 3000 > w_${m}_$be.txt 2>&1 || die "weighted $m --backend $be: $(tail -1 w_${m}_$be.txt)"
  done
  [ -f w_${m}_cpu.h5 ] && [ -f w_${m}_cuda.h5 ] && cmp_fit w_${m}_cuda.h5 w_${m}_cpu.h5 $m 1e-10
done
for be in cpu cuda; do
  "$G" fit --data f3.h5 --dataset /X --weights /w --model gh --backend $be --out w32_$be.h5 --quiet --max-iter 3000 \
    > w32_$be.txt 2>&1 || die "weighted float32 --backend $be: $(tail -1 w32_$be.txt)"
  "$G" fit --data f16.h5 --dataset /X64 --halflife 5000 --model nig --backend $be --out hl_$be.h5 --quiet \
    --max-iter 3000 > hl_$be.txt 2>&1 || die "halflife d=16 --backend $be: $(tail -1 hl_$be.txt)"
done
[ -f w32_cpu.h5 ] && [ -f w32_cuda.h5 ] && cmp_fit w32_cuda.h5 w32_cpu.h5 gh 1e-10
[ -f hl_cpu.h5 ] && [ -f hl_cuda.h5 ] && cmp_fit hl_cuda.h5 hl_cpu.h5 nig 1e-10
bk=$("$H" w_gh_cuda.h5 / backend 2>/dev/null)
[ "$bk" = cuda ] || die "weighted --backend cuda recorded backend '$bk'"

# 3. --missing em: cuda == cpu, and the note
for d in 3 16; do
  for be in cpu cuda; do
    "$G" fit --data f$d.h5 --dataset /M --missing em --model nig --backend $be --out m${d}_$be.h5 --max-iter 400 \
      > m${d}_$be.txt 2>&1 || die "missing em d=$d --backend $be: $(tail -1 m${d}_$be.txt)"
  done
  [ -f m${d}_cpu.h5 ] && [ -f m${d}_cuda.h5 ] && cmp_fit m${d}_cuda.h5 m${d}_cpu.h5 nig 1e-10
  [ "$(grep -c 'rows with missing entries on the host' m${d}_cuda.txt)" = 1 ] \
    || die "missing em d=$d: the CUDA run did not say once that incomplete rows run on the host"
  bk=$("$H" m${d}_cuda.h5 / backend 2>/dev/null)
  [ "$bk" = cuda ] || die "missing em d=$d --backend cuda recorded backend '$bk'"
done

[ $fail -eq 0 ] && echo "cuda_wmf: all passed" || echo "cuda_wmf: FAILED"
exit $fail
