"""Writes tests/data/returns.h5 from the CSV copies beside it:

  /capm   516 x 4  monthly returns (percent) of food, durables, construction
                   and the market excess return, 1960-2002 (capm.csv)
  /sp500  2783 x 1 daily S&P 500 returns of the 1990s (sp500.csv)

float64, one row per period; each dataset carries the attribute `source`
(the CSV's first line, its provenance).  The file is committed; this
script documents how it was made:  python3 tests/data/make_returns_h5.py
"""

import os

import h5py
import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
with h5py.File(os.path.join(here, "returns.h5"), "w") as f:
    for name in ("capm", "sp500"):
        path = os.path.join(here, name + ".csv")
        with open(path) as fh:
            source = fh.readline().lstrip("# ").strip()
        x = np.loadtxt(path, delimiter=",", comments="#", ndmin=2)
        ds = f.create_dataset(name, data=x.astype(np.float64))
        ds.attrs["source"] = source
        print(f"{name}: {x.shape[0]} x {x.shape[1]}")
