#!/usr/bin/env bash
# The whole test suite: install what is missing, build (Release, and an
# AddressSanitizer + UndefinedBehaviorSanitizer build), run ctest on both.
# GPU tests skip cleanly without a GPU.  The Python tests (label python) make
# their own virtual environment (build/pyenv) from PyPI.  .ci/run calls
# exactly this.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
GHFIT_WITH_SLURM=1 GHFIT_WITH_BROWSER=1 bash "$here/scripts/install-deps.sh"
# Twice the cores: most tests wait more than they compute (MPI start-up,
# sleeps, pipes; cli_check uses 27 s of CPU in 57 s), and the MPI tests
# declare the cores they use (ctest PROCESSORS), so two slots per core keep
# the cores busy (whole suite on 2 cores: about 550 s instead of 1,000 s;
# the timing-sensitive fault tests wait for events, not for fixed delays).
jobs=$(( 2 * $(nproc 2>/dev/null || echo 2) ))
bash "$here/scripts/build.sh" "$here/build"
bash "$here/scripts/build.sh" "$here/build-asan" -DGHFIT_SANITIZE=ON -DGHFIT_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGHFIT_BENCH=OFF
. "$here/scripts/mpienv.sh"
export OMP_NUM_THREADS=1
# the tests' MPI start-up: the PML Open MPI picks here anyway, without probing
# psm/psm2 first (see tests/common.cmake)
export OMPI_MCA_pml=ob1
status=0
echo "== ctest (release build, all labels)"
(cd "$here/build" && ctest --output-on-failure -j "$jobs" --timeout 900) || status=1
echo "== ctest (sanitizer build, labels unit and sanitize)"
(cd "$here/build-asan" && ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --output-on-failure -j "$jobs" -L "unit|sanitize" --timeout 900) || status=1
exit $status
