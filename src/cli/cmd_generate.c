/* cmd_generate.c - `ghfit generate`: sample a data set from any family (gh, hyp, nig, vg, t, gauss), in parallel. */
#define _POSIX_C_SOURCE 200809L /* sysconf */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "h5io.h"
#include "iocheck.h"
#include "model.h"
#include "sample.h"
#include "agree.h"
#include "util.h"

static void gen_usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np P ghfit generate --model gh|hyp|nig|vg|t|gauss --dim D --n N --seed S --out DATA.h5 [options]\n"
            "  --dataset NAME     dataset to write (default /X)\n"
            "  --dtype T          float64 (default) or float32\n"
            " model parameters (X | Y ~ N(mu + gamma Y, Y Sigma), Y ~ GIG(p, a, b); vg: Gamma (b = 0),\n"
            " t: inverse Gamma (a = 0), gauss: Y = 1):\n"
            "  --mu V             location: one value or D comma-separated values (default 0)\n"
            "  --gamma V          skewness: one value or D values (default 0.2, -0.1, 0.2, -0.1, ...)\n"
            "  --sigma V          diagonal of Sigma: one value or D values (default 1)\n"
            "  --rho R            equicorrelation of Sigma (default 0.3)\n"
            "  --p P --a A --b B  subordinator (defaults: gh p=-1 a=1 b=1; nig p=-0.5; hyp p=(D+1)/2;\n"
            "                     vg p=2 a=1 (b = 0); t p=-2 b=1 (a = 0; nu = -2p); gauss none);\n"
            "                     |p| <= 1e6, a and b in [1e-30, 1e30], sqrt(a*b) >= 1e-3 when |p| < 1\n"
            "  --gamma 0          a symmetric law\n"
            "The rows depend on the seed only (each row has its own random stream), not on P.\n");
}

/* Parameter ranges where the samplers are exact and fast (src/family/sample.h). */
#define GEN_MAX_ABS_P 1e6
#define GEN_MIN_AB_PARAM 1e-30
#define GEN_MAX_AB_PARAM 1e30
#define GEN_MIN_OMEGA_SMALL_P 1e-3

/* The GIG subordinator's parameters: 0, or GHF_EXIT_USAGE with one message
 * naming the option. */
static int check_gig(double p, double a, double b)
{
    if (!(fabs(p) <= GEN_MAX_ABS_P)) {
        ghf_error0("--p: %g is outside [-%g, %g]", p, GEN_MAX_ABS_P, GEN_MAX_ABS_P);
        return GHF_EXIT_USAGE;
    }
    const double ab[2] = {a, b};
    for (int i = 0; i < 2; i++)
        if (!(ab[i] >= GEN_MIN_AB_PARAM && ab[i] <= GEN_MAX_AB_PARAM)) {
            ghf_error0("--%s: %g is outside [%g, %g]", i ? "b" : "a", ab[i], GEN_MIN_AB_PARAM, GEN_MAX_AB_PARAM);
            return GHF_EXIT_USAGE;
        }
    if (fabs(p) < 1.0 && sqrt(a * b) < GEN_MIN_OMEGA_SMALL_P) {
        ghf_error0("--a/--b: sqrt(a*b) = %g is below %g, where the GIG sampler is unreliable for |p| < 1 "
                   "(raise a*b)", sqrt(a * b), GEN_MIN_OMEGA_SMALL_P);
        return GHF_EXIT_USAGE;
    }
    return 0;
}

/* The subordinator of family f from the family table: its fixed values
 * and defaults filled in, the given ones checked.  0, or GHF_EXIT_USAGE
 * with one message naming the option. */
static int family_subordinator(ghf_family f, int d, int have_p, int have_a, int have_b, double *p, double *a,
                               double *b)
{
    const ghf_family_def *fd = ghf_family_get(f);
    const char *name = ghf_family_name(f);
    switch (fd->sub) {
    case GHF_SUB_GIG: {
        const double fp = fd->family_p(d);
        if (!isnan(fp)) {
            if (have_p && *p != fp) {
                ghf_error0("--p: %s has p = %g at --dim %d", name, fp, d);
                return GHF_EXIT_USAGE;
            }
            *p = fp;
        } else if (!have_p) {
            *p = -1.0;
        }
        return check_gig(*p, *a, *b);
    }
    case GHF_SUB_GAMMA:
        if (have_b) {
            ghf_error0("--b: %s has b = 0 (a Gamma subordinator; leave --b out)", name);
            return GHF_EXIT_USAGE;
        }
        if (!have_p) *p = 2.0;
        *b = 0.0;
        if (!(*p > 0.0 && *p <= GEN_MAX_ABS_P)) {
            ghf_error0("--p: %s needs 0 < p <= %g (got %g)", name, GEN_MAX_ABS_P, *p);
            return GHF_EXIT_USAGE;
        }
        break;
    case GHF_SUB_INVGAMMA:
        if (have_a) {
            ghf_error0("--a: %s has a = 0 (an inverse-Gamma subordinator; leave --a out)", name);
            return GHF_EXIT_USAGE;
        }
        if (!have_p) *p = -2.0;
        *a = 0.0;
        if (!(*p < 0.0 && *p >= -GEN_MAX_ABS_P)) {
            ghf_error0("--p: %s needs -%g <= p < 0 (nu = -2p degrees of freedom; got %g)", name, GEN_MAX_ABS_P, *p);
            return GHF_EXIT_USAGE;
        }
        break;
    case GHF_SUB_NONE:
        if (have_p || have_a || have_b) {
            ghf_error0("--%s: %s has no subordinator (Y = 1)", have_p ? "p" : have_a ? "a" : "b", name);
            return GHF_EXIT_USAGE;
        }
        *p = *a = *b = NAN;
        return 0;
    }
    const double ab = fd->sub == GHF_SUB_GAMMA ? *a : *b;
    if (!(ab >= GEN_MIN_AB_PARAM && ab <= GEN_MAX_AB_PARAM)) {
        ghf_error0("--%s: %g is outside [%g, %g]", fd->sub == GHF_SUB_GAMMA ? "a" : "b", ab, GEN_MIN_AB_PARAM,
                   GEN_MAX_AB_PARAM);
        return GHF_EXIT_USAGE;
    }
    return 0;
}

/* Will ceil(n/P) rows of d values (and a float32 copy of a piece) fit in
 * this node's memory?  0, or GHF_EXIT_USAGE with one message. */
static int check_size(int64_t n, int d, int size)
{
    const double rows = ceil((double)n / size), bytes = rows * d * (8.0 + 4.0);
    const long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGE_SIZE);
    if (n > INT64_MAX / 16 / d) {
        ghf_error0("--n %lld x --dim %d: too many values", (long long)n, d);
        return GHF_EXIT_USAGE;
    }
    if (pages > 0 && psize > 0 && bytes > (double)pages * (double)psize) {
        ghf_error0("--n %lld x --dim %d: %.3g GiB per rank on %d rank%s, more than the %.3g GiB of this node "
                   "(use more ranks)", (long long)n, d, bytes / 1073741824.0, size, size == 1 ? "" : "s",
                   (double)pages * (double)psize / 1073741824.0);
        return GHF_EXIT_USAGE;
    }
    return 0;
}

/* Sigma = D^1/2 ((1 - rho) I + rho 1 1^T) D^1/2 and its Cholesky factor L;
 * mu, gamma from the options.  0, or GHF_EXIT_USAGE with one message. */
static int model_from_options(int d, const char *mu_s, const char *gamma_s, const char *sigma_s, double rho,
                              ghf_params *t, double *diag, double *L)
{
    for (int j = 0; j < d; j++) t->gamma[j] = (j % 2 == 0) ? 0.2 : -0.1;
    for (int j = 0; j < d; j++) diag[j] = 1.0;
    if (mu_s && ghf_parse_vec(mu_s, d, t->mu)) {
        ghf_error0("--mu: expected one value or %d comma-separated values", d);
        return GHF_EXIT_USAGE;
    }
    if (gamma_s && ghf_parse_vec(gamma_s, d, t->gamma)) {
        ghf_error0("--gamma: expected one value or %d comma-separated values", d);
        return GHF_EXIT_USAGE;
    }
    if (sigma_s && ghf_parse_vec(sigma_s, d, diag)) {
        ghf_error0("--sigma: expected one value or %d comma-separated values", d);
        return GHF_EXIT_USAGE;
    }
    for (int j = 0; j < d; j++) {
        const char *bad = fabs(t->mu[j]) > 1e150 ? "--mu" : fabs(t->gamma[j]) > 1e150 ? "--gamma" : NULL;
        if (bad) {
            ghf_error0("%s: |value| %g is above 1e150 (the data would overflow)", bad,
                       bad[2] == 'm' ? t->mu[j] : t->gamma[j]);
            return GHF_EXIT_USAGE;
        }
        if (!(diag[j] > 0) || diag[j] > 1e150) {
            ghf_error0("--sigma: variances must be positive and at most 1e150");
            return GHF_EXIT_USAGE;
        }
    }
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++) t->sigma[i * d + j] = sqrt(diag[i] * diag[j]) * (i == j ? 1.0 : rho);
    if (ghf_cholesky(d, t->sigma, L) != 0) {
        ghf_error0("--rho %g: Sigma is not positive definite for d = %d", rho, d);
        return GHF_EXIT_USAGE;
    }
    return 0;
}

int ghf_cmd_generate(int argc, char **argv)
{
    MPI_Comm comm = MPI_COMM_WORLD;
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    const char *model = NULL, *out = NULL, *dataset = "/X", *dtype = "float64";
    const char *mu_s = NULL, *gamma_s = NULL, *sigma_s = NULL;
    int d = 0, have_p = 0, have_a = 0, have_b = 0;
    int64_t n = -1, seed = -1;
    double rho = 0.3, p = 0, a = 1, b = 1;
    enum { O_MODEL = 256, O_DIM, O_N, O_SEED, O_OUT, O_DATASET, O_DTYPE, O_MU, O_GAMMA, O_SIGMA, O_RHO, O_P,
           O_A, O_B, O_HELP };
    static const struct option opts[] = {
        {"model", required_argument, 0, O_MODEL}, {"dim", required_argument, 0, O_DIM},
        {"n", required_argument, 0, O_N},         {"seed", required_argument, 0, O_SEED},
        {"out", required_argument, 0, O_OUT},     {"dataset", required_argument, 0, O_DATASET},
        {"dtype", required_argument, 0, O_DTYPE}, {"mu", required_argument, 0, O_MU},
        {"gamma", required_argument, 0, O_GAMMA}, {"sigma", required_argument, 0, O_SIGMA},
        {"rho", required_argument, 0, O_RHO},     {"p", required_argument, 0, O_P},
        {"a", required_argument, 0, O_A},         {"b", required_argument, 0, O_B},
        {"help", no_argument, 0, O_HELP},         {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        const char *bad = NULL;
        switch (c) {
        case O_MODEL: model = optarg; break;
        case O_OUT: out = optarg; break;
        case O_DATASET: dataset = optarg; break;
        case O_DTYPE: dtype = optarg; break;
        case O_MU: mu_s = optarg; break;
        case O_GAMMA: gamma_s = optarg; break;
        case O_SIGMA: sigma_s = optarg; break;
        case O_DIM: if (ghf_parse_int(optarg, &d) || d < 1 || d > 100000) bad = "--dim"; break;
        case O_N: if (ghf_parse_int64(optarg, &n) || n < 1) bad = "--n"; break;
        case O_SEED: if (ghf_parse_int64(optarg, &seed) || seed < 0) bad = "--seed"; break;
        case O_RHO: if (ghf_parse_double(optarg, &rho) || rho <= -1.0 || rho >= 1.0) bad = "--rho"; break;
        case O_P: if (ghf_parse_double(optarg, &p)) bad = "--p"; have_p = 1; break;
        case O_A: if (ghf_parse_double(optarg, &a) || !(a > 0)) bad = "--a"; have_a = 1; break;
        case O_B: if (ghf_parse_double(optarg, &b) || !(b > 0)) bad = "--b"; have_b = 1; break;
        case O_HELP:
            if (rank == 0) gen_usage(stdout);
            return GHF_EXIT_OK;
        default:
            ghf_error0("generate: unknown or incomplete option '%s' (see ghfit generate --help)", argv[optind - 1]);
            return GHF_EXIT_USAGE;
        }
        if (bad) {
            ghf_error0("%s: invalid value '%s'", bad, optarg);
            return GHF_EXIT_USAGE;
        }
    }
    if (optind < argc) { ghf_error0("generate: unexpected argument '%s'", argv[optind]); return GHF_EXIT_USAGE; }
    if (!model) { ghf_error0("generate: --model is required (%s)", ghf_family_list()); return GHF_EXIT_USAGE; }
    ghf_family fam;
    if (ghf_family_parse(model, &fam)) {
        ghf_error0("--model: '%s' is not a family (%s)", model, ghf_family_list());
        return GHF_EXIT_USAGE;
    }
    if (d < 1) { ghf_error0("generate: --dim is required"); return GHF_EXIT_USAGE; }
    if (n < 1) { ghf_error0("generate: --n is required"); return GHF_EXIT_USAGE; }
    if (seed < 0) { ghf_error0("generate: --seed is required"); return GHF_EXIT_USAGE; }
    if (!out) { ghf_error0("generate: --out is required"); return GHF_EXIT_USAGE; }
    int bits;
    if (strcmp(dtype, "float64") == 0) bits = 64;
    else if (strcmp(dtype, "float32") == 0) bits = 32;
    else { ghf_error0("--dtype: '%s' is not float64 or float32", dtype); return GHF_EXIT_USAGE; }
    int st = family_subordinator(fam, d, have_p, have_a, have_b, &p, &a, &b);
    if (!st) st = check_size(n, d, size);
    if (st) return st;

    /* the output: a regular file, ghfit generate's own if it exists, locked (rank 0) */
    char err[1024] = "";
    const ghf_io_plan plan = {.win_len = -1, .n_ranks = size, .out = out, .out_kind = GHF_PATH_MATRIX,
                              .out_dataset = dataset};
    st = ghf_io_check(comm, &plan, NULL, NULL, err, sizeof err);
    if (st) {
        ghf_error0("%s", err);
        return st;
    }

    int64_t row0, nrows;
    ghf_block_range(n, rank, size, &row0, &nrows);
    ghf_params t;
    memset(&t, 0, sizeof t);
    double *diag = calloc((size_t)d, sizeof(double));
    double *L = calloc((size_t)d * (size_t)d, sizeof(double));
    double *x = malloc((size_t)(nrows > 0 ? nrows : 1) * (size_t)d * sizeof(double));
    double *zb = malloc((size_t)d * sizeof(double));
    const int oom = ghf_params_alloc(&t, d) != 0 || !diag || !L || !x || !zb;
    if (ghf_any(comm, oom)) {
        ghf_error0("generate: out of memory for %lld x %d values on %d rank%s", (long long)n, d, size,
                   size == 1 ? "" : "s");
        st = GHF_EXIT_RUNTIME;
    }
    if (!st) st = model_from_options(d, mu_s, gamma_s, sigma_s, rho, &t, diag, L); /* same on every rank */
    if (!st) {
        t.p = p;
        t.a = a;
        t.b = b;
        int64_t bad = ghf_sample_rows(&t, L, (uint64_t)seed, row0, nrows, x, zb), first = 0;
        if (bad < 0) bad = INT64_MAX;
        MPI_Allreduce(&bad, &first, 1, MPI_INT64_T, MPI_MIN, comm);
        if (first != INT64_MAX) {
            ghf_error0("generate: row %lld: the sample is not finite for p=%g a=%g b=%g (parameters too extreme)",
                       (long long)first, p, a, b);
            st = GHF_EXIT_USAGE;
        }
    }
    if (!st) {
        char sp[64], sa[64], sb[64], ss[32], sn[32], sd[32], srho[64];
        snprintf(sp, sizeof sp, "%.17g", p);
        snprintf(sa, sizeof sa, "%.17g", a);
        snprintf(sb, sizeof sb, "%.17g", b);
        snprintf(ss, sizeof ss, "%lld", (long long)seed);
        snprintf(sn, sizeof sn, "%lld", (long long)n);
        snprintf(sd, sizeof sd, "%d", d);
        snprintf(srho, sizeof srho, "%.17g", rho);
        const char *keys[] = {"model", "seed", "n", "dim", "p", "a", "b", "rho", "mu", "gamma", "sigma_diag", "command_line"};
        const char *vals[] = {model, ss, sn, sd, sp, sa, sb, srho, mu_s ? mu_s : "0",
                              gamma_s ? gamma_s : "0.2,-0.1,...", sigma_s ? sigma_s : "1", ghf_command_line()};
        st = ghf_h5_write_matrix(comm, out, dataset, n, d, row0, nrows, x, bits, 12, keys, vals, err, sizeof err);
        if (st) ghf_error0("%s", err);
        else ghf_print0("wrote %s:%s (%lld x %d %s, %s p=%g a=%g b=%g, seed %lld)\n", out, dataset, (long long)n, d,
                        dtype, model, p, a, b, (long long)seed);
    }
    free(x);
    free(zb);
    free(diag);
    free(L);
    ghf_params_free(&t);
    return st;
}
