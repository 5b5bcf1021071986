/* iocheck.h - what `ghfit fit`, `run`, `generate`, `eval` and `sample` check on rank 0 before
 * they start: the inputs first (the data set, its shape, the row window),
 * then the outputs (writable, distinct from every input and from each
 * other, only ghfit's own files replaced), then the output locks. */
#ifndef GHF_IOCHECK_H
#define GHF_IOCHECK_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "job.h"

typedef struct ghf_io_plan {
    const char *data, *dataset;  /* the input matrix (NULL: none, e.g. generate) */
    int64_t win_start, win_len;  /* fit: the row window (win_len < 0: to the end) */
    int fit_shape;               /* 1: the window must be fittable on n_ranks ranks */
    int factor_only;             /* every fit has the factor form: fewer rows than d + 1 are fine */
    int n_ranks;
    const char *job_file;        /* run: the job file (an input) or NULL */
    const char *out;             /* the output file */
    int out_kind;                /* ghf_path_kind of out (GHF_PATH_RESULT, _GOF, _SCORES or _MATRIX) */
    const char *out_dataset;     /* GHF_PATH_MATRIX: the dataset generate writes */
    const char *checkpoint;      /* or NULL */
    const char *model;           /* eval, sample: the result file read (an input) or NULL */
    int dry;                     /* `ghfit check`: create nothing (no probe file, no
                                    lock), report a lock another process holds */
} ghf_io_plan;

/* The plan of `ghfit fit` (fit = 1: its row window and shape are checked
 * with the inputs) or of `ghfit run` (the job file is an input) on n_ranks
 * ranks; it points into j. */
ghf_io_plan ghf_io_plan_of(const ghf_job *j, int fit, int n_ranks);

/* Collective over comm; rank 0 checks, every rank gets the status and the
 * message.  On success *n_rows and *d (when the plan has data; may be NULL)
 * hold the data set's shape on every rank, and rank 0 holds a lock on the
 * output and the checkpoint until the process ends.  0, 1 or 2. */
int ghf_io_check(MPI_Comm comm, const ghf_io_plan *p, int64_t *n_rows, int *d, char *err, size_t errlen);

/* Rank 0's part of ghf_io_check on its own (serial, no MPI): the same
 * checks in the same order; *n_rows and *d as there; file (file_len bytes)
 * receives the file that holds the data.  Takes the locks unless p->dry. */
int ghf_io_check_local(const ghf_io_plan *p, int64_t *n_rows, int *d, char *file, size_t file_len, char *err,
                       size_t errlen);

#endif
