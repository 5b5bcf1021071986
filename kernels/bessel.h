/* bessel.h - log K_v(z), its order derivative and order ratios, for host and
 * device (public contract; include with a plain C compiler and -I kernels).
 *
 *   ghf_log_kv(v, z)        log K_v(z), any real v, z > 0
 *   ghf_bessel_logk(v, z, &e)  the same, and the fused evaluation e below
 *                           from the same pass
 *   ghf_dlog_kv_dv(v, z)    d/dv log K_v(z) (computed directly, not by a
 *                           finite difference)
 *   ghf_log_kv_ratio(v, z)  log(K_{v+1}(z) / K_v(z))
 *   ghf_bessel_fused(v, z)  all of them at once (the E-step entry point),
 *                           with log K in exponentially scaled form
 *                           (log K_v(z) + z, exact where log K ~ -z)
 *
 * Which form where: log K itself (ghf_log_kv, ghf_bessel_logk) is formed
 * directly from the expansion's terms (Olver: peak value + rest; small
 * orders: log of K), never as (log K + z) - z, which would lose
 * |z| / max(1, |log K|) ulps where log K ~ 0 at large z (z ~ 0.66 |v|,
 * |v| large).  The scaled log K + z (the E-step's form, and the plans') is
 * formed without cancellation where log K ~ -z (large z), where the E-step
 * adds it to terms of the opposite sign.
 *
 * K is even in v, so for v < 0 the up/down ratios swap and dlogk_dv flips
 * sign.  Every function is GHF_HD static inline: no allocation, no globals,
 * no errno, bounded loops.  z <= 0, NaN or infinite arguments give NaN.
 *
 * Accuracy (z in [1e-12, 1e5], |v| <= ~1000; checked by tests/test_bessel.c
 * against 50-digit references): log K within 1e-14 max(1, |log K|), the log
 * ratios within 1e-13 max(1, |ratio|), d/dv log K within 1e-10 relative
 * (it is odd in v and keeps relative accuracy as v -> 0).  Finite results
 * for z from ~1e-300 to 1e300.
 *
 * Method, with a = |v|:
 *   a >= 20   Olver's uniform expansion (bessel_olver.h), 4-16 terms, with
 *             K_{v-1}/K_v from the expansion of K_v' (no cancellation) and
 *             the peak value summed from a series where log K ~ 0.
 *   a < 20    a base at mu = a - round(a) in [-1/2, 1/2] (Temme's series for
 *             z <= 2, a half-line trapezoid for 2 < z < 30, Hankel for
 *             z >= 30) and forward recurrence to a, all with forward-mode
 *             derivatives in the order (bessel_temme.h).
 *   K_{v+1}/K_v = K_{v-1}/K_v + 2a/z (both terms >= 0).
 * bessel_trap.h keeps the slow uniform saddle-point trapezoid as a
 * reference (ghf__bessel_fused_trap).  For many points of one order, see
 * bessel_plan.h.
 */
#ifndef GHF_BESSEL_H
#define GHF_BESSEL_H

#include "ghf_defs.h"
#include "bessel_trap.h"
#include "bessel_temme.h"
#include "bessel_olver.h"

typedef struct ghf_bessel_eval {
    double logk_s;       /* log K_v(z) + z (log of the scaled K: no cancellation against z) */
    double log_ratio_up; /* log(K_{v+1}(z)/K_v(z)) */
    double log_ratio_dn; /* log(K_{v-1}(z)/K_v(z)) */
    double dlogk_dv;     /* d/dv log K_v(z) */
} ghf_bessel_eval;

/* log(exp(a) + exp(b)) */
GHF_HD static inline double ghf__logaddexp(double a, double b)
{
    double m = a > b ? a : b, n = a > b ? b : a;
    if (n == -INFINITY) return m;
    return m + log1p(exp(n - m));
}

/* a >= 0.  With logk_lo != NULL, log K + z is returned as the double-double
 * logk_s + *logk_lo, accurate to ~1e-16 absolute even where its terms are
 * large (slow; used to build plans).  With logk != NULL, *logk is log K
 * itself, formed from the same terms without adding and removing z (the
 * scaled value minus z would lose |z| / max(1, |log K|) ulps where log K is
 * small and z large: the turning region z ~ 0.66 |v| at large orders). */
GHF_HD static inline ghf_bessel_eval ghf__bessel_fused_pos(double a, double z, double *logk_lo, double *logk)
{
    ghf_bessel_eval out;
    if (logk_lo) *logk_lo = 0.0;
    if (a >= GHF__OLVER_VMIN) {
        ghf__olver_result r = ghf__olver_eval(a, z);
        out.logk_s = r.logk_s;
        if (logk) *logk = r.f0 + r.rest;
        if (logk_lo) {
            ghf__dd l = ghf__dd_add(ghf__dd_add(ghf__olver_f0_dd(a, z), ghf__dd_make(z, 0.0)),
                                    ghf__dd_make(r.rest, 0.0));
            out.logk_s = l.hi;
            *logk_lo = l.lo;
        }
        out.log_ratio_up = r.lr_up;
        out.log_ratio_dn = r.lr_dn;
        out.dlogk_dv = r.dlogk;
    } else {
        ghf__small_result r = ghf__small_eval(a, z);
        out.logk_s = r.logk_s;
        if (logk) *logk = r.logk;
        out.log_ratio_up = r.lr_up;
        out.log_ratio_dn = r.lr_dn;
        out.dlogk_dv = r.dlogk;
    }
    return out;
}

GHF_HD static inline ghf_bessel_eval ghf__bessel_fused_all(double v, double z, double *logk_lo, double *logk)
{
    ghf_bessel_eval out;
    if (!(z > 0.0) || isnan(v) || isinf(z) || isinf(v)) {
        out.logk_s = out.log_ratio_up = out.log_ratio_dn = out.dlogk_dv = NAN;
        if (logk_lo) *logk_lo = 0.0;
        if (logk) *logk = NAN;
        return out;
    }
    out = ghf__bessel_fused_pos(fabs(v), z, logk_lo, logk);
    if (v < 0.0) {
        double t = out.log_ratio_up;
        out.log_ratio_up = out.log_ratio_dn;
        out.log_ratio_dn = t;
        out.dlogk_dv = -out.dlogk_dv;
    }
    return out;
}

GHF_HD static inline ghf_bessel_eval ghf__bessel_fused_ext(double v, double z, double *logk_lo)
{
    return ghf__bessel_fused_all(v, z, logk_lo, (double *)0);
}

GHF_HD static inline ghf_bessel_eval ghf_bessel_fused(double v, double z)
{
    return ghf__bessel_fused_all(v, z, (double *)0, (double *)0);
}

/* Reference (slow) evaluator: the saddle-point trapezoid of bessel_trap.h. */
GHF_HD static inline ghf_bessel_eval ghf__bessel_fused_trap(double v, double z)
{
    ghf_bessel_eval out;
    double a = fabs(v);
    ghf__trap_result T = ghf__trap_eval(a, z);
    double dn, up;
    out.logk_s = T.logk + z;
    if (z >= 1.0 || a >= 2.0) {
        dn = T.lmean_em - T.tstar;
    } else {
        ghf__trap_result T1 = ghf__trap_eval(fabs(a - 1.0), z);
        dn = T1.logk - T.logk;
    }
    up = (a > 0.0) ? ghf__logaddexp(dn, log(2.0 * a / z)) : dn;
    out.log_ratio_up = (v >= 0.0) ? up : dn;
    out.log_ratio_dn = (v >= 0.0) ? dn : up;
    out.dlogk_dv = (v >= 0.0) ? T.dlogk : -T.dlogk;
    return out;
}

/* log K_v(z) itself, to 1e-14 max(1, |log K|), formed directly (not as
 * logk_s - z); with e != NULL, *e is also set to the fused evaluation at the
 * same point, from the same pass (bitwise ghf_bessel_fused(v, z)). */
GHF_HD static inline double ghf_bessel_logk(double v, double z, ghf_bessel_eval *e)
{
    double logk;
    const ghf_bessel_eval r = ghf__bessel_fused_all(v, z, (double *)0, &logk);
    if (e) *e = r;
    return logk;
}

GHF_HD static inline double ghf_log_kv(double v, double z)
{
    return ghf_bessel_logk(v, z, (ghf_bessel_eval *)0);
}

GHF_HD static inline double ghf_dlog_kv_dv(double v, double z)
{
    return ghf_bessel_fused(v, z).dlogk_dv;
}

GHF_HD static inline double ghf_log_kv_ratio(double v, double z)
{
    return ghf_bessel_fused(v, z).log_ratio_up;
}

#endif /* GHF_BESSEL_H */
