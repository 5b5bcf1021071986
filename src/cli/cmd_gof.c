/* cmd_gof.c - `ghfit gof`: goodness of fit of a fitted law on a data set:
 * per-margin PITs with KS/AD/CvM and QQ tables, and the PIT of the radial
 * statistic (src/law/gof.h).  The ranks read shards, rank 0 gathers them and
 * computes (OpenMP), rank 0 writes the file (temp file, then rename). */
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "commands.h"
#include "family.h"
#include "ghf_version.h"
#include "gof.h"
#include "h5io.h"
#include "iocheck.h"
#include "score.h"
#include "util.h"

#define GOF_PIT_MAX 2000000 /* /margins/pit and /radial/pit are written when n * (d + 1) is at most this */

typedef struct gof_opts {
    const char *model, *data, *dataset, *out;
    int Q, drop, quiet;
    int64_t nexact, nknots;
} gof_opts;

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
            "  --quiet                    no summary line\n"
            "p-values are asymptotic and treat the fitted parameters as known.\n"
            "exit status: 0 done, 1 run-time failure, 2 bad input (no output file left)\n");
}

static int gof_parse(int argc, char **argv, gof_opts *o, int rank)
{
    enum { O_MODEL = 256, O_DATA, O_DATASET, O_OUT, O_QQ, O_DROP, O_EXACT, O_KNOTS, O_QUIET, O_HELP };
    static const struct option opts[] = {
        {"model", required_argument, 0, O_MODEL},   {"data", required_argument, 0, O_DATA},
        {"dataset", required_argument, 0, O_DATASET}, {"out", required_argument, 0, O_OUT},
        {"qq", required_argument, 0, O_QQ},          {"drop-nonfinite", no_argument, 0, O_DROP},
        {"exact-max", required_argument, 0, O_EXACT}, {"knots", required_argument, 0, O_KNOTS},
        {"quiet", no_argument, 0, O_QUIET},          {"help", no_argument, 0, O_HELP},
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
        case O_QUIET: o->quiet = 1; break;
        case O_HELP:
            if (rank == 0) gof_usage(stdout);
            return -1;
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

/* Collective: every rank's shard onto rank 0 (*all, n_total rows).  0 or 1. */
static int gof_gather(MPI_Comm comm, const ghf_shard *sh, int d, double **all, int64_t *n_total, char *err,
                      size_t errlen)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int64_t mine = sh->nrows, tot = 0;
    MPI_Allreduce(&mine, &tot, 1, MPI_INT64_T, MPI_SUM, comm);
    *n_total = tot;
    *all = NULL;
    if (tot * (int64_t)d > INT_MAX) {
        snprintf(err, errlen, "gof: %lld rows x %d columns: gof gathers the rows on rank 0, at most %d values",
                 (long long)tot, d, INT_MAX);
        return 2;
    }
    int *cnt = rank == 0 ? calloc((size_t)size, sizeof(int)) : NULL, *off = rank == 0 ? calloc((size_t)size, sizeof(int)) : NULL;
    int oom = rank == 0 && (!cnt || !off || !(*all = malloc((size_t)(tot > 0 ? tot : 1) * (size_t)d * sizeof(double))));
    if (ghf_any(comm, oom)) {
        snprintf(err, errlen, "gof: out of memory on rank 0 for %lld rows", (long long)tot);
        free(cnt), free(off), free(*all), *all = NULL;
        return 1;
    }
    int mc = (int)(mine * d);
    MPI_Gather(&mc, 1, MPI_INT, cnt, 1, MPI_INT, 0, comm);
    if (rank == 0)
        for (int r = 1; r < size; r++) off[r] = off[r - 1] + cnt[r - 1];
    MPI_Gatherv(sh->x, mc, MPI_DOUBLE, *all, cnt, off, MPI_DOUBLE, 0, comm);
    free(cnt);
    free(off);
    return 0;
}

static void gof_progress(const char *what, int done, int total)
{
    ghf_note0("gof: %s %d/%d done", what, done, total);
}

/* Rank 0: the file.  0 or 1. */
static int gof_write(const gof_opts *o, const ghf_fit_law *law, const ghf_gof_input *in, const ghf_gof_result *r,
                     int64_t n_dropped, int size, char *err, size_t errlen)
{
    const int64_t d = law->d, Q = in->Q, n = (int64_t)in->n;
    char method[256];
    if (r->exact) snprintf(method, sizeof method, "exact: every PIT is a cdf value");
    else
        snprintf(method, sizeof method,
                 "interpolated: exact cdf at %lld order statistics (and the 32 extreme ones at each end), Steffen's "
                 "monotone cubic in between",
                 (long long)o->nknots);
    const ghf_h5_attr at[] = {
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
    const ghf_gof_stat *rs = &r->radial;
    const char *pd = "per margin j: the PIT u_ij = F_j(x_ij) of its fitted marginal law";
    ghf_h5_array a[20];
    int k = 0;
#define ARR(nm, rk, d0, d1, d2, v, ds) a[k++] = (ghf_h5_array){nm, rk, {d0, d1, d2}, v, ds}
    ARR("margins/ks", 1, d, 0, 0, r->ks, "Kolmogorov-Smirnov D_n of each margin's PITs [d]");
    ARR("margins/ad", 1, d, 0, 0, r->ad, "Anderson-Darling A^2 of each margin's PITs [d]");
    ARR("margins/cvm", 1, d, 0, 0, r->cvm, "Cramer-von Mises W^2 of each margin's PITs [d]");
    ARR("margins/ks_p", 1, d, 0, 0, r->ks_p, "asymptotic p-value of ks (parameters taken as known) [d]");
    ARR("margins/ad_p", 1, d, 0, 0, r->ad_p, "asymptotic p-value of ad (parameters taken as known) [d]");
    ARR("margins/cvm_p", 1, d, 0, 0, r->cvm_p, "asymptotic p-value of cvm (parameters taken as known) [d]");
    ARR("margins/qq", 3, d, Q, 2, r->qq,
        "[d][Q][2]: (model quantile, sample quantile) at probabilities (i - 0.5)/Q; sample: R's type 7");
    ARR("radial/ks", 0, 0, 0, 0, &rs->ks, "Kolmogorov-Smirnov D_n of the PITs of q = (x-mu)' Sigma^-1 (x-mu)");
    ARR("radial/ad", 0, 0, 0, 0, &rs->ad, "Anderson-Darling A^2 of the radial PITs");
    ARR("radial/cvm", 0, 0, 0, 0, &rs->cvm, "Cramer-von Mises W^2 of the radial PITs");
    ARR("radial/ks_p", 0, 0, 0, 0, &rs->ks_p, "asymptotic p-value of radial/ks");
    ARR("radial/ad_p", 0, 0, 0, 0, &rs->ad_p, "asymptotic p-value of radial/ad");
    ARR("radial/cvm_p", 0, 0, 0, 0, &rs->cvm_p, "asymptotic p-value of radial/cvm");
    ARR("radial/qq", 2, Q, 2, 0, r->rqq, "[Q][2]: (model quantile, sample quantile) of q at (i - 0.5)/Q");
    if (r->pit) {
        ARR("margins/pit", 2, n, d, 0, r->pit, pd);
        ARR("radial/pit", 1, n, 0, 0, r->rpit, "the PIT of each row's radial statistic q under the fit");
    }
#undef ARR
    const ghf_out_meta meta = {.version = GHFIT_VERSION, .git_commit = GHFIT_GIT_COMMIT,
                               .command_line = ghf_command_line(), .n_ranks = size};
    return ghf_h5_write_arrays(o->out, &meta, "gof", (int)(sizeof at / sizeof at[0]), at, k, a, err, errlen);
}

/* Rank 0: compute and write.  0, 1 or 2. */
static int gof_rank0(const gof_opts *o, const ghf_fit_law *law, ghf_family fam, const double *x, int64_t n,
                     int64_t n_dropped, int size, char *err, size_t errlen)
{
    if (n < 2) {
        snprintf(err, errlen, "%s:%s: %lld finite rows; gof needs at least 2", o->data, o->dataset, (long long)n);
        return 2;
    }
    const ghf_gof_input in = {law->d, fam == GHF_FAMILY_GAUSS, law->mu, law->gamma, law->sigma, law->p, law->a,
                              law->b, x, (size_t)n, o->Q, (size_t)o->nexact, (size_t)o->nknots,
                              n * (law->d + 1) <= GOF_PIT_MAX, (!o->quiet && n > 200000) ? gof_progress : NULL};
    ghf_gof_result r;
    double t0 = MPI_Wtime();
    int st = ghf_gof_compute(&in, &r, err, errlen);
    if (st == 2) {
        char e2[1024];
        snprintf(e2, sizeof e2, "%s:/fits/%s: %s", o->model, law->name, err);
        snprintf(err, errlen, "%s", e2);
    }
    if (st) return st;
    double t1 = MPI_Wtime();
    st = gof_write(o, law, &in, &r, n_dropped, size, err, errlen);
    if (!st && !o->quiet) {
        double kmin = 1.0;
        for (int j = 0; j < law->d; j++) kmin = fmin(kmin, r.ks_p[j]);
        ghf_print0("wrote %s: %lld rows under %s:/fits/%s (%s, d = %d): smallest margin KS p %.3g, radial KS p "
                   "%.3g (AD p %.3g); PITs %s (max error %.1e); %.2f s\n",
                   o->out, (long long)n, o->model, law->name, law->family, law->d, kmin, r.radial.ks_p,
                   r.radial.ad_p, r.exact ? "exact" : "interpolated", r.pit_err, t1 - t0);
        if (r.n_eacc) ghf_note0("gof: %d QQ model quantiles missed their tolerance", r.n_eacc);
    }
    ghf_gof_result_free(&r);
    return st;
}

int ghf_cmd_gof(int argc, char **argv)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    gof_opts o = {NULL, NULL, "/X", NULL, 200, 0, 0, 20000, 4096};
    int st = gof_parse(argc, argv, &o, rank);
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
    const ghf_io_plan plan = {.data = o.data, .dataset = o.dataset, .win_len = -1, .n_ranks = size, .out = o.out,
                              .out_kind = GHF_PATH_RESULT, .model = file};
    int64_t n = 0, n_all = 0;
    int d = 0;
    st = ghf_io_check(MPI_COMM_WORLD, &plan, &n, &d, err, sizeof err);
    if (!st && d != law.d) {
        snprintf(err, sizeof err, "%.1000s:%.200s: %d columns, but the fit %s of %.1000s has dimension %d", o.data, o.dataset, d,
                 law.name, file, law.d);
        st = 2;
    }
    ghf_shard sh;
    memset(&sh, 0, sizeof sh);
    double *all = NULL;
    if (!st) {
        const ghf_read_opts ro = {.path = o.data, .dataset = o.dataset, .win_len = -1, .drop_nonfinite = o.drop ? 1 : 0,
                                  .granule = 1};
        st = ghf_h5_read_shard(MPI_COMM_WORLD, &ro, &sh, err, sizeof err);
    }
    if (!st) st = ghf_agree(MPI_COMM_WORLD, gof_gather(MPI_COMM_WORLD, &sh, d, &all, &n_all, err, sizeof err), err,
                            sizeof err);
    if (!st) {
        int s0 = rank == 0 ? gof_rank0(&o, &law, fam, all, n_all, sh.n_dropped, size, err, sizeof err) : 0;
        st = ghf_agree(MPI_COMM_WORLD, s0, err, sizeof err);
    }
    if (st) ghf_error0("%s", err);
    free(all);
    ghf_shard_free(&sh);
    ghf_fit_law_free(&law);
    return st;
}
