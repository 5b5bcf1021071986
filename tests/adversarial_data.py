"""The numerically hostile data sets of tests/fit_adversarial.sh (issue 16,
classes 4 and 5), also fitted by tests/fit_sample.sh: written as NAME.h5
(dataset /X) into the current directory.  One generator and one seed, so
that both tests fit the same rows."""
import h5py
import numpy as np


def w(name, x):
    with h5py.File(name + ".h5", "w") as f:
        f["X"] = x


rng = np.random.default_rng(20261201)
w("gauss", rng.standard_normal((5000, 3)))
w("lognormal", np.exp(0.8 * rng.standard_normal((3000, 2))))
h = rng.standard_normal((2000, 3)); h[:1000] = 0.0
w("halfzero", h)
w("bimodal", np.concatenate([rng.normal(-2.5, 1, 1000), rng.normal(2.5, 1, 1000)]).reshape(-1, 1))
w("ties", np.round(2.0 * rng.standard_normal((5000, 3))))
e = rng.standard_normal((20000, 3)); e[777, 1] = 1e20
w("extreme", e)
