/* bessel_olver.h - Olver's uniform large-order expansion of K_v(z), with the
 * order derivative and both order ratios, for v >= GHF__OLVER_VMIN.
 *
 * With zeta = z/v, R = sqrt(z^2 + v^2), t = v/R, t* = asinh(v/z) (DLMF
 * 10.41.3-4, 10.41.10-11):
 *   log K_v(z)  = (1/2) log(pi/(2R)) + f0 + log S,   f0 = v t* - R = -v eta,
 *   S = sum_k (-1)^k u_k(t)/v^k,  V = sum_k (-1)^k v_k(t)/v^k,
 *   K_{v-1}/K_v = -K_v'/K_v - v/z = z/(R+v) + (R/z)(V - S)/S        (no cancellation),
 *   K_{v+1}/K_v = K_{v-1}/K_v + 2v/z,
 *   d/dv log K  = t* - t^2/(2v) + d/dv log S   (f0 is stationary: df0/dv = t*).
 * Terms are added until |u_k|/v^k < 1e-17.  f0 cancels near zeta = zeta0
 * (the Laplace limit, where log K ~ 0 but v t* ~ 1.2 v); there it is summed
 * from its Taylor series in (z - zeta0 v), which keeps full relative accuracy.
 */
#ifndef GHF_BESSEL_OLVER_H
#define GHF_BESSEL_OLVER_H

#include "ghf_defs.h"
#include "bessel_coef.h"
#include "ddouble.h"

#define GHF__OLVER_VMIN 20.0
#define GHF__PI_2 1.5707963267948966192313216916398 /* pi/2 */

typedef struct ghf__olver_result {
    double logk_s; /* log K_v(z) + z */
    double f0;    /* peak value v t* - R (the steep part of log K) */
    double rest;  /* log K - f0 = log(pi/(2R))/2 + log S (small) */
    double lr_dn; /* log(K_{v-1}/K_v) */
    double lr_up; /* log(K_{v+1}/K_v) */
    double dlogk; /* d/dv log K_v(z) */
} ghf__olver_result;

/* Number of Olver terms so that the first omitted term is below ~1e-17. */
GHF_HD static inline int ghf__olver_kmax(double v)
{
    if (v >= 1333.0) return 4;
    if (v >= 447.0) return 5;
    if (v >= 201.0) return 6;
    if (v >= 117.0) return 7;
    if (v >= 76.0) return 8;
    if (v >= 55.0) return 9;
    if (v >= 42.0) return 10;
    if (v >= 34.5) return 11;
    if (v >= 29.0) return 12;
    if (v >= 25.5) return 13;
    if (v >= 22.5) return 14;
    return 16; /* v >= 20: |u_17| / v^17 < 2e-18 */
}

/* Peak value f0 = v asinh(v/z) - sqrt(z^2+v^2) = -v eta(z/v), v > 0, and
 * *f0s = f0 + z (without the cancellation of -R against z at large z:
 * R - z = v^2 / (R + z)). */
GHF_HD static inline double ghf__olver_f0(double v, double z, double R, double ts, double *f0s)
{
    /* d = z - zeta0 v, exact to rounding of a small quantity */
    double dz = fma(-GHF__OLVER_ZETA0_HI, v, z) - GHF__OLVER_ZETA0_LO * v;
    double del = dz / v;
    if (fabs(del) <= 0.08) {
        const double f0 = -dz * ghf__olver_eta_series(del);
        *f0s = f0 + z;
        return f0;
    }
    *f0s = v * ts - v * (v / (R + z));
    return v * ts - R;
}

/* f0 = v asinh(v/z) - sqrt(z^2+v^2) as a double-double (slow: plan build
 * only).  Outside 1e-150 < z < 1e150 the plain value is returned. */
GHF_HD static inline ghf__dd ghf__olver_f0_dd(double v, double z)
{
    if (!(z > 1e-150 && z < 1e150 && v < 1e150)) {
        double R = hypot(z, v);
        return ghf__dd_make(v * asinh(v / z) - R, 0.0);
    }
    ghf__dd r2 = ghf__dd_add(ghf__two_prod(v, v), ghf__two_prod(z, z));
    ghf__dd R = ghf__dd_sqrt(r2);
    ghf__dd y = ghf__dd_div(ghf__dd_add(R, ghf__dd_make(v, 0.0)), ghf__dd_make(z, 0.0));
    ghf__dd ts = ghf__dd_log(y);
    return ghf__dd_add(ghf__dd_mul_d(ts, v), ghf__dd_neg(R));
}

/* v >= GHF__OLVER_VMIN, z > 0 (any size). */
GHF_HD static inline ghf__olver_result ghf__olver_eval(double v, double z)
{
    ghf__olver_result r;
    double R = hypot(z, v);
    double t = v / R;
    double zr = z / R;          /* sqrt(1 - t^2) */
    double omt2 = zr * zr;      /* 1 - t^2 */
    double ts = asinh(v / z);
    double sp, sk, sq, se;
    ghf__olver_sums(-t / v, t * t, ghf__olver_kmax(v), &sp, &sk, &sq, &se);
    double S = 1.0 + sp;
    double f0s;
    double f0 = ghf__olver_f0(v, z, R, ts, &f0s);
    r.f0 = f0;
    r.rest = 0.5 * log(GHF__PI_2 / R) + log1p(sp);
    r.logk_s = f0s + r.rest;
    /* K_{v-1}/K_v = z/(R+v) - (z/R) se/S */
    double rdn = z / (R + v) - zr * se / S;
    r.lr_dn = log(rdn);
    /* K_{v+1}/K_v = rdn + 2v/z */
    r.lr_up = log(2.0 * v / z + rdn);
    r.dlogk = ts - 0.5 * t * t / v + (sq * omt2 - sk) / (v * S);
    return r;
}

#endif /* GHF_BESSEL_OLVER_H */
