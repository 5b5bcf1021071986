"""Read ghfit result files (docs/output-schema.md) into plain Python objects.

Reading is generic: every group under /fits/<name> is read, the known ones
(params, moments, profile, se, ...) into named fields, and any other group or
dataset into `Fit.groups` / `Fit.datasets`, so that files written by newer
versions of ghfit (more groups, more attributes) read without changes.
Datasets with more than `EAGER_MAX` elements (per-row eval output, for
example) are not loaded: they are `LazyDataset`s that read on demand.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from dataclasses import dataclass, field

import h5py
import numpy as np

from .law import Law, MixtureLaw, params_sigma

EAGER_MAX = 1 << 16



class ResultError(Exception):
    """A file that is not a readable ghfit result file (message: one line)."""


@dataclass
class LazyDataset:
    """A large dataset, read when asked for."""

    file: str
    path: str
    shape: tuple
    dtype: str
    attrs: dict

    def read(self, sel=()):
        with h5py.File(self.file, "r") as f:
            return f[self.path][sel]


@dataclass
class Group:
    """A generic HDF5 group: attributes, datasets (arrays, strings or
    LazyDataset) and subgroups."""

    attrs: dict = field(default_factory=dict)
    datasets: dict = field(default_factory=dict)
    groups: dict = field(default_factory=dict)

    def get(self, name, default=None):
        """A dataset or, with a '/' in the name, a nested dataset."""
        head, _, rest = name.partition("/")
        if rest:
            g = self.groups.get(head)
            return g.get(rest, default) if g is not None else default
        return self.datasets.get(name, default)


@dataclass
class Profile:
    phase_names: list
    seconds: np.ndarray  # [ranks][phases]
    min: np.ndarray
    mean: np.ndarray
    max: np.ndarray


class Fit:
    """One /fits/<name> group.

    The attributes and params/ are read with the file; everything else (the
    trace, moments/, profile/, se/, eval/, risk/, gof/, any other group or
    dataset) is read from the file on first use, so that a sweep of
    thousands of fits reads quickly."""

    def __init__(self, name, file, attrs, params, children=()):
        self.name, self.file, self.attrs, self.params = name, file, attrs, params
        self.children = tuple(children)  # names of the group's members
        # where the fitted rows came from (filled by read() from /config or
        # the command line): data file, dataset, first row, row count (None: all)
        self.data_file = self.data_dataset = None
        self.row_start = self.row_count = None
        self.cli_p_fixed = None  # --p-fixed of a `ghfit fit` command line
        m = re.match(r"^(.*)_w(\d+)$", name)
        self.window = int(m.group(2)) if m else None  # window index of a sweep fit
        self.chain = m.group(1) if m else None  # the name without the window suffix
        self._full = None

    def __repr__(self):
        return f"Fit({self.name!r}, family={self.family!r}, file={self.file!r})"

    # ------------------------------------------------------ lazily read parts
    def _load(self) -> Group:
        if self._full is None:
            with h5py.File(self.file, "r") as f:
                self._full = _group(f["fits"][self.name], self.file)
        return self._full

    @property
    def groups(self) -> dict:
        """Every group of the fit (known or not) as Group objects."""
        return self._load().groups

    @property
    def datasets(self) -> dict:
        """The datasets directly under /fits/<name> (the trace `loglik`, ...)."""
        return self._load().datasets

    def group(self, name) -> Group | None:
        return self.groups.get(name) if name in self.children else None

    @property
    def trace(self) -> np.ndarray:
        if "loglik" not in self.children:
            return np.zeros(0)
        t = self.datasets.get("loglik")
        t = t.read() if isinstance(t, LazyDataset) else t
        return np.asarray(t, dtype=float).ravel()

    @property
    def moments(self) -> dict:
        g = self.group("moments")
        return dict(g.datasets) if g is not None else {}

    @property
    def profile(self) -> Profile | None:
        return _profile(self.group("profile"))

    @property
    def se(self) -> dict | None:
        g = self.group("se")
        return dict(g.datasets) if g is not None else None

    @property
    def param_cov(self):
        if "param_cov" not in self.children:
            return None
        v = self.datasets.get("param_cov")
        return v.read() if isinstance(v, LazyDataset) else v

    @property
    def param_names(self):
        """Row names of param_cov: a dataset param_cov_names / param_names,
        or an attribute names / row_names of param_cov."""
        for key in ("param_cov_names", "param_names", "param_cov_rows"):
            if key in self.children:
                v = self.datasets[key]
                return [v] if isinstance(v, str) else list(v)
        if "param_cov" in self.children:
            with h5py.File(self.file, "r") as f:
                ds = f["fits"][self.name]["param_cov"]
                for key in ("names", "row_names", "rows"):
                    if key in ds.attrs:
                        v = _value(ds.attrs[key])
                        return [v] if isinstance(v, str) else list(v)
        return None

    @property
    def eval(self) -> Group | None:
        return self.group("eval")

    @property
    def risk(self) -> Group | None:
        return self.group("risk")

    @property
    def gof(self) -> Group | None:
        return self.group("gof")

    @property
    def optimize(self) -> Group | None:
        """The job key optimize's portfolio under this fit (weights, risk, ...)."""
        return self.group("optimize")

    # ------------------------------------------------------------ attributes
    def _a(self, key, default=None):
        return self.attrs.get(key, default)

    @property
    def family(self) -> str:
        return str(self._a("family", "gh"))

    @property
    def dim(self) -> int:
        return int(self._a("dim", np.size(self.params.get("mu", []))))

    @property
    def n_obs(self) -> int:
        return int(self._a("n_obs", -1))

    @property
    def n_dropped(self) -> int:
        return int(self._a("n_dropped", 0))

    @property
    def status(self) -> str:
        return str(self._a("status", ""))

    @property
    def failed(self) -> bool:
        return self.status.startswith("failed")

    @property
    def loglik(self) -> float:
        return float(self._a("loglik", math.nan))

    @property
    def loglik_unweighted(self) -> float:
        """The unweighted log-likelihood (the same as loglik for unweighted fits)."""
        return float(self._a("loglik_unweighted", self.loglik))

    @property
    def weighted(self) -> bool:
        v = self._a("loglik_unweighted")
        return v is not None and not (float(v) == self.loglik)

    @property
    def aic(self) -> float:
        return float(self._a("aic", math.nan))

    @property
    def bic(self) -> float:
        return float(self._a("bic", math.nan))

    @property
    def n_iter(self) -> int:
        return int(self._a("n_iter", -1))

    @property
    def converged(self) -> bool:
        return bool(int(self._a("converged", 0)))

    @property
    def symmetric(self) -> bool:
        """The `symmetric` attribute; without it, gamma identically 0 (never
        for the Gaussian, which has no gamma)."""
        v = self._a("symmetric")
        if v is not None:
            return bool(int(v))
        if self.family == "gauss":
            return False
        g = np.asarray(self.params.get("gamma", [np.nan]))
        return bool(g.size and np.all(g == 0))

    @property
    def p_fixed(self) -> float | None:
        """The fixed GIG index of a GH fit with p held fixed, else None.

        From an attribute `p_fixed` when present, else from `--p-fixed` on a
        `ghfit fit` command line, else from the fit name (`gh_p-0.5_...` as
        ghfit run names them)."""
        v = self._a("p_fixed")
        if v is not None:
            try:
                v = float(v)
            except (TypeError, ValueError):
                return None
            return None if math.isnan(v) else v
        if self.cli_p_fixed is not None:
            return self.cli_p_fixed
        if self.family == "gh":
            m = re.match(r"gh_p([-+0-9.eE]+)(_|$)", self.name)
            if m:
                try:
                    return float(m.group(1))
                except ValueError:
                    return None
        return None

    @property
    def sigma_structure(self) -> str:
        """"full" (also for files written before the factor form), "diag" or "factor"."""
        return str(self._a("sigma_structure", "full"))

    @property
    def factors(self) -> int:
        """The number of factors R of a factor-form fit (0 for diag, -1 for full)."""
        return int(self._a("factors", -1))

    # ----------------------------------------------------------- mixtures
    @property
    def n_components(self) -> int:
        """K of a mixture fit (attribute n_components), 1 for a single law."""
        return int(self._a("n_components", 1) or 1)

    @property
    def is_mixture(self) -> bool:
        return self.n_components >= 2

    @property
    def icl(self) -> float:
        """The ICL of a mixture (attribute icl); a single law's is its BIC (no entropy term)."""
        return float(self._a("icl", math.nan)) if self.is_mixture else self.bic

    @property
    def proportions(self) -> np.ndarray:
        """The mixing proportions [K] (a single law: [1.0])."""
        if not self.is_mixture:
            return np.ones(1)
        return np.asarray(self.datasets.get("proportions", np.full(self.n_components, np.nan)), dtype=float)

    @property
    def components(self) -> list:
        """The K component laws (a single law: [law]), from components/<k>/params."""
        if not self.is_mixture:
            return [self.law]
        g = self.group("components")
        if g is None or len(g.groups) != self.n_components:
            raise ValueError(f"/fits/{self.name}/components: holds {0 if g is None else len(g.groups)} "
                             f"components, but n_components = {self.n_components}")
        out = []
        for k in range(self.n_components):
            c = g.groups.get(str(k))
            if c is None or "params" not in c.groups:
                raise ValueError(f"/fits/{self.name}/components/{k}/params: missing")
            p = c.groups["params"].datasets
            out.append(Law(p["mu"], p.get("gamma", np.zeros(self.dim)), params_sigma(p), p.get("p", math.nan),
                           p.get("a", math.nan), p.get("b", math.nan), self.family))
        return out

    @property
    def starts(self) -> dict:
        """A mixture's starts/ (loglik, n_iter, converged per initialisation), {} when absent."""
        g = self.group("starts")
        return {k: np.asarray(v) for k, v in g.datasets.items()} if g is not None else {}

    @property
    def law(self):
        """The fitted law: a `Law`, or for a mixture fit a `MixtureLaw`."""
        if self.is_mixture:
            return MixtureLaw(self.proportions, self.components)
        p = self.params
        return Law(p["mu"], p.get("gamma", np.zeros(self.dim)), params_sigma(p),
                   p.get("p", math.nan), p.get("a", math.nan), p.get("b", math.nan), self.family)

    def has_law(self) -> bool:
        """Whether the parameters define a law (not for failed fits)."""
        try:
            self.law.check()
            return True
        except (ValueError, KeyError, np.linalg.LinAlgError):
            return False

    @property
    def rows(self):
        """(start, count) of the fitted rows in the data set, or None."""
        if self.row_start is None and self.row_count is None:
            return None
        return (self.row_start or 0, self.row_count)


@dataclass
class Result:
    """One result file."""

    path: str
    attrs: dict
    config: str | None
    config_dict: dict | None
    fits: dict  # name -> Fit, in file order (the order of /summary)
    summary: list  # rows of /summary as dicts
    groups: dict = field(default_factory=dict)  # other root groups

    def __len__(self):
        return len(self.fits)


# ------------------------------------------------------------------ helpers
def _value(x):
    """h5py attribute/dataset values as plain Python objects."""
    if isinstance(x, bytes):
        return x.decode("utf-8", "replace")
    if isinstance(x, np.ndarray):
        if x.dtype.kind in "OS":
            return [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in x.ravel().tolist()]
        return x
    if isinstance(x, np.generic):
        return x.item()
    return x


def _attrs(obj) -> dict:
    out = {}
    for k in obj.attrs:
        try:
            out[k] = _value(obj.attrs[k])
        except (OSError, TypeError, ValueError):  # an attribute type h5py cannot read
            out[k] = None
    return out


def _dataset(ds, fname):
    if ds.dtype.kind in "OS" or h5py.check_string_dtype(ds.dtype) is not None:
        v = ds.asstr()[()] if ds.shape != () or h5py.check_string_dtype(ds.dtype) else ds[()]
        return _value(v) if not isinstance(v, str) else v
    if ds.size > EAGER_MAX:
        return LazyDataset(fname, ds.name, ds.shape, str(ds.dtype), _attrs(ds))
    v = ds[()]
    if ds.dtype.names is None and ds.shape == () and np.issubdtype(ds.dtype, np.number):
        return float(v) if ds.dtype.kind == "f" else int(v)
    return v


def _group(g, fname) -> Group:
    out = Group(attrs=_attrs(g))
    for k, obj in g.items():
        if isinstance(obj, h5py.Group):
            out.groups[k] = _group(obj, fname)
        elif isinstance(obj, h5py.Dataset):
            out.datasets[k] = _dataset(obj, fname)
    return out


def _profile(g: Group | None) -> Profile | None:
    if g is None or "phase_names" not in g.datasets:
        return None
    names = g.datasets["phase_names"]
    names = [names] if isinstance(names, str) else list(names)
    sec = np.asarray(g.datasets.get("seconds", np.zeros((0, len(names)))), dtype=float)
    if sec.ndim != 2:
        sec = sec.reshape(-1, len(names)) if len(names) else np.zeros((0, 0))

    def stat(key, fn):
        v = g.datasets.get(key)
        if v is None:
            return fn(sec, axis=0) if sec.size else np.zeros(len(names))
        return np.asarray(v, dtype=float)

    return Profile(names, sec, stat("min", np.min), stat("mean", np.mean), stat("max", np.max))


def _read_fit(name, g, fname) -> Fit:
    params = {}
    if "params" in g and isinstance(g["params"], h5py.Group):
        for k, obj in g["params"].items():
            if isinstance(obj, h5py.Dataset):
                params[k] = _dataset(obj, fname)
    return Fit(name, fname, _attrs(g), params, list(g.keys()))


def _parse_config(text):
    if not text:
        return None
    try:
        import yaml

        d = yaml.safe_load(text)
        return d if isinstance(d, dict) else None
    except Exception:  # a config we cannot parse only loses the row windows
        return None


def _rows_from_command_line(cmd: str):
    """(data file, dataset, start, count, fixed p) from a `ghfit fit`
    command line."""
    try:
        argv = shlex.split(cmd)
    except ValueError:
        return None, None, None, None, None
    opts = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--") and "=" in a:
            k, v = a.split("=", 1)
            opts[k] = v
        elif a in ("--data", "--dataset", "--rows", "--p-fixed") and i + 1 < len(argv):
            opts[a] = argv[i + 1]
            i += 1
        i += 1
    start = count = None
    if "--rows" in opts:
        m = re.match(r"^(\d+):(\d*)$", opts["--rows"])
        if m:
            start = int(m.group(1))
            count = int(m.group(2)) if m.group(2) else None
    try:
        pfix = float(opts["--p-fixed"]) if "--p-fixed" in opts else None
    except ValueError:
        pfix = None
    return opts.get("--data"), opts.get("--dataset"), start, count, pfix


def _locate_rows(fit: Fit, cfg: dict | None, cmd: str):
    """Fill fit.data_file/.data_dataset/.row_start/.row_count: from the
    fit's own attributes data_file, dataset, row_start, row_count (written by
    this version), else from the effective configuration (data.rows,
    windows) or the command line of older files."""
    a = fit.attrs
    if "data_file" in a and "row_start" in a:
        fit.data_file, fit.data_dataset = str(a["data_file"]), str(a.get("dataset", "/X"))
        fit.row_start, fit.row_count = int(a["row_start"]), int(a["row_count"]) if "row_count" in a else None
        if cmd and not cfg:
            fit.cli_p_fixed = _rows_from_command_line(cmd)[4]
        return
    if cfg:
        data = cfg.get("data")
        rows = {}
        if isinstance(data, dict):
            fit.data_file = data.get("file")
            fit.data_dataset = data.get("dataset")
            rows = data.get("rows") or {}
        elif isinstance(data, str):
            fit.data_file = data
        base = int(rows.get("start", 0) or 0) if isinstance(rows, dict) else 0
        count = rows.get("length") if isinstance(rows, dict) else None
        win = cfg.get("windows")
        if fit.window is not None and isinstance(win, dict) and "length" in win:
            step = int(win.get("step", win["length"]) or win["length"])
            fit.row_start = base + int(win.get("start", 0) or 0) + fit.window * step
            fit.row_count = int(win["length"])
        else:
            fit.row_start = base
            fit.row_count = int(count) if count is not None else None
        return
    f, ds, start, count, pfix = _rows_from_command_line(cmd or "")
    fit.data_file, fit.data_dataset, fit.row_start, fit.row_count = f, ds, start, count
    fit.cli_p_fixed = pfix


def open_error(path: str, e: OSError) -> str:
    """One line saying why h5py could not open `path`."""
    msg = str(e).splitlines()[0] if str(e) else type(e).__name__
    if not os.access(path, os.R_OK):
        return f"{path}: cannot read (permission denied)"
    if "signature" in msg:
        return f"{path}: not an HDF5 file"
    if "lock" in msg.lower():
        return (f"{path}: cannot open: the HDF5 file lock failed (another writer, or a file system without "
                "locks: set HDF5_USE_FILE_LOCKING=FALSE)")
    return f"{path}: cannot open as HDF5 ({msg})"


def read(path: str) -> Result:
    """Read a result file.  Raises ResultError (one-line message) for a file
    that is missing, not HDF5, or not a ghfit result file."""
    if not os.path.exists(path):
        raise ResultError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ResultError(f"{path}: is a directory, not a result file")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise ResultError(open_error(path, e)) from None
    with f:
        if "fits" not in f or not isinstance(f["fits"], h5py.Group) or "ghfit_version" not in f.attrs:
            miss = "group /fits" if "fits" not in f else "root attribute ghfit_version"
            raise ResultError(f"{path}: not a ghfit result file (no {miss})")
        attrs = _attrs(f)
        config = None
        if "config" in f and isinstance(f["config"], h5py.Dataset):
            c = f["config"]
            config = c.asstr()[()] if h5py.check_string_dtype(c.dtype) else _value(c[()])
        cfg = _parse_config(config)
        names = list(f["fits"].keys())
        summary = []
        if "summary" in f and isinstance(f["summary"], h5py.Dataset) and f["summary"].dtype.names:
            for row in f["summary"][()]:
                summary.append({k: _value(row[k]) for k in row.dtype.names})
            order = [r["name"] for r in summary if r.get("name") in f["fits"]]
            names = order + [n for n in names if n not in set(order)]
        fits = {}
        try:
            for n in names:
                fit = _read_fit(n, f["fits"][n], path)
                _locate_rows(fit, cfg, attrs.get("command_line", ""))
                fits[n] = fit
        except (KeyError, OSError, ValueError, TypeError) as e:
            raise ResultError(f"{path}:/fits/{n}: cannot read ({e})") from None
        other = {k: _group(v, path) for k, v in f.items()
                 if isinstance(v, h5py.Group) and k != "fits"}
    return Result(path=path, attrs=attrs, config=config, config_dict=cfg, fits=fits,
                  summary=summary, groups=other)


@dataclass
class Optimization:
    """A file of `ghfit optimize` (docs/output-schema.md, section 6): K
    portfolios (one, or a frontier by increasing expected return)."""

    path: str
    attrs: dict
    weights: np.ndarray          # [K, d]
    expected_return: np.ndarray  # [K]
    risk: np.ndarray             # [K]: the measure optimised
    sd: np.ndarray
    var: np.ndarray
    es: np.ndarray
    status: np.ndarray
    converged: np.ndarray
    kkt: np.ndarray
    lower: np.ndarray            # [d]
    upper: np.ndarray

    @property
    def measure(self) -> str:
        return self.attrs.get("measure", "")

    @property
    def alpha(self) -> float:
        return float(self.attrs.get("alpha", math.nan))

    @property
    def type(self) -> str:
        return self.attrs.get("type", "")

    @property
    def fit(self) -> str:
        return self.attrs.get("fit", "")

    @property
    def chosen(self) -> int:
        """The index of the chosen portfolio: the single one, or a frontier's
        minimum-risk point (its first)."""
        return 0

    def __len__(self):
        return int(self.weights.shape[0])


OPT_DATASETS = ("weights", "expected_return", "risk", "sd", "var", "es", "status", "converged", "kkt", "lower", "upper")


def read_optimize(path: str) -> Optimization:
    """Read a file of `ghfit optimize`.  Raises ResultError (one line) for a
    file that is missing, not HDF5, or not an optimize file."""
    if not os.path.exists(path):
        raise ResultError(f"{path}: no such file")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise ResultError(open_error(path, e)) from None
    with f:
        attrs = _attrs(f)
        if attrs.get("content") != "optimize":
            raise ResultError(f"{path}: not a ghfit optimize file (content: {attrs.get('content')!r})")
        miss = [k for k in OPT_DATASETS if k not in f]
        if miss:
            raise ResultError(f"{path}: an optimize file without /{miss[0]}")
        v = {k: np.asarray(f[k][()], dtype=float) for k in OPT_DATASETS}
    return Optimization(path=path, attrs=attrs, **v)


def read_matrix(path: str, dataset: str = "/X"):
    """An input matrix (ghfit generate / the fitted data) as an h5py-free
    numpy array [N, d] (all rows)."""
    with h5py.File(path, "r") as f:
        return np.asarray(f[dataset][()], dtype=float)


__all__ = ["read", "read_matrix", "read_optimize", "Optimization", "Result", "Fit", "Profile", "Group", "LazyDataset",
           "ResultError"]
