/* risk.c - VaR/ES of portfolios under one fit and Kupiec's test (risk.h). */
#include "risk.h"

#include <math.h>

#include <stdlib.h>

#include <gsl/gsl_cdf.h>

#include "uni1d.h"

int ghf_risk_severity(int s)
{
    return s == GHF_UNI_EDOM ? 3 : s == GHF_UNI_EACC ? 2 : s == GHF_UNI_INF ? 1 : 0;
}

double ghf_factor_quad(int d, int nf, const double *B, const double *D, const double *w, double *bw)
{
    double tmp[nf > 0 ? nf : 1];
    double *t = bw ? bw : tmp, s2 = 0.0;
    for (int k = 0; k < nf; k++) t[k] = 0.0;
    for (int j = 0; j < d; j++) {
        s2 += D[j] * w[j] * w[j];
        for (int k = 0; k < nf; k++) t[k] += B[(size_t)j * nf + k] * w[j];
    }
    for (int k = 0; k < nf; k++) s2 += t[k] * t[k];
    return s2;
}

/* one portfolio: the loss's (m, g, s) and its values; its worst status */
/* The status of the portfolios (the most severe; ties: the first row) as
 * rows report theirs; callers hold the critical section. */
static void note_worst(int ws, int64_t row, int *worst, int64_t *first)
{
    const int a = ghf_risk_severity(ws), b = ghf_risk_severity(*worst);
    if (a > b || (a == b && row < *first)) {
        *worst = ws;
        *first = row;
    }
}

/* The loss L = -w'X given Y: location m = -w'mu, skewness g = -w'gamma and
 * scale s = sqrt(w' Sigma w) (the factor form: w'Dw + |B'w|^2, Sigma never
 * formed). */
static void loss_law(const ghf_risk_law *lw, const double *wi, double *m_, double *g_, double *s_)
{
    const int d = lw->d;
    double m = 0.0, g = 0.0, s2 = 0.0;
    if (lw->D) { /* Sigma = B B' + diag(D): s^2 = w'Dw + |B'w|^2 */
        for (int j = 0; j < d; j++) {
            m -= wi[j] * lw->mu[j];
            g -= wi[j] * lw->gamma[j];
        }
        s2 = ghf_factor_quad(d, lw->nf, lw->B, lw->D, wi, NULL);
    } else
        for (int j = 0; j < d; j++) {
            double t = 0.0;
            for (int k = 0; k < d; k++) t += lw->sigma[(size_t)j * d + k] * wi[k];
            m -= wi[j] * lw->mu[j];
            g -= wi[j] * lw->gamma[j];
            s2 += wi[j] * t;
        }
    *m_ = m;
    *g_ = g;
    *s_ = sqrt(s2 > 0.0 ? s2 : 0.0);
}

static int one(const ghf_risk_law *lw, const ghf_uni_plan *pl, int K, const double *wi, double *var, double *es)
{
    double m, g, s;
    loss_law(lw, wi, &m, &g, &s);
    int stk[GHF_RISK_MAX_ALPHA];
    ghf_uni_plan_eval(pl, m, g, s, var, es, stk);
    int ws = GHF_UNI_OK;
    for (int k = 0; k < K; k++)
        if (ghf_risk_severity(stk[k]) > ghf_risk_severity(ws)) ws = stk[k];
    return ws;
}

int ghf_risk_portfolios(const ghf_risk_law *lw, int K, const double *alpha, size_t n_plan, const double *w,
                        int64_t n, int64_t row0, double *var, double *es, int64_t *bad_row)
{
    ghf_uni_mix mx;
    ghf_uni_mix_init(&mx, lw->gauss, lw->p, lw->a, lw->b);
    ghf_uni_plan *pl = ghf_uni_plan_new(&mx, K, alpha, n_plan);
    if (!pl) return -1;
    const int d = lw->d;
    int worst = GHF_UNI_OK;
    int64_t first = -1;
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t i = 0; i < n; i++) {
        const int ws = one(lw, pl, K, w + i * d, var + i * K, es + i * K);
        if (ws != GHF_UNI_OK) {
#pragma omp critical(ghf_risk_status)
            note_worst(ws, row0 + i, &worst, &first);
        }
    }
    ghf_uni_plan_free(pl);
    *bad_row = first;
    return worst;
}

/* ------------------------------------------------------------------------
 * Mixtures: the loss of a portfolio is a mixture of K univariate laws.
 * ---------------------------------------------------------------------- */

static int worse(int a, int b) { return ghf_risk_severity(a) >= ghf_risk_severity(b) ? a : b; }

/* VaR and ES of one mixture loss at alpha: VaR the alpha-quantile of the
 * mixture (uni1d.h ghf_uni_mixture_quantile: Brent on its survival function
 * between the smallest and the largest component VaR), ES = sum_k pi_k
 * E_k[L 1{L >= v}] / (1 - alpha) = v + sum_k pi_k E_k[(L - v)^+] / (1 - alpha). */
static int mix_var_es(ghf_uni_law *L, const double *prop, int K, double alpha, double *var, double *es)
{
    double v = NAN;
    int st = ghf_uni_mixture_quantile(L, prop, K, alpha, &v);
    *var = *es = NAN;
    if (st == GHF_UNI_EDOM) return st;
    double me = 0.0;
    for (int k = 0; k < K; k++) {
        double e = NAN;
        st = worse(st, ghf_uni_mean_excess(&L[k], v, &e));
        me += prop[k] * e;
    }
    *var = v;
    *es = isinf(me) ? INFINITY : v + me / (1.0 - alpha);
    return st;
}

int ghf_risk_portfolios_mix(const ghf_risk_law *comp, const double *prop, int Kc, int K, const double *alpha,
                            const double *w, int64_t n, int64_t row0, double *var, double *es, int64_t *bad_row)
{
    ghf_uni_mix *mx = malloc((size_t)Kc * sizeof *mx);
    if (!mx) return -1;
    for (int c = 0; c < Kc; c++) ghf_uni_mix_init(&mx[c], comp[c].gauss, comp[c].p, comp[c].a, comp[c].b);
    const int d = comp[0].d;
    int worst = GHF_UNI_OK, oom = 0;
    int64_t first = -1;
#pragma omp parallel
    {
        ghf_uni_law *L = malloc((size_t)Kc * sizeof *L);
        if (!L) {
#pragma omp atomic write
            oom = 1;
        }
#pragma omp for schedule(dynamic, 4)
        for (int64_t i = 0; i < n; i++) {
            if (!L) continue;
            const double *wi = w + i * d;
            for (int c = 0; c < Kc; c++) {
                double m, g, s;
                loss_law(&comp[c], wi, &m, &g, &s);
                L[c] = (ghf_uni_law){&mx[c], m, g, s};
            }
            int ws = GHF_UNI_OK;
            for (int a = 0; a < K; a++)
                ws = worse(ws, mix_var_es(L, prop, Kc, alpha[a], var + i * K + a, es + i * K + a));
            if (ws != GHF_UNI_OK) {
#pragma omp critical(ghf_risk_status)
                note_worst(ws, row0 + i, &worst, &first);
            }
        }
        free(L);
    }
    free(mx);
    *bad_row = first;
    return oom ? -1 : worst;
}

/* x log(x / y) with 0 log 0 = 0 */
static double xlogr(double x, double num, double den) { return x > 0.0 ? x * log(num / den) : 0.0; }

void ghf_kupiec(int64_t n, int64_t x, double alpha, double *lr, double *p)
{
    if (n <= 0 || x < 0 || x > n) {
        *lr = *p = NAN;
        return;
    }
    const double nn = (double)n, xx = (double)x, ph = xx / nn;
    /* LR = 2 [ (n-x) log((1-ph)/alpha) + x log(ph/(1-alpha)) ] */
    double v = 2.0 * (xlogr(nn - xx, 1.0 - ph, alpha) + xlogr(xx, ph, 1.0 - alpha));
    if (v < 0.0) v = 0.0; /* round-off when ph = 1 - alpha */
    *lr = v;
    *p = gsl_cdf_chisq_Q(v, 1.0);
}
