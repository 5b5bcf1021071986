# tests/lib.sh - helpers shared by the shell tests (source it).

# relcheck A B TOL: prints the relative difference |A - B| / |B| (|A - B| when
# B = 0) and succeeds when it is at most TOL.  awk's numbers are doubles, so
# values printed with %.17g compare exactly.
relcheck() {
  awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { r = (a - b) / (b == 0 ? 1 : b); if (r < 0) r = -r;
    printf "  relative difference %.3e (tol %g)\n", r, t; exit !(r <= t) }'
}

# wait (up to $2 s) until command $1 succeeds
wait_until() { local i; for ((i = 0; i < $2 * 10; i++)); do eval "$1" && return 0; sleep 0.1; done; return 1; }
# ranks_started PID N: N children of PID run ghfit (exec'd: past the fork
# of the launcher, so ghfit's signal handlers can be in place)
ranks_started() {
  local n=0 p
  for p in $(pgrep -P "$1"); do [[ "$(readlink "/proc/$p/exe" 2>/dev/null)" == */ghfit ]] && n=$((n + 1)); done
  [ "$n" -ge "$2" ]
}
