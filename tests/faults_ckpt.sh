#!/usr/bin/env bash
# Checkpoints are verified before they are trusted (2 ranks):
#  1. a checkpoint with NaN in mu, or p = 1e6 (checksum made to match, as a
#     writer with a bug would): exit 2, one line naming the file and the field;
#  2. a damaged byte (the checksum does not match): with "_prev" beside it the
#     resume falls back to it (a warning) and ends bitwise equal to an
#     uninterrupted fit; alone, exit 2 naming the damage;
#  3. other data of the same shape at the same path: exit 2 (fingerprint);
#  4. a sweep whose log of finished fits is damaged: exit 2 naming the log.
# Every refusal: no result file, checkpoint and inputs unchanged, no
# temporary file, no hang, no signal.
# usage: faults_ckpt.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
PY=/usr/bin/python3
SRC=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$W"; mkdir -p "$W/in"; cd "$W"
. "$SRC/tests/faults_lib.sh"

"$G" generate --model gh --dim 3 --n 6000 --seed 5 --p -1 --a 1.5 --b 0.7 --gamma 0.2,-0.1,0 --out in/d.h5 > /dev/null \
  || { echo "cannot generate"; exit 1; }
FIT=(fit --data in/d.h5 --model gh --tol 1e-9 --max-iter 300 --quiet)
run_t 120 ref.txt mpirun -np 2 "$G" "${FIT[@]}" --out ref.h5 || { cat ref.txt; die "reference fit"; }
# a checkpoint mid-fit
GHFIT_TEST_ITER_SLEEP=150 start_bg c.txt mpirun -np 2 "$G" "${FIT[@]}" --out x.h5 --checkpoint ck.h5 --checkpoint-every 3
wait_until "[ -e ck_prev.h5 ]" 60 || die "no second checkpoint"
kill -USR1 $bgpid; wait_bg 120; rc=$?
outcome "fit stopped mid-run" $rc 75 c.txt note "checkpoint written to ck.h5"
mkdir -p good; cp ck.h5 good/ck.h5; cp ck_prev.h5 good/ck_prev.h5

# edit FILE DATASET INDEX VALUE: change one value and make the checksum match again
edit() {
  "$PY" - "$@" <<'PY'
import sys, zlib, struct, h5py
path, ds, i, v = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
with h5py.File(path, "r+") as f:
    a = f[ds][()]; a[i] = v; f[ds][...] = a
b = bytearray(open(path, "rb").read())
assert b[:8] == b"GHFITCKP", "no checkpoint signature"
b[12:16] = struct.pack("<I", zlib.crc32(bytes(b[512:])) & 0xffffffff)
b[16:24] = struct.pack("<Q", len(b))
open(path, "wb").write(bytes(b))
PY
}
# resume_refused NAME PATTERN [ghfit fit args]: resume from ck.h5 in t/ must exit 2 with one line
resume_refused() {
  local name=$1 pat=$2; shift 2
  (cd t && snapshot . > ../t.sha)
  run_t 120 "$name.txt" mpirun -np 2 "$G" "${FIT[@]}" "$@" --out t/r.h5 --checkpoint t/ck.h5 --resume; local rc=$?
  outcome "$name" $rc 2 "$name.txt" error "$pat"
  same_files "$name: checkpoint" t.sha t
}

# --- 1. invalid parameters with a matching checksum ----------------------------------
rm -rf t; mkdir t; cp good/ck.h5 t/ck.h5; edit t/ck.h5 /running/0/cur 0 nan
resume_refused "NaN in mu" "^ghfit: error: t/ck.h5: invalid checkpoint: running/0 \(fit gh\): cur.mu\[0\] = nan"
rm -rf t; mkdir t; cp good/ck.h5 t/ck.h5; np=$(( 2 * 3 + 9 )); edit t/ck.h5 /running/0/cur $np 1e6
resume_refused "p = 1e6" "^ghfit: error: t/ck.h5: invalid checkpoint: running/0 \(fit gh\): cur.p = 1e\+06 is outside \[-50, 50\]"
# the same with a valid _prev beside it: the warning names the field, the resume goes on from _prev
rm -rf t; mkdir t; cp good/ck.h5 t/ck.h5; cp good/ck_prev.h5 t/ck_prev.h5; edit t/ck.h5 /running/0/cur 0 nan
run_t 120 p1.txt mpirun -np 2 "$G" "${FIT[@]}" --out t/r.h5 --checkpoint t/ck.h5 --resume; rc=$?
[ $rc = 0 ] && grep -q "^ghfit: warning: t/ck.h5: invalid checkpoint: running/0 (fit gh): cur.mu\[0\] = nan; resuming from the previous checkpoint t/ck_prev.h5" p1.txt \
  && ok "invalid checkpoint with a valid _prev: warning, resumed from _prev" || { cat p1.txt; die "fallback to _prev (exit $rc)"; }
same_fit ref.h5 t/r.h5 gh && ok "resumed from _prev == uninterrupted (bitwise)" || die "resumed from _prev differs"

# --- 2. a damaged byte: the checksum --------------------------------------------------------
rm -rf t; mkdir t; cp good/ck.h5 t/ck.h5
"$PY" -c "import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[len(b) // 2] ^= 0x10; open(sys.argv[1], 'wb').write(bytes(b))" t/ck.h5
resume_refused "a damaged byte" "^ghfit: error: t/ck.h5: damaged: the checksum of its contents does not match"
rm -rf t; mkdir t; head -c 3000 good/ck.h5 > t/ck.h5
resume_refused "a truncated checkpoint" "^ghfit: error: t/ck.h5: damaged: 3000 bytes where the checkpoint has [0-9]+ \(truncated\?\)"
rm -rf t; mkdir t; cp good/ck.h5 t/ck.h5; cp good/ck_prev.h5 t/ck_prev.h5
"$PY" -c "import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[len(b) // 2] ^= 0x10; open(sys.argv[1], 'wb').write(bytes(b))" t/ck.h5
run_t 120 p2.txt mpirun -np 2 "$G" "${FIT[@]}" --out t/r.h5 --checkpoint t/ck.h5 --resume; rc=$?
[ $rc = 0 ] && grep -q "^ghfit: warning: t/ck.h5: damaged: the checksum of its contents does not match; resuming from the previous checkpoint t/ck_prev.h5" p2.txt \
  && ok "damaged checkpoint with a valid _prev: warning, resumed from _prev" || { cat p2.txt; die "fallback to _prev (exit $rc)"; }
same_fit ref.h5 t/r.h5 gh && ok "resumed from _prev == uninterrupted (bitwise)" || die "resumed from _prev differs"
[ -e t/ck.h5 ] || [ -e t/ck_prev.h5 ] && die "checkpoint files left after the result was written"

# --- 3. other data of the same shape at the same path ----------------------------------------
rm -rf t; mkdir t; cp good/ck.h5 t/ck.h5
mkdir -p alt; cp in/d.h5 alt/d.h5.keep
"$G" generate --model gh --dim 3 --n 6000 --seed 6 --p -1 --a 1.5 --b 0.7 --gamma 0.2,-0.1,0 --out in/d2.h5 > /dev/null
mv in/d2.h5 in/d.h5
snapshot in > in.sha
resume_refused "other data, same path and shape" \
  "^ghfit: error: t/ck.h5: the checkpoint does not belong to this run: it was written for other data of the same shape \(fingerprint of 64 sampled rows"
same_files "inputs" in.sha in
mv alt/d.h5.keep in/d.h5

# --- 4. a sweep: the log of finished fits ---------------------------------------------------------
cat > sw.yaml <<'YAML'
data: in/d.h5
out: sw.h5
family: [nig, gh]
tol: 1e-8
windows: {start: 0, length: 1000, step: 1000, count: 4}
quiet: true
YAML
GHFIT_TEST_ITER_SLEEP=60 start_bg s1.txt mpirun -np 2 "$G" run sw.yaml --checkpoint swck.h5 --checkpoint-every 2
wait_until "[ -e swck.h5 ] && [ \$(\"$H\" swck.h5 / done_count 2>/dev/null || echo 0) -ge 2 ]" 60 || die "no sweep checkpoint with 2 finished fits"
kill -USR1 $bgpid; wait_bg 120; rc=$?
outcome "sweep stopped mid-run" $rc 75 s1.txt note "checkpoint written to swck.h5"
[ -e swck.h5.done ] && ok "the finished fits are in the log swck.h5.done" || die "no log of finished fits"
# (a checkpoint names its log: the pair is copied under the same names)
rm -rf t; mkdir t; cp swck.h5 swck.h5.done t/
"$PY" -c "import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[100] ^= 0x01; open(sys.argv[1], 'wb').write(bytes(b))" t/swck.h5.done
(cd t && snapshot . > ../t.sha)
run_t 120 s2.txt mpirun -np 2 "$G" run sw.yaml --out t/r.h5 --checkpoint t/swck.h5 --resume; rc=$?
outcome "damaged log of finished fits" $rc 2 s2.txt error "^ghfit: error: t/swck.h5: its log of finished fits t/swck.h5.done is damaged \(checksum mismatch\)"
same_files "damaged log: checkpoint" t.sha t
rm -rf t; mkdir t; cp swck.h5 t/
run_t 120 s3.txt mpirun -np 2 "$G" run sw.yaml --out t/r.h5 --checkpoint t/swck.h5 --resume; rc=$?
outcome "missing log of finished fits" $rc 2 s3.txt error "^ghfit: error: t/swck.h5: its log of finished fits t/swck.h5.done is missing"
# the intact pair resumes, and the result equals an uninterrupted sweep
run_t 120 s4.txt mpirun -np 2 "$G" run sw.yaml --out swref.h5 || die "reference sweep"
run_t 120 s5.txt mpirun -np 2 "$G" run sw.yaml --checkpoint swck.h5 --resume || { cat s5.txt; die "sweep resume"; }
for n in $(h5ls swref.h5/fits | awk '{print $1}'); do same_fit swref.h5 sw.h5 "$n" || die "sweep fit $n differs"; done
[ "$(h5ls sw.h5/fits | grep -c Group)" = 8 ] && ok "resumed sweep == uninterrupted (8 fits, bitwise)" || die "resumed sweep"
ls swck* > /dev/null 2>&1 && die "checkpoint files left after the sweep: $(ls swck*)"

ls *.tmp* t/*.tmp* > /dev/null 2>&1 && die "temporary files left"
[ $fail -eq 0 ] && echo "faults_ckpt: all passed" || echo "faults_ckpt: FAILED"
exit $fail
