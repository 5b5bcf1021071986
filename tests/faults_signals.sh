#!/usr/bin/env bash
# Signals at start-up and the log (2 ranks):
#  1. SIGUSR1 while every rank is still starting (before MPI_Init;
#     GHFIT_TEST_STARTUP_SLEEP holds them there): `ghfit fit --checkpoint`
#     starts, stops at iteration 0, writes the checkpoint and exits 75 with
#     one "ghfit: note:" line (a planned stop is not an error); --resume then
#     equals an uninterrupted fit bitwise.
#  2. the same without --checkpoint (75, one note, nothing written) and with
#     the signal sent to one rank only (the ranks agree: 75 + checkpoint).
#  3. `ghfit run` (a sweep) signalled at start-up: 75, one note, a checkpoint
#     with no finished fit; --resume equals an uninterrupted sweep bitwise.
#  4. the log follows the run: with stdout in a file, iteration lines are
#     there while the fit runs (line-buffered), and after a stop the note
#     comes after the last iteration line.
#  5. commands that cannot stop end on SIGTERM leaving nothing: `gof
#     --bootstrap` (2 ranks, mpirun signalled) removes its lock file; `eval`
#     signalled while its temporary output exists (GHFIT_TEST_WRITE_SLEEP)
#     removes it and its lock, and dies of the signal (143).
#  6. SIGINT (Ctrl-C) ends a singleton fit and an eval at once (130), with no
#     output or lock file left and the last checkpoint kept (it resumes);
#     a fit started with SIGINT ignored runs on, and stops on SIGUSR1 (75).
# Every case: exact exit status, no hang, no signal death (but in 5, where
# the signal's default action is the documented end), inputs unchanged, no
# temporary file left.
# usage: faults_signals.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
SRC=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$W"; mkdir -p "$W/in"; cd "$W"
. "$SRC/tests/faults_lib.sh"

"$G" generate --model gh --dim 3 --n 6000 --seed 5 --p -1 --a 1.5 --b 0.7 --gamma 0.2,-0.1,0 --out in/d.h5 > /dev/null \
  || { echo "cannot generate"; exit 1; }
snapshot in > in.sha
FIT=(fit --data in/d.h5 --model gh --tol 1e-9 --max-iter 300 --quiet)
run_t 120 ref.txt mpirun -np 2 "$G" "${FIT[@]}" --out ref.h5 || { cat ref.txt; die "reference fit"; }

# --- 1. fit, signal during start-up, checkpoint, resume ---------------------------------
GHFIT_TEST_STARTUP_SLEEP=2500 start_bg s1.txt mpirun -np 2 "$G" "${FIT[@]}" --out a.h5 --checkpoint ck.h5
signal_at_startup $bgpid
wait_bg 120; rc=$?
outcome "fit signalled at start-up" $rc 75 s1.txt note "stopped on a signal at iteration 0; checkpoint written to ck.h5"
[ -e a.h5 ] && die "a stopped fit wrote its result"
[ "$("$H" ck.h5 /running/0 iter)" = 0 ] || die "the checkpoint is not at iteration 0"
ls *.tmp* > /dev/null 2>&1 && die "temporary files left: $(ls *.tmp*)"
run_t 120 s1r.txt mpirun -np 2 "$G" "${FIT[@]}" --out a.h5 --checkpoint ck.h5 --resume || { cat s1r.txt; die "resume"; }
same_fit ref.h5 a.h5 gh && ok "resumed after a start-up stop == uninterrupted (bitwise)" || die "resumed fit differs"

# --- 2. no checkpoint; one rank signalled ----------------------------------------------
GHFIT_TEST_STARTUP_SLEEP=2500 start_bg s2.txt mpirun -np 2 "$G" "${FIT[@]}" --out b.h5
signal_at_startup $bgpid
wait_bg 120; rc=$?
outcome "fit signalled at start-up, no checkpoint" $rc 75 s2.txt note "no checkpoint file was requested"
[ -e b.h5 ] && die "a stopped fit wrote its result"
GHFIT_TEST_STARTUP_SLEEP=2500 start_bg s3.txt mpirun -np 2 "$G" "${FIT[@]}" --out c.h5 --checkpoint ck3.h5
wait_until "ranks_started $bgpid 2" 60; sleep 0.5; r=$(ranks_of $bgpid | tail -1); [ -n "$r" ] && kill -USR1 "$r"
wait_bg 120; rc=$?
outcome "one rank signalled at start-up" $rc 75 s3.txt note "checkpoint written to ck3.h5"
[ -e c.h5 ] && die "a stopped fit wrote its result"

# --- 3. a sweep signalled at start-up ---------------------------------------------------------
cat > sw.yaml <<'YAML'
data: in/d.h5
out: sw.h5
family: [nig, gh]
tol: 1e-8
windows: {start: 0, length: 2000, step: 2000, count: 3}
warm_start: true
quiet: true
YAML
run_t 120 swref.txt mpirun -np 2 "$G" run sw.yaml --out swref.h5 || { cat swref.txt; die "reference sweep"; }
GHFIT_TEST_STARTUP_SLEEP=2500 start_bg s4.txt mpirun -np 2 "$G" run sw.yaml --checkpoint swck.h5
signal_at_startup $bgpid
wait_bg 120; rc=$?
outcome "sweep signalled at start-up" $rc 75 s4.txt note "stopped on a signal with 0 of 6 fits finished; checkpoint written"
[ -e sw.h5 ] && die "a stopped sweep wrote its result"
# resumed, stopped mid-run (a fit in progress), resumed and stopped again during start-up:
# the fit in progress stays in the checkpoint
GHFIT_TEST_ITER_SLEEP=100 start_bg s5.txt mpirun -np 2 "$G" run sw.yaml --checkpoint swck.h5 --resume --checkpoint-every 2
wait_until "grep -q '^\[' s5.txt || [ \$(\"$H\" swck.h5 / done_count 2>/dev/null || echo 0) -ge 1 ]" 60
sleep 0.5; kill -USR1 $bgpid
wait_bg 120; rc=$?
outcome "resumed sweep stopped mid-run" $rc 75 s5.txt note "checkpoint written to swck.h5"
nrun=$(h5ls swck.h5/running 2>/dev/null | grep -c Group)
[ "$nrun" -ge 1 ] || die "no fit in progress in the checkpoint of the stopped sweep"
GHFIT_TEST_STARTUP_SLEEP=2500 start_bg s6.txt mpirun -np 2 "$G" run sw.yaml --checkpoint swck.h5 --resume
signal_at_startup $bgpid
wait_bg 120; rc=$?
outcome "resumed sweep signalled at start-up" $rc 75 s6.txt note "checkpoint written to swck.h5"
nrun2=$(h5ls swck.h5/running 2>/dev/null | grep -c Group)
[ "$nrun2" = "$nrun" ] && ok "the $nrun fit(s) in progress are still in the checkpoint" \
  || die "fits in progress: $nrun before the start-up stop, $nrun2 after"
run_t 120 s4r.txt mpirun -np 2 "$G" run sw.yaml --checkpoint swck.h5 --resume || { cat s4r.txt; die "sweep resume"; }
for n in $(h5ls swref.h5/fits | awk '{print $1}'); do same_fit swref.h5 sw.h5 "$n" || die "sweep fit $n differs"; done
[ "$(h5ls sw.h5/fits | grep -c Group)" = 6 ] && ok "resumed sweep == uninterrupted sweep (6 fits, bitwise)" \
  || die "the resumed sweep does not hold 6 fits"

# --- 4. the log: line-buffered, ordered ----------------------------------------------------------
GHFIT_TEST_ITER_SLEEP=500 start_bg log.txt mpirun -np 2 "$G" fit --data in/d.h5 --model gh --tol 0 --max-iter 400 \
  --out l.h5 --checkpoint lck.h5 --checkpoint-every 5
wait_until "[ \$(grep -c '^iter ' log.txt) -ge 3 ]" 60 && ok "iteration lines reach the log while the fit runs" \
  || die "no iteration line in the log after 60 s (block-buffered?)"
kill -USR1 $bgpid
wait_bg 120; rc=$?
outcome "fit signalled mid-run" $rc 75 log.txt note "checkpoint written to lck.h5"
last_iter=$(grep -n '^iter ' log.txt | tail -1 | cut -d: -f1); note=$(grep -n '^ghfit: note:' log.txt | cut -d: -f1)
[ -n "$last_iter" ] && [ -n "$note" ] && [ "$note" -gt "$last_iter" ] && ok "the note follows the last iteration line" \
  || die "the note (line $note) comes before iteration lines (line $last_iter)"
k=$("$H" lck.h5 /running/0 iter); li=$(grep '^iter ' log.txt | tail -1 | awk '{print $2}')
[ -n "$li" ] && [ "$li" -ge $((k - 1)) ] && ok "the log reaches iteration $li (checkpoint at $k)" \
  || die "the log ends at iteration '$li', the checkpoint is at $k"

# --- 5. the commands that cannot stop end on the signal, leaving nothing -------------------------
# (ghfit.sbatch relies on it: a cancelled eval, gof, sample or risk leaves no output, temporary
# or lock file).  gof --bootstrap holds its output's lock while it refits; eval holds its temporary
# output file while it writes (GHFIT_TEST_WRITE_SLEEP holds it there).
run_t 120 gfit.txt mpirun -np 1 "$G" fit --data in/d.h5 --model nig --out gfit.h5 --quiet || { cat gfit.txt; die "fit for gof"; }
start_bg g1.txt mpirun -np 2 "$G" gof --model gfit.h5 --data in/d.h5 --out g.h5 --bootstrap 100000
wait_until "[ -e g.h5.lock ] && grep -q 'bootstrap: ' g1.txt" 60 || die "gof --bootstrap: no lock file, no bootstrap line"
kill -TERM $bgpid
wait_bg 60; rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || die "gof --bootstrap stopped by SIGTERM (mpirun): exit $rc"
left=$(ls -A | grep '^g\.h5')
[ -z "$left" ] && ok "gof --bootstrap, SIGTERM: ends (exit $rc), no output, temporary or lock file left" ||
  die "gof --bootstrap, SIGTERM: left $left"
GHFIT_TEST_WRITE_SLEEP=30 start_bg e1.txt "$G" eval --model gfit.h5 --data in/d.h5 --out e.h5
wait_until "grep -q 'ghfit: test: e.h5.tmp.[0-9]* created' e1.txt" 60 || die "eval: no temporary file announced"
ls e.h5.tmp.* e.h5.lock > /dev/null || die "eval: the temporary file or the lock is not there"
kill -TERM $bgpid
wait_bg 20; rc=$?
[ $rc = 143 ] || die "eval stopped by SIGTERM while writing: exit $rc, expected 143 (the signal's default action)"
left=$(ls -A | grep '^e\.h5')
[ -z "$left" ] && ok "eval, SIGTERM while writing: ends by the signal, its temporary file and lock removed" ||
  die "eval, SIGTERM while writing: left $left"

# --- 6. Ctrl-C (SIGINT) ends even fit at once; a signal started ignored stays ignored -------------
# A background job of a script starts with SIGINT ignored: env --default-signal=INT undoes that.
# --tol 0: no fit here can end before it is signalled, however slow the machine.
FIT0=(fit --data in/d.h5 --model gh --tol 0 --max-iter 300 --quiet)
GHFIT_TEST_ITER_SLEEP=100 start_bg i1.txt env --default-signal=INT "$G" "${FIT0[@]}" --out f6.h5 --checkpoint ck6.h5 --checkpoint-every 2
wait_until "[ -e ck6.h5 ] && [ -e f6.h5.lock ]" 60 || die "fit: no checkpoint or lock file after 60 s"
kill -INT $bgpid
wait_bg 20; rc=$?
[ $rc = 130 ] || die "fit, SIGINT: exit $rc, expected 130 (the signal's default action)"
left=$(ls -A | grep '^f6\.h5')
[ -z "$left" ] && ok "fit, SIGINT: ends by the signal, no output or lock file left" || die "fit, SIGINT: left $left"
k=$("$H" ck6.h5 /running/0 iter 2>/dev/null)
[ -n "$k" ] && [ "$k" -ge 2 ] || die "fit, SIGINT: the last checkpoint is not kept (iter '$k')"
run_t 120 i1r.txt "$G" "${FIT0[@]}" --out f6.h5 --checkpoint ck6.h5 --resume || { cat i1r.txt; die "resume after SIGINT"; }
"$H" f6.h5 /fits/gh loglik > /dev/null && ok "fit, SIGINT: the checkpoint at iteration $k resumes to a result" ||
  die "no result after the resume"
GHFIT_TEST_WRITE_SLEEP=30 start_bg e2.txt env --default-signal=INT "$G" eval --model gfit.h5 --data in/d.h5 --out e2.h5
wait_until "grep -q 'ghfit: test: e2.h5.tmp.[0-9]* created' e2.txt" 60 || die "eval: no temporary file announced"
kill -INT $bgpid
wait_bg 20; rc=$?
left=$(ls -A | grep '^e2\.h5')
[ $rc = 130 ] && [ -z "$left" ] && ok "eval, SIGINT while writing: ends by the signal, nothing left" ||
  die "eval, SIGINT while writing: exit $rc (expected 130), left '$left'"
GHFIT_TEST_ITER_SLEEP=100 start_bg i3.txt env --ignore-signal=INT "$G" "${FIT0[@]}" --out f7.h5 --checkpoint ck7.h5
wait_until "[ -e f7.h5.lock ]" 60 || die "fit: no lock file after 60 s"
kill -INT $bgpid; sleep 1
kill -0 $bgpid 2>/dev/null || die "fit started with SIGINT ignored: ended on SIGINT"
kill -USR1 $bgpid
wait_bg 60; rc=$?
outcome "fit started with SIGINT ignored, then SIGUSR1" $rc 75 i3.txt note "checkpoint written to ck7.h5"

same_files "inputs" in.sha in
ls *.tmp* > /dev/null 2>&1 && die "temporary files left: $(ls *.tmp*)"
[ $fail -eq 0 ] && echo "faults_signals: all passed" || echo "faults_signals: FAILED"
exit $fail
