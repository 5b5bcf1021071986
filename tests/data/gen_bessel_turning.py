#!/usr/bin/env python3
"""Generate a dense 50-digit sweep of log K_v(z) over the turning region.

Writes tests/data/bessel_turning.csv for tests/test_bessel.c (the turning
sweep): log K_v(z) at orders |v| from 1 to 1000 and arguments z from 0.5|v|
to 2|v|, half of them within 0.1|v| of the Laplace limit z = zeta0 |v|
(zeta0 = 0.6627...), where log K ~ 0 while z is large: there log K must not
be formed as (log K + z) - z, which loses |z| / max(1, |log K|) ulps
(issue 25 item 1: 4.1e-14 at v = -970, z = 641.37).

Method: the same as gen_bessel_ref.py (independent of ghfit's code and of
mpmath.besselk, which is wrong near the turning point at large orders): the
integral representation 2 K_v(z) = integral over R of exp(-z cosh t + v t) dt
by the trapezoidal rule at 50 significant digits, centred at the saddle
t* = asinh(v/z), step 0.12 min(1/2, (z^2+v^2)^(-1/4)), nodes until the
integrand falls below e^-100 of the peak; done at two step sizes (h and
0.7 h), whose relative disagreement (relative to max(1, |log K|)) is stored
as `xcheck`.  log K is stored as a double-double (hi = nearest double,
lo = nearest double to the rest).

Usage: python3 gen_bessel_turning.py [norders] [seed] > bessel_turning.csv
(the committed file: norders = 400, seed = 20261204; mpmath 1.3.0)
"""
import os
import random
import sys

import mpmath as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_bessel_ref import step, trap  # noqa: E402  (the same quadrature)

mp.mp.dps = 50
ZETA0 = 0.66274341934918158097  # root of eta(zeta0) = 0: the Laplace limit constant


def logk(v, z):
    """log K_v(z) by gen_bessel_ref.py's trapezoid sums at two step sizes,
    and their relative difference (the cross-check)."""
    h = step(v, z)
    a = trap(v, z, h)[0]
    b = trap(v, z, h * mp.mpf('0.7'))[0]
    return b - mp.log(2), abs(a - b) / max(1, abs(b))


def points(norders, rng):
    # the point of the issue, then random orders (integers, half-integers,
    # E-step orders p - d/2 and arbitrary ones, either sign)
    yield -970.0, 641.37
    for k in range(norders):
        u = rng.random()
        if u < 0.25:
            a = float(rng.randint(1, 1000))
        elif u < 0.5:
            a = rng.randint(1, 1999) / 2.0
        else:
            a = 10.0 ** rng.uniform(0.0, 3.0)
        v = a if rng.random() < 0.5 else -a
        for j in range(12):
            if j < 6:
                z = a * (ZETA0 + rng.uniform(-0.1, 0.1))
            else:
                z = a * 10.0 ** rng.uniform(-0.30103, 0.30103)
            yield v, float(z)


def main():
    norders = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 20261204
    rng = random.Random(seed)
    out = sys.stdout
    out.write("v,z,logk_hi,logk_lo,xcheck\n")
    for v, z in points(norders, rng):
        L, xc = logk(v, z)
        hi = float(L)
        lo = float(L - mp.mpf(hi))
        out.write("%r,%r,%r,%r,%.2g\n" % (v, z, hi, lo, float(xc)))
        out.flush()


if __name__ == "__main__":
    main()
