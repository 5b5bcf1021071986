"""Reading result files: every group and attribute the writer produces, the
optional groups of newer writers, and files that are not results."""

from __future__ import annotations

import math
import sys

import h5py
import numpy as np
import pytest

import ghfit
from ghfit.results import LazyDataset

RESULTS = ("single", "dropped", "multi", "pfix", "sweep")


def test_installed_package_is_tested():
    # the suite must exercise what `pip install ./python` installed
    assert ghfit.__file__.startswith(sys.prefix), (ghfit.__file__, sys.prefix)


def _walk(h5group, prefix=""):
    """(relative path, h5py object) of every member, recursively."""
    out = []
    for k, v in h5group.items():
        out.append((prefix + k, v))
        if isinstance(v, h5py.Group):
            out.extend(_walk(v, prefix + k + "/"))
    return out


def _get(fit, path):
    head, _, rest = path.partition("/")
    if not rest:
        return fit.datasets.get(head) if head in fit.datasets else fit.groups.get(head)
    g = fit.groups[head]
    parts = rest.split("/")
    for p in parts[:-1]:
        g = g.groups[p]
    return g.datasets.get(parts[-1]) if parts[-1] in g.datasets else g.groups.get(parts[-1])


def _same(a, b):
    if isinstance(b, bytes):
        b = b.decode()
    if isinstance(a, LazyDataset):
        a = a.read()
    if isinstance(a, str) or isinstance(b, str):
        return str(a) == str(b)
    if isinstance(a, list):
        return [str(x) for x in a] == [x.decode() if isinstance(x, bytes) else str(x) for x in np.ravel(b)]
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.names:
        return a.tobytes() == b.tobytes()
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("which", RESULTS)
def test_every_written_object_is_read(files, which):
    path = str(files[which])
    res = ghfit.read(path)
    with h5py.File(path, "r") as f:
        for k in f.attrs:
            want = f.attrs[k]
            got = res.attrs[k]
            assert _same(got, want), (k, got, want)
        for key in ("ghfit_version", "git_commit", "created", "command_line", "n_ranks", "backend"):
            assert key in res.attrs
        if "config" in f:
            assert res.config == f["config"].asstr()[()]
            assert isinstance(res.config_dict, dict)
        names = list(f["fits"].keys())
        assert sorted(res.fits) == sorted(names)
        # summary rows: every field, in the writer's order
        rows = f["summary"][()]
        assert [r["name"] for r in res.summary] == [r["name"].decode() for r in rows]
        assert list(res.fits) == [r["name"].decode() for r in rows]
        for r, s in zip(rows, res.summary):
            for field in rows.dtype.names:
                v = r[field]
                assert _same(s[field], v.decode() if isinstance(v, bytes) else v), field
        for name in names:
            g = f["fits"][name]
            fit = res.fits[name]
            assert fit.attrs.keys() >= set(g.attrs.keys())
            for k in g.attrs:
                assert _same(fit.attrs[k], g.attrs[k]), (name, k)
            for rel, obj in _walk(g):
                got = _get(fit, rel)
                assert got is not None, (name, rel)
                if isinstance(obj, h5py.Dataset):
                    want = obj.asstr()[()] if h5py.check_string_dtype(obj.dtype) else obj[()]
                    assert _same(got, want), (name, rel)
                else:
                    for k in obj.attrs:
                        assert _same(got.attrs[k], obj.attrs[k]), (name, rel, k)
            # the named views
            assert np.array_equal(fit.trace, g["loglik"][()])
            for k in ("mu", "gamma", "sigma", "p", "a", "b"):
                assert _same(fit.params[k], g["params"][k][()])
            for k in ("mean", "cov"):
                assert _same(fit.moments[k], g["moments"][k][()])
            pr = fit.profile
            assert pr.phase_names == list(g["profile/phase_names"].asstr()[()])
            assert pr.seconds.shape == g["profile/seconds"].shape
            for k in ("min", "mean", "max"):
                assert np.array_equal(getattr(pr, k), g["profile"][k][()])
            assert fit.family == g.attrs["family"] and fit.dim == g.attrs["dim"]
            assert fit.n_obs == g.attrs["n_obs"] and fit.status == g.attrs["status"]
            assert fit.loglik == g.attrs["loglik"] and fit.n_iter == g.attrs["n_iter"]
            for key in ("se", "risk", "eval", "gof"):
                assert (getattr(fit, key) is None) == (key not in g), (name, key)


@pytest.mark.parametrize("which", RESULTS)
def test_moments_match_the_law(files, which):
    """moments/ written by the C side = E[X], Cov[X] of the Python law."""
    for fit in ghfit.read(str(files[which])).fits.values():
        mean, cov = fit.law.moments()
        fm, fc = np.asarray(fit.moments["mean"]), np.asarray(fit.moments["cov"])
        # NaN where a moment is infinite (t with nu <= 2): NaN on both sides
        for mine, theirs in ((mean, fm), (cov, fc)):
            scale = np.nanmax(np.abs(theirs)) if np.any(np.isfinite(theirs)) else 0.0
            assert np.allclose(mine, theirs, rtol=1e-9, atol=1e-12 * scale, equal_nan=True), fit.name


def test_row_windows(files):
    single = ghfit.read(str(files["single"])).fits["gh"]
    assert single.rows == (100, 2000) and single.data_file == "d.h5"
    sweep = ghfit.read(str(files["sweep"]))
    wins = sorted({f.window for f in sweep.fits.values()})
    assert wins == list(range(4))
    for f in sweep.fits.values():
        # data.rows.start 200 + windows.start 100 + w * step 400
        assert f.rows == (300 + 400 * f.window, 400), f.name
        assert f.chain in ("gh_pfree_tol1e-08_s1", "nig_tol1e-08_s1")
    multi = ghfit.read(str(files["multi"]))
    assert all(f.rows == (0, None) and f.window is None for f in multi.fits.values())
    pfix = ghfit.read(str(files["pfix"]))
    (f,) = pfix.fits.values()
    assert f.p_fixed == -1.5 and f.params["p"] == -1.5


def test_dropped_rows(files):
    f = ghfit.read(str(files["dropped"])).fits["nig"]
    assert f.n_dropped == 7 and f.n_obs == 3000 - 7


def test_optional_groups(extended):
    res = ghfit.read(str(extended))
    fit = res.fits["gh"]
    d = fit.dim
    assert fit.attrs["device"] == "cpu" and fit.attrs["brand_new_attribute"] == "x"
    assert fit.symmetric is False and not fit.weighted
    assert fit.loglik_unweighted == fit.loglik
    assert set(fit.se) == {"mu", "gamma", "sigma", "p", "a", "b"}
    assert np.allclose(fit.se["sigma"], 0.02) and fit.se["p"] == 0.1
    k = fit.param_cov.shape[0]
    assert fit.param_cov.shape == (k, k) and fit.param_names == [f"theta{i}" for i in range(k)]
    assert fit.eval.attrs["loglik"] == -300.0 and fit.eval.datasets["logpdf"].shape == (100,)
    assert fit.risk.datasets["var"].shape == (2, 2)
    assert fit.gof.groups["margins"].datasets["qq"].shape == (d, 50, 2)
    assert fit.gof.get("margins/ks").shape == (d,)
    assert np.array_equal(fit.groups["future_group"].datasets["thing"], np.arange(5.0))
    bad = res.fits["gh_failed"]
    assert bad.failed and math.isnan(bad.loglik) and not bad.has_law()
    assert fit.has_law()


def test_large_datasets_are_lazy(work, files):
    import shutil

    p = work / "lazy.h5"
    shutil.copy(files["single"], p)
    n = ghfit.results.EAGER_MAX + 10
    with h5py.File(p, "r+") as f:
        f["fits/gh"].create_group("eval")["logpdf"] = np.arange(n, dtype=float)
    ev = ghfit.read(str(p)).fits["gh"].eval.datasets["logpdf"]
    assert isinstance(ev, LazyDataset) and ev.shape == (n,)
    assert ev.read()[-1] == n - 1 and ev.read(slice(2, 4)).tolist() == [2.0, 3.0]


def test_not_a_result(work, files):
    txt = work / "notes.txt"
    txt.write_text("hello\n")
    for path, msg in ((txt, "not an HDF5 file"), (files["data"], "not a ghfit result file"),
                      (work / "missing.h5", "no such file"), (work, "is a directory")):
        with pytest.raises(ghfit.ResultError, match=msg) as e:
            ghfit.read(str(path))
        assert "\n" not in str(e.value)
