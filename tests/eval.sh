#!/usr/bin/env bash
# `ghfit eval` (issue 11): every family, asymmetric and symmetric, fitted
# in one result file, scored on the fitted data on 1 to 4 ranks (symmetric
# fits on 1 and 3):
#   * the total log-likelihood is the fit's own to 1e-12 relative, n_obs = N;
#   * the output file has the same bytes whatever the rank count;
#   * E[Y|x], E[1/Y|x] > 0, Mahalanobis >= 0 (gauss: E[Y|x] = E[1/Y|x] = 1);
#   * rows with NaN/Inf are flagged 1 with NaN values and left out of loglik
#     and n_obs; the other rows keep their values;
#   * an existing eval output, generated data set or result file is replaced
#     by the new content;
#   * bad input: one `ghfit: error:` line naming the thing, exit 2, no output.
# usage: eval.sh GHFIT H5GET WORKDIR
set -euo pipefail
G=$1; H=$2; W=$3
. "$(dirname "$0")/lib.sh"
rm -rf "$W"; mkdir -p "$W"; cd "$W"
N=3001
"$G" generate --model gh --dim 3 --n $N --seed 21 --p -1 --a 1.2 --b 0.8 --out data.h5 >/dev/null
cat > job.yaml <<YAML
name: all
data:
  file: data.h5
out: multi.h5
family: [gh, hyp, nig, vg, t, gauss]
symmetric: [false, true]
max_iter: 2000
YAML
"$G" run job.yaml --quiet >/dev/null
names=$(h5ls multi.h5/fits | awk '{ print $1 }')
fail=0
for name in $names; do
  ll_fit=$("$H" multi.h5 /fits/$name loglik)
  ranks="1 2 3 4"; [ "${name#*_sym}" != "$name" ] && ranks="1 3" # symmetric fits: fewer runs
  for np in $ranks; do
    mpirun -np $np "$G" eval --model multi.h5:/fits/$name --data data.h5 --out s_${name}_$np.h5 --quiet
  done
  s=s_${name}_1.h5
  ll=$("$H" $s / loglik); nobs=$("$H" $s / n_obs)
  echo "$name: fit loglik $ll_fit, eval loglik $ll, n_obs $nobs"
  relcheck "$ll" "$ll_fit" 1e-12 || { echo "  FAIL: eval loglik differs from the fit's"; fail=1; }
  [ "$nobs" = $N ] || { echo "  FAIL: n_obs $nobs != $N"; fail=1; }
  [ "$("$H" $s / fit_name)" = "$name" ] || { echo "  FAIL: fit_name attribute"; fail=1; }
  for np in ${ranks#1 }; do
    cmp -s $s s_${name}_$np.h5 || { echo "  FAIL: the output on $np ranks differs from 1 rank"; fail=1; }
  done
  for ds in logpdf mahalanobis e_y e_invy nonfinite; do
    [ "$("$H" $s /$ds | wc -l)" = $N ] || { echo "  FAIL: /$ds does not hold $N rows"; fail=1; }
  done
  paste <("$H" $s /mahalanobis) <("$H" $s /e_y) <("$H" $s /e_invy) <("$H" $s /nonfinite) |
    awk -v g=$([ "${name#gauss}" != "$name" ] && echo 1 || echo 0) '
      !($1 >= 0) || !($2 > 0) || !($3 > 0) || $4 != 0 { bad++ }
      g && ($2 != 1 || $3 != 1) { bad++ }
      END { if (bad) { printf "  FAIL: %d rows with invalid values\n", bad; exit 1 } }' || fail=1
done

# non-finite rows: the data through a text dump with NaN / Inf put in (h5import)
"$H" data.h5 /X | awk 'NR == 3 * 17 + 2 { $0 = "nan" } NR == 3 * 1000 + 1 { $0 = "inf" } NR == 3 * 3000 + 3 { $0 = "-inf" }
  { printf "%s%s", $0, (NR % 3 ? " " : "\n") }' > nan.txt
printf 'PATH X\nINPUT-CLASS TEXTFP\nINPUT-SIZE 64\nRANK 2\nDIMENSION-SIZES %d 3\nOUTPUT-CLASS FP\nOUTPUT-SIZE 64\n' $N > nan.cfg
h5import nan.txt -c nan.cfg -o nan.h5
name=nig_tol1e-10_s1
for np in 1 3; do
  mpirun -np $np "$G" eval --model multi.h5:/fits/$name --data nan.h5 --out nan_$np.h5 --quiet
done
cmp -s nan_1.h5 nan_3.h5 || { echo "FAIL: non-finite rows: 3 ranks differ from 1"; fail=1; }
[ "$("$H" nan_1.h5 / n_obs)" = $((N - 3)) ] || { echo "FAIL: n_obs with 3 non-finite rows"; fail=1; }
paste <("$H" nan_1.h5 /logpdf) <("$H" s_${name}_1.h5 /logpdf) <("$H" nan_1.h5 /nonfinite) <("$H" nan_1.h5 /e_y) |
  awk 'BEGIN { want[18] = want[1001] = want[3001] = 1 }
    want[NR] && ($3 != 1 || ($1 != "nan" && $1 != "-nan") || ($4 != "nan" && $4 != "-nan")) { bad++ }
    !want[NR] && ($3 != 0 || $1 != $2) { bad++ }
    END { if (bad) { printf "FAIL: %d rows wrongly flagged or changed\n", bad; exit 1 } }' || fail=1
awk -v a="$("$H" nan_1.h5 / loglik)" -v b="$("$H" s_${name}_1.h5 / loglik)" 'BEGIN { exit !(a > b || a < b) }' ||
  { echo "FAIL: the loglik did not leave the non-finite rows out"; fail=1; }
echo "non-finite rows: flagged, NaN values, left out of loglik and n_obs"

# d = 5: eval's one pass leaves all four values in sub-blocks of the rows'
# memory and the writer gathers them: ranks and threads agree, the sums
# agree with the fit, the distances with an independent computation (awk:
# Sigma^-1 by Gauss-Jordan), E[Y|x] E[1/Y|x] >= 1 (Jensen)
"$G" generate --model nig --dim 5 --n $N --seed 3 --out d5.h5 >/dev/null
"$G" fit --data d5.h5 --model nig --out r5.h5 --quiet
f5=$(h5ls r5.h5/fits | awk '{ print $1; exit }')
for np in 1 3; do mpirun -np $np "$G" eval --model r5.h5:/fits/$f5 --data d5.h5 --out e5_$np.h5 --quiet; done
OMP_NUM_THREADS=2 "$G" eval --model r5.h5:/fits/$f5 --data d5.h5 --out e5_t.h5 --quiet
{ cmp -s e5_1.h5 e5_3.h5 && cmp -s e5_1.h5 e5_t.h5; } || { echo "FAIL: d = 5: the output depends on ranks or threads"; fail=1; }
relcheck "$("$H" e5_1.h5 / loglik)" "$("$H" r5.h5 /fits/$f5 loglik)" 1e-12 ||
  { echo "FAIL: d = 5: eval loglik differs from the fit's"; fail=1; }
relcheck "$("$H" e5_1.h5 /logpdf | awk '{ s += $1 } END { printf "%.17g", s }')" "$("$H" e5_1.h5 / loglik)" 1e-12 ||
  { echo "FAIL: d = 5: /logpdf does not add up to loglik"; fail=1; }
"$H" e5_1.h5 /mahalanobis > maha5.txt
{ "$H" r5.h5 /fits/$f5/params/mu; "$H" r5.h5 /fits/$f5/params/sigma; "$H" d5.h5 /X; } |
  awk -v d=5 -v n=$N -v mf=maha5.txt '
    NR <= d { mu[NR - 1] = $1; next }
    NR <= d + d * d { k = NR - d - 1; a[int(k / d), k % d] = $1; next }
    !inv { for (i = 0; i < d; i++) for (j = 0; j < d; j++) b[i, j] = (i == j)
      for (c = 0; c < d; c++) { p = a[c, c]; for (j = 0; j < d; j++) { a[c, j] /= p; b[c, j] /= p }
        for (i = 0; i < d; i++) if (i != c) { f = a[i, c]; for (j = 0; j < d; j++) { a[i, j] -= f * a[c, j]; b[i, j] -= f * b[c, j] } } }
      inv = 1 }
    { k = (NR - d - d * d - 1) % d; x[k] = $1 - mu[k]
      if (k == d - 1) { m = 0; for (i = 0; i < d; i++) for (j = 0; j < d; j++) m += x[i] * b[i, j] * x[j]
        getline v < mf; r = sqrt(m); e = (v - r) / (r > 1 ? r : 1); if (e < 0) e = -e; if (e > 1e-9) bad++; rows++ } }
    END { if (bad || rows != n) { printf "FAIL: d = 5: %d of %d distances wrong\n", bad, rows; exit 1 } }' || fail=1
paste <("$H" e5_1.h5 /e_y) <("$H" e5_1.h5 /e_invy) |
  awk -v n=$N '!($1 * $2 >= 1 - 1e-12) { bad++ } END { if (bad || NR != n) { printf "FAIL: d = 5: %d rows with E[Y|x] E[1/Y|x] < 1\n", bad; exit 1 } }' || fail=1
echo "d = 5: one pass, values in sub-blocks: written in row order"

# an existing output is replaced by the new content (the in-memory image
# of a file once started as the old file of the same name)
other=gh_pfree_tol1e-10_s1
"$G" eval --model multi.h5:/fits/$other --data data.h5 --out s_${name}_1.h5 --quiet
[ "$("$H" s_${name}_1.h5 / fit_name)" = $other ] || { echo "FAIL: eval did not replace its earlier output"; fail=1; }
"$G" generate --model nig --dim 2 --n 50 --seed 1 --out gen.h5 >/dev/null
"$G" generate --model nig --dim 3 --n 40 --seed 1 --out gen.h5 >/dev/null
[ "$("$H" gen.h5 /X | wc -l)" = 120 ] || { echo "FAIL: generate did not replace its earlier data set"; fail=1; }
"$G" fit --data gen.h5 --model nig --out refit.h5 --quiet
"$G" fit --data data.h5 --model nig --out refit.h5 --quiet
[ "$("$H" refit.h5 /fits/nig n_obs)" = $N ] || { echo "FAIL: fit did not replace an earlier result file"; fail=1; }
echo "existing outputs replaced by the new content"

# bad input
expect() { # STATUS PATTERN NP -- args...
  local want=$1 pat=$2 np=$3; shift 4
  rm -f out.h5
  local rc=0
  # sigkill_timeout=0: mpirun reports the refusal (exit 2 on every rank, after
  # MPI_Finalize's fence) without its 1-2 s wait
  OMPI_MCA_odls_base_sigkill_timeout=0 mpirun -np $np "$G" "$@" >stdout.txt 2>stderr.txt || rc=$?
  local lines; lines=$(grep -c "^ghfit: error: " stderr.txt || true)
  if [ $rc -ne "$want" ] || [ "$lines" -ne 1 ] || ! grep -q -- "$pat" stderr.txt || ls out.h5* >/dev/null 2>&1; then
    echo "FAIL [$*]: exit $rc (want $want), stderr:"; cat stderr.txt; ls out.h5* 2>/dev/null || true; fail=1
  else
    echo "ok   [$*] -> $rc: $(grep "^ghfit: error: " stderr.txt | head -c 200)"
  fi
}
echo "not HDF5" > text.h5
"$G" generate --model nig --dim 2 --n 100 --seed 1 --out d2.h5 >/dev/null
expect 2 "data.h5: not a ghfit result file" 1 -- eval --model data.h5 --data data.h5 --out out.h5
expect 2 "text.h5: cannot open it as an HDF5 file" 1 -- eval --model text.h5 --data data.h5 --out out.h5
expect 2 "no fit named 'nope'" 2 -- eval --model multi.h5:/fits/nope --data data.h5 --out out.h5
expect 2 "multi.h5 holds 12 fits (gauss_sym" 2 -- eval --model multi.h5 --data data.h5 --out out.h5
expect 2 "d2.h5:/X: 2 columns, but the fit $name of multi.h5 has dimension 3" 2 -- eval --model multi.h5:/fits/$name --data d2.h5 --out out.h5
expect 2 "/nope" 2 -- eval --model multi.h5:/fits/$name --data data.h5 --dataset /nope --out out.h5
expect 2 "missing.h5" 1 -- eval --model multi.h5:/fits/$name --data missing.h5 --out out.h5
expect 2 "missing.h5" 1 -- eval --model missing.h5 --data data.h5 --out out.h5
expect 2 "--model" 1 -- eval --model multi.h5:/fits/ --data data.h5 --out out.h5
expect 2 "--out" 1 -- eval --model multi.h5:/fits/$name --data data.h5
expect 2 "backend" 1 -- eval --model multi.h5:/fits/$name --data data.h5 --out out.h5 --backend tpu
cp multi.h5 multi.keep
expect 2 "are the same file" 1 -- eval --model multi.h5:/fits/$name --data data.h5 --out multi.h5
cmp -s multi.h5 multi.keep || { echo "FAIL: the result file was changed"; fail=1; }
# an existing file that is not an eval output is not replaced
cp data.h5 other.h5
rc=0; "$G" eval --model multi.h5:/fits/$name --data data.h5 --out other.h5 2>stderr.txt || rc=$?
if [ $rc -ne 2 ] || ! cmp -s other.h5 data.h5; then echo "FAIL: a data set was replaced by eval's output"; fail=1; fi
ls *.tmp.* 2>/dev/null && { echo "FAIL: temporary files left"; fail=1; }
[ $fail = 0 ] && echo "eval: all checks passed"
exit $fail
