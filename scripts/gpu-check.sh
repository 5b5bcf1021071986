#!/usr/bin/env bash
# gpu-check.sh - run the CUDA backend's GPU tests and benchmark on a machine with
# an NVIDIA GPU, in well under 8 minutes, writing everything under $OUT
# (or ./gpu-check-out).
#
# Binaries: from .carry/ghfit-carry.tar.xz (scripts/make-carry.sh, made on the
# build machine: the GPU machine may have no MPI/HDF5/BLAS) when present;
# otherwise a local build in build-gpu (needs those packages there).
#
#   bash scripts/gpu-check.sh            # everything
#   QUICK=1 bash scripts/gpu-check.sh    # the benchmark with N / 100
#
# Outputs (four files, so that all come back from a device run): summary.txt
# (one line per step, with status), bench_cuda.txt (the benchmark table),
# machine.txt (nvidia-smi, environment, ldd of every binary) and logs.txt (every
# step's full log, one after another).  Exit status: 0 if every test
# passed (a skip on a GPU machine counts as a failure: it means CUDA saw no device).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUTDIR=${OUT:-$ROOT/gpu-check-out}
mkdir -p "$OUTDIR"
: > "$OUTDIR/summary.txt"
T0=$(date +%s)
FAILS=0
log() { echo "[gpu-check +$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUTDIR/summary.txt"; }
BUDGET=${BUDGET:-460}
left() { echo $(( BUDGET - ($(date +%s) - T0) )); } # seconds left of the budget (8 minutes by default)

# ---- the machine --------------------------------------------------------
{ nvidia-smi 2>&1 || echo "nvidia-smi failed"; } > "$OUTDIR/nvidia-smi.txt"
CUDA_HOME=${CUDA_HOME:-}
if [ -z "$CUDA_HOME" ]; then
  if command -v nvcc >/dev/null; then CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
  else CUDA_HOME=/usr/local/cuda; fi
fi
log "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
log "driver CUDA version: $(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1); CUDA_HOME=$CUDA_HOME"

# CUDA libraries: the toolkit's, plus wherever libnccl lives
CUDA_LIBS="$CUDA_HOME/lib64:$CUDA_HOME/lib:$CUDA_HOME/targets/x86_64-linux/lib"

# ---- binaries -----------------------------------------------------------
BUNDLE=$ROOT/.carry/ghfit-carry.tar.xz
if [ -f "$BUNDLE" ]; then
  W=${TMPDIR:-/tmp}/ghfit-carry.$$
  mkdir -p "$W" && tar -C "$W" -xJf "$BUNDLE" || { log "FAIL: cannot unpack $BUNDLE"; exit 1; }
  BIN=$W/bin
  export LD_LIBRARY_PATH="$W/lib:$CUDA_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # the CUDA 13 runtime, if the toolkit here has another one
  if ! ldd "$BIN/ghfit" | grep -q 'libcudart.so.13 => /'; then
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$W/lib/cuda"
  fi
  # relocated Open MPI (singleton init and mpirun need its plugins and help files)
  export OPAL_PREFIX=$W/root PMIX_INSTALL_PREFIX=$W/root PATH=$W/root/bin:$PATH
  log "using carried binaries ($(cat "$W/README" 2>/dev/null | head -2 | tr '\n' ' '))"
else
  BIN=$ROOT/build-gpu
  log "no carried bundle: building in $BIN"
  if ! timeout "$(left)" bash -c "cmake -S '$ROOT' -B '$BIN' -DGHFIT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
       -DGHFIT_BENCH=ON > '$OUTDIR/build.log' 2>&1 && cmake --build '$BIN' -j\$(nproc) \
       --target ghfit test_cuda_estep test_cuda_nodev bench_cuda >> '$OUTDIR/build.log' 2>&1"; then
    log "FAIL: build (see build.log; no MPI/HDF5 here? run scripts/make-carry.sh on the build machine and carry .carry)"
    exit 1
  fi
fi
# Libraries still unresolved (cuBLAS, NCCL, cudart may live outside the
# loader's path, e.g. in Python wheels: nvidia/cu13/lib, nvidia/nccl/lib):
# look for each one by name.
PYSITE=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null || true)
for lib in $(ldd "$BIN/ghfit" "$BIN/test_cuda_estep" 2>/dev/null | awk '/not found/{print $1}' | sort -u); do
  hit=$(find $CUDA_HOME/ /usr/local/ /usr/lib/ /opt/ $PYSITE -name "$lib" 2>/dev/null | head -1)
  if [ -n "$hit" ]; then
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$hit")"
    log "found $lib in $(dirname "$hit")"
  else
    log "library $lib not found anywhere"
  fi
done
log "libnccl.so.2: $(ldd "$BIN/ghfit" | awk '/libnccl.so.2/{print $3}')"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_plm=isolated               # singleton MPI_Init without ssh/rsh
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_btl=self,vader OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
export CUDA_DEVICE_ORDER=PCI_BUS_ID PMIX_MCA_pcompress_base_silence_warning=1
export PMIX_MCA_mca_base_component_show_load_errors=0 OMPI_MCA_mca_base_component_show_load_errors=0
env | grep -E '^(LD_LIBRARY_PATH|OPAL_PREFIX|PMIX|OMPI_|CUDA|PATH|NCCL)' | sort > "$OUTDIR/env.txt"
: > "$OUTDIR/ldd.txt"
for b in ghfit test_cuda_estep test_cuda_nodev bench_cuda h5get; do
  echo "== $b" >> "$OUTDIR/ldd.txt"
  ldd "$BIN/$b" >> "$OUTDIR/ldd.txt" 2>&1
  if ldd "$BIN/$b" | grep -q 'not found'; then
    log "FAIL: $b has unresolved libraries: $(ldd "$BIN/$b" | grep 'not found' | awk '{print $1}' | tr '\n' ' ')"
    FAILS=$((FAILS + 1))
  fi
done

# ---- tests --------------------------------------------------------------
run_step() { # name timeout cmd...  (77 = skipped)
  local name=$1 to=$2; shift 2
  local t=$(( to < $(left) ? to : $(left) ))
  if [ "$t" -le 5 ]; then log "SKIP $name: out of time"; return; fi
  local s=$(date +%s)
  timeout "$t" "$@" > "$OUTDIR/$name.log" 2>&1
  local rc=$?
  local dt=$(( $(date +%s) - s ))
  case $rc in
    0) log "PASS $name (${dt}s)";;
    77) log "SKIPPED $name (${dt}s): $(tail -1 "$OUTDIR/$name.log")"; SKIPPED="$SKIPPED $name";;
    124) log "FAIL $name: timed out after ${t}s"; FAILS=$((FAILS + 1));;
    *) log "FAIL $name: exit $rc (${dt}s): $(grep -m3 -E 'FAIL|rror' "$OUTDIR/$name.log" | tr '\n' ' ' | cut -c1-400)"; FAILS=$((FAILS + 1));;
  esac
  return $rc
}
SKIPPED=""
run_step test_cuda_nodev 60 "$BIN/test_cuda_nodev"   # expected: skipped (77) on a GPU machine
run_step test_cuda_estep 200 "$BIN/test_cuda_estep"
if [ "${SKIPPED#* test_cuda_estep}" != "$SKIPPED" ]; then
  log "FAIL: the CUDA runtime sees no device although this is a GPU machine (driver older than the CUDA 13 runtime?)"
  FAILS=$((FAILS + 1))
fi
grep -E '^d=' "$OUTDIR/test_cuda_estep.log" 2>/dev/null | tee -a "$OUTDIR/summary.txt"
if command -v mpirun >/dev/null; then
  run_step test_cuda_estep_np2 200 mpirun -np 2 --oversubscribe "$BIN/test_cuda_estep"
else
  log "SKIP test_cuda_estep_np2: no mpirun"
fi

# full fits, CPU vs CUDA backend (log-likelihood to 1e-10, same iterations)
run_step cuda_fit 150 bash "$ROOT/tests/cuda_fit.sh" "$BIN/ghfit" "$BIN/h5get" "${TMPDIR:-/tmp}/ghfit-cuda-fit.$$"
grep -E '^(d3|d10|d40|2 ranks|FAIL)' "$OUTDIR/cuda_fit.log" 2>/dev/null | tee -a "$OUTDIR/summary.txt"
# weights, --missing em and float32 storage: CUDA vs CPU / float64 fits
run_step cuda_wmf 150 bash "$ROOT/tests/cuda_wmf.sh" "$BIN/ghfit" "$BIN/h5get" "${TMPDIR:-/tmp}/ghfit-cuda-wmf.$$"
grep -E '(vs|FAIL)' "$OUTDIR/cuda_wmf.log" 2>/dev/null | tee -a "$OUTDIR/summary.txt"

# sweeps on the GPU with 1, 2 and 4 ranks (groups share the one GPU), against the CPU sweep
run_step cuda_sweep 120 bash "$ROOT/tests/cuda_sweep.sh" "$BIN/ghfit" "$BIN/h5get" "${TMPDIR:-/tmp}/ghfit-cuda-sweep.$$"
grep -E '(ranks|FAIL)' "$OUTDIR/cuda_sweep.log" 2>/dev/null | tee -a "$OUTDIR/summary.txt"

# ---- benchmark ----------------------------------------------------------
BARGS="--iters 10 --out $OUTDIR/bench_cuda.txt"
[ "${QUICK:-0}" = 1 ] && BARGS="$BARGS --quick"
run_step bench_cuda 240 "$BIN/bench_cuda" $BARGS
[ -f "$OUTDIR/bench_cuda.txt" ] && cat "$OUTDIR/bench_cuda.txt" >> "$OUTDIR/summary.txt"

# the 2,000-fit rolling-window sweep (bench/sweep_bench.sh): 2 CPU ranks
# against the one GPU on 1 and 4 ranks, fitting and result-file time apart
# (200 windows instead of 1,000 when time is short)
if command -v mpirun >/dev/null && [ "$(left)" -gt 120 ]; then
  SW=${TMPDIR:-/tmp}/ghfit-sweep.$$; NWIN=1000; [ "$(left)" -gt 240 ] || NWIN=200
  for cfg in "cpu 2" "cuda 1" "cuda 4"; do
    set -- $cfg
    if [ "$(left)" -gt 60 ]; then
      BACKEND=$1 timeout $(( $(left) - 30 )) bash "$ROOT/bench/sweep_bench.sh" "$BIN/ghfit" - "$SW" "$2" "$NWIN" \
        > "$OUTDIR/sweep_$1_$2.log" 2>&1 || echo "sweep $1 on $2 ranks: failed or timed out" >> "$OUTDIR/sweep_$1_$2.log"
      grep -E '^(wrote|sweep|  gh|  nig)' "$OUTDIR/sweep_$1_$2.log" | sed "s/^/[$1 x$2] /" | tee -a "$OUTDIR/summary.txt"
    fi
  done
  rm -rf "$SW"
fi

# an end-to-end fit at scale: N = 1e7, d = 10 from HDF5, GH, 20 iterations,
# CUDA and CPU backends (profile: read init estep allreduce mstep write total)
if [ "${FITSCALE:-1}" = 1 ] && [ "$(left)" -gt 90 ]; then
  FW=${TMPDIR:-/tmp}/ghfit-fitscale.$$; mkdir -p "$FW"
  {
    s=$(date +%s)
    "$BIN/ghfit" generate --model gh --dim 10 --n 10000000 --seed 7 --p 1.2 --a 2 --b 1 --out "$FW/big.h5" >/dev/null &&
      echo "generate N=1e7 d=10: $(( $(date +%s) - s )) s"
    for be in cuda cpu; do
      if timeout 60 "$BIN/ghfit" fit --data "$FW/big.h5" --model gh --backend $be --max-iter 20 --tol 1e-300 \
           --out "$FW/fit_$be.h5" --quiet; then
        it=$("$BIN/h5get" "$FW/fit_$be.h5" /fits/gh n_iter); ll=$("$BIN/h5get" "$FW/fit_$be.h5" /fits/gh loglik)
        echo "fit --backend $be: $it iterations, loglik $ll; profile max seconds" \
             "(read init estep allreduce mstep write total):" \
             "$("$BIN/h5get" "$FW/fit_$be.h5" /fits/gh/profile/max | tr '\n' ' ')"
      else
        echo "fit --backend $be: failed or timed out"
      fi
    done
  } > "$OUTDIR/fitscale.log" 2>&1
  cat "$OUTDIR/fitscale.log" | tee -a "$OUTDIR/summary.txt"
  rm -rf "$FW"
fi

# memory checker over the E-step test, where it is allowed (not under gVisor)
if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null && [ "$(left)" -gt 60 ]; then
  GHF_TEST_QUICK=1 timeout $(( $(left) - 10 )) compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 \
    "$BIN/test_cuda_estep" > "$OUTDIR/memcheck.log" 2>&1
  rc=$?
  if grep -q -i 'not supported\|LibraryNotLoaded' "$OUTDIR/memcheck.log"; then log "memcheck: not available here"
  elif [ $rc -eq 0 ]; then log "PASS memcheck: $(grep -m1 'ERROR SUMMARY' "$OUTDIR/memcheck.log")"
  elif [ $rc -eq 124 ]; then log "memcheck: timed out (not counted)"
  else log "FAIL memcheck: exit $rc: $(grep -m3 -E 'ERROR SUMMARY|Invalid|FAIL' "$OUTDIR/memcheck.log" | tr '\n' ' ')"; FAILS=$((FAILS + 1))
  fi
fi

# shared-memory races and barrier misuse in the wide fused kernel (12 < d <= 128)
if [ "${SANITIZE:-1}" = 1 ] && command -v compute-sanitizer >/dev/null && [ "$(left)" -gt 60 ]; then
  for tool in racecheck synccheck; do
    [ "$(left)" -gt 30 ] || break
    GHF_TEST_QUICK=1 GHF_TEST_WIDE_ONLY=1 timeout $(( $(left) - 10 )) compute-sanitizer --tool $tool \
      --error-exitcode 3 "$BIN/test_cuda_estep" > "$OUTDIR/$tool.log" 2>&1
    rc=$?
    if grep -q -i 'not supported\|LibraryNotLoaded' "$OUTDIR/$tool.log"; then log "$tool: not available here"
    elif [ $rc -eq 0 ]; then log "PASS $tool (wide kernel): $(grep -m1 'ERROR SUMMARY\|RACECHECK SUMMARY' "$OUTDIR/$tool.log")"
    elif [ $rc -eq 124 ]; then log "$tool: timed out (not counted)"
    else log "FAIL $tool: exit $rc: $(grep -m3 -E 'SUMMARY|hazard|Barrier|FAIL' "$OUTDIR/$tool.log" | tr '\n' ' ')"; FAILS=$((FAILS + 1))
    fi
  done
fi

# fold the per-step logs and the machine description into two files
{ for f in nvidia-smi.txt env.txt ldd.txt; do echo "===== $f"; cat "$OUTDIR/$f"; done; } > "$OUTDIR/machine.txt" 2>/dev/null
rm -f "$OUTDIR/nvidia-smi.txt" "$OUTDIR/env.txt" "$OUTDIR/ldd.txt"
: > "$OUTDIR/logs.txt"
for f in "$OUTDIR"/*.log; do
  [ -f "$f" ] || continue
  { echo "===== $(basename "$f")"; cat "$f"; } >> "$OUTDIR/logs.txt"
  rm -f "$f"
done
[ -n "${W:-}" ] && rm -rf "$W"
log "done: $FAILS failure(s)"
[ "$FAILS" -eq 0 ]
