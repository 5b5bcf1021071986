/* gofboot.c - parametric-bootstrap p-values of the goodness-of-fit
 * statistics (gofboot.h): draw, refit with the EM driver, recompute; and the
 * gof datasets shared by `ghfit gof` and the job key `gof:`. */
#include "gofboot.h"

#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "backend.h"
#include "em.h"
#include "fit.h"
#include "model.h"
#include "sample.h"
#include "util.h"

void ghf_gof_refit_of_law(const ghf_fit_law *law, ghf_family fam, double tol, int max_iter, ghf_gof_refit *m)
{
    const ghf_family_def *fd = ghf_family_get(fam);
    memset(m, 0, sizeof *m);
    m->family = fam;
    m->symmetric = law->symmetric;
    /* p held by the user (gh, vg, t): p_fixed recorded and not the family's own */
    m->fix_p = fd && isnan(fd->family_p(law->d)) && isfinite(law->p_fixed);
    m->p_fixed = m->fix_p ? law->p_fixed : NAN;
    m->tol = tol;
    m->max_iter = max_iter;
}

uint64_t ghf_gof_boot_seed(int64_t seed, int b)
{
    uint64_t z = (uint64_t)seed * 0x9E3779B97F4A7C15ULL + (uint64_t)(b + 1) * 0xD1B54A32D192ED03ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

void ghf_gof_boot_free(ghf_gof_boot *b)
{
    free(b->ks_p);
    free(b->ad_p);
    free(b->cvm_p);
    b->ks_p = b->ad_p = b->cvm_p = NULL;
}

/* ------------------------------------------------------------------------ */

/* replicates of at most this many values run on one OpenMP thread */
#define GHF_GOF_BOOT_SERIAL 200000

/* One replicate's work space (one rank). */
typedef struct rep_ws {
    const ghf_fit_law *law;
    const ghf_gof_refit *m;
    const ghf_gof_input *tmpl;
    ghf_params t;  /* the fitted law (the draws' law and the refit's start) */
    double *L;     /* [d*d] its Cholesky factor */
    double *xraw;  /* [n*d] the draw */
    double *zb;    /* [d] */
    int64_t n;
    void (*tick)(void *); /* a job's heartbeat, or NULL */
    void *tick_arg;
} rep_ws;

/* Replicate outcomes: done, failed (counted, left out), or a run-time
 * failure of this rank (out of memory: the command fails). */
enum { REP_OK = 0, REP_FAILED = 1, REP_RUNTIME = 2 };



/* 1 if the refitted law is usable (gauss: p, a, b are NaN) */
static int refit_finite(const ghf_params *t, const ghf_gof_refit *m)
{
    if (m->family != GHF_FAMILY_GAUSS) return ghf_params_finite(t);
    int ok = 1;
    for (int i = 0; i < t->d; i++) ok &= isfinite(t->mu[i]) != 0;
    for (int i = 0; i < t->d * t->d; i++) ok &= isfinite(t->sigma[i]) != 0;
    return ok;
}

/* The EM refit of the rows in data (prepared): its parameters in data
 * coordinates into outp.  0, or 1 with the reason. */
static int rep_refit(const rep_ws *w, const ghf_data *data, uint64_t sb, ghf_params *outp, int *iters, int *capped, char *why,
                     size_t whylen)
{
    const int d = w->law->d;
    char e[512] = "";
    int st = 0;
    ghf_backend *be = ghf_backend_cpu_create(MPI_COMM_SELF, data->x, data->nrows, d, e, sizeof e);
    ghf_params init;
    memset(&init, 0, sizeof init);
    if (!be || ghf_params_alloc(&init, d) != 0) {
        snprintf(why, whylen, "%s", be ? "out of memory" : e);
        ghf_params_free(&init);
        if (be) be->destroy(be);
        return REP_RUNTIME;
    }
    ghf_em_opts eo;
    ghf_em_opts_defaults(&eo);
    eo.family = w->m->family;
    eo.symmetric = w->m->symmetric;
    eo.fix_p = w->m->fix_p;
    eo.p_fixed = w->m->p_fixed;
    eo.tol = w->m->tol;
    eo.max_iter = w->m->max_iter;
    eo.seed = sb;
    eo.quiet = 1;
    ghf_data_em_opts(data, &eo);
    ghf_data_params_to_internal(data, &w->t, &init); /* start from the fitted law */
    const ghf_model mm = {w->m->family, w->m->symmetric, w->m->fix_p, w->m->p_fixed};
    const double fp = ghf_model_fixed_p(&mm, d);
    if (!isnan(fp)) init.p = fp;
    eo.init = &init;
    eo.beat = w->tick, eo.beat_arg = w->tick_arg; /* a job's heartbeat at every E-step of the refit */
    ghf_em_result res;
    memset(&res, 0, sizeof res);
    if (ghf_em_fit(MPI_COMM_SELF, be, d, &eo, &res, e, sizeof e) != 0) {
        snprintf(why, whylen, "refit: %.200s", e);
        st = REP_FAILED;
    } else if (res.outcome == GHF_EM_FAILED || res.outcome == GHF_EM_INTERRUPTED || !refit_finite(&res.params, w->m)) {
        snprintf(why, whylen, "refit: %.200s", res.status);
        st = REP_FAILED;
    } else {
        ghf_data_params_to_data(data, &res.params, outp);
        *iters = res.n_iter;
        *capped = res.outcome == GHF_EM_MAX_ITER;
    }
    ghf_em_result_free(&res);
    ghf_params_free(&init);
    be->destroy(be);
    return st;
}

/* Replicate b: draw, prepare, refit, statistics into T[3(d+1)] (margins'
 * ks, ad, cvm, then the radial ones).  REP_OK, or REP_FAILED / REP_RUNTIME
 * with the reason. */
static int rep_one(const rep_ws *w, int64_t seed, int b, double *T, int *iters, int *capped, char *why, size_t whylen)
{
    const int d = w->law->d;
    const int64_t n = w->n;
    const uint64_t sb = ghf_gof_boot_seed(seed, b);
    const int64_t bad = ghf_sample_rows(&w->t, w->L, sb, 0, n, w->xraw, w->zb);
    if (bad >= 0) {
        snprintf(why, whylen, "row %lld of the draw is not finite", (long long)bad);
        return REP_FAILED;
    }
    ghf_shard sh;
    memset(&sh, 0, sizeof sh);
    sh.n_global = sh.nrows = n;
    sh.d = d;
    sh.file_dtype_bits = 64;
    sh.x = malloc((size_t)n * (size_t)d * sizeof(double));
    if (!sh.x) {
        snprintf(why, whylen, "out of memory for a replicate of %lld x %d", (long long)n, d);
        return REP_RUNTIME;
    }
    memcpy(sh.x, w->xraw, (size_t)n * (size_t)d * sizeof(double));
    ghf_data data;
    ghf_params outp;
    memset(&outp, 0, sizeof outp);
    int st = ghf_data_prepare(MPI_COMM_SELF, &sh, "the bootstrap sample", &data, why, whylen);
    st = st == 1 ? REP_RUNTIME : st ? REP_FAILED : REP_OK; /* 1: out of memory; 2: unusable draw */
    if (!st) {
        if (ghf_params_alloc(&outp, d) != 0) {
            snprintf(why, whylen, "out of memory");
            st = REP_RUNTIME;
        } else {
            st = rep_refit(w, &data, sb, &outp, iters, capped, why, whylen);
        }
        ghf_data_free(&data);
    }
    ghf_shard_free(&sh);
    if (!st) {
        ghf_gof_input in = *w->tmpl;
        in.mu = outp.mu, in.gamma = outp.gamma, in.sigma = outp.sigma;
        in.p = outp.p, in.a = outp.a, in.b = outp.b;
        in.x = w->xraw, in.n = (size_t)n;
        in.Q = 0, in.want_pit = 0, in.progress = NULL;
        in.tick = w->tick, in.tick_arg = w->tick_arg;
        ghf_gof_result r;
        char e[512];
        if (ghf_gof_compute(&in, &r, e, sizeof e) != 0) {
            snprintf(why, whylen, "statistics under the refit: %.200s", e);
            st = REP_FAILED;
        } else {
            for (int j = 0; j < d; j++) T[j] = r.ks[j], T[d + j] = r.ad[j], T[2 * d + j] = r.cvm[j];
            T[3 * d] = r.radial.ks, T[3 * d + 1] = r.radial.ad, T[3 * d + 2] = r.radial.cvm;
            ghf_gof_result_free(&r);
        }
    }
    ghf_params_free(&outp);
    return st;
}

static void ws_free(rep_ws *w)
{
    ghf_params_free(&w->t);
    free(w->L);
    free(w->xraw);
    free(w->zb);
}

static int ws_init(rep_ws *w, const ghf_fit_law *law, const ghf_gof_refit *m, const ghf_gof_input *tmpl, int64_t n)
{
    const int d = law->d;
    memset(w, 0, sizeof *w);
    w->law = law, w->m = m, w->tmpl = tmpl, w->n = n;
    w->L = calloc((size_t)d * (size_t)d, sizeof(double));
    w->xraw = malloc((size_t)(n > 0 ? n : 1) * (size_t)d * sizeof(double));
    w->zb = malloc((size_t)d * sizeof(double));
    if (ghf_params_alloc(&w->t, d) != 0 || !w->L || !w->xraw || !w->zb) return 1;
    memcpy(w->t.mu, law->mu, (size_t)d * sizeof(double));
    memcpy(w->t.gamma, law->gamma, (size_t)d * sizeof(double));
    memcpy(w->t.sigma, law->sigma, (size_t)d * d * sizeof(double));
    w->t.p = law->p, w->t.a = law->a, w->t.b = law->b;
    if (m->family == GHF_FAMILY_GAUSS) w->t.p = w->t.a = w->t.b = NAN; /* Y = 1 */
    return ghf_cholesky(d, w->t.sigma, w->L) != 0 ? 2 : 0;
}

/* rank 0: the p-values from the gathered [B][1 + K] table (flag, statistics) */
static void boot_pvalues(const double *tab, int B, int d, const ghf_gof_result *obs, ghf_gof_boot *out)
{
    const int K = 3 * (d + 1);
    for (int j = 0; j < d; j++) out->ks_p[j] = out->ad_p[j] = out->cvm_p[j] = NAN;
    out->rks_p = out->rad_p = out->rcvm_p = NAN;
    double *Tobs = malloc((size_t)K * sizeof(double)), *cnt = calloc((size_t)K, sizeof(double));
    if (!Tobs || !cnt) { /* tiny: the p-values stay NaN */
        free(Tobs), free(cnt);
        return;
    }
    for (int j = 0; j < d; j++) Tobs[j] = obs->ks[j], Tobs[d + j] = obs->ad[j], Tobs[2 * d + j] = obs->cvm[j];
    Tobs[3 * d] = obs->radial.ks, Tobs[3 * d + 1] = obs->radial.ad, Tobs[3 * d + 2] = obs->radial.cvm;
    int nok = 0, ncap = 0;
    for (int b = 0; b < B; b++) {
        const double *row = tab + (size_t)b * (size_t)(K + 1);
        if (row[0] == 0.0) continue;
        nok++;
        ncap += row[0] == 2.0;
        for (int k = 0; k < K; k++) cnt[k] += row[1 + k] >= Tobs[k];
    }
    out->n_ok = nok;
    out->n_capped = ncap;
    out->n_failed = B - nok;
    double *p = cnt; /* in place */
    for (int k = 0; k < K; k++) p[k] = nok > 0 ? (1.0 + cnt[k]) / (nok + 1.0) : NAN;
    for (int j = 0; j < d; j++) out->ks_p[j] = p[j], out->ad_p[j] = p[d + j], out->cvm_p[j] = p[2 * d + j];
    out->rks_p = p[3 * d], out->rad_p = p[3 * d + 1], out->rcvm_p = p[3 * d + 2];
    free(Tobs), free(cnt);
}

/* The first failed replicate's reason onto every rank (its owner's). */
static void boot_first_failure(MPI_Comm comm, int first, const char *why, ghf_gof_boot *out)
{
    int size, rank, all = 0;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &rank);
    MPI_Allreduce(&first, &all, 1, MPI_INT, MPI_MIN, comm);
    out->why[0] = '\0';
    if (all == INT32_MAX) return;
    if (rank == all % size) snprintf(out->why, sizeof out->why, "replicate %d: %s", all + 1, why);
    MPI_Bcast(out->why, (int)sizeof out->why, MPI_CHAR, all % size, comm);
}

int ghf_gof_boot_check(int B, int d, char *err, size_t errlen)
{
    const int K = 3 * (d + 1);
    if ((int64_t)B * (K + 1) <= INT_MAX) return 0; /* the table's all-reduce count is an int */
    snprintf(err, errlen, "gof --bootstrap: %d replicates x %d statistics is too many (at most %d values)", B, K + 1,
             INT_MAX);
    return 2;
}

int ghf_gof_bootstrap(MPI_Comm comm, const ghf_fit_law *law, const ghf_gof_refit *m, int64_t n,
                      const ghf_gof_input *tmpl, const ghf_gof_result *obs, int B, int64_t seed, int progress,
                      void (*tick)(void *), void *tick_arg, ghf_gof_boot *out, char *err, size_t errlen)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    const int d = law->d, K = 3 * (d + 1);
    memset(out, 0, sizeof *out);
    out->B = B, out->seed = seed;
    if (ghf_gof_boot_check(B, d, err, errlen)) return 2;
    rep_ws w;
    int wst = ws_init(&w, law, m, tmpl, n);
    w.tick = tick, w.tick_arg = tick_arg;
    double *tab = calloc((size_t)B * (size_t)(K + 1), sizeof(double));
    double *sum = rank == 0 ? calloc((size_t)B * (size_t)(K + 1), sizeof(double)) : NULL;
    if (rank == 0) {
        out->ks_p = malloc((size_t)d * sizeof(double));
        out->ad_p = malloc((size_t)d * sizeof(double));
        out->cvm_p = malloc((size_t)d * sizeof(double));
    }
    const int oom = wst == 1 || !tab || (rank == 0 && (!sum || !out->ks_p || !out->ad_p || !out->cvm_p));
    if (oom) snprintf(err, errlen, "gof --bootstrap: out of memory for %d replicates of %lld x %d", B, (long long)n, d);
    else if (wst == 2) snprintf(err, errlen, "gof --bootstrap: the fit's Sigma is not positive definite");
    int st = ghf_agree(comm, oom ? 1 : wst, err, errlen);
    int first = INT32_MAX, mine = 0, done = 0, next_pct = 10, runtime = 0;
    char why[320] = "";
    int64_t iters = 0;
    for (int b = rank; b < B; b += size) mine++;
    /* small replicates: one thread each (the ranks are the parallelism; the
     * results do not depend on the thread count) */
    const int nthr = omp_get_max_threads();
    if (n * (int64_t)d <= GHF_GOF_BOOT_SERIAL) omp_set_num_threads(1);
    for (int b = rank; !st && b < B; b += size) { /* no collective in here: a failure stays local */
        double *row = tab + (size_t)b * (size_t)(K + 1);
        char e[320] = "";
        int it = 0, capped = 0;
        const int bad = ghf_test_fail("gofboot", e, sizeof e) ? REP_FAILED : rep_one(&w, seed, b, row + 1, &it, &capped, e, sizeof e);
        if (bad == REP_RUNTIME) { /* this rank cannot go on: agreed after the loop */
            snprintf(err, errlen, "gof --bootstrap: replicate %d: %s", b + 1, e);
            runtime = 1;
            break;
        }
        if (bad) {
            memset(row, 0, (size_t)(K + 1) * sizeof(double));
            if (b < first) first = b, snprintf(why, sizeof why, "%s", e);
        } else {
            row[0] = capped ? 2.0 : 1.0; /* 2: kept, but the refit stopped at max_iter */
            iters += it;
        }
        done++;
        if (tick) tick(tick_arg);
        if (progress && rank == 0 && done * 100 >= next_pct * mine && done < mine) {
            const int approx = done * size < B ? done * size : B;
            printf("gof: bootstrap: about %d/%d replicates done\n", approx, B);
            fflush(stdout);
            while (done * 100 >= next_pct * mine) next_pct += 10;
        }
    }
    omp_set_num_threads(nthr);
    if (!st) st = ghf_agree(comm, runtime, err, errlen);
    if (!st) {
        MPI_Reduce(tab, sum, B * (K + 1), MPI_DOUBLE, MPI_SUM, 0, comm);
        int64_t itot = 0;
        MPI_Reduce(&iters, &itot, 1, MPI_INT64_T, MPI_SUM, 0, comm);
        out->iters = itot;
        boot_first_failure(comm, first, why, out);
        if (rank == 0) boot_pvalues(sum, B, d, obs, out);
    }
    free(tab);
    free(sum);
    ws_free(&w);
    if (st) ghf_gof_boot_free(out);
    return st;
}

/* ------------------------------------------------------------------------ */

int ghf_gof_arrays(const char *prefix, int64_t d, int64_t Q, int64_t n, const ghf_gof_result *r,
                   const ghf_gof_boot *bt, ghf_gof_names *nm, ghf_h5_array *a)
{
    const ghf_gof_stat *rs = &r->radial;
    int k = 0;
#define ARR(nmv, rk, d0, d1, d2, v, ds)                                                                               \
    do {                                                                                                             \
        snprintf(nm->s[k], sizeof nm->s[k], "%s%s", prefix, nmv);                                                    \
        a[k] = (ghf_h5_array){nm->s[k], rk, {d0, d1, d2}, v, ds};                                                    \
        k++;                                                                                                         \
    } while (0)
    ARR("margins/ks", 1, d, 0, 0, r->ks, "Kolmogorov-Smirnov D_n of each margin's PITs [d]");
    ARR("margins/ad", 1, d, 0, 0, r->ad, "Anderson-Darling A^2 of each margin's PITs [d]");
    ARR("margins/cvm", 1, d, 0, 0, r->cvm, "Cramer-von Mises W^2 of each margin's PITs [d]");
    ARR("margins/ks_p", 1, d, 0, 0, r->ks_p, "asymptotic p-value of ks (parameters taken as known) [d]");
    ARR("margins/ad_p", 1, d, 0, 0, r->ad_p, "asymptotic p-value of ad (parameters taken as known) [d]");
    ARR("margins/cvm_p", 1, d, 0, 0, r->cvm_p, "asymptotic p-value of cvm (parameters taken as known) [d]");
    ARR("margins/qq", 3, d, Q, 2, r->qq,
        "[d][Q][2]: (model quantile, sample quantile) at probabilities (i - 0.5)/Q; sample: R's type 7");
    ARR("radial/ks", 0, 0, 0, 0, &rs->ks, "Kolmogorov-Smirnov D_n of the PITs of q = (x-mu)' Sigma^-1 (x-mu)");
    ARR("radial/ad", 0, 0, 0, 0, &rs->ad, "Anderson-Darling A^2 of the radial PITs");
    ARR("radial/cvm", 0, 0, 0, 0, &rs->cvm, "Cramer-von Mises W^2 of the radial PITs");
    ARR("radial/ks_p", 0, 0, 0, 0, &rs->ks_p, "asymptotic p-value of radial/ks");
    ARR("radial/ad_p", 0, 0, 0, 0, &rs->ad_p, "asymptotic p-value of radial/ad");
    ARR("radial/cvm_p", 0, 0, 0, 0, &rs->cvm_p, "asymptotic p-value of radial/cvm");
    ARR("radial/qq", 2, Q, 2, 0, r->rqq, "[Q][2]: (model quantile, sample quantile) of q at (i - 0.5)/Q");
    if (r->pit) {
        ARR("margins/pit", 2, n, d, 0, r->pit, "per margin j: the PIT u_ij = F_j(x_ij) of its fitted marginal law");
        ARR("radial/pit", 1, n, 0, 0, r->rpit, "the PIT of each row's radial statistic q under the fit");
    }
    if (bt) {
        const char *bd = "parametric-bootstrap p-value (1 + #{T_b >= T}) / (B_ok + 1) of ";
        static const char *const what[6] = {"margins/ks [d]", "margins/ad [d]", "margins/cvm [d]",
                                            "radial/ks",      "radial/ad",      "radial/cvm"};
        static char descs[6][160]; /* the same text on every call */
        for (int i = 0; i < 6; i++) snprintf(descs[i], sizeof descs[i], "%s%s", bd, what[i]);
        ARR("margins/ks_p_boot", 1, d, 0, 0, bt->ks_p, descs[0]);
        ARR("margins/ad_p_boot", 1, d, 0, 0, bt->ad_p, descs[1]);
        ARR("margins/cvm_p_boot", 1, d, 0, 0, bt->cvm_p, descs[2]);
        ARR("radial/ks_p_boot", 0, 0, 0, 0, &bt->rks_p, descs[3]);
        ARR("radial/ad_p_boot", 0, 0, 0, 0, &bt->rad_p, descs[4]);
        ARR("radial/cvm_p_boot", 0, 0, 0, 0, &bt->rcvm_p, descs[5]);
    }
#undef ARR
    return k;
}
