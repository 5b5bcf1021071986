#!/usr/bin/python3
"""Make a mixture result file for the readers' tests (docs/output-schema.md
"Mixtures"): a copy of a real single-law result file of `ghfit fit` (its
root and fit attributes as ghfit writes them) whose fit becomes a
K-component mixture of the same family with known parameters: params/ is
removed; n_components, icl, proportions, components/<k>/params and moments,
the mixture's moments, starts/ are added, as the mixture EM writes them.

usage: make_mixture_fit.py SRC.h5 OUT.h5 [--k K] [--case CASE] [--sweep]
                           [--singles PREFIX]
  --k K        components (default 3; K >= 2)
  --case CASE  good (default); identical (K equal components: the single law
               of component 0); hostile files: sum (proportions summing to
               0.9), count (components/ holds K - 1 groups), dim (component 1's
               mu has d + 1 values), pd (component 1's Sigma not positive
               definite)
  --sweep      keep the single fit as <name>_k1 and add mixtures <name>_k2 ..
               <name>_kK (the fit names of a sweep over K), /summary rows too
  --bad P      also write the four hostile files P<case>.h5 (sum, count,
               dim, pd) in the same run
  --singles P  also write each component as a single-law result file
               P<k>.h5 (fit name as in SRC): the independent reference of a
               test (ghfit eval of each component on its own)

Runs under Debian's /usr/bin/python3 (h5py, numpy; no scipy): the Bessel
functions of the moments are computed by the trapezoid rule on
K_v(z) = int_0^inf exp(-z cosh t) cosh(v t) dt (exponential convergence).
"""
import argparse
import shutil

import h5py
import numpy as np


def bessel_k(v, z):
    t = np.linspace(0.0, 40.0, 16001)  # h = 0.0025: the trapezoid rule converges exponentially here
    f = np.exp(-z * np.cosh(t) + np.abs(v) * t) * 0.5 * (1.0 + np.exp(-2.0 * np.abs(v) * t))
    f[~np.isfinite(f)] = 0.0
    h = t[1] - t[0]
    return h * (f.sum() - 0.5 * (f[0] + f[-1]))


def gig_moment(p, a, b, r):
    """E[Y^r] of GIG(p, a, b) (density ~ y^(p-1) exp(-(a y + b/y)/2))."""
    w = np.sqrt(a * b)
    return (b / a) ** (r / 2.0) * bessel_k(p + r, w) / bessel_k(p, w)


def component(k, d, family):
    """Component k: well separated means, |Sigma| = 1, the family's (p, a, b)."""
    mu = np.array([6.0 * (k - 1) * (1.0 if j % 2 == 0 else -0.5) + 0.1 * j for j in range(d)])
    gamma = np.array([0.3 * (k + 1) * (-1.0) ** j / (j + 1) for j in range(d)])
    A = np.eye(d) * (1.0 + 0.3 * k) + 0.25 * (0.5 ** np.abs(np.subtract.outer(range(d), range(d))))
    S = A @ A.T
    S /= np.linalg.det(S) ** (1.0 / d)
    if family == "gauss":  # no subordinator: gamma = 0, p, a, b NaN, Sigma the covariance
        return mu, np.zeros(d), S, np.nan, np.nan, np.nan
    p, a, b = {"gh": (-0.5 + 0.5 * k, 1.0 + 0.5 * k, 0.8),
               "nig": (-0.5, 1.0 + 0.5 * k, 0.8 + 0.2 * k),
               "hyp": ((d + 1) / 2.0, 1.0 + 0.5 * k, 0.8)}[family]
    return mu, gamma, S, p, a, b


def moments(mu, gamma, S, p, a, b):
    if np.isnan(p):
        return mu, S
    ey = gig_moment(p, a, b, 1.0)
    vy = gig_moment(p, a, b, 2.0) - ey * ey
    return mu + gamma * ey, ey * S + vy * np.outer(gamma, gamma)


def put(g, name, v, desc):
    ds = g.create_dataset(name, data=v)
    ds.attrs["description"] = desc


def write_params(g, mu, gamma, S, p, a, b):
    put(g, "mu", mu, "location mu")
    put(g, "gamma", gamma, "skewness gamma")
    put(g, "sigma", S, "dispersion Sigma (|Sigma| = 1)")
    for n, v in (("p", p), ("a", a), ("b", b)):
        put(g, n, np.float64(v), "GIG parameter " + n)


def make_mixture(f, name, src_name, K, case, n_obs, loglik_shift):
    g = f["/fits"][name]
    d = int(g.attrs["dim"])
    family = g.attrs["family"]
    family = family.decode() if isinstance(family, bytes) else str(family)
    for sub in ("params", "moments", "components", "starts", "proportions", "loglik"):
        if sub in g:
            del g[sub]
    prop = np.array([0.5, 0.3, 0.2]) if K == 3 else np.arange(K, 0, -1, dtype=float) / (K * (K + 1) / 2.0)
    if case == "identical":
        prop = np.full(K, 1.0 / K)
    if case == "sum":
        prop = prop * 0.9
    comps = [component(0 if case == "identical" else k, d, family) for k in range(K)]
    put(g, "proportions", prop, "mixing proportions pi_k (sum 1)")
    means, covs = [], []
    for k in range(K if case != "count" else K - 1):
        mu, gamma, S, p, a, b = comps[k]
        if case == "dim" and k == 1:
            mu = np.append(mu, 0.0)
        if case == "pd" and k == 1:
            S = S.copy()
            S[0, 1] = S[1, 0] = 2.0 * np.sqrt(S[0, 0] * S[1, 1])
        cg = g.create_group("components/%d" % k)
        write_params(cg.create_group("params"), mu, gamma, S, p, a, b)
        m, c = moments(*comps[k])
        put(cg, "moments/mean", m, "E X of the component")
        put(cg, "moments/cov", c, "Cov X of the component")
        means.append(m)
        covs.append(c)
    if case != "count":
        EX = sum(prop[k] * means[k] for k in range(K))
        CX = sum(prop[k] * (covs[k] + np.outer(means[k], means[k])) for k in range(K)) - np.outer(EX, EX)
        put(g, "moments/mean", EX, "the mixture's E X")
        put(g, "moments/cov", CX, "the mixture's Cov X")
    S = 3
    put(g, "starts/loglik", np.array([-1000.0 - s for s in range(S)]) + loglik_shift, "each start's log-likelihood")
    put(g, "starts/n_iter", np.array([40 + s for s in range(S)], dtype=np.int32), "each start's iterations")
    put(g, "starts/converged", np.ones(S, dtype=np.int32), "each start's convergence")
    put(g, "loglik", np.linspace(-1100.0, -1000.0, 20) + loglik_shift, "log-likelihood trace")
    k1 = 2 * d + d * (d + 1) // 2 - 1 + 3
    npar = (K - 1) + K * k1
    ll = float(g.attrs["loglik"]) + loglik_shift
    bic = -2.0 * ll + npar * np.log(n_obs)
    g.attrs["n_components"] = np.int32(K)
    g.attrs["loglik"] = ll
    g.attrs["n_params"] = np.int64(npar)
    g.attrs["aic"] = -2.0 * ll + 2.0 * npar
    g.attrs["bic"] = bic
    g.attrs["icl"] = bic + 2.0 * 0.05 * n_obs * (K - 1)
    return comps, prop, ll, float(g.attrs["aic"]), bic


def set_summary(f, rows):
    old = f["/summary"][...]
    desc = f["/summary"].attrs.get("description", "")
    new = np.zeros(len(rows), dtype=old.dtype)
    for i, (name, ll, aic, bic) in enumerate(rows):
        new[i] = old[0]
        new[i]["name"] = name.encode()
        new[i]["loglik"] = ll
        new[i]["aic"] = aic
        new[i]["bic"] = bic
    del f["/summary"]
    ds = f.create_dataset("/summary", data=new)
    ds.attrs["description"] = desc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--case", default="good", choices=["good", "identical", "sum", "count", "dim", "pd"])
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--singles")
    ap.add_argument("--bad")
    a = ap.parse_args()
    for case in ("sum", "count", "dim", "pd") if a.bad else ():
        path = "%s%s.h5" % (a.bad, case)
        shutil.copyfile(a.src, path)
        with h5py.File(path, "r+") as f:
            name = list(f["/fits"].keys())[0]
            make_mixture(f, name, name, a.k, case, int(f["/fits"][name].attrs["n_obs"]), 0.0)
    shutil.copyfile(a.src, a.out)
    with h5py.File(a.out, "r+") as f:
        names = list(f["/fits"].keys())
        assert len(names) == 1, "SRC must hold one fit"
        name = names[0]
        n_obs = int(f["/fits"][name].attrs["n_obs"])
        if a.sweep:
            f.move("/fits/%s" % name, "/fits/%s_k1" % name)
            g1 = f["/fits/%s_k1" % name]
            rows = [(name + "_k1", float(g1.attrs["loglik"]), float(g1.attrs["aic"]), float(g1.attrs["bic"]))]
            for K in range(2, a.k + 1):
                gk = f.create_group("/fits/%s_k%d" % (name, K))  # the fit's attributes (h5py's copy
                for key, v in g1.attrs.items():                    # of a group crashes on these files)
                    gk.attrs[key] = v
                _, _, ll, aic, bic = make_mixture(f, "%s_k%d" % (name, K), name, K, a.case, n_obs, 150.0 * (K - 1))
                rows.append(("%s_k%d" % (name, K), ll, aic, bic))
            set_summary(f, rows)
            return
        comps, prop, ll, aic, bic = make_mixture(f, name, name, a.k, a.case, n_obs, 0.0)
        set_summary(f, [(name, ll, aic, bic)])
    if a.singles:
        for k, (mu, gamma, S, p, a_, b) in enumerate(comps):
            path = "%s%d.h5" % (a.singles, k)
            shutil.copyfile(a.src, path)
            with h5py.File(path, "r+") as f:
                g = f["/fits"][name]
                del g["params"]
                write_params(g.create_group("params"), mu, gamma, S, p, a_, b)


if __name__ == "__main__":
    main()
