/* cmd_run.c - `ghfit run JOB.yaml [overrides]`: the fits of a job file
 * (sweeps, rolling windows, arrays) through the fit pipeline (pipeline.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "job.h"
#include "options.h"
#include "pipeline.h"
#include "util.h"

static void run_usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np P ghfit run JOB.yaml [overrides]\n"
            "  Runs the fits of a job file (reference: docs/job-files.md): every combination of\n"
            "  family x symmetric x p x tol x seed x rolling window, in groups of ranks sized to the data.\n"
            "overrides (they replace the job file's keys):\n");
    ghf_opts_usage(GHF_OPT_RUN, f);
    fprintf(f, "exit status: 0 done, 1 run-time failure, 2 bad job file or usage,\n"
               "3 finished and wrote the result, but some fits failed (their status starts with 'failed:'),\n"
               "75 stopped on SIGUSR1/SIGTERM (checkpoint written when requested: rerun with --resume)\n");
}

int ghf_cmd_run(int argc, char **argv)
{
    MPI_Comm world = MPI_COMM_WORLD;
    int rank;
    MPI_Comm_rank(world, &rank);
    ghf_job job;
    ghf_job_defaults(&job);
    /* first pass: the job file and --help; then the file; then the overrides, in order */
    int pos[1], n_pos = 0;
    int st = ghf_opts_parse(GHF_OPT_RUN, argc, argv, 0, &job, pos, 1, &n_pos);
    if (st < 0) {
        if (rank == 0) run_usage(stdout);
        return GHF_EXIT_OK;
    }
    if (!st && n_pos == 0) {
        ghf_error0("run: the job file is missing (usage: ghfit run JOB.yaml [overrides])");
        st = GHF_EXIT_USAGE;
    }
    char err[1024] = "";
    if (!st) {
        st = ghf_job_load_file(world, argv[pos[0]], &job, err, sizeof err);
        if (st) ghf_error0("%s", err);
    }
    if (!st) st = ghf_opts_parse(GHF_OPT_RUN, argc, argv, 1, &job, NULL, 1, NULL);
    if (!st) {
        if (!job.backend) job.backend = strdup("auto");
        if (!job.dataset) job.dataset = strdup("/X");
        st = ghf_job_validate(&job, err, sizeof err);
        if (st) ghf_error0("%s", err);
    }
    if (!st) {
        const ghf_pipe_opts po = {GHF_PIPE_RUN, &ghf_stop_requested};
        st = ghf_pipeline_run(world, &job, &po);
    }
    ghf_job_free(&job);
    return st;
}
