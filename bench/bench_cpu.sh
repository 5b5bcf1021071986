#!/usr/bin/env bash
# The CPU E-step targets of issue 13 side by side with a build of an earlier
# commit, in one run: GH, N = 1e6, d = 3, 10, 50, 2 ranks x 1 thread.
#
# For each case, REPS rounds, the two builds alternating within each round:
#   fit:   ghfit fit --tol 0 --accel none --starts 1 --max-iter ITERS; ms per
#          iteration = (estep + allreduce + mstep, max over ranks) / (n_iter + 1)
#          from the result file's profile (wall clock);
#   estep: bench_estep on the same law (N, d), 2 ranks: the E-step alone, wall
#          and CPU time per call (CPU time per rank is what the wall time
#          would be on an otherwise idle 2-core machine);
# then medians, ratios (before / now) and the floor per rank that bench_estep
# estimates (max of one streaming pass over x and the least arithmetic at the
# measured FMA rate).  Writes results/bench_cpu.md and prints it.
#
# usage: bench/bench_cpu.sh [--build DIR] [--before COMMIT] [--reps R] [--iters K] [--ds "3 10 50"]
#   --build   the current build (default build/; must have bench_estep)
#   --before  the commit to compare with (default 49e0f6c, before issue 13);
#             exported with git archive and built into build-bench-before/
#             (CUDA off), bench_estep compiled against it (-DGHF_BENCH_BEFORE)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
B=$here/build; BEFORE=49e0f6c; REPS=5; IT=10; DS="3 10 50"; N=1000000
while [ $# -gt 0 ]; do
  case $1 in
    --build) B=$2; shift 2;; --before) BEFORE=$2; shift 2;; --reps) REPS=$2; shift 2;;
    --iters) IT=$2; shift 2;; --ds) DS=$2; shift 2;; --n) N=$2; shift 2;;
    *) echo "bench_cpu: unknown option $1" >&2; exit 2;;
  esac
done
. "$here/scripts/mpienv.sh"
export OMP_NUM_THREADS=1
py=/usr/bin/python3
out=$here/results; W=$out/bench_cpu; mkdir -p "$W"
[ -x "$B/ghfit" ] && [ -x "$B/bench_estep" ] || { echo "bench_cpu: build $B first (scripts/build.sh)" >&2; exit 2; }

# the earlier build, with bench_estep compiled against it
OB=$here/build-bench-before
if [ ! -x "$OB/bench_estep" ] || [ "$(cat "$OB/.commit" 2>/dev/null)" != "$BEFORE" ]; then
  src=$OB/src; rm -rf "$src"; mkdir -p "$src"
  git -C "$here" archive "$BEFORE" | tar -x -C "$src"
  cp "$here/bench/bench_estep.c" "$src/bench/"
  if grep -qs 'add_executable(bench_estep' "$src/bench/estep.cmake"; then
    # a commit that has bench_estep already: today's source, built the same way
    echo 'target_compile_definitions(bench_estep PRIVATE GHF_BENCH_BEFORE=1)' >> "$src/bench/estep.cmake"
  else
    cat > "$src/bench/zz_estep.cmake" <<'EOF'
add_executable(bench_estep ${CMAKE_SOURCE_DIR}/bench/bench_estep.c)
target_compile_definitions(bench_estep PRIVATE GHF_BENCH_BEFORE=1)
target_link_libraries(bench_estep PRIVATE ghfit_core)
EOF
  fi
  cmake -S "$src" -B "$OB" -DCMAKE_BUILD_TYPE=Release -DGHFIT_CUDA=OFF -DGHFIT_TESTS=OFF >/dev/null
  cmake --build "$OB" -j "$(getconf _NPROCESSORS_ONLN)" --target ghfit bench_estep >/dev/null
  echo "$BEFORE" > "$OB/.commit"
fi
NOW=$(git -C "$here" rev-parse --short=12 HEAD)$(git -C "$here" diff --quiet || echo "+dirty")

fit_ms() { # build data -> ms/iter
  local g=$1 data=$2 r=$W/r_$$.h5
  mpirun -np 2 --bind-to none "$g" fit --data "$data" --model gh --out "$r" --max-iter "$IT" --tol 0 \
      --accel none --starts 1 --quiet >/dev/null
  $py - "$r" <<'PY'
import sys, h5py
g = h5py.File(sys.argv[1], "r")["fits/gh"]
names = [n.decode() if isinstance(n, bytes) else n for n in g["profile/phase_names"][()]]
mx = dict(zip(names, g["profile/max"][()]))
print(f'{1e3 * (mx["estep"] + mx["allreduce"] + mx["mstep"]) / (int(g.attrs["n_iter"]) + 1):.3f}')
PY
  rm -f "$r"
}
med() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END{ if (NR%2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2 }'; }

target() { case $1 in 3) echo 10;; 10) echo 20;; 50) echo 80;; *) echo "-";; esac; }
rep=$out/bench_cpu.md
{
echo "# CPU E-step: issue 13 targets (GH, N = $N, 2 ranks x 1 thread)"
echo
echo "now: $NOW; before: $BEFORE; $(getconf _NPROCESSORS_ONLN) cores ($(lscpu | sed -n 's/^Model name: *//p')); $(date -u +%F);"
echo "$REPS rounds, builds alternating; medians. fit: $IT plain EM iterations, ms/iter from the profile"
echo "(wall). estep: bench_estep, wall and CPU time per call, max over ranks. Floor: per rank (bench_estep)."
echo
echo "| d | target ms/iter | fit before | fit now | ratio | estep wall before | now | estep CPU before | now | ratio (CPU) | floor/rank | now / floor | load avg |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
} > "$rep"
for d in $DS; do
  data=$W/gh_${N}_$d.h5
  [ -f "$data" ] || "$B/ghfit" generate --model gh --dim "$d" --n "$N" --seed 7 --p -1.5 --a 2 --b 1 --out "$data" >/dev/null
  fb=""; fn=""; wb=""; wn=""; cb=""; cn=""; fl=""
  for r in $(seq "$REPS"); do
    fb="$fb $(fit_ms "$OB/ghfit" "$data")"
    fn="$fn $(fit_ms "$B/ghfit" "$data")"
    l=$(mpirun -np 2 --bind-to none "$OB/bench_estep" --n "$N" --d "$d" --reps 5)
    wb="$wb $(sed -nE 's/.*wall ([0-9.]+) ms.*/\1/p' <<<"$l")"; cb="$cb $(sed -nE 's/.*cpu ([0-9.]+) ms.*/\1/p' <<<"$l")"
    l=$(mpirun -np 2 --bind-to none "$B/bench_estep" --n "$N" --d "$d" --reps 5)
    wn="$wn $(sed -nE 's/.*wall ([0-9.]+) ms.*/\1/p' <<<"$l")"; cn="$cn $(sed -nE 's/.*cpu ([0-9.]+) ms.*/\1/p' <<<"$l")"
    fl="$fl $(sed -nE 's/^floor per rank: ([0-9.]+) ms.*/\1/p' <<<"$l")"
    fd=$(sed -nE 's/^floor per rank: [0-9.]+ ms = (.*)$/\1/p' <<<"$l")
  done
  FB=$(med <<<"$fb"); FN=$(med <<<"$fn"); WB=$(med <<<"$wb"); WN=$(med <<<"$wn")
  CB=$(med <<<"$cb"); CN=$(med <<<"$cn"); FL=$(med <<<"$fl")
  la=$(cut -d' ' -f1-3 /proc/loadavg)
  awk -v d="$d" -v t="$(target "$d")" -v fb="$FB" -v fn="$FN" -v wb="$WB" -v wn="$WN" -v cb="$CB" -v cn="$CN" \
      -v fl="$FL" -v la="$la" 'BEGIN{ printf "| %s | %s | %.1f | %.1f | %.2fx | %.1f | %.1f | %.1f | %.1f | %.2fx | %.1f | %.1fx | %s |\n",
      d, t, fb, fn, fb/fn, wb, wn, cb, cn, cb/cn, fl, cn/fl, la }' >> "$rep"
  echo "  d=$d: fit ms/iter before [$fb ] now [$fn ]; estep cpu before [$cb ] now [$cn ]; floor: $fd" >&2
done
{
echo
echo "Targets are per iteration of a fit on an otherwise idle machine; on a shared one compare the"
echo "E-step's CPU time per rank (it excludes waiting for the CPU) and the ratios."
} >> "$rep"
cat "$rep"
