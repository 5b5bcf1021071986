#!/usr/bin/env bash
# tests/python.sh - the Python package's tests (ctest label `python`).
#
#   python.sh env     SRC BUILD         make BUILD/pyenv (python3 -m venv) and
#                                        pip install SRC/python[test] into it
#   python.sh unit    SRC BUILD GHFIT   pytest, every test but the browser ones
#   python.sh browser SRC BUILD GHFIT   the reports in headless chromium (Selenium);
#                                        exit 77 (skip) only when chromium itself
#                                        cannot start here
#
# scripts/pyenv.sh installs the package from a copy of SRC/python, and pytest
# runs without a cache or bytecode files, so nothing is written into the source
# tree.  Work files: BUILD/work/python; screenshots: BUILD/python-screenshots.
set -uo pipefail
mode=$1; src=$2; build=$3; ghfit=${4:-$build/ghfit}
venv=$build/pyenv
py=${GHF_PYTHON3:-python3}

die() { echo "python.sh: $*" >&2; exit 1; }

make_env() {
  GHF_PYTHON3=$py bash "$src/scripts/pyenv.sh" "$venv" test || die "cannot make $venv (see above)"
  "$venv/bin/python" -c 'import ghfit, numpy, scipy, h5py, matplotlib, selenium, pytest
print("python.sh: ghfit", ghfit.__version__, "numpy", numpy.__version__, "scipy", scipy.__version__,
      "h5py", h5py.__version__, "matplotlib", matplotlib.__version__, "selenium", selenium.__version__)' \
    || die "the installed package does not import"
  [ -x "$venv/bin/ghfit-report" ] || die "no ghfit-report entry point in $venv/bin"
}

run_pytest() {
  [ -x "$venv/bin/python" ] || die "no $venv: run the python_env test first"
  mkdir -p "$build/work/python"
  cd "$build/work/python" || die "no work folder"
  GHFIT=$ghfit GHFIT_PY_WORK=$build/work/python GHFIT_PY_SHOTS=$build/python-screenshots \
  PYTHONDONTWRITEBYTECODE=1 MPLBACKEND=Agg \
    "$venv/bin/python" -m pytest -p no:cacheprovider -q -rs "$@" "$src/python/tests"
}

case $mode in
  env) make_env ;;
  unit) run_pytest -m "not browser" ;;
  browser)
    chromium=${GHFIT_CHROMIUM:-$(command -v chromium || echo /usr/bin/chromium)}
    driver=${GHFIT_CHROMEDRIVER:-$(command -v chromedriver || echo /usr/bin/chromedriver)}
    if [ ! -x "$chromium" ] || [ ! -x "$driver" ]; then
      echo "python.sh: SKIP: chromium or chromedriver not installed ($chromium, $driver); scripts/install-deps.sh installs Debian's chromium and chromium-driver"
      exit 77
    fi
    # Can the browser start here at all?  If not (no usable kernel features,
    # no shared memory, ...) the test cannot run: skip with the reason.
    probe=$(timeout 120 "$chromium" --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage \
              --no-first-run --dump-dom 'data:text/html,<p>probe-ok</p>' 2>"$build/chromium-probe.log")
    prc=$?
    if ! grep -q probe-ok <<<"$probe"; then
      why=$(grep -v '^$' "$build/chromium-probe.log" | tail -1)
      echo "python.sh: SKIP: headless chromium cannot start on this machine (exit status $prc): ${why:-no message}; details in $build/chromium-probe.log"
      exit 77
    fi
    export GHFIT_CHROMIUM=$chromium GHFIT_CHROMEDRIVER=$driver
    run_pytest -m browser ;;
  *) die "usage: python.sh env|unit|browser SRC BUILD [GHFIT]" ;;
esac
