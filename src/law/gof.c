/* gof.c - goodness-of-fit statistics, PITs of sorted samples and the radial
 * law of a fitted mixture (see gof.h for the formulas and their sources). */
#include "gof.h"

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_linalg.h>
#include <gsl/gsl_integration.h>
#include <gsl/gsl_interp.h>
#include <gsl/gsl_roots.h>
#include <gsl/gsl_sf_bessel.h>
#include <gsl/gsl_sf_gamma.h>
#include <gsl/gsl_cdf.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* ---------------------------------------------------------------------------
 * Statistics and asymptotic p-values
 * -------------------------------------------------------------------------*/

typedef struct thread_part { /* one thread's share of one block */
    double ks;
    ghf_xsum ad, cvm;
} thread_part;

static double clamp01(double p) { return p < 0.0 ? 0.0 : p > 1.0 ? 1.0 : p; }

/* The terms of u[i0..i1) (global orders off + i + 1, all in one block) into
 * *ks and the block's accumulators. */
static void stats_block(const double *u, size_t i0, size_t i1, size_t off, size_t n, double *ks, ghf_xsum *ad,
                        ghf_xsum *cvm)
{
    const double nn = (double)n;
    /* OpenMP: each thread's terms into its own accumulators, merged exactly
     * (any order of merges gives the same sums) */
#pragma omp parallel if (i1 - i0 > 100000)
    {
        thread_part t;
        t.ks = 0.0;
        ghf_xsum_init(&t.ad);
        ghf_xsum_init(&t.cvm);
#pragma omp for schedule(static)
        for (size_t i = i0; i < i1; i++) {
            const double ui = u[i], k = (double)(off + i) + 1.0; /* the 1-based global order */
            t.ks = fmax(t.ks, fmax(k / nn - ui, ui - (k - 1.0) / nn));
            const double c = fmin(fmax(ui, 1e-300), 1.0 - 1e-16);
            ghf_xsum_add(&t.ad, (2.0 * k - 1.0) * log(c));
            ghf_xsum_add(&t.ad, (2.0 * nn - 2.0 * k + 1.0) * log1p(-c));
            const double e = ui - (2.0 * k - 1.0) / (2.0 * nn);
            ghf_xsum_add(&t.cvm, e * e);
        }
#pragma omp critical(ghf_gof_stats_part)
        {
            *ks = fmax(*ks, t.ks);
            ghf_xsum_merge(ad, &t.ad);
            ghf_xsum_merge(cvm, &t.cvm);
        }
    }
}

int ghf_gof_xblocks(size_t n)
{
    const size_t nb = n > 0 ? (n - 1) / GHF_GOF_XBLOCK + 1 : 1;
    return nb < GHF_GOF_XBLOCKS ? (int)nb : GHF_GOF_XBLOCKS;
}

void ghf_gof_stats_part(const double *u, size_t m, size_t off, size_t n, ghf_gof_part *p)
{
    (void)n;
    for (size_t i0 = 0; i0 < m;) { /* the pieces of u in each block */
        size_t b = (off + i0) / GHF_GOF_XBLOCK;
        const size_t end = (b + 1) * GHF_GOF_XBLOCK - off, i1 = end < m ? end : m;
        if (b >= GHF_GOF_XBLOCKS) b = GHF_GOF_XBLOCKS - 1; /* n > GHF_GOF_MAX_N: refused before */
        stats_block(u, i0, i1, off, n, &p->ks, &p->ad[b], &p->cvm[b]);
        i0 = i1;
    }
}

void ghf_gof_part_init(ghf_gof_part *p)
{
    p->ks = 0.0;
    for (int b = 0; b < GHF_GOF_XBLOCKS; b++) {
        ghf_xsum_init(&p->ad[b]);
        ghf_xsum_init(&p->cvm[b]);
    }
}

void ghf_gof_stats_finish(ghf_gof_part *p, size_t n, ghf_gof_stat *s)
{
    const double nn = (double)n;
    ghf_xsum_add(&p->cvm[0], 1.0 / (12.0 * nn));
    /* the complete blocks, normalised, joined in block order (one block: its own value) */
    ghf_xsum ad, cvm;
    ghf_xsum_init(&ad);
    ghf_xsum_init(&cvm);
    for (int b = 0; b < ghf_gof_xblocks(n); b++) {
        ghf_xsum_normalize(&p->ad[b]);
        ghf_xsum_normalize(&p->cvm[b]);
        ghf_xsum_merge(&ad, &p->ad[b]);
        ghf_xsum_merge(&cvm, &p->cvm[b]);
    }
    s->ks = p->ks;
    s->ad = -nn - ghf_xsum_value(&ad) / nn;
    s->cvm = ghf_xsum_value(&cvm);
    s->ks_p = ghf_gof_ks_pvalue(s->ks, n);
    s->ad_p = ghf_gof_ad_pvalue(s->ad);
    s->cvm_p = ghf_gof_cvm_pvalue(s->cvm);
}

void ghf_gof_stats(const double *u, size_t n, ghf_gof_stat *s)
{
    ghf_gof_part p;
    ghf_gof_part_init(&p);
    ghf_gof_stats_part(u, n, 0, n, &p);
    ghf_gof_stats_finish(&p, n, s);
}

double ghf_gof_ks_pvalue(double D, size_t n)
{
    const double sn = sqrt((double)n), lam = (sn + 0.12 + 0.11 / sn) * D;
    if (!(lam > 0.0)) return 1.0;
    double sum = 0.0;
    if (lam < 1.18) { /* P(K <= lam) = sqrt(2 pi)/lam sum exp(-(2k-1)^2 pi^2 / (8 lam^2)) */
        for (int k = 1; k <= 50; k++) {
            const double t = exp(-(2.0 * k - 1) * (2.0 * k - 1) * M_PI * M_PI / (8.0 * lam * lam));
            sum += t;
            if (t < 1e-18 * sum) break;
        }
        return clamp01(1.0 - sqrt(2.0 * M_PI) / lam * sum);
    }
    for (int k = 1; k <= 100; k++) { /* P(K > lam) = 2 sum (-1)^(k-1) exp(-2 k^2 lam^2) */
        const double t = exp(-2.0 * k * k * lam * lam);
        sum += (k & 1) ? t : -t;
        if (t < 1e-18 * fabs(sum)) break;
    }
    return clamp01(2.0 * sum);
}

double ghf_gof_ad_pvalue(double z)
{
    if (!(z > 0.0)) return 1.0;
    if (!isfinite(z)) return 0.0;
    if (z < 2.0) {
        const double c = exp(-1.2337141 / z) / sqrt(z) *
                         (2.00012 + (.247105 - (.0649821 - (.0347962 - (.011672 - .00168691 * z) * z) * z) * z) * z);
        return clamp01(1.0 - c);
    }
    const double e = exp(1.0776 - (2.30695 - (.43424 - (.082433 - (.008056 - .0003146 * z) * z) * z) * z) * z);
    return clamp01(-expm1(-e));
}

double ghf_gof_cvm_pvalue(double x)
{
    if (!(x > 0.0)) return 1.0;
    if (x > 10.0) return 0.0; /* the limit tail there is below 1e-20 */
    double cdf = 0.0;
    for (int k = 0; k < 200; k++) {
        const double z = (4.0 * k + 1) * (4.0 * k + 1) / (16.0 * x);
        const double lc = lgamma(k + 0.5) - lgamma(0.5) - lgamma(k + 1.0);
        gsl_sf_result r;
        if (gsl_sf_bessel_Knu_scaled_e(0.25, z, &r) != GSL_SUCCESS) break;
        const double t = exp(lc - 2.0 * z) * sqrt(4.0 * k + 1) * r.val;
        cdf += t;
        if (t < 1e-18 * cdf || t == 0.0) break;
    }
    return clamp01(1.0 - cdf / (M_PI * sqrt(x)));
}

/* ---------------------------------------------------------------------------
 * PITs of a sorted sample
 * -------------------------------------------------------------------------*/

int ghf_gof_pit_exact(const double *xs, size_t n, ghf_gof_cdf_fn f, const void *ctx, double *u)
{
    int bad = 0;
#pragma omp parallel for schedule(dynamic, 16) reduction(| : bad)
    for (size_t i = 0; i < n; i++) {
        int st = f(ctx, xs[i], &u[i]);
        if (st && st != GHF_UNI_EACC) bad |= 1;
    }
    return bad;
}

int ghf_gof_knotted(size_t n, size_t nexact, size_t nknots)
{
    return !(n <= nexact || n <= nknots + 64 || nknots < 3);
}

size_t ghf_gof_knot_cand(size_t n, size_t nknots, size_t *rk)
{
    size_t m = 0;
    for (size_t k = 0; k < nknots + 64; k++) {
        size_t r;
        if (k < 32) r = k;
        else if (k < 32 + nknots) r = (size_t)llround((double)(k - 32) * (double)(n - 1) / (double)(nknots - 1));
        else r = n - 32 + (k - 32 - nknots);
        rk[m++] = r;
    }
    /* sort (insertion sort is enough: three increasing runs) */
    for (size_t i = 1; i < m; i++) {
        size_t v = rk[i], j = i;
        while (j > 0 && rk[j - 1] > v) rk[j] = rk[j - 1], j--;
        rk[j] = v;
    }
    return m;
}

size_t ghf_gof_knot_dedupe(size_t *rk, double *kx, size_t m)
{
    size_t o = 0;
    for (size_t i = 0; i < m; i++)
        if (o == 0 || kx[i] > kx[o - 1]) rk[o] = rk[i], kx[o] = kx[i], o++;
    return o;
}

int ghf_gof_interp_init(ghf_gof_interp *I, const double *kx, double *ku, size_t m)
{
    /* interpolate the probit Phi^-1(F) (close to linear or sqrt-like in the
     * tails, where F itself is exponential or a power) */
    for (size_t k = 0; k < m; k++) ku[k] = gsl_cdf_ugaussian_Pinv(fmin(fmax(ku[k], 1e-300), 1.0 - 0x1p-53));
    I->kx = kx, I->pk = ku, I->m = m;
    gsl_interp *ip = gsl_interp_alloc(gsl_interp_steffen, m);
    I->ip = ip;
    return !ip || gsl_interp_init(ip, kx, ku, m) != GSL_SUCCESS;
}

void ghf_gof_interp_free(ghf_gof_interp *I)
{
    if (I->ip) gsl_interp_free(I->ip);
    I->ip = NULL;
}

void ghf_gof_interp_eval(const ghf_gof_interp *I, const double *xs, size_t n, double *u)
{
#pragma omp parallel
    {
        gsl_interp_accel *acc = gsl_interp_accel_alloc();
#pragma omp for schedule(static)
        for (size_t i = 0; i < n; i++) u[i] = gsl_cdf_ugaussian_P(gsl_interp_eval(I->ip, I->kx, I->pk, xs[i], acc));
        gsl_interp_accel_free(acc);
    }
}

size_t ghf_gof_err_ranks(const size_t *rk, size_t m, size_t *pos)
{
    size_t ng = 0; /* knot intervals that hold sample points */
    for (size_t j = 0; j + 1 < m; j++) ng += rk[j + 1] > rk[j] + 1;
    const size_t nc = ng < GHF_GOF_ERR_POINTS ? ng : GHF_GOF_ERR_POINTS;
    for (size_t c = 0, g = 0, want = 0, j = 0; c < nc; c++) {
        want = nc == ng ? c : (size_t)((double)c * (double)(ng - 1) / (double)(nc - 1));
        for (;; j++) { /* the want-th such interval (want increases with c) */
            if (rk[j + 1] > rk[j] + 1) {
                if (g == want) break;
                g++;
            }
        }
        pos[c] = (rk[j] + rk[j + 1]) / 2;
    }
    return nc;
}

int ghf_gof_interp_err(const ghf_gof_interp *I, ghf_gof_cdf_fn f, const void *ctx, const double *xm, size_t nc,
                       double *maxerr)
{
    double err = 0.0;
    int bad = 0;
#pragma omp parallel for schedule(dynamic, 4) reduction(max : err) reduction(| : bad)
    for (size_t c = 0; c < nc; c++) {
        double ex;
        int s = f(ctx, xm[c], &ex);
        if (s && s != GHF_UNI_EACC) bad |= 1;
        else err = fmax(err, fabs(gsl_cdf_ugaussian_P(gsl_interp_eval(I->ip, I->kx, I->pk, xm[c], NULL)) - ex));
    }
    *maxerr = err;
    return bad;
}

int ghf_gof_pit_sorted(const double *xs, size_t n, ghf_gof_cdf_fn f, const void *ctx, size_t nexact,
                       size_t nknots, double *u, double *maxerr)
{
    *maxerr = 0.0;
    if (!ghf_gof_knotted(n, nexact, nknots)) return ghf_gof_pit_exact(xs, n, f, ctx, u);
    size_t *rk = malloc((nknots + 64) * sizeof *rk), pos[GHF_GOF_ERR_POINTS];
    double *kx = malloc((nknots + 64) * sizeof *kx), *ku = malloc((nknots + 64) * sizeof *ku);
    double xm[GHF_GOF_ERR_POINTS];
    int st = !rk || !kx || !ku;
    size_t m = 0;
    if (!st) {
        m = ghf_gof_knot_cand(n, nknots, rk);
        for (size_t k = 0; k < m; k++) kx[k] = xs[rk[k]];
        m = ghf_gof_knot_dedupe(rk, kx, m);
    }
    if (!st && m < 3) st = ghf_gof_pit_exact(xs, n, f, ctx, u);
    else if (!st) st = ghf_gof_pit_exact(kx, m, f, ctx, ku);
    if (!st && m >= 3) {
        ghf_gof_interp I;
        st = ghf_gof_interp_init(&I, kx, ku, m);
        if (!st) {
            ghf_gof_interp_eval(&I, xs, n, u);
            const size_t nc = ghf_gof_err_ranks(rk, m, pos);
            for (size_t c = 0; c < nc; c++) xm[c] = xs[pos[c]];
            st = ghf_gof_interp_err(&I, f, ctx, xm, nc, maxerr);
        }
        ghf_gof_interp_free(&I);
    }
    free(rk);
    free(kx);
    free(ku);
    return st;
}

/* ---------------------------------------------------------------------------
 * Noncentral chi-square and the radial law
 * -------------------------------------------------------------------------*/

double ghf_ncx2_cdf(double x, double k, double lambda)
{
    if (!(x > 0.0)) return 0.0;
    if (!isfinite(x)) return 1.0;
    const double z = 0.5 * x, a0 = 0.5 * k, h = 0.5 * lambda;
    if (!(h > 0.0)) return gsl_cdf_chisq_P(x, k);
    {   /* Birge (2001, Lemma 8.1): P(X <= m - 2 sqrt(v s)) and P(X >= m + 2 sqrt(v s) + 2 s) are at
         * most e^-s, m = k + lambda, v = k + 2 lambda; s = 60 (e^-60 < 1e-26) */
        const double m = k + lambda, r = 2.0 * sqrt((k + 2.0 * lambda) * 60.0);
        if (x <= m - r) return 0.0;
        if (x >= m + r + 120.0) return 1.0;
    }
    /* P(a+1, z) = P(a, z) - z^a e^-z / Gamma(a+1) (regularised lower incomplete
     * gamma); Poisson(h) weights from their mode outwards */
    const double k0 = floor(h), width = 12.0 * sqrt(h) + 30.0, lz = log(z);
    const double w0 = exp(k0 * log(h) - h - lgamma(k0 + 1.0)), P0 = gsl_sf_gamma_inc_P(a0 + k0, z);
    double sum = w0 * P0;
    double P = P0, w = w0;
    for (double j = k0; j < k0 + width; j++) { /* upwards */
        P -= exp((a0 + j) * lz - z - lgamma(a0 + j + 1.0));
        if (P < 0.0) P = 0.0;
        w *= h / (j + 1.0);
        sum += w * P;
        if (w < 1e-25 || P == 0.0) break;
    }
    P = P0;
    w = w0;
    for (double j = k0; j > 0.0 && j > k0 - width; j--) { /* downwards */
        P += exp((a0 + j - 1.0) * lz - z - lgamma(a0 + j));
        if (P >= 1.0 - 1e-16) { /* every lower index has P = 1: their Poisson mass */
            sum += gsl_cdf_poisson_P((unsigned)(j - 1.0), h);
            break;
        }
        w *= j / h;
        sum += w * P;
        if (w < 1e-25) break;
    }
    return clamp01(sum);
}

#define GOF_LW_MIN (-57.5)

typedef struct radial_arg {
    const ghf_radial_law *R;
    double t;
} radial_arg;

static double radial_integrand(double v, void *par)
{
    const radial_arg *A = par;
    const ghf_uni_mix *mx = A->R->mix;
    const double y = mx->ysc * exp(v), lw = ghf_uni_mix_logdens(mx, v);
    if (!(lw > GOF_LW_MIN)) return 0.0; /* density below 1e-25: at most ~1e-23 of mass in all */
    return exp(lw) * ghf_ncx2_cdf(A->t / y, A->R->d, y * A->R->delta2);
}

int ghf_radial_cdf(const void *ctx, double t, double *out)
{
    const ghf_radial_law *R = ctx;
    *out = NAN;
    if (isnan(t)) return GHF_UNI_EDOM;
    if (!(t > 0.0)) return *out = 0.0, GHF_UNI_OK;
    if (!isfinite(t)) return *out = 1.0, GHF_UNI_OK;
    if (R->mix->gauss) return *out = gsl_cdf_chisq_P(t, R->d), GHF_UNI_OK;
    const ghf_uni_mix *mx = R->mix;
    gsl_integration_workspace *ws = gsl_integration_workspace_alloc(400);
    if (!ws) return GHF_UNI_EACC;
    radial_arg A = {R, t};
    gsl_function F = {radial_integrand, &A};
    /* split where t / y = d (the step of the conditional cdf) */
    double bk[3] = {mx->vlo0, log(t / R->d) - mx->t0, mx->vhi0};
    int nb = 3;
    if (!(bk[1] > bk[0] && bk[1] < bk[2])) bk[1] = bk[2], nb = 2;
    double sum = 0.0;
    int st = GHF_UNI_OK;
    for (int i = 0; i + 1 < nb; i++) {
        double r = 0.0, e = 0.0;
        int s = gsl_integration_qag(&F, bk[i], bk[i + 1], 1e-14, 1e-10, 400, GSL_INTEG_GAUSS31, ws, &r, &e);
        if (s != GSL_SUCCESS && e > 1e-8) st = GHF_UNI_EACC;
        sum += r;
    }
    gsl_integration_workspace_free(ws);
    *out = clamp01(sum);
    return st;
}

typedef struct radial_root {
    const ghf_radial_law *R;
    double prob;
} radial_root;

static double radial_root_f(double t, void *par)
{
    const radial_root *A = par;
    double c;
    ghf_radial_cdf(A->R, t, &c);
    return c - A->prob;
}

int ghf_radial_quantile(const ghf_radial_law *R, double prob, double *out)
{
    *out = NAN;
    if (!(prob > 0.0 && prob < 1.0)) return GHF_UNI_EDOM;
    radial_root A = {R, prob};
    double lo = 0.0, hi = R->d * (R->mix->gauss ? 1.0 : R->mix->ysc) + 1.0;
    for (int i = 0; i < 400 && radial_root_f(hi, &A) < 0.0; i++) lo = hi, hi *= 2.0;
    if (radial_root_f(hi, &A) < 0.0) return GHF_UNI_EACC;
    gsl_function F = {radial_root_f, &A};
    gsl_root_fsolver *s = gsl_root_fsolver_alloc(gsl_root_fsolver_brent);
    if (!s || gsl_root_fsolver_set(s, &F, lo, hi) != GSL_SUCCESS) {
        if (s) gsl_root_fsolver_free(s);
        return GHF_UNI_EACC;
    }
    int st = GHF_UNI_EACC;
    for (int it = 0; it < 200; it++) {
        gsl_root_fsolver_iterate(s);
        lo = gsl_root_fsolver_x_lower(s);
        hi = gsl_root_fsolver_x_upper(s);
        if (gsl_root_test_interval(lo, hi, 0.0, 1e-12) == GSL_SUCCESS) {
            st = GHF_UNI_OK;
            break;
        }
    }
    *out = gsl_root_fsolver_root(s);
    gsl_root_fsolver_free(s);
    return st;
}

/* ---------------------------------------------------------------------------
 * The whole check
 * -------------------------------------------------------------------------*/

typedef struct xi_pair {
    double x;
    size_t i;
} xi_pair;

/* by value, ties by row: the same order as the distributed sort */
static int xi_cmp(const void *a, const void *b)
{
    const xi_pair *p = a, *q = b;
    if (p->x < q->x) return -1;
    if (p->x > q->x) return 1;
    return p->i < q->i ? -1 : p->i > q->i;
}

int ghf_gof_uni_cdf(const void *ctx, double x, double *u) { return ghf_uni_cdf(ctx, x, u); }

int ghf_gof_unimix_cdf(const void *ctx, double x, double *u)
{
    const ghf_gof_unimix *m = ctx;
    const int st = ghf_uni_mixture_prob(m->L, m->prop, m->K, x, 0, u);
    return st == GHF_UNI_EACC ? GHF_UNI_OK : st; /* EACC: accepted as a value (ghf_gof_cdf_fn) */
}

size_t ghf_gof_qq_lo(size_t n, double prob)
{
    const size_t lo = (size_t)floor((double)(n - 1) * prob);
    return lo + 1 >= n ? n - 1 : lo;
}

double ghf_gof_qq_value(size_t n, double prob, double vlo, double vnext)
{
    const double h = (double)(n - 1) * prob;
    const size_t lo = (size_t)floor(h);
    if (lo + 1 >= n) return vlo;
    return vlo + (h - (double)lo) * (vnext - vlo);
}

int ghf_gof_model_quantile(const void *ctx, int radial, int Q, int k, double *q)
{
    const double prob = (k + 0.5) / Q;
    if (radial == 2) {
        const ghf_gof_unimix *m = ctx;
        return ghf_uni_mixture_quantile(m->L, m->prop, m->K, prob, q);
    }
    return radial ? ghf_radial_quantile(ctx, prob, q) : ghf_uni_quantile(ctx, prob, q);
}

/* PITs of one column (pairs sorted on return), their statistics and the QQ
 * table.  0 or 1. */
static int gof_column(const ghf_gof_input *in, xi_pair *v, double *xs, double *u, ghf_gof_cdf_fn f,
                      const void *ctx, int radial, ghf_gof_stat *st, double *qq, double *pit, int stride,
                      int col, ghf_gof_result *out)
{
    const size_t n = in->n;
    qsort(v, n, sizeof *v, xi_cmp);
    for (size_t i = 0; i < n; i++) xs[i] = v[i].x;
    double e = 0.0;
    if (ghf_gof_pit_sorted(xs, n, f, ctx, in->nexact, in->nknots, u, &e) != 0) return 1;
    out->pit_err = fmax(out->pit_err, e);
    if (ghf_gof_knotted(n, in->nexact, in->nknots)) out->exact = 0;
    ghf_gof_stats(u, n, st);
    if (pit)
        for (size_t i = 0; i < n; i++) pit[v[i].i * (size_t)stride + (size_t)col] = u[i];
    int neacc = 0;
#pragma omp parallel for schedule(dynamic, 4) reduction(+ : neacc)
    for (int k = 0; k < in->Q; k++) {
        const double prob = (k + 0.5) / in->Q;
        neacc += ghf_gof_model_quantile(ctx, radial, in->Q, k, &qq[2 * k]) != GHF_UNI_OK;
        const size_t lo = ghf_gof_qq_lo(n, prob);
        qq[2 * k + 1] = ghf_gof_qq_value(n, prob, xs[lo], xs[lo + 1 < n ? lo + 1 : lo]);
    }
    out->n_eacc += neacc;
    return 0;
}

int ghf_gof_radial_q(const ghf_gof_input *in, const double *x, size_t n, double *q, double *delta2)
{
    const int d = in->d;
    gsl_matrix *L = gsl_matrix_alloc((size_t)d, (size_t)d);
    if (!L) return 1;
    for (int i = 0; i < d * d; i++) L->data[i] = in->sigma[i];
    if (gsl_linalg_cholesky_decomp1(L) != GSL_SUCCESS) {
        gsl_matrix_free(L);
        return 2;
    }
    gsl_vector *g = gsl_vector_alloc((size_t)d);
    for (int j = 0; j < d; j++) gsl_vector_set(g, (size_t)j, in->gauss ? 0.0 : in->gamma[j]);
    gsl_blas_dtrsv(CblasLower, CblasNoTrans, CblasNonUnit, L, g);
    double dl = 0.0;
    for (int j = 0; j < d; j++) dl += g->data[j] * g->data[j];
    *delta2 = dl;
    gsl_vector_free(g);
#pragma omp parallel
    {
        gsl_vector *z = gsl_vector_alloc((size_t)d);
#pragma omp for schedule(static)
        for (size_t i = 0; i < n; i++) {
            for (int j = 0; j < d; j++) z->data[j] = x[i * (size_t)d + (size_t)j] - in->mu[j];
            gsl_blas_dtrsv(CblasLower, CblasNoTrans, CblasNonUnit, L, z);
            double s = 0.0;
            for (int j = 0; j < d; j++) s += z->data[j] * z->data[j];
            q[i] = s;
        }
        gsl_vector_free(z);
    }
    gsl_matrix_free(L);
    return 0;
}

void ghf_gof_result_free(ghf_gof_result *r)
{
    free(r->ks);
    free(r->ad);
    free(r->cvm);
    free(r->ks_p);
    free(r->ad_p);
    free(r->cvm_p);
    free(r->qq);
    free(r->pit);
    free(r->rqq);
    free(r->rpit);
    memset(r, 0, sizeof *r);
}

int ghf_gof_result_alloc(const ghf_gof_input *in, ghf_gof_result *r)
{
    const size_t d = (size_t)in->d, Q = in->Q > 0 ? (size_t)in->Q : 1; /* Q = 0: no QQ table */
    memset(r, 0, sizeof *r);
    r->exact = 1;
    r->ks = malloc(d * sizeof(double));
    r->ad = malloc(d * sizeof(double));
    r->cvm = malloc(d * sizeof(double));
    r->ks_p = malloc(d * sizeof(double));
    r->ad_p = malloc(d * sizeof(double));
    r->cvm_p = malloc(d * sizeof(double));
    r->qq = malloc(d * Q * 2 * sizeof(double));
    r->rqq = malloc(Q * 2 * sizeof(double));
    if (in->want_pit) {
        r->pit = malloc(in->n * d * sizeof(double));
        r->rpit = malloc(in->n * sizeof(double));
    }
    return r->ks && r->ad && r->cvm && r->ks_p && r->ad_p && r->cvm_p && r->qq && r->rqq &&
                   (!in->want_pit || (r->pit && r->rpit))
               ? 0
               : 1;
}

int ghf_gof_compute(const ghf_gof_input *in, ghf_gof_result *out, char *err, size_t errlen)
{
    ghf_uni_mix mx;
    if (ghf_uni_mix_init(&mx, in->gauss, in->p, in->a, in->b) != GHF_UNI_OK) {
        snprintf(err, errlen, "the fit's subordinator GIG(p = %g, a = %g, b = %g) is not a valid law", in->p, in->a,
                 in->b);
        return 2;
    }
    const size_t n = in->n, d = (size_t)in->d;
    xi_pair *v = malloc(n * sizeof *v);
    double *xs = malloc(n * sizeof *xs), *u = malloc(n * sizeof *u);
    int st = (!v || !xs || !u || ghf_gof_result_alloc(in, out)) ? 1 : 0;
    if (st) snprintf(err, errlen, "gof: out of memory for %zu rows", n);
    for (size_t j = 0; j < d && !st; j++) {
        if (!(in->sigma[j * d + j] > 0.0)) {
            snprintf(err, errlen, "the fit's Sigma has a non-positive diagonal entry (%zu)", j);
            st = 2;
            break;
        }
        const ghf_uni_law L = {&mx, in->mu[j], in->gauss ? 0.0 : in->gamma[j], sqrt(in->sigma[j * d + j])};
        for (size_t i = 0; i < n; i++) v[i].x = in->x[i * d + j], v[i].i = i;
        ghf_gof_stat s;
        if (gof_column(in, v, xs, u, ghf_gof_uni_cdf, &L, 0, &s, out->qq + j * (size_t)in->Q * 2, out->pit, (int)d,
                       (int)j, out)) {
            snprintf(err, errlen, "gof: the cdf of margin %zu failed", j);
            st = 1;
            break;
        }
        out->ks[j] = s.ks, out->ad[j] = s.ad, out->cvm[j] = s.cvm;
        out->ks_p[j] = s.ks_p, out->ad_p[j] = s.ad_p, out->cvm_p[j] = s.cvm_p;
        if (in->progress) in->progress("margins", (int)j + 1, (int)d);
        if (in->tick) in->tick(in->tick_arg);
    }
    if (!st) {
        st = ghf_gof_radial_q(in, in->x, n, xs, &out->delta2);
        for (size_t i = 0; !st && i < n; i++) v[i].x = xs[i], v[i].i = i;
        if (st == 2) snprintf(err, errlen, "the fit's Sigma is not positive definite");
        if (st == 1) snprintf(err, errlen, "gof: out of memory");
    }
    if (!st) {
        const ghf_radial_law R = {&mx, in->d, out->delta2};
        if (gof_column(in, v, xs, u, ghf_radial_cdf, &R, 1, &out->radial, out->rqq, out->rpit, 1, 0, out)) {
            snprintf(err, errlen, "gof: the radial cdf failed");
            st = 1;
        }
        if (in->progress) in->progress("radial", 1, 1);
    }
    free(v);
    free(xs);
    free(u);
    if (st) ghf_gof_result_free(out);
    return st;
}
