#!/usr/bin/env bash
# Cost of `ghfit fit --se` against the fit's own EM iterations (a benchmark,
# not a test): for each case "N d method max_iter" generate gh data, fit with
# --se-method METHOD, and print the E-step+all-reduce+M-step seconds per EM
# iteration, the SE seconds (se/ attribute seconds) and their ratio.
# usage: bench/se_speed.sh GHFIT H5GET WORKDIR [NP] [CASE ...]
#   CASE "N d method max_iter", default: "1000000 10 full 50" "100000 50 full 10"
#   "100000 50 subset 10" "20000 100 full 5" "20000 100 subset 5"
# Time scales linearly in N for both methods (docs/design.md), so the d = 50
# and 100 cases are run at smaller N; multiply by N'/N.
set -uo pipefail
G=$(realpath "$1"); H=$(realpath "$2"); W=$3; NP=${4:-1}; shift 4 2>/dev/null || shift $#
[ $# -gt 0 ] || set -- "1000000 10 full 50" "100000 50 full 10" "100000 50 subset 10" "20000 100 full 5" \
  "20000 100 subset 5"
mkdir -p "$W" && cd "$W" || exit 1
run() { if [ "$NP" -gt 1 ]; then mpirun -np "$NP" "$@"; else "$@"; fi; }
printf "%-8s %4s %-7s %5s %6s %12s %10s %10s %8s\n" N d method iters k "s/EM-iter" "se s" "se/iter" "subset?"
for c in "$@"; do
  set -- $c; n=$1; d=$2; m=$3; it=$4
  data=gh_${n}_$d.h5
  [ -e "$data" ] || run "$G" generate --model gh --dim "$d" --n "$n" --seed 3 --out "$data" >/dev/null || exit 1
  out=r_${n}_${d}_$m.h5
  rm -f "$out"
  run "$G" fit --data "$data" --model gh --starts 1 --max-iter "$it" --out "$out" --quiet --se-method "$m" >/dev/null ||
    { echo "fit failed: $c"; continue; }
  ni=$("$H" "$out" /fits/gh n_iter)
  # profile/mean: read init estep allreduce mstep write total
  per=$("$H" "$out" /fits/gh/profile/mean | awk -v n="$ni" 'NR >= 3 && NR <= 5 { s += $1 } END { printf "%.4f", s / n }')
  se=$("$H" "$out" /fits/gh/se seconds)
  k=$("$H" "$out" /fits/gh/se n_params)
  meth=$("$H" "$out" /fits/gh/se method)
  printf "%-8s %4s %-7s %5s %6s %12s %10.2f %10.1f %8s\n" "$n" "$d" "$m" "$ni" "$k" "$per" "$se" \
    "$(awk -v a="$se" -v b="$per" 'BEGIN { print a / b }')" "$meth"
done
