#!/usr/bin/env bash
# Install and environment module: `cmake --install BUILD --prefix P` into a
# fresh prefix, `module load` of the generated modulefile (Environment Modules
# or Lmod from Debian), then the README's usage lines (its second code block
# under "Using it", sbatch lines left out: tests/batch_slurm.sh runs those) in
# an empty folder with a bare `ghfit`: the binary on PATH must be the
# installed one, and nothing may come from the source or build tree.
# Checks the installed files (binary, Slurm scripts with the installed
# binary's path, job files, docs).  Exit 77 (skipped) without a `module`
# implementation (GHFIT_WITH_SLURM=1 scripts/install-deps.sh installs one).
# usage: install_module.sh BUILDDIR WORKDIR
set -uo pipefail
B=$1; W=$2
SRC=$(cd "$(dirname "$0")/.." && pwd)
init=""
for f in /usr/share/modules/init/bash /usr/share/lmod/lmod/init/bash; do
  [ -r "$f" ] && { init=$f; break; }
done
[ -n "$init" ] || { echo "SKIP: no Environment Modules or Lmod (apt-get install environment-modules)"; exit 77; }
fail=0
die() { echo "FAIL: $*"; fail=1; }
rm -rf "$W"; mkdir -p "$W/run"
P=$W/prefix

cmake --install "$B" --prefix "$P" > "$W/install.txt" 2>&1 || { cat "$W/install.txt"; echo "FAIL: cmake --install"; exit 1; }
for f in bin/ghfit bin/ghfit-launch share/ghfit/slurm/ghfit.sbatch share/ghfit/slurm/ghfit-array.sbatch share/ghfit/jobs/demo.yaml \
         share/ghfit/jobs/sweep.yaml share/ghfit/jobs/model-selection.yaml share/ghfit/tests/data/returns.h5 \
         share/doc/ghfit/README.md share/doc/ghfit/docs/user-guide.md \
         share/doc/ghfit/docs/math.md share/modulefiles/ghfit; do
  [ -e "$P/$f" ] || die "not installed: $f"
done
for s in ghfit.sbatch ghfit-array.sbatch; do
  [ -x "$P/share/ghfit/slurm/$s" ] || die "$s is not executable"
done
grep -q "^installed_bin=\"$P/bin/ghfit\"" "$P/share/ghfit/slurm/ghfit.sbatch" ||
  die "the installed ghfit.sbatch does not name the installed binary"

# a shell with the module system and nothing of the source or build tree on PATH
export PATH=/usr/local/bin:/usr/bin:/bin MODULEPATH=""
unset GHFIT GHFIT_ROOT
. "$init"
module use "$P/share/modulefiles" && module load ghfit || die "module load ghfit"
[ "$(command -v ghfit)" = "$P/bin/ghfit" ] || die "ghfit on PATH is '$(command -v ghfit)', not $P/bin/ghfit"
[ "${GHFIT_ROOT:-}" = "$P" ] || die "GHFIT_ROOT='${GHFIT_ROOT:-}', expected $P"
ghfit --version || die "ghfit --version"
echo "module load ghfit: ghfit is $(command -v ghfit)"

# the README's usage lines, as written there
awk '/^## / { u = ($0 ~ /^## Using it/) } u && /^    / { if (!b) n++; b = 1; if (n == 2) print substr($0, 5); next }
     { b = 0 }' "$SRC/README.md" | grep -v '^sbatch ' > "$W/usage.sh"
echo "--- the README's usage lines (sbatch left out):"; cat "$W/usage.sh"
[ "$(grep -c '^ghfit \|^mpirun ' "$W/usage.sh")" -ge 4 ] || die "could not find the README's usage lines"
cd "$W/run"
cp -r "$GHFIT_ROOT/share/ghfit/jobs" "$GHFIT_ROOT/share/ghfit/slurm" . || die "copying the examples"
bash -e -x "$W/usage.sh" > "$W/usage.log" 2>&1 || { tail -30 "$W/usage.log"; die "the README's usage lines failed"; }
for f in data.h5 fit.h5 results/demo/demo.h5 results/demo/rolling.h5; do
  [ -e "$f" ] || die "the README's lines did not make $f"
done
grep -q 'results/demo/rolling.h5' "$W/usage.log" && grep -q '^fit.h5 ' "$W/usage.log" ||
  die "ghfit summary did not list both files"
# the installed model-selection job, run where its comment says, its LR table
(cd "$GHFIT_ROOT/share/ghfit" && mpirun -np 2 ghfit run jobs/model-selection.yaml --out "$W/ms.h5" --max-iter 200 \
   --quiet) > "$W/ms.log" 2>&1 || { tail -5 "$W/ms.log"; die "the installed jobs/model-selection.yaml"; }
ghfit summary "$W/ms.h5" --lrt > "$W/ms.txt" 2>&1 || die "ghfit summary --lrt of the installed job"
[ "$(grep -c '_tol' "$W/ms.txt")" = 12 ] && grep -q '^  hyp  *gh  *1 ' "$W/ms.txt" ||
  { cat "$W/ms.txt"; die "the installed model-selection job: not 12 fits and an LR table"; }
[ $fail = 0 ] && echo "ok   installed to a fresh prefix, module load ghfit, the README's usage lines ran with a bare ghfit"
exit $fail
