/* cmd_sample.c - `ghfit sample`: draw a data set from a fit of a result
 * file, with generate's generator (ghf_sample_rows: one stream per row, the
 * rows depend on the seed only) and generate's parallel writer. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "commands.h"
#include "h5io.h"
#include "iocheck.h"
#include "postcmd.h"
#include "sample.h"
#include "score.h"
#include "util.h"

static void sample_usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np P ghfit sample --model RESULT.h5[:/fits/NAME] --n N --seed S --out X.h5 [options]\n"
            "  --model R.h5[:/fits/NAME]  the fit (without :/fits/NAME the file must hold exactly one)\n"
            "  --n N --seed S             rows to draw and the seed (the rows depend on the seed only, not on P)\n"
            "  --dataset NAME             dataset to write (default /X)\n"
            "  --dtype T                  float64 (default) or float32\n"
            "  --quiet                    no summary line\n"
            "A mixture fit (n_components K >= 2): each row takes a component by the proportions, then that\n"
            "component's draw (the component is not recorded; ghfit eval's /cluster gives the MAP one).\n"
            "exit status: 0 done, 1 run-time failure, 2 bad input (no output file left)\n");
}

int ghf_sample_law(const ghf_fit_law *law, const char *file, ghf_params *t, double *L, char *err, size_t errlen)
{
    const int d = law->d;
    memcpy(t->mu, law->mu, (size_t)d * sizeof(double));
    memcpy(t->gamma, law->gamma, (size_t)d * sizeof(double));
    memcpy(t->sigma, law->sigma, (size_t)d * d * sizeof(double));
    t->p = law->p;
    t->a = law->a;
    t->b = law->b;
    if (ghf_cholesky(d, t->sigma, L) == 0) return 0;
    snprintf(err, errlen, "%.1000s:/fits/%s: Sigma is not positive definite", file, law->name);
    return GHF_EXIT_USAGE;
}

int ghf_sample_mix_law(const ghf_fit_law *law, const char *file, ghf_mixture *m, double *L, char *err,
                       size_t errlen)
{
    const int d = law->d;
    for (int k = 0; k < m->K; k++) {
        m->prop[k] = law->prop[k];
        const int st = ghf_sample_law(&law->comp[k], file, &m->comp[k], L + (size_t)k * d * d, err, errlen);
        if (st) {
            snprintf(err, errlen, "%.1000s:/fits/%s/components/%d/params/sigma: not positive definite", file,
                     law->name, k);
            return st;
        }
    }
    return 0;
}

ghf_io_plan ghf_sample_plan(const ghf_sample_opts *so, const char *file, int n_ranks)
{
    const ghf_io_plan plan = {.win_len = -1, .n_ranks = n_ranks, .out = so->out, .out_kind = GHF_PATH_SAMPLE,
                              .out_dataset = so->dataset, .model = file};
    return plan;
}

/* Collective: draw and write.  The exit status, message in err. */
static int sample_run(MPI_Comm comm, const ghf_sample_opts *so, const char *file, const char *name, char *err,
                      size_t errlen)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    ghf_fit_law law;
    ghf_family fam;
    int st = ghf_fit_law_load(comm, file, name, &law, &fam, err, errlen);
    if (st) return st;
    const ghf_io_plan plan = ghf_sample_plan(so, file, size);
    st = ghf_io_check(comm, &plan, NULL, NULL, err, errlen);
    const int d = law.d;
    if (!st) { /* before any allocation: the rows of a rank and the write's buffer (agreed: nodes differ) */
        st = ghf_rows_mem_check("sample --n", so->n, d, size, GHF_SAMPLE_BYTES_PER_VALUE, err, errlen);
        st = ghf_agree(comm, st, err, errlen);
    }
    int64_t row0 = 0, nrows = 0;
    ghf_block_range(so->n, rank, size, &row0, &nrows);
    ghf_params t;
    memset(&t, 0, sizeof t);
    ghf_mixture mx; /* a mixture (K >= 2): its components and their K Cholesky factors */
    memset(&mx, 0, sizeof mx);
    const int K = law.n_components;
    double *L = NULL, *x = NULL, *zb = NULL;
    if (!st) {
        L = calloc((size_t)d * (size_t)d * (size_t)(K >= 2 ? K : 1), sizeof(double));
        x = malloc((size_t)(nrows > 0 ? nrows : 1) * (size_t)d * sizeof(double));
        zb = malloc((size_t)d * sizeof(double));
        const int oom = (K >= 2 ? ghf_mixture_alloc(&mx, K, d) : ghf_params_alloc(&t, d)) != 0 || !L || !x || !zb;
        if (oom) snprintf(err, errlen, "sample: out of memory for %lld x %d values", (long long)nrows, d);
        st = ghf_agree(comm, oom, err, errlen);
    }
    if (!st) /* the same verdict on every rank */
        st = K >= 2 ? ghf_sample_mix_law(&law, file, &mx, L, err, errlen) : ghf_sample_law(&law, file, &t, L, err, errlen);
    if (!st) {
        int64_t bad = K >= 2 ? ghf_sample_mix_rows(&mx, L, (uint64_t)so->seed, row0, nrows, x, zb, NULL)
                             : ghf_sample_rows(&t, L, (uint64_t)so->seed, row0, nrows, x, zb),
                first = 0;
        if (bad < 0) bad = INT64_MAX;
        MPI_Allreduce(&bad, &first, 1, MPI_INT64_T, MPI_MIN, comm);
        if (first != INT64_MAX) {
            if (K >= 2)
                snprintf(err, errlen, "sample: row %lld: the draw is not finite under %.1000s:/fits/%s (a %d-component "
                         "mixture)", (long long)first, file, law.name, K);
            else
                snprintf(err, errlen, "sample: row %lld: the draw is not finite under %.1000s:/fits/%s (p=%g a=%g b=%g)",
                         (long long)first, file, law.name, law.p, law.a, law.b);
            st = GHF_EXIT_USAGE;
        }
    }
    if (!st) {
        char ss[32], sn[32], sd[32], sk[32];
        snprintf(ss, sizeof ss, "%lld", (long long)so->seed);
        snprintf(sn, sizeof sn, "%lld", (long long)so->n);
        snprintf(sd, sizeof sd, "%d", d);
        snprintf(sk, sizeof sk, "%d", K >= 2 ? K : 1);
        const char *keys[] = {"model", "seed", "n", "dim", "model_file", "fit_name", "command_line", "n_components"};
        const char *vals[] = {law.family, ss, sn, sd, file, law.name, ghf_command_line(), sk};
        st = ghf_h5_write_matrix(comm, so->out, so->dataset, so->n, d, row0, nrows, x, so->bits, K >= 2 ? 8 : 7, keys,
                                 vals, err, errlen);
        char kc[48] = "";
        if (K >= 2) snprintf(kc, sizeof kc, "%d-component mixture, ", K);
        if (!st && !so->quiet)
            ghf_print0("wrote %s:%s (%lld x %d %s, drawn from %s:/fits/%s (%s%s), seed %lld)\n", so->out, so->dataset,
                       (long long)so->n, d, so->bits == 32 ? "float32" : "float64", file, law.name, kc, law.family,
                       (long long)so->seed);
    }
    free(L);
    free(x);
    free(zb);
    ghf_params_free(&t);
    ghf_mixture_free(&mx);
    ghf_fit_law_free(&law);
    return st;
}

int ghf_sample_parse(int argc, char **argv, ghf_sample_opts *so)
{
    *so = (ghf_sample_opts){NULL, NULL, "/X", -1, -1, 64, 0};
    const char *dtype = "float64";
    enum { O_MODEL = 256, O_N, O_SEED, O_OUT, O_DATASET, O_DTYPE, O_QUIET, O_HELP };
    static const struct option opts[] = {
        {"model", required_argument, 0, O_MODEL}, {"n", required_argument, 0, O_N},
        {"seed", required_argument, 0, O_SEED},   {"out", required_argument, 0, O_OUT},
        {"dataset", required_argument, 0, O_DATASET}, {"dtype", required_argument, 0, O_DTYPE},
        {"quiet", no_argument, 0, O_QUIET},       {"help", no_argument, 0, O_HELP},
        {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        const char *bad = NULL;
        switch (c) {
        case O_MODEL: so->model = optarg; break;
        case O_OUT: so->out = optarg; break;
        case O_DATASET: so->dataset = optarg; break;
        case O_DTYPE: dtype = optarg; break;
        case O_QUIET: so->quiet = 1; break;
        case O_N: if (ghf_parse_int64(optarg, &so->n) || so->n < 1) bad = "--n"; break;
        case O_SEED: if (ghf_parse_int64(optarg, &so->seed) || so->seed < 0) bad = "--seed"; break;
        case O_HELP: return -1;
        default:
            ghf_error0("sample: unknown or incomplete option '%s' (see ghfit sample --help)", argv[optind - 1]);
            return GHF_EXIT_USAGE;
        }
        if (bad) {
            ghf_error0("%s: invalid value '%s'", bad, optarg);
            return GHF_EXIT_USAGE;
        }
    }
    if (optind < argc) { ghf_error0("sample: unexpected argument '%s'", argv[optind]); return GHF_EXIT_USAGE; }
    if (!so->model) { ghf_error0("sample: --model is required (RESULT.h5[:/fits/NAME])"); return GHF_EXIT_USAGE; }
    if (so->n < 1) { ghf_error0("sample: --n is required"); return GHF_EXIT_USAGE; }
    if (so->seed < 0) { ghf_error0("sample: --seed is required"); return GHF_EXIT_USAGE; }
    if (!so->out) { ghf_error0("sample: --out is required"); return GHF_EXIT_USAGE; }
    if (strcmp(dtype, "float64") == 0) so->bits = 64;
    else if (strcmp(dtype, "float32") == 0) so->bits = 32;
    else { ghf_error0("--dtype: '%s' is not float64 or float32", dtype); return GHF_EXIT_USAGE; }
    return 0;
}

int ghf_cmd_sample(int argc, char **argv)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    ghf_sample_opts so;
    int st = ghf_sample_parse(argc, argv, &so);
    if (st < 0) {
        if (rank == 0) sample_usage(stdout);
        return GHF_EXIT_OK;
    }
    if (st) return st;
    char file[4096], name[64], err[2048] = "";
    st = ghf_model_ref_parse(so.model, file, sizeof file, name, sizeof name, err, sizeof err);
    if (!st) st = sample_run(MPI_COMM_WORLD, &so, file, name, err, sizeof err);
    if (st) ghf_error0("%s", err);
    return st;
}
