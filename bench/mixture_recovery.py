"""Benchmark (not a test) of K-component mixtures (--components K; docs/math.md
section 10), recorded in docs/benchmarks.md ("Mixtures: recovery, K x seed
sweep, scale").

  recovery  simulated K = 3 mixtures of normal mean-variance laws with GIG
            mixing (W ~ scipy.stats.geninvgauss), X = mu_k + gamma_k W +
            sqrt(W) A_k Z; NIG (p = -1/2, a = b = 1) and GH (p = -1, a = b = 1)
            components, d = 2 and d = 10, a well-separated and a moderately
            overlapping setting (component means SEP apart in Mahalanobis units
            of Sigma_k E W); proportions 0.5, 0.3, 0.2; N rows per replication,
            R replications.  Per replication: `ghfit fit --components 3` (the
            data's family, default 4 starts), `ghfit eval` -> /cluster, the
            adjusted Rand index against the true labels (sklearn); the fitted
            proportions and component means (components/<k>/moments/mean) matched
            to the truth by the Hungarian method on the means.  Per setting:
            mean ARI, z = |mean estimate - truth| / (sd / sqrt(R)) (max over
            the 3 + 3 d parameters), max per replication |estimate - truth| / sd,
            and on the first RBIC replications a job sweep `components: [1..6]`
            through `ghfit run`: how often the smallest BIC (and ICL) is K = 3.
  sweep     one data set (d = 2 NIG, overlapping, N = 3000): `ghfit run` of
            components [1..6] x seed [1, 2, 3] on NP ranks: wall time, the best
            loglik / BIC / ICL per K, whether the seeds agree.
  scale     per-iteration time of K = 4 vs K = 1 on the same nig data (d = 10,
            NSCALE rows, NP ranks x 1 thread, plain EM --accel none, --tol 0
            --max-iter IT, --starts 1), alternating, side by side in one run:
            the profile's estep phase (slowest rank) per E-step, and estep +
            allreduce + mstep, as bench/mixture_bench.sh.

usage: /usr/bin/python3 bench/mixture_recovery.py GHFIT WORKDIR [recovery|sweep|scale|all]
         [--r R] [--rbic RB] [--n N] [--nscale NS] [--np P] [--iters IT]
  defaults: R = 20, RB = 5, N = 2000, NS = 1000000, P = 2, IT = 5;
  --settings nig-d2-ovl,gh-d10-sep,... runs only those recovery settings
  (same truth and data as in the full run)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from pathlib import Path

import h5py
import numpy as np
from scipy import stats
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import adjusted_rand_score

ap = argparse.ArgumentParser()
ap.add_argument("ghfit")
ap.add_argument("work")
ap.add_argument("what", nargs="?", default="all")
ap.add_argument("--r", type=int, default=20)
ap.add_argument("--rbic", type=int, default=5)
ap.add_argument("--n", type=int, default=2000)
ap.add_argument("--nscale", type=int, default=1000000)
ap.add_argument("--np", type=int, default=2)
ap.add_argument("--iters", type=int, default=5)
ap.add_argument("--settings", default="all", help="comma list like nig-d2-sep (default all)")
A = ap.parse_args()
G = os.path.realpath(A.ghfit)
W = Path(A.work)
W.mkdir(parents=True, exist_ok=True)
ENV = dict(os.environ, OMP_NUM_THREADS="1", OMPI_MCA_pml="ob1", OMPI_ALLOW_RUN_AS_ROOT="1",
           OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1",
           OMPI_MCA_btl_vader_single_copy_mechanism="none", HDF5_USE_FILE_LOCKING="FALSE")

FAM = {"nig": (-0.5, 1.0, 1.0), "gh": (-1.0, 1.0, 1.0)}  # (p, a, b) of the GIG mixing law
PROPS = np.array([0.5, 0.3, 0.2])
K = 3


def run(*args, np_=1):
    cmd = ["mpirun", "-np", str(np_), G, *map(str, args)] if np_ > 1 else [G, *map(str, args)]
    r = subprocess.run(cmd, cwd=W, env=ENV, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stdout[-800:]}\n{r.stderr[-800:]}")
    return r


def s(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def gig(p, a, b, n, rng):
    # GIG(p, a, b) (density ~ w^(p-1) exp(-(a w + b / w) / 2)): scipy's geninvgauss(p, sqrt(ab)) * sqrt(b / a)
    return stats.geninvgauss.rvs(p, np.sqrt(a * b), size=n, random_state=rng) * np.sqrt(b / a)


def truth(fam, d, sep, seed):
    """Component parameters of one setting (fixed across replications)."""
    p, a, b = FAM[fam]
    ew = stats.geninvgauss.mean(p, np.sqrt(a * b)) * np.sqrt(b / a)
    rng = np.random.default_rng(1000 + seed)
    comps = []
    # centres: K points on a circle (d = 2) / orthogonal directions (d = 10), pairwise SEP apart
    q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    for k in range(K):
        if d == 2:
            ang = 2 * np.pi * k / K
            c = np.array([np.cos(ang), np.sin(ang)]) * sep / np.sqrt(3.0)
        else:
            c = q[:, k] * sep / np.sqrt(2.0)
        L = np.tril(rng.normal(0.0, 0.3, size=(d, d)), -1) + np.eye(d)
        S = L @ L.T
        S /= np.exp(np.linalg.slogdet(S)[1] / d)  # |Sigma| = 1
        Ls = np.linalg.cholesky(S)
        gamma = rng.normal(0.0, 0.3, size=d)
        sc = np.sqrt(ew)  # Mahalanobis units of Sigma E W
        mu = c * sc - gamma * ew
        comps.append(dict(mu=mu, gamma=gamma, L=Ls * 1.0, mean=mu + gamma * ew))
    return comps, (p, a, b)


def draw(comps, gp, n, rng):
    d = comps[0]["mu"].size
    lab = rng.choice(K, size=n, p=PROPS)
    w = gig(*gp, n, rng)
    z = rng.normal(size=(n, d))
    x = np.empty((n, d))
    for k, c in enumerate(comps):
        m = lab == k
        x[m] = c["mu"] + np.outer(w[m], c["gamma"]) + np.sqrt(w[m])[:, None] * (z[m] @ c["L"].T)
    return x, lab


def read_mix(path):
    with h5py.File(W / path, "r") as f:
        g = f["/fits/" + list(f["/fits"])[0]]
        pr = g["proportions"][()]
        means = np.array([g[f"components/{k}/moments/mean"][()] for k in range(len(pr))])
        st = s(g.attrs["status"])
    return pr, means, st


def recovery():
    sets = [(fam, d, lab, sep) for fam in ("nig", "gh") for d in (2, 10)
            for lab, sep in (("sep", 6.0), ("ovl", 3.0))]
    sets = list(enumerate(sets))  # the index seeds the truth: the same with --settings
    if A.settings != "all":
        want = A.settings.split(",")
        sets = [t for t in sets if f"{t[1][0]}-d{t[1][1]}-{t[1][2]}" in want]
    print(f"recovery: K = 3, proportions {PROPS.tolist()}, N = {A.n} rows, R = {A.r} replications,"
          f" BIC over K = 1..6 on the first {A.rbic}; 1 rank")
    print("| setting | sep | mean ARI (min) | max z of the mean estimate | max per-rep |err|/sd | reps with a |err|/sd > 5 "
          "| BIC picks 3 | ICL picks 3 | s/rep (fit+eval) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for si, (fam, d, lab, sep) in sets:
        comps, gp = truth(fam, d, sep, si)
        tp = np.concatenate([PROPS, np.concatenate([c["mean"] for c in comps])])
        est, aris, notes, tsum = [], [], [], 0.0
        bic_ok = icl_ok = nb = 0
        picks = []
        for r in range(A.r):
            rng = np.random.default_rng(10000 * (si + 1) + r)
            x, lab_true = draw(comps, gp, A.n, rng)
            tag = f"{fam}{d}{lab}_{r}"
            with h5py.File(W / f"{tag}.h5", "w") as f:
                f["X"] = x
            t0 = time.time()
            try:
                run("fit", "--data", f"{tag}.h5", "--model", fam, "--components", K, "--seed", r + 1,
                    "--max-iter", 2000, "--out", f"{tag}_fit.h5", "--quiet")
                run("eval", "--model", f"{tag}_fit.h5", "--data", f"{tag}.h5", "--out", f"{tag}_ev.h5", "--quiet")
            except RuntimeError as e:
                notes.append(f"rep {r}: {str(e).splitlines()[0][-120:]}")
                continue
            tsum += time.time() - t0
            pr, means, st = read_mix(f"{tag}_fit.h5")
            if not st.startswith("converged"):
                notes.append(f"rep {r}: status {st[:70]}")
            with h5py.File(W / f"{tag}_ev.h5", "r") as f:
                cl = f["cluster"][()]
            aris.append(adjusted_rand_score(lab_true, cl))
            cost = np.array([[np.sum((means[j] - comps[k]["mean"]) ** 2) for j in range(K)] for k in range(K)])
            _, perm = linear_sum_assignment(cost)  # truth k <-> fitted perm[k]
            est.append(np.concatenate([pr[perm], means[perm].ravel()]))
            if r < A.rbic:
                job = W / f"{tag}.yaml"
                job.write_text(f"data: {{file: {tag}.h5, dataset: /X}}\nout: {tag}_bic.h5\nfamily: {fam}\n"
                               f"components: [1, 2, 3, 4, 5, 6]\nseed: {r + 1}\nmax_iter: 2000\n")
                try:
                    run("run", job.name, "--quiet")
                except RuntimeError as e:
                    notes.append(f"rep {r} BIC sweep: {str(e).splitlines()[0][-120:]}")
                bics, icls = {}, {}
                with h5py.File(W / f"{tag}_bic.h5", "r") as f:
                    for name in f["/fits"]:
                        g = f["/fits"][name]
                        if "bic" not in g.attrs:
                            continue
                        k = int(name.split("_k")[1].split("_")[0])
                        bics[k] = g.attrs["bic"]
                        icls[k] = g.attrs["icl"] if "icl" in g.attrs else g.attrs["bic"]
                kb, ki = min(bics, key=bics.get), min(icls, key=icls.get)
                nb += 1
                bic_ok += kb == K
                icl_ok += ki == K
                picks.append(f"{kb}/{ki}")
            for fn in (f"{tag}.h5", f"{tag}_fit.h5", f"{tag}_ev.h5", f"{tag}_bic.h5"):
                (W / fn).unlink(missing_ok=True)
        est = np.array(est)
        R = len(est)
        sd = est.std(axis=0, ddof=1)
        zbar = np.abs(est.mean(axis=0) - tp) / (sd / np.sqrt(R))
        zrep = np.abs(est - tp) / sd
        worst = int(np.argmax(zbar))
        wname = f"pi{worst + 1}" if worst < K else f"m{(worst - K) // d + 1}[{(worst - K) % d + 1}]"
        print(f"| {fam} d={d} {lab} | {sep:g} | {np.mean(aris):.3f} ({np.min(aris):.3f}) | {zbar.max():.2f} ({wname}) "
              f"| {zrep.max():.2f} | {int(np.sum((zrep > 5).any(axis=1)))}/{R} | {bic_ok}/{nb} | {icl_ok}/{nb} "
              f"| {tsum / max(R, 1):.1f} |", flush=True)
        if picks:
            print(f"  BIC/ICL picks per replication: {' '.join(picks)}")
        print(f"  truth pi {PROPS.tolist()}; mean estimate pi {np.round(est[:, :K].mean(axis=0), 4).tolist()}"
              f" sd {np.round(sd[:K], 4).tolist()}")
        for n_ in notes:
            print("  note:", n_)


def sweep():
    comps, gp = truth("nig", 2, 3.0, 99)
    x, _ = draw(comps, gp, 3000, np.random.default_rng(7))
    with h5py.File(W / "sw.h5", "w") as f:
        f["X"] = x
    (W / "sw.yaml").write_text("data: {file: sw.h5, dataset: /X}\nout: sw_out.h5\nfamily: nig\n"
                               "components: [1, 2, 3, 4, 5, 6]\nseed: [1, 2, 3]\nmax_iter: 2000\n")
    (W / "sw_out.h5").unlink(missing_ok=True)
    t0 = time.time()
    try:
        run("run", "sw.yaml", "--quiet", np_=A.np)
        rc = 0
    except RuntimeError as e:
        rc = str(e).splitlines()[0]
    wall = time.time() - t0
    print(f"sweep: NIG d = 2 (K = 3 overlapping, sep 3), N = 3000, components [1..6] x seed [1, 2, 3] = 18 fits,"
          f" ghfit run on {A.np} ranks: wall {wall:.1f} s{'' if rc == 0 else ' ; ' + str(rc)}")
    rows = {}
    with h5py.File(W / "sw_out.h5", "r") as f:
        for name in f["/fits"]:
            g = f["/fits"][name]
            k = int(name.split("_k")[1].split("_")[0])
            sd = int(name.split("_s")[1].split("_")[0])
            ll = g.attrs.get("loglik", np.nan)
            rows.setdefault(k, {})[sd] = (float(np.atleast_1d(ll)[-1]) if "loglik" in g.attrs else np.nan,
                                          g.attrs.get("bic", np.nan), g.attrs.get("icl", g.attrs.get("bic", np.nan)),
                                          s(g.attrs.get("status", "?")))
    print("| K | best loglik | BIC | ICL | loglik spread over seeds | statuses |")
    print("|---|---|---|---|---|---|")
    for k in sorted(rows):
        v = rows[k]
        lls = np.array([v[sd][0] for sd in sorted(v)])
        b = max(v, key=lambda sd: v[sd][0])
        sts = ", ".join(f"s{sd}: {v[sd][3][:28]}" for sd in sorted(v))
        print(f"| {k} | {v[b][0]:.3f} | {v[b][1]:.2f} | {v[b][2]:.2f} | {np.nanmax(lls) - np.nanmin(lls):.3g} | {sts} |")


def phases(path):
    with h5py.File(W / path, "r") as f:
        g = f["/fits/" + list(f["/fits"])[0]]
        names = [s(n) for n in g["profile/phase_names"][()]]
        sec = g["profile/seconds"][()]
        it = int(g.attrs["n_iter"])
    es = max(sec[r][names.index("estep")] for r in range(sec.shape[0]))
    tot = max(sum(sec[r][names.index(p)] for p in ("estep", "allreduce", "mstep")) for r in range(sec.shape[0]))
    return 1e3 * es / (it + 1), 1e3 * tot / (it + 1)


def scale():
    n = A.nscale
    if not (W / f"sc{n}.h5").exists():
        run("generate", "--model", "nig", "--dim", 10, "--n", n, "--seed", 3, "--out", f"sc{n}.h5", np_=A.np)
    res = {1: [], 4: []}
    for rep in range(2):
        for k in (1, 4):
            t0 = time.time()
            run("fit", "--data", f"sc{n}.h5", "--model", "nig", "--components", k, "--tol", 0, "--max-iter", A.iters,
                "--starts", 1, "--accel", "none", "--quiet", "--out", f"sc_k{k}.h5", np_=A.np)
            es, tot = phases(f"sc_k{k}.h5")
            res[k].append((es, tot, time.time() - t0))
    print(f"scale: nig d = 10, N = {n}, {A.np} ranks x 1 thread, --accel none --tol 0 --max-iter {A.iters} --starts 1,"
          " 2 rounds alternating K = 1 and K = 4; ms per E-step (slowest rank)")
    print("| K | estep ms/iteration | estep+allreduce+mstep ms/iteration | whole fit s (incl. start, read) |")
    print("|---|---|---|---|")
    for k in (1, 4):
        print(f"| {k} | {' / '.join(f'{v[0]:.1f}' for v in res[k])} | {' / '.join(f'{v[1]:.1f}' for v in res[k])} "
              f"| {' / '.join(f'{v[2]:.1f}' for v in res[k])} |")
    m = lambda k, i: np.median([v[i] for v in res[k]])  # noqa: E731
    print(f"ratio K = 4 / K = 1: estep {m(4, 0) / m(1, 0):.2f}, estep+allreduce+mstep {m(4, 1) / m(1, 1):.2f}")


if A.what in ("recovery", "all"):
    recovery()
if A.what in ("sweep", "all"):
    sweep()
if A.what in ("scale", "all"):
    scale()
