# check_lib.sh - the case runner shared by check.sh (`ghfit check fit|run`)
# and check_post.sh (`ghfit check eval|gof|sample|risk`); sourced from the
# work directory.  The caller sets G (ghfit), and optionally RUN (the prefix
# that runs ghfit itself, e.g. "mpirun -np 1"; empty: run it directly) and
# RUN_AFTER_OK=1 (a check that exits 0 is followed by the command itself,
# which must exit 0 too).
fail=0; n=0
bad() { echo "FAIL [$CASE]: $*"; for f in c_err.txt r_err.txt; do [ -s $f ] && sed "s/^/    $f | /" $f | head -5; done; fail=1; }
snap() { ls -A | grep -v -x -e c_out.txt -e c_err.txt -e r_out.txt -e r_err.txt | sort; }

# expect STATUS PATTERN [same|like] -- ARGS...: `ghfit check ARGS` exits
# STATUS and creates or removes nothing.  On success: one "ghfit check: ok:"
# line and no error line (then, with RUN_AFTER_OK=1, `ghfit ARGS` runs and
# exits 0).  On failure: exactly one "ghfit: error:" line matching PATTERN,
# and `ghfit ARGS` exits STATUS too, with the identical line (same) or a line
# matching PATTERN (like: check read a sample where the run reads every row).
expect() {
  local want=$1 pat=$2 how=same
  [ "$3" != -- ] && { how=$3; shift; }
  shift 3
  n=$((n + 1)); CASE="check ${*}"
  local before; before=$(snap)
  timeout -k 5 30 "$G" check "$@" > c_out.txt 2> c_err.txt; local rc=$?
  [ "$rc" = "$want" ] || { bad "check: exit $rc, expected $want"; return 1; }
  [ "$(snap)" = "$before" ] || { bad "check created or removed files: $(diff <(echo "$before") <(snap) | grep '^[<>]' | tr '\n' ' ')"; return 1; }
  if [ "$want" = 0 ]; then
    grep -q "^ghfit check: ok: " c_out.txt || { bad "no 'ghfit check: ok:' line"; cat c_out.txt; return 1; }
    grep -q "^ghfit: error:" c_err.txt && { bad "an error line on success"; return 1; }
    if [ "${RUN_AFTER_OK:-0}" = 1 ]; then
      grep -q "^ghfit check: ok: \`ghfit $1\` would " c_out.txt || { bad "no 'ghfit check: ok: \`ghfit $1\` would' line"; cat c_out.txt; return 1; }
      timeout -k 5 120 ${RUN:-} "$G" "$@" > r_out.txt 2> r_err.txt || { bad "ghfit $1 itself failed after check's 0"; return 1; }
      echo "ok   [$CASE] -> 0, and ghfit $1 ran"
      return 0
    fi
    echo "ok   [$CASE] -> 0"
    return 0
  fi
  [ "$(grep -c . c_err.txt)" = 1 ] && grep -q "^ghfit: error: " c_err.txt || { bad "check: stderr is not one 'ghfit: error:' line"; return 1; }
  grep -q -- "$pat" c_err.txt || { bad "check: the message lacks '$pat'"; return 1; }
  timeout -k 5 60 ${RUN:-} "$G" "$@" > r_out.txt 2> r_err.txt; rc=$?
  [ "$rc" = "$want" ] || { bad "ghfit $1 itself: exit $rc, expected $want"; return 1; }
  local rl; rl=$(grep "^ghfit: error: " r_err.txt)
  if [ $how = same ]; then
    [ "$rl" = "$(cat c_err.txt)" ] || { bad "ghfit $1 itself printed another line"; return 1; }
  else
    echo "$rl" | grep -q -- "$pat" || { bad "ghfit $1 itself: the message lacks '$pat'"; return 1; }
  fi
  echo "ok   [$CASE] -> $want: $(cut -c1-160 c_err.txt)"
}
# accept [CHECK ARGS...]: exit 0; the report is in c_out.txt, warnings in c_err.txt
accept() { expect 0 "" -- "$@"; }
# has TEXT [FILE]: the report (c_out.txt, or FILE) holds TEXT
has() { grep -q -- "$1" "${2:-c_out.txt}" && echo "ok     report: $1" || { bad "the report lacks '$1'"; cat c_out.txt; }; }
