/* em_converge.c - when a fit ends: the convergence status per family, flat
 * likelihoods, collapsing fits, and the rescue at the Gaussian limit
 * (em_internal.h). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "em_internal.h"
#include "gig.h"
#include "mstep.h"

/* Squared coefficient of variation Var[Y] / E[Y]^2 of the subordinator (0 at
 * the Gaussian limit; +inf when Var[Y] is infinite). */
double ghf__em_kappa_of(const ghf_params *t)
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
int ghf__em_collapsing(const em_ctx *e, const ghf_em_state *st, int k, double n_obs, char *why, size_t whylen)
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
                if (e->o->outlier_note) /* the law spreads to reach a gross outlier, and collapses on the rest */
                    snprintf(why, whylen, "boundary: the likelihood is unbounded (the log-likelihood grows by %.3g per iteration without slowing down while the mixing law spreads to reach a gross outlier: the fit collapses onto single observations)",
                             st->trace[k] - st->trace[k - 1]);
                else
                    snprintf(why, whylen, "boundary: the likelihood is unbounded (the log-likelihood grows by %.3g per iteration without slowing down while the mixing law spreads: the fit collapses onto tied observations)",
                             st->trace[k] - st->trace[k - 1]);
                return 1;
            }
        }
    }
    return 0;
}

/* Convergence at a plain step: the relative change of the log-likelihood and
 * the largest relative parameter change both below tol. */
const char *ghf__em_converged_status(const ghf_model *m, const ghf_params *t)
{
    /* faces of the GIG domain: a boundary only for the families that live inside it */
    static char buf[160];
    const ghf_family_def *fd = ghf_family_get(m->family);
    if (fd->sub == GHF_SUB_GIG) {
        if (t->a == 0.0 || t->b == 0.0) {
            snprintf(buf, sizeof buf, "converged on the boundary %s = 0 (the %s limit of %s)", t->a == 0.0 ? "a" : "b",
                     t->a == 0.0 ? "skewed Student-t" : "variance-gamma", fd->name);
            return buf;
        }
        if (fabs(t->p) >= fd->p_max) {
            snprintf(buf, sizeof buf, "converged on the boundary |p| = %g (the bound of the GIG index)", fd->p_max);
            return buf;
        }
    }
    return "converged";
}

int ghf__em_on_face(const ghf_model *m, const ghf_params *t)
{
    return ghf_family_get(m->family)->sub == GHF_SUB_GIG && (t->a == 0.0 || t->b == 0.0);
}

/* The log-likelihood has changed by less than tol (relative) in total over
 * the last GHF_FLAT_ITERS iterations: converged in likelihood even if the
 * parameters still drift along a weakly identified direction (near the
 * Gaussian limit EM converges sublinearly there). */
#define GHF_FLAT_ITERS 20
int ghf__em_flat(const ghf_em_state *st, int k, double tol)
{
    if (k < GHF_FLAT_ITERS) return 0;
    const double ll = st->trace[k];
    return fabs(ll - st->trace[k - GHF_FLAT_ITERS]) < tol * fmax(1.0, fabs(ll));
}

/* A fit never ends below the Gaussian limit of its family: when it ends at
 * or below the Gaussian log-likelihood, the near-Gaussian point is
 * evaluated and returned instead if it is better (one more E-step). */
int ghf__em_against_gaussian(em_loop *L, ghf_em_result *r, char *err, size_t errlen)
{
    em_ctx *e = L->e;
    const double llg0 = e->o->ll_gauss;
    if (!(r->outcome == GHF_EM_CONVERGED || r->outcome == GHF_EM_MAX_ITER || r->outcome == GHF_EM_BOUNDARY)) return 0;
    if (!isfinite(llg0) || !(r->loglik < llg0 + 1e-9 * fabs(llg0))) return 0;
    if (ghf__em_near_gaussian(e, &L->gauss) != 0) return 0;
    const int erc = ghf__em_estep(e, &L->gauss, 0, err, errlen);
    r->n_estep++;
    if (erc == 1) return 1;
    const double llg = e->stats[GHF_ST_LL];
    if (erc != 0 || !ghf__em_estep_ok(e) || !(llg > r->loglik + GHF_LL_MARGIN * fabs(r->loglik))) return 0;
    ghf_params_copy(&r->params, &L->gauss);
    r->loglik = llg;
    r->trace[r->n_trace] = llg; /* one more iterate; the trace has room for max_iter + 2 */
    r->n_trace++;
    r->n_iter++;
    r->outcome = GHF_EM_BOUNDARY;
    r->converged = 0;
    snprintf(r->status, sizeof r->status, "%s", ghf__em_gauss_limit_status);
    return 0;
}
