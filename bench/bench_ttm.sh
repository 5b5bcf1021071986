#!/usr/bin/env bash
# Time to the maximum (issue 24): the wall time from `mpirun` to the written
# result file of `ghfit fit --model M` with default options (SQUAREM, 4 GH
# starts, --tol 1e-10), for GH, NIG, t and VG on the same GH data (N rows,
# p = -1.5, a = 2, b = 1, seed 7, as bench_init.sh and bench_cpu.sh), d = 10,
# 3 and 50, NP ranks x 1 OpenMP thread, side by side in one run with a build
# of an earlier commit (--before) and, with --plain, with plain EM
# (--accel none) of the current build.
#
# Each configuration runs REPS times, the builds alternating within a round;
# the fastest wall time is kept with its profile (the machine may be shared).
# Columns: wall (mpirun to the written file, measured outside), the fit's own
# profile (max over ranks, /fits/M/profile): read, init (the starts: GH's
# include its nested NIG fit), EM (estep + allreduce + mstep), post (the
# rest of the fit's total: moments, the end-of-fit checks' own work, standard
# errors when asked), and launch + write (wall - total: mpirun, MPI_Init,
# opening the data, writing the result); iterations (with SQUAREM every
# extrapolated point is one, so iterations are E-steps of the EM); the final
# log-likelihood and its relative difference from the --before build's.
#
# Peers: R's ghyp is not run by bench/peers (it is not installed here);
# normix (bench/peers/normix_run.py converge: its own default_init and
# BatchEMFitter(tol = 1e-10, max_iter = 500), GH and NIG only) runs with
# --peers when bench/peers/run.sh has made .venv-bench, each run capped at
# 600 s; otherwise the table says it was skipped.
#
# usage: bench/bench_ttm.sh [--build DIR] [--before COMMIT] [--n N] [--ds "10 3 50"]
#            [--models "gh nig t vg"] [--reps R] [--np NP] [--plain] [--peers]
#   --build   the current build (default build/)
#   --before  a commit to compare with, exported with git archive and built
#             into build-ttm-before/ (CUDA off); default: none
# Writes results/bench_ttm.md and prints it.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
B=$here/build; BEFORE=""; N=1000000; DS="10 3 50"; MODELS="gh nig t vg"; REPS=3; NP=2; PLAIN=0; PEERS=0
while [ $# -gt 0 ]; do
  case $1 in
    --build) B=$2; shift 2;; --before) BEFORE=$2; shift 2;; --n) N=$2; shift 2;; --ds) DS=$2; shift 2;;
    --models) MODELS=$2; shift 2;; --reps) REPS=$2; shift 2;; --np) NP=$2; shift 2;;
    --plain) PLAIN=1; shift;; --peers) PEERS=1; shift;;
    *) echo "bench_ttm: unknown option $1" >&2; exit 2;;
  esac
done
. "$here/scripts/mpienv.sh"
export OMP_NUM_THREADS=1
py=/usr/bin/python3
W=$here/results/bench_ttm; mkdir -p "$W"
[ -x "$B/ghfit" ] || { echo "bench_ttm: build $B first (scripts/build.sh)" >&2; exit 2; }
NOW=$(git -C "$here" rev-parse --short=12 HEAD)$(git -C "$here" diff --quiet HEAD -- src kernels || echo "+dirty")

OB=$here/build-ttm-before
if [ -n "$BEFORE" ] && { [ ! -x "$OB/ghfit" ] || [ "$(cat "$OB/.commit" 2>/dev/null)" != "$BEFORE" ]; }; then
  src=$OB/src; rm -rf "$src"; mkdir -p "$src"
  git -C "$here" archive "$BEFORE" | tar -x -C "$src"
  cmake -S "$src" -B "$OB" -DCMAKE_BUILD_TYPE=Release -DGHFIT_CUDA=OFF -DGHFIT_TESTS=OFF -DGHFIT_BENCH=OFF >/dev/null
  cmake --build "$OB" -j "$(getconf _NPROCESSORS_ONLN)" --target ghfit >/dev/null
  echo "$BEFORE" > "$OB/.commit"
fi

# one fit: prints "wall read init em post rest iters loglik"
run_one() { # binary data model extra-options...
  local g=$1 data=$2 m=$3; shift 3
  local r=$W/r_$$.h5 t0 t1
  rm -f "$r"
  t0=$(date +%s.%N)
  mpirun -np "$NP" --bind-to none "$g" fit --data "$data" --model "$m" --out "$r" --quiet "$@" >/dev/null
  t1=$(date +%s.%N)
  "$py" - "$r" "$m" "$t0" "$t1" <<'PY'
import sys, h5py, numpy as np
g = h5py.File(sys.argv[1], "r")["fits/" + sys.argv[2]]
names = [n.decode() if isinstance(n, bytes) else n for n in g["profile/phase_names"][()]]
s = np.atleast_2d(g["profile/seconds"][()]); ix = {n: i for i, n in enumerate(names)}
col = lambda n: s[:, ix[n]]
em = col("estep") + col("allreduce") + col("mstep")
post = col("total") - col("read") - col("init") - em
wall = float(sys.argv[4]) - float(sys.argv[3])
print(f'{wall:.4f} {col("read").max():.4f} {col("init").max():.4f} {em.max():.4f} {post.max():.4f} '
      f'{wall - col("total").max():.4f} {int(g.attrs["n_iter"])} {float(g.attrs["loglik"])!r}')
PY
  rm -f "$r"
}

rep=$W/table.md
{
echo "# Time to the maximum: ghfit fit, N = $N, $NP ranks x 1 thread"
echo
echo "now: $NOW${BEFORE:+; before: $BEFORE}; $(getconf _NPROCESSORS_ONLN) cores ($(lscpu | sed -n 's/^Model name: *//p')); $(date -u +%F);"
echo "fastest of $REPS runs (builds alternating); seconds; phases max over ranks from the fit's profile."
echo
echo "| d | model | build | accel | wall s | read | init | EM | post | launch+write | iterations | loglik | init/EM | rel. to before | load avg |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
} > "$rep"
for d in $DS; do
  data=$W/gh_${N}_$d.h5
  [ -f "$data" ] || "$B/ghfit" generate --model gh --dim "$d" --n "$N" --seed 7 --p -1.5 --a 2 --b 1 --out "$data" >/dev/null
  for m in $MODELS; do
    cfgs=("now|squarem|$B/ghfit|")
    [ -n "$BEFORE" ] && cfgs=("before|squarem|$OB/ghfit|" "${cfgs[@]}")
    [ "$PLAIN" = 1 ] && cfgs+=("now|none|$B/ghfit|--accel none")
    declare -A best=()
    for r in $(seq "$REPS"); do
      for c in "${cfgs[@]}"; do
        IFS='|' read -r name acc bin extra <<<"$c"
        # shellcheck disable=SC2086
        line=$(run_one "$bin" "$data" "$m" $extra)
        k="$name|$acc"
        if [ -z "${best[$k]:-}" ] || awk -v a="${line%% *}" -v b="${best[$k]%% *}" 'BEGIN{exit !(a < b)}'; then best[$k]=$line; fi
      done
    done
    llb=""; [ -n "$BEFORE" ] && llb=$(awk '{print $8}' <<<"${best[before|squarem]}")
    la=$(cut -d' ' -f1-3 /proc/loadavg)
    for c in "${cfgs[@]}"; do
      IFS='|' read -r name acc bin extra <<<"$c"
      awk -v d="$d" -v m="$m" -v n="$name" -v a="$acc" -v llb="$llb" -v la="$la" '{
        rel = llb == "" ? "-" : sprintf("%.1e", ($8 - llb) / (llb < 0 ? -llb : llb));
        printf "| %s | %s | %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %d | %.10e | %.2f | %s | %s |\n",
          d, m, n, a, $1, $2, $3, $4, $5, $6, $7, $8, ($4 > 0 ? $3 / $4 : 0), rel, la }' <<<"${best[$name|$acc]}" >> "$rep"
    done
    unset best
    echo "  d=$d $m done" >&2
  done
done

# ---- peers --------------------------------------------------------------
venv=${GHF_BENCH_VENV:-$here/.venv-bench}
{
echo
echo "R ghyp: not run (bench/peers does not run it, and R is not installed on this machine)."
if [ "$PEERS" = 1 ] && [ -x "$venv/bin/python" ]; then
  echo
  echo "normix (bench/peers/normix_run.py converge, config jax/jax/newton, tol 1e-10, max_iter 500, cap 600 s; GH and NIG):"
  echo
  echo "| d | model | normix s (init + fit) | iterations | converged | loglik |"
  echo "|---|---|---|---|---|---|"
  for d in $DS; do
    for m in $MODELS; do
      case $m in gh|nig) ;; *) continue;; esac
      out=$(timeout 600 "$venv/bin/python" "$here/bench/peers/normix_run.py" converge --data "$W/gh_${N}_$d.h5" \
            --model "$m" --config jax/jax/newton --tol 1e-10 --max-iter 500 2>/dev/null | grep '"event": "done"' || true)
      if [ -n "$out" ]; then
        "$py" -c 'import json,sys; r=json.loads(sys.argv[1]); print(f"| {sys.argv[2]} | {sys.argv[3]} | {r[\"total_s\"]:.1f} | {r[\"n_iter\"]} | {r[\"converged\"]} | {r[\"ll_total\"]:.10e} |")' "$out" "$d" "$m"
      else
        echo "| $d | $m | > 600 (capped) | - | - | - |"
      fi
    done
  done
else
  echo "normix: skipped ($([ "$PEERS" = 1 ] && echo "no $venv: bash bench/peers/run.sh --smoke makes it (needs Python >= 3.12 and PyPI)" || echo "pass --peers"))."
fi
} >> "$rep"
cat "$rep"
