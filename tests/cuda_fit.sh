#!/usr/bin/env bash
# Full fits on the GPU against the CPU backend (label gpu): the same data set
# fitted with --backend cpu and --backend cuda must give the same final
# log-likelihood within 1e-10 relative and the same iteration count (GH and
# NIG, d = 3 and d = 10, and d = 40 on the wide fused kernel,
# GHFIT_CUDA_WIDE=1), the result file must say backend "cuda" and device
# "cuda:0", and two ranks on a machine with one GPU must fail with a clear
# error under --backend cuda (NCCL refuses) and fit with --backend auto (the
# host reduces the statistics; device "cuda:0,0").
# Skips (77) where no NVIDIA GPU is visible.
# usage: cuda_fit.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
. "$(dirname "$0")/lib.sh"
if ! nvidia-smi -L >/dev/null 2>&1; then echo "SKIP: no NVIDIA GPU here"; exit 77; fi
rm -rf "$W"; mkdir -p "$W"; cd "$W" || exit 1
fail=0
"$G" generate --model gh --dim 3 --n 20000 --seed 5 --p -1 --a 1.5 --b 0.7 --out d3.h5 >/dev/null || fail=1
"$G" generate --model gh --dim 10 --n 200000 --seed 6 --p 1.2 --a 2 --b 1 --out d10.h5 >/dev/null || fail=1
"$G" generate --model gh --dim 40 --n 60001 --seed 8 --p -0.8 --a 1 --b 1.5 --out d40.h5 >/dev/null || fail=1
for data in d3 d10 d40; do
  for model in gh nig; do
    for be in cpu cuda; do
      if ! GHFIT_CUDA_WIDE=1 "$G" fit --data $data.h5 --model $model --backend $be --out r_${data}_${model}_$be.h5 \
           --quiet --max-iter 3000 > log_${data}_${model}_$be.txt 2>&1; then
        echo "FAIL: $data $model --backend $be: $(tail -1 log_${data}_${model}_$be.txt)"; fail=1; continue
      fi
    done
    [ -f r_${data}_${model}_cuda.h5 ] && [ -f r_${data}_${model}_cpu.h5 ] || continue
    llc=$("$H" r_${data}_${model}_cpu.h5 /fits/$model loglik); itc=$("$H" r_${data}_${model}_cpu.h5 /fits/$model n_iter)
    llg=$("$H" r_${data}_${model}_cuda.h5 /fits/$model loglik); itg=$("$H" r_${data}_${model}_cuda.h5 /fits/$model n_iter)
    bk=$("$H" r_${data}_${model}_cuda.h5 / backend)
    tg=$("$H" r_${data}_${model}_cuda.h5 /fits/$model elapsed_s); tc=$("$H" r_${data}_${model}_cpu.h5 /fits/$model elapsed_s)
    echo "$data $model: cpu loglik $llc ($itc iterations, ${tc}s)  cuda loglik $llg ($itg iterations, ${tg}s) backend=$bk"
    relcheck "$llg" "$llc" 1e-10 || { echo "FAIL: $data $model log-likelihoods differ"; fail=1; }
    [ "$itg" = "$itc" ] || { echo "FAIL: $data $model iteration count cuda $itg != cpu $itc"; fail=1; }
    [ "$bk" = "cuda" ] || { echo "FAIL: $data $model backend attribute '$bk', expected cuda"; fail=1; }
    dv=$("$H" r_${data}_${model}_cuda.h5 /fits/$model device)
    [ "$dv" = "cuda:0" ] || { echo "FAIL: $data $model device attribute '$dv', expected cuda:0"; fail=1; }
    pmax=$("$H" r_${data}_${model}_cuda.h5 /fits/$model/profile/max 2>/dev/null | tr '\n' ' ')
    [ -n "$pmax" ] || { echo "FAIL: $data $model: no /fits/$model/profile/max in the cuda result"; fail=1; }
    echo "  cuda profile max seconds per phase: $pmax"
  done
done
# more local ranks than GPUs: a clear error, non-zero exit, no result file
ngpu=$(nvidia-smi -L | grep -c '^GPU')
if command -v mpirun >/dev/null && [ "$ngpu" -eq 1 ]; then
  if mpirun -np 2 "$G" fit --data d3.h5 --model nig --backend cuda --out r_np2.h5 --quiet > log_np2.txt 2>&1; then
    echo "FAIL: 2 ranks on 1 GPU with --backend cuda succeeded"; fail=1
  else
    echo "2 ranks, 1 GPU, --backend cuda: $(grep -m1 -i 'gpu\|cuda' log_np2.txt)"
    [ -e r_np2.h5 ] && { echo "FAIL: a result file was left behind"; fail=1; }
  fi
  # auto uses the GPU there, reducing through the host, and says so
  if mpirun -np 2 "$G" fit --data d3.h5 --model nig --out r_np2auto.h5 --quiet > log_np2auto.txt 2>&1; then
    bk=$("$H" r_np2auto.h5 / backend); dv=$("$H" r_np2auto.h5 /fits/nig device)
    echo "2 ranks, 1 GPU, --backend auto: backend $bk, device $dv; $(grep -m1 'note:' log_np2auto.txt)"
    [ "$bk" = cuda ] && [ "$dv" = "cuda:0,0" ] || { echo "FAIL: auto on 2 ranks, 1 GPU: $bk $dv"; fail=1; }
    grep -q 'through the host' log_np2auto.txt || { echo "FAIL: auto did not say it reduces through the host"; fail=1; }
  else
    echo "FAIL: --backend auto on 2 ranks with 1 GPU: $(tail -1 log_np2auto.txt)"; fail=1
  fi
fi
[ $fail -eq 0 ] && echo "cuda_fit: all passed" || echo "cuda_fit: FAILED"
exit $fail
