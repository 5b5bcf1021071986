#!/usr/bin/env bash
# The Slurm scripts on a real one-node Slurm (slurmctld + slurmd + munge from
# Debian, started here without systemd as in hpc.md Appendix A; needs root and
# scripts/install-deps.sh with GHFIT_WITH_SLURM=1; installs nothing):
#  1. slurm/ghfit.sbatch with 2 tasks (srun --mpi=pmix) fits the demo data set:
#     the result equals `mpirun -np 2 ghfit fit` bitwise;
#  2. slurm/ghfit-array.sbatch with --array=0-2 runs a 6-fit sweep in 3 slices:
#     3 result files, together the 6 fits of `ghfit run` on the whole job;
#  3. preemption: a running fit job is signalled (scancel --signal=USR1), writes
#     its checkpoint, exits 75, requeues itself, resumes (restart count 1) and
#     ends with the same result as the uninterrupted fit.
# The daemons use their own configuration, ports, state and pid files (under
# WORKDIR and /run/ghfit-test-slurm); daemons left by an earlier run of this
# test are stopped first; every daemon started here is stopped at the end, also
# on failure.  Exit 77 (skipped) when Slurm or munge is not installed or not root.
# usage: batch_slurm.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
SRC=$(cd "$(dirname "$0")/.." && pwd)
for b in slurmctld slurmd munged; do
  [ -x /usr/sbin/$b ] || { echo "SKIP: /usr/sbin/$b missing (GHFIT_WITH_SLURM=1 scripts/install-deps.sh)"; exit 77; }
done
for b in sbatch scontrol squeue sinfo munge; do
  command -v $b > /dev/null || { echo "SKIP: $b missing"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to start slurmd"; exit 77; }

RUN=/run/ghfit-test-slurm
mkdir -p "$RUN"
# one test cluster per machine: concurrent runs (several build trees) take turns
exec 9> "$RUN/lock"
flock -w 200 9 || { echo "FAIL: another batch_slurm run holds $RUN/lock"; exit 1; }
stop_pidfile() { # stop the daemon whose pid is in $1 (only if it is still that program)
  local f=$1 prog=$2 pid
  [ -s "$f" ] || return 0
  pid=$(cat "$f")
  if [ -n "$pid" ] && [ -r /proc/$pid/comm ] && [ "$(cat /proc/$pid/comm)" = "$prog" ]; then
    kill "$pid" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
  fi
  rm -f "$f"
}
stop_all() {
  # cancel what is still queued or running on the test cluster, then stop the daemons
  if [ -s $RUN/slurmctld.pid ] && [ -e "$W/slurm.conf" ]; then
    SLURM_CONF="$W/slurm.conf" timeout 10 scancel --quiet --user=root 2> /dev/null && sleep 1
  fi
  stop_pidfile $RUN/slurmd.pid slurmd
  stop_pidfile $RUN/slurmctld.pid slurmctld
  [ -e $RUN/munged.ours ] && { stop_pidfile /run/munge/munged.pid munged; rm -f $RUN/munged.ours; }
}
stop_all   # leftovers of an earlier run
rm -rf "$W"; mkdir -p "$W/state" "$W/spool" "$W/log"
cd "$W"
trap 'echo "--- stopping the Slurm daemons"; stop_all; [ -n "${watchdog:-}" ] && kill $watchdog 2>/dev/null' EXIT
# a watchdog well inside ctest's timeout, so that the daemons are always stopped
# (its output goes to /dev/null: a sleep holding ctest's pipe would delay the end)
budget=${GHFIT_SLURM_TEST_BUDGET:-240}
( exec > /dev/null 2>&1; sleep "$budget" & s=$!; trap 'kill $s; exit 0' TERM; wait $s && kill -TERM $$ ) &
watchdog=$!
trap 'echo "FAIL: the time budget of $budget s was exceeded"; exit 1' TERM

# ---- munge: reuse a working one, else start it -------------------------------------------
if ! munge -n 2>/dev/null | unmunge > /dev/null 2>&1; then
  mkdir -p /run/munge; chown munge:munge /run/munge; chmod 755 /run/munge
  [ -s /etc/munge/munge.key ] || { echo "FAIL: /etc/munge/munge.key missing"; exit 1; }
  runuser -u munge -- /usr/sbin/munged || { echo "FAIL: munged does not start"; exit 1; }
  touch $RUN/munged.ours
  for _ in $(seq 1 50); do munge -n 2>/dev/null | unmunge > /dev/null 2>&1 && break; sleep 0.1; done
fi
munge -n | unmunge > /dev/null || { echo "FAIL: munge does not work"; exit 1; }

# ---- slurm.conf (own ports, dirs, pid files) ---------------------------------------------
# (nproc honours OMP_NUM_THREADS, which ctest sets to 1: ask for every online CPU)
HOST=$(hostname -s); CPUS=$(getconf _NPROCESSORS_ONLN)
MEM=$(( $(awk '/MemTotal/{print $2}' /proc/meminfo) / 1024 - 512 ))
cat > slurm.conf <<EOF
ClusterName=ghfittest
SlurmctldHost=${HOST}
SlurmctldPort=6917
SlurmdPort=6918
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=cred_expire=10
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SchedulerParameters=sched_interval=2
StateSaveLocation=$W/state
SlurmdSpoolDir=$W/spool
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$W/log/slurmctld.log
SlurmdLogFile=$W/log/slurmd.log
KillWait=10
NodeName=${HOST} NodeAddr=127.0.0.1 CPUs=${CPUS} RealMemory=${MEM} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
export SLURM_CONF=$W/slurm.conf
/usr/sbin/slurmctld -i -f "$SLURM_CONF" || { echo "FAIL: slurmctld does not start"; cat log/slurmctld.log; exit 1; }
/usr/sbin/slurmd -f "$SLURM_CONF" -N "$HOST" || { echo "FAIL: slurmd does not start"; cat log/slurmd.log; exit 1; }
for _ in $(seq 1 100); do sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)' && break; sleep 0.2; done
sinfo || true
sinfo -h -o %t | grep -qE '^(idle|mix|alloc)' || { echo "FAIL: the node is not up"; tail -20 log/slurmctld.log log/slurmd.log; exit 1; }

fail=0
die() { echo "FAIL: $*"; fail=1; }
state_of() { scontrol show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | head -1 | cut -d= -f2; }
wait_done() { # JOBID TIMEOUT: wait until the job has left the queue (or finished)
  local s
  for _ in $(seq 1 $(($2 * 2))); do
    s=$(state_of "$1")
    case "$s" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|"") return 0 ;; esac
    sleep 0.5
  done
  return 1
}
export GHFIT=$G OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 HDF5_USE_FILE_LOCKING=FALSE

# ---- data and references ------------------------------------------------------------------
"$G" generate --model gh --dim 4 --n 20000 --seed 42 --mu 0.05 --gamma 0.3,-0.2,0.1,0 --sigma 1 --rho 0.4 \
  --p -1.5 --a 2 --b 1 --out demo.h5 > /dev/null || { echo "FAIL: generate"; exit 1; }
FITARGS=(--data "$W/demo.h5" --model gh --tol 1e-10 --max-iter 400 --quiet --backend cpu)
mpirun -np 2 "$G" fit "${FITARGS[@]}" --out "$W/ref.h5" > ref.txt 2>&1 || { cat ref.txt; die "reference fit"; }
cat > sweep.yaml <<EOF
data: $W/demo.h5
family: [gh, nig]
tol: 1e-9
windows: {start: 0, length: 4000, step: 4000, count: 3}
quiet: true
backend: cpu
EOF
mpirun -np 2 "$G" run sweep.yaml --out "$W/sweep_ref.h5" > sweep_ref.txt 2>&1 || { cat sweep_ref.txt; die "reference sweep"; }

# the scripts refuse to run outside Slurm
env -u SLURM_JOB_ID bash "$SRC/slurm/ghfit.sbatch" fit > outside.txt 2>&1; rc=$?
[ $rc = 2 ] && grep -q "not inside a Slurm job" outside.txt || die "ghfit.sbatch outside Slurm: exit $rc"
env -u SLURM_JOB_ID bash "$SRC/slurm/ghfit-array.sbatch" x.yaml > outside2.txt 2>&1; rc=$?
[ $rc = 2 ] && grep -q "not inside a Slurm job" outside2.txt || die "ghfit-array.sbatch outside Slurm: exit $rc"

# ---- 1 + 2: submit the fit (2 tasks) and the array (3 tasks) ----------------------------
j1=$(sbatch --parsable --chdir="$W" --ntasks=2 --output="$W/fit-%j.out" \
      "$SRC/slurm/ghfit.sbatch" fit "${FITARGS[@]}" --out "$W/slurm_fit.h5") || die "sbatch fit"
j2=$(sbatch --parsable --chdir="$W" --array=0-2 --output="$W/arr-%A_%a.out" --export=ALL,GHFIT_OUT_PREFIX="$W/arr" \
      "$SRC/slurm/ghfit-array.sbatch" "$W/sweep.yaml") || die "sbatch array"
echo "submitted fit job $j1, array job $j2"
wait_done "$j1" 120 || die "fit job $j1 did not finish"
for k in 0 1 2; do wait_done "${j2}_$k" 120 || die "array task $k did not finish"; done
squeue || true
cat "$W"/fit-"$j1".out
[ "$(state_of "$j1")" = COMPLETED ] || [ -z "$(state_of "$j1")" ] || die "fit job state $(state_of "$j1")"
grep -q "srun --mpi=pmix" "$W/fit-$j1.out" || die "the fit script did not print its command"
for a in loglik n_iter; do
  x=$("$H" ref.h5 /fits/gh $a); y=$("$H" slurm_fit.h5 /fits/gh $a)
  [ -n "$x" ] && [ "$x" = "$y" ] || die "slurm fit $a: $y != mpirun $x"
done
[ "$("$H" slurm_fit.h5 / n_ranks)" = 2 ] || die "slurm fit did not run on 2 ranks"
"$H" ref.h5 /fits/gh/params/sigma > a.txt; "$H" slurm_fit.h5 /fits/gh/params/sigma > b.txt
cmp -s a.txt b.txt || die "slurm fit parameters differ from mpirun"
echo "ok   sbatch fit (2 tasks) == mpirun -np 2 fit: loglik $("$H" slurm_fit.h5 /fits/gh loglik)"
n=0
for k in 0 1 2; do
  f=arr_$k.h5
  [ -e $f ] || { die "array task $k wrote no $f"; cat "$W"/arr-"${j2}"_$k.out; continue; }
  for fit in $(h5ls $f/fits | awk '{print $1}'); do
    n=$((n + 1))
    [ "$("$H" $f /fits/$fit loglik)" = "$("$H" sweep_ref.h5 /fits/$fit loglik)" ] || die "array fit $fit differs"
  done
done
[ $n = 6 ] || die "the array wrote $n fits, expected 6"
"$G" summary arr_0.h5 arr_1.h5 arr_2.h5 --sort bic || die "ghfit summary of the array results"
echo "ok   sbatch --array=0-2: 6 fits in 3 files, equal to ghfit run"

# ---- 3: preemption -> checkpoint -> requeue -> resume -----------------------------------
j3=$(GHFIT_TEST_ITER_SLEEP=150 GHFIT_CKPT_EVERY=4 sbatch --parsable --chdir="$W" --ntasks=2 \
      --output="$W/pre-%j.out" "$SRC/slurm/ghfit.sbatch" fit "${FITARGS[@]}" --out "$W/pre.h5") || die "sbatch preempt"
ck="$W/ghfit-ckpt-$j3.h5"
for _ in $(seq 1 240); do [ -e "$ck" ] && break; sleep 0.25; done
[ -e "$ck" ] || die "no checkpoint from job $j3"
sleep 1
scancel --signal=USR1 "$j3" || die "scancel --signal"
echo "signalled job $j3"
# it requeues (same id, restart count 1) and resumes
ok=0
for _ in $(seq 1 240); do
  s=$(state_of "$j3"); r=$(scontrol show job "$j3" 2>/dev/null | grep -o 'Restarts=[0-9]*' | cut -d= -f2)
  if [ "$s" = COMPLETED ] && [ "${r:-0}" -ge 1 ]; then ok=1; break; fi
  case "$s" in FAILED|CANCELLED|TIMEOUT) break ;; esac
  sleep 0.5
done
cat "$W/pre-$j3.out"
[ $ok = 1 ] || die "job $j3 did not complete after a requeue (state $(state_of "$j3"))"
grep -q "status 75" "$W/pre-$j3.out" || die "no exit status 75 in the job log"
grep -q "requeueing" "$W/pre-$j3.out" || die "the job did not requeue itself"
grep -q -- "--resume" "$W/pre-$j3.out" || die "the requeued job did not pass --resume"
for a in loglik n_iter; do
  x=$("$H" ref.h5 /fits/gh $a); y=$("$H" pre.h5 /fits/gh $a)
  [ -n "$y" ] && [ "$x" = "$y" ] || die "preempted fit $a: $y != $x"
done
"$H" pre.h5 /fits/gh/params/sigma > c.txt
cmp -s a.txt c.txt || die "preempted fit parameters differ"
[ -e "$ck" ] && die "checkpoint left after the finished job"
[ $fail = 0 ] && echo "ok   preempted job: checkpoint, exit 75, requeue, resume, same result"

[ $fail -eq 0 ] && echo "batch_slurm: all passed" || echo "batch_slurm: FAILED"
exit $fail
