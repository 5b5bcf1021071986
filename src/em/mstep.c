/* mstep.c - the M-step (math.md 3.1, 3.2). */
#include "mstep.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gig.h"
#include "family.h"
#include "gig_solver.h"

/* smallest Sigma_ii relative to the size of the terms it is computed from */
#define GHF_MSTEP_PRECISION 1e-8

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

ghf_mstep_status ghf_mstep_location(int symmetric, int d, double n, double s1, double s2, const double *S4,
                                    const double *S5, double *mu, double *gamma, char *why, size_t whylen)
{
    if (symmetric) {
        /* maximise -n/2 log|Sigma| - 1/2 sum_i u_i (x_i - mu)' Sigma^-1 (x_i - mu) */
        for (int i = 0; i < d; i++) {
            mu[i] = (S5[i] / n) / s1;
            gamma[i] = 0.0;
        }
        return GHF_MSTEP_OK;
    }
    /* D = 1 - s1 s2 <= 0 by Jensen and Cauchy-Schwarz (math.md 3.1) */
    const double D = 1.0 - s1 * s2;
    if (!(D < -1e-14)) {
        snprintf(why, whylen, "boundary: E[Y]E[1/Y] -> 1 (the mixing variable degenerates; Gaussian limit)");
        return GHF_MSTEP_GAUSS;
    }
    for (int i = 0; i < d; i++) {
        const double s4 = S4[i] / n, s5 = S5[i] / n;
        mu[i] = (s4 - s2 * s5) / D;
        gamma[i] = (s5 - s1 * s4) / D;
    }
    return GHF_MSTEP_OK;
}

/* mu, gamma, Sigma in closed form (math.md 3.1); symmetric: gamma = 0,
 * mu = S5 / S1.  Returns OK, GAUSS (D ~ 0) or BOUNDARY (precision lost). */
static ghf_mstep_status normal_block(const ghf_model *m, const double *stats, ghf_params *next, char *why,
                                     size_t whylen)
{
    const int d = next->d;
    const double n = stats[GHF_ST_N];
    const double s1 = stats[GHF_ST_S1] / n, s2 = stats[GHF_ST_S2] / n;
    const double *S4 = stats + GHF_ST_S4, *S5 = stats + ghf_stats_s5(d), *S6 = stats + ghf_stats_s6(d);
    const ghf_mstep_status ls =
        ghf_mstep_location(m->symmetric, d, n, s1, s2, S4, S5, next->mu, next->gamma, why, whylen);
    if (ls != GHF_MSTEP_OK) return ls;
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
         * stop before the cancellation eats more than 8 digits (well before
         * rounding decides, so every rank count stops at the same iteration) */
        const double s5i = S5[i] / n, mi = next->mu[i], gi = next->gamma[i];
        const double mag = fabs(S6[i * d + i] / n) + 2.0 * fabs(s5i * mi) + s1 * mi * mi + s2 * gi * gi;
        if (!(next->sigma[i * d + i] > GHF_MSTEP_PRECISION * mag)) {
            snprintf(why, whylen, "boundary: the update of Sigma loses its precision in column %d (a few observations dominate the statistics: gross outliers explained by a huge mixing variable)", i);
            return GHF_MSTEP_BOUNDARY;
        }
    }
    return GHF_MSTEP_OK;
}

ghf_mstep_status ghf_mstep(const ghf_model *m, ghf_mstep_opts *o, const double *stats, const ghf_params *cur,
                           ghf_params *next, char *why, size_t whylen)
{
    const int d = cur->d;
    const double n = stats[GHF_ST_N];
    ghf_params_copy(next, cur);
    if (!(n > 0)) {
        snprintf(why, whylen, "no observations");
        return GHF_MSTEP_FAILED;
    }
    const double s1 = stats[GHF_ST_S1] / n, s2 = stats[GHF_ST_S2] / n, s3 = stats[GHF_ST_S3] / n;
    if (!isfinite(s1) || !isfinite(s2) || !isfinite(s3)) {
        /* posterior moments that overflow: rows sit where the density is unbounded */
        snprintf(why, whylen, "boundary: the posterior moments overflow (E[1/Y]=%g, E[Y]=%g: the fit collapses onto tied observations)", s1, s2);
        return GHF_MSTEP_BOUNDARY;
    }
    const ghf_mstep_status ns = normal_block(m, stats, next, why, whylen);
    if (ns != GHF_MSTEP_OK) return ns;
    return ghf_mstep_sub(m, o, d, s1, s2, s3, cur, next, why, whylen);
}

ghf_mstep_status ghf_mstep_sub(const ghf_model *m, ghf_mstep_opts *o, int d, double s1, double s2, double s3,
                               const ghf_params *cur, ghf_params *next, char *why, size_t whylen)
{
    /* the subordinator, through the family table; kept only if it improves */
    const ghf_family_def *fd = ghf_family_get(m->family);
    const double fp = ghf_model_fixed_p(m, d);
    double p_max = (o && o->p_max > 0) ? o->p_max : fd->p_max;
    if (!isnan(fp) && fabs(fp) > p_max) p_max = fabs(fp);
    const double eta[3] = {s3, s1, s2}, curs[3] = {cur->p, cur->a, cur->b};
    double out[3] = {NAN, NAN, NAN};
    const ghf_sub_status st = ghf_model_msub(m, d, eta, curs, out);
    if (st == GHF_SUB_GAUSS) {
        snprintf(why, whylen, "boundary: the subordinator's statistics are those of a constant (Gaussian limit)");
        return GHF_MSTEP_GAUSS;
    }
    if (st == GHF_SUB_FAILED) {
        snprintf(why, whylen, "subordinator M-step: invalid statistics (E log Y=%g, E 1/Y=%g, E Y=%g)", s3, s1, s2);
        return GHF_MSTEP_FAILED;
    }
    gig_accept(cur, out, eta, p_max, next, o ? &o->n_kept : NULL);
    return GHF_MSTEP_OK;
}
