"""ghfit-report: one self-contained HTML file (inline PNG images, inline CSS,
no scripts, nothing fetched) from one or more ghfit result files.

    ghfit-report RESULT.h5 [MORE.h5 ...] [--data X.h5] --out report.html

Exit status: 0 written; 2 bad input or usage (one `ghfit-report: error:`
line); 1 run-time failure.  The HTML is written to a temporary file beside
--out and renamed into place, so a failed run leaves no partial report.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import warnings

import numpy as np

from . import __version__
from .data import DataError, DataSet
from .errors import ReportError
from .results import ResultError, read, read_optimize


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ReportError(message)


def _parser():
    p = _Parser(prog="ghfit-report", description=(
        "Write one self-contained HTML report (inline images, nothing fetched from the network) "
        "for ghfit result files: summary table, likelihood-ratio tests, EM traces, parameters with "
        "standard errors, QQ plots and densities against the data (--data), pairwise contours, "
        "profiles, and parameter paths for sweeps; for mixture fits, the components, BIC and ICL "
        "against K, and the clusters of two coordinates."))
    p.add_argument("results", nargs="+", metavar="RESULT.h5", help="ghfit result files")
    p.add_argument("--out", required=True, metavar="REPORT.html", help="the HTML file to write")
    p.add_argument("--data", metavar="X.h5", help="the fitted data set: QQ plots, histograms, data in contours")
    p.add_argument("--dataset", metavar="NAME",
                   help="dataset in --data (default: the one the fits record, else /X)")
    p.add_argument("--all-rows", action="store_true",
                   help="compare every fit with all rows of --data, not the row window it records")
    p.add_argument("--max-rows", type=int, default=1_000_000, metavar="M",
                   help="rows of a window read whole; longer windows are subsampled (default 1000000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the subsampling (default 0)")
    p.add_argument("--fit", action="append", default=[], metavar="NAME",
                   help="draw a section for this fit (repeatable; default: see --max-fits)")
    p.add_argument("--max-fits", type=int, default=12, metavar="K",
                   help="at most K per-fit sections when --fit is not given (default 12)")
    p.add_argument("--scores", metavar="SCORES.h5",
                   help="a ghfit eval file of --data under a mixture fit: its /cluster colours the rows of "
                        "that fit's cluster plot (default: clusters computed from the fit)")
    p.add_argument("--optimize", action="append", default=[], metavar="OPT.h5",
                   help="a file of ghfit optimize: its efficient frontier and weights (repeatable)")
    p.add_argument("--title", default=None, help="the report's title")
    p.add_argument("--version", action="version", version=f"ghfit-report {__version__}")
    return p


def _check_out(out, inputs):
    path = os.path.abspath(out)
    if os.path.isdir(path):
        raise ReportError(f"--out {out}: is a directory")
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        why = "is not a directory" if os.path.exists(parent) else "does not exist"
        raise ReportError(f"--out {out}: cannot write: {parent} {why}")
    if not os.access(parent, os.W_OK):
        raise ReportError(f"--out {out}: cannot write: directory {parent} is not writable")
    if os.path.exists(path):
        if not os.path.isfile(path):
            raise ReportError(f"--out {out}: exists and is not a regular file")
        for i in inputs:
            if i and os.path.exists(i) and os.path.samefile(i, path):
                raise ReportError(f"--out {out}: is the input file {i}")
    try:
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=parent)
    except OSError as e:
        raise ReportError(f"--out {out}: cannot write: {e.strerror}") from None
    return path, fd, tmp


def _load(opts):
    results = []
    for p in opts.results:
        try:
            r = read(p)
        except ResultError as e:
            raise ReportError(str(e)) from None
        if not r.fits:
            raise ReportError(f"{p}: no fits in /fits (an empty sweep or job)")
        results.append(r)
    data = None
    if opts.data:
        dataset = opts.dataset
        if dataset is None:
            rec = [f.data_dataset for r in results for f in r.fits.values() if f.data_dataset]
            dataset = rec[0] if rec else "/X"
            try:
                import h5py

                with h5py.File(opts.data, "r") as fh:
                    if dataset not in fh:
                        dataset = "/X"
            except OSError:
                pass
        try:
            data = DataSet(opts.data, dataset)
        except DataError as e:
            raise ReportError(f"--data {e}") from None
        for r in results:
            for f in r.fits.values():
                if f.dim != data.d:
                    raise ReportError(f"--data {opts.data}:{dataset} has {data.d} columns but the fit "
                                      f"/fits/{f.name} in {r.path} has dimension {f.dim}")
                if not opts.all_rows and f.rows is not None:
                    s, c = f.rows
                    end = s + (c if c is not None else 0)
                    if s >= data.n or end > data.n:
                        raise ReportError(f"--data {opts.data}:{dataset} has {data.n} rows but the fit "
                                          f"/fits/{f.name} in {r.path} used rows {s}..{end - 1} "
                                          "(--all-rows compares with all rows)")
    opts.scores_data = None
    if opts.scores:
        if data is None:
            raise ReportError("--scores: needs --data (the rows the scores file scored)")
        import h5py

        try:
            with h5py.File(opts.scores, "r") as fh:
                if "ghfit_scores_version" not in fh.attrs:
                    raise ReportError(f"--scores {opts.scores}: not a ghfit eval file (no root attribute "
                                      "ghfit_scores_version)")
                if "cluster" not in fh:
                    raise ReportError(f"--scores {opts.scores}: no /cluster (ghfit eval writes it under a mixture fit)")
                cl = np.asarray(fh["cluster"][()])
                name = fh.attrs.get("fit_name", "")
                name = name.decode() if isinstance(name, bytes) else str(name)
        except OSError as e:
            raise ReportError(f"--scores {opts.scores}: cannot read it ({e})") from None
        if cl.shape != (data.n,):
            raise ReportError(f"--scores {opts.scores}: /cluster has {cl.shape[0]} rows but --data "
                              f"{data.path}:{data.dataset} has {data.n}")
        opts.scores_data = {"path": opts.scores, "cluster": cl, "fit_name": name}
    opt = []
    for p in opts.optimize:
        try:
            opt.append(read_optimize(p))
        except ResultError as e:
            raise ReportError(f"--optimize {e}") from None
    opts.optimize_files = opt
    return results, data


def run(argv=None) -> int:
    opts = _parser().parse_args(argv)
    if opts.max_rows < 100:
        raise ReportError("--max-rows: must be at least 100")
    if opts.max_fits < 0:
        raise ReportError("--max-fits: must be >= 0")
    for p in opts.results:
        if not os.path.exists(p):
            raise ReportError(f"{p}: no such file")
    path, fd, tmp = _check_out(opts.out, list(opts.results) + ([opts.data] if opts.data else [])
                               + ([opts.scores] if opts.scores else []) + list(opts.optimize))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            results, data = _load(opts)
            # matplotlib is imported only once the input is known to be good
            from . import plots
            from .render import Report

            plots.use_style()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with np.errstate(all="ignore"):
                    text = Report(opts, results, data).build()
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        tmp = None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    print(f"wrote {opts.out}")
    return 0


def main(argv=None) -> int:
    try:
        return run(argv)
    except ReportError as e:
        print(f"ghfit-report: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ghfit-report: error: interrupted", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"ghfit-report: error: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # noqa: BLE001 - one line, never a traceback (GHFIT_REPORT_DEBUG=1 shows it)
        if os.environ.get("GHFIT_REPORT_DEBUG"):
            raise
        print(f"ghfit-report: error: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
