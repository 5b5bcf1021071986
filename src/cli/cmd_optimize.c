/* cmd_optimize.c - `ghfit optimize`: minimum-risk, target-return and tangency
 * portfolios and efficient frontiers for sd, VaR and ES under one fitted law
 * (src/law/portopt.h).  Rank 0 reads, checks, optimises and writes; the other
 * ranks take part in the agreement on errors and the final status only (the
 * work is serial and small: a frontier of 50 points at d = 100 in seconds;
 * docs/benchmarks.md). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "commands.h"
#include "family.h"
#include "ghf_version.h"
#include "h5io.h"
#include "portopt.h"
#include "postcmd.h"
#include "util.h"

static void opt_usage(FILE *f)
{
    fprintf(f,
            "usage: [mpirun -np P] ghfit optimize --model RESULT.h5[:/fits/NAME] --measure sd|var|es --out OPT.h5\n"
            "                [--alpha A] [--type min-risk|target-return|tangency|frontier]\n"
            "                [--target-return R] [--tangency] [--risk-free RF] [--frontier K]\n"
            "                [--budget S] [--long-only] [--bounds LO,HI] [--returns | --losses]\n"
            "  Portfolios w of least risk of the loss under the fitted law of X (docs/user-guide.md):\n"
            "  --model        a result file of ghfit fit/run; without :/fits/NAME it must hold one fit\n"
            "  --measure      sd (standard deviation), var (VaR_alpha: the alpha-quantile of the loss) or\n"
            "                 es (ES_alpha = E[L | L >= VaR_alpha])\n"
            "  --alpha        the level of VaR and ES, in (0, 1) (default 0.975)\n"
            "  --type         min-risk (default); target-return: least risk with expected return R;\n"
            "                 tangency: the largest (expected return - RF * S) / risk; frontier: K points\n"
            "                 from the min-risk portfolio to the highest attainable return (or R)\n"
            "  --target-return R   the target (implies --type target-return unless --type frontier,\n"
            "                 where R is the frontier's top: needed when the returns are unbounded)\n"
            "  --tangency     --type tangency;  --risk-free RF  its rate (default 0)\n"
            "  --frontier K   --type frontier with K >= 2 points (default 20)\n"
            "  --budget S     sum of the weights (default 1; not 0)\n"
            "  --long-only    w >= 0;  --bounds LO,HI  LO <= w_i <= HI for every asset, or\n"
            "  --bounds FILE.h5:/DATASET  a float dataset [d][2] of each asset's LO and HI (finite)\n"
            "  --returns      the data are returns: the loss is L = -w'X (default)\n"
            "  --losses       the data are losses: the loss is L = w'X and the return -w'X\n"
            "  --out          the optimisation file: /weights [K][d], /expected_return, /risk, /sd, /var, /es,\n"
            "                 /status, /converged, /kkt [K] (docs/output-schema.md)\n"
            "  VaR is not convex in w: it is started from the ES and sd optima and the equal-weight point\n"
            "  and the best converged run is kept; /converged and /status say how each point ended.\n"
            "  A mixture fit (ghfit fit --components K) is refused: optimize needs a single law.\n"
            "exit status: 0 done, 1 run-time failure, 2 bad input (no output file is left)\n");
}

typedef struct opt_opts {
    char model[4096], fit[256];
    const char *out;
    int has_fit, measure, type, losses, long_only, has_bounds, has_target, has_rf, K;
    double alpha, budget, lo, hi, target, rf;
    char bfile[4096], bdset[1024]; /* --bounds FILE.h5:/DSET (per-asset bounds [d][2]) */
} opt_opts;

static const char *MEAS[3] = {"sd", "var", "es"};
enum { T_MIN = 0, T_TARGET = 1, T_TANGENCY = 2, T_FRONTIER = 3 };
static const char *TYPES[4] = {"min-risk", "target-return", "tangency", "frontier"};

static int bad(const char *fmt, const char *a)
{
    ghf_error0(fmt, a);
    return GHF_EXIT_USAGE;
}

static int opt_parse(int argc, char **argv, opt_opts *o)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},   {"measure", required_argument, 0, 'M'},
        {"alpha", required_argument, 0, 'a'},   {"type", required_argument, 0, 't'},
        {"target-return", required_argument, 0, 'R'}, {"tangency", no_argument, 0, 'T'},
        {"risk-free", required_argument, 0, 'f'}, {"frontier", required_argument, 0, 'F'},
        {"budget", required_argument, 0, 'b'},  {"long-only", no_argument, 0, 'L'},
        {"bounds", required_argument, 0, 'B'},  {"returns", no_argument, 0, 'r'},
        {"losses", no_argument, 0, 'l'},        {"out", required_argument, 0, 'o'},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    const char *model = NULL, *meas = NULL;
    int type = -1, tangency = 0, frontier = 0, sense = -1;
    memset(o, 0, sizeof *o);
    o->alpha = 0.975, o->budget = 1.0, o->lo = -INFINITY, o->hi = INFINITY, o->K = 1;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'h': return -1;
        case 'm': model = optarg; break;
        case 'M': meas = optarg; break;
        case 'o': o->out = optarg; break;
        case 'a':
            if (ghf_parse_double(optarg, &o->alpha) || !(o->alpha > 0.0 && o->alpha < 1.0))
                return bad("--alpha: '%s' is not a level in (0, 1)", optarg);
            break;
        case 't':
            type = -2;
            for (int i = 0; i < 4; i++)
                if (!strcmp(optarg, TYPES[i])) type = i;
            if (type < 0) return bad("--type: '%s' is not min-risk, target-return, tangency or frontier", optarg);
            break;
        case 'R':
            if (ghf_parse_double(optarg, &o->target) || !isfinite(o->target))
                return bad("--target-return: '%s' is not a finite number", optarg);
            o->has_target = 1;
            break;
        case 'T': tangency = 1; break;
        case 'f':
            if (ghf_parse_double(optarg, &o->rf) || !isfinite(o->rf))
                return bad("--risk-free: '%s' is not a finite number", optarg);
            o->has_rf = 1;
            break;
        case 'F':
            if (ghf_parse_int(optarg, &o->K) || o->K < 2 || o->K > 100000)
                return bad("--frontier: '%s' is not a number of points from 2 to 100000", optarg);
            frontier = 1;
            break;
        case 'b':
            if (ghf_parse_double(optarg, &o->budget) || !isfinite(o->budget) || o->budget == 0.0)
                return bad("--budget: '%s' is not a finite non-zero number", optarg);
            break;
        case 'L': o->long_only = 1; break;
        case 'B': {
            char buf[256], *comma;
            const char *cb = strstr(optarg, ":/");
            if (cb) { /* a dataset of per-asset bounds */
                if (cb == optarg || (size_t)(cb - optarg) >= sizeof o->bfile || strlen(cb + 1) >= sizeof o->bdset)
                    return bad("--bounds: '%s' is not LO,HI or FILE.h5:/DATASET", optarg);
                snprintf(o->bfile, sizeof o->bfile, "%.*s", (int)(cb - optarg), optarg);
                snprintf(o->bdset, sizeof o->bdset, "%s", cb + 1);
                o->has_bounds = 2;
                break;
            }
            snprintf(buf, sizeof buf, "%s", optarg);
            comma = strchr(buf, ',');
            if (!comma) return bad("--bounds: '%s' is not LO,HI", optarg);
            *comma = '\0';
            if (ghf_parse_double(buf, &o->lo) || ghf_parse_double(comma + 1, &o->hi) || isnan(o->lo) || isnan(o->hi) ||
                !(o->lo <= o->hi) || o->lo == INFINITY || o->hi == -INFINITY)
                return bad("--bounds: '%s' is not LO,HI with LO <= HI", optarg);
            o->has_bounds = 1;
            break;
        }
        case 'r':
        case 'l':
            if (sense >= 0 && sense != (c == 'l')) return bad("%s", "--returns and --losses exclude each other");
            sense = c == 'l';
            break;
        default:
            ghf_error0("optimize: unknown or incomplete option '%s' (see ghfit optimize --help)", argv[optind - 1]);
            return GHF_EXIT_USAGE;
        }
    }
    if (optind < argc) return bad("optimize: unexpected argument '%s' (see ghfit optimize --help)", argv[optind]);
    const char *miss = !model ? "--model" : !meas ? "--measure" : !o->out ? "--out" : NULL;
    if (miss) return bad("optimize: %s is required (see ghfit optimize --help)", miss);
    o->measure = -1;
    for (int i = 0; i < 3; i++)
        if (!strcmp(meas, MEAS[i])) o->measure = i;
    if (o->measure < 0) return bad("--measure: '%s' is not sd, var or es", meas);
    o->losses = sense == 1;
    if (o->long_only && o->lo < 0.0) o->lo = 0.0;
    if (!(o->lo <= o->hi)) return bad("%s", "--long-only with --bounds LO,HI: HI < 0 leaves no portfolio");
    /* the type: --type, or the shortcut flags; they must agree */
    int implied = frontier ? T_FRONTIER : tangency ? T_TANGENCY : o->has_target ? T_TARGET : -1;
    if (frontier + tangency > 1 || (tangency && o->has_target))
        return bad("%s", "optimize: --frontier, --tangency and --target-return name different types; give one");
    if (type >= 0 && implied >= 0 && type != implied && !(type == T_FRONTIER && implied == T_TARGET))
        return bad("optimize: --type %s disagrees with the other options (--frontier, --tangency, --target-return)",
                   TYPES[type]);
    o->type = type >= 0 ? type : implied >= 0 ? implied : T_MIN;
    if (o->type == T_FRONTIER && !frontier) o->K = 20;
    if (o->type == T_TARGET && !o->has_target) return bad("%s", "--type target-return needs --target-return R");
    if (o->has_rf && o->type != T_TANGENCY) return bad("%s", "--risk-free applies to --tangency only");
    /* --model */
    const char *cc = NULL;
    for (const char *q = strstr(model, ":/"); q; q = strstr(q + 1, ":/")) cc = q;
    if (cc) {
        const char *suf = cc + 1;
        if (cc == model || (size_t)(cc - model) >= sizeof o->model || strncmp(suf, "/fits/", 6) != 0 || !suf[6] ||
            strchr(suf + 6, '/') || strlen(suf + 6) >= sizeof o->fit)
            return bad("--model: '%s' is not RESULT.h5 or RESULT.h5:/fits/NAME", model);
        snprintf(o->model, sizeof o->model, "%.*s", (int)(cc - model), model);
        snprintf(o->fit, sizeof o->fit, "%s", suf + 6);
        o->has_fit = 1;
    } else {
        snprintf(o->model, sizeof o->model, "%s", model);
    }
    return 0;
}

typedef struct opt_model {
    ghf_fit_law fl;
    ghf_opt_law law;
    ghf_opt_factor fac; /* the factor form: Sigma through B, D, never formed */
    double *lo, *hi;
    char data_file[4096], dataset[1024];
    int64_t row_start, row_count;
    int has_data;
} opt_model;

/* Rank 0: the fit, its law, what the measure needs, the constraints, the output. */
static int opt_check(opt_opts *o, opt_model *md, int dry, char *err, size_t errlen)
{
    int st = ghf_h5_read_fit_any_bd(o->model, o->has_fit ? o->fit : NULL, &md->fl, err, errlen); /* factor: B, D only */
    if (st) return st;
    ghf_fit_law *fl = &md->fl;
    if (fl->n_components >= 2) { /* the optimiser's gradients are those of one law's VaR/ES */
        snprintf(err, errlen, "%s:/fits/%s is a %d-component mixture; optimize needs a single law", o->model, fl->name,
                 fl->n_components);
        ghf_fit_law_free(fl);
        return GHF_EXIT_USAGE;
    }
    snprintf(o->fit, sizeof o->fit, "%s", fl->name);
    const int d = fl->d;
    int finite = 1;
    for (int i = 0; i < d; i++) finite &= isfinite(fl->mu[i]) && isfinite(fl->gamma[i]);
    if (fl->D) { /* the factor form: B and D, the only dispersion optimize reads */
        for (long i = 0; i < (long)d * fl->factors; i++) finite &= isfinite(fl->B[i]) != 0;
        for (int i = 0; i < d; i++) finite &= isfinite(fl->D[i]) != 0;
    } else
        for (long i = 0; i < (long)d * d; i++) finite &= isfinite(fl->sigma[i]) != 0;
    ghf_family fam;
    ghf_opt_law *L = &md->law;
    L->d = d, L->gauss = strcmp(fl->family, "gauss") == 0, L->p = fl->p, L->a = fl->a, L->b = fl->b;
    L->mu = fl->mu, L->gamma = fl->gamma, L->losses = o->losses;
    L->disp.quad = ghf_opt_quad_dense, L->disp.ctx = fl->sigma;
    if (fl->D) md->fac = (ghf_opt_factor){fl->factors, fl->B, fl->D}, L->disp = (ghf_opt_disp){ghf_opt_quad_factor, &md->fac};
    if (ghf_family_parse(fl->family, &fam) != 0) {
        snprintf(err, errlen, "%s:/fits/%s: unknown family '%s'", o->model, o->fit, fl->family);
        return GHF_EXIT_USAGE;
    }
    if (!finite || ghf_opt_law_init(L) != GHF_UNI_OK) {
        snprintf(err, errlen, "%s:/fits/%s: the fit has no usable law (status '%s': parameters not finite or outside "
                 "the %s family's domain)", o->model, o->fit, fl->status, fl->family);
        return GHF_EXIT_USAGE;
    }
    const char *lack = ghf_opt_law_lacks(L, o->measure, 1);
    if (lack) {
        snprintf(err, errlen, "%s:/fits/%s (%s, p = %g, a = %g, b = %g): %s; --measure %s%s cannot be optimised", o->model,
                 o->fit, fl->family, fl->p, fl->a, fl->b, lack, MEAS[o->measure],
                 o->measure == GHF_OPT_SD ? "" : " with the expected returns ghfit optimize reports");
        return GHF_EXIT_USAGE;
    }
    md->lo = malloc((size_t)d * sizeof(double));
    md->hi = malloc((size_t)d * sizeof(double));
    if (!md->lo || !md->hi) {
        snprintf(err, errlen, "out of memory");
        return GHF_EXIT_RUNTIME;
    }
    for (int i = 0; i < d; i++) md->lo[i] = o->lo, md->hi[i] = o->hi;
    if (o->has_bounds == 2) { /* per-asset bounds: [d][2], read by this rank alone */
        int64_t n = 0;
        int c2 = 0;
        st = ghf_h5_probe(o->bfile, o->bdset, &n, &c2, err, errlen);
        if (!st && (n != d || c2 != 2)) {
            snprintf(err, errlen, "--bounds %s:%s: has shape [%lld][%d], but the fit %s:/fits/%s has dimension %d "
                     "(expected [%d][2]: LO, HI per asset)", o->bfile, o->bdset, (long long)n, c2, o->model, o->fit, d, d);
            st = GHF_EXIT_USAGE;
        }
        if (st) return st;
        if (dry) goto outputs; /* check (no MPI): the shape only; the values are read by the command */
        ghf_shard sh;
        const ghf_read_opts ro = {.path = o->bfile, .dataset = o->bdset, .win_len = -1};
        st = ghf_h5_read_shard(MPI_COMM_SELF, &ro, &sh, err, errlen);
        if (st) return st;
        for (int i = 0; i < d; i++) {
            md->lo[i] = sh.x[2 * i], md->hi[i] = sh.x[2 * i + 1];
            if (o->long_only && md->lo[i] < 0.0) md->lo[i] = 0.0;
        }
        ghf_shard_free(&sh);
    }
    const ghf_opt_cons cs = {o->budget, md->lo, md->hi};
    char why[512];
    md->law.disp.ctx = md->fl.D ? (const void *)&md->fac : (const void *)md->fl.sigma;
    if (ghf_opt_feasible(&cs, d, why, sizeof why)) {
        snprintf(err, errlen, "optimize: infeasible constraints: %s (d = %d assets)", why, d);
        return GHF_EXIT_USAGE;
    }
    if (o->type == T_TARGET || o->type == T_FRONTIER) {
        const double rmax = ghf_opt_max_return(&md->law, &cs, NULL);
        if (o->has_target && o->target > rmax + 1e-12 * fabs(rmax)) {
            snprintf(err, errlen, "--target-return %g is above the highest expected return attainable under the "
                     "constraints (%.10g)", o->target, rmax);
            return GHF_EXIT_USAGE;
        }
        if (o->type == T_FRONTIER && !o->has_target && !isfinite(rmax)) {
            snprintf(err, errlen, "--frontier: the expected return is unbounded without --long-only or --bounds; give "
                     "--target-return R as the frontier's top");
            return GHF_EXIT_USAGE;
        }
    }
outputs:
    md->has_data = ghf_h5_read_fit_data(o->model, o->fit, md->data_file, sizeof md->data_file, md->dataset,
                                        sizeof md->dataset, &md->row_start, &md->row_count) == 0;
    st = (dry ? ghf_h5_out_check_access : ghf_h5_out_check)(o->out, err, errlen);
    if (!st) {
        const ghf_path_use u[3] = {{o->model, "--model", GHF_PATH_INPUT, NULL}, {o->out, "--out", GHF_PATH_OPTIMIZE, NULL},
                                   {o->bfile, "--bounds", GHF_PATH_INPUT, NULL}};
        st = ghf_paths_check(u, o->has_bounds == 2 ? 3 : 2, err, errlen);
    }
    if (!st) st = (dry ? ghf_out_lock_query : ghf_out_lock)(o->out, err, errlen);
    return st;
}

int ghf_optimize_check(int argc, char **argv, char *ok, size_t oklen, char *err, size_t errlen)
{
    opt_opts o;
    int st = opt_parse(argc, argv, &o);
    if (st) return st;
    opt_model md;
    memset(&md, 0, sizeof md);
    st = opt_check(&o, &md, 1, err, errlen);
    if (!st)
        snprintf(ok, oklen, "optimize %s %s portfolio%s (d = %d) under %.1000s:/fits/%s into %.1000s", TYPES[o.type],
                 MEAS[o.measure], o.type == T_FRONTIER ? "s" : "", md.law.d, o.model, o.fit, o.out);
    ghf_fit_law_free(&md.fl);
    free(md.lo), free(md.hi);
    return st;
}

static int opt_run(const opt_opts *o, opt_model *md, int size, char *err, size_t errlen)
{
    const int d = md->law.d, K = o->type == T_FRONTIER ? o->K : 1;
    const ghf_opt_cons cs = {o->budget, md->lo, md->hi};
    double *W = malloc((size_t)K * d * sizeof(double)), *cols = malloc((size_t)K * 9 * sizeof(double));
    ghf_opt_result *res = calloc((size_t)K, sizeof *res);
    int st = 0;
    if (!W || !cols || !res) {
        snprintf(err, errlen, "out of memory");
        st = GHF_EXIT_RUNTIME;
        goto done;
    }
    if (o->type == T_FRONTIER) {
        st = ghf_opt_frontier(&md->law, &cs, o->measure, o->alpha, K, o->has_target ? o->target : NAN, W, res);
    } else {
        const ghf_opt_spec sp = {o->measure, o->type == T_TARGET ? GHF_OPT_TARGET : o->type == T_TANGENCY ? GHF_OPT_TANGENCY
                                                                                                           : GHF_OPT_MIN_RISK,
                                 o->alpha, o->target, o->rf};
        st = ghf_opt_solve(&md->law, &cs, &sp, NULL, W, res);
    }
    if (st) {
        snprintf(err, errlen, "out of memory");
        st = GHF_EXIT_RUNTIME;
        goto done;
    }
    double *ret = cols, *risk = cols + K, *sd = cols + 2 * K, *var = cols + 3 * K, *es = cols + 4 * K;
    double *stat = cols + 5 * K, *conv = cols + 6 * K, *kkt = cols + 7 * K;
    int nconv = 0;
    for (int k = 0; k < K; k++) {
        ret[k] = res[k].ret, risk[k] = res[k].risk, sd[k] = res[k].sd, var[k] = res[k].var, es[k] = res[k].es;
        stat[k] = res[k].status, conv[k] = res[k].converged, kkt[k] = res[k].kkt;
        nconv += res[k].converged;
    }
    char cons[8448], note[256] = "";
    snprintf(cons, sizeof cons, "sum w = %g%s%s%s%s", o->budget, o->long_only ? "; w >= 0 (long-only)" : "",
             o->has_bounds == 1 ? "; bounds LO <= w_i <= HI" : o->has_bounds == 2 ? "; per-asset bounds from " : "",
             o->has_bounds == 2 ? o->bfile : "", o->has_bounds == 2 ? o->bdset : "");
    if (nconv < K) {
        snprintf(note, sizeof note, "%d of %d points did not converge (see /converged, /status, /kkt)", K - nconv, K);
        fprintf(stderr, "ghfit: warning: %s\n", note);
    }
    const ghf_out_meta meta = {.version = GHFIT_VERSION, .git_commit = GHFIT_GIT_COMMIT,
                               .command_line = ghf_command_line(), .n_ranks = size};
    const ghf_opt_file f = {&meta, o->model, o->fit, md->fl.family, md->fl.status, md->fl.n_obs, md->fl.loglik,
                            md->has_data ? md->data_file : NULL, md->dataset, md->row_start, md->row_count, K, d,
                            MEAS[o->measure], TYPES[o->type], cons, o->alpha, o->budget, o->lo, o->hi, o->target,
                            o->rf, o->has_target, o->type == T_TANGENCY, o->losses, W, ret, risk, sd, var, es, stat,
                            conv, kkt, md->lo, md->hi, note[0] ? note : NULL};
    st = ghf_h5_write_opt(o->out, &f, err, errlen);
    if (st) goto done;
    printf("wrote %s: %s %s portfolio%s under %s:/fits/%s (%s, d = %d), %s at alpha = %g\n", o->out, TYPES[o->type],
           MEAS[o->measure], K > 1 ? "s" : "", o->model, o->fit, md->fl.family, d,
           o->losses ? "losses" : "returns", o->alpha);
    printf("  %5s %14s %14s %14s %14s %14s %9s %6s\n", "point", "exp.return", "risk", "sd", "VaR", "ES", "converged",
           "status");
    for (int k = 0; k < K; k++)
        printf("  %5d %14.6g %14.6g %14.6g %14.6g %14.6g %9d %6d\n", k, ret[k], risk[k], sd[k], var[k], es[k],
               res[k].converged, res[k].status);
    if (K == 1) {
        printf("  weights:");
        for (int i = 0; i < d && i < 20; i++) printf(" %.6g", W[i]);
        printf("%s\n", d > 20 ? " ... (see /weights)" : "");
    }
done:
    free(W), free(cols), free(res);
    return st;
}

int ghf_cmd_optimize(int argc, char **argv)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    opt_opts o;
    int st = opt_parse(argc, argv, &o);
    if (st < 0) {
        if (rank == 0) opt_usage(stdout);
        return GHF_EXIT_OK;
    }
    if (st) return st;
    opt_model md;
    memset(&md, 0, sizeof md);
    char err[16384] = "";
    if (rank == 0) st = opt_check(&o, &md, 0, err, sizeof err);
    st = ghf_agree(MPI_COMM_WORLD, st, err, sizeof err);
    if (!st && rank == 0) st = opt_run(&o, &md, size, err, sizeof err);
    ghf_bcast_status(MPI_COMM_WORLD, &st, err, sizeof err); /* rank 0's work and write */
    if (st) ghf_error0("%s", err[0] ? err : "optimize failed");
    if (rank == 0) ghf_fit_law_free(&md.fl);
    free(md.lo), free(md.hi);
    return st;
}
