"""Shared fixtures: real result files made at test time with the ghfit binary.

GHFIT (the binary; default <repo>/build/ghfit) and GHFIT_PY_WORK (a work
folder; default a pytest temporary folder) come from the environment; ctest
sets both (tests/python.cmake).  The fixtures are small (d = 3, 3,000 rows)
so that the whole session makes them in a few seconds."""

from __future__ import annotations

import base64
import io
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import h5py
import matplotlib.image
import numpy as np
import pytest

import ghfit

REPO = Path(__file__).resolve().parents[2]
FAMILIES = ("gh", "hyp", "nig", "vg", "t", "gauss")


def _ghfit_path():
    p = os.environ.get("GHFIT") or str(REPO / "build" / "ghfit")
    if not os.access(p, os.X_OK):
        pytest.fail(f"ghfit binary not found at {p}: build it (scripts/build.sh) or set GHFIT", pytrace=False)
    return p


def report_cmd():
    """The ghfit-report console script of the interpreter running pytest."""
    exe = Path(sys.executable).parent / "ghfit-report"
    if not exe.exists():
        pytest.fail(f"{exe} not found: install the package (pip install ./python[test])", pytrace=False)
    return str(exe)


class Ghfit:
    """Runs the ghfit binary (1 rank, no mpirun: a singleton MPI start)."""

    def __init__(self, path, work):
        self.path, self.work = path, Path(work)
        help_fit = self.run("fit", "--help", check=False).stdout
        m = re.search(r"--model\s+(\S+)", help_fit)
        models = m.group(1).split("|") if m else ["gh", "nig"]
        self.families = [f for f in FAMILIES if f in models]
        self.has_symmetric = "--symmetric" in help_fit
        self.has_eval = self.run("eval", "--help", check=False).returncode == 0

    def run(self, *args, check=True):
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMP_NUM_THREADS="1", HDF5_USE_FILE_LOCKING="FALSE")
        r = subprocess.run([self.path, *map(str, args)], cwd=self.work, env=env, capture_output=True,
                           text=True, timeout=300)
        if check and r.returncode != 0:
            raise AssertionError(f"ghfit {' '.join(map(str, args))} failed ({r.returncode}):\n"
                                 f"{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
        return r


@pytest.fixture(scope="session")
def work(tmp_path_factory):
    w = os.environ.get("GHFIT_PY_WORK")
    if w:
        w = Path(w) / f"pytest-{os.getpid()}"
        shutil.rmtree(w, ignore_errors=True)
        w.mkdir(parents=True)
        return w
    return tmp_path_factory.mktemp("ghfit")


@pytest.fixture(scope="session")
def cli(work):
    """The ghfit binary (named cli so that tests can import the package ghfit)."""
    return Ghfit(_ghfit_path(), work)


@pytest.fixture(scope="session")
def files(cli, work):
    """Paths of the data set and of the result files:

    data      d.h5: GH, d = 3, N = 3,000, seed 5
    data4     d4.h5: d = 4 (another dimension)
    single    ghfit fit --model gh --rows 100:2000
    dropped   ghfit fit --model nig --drop-nonfinite on a copy with 7 NaN rows
    multi     ghfit run: every family the binary has, p free (and the
              symmetric forms where the binary has --symmetric)
    pfix      ghfit run: GH with p fixed at -1.5 on the same data
    sweep     ghfit run: GH and NIG on 4 windows of 400 rows, warm starts
    """
    g = cli
    out = {"data": work / "d.h5", "data4": work / "d4.h5"}
    g.run("generate", "--model", "gh", "--dim", 3, "--n", 3000, "--seed", 5, "--p", -1.5, "--a", 2, "--b", 1,
          "--out", out["data"])
    g.run("generate", "--model", "nig", "--dim", 4, "--n", 500, "--seed", 6, "--out", out["data4"])
    out["single"] = work / "single.h5"
    g.run("fit", "--data", "d.h5", "--model", "gh", "--rows", "100:2000", "--out", out["single"], "--quiet")
    # NaN rows: fitted with --drop-nonfinite
    out["data_nan"] = work / "dnan.h5"
    x = np.array(h5py.File(out["data"], "r")["X"][()])
    x[[3, 50, 51, 700, 1200, 2999, 1500], [0, 1, 2, 0, 1, 2, 0]] = np.nan
    with h5py.File(out["data_nan"], "w") as f:
        f["X"] = x
    out["dropped"] = work / "dropped.h5"
    g.run("fit", "--data", "dnan.h5", "--model", "nig", "--drop-nonfinite", "--out", out["dropped"], "--quiet")
    fams = "[" + ", ".join(g.families) + "]"
    sym = "symmetric: [false, true]\n" if g.has_symmetric else ""
    (work / "multi.yaml").write_text(
        f"name: multi\ndata: d.h5\nout: multi.h5\nfamily: {fams}\n{sym}tol: 1e-9\nquiet: true\n")
    g.run("run", "multi.yaml")
    out["multi"] = work / "multi.h5"
    (work / "pfix.yaml").write_text("name: pfix\ndata: d.h5\nout: pfix.h5\nfamily: gh\np: -1.5\ntol: 1e-9\nquiet: true\n")
    g.run("run", "pfix.yaml")
    out["pfix"] = work / "pfix.h5"
    (work / "sweep.yaml").write_text(
        "name: sweep\ndata:\n  file: d.h5\n  rows: {start: 200, length: 2600}\nout: sweep.h5\n"
        "family: [gh, nig]\ntol: 1e-8\nwindows: {start: 100, length: 400, step: 400, count: 4}\n"
        "warm_start: true\nquiet: true\n")
    g.run("run", "sweep.yaml")
    out["sweep"] = work / "sweep.h5"
    return out


@pytest.fixture(scope="session")
def mixture_files(files, cli, work):
    """Mixture result files (docs/output-schema.md "Mixtures") made by the
    repository's tests/make_mixture_fit.py from the single fit (the mixture
    EM's writer is not needed): mix (3 gh components, d = 3) with each
    component as a single-law file comp<k>.h5, mixsweep (the fit names of a
    sweep over K: gh_k1 single, gh_k2, gh_k3), and scores: ghfit eval of
    mix on d.h5 (/responsibility, /cluster)."""
    gen = REPO / "tests" / "make_mixture_fit.py"
    out = {"mix": work / "mix.h5", "mixsweep": work / "mixsweep.h5", "scores": work / "mix_scores.h5"}
    subprocess.run([sys.executable, str(gen), str(files["single"]), str(out["mix"]), "--singles",
                    str(work / "comp")], check=True, timeout=300)
    subprocess.run([sys.executable, str(gen), str(files["single"]), str(out["mixsweep"]), "--sweep", "--k", "3"],
                   check=True, timeout=300)
    cli.run("eval", "--model", out["mix"], "--data", files["data"], "--out", out["scores"], "--quiet")
    out["comps"] = [work / f"comp{k}.h5" for k in range(3)]
    return out


@pytest.fixture(scope="session")
def data(files):
    with h5py.File(files["data"], "r") as f:
        return np.array(f["X"][()])


def fitted_rows(fit, x):
    """The rows a fit was made on (its recorded window), non-finite rows left out."""
    if fit.rows is not None:
        s, c = fit.rows
        x = x[s:s + c] if c is not None else x[s:]
    return x[np.all(np.isfinite(x), axis=1)]


@pytest.fixture(scope="session")
def extended(files, work):
    """A copy of the single-fit file with what newer writers add: se/,
    param_cov with row names, eval/, risk/, gof/, an unknown group, new
    attributes, and a second, failed fit with NaN parameters."""
    p = work / "extended.h5"
    shutil.copy(files["single"], p)
    with h5py.File(p, "r+") as f:
        g = f["fits/gh"]
        d = int(g.attrs["dim"])
        g.attrs["symmetric"] = 0
        g.attrs["loglik_unweighted"] = g.attrs["loglik"]
        g.attrs["device"] = "cpu"
        g.attrs["brand_new_attribute"] = "x"
        se = g.create_group("se")
        for k in ("mu", "gamma"):
            se[k] = np.full(d, 0.01)
        se["sigma"] = np.full((d, d), 0.02)
        for k in ("p", "a", "b"):
            se[k] = 0.1
        se.attrs["reason"] = "observed information (test fixture)"
        k = 2 * d + d * (d + 1) // 2 + 3
        g["param_cov"] = np.eye(k) * 1e-4
        g["param_cov"].attrs["names"] = [f"theta{i}" for i in range(k)]
        ev = g.create_group("eval")
        ev["logpdf"] = np.linspace(-5, -1, 100)
        ev.attrs["loglik"] = -300.0
        rk = g.create_group("risk")
        rk["alpha"] = np.array([0.99, 0.975])
        rk["var"] = np.array([[2.5, 2.0], [3.0, 2.4]])
        rk["es"] = np.array([[3.1, 2.6], [3.5, 2.9]])
        gf = g.create_group("gof")
        mg = gf.create_group("margins")
        mg["ks"] = np.full(d, 0.01)
        mg["ad"] = np.full(d, 0.5)
        mg["cvm"] = np.full(d, 0.05)
        mg["qq"] = np.zeros((d, 50, 2))
        g.create_group("future_group")["thing"] = np.arange(5.0)
        f.copy(g, "fits/gh_failed", shallow=False)
        h = f["fits/gh_failed"]
        h.attrs["status"] = "failed: constant column 2 in this window"
        h.attrs["loglik"] = np.nan
        h.attrs["converged"] = 0
        for k in ("mu", "gamma", "sigma", "p", "a", "b"):
            ds = h["params"][k]
            ds[...] = np.full(ds.shape, np.nan)
        rows = f["summary"][()]
        new = np.concatenate([rows, rows[:1]])
        new[-1]["name"] = b"gh_failed"
        new[-1]["loglik"] = np.nan
        del f["summary"]
        f.create_dataset("summary", data=new)
    return p


# ------------------------------------------------------------ reports
def run_report(*args, cwd=None):
    return subprocess.run([report_cmd(), *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


class Tables(HTMLParser):
    """Row counts of every table body by id, and every <img> src."""

    def __init__(self):
        super().__init__()
        self.rows, self.imgs, self.stack, self.tags = {}, [], [], set()
        self.in_body = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.add(tag)
        if tag == "table":
            self.stack.append(a.get("id"))
            self.rows[a.get("id")] = 0
        elif tag == "tbody":
            self.in_body = True
        elif tag == "tr" and self.in_body and self.stack:
            self.rows[self.stack[-1]] += 1
        elif tag == "img":
            self.imgs.append(a.get("src", ""))

    def handle_endtag(self, tag):
        if tag == "table" and self.stack:
            self.stack.pop()
        elif tag == "tbody":
            self.in_body = False


def parse(path):
    text = open(path, encoding="utf-8").read()
    t = Tables()
    t.feed(text)
    return text, t


def check_self_contained(text, t):
    assert not re.search(r"(?i)\b(https?|ftp|wss?):", text), "a network URL in the report"
    assert "<script" not in text and "<link" not in text and "@import" not in text and "url(" not in text
    assert t.imgs, "no images"
    for src in t.imgs:
        assert src.startswith("data:image/png;base64,"), src[:60]
        img = matplotlib.image.imread(io.BytesIO(base64.b64decode(src.split(",", 1)[1])), format="png")
        assert img.ndim == 3 and img.shape[0] > 50 and img.shape[1] > 50
    # every figure has a caption
    assert text.count("<figure>") == len(t.imgs) == text.count("<figcaption>")


def expected_rows(paths):
    res = [ghfit.read(str(p)) for p in paths]
    fits = [f for r in res for f in r.fits.values()]
    return fits, ghfit.lr_tests(fits)


def build(work, name, paths, *extra):
    """ghfit-report run in the work folder with file names relative to it
    (as a user would type them; the report shows them so)."""
    def rel(p):
        p = Path(p)
        return str(p.relative_to(work)) if p.is_absolute() and p.is_relative_to(work) else str(p)
    out = f"{name}.html"
    r = run_report(*map(rel, paths), *map(rel, extra), "--out", out, cwd=work)
    assert r.returncode == 0, r.stderr
    assert r.stderr == "" and r.stdout.strip() == f"wrote {out}"
    return work / out


@pytest.fixture(scope="session")
def reports(files, work):
    """The three reports of the acceptance list (also opened by the browser test)."""
    d = files["data"]
    return {
        "single": (build(work, "report-single", [files["single"]], "--data", d), [files["single"]]),
        "multi": (build(work, "report-multi", [files["multi"], files["pfix"]], "--data", d, "--max-fits", "32"),
                  [files["multi"], files["pfix"]]),
        "sweep": (build(work, "report-sweep", [files["sweep"]], "--data", d), [files["sweep"]]),
    }


@pytest.fixture(scope="session")
def mixture_report(mixture_files, files, work):
    """A report of a sweep over K and of a mixture with its eval scores."""
    m = mixture_files
    inputs = [m["mixsweep"], m["mix"]]
    return build(work, "report-mixture", inputs, "--data", files["data"], "--scores", m["scores"]), inputs
