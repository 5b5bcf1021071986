# tests/lib.sh - helpers shared by the shell tests (source it).

# relcheck A B TOL: prints the relative difference |A - B| / |B| (|A - B| when
# B = 0) and succeeds when it is at most TOL.  awk's numbers are doubles, so
# values printed with %.17g compare exactly.
relcheck() {
  awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { r = (a - b) / (b == 0 ? 1 : b); if (r < 0) r = -r;
    printf "  relative difference %.3e (tol %g)\n", r, t; exit !(r <= t) }'
}
