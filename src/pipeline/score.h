/* score.h - using a fitted law: `ghfit eval` (per-row log-density,
 * Mahalanobis distance and posterior moments of a data set under a fit of a
 * result file) and `ghfit sample` (draws from a fit). */
#ifndef GHF_SCORE_H
#define GHF_SCORE_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "h5io.h"
#include "iocheck.h"
#include "model.h"

/* "R.h5[:/fits/NAME]" split into the file and the fit's name ("" when none).
 * 0, or 2 with a message naming --model. */
int ghf_model_ref_parse(const char *ref, char *file, size_t file_len, char *name, size_t name_len, char *err,
                        size_t errlen);

/* Collective: rank 0 reads the fit (ghf_h5_read_fit_any: a single law or a
 * mixture), every rank gets it and its family; a failed fit (non-finite
 * parameters) or an unknown family is status 2; callers that need a single
 * law refuse law->n_components >= 2 themselves.  On success free *law with ghf_fit_law_free. */
int ghf_fit_law_load(MPI_Comm comm, const char *file, const char *name, ghf_fit_law *law, ghf_family *fam,
                     char *err, size_t errlen);

/* The checks of ghf_fit_law_load on a law read (a known family, finite
 * parameters in its domain; a mixture: every component, its Sigma positive
 * definite).  0, or 1/2 with a message naming the file, fit and dataset. */
int ghf_fit_law_check(const char *file, const ghf_fit_law *law, ghf_family *fam, char *err, size_t errlen);

/* Serial (one process, no MPI; `ghfit check`): what ghf_fit_law_load
 * reads and checks, with the same messages.  0, or 1 / 2 with a message. */
int ghf_fit_law_load_local(const char *file, const char *name, ghf_fit_law *law, ghf_family *fam, char *err,
                           size_t errlen);

/* d columns of data:dataset against the fit's dimension (eval, gof): 0, or
 * 2 with the message. */
int ghf_law_dim_check(const char *data, const char *dataset, int d, const ghf_fit_law *law, const char *model_file,
                      char *err, size_t errlen);

typedef struct ghf_eval_opts {
    const char *model_file, *fit_name; /* fit_name "": the file's only fit */
    const char *data, *dataset;        /* dataset NULL: /X */
    const char *out;
    const char *backend;               /* auto, cpu or cuda (eval runs on the CPU) */
} ghf_eval_opts;

/* What eval found (every rank). */
typedef struct ghf_eval_result {
    int64_t n_rows, n_obs, n_nonfinite;
    double loglik;
    double seconds_read, seconds_eval, seconds_write;
    char fit_name[64], family[16];
    int d;
    int n_components; /* K of a mixture, 1 for a single law */
} ghf_eval_result;

/* The inputs and the output `ghfit eval` checks before it reads the rows. */
ghf_io_plan ghf_eval_plan(const ghf_eval_opts *o, int n_ranks);

/* Collective over comm: `ghfit eval`.  Returns the exit status (0, 1, 2)
 * with one message in err (the same on every rank). */
int ghf_eval_run(MPI_Comm comm, const ghf_eval_opts *o, ghf_eval_result *res, char *err, size_t errlen);

/* Collective over comm: the total log-density of the finite rows of sh
 * (each rank its rows; the non-finite rows are not counted) under the law,
 * with exactly `ghfit eval`'s per-row math.  spend_x = 1 lets the pass use
 * the memory of sh->x for its results (as `ghfit eval` does; the rows are
 * lost), 0 leaves sh->x as it is.  0, 1 or 2. */
int ghf_score_loglik(MPI_Comm comm, const ghf_fit_law *law, ghf_family fam, ghf_shard *sh, int spend_x,
                     double *loglik, int64_t *n_obs, char *err, size_t errlen);

#endif
