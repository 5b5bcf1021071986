/* risk.c - VaR/ES of portfolios under one fit and Kupiec's test (risk.h). */
#include "risk.h"

#include <math.h>

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
static int one(const ghf_risk_law *lw, const ghf_uni_plan *pl, int K, const double *wi, double *var, double *es)
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
    int stk[GHF_RISK_MAX_ALPHA];
    ghf_uni_plan_eval(pl, m, g, sqrt(s2 > 0.0 ? s2 : 0.0), var, es, stk);
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
            {
                const int a = ghf_risk_severity(ws), b = ghf_risk_severity(worst);
                if (a > b || (a == b && row0 + i < first)) {
                    worst = ws;
                    first = row0 + i;
                }
            }
        }
    }
    ghf_uni_plan_free(pl);
    *bad_row = first;
    return worst;
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
