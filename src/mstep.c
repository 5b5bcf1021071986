/* mstep.c - the M-step (math.md 3.1, 3.2). */
#include "mstep.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gig.h"
#include "gig_solver.h"

/* smallest Sigma_ii relative to the size of the terms it is computed from */
#define GHF_MSTEP_PRECISION 1e-8

/* GIG moments needed by the fixed-p solver: E[1/Y], E[Y], E[1/Y^2], E[Y^2]
 * from the GIG helpers (exact down to the faces a = 0, b = 0). */
static void gig_mom(double p, double a, double b, double *einv, double *ey, double *einv2, double *ey2)
{
    const ghf_gig_stats g = ghf_gig_stats_eval(p, a, b);
    *einv = g.e_inv;
    *ey = g.e_y;
    *einv2 = g.h22 + g.e_inv * g.e_inv;
    *ey2 = g.h33 + g.e_y * g.e_y;
}

int ghf_gig_solve_fixed_p(double p, double eta_inv, double eta_y, double a0, double b0, double *a,
                          double *b)
{
    /* Newton on F(theta2, theta3) = psi - theta2 eta_inv - theta3 eta_y in
     * phi = (log b, log a), with backtracking on the gradient norm. */
    double la = log(a0), lb = log(b0);
    if (!isfinite(la) || !isfinite(lb)) {
        la = 0.0;
        lb = 0.0;
    }
    for (int it = 0; it < 100; it++) {
        const double ca = exp(la), cb = exp(lb);
        double ei, ey, ei2, ey2;
        gig_mom(p, ca, cb, &ei, &ey, &ei2, &ey2);
        /* dF/dtheta2 = E[1/Y] - eta_inv, dF/dtheta3 = E[Y] - eta_y;
         * theta2 = -b/2, theta3 = -a/2; dtheta2/dlb = -b/2, dtheta3/dla = -a/2 */
        const double g2 = ei - eta_inv, g3 = ey - eta_y;
        const double rel = fmax(fabs(g2) / eta_inv, fabs(g3) / eta_y);
        if (!isfinite(rel)) return 2;
        if (rel < 1e-15) break;
        const double h22 = ei2 - ei * ei, h33 = ey2 - ey * ey, h23 = 1.0 - ei * ey;
        /* in phi: grad = J g, H = J Hth J + diag(J' g) with J = diag(-b/2, -a/2) */
        const double j2 = -0.5 * cb, j3 = -0.5 * ca;
        const double G2 = j2 * g2, G3 = j3 * g3;
        double H22 = j2 * j2 * h22 + j2 * g2, H33 = j3 * j3 * h33 + j3 * g3, H23 = j2 * j3 * h23;
        /* keep the Newton matrix positive definite */
        const double tr = fabs(H22) + fabs(H33) + 1e-300;
        double det = H22 * H33 - H23 * H23;
        if (!(H22 > 0) || !(H33 > 0) || !(det > 1e-14 * tr * tr)) {
            H22 = j2 * j2 * h22;
            H33 = j3 * j3 * h33;
            det = H22 * H33 - H23 * H23;
            if (!(det > 0)) {
                H23 = 0;
                det = H22 * H33;
            }
        }
        double dlb = -(H33 * G2 - H23 * G3) / det;
        double dla = -(H22 * G3 - H23 * G2) / det;
        const double mx = fmax(fabs(dla), fabs(dlb));
        if (mx > 2.0) {
            dla *= 2.0 / mx;
            dlb *= 2.0 / mx;
        }
        /* backtrack on the relative gradient */
        double step = 1.0;
        for (int ls = 0; ls < 30; ls++) {
            double e1, e2, e3, e4;
            gig_mom(p, exp(la + step * dla), exp(lb + step * dlb), &e1, &e2, &e3, &e4);
            const double r2 = fmax(fabs(e1 - eta_inv) / eta_inv, fabs(e2 - eta_y) / eta_y);
            if (isfinite(r2) && r2 < rel) break;
            step *= 0.5;
        }
        la += step * dla;
        lb += step * dlb;
        if (la < -700 || lb < -700) {
            *a = exp(fmax(la, -700));
            *b = exp(fmax(lb, -700));
            return 1;
        }
        if (fabs(step * dla) + fabs(step * dlb) < 1e-16) break;
    }
    *a = exp(la);
    *b = exp(lb);
    return (isfinite(*a) && isfinite(*b)) ? 0 : 2;
}

/* The GIG Bregman objective F(theta) = psi(theta) - theta.eta (minus the
 * subordinator part of the expected complete-data log-likelihood per
 * observation); *scale: the size of its terms, for rounding margins. */
static double gig_objective(double p, double a, double b, const double eta[3], double *scale)
{
    const double lz = ghf_gig_log_norm(p, a, b);
    const double t1 = (p - 1.0) * eta[0], t2 = 0.5 * b * eta[1], t3 = 0.5 * a * eta[2];
    if (scale) *scale = fabs(lz) + fabs(t1) + fabs(t2) + fabs(t3) + 1.0;
    return lz - t1 + t2 + t3;
}

/* A subordinator (p, a, b) in the GIG domain: a, b >= 0, a = 0 only with
 * p < 0 and b = 0 only with p > 0, |p| <= p_max. */
static int gig_valid(double p, double a, double b, double p_max)
{
    if (!isfinite(p) || !isfinite(a) || !isfinite(b) || fabs(p) > p_max) return 0;
    if (a < 0.0 || b < 0.0 || (a == 0.0 && b == 0.0)) return 0;
    if (a == 0.0 && !(p < 0.0)) return 0;
    if (b == 0.0 && !(p > 0.0)) return 0;
    return 1;
}

/* Keep the candidate (p, a, b) in next if it is valid and its objective is
 * not above the current one's (beyond rounding); else keep cur's. */
static void gig_accept(const ghf_params *cur, const double cand[3], const double eta[3], double p_max,
                       ghf_params *next, int *n_kept)
{
    if (gig_valid(cand[0], cand[1], cand[2], p_max)) {
        double sc0 = 0.0, sc1 = 0.0;
        const double f0 = gig_objective(cur->p, cur->a, cur->b, eta, &sc0);
        const double f1 = gig_objective(cand[0], cand[1], cand[2], eta, &sc1);
        if (isfinite(f1) && (!isfinite(f0) || f1 <= f0 + 1e-13 * fmax(sc0, sc1))) {
            next->p = cand[0];
            next->a = cand[1];
            next->b = cand[2];
            return;
        }
    }
    next->p = cur->p;
    next->a = cur->a;
    next->b = cur->b;
    if (n_kept) (*n_kept)++;
}

ghf_mstep_status ghf_mstep(ghf_family fam, ghf_mstep_opts *o, const double *stats,
                           const ghf_params *cur, ghf_params *next, char *why, size_t whylen)
{
    const int d = cur->d;
    const double n = stats[GHF_ST_N];
    ghf_params_copy(next, cur);
    if (!(n > 0)) {
        snprintf(why, whylen, "no observations");
        return GHF_MSTEP_FAILED;
    }
    const double s1 = stats[GHF_ST_S1] / n, s2 = stats[GHF_ST_S2] / n, s3 = stats[GHF_ST_S3] / n;
    const double *S4 = stats + GHF_ST_S4, *S5 = stats + ghf_stats_s5(d), *S6 = stats + ghf_stats_s6(d);
    if (!isfinite(s1) || !isfinite(s2) || !isfinite(s3)) {
        /* posterior moments that overflow: rows sit where the density is unbounded */
        snprintf(why, whylen, "boundary: the posterior moments overflow (E[1/Y]=%g, E[Y]=%g: the fit collapses onto tied observations)", s1, s2);
        return GHF_MSTEP_BOUNDARY;
    }
    /* D = 1 - s1 s2 <= 0 by Jensen and Cauchy-Schwarz (math.md 3.1) */
    const double D = 1.0 - s1 * s2;
    if (!(D < -1e-14)) {
        snprintf(why, whylen, "boundary: E[Y]E[1/Y] -> 1 (the mixing variable degenerates; Gaussian limit)");
        return GHF_MSTEP_GAUSS;
    }
    for (int i = 0; i < d; i++) {
        const double s4 = S4[i] / n, s5 = S5[i] / n;
        next->mu[i] = (s4 - s2 * s5) / D;
        next->gamma[i] = (s5 - s1 * s4) / D;
    }
    for (int i = 0; i < d; i++) {
        for (int j = 0; j <= i; j++) {
            const double s6 = S6[i * d + j] / n;
            const double v = s6 - (S5[i] / n) * next->mu[j] - next->mu[i] * (S5[j] / n) +
                             s1 * next->mu[i] * next->mu[j] - s2 * next->gamma[i] * next->gamma[j];
            next->sigma[i * d + j] = v;
            next->sigma[j * d + i] = v;
        }
        /* Sigma_ii is a difference of terms that cancel when a few rows
         * dominate the statistics (gross outliers explained by a huge Y):
         * stop before the cancellation eats more than GHF_MSTEP_DIGITS_LOST
         * digits (well before rounding decides, so every rank count stops at
         * the same iteration) */
        const double s5i = S5[i] / n, mi = next->mu[i], gi = next->gamma[i];
        const double mag = fabs(S6[i * d + i] / n) + 2.0 * fabs(s5i * mi) + s1 * mi * mi + s2 * gi * gi;
        if (!(next->sigma[i * d + i] > GHF_MSTEP_PRECISION * mag)) {
            snprintf(why, whylen, "boundary: the update of Sigma loses its precision in column %d (a few observations dominate the statistics: gross outliers explained by a huge mixing variable)", i);
            return GHF_MSTEP_BOUNDARY;
        }
    }
    /* subordinator */
    const double p_max = (o && o->p_max > 0) ? o->p_max : 50.0;
    const double eta[3] = {s3, s1, s2};
    int *n_kept = o ? &o->n_kept : NULL;
    if (fam == GHF_FAMILY_NIG) {
        const double mu_ig = s2, lam = 1.0 / (s1 - 1.0 / s2);
        if (!(lam > 0) || !isfinite(lam)) {
            snprintf(why, whylen, "boundary: NIG lambda -> infinity (Gaussian limit)");
            return GHF_MSTEP_GAUSS;
        }
        next->p = -0.5;
        next->a = lam / (mu_ig * mu_ig);
        next->b = lam;
    } else if (o && o->fix_p) {
        double cand[3] = {cur->p, NAN, NAN};
        const int rc = ghf_gig_solve_fixed_p(cur->p, s1, s2, cur->a, cur->b, &cand[1], &cand[2]);
        if (rc == 1) {
            /* the optimum at this p lies on a face: a = 0 (p < 0) or b = 0 (p > 0) */
            if (cur->p < 0.0) cand[1] = 0.0;
            else if (cur->p > 0.0) cand[2] = 0.0;
        }
        gig_accept(cur, cand, eta, p_max, next, n_kept);
    } else {
        ghf_gig_solver_opts so;
        ghf_gig_solver_defaults(&so);
        so.p_max = p_max;
        const double warm[3] = {cur->p, cur->a, cur->b};
        const int warm_ok = cur->a > 0.0 && cur->b > 0.0; /* on a face: cold start */
        double out[3];
        int iters = 0;
        const ghf_gig_status st = ghf_gig_solve(eta, warm_ok ? warm : NULL, &so, out, &iters);
        if (st == GHF_GIG_INFEASIBLE) {
            /* E log Y, E 1/Y, E Y of a point mass to rounding */
            snprintf(why, whylen, "boundary: the GIG statistics are those of a constant (Gaussian limit)");
            return GHF_MSTEP_GAUSS;
        }
        if (st == GHF_GIG_BADINPUT) {
            snprintf(why, whylen, "GIG M-step: invalid statistics (E log Y=%g, E 1/Y=%g, E Y=%g)", s3, s1, s2);
            return GHF_MSTEP_FAILED;
        }
        /* OK; BOUNDARY: the optimum on a face a = 0 (skewed Student-t limit)
         * or b = 0 (variance-gamma limit), where the E-step and the
         * likelihood are defined, or on |p| = p_max: valid updates, EM goes
         * on there; MAXITER: the best point the solver found, if it improves */
        gig_accept(cur, out, eta, p_max, next, n_kept);
    }
    return GHF_MSTEP_OK;
}
