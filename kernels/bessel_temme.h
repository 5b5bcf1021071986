/* bessel_temme.h - K_v(z) for small and moderate orders (v < 20): a base
 * at mu = v - N in [-1/2, 1/2] giving K_mu, K_{mu+1}, K_{mu-1} and their order
 * derivatives, then forward recurrence in the order up to v carried with
 * forward-mode derivatives (dual numbers).
 *
 * Base: Temme's series for z <= 2 (N. M. Temme, J. Comput. Phys. 19 (1975)
 * 324-337; the shape of Numerical Recipes' bessik and GSL's bessel_Knu.c),
 * differentiated term by term in mu; for 2 < z < 30 a trapezoidal rule on
 * the half-line integral (all weights positive, one exp per node); for
 * z >= 30 Hankel's expansion.
 * The derivatives of Temme's p_k + q_k and p_k - q_k (even and odd in mu)
 * have their own recurrences, so the order derivative keeps its relative
 * accuracy as v -> 0 (d/dv log K is odd in v and tiny there).
 */
#ifndef GHF_BESSEL_TEMME_H
#define GHF_BESSEL_TEMME_H

#include "ghf_defs.h"
#include "bessel_coef.h"

#define GHF__SQRT_PI_2 1.2533141373155002512078826424055 /* sqrt(pi/2) */
#define GHF__PI 3.1415926535897932384626433832795

typedef struct ghf__kbase {
    double k;  /* K_mu(x) e^sc (a normal number for every x > 0) */
    double sc; /* the scale: 0 (Temme) or x; log K_mu = log(k) - sc */
    double r1; /* K_{mu+1}/K_mu */
    double rm; /* K_{mu-1}/K_mu = K_{1-mu}/K_mu */
    double d0; /* (d/dmu K_mu)/K_mu */
    double d1; /* (d/dmu K_{mu+1})/K_mu */
} ghf__kbase;

/* Temme's series, |mu| <= 1/2, 0 < x <= 2. */
GHF_HD static inline ghf__kbase ghf__temme(double mu, double x)
{
    ghf__kbase r;
    double ell = -log(0.5 * x); /* log(2/x) */
    double pimu = GHF__PI * mu;
    /* fact = pi mu / sin(pi mu), dfact = d/dmu fact */
    double fact, dfact;
    if (fabs(pimu) < 0.1) {
        double y = pimu * pimu;
        /* x/sin x = 1 + x^2/6 + 7x^4/360 + 31x^6/15120 + 127x^8/604800 + 73x^10/3421440 ... */
        fact = 1.0 + y * (1.0 / 6.0 + y * (7.0 / 360.0 + y * (31.0 / 15120.0 + y * (127.0 / 604800.0
               + y * (73.0 / 3421440.0 + y * (1414477.0 / 653837184000.0))))));
        dfact = GHF__PI * pimu * (2.0 / 6.0 + y * (28.0 / 360.0 + y * (186.0 / 15120.0 + y * (1016.0 / 604800.0
               + y * (730.0 / 3421440.0 + y * (12.0 * 1414477.0 / 653837184000.0))))));
    } else {
        double s = sin(pimu), c = cos(pimu);
        fact = pimu / s;
        dfact = GHF__PI * (s - pimu * c) / (s * s);
    }
    double e = mu * ell;
    /* fact2 = sinh(e)/e, dfact2 = d/de fact2 */
    double fact2, dfact2, ee = exp(e), ce, se;
    if (fabs(e) < 0.5) {
        double y = e * e;
        /* sinh(e)/e = sum e^2k/(2k+1)!, by Estrin in y = e^2 (no divisions:
         * this sits on the critical path between log and the series) */
        double y2 = y * y, y4 = y2 * y2;
        fact2 = (1.0 + y * (1.0 / 6.0)) + y2 * ((1.0 / 120.0 + y * (1.0 / 5040.0))
                + y2 * (1.0 / 362880.0 + y * (1.0 / 39916800.0)))
                + y4 * y2 * (1.0 / 6227020800.0 + y * (1.0 / 1307674368000.0));
        /* d/de = e/3 + e^3/30 + e^5/840 + e^7/45360 + e^9/3991680 + e^11/518918400 */
        dfact2 = e * ((1.0 / 3.0 + y * (1.0 / 30.0)) + y2 * ((1.0 / 840.0 + y * (1.0 / 45360.0))
                 + y2 * (1.0 / 3991680.0 + y * (1.0 / 518918400.0)))
                 + y4 * y2 * (1.0 / 93405312000.0));
        se = e * fact2;
        ce = 0.5 * (ee + 1.0 / ee);
    } else {
        ce = 0.5 * (ee + 1.0 / ee);
        se = 0.5 * (ee - 1.0 / ee); /* |e| >= 1/2: no harmful cancellation */
        fact2 = se / e;
        dfact2 = (e * ce - se) / (e * e);
    }
    double ge, dge, go, dgo;
    ghf__rgamma1p_parts(mu, &ge, &dge, &go, &dgo);
    double gam1 = -go, dgam1 = -dgo;   /* (1/G(1-mu) - 1/G(1+mu)) / (2 mu) */
    double gam2 = ge, dgam2 = dge;     /* (1/G(1-mu) + 1/G(1+mu)) / 2 */
    double gampl = ge + mu * go, dgampl = dge + go + mu * dgo; /* 1/G(1+mu) */
    double gammi = ge - mu * go, dgammi = dge - go - mu * dgo; /* 1/G(1-mu) */
    double inner = gam1 * ce + gam2 * fact2 * ell;
    double dinner = dgam1 * ce + gam1 * ell * se + ell * (dgam2 * fact2 + gam2 * ell * dfact2);
    double ff = fact * inner;
    double dff = dfact * inner + fact * dinner;
    /* p_0 = P/2 and q_0 = Q/2 with P = e^e Gamma(1+mu), Q = e^-e Gamma(1-mu)
     * (e = mu log(2/x)).  p, q and their mu-derivatives dp, dq are carried
     * directly (values and d/dmu K_{mu+1}), and besides them D = p - q (odd,
     * O(mu)) and the derivatives of p + q and p - q by their own recurrences:
     * dp + dq cancels near mu = 0, and d/dmu K_mu = sum c_k f_k' needs it to
     * full relative precision (d/dv log K is odd in v and tiny there). */
    double gg = gampl * gammi;
    double p = 0.5 * ee / gampl, q = 0.5 / (ee * gammi);
    double dp = p * (ell - dgampl / gampl), dq = q * (-ell - dgammi / gammi);
    double PmQ = 2.0 * se / gampl - 2.0 * mu * go / (ee * gg);
    /* alpha = log(2/x) + psi(1+mu), beta = log(2/x) + psi(1-mu) */
    double apb = 2.0 * ell - dgampl / gampl + dgammi / gammi;
    double amb = -2.0 * (dge * ge - mu * go * (go + mu * dgo)) / gg;
    double dm = 0.5 * PmQ;                               /* p - q */
    double dsp = 0.5 * (dm * apb + (p + q) * amb);       /* d(p + q) */
    double ddm = 0.5 * ((p + q) * apb + dm * amb);       /* d(p - q) */
    double c = 1.0, d = 0.25 * x * x;
    double sum = ff, dsum = dff;
    double sum1 = p, dsum1 = dp;
    double sum2 = q;
    /* A fixed number of terms for x: the smallest count at which every term
     * of the three sums has fallen below 1e-17 of its sum for all |mu| <= 1/2
     * (measured on a fine grid; the thresholds carry a 2% margin).  The exit
     * then depends on x alone, not on the long floating-point chain of the
     * loop, so the branch resolves early. */
    int nit = 2 + (x > 3.84e-6) + (x > 1.018e-3) + (x > 1.24e-2) + (x > 5.26e-2) + (x > 0.1358)
              + (x > 0.2699) + (x > 0.4526) + (x > 0.6776) + (x > 0.9452) + (x > 1.2458) + (x > 1.585)
              + (x > 1.9325);
    for (int i = 1; i <= nit; i++) {
        double fi = (double)i;
        double im = fi - mu, ip = fi + mu;
        double inv = 1.0 / (im * ip);
        double sp = p + q;
        double ffn = (fi * ff + sp) * inv;
        dff = (fi * dff + dsp + 2.0 * mu * ffn) * inv;
        ff = ffn;
        c *= d / fi;
        double pn = p * ip * inv;         /* p/(i-mu) */
        dp = (dp + pn) * ip * inv;
        p = pn;
        double qn = q * im * inv;         /* q/(i+mu) */
        dq = (dq - qn) * im * inv;
        q = qn;
        double dmn = (fi * dm + mu * sp) * inv;
        double spn = p + q;
        double dspn = (fi * dsp + mu * ddm + fi * dmn + mu * spn) * inv;
        ddm = (fi * ddm + mu * dsp + fi * spn + mu * dmn) * inv;
        dsp = dspn;
        dm = dmn;
        double del = c * ff;
        double del1 = c * (p - fi * ff);
        double del2 = c * (q - fi * ff);
        sum += del;
        dsum += c * dff;
        sum1 += del1;
        dsum1 += c * (dp - fi * dff);
        sum2 += del2;
    }
    double isum = 1.0 / sum, xis = 2.0 / x * isum;
    r.k = sum;
    r.sc = 0.0;
    r.r1 = xis * sum1;
    r.rm = xis * sum2;
    r.d0 = dsum * isum;
    r.d1 = xis * dsum1;
    return r;
}

/* x > 2: trapezoidal rule on the half line for
 *   K_nu(x) = int_0^inf exp(-x cosh t) cosh(nu t) dt,
 *   d/dnu K_nu(x) = int_0^inf t sinh(nu t) exp(-x cosh t) dt,
 * at nu = m, 1+m, 1-m (m = |mu| <= 1/2) from the same nodes t_i = i h.
 * All weights are positive; cosh/sinh of i h and i m h come from the
 * addition formulas (no cancellation), so each node costs one exp.  The
 * step keeps the discretisation error below e^-41 (strip-of-analyticity
 * bound exp(x(1 - cos y) - 2 pi y/h)); nodes run until the integrand for
 * nu = 3/2 is below e^-38 of its value at t = 0. */
/* The ratios of a base (ghf__kbase r1, rm, d0, d1) from K and d/dnu K at
 * nu = m and 1 - m (m = |mu|; k0, kq the values up to a common factor, d0, dq
 * the order derivatives with the same factor), by the recurrence
 *   K_{1+m} = K_{1-m} + (2m/x) K_m,
 *   D(1+m) = -D(1-m) + (2/x) K_m + (2m/x) D(m), D = d/dnu K_nu;
 * mu < 0 swaps the roles of 1 + mu and 1 - mu (all terms positive). */
GHF_HD static inline void ghf__kbase_ratios(ghf__kbase *r, double mu, double x, double k0, double kq,
                                            double d0, double dq)
{
    const double m = fabs(mu), ik0 = 1.0 / k0, ix2 = 2.0 / x;
    if (mu >= 0.0) {
        r->r1 = (kq + m * ix2 * k0) * ik0;
        r->rm = kq * ik0;
        r->d0 = d0 * ik0;
        r->d1 = (ix2 * (k0 + m * d0) - dq) * ik0;
    } else {
        r->r1 = kq * ik0;
        r->rm = (kq + m * ix2 * k0) * ik0;
        r->d0 = -d0 * ik0;
        r->d1 = dq * ik0;
    }
}

GHF_HD static inline ghf__kbase ghf__trap_mid(double mu, double x)
{
    ghf__kbase r;
    double m = fabs(mu);
    double h = 0.69 / sqrt(x);
    if (h > 0.235) h = 0.235;
    /* sinh and cosh of h/2 and m h from expm1 (two calls instead of six) */
    double e1 = expm1(0.5 * h), e2 = expm1(m * h);
    double sh1 = 0.5 * (e1 + e1 / (1.0 + e1)), ch1 = sh1 + 1.0 / (1.0 + e1);
    double sm1 = 0.5 * (e2 + e2 / (1.0 + e2)), cm1 = sm1 + 1.0 / (1.0 + e2);
    double c1 = 1.0 + 2.0 * sh1 * sh1, s1 = 2.0 * sh1 * ch1;
    /* cosh, sinh of (1-m) h (1-m >= 1/2: no harmful cancellation) */
    double cq1 = c1 * cm1 - s1 * sm1, sq1 = s1 * cm1 - c1 * sm1;
    /* only nu = m and 1-m are summed; nu = 1+m follows from the recurrence
     * K_{1+m} = K_{1-m} + (2m/x) K_m (and its order derivative) below.
     * node 0 (weight 1/2): cosh = 1, sinh = 0 */
    double k0 = 0.5, km = 0.5, d0 = 0.0, dm = 0.0;
    double Cm = 1.0, Sm = 0.0, Cq = 1.0, Sq = 0.0, Ch = 1.0, Sh = 0.0;
    for (int i = 1; i <= 200; i++) {
        double t = h * (double)i;
        double Cmn = Cm * cm1 + Sm * sm1, Smn = Sm * cm1 + Cm * sm1;
        Cm = Cmn; Sm = Smn;
        double Cqn = Cq * cq1 + Sq * sq1, Sqn = Sq * cq1 + Cq * sq1;
        Cq = Cqn; Sq = Sqn;
        double Chn = Ch * ch1 + Sh * sh1, Shn = Sh * ch1 + Ch * sh1;
        Ch = Chn; Sh = Shn;
        double g = 2.0 * x * Sh * Sh; /* x (cosh t - 1) */
        double w = exp(-g), wt = w * t;
        k0 += w * Cm;
        km += w * Cq;
        d0 += wt * Sm;
        dm += wt * Sq;
        if (g > 38.0 + 1.5 * t) break;
    }
    r.k = h * k0;
    r.sc = x;
    ghf__kbase_ratios(&r, mu, x, k0, km, d0, dm);
    return r;
}

/* x >= GHF__HANKEL_ZMIN: Hankel's expansion (DLMF 10.40.2)
 *   K_nu(x) = sqrt(pi/(2x)) e^-x sum_k a_k(nu) / x^k,
 *   a_k / a_{k-1} = (4 nu^2 - (2k-1)^2) / (8k),
 * at nu = m, 1+m, 1-m (m = |mu| <= 1/2) with d/dnu carried alongside (the
 * factor 8 nu keeps d/dnu K_m exactly odd in m).  At x >= 30 the terms fall
 * below 1e-17 well before their minimum near k = 2x. */
#define GHF__HANKEL_ZMIN 30.0
GHF_HD static inline ghf__kbase ghf__hankel_mid(double mu, double x)
{
    ghf__kbase r;
    double m = fabs(mu);
    double n0 = 4.0 * m * m, nq = 4.0 * (1.0 - m) * (1.0 - m);
    double i8x = 0.125 / x;
    double t0 = 1.0, tq = 1.0, dt0 = 0.0, dtq = 0.0;
    double s0 = 1.0, sq = 1.0, ds0 = 0.0, dsq = 0.0;
    /* A term count fixed by x: the smallest at which every term (values and
     * order derivatives, nu = m and 1-m, all m in [0, 1/2]) is below 1e-17 of
     * its sum (measured on a fine grid; thresholds with a 2% margin).  The
     * loop exit then does not wait on the floating-point chain. */
    int nt = 3 + (x < 2.65e8) + (x < 4.82e5) + (x < 21990.0) + (x < 3600.0) + (x < 1110.0) + (x < 489.5)
             + (x < 269.3) + (x < 171.5) + (x < 120.7) + (x < 91.35) + (x < 73.0) + (x < 60.7) + (x < 52.15)
             + (x < 45.9) + (x < 41.2) + (x < 37.6) + (x < 34.8) + (x < 32.55) + (x < 30.7);
    for (int k = 1; k <= nt; k++) {
        double ik = i8x / (double)k;
        double o = (double)(2 * k - 1);
        o *= o;
        double r0 = (n0 - o) * ik, rq = (nq - o) * ik;
        /* d r / d nu = 8 nu ik */
        dt0 = dt0 * r0 + t0 * (8.0 * m) * ik;
        dtq = dtq * rq + tq * (8.0 * (1.0 - m)) * ik;
        t0 *= r0;
        tq *= rq;
        s0 += t0; sq += tq;
        ds0 += dt0; dsq += dtq;
    }
    r.k = sqrt(GHF__PI / (2.0 * x)) * s0;
    r.sc = x;
    ghf__kbase_ratios(&r, mu, x, s0, sq, ds0, dsq); /* nu = 1 + m by the recurrence */
    return r;
}

typedef struct ghf__small_result {
    double logk_s, lr_up, lr_dn, dlogk; /* logk_s = log K_v(z) + z */
    double logk;                        /* log K_v(z) itself, formed directly */
} ghf__small_result;

/* a >= 0 (small or moderate), z > 0. */
GHF_HD static inline ghf__small_result ghf__small_eval(double a, double z)
{
    ghf__small_result o;
    int N = (int)(a + 0.5);
    double mu = a - (double)N;
    ghf__kbase b = (z <= 2.0) ? ghf__temme(mu, z)
                   : (z < GHF__HANKEL_ZMIN) ? ghf__trap_mid(mu, z) : ghf__hankel_mid(mu, z);
    /* log K + z = log(k) + (z - sc): sc is 0 (then z <= 2) or z (exactly) */
    const double zsc = z - b.sc;
    if (N == 0) {
        const double lk = log(b.k);
        o.logk_s = lk + zsc;
        o.logk = lk - b.sc;
        o.lr_up = log(b.r1);
        o.lr_dn = log(b.rm);
        o.dlogk = b.d0;
        return o;
    }
    double xi2 = 2.0 / z;
    if (z >= 1e-150) {
        /* scaled by 1/K_mu; rescaled by 1e-100 when large */
        double A = 1.0, B = b.r1, dA = b.d0, dB = b.d1;
        int cnt = 0;
        if (B > 1e100) { A *= 1e-100; B *= 1e-100; dA *= 1e-100; dB *= 1e-100; cnt++; }
        for (int n = 1; n < N; n++) {
            double cn = (mu + (double)n) * xi2;
            double C = cn * B + A;
            double dC = xi2 * B + cn * dB + dA;
            A = B; dA = dB; B = C; dB = dC;
            for (int r = 0; r < 4 && B > 1e100; r++) {
                A *= 1e-100; B *= 1e-100; dA *= 1e-100; dB *= 1e-100; cnt++;
            }
        }
        double rdn = A / B;
        double kv = b.k * B; /* K_v e^sc when in range: its log has an absolute
                                error ~ its relative error, whatever its size */
        if (cnt == 0 && kv > 1e-300 && kv < 1e300) {
            const double lk = log(kv);
            o.logk_s = lk + zsc;
            o.logk = lk - b.sc;
        } else {
            const double lk = log(b.k), lb = log(B), lc = cnt * 230.25850929940456840179914546844; /* log(1e100) */
            o.logk_s = (lk + zsc) + lb + lc;
            o.logk = (lk - b.sc) + lb + lc;
        }
        o.dlogk = dB / B;
        o.lr_dn = log(rdn);
        o.lr_up = log(a * xi2 + rdn); /* K_{v+1}/K_v = 2v/z + K_{v-1}/K_v */
    } else {
        /* extreme z: normalised ratios, log summed */
        double rho = b.r1;              /* K_{n+1}/K_n at n = mu */
        double dl0 = b.d0, dl1 = b.d1 / b.r1; /* K'_n/K_n, K'_{n+1}/K_{n+1} */
        double L = (log(b.k) - b.sc) + log(rho);
        for (int n = 1; n < N; n++) {
            double cn = (mu + (double)n) * xi2;
            double rn = cn + 1.0 / rho;
            double dn = (xi2 + cn * dl1 + dl0 / rho) / rn;
            dl0 = dl1; dl1 = dn; rho = rn;
            L += log(rho);
        }
        o.logk_s = L + z;
        o.logk = L;
        o.dlogk = dl1;
        o.lr_dn = -log(rho);
        double tv = a * xi2;
        o.lr_up = log(tv) + log1p(1.0 / (rho * tv));
    }
    return o;
}

#endif /* GHF_BESSEL_TEMME_H */
