"""Likelihood-ratio tests between nested fits of the same data.

Fits are grouped by their data: the data file, dataset and row window where
the result file records them (/config, or the `ghfit fit` command line), else
the result file itself, together with n_obs, dim and n_dropped.  Within a
group the best (highest log-likelihood) fit of each model is used, a model
being (family, symmetric, fixed p).  Nested pairs and reference laws of
LR = 2 (loglik_full - loglik_restricted):

* symmetric (gamma = 0) against asymmetric, same family and fixed p:
  chi2 with d degrees of freedom (gamma = 0 is interior);
* nig (p = -1/2), hyp (p = (d+1)/2) and gh with p fixed against gh, and a
  vg or t fit with p fixed against the same family with p free: chi2(1);
* vg (b = 0) and t (a = 0) against gh: the restriction puts a parameter on
  the boundary of its domain, so LR is asymptotically the 50:50 mixture of
  chi2(0) and chi2(1) (S. G. Self and K.-Y. Liang, Asymptotic properties
  of maximum likelihood estimators and likelihood ratio tests under
  nonstandard conditions, JASA 82 (1987) 605-610; one parameter on the
  boundary, the others interior): p-value = chi2(1).sf(LR) / 2 for LR > 0;
* gauss is the limit of the others at infinite parameters, not a nested
  model with a regular or boundary limit law: it gets no test.

Weighted fits (a `loglik_unweighted` different from `loglik`) and failed
fits are not tested.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

MIXTURE = "0.5 chi2(0) + 0.5 chi2(1) (boundary; Self & Liang 1987)"


@dataclass
class LRTest:
    group: tuple
    restricted: object  # Fit
    full: object  # Fit
    df: int
    statistic: float
    p_value: float
    reference: str
    note: str = ""


def data_key(fit) -> tuple:
    """The identity of the data a fit was made on."""
    if fit.data_file:
        ident = (os.path.normpath(str(fit.data_file)), fit.data_dataset or "/X", fit.row_start or 0,
                 fit.row_count)
    else:
        ident = (os.path.abspath(fit.file),)
    return ident + (fit.n_obs, fit.dim, fit.n_dropped)


FREE_P = ("gh", "vg", "t")  # the families whose GIG index p is a free parameter


def model_key(fit) -> tuple:
    """(family, symmetric, p held fixed by the user or None).  The index that
    defines nig (-1/2) and hyp ((d+1)/2), recorded in their `p_fixed`
    attribute, is part of the family, not a restriction of it."""
    p = fit.p_fixed if fit.family in FREE_P else None
    return (fit.family, fit.symmetric, p)


def disp_nparams(d, r):
    """Free parameters of the dispersion: full d(d+1)/2 (r < 0), else d r - r(r-1)/2 + d."""
    return d * (d + 1) // 2 if r < 0 else d * r - r * (r - 1) // 2 + d


def _nested(r, f, d):
    """(df, reference) when model r is nested in model f directly, else None."""
    rf, rs, rp, rr = r
    ff, fs, fp, fr = f
    if rr != fr:
        # the dispersion's forms, the rest alike (as ghfit summary --lrt, src/pipeline/lrt.c):
        # diag < factor:R < factor:R' < full
        if (rf, rs, rp) != (ff, fs, fp):
            return None
        inside = fr < 0 or (0 <= rr < fr)
        df = disp_nparams(d, fr) - disp_nparams(d, rr)
        return (df, f"chi2({df})") if inside and df > 0 else None
    if rf == "gauss" or ff == "gauss":
        return None
    if rf == ff and rp == fp and rs and not fs:
        return d, f"chi2({d})"
    if rs != fs:
        return None
    if ff == "gh" and fp is None:
        if rf in ("nig", "hyp") and rp is None:
            return 1, "chi2(1)"
        if rf == "gh" and rp is not None:
            return 1, "chi2(1)"
        if rf in ("vg", "t") and rp is None:
            return 1, MIXTURE
    if rf == ff and rf in ("vg", "t") and rp is not None and fp is None:
        return 1, "chi2(1)"
    return None


def _p_value(stat, df, ref):
    from scipy import stats

    s = max(stat, 0.0)
    if ref == MIXTURE:
        return 1.0 if s == 0 else 0.5 * float(stats.chi2.sf(s, 1))
    return float(stats.chi2.sf(s, df))


def lr_tests(fits) -> list:
    """All direct nested-pair tests among `fits` (an iterable of Fit)."""
    groups = {}
    for fit in fits:
        # a mixture: between different K the ratio has no chi-square law (not tested)
        if fit.failed or fit.weighted or fit.is_mixture or not math.isfinite(fit.loglik):
            continue
        groups.setdefault(data_key(fit), []).append(fit)
    out = []
    for key, members in groups.items():
        best = {}
        for fit in members:
            mk = model_key(fit) + (fit.factors,)  # the dispersion's form (-1: full)
            if mk not in best or fit.loglik > best[mk].loglik:
                best[mk] = fit
        d = members[0].dim
        for rk, rfit in best.items():
            for fk, ffit in best.items():
                nest = _nested(rk, fk, d)
                if nest is None:
                    continue
                df, ref = nest
                stat = 2.0 * (ffit.loglik - rfit.loglik)
                note = ""
                if stat < 0:
                    note = "the larger model's fit is below the restricted one (it did not reach its maximum)"
                out.append(LRTest(key, rfit, ffit, df, stat, _p_value(stat, df, ref), ref, note))
    return out
