#!/usr/bin/env bash
# I/O faults of `ghfit fit`, `run`, `generate` and `summary`, one class per
# invocation (issue 16): paths | blocking | messages | disk | generate.
# Every case asserts the exact outcome: the exit status, exactly one
# "ghfit: error:" line naming the cause, the inputs intact (sha256 before and
# after), no file left behind, no hang (timeout), no signal.
# usage: faults_io.sh CLASS GHFIT H5GET WORKDIR      (exit 77: skipped)
set -uo pipefail
CLASS=$1; G=$2; H=$3; W=$4
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
T=60 # seconds before a case counts as a hang
umount "$W/small" 2>/dev/null # a tmpfs left mounted by a killed earlier run
rm -rf "$W"; mkdir -p "$W"; cd "$W" || exit 1
fail=0; n=0
MPI=(mpirun -np 2)

note() { echo "$*"; }
bad() { echo "FAIL [$CASE]: $*"; [ -s stderr.txt ] && sed 's/^/    | /' stderr.txt | head -20; fail=1; }
snap() { ls -A | grep -v -x -e stderr.txt -e stdout.txt | sort; }
# sha256 of the protected inputs (small files only)
PROTECT=()
sums() { [ ${#PROTECT[@]} -eq 0 ] || sha256sum "${PROTECT[@]}" 2>/dev/null; }

# run_case NP -- ghfit args...: runs with a timeout; sets RC, saves stderr.txt
run_case() {
  local np=$1; shift 2
  if [ "$np" = 1 ]; then timeout -k 5 $T "$G" "$@" >stdout.txt 2>stderr.txt
  else timeout -k 5 $T "${MPI[@]}" "$G" "$@" >stdout.txt 2>stderr.txt; fi
  RC=$?
}

# expect STATUS PATTERN NP -- args...: a failing (or, STATUS 0, succeeding) case.
# NP 1 runs the binary directly (stderr must be exactly one line), NP 2
# under mpirun (exactly one "ghfit: error:" line among mpirun's own).
expect() {
  local want=$1 pat=$2 np=$3; shift 3
  n=$((n + 1)); CASE="np$np ${*:2}"
  local before; before=$(snap); local s0; s0=$(sums)
  run_case "$np" "$@"
  if [ $RC -eq 124 ] || [ $RC -eq 137 ]; then bad "hung (killed after $T s)"; return 1; fi
  if [ $RC -gt 128 ] && [ "$want" -lt 128 ]; then bad "signal $((RC - 128))"; return 1; fi
  if [ $RC -ne "$want" ]; then bad "exit $RC, expected $want"; return 1; fi
  local nerr; nerr=$(grep -c '^ghfit: error: ' stderr.txt)
  if [ "$want" -ne 0 ]; then
    if [ "$nerr" -ne 1 ]; then bad "$nerr 'ghfit: error:' lines, expected 1"; return 1; fi
    if [ "$np" = 1 ] && [ "$(grep -c . stderr.txt)" -ne 1 ]; then bad "stderr is not one line"; return 1; fi
    if ! grep '^ghfit: error: ' stderr.txt | grep -q -- "$pat"; then bad "message lacks '$pat'"; return 1; fi
    if grep -q -i 'signal\|segmentation\|core dumped' stderr.txt; then bad "a crash report on stderr"; return 1; fi
    local after; after=$(snap)
    if [ "$before" != "$after" ]; then bad "files left or removed: $(diff <(echo "$before") <(echo "$after") | grep '^[<>]' | tr '\n' ' ')"; return 1; fi
  elif [ "$nerr" -ne 0 ]; then bad "an error line on success"; return 1
  fi
  if [ "$(sums)" != "$s0" ]; then bad "an input changed: $(diff <(echo "$s0") <(sums) | grep '^>' | tr '\n' ' ')"; return 1; fi
  echo "ok   [$CASE] -> $RC: $(grep -m1 '^ghfit: error: ' stderr.txt | cut -c1-200)"
  return 0
}

need_h5py() {
  if ! [ -x "$PY" ] || ! "$PY" -c "import h5py" 2>/dev/null; then
    echo "h5py is not available at $PY (Debian python3-h5py; scripts/install-deps.sh installs it)"; exit 1
  fi
}

make_data() {
  "$G" generate --model nig --dim 3 --n 600 --seed 1 --out data.h5 >/dev/null || { echo "cannot make data.h5"; exit 1; }
  cat > job.yaml <<'EOF'
data: {file: data.h5}
out: run.h5
family: [nig]
max_iter: 30
EOF
  PROTECT=(data.h5 job.yaml)
}

FIT=(fit --model nig --max-iter 30 --quiet)

# ---------------------------------------------------------------------------------------------
class_paths() {
  make_data
  mkdir sub
  for np in 1 2; do
    expect 2 "same file" $np -- "${FIT[@]}" --data data.h5 --out ./sub/../data.h5
    expect 2 "same file" $np -- "${FIT[@]}" --data data.h5 --out o.h5 --checkpoint data.h5
    expect 2 "same file" $np -- "${FIT[@]}" --data data.h5 --out o.h5 --checkpoint ./o.h5
    expect 2 "same file" $np -- run job.yaml --out sub/../data.h5 --quiet
    expect 2 "same file" $np -- run job.yaml --checkpoint data.h5 --quiet
    expect 2 "same file" $np -- run job.yaml --checkpoint run.h5 --quiet
  done
  # a file that does not exist yet, spelled two ways; the job file itself; links to the input
  expect 2 "same file" 1 -- "${FIT[@]}" --data data.h5 --out sub/../new.h5 --checkpoint new.h5
  expect 2 "same file" 1 -- run job.yaml --out ./job.yaml --quiet
  ln -s data.h5 sym.h5; ln data.h5 hard.h5
  expect 2 "same file" 1 -- "${FIT[@]}" --data sym.h5 --out data.h5
  expect 2 "same file" 1 -- "${FIT[@]}" --data data.h5 --out hard.h5
  rm -f sym.h5 hard.h5
  # an input behind an external link
  "$PY" -c "import h5py; f = h5py.File('elink.h5', 'w'); f['X'] = h5py.ExternalLink('data.h5', '/X')"
  PROTECT+=(elink.h5)
  expect 2 "external link" 1 -- "${FIT[@]}" --data elink.h5 --out data.h5
  # the checkpoint's _prev: an unrelated file is never deleted
  echo "my notes" > ck_prev.h5; PROTECT+=(ck_prev.h5)
  expect 2 "ck_prev.h5 exists and is not a ghfit checkpoint" 1 -- "${FIT[@]}" --data data.h5 --out o.h5 --checkpoint ck.h5
  expect 2 "ck_prev.h5 exists and is not a ghfit checkpoint" 2 -- run job.yaml --checkpoint ck.h5 --quiet
  # existing outputs that are not ghfit's
  echo "not a result" > text.h5; cp data.h5 other.h5; echo "x" > ck.h5; PROTECT+=(text.h5 other.h5 ck.h5)
  expect 2 "not a ghfit result file" 1 -- "${FIT[@]}" --data data.h5 --out text.h5
  expect 2 "not a ghfit result file" 2 -- "${FIT[@]}" --data data.h5 --out other.h5
  expect 2 "not a ghfit result file" 1 -- run job.yaml --out other.h5 --quiet
  expect 2 "ck.h5 exists and is not a ghfit checkpoint" 1 -- "${FIT[@]}" --data data.h5 --out o.h5 --checkpoint ck.h5
  expect 2 "ck.h5 exists and is not a ghfit checkpoint" 1 -- "${FIT[@]}" --data data.h5 --out o.h5 --checkpoint ck.h5 --resume
  # only regular files are written
  mkfifo fifo.h5
  expect 2 "FIFO" 1 -- "${FIT[@]}" --data data.h5 --out fifo.h5
  expect 2 "FIFO" 1 -- "${FIT[@]}" --data data.h5 --out o.h5 --checkpoint fifo.h5
  if mknod cdev c 1 3 2>/dev/null; then  # a private /dev/null: as root ghfit must not replace it
    expect 2 "character device" 1 -- "${FIT[@]}" --data data.h5 --out cdev
    expect 2 "character device" 2 -- run job.yaml --out cdev --quiet
    [ -c cdev ] || bad "the character device was replaced"
  else
    note "note: mknod is refused here: the character-device case uses /dev/null itself"
    expect 2 "character device" 1 -- "${FIT[@]}" --data data.h5 --out /dev/null
    [ -c /dev/null ] || bad "/dev/null was replaced"
  fi
  "$PY" -c "import socket; socket.socket(socket.AF_UNIX).bind('sock.h5')"
  expect 2 "socket" 1 -- "${FIT[@]}" --data data.h5 --out sock.h5
  rm -f fifo.h5 cdev sock.h5
  # ghfit's own files are replaced and removed: a result over a result, checkpoints after success
  expect 0 "" 1 -- "${FIT[@]}" --data data.h5 --out mine.h5
  expect 0 "" 2 -- "${FIT[@]}" --data data.h5 --out mine.h5 --checkpoint myck.h5 --checkpoint-every 1
  ls myck* mine.h5.* 2>/dev/null && bad "checkpoint, _prev or temporary files left after success"
  rm -f mine.h5
  # inputs before outputs: a missing data file is named before a missing output directory
  expect 2 "missing.h5" 1 -- "${FIT[@]}" --data missing.h5 --out no-dir/o.h5
  expect 2 "missing.h5" 1 -- run job.yaml --data missing.h5 --out no-dir/o.h5 --quiet
  paths_lock
}

# two writers of one output: the second is refused naming the first; no stray lock file
paths_lock() {
  local i
  for cmd in fit run; do
    local first=("${FIT[@]}" --data data.h5 --out busy.h5 --max-iter 40 --tol 0)
    [ $cmd = run ] && first=(run job.yaml --out busy.h5 --quiet --tol 0)
    GHFIT_TEST_ITER_SLEEP=150 "$G" "${first[@]}" >first.txt 2>&1 &
    local pid=$!
    for i in $(seq 1 100); do [ -s busy.h5.lock ] && break; sleep 0.1; done
    [ -s busy.h5.lock ] || bad "$cmd: no lock file while the first writer runs"
    local second=("${FIT[@]}" --data data.h5 --out ./busy.h5)
    [ $cmd = run ] && second=(run job.yaml --out ./busy.h5 --quiet)
    n=$((n + 1)); CASE="second writer ($cmd)"
    run_case 1 -- "${second[@]}"
    if [ $RC -ne 2 ] || [ "$(grep -c . stderr.txt)" -ne 1 ] || ! grep -q "^ghfit: error: .*another ghfit process is writing this file (pid $pid on host" stderr.txt; then
      bad "exit $RC"
    else echo "ok   [$CASE] -> 2: $(cut -c1-200 stderr.txt)"; fi
    wait $pid; local rc1=$?
    [ $rc1 -eq 0 ] || { cat first.txt; bad "$cmd: the first writer failed ($rc1)"; }
    ls busy.h5.* 2>/dev/null && bad "$cmd: stray files after the first writer ended"
    rm -f busy.h5 first.txt
  done
  # a holder killed with SIGKILL leaves its lock file, which does not break a rerun
  n=$((n + 1)); CASE="rerun after SIGKILL"
  GHFIT_TEST_ITER_SLEEP=500 "$G" "${FIT[@]}" --data data.h5 --out killed.h5 >/dev/null 2>&1 &
  local pid=$!
  for i in $(seq 1 100); do [ -s killed.h5.lock ] && break; sleep 0.1; done
  kill -KILL $pid; wait $pid 2>/dev/null
  [ -e killed.h5.lock ] || note "note: the lock file did not survive SIGKILL"
  expect 0 "" 1 -- "${FIT[@]}" --data data.h5 --out killed.h5 || true
  ls killed.h5.* 2>/dev/null && bad "the rerun left its lock file"
  rm -f killed.h5
}

# ---------------------------------------------------------------------------------------------
class_blocking() {
  make_data
  need_h5py
  "$PY" "$HERE/faults_make_h5.py" >/dev/null || { echo "faults_make_h5.py failed"; exit 1; }
  PROTECT+=(chunk_gap.h5 chunk_last.h5 contig_empty.h5 good.h5)
  mkfifo fifo.h5
  cat > fifojob.yaml <<'EOF'
data: {file: fifo.h5}
out: run.h5
family: [nig]
EOF
  PROTECT+=(fifojob.yaml)
  for np in 1 2; do
    expect 2 "fifo.h5:/X: is a FIFO" $np -- "${FIT[@]}" --data fifo.h5 --out o.h5
    expect 2 "fifo.h5:/X: is a FIFO" $np -- run fifojob.yaml --quiet
    expect 2 "rows \[400, 500)" $np -- "${FIT[@]}" --data chunk_gap.h5 --out o.h5
    expect 2 "rows \[900, 1000)" $np -- "${FIT[@]}" --data chunk_last.h5 --out o.h5
    expect 2 "never written" $np -- "${FIT[@]}" --data contig_empty.h5 --out o.h5
  done
  expect 2 "is a FIFO" 1 -- summary fifo.h5
  expect 2 "is a FIFO" 1 -- "${FIT[@]}" --data data.h5 --out o.h5 --checkpoint fifo.h5 --resume
  expect 2 "rows \[900, 1000)" 2 -- run job.yaml --data chunk_last.h5 --quiet
  # a fully written chunked, compressed data set is read
  expect 0 "" 2 -- "${FIT[@]}" --data gzip_full.h5 --out o.h5 && rm -f o.h5
}

# ---------------------------------------------------------------------------------------------
class_messages() {
  make_data
  need_h5py
  "$PY" "$HERE/faults_make_h5.py" >/dev/null || { echo "faults_make_h5.py failed"; exit 1; }
  PROTECT+=(good.h5 lzf.h5 gzip_bad.h5 vds.h5 external.h5 ext_raw.bin links.h5 wide.h5 toowide.h5)
  for np in 1 2; do
    expect 2 "LZF filter (id 32000), which this HDF5 library does not have" $np -- "${FIT[@]}" --data lzf.h5 --out o.h5
    expect 2 "rows \[500, 600) failed in the deflate (gzip) filter (id 1)" $np -- "${FIT[@]}" --data gzip_bad.h5 --out o.h5
    expect 2 "is a virtual dataset" $np -- "${FIT[@]}" --data vds.h5 --out o.h5
    expect 2 "external storage in ext_raw.bin" $np -- "${FIT[@]}" --data external.h5 --out o.h5
    expect 2 "soft link to /nowhere, which does not exist" $np -- "${FIT[@]}" --data links.h5 --dataset /soft_dangling --out o.h5
    expect 2 "the file no-such-file.h5 does not exist" $np -- "${FIT[@]}" --data links.h5 --dataset /ext_missing_file --out o.h5
    expect 2 "2 rows but 1000000 columns" $np -- "${FIT[@]}" --data wide.h5 --out o.h5
  done
  # ghfit check's sample of rows names the same cause
  expect 2 "failed in the deflate (gzip) filter (id 1)" 1 -- check fit --model nig --data gzip_bad.h5 --out o.h5
  expect 2 "/grp/dangling is a soft link to /grp/none" 1 -- "${FIT[@]}" --data links.h5 --dataset /grp/dangling --out o.h5
  expect 2 "external link to good.h5:/nope, which cannot be opened" 1 -- "${FIT[@]}" --data links.h5 --dataset /ext_missing_obj --out o.h5
  expect 2 "no such dataset (the group /grp holds: dangling)" 1 -- "${FIT[@]}" --data links.h5 --dataset /grp/nope --out o.h5
  expect 2 "at most 1000000 columns" 1 -- "${FIT[@]}" --data toowide.h5 --out o.h5
  expect 2 "more than the" 1 -- "${FIT[@]}" --data huge.h5 --out o.h5
  expect 2 "more than the" 2 -- "${FIT[@]}" --data huge.h5 --out o.h5
  expect 2 "window start 9223372036854775000 is out of range" 1 -- "${FIT[@]}" --data data.h5 --rows 9223372036854775000:10 --out o.h5
  expect 2 "window of 9223372036854775807 rows from row 5 is out of range" 1 -- "${FIT[@]}" --data data.h5 --rows 5:9223372036854775807 --out o.h5
  cat > winjob.yaml <<'EOF'
data: {file: data.h5}
out: run.h5
family: [nig]
windows: {start: 9223372036854775000, length: 100, step: 100}
EOF
  cat > smalljob.yaml <<'EOF'
data: {file: data.h5}
out: run.h5
family: [nig]
windows: {start: 0, length: 3, step: 100}
EOF
  PROTECT+=(winjob.yaml smalljob.yaml)
  expect 2 "does not fit" 2 -- run winjob.yaml --quiet
  expect 2 "at least d + 1 = 4 rows" 2 -- run smalljob.yaml --quiet
  # links that resolve are followed
  expect 0 "" 1 -- "${FIT[@]}" --data links.h5 --dataset /soft_ok --out o.h5 && rm -f o.h5
  expect 0 "" 1 -- "${FIT[@]}" --data links.h5 --dataset /ext_ok --out o.h5 && rm -f o.h5
  # a file held open for writing by another program (HDF5 file locking on)
  cp data.h5 locked.h5; PROTECT+=(locked.h5)
  env -u HDF5_USE_FILE_LOCKING "$PY" -c "
import h5py, os, time
f = h5py.File('locked.h5', 'a'); open('locked.ready', 'w').close()
while os.path.exists('locked.ready'): time.sleep(0.05)" &
  local py=$! i
  for i in $(seq 1 100); do [ -e locked.ready ] && break; sleep 0.1; done
  for np in 1 2; do
    n=$((n + 1)); CASE="np$np locked by a writer"
    if [ $np = 1 ]; then
      timeout -k 5 $T env -u HDF5_USE_FILE_LOCKING "$G" "${FIT[@]}" --data locked.h5 --out o.h5 >stdout.txt 2>stderr.txt
    else
      timeout -k 5 $T env -u HDF5_USE_FILE_LOCKING "${MPI[@]}" "$G" "${FIT[@]}" --data locked.h5 --out o.h5 >stdout.txt 2>stderr.txt
    fi
    RC=$?
    if [ $RC -ne 2 ] || [ "$(grep -c '^ghfit: error: ' stderr.txt)" -ne 1 ] ||
       ! grep -q "^ghfit: error: locked.h5:/X: the file is locked by another process .*HDF5_USE_FILE_LOCKING=FALSE" stderr.txt ||
       ls o.h5* >/dev/null 2>&1; then bad "exit $RC"; else echo "ok   [$CASE] -> 2: $(grep '^ghfit: error' stderr.txt | cut -c1-200)"; fi
  done
  rm -f locked.ready; wait $py
  rm -f winjob.yaml smalljob.yaml
}

# ---------------------------------------------------------------------------------------------
class_disk() {
  make_data
  mkdir small
  if ! mount -t tmpfs -o size=256k tmpfs small 2>mount.txt; then
    echo "SKIP: cannot mount a small tmpfs here ($(cat mount.txt)); the full-disk cases need one (run as root with mount allowed)"
    exit 77
  fi
  trap 'cd "$W" && umount small 2>/dev/null' EXIT
  rm -f mount.txt
  # leave 1, 8, 40, 120 KiB free: a result file (about 15 KiB) fits in none of the
  # first two, a generated data set (470 KiB) in none
  for left in 1 8 40 120; do
    rm -rf small/*; head -c $(((256 - left) * 1024)) /dev/zero > small/fill 2>/dev/null
    for np in 1 2; do
      if [ $left -le 8 ]; then
        expect 1 "small/out.h5: writing the result file failed: No space left on device" $np -- "${FIT[@]}" --data data.h5 --out small/out.h5
        expect 1 "small/run.h5: writing the result file failed: No space left on device" $np -- run job.yaml --out small/run.h5 --quiet
      fi
      expect 1 "small/gen.h5:/X: .*No space left on device" $np -- generate --model nig --dim 3 --n 20000 --seed 1 --out small/gen.h5
      [ "$(ls -A small)" = fill ] || bad "files left on the full disk: $(ls -A small | tr '\n' ' ')"
    done
  done
  # with room it works, on the same file system
  rm -rf small/*
  expect 0 "" 2 -- "${FIT[@]}" --data data.h5 --out small/out.h5
  expect 0 "" 2 -- generate --model nig --dim 3 --n 2000 --seed 1 --out small/gen.h5
  [ "$(ls -A small | tr '\n' ' ')" = "gen.h5 out.h5 " ] || bad "unexpected files: $(ls -A small | tr '\n' ' ')"
  "$H" small/out.h5 /fits/nig loglik >/dev/null || bad "the result on the tmpfs is not readable"
}

# ---------------------------------------------------------------------------------------------
class_generate() {
  make_data
  local GEN=(generate --model gh --dim 2 --n 100000 --seed 1 --out gen.h5)
  for np in 1 2; do
    expect 2 "^ghfit: error: --p: 1e+16 is outside" $np -- "${GEN[@]}" --p 1e16
    expect 2 "^ghfit: error: --a/--b: sqrt(a\*b) = 1e-08 is below" $np -- "${GEN[@]}" --p 0 --a 1e-8 --b 1e-8
    expect 2 "^ghfit: error: --n 1000000000000 x --dim 100000:" $np -- generate --model gh --dim 100000 --n 1000000000000 --seed 1 --out gen.h5
  done
  expect 2 "^ghfit: error: --a: 1e-40 is outside" 1 -- "${GEN[@]}" --a 1e-40
  expect 2 "^ghfit: error: --b: 1e+40 is outside" 1 -- "${GEN[@]}" --b 1e40
  expect 2 "^ghfit: error: --gamma: |value| 1e+200 is above 1e150" 1 -- "${GEN[@]}" --gamma 1e200
  expect 2 "^ghfit: error: --n 9000000000000000000 x --dim 3: too many values" 1 -- generate --model gh --dim 3 --n 9000000000000000000 --seed 1 --out gen.h5
  expect 2 "^ghfit: error: --p: invalid value 'nan'" 1 -- "${GEN[@]}" --p nan
  # outputs: only regular files, only ghfit generate's own data sets are replaced
  echo "precious" > precious.h5; PROTECT+=(precious.h5)
  expect 2 "exists and is not a data set written by ghfit generate" 1 -- "${GEN[@]/gen.h5/precious.h5}"
  expect 0 "" 1 -- "${FIT[@]}" --data data.h5 --out fit.h5
  PROTECT+=(fit.h5)
  expect 2 "exists and is not a data set written by ghfit generate" 2 -- "${GEN[@]/gen.h5/fit.h5}"
  mkfifo fifo.h5
  expect 2 "FIFO" 2 -- "${GEN[@]/gen.h5/fifo.h5}"
  rm -f fifo.h5
  # an earlier generated data set (this version, or one without the root attribute) is replaced
  expect 0 "" 2 -- "${GEN[@]}"
  expect 0 "" 1 -- "${GEN[@]}"
  "$PY" -c "import h5py; f = h5py.File('gen.h5', 'a'); del f.attrs['ghfit_data_version']" 2>/dev/null &&
    { expect 0 "" 1 -- "${GEN[@]}" || true; }
  ls gen.h5.* 2>/dev/null && bad "temporary files left"
  # the extreme corners of the accepted range sample every row
  expect 0 "" 2 -- generate --model gh --dim 2 --n 5000 --seed 3 --p 1e6 --a 1e-30 --b 1e30 --out corner.h5
  expect 0 "" 2 -- generate --model gh --dim 2 --n 5000 --seed 3 --p 0 --a 1e-3 --b 1e-3 --out corner.h5
  rm -f corner.h5 gen.h5
}

case "$CLASS" in
  paths) need_h5py; class_paths ;;
  blocking) class_blocking ;;
  messages) class_messages ;;
  disk) class_disk ;;
  generate) need_h5py; class_generate ;;
  *) echo "unknown class '$CLASS'"; exit 1 ;;
esac
echo "faults_io $CLASS: $n cases, $([ $fail -eq 0 ] && echo all passed || echo FAILURES)"
exit $fail
