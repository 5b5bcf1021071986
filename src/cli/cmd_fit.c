/* cmd_fit.c - `ghfit fit`: one fit of an HDF5 matrix across all ranks: a
 * job of one fit, through the same pipeline as `ghfit run` (pipeline.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "job.h"
#include "options.h"
#include "pipeline.h"
#include "util.h"

static void fit_usage(FILE *f)
{
    fprintf(f, "usage: mpirun -np P ghfit fit --data DATA.h5 --model gh|hyp|nig|vg|t|gauss --out RESULT.h5 "
               "[options]\n");
    ghf_opts_usage(GHF_OPT_FIT, f);
    fprintf(f, "exit status: 0 done, 1 run-time failure (the fit failed: no result file), 2 bad input,\n"
               "75 stopped on SIGUSR1/SIGTERM (checkpoint written when requested: rerun with --resume)\n");
}

int ghf_fit_job(int argc, char **argv, ghf_job *j)
{
    ghf_job_defaults(j);
    int st = ghf_opts_parse(GHF_OPT_FIT, argc, argv, 1, j, NULL, 0, NULL);
    if (st) return st;
    if (!j->data_file) { ghf_error0("fit: --data is required"); return GHF_EXIT_USAGE; }
    if (!j->out) { ghf_error0("fit: --out is required"); return GHF_EXIT_USAGE; }
    if (!j->fit_name) { ghf_error0("fit: --model is required (%s)", ghf_family_list()); return GHF_EXIT_USAGE; }
    if (j->resume && !j->checkpoint) { ghf_error0("--resume needs --checkpoint FILE"); return GHF_EXIT_USAGE; }
    const ghf_model m = {j->family[0], j->sym[0], j->p[0].fixed, j->p[0].value};
    char why[256];
    if (ghf_model_check(&m, 1, why, sizeof why)) {
        ghf_error0("%s", why);
        return GHF_EXIT_USAGE;
    }
    j->source = strdup("fit");
    if (!j->backend) j->backend = strdup("auto");
    if (!j->dataset) j->dataset = strdup("/X");
    j->checkpoint_every = j->checkpoint_every > 0 ? j->checkpoint_every : GHF_JOB_DEFAULT_CKPT_EVERY;
    if (!j->source || !j->backend || !j->dataset) {
        ghf_error0("out of memory");
        return GHF_EXIT_RUNTIME;
    }
    char err[512];
    if (ghf_job_check_weights(j, err, sizeof err) || ghf_job_check_sigma(j, err, sizeof err) ||
        ghf_job_check_mixture(j, err, sizeof err)) {
        ghf_error0("%s", err);
        return GHF_EXIT_USAGE;
    }
    return 0;
}

int ghf_cmd_fit(int argc, char **argv)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    ghf_job job;
    int st = ghf_fit_job(argc, argv, &job);
    if (st < 0) {
        if (rank == 0) fit_usage(stdout);
        st = GHF_EXIT_OK;
    } else if (!st) {
        const ghf_pipe_opts po = {GHF_PIPE_FIT, &ghf_stop_requested};
        st = ghf_pipeline_run(MPI_COMM_WORLD, &job, &po);
    }
    ghf_job_free(&job);
    return st;
}
