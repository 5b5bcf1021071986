/* commands.h - the subcommands of the ghfit program. Each returns an exit status (util.h). */
#ifndef GHF_COMMANDS_H
#define GHF_COMMANDS_H

#include <mpi.h>
#include <signal.h>
#include <stddef.h>

#include "job.h"

int ghf_cmd_fit(int argc, char **argv);
int ghf_cmd_generate(int argc, char **argv);
int ghf_cmd_run(int argc, char **argv);     /* job files and sweeps */
int ghf_cmd_summary(int argc, char **argv); /* combined summary tables */
int ghf_cmd_eval(int argc, char **argv);    /* score a data set under a fit */
int ghf_cmd_sample(int argc, char **argv);  /* draw from a fit */
int ghf_cmd_risk(int argc, char **argv);    /* VaR and ES of portfolios under a fit */
int ghf_cmd_gof(int argc, char **argv);     /* goodness of fit of a fit on a data set */
int ghf_cmd_optimize(int argc, char **argv); /* minimum-risk portfolios and frontiers under a fit */
int ghf_cmd_check(int argc, char **argv);   /* `ghfit check fit|run ...`: serial, without MPI */

/* The job of `ghfit fit ARGS` and of `ghfit run JOB.yaml [overrides]`
 * (argv[0] the command), as those commands build it: 0, -1 for --help, or
 * an exit status after one error line.  ghf_run_job reads the job file on
 * rank 0 and broadcasts it, or, serial = 1, reads it itself (no MPI call).
 * Free the job with ghf_job_free in every case. */
int ghf_fit_job(int argc, char **argv, ghf_job *j);
int ghf_run_job(int serial, int argc, char **argv, ghf_job *j);

/* SIGUSR1 / SIGTERM set this flag to the signal's number (async-signal-safe);
 * the EM loop turns it into a collective stop at the next iteration boundary.
 * main installs the handlers as its first instruction, so a request that
 * arrives during start-up (MPI_Init, reading the data) is honoured once
 * start-up is done.  Commands that cannot stop cleanly (generate, summary,
 * eval, sample, gof, risk) release them (again after MPI_Init): the signal
 * ends the process as by its default action, after removing the temporary
 * file and the lock of an output being written (ghf_out_abandon), and a
 * pending signal is re-raised.  SIGINT and SIGHUP end every command, fit and
 * run too, the same way (unless the process started with them ignored). */
extern volatile sig_atomic_t ghf_stop_requested;
void ghf_install_stop_handlers(void);
void ghf_release_stop_handlers(void);
/* After ghf_install_stop_handlers: unblocks the stop signals that ghfit-launch
 * held back from exec on (GHFIT_HELD_SIGNALS); one that arrived meanwhile is
 * delivered then, to the handlers.  Without ghfit-launch: nothing. */
void ghf_unhold_stop_signals(void);

#endif
