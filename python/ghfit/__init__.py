"""ghfit: read ghfit result files, evaluate and sample the fitted laws, write HTML reports.

    import ghfit
    res = ghfit.read("fit.h5")
    fit = res.fits["gh"]
    law = fit.law                      # ghfit.Law
    ll = law.logpdf(x).sum()           # x: [n, d]
    x = law.sample(1000, seed=1)
    # a mixture fit (fit.is_mixture): fit.law is a MixtureLaw (proportions,
    # components, logpdf, responsibility, cluster, sample); fit.icl, fit.starts
"""

from .law import FAMILIES, Law, MixtureLaw, gig_moment, log_kv, log_zsub
from .lrt import LRTest, lr_tests
from .results import (Fit, Group, LazyDataset, Optimization, Profile, Result, ResultError, read, read_matrix,
                      read_optimize)

__version__ = "0.1.0"

__all__ = ["FAMILIES", "Law", "MixtureLaw", "gig_moment", "log_kv", "log_zsub", "LRTest", "lr_tests", "Fit", "Group",
           "LazyDataset", "Optimization", "Profile", "Result", "ResultError", "read", "read_matrix", "read_optimize",
           "__version__"]
