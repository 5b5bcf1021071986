/* em_start.c - where a fit starts: moment starts per family (on a large data
 * set raced on a subsample, em_sample.c; GH's nested NIG start, em_nested.c),
 * a checkpoint's or a warm start's state, and the closed-form Gaussian fit
 * (em_internal.h). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "em_internal.h"
#include "gig.h"
#include "mstep.h"

/* A start: location and covariance (mean, cov) of the data, subordinator
 * (p, a, b); Sigma scaled so that E[Y] Sigma matches cov. */
static void make_start(ghf_params *t, const double *mean, const double *cov, int d, double p, double a,
                       double b, int heavy)
{
    const ghf_gig_moments m = ghf_gig_moments_eval(p, a, b);
    double ey = (isfinite(m.e_y) && m.e_y > 0) ? m.e_y : 1.0;
    /* a heavy-tailed start (robust_sub; E[Y] is huge or infinite): Y's
     * scale is its harmonic mean */
    if (heavy && isfinite(m.e_inv) && m.e_inv > 0) ey = 1.0 / m.e_inv;
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
    make_start(t, e->o->data_mean, e->o->data_cov, e->d, sub[0], sub[1], sub[2], 0);
    return 0;
}

/* EM iterations after which a start from the data's moments and the same
 * start from their robust moments are compared, and only the better goes on */
#define GHF_START_RACE 2
/* robust z-score of the most extreme row above which the robust start is
 * heavy-tailed (robust_sub) */
#define GHF_ROBUST_HEAVY_Z 1e3

/* One start's short EM run: its parameters, the log-likelihood of its last
 * E-step, whether every E-step was finite (ok), and whether an M-step failed
 * (done: t is kept, its likelihood is known). */
typedef struct start_run {
    ghf_params t;
    double ll;
    int ok, done;
} start_run;

/* n more EM iterations of s.  0, or 1 on a run-time error. */
static int start_iterate(em_ctx *e, start_run *s, ghf_params *nx, int n, char *err, size_t errlen)
{
    char why[256];
    for (int it = 0; it < n && s->ok && !s->done; it++) {
        const int erc = ghf__em_estep(e, &s->t, 0, err, errlen);
        if (erc == 1) return 1;
        if (erc != 0 || !ghf__em_estep_ok(e)) {
            s->ok = 0;
            break;
        }
        s->ll = e->stats[GHF_ST_LL];
        if (ghf__em_mstep(e, &s->t, nx, why, sizeof why) != GHF_MSTEP_OK) {
            s->done = 1;
            break;
        }
        ghf_params_copy(&s->t, nx);
    }
    return 0;
}

static int start_usable(const start_run *s)
{
    return s->ok && isfinite(s->ll) && ghf_params_finite(&s->t);
}

/* The subordinator of the start from the robust moments: a gross outlier at
 * z robust SDs (o->data_outlier_z) from the median has a log-density of
 * about -sqrt(ab) z under a start with a > 0 (semi-heavy tails), which
 * makes that start lose the race to the data's moments (inflated by the
 * outlier) before EM can move.  For p < 0, a is lowered to at most
 * 1 / (z^2 b): sqrt(ab) <= 1/z, the law of the bulk close to the Student t
 * (the a -> 0 limit) and the outlier's cost O(log z).  p >= 0 has no such
 * limit (hyp, vg): sub unchanged. */
static void robust_sub(const em_ctx *e, const double sub[3], double out[3])
{
    const double z = e->o->data_outlier_z;
    for (int j = 0; j < 3; j++) out[j] = sub[j];
    if (!(z > GHF_ROBUST_HEAVY_Z) || !(sub[0] < 0.0) || !(sub[1] > 0.0) || !(sub[2] > 0.0)) return;
    const double amax = 1.0 / (z * z * sub[2]);
    if (amax < sub[1]) out[1] = amax;
}

/* Subordinator start sub from the data's moments (s[0]) and, with nloc = 2,
 * from their robust moments (s[1]): both run GHF_START_RACE iterations, the
 * better goes on to iters in all (the two differ in the location only, which
 * EM re-estimates at once; the other goes on only if the better one fails).
 * Returns the start to judge (NULL: neither is usable), or sets *rc. */
static start_run *start_pair(em_ctx *e, start_run *s, ghf_params *nx, int nloc, const double sub[3], int iters,
                             int *rc, char *err, size_t errlen)
{
    const ghf_em_opts *o = e->o;
    const int race = nloc == 2 && iters > GHF_START_RACE ? GHF_START_RACE : iters;
    for (int l = 0; l < nloc; l++) {
        double sl[3];
        robust_sub(e, sub, sl);
        if (l == 0) sl[0] = sub[0], sl[1] = sub[1], sl[2] = sub[2];
        make_start(&s[l].t, l ? o->data_rmean : o->data_mean, l ? o->data_rcov : o->data_cov, e->d, sl[0], sl[1],
                   sl[2], sl[1] < sub[1]);
        s[l].ll = iters == 0 ? 0.0 : -INFINITY;
        s[l].ok = 1;
        s[l].done = 0;
        if ((*rc = start_iterate(e, &s[l], nx, race, err, errlen)) != 0) return NULL;
    }
    int k = nloc == 2 && start_usable(&s[1]) && (!start_usable(&s[0]) || s[1].ll > s[0].ll);
    for (int tries = 0; tries < nloc; tries++, k = nloc - 1 - k) {
        if ((*rc = start_iterate(e, &s[k], nx, iters - race, err, errlen)) != 0) return NULL;
        if (start_usable(&s[k])) return &s[k];
    }
    return NULL;
}

/* The race of the starts: every subordinator candidate from the data's
 * moments and, when the data have gross outliers, from their robust
 * moments too (the better of the two by start_pair), each run for iters EM
 * iterations on e->be and judged by its log-likelihood.  Sets out, *best
 * and *have (a usable candidate); 0 or 1 (run-time error). */
static int race(em_ctx *e, ghf_params *out, int nsub, int nloc, double (*cand)[3], int iters, double *best,
                int *have, char *err, size_t errlen)
{
    const int d = e->d;
    start_run s[2];
    ghf_params nx;
    int fail = ghf_params_alloc(&nx, d);
    for (int l = 0; l < 2; l++) fail |= ghf_params_alloc(&s[l].t, d);
    if (fail) {
        ghf_params_free(&nx);
        for (int l = 0; l < 2; l++) ghf_params_free(&s[l].t);
        snprintf(err, errlen, "out of memory");
        return 1;
    }
    *best = -INFINITY;
    *have = 0;
    int rc = 0;
    for (int sub = 0; sub < nsub && rc == 0; sub++) {
        const start_run *c = start_pair(e, s, &nx, nloc, cand[sub], iters, &rc, err, errlen);
        if (c && c->ll > *best) {
            *best = c->ll;
            ghf_params_copy(out, &c->t);
            *have = 1;
        }
    }
    for (int l = 0; l < 2; l++) ghf_params_free(&s[l].t);
    ghf_params_free(&nx);
    return rc;
}

/* The best start: the race of the starts (with one candidate in all, no
 * iterations); on a large data set the race runs on a subsample and its
 * winner is judged on all rows (em_sample.c; the race runs again on all
 * rows if the winner's log-likelihood is not finite there); then, for GH,
 * the nested NIG fit (em_nested.c).  Returns 0, 1 (run-time error) or 2
 * (no candidate gave a finite likelihood). */
static int initialise(em_ctx *e, ghf_params *out, char *err, size_t errlen)
{
    const ghf_em_opts *o = e->o;
    double cand[16][3];
    const int nsub = ghf_model_starts(&e->model, e->d, o->n_starts, o->seed, cand);
    const int nloc = o->data_rmean && o->data_rcov ? 2 : 1;
    const int iters = nsub * nloc > 1 ? o->start_iters : 0;
    double best = -INFINITY;
    int have = 0, rc = 0, done = 0;
    if (iters > 0 && ghf__em_sample_open(e, err, errlen)) return 1; /* agreed */
    if (e->sample && iters > 0) {
        ghf_backend *all = e->be;
        e->be = e->sample;
        rc = race(e, out, nsub, nloc, cand, iters, &best, &have, err, errlen);
        e->be = all;
        rc = ghf_agree(e->comm, rc, err, errlen); /* each rank raced alone */
        if (rc == 0) rc = ghf__em_sample_judge(e, out, &best, &have, err, errlen);
        done = have;
    }
    if (rc == 0 && !done) rc = race(e, out, nsub, nloc, cand, iters, &best, &have, err, errlen);
    if (rc == 0) rc = ghf__em_nested_start(e, out, &best, &have, err, errlen);
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
