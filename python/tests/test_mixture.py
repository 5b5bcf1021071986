"""Mixture fits (docs/output-schema.md "Mixtures"): the reader (proportions,
components, ICL, starts), the mixture's log-density against `ghfit eval`
and against its components evaluated on their own, responsibilities and
clusters, sampling and moments, no LR tests between mixtures, and the
report (BIC and ICL against K, the components, the clusters; --scores)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from scipy.special import logsumexp

import ghfit
from conftest import check_self_contained, parse, run_report


def test_read_mixture(mixture_files, files):
    r = ghfit.read(str(mixture_files["mix"]))
    f = r.fits["gh"]
    assert f.is_mixture and f.n_components == 3
    np.testing.assert_allclose(f.proportions, [0.5, 0.3, 0.2])
    assert abs(f.proportions.sum() - 1) < 1e-15
    comps = f.components
    assert len(comps) == 3 and all(c.dim == 3 and c.family == "gh" for c in comps)
    with h5py.File(mixture_files["mix"], "r") as h:
        np.testing.assert_array_equal(comps[1].sigma, h["fits/gh/components/1/params/sigma"][()])
        assert f.icl == h["fits/gh"].attrs["icl"]
    assert set(f.starts) == {"loglik", "n_iter", "converged"}
    law = f.law
    assert isinstance(law, ghfit.MixtureLaw) and f.has_law()
    # the mixture's moments: the file's (its components' combined)
    m, c = law.moments()
    np.testing.assert_allclose(m, f.moments["mean"], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(c, f.moments["cov"], rtol=1e-9, atol=1e-12)
    # a single fit reads as before: K = 1, ICL = BIC
    s = ghfit.read(str(files["single"])).fits["gh"]
    assert not s.is_mixture and s.n_components == 1 and s.icl == s.bic and isinstance(s.law, ghfit.Law)


def test_mixture_logpdf_against_eval(mixture_files, data):
    law = ghfit.read(str(mixture_files["mix"])).fits["gh"].law
    with h5py.File(mixture_files["scores"], "r") as h:
        lp, tau, cl = h["logpdf"][()], h["responsibility"][()], h["cluster"][()]
        assert h.attrs["n_components"] == 3
    # ghfit eval (C, the backend's E-step pass per component) and SciPy agree
    np.testing.assert_allclose(law.logpdf(data), lp, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(law.responsibility(data), tau, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(law.cluster(data), cl)
    # log-sum-exp of the components, each read as a single-law file
    comp = [ghfit.read(str(p)).fits["gh"].law.logpdf(data) for p in mixture_files["comps"]]
    ref = logsumexp(np.stack(comp, 1) + np.log([0.5, 0.3, 0.2]), axis=1)
    np.testing.assert_allclose(law.logpdf(data), ref, rtol=1e-13, atol=1e-13)
    assert np.isscalar(law.logpdf(data[0])) or np.ndim(law.logpdf(data[0])) == 0


def test_mixture_sample(mixture_files):
    law = ghfit.read(str(mixture_files["mix"])).fits["gh"].law
    n = 40000
    x, k = law.sample(n, seed=3, return_component=True)
    assert x.shape == (n, 3) and k.shape == (n,)
    freq = np.bincount(k, minlength=3) / n
    assert np.all(np.abs(freq - law.prop) < 4 * np.sqrt(law.prop * (1 - law.prop) / n))
    m, c = law.moments()
    z = (x.mean(0) - m) / np.sqrt(np.diag(c) / n)
    assert np.all(np.abs(z) < 4.5), z
    np.testing.assert_array_equal(law.sample(10, seed=3), law.sample(10, seed=3))


def test_no_lr_tests_between_mixtures(mixture_files):
    fits = list(ghfit.read(str(mixture_files["mixsweep"])).fits.values())
    assert [f.n_components for f in fits] == [1, 2, 3]
    assert ghfit.lr_tests(fits) == []


def test_mixture_report(mixture_report, work, files, mixture_files, cli):
    out, inputs = mixture_report
    text, t = parse(out)
    check_self_contained(text, t)
    assert t.rows["summary"] == 4 and "ICL" in text
    assert t.rows["selection-1"] == 3  # gh_k1, gh_k2, gh_k3 of the sweep over K
    assert "BIC and ICL against K" in text and "named gh_k&lt;K&gt;" in text
    assert "components/&lt;k&gt;/params" in text
    # the component tables of the three mixtures, the clusters of the data from --scores
    mix_tables = [k for k in t.rows if k.startswith("mix-")]
    assert len(mix_tables) == 3 and all(t.rows[k] in (2, 3) for k in mix_tables)
    assert "clusters from" in text and "mix_scores.h5" in text
    # --scores without /cluster (a single law's eval), and without --data: one line, exit 2
    cli_scores = work / "single_scores.h5"
    cli.run("eval", "--model", files["single"], "--data", files["data"], "--out", cli_scores, "--quiet")
    for extra, msg in ((["--data", files["data"], "--scores", cli_scores], "no /cluster"),
                       (["--scores", mixture_files["scores"]], "--scores: needs --data")):
        r = run_report(mixture_files["mix"], *extra, "--out", work / "bad-mix.html")
        assert r.returncode == 2 and msg in r.stderr and r.stderr.count("\n") == 1, r.stderr
        assert not (work / "bad-mix.html").exists()



def test_hostile_mixture_files(files, work):
    """Proportions not summing to 1, components/ not holding K, a component
    of the wrong dimension, a Sigma not positive definite: the file reads,
    the fit has no law (has_law False), and asking for it raises ValueError."""
    import subprocess
    import sys

    from conftest import REPO

    subprocess.run([sys.executable, str(REPO / "tests" / "make_mixture_fit.py"), str(files["single"]),
                    str(work / "hostile_ok.h5"), "--bad", str(work / "hostile_")], check=True, timeout=300)
    for case in ("sum", "count", "dim", "pd"):
        f = ghfit.read(str(work / f"hostile_{case}.h5")).fits["gh"]
        assert f.is_mixture and not f.has_law(), case
        with pytest.raises(ValueError):
            f.law.check()
