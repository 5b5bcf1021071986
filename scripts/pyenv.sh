#!/usr/bin/env bash
# Make (or update) a virtual environment with the ghfit Python package
# (python/: the result-file reader and ghfit-report) and its pinned
# dependencies from PyPI.  usage: scripts/pyenv.sh VENV [EXTRAS, e.g. test]
# The package is built from a copy of python/, so the source tree stays clean.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:?usage: scripts/pyenv.sh VENV [EXTRAS]}
extras=${2:-}
py=${GHF_PYTHON3:-python3}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
  rm -rf "$venv"
  "$py" -m venv "$venv" || { echo "pyenv: cannot create a virtual environment with $py -m venv (Debian: python3-venv)" >&2; exit 1; }
fi
src=$(mktemp -d "${TMPDIR:-/tmp}/ghfit-pysrc.XXXXXX")
trap 'rm -rf "$src"' EXIT
cp -r "$here/python/." "$src/"
rm -rf "$src/build" "$src"/*.egg-info "$src/.pytest_cache"
spec=$src
[ -z "$extras" ] || spec="$src[$extras]"
"$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q "$spec" \
  || { echo "pyenv: pip install of the ghfit package and its pinned dependencies failed (is PyPI reachable?)" >&2; exit 1; }
