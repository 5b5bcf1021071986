/* em_start.c - where a fit starts: moment starts per family, the nested NIG
 * start of GH, a checkpoint's or a warm start's state, and the closed-form
 * Gaussian fit (em_internal.h). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "em_internal.h"
#include "gig.h"
#include "mstep.h"

/* A start: location and covariance (mean, cov) of the data, subordinator
 * (p, a, b); Sigma scaled so that E[Y] Sigma matches cov. */
static void make_start(ghf_params *t, const double *mean, const double *cov, int d, double p, double a,
                       double b)
{
    const ghf_gig_moments m = ghf_gig_moments_eval(p, a, b);
    const double ey = (isfinite(m.e_y) && m.e_y > 0) ? m.e_y : 1.0;
    for (int i = 0; i < d; i++) {
        t->mu[i] = mean ? mean[i] : 0.0;
        t->gamma[i] = 0.0;
    }
    for (int i = 0; i < d * d; i++) t->sigma[i] = cov[i] / ey;
    /* a tiny ridge keeps constant columns from failing the first Cholesky */
    double tr = 0.0;
    for (int i = 0; i < d; i++) tr += cov[i * d + i];
    for (int i = 0; i < d; i++) t->sigma[i * d + i] += 1e-12 * (tr / d) / ey + 1e-300;
    t->p = p;
    t->a = a;
    t->b = b;
}

/* The near-Gaussian point of the family: the data's mean and covariance,
 * gamma = 0, and a subordinator with E[Y] ~ 1 and CV^2 = GHF_KAPPA_GAUSS.
 * -1 if the family has none (p held fixed on a face of the GIG domain). */
int ghf__em_near_gaussian(const em_ctx *e, ghf_params *t)
{
    double sub[3];
    if (ghf_model_near_gauss(&e->model, e->d, GHF_KAPPA_GAUSS, sub) != 0) return -1;
    make_start(t, e->o->data_mean, e->o->data_cov, e->d, sub[0], sub[1], sub[2]);
    return 0;
}

/* GH with p free nests NIG (p = -1/2): the NIG fit of the same data, run to
 * convergence (at most max_iter iterations, like the fit itself), is one more
 * start candidate.  EM never loses likelihood, so the GH fit then ends at least as
 * high as the NIG fit, whichever local optimum each finds (on data close to
 * Gaussian, GH's own starts can run into a face of the GIG domain while NIG
 * reaches a better interior point). */
static int nested_start(em_ctx *e, ghf_params *out, double *best, int *have, char *err, size_t errlen)
{
    const ghf_em_opts *o = e->o;
    if (o->family != GHF_FAMILY_GH || o->fix_p || o->no_nested) return 0;
    /* (symmetric GH nests symmetric NIG: the same holds) */
    ghf_em_opts no = *o;
    no.family = GHF_FAMILY_NIG;
    no.quiet = 1;
    no.on_state = NULL;
    no.on_state_ctx = NULL;
    no.resume = NULL;
    no.init = NULL;
    no.stop_flag = NULL;
    no.no_nested = 1;
    no.nested_run = 1;
    ghf_em_result nr;
    const int rc = ghf_em_fit(e->comm, e->be, e->d, &no, &nr, err, errlen);
    if (rc == 0 && (nr.outcome == GHF_EM_CONVERGED || nr.outcome == GHF_EM_MAX_ITER || nr.outcome == GHF_EM_BOUNDARY) &&
        isfinite(nr.loglik) && nr.loglik > *best && ghf_params_finite(&nr.params)) {
        *best = nr.loglik;
        ghf_params_copy(out, &nr.params);
        *have = 1;
    }
    ghf_em_result_free(&nr);
    return rc;
}

/* The best start: every subordinator candidate from the data's moments and,
 * when the data have gross outliers, from their robust moments too, each run
 * for start_iters EM iterations and judged by its log-likelihood (with one
 * candidate in all, no iterations).  Returns 0, 1 (run-time error) or 2 (no
 * candidate gave a finite likelihood). */
static int initialise(em_ctx *e, ghf_params *out, char *err, size_t errlen)
{
    const ghf_em_opts *o = e->o;
    const int d = e->d;
    double cand[16][3];
    const int nsub = ghf_model_starts(&e->model, d, o->n_starts, o->seed, cand);
    const int nloc = o->data_rmean && o->data_rcov ? 2 : 1;
    const int nc = nsub * nloc;
    ghf_params t, nx;
    if (ghf_params_alloc(&t, d) || ghf_params_alloc(&nx, d)) {
        ghf_params_free(&t);
        snprintf(err, errlen, "out of memory");
        return 1;
    }
    double best = -INFINITY;
    int have = 0, rc = 0;
    char why[256];
    for (int c = 0; c < nc && rc == 0; c++) {
        const int sub = c % nsub, robust = c / nsub;
        make_start(&t, robust ? o->data_rmean : o->data_mean, robust ? o->data_rcov : o->data_cov, d,
                   cand[sub][0], cand[sub][1], cand[sub][2]);
        double ll = -INFINITY;
        int ok = 1;
        const int iters = nc > 1 ? o->start_iters : 0;
        for (int it = 0; it < iters && ok; it++) {
            const int erc = ghf__em_estep(e, &t, 0, err, errlen);
            if (erc == 1) {
                rc = 1;
                break;
            }
            if (erc != 0 || !ghf__em_estep_ok(e)) {
                ok = 0;
                break;
            }
            ll = e->stats[GHF_ST_LL];
            /* keep t when the step fails: its likelihood is known */
            if (ghf__em_mstep(e, &t, &nx, why, sizeof why) != GHF_MSTEP_OK) break;
            ghf_params_copy(&t, &nx);
        }
        if (rc) break;
        if (iters == 0) ll = 0.0;
        if (ok && isfinite(ll) && ll > best && ghf_params_finite(&t)) {
            best = ll;
            ghf_params_copy(out, &t);
            have = 1;
        }
    }
    ghf_params_free(&t);
    ghf_params_free(&nx);
    if (rc == 0) rc = nested_start(e, out, &best, &have, err, errlen);
    if (rc) return rc;
    if (!have) {
        snprintf(err, errlen, "initialisation failed: no starting point gave a finite likelihood");
        return 2;
    }
    /* normalise the gauge of the chosen start */
    if (ghf_derive(out, &e->g) == 0) ghf_params_normalize(out, e->g.logdet);
    return 0;
}

/* The starting state: a checkpoint's, the caller's, or the best start. */
int ghf__em_start_state(em_ctx *e, ghf_em_state *st, int max_iter, ghf_em_result *r, char *err, size_t errlen)
{
    const ghf_em_opts *o = e->o;
    char why[256];
    const ghf_params *given = o->resume ? &o->resume->cur : o->init;
    if (given && !ghf_model_sub_ok(&e->model, e->d, given->p, given->a, given->b, why, sizeof why)) {
        snprintf(err, errlen, "the %s parameters are not of this model: %s", o->resume ? "checkpoint's" : "starting",
                 why);
        return 2;
    }
    if (o->resume) {
        st->iter = o->resume->iter;
        ghf_params_copy(&st->cur, &o->resume->cur);
        ghf_params_copy(&st->prev, &o->resume->prev);
        if (st->iter > max_iter) st->iter = max_iter;
        memcpy(st->trace, o->resume->trace, (size_t)st->iter * sizeof(double));
        return 0;
    }
    if (o->init) {
        ghf_params_copy(&st->cur, o->init);
        if (ghf_derive(&st->cur, &e->g) != 0) {
            snprintf(err, errlen, "the starting parameters have a Sigma that is not positive definite");
            return 2;
        }
        ghf_params_normalize(&st->cur, e->g.logdet);
        return 0;
    }
    const int irc = initialise(e, &st->cur, err, errlen);
    if (irc == 2) {
        /* no finite start: report as a failed fit, not a crash */
        ghf_params_copy(&r->params, &st->cur);
        r->outcome = GHF_EM_FAILED;
        snprintf(r->status, sizeof r->status, "failed: %s", err);
        r->loglik = -INFINITY;
        r->n_trace = 0;
        return -1;
    }
    return irc;
}

/* The Gaussian family: its maximum likelihood is in closed form, the data's
 * mean and biased covariance (n, not n - 1); no EM iterations. */
void ghf__em_gaussian_fit(em_ctx *e, ghf_em_result *r)
{
    const int d = e->d;
    ghf_params *t = &r->params;
    for (int j = 0; j < d; j++) {
        t->mu[j] = e->o->data_mean ? e->o->data_mean[j] : 0.0;
        t->gamma[j] = 0.0;
    }
    memcpy(t->sigma, e->o->data_cov, (size_t)d * d * sizeof(double));
    t->p = t->a = t->b = NAN;
    r->loglik = e->o->ll_gauss;
    r->n_iter = 0;
    r->n_trace = 1;
    r->trace[0] = r->loglik;
    if (isfinite(r->loglik)) {
        r->outcome = GHF_EM_CONVERGED;
        r->converged = 1;
        snprintf(r->status, sizeof r->status, "converged (closed form: the sample mean and covariance)");
    } else {
        r->outcome = GHF_EM_BOUNDARY;
        snprintf(r->status, sizeof r->status,
                 "boundary: the covariance is singular (collinear columns): the Gaussian likelihood is unbounded");
    }
}
