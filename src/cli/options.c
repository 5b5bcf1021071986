/* options.c - see options.h */
#include "options.h"

#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "em.h"
#include "util.h"

typedef int (*opt_set)(ghf_job *j, const char *v);

typedef struct opt {
    const char *name, *arg; /* arg NULL: a flag */
    unsigned cmds;
    const char *help;       /* "\n" continues on the next line */
    opt_set set;            /* 0, or GHF_EXIT_USAGE after one error line */
} opt;

static int set_str(char **dst, const char *v)
{
    free(*dst);
    *dst = strdup(v);
    if (*dst) return 0;
    ghf_error0("out of memory");
    return GHF_EXIT_RUNTIME;
}

static int bad(const char *opt_name, const char *v, const char *what)
{
    ghf_error0("--%s: '%s' is not %s", opt_name, v, what);
    return GHF_EXIT_USAGE;
}

static int o_data(ghf_job *j, const char *v) { return set_str(&j->data_file, v); }
static int o_dataset(ghf_job *j, const char *v) { return set_str(&j->dataset, v); }
static int o_out(ghf_job *j, const char *v) { return set_str(&j->out, v); }
static int o_ckpt(ghf_job *j, const char *v) { return set_str(&j->checkpoint, v); }

static int o_model(ghf_job *j, const char *v)
{
    ghf_family f;
    if (ghf_family_parse(v, &f) != 0) {
        ghf_error0("--model: unknown model '%s' (expected %s)", v, ghf_family_list());
        return GHF_EXIT_USAGE;
    }
    j->n_family = 1;
    j->family[0] = f;
    return set_str(&j->fit_name, v);
}

static int o_sym(ghf_job *j, const char *v)
{
    (void)v;
    j->n_sym = 1;
    j->sym[0] = 1;
    return 0;
}

static int o_sigma(ghf_job *j, const char *v)
{
    char why[160];
    int r;
    if (ghf_sigma_parse(v, &r, why, sizeof why)) {
        ghf_error0("--sigma: %s", why);
        return GHF_EXIT_USAGE;
    }
    j->n_sigma = 1;
    j->sigma[0] = r;
    return 0;
}

static int o_components(ghf_job *j, const char *v)
{
    int k;
    if (ghf_parse_int(v, &k) || k < 1 || k > GHF_JOB_MAX_COMPONENTS) {
        ghf_error0("--components: '%s' is not an integer in 1..%d", v, GHF_JOB_MAX_COMPONENTS);
        return GHF_EXIT_USAGE;
    }
    j->n_comp = 1;
    j->comp[0] = k;
    return 0;
}

static int o_pfix(ghf_job *j, const char *v)
{
    double p;
    if (ghf_parse_double(v, &p) || !(fabs(p) <= GHF_P_MAX_ANY)) return bad("p-fixed", v, "a number in [-1e6, 1e6]");
    j->n_p = 1;
    j->p[0].fixed = 1;
    j->p[0].value = p;
    return 0;
}

static int o_tol(ghf_job *j, const char *v)
{
    double t;
    if (ghf_parse_double(v, &t) || t < 0) return bad("tol", v, "a non-negative number");
    j->n_tol = 1;
    j->tol[0] = t;
    return 0;
}

static int o_maxit(ghf_job *j, const char *v)
{
    return ghf_parse_int(v, &j->max_iter) || j->max_iter < 0 ? bad("max-iter", v, "a non-negative integer") : 0;
}

static int o_seed(ghf_job *j, const char *v)
{
    int64_t s;
    if (ghf_parse_int64(v, &s) || s < 0) return bad("seed", v, "a non-negative integer");
    j->n_seed = 1;
    j->seed[0] = s;
    return 0;
}

static int o_starts(ghf_job *j, const char *v)
{
    return ghf_parse_int(v, &j->starts) || j->starts < 1 || j->starts > 16 ? bad("starts", v, "an integer in 1..16")
                                                                           : 0;
}

static int o_backend(ghf_job *j, const char *v)
{
    if (strcmp(v, "auto") && strcmp(v, "cpu") && strcmp(v, "cuda")) {
        ghf_error0("--backend: unknown backend '%s' (expected auto, cpu or cuda)", v);
        return GHF_EXIT_USAGE;
    }
    return set_str(&j->backend, v);
}

static int o_accel(ghf_job *j, const char *v)
{
    if (!strcmp(v, "squarem")) j->accel = 1;
    else if (!strcmp(v, "none")) j->accel = 0;
    else return bad("accel", v, "squarem or none");
    return 0;
}

/* --rows START:LEN or START: */
static int o_rows(ghf_job *j, const char *v)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", v);
    char *c = strchr(buf, ':');
    int64_t start = 0, len = -1;
    int ok = c != NULL;
    if (ok) {
        *c = '\0';
        ok = ghf_parse_int64(buf, &start) == 0 && start >= 0 &&
             (c[1] == '\0' || (ghf_parse_int64(c + 1, &len) == 0 && len > 0));
    }
    if (!ok) {
        ghf_error0("--rows: '%s' is not START:LEN (e.g. 0:1000) or START:", v);
        return GHF_EXIT_USAGE;
    }
    j->rows_start = start;
    j->rows_len = len;
    return 0;
}

static int o_se(ghf_job *j, const char *v)
{
    (void)v;
    if (j->se == GHF_JOB_SE_OFF) j->se = GHF_JOB_SE_AUTO;
    return 0;
}

static int o_se_method(ghf_job *j, const char *v)
{
    if (!strcmp(v, "auto")) j->se = GHF_JOB_SE_AUTO;
    else if (!strcmp(v, "full")) j->se = GHF_JOB_SE_FULL;
    else if (!strcmp(v, "subset")) j->se = GHF_JOB_SE_SUBSET;
    else return bad("se-method", v, "auto, full or subset");
    return 0;
}

static int o_weights(ghf_job *j, const char *v) { return set_str(&j->weights, v); }

static int o_halflife(ghf_job *j, const char *v)
{
    double h;
    if (ghf_parse_double(v, &h) || !(h > 0.0) || !isfinite(h)) return bad("halflife", v, "a positive number of rows");
    j->halflife = h;
    return 0;
}

static int o_missing(ghf_job *j, const char *v)
{
    if (!strcmp(v, "em")) j->missing_em = 1;
    else if (!strcmp(v, "drop")) j->drop_nonfinite = 1;
    else if (!strcmp(v, "error")) j->missing_em = 0;
    else return bad("missing", v, "drop, em or error");
    return 0;
}

static int o_drop(ghf_job *j, const char *v) { (void)v; j->drop_nonfinite = 1; return 0; }
static int o_quiet(ghf_job *j, const char *v) { (void)v; j->quiet = 1; return 0; }
static int o_logit(ghf_job *j, const char *v) { (void)v; j->log_iterations = 1; return 0; }
static int o_logtime(ghf_job *j, const char *v) { (void)v; j->log_time = 1; return 0; }
static int o_resume(ghf_job *j, const char *v) { (void)v; j->resume = 1; return 0; }
static int o_warm(ghf_job *j, const char *v) { (void)v; j->warm_start = 1; return 0; }
static int o_nowarm(ghf_job *j, const char *v) { (void)v; j->warm_start = 0; return 0; }

static int o_ckpt_every(ghf_job *j, const char *v)
{
    return ghf_parse_int(v, &j->checkpoint_every) || j->checkpoint_every < 1
               ? bad("checkpoint-every", v, "a positive integer")
               : 0;
}

static int o_rpr(ghf_job *j, const char *v)
{
    return ghf_parse_int64(v, &j->rows_per_rank) || j->rows_per_rank < 1 ? bad("rows-per-rank", v, "a positive integer")
                                                                         : 0;
}

static int o_slice(ghf_job *j, const char *v)
{
    if (ghf_parse_slice(v, &j->slice_k, &j->slice_n)) {
        ghf_error0("--slice: '%s' is not K/N with 0 <= K < N", v);
        return GHF_EXIT_USAGE;
    }
    return 0;
}

#define F GHF_OPT_FIT
#define R GHF_OPT_RUN
static const opt g_opts[] = {
    {"data", "FILE", F | R, "input HDF5 file (N rows x d columns, float32 or float64)", o_data},
    {"dataset", "NAME", F | R, "dataset inside FILE (default /X)", o_dataset},
    {"model", "gh|hyp|nig|vg|t|gauss", F,
     "family to fit: generalized hyperbolic, hyperbolic (p = (d+1)/2),\n"
     "normal inverse Gaussian (p = -1/2), variance gamma (b = 0),\n"
     "skewed Student t (a = 0, nu = -2p), Gaussian",
     o_model},
    {"symmetric", NULL, F, "gamma held at 0 (a symmetric fit)", o_sym},
    {"sigma", "FORM", F,
     "the dispersion: full (default), diag, or factor:R (Sigma = B B' + D,\n"
     "R factors: O(d R) per row, fits N < d; CPU backend only)",
     o_sigma},
    {"components", "K", F | R,
     "fit a mixture of K laws of the family (default 1: one law); K >= 2:\n"
     "--starts counts the k-means++ starts (default 4), CPU only, not with\n"
     "--sigma diag|factor, --missing em, --se, --warm-start (a checkpoint\n"
     "keeps finished fits; a stopped mixture fit starts again on --resume)\n"
     "(run: one value for every fit, as the job key components:)",
     o_components},
    {"out", "FILE", F | R, "result file (written atomically by rank 0)", o_out},
    {"max-iter", "K", F | R, "EM iteration limit (default 5000)", o_maxit},
    {"tol", "T", F | R,
     "stop when the relative change of the log-likelihood and the largest\n"
     "relative parameter change (mu, gamma, Sigma, p, a, b) are both < T\n"
     "(default 1e-10; 0 runs exactly --max-iter iterations; run: one value)",
     o_tol},
    {"backend", "B", F | R, "auto|cpu|cuda (default auto: cuda when every rank has a GPU)", o_backend},
    {"seed", "S", F, "seed of the extra random subordinator starts and of the mixture starts (default 1)", o_seed},
    {"starts", "K", F | R, "GH subordinator starts tried for 5 iterations each; with --components\n"
     "K >= 2 the mixture's k-means++ starts, each run to the end (default 4)", o_starts},
    {"p-fixed", "P", F, "the GIG index p held fixed at P (gh; vg: P > 0; t: P < 0, nu = -2P)", o_pfix},
    {"rows", "START:LEN", F, "fit a window of rows only", o_rows},
    {"drop-nonfinite", NULL, F, "skip rows with NaN/Inf (counted in the output) instead of failing", o_drop},
    {"weights", "W", F | R,
     "observation weights: DATASET (in --data's file) or FILE:DATASET, N\n"
     "non-negative values (weighted EM maximises sum w_i log f(x_i))",
     o_weights},
    {"halflife", "H", F | R,
     "exponential-decay weights w_i = 2^(-(N-1-i)/H) over the N rows of each\n"
     "fit (of each window in a sweep); not with --weights",
     o_halflife},
    {"missing", "M", F | R,
     "NaN entries: error (default), drop (the rows; = --drop-nonfinite) or\n"
     "em (missing at random: EM over the missing coordinates; on the CUDA\n"
     "backend the rows with missing entries run on the host)",
     o_missing},
    {"accel", "A", F | R, "squarem (default: SQUAREM extrapolation, monotone) or none (plain EM)", o_accel},
    {"se", NULL, F | R,
     "standard errors from the observed information: /fits/NAME/se/ and\n"
     "param_cov (run: of every fit, as the job key se: true); with --sigma\n"
     "diag|factor:R for d <= 100 (mu, gamma, p, a, b, Sigma: none of B)",
     o_se},
    {"se-method", "M", F | R,
     "auto (default: the full covariance up to 8192 free parameters, the\n"
     "subset beyond), full, or subset (mu, gamma, p, a, b, diag Sigma,\n"
     "E X, diag Cov X); implies --se",
     o_se_method},
    {"rows-per-rank", "R", R, "rows per rank that size the groups (default 200000)", o_rpr},
    {"warm-start", NULL, R, "start each window from the previous window's fit", o_warm},
    {"no-warm-start", NULL, R, "start every window afresh", o_nowarm},
    {"quiet", NULL, F | R, "fit: no per-iteration lines; run: no progress lines", o_quiet},
    {"log-iterations", NULL, R, "print every EM iteration of every fit", o_logit},
    {"log-time", NULL, F | R, "start every iteration line with its UTC time (ISO 8601, ms)", o_logtime},
    {"checkpoint", "FILE", F | R,
     "write the EM state to FILE (atomically) every --checkpoint-every\n"
     "iterations and on SIGUSR1/SIGTERM (then exit status 75)",
     o_ckpt},
    {"checkpoint-every", "K", F | R, "iterations between checkpoints (default 50)", o_ckpt_every},
    {"resume", NULL, F | R, "continue from --checkpoint FILE (same data and options)", o_resume},
    {"slice", "K/N", R, "fit only block K of N of the fits (job arrays: one result file per slice)", o_slice},
};
#undef F
#undef R
#define N_OPTS ((int)(sizeof g_opts / sizeof g_opts[0]))

static const char *cmd_name(unsigned cmd) { return cmd == GHF_OPT_FIT ? "fit" : "run"; }

int ghf_opts_parse(unsigned cmd, int argc, char **argv, int apply, ghf_job *j, int *pos, int max_pos, int *n_pos)
{
    struct option lo[N_OPTS + 2];
    int map[N_OPTS + 1], n = 0;
    for (int i = 0; i < N_OPTS; i++) {
        if (!(g_opts[i].cmds & cmd)) continue;
        lo[n] = (struct option){g_opts[i].name, g_opts[i].arg ? required_argument : no_argument, 0, 256 + n};
        map[n++] = i;
    }
    lo[n++] = (struct option){"help", no_argument, 0, 2};
    lo[n] = (struct option){0, 0, 0, 0};
    opterr = 0;
    optind = 1;
    int c;
    /* "-": positional arguments come back in order, as code 1; --help is code 2 */
    while ((c = getopt_long(argc, argv, "-", lo, NULL)) != -1) {
        if (c == 1) { /* a positional argument */
            if (n_pos && *n_pos >= max_pos) {
                ghf_error0("%s: unexpected argument '%s'%s", cmd_name(cmd), optarg,
                           cmd == GHF_OPT_RUN ? " (one job file per run)" : "");
                return GHF_EXIT_USAGE;
            }
            if (n_pos) pos[(*n_pos)++] = optind - 1;
            continue;
        }
        if (c == 2) return -1; /* --help */
        if (c < 256) {
            ghf_error0("%s: unknown or incomplete option '%s' (see ghfit %s --help)", cmd_name(cmd), argv[optind - 1],
                       cmd_name(cmd));
            return GHF_EXIT_USAGE;
        }
        if (!apply) continue;
        const int st = g_opts[map[c - 256]].set(j, optarg);
        if (st) return st;
    }
    return 0;
}

void ghf_opts_usage(unsigned cmd, FILE *f)
{
    for (int i = 0; i < N_OPTS; i++) {
        if (!(g_opts[i].cmds & cmd)) continue;
        char head[64];
        snprintf(head, sizeof head, "--%s%s%s", g_opts[i].name, g_opts[i].arg ? " " : "",
                 g_opts[i].arg ? g_opts[i].arg : "");
        const char *h = g_opts[i].help;
        if (strlen(head) > 20) {
            fprintf(f, "  %s\n%23s", head, "");
        } else {
            fprintf(f, "  %-20s ", head);
        }
        for (; *h; h++) {
            fputc(*h, f);
            if (*h == '\n') fprintf(f, "%23s", "");
        }
        fputc('\n', f);
    }
}
