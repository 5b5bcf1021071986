# tests/slurm_lib.sh - a one-node Slurm for the tests (source it; bash).
#
# slurmctld + slurmd + munge from Debian, started without systemd as in
# hpc.md Appendix A, on their own ports, state directories and pid files
# (under WORKDIR and /run/ghfit-test-slurm), with AuthInfo=cred_expire=10 so
# that a requeued job starts again after about 20 s.  One test cluster per
# machine: slurm_start takes a lock that concurrent runs (several build trees)
# wait for.  Needs root and `GHFIT_WITH_SLURM=1 scripts/install-deps.sh`.
#
#   slurm_check_installed          exit 77 (ctest skip) when Slurm/munge/root are missing
#   slurm_start WORKDIR BUDGET_S   start the daemons (stopped on EXIT, also on failure);
#                                  a watchdog fails the test after BUDGET_S seconds
#   state_of JOB, restarts_of JOB, reason_of JOB, wait_done JOB TIMEOUT_S
#   wait_state JOB TIMEOUT_S STATE...   wait until the job is in one of the states
#   slurm_job_env GHFIT            export what the jobs' ghfit.sbatch and mpirun need
#   sub SBATCH-ARGS...             sbatch --parsable in $W (the job id on stdout)
#   die MSG, ok MSG, show FILE     a failure (sets fail=1), a pass, a file's text
#
# Every daemon started here is stopped at the end (munged only when started
# here: its pid file is then $SLURM_RUN/munge/munged.pid); daemons left by an earlier
# run are stopped first.  The daemons do not inherit the lock.

SLURM_RUN=/run/ghfit-test-slurm

slurm_check_installed() {
  local b
  for b in slurmctld slurmd munged; do
    [ -x /usr/sbin/$b ] || { echo "SKIP: /usr/sbin/$b missing (GHFIT_WITH_SLURM=1 scripts/install-deps.sh)"; exit 77; }
  done
  for b in sbatch scontrol squeue sinfo scancel munge; do
    command -v $b > /dev/null || { echo "SKIP: $b missing"; exit 77; }
  done
  [ "$(id -u)" = 0 ] || { echo "SKIP: needs root to start slurmd"; exit 77; }
}

_slurm_stop_pidfile() { # stop the daemon whose pid is in $1 (only if it is still that program)
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

slurm_stop() {
  # cancel what is still queued or running on the test cluster, then stop the daemons
  if [ -s $SLURM_RUN/slurmctld.pid ] && [ -n "${SLURM_CONF:-}" ] && [ -e "$SLURM_CONF" ]; then
    timeout 10 scancel --quiet --user=root 2> /dev/null && sleep 1
  fi
  _slurm_stop_pidfile $SLURM_RUN/slurmd.pid slurmd
  _slurm_stop_pidfile $SLURM_RUN/slurmctld.pid slurmctld
  _slurm_stop_pidfile $SLURM_RUN/munge/munged.pid munged
  return 0
}

slurm_start() { # WORKDIR BUDGET_S
  local W=$1 budget=$2 host cpus mem
  mkdir -p "$SLURM_RUN"
  exec 9> "$SLURM_RUN/lock"
  flock -w 300 9 || { echo "FAIL: another Slurm test holds $SLURM_RUN/lock"; exit 1; }
  export SLURM_CONF=$W/slurm.conf
  slurm_stop   # leftovers of an earlier run
  mkdir -p "$W/state" "$W/spool" "$W/log"
  trap 'echo "--- stopping the Slurm daemons"; slurm_stop; [ -n "${_slurm_watchdog:-}" ] && kill $_slurm_watchdog 2>/dev/null' EXIT
  # a watchdog well inside ctest's timeout, so that the daemons are always stopped
  # (its output goes to /dev/null: a sleep holding ctest's pipe would delay the end)
  ( exec > /dev/null 2>&1; sleep "$budget" & s=$!; trap 'kill $s; exit 0' TERM; wait $s && kill -TERM $$ ) &
  _slurm_watchdog=$!
  trap 'echo "FAIL: the time budget of '"$budget"' s was exceeded"; exit 1' TERM

  # munge: reuse a working one, else start it
  if ! munge -n 2>/dev/null | unmunge > /dev/null 2>&1; then
    mkdir -p /run/munge; chown munge:munge /run/munge; chmod 755 /run/munge
    [ -s /etc/munge/munge.key ] || { echo "FAIL: /etc/munge/munge.key missing"; exit 1; }
    # (the daemons must not inherit the lock's descriptor: 9>&-)
    mkdir -p $SLURM_RUN/munge; chown munge:munge $SLURM_RUN/munge
    runuser -u munge -- /usr/sbin/munged --pid-file=$SLURM_RUN/munge/munged.pid 9>&- ||
      { echo "FAIL: munged does not start"; exit 1; }
    for _ in $(seq 1 50); do munge -n 2>/dev/null | unmunge > /dev/null 2>&1 && break; sleep 0.1; done
  fi
  munge -n | unmunge > /dev/null || { echo "FAIL: munge does not work"; exit 1; }

  # (nproc honours OMP_NUM_THREADS, which ctest sets to 1: ask for every online CPU)
  host=$(hostname -s); cpus=$(getconf _NPROCESSORS_ONLN)
  mem=$(( $(awk '/MemTotal/{print $2}' /proc/meminfo) / 1024 - 512 ))
  cat > "$SLURM_CONF" <<EOC
ClusterName=ghfittest
SlurmctldHost=${host}
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
SlurmctldPidFile=$SLURM_RUN/slurmctld.pid
SlurmdPidFile=$SLURM_RUN/slurmd.pid
SlurmctldLogFile=$W/log/slurmctld.log
SlurmdLogFile=$W/log/slurmd.log
KillWait=10
NodeName=${host} NodeAddr=127.0.0.1 CPUs=${cpus} RealMemory=${mem} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOC
  /usr/sbin/slurmctld -i -f "$SLURM_CONF" 9>&- || { echo "FAIL: slurmctld does not start"; cat "$W/log/slurmctld.log"; exit 1; }
  /usr/sbin/slurmd -f "$SLURM_CONF" -N "$host" 9>&- || { echo "FAIL: slurmd does not start"; cat "$W/log/slurmd.log"; exit 1; }
  for _ in $(seq 1 100); do sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)' && break; sleep 0.2; done
  sinfo -h -o %t | grep -qE '^(idle|mix|alloc)' || { echo "FAIL: the node is not up"; tail -20 "$W"/log/*.log; exit 1; }
}

_job_field() { scontrol show job "$1" 2>/dev/null | grep -o "$2=[^ ]*" | head -1 | cut -d= -f2; }
state_of() { _job_field "$1" JobState; }
restarts_of() { _job_field "$1" Restarts; }
reason_of() { _job_field "$1" Reason; }
wait_state() { # JOB TIMEOUT_S STATE...: wait until the job is in one of the states ("" = gone)
  local j=$1 t=$2 s x; shift 2
  for _ in $(seq 1 $((t * 4))); do
    s=$(state_of "$j")
    for x in "$@"; do [ "$s" = "$x" ] && return 0; done
    sleep 0.25
  done
  return 1
}
wait_done() { wait_state "$1" "$2" COMPLETED FAILED CANCELLED TIMEOUT NODE_FAIL OUT_OF_MEMORY PREEMPTED ""; }

# The test's own reporting (the test sets fail=0 first).
die() { echo "FAIL: $*"; fail=1; }
ok() { echo "ok   $*"; }
show() { echo "--- $1"; cat "$1"; }
sub() { sbatch --parsable --chdir="$W" "$@"; }

# What the jobs need: the binary for ghfit.sbatch, mpirun as root with
# oversubscription, and no HDF5 file locking.
slurm_job_env() {
  export GHFIT=$1 OMPI_MCA_btl_vader_single_copy_mechanism=none
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 HDF5_USE_FILE_LOCKING=FALSE
}
