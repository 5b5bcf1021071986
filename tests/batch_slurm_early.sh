#!/usr/bin/env bash
# Signals in the first seconds of a ghfit.sbatch job (issue 25, item 3), on a
# real one-node Slurm (tests/slurm_lib.sh; skipped without Slurm, as
# batch_slurm).  `ghfit.sbatch fit` on 2 tasks; every ghfit sleeps 1.5 s before
# main (GHFIT_TEST_LOAD_SLEEP: a slow dynamic loader, no ghfit handler yet),
# and each signal is sent 0, 0.2, 1 and 3 s after the job starts running, so
# it reaches the batch shell before its traps, during the `ghfit check` step
# (A), while srun starts the ranks, while they load (B and C skip the check
# step: GHFIT_CHECK=0), or once they run:
#  A. scancel (SIGTERM to the script and the ranks): the job ends CANCELLED,
#     not requeued, with one `ghfit.sbatch: note: SIGTERM ...` line (or, when
#     the signal came before the script's first line, only Slurm's "CANCELLED"
#     line), no rank ended by a signal, no lock or temporary file left; the
#     same command submitted again completes (exit 0);
#  B. the time-limit warning (`scancel --batch --signal=USR1`, what
#     --signal=B:USR1@T does) in a --time=1 job: in the first half of the
#     limit it is moved (one note) and the fit, done in time, completes
#     without a requeue; before the script's first line it ends the job by
#     the signal (FAILED, signal 10) with nothing started or left, and a
#     resubmission completes, or, before Slurm has started the script, it is
#     lost (the job completes);
#  C. `scancel --signal=USR1` (to the ranks): a checkpoint and a requeue, then
#     the resumed fit completes; a signal sent before srun has started any rank
#     reaches no process (the job completes, not requeued); never a rank ended
#     by the signal (what happened on main: "tasks 0-1: User defined signal 1").
# usage: batch_slurm_early.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$SRC/tests/slurm_lib.sh"
t_start=$(date +%s)

fail=0
rm -rf "$W"; mkdir -p "$W"; cd "$W"

slurm_check_installed
slurm_start "$W/cluster" "${GHFIT_SLURM_TEST_BUDGET:-240}"
slurm_job_env "$G"
[ -x "$(dirname "$G")/ghfit-launch" ] || { echo "FAIL: no ghfit-launch beside $G"; exit 1; }

"$G" generate --model gh --dim 3 --n 4000 --seed 3 --p -1 --a 1.5 --b 0.7 --out d.h5 > /dev/null || { echo "FAIL: generate"; exit 1; }
S=$SRC/slurm/ghfit.sbatch
fitcmd() { echo fit --data "$W/d.h5" --model nig --tol 0 --max-iter 16 --quiet --backend cpu --out "$W/$1.h5"; }
declare -A J T K
TIMES=(0 0.2 1 3)
# all jobs at once; one loop watches them start (squeue every 20 ms) and signals
# each T seconds after its own start.  A runs the script's `ghfit check` step
# first (the default), B and C skip it (GHFIT_CHECK=0), so that their signals
# reach srun starting the ranks and the ranks loading.
for kind in A B C; do
  for t in "${TIMES[@]}"; do
    n=$kind$t; extra=(--ntasks=2); chk=1
    [ $kind = B ] && extra=(--time=1 --ntasks=1)
    [ $kind = A ] || chk=0
    j=$(GHFIT_CHECK=$chk GHFIT_TEST_LOAD_SLEEP=1500 GHFIT_TEST_ITER_SLEEP=300 sub "${extra[@]}" --output="$W/$n.out" \
        "$S" $(fitcmd $n)) || { die "sbatch $n"; continue; }
    J[$n]=$j; T[$j]=$t; K[$j]=$kind
  done
done
signal() { # KIND JOB
  case $1 in
    A) scancel "$2" ;;
    B) scancel --batch --signal=USR1 "$2" ;;
    C) scancel --signal=USR1 "$2" ;;
  esac
}
waiting=" ${J[*]} " spids=()
for _ in $(seq 1 6000); do
  for j in $(squeue -h -t RUNNING -o %i 2> /dev/null); do
    case "$waiting" in *" $j "*) ;; *) continue ;; esac
    waiting=${waiting/ $j / }
    if [ "${T[$j]}" = 0 ]; then signal "${K[$j]}" "$j"; else ( sleep "${T[$j]}"; signal "${K[$j]}" "$j" ) & spids+=($!); fi
  done
  [ -z "${waiting// /}" ] && break
  sleep 0.02
done
[ -z "${waiting// /}" ] || die "jobs that never ran: $waiting"
for p in "${spids[@]}"; do wait "$p"; done
echo "submitted and signalled: $(for n in "${!J[@]}"; do printf '%s=%s ' "$n" "${J[$n]}"; done) ($(( $(date +%s) - t_start )) s)"

exitcode() { scontrol show job "$1" 2>/dev/null | grep -o ' ExitCode=[^ ]*' | cut -d= -f2; }
died=" tasks\? [0-9-]*: \(User defined signal 1\|Terminated\|Killed\)\|exited on signal"
leftovers() { ls -A | grep -F "$1.h5" | grep -E '\.lock|\.tmp' | tr '\n' ' '; }
resub=()
check() { # NAME: the common part: no rank ended by a signal, no lock or temporary file
  local n=$1
  grep -q "$died" "$n.out" && die "$n: a rank ended by the signal: $(grep "$died" "$n.out" | head -1)"
  [ -z "$(leftovers $n)" ] || die "$n: left $(leftovers $n)"
}

# ---- A. scancel --------------------------------------------------------------------------------------
for t in "${TIMES[@]}"; do
  n=A$t; j=${J[$n]:-}; [ -n "$j" ] || continue
  wait_done "$j" 60 || { die "$n: job $j did not end"; continue; }
  sleep 1
  st=$(state_of "$j"); ec=$(exitcode "$j"); notes=$(grep -c "^ghfit.sbatch: note: SIGTERM" "$n.out")
  before=0
  [ "$notes" = 0 ] && [ "$ec" = 0:15 ] && grep -q "CANCELLED AT" "$n.out" && [ "$(grep -c . "$n.out")" = 1 ] && before=1
  { [ "$notes" = 1 ] || [ $before = 1 ]; } && [ "$st" = CANCELLED ] && [ "$(restarts_of "$j")" = 0 ] ||
    { die "$n (scancel at $t s): state $st, exit $ec, restarts $(restarts_of "$j"), $notes SIGTERM notes"; show "$n.out"; }
  check $n
  how=$(grep -m1 "^ghfit.sbatch: note: SIGTERM" "$n.out" | cut -c1-110)
  [ $fail = 0 ] && ok "scancel $t s after the start: CANCELLED, not requeued, ${how:-before the script ran: only the CANCELLED line of Slurm}; nothing left"
  resub+=("$n")
done

# ---- B. the time-limit warning --------------------------------------------------------------------
for t in "${TIMES[@]}"; do
  n=B$t; j=${J[$n]:-}; [ -n "$j" ] || continue
  wait_done "$j" 90 || { die "$n: job $j did not end"; continue; }
  st=$(state_of "$j"); ec=$(exitcode "$j")
  if [ "$st" = FAILED ] && [ "$ec" = 0:10 ] && [ ! -s "$n.out" ] && [ ! -e $n.h5 ] && [ ! -e $n.ckpt.h5 ]; then
    ok "time-limit warning $t s after the start, before the script's first line: FAILED (signal 10), nothing started"
    resub+=("$n")
  elif [ "$st" = COMPLETED ] && [ "$ec" = 0:0 ] && [ "$(restarts_of "$j")" = 0 ] && [ -e $n.h5 ] && [ ! -e $n.ckpt.h5 ] &&
       [ "$(grep -c "^ghfit.sbatch: note: time-limit warning .* moved to 15 s before the end" "$n.out")" = 1 ]; then
    ok "time-limit warning $t s after the start: moved (one note), the fit completes in time, not requeued"
  elif [ "$t" = 0 ] && [ "$st" = COMPLETED ] && [ "$ec" = 0:0 ] && [ "$(restarts_of "$j")" = 0 ] && [ -e $n.h5 ] &&
       [ ! -e $n.ckpt.h5 ] && ! grep -q "note: time-limit" "$n.out"; then
    ok "time-limit warning $t s after the start, before Slurm started the script: lost, the fit completes"
  else
    die "$n (warning at $t s): state $st, exit $ec, restarts $(restarts_of "$j")"; show "$n.out"
  fi
  check $n
done

# ---- C. scancel --signal=USR1 (the ranks) -----------------------------------------------------------
for t in "${TIMES[@]}"; do
  n=C$t; j=${J[$n]:-}; [ -n "$j" ] || continue
  wait_state "$j" 120 COMPLETED FAILED CANCELLED TIMEOUT || { die "$n: job $j did not end"; continue; }
  st=$(state_of "$j"); r=$(restarts_of "$j")
  if [ "$st" = COMPLETED ] && [ "$r" = 1 ] && [ "$(grep -c "^ghfit.sbatch: note: checkpoint .* requeueing job" "$n.out")" = 1 ]; then
    ok "scancel --signal=USR1 $t s after the start: checkpoint, requeue, resumed, completed"
  elif [ "$st" = COMPLETED ] && [ "$r" = 0 ] && ! grep -q "stopped on a signal" "$n.out"; then
    ok "scancel --signal=USR1 $t s after the start: no rank existed yet (the signal reached no process), completed"
  else
    die "$n (USR1 to the ranks at $t s): state $st, restarts $r"; show "$n.out"
  fi
  [ -e $n.h5 ] && [ ! -e $n.ckpt.h5 ] || die "$n: no result, or a checkpoint left"
  check $n
done

# ---- resubmissions start cleanly --------------------------------------------------------------------
declare -A R
for n in "${resub[@]}"; do
  R[$n]=$(sub --ntasks=2 --output="$W/$n-again.out" "$S" $(fitcmd $n)) || die "sbatch $n again"
done
for n in "${resub[@]}"; do
  j=${R[$n]:-}; [ -n "$j" ] || continue
  wait_done "$j" 90 || { die "$n again: job $j did not end"; continue; }
  [ "$(state_of "$j")" = COMPLETED ] && [ "$(exitcode "$j")" = 0:0 ] && [ -e $n.h5 ] && [ ! -e $n.ckpt.h5 ] &&
    [ -z "$(leftovers $n)" ] || { die "$n submitted again: state $(state_of "$j"), exit $(exitcode "$j")"; show "$n-again.out"; }
done
[ $fail = 0 ] && ok "the ${#resub[@]} stopped jobs submitted again: each completes (exit 0), nothing left"

echo "batch_slurm_early: wall time $(( $(date +%s) - t_start )) s"
[ $fail -eq 0 ] && echo "batch_slurm_early: all passed" || echo "batch_slurm_early: FAILED"
exit $fail
