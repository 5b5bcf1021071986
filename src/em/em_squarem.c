/* em_squarem.c - SQUAREM cycles (Varadhan and Roland 2008, scheme S3): the
 * extrapolated point and its acceptance (em_internal.h). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "em_internal.h"
#include "gig.h"
#include "mstep.h"

/* the largest SQUAREM step length |alpha| */
#define GHF_SQ_MAX_STEP 64.0
/* With a gross outlier: the factor by which a step taken at the cap is
 * lengthened, and the most lengthenings in one cycle (64 * 4^16 ~ 2.7e11). */
#define GHF_SQ_GROW 4.0
#define GHF_SQ_GROW_MAX 16

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

/* theta' = t0 - 2 alpha r + alpha^2 v, with alpha = -|r|/|v| clamped to
 * [-GHF_SQ_MAX_STEP, -1] when alpha_in is 0, else alpha = alpha_in (*alpha_out,
 * if not NULL, gets the alpha used).  Returns 0, or -1 if the point is
 * unusable. */
int ghf__em_squarem_point(const ghf_params *t0, const ghf_params *t1, const ghf_params *t2, double fixed_p,
                         double alpha_in, ghf_params *out, double *alpha_out)
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
        if (alpha_in != 0.0) alpha = alpha_in;
        if (alpha_out) *alpha_out = alpha;
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

/* One candidate for sq_lengthen: L->thy (E-step at it); kept in L->thx (its
 * statistics in e->saved) if its log-likelihood beats *llx by the margin.
 * *ll_out: its log-likelihood where finite and exact to 1e-12, else NaN.
 * Returns 1 if kept, 0 if not, -1 on a run-time error. */
static int sq_try(em_loop *L, ghf_em_result *r, double *llx, double *ll_out)
{
    em_ctx *e = L->e;
    *ll_out = NAN;
    if (ghf_derive(&L->thy, &e->g) != 0) return 0;
    ghf_params_normalize(&L->thy, e->g.logdet);
    const int erc = ghf__em_estep(e, &L->thy, 0, L->err, L->errlen);
    r->n_estep++;
    if (erc == 1) return -1;
    const double ll = e->stats[GHF_ST_LL];
    /* only where the log-likelihood is exact to 1e-12 (the limit of ghf__em_step_plain) */
    if (!(erc == 0 && ghf__em_estep_ok(e)) || 4.0 * DBL_EPSILON * e->stats[GHF_ST_ZWABS] > 1e-12 * fmax(1.0, fabs(ll)))
        return 0;
    *ll_out = ll;
    if (!(ll > *llx + GHF_LL_MARGIN * fmax(1.0, fabs(*llx)))) return 0;
    *llx = ll;
    ghf_params_copy(&L->thx, &L->thy);
    memcpy(e->saved, e->stats, (size_t)e->len * sizeof(double));
    return 1;
}

/* The scale of gamma: L->thy = L->thx with gamma e^t and mu moved so that
 * the bulk stays: mu - (e^t - 1) gamma ey.  ey is the law's E[Y] where that
 * is the bulk's (E[Y] E[1/Y] <= 2), else 1/s1 (mu's complete-data M-step
 * given gamma, sum u_i (x_i - mu) = n gamma, at the statistics of thx). */
static double sq_gamma_ey(const em_loop *L)
{
    const ghf_gig_moments gm = ghf_gig_moments_eval(L->thx.p, L->thx.a, L->thx.b);
    const double s1 = L->e->saved[GHF_ST_S1] / L->e->saved[GHF_ST_N];
    return isfinite(gm.e_y) && gm.e_y * gm.e_inv <= 2.0 ? gm.e_y : 1.0 / s1;
}

static void sq_gamma_scaled(em_loop *L, double t, double ey)
{
    const double f = exp(t);
    ghf_params_copy(&L->thy, &L->thx);
    for (int j = 0; j < L->e->d; j++) {
        L->thy.gamma[j] *= f;
        L->thy.mu[j] -= (f - 1.0) * L->thx.gamma[j] * ey;
    }
}

/* d loglik / dt of sq_gamma_scaled at t = 0, from the E-step statistics of
 * thx (Fisher's identity: the expected complete-data score),
 *   gamma' Lambda (S4 - n mu - S2 gamma) - ey gamma' Lambda (S5 - S1 mu - n gamma),
 * Lambda = Sigma^-1 = L^-T L^-1 (e->g derived at thx). */
static double sq_gamma_slope(const em_loop *L, double ey)
{
    const em_ctx *e = L->e;
    const int d = e->d;
    const double *st = e->saved, *mu = L->thx.mu, *ga = L->thx.gamma;
    const double n = st[GHF_ST_N], S1 = st[GHF_ST_S1], S2 = st[GHF_ST_S2];
    const double *S4 = st + GHF_ST_S4, *S5 = st + ghf_stats_s5(d);
    double g = 0.0;
    for (int i = 0; i < d; i++) {
        /* row i of L^-1 applied to the two residual vectors */
        double a1 = 0.0, a2 = 0.0;
        for (int j = 0; j <= i; j++) {
            const double li = e->g.Linv[i * d + j];
            a1 += li * (S4[j] - n * mu[j] - S2 * ga[j]);
            a2 += li * (S5[j] - S1 * mu[j] - n * ga[j]);
        }
        g += e->g.w[i] * (a1 - ey * a2);
    }
    return g;
}

/* Data with a gross outlier (o->outlier_note): a skewed fit explains the row
 * by a mixing variable Y ~ |x|/|gamma| whose posterior is nearly a point
 * mass, so EM's rate tends to 1 along the skewness: each step moves
 * |L^-1 gamma| by about |P + 1/2| / |L^-1 (x - mu)| only (math.md 5.2), a
 * constant crawl that SQUAREM's capped steps cannot escape.  An extrapolated
 * point accepted at the cap is therefore lengthened along the same cycle's
 * curve theta_k - 2 alpha r + alpha^2 v, alpha x4 at a time, while the
 * log-likelihood increases (as SQUAREM's step-length control of Varadhan
 * and Roland, within one cycle so that the cycle start stays the whole
 * state).  Then (skewed fits) the size of gamma itself is searched, the
 * bulk's location held (sq_gamma_scaled; math.md 5.2).  Only candidates
 * whose log-likelihood is exact to 1e-12 are kept.  Every decision is on all-reduced log-likelihoods with the margin
 * GHF_LL_MARGIN, so every rank count takes the same path.  On return
 * L->thx is the best accepted point, with its log-likelihood, and
 * e->stats and e->g are those of its E-step.  Returns 0, or 1 on a run-time
 * error (message in L->err). */
static int sq_lengthen(em_loop *L, ghf_em_result *r, double *llx)
{
    em_ctx *e = L->e;
    const ghf_em_state *st = &L->st;
    const double fixed_p = ghf_model_fixed_p(&e->model, e->d);
    const size_t nb = (size_t)e->len * sizeof(double);
    int rc = 0;
    double ll1;
    memcpy(e->saved, e->stats, nb);
    if (L->sq_alpha <= -GHF_SQ_MAX_STEP) {
        double alpha = L->sq_alpha;
        for (int i = 0; i < GHF_SQ_GROW_MAX; i++) {
            alpha *= GHF_SQ_GROW;
            if (ghf__em_squarem_point(&L->cyc_cur, &st->prev, &L->th2, fixed_p, alpha, &L->thy, NULL) != 0) break;
            if ((rc = sq_try(L, r, llx, &ll1)) != 1) break;
        }
    }
    /* the scale of gamma alone: x4 while the log-likelihood rises, then one
     * step to the top of the parabola through the value and slope at the
     * last point and the value at x4 */
    double g2 = 0.0;
    for (int j = 0; j < e->d; j++) g2 += L->thx.gamma[j] * L->thx.gamma[j];
    if (rc >= 0 && !e->model.symmetric && g2 > 0.0) {
        const double t1 = log(GHF_SQ_GROW);
        for (int i = 0; i < GHF_SQ_GROW_MAX; i++) {
            const double ey = sq_gamma_ey(L), ll0 = *llx;
            sq_gamma_scaled(L, t1, ey);
            rc = sq_try(L, r, llx, &ll1);
            if (rc != 0) {
                if (rc < 0) break;
                continue;
            }
            if (isfinite(ll1) && ghf_derive(&L->thx, &e->g) == 0) {
                const double g0 = sq_gamma_slope(L, ey), c = (ll1 - ll0 - g0 * t1) / (t1 * t1);
                if (c < 0.0 && isfinite(g0)) {
                    sq_gamma_scaled(L, fmax(-t1, fmin(t1, -g0 / (2.0 * c))), ey);
                    if ((rc = sq_try(L, r, llx, &ll1)) != 0) break;
                }
            }
            /* no parabola, or its top no better: x2, x2^(1/2), x2^(1/4) */
            for (double t = 0.5 * t1; t > 0.1 && rc == 0; t *= 0.5) {
                sq_gamma_scaled(L, t, ey);
                rc = sq_try(L, r, llx, &ll1);
            }
            break;
        }
    }
    if (rc < 0) return 1;
    memcpy(e->stats, e->saved, nb);
    ghf_derive(&L->thx, &e->g); /* it was derived before */
    return 0;
}

/* The extrapolated point theta' (E-step just done): keep it as iterate k if
 * it is at least as good as theta_{k+1}... see the loop comment. */
em_next ghf__em_step_extrapolated(em_loop *L, ghf_em_result *r, int erc)
{
    em_ctx *e = L->e;
    ghf_em_state *st = &L->st;
    const int k = st->iter;
    double llx = e->stats[GHF_ST_LL];
    L->phase = PH_CYCLE_START;
    /* The slack (1e-13 relative, far above round-off and far below the
     * 1e-12 monotonicity guarantee) keeps the decision away from round-off
     * ties, so every rank count takes the same path. */
    if (!(erc == 0 && ghf__em_estep_ok(e) && llx >= L->ll_th1 - GHF_LL_MARGIN * fmax(1.0, fabs(L->ll_th1)))) {
        r->n_accel_rejected++; /* the cycle ends at theta_2 (st.cur already) */
        return EM_GO_ON;
    }
    r->n_accel_accepted++;
    if (e->o->outlier_note && sq_lengthen(L, r, &llx) != 0) return EM_ERROR;
    st->trace[k] = llx;
    if (L->print)
        printf("%siter %5d  loglik % .15e  dll % .3e  (extrapolated)  %.4f s\n", ghf__em_line_prefix(L), k, llx,
               (llx - st->trace[k - 1]) / fmax(1.0, fabs(llx)), MPI_Wtime() - L->t_it);
    if (k >= L->max_iter) {
        ghf__em_finish(r, &L->thx, llx, k, st->trace, GHF_EM_MAX_ITER, "max_iter: iteration limit reached before convergence");
        return EM_DONE;
    }
    /* the extrapolated point becomes the current iterate, and EM steps from it */
    ghf_params_copy(&st->prev, &st->cur);
    ghf_params_copy(&st->cur, &L->thx);
    const em_next nx = ghf__em_mstep_from_cur(L, r, llx);
    if (nx != EM_GO_ON) return nx;
    ghf_params_copy(&st->prev, &st->cur);
    ghf_params_copy(&st->cur, &L->nx);
    st->iter = k + 1;
    return EM_GO_ON;
}
