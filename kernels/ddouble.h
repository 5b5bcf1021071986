/* ddouble.h - minimal double-double arithmetic (value = hi + lo, about 106
 * bits) for host and device.  Used only off the hot path (building a
 * ghf_bessel_plan), where log K must be known to an absolute accuracy well
 * below one ulp of its large terms.  Needs a correctly rounded fma().
 */
#ifndef GHF_DDOUBLE_H
#define GHF_DDOUBLE_H

#include "ghf_defs.h"

typedef struct ghf__dd {
    double hi, lo;
} ghf__dd;

GHF_HD static inline ghf__dd ghf__dd_make(double hi, double lo)
{
    ghf__dd r;
    r.hi = hi;
    r.lo = lo;
    return r;
}

/* exact: a + b = s + e */
GHF_HD static inline ghf__dd ghf__two_sum(double a, double b)
{
    double s = a + b;
    double bb = s - a;
    double e = (a - (s - bb)) + (b - bb);
    return ghf__dd_make(s, e);
}

GHF_HD static inline ghf__dd ghf__quick_two_sum(double a, double b)
{
    double s = a + b;
    return ghf__dd_make(s, b - (s - a));
}

/* exact: a * b = p + e */
GHF_HD static inline ghf__dd ghf__two_prod(double a, double b)
{
    double p = a * b;
    return ghf__dd_make(p, fma(a, b, -p));
}

GHF_HD static inline ghf__dd ghf__dd_add(ghf__dd a, ghf__dd b)
{
    ghf__dd s = ghf__two_sum(a.hi, b.hi);
    ghf__dd t = ghf__two_sum(a.lo, b.lo);
    s.lo += t.hi;
    s = ghf__quick_two_sum(s.hi, s.lo);
    s.lo += t.lo;
    return ghf__quick_two_sum(s.hi, s.lo);
}

GHF_HD static inline ghf__dd ghf__dd_neg(ghf__dd a)
{
    return ghf__dd_make(-a.hi, -a.lo);
}

GHF_HD static inline ghf__dd ghf__dd_mul(ghf__dd a, ghf__dd b)
{
    ghf__dd p = ghf__two_prod(a.hi, b.hi);
    p.lo += a.hi * b.lo + a.lo * b.hi;
    return ghf__quick_two_sum(p.hi, p.lo);
}

GHF_HD static inline ghf__dd ghf__dd_mul_d(ghf__dd a, double b)
{
    ghf__dd p = ghf__two_prod(a.hi, b);
    p.lo += a.lo * b;
    return ghf__quick_two_sum(p.hi, p.lo);
}

GHF_HD static inline ghf__dd ghf__dd_div(ghf__dd a, ghf__dd b)
{
    double q1 = a.hi / b.hi;
    ghf__dd r = ghf__dd_add(a, ghf__dd_neg(ghf__dd_mul_d(b, q1)));
    double q2 = r.hi / b.hi;
    r = ghf__dd_add(r, ghf__dd_neg(ghf__dd_mul_d(b, q2)));
    double q3 = r.hi / b.hi;
    ghf__dd q = ghf__quick_two_sum(q1, q2);
    return ghf__dd_add(q, ghf__dd_make(q3, 0.0));
}

GHF_HD static inline ghf__dd ghf__dd_sqrt(ghf__dd a)
{
    if (!(a.hi > 0.0)) return ghf__dd_make(sqrt(a.hi), 0.0);
    double x = sqrt(a.hi);
    /* one Newton step: x + (a - x^2) / (2x) */
    ghf__dd x2 = ghf__two_prod(x, x);
    ghf__dd r = ghf__dd_add(a, ghf__dd_neg(x2));
    return ghf__quick_two_sum(x, r.hi / (2.0 * x));
}

#define GHF__DD_LN2_HI 6.93147180559945286227e-01
#define GHF__DD_LN2_LO 2.31904681384629955842e-17

/* exp of a double-double, |a| < 700 */
GHF_HD static inline ghf__dd ghf__dd_exp(ghf__dd a)
{
    double k = floor(a.hi / GHF__DD_LN2_HI + 0.5);
    ghf__dd r = ghf__dd_add(a, ghf__dd_neg(ghf__dd_mul_d(ghf__dd_make(GHF__DD_LN2_HI, GHF__DD_LN2_LO), k)));
    r.hi *= 1.0 / 512.0;
    r.lo *= 1.0 / 512.0;
    /* s = exp(r) - 1 by Taylor, |r| < 7e-4 */
    ghf__dd s = r, term = r;
    for (int i = 2; i <= 10; i++) {
        term = ghf__dd_mul(term, r);
        term.hi /= (double)i; /* rounding of 1/i enters at ~1e-16 of a term < 1e-6 */
        term.lo /= (double)i;
        s = ghf__dd_add(s, term);
    }
    /* (1 + s)^2 - 1 = s (s + 2), nine times */
    for (int i = 0; i < 9; i++)
        s = ghf__dd_mul(s, ghf__dd_add(s, ghf__dd_make(2.0, 0.0)));
    s = ghf__dd_add(s, ghf__dd_make(1.0, 0.0));
    return ghf__dd_make(ldexp(s.hi, (int)k), ldexp(s.lo, (int)k));
}

/* log of a positive double-double: one Newton step on exp */
GHF_HD static inline ghf__dd ghf__dd_log(ghf__dd a)
{
    double x = log(a.hi);
    ghf__dd e = ghf__dd_exp(ghf__dd_make(-x, 0.0));
    ghf__dd t = ghf__dd_add(ghf__dd_mul(a, e), ghf__dd_make(-1.0, 0.0));
    return ghf__dd_add(ghf__dd_make(x, 0.0), t);
}

#endif /* GHF_DDOUBLE_H */
