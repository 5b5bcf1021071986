/* gig.h - the GIG(p, a, b) distribution: log-normaliser, moments and the
 * covariance of its sufficient statistics, for host and device.
 *
 * GIG(p, a, b) has density proportional to y^(p-1) exp(-(a y + b/y)/2), y > 0
 * (math.md 1.1).  Its normaliser
 *     Z(p,a,b) = int_0^inf y^(p-1) e^{-(a y + b/y)/2} dy
 *              = 2 (b/a)^(p/2) K_p(sqrt(ab))                    (a, b > 0)
 *              = Gamma(p) (a/2)^(-p)                            (b = 0, p > 0)
 *              = Gamma(-p) (b/2)^p                              (a = 0, p < 0)
 * is exp(psi(theta)) of the exponential family with t(y) = (log y, 1/y, y),
 * theta = (p-1, -b/2, -a/2); grad psi = E t(Y) and Hess psi = Cov t(Y)
 * (math.md 1.1, 3.4 "[derived]").
 *
 * Method.  Rather than combining Bessel values (whose cancellations near the
 * Gamma / inverse-Gamma limits, e.g. E log Y = d/dv log K + log(b/a)/2 with
 * both terms ~ |log b| when b -> 0, cost digits), everything is one
 * trapezoidal rule in t = log y on the integrand exp(p t - (a e^t + b e^-t)/2),
 * which is entire and decays double-exponentially (or exponentially on a
 * Gamma-like side).  Centred at the mode t0 of that integrand, with u = t - t0,
 * R = sqrt(p^2 + ab), the exponent relative to the peak is
 *     g(u) = -2 R sinh^2(u/2) - p (sinh u - u)          (no cancellation)
 * and A0 = a e^t0 = R + p, B0 = b e^-t0 = R - p.  The same nodes give log Z,
 * E u, E e^-u, E e^u and their centred second moments, so E log Y is formed
 * as t0 + E u with no cancellation against log(b/a), and the covariance is
 * accurate even when it is nearly singular.  There is therefore no switch and
 * no accuracy hole between the interior and the limits b -> 0, a -> 0: as
 * sqrt(ab) -> 0 the rule converges to the Gamma / inverse-Gamma values with
 * all their corrections, at a node count growing like |log(ab)| (about 250
 * nodes at sqrt(ab) = 1e-10, p ~ 0).  a = 0 or b = 0 exactly use the closed
 * forms (with digamma/trigamma below).
 *
 * Step: the rule's relative error is |K_{q+iw}(z)/K_q(z)| at w = 2 pi/h for
 * the largest tilt q = |p| + kmax that is integrated; w = 26 + sqrt(78 R_q)
 * keeps that below 1e-17 for all q and z (checked against mpmath; the Gamma
 * limit needs w ~ 22..71 for q = 0..52, the large-z limit w ~ sqrt(78 z)).
 * Range: every tilted integrand e^{k u} f(u), |k| <= kmax, is covered down to
 * e^-45 of its own peak, so E[Y^2], E[Y^-2] and E[t Y^+-1] are as accurate as
 * E Y.  Typical cost: 30-60 nodes (|p| or z large), up to ~250 (p and z
 * small); at most GHF_GIG_MAXN.
 *
 * Accuracy (tests/test_gig.c, against 30-digit mpmath quadrature):
 * ~1e-15 relative for E 1/Y, E Y; E log Y to ~1e-15 of max(|E log Y|, sd);
 * log Z to ~1e-15 of max(|log Z|, |p t0|, R).
 */
#ifndef GHF_GIG_H
#define GHF_GIG_H

#include "ghf_defs.h"

#define GHF_GIG_MAXN 4096

/* ---------------------------------------------------------------------------
 * digamma and trigamma for x > 0 (recurrence to x >= 10, then asymptotic).
 * -------------------------------------------------------------------------*/
GHF_HD static inline double ghf_digamma(double x)
{
    double acc = 0.0;
    if (!(x > 0.0)) return NAN;
    while (x < 10.0) { /* at most 10 steps */
        acc -= 1.0 / x;
        x += 1.0;
    }
    {
        const double r = 1.0 / (x * x);
        const double s = r * (1.0 / 12 - r * (1.0 / 120 - r * (1.0 / 252 - r * (1.0 / 240
                        - r * (1.0 / 132 - r * (691.0 / 32760 - r * (1.0 / 12)))))));
        return acc + log(x) - 0.5 / x - s;
    }
}

GHF_HD static inline double ghf_trigamma(double x)
{
    double acc = 0.0;
    if (!(x > 0.0)) return NAN;
    while (x < 10.0) {
        acc += 1.0 / (x * x);
        x += 1.0;
    }
    {
        const double ix = 1.0 / x, r = ix * ix;
        /* 1/x + 1/(2x^2) + sum B_2k / x^(2k+1) */
        const double s = ix * (1.0 + 0.5 * ix + r * (1.0 / 6 - r * (1.0 / 30 - r * (1.0 / 42
                        - r * (1.0 / 30 - r * (5.0 / 66 - r * (691.0 / 2730 - r * (7.0 / 6))))))));
        return acc + s;
    }
}

/* ---------------------------------------------------------------------------
 * Full evaluation: log Z, E t(Y), Cov t(Y).
 * -------------------------------------------------------------------------*/
typedef struct ghf_gig_stats {
    double log_norm;             /* log Z = psi(theta) */
    double log_norm_s;           /* log Z + sqrt(p^2 + ab) (exact where log Z ~ -sqrt(ab)) */
    double e_log, e_inv, e_y;    /* E log Y, E 1/Y, E Y (E 1/Y = +inf for b = 0, p <= 1; E Y = +inf for a = 0, p >= -1) */
    double h11, h12, h13;        /* Var log Y, Cov(log Y, 1/Y), Cov(log Y, Y) */
    double h22, h23, h33;        /* Var 1/Y, Cov(1/Y, Y) = 1 - E[1/Y] E[Y], Var Y */
    int n_nodes;                 /* quadrature nodes used (0: closed form) */
} ghf_gig_stats;

/* sinh(u) - u, accurate for small u. */
GHF_HD static inline double ghf__gig_sinhmx(double u)
{
    if (fabs(u) < 0.75) {
        const double u2 = u * u;
        const double s = 1.0 + u2 / 20.0 * (1.0 + u2 / 42.0 * (1.0 + u2 / 72.0 * (1.0 + u2 / 110.0
                        * (1.0 + u2 / 156.0 * (1.0 + u2 / 210.0 * (1.0 + u2 / 272.0))))));
        return u * u2 / 6.0 * s;
    }
    return sinh(u) - u;
}

/* log(q + sqrt(q^2 + z^2)) without cancellation (z > 0). */
GHF_HD static inline double ghf__gig_lqr(double q, double z, double logz)
{
    const double r = hypot(q, z);
    return q >= 0.0 ? log(q + r) : 2.0 * logz - log(r - q);
}

/* Exponent of the k-tilted integrand, relative to the untilted peak, in the
 * log-safe form used for range finding:  (p+k) u - (A0 e^u + B0 e^-u)/2 + R. */
GHF_HD static inline double ghf__gig_gt(double u, double q, double lA0, double lB0, double R)
{
    return q * u - 0.5 * (exp(lA0 + u) + exp(lB0 - u)) + R;
}
GHF_HD static inline double ghf__gig_gtd(double u, double q, double lA0, double lB0)
{
    return q - 0.5 * (exp(lA0 + u) - exp(lB0 - u));
}

/* Outer end (dir = -1 left, +1 right) of the range where the k-tilted
 * integrand is within e^-L of its peak at uk (value gk).  Safeguarded Newton
 * on the concave exponent; returns a point at or beyond the level crossing. */
GHF_HD static inline double ghf__gig_range_end(double dir, double uk, double gk, double sk, double q,
                                               double lA0, double lB0, double R, double L)
{
    const double target = gk - L;
    double uin = uk, uout = 0.0, gout = 0.0;
    int have_out = 0;
    double s0 = sqrt(2.0 * L) * sk;
    double u;
    if (s0 > 30.0) s0 = 30.0;
    if (s0 < 1e-3) s0 = 1e-3;
    u = uk + dir * s0;
    for (int it = 0; it < 80; it++) {
        const double g = ghf__gig_gt(u, q, lA0, lB0, R);
        double cand;
        if (g > target) {
            uin = u;
        } else { /* outside, or -inf / NaN from overflow */
            uout = u;
            gout = (g == g) ? g : -INFINITY;
            have_out = 1;
            if (dir * (uout - uin) < 0.25 || target - gout < 3.0) break;
        }
        cand = NAN;
        if (g == g && g > -INFINITY) {
            const double d = ghf__gig_gtd(u, q, lA0, lB0);
            cand = u - (g - target) / d;
        }
        if (!have_out) {
            if (!(dir * (cand - u) > 0.0)) cand = u + dir * s0;
            if (dir * (cand - u) > 64.0) cand = u + dir * 64.0;
        } else if (!(dir * (cand - uin) > 0.0 && dir * (uout - cand) > 0.0)) {
            cand = 0.5 * (uin + uout);
        }
        u = cand;
    }
    return have_out ? uout : u;
}

/* kmax = 1: log Z and the means (+ the diagonal moments); kmax = 2: also the
 * covariance (Hessian of psi).  want_cov = 0 leaves h* undefined. */
GHF_HD static inline ghf_gig_stats ghf__gig_eval(double p, double a, double b, int want_cov)
{
    ghf_gig_stats s;
    s.n_nodes = 0;
    if (!(p == p) || !(a >= 0.0) || !(b >= 0.0) || isinf(p) || isinf(a) || isinf(b)
        || (a == 0.0 && !(p < 0.0)) || (b == 0.0 && !(p > 0.0))) {
        s.log_norm = s.log_norm_s = s.e_log = s.e_inv = s.e_y = NAN;
        s.h11 = s.h12 = s.h13 = s.h22 = s.h23 = s.h33 = NAN;
        return s;
    }
    if (b == 0.0 || a == 0.0) {
        /* Gamma(al, rate be) for X = Y (b = 0) or X = 1/Y (a = 0). */
        const int inv = (a == 0.0);
        const double al = inv ? -p : p, be = 0.5 * (inv ? b : a);
        const double lbe = log(be);
        const double el = ghf_digamma(al) - lbe;
        const double ex = al / be;
        const double exi = al > 1.0 ? be / (al - 1.0) : INFINITY;
        const double vl = ghf_trigamma(al);
        const double c_lx = 1.0 / be;                                  /* Cov(log X, X) */
        const double c_lxi = al > 1.0 ? -be / ((al - 1.0) * (al - 1.0)) : NAN; /* Cov(log X, 1/X) */
        const double vx = al / (be * be);
        const double vxi = al > 2.0 ? be * be / ((al - 1.0) * (al - 1.0) * (al - 2.0)) : INFINITY;
        const double c_xxi = al > 1.0 ? -1.0 / (al - 1.0) : NAN;
        s.log_norm = lgamma(al) - al * lbe;
        s.log_norm_s = s.log_norm + fabs(p);
        s.h11 = vl;
        s.h23 = c_xxi;
        if (!inv) {
            s.e_log = el; s.e_inv = exi; s.e_y = ex;
            s.h12 = c_lxi; s.h13 = c_lx; s.h22 = vxi; s.h33 = vx;
        } else {
            s.e_log = -el; s.e_inv = ex; s.e_y = exi;
            s.h12 = -c_lx; s.h13 = -c_lxi; s.h22 = vx; s.h33 = vxi;
        }
        return s;
    }
    {
        const int kmax = want_cov ? 2 : 1;
        const double L = 45.0;
        const double la = log(a), lb = log(b);
        /* z = sqrt(ab) to an ulp or two: an error in z is an error in the
         * distribution integrated (exp(0.5(log a + log b)) costs |log z| ulps) */
        const double zp = sqrt(a) * sqrt(b);
        const double logz = (zp > 1e-300 && zp < 1e300) ? log(zp) : 0.5 * (la + lb);
        const double z = (zp > 1e-300 && zp < 1e300) ? zp : exp(logz);
        const double R = hypot(p, z);
        const double lA0 = ghf__gig_lqr(p, z, logz);   /* log(R + p) */
        const double lB0 = 2.0 * logz - lA0;           /* log(R - p) */
        /* mode of e^{pt - (a e^t + b e^-t)/2}: e^t0 = (R + p)/a = b/(R - p),
         * formed as the log of one ratio (a difference of logs of large
         * numbers would cost |log R| ulps of E log Y) */
        double t0 = p >= 0.0 ? log((R + p) / a) : log(b / (R - p));
        double ulo, uhi, h, w;
        if (!(t0 > -INFINITY && t0 < INFINITY)) t0 = lA0 - la; /* ratio over/underflowed */
        int ilo, ihi, n;
        /* range: left end of the (-kmax)-tilt, right end of the (+kmax)-tilt */
        {
            const double ql = p - kmax, qr = p + kmax;
            const double ukl = ghf__gig_lqr(ql, z, logz) - lA0;
            const double ukr = ghf__gig_lqr(qr, z, logz) - lA0;
            const double gkl = ghf__gig_gt(ukl, ql, lA0, lB0, R);
            const double gkr = ghf__gig_gt(ukr, qr, lA0, lB0, R);
            const double skl = 1.0 / sqrt(hypot(ql, z)), skr = 1.0 / sqrt(hypot(qr, z));
            ulo = ghf__gig_range_end(-1.0, ukl, gkl, skl, ql, lA0, lB0, R, L);
            uhi = ghf__gig_range_end(+1.0, ukr, gkr, skr, qr, lA0, lB0, R, L);
            if (ulo > 0.0) ulo = 0.0;
            if (uhi < 0.0) uhi = 0.0;
        }
        w = 26.0 + sqrt(78.0 * hypot(fabs(p) + kmax, z));
        h = 6.283185307179586 / w;
        ilo = (int)floor(fmax(ulo / h, -1e9));
        ihi = (int)ceil(fmin(uhi / h, 1e9));
        if (ihi - ilo + 1 > GHF_GIG_MAXN) { /* very small z with small |p|: coarser rule */
            h = (uhi - ulo) / (GHF_GIG_MAXN - 3);
            ilo = (int)floor(ulo / h);
            ihi = (int)ceil(uhi / h);
        }
        n = ihi - ilo + 1;
        {
            double S0 = 0, S1 = 0, S2 = 0, S3 = 0;
            double S11 = 0, S12 = 0, S13 = 0, S22 = 0, S23 = 0, S33 = 0;
            const double A0 = exp(lA0), B0 = exp(lB0);
            for (int i = ilo; i <= ihi; i++) {
                const double u = i * h;
                double g, x2, x3, wt;
                if (u > -1.0 && u < 1.0) {
                    /* one expm1: e^{u/2} = 1 + em; e^u - 1 = em (2 + em) */
                    const double em = expm1(0.5 * u);
                    const double sh = x3 = em * (2.0 + em);
                    x2 = -x3 / (1.0 + x3);                  /* e^-u - 1 */
                    {
                        const double s2 = sh / (2.0 * (1.0 + em)); /* sinh(u/2) */
                        const double smx = (u > -0.75 && u < 0.75) ? ghf__gig_sinhmx(u)
                                                                    : 0.5 * (x3 - x2) - u;
                        g = -2.0 * R * s2 * s2 - p * smx;
                    }
                } else if (u > -700.0 && u < 700.0) {
                    const double eu = exp(u), ieu = 1.0 / eu;
                    x3 = eu - 1.0;
                    x2 = ieu - 1.0;
                    g = p * u - 0.5 * (A0 * eu + B0 * ieu) + R;
                } else {
                    const double eu = exp(u);
                    x3 = eu - 1.0;
                    x2 = 1.0 / eu - 1.0;
                    g = ghf__gig_gt(u, p, lA0, lB0, R);
                }
                wt = exp(g);
                S0 += wt;
                S1 += wt * u;
                S2 += wt * x2;
                S3 += wt * x3;
                if (want_cov) {
                    S11 += wt * u * u;
                    S12 += wt * u * x2;
                    S13 += wt * u * x3;
                    S22 += wt * x2 * x2;
                    S23 += wt * x2 * x3;
                    S33 += wt * x3 * x3;
                }
            }
            {
                const double m1 = S1 / S0, m2 = S2 / S0, m3 = S3 / S0;
                s.n_nodes = n;
                s.log_norm_s = p * t0 + log(h * S0);
                s.log_norm = s.log_norm_s - R;
                s.e_log = t0 + m1;
                s.e_inv = exp(log1p(m2) - t0);
                s.e_y = exp(log1p(m3) + t0);
                if (want_cov) {
                    const double Y0 = exp(t0), iY0 = exp(-t0);
                    s.h11 = S11 / S0 - m1 * m1;
                    s.h12 = (S12 / S0 - m1 * m2) * iY0;
                    s.h13 = (S13 / S0 - m1 * m3) * Y0;
                    s.h22 = (S22 / S0 - m2 * m2) * iY0 * iY0;
                    s.h23 = S23 / S0 - m2 * m3;
                    s.h33 = (S33 / S0 - m3 * m3) * Y0 * Y0;
                } else {
                    s.h11 = s.h12 = s.h13 = s.h22 = s.h23 = s.h33 = NAN;
                }
            }
        }
    }
    return s;
}

/* log Z(p,a,b) = psi(theta); a = 0 (p < 0) and b = 0 (p > 0) allowed.
 * NaN outside the domain. */
GHF_HD static inline double ghf_gig_log_norm(double p, double a, double b)
{
    return ghf__gig_eval(p, a, b, 0).log_norm;
}

/* log Z(p,a,b) + sqrt(p^2 + ab), without the cancellation of log Z ~ -sqrt(ab)
 * for large ab. */
GHF_HD static inline double ghf_gig_log_norm_s(double p, double a, double b)
{
    return ghf__gig_eval(p, a, b, 0).log_norm_s;
}

typedef struct ghf_gig_moments {
    double e_log, e_inv, e_y; /* E log Y, E 1/Y, E Y */
} ghf_gig_moments;

/* E log Y, E 1/Y, E Y.  In the limits: b = 0, p > 0 is Gamma(p, rate a/2)
 * (E 1/Y = +inf for p <= 1); a = 0, p < 0 is 1/Gamma(-p, rate b/2)
 * (E Y = +inf for p >= -1).  NaN outside the domain. */
GHF_HD static inline ghf_gig_moments ghf_gig_moments_eval(double p, double a, double b)
{
    const ghf_gig_stats s = ghf__gig_eval(p, a, b, 0);
    ghf_gig_moments m;
    m.e_log = s.e_log;
    m.e_inv = s.e_inv;
    m.e_y = s.e_y;
    return m;
}

/* log Z, the moments and the Hessian of psi = Cov t(Y) (math.md 3.4
 * "[derived]"), in theta order (log y, 1/y, y).  E[Y^2] = h33 + e_y^2,
 * E[Y^-2] = h22 + e_inv^2. */
GHF_HD static inline ghf_gig_stats ghf_gig_stats_eval(double p, double a, double b)
{
    return ghf__gig_eval(p, a, b, 1);
}

#endif /* GHF_GIG_H */
