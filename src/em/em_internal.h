/* em_internal.h - the parts of the EM driver (private to src/em): the
 * context of one fit, the loop's state, and the named steps
 *   em.c           ghf_em_fit: the loop over E-steps and the steps below
 *   em_step.c      one E-step, one M-step, the plain EM step
 *   em_squarem.c   SQUAREM cycles: the extrapolated point and its acceptance
 *   em_converge.c  the convergence status, flat likelihoods, collapsing
 *                  fits, the rescue at the Gaussian limit
 *   em_start.c     starts, resumed and warm states, the Gaussian closed form
 *   em_nested.c    GH's nested NIG start and the end-of-fit check against it
 *   em_sample.c    the subsample start of a large data set */
#ifndef GHF_EM_INTERNAL_H
#define GHF_EM_INTERNAL_H

#include "em.h"
#include "mstep.h"

/* sqrt(ab) above which the fit is at the Gaussian boundary (CV of Y < 1e-4) */
#define GHF_OMEGA_MAX 1e8
/* squared coefficient of variation of Y of the near-Gaussian point of a family */
#define GHF_KAPPA_GAUSS 1e-8
/* below this squared CV of Y the fit has reached the Gaussian limit (kurtosis
 * within ~1e-6 of the normal law's) */
#define GHF_KAPPA_LIMIT 1e-6
/* pivot ratio of the correlation-scaled Cholesky factor of Sigma below which
 * Sigma counts as singular (rounding would break the factorisation near 1e-16) */
#define GHF_SIGMA_PIVOT_MIN 1e-13
/* Var[log Y] above which a fit whose log-likelihood keeps growing fast is
 * collapsing (the mixing law spreads over more than 10 e-folds) */
#define GHF_VARLOG_COLLAPSE 30.0
/* ... or whose squared CV exceeds this */
#define GHF_KAPPA_COLLAPSE 1e4
/* a log-likelihood gain per observation and iteration that EM never makes
 * for long on a bounded likelihood */
#define GHF_GAIN_COLLAPSE 0.1
/* margin (relative) for decisions between two log-likelihoods, far above
 * round-off, so that every rank count takes the same decision */
#define GHF_LL_MARGIN 1e-13
/* tolerance of GH's nested NIG start, on the log-likelihood change alone,
 * when the fit's own is tighter (N = 1e6, d = 10: the NIG log-likelihood is
 * then 1.4e-8 relative below the converged one; em_nested.c) */
#define GHF_NESTED_TOL 1e-8
/* the starts of a fit on at least GHF_SAMPLE_MIN_N rows race on a
 * subsample of about GHF_SAMPLE_ROWS of them (every k-th row; em_sample.c) */
#define GHF_SAMPLE_ROWS 50000
#define GHF_SAMPLE_MIN_N 200000
/* a GH fit that ends more than this many nested tolerances (relative: 1e-5)
 * above the nested NIG run's end needs no NIG continuation (em_nested.c) */
#define GHF_NESTED_MARGIN 1000.0

/* the status texts of the numerical limit and of the Gaussian limit (em.c) */
extern const char ghf__em_precision_status[];
extern const char ghf__em_gauss_limit_status[];
extern const char ghf__em_flat_status[];

typedef struct em_ctx {
    MPI_Comm comm;
    ghf_backend *be;
    const ghf_em_opts *o;
    ghf_model model; /* what is fitted (from o) */
    ghf_mstep_opts mo;
    int d;
    int len;
    double *stats;
    double *saved; /* a copy of stats while a rescue point is evaluated */
    ghf_derived g;
    int rank;
    /* where GH's nested NIG run stopped, when its tolerance was looser than
     * the fit's (nested_tol > 0; em_nested.c) */
    double nested_tol, nig_ll;
    ghf_em_state nig_st; /* its last cycle start (allocated for GH with p free) */
    /* the subsample the starts run on (em_sample.c), or NULL; owned unless
     * it is a nested run's parent's */
    ghf_backend *sample;
    int sample_owned;
    double *sample_x, *sample_w;
} em_ctx;

/* Where the loop is within a SQUAREM cycle. */
typedef enum {
    PH_CYCLE_START, /* plain step from theta_k; the resumable state */
    PH_SECOND_STEP, /* plain step from theta_{k+1}, then the extrapolation */
    PH_EXTRAPOLATED /* evaluate the extrapolated point theta' */
} em_phase;

/* What one step of the loop decided. */
typedef enum { EM_GO_ON, EM_DONE, EM_ERROR } em_next;

typedef struct em_loop {
    em_ctx *e;
    ghf_em_state st;
    ghf_params nx, th2, thx, thy, cyc_cur, cyc_prev, gauss;
    double sq_alpha; /* the SQUAREM step length of thx */
    char *err;       /* where a run-time error's message goes */
    size_t errlen;
    em_phase phase;
    int cyc_iter;
    double ll_th1; /* log-likelihood of theta_{k+1} within a cycle */
    int max_iter;
    int print;
    const char *lab;
    double t_it; /* start of the current iteration (for the log lines) */
    char pre[192]; /* the prefix of an iteration line (ghf__em_line_prefix) */
} em_loop;

int ghf__em_estep(em_ctx *e, const ghf_params *t, int stop_req, char *err, size_t errlen);
int ghf__em_estep_ok(const em_ctx *e);
int ghf__em_mstep(em_ctx *e, const ghf_params *cur, ghf_params *next, char *why, size_t whylen);
void ghf__em_finish(ghf_em_result *r, const ghf_params *t, double ll, int n_iter, const double *trace,
                   ghf_em_outcome oc, const char *status);
em_next ghf__em_mstep_from_cur(em_loop *L, ghf_em_result *r, double ll);
em_next ghf__em_step_plain(em_loop *L, ghf_em_result *r, int erc);
int ghf__em_near_gaussian(const em_ctx *e, ghf_params *t);
int ghf__em_start_state(em_ctx *e, ghf_em_state *st, int max_iter, ghf_em_result *r, char *err, size_t errlen);
void ghf__em_gaussian_fit(em_ctx *e, ghf_em_result *r);
int ghf__em_squarem_point(const ghf_params *t0, const ghf_params *t1, const ghf_params *t2, double fixed_p,
                         double alpha_in, ghf_params *out, double *alpha_out);
em_next ghf__em_step_extrapolated(em_loop *L, ghf_em_result *r, int erc);
double ghf__em_kappa_of(const ghf_params *t);
int ghf__em_collapsing(const em_ctx *e, const ghf_em_state *st, int k, double n_obs, char *why, size_t whylen);
const char *ghf__em_converged_status(const ghf_model *m, const ghf_params *t);
int ghf__em_flat(const ghf_em_state *st, int k, double tol);
int ghf__em_against_gaussian(em_loop *L, ghf_em_result *r, char *err, size_t errlen);
int ghf__em_sample_open(em_ctx *e, char *err, size_t errlen);
void ghf__em_sample_close(em_ctx *e);
int ghf__em_sample_judge(em_ctx *e, ghf_params *out, double *best, int *have, char *err, size_t errlen);
int ghf__em_nested_start(em_ctx *e, ghf_params *out, double *best, int *have, char *err, size_t errlen);
int ghf__em_against_nig(em_loop *L, ghf_em_result *r, char *err, size_t errlen);

/* The prefix of an iteration line: [time stamp] label. */
const char *ghf__em_line_prefix(em_loop *L);

/* 1 when t lies on a face (a = 0 or b = 0) of a family that lives inside the GIG domain */
int ghf__em_on_face(const ghf_model *m, const ghf_params *t);

#endif
