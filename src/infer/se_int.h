/* se_int.h - the pieces of the standard-error computation (se.h) shared by
 * its files: the whitened parametrisation, the per-row pass over the data,
 * the structured part of the information, and the two solvers.
 *
 * Coordinates.  Everything is computed in a whitened frame at the fitted
 * point (mu0, gamma0, Sigma0 = L L^T):
 *     mu = mu0 + L m,   gamma = gamma0 + L g,   Sigma = L (I + E) L^T,
 * E symmetric with coordinates e_jk = E_jk (j >= k), and p, a, b as they are.
 * A row then enters the log-likelihood only through z = L^-1 (x - mu0) (and
 * w = L^-1 gamma0), and the information of (m, g, E) is that of (mu, gamma,
 * Sigma) with Sigma^-1 = I (docs/design.md, "Standard errors").  The full
 * parameter vector (all of them, fixed or free) is ordered
 *     [m (d) | g (d) | E lower triangle, row-major (kS) | p | a | b];
 * the "B-vector" of a row, the gradient of B = b + q with respect to
 * (m, E, b), is [-2 z | -pair(z z^T) | 1] (kB = d + kS + 1 entries), where
 * pair(Q)_jk = Q_jk + Q_kj (j > k) and Q_jj (j = k). */
#ifndef GHF_SE_INT_H
#define GHF_SE_INT_H

#include <mpi.h>
#include <stdint.h>

#include "gig.h"
#include "model.h"
#include "se.h"

/* index of Sigma entry (j, k), j >= k, in the lower triangle */
static inline int ghf__se_tri(int j, int k) { return j * (j + 1) / 2 + k; }
/* its inverse: (j, k) of lower-triangle index t */
static inline void ghf__se_tri_inv(int t, int *j, int *k)
{
    int r = 0;
    while ((r + 1) * (r + 2) / 2 <= t) r++;
    *j = r;
    *k = t - r * (r + 1) / 2;
}

/* The posterior of a row's mixing variable as the information uses it:
 * E[1/Y|x], E[Y|x], E[log Y|x] and the second derivatives of its
 * log-normaliser G(P, A, B), zero where the direction is fixed (so that a
 * moment the model does not need - E[Y|x] of a symmetric t, infinite -
 * cannot spoil the sums). */
typedef struct ghf__se_post {
    double u, v, l;
    double wbb, wpb, wab;  /* d2G/dB2, d2G/dPdB, d2G/dAdB */
    double hpp, hpa, haa;  /* d2G/dP2, d2G/dPdA, d2G/dA2 */
} ghf__se_post;

typedef struct ghf__se_plan ghf__se_plan;

typedef struct ghf__se_ctx {
    int d, kS, kB, kfull;     /* d(d+1)/2, d + kS + 1, 2d + kS + 3 */
    int ip, ia, ib;           /* indices of p, a, b in the full vector */
    int has_sub;              /* 0 for the Gaussian */
    int free_g, free_p, free_a, free_b;
    int a_moves;              /* A = a + w.w depends on a free parameter */
    int nfree;
    int *fidx;                /* [kfull] index among the free parameters, -1 if fixed */
    int *full_of;             /* [nfree] its inverse */
    int64_t n;                /* rows (global) */
    /* the fitted point (internal coordinates) */
    const ghf_params *th;
    ghf_derived der;          /* L, L^-1, w = L^-1 gamma, the E-step constants */
    double P, A, b;           /* posterior order, posterior a, prior b */
    ghf_gig_stats prior;      /* the prior GIG(p, a, b): log Z, E t(Y), Cov t(Y) */
    /* the sums of the pass (every rank after ghf__se_pass) */
    double s1, s2, s3;        /* sum E[1/Y|x], E[Y|x], E[log Y|x] */
    double spp, spa, saa;     /* sum of the posterior's d2 log Z / dP dP, dP dA, dA dA */
    double nbad;              /* rows whose posterior moments are not finite */
    double *m_u, *m_pb, *m_ab, *m_1; /* [kB] sums of B-vectors weighted by E[1/Y|x], d2G/dPdB, d2G/dAdB, 1 */
    double *hdiag;            /* [kB] the diagonal of the row part sum_i d2G/dB2_i g_i g_i^T */
    double *zbar, *zbar_u, *zu;      /* [d], [d], [d*d]: sum z, sum u z, sum u z z^T (from m_1, m_u) */
    double *vmu, *vga, *M;           /* [d], [d], [d*d]: N w - zbar_u, s2 w - zbar, and the matrix of the
                                        E-E terms -Zu + zbar w^T + w zbar^T - s2 w w^T + (N/2) I */
    double *rw;               /* [nrows] per-row weight d2G/dB2 (kept for the subset solver) */
    const double *x;          /* this rank's rows */
    int64_t nrows;
    int nthreads;
    ghf__se_plan *plan;       /* interpolation of the posterior in log B (se_plan.c), or NULL */
    int cg_iter;              /* iterations of the subset solver */
    /* progress lines (rank 0 of the group) */
    int is_root, verbose;
    const char *label;
    double t_start, t_last_print;
} ghf__se_ctx;

/* Allocates and fills the context for a fit (free parameters, whitening).
 * 0, or -1 (out of memory, Sigma not positive definite). */
int  ghf__se_ctx_init(ghf__se_ctx *c, const ghf_se_input *in);
void ghf__se_ctx_free(ghf__se_ctx *c);

/* After the pass: zbar, zbar_u, zu, vmu, vga and M from the sums. */
void ghf__se_ctx_finish(ghf__se_ctx *c);

/* The B-vector of a row into g[kB]. */
void ghf__se_bvec(const ghf__se_ctx *c, const double *z, double *g);

/* Collective: the interpolation plan of the rows' posterior (c->plan, or
 * NULL where exact evaluation is as cheap).  0. */
int  ghf__se_plan_build(MPI_Comm comm, ghf__se_ctx *c);
void ghf__se_plan_free(ghf__se_plan *p);
/* The posterior of a row with squared Mahalanobis distance q: 0, or 1 when
 * a needed quantity is not finite. */
int  ghf__se_post_eval(const ghf__se_ctx *c, double q, ghf__se_post *r);

/* Collective over comm: one pass over the rows.  Fills the sums of c (on
 * every rank) and, when heavy != NULL, adds sum_i d2G/dB2_i g_i g_i^T to
 * the lower triangle of heavy[kB*kB] (the result is complete on rank 0 of
 * comm only).  0, or -1 when a rank ran out of memory (agreed). */
int ghf__se_pass(MPI_Comm comm, ghf__se_ctx *c, double *heavy);

/* Collective: Y[kB x s] (column-major, leading dimension kB) = sum_i
 * d2G/dB2_i g_i (g_i^T X) for X[kB x s], summed over every rank (the
 * product with the row part of the information, for the subset solver).
 * 0, or -1 (out of memory, agreed). */
int ghf__se_heavy_apply(MPI_Comm comm, ghf__se_ctx *c, const double *X, int s, double *Y);

/* y[kfull] += H_struct x[kfull]: the Hessian of the log-likelihood less its
 * row part (everything but sum_i d2G/dB2_i g_i g_i^T), in full coordinates. */
void ghf__se_struct_apply(const ghf__se_ctx *c, const double *x, double *y, double *scratch /* [2 d*d] */);

/* The score (gradient of the log-likelihood) in full coordinates. */
void ghf__se_score(const ghf__se_ctx *c, double *g);

/* The gauge: the gradient of log|Sigma| (c) and the tangent of the scale
 * orbit (t), both in full coordinates; 0 for the Gaussian (no orbit). */
int  ghf__se_gauge(const ghf__se_ctx *c, double *cvec, double *tvec);

/* A column of whitened coordinates -> raw parameter coordinates (full
 * vectors, in place; scratch [2 d*d]). */
void ghf__se_to_raw(const ghf__se_ctx *c, double *v, double *scratch);

/* The subset solver (se_subset.c): the covariance of the functionals F
 * (columns of full whitened coordinates, kfull x s, column-major) of the
 * free parameters: Fs^T V Fs, V the gauge-fixed inverse information.
 * Collective.  0, or -1 with a reason (no convergence, not positive
 * definite, out of memory). */
int ghf__se_subset_solve(MPI_Comm comm, ghf__se_ctx *c, const double *F, int s, double *cov, char *why,
                         size_t whylen);

/* The factor form (se_factor.c; t->D set): the number of its free
 * coordinates (mu, gamma if free, B, D, the free ones of p, a, b), and the
 * covariance of the full form's free parameters that its gauge-fixed
 * inverse information implies, J V_f J', into Im (k x k, in: the full
 * form's information I at Sigma = B B' + D), from the full form's score
 * (full coordinates); the condition number and the Newton decrement.  0,
 * or -1 with why. */
int ghf__se_factor_nfree(const ghf__se_ctx *c, const ghf_params *t);
int ghf__se_factor_inverse(const ghf__se_ctx *c, const ghf_params *t, double *Im, const double *score, double *cond,
                           double *newton, char *why, size_t len);

/* Test hook: 1 if GHFIT_TEST_SE (comma-separated) names `flag`: "exact"
 * (no interpolation plan), "shared" (the threads share one matrix whatever
 * its size).  The results are the same to rounding; tests/se.sh checks it. */
int ghf__se_test_flag(const char *flag);

/* OpenBLAS threads for a stretch of serial BLAS/LAPACK work: sets n, returns the previous value. */
int ghf__se_blas_threads(int n);

#endif
