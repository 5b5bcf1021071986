#!/usr/bin/env bash
# `ghfit sample` (issue 11):
#   * the same seed gives the same rows on 1 and 3 ranks, another seed others;
#   * a refit of N = 200,000 rows drawn from a d = 2 NIG fit recovers its
#     parameters and moments within a few standard errors (SE-like
#     tolerances: moments from sqrt(var/N), parameters a few times that);
#   * every family samples (vg and t through their Gamma faces, gauss Y = 1):
#     a refit of 50,000 rows comes back near the law (covariance; t: p);
#   * bad input: one `ghfit: error:` line, exit 2, no output.
# usage: sample.sh GHFIT H5GET WORKDIR
set -euo pipefail
G=$1; H=$2; W=$3
. "$(dirname "$0")/lib.sh"
rm -rf "$W"; mkdir -p "$W"; cd "$W"
fail=0
"$G" generate --model nig --dim 2 --n 20000 --seed 5 --mu 0.1,-0.2 --gamma 0.4,-0.3 --sigma 1,2 --rho 0.5 \
  --a 1.5 --b 1 --out data.h5 >/dev/null
"$G" fit --data data.h5 --model nig --out fit.h5 --quiet
F=/fits/nig
N=200000
mpirun -np 1 "$G" sample --model fit.h5 --n $N --seed 7 --out s1.h5 --quiet
mpirun -np 3 "$G" sample --model fit.h5 --n $N --seed 7 --out s3.h5 --quiet
mpirun -np 2 "$G" sample --model fit.h5:$F --n 1000 --seed 8 --out s8.h5 --quiet
cmp -s <("$H" s1.h5 /X) <("$H" s3.h5 /X) || { echo "FAIL: seed 7 on 3 ranks differs from 1 rank"; fail=1; }
cmp -s <("$H" s1.h5 /X | head -2000) <("$H" s8.h5 /X) && { echo "FAIL: seeds 7 and 8 give the same rows"; fail=1; }
[ "$("$H" s1.h5 /X | wc -l)" = $((2 * N)) ] || { echo "FAIL: not $N x 2 values"; fail=1; }
[ "$("$H" s1.h5 /X model)" = nig ] && [ "$("$H" s1.h5 /X seed)" = 7 ] && [ "$("$H" s1.h5 /X fit_name)" = nig ] ||
  { echo "FAIL: attributes model/seed/fit_name"; fail=1; }
echo "same seed, same rows on 1 and 3 ranks"

mpirun -np 2 "$G" fit --data s1.h5 --model nig --out refit.h5 --quiet
# within(name, got, want, tol): |got - want| <= tol
within() {
  awk -v n="$1" -v g="$2" -v w="$3" -v t="$4" 'BEGIN { e = g - w; if (e < 0) e = -e;
    printf "  %-10s fit %.6g refit %.6g |diff| %.3g (tol %.3g)\n", n, w, g, e, t; exit !(e <= t) }' || fail=1
}
get() { "$H" $1 $F/$2 | sed -n "${3}p"; }
echo "refit of $N draws (d = 2 NIG):"
for k in 1 2; do
  v=$(get fit.h5 moments/cov $(( (k - 1) * 2 + k )))
  se=$(awk -v v=$v -v n=$N 'BEGIN { printf "%.17g", sqrt(v / n) }')
  within "mean[$k]" "$(get refit.h5 moments/mean $k)" "$(get fit.h5 moments/mean $k)" "$(awk -v s=$se 'BEGIN { print 5 * s }')"
  within "mu[$k]" "$(get refit.h5 params/mu $k)" "$(get fit.h5 params/mu $k)" "$(awk -v s=$se 'BEGIN { print 20 * s }')"
  within "gamma[$k]" "$(get refit.h5 params/gamma $k)" "$(get fit.h5 params/gamma $k)" "$(awk -v s=$se 'BEGIN { print 20 * s }')"
done
for i in 1 2 3 4; do
  w=$(get fit.h5 moments/cov $i)
  within "cov[$i]" "$(get refit.h5 moments/cov $i)" "$w" "$(awk -v w=$w 'BEGIN { print 0.03 * (w < 0 ? -w : w) + 0.01 }')"
  w=$(get fit.h5 params/sigma $i)
  within "sigma[$i]" "$(get refit.h5 params/sigma $i)" "$w" "$(awk -v w=$w 'BEGIN { print 0.03 * (w < 0 ? -w : w) + 0.01 }')"
done
for k in a b; do
  w=$(get fit.h5 params/$k 1)
  within "$k" "$(get refit.h5 params/$k 1)" "$w" "$(awk -v w=$w 'BEGIN { print 0.08 * w }')"
done

# every family: draw 50,000 rows from a fit of that family, refit
cat > job.yaml <<YAML
name: all
data:
  file: data.h5
  rows: {start: 0, length: 5000}
out: multi.h5
family: [gh, vg, t, gauss]
max_iter: 2000
YAML
"$G" run job.yaml --quiet >/dev/null
for name in $(h5ls multi.h5/fits | awk '{ print $1 }'); do
  fam=${name%%_*}
  mpirun -np 2 "$G" sample --model multi.h5:/fits/$name --n 50000 --seed 3 --out f_$fam.h5 --quiet
  "$G" fit --data f_$fam.h5 --model $fam --out rf_$fam.h5 --quiet
  echo "$fam:"
  if [ $fam = t ]; then # heavy tails (nu ~ 5): the sample covariance is too noisy, nu is not
    F=/fits/$name; w=$(get multi.h5 params/p 1); F=/fits/$fam
    within "p" "$(get rf_$fam.h5 params/p 1)" "$w" "$(awk -v w=$w 'BEGIN { print -0.1 * w }')"
    continue
  fi
  F=/fits/$name; w=$(get multi.h5 moments/cov 1); F=/fits/$fam
  within "cov[1]" "$(get rf_$fam.h5 moments/cov 1)" "$w" "$(awk -v w=$w 'BEGIN { print 0.06 * w }')"
  F=/fits/$name; w=$(get multi.h5 moments/cov 4); F=/fits/$fam
  within "cov[4]" "$(get rf_$fam.h5 moments/cov 4)" "$w" "$(awk -v w=$w 'BEGIN { print 0.06 * w }')"
done

# bad input
expect() { # STATUS PATTERN -- args...
  local want=$1 pat=$2; shift 3
  rm -f out.h5
  local rc=0
  mpirun -np 2 "$G" "$@" >stdout.txt 2>stderr.txt || rc=$?
  local lines; lines=$(grep -c "^ghfit: error: " stderr.txt || true)
  if [ $rc -ne "$want" ] || [ "$lines" -ne 1 ] || ! grep -q -- "$pat" stderr.txt || ls out.h5* >/dev/null 2>&1; then
    echo "FAIL [$*]: exit $rc (want $want), stderr:"; cat stderr.txt; fail=1
  else
    echo "ok   [$*] -> $rc: $(grep "^ghfit: error: " stderr.txt | head -c 160)"
  fi
}
expect 2 "data.h5: not a ghfit result file" -- sample --model data.h5 --n 10 --seed 1 --out out.h5
expect 2 "no fit named 'x'" -- sample --model fit.h5:/fits/x --n 10 --seed 1 --out out.h5
expect 2 "multi.h5 holds 4 fits" -- sample --model multi.h5 --n 10 --seed 1 --out out.h5
expect 2 "--n" -- sample --model fit.h5 --n 0 --seed 1 --out out.h5
expect 2 "--seed" -- sample --model fit.h5 --n 10 --out out.h5
expect 2 "are the same file" -- sample --model fit.h5 --n 10 --seed 1 --out fit.h5
cp fit.h5 other.h5
rc=0; "$G" sample --model fit.h5 --n 10 --seed 1 --out other.h5 2>/dev/null || rc=$?
{ [ $rc = 2 ] && cmp -s fit.h5 other.h5; } || { echo "FAIL: a result file was replaced by a sample"; fail=1; }
ls *.tmp.* 2>/dev/null && { echo "FAIL: temporary files left"; fail=1; }
[ $fail = 0 ] && echo "sample: all checks passed"
exit $fail
