#!/usr/bin/env python3
"""Reference values for the univariate laws of src/law/uni1d.c (tests/test_uni1d.c).

L = m + g Y + s sqrt(Y) Z, Z ~ N(0,1), Y ~ GIG(p, a, b) with density
proportional to y^(p-1) exp(-(a y + b/y)/2) (b = 0: Gamma, a = 0: inverse
Gamma), or Y = 1 (gauss).  For every law of LAWS and every probability of
PROBS this script writes, with mpmath at 40 digits:

  q      the alpha-quantile (VaR_alpha) of L, to 25+ digits;
  x      q rounded to a double (the point where the C test evaluates);
  cdf    P(L <= x) and sf = P(L > x), each computed directly (no 1 - F);
  logpdf log f(x);
  es     ES_alpha = E[L | L >= q] ('inf' where the tail has no mean).

Two independent computations are made of every probability and of ES:
  A. the closed-form density (Bessel K, math.md 1.4 with d = 1, mpmath.besselk;
     Gamma-function forms on the faces a = 0 and b = 0) integrated over x:
     the real line is cut into pieces (refined around the centre, doubling
     outwards until the tail's mass and first moment are below 1e-50 (the
     density is evaluated with extra digits for the cancellation of its
     exponent in the far tails), and for vg shrinking to the
     spike at m, where a piece ending at m is integrated in log|x - m|), each
     piece by mpmath's Gauss-Legendre rule (tanh-sinh on the two infinite
     ones), halved until its error estimate is below 10^(4 - digits); the
     masses and first moments of the pieces, cumulated from either end, give
     P(L <= x), P(L > x) and E[(L - q)^+] with no 1 - F;
  B. the normal mixture: conditional on Y = y, L is normal, so
     P(L > x) = int Phic((x - m - g y)/(s sqrt y)) f_Y(y) dy and
     E[(L - q)^+] = int s sqrt(y) psi(z_y) f_Y(y) dy, integrated over t = log y
     with tanh-sinh on a partition around the mode of f_Y and the transition
     of Phic (z_y = 0, +-3, +-6).
The quantile is found by Newton's method inside a bracket on A (first at 20
digits to place the pieces, then at 40 digits on pieces that end at it).
The script stops if A and B differ by more than 1e-22 relative anywhere, or
if A's total mass differs from 1 by more than that (the largest difference is
printed in the header of the CSV).  The values written are those of A (the
density path, unrelated to the C code's method).

Output columns (one CSV, two record kinds):
  L,id,family,p,a,b,m,g,s                       one line per law
  P,id,alpha,q,x,cdf,sf,logpdf,es               one line per (law, alpha)

Usage: python3 tests/data/gen_uni1d_ref.py [-j N [ids]] > tests/data/uni1d_ref.csv
(needs mpmath from PyPI; about half an hour of CPU: give -j N to use N
processes, and a comma-separated list of law ids after it for a subset.)
"""
import math
import sys
import time
from multiprocessing import Pool

import mpmath as mp

DPS = 40
AGREE = mp.mpf('1e-22')

# id, family, p, a, b, m, g, s
LAWS = [
    ('gauss', 'gauss', 0, 0, 0, 0.3, 0.2, 1.5),
    ('gh_p5_skew', 'gh', 5, 2, 0.5, 0.1, 0.8, 0.6),
    ('gh_pm8_skew', 'gh', -8, 1, 20, -0.2, -1.5, 0.7),
    ('hyp_p1', 'hyp', 1, 3, 1, 0.0, 0.5, 1.0),
    ('gh_near_gauss', 'gh', 1, 400, 400, 0.1, 0.3, 1.0),
    ('gh_wide', 'gh', 0.5, 1e-4, 100, 0.5, 0.01, 0.3),
    ('nig_sym', 'nig', -0.5, 4, 1, 0.0, 0.0, 1.0),
    ('nig_gam_pos', 'nig', -0.5, 1, 1, 0.05, 20.0, 1.0),
    ('nig_gam_neg', 'nig', -0.5, 1, 1, 0.0, -20.0, 1.0),
    ('nig_small_y', 'nig', -0.5, 100, 0.01, 1.0, 3.0, 2.0),
    ('vg_p03', 'vg', 0.3, 2, 0, 0.02, 0.5, 1.0),
    ('vg_p005', 'vg', 0.05, 2, 0, 0.02, -0.3, 1.0),
    ('vg_p2', 'vg', 2, 1, 0, 0.0, -1.0, 0.5),
    ('t3_sym', 't', -1.5, 0, 3, 0.3, 0.0, 1.2),
    ('t3_skew', 't', -1.5, 0, 3, 0.0, 0.5, 1.0),
    ('t5_skewneg', 't', -2.5, 0, 5, 0.1, -1.0, 1.0),
    ('t1_cauchy', 't', -0.5, 0, 1, 0.0, 0.0, 1.0),
    ('t15_skewpos', 't', -0.75, 0, 1.5, 0.0, 0.3, 1.0),
    ('t15_skewneg', 't', -0.75, 0, 1.5, 0.0, -0.3, 1.0),
]

PROBS = ['1e-4', '1e-3', '0.01', '0.05', '0.25', '0.5', '0.75', '0.9', '0.95', '0.975',
         '0.99', '0.999', '0.9999']


def clampz(z):
    """Phic(1e4) = e^-5e7: beyond, the integrands are 0 at any precision used."""
    return max(min(z, mp.mpf(10000)), mp.mpf(-10000)) if z == z else z


class Law:
    def __init__(self, row):
        (self.id, self.family, p, a, b, m, g, s) = row
        self.row = row
        self.gauss = self.family == 'gauss'
        # the doubles the C test uses, exactly
        self.p, self.a, self.b = mp.mpf(float(p)), mp.mpf(float(a)), mp.mpf(float(b))
        self.m, self.g, self.s = mp.mpf(float(m)), mp.mpf(float(g)), mp.mpf(float(s))
        self.beta = self.g / self.s
        if not self.gauss:
            self.lnz = self.log_z(self.p, self.a, self.b)
            # mode of the density of t = log y: e^t0 = (p + sqrt(p^2 + ab)) / a
            r = mp.sqrt(self.p ** 2 + self.a * self.b)
            self.t0 = mp.log((self.p + r) / self.a) if self.p >= 0 else mp.log(self.b / (r - self.p))
            self.tw = 1 / mp.sqrt(max(r, mp.mpf('1e-3')))  # width of the t density near t0
            self.y0 = mp.exp(self.t0)
        else:
            self.y0 = mp.mpf(1)
        self.centre = self.m + self.g * self.y0
        self.scale = self.s * mp.sqrt(self.y0) + abs(self.g) * self.y0 * (self.tw if not self.gauss else 0)

    @staticmethod
    def log_z(p, a, b):
        """log int_0^inf y^(p-1) exp(-(a y + b/y)/2) dy (faces in closed form)."""
        if b == 0:
            return mp.loggamma(p) - p * mp.log(a / 2)
        if a == 0:
            return mp.loggamma(-p) + p * mp.log(b / 2)
        return mp.log(2) + p / 2 * mp.log(b / a) + mp.log(mp.besselk(p, mp.sqrt(a * b)))

    # -- A: the closed-form density ---------------------------------------
    # Everything below works with d = x - m (exact for the doubles used), so
    # that the spike of vg at d = 0 is resolved to any depth.
    def pdf(self, d):
        u = d / self.s
        if self.gauss:
            return mp.npdf(u - self.beta) / self.s
        # u beta and log K_P(sqrt(A B)) ~ -sqrt(A B) cancel in the far tails:
        # extra digits for the size of the terms
        extra = 10 + int(mp.log10(1 + abs(u * self.beta) + abs(u) * mp.sqrt(self.a + self.beta ** 2)))
        with mp.extradps(extra):
            P, A, B = self.p - mp.mpf(1) / 2, self.a + self.beta ** 2, self.b + u * u
            if B == 0 and P <= 0:
                return mp.mpf(0)  # d = 0, the integrable spike of vg (a node rounded onto it)
            lz = self.log_z(P, A, B)
            v = mp.exp(u * self.beta - mp.log(2 * mp.pi) / 2 + lz - self.lnz) / self.s
        return +v

    def pdf_c(self, d):
        """pdf with a cache: the cdf and the first moment reuse the nodes."""
        v = self.cache.get(d)
        if v is None:
            v = self.pdf(d)
            self.cache[d] = v
        return v

    def integ(self, g, a, b):
        """int_a^b g(d) dd; a piece ending at the vg spike d = 0 is integrated
        in tau = log|d| (the density ~ |d|^(2p-1) carries mass at every scale)."""
        if self.family == 'vg' and (a == 0 or b == 0) and a != b:
            sg = 1 if a == 0 else -1
            top = mp.log(abs(b if a == 0 else a))
            tp = [-mp.inf] + [top - 2 ** k for k in range(12, -1, -1)] + [top]
            return mp.quad(lambda t: g(sg * mp.exp(t)) * mp.exp(t), tp, maxdegree=10)
        return adaptive(g, a, b)

    def build_a(self, extra):
        """Partition of the real line (refined near the centre, the spike at m
        for vg, and the points extra) with the mass M0 and first moment about
        the centre M1 of every piece, and the cumulated masses from both ends."""
        self.cache = {}
        c, w = self.centre - self.m, self.scale
        f0 = self.pdf(c)
        pts = set(extra)
        for k in range(-8, 9):
            pts.add(c + w * k)
        # out to where the tail beyond holds < 1e-50 of the mass (and of the
        # first moment, which the mean excess needs)
        pw = 1 if self.es_infinite() else 2
        for sg in (1, -1):
            for k in range(2, 1000):
                x = c + sg * w * 2 ** k
                pts.add(x)
                if self.pdf(x) * abs(x - c) ** pw < mp.mpf('1e-50') * f0 * w ** pw:
                    break
        if self.family == 'vg':  # |d|^(2p - 1) at d = 0: pieces shrinking to 0
            pts.add(mp.mpf(0))
            for k in range(0, 60):
                pts.add(w * mp.mpf(2) ** (-k))
                pts.add(-w * mp.mpf(2) ** (-k))
        self.pts = [-mp.inf] + sorted(pts) + [mp.inf]
        n = len(self.pts) - 1
        self.M0, self.M1 = [], []
        for i in range(n):
            a, b = self.pts[i], self.pts[i + 1]
            self.M0.append(self.integ(self.pdf_c, a, b))
            if not self.es_infinite():
                self.M1.append(self.integ(lambda t: (t - c) * self.pdf_c(t), a, b))
        self.Fc = [mp.mpf(0)]  # mass left of pts[i]
        for v in self.M0:
            self.Fc.append(self.Fc[-1] + v)
        self.Sc = [mp.mpf(0)]  # mass right of pts[i], built from the right
        for v in reversed(self.M0):
            self.Sc.append(self.Sc[-1] + v)
        self.Sc.reverse()
        return abs(self.Fc[-1] - 1)

    def piece(self, x):
        """index j with pts[j] <= x < pts[j+1]"""
        lo, hi = 0, len(self.pts) - 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.pts[mid] <= x:
                lo = mid
            else:
                hi = mid
        return lo

    def cdf_a(self, x):
        j = self.piece(x)
        if x == self.pts[j]:
            return self.Fc[j]
        return self.Fc[j] + self.integ(self.pdf_c, self.pts[j], x)

    def sf_a(self, x):
        j = self.piece(x)
        if x == self.pts[j]:
            return self.Sc[j]
        return self.Sc[j + 1] + self.integ(self.pdf_c, x, self.pts[j + 1])

    def mexcess_a(self, q):
        """int_q^inf (t - q) f(t) dt = sum over pieces right of q of M1 + (c - q) M0."""
        c = self.centre - self.m
        j = self.piece(q)
        tot = self.integ(lambda t: (t - q) * self.pdf_c(t), q, self.pts[j + 1])
        for i in range(j + 1, len(self.M0)):
            tot += self.M1[i] + (c - q) * self.M0[i]
        return tot

    def quantile_a(self, alpha, start=None):
        """P(L <= q) = alpha (alpha <= 1/2) or P(L > q) = 1 - alpha: Newton
        inside a bracket (bisection when Newton leaves it), the bracket being
        first the piece where the cumulated mass crosses the target."""
        upper = alpha > mp.mpf(1) / 2
        target = 1 - alpha if upper else alpha

        def h(x):  # increasing in x, 0 at the quantile
            return target - self.sf_a(x) if upper else self.cdf_a(x) - target
        cum = self.Sc if upper else self.Fc
        j = 0
        while j < len(self.pts) - 2 and ((cum[j + 1] > target) if upper else (cum[j + 1] < target)):
            j += 1
        lo, hi = self.pts[j], self.pts[j + 1]
        k = 0
        while not mp.isfinite(lo):
            lo = hi - self.scale * 2 ** k
            if h(lo) > 0:
                hi, lo = lo, -mp.inf
            k += 1
        k = 0
        while not mp.isfinite(hi):
            hi = lo + self.scale * 2 ** k
            if h(hi) < 0:
                lo, hi = hi, mp.inf
            k += 1
        x = start if start is not None and lo <= start <= hi else (lo + hi) / 2
        tol = mp.mpf('1e-34') * (abs(x) + self.scale)
        for _ in range(400):
            hx = h(x)
            if hx == 0:
                return x
            if hx < 0:
                lo = x
            else:
                hi = x
            fx = self.pdf(x)
            xn = x - hx / fx if mp.isfinite(fx) and fx > 0 else lo - 1
            if not (lo < xn < hi):
                xn = (lo + hi) / 2
            if abs(xn - x) < tol or hi - lo < tol:
                return xn
            x = xn
        raise RuntimeError('no convergence: %s %s' % (self.id, alpha))

    # -- B: the normal mixture ---------------------------------------------
    def fy_t(self, t):
        """density of t = log Y (0 below e^-2000)."""
        lg = self.p * t - (self.a * mp.exp(t) + self.b * mp.exp(-t)) / 2 - self.lnz
        return mp.exp(lg) if lg > -2000 else mp.mpf(0)

    def t_points(self, x):
        u = x / self.s
        pts = set()
        for k in range(-40, 41):
            pts.add(self.t0 + self.tw * mp.mpf(k) / 2)
        for k in range(0, 14):
            pts.add(self.t0 + self.tw * 20 * 2 ** k)
            pts.add(self.t0 - self.tw * 20 * 2 ** k)
        # transition of Phic(z), z = u/w - beta w, w = sqrt(y): z = 0 and z = +-6
        for zc in (-6, -3, 0, 3, 6):
            # beta w^2 + zc w - u = 0
            if self.beta == 0:
                roots = [u / zc] if zc != 0 else []
            else:
                d = zc * zc + 4 * self.beta * u
                roots = [] if d < 0 else [(-zc + mp.sqrt(d)) / (2 * self.beta), (-zc - mp.sqrt(d)) / (2 * self.beta)]
            for w in roots:
                if w > 0:
                    tc = 2 * mp.log(w)
                    for k in range(-8, 9):
                        pts.add(tc + mp.mpf(k) / (8 * max(1, abs(self.beta) * w)))
        return [-mp.inf] + sorted(pts) + [mp.inf]

    def tail_b(self, x, upper):
        if self.gauss:
            u = x / self.s - self.beta
            return mp.ncdf(-u) if upper else mp.ncdf(u)
        u = x / self.s
        sg = 1 if upper else -1

        def f(t):
            fy = self.fy_t(t)
            if fy == 0:
                return fy
            w = mp.exp(t / 2)
            return mp.ncdf(-sg * clampz(u / w - self.beta * w)) * fy
        return mp.quad(f, self.t_points(x), maxdegree=10)

    def mexcess_b(self, q):
        u = q / self.s

        def psi(z):  # E[(Z - z)^+]
            if z < -10000:
                return -z
            if z > 10000:
                return mp.mpf(0)
            return mp.npdf(z) - z * mp.ncdf(-z)
        if self.gauss:
            return self.s * psi(u - self.beta)

        def f(t):
            fy = self.fy_t(t)
            if fy == 0:
                return fy
            w = mp.exp(t / 2)
            return self.s * w * psi(u / w - self.beta * w) * fy
        return mp.quad(f, self.t_points(q), maxdegree=10)

    def es_infinite(self):
        if self.gauss or self.a != 0:
            return False
        return (self.beta > 0 and self.p >= -1) or (self.beta == 0 and self.p >= mp.mpf(-1) / 2)


def adaptive(g, a, b, depth=0):
    """int_a^b g: Gauss-Legendre on a finite piece (analytic integrands),
    tanh-sinh on an infinite one; a piece whose error estimate is above
    10^(4 - dps) of max(|value|, 1e-10) is halved (up to 2^12 pieces deep;
    the masses and moments summed are O(1), so 1e-10 is far below them)."""
    finite = mp.isfinite(a) and mp.isfinite(b)
    v, e = mp.quad(g, [a, b], method='gauss-legendre' if finite else 'tanh-sinh', maxdegree=7, error=True)
    if e <= mp.mpf(10) ** (4 - mp.mp.dps) * max(abs(v), mp.mpf(10) ** -10) or depth >= 12:
        return v
    if finite:
        mid = (a + b) / 2
    elif mp.isfinite(a):
        mid = a + 2 * (1 + abs(a))
    elif mp.isfinite(b):
        mid = b - 2 * (1 + abs(b))
    else:
        mid = mp.mpf(0)
    return adaptive(g, a, mid, depth + 1) + adaptive(g, mid, b, depth + 1)


def rel(a, b):
    if a == b:
        return mp.mpf(0)
    return abs(a - b) / max(abs(a), abs(b))


def one(row):
    """All rows of one law (None and the error message on failure)."""
    try:
        return one_law(row)
    except Exception as e:  # reported by main, which then fails
        return None, '%s: %s' % (row[0], e)


def one_law(row):
    # first pass at 20 digits: the quantiles to ~1e-18, to place the pieces
    mp.mp.dps = 20
    t0 = time.time()
    L = Law(row)
    L.build_a([])
    t1 = time.time()
    qs = [L.quantile_a(mp.mpf(alpha_s)) for alpha_s in PROBS]
    t2 = time.time()
    # refine the partition at the quantiles and their doubles (exact values at
    # the points the C test uses), then recompute everything at 40 digits
    mp.mp.dps = DPS
    L = Law(row)
    extra = [+q for q in qs] + [mp.mpf(float(L.m + q)) - L.m for q in qs]
    worst = L.build_a(extra)
    t3 = time.time()
    tb = 0
    lines = []
    for alpha_s in PROBS:
        alpha = mp.mpf(alpha_s)
        q = L.quantile_a(alpha)           # d = x - m from here on
        xd = mp.mpf(float(L.m + q))       # the double the C test evaluates at
        x = xd - L.m
        cdf_a, sf_a = L.cdf_a(x), L.sf_a(x)
        tt = time.time()
        cdf_b, sf_b = L.tail_b(x, False), L.tail_b(x, True)
        tb += time.time() - tt
        worst = max(worst, rel(cdf_a, cdf_b), rel(sf_a, sf_b), abs(cdf_a + sf_a - 1))
        lp = mp.log(L.pdf(x))
        if L.es_infinite():
            es = mp.inf
        else:
            me_a, me_b = L.mexcess_a(q), L.mexcess_b(q)
            worst = max(worst, rel(me_a, me_b))
            es = L.m + q + me_a / (1 - alpha)
        if worst > AGREE:
            raise RuntimeError('paths disagree for %s alpha=%s: %s' % (L.id, alpha_s, mp.nstr(worst, 5)))
        f = lambda v: 'inf' if v == mp.inf else mp.nstr(v, 30, min_fixed=-mp.inf, max_fixed=mp.inf)
        lines.append('P,%s,%s,%s,%s,%s,%s,%s,%s' % (L.id, alpha_s, f(L.m + q), repr(float(xd)), f(cdf_a), f(sf_a),
                                                    f(lp), f(es)))
    sys.stderr.write('%s: done, worst difference %s (seconds: %.0f %.0f %.0f %.0f, B %.0f; %d pieces, %d densities)\n'
                     % (L.id, mp.nstr(worst, 3), t1 - t0, t2 - t1, t3 - t2, time.time() - t3, tb,
                        len(L.pts) - 1, len(L.cache)))
    return lines, worst


def main():
    jobs = 1
    if len(sys.argv) > 2 and sys.argv[1] == '-j':
        jobs = int(sys.argv[2])
    mp.mp.dps = DPS
    laws = LAWS
    if len(sys.argv) > 3:
        laws = [r for r in LAWS if r[0] in sys.argv[3].split(',')]
    if jobs > 1:
        with Pool(jobs) as pool:
            res = pool.map(one, laws, chunksize=1)
    else:
        res = [one(r) for r in laws]
    bad = [w for lines, w in res if lines is None]
    if bad:
        for msg in bad:
            sys.stderr.write('FAILED %s\n' % msg)
        sys.exit(1)
    worst = max(w for _, w in res)
    print('# univariate laws of src/law/uni1d.c: 40-digit mpmath references (tests/data/gen_uni1d_ref.py)')
    print('# largest relative difference between the density path and the mixture path: %s'
          % mp.nstr(worst, 3))
    print('# L,id,family,p,a,b,m,g,s')
    print('# P,id,alpha,q,x,cdf(x),sf(x),logpdf(x),es(alpha)')
    for row in laws:
        print('L,%s,%s,%s' % (row[0], row[1], ','.join(repr(float(v)) for v in row[2:])))
    for lines, _ in res:
        for line in lines:
            print(line)


if __name__ == '__main__':
    main()
