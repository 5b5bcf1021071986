#!/usr/bin/env bash
# Checkpoints on a full disk (a small tmpfs; skipped, exit 77, where none can
# be mounted) - 2 ranks, `ghfit fit` and `ghfit run`:
#  1. periodic checkpoints that cannot be written: one warning, the fit goes
#     on and writes its result (exit 0); nothing is left on the full disk;
#  2. the checkpoint on a stop that cannot be written: exit 1 with one error
#     line naming the cause, no result, nothing left behind;
#  3. a disk that fills up during a sweep: the checkpoint written before it
#     filled stays intact and resumable (bitwise equal to an uninterrupted
#     sweep) after the final write fails.
# Never a crash (SIGSEGV today), never a hang.
# usage: faults_ckpt_diskfull.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
SRC=$(cd "$(dirname "$0")/.." && pwd)
if mountpoint -q "$W/full" 2>/dev/null; then umount "$W/full"; fi
rm -rf "$W"; mkdir -p "$W/in" "$W/full"; cd "$W"
. "$SRC/tests/faults_lib.sh"
if ! mount -t tmpfs -o size=512k tmpfs full 2> mount.txt; then
  echo "skip: cannot mount a small tmpfs for the full-disk cases (needs root): $(cat mount.txt)"; exit 77
fi
trap 'cd "$W" && umount full 2>/dev/null' EXIT
# fill FREE_KB: leave about FREE_KB kilobytes free on full/
fill() {
  rm -f full/fill
  local avail; avail=$(df --output=avail -k full | tail -1)
  dd if=/dev/zero of=full/fill bs=1k count=$((avail - $1)) status=none 2> /dev/null
  [ "$1" = 0 ] && { dd if=/dev/zero of=full/fill bs=1k oflag=append conv=notrunc status=none 2> /dev/null; true; }
}
only_fill() { # NAME: nothing but the filler on the full disk
  local left; left=$(ls -A full | grep -v -x fill)
  [ -z "$left" ] && ok "$1: nothing left on the full disk" || die "$1: left on the full disk: $left"
}

"$G" generate --model gh --dim 3 --n 6000 --seed 5 --p -1 --a 1.5 --b 0.7 --gamma 0.2,-0.1,0 --out in/d.h5 > /dev/null \
  || { echo "cannot generate"; exit 1; }
snapshot in > in.sha
FIT=(fit --data in/d.h5 --model gh --tol 1e-9 --max-iter 300 --quiet)

# --- 1./2. ghfit fit --------------------------------------------------------------------
fill 0
run_t 120 f1.txt mpirun -np 2 "$G" "${FIT[@]}" --out r1.h5 --checkpoint full/ck.h5 --checkpoint-every 2; rc=$?
outcome "fit, periodic checkpoints on a full disk" $rc 0 f1.txt warning "No space left on device \(the fit goes on"
[ -e r1.h5 ] && ok "the fit wrote its result" || die "no result"
only_fill "fit, periodic"
GHFIT_TEST_ITER_SLEEP=100 start_bg f2.txt mpirun -np 2 "$G" "${FIT[@]}" --out r2.h5 --checkpoint full/ck.h5 --checkpoint-every 2
wait_until "grep -q '^ghfit: warning:' f2.txt" 60 || die "no periodic warning"
kill -USR1 $bgpid; wait_bg 120; rc=$?
outcome "fit stopped, final checkpoint on a full disk" $rc 1 f2.txt error \
  "^ghfit: error: stopped on a signal, but the checkpoint could not be written: full/ck.h5: writing the checkpoint failed: No space left on device"
[ -e r2.h5 ] && die "a stopped fit wrote a result"
only_fill "fit, stop"

# --- 1./2. ghfit run ---------------------------------------------------------------------
cat > sw.yaml <<'YAML'
data: in/d.h5
out: sw.h5
family: [nig, gh]
tol: 1e-8
windows: {start: 0, length: 500, step: 500, count: 12}
quiet: true
YAML
run_t 120 s1.txt mpirun -np 2 "$G" run sw.yaml --checkpoint full/swck.h5; rc=$?
outcome "sweep, checkpoints on a full disk" $rc 0 s1.txt warning "No space left on device \(the sweep goes on"
[ -e sw.h5 ] && ok "the sweep wrote its result" || die "no sweep result"
only_fill "sweep, periodic"
rm -f sw.h5
GHFIT_TEST_ITER_SLEEP=40 start_bg s2.txt mpirun -np 2 "$G" run sw.yaml --checkpoint full/swck.h5 --checkpoint-every 2
wait_until "grep -q '^ghfit: warning:' s2.txt" 60 || die "no periodic warning"
kill -USR1 $bgpid; wait_bg 120; rc=$?
outcome "sweep stopped, final checkpoint on a full disk" $rc 1 s2.txt error \
  "^ghfit: error: stopped on a signal, but the checkpoint could not be written: .*No space left on device"
[ -e sw.h5 ] && die "a stopped sweep wrote a result"
only_fill "sweep, stop"

# --- 3. the disk fills up during a sweep -----------------------------------------------------
run_t 120 s0.txt mpirun -np 2 "$G" run sw.yaml --out swref.h5 || die "reference sweep"
fill 40
GHFIT_TEST_ITER_SLEEP=40 start_bg s3.txt mpirun -np 2 "$G" run sw.yaml --checkpoint full/swck.h5 --checkpoint-every 2
wait_until "[ \$(\"$H\" full/swck.h5 / done_count 2>/dev/null || echo 0) -ge 3 ]" 60 || die "no checkpoint with 3 finished fits"
dd if=/dev/zero of=full/fill bs=1k oflag=append conv=notrunc status=none 2> /dev/null # now the disk is full
wait_until "grep -q '^ghfit: warning:' s3.txt" 60 || die "no warning once the disk is full"
kill -USR1 $bgpid; wait_bg 120; rc=$?
outcome "sweep, disk filled mid-run, stopped" $rc 1 s3.txt error "could not be written: .*No space left on device"
ls full/*.tmp > /dev/null 2>&1 && die "a temporary checkpoint left on the full disk"
nd=$("$H" full/swck.h5 / done_count) || die "the checkpoint written before the disk filled is unreadable"
fill 400 # room again
run_t 120 s4.txt mpirun -np 2 "$G" run sw.yaml --checkpoint full/swck.h5 --resume; rc=$?
[ $rc = 0 ] && ok "resumed from the checkpoint written before the disk filled ($nd finished fits)" || { cat s4.txt; die "resume (exit $rc)"; }
for n in $(h5ls swref.h5/fits | awk '{print $1}'); do same_fit swref.h5 sw.h5 "$n" || die "sweep fit $n differs"; done
[ "$(h5ls sw.h5/fits | grep -c Group)" = 24 ] && ok "resumed sweep == uninterrupted (24 fits, bitwise)" || die "resumed sweep"
only_fill "after the resumed sweep"

same_files "inputs" in.sha in
[ $fail -eq 0 ] && echo "faults_ckpt_diskfull: all passed" || echo "faults_ckpt_diskfull: FAILED"
exit $fail
