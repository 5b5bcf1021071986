/* postfit.h - what a job asks for after its fits (docs/job-files.md `risk`,
 * `eval`, `gof`): VaR/ES of portfolios under every fit, the next window's
 * exceedances and Kupiec's backtest per chain, out-of-sample
 * log-likelihoods, goodness of fit (bootstrap p-values: the replicates run
 * on rank 0); written into the result file before it is committed. */
#ifndef GHF_POSTFIT_H
#define GHF_POSTFIT_H

#include <mpi.h>
#include <stddef.h>

#include "h5io.h"
#include "job.h"

/* Does the job ask for anything after its fits? */
int ghf_postfit_wanted(const ghf_job *j);

/* Collective over world, before any fit: rank 0 checks the files the keys
 * name (weights [P][d] and eval data of the data's dimension d).  0, or 2
 * with one message naming the job file and its key (the same on every rank). */
int ghf_postfit_check(MPI_Comm world, const ghf_job *j, int d, char *err, size_t errlen);
/* The same checks in this process alone (rank 0's part; `ghfit check run`). */
int ghf_postfit_check_local(const ghf_job *j, int d, char *err, size_t errlen);

/* Rank 0 alone, once every fit is collected: the n fits' records (specs and
 * recs in the same order) -> risk groups, attributes and /backtest in w;
 * the backtest table on stdout (like the fits' table, also when quiet).  beat(arg) is called between
 * fits (the other ranks are waiting).  0, or 1 with a message. */
int ghf_postfit_run(const ghf_job *j, const ghf_fit_spec *specs, const ghf_fit_record *const *recs, int n,
                    ghf_h5_writer *w, void (*beat)(void *), void *arg, char *err, size_t errlen);

#endif
