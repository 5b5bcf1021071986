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
    double *x;         /* nrows*d, row-major, malloc'd (NULL if nrows==0); free with ghf_shard_free */
    int64_t n_dropped; /* global number of rows dropped as non-finite (drop_nonfinite) */
    int     file_dtype_bits; /* 32 or 64 (bits of the on-disk element type) */
} ghf_shard;

typedef struct ghf_read_opts {
    const char *path, *dataset;   /* dataset NULL or "" -> "/X" */
    int64_t win_start, win_len;   /* row window; win_len < 0 = to the end */
    int64_t win_step;             /* reserved: must be 0 or 1 */
    int drop_nonfinite;           /* 0: non-finite values are an error; 1: drop such rows */
} ghf_read_opts;

/* Block partition: rank r of P gets rows [floor(r*n/P), floor((r+1)*n/P)). */
void ghf_block_range(int64_t n, int rank, int size, int64_t *row0, int64_t *nrows);

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
void ghf_shard_free(ghf_shard *s);

/* One process, no MPI (serial driver): dimensions of a 2-D numeric dataset. */
int  ghf_h5_probe(const char *path, const char *dataset, int64_t *n, int *d,
                  char *err, size_t errlen);

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

/* ---------------------------------------------------------------------------
 * Result file (rank 0 only, serial HDF5 driver).  Layout: docs/output-schema.md
 * ------------------------------------------------------------------------- */

typedef struct ghf_out_meta {
    const char *version, *git_commit, *command_line, *backend;
    int n_ranks;
    const char *config_text; /* may be NULL; when set, written as the /config string dataset */
} ghf_out_meta;

typedef struct ghf_fit_record {
    const char *name;        /* group name under /fits, e.g. "gh" */
    const char *family;      /* "gh" | "nig" */
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
} ghf_fit_record;

typedef struct ghf_h5_writer ghf_h5_writer;

/* Check early (before fitting) that the output path's directory exists and is
 * writable and that the path is not a directory: status 2 + message. */
int ghf_h5_out_check(const char *final_path, char *err, size_t errlen);
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

/* Reads the /summary table of a result file (serial driver, any process).
 * *rows is malloc'd (free() it; NULL when *n_rows == 0). */
int ghf_h5_read_fit_summary(const char *path, ghf_fit_summary **rows, int *n_rows,
                            char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* GHF_H5IO_H */
