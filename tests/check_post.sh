#!/usr/bin/env bash
# `ghfit check eval|gof|sample|risk ARGS`: for each command a valid
# invocation exits 0, creates nothing, and the command itself then runs
# (mpirun -np 1); a corpus of bad inputs (a typo in an option, a missing
# model file, a fit name not in the file, data of the wrong dimension, a
# missing dataset, a file of two fits without a name, --out equal to an
# input, --out an existing file that is not ghfit's, a bad value,
# non-finite rows) each exits 2 with exactly one
# "ghfit: error:" line on stderr, creates nothing, and `mpirun -np 1 ghfit
# CMD ARGS` exits 2 with the very same line.
# usage: check_post.sh GHFIT WORKDIR
set -uo pipefail
G=$1; W=$2
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$W"; mkdir -p "$W"; cd "$W" || exit 1
unset SLURM_NTASKS
# mpirun waits a second or two before it reports a rank's non-zero exit; this keeps 30 refusals quick
export OMPI_MCA_odls_base_sigkill_timeout=0
MPI="mpirun --oversubscribe -np 1"
RUN=$MPI RUN_AFTER_OK=1
. "$HERE/check_lib.sh"
"$PY" -c "import h5py, numpy" 2>/dev/null || { echo "h5py/numpy are not available at $PY (Debian python3-h5py)"; exit 1; }

# refused PATTERN -- CMD ARGS...: check and `mpirun -np 1 ghfit CMD ARGS` exit 2 with the same line
refused() { expect 2 "$@"; }

# ---- data: a 3-d data set and its NIG fit, 4-d data, weights, a file that is not ghfit's ------------
"$G" generate --model nig --dim 3 --n 2000 --seed 1 --out d.h5 > /dev/null &&
  "$G" generate --model nig --dim 4 --n 500 --seed 2 --out d4.h5 > /dev/null &&
  "$G" fit --data d.h5 --model nig --out fit.h5 --quiet --max-iter 200 || { echo "setup failed"; exit 1; }
"$PY" - <<'PY' || exit 1
import h5py, numpy as np
rng = np.random.default_rng(0)
with h5py.File("w.h5", "w") as f:
    f["W"] = rng.normal(size=(20, 3))
    f["W2"] = rng.normal(size=(5, 2))
    w = rng.normal(size=(9, 3)); w[7, 2] = np.nan
    f["Wnan"] = w
x = rng.standard_normal((400, 3)); x[17, 1] = np.nan; x[250, 0] = np.inf
with h5py.File("nan.h5", "w") as f: f["X"] = x
PY
printf 'data: d.h5\nout: two.h5\nfamily: [nig, gauss]\nmax_iter: 20\nquiet: true\n' > two.yaml
"$G" run two.yaml > /dev/null && rm two.yaml || { echo "setup: ghfit run failed"; exit 1; }   # a file of two fits
echo "my notes" > notres.h5
cp fit.h5 old.h5   # a ghfit fit result: only fit and run may replace it (gof and risk refuse it, issue 25)

# ---- eval -----------------------------------------------------------------------------------------
E=(eval --model fit.h5 --data d.h5)
accept "${E[@]}" --out s.h5 && has "data        d.h5:/X: 2000 rows x 3 columns" && rm -f s.h5
accept eval --model fit.h5:/fits/nig --data nan.h5 --out s.h5 && has "2 rows with non-finite values (first at row 17), to be flagged" && rm -f s.h5
refused "'--modle'"                   -- eval --modle fit.h5 --data d.h5 --out s.h5
refused "nofile.h5"                   -- eval --model nofile.h5 --data d.h5 --out s.h5
refused "nope"                        -- eval --model fit.h5:/fits/nope --data d.h5 --out s.h5
refused "holds 2 fits"                -- eval --model two.h5 --data d.h5 --out s.h5
refused "4 columns, but the fit nig"  -- eval --model fit.h5 --data d4.h5 --out s.h5
refused "/nope"                       -- "${E[@]}" --dataset /nope --out s.h5
refused "same file"                   -- "${E[@]}" --out d.h5
refused "same file"                   -- "${E[@]}" --out ./fit.h5
refused "notres.h5"                   -- "${E[@]}" --out notres.h5
refused "not a ghfit"                 -- "${E[@]}" --out old.h5
refused "--backend: 'tpu'"            -- "${E[@]}" --out s.h5 --backend tpu
refused "no-dir"                      -- "${E[@]}" --out no-dir/s.h5

# ---- sample ---------------------------------------------------------------------------------------
S=(sample --model fit.h5 --n 100 --seed 1)
accept "${S[@]}" --out x.h5 && has "model       fit.h5:/fits/nig: nig, d = 3" && rm -f x.h5
refused "'--sed'"                     -- sample --model fit.h5 --n 100 --sed 1 --out x.h5
refused "nofile.h5"                   -- sample --model nofile.h5 --n 100 --seed 1 --out x.h5
refused "nope"                        -- sample --model fit.h5:/fits/nope --n 100 --seed 1 --out x.h5
refused "same file"                   -- "${S[@]}" --out fit.h5
refused "notres.h5"                   -- "${S[@]}" --out notres.h5
refused "--n: invalid value '1.5'"    -- sample --model fit.h5 --n 1.5 --seed 1 --out x.h5
refused "float16"                     -- "${S[@]}" --out x.h5 --dtype float16

# ---- gof ------------------------------------------------------------------------------------------
F=(gof --model fit.h5 --data d.h5)
accept "${F[@]}" --out g.h5 --qq 20 && has "sample      all 2000 rows (float64, contiguous): all finite" && rm -f g.h5
refused "old.h5 exists and is not a ghfit gof output (root attribute content = \"gof\") (it is a ghfit fit result)" -- "${F[@]}" --out old.h5 --qq 20
accept "${F[@]}" --out g.h5 --qq 20 && accept "${F[@]}" --out g.h5 --qq 20 &&
  has "g.h5: an earlier output of this command (a ghfit gof output), to be replaced" && rm -f g.h5
n=$((n + 1)); CASE="check gof --bootstrap 9"   # valid; not run (the refits take a while)
"$G" check "${F[@]}" --out g.h5 --bootstrap 9 > c_out.txt 2> c_err.txt && [ ! -e g.h5 ] &&
  has "with 9 bootstrap replicates" || bad "check gof --bootstrap 9: exit $?"
accept gof --model fit.h5 --data nan.h5 --out g.h5 --drop-nonfinite && has "2 rows with non-finite values (first at row 17), to be dropped" && rm -f g.h5
refused "'--qqq'"                     -- gof --model fit.h5 --data d.h5 --out g.h5 --qqq 5
refused "nofile.h5"                   -- gof --model nofile.h5 --data d.h5 --out g.h5
refused "nope"                        -- gof --model fit.h5:/fits/nope --data d.h5 --out g.h5
refused "4 columns, but the fit nig"  -- gof --model fit.h5 --data d4.h5 --out g.h5
refused "/nope"                       -- "${F[@]}" --dataset /nope --out g.h5
refused "same file"                   -- "${F[@]}" --out d.h5
refused "notres.h5"                   -- "${F[@]}" --out notres.h5
refused "--qq: '0'"                   -- "${F[@]}" --out g.h5 --qq 0
refused "--bootstrap: '0'"            -- "${F[@]}" --out g.h5 --bootstrap 0
refused "2 rows contain non-finite values (first at row 17)" -- gof --model fit.h5 --data nan.h5 --out g.h5

# ---- risk -----------------------------------------------------------------------------------------
R=(risk --model fit.h5 --portfolios w.h5 --alpha 0.99,0.975)
accept "${R[@]}" --out r.h5 && has "portfolios  w.h5:/W: 20 portfolios x 3 weights" && rm -f r.h5
refused "'--alpah'"                   -- risk --model fit.h5 --portfolios w.h5 --alpah 0.99 --out r.h5
refused "nofile.h5"                   -- risk --model nofile.h5 --portfolios w.h5 --alpha 0.99 --out r.h5
refused "no fit named 'nope'"         -- risk --model fit.h5:/fits/nope --portfolios w.h5 --alpha 0.99 --out r.h5
refused "weights have 2 columns"      -- risk --model fit.h5 --portfolios w.h5:/W2 --alpha 0.99 --out r.h5
refused "w.h5:/Q"                     -- risk --model fit.h5 --portfolios w.h5:/Q --alpha 0.99 --out r.h5
refused "same file"                   -- "${R[@]}" --out w.h5
refused "notres.h5"                   -- "${R[@]}" --out notres.h5
refused "old.h5 exists and is not a ghfit risk output (root attribute content = \"risk\") (it is a ghfit fit result)" -- "${R[@]}" --out old.h5
accept "${R[@]}" --out r.h5 && accept "${R[@]}" --out r.h5 &&
  has "r.h5: an earlier output of this command (a ghfit risk output), to be replaced" && cp r.h5 rk.h5 && rm -f r.h5
refused "rk.h5 exists and is not a ghfit gof output (root attribute content = \"gof\") (it is a ghfit risk output)" -- "${F[@]}" --out rk.h5
refused "'1.5' is not a level"        -- risk --model fit.h5 --portfolios w.h5 --alpha 0.99,1.5 --out r.h5
refused "(non-finite weights)"        -- risk --model fit.h5 --portfolios w.h5:/Wnan --alpha 0.99 --out r.h5

# ---- usage ----------------------------------------------------------------------------------------
n=$((n + 1)); CASE="check eval --help"
"$G" check eval --help > c_out.txt 2> c_err.txt && grep -q "ghfit check eval|gof|sample|risk" c_out.txt &&
  echo "ok   [$CASE]" || bad "exit $?"

echo "check_post: $n cases, $([ $fail -eq 0 ] && echo all passed || echo FAILURES)"
exit $fail
