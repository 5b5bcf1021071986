"""ghfit-report: reports for a single fit, a multi-family job and a sweep
(self-contained, every image a decodable PNG, the expected tables), the
optional groups, and bad input (one line, non-zero exit, no partial HTML)."""

from __future__ import annotations

import os

import pytest

import ghfit
from conftest import build, check_self_contained, expected_rows, parse, run_report


@pytest.mark.parametrize("which", ("single", "multi", "sweep"))
def test_report_contents(reports, which):
    out, inputs = reports[which]
    text, t = parse(out)
    check_self_contained(text, t)
    fits, tests = expected_rows(inputs)
    assert t.rows["summary"] == len(fits)
    if tests:
        assert t.rows["lrt"] == len(tests)
    else:
        assert "lrt" not in t.rows
    for i, f in enumerate(fits):
        if f'id="fit-{i}"' in text:
            assert t.rows[f"vec-{i}"] == f.dim and t.rows[f"sigma-{i}"] == f.dim
            if f.family != "gauss":
                assert t.rows[f"gig-{i}"] == 4
    d = fits[0].dim
    n_sections = text.count('<section id="fit-')
    assert n_sections == len(fits)  # fewer than --max-fits: every fit has a section
    # per section with data: d margin figures, one contour, one trace, one profile
    per_fit = d + 3
    sweep_figs = 0
    if which == "sweep":
        sweep_figs = 1 + 2  # window statistics, one parameter-path figure per chain
        assert "Parameter paths" in text or "parameter paths" in text
    # a closed-form fit (gauss) has a one-value trace and no trace figure
    no_trace = sum(1 for f in fits if f.trace.size < 2)
    assert len(t.imgs) == n_sections * per_fit - no_trace + sweep_figs
    for word in ("EM trace", "QQ plot", "margins", "Profile"):
        assert word in text


def test_report_options_and_many_fits(files, work):
    # no --data: no QQ plots, still a contour of the fitted law
    out = build(work, "nodata", [files["sweep"]], "--max-fits", "3")
    text, t = parse(out)
    check_self_contained(text, t)
    fits, _ = expected_rows([files["sweep"]])
    assert t.rows["summary"] == len(fits)
    assert text.count('<section id="fit-') == 2  # the last window of each chain
    assert "QQ plot" not in text
    out = build(work, "pick", [files["sweep"]], "--fit", "nig_tol1e-08_s1_w000002", "--all-rows",
                "--data", files["data"])
    text, t = parse(out)
    assert text.count('<section id="fit-') == 1 and "nig_tol1e-08_s1_w000002" in text
    # subsampling: windows longer than --max-rows
    out = build(work, "sub", [files["single"]], "--data", files["data"], "--max-rows", "500")
    assert "a subsample of the 2,000-row window" in open(out).read()


def test_report_optional_groups(extended, files, work):
    out = build(work, "extended", [extended], "--data", files["data"])
    text, t = parse(out)
    check_self_contained(text, t)
    assert "SE(mu)" in text and "observed information (test fixture)" in text
    for name in ("eval/", "risk/", "gof/", "future_group/", "brand_new_attribute", "param_cov"):
        assert name in text, name
    assert "failed: constant column 2" in text
    assert t.rows["summary"] == 2


def test_report_risk_backtest(files, work):
    """A sweep whose window fits carry risk/ (VaR, exceedances): the
    backtest figure."""
    import shutil

    import h5py
    import numpy as np

    p = work / "sweep-risk.h5"
    shutil.copy(files["sweep"], p)
    with h5py.File(p, "r+") as f:
        for i, name in enumerate(f["fits"]):
            g = f["fits"][name].create_group("risk")
            g["alpha"] = np.array([0.99, 0.95])
            g["var"] = np.array([[2.5 + 0.1 * i, 1.8]])
            g["exceedances"] = np.array([[i % 3, 20 + i]])
            g.attrs["n_next"] = 400
    out = build(work, "risk", [p], "--max-fits", "1")
    text, t = parse(out)
    check_self_contained(text, t)
    assert text.count("VaR forecasts and exceedances across windows") == 2  # one per chain
    assert "how many rows of the next window had a loss above the forecast VaR" in text


def test_bad_input(files, work):
    txt = work / "not-a-result.txt"
    txt.write_text("not hdf5\n")
    empty = work / "empty-sweep.h5"
    import h5py

    with h5py.File(files["sweep"], "r") as src, h5py.File(empty, "w") as f:
        for k, v in src.attrs.items():
            f.attrs[k] = v
        f.create_group("fits")
        f.create_dataset("summary", shape=(0,), dtype=src["summary"].dtype)
    os.makedirs(work / "adir", exist_ok=True)
    short = work / "short.h5"
    with h5py.File(files["data"], "r") as src, h5py.File(short, "w") as f:
        f["X"] = src["X"][:1000]
    cases = [
        ("not a result (text)", [txt], "not an HDF5 file"),
        ("not a result (data)", [files["data"]], "not a ghfit result file"),
        ("missing", [work / "nope.h5"], "no such file"),
        ("dimension", [files["single"], "--data", files["data4"]], "has 4 columns but the fit"),
        ("rows", [files["single"], "--data", short], "has 1000 rows but the fit /fits/gh"),
        ("empty sweep", [empty], "no fits"),
        ("no dir", [files["single"]], "does not exist"),
        ("a directory", [files["single"]], "is a directory"),
        ("not writable", [files["single"]], "cannot write: Permission denied"),
        ("not a directory", [files["single"]], "is not a directory"),
        ("the input", [files["single"]], "is the input file"),
        ("no data file", [files["single"], "--data", work / "nodata.h5"], "no such file"),
        ("usage", ["--bogus"], "arguments"),
    ]
    outs = {"no dir": work / "no" / "such" / "dir" / "r.html", "a directory": work / "adir",
            "not writable": "/sys/r.html",
            "not a directory": "/proc/version/r.html", "the input": files["single"]}
    for what, args, msg in cases:
        out = outs.get(what, work / "bad.html")
        before = set(os.listdir(work))
        r = run_report(*args, "--out", out)
        lines = r.stderr.splitlines()
        assert r.returncode == 2, (what, r.returncode, r.stderr)
        assert len(lines) == 1 and lines[0].startswith("ghfit-report: error: ") and msg in lines[0], (what, lines)
        assert r.stdout == "", what
        assert not (work / "bad.html").exists(), what
        assert set(os.listdir(work)) == before, (what, set(os.listdir(work)) ^ before)  # no temporary left
    assert os.path.getsize(files["single"]) > 0 and ghfit.read(str(files["single"])).fits
