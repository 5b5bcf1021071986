#!/usr/bin/python3
"""missing_heldback.py - a staggered-start panel with held-back entries: --missing em against drop.

Columns start at different rows (a staggered panel); a random tenth of the
observed entries is held back (set to NaN for the fits).  The panel is fitted
with `--missing em` and with `--missing drop` (the complete rows only), and
each fit scores the held-back entries by their conditional log-density given
the other observed entries of their row,
    log f(x_{O+H}) - log f(x_O)    (H: the row's held-back entries),
per held-back entry.  The marginal of x_O of a normal variance-mean mixture
is the same family with (mu_O, gamma_O, Sigma_OO), so log f is in closed
form; its Bessel function is computed here by quadrature of
K_v(z) = int_0^inf exp(-z cosh t) cosh(v t) dt (independent of ghfit's),
and the formula is checked against `ghfit eval` on the complete rows.
em must beat drop.
usage: missing_heldback.py GHFIT WORKDIR   (Open MPI's environment set, as under ctest;
       HB_SEED=S draws another panel and hold-back: em beat drop on seeds 1-8)
"""
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np

G, W = sys.argv[1], sys.argv[2]
N, D = 8000, 5
STARTS = [0, 2000, 4000, 6000, 7600]  # the row where each column starts
HOLD = 0.10
MODEL = "nig"

shutil.rmtree(W, ignore_errors=True)
os.makedirs(W)
os.chdir(W)


def run(*args):
    quiet = [] if args[0] == "generate" else ["--quiet"]
    subprocess.run(["mpirun", "-np", "2", G, *args, *quiet], check=True, stdout=subprocess.DEVNULL)


def log_kv(v, z):
    """log K_v(z), z > 0 (array), by the trapezoid rule on exp(-z (cosh t - 1)) cosh(v t)."""
    t = np.linspace(0.0, 12.0, 4801)
    h = t[1] - t[0]
    z = np.asarray(z, dtype=float)[..., None]
    f = np.exp(-z * (np.cosh(t) - 1.0) + np.abs(v) * t) * (1.0 + np.exp(-2.0 * np.abs(v) * t)) / 2.0
    s = h * (f.sum(axis=-1) - 0.5 * f[..., 0] - 0.5 * f[..., -1])
    return np.log(s) - z[..., 0]


def logpdf(par, X, obs):
    """log f(x_O) of each row of X over its coordinates obs (a boolean mask per row)."""
    mu, gam, S, p, a, b = par
    out = np.zeros(X.shape[0])
    pats = {}
    for i, m in enumerate(obs):
        pats.setdefault(m.tobytes(), []).append(i)
    for key, rows in pats.items():
        o = np.frombuffer(key, dtype=bool)
        rows = np.array(rows)
        k = int(o.sum())
        So = S[np.ix_(o, o)]
        L = np.linalg.cholesky(So)
        dx = X[np.ix_(rows, np.flatnonzero(o))] - mu[o]
        z = np.linalg.solve(L, dx.T)                   # L^-1 (x - mu)
        wv = np.linalg.solve(L, gam[o])                # L^-1 gamma
        Q = (z * z).sum(axis=0)
        w2 = wv @ wv
        lam = p - k / 2.0
        A, B = a + w2, b + Q
        lognorm = 0.5 * p * np.log(a / b) - np.log(2.0) - log_kv(p, np.sqrt(a * b))
        out[rows] = (lognorm - 0.5 * k * np.log(2 * np.pi) - np.log(np.diag(L)).sum() + z.T @ wv
                     + np.log(2.0) + 0.5 * lam * np.log(B / A) + log_kv(lam, np.sqrt(A * B)))
    return out


def params(path):
    with h5py.File(path, "r") as f:
        g = f["/fits/%s/params" % MODEL]
        sc = lambda k: float(np.asarray(g[k][...]).ravel()[0])
        return (g["mu"][...], g["gamma"][...], g["sigma"][...].reshape(D, D), sc("p"), sc("a"), sc("b"))


run("generate", "--model", "gh", "--dim", str(D), "--n", str(N), "--seed", os.environ.get("HB_SEED", "5"), "--p", "-1", "--a", "1.2",
    "--b", "0.8", "--gamma", "0.3,-0.2,0.1,0.2,-0.1", "--rho", "0.5", "--out", "p.h5")
with h5py.File("p.h5", "a") as f:
    X = f["/X"][...]
    P = X.copy()
    for j, s in enumerate(STARTS):
        P[:s, j] = np.nan
    obs = ~np.isnan(P)
    rng = np.random.default_rng(int(os.environ.get("HB_SEED", "5")) + 100)
    held = obs & (rng.random(P.shape) < HOLD)
    held &= (obs & ~held).sum(axis=1, keepdims=True) >= 1      # leave every row an observed entry
    F = P.copy()
    F[held] = np.nan
    f["/F"] = F
    f["/C"] = X[(~np.isnan(F)).all(axis=1)]                    # the complete rows: drop's data
run("fit", "--data", "p.h5", "--dataset", "/F", "--missing", "em", "--model", MODEL, "--out", "em.h5")
run("fit", "--data", "p.h5", "--dataset", "/F", "--missing", "drop", "--model", MODEL, "--out", "drop.h5")

ok = True
# the closed form against ghfit eval on the complete rows
run("eval", "--model", "em.h5", "--data", "p.h5", "--dataset", "/C", "--out", "ev.h5")
with h5py.File("p.h5", "r") as f:
    C = f["/C"][...]
with h5py.File("ev.h5", "r") as f:
    ref = f["/logpdf"][...]
mine = logpdf(params("em.h5"), C, np.ones(C.shape, dtype=bool))
err = np.abs(mine - ref).max() / np.abs(ref).max()
print(f"closed-form log f vs ghfit eval on {C.shape[0]} complete rows: max rel. difference {err:.2e}")
if not err < 1e-9:
    print("FAIL: the closed-form log-density disagrees with ghfit eval")
    ok = False

rows = np.flatnonzero(held.any(axis=1))
nheld = int(held.sum())
after, before = (obs & ~held)[rows] | held[rows], (obs & ~held)[rows]
score = {}
for name in ("em", "drop"):
    par = params(name + ".h5")
    score[name] = (logpdf(par, X[rows], after) - logpdf(par, X[rows], before)).sum() / nheld
print(f"staggered panel N={N}, d={D}, starts {STARTS}: {nheld} held-back entries in {rows.size} rows; "
      f"complete rows left for drop: {C.shape[0]}")
print(f"log-likelihood per held-back entry: em {score['em']:.6f}, drop {score['drop']:.6f} "
      f"(em - drop {score['em'] - score['drop']:+.6f})")
if not score["em"] > score["drop"]:
    print("FAIL: em does not beat drop on the held-back entries")
    ok = False
print("missing_heldback: " + ("all passed" if ok else "FAILED"))
sys.exit(0 if ok else 1)
