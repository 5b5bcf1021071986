#!/usr/bin/env bash
# ghfit.sbatch with the commands that use a fitted law (eval, gof, sample,
# risk: no checkpoint) on a real one-node Slurm (tests/slurm_lib.sh; skipped
# without Slurm, as batch_slurm).  The jobs run side by side:
#  1. `ghfit.sbatch gof --model FIT --data X --out G.h5` (1 task) completes,
#     exit 0, with `ghfit check gof` as its first step and no checkpoint
#     argument; G.h5 equals `mpirun -np 1 ghfit gof` (every statistic, QQ
#     table and PIT, %.17g);
#  2. `ghfit.sbatch eval` on 2 tasks completes; its scores equal those of
#     `mpirun -np 1 ghfit eval` (per row: the same bits on any number of ranks);
#  3. a typo in an option fails the job within seconds in its check step,
#     before srun, with ghfit's one `ghfit: error:` line naming the option
#     and exit 2;
#  4. a running `gof --bootstrap` on 2 tasks: the time-limit warning
#     (USR1 to the batch script) is only a note (the job runs on, no
#     requeue); then scancel: the job ends CANCELLED, is not requeued, and
#     leaves no output, no temporary file and no lock file;
#  5. a requeue by Slurm (scontrol requeue, what PreemptMode=REQUEUE does)
#     of a running `gof --bootstrap 40`: ghfit ends, Slurm starts the job
#     again, the command runs afresh and its output equals `mpirun -np 1
#     ghfit gof --bootstrap 40` (bootstrap p-values included).
# usage: batch_slurm_post.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$SRC/tests/slurm_lib.sh"
t_start=$(date +%s)

fail=0
rm -rf "$W"; mkdir -p "$W"; cd "$W"

slurm_check_installed
slurm_start "$W/cluster" "${GHFIT_SLURM_TEST_BUDGET:-120}"
slurm_job_env "$G"

# ---- a tiny fit ------------------------------------------------------------------------------
"$G" generate --model gh --dim 2 --n 2000 --seed 3 --p -1 --a 1.5 --b 0.7 --gamma 0.2,-0.1 --out d.h5 > /dev/null ||
  { echo "FAIL: generate"; exit 1; }
mpirun -np 1 "$G" fit --data d.h5 --model nig --out f.h5 --quiet --backend cpu > fit.txt 2>&1 ||
  { cat fit.txt; echo "FAIL: the fit"; exit 1; }
S=$SRC/slurm/ghfit.sbatch

# ---- submit ------------------------------------------------------------------------------------
j_can=$(sub --ntasks=2 --output="$W/can-%j.out" "$S" gof --model f.h5 --data d.h5 --out C.h5 --bootstrap 100000) ||
  die "sbatch gof --bootstrap"
j_req=$(sub --ntasks=1 --output="$W/req-%j.out" "$S" gof --model f.h5 --data d.h5 --out R.h5 --bootstrap 40) ||
  die "sbatch gof --bootstrap 40"
j_gof=$(sub --ntasks=1 --output="$W/gof-%j.out" "$S" gof --model f.h5 --data d.h5 --out G.h5) || die "sbatch gof"
j_ev=$(sub --ntasks=2 --output="$W/ev-%j.out" "$S" eval --model f.h5 --data d.h5 --out E.h5) || die "sbatch eval"
j_typo=$(sub --ntasks=2 --output="$W/typo-%j.out" "$S" gof --modle f.h5 --data d.h5 --out T.h5) || die "sbatch typo"

# 5: requeue the bootstrap once it runs
for _ in $(seq 1 240); do grep -q "bootstrap: .* replicates" "req-$j_req.out" 2> /dev/null && break; sleep 0.25; done
grep -q "bootstrap: .* replicates" "req-$j_req.out" || die "the gof --bootstrap 40 job $j_req did not start its bootstrap"
scontrol requeue "$j_req" || die "scontrol requeue $j_req"

# references, while the jobs run
mpirun -np 1 "$G" gof --model f.h5 --data d.h5 --out ref_gof.h5 > ref_gof.txt 2>&1 || { cat ref_gof.txt; die "reference gof"; }
mpirun -np 1 "$G" gof --model f.h5 --data d.h5 --out ref_boot.h5 --bootstrap 40 > ref_boot.txt 2>&1 ||
  { cat ref_boot.txt; die "reference gof --bootstrap"; }
mpirun -np 1 "$G" eval --model f.h5 --data d.h5 --out ref_ev.h5 > ref_ev.txt 2>&1 || { cat ref_ev.txt; die "reference eval"; }
dump() { # FILE DATASET...: every number, %.17g (equal text = equal bits)
  local f=$1 x; shift
  for x in "$@"; do echo "$x"; "$H" "$f" "$x" || echo "MISSING $x"; done
}
GOF_KEYS=(/margins/ks /margins/ad /margins/cvm /margins/ks_p /margins/ad_p /margins/cvm_p /margins/qq /margins/pit
          /radial/ks /radial/ad /radial/cvm /radial/ks_p /radial/ad_p /radial/cvm_p /radial/qq /radial/pit)
BOOT_KEYS=("${GOF_KEYS[@]}" /margins/ks_p_boot /margins/ad_p_boot /margins/cvm_p_boot /radial/ks_p_boot
           /radial/ad_p_boot /radial/cvm_p_boot)
EV_KEYS=(/logpdf /mahalanobis /e_y /e_invy /nonfinite)

# ---- 4. the warning is a note, scancel ends the job with nothing left ----------------------------
for _ in $(seq 1 240); do grep -q "bootstrap: .* replicates" "can-$j_can.out" 2> /dev/null && break; sleep 0.25; done
grep -q "bootstrap: .* replicates" "can-$j_can.out" || die "the gof --bootstrap job $j_can did not start its bootstrap"
scancel --batch --signal=USR1 "$j_can" || die "scancel --batch --signal=USR1 $j_can"
sleep 2
[ "$(state_of "$j_can")" = RUNNING ] || die "after the time-limit warning the gof job is $(state_of "$j_can"), not RUNNING"
ls C.h5.lock > /dev/null 2>&1 || die "no lock file C.h5.lock while gof runs (the check below would prove nothing)"
scancel "$j_can" || die "scancel $j_can"
wait_done "$j_can" 60 || die "cancelled job $j_can did not end"
sleep 3   # a requeue would show now
show "can-$j_can.out"
[ "$(state_of "$j_can")" = CANCELLED ] && [ "$(restarts_of "$j_can")" = 0 ] ||
  die "cancelled gof: state $(state_of "$j_can"), restarts $(restarts_of "$j_can"); expected CANCELLED, 0"
grep -q "note: time-limit warning .*: ghfit gof has no checkpoint and runs on" "can-$j_can.out" ||
  die "the time-limit warning left no note"
grep -q "note: SIGTERM (scancel or preemption): ghfit gof stops, leaving no output" "can-$j_can.out" ||
  die "the cancel left no note"
grep -qi "requeueing\|--checkpoint\|--resume" "can-$j_can.out" && die "a checkpoint or a requeue for gof"
left=$(ls -A | grep '^C\.h5')
[ -z "$left" ] || die "the cancelled gof left: $left"
[ $fail = 0 ] && ok "gof --bootstrap: the time-limit warning is a note (runs on); scancel: CANCELLED, not requeued, no output, temporary or lock file left"

# ---- 3. the typo fails at once ----------------------------------------------------------------
wait_done "$j_typo" 60 || die "typo job $j_typo did not end"
show "typo-$j_typo.out"
t_typo=$(scontrol show job "$j_typo" | grep -o 'RunTime=[^ ]*' | cut -d= -f2)
n=$(grep -c '^ghfit: error:' "typo-$j_typo.out")
[ "$n" = 1 ] && grep '^ghfit: error:' "typo-$j_typo.out" | grep -q -- "--modle" ||
  die "typo: expected one 'ghfit: error:' line naming --modle, got $n"
[ "$(state_of "$j_typo")" = FAILED ] && scontrol show job "$j_typo" | grep -q 'ExitCode=2:0' ||
  die "typo job: state $(state_of "$j_typo"), expected FAILED with exit code 2"
case "$t_typo" in 00:00:0[0-9]|00:00:10) ;; *) die "typo job ran $t_typo" ;; esac
grep -q "^ghfit check (" "typo-$j_typo.out" && ! grep -q "srun --mpi" "typo-$j_typo.out" ||
  die "typo: the job was not stopped by its ghfit check step before srun"
ls T.h5* > /dev/null 2>&1 && die "typo: files left: $(ls T.h5*)"
[ $fail = 0 ] && ok "gof with a typo fails after $t_typo in the job's check step (before srun): one error line naming the option, exit 2"

# ---- 1. gof == mpirun -np 1 gof --------------------------------------------------------------------
wait_done "$j_gof" 60 || die "gof job $j_gof did not end"
show "gof-$j_gof.out"
[ "$(state_of "$j_gof")" = COMPLETED ] && scontrol show job "$j_gof" | grep -q 'ExitCode=0:0' ||
  die "gof job: state $(state_of "$j_gof"), expected COMPLETED with exit code 0"
grep -q "^ghfit check: ok: \`ghfit gof\` would check 2000 rows" "gof-$j_gof.out" || die "gof: no ghfit check step"
grep -q "srun .* gof --model f.h5 --data d.h5 --out G.h5$" "gof-$j_gof.out" || die "gof: not run with its own arguments only"
[ "$(dump G.h5 "${GOF_KEYS[@]}")" = "$(dump ref_gof.h5 "${GOF_KEYS[@]}")" ] || die "sbatch gof differs from mpirun -np 1 gof"
[ $fail = 0 ] && ok "sbatch gof == mpirun -np 1 gof (every statistic, QQ table and PIT, %.17g); exit 0"

# ---- 2. eval on 2 tasks == mpirun -np 1 eval -----------------------------------------------------
wait_done "$j_ev" 60 || die "eval job $j_ev did not end"
show "ev-$j_ev.out"
[ "$(state_of "$j_ev")" = COMPLETED ] && scontrol show job "$j_ev" | grep -q 'ExitCode=0:0' ||
  die "eval job: state $(state_of "$j_ev"), expected COMPLETED with exit code 0"
grep -q "2 task(s) on 1 node(s)" "ev-$j_ev.out" || die "eval: not 2 tasks"
[ "$(dump E.h5 "${EV_KEYS[@]}")" = "$(dump ref_ev.h5 "${EV_KEYS[@]}")" ] || die "sbatch --ntasks=2 eval differs from mpirun -np 1 eval"
[ $fail = 0 ] && ok "sbatch --ntasks=2 eval == mpirun -np 1 eval (every score, %.17g); exit 0"

# ---- 5. requeued by Slurm: runs afresh, the same output ------------------------------------------
wait_state "$j_req" 120 COMPLETED FAILED CANCELLED TIMEOUT || die "requeued job $j_req did not end"
show "req-$j_req.out"
[ "$(state_of "$j_req")" = COMPLETED ] && [ "$(restarts_of "$j_req")" = 1 ] ||
  die "requeued gof: state $(state_of "$j_req"), restarts $(restarts_of "$j_req"); expected COMPLETED, 1"
grep -q "note: SIGTERM (scancel or preemption): ghfit gof stops" "req-$j_req.out" || die "requeued gof: no note of the stop"
[ "$(grep -c "srun .* gof --model f.h5 --data d.h5 --out R.h5 --bootstrap 40$" "req-$j_req.out")" = 2 ] ||
  die "requeued gof: not run twice with its own arguments only"
[ "$(dump R.h5 "${BOOT_KEYS[@]}")" = "$(dump ref_boot.h5 "${BOOT_KEYS[@]}")" ] ||
  die "requeued gof --bootstrap differs from mpirun -np 1 gof --bootstrap"
left=$(ls -A | grep '^R\.h5.')
[ -z "$left" ] || die "the requeued gof left: $left"
[ $fail = 0 ] && ok "gof --bootstrap requeued by Slurm: stopped, restarted, run afresh; == mpirun -np 1 (p_boot included)"

echo "batch_slurm_post: wall time $(( $(date +%s) - t_start )) s"
[ $fail -eq 0 ] && echo "batch_slurm_post: all passed" || echo "batch_slurm_post: FAILED"
exit $fail
