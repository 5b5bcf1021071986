/* fit.h - what `ghfit fit` and `ghfit run` share: preparing a loaded shard
 * (global moments, centring), turning an EM result into an output record,
 * and the per-phase profile across ranks. */
#ifndef GHF_FIT_H
#define GHF_FIT_H

#include <mpi.h>
#include <stdint.h>

#include "em.h"
#include "h5io.h"
#include "se.h"

/* A shard ready for EM: centred by a robust location (the column medians of
 * a sample of rows chosen by global row index, so the same on every rank
 * count), with the global moments EM starts from. */
typedef struct ghf_data {
    int64_t n_global;
    int d;
    int64_t nrows;
    double *x;     /* [nrows*d] centred rows (owned by the shard it came from) */
    double *shift; /* [d] the location that was subtracted (data coordinates, after scaling) */
    double *mean;  /* [d] the global column means of the centred rows */
    double *cov;   /* [d*d] the global (biased) covariance */
    double *rmean, *rcov; /* [d], [d*d] the moments of the rows that are not gross
                             outliers (robust z-score > GHF_OUTLIER_Z in some column),
                             NULL when there are none */
    int64_t n_outliers;   /* rows left out of rmean, rcov */
    double outlier_z;     /* the largest robust z-score of a row (with n_outliers > 0) */
    char outlier_note[160]; /* that row: "row R (column j = v, z robust SDs from the median)" */
    double ll_gauss;      /* log-likelihood of N(mean, cov) in internal coordinates
                             (the Gaussian limit of every family); NaN if cov is singular */
    int scale_log2; /* the rows were multiplied by 2^scale_log2 before centring
                       (0 unless the data are near the limits of double) */
    const double *w; /* [nrows] observation weights (weighted EM; not owned), or NULL */
    double wsum;     /* the sum of the weights over all ranks (with w) */
} ghf_data;

/* --missing em: the same for rows with NaN entries (missing coordinates):
 * available-case means (the centring), the pairwise covariance (its diagonal
 * when not positive definite) for EM's start, ll_gauss NaN, no robust start. */
int  ghf_data_prepare_missing(MPI_Comm comm, ghf_shard *s, const double *w, const char *what, ghf_data *out,
                              char *err, size_t errlen);

/* The number of observations EM sees: the sum of the weights, or n_global. */
static inline double ghf_data_count(const ghf_data *g)
{
    return g->w ? g->wsum : (double)g->n_global;
}

/* robust z-score |x - median| / (1.4826 MAD) beyond which a row is an outlier
 * for the robust start */
#define GHF_OUTLIER_Z 10.0
/* robust z-score of the most extreme row above which a status that is not
 * converged names it (far beyond any heavy tail the families fit: a t row
 * with nu = 4 is at 10 robust SDs once in ~1e3 rows, 1e3 SDs once in ~1e11) */
#define GHF_EXTREME_Z 1e3

/* The moments and the Gaussian limit of g for EM's starts (sets the data_*
 * fields of o). */
void ghf_data_em_opts(const ghf_data *g, ghf_em_opts *o);

/* Parameters between data coordinates and the internal (scaled, centred)
 * coordinates EM works in.  to_data also returns to the |Sigma| = 1 gauge. */
void ghf_data_params_to_internal(const ghf_data *g, const ghf_params *in, ghf_params *out);
void ghf_data_params_to_data(const ghf_data *g, const ghf_params *in, ghf_params *out);

/* Collective.  Centres s->x in place.  Returns 0, or 2 with a message if the
 * data are unusable (fewer than d + 1 rows, a constant column, ...). */
/* ghf_data_prepare_weighted with at least min_rows rows instead of d + 1
 * (the factor form fits N < d: docs/math.md 9). */
int  ghf_data_prepare_rows(MPI_Comm comm, ghf_shard *s, const double *w, const char *what, int64_t min_rows,
                           ghf_data *out, char *err, size_t errlen);
int  ghf_data_prepare(MPI_Comm comm, ghf_shard *s, const char *what, ghf_data *out, char *err, size_t errlen);
/* The same for weighted EM: w[nrows] (NULL: unweighted) weighs the moments
 * EM starts from (and the Gaussian limit's log-likelihood); out->w = w. */
int  ghf_data_prepare_weighted(MPI_Comm comm, ghf_shard *s, const double *w, const char *what, ghf_data *out,
                               char *err, size_t errlen);
void ghf_data_free(ghf_data *g);
/* 1 if |x_j| <= zlim_j for every column (not an outlier) */
int ghf__row_kept(const double *x, const double *zlim, int d);

/* Profile phases, in output order. */
enum { GHF_PH_READ, GHF_PH_INIT, GHF_PH_ESTEP, GHF_PH_ALLREDUCE, GHF_PH_MSTEP, GHF_PH_WRITE, GHF_PH_TOTAL, GHF_NPHASES };
extern const char *const ghf_phase_names[GHF_NPHASES];

/* A finished fit, ready to be written by rank 0. */
typedef struct ghf_fit_out {
    char name[128];
    ghf_family family;
    int symmetric;     /* gamma held at 0 */
    int fix_p;         /* p held at p_fixed (families whose p is free) */
    double p_fixed;
    int64_t n_obs;
    int d;
    int sigma_r;       /* the dispersion's form: -1 full, 0 diag, R factors */
    ghf_em_result em;  /* parameters in internal coordinates; loglik and trace
                          in data coordinates after ghf_fit_out_finish */
    ghf_params outp;   /* the fitted parameters in data coordinates */
    double *mu;        /* [d] outp.mu */
    double *mean;      /* [d] E X in data coordinates */
    double *cov;       /* [d*d] Cov X */
    int moments_ok;
    char moments_note[256]; /* why (some) moments are NaN */
    double aic, bic;
    /* weighted EM (weights set): what the result file records about it */
    const char *weights;          /* the weights' spec ("FILE:DATASET" or "halflife H"), NULL: unweighted */
    double weight_sum, n_eff;     /* sum w and (sum w)^2 / sum w^2 */
    double loglik_unweighted;     /* sum log f(x_i) at the fitted parameters (data coordinates) */
    /* --missing em (missing set): rows with a missing entry, the fraction of
     * missing entries, rows by their number of missing entries [d + 1] */
    const char *missing;
    int64_t n_incomplete;
    double missing_fraction;
    const double *missing_counts;
    double phases[GHF_NPHASES];   /* this rank */
    double *all_phases;           /* rank 0: [n_ranks][GHF_NPHASES] */
    int n_ranks;
    int64_t n_dropped;
    int have_se;                  /* se holds standard errors (rank 0) */
    ghf_se se;
    /* a mixture (components >= 2; em.params is then a copy of component 0) */
    int components;
    ghf_em_mix mix;               /* internal coordinates */
    double *mx_buf;               /* data coordinates: prop [K], mu, gamma [K*d], sigma [K*d*d],
                                     pab [K*3], mean [K*d], cov [K*d*d] */
    char (*mx_notes)[256];        /* [K] */
    const char **mx_note;         /* [K] */
    double icl;
} ghf_fit_out;

/* Fill the derived fields of out from out->em and the data's shift (every rank). */
int  ghf_fit_out_finish(ghf_fit_out *out, const ghf_data *data);
/* Collective: standard errors of a finished fit (after ghf_fit_out_finish)
 * into out->se on rank 0, by `mode` (a ghf_se_mode; GHF_SE_OFF: nothing).
 * Their time is added to the total phase.  0, or 1 (out of memory: the
 * ranks agree) with a message. */
int  ghf_fit_out_se(MPI_Comm comm, ghf_fit_out *out, const ghf_data *data, int mode, int verbose, char *err,
                    size_t errlen);
/* Collective: gather every rank's phases to rank 0 (out->all_phases).  0,
 * or 1 on every rank when rank 0 cannot allocate them (agreed before the
 * gather; test hook GHFIT_TEST_FAIL=gather@0). */
int  ghf_fit_out_gather(MPI_Comm comm, ghf_fit_out *out);
/* A record pointing into out (valid while out lives). */
/* Free parameters of the dispersion (AIC/BIC): full d(d+1)/2 (r < 0),
 * else d r - r(r-1)/2 + d (B up to rotation, D). */
int ghf_disp_nparams(int d, int r);
void ghf_fit_out_record(const ghf_fit_out *out, const char *backend, ghf_fit_record *rec);
void ghf_fit_out_free(ghf_fit_out *out);

/* rank 0: print a finished fit: its law and the profile table */
void ghf_fit_record_print(const ghf_fit_record *r, int verbose_params);

#endif
