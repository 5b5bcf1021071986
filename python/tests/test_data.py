"""The report's data access: row windows and the documented, reproducible
subsampling of long windows."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from ghfit.data import DataError, DataSet, stratified_runs


def test_stratified_runs():
    runs = stratified_runs(1_000_000, 10_000, seed=3)
    assert runs == stratified_runs(1_000_000, 10_000, seed=3)
    assert runs != stratified_runs(1_000_000, 10_000, seed=4)
    assert len(runs) == 4096 and sum(ln for _, ln in runs) == 10_000
    edges = np.linspace(0, 1_000_000, 4097).astype(np.int64)
    for k, (off, ln) in enumerate(runs):  # each run inside its own stratum
        assert edges[k] <= off and off + ln <= edges[k + 1]
    small = stratified_runs(5_000, 300, seed=0)  # fewer rows than strata: one row per stratum
    assert len(small) == 300 and all(ln == 1 for _, ln in small)


def test_dataset_rows(work):
    p = work / "rows.h5"
    x = np.arange(50_000 * 2, dtype=float).reshape(50_000, 2)
    x[7, 1] = np.nan
    with h5py.File(p, "w") as f:
        f["X"] = x
    ds = DataSet(str(p))
    assert (ds.n, ds.d) == (50_000, 2)
    s = ds.rows(0, 100, max_rows=1000)
    assert not s.subsampled and s.n_nonfinite == 1 and s.x.shape == (99, 2)
    s = ds.rows(1000, None, max_rows=2000, seed=1)
    assert s.subsampled and s.n_window == 49_000 and s.x.shape == (2000, 2)
    assert np.all(s.x[:, 0] >= 2000) and np.all(np.diff(s.x[:, 0]) > 0)  # rows of the window, in order
    assert np.array_equal(s.x, DataSet(str(p)).rows(1000, None, max_rows=2000, seed=1).x)
    with pytest.raises(DataError, match="has 50000 rows"):
        ds.rows(49_990, 100, max_rows=1000)
    with pytest.raises(DataError, match="no dataset /Y"):
        DataSet(str(p), "/Y")
