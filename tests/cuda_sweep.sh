#!/usr/bin/env bash
# Sweeps on the GPUs (label gpu): `ghfit run` with --backend auto on 1, 2 and
# 4 ranks of a machine with GPUs.  One-rank groups spread over the GPUs (each
# fit's `device` says which; with one GPU they share it), two-rank groups
# take distinct GPUs or, with one GPU, reduce through the host; every fit's
# log-likelihood equals the CPU sweep's within 1e-10 relative with the same
# iteration count.  Skips (77) where no NVIDIA GPU is visible.
# usage: cuda_sweep.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
. "$(dirname "$0")/lib.sh"
if ! nvidia-smi -L >/dev/null 2>&1; then echo "SKIP: no NVIDIA GPU here"; exit 77; fi
ngpu=$(nvidia-smi -L | grep -c '^GPU')
rm -rf "$W"; mkdir -p "$W"; cd "$W" || exit 1
fail=0
"$G" generate --model gh --dim 4 --n 16000 --seed 9 --out data.h5 >/dev/null || exit 1
cat > sweep.yaml <<'YAML'
name: s
data:
  file: data.h5
out: OUT
family: [nig]
tol: 1e-9
max_iter: 500
windows:
  start: 0
  length: 4000
  step: 2000
warm_start: false
quiet: true
YAML
run() { # ranks backend rows_per_rank out
  sed "s|OUT|$4|" sweep.yaml > s_$4.yaml
  mpirun -np "$1" "$G" run s_$4.yaml --backend "$2" --rows-per-rank "$3" > log_$4.txt 2>&1 ||
    { echo "FAIL: $1 ranks, $2, rows/rank $3: $(tail -2 log_$4.txt)"; fail=1; return 1; }
}
run 1 cpu 100000 cpu.h5 || exit 1
names=$(h5ls cpu.h5/fits | awk '{print $1}')
for np in 1 2 4; do
  for rpr in 100000 2000; do  # one-rank groups; two-rank groups (4000-row windows)
    [ "$rpr" = 2000 ] && [ "$np" = 1 ] && continue
    out=gpu_${np}_$rpr.h5
    run "$np" auto "$rpr" "$out" || continue
    echo "$np ranks, rows/rank $rpr: $(grep -m1 'note: --backend' log_$out 2>/dev/null)"
    devs=""
    for n in $names; do
      bk=$("$H" "$out" /fits/$n backend); dv=$("$H" "$out" /fits/$n device)
      devs="$devs $dv"
      [ "$bk" = cuda ] || { echo "FAIL: $out $n: backend '$bk', expected cuda"; fail=1; }
      case "$dv" in cuda:*) ;; *) echo "FAIL: $out $n: device '$dv'"; fail=1;; esac
      if [ "$rpr" = 2000 ] && [ "$ngpu" -ge 2 ]; then
        a=${dv#cuda:}; [ "${a%,*}" != "${a#*,}" ] || { echo "FAIL: $out $n: a 2-rank group on one GPU ($dv)"; fail=1; }
      fi
      llc=$("$H" cpu.h5 /fits/$n loglik); llg=$("$H" "$out" /fits/$n loglik)
      itc=$("$H" cpu.h5 /fits/$n n_iter); itg=$("$H" "$out" /fits/$n n_iter)
      relcheck "$llg" "$llc" 1e-10 >/dev/null || { echo "FAIL: $out $n: loglik $llg vs cpu $llc"; fail=1; }
      [ "$itg" = "$itc" ] || { echo "FAIL: $out $n: $itg iterations vs cpu $itc"; fail=1; }
    done
    echo "  devices:$devs"
    # one-rank groups on several GPUs: more than one GPU used
    if [ "$rpr" = 100000 ] && [ "$np" -ge 2 ] && [ "$ngpu" -ge 2 ]; then
      nd=$(tr ' ' '\n' <<<"$devs" | grep -v '^$' | sort -u | wc -l)
      [ "$nd" -ge 2 ] || { echo "FAIL: $np one-rank groups all on one of $ngpu GPUs"; fail=1; }
    fi
  done
done
[ $fail -eq 0 ] && echo "cuda_sweep: all passed" || echo "cuda_sweep: FAILED"
exit $fail
