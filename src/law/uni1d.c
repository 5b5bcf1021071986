/* uni1d.c - the univariate law L = m + g Y + s sqrt(Y) Z of a fit (see uni1d.h).
 *
 * Everything is computed for the standardised variable U = (L - m)/s =
 * beta Y + sqrt(Y) Z, beta = g/s, at u = (x - m)/s.  With t = log Y = t0 + v
 * (t0 the mode of the density of t) the density of v is exp(G(v) - lnc),
 *     G(v) = p v - (A0 (e^v - 1) + B0 (e^-v - 1))/2 = -2R sinh^2(v/2) - p (sinh v - v),
 * formed without cancellation near the peak (as in kernels/gig.h), and
 *     z(v) = u e^{-t/2} - beta e^{t/2}        (U <= u given Y  <=>  Z <= z)
 *     P(U > u)      = int Phic(z) e^{G - lnc} dv
 *     P(U <= u)     = P(-U >= -u): the same integral at (-u, -beta)
 *     E[(U - u)^+]  = int e^{t/2} psi(z) e^{G - lnc} dv,   psi(z) = phi(z) - z Phic(z) > 0
 * so the upper tail and the mean excess are integrals of positive functions
 * (no 1 - F, no cancellation), and ES_alpha = VaR + E[(U - u)^+] / (1 - alpha).
 */
#include "uni1d.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_chebyshev.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_integration.h>
#include <gsl/gsl_roots.h>

#include "bessel.h"
#include "gig.h"

#define UNI_LIMIT 256      /* QAG subintervals */
#define UNI_EPSREL 1e-13   /* QAG request (GSL's floor is 50 eps) */
#define UNI_KEY GSL_INTEG_GAUSS61 /* one 61-point rule covers a smooth piece (cheaper than 21 x 3) */
#define UNI_BRK 4.0        /* split where z crosses 0 faster than this per unit v */
#define UNI_ACCEPT 1e-11   /* an estimate this good is kept even if GSL says "roundoff" */
#define UNI_LEVEL 80.0     /* range: every tilted integrand is below e^-80 of its peak outside */
#define UNI_ZCUT 14.0      /* Phic(14) = 7.8e-45: where z >= 14 the integrands are dropped */
#define UNI_NEWTON_MAX 60  /* Newton steps before the Brent fallback */
#define UNI_BRENT_MAX 200
#define UNI_XTOL 1e-12     /* a Newton step this small (relative) ends the search */
#define UNI_STOL 4e-15     /* so does |sf(u) - c| <= UNI_STOL c (the quadrature's noise) */
#define UNI_PTOL 1e-13     /* ... and a predicted Newton error below UNI_PTOL max(|u|, scale) */
#define UNI_CHEB_ORDER 47  /* plan tables: order of the Chebyshev series in theta */
#define UNI_TABLE_MIN 500  /* plans for fewer combinations start every search at the centre */

const char *ghf_uni_status_str(int status)
{
    switch (status) {
    case GHF_UNI_OK: return "ok";
    case GHF_UNI_EDOM: return "outside the domain";
    case GHF_UNI_INF: return "infinite";
    case GHF_UNI_EACC: return "tolerance not reached";
    default: return "unknown status";
    }
}

/* ---------------------------------------------------------------------------
 * Normal tails.
 * -------------------------------------------------------------------------*/
static double uni_phic(double z) { return 0.5 * erfc(z * M_SQRT1_2); }

/* psi(z) = phi(z) - z Phic(z) = E[(Z - z)^+] > 0.  The difference cancels as
 * z grows (psi ~ phi/z^2), losing about z^2 ulps (3e-14 at z = 8, and the
 * integrands are cut at z = 14).  From z = 8 on, psi = Phic(z) T(z) with
 * Laplace's continued fraction T = 1/(z + 2/(z + 3/(z + ...))) (from the
 * Mills ratio), cut at depth n = 6 + 800/z^2 with the tail replaced by the
 * fixed point of t = n/(z + t): within 2e-16 for every z >= 8 (checked
 * against mpmath on a grid of step 0.2 up to z = 48). */
static double uni_psi(double z)
{
    if (z < 8.0) return exp(-0.5 * z * z) * (1.0 / sqrt(2.0 * M_PI)) - z * uni_phic(z);
    {
        const int n = 6 + (int)(800.0 / (z * z));
        double D = z + 0.5 * (sqrt(z * z + 4.0 * (n + 1)) - z); /* the tail's fixed point */
        for (int k = n; k >= 2; k--) D = z + k / D;
        return uni_phic(z) / D;
    }
}

/* ---------------------------------------------------------------------------
 * The subordinator.
 * -------------------------------------------------------------------------*/

/* G(v) (see the file comment), accurate near v = 0; -inf far out.  Also
 * e^{v/2} (from the same exponential). */
static double mix_G2(const ghf_uni_mix *mx, double v, double *eh)
{
    if (fabs(v) < 1.0) {
        const double em = expm1(0.5 * v);
        const double x3 = em * (2.0 + em);         /* e^v - 1 */
        const double s2 = x3 / (2.0 * (1.0 + em)); /* sinh(v/2) */
        const double smx = fabs(v) < 0.75 ? ghf__gig_sinhmx(v) : 0.5 * (x3 + x3 / (1.0 + x3)) - v;
        *eh = 1.0 + em;
        return -2.0 * mx->R * s2 * s2 - mx->p * smx;
    }
    {
        const double h = exp(0.5 * v), ev = h * h;
        double r = mx->p * v + mx->R;
        if (mx->A0 > 0.0) r -= 0.5 * mx->A0 * ev;
        if (mx->B0 > 0.0) r -= 0.5 * mx->B0 / ev;
        *eh = h;
        return r;
    }
}

static double mix_G(const ghf_uni_mix *mx, double v)
{
    double eh;
    return mix_G2(mx, v, &eh);
}

/* Peak of the tilted exponent G(v) + k v; 0 if it has none (not integrable). */
static int mix_tilt_peak(const ghf_uni_mix *mx, double k, double *vk)
{
    const double q = mx->p + k;
    double ev;
    if (mx->A0 > 0.0 && mx->B0 > 0.0) {
        const double z = sqrt(mx->A0) * sqrt(mx->B0), r = hypot(q, z);
        ev = q >= 0.0 ? (q + r) / mx->A0 : mx->B0 / (r - q);
    } else if (mx->B0 > 0.0) { /* A0 = 0: the inverse-Gamma face */
        if (!(q < 0.0)) return 0;
        ev = mx->B0 / (-2.0 * q);
    } else {                   /* B0 = 0: the Gamma face */
        if (!(q > 0.0)) return 0;
        ev = 2.0 * q / mx->A0;
    }
    *vk = log(ev);
    return 1;
}

/* Point beyond which (direction dir) the concave G(v) + k v stays below its
 * peak value minus UNI_LEVEL: doubling steps out, then bisection. */
static double mix_range_end(const ghf_uni_mix *mx, double k, double vk, double dir)
{
    const double target = mix_G(mx, vk) + k * vk - UNI_LEVEL;
    double in = vk, out = vk, step = 0.5;
    for (int it = 0; it < 64; it++) {
        double h;
        out = vk + dir * step;
        h = mix_G(mx, out) + k * out;
        if (!(h > target)) break; /* below, or -inf / NaN far out */
        in = out;
        step *= 2.0;
    }
    for (int it = 0; it < 40 && fabs(out - in) > 0.05; it++) {
        const double mid = 0.5 * (in + out), h = mix_G(mx, mid) + k * mid;
        if (h > target) in = mid;
        else out = mid;
    }
    return out;
}

static double mix_expG(double v, void *par)
{
    const ghf_uni_mix *mx = (const ghf_uni_mix *)par;
    return exp(mix_G(mx, v));
}

double ghf_uni_mix_logdens(const ghf_uni_mix *mx, double v) { return mix_G(mx, v) - mx->lnc; }

/* QAG with this module's tolerance; GSL's status (0: reached) and the error
 * estimate in *err. */
static int uni_qag(gsl_function *F, double lo, double hi, gsl_integration_workspace *ws, double *res, double *err)
{
    double r = 0.0, e = 0.0;
    const int st = gsl_integration_qag(F, lo, hi, 0.0, UNI_EPSREL, UNI_LIMIT, UNI_KEY, ws, &r, &e);
    *res = r;
    *err = e;
    return st;
}

/* A sum of QAG pieces is kept if GSL reached the tolerance on every piece, or
 * if the summed error estimate is within UNI_ACCEPT of the sum (GSL reports
 * "roundoff" on pieces far below the total's precision). */
static int uni_qag_status(int gsl_any, double sum, double err)
{
    if (!isfinite(sum)) return GHF_UNI_EACC;
    if (gsl_any != 0 && !(err <= UNI_ACCEPT * fabs(sum))) return GHF_UNI_EACC;
    return GHF_UNI_OK;
}

int ghf_uni_mix_init(ghf_uni_mix *mx, int gauss, double p, double a, double b)
{
    static int handler_off = 0;
    if (!handler_off) { /* idempotent; the first call happens before any threads use GSL */
        gsl_set_error_handler_off();
        handler_off = 1;
    }
    memset(mx, 0, sizeof *mx);
    mx->gauss = gauss ? 1 : 0;
    mx->ysc = mx->sy = 1.0;
    if (gauss) return GHF_UNI_OK;
    if (!isfinite(p) || !isfinite(a) || !isfinite(b) || !(a >= 0.0) || !(b >= 0.0)
        || (a == 0.0 && !(p < 0.0 && b > 0.0)) || (b == 0.0 && !(p > 0.0 && a > 0.0)))
        return GHF_UNI_EDOM;
    mx->p = p;
    mx->a = a;
    mx->b = b;
    {
        const double z = sqrt(a) * sqrt(b);
        mx->R = hypot(p, z);
        mx->A0 = p >= 0.0 ? mx->R + p : z * z / (mx->R - p);
        mx->B0 = p <= 0.0 ? mx->R - p : z * z / (mx->R + p);
        mx->t0 = p >= 0.0 ? log((mx->R + p) / a) : log(b / (mx->R - p));
        if (!isfinite(mx->t0)) return GHF_UNI_EDOM;
        mx->ysc = exp(mx->t0);
        mx->sy = exp(0.5 * mx->t0);
        mx->lnz = ghf_gig_log_norm(p, a, b);
        if (!isfinite(mx->lnz)) return GHF_UNI_EDOM;
    }
    {   /* range: tilts k = 0 (probabilities), 1/2 and 1 (mean excess) */
        double lo = 0.0, hi = 0.0, vk;
        static const double ks[3] = {0.0, 0.5, 1.0};
        for (int i = 0; i < 3; i++) {
            if (!mix_tilt_peak(mx, ks[i], &vk)) continue;
            lo = fmin(lo, mix_range_end(mx, ks[i], vk, -1.0));
            hi = fmax(hi, mix_range_end(mx, ks[i], vk, +1.0));
            if (i == 0) {
                mx->vlo0 = lo;
                mx->vhi0 = hi;
            }
        }
        mx->vlo = lo;
        mx->vhi = hi;
    }
    if (a == 0.0 || b == 0.0) { /* Gamma / inverse Gamma: int e^G = Gamma(q) q^-q e^q, q = |p| */
        const double q = fabs(p);
        mx->lnc = lgamma(q) - q * log(q) + q;
    } else {
        gsl_integration_workspace *ws = gsl_integration_workspace_alloc(UNI_LIMIT);
        gsl_function F;
        double c = 0.0, e = 0.0;
        int st;
        if (!ws) return GHF_UNI_EACC;
        F.function = mix_expG;
        F.params = mx;
        st = uni_qag(&F, mx->vlo, mx->vhi, ws, &c, &e);
        gsl_integration_workspace_free(ws);
        if (uni_qag_status(st, c, e) != GHF_UNI_OK || !(c > 0.0)) return GHF_UNI_EACC;
        mx->lnc = log(c);
    }
    return GHF_UNI_OK;
}

/* ---------------------------------------------------------------------------
 * The integrals for the standardised U = beta Y + sqrt(Y) Z.
 * -------------------------------------------------------------------------*/
enum { UNI_SF = 0, UNI_ME = 1, UNI_YSF = 2 };

typedef struct uni_arg {
    const ghf_uni_mix *mx;
    double u, beta;
    int what;
    long *neval;
} uni_arg;

static double uni_integrand(double v, void *par)
{
    const uni_arg *A = (const uni_arg *)par;
    const ghf_uni_mix *mx = A->mx;
    double eh, w, z;
    const double lg = mix_G2(mx, v, &eh) - mx->lnc;
    (*A->neval)++;
    if (!(lg > -745.0)) return 0.0;
    w = mx->sy * eh; /* sqrt(y) */
    z = (A->u != 0.0 ? A->u / w : 0.0) - (A->beta != 0.0 ? A->beta * w : 0.0);
    if (A->what == UNI_SF) return exp(lg) * uni_phic(z);
    if (A->what == UNI_YSF) return exp(lg) * w * w * uni_phic(z); /* y P(Z > z) */
    /* w psi(z), with w z = u - beta w^2 formed directly (as w -> 0, z -> -inf) */
    if (z < 8.0) {
        const double wphi = w * exp(-0.5 * z * z) * (1.0 / sqrt(2.0 * M_PI));
        return exp(lg) * (wphi - (A->u - A->beta * w * w) * uni_phic(z));
    }
    return exp(lg) * w * uni_psi(z);
}

/* log y/2 interval where z(v) < zc: z = u/w - beta w, w = sqrt(y).  Returns 0
 * if z >= zc everywhere. */
static int uni_zcut(double u, double beta, double zc, double *wlo, double *whi)
{
    *wlo = 0.0;
    *whi = INFINITY;
    if (beta > 0.0) {
        if (u > 0.0) *wlo = 2.0 * u / (zc + sqrt(zc * zc + 4.0 * beta * u));
    } else if (beta == 0.0) {
        if (u > 0.0) *wlo = u / zc;
    } else {
        const double nb = -beta, D = zc * zc - 4.0 * nb * u;
        if (!(D > 0.0)) return 0;
        *whi = (zc + sqrt(D)) / (2.0 * nb);
        if (u > 0.0) *wlo = 2.0 * u / (zc + sqrt(D));
    }
    return 1;
}

typedef struct uni_work {
    gsl_integration_workspace *ws;
    long nquad, neval; /* quadratures and integrand evaluations done (benchmarks) */
} uni_work;

/* Breakpoints in v where z(v) = zc for zc in {0, +-1, +-3, +-6}, when z
 * crosses 0 steeply (u/beta > 0 and |dz/dv| = |beta| sqrt(y) > UNI_BRK at
 * the crossing y = u/beta): there Phic(z(v)) is a step of width
 * 1/(|beta| sqrt y) in v, which adaptive bisection would chase level by
 * level; with the step's own scale given, every piece is smooth at its own
 * size.  Writes the points inside (lo, hi), sorted; returns their number. */
static int uni_breaks(const ghf_uni_mix *mx, double u, double beta, double lo, double hi, double *bk)
{
    static const double zs[7] = {6.0, 3.0, 1.0, 0.0, -1.0, -3.0, -6.0};
    int n = 0;
    if (u == 0.0 || beta == 0.0 || !(u / beta > 0.0) || !(fabs(beta) * sqrt(u / beta) > UNI_BRK)) return 0;
    for (int i = 0; i < 7; i++) {
        /* the positive root of beta w^2 + zc w - u = 0 (the roots have
         * product -u/beta < 0), formed without cancellation */
        const double zc = zs[i], D = sqrt(zc * zc + 4.0 * beta * u);
        const double q = -0.5 * (zc + (zc >= 0.0 ? D : -D));
        const double r1 = q / beta, r2 = -u / q, w = r1 > 0.0 ? r1 : r2;
        const double v = 2.0 * log(w) - mx->t0;
        if (v > lo && v < hi) bk[n++] = v;
    }
    for (int i = 1; i < n; i++) /* z(v) is monotone: sort the few points */
        for (int j = i; j > 0 && bk[j] < bk[j - 1]; j--) {
            const double t = bk[j];
            bk[j] = bk[j - 1];
            bk[j - 1] = t;
        }
    return n;
}

/* P(U > u) (what = UNI_SF), E[(U - u)^+] (UNI_ME) or E[Y 1{U > u}] (UNI_YSF): QAG on the range of the
 * subordinator, less where z >= UNI_ZCUT, split at uni_breaks.  The pieces
 * are positive, so their relative errors bound the sum's. */
static int uni_integral(uni_work *W, const ghf_uni_mix *mx, double u, double beta, int what, double *res)
{
    uni_arg A;
    gsl_function F;
    double lo = what == UNI_SF ? mx->vlo0 : mx->vlo, hi = what == UNI_SF ? mx->vhi0 : mx->vhi;
    double wlo, whi, pts[9], sum = 0.0, esum = 0.0;
    int st = 0, n;
    A.mx = mx;
    A.u = u;
    A.beta = beta;
    A.what = what;
    A.neval = &W->neval;
    F.function = uni_integrand;
    F.params = &A;
    W->nquad++;
    if (what != UNI_SF && mx->A0 == 0.0 && mx->p >= -1.0) {
        /* t face without a mean of Y (then beta < 0, else ES is infinite):
         * the right end where beta^2 y/2 >= 120 kills the integrand */
        hi = fmax(hi, log(240.0 / (beta * beta)) - mx->t0);
    }
    if (uni_zcut(u, beta, UNI_ZCUT, &wlo, &whi)) {
        const double vlo = wlo > 0.0 ? 2.0 * log(wlo) - mx->t0 : -INFINITY;
        const double vhi = 2.0 * log(whi) - mx->t0;
        if (fmax(lo, vlo) < fmin(hi, vhi)) {
            lo = fmax(lo, vlo);
            hi = fmin(hi, vhi);
        }
    }
    pts[0] = lo;
    n = 1 + uni_breaks(mx, u, beta, lo, hi, pts + 1);
    pts[n] = hi;
    for (int i = 0; i < n; i++) {
        double r = 0.0, e = 0.0;
        st |= uni_qag(&F, pts[i], pts[i + 1], W->ws, &r, &e);
        sum += r;
        esum += e;
    }
    *res = sum;
    return uni_qag_status(st, sum, esum);
}

/* Density of U at u (closed form, math.md 1.4 with d = 1):
 *   f(u) = e^{u beta} Z(p - 1/2, a + beta^2, b + u^2) / (sqrt(2 pi) Z(p, a, b)),
 * and, with dlogf != NULL, d/du log f = beta - u E[1/Y | U = u], the posterior
 * being GIG(p - 1/2, a + beta^2, b + u^2). */
static double uni_logpdf_std(const ghf_uni_mix *mx, double u, double beta, double *dlogf)
{
    const double P = mx->p - 0.5, A = mx->a + beta * beta, B = mx->b + u * u;
    double lz = NAN, einv = NAN;
    if (mx->gauss) {
        if (dlogf) *dlogf = -(u - beta);
        return -0.5 * GHF_LOG_2PI - 0.5 * (u - beta) * (u - beta);
    }
    if (A > 0.0 && B > 0.0 && sqrt(A) * sqrt(B) >= 1e-10) {
        const double x = sqrt(A) * sqrt(B);
        const ghf_bessel_eval K = ghf_bessel_fused(P, x);
        lz = GHF_LN2 + 0.5 * P * (log(B) - log(A)) + (K.logk_s - x);
        einv = exp(0.5 * (log(A) - log(B)) + K.log_ratio_dn);
    }
    if (!isfinite(lz)) {
        const ghf_gig_stats g = ghf__gig_eval(P, A, B, 0);
        lz = g.log_norm;
        einv = g.e_inv;
        if (lz != lz) lz = INFINITY; /* b = 0, u = 0, p <= 1/2: the spike of vg */
    }
    if (dlogf) *dlogf = u == 0.0 ? beta : beta - u * einv;
    return u * beta - 0.5 * GHF_LOG_2PI + lz - mx->lnz;
}

/* sf (upper = 1) or cdf (upper = 0) of U; gauss in closed form. */
static int uni_prob_std(uni_work *W, const ghf_uni_mix *mx, double u, double beta, int upper, double *res)
{
    if (!upper) {
        u = -u;
        beta = -beta;
    }
    if (mx->gauss) {
        *res = uni_phic(u - beta);
        return GHF_UNI_OK;
    }
    return uni_integral(W, mx, u, beta, UNI_SF, res);
}

/* ---------------------------------------------------------------------------
 * Quantiles of U: solve P(U > u) = c for c <= 1/2 (the other side by
 * reflection), by Newton on log sf with the closed-form density, inside a
 * bracket kept from the signs seen; GSL Brent on the bracket if Newton has
 * not converged after UNI_NEWTON_MAX steps.
 * -------------------------------------------------------------------------*/
static double uni_scale(const ghf_uni_mix *mx, double beta)
{
    return sqrt(mx->ysc) + fabs(beta) * mx->ysc;
}

typedef struct uni_root_arg {
    uni_work *W;
    const ghf_uni_mix *mx;
    double beta, logc;
    int st;
} uni_root_arg;

static double uni_root_f(double u, void *par)
{
    uni_root_arg *R = (uni_root_arg *)par;
    double S = 0.0;
    R->st |= uni_integral(R->W, R->mx, u, R->beta, UNI_SF, &S);
    return (S > 0.0 ? log(S) : -1e300) - R->logc;
}

static int uni_brent(uni_root_arg *RA, double lo, double hi, double tol, double *u)
{
    gsl_root_fsolver *s = gsl_root_fsolver_alloc(gsl_root_fsolver_brent);
    gsl_function F;
    int st = GHF_UNI_EACC;
    if (!s) return GHF_UNI_EACC;
    F.function = uni_root_f;
    F.params = RA;
    if (gsl_root_fsolver_set(s, &F, lo, hi) == GSL_SUCCESS) {
        for (int it = 0; it < UNI_BRENT_MAX; it++) {
            if (gsl_root_fsolver_iterate(s) != GSL_SUCCESS) break;
            lo = gsl_root_fsolver_x_lower(s);
            hi = gsl_root_fsolver_x_upper(s);
            if (hi - lo <= tol + 1e-15 * fmax(fabs(lo), fabs(hi))) {
                st = GHF_UNI_OK;
                break;
            }
        }
        *u = gsl_root_fsolver_root(s);
    }
    gsl_root_fsolver_free(s);
    return st | RA->st;
}

/* u with P(U > u) = c, 0 < c <= 1/2, starting from u0. */
static int uni_isf_std(uni_work *W, const ghf_uni_mix *mx, double beta, double c, double u0, double *out)
{
    const double logc = log(c), sc = uni_scale(mx, beta);
    double lo = -INFINITY, hi = INFINITY, u = u0;
    if (mx->gauss) {
        *out = beta + gsl_cdf_ugaussian_Qinv(c);
        return GHF_UNI_OK;
    }
    for (int it = 0; it < UNI_NEWTON_MAX; it++) {
        double S, f, dlf, un, step, X;
        const int st = uni_integral(W, mx, u, beta, UNI_SF, &S);
        if (st != GHF_UNI_OK) break;
        if (fabs(S - c) <= UNI_STOL * c) { /* at the root within the quadrature's noise */
            *out = u;
            return GHF_UNI_OK;
        }
        if (S > c) lo = u;
        else hi = u;
        f = exp(uni_logpdf_std(mx, u, beta, &dlf));
        step = (S > 0.0 && f > 0.0) ? (log(S) - logc) * (S / f) : NAN;
        un = u + step;
        X = fmax(fabs(un), sc);
        /* Newton on r(u) = log sf(u) - log c: the new error is about
         * C step^2 with C = r''/(2 r') = (dlogf + f/S)/2.  Small enough, and
         * the step small enough that an error in f does not matter: done. */
        if (fabs(step) <= UNI_XTOL * X
            || (fabs(step) <= 1e-4 * X && fabs(0.5 * (dlf + f / S)) * step * step <= UNI_PTOL * X)) {
            *out = un;
            return GHF_UNI_OK;
        }
        if (!(un > lo && un < hi)) { /* outside the bracket (or no step): bisect or expand */
            if (isfinite(lo) && isfinite(hi)) un = 0.5 * (lo + hi);
            else if (isfinite(lo)) un = lo + 2.0 * (fabs(lo - u0) + sc);
            else un = hi - 2.0 * (fabs(hi - u0) + sc);
            if (fabs(un - u) <= UNI_XTOL * fmax(fabs(un), sc)) {
                *out = un;
                return GHF_UNI_OK;
            }
        }
        u = un;
    }
    if (!(isfinite(lo) && isfinite(hi))) {
        *out = u;
        return GHF_UNI_EACC;
    }
    {
        uni_root_arg RA;
        RA.W = W;
        RA.mx = mx;
        RA.beta = beta;
        RA.logc = logc;
        RA.st = 0;
        return uni_brent(&RA, lo, hi, 1e-15 * sc, out) ? GHF_UNI_EACC : GHF_UNI_OK;
    }
}

/* A starting point: the centre of U. */
static double uni_centre(const ghf_uni_mix *mx, double beta)
{
    return mx->gauss ? beta : beta * mx->ysc;
}

/* The lower prob-quantile of U (prob in (0, 1)), from the start u0. */
static int uni_quantile_std(uni_work *W, const ghf_uni_mix *mx, double beta, double prob, double u0,
                            double *out)
{
    int st;
    if (prob <= 0.5) { /* P(U <= u) = prob  <=>  P(-U > -u) = prob */
        st = uni_isf_std(W, mx, -beta, prob, -u0, out);
        *out = -*out;
        return st;
    }
    return uni_isf_std(W, mx, beta, 1.0 - prob, u0, out); /* 1 - prob is exact here */
}

/* E[(U - u)^+] is infinite: inverse-Gamma subordinator with E[sqrt Y] = inf
 * (nu <= 1), or E[Y] = inf (nu <= 2) and beta > 0 (the heavy tail up). */
static int uni_me_infinite(const ghf_uni_mix *mx, double beta)
{
    if (mx->gauss || mx->A0 > 0.0) return 0;
    return (beta > 0.0 && mx->p >= -1.0) || (beta == 0.0 && mx->p >= -0.5);
}

static int uni_work_init(uni_work *W)
{
    W->nquad = W->neval = 0;
    W->ws = gsl_integration_workspace_alloc(UNI_LIMIT);
    return W->ws ? 0 : -1;
}

static void uni_work_free(uni_work *W)
{
    if (W->ws) gsl_integration_workspace_free(W->ws);
    W->ws = NULL;
}

/* VaR and ES of U at alpha from the start u0. */
static int uni_var_es_std(uni_work *W, const ghf_uni_mix *mx, double beta, double alpha, double u0,
                          double *var, double *es)
{
    double u = NAN, me = NAN;
    int st = uni_quantile_std(W, mx, beta, alpha, u0, &u);
    *var = u;
    if (uni_me_infinite(mx, beta)) {
        *es = INFINITY;
        return st ? st : GHF_UNI_INF;
    }
    if (mx->gauss) me = uni_psi(u - beta);
    else st |= uni_integral(W, mx, u, beta, UNI_ME, &me);
    *es = u + me / (1.0 - alpha); /* exact for alpha >= 1/2 */
    return st ? GHF_UNI_EACC : GHF_UNI_OK;
}

/* ---------------------------------------------------------------------------
 * The public single-combination functions.
 * -------------------------------------------------------------------------*/

/* 0: regular (s > 0); 1: point mass at *pt; -1: outside the domain. */
static int uni_law_kind(const ghf_uni_law *L, double *pt)
{
    if (!L || !L->mix || !isfinite(L->m) || !isfinite(L->g) || !isfinite(L->s) || !(L->s >= 0.0)) return -1;
    if (L->s > 0.0) return 0;
    if (L->mix->gauss) { /* N(m + g, 0) */
        *pt = L->m + L->g;
        return 1;
    }
    if (L->g != 0.0) return -1;
    *pt = L->m;
    return 1;
}

int ghf_uni_logpdf(const ghf_uni_law *L, double x, double *out)
{
    double pt = NAN;
    const int k = uni_law_kind(L, &pt);
    *out = NAN;
    if (k != 0 || x != x) return GHF_UNI_EDOM;
    *out = uni_logpdf_std(L->mix, (x - L->m) / L->s, L->g / L->s, NULL) - log(L->s);
    return *out == *out ? GHF_UNI_OK : GHF_UNI_EACC;
}

static int uni_prob(const ghf_uni_law *L, double x, int upper, double *out)
{
    double pt = NAN;
    const int k = uni_law_kind(L, &pt);
    uni_work W;
    int st;
    *out = NAN;
    if (k < 0 || x != x) return GHF_UNI_EDOM;
    if (k == 1) {
        *out = (upper ? x < pt : x >= pt) ? 1.0 : 0.0;
        return GHF_UNI_OK;
    }
    if (uni_work_init(&W)) return GHF_UNI_EACC;
    st = uni_prob_std(&W, L->mix, (x - L->m) / L->s, L->g / L->s, upper, out);
    uni_work_free(&W);
    return st;
}

int ghf_uni_cdf(const ghf_uni_law *L, double x, double *out) { return uni_prob(L, x, 0, out); }
int ghf_uni_sf(const ghf_uni_law *L, double x, double *out) { return uni_prob(L, x, 1, out); }

static int uni_quant(const ghf_uni_law *L, double prob, int upper, double *out)
{
    double pt = NAN, u = NAN, beta;
    const int k = uni_law_kind(L, &pt);
    uni_work W;
    int st;
    *out = NAN;
    if (k < 0 || !(prob > 0.0 && prob < 1.0)) return GHF_UNI_EDOM;
    if (k == 1) {
        *out = pt;
        return GHF_UNI_OK;
    }
    if (uni_work_init(&W)) return GHF_UNI_EACC;
    beta = L->g / L->s;
    if (upper && prob <= 0.5) st = uni_isf_std(&W, L->mix, beta, prob, uni_centre(L->mix, beta), &u);
    else st = uni_quantile_std(&W, L->mix, beta, upper ? 1.0 - prob : prob, uni_centre(L->mix, beta), &u);
    uni_work_free(&W);
    *out = L->m + L->s * u;
    return st;
}

int ghf_uni_quantile(const ghf_uni_law *L, double prob, double *out) { return uni_quant(L, prob, 0, out); }
int ghf_uni_isf(const ghf_uni_law *L, double q, double *out) { return uni_quant(L, q, 1, out); }

int ghf_uni_var_es(const ghf_uni_law *L, double alpha, double *var, double *es)
{
    double pt = NAN, u, e;
    const int k = uni_law_kind(L, &pt);
    uni_work W;
    int st;
    *var = *es = NAN;
    if (k < 0 || !(alpha > 0.0 && alpha < 1.0)) return GHF_UNI_EDOM;
    if (k == 1) {
        *var = *es = pt;
        return GHF_UNI_OK;
    }
    if (uni_work_init(&W)) return GHF_UNI_EACC;
    {
        const double beta = L->g / L->s;
        st = uni_var_es_std(&W, L->mix, beta, alpha, uni_centre(L->mix, beta), &u, &e);
    }
    uni_work_free(&W);
    *var = L->m + L->s * u;
    *es = isinf(e) ? e : L->m + L->s * e;
    return st;
}

int ghf_uni_mean_excess(const ghf_uni_law *L, double x, double *out)
{
    double pt = NAN, me = NAN;
    const int k = uni_law_kind(L, &pt);
    *out = NAN;
    if (k < 0 || x != x) return GHF_UNI_EDOM;
    if (k == 1) {
        *out = pt > x ? pt - x : 0.0;
        return GHF_UNI_OK;
    }
    const double u = (x - L->m) / L->s, beta = L->g / L->s;
    if (uni_me_infinite(L->mix, beta)) {
        *out = INFINITY;
        return GHF_UNI_INF;
    }
    if (L->mix->gauss) {
        *out = L->s * uni_psi(u - beta);
        return GHF_UNI_OK;
    }
    uni_work W;
    if (uni_work_init(&W)) return GHF_UNI_EACC;
    const int st = uni_integral(&W, L->mix, u, beta, UNI_ME, &me);
    uni_work_free(&W);
    *out = L->s * me;
    return st ? GHF_UNI_EACC : GHF_UNI_OK;
}

/* ---------------------------------------------------------------------------
 * Mixtures of K laws L[k] with proportions prop[k] (risk of a mixture fit,
 * goodness of fit of its margins).
 * -------------------------------------------------------------------------*/

int ghf_uni_mixture_prob(const ghf_uni_law *L, const double *prop, int K, double x, int upper, double *out)
{
    double s = 0.0;
    int st = GHF_UNI_OK;
    for (int k = 0; k < K; k++) {
        double v = NAN;
        const int sk = upper ? ghf_uni_sf(&L[k], x, &v) : ghf_uni_cdf(&L[k], x, &v);
        if (sk == GHF_UNI_EDOM || (sk && st != GHF_UNI_EDOM)) st = sk;
        s += prop[k] * v;
    }
    *out = s;
    return st;
}

typedef struct unimix_root {
    const ghf_uni_law *L;
    const double *prop;
    int K, upper, st;
    double target;
} unimix_root;

static double unimix_gap(double x, void *par)
{
    unimix_root *A = par;
    double v = NAN;
    const int st = ghf_uni_mixture_prob(A->L, A->prop, A->K, x, A->upper, &v);
    if (st && A->st != GHF_UNI_EDOM) A->st = st;
    return A->upper ? A->target - v : v - A->target; /* increasing in x */
}

int ghf_uni_mixture_quantile(const ghf_uni_law *L, const double *prop, int K, double prob, double *out)
{
    *out = NAN;
    if (!(prob > 0.0 && prob < 1.0) || K < 1) return GHF_UNI_EDOM;
    double lo = INFINITY, hi = -INFINITY;
    int st = GHF_UNI_OK;
    for (int k = 0; k < K; k++) {
        double q = NAN;
        const int sk = ghf_uni_quantile(&L[k], prob, &q);
        if (sk == GHF_UNI_EDOM) return GHF_UNI_EDOM;
        if (sk) st = sk;
        lo = fmin(lo, q);
        hi = fmax(hi, q);
    }
    if (!isfinite(lo) || !isfinite(hi)) return GHF_UNI_EDOM;
    /* F = sum pi_k F_k is at most prob at the smallest component quantile and
     * at least prob at the largest: the root lies between (equal components:
     * their quantile).  The upper half is solved on the survival function. */
    unimix_root A = {L, prop, K, prob > 0.5, GHF_UNI_OK, prob > 0.5 ? 1.0 - prob : prob};
    double x = lo;
    if (hi > lo) {
        const double flo = unimix_gap(lo, &A), fhi = unimix_gap(hi, &A);
        if (flo >= 0.0) x = lo;
        else if (fhi <= 0.0) x = hi;
        else {
            gsl_function F = {unimix_gap, &A};
            gsl_root_fsolver *sv = gsl_root_fsolver_alloc(gsl_root_fsolver_brent);
            if (!sv) return GHF_UNI_EACC;
            gsl_root_fsolver_set(sv, &F, lo, hi);
            int rc = GSL_CONTINUE;
            for (int it = 0; it < 200 && rc == GSL_CONTINUE; it++) {
                if (gsl_root_fsolver_iterate(sv) != GSL_SUCCESS) break;
                rc = gsl_root_test_interval(gsl_root_fsolver_x_lower(sv), gsl_root_fsolver_x_upper(sv),
                                            1e-15 * (hi - lo), 1e-14);
            }
            x = gsl_root_fsolver_root(sv);
            if (rc != GSL_SUCCESS && st == GHF_UNI_OK) st = GHF_UNI_EACC;
            gsl_root_fsolver_free(sv);
        }
    }
    if (A.st == GHF_UNI_EDOM) return GHF_UNI_EDOM;
    if (A.st && st == GHF_UNI_OK) st = A.st;
    *out = x;
    return st;
}

/* VaR and ES with their partial derivatives in (m, g, s) (uni1d.h).  With
 * U = (L - m)/s = beta Y + sqrt(Y) Z, u = the standardised VaR and e the
 * standardised ES, both are positively homogeneous of degree 1 in (m, g, s)
 * (VaR = m + s q(g/s)), and for a continuous law the derivative of a quantile
 * (of the tail mean) in a parameter of L is E[dL/dtheta | L = VaR] (E[dL/dtheta
 * | L >= VaR]), dL/dm = 1, dL/dg = Y, dL/ds = sqrt(Y) Z:
 *   dVaR = (1, E[Y | U = u], u - beta E[Y | U = u])
 *   dES  = (1, E[Y | U >= u], e - beta E[Y | U >= u])
 * The posterior of Y given U = u is GIG(p - 1/2, a + beta^2, b + u^2)
 * (closed form); E[Y 1{U > u}] = int y Phic(z) is one more quadrature. */
int ghf_uni_var_es_grad(const ghf_uni_law *L, double alpha, double *u_hint, double *var, double *es,
                        double dvar[3], double des[3])
{
    double pt = NAN, u = NAN, e = NAN, beta, eyv = NAN, eyt = NAN;
    const int k = uni_law_kind(L, &pt);
    uni_work W;
    int st;
    *var = *es = NAN;
    for (int i = 0; i < 3; i++) dvar[i] = des[i] = NAN;
    if (k != 0 || !(alpha > 0.0 && alpha < 1.0)) return GHF_UNI_EDOM;
    if (uni_work_init(&W)) return GHF_UNI_EACC;
    beta = L->g / L->s;
    {
        const double u0 = u_hint && isfinite(*u_hint) ? *u_hint : uni_centre(L->mix, beta);
        st = uni_var_es_std(&W, L->mix, beta, alpha, u0, &u, &e);
    }
    if (u_hint && isfinite(u)) *u_hint = u;
    if (L->mix->gauss) {
        eyv = eyt = 1.0;
    } else if (st == GHF_UNI_OK) {
        const ghf_uni_mix *mx = L->mix;
        const ghf_gig_stats g = ghf__gig_eval(mx->p - 0.5, mx->a + beta * beta, mx->b + u * u, 0);
        double ysf = NAN;
        eyv = g.e_y;
        st = uni_integral(&W, mx, u, beta, UNI_YSF, &ysf);
        eyt = ysf / (1.0 - alpha);
        if (!isfinite(eyv) || !isfinite(eyt)) st = GHF_UNI_EACC;
    }
    uni_work_free(&W);
    *var = L->m + L->s * u;
    *es = isinf(e) ? e : L->m + L->s * e;
    dvar[0] = des[0] = 1.0;
    dvar[1] = eyv;
    dvar[2] = u - beta * eyv;
    des[1] = eyt;
    des[2] = e - beta * eyt;
    return st;
}

/* ---------------------------------------------------------------------------
 * Plans: per alpha, a Chebyshev series in theta = (2/pi) atan(beta sqrt(y0))
 * of r = u cos(pi theta / 2) / sqrt(y0), which stays bounded as |beta| -> inf
 * (u ~ beta y_alpha).  Only a starting point for the Newton iteration.
 * -------------------------------------------------------------------------*/
struct ghf_uni_plan {
    ghf_uni_mix mx;
    int K;
    double *alpha;
    gsl_cheb_series **cs; /* [K]; NULL where the table could not be built */
};

typedef struct uni_cheb_arg {
    uni_work *W;
    const ghf_uni_mix *mx;
    double alpha, rprev;
    int bad;
} uni_cheb_arg;

static double uni_theta_beta(const ghf_uni_mix *mx, double th)
{
    return tan(M_PI_2 * th) / sqrt(mx->ysc);
}

static double uni_cheb_f(double th, void *par)
{
    uni_cheb_arg *C = (uni_cheb_arg *)par;
    const double beta = uni_theta_beta(C->mx, th), cs = cos(M_PI_2 * th), sy = sqrt(C->mx->ysc);
    const double u0 = C->rprev == C->rprev ? C->rprev * sy / cs : uni_centre(C->mx, beta);
    double u = NAN;
    if (uni_quantile_std(C->W, C->mx, beta, C->alpha, u0, &u) != GHF_UNI_OK || !isfinite(u)) {
        C->bad = 1;
        return 0.0;
    }
    C->rprev = u * cs / sy;
    return C->rprev;
}

void ghf_uni_plan_free(ghf_uni_plan *pl)
{
    if (!pl) return;
    if (pl->cs)
        for (int k = 0; k < pl->K; k++)
            if (pl->cs[k]) gsl_cheb_free(pl->cs[k]);
    free(pl->cs);
    free(pl->alpha);
    free(pl);
}

ghf_uni_plan *ghf_uni_plan_new(const ghf_uni_mix *mx, int K, const double *alpha, size_t n_hint)
{
    ghf_uni_plan *pl;
    uni_work W;
    if (!mx || K < 1 || !alpha) return NULL;
    for (int k = 0; k < K; k++)
        if (!(alpha[k] > 0.0 && alpha[k] < 1.0)) return NULL;
    pl = (ghf_uni_plan *)calloc(1, sizeof *pl);
    if (!pl) return NULL;
    pl->mx = *mx;
    pl->K = K;
    pl->alpha = (double *)malloc((size_t)K * sizeof(double));
    pl->cs = (gsl_cheb_series **)calloc((size_t)K, sizeof *pl->cs);
    if (!pl->alpha || !pl->cs) {
        ghf_uni_plan_free(pl);
        return NULL;
    }
    memcpy(pl->alpha, alpha, (size_t)K * sizeof(double));
    if (mx->gauss || n_hint < UNI_TABLE_MIN) return pl; /* closed forms / too few to pay for tables */
    if (uni_work_init(&W)) {
        ghf_uni_plan_free(pl);
        return NULL;
    }
    for (int k = 0; k < K; k++) {
        uni_cheb_arg C;
        gsl_function F;
        C.W = &W;
        C.mx = &pl->mx;
        C.alpha = alpha[k];
        C.rprev = NAN;
        C.bad = 0;
        F.function = uni_cheb_f;
        F.params = &C;
        pl->cs[k] = gsl_cheb_alloc(UNI_CHEB_ORDER);
        if (pl->cs[k] && (gsl_cheb_init(pl->cs[k], &F, -1.0, 1.0) != GSL_SUCCESS || C.bad)) {
            gsl_cheb_free(pl->cs[k]);
            pl->cs[k] = NULL;
        }
    }
    uni_work_free(&W);
    return pl;
}

static void uni_plan_eval_w(const ghf_uni_plan *pl, uni_work *W, double m, double g, double s,
                            double *var, double *es, int *status)
{
    const ghf_uni_mix *mx = &pl->mx;
    ghf_uni_law L;
    double pt = NAN;
    int kind;
    L.mix = mx;
    L.m = m;
    L.g = g;
    L.s = s;
    kind = uni_law_kind(&L, &pt);
    for (int k = 0; k < pl->K; k++) {
        double u = NAN, e = NAN, beta, u0;
        if (kind != 0) {
            var[k] = es[k] = kind == 1 ? pt : NAN;
            status[k] = kind == 1 ? GHF_UNI_OK : GHF_UNI_EDOM;
            continue;
        }
        beta = g / s;
        u0 = uni_centre(mx, beta);
        if (pl->cs[k]) {
            const double th = atan(beta * sqrt(mx->ysc)) / M_PI_2;
            const double r = gsl_cheb_eval(pl->cs[k], th);
            const double c = cos(M_PI_2 * th);
            if (c > 0.0 && isfinite(r)) u0 = r * sqrt(mx->ysc) / c;
        }
        status[k] = W->ws ? uni_var_es_std(W, mx, beta, pl->alpha[k], u0, &u, &e) : GHF_UNI_EACC;
        var[k] = m + s * u;
        es[k] = isinf(e) ? e : m + s * e;
    }
}

void ghf_uni_plan_eval(const ghf_uni_plan *pl, double m, double g, double s, double *var, double *es,
                       int *status)
{
    uni_work W;
    uni_work_init(&W);
    uni_plan_eval_w(pl, &W, m, g, s, var, es, status);
    uni_work_free(&W);
}

static int uni_status_worse(int a, int b)
{
    static const int rank[4] = {0, 3, 1, 2}; /* OK < INF < EACC < EDOM */
    const int ra = (a >= 0 && a < 4) ? rank[a] : 3, rb = (b >= 0 && b < 4) ? rank[b] : 3;
    return ra >= rb ? a : b;
}

static long g_uni_nquad = 0, g_uni_neval = 0;

/* Quadratures and integrand evaluations done by ghf_uni_batch so far
 * (benchmarks; not thread-safe against concurrent batches). */
void ghf__uni_counts(long *nquad, long *neval)
{
    *nquad = g_uni_nquad;
    *neval = g_uni_neval;
}

int ghf_uni_batch(const ghf_uni_mix *mx, size_t n, const double *m, const double *g, const double *s,
                  int K, const double *alpha, double *var, double *es, int *status)
{
    ghf_uni_plan *pl = ghf_uni_plan_new(mx, K, alpha, n);
    int worst = GHF_UNI_OK;
    if (!pl) {
        for (size_t i = 0; i < n * (size_t)(K > 0 ? K : 0); i++) {
            var[i] = es[i] = NAN;
            status[i] = GHF_UNI_EDOM;
        }
        return GHF_UNI_EDOM;
    }
#pragma omp parallel reduction(+ : g_uni_nquad, g_uni_neval)
    {
        uni_work W;
        int my = GHF_UNI_OK;
        uni_work_init(&W);
#pragma omp for schedule(dynamic, 16)
        for (long i = 0; i < (long)n; i++) {
            uni_plan_eval_w(pl, &W, m[i], g[i], s[i], var + (size_t)i * K, es + (size_t)i * K,
                            status + (size_t)i * K);
            for (int k = 0; k < K; k++) my = uni_status_worse(my, status[(size_t)i * K + k]);
        }
        g_uni_nquad += W.nquad;
        g_uni_neval += W.neval;
        uni_work_free(&W);
#pragma omp critical(ghf_uni_batch)
        worst = uni_status_worse(worst, my);
    }
    ghf_uni_plan_free(pl);
    return worst;
}
