/* em.c - the distributed EM driver (see em.h): starts, plain EM steps,
 * SQUAREM cycles, the convergence test, and the rescues at the edges of the
 * parameter space (the Gaussian limit, collapsing fits). */
#include "em.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gig.h"
#include "mstep.h"

/* sqrt(ab) above which the fit is at the Gaussian boundary (CV of Y < 1e-4) */
#define GHF_OMEGA_MAX 1e8
/* squared coefficient of variation of Y of the near-Gaussian point of a family */
#define GHF_KAPPA_GAUSS 1e-8
/* below this squared CV of Y the fit has reached the Gaussian limit (kurtosis
 * within ~1e-6 of the normal law's) */
#define GHF_KAPPA_LIMIT 1e-6
/* pivot ratio of the correlation-scaled Cholesky factor of Sigma below which
 * Sigma counts as singular (rounding would break the factorisation near 1e-16) */
#define GHF_SIGMA_PIVOT_MIN 1e-13
/* Var[log Y] above which a fit whose log-likelihood keeps growing fast is
 * collapsing (the mixing law spreads over more than 10 e-folds) */
#define GHF_VARLOG_COLLAPSE 30.0
/* ... or whose squared CV exceeds this */
#define GHF_KAPPA_COLLAPSE 1e4
/* a log-likelihood gain per observation and iteration that EM never makes
 * for long on a bounded likelihood */
#define GHF_GAIN_COLLAPSE 0.1
/* margin (relative) for decisions between two log-likelihoods, far above
 * round-off, so that every rank count takes the same decision */
#define GHF_LL_MARGIN 1e-13

static const char PRECISION_STATUS[] =
    "boundary: the numerical limit (beyond this point the log-likelihood cannot be evaluated to 1e-12: the skewness "
    "explains a direction or a few gross outliers with a mixing variable far larger than the rest's)";
static const char GAUSS_LIMIT_STATUS[] =
    "boundary: the Gaussian limit (the mixing variable degenerates to a constant: the data are no heavier-tailed "
    "than normal)";

void ghf_em_opts_defaults(ghf_em_opts *o)
{
    memset(o, 0, sizeof *o);
    o->family = GHF_FAMILY_GH;
    o->max_iter = GHF_DEFAULT_MAX_ITER;
    o->tol = GHF_DEFAULT_TOL;
    o->seed = 1;
    o->n_starts = GHF_DEFAULT_STARTS;
    o->start_iters = GHF_DEFAULT_START_ITERS;
    o->label = "";
    o->accel = 1;
    o->ll_gauss = NAN;
}

int ghf_em_state_alloc(ghf_em_state *s, int d, int max_iter)
{
    memset(s, 0, sizeof *s);
    s->trace_cap = max_iter + 2;
    s->trace = calloc((size_t)s->trace_cap, sizeof(double));
    if (!s->trace || ghf_params_alloc(&s->cur, d) || ghf_params_alloc(&s->prev, d)) {
        ghf_em_state_free(s);
        return -1;
    }
    return 0;
}

void ghf_em_state_free(ghf_em_state *s)
{
    free(s->trace);
    s->trace = NULL;
    ghf_params_free(&s->cur);
    ghf_params_free(&s->prev);
}

void ghf_em_result_free(ghf_em_result *r)
{
    ghf_params_free(&r->params);
    free(r->trace);
    r->trace = NULL;
}

static double norm2(const double *x, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++) s += x[i] * x[i];
    return sqrt(s);
}

static double diff2(const double *x, const double *y, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++) s += (x[i] - y[i]) * (x[i] - y[i]);
    return sqrt(s);
}

double ghf_param_change(const ghf_params *a, const ghf_params *b)
{
    const int d = a->d;
    double tr = 0.0;
    for (int i = 0; i < d; i++) tr += b->sigma[i * d + i];
    const double scale = sqrt(fabs(tr) / d);
    double c = 0.0;
    c = fmax(c, diff2(a->mu, b->mu, d) / (norm2(b->mu, d) + scale));
    c = fmax(c, diff2(a->gamma, b->gamma, d) / (norm2(b->gamma, d) + scale));
    c = fmax(c, diff2(a->sigma, b->sigma, d * d) / norm2(b->sigma, d * d));
    c = fmax(c, fabs(a->p - b->p) / fmax(1.0, fabs(b->p)));
    /* relative changes of a and b; 0 when both are on the face (a = 0 or b = 0) */
    const double da = fmax(fabs(a->a), fabs(b->a)), db = fmax(fabs(a->b), fabs(b->b));
    if (da > 0) c = fmax(c, fabs(a->a - b->a) / da);
    if (db > 0) c = fmax(c, fabs(a->b - b->b) / db);
    return isfinite(c) ? c : INFINITY;
}

/* ---------------------------------------------------------------------------
 * One E-step, one M-step
 * ------------------------------------------------------------------------- */

typedef struct em_ctx {
    MPI_Comm comm;
    ghf_backend *be;
    const ghf_em_opts *o;
    ghf_model model; /* what is fitted (from o) */
    ghf_mstep_opts mo;
    int d;
    int len;
    double *stats;
    double *saved; /* a copy of stats while a rescue point is evaluated */
    ghf_derived g;
    int rank;
} em_ctx;

/* E-step at t.  Returns 0, -1 if Sigma is not positive definite (no
 * collective call was made: every rank reaches the same verdict), or 1 on a
 * run-time error. */
static int estep(em_ctx *e, const ghf_params *t, int stop_req, char *err, size_t errlen)
{
    if (ghf_derive(t, &e->g) != 0) return -1;
    ghf_estep_input in;
    in.d = e->d;
    in.mu = t->mu;
    in.linv = e->g.Linv;
    in.w = e->g.w;
    in.c = e->g.c;
    in.stop_request = stop_req;
    return e->be->estep(e->be, &in, e->stats, err, errlen) ? 1 : 0;
}

/* 1 if the last E-step gave a finite log-likelihood at every row */
static int estep_ok(const em_ctx *e)
{
    return e->stats[GHF_ST_NBAD] == 0 && isfinite(e->stats[GHF_ST_LL]);
}

/* M-step plus the |Sigma| = 1 gauge.  Returns the M-step status
 * (GHF_MSTEP_GAUSS: the Gaussian limit, for the caller to handle). */
static int mstep(em_ctx *e, const ghf_params *cur, ghf_params *next, char *why, size_t whylen)
{
    const ghf_mstep_status ms = ghf_mstep(&e->model, &e->mo, e->stats, cur, next, why, whylen);
    if (ms != GHF_MSTEP_OK) return (int)ms;
    if (ghf_derive(next, &e->g) != 0) {
        snprintf(why, whylen, "boundary: Sigma is no longer positive definite (the fit collapses onto tied or collinear observations)");
        return GHF_MSTEP_BOUNDARY;
    }
    ghf_params_normalize(next, e->g.logdet);
    if (sqrt(next->a) * sqrt(next->b) > GHF_OMEGA_MAX) {
        /* Y is then a constant to within 1e-4 relative: the data are
         * indistinguishable from Gaussian */
        snprintf(why, whylen, "boundary: sqrt(ab) -> infinity (the Gaussian limit: the mixing variable degenerates)");
        return GHF_MSTEP_GAUSS;
    }
    if (!ghf_params_finite(next)) {
        snprintf(why, whylen, "non-finite parameters after the M-step");
        return GHF_MSTEP_FAILED;
    }
    return GHF_MSTEP_OK;
}

/* ---------------------------------------------------------------------------
 * Starting points
 * ------------------------------------------------------------------------- */

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
static int near_gaussian(const em_ctx *e, ghf_params *t)
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
            const int erc = estep(e, &t, 0, err, errlen);
            if (erc == 1) {
                rc = 1;
                break;
            }
            if (erc != 0 || !estep_ok(e)) {
                ok = 0;
                break;
            }
            ll = e->stats[GHF_ST_LL];
            /* keep t when the step fails: its likelihood is known */
            if (mstep(e, &t, &nx, why, sizeof why) != GHF_MSTEP_OK) break;
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

/* ---------------------------------------------------------------------------
 * SQUAREM (Varadhan and Roland 2008, scheme S3)
 * ------------------------------------------------------------------------- */

#define GHF_SQ_MAX_STEP 64.0

/* Coordinates of the extrapolation: mu, gamma, Sigma (lower), p, log a, log b. */
static int sq_len(int d) { return 2 * d + d * (d + 1) / 2 + 3; }

static void sq_pack(const ghf_params *t, double *v)
{
    const int d = t->d;
    int k = 0;
    for (int i = 0; i < d; i++) v[k++] = t->mu[i];
    for (int i = 0; i < d; i++) v[k++] = t->gamma[i];
    for (int i = 0; i < d; i++)
        for (int j = 0; j <= i; j++) v[k++] = t->sigma[i * d + j];
    v[k++] = t->p;
    /* on a face (a = 0 or b = 0) the coordinate is held at 0 */
    v[k++] = t->a > 0.0 ? log(t->a) : 0.0;
    v[k++] = t->b > 0.0 ? log(t->b) : 0.0;
}

static void sq_unpack(const double *v, ghf_params *t)
{
    const int d = t->d;
    int k = 0;
    for (int i = 0; i < d; i++) t->mu[i] = v[k++];
    for (int i = 0; i < d; i++) t->gamma[i] = v[k++];
    for (int i = 0; i < d; i++)
        for (int j = 0; j <= i; j++) {
            t->sigma[i * d + j] = v[k];
            t->sigma[j * d + i] = v[k++];
        }
    t->p = v[k++];
    t->a = exp(v[k++]);
    t->b = exp(v[k++]);
}

/* 1 if a (which = 0) or b (which = 1) is 0 in all of t0, t1, t2; -1 if it is
 * 0 in some but not all (no extrapolation across a face); 0 otherwise. */
static int sq_face(const ghf_params *t0, const ghf_params *t1, const ghf_params *t2, int which)
{
    const double x0 = which ? t0->b : t0->a, x1 = which ? t1->b : t1->a, x2 = which ? t2->b : t2->a;
    const int n0 = (x0 == 0.0) + (x1 == 0.0) + (x2 == 0.0);
    return n0 == 3 ? 1 : (n0 == 0 ? 0 : -1);
}

/* theta' = t0 - 2 alpha r + alpha^2 v.  Returns 0, or -1 if the point is unusable. */
static int squarem_point(const ghf_params *t0, const ghf_params *t1, const ghf_params *t2, double fixed_p,
                         ghf_params *out)
{
    const int d = t0->d, n = sq_len(d);
    const int face_a = sq_face(t0, t1, t2, 0), face_b = sq_face(t0, t1, t2, 1);
    if (face_a < 0 || face_b < 0) return -1;
    double *a = malloc(3 * (size_t)n * sizeof(double));
    if (!a) return -1;
    double *x0 = a, *x1 = a + n, *x2 = a + 2 * n;
    sq_pack(t0, x0);
    sq_pack(t1, x1);
    sq_pack(t2, x2);
    double rr = 0.0, vv = 0.0;
    for (int i = 0; i < n; i++) {
        const double r = x1[i] - x0[i], v = x2[i] - 2.0 * x1[i] + x0[i];
        rr += r * r;
        vv += v * v;
    }
    int rc = -1;
    if (vv > 0.0 && isfinite(rr) && isfinite(vv)) {
        double alpha = -sqrt(rr / vv);
        if (alpha > -1.0) alpha = -1.0;
        if (alpha < -GHF_SQ_MAX_STEP) alpha = -GHF_SQ_MAX_STEP;
        for (int i = 0; i < n; i++) {
            const double r = x1[i] - x0[i], v = x2[i] - 2.0 * x1[i] + x0[i];
            x2[i] = x0[i] - 2.0 * alpha * r + alpha * alpha * v;
        }
        sq_unpack(x2, out);
        if (!isnan(fixed_p)) out->p = fixed_p;
        if (face_a) out->a = 0.0;
        if (face_b) out->b = 0.0;
        rc = (ghf_params_finite(out) && (fabs(out->p) <= 50.0 || out->p == fixed_p || face_a || face_b) &&
              (out->a > 0 || face_a) && (out->b > 0 || face_b) &&
              (!face_a || out->p < 0) && (!face_b || out->p > 0)) ? 0 : -1;
    }
    free(a);
    return rc;
}

/* ---------------------------------------------------------------------------
 * The edges of the parameter space
 * ------------------------------------------------------------------------- */

/* Squared coefficient of variation Var[Y] / E[Y]^2 of the subordinator (0 at
 * the Gaussian limit; +inf when Var[Y] is infinite). */
static double kappa_of(const ghf_params *t)
{
    const ghf_gig_stats g = ghf_gig_stats_eval(t->p, t->a, t->b);
    const double k = g.h33 / (g.e_y * g.e_y);
    return isfinite(k) ? k : INFINITY;
}

/* A collapsing fit (an unbounded likelihood) at iteration k of st:
 *  - Sigma is singular (the pivot ratio of the Cholesky factor of its
 *    correlation matrix is below GHF_SIGMA_PIVOT_MIN), or the fitted
 *    variance E[Y] Sigma_jj of a column falls below GHF_SIGMA_PIVOT_MIN of
 *    the data's (robust) variance;
 *  - or the log-likelihood grows fast without slowing down (see below)
 *    while the mixing law spreads (Var[log Y] > GHF_VARLOG_COLLAPSE or
 *    Var[Y] / E[Y]^2 > GHF_KAPPA_COLLAPSE).
 * Both are decided on all-reduced values far from rounding, so every rank
 * count stops at the same iteration.  Returns 1 with the reason in why. */
static int collapsing(const em_ctx *e, const ghf_em_state *st, int k, double n_obs, char *why, size_t whylen)
{
    const int d = e->d;
    const ghf_params *t = &st->cur;
    /* e->g holds the factor of the last E-step, at st->cur */
    const double *dcov = e->o->data_rcov ? e->o->data_rcov : e->o->data_cov;
    const double ey = ghf_gig_moments_eval(t->p, t->a, t->b).e_y;
    double pmin = INFINITY, pmax = 0.0;
    for (int j = 0; j < d; j++) {
        /* pivots of the Cholesky factor of corr(Sigma) = diag(Sigma)^-1/2 Sigma diag(Sigma)^-1/2 */
        const double l = e->g.L[j * d + j], v = l * l / t->sigma[j * d + j];
        pmin = fmin(pmin, v);
        pmax = fmax(pmax, v);
        /* a coordinate whose fitted variance vanishes next to the data's */
        if (dcov && isfinite(ey) && !(t->sigma[j * d + j] * ey >= GHF_SIGMA_PIVOT_MIN * dcov[j * d + j])) {
            snprintf(why, whylen, "boundary: the dispersion of column %d vanishes (the fitted law concentrates on tied values of that column)", j);
            return 1;
        }
    }
    if (d > 1 && pmin < GHF_SIGMA_PIVOT_MIN * pmax) {
        snprintf(why, whylen, "boundary: Sigma becomes singular (the fitted law concentrates on a lower-dimensional set: tied, collinear or lattice-valued observations, or a direction carried by the skewness alone)");
        return 1;
    }
    if (k >= 3) {
        /* growth that does not slow down: three gains, each above
         * GHF_GAIN_COLLAPSE per observation and at least 0.9 of the one
         * before (EM's gains on a bounded likelihood decay geometrically) */
        int diverging = 1;
        for (int j = k; j > k - 3 && diverging; j--) {
            const double g1 = st->trace[j] - st->trace[j - 1], g0 = j - 2 >= 0 ? st->trace[j - 1] - st->trace[j - 2] : 0.0;
            diverging = g1 > GHF_GAIN_COLLAPSE * n_obs && (j == k - 2 || g1 >= 0.9 * g0);
        }
        if (diverging) {
            const ghf_gig_stats g = ghf_gig_stats_eval(t->p, t->a, t->b);
            if (!(g.h11 <= GHF_VARLOG_COLLAPSE) || !(g.h33 <= GHF_KAPPA_COLLAPSE * g.e_y * g.e_y)) {
                snprintf(why, whylen, "boundary: the likelihood is unbounded (the log-likelihood grows by %.3g per iteration without slowing down while the mixing law spreads: the fit collapses onto tied observations)",
                         st->trace[k] - st->trace[k - 1]);
                return 1;
            }
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------------
 * The loop
 * ------------------------------------------------------------------------- */

static void finish(ghf_em_result *r, const ghf_params *t, double ll, int n_iter, const double *trace,
                   ghf_em_outcome oc, const char *status)
{
    ghf_params_copy(&r->params, t);
    r->loglik = ll;
    r->n_iter = n_iter;
    r->outcome = oc;
    r->converged = oc == GHF_EM_CONVERGED;
    snprintf(r->status, sizeof r->status, "%s", status);
    r->n_trace = n_iter + 1;
    memcpy(r->trace, trace, (size_t)r->n_trace * sizeof(double));
}

/* Where the loop is within a SQUAREM cycle. */
typedef enum {
    PH_CYCLE_START, /* plain step from theta_k; the resumable state */
    PH_SECOND_STEP, /* plain step from theta_{k+1}, then the extrapolation */
    PH_EXTRAPOLATED /* evaluate the extrapolated point theta' */
} em_phase;

/* What one step of the loop decided. */
typedef enum { EM_GO_ON, EM_DONE, EM_ERROR } em_next;

typedef struct em_loop {
    em_ctx *e;
    ghf_em_state st;
    ghf_params nx, th2, thx, cyc_cur, cyc_prev, gauss;
    em_phase phase;
    int cyc_iter;
    double ll_th1; /* log-likelihood of theta_{k+1} within a cycle */
    int max_iter;
    int print;
    const char *lab;
    double t_it; /* start of the current iteration (for the log lines) */
} em_loop;

static int loop_alloc(em_loop *L, int d)
{
    return ghf_params_alloc(&L->nx, d) || ghf_params_alloc(&L->th2, d) || ghf_params_alloc(&L->thx, d) ||
           ghf_params_alloc(&L->cyc_cur, d) || ghf_params_alloc(&L->cyc_prev, d) || ghf_params_alloc(&L->gauss, d);
}

static void loop_free(em_loop *L)
{
    ghf_params_free(&L->nx);
    ghf_params_free(&L->th2);
    ghf_params_free(&L->thx);
    ghf_params_free(&L->cyc_cur);
    ghf_params_free(&L->cyc_prev);
    ghf_params_free(&L->gauss);
}

/* The M-step from the current iterate st.cur (log-likelihood ll, statistics
 * in e->stats); the fit ends at a boundary (the Gaussian limit included:
 * ghf_em_fit then compares it with the family's near-Gaussian point). */
static em_next mstep_from_cur(em_loop *L, ghf_em_result *r, double ll)
{
    em_ctx *e = L->e;
    ghf_em_state *st = &L->st;
    const int k = st->iter;
    char why[256];
    const double tm = MPI_Wtime();
    const int ms = mstep(e, &st->cur, &L->nx, why, sizeof why);
    r->t_mstep += MPI_Wtime() - tm;
    if (ms == GHF_MSTEP_OK) return EM_GO_ON;
    if (ms == GHF_MSTEP_GAUSS)
        finish(r, &st->cur, ll, k, st->trace, GHF_EM_BOUNDARY, GAUSS_LIMIT_STATUS);
    else
        finish(r, &st->cur, ll, k, st->trace, ms == GHF_MSTEP_BOUNDARY ? GHF_EM_BOUNDARY : GHF_EM_FAILED, why);
    return EM_DONE;
}

/* The extrapolated point theta' (E-step just done): keep it as iterate k if
 * it is at least as good as theta_{k+1}... see the loop comment. */
static em_next step_extrapolated(em_loop *L, ghf_em_result *r, int erc)
{
    em_ctx *e = L->e;
    ghf_em_state *st = &L->st;
    const int k = st->iter;
    const double llx = e->stats[GHF_ST_LL];
    L->phase = PH_CYCLE_START;
    /* The slack (1e-13 relative, far above round-off and far below the
     * 1e-12 monotonicity guarantee) keeps the decision away from round-off
     * ties, so every rank count takes the same path. */
    if (!(erc == 0 && estep_ok(e) && llx >= L->ll_th1 - GHF_LL_MARGIN * fmax(1.0, fabs(L->ll_th1)))) {
        r->n_accel_rejected++; /* the cycle ends at theta_2 (st.cur already) */
        return EM_GO_ON;
    }
    r->n_accel_accepted++;
    st->trace[k] = llx;
    if (L->print)
        printf("%siter %5d  loglik % .15e  dll % .3e  (extrapolated)  %.4f s\n", L->lab, k, llx,
               (llx - st->trace[k - 1]) / fmax(1.0, fabs(llx)), MPI_Wtime() - L->t_it);
    if (k >= L->max_iter) {
        finish(r, &L->thx, llx, k, st->trace, GHF_EM_MAX_ITER, "max_iter: iteration limit reached before convergence");
        return EM_DONE;
    }
    /* the extrapolated point becomes the current iterate, and EM steps from it */
    ghf_params_copy(&st->prev, &st->cur);
    ghf_params_copy(&st->cur, &L->thx);
    const em_next nx = mstep_from_cur(L, r, llx);
    if (nx != EM_GO_ON) return nx;
    ghf_params_copy(&st->prev, &st->cur);
    ghf_params_copy(&st->cur, &L->nx);
    st->iter = k + 1;
    return EM_GO_ON;
}

/* Convergence at a plain step: the relative change of the log-likelihood and
 * the largest relative parameter change both below tol. */
static const char *converged_status(const ghf_model *m, const ghf_params *t)
{
    /* faces of the GIG domain: a boundary only for the families that live inside it */
    if (ghf_family_get(m->family)->sub == GHF_SUB_GIG) {
        if (t->a == 0.0) return "converged on the boundary a = 0 (the skewed Student-t limit of GH)";
        if (t->b == 0.0) return "converged on the boundary b = 0 (the variance-gamma limit of GH)";
        if (fabs(t->p) >= 50.0) return "converged on the boundary |p| = 50 (the bound of the GIG index)";
    }
    return "converged";
}

/* The log-likelihood has changed by less than tol (relative) in total over
 * the last GHF_FLAT_ITERS iterations: converged in likelihood even if the
 * parameters still drift along a weakly identified direction (near the
 * Gaussian limit EM converges sublinearly there). */
#define GHF_FLAT_ITERS 20
static const char FLAT_STATUS[] =
    "converged (the log-likelihood no longer changes; the parameters still drift along a weakly identified direction)";
static int flat(const ghf_em_state *st, int k, double tol)
{
    if (k < GHF_FLAT_ITERS) return 0;
    const double ll = st->trace[k];
    return fabs(ll - st->trace[k - GHF_FLAT_ITERS]) < tol * fmax(1.0, fabs(ll));
}

/* One plain EM step at st.cur (E-step just done with result erc). */
static em_next step_plain(em_loop *L, ghf_em_result *r, int erc)
{
    em_ctx *e = L->e;
    const ghf_em_opts *o = e->o;
    ghf_em_state *st = &L->st;
    const int k = st->iter;
    char why[320];
    if (erc == -1) {
        if (k == 0)
            finish(r, &st->cur, -INFINITY, 0, st->trace, GHF_EM_FAILED, "failed: the starting Sigma is not positive definite");
        else
            finish(r, &st->prev, st->trace[k - 1], k - 1, st->trace, GHF_EM_BOUNDARY, "boundary: Sigma is no longer positive definite");
        return EM_DONE;
    }
    const double ll = e->stats[GHF_ST_LL];
    if (!estep_ok(e)) {
        if (k == 0) {
            snprintf(why, sizeof why, "failed: the log-density is not finite at %.0f observations of the starting point",
                     e->stats[GHF_ST_NBAD]);
            finish(r, &st->cur, -INFINITY, 0, st->trace, GHF_EM_FAILED, why);
        } else {
            snprintf(why, sizeof why, "boundary: the log-density became non-finite at %.0f observations (unbounded likelihood?)",
                     e->stats[GHF_ST_NBAD]);
            finish(r, &st->prev, st->trace[k - 1], k - 1, st->trace, GHF_EM_BOUNDARY, why);
        }
        return EM_DONE;
    }
    /* The rounding error of the log-likelihood is about eps sum |zw|: zw
     * cancels against R - sqrt(AB) when the skewness explains a direction
     * whose dispersion vanishes, or a gross outlier (the other large terms
     * are formed without cancellation, see ghf_estep_point).  Past 1e-12
     * relative (the monotonicity guarantee, and the SQUAREM margin's scale)
     * the fit ends at the last iterate whose log-likelihood was still exact
     * to that level. */
    if (k > 0 && 4.0 * DBL_EPSILON * e->stats[GHF_ST_ZWABS] > 1e-12 * fmax(1.0, fabs(ll))) {
        finish(r, &st->prev, st->trace[k - 1], k - 1, st->trace, GHF_EM_BOUNDARY, PRECISION_STATUS);
        return EM_DONE;
    }
    st->trace[k] = ll;
    double dll = 0.0, dpar = INFINITY;
    if (k > 0) {
        dll = (ll - st->trace[k - 1]) / fmax(1.0, fabs(ll));
        dpar = ghf_param_change(&st->cur, &st->prev);
        if (dll < -1e-12) r->n_decrease++;
    }
    if (L->print)
        printf("%siter %5d  loglik % .15e  dll % .3e  dpar %.3e  %.4f s\n", L->lab, k, ll, dll, k > 0 ? dpar : 0.0,
               MPI_Wtime() - L->t_it);
    if (collapsing(e, st, k, e->stats[GHF_ST_N], why, sizeof why)) {
        finish(r, &st->cur, ll, k, st->trace, GHF_EM_BOUNDARY, why);
        return EM_DONE;
    }
    if (k > 0 && kappa_of(&st->cur) < GHF_KAPPA_LIMIT) {
        finish(r, &st->cur, ll, k, st->trace, GHF_EM_BOUNDARY,
               GAUSS_LIMIT_STATUS);
        return EM_DONE;
    }
    if (k > 0 && fabs(dll) < o->tol && (dpar < o->tol || flat(st, k, o->tol))) {
        if (kappa_of(&st->cur) < GHF_KAPPA_LIMIT)
            finish(r, &st->cur, ll, k, st->trace, GHF_EM_BOUNDARY,
                   GAUSS_LIMIT_STATUS);
        else
            finish(r, &st->cur, ll, k, st->trace, GHF_EM_CONVERGED,
                   dpar < o->tol ? converged_status(&e->model, &st->cur) : FLAT_STATUS);
        return EM_DONE;
    }
    if (k >= L->max_iter) {
        finish(r, &st->cur, ll, k, st->trace, GHF_EM_MAX_ITER,
               L->max_iter == 0 ? "max_iter: no iterations requested" : "max_iter: iteration limit reached before convergence");
        return EM_DONE;
    }
    const em_next nx = mstep_from_cur(L, r, ll);
    if (nx != EM_GO_ON) return nx;
    if (L->phase == PH_CYCLE_START) {
        ghf_params_copy(&st->prev, &st->cur);
        ghf_params_copy(&st->cur, &L->nx);
        st->iter = k + 1;
        L->phase = o->accel ? PH_SECOND_STEP : PH_CYCLE_START;
        return EM_GO_ON;
    }
    /* second step: st.prev = theta_k, st.cur = theta_{k+1}, nx = theta_{k+2} */
    L->ll_th1 = ll;
    ghf_params_copy(&L->th2, &L->nx);
    const int ok = squarem_point(&st->prev, &st->cur, &L->th2, ghf_model_fixed_p(&e->model, e->d), &L->thx) == 0 && ghf_derive(&L->thx, &e->g) == 0;
    ghf_params_copy(&st->prev, &st->cur);
    ghf_params_copy(&st->cur, &L->th2);
    st->iter = k + 1;
    if (ok) {
        /* evaluate theta' as the candidate for iterate k + 1 (theta_2 otherwise) */
        ghf_params_normalize(&L->thx, e->g.logdet);
        L->phase = PH_EXTRAPOLATED;
    } else {
        L->phase = PH_CYCLE_START;
    }
    return EM_GO_ON;
}

/* The starting state: a checkpoint's, the caller's, or the best start. */
static int start_state(em_ctx *e, ghf_em_state *st, int max_iter, ghf_em_result *r, char *err, size_t errlen)
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

/* Signals: hand over the state of the current cycle's start, end the fit. */
static em_next stop_requested(em_loop *L, ghf_em_result *r, char *err, size_t errlen)
{
    const ghf_em_opts *o = L->e->o;
    ghf_em_state *st = &L->st;
    st->iter = L->cyc_iter;
    ghf_params_copy(&st->cur, &L->cyc_cur);
    if (L->cyc_iter > 0) ghf_params_copy(&st->prev, &L->cyc_prev);
    if (o->on_state && o->on_state(o->on_state_ctx, st, 1) != 0) {
        snprintf(err, errlen, "writing the checkpoint failed");
        return EM_ERROR;
    }
    finish(r, &st->cur, L->cyc_iter > 0 ? st->trace[L->cyc_iter - 1] : NAN, L->cyc_iter > 0 ? L->cyc_iter - 1 : 0,
           st->trace, GHF_EM_INTERRUPTED, "interrupted: stop requested (signal)");
    r->n_iter = L->cyc_iter;
    return EM_DONE;
}

/* The Gaussian family: its maximum likelihood is in closed form, the data's
 * mean and biased covariance (n, not n - 1); no EM iterations. */
static void gaussian_fit(em_ctx *e, ghf_em_result *r)
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

/* A fit never ends below the Gaussian limit of its family: when it ends at
 * or below the Gaussian log-likelihood, the near-Gaussian point is
 * evaluated and returned instead if it is better (one more E-step). */
static int against_gaussian(em_loop *L, ghf_em_result *r, char *err, size_t errlen)
{
    em_ctx *e = L->e;
    const double llg0 = e->o->ll_gauss;
    if (!(r->outcome == GHF_EM_CONVERGED || r->outcome == GHF_EM_MAX_ITER || r->outcome == GHF_EM_BOUNDARY)) return 0;
    if (!isfinite(llg0) || !(r->loglik < llg0 + 1e-9 * fabs(llg0))) return 0;
    if (near_gaussian(e, &L->gauss) != 0) return 0;
    const int erc = estep(e, &L->gauss, 0, err, errlen);
    r->n_estep++;
    if (erc == 1) return 1;
    const double llg = e->stats[GHF_ST_LL];
    if (erc != 0 || !estep_ok(e) || !(llg > r->loglik + GHF_LL_MARGIN * fabs(r->loglik))) return 0;
    ghf_params_copy(&r->params, &L->gauss);
    r->loglik = llg;
    r->trace[r->n_trace] = llg; /* one more iterate; the trace has room for max_iter + 2 */
    r->n_trace++;
    r->n_iter++;
    r->outcome = GHF_EM_BOUNDARY;
    r->converged = 0;
    snprintf(r->status, sizeof r->status, "%s", GAUSS_LIMIT_STATUS);
    return 0;
}

int ghf_em_fit(MPI_Comm comm, ghf_backend *be, int d, const ghf_em_opts *o, ghf_em_result *r,
               char *err, size_t errlen)
{
    const double t_start = MPI_Wtime();
    memset(r, 0, sizeof *r);
    em_ctx e;
    memset(&e, 0, sizeof e);
    e.comm = comm;
    e.be = be;
    e.o = o;
    e.d = d;
    e.len = ghf_stats_len(d);
    e.model.family = o->family;
    e.model.symmetric = o->symmetric;
    e.model.fix_p = o->fix_p;
    e.model.p = o->p_fixed;
    e.mo.p_max = 0.0; /* the family's */
    MPI_Comm_rank(comm, &e.rank);
    em_loop L;
    memset(&L, 0, sizeof L);
    L.e = &e;
    L.max_iter = o->max_iter < 0 ? 0 : o->max_iter;
    L.print = !o->quiet && e.rank == 0;
    L.lab = o->label ? o->label : "";
    ghf_em_state *st = &L.st;
    int rc = 0;
    double be_e0 = be->t_estep, be_a0 = be->t_allreduce;
    e.stats = calloc((size_t)e.len, sizeof(double));
    e.saved = calloc((size_t)e.len, sizeof(double));
    r->trace = calloc((size_t)L.max_iter + 2, sizeof(double));
    if (!e.stats || !e.saved || !r->trace || ghf_derived_alloc(&e.g, d) || ghf_params_alloc(&r->params, d) ||
        ghf_em_state_alloc(st, d, L.max_iter) || loop_alloc(&L, d)) {
        snprintf(err, errlen, "out of memory (d = %d)", d);
        rc = 1;
        goto out;
    }
    if (ghf_family_get(o->family)->sub == GHF_SUB_NONE) {
        gaussian_fit(&e, r);
        goto out;
    }
    {
        const int src = start_state(&e, st, L.max_iter, r, err, errlen);
        if (src != 0) {
            rc = src < 0 ? 0 : src;
            goto out;
        }
    }
    /* the starts' E-steps belong to the init phase; estep/allreduce count the main loop only */
    r->t_init = MPI_Wtime() - t_start;
    be_e0 = be->t_estep;
    be_a0 = be->t_allreduce;

    /* --- the loop ---
     * Plain EM: E-step at theta_k (its log-likelihood and statistics), the
     * checks at the edges of the parameter space, the convergence test
     * against theta_{k-1}, M-step.  With SQUAREM (Varadhan and Roland 2008,
     * scheme S3) every cycle takes two plain steps theta_k -> theta_{k+1} ->
     * theta_2, extrapolates theta' = theta_k - 2 alpha r + alpha^2 v
     * (r = theta_{k+1} - theta_k, v = theta_2 - 2 theta_{k+1} + theta_k,
     * alpha = -|r|/|v| clamped to [-GHF_SQ_MAX_STEP, -1]) in the coordinates
     * (mu, gamma, Sigma, p, log a, log b), and keeps theta' only if its
     * log-likelihood is at least that of theta_{k+1} (less 1e-13 relative);
     * otherwise the cycle ends at theta_2 as plain EM would.  The accepted
     * iterates therefore never lose likelihood beyond 1e-13 relative.  Cycles
     * carry no memory, and every check decides on (theta_k, theta_{k-1}, the
     * trace), so the state at a cycle start (what on_state sees) is all a
     * resumed run needs to repeat the same arithmetic. */
    L.phase = PH_CYCLE_START;
    L.cyc_iter = st->iter;
    L.ll_th1 = -INFINITY;
    for (em_next nx = EM_GO_ON; nx == EM_GO_ON;) {
        const int k = st->iter;
        L.t_it = MPI_Wtime();
        if (L.phase == PH_CYCLE_START) {
            /* a cycle boundary: the resumable state */
            L.cyc_iter = k;
            ghf_params_copy(&L.cyc_cur, &st->cur);
            if (k > 0) ghf_params_copy(&L.cyc_prev, &st->prev);
            if (o->on_state && o->on_state(o->on_state_ctx, st, 0) != 0) {
                snprintf(err, errlen, "writing the checkpoint failed");
                rc = 1;
                break;
            }
        }
        const ghf_params *at = L.phase == PH_EXTRAPOLATED ? &L.thx : &st->cur;
        const int stop_req = o->stop_flag ? (*o->stop_flag != 0) : 0;
        const int erc = estep(&e, at, stop_req, err, errlen);
        r->n_estep++;
        if (erc == 1) {
            rc = 1;
            break;
        }
        if (erc == 0 && e.stats[GHF_ST_STOP] > 0)
            nx = stop_requested(&L, r, err, errlen);
        else if (L.phase == PH_EXTRAPOLATED)
            nx = step_extrapolated(&L, r, erc);
        else
            nx = step_plain(&L, r, erc);
        if (nx == EM_ERROR) rc = 1;
    }
    if (rc == 0 && !o->nested_run) rc = against_gaussian(&L, r, err, errlen);
out:
    loop_free(&L);
    r->t_estep = be->t_estep - be_e0;
    r->t_allreduce = be->t_allreduce - be_a0;
    r->t_total = MPI_Wtime() - t_start;
    r->n_gig_kept = e.mo.n_kept;
    free(e.stats);
    free(e.saved);
    ghf_derived_free(&e.g);
    ghf_em_state_free(st);
    return rc;
}
