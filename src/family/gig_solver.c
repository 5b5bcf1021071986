/* gig_solver.c - GIG eta -> (p, a, b) by Newton on the Bregman objective
 * (math.md 3.3, 3.4).  See gig_solver.h for the contract.
 *
 * Rescaling.  With s = sqrt(eta2/eta3) and Y~ = s Y the target becomes
 * T = (eta1 + log s, m, m), m = sqrt(eta2 eta3) >= 1; if Y~ ~ GIG(p, a~, b~)
 * then Y ~ GIG(p, s a~, b~/s).  All iterations run on Y~, where a~ and b~
 * are on a common scale.
 *
 * Newton step.  The Newton step of the convex F in theta, dth = -H^-1 g with
 * H = Cov t(Y~) (positive definite) and g = E t(Y~) - T, is taken exactly in
 * p, and in a~, b~ as a multiplication by 1 + x (x the relative change dth
 * asks for) as long as that factor is >= 1e-3 (log_step below: a further
 * decrease in log scale when dth would make a~ or b~ negative), so a~, b~
 * stay positive and near the solution the step is plain Newton (quadratic
 * convergence).  Globalisation: Levenberg-Marquardt damping
 * (H + mu diag H) with mu adapted by the ratio of actual to predicted
 * decrease of F (mu = 0, i.e. pure Newton, whenever the model is good).
 * When the predicted decrease is below the rounding noise of F (ill-
 * conditioned, concentrated Y: sqrt(ab) or |p| large) a step is accepted iff
 * it lowers the residual.  (Fisher scoring in phi = (p, log a~, log b~) was
 * tried first: when b~ is tiny the theta step asks for relative changes of
 * 1e8, and scaling the phi step to cap them stalls p.  Armijo backtracking
 * along the Newton direction was tried second: with cond(H) ~ 1e10 the
 * Newton direction from a poor start is nearly the null direction and the
 * search walks p to the bound.)
 *
 * Convergence: r = max(|g1| / (|T1| + sd log Y~), |g2| / m, |g3| / m) <= tol.
 * The E log Y component is measured against |T1| + sd because that is the
 * scale to which E log Y is computable (and meaningful): T1 can be 0.
 * Relative to the original eta1 = T1 - log s the error is no larger.
 *
 * Limits and identifiability (what the tests see):
 *  - Boundary.  The GIG family is not steep: at b = 0 with p > 1, E 1/Y stays
 *    finite (Gamma), so some Jensen-feasible eta have their minimiser at b = 0.
 *    By convexity this is the case iff the Gamma fit to (eta1, eta3) has
 *    shape al > 1 and E_Gamma[1/Y] = (a/2)/(al-1) <= eta2; likewise a = 0
 *    with the inverse-Gamma fit.  Both are checked before Newton starts, and
 *    such eta return GHF_GIG_BOUNDARY with the Gamma (p, a, 0) or
 *    inverse-Gamma (p, 0, b) fit.
 *  - Near the Gamma limit (b small, p > 1) eta depends on b only through
 *    O(ab) relative corrections (O((ab)^(p-1)) for 1 < p < 2), so once
 *    sqrt(ab) < ~1e-8 b is not identified at all in double precision: the
 *    solver returns some small b (or BOUNDARY with b = 0) that reproduces eta
 *    to rounding, and p, a are still recovered.  For 0 < p <= 1 E 1/Y grows
 *    like b^(p-1) and b stays identified in log scale.  Mirror statements
 *    hold for a near the inverse-Gamma limit (p < -1).
 *  - Large sqrt(ab) or |p|: Y is concentrated, Cov t(Y) is nearly singular
 *    (log Y, 1/Y, Y nearly affine in each other) and theta is recovered only
 *    to ~ eps * cond(H), while eta is still reproduced to tol.
 */
#include "gig_solver.h"

#include <float.h>
#include <math.h>
#include <stddef.h>

#include "gig.h"

void ghf_gig_solver_defaults(ghf_gig_solver_opts *o)
{
    o->max_iter = 100;
    o->tol = 1e-13;
    o->p_max = 50.0;
}

const char *ghf_gig_status_str(ghf_gig_status s)
{
    switch (s) {
    case GHF_GIG_OK: return "ok";
    case GHF_GIG_INFEASIBLE: return "infeasible eta (Jensen)";
    case GHF_GIG_MAXITER: return "not converged (max iterations)";
    case GHF_GIG_BOUNDARY: return "boundary (Gamma/inverse-Gamma limit or |p| = p_max)";
    case GHF_GIG_BADINPUT: return "bad input";
    }
    return "unknown";
}

double ghf_gamma_shape_from_logmean_gap(double c)
{
    /* f(s) = digamma(e^s) - s - c is increasing in s = log al, from -inf to
     * -c > 0; safeguarded Newton on a bracket. */
    double lo = -700.0, hi = 700.0, s;
    if (!(c < 0.0)) return NAN;
    {
        /* -c ~ 1/(2al) + 1/(12 al^2) for large al; ~ 1/al + log al + gamma_E for small */
        const double mc = -c;
        const double al0 = (6.0 + sqrt(36.0 + 48.0 * mc)) / (24.0 * mc);
        s = log(al0);
    }
    for (int it = 0; it < 200; it++) {
        const double al = exp(s);
        const double f = ghf_digamma(al) - s - c;
        const double df = al * ghf_trigamma(al) - 1.0;
        double sn;
        if (f > 0.0) hi = s; else lo = s;
        if (f == 0.0) break;
        sn = s - f / df;
        if (!(sn > lo && sn < hi) || !(df > 0.0)) sn = 0.5 * (lo + hi);
        if (fabs(sn - s) <= 4e-16 * (1.0 + fabs(s))) {
            s = sn;
            break;
        }
        s = sn;
        if (hi - lo < 1e-15 * (1.0 + fabs(s))) break;
    }
    return exp(s);
}

/* ------------------------------------------------------------------------- */

typedef struct {
    double T1, m;      /* rescaled target (T1, m, m) */
    double p_max, tol;
    int max_iter;
} problem;

typedef struct {
    double phi[3];     /* p, log b~, log a~ */
    double F;          /* objective */
    double Fnoise;     /* rounding scale of F */
    double g[3];       /* E t - T in theta order (log, inv, y) */
    double H[6];       /* Cov t: 11 12 13 22 23 33 */
    double r;          /* residual (see top) */
    int ok;            /* finite */
} point;

static void evaluate(const problem *P, const double phi[3], point *e)
{
    const double p = phi[0], b = exp(phi[1]), a = exp(phi[2]);
    const ghf_gig_stats s = ghf_gig_stats_eval(p, a, b);
    const double t1 = (p - 1.0) * P->T1, t2 = 0.5 * b * P->m, t3 = 0.5 * a * P->m;
    e->phi[0] = phi[0];
    e->phi[1] = phi[1];
    e->phi[2] = phi[2];
    e->F = s.log_norm - t1 + t2 + t3;
    e->Fnoise = 1e-14 * (fabs(s.log_norm) + fabs(t1) + t2 + t3 + 1.0);
    e->g[0] = s.e_log - P->T1;
    e->g[1] = s.e_inv - P->m;
    e->g[2] = s.e_y - P->m;
    e->H[0] = s.h11; e->H[1] = s.h12; e->H[2] = s.h13;
    e->H[3] = s.h22; e->H[4] = s.h23; e->H[5] = s.h33;
    e->r = fmax(fabs(e->g[0]) / (fabs(P->T1) + sqrt(fabs(s.h11))),
                fmax(fabs(e->g[1]), fabs(e->g[2])) / P->m);
    e->ok = isfinite(e->F) && isfinite(e->r) && isfinite(s.h11) && isfinite(s.h12)
            && isfinite(s.h13) && isfinite(s.h22) && isfinite(s.h23) && isfinite(s.h33)
            && b > 0.0 && a > 0.0 && isfinite(a) && isfinite(b);
}

/* Solve (H + mu diag H) x = -g (H symmetric 3x3 packed), optionally with
 * x0 = 0 (fixed p).  Jacobi-scaled Cholesky, with a growing ridge if H is
 * not numerically positive definite. */
static int newton_dir(const double H[6], const double g[3], double mu, int fix_p, double x[3])
{
    double A[3][3] = {{H[0], H[1], H[2]}, {H[1], H[3], H[4]}, {H[2], H[4], H[5]}};
    double d[3], rhs[3];
    const int k0 = fix_p ? 1 : 0;
    for (int i = 0; i < 3; i++) {
        if (!(A[i][i] > 0.0) || !isfinite(A[i][i])) return 0;
        d[i] = 1.0 / sqrt(A[i][i]);
    }
    for (double ridge = 0.0; ridge < 1.0; ridge = ridge == 0.0 ? 1e-14 : ridge * 100.0) {
        double Lm[3][3] = {{0}};
        int pd = 1;
        for (int i = k0; i < 3 && pd; i++) {
            for (int j = k0; j <= i; j++) {
                double sum = A[i][j] * d[i] * d[j] + (i == j ? ridge + mu : 0.0);
                for (int k = k0; k < j; k++) sum -= Lm[i][k] * Lm[j][k];
                if (i == j) {
                    if (!(sum > 0.0)) { pd = 0; break; }
                    Lm[i][i] = sqrt(sum);
                } else {
                    Lm[i][j] = sum / Lm[j][j];
                }
            }
        }
        if (!pd) continue;
        for (int i = k0; i < 3; i++) rhs[i] = -g[i] * d[i];
        for (int i = k0; i < 3; i++) { /* forward */
            double sum = rhs[i];
            for (int k = k0; k < i; k++) sum -= Lm[i][k] * rhs[k];
            rhs[i] = sum / Lm[i][i];
        }
        for (int i = 2; i >= k0; i--) { /* backward */
            double sum = rhs[i];
            for (int k = i + 1; k < 3; k++) sum -= Lm[k][i] * rhs[k];
            rhs[i] = sum / Lm[i][i];
        }
        x[0] = 0.0;
        for (int i = k0; i < 3; i++) x[i] = rhs[i] * d[i];
        return isfinite(x[0]) && isfinite(x[1]) && isfinite(x[2]);
    }
    return 0;
}

enum { RUN_OK, RUN_MAXITER, RUN_PBOUND };

/* log of the factor applied to a~ (or b~) for a relative change x asked for
 * by the theta-space step: exactly log(1 + x) while 1 + x >= 1e-3, and below
 * that (the step would make a~ or b~ negative) a further decrease in log
 * scale, log(1e-3) (1 + (x0 - x)), x0 = -1 + 1e-3: positive, monotone and
 * continuous, and equal to the theta step whenever that keeps a~, b~ > 0. */
#define LOG_STEP_MAX 9.2 /* at most a factor 1e-4 down per step */
static double log_step(double x)
{
    const double x0 = -1.0 + 1e-3, l0 = -6.907755278982137; /* log(1e-3) */
    const double l = x >= x0 ? log1p(x) : l0 * (1.0 + (x0 - x));
    return l > -LOG_STEP_MAX ? l : -LOG_STEP_MAX;
}

/* After convergence to tol: plain Newton steps while they still halve the
 * residual (at most 3; usually one, from ~1e-13 to the rounding floor).  The
 * tol only bounds the eta error; theta inherits it amplified by cond(H), so
 * stopping anywhere inside tol would make (p, a, b) depend on rounding-level
 * differences of eta (e.g. across MPI rank counts) far more than necessary. */
static void polish(const problem *P, point *x, int *iters)
{
    for (int k = 0; k < 3; k++) {
        double dth[3], phit[3];
        point t;
        if (!newton_dir(x->H, x->g, 0.0, 0, dth)) return;
        phit[0] = fmax(-P->p_max, fmin(P->p_max, x->phi[0] + dth[0]));
        phit[1] = x->phi[1] + log_step(-2.0 * dth[1] / exp(x->phi[1]));
        phit[2] = x->phi[2] + log_step(-2.0 * dth[2] / exp(x->phi[2]));
        evaluate(P, phit, &t);
        if (iters) (*iters)++;
        if (!t.ok || !(t.r < 0.5 * x->r)) return;
        *x = t;
    }
}

/* Levenberg-Marquardt-damped Newton from phi0 (mu = 0: plain Newton).
 * best: the point with the lowest residual seen. */
static int run_newton(const problem *P, const double phi0[3], point *best, int *iters)
{
    point cur, trial;
    double mu = 0.0;
    evaluate(P, phi0, &cur);
    *best = cur;
    if (!cur.ok) return RUN_MAXITER;
    for (int it = 0; it < P->max_iter; it++) {
        const double p = cur.phi[0];
        const double b = exp(cur.phi[1]), a = exp(cur.phi[2]);
        int accepted = 0, noisy = 0;
        double rho = 0.0;
        if (cur.r < best->r) *best = cur;
        if (cur.r <= P->tol) {
            polish(P, best, iters);
            return RUN_OK;
        }
        if (iters) (*iters)++;
        for (int inner = 0; inner < 40 && !accepted; inner++) {
            double dth[3], phit[3], pred;
            if (!newton_dir(cur.H, cur.g, mu, 0, dth)) return RUN_MAXITER;
            /* active bound on p: the step would push p further out */
            if (fabs(p) >= P->p_max * (1.0 - 1e-15) && dth[0] * p > 0.0) {
                if (!newton_dir(cur.H, cur.g, mu, 1, dth)) return RUN_MAXITER;
                if (mu == 0.0 && fmax(fabs(cur.g[1]), fabs(cur.g[2])) / P->m <= P->tol) {
                    *best = cur; /* optimum on the face |p| = p_max */
                    return RUN_PBOUND;
                }
            }
            /* predicted decrease of the quadratic model (> 0) */
            {
                const double *H = cur.H;
                const double Hd0 = H[0] * dth[0] + H[1] * dth[1] + H[2] * dth[2];
                const double Hd1 = H[1] * dth[0] + H[3] * dth[1] + H[4] * dth[2];
                const double Hd2 = H[2] * dth[0] + H[4] * dth[1] + H[5] * dth[2];
                pred = -(cur.g[0] * dth[0] + cur.g[1] * dth[1] + cur.g[2] * dth[2])
                       - 0.5 * (dth[0] * Hd0 + dth[1] * Hd1 + dth[2] * Hd2);
            }
            phit[0] = fmax(-P->p_max, fmin(P->p_max, p + dth[0]));
            phit[1] = cur.phi[1] + log_step(-2.0 * dth[1] / b);
            phit[2] = cur.phi[2] + log_step(-2.0 * dth[2] / a);
            if (isfinite(pred) && pred > 0.0 && fabs(phit[1]) < 700.0 && fabs(phit[2]) < 700.0) {
                evaluate(P, phit, &trial);
                if (trial.ok) {
                    rho = (cur.F - trial.F) / pred;
                    if (pred <= 100.0 * cur.Fnoise) {
                        /* F cannot resolve the step: judge it by the residual */
                        noisy = 1;
                        accepted = trial.r < cur.r;
                    } else {
                        accepted = rho >= 1e-4;
                    }
                }
            }
            if (!accepted) mu = mu == 0.0 ? 1e-3 : mu * 4.0;
            if (mu > 1e12) break;
        }
        if (!accepted) return cur.r <= P->tol ? RUN_OK : RUN_MAXITER;
        if (noisy) mu = 0.0;
        else if (rho > 0.75) mu = mu < 1e-8 ? 0.0 : mu * 0.25;
        else if (rho < 0.25) mu = mu == 0.0 ? 1e-3 : mu * 2.0;
        cur = trial;
    }
    if (cur.r < best->r) *best = cur;
    return best->r <= P->tol ? RUN_OK : RUN_MAXITER;
}

static void to_out(double s_log, const double phi[3], double out[3])
{
    /* Y = Y~/s: a = s a~, b = b~/s */
    out[0] = phi[0];
    out[1] = exp(phi[2] + s_log);
    out[2] = exp(phi[1] - s_log);
}

static int all_finite3(const double *x)
{
    return x && isfinite(x[0]) && isfinite(x[1]) && isfinite(x[2]);
}

ghf_gig_status ghf_gig_solve(const double eta[3], const double *warm, const ghf_gig_solver_opts *o,
                             double out[3], int *iters)
{
    ghf_gig_solver_opts def;
    problem P;
    double s_log, lm, T1;
    const int warm_ok = all_finite3(warm) && warm[1] > 0.0 && warm[2] > 0.0;
    if (!o) {
        ghf_gig_solver_defaults(&def);
        o = &def;
    }
    if (iters) *iters = 0;
    /* a finite placeholder for every failure path */
    if (warm_ok) {
        out[0] = warm[0]; out[1] = warm[1]; out[2] = warm[2];
    } else {
        out[0] = 0.0; out[1] = 1.0; out[2] = 1.0;
    }
    if (!all_finite3(eta) || !(eta[1] > 0.0) || !(eta[2] > 0.0)) return GHF_GIG_BADINPUT;

    s_log = 0.5 * (log(eta[1]) - log(eta[2]));  /* log s */
    lm = 0.5 * (log(eta[1]) + log(eta[2]));     /* log m */
    T1 = eta[0] + s_log;
    if (!warm_ok) { /* placeholder on the right scale: GIG(0, s, 1/s) */
        out[1] = exp(s_log);
        out[2] = exp(-s_log);
    }
    /* Jensen: m > 1, -log m < T1 < log m, with a margin for the rounding
     * of T1 and log m (a gap at that level is a point mass: degenerate) */
    {
        const double margin = 8.0 * DBL_EPSILON * (1.0 + fabs(eta[0]) + fabs(log(eta[1])) + fabs(log(eta[2])));
        if (!(lm > margin) || !(T1 < lm - margin) || !(T1 > -lm + margin)) return GHF_GIG_INFEASIBLE;
    }

    P.T1 = T1;
    P.m = exp(lm);
    P.p_max = o->p_max > 0.0 ? o->p_max : 50.0;
    P.tol = o->tol > 0.0 ? o->tol : 1e-13;
    P.max_iter = o->max_iter > 0 ? o->max_iter : 100;

    /* moment fits of the two boundary families (rescaled variable) */
    const double al_g = ghf_gamma_shape_from_logmean_gap(T1 - lm);  /* Gamma: E log, E Y */
    const double al_i = ghf_gamma_shape_from_logmean_gap(-T1 - lm); /* 1/Gamma: E log, E 1/Y */
    const double m2 = P.m * P.m;
    /* boundary iff the boundary fit's third moment falls short of the target:
     * Gamma(al, rate al/m): E 1/Y = al/(m (al-1)) <= m  <=>  al <= m^2 (al - 1) */
    if (al_g > 1.0 && al_g <= m2 * (al_g - 1.0)) {
        double phi[3] = {fmin(al_g, P.p_max), 0.0, log(2.0 * al_g / P.m)};
        to_out(s_log, phi, out);
        out[2] = 0.0;
        return GHF_GIG_BOUNDARY;
    }
    if (al_i > 1.0 && al_i <= m2 * (al_i - 1.0)) {
        double phi[3] = {-fmin(al_i, P.p_max), log(2.0 * al_i / P.m), 0.0};
        to_out(s_log, phi, out);
        out[1] = 0.0;
        return GHF_GIG_BOUNDARY;
    }

    /* starts: warm first (if given), then the cold seeds by increasing F */
    double starts[12][3];
    int nstart = 0;
    if (warm_ok) {
        starts[nstart][0] = fmax(-P.p_max, fmin(P.p_max, warm[0]));
        starts[nstart][1] = log(warm[2]) + s_log; /* b~ = b s */
        starts[nstart][2] = log(warm[1]) - s_log; /* a~ = a / s */
        nstart++;
    }
    {
        double seeds[10][3];
        double Fs[10];
        int ns = 0;
        const double lam = P.m / (m2 - 1.0); /* inverse Gaussian lambda, mean m */
        const double zh = 1.0 / (m2 - 1.0);  /* GIG(1/2): E Y = m, E 1/Y = m */
        if (isfinite(al_g) && al_g > 0.0) {
            const double pg = fmin(al_g, P.p_max), lag = log(2.0 * al_g / P.m);
            const double bs[3] = {1e-2, 1e-4, 1e-8};
            for (int k = 0; k < 3; k++) {
                seeds[ns][0] = pg; seeds[ns][1] = log(bs[k]); seeds[ns][2] = lag; ns++;
            }
        }
        if (isfinite(al_i) && al_i > 0.0) {
            const double pi = fmin(al_i, P.p_max), lbi = log(2.0 * al_i / P.m);
            const double as[3] = {1e-2, 1e-4, 1e-8};
            for (int k = 0; k < 3; k++) {
                seeds[ns][0] = -pi; seeds[ns][1] = lbi; seeds[ns][2] = log(as[k]); ns++;
            }
        }
        if (isfinite(lam) && lam > 0.0) {
            seeds[ns][0] = -0.5; seeds[ns][1] = log(lam); seeds[ns][2] = log(lam) - 2.0 * lm; ns++;
            seeds[ns][0] = 0.5; seeds[ns][1] = log(zh) - lm; seeds[ns][2] = log(zh) + lm; ns++;
        }
        seeds[ns][0] = 0.0; seeds[ns][1] = 0.0; seeds[ns][2] = 0.0; ns++;
        for (int i = 0; i < ns; i++) {
            point e;
            evaluate(&P, seeds[i], &e);
            Fs[i] = e.ok ? e.F : INFINITY;
        }
        /* selection sort by F */
        for (int i = 0; i < ns; i++) {
            int k = i;
            for (int j = i + 1; j < ns; j++)
                if (Fs[j] < Fs[k]) k = j;
            if (k != i) {
                double t = Fs[i]; Fs[i] = Fs[k]; Fs[k] = t;
                for (int c = 0; c < 3; c++) { t = seeds[i][c]; seeds[i][c] = seeds[k][c]; seeds[k][c] = t; }
            }
            if (isfinite(Fs[i])) {
                starts[nstart][0] = seeds[i][0];
                starts[nstart][1] = seeds[i][1];
                starts[nstart][2] = seeds[i][2];
                nstart++;
            }
        }
    }

    point best;
    int have_best = 0, rc_best = RUN_MAXITER;
    for (int i = 0; i < nstart; i++) {
        point res;
        int rc;
        problem Pi = P;
        /* a warm start that has not converged in 30 steps is a poor start
         * (EM's are a few steps away): fall back to the cold seeds */
        if (i == 0 && warm_ok && nstart > 1 && Pi.max_iter > 30) Pi.max_iter = 30;
        rc = run_newton(&Pi, starts[i], &res, iters);
        if (res.ok && (!have_best || res.r < best.r)) {
            best = res;
            rc_best = rc;
            have_best = 1;
        }
        if (rc == RUN_OK || rc == RUN_PBOUND) {
            best = res;
            rc_best = rc;
            have_best = 1;
            break;
        }
    }
    if (!have_best) return GHF_GIG_MAXITER;
    {
        double tmp[3];
        to_out(s_log, best.phi, tmp);
        if (!all_finite3(tmp)) return GHF_GIG_MAXITER;
        out[0] = tmp[0]; out[1] = tmp[1]; out[2] = tmp[2];
    }
    if (rc_best == RUN_OK) return GHF_GIG_OK;
    if (rc_best == RUN_PBOUND) return GHF_GIG_BOUNDARY;
    return GHF_GIG_MAXITER;
}

/* ------------------------------------------------------------------------- */
/* p held fixed: (a, b) only.  See gig_solver.h. */

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
