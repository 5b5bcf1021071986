"""`ghfit optimize` read back by ghfit.read_optimize, checked against the
fitted law of ghfit.law.Law (its moments, computed in Python: the
minimum-variance portfolio in closed form), and drawn by
ghfit-report --optimize; the job key optimize read through Fit.optimize."""

from __future__ import annotations

import numpy as np
import pytest

import ghfit
from conftest import build, check_self_contained, parse


@pytest.fixture(scope="module")
def opt_files(cli, files, work):
    fit = files["multi"]
    res = ghfit.read(str(fit))
    nig = [f for f in res.fits.values() if f.family == "nig" and not f.symmetric][0]
    out = {}
    spec = f"{fit}:/fits/{nig.name}"
    cli.run("optimize", "--model", spec, "--measure", "es", "--long-only", "--out", work / "o_min.h5")
    cli.run("optimize", "--model", spec, "--measure", "es", "--frontier", 8, "--long-only", "--out", work / "o_fr.h5")
    cli.run("optimize", "--model", spec, "--measure", "sd", "--out", work / "o_sd.h5")
    out.update(min=work / "o_min.h5", fr=work / "o_fr.h5", sd=work / "o_sd.h5", fit=nig)
    return out


def test_read_optimize(opt_files):
    o = ghfit.read_optimize(str(opt_files["min"]))
    assert o.measure == "es" and o.type == "min-risk" and len(o) == 1 and o.alpha == 0.975
    w = o.weights[0]
    assert abs(w.sum() - 1) < 1e-12 and (w >= 0).all() and o.converged[0] == 1
    assert np.all(o.lower == 0) and np.all(np.isinf(o.upper))
    fr = ghfit.read_optimize(str(opt_files["fr"]))
    assert len(fr) == 8 and np.all(np.diff(fr.expected_return) > 0)
    assert abs(fr.es[0] - o.es[0]) <= 1e-9 * abs(o.es[0])
    with pytest.raises(ghfit.ResultError, match="not a ghfit optimize file"):
        ghfit.read_optimize(str(opt_files["fit"].file))


def test_sd_against_the_law(opt_files):
    """The minimum-sd long-short portfolio: Sigma_X = Cov X of the fitted law
    (ghfit.law.Law's moments), w = Sigma_X^-1 1 / 1'Sigma_X^-1 1."""
    o = ghfit.read_optimize(str(opt_files["sd"]))
    _, cov = opt_files["fit"].law.moments()
    x = np.linalg.solve(cov, np.ones(len(cov)))
    assert np.allclose(o.weights[0], x / x.sum(), rtol=0, atol=1e-8)
    assert abs(o.sd[0] - np.sqrt(1 / x.sum())) < 1e-10 * o.sd[0]


def test_report_frontier(opt_files, files, work):
    out = build(work, "optimize", [files["single"]], "--optimize", opt_files["fr"], "--optimize", opt_files["min"])
    text, t = parse(out)
    check_self_contained(text, t)
    assert "Portfolio optimisation" in text and "Efficient frontier and weights" in text
    assert t.rows.get("optimize") == 2


def test_job_key_and_backtest_report(cli, files, work):
    """The job key optimize read through Fit.optimize and /backtest/<chain>/optimize, drawn by the report."""
    (work / "optjob.yaml").write_text(
        "data: d.h5\nout: optjob.h5\nfamily: nig\nwindows: {length: 600, step: 600, count: 3}\nquiet: true\n"
        "optimize: {measure: es, alpha: 0.975, type: min-risk, long_only: true}\n")
    cli.run("run", "optjob.yaml")
    r = ghfit.read(str(work / "optjob.h5"))
    for f in r.fits.values():
        o = f.optimize
        assert o is not None and o.attrs["measure"] == "es" and o.get("converged") == 1
        w = np.asarray(o.get("weights"))
        assert w.shape == (3,) and abs(w.sum() - 1) < 1e-12 and (w >= 0).all()
    bt = r.groups["backtest"].groups
    (chain, g), = bt.items()
    og = g.groups["optimize"]
    assert og.attrs["n"] == 1200 and np.asarray(og.get("returns")).shape == (1200, 3)
    out = build(work, "optjob", [work / "optjob.h5"])
    text, t = parse(out)
    check_self_contained(text, t)
    assert "Optimize backtest: " + chain in text
