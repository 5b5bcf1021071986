/* uni1d.h - the law of one linear combination of a fitted normal variance-mean
 * mixture: cdf, survival function, quantiles, log-density, VaR and ES.
 *
 * L = m + g Y + s sqrt(Y) Z,  Z ~ N(0, 1) independent of Y, where Y is the
 * fit's subordinator:
 *   GIG(p, a, b), density proportional to y^(p-1) exp(-(a y + b/y)/2):
 *     gh / hyp / nig   a > 0, b > 0 (nig: p = -1/2)
 *     vg               b = 0 exactly, p > 0, a > 0 (Gamma subordinator)
 *     t                a = 0 exactly, p < 0, b > 0 (inverse Gamma, nu = -2p)
 *   gauss            no subordinator (Y = 1): L ~ N(m + g, s^2).
 * For a multivariate fit (mu, gamma, Sigma, GIG) and weights w, the loss
 * L = -w'X has m = -w'mu, g = -w'gamma, s = sqrt(w'Sigma w); a margin j has
 * m = mu_j, g = gamma_j, s = sqrt(Sigma_jj).  Everything that depends only on
 * the subordinator lives in a ghf_uni_mix, built once per fit and shared
 * (read-only, thread-safe) by every combination.
 *
 * Method (docs/design.md "Univariate laws of a fit"): given Y = y, L is
 * normal, so every quantity is a one-dimensional integral over t = log y of a
 * closed form times the subordinator density, integrated by GSL's adaptive
 * Gauss-Kronrod rule (QAG) on a range that provably holds all but e^-80 of the
 * integrand; the upper tail is integrated directly (no 1 - F); quantiles by a
 * safeguarded Newton iteration on log sf with a GSL Brent fallback inside a
 * bracket.  Accuracy against 40-digit mpmath references: see tests/test_uni1d.c.
 *
 * Every function returns a ghf_uni_status and never loops without bound.
 * The first ghf_uni_mix_init switches GSL's error handler off (process-wide),
 * so that GSL reports failures by status and never aborts.
 */
#ifndef GHF_LAW_UNI1D_H
#define GHF_LAW_UNI1D_H

#include <stddef.h>

typedef enum ghf_uni_status {
    GHF_UNI_OK = 0,
    GHF_UNI_EDOM = 1, /* a parameter or probability outside its domain; value NaN */
    GHF_UNI_INF = 2,  /* the value is +inf: ES of a tail with index <= 1
                         (t with nu <= 1, or nu <= 2 when the tail is on g's side) */
    GHF_UNI_EACC = 3  /* a quadrature or root search missed its tolerance;
                         the value is the best estimate found */
} ghf_uni_status;

const char *ghf_uni_status_str(int status);

/* The subordinator of one fit, with what every combination reuses. */
typedef struct ghf_uni_mix {
    int gauss;          /* 1: Y = 1 */
    double p, a, b;     /* GIG parameters (unused when gauss) */
    /* derived (ghf_uni_mix_init) */
    double t0;          /* mode of the density of t = log Y */
    double R, A0, B0;   /* R = sqrt(p^2 + ab), A0 = a e^t0 = R + p, B0 = b e^-t0 = R - p */
    double lnc;         /* log of int exp(G(v)) dv, v = t - t0 (the normaliser) */
    double lnz;         /* log Z(p, a, b) (kernels/gig.h) */
    double vlo0, vhi0;  /* integration range in v for probabilities (the density of v) */
    double vlo, vhi;    /* ... for the mean excess (also the tilts e^{t/2}, e^t) */
    double ysc, sy;     /* e^t0 (the scale of Y) and e^{t0/2} */
} ghf_uni_mix;

/* gauss = 1 ignores p, a, b.  GHF_UNI_EDOM outside the domain above. */
int ghf_uni_mix_init(ghf_uni_mix *mx, int gauss, double p, double a, double b);

/* The log-density of v = log Y - t0 (its mass lies in [vlo0, vhi0] but for
 * e^-80): what `ghfit gof` integrates its radial law against.  Not gauss. */
double ghf_uni_mix_logdens(const ghf_uni_mix *mx, double v);

/* One combination: L = m + g Y + s sqrt(Y) Z.  s > 0; s = 0 is accepted only
 * with g = 0 (the point mass at m, or m + g for gauss: what w = 0 gives). */
typedef struct ghf_uni_law {
    const ghf_uni_mix *mix;
    double m, g, s;
} ghf_uni_law;

int ghf_uni_logpdf(const ghf_uni_law *L, double x, double *out);
int ghf_uni_cdf(const ghf_uni_law *L, double x, double *out); /* P(L <= x) */
int ghf_uni_sf(const ghf_uni_law *L, double x, double *out);  /* P(L > x), computed directly */
/* x with P(L <= x) = prob (accurate for prob near 0 and near 1). */
int ghf_uni_quantile(const ghf_uni_law *L, double prob, double *out);
/* x with P(L > x) = q, for upper-tail probabilities q that 1 - q cannot hold. */
int ghf_uni_isf(const ghf_uni_law *L, double q, double *out);
/* VaR_alpha = the alpha-quantile of L and ES_alpha = E[L | L >= VaR_alpha].
 * alpha in (0, 1).  ES = +inf with GHF_UNI_INF when the tail has no mean
 * (VaR is still set). */
int ghf_uni_var_es(const ghf_uni_law *L, double alpha, double *var, double *es);

/* The mean excess E[(L - x)^+] (the partial expectation E[L 1{L > x}] is
 * x P(L > x) + this): one quadrature; +inf with GHF_UNI_INF when the tail
 * has no mean.  What the ES of a mixture of such laws sums (risk.c). */
int ghf_uni_mean_excess(const ghf_uni_law *L, double x, double *out);

/* A mixture of K laws L[k] with proportions prop[k] (summing to 1): its cdf
 * (upper = 0) or survival function (upper = 1) at x, and its quantile at
 * prob (GSL's Brent between the smallest and the largest component
 * quantile, on the survival function above the median; K equal laws give
 * their quantile).  The worst status of the pieces. */
int ghf_uni_mixture_prob(const ghf_uni_law *L, const double *prop, int K, double x, int upper, double *out);
int ghf_uni_mixture_quantile(const ghf_uni_law *L, const double *prop, int K, double prob, double *out);

/* VaR and ES (as ghf_uni_var_es, s > 0) with their partial derivatives
 * dvar[3], des[3] in (m, g, s) (uni1d.c; docs/math.md "Gradients of VaR and
 * ES").  u_hint (may be NULL): in, a start for the standardised quantile
 * (VaR - m)/s (NaN: none); out, that quantile (a start for a nearby law). */
int ghf_uni_var_es_grad(const ghf_uni_law *L, double alpha, double *u_hint, double *var, double *es,
                        double dvar[3], double des[3]);

/* ---------------------------------------------------------------------------
 * Many combinations of one fit.  A plan holds the alphas and, when it is made
 * for at least 500 combinations (n_hint), per alpha a Chebyshev table of the
 * standardised quantile as a function of g/s: only a starting point, every
 * result is then solved to full accuracy on its own, so that a combination
 * costs about two quadratures per alpha instead of ten.  A result depends only
 * on the plan (mix, alphas, whether it has tables) and its own (m, g, s),
 * never on the order or the number of threads; ranks that share a batch
 * should pass the same n_hint (the global count) to get identical bits.
 * -------------------------------------------------------------------------*/
typedef struct ghf_uni_plan ghf_uni_plan;

/* NULL on bad input (alpha outside (0, 1), K < 1) or no memory. */
ghf_uni_plan *ghf_uni_plan_new(const ghf_uni_mix *mx, int K, const double *alpha, size_t n_hint);
void ghf_uni_plan_free(ghf_uni_plan *pl);
/* var[K], es[K], status[K] for one combination; thread-safe. */
void ghf_uni_plan_eval(const ghf_uni_plan *pl, double m, double g, double s,
                       double *var, double *es, int *status);
/* n combinations (m[i], g[i], s[i]); outputs [n][K] row-major; a plan with
 * n_hint = n, then OpenMP over combinations.  Returns the worst status (EDOM > INF > EACC > OK in the
 * sense: any EDOM -> EDOM, else any EACC -> EACC, else any INF -> INF). */
int ghf_uni_batch(const ghf_uni_mix *mx, size_t n, const double *m, const double *g,
                  const double *s, int K, const double *alpha, double *var, double *es,
                  int *status);

/* internal: quadratures and integrand evaluations done by ghf_uni_batch so
 * far in this process (benchmarks). */
void ghf__uni_counts(long *nquad, long *neval);

#endif /* GHF_LAW_UNI1D_H */
