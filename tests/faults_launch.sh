#!/usr/bin/env bash
# A stop signal while the ranks are still loading (issue 25, item 3), 2 ranks
# under mpirun.  GHFIT_TEST_LOAD_SLEEP holds each rank before main, where the
# dynamic loader and the libraries' constructors run and ghfit has no handler
# yet (a cold shared file system makes that seconds long):
#  1. through ghfit-launch (which blocks the stop signals from the ranks' first
#     instruction; ghfit unblocks them once its handlers exist): SIGUSR1 to
#     mpirun (forwarded to the ranks) gives the documented stop: exit 75, one
#     "ghfit: note:" line, a checkpoint at iteration 0, no lock or temporary
#     file; SIGTERM to the ranks themselves (what Slurm's scancel does) too;
#  2. without it, the same SIGUSR1 ends the ranks by the signal (the
#     limitation the user guide states): nothing written, no lock left;
#  3. ghfit-launch's own errors: no program (exit 2), a program that cannot
#     run (exit 127), one line each.
# usage: faults_launch.sh GHFIT GHFIT_LAUNCH H5GET WORKDIR
set -uo pipefail
G=$1; L=$2; H=$3; W=$4
SRC=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$W"; mkdir -p "$W/in"; cd "$W"
. "$SRC/tests/faults_lib.sh"

"$G" generate --model gh --dim 3 --n 3000 --seed 5 --p -1 --a 1.5 --b 0.7 --gamma 0.2,-0.1,0 --out in/d.h5 > /dev/null ||
  { echo "cannot generate"; exit 1; }
snapshot in > in.sha
FIT=(fit --data in/d.h5 --model nig --tol 1e-9 --max-iter 300 --quiet)
nothing_left() { # NAME OUT: no temporary or lock file of OUT (or of its checkpoint)
  local left; left=$(ls -A | grep -F "$2" | grep -E '\.tmp|\.lock' | tr '\n' ' ')
  [ -z "$left" ] || die "$1: left $left"
}

# ---- 1. through ghfit-launch: handled ----------------------------------------------------------
GHFIT_TEST_LOAD_SLEEP=2000 start_bg l1.txt mpirun -np 2 "$L" "$G" "${FIT[@]}" --out a.h5 --checkpoint ck.h5
wait_until "ranks_started $bgpid 2" 60 || die "the ranks did not start ghfit"
sleep 0.3; kill -USR1 $bgpid
wait_bg 120; rc=$?
outcome "ghfit-launch, SIGUSR1 to mpirun while the ranks load" $rc 75 l1.txt note \
  "stopped on a signal at iteration 0; checkpoint written to ck.h5"
[ -e a.h5 ] && die "a stopped fit wrote its result"
[ "$("$H" ck.h5 /running/0 iter 2>/dev/null)" = 0 ] || die "no checkpoint at iteration 0"
nothing_left "ghfit-launch, SIGUSR1" a.h5

GHFIT_TEST_LOAD_SLEEP=2000 start_bg l2.txt mpirun -np 2 "$L" "$G" "${FIT[@]}" --out b.h5 --checkpoint ckb.h5
wait_until "ranks_started $bgpid 2" 60 || die "the ranks did not start ghfit"
sleep 0.3; for r in $(ranks_of $bgpid); do kill -TERM "$r"; done
wait_bg 120; rc=$?
outcome "ghfit-launch, SIGTERM to the ranks while they load" $rc 75 l2.txt note \
  "stopped on a signal at iteration 0; checkpoint written to ckb.h5"
[ -e b.h5 ] && die "a stopped fit wrote its result"
nothing_left "ghfit-launch, SIGTERM" b.h5

# ---- 2. without it: the ranks end by the signal, nothing written ---------------------------------
GHFIT_TEST_LOAD_SLEEP=2000 start_bg l3.txt mpirun -np 2 "$G" "${FIT[@]}" --out c.h5 --checkpoint ckc.h5
wait_until "ranks_started $bgpid 2" 60 || die "the ranks did not start ghfit"
sleep 0.3; kill -USR1 $bgpid
wait_bg 120; rc=$?
[ $rc != 0 ] && [ $rc != 124 ] && grep -q "exited on signal 10" l3.txt && [ ! -e c.h5 ] && [ ! -e ckc.h5 ] &&
  ok "without ghfit-launch, SIGUSR1 while the ranks load ends them by the signal (exit $rc), nothing written" ||
  { die "without ghfit-launch: exit $rc"; sed 's/^/    | /' l3.txt | head; }
nothing_left "without ghfit-launch" c.h5

# ---- 3. ghfit-launch's errors ------------------------------------------------------------------------
"$L" > e1.txt 2>&1; rc=$?
[ $rc = 2 ] && [ "$(wc -l < e1.txt)" = 1 ] && grep -q "^usage: ghfit-launch PROGRAM" e1.txt &&
  ok "ghfit-launch without a program: exit 2, one usage line" || die "ghfit-launch without a program: exit $rc: $(cat e1.txt)"
"$L" ./no-such-ghfit fit > e2.txt 2>&1; rc=$?
[ $rc = 127 ] && [ "$(wc -l < e2.txt)" = 1 ] && grep -q "^ghfit-launch: error: cannot run ./no-such-ghfit" e2.txt &&
  ok "ghfit-launch with a missing program: exit 127, one line" || die "ghfit-launch, missing program: exit $rc: $(cat e2.txt)"

same_files "inputs" in.sha in
[ $fail -eq 0 ] && echo "faults_launch: all passed" || echo "faults_launch: FAILED"
exit $fail
