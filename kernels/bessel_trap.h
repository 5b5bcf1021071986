/* bessel_trap.h - reference evaluation of log K_v(z) by the trapezoidal rule.
 *
 * 2 K_v(z) = integral over the real line of exp(-z cosh t + v t) dt.
 * For v >= 0 the integrand peaks at t* = asinh(v/z); with h = t - t*,
 * R = sqrt(z^2 + v^2) = z cosh t*, the exponent relative to the peak is
 *     g(h) = -2 R sinh(h/2)^2 - v (sinh h - h)        (both terms <= 0),
 * and the peak value is f0 = v t* - R.  The integrand is entire and decays
 * double-exponentially, so the trapezoidal rule on the whole line converges
 * geometrically.  The same nodes give d/dv log K = t* + <h> (mean under the
 * integrand).  This is the slow, uniform reference; bessel.h uses it as a
 * fallback only.
 */
#ifndef GHF_BESSEL_TRAP_H
#define GHF_BESSEL_TRAP_H

#include "ghf_defs.h"

/* sinh(h) - h without cancellation. */
GHF_HD static inline double ghf__sinh_minus_x(double h)
{
    double a = fabs(h);
    if (a < 0.75) {
        double h2 = h * h;
        /* h^3/6 (1 + h^2/20 + h^4/840 + h^6/60480 + h^8/6652800 + ...) */
        double s = 1.0 + h2 / 20.0 * (1.0 + h2 / 42.0 * (1.0 + h2 / 72.0 * (1.0 + h2 / 110.0
                  * (1.0 + h2 / 156.0 * (1.0 + h2 / 210.0 * (1.0 + h2 / 272.0))))));
        return h * h2 / 6.0 * s;
    }
    return sinh(h) - h;
}

typedef struct ghf__trap_result {
    double logk; /* log K_v(z) */
    double dlogk; /* d/dv log K_v(z) */
    double lmean_ep; /* log <e^{h}> : log(K_{v+1}/K_v) - t* */
    double lmean_em; /* log <e^{-h}>: log(K_{v-1}/K_v) + t* */
    double tstar;
} ghf__trap_result;

/* v >= 0, z > 0.  Step 0.25 min(0.5, R^-1/2); nodes until the exponent is
 * below -50 on both sides (at most GHF__TRAP_MAXN per side). */
#define GHF__TRAP_MAXN 4000
GHF_HD static inline ghf__trap_result ghf__trap_eval(double v, double z)
{
    ghf__trap_result r;
    double R = hypot(z, v);
    double ts = asinh(v / z);
    double w = 1.0 / sqrt(R);
    double step = 0.25 * (w < 0.5 ? w : 0.5);
    double s0 = 0.0, s1 = 0.0, sp = 0.0, sm = 0.0;
    /* centre node */
    s0 = 1.0; sp = 1.0; sm = 1.0;
    for (int dir = -1; dir <= 1; dir += 2) {
        for (int i = 1; i <= GHF__TRAP_MAXN; i++) {
            double h = dir * i * step;
            double g;
            if (h > -1.0 && h < 1.0) {
                double sh = sinh(0.5 * h);
                g = -2.0 * R * sh * sh - v * ghf__sinh_minus_x(h);
            } else {
                /* far from the peak the two terms above cancel when z << v */
                g = -z * cosh(ts + h) + v * h + R;
            }
            if (g < -50.0) break;
            double e = exp(g);
            s0 += e;
            s1 += h * e;
            if (h > -60.0 && h < 60.0) {
                sp += exp(g + h);
                sm += exp(g - h);
            }
        }
    }
    r.tstar = ts;
    r.logk = -GHF_LN2 + (v * ts - R) + log(step * s0);
    r.dlogk = ts + s1 / s0;
    r.lmean_ep = log(sp / s0);
    r.lmean_em = log(sm / s0);
    return r;
}

#endif /* GHF_BESSEL_TRAP_H */
