/* em.h - the distributed EM driver.
 *
 * Every rank runs the same loop: the backend's collective E-step turns the
 * current parameters into globally summed statistics (and the
 * log-likelihood of those parameters, from the same pass), and every rank
 * computes the same M-step from the same reduced numbers, so the ranks never
 * disagree on parameters, convergence or when to stop. */
#ifndef GHF_EM_H
#define GHF_EM_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "model.h"

#define GHF_DEFAULT_TOL 1e-10
#define GHF_DEFAULT_MAX_ITER 5000
#define GHF_DEFAULT_STARTS 4
#define GHF_DEFAULT_START_ITERS 5

/* Resumable state: the loop is about to run the E-step at theta_iter. */
typedef struct ghf_em_state {
    int iter;        /* number of M-steps taken: cur = theta_iter */
    ghf_params cur;  /* theta_iter */
    ghf_params prev; /* theta_{iter-1}; meaningful when iter > 0 */
    double *trace;   /* log-likelihoods of theta_0 .. theta_{iter-1} */
    int trace_cap;
} ghf_em_state;

int  ghf_em_state_alloc(ghf_em_state *s, int d, int max_iter);
void ghf_em_state_free(ghf_em_state *s);

/* Rows with missing coordinates (--missing em; src/em/em_missing.c): a
 * rank's rows that have NaN entries (and at least one finite one), grouped
 * by missingness pattern.  x (nrows*d, NaN: missing) and w (weights, or
 * NULL) must outlive the set.  NULL: out of memory. */
typedef struct ghf_missing ghf_missing;
ghf_missing *ghf_missing_create(const double *x, const double *w, int64_t nrows, int d);
void ghf_missing_free(ghf_missing *m);
int64_t ghf_missing_rows(const ghf_missing *m);
/* Tests: scalar = 1 sends every row through the per-row scalar path (the
 * one d > GHF_CPU_SMALL_D takes) instead of the block kernels. */
void ghf_missing_tune(ghf_missing *m, int scalar);
/* The patterns of m (the factor form's E-step reads them, em_factor.c):
 * their number (0 for m NULL), and pattern k: its rows in pattern order
 * (x, count rows of d columns; w their weights or NULL), its observed and
 * missing coordinates (io[no], im[nm]). */
int ghf_missing_npat(const ghf_missing *m);
void ghf_missing_pattern(const ghf_missing *m, int k, const double **x, const double **w, int64_t *count, int *no,
                         const int **io, int *nm, const int **im);
/* Collective: adds the rows' statistics at t (the marginal law of each row's
 * observed coordinates; the conditional moments of the missing ones given Y
 * and the observed ones; weighted by w when weighted is set) to stats
 * (layout kernels/estep.h).  m may be NULL on a rank without such rows.
 * Returns 0, or 1 with a message. */
int ghf_missing_estep(MPI_Comm comm, const ghf_missing *m, const ghf_params *t, int weighted, double *stats,
                      char *err, size_t errlen);

typedef struct ghf_em_opts {
    ghf_family family;
    int max_iter;
    double tol;
    uint64_t seed;
    int n_starts;    /* GH subordinator starts (moment init); 1 = the NIG-like start only */
    int start_iters; /* EM iterations per start before choosing */
    int fix_p;       /* keep p fixed at p_fixed (families whose p is free) */
    double p_fixed;
    int symmetric;   /* gamma = 0 */
    int quiet;       /* rank 0 prints a line per iteration unless quiet */
    int accel;       /* 1: SQUAREM extrapolation (default), 0: plain EM */
    int no_nested;   /* GH: do not add the NIG fit to the starts (see em.c) */
    int nested_run;  /* internal: this fit is such a start (no end-of-fit comparisons) */
    int ll_stop;     /* internal: converged when the log-likelihood changes by less than tol,
                        whatever the parameters do (GH's nested NIG start, em_nested.c) */
    const char *label; /* prefix of the per-iteration lines (sweeps) */
    int log_time;      /* the per-iteration lines start with a UTC time stamp (ISO 8601, ms) */
    /* Moments of the (centred) data, for the moment initialisation
     * (ghf_data_em_opts sets them). */
    const double *data_mean;  /* [d] */
    const double *data_cov;   /* [d*d] */
    const double *data_rmean; /* [d] moments without gross outliers, or NULL */
    const double *data_rcov;  /* [d*d] */
    double ll_gauss;          /* log-likelihood of N(data_mean, data_cov); NaN: unknown */
    /* With gross outliers (data_rmean set): the largest robust z-score of a
     * row, and a note naming that row for the statuses it causes (or NULL) */
    double data_outlier_z;
    const char *outlier_note;
    /* Rows with missing coordinates, added to every E-step (--missing em;
     * set on every rank or on none), or NULL. */
    const ghf_missing *missing;
    int has_missing; /* 1 on every rank when some rank has such rows */
    /* The backend's rows on the host (ghf_data_em_opts sets them; rows may
     * be NULL when nrows is 0): with enough rows the starts run on a
     * subsample of them (em_sample.c).  has_rows 0: no subsample start. */
    const double *rows;
    int64_t nrows;
    int has_rows;
    /* internal: the subsample backend of the fit a nested run belongs to */
    ghf_backend *sample_be;
    /* Start here instead of the moment initialisation (warm start), or NULL. */
    const ghf_params *init;
    /* Continue from a saved state (checkpoint), or NULL. */
    const ghf_em_state *resume;
    /* Stop requests (set from a signal handler); may be NULL. */
    volatile sig_atomic_t *stop_flag;
    /* Called on every rank at the top of each iteration (stopping = 0), and
     * once more when the ranks agreed to stop on a request (stopping = 1).
     * Returns 0, or non-zero to abort the fit with a run-time error. */
    int (*on_state)(void *ctx, const ghf_em_state *st, int stopping);
    void *on_state_ctx;
    /* Called before every E-step, starts and nested runs included (a
     * heartbeat for ranks that wait on this fit), or NULL. */
    void (*beat)(void *arg);
    void *beat_arg;
} ghf_em_opts;

void ghf_em_opts_defaults(ghf_em_opts *o);

typedef enum {
    GHF_EM_CONVERGED = 0,
    GHF_EM_MAX_ITER = 1,
    GHF_EM_BOUNDARY = 2,
    GHF_EM_INTERRUPTED = 3, /* stopped on a signal; the state was handed to on_state */
    GHF_EM_FAILED = 4
} ghf_em_outcome;

typedef struct ghf_em_result {
    ghf_params params; /* the returned parameters (finite), centred coordinates */
    double loglik;     /* log-likelihood of params */
    int n_iter;
    int converged;
    ghf_em_outcome outcome;
    char status[320];
    double *trace;     /* n_iter + 1 values */
    int n_trace;
    int n_decrease;    /* iterations whose log-likelihood fell by more than round-off */
    int n_estep;       /* E-steps run (plain EM: n_iter + 1) */
    int n_accel_accepted, n_accel_rejected; /* SQUAREM extrapolations */
    int n_gig_kept;    /* M-steps that kept the subordinator (its solve did not improve it) */
    double t_init, t_estep, t_allreduce, t_mstep, t_total;
} ghf_em_result;

void ghf_em_result_free(ghf_em_result *r);

/* Collective.  Returns 0 (see r->outcome), or 1 on a run-time error (err). */
int ghf_em_fit(MPI_Comm comm, ghf_backend *be, int d, const ghf_em_opts *o, ghf_em_result *r,
               char *err, size_t errlen);

/* Collective: the fit with Sigma = B B' + D, nf factors (0: diagonal),
 * on the rank's rows x [nrows*d] (centred; weights w or NULL), without a
 * backend (src/em/em_factor.c; docs/math.md 9).  Same options and result
 * as ghf_em_fit (o->data_cov is needed for the start; checkpoints,
 * nested starts are not used; with o->has_missing, x holds the rank's
 * complete rows and o->missing the rows with missing coordinates:
 * math.md 9.4); r->params has the factor form with sigma = B B' + D formed once at the end. */
int ghf_em_fit_factor(MPI_Comm comm, const double *x, const double *w, int64_t nrows, int d, int nf,
                      const ghf_em_opts *o, ghf_em_result *r, char *err, size_t errlen);
/* Collective: the unweighted log-likelihood of a factor-form t on the
 * rank's rows (one factor E-step; with has_missing, miss's rows too: the
 * marginal log-density of their observed coordinates).  0, -1 (t
 * unusable), or 1 with a message. */
int ghf_em_factor_loglik(MPI_Comm comm, const double *x, int64_t nrows, const ghf_missing *miss, int has_missing,
                         const ghf_params *t, double *ll, char *err, size_t errlen);

/* A K-component mixture fit (--components K, K >= 2; src/em/em_mixture.c;
 * docs/math.md 10): the chosen start's mixture (internal coordinates,
 * components ordered by decreasing proportion, ties by the first coordinate
 * of the mean), sum_i w_i log tau_{i,c(i)} at it (ICL), and every start's
 * final log-likelihood (NaN: collapsed), iterations and convergence. */
typedef struct ghf_em_mix {
    ghf_mixture m;
    double map_ll;
    int best;
    int n_starts;
    double *start_ll;
    int *start_iter, *start_conv;
} ghf_em_mix;
void ghf_em_mix_free(ghf_em_mix *mx);

/* Collective: EM for a K-component mixture of o->family on the rank's rows
 * x [nrows*d] (centred; weights w or NULL), o->n_starts k-means++ starts
 * seeded from o->seed (o->data_cov scales the distances), without a
 * backend.  r receives the common result (loglik, trace, status, outcome;
 * r->params a copy of component 0); mx the mixture.  Every start collapsed
 * (a component with fewer than d + 1 effective rows, or a Sigma that is not
 * positive definite): r->outcome GHF_EM_FAILED, status "failed: ...".
 * Returns 0, or 1 on a run-time error (err). */
int ghf_em_fit_mixture(MPI_Comm comm, const double *x, const double *w, int64_t nrows, int d, int K,
                       const ghf_em_opts *o, ghf_em_result *r, ghf_em_mix *mx, char *err, size_t errlen);
/* Collective: the unweighted log-likelihood of the mixture m (centred
 * coordinates) on the rank's rows.  0 (NaN where a row's is not finite,
 * or -1 if a Sigma is not positive definite), or 1 with a message. */
int ghf_em_mixture_loglik(MPI_Comm comm, const double *x, int64_t nrows, const ghf_mixture *m, ghf_family family,
                          double *ll, char *err, size_t errlen);

/* Collective: the log-likelihood of t (centred coordinates) by one E-step
 * of be, with the backend's observation weights switched off for the call
 * (the unweighted log-likelihood of a weighted fit).  0, -1 if Sigma is not
 * positive definite (every rank agrees), or 1 with a message. */
int ghf_em_loglik_unweighted(MPI_Comm comm, ghf_backend *be, const ghf_missing *miss, int has_missing,
                             const ghf_params *t, double *ll, char *err, size_t errlen);

/* Largest relative change between two parameter sets (the convergence test). */
double ghf_param_change(const ghf_params *a, const ghf_params *b);

#endif
