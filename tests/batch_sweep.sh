#!/usr/bin/env bash
# `ghfit run` end to end: a sweep of 2 families x 3 windows x 2 seeds on 2
# ranks (two groups of one rank) gives 12 fits whose log-likelihoods (1e-12
# relative) and iteration counts match 12 separate `ghfit fit --rows --seed`
# runs; the same job on one group of 2 ranks agrees too; --slice K/N splits
# the fits into disjoint result files that `ghfit summary` combines; a bad job
# file exits 2 naming the line and leaves no output.
# usage: batch_sweep.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$SRC/tests/lib.sh"
rm -rf "$W"; mkdir -p "$W"; cd "$W"
fail=0
die() { echo "FAIL: $*"; fail=1; }

"$G" generate --model gh --dim 3 --n 9000 --seed 7 --p -1 --a 1.5 --b 0.7 --gamma 0.2,-0.1,0 --out data.h5 >/dev/null \
  || { echo "cannot generate"; exit 1; }
cat > sweep.yaml <<'EOF'
# 2 families x 3 windows x 2 seeds
data:
  file: data.h5
out: sweep.h5
family: [gh, nig]
tol: 1e-9
seed: [1, 2]
starts: 6
max_iter: 1500
windows: {start: 500, length: 2500, step: 2000, count: 3}
quiet: true
EOF
mpirun -np 2 "$G" run sweep.yaml > run.txt 2>&1 || { cat run.txt; die "ghfit run exited $?"; }
grep -q "gh_pfree_tol1e-09_s2_w000001" run.txt || die "summary table not printed"
names=$("$H" sweep.h5 / n_ranks >/dev/null && h5ls sweep.h5/fits 2>/dev/null | awk '{print $1}')
nf=$(echo "$names" | grep -c .)
[ "$nf" = 12 ] || die "expected 12 fits in sweep.h5, found $nf"
h5dump -d /config sweep.h5 2>/dev/null | grep -q "windows: {start: 500, length: 2500, step: 2000, count: 3}" \
  || die "/config lacks the effective configuration"

# the same job on ONE group of 2 ranks (rows_per_rank small)
mpirun -np 2 "$G" run sweep.yaml --rows-per-rank 1000 --out sweep1g.h5 > run1g.txt 2>&1 || { cat run1g.txt; die "one-group run"; }

for fam in gh nig; do
  for w in 0 1 2; do
    for s in 1 2; do
      if [ $fam = gh ]; then name=gh_pfree_tol1e-09_s${s}_w00000$w; else name=nig_tol1e-09_s${s}_w00000$w; fi
      start=$((500 + 2000 * w))
      "$G" fit --data data.h5 --model $fam --rows $start:2500 --seed $s --starts 6 --tol 1e-9 \
        --max-iter 1500 --quiet --out f_$name.h5 > /dev/null 2>&1 || { die "fit $name"; continue; }
      llr=$("$H" sweep.h5 /fits/$name loglik); itr=$("$H" sweep.h5 /fits/$name n_iter)
      llf=$("$H" f_$name.h5 /fits/$fam loglik); itf=$("$H" f_$name.h5 /fits/$fam n_iter)
      ll1=$("$H" sweep1g.h5 /fits/$name loglik); it1=$("$H" sweep1g.h5 /fits/$name n_iter)
      no=$("$H" sweep.h5 /fits/$name n_obs)
      echo "$name: run $llr ($itr it)  fit $llf ($itf it)  2-rank group $ll1 ($it1 it)"
      relcheck "$llr" "$llf" 1e-12 || die "$name: loglik $llr != $llf"
      [ "$itr" = "$itf" ] || die "$name: iterations $itr != $itf"
      relcheck "$ll1" "$llf" 1e-12 || die "$name (2-rank group): loglik $ll1 != $llf"
      [ "$it1" = "$itf" ] || die "$name (2-rank group): iterations $it1 != $itf"
      [ "$no" = 2500 ] || die "$name: n_obs $no"
    done
  done
done

# slices: 3 disjoint result files with all 12 fits; ghfit summary combines them
for k in 0 1 2; do
  "$G" run sweep.yaml --slice $k/3 --out slice_$k.h5 > /dev/null 2>&1 || die "slice $k/3"
done
"$G" summary slice_0.h5 slice_1.h5 slice_2.h5 --sort aic > summary.txt 2>&1 || die "ghfit summary"
cat summary.txt
rows=$(grep -c "_tol1e-09_" summary.txt)
[ "$rows" = 12 ] || die "summary has $rows rows, expected 12"
for f in slice_0.h5 slice_1.h5 slice_2.h5; do
  for n in $(h5ls $f/fits | awk '{print $1}'); do
    a=$("$H" $f /fits/$n loglik); b=$("$H" sweep.h5 /fits/$n loglik)
    [ "$a" = "$b" ] || die "$f $n: $a != $b"
  done
done
# sorted by AIC: the dAIC column starts at 0 and never decreases
python3 - summary.txt <<'PY' || die "summary not sorted by AIC"
import sys
rows=[l.split() for l in open(sys.argv[1]) if "_tol1e-09_" in l]
aic=[float(r[6]) for r in rows]
sys.exit(0 if aic == sorted(aic) and rows[0][8] == "0.0000" else 1)
PY
"$G" summary slice_0.h5 --sort loglik > s2.txt 2>&1 || die "summary --sort loglik"
"$G" summary slice_0.h5 --sort size > s3.txt 2>&1; [ $? = 2 ] || die "--sort size accepted"
"$G" summary nothere.h5 > s4.txt 2>&1; [ $? = 2 ] || die "missing summary file accepted"

# bad job files: exit 2, one message naming file:line, no output
bad() {
  local want=$1; shift
  printf "$@" > bad.yaml
  rm -f bad.h5*
  mpirun -np 2 "$G" run bad.yaml > bad.txt 2>&1; local rc=$?
  [ $rc = 2 ] || { cat bad.txt; die "bad job: exit $rc, expected 2"; }
  grep -q "^ghfit: error: $want" bad.txt || { cat bad.txt; die "bad job: message lacks '$want'"; }
  [ "$(grep -c '^ghfit: error:' bad.txt)" = 1 ] || { cat bad.txt; die "bad job: not exactly one error line"; }
  ls bad.h5* > /dev/null 2>&1 && die "bad job left output"
  echo "ok   bad job -> $(grep '^ghfit: error:' bad.txt)"
}
bad "bad.yaml:3: unknown key 'tolerence'" 'data: data.h5\nout: bad.h5\ntolerence: 1e-8\n'
bad "bad.yaml:4: tol: 'x' is not a non-negative number" 'data: data.h5\nout: bad.h5\nfamily: nig\ntol: x\n'
bad "bad.yaml: windows: 100 windows" 'data: data.h5\nout: bad.h5\nwindows: {length: 1000, count: 100}\n'
bad "nothere.h5" 'data: nothere.h5\nout: bad.h5\n'

# the example job files of jobs/ parse and run (on this data, a few iterations)
for jf in "$SRC"/jobs/*.yaml; do
  b=$(basename "$jf" .yaml)
  mpirun -np 2 "$G" run "$jf" --data data.h5 --dataset /X --out ex_$b.h5 --checkpoint ex_$b.ckpt.h5 --max-iter 3 --quiet \
    > ex_$b.txt 2>&1 || { cat ex_$b.txt; die "example job $jf"; }
  [ -e ex_$b.h5 ] && echo "ok   example $b.yaml: $(h5ls ex_$b.h5/fits | grep -c Group) fits" || die "example $b: no result"
done

[ $fail -eq 0 ] && echo "batch_sweep: all passed" || echo "batch_sweep: FAILED"
exit $fail
