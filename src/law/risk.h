/* risk.h - VaR and ES of many portfolios' losses -w'X under one fitted law
 * (uni1d.h), and Kupiec's unconditional coverage test of a backtest.
 * Shared by `ghfit risk` and the `risk:` key of job files. */
#ifndef GHF_LAW_RISK_H
#define GHF_LAW_RISK_H

#include <stddef.h>
#include <stdint.h>

#define GHF_RISK_MAX_ALPHA 256

/* The fit: gauss (no subordinator) or GIG(p, a, b); mu, gamma [d], sigma [d*d] */
typedef struct ghf_risk_law {
    int gauss, d;
    double p, a, b;
    const double *mu, *gamma, *sigma;
    /* the factor form (D not NULL; docs/math.md 9): w' Sigma w = |B'w|^2 + w'Dw, O(d R)
     * per portfolio, sigma not read; B [d*nf] */
    int nf;
    const double *B, *D;
} ghf_risk_law;

/* VaR/ES at the K levels alpha (K <= GHF_RISK_MAX_ALPHA) of the n portfolios
 * w [n][d] (global rows row0...) into var/es [n][K].  n_plan: the number of
 * portfolios of the whole request (it sizes the quadrature plan, so that the
 * values do not depend on how the portfolios are split).  Returns the worst
 * ghf_uni_status (EDOM > EACC > INF > OK) with the first global row holding
 * it in *bad_row (-1 when none), or -1 when out of memory. */
int ghf_risk_portfolios(const ghf_risk_law *law, int K, const double *alpha, size_t n_plan, const double *w,
                        int64_t n, int64_t row0, double *var, double *es, int64_t *bad_row);

/* The same under a mixture of Kc laws (full form; the proportions prop
 * [Kc]): the loss -w'X is a mixture of Kc univariate laws; VaR by root
 * finding on its cdf, ES by the components' partial expectations (risk.c).
 * Each portfolio on its own (no plan): the values depend on nothing else.
 * Returns as ghf_risk_portfolios. */
int ghf_risk_portfolios_mix(const ghf_risk_law *comp, const double *prop, int Kc, int K, const double *alpha,
                            const double *w, int64_t n, int64_t row0, double *var, double *es, int64_t *bad_row);

/* The factor form's w'Sigma w = |B'w|^2 + w'Dw, O(d nf) (B [d*nf] row-major,
 * D [d]); B'w into bw [nf] when bw is not NULL.  Shared with portopt.c. */
double ghf_factor_quad(int d, int nf, const double *B, const double *D, const double *w, double *bw);

/* 0 OK, 1 INF, 2 EACC, 3 EDOM: how bad a ghf_uni_status is */
int ghf_risk_severity(int status);

/* Kupiec's unconditional coverage test: x exceedances in n trials of a VaR
 * at level alpha (expected (1 - alpha) n).  LR = -2 log of
 * alpha^(n-x) (1-alpha)^x / ((1-x/n)^(n-x) (x/n)^x), 0 log 0 = 0, and its
 * chi2(1) upper tail p-value.  n = 0: NaN for both. */
void ghf_kupiec(int64_t n, int64_t x, double alpha, double *lr, double *p);

#endif
