"""The report's figures, drawn with matplotlib (Agg) and returned as PNG bytes.

Every function returns (png_bytes, caption); the caption says how to read the
figure.  Every figure has a title and axis labels with units ("data units"
are the units of the fitted columns).
"""

from __future__ import annotations

import functools
import io
import math
import os

import matplotlib

matplotlib.use("Agg")
from matplotlib import ticker  # noqa: E402  (after choosing the backend)
from matplotlib.figure import Figure  # noqa: E402
import numpy as np  # noqa: E402

DPI = 80
STYLE = {"font.size": 9, "axes.titlesize": 10, "axes.titley": 1.0, "axes.grid": True, "grid.alpha": 0.3,
         "legend.fontsize": 7, "figure.titlesize": 11}


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def _fig(w, h, nrows=1, ncols=1, top=None, bottom=None):
    """A figure with fixed margins and gaps in inches (so that labels fit at
    any size); constrained layout would cost most of the drawing time."""
    fig = Figure(figsize=(w, h))
    axes = fig.subplots(nrows, ncols, squeeze=False)
    left, right = 0.9, 0.2
    top = 0.35 if top is None else top
    bottom = 0.55 if bottom is None else bottom
    gw, gh = 1.0, 0.95  # gaps between panels (inches)
    aw = (w - left - right - (ncols - 1) * gw) / ncols
    ah = (h - top - bottom - (nrows - 1) * gh) / nrows
    fig.subplots_adjust(left=left / w, right=1 - right / w, bottom=bottom / h, top=1 - top / h,
                        wspace=gw / aw, hspace=gh / ah)
    return fig, axes


def _logy(ax):
    """A log y axis with plain-text labels (1e-05, 0.01, 1): mathtext labels
    cost most of a figure's drawing time."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(ticker.LogLocator(numticks=8))
    ax.yaxis.set_major_formatter(ticker.LogFormatter(labelOnlyBase=True))
    ax.yaxis.set_minor_locator(ticker.NullLocator())


def _compact(v, _pos=None):
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:g}M"
    if a >= 1e4:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def _plain_x(ax):
    """x tick labels as compact numbers (250k, 1M: row indices), at most 5,
    instead of a '1e6' offset text that collides with the axis label."""
    ax.xaxis.set_major_locator(ticker.MaxNLocator(nbins=5, integer=True))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(_compact))


_GLOBAL_STYLE = False


def use_style():
    """Set the report's rc style for the whole process (what ghfit-report
    does); otherwise each figure is drawn inside an rc_context."""
    global _GLOBAL_STYLE
    matplotlib.rcParams.update(STYLE)
    _GLOBAL_STYLE = True


def _styled(fn):
    """Draw the whole figure (creation to PNG) under the report's rc style."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _GLOBAL_STYLE:
            return fn(*args, **kwargs)
        with matplotlib.rc_context(STYLE):
            return fn(*args, **kwargs)
    return wrapper


# ---------------------------------------------------------------- per fit
@_styled
def trace(fit):
    ll = np.asarray(fit.trace, dtype=float)
    fig, ax = _fig(6.4, 3.2)
    ax = ax[0, 0]
    final = ll[-1]
    gap = final - ll[:-1]
    it = np.arange(ll.size - 1)
    pos = gap > 0
    if np.any(pos):
        ax.plot(it[pos], gap[pos], "o-", ms=2.5, lw=1, label="below the final value")
    neg = gap < 0
    if np.any(neg):
        ax.plot(it[neg], -gap[neg], "x", color="C3", ms=5, label="above the final value")
    if not np.any(pos | neg):
        ax.text(0.5, 0.5, "every entry equals the final value", ha="center", transform=ax.transAxes)
    else:
        ax.axhline(1e-12 * max(abs(final), 1.0), ls=":", color="0.4", lw=1,
                   label="round-off level (1e-12 relative)")
        ax.legend()
    _logy(ax)
    ax.set_title(f"EM trace: {fit.name}")
    ax.set_xlabel("EM iteration (count; 0 = starting parameters)")
    ax.set_ylabel("final log-lik. - log-lik. (nats)")
    cap = ("Gap between the log-likelihood after each EM iteration and the final value "
           f"({final:.10g} nats), on a log scale: a straight descending line is linear convergence, "
           "a steepening one superlinear (SQUAREM). Iterations equal to the final value are not drawn; "
           "red crosses (if any) are iterations above the final value: non-monotone steps, unless they lie "
           "near the dotted round-off level, where the log-likelihood sum itself is only known to rounding.")
    return _png(fig), cap


@_styled
def margin(law, x, j, name, n_note=""):
    """QQ plot and density against a histogram for margin j (x: that column)."""
    m = law.margin([j])
    fig, axes = _fig(8.0, 3.4, 1, 2, top=0.6)
    ax1, ax2 = axes[0]
    n = x.size
    lo, hi = 0.5 / n, 1.0 - 0.5 / n
    t = np.linspace(math.log(lo / (1 - lo)), math.log(hi / (1 - hi)), 300)
    probs = 1.0 / (1.0 + np.exp(-t))
    xs = np.sort(x)
    pos = np.clip(n * probs - 0.5, 0, n - 1)  # Hazen plotting positions (i - 1/2) / n
    k = np.floor(pos).astype(np.int64)
    k1 = np.minimum(k + 1, n - 1)
    emp = xs[k] + (pos - k) * (xs[k1] - xs[k])
    mod = m.ppf(probs)
    ax1.plot(mod, emp, ".", ms=3)
    lim = [min(mod.min(), emp.min()), max(mod.max(), emp.max())]
    ax1.plot(lim, lim, "k-", lw=0.7, label="y = x")
    ax1.set_title(f"QQ plot, margin {j + 1}")
    ax1.set_xlabel(f"fitted quantile of X{j + 1} (data units)")
    ax1.set_ylabel(f"empirical quantile of X{j + 1} (data units)")
    ax1.legend(loc="upper left")
    xmin, xmax = float(xs[0]), float(xs[-1])
    if xmax <= xmin:
        xmax = xmin + 1.0
    bins = min(120, max(10, int(2 * n ** (1 / 3))))
    h, edges = np.histogram(x, bins=bins, range=(xmin, xmax), density=True)
    ax2.stairs(np.where(h > 0, h, np.nan), edges, fill=True, alpha=0.35, label="data (histogram)")
    g = np.linspace(xmin, xmax, 400)
    with np.errstate(over="ignore"):
        dens = np.exp(m.logpdf(g[:, None]))
    ax2.plot(g, dens, "C3-", lw=1.2, label="fitted density")
    _logy(ax2)
    hmin = h[h > 0].min() if np.any(h > 0) else 1e-12
    ax2.set_ylim(bottom=hmin / 5)
    ax2.set_title(f"Density, margin {j + 1} (log scale)")
    ax2.set_xlabel(f"X{j + 1} (data units)")
    ax2.set_ylabel("density (1 / data unit)")
    ax2.legend(loc="upper right")
    fig.suptitle(f"{name}: margin {j + 1}")
    cap = (f"Left: empirical quantiles of column {j + 1} against the fitted marginal law's quantiles at 300 "
           f"probabilities from 0.5/n to 1 - 0.5/n (n = {n:,} rows{n_note}); points on the line y = x mean a "
           "good fit, points bending away at the ends mean tails heavier (steeper than the line) or "
           "lighter than fitted. Right: histogram of the column and the fitted marginal density on a "
           "log scale, so that the tails are visible; empty bins are not drawn.")
    return _png(fig), cap


def most_correlated(law, cov=None):
    """The pair (i, j) of margins with the largest |correlation|."""
    d = law.dim
    c = np.asarray(cov, dtype=float) if cov is not None else None
    if c is None or c.shape != (d, d) or not np.all(np.isfinite(c)):
        c = law.moments()[1]
    if not np.all(np.isfinite(c)):
        c = law.sigma
    s = np.sqrt(np.diag(c))
    r = np.abs(c / np.outer(s, s))
    np.fill_diagonal(r, -1.0)
    i, j = np.unravel_index(int(np.argmax(r)), r.shape)
    i, j = (int(i), int(j)) if i < j else (int(j), int(i))
    return i, j, float((c / np.outer(s, s))[i, j])


@_styled
def contour(law, i, j, corr, name, xy=None, seed=0, n_note=""):
    """Contours of the fitted bivariate margin (i, j), data points behind."""
    m = law.margin([i, j])
    fig, ax = _fig(5.2, 4.6)
    ax = ax[0, 0]
    if xy is not None and xy.shape[0] > 0:
        lo = np.quantile(xy, 0.0005, axis=0)
        hi = np.quantile(xy, 0.9995, axis=0)
    else:
        lo = np.array([law.margin([k]).ppf(np.array([0.0005]))[0] for k in (i, j)])
        hi = np.array([law.margin([k]).ppf(np.array([0.9995]))[0] for k in (i, j)])
    pad = 0.15 * (hi - lo)
    lo, hi = lo - pad, hi + pad
    gx = np.linspace(lo[0], hi[0], 140)
    gy = np.linspace(lo[1], hi[1], 140)
    GX, GY = np.meshgrid(gx, gy)
    with np.errstate(over="ignore"):
        f = np.exp(m.logpdf(np.column_stack([GX.ravel(), GY.ravel()]))).reshape(GX.shape)
    f[~np.isfinite(f)] = np.nanmax(f[np.isfinite(f)]) if np.any(np.isfinite(f)) else 0.0
    npts = 0
    if xy is not None and xy.shape[0] > 0:
        sel = xy
        if xy.shape[0] > 5000:
            sel = xy[np.sort(np.random.default_rng(seed).choice(xy.shape[0], 5000, replace=False))]
        npts = sel.shape[0]
        ax.plot(sel[:, 0], sel[:, 1], ".", ms=1.5, color="0.45", alpha=0.5, label=f"data ({npts:,} points)")
    # highest-density regions holding 50, 90, 99 and 99.9% of the mass on the grid
    flat = np.sort(f.ravel())[::-1]
    cum = np.cumsum(flat)
    levels = []
    labels = {}
    if cum[-1] > 0:
        for mass in (0.999, 0.99, 0.9, 0.5):
            k = min(int(np.searchsorted(cum, mass * cum[-1])), flat.size - 1)
            lv = flat[k]
            if lv > 0 and (not levels or lv > levels[-1]):
                levels.append(lv)
                labels[lv] = f"{100 * mass:g}%"
    if len(levels) >= 1:
        cs = ax.contour(GX, GY, f, levels=levels, colors="C3", linewidths=1.0)
        ax.clabel(cs, fmt=labels, fontsize=7)
    ax.set_title(f"{name}: margins {i + 1} and {j + 1} (corr. {corr:+.2f})")
    ax.set_xlabel(f"X{i + 1} (data units)")
    ax.set_ylabel(f"X{j + 1} (data units)")
    if npts:
        ax.legend(loc="upper left")
    data_txt = (f"Grey dots: {npts:,} data rows (a random subset drawn with numpy's Generator(seed={seed}) "
                f"when there are more{n_note}). ") if npts else ""
    cap = (f"The two most correlated margins ({i + 1} and {j + 1}, correlation {corr:+.3f} under the fit). "
           "Red curves enclose the regions of highest fitted density that hold 50%, 90%, 99% and 99.9% "
           "of the fitted probability (computed on the plotted grid). " + data_txt +
           "About 1 point in 1,000 should fall outside the 99.9% curve if the fit is right.")
    return _png(fig), cap


@_styled
def profile(prof, name):
    names = list(prof.phase_names)
    sec = np.asarray(prof.seconds, dtype=float)
    nranks = sec.shape[0]
    fig, ax = _fig(6.4, 3.4, bottom=0.9)
    ax = ax[0, 0]
    pos = np.arange(len(names))
    if 0 < nranks <= 8:
        w = 0.8 / nranks
        for r in range(nranks):
            ax.bar(pos - 0.4 + (r + 0.5) * w, sec[r], width=w, label=f"rank {r}")
        how = f"one bar per rank ({nranks} ranks)"
    else:
        ax.bar(pos, prof.mean, width=0.6, color="C0", label="mean over ranks")
        err = np.vstack([np.asarray(prof.mean) - prof.min, np.asarray(prof.max) - prof.mean])
        ax.errorbar(pos, prof.mean, yerr=np.clip(err, 0, None), fmt="none", ecolor="k", capsize=3,
                    label="min .. max over ranks")
        how = f"the mean over {nranks} ranks with the range from the fastest to the slowest rank"
    ax.set_xticks(pos, names, rotation=30, ha="right")
    ax.set_title(f"Profile: {name}")
    ax.set_xlabel("phase")
    ax.set_ylabel("wall time (s)")
    ax.legend(ncols=2)
    cap = (f"Wall-clock seconds spent in each phase of the fit, {how}. Unequal bars within a phase show "
           "load imbalance; 'total' is the whole fit, the other phases are parts of it.")
    return _png(fig), cap


@_styled
def loadings(B, D, name, max_rows=200):
    """The factor form Sigma = B B' + diag(D): B as a heat map (rows: the
    columns of the data, at most max_rows; columns: the factors) beside the
    specific variances D."""
    D = np.asarray(D, dtype=float).reshape(-1)
    d = D.size
    B = np.asarray(B if B is not None else np.zeros((d, 0)), dtype=float).reshape(d, -1)
    k = min(d, max_rows)
    r = B.shape[1]
    fig, ax = _fig(6.4, 3.8, ncols=2)
    a0, a1 = ax[0, 0], ax[0, 1]
    if r > 0:
        lim = float(np.max(np.abs(B[:k]))) or 1.0
        im = a0.imshow(B[:k], aspect="auto", cmap="RdBu_r", vmin=-lim, vmax=lim, interpolation="nearest")
        fig.colorbar(im, ax=a0, fraction=0.08)
        a0.set_xticks(range(r), [str(j + 1) for j in range(r)])
    else:
        a0.text(0.5, 0.5, "diag: no factors", ha="center", va="center", transform=a0.transAxes)
    a0.set_xlabel("factor")
    a0.set_ylabel("column")
    a0.set_title("loadings B")
    a1.barh(np.arange(k), D[:k], color="C1")
    a1.invert_yaxis()
    a1.set_xlabel("D_j")
    a1.set_title("specific variances D")
    more = f" (the first {k} of {d} columns)" if k < d else ""
    cap = (f"{name}: the factor form of the dispersion, Sigma = B B' + diag(D) (gauge |Sigma| = 1){more}. "
           "Left: the loadings of each column on each factor (B is defined up to a rotation of the factors); "
           "right: the specific variance of each column, what the factors leave unexplained.")
    return _png(fig), cap


# ------------------------------------------------------------------ sweeps
def _xaxis(fits):
    if all(f.row_start is not None for f in fits):
        return np.array([f.row_start for f in fits], dtype=float), "first row of the window (row index)"
    return np.array([f.window for f in fits], dtype=float), "window (index)"


@_styled
def param_paths(chain, fits, max_components=12):
    """fits: the chain's fits sorted by window."""
    x, xl = _xaxis(fits)
    d = fits[0].dim
    k = min(d, max_components)
    fig, axes = _fig(9.0, 5.4, 2, 3, top=0.6)
    def col(key, idx=None):
        out = []
        for f in fits:
            v = f.params.get(key)
            try:
                v = np.asarray(v, dtype=float)
                out.append(v[idx] if idx is not None else float(v))
            except (TypeError, ValueError, IndexError):
                out.append(np.nan)
        return np.asarray(out, dtype=float)
    panels = [("mu", "mu_j (data units)", "location mu"),
              ("gamma", "gamma_j (data units)", "skewness gamma"),
              ("sigma", "Sigma_jj (data units^2)", "dispersion diag(Sigma)"),
              ("p", "p (dimensionless)", "GIG index p"),
              ("a", "a (dimensionless)", "GIG a"),
              ("b", "b (dimensionless)", "GIG b")]
    for ax, (key, yl, title) in zip(axes.ravel(), panels):
        if key in ("mu", "gamma", "sigma"):
            for j in range(k):
                y = col(key, (j, j) if key == "sigma" else j)
                ax.plot(x, y, lw=0.7, alpha=0.85, label=f"j = {j + 1}")
            if k <= 6:
                ax.legend(ncols=2)
        else:
            y = col(key)
            if np.any(np.isfinite(y)):
                ax.plot(x, y, lw=0.9, color="C0")
                fin = y[np.isfinite(y)]
                if key in ("a", "b") and np.all(fin > 0) and fin.max() > 30 * fin.min():
                    _logy(ax)
            else:
                ax.text(0.5, 0.5, "not a parameter of this family", ha="center", transform=ax.transAxes)
        ax.set_title(title)
        ax.set_xlabel(xl)
        ax.set_ylabel(yl)
        _plain_x(ax)
    fig.suptitle(f"Parameter paths: {chain}")
    more = f" (the first {k} of {d} components)" if k < d else ""
    cap = (f"Each fitted parameter of the chain {chain} across its {len(fits)} windows{more}. "
           "Parameters are in the gauge |Sigma| = 1 (docs: the law is unchanged by "
           "(Sigma, gamma, a, b) -> (s Sigma, s gamma, s a, b / s)); p and the product a b do not depend "
           "on the gauge. Jumps between neighbouring windows point at a fit that moved to another "
           "optimum or to a boundary (see the status column).")
    return _png(fig), cap


@_styled
def window_fit_stats(chains):
    """chains: {chain: [fits sorted by window]}: log-likelihood and AIC."""
    fig, axes = _fig(9.0, 3.6, 1, 2, top=0.6)
    ax1, ax2 = axes[0]
    best = {}
    for fits in chains.values():
        for f in fits:
            if math.isfinite(f.aic):
                best[f.window] = min(best.get(f.window, math.inf), f.aic)
    for ci, (chain, fits) in enumerate(chains.items()):
        x, xl = _xaxis(fits)
        ll = np.array([f.loglik for f in fits])
        da = np.array([f.aic - best.get(f.window, math.nan) for f in fits])
        lab = f"{fits[0].family}: {chain}" if len(chain) < 40 else f"{fits[0].family}: {chain[:37]}..."
        ax1.plot(x, ll, lw=0.9, label=lab)
        ax2.plot(x, da, lw=0.9, label=lab)
    ax1.set_title("Log-likelihood per window")
    ax1.set_xlabel(xl)
    ax1.set_ylabel("log-likelihood (nats)")
    _plain_x(ax1)
    _plain_x(ax2)
    ax2.set_title("AIC per window, relative to the best family")
    ax2.set_xlabel(xl)
    ax2.set_ylabel("AIC - smallest AIC of the window (nats)")
    for ax in (ax1, ax2):
        if len(chains) <= 10:
            ax.legend()
    fig.suptitle("Model comparison across windows")
    cap = ("Left: the final log-likelihood of every family (one line per chain of warm-started fits) in "
           "each window. Right: each family's AIC minus the smallest AIC among the families in the same "
           "window: 0 is the family AIC prefers there, values above about 2 are clearly worse.")
    return _png(fig), cap


@_styled
def var_backtest(chain, fits, alphas, var, exc, n_next):
    """VaR forecasts per window (portfolio 0) and, where recorded, the
    exceedances in the next window against their expected count."""
    x, xl = _xaxis(fits)
    has_exc = exc is not None and np.any(np.isfinite(exc))
    fig, axes = _fig(9.0, 3.4, 1, 2 if has_exc else 1)
    ax1 = axes[0, 0]
    for k, a in enumerate(alphas):
        ax1.plot(x, var[:, k], lw=0.9, label=f"VaR {a:g}")
    _plain_x(ax1)
    ax1.set_title("VaR forecast for the next window (portfolio 1)")
    ax1.set_xlabel(xl)
    ax1.set_ylabel("VaR of the loss -w'X (data units)")
    ax1.legend()
    cap = (f"Chain {chain}: the Value-at-Risk of the first portfolio's loss at each level alpha, forecast "
           "from each window's fit for the next window.")
    if has_exc:
        ax2 = axes[0, 1]
        for k, a in enumerate(alphas):
            ax2.plot(x, exc[:, k], "o", ms=2.5, label=f"observed, {a:g}")
            if n_next is not None:
                ax2.plot(x, (1 - a) * n_next, "-", lw=0.8, color=f"C{k}", label=f"expected, {a:g}")
        _plain_x(ax2)
        ax2.set_title("VaR exceedances in the next window")
        ax2.set_xlabel(xl)
        ax2.set_ylabel("exceedances (count of rows)")
        ax2.legend()
        cap += (" Right: how many rows of the next window had a loss above the forecast VaR (dots) and the "
                "count expected if the forecast is right, (1 - alpha) times the rows of that window (lines); "
                "dots persistently above the line mean the fitted tails are too light.")
    return _png(fig), cap


# ------------------------------------------------------- portfolio optimisation
@_styled
def frontier(opts):
    """The efficient frontier(s) of `ghfit optimize` files: expected return
    against sd, VaR and ES of the same portfolios (one panel), and the weights
    of the chosen portfolio (the minimum-risk one) of the first file; with a
    frontier, also the weights along it."""
    o0 = opts[0]
    stacked = len(o0) > 1
    fig, axes = _fig(13.0 if stacked else 9.0, 3.6, 1, 3 if stacked else 2)
    ax = axes[0, 0]
    styles = {"sd": "-", "var": "--", "es": "-."}
    for i, o in enumerate(opts):
        tag = f"{o.measure}-optimal" + (f" ({os.path.basename(o.path)})" if len(opts) > 1 else "")
        for m in ("sd", "var", "es"):
            x = getattr(o, m)
            if not np.any(np.isfinite(x)):
                continue
            lw = 1.6 if m == o.measure else 0.8
            ax.plot(x, o.expected_return, styles[m], marker="o" if len(o) == 1 else None, ms=4, lw=lw,
                    color=f"C{i}", label=f"{m.upper() if m != 'sd' else 'sd'} of {tag}")
        c = o.chosen
        ax.plot([o.risk[c]], [o.expected_return[c]], "*", ms=10, color=f"C{i}")
    ax.set_xlabel("risk of the loss (sd, VaR, ES at alpha)")
    ax.set_ylabel("expected return")
    ax.set_title("Efficient frontier" + ("s" if len(opts) > 1 else ""))
    ax.legend()
    ax2 = axes[0, 1]
    w = o0.weights[o0.chosen]
    d = w.size
    idx = np.arange(d)
    ax2.bar(idx, w, color="C0")
    ax2.set_xlabel("asset")
    ax2.set_ylabel("weight")
    ax2.set_title(f"Weights of the chosen portfolio ({o0.measure}, {o0.type})")
    if d <= 20:
        ax2.set_xticks(idx)
    if stacked:
        ax3 = axes[0, 2]
        r = o0.expected_return
        pos = np.clip(o0.weights, 0, None)
        neg = np.clip(o0.weights, None, 0)
        ax3.stackplot(r, pos.T, lw=0)
        if np.any(neg < 0):
            ax3.stackplot(r, neg.T, lw=0)
        ax3.set_xlabel("expected return")
        ax3.set_ylabel("weights (stacked)")
        ax3.set_title("Weights along the frontier")
    cap = ("Left: expected return against risk for the portfolios of each optimize file; every point is "
           "measured three ways (sd, VaR and ES at the file's alpha, all of the loss); the thick line is the "
           "measure that was minimised, the star the chosen portfolio (the single one, or the frontier's "
           "minimum-risk point). Middle: the weights of the chosen portfolio of the first file.")
    if stacked:
        cap += " Right: how the weights change along the frontier (positive weights stacked up, negative down)."
    return _png(fig), cap


@_styled
def optimize_backtest(chain, returns, names):
    """Cumulative realised returns of the strategies of a chain's optimize backtest."""
    fig, axes = _fig(9.0, 3.2)
    ax = axes[0, 0]
    for k, n in enumerate(names):
        ax.plot(np.cumsum(returns[:, k]), lw=0.9, label=n)
    ax.set_xlabel("row after the windows (out of sample)")
    ax.set_ylabel("cumulative return")
    ax.set_title(f"Optimize backtest: {chain}")
    ax.legend()
    cap = (f"Chain {chain}: the sum of the realised returns of each strategy over the rows the next refit adds, "
           "each window's portfolio held until the next refit: the optimal portfolio under each window's fit, "
           "equal weights, and the Gaussian minimum-variance portfolio of each window's rows.")
    return _png(fig), cap


# ---------------------------------------------------------------- mixtures
@_styled
def selection(stem, rows):
    """rows: [(K, BIC, ICL)] of the fits of one sweep over K: both criteria against K."""
    rows = sorted(rows)
    K = np.array([r[0] for r in rows])
    bic = np.array([r[1] for r in rows], dtype=float)
    icl = np.array([r[2] for r in rows], dtype=float)
    fig, ax = _fig(6.0, 3.6)
    ax = ax[0, 0]
    ax.plot(K, bic, "o-", lw=1, label="BIC")
    ax.plot(K, icl, "s--", lw=1, label="ICL")
    for crit, arr, c in (("BIC", bic, "C0"), ("ICL", icl, "C1")):
        if np.any(np.isfinite(arr)):
            k = int(np.nanargmin(arr))
            ax.plot(K[k], arr[k], "*", ms=13, color=c)
    ax.set_xticks(K)
    ax.set_title(f"Selection over the number of components: {stem}")
    ax.set_xlabel("number of components K")
    ax.set_ylabel("criterion (nats; smaller is better)")
    ax.legend()
    kb = int(K[np.nanargmin(bic)]) if np.any(np.isfinite(bic)) else None
    ki = int(K[np.nanargmin(icl)]) if np.any(np.isfinite(icl)) else None
    cap = (f"BIC = k log n - 2 loglik and ICL = BIC - 2 sum_i log tau_i,c(i) (BIC plus twice the entropy of the "
           f"classification) of the fits {stem}_k<K>; a single law (K = 1) has ICL = BIC. Stars mark the "
           f"smallest values: BIC prefers K = {kb}, ICL prefers K = {ki}. ICL favours well separated "
           "components (clusters); BIC the density.")
    return _png(fig), cap


@_styled
def cluster_scatter(law, i, j, xy, cl, name, source):
    """Two coordinates of the rows coloured by their cluster, component means marked."""
    fig, ax = _fig(5.2, 4.6)
    ax = ax[0, 0]
    K = law.n_components
    n = xy.shape[0]
    for k in range(K):
        s = cl == k
        if np.any(s):
            ax.plot(xy[s, 0], xy[s, 1], ".", ms=2, alpha=0.6, color=f"C{k % 10}",
                    label=f"cluster {k} ({int(s.sum()):,}; pi = {law.prop[k]:.3g})")
    for k, c in enumerate(law.components):
        m, _ = c.moments()
        if np.all(np.isfinite(m[[i, j]])):
            ax.plot(m[i], m[j], "X", ms=10, mec="k", color=f"C{k % 10}")
    ax.set_title(f"{name}: clusters on margins {i + 1} and {j + 1}")
    ax.set_xlabel(f"X{i + 1} (data units)")
    ax.set_ylabel(f"X{j + 1} (data units)")
    if K <= 10:
        ax.legend(loc="upper left", fontsize=7)
    cap = (f"{n:,} rows ({source}) on the two most correlated coordinates ({i + 1} and {j + 1}) under the "
           "mixture, coloured by their cluster: the MAP component argmax_k tau_ik, as ghfit eval's /cluster. "
           "Crosses: each component's mean.")
    return _png(fig), cap
