"""Likelihood-ratio tests: which pairs are nested, degrees of freedom,
reference laws (boundary mixture for VG and t), and what is left out."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import ghfit
from ghfit.lrt import MIXTURE
from ghfit.results import Fit

D = 3


def mk(name, family, loglik, symmetric=False, p_fixed=None, data="d.h5", rows=(0, None), n=1000,
       status="converged", weighted=False):
    attrs = {"family": family, "loglik": loglik, "n_obs": n, "dim": D, "n_dropped": 0, "status": status,
             "symmetric": int(symmetric)}
    if p_fixed is not None:
        attrs["p_fixed"] = p_fixed
    if weighted:
        attrs["loglik_unweighted"] = loglik - 1.0
    f = Fit(name, "r.h5", attrs, {"mu": np.zeros(D), "gamma": np.zeros(D) if symmetric else np.ones(D)})
    f.data_file, f.data_dataset = data, "/X"
    f.row_start, f.row_count = rows
    return f


def pairs(tests):
    return {(t.restricted.name, t.full.name): t for t in tests}


def test_nested_pairs_and_references():
    fits = [mk("gh", "gh", -1000.0), mk("gh_sym", "gh", -1004.0, symmetric=True),
            mk("nig", "nig", -1001.0), mk("hyp", "hyp", -1003.0), mk("gh_p1", "gh", -1002.0, p_fixed=1.0),
            mk("vg", "vg", -1000.5), mk("t", "t", -1000.0), mk("t_sym", "t", -1010.0, symmetric=True),
            mk("gauss", "gauss", -1100.0)]
    t = pairs(ghfit.lr_tests(fits))
    assert set(t) == {("gh_sym", "gh"), ("nig", "gh"), ("hyp", "gh"), ("gh_p1", "gh"), ("vg", "gh"),
                      ("t", "gh"), ("t_sym", "t"), ("t_sym", "gh_sym")}
    x = t[("gh_sym", "gh")]
    assert x.df == D and x.statistic == 8.0 and x.p_value == pytest.approx(stats.chi2.sf(8.0, D))
    x = t[("nig", "gh")]
    assert x.df == 1 and x.reference == "chi2(1)" and x.p_value == pytest.approx(stats.chi2.sf(2.0, 1))
    x = t[("vg", "gh")]
    assert x.reference == MIXTURE and x.p_value == pytest.approx(0.5 * stats.chi2.sf(1.0, 1))
    x = t[("t", "gh")]  # LR = 0 on the boundary: p = 1 (half the mass at 0)
    assert x.statistic == 0.0 and x.p_value == 1.0
    assert not any("gauss" in k for pair in t for k in pair)


def test_groups_by_data_and_skips():
    fits = [mk("gh", "gh", -1000.0), mk("nig_other_rows", "nig", -900.0, rows=(0, 500)),
            mk("nig_other_file", "nig", -1001.0, data="e.h5"), mk("nig_other_n", "nig", -1001.0, n=999),
            mk("nig_failed", "nig", -1001.0, status="failed: constant column"),
            mk("nig_weighted", "nig", -1001.0, weighted=True)]
    assert ghfit.lr_tests(fits) == []


def test_best_fit_of_each_model_and_negative_lr():
    fits = [mk("gh_s1", "gh", -1000.0), mk("gh_s2", "gh", -999.0), mk("nig", "nig", -998.0)]
    (x,) = ghfit.lr_tests(fits)
    assert x.full.name == "gh_s2" and x.statistic == pytest.approx(-2.0)
    assert x.p_value == 1.0 and "below" in x.note


def test_real_files(files, cli):
    """GH with p fixed at -1.5 (another file, same data) and NIG against GH."""
    cli.run("fit", "--data", "d.h5", "--model", "gh", "--p-fixed", "-1.5", "--out", "pfix-cli.h5", "--quiet")
    (pcli,) = ghfit.read(str(cli.work / "pfix-cli.h5")).fits.values()
    assert pcli.name == "gh" and pcli.p_fixed == -1.5  # from the command line
    res = [ghfit.read(str(files["multi"])), ghfit.read(str(files["pfix"]))]
    fits = [f for r in res for f in r.fits.values()]
    t = pairs(ghfit.lr_tests(fits))
    gh = next(f for f in fits if f.family == "gh" and f.p_fixed is None and not f.symmetric)
    pf = next(f for f in fits if f.p_fixed == -1.5)
    x = t[(pf.name, gh.name)]
    assert x.df == 1 and x.statistic == pytest.approx(2 * (gh.loglik - pf.loglik))
    assert math.isfinite(x.p_value) and 0 <= x.p_value <= 1
    nig = next(f for f in fits if f.family == "nig" and not f.symmetric)
    assert (nig.name, gh.name) in t
    # the sweep pairs GH and NIG window by window, never across windows
    sw = ghfit.lr_tests(ghfit.read(str(files["sweep"])).fits.values())
    assert len(sw) == 4 and all(x.restricted.window == x.full.window for x in sw)
