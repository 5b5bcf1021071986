/* mstep.c - the M-step (math.md 3.1, 3.2). */
#include "mstep.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "gig.h"
#include "gig_solver.h"

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

ghf_mstep_status ghf_mstep(ghf_family fam, const ghf_mstep_opts *o, const double *stats,
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
        snprintf(why, whylen, "non-finite posterior moments (E[1/Y]=%g, E[Y]=%g)", s1, s2);
        return GHF_MSTEP_FAILED;
    }
    /* D = 1 - s1 s2 <= 0 by Jensen and Cauchy-Schwarz (math.md 3.1) */
    const double D = 1.0 - s1 * s2;
    if (!(D < -1e-14)) {
        snprintf(why, whylen, "boundary: E[Y]E[1/Y] -> 1 (the mixing variable degenerates; Gaussian limit)");
        return GHF_MSTEP_BOUNDARY;
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
    }
    /* subordinator */
    if (fam == GHF_FAMILY_NIG) {
        const double mu_ig = s2, lam = 1.0 / (s1 - 1.0 / s2);
        if (!(lam > 0) || !isfinite(lam)) {
            snprintf(why, whylen, "boundary: NIG lambda -> infinity (Gaussian limit)");
            return GHF_MSTEP_BOUNDARY;
        }
        next->p = -0.5;
        next->a = lam / (mu_ig * mu_ig);
        next->b = lam;
    } else if (o && o->fix_p) {
        double a, b;
        const int rc = ghf_gig_solve_fixed_p(cur->p, s1, s2, cur->a, cur->b, &a, &b);
        if (rc != 0) {
            snprintf(why, whylen, rc == 1 ? "boundary: GIG a or b -> 0 at fixed p=%g"
                                          : "GIG solve failed at fixed p=%g", cur->p);
            return rc == 1 ? GHF_MSTEP_BOUNDARY : GHF_MSTEP_FAILED;
        }
        next->a = a;
        next->b = b;
    } else {
        ghf_gig_solver_opts so;
        ghf_gig_solver_defaults(&so);
        if (o && o->p_max > 0) so.p_max = o->p_max;
        const double eta[3] = {s3, s1, s2}, warm[3] = {cur->p, cur->a, cur->b};
        const int warm_ok = cur->a > 0.0 && cur->b > 0.0; /* on a face: cold start */
        double out[3];
        int iters = 0;
        const ghf_gig_status st = ghf_gig_solve(eta, warm_ok ? warm : NULL, &so, out, &iters);
        if (st == GHF_GIG_BOUNDARY && isfinite(out[0]) && fabs(out[0]) < so.p_max &&
            ((out[1] == 0.0 && out[0] < 0.0 && out[2] > 0.0 && isfinite(out[2])) ||
             (out[2] == 0.0 && out[0] > 0.0 && out[1] > 0.0 && isfinite(out[1])))) {
            /* The update lies on a face of the GIG domain: a = 0 (the skewed
             * Student-t limit, Y inverse Gamma) or b = 0 (the variance-gamma
             * limit, Y Gamma).  That is still a valid EM update: the E-step
             * and the likelihood are defined there, so EM continues inside
             * the limiting family and the status will say "boundary". */
            next->p = out[0];
            next->a = out[1];
            next->b = out[2];
            return GHF_MSTEP_OK;
        }
        if (st == GHF_GIG_BOUNDARY || st == GHF_GIG_INFEASIBLE) {
            snprintf(why, whylen, "boundary: the GIG subordinator runs to the edge of its domain (%s; p=%.6g a=%.3g b=%.3g)",
                     ghf_gig_status_str(st), out[0], out[1], out[2]);
            return GHF_MSTEP_BOUNDARY;
        }
        if (st != GHF_GIG_OK || !isfinite(out[0]) || !isfinite(out[1]) || !isfinite(out[2])) {
            snprintf(why, whylen, "GIG M-step solve failed (%s)", ghf_gig_status_str(st));
            return GHF_MSTEP_FAILED;
        }
        next->p = out[0];
        next->a = out[1];
        next->b = out[2];
    }
    return GHF_MSTEP_OK;
}
