#!/usr/bin/env bash
# Arrays (issue 15): `ghfit run --slice K/4` over a warm-started rolling-window
# sweep gives, slice by slice, bitwise the fits of one `ghfit run` on 4 ranks
# (4 one-rank groups): slice K is group K's contiguous block of windows of
# every chain, so the warm-start chains stay whole (and the warm starts matter
# here: the sweep started afresh has other iteration counts).  The result
# files record slice "K/4", the job's job_hash (the same in every slice and in
# the whole run) and n_fits_total; `ghfit summary` over 3 of the 4 files
# prints the 3 files' fits, exits 0 and warns in one line naming the missing
# slice; over all 4 it prints no warning.
# usage: batch_array.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
SRC=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$W"; mkdir -p "$W"; cd "$W" || exit 1
. "$SRC/tests/faults_lib.sh"

"$G" generate --model gh --dim 3 --n 7000 --seed 11 --p -1 --a 1.5 --b 0.7 --gamma 0.2,-0.1,0 --out data.h5 > /dev/null ||
  { echo "cannot generate"; exit 1; }
cat > roll.yaml <<'EOF'
data: data.h5
out: full.h5
family: [gh, nig]
tol: 1e-9
max_iter: 1000
windows: {length: 1000, step: 500, count: 12}
warm_start: true
EOF
# one run on 4 ranks: 4 groups of one rank (windows of 1000 rows, rows_per_rank 200000)
run_t 300 full.txt mpirun -np 4 "$G" run roll.yaml || { cat full.txt; die "ghfit run on 4 ranks"; }
grep -q "24 fits (of 24) of data.h5:/X (7000 x 3) on 4 ranks: 4 groups of 1 rank" full.txt &&
  ok "the whole run: 24 fits on 4 one-rank groups" || { head -3 full.txt; die "not 4 groups of one rank"; }
# the 4 slices, one rank each
for k in 0 1 2 3; do
  run_t 300 s$k.txt "$G" run roll.yaml --slice $k/4 --out s_$k.h5 || { cat s$k.txt; die "slice $k/4"; }
done
hash=$("$H" full.h5 / job_hash)
[ ${#hash} = 16 ] && [ "$("$H" full.h5 / slice)" = 0/1 ] && [ "$("$H" full.h5 / n_fits_total)" = 24 ] &&
  ok "full.h5: slice 0/1, job_hash $hash, n_fits_total 24" || die "full.h5: slice/job_hash/n_fits_total"
n=0
for k in 0 1 2 3; do
  f=s_$k.h5
  [ "$("$H" $f / slice)" = "$k/4" ] && [ "$("$H" $f / job_hash)" = "$hash" ] && [ "$("$H" $f / n_fits_total)" = 24 ] ||
    die "$f: slice '$("$H" $f / slice)', job_hash '$("$H" $f / job_hash)', n_fits_total '$("$H" $f / n_fits_total)'"
  # group k's block: windows 3k..3k+2 of both chains
  want=$(for fam in gh_pfree nig; do for w in 0 1 2; do printf "%s_tol1e-09_s1_w%06d\n" $fam $((3 * k + w)); done; done | sort)
  have=$(h5ls $f/fits | awk '{print $1}' | sort)
  [ "$have" = "$want" ] || die "$f holds $(echo $have) (expected windows $((3 * k))..$((3 * k + 2)) of each chain)"
  for fit in $have; do
    n=$((n + 1))
    same_fit full.h5 $f $fit || die "$fit: slice $k/4 differs from the whole run"
  done
done
[ $n = 24 ] && [ $fail = 0 ] && ok "4 slices == one run with 4 groups: all 24 fits bitwise equal (loglik, trace, parameters, moments)"
# the warm starts matter: started afresh, the iteration counts differ
run_t 300 cold.txt mpirun -np 4 "$G" run roll.yaml --no-warm-start --out cold.h5 --quiet || die "cold run"
nd=0
for fit in $(h5ls full.h5/fits | awk '{print $1}'); do
  [ "$("$H" full.h5 /fits/$fit n_iter)" = "$("$H" cold.h5 /fits/$fit n_iter)" ] || nd=$((nd + 1))
done
[ $nd -gt 0 ] && ok "warm starts change $nd of 24 iteration counts: a slice that broke a chain would be seen" ||
  die "warm and cold starts give the same iteration counts: the comparison above proves nothing"

# summary: 3 of 4 files warn, naming the missing slice; 4 of 4 do not
"$G" summary s_0.h5 s_1.h5 s_3.h5 > sum3.txt 2> sum3.err; rc=$?
[ $rc = 0 ] && [ "$(grep -c . sum3.err)" = 1 ] &&
  grep -q "^ghfit: warning: the files of job $hash hold 3 of its 4 slices: slice 2/4 missing (the table has 18 of the job's 24 fits; given: s_0.h5 (0/4), s_1.h5 (1/4), s_3.h5 (3/4))$" sum3.err &&
  [ "$(grep -c "_tol1e-09_s1_w" sum3.txt)" = 18 ] &&
  ok "summary over 3 of 4 slices: 18 fits, exit 0, $(cat sum3.err)" || { cat sum3.err; die "summary over 3 of 4 slices (exit $rc)"; }
"$G" summary s_0.h5 s_1.h5 s_2.h5 s_3.h5 full.h5 > sum4.txt 2> sum4.err; rc=$?
[ $rc = 0 ] && [ ! -s sum4.err ] && [ "$(grep -c "_tol1e-09_s1_w" sum4.txt)" = 48 ] &&
  ok "summary over all 4 slices and the whole run: no warning" || { cat sum4.err; die "summary over 4 of 4 (exit $rc)"; }
"$G" summary s_2.h5 > sum1.txt 2> sum1.err; rc=$?
[ $rc = 0 ] && grep -q "^ghfit: warning: .* hold 1 of its 4 slices: slices 0/4, 1/4, 3/4 missing" sum1.err &&
  ok "summary over one slice names the 3 missing" || { cat sum1.err; die "summary over one slice"; }

[ $fail -eq 0 ] && echo "batch_array: all passed" || echo "batch_array: FAILED"
exit $fail
