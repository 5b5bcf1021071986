/* se.h - standard errors of a finished fit (`ghfit fit --se`, `se: true`):
 * the observed Fisher information at the maximum, summed over the rows of a
 * group of ranks; the scale orbit removed by the |Sigma| = 1 gauge of the
 * reported parameters; by the delta method the SEs of the gauge-free
 * moments E X and Cov X and of sqrt(ab).  Method and cost:
 * docs/design.md ("Standard errors"); output: docs/output-schema.md. */
#ifndef GHF_SE_H
#define GHF_SE_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "family.h"
#include "h5io.h"
#include "model.h"

typedef enum {
    GHF_SE_OFF = 0,
    GHF_SE_AUTO = 1,   /* full up to GHF_SE_FULL_KMAX free parameters, else the subset */
    GHF_SE_FULL = 2,   /* the full covariance whatever its size */
    GHF_SE_SUBSET = 3  /* SEs of the documented subset only (iterative, memory O(k d)) */
} ghf_se_mode;

/* The full information (k x k doubles on rank 0, k = free parameters) is
 * formed up to this many parameters (d = 125 for gh: about 0.5 GiB); beyond,
 * --se gives the subset. */
#define GHF_SE_FULL_KMAX 8192

/* A factor-form fit (--sigma diag|factor:R) has SEs up to this many columns
 * (the full method through the full form's information: docs/design.md);
 * beyond, --se with the factor form is refused before any fit
 * (ghf_pipeline_sigma_check, also in `ghfit check`). */
#define GHF_SE_FACTOR_DMAX 100

/* A fit of a family with a, b > 0 (gh, hyp, nig, fixed p) whose gauge-free
 * sqrt(ab) is below this is on a face of the GIG domain (a variance-gamma
 * or skewed t law, not a point of the family): its SEs are NaN. */
#define GHF_SE_FACE_OMEGA 1e-6

/* "auto", "full", "subset" (and "off"); parse: 0, or -1 for an unknown name */
const char *ghf_se_mode_name(ghf_se_mode m);
int ghf_se_mode_parse(const char *s, ghf_se_mode *m);

typedef struct ghf_se_input {
    int d;
    const double *x;          /* this rank's rows in the fit's internal coordinates */
    int64_t nrows, n_global;
    const ghf_params *theta;  /* the fitted parameters, internal coordinates */
    int scale_log2;           /* data = 2^-scale_log2 (internal + shift) (fit.h) */
    ghf_model model;
    const char *status;       /* the fit's status text */
    int boundary;             /* 1: EM ended at a boundary of the parameter space */
    const char *label;        /* the fit's name, for progress lines */
    int verbose;              /* progress lines on rank 0 (long computations print one anyway) */
} ghf_se_input;

/* A result on rank 0 of the communicator: `v` is what a fit record points to
 * (all in data coordinates); the other members own its memory. */
typedef struct ghf_se {
    ghf_fit_se v;
    double *mem;
    char *names;
    char reason[768];
    char method[16];
} ghf_se;

/* Collective over comm (the ranks that hold the fit's rows).  Fills *out on
 * rank 0 (NaN with the reason where SEs cannot be given: a boundary fit, a
 * singular or indefinite information, non-finite posterior moments, not
 * enough memory); other ranks get an empty result.  Returns 0, or 1 on a
 * failure that leaves no result at all (a message in err). */
int ghf_se_compute(MPI_Comm comm, const ghf_se_input *in, ghf_se_mode mode, ghf_se *out, char *err, size_t errlen);
void ghf_se_free(ghf_se *s);

/* A NaN result with a reason (a failed fit whose SEs were asked for). */
int ghf_se_nan(int d, const char *method, const char *reason, ghf_se *out);

#endif
