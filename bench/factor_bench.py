"""Benchmark (not a test) of the factor form (--sigma factor:R; docs/math.md
section 9), recorded in docs/benchmarks.md ("Factor-structured dispersion").

  selection   data from a GH law with Sigma = B B' + diag(D), d = 200, R = 3
              (p = -1, a = b = 1, gamma small), N = 400 training rows and 4,000
              held-out rows; gh fits with --sigma factor:3, full and diag: the
              held-out log-likelihood per row (ghfit eval); BIC over
              R in {1, 2, 3, 4, 6, 8} (a job file sweep over sigma).
  scale       per-iteration E-step time (plain EM, --accel none, 3 iterations,
              the profile's estep phase per E-step) of --sigma factor:8 and full
              at d = 1000 side by side in one run, and of factor:8 over
              d = 250, 500, 1000, 2000 (N rows of nig data, NP ranks x 1 thread).

usage: build/pyenv/bin/python bench/factor_bench.py GHFIT WORKDIR [selection|scale|all] [N] [NP]
  (N default 10000: the issue's 1e5 rows make one full iteration at d = 1000 about
  2e11 flops, too long on a shared 2-core machine; say which N in the record)
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
from scipy import stats

G = os.path.realpath(sys.argv[1])
W = Path(sys.argv[2])
WHAT = sys.argv[3] if len(sys.argv) > 3 else "all"
N_SCALE = int(sys.argv[4]) if len(sys.argv) > 4 else 10000
NP = int(sys.argv[5]) if len(sys.argv) > 5 else 2
W.mkdir(parents=True, exist_ok=True)
ENV = dict(os.environ, OMP_NUM_THREADS="1", OMPI_MCA_pml="ob1", OMPI_ALLOW_RUN_AS_ROOT="1",
           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def run(*args, np_=NP):
    cmd = ["mpirun", "-np", str(np_), G, *map(str, args)] if np_ > 1 else [G, *map(str, args)]
    r = subprocess.run(cmd, cwd=W, env=ENV, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}")
    return r


def selection():
    d, r, n, n_test = 200, 3, 400, 4000
    rng = np.random.default_rng(21)
    B = rng.normal(0.0, 1.0, size=(d, r))
    D = rng.uniform(0.5, 1.5, size=d)
    gamma = rng.normal(0.0, 0.05, size=d)
    # GIG(p = -1, a = 1, b = 1): scipy's geninvgauss(p, b=sqrt(ab)) scaled by sqrt(b/a)
    y = stats.geninvgauss.rvs(-1.0, 1.0, size=n + n_test, random_state=rng)
    z = rng.normal(size=(n + n_test, r)) @ B.T + rng.normal(size=(n + n_test, d)) * np.sqrt(D)
    x = np.outer(y, gamma) + np.sqrt(y)[:, None] * z
    with h5py.File(W / "sel.h5", "w") as f:
        f["train"] = x[:n]
        f["test"] = x[n:]
    print(f"selection: d = {d}, R = {r}, N = {n} training rows, {n_test} held-out rows (GH p = -1, a = b = 1)")
    forms = ["factor:3", "full", "diag"]
    for s in forms:
        t0 = time.time()
        out = f"sel_{s.replace(':', '')}.h5"
        run("fit", "--data", "sel.h5", "--dataset", "/train", "--model", "gh", "--sigma", s, "--out", out,
            "--quiet", "--max-iter", "3000")
        run("eval", "--model", out, "--data", "sel.h5", "--dataset", "/test", "--out", f"ev_{out}", "--quiet")
        with h5py.File(W / out, "r") as f:
            g = f["/fits/gh"]
            st, it, ll, bic = g.attrs["status"], g.attrs["n_iter"], g.attrs["loglik"], g.attrs["bic"]
        with h5py.File(W / f"ev_{out}", "r") as f:
            ho = f.attrs["loglik"] / f.attrs["n_obs"]
        st = st.decode() if isinstance(st, bytes) else st
        print(f"  {s:9s} held-out loglik/row {ho:12.4f}  train loglik {ll:14.4f}  BIC {bic:12.2f}  "
              f"{int(it):5d} iterations  {time.time() - t0:6.1f} s  {st[:60]}")
    job = W / "sel.yaml"
    job.write_text("data: {file: sel.h5, dataset: /train}\nout: sel_sweep.h5\nfamily: gh\n"
                   "sigma: [factor:1, factor:2, factor:3, factor:4, factor:6, factor:8]\nmax_iter: 3000\n")
    t0 = time.time()
    run("run", "sel.yaml", "--quiet")
    print(f"  BIC over R (job sweep, {time.time() - t0:.1f} s):")
    best = None
    with h5py.File(W / "sel_sweep.h5", "r") as f:
        for name in sorted(f["/fits"], key=lambda k: int(k.split("_f")[1].split("_")[0])):
            g = f["/fits"][name]
            st = g.attrs["status"]
            st = st.decode() if isinstance(st, bytes) else st
            print(f"    {name:28s} BIC {g.attrs['bic']:12.2f}  loglik {g.attrs['loglik']:14.4f}  {st[:50]}")
            if best is None or g.attrs["bic"] < best[1]:
                best = (name, g.attrs["bic"])
    print(f"  BIC picks {best[0]}")


def estep_ms(out):
    with h5py.File(W / out, "r") as f:
        g = f["/fits/" + list(f["/fits"])[0]]
        names = [s.decode() if isinstance(s, bytes) else s for s in g["profile/phase_names"][()]]
        sec = g["profile/max"][()][names.index("estep")]
        it = int(g.attrs["n_iter"])
    return 1000.0 * sec / max(it, 1)


def scale():
    print(f"scale: nig data, N = {N_SCALE} rows, {NP} ranks x 1 thread, plain EM (--accel none), 3 iterations;")
    print("       E-step ms per iteration (the profile's estep phase, slowest rank)")
    for d in (250, 500, 1000, 2000):
        data = f"sc{d}.h5"
        if not (W / data).exists():
            run("generate", "--model", "nig", "--dim", d, "--n", N_SCALE, "--seed", 5, "--out", data, np_=1)
        forms = ["factor:8", "full"] if d == 1000 else ["factor:8"]
        res = {}
        for s in forms:
            out = f"sc{d}_{s.replace(':', '')}.h5"
            t0 = time.time()
            run("fit", "--data", data, "--model", "nig", "--sigma", s, "--accel", "none", "--max-iter", 3,
                "--tol", 0, "--out", out, "--quiet")
            res[s] = estep_ms(out)
            print(f"  d = {d:5d}  {s:9s} {res[s]:10.2f} ms/iteration  (whole fit {time.time() - t0:.1f} s)")
        if d == 1000:
            print(f"  d = 1000: full / factor:8 = {res['full'] / res['factor:8']:.1f}x")


if WHAT in ("selection", "all"):
    selection()
if WHAT in ("scale", "all"):
    scale()
