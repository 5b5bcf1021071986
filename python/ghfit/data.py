"""Input matrices for the report: the fitted rows of a data set, subsampled
reproducibly when they are many.

Subsampling (documented in docs/user-guide.md): a row window of n rows with
n <= max_rows is read whole.  A longer window is cut into S = min(4096,
max_rows) equal strata; from each, one run of about max_rows / S consecutive
rows is read, starting at an offset drawn with numpy's Generator(PCG64(seed))
(seed 0 by default).  The rows kept depend only on n, max_rows and the seed,
and reading costs max_rows rows plus S small reads, however large the file.
Rows with a NaN or Inf are then left out (and counted).
"""

from __future__ import annotations

from dataclasses import dataclass

import h5py
import numpy as np


class DataError(Exception):
    """Bad --data input (message: one line)."""


@dataclass
class Sample:
    x: np.ndarray  # [m, d] finite rows
    n_window: int  # rows in the window
    n_read: int  # rows read (before removing non-finite ones)
    n_nonfinite: int
    start: int
    subsampled: bool


class DataSet:
    """An open input matrix (path:dataset), its shape checked once."""

    def __init__(self, path: str, dataset: str = "/X"):
        self.path, self.dataset = path, dataset
        try:
            f = h5py.File(path, "r")
        except FileNotFoundError:
            raise DataError(f"{path}: no such file") from None
        except OSError as e:
            from .results import open_error

            raise DataError(open_error(path, e)) from None
        with f:
            if dataset not in f or not isinstance(f[dataset], h5py.Dataset):
                raise DataError(f"{path}: no dataset {dataset}")
            ds = f[dataset]
            if ds.ndim != 2 or ds.dtype.kind not in "fiu":
                raise DataError(f"{path}:{dataset}: not a 2-D numeric matrix (shape {ds.shape}, type {ds.dtype})")
            self.n, self.d = (int(s) for s in ds.shape)
        self._cache = {}

    def rows(self, start: int, count: int | None, max_rows: int, seed: int = 0) -> Sample:
        count = self.n - start if count is None else count
        key = (start, count, max_rows, seed)
        if key not in self._cache:
            self._cache[key] = self._read(start, count, max_rows, seed)
        return self._cache[key]

    def _read(self, start, count, max_rows, seed) -> Sample:
        if start < 0 or count < 0 or start + count > self.n:
            raise DataError(f"{self.path}:{self.dataset} has {self.n} rows; the fit used rows "
                            f"{start}..{start + count - 1}")
        with h5py.File(self.path, "r") as f:
            ds = f[self.dataset]
            if count <= max_rows:
                x = np.asarray(ds[start:start + count], dtype=float)
                sub = False
            else:
                x = np.asarray(_stratified(ds, start, count, max_rows, seed), dtype=float)
                sub = True
        ok = np.all(np.isfinite(x), axis=1)
        n_bad = int(x.shape[0] - np.count_nonzero(ok))
        if n_bad:
            x = x[ok]
        return Sample(x, count, int(ok.size), n_bad, start, sub)


def stratified_runs(count: int, max_rows: int, seed: int = 0):
    """(offset, length) of the runs read from a window of `count` rows."""
    s = min(4096, max_rows)
    edges = np.linspace(0, count, s + 1).astype(np.int64)
    per = np.full(s, max_rows // s, dtype=np.int64)
    per[: max_rows - int(per.sum())] += 1
    rng = np.random.default_rng(seed)
    runs = []
    for k in range(s):
        lo, hi = int(edges[k]), int(edges[k + 1])
        ln = min(int(per[k]), hi - lo)
        off = lo + int(rng.integers(0, hi - lo - ln + 1))
        runs.append((off, ln))
    return runs


def _stratified(ds, start, count, max_rows, seed):
    parts = [ds[start + off:start + off + ln] for off, ln in stratified_runs(count, max_rows, seed) if ln > 0]
    return np.concatenate(parts, axis=0)
