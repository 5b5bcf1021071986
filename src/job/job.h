/* job.h - `ghfit run` job files: the YAML job description (parsed with
 * libyaml), command-line overrides, the effective configuration text, and
 * the expansion of the sweep axes into a list of named fits.
 *
 * Reference of every key: docs/job-files.md. */
#ifndef GHF_JOB_H
#define GHF_JOB_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "model.h"

#define GHF_JOB_MAX_AXIS 64          /* values per sweep axis */
#define GHF_JOB_DEFAULT_ROWS_PER_RANK 200000
#define GHF_JOB_DEFAULT_CKPT_EVERY 50
#define GHF_JOB_MAX_BYTES (1 << 20)  /* a job file is at most 1 MiB */
#define GHF_JOB_MAX_DEPTH 16         /* lists and mappings nested at most this deep */

/* One value of the p axis: free (estimated) or held fixed. */
typedef struct ghf_job_p {
    int fixed;
    double value;
} ghf_job_p;

typedef struct ghf_job {
    char *source;     /* job file name, for messages */
    char *name;       /* optional job name */
    /* data */
    char *data_file, *dataset;
    int64_t rows_start, rows_len; /* optional window of the data set (rows_len < 0: to the end) */
    int drop_nonfinite;
    /* observation weights (weighted EM; docs/job-files.md `weights`, `halflife`):
     * a dataset "DATASET" (in data_file) or "FILE:DATASET", or exponential
     * decay w_i = 2^(-(N-1-i)/halflife) over the rows of each fit (0: none) */
    char *weights;
    double halflife;
    /* missing coordinates (NaN entries): 1 = EM over them (--missing em,
     * job key `missing: em`); 0 = `error` (default) or `drop` (drop_nonfinite) */
    int missing_em;
    /* output */
    char *out;
    /* sweep axes */
    int n_family; ghf_family family[GHF_N_FAMILIES];
    int n_sym;    int sym[2];          /* symmetric: false (0) and/or true (1) */
    int n_p;      ghf_job_p p[GHF_JOB_MAX_AXIS];
    int n_tol;    double tol[GHF_JOB_MAX_AXIS];
    int n_seed;   int64_t seed[GHF_JOB_MAX_AXIS];
    /* the dispersion's form (--sigma, job key `sigma`): -1 full (default),
     * 0 diag, R > 0 factor:R (Sigma = B B' + D; docs/math.md 9) */
    int n_sigma;  int sigma[GHF_JOB_MAX_AXIS];
    /* mixtures (--components K, job key `components`; docs/math.md 10): K
     * components per fit, 1 (default) the single law */
    int n_comp;   int comp[GHF_JOB_MAX_AXIS];
    /* rolling windows (relative to the data window) */
    int has_windows;
    int64_t win_start, win_len, win_step, win_count; /* win_count < 0: as many as fit */
    int warm_start;
    /* fit settings */
    int max_iter, starts;
    int accel;        /* 1 squarem (default), 0 none */
    char *backend;
    int quiet, log_iterations;
    int log_time;     /* iteration lines with a UTC time stamp */
    int64_t rows_per_rank;
    /* checkpointing */
    char *checkpoint;
    int checkpoint_every;
    int resume;
    /* array slice K/N: the K-th of N blocks of the fits, dealt like the
     * groups of one run with N groups (ghf_job_assign_groups) */
    int slice_k, slice_n;
    /* standard errors of every fit (docs/job-files.md `se`): GHF_JOB_SE_*,
     * the values of ghf_se_mode (src/infer/se.h) */
    int se;
    /* after the fits (docs/job-files.md `risk`, `eval`; src/pipeline/postfit.c):
     * risk_file NULL: no risk; eval GHF_JOB_EVAL_* */
    char *risk_file, *risk_dataset;
    int risk_n_alpha;
    double risk_alpha[GHF_JOB_MAX_AXIS];
    int eval;
    char *eval_file, *eval_dataset;
    /* `gof` (src/pipeline/gofboot.h): 1 = goodness of fit of every fit, on
     * gof_file:gof_dataset (NULL: the fit's own rows), with a QQ table of
     * gof_qq probabilities and gof_bootstrap replicates (0: none) seeded by gof_seed */
    int gof;
    char *gof_file, *gof_dataset;
    int gof_bootstrap, gof_qq;
    int64_t gof_seed;
    /* `optimize` (docs/job-files.md; src/law/portopt.h, src/pipeline/postfit.c):
     * opt = 1: the optimal portfolio of every fit; opt_measure 0 sd, 1 var,
     * 2 es; opt_type 0 min-risk, 1 target-return, 2 tangency (the values of
     * portopt.h's GHF_OPT_*); bounds opt_lo..opt_hi (-inf/+inf: none; long_only
     * raises opt_lo to 0); opt_losses: the data are losses */
    int opt, opt_measure, opt_type, opt_long_only, opt_losses, opt_has_target;
    double opt_alpha, opt_budget, opt_lo, opt_hi, opt_target, opt_rf;
    /* `ghfit fit`: a job of one fit, named fit_name (NULL for job files) */
    char *fit_name;
} ghf_job;

enum { GHF_JOB_EVAL_OFF = 0, GHF_JOB_EVAL_NEXT = 1, GHF_JOB_EVAL_FILE = 2 };
enum { GHF_JOB_SE_OFF = 0, GHF_JOB_SE_AUTO = 1, GHF_JOB_SE_FULL = 2, GHF_JOB_SE_SUBSET = 3 };
/* "false", "true", "full", "subset" (the config text's spelling); parse also
 * takes "auto" (= true) and the YAML booleans: 0, or -1 */
const char *ghf_job_se_name(int se);
int ghf_job_se_parse(const char *s, int *se);

void ghf_job_defaults(ghf_job *j);
void ghf_job_free(ghf_job *j);

/* Parse job text (YAML).  `source` names the file in messages.  Returns 0, or
 * 2 with ONE line "source:LINE: message" in err (unknown keys, malformed
 * values, YAML syntax errors, more than GHF_JOB_MAX_BYTES bytes, nesting
 * deeper than GHF_JOB_MAX_DEPTH). */
int ghf_job_parse(const char *text, size_t len, const char *source, ghf_job *j, char *err, size_t errlen);

/* Collective over comm: rank 0 reads the job file at path (a regular file
 * of at most GHF_JOB_MAX_BYTES bytes) and every rank parses it.  0, or an
 * exit status with one message naming the file. */
int ghf_job_load_file(MPI_Comm comm, const char *path, ghf_job *j, char *err, size_t errlen);

/* Read a job file (serial; ghf_job_load_file's rank 0 does this): a regular
 * file of at most GHF_JOB_MAX_BYTES bytes, opened without blocking (a FIFO
 * cannot hold the run).  0 with *text (malloc'd, NUL-terminated) and *len,
 * or 2/1 with one message naming the file. */
int ghf_job_read_file(const char *path, char **text, size_t *len, char *err, size_t errlen);

/* "full" -> -1, "diag" -> 0, "factor:R" -> R (1 <= R <= 100000): 0, or
 * -1 with the reason in why (names the value). */
int ghf_sigma_parse(const char *s, int *r, char *why, size_t whylen);
/* The label of a form: "full", "diag", "factor:R" (buf of 24). */
const char *ghf_sigma_label(int r, char *buf, size_t len);
/* 1 when every fit of the job has the factor form (no sigma value is full) */
int ghf_job_factor_only(const ghf_job *j);
/* The settings a dispersion form other than full cannot be combined with
 * (--missing em, --se, --checkpoint, --backend cuda).  0, or 2 with a message. */
int ghf_job_check_sigma(const ghf_job *j, char *err, size_t errlen);

/* The largest number of mixture components (--components, components:) */
#define GHF_JOB_MAX_COMPONENTS 100
/* 1 when some fit of the job is a mixture (a components value > 1) */
int ghf_job_mixture(const ghf_job *j);
/* The settings a mixture (K > 1) cannot be combined with (--sigma
 * diag|factor, --missing em, --se, --backend cuda, warm starts, the
 * post-fit job keys risk, eval, gof, optimize).  0, or 2
 * with a message naming the option. */
int ghf_job_check_mixture(const ghf_job *j, char *err, size_t errlen);

/* Checks that need every key and override applied (required keys, ranges).
 * Returns 0 or 2 with a message. */
int ghf_job_validate(const ghf_job *j, char *err, size_t errlen);

/* The settings of weights and missing coordinates: not both weights and
 * halflife, a dataset named, not with se; --missing em not with
 * drop_nonfinite, se or the gauss family.  0, or 2 with a message. */
int ghf_job_check_weights(const ghf_job *j, char *err, size_t errlen);

/* The effective configuration as YAML text that ghf_job_parse accepts again
 * (malloc'd). */
char *ghf_job_config_text(const ghf_job *j);

/* 64-bit FNV-1a hash of everything that determines the fits' results
 * (not: out, quiet, checkpoint settings). */
uint64_t ghf_job_hash(const ghf_job *j);
uint64_t ghf_hash_bytes(uint64_t h, const void *p, size_t n);
/* The job's identity across the tasks of an array: ghf_job_hash without
 * the slice, and the data file's name as given (result files: job_hash). */
uint64_t ghf_job_identity(const ghf_job *j);
#define GHF_HASH_INIT 0xcbf29ce484222325ULL

/* One fit of the expanded sweep. */
typedef struct ghf_fit_spec {
    int index;        /* position in the full (unsliced) list */
    char name[64];
    ghf_family family;
    int symmetric;
    int fix_p;
    double p;
    double tol;
    int64_t seed;
    int sigma_r;      /* the dispersion's form: -1 full, 0 diag, R factors */
    int components;   /* mixture components K (1: the single law) */
    int chain;        /* fits that share family, p, tol and seed */
    int window;       /* window index, -1 without windows */
    int64_t row_start, row_len; /* rows of the data set (absolute), row_len < 0: to the end */
} ghf_fit_spec;

/* Expand the axes (order: family, symmetric, p, tol, seed, window: windows
 * innermost) for a data set of n_rows rows, keeping only this job's slice.
 * p applies to the families whose p is free (gh, vg, t), each fixed value
 * where the family allows it.  *specs is malloc'd.  Returns 0 or 2 with a
 * message (window outside the data, a fixed p a family refuses, no fit, fit
 * names that collide or are too long). */
int ghf_job_expand(const ghf_job *j, int64_t n_rows, ghf_fit_spec **specs, int *n_specs,
                   int *n_total, char *err, size_t errlen);

/* The labels of an axis's values in fit names (fit names look like
 * gh_pfree_tol1e-08_s1_w000012): "%g", except for values that print alike
 * with %g, which get the fewest more significant digits (up to 17) that tell
 * them apart (tol 1e-08 and 1.0000001e-08: "1e-08" and "1.0000001e-08").
 * ghf_job_expand refuses a job whose names would still collide or be longer
 * than 63 characters (exit 2). */
#define GHF_JOB_LABEL_LEN 32
void ghf_axis_labels(const double *v, int n, char (*lab)[GHF_JOB_LABEL_LEN]);

/* The group (0..G-1) of each of n fits in expansion order: per chain a
 * contiguous block of its windows when every chain has at least G fits,
 * else round robin over the list.  A run's ranks form G groups dealt this
 * way; an array slice K/N keeps the fits of group K of N, so that an array
 * of N tasks fits exactly what one run with N groups fits. */
void ghf_job_assign_groups(const ghf_fit_spec *s, int n, int G, int *group_of);

/* Parse "K/N" (0 <= K < N). 0 on success. */
int ghf_parse_slice(const char *s, int *k, int *n);

#endif
