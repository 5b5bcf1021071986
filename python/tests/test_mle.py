"""Every family's EM fit is the maximum likelihood: an independent maximiser
finds no higher log-likelihood.

For each family (and its symmetric form), at d = 1 and d = 3, `ghfit fit`
runs on a small skewed heavy-tailed sample; then SciPy maximises the
log-likelihood written with this package's own log-density (SciPy's Bessel
functions, none of the C code) over an unconstrained parametrisation, from
the EM solution and from a start of its own.  The checks:

  * the log-likelihood ghfit reports is the log-density sum at its
    parameters (1e-8 relative);
  * no start of the independent maximiser goes above it by more than
    1e-6 per observation (EM is at the maximum, not short of it);
  * the maximiser's own start reaches it within 1e-6 per observation (the
    two methods agree on the value of the maximum).
"""

from __future__ import annotations

import math

import h5py
import numpy as np
import pytest
from scipy import optimize

import ghfit
from ghfit.law import Law

N_ROWS = 1500


def _data(cli, work, d):
    path = work / f"mle{d}.h5"
    if not path.exists():
        # GH with p = -1, a = 1, b = 1: skewed and heavy-tailed, in no family
        # but gh (so that every restricted fit is a real constrained optimum)
        cli.run("generate", "--model", "gh", "--dim", d, "--n", N_ROWS, "--seed", 11 + d, "--out", path)
    with h5py.File(path, "r") as f:
        return path, np.array(f["X"][()])


class Param:
    """theta <-> Law for one family: mu, gamma (unless symmetric), the
    Cholesky factor of Sigma (log diagonal), the free subordinator
    parameters (logs where positive)."""

    def __init__(self, family, d, symmetric):
        self.family, self.d, self.sym = family, d, symmetric
        self.il = np.tril_indices(d)

    def law(self, th):
        d, k = self.d, 0
        mu = th[k:k + d]
        k += d
        if self.sym:
            gamma = np.zeros(d)
        else:
            gamma = th[k:k + d]
            k += d
        m = len(self.il[0])
        L = np.zeros((d, d))
        L[self.il] = th[k:k + m]
        L[np.diag_indices(d)] = np.exp(np.diag(L))
        k += m
        s = th[k:]
        f = self.family
        if f == "gh":
            p, a, b = s[0], math.exp(s[1]), math.exp(s[2])
        elif f == "hyp":
            p, a, b = 0.5 * (d + 1), math.exp(s[0]), math.exp(s[1])
        elif f == "nig":
            p, a, b = -0.5, math.exp(s[0]), math.exp(s[1])
        elif f == "vg":
            p, a, b = math.exp(s[0]), math.exp(s[1]), 0.0
        elif f == "t":
            p, a, b = -math.exp(s[0]), 0.0, math.exp(s[1])
        else:
            raise ValueError(f)
        return Law(mu, gamma, L @ L.T, p, a, b, f)

    def theta(self, law):
        d = self.d
        L = np.linalg.cholesky(law.sigma)
        L[np.diag_indices(d)] = np.log(np.diag(L))
        parts = [law.mu] + ([] if self.sym else [law.gamma]) + [L[self.il]]
        p, a, b, f = law.p, law.a, law.b, self.family
        # a fit on a face of its domain (hyp reaches b = 0, its vg limit):
        # start just inside it, where the log parametrisation is defined
        a, b = max(a, 1e-300), max(b, 1e-300)
        if f == "gh":
            sub = [p, math.log(a), math.log(b)]
        elif f in ("hyp", "nig"):
            sub = [math.log(a), math.log(b)]
        elif f == "vg":
            sub = [math.log(p), math.log(a)]
        else:
            sub = [math.log(-p), math.log(b)]
        return np.concatenate(parts + [np.array(sub, float)])


def _loglik(law, x):
    with np.errstate(all="ignore"):
        v = law.logpdf(x)
    s = float(np.sum(v))
    return s if math.isfinite(s) else -1e300


def _maximise(par, x, th0):
    def nll(th):
        return -_loglik(par.law(th), x)

    r = optimize.minimize(nll, th0, method="L-BFGS-B",
                          options={"maxiter": 3000, "maxfun": 200000, "ftol": 1e-14, "gtol": 1e-8})
    return -r.fun


def _own_start(par, x):
    """A start that knows nothing of the EM solution: the sample moments and
    a moderate subordinator of the family."""
    d = par.d
    mu, cov = np.mean(x, axis=0), np.atleast_2d(np.cov(x.T))
    sub = {"gh": (-0.5, 1.0, 1.0), "hyp": (0.5 * (d + 1), 1.0, 1.0), "nig": (-0.5, 1.0, 1.0),
           "vg": (2.0, 4.0, 0.0), "t": (-3.0, 0.0, 4.0)}[par.family]
    return par.theta(Law(mu, np.zeros(d), cov, *sub, par.family))


FITS = [(f, s) for f in ("gh", "hyp", "nig", "vg", "t") for s in (False, True)]


@pytest.mark.parametrize("d", [1, 3])
@pytest.mark.parametrize("family,symmetric", FITS, ids=[f + ("-sym" if s else "") for f, s in FITS])
def test_em_is_the_maximum(cli, work, d, family, symmetric):
    if family not in cli.families:
        pytest.fail(f"ghfit fit --help does not list the family {family}")
    path, x = _data(cli, work, d)
    out = work / f"mle_{family}{'_sym' if symmetric else ''}_{d}.h5"
    args = ["fit", "--data", path, "--model", family, "--tol", "1e-12", "--max-iter", "5000", "--out", out,
            "--quiet"]
    if symmetric:
        args.append("--symmetric")
    cli.run(*args)
    fit = ghfit.read(str(out)).fits[family]
    n = x.shape[0]
    assert fit.n_obs == n
    law = fit.law
    if symmetric:
        assert np.all(law.gamma == 0.0)
    ll_em = fit.loglik
    assert abs(_loglik(law, x) - ll_em) <= 1e-8 * abs(ll_em), (ll_em, _loglik(law, x))

    par = Param(family, d, symmetric)
    ll_from_em = _maximise(par, x, par.theta(law))
    ll_own = _maximise(par, x, _own_start(par, x))
    tol_hi = 1e-6 * n
    assert ll_from_em <= ll_em + tol_hi, f"from EM: {ll_from_em} > {ll_em}"
    assert ll_own <= ll_em + tol_hi, f"own start: {ll_own} > {ll_em}"
    print(f"MLE {family} sym={symmetric} d={d}: em {ll_em:.9f} from_em {ll_from_em - ll_em:+.3e} own {ll_own - ll_em:+.3e}")
    assert ll_own >= ll_em - 1e-6 * n, f"own start stopped at {ll_own}, EM {ll_em}"


@pytest.mark.parametrize("d", [1, 3])
def test_gauss_is_the_sample_moments(cli, work, d):
    path, x = _data(cli, work, d)
    out = work / f"mle_gauss_{d}.h5"
    cli.run("fit", "--data", path, "--model", "gauss", "--out", out, "--quiet")
    fit = ghfit.read(str(out)).fits["gauss"]
    law = fit.law
    n = x.shape[0]
    mu, cov = x.mean(axis=0), np.atleast_2d(np.cov(x.T, bias=True))
    np.testing.assert_allclose(law.mu, mu, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(law.sigma, cov, rtol=1e-9, atol=1e-12)
    ll = _loglik(Law(mu, np.zeros(d), cov, family="gauss"), x)
    assert abs(fit.loglik - ll) <= 1e-9 * abs(ll)
    assert fit.n_obs == n
