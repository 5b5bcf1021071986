#!/usr/bin/env python3
"""Reference values for GIG(p, a, b) (kernels/gig.h, tests/test_gig.c).

GIG(p, a, b) has density proportional to y^(p-1) exp(-(a y + b/y)/2).  With
t = log y the normaliser and all moments are integrals over the real line of

    f(t) = exp(p t - (a e^t + b e^-t)/2)

times 1, t, e^-t, e^t and products of two of them.  This script evaluates
them FROM THAT INTEGRAL REPRESENTATION with mpmath at 40 digits: composite
Gauss-Legendre (48 nodes per piece) on pieces no wider than min(2 sigma, 1)
between the points where every tilted integrand f(t) e^{kt}, |k| <= 2, has
fallen e^-110 below its own peak.  (It does not use mpmath.besselk, which is
unreliable near the turning point at large order.)  Every row is evaluated a
second time with pieces of half the width; the largest relative change over
the whole table is printed, and the script fails if it exceeds 1e-28.

Exact limits a = 0 (p < 0, inverse Gamma) and b = 0 (p > 0, Gamma) use the
closed forms with mpmath's digamma/trigamma.

Columns: p, a, b (exact doubles, repr), log_norm = log Z, e_log = E log Y,
e_inv = E 1/Y, e_y = E Y, and Cov t(Y) with t = (log Y, 1/Y, Y):
h11, h12, h13, h22, h23, h33.  'inf' and 'nan' mark infinite or undefined
moments in the limits.

Usage: python3 tests/data/gen_gig_ref.py > tests/data/gig_ref.csv
(pip install mpmath; about a minute.)
"""
import math
import random
import sys

import mpmath as mp

mp.mp.dps = 40
GL = None


def gl_nodes():
    global GL
    if GL is None:
        g = mp.calculus.quadrature.GaussLegendre(mp.mp)
        GL = g.calc_nodes(5, mp.mp.prec + 20)  # 3 * 2^4 = 48 nodes on [-1, 1]
    return GL


def mode(q, a, b):
    """argmax of q t - (a e^t + b e^-t)/2."""
    r = mp.sqrt(q * q + a * b)
    if q >= 0:
        return mp.log((q + r) / a)
    return mp.log(b / (r - q))


def range_end(q, a, b, direction, L=110):
    G = lambda t: q * t - (a * mp.exp(t) + b * mp.exp(-t)) / 2
    tq = mode(q, a, b)
    top = G(tq) - L
    step = mp.mpf('0.5')
    lo = tq
    hi = tq + direction * step
    while G(hi) > top:
        lo = hi
        step *= 2
        hi = tq + direction * step
    for _ in range(80):
        mid = (lo + hi) / 2
        if G(mid) > top:
            lo = mid
        else:
            hi = mid
    return hi


def integrals(p, a, b, refine=1):
    p, a, b = mp.mpf(p), mp.mpf(a), mp.mpf(b)
    t0 = mode(p, a, b)
    gmax = p * t0 - (a * mp.exp(t0) + b * mp.exp(-t0)) / 2
    tlo = range_end(p - 2, a, b, -1)
    thi = range_end(p + 2, a, b, +1)
    sig = (p * p + a * b) ** mp.mpf(-0.25)
    width = min(2 * sig, mp.mpf(1)) / refine
    n = int(mp.ceil((thi - tlo) / width))
    n = max(n, 8 * refine)
    edges = [tlo + (thi - tlo) * i / n for i in range(n + 1)]
    nodes = gl_nodes()
    # accumulate sums of w * phi for phi in [1, t, e^-t, e^t, t^2, t e^-t, t e^t, e^-2t, e^2t, 1]
    S = [mp.mpf(0)] * 9
    for i in range(n):
        c = (edges[i] + edges[i + 1]) / 2
        hw = (edges[i + 1] - edges[i]) / 2
        for x, w in nodes:
            t = c + hw * x
            et = mp.exp(t)
            eti = 1 / et
            f = w * hw * mp.exp(p * t - (a * et + b * eti) / 2 - gmax)
            S[0] += f
            S[1] += f * t
            S[2] += f * eti
            S[3] += f * et
            S[4] += f * t * t
            S[5] += f * t * eti
            S[6] += f * t * et
            S[7] += f * eti * eti
            S[8] += f * et * et
    Z = S[0]
    m = [s / Z for s in S]
    out = {
        'log_norm': gmax + mp.log(Z),
        'e_log': m[1], 'e_inv': m[2], 'e_y': m[3],
        'h11': m[4] - m[1] ** 2,
        'h12': m[5] - m[1] * m[2],
        'h13': m[6] - m[1] * m[3],
        'h22': m[7] - m[2] ** 2,
        'h23': 1 - m[2] * m[3],
        'h33': m[8] - m[3] ** 2,
    }
    return out


def closed_form(p, a, b):
    """b = 0 (Gamma(p, rate a/2)) or a = 0 (1/Gamma(-p, rate b/2))."""
    inv = (a == 0)
    al = mp.mpf(-p if inv else p)
    be = mp.mpf(b if inv else a) / 2
    inf, nan = mp.inf, mp.nan
    el = mp.digamma(al) - mp.log(be)
    ex = al / be
    exi = be / (al - 1) if al > 1 else inf
    vx = al / be ** 2
    vxi = be ** 2 / ((al - 1) ** 2 * (al - 2)) if al > 2 else inf
    c_lx = 1 / be
    c_lxi = -be / (al - 1) ** 2 if al > 1 else nan
    c_xxi = -1 / (al - 1) if al > 1 else nan
    o = {'log_norm': mp.loggamma(al) - al * mp.log(be), 'h11': mp.psi(1, al), 'h23': c_xxi}
    if not inv:
        o.update(e_log=el, e_inv=exi, e_y=ex, h12=c_lxi, h13=c_lx, h22=vxi, h33=vx)
    else:
        o.update(e_log=-el, e_inv=ex, e_y=exi, h12=-c_lx, h13=-c_lxi, h22=vx, h33=vxi)
    return o


KEYS = ['log_norm', 'e_log', 'e_inv', 'e_y', 'h11', 'h12', 'h13', 'h22', 'h23', 'h33']


def fmt(x):
    if mp.isnan(x):
        return 'nan'
    if mp.isinf(x):
        return 'inf' if x > 0 else '-inf'
    return mp.nstr(x, 22, min_fixed=1, max_fixed=0)


def rows():
    rng = random.Random(20240611)
    ps = [-50, -30, -10, -5, -2.5, -1.5, -1, -0.5, -0.1, 0, 0.1, 0.5, 0.7, 1, 1.5, 2.5, 5, 10, 30, 50]
    zs = [1e-10, 1e-8, 1e-6, 1e-4, 1e-3, 1e-2, 0.1, 0.5, 1, 2, 5, 10, 30, 100, 1e3, 1e4]
    out = []
    # math.md 4.10 and 7 item 5 / 6 points
    for t in [(1, 1, 1), (2, 3, 0.5), (-0.5, 2, 2), (-2, 0.5, 4), (0.5, 0.1, 5), (5, 4, 0.2),
              (-3, 0.3, 3), (0.1, 10, 0.1), (10, 1, 1), (-10, 1, 1), (0.5, 1, 1), (0.7, 1.4, 0.9),
              (0.2, 2, 1e-6), (-0.3, 2, 1e-6), (2, 2, 1e-10), (2, 2, 1e-8), (-2, 1e-10, 2),
              (-2, 1e-8, 2)]:
        out.append(tuple(float(x) for x in t))
    for p in ps:
        for z in zs:
            x = rng.uniform(-math.log(1e4), math.log(1e4))  # log sqrt(b/a)
            a = z * math.exp(-x)
            b = z * math.exp(x)
            # p jittered off the grid so that half-integer / integer orders are not the only ones
            pj = p if rng.random() < 0.5 else p + rng.uniform(-0.05, 0.05)
            out.append((float(pj), a, b))
    for p in [0.3, 1.0, 1.5, 2.5, 7.0, 30.0]:
        for a in [0.5, 3.0]:
            out.append((p, a, 0.0))
            out.append((-p, 0.0, a))
    return out


def main():
    print('# GIG(p,a,b) reference values from the integral representation; '
          'generated by tests/data/gen_gig_ref.py (mpmath %s, 40 digits)' % mp.__version__)
    print('p,a,b,' + ','.join(KEYS))
    worst = mp.mpf(0)
    for (p, a, b) in rows():
        if a == 0 or b == 0:
            v = closed_form(p, a, b)
        else:
            v = integrals(p, a, b)
            v2 = integrals(p, a, b, refine=2)
            for k in KEYS:
                d = abs(v[k] - v2[k]) / (abs(v[k]) + mp.mpf(10) ** -30)
                worst = max(worst, d)
        print('%r,%r,%r,' % (p, a, b) + ','.join(fmt(v[k]) for k in KEYS))
        sys.stdout.flush()
    print('worst relative change under refinement: %s' % mp.nstr(worst, 3), file=sys.stderr)
    if worst > mp.mpf('1e-28'):
        sys.exit('reference not converged')


if __name__ == '__main__':
    main()
