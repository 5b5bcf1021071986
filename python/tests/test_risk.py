"""`ghfit risk` against independent computations.

d = 1: every family, strong skew, p far from -1/2, alpha up to 0.9999, against
SciPy's adaptive quadrature (QUADPACK) of the closed-form density of
ghfit.law.Law (Bessel K from SciPy's AMOS routines): no code in common with
src/law/uni1d.c, which integrates the normal mixture over the subordinator.
d = 3: every family fitted by ghfit, several portfolios, against Monte Carlo
draws of ghfit.law.Law.sample.  Also the bad-input refusals (exit 2, one
line, no output file)."""

from __future__ import annotations

import math
import shutil

import h5py
import numpy as np
import pytest
from scipy import integrate

from ghfit.law import Law

ALPHAS = (0.9, 0.99, 0.9999)
TOL = 1e-9  # the accuracy: relative, VaR and ES

# (case, family, p, a, b, mu, gamma, sigma^2): the law of X; the loss is -X,
# so gamma < 0 puts the long tail on the loss side
CASES = [
    ("gauss", "gauss", math.nan, math.nan, math.nan, 0.3, 0.0, 2.25),
    ("gh_p5_skew", "gh", 5.0, 2.0, 0.5, 0.1, -0.8, 0.36),
    ("gh_pm8_skew", "gh", -8.0, 1.0, 20.0, -0.2, -1.5, 0.49),
    ("gh_pm8_skew_up", "gh", -8.0, 1.0, 20.0, -0.2, 1.5, 0.49),
    ("hyp", "hyp", 1.0, 3.0, 1.0, 0.0, -0.5, 1.0),
    ("nig_sym", "nig", -0.5, 4.0, 1.0, 0.0, 0.0, 1.0),
    ("nig_skew_loss", "nig", -0.5, 1.0, 1.0, 0.05, -5.0, 1.0),
    ("nig_skew_gain", "nig", -0.5, 1.0, 1.0, 0.05, 5.0, 1.0),
    ("vg_p03", "vg", 0.3, 2.0, 0.0, 0.02, -0.5, 1.0),
    ("vg_p2", "vg", 2.0, 1.0, 0.0, 0.0, 1.0, 0.25),
    ("t5_skew_loss", "t", -2.5, 0.0, 5.0, 0.1, -1.0, 1.0),
    ("t3_sym", "t", -1.5, 0.0, 3.0, 0.3, 0.0, 1.44),
]


def run_risk(cli, model, w, alphas, out):
    r = cli.run("risk", "--model", model, "--portfolios", w, "--alpha", ",".join(repr(a) for a in alphas),
                "--out", out, check=False)
    assert r.returncode == 0, r.stderr
    with h5py.File(out, "r") as f:
        return np.array(f["alpha"][()]), np.array(f["var"][()]), np.array(f["es"][()]), dict(f.attrs)


@pytest.fixture(scope="session")
def uni_templates(cli, work):
    """A d = 1 result file with one fit per family (its parameters are
    replaced by each case's)."""
    cli.run("generate", "--model", "gh", "--dim", 1, "--n", 2000, "--seed", 11, "--out", work / "risk_x1.h5")
    fams = "[" + ", ".join(cli.families) + "]"
    (work / "risk1.yaml").write_text(
        f"name: risk1\ndata: risk_x1.h5\nout: risk1.h5\nfamily: {fams}\nquiet: true\n")
    cli.run("run", "risk1.yaml")
    with h5py.File(work / "risk1.h5", "r") as f:
        names = {r["family"].decode(): r["name"].decode() for r in f["summary"][()]}
    with h5py.File(work / "risk_w1.h5", "w") as f:
        f["W"] = np.ones((1, 1))
    return work / "risk1.h5", names


def set_params(path, name, law):
    with h5py.File(path, "r+") as f:
        g = f[f"fits/{name}/params"]
        g["mu"][...] = law.mu
        g["gamma"][...] = law.gamma
        g["sigma"][...] = law.sigma
        for k in ("p", "a", "b"):
            g[k][...] = getattr(law, k)


def reference(law, alpha, var):
    """The loss L = -X: with c = 1 - alpha and q = -var (ghfit's quantile of X
    at c), returns (F(q) - c) / f(q) (ghfit's VaR error to first order) and
    ES = -q + E[(q - X)^+] / c (stationary in q at the true quantile)."""
    scale = math.sqrt(law.sigma[0, 0]) * (1.0 + abs(law.gamma[0]))
    mu = law.mu[0]

    def f(x):
        return float(np.exp(law.logpdf(np.array([[x]]))[0]))

    q = -var
    # pieces: (-inf, q - 100 s], then finite pieces up to q; the vg spike at mu is a break point
    brk = sorted({q - 100 * scale, q - 10 * scale, q - scale, q - 0.1 * scale} |
                 ({mu} if q - 100 * scale < mu < q else set()))
    brk = [b for b in brk if b < q] + [q]
    kw = dict(epsabs=0.0, epsrel=1e-13, limit=2000)
    mass = integrate.quad(f, -np.inf, brk[0], **kw)[0]
    excess = integrate.quad(lambda x: (q - x) * f(x), -np.inf, brk[0], **kw)[0]
    for lo, hi in zip(brk[:-1], brk[1:]):
        mass += integrate.quad(f, lo, hi, **kw)[0]
        excess += integrate.quad(lambda x: (q - x) * f(x), lo, hi, **kw)[0]
    c = 1.0 - alpha
    dq = (mass - c) / f(q)
    return dq, -q + excess / c, scale


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_risk_univariate_against_quadrature(cli, work, uni_templates, case):
    tmpl, names = uni_templates
    cid, fam, p, a, b, mu, gam, s2 = case
    if fam not in names:
        pytest.skip(f"this ghfit has no family {fam}")
    law = Law([mu], [gam], [[s2]], p, a, b, fam)
    model = work / f"risk1_{cid}.h5"
    shutil.copy(tmpl, model)
    set_params(model, names[fam], law)
    alpha, var, es, attrs = run_risk(cli, f"{model}:/fits/{names[fam]}", work / "risk_w1.h5", ALPHAS,
                                     work / f"risk1_{cid}_out.h5")
    assert attrs["family"] == fam and attrs["fit"] == names[fam]
    np.testing.assert_array_equal(alpha, ALPHAS)
    errs = []
    for k, al in enumerate(ALPHAS):
        dq, es_ref, scale = reference(law, al, var[0, k])
        errs.append((abs(dq) / max(abs(var[0, k]), scale), abs(es[0, k] - es_ref) / max(abs(es_ref), scale)))
        assert abs(dq) <= TOL * max(abs(var[0, k]), scale), (cid, al, var[0, k], dq)
        assert abs(es[0, k] - es_ref) <= TOL * max(abs(es_ref), scale), (cid, al, es[0, k], es_ref)
        assert es[0, k] >= var[0, k]
    print(f"{cid}: largest relative error VaR {max(e[0] for e in errs):.2e}, ES {max(e[1] for e in errs):.2e}")


@pytest.fixture(scope="session")
def portfolios(work):
    rng = np.random.default_rng(3)
    w = rng.normal(size=(4, 3))
    w[0] = [1.0, 0.0, 0.0]
    with h5py.File(work / "risk_w3.h5", "w") as f:
        f["W"] = w
        f["W2"] = w[:, :2]
        bad = w.copy()
        bad[2, 1] = np.inf
        f["Wbad"] = bad
    return w


def test_risk_multivariate_against_monte_carlo(cli, work, files, portfolios):
    """Every family (the asymmetric fits) of the 3-d multi-family file: the exceedance rate of
    ghfit's VaR and the mean loss beyond it, from 10^6 draws, agree with
    1 - alpha and ES within 5 Monte Carlo standard errors."""
    n = 1_000_000
    alphas = (0.95, 0.99, 0.999)
    with h5py.File(files["multi"], "r") as f:
        rows = [(r["name"].decode(), r["family"].decode()) for r in f["summary"][()]]
        rows = [(n, fam) for n, fam in rows if not f[f"fits/{n}"].attrs.get("symmetric", 0)]
        laws = {}
        for name, fam in rows:
            g = f[f"fits/{name}/params"]
            laws[name] = Law(g["mu"][()], g["gamma"][()], g["sigma"][()], g["p"][()], g["a"][()], g["b"][()], fam)
    worst = 0.0
    for i, (name, fam) in enumerate(rows):
        _, var, es, _ = run_risk(cli, f"{files['multi']}:/fits/{name}", work / "risk_w3.h5", alphas,
                                 work / f"risk3_{name}.h5")
        x = laws[name].sample(n, seed=100 + i)
        loss = -(x @ portfolios.T)  # [n, P]
        for j in range(portfolios.shape[0]):
            for k, al in enumerate(alphas):
                c = 1.0 - al
                hit = loss[:, j] >= var[j, k]
                z_rate = (hit.mean() - c) / math.sqrt(c * (1 - c) / n)
                tail = np.where(hit, loss[:, j] - var[j, k], 0.0)
                se = tail.std() / math.sqrt(n) / c
                z_es = (var[j, k] + tail.mean() / c - es[j, k]) / se if se > 0 else 0.0
                worst = max(worst, abs(z_rate), abs(z_es))
                assert abs(z_rate) < 5 and abs(z_es) < 5, (name, j, al, z_rate, z_es)
    print(f"risk vs Monte Carlo: largest |z| {worst:.2f} over {len(rows)} fits")


def test_risk_bad_input(cli, work, files, portfolios):
    single, multi = files["single"], files["multi"]
    out = work / "risk_bad.h5"
    cases = [
        ([files["data"], "risk_w3.h5", "0.99"], "not a ghfit result file"),
        ([f"{single}:/fits/nope", "risk_w3.h5", "0.99"], "no fit named 'nope'"),
        ([multi, "risk_w3.h5", "0.99"], "name one as --model"),
        ([single, "risk_w3.h5:/W2", "0.99"], "weights have 2 columns"),
        ([single, "risk_w3.h5:/Wbad", "0.99"], "non-finite"),
        ([single, "risk_w3.h5", "1"], "--alpha"),
        ([single, "risk_w3.h5", "0.99,0"], "--alpha"),
        ([single, "risk_w3.h5", "-0.5"], "--alpha"),
    ]
    for (model, w, alpha), msg in cases:
        r = cli.run("risk", "--model", model, "--portfolios", work / w, "--alpha", alpha, "--out", out, check=False)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2, (model, w, alpha, r.stderr)
        assert len(lines) == 1 and lines[0].startswith("ghfit: error: ") and msg in lines[0], lines
        assert not out.exists() and not list(work.glob("risk_bad.h5*")), (model, w, alpha)
