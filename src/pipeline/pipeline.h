/* pipeline.h - the one fit pipeline of `ghfit fit` and `ghfit run`: a job's
 * fits on groups of ranks, the collector on rank 0, checkpoints and resume,
 * and the result file.  `ghfit fit` is a job of one fit (ghf_job.fit_name)
 * run in GHF_PIPE_FIT mode, which keeps that command's messages and exit
 * statuses: a fit that fails is an error (exit 1 or 2) rather than a
 * recorded failure (exit 3), and the fitted law is printed at the end. */
#ifndef GHF_PIPELINE_H
#define GHF_PIPELINE_H

#include <mpi.h>
#include <signal.h>

#include "job.h"
#include "resume.h"

typedef enum { GHF_PIPE_RUN = 0, GHF_PIPE_FIT = 1 } ghf_pipe_mode;

typedef struct ghf_pipe_opts {
    ghf_pipe_mode mode;
    volatile sig_atomic_t *stop; /* set (nonzero) by a stop request: SIGUSR1/SIGTERM */
} ghf_pipe_opts;

/* Collective over world.  Checks the inputs and outputs, expands the job,
 * fits, writes the result (or the checkpoint after a stop), and prints one
 * `ghfit: error:` (or, for a planned stop, `ghfit: note:`) line on rank 0.
 * Returns the exit status (util.h), the same on every rank. */
int ghf_pipeline_run(MPI_Comm world, const ghf_job *job, const ghf_pipe_opts *o);

/* What the run decides before it fits, for `ghfit check` too: */
/* the number of groups of `size` ranks: about rows_per_rank rows per rank
 * of the largest window, at most one group per fit */
int ghf_pipeline_groups(const ghf_job *j, const ghf_fit_spec *specs, int n_specs, int size);
/* `ghfit run`: every window fittable on `size` ranks (rows > d, memory;
 * ghf_fit_shape_check): 0, or 2 naming the job file and the window */
int ghf_pipeline_windows_check(const ghf_job *j, const ghf_fit_spec *specs, int n_specs, int d, int size, char *err,
                               size_t errlen);
/* --weights (job key weights): the dataset exists, is a vector (or N x 1)
 * and has one value per row of the data set (n: its length; may be NULL).
 * This process alone, no MPI: 0, or 2 with the run's message. */
int ghf_weights_probe(const ghf_job *j, int64_t *n, char *err, size_t errlen);
/* --halflife: would a window of n rows of dimension d have the d + 1
 * effective rows a fit needs (Kish's n_eff of its exponential weights, the
 * run's rule; `ghfit check`)?  0, or 2 with the run's message. */
int ghf_halflife_check(const ghf_job *j, int64_t n, int d, char *err, size_t errlen);

/* Every fit's --sigma factor:R has R < d: 0, or 2 with a message. */
int ghf_pipeline_sigma_check(const ghf_fit_spec *specs, int n_specs, int d, int se, char *err, size_t errlen);
/* the identity a checkpoint of this run must match (cfg: the job's
 * ghf_job_config_text, used in GHF_PIPE_RUN mode; kept by reference) */
ghf_ckpt_id ghf_pipeline_ckpt_id(const ghf_job *j, ghf_pipe_mode mode, int64_t n_rows, int d, int n_specs,
                                 const char *cfg);

#endif
