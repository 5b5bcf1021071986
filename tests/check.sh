#!/usr/bin/env bash
# `ghfit check fit|run ARGS` against the bad-input corpus (tests/bad_input.sh,
# faults_io.sh, faults_jobfile.sh, faults_ckpt.sh, faults_sweep.sh,
# batch_sweep.sh, fit_families.sh): every case that does not need the fit
# itself.  For each one, check exits 2 with exactly one line on stderr,
# "ghfit: error: ..." matching the corpus's pattern, creates nothing (no lock,
# no probe file, no output), and `ghfit fit|run ARGS` itself exits 2 with the
# very same line (or, where check saw a sample only, a line matching the same
# pattern).  Then what check accepts and reports: a fit, a sweep and its
# slices, a checkpoint to resume, warnings of `ghfit run`; and that on a
# 1e8-row file it reads a sample (its time is bench/check_bench.sh: no timed
# assertion here).
# usage: check.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$W"; mkdir -p "$W"; cd "$W" || exit 1
unset SLURM_NTASKS
. "$HERE/check_lib.sh"
"$PY" -c "import h5py" 2>/dev/null || { echo "h5py is not available at $PY (Debian python3-h5py)"; exit 1; }

# ---- data -----------------------------------------------------------------------------------
"$G" generate --model gh --dim 5 --n 4 --seed 1 --out few.h5 > /dev/null
"$G" generate --model gh --dim 3 --n 6000 --seed 5 --p -1 --a 1.5 --b 0.7 --gamma 0.2,-0.1,0 --out d.h5 > /dev/null
"$PY" "$HERE/faults_make_h5.py" > /dev/null || { echo "faults_make_h5.py failed"; exit 1; }   # good.h5: 1000 x 3
"$PY" - <<'PY'
import h5py, numpy as np
rng = np.random.default_rng(0)
x = rng.standard_normal((400, 3))
x[17, 1] = np.nan; x[250, 0] = np.inf; x[300, 2] = np.nan
with h5py.File("nan.h5", "w") as f: f["X"] = x
with h5py.File("onedim.h5", "w") as f: f["X"] = rng.standard_normal(100)
with h5py.File("threedim.h5", "w") as f: f["X"] = rng.standard_normal((10, 3, 2))
with h5py.File("strings.h5", "w") as f: f["X"] = np.array([b"a", b"b"], dtype="S1").reshape(2, 1)
y = rng.standard_normal((400, 3)); y[:, 1] = 3.0
with h5py.File("const.h5", "w") as f: f["X"] = y
z = rng.standard_normal((20000, 3)); z[0, 2] = np.nan     # row 0: in every sample
with h5py.File("nan_big.h5", "w") as f: f["X"] = z
PY
echo "this is not HDF5" > text.h5
head -c 1500 good.h5 > trunc.h5
cat > job.yaml <<'EOF'
data: {file: good.h5}
out: run.h5
family: [nig]
max_iter: 30
EOF
FIT=(fit --model nig --max-iter 30 --quiet)

# ---- tests/bad_input.sh -----------------------------------------------------------------------
expect 2 "missing.h5" -- fit --data missing.h5 --model gh --out out.h5
expect 2 "text.h5" -- fit --data text.h5 --model gh --out out.h5
expect 2 "trunc.h5" -- fit --data trunc.h5 --model gh --out out.h5
expect 2 "/nope" -- fit --data good.h5 --dataset /nope --model gh --out out.h5
expect 2 "model" -- fit --data good.h5 --model frobnic --out out.h5
expect 2 "tol" -- fit --data good.h5 --model gh --out out.h5 --tol abc
expect 2 "max-iter" -- fit --data good.h5 --model gh --out out.h5 --max-iter 1.5
expect 2 "backend" -- fit --data good.h5 --model gh --out out.h5 --backend tpu
expect 2 "no-such-dir" -- fit --data good.h5 --model gh --out no-such-dir/out.h5
expect 2 "frobnicate" -- fit --data good.h5 --model gh --out out.h5 --frobnicate
expect 2 "d + 1" -- fit --data few.h5 --model gh --out out.h5
expect 2 "row 17" -- fit --data nan.h5 --model nig --out out.h5
expect 2 "3 rows" -- fit --data nan.h5 --model nig --out out.h5
expect 2 "onedim.h5" -- fit --data onedim.h5 --model gh --out out.h5
expect 2 "threedim.h5" -- fit --data threedim.h5 --model gh --out out.h5
expect 2 "strings.h5" -- fit --data strings.h5 --model gh --out out.h5
expect 2 "column 1" -- fit --data const.h5 --model gh --out out.h5
# a sample of a larger file: check names the first non-finite row it saw, the fit every one
expect 2 "non-finite values (first at row 0)" like -- fit --data nan_big.h5 --model gh --out out.h5
accept fit --data nan.h5 --model nig --out out.h5 --drop-nonfinite && has "3 rows with non-finite values (first at row 17), to be dropped"

# ---- tests/fit_families.sh: bad model choices ----------------------------------------------------
expect 2 "needs p > 0" -- fit --data good.h5 --model vg --p-fixed -1 --out bad.h5
expect 2 "Student-t family needs p < 0" -- fit --data good.h5 --model t --p-fixed 0.5 --out bad.h5
expect 2 "p is fixed by the family" -- fit --data good.h5 --model hyp --p-fixed 1 --out bad.h5
expect 2 "p is fixed by the family" -- fit --data good.h5 --model nig --p-fixed 1 --out bad.h5
printf 'data: good.h5\nout: bad.h5\nfamily: [nig, skewt]\n' > badfam.yaml
expect 2 "badfam.yaml.*family: unknown family 'skewt'" -- run badfam.yaml

# ---- tests/batch_sweep.sh: bad job files; tests/faults_sweep.sh: fit names --------------------------
printf 'data: good.h5\nout: bad.h5\ntolerence: 1e-8\n' > b1.yaml
expect 2 "b1.yaml:3: unknown key 'tolerence'" -- run b1.yaml
printf 'data: good.h5\nout: bad.h5\nfamily: nig\ntol: x\n' > b2.yaml
expect 2 "b2.yaml:4: tol: 'x' is not a non-negative number" -- run b2.yaml
printf 'data: good.h5\nout: bad.h5\nwindows: {length: 100, count: 100}\n' > b3.yaml
expect 2 "b3.yaml: windows: 100 windows" -- run b3.yaml
printf 'data: nothere.h5\nout: bad.h5\n' > b4.yaml
expect 2 "nothere.h5" -- run b4.yaml
cat > long.yaml <<'YAML'
data: d.h5
out: long.h5
family: gh
p: [-0.1234567890123456, -0.1234567890123457]
tol: [1.234567890123456e-8, 1.234567890123457e-8]
seed: 9223372036854775807
windows: {length: 1000, count: 2}
YAML
expect 2 "is longer than 63 characters" -- run long.yaml
rm -f b?.yaml badfam.yaml long.yaml

# ---- tests/faults_jobfile.sh --------------------------------------------------------------------
"$PY" - <<'PY'
d = 300000
open("deep.yaml", "w").write("data: good.h5\nout: x.h5\ntol: " + "[" * d + "]" * d + "\n")
open("deepmap.yaml", "w").write("data: good.h5\nout: x.h5\nwindows:\n" +
    "".join("  " * (i + 1) + "k%d:\n" % i for i in range(40)) + "  " * 41 + "v: 1\n")
open("big.yaml", "w").write("data: good.h5\nout: x.h5\n" + "# padding\n" * 120000)
PY
mkfifo fifo.yaml
expect 2 "deep.yaml:3: lists or mappings nested deeper than 16 levels" -- run deep.yaml
expect 2 "lists or mappings nested deeper than 16 levels" -- run deepmap.yaml
expect 2 "big.yaml: the job file has 1200024 bytes, more than the limit of 1048576" -- run big.yaml
expect 2 "fifo.yaml: the job file is not a regular file" -- run fifo.yaml
rm -f deep.yaml deepmap.yaml big.yaml fifo.yaml

# ---- tests/faults_io.sh: paths ---------------------------------------------------------------------
mkdir sub
expect 2 "same file" -- "${FIT[@]}" --data good.h5 --out ./sub/../good.h5
expect 2 "same file" -- "${FIT[@]}" --data good.h5 --out o.h5 --checkpoint good.h5
expect 2 "same file" -- "${FIT[@]}" --data good.h5 --out o.h5 --checkpoint ./o.h5
expect 2 "same file" -- run job.yaml --out sub/../good.h5 --quiet
expect 2 "same file" -- run job.yaml --checkpoint good.h5 --quiet
expect 2 "same file" -- run job.yaml --checkpoint run.h5 --quiet
expect 2 "same file" -- "${FIT[@]}" --data good.h5 --out sub/../new.h5 --checkpoint new.h5
expect 2 "same file" -- run job.yaml --out ./job.yaml --quiet
ln -s good.h5 sym.h5; ln good.h5 hard.h5
expect 2 "same file" -- "${FIT[@]}" --data sym.h5 --out good.h5
expect 2 "same file" -- "${FIT[@]}" --data good.h5 --out hard.h5
rm -f sym.h5 hard.h5
"$PY" -c "import h5py; f = h5py.File('elink.h5', 'w'); f['X'] = h5py.ExternalLink('good.h5', '/X')"
expect 2 "external link" -- "${FIT[@]}" --data elink.h5 --out good.h5
echo "my notes" > ck_prev.h5
expect 2 "ck_prev.h5 exists and is not a ghfit checkpoint" -- "${FIT[@]}" --data good.h5 --out o.h5 --checkpoint ck.h5
expect 2 "ck_prev.h5 exists and is not a ghfit checkpoint" -- run job.yaml --checkpoint ck.h5 --quiet
rm -f ck_prev.h5
echo "not a result" > notres.h5; cp good.h5 other.h5; echo "x" > ck.h5
expect 2 "not a ghfit result file" -- "${FIT[@]}" --data good.h5 --out notres.h5
expect 2 "not a ghfit result file" -- "${FIT[@]}" --data good.h5 --out other.h5
expect 2 "not a ghfit result file" -- run job.yaml --out other.h5 --quiet
expect 2 "ck.h5 exists and is not a ghfit checkpoint" -- "${FIT[@]}" --data good.h5 --out o.h5 --checkpoint ck.h5
expect 2 "ck.h5 exists and is not a ghfit checkpoint" -- "${FIT[@]}" --data good.h5 --out o.h5 --checkpoint ck.h5 --resume
rm -f notres.h5 other.h5 ck.h5
mkfifo fifo.h5
expect 2 "FIFO" -- "${FIT[@]}" --data good.h5 --out fifo.h5
expect 2 "FIFO" -- "${FIT[@]}" --data good.h5 --out o.h5 --checkpoint fifo.h5
expect 2 "is a FIFO" -- "${FIT[@]}" --data good.h5 --out o.h5 --checkpoint fifo.h5 --resume
expect 2 "fifo.h5:/X: is a FIFO" -- "${FIT[@]}" --data fifo.h5 --out o.h5
printf 'data: {file: fifo.h5}\nout: run.h5\nfamily: [nig]\n' > fifojob.yaml
expect 2 "fifo.h5:/X: is a FIFO" -- run fifojob.yaml --quiet
rm -f fifo.h5 fifojob.yaml
expect 2 "character device" -- "${FIT[@]}" --data good.h5 --out /dev/null
"$PY" -c "import socket; socket.socket(socket.AF_UNIX).bind('sock.h5')"
expect 2 "socket" -- "${FIT[@]}" --data good.h5 --out sock.h5
rm -f sock.h5
expect 2 "missing.h5" -- "${FIT[@]}" --data missing.h5 --out no-dir/o.h5
expect 2 "missing.h5" -- run job.yaml --data missing.h5 --out no-dir/o.h5 --quiet
# locks: a live writer of the output, a lock file that is not ghfit's
GHFIT_TEST_ITER_SLEEP=300 "$G" "${FIT[@]}" --data good.h5 --out busy.h5 --max-iter 60 --tol 0 > first.txt 2>&1 &
wpid=$!
for _ in $(seq 1 100); do [ -s busy.h5.lock ] && break; sleep 0.1; done
expect 2 "another ghfit process is writing this file (pid $wpid on host" -- "${FIT[@]}" --data good.h5 --out ./busy.h5
expect 2 "another ghfit process is writing this file (pid $wpid on host" -- run job.yaml --out busy.h5 --quiet
kill -KILL $wpid; wait $wpid 2> /dev/null; rm -f busy.h5* first.txt
echo "my lock" > mine.h5.lock
expect 2 "mine.h5.lock exists and is not a ghfit lock file" -- "${FIT[@]}" --data good.h5 --out mine.h5
rm -f mine.h5.lock

# ---- tests/faults_io.sh: blocking and messages -------------------------------------------------------
for f in chunk_gap:"rows \[400, 500)" chunk_last:"rows \[900, 1000)" contig_empty:"never written" \
         lzf:"LZF filter (id 32000), which this HDF5 library does not have" vds:"is a virtual dataset" \
         external:"external storage in ext_raw.bin" wide:"2 rows but 1000000 columns" \
         toowide:"at most 1000000 columns" huge:"more than the"; do
  expect 2 "${f#*:}" -- "${FIT[@]}" --data ${f%%:*}.h5 --out o.h5
done
expect 2 "rows \[900, 1000)" -- run job.yaml --data chunk_last.h5 --quiet
expect 2 "soft link to /nowhere, which does not exist" -- "${FIT[@]}" --data links.h5 --dataset /soft_dangling --out o.h5
expect 2 "the file no-such-file.h5 does not exist" -- "${FIT[@]}" --data links.h5 --dataset /ext_missing_file --out o.h5
expect 2 "/grp/dangling is a soft link to /grp/none" -- "${FIT[@]}" --data links.h5 --dataset /grp/dangling --out o.h5
expect 2 "external link to good.h5:/nope, which cannot be opened" -- "${FIT[@]}" --data links.h5 --dataset /ext_missing_obj --out o.h5
expect 2 "no such dataset (the group /grp holds: dangling)" -- "${FIT[@]}" --data links.h5 --dataset /grp/nope --out o.h5
expect 2 "window start 9223372036854775000 is out of range" -- "${FIT[@]}" --data good.h5 --rows 9223372036854775000:10 --out o.h5
expect 2 "window of 9223372036854775807 rows from row 5 is out of range" -- "${FIT[@]}" --data good.h5 --rows 5:9223372036854775807 --out o.h5
printf 'data: {file: good.h5}\nout: run.h5\nfamily: [nig]\nwindows: {start: 9223372036854775000, length: 100, step: 100}\n' > winjob.yaml
printf 'data: {file: good.h5}\nout: run.h5\nfamily: [nig]\nwindows: {start: 0, length: 3, step: 100}\n' > smalljob.yaml
expect 2 "does not fit" -- run winjob.yaml --quiet
expect 2 "at least d + 1 = 4 rows" -- run smalljob.yaml --quiet
rm -f winjob.yaml smalljob.yaml
cp good.h5 locked.h5
env -u HDF5_USE_FILE_LOCKING "$PY" -c "
import h5py, os, time
f = h5py.File('locked.h5', 'a'); open('locked.ready', 'w').close()
while os.path.exists('locked.ready'): time.sleep(0.05)" &
py=$!
for _ in $(seq 1 100); do [ -e locked.ready ] && break; sleep 0.1; done
HDF5_USE_FILE_LOCKING_SAVED=${HDF5_USE_FILE_LOCKING-unset}; unset HDF5_USE_FILE_LOCKING
expect 2 "locked.h5:/X: the file is locked by another process" -- "${FIT[@]}" --data locked.h5 --out o.h5
[ "$HDF5_USE_FILE_LOCKING_SAVED" = unset ] || export HDF5_USE_FILE_LOCKING=$HDF5_USE_FILE_LOCKING_SAVED
rm -f locked.ready; wait $py; rm -f locked.h5
# the backend: CUDA asked of a binary without it
if ! "$G" --version | grep -q "backends:.*cuda"; then
  expect 2 "this ghfit was built without CUDA" -- "${FIT[@]}" --data good.h5 --out o.h5 --backend cuda
fi

# ---- tests/faults_ckpt.sh: checkpoints to resume ------------------------------------------------------
CK=(fit --data d.h5 --model gh --tol 1e-9 --max-iter 300 --quiet)
GHFIT_TEST_ITER_SLEEP=150 "$G" "${CK[@]}" --out x.h5 --checkpoint ck.h5 --checkpoint-every 3 > stop.txt 2>&1 &
bg=$!
for _ in $(seq 1 300); do [ -e ck_prev.h5 ] && break; sleep 0.1; done
kill -USR1 $bg; wait $bg; rc=$?
[ $rc = 75 ] && [ -e ck.h5 ] || { cat stop.txt; echo "FAIL: no checkpoint (exit $rc)"; fail=1; }
mkdir -p good_ck && mv ck.h5 ck_prev.h5 good_ck/ && rm -f stop.txt
mkdir t
edit() { # FILE DATASET INDEX VALUE: one value changed, the checksum made to match (as tests/faults_ckpt.sh)
  "$PY" - "$@" <<'PY'
import sys, zlib, struct, h5py
path, ds, i, v = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
with h5py.File(path, "r+") as f:
    a = f[ds][()]; a[i] = v; f[ds][...] = a
b = bytearray(open(path, "rb").read())
b[12:16] = struct.pack("<I", zlib.crc32(bytes(b[512:])) & 0xffffffff)
b[16:24] = struct.pack("<Q", len(b))
open(path, "wb").write(bytes(b))
PY
}
fresh() { rm -rf t; mkdir t; cp good_ck/ck.h5 t/ck.h5; }
fresh
accept "${CK[@]}" --out t/r.h5 --checkpoint t/ck.h5 --resume && has "t/ck.h5: resumes 0 finished fits and 1 running"
accept "${CK[@]}" --out t/r.h5 --checkpoint t/ck.h5 && has "one is there: add --resume"
edit t/ck.h5 /running/0/cur 0 nan
expect 2 "t/ck.h5: invalid checkpoint: running/0 (fit gh): cur.mu\[0\] = nan" -- "${CK[@]}" --out t/r.h5 --checkpoint t/ck.h5 --resume
fresh; edit t/ck.h5 /running/0/cur 15 1e6
expect 2 "cur.p = 1e+06 is outside \[-50, 50\]" -- "${CK[@]}" --out t/r.h5 --checkpoint t/ck.h5 --resume
fresh; cp good_ck/ck_prev.h5 t/; edit t/ck.h5 /running/0/cur 0 nan
accept "${CK[@]}" --out t/r.h5 --checkpoint t/ck.h5 --resume &&
  has "^ghfit: warning: t/ck.h5: invalid checkpoint: running/0 (fit gh): cur.mu\[0\] = nan; resuming from the previous checkpoint t/ck_prev.h5" c_err.txt
fresh; "$PY" -c "import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[len(b) // 2] ^= 0x10; open(sys.argv[1], 'wb').write(bytes(b))" t/ck.h5
expect 2 "t/ck.h5: damaged: the checksum of its contents does not match" -- "${CK[@]}" --out t/r.h5 --checkpoint t/ck.h5 --resume
rm -rf t; mkdir t; head -c 3000 good_ck/ck.h5 > t/ck.h5
expect 2 "t/ck.h5: damaged: 3000 bytes where the checkpoint has" -- "${CK[@]}" --out t/r.h5 --checkpoint t/ck.h5 --resume
fresh
expect 2 "does not belong to this run: it was written with other options" -- "${CK[@]}" --tol 1e-8 --out t/r.h5 --checkpoint t/ck.h5 --resume
expect 2 "t/none.h5: no such checkpoint file" -- "${CK[@]}" --out t/r.h5 --checkpoint t/none.h5 --resume
mv d.h5 d.h5.keep
"$G" generate --model gh --dim 3 --n 6000 --seed 6 --p -1 --a 1.5 --b 0.7 --gamma 0.2,-0.1,0 --out d.h5 > /dev/null
expect 2 "it was written for other data of the same shape (fingerprint of 64 sampled rows" -- "${CK[@]}" --out t/r.h5 --checkpoint t/ck.h5 --resume
mv d.h5.keep d.h5
# a sweep's log of finished fits
cat > sw.yaml <<'YAML'
data: d.h5
out: sw.h5
family: [nig, gh]
tol: 1e-8
windows: {start: 0, length: 1000, step: 1000, count: 4}
quiet: true
YAML
GHFIT_TEST_ITER_SLEEP=60 "$G" run sw.yaml --checkpoint swck.h5 --checkpoint-every 2 > sw.txt 2>&1 &
bg=$!
for _ in $(seq 1 600); do [ "$("$H" swck.h5 / done_count 2>/dev/null || echo 0)" -ge 2 ] && break; sleep 0.1; done
kill -USR1 $bg; wait $bg; rc=$?
[ $rc = 75 ] && [ -e swck.h5.done ] || { cat sw.txt; echo "FAIL: no sweep checkpoint (exit $rc)"; fail=1; }
rm -rf t; mkdir t; cp swck.h5 swck.h5.done t/
accept run sw.yaml --out t/r.h5 --checkpoint t/swck.h5 --resume && has "t/swck.h5: resumes [1-9][0-9]* finished fits and"
"$PY" -c "import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[100] ^= 0x01; open(sys.argv[1], 'wb').write(bytes(b))" t/swck.h5.done
expect 2 "t/swck.h5: its log of finished fits t/swck.h5.done is damaged (checksum mismatch)" -- run sw.yaml --out t/r.h5 --checkpoint t/swck.h5 --resume
rm -f t/swck.h5.done
expect 2 "t/swck.h5: its log of finished fits t/swck.h5.done is missing" -- run sw.yaml --out t/r.h5 --checkpoint t/swck.h5 --resume
rm -rf t good_ck swck* sw.txt

# ---- weights, and the files of the job keys risk, eval and gof (checked by the run before it fits) -----
"$PY" -c "
import h5py, numpy as np
with h5py.File('wv.h5', 'w') as f: f['ok'] = np.ones(1000); f['short'] = np.ones(999); f['W4'] = np.ones((2, 4))"
expect 2 "good.h5:/nope: no such dataset" -- "${FIT[@]}" --data good.h5 --out out.h5 --weights /nope
expect 2 "weights wv.h5:/short: 999 values, but the data good.h5:/X have 1000 rows" -- "${FIT[@]}" --data good.h5 --out out.h5 --weights wv.h5:/short
expect 2 "good.h5:/nope: no such dataset" -- run job.yaml --weights /nope
printf 'data: good.h5\nout: run.h5\nfamily: nig\neval: missing.h5\n' > pe.yaml
expect 2 "pe.yaml: eval: missing.h5:/X: cannot open file" -- run pe.yaml
printf 'data: good.h5\nout: run.h5\nfamily: nig\nrisk: {portfolios: wv.h5:/W4, alpha: [0.99]}\n' > pr.yaml
expect 2 "pr.yaml: risk.portfolios: wv.h5:/W4 has 4 columns, but the data good.h5:/X have dimension 3" -- run pr.yaml
printf 'data: good.h5\nout: run.h5\nfamily: nig\ngof: {data: missing.h5}\n' > pg.yaml
expect 2 "pg.yaml: gof.data: missing.h5:/X: cannot open file" -- run pg.yaml
accept "${FIT[@]}" --data good.h5 --out out.h5 --weights wv.h5:/ok && has "weights     wv.h5:/ok: 1000 values, one per row"
printf 'data: good.h5\nout: run.h5\nfamily: nig\neval: good.h5\n' > pe.yaml
accept run pe.yaml && has "after fits  the files of eval: readable, 3 columns"
rm -f wv.h5 pe.yaml pr.yaml pg.yaml

# ---- what check accepts and reports --------------------------------------------------------------------
accept fit --data good.h5 --model gh --out fit.h5
has "data        good.h5:/X: 1000 rows x 3 columns"; has "sample      all 1000 rows (float64, contiguous): all finite"
has "backend     auto"; has "memory      about"
[ -e fit.h5 ] && bad "check wrote the output"
accept --ranks 4 run sw.yaml --warm-start && has "fits        8 of 8: nig_tol1e-08_s1_w000000 .. gh_pfree_tol1e-08_s1_w000003 (windows warm-started)"
has "ranks       4 (--ranks): 4 groups of 1 rank"
accept run sw.yaml --slice 1/4 && has "fits        2 of 8, slice 1/4: nig_tol1e-08_s1_w000001 .. gh_pfree_tol1e-08_s1_w000001"
SLURM_NTASKS=8 timeout 30 "$G" check run sw.yaml > c_out.txt 2>&1 && has "ranks       8 (SLURM_NTASKS): 8 groups of 1 rank"
# `ghfit run`: rows with NaN fail only their windows' fits (exit 3): a warning
printf 'data: nan_big.h5\nout: nb.h5\nfamily: nig\nwindows: {length: 5000}\n' > nb.yaml
accept run nb.yaml && has "^ghfit: warning: nan_big.h5:/X: 1 sampled row holds non-finite values (first at row 0)" c_err.txt
rm -f nb.yaml
# a data set generated over another one has the new shape (the in-memory writer's old bug)
"$G" generate --model nig --dim 2 --n 700 --seed 1 --out regen.h5 > /dev/null
"$G" generate --model nig --dim 4 --n 900 --seed 1 --out regen.h5 > /dev/null
accept fit --data regen.h5 --model nig --out r.h5 && has "regen.h5:/X: 900 rows x 4 columns"
# usage
n=$((n + 1)); CASE="check usage"
"$G" check --help > c_out.txt 2>&1 && grep -q "usage: ghfit check" c_out.txt || bad "check --help"
for args in "" "frobnicate" "--ranks 0 fit" "--what fit"; do
  "$G" check $args > c_out.txt 2> c_err.txt; rc=$?
  [ $rc = 2 ] && [ "$(grep -c . c_err.txt)" = 1 ] && grep -q "^ghfit: error: " c_err.txt || bad "check $args: exit $rc"
done
echo "ok   [check usage]"

# ---- a 1e8-row file: check reads metadata and a sample only (its time: bench/check_bench.sh) ----------
"$PY" - <<'PY'
import h5py, numpy as np
n, d = 10**8, 10
rng = np.random.default_rng(1)
# contiguous, allocated at creation, never written but for a few blocks: a sparse 8 GB file
with h5py.File("big.h5", "w") as f:
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
    dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
    ds = h5py.Dataset(h5py.h5d.create(f.id, b"X", h5py.h5t.IEEE_F64LE, h5py.h5s.create_simple((n, d)), dcpl=dcpl))
    for s in (0, n // 2, n - 1000):
        ds[s:s + 1000] = rng.standard_normal((1000, d))
PY
n=$((n + 1)); CASE="big.h5 (1e8 x 10): a sample"
"$G" check --ranks 16 fit --data big.h5 --model gh --out big-fit.h5 > c_out.txt 2> c_err.txt; rc=$?
[ $rc = 0 ] && grep -q "of 100000000 rows, .* blocks of .* spread over them" c_out.txt && echo "ok   [$CASE]" ||
  bad "exit $rc, or not a sample: $(cat c_out.txt)"
printf 'data: big.h5\nout: bw.h5\nfamily: [gh, nig]\nwindows: {length: 1000000, step: 500000}\nwarm_start: true\n' > bw.yaml
n=$((n + 1)); CASE="a sweep of 398 windows over big.h5, slice 3/8"
"$G" check --ranks 64 run bw.yaml --slice 3/8 > c_out.txt 2> c_err.txt; rc=$?
[ $rc = 0 ] && grep -q "fits        50 of 398, slice 3/8" c_out.txt && echo "ok   [$CASE]" || bad "exit $rc: $(cat c_out.txt)"
rm -f big.h5 bw.yaml

echo "check: $n cases, $([ $fail -eq 0 ] && echo all passed || echo FAILURES)"
exit $fail
