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

# refused SUBCOMMAND PATTERN -- ARGS...: `mpirun -np 2 $G SUBCOMMAND ARGS` ($MPI
# is the launcher) exits 2 with exactly one line on stderr, "ghfit: error:"
# matching PATTERN, and leaves no out.h5* behind; sets fail=1 otherwise.
refused() {
  local sub=$1 pat=$2; shift 3
  rm -f out.h5*
  # sigkill_timeout=0: no 1-2 s wait before mpirun reports the ranks' exit 2
  # (all of them have passed MPI_Finalize's fence by then)
  OMPI_MCA_odls_base_sigkill_timeout=0 timeout 120 $MPI -np 2 "$G" "$sub" "$@" >stdout.txt 2>stderr.txt
  local rc=$?
  local lines; lines=$(grep -c "^ghfit: " stderr.txt)
  if [ $rc -ne 2 ]; then echo "FAIL [$*]: exit $rc, expected 2"; cat stderr.txt; fail=1; return; fi
  if [ "$lines" -ne 1 ] || ! grep -q "^ghfit: error: " stderr.txt; then
    echo "FAIL [$*]: expected one 'ghfit: error:' line:"; cat stderr.txt; fail=1; return; fi
  if ! grep -q -- "$pat" stderr.txt; then echo "FAIL [$*]: message lacks '$pat':"; cat stderr.txt; fail=1; return; fi
  if ls out.h5* >/dev/null 2>&1; then echo "FAIL [$*]: output left behind"; fail=1; return; fi
  echo "ok   [$*]: $(grep '^ghfit: ' stderr.txt)"
}

# cuda_fits_or_no_gpu ARGS...: `mpirun -np 2 $G fit --data d.h5 --model nig
# --out bad.h5 --quiet ARGS --backend cuda` either fits (exit 0 and a result
# file; the two ranks may share one GPU: statistics reduced through the host)
# or, without a usable GPU or a CUDA build, exits 2 with that refusal and no
# result file; calls die otherwise.
cuda_fits_or_no_gpu() {
  rm -f bad.h5
  GHFIT_CUDA_REDUCE=mpi mpirun -np 2 "$G" fit --data d.h5 --model nig --out bad.h5 --quiet "$@" --backend cuda \
    > bad.txt 2>&1
  local rc=$?
  if [ $rc = 0 ]; then
    [ -e bad.h5 ] || die "$* --backend cuda: exit 0 but no result file"
  else
    [ $rc = 2 ] && grep -q "^ghfit: error: .*\(usable CUDA device\|built without CUDA\)" bad.txt \
      || { cat bad.txt; die "$* --backend cuda: exit $rc, expected 0 or the refusal for a missing GPU"; }
    [ ! -e bad.h5 ] || die "$* --backend cuda: result file left behind"
  fi
}
