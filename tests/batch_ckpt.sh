#!/usr/bin/env bash
# Checkpoint, restart and preemption (2 ranks):
#  1. `ghfit fit --checkpoint`: SIGUSR1 mid-fit -> exit 75 and a valid
#     checkpoint; --resume -> the result equals an uninterrupted run BITWISE
#     (log-likelihood trace, parameters, iteration count).
#  2. SIGKILL while a checkpoint is being written (GHFIT_TEST_CKPT_SLEEP holds
#     the writer between the temporary file and the rename): the previous
#     checkpoint is intact and resuming from it gives the same bits.
#  3. a checkpoint of other data or options is refused (exit 2).
#  4. without --checkpoint a signal still stops collectively with status 75.
#  5. `ghfit run` sweep (2 groups): SIGTERM mid-sweep -> 75 + checkpoint with
#     the finished fits; --resume skips them, continues the unfinished one, and
#     the result file equals an uninterrupted sweep bitwise.
# GHFIT_TEST_ITER_SLEEP (ms per EM iteration) makes the fits slow enough to be
# signalled mid-fit; signals go to the mpirun started here, by its pid.
# usage: batch_ckpt.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
rm -rf "$W"; mkdir -p "$W"; cd "$W"
fail=0
die() { echo "FAIL: $*"; fail=1; }

# wait (up to $2 s) until file $1 exists
. "$(dirname "$0")/lib.sh" # wait_until, ranks_started
wait_for() { local i; for ((i = 0; i < $2 * 10; i++)); do [ -e "$1" ] && return 0; sleep 0.1; done; return 1; }

# every dataset of a fit, printed with %.17g: equal text = equal bits
dumpfit() { # FILE FIT
  local f=$1 n=$2
  for a in loglik n_iter converged status n_obs; do echo "$a $("$H" "$f" /fits/$n $a)"; done
  for ds in loglik params/mu params/gamma params/sigma params/p params/a params/b moments/mean moments/cov; do
    echo "$ds"; "$H" "$f" /fits/$n/$ds
  done
}
same_fit() { # A B FIT [FIT_IN_B]
  dumpfit "$1" "$3" > a.txt; dumpfit "$2" "${4:-$3}" > b.txt
  cmp -s a.txt b.txt || { diff a.txt b.txt | head -5; return 1; }
}

"$G" generate --model gh --dim 4 --n 20000 --seed 42 --mu 0.05 --gamma 0.3,-0.2,0.1,0 --sigma 1 --rho 0.4 \
  --p -1.5 --a 2 --b 1 --out demo.h5 > /dev/null || { echo "cannot generate"; exit 1; }
FIT=(fit --data demo.h5 --model gh --tol 1e-10 --max-iter 400 --quiet)

# --- 1. reference, then signal + resume -------------------------------------------------
mpirun -np 2 "$G" "${FIT[@]}" --out ref.h5 > ref.txt 2>&1 || die "reference fit"
GHFIT_TEST_ITER_SLEEP=150 mpirun -np 2 "$G" "${FIT[@]}" --out a.h5 --checkpoint ck.h5 --checkpoint-every 4 > a1.txt 2>&1 &
pid=$!
wait_for ck.h5 60 || die "no checkpoint appeared"
sleep 0.5
kill -USR1 $pid
wait $pid; rc=$?
[ $rc = 75 ] || { cat a1.txt; die "signalled fit: exit $rc, expected 75"; }
grep -q "checkpoint written to ck.h5" a1.txt || die "no 'checkpoint written' message"
[ -e a.h5 ] && die "an interrupted fit wrote a result"
it=$("$H" ck.h5 /running/0 iter) || die "checkpoint unreadable"
echo "fit stopped at iteration $it (reference: $("$H" ref.h5 /fits/gh n_iter) iterations)"
[ "$it" -gt 0 ] 2>/dev/null || die "checkpoint iteration '$it'"
cp ck.h5 ck_saved.h5
mpirun -np 2 "$G" "${FIT[@]}" --out a.h5 --checkpoint ck.h5 --resume > a2.txt 2>&1 || { cat a2.txt; die "resume"; }
same_fit ref.h5 a.h5 gh && echo "ok   resumed fit == uninterrupted fit (bitwise)" || die "resumed fit differs from the reference"
[ -e ck.h5 ] && die "checkpoint not removed after the result was written"

# --- 2. SIGKILL during a checkpoint write -----------------------------------------------
# the 1st write is normal, the 2nd sleeps 60 s between the temporary file and the rename
GHFIT_TEST_ITER_SLEEP=20 GHFIT_TEST_CKPT_SLEEP=60@2 \
  mpirun -np 2 "$G" "${FIT[@]}" --out k.h5 --checkpoint kk.h5 --checkpoint-every 6 > k1.txt 2>&1 &
pid=$!
for i in $(seq 1 600); do grep -q "test sleep" k1.txt && break; sleep 0.1; done
grep -q "test sleep" k1.txt || die "the checkpoint writer never reached the test sleep"
ls kk.h5.tmp >/dev/null 2>&1 || die "no temporary checkpoint (kk.h5.tmp) during the write"
kill -KILL $pid; wait $pid 2>/dev/null
sleep 1
it=$("$H" kk.h5 /running/0 iter) || die "the previous checkpoint is not readable after SIGKILL"
echo "after SIGKILL mid-write: kk.h5 holds iteration $it"
mpirun -np 2 "$G" "${FIT[@]}" --out k.h5 --checkpoint kk.h5 --resume > k2.txt 2>&1 || { cat k2.txt; die "resume after SIGKILL"; }
same_fit ref.h5 k.h5 gh && echo "ok   resume after SIGKILL == uninterrupted (bitwise)" || die "resume after SIGKILL differs"

# --- 3. a foreign checkpoint is refused ---------------------------------------------------
cp ck_saved.h5 other.h5
mpirun -np 2 "$G" "${FIT[@]}" --tol 1e-9 --out o.h5 --checkpoint other.h5 --resume > o.txt 2>&1; rc=$?
[ $rc = 2 ] && grep -q "does not belong to this run" o.txt || { cat o.txt; die "foreign checkpoint: exit $rc"; }
[ -e o.h5 ] && die "foreign checkpoint: output written"
mpirun -np 2 "$G" fit --data demo.h5 --model nig --tol 1e-10 --max-iter 400 --quiet --out o.h5 --checkpoint other.h5 --resume > o2.txt 2>&1; rc=$?
[ $rc = 2 ] || { cat o2.txt; die "checkpoint of another model accepted (exit $rc)"; }
echo "ok   foreign checkpoints refused: $(grep -h 'error' o.txt | head -1)"

# --- 4. a signal without --checkpoint --------------------------------------------------------
# (mpirun turns SIGTERM into a kill of the job, so USR1 here; under srun both work)
GHFIT_TEST_ITER_SLEEP=400 mpirun -np 2 "$G" "${FIT[@]}" --out n.h5 > n.txt 2>&1 &
pid=$!
wait_until "ranks_started $pid 2" 60   # signalled before the ranks run ghfit, they would die of it
sleep 3
kill -USR1 $pid
wait $pid; rc=$?
[ $rc = 75 ] && grep -q "no checkpoint file was requested" n.txt || { cat n.txt; die "signal without checkpoint: exit $rc"; }
echo "ok   signal without --checkpoint -> 75"

# --- 5. a sweep: stop, resume, compare ---------------------------------------------------------
cat > sw.yaml <<'EOF'
data: demo.h5
out: sw.h5
family: [nig, gh]
tol: 1e-9
windows: {start: 0, length: 2000, step: 2000, count: 3}
warm_start: true
quiet: true
EOF
mpirun -np 2 "$G" run sw.yaml --out swref.h5 > swref.txt 2>&1 || { cat swref.txt; die "reference sweep"; }
GHFIT_TEST_ITER_SLEEP=100 mpirun -np 2 "$G" run sw.yaml --checkpoint swck.h5 --checkpoint-every 3 > sw1.txt 2>&1 &
pid=$!
wait_for swck.h5 60 || die "no sweep checkpoint appeared"
sleep 1.5
kill -USR1 $pid
wait $pid; rc=$?
[ $rc = 75 ] || { cat sw1.txt; die "signalled sweep: exit $rc"; }
[ -e sw.h5 ] && die "an interrupted sweep wrote a result"
grep "stopped on a signal" sw1.txt
nrun=$(h5ls swck.h5/running 2>/dev/null | grep -c Group)
ndone=$("$H" swck.h5 / done_count) # the finished fits are in the log swck.h5.done
echo "sweep checkpoint: $ndone finished, $nrun in progress"
[ "$nrun" -ge 1 ] || die "no fit in progress in the sweep checkpoint"
mpirun -np 2 "$G" run sw.yaml --checkpoint swck.h5 --resume > sw2.txt 2>&1 || { cat sw2.txt; die "sweep resume"; }
grep "resuming" sw2.txt
for n in $(h5ls swref.h5/fits | awk '{print $1}'); do
  same_fit swref.h5 sw.h5 $n || die "sweep fit $n differs after resume"
done
[ "$(h5ls sw.h5/fits | grep -c Group)" = 6 ] || die "resumed sweep does not have 6 fits"
[ $fail -eq 0 ] && echo "ok   resumed sweep == uninterrupted sweep (bitwise, 6 fits)"

[ $fail -eq 0 ] && echo "batch_ckpt: all passed" || echo "batch_ckpt: FAILED"
exit $fail
