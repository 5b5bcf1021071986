#!/usr/bin/env bash
# The main job: install what is missing, build, make the default data set
# (GH, d = 4, N = 20,000, seed 42: the parameters are embedded in jobs/demo.yaml
# and below) and fit it with 2 MPI ranks, printing the per-iteration log and the
# fitted parameters; then write the fit's HTML report with ghfit-report (the
# Python package, installed from PyPI into build/pyenv) and print its path.
# Exit status 0 only when the fit and the report are both written; if the
# Python install fails (no PyPI), the fit result is kept, its path printed, and
# the script says why the report is missing and exits 1.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bash "$here/scripts/install-deps.sh"
bash "$here/scripts/build.sh" "$here/build"
. "$here/scripts/mpienv.sh"
out=${GHFIT_DEMO_DIR:-$here/results/demo}
mkdir -p "$out"
"$here/build/ghfit" generate --model gh --dim 4 --n 20000 --seed 42 \
    --mu 0.05 --gamma 0.3,-0.2,0.1,0 --sigma 1 --rho 0.4 --p -1.5 --a 2 --b 1 --out "$out/demo.h5"
mpirun -np 2 "$here/build/ghfit" fit --data "$out/demo.h5" --model gh --out "$out/demo-fit.h5"
echo "result: $out/demo-fit.h5 (h5dump -A $out/demo-fit.h5 shows the attributes)"
if ! bash "$here/scripts/pyenv.sh" "$here/build/pyenv"; then
  echo "demo: no report: the Python package (ghfit-report) could not be installed into $here/build/pyenv; the fit result is $out/demo-fit.h5" >&2
  exit 1
fi
"$here/build/pyenv/bin/ghfit-report" "$out/demo-fit.h5" --data "$out/demo.h5" --out "$out/demo-report.html" > /dev/null
echo "report: $out/demo-report.html (one self-contained HTML file: open it in a browser)"
