/* gof.h - goodness of fit of a fitted law (`ghfit gof`): the statistics of
 * probability-integral transforms (Kolmogorov-Smirnov, Anderson-Darling,
 * Cramer-von Mises) with asymptotic p-values, PITs of sorted samples (exact,
 * or interpolated between exact knots for large samples), and the law of the
 * radial statistic q = (x - mu)' Sigma^-1 (x - mu) of a fitted mixture.
 *
 * The radial law: given Y = y, X - mu - gamma y ~ N(0, y Sigma), so q / y is
 * a noncentral chi-square with d degrees of freedom and noncentrality
 * y delta2, delta2 = gamma' Sigma^-1 gamma; F_q(t) = E_Y[F_ncx2(t/y; d, y delta2)]
 * (gauss: Y = 1 and gamma = 0, q ~ chi2(d)).  The expectation is a GSL QAG
 * integral over v = log Y - t0 against the subordinator's density
 * (ghf_uni_mix_logdens); the noncentral chi-square cdf is its Poisson mixture
 * of central ones, summed over the Poisson indices within
 * mean +- (12 sqrt(mean) + 30) (omitted mass below 1e-25), and 0 or 1 outright
 * beyond Birge's exponential bounds at e^-60; subordinator densities below
 * 1e-25 are dropped from the integral.
 *
 * The p-values are asymptotic and take the parameters as known: a fit's own
 * data give larger p-values than uniform (the fit was tuned to them). */
#ifndef GHF_LAW_GOF_H
#define GHF_LAW_GOF_H

#include <stddef.h>

#include "uni1d.h"
#include "xsum.h"

typedef struct ghf_gof_stat {
    double ks, ad, cvm;       /* D_n, A^2, W^2 */
    double ks_p, ad_p, cvm_p; /* asymptotic upper-tail probabilities */
} ghf_gof_stat;

/* u sorted ascending, 1 <= n <= GHF_GOF_MAX_N; values are clamped to [1e-300, 1 - 1e-16]
 * inside the logarithms of A^2.  With u_(k) the k-th smallest (k = 1..n):
 *   D   = max_k max(k/n - u_(k), u_(k) - (k-1)/n),
 *   A^2 = -n - (1/n) sum_k [(2k-1) log u_(k) + (2n-2k+1) log(1 - u_(k))],
 *   W^2 = 1/(12n) + sum_k (u_(k) - (2k-1)/(2n))^2,
 * every term a function of (k, u_(k)) alone, and the sums exact
 * (kernels/xsum.h): the same bits whichever pieces of the order they are
 * formed in (ghf_gof_stats_part over the ranks' segments of a distributed
 * sort, src/pipeline/gofdist.h). */
void ghf_gof_stats(const double *u, size_t n, ghf_gof_stat *s);

/* The statistics in pieces: a part holds the largest KS term and the exact
 * sums of the A^2 and W^2 terms of the order statistics seen so far, one
 * pair of accumulators per block of GHF_GOF_XBLOCK order statistics (an
 * accumulator's int64 bins take at most 2^31 additions, and A^2 adds two
 * terms per order statistic); ghf_gof_stats_finish joins the complete
 * blocks in block order.  Hence at most GHF_GOF_MAX_N = 2^35 values. */
#define GHF_GOF_XBLOCK ((size_t)1 << 29)
#define GHF_GOF_XBLOCKS 64
#define GHF_GOF_MAX_N ((size_t)GHF_GOF_XBLOCKS * GHF_GOF_XBLOCK)
typedef struct ghf_gof_part {
    double ks;
    ghf_xsum ad[GHF_GOF_XBLOCKS], cvm[GHF_GOF_XBLOCKS];
} ghf_gof_part;
/* the blocks that n values take (1 .. GHF_GOF_XBLOCKS) */
int ghf_gof_xblocks(size_t n);
void ghf_gof_part_init(ghf_gof_part *p);
/* Add the terms of u[0..m), the order statistics off+1 .. off+m of n. */
void ghf_gof_stats_part(const double *u, size_t m, size_t off, size_t n, ghf_gof_part *p);
/* The statistics and p-values of a part that has seen all n (p is consumed;
 * with more than one rank, after its blocks were summed over the ranks). */
void ghf_gof_stats_finish(ghf_gof_part *p, size_t n, ghf_gof_stat *s);
/* P(sqrt(n) D_n > ...) by Kolmogorov's limit with Stephens' correction
 * lambda = (sqrt(n) + 0.12 + 0.11/sqrt(n)) D. */
double ghf_gof_ks_pvalue(double D, size_t n);
/* 1 - the limit cdf of A^2 (Marsaglia & Marsaglia 2004, "adinf"). */
double ghf_gof_ad_pvalue(double A2);
/* 1 - the limit cdf of W^2 (Anderson & Darling 1952, Bessel K_{1/4} series). */
double ghf_gof_cvm_pvalue(double W2);

/* A cdf: 0 on success (GHF_UNI_EACC is accepted as a value), else nonzero. */
typedef int (*ghf_gof_cdf_fn)(const void *ctx, double x, double *u);

/* u[i] = F(xs[i]) for xs sorted ascending.  n <= nexact: every value exact.
 * Otherwise exact at nknots order statistics (ranks spread evenly, first and
 * last included, and the 32 extreme ones at each end) and Steffen's monotone
 * cubic through the probits Phi^-1(F) in between; *maxerr is the largest |interpolated - exact| at the
 * middle sample point of up to 256 knot intervals that hold sample points
 * (0 when all are exact).  OpenMP over the knots.  0, or nonzero
 * when a cdf call failed or memory ran out. */
int ghf_gof_pit_sorted(const double *xs, size_t n, ghf_gof_cdf_fn f, const void *ctx, size_t nexact,
                       size_t nknots, double *u, double *maxerr);

/* The pieces of ghf_gof_pit_sorted, shared with the distributed PITs of
 * src/pipeline/gofdist.c (each piece of the math exists once):
 * ghf_gof_knotted: 1 when n values take knots and interpolation.
 * ghf_gof_knot_cand: the candidate knot ranks (0-based order statistics of
 *   n), nknots + 64 of them ascending (repeats possible) into rk.
 * ghf_gof_knot_dedupe: keep the candidates of strictly increasing value
 *   (kx[i] the value at rk[i]; ties keep the first rank); compacts rk and kx,
 *   returns how many are left (fewer than 3: every value is computed exactly).
 * ghf_gof_pit_exact: u[i] = F(xs[i]) (OpenMP); nonzero when a cdf call failed.
 * ghf_gof_interp_*: Steffen's monotone cubic through (kx, Phi^-1(ku)) (init
 *   turns ku into probits in place and keeps pointers to both).
 * ghf_gof_err_ranks: the ranks (into pos, up to GHF_GOF_ERR_POINTS) of the
 *   middle sample point of up to that many knot intervals that hold sample
 *   points; ghf_gof_interp_err: the largest |interpolated - exact| at the
 *   values xm of those ranks. */
#define GHF_GOF_ERR_POINTS 256
typedef struct ghf_gof_interp {
    void *ip;            /* gsl_interp */
    const double *kx, *pk;
    size_t m;
} ghf_gof_interp;
int    ghf_gof_knotted(size_t n, size_t nexact, size_t nknots);
size_t ghf_gof_knot_cand(size_t n, size_t nknots, size_t *rk);
size_t ghf_gof_knot_dedupe(size_t *rk, double *kx, size_t m);
int    ghf_gof_pit_exact(const double *xs, size_t n, ghf_gof_cdf_fn f, const void *ctx, double *u);
int    ghf_gof_interp_init(ghf_gof_interp *I, const double *kx, double *ku, size_t m);
void   ghf_gof_interp_eval(const ghf_gof_interp *I, const double *xs, size_t n, double *u);
void   ghf_gof_interp_free(ghf_gof_interp *I);
size_t ghf_gof_err_ranks(const size_t *rk, size_t m, size_t *pos);
int    ghf_gof_interp_err(const ghf_gof_interp *I, ghf_gof_cdf_fn f, const void *ctx, const double *xm, size_t nc,
                          double *maxerr);

/* A margin's cdf: a ghf_gof_cdf_fn with ctx a ghf_uni_law. */
int ghf_gof_uni_cdf(const void *ctx, double x, double *u);
/* A margin of a mixture: K univariate laws and their proportions. */
typedef struct ghf_gof_unimix {
    int K;
    const double *prop;
    const ghf_uni_law *L; /* [K] */
} ghf_gof_unimix;
/* Its cdf: a ghf_gof_cdf_fn with ctx a ghf_gof_unimix. */
int ghf_gof_unimix_cdf(const void *ctx, double x, double *u);
/* QQ tables: the sample quantile at prob of n sorted values, R's type 7
 * (h = (n - 1) prob, linear between order statistics lo = floor(h) and
 * lo + 1): ghf_gof_qq_lo gives lo (n - 1 at the top), ghf_gof_qq_value the
 * quantile from the values at lo and lo + 1 (vnext unused at the top). */
size_t ghf_gof_qq_lo(size_t n, double prob);
double ghf_gof_qq_value(size_t n, double prob, double vlo, double vnext);
/* The model quantile at (k + 0.5)/Q (radial 1: ctx a ghf_radial_law; 2: a
 * ghf_gof_unimix; 0: a ghf_uni_law); GHF_UNI_OK or the status of the quantile. */
int ghf_gof_model_quantile(const void *ctx, int radial, int Q, int k, double *q);

/* The noncentral chi-square cdf P(chi2(k, lambda) <= x), k > 0, lambda >= 0. */
double ghf_ncx2_cdf(double x, double k, double lambda);

typedef struct ghf_radial_law {
    const ghf_uni_mix *mix; /* gauss: Y = 1 */
    int d;
    double delta2;          /* gamma' Sigma^-1 gamma (0 for gauss) */
} ghf_radial_law;

/* P(q <= t); a ghf_gof_cdf_fn with ctx a ghf_radial_law. */
int ghf_radial_cdf(const void *ctx, double t, double *out);
/* t with P(q <= t) = prob in (0, 1) (Brent on the cdf). */
int ghf_radial_quantile(const ghf_radial_law *R, double prob, double *out);


/* ---------------------------------------------------------------------------
 * The whole check of one fit on one sample (rank 0 of `ghfit gof`).
 * -------------------------------------------------------------------------*/
typedef struct ghf_gof_input {
    int d, gauss;                       /* gauss: Y = 1, gamma taken as 0 */
    const double *mu, *gamma, *sigma;   /* [d], [d], [d][d] */
    double p, a, b;
    const double *x;                    /* [n][d] row-major, finite */
    size_t n;
    int Q;                              /* QQ probabilities (i - 0.5)/Q, i = 1..Q (0: no QQ table) */
    size_t nexact, nknots;              /* ghf_gof_pit_sorted */
    int want_pit;                       /* keep the PITs in row order */
    void (*progress)(const char *what, int done, int total); /* or NULL */
    void (*tick)(void *);               /* called after each margin (a job's heartbeat), or NULL */
    void *tick_arg;
    /* A mixture fit (K >= 2; 0 or 1: the single law above): the proportions
     * [K] and component k's cmu[k], cgamma[k] [d], csigma[k] [d][d] and
     * cp[k], ca[k], cb[k].  Its margins are mixtures of univariate laws
     * (the PITs go through the mixture cdf); the radial statistic has no
     * single mu and Sigma: its statistics are NaN (ghf_gof_compute_dist). */
    struct ghf_gof_mix {
        int K;
        const double *prop;
        const double *const *cmu, *const *cgamma, *const *csigma;
        const double *cp, *ca, *cb;
    } mix;
} ghf_gof_input;

typedef struct ghf_gof_result {
    double *ks, *ad, *cvm, *ks_p, *ad_p, *cvm_p; /* [d] */
    double *qq;                         /* [d][Q][2]: (model quantile, sample quantile) */
    double *pit;                        /* [n][d] or NULL */
    ghf_gof_stat radial;
    double *rqq;                        /* [Q][2] */
    double *rpit;                       /* [n] or NULL */
    double delta2;                      /* gamma' Sigma^-1 gamma */
    double pit_err;                     /* largest interpolation error seen (0: all exact) */
    int exact;                          /* 1: every PIT exact */
    int n_eacc;                         /* quantiles that missed their tolerance */
} ghf_gof_result;

/* q[i] = (x_i - mu)' Sigma^-1 (x_i - mu) of the n rows x (row-major, in->d
 * columns) and delta2 = gamma' Sigma^-1 gamma; 0, 1 (out of memory) or 2
 * (Sigma not positive definite). */
int ghf_gof_radial_q(const ghf_gof_input *in, const double *x, size_t n, double *q, double *delta2);

/* 0; 2 with a message (Sigma not positive definite, an invalid subordinator);
 * 1 out of memory or a failed cdf.  On failure nothing is left to free. */
int  ghf_gof_compute(const ghf_gof_input *in, ghf_gof_result *out, char *err, size_t errlen);
void ghf_gof_result_free(ghf_gof_result *r);
/* The arrays of a result for in (pit and rpit when in->want_pit), exact = 1;
 * 0, or 1 out of memory (then ghf_gof_result_free frees what was got). */
int  ghf_gof_result_alloc(const ghf_gof_input *in, ghf_gof_result *r);

#endif /* GHF_LAW_GOF_H */
