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

#endif
