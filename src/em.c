/* em.c - the distributed EM driver (see em.h). */
#include "em.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gig.h"
#include "mstep.h"

/* sqrt(ab) above which the fit is at the Gaussian boundary (CV of Y < 1e-4) */
#define GHF_OMEGA_MAX 1e8

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

typedef struct em_ctx {
    MPI_Comm comm;
    ghf_backend *be;
    int d;
    int len;
    double *stats;
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

/* M-step plus the |Sigma| = 1 gauge.  Returns the M-step status; -1 if the
 * new Sigma is not positive definite. */
static int mstep(em_ctx *e, ghf_family fam, const ghf_mstep_opts *mo, const ghf_params *cur,
                 ghf_params *next, char *why, size_t whylen)
{
    const ghf_mstep_status ms = ghf_mstep(fam, mo, e->stats, cur, next, why, whylen);
    if (ms != GHF_MSTEP_OK) return (int)ms;
    if (ghf_derive(next, &e->g) != 0) {
        snprintf(why, whylen, "boundary: Sigma is no longer positive definite (the fit collapses onto tied or collinear observations)");
        return GHF_MSTEP_BOUNDARY;
    }
    ghf_params_normalize(next, e->g.logdet);
    if (sqrt(next->a) * sqrt(next->b) > GHF_OMEGA_MAX) {
        /* Y is then a constant to within 1e-4 relative: the data are
         * indistinguishable from Gaussian and EM would creep towards
         * sqrt(ab) = infinity for ever */
        snprintf(why, whylen, "boundary: sqrt(ab) -> infinity (the Gaussian limit: the mixing variable degenerates)");
        return GHF_MSTEP_BOUNDARY;
    }
    if (!ghf_params_finite(next)) {
        snprintf(why, whylen, "non-finite parameters after the M-step");
        return GHF_MSTEP_FAILED;
    }
    return GHF_MSTEP_OK;
}

/* A start: subordinator (p, a, b); Sigma scaled so that E[Y] Sigma matches the data covariance. */
static void make_start(ghf_params *t, const ghf_em_opts *o, int d, double p, double a, double b)
{
    const ghf_gig_moments m = ghf_gig_moments_eval(p, a, b);
    const double ey = (isfinite(m.e_y) && m.e_y > 0) ? m.e_y : 1.0;
    for (int i = 0; i < d; i++) {
        t->mu[i] = o->data_mean ? o->data_mean[i] : 0.0;
        t->gamma[i] = 0.0;
    }
    for (int i = 0; i < d * d; i++) t->sigma[i] = o->data_cov[i] / ey;
    /* a tiny ridge keeps constant columns from failing the first Cholesky */
    double tr = 0.0;
    for (int i = 0; i < d; i++) tr += o->data_cov[i * d + i];
    for (int i = 0; i < d; i++) t->sigma[i * d + i] += 1e-12 * (tr / d) / ey + 1e-300;
    t->p = p;
    t->a = a;
    t->b = b;
}

/* splitmix64: the seed's extra starts */
static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static int initialise(em_ctx *e, const ghf_em_opts *o, const ghf_mstep_opts *mo, ghf_params *out,
                      char *err, size_t errlen)
{
    const int d = e->d;
    double cand[16][3];
    int nc = 0;
    if (o->family == GHF_FAMILY_NIG) {
        cand[nc][0] = -0.5, cand[nc][1] = 1.0, cand[nc][2] = 1.0, nc++;
    } else if (o->fix_p) {
        const double p = o->p_fixed;
        cand[nc][0] = p, cand[nc][1] = 1.0, cand[nc][2] = 1.0, nc++;
    } else {
        /* NIG-like, VG-like (b small), Student-t-like (a small), hyperbolic-like */
        const double base[4][3] = {{-0.5, 1.0, 1.0}, {2.0, 4.0, 1e-2}, {-3.0, 1e-2, 4.0}, {1.0, 1.0, 1.0}};
        const int nb = o->n_starts < 4 ? (o->n_starts < 1 ? 1 : o->n_starts) : 4;
        for (int i = 0; i < nb; i++, nc++)
            for (int j = 0; j < 3; j++) cand[nc][j] = base[i][j];
        uint64_t s = o->seed * 0x2545F4914F6CDD1DULL + 12345u;
        for (int i = 4; i < o->n_starts && nc < 16; i++, nc++) {
            const double u1 = (double)(splitmix(&s) >> 11) * 0x1.0p-53;
            const double u2 = (double)(splitmix(&s) >> 11) * 0x1.0p-53;
            cand[nc][0] = -4.0 + 8.0 * u1;
            cand[nc][1] = exp(-2.0 + 4.0 * u2);
            cand[nc][2] = cand[nc][1];
        }
    }
    ghf_params t, nx;
    if (ghf_params_alloc(&t, d) || ghf_params_alloc(&nx, d)) {
        snprintf(err, errlen, "out of memory");
        return 1;
    }
    double best = -INFINITY;
    int have = 0;
    char why[256];
    for (int c = 0; c < nc; c++) {
        make_start(&t, o, d, cand[c][0], cand[c][1], cand[c][2]);
        double ll = -INFINITY;
        int ok = 1;
        const int iters = nc > 1 ? o->start_iters : 0;
        for (int it = 0; it < iters && ok; it++) {
            const int rc = estep(e, &t, 0, err, errlen);
            if (rc == 1) goto fail;
            if (rc != 0 || e->stats[GHF_ST_NBAD] > 0 || !isfinite(e->stats[GHF_ST_LL])) {
                ok = 0;
                break;
            }
            ll = e->stats[GHF_ST_LL];
            if (mstep(e, o->family, mo, &t, &nx, why, sizeof why) != GHF_MSTEP_OK) {
                /* keep t: its likelihood is known */
                break;
            }
            ghf_params_copy(&t, &nx);
        }
        if (iters == 0) ll = 0.0;
        if (ok && isfinite(ll) && ll > best && ghf_params_finite(&t)) {
            best = ll;
            ghf_params_copy(out, &t);
            have = 1;
        }
    }
    ghf_params_free(&t);
    ghf_params_free(&nx);
    if (!have) {
        snprintf(err, errlen, "initialisation failed: no starting point gave a finite likelihood");
        return 2;
    }
    /* normalise the gauge of the chosen start */
    if (ghf_derive(out, &e->g) == 0) ghf_params_normalize(out, e->g.logdet);
    return 0;
fail:
    ghf_params_free(&t);
    ghf_params_free(&nx);
    return 1;
}

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
static int squarem_point(const ghf_params *t0, const ghf_params *t1, const ghf_params *t2, ghf_family fam,
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
        if (fam == GHF_FAMILY_NIG) out->p = -0.5;
        if (face_a) out->a = 0.0;
        if (face_b) out->b = 0.0;
        rc = (ghf_params_finite(out) && fabs(out->p) <= 50.0 && (out->a > 0 || face_a) && (out->b > 0 || face_b) &&
              (!face_a || out->p < 0) && (!face_b || out->p > 0)) ? 0 : -1;
    }
    free(a);
    return rc;
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
    e.d = d;
    e.len = ghf_stats_len(d);
    MPI_Comm_rank(comm, &e.rank);
    const int max_iter = o->max_iter < 0 ? 0 : o->max_iter;
    ghf_em_state st;
    int rc = 0;
    e.stats = calloc((size_t)e.len, sizeof(double));
    r->trace = calloc((size_t)max_iter + 2, sizeof(double));
    if (!e.stats || !r->trace || ghf_derived_alloc(&e.g, d) || ghf_params_alloc(&r->params, d) ||
        ghf_em_state_alloc(&st, d, max_iter)) {
        snprintf(err, errlen, "out of memory (d = %d)", d);
        free(e.stats);
        ghf_derived_free(&e.g);
        return 1;
    }
    double be_e0 = be->t_estep, be_a0 = be->t_allreduce;
    ghf_mstep_opts mo = {o->fix_p, 50.0};
    const int print = !o->quiet && e.rank == 0;
    const char *lab = o->label ? o->label : "";

    /* --- starting point --- */
    if (o->resume) {
        st.iter = o->resume->iter;
        ghf_params_copy(&st.cur, &o->resume->cur);
        ghf_params_copy(&st.prev, &o->resume->prev);
        if (st.iter > max_iter) st.iter = max_iter;
        memcpy(st.trace, o->resume->trace, (size_t)st.iter * sizeof(double));
    } else if (o->init) {
        ghf_params_copy(&st.cur, o->init);
        if (ghf_derive(&st.cur, &e.g) != 0) {
            snprintf(err, errlen, "the starting parameters have a Sigma that is not positive definite");
            rc = 2;
            goto out;
        }
        ghf_params_normalize(&st.cur, e.g.logdet);
    } else {
        const int irc = initialise(&e, o, &mo, &st.cur, err, errlen);
        if (irc != 0) {
            rc = irc == 2 ? 0 : 1;
            if (irc == 2) {
                /* no finite start: report as a failed fit, not a crash */
                ghf_params_copy(&r->params, &st.cur);
                r->outcome = GHF_EM_FAILED;
                snprintf(r->status, sizeof r->status, "failed: %s", err);
                r->loglik = -INFINITY;
                r->n_trace = 0;
            }
            goto out;
        }
    }
    /* the starts' E-steps belong to the init phase; estep/allreduce count the main loop only */
    r->t_init = MPI_Wtime() - t_start;
    be_e0 = be->t_estep;
    be_a0 = be->t_allreduce;

    /* --- the loop ---
     * Plain EM: E-step at theta_k (its log-likelihood and statistics), the
     * convergence test against theta_{k-1}, M-step.  With SQUAREM (Varadhan
     * and Roland 2008, scheme S3) every cycle takes two plain steps
     * theta_k -> theta_{k+1} -> theta_2, extrapolates
     * theta' = theta_k - 2 alpha r + alpha^2 v (r = theta_{k+1} - theta_k,
     * v = theta_2 - 2 theta_{k+1} + theta_k, alpha = -|r|/|v| clamped to
     * [-GHF_SQ_MAX_STEP, -1]) in the coordinates (mu, gamma, Sigma, p, log a,
     * log b), and keeps theta' only if its log-likelihood is at least that of
     * theta_{k+1} (less 1e-13 relative); otherwise the cycle ends at theta_2
     * as plain EM would.  The accepted iterates therefore never lose
     * likelihood beyond 1e-13 relative.  Cycles carry no
     * memory, so the state at a cycle start (what on_state sees) is all a
     * resumed run needs to repeat the same arithmetic. */
    ghf_params nx, th2, thx, cyc_cur, cyc_prev;
    if (ghf_params_alloc(&nx, d) || ghf_params_alloc(&th2, d) ||
        ghf_params_alloc(&thx, d) || ghf_params_alloc(&cyc_cur, d) || ghf_params_alloc(&cyc_prev, d)) {
        snprintf(err, errlen, "out of memory");
        rc = 1;
        goto out;
    }
    char why[256];
    int phase = 0, cyc_iter = st.iter, flat_growth = 0;
    double ll_th1 = -INFINITY;
    for (;;) {
        const int k = st.iter;
        const double t_it = MPI_Wtime();
        if (phase == 0) {
            /* a cycle boundary: the resumable state */
            cyc_iter = k;
            ghf_params_copy(&cyc_cur, &st.cur);
            if (k > 0) ghf_params_copy(&cyc_prev, &st.prev);
            if (o->on_state && o->on_state(o->on_state_ctx, &st, 0) != 0) {
                snprintf(err, errlen, "writing the checkpoint failed");
                rc = 1;
                break;
            }
        }
        const ghf_params *at = phase == 2 ? &thx : &st.cur;
        const int stop_req = o->stop_flag ? (*o->stop_flag != 0) : 0;
        const int erc = estep(&e, at, stop_req, err, errlen);
        r->n_estep++;
        if (erc == 1) {
            rc = 1;
            break;
        }
        if (erc == 0 && e.stats[GHF_ST_STOP] > 0) {
            /* hand over the state of the current cycle's start */
            st.iter = cyc_iter;
            ghf_params_copy(&st.cur, &cyc_cur);
            if (cyc_iter > 0) ghf_params_copy(&st.prev, &cyc_prev);
            if (o->on_state && o->on_state(o->on_state_ctx, &st, 1) != 0) {
                snprintf(err, errlen, "writing the checkpoint failed");
                rc = 1;
                break;
            }
            finish(r, &st.cur, cyc_iter > 0 ? st.trace[cyc_iter - 1] : NAN, cyc_iter > 0 ? cyc_iter - 1 : 0,
                   st.trace, GHF_EM_INTERRUPTED, "interrupted: stop requested (signal)");
            r->n_iter = cyc_iter;
            break;
        }
        if (phase == 2) {
            /* the extrapolated point: keep it if it is at least as good as theta_{k} */
            const double llx = e.stats[GHF_ST_LL];
            /* The slack (1e-13 relative, far above round-off and far below the
             * 1e-12 monotonicity guarantee) keeps the decision away from
             * round-off ties, so every rank count takes the same path. */
            if (erc == 0 && e.stats[GHF_ST_NBAD] == 0 && isfinite(llx) &&
                llx >= ll_th1 - 1e-13 * fmax(1.0, fabs(ll_th1))) {
                r->n_accel_accepted++;
                st.trace[k] = llx;
                if (print)
                    printf("%siter %5d  loglik % .15e  dll % .3e  (extrapolated)  %.4f s\n", lab, k, llx,
                           (llx - st.trace[k - 1]) / fmax(1.0, fabs(llx)), MPI_Wtime() - t_it);
                if (k >= max_iter) {
                    finish(r, &thx, llx, k, st.trace, GHF_EM_MAX_ITER, "max_iter: iteration limit reached before convergence");
                    break;
                }
                const double tm = MPI_Wtime();
                const int ms = mstep(&e, o->family, &mo, &thx, &nx, why, sizeof why);
                r->t_mstep += MPI_Wtime() - tm;
                if (ms != GHF_MSTEP_OK) {
                    finish(r, &thx, llx, k, st.trace, ms == GHF_MSTEP_BOUNDARY ? GHF_EM_BOUNDARY : GHF_EM_FAILED, why);
                    break;
                }
                ghf_params_copy(&st.prev, &thx);
                ghf_params_copy(&st.cur, &nx);
                st.iter = k + 1;
            } else {
                /* rejected: the cycle ends at theta_2 (st.cur already) */
                r->n_accel_rejected++;
            }
            phase = 0;
            continue;
        }
        if (erc == -1) {
            if (k == 0) {
                finish(r, &st.cur, -INFINITY, 0, st.trace, GHF_EM_FAILED,
                       "failed: the starting Sigma is not positive definite");
            } else {
                finish(r, &st.prev, st.trace[k - 1], k - 1, st.trace, GHF_EM_BOUNDARY,
                       "boundary: Sigma is no longer positive definite");
            }
            break;
        }
        const double ll = e.stats[GHF_ST_LL];
        if (e.stats[GHF_ST_NBAD] > 0 || !isfinite(ll)) {
            if (k == 0) {
                snprintf(why, sizeof why, "failed: the log-density is not finite at %.0f observations of the starting point",
                         e.stats[GHF_ST_NBAD]);
                finish(r, &st.cur, -INFINITY, 0, st.trace, GHF_EM_FAILED, why);
            } else {
                snprintf(why, sizeof why, "boundary: the log-density became non-finite at %.0f observations (unbounded likelihood?)",
                         e.stats[GHF_ST_NBAD]);
                finish(r, &st.prev, st.trace[k - 1], k - 1, st.trace, GHF_EM_BOUNDARY, why);
            }
            break;
        }
        st.trace[k] = ll;
        double dll = 0.0, dpar = INFINITY;
        if (k > 0) {
            dll = (ll - st.trace[k - 1]) / fmax(1.0, fabs(ll));
            dpar = ghf_param_change(&st.cur, &st.prev);
            if (dll < -1e-12) r->n_decrease++;
        }
        if (print)
            printf("%siter %5d  loglik % .15e  dll % .3e  dpar %.3e  %.4f s\n", lab, k, ll, dll,
                   k > 0 ? dpar : 0.0, MPI_Wtime() - t_it);
        /* The Gaussian limit: the log-likelihood has stopped changing while
         * sqrt(ab) keeps growing (the MLE lies at sqrt(ab) = infinity). */
        if (k > 0 && fabs(dll) < o->tol && dpar >= o->tol &&
            st.cur.a * st.cur.b > st.prev.a * st.prev.b && st.cur.a * st.cur.b > 1e4)
            flat_growth++;
        else
            flat_growth = 0;
        if (flat_growth >= 50) {
            /* EM creeps towards the supremum, the Gaussian law N(mean, cov).
             * Try the near-Gaussian point of the family (gamma = 0,
             * Sigma = cov, a = b = 1e8, so E[Y] = 1 to 1e-8): return it if its
             * likelihood is higher than EM's current one. */
            const char *bmsg = "boundary: sqrt(ab) -> infinity (the Gaussian limit: the log-likelihood no longer changes while the mixing variable degenerates)";
            int took = 0;
            if (k < max_iter) {
                make_start(&nx, o, d, o->family == GHF_FAMILY_NIG ? -0.5 : st.cur.p, GHF_OMEGA_MAX, GHF_OMEGA_MAX);
                const int grc = estep(&e, &nx, 0, err, errlen);
                r->n_estep++;
                if (grc == 1) {
                    rc = 1;
                    break;
                }
                const double llg = e.stats[GHF_ST_LL];
                if (grc == 0 && e.stats[GHF_ST_NBAD] == 0 && isfinite(llg) && llg > ll) {
                    st.trace[k + 1] = llg;
                    finish(r, &nx, llg, k + 1, st.trace, GHF_EM_BOUNDARY,
                           "boundary: sqrt(ab) -> infinity (the Gaussian limit); returned the near-Gaussian point sqrt(ab) = 1e8");
                    took = 1;
                }
            }
            if (!took) finish(r, &st.cur, ll, k, st.trace, GHF_EM_BOUNDARY, bmsg);
            break;
        }
        if (k > 0 && fabs(dll) < o->tol && dpar < o->tol) {
            if (st.cur.a == 0.0 || st.cur.b == 0.0)
                finish(r, &st.cur, ll, k, st.trace, GHF_EM_CONVERGED,
                       st.cur.a == 0.0 ? "converged on the boundary a = 0 (the skewed Student-t limit of GH)"
                                       : "converged on the boundary b = 0 (the variance-gamma limit of GH)");
            else
                finish(r, &st.cur, ll, k, st.trace, GHF_EM_CONVERGED, "converged");
            break;
        }
        if (k >= max_iter) {
            finish(r, &st.cur, ll, k, st.trace, GHF_EM_MAX_ITER,
                   max_iter == 0 ? "max_iter: no iterations requested" : "max_iter: iteration limit reached before convergence");
            break;
        }
        const double tm = MPI_Wtime();
        const int ms = mstep(&e, o->family, &mo, &st.cur, &nx, why, sizeof why);
        r->t_mstep += MPI_Wtime() - tm;
        if (ms != GHF_MSTEP_OK) {
            finish(r, &st.cur, ll, k, st.trace, ms == GHF_MSTEP_BOUNDARY ? GHF_EM_BOUNDARY : GHF_EM_FAILED,
                   why);
            break;
        }
        if (phase == 0) {
            ll_th1 = -INFINITY;
            ghf_params_copy(&st.prev, &st.cur);
            ghf_params_copy(&st.cur, &nx);
            st.iter = k + 1;
            phase = o->accel ? 1 : 0;
        } else {
            /* phase 1: st.prev = theta_k, st.cur = theta_{k+1}, nx = theta_{k+2} */
            ll_th1 = ll;
            ghf_params_copy(&th2, &nx);
            const int ok = squarem_point(&st.prev, &st.cur, &th2, o->family, &thx) == 0 &&
                           ghf_derive(&thx, &e.g) == 0;
            ghf_params_copy(&st.prev, &st.cur);
            ghf_params_copy(&st.cur, &th2);
            st.iter = k + 1;
            if (ok) {
                /* evaluate theta' as the candidate for iterate k + 1 (theta_2 otherwise) */
                ghf_params_normalize(&thx, e.g.logdet);
                phase = 2;
            } else {
                phase = 0;
            }
        }
    }
    ghf_params_free(&nx);
    ghf_params_free(&th2);
    ghf_params_free(&thx);
    ghf_params_free(&cyc_cur);
    ghf_params_free(&cyc_prev);
out:
    r->t_estep = be->t_estep - be_e0;
    r->t_allreduce = be->t_allreduce - be_a0;
    r->t_total = MPI_Wtime() - t_start;
    free(e.stats);
    ghf_derived_free(&e.g);
    ghf_em_state_free(&st);
    return rc;
}
