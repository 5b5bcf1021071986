#!/usr/bin/env bash
# Sweep checkpoint throughput (a benchmark, not a test): many tiny windows
# (NIG, d = 2, 16 rows each, at most 20 iterations) with `ghfit run
# --checkpoint`, and the same without a checkpoint.  Prints the fits per
# second over the first, middle and last tenth of the fits and the largest
# size the checkpoint files reached.  With checkpoints rewritten whole every
# second the rate fell as the sweep went on (7,600 -> 4,200 fits/s after
# 164,000 fits); appending to the log of finished fits keeps it flat.
# One rank by default: rank 0 then fits and checkpoints in turn, so the
# rate shows the checkpoint's cost directly (with several groups the last
# tenth is the slowest group's alone).
# usage: bench/sweep_ckpt_bench.sh GHFIT [WORKDIR] [NP] [WINDOWS]
set -euo pipefail
G=$1; W=${2:-/tmp/ghfit-sweep-ckpt-bench}; NP=${3:-1}; NW=${4:-200000}
mkdir -p "$W"; cd "$W"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMP_NUM_THREADS=1 HDF5_USE_FILE_LOCKING=FALSE
N=$((NW * 16))
if [ ! -e tiny.h5 ] || [ "$(cat tiny.n 2>/dev/null)" != "$N" ]; then
  "$G" generate --model nig --dim 2 --n $N --seed 3 --out tiny.h5 > /dev/null
  echo $N > tiny.n
fi
cat > tiny.yaml <<YAML
data: tiny.h5
out: tiny-out.h5
family: nig
tol: 1e-6
max_iter: 20
windows: {start: 0, length: 16, step: 16, count: $NW}
quiet: false
backend: cpu
YAML
# the rate over tenths of the fits, from the time each progress line arrives,
# and the bytes the ranks wrote per fit (write() calls, /proc/PID/io wchar:
# progress lines and checkpoints) over the same tenths - a measure that does
# not depend on the machine's load
measure() { # LABEL [run overrides]
  local label=$1; shift
  rm -f ck.h5 ck_prev.h5 ck.h5.done tiny-out.h5
  mpirun -np "$NP" "$G" run tiny.yaml "$@" | /usr/bin/python3 -c '
import sys, time, os, threading, bisect
label, n, exe = sys.argv[1], int(sys.argv[2]), os.path.realpath(sys.argv[3])
stamps, samples, peak, done = [], [], [0], [False]
def ranks():
    out = []
    for p in os.listdir("/proc"):
        try:
            a = open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")
            if os.path.realpath(a[0].decode()) == exe and a[1] == b"run": out.append(p)
        except (OSError, IndexError, ValueError): pass
    return out
def wchar(pids):
    s = 0
    for p in pids:
        try: s += int([l for l in open(f"/proc/{p}/io") if l.startswith("wchar")][0].split()[1])
        except (OSError, IndexError): pass
    return s
def watch():
    pids = []
    while not done[0]:
        if not pids: pids = ranks()
        s = sum(os.path.getsize(f) for f in ("ck.h5", "ck_prev.h5", "ck.h5.done") if os.path.exists(f))
        peak[0] = max(peak[0], s); samples.append((time.monotonic(), wchar(pids))); time.sleep(0.1)
t = threading.Thread(target=watch); t.start()
for line in sys.stdin:
    if line.startswith("["): stamps.append(time.monotonic())
done[0] = True; t.join()
def rate(a, b):
    i, j = int(a * len(stamps)), max(int(b * len(stamps)) - 1, int(a * len(stamps)) + 1)
    return (j - i) / (stamps[j] - stamps[i]) if stamps[j] > stamps[i] else float("nan")
def wrote(a, b):  # bytes written per fit between the a-th and b-th fraction of the fits
    ts = [x[0] for x in samples]
    i, j = int(a * len(stamps)), min(int(b * len(stamps)) - 1, len(stamps) - 1)
    si, sj = bisect.bisect_left(ts, stamps[i]), bisect.bisect_left(ts, stamps[j]) - 1
    if sj <= si: return float("nan")
    fi, fj = bisect.bisect_left(stamps, samples[si][0]), bisect.bisect_left(stamps, samples[sj][0])
    return (samples[sj][1] - samples[si][1]) / max(1, fj - fi)
print(f"{label:28s} {len(stamps)} fits: {rate(0.0, 0.1):6.0f} fits/s (first tenth) {rate(0.45, 0.55):6.0f} (middle) "
      f"{rate(0.9, 1.0):6.0f} (last tenth); written per fit {wrote(0.0, 0.2) / 1e3:7.1f} kB (first fifth) "
      f"{wrote(0.8, 1.0) / 1e3:7.1f} kB (last fifth); checkpoint files at most {peak[0] / 1e6:.1f} MB")
' "$label" "$NW" "$G"
}
echo "sweep of $NW windows (NIG, d = 2, 16 rows each) on $NP ranks:"
measure "no checkpoint"
measure "checkpoint every second" --checkpoint ck.h5
