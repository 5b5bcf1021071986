#!/usr/bin/env bash
# The writers of ghfit under signals (issue 25, item 5), one process each:
#  1. SIGINT, SIGTERM, SIGUSR1 and SIGHUP while eval, sample, risk and gof
#     write their output (the temporary file exists: GHFIT_TEST_WRITE_SLEEP /
#     GHFIT_TEST_SAVE_SLEEP hold them there): each ends by the signal (exit
#     128 + its number: 130, 143, 138, 129), leaving no output, no temporary
#     file and no lock;
#  2. SIGKILL in the same place (nothing can clean up: OUT.tmp.PID and
#     OUT.lock stay), for eval, sample, risk, gof and the result of fit and of
#     run, and SIGKILL while fit writes a checkpoint (CKPT.tmp stays): the same
#     command run again takes over the stale lock, removes the dead writer's
#     temporary file (one "ghfit: note:" line naming it), succeeds (exit 0)
#     and leaves nothing but its output (and, for fit --checkpoint, resumes);
#  3. a file named like a temporary file of another pid, or a directory with
#     the dead writer's name, is not touched.
# Every case: exact exit status, no hang, inputs unchanged.
# usage: faults_writers.sh GHFIT H5GET WORKDIR
set -uo pipefail
G=$1; H=$2; W=$3
SRC=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$W"; mkdir -p "$W/in"; cd "$W"
. "$SRC/tests/faults_lib.sh"

"$G" generate --model gh --dim 3 --n 3000 --seed 5 --p -1 --a 1.5 --b 0.7 --gamma 0.2,-0.1,0 --out in/d.h5 > /dev/null &&
  "$G" generate --model gauss --dim 3 --n 7 --seed 2 --out in/w.h5 > /dev/null || { echo "cannot generate"; exit 1; }
"$G" fit --data in/d.h5 --model nig --out in/f.h5 --quiet > fit.txt 2>&1 || { cat fit.txt; echo "cannot fit"; exit 1; }
printf 'data: in/d.h5\nfamily: [t]\nquiet: true\n' > in/job.yaml
snapshot in > in.sha

# the command of each writer, writing OUT
cmd_of() { # WRITER OUT
  case $1 in
    eval) echo eval --model in/f.h5 --data in/d.h5 --out "$2" ;;
    sample) echo sample --model in/f.h5 --n 2000 --seed 3 --out "$2" ;;
    risk) echo risk --model in/f.h5 --portfolios in/w.h5:/X --alpha 0.99 --out "$2" ;;
    gof) echo gof --model in/f.h5 --data in/d.h5 --out "$2" ;;
    fit) echo fit --data in/d.h5 --model t --quiet --out "$2" ;;
    run) echo run in/job.yaml --out "$2" ;;
  esac
}
# eval and sample announce their temporary file at GHFIT_TEST_WRITE_SLEEP, the
# others (files built in memory) at GHFIT_TEST_SAVE_SLEEP
hold_of() { case $1 in eval|sample) echo GHFIT_TEST_WRITE_SLEEP ;; *) echo GHFIT_TEST_SAVE_SLEEP ;; esac; }
left_of() { ls -A | grep -F "$1" | tr '\n' ' '; }

# ---- 1. the four signals during the writes (the four of a command side by side) -----------------
declare -A num=([INT]=2 [TERM]=15 [USR1]=10 [HUP]=1)
for w in eval sample risk gof; do
  pids=()
  for s in INT TERM USR1 HUP; do
    o=$w-$s.h5
    # a background job of a script starts with SIGINT ignored: --default-signal undoes that
    env --default-signal=INT,HUP "$(hold_of $w)=30" "$G" $(cmd_of $w $o) > $w-$s.txt 2>&1 &
    pids+=($!)
  done
  i=0
  for s in INT TERM USR1 HUP; do
    o=$w-$s.h5; p=${pids[$i]}; i=$((i + 1))
    wait_until "grep -q 'ghfit: test: $o.tmp.[0-9]* \(created\|written\)' $w-$s.txt 2> /dev/null" 60 ||
      { die "$w: no temporary file announced: $(cat $w-$s.txt)"; kill -KILL $p; continue; }
    [ -e $o.lock ] || die "$w: no lock file while it writes (the check below would prove nothing)"
    kill -$s $p
  done
  i=0
  for s in INT TERM USR1 HUP; do
    o=$w-$s.h5; p=${pids[$i]}; i=$((i + 1))
    wait $p 2> /dev/null; rc=$?
    left=$(left_of $o)
    [ $rc = $((128 + ${num[$s]})) ] && [ -z "$left" ] &&
      ok "$w, SIG$s while writing: ends by the signal (exit $rc), no output, temporary file or lock left" ||
      die "$w, SIG$s while writing: exit $rc (expected $((128 + ${num[$s]}))), left '$left': $(cat $w-$s.txt)"
  done
done

# ---- 2. SIGKILL while writing; the same command again cleans up ------------------------------------
# (the writers side by side, then the runs again side by side)
takeover_check() { # NAME OUT TMP RC: the run again after a SIGKILL that left TMP and OUT.lock
  local name=$1 o=$2 t=$3 rc=$4 left
  outcome "$name: run again after SIGKILL" $rc 0 $name-2.txt note "removed $t, left by pid [0-9]+"
  left=$(left_of $o | tr ' ' '\n' | grep -vxF "$o" | grep -v '^$' | grep -v '\.ckpt\.h5$' | tr '\n' ' ')
  [ -e $o ] && [ -z "$left" ] && ok "$name: output written, $t and the stale lock gone" ||
    die "$name: output $( [ -e $o ] && echo present || echo missing), left '$left'"
}
FITC=(fit --data in/d.h5 --model gh --tol 0 --max-iter 6 --quiet --out kc.h5 --checkpoint kc.ckpt.h5 --checkpoint-every 2)
declare -A kp
for w in eval sample risk gof fit run; do
  env "$(hold_of $w)=30" "$G" $(cmd_of $w k-$w.h5) > k-$w.txt 2>&1 & kp[$w]=$!
done
# fit --checkpoint, killed while its second checkpoint is written (CKPT.tmp holds ghfit's header)
GHFIT_TEST_CKPT_SLEEP=30@2 "$G" "${FITC[@]}" > k-ckpt.txt 2>&1 & kp[ckpt]=$!
declare -A kt krc kpid
for w in eval sample risk gof fit run ckpt; do
  p=${kp[$w]}
  if [ $w = ckpt ]; then
    o=kc.h5; t=kc.ckpt.h5.tmp; ann="test sleep"
  else
    o=k-$w.h5; t=$o.tmp.$p; ann="ghfit: test: $o.tmp.$p \(created\|written\)"
  fi
  wait_until "grep -q '$ann' k-$w.txt 2> /dev/null" 60 || { die "$w: not held while writing: $(cat k-$w.txt)"; kill -KILL $p; continue; }
  kill -KILL $p; wait $p 2> /dev/null
  [ -f $t ] && [ -e $o.lock ] || { die "$w: SIGKILL left no temporary file $t or no lock ($(left_of $o))"; continue; }
  kt[$w]=$t
  if [ $w = ckpt ]; then run_t 120 ckpt-2.txt "$G" "${FITC[@]}" --resume & else run_t 120 $w-2.txt "$G" $(cmd_of $w $o) & fi
  kpid[$w]=$!
done
for w in eval sample risk gof fit run ckpt; do
  [ -n "${kpid[$w]:-}" ] || continue
  wait ${kpid[$w]}; rc=$?
  if [ $w = ckpt ]; then takeover_check ckpt kc.h5 ${kt[$w]} $rc; else takeover_check $w k-$w.h5 ${kt[$w]} $rc; fi
done
[ ! -e kc.ckpt.h5.tmp ] && [ ! -e kc.ckpt.h5.lock ] || die "fit --checkpoint: left $(left_of kc.ckpt)"

# ---- 3. what is not the dead writer's stays -----------------------------------------------------------
o=k3.h5
env GHFIT_TEST_SAVE_SLEEP=30 "$G" $(cmd_of gof $o) > k3.txt 2>&1 & p=$!
wait_until "grep -q 'ghfit: test: $o.tmp.[0-9]* written' k3.txt 2> /dev/null" 60 || die "gof: no temporary file announced"
kill -KILL $p; wait $p 2> /dev/null
other=$o.tmp.$((p + 1)); echo mine > $other          # another pid's name: not the lock holder's
mv $o.tmp.$p $o.tmp.$p.x && mkdir $o.tmp.$p           # the holder's name, but a directory
run_t 120 k3-2.txt "$G" $(cmd_of gof $o); rc=$?
[ $rc = 0 ] && [ -e $o ] && [ -f $other ] && [ -d $o.tmp.$p ] && ! grep -q 'removed' k3-2.txt &&
  ok "takeover: another pid's temporary name and a directory are left alone" ||
  die "takeover: exit $rc; left $(left_of $o); $(cat k3-2.txt)"
rm -rf $o.tmp.*

same_files "inputs" in.sha in
[ $fail -eq 0 ] && echo "faults_writers: all passed" || echo "faults_writers: FAILED"
exit $fail
