"""Standard errors of `ghfit fit --se` against an independent code path.

The observed information that ghfit computes (src/infer/: per-row posterior
moments of the mixing variable, a BLAS outer product, closed-form moment
terms, in a whitened frame) is compared with the central-difference Hessian
of the exact log-likelihood sum_i Law.logpdf(x_i) of this package (SciPy's
Bessel functions, the raw parameters mu, gamma, Sigma, p, a, b).  Both are
brought to the same gauge: the information restricted to the tangent space
of |Sigma| = 1 (an orthonormal basis T of the null space of the gradient c of
log|Sigma|), and the covariance V = T (T' I T)^-1 T'.  Tolerance 1e-4
relative (in units of the diagonal), as issue 11 asks.

Also: every family at d = 1 and 3 (gh, nig, vg, t, hyp), symmetric and
fixed-p fits, the Gaussian against its closed form, and the reported SEs
against the diagonal of param_cov and the delta method."""

from __future__ import annotations

import math
import os
import subprocess

import h5py
import numpy as np
import pytest

from ghfit.law import Law

GHFIT = os.environ.get("GHFIT", "ghfit")


def run(*args, np_=1):
    cmd = ["mpirun", "-np", str(np_), GHFIT, *map(str, args)] if np_ > 1 else [GHFIT, *map(str, args)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (cmd, r.stdout, r.stderr)
    return r


@pytest.fixture(scope="module")
def wdir(tmp_path_factory):
    return tmp_path_factory.mktemp("se")


def gen(wdir, name, d, n, seed, model="gh", p=-1.0, a=1.2, b=0.8):
    path = wdir / f"{name}.h5"
    if not path.exists():
        run("generate", "--model", model, "--dim", d, "--n", n, "--seed", seed, "--p", p, "--a", a, "--b", b,
            "--out", path)
    with h5py.File(path, "r") as f:
        x = f["X"][()]
    return path, x


def read_fit(path, name):
    with h5py.File(path, "r") as f:
        g = f["fits"][name]
        par = {k: g["params"][k][()] for k in g["params"]}
        se = {k: g["se"][k][()] for k in g["se"]}
        sattrs = {k: g["se"].attrs[k] for k in g["se"].attrs}
        cov = g["param_cov"][()] if "param_cov" in g else None
        names = [s.decode() if isinstance(s, bytes) else s for s in g["param_cov"].attrs["names"]] if cov is not None \
            else None
        attrs = dict(g.attrs)
    return par, se, sattrs, cov, names, attrs


# ------------------------------------------------------------- parameters

def name_list(d, fam, sym, pfixed):
    names = [f"mu[{j}]" for j in range(d)]
    if not sym and fam != "gauss":
        names += [f"gamma[{j}]" for j in range(d)]
    names += [f"sigma[{j},{k}]" for j in range(d) for k in range(j + 1)]
    if fam != "gauss":
        if not pfixed and fam not in ("nig", "hyp"):
            names.append("p")
        if fam != "t":
            names.append("a")
        if fam != "vg":
            names.append("b")
    return names


def unpack(theta, names, base):
    mu, gamma, sigma = base.mu.copy(), base.gamma.copy(), base.sigma.copy()
    p, a, b = base.p, base.a, base.b
    for v, nm in zip(theta, names):
        if nm.startswith("mu["):
            mu[int(nm[3:-1])] = v
        elif nm.startswith("gamma["):
            gamma[int(nm[6:-1])] = v
        elif nm.startswith("sigma["):
            j, k = map(int, nm[6:-1].split(","))
            sigma[j, k] = sigma[k, j] = v
        elif nm == "p":
            p = v
        elif nm == "a":
            a = v
        else:
            b = v
    return Law(mu, gamma, sigma, p, a, b, base.family)


def pack(law, names):
    out = []
    for nm in names:
        if nm.startswith("mu["):
            out.append(law.mu[int(nm[3:-1])])
        elif nm.startswith("gamma["):
            out.append(law.gamma[int(nm[6:-1])])
        elif nm.startswith("sigma["):
            j, k = map(int, nm[6:-1].split(","))
            out.append(law.sigma[j, k])
        else:
            out.append(getattr(law, nm))
    return np.array(out, dtype=float)


def fd_hessian(x, law, names):
    """Central-difference Hessian of sum_i log f(x_i) (Richardson-extrapolated
    over steps h and 2h: error O(h^4))."""
    th0 = pack(law, names)
    d = law.dim
    scale = []
    for nm, v in zip(names, th0):
        if nm.startswith(("mu[", "gamma[")):
            j = int(nm[nm.index("[") + 1:-1])
            scale.append(math.sqrt(law.sigma[j, j]))
        elif nm.startswith("sigma["):
            j, k = map(int, nm[6:-1].split(","))
            scale.append(math.sqrt(law.sigma[j, j] * law.sigma[k, k]))
        elif nm == "p":
            scale.append(max(1.0, abs(v)))
        else:
            scale.append(abs(v))
    scale = np.array(scale)
    # a row close to mu makes the variance-gamma density barely smooth there
    # (P = p - d/2 near 1): steps in mu stay well below that row's distance
    z = np.linalg.solve(np.linalg.cholesky(law.sigma), (x - law.mu).T)
    qmin = float(np.min(np.sum(z * z, axis=0)))
    for i, nm in enumerate(names):
        if nm.startswith("mu["):
            scale[i] = min(scale[i], 0.02 * math.sqrt(qmin) * scale[i] / 1e-3)

    def f(th):
        return float(np.sum(unpack(th, names, law).logpdf(x)))

    def hess(rel):
        h = rel * scale
        k = len(th0)
        H = np.zeros((k, k))
        f0 = f(th0)
        for i in range(k):
            e = np.zeros(k)
            e[i] = h[i]
            H[i, i] = (f(th0 + 2 * e) - 2 * f0 + f(th0 - 2 * e)) / (4 * h[i] ** 2)
            for j in range(i):
                u = np.zeros(k)
                u[j] = h[j]
                H[i, j] = H[j, i] = (f(th0 + e + u) - f(th0 + e - u) - f(th0 - e + u) + f(th0 - e - u)) / (4 * h[i] * h[j])
        return H

    H1, H2 = hess(1e-3), hess(2e-3)
    del d
    return (4 * H1 - H2) / 3


def tangent_basis(law, names):
    """Orthonormal basis of {delta: c' delta = 0}, c = grad log|Sigma| (none for gauss)."""
    k = len(names)
    if law.family == "gauss":
        return np.eye(k)
    lam = np.linalg.inv(law.sigma)
    c = np.zeros(k)
    for i, nm in enumerate(names):
        if nm.startswith("sigma["):
            j, l_ = map(int, nm[6:-1].split(","))
            c[i] = lam[j, l_] * (1 if j == l_ else 2)
    q, _ = np.linalg.qr(np.column_stack([c, np.eye(k)]))
    return q[:, 1:k]


def check_fit(wdir, x, data, fam, extra=(), d=None, np_=1, tol=1e-4):
    out = wdir / f"r_{data.stem}_{fam}_{'_'.join(map(str, extra)) or 'plain'}_{np_}.h5"
    run("fit", "--data", data, "--model", fam, "--out", out, "--quiet", "--se", *extra, np_=np_)
    par, se, sattrs, cov, names, attrs = read_fit(out, fam)
    sym = "--symmetric" in extra
    pfixed = "--p-fixed" in extra
    assert names == name_list(x.shape[1], fam, sym, pfixed), names
    assert sattrs["method"] == "full" and sattrs["reason"] == "", sattrs
    law = Law(par["mu"], par.get("gamma", np.zeros(x.shape[1])), par["sigma"], par.get("p", math.nan),
              par.get("a", math.nan), par.get("b", math.nan), fam)
    H = fd_hessian(x, law, names)
    info_fd = -H
    T = tangent_basis(law, names)
    m_fd = T.T @ info_fd @ T
    m_gh = np.linalg.inv(T.T @ cov @ T)
    dg = np.sqrt(np.outer(np.diag(m_fd), np.diag(m_fd)))
    err_info = np.max(np.abs(m_gh - m_fd) / dg)
    # the covariance on the tangent space (V = T (T' I T)^-1 T'), and none across it
    v_fd = np.linalg.inv(m_fd)
    v_gh = T.T @ cov @ T
    dv = np.sqrt(np.outer(np.diag(v_fd), np.diag(v_fd)))
    err_cov = np.max(np.abs(v_gh - v_fd) / dv)
    assert np.max(np.abs(cov - T @ v_gh @ T.T)) <= 1e-9 * np.max(np.abs(cov))
    print(f"{fam} {extra} d={x.shape[1]}: information rel err {err_info:.2e}, covariance {err_cov:.2e}, "
          f"cond {sattrs['condition_number']:.3g}, newton decrement {sattrs['newton_decrement']:.2e}")
    # the information to 1e-4 (issue 11); its inverse amplifies the finite
    # differences' error by up to the condition number: 1e-3
    assert err_info < tol and err_cov < 10 * tol
    # the reported SEs are the square roots of param_cov's diagonal
    sd = dict(zip(names, np.sqrt(np.diag(cov))))
    for nm, v in sd.items():
        if nm.startswith("mu["):
            got = se["mu"][int(nm[3:-1])]
        elif nm.startswith("gamma["):
            got = se["gamma"][int(nm[6:-1])]
        elif nm.startswith("sigma["):
            j, k = map(int, nm[6:-1].split(","))
            got = se["sigma"][j, k]
            assert se["sigma"][k, j] == got
        else:
            got = se[nm]
        assert abs(got - v) <= 1e-12 * v, (nm, got, v)
    # fixed parameters have SE 0; the scale orbit is in the null space of the information
    for nm in ("p", "a", "b"):
        if nm not in names and fam != "gauss":
            assert se[nm] == 0.0, nm
    if sym:
        assert np.all(se["gamma"] == 0.0)
    assert sattrs["newton_decrement"] < 1e-3
    return out, law, cov, names, se


# ------------------------------------------------------------------ tests

@pytest.mark.parametrize("d", [1, 3])
@pytest.mark.parametrize("fam,extra", [("gh", ()), ("nig", ()), ("vg", ()), ("t", ()), ("hyp", ()),
                                       ("gh", ("--symmetric",)), ("gh", ("--p-fixed", "1.5")),
                                       ("t", ("--symmetric",))])
def test_information_matches_fd_hessian(wdir, fam, extra, d):
    if fam == "hyp":  # data of the hyperbolic law (on GH data its fit runs to the face b = 0)
        data, x = gen(wdir, f"hyp{d}", d, 1500, 31 + d, p=(d + 1) / 2, a=1.0, b=1.0)
    else:
        data, x = gen(wdir, f"gh{d}", d, 1500, 11 + d)
    check_fit(wdir, x, data, fam, extra)


def test_nig_data_d3_three_ranks(wdir):
    """NIG data fitted by NIG on 3 ranks: the same check, and the same SEs as one rank."""
    data, x = gen(wdir, "nig3", 3, 1500, 5, model="nig", p=-0.5, a=2.0, b=1.5)
    out3, _, cov3, _, _ = check_fit(wdir, x, data, "nig", np_=3)
    out1, _, cov1, _, _ = check_fit(wdir, x, data, "nig", np_=1)
    assert np.max(np.abs(cov3 - cov1) / np.sqrt(np.outer(np.diag(cov1), np.diag(cov1)))) < 1e-10


def test_delta_method_moments(wdir):
    """se/mean, se/cov and se/sqrt_ab against the delta method with numerical
    gradients of Law.moments (an independent code path for E Y, Var Y)."""
    data, x = gen(wdir, "gh3", 3, 1500, 14)
    out, law, cov, names, se = check_fit(wdir, x, data, "gh")
    th0 = pack(law, names)
    h = 1e-6 * np.maximum(np.abs(th0), 1e-3)

    def g(th):
        m, c = unpack(th, names, law).moments()
        pa = unpack(th, names, law)
        return np.concatenate([m, c[np.tril_indices(3)], [math.sqrt(pa.a * pa.b)]])

    J = np.array([(g(th0 + np.eye(len(th0))[i] * h[i]) - g(th0 - np.eye(len(th0))[i] * h[i])) / (2 * h[i])
                  for i in range(len(th0))]).T
    sd = np.sqrt(np.diag(J @ cov @ J.T))
    want_mean, want_cov, want_sab = sd[:3], sd[3:9], sd[9]
    got_cov = np.array([se["cov"][j, k] for j in range(3) for k in range(j + 1)])
    assert np.allclose(se["mean"], want_mean, rtol=1e-5), (se["mean"], want_mean)
    assert np.allclose(got_cov, want_cov, rtol=1e-5), (got_cov, want_cov)
    assert abs(se["sqrt_ab"] - want_sab) < 1e-5 * want_sab


@pytest.mark.parametrize("d", [1, 3])
def test_gauss_closed_form(wdir, d):
    """The Gaussian MLE: SE(mu_j) = sqrt(S_jj / n), SE(S_jk) = sqrt((S_jj S_kk + S_jk^2) / n)."""
    data, x = gen(wdir, f"gh{d}", d, 1500, 11 + d)
    out = wdir / f"gauss{d}.h5"
    run("fit", "--data", data, "--model", "gauss", "--out", out, "--quiet", "--se")
    par, se, sattrs, cov, names, _ = read_fit(out, "gauss")
    n = x.shape[0]
    s = np.cov(x.T, bias=True).reshape(d, d)
    assert np.allclose(par["sigma"], s, rtol=1e-10)
    assert np.allclose(se["mu"], np.sqrt(np.diag(s) / n), rtol=1e-10)
    assert np.allclose(se["sigma"], np.sqrt((np.outer(np.diag(s), np.diag(s)) + s * s) / n), rtol=1e-10)
    assert np.allclose(se["mean"], se["mu"]) and np.allclose(se["cov"], se["sigma"])
    assert np.all(se["gamma"] == 0) and all(math.isnan(se[k]) for k in ("p", "a", "b", "sqrt_ab"))
    assert names == name_list(d, "gauss", False, False) and sattrs["reason"] == ""


def test_data_near_the_limits_of_double(wdir):
    """Rows multiplied by c = 2^505 (ghfit fits them scaled back by a power of
    two): the SEs follow the law's parameters in the |Sigma| = 1 gauge, mu
    and E X times c, gamma / c, Sigma unchanged, a / c^2, b c^2, Cov X c^2."""
    data, x = gen(wdir, "gh3", 3, 1500, 14)
    c = 2.0 ** 505
    big = wdir / "gh3_big.h5"
    with h5py.File(big, "w") as f:
        f["X"] = x * c
    out0, out1 = wdir / "small.h5", wdir / "big.h5"
    run("fit", "--data", data, "--model", "gh", "--out", out0, "--quiet", "--se")
    run("fit", "--data", big, "--model", "gh", "--out", out1, "--quiet", "--se")
    _, s0, _, cov0, names, _ = read_fit(out0, "gh")
    _, s1, _, cov1, _, _ = read_fit(out1, "gh")
    fac = {"mu": c, "gamma": 1 / c, "sigma": 1.0, "p": 1.0, "a": c ** -2, "b": c ** 2, "mean": c, "cov": c * c,
           "sqrt_ab": 1.0}
    for k, f in fac.items():
        assert np.allclose(s1[k], np.asarray(s0[k]) * f, rtol=1e-7, atol=0), k
    # param_cov in the data's coordinates: an entry scaled by 2^e follows the
    # parameters where 2^e times its small-data value is a normal double
    # (entries that pair mu or b with mu, b, Sigma, p, or a with a, overflow
    # or underflow: |e| = 1010 or 1515 and more)
    fv = np.array([math.log2(fac[nm.split("[")[0]]) for nm in names])
    e = np.add.outer(fv, fv)
    with np.errstate(divide="ignore"):
        mag = e + np.log2(np.abs(cov0))
    ok = (np.abs(e) < 1020) & (np.abs(mag) < 1000)
    assert np.count_nonzero(ok) > 0.7 * ok.size
    assert np.allclose((cov1 * np.exp2(-np.where(ok, e, 0)))[ok], cov0[ok], rtol=1e-6,
                       atol=1e-9 * np.max(np.abs(cov0)))
