#!/usr/bin/env bash
# Every family, asymmetric and symmetric, on 1 to 4 ranks:
#   * the same log-likelihood (1e-12 relative; the CPU E-step is exact, so
#     in practice the same bits) and the same number of iterations;
#   * a log-likelihood trace that never decreases (1e-12 relative);
#   * the attributes family / symmetric / p_fixed, gamma = 0 when
#     symmetric, p where the family fixes it, and AIC = 2k - 2 loglik with
#     the family's number of free parameters;
#   * fixed-p fits (gh, vg, t) keep p, and a checkpointed vg fit resumes;
#   * bad model choices are one error line and exit 2, with no output.
# usage: fit_families.sh GHFIT H5GET WORKDIR
set -euo pipefail
G=$1; H=$2; W=$3
. "$(dirname "$0")/lib.sh"
rm -rf "$W"; mkdir -p "$W"; cd "$W"
"$G" generate --model gh --dim 3 --n 2001 --seed 21 --p -1 --a 1.2 --b 0.8 --out data.h5 >/dev/null
fail=0
d=3
# free parameters: mu d, gamma d (unless symmetric), Sigma d(d+1)/2, the
# subordinator's free ones less the scale direction
nparams() { # family symmetric
  local k=$(( d + d * (d + 1) / 2 )) sub
  case $1 in gauss) echo $k; return;; gh) sub=2;; hyp|nig|vg|t) sub=1;; esac
  [ "$2" = 1 ] || k=$(( k + d ))
  echo $(( k + sub ))
}
monotone() { # file fit
  "$H" "$1" "/fits/$2/loglik" | awk '{ if (NR > 1 && $1 < prev - 1e-12 * (prev < 0 ? -prev : prev)) {
      printf "  FAIL: trace decreases at %d: %.17g -> %.17g\n", NR - 1, prev, $1; bad = 1 } prev = $1 }
      END { exit bad }'
}
for fam in gh hyp nig vg t gauss; do
  for sym in 0 1; do
    flag=""; [ $sym = 1 ] && flag=--symmetric
    ref_ll=""; ref_it=""
    for np in 1 2 3 4; do
      out=r_${fam}_${sym}_$np.h5
      mpirun -np $np "$G" fit --data data.h5 --model $fam $flag --out $out --quiet --max-iter 2000
      ll=$("$H" $out /fits/$fam loglik); it=$("$H" $out /fits/$fam n_iter)
      echo "$fam sym=$sym np=$np: loglik $ll iterations $it"
      if [ -z "$ref_ll" ]; then
        ref_ll=$ll; ref_it=$it
        monotone $out $fam || fail=1
        [ "$("$H" $out /fits/$fam family)" = $fam ] || { echo "  FAIL: family attribute"; fail=1; }
        [ "$("$H" $out /fits/$fam symmetric)" = $sym ] || { echo "  FAIL: symmetric attribute"; fail=1; }
        k=$(nparams $fam $sym); aic=$("$H" $out /fits/$fam aic)
        relcheck "$aic" "$(awk -v k=$k -v l=$ll 'BEGIN { printf "%.17g", 2 * k - 2 * l }')" 1e-14 ||
          { echo "  FAIL: aic $aic is not 2k - 2 loglik with k = $k"; fail=1; }
        if [ $sym = 1 ] && [ $fam != gauss ]; then
          "$H" $out /fits/$fam/params/gamma | awk '$1 != 0 { bad = 1 } END { exit bad }' ||
            { echo "  FAIL: gamma not 0 in a symmetric fit"; fail=1; }
        fi
        p=$("$H" $out /fits/$fam/params/p); a=$("$H" $out /fits/$fam/params/a); b=$("$H" $out /fits/$fam/params/b)
        echo "  p $p a $a b $b"
        case $fam in
          hyp) [ "$p" = 2 ] || { echo "  FAIL: hyp p $p != (d+1)/2"; fail=1; };;
          nig) [ "$p" = -0.5 ] || { echo "  FAIL: nig p $p"; fail=1; };;
          vg) [ "$b" = 0 ] && awk -v p=$p 'BEGIN { exit !(p > 0) }' || { echo "  FAIL: vg off its face"; fail=1; };;
          t) [ "$a" = 0 ] && awk -v p=$p 'BEGIN { exit !(p < 0) }' || { echo "  FAIL: t off its face"; fail=1; };;
          gauss) [ "$p" = nan ] || [ "$p" = -nan ] || { echo "  FAIL: gauss p $p is not NaN"; fail=1; };;
        esac
        continue
      fi
      relcheck "$ll" "$ref_ll" 1e-12 || fail=1
      [ "$it" = "$ref_it" ] || { echo "  FAIL: iteration count $it != $ref_it"; fail=1; }
    done
  done
done

# fixed p: kept, recorded, one parameter fewer
for spec in "gh 1.5" "vg 3" "t -2.5"; do
  set -- $spec
  out=fix_$1.h5
  mpirun -np 2 "$G" fit --data data.h5 --model $1 --p-fixed $2 --out $out --quiet
  p=$("$H" $out /fits/$1/params/p); pf=$("$H" $out /fits/$1 p_fixed)
  echo "$1 --p-fixed $2: p $p, p_fixed attribute $pf"
  [ "$p" = "$2" ] && [ "$pf" = "$2" ] || { echo "  FAIL: p not held"; fail=1; }
  k=$(( $(nparams $1 0) - 1 )); ll=$("$H" $out /fits/$1 loglik); aic=$("$H" $out /fits/$1 aic)
  relcheck "$aic" "$(awk -v k=$k -v l=$ll 'BEGIN { printf "%.17g", 2 * k - 2 * l }')" 1e-14 ||
    { echo "  FAIL: aic with p fixed counts $k parameters?"; fail=1; }
done

# a vg fit stopped by its checkpoint resumes to the same fit (p > 0 and b = 0 in the checkpoint)
mpirun -np 2 "$G" fit --data data.h5 --model vg --out vref.h5 --quiet
GHFIT_TEST_STARTUP_SLEEP=2500 GHFIT_TEST_ITER_SLEEP=100 \
  mpirun -np 2 "$G" fit --data data.h5 --model vg --out v.h5 --checkpoint vck.h5 --quiet > vstop.txt 2>&1 &
bg=$!
wait_until "ranks_started $bg 2" 60; sleep 0.5; kill -USR1 $bg   # inside the 2.5 s start-up sleep
set +e; wait $bg; rc=$?; set -e
it=$("$H" vck.h5 /running/0 iter || echo none)
echo "vg stopped by SIGUSR1: exit $rc, checkpoint at iteration $it"
[ $rc = 75 ] && [ -e vck.h5 ] || { echo "  FAIL: no stop with a checkpoint"; cat vstop.txt; fail=1; }
mpirun -np 2 "$G" fit --data data.h5 --model vg --out v.h5 --checkpoint vck.h5 --resume --quiet
relcheck "$("$H" v.h5 /fits/vg loglik)" "$("$H" vref.h5 /fits/vg loglik)" 0 || { echo "  FAIL: vg resume"; fail=1; }

# bad model choices: exit 2, one line, nothing written
# (odls_base_sigkill_timeout=0: mpirun otherwise waits 1-2 s before it reports the
# ranks' exit 2; every rank has passed MPI_Finalize's fence, so after the error
# line, when it comes; only here: a stopped fit's ranks must not be killed early)
bad() { # expected-regex args...
  local re=$1; shift
  set +e; OMPI_MCA_odls_base_sigkill_timeout=0 mpirun -np 2 "$G" "$@" > bad.txt 2>&1; local rc=$?; set -e
  local n; n=$(grep -c "ghfit: error:" bad.txt || true)
  if [ $rc = 2 ] && [ "$n" = 1 ] && grep -Eq "$re" bad.txt && [ ! -e bad.h5 ]; then
    echo "ok   $*: $(grep 'ghfit: error:' bad.txt)"
  else
    echo "FAIL: $* (exit $rc, $n error lines)"; cat bad.txt; fail=1
  fi
  rm -f bad.h5
}
bad "vg.*needs p > 0" fit --data data.h5 --model vg --p-fixed -1 --out bad.h5
bad "Student-t family needs p < 0" fit --data data.h5 --model t --p-fixed 0.5 --out bad.h5
bad "p is fixed by the family" fit --data data.h5 --model hyp --p-fixed 1 --out bad.h5
bad "p is fixed by the family" fit --data data.h5 --model nig --p-fixed 1 --out bad.h5
bad "unknown model 'frobnic'.*gh" fit --data data.h5 --model frobnic --out bad.h5
printf 'data: data.h5\nout: bad.h5\nfamily: [nig, skewt]\n' > badfam.yaml
bad "badfam.yaml.*family: unknown family 'skewt'" run badfam.yaml
# generate draws from every family of the table; a fit of the same family
# recovers its gauge-free subordinator (p; sqrt(ab) where both are free)
gen_fit() { # family p-expected tol-p generate-args...
  local fam=$1 pe=$2 tol=$3; shift 3
  "$G" generate --model $fam --dim 2 --n 40000 --seed 9 --out g_$fam.h5 "$@" > /dev/null
  mpirun -np 2 "$G" fit --data g_$fam.h5 --model $fam --out gf_$fam.h5 --quiet --max-iter 3000
  local p; p=$("$H" gf_$fam.h5 /fits/$fam/params/p)
  if [ "$fam" = gauss ]; then
    [ "$p" = nan ] || [ "$p" = NaN ] || { echo "  FAIL: gauss p = $p"; fail=1; }
    echo "ok   generate gauss, fit gauss"
    return
  fi
  relcheck "$p" "$pe" "$tol" > /dev/null && echo "ok   generate $fam, fit $fam: p $p (drawn with $pe)" ||
    { echo "  FAIL: generate $fam, fit $fam: p $p, drawn with $pe"; fail=1; }
}
gen_fit hyp 1.5 0 --a 1 --b 1
gen_fit vg 2 0.1 --p 2 --a 1
gen_fit t -2.5 0.1 --p -2.5 --b 2
gen_fit gauss nan 0
bad "vg has b = 0" generate --model vg --b 1 --dim 2 --n 10 --seed 1 --out bad.h5
bad "t needs .*p < 0" generate --model t --p 1 --dim 2 --n 10 --seed 1 --out bad.h5
bad "gauss has no subordinator" generate --model gauss --a 1 --dim 2 --n 10 --seed 1 --out bad.h5
bad "hyp has p = 1.5 at --dim 2" generate --model hyp --p 1 --dim 2 --n 10 --seed 1 --out bad.h5
[ $fail -eq 0 ] && echo "fit_families: all passed" || echo "fit_families: FAILED"
exit $fail
