#!/usr/bin/env bash
# Report benchmark (not a test): how long ghfit-report takes for
#   (a) the 2,000-fit rolling-window sweep of bench/sweep_bench.sh
#       (1,000 windows x GH, NIG; d = 10; 1,000 rows each),
#   (b) one GH fit of N = 1,000,000 rows (d = 10) with --data (QQ plots and
#       histograms of all 10 margins over all 1e6 rows),
#   (c) both result files in one report with --data.
# Target: each under 30 s on 2 cores.  Prints the wall and CPU (user + system)
# time of each report (the fits are made first and not timed here); on a busy
# machine the CPU time is what the report costs.
# usage: bench/report_bench.sh GHFIT [WORKDIR] [VENV]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
G=$(readlink -f "$1"); W=${2:-/tmp/ghfit-report-bench}; V=${3:-$here/build/pyenv}
mkdir -p "$W"; W=$(readlink -f "$W"); V=$(readlink -m "$V")
bash "$here/scripts/pyenv.sh" "$V"
bash "$here/bench/sweep_bench.sh" "$G" - "$W" 2 1000 | sed 's/^/  /'
cd "$W"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMP_NUM_THREADS=1 HDF5_USE_FILE_LOCKING=FALSE
[ -e fit1e6.h5 ] || mpirun -np 2 "$G" fit --data returns.h5 --rows 0:1000000 --model gh --out fit1e6.h5 --quiet
report() {
  local what=$1; shift
  local out=${*: -1} t
  t=$( { TIMEFORMAT='%R %U %S'; time "$V/bin/ghfit-report" "$@" > /dev/null; } 2>&1 )
  read -r wall user sys <<<"$t"
  printf '%-46s %6.1f s wall, %5.1f s CPU  (%s, %s bytes)\n' "$what" "$wall" \
    "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" "$out" "$(stat -c %s "$out")"
}
echo "ghfit-report on $(getconf _NPROCESSORS_ONLN) cores ($(uname -n), $(date -u +%Y-%m-%dT%H:%MZ)):"
report "(a) sweep, 2,000 fits" bench.h5 --out sweep.html
report "(b) one fit, N = 1e6, d = 10, with --data" fit1e6.h5 --data returns.h5 --out fit1e6.html
report "(c) both in one report, with --data" bench.h5 fit1e6.h5 --data returns.h5 --out both.html
