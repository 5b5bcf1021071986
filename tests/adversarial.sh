#!/usr/bin/env bash
# Issue 25, item 5: the fitted-law commands and the fit options under hostile
# input, on 1, 2 and 3 ranks.  Table-driven: each case `c NP WANT PATTERN
# [OUT] -- ARGS` runs `ghfit ARGS` on NP ranks under a time limit and asserts
# the exit status WANT (a hang fails as 124), exactly one `ghfit: error:`
# line matching PATTERN (grep -E), no process dead on a signal, OUT (default
# o.h5) not created (or, when it exists, unchanged) and no temporary file
# left; every input stays as it was.
# Besides the table:
#  - each command replaces only its own kind of file (risk, gof, fit, run,
#    sample, generate: a file of another kind given as --out is refused and
#    unchanged);
#  - weights with fewer than d + 1 effective rows (Kish n_eff) are refused;
#  - summary --lrt gives weighted fits no p-value (a note instead);
#  - a checkpoint is refused for data changed in one unsampled value, for
#    other weights, and for a dimension beyond int (2^32 + 3);
#  - collective discipline of two allocation failures (GHFIT_TEST_FAIL
#    gather@0, ckpt_bcast@1): exit 1 on every rank, no hang.
# usage: adversarial.sh GHFIT WORKDIR
set -uo pipefail
G=$1; W=$2
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$W"; mkdir -p "$W/in"; cd "$W" || exit 1
. "$HERE/faults_lib.sh"
export OMPI_MCA_odls_base_sigkill_timeout=0 OMP_NUM_THREADS=1
"$PY" -c "import h5py, numpy" 2>/dev/null || { echo "h5py/numpy are not available at $PY"; exit 1; }

# ---- inputs (under in/: snapshotted, must never change) ------------------------------------
"$G" generate --model nig --dim 3 --n 2000 --seed 1 --out in/d.h5 > /dev/null &&
  "$G" generate --model nig --dim 4 --n 300 --seed 2 --out in/d4.h5 > /dev/null &&
  "$G" fit --data in/d.h5 --model nig --out in/f.h5 --quiet > /dev/null &&
  "$G" fit --data in/d4.h5 --model nig --out in/f4.h5 --quiet > /dev/null || { echo "setup failed"; exit 1; }
"$PY" - <<'PY' || exit 1
import h5py, numpy as np, shutil
rng = np.random.default_rng(0)
with h5py.File("in/p.h5", "w") as f:
    f["W"] = rng.normal(size=(5, 3))
    w = rng.normal(size=(5, 3)); w[2] = np.nan; f["Wnan"] = w
    w = rng.normal(size=(5, 3)); w[1, 0] = np.inf; f["Winf"] = w
    f["W2"] = rng.normal(size=(5, 2)); f["W0"] = np.zeros((0, 3))
with h5py.File("in/x.h5", "w") as f:
    x = rng.normal(size=(50, 3)); f["X"] = x; f["one"] = x[:1]
    m = x.copy(); m[:, 2] = np.nan; f["nancol"] = m
    f["allnan"] = np.full((50, 3), np.nan)
    w = np.ones(50); w[3] = -1; f["wneg"] = w
    w = np.ones(50); w[3] = np.nan; f["wnan"] = w
    f["wshort"] = np.ones(49); f["wzero"] = np.zeros(50)
    w = np.zeros(50); w[[0, 10, 20]] = 1; f["w3"] = w
with h5py.File("wide.h5", "w") as f:  # (outside in/: never read whole) 40001 x 40000 float32: contiguous, never written (a sparse file)
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
    dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
    h5py.h5d.create(f.id, b"X", h5py.h5t.IEEE_F32LE, h5py.h5s.create_simple((40001, 40000)), dcpl=dcpl)
with h5py.File("in/notres.h5", "w") as f:
    f["X"] = np.zeros((3, 3))
def hostile(name, fn):
    shutil.copy("in/f.h5", name)
    with h5py.File(name, "r+") as f:
        fn(f["fits/nig"])
def neg_a(g): g["params/a"][()] = -1.0
def not_pd(g):
    s = g["params/sigma"][()]; s[0, 1] = s[1, 0] = 10.0; g["params/sigma"][...] = s
def nan_p(g): g["params/p"][()] = np.nan
def mu4(g): del g["params/mu"]; g["params/mu"] = np.zeros(4)
hostile("in/h_nega.h5", neg_a); hostile("in/h_npd.h5", not_pd)
hostile("in/h_nanp.h5", nan_p); hostile("in/h_mu4.h5", mu4)
PY
snapshot in > in.sha

# c NP WANT PATTERN [OUT] -- ARGS...: one case (env: set ENV=(VAR=value ...) before)
c() {
  local np=$1 want=$2 pat=$3 out=o.h5
  [ "$4" != -- ] && { out=$4; shift; }
  shift 4
  rm -f o.h5 o.h5.lock
  local name="np$np: ghfit $*" before=""
  [ -e "$out" ] && before=$(sha256sum < "$out")
  if [ "$np" = 1 ]; then run_t 60 c.txt env "${ENV[@]}" "$G" "$@"
  else run_t 60 c.txt env "${ENV[@]}" mpirun --oversubscribe -np "$np" "$G" "$@"; fi
  local rc=$?
  outcome "$name" $rc "$want" c.txt error "$pat"
  if [ -n "$before" ]; then [ "$(sha256sum < "$out")" = "$before" ] || die "$name: $out was changed"
  else [ ! -e "$out" ] || die "$name: $out was written"; fi
  ! ls ./*.tmp* in/*.tmp* > /dev/null 2>&1 || die "$name: a temporary file was left"
}
ENV=()

# ---- the table: hostile models, selectors, portfolios, levels, sizes, weights, missing -------
c 1 2 "notres.h5: not a ghfit result file"                 -- eval --model in/notres.h5 --data in/d.h5 --out o.h5
c 2 2 "3 columns, but the fit nig of in/f4.h5 has dimension 4" -- eval --model in/f4.h5 --data in/d.h5 --out o.h5
c 3 2 "no fit named 'nope'"                                -- eval --model in/f.h5:/fits/nope --data in/d.h5 --out o.h5
c 1 2 "is not R.h5 or R.h5:/fits/NAME"                     -- sample --model in/f.h5:/fits/nig/params --n 5 --seed 1 --out o.h5
c 2 2 "not a valid nig law: p = -0.5, a = -1"              -- eval --model in/h_nega.h5 --data in/d.h5 --out o.h5
c 3 2 "not a valid nig law: p = -0.5, a = -1"              -- sample --model in/h_nega.h5 --n 10 --seed 1 --out o.h5
c 1 2 "not a valid nig law: p = -0.5, a = -1"              -- gof --model in/h_nega.h5 --data in/x.h5 --out o.h5
c 2 2 "h_npd.h5:/fits/nig: not a valid nig law: Sigma is not positive definite" -- eval --model in/h_npd.h5 --data in/d.h5 --out o.h5
c 2 2 "h_npd.h5:/fits/nig: not a valid nig law: Sigma is not positive definite" -- risk --model in/h_npd.h5 --portfolios in/p.h5:/W --alpha 0.99 --out o.h5
c 1 2 "h_npd.h5:/fits/nig: not a valid nig law: Sigma is not positive definite" -- check eval --model in/h_npd.h5 --data in/d.h5 --out o.h5
c 1 2 "h_npd.h5:/fits/nig: the fit's Sigma is not positive definite" -- check gof --model in/h_npd.h5 --data in/x.h5 --out o.h5
c 1 2 "not a valid nig law: p = -0.5, a = -1"              -- check sample --model in/h_nega.h5 --n 10 --seed 1 --out o.h5
c 3 2 "the fit has no finite parameters"                   -- gof --model in/h_nanp.h5 --data in/x.h5 --out o.h5
c 1 2 "params/mu: missing or not of the fit's dimension 3" -- risk --model in/h_mu4.h5 --portfolios in/p.h5:/W --alpha 0.99 --out o.h5
c 2 2 "1 row contains non-finite values"                   -- risk --model in/f.h5 --portfolios in/p.h5:/Wnan --alpha 0.99 --out o.h5
c 3 2 "1 row contains non-finite values"                   -- risk --model in/f.h5 --portfolios in/p.h5:/Winf --alpha 0.99 --out o.h5
c 1 2 "weights have 2 columns"                             -- risk --model in/f.h5 --portfolios in/p.h5:/W2 --alpha 0.99 --out o.h5
c 2 2 "dataset is empty"                                   -- risk --model in/f.h5 --portfolios in/p.h5:/W0 --alpha 0.99 --out o.h5
c 1 2 "--alpha: '0' is not a level"                        -- risk --model in/f.h5 --portfolios in/p.h5:/W --alpha 0 --out o.h5
c 1 2 "--alpha: '1' is not a level"                        -- risk --model in/f.h5 --portfolios in/p.h5:/W --alpha 1 --out o.h5
c 1 2 "--alpha: 'nan' is not a level"                      -- risk --model in/f.h5 --portfolios in/p.h5:/W --alpha nan --out o.h5
c 2 2 "--alpha: '0.99,,' has an empty item"                -- risk --model in/f.h5 --portfolios in/p.h5:/W --alpha 0.99,, --out o.h5
c 1 2 "--alpha: ',0.99' has an empty item"                 -- check risk --model in/f.h5 --portfolios in/p.h5:/W --alpha ,0.99 --out o.h5
c 1 2 "--gamma: expected one value or 3"                   -- generate --model nig --dim 3 --n 10 --seed 1 --gamma 0.1,,0.2,0.3 --out o.h5
c 1 2 "--n: invalid value '0'"                             -- sample --model in/f.h5 --n 0 --seed 1 --out o.h5
c 2 2 "sample --n: 1000000000000000 rows x 3 columns need" -- sample --model in/f.h5 --n 1e15 --seed 1 --out o.h5
c 1 2 "sample --n: 1000000000000000 rows x 3 columns need" -- check sample --model in/f.h5 --n 1e15 --seed 1 --out o.h5
c 3 2 "1 finite rows; gof needs at least 2"                -- gof --model in/f.h5 --data in/x.h5 --dataset /one --out o.h5
c 1 2 "--bootstrap: '0'"                                   -- gof --model in/f.h5 --data in/x.h5 --out o.h5 --bootstrap 0
c 2 2 "all 50 rows contain non-finite values"              -- gof --model in/f.h5 --data in/x.h5 --dataset /allnan --out o.h5 --drop-nonfinite
c 1 2 "--model in/f.h5 and --out in/f.h5 are the same file" in/f.h5 -- eval --model in/f.h5 --data in/d.h5 --out in/f.h5
c 2 2 "--data in/d.h5 and --out in/d.h5 are the same file"  in/d.h5 -- eval --model in/f.h5 --data in/d.h5 --out in/d.h5
c 1 2 "--portfolios in/p.h5 and --out in/p.h5 are the same" in/p.h5 -- risk --model in/f.h5 --portfolios in/p.h5 --alpha 0.9 --out in/p.h5
c 3 2 "--data in/x.h5 and --out in/x.h5 are the same file"  in/x.h5 -- gof --model in/f.h5 --data in/x.h5 --out in/x.h5
FIT=(fit --data in/x.h5 --model nig --out o.h5 --quiet)
c 2 2 "weights in/x.h5:/wneg: row 3: weight -1"            -- "${FIT[@]}" --weights /wneg
c 3 2 "weights in/x.h5:/wnan: row 3: weight nan"           -- "${FIT[@]}" --weights /wnan
c 1 2 "49 values, but the data in/x.h5:/X have 50 rows"    -- "${FIT[@]}" --weights /wshort
c 2 2 "every weight of the fit's rows is 0"                -- "${FIT[@]}" --weights /wzero
c 1 2 "--halflife: '-1' is not a positive"                 -- "${FIT[@]}" --halflife -1
c 2 2 "every one of the 50 rows is empty"                  -- fit --data in/x.h5 --dataset /allnan --model nig --out o.h5 --missing em
c 3 2 "column 2 has no observed value"                     -- fit --data in/x.h5 --dataset /nancol --model nig --out o.h5 --missing em
# issue 25 item 5: too few effective rows (both refused with exit 0 before)
c 1 2 "weights in/x.h5:/w3: 3 rows with a non-zero weight .* at least d \+ 1 = 4 effective rows" -- "${FIT[@]}" --weights /w3
c 2 2 "weights in/x.h5:/w3: 3 rows with a non-zero weight"  -- "${FIT[@]}" --weights in/x.h5:/w3
c 3 2 "--halflife 0.001: 2 rows with a non-zero weight and an effective sample size .* = 1: at least d \+ 1 = 4" -- "${FIT[@]}" --halflife 1e-3
c 1 2 "--halflife 0.001: 2 rows with a non-zero weight"     -- check "${FIT[@]}" --halflife 1e-3
# the dimension bound (GHF_D_MAX = 32768)
c 2 2 "wide.h5:/X: 40000 columns: ghfit fits at most 32768" -- fit --data wide.h5 --model gauss --out o.h5
c 1 2 "wide.h5:/X: 40000 columns: ghfit fits at most 32768" -- check fit --data wide.h5 --model gauss --out o.h5

# ---- each command replaces only its own kind of file -------------------------------------------
"$G" risk --model in/f.h5 --portfolios in/p.h5 --alpha 0.99 --out risk.h5 > /dev/null &&
  "$G" gof --model in/f.h5 --data in/x.h5 --out gof.h5 --qq 10 > /dev/null &&
  "$G" sample --model in/f.h5 --n 20 --seed 1 --out smp.h5 > /dev/null &&
  cp in/f.h5 fitc.h5 && cp in/d.h5 gen.h5 || die "outputs for the kind cases"
printf 'data: in/x.h5\nout: gof.h5\nfamily: nig\nquiet: true\n' > job.yaml
c 1 2 "--out fitc.h5 exists and is not a ghfit risk output .*\(it is a ghfit fit result\)" fitc.h5 -- risk --model in/f.h5 --portfolios in/p.h5 --alpha 0.99 --out fitc.h5
c 2 2 "--out fitc.h5 exists and is not a ghfit gof output .*\(it is a ghfit fit result\)"  fitc.h5 -- gof --model in/f.h5 --data in/x.h5 --out fitc.h5
c 3 2 "--out risk.h5 exists and is not a ghfit gof output .*\(it is a ghfit risk output\)" risk.h5 -- gof --model in/f.h5 --data in/x.h5 --out risk.h5
c 1 2 "--out gof.h5 exists and is not a ghfit risk output .*\(it is a ghfit gof output\)"  gof.h5 -- risk --model in/f.h5 --portfolios in/p.h5 --alpha 0.99 --out gof.h5
c 2 2 "--out risk.h5 exists and is not a ghfit result file .*\(it is a ghfit risk output\)" risk.h5 -- fit --data in/x.h5 --model nig --out risk.h5
c 1 2 "gof.h5 exists and is not a ghfit result file .*\(it is a ghfit gof output\)"         gof.h5 -- run job.yaml
c 2 2 "--out gen.h5 exists and is not a data set written by ghfit sample .*\(it is a data set written by ghfit generate\)" gen.h5 -- sample --model in/f.h5 --n 5 --seed 2 --out gen.h5
c 1 2 "--out smp.h5 exists and is not a data set written by ghfit generate \(it is a data set written by ghfit sample\)" smp.h5 -- generate --model nig --dim 3 --n 5 --seed 2 --out smp.h5
c 1 2 "--out fitc.h5 exists and is not a ghfit risk output" fitc.h5 -- check risk --model in/f.h5 --portfolios in/p.h5 --alpha 0.99 --out fitc.h5
# and its own kind is still replaced
"$G" risk --model in/f.h5 --portfolios in/p.h5 --alpha 0.9 --out risk.h5 > /dev/null &&
  "$G" gof --model in/f.h5 --data in/x.h5 --out gof.h5 --qq 10 > /dev/null &&
  "$G" sample --model in/f.h5 --n 20 --seed 3 --out smp.h5 > /dev/null &&
  "$G" fit --data in/x.h5 --model gauss --out fitc.h5 --quiet > /dev/null && ok "each command replaces its own kind" ||
  die "a command did not replace its own kind of file"

# ---- summary --lrt: weighted fits get no chi-square p-value ------------------------------------
"$G" fit --data in/d.h5 --model gh --halflife 500 --out wgh.h5 --quiet > /dev/null &&
  "$G" fit --data in/d.h5 --model nig --halflife 500 --out wnig.h5 --quiet > /dev/null || die "weighted fits"
"$G" summary wgh.h5 wnig.h5 --lrt > lrt.txt 2>&1
if grep -q "2 weighted fits not tested: a weighted log-likelihood ratio has no chi-square law" lrt.txt &&
   ! grep -q "chi2(1)" lrt.txt; then ok "summary --lrt: weighted fits not tested, with a note"
else sed 's/^/    | /' lrt.txt; die "summary --lrt tested weighted fits"; fi

# ---- checkpoints: one changed value, other weights, a dimension beyond int ---------------------
cp in/d.h5 cd.h5
"$PY" -c "
import h5py, numpy as np
with h5py.File('cw.h5', 'w') as f: f['w'] = np.ones(2000)
"
CK=(fit --data cd.h5 --model gh --weights cw.h5:/w --quiet --max-iter 300 --out ck_r.h5 --checkpoint ck.h5)
GHFIT_TEST_ITER_SLEEP=100 start_bg ck1.txt mpirun -np 2 "$G" "${CK[@]}" --checkpoint-every 1
wait_until "[ -e ck.h5 ]" 60 || die "no checkpoint"
kill -USR1 $bgpid; wait_bg 60; rc=$?
outcome "weighted fit stopped" $rc 75 ck1.txt note "checkpoint written to ck.h5"
mkdir -p good && cp ck.h5 good/ && rm -f ck_prev.h5
resume() { cp good/ck.h5 ck.h5; rm -f ck_prev.h5; }
# one value of a row the 64-row fingerprint does not sample (row 1 of 2000)
resume; cp cd.h5 cd.keep
"$PY" -c "
import h5py
with h5py.File('cd.h5', 'r+') as f: f['X'][1, 2] += 1e-9
"
c 2 2 "it was written for other data of the same shape \(the same 64 sampled rows, but the checksum of every value" ck_r.h5 -- "${CK[@]}" --resume
cp cd.keep cd.h5
resume; "$PY" -c "
import h5py
with h5py.File('cw.h5', 'r+') as f: f['w'][1999] = 2.0
"
c 3 2 "it was written for other weights \(cw.h5:/w: the checksum of every weight" ck_r.h5 -- "${CK[@]}" --resume
"$PY" -c "
import h5py
with h5py.File('cw.h5', 'r+') as f: f['w'][1999] = 1.0
"
# dim = 2^32 + 3 (an int cast would read 3), the checksum made to match
resume; "$PY" - <<'PY'
import h5py, numpy as np, zlib, struct
with h5py.File("ck.h5", "r+") as f:
    f.attrs["dim"] = np.int64(2**32 + 3)
    f["running/0"].attrs["dim"] = np.int64(2**32 + 3)
b = bytearray(open("ck.h5", "rb").read())
b[12:16] = struct.pack("<I", zlib.crc32(bytes(b[512:])) & 0xffffffff)
b[16:24] = struct.pack("<Q", len(b))
open("ck.h5", "wb").write(bytes(b))
PY
c 2 2 "ck.h5: not a ghfit checkpoint \(format 2\) or damaged" ck_r.h5 -- "${CK[@]}" --resume
# collective discipline: rank 1 cannot allocate the broadcast checkpoint
resume; ENV=(GHFIT_TEST_FAIL=ckpt_bcast@1)
c 2 1 "ck.h5: rank 1: out of memory for the checkpoint" ck_r.h5 -- "${CK[@]}" --resume
# rank 0 cannot allocate the gathered timings: no rank waits in MPI_Gather
ENV=(GHFIT_TEST_FAIL=gather@0)
c 3 1 "out of memory \(the per-rank timings of fit nig\)" -- fit --data in/d.h5 --model nig --out o.h5 --quiet
ENV=()
# the intact checkpoint still resumes, on another rank count
resume; run_t 120 ck2.txt mpirun --oversubscribe -np 3 "$G" "${CK[@]}" --resume && [ -e ck_r.h5 ] &&
  ok "the unchanged checkpoint resumes (3 ranks, written on 2)" || { sed 's/^/    | /' ck2.txt; die "resume"; }

same_files "inputs" in.sha in
[ $fail = 0 ] && echo "adversarial: all passed" || echo "adversarial: FAILED"
exit $fail
