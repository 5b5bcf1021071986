/* h5io.h - the HDF5 I/O layer of ghfit: collective row-shard reads of the
 * input matrix, the parallel matrix writer used by `ghfit generate`, and the
 * rank-0 result-file writer (layout: docs/output-schema.md).
 *
 * io/ is the only place that includes hdf5.h; this header does not.
 *
 * Error convention for every function returning int:
 *   0  success
 *   2  bad input (missing/corrupt file, wrong dataset, bad window, user error)
 *   1  run-time failure (out of memory, I/O error while writing, ...)
 * `err` (may be NULL) receives ONE line naming the file and dataset, with no
 * trailing newline and no "ghfit:" prefix.  Collective functions return the
 * same status and the same message on every rank of `comm`.  Nothing here
 * calls exit() or abort(); HDF5's automatic error printing is switched off. */
#ifndef GHF_H5IO_H
#define GHF_H5IO_H

/* standard headers */
#include <stddef.h>
#include <stdint.h>

/* MPI */
#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Input: a block of rows of an N x d matrix, read collectively.
 * ------------------------------------------------------------------------- */

typedef struct ghf_shard {
    int64_t n_global;  /* rows in the (windowed) data set, after dropping non-finite rows */
    int     d;
    int64_t row0;      /* global index (in the window) of this rank's first row; -1 if rows were dropped */
    int64_t nrows;     /* rows held by this rank (may be 0 when N < ranks) */
    double *x;         /* nrows*d, row-major, malloc'd (NULL if nrows==0 or x32 alone is used); free with ghf_shard_free */
    float  *x32;       /* instead of x, when ghf_h5_read_shard_f32 read a float32 dataset: the
                          file's values unwidened (nrows*d, row-major); ghf_shard_widen makes x
                          (ghf_shard_widen_keep: x and x32 both) */
    int64_t n_dropped; /* global number of rows dropped as non-finite (drop_nonfinite) */
    int     file_dtype_bits; /* 32 or 64 (bits of the on-disk element type) */
} ghf_shard;

typedef struct ghf_read_opts {
    const char *path, *dataset;   /* dataset NULL or "" -> "/X" */
    int64_t win_start, win_len;   /* row window; win_len < 0 = to the end */
    int64_t win_step;             /* reserved: must be 0 or 1 */
    int drop_nonfinite;           /* 0: non-finite values are an error; 1: drop such rows;
                                     2: keep them (`ghfit eval` flags them itself);
                                     3: --missing em: NaN entries kept (missing), rows
                                     with no finite entry dropped (n_dropped), an
                                     infinite entry an error */
    int64_t granule;              /* ranks get whole groups of this many rows of the window
                                     (ghf_block_range_granular); 0 or 1: any row boundary */
    int vector;                   /* 1: also accept a 1-D dataset of n values (read as n x 1;
                                     observation weights) */
    double *companion;            /* NULL, or one value per row of this rank's part of the
                                     window (as read with the same window and granule, e.g.
                                     the weights): compacted in place together with the rows
                                     that drop_nonfinite drops (the kept count is out->nrows) */
} ghf_read_opts;

/* Block partition: rank r of P gets rows [floor(r*n/P), floor((r+1)*n/P)). */
void ghf_block_range(int64_t n, int rank, int size, int64_t *row0, int64_t *nrows);
/* The same over groups of g rows: rank r gets groups [floor(r*m/P), floor((r+1)*m/P))
 * of the m = ceil(n/g) groups (the last one may be short), so that every
 * shard starts at a multiple of g. */
void ghf_block_range_granular(int64_t n, int64_t g, int rank, int size, int64_t *row0, int64_t *nrows);

/* Collective over comm.  Accepted on-disk types: IEEE float32 / float64 (any
 * byte order); integer datasets (8..64 bit, signed or unsigned) are also
 * accepted and converted to double (file_dtype_bits = 64 for integers wider
 * than 32 bits, else 32).  Strings, compounds, enums, ... are errors.
 * Non-finite values: without drop_nonfinite, status 2 with the global count
 * of such rows and the first one as a 0-based row index of the DATASET
 * (window offset included); with it, each rank drops its own such rows (no
 * rebalancing), n_global counts the kept rows, row0 = -1 if any was dropped.
 * Every rank takes part in the same collective calls; a rank with no rows
 * selects nothing.  On error *out is zeroed (nothing to free). */
int  ghf_h5_read_shard(MPI_Comm comm, const ghf_read_opts *o, ghf_shard *out,
                       char *err, size_t errlen);
/* The same, but a float32 dataset stays float32: its values in out->x32
 * (half the memory; for float32 storage on a GPU), out->x NULL.  Any other
 * type is read into out->x as above. */
int  ghf_h5_read_shard_f32(MPI_Comm comm, const ghf_read_opts *o, ghf_shard *out,
                           char *err, size_t errlen);
void ghf_shard_free(ghf_shard *s);
/* x from x32 (exact: every float is a double), x32 freed; nothing when x32 is
 * NULL.  Returns 0, or 1 out of memory (the shard unchanged). */
int  ghf_shard_widen(ghf_shard *s);
/* The same, but x32 is kept next to x (a float32 copy for the device; free
 * it when done).  Returns 0, or 1 out of memory (the shard unchanged). */
int  ghf_shard_widen_keep(ghf_shard *s);

/* One process, no MPI (serial driver): dimensions of a 2-D numeric dataset,
 * with every check of the collective read's inspection (io/h5inspect.c). */
int  ghf_h5_probe(const char *path, const char *dataset, int64_t *n, int *d,
                  char *err, size_t errlen);
/* As ghf_h5_probe; also the file that holds the data (file_len bytes; it
 * differs from path when the dataset is reached through an external link). */
int  ghf_h5_probe_file(const char *path, const char *dataset, int64_t *n, int *d, char *file, size_t file_len,
                       char *err, size_t errlen);

/* As ghf_h5_probe for a vector (weights): a 1-D dataset of n values or an
 * n x 1 matrix; *n its length.  Status 2 naming the dataset otherwise. */
int  ghf_h5_probe_vector(const char *path, const char *dataset, int64_t *n, char *err, size_t errlen);

/* The row window [start, start + len) of a dataset of n rows (len < 0: to
 * the end): 0 with *rows, or 2 with a message starting with `what`. */
int  ghf_h5_window(const char *what, int64_t n, int64_t start, int64_t len, int64_t *rows, char *err, size_t errlen);

/* A sample of an input dataset's rows (io/h5sample.c; one process, serial
 * driver, no MPI): the rows of the window [start, start + len) (len < 0: to
 * the end) when it has at most GHF_SAMPLE_ALL_ROWS rows (and at most
 * GHF_SAMPLE_MAX_VALUES values), else up to 64 blocks of 8 rows (chunked
 * data: 16 blocks of 32 rows, each block costing a chunk) spread evenly
 * over it, the first and the last row included.  Reads metadata and
 * those rows only, so its time does not grow with the size of the data. */
#define GHF_SAMPLE_ALL_ROWS 4096
#define GHF_SAMPLE_MAX_VALUES (1 << 22)
typedef struct ghf_h5_sample {
    int64_t n_rows;           /* the dataset's shape */
    int d;
    char type[16];            /* float64, float32, int32, uint8, ... */
    int elem_size;            /* bytes per value on disk */
    char layout[16];          /* contiguous, chunked, compact */
    int64_t start, len;       /* the window sampled */
    int all;                  /* 1: every row of the window was read */
    int64_t n_read;           /* rows read */
    int n_blocks, block_rows; /* how (all: 1 block of n_read rows) */
    int64_t n_bad, first_bad; /* rows read holding a non-finite value; the first (a row of the dataset), or -1 */
    int const_col;            /* the first column whose finite rows all hold one value (-1: none; needs 2+ such rows) */
} ghf_h5_sample;
/* The dataset is inspected first (every check of ghf_h5_probe); 0, or 2
 * (1: out of memory, a read error) with a message naming file and dataset. */
int ghf_h5_sample_rows(const char *path, const char *dataset, int64_t start, int64_t len, ghf_h5_sample *s,
                       char *err, size_t errlen);

/* The largest dimension d ghfit handles: the E-step statistics
 * (ghf_stats_len: d^2 + 2d + a few), a checkpoint's parameters
 * (ghf_ckpt_param_len) and the MPI counts of d x d matrices are int, so 2 d^2
 * must stay below 2^31.  Fits of data with more columns (ghf_fit_shape_check),
 * fits and checkpoints that claim more are refused (exit 2) with a line
 * naming it (data sets as such may have up to GHF__MAX_COLS columns). */
#define GHF_D_MAX 32768

/* Can `rows` x `d` be fitted at all?  Status 2 with a message starting with
 * `what` when rows < d + 1, or when one of n_ranks ranks would need more
 * memory for its rows and the d x d matrices than the node has; else 0.
 * Pure arithmetic: call it before allocating anything. */
int  ghf_fit_shape_check(const char *what, int64_t rows, int64_t d, int n_ranks, char *err, size_t errlen);
/* Can each of n_ranks ranks hold its ceil(rows / n_ranks) rows of d values
 * (bytes_per_value each: the float64 rows and a write buffer) and a few
 * d x d matrices?  Status 2 with a message starting with `what` (too many
 * values, or more memory per rank than this node has), else 0.  Pure
 * arithmetic (`ghfit sample` and its check). */
int  ghf_rows_mem_check(const char *what, int64_t rows, int64_t d, int n_ranks, double bytes_per_value, char *err,
                        size_t errlen);

/* ---------------------------------------------------------------------------
 * Path safety (io/guard.c; serial, rank 0): what ghfit may write, replace or
 * remove.  Layout of the signatures: docs/output-schema.md.
 * ------------------------------------------------------------------------- */

typedef enum ghf_path_kind {
    GHF_PATH_INPUT = 0, /* read only */
    GHF_PATH_RESULT,    /* a fit/run result file: root attribute ghfit_version and no root attribute content */
    GHF_PATH_CHECKPOINT,/* a checkpoint or its _prev: format = "ghfit-checkpoint" */
    GHF_PATH_MATRIX,    /* `ghfit generate --out`: a data set written by ghfit generate (not by sample) */
    GHF_PATH_SCORES,    /* `ghfit eval --out`: root attribute ghfit_scores_version */
    GHF_PATH_RISK,      /* `ghfit risk --out`: ghfit_version and content = "risk" */
    GHF_PATH_SAMPLE,    /* `ghfit sample --out`: a data set whose dataset carries fit_name (drawn from a fit) */
    GHF_PATH_GOF,       /* `ghfit gof --out`: ghfit_version and content = "gof" */
    GHF_PATH_OPTIMIZE   /* `ghfit optimize --out`: ghfit_version and content = "optimize" */
} ghf_path_kind;

typedef struct ghf_path_use {
    const char *path;
    const char *what;    /* how messages name it: "--out", "--data", "checkpoint _prev file", ... */
    ghf_path_kind kind;
    const char *dataset; /* GHF_PATH_MATRIX, _SAMPLE: the dataset written (NULL: /X) */
} ghf_path_use;

/* Status 2 with one message naming both paths when two of them are the same
 * file (by device and inode after resolving links and "..": a file that does
 * not exist yet is compared by its directory's identity and its name), or
 * naming the path and the cause when an existing output is not a regular
 * file or does not carry ghfit's signature of its kind.  Opens nothing but
 * regular files; creates nothing. */
int ghf_paths_check(const ghf_path_use *u, int n, char *err, size_t errlen);
/* 1 if a and b name the same file (or, neither existing, the same directory entry). */
int ghf_same_file(const char *a, const char *b);
/* 1 if path is a regular file carrying ghfit's signature of `kind`. */
int ghf_path_is_ghfit(const char *path, ghf_path_kind kind, const char *dataset);
/* What kind of ghfit file path is, for messages: "a ghfit fit result", "a
 * ghfit risk output", ... or "" when none. */
const char *ghf_path_what(const char *path);

/* Takes "<path>.lock" (created if needed; an fcntl write lock) for the rest
 * of the process: 0, or 2 with a message naming the holder (pid, host,
 * start time) when another process holds it, or when "<path>.lock" exists
 * and is not a ghfit lock file.  Where the file system has no locks the run
 * goes on with a warning on stderr.  Released (and the lock file removed) by
 * ghf_out_unlock_all, which also runs at the start of MPI_Finalize (before
 * any other rank can end) and at exit. */
int  ghf_out_lock(const char *path, char *err, size_t errlen);
/* What ghf_out_lock would refuse, without taking the lock or creating
 * anything (`ghfit check`): 2 with the same message when a live process
 * holds "<path>.lock" or when that file is not a ghfit lock file; else 0. */
int  ghf_out_lock_query(const char *path, char *err, size_t errlen);
void ghf_out_unlock_all(void);
/* For a fatal signal (async-signal-safe): removes the temporary files this
 * process is writing (an output not yet renamed into place) and its lock
 * files; the process must end right after (ghf_release_stop_handlers). */
void ghf_out_abandon(void);

/* ---------------------------------------------------------------------------
 * `ghfit generate`: collective write of an N x d matrix.
 * ------------------------------------------------------------------------- */

/* Each rank passes its rows [row0, row0+nrows) (any disjoint cover of
 * [0, n) works; ghf_block_range is the natural choice).  dtype_bits 32|64
 * selects float32 or float64 on disk; contiguous layout.  The file is written
 * as "<path>.tmp.<jobid>" and renamed into place by rank 0 after every rank
 * has closed it.  attr_keys/attr_vals: n_attrs string attributes put on the
 * dataset (e.g. the generating model and seed).  Parent groups of `dataset`
 * are created as needed.  dataset NULL or "" -> "/X". */
int ghf_h5_write_matrix(MPI_Comm comm, const char *path, const char *dataset, int64_t n, int d,
                        int64_t row0, int64_t nrows, const double *x, int dtype_bits,
                        int n_attrs, const char *const *attr_keys, const char *const *attr_vals,
                        char *err, size_t errlen);

/* Typed root attributes of a file written in parallel. */
enum { GHF_H5_ATTR_STR = 0, GHF_H5_ATTR_F64 = 1, GHF_H5_ATTR_I64 = 2 };
typedef struct ghf_h5_attr {
    const char *key;
    int type;        /* GHF_H5_ATTR_* */
    const char *str;
    double f64;
    int64_t i64;
} ghf_h5_attr;

/* One [n] vector of a column file: float64 (data: doubles) or uint8 (data:
 * bytes), this rank's rows; description (may be NULL) becomes its
 * attribute "description". */
typedef struct ghf_h5_column {
    const char *name;
    int uint8;
    const void *data;
    const char *description;
    /* 0: data holds the rank's rows in order; else (doubles only) the rows
     * lie in sub-blocks of `block` rows: sub-block b, of nb rows (block but
     * for the last), has its values at data + b block stride + col nb */
    int64_t block;
    int stride, col;
    /* width > 0: an [n][width] matrix of doubles (row-major, block 0); int32:
     * an [n] vector of int32_t (data: int32_t) */
    int width, int32;
} ghf_h5_column;

/* `ghfit eval`: n_cols (at most 16) vectors of n rows, each rank passing its
 * rows [row0, row0+nrows), written exactly as ghf_h5_write_matrix writes a
 * matrix (temporary file, collective MPI-IO at the datasets' offsets,
 * renamed into place by rank 0; nothing left on failure).  The root carries
 * the attribute `signature` (value: the version) and the n_root attributes
 * of root.  Datasets are contiguous and carry no time stamps, so the file's
 * bytes depend only on its content. */
int ghf_h5_write_columns(MPI_Comm comm, const char *path, const char *signature, int64_t n, int64_t row0,
                         int64_t nrows, int n_cols, const ghf_h5_column *cols, int n_root, const ghf_h5_attr *root,
                         char *err, size_t errlen);

/* ---------------------------------------------------------------------------
 * Result file (rank 0 only, serial HDF5 driver).  Layout: docs/output-schema.md
 * ------------------------------------------------------------------------- */

typedef struct ghf_out_meta {
    const char *version, *git_commit, *command_line, *backend;
    int n_ranks;
    const char *config_text; /* may be NULL; when set, written as the /config string dataset */
    int omp_threads;         /* OpenMP threads per rank (root attribute omp_threads when > 0) */
    /* the job's identity, so that `ghfit summary` can tell an incomplete set of
     * an array's files: written when slice is set */
    const char *slice;       /* "K/N" (a whole run: "0/1") */
    const char *job_hash;    /* 16 hex digits: the job without its slice (ghf_job_identity) */
    int64_t n_fits_total;    /* the fits of the whole job (every slice) */
} ghf_out_meta;

/* Standard errors of a fit (src/infer/se.h makes them), in data coordinates
 * and the |Sigma| = 1 gauge of the parameters; written as /fits/<name>/se/
 * and /fits/<name>/param_cov.  A NULL array is written as NaN. */
typedef struct ghf_fit_se {
    const char *method;        /* "full", "subset" or "none" */
    const char *reason;        /* why SEs are NaN (some or all), "" when none is */
    double cond;               /* condition number of the scaled information (NaN: not known) */
    double newton_decrement;   /* sqrt(s' V s), s the score at the reported point */
    double seconds;            /* wall time of the computation */
    int d;
    const double *mu, *gamma, *sigma; double p, a, b; /* [d], [d], [d*d] */
    const double *mean, *cov; double sqrt_ab;        /* gauge-free: E X [d], Cov X [d*d], sqrt(ab) */
    int n_cov;                 /* rows of param_cov (0: none written) */
    const double *param_cov;   /* [n_cov*n_cov] covariance of the free parameters */
    const char *names;         /* the n_cov row names, each followed by '\n' */
} ghf_fit_se;

typedef struct ghf_fit_record {
    const char *name;        /* group name under /fits, e.g. "gh" */
    const char *family;      /* the family's name (src/family/family.h: gh, hyp, nig, vg, t, gauss) */
    int64_t n_obs; int d; int n_iter; int converged;
    const char *status;      /* text, e.g. "converged", "max_iter", "boundary: b -> 0 (...)" */
    double loglik, aic, bic, elapsed_s;
    const double *loglik_trace; int n_trace;         /* n_iter + 1 values (n_trace may differ; it is what is written) */
    const double *mu, *gamma, *sigma; double p, a, b; /* sigma d*d row-major */
    const double *mean, *cov;                        /* moments of the fitted law: d, d*d (may be NULL: NaN written) */
    int n_phases; const char *const *phase_names;    /* e.g. read init estep allreduce mstep write total */
    int n_ranks; const double *phase_s;              /* [n_ranks][n_phases] wall seconds */
    const char *backend;                             /* optional, "cpu"/"cuda" */
    int64_t n_dropped;
    int symmetric;                                   /* 1: gamma held at 0 */
    double p_fixed;                                  /* the GIG index when held fixed (by the family
                                                        or by the user), NaN when estimated */
    const char *moments_note;                        /* why moments are NaN (heavy tails), or NULL */
    const ghf_fit_se *se;                            /* standard errors, or NULL (none asked for) */
    /* the data the fit was made on (attributes data_file, dataset, row_start,
     * row_count; NULL data_file: not written) */
    const char *data_file, *dataset;
    int64_t row_start, row_count;
    const char *device;                              /* optional: what ran it, "cpu" or "cuda:0,1" */
    /* weighted EM (attributes weights, weight_sum, n_eff, loglik_unweighted;
     * NULL weights: an unweighted fit, none written) */
    const char *weights;                             /* "FILE:DATASET" or "halflife H" */
    double weight_sum, n_eff, loglik_unweighted;
    /* --missing em (attributes missing, n_incomplete, missing_fraction and the
     * dataset missing_counts; NULL missing: none written) */
    const char *missing;
    int64_t n_incomplete;
    double missing_fraction;
    const double *missing_counts; int n_missing_counts; /* rows with k = 0..d missing entries */
    /* the factor form of the dispersion (--sigma diag|factor:R; NULL D: full,
     * nothing written): params/B [d x factors] (factors > 0), params/D [d],
     * attributes sigma_structure and factors; params/sigma only for d <=
     * GHF_SIGMA_WRITE_MAX_D (docs/output-schema.md) */
    int factors; const double *B, *D;
    /* a mixture (--components K >= 2; docs/output-schema.md "Mixtures";
     * n_components 0 or 1: a single law, nothing written): the proportions
     * [K], per component mu, gamma [K][d], sigma [K][d][d], (p, a, b) [K][3],
     * its moments mean [K][d], cov [K][d][d] and why they are NaN (K strings,
     * NULL entries: none); the attribute icl; every start's final
     * log-likelihood, iterations and convergence [n_starts].  mu, gamma,
     * sigma, p, a, b above are component 0's and mean, cov the mixture's;
     * no params/ group is written. */
    int n_components;
    const double *mix_prop, *mix_mu, *mix_gamma, *mix_sigma, *mix_pab, *mix_mean, *mix_cov;
    const char *const *mix_note;
    double icl;
    int n_starts; const double *start_ll; const int *start_iter, *start_conv;
} ghf_fit_record;
#define GHF_SIGMA_WRITE_MAX_D 1000

typedef struct ghf_h5_writer ghf_h5_writer;

/* Check early (before fitting) that the output path's directory exists and is
 * writable and that the path is not a directory: status 2 + message. */
int ghf_h5_out_check(const char *final_path, char *err, size_t errlen);
/* The same without creating a probe file (access(2); `ghfit check`). */
int ghf_h5_out_check_access(const char *final_path, char *err, size_t errlen);
/* Creates "<final_path>.tmp.<pid>" and writes the root attributes (and /config).
 * NULL on failure (err filled). */
ghf_h5_writer *ghf_h5_out_open(const char *final_path, const ghf_out_meta *m,
                               char *err, size_t errlen);
/* Adds /fits/<name>; a duplicate name or invalid record is status 2. */
int  ghf_h5_out_add_fit(ghf_h5_writer *w, const ghf_fit_record *r, char *err, size_t errlen);
/* Overwrites /fits/<name>/profile (seconds [n_ranks][n_phases] and min/mean/max)
 * of a fit already added, e.g. once the write phase has been measured. */
int  ghf_h5_out_set_profile(ghf_h5_writer *w, const char *name, int n_ranks, int n_phases,
                            const double *phase_s, char *err, size_t errlen);
/* Adds n_arr float64 arrays (absolute names, e.g. "/fits/NAME/risk/var";
 * groups created as needed) and n_attr attributes on the object at path
 * `object` (e.g. "/fits/NAME", created before).  0, or 1 with a message. */
struct ghf_h5_attr;
struct ghf_h5_array;
int  ghf_h5_out_put(ghf_h5_writer *w, const char *object, int n_attr, const struct ghf_h5_attr *at, int n_arr,
                    const struct ghf_h5_array *arr, char *err, size_t errlen);
/* Writes /summary, closes, fsyncs and renames the temp file into place, frees w
 * (also on failure, in which case the temp file is removed). */
int  ghf_h5_out_commit(ghf_h5_writer *w, char *err, size_t errlen);
/* Closes and unlinks the temp file, frees w.  NULL is a no-op. */
void ghf_h5_out_abort(ghf_h5_writer *w);

/* One row of /summary, as read back by ghf_h5_read_fit_summary. */
typedef struct ghf_fit_summary {
    char    name[64];
    char    family[16];
    int64_t n;
    int     d;
    double  loglik, aic, bic;
    int     n_iter;
    int     converged;
    double  seconds;
    char    status[80]; /* the fit's status, cut to 79 bytes (empty in files of older versions) */
} ghf_fit_summary;

/* A result file's job identity (root attributes slice, job_hash,
 * n_fits_total); have = 0 when the file has none (older versions). */
typedef struct ghf_run_ident {
    int have;
    int slice_k, slice_n;
    char job_hash[24];
    int64_t n_fits_total;
} ghf_run_ident;
/* Serial; 0, or 2 with a message when the file cannot be opened. */
int ghf_h5_read_run_ident(const char *path, ghf_run_ident *id, char *err, size_t errlen);

/* Reads the /summary table of a result file (serial driver, any process).
 * *rows is malloc'd (free() it; NULL when *n_rows == 0). */
int ghf_h5_read_fit_summary(const char *path, ghf_fit_summary **rows, int *n_rows,
                            char *err, size_t errlen);

/* What a result file says of a fit's model and data (for likelihood-ratio
 * tests): symmetric (-1 when not recorded), p_fixed (NaN: estimated or not
 * recorded), the data identity (has_data 0 in files without it). */
typedef struct ghf_fit_model_info {
    int symmetric;
    double p_fixed;
    int has_data;
    char data_file[1024], dataset[256];
    int64_t row_start, row_count, n_dropped;
    double loglik_unweighted; /* attribute loglik_unweighted of a weighted fit, NaN when absent */
    int factors; /* the dispersion's form: -1 full (no attribute factors), 0 diag, R factors */
    int n_components; /* attribute n_components of a mixture (1: a single law, absent) */
    double icl;       /* attribute icl of a mixture (NaN when absent) */
} ghf_fit_model_info;

/* Reads the attributes of /fits/<rows[i].name> for each of n summary rows
 * into info[i] (serial, any process).  0, or 2 with a message. */
int ghf_h5_read_fit_models(const char *path, const ghf_fit_summary *rows, int n, ghf_fit_model_info *info,
                           char *err, size_t errlen);

/* For each of n summary rows, a mixture's K (attribute n_components; 1
 * when absent) and ICL (attribute icl; NaN when absent) of
 * /fits/<rows[i].name>: two attributes per fit (`ghfit summary`).  0, or 2
 * with a message. */
int ghf_h5_read_fit_ncomp(const char *path, const ghf_fit_summary *rows, int n, int *K, double *icl, char *err,
                          size_t errlen);

/* One fit's law as a result file holds it (`ghfit eval`, `ghfit sample`):
 * /fits/<name>/params and the attributes family, dim, status, loglik,
 * n_obs (-1 when absent).  mu [d], gamma [d], sigma [d*d] are malloc'd. */
typedef struct ghf_fit_law {
    char name[64], family[16], status[256];
    int d;
    double *mu, *gamma, *sigma;
    double p, a, b;
    double loglik;
    int64_t n_obs;
    int symmetric;   /* attribute symmetric (0 when absent) */
    double p_fixed;  /* attribute p_fixed: the GIG index held fixed, NaN when free or absent */
    int factors;     /* attribute factors of a factor-form fit (0: diag), -1: full (absent); sigma is
                        params/sigma, or B B' + diag(D) formed from params/B, params/D when not stored */
    double *B, *D;   /* the factor form: B [d*factors] (malloc'd, D in the same block), D [d]; NULL: full */
    /* A mixture (attribute n_components K >= 2; docs/output-schema.md
     * "Mixtures"): prop [K] (finite, positive, summing to 1 within 1e-8) and
     * comp [K], component k read from components/<k>/params (full form;
     * name, family, status and d those of the fit); mu, gamma and sigma are
     * then NULL and p, a, b NaN.  A single law: n_components 1, prop and
     * comp NULL. */
    int n_components;
    double *prop;
    struct ghf_fit_law *comp;
} ghf_fit_law;

/* Serial, any process.  name NULL or "": the file must hold exactly one fit.
 * 0, or 2 with one message: the file is not HDF5 or not a ghfit result
 * file (no root attribute ghfit_version), holds no fits, holds several and
 * none is named (the message lists them), has no fit of that name, or the
 * fit's parameters are missing or of another size than its dimension;
 * 1: out of memory.  On failure nothing is left to free. */
int  ghf_h5_read_fit_law(const char *path, const char *name, ghf_fit_law *law, char *err, size_t errlen);
/* The same for the readers that take a mixture too (eval, sample, risk, gof,
 * check): a mixture's proportions and components, checked as the schema
 * says (K against components/, the proportions' sum, each component's
 * datasets of the fit's dimension) with one message naming the file, the
 * fit and the dataset.  ghf_h5_read_fit_law refuses a mixture (2: "... is a
 * K-component mixture; this command needs a single law"). */
int  ghf_h5_read_fit_any(const char *path, const char *name, ghf_fit_law *law, char *err, size_t errlen);
/* ghf_h5_read_fit_any with a factor-form fit's B and D only (risk). */
int  ghf_h5_read_fit_any_bd(const char *path, const char *name, ghf_fit_law *law, char *err, size_t errlen);
void ghf_fit_law_free(ghf_fit_law *law);

/* ---------------------------------------------------------------------------
 * The file `ghfit risk` writes (io/h5risk.c)
 * ------------------------------------------------------------------------- */

/* What `ghfit risk` writes (docs/output-schema.md, "Risk files"). */
typedef struct ghf_risk_file {
    const ghf_out_meta *meta;          /* ghfit_version, git_commit, command_line, n_ranks */
    const char *model_file, *fit_name, *family, *portfolios_file, *portfolios_dataset;
    int64_t n_portfolios; int d; int n_alpha;
    const double *alpha;               /* [K] */
    const double *var, *es;            /* [P][K] row-major */
    const char *note;                  /* or NULL: root attribute note */
    int n_components;                  /* a mixture fit's K: root attribute n_components (absent for one law) */
} ghf_risk_file;

/* Rank 0 only: builds the file in memory, saves it as "<path>.tmp.<pid>",
 * renames it into place.  0, or 1 with a message (nothing left behind). */
int ghf_h5_write_risk(const char *path, const ghf_risk_file *r, char *err, size_t errlen);

/* ---------------------------------------------------------------------------
 * The file `ghfit optimize` writes (io/h5opt.c)
 * ------------------------------------------------------------------------- */
typedef struct ghf_opt_file {
    const ghf_out_meta *meta;
    const char *model_file, *fit_name, *family, *fit_status;
    int64_t fit_n_obs;
    double fit_loglik;
    const char *data_file, *dataset;   /* the fit's data (NULL: not recorded) */
    int64_t row_start, row_count;
    int64_t n_points; int d;
    const char *measure, *type, *constraints;
    double alpha, budget, lo, hi, target, rf;
    int has_target, has_rf, losses;
    const double *weights;             /* [K][d] */
    const double *ret, *risk, *sd, *var, *es, *status, *converged, *kkt; /* [K] */
    const double *lower, *upper;       /* [d]: the bounds used (-inf/+inf: none) */
    const char *note;
} ghf_opt_file;
/* Rank 0 only: built in memory, saved as a temporary file, renamed into
 * place.  0, or 1 with a message (nothing left behind). */
int ghf_h5_write_opt(const char *path, const ghf_opt_file *r, char *err, size_t errlen);
/* 2 with a message when path is a ghfit file of another kind than an
 * optimize file (content attribute), else 0 (serial). */
/* The data identity of /fits/<fit> (attributes data_file, dataset,
 * row_start, row_count): 0, or -1 when not recorded. */
int ghf_h5_read_fit_data(const char *path, const char *fit, char *data_file, size_t dlen, char *dataset,
                         size_t slen, int64_t *row_start, int64_t *row_count);

/* ---------------------------------------------------------------------------
 * Small files of float64 arrays written by rank 0 (io/h5gof.c; `ghfit gof`).
 * ------------------------------------------------------------------------- */
typedef struct ghf_h5_array {
    const char *name;      /* "margins/ks": intermediate groups are created */
    int rank;              /* 0 (scalar) to 3 */
    int64_t dims[3];
    const double *v;
    const char *desc;      /* its attribute "description" */
} ghf_h5_array;

/* Rank 0 only: root attributes ghfit_version, git_commit, created,
 * command_line, n_ranks, content, then attrs; the arrays; built in memory,
 * saved as "<path>.tmp.<pid>" and renamed into place.  0, or 1 with a message
 * (nothing left behind). */
int ghf_h5_write_arrays(const char *path, const ghf_out_meta *meta, const char *content, int n_attr,
                        const ghf_h5_attr *attrs, int n_arr, const ghf_h5_array *arr, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* GHF_H5IO_H */
