#!/usr/bin/env bash
# Time of `ghfit check` on a 1e8 x 10 file (issue 15: under 2 s; it reads
# metadata and a sample only): contiguous (a sparse 8 GB file) and chunked
# with deflate (1,000 chunks), and a 398-window sweep over the first.
# A benchmark, not a test: prints the times.
# usage: bash bench/check_bench.sh GHFIT [WORKDIR]   (needs /usr/bin/python3 with h5py)
set -euo pipefail
G=$(realpath "$1"); W=${2:-/tmp/ghfit_check_bench}
rm -rf "$W"; mkdir -p "$W"; cd "$W"
/usr/bin/python3 - <<'PY'
import h5py, numpy as np, zlib
n, d = 10**8, 10
rng = np.random.default_rng(1)
with h5py.File("big.h5", "w") as f:
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
    dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
    ds = h5py.Dataset(h5py.h5d.create(f.id, b"X", h5py.h5t.IEEE_F64LE, h5py.h5s.create_simple((n, d)), dcpl=dcpl))
    for s in (0, n // 2, n - 1000):
        ds[s:s + 1000] = rng.standard_normal((1000, d))
rows = 100000
with h5py.File("bigz.h5", "w") as f:
    ds = f.create_dataset("X", (n, d), dtype="f8", chunks=(rows, d), compression="gzip")
    z = zlib.compress(np.zeros((rows, d)).tobytes())
    for i in range(n // rows):
        ds.id.write_direct_chunk((i * rows, 0), z, 0)
PY
printf 'data: big.h5\nout: bw.h5\nfamily: [gh, nig]\nwindows: {length: 1000000, step: 500000}\nwarm_start: true\n' > bw.yaml
run() { # label args...
  local label=$1; shift
  local t0 t1; t0=$(date +%s.%N)
  "$G" check "$@" > out.txt 2>&1 || { cat out.txt; echo "FAILED: $label"; return 1; }
  t1=$(date +%s.%N)
  printf '%-44s %6.3f s   %s\n' "$label" "$(echo "$t1 - $t0" | bc)" "$(grep '^  sample' out.txt | cut -c15-80)"
}
run "fit, contiguous 1e8 x 10" --ranks 16 fit --data big.h5 --model gh --out f.h5
run "fit, chunked + deflate 1e8 x 10" --ranks 16 fit --data bigz.h5 --model gh --out f.h5
run "run, 398 windows, slice 3/8" --ranks 64 run bw.yaml --slice 3/8
rm -f big.h5 bigz.h5
