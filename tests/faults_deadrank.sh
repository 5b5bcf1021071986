#!/usr/bin/env bash
# A rank that dies or hangs during a sweep (`ghfit run`) ends the job promptly:
#  1. SIGKILL of rank 1, then of rank 0, mid-sweep (2 ranks, two groups), and
#     of a non-leader rank of a 2-rank group (4 ranks): the job ends within
#     seconds with a non-zero status and at most one "ghfit: error:" line; no
#     result file; the checkpoint stays resumable (bitwise equal to an
#     uninterrupted sweep);
#  2. SIGSTOP of a rank (a hung peer, which no launcher ends): the other
#     ranks notice its silence (GHFIT_PEER_TIMEOUT=4) and end the job, exit 1,
#     one error line.
# usage: faults_deadrank.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
SRC=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$W"; mkdir -p "$W/in"; cd "$W"
. "$SRC/tests/faults_lib.sh"

"$G" generate --model gh --dim 3 --n 12000 --seed 5 --p -1 --a 1.5 --b 0.7 --gamma 0.2,-0.1,0 --out in/d.h5 > /dev/null \
  || { echo "cannot generate"; exit 1; }
snapshot in > in.sha
cat > sw.yaml <<'YAML'
data: in/d.h5
out: sw.h5
family: [nig, gh]
tol: 1e-8
windows: {start: 0, length: 2000, step: 2000, count: 6}
quiet: true
YAML
run_t 120 ref.txt mpirun -np 2 "$G" run sw.yaml --out ref.h5 || { cat ref.txt; die "reference sweep"; }

# victim NAME NP SIGNAL K [ghfit run overrides]: send SIGNAL to the K-th rank (0-based,
# by pid order) 3 s into a slow sweep; the job must end within 25 s
victim() {
  local name=$1 np=$2 sig=$3 k=$4; shift 4
  rm -f sw.h5 ck.h5 ck_prev.h5 ck.h5.done
  GHFIT_PEER_TIMEOUT=4 GHFIT_TEST_ITER_SLEEP=150 start_bg "$name.txt" mpirun -np "$np" "$G" run sw.yaml "$@"
  wait_until "ranks_started $bgpid $np" 60   # a loaded machine may take seconds to start them
  sleep 3
  local v; v=$(ranks_of $bgpid | sed -n "$((k + 1))p")
  [ -n "$v" ] || { die "$name: no rank $k"; wait_bg 60; return; }
  kill -"$sig" "$v"
  local t0; t0=$(date +%s.%N)
  wait_bg 25; rc=$?
  [ "$sig" = STOP ] && { kill -CONT "$v" 2> /dev/null; kill -KILL "$v" 2> /dev/null; }
  local dt; dt=$(echo "$(date +%s.%N) - $t0" | bc)
  local ne; ne=$(grep -c "^ghfit: error:" "$name.txt")
  if [ $rc = 124 ]; then die "$name: hang (still running 25 s after SIG$sig)"
  elif [ $rc = 0 ]; then die "$name: exit 0 after SIG$sig of a rank"
  elif [ "$ne" -gt 1 ]; then die "$name: $ne error lines"; grep "^ghfit:" "$name.txt"
  else ok "$name: exit $rc ${dt%??????} s after SIG$sig of rank $k: $(grep -m1 '^ghfit: error:' "$name.txt")"; fi
  [ -e sw.h5 ] && die "$name: a result file was written"
  ls *.tmp* > /dev/null 2>&1 && die "$name: temporary files left"
}

# --- 1. SIGKILL -----------------------------------------------------------------------------------
victim "SIGKILL rank 1" 2 KILL 1 --checkpoint ck.h5 --checkpoint-every 2
if [ -e ck.h5 ]; then
  run_t 120 r1.txt mpirun -np 2 "$G" run sw.yaml --checkpoint ck.h5 --resume || { cat r1.txt; die "resume after SIGKILL"; }
  for n in $(h5ls ref.h5/fits | awk '{print $1}'); do same_fit ref.h5 sw.h5 "$n" || die "fit $n differs after the resume"; done
  [ $fail = 0 ] && ok "resumed after the SIGKILL == uninterrupted (12 fits, bitwise)"
else
  die "no checkpoint before the SIGKILL"
fi
victim "SIGKILL rank 0" 2 KILL 0
victim "SIGKILL a non-leader of a 2-rank group" 4 KILL 3 --rows-per-rank 1000
# --- 2. SIGSTOP: a hung peer ----------------------------------------------------------------------------
victim "SIGSTOP rank 1" 2 STOP 1
grep -q "^ghfit: error: world rank 1 (pid [0-9]* on .*) has sent nothing for 4 s: it died or hangs" "SIGSTOP rank 1.txt" \
  || die "SIGSTOP rank 1: the message does not name the silent rank"
victim "SIGSTOP rank 0" 2 STOP 0
grep -q "^ghfit: error: world rank 0 (pid [0-9]* on .*) has sent nothing for 4 s" "SIGSTOP rank 0.txt" \
  || die "SIGSTOP rank 0: the message does not name the silent rank"
victim "SIGSTOP the leader of a 2-rank group" 4 STOP 2 --rows-per-rank 1000

same_files "inputs" in.sha in
[ $fail -eq 0 ] && echo "faults_deadrank: all passed" || echo "faults_deadrank: FAILED"
exit $fail
