#!/usr/bin/python3
"""missing_consistency.py - consistency of --missing em (a benchmark, not a test).

For N = 1e4, 3e4, 1e5 at d = 5, R replications each: draw a GH data set with
known parameters (ghfit generate), remove 10% and 40% of the entries at
random (NaN), fit with `--missing em`, and compare the fitted parameters with
the truth in the fit's gauge (|Sigma| = 1: Sigma/s, gamma/s, a/s, b s with
s = |Sigma|^(1/d)).  Per N and fraction it reports, over the parameters
mu (5), gamma (5), the lower triangle of Sigma (15) and p:
  - the mean error (bias) and its standard error (spread over replications /
    sqrt(R)), and the largest |bias| / SE over the parameters (within 4 SE:
    consistent at this N);
  - the root-mean-square error per group, which should shrink like 1/sqrt(N).
usage: . scripts/mpienv.sh; bench/missing_consistency.py GHFIT WORKDIR [R] [NP]
  (e.g. R = 40, NP = 1: about 10 min on 2 cores)
"""
import os
import subprocess
import sys
import time

import h5py
import numpy as np

G, W = sys.argv[1], sys.argv[2]
R = int(sys.argv[3]) if len(sys.argv) > 3 else 12
NP = sys.argv[4] if len(sys.argv) > 4 else "1"
D = 5
MU = [0.5, -0.3, 0.1, 0.0, 0.2]
GAMMA = [0.2, -0.1, 0.2, -0.1, 0.2]
P, A, B, RHO = -1.0, 1.0, 1.0, 0.3
NS = [10000, 30000, 100000]
FRACS = [0.1, 0.4]

os.makedirs(W, exist_ok=True)
env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))


def truth():
    S = np.full((D, D), RHO) + (1.0 - RHO) * np.eye(D)
    s = np.linalg.det(S) ** (1.0 / D)
    return np.array(MU), np.array(GAMMA) / s, S / s, P


def vec(mu, gamma, S, p):
    return np.concatenate([mu, gamma, S[np.tril_indices(D)], [p]])


GROUPS = {"mu": slice(0, 5), "gamma": slice(5, 10), "Sigma": slice(10, 25), "p": slice(25, 26)}


def run(args):
    subprocess.run(args, check=True, env=env, stdout=subprocess.DEVNULL)


def one(n, frac, rep):
    seed = 1000 * rep + n % 997
    data, out = os.path.join(W, "c.h5"), os.path.join(W, "cf.h5")
    for f in (data, out):
        if os.path.exists(f):
            os.remove(f)
    run([G, "generate", "--model", "gh", "--dim", str(D), "--n", str(n), "--seed", str(seed), "--out", data,
         "--mu", ",".join(map(str, MU)), "--gamma", ",".join(map(str, GAMMA)), "--sigma", "1", "--rho", str(RHO),
         "--p", str(P), "--a", str(A), "--b", str(B)])
    with h5py.File(data, "a") as f:
        X = f["/X"][...]
        X[np.random.default_rng(seed + 7).random(X.shape) < frac] = np.nan
        f["/M"] = X
    run(["mpirun", "-np", NP, G, "fit", "--data", data, "--dataset", "/M", "--missing", "em", "--model", "gh",
         "--out", out, "--quiet"])
    with h5py.File(out, "r") as f:
        g = f["/fits/gh/params"]
        S = g["sigma"][...].reshape(D, D)
        return vec(g["mu"][...], g["gamma"][...], S, float(np.asarray(g["p"][...]).ravel()[0]))


def main():
    t0 = time.time()
    tv = vec(*truth())
    print(f"# GH d={D}, truth in the |Sigma| = 1 gauge: mu {MU}, p {P}; R = {R} replications, {NP} rank(s)")
    print("# N       frac  group   rms_err     mean_err(max|.|)  max|bias|/SE  within_4SE")
    rms = {}
    ok = True
    for frac in FRACS:
        for n in NS:
            E = np.array([one(n, frac, r) - tv for r in range(R)])
            bias, se = E.mean(axis=0), E.std(axis=0, ddof=1) / np.sqrt(R)
            z = np.abs(bias) / np.where(se > 0, se, np.inf)
            for name, sl in GROUPS.items():
                r = float(np.sqrt((E[:, sl] ** 2).mean()))
                rms[(frac, n, name)] = r
                within = bool(z[sl].max() <= 4.0)
                ok = ok and within
                print(f"{n:<9d} {frac:<5.2f} {name:<7s} {r:<11.3e} {np.abs(bias[sl]).max():<17.3e} "
                      f"{z[sl].max():<13.2f} {'yes' if within else 'NO'}", flush=True)
    shrink = True
    for frac in FRACS:
        for name in GROUPS:
            seq = [rms[(frac, n, name)] for n in NS]
            dec = all(seq[i + 1] < seq[i] for i in range(len(seq) - 1))
            shrink = shrink and dec
            print(f"# frac {frac}: rms error of {name} over N = {NS}: "
                  + ", ".join(f"{v:.3e}" for v in seq) + ("  (shrinks)" if dec else "  (DOES NOT SHRINK)"))
    print(f"# all biases within 4 SE: {'yes' if ok else 'NO'}; rms errors shrink with N: "
          f"{'yes' if shrink else 'NO'}; {time.time() - t0:.0f} s")


main()
