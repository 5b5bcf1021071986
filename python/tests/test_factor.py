"""The factor form of the dispersion (``--sigma factor:R``, ``diag``): the
EM fit is the maximum likelihood of the factor law.

Data from a NIG law with Sigma = B B' + diag(D) (d = 6, two factors, no
Heywood case: D well inside (0, diag Sigma)); ``ghfit fit --sigma
factor:R`` for R = 1, 2 and ``--sigma diag``; then SciPy maximises the
log-likelihood written with this package's own log-density
(``factor_law``: SciPy's Bessel functions, none of the C code) over
(mu, gamma, B, log D, log a, log b), from the EM answer and from a start of
its own (the sample moments, principal components).  The checks:

  * the reader gives the factor form (attributes sigma_structure, factors;
    params/B, params/D; params/sigma = B B' + diag D, |Sigma| = 1);
  * the log-likelihood ghfit reports is the log-density sum (1e-8 relative);
  * no start of the independent maximiser goes above it by more than 1e-6
    relative (EM is at the maximum of the factor law, not short of it).

``--se`` of a factor:1 fit against a finite-difference Hessian of the same
log-density, and ``--missing em`` of a factor:1 fit against the
observed-data log-likelihood recomputed here (d = 5, 3,000 rows; the
tests' docstrings).
"""

from __future__ import annotations

import math

import h5py
import numpy as np
import pytest
from scipy import optimize

import ghfit
from ghfit.law import factor_law

D_DIM, N_ROWS = 6, 1500


def _data(work):
    path = work / "factor6.h5"
    rng = np.random.default_rng(2026)
    B = rng.normal(0.0, 0.8, size=(D_DIM, 2))
    D = rng.uniform(0.3, 0.6, size=D_DIM)
    mu, gamma = rng.normal(0, 0.3, D_DIM), rng.normal(0, 0.2, D_DIM)
    y = rng.wald(1.0, 2.0, size=N_ROWS)  # inverse Gaussian: NIG
    z = rng.normal(size=(N_ROWS, 2)) @ B.T + rng.normal(size=(N_ROWS, D_DIM)) * np.sqrt(D)
    x = mu + np.outer(y, gamma) + np.sqrt(y)[:, None] * z
    if not path.exists():
        with h5py.File(path, "w") as f:
            f["X"] = x
    return path, x


def _loglik(law, x):
    with np.errstate(all="ignore"):
        s = float(np.sum(law.logpdf(x)))
    return s if math.isfinite(s) else -1e300


class FactorParam:
    def __init__(self, d, r):
        self.d, self.r = d, r

    def law(self, th):
        d, r = self.d, self.r
        mu, gamma = th[:d], th[d:2 * d]
        B = th[2 * d:2 * d + d * r].reshape(d, r)
        D = np.exp(th[2 * d + d * r:3 * d + d * r])
        a, b = math.exp(th[-2]), math.exp(th[-1])
        return factor_law(mu, gamma, B, D, -0.5, a, b, "nig")

    def theta(self, mu, gamma, B, D, a, b):
        return np.concatenate([mu, gamma, np.asarray(B).reshape(-1), np.log(D), [math.log(a), math.log(b)]])


def _maximise(par, x, th0):
    r = optimize.minimize(lambda th: -_loglik(par.law(th), x), th0, method="L-BFGS-B",
                          options={"maxiter": 4000, "maxfun": 400000, "ftol": 1e-15, "gtol": 1e-9})
    return -r.fun


@pytest.mark.parametrize("r", [0, 1, 2])
def test_factor_em_is_the_maximum(cli, work, r):
    path, x = _data(work)
    form = "diag" if r == 0 else f"factor:{r}"
    out = work / f"factor_r{r}.h5"
    cli.run("fit", "--data", path, "--model", "nig", "--sigma", form, "--tol", "1e-12", "--max-iter", "5000",
            "--out", out, "--quiet")
    fit = ghfit.read(str(out)).fits["nig"]
    assert fit.sigma_structure == ("diag" if r == 0 else "factor") and fit.factors == r
    B = np.asarray(fit.params["B"]).reshape(D_DIM, r) if r else np.zeros((D_DIM, 0))
    D = np.asarray(fit.params["D"])
    law = fit.law
    np.testing.assert_allclose(law.sigma, B @ B.T + np.diag(D), rtol=1e-12, atol=1e-14)
    assert abs(np.linalg.slogdet(law.sigma)[1]) < 1e-10  # the |Sigma| = 1 gauge
    assert "converged" in fit.status
    ll_em = fit.loglik
    assert abs(_loglik(law, x) - ll_em) <= 1e-8 * abs(ll_em), (ll_em, _loglik(law, x))

    par = FactorParam(D_DIM, r)
    ll_from_em = _maximise(par, x, par.theta(law.mu, law.gamma, B, D, law.a, law.b))
    # a start of its own: sample moments, the leading principal components
    cov = np.cov(x.T, bias=True)
    w, v = np.linalg.eigh(cov)
    B0 = v[:, ::-1][:, :r] * np.sqrt(np.maximum(w[::-1][:r] - w[: D_DIM - r].mean(), 1e-3)) if r else np.zeros((D_DIM, 0))
    D0 = np.maximum(np.diag(cov) - np.sum(B0 * B0, axis=1), 0.05 * np.diag(cov))
    ll_own = _maximise(par, x, par.theta(x.mean(axis=0), np.zeros(D_DIM), B0, D0, 1.0, 1.0))
    tol_hi = 1e-6 * abs(ll_em)
    print(f"factor r={r}: em {ll_em:.9f} from_em {ll_from_em - ll_em:+.3e} own {ll_own - ll_em:+.3e}")
    assert ll_from_em <= ll_em + tol_hi, f"from EM: {ll_from_em} > {ll_em}"
    assert ll_own <= ll_em + tol_hi, f"own start: {ll_own} > {ll_em}"


def test_full_file_reads_as_full(cli, work):
    """A full-form fit (and any file written before the factor form) has no
    sigma_structure attribute: the reader takes it as full."""
    path, _ = _data(work)
    out = work / "factor_full.h5"
    cli.run("fit", "--data", path, "--model", "nig", "--out", out, "--quiet")
    fit = ghfit.read(str(out)).fits["nig"]
    assert fit.sigma_structure == "full" and fit.factors == -1 and "B" not in fit.params


def test_factor_report_and_lrt(cli, work):
    """The report shows B as a loadings heat map and D; the LR tests pair the
    nested forms diag < factor:1 < factor:2 with the parameter counts' difference."""
    from conftest import parse, run_report

    path, _ = _data(work)
    job = work / "factor_sweep.yaml"
    job.write_text(f"data: {path}\nout: {work / 'factor_sweep.h5'}\nfamily: nig\nsigma: [diag, factor:1, factor:2]\n")
    cli.run("run", job, "--quiet")
    res = ghfit.read(str(work / "factor_sweep.h5"))
    tests = {(t.restricted.factors, t.full.factors): t.df for t in ghfit.lr_tests(res.fits.values())}
    d = D_DIM
    assert tests == {(0, 1): d - 0, (0, 2): 2 * d - 1, (1, 2): d - 1}, tests
    out = work / "factor_report.html"
    r = run_report(str(work / "factor_sweep.h5"), "--out", str(out), cwd=work)
    assert r.returncode == 0, r.stderr
    text, t = parse(out)
    assert text.count("Factor loadings B and specific variances D") == 3


# ------------------------------------------------ standard errors (--se)

SE_D, SE_N = 5, 3000


def _se_data(work):
    """NIG rows with a one-factor dispersion (d = 5, 3,000 rows)."""
    path = work / "factor_se5.h5"
    rng = np.random.default_rng(77)
    B = rng.normal(0.0, 0.9, size=(SE_D, 1))
    D = rng.uniform(0.3, 0.6, size=SE_D)
    mu, gamma = rng.normal(0, 0.3, SE_D), rng.normal(0, 0.3, SE_D)
    y = rng.wald(1.0, 2.0, size=SE_N)
    z = rng.normal(size=(SE_N, 1)) @ B.T + rng.normal(size=(SE_N, SE_D)) * np.sqrt(D)
    x = mu + np.outer(y, gamma) + np.sqrt(y)[:, None] * z
    if not path.exists():
        with h5py.File(path, "w") as f:
            f["X"] = x
    return path, x


def _se_read(path):
    with h5py.File(path, "r") as f:
        g = f["fits"]["nig"]
        par = {k: g["params"][k][()] for k in g["params"]}
        se = {k: g["se"][k][()] for k in g["se"]}
        attrs = dict(g["se"].attrs)
        cov = g["param_cov"][()]
        names = [s.decode() if isinstance(s, bytes) else s for s in g["param_cov"].attrs["names"]]
    return par, se, attrs, cov, names


def test_factor_se_matches_fd_hessian(cli, work):
    """`--se` of a factor:1 fit: param_cov (the covariance of mu, gamma, the
    entries of Sigma = B B' + D, a, b that the factor form's information
    implies) against the central-difference Hessian of the exact
    log-likelihood (this package's log-density, SciPy's Bessel functions) in
    the factor coordinates (mu, gamma, B, D, a, b), gauge-fixed the same way
    (the tangent space of |Sigma| = 1) and mapped to those quantities; and the
    SEs of mu, gamma, a, b close to the full-form fit's on these
    factor-generated data."""
    path, x = _se_data(work)
    d = SE_D
    out, full = work / "factor_se_f1.h5", work / "factor_se_full.h5"
    cli.run("fit", "--data", path, "--model", "nig", "--sigma", "factor:1", "--tol", "1e-12", "--max-iter", "5000",
            "--se", "--out", out, "--quiet")
    cli.run("fit", "--data", path, "--model", "nig", "--tol", "1e-12", "--max-iter", "5000", "--se", "--out", full,
            "--quiet")
    par, se, attrs, cov, names = _se_read(out)
    assert attrs["method"] == "full" and attrs["reason"] == "", attrs
    assert names == ([f"mu[{j}]" for j in range(d)] + [f"gamma[{j}]" for j in range(d)]
                     + [f"sigma[{j},{k}]" for j in range(d) for k in range(j + 1)] + ["a", "b"])
    B0, D0 = np.asarray(par["B"]).reshape(d, 1), np.asarray(par["D"])
    mu0, g0, a0, b0 = par["mu"], par["gamma"], float(par["a"]), float(par["b"])
    th0 = np.concatenate([mu0, g0, B0[:, 0], D0, [a0, b0]])
    k = th0.size

    def f(th):
        law = factor_law(th[:d], th[d:2 * d], th[2 * d:3 * d].reshape(d, 1), th[3 * d:4 * d], -0.5, th[-2], th[-1],
                         "nig")
        return float(np.sum(law.logpdf(x)))

    sd = np.sqrt(np.diag(par["sigma"]))
    scale = np.concatenate([sd, sd, np.abs(B0[:, 0]), D0, [a0, b0]])
    h = 1e-3 * scale
    H = np.zeros((k, k))
    f0 = f(th0)
    E = np.diag(h)
    for i in range(k):
        H[i, i] = (f(th0 + 2 * E[i]) - 2 * f0 + f(th0 - 2 * E[i])) / (4 * h[i] ** 2)
        for j in range(i):
            H[i, j] = H[j, i] = (f(th0 + E[i] + E[j]) - f(th0 + E[i] - E[j]) - f(th0 - E[i] + E[j])
                                 + f(th0 - E[i] - E[j])) / (4 * h[i] * h[j])
    # the gauge: c = grad log|B B' + D| (B: 2 Sigma^-1 B, D: diag Sigma^-1)
    lam = np.linalg.inv(B0 @ B0.T + np.diag(D0))
    c = np.zeros(k)
    c[2 * d:3 * d] = 2 * (lam @ B0)[:, 0]
    c[3 * d:4 * d] = np.diag(lam)
    q, _ = np.linalg.qr(np.column_stack([c, np.eye(k)]))
    T = q[:, 1:k]
    vf = T @ np.linalg.inv(T.T @ (-H) @ T) @ T.T
    # (mu, gamma, Sigma lower triangle, a, b) as functions of the factor coordinates
    J = np.zeros((len(names), k))
    J[:2 * d, :2 * d] = np.eye(2 * d)
    r = 2 * d
    for j in range(d):
        for l_ in range(j + 1):
            J[r, 2 * d + j] += B0[l_, 0]
            J[r, 2 * d + l_] += B0[j, 0]
            if j == l_:
                J[r, 3 * d + j] = 1.0
            r += 1
    J[r, k - 2], J[r + 1, k - 1] = 1.0, 1.0
    want = J @ vf @ J.T
    dv = np.sqrt(np.outer(np.diag(want), np.diag(want)))
    err = np.max(np.abs(cov - want) / dv)
    print(f"factor se: param_cov vs finite differences {err:.2e}, cond {attrs['condition_number']:.3g}, "
          f"newton decrement {attrs['newton_decrement']:.2e}")
    assert err < 1e-3, err
    assert attrs["newton_decrement"] < 1e-3
    assert np.allclose(np.sqrt(np.diag(cov))[:d], se["mu"], rtol=1e-12)
    got = np.array([se["sigma"][j, l_] for j in range(d) for l_ in range(j + 1)])
    assert np.allclose(np.sqrt(np.diag(cov))[2 * d:r], got, rtol=1e-12)
    # the full form's SEs of mu, gamma, a, b on the same factor-generated data
    _, sfull, afull, _, _ = _se_read(full)
    for key in ("mu", "gamma", "a", "b", "mean"):
        rel = np.max(np.abs(np.asarray(se[key]) - sfull[key]) / sfull[key])
        print(f"  se/{key}: factor vs full {rel:.3f}")
        assert rel < 0.05, (key, se[key], sfull[key])


# ------------------------------------------- missing coordinates (--missing em)

def test_factor_missing_em(cli, work):
    """`--missing em` with factor:1 on factor-generated rows with 10% of the
    entries missing completely at random: the log-likelihood ghfit writes is
    the observed-data log-likelihood sum_i log f(x_i,O) recomputed here from
    the written parameters (x_O has the law (mu_O, gamma_O, B_O B_O' + D_O, p,
    a, b); this package's log-density, 1e-9 relative); the fit is close to the
    full form's `--missing em` fit (Sigma, mu, gamma within a tenth of the
    scale; the full form, with more parameters, a little above in
    log-likelihood)."""
    path, x = _se_data(work)
    d = SE_D
    rng = np.random.default_rng(5)
    m = rng.random(x.shape) < 0.10
    m[m.all(axis=1), 0] = False
    xm = np.where(m, np.nan, x)
    mpath = work / "factor_missing5.h5"
    with h5py.File(mpath, "w") as f:
        f["X"] = xm
    out, full = work / "factor_miss_f1.h5", work / "factor_miss_full.h5"
    cli.run("fit", "--data", mpath, "--model", "nig", "--sigma", "factor:1", "--missing", "em", "--tol", "1e-12",
            "--max-iter", "5000", "--out", out, "--quiet")
    cli.run("fit", "--data", mpath, "--model", "nig", "--missing", "em", "--tol", "1e-12", "--max-iter", "5000",
            "--out", full, "--quiet")
    fit, ffull = ghfit.read(str(out)).fits["nig"], ghfit.read(str(full)).fits["nig"]
    assert fit.sigma_structure == "factor" and "converged" in fit.status, fit.status
    B, D = np.asarray(fit.params["B"]).reshape(d, 1), np.asarray(fit.params["D"])
    S = B @ B.T + np.diag(D)
    mu, gamma, a, b = fit.params["mu"], fit.params["gamma"], float(fit.params["a"]), float(fit.params["b"])
    ll = 0.0
    obs = ~m
    for key in {o.tobytes() for o in obs}:
        o = np.frombuffer(key, dtype=bool)
        rows = np.all(obs == o, axis=1)
        law = ghfit.law.Law(mu[o], gamma[o], S[np.ix_(o, o)], -0.5, a, b, "nig")
        ll += float(np.sum(law.logpdf(xm[rows][:, o])))
    sd = np.sqrt(np.diag(ffull.law.sigma))
    print(f"factor missing: ghfit {fit.loglik:.10f}, recomputed {ll:.10f}, full form {ffull.loglik:.10f}; "
          f"Sigma {np.max(np.abs(fit.law.sigma - ffull.law.sigma) / np.outer(sd, sd)):.3f}, "
          f"mu {np.max(np.abs(mu - ffull.params['mu']) / sd):.4f}, "
          f"gamma {np.max(np.abs(gamma - ffull.params['gamma']) / sd):.4f} of the scale from the full form's")
    assert abs(ll - fit.loglik) <= 1e-9 * abs(ll), (ll, fit.loglik)
    assert 0.0 <= ffull.loglik - fit.loglik < 20.0
    assert np.max(np.abs(fit.law.sigma - ffull.law.sigma) / np.outer(sd, sd)) < 0.1
    assert np.max(np.abs(mu - ffull.params["mu"]) / sd) < 0.1
    assert np.max(np.abs(gamma - ffull.params["gamma"]) / sd) < 0.1


def test_factor_se_gauss_diag_closed_form(cli, work):
    """`--se` of a Gaussian `--sigma diag` fit (no gauge, no rotation): the
    closed form of the diagonal Gaussian MLE, SE(mu_j) = sqrt(S_jj / n),
    SE(Sigma_jj) = sqrt(2 S_jj^2 / n), and 0 for the off-diagonal entries."""
    path, x = _se_data(work)
    out = work / "factor_se_gauss_diag.h5"
    cli.run("fit", "--data", path, "--model", "gauss", "--sigma", "diag", "--se", "--out", out, "--quiet")
    with h5py.File(out, "r") as f:
        g = f["fits"]["gauss"]
        se_mu, se_s, reason = g["se/mu"][()], g["se/sigma"][()], g["se"].attrs["reason"]
    n, s = x.shape[0], x.var(axis=0)
    assert reason == "", reason
    np.testing.assert_allclose(se_mu, np.sqrt(s / n), rtol=1e-9)
    np.testing.assert_allclose(np.diag(se_s), np.sqrt(2 * s * s / n), rtol=1e-9)
    assert np.all(se_s[~np.eye(x.shape[1], dtype=bool)] == 0.0)
