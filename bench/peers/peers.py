"""Side-by-side benchmark of ghfit against normix (JAX) on the same data.

Started by bench/peers/run.sh (which makes the virtual environment and
builds ghfit); see docs/benchmarks.md.  For every case (model, N, d):

  1. data: `ghfit generate` with a pinned seed (reused when the file exists
     with the same attributes); normix reads the same file with h5py;
  2. time per EM iteration at a fixed iteration count K:
     ghfit `fit --tol 0 --max-iter K --accel none --starts 1` on 1 rank x 1
     thread, 2 ranks x 1 thread and 1 rank x 2 OpenMP threads (and the CUDA
     backend with --gpu); per iteration = max over ranks of
     (estep + allreduce + mstep) / n_iter from /fits/<model>/profile.
     normix: normix_run.py time (see there), its first call reported apart;
  3. time to convergence and final log-likelihood, each tool with its own
     tight settings: ghfit defaults (--tol 1e-10, SQUAREM, 4 GH starts);
     normix tol 1e-10 nats/obs (Aitken remaining), max_iter 5000, own
     default_init; the final log-likelihood of the returned normix model is
     evaluated by normix (mean x n); ghfit's returned parameters are also
     evaluated by normix (cross-check of ghfit's reported loglik);
  4. ratios.

Every tool run is a separate process stopped after --cap seconds and then
reported as "capped" (with a lower bound where one is known).
Results: <out>/results.json, <out>/table.md, <out>/time_per_iter.png.
"""
import argparse
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# normix configurations tried: E-step backend / M-step backend / M-step method.
# NIG's M-step is closed form (the method is unused), so only backends vary.
CANDIDATES = {
    "gh": ["cpu/cpu/newton", "cpu/cpu/lbfgs", "cpu/jax/newton", "cpu/jax/lbfgs",
           "jax/cpu/newton", "jax/cpu/lbfgs", "jax/jax/newton", "jax/jax/lbfgs"],
    "nig": ["cpu/cpu/newton", "cpu/jax/newton", "jax/cpu/newton", "jax/jax/newton"],
}
SMOKE_CANDIDATES = {"gh": ["cpu/cpu/newton", "cpu/jax/newton"],
                    "nig": ["cpu/cpu/newton", "cpu/jax/newton"]}

GHFIT_CONFIGS = [  # name, ranks, OpenMP threads, backend
    ("1r x 1t", 1, 1, "cpu"),
    ("2r x 1t", 2, 1, "cpu"),
    ("1r x 2t", 1, 2, "cpu"),
]

MODEL_SEED = {"gh": 0, "nig": 500}


def log(*a):
    print("[peers %s]" % time.strftime("%H:%M:%S"), *a, flush=True)


def case_seed(base, model, n, d):
    """Pinned data seed of one case (recorded in results.json and the table)."""
    return base + MODEL_SEED[model] + 10 * d + int(round(math.log10(n)))


def fmt_n(n):
    e = int(round(math.log10(n)))
    return "1e%d" % e if 10 ** e == n else str(n)


# ---------------------------------------------------------------------------
# Running things under a cap
# ---------------------------------------------------------------------------

def run_capped(cmd, cap, env=None, cwd=None):
    """Run cmd in its own process group; kill the group after cap seconds.

    Returns (rc or None when capped, stdout, stderr, wall seconds)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env, cwd=cwd, text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=cap)
        return p.returncode, out, err, time.perf_counter() - t0
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            out, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = p.communicate()
        return None, out, err, time.perf_counter() - t0


def json_lines(text):
    res = []
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                res.append(json.loads(line))
            except ValueError:
                pass
    return res


def mpi_env(threads):
    env = dict(os.environ)
    env.update({
        "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "OMPI_MCA_rmaps_base_oversubscribe": "1",
        "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
        "OMPI_MCA_fbtl_posix_read_datasieving": "0",
        "HDF5_USE_FILE_LOCKING": "FALSE",
        "OMP_NUM_THREADS": str(threads),
    })
    return env


def mpirun_cmd(ranks, argv):
    mpirun = shutil.which("mpirun") or "mpirun"
    # --bind-to none: by default Open MPI binds a lone rank to one core, which
    # would put all OpenMP threads of the 1 rank x 2 threads case on one core.
    return [mpirun, "-np", str(ranks), "--oversubscribe", "--bind-to", "none"] + argv


# ---------------------------------------------------------------------------
# ghfit
# ---------------------------------------------------------------------------

class Ghfit:
    def __init__(self, exe, tmp):
        self.exe = exe
        self.tmp = tmp

    def generate(self, model, n, d, seed, path, cap):
        if os.path.exists(path):
            try:
                with h5py.File(path, "r") as f:
                    at = f["X"].attrs
                    if (int(at["seed"]) == seed and int(at["n"]) == n
                            and int(at["dim"]) == d and str(at["model"]) == model
                            and f["X"].shape == (n, d)):
                        return {"reused": True}
            except Exception:
                pass
            os.unlink(path)
        cmd = [self.exe, "generate", "--model", model, "--dim", str(d), "--n", str(n),
               "--seed", str(seed), "--out", path]
        rc, out, err, wall = run_capped(cmd, cap, env=mpi_env(1))
        if rc != 0:
            raise RuntimeError("ghfit generate failed (rc=%s): %s\n%s\n%s"
                               % (rc, " ".join(cmd), out, err))
        return {"reused": False, "seconds": wall}

    def fit(self, data, model, ranks, threads, backend, extra, cap, tag):
        out = os.path.join(self.tmp, "fit_%s.h5" % tag)
        if os.path.exists(out):
            os.unlink(out)
        argv = [self.exe, "fit", "--data", data, "--model", model, "--out", out,
                "--backend", backend, "--quiet"] + extra
        cmd = mpirun_cmd(ranks, argv)
        rc, so, se, wall = run_capped(cmd, cap, env=mpi_env(threads))
        res = {"cmd": " ".join(cmd), "wall_s": wall, "ranks": ranks,
               "threads": threads, "backend": backend}
        if rc is None:
            res.update(status="capped")
            return res
        if rc != 0 or not os.path.exists(out):
            res.update(status="failed", rc=rc, output=(so + se)[-2000:])
            return res
        with h5py.File(out, "r") as f:
            g = f["fits/" + model]
            names = [x.decode() if isinstance(x, bytes) else str(x)
                     for x in g["profile/phase_names"][()]]
            sec = np.asarray(g["profile/seconds"][()])
            idx = [names.index(k) for k in ("estep", "allreduce", "mstep")]
            loop = sec[:, idx].sum(axis=1).max()
            n_iter = int(g.attrs["n_iter"])
            res.update(
                status="ok", n_iter=n_iter, loglik=float(g.attrs["loglik"]),
                converged=int(g.attrs["converged"]),
                fit_status=str(g.attrs.get("status", "")),
                elapsed_s=float(g.attrs["elapsed_s"]),
                loop_s=float(loop),
                per_iter_s=float(loop) / max(n_iter, 1),
                phases=dict(zip(names, [float(x) for x in sec.max(axis=0)])),
                result=out)
        return res


# ---------------------------------------------------------------------------
# normix
# ---------------------------------------------------------------------------

class Normix:
    def __init__(self, python):
        self.python = python
        self.script = os.path.join(HERE, "normix_run.py")

    def run(self, mode, data, model, cap, extra):
        cmd = [self.python, self.script, mode, "--data", data, "--model", model] + extra
        env = dict(os.environ)
        env["JAX_ENABLE_X64"] = "1"
        env.setdefault("JAX_PLATFORMS", "cpu")
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        rc, so, se, wall = run_capped(cmd, cap, env=env)
        ev = json_lines(so)
        res = {"cmd": " ".join(cmd), "wall_s": wall, "events": ev}
        done = [e for e in ev if e.get("event") == "done"]
        if rc is None:
            res["status"] = "capped"
        elif rc != 0 or not done:
            res.update(status="failed", rc=rc, output=(so + se)[-3000:])
        else:
            res["status"] = "ok"
            res.update({k: v for k, v in done[-1].items() if k != "event"})
        return res

    def time(self, data, model, config, iters, cap):
        r = self.run("time", data, model, cap,
                     ["--config", config, "--iters", str(iters)])
        if r["status"] == "capped":
            # Lower bound on the time per iteration from what finished: after
            # the cold call, the 1 + (1+K) iterations of the two warm calls did
            # not fit in the time left (their small fixed per-call cost is
            # neglected); once the 1-iteration warm call is known,
            # T(1+K) = T(1) + K*per > time spent in it.
            ev = {e["event"]: e for e in r["events"]}
            if "cold" in ev:
                r["first_call_s"] = ev["cold"]["seconds"]
                left = r["wall_s"] - ev["cold"]["seconds"] - ev.get("loaded", {}).get("seconds", 0.0)
                lb = max(left, 0.0) / (2 + iters)
                if "warm1" in ev:
                    r["warm1_s"] = ev["warm1"]["seconds"]
                    spent = left - ev["warm1"]["seconds"]
                    lb = max(lb, (spent - ev["warm1"]["seconds"]) / iters)
                r["per_iter_lb_s"] = lb
        return r


# ---------------------------------------------------------------------------
# The benchmark
# ---------------------------------------------------------------------------

def gpu_present():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False, "nvidia-smi not found"
    try:
        p = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except Exception as e:  # pragma: no cover
        return False, "nvidia-smi failed: %s" % e
    if p.returncode != 0 or "GPU" not in p.stdout:
        return False, "nvidia-smi -L: %s" % (p.stdout + p.stderr).strip()[:200]
    return True, p.stdout.strip().splitlines()[0]


def ghfit_has_cuda(exe):
    p = subprocess.run([exe, "--help"], capture_output=True, text=True)
    return "cuda" in (p.stdout + p.stderr).split("backends compiled in:")[-1]


def select_normix(args, gh, nx, model, datadir, results):
    """Measure each normix configuration on one case; return the fastest."""
    n, d = args.select_n, args.select_d
    seed = case_seed(args.seed_base, model, n, d)
    path = os.path.join(datadir, "%s_d%d_n%s_s%d.h5" % (model, d, fmt_n(n), seed))
    gh.generate(model, n, d, seed, path, args.cap)
    cands = SMOKE_CANDIDATES[model] if args.smoke else CANDIDATES[model]
    if args.normix_configs:
        cands = args.normix_configs.split(",")
    rows = []
    for cfg in cands:
        log("select normix %s N=%s d=%d: %s" % (model, fmt_n(n), d, cfg))
        r = nx.time(path, model, cfg, args.select_iters, args.select_cap)
        r["config"] = cfg
        rows.append(r)
        log("   -> %s per_iter=%s first_call=%s" % (
            r["status"], r.get("per_iter_s", r.get("per_iter_lb_s")), r.get("first_call_s")))
    ok = [r for r in rows if r["status"] == "ok"]
    if not ok:
        raise RuntimeError("no normix configuration finished for %s: %s"
                           % (model, [(r["config"], r["status"], r.get("output", "")[-500:])
                                      for r in rows]))
    best = min(ok, key=lambda r: r["per_iter_s"])
    results["selection"][model] = {
        "n": n, "d": d, "seed": seed, "iters": args.select_iters,
        "cap_s": args.select_cap, "best": best["config"],
        "candidates": [{k: r.get(k) for k in ("config", "status", "per_iter_s",
                                              "per_iter_lb_s", "first_call_s", "warm1_s",
                                              "wall_s", "events")}
                       for r in rows]}
    log("normix best configuration for %s: %s" % (model, best["config"]))
    return best["config"]


def normix_converge(args, nx, case, path, model, cfg):
    r = case["normix"]
    # normix's own fit to convergence; when its time per iteration says the
    # iteration limit cannot be reached inside the cap, the limit is lowered
    # so that it returns (not converged) with the log-likelihood it reached.
    # normix's lax.scan loop (jax/jax) always runs max_iter masked steps, even
    # after it has converged, so its limit is its own (--normix-max-iter).
    max_iter = args.normix_max_iter
    init = args.normix_init
    per = r.get("per_iter_s") or r.get("per_iter_lb_s")
    if per:
        fixed = r.get("first_call_s") or 0.0
        if init == "default" and model == "gh":
            # GH default_init = three 5-iteration lax.scan fits of the
            # sub-families (each compiled); when that alone would eat half
            # the cap, start from normix's moment init instead (said so).
            init_cost = 15 * per + 3 * fixed
            if init_cost > 0.5 * args.cap:
                init = "moment"
                case["normix_init_fallback"] = "default_init estimated %.0f s" % init_cost
        budget = int((args.cap * args.conv_budget_frac - fixed) / per)
        if budget < max_iter:
            max_iter = max(budget, 3)
            case["normix_conv_budget"] = max_iter
    case["normix_conv_init"] = init
    conv = nx.run("converge", path, model, args.cap,
                  ["--config", cfg, "--tol", repr(args.normix_tol),
                   "--max-iter", str(max_iter), "--init", init])
    case["normix_conv"] = conv
    log("  normix converge %s" % {k: conv.get(k) for k in
                                  ("status", "n_iter", "total_s", "ll_total")})


def run_case(args, gh, nx, model, n, d, cfg, datadir, gpu):
    seed = case_seed(args.seed_base, model, n, d)
    path = os.path.join(datadir, "%s_d%d_n%s_s%d.h5" % (model, d, fmt_n(n), seed))
    case = {"model": model, "n": n, "d": d, "seed": seed, "data": path,
            "iters": args.iters, "normix_config": cfg, "ghfit": {}, "ghfit_conv": {},
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "loadavg_start": os.getloadavg()}
    case["generate"] = gh.generate(model, n, d, seed, path, args.cap)
    tag = "%s_%d_%d" % (model, d, n)

    configs = list(GHFIT_CONFIGS)
    if gpu:
        configs.append(("1r cuda", 1, 1, "cuda"))
    timing_extra = ["--tol", "0", "--max-iter", str(args.iters), "--accel", "none"]
    if model == "gh":
        timing_extra += ["--starts", "1"]
    for name, ranks, threads, backend in configs:
        best = None
        for rep in range(args.ghfit_reps):
            r = gh.fit(path, model, ranks, threads, backend, timing_extra, args.cap,
                       "%s_t%d%d%s" % (tag, ranks, threads, backend))
            if r["status"] != "ok":
                best = r
                break
            if best is None or r["per_iter_s"] < best["per_iter_s"]:
                best = r
        case["ghfit"][name] = best
        log("  ghfit %-8s per-iter %s" % (name, best.get("per_iter_s", best["status"])))
        conv_extra = ["--max-iter", str(args.conv_max_iter)]
        r = gh.fit(path, model, ranks, threads, backend, conv_extra, args.cap,
                   "%s_c%d%d%s" % (tag, ranks, threads, backend))
        case["ghfit_conv"][name] = r
        log("  ghfit %-8s converge %s" % (name, {k: r.get(k) for k in
                                                   ("status", "n_iter", "elapsed_s", "loglik")}))

    # normix cross-check of ghfit's returned parameters (1 rank x 1 thread fit)
    r = nx.time(path, model, cfg, args.iters, args.cap)
    case["normix"] = r
    log("  normix %s per-iter %s (first call %s)" % (
        cfg, r.get("per_iter_s", "%s, >= %s" % (r["status"], r.get("per_iter_lb_s"))),
        r.get("first_call_s")))

    g1 = case["ghfit_conv"][GHFIT_CONFIGS[0][0]]
    if g1.get("status") == "ok":
        ev = nx.run("evalll", path, model, args.cap,
                    ["--ghfit-result", g1["result"], "--config", cfg,
                     "--polish-iters", str(args.polish_iters)])
        case["normix_eval_of_ghfit"] = ev
        log("  normix eval of ghfit's answer %s" % {k: ev.get(k) for k in (
            "status", "ll_total", "polish_ll_total")})

    normix_converge(args, nx, case, path, model, cfg)
    case["loadavg_end"] = os.getloadavg()
    if not args.keep_data and n >= 10 ** 6:
        os.unlink(path)
    return case


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------

def best_ghfit(case, cpu_only=True):
    ok = [(k, v) for k, v in case["ghfit"].items()
          if v.get("status") == "ok" and (not cpu_only or v["backend"] == "cpu")]
    if not ok:
        return None, None
    return min(ok, key=lambda kv: kv[1]["per_iter_s"])


def f_s(x):
    if x is None:
        return "-"
    if x >= 100:
        return "%.0f" % x
    if x >= 1:
        return "%.2f" % x
    if x >= 1e-3:
        return "%.2fe-3" % (x * 1e3) if x < 1e-2 else "%.3f" % x
    return "%.1fe-6" % (x * 1e6) if x < 1e-4 else "%.3fe-3" % (x * 1e3)


def f_time(x):
    if x is None:
        return "-"
    if x >= 1:
        return "%.3g s" % x
    if x >= 1e-3:
        return "%.3g ms" % (x * 1e3)
    return "%.3g us" % (x * 1e6)


def ghfit_cell(r):
    if r is None:
        return "-"
    if r.get("status") == "ok":
        return f_time(r["per_iter_s"])
    return r.get("status", "-")


def normix_iter_cell(r):
    if r is None:
        return "-"
    if r.get("status") == "ok":
        return f_time(r["per_iter_s"])
    if r.get("status") == "capped":
        lb = r.get("per_iter_lb_s")
        return "capped (>= %s)" % f_time(lb) if lb else "capped"
    return r.get("status", "-")


def rel(a, b):
    return (a - b) / abs(b)


def summarize(case):
    s = {}
    name, g = best_ghfit(case)
    nxr = case.get("normix", {})
    s["ghfit_best"] = name
    s["ghfit_best_s"] = g["per_iter_s"] if g else None
    g1 = case["ghfit"].get(GHFIT_CONFIGS[0][0], {})
    nper = nxr.get("per_iter_s")
    if nxr.get("status") == "capped":
        nper_lb = nxr.get("per_iter_lb_s")
    else:
        nper_lb = None
    s["speedup"] = nper / g["per_iter_s"] if (g and nper) else None
    s["speedup_lb"] = nper_lb / g["per_iter_s"] if (g and nper_lb) else None
    s["speedup_1r1t"] = (nper / g1["per_iter_s"]) if (nper and g1.get("status") == "ok") else None
    # convergence: best ghfit wall among configs, ll from 1r x 1t
    conv = [(k, v) for k, v in case["ghfit_conv"].items()
            if v.get("status") == "ok" and v["backend"] == "cpu"]
    if conv:
        k, v = min(conv, key=lambda kv: kv[1]["elapsed_s"])
        s["ghfit_conv_best"] = k
        s["ghfit_conv_s"] = v["elapsed_s"]
        s["ghfit_conv_iter"] = v["n_iter"]
        s["ghfit_ll"] = case["ghfit_conv"][GHFIT_CONFIGS[0][0]].get("loglik", v["loglik"])
        lls = [vv["loglik"] for _, vv in conv]
        s["ghfit_ll_spread"] = (max(lls) - min(lls)) / abs(s["ghfit_ll"])
        s["ghfit_converged"] = all(vv["converged"] for _, vv in conv)
    nc = case.get("normix_conv", {})
    if nc.get("status") == "ok":
        s["normix_ll"] = nc["ll_total"]
        s["normix_conv_s"] = nc["total_s"]
        if s.get("ghfit_ll") is not None:
            s["ll_rel"] = rel(s["ghfit_ll"], s["normix_ll"])
        if s.get("ghfit_conv_s"):
            s["conv_speedup"] = nc["total_s"] / s["ghfit_conv_s"]
    ev = case.get("normix_eval_of_ghfit", {})
    if ev.get("status") == "ok" and s.get("ghfit_ll") is not None:
        s["eval_rel"] = rel(ev["ll_total"], s["ghfit_ll"])
        if ev.get("polish_ll_total") is not None:
            s["polish_gain"] = rel(ev["polish_ll_total"], ev["ll_total"])
    return s


def sorted_cases(results):
    return sorted(results["cases"], key=lambda c: (c["model"] != "gh", c["model"], c["n"], c["d"]))


def write_table(results, out):
    L = []
    meta = results["meta"]
    L.append("# ghfit vs normix: side-by-side EM benchmark\n")
    L.append("Run %s on `%s` (%s, %d cores), load average at start %s.  "
             "%s (`%s`); normix %s, jax %s, Python %s.  "
             "Per-run cap %d s.  Mode: %s.\n" % (
                 meta["started"], meta["host"], meta["cpu"], meta["cores"],
                 "%.2f/%.2f/%.2f" % tuple(meta["loadavg_start"]),
                 meta["ghfit_version"], meta["ghfit"], meta["normix_version"],
                 meta["jax_version"], meta["python"], meta["cap_s"], meta["mode"]))
    sel = results.get("selection", {})
    for model, s in sel.items():
        cand = "; ".join("%s: %s" % (c["config"], f_time(c["per_iter_s"]) if c["status"] == "ok"
                                     else "%s%s" % (c["status"], " (>= %s)" % f_time(c["per_iter_lb_s"])
                                                    if c.get("per_iter_lb_s") else ""))
                         for c in s["candidates"])
        L.append("normix configuration for %s (E-step/M-step backend/M-step method), chosen "
                 "as the fastest per iteration on N=%s, d=%d, %d iterations: **%s**  (%s)\n"
                 % (model.upper(), fmt_n(s["n"]), s["d"], s["iters"], s["best"], cand))
    if meta.get("gpu_note"):
        L.append("GPU: %s\n" % meta["gpu_note"])

    L.append("\n## Time per EM iteration (K = %d iterations after a warm-up)\n" % meta["iters"])
    L.append("ghfit: `fit --tol 0 --max-iter K --accel none` (GH also `--starts 1`), "
             "per iteration = max over ranks of (estep + allreduce + mstep) / n_iter from "
             "the result's profile, best of %d runs.  normix: `BatchEMFitter(tol=-inf)`, "
             "per iteration = (T(1+K) - T(1)) / K of two warm `fit` calls; "
             "'first call' = the first 1-iteration `fit` (JAX tracing and XLA compilation).  "
             "Speedup = normix / fastest ghfit CPU configuration (1 rank x 1 thread in "
             "brackets).\n" % meta["ghfit_reps"])
    gcols = [c[0] for c in GHFIT_CONFIGS] + (["1r cuda"] if meta.get("gpu") else [])
    L.append("| model | N | d | seed | " + " | ".join("ghfit %s" % c for c in gcols)
             + " | normix | normix first call | speedup |")
    L.append("|---|---:|---:|---:|" + "---:|" * len(gcols) + "---:|---:|---:|")
    for c in sorted_cases(results):
        s = c["summary"]
        nx = c.get("normix", {})
        if s["speedup"]:
            sp = "%.0fx (%.0fx)" % (s["speedup"], s["speedup_1r1t"] or float("nan"))
        elif s["speedup_lb"]:
            sp = ">= %.0fx" % s["speedup_lb"]
        else:
            sp = "-"
        L.append("| %s | %s | %d | %d | %s | %s | %s | %s |" % (
            c["model"].upper(), fmt_n(c["n"]), c["d"], c["seed"],
            " | ".join(ghfit_cell(c["ghfit"].get(k)) for k in gcols),
            normix_iter_cell(nx), f_time(nx.get("first_call_s")), sp))

    L.append("\n## Time to convergence and final log-likelihood (each tool's own tight settings)\n")
    L.append("ghfit: defaults (`--tol 1e-10` on the relative log-likelihood and parameter "
             "changes, SQUAREM, 4 GH starts), time = `elapsed_s` of the fastest CPU "
             "configuration (read + init + iterations + write).  normix: `BatchEMFitter("
             "tol=%g, max_iter=%d)` with the configuration above, from `%s` "
             "initialisation; time = init + fit.  Log-likelihoods are totals (normix mean x N) "
             "of the returned parameters, both evaluated on the same data; "
             "rel = (ghfit - normix)/|normix|.  'normix eval' = normix's own density at "
             "ghfit's parameters, relative to ghfit's reported value; 'polish' = relative "
             "log-likelihood gain of %d normix EM iterations started from ghfit's answer "
             "(EM is monotone: > 1e-8 would mean ghfit stopped short of the maximum).  "
             "'budget' = normix's iteration limit was lowered so that it returns inside the "
             "cap ((%.0f%% of the cap - first call) / its time per iteration).\n"
             % (meta["normix_tol"], meta.get("normix_max_iter", meta["conv_max_iter"]), meta["normix_init"],
                meta["polish_iters"], 100 * meta["conv_budget_frac"]))
    L.append("| model | N | d | ghfit iters | ghfit time | ghfit loglik | normix iters | "
             "normix time | normix loglik | rel | time ratio | normix eval | polish |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in sorted_cases(results):
        s = c["summary"]
        nc = c.get("normix_conv", {})
        if nc.get("status") == "ok":
            niter = "%d%s%s" % (nc["n_iter"], "" if nc["converged"] else (
                " (budget, not conv.)" if c.get("normix_conv_budget") else " (not conv.)"),
                ", moment init" if c.get("normix_init_fallback") else "")
            ntime = f_time(nc["total_s"])
            nll = "%.10g" % nc["ll_total"]
        else:
            niter, ntime, nll = nc.get("status", "-"), (
                "> %s" % f_time(nc.get("wall_s")) if nc.get("status") == "capped" else "-"), "-"
        L.append("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            c["model"].upper(), fmt_n(c["n"]), c["d"],
            s.get("ghfit_conv_iter", "-"), f_time(s.get("ghfit_conv_s")),
            "%.10g" % s["ghfit_ll"] if s.get("ghfit_ll") is not None else "-",
            niter, ntime, nll,
            "%+.1e" % s["ll_rel"] if s.get("ll_rel") is not None else "-",
            "%.0fx" % s["conv_speedup"] if s.get("conv_speedup") else "-",
            "%+.1e" % s["eval_rel"] if s.get("eval_rel") is not None else "-",
            "%+.1e" % s["polish_gain"] if s.get("polish_gain") is not None else "-"))

    acc = results.get("acceptance")
    if acc:
        L.append("\n## Acceptance (GH, N = 1e6, d = 10)\n")
        L.append("- speed: %s\n- log-likelihood: %s\n" % (acc["speed"], acc["loglik"]))
    notes = results.get("notes") or []
    if notes:
        L.append("\n## Notes\n")
        L.extend("- " + n for n in notes)
    L.append("")
    path = os.path.join(out, "table.md")
    with open(path, "w") as f:
        f.write("\n".join(L))
    return path


def acceptance(results):
    cs = [c for c in results["cases"] if c["model"] == "gh" and c["n"] == 10 ** 6 and c["d"] == 10]
    if not cs:
        return None
    s = cs[0]["summary"]
    if s.get("speedup"):
        speed = "%.1fx faster per iteration (%s vs normix): %s (need >= 30x)" % (
            s["speedup"], s["ghfit_best"], "PASS" if s["speedup"] >= 30 else "FAIL")
    elif s.get("speedup_lb"):
        speed = ">= %.1fx (normix capped): %s" % (
            s["speedup_lb"], "PASS" if s["speedup_lb"] >= 30 else "undecided")
    else:
        speed = "not measured"
    nc = cs[0].get("normix_conv", {})
    if s.get("ll_rel") is not None:
        ll = "rel (ghfit - normix)/|normix| = %+.2e: %s (need >= -1e-8)%s" % (
            s["ll_rel"], "PASS" if s["ll_rel"] >= -1e-8 else "FAIL",
            "" if nc.get("converged") else " [normix stopped at its iteration limit, "
            "not converged]")
    else:
        ll = "normix did not finish (%s); ghfit loglik %s" % (
            nc.get("status"), s.get("ghfit_ll"))
    if s.get("polish_gain") is not None:
        ll += "; normix EM from ghfit's answer gains %+.2e relative (%s: <= 1e-8)" % (
            s["polish_gain"], "PASS" if s["polish_gain"] <= 1e-8 else "FAIL")
    return {"speed": speed, "loglik": ll}


def plot(results, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    models = sorted({c["model"] for c in results["cases"]}, key=lambda m: m != "gh")
    fig, axes = plt.subplots(1, len(models), figsize=(6.5 * len(models), 6.6), squeeze=False)
    ds = sorted({c["d"] for c in results["cases"]})
    colors = dict(zip(ds, ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]))
    for ax, model in zip(axes[0], models):
        cases = [c for c in results["cases"] if c["model"] == model]
        for d in ds:
            cd = sorted([c for c in cases if c["d"] == d], key=lambda c: c["n"])
            if not cd:
                continue
            xs = [c["n"] for c in cd if c["summary"]["ghfit_best_s"]]
            ys = [c["summary"]["ghfit_best_s"] for c in cd if c["summary"]["ghfit_best_s"]]
            ax.plot(xs, ys, "-o", color=colors[d], label="ghfit (best CPU config), d=%d" % d)
            xs = [c["n"] for c in cd if c["normix"].get("per_iter_s")]
            ys = [c["normix"]["per_iter_s"] for c in cd if c["normix"].get("per_iter_s")]
            ax.plot(xs, ys, "--s", color=colors[d], label="normix, d=%d" % d)
            lb = [(c["n"], c["normix"]["per_iter_lb_s"]) for c in cd
                  if c["normix"].get("status") == "capped" and c["normix"].get("per_iter_lb_s")]
            if lb:
                ax.plot([x for x, _ in lb], [y for _, y in lb], "^", color=colors[d],
                        markersize=10, markerfacecolor="none",
                        label="normix capped (lower bound), d=%d" % d)
            if results["meta"].get("gpu"):
                xs = [c["n"] for c in cd if c["ghfit"].get("1r cuda", {}).get("per_iter_s")]
                ys = [c["ghfit"]["1r cuda"]["per_iter_s"] for c in cd
                      if c["ghfit"].get("1r cuda", {}).get("per_iter_s")]
                if xs:
                    ax.plot(xs, ys, ":d", color=colors[d], label="ghfit CUDA, d=%d" % d)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("N (observations)")
        ax.set_ylabel("seconds per EM iteration")
        ax.set_title("%s: time per EM iteration" % model.upper())
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    fig.suptitle("ghfit vs normix %s (%s, %d cores)" % (
        results["meta"]["normix_version"], results["meta"]["cpu"], results["meta"]["cores"]),
        fontsize=11)
    fig.tight_layout()
    path = os.path.join(out, "time_per_iter.png")
    fig.savefig(path, dpi=110)
    return path


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny configuration (test suite)")
    ap.add_argument("--gpu", action="store_true", help="also time ghfit --backend cuda")
    ap.add_argument("--ghfit", default=os.environ.get("GHFIT"), required=False)
    ap.add_argument("--out", default=os.path.join(REPO, "results", "peers"))
    ap.add_argument("--cap", type=float, default=300.0, help="seconds per tool run")
    ap.add_argument("--ns", default="10000,100000,1000000")
    ap.add_argument("--ds", default="3,10,50")
    ap.add_argument("--models", default="gh,nig")
    ap.add_argument("--iters", type=int, default=10, help="K for the per-iteration timing")
    ap.add_argument("--ghfit-reps", type=int, default=3)
    ap.add_argument("--conv-max-iter", type=int, default=5000)
    ap.add_argument("--normix-tol", type=float, default=1e-10)
    ap.add_argument("--normix-max-iter", type=int, default=500,
                    help="normix's iteration limit in the convergence run (its default is 200)")
    ap.add_argument("--conv-budget-frac", type=float, default=0.6,
                    help="normix max_iter is cut to this share of --cap / (s per iteration)")
    ap.add_argument("--polish-iters", type=int, default=3,
                    help="normix EM iterations started from ghfit's answer")
    ap.add_argument("--normix-init", choices=["default", "moment"], default="default")
    ap.add_argument("--normix-configs", default=None,
                    help="comma-separated candidates (default: all; one = no choice)")
    ap.add_argument("--select-n", type=int, default=100000)
    ap.add_argument("--select-d", type=int, default=10)
    ap.add_argument("--select-iters", type=int, default=3)
    ap.add_argument("--select-cap", type=float, default=150.0)
    ap.add_argument("--seed-base", type=int, default=20260000)
    ap.add_argument("--keep-data", action="store_true", help="keep the N = 1e6 files")
    ap.add_argument("--rerun-normix-conv", action="store_true",
                    help="with --resume: redo normix's timing (no positive time) and convergence "
                    "(not ok) runs of kept cases")
    ap.add_argument("--report-only", action="store_true",
                    help="only rewrite table.md and the plot from <out>/results.json")
    ap.add_argument("--resume", action="store_true",
                    help="keep the selection and the finished cases of <out>/results.json")
    ap.add_argument("--first", default="gh:1000000:10",
                    help="run this case first (model:N:d), the acceptance case")
    args = ap.parse_args()

    if args.smoke:
        args.ns, args.ds, args.iters = "2000", "3", 3
        args.ghfit_reps, args.conv_max_iter, args.polish_iters = 1, 10, 1
        args.normix_max_iter = 10
        args.select_n, args.select_d, args.select_iters = 2000, 3, 2
        args.normix_init = "moment"
        if not args.normix_configs:
            args.normix_configs = "cpu/cpu/newton"
        args.cap = min(args.cap, 240.0)
        args.select_cap = min(args.select_cap, 120.0)
    if args.report_only:
        jp = os.path.join(args.out, "results.json")
        with open(jp) as f:
            results = json.load(f)
        for c in results["cases"]:
            c["summary"] = summarize(c)
        results["acceptance"] = acceptance(results)
        print(write_table(results, args.out), plot(results, args.out))
        return 0
    if not args.ghfit or not os.access(args.ghfit, os.X_OK):
        sys.exit("peers.py: no ghfit binary (set GHFIT or --ghfit): %r" % args.ghfit)
    args.ghfit = os.path.abspath(args.ghfit)
    os.makedirs(args.out, exist_ok=True)
    datadir = os.path.join(args.out, "data")
    os.makedirs(datadir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="peers-", dir=args.out)

    import jax
    import normix
    gpu, gpu_note = False, None
    if args.gpu:
        ok, why = gpu_present()
        if not ok:
            gpu_note = "--gpu given but no GPU detected (%s): CUDA runs skipped" % why
        elif not ghfit_has_cuda(args.ghfit):
            gpu_note = "GPU present (%s) but %s has no CUDA backend: CUDA runs skipped" % (
                why, args.ghfit)
        else:
            gpu, gpu_note = True, "ghfit --backend cuda on %s" % why
        log(gpu_note)

    ver = subprocess.run([args.ghfit, "--version"], capture_output=True, text=True)
    results = {"meta": {
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(), "cpu": cpu_name(), "cores": os.cpu_count(),
        "loadavg_start": os.getloadavg(), "ghfit": args.ghfit,
        "ghfit_version": (ver.stdout or ver.stderr).strip().splitlines()[0] if (ver.stdout or ver.stderr) else "?",
        "normix_version": normix.__version__ if hasattr(normix, "__version__") else "?",
        "jax_version": jax.__version__, "python": platform.python_version(),
        "cap_s": args.cap, "iters": args.iters, "ghfit_reps": args.ghfit_reps,
        "conv_max_iter": args.conv_max_iter, "normix_max_iter": args.normix_max_iter, "normix_tol": args.normix_tol,
        "normix_init": args.normix_init, "polish_iters": args.polish_iters,
        "conv_budget_frac": args.conv_budget_frac, "mode": "smoke" if args.smoke else "full",
        "gpu": gpu, "gpu_note": gpu_note, "seed_formula":
        "seed = %d + (0 gh | 500 nig) + 10*d + log10(N)" % args.seed_base},
        "selection": {}, "cases": [], "notes": []}
    results["meta"]["normix_version"] = _dist_version("normix")

    results["notes"] = [
        "normix's all-JAX configuration (jax/jax) runs EM as one lax.scan of max_iter "
        "steps that keeps computing (masked) after convergence, and re-compiles it on "
        "every fit() call; its time to convergence is therefore compile + max_iter "
        "iterations whatever n_iter says.  The Python-loop configurations stop at "
        "convergence but cost several times more per iteration here.",
        "ghfit's profile counts the GH multi-start iterations (--starts, default 4 x 5 "
        "iterations) under 'estep'; the fixed-iteration runs use --starts 1 so that "
        "estep/n_iter is the cost of one iteration.",
        "normix per-iteration time: the warm calls use a fresh persistent XLA cache, "
        "so the difference of a (1+K)- and a 1-iteration call is the K iterations; K "
        "grows 8x while the difference is below the per-call noise (small N).",
    ]
    gh = Ghfit(args.ghfit, tmp)
    nx = Normix(sys.executable)
    models = args.models.split(",")
    ns = [int(float(x)) for x in args.ns.split(",")]
    ds = [int(x) for x in args.ds.split(",")]
    # cheapest first (by N), so that a run stopped early has the small cases
    grid = [(m, n, d) for n in ns for m in models for d in ds]
    fm, fn, fd = args.first.split(":")
    first = (fm, int(float(fn)), int(fd))
    if first in grid:
        grid.remove(first)
        grid.insert(0, first)

    json_path = os.path.join(args.out, "results.json")

    def save():
        for c in results["cases"]:
            c["summary"] = summarize(c)
        results["acceptance"] = acceptance(results)
        with open(json_path, "w") as f:
            json.dump(results, f, indent=1, default=str)
        write_table(results, args.out)
        plot(results, args.out)

    if args.resume and os.path.exists(json_path):
        with open(json_path) as f:
            old = json.load(f)
        results["selection"] = old.get("selection", {})
        for sel in results["selection"].values():  # bounds for older files
            for c in sel["candidates"]:
                if c["status"] == "capped" and c.get("first_call_s") and c.get("wall_s"):
                    lb = (c["wall_s"] - c["first_call_s"]) / (2 + sel["iters"])
                    c["per_iter_lb_s"] = max(c.get("per_iter_lb_s") or 0.0, lb)
        results["cases"] = [c for c in old.get("cases", []) if (c["model"], c["n"], c["d"]) in grid]
        results["meta"]["resumed_from"] = old["meta"].get("started")
        results["meta"]["loadavg_start"] = old["meta"].get("loadavg_start", results["meta"]["loadavg_start"])
        results["meta"]["started"] = old["meta"].get("started", results["meta"]["started"])
        done = {(c["model"], c["n"], c["d"]) for c in results["cases"]}
        grid = [g for g in grid if g not in done]
        for c in results["cases"]:
            nxt = c.get("normix", {})
            if args.rerun_normix_conv and nxt.get("status") == "ok" and not nxt.get("per_iter_s"):
                log("re-running normix timing of %s N=%s d=%d" % (c["model"], fmt_n(c["n"]), c["d"]))
                if not os.path.exists(c["data"]):
                    gh.generate(c["model"], c["n"], c["d"], c["seed"], c["data"], args.cap)
                c["normix_first"] = nxt
                c["normix"] = nx.time(c["data"], c["model"], c["normix_config"], args.iters, args.cap)
                save()
            if args.rerun_normix_conv and c.get("normix_conv", {}).get("status") != "ok":
                log("re-running normix converge of %s N=%s d=%d" % (c["model"], fmt_n(c["n"]), c["d"]))
                if not os.path.exists(c["data"]):
                    gh.generate(c["model"], c["n"], c["d"], c["seed"], c["data"], args.cap)
                c["normix_conv_first"] = c.get("normix_conv")
                normix_converge(args, nx, c, c["data"], c["model"], c["normix_config"])
                if not args.keep_data and c["n"] >= 10 ** 6:
                    os.unlink(c["data"])
                save()
        log("resume: %d cases kept, %d to run" % (len(done), len(grid)))
    cfgs = {}
    for m in models:
        if m in results["selection"] and not args.normix_configs:
            cfgs[m] = results["selection"][m]["best"]
        elif args.normix_configs and len(args.normix_configs.split(",")) == 1:
            cfgs[m] = args.normix_configs
        else:
            cfgs[m] = select_normix(args, gh, nx, m, datadir, results)
    for i, (m, n, d) in enumerate(grid):
        log("case %d/%d: %s N=%s d=%d (load %.1f)" % (i + 1, len(grid), m, fmt_n(n), d,
                                                      os.getloadavg()[0]))
        results["cases"].append(run_case(args, gh, nx, m, n, d, cfgs[m], datadir, gpu))
        save()
    results["meta"]["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    save()
    shutil.rmtree(tmp, ignore_errors=True)
    log("wrote %s, %s, %s" % (json_path, os.path.join(args.out, "table.md"),
                              os.path.join(args.out, "time_per_iter.png")))
    with open(os.path.join(args.out, "table.md")) as f:
        print(f.read())
    return 0


def _dist_version(name):
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
