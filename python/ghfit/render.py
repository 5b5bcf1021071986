"""The HTML of ghfit-report: summary and LR-test tables, sweep figures and
one section per fit, with every figure inline (data: PNG URLs) and inline
CSS; no scripts, nothing that a browser would fetch."""

from __future__ import annotations

import base64
import html
import math
import os
import re
import time

import numpy as np

from . import __version__, plots
from .lrt import lr_tests
from .errors import ReportError
from .law import factor_sigma
from .results import LazyDataset

MAX_MARGINS = 12
SE_GROUP = "se"
SPECIAL_GROUPS = ("params", "moments", "profile")
EXCEED_NAMES = ("exceedances", "n_exceedances", "n_exceed", "exceed", "exceedance_count")
NNEXT_NAMES = ("n_next", "n_test", "n_backtest", "next_n", "n_forecast")


# ------------------------------------------------------------------ HTML bits
CSS = """
body{font-family:sans-serif;font-size:14px;margin:1.5em auto;max-width:1240px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.3em;border-bottom:1px solid #ccc;margin-top:2em}h3{font-size:1.1em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0;font-size:12px}
th,td{border:1px solid #ccc;padding:2px 6px;text-align:right;white-space:nowrap}
th{background:#f0f0f0}td.l,th.l{text-align:left}td.w{white-space:normal;overflow-wrap:anywhere;min-width:9em;max-width:30em}
div.scroll{max-height:32em;overflow:auto;border:1px solid #ddd;display:inline-block;max-width:100%}
figure{margin:1em 0}figure img{max-width:100%;border:1px solid #eee}
figcaption,caption{font-size:12px;color:#444;max-width:900px;text-align:left;caption-side:bottom;padding-top:4px}
pre{background:#f7f7f7;padding:.5em;font-size:12px;overflow:auto}
.bad{color:#a00}.note{color:#555;font-size:12px}
"""


def esc(x) -> str:
    return html.escape(str(x), quote=True)


def fmt(v, digits=6) -> str:
    if v is None:
        return ""
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}" if abs(int(v)) >= 10000 else str(int(v))
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if v != 0 and (abs(v) >= 1e7 or abs(v) < 1e-4):
            return f"{v:.{digits - 1}e}"
        return f"{v:.{digits}g}"
    return str(v)


def table(tid, header, rows, caption=None, left=(), scroll=False, wrap=()) -> str:
    """rows: lists of already formatted cells (strings; HTML-escaped here
    unless given as ('html', s)); columns in `left` are left-aligned, those
    in `wrap` wrap long text."""
    def cell(tag, i, c):
        cls = " ".join(k for k, s in (("l", left), ("w", wrap)) if i in s)
        cls = f' class="{cls}"' if cls else ""
        if isinstance(c, tuple) and c and c[0] == "html":
            return f"<{tag}{cls}>{c[1]}</{tag}>"
        return f"<{tag}{cls}>{esc(c)}</{tag}>"
    out = [f'<table id="{esc(tid)}">']
    if caption:
        out.append(f"<caption>{caption}</caption>")
    out.append("<thead><tr>" + "".join(cell("th", i, h) for i, h in enumerate(header)) + "</tr></thead><tbody>")
    for r in rows:
        out.append("<tr>" + "".join(cell("td", i, c) for i, c in enumerate(r)) + "</tr>")
    out.append("</tbody></table>")
    s = "".join(out)
    return f'<div class="scroll">{s}</div>' if scroll else s


def figure(png_cap, alt) -> str:
    png, cap = png_cap
    b64 = base64.b64encode(png).decode("ascii")
    return (f'<figure><img alt="{esc(alt)}" src="data:image/png;base64,{b64}">'
            f"<figcaption>{esc(cap)}</figcaption></figure>")


def anchor(fit, index) -> str:
    return f"fit-{index}"


# ------------------------------------------------------------ report parts
class Report:
    def __init__(self, opts, results, data):
        self.opts, self.results, self.data = opts, results, data
        self.fits = [f for r in results for f in r.fits.values()]
        self.multi = len(results) > 1
        self.tests = lr_tests(self.fits)
        self.sections = self._choose_sections()
        self.index = {id(f): i for i, f in enumerate(self.fits)}

    # which fits get a section of their own
    def _choose_sections(self):
        if self.opts.fit:
            want, out = set(self.opts.fit), []
            for f in self.fits:
                if f.name in want or f"{f.file}:{f.name}" in want:
                    out.append(f)
            found = {f.name for f in out} | {f"{f.file}:{f.name}" for f in out}
            missing = [w for w in self.opts.fit if w not in found]
            if missing:
                raise ReportError(f"--fit {missing[0]}: no such fit in the result files")
            return out
        if len(self.fits) <= self.opts.max_fits:
            return list(self.fits)
        out = []
        for r in self.results:
            last = {}
            for f in r.fits.values():
                if f.window is None:
                    out.append(f)
                elif f.chain not in last or f.window > last[f.chain].window:
                    last[f.chain] = f
            out.extend(last.values())
        return out[: self.opts.max_fits]

    def build(self) -> str:
        title = self.opts.title or ("ghfit report: " + ", ".join(os.path.basename(r.path) for r in self.results))
        parts = [f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
                 f"<title>{esc(title)}</title><style>{CSS}</style></head><body>",
                 f"<h1>{esc(title)}</h1>", self.files_part(), self.summary_part(), self.lrt_part()]
        parts.append(self.selection_part())
        for r in self.results:
            parts.append(self.sweep_part(r))
        parts.append(self.optimize_part())
        parts.append(self.fits_part())
        parts.append(f'<p class="note">Written by ghfit-report {esc(__version__)} on '
                     f'{esc(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))}.</p></body></html>')
        return "\n".join(p for p in parts if p)

    def files_part(self):
        out = ["<h2>Result files</h2>"]
        keys = ("ghfit_version", "git_commit", "created", "n_ranks", "backend", "command_line")
        rows = []
        for r in self.results:
            rows.append([r.path, str(len(r.fits))] + [fmt(r.attrs.get(k, "")) for k in keys])
        out.append(table("files", ["file", "fits"] + list(keys), rows, left={0, 7}, wrap={0, 7}))
        for r in self.results:
            if r.config:
                out.append(f"<details><summary>Effective configuration of {esc(r.path)}</summary>"
                           f"<pre>{esc(r.config)}</pre></details>")
            extra = {k: g for k, g in r.groups.items() if k not in ("fits",)}
            for k, g in extra.items():
                out.append(f"<h3>{esc(r.path)}: /{esc(k)}</h3>" + group_table(f"root-{k}", g))
        if self.data is not None:
            d = self.data
            out.append(f"<p>Data: <code>{esc(d.path)}:{esc(d.dataset)}</code>, {d.n:,} rows x {d.d} columns. "
                       + ("Every fit is compared with all rows." if self.opts.all_rows else
                          "Each fit is compared with the rows it was fitted on, where the result file records "
                          "them (job windows, <code>--rows</code>); otherwise with all rows.")
                       + f" Windows longer than {self.opts.max_rows:,} rows are subsampled: "
                       f"{min(4096, self.opts.max_rows):,} equal strata, one run of consecutive rows from each "
                       f"at an offset drawn with numpy's Generator(PCG64({self.opts.seed})); rows with NaN or "
                       "Inf are left out.</p>")
        return "\n".join(out)

    def summary_part(self):
        by_restricted = {}
        for t in self.tests:
            by_restricted.setdefault(id(t.restricted), []).append(t)
        sect = {id(f) for f in self.sections}
        mix = any(f.is_mixture for f in self.fits)  # the selection over K: K and ICL beside BIC
        header = (["file"] if self.multi else []) + [
            "fit", "family", "symmetric", "n", "d", "log-likelihood", "AIC", "BIC"] + (
            ["K", "ICL"] if mix else []) + ["iterations", "converged", "status", "LR tests (this fit restricted)"]
        rows = []
        for i, f in enumerate(self.fits):
            name = (("html", f'<a href="#{anchor(f, i)}">{esc(f.name)}</a>') if id(f) in sect else f.name)
            lr = "; ".join(f"vs {t.full.name}: LR {t.statistic:.4g}, p {t.p_value:.3g}"
                           for t in by_restricted.get(id(f), []))
            status = f.status
            if f.failed:
                status = ("html", f'<span class="bad">{esc(status)}</span>')
            sym = "" if f.family == "gauss" else fmt(f.symmetric)
            rows.append(([os.path.basename(f.file)] if self.multi else []) + [
                name, f.family, sym, fmt(f.n_obs), fmt(f.dim), fmt(f.loglik, 12), fmt(f.aic, 10),
                fmt(f.bic, 10)] + ([str(f.n_components), fmt(f.icl, 10)] if mix else []) + [
                fmt(f.n_iter), fmt(f.converged), status, lr])
        off = 1 if self.multi else 0
        off2 = off + (2 if mix else 0)
        cap = ("One row per fit, in file order. Log-likelihood: total over the fitted rows (natural log); "
               "AIC = 2k - 2 loglik and BIC = k log n - 2 loglik (smaller is better, comparable only between "
               "fits of the same rows). The last column lists the likelihood-ratio tests in which this fit is "
               "the restricted model (details in the next table).")
        if any(f.weighted for f in self.fits):
            cap += " Weighted fits report the weighted log-likelihood."
        if mix:
            cap += (" K: the number of mixture components (ghfit fit --components K); ICL = BIC - 2 sum_i "
                    "log tau_i,c(i), BIC plus twice the classification entropy (a single law: ICL = BIC). "
                    "Mixtures get no likelihood-ratio test: between different K the ratio has no chi-square law.")
        return ("<h2>Summary</h2>" + table("summary", header, rows, cap,
                                           left={0, off, off + 1, off2 + 10, off2 + 11}, scroll=len(rows) > 30,
                                           wrap={off2 + 10, off2 + 11}))

    def lrt_part(self):
        rows = []
        for t in self.tests:
            rows.append([t.restricted.name, t.full.name, str(t.df), fmt(t.statistic, 6), fmt(t.p_value, 4),
                         t.reference, t.note])
        cap = ("Likelihood-ratio tests between nested fits of the same data (same data file, dataset and "
               "row window where the file records them, same n and d); for each model the best fit is used. "
               "LR = 2 (loglik of the larger model - loglik of the restricted one). Symmetric (gamma = 0) "
               "against asymmetric: chi2 with d degrees of freedom. NIG (p = -1/2), hyperbolic "
               "(p = (d+1)/2) and GH with p fixed against GH: chi2(1). VG (b = 0) and Student-t (a = 0) "
               "against GH restrict a parameter to the boundary of its domain: the reference law is the "
               "50:50 mixture of chi2(0) and chi2(1), p-value = P(chi2(1) > LR) / 2 (Self and Liang, "
               "JASA 82 (1987) 605-610). The Gaussian is a limit of these families at infinite parameters, "
               "not a nested model with such a limit law: it gets no LR test. Weighted and failed fits are "
               "not tested. A small p-value rejects the restricted model.")
        if not rows:
            return ("<h2>Likelihood-ratio tests</h2><p>No nested pairs of fits of the same data were found. "
                    f"</p><p class=\"note\">{esc(cap)}</p>")
        return "<h2>Likelihood-ratio tests</h2>" + table(
            "lrt", ["restricted fit", "larger fit", "df", "LR", "p-value", "reference law", "note"], rows,
            esc(cap), left={0, 1, 5, 6}, scroll=len(rows) > 30, wrap={6})

    # ------------------------------------------------- selection over K
    def selection_part(self):
        """BIC and ICL against K for each set of fits <stem>_k<K> of one file
        (a sweep over K) that holds a mixture and at least two values of K."""
        out = []
        for r in self.results:
            groups = {}
            for f in r.fits.values():
                m = re.match(r"^(.*)_k(\d+)$", f.name)
                if m and not f.failed:
                    groups.setdefault(m.group(1), {})[int(m.group(2))] = f
            for stem, byk in groups.items():
                if len(byk) < 2 or not any(f.is_mixture for f in byk.values()):
                    continue
                rows = [(k, f.bic, f.icl) for k, f in sorted(byk.items())]
                if not out:
                    out.append("<h2>Number of components</h2>")
                tid = f"selection-{len(out)}"
                out.append(table(tid, ["fit", "K", "log-likelihood", "BIC", "ICL"],
                                 [[byk[k].name, str(k), fmt(byk[k].loglik, 12), fmt(b, 10), fmt(c, 10)]
                                  for k, b, c in rows],
                                 esc(f"The fits of {os.path.basename(r.path)} named {stem}_k<K> (a sweep over the "
                                     "number of components K; K = 1 a single law, whose ICL is its BIC)."),
                                 left={0}))
                out.append(figure(plots.selection(stem, rows), f"BIC and ICL against K: {stem}"))
        return "\n".join(out)

    # -------------------------------------------------------------- sweeps
    def sweep_part(self, r):
        chains = {}
        for f in r.fits.values():
            if f.window is not None:
                chains.setdefault(f.chain, []).append(f)
        chains = {c: sorted(v, key=lambda f: f.window) for c, v in chains.items() if len(v) >= 2}
        if not chains:
            return ""
        n = sum(len(v) for v in chains.values())
        out = [f"<h2>Sweep: {esc(os.path.basename(r.path))}</h2>",
               f"<p>{len(chains)} chain(s) of windowed fits, {n} fits in all.</p>"]
        ok = {c: [f for f in v if not f.failed] for c, v in chains.items()}
        ok = {c: v for c, v in ok.items() if len(v) >= 2}
        if ok:
            out.append(figure(plots.window_fit_stats(ok), "Log-likelihood and AIC per family across windows"))
        shown = list(ok.items())[:8]
        for chain, fits in shown:
            out.append(figure(plots.param_paths(chain, fits), f"Parameter paths across windows: {chain}"))
        if len(ok) > len(shown):
            out.append(f'<p class="note">Parameter paths are drawn for the first {len(shown)} of '
                       f"{len(ok)} chains.</p>")
        for chain, fits in shown:
            rk = risk_series(fits)
            if rk is not None:
                out.append(figure(plots.var_backtest(chain, fits, *rk), f"VaR forecasts and exceedances across windows: {chain}"))
        bt = r.groups.get("backtest")
        for chain, g in (bt.groups.items() if bt is not None else []):
            og = g.groups.get("optimize")
            ret = og.datasets.get("returns") if og is not None else None
            if ret is None:
                continue
            ret = ret.read() if isinstance(ret, LazyDataset) else np.asarray(ret)
            if ret.ndim == 2 and ret.shape[0] > 0:
                names = [s.strip() for s in str(og.attrs.get("strategies", "")).split(",")]
                out.append(figure(plots.optimize_backtest(chain, ret, names), f"Optimize backtest: {chain}"))
        return "\n".join(out)

    # ------------------------------------------------------- optimisation
    def optimize_part(self):
        opts = getattr(self.opts, "optimize_files", None) or []
        if not opts:
            return ""
        out = ["<h2>Portfolio optimisation</h2>"]
        rows = []
        for o in opts:
            c = o.chosen
            rows.append([o.path, o.fit, o.measure, fmt(o.alpha), o.type, str(len(o)), fmt(o.expected_return[c], 8),
                         fmt(o.risk[c], 8), f"{int(np.nansum(o.converged))}/{len(o)}",
                         str(o.attrs.get("constraints", ""))])
        out.append(table("optimize", ["file", "fit", "measure", "alpha", "type", "points", "return (chosen)",
                                      "risk (chosen)", "converged", "constraints"], rows,
                         "One row per ghfit optimize file (--optimize). The chosen portfolio is the single one, or "
                         "a frontier's minimum-risk point.", left={0, 1, 2, 4, 9}, wrap={0, 9}))
        out.append(figure(plots.frontier(opts), "Efficient frontier and weights"))
        return "\n".join(out)

    # ------------------------------------------------------------ per fit
    def fits_part(self):
        out = ["<h2>Fits</h2>"]
        if len(self.sections) < len(self.fits):
            out.append(f'<p class="note">Sections are drawn for {len(self.sections)} of {len(self.fits)} fits: '
                       "with more than --max-fits fits, the fits outside sweeps and the last window of each "
                       "sweep chain (choose others with --fit NAME).</p>")
        for f in self.sections:
            out.append(self.fit_section(f))
        return "\n".join(out)

    def fit_section(self, f):
        i = self.index[id(f)]
        out = [f'<section id="{anchor(f, i)}"><h3>{esc(f.name)}'
               + (f" <small>({esc(os.path.basename(f.file))})</small>" if self.multi else "") + "</h3>"]
        attrs = [[k, fmt(v, 12)] for k, v in f.attrs.items() if k != "description"]
        if f.rows is not None:
            s, c = f.rows
            attrs.append(["fitted rows", f"{s} .. {s + c - 1}" if c is not None else f"{s} .. end"])
        out.append(table(f"attrs-{i}", ["attribute", "value"], attrs, left={0, 1}))
        if f.trace.size >= 2 and np.isfinite(f.trace[-1]):
            out.append(figure(plots.trace(f), f"EM trace of {f.name}: log-likelihood gap to the final value"))
        if f.params:
            out.append(self.params_part(f, i))
        law_ok = f.has_law()
        if f.is_mixture:
            out.append(self.mixture_part(f, i, law_ok))
        elif not law_ok and not f.failed:
            out.append('<p class="bad">The parameters do not define a law: no density plots.</p>')
        if law_ok and not f.is_mixture:
            out.append(self.data_plots(f))
        if f.profile is not None and len(f.profile.phase_names) and f.profile.seconds.size:
            out.append(figure(plots.profile(f.profile, f.name), f"Profile of {f.name}: seconds per phase and rank"))
        for gname, g in f.groups.items():
            if gname in SPECIAL_GROUPS:
                continue
            out.append(f"<h4>{esc(gname)}/</h4>" + group_table(f"{gname}-{i}", g))
        extra = {k: v for k, v in f.datasets.items() if k != "loglik"}
        if extra:
            out.append("<h4>other datasets</h4>" + group_table(f"datasets-{i}", _Bag(extra)))
        out.append("</section>")
        return "\n".join(out)

    def params_part(self, f, i):
        p, se = f.params, (f.se or {})
        d = f.dim
        moments = f.moments
        has_se = bool(se)

        def val(dct, key, idx=None):
            v = dct.get(key)
            if v is None or isinstance(v, LazyDataset):
                return None
            try:
                a = np.asarray(v, dtype=float)
                return float(a[idx]) if idx is not None else float(a)
            except (TypeError, ValueError, IndexError):
                return None

        header = ["j", "mu"] + (["SE(mu)"] if has_se else []) + ["gamma"] + (["SE(gamma)"] if has_se else []) \
            + ["Sigma_jj"] + (["SE(Sigma_jj)"] if has_se else []) + ["E[X_j]", "sd(X_j)"]
        rows = []
        for j in range(d):
            r = [str(j + 1), fmt(val(p, "mu", j))]
            if has_se:
                r.append(fmt(val(se, "mu", j)))
            r.append(fmt(val(p, "gamma", j)))
            if has_se:
                r.append(fmt(val(se, "gamma", j)))
            r.append(fmt(val(p, "sigma", (j, j))))
            if has_se:
                r.append(fmt(val(se, "sigma", (j, j))))
            c = val(moments, "cov", (j, j))
            r += [fmt(val(moments, "mean", j)), fmt(math.sqrt(c) if c is not None and c >= 0 else c)]
            rows.append(r)
        out = [table(f"vec-{i}", header, rows, "Location, skewness and the diagonal of the dispersion matrix "
                     "(gauge |Sigma| = 1), with the mean and standard deviation of each margin under the "
                     "fitted law (NaN where a moment is infinite)." + (" SE: standard errors from the "
                                                                        "file's se/ group." if has_se else ""))]
        k = min(d, MAX_MARGINS)
        if "sigma" not in p and "D" in p:  # a factor-form fit with d > 1000 stores no params/sigma
            sig = factor_sigma(p.get("B"), p["D"])
        else:
            sig = np.asarray(p.get("sigma", np.full((d, d), np.nan)), dtype=float).reshape(d, d)
        srows = [[str(a + 1)] + [fmt(sig[a, b], 5) for b in range(k)] for a in range(k)]
        more = f" (the first {k} of {d} rows and columns)" if k < d else ""
        out.append(table(f"sigma-{i}", ["Sigma"] + [str(b + 1) for b in range(k)], srows,
                         f"The dispersion matrix Sigma{more}."))
        if "D" in p:
            out.append(figure(plots.loadings(p.get("B"), p["D"], f.name),
                              f"Factor loadings B and specific variances D of {f.name}"))
        if f.family != "gauss":
            scal = []
            for key, what in (("p", "GIG index p"), ("a", "GIG a (multiplies y)"), ("b", "GIG b (multiplies 1/y)")):
                scal.append([key, what, fmt(val(p, key), 10)] + ([fmt(val(se, key))] if has_se else []))
            a_, b_ = val(p, "a"), val(p, "b")
            sab = math.sqrt(a_ * b_) if a_ is not None and b_ is not None and a_ >= 0 and b_ >= 0 else None
            scal.append(["sqrt(ab)", "gauge-free concentration", fmt(sab, 10)] + ([""] if has_se else []))
            out.append(table(f"gig-{i}", ["parameter", "meaning", "value"] + (["SE"] if has_se else []), scal,
                             "The GIG subordinator Y ~ GIG(p, a, b), density proportional to "
                             "y^(p-1) exp(-(a y + b/y)/2).", left={0, 1}))
        if has_se:
            reason = (f.groups.get(SE_GROUP).attrs.get("reason") if f.groups.get(SE_GROUP) else None)
            if reason:
                out.append(f'<p class="note">Standard errors: {esc(reason)}</p>')
        return "\n".join(out)

    def mixture_part(self, f, i, law_ok):
        """A mixture fit: its proportions and components, and the clusters of
        two coordinates (the data's clusters from --scores or computed from the
        fit, else draws from the fit)."""
        try:
            law = f.law
        except (ValueError, KeyError) as e:
            return f'<p class="bad">The mixture cannot be read: {esc(e)}.</p>'
        d = f.dim
        k_show = min(d, 4)
        rows = []
        for k, c in enumerate(law.components):
            m, _ = c.moments()
            rows.append([str(k), fmt(law.prop[k], 6)] + [fmt(c.mu[j], 5) for j in range(k_show)]
                        + [fmt(m[j], 5) for j in range(k_show)]
                        + ([] if c.is_gauss else [fmt(c.p, 6), fmt(c.a, 6), fmt(c.b, 6)]))
        gauss = law.is_gauss
        header = (["k", "proportion"] + [f"mu_{j + 1}" for j in range(k_show)] + [f"E[X_{j + 1}]" for j in range(k_show)]
                  + ([] if gauss else ["p", "a", "b"]))
        more = f" (coordinates 1 to {k_show} of {d})" if k_show < d else ""
        out = [table(f"mix-{i}", header, rows,
                     esc(f"The {law.n_components} components (components/<k>/params{more}) and their "
                         "proportions; each Sigma_k in its own |Sigma| = 1 gauge."))]
        st = f.starts
        if st.get("loglik") is not None and np.size(st["loglik"]):
            out.append(f'<p class="note">{np.size(st["loglik"])} starts; final log-likelihoods: '
                       + esc(", ".join(fmt(v, 10) for v in np.ravel(st["loglik"]))) + ".</p>")
        if not law_ok:
            out.append('<p class="bad">The parameters do not define a law: no cluster plot.</p>')
            return "\n".join(out)
        if d < 2:
            return "\n".join(out)
        cov = f.moments.get("cov")
        cov = np.asarray(cov, dtype=float) if cov is not None else law.moments()[1]
        if cov.shape != (d, d) or not np.all(np.isfinite(cov)):
            cov = sum(p * c.sigma for p, c in zip(law.prop, law.components))
        s = np.sqrt(np.diag(cov))
        r = np.abs(cov / np.outer(s, s))
        np.fill_diagonal(r, -1.0)
        a, b = sorted(int(v) for v in np.unravel_index(int(np.argmax(r)), r.shape))
        xy = cl = None
        sc = getattr(self.opts, "scores_data", None)
        if self.data is not None:
            start, count = (0, None) if (self.opts.all_rows or f.rows is None) else f.rows
            if sc is not None and sc["fit_name"] == f.name and (count or self.data.n - start) <= self.opts.max_rows:
                import h5py

                end = self.data.n if count is None else start + count
                with h5py.File(self.data.path, "r") as fh:
                    x = np.asarray(fh[self.data.dataset][start:end], dtype=float)
                cl = np.asarray(sc["cluster"][start:end])
                keep = (cl >= 0) & np.all(np.isfinite(x), axis=1)
                xy, cl, source = x[keep][:, [a, b]], cl[keep], f"the data, clusters from {sc['path']}"
            else:
                sample = self.data.rows(start, count, self.opts.max_rows, self.opts.seed)
                if sample.x.shape[0]:
                    cl = law.cluster(sample.x)
                    keep = cl >= 0
                    xy, cl, source = sample.x[keep][:, [a, b]], cl[keep], "the data, clusters computed from the fit"
        if xy is None:
            x = law.sample(2000, seed=self.opts.seed)
            cl = law.cluster(x)
            xy, source = x[:, [a, b]], f"2,000 draws from the fit (seed {self.opts.seed}), clusters computed from it"
        if xy.shape[0] > 5000:
            sel = np.sort(np.random.default_rng(self.opts.seed).choice(xy.shape[0], 5000, replace=False))
            xy, cl = xy[sel], cl[sel]
            source += "; a random subset of 5,000"
        out.append(figure(plots.cluster_scatter(law, a, b, xy, cl, f.name, source),
                          f"clusters of {f.name} on margins {a + 1} and {b + 1}"))
        return "\n".join(out)

    def data_plots(self, f):
        law = f.law
        out = []
        sample = None
        note = ""
        if self.data is not None:
            start, count = (0, None) if (self.opts.all_rows or f.rows is None) else f.rows
            sample = self.data.rows(start, count, self.opts.max_rows, self.opts.seed)
            if sample.subsampled:
                note = f"; a subsample of the {sample.n_window:,}-row window"
            if sample.n_nonfinite:
                note += f"; {sample.n_nonfinite:,} rows with NaN/Inf left out"
            if sample.x.shape[0] >= 2:
                k = min(f.dim, MAX_MARGINS)
                if k < f.dim:
                    out.append(f'<p class="note">Margins 1 to {k} of {f.dim} are drawn.</p>')
                for j in range(k):
                    out.append(figure(plots.margin(law, sample.x[:, j], j, f.name, note),
                                      f"QQ plot and density against a histogram, margin {j + 1} of {f.name}"))
        if f.dim >= 2:
            i, j, corr = plots.most_correlated(law, f.moments.get("cov"))
            xy = sample.x[:, [i, j]] if sample is not None and sample.x.shape[0] else None
            out.append(figure(plots.contour(law, i, j, corr, f.name, xy, self.opts.seed, note),
                              f"pairwise contour of margins {i + 1} and {j + 1} of {f.name}"))
        return "\n".join(out)


class _Bag:
    """A group-like view of loose datasets."""

    def __init__(self, datasets):
        self.datasets, self.attrs, self.groups = datasets, {}, {}


def _summary_of(v):
    if isinstance(v, LazyDataset):
        n = int(np.prod(v.shape))
        if n > 10_000_000 or v.dtype.startswith(("|S", "object")):
            return f"shape {v.shape}, {v.dtype} (not loaded)", v.shape
        v = v.read()
    if isinstance(v, (str, int, float)):
        return fmt(v, 10), ()
    if isinstance(v, list):
        return ", ".join(map(str, v[:24])) + (" ..." if len(v) > 24 else ""), (len(v),)
    a = np.asarray(v)
    if a.dtype.names:
        return f"table of {a.size} rows ({', '.join(a.dtype.names)})", a.shape
    if a.size <= 24:
        if a.dtype.kind in "fiu":
            return ", ".join(fmt(x, 6) for x in a.ravel().tolist()), a.shape
        return ", ".join(map(str, a.ravel().tolist())), a.shape
    if a.dtype.kind in "fiu":
        fin = a[np.isfinite(a)] if a.dtype.kind == "f" else a.ravel()
        if fin.size == 0:
            return "all NaN", a.shape
        return (f"min {fmt(fin.min())}, mean {fmt(float(fin.mean()))}, max {fmt(fin.max())}"
                + (f" ({a.size - fin.size} non-finite)" if fin.size < a.size else "")), a.shape
    return f"{a.size} values", a.shape


def group_table(tid, g, prefix="") -> str:
    rows = []

    def walk(grp, pre):
        for k, v in grp.attrs.items():
            if k != "description":
                rows.append([f"{pre}@{k}", "", fmt(v, 10) if not isinstance(v, np.ndarray) else _summary_of(v)[0]])
        for k, v in grp.datasets.items():
            s, shape = _summary_of(v)
            rows.append([pre + k, "x".join(map(str, shape)) if shape else "scalar", s])
        for k, sub in grp.groups.items():
            walk(sub, f"{pre}{k}/")

    walk(g, prefix)
    return table(tid, ["name", "shape", "values"], rows, left={0, 2}, wrap={2})


def risk_series(fits):
    """(alphas, var[W][K], exceedances[W][K] or None, n_next[W] or None) of
    portfolio 1 over a chain's windows, or None without risk results."""
    alphas, var, exc, nn = None, [], [], []
    for f in fits:
        g = f.risk
        if g is None or "var" not in g.datasets or "alpha" not in g.datasets:
            return None
        a = np.atleast_1d(np.asarray(g.datasets["alpha"], dtype=float))
        v = np.asarray(g.datasets["var"], dtype=float).reshape(-1, a.size)
        if alphas is None:
            alphas = a
        elif a.shape != alphas.shape or not np.allclose(a, alphas):
            return None
        var.append(v[0])
        e = next((g.datasets[k] for k in EXCEED_NAMES if k in g.datasets), None)
        exc.append(np.asarray(e, dtype=float).reshape(-1, a.size)[0] if e is not None else np.full(a.size, np.nan))
        n = next((g.datasets.get(k, g.attrs.get(k)) for k in NNEXT_NAMES
                  if k in g.datasets or k in g.attrs), None)
        nn.append(float(np.asarray(n).ravel()[0]) if n is not None else np.nan)
    exc = np.array(exc)
    nn = np.array(nn)
    return (alphas, np.array(var), exc if np.any(np.isfinite(exc)) else None,
            nn if np.any(np.isfinite(nn)) else None)


# -------------------------------------------------------------- the command
