# tests/faults_lib.sh - helpers of the fault tests (tests/faults_*.sh; source it
# after setting G (ghfit), H (h5get) and the working directory).
# Every check prints "ok   ..." or "FAIL: ..." and sets fail=1 on failure.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" # wait_until, ranks_started
fail=0
die() { echo "FAIL: $*"; fail=1; }
ok() { echo "ok   $*"; }

# run_t SECONDS OUTFILE CMD...: run CMD with a time limit (exit 124 on a hang),
# stdout and stderr together in OUTFILE; returns CMD's exit status.
run_t() { local t=$1 o=$2; shift 2; timeout -k 5 "$t" "$@" > "$o" 2>&1; }

# outcome NAME RC WANT OUTFILE KIND [PATTERN]: the exit status is WANT, no hang,
# no signal, and the output holds exactly one line "ghfit: KIND: ..." (KIND
# error, note or warning) matching PATTERN (grep -E) and no "ghfit: error:"
# line besides it.
outcome() {
  local name=$1 rc=$2 want=$3 out=$4 kind=$5 pat=${6:-.}
  local bad=0
  [ "$rc" = 124 ] && { die "$name: hang (killed by the time limit)"; return; }
  [ "$rc" = "$want" ] || { die "$name: exit $rc, expected $want"; bad=1; }
  grep -qE "exited on signal|Segmentation fault|core dumped|\*\*\* Process received signal" "$out" &&
    { die "$name: a process died on a signal"; bad=1; }
  local n; n=$(grep -c "^ghfit: $kind:" "$out")
  [ "$n" = 1 ] || { die "$name: $n 'ghfit: $kind:' lines, expected 1"; bad=1; }
  if [ "$kind" != error ]; then
    grep -q "^ghfit: error:" "$out" && { die "$name: an error line beside the $kind"; bad=1; }
  fi
  grep "^ghfit: $kind:" "$out" | grep -qE -- "$pat" || { die "$name: the $kind line does not match '$pat'"; bad=1; }
  [ $bad = 0 ] && ok "$name: exit $rc, $(grep -m1 "^ghfit: $kind:" "$out")"
  [ $bad = 0 ] || sed 's/^/    | /' "$out" | head -30
}

# snapshot DIR > FILE: names and sha256 of every file under DIR (sorted)
snapshot() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 -r sha256sum); }
# same_files NAME BEFORE DIR: DIR holds exactly the files of BEFORE, unchanged
same_files() {
  local name=$1 before=$2 dir=$3
  snapshot "$dir" > "$before.after"
  if cmp -s "$before" "$before.after"; then ok "$name: files unchanged, nothing left behind"
  else die "$name: files differ or were left behind:"; diff "$before" "$before.after" | sed 's/^/    /' | head -10; fi
}

# every dataset of a fit, printed with %.17g: equal text = equal bits
dumpfit() { # FILE FIT
  local f=$1 n=$2 a ds
  for a in loglik n_iter converged status n_obs; do echo "$a $("$H" "$f" /fits/$n $a)"; done
  for ds in loglik params/mu params/gamma params/sigma params/p params/a params/b moments/mean moments/cov; do
    echo "$ds"; "$H" "$f" /fits/$n/$ds
  done
}
same_fit() { # A B FIT
  dumpfit "$1" "$3" > "$1.$3.txt"; dumpfit "$2" "$3" > "$2.$3.txt"
  cmp -s "$1.$3.txt" "$2.$3.txt" || { diff "$1.$3.txt" "$2.$3.txt" | head -5; return 1; }
}
# the children of a process (the ranks of an mpirun started here)
ranks_of() { pgrep -P "$1" | sort -n; }
# signal_at_startup PID: SIGUSR1 to mpirun PID once both ranks run ghfit (they
# sleep GHFIT_TEST_STARTUP_SLEEP there); a loaded machine may take seconds
# to start them, and a signal forwarded to a rank not yet exec'd kills it
signal_at_startup() { wait_until "ranks_started $1 2" 60; sleep 0.5; kill -USR1 "$1"; }
# start_bg OUTFILE CMD...: start CMD in the background (its pid in $bgpid)
start_bg() { local o=$1; shift; "$@" > "$o" 2>&1 & bgpid=$!; }
# wait_bg SECONDS: wait for it; 124 (after killing it) if it runs longer
wait_bg() {
  local i
  for ((i = 0; i < $1 * 10; i++)); do kill -0 "$bgpid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$bgpid" 2>/dev/null; then
    kill -TERM "$bgpid"; sleep 3; kill -KILL "$bgpid" 2>/dev/null; wait "$bgpid"; return 124
  fi
  wait "$bgpid"
}
