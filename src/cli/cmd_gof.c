/* cmd_gof.c - `ghfit gof`: goodness of fit of a fitted law on a data set:
 * per-margin PITs with KS/AD/CvM and QQ tables, and the PIT of the radial
 * statistic (src/law/gof.h).  The ranks read shards and keep them: every
 * column is sorted across the ranks and the statistics come from the ranks'
 * pieces of the order (src/pipeline/gofdist.h; the same bits for any number
 * of ranks; a rank's piece must stay below 2^31 values); with --bootstrap B
 * every rank refits its share of the replicates (src/pipeline/gofboot.h);
 * rank 0 writes the file (temp file, then rename). */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "commands.h"
#include "em.h"
#include "family.h"
#include "ghf_version.h"
#include "gof.h"
#include "gofboot.h"
#include "gofdist.h"
#include "h5io.h"
#include "iocheck.h"
#include "postcmd.h"
#include "score.h"
#include "util.h"

#define GOF_PIT_MAX 2000000 /* /margins/pit and /radial/pit are written when n * (d + 1) is at most this */

static void gof_usage(FILE *f)
{
    fprintf(f,
            "usage: [mpirun -np P] ghfit gof --model RESULT.h5[:/fits/NAME] --data X.h5 --out GOF.h5 [options]\n"
            "  --model R.h5[:/fits/NAME]  the fit (without :/fits/NAME the file must hold exactly one)\n"
            "  --data FILE                the rows to check (an N x d matrix of the fit's dimension)\n"
            "  --dataset NAME             dataset of --data (default /X)\n"
            "  --out FILE                 /margins/{ks,ad,cvm,ks_p,ad_p,cvm_p} [d], /margins/qq [d][Q][2],\n"
            "                             /radial/{ks,ad,cvm,...} and /radial/qq [Q][2] (docs/output-schema.md)\n"
            "  --qq Q                     QQ probabilities (i - 0.5)/Q, i = 1..Q (default 200)\n"
            "  --drop-nonfinite           drop rows holding NaN or inf (default: they are an error)\n"
            "  --exact-max N              PITs exact for every row up to N rows (default 20000); beyond,\n"
            "  --knots K                  exact at K order statistics (default 4096) and interpolated\n"
            "  --bootstrap B              also parametric-bootstrap p-values (*_p_boot): B draws of N rows\n"
            "                             from the fit, each refitted (same family, symmetric, fixed p) and\n"
            "                             checked again; the replicates are spread over the ranks\n"
            "  --seed S                   seed of the bootstrap draws (default 1; the result does not depend on P)\n"
            "  --tol T, --max-iter M      the refits' EM tolerance and iteration cap (default 1e-10, 5000)\n"
            "  --quiet                    no summary line, no progress\n"
            "ks_p, ad_p, cvm_p are asymptotic and treat the fitted parameters as known; the *_p_boot\n"
            "p-values of --bootstrap account for the fit.  Under a mixture fit the margins are checked\n"
            "through their mixture cdf; /radial/ is NaN (no single mu and Sigma); no --bootstrap.\n"
            "exit status: 0 done, 1 run-time failure, 2 bad input (no output file left)\n");
}

int ghf_gof_parse(int argc, char **argv, ghf_gof_opts *o)
{
    *o = (ghf_gof_opts){NULL, NULL, "/X", NULL, 200, 0, 0, 20000, 4096, 0, 1, GHF_DEFAULT_TOL, GHF_DEFAULT_MAX_ITER};
    enum { O_MODEL = 256, O_DATA, O_DATASET, O_OUT, O_QQ, O_DROP, O_EXACT, O_KNOTS, O_QUIET, O_HELP, O_BOOT, O_SEED,
           O_TOL, O_MAXIT };
    static const struct option opts[] = {
        {"model", required_argument, 0, O_MODEL},   {"data", required_argument, 0, O_DATA},
        {"dataset", required_argument, 0, O_DATASET}, {"out", required_argument, 0, O_OUT},
        {"qq", required_argument, 0, O_QQ},          {"drop-nonfinite", no_argument, 0, O_DROP},
        {"exact-max", required_argument, 0, O_EXACT}, {"knots", required_argument, 0, O_KNOTS},
        {"quiet", no_argument, 0, O_QUIET},          {"help", no_argument, 0, O_HELP},
        {"bootstrap", required_argument, 0, O_BOOT}, {"seed", required_argument, 0, O_SEED},
        {"tol", required_argument, 0, O_TOL},        {"max-iter", required_argument, 0, O_MAXIT},
        {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case O_MODEL: o->model = optarg; break;
        case O_DATA: o->data = optarg; break;
        case O_DATASET: o->dataset = optarg; break;
        case O_OUT: o->out = optarg; break;
        case O_QQ:
            if (ghf_parse_int(optarg, &o->Q) || o->Q < 1 || o->Q > 100000) {
                ghf_error0("--qq: '%s' is not an integer in [1, 100000]", optarg);
                return GHF_EXIT_USAGE;
            }
            break;
        case O_DROP: o->drop = 1; break;
        case O_EXACT:
            if (ghf_parse_int64(optarg, &o->nexact) || o->nexact < 0) {
                ghf_error0("--exact-max: '%s' is not a non-negative integer", optarg);
                return GHF_EXIT_USAGE;
            }
            break;
        case O_KNOTS:
            if (ghf_parse_int64(optarg, &o->nknots) || o->nknots < 16 || o->nknots > 10000000) {
                ghf_error0("--knots: '%s' is not an integer in [16, 1e7]", optarg);
                return GHF_EXIT_USAGE;
            }
            break;
        case O_BOOT:
            if (ghf_parse_int(optarg, &o->B) || o->B < 1 || o->B > GHF_GOF_BOOT_MAX) {
                ghf_error0("--bootstrap: '%s' is not an integer in [1, %d]", optarg, GHF_GOF_BOOT_MAX);
                return GHF_EXIT_USAGE;
            }
            break;
        case O_SEED:
            if (ghf_parse_int64(optarg, &o->seed) || o->seed < 0) {
                ghf_error0("--seed: '%s' is not a non-negative integer", optarg);
                return GHF_EXIT_USAGE;
            }
            break;
        case O_TOL:
            if (ghf_parse_double(optarg, &o->tol) || !(o->tol > 0.0 && o->tol < 1.0)) {
                ghf_error0("--tol: '%s' is not a number in (0, 1)", optarg);
                return GHF_EXIT_USAGE;
            }
            break;
        case O_MAXIT:
            if (ghf_parse_int(optarg, &o->max_iter) || o->max_iter < 1) {
                ghf_error0("--max-iter: '%s' is not a positive integer", optarg);
                return GHF_EXIT_USAGE;
            }
            break;
        case O_QUIET: o->quiet = 1; break;
        case O_HELP: return -1;
        default:
            ghf_error0("gof: unknown or incomplete option '%s' (see ghfit gof --help)", argv[optind - 1]);
            return GHF_EXIT_USAGE;
        }
    }
    if (optind < argc) { ghf_error0("gof: unexpected argument '%s'", argv[optind]); return GHF_EXIT_USAGE; }
    if (!o->model) { ghf_error0("gof: --model is required (RESULT.h5[:/fits/NAME])"); return GHF_EXIT_USAGE; }
    if (!o->data) { ghf_error0("gof: --data is required"); return GHF_EXIT_USAGE; }
    if (!o->out) { ghf_error0("gof: --out is required"); return GHF_EXIT_USAGE; }
    return 0;
}

ghf_io_plan ghf_gof_plan(const ghf_gof_opts *o, const char *file, int n_ranks)
{
    const ghf_io_plan plan = {.data = o->data, .dataset = o->dataset, .win_len = -1, .n_ranks = n_ranks,
                              .out = o->out, .out_kind = GHF_PATH_GOF, .model = file};
    return plan;
}

int ghf_gof_rows_check(int64_t n, int ranks, char *err, size_t errlen)
{
    if (ranks < 1) ranks = 1;
    if (n > (int64_t)GHF_GOF_MAX_N) {
        snprintf(err, errlen, "gof: %lld rows: at most %lld (2^35) per column (the exact sums of the statistics)",
                 (long long)n, (long long)GHF_GOF_MAX_N);
        return 2;
    }
    if ((n + ranks - 1) / ranks < INT_MAX) return 0;
    snprintf(err, errlen,
             "gof: %lld rows on %d rank%s: each rank sorts its share of every column, fewer than 2^31 values "
             "(MPI counts); use at least %lld ranks",
             (long long)n, ranks, ranks == 1 ? "" : "s", (long long)(n / INT_MAX + 1));
    return 2;
}

int ghf_gof_min_rows(const ghf_gof_opts *o, int64_t n, char *err, size_t errlen)
{
    if (n >= 2) return 0;
    snprintf(err, errlen, "%s:%s: %lld finite rows; gof needs at least 2", o->data, o->dataset, (long long)n);
    return 2;
}

static void gof_progress(const char *what, int done, int total)
{
    ghf_note0("gof: %s %d/%d done", what, done, total);
}

/* Rank 0: the file.  0 or 1. */
static int gof_write(const ghf_gof_opts *o, const ghf_fit_law *law, const ghf_gof_input *in, const ghf_gof_result *r,
                     const ghf_gof_boot *bt, int64_t n_dropped, int size, char *err, size_t errlen)
{
    const int64_t d = law->d, Q = in->Q, n = (int64_t)in->n;
    char method[256];
    if (r->exact) snprintf(method, sizeof method, "exact: every PIT is a cdf value");
    else
        snprintf(method, sizeof method,
                 "interpolated: exact cdf at %lld order statistics (and the 32 extreme ones at each end), Steffen's "
                 "monotone cubic in between",
                 (long long)o->nknots);
    ghf_h5_attr at[24] = {
        {"model_file", GHF_H5_ATTR_STR, o->model, 0, 0},
        {"fit_name", GHF_H5_ATTR_STR, law->name, 0, 0},
        {"family", GHF_H5_ATTR_STR, law->family, 0, 0},
        {"data_file", GHF_H5_ATTR_STR, o->data, 0, 0},
        {"dataset", GHF_H5_ATTR_STR, o->dataset, 0, 0},
        {"n_obs", GHF_H5_ATTR_I64, NULL, 0, n},
        {"n_dropped", GHF_H5_ATTR_I64, NULL, 0, n_dropped},
        {"dim", GHF_H5_ATTR_I64, NULL, 0, d},
        {"n_qq", GHF_H5_ATTR_I64, NULL, 0, Q},
        {"pit_method", GHF_H5_ATTR_STR, method, 0, 0},
        {"pit_max_error", GHF_H5_ATTR_F64, NULL, r->pit_err, 0},
        {"radial_delta2", GHF_H5_ATTR_F64, NULL, r->delta2, 0},
        {"p_values", GHF_H5_ATTR_STR,
         "asymptotic (KS: Kolmogorov's limit with Stephens' correction; AD: Marsaglia & Marsaglia 2004; CvM: "
         "Anderson & Darling 1952), with the fitted parameters taken as known",
         0, 0}};
    int na = 13;
    if (law->n_components >= 2) { /* a mixture: its margins only */
        at[na++] = (ghf_h5_attr){"n_components", GHF_H5_ATTR_I64, NULL, 0, law->n_components};
        at[na++] = (ghf_h5_attr){"radial_note", GHF_H5_ATTR_STR,
                                 "not defined for a mixture (no single mu and Sigma): /radial/ holds NaN; the "
                                 "margins' PITs are their mixture cdf sum_k pi_k F_kj", 0, 0};
    }
    if (bt) {
        at[na++] = (ghf_h5_attr){"bootstrap", GHF_H5_ATTR_I64, NULL, 0, bt->B};
        at[na++] = (ghf_h5_attr){"seed", GHF_H5_ATTR_I64, NULL, 0, bt->seed};
        at[na++] = (ghf_h5_attr){"bootstrap_failed", GHF_H5_ATTR_I64, NULL, 0, bt->n_failed};
        at[na++] = (ghf_h5_attr){"bootstrap_max_iter", GHF_H5_ATTR_I64, NULL, 0, bt->n_capped};
        at[na++] = (ghf_h5_attr){"bootstrap_tol", GHF_H5_ATTR_F64, NULL, o->tol, 0};
        if (bt->why[0]) at[na++] = (ghf_h5_attr){"bootstrap_note", GHF_H5_ATTR_STR, bt->why, 0, 0};
    }
    ghf_gof_names nm;
    ghf_h5_array a[GHF_GOF_MAX_ARRAYS];
    const int k = ghf_gof_arrays("", d, Q, n, r, bt, &nm, a);
    const ghf_out_meta meta = {.version = GHFIT_VERSION, .git_commit = GHFIT_GIT_COMMIT,
                               .command_line = ghf_command_line(), .n_ranks = size};
    return ghf_h5_write_arrays(o->out, &meta, "gof", na, at, k, a, err, errlen);
}

/* Collective: the observed statistics into r from the ranks' rows x (nloc
 * each; r is complete on every rank but the PITs: rank 0 only).  0, 1 or 2
 * (agreed). */
static int gof_observe(const ghf_gof_opts *o, const ghf_fit_law *law, const ghf_gof_input *in, const double *x,
                       size_t nloc, ghf_gof_result *r, char *err, size_t errlen)
{
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (ghf_gof_min_rows(o, (int64_t)in->n, err, errlen)) return 2;
    if (ghf_gof_rows_check((int64_t)in->n, size, err, errlen)) return 2;
    int st = ghf_gof_compute_dist(MPI_COMM_WORLD, in, x, nloc, r, err, errlen);
    if (st == 2 && strncmp(err, "the fit's", 9) == 0) {
        char e2[1024];
        snprintf(e2, sizeof e2, "%s:/fits/%s: %s", o->model, law->name, err);
        snprintf(err, errlen, "%s", e2);
    }
    return st;
}

/* Rank 0: write and say so.  0 or 1. */
static int gof_finish(const ghf_gof_opts *o, const ghf_fit_law *law, const ghf_gof_input *in, const ghf_gof_result *r,
                      const ghf_gof_boot *bt, int64_t n_dropped, int size, double secs, char *err, size_t errlen)
{
    const int st = gof_write(o, law, in, r, bt, n_dropped, size, err, errlen);
    if (st || o->quiet) return st;
    double kmin = 1.0;
    for (int j = 0; j < law->d; j++) kmin = fmin(kmin, r->ks_p[j]);
    if (law->n_components >= 2)
        ghf_print0("wrote %s: %lld rows under %s:/fits/%s (%d-component mixture of %s, d = %d): smallest margin KS p "
                   "%.3g (margins through the mixture cdf; no radial statistic for a mixture); PITs %s (max error "
                   "%.1e); %.2f s\n",
                   o->out, (long long)in->n, o->model, law->name, law->n_components, law->family, law->d, kmin,
                   r->exact ? "exact" : "interpolated", r->pit_err, secs);
    else
    ghf_print0("wrote %s: %lld rows under %s:/fits/%s (%s, d = %d): smallest margin KS p %.3g, radial KS p "
               "%.3g (AD p %.3g); PITs %s (max error %.1e); %.2f s\n",
               o->out, (long long)in->n, o->model, law->name, law->family, law->d, kmin, r->radial.ks_p,
               r->radial.ad_p, r->exact ? "exact" : "interpolated", r->pit_err, secs);
    if (bt) {
        double bmin = bt->n_ok > 0 ? 1.0 : NAN;
        for (int j = 0; bt->n_ok > 0 && j < law->d; j++)
            bmin = fmin(bmin, fmin(bt->ks_p[j], fmin(bt->ad_p[j], bt->cvm_p[j])));
        ghf_print0("bootstrap: %d of %d replicates refitted (seed %lld, %lld EM iterations): smallest margin p_boot "
                   "%.3g, radial KS/AD/CvM p_boot %.3g %.3g %.3g\n",
                   bt->n_ok, bt->B, (long long)bt->seed, (long long)bt->iters, bmin, bt->rks_p, bt->rad_p,
                   bt->rcvm_p);
    }
    if (bt && bt->n_failed)
        ghf_note0("gof: %d of %d bootstrap replicates failed and were left out (first: %s)", bt->n_failed, bt->B,
                  bt->why);
    if (r->n_eacc) ghf_note0("gof: %d QQ model quantiles missed their tolerance", r->n_eacc);
    return st;
}

/* Collective: the observed statistics from the ranks' shards, the
 * bootstrap, the file.  The exit status (agreed). */
static int gof_run(const ghf_gof_opts *o, const ghf_fit_law *law, ghf_family fam, const ghf_shard *sh, char *err,
                   size_t errlen)
{
    int64_t n_all = 0;
    MPI_Allreduce(&sh->nrows, &n_all, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ghf_gof_input in = {law->d, fam == GHF_FAMILY_GAUSS, law->mu, law->gamma, law->sigma, law->p, law->a,
                        law->b, NULL, (size_t)n_all, o->Q, (size_t)o->nexact, (size_t)o->nknots,
                        n_all * (law->d + 1) <= GOF_PIT_MAX, (!o->quiet && n_all > 200000) ? gof_progress : NULL, NULL,
                        NULL, {0}};
    const int K = law->n_components;
    const double **cv = K >= 2 ? calloc((size_t)K * 3, sizeof *cv) : NULL; /* a mixture: its components */
    double *cs = K >= 2 ? calloc((size_t)K * 3, sizeof *cs) : NULL;
    int st = ghf_agree(MPI_COMM_WORLD, K >= 2 && (!cv || !cs) ? GHF_EXIT_RUNTIME : 0, err, errlen);
    if (st) snprintf(err, errlen, "gof: out of memory");
    for (int k = 0; !st && k < K && K >= 2; k++) {
        cv[k] = law->comp[k].mu, cv[K + k] = law->comp[k].gamma, cv[2 * K + k] = law->comp[k].sigma;
        cs[k] = law->comp[k].p, cs[K + k] = law->comp[k].a, cs[2 * K + k] = law->comp[k].b;
    }
    if (!st && K >= 2) in.mix = (struct ghf_gof_mix){K, law->prop, cv, cv + K, cv + 2 * K, cs, cs + K, cs + 2 * K};
    ghf_gof_result r;
    memset(&r, 0, sizeof r);
    const double t0 = MPI_Wtime();
    if (!st) st = gof_observe(o, law, &in, sh->x, (size_t)sh->nrows, &r, err, errlen);
    ghf_gof_boot bt;
    memset(&bt, 0, sizeof bt);
    if (!st && o->B > 0) {
        ghf_gof_refit m;
        ghf_gof_refit_of_law(law, fam, o->tol, o->max_iter, &m);
        if (!o->quiet)
            ghf_print0("gof: bootstrap: %d replicates of %lld rows, refitting %s on %d rank%s\n", o->B,
                       (long long)n_all, law->family, size, size == 1 ? "" : "s");
        st = ghf_gof_bootstrap(MPI_COMM_WORLD, law, &m, n_all, &in, &r, o->B, o->seed, !o->quiet, NULL, NULL, &bt, err,
                               errlen);
    }
    if (!st) {
        const int s0 = rank == 0 ? gof_finish(o, law, &in, &r, o->B > 0 ? &bt : NULL, sh->n_dropped, size,
                                              MPI_Wtime() - t0, err, errlen)
                                 : 0;
        st = ghf_agree(MPI_COMM_WORLD, s0, err, errlen);
    }
    ghf_gof_result_free(&r);
    ghf_gof_boot_free(&bt);
    free(cv);
    free(cs);
    return st;
}

int ghf_gof_law_check(const ghf_fit_law *law, const char *file, int bootstrap, char *err, size_t errlen)
{
    if (law->n_components < 2 || bootstrap <= 0) return 0;
    snprintf(err, errlen, "%.1000s:/fits/%s is a %d-component mixture; gof --bootstrap needs a single law (its "
             "replicates refit one law)", file, law->name, law->n_components);
    return GHF_EXIT_USAGE;
}

int ghf_cmd_gof(int argc, char **argv)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ghf_gof_opts o;
    int st = ghf_gof_parse(argc, argv, &o);
    if (st < 0 && rank == 0) gof_usage(stdout);
    if (st) return st < 0 ? GHF_EXIT_OK : st;
    char file[4096], name[64], err[8192] = "";
    if ((st = ghf_model_ref_parse(o.model, file, sizeof file, name, sizeof name, err, sizeof err))) {
        ghf_error0("%s", err);
        return st;
    }
    o.model = file;
    ghf_fit_law law;
    ghf_family fam;
    if ((st = ghf_fit_law_load(MPI_COMM_WORLD, file, name, &law, &fam, err, sizeof err))) {
        ghf_error0("%s", err);
        return st;
    }
    if ((st = ghf_gof_law_check(&law, file, o.B, err, sizeof err))) { /* the same verdict on every rank */
        ghf_error0("%s", err);
        ghf_fit_law_free(&law);
        return st;
    }
    const ghf_io_plan plan = ghf_gof_plan(&o, file, size);
    int64_t n = 0;
    int d = 0;
    st = ghf_io_check(MPI_COMM_WORLD, &plan, &n, &d, err, sizeof err);
    if (!st) st = ghf_law_dim_check(o.data, o.dataset, d, &law, file, err, sizeof err);
    /* the rows per rank before reading them (all are kept without --drop-nonfinite) */
    if (!st && !o.drop) st = ghf_gof_rows_check(n, size, err, sizeof err);
    ghf_shard sh;
    memset(&sh, 0, sizeof sh);
    if (!st) {
        const ghf_read_opts ro = {.path = o.data, .dataset = o.dataset, .win_len = -1, .drop_nonfinite = o.drop ? 1 : 0,
                                  .granule = 1};
        st = ghf_h5_read_shard(MPI_COMM_WORLD, &ro, &sh, err, sizeof err);
    }
    if (!st) st = gof_run(&o, &law, fam, &sh, err, sizeof err);
    if (st) ghf_error0("%s", err);
    ghf_shard_free(&sh);
    ghf_fit_law_free(&law);
    return st;
}
