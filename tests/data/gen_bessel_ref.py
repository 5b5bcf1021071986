#!/usr/bin/env python3
"""Generate random reference points for ghfit's Bessel K tests.

Writes tests/data/bessel_ref_random.csv: log K_v(z), d/dv log K_v(z),
log(K_{v+1}/K_v) and log(K_{v-1}/K_v) at random (v, z), each stored as a
double-double (hi = nearest double, lo = nearest double to the rest).

Method (independent of ghfit's code and of mpmath.besselk, which is wrong
near the turning point at large orders): the integral representation
    2 K_v(z) = integral over R of exp(-z cosh t + v t) dt,
summed by the trapezoidal rule at 50 significant digits, centred at the
saddle t* = asinh(v/z), step 0.12 min(1/2, (z^2+v^2)^(-1/4)), nodes until
the integrand falls below e^-100 of the peak.  The order derivative is the
mean of t under the same integrand; the log ratios are differences of log K
at v+1, v, v-1 (taken exactly, not rounded to double).  Each integral is
done at two step sizes (h and 0.7 h); their largest relative disagreement
(log K and d/dv log K at v, v+1, v-1) is stored as `xcheck`.  In the
committed file it is below 1e-35 except where an order v+-1 is 0 and its
(unused) derivative is 0 up to rounding (xcheck up to 1e-19 there).

Usage: python3 gen_bessel_ref.py [npoints] [seed] > bessel_ref_random.csv
(the committed file: npoints = 2500, seed = 20240611)
(needs mpmath; pip install mpmath).
"""
import random
import sys

import mpmath as mp

mp.mp.dps = 50
CUT = mp.mpf(100)


def trap(v, z, h):
    """Return (log integral, mean of t) for exp(-z cosh t + v t)."""
    v = mp.mpf(v)
    z = mp.mpf(z)
    ts = mp.asinh(v / z)
    f0 = -z * mp.cosh(ts) + v * ts
    s0 = mp.mpf(0)
    s1 = mp.mpf(0)
    for direction in (1, -1):
        i = 0 if direction == 1 else 1
        while True:
            t = ts + direction * i * h
            g = -z * mp.cosh(t) + v * t - f0
            if g < -CUT:
                break
            e = mp.exp(g)
            s0 += e
            s1 += (t - ts) * e
            i += 1
    return f0 + mp.log(h * s0), ts + s1 / s0


def step(v, z):
    r = mp.sqrt(mp.mpf(z) ** 2 + mp.mpf(v) ** 2)
    w = 1 / mp.sqrt(r)
    return mp.mpf('0.12') * min(mp.mpf('0.5'), w)


def logk_and_d(v, z):
    h = step(v, z)
    a, da = trap(v, z, h)
    b, db = trap(v, z, h * mp.mpf('0.7'))
    xc = max(abs(a - b) / max(1, abs(a)), abs(da - db) / max(mp.mpf('1e-30'), abs(da)))
    return b - mp.log(2), db, xc


def dd(x):
    hi = float(x)
    lo = float(x - mp.mpf(hi))
    return hi, lo


def pick_v(rng):
    u = rng.random()
    if u < 0.30:
        return rng.uniform(-1000.5, 1000.5)
    if u < 0.45:
        return rng.uniform(-12.0, 12.0)
    if u < 0.60:  # near-integer
        n = rng.choice([rng.randint(-12, 12), rng.randint(-1000, 1000)])
        return n + rng.choice([1, -1]) * 10.0 ** rng.uniform(-12, -2) * rng.choice([0, 1])
    if u < 0.75:  # near half-integer
        n = rng.choice([rng.randint(-12, 12), rng.randint(-1000, 1000)])
        return n + 0.5 + rng.choice([1, -1]) * 10.0 ** rng.uniform(-12, -2) * rng.choice([0, 1])
    if u < 0.85:  # tiny
        return rng.choice([1, -1]) * 10.0 ** rng.uniform(-12, -1)
    # GH-style orders p - d/2
    return rng.uniform(-10, 10) - rng.randint(1, 1000) / 2.0


def pick_z(rng, v):
    if rng.random() < 0.2 and abs(v) > 2:
        z = abs(v) * rng.uniform(0.4, 2.5)  # turning-point region
    else:
        z = 10.0 ** rng.uniform(-12, 5)
    return min(max(z, 1e-12), 1e5)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 20240611
    rng = random.Random(seed)
    out = sys.stdout
    out.write("v,z,logk_hi,logk_lo,dlogk_hi,dlogk_lo,logratio_up_hi,logratio_up_lo,"
              "logratio_dn_hi,logratio_dn_lo,xcheck\n")
    for _ in range(n):
        v = float(rng.choice([1, 1]) * pick_v(rng))
        z = float(pick_z(rng, v))
        L, D, x1 = logk_and_d(v, z)
        # v +- 1 exactly (in double, v - 1 may round: 5e-14 at |v| ~ 512)
        Lu, _, x2 = logk_and_d(mp.mpf(v) + 1, z)
        Ld, _, x3 = logk_and_d(mp.mpf(v) - 1, z)
        vals = dd(L) + dd(D) + dd(Lu - L) + dd(Ld - L)
        out.write("%r,%r,%s,%.2g\n" % (v, z, ",".join(repr(x) for x in vals), float(max(x1, x2, x3))))
        out.flush()


if __name__ == "__main__":
    main()
