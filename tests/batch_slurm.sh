#!/usr/bin/env bash
# The Slurm scripts on a real one-node Slurm (tests/slurm_lib.sh: slurmctld +
# slurmd + munge from Debian, started here without systemd; needs root and
# `GHFIT_WITH_SLURM=1 scripts/install-deps.sh`; installs nothing).  The jobs
# run side by side, so the test takes about as long as its slowest case:
#  1. outside Slurm both scripts exit 2 with one line;
#  2. ghfit.sbatch --ntasks=2 fits the demo data set: equal to `mpirun -np 2
#     ghfit fit` bitwise;
#  3. --ntasks=1 --cpus-per-task=2 is accepted and runs 2 OpenMP threads (the
#     result file's omp_threads is 2; the result equals the 1- and 2-thread
#     references bitwise: the CPU E-step is exact);
#  4. ghfit-array.sbatch --array=0-3 --cpus-per-task=2 over a warm-started
#     16-fit sweep (2 chains x 8 windows): files BASE_K.h5 named after the
#     job's out:, per-task checkpoints, bitwise the fits of one `ghfit run`
#     with 4 groups; `ghfit summary` over 3 of the 4 files warns naming the
#     missing slice; GHFIT_SLICES reruns one slice alone;
#  4b. job-file keys win: a job file's checkpoint: and checkpoint_every: are
#     not replaced by GHFIT_CKPT / GHFIT_CKPT_EVERY; --checkpoint-every on the
#     command line is passed on;
#  5. a typo in an option: the job's first step, `ghfit check`, fails it
#     within seconds, before srun, with one `ghfit: error:` line naming the
#     option in its .out; `ghfit check` with the same arguments before sbatch
#     prints the same line;
#  6. the README example in a clean folder: without its data it fails at once
#     with one line saying how to make the data; with the data it runs;
#  7. the installed script (cmake --install) finds the installed binary with
#     no ghfit on PATH and no GHFIT;
#  8. scancel of a running job: it stops, is not requeued, keeps its
#     checkpoint (named after the output); resubmitting the same command
#     resumes and gives the same bits as an uninterrupted fit;
#  9. a requeue by Slurm (scontrol requeue from outside, what PreemptMode=
#     REQUEUE does): the job stops with a checkpoint, Slurm starts it again, it
#     resumes and gives the same bits; `scancel --signal=USR1` (checkpoint now
#     and requeue): the job requeues itself and resumes;
# 10. the time limit: --time=1 with the default --signal=B:USR1@300: the
#     warning is moved to 15 s before the end, the job checkpoints, requeues
#     itself, resumes, and gives the same bits;
# 11. --time=2 does not loop: a 40 s fit gets the warning early, runs on and
#     completes without a requeue.
# usage: batch_slurm.sh GHFIT H5GET WORKDIR BUILDDIR
set -uo pipefail
G=$1; H=$2; W=$3; B=$4
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$SRC/tests/slurm_lib.sh"
t_start=$(date +%s)

fail=0
rm -rf "$W"; mkdir -p "$W"; cd "$W"

# ---- 1. outside Slurm (no cluster needed) ------------------------------------------------
env -u SLURM_JOB_ID bash "$SRC/slurm/ghfit.sbatch" fit > outside.txt 2>&1; rc=$?
[ $rc = 2 ] && grep -q "not inside a Slurm job" outside.txt && [ "$(wc -l < outside.txt)" = 1 ] ||
  die "ghfit.sbatch outside Slurm: exit $rc: $(cat outside.txt)"
env -u SLURM_JOB_ID bash "$SRC/slurm/ghfit-array.sbatch" x.yaml > outside2.txt 2>&1; rc=$?
[ $rc = 2 ] && grep -q "not inside a Slurm job" outside2.txt && [ "$(wc -l < outside2.txt)" = 1 ] ||
  die "ghfit-array.sbatch outside Slurm: exit $rc: $(cat outside2.txt)"

slurm_check_installed
slurm_start "$W/cluster" "${GHFIT_SLURM_TEST_BUDGET:-300}"
sinfo
slurm_job_env "$G"

# ---- data and references ------------------------------------------------------------------
DEMO=(--model gh --dim 4 --n 20000 --seed 42 --mu 0.05 --gamma 0.3,-0.2,0.1,0 --sigma 1 --rho 0.4 --p -1.5 --a 2 --b 1)
"$G" generate "${DEMO[@]}" --out demo.h5 > /dev/null || { echo "FAIL: generate"; exit 1; }
FA=(--data "$W/demo.h5" --model gh --tol 1e-10 --max-iter 400 --quiet --backend cpu)
cat > sweep.yaml <<EOF
data: $W/demo.h5
out: $W/arr/sweep.h5        # array tasks write arr/sweep_K.h5
family: [gh, nig]
tol: 1e-9
windows: {start: 0, length: 2000, step: 2000, count: 8}
warm_start: true
quiet: true
backend: cpu
checkpoint: '$W/arr/ck.h5'  # per array task: arr/ck_K.h5
EOF
mkdir -p arr
cat > keys.yaml <<EOF
data: $W/demo.h5
out: $W/keys.h5
family: nig
quiet: true
backend: cpu
checkpoint: $W/keys.ck.h5
checkpoint_every: 7
EOF

# ---- submit: the slow cases first, then the quick ones -------------------------------------
# 10: the time limit (checkpoint at 45 s of 60, requeue, resume)
j_tl=$(GHFIT_TEST_ITER_SLEEP=4000 sub --ntasks=2 --time=1 --output="$W/tl-%j.out" \
       "$SRC/slurm/ghfit.sbatch" fit "${FA[@]}" --out "$W/tl.h5") || die "sbatch time limit"
# 11: --time=2, a 40 s fit
j_t2=$(GHFIT_TEST_ITER_SLEEP=2000 sub --ntasks=1 --time=2 --output="$W/t2-%j.out" \
       "$SRC/slurm/ghfit.sbatch" fit "${FA[@]}" --out "$W/t2.h5") || die "sbatch --time=2"
# 8 and 9: slow fits with frequent checkpoints, stopped from outside
j_can=$(GHFIT_TEST_ITER_SLEEP=400 GHFIT_CKPT_EVERY=4 sub --ntasks=2 --output="$W/can-%j.out" \
        "$SRC/slurm/ghfit.sbatch" fit "${FA[@]}" --out "$W/can.h5") || die "sbatch cancel"
j_pre=$(GHFIT_TEST_ITER_SLEEP=400 GHFIT_CKPT_EVERY=4 sub --ntasks=2 --output="$W/pre-%j.out" \
        "$SRC/slurm/ghfit.sbatch" fit "${FA[@]}" --out "$W/pre.h5") || die "sbatch preempt"
j_usr=$(GHFIT_TEST_ITER_SLEEP=400 GHFIT_CKPT_EVERY=4 sub --ntasks=2 --output="$W/usr-%j.out" \
        "$SRC/slurm/ghfit.sbatch" fit "${FA[@]}" --out "$W/usr.h5") || die "sbatch usr1"
# 2, 3, 4, 5
j_fit=$(sub --ntasks=2 --output="$W/fit-%j.out" "$SRC/slurm/ghfit.sbatch" fit "${FA[@]}" --out "$W/fit.h5") ||
  die "sbatch --ntasks=2"
j_cpt=$(sub --ntasks=1 --cpus-per-task=2 --output="$W/cpt-%j.out" \
        "$SRC/slurm/ghfit.sbatch" fit "${FA[@]}" --out "$W/cpt.h5") || die "sbatch --ntasks=1 --cpus-per-task=2 refused"
j_arr=$(sub --array=0-3 --cpus-per-task=2 --output="$W/arr-%A_%a.out" "$SRC/slurm/ghfit-array.sbatch" "$W/sweep.yaml") ||
  die "sbatch --array=0-3 --cpus-per-task=2"
j_key=$(GHFIT_CKPT="$W/env.ck.h5" GHFIT_CKPT_EVERY=3 sub --output="$W/key-%j.out" "$SRC/slurm/ghfit.sbatch" run "$W/keys.yaml") ||
  die "sbatch keys"
# after the first: both use the job file's checkpoint, which a live job locks
j_key2=$(GHFIT_CKPT_EVERY=3 sub --dependency=afterany:$j_key --output="$W/key-%j.out" "$SRC/slurm/ghfit.sbatch" run \
         --missing error "$W/keys.yaml" --out "$W/keys2.h5" --checkpoint-every 5) || die "sbatch keys 2"
j_typo=$(sub --ntasks=2 --output="$W/typo-%j.out" "$SRC/slurm/ghfit.sbatch" fit --dtaa "$W/demo.h5" --model gh --out "$W/typo.h5") ||
  die "sbatch typo"
# 6: the README example in a clean folder
mkdir -p clean/jobs && cp "$SRC/jobs/demo.yaml" clean/jobs/
j_rd=$(sbatch --parsable --chdir="$W/clean" --output="$W/clean/readme-%j.out" "$SRC/slurm/ghfit.sbatch" run jobs/demo.yaml) ||
  die "sbatch README example"
# 7: the installed script
cmake --install "$B" --prefix "$W/prefix" > install.txt 2>&1 || { cat install.txt; die "cmake --install"; }
j_inst=$(env -u GHFIT PATH=/usr/local/bin:/usr/bin:/bin sbatch --parsable --chdir="$W" --ntasks=2 --output="$W/inst-%j.out" \
         "$W/prefix/share/ghfit/slurm/ghfit.sbatch" fit "${FA[@]}" --out "$W/inst.h5") || die "sbatch installed script"
echo "submitted: time limit $j_tl, --time=2 $j_t2, cancel $j_can, requeue $j_pre, usr1 $j_usr, fit $j_fit, cpus $j_cpt," \
     "array $j_arr, typo $j_typo, README $j_rd, installed $j_inst"

# 8, 9: stop the two slow fits once they have a checkpoint
for _ in $(seq 1 240); do [ -e can.ckpt.h5 ] && break; sleep 0.25; done
[ -e can.ckpt.h5 ] || die "no checkpoint can.ckpt.h5 from job $j_can"
scancel "$j_can" || die "scancel $j_can"
for _ in $(seq 1 240); do [ -e pre.ckpt.h5 ] && break; sleep 0.25; done
[ -e pre.ckpt.h5 ] || die "no checkpoint pre.ckpt.h5 from job $j_pre"
scontrol requeue "$j_pre" || die "scontrol requeue $j_pre"
for _ in $(seq 1 240); do [ -e usr.ckpt.h5 ] && break; sleep 0.25; done
[ -e usr.ckpt.h5 ] || die "no checkpoint usr.ckpt.h5 from job $j_usr"
scancel --signal=USR1 "$j_usr" || die "scancel --signal=USR1 $j_usr"

# references (while the jobs run)
mpirun -np 2 "$G" fit "${FA[@]}" --out "$W/ref.h5" > ref.txt 2>&1 || { cat ref.txt; die "reference fit"; }
for t in 1 2; do
  OMP_NUM_THREADS=$t mpirun -np 1 "$G" fit "${FA[@]}" --out "$W/ref_t$t.h5" > ref_t$t.txt 2>&1 || die "reference fit, $t threads"
done
# (4 ranks with windows of 2000 rows: 4 one-rank groups, as the 4 array tasks; 2 threads each, as they)
OMP_NUM_THREADS=2 mpirun -np 4 "$G" run sweep.yaml --out "$W/sweep_ref.h5" --checkpoint "$W/sweep_ref.ck.h5" > sweep_ref.txt 2>&1 ||
  { cat sweep_ref.txt; die "reference sweep"; }
fitdump() { # FILE [FIT]: every number of a fit, %.17g (equal text = equal bits)
  local f=$1 n=${2:-gh} a
  for a in loglik n_iter status; do echo "$a $("$H" "$f" /fits/$n $a)"; done
  for a in loglik params/mu params/gamma params/sigma params/p params/a params/b; do echo "$a"; "$H" "$f" /fits/$n/$a; done
}
fitdump ref.h5 > ref.dump
same_as() { # FILE REFDUMP [FIT]
  fitdump "$1" "${3:-gh}" > "$1.dump" 2>&1 && cmp -s "$1.dump" "$2"
}
secs() { local IFS=:; set -- $1; echo $(( 10#$1 * 3600 + 10#$2 * 60 + 10#$3 )); }   # HH:MM:SS

# ---- 5. the typo fails at once ----------------------------------------------------------------
wait_done "$j_typo" 60 || die "typo job $j_typo did not end"
t_typo=$(secs "$(scontrol show job "$j_typo" | grep -o 'RunTime=[^ ]*' | cut -d= -f2)")
show "typo-$j_typo.out"
n=$(grep -c '^ghfit: error:' "typo-$j_typo.out")
[ "$n" = 1 ] && grep '^ghfit: error:' "typo-$j_typo.out" | grep -q -- "--dtaa" ||
  die "typo: expected one 'ghfit: error:' line naming --dtaa, got $n"
[ "$(state_of "$j_typo")" = FAILED ] && scontrol show job "$j_typo" | grep -q 'ExitCode=2:0' ||
  die "typo job: state $(state_of "$j_typo"), expected FAILED with exit code 2"
[ "${t_typo:-99}" -le 10 ] || die "typo job ran ${t_typo:-?} s"
grep -q "^ghfit check (" "typo-$j_typo.out" && ! grep -q "srun --mpi" "typo-$j_typo.out" ||
  die "typo: the job was not stopped by its ghfit check step before srun"
"$G" check fit --dtaa "$W/demo.h5" --model gh --out "$W/typo.h5" > typo_check.txt 2> typo_check.err; rc=$?
[ $rc = 2 ] && [ "$(grep -c . typo_check.err)" = 1 ] && [ "$(cat typo_check.err)" = "$(grep '^ghfit: error:' "typo-$j_typo.out")" ] ||
  die "ghfit check before sbatch: exit $rc, '$(cat typo_check.err)' (the job's line: '$(grep '^ghfit: error:' "typo-$j_typo.out")')"
[ $fail = 0 ] && ok "a typo fails after $t_typo s in the job's ghfit check step (before srun), one error line naming the option, exit 2; ghfit check before sbatch prints the same line"

# ---- 2. --ntasks=2 == mpirun -np 2 ------------------------------------------------------------
wait_done "$j_fit" 120 || die "fit job $j_fit did not end"
show "fit-$j_fit.out"
[ "$(state_of "$j_fit")" = COMPLETED ] || die "fit job state $(state_of "$j_fit")"
same_as fit.h5 ref.dump || die "sbatch --ntasks=2 fit differs from mpirun -np 2"
[ "$("$H" fit.h5 / n_ranks)" = 2 ] || die "the --ntasks=2 fit did not run on 2 ranks"
grep -q -- "--checkpoint $W/fit.ckpt.h5" "fit-$j_fit.out" || die "default checkpoint not named after the output"
[ -e fit.ckpt.h5 ] && die "checkpoint left after the finished job"
[ $fail = 0 ] && ok "sbatch --ntasks=2 fit == mpirun -np 2 fit (bitwise)"

# ---- 3. --ntasks=1 --cpus-per-task=2 ------------------------------------------------------------
wait_done "$j_cpt" 120 || die "cpus-per-task job $j_cpt did not end"
show "cpt-$j_cpt.out"
[ "$(state_of "$j_cpt")" = COMPLETED ] || die "cpus-per-task job state $(state_of "$j_cpt")"
grep -q "1 task(s) on 1 node(s), OMP_NUM_THREADS=2" "cpt-$j_cpt.out" || die "the job did not set OMP_NUM_THREADS=2"
fitdump ref_t2.h5 > ref_t2.dump; fitdump ref_t1.h5 > ref_t1.dump
# the CPU E-step is exact (the same bits on any number of threads): the
# result file records the threads each rank ran
[ "$("$H" cpt.h5 / omp_threads)" = 2 ] || die "--cpus-per-task=2: the fit did not run 2 threads (omp_threads)"
[ "$("$H" ref_t1.h5 / omp_threads)" = 1 ] || die "the 1-thread reference did not run 1 thread (omp_threads)"
same_as cpt.h5 ref_t2.dump || die "--cpus-per-task=2 fit differs from the 2-thread reference"
same_as cpt.h5 ref_t1.dump || die "--cpus-per-task=2 fit differs from the 1-thread reference (the E-step is exact)"
[ "$("$H" cpt.h5 / n_ranks)" = 1 ] || die "--ntasks=1 did not run on 1 rank"
[ $fail = 0 ] && ok "--ntasks=1 --cpus-per-task=2 accepted; 1 rank, 2 threads (omp_threads 2; == 1- and 2-thread references bitwise)"

# ---- 4. the array ------------------------------------------------------------------------------
for k in 0 1 2 3; do wait_done "${j_arr}_$k" 120 || die "array task $k did not end"; done
n=0
for k in 0 1 2 3; do
  show "arr-${j_arr}_$k.out"
  [ "$(state_of "${j_arr}_$k")" = COMPLETED ] || die "array task $k: state $(state_of "${j_arr}_$k")"
  grep -q "OMP_NUM_THREADS=2" "arr-${j_arr}_$k.out" || die "array task $k: not 2 threads"
  grep -q -- "--slice $k/4 --out $W/arr/sweep_$k.h5 --checkpoint $W/arr/ck_$k.h5" "arr-${j_arr}_$k.out" ||
    die "array task $k: output or checkpoint not named after the job file"
  grep -q "^ghfit check: ok: \`ghfit run\` would start 4 fits on 1 rank" "arr-${j_arr}_$k.out" ||
    die "array task $k: no ghfit check step (or not 4 fits)"
  f=arr/sweep_$k.h5
  [ -e $f ] || { die "array task $k wrote no $f"; continue; }
  for fit in $(h5ls $f/fits | awk '{print $1}'); do
    n=$((n + 1))
    [ "$(fitdump $f $fit)" = "$(fitdump sweep_ref.h5 $fit)" ] || die "array fit $fit differs from ghfit run"
  done
done
[ $n = 16 ] || die "the array wrote $n fits, expected 16"
"$G" summary arr/sweep_0.h5 arr/sweep_1.h5 arr/sweep_2.h5 arr/sweep_3.h5 --sort bic > summary.txt 2> summary.err &&
  [ ! -s summary.err ] || die "ghfit summary of the array results"
"$G" summary arr/sweep_0.h5 arr/sweep_1.h5 arr/sweep_3.h5 > summary3.txt 2> summary3.err; rc=$?
[ $rc = 0 ] && [ "$(grep -c . summary3.err)" = 1 ] &&
  grep -q "^ghfit: warning: the files of job [0-9a-f]* hold 3 of its 4 slices: slice 2/4 missing (the table has 12 of the job's 16 fits" summary3.err ||
  { cat summary3.err; die "ghfit summary over 3 of the 4 array files: exit $rc, no warning naming slice 2/4"; }
# one slice again, alone, into other files (GHFIT_SLICES: index = slice)
j_one=$(sub --array=1 --export=ALL,GHFIT_SLICES=4,GHFIT_OUT_PREFIX="$W/arr/again" --output="$W/one-%A_%a.out" \
        "$SRC/slurm/ghfit-array.sbatch" "$W/sweep.yaml") || die "sbatch one slice"
wait_done "${j_one}_1" 60 || die "one-slice task did not end"
show "one-${j_one}_1.out"
[ "$(h5ls arr/again_1.h5/fits 2>/dev/null | awk '{print $1}' | sort)" = "$(h5ls arr/sweep_1.h5/fits | awk '{print $1}' | sort)" ] ||
  die "GHFIT_SLICES=4 --array=1 did not rerun slice 1/4"
[ $fail = 0 ] && ok "sbatch --array=0-3 --cpus-per-task=2: 16 warm-started fits in arr/sweep_K.h5, bitwise one ghfit run with 4 groups; summary over 3 of 4 files warns; one slice rerun alone"

# ---- 4b. job-file keys win -----------------------------------------------------------------------
for j in $j_key $j_key2; do
  wait_done "$j" 60 || die "job $j did not end"
  show "key-$j.out"
  [ "$(state_of "$j")" = COMPLETED ] || die "job $j: state $(state_of "$j")"
done
grep -q "srun .* run $W/keys.yaml$" "key-$j_key.out" ||
  die "the job file's checkpoint keys were replaced by GHFIT_CKPT / GHFIT_CKPT_EVERY"
grep -q "srun .* run --missing error $W/keys.yaml --out $W/keys2.h5 --checkpoint-every 5$" "key-$j_key2.out" ||
  die "--checkpoint-every on the command line was not passed on as given (or the job file after --missing M not found)"
[ $fail = 0 ] && ok "job-file checkpoint keys win over GHFIT_CKPT*; command-line options win over the job file"

# ---- 6. the README example in a clean folder ------------------------------------------------
wait_done "$j_rd" 60 || die "README job $j_rd did not end"
show "clean/readme-$j_rd.out"
[ "$(grep -c 'error' "clean/readme-$j_rd.out")" = 1 ] &&
  grep -q "data file 'results/demo/demo.h5' of jobs/demo.yaml does not exist; make it with: bash scripts/demo.sh" "clean/readme-$j_rd.out" ||
  die "README example without data: expected one line saying how to make the data"
[ "$(state_of "$j_rd")" = FAILED ] || die "README example without data: state $(state_of "$j_rd")"
mkdir -p clean/results/demo && cp demo.h5 clean/results/demo/demo.h5
j_rd2=$(sbatch --parsable --chdir="$W/clean" --output="$W/clean/readme-%j.out" "$SRC/slurm/ghfit.sbatch" run jobs/demo.yaml) ||
  die "sbatch README example"

# ---- 7. the installed script ----------------------------------------------------------------
wait_done "$j_inst" 120 || die "installed-script job $j_inst did not end"
show "inst-$j_inst.out"
grep -q "srun .* $W/prefix/bin/ghfit fit" "inst-$j_inst.out" || die "the installed script did not run the installed binary"
same_as inst.h5 ref.dump || die "the installed script's fit differs from mpirun"
[ $fail = 0 ] && ok "the installed ghfit.sbatch runs the installed binary (no ghfit on PATH, no GHFIT)"

# ---- 8. scancel: stop, no requeue, checkpoint kept; resubmission resumes ---------------------
wait_done "$j_can" 60 || die "cancelled job $j_can did not end"
sleep 3   # a requeue would show now
show "can-$j_can.out"
[ "$(state_of "$j_can")" = CANCELLED ] && [ "$(restarts_of "$j_can")" = 0 ] ||
  die "cancelled job: state $(state_of "$j_can"), restarts $(restarts_of "$j_can"); expected CANCELLED, 0"
grep -q "status 75" "can-$j_can.out" || die "the cancelled job did not stop with status 75"
grep -qi "requeueing" "can-$j_can.out" && die "the cancelled job tried to requeue itself"
[ -e can.ckpt.h5 ] || die "the cancelled job left no checkpoint"
[ -e can.h5 ] && die "the cancelled job wrote a result"
[ $fail = 0 ] && ok "scancel of a running job: stopped (75), CANCELLED, not requeued, checkpoint can.ckpt.h5 kept"
j_can2=$(GHFIT_CKPT_EVERY=4 sub --ntasks=2 --output="$W/can-%j.out" \
         "$SRC/slurm/ghfit.sbatch" fit "${FA[@]}" --out "$W/can.h5") || die "resubmit"

# ---- 8 (end). the resubmission resumes -----------------------------------------------------
wait_done "$j_can2" 120 || die "resubmitted job $j_can2 did not end"
show "can-$j_can2.out"
[ "$(state_of "$j_can2")" = COMPLETED ] || die "resubmitted job: state $(state_of "$j_can2")"
grep -q -- "--checkpoint $W/can.ckpt.h5 --checkpoint-every 4 --resume" "can-$j_can2.out" || die "the resubmitted job did not resume"
same_as can.h5 ref.dump || die "cancelled + resubmitted fit differs from the uninterrupted one"
[ -e can.ckpt.h5 ] && die "checkpoint left after the resumed job"
[ $fail = 0 ] && ok "resubmitting the same command after scancel resumes; same bits as an uninterrupted fit"

# ---- 6 (end). the README example with its data ------------------------------------------------
wait_done "$j_rd2" 60 || die "README job $j_rd2 did not end"
[ "$(state_of "$j_rd2")" = COMPLETED ] && [ -e clean/results/demo/demo-run.h5 ] ||
  { show "clean/readme-$j_rd2.out"; die "README example with its data: state $(state_of "$j_rd2")"; }
grep -q "srun .* run jobs/demo.yaml --checkpoint results/demo/demo-run.ckpt.h5$" "clean/readme-$j_rd2.out" ||
  die "README example: the default checkpoint is not named after the job file's out:"
[ $fail = 0 ] && ok "README example in a clean folder: one line on how to make the data, then it runs"

# ---- 9 (end). requeued by Slurm: resumes -------------------------------------------------------
wait_state "$j_pre" 120 COMPLETED FAILED CANCELLED TIMEOUT || die "requeued job $j_pre did not end"
show "pre-$j_pre.out"
[ "$(state_of "$j_pre")" = COMPLETED ] && [ "$(restarts_of "$j_pre")" = 1 ] ||
  die "requeued job: state $(state_of "$j_pre"), restarts $(restarts_of "$j_pre"); expected COMPLETED, 1"
grep -q "status 75" "pre-$j_pre.out" || die "the requeued job did not stop with status 75"
grep -q -- "--checkpoint $W/pre.ckpt.h5 --checkpoint-every 4 --resume" "pre-$j_pre.out" || die "the requeued job did not resume"
same_as pre.h5 ref.dump || die "requeued fit differs from the uninterrupted one"
[ $fail = 0 ] && ok "requeued by Slurm (as PreemptMode=REQUEUE does): checkpoint, restart, resume, same bits"

wait_state "$j_usr" 120 COMPLETED FAILED CANCELLED TIMEOUT || die "USR1 job $j_usr did not end"
show "usr-$j_usr.out"
[ "$(state_of "$j_usr")" = COMPLETED ] && [ "$(restarts_of "$j_usr")" = 1 ] ||
  die "USR1 job: state $(state_of "$j_usr"), restarts $(restarts_of "$j_usr"); expected COMPLETED, 1"
grep -q "requeueing job $j_usr" "usr-$j_usr.out" || die "scancel --signal=USR1: the job did not requeue itself"
grep -q -- "--checkpoint $W/usr.ckpt.h5 --checkpoint-every 4 --resume" "usr-$j_usr.out" || die "USR1 job did not resume"
same_as usr.h5 ref.dump || die "USR1-requeued fit differs from the uninterrupted one"
[ $fail = 0 ] && ok "scancel --signal=USR1: checkpoint, the job requeues itself, resumes, same bits"

# ---- 11. --time=2 does not loop ------------------------------------------------------------------
wait_state "$j_t2" 150 COMPLETED FAILED CANCELLED TIMEOUT || die "--time=2 job $j_t2 did not end"
show "t2-$j_t2.out"
[ "$(state_of "$j_t2")" = COMPLETED ] && [ "$(restarts_of "$j_t2")" = 0 ] ||
  die "--time=2 job: state $(state_of "$j_t2"), restarts $(restarts_of "$j_t2"); expected COMPLETED, 0"
grep -q "time-limit warning .* moved to 30 s before the end" "t2-$j_t2.out" || die "--time=2: the early warning was not moved"
same_as t2.h5 ref_t1.dump || die "--time=2 fit differs from the 1-thread reference"
[ $fail = 0 ] && ok "--time=2: the early time-limit warning is moved, the fit completes without a requeue"

# ---- 10. the time limit: checkpoint, requeue, resume ---------------------------------------------
wait_state "$j_tl" 200 COMPLETED FAILED CANCELLED TIMEOUT || die "time-limit job $j_tl did not end"
show "tl-$j_tl.out"
[ "$(state_of "$j_tl")" = COMPLETED ] && [ "$(restarts_of "$j_tl")" = 1 ] ||
  die "time-limit job: state $(state_of "$j_tl"), restarts $(restarts_of "$j_tl"); expected COMPLETED, 1"
grep -q "moved to 15 s before the end" "tl-$j_tl.out" || die "time limit: the warning was not moved to 15 s before the end"
grep -q "requeueing job $j_tl" "tl-$j_tl.out" || die "time limit: the job did not requeue itself"
grep -qi "failed" "tl-$j_tl.out" && die "time limit: a misleading 'failed' message"
grep -q -- "--checkpoint $W/tl.ckpt.h5 --resume" "tl-$j_tl.out" || die "time limit: the requeued job did not resume"
same_as tl.h5 ref.dump || die "time-limit fit differs from the uninterrupted one"
[ -e tl.ckpt.h5 ] && die "checkpoint left after the finished job"
[ $fail = 0 ] && ok "time limit (--time=1): warning at 45 s, checkpoint, requeue, resume, same bits"

echo "batch_slurm: wall time $(( $(date +%s) - t_start )) s"
[ $fail -eq 0 ] && echo "batch_slurm: all passed" || echo "batch_slurm: FAILED"
exit $fail
