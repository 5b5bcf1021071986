/* model.h - the parameters of a normal variance-mean mixture and the
 * host-side quantities derived from them (every family: family/family.h). */
#ifndef GHF_MODEL_H
#define GHF_MODEL_H

#include <stdint.h>
#include "estep.h"
#include "family.h"

/* X | Y=y ~ N(mu + gamma y, y Sigma), Y ~ GIG(p, a, b) (ghfit's convention:
 * density of Y proportional to y^(p-1) exp(-(a y + b/y)/2)).  NIG is p = -1/2. */
typedef struct ghf_params {
    int d;
    double *mu;    /* [d] */
    double *gamma; /* [d] */
    double *sigma; /* [d*d], row-major, symmetric positive definite (see disp) */
    double p, a, b;
    /* The dispersion's form (--sigma; docs/math.md 9): GHF_DISP_FULL (the
     * default, zero: sigma holds it), or Sigma = B B' + D with B [d*nf]
     * row-major (nf factors; none for GHF_DISP_DIAG) and D [d] diagonal.  A
     * factor-form fit's EM state leaves sigma NULL (never d x d per
     * iteration); results carry B, D and sigma = B B' + D formed once. */
    int disp;
    int nf;
    double *B, *D;
} ghf_params;

enum { GHF_DISP_FULL = 0, GHF_DISP_DIAG = 1, GHF_DISP_FACTOR = 2 };

/* Parameters of the factor form: nf = 0 is diag; with_sigma also allocates
 * sigma [d*d].  0, or -1 (out of memory). */
int  ghf_params_alloc_factor(ghf_params *t, int d, int nf, int with_sigma);
/* sigma = B B' + D (t->sigma allocated) */
void ghf_params_factor_sigma(ghf_params *t);
/* log|B B' + D| by the matrix determinant lemma: sum log D + log|I + B' D^-1 B|;
 * NaN if D is not positive or I + B'D^-1B is not positive definite. */
double ghf_factor_logdet(int d, int nf, const double *B, const double *D);

int  ghf_params_alloc(ghf_params *t, int d);
void ghf_params_free(ghf_params *t);
void ghf_params_copy(ghf_params *dst, const ghf_params *src); /* same d */
/* 1 if every entry is finite */
int  ghf_params_finite(const ghf_params *t);

/* Lower Cholesky factor L of a symmetric positive definite d x d matrix S
 * (row-major; the lower triangle of S is read).  Returns 0, or -1 if S is not
 * positive definite. */
int  ghf_cholesky(int d, const double *S, double *L);

/* Quantities derived from the parameters for one E-step. */
typedef struct ghf_derived {
    int d;
    double *L;    /* [d*d] lower Cholesky factor of Sigma */
    double *Linv; /* [d*d] its inverse (lower) */
    double *w;    /* [d]   L^-1 gamma */
    double logdet; /* log|Sigma| */
    ghf_estep_consts c;
} ghf_derived;

int  ghf_derived_alloc(ghf_derived *g, int d);
void ghf_derived_free(ghf_derived *g);
/* 0 on success; -1 if Sigma is not positive definite or a constant is not finite. */
int  ghf_derive(const ghf_params *t, ghf_derived *g);

/* The E-step constants of t for a Sigma with log|Sigma| = logdet and
 * gamma' Sigma^-1 gamma = w2 (ghf_derive's for every form).  0, or -1 when
 * a constant is not finite or the posterior is improper. */
int  ghf_estep_consts_fill(const ghf_params *t, int d, double logdet, double w2, ghf_estep_consts *c);

/* 1 for the Gaussian (no mixing variable: p, a and b are NaN, Sigma is the covariance). */
int  ghf_params_gaussian(const ghf_params *t);

/* Moments of the fitted law: E X = mu + gamma E[Y], Cov X = E[Y] Sigma + Var[Y] gamma gamma^T.
 * Returns 0, or -1 with NaN in what does not exist (heavy tails: a Student
 * t with nu <= 2, ...) and the reason in why (may be NULL). */
int  ghf_params_moments(const ghf_params *t, double *mean, double *cov, char *why, size_t whylen);

/* Move along the scale orbit (mu, s Sigma, s gamma, p, s a, b / s) so that |Sigma| = 1.
 * The law of X does not change. */
void ghf_params_normalize(ghf_params *t, double logdet_sigma);

/* log-density of one point (slow path; tests and tools) */
double ghf_logpdf(const ghf_params *t, const double *x);

/* A K-component mixture of one family's laws (--components K; docs/math.md
 * 10, docs/output-schema.md "Mixtures"): f(x) = sum_k prop[k] f_k(x).  Each
 * component is a full-form ghf_params of dimension d in its own |Sigma| = 1
 * gauge; K = 1 is a single law. */
typedef struct ghf_mixture {
    int K, d;
    double *prop;     /* [K] mixing proportions, positive, sum 1 */
    ghf_params *comp; /* [K] */
} ghf_mixture;

/* K components of dimension d (full form).  0, or -1 (out of memory). */
int  ghf_mixture_alloc(ghf_mixture *m, int K, int d);
void ghf_mixture_free(ghf_mixture *m);
/* log f(x) by log-sum-exp over the components (slow path; tests and tools);
 * tau [K] (or NULL) receives the posterior probabilities pi_k f_k(x) / f(x). */
double ghf_mixture_logpdf(const ghf_mixture *m, const double *x, double *tau);

#endif
