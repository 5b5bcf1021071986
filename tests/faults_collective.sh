#!/usr/bin/env bash
# Collective discipline: one chosen rank fails at a start-up step
# (GHFIT_TEST_FAIL=STEP@RANK, src/dist/agree.h) and the others must not wait
# in a collective it never enters.  Steps: output (the output check),
# prepare (data preparation), backend (backend creation), alloc (the EM
# state).  For `ghfit fit` and a `ghfit run` sweep, on NP ranks (2 or 3),
# each failing rank: the run ends within seconds (no hang), exit 1, exactly
# one `ghfit: error:` line naming the injected step, no result file, no
# temporary file.
# usage: faults_collective.sh GHFIT WORKDIR NP
set -uo pipefail
G=$1; W=$2; NP=$3
rm -rf "$W"; mkdir -p "$W"; cd "$W" || exit 1
"$G" generate --model gh --dim 3 --n 1500 --seed 3 --out d.h5 > /dev/null || { echo "cannot generate"; exit 1; }
cat > sw.yaml <<'YAML'
data: d.h5
out: sw.h5
family: [nig, gh]
tol: 1e-8
windows: {start: 0, length: 500, step: 500, count: 3}
rows_per_rank: 400
quiet: true
YAML
fail=0
for cmd in fit run; do
  for step in output prepare backend alloc; do
    for ((r = 0; r < NP; r++)); do
      rm -f out.h5 sw.h5 ./*.tmp*
      if [ $cmd = fit ]; then args=(fit --data d.h5 --model gh --out out.h5 --quiet); res=out.h5
      else args=(run sw.yaml); res=sw.h5; fi
      t0=$(date +%s.%N)
      GHFIT_TEST_FAIL=$step@$r timeout 60 mpirun -np "$NP" "$G" "${args[@]}" > o.txt 2> e.txt
      rc=$?
      dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
      n=$(grep -c "^ghfit: error:" e.txt)
      line=$(grep "^ghfit: error:" e.txt | head -1)
      what="$cmd, $step fails on rank $r of $NP"
      if [ $rc = 124 ]; then echo "FAIL: $what: hung (killed after 60 s)"; fail=1; continue; fi
      bad=""
      [ $rc = 1 ] || bad="$bad exit $rc (expected 1);"
      [ "$n" = 1 ] || bad="$bad $n error lines;"
      case "$line" in *"rank $r: $step failed (injected"*) ;; *) bad="$bad the line does not name it;" ;; esac
      [ -e "$res" ] && bad="$bad a result file was written;"
      ls ./*.tmp* > /dev/null 2>&1 && bad="$bad temporary files left;"
      awk -v t="$dt" 'BEGIN { exit !(t < 30) }' || bad="$bad took $dt s;"
      if [ -n "$bad" ]; then echo "FAIL: $what:$bad"; sed 's/^/    | /' e.txt | head -8; fail=1
      else echo "ok   $what: exit 1 in $dt s: $line"; fi
    done
  done
done
[ $fail = 0 ] && echo "faults_collective: all passed" || echo "faults_collective: FAILED"
exit $fail
