#!/usr/bin/python3
"""Mixtures of one family (--components K; src/em/em_mixture.c, docs/math.md 10).

usage: fit_mixture.py MODE GHFIT SOURCE_DIR WORKDIR

MODE
  gauss     --components 3 --model gauss against scikit-learn's GaussianMixture
            (n_init 8, tol 1e-12): ghfit's log-likelihood >= sklearn's best less
            1e-6 relative; the log-likelihood recomputed from the written
            params equals the attribute (1e-10); the schema's datasets and
            attributes (proportions sum 1 and decrease, components/<k>/...,
            starts/*, icl >= bic, aic/bic with k = (K-1) + K k_1); K = 1 is
            bitwise the fit without --components (gauss, nig); bad input
            (--components 0 / x / 2.5, K (d+1) > rows in fit and `check fit`,
            with --backend cuda, --sigma diag, --missing em, --se, a job
            with eval:, and data where every start
            collapses): exit 2, one
            line, no output file; in `ghfit run` such a fit is recorded failed
            (exit 3).
  recovery  NIG and GH components (K = 3, d = 2, well separated; GH drawn as a
            normal mean-variance mixture with scipy.stats.geninvgauss):
            proportions within 0.03 and component means within 0.25 of the
            truth, MAP labels from the written params (python/ghfit's
            log-density) with adjusted Rand index >= 0.95, the trace monotone
            to 1e-12 relative, 1, 2 and 3 ranks bitwise identical datasets (the
            E-step's BLAS path for d > 128, forced by GHFIT_TEST_MIXTURE_BLAS=1:
            the same fit to 1e-10, 1 and 2 ranks bitwise);
            a quick NIG d = 10 recovery.
  sweep     `ghfit run` with components: [1, 2, 3, 4]: fit names *_k1.._k4,
            the BIC picks 3; the same run with a checkpoint, stopped by
            SIGUSR1 after its first fit (exit 75) and resumed, gives the same
            bits (finished mixture fits come from the checkpoint's log, the
            running one starts again).
  max       K = 2, d = 2 (NIG): an independent maximisation (scipy.optimize,
            L-BFGS-B then Nelder-Mead on a numpy log-likelihood, started at
            EM's answer) finds nothing higher than 1e-6 relative.
"""
import math
import os
import shutil
import signal
import subprocess
import sys

import h5py
import numpy as np
from scipy import optimize, stats

MODE, G, SRC, W = sys.argv[1:5]
sys.path.insert(0, os.path.join(SRC, "python"))
from ghfit.law import Law  # noqa: E402  (read-only use of the package's log-density)

shutil.rmtree(W, ignore_errors=True)
os.makedirs(W)
os.chdir(W)
FAIL = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        FAIL.append(what)


def ghfit(args, np_=1, expect=0):
    cmd = ["mpirun", "-np", str(np_), G] + args if np_ > 1 else [G] + args
    env = dict(os.environ, OMPI_MCA_odls_base_sigkill_timeout="0")
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    if expect is not None and r.returncode != expect:
        print(r.stdout[-3000:], r.stderr[-3000:])
        raise SystemExit(f"FAIL: {' '.join(args)}: exit {r.returncode}, expected {expect}")
    return r


def write(fn, X, lab=None):
    with h5py.File(fn, "w") as f:
        f["X"] = X
        if lab is not None:
            f["lab"] = lab


def gig(rng, p, a, b, n):
    return stats.geninvgauss.rvs(p, math.sqrt(a * b), scale=math.sqrt(b / a), size=n, random_state=rng)


def gen_nmv(n, d, fam, seed, sep=8.0):
    """K = 3 normal mean-variance mixture components, well separated."""
    rng = np.random.default_rng(seed)
    props = np.array([0.5, 0.3, 0.2])
    counts = rng.multinomial(n, props)
    X, L, means = [], [], []
    for k in range(3):
        mu = np.zeros(d)
        if k == 1:
            mu[0] = sep
        if k == 2:
            mu[1] = sep
        gam = np.zeros(d)
        gam[0] = 0.5 * (-1) ** k
        A = np.eye(d) + 0.3 * np.ones((d, d)) / d
        p = -0.5 if fam == "nig" else [-1.0, 1.5, 0.5][k]
        a = b = 2.0
        y = gig(rng, p, a, b, counts[k])
        Z = rng.standard_normal((counts[k], d))
        X.append(mu + np.outer(y, gam) + np.sqrt(y)[:, None] * (Z @ A.T))
        L.append(np.full(counts[k], k))
        ey = stats.geninvgauss.mean(p, math.sqrt(a * b), scale=math.sqrt(b / a))
        means.append(mu + gam * ey)
    X, L = np.vstack(X), np.concatenate(L)
    perm = rng.permutation(n)
    return X[perm], L[perm], props, np.array(means)


def read_mix(fn, name):
    with h5py.File(fn, "r") as f:
        g = f["fits"][name]
        K = int(g.attrs["n_components"])
        comps = []
        for k in range(K):
            c = g["components"][str(k)]
            pr = c["params"]
            comps.append(dict(mu=pr["mu"][()], gamma=pr["gamma"][()], sigma=pr["sigma"][()], p=float(pr["p"][()]),
                              a=float(pr["a"][()]), b=float(pr["b"][()]), mean=c["moments"]["mean"][()]))
        out = dict(K=K, prop=g["proportions"][()], comps=comps, family=g.attrs["family"],
                   attrs={k: g.attrs[k] for k in g.attrs}, trace=g["loglik"][()],
                   starts=(g["starts"]["loglik"][()], g["starts"]["n_iter"][()], g["starts"]["converged"][()]),
                   has_params="params" in g)
    return out


def comp_logpdf(m, X):
    """[n, K] log pi_k + log f_k(x)"""
    fam = m["family"]
    fam = fam.decode() if isinstance(fam, bytes) else fam
    cols = []
    for k, c in enumerate(m["comps"]):
        law = Law(c["mu"], c["gamma"], c["sigma"], c["p"], c["a"], c["b"], fam)
        cols.append(math.log(m["prop"][k]) + law.logpdf(X))
    return np.column_stack(cols)


def mix_loglik(m, X):
    lk = comp_logpdf(m, X)
    mx = lk.max(axis=1)
    return float(np.sum(mx + np.log(np.exp(lk - mx[:, None]).sum(axis=1))))


def ari(a, b):
    """adjusted Rand index (Hubert & Arabie 1985)"""
    _, a = np.unique(a, return_inverse=True)
    _, b = np.unique(b, return_inverse=True)
    C = np.zeros((a.max() + 1, b.max() + 1))
    np.add.at(C, (a, b), 1)
    c2 = lambda x: x * (x - 1) / 2.0  # noqa: E731
    sij, sa, sb = c2(C).sum(), c2(C.sum(axis=1)).sum(), c2(C.sum(axis=0)).sum()
    e = sa * sb / c2(len(a))
    return (sij - e) / (0.5 * (sa + sb) - e)


def datasets(fn):
    """every dataset under /fits (name -> bytes), for bitwise comparisons; the profile and timings left out"""
    out = {}
    with h5py.File(fn, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and "/profile/" not in name:
                out[name] = obj[()].tobytes() if hasattr(obj[()], "tobytes") else bytes(str(obj[()]), "utf8")
        f["fits"].visititems(visit)
        for nm in f["fits"]:
            out[nm + "@loglik"] = np.float64(f["fits"][nm].attrs["loglik"]).tobytes()
    return out


def monotone(trace):
    return bool(np.all(np.diff(trace) >= -1e-12 * np.abs(trace[1:])))


def refused(args, pat, sub="fit", np_=1):
    for f in os.listdir("."):
        if f.startswith("bad.h5"):
            os.remove(f)
    r = ghfit(["check", "fit"] + args if sub == "check" else [sub] + args, np_=1 if sub == "check" else np_, expect=None)
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("ghfit: ")]
    left = [f for f in os.listdir(".") if f.startswith("bad.h5")]
    ok = r.returncode == 2 and len(lines) == 1 and "ghfit: error:" in lines[0] and pat in lines[0] and not left
    check(ok, f"refused ({pat}): {' '.join(args)} -> exit {r.returncode}, {lines[:2]}, left {left}")


# ---------------------------------------------------------------------------
if MODE == "gauss":
    from sklearn.mixture import GaussianMixture

    rng = np.random.default_rng(11)
    n = [700, 500, 300]
    means = [[0, 0], [4, 1], [1, 4]]
    covs = [[[1, 0.3], [0.3, 1]], [[0.5, -0.2], [-0.2, 1.5]], [[2, 0.5], [0.5, 0.7]]]
    X = np.vstack([rng.multivariate_normal(m, c, size=k) for m, c, k in zip(means, covs, n)])
    X = X[rng.permutation(len(X))]
    write("g.h5", X)
    ghfit(["fit", "--data", "g.h5", "--model", "gauss", "--components", "3", "--out", "gm.h5"])
    m = read_mix("gm.h5", "gauss")
    ll = float(m["attrs"]["loglik"])
    sk = GaussianMixture(3, covariance_type="full", tol=1e-12, max_iter=5000, n_init=8, reg_covar=0.0,
                         random_state=0).fit(X)
    ll_sk = float(sk.score(X) * len(X))
    print(f"  ghfit loglik {ll:.12f}  sklearn {ll_sk:.12f}")
    check(ll >= ll_sk - 1e-6 * abs(ll_sk), "gauss K=3: ghfit's log-likelihood >= sklearn's best - 1e-6 relative")
    llp = mix_loglik(m, X)
    check(abs(llp - ll) <= 1e-10 * abs(ll), f"the log-likelihood from the written params ({llp:.12f}) is the attribute")
    check(not m["has_params"] and m["K"] == 3, "a mixture has n_components = 3 and no params/ group")
    pr = m["prop"]
    check(abs(pr.sum() - 1) < 1e-14 and np.all(np.diff(pr) <= 0), f"proportions sum to 1 and decrease: {pr}")
    a = m["attrs"]
    k1 = 2 + 3  # gauss in d = 2: mu (2) and Sigma (3)
    kk = (3 - 1) + 3 * k1
    check(abs(a["aic"] - (-2 * ll + 2 * kk)) < 1e-8 and abs(a["bic"] - (-2 * ll + kk * math.log(len(X)))) < 1e-8,
          "aic/bic with k = (K-1) + K k_1")
    tau = comp_logpdf(m, X)
    tau = np.exp(tau - tau.max(axis=1)[:, None])
    tau /= tau.sum(axis=1)[:, None]
    icl = a["bic"] - 2 * np.sum(np.log(tau.max(axis=1)))
    check(abs(a["icl"] - icl) <= 1e-8 * abs(icl), f"icl = bic - 2 sum log tau_MAP ({a['icl']} vs {icl})")
    sl, si, sc = m["starts"]
    check(len(sl) == 4 and abs(np.nanmax(sl) - ll) <= 1e-12 * abs(ll) and np.all(si > 0),
          f"starts/: 4 starts, the best is the fit ({sl}, {si}, {sc})")
    check(monotone(m["trace"]), "the trace is monotone")
    # K = 1 is the fit without --components, bitwise
    for fam in ("gauss", "nig"):
        ghfit(["fit", "--data", "g.h5", "--model", fam, "--out", "k0.h5", "--quiet"])
        ghfit(["fit", "--data", "g.h5", "--model", fam, "--components", "1", "--out", "k1.h5", "--quiet"])
        d0, d1 = datasets("k0.h5"), datasets("k1.h5")
        check(d0 == d1, f"{fam}: --components 1 is bitwise the fit without it ({len(d0)} datasets)")
    # bad input
    refused(["--data", "g.h5", "--model", "nig", "--components", "0", "--out", "bad.h5"], "--components")
    refused(["--data", "g.h5", "--model", "nig", "--components", "x", "--out", "bad.h5"], "--components")
    refused(["--data", "g.h5", "--model", "nig", "--components", "2.5", "--out", "bad.h5"], "--components")
    write("few.h5", X[:8])
    refused(["--data", "few.h5", "--model", "nig", "--components", "3", "--out", "bad.h5"], "--components 3")
    refused(["--data", "few.h5", "--model", "nig", "--components", "3", "--out", "bad.h5"], "--components 3", sub="check")
    for extra, pat in ((["--backend", "cuda"], "--backend cuda"), (["--sigma", "diag"], "--sigma"),
                       (["--missing", "em"], "--missing em"), (["--se"], "--se")):
        refused(["--data", "g.h5", "--model", "nig", "--components", "2", "--out", "bad.h5"] + extra, pat)
    # a job with mixtures and a post-fit key (fitted-law commands read mixtures from the result file)
    with open("post.yaml", "w") as f:
        f.write("data: g.h5\nout: bad.h5\nfamily: gauss\ncomponents: [1, 2]\neval: g.h5\n")
    refused(["post.yaml"], "eval:", sub="run", np_=2)
    # every start collapses (3 distinct rows, K = 4): exit 2, one line; in a run, a failed fit
    write("tied.h5", np.repeat(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]), 10, axis=0))
    refused(["--data", "tied.h5", "--model", "gauss", "--components", "4", "--out", "bad.h5"], "collapsed", np_=2)
    with open("tied.yaml", "w") as f:
        f.write("data: tied.h5\nout: tied_run.h5\nfamily: gauss\ncomponents: [2, 4]\nquiet: true\n")
    r = ghfit(["run", "tied.yaml"], np_=2, expect=3)
    with h5py.File("tied_run.h5", "r") as f:
        st = f["fits"]["gauss_tol1e-10_s1_k4"].attrs["status"]
        st = st.decode() if isinstance(st, bytes) else st
    check(st.startswith("failed:") and "collapsed" in st, f"run: the collapsed fit is recorded failed ({st})")

elif MODE == "recovery":
    for fam, n, d in (("nig", 2500, 2), ("gh", 2000, 2), ("nig", 3000, 10)):  # nig: the Bessel plans (>= 2048 rows)
        X, L, props, means = gen_nmv(n, d, fam, seed=3 if d == 2 else 5, sep=8.0 if fam == "nig" else 12.0)
        fn = f"{fam}{d}.h5"
        write(fn, X, L)
        ghfit(["fit", "--data", fn, "--model", fam, "--components", "3", "--out", f"r_{fam}{d}.h5", "--quiet"])
        m = read_mix(f"r_{fam}{d}.h5", fam)
        ll = float(m["attrs"]["loglik"])
        # the true components matched by their means
        order = [int(np.argmin([np.linalg.norm(c["mean"] - mt) for c in m["comps"]])) for mt in means]
        perr = max(abs(m["prop"][order[k]] - props[k]) for k in range(3))
        merr = max(np.max(np.abs(m["comps"][order[k]]["mean"] - means[k])) for k in range(3))
        check(sorted(order) == [0, 1, 2] and perr < 0.03 and merr < 0.25,
              f"{fam} d={d}: proportions within 0.03 ({perr:.4f}), means within 0.25 ({merr:.4f})")
        lab = np.argmax(comp_logpdf(m, X), axis=1)
        r = ari(lab, L)
        check(r >= 0.95, f"{fam} d={d}: adjusted Rand index of the MAP labels {r:.4f} >= 0.95")
        # the real writer read back by ghfit eval: its /cluster is the MAP label of the written params, and
        # its /responsibility and /logpdf are the mixture's (the readers' own tests use generated files)
        ghfit(["eval", "--model", f"r_{fam}{d}.h5", "--data", fn, "--out", f"e_{fam}{d}.h5"], np_=2)
        with h5py.File(f"e_{fam}{d}.h5", "r") as e:
            ec, er, elp = e["cluster"][()], e["responsibility"][()], e["logpdf"][()]
            eK = int(e.attrs["n_components"])
        lp = comp_logpdf(m, X)
        ref_lp = np.logaddexp.reduce(lp, axis=1)
        check(eK == 3 and np.array_equal(ec, lab), f"{fam} d={d}: eval's /cluster is the MAP label of the fit")
        check(ari(ec, L) >= 0.95 and np.allclose(er.sum(axis=1), 1.0, atol=1e-12),
              f"{fam} d={d}: eval's /cluster ARI {ari(ec, L):.4f} >= 0.95, /responsibility rows sum to 1")
        check(np.max(np.abs(elp - ref_lp)) <= 1e-9 * np.max(np.abs(ref_lp)),
              f"{fam} d={d}: eval's /logpdf is the mixture log-density of the written params")
        check(abs(mix_loglik(m, X) - ll) <= 1e-9 * abs(ll), f"{fam} d={d}: loglik from the written params")
        check(monotone(m["trace"]), f"{fam} d={d}: the trace is monotone to 1e-12 ({len(m['trace'])} entries)")
        check(m["attrs"]["converged"] == 1, f"{fam} d={d}: converged ({m['attrs']['status']})")
        if d == 2 and fam == "nig":
            ref = datasets(f"r_{fam}{d}.h5")
            for np_ in (2, 3):
                ghfit(["fit", "--data", fn, "--model", fam, "--components", "3", "--out", f"r{np_}.h5", "--quiet"],
                      np_=np_)
                other = datasets(f"r{np_}.h5")
                diff = [k for k in ref if ref[k] != other.get(k)]
                check(not diff and len(ref) == len(other), f"{fam}: {np_} ranks bitwise as 1 (differ: {diff[:4]})")
            # the E-step's BLAS path (d > 128; forced by a test hook): the same fit to 1e-10, 1 and 2 ranks bitwise
            os.environ["GHFIT_TEST_MIXTURE_BLAS"] = "1"
            for np_ in (1, 2):
                ghfit(["fit", "--data", fn, "--model", fam, "--components", "3", "--out", f"b{np_}.h5", "--quiet"],
                      np_=np_)
            del os.environ["GHFIT_TEST_MIXTURE_BLAS"]
            lb = float(read_mix("b1.h5", fam)["attrs"]["loglik"])
            check(abs(lb - ll) <= 1e-10 * abs(ll), f"{fam}: the BLAS path's loglik {lb:.12f} is the kernels' {ll:.12f}")
            check(datasets("b1.h5") == datasets("b2.h5"), f"{fam}: the BLAS path on 2 ranks bitwise as on 1")

elif MODE == "sweep":
    X, L, props, means = gen_nmv(1500, 2, "nig", seed=3)
    write("s.h5", X)
    with open("sweep.yaml", "w") as f:
        f.write("data: s.h5\nout: sweep.h5\nfamily: nig\ncomponents: [1, 2, 3, 4]\nstarts: 2\ntol: 1e-7\nquiet: true\n")
    ghfit(["run", "sweep.yaml"], np_=2)
    with h5py.File("sweep.h5", "r") as f:
        bic = {nm: float(f["fits"][nm].attrs["bic"]) for nm in f["fits"]}
    print("  ", bic)
    names = sorted(bic)
    check(names == [f"nig_tol1e-07_s1_k{k}" for k in (1, 2, 3, 4)], f"sweep fit names {names}")
    best = min(bic, key=bic.get)
    check(best.endswith("_k3"), f"the BIC picks K = 3 ({best})")
    # a checkpointed run stopped by SIGUSR1 after its first fit (exit 75) and resumed: the same bits
    with open("ck.yaml", "w") as f:
        f.write("data: s.h5\nout: ck.h5\nfamily: nig\ncomponents: [1, 2, 3, 4]\nstarts: 2\ntol: 1e-7\n"
                "checkpoint: ckp.h5\n")
    env = dict(os.environ, GHFIT_TEST_ITER_SLEEP="20")
    pr = subprocess.Popen(["mpirun", "-np", "2", G, "run", "ck.yaml"], stdout=subprocess.PIPE, text=True, env=env)
    for line in pr.stdout:  # the progress line of a finished fit: the ranks run, their handlers are set
        if line.startswith("[   1/4]"):
            break
    pr.send_signal(signal.SIGUSR1)  # to mpirun, which forwards it
    pr.stdout.read()
    rc = pr.wait(timeout=120)
    check(rc == 75 and os.path.exists("ckp.h5") and not os.path.exists("ck.h5"),
          f"stopped: exit {rc}, the checkpoint kept, no result file")
    ghfit(["run", "ck.yaml", "--resume", "--quiet"], np_=2)
    a, b = datasets("sweep.h5"), datasets("ck.h5")
    check(a == b, f"resumed: bitwise the uninterrupted sweep (differ: {[k for k in a if a[k] != b.get(k)][:4]})")

elif MODE == "max":
    X, L, props, means = gen_nmv(900, 2, "nig", seed=7)
    X = X[L < 2]
    write("m.h5", X)
    ghfit(["fit", "--data", "m.h5", "--model", "nig", "--components", "2", "--out", "mx.h5", "--quiet"])
    m = read_mix("mx.h5", "nig")
    ll = float(m["attrs"]["loglik"])
    d = 2

    def pack(m):
        v = [math.log(m["prop"][1] / m["prop"][0])]
        for c in m["comps"]:
            Lc = np.linalg.cholesky(c["sigma"])
            v += list(c["mu"]) + list(c["gamma"]) + [math.log(Lc[0, 0]), Lc[1, 0], math.log(Lc[1, 1])]
            v += [math.log(c["a"]), math.log(c["b"])]
        return np.array(v)

    def unpack(v):
        pr1 = 1.0 / (1.0 + math.exp(-v[0]))
        comps, q = [], 1
        for k in range(2):
            mu, gam = v[q:q + 2], v[q + 2:q + 4]
            Lc = np.array([[math.exp(v[q + 4]), 0.0], [v[q + 5], math.exp(v[q + 6])]])
            comps.append(dict(mu=mu, gamma=gam, sigma=Lc @ Lc.T, p=-0.5, a=math.exp(v[q + 7]), b=math.exp(v[q + 8]),
                              mean=None))
            q += 9
        return dict(prop=np.array([1 - pr1, pr1]), comps=comps, family="nig")

    def nll(v):
        try:
            r = -mix_loglik(unpack(v), X)
        except (ValueError, OverflowError, np.linalg.LinAlgError):
            return 1e300
        return r if math.isfinite(r) else 1e300

    v0 = pack(m)
    check(abs(-nll(v0) - ll) <= 1e-10 * abs(ll), "the numpy log-likelihood at EM's answer is the attribute")
    r1 = optimize.minimize(nll, v0, method="L-BFGS-B", options=dict(maxiter=200, ftol=1e-15, gtol=1e-10))
    r2 = optimize.minimize(nll, r1.x if r1.fun < nll(v0) else v0, method="Nelder-Mead",
                           options=dict(maxiter=1500, xatol=1e-10, fatol=1e-12))
    best = -min(r1.fun, r2.fun)
    print(f"  EM {ll:.12f}  scipy {best:.12f}  gain {(best - ll) / abs(ll):.3e}")
    check(best <= ll + 1e-6 * abs(ll), "no higher point than EM's beyond 1e-6 relative")
else:
    raise SystemExit(f"unknown mode {MODE}")

if FAIL:
    print(f"{len(FAIL)} check(s) failed")
    sys.exit(1)
print("all checks passed")
