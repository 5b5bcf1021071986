"""The fitted law in NumPy/SciPy: log-density, sampling, moments and margins.

The model (docs/output-schema.md, docs/design.md) is the normal variance-mean
mixture

    X = mu + gamma * Y + sqrt(Y) * A Z,   Sigma = A A^T,   Z ~ N(0, I_d),

with Y ~ GIG(p, a, b), whose density is proportional to
y^(p-1) exp(-(a y + b/y) / 2).  The families are GIG sub-families: ``gh``
(p, a, b free), ``hyp`` (p = (d+1)/2), ``nig`` (p = -1/2), ``vg`` (b = 0: a
Gamma subordinator, p > 0), ``t`` (a = 0: an inverse Gamma subordinator,
nu = -2p degrees of freedom); ``gauss`` has no subordinator (Sigma is the
covariance, gamma = 0, p, a, b are NaN).

With Z_sub(p, a, b) = integral of y^(p-1) exp(-(a y + b/y)/2) dy, i.e.

    2 (b/a)^(p/2) K_p(sqrt(a b))     a > 0, b > 0
    Gamma(p) (a/2)^(-p)              b = 0, a > 0, p > 0   (Gamma face)
    Gamma(-p) (b/2)^p                a = 0, b > 0, p < 0   (inverse Gamma face)

the log-density of x is

    log f(x) = -(d/2) log(2 pi) - 1/2 log|Sigma| + gamma' Sigma^-1 (x - mu)
               - log Z_sub(p, a, b) + log Z_sub(p - d/2, a + gamma' Sigma^-1 gamma,
                                               b + (x - mu)' Sigma^-1 (x - mu)),

which covers the faces (b = 0, a = 0) and gamma = 0 (a zero Bessel argument
on the t face) without special formulas.  A point where the posterior
integral diverges (x = mu on a VG fit with p <= d/2) has log f = +inf.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import linalg, special

LOG_2PI = math.log(2.0 * math.pi)
LN2 = math.log(2.0)

FAMILIES = ("gh", "hyp", "nig", "vg", "t", "gauss")


def log_kv(v, z):
    """log K_v(z) for z > 0, elementwise (K is even in v).

    Uses the exponentially scaled SciPy (AMOS) Bessel function; where that
    overflows (tiny z, large |v|) the small-argument limit
    log K_v(z) = lgamma(|v|) + (|v| - 1) log 2 - |v| log z (v != 0) is used,
    whose relative error is O(z^2) there."""
    v = np.abs(np.asarray(v, dtype=float))
    z = np.asarray(z, dtype=float)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        r = np.log(special.kve(v, z)) - z
        bad = ~np.isfinite(r) & (z > 0) & np.isfinite(z)
        if np.any(bad):
            vb = np.broadcast_to(v, r.shape)[bad]
            zb = np.broadcast_to(z, r.shape)[bad]
            small = np.where(vb > 0,
                             special.gammaln(vb) + (vb - 1.0) * LN2 - vb * np.log(zb),
                             np.log(-np.log(zb / 2.0) - np.euler_gamma))
            # AMOS gives up for huge z: Hankel's expansion (DLMF 10.40.2)
            mu4 = 4.0 * vb * vb
            term, ser = np.ones_like(zb), np.ones_like(zb)
            for k in range(1, 6):
                term = term * (mu4 - (2 * k - 1) ** 2) / (k * 8.0 * zb)
                ser = ser + term
            large = 0.5 * np.log(np.pi / (2.0 * zb)) - zb + np.log(ser)
            r = np.array(r, copy=True)
            r[bad] = np.where(zb > 1.0, large, small)
    return r


def log_zsub(p, a, b):
    """log of Z_sub(p, a, b) = int_0^inf y^(p-1) exp(-(a y + b/y)/2) dy,
    elementwise; +inf where the integral diverges, NaN for a < 0 or b < 0."""
    p, a, b = np.broadcast_arrays(np.asarray(p, float), np.asarray(a, float), np.asarray(b, float))
    out = np.full(p.shape, np.nan)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inner = (a > 0) & (b > 0)
        if np.any(inner):
            pi, ai, bi = p[inner], a[inner], b[inner]
            out[inner] = (LN2 + 0.5 * pi * (np.log(bi) - np.log(ai))
                          + log_kv(pi, np.sqrt(ai * bi)))
        gam = (b == 0) & (a > 0)
        if np.any(gam):
            pg, ag = p[gam], a[gam]
            out[gam] = np.where(pg > 0, special.gammaln(np.where(pg > 0, pg, 1.0)) - pg * np.log(ag / 2.0),
                                np.inf)
        inv = (a == 0) & (b > 0)
        if np.any(inv):
            pv, bv = p[inv], b[inv]
            out[inv] = np.where(pv < 0, special.gammaln(np.where(pv < 0, -pv, 1.0)) + pv * np.log(bv / 2.0),
                                np.inf)
        out[(a == 0) & (b == 0)] = np.inf
    return out


def gig_moment(p, a, b, r):
    """E[Y^r] for Y ~ GIG(p, a, b) (faces included); +inf where infinite."""
    if a > 0 and b > 0:
        w = math.sqrt(a * b)
        return float(np.exp(0.5 * r * (math.log(b) - math.log(a)) + log_kv(p + r, w) - log_kv(p, w)))
    if b == 0 and a > 0 and p > 0:  # Gamma(p, rate a/2)
        if p + r <= 0:
            return math.inf
        return float(np.exp(special.gammaln(p + r) - special.gammaln(p) - r * math.log(a / 2.0)))
    if a == 0 and b > 0 and p < 0:  # 1/Y ~ Gamma(-p, rate b/2)
        if -p - r <= 0:
            return math.inf
        return float(np.exp(special.gammaln(-p - r) - special.gammaln(-p) + r * math.log(b / 2.0)))
    return math.nan


@dataclass
class Law:
    """A fitted law of one family with its parameters (gauge as stored)."""

    mu: np.ndarray
    gamma: np.ndarray
    sigma: np.ndarray
    p: float = math.nan
    a: float = math.nan
    b: float = math.nan
    family: str = "gh"
    _chol: np.ndarray | None = field(default=None, repr=False, compare=False)
    _zsub: tuple | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        self.mu = np.atleast_1d(np.asarray(self.mu, dtype=float))
        d = self.mu.size
        self.gamma = np.atleast_1d(np.asarray(self.gamma, dtype=float)).reshape(d)
        self.sigma = np.asarray(self.sigma, dtype=float).reshape(d, d)
        self.p, self.a, self.b = float(self.p), float(self.a), float(self.b)
        if self.family == "gauss":
            self.gamma = np.zeros(d)

    # ----------------------------------------------------------------- basics
    @property
    def dim(self) -> int:
        return self.mu.size

    @property
    def is_gauss(self) -> bool:
        return self.family == "gauss"

    def check(self):
        """Raise ValueError when the parameters do not define a law."""
        if not (np.all(np.isfinite(self.mu)) and np.all(np.isfinite(self.sigma))):
            raise ValueError("non-finite mu or Sigma")
        if self.is_gauss:
            return
        if not np.all(np.isfinite(self.gamma)):
            raise ValueError("non-finite gamma")
        p, a, b = self.p, self.a, self.b
        if not (math.isfinite(p) and math.isfinite(a) and math.isfinite(b)) or a < 0 or b < 0:
            raise ValueError(f"GIG parameters outside the domain (p={p}, a={a}, b={b})")
        if not np.isfinite(self._log_zsub0()):
            raise ValueError(f"improper GIG subordinator (p={p}, a={a}, b={b})")

    def _log_zsub0(self):
        """log Z_sub(p, a, b) of the law's own subordinator, kept while p, a
        and b stay (a density of one point at a time, as a quadrature asks
        for, otherwise spends most of its time on it)."""
        key = (self.p, self.a, self.b)
        if self._zsub is None or self._zsub[0] != key:
            self._zsub = (key, log_zsub(*key))
        return self._zsub[1]

    @property
    def chol(self) -> np.ndarray:
        if self._chol is None:
            self._chol = linalg.cholesky(self.sigma, lower=True)
        return self._chol

    def margin(self, idx) -> "Law":
        """The law of X[idx] (same family and subordinator)."""
        idx = np.atleast_1d(np.asarray(idx, dtype=int))
        return Law(self.mu[idx], self.gamma[idx], self.sigma[np.ix_(idx, idx)],
                   self.p, self.a, self.b, self.family)

    # ---------------------------------------------------------------- density
    def logpdf(self, x, missing: str = "nan") -> np.ndarray:
        """log f(x) for the rows of x ([n, d], or [d] for one point).

        Rows with NaN entries give NaN (missing="nan"), or with
        missing="marginal" the log-density of their observed coordinates
        under the marginal law of those coordinates (NaN if none is
        observed), as EM over missing coordinates counts them."""
        x = np.asarray(x, dtype=float)
        one = x.ndim == 1
        x = np.atleast_2d(x)
        d = self.dim
        if x.shape[1] != d:
            raise ValueError(f"x has {x.shape[1]} columns, the law has dimension {d}")
        if missing not in ("nan", "marginal"):
            raise ValueError("missing must be 'nan' or 'marginal'")
        self.check()
        if missing == "marginal":
            obs = ~np.isnan(x)
            part = ~np.all(obs, axis=1)
            if np.any(part):
                out = np.full(x.shape[0], np.nan)
                full = ~part
                if np.any(full):
                    out[full] = self.logpdf(x[full])
                pats, inv = np.unique(obs[part], axis=0, return_inverse=True)
                rows = np.flatnonzero(part)
                for k, pat in enumerate(pats):
                    if pat.any():
                        sel = rows[inv.ravel() == k]
                        out[sel] = self.margin(np.flatnonzero(pat)).logpdf(x[np.ix_(sel, np.flatnonzero(pat))])
                return out[0] if one else out
        L = self.chol
        logdet = 2.0 * np.sum(np.log(np.diag(L)))
        z = linalg.solve_triangular(L, (x - self.mu).T, lower=True, check_finite=False)
        q = np.einsum("ij,ij->j", z, z)
        const = -0.5 * d * LOG_2PI - 0.5 * logdet
        if self.is_gauss:
            out = const - 0.5 * q
        else:
            w = linalg.solve_triangular(L, self.gamma, lower=True, check_finite=False)
            zw = w @ z
            w2 = float(w @ w)
            out = (const + zw - self._log_zsub0()
                   + log_zsub(self.p - 0.5 * d, self.a + w2, self.b + q))
        return out[0] if one else out

    def pdf(self, x) -> np.ndarray:
        return np.exp(self.logpdf(x))

    # ---------------------------------------------------------------- moments
    def moments(self):
        """(E[X], Cov[X]); NaN where undefined (infinite moments of Y)."""
        d = self.dim
        if self.is_gauss:
            return self.mu.copy(), self.sigma.copy()
        ey, ey2 = gig_moment(self.p, self.a, self.b, 1.0), gig_moment(self.p, self.a, self.b, 2.0)
        if not math.isfinite(ey):
            return np.full(d, np.nan), np.full((d, d), np.nan)
        mean = self.mu + self.gamma * ey
        if not math.isfinite(ey2):
            return mean, np.full((d, d), np.nan)
        var_y = ey2 - ey * ey
        return mean, ey * self.sigma + var_y * np.outer(self.gamma, self.gamma)

    def y_median(self) -> float:
        """Median of the subordinator Y (1 for the Gaussian)."""
        if self.is_gauss:
            return 1.0
        return float(self._y_dist().median())

    def _y_dist(self):
        from scipy import stats

        p, a, b = self.p, self.a, self.b
        if a > 0 and b > 0:
            return stats.geninvgauss(p, math.sqrt(a * b), scale=math.sqrt(b / a))
        if b == 0:
            return stats.gamma(p, scale=2.0 / a)
        return stats.invgamma(-p, scale=b / 2.0)

    # --------------------------------------------------------------- sampling
    def sample(self, n: int, seed=None) -> np.ndarray:
        """n draws as an [n, d] array.  Reproducible: the same seed gives the
        same draws (numpy Generator PCG64 seeded with `seed`; Y from SciPy's
        geninvgauss / gamma / invgamma with that generator, then Z)."""
        n = int(n)
        if n < 0:
            raise ValueError("n must be >= 0")
        self.check()
        rng = np.random.default_rng(seed)
        d = self.dim
        if self.is_gauss:
            y = np.ones(n)
        else:
            y = np.asarray(self._y_dist().rvs(size=n, random_state=rng), dtype=float).reshape(n)
        z = rng.standard_normal((n, d))
        return self.mu + y[:, None] * self.gamma + np.sqrt(y)[:, None] * (z @ self.chol.T)

    # -------------------------------------------------- univariate quantiles
    def cdf_table(self, n_grid: int = 8001):
        """Numerical CDF of a univariate law: (x, cdf, sf) on a grid.

        The density is integrated with Simpson's rule on a grid uniform
        in u = asinh((x - mu) / s) (s: a scale of the law), u in [-24, 24],
        which reaches |x - mu| = 1.3e10 s; x = mu is a node.  Where the
        density is infinite at mu (VG with p <= 1/2) the 40 cells around mu
        are integrated with adaptive quadrature (scipy.integrate.quad) instead.
        Both tails are accumulated from their own end so that small tail
        probabilities keep their relative accuracy; the total is normalised
        to 1."""
        from scipy import integrate

        if self.dim != 1:
            raise ValueError("cdf_table needs a univariate law (use margin(j))")
        self.check()
        ym = self.y_median()
        m = float(self.mu[0])
        s = float(math.sqrt(self.sigma[0, 0] * ym) + abs(self.gamma[0]) * ym)
        n_grid += 1 - n_grid % 2  # odd: u = 0 (x = mu) is a node
        u = np.linspace(-24.0, 24.0, n_grid)
        x = m + s * np.sinh(u)
        x[n_grid // 2] = m
        with np.errstate(over="ignore", invalid="ignore"):
            f = np.exp(self.logpdf(x[:, None])) * s * np.cosh(u)
        du = u[1] - u[0]
        singular = not np.isfinite(f[n_grid // 2])
        f[~np.isfinite(f)] = 0.0
        seg = np.diff(integrate.cumulative_simpson(f, dx=du, initial=0.0))
        if singular:
            def dens(t):
                return float(np.exp(self.logpdf(np.array([[t]]))[0]))

            i0 = n_grid // 2
            for i in range(max(i0 - 20, 0), min(i0 + 20, n_grid - 1)):
                seg[i] = integrate.quad(dens, x[i], x[i + 1], limit=200)[0]
        cdf = np.concatenate(([0.0], np.cumsum(seg)))
        sf = np.concatenate((np.cumsum(seg[::-1])[::-1], [0.0]))
        tot = cdf[-1]
        return x, cdf / tot, sf / tot

    def ppf(self, q, n_grid: int = 8001) -> np.ndarray:
        """Quantiles of a univariate law from cdf_table (log-linear
        interpolation of the tail probabilities)."""
        q = np.asarray(q, dtype=float)
        x, cdf, sf = self.cdf_table(n_grid)
        out = np.empty(q.shape)
        lo = q <= 0.5
        with np.errstate(divide="ignore"):
            k = cdf > 0
            out[lo] = np.interp(np.log(q[lo]), np.log(cdf[k]), x[k])
            k = sf > 0
            # sf decreases along x: interpolate on the reversed arrays
            out[~lo] = np.interp(np.log1p(-q[~lo]),
                                 np.log(sf[k][::-1]), x[k][::-1])
        return out


def factor_sigma(B, D) -> np.ndarray:
    """Sigma = B B' + diag(D) of the factor form (``--sigma factor:R``; B of
    shape (d, R), or empty for ``--sigma diag``)."""
    D = np.atleast_1d(np.asarray(D, dtype=float))
    B = np.asarray(B if B is not None else np.zeros((D.size, 0)), dtype=float).reshape(D.size, -1)
    return B @ B.T + np.diag(D)


def factor_law(mu, gamma, B, D, p=math.nan, a=math.nan, b=math.nan, family: str = "gh") -> Law:
    """The law of a factor-form fit: X | Y = y ~ N(mu + gamma y, y (B B' + diag D))."""
    return Law(mu, gamma, factor_sigma(B, D), p, a, b, family)


def params_sigma(params: dict) -> np.ndarray:
    """params/sigma, or for a factor-form fit without it (d > 1000) B B' + diag(D)."""
    if "sigma" in params:
        return params["sigma"]
    if "D" in params:
        return factor_sigma(params.get("B"), params["D"])
    raise KeyError("sigma")


def law_from_params(params: dict, family: str = "gh") -> Law:
    """A Law from a result file's params/ datasets (mu, gamma, sigma or B and D, p, a, b)."""
    return Law(params["mu"], params.get("gamma", 0.0 * np.asarray(params["mu"])), params_sigma(params),
               params.get("p", math.nan), params.get("a", math.nan), params.get("b", math.nan), family)


@dataclass
class MixtureLaw:
    """A K-component mixture of laws of one family (``ghfit fit --components
    K``; docs/output-schema.md "Mixtures"): f(x) = sum_k prop[k] f_k(x), each
    component a `Law` with its own parameters."""

    prop: np.ndarray
    components: list

    def __post_init__(self):
        self.prop = np.atleast_1d(np.asarray(self.prop, dtype=float))
        self.components = list(self.components)
        if self.prop.size != len(self.components) or not self.components:
            raise ValueError(f"{self.prop.size} proportions for {len(self.components)} components")

    @property
    def n_components(self) -> int:
        return len(self.components)

    @property
    def dim(self) -> int:
        return self.components[0].dim

    @property
    def family(self) -> str:
        return self.components[0].family

    @property
    def is_gauss(self) -> bool:
        return self.family == "gauss"

    def check(self):
        """Raise ValueError when the proportions or a component do not define a law."""
        if not (np.all(np.isfinite(self.prop)) and np.all(self.prop > 0) and abs(self.prop.sum() - 1.0) <= 1e-8):
            raise ValueError(f"proportions {self.prop} are not positive or do not sum to 1")
        for k, c in enumerate(self.components):
            if c.dim != self.dim:
                raise ValueError(f"component {k} has dimension {c.dim}, not {self.dim}")
            try:
                c.check()
                c.chol
            except (ValueError, np.linalg.LinAlgError) as e:
                raise ValueError(f"component {k}: {e}") from None

    def margin(self, idx) -> "MixtureLaw":
        """The law of X[idx]: the mixture of the components' margins."""
        return MixtureLaw(self.prop, [c.margin(idx) for c in self.components])

    def _terms(self, x):
        """log pi_k + log f_k(x) as [n, K]."""
        x = np.atleast_2d(np.asarray(x, dtype=float))
        self.check()
        with np.errstate(divide="ignore"):
            lp = np.log(self.prop)
        return np.stack([lp[k] + c.logpdf(x) for k, c in enumerate(self.components)], axis=1)

    def logpdf(self, x) -> np.ndarray:
        """log f(x) by log-sum-exp over the components ([n, d] rows, or one point)."""
        one = np.asarray(x).ndim == 1
        t = self._terms(x)
        from scipy.special import logsumexp

        out = logsumexp(t, axis=1)
        return out[0] if one else out

    def pdf(self, x) -> np.ndarray:
        return np.exp(self.logpdf(x))

    def responsibility(self, x) -> np.ndarray:
        """tau_ik = pi_k f_k(x_i) / f(x_i), [n, K] (NaN rows where f is not finite)."""
        t = self._terms(x)
        from scipy.special import logsumexp

        lf = logsumexp(t, axis=1)
        with np.errstate(invalid="ignore"):
            tau = np.exp(t - lf[:, None])
        tau[~np.isfinite(lf)] = np.nan
        return tau

    def cluster(self, x) -> np.ndarray:
        """The MAP component argmax_k tau_ik (int, -1 where f is not finite), as `ghfit eval`'s /cluster."""
        tau = self.responsibility(x)
        ok = np.all(np.isfinite(tau), axis=1)
        out = np.full(tau.shape[0], -1, dtype=np.int32)
        out[ok] = np.argmax(tau[ok], axis=1)
        return out

    def moments(self):
        """(E[X], Cov[X]) of the mixture: sum pi_k m_k and sum pi_k (C_k + m_k m_k') - E X E X'."""
        ms = [c.moments() for c in self.components]
        mean = sum(p * m for p, (m, _) in zip(self.prop, ms))
        cov = sum(p * (C + np.outer(m, m)) for p, (m, C) in zip(self.prop, ms)) - np.outer(mean, mean)
        return mean, cov

    def sample(self, n: int, seed=None, return_component: bool = False):
        """n draws ([n, d]): the component of each draw by the proportions,
        then that component's draw (numpy Generator PCG64 seeded with `seed`).
        With return_component, also the components drawn ([n] int)."""
        n = int(n)
        if n < 0:
            raise ValueError("n must be >= 0")
        self.check()
        rng = np.random.default_rng(seed)
        comp = rng.choice(self.n_components, size=n, p=self.prop / self.prop.sum())
        x = np.empty((n, self.dim))
        for k, c in enumerate(self.components):
            sel = comp == k
            if np.any(sel):
                x[sel] = c.sample(int(sel.sum()), seed=rng)
        return (x, comp.astype(np.int32)) if return_component else x
