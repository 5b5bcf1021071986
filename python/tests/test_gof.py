"""`ghfit gof` against an independent computation: the PIT of each margin
(ghfit: the normal mixture integrated over the subordinator, src/law/uni1d.c)
against SciPy's adaptive quadrature (QUADPACK) of the closed-form marginal
density of ghfit.law.Law, for a fit of every family; the statistics against
SciPy's KS and Cramer-von Mises tests on the same PITs."""

from __future__ import annotations

import math

import h5py
import numpy as np
import pytest
from scipy import integrate, stats

from ghfit.law import law_from_params


@pytest.fixture(scope="session")
def gof_fits(cli, work):
    cli.run("generate", "--model", "gh", "--dim", 2, "--n", 1500, "--seed", 21, "--p", -1.5,
            "--gamma", "0.6,-0.4", "--out", work / "gof_x.h5")
    fams = "[" + ", ".join(cli.families) + "]"
    (work / "gof.yaml").write_text(f"name: gof\ndata: gof_x.h5\nout: gof_fits.h5\nfamily: {fams}\nquiet: true\n")
    cli.run("run", "gof.yaml")
    with h5py.File(work / "gof_fits.h5", "r") as f:
        return {r["family"].decode(): r["name"].decode() for r in f["summary"][()]}


def margin_cdf(law, j, x):
    m = law.margin([j])
    s = math.sqrt(m.sigma[0, 0]) * (1.0 + abs(m.gamma[0]))
    mu = m.mu[0]

    def f(t):
        return float(np.exp(m.logpdf(np.array([[t]]))[0]))

    kw = dict(epsabs=1e-15, epsrel=1e-12, limit=2000)
    brk = sorted({x, mu, mu - 10 * s, mu + 10 * s})
    brk = [b for b in brk if b <= x]
    tot = integrate.quad(f, -np.inf, brk[0], **kw)[0]
    for lo, hi in zip(brk[:-1], brk[1:]):
        tot += integrate.quad(f, lo, hi, **kw)[0]
    return tot


@pytest.mark.parametrize("fam", ["gh", "hyp", "nig", "vg", "t", "gauss"])
def test_gof_margin_pit_against_quadrature(cli, work, gof_fits, fam):
    if fam not in gof_fits:
        pytest.skip(f"this ghfit has no family {fam}")
    name = gof_fits[fam]
    out = work / f"gof_{fam}.h5"
    r = cli.run("gof", "--model", f"{work / 'gof_fits.h5'}:/fits/{name}", "--data", work / "gof_x.h5",
                "--out", out, "--qq", 20, check=False)
    assert r.returncode == 0, r.stderr
    with h5py.File(work / "gof_fits.h5", "r") as f:
        g = f[f"fits/{name}/params"]
        law = law_from_params({k: g[k][()] for k in g}, fam)
    with h5py.File(work / "gof_x.h5", "r") as f:
        x = f["X"][()]
    with h5py.File(out, "r") as f:
        pit, ks, cvm = f["margins/pit"][()], f["margins/ks"][()], f["margins/cvm"][()]
        assert f.attrs["family"] == fam and f.attrs["pit_max_error"] == 0
    worst = 0.0
    for j in range(2):
        order = np.argsort(x[:, j])
        for i in order[[0, 7, 150, 750, 1349, 1492, 1499]]:
            ref = margin_cdf(law, j, x[i, j])
            worst = max(worst, abs(pit[i, j] - ref))
        u = pit[:, j]
        assert abs(ks[j] - stats.kstest(u, "uniform").statistic) < 1e-12
        assert abs(cvm[j] - stats.cramervonmises(u, "uniform").statistic) < 1e-10
    print(f"{fam}: largest |PIT - quadrature| {worst:.2e}")
    assert worst < 1e-9, worst
