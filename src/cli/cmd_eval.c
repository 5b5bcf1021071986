/* cmd_eval.c - `ghfit eval`: per-row log-densities, Mahalanobis distances
 * and posterior moments of a data set under a fit (src/pipeline/score.c). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "postcmd.h"
#include "score.h"
#include "util.h"

static void eval_usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np P ghfit eval --model RESULT.h5[:/fits/NAME] --data X.h5 --out SCORES.h5 [options]\n"
            "  --model R.h5[:/fits/NAME]  the fit (without :/fits/NAME the file must hold exactly one)\n"
            "  --data FILE                the rows to score (an N x d matrix of the fit's dimension)\n"
            "  --dataset NAME             dataset of --data (default /X)\n"
            "  --out FILE                 writes /logpdf, /mahalanobis, /e_y, /e_invy (float64 [N], row order)\n"
            "                             and /nonfinite (uint8 [N]); root attributes loglik, mean_loglik,\n"
            "                             n_obs (rows with a finite log-density), n_rows, model_file, fit_name,\n"
            "                             family, n_components; a mixture fit adds /responsibility (float64\n"
            "                             [N][K]) and /cluster (int32 [N], the MAP component; -1: flagged row)\n"
            "  --backend auto|cpu|cuda    eval always runs on the CPU (one E-step pass)\n"
            "  --quiet                    no summary line\n"
            "The output does not depend on the number of ranks P.\n"
            "exit status: 0 done, 1 run-time failure, 2 bad input (no output file left)\n");
}

int ghf_eval_parse(int argc, char **argv, ghf_eval_args *a)
{
    memset(a, 0, sizeof *a);
    a->o.dataset = "/X";
    a->o.backend = "auto";
    ghf_eval_opts *o = &a->o;
    enum { O_MODEL = 256, O_DATA, O_DATASET, O_OUT, O_BACKEND, O_QUIET, O_HELP };
    static const struct option opts[] = {
        {"model", required_argument, 0, O_MODEL},     {"data", required_argument, 0, O_DATA},
        {"dataset", required_argument, 0, O_DATASET}, {"out", required_argument, 0, O_OUT},
        {"backend", required_argument, 0, O_BACKEND}, {"quiet", no_argument, 0, O_QUIET},
        {"help", no_argument, 0, O_HELP},             {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case O_MODEL: a->model = optarg; break;
        case O_DATA: o->data = optarg; break;
        case O_DATASET: o->dataset = optarg; break;
        case O_OUT: o->out = optarg; break;
        case O_BACKEND: o->backend = optarg; break;
        case O_QUIET: a->quiet = 1; break;
        case O_HELP: return -1;
        default:
            ghf_error0("eval: unknown or incomplete option '%s' (see ghfit eval --help)", argv[optind - 1]);
            return GHF_EXIT_USAGE;
        }
    }
    if (optind < argc) { ghf_error0("eval: unexpected argument '%s'", argv[optind]); return GHF_EXIT_USAGE; }
    if (!a->model) { ghf_error0("eval: --model is required (RESULT.h5[:/fits/NAME])"); return GHF_EXIT_USAGE; }
    if (!o->data) { ghf_error0("eval: --data is required"); return GHF_EXIT_USAGE; }
    if (!o->out) { ghf_error0("eval: --out is required"); return GHF_EXIT_USAGE; }
    if (strcmp(o->backend, "auto") && strcmp(o->backend, "cpu") && strcmp(o->backend, "cuda")) {
        ghf_error0("--backend: '%s' is not auto, cpu or cuda", o->backend);
        return GHF_EXIT_USAGE;
    }
    return 0;
}

int ghf_cmd_eval(int argc, char **argv)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    ghf_eval_args a;
    int st = ghf_eval_parse(argc, argv, &a);
    if (st < 0) {
        if (rank == 0) eval_usage(stdout);
        return GHF_EXIT_OK;
    }
    if (st) return st;
    ghf_eval_opts o = a.o;
    char file[4096], name[64], err[2048] = "";
    st = ghf_model_ref_parse(a.model, file, sizeof file, name, sizeof name, err, sizeof err);
    if (st) {
        ghf_error0("%s", err);
        return st;
    }
    if (!strcmp(o.backend, "cuda") && !a.quiet) ghf_note0("eval runs on the CPU (--backend cuda is not used by eval)");
    o.model_file = file;
    o.fit_name = name;
    ghf_eval_result res;
    st = ghf_eval_run(MPI_COMM_WORLD, &o, &res, err, sizeof err);
    if (st) {
        ghf_error0("%s", err);
        return st;
    }
    if (!a.quiet)
    {
        char kc[48] = "";
        if (res.n_components >= 2) snprintf(kc, sizeof kc, "%d-component mixture, ", res.n_components);
        ghf_print0("wrote %s: %lld rows scored under %s:/fits/%s (%s%s, d = %d): loglik %.10g over %lld finite rows "
                   "(mean %.6g), %lld flagged; read %.3f s, eval %.3f s, write %.3f s\n",
                   o.out, (long long)res.n_rows, file, res.fit_name, kc, res.family, res.d, res.loglik,
                   (long long)res.n_obs, res.n_obs > 0 ? res.loglik / (double)res.n_obs : 0.0,
                   (long long)res.n_nonfinite, res.seconds_read, res.seconds_eval, res.seconds_write);
    }
    return GHF_EXIT_OK;
}
