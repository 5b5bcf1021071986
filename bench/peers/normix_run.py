"""One normix measurement, run in its own process by peers.py.

Reads the data set ghfit generated (h5py, float64), runs normix's
BatchEMFitter and prints one JSON object per line on stdout as each step
finishes, so that the driver keeps what was measured when it stops a run
at the time cap.

Modes
  time      per-iteration time at a fixed iteration count: a cold call with
            1 iteration (includes JAX tracing / XLA compilation), a warm call
            with 1 iteration and a warm call with 1+K iterations;
            per_iter = (T_warm(1+K) - T_warm(1)) / K, so a fixed per-call
            cost (tracing, the lax.scan re-compilation) is not counted.
            tol = -inf, so normix cannot stop early.
  converge  time to convergence with normix's own tight settings, from its
            own initialisation (GeneralizedHyperbolic.default_init = best of
            4 short sub-family fits, NIG moment init), and the final
            log-likelihood of the returned model.
  evalll    normix's marginal log-likelihood of parameters from a ghfit
            result file (a cross-check of ghfit's reported loglik).
"""
import argparse
import json
import os
import sys
import time

os.environ.setdefault("JAX_ENABLE_X64", "1")

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)

from normix import GeneralizedHyperbolic, NormalInverseGaussian  # noqa: E402
from normix.fitting.em import BatchEMFitter  # noqa: E402


def emit(**kw):
    print(json.dumps(kw), flush=True)


def load(path, dataset):
    with h5py.File(path, "r") as f:
        X = np.asarray(f[dataset][()], dtype=np.float64)
    return jnp.asarray(X)


def family(model):
    return GeneralizedHyperbolic if model == "gh" else NormalInverseGaussian


def moment_init(model, X):
    """normix's moment initialisation (GH: the p = a = b = 1 fallback)."""
    cls = family(model)
    if model == "gh":
        # NormalMixture.default_init, without GH's best-of-4 override.
        return super(GeneralizedHyperbolic, cls).default_init(X)
    return cls.default_init(X)


def fitter(cfg, max_iter, tol, model):
    e, m, meth = cfg.split("/")
    kw = dict(max_iter=max_iter, tol=tol, e_step_backend=e,
              m_step_backend=m, m_step_method=meth)
    if model == "gh":
        kw["regularization"] = "det_sigma_one"  # GH.fit() default; density unchanged
    return BatchEMFitter(**kw)


def timed_fit(f, init, X):
    t0 = time.perf_counter()
    r = f.fit(init, X)
    jax.block_until_ready(r.model)
    return time.perf_counter() - t0, r


def enable_compile_cache():
    """A fresh persistent XLA compilation cache for this process.

    BatchEMFitter re-traces and re-compiles its lax.scan loop on every
    fit() call; with the cache a repeated call of the same length only
    re-traces, so the per-call fixed cost is small and steady and the
    difference of two calls measures the iterations.  The directory is new,
    so the first call still pays the full compilation.
    """
    import tempfile
    d = tempfile.mkdtemp(prefix="peers-jaxcache-")
    jax.config.update("jax_compilation_cache_dir", d)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    return d


def mode_time(a, X):
    cache = enable_compile_cache()
    init = moment_init(a.model, X)
    jax.block_until_ready(init)
    f1 = fitter(a.config, 1, float("-inf"), a.model)
    t_cold, _ = timed_fit(f1, init, X)
    emit(event="cold", seconds=t_cold)
    t_w1, _ = timed_fit(f1, init, X)
    emit(event="warm1", seconds=t_w1)
    k = a.iters
    while True:
        fk = fitter(a.config, 1 + k, float("-inf"), a.model)
        emit(event="start_k", k=k)
        t_ck, _ = timed_fit(fk, init, X)          # compiles this length (cached)
        emit(event="coldk", k=k, seconds=t_ck)
        t_wk, r = timed_fit(fk, init, X)
        emit(event="warmk", k=k, seconds=t_wk)
        diff = t_wk - t_w1
        # Accept when the K iterations stand well above the per-call noise;
        # otherwise take 8x more iterations (small N: ms per iteration).
        if diff > max(0.25 * t_w1, 0.5) or k >= a.max_k or t_wk * 8 > a.time_budget:
            break
        t_w1, _ = timed_fit(f1, init, X)          # fresh baseline, same conditions
        emit(event="warm1", seconds=t_w1)
        k *= 8
    per_iter = max(diff, 0.0) / k
    import shutil
    shutil.rmtree(cache, ignore_errors=True)
    emit(event="done", config=a.config, first_call_s=t_cold, warm1_s=t_w1,
         warmk_s=t_wk, k=k, n_iter=int(r.n_iter), per_iter_s=per_iter,
         per_iter_plain_s=t_wk / (1 + k), per_call_fixed_s=max(t_w1 - per_iter, 0.0))


def ghfit_params_model(model, path):
    with h5py.File(path, "r") as f:
        g = f["fits/" + model + "/params"]
        mu, gamma, sigma = g["mu"][()], g["gamma"][()], g["sigma"][()]
        p, a, b = float(g["p"][()]), float(g["a"][()]), float(g["b"][()])
    if model == "gh":
        return GeneralizedHyperbolic.from_classical(
            mu=mu, gamma=gamma, sigma=sigma, p=p, a=a, b=b)
    # NIG: GIG(-1/2, a, b) = InverseGaussian(mu_ig = sqrt(b/a), lam = b)
    return NormalInverseGaussian.from_classical(
        mu=mu, gamma=gamma, sigma=sigma, mu_ig=float(np.sqrt(b / a)), lam=b)


def mode_evalll(a, X):
    m = ghfit_params_model(a.model, a.ghfit_result)
    t0 = time.perf_counter()
    ll = float(m.marginal_log_likelihood(X))
    emit(event="eval", ll_mean=ll, ll_total=ll * X.shape[0],
         seconds=time.perf_counter() - t0)
    res = dict(ll_mean=ll, ll_total=ll * X.shape[0], seconds=time.perf_counter() - t0)
    if a.polish_iters > 0:
        # normix's own EM started at ghfit's answer: EM is monotone, so any
        # remaining ascent it finds means ghfit stopped short of the maximum.
        f = fitter(a.config, a.polish_iters, float("-inf"), a.model)
        _, r = timed_fit(f, m, X)
        llp = float(r.model.marginal_log_likelihood(X))
        res.update(polish_iters=int(r.n_iter), polish_ll_mean=llp,
                   polish_ll_total=llp * X.shape[0], polish_config=a.config)
    emit(event="done", **res)


def mode_converge(a, X):
    t0 = time.perf_counter()
    if a.init == "default":
        init = family(a.model).default_init(X)
    else:
        init = moment_init(a.model, X)
    jax.block_until_ready(init)
    t_init = time.perf_counter() - t0
    emit(event="init", seconds=t_init, init=a.init)
    f = fitter(a.config, a.max_iter, a.tol, a.model)
    t_fit, r = timed_fit(f, init, X)
    emit(event="fitted", seconds=t_fit, n_iter=int(r.n_iter))
    ll = float(r.model.marginal_log_likelihood(X))
    emit(event="done", config=a.config, init=a.init, init_s=t_init,
         fit_s=t_fit, total_s=t_init + t_fit, n_iter=int(r.n_iter),
         converged=bool(r.converged), diverged=bool(r.diverged),
         solver_failed=bool(r.solver_failed), tol=a.tol, max_iter=a.max_iter,
         ll_mean=ll, ll_total=ll * X.shape[0])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["time", "converge", "evalll"])
    p.add_argument("--data", required=True)
    p.add_argument("--dataset", default="/X")
    p.add_argument("--model", choices=["gh", "nig"], required=True)
    p.add_argument("--config", default="cpu/cpu/newton",
                   help="E-step backend/M-step backend/M-step method")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--max-k", type=int, default=2000)
    p.add_argument("--time-budget", type=float, default=120.0,
                   help="no further 8x step when it would take longer than this")
    p.add_argument("--tol", type=float, default=1e-10)
    p.add_argument("--max-iter", type=int, default=5000)
    p.add_argument("--init", choices=["default", "moment"], default="default")
    p.add_argument("--ghfit-result")
    p.add_argument("--polish-iters", type=int, default=0)
    a = p.parse_args()
    t0 = time.perf_counter()
    X = load(a.data, a.dataset)
    emit(event="loaded", seconds=time.perf_counter() - t0, n=int(X.shape[0]),
         d=int(X.shape[1]), jax=jax.__version__,
         devices=[str(d) for d in jax.devices()])
    {"time": mode_time, "converge": mode_converge, "evalll": mode_evalll}[a.mode](a, X)


if __name__ == "__main__":
    sys.exit(main())
