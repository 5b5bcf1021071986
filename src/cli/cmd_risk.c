/* cmd_risk.c - `ghfit risk`: VaR and ES of the loss -w'X of many portfolios w
 * under one fitted law (src/law/uni1d.h), portfolios split over the ranks. */
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
#include "h5io.h"
#include "model.h"
#include "postcmd.h"
#include "risk.h"
#include "uni1d.h"
#include "util.h"

#define RISK_MAX_ALPHA GHF_RISK_MAX_ALPHA

static void risk_usage(FILE *f)
{
    fprintf(f,
            "usage: [mpirun -np P] ghfit risk --model RESULT.h5[:/fits/NAME] --portfolios W.h5[:/W]\n"
            "                        --alpha A[,A...] --out RISK.h5\n"
            "  VaR and ES of each portfolio's loss L = -w'X under the fitted law of X:\n"
            "  VaR_alpha = the alpha-quantile of L, ES_alpha = E[L | L >= VaR_alpha]\n"
            "  --model       a result file of ghfit fit/run; without :/fits/NAME it must hold one fit\n"
            "  --portfolios  a float dataset [P][d] of weight vectors (default dataset /W), d = the fit's dimension\n"
            "  --alpha       one or more levels in (0, 1), comma-separated (at most %d)\n"
            "  --out         the risk file: /alpha [K], /var [P][K], /es [P][K] (docs/output-schema.md)\n"
            "  Portfolios are split over the ranks; every value is accurate to about 1e-11 relative\n"
            "  (adaptive quadrature over the subordinator, src/law/uni1d.c).  Under a mixture fit the\n"
            "  loss is a mixture of K univariate laws: VaR by root finding on its cdf, ES from the\n"
            "  components' partial expectations.\n"
            "exit status: 0 done, 1 run-time failure, 2 bad input (no output file is left)\n",
            RISK_MAX_ALPHA);
}

/* "PATH[:/SUFFIX]": the path and the suffix (with its '/'), split at the last ":/" */
static int split_spec(const char *s, char *path, size_t plen, char *suf, size_t slen)
{
    const char *c = NULL;
    for (const char *q = strstr(s, ":/"); q; q = strstr(q + 1, ":/")) c = q;
    if (!c) {
        snprintf(path, plen, "%s", s);
        suf[0] = '\0';
        return 0;
    }
    if ((size_t)(c - s) >= plen || strlen(c + 1) >= slen || c == s) return -1;
    snprintf(path, plen, "%.*s", (int)(c - s), s);
    snprintf(suf, slen, "%s", c + 1);
    return 0;
}

static int parse_alpha(const char *s, ghf_risk_opts *o)
{
    char buf[8192];
    if (strlen(s) >= sizeof buf) {
        ghf_error0("--alpha: longer than %zu characters", sizeof buf - 1);
        return GHF_EXIT_USAGE;
    }
    snprintf(buf, sizeof buf, "%s", s);
    o->K = 0;
    /* every item between commas is a level: an empty one ("0.99,,", ",0.99") is refused */
    for (char *t = buf, *next; t; t = next) {
        double a;
        next = strchr(t, ',');
        if (next) *next++ = '\0';
        if (!*t) {
            ghf_error0("--alpha: '%s' has an empty item (levels are comma-separated, e.g. --alpha 0.99,0.975)", s);
            return GHF_EXIT_USAGE;
        }
        if (o->K >= RISK_MAX_ALPHA) {
            ghf_error0("--alpha: more than %d levels", RISK_MAX_ALPHA);
            return GHF_EXIT_USAGE;
        }
        if (ghf_parse_double(t, &a) || !(a > 0.0 && a < 1.0)) {
            ghf_error0("--alpha: '%s' is not a level in (0, 1)", t);
            return GHF_EXIT_USAGE;
        }
        o->alpha[o->K++] = a;
    }
    if (o->K == 0) {
        ghf_error0("--alpha: no level given (e.g. --alpha 0.99,0.975)");
        return GHF_EXIT_USAGE;
    }
    return 0;
}

int ghf_risk_parse(int argc, char **argv, ghf_risk_opts *o)
{
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},  {"portfolios", required_argument, 0, 'w'},
                                         {"alpha", required_argument, 0, 'a'},  {"out", required_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    const char *model = NULL, *w = NULL, *alpha = NULL;
    memset(o, 0, sizeof *o);
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'h') return -1;
        if (c == 'm') model = optarg;
        else if (c == 'w') w = optarg;
        else if (c == 'a') alpha = optarg;
        else if (c == 'o') o->out = optarg;
        else {
            ghf_error0("risk: unknown or incomplete option '%s' (see ghfit risk --help)", argv[optind - 1]);
            return GHF_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        ghf_error0("risk: unexpected argument '%s' (see ghfit risk --help)", argv[optind]);
        return GHF_EXIT_USAGE;
    }
    const char *miss = !model ? "--model" : !w ? "--portfolios" : !alpha ? "--alpha" : !o->out ? "--out" : NULL;
    if (miss) {
        ghf_error0("risk: %s is required (see ghfit risk --help)", miss);
        return GHF_EXIT_USAGE;
    }
    char suf[1100];
    if (split_spec(model, o->model, sizeof o->model, suf, sizeof suf) ||
        (suf[0] && (strncmp(suf, "/fits/", 6) != 0 || !suf[6] || strchr(suf + 6, '/') ||
                    strlen(suf + 6) >= sizeof o->fit))) {
        ghf_error0("--model: '%s' is not RESULT.h5 or RESULT.h5:/fits/NAME", model);
        return GHF_EXIT_USAGE;
    }
    o->has_fit = suf[0] != '\0';
    if (o->has_fit) snprintf(o->fit, sizeof o->fit, "%s", suf + 6);
    if (split_spec(w, o->wfile, sizeof o->wfile, o->wdset, sizeof o->wdset)) {
        ghf_error0("--portfolios: '%s' is not W.h5 or W.h5:/DATASET", w);
        return GHF_EXIT_USAGE;
    }
    if (!o->wdset[0]) snprintf(o->wdset, sizeof o->wdset, "/W");
    return parse_alpha(alpha, o);
}

/* Rank 0: which fit (the only one, or the named one among /summary's rows) */
static int choose_fit(ghf_risk_opts *o, char *err, size_t errlen)
{
    ghf_fit_summary *rows = NULL;
    int n = 0, st = ghf_h5_read_fit_summary(o->model, &rows, &n, err, errlen);
    if (st) return st;
    int found = !o->has_fit && n == 1;
    for (int i = 0; o->has_fit && i < n; i++) found |= strcmp(rows[i].name, o->fit) == 0;
    if (!found) {
        char names[600] = "";
        size_t len = 0;
        for (int i = 0; i < n && len + 80 < sizeof names; i++)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", rows[i].name);
        if (n > 0 && len + 80 >= sizeof names) snprintf(names + len, sizeof names - len, ", ... (%d fits)", n);
        if (o->has_fit)
            snprintf(err, errlen, "%s: no fit named '%s' (the file holds: %s)", o->model, o->fit, n ? names : "no fits");
        else
            snprintf(err, errlen, "%s: holds %d fits, name one as --model %s:/fits/NAME (fits: %s)", o->model, n,
                     o->model, n ? names : "none");
        free(rows);
        return GHF_EXIT_USAGE;
    }
    if (!o->has_fit) snprintf(o->fit, sizeof o->fit, "%s", rows[0].name);
    free(rows);
    return 0;
}

/* Rank 0: the fit's law (checked: a family ghfit knows, finite parameters in its domain) */
static int read_model(const ghf_risk_opts *o, ghf_risk_model *md, char *err, size_t errlen)
{
    ghf_fit_law fp;
    int st = ghf_h5_read_fit_any_bd(o->model, o->fit, &fp, err, errlen); /* a factor fit: B and D, no Sigma */
    if (st) return st;
    const int d = fp.d;
    md->n_components = fp.n_components;
    if (fp.n_components >= 2) { /* a mixture: every component checked (domain, Sigma positive definite), packed */
        ghf_family fam;
        md->d = d;
        snprintf(md->family, sizeof md->family, "%s", fp.family);
        md->gauss = strcmp(fp.family, "gauss") == 0;
        md->p = md->a = md->b = NAN;
        md->nf = -1;
        st = ghf_fit_law_check(o->model, &fp, &fam, err, errlen);
        const int Kc = fp.n_components, per = 2 * d + d * d + 3;
        md->prop = st ? NULL : malloc((size_t)Kc * sizeof(double));
        md->cp = st ? NULL : malloc((size_t)Kc * (size_t)per * sizeof(double));
        if (!st && (!md->prop || !md->cp)) {
            snprintf(err, errlen, "%s:/fits/%s: out of memory (d = %d)", o->model, o->fit, d);
            st = GHF_EXIT_RUNTIME;
        }
        for (int k = 0; !st && k < Kc; k++) {
            const ghf_fit_law *c = &fp.comp[k];
            double *q = md->cp + (size_t)k * per;
            md->prop[k] = fp.prop[k];
            memcpy(q, c->mu, (size_t)d * sizeof(double));
            memcpy(q + d, c->gamma, (size_t)d * sizeof(double));
            memcpy(q + 2 * d, c->sigma, (size_t)d * d * sizeof(double));
            q[per - 3] = c->p, q[per - 2] = c->a, q[per - 1] = c->b;
        }
        ghf_fit_law_free(&fp);
        return st;
    }
    md->d = d;
    snprintf(md->family, sizeof md->family, "%s", fp.family);
    md->gauss = strcmp(fp.family, "gauss") == 0;
    md->p = fp.p, md->a = fp.a, md->b = fp.b;
    md->mu = fp.mu, md->gamma = fp.gamma, md->sigma = fp.sigma;
    md->nf = fp.D ? fp.factors : -1, md->B = fp.B, md->D = fp.D;
    fp.mu = fp.gamma = fp.sigma = fp.B = fp.D = NULL;
    int finite = 1;
    for (int i = 0; i < d; i++) finite &= isfinite(md->mu[i]) && isfinite(md->gamma[i]);
    if (md->nf >= 0) { /* the factor form: B B' + D is positive definite when every D_j > 0 */
        for (long i = 0; i < (long)d * md->nf; i++) finite &= isfinite(md->B[i]) != 0;
        for (int i = 0; i < d; i++) finite &= isfinite(md->D[i]) != 0;
    } else
        for (long i = 0; i < (long)d * d; i++) finite &= isfinite(md->sigma[i]) != 0;
    ghf_family fam;
    ghf_uni_mix mx;
    if (ghf_family_parse(md->family, &fam) != 0) {
        snprintf(err, errlen, "%s:/fits/%s: unknown family '%s'", o->model, o->fit, md->family);
        st = GHF_EXIT_USAGE;
    } else if (!finite || ghf_uni_mix_init(&mx, md->gauss, md->p, md->a, md->b) != GHF_UNI_OK) {
        snprintf(err, errlen, "%s:/fits/%s: the fit has no usable law (status '%s': parameters not finite or "
                 "outside the %s family's domain)", o->model, o->fit, fp.status, md->family);
        st = GHF_EXIT_USAGE;
    } else if (md->nf >= 0) { /* w' Sigma w >= w' D w > 0 for every w != 0: no d x d factorisation */
        for (int i = 0; i < d && !st; i++)
            if (!(md->D[i] > 0.0)) {
                snprintf(err, errlen, "%s:/fits/%s: not a valid %s law: the specific variance D[%d] = %g is not "
                         "positive (status '%s')", o->model, o->fit, md->family, i, md->D[i], fp.status);
                st = GHF_EXIT_USAGE;
            }
    } else { /* w' Sigma w > 0 for every w != 0, else a variance clamped to 0 or NaN values for some portfolios */
        double *L = malloc((size_t)d * (size_t)d * sizeof(double));
        if (!L) {
            snprintf(err, errlen, "%s:/fits/%s: out of memory (d = %d)", o->model, o->fit, d);
            st = GHF_EXIT_RUNTIME;
        } else if (ghf_cholesky(d, md->sigma, L) != 0) {
            snprintf(err, errlen, "%s:/fits/%s: not a valid %s law: Sigma is not positive definite (status '%s')",
                     o->model, o->fit, md->family, fp.status);
            st = GHF_EXIT_USAGE;
        }
        free(L);
    }
    return st;
}

int ghf_risk_check(ghf_risk_opts *o, ghf_risk_model *md, int dry, char *err, size_t errlen)
{
    int st = choose_fit(o, err, errlen);
    if (!st) st = read_model(o, md, err, errlen);
    int dw = 0;
    if (!st) st = ghf_h5_probe(o->wfile, o->wdset, &md->P, &dw, err, errlen);
    if (!st && dw != md->d) {
        snprintf(err, errlen, "%s:%s: weights have %d columns, but the fit %s:/fits/%s has dimension %d", o->wfile,
                 o->wdset, dw, o->model, o->fit, md->d);
        st = GHF_EXIT_USAGE;
    }
    if (!st && md->P > INT_MAX / o->K) {
        snprintf(err, errlen, "%s:%s: %lld portfolios x %d levels is more than this version handles (2^31 values)",
                 o->wfile, o->wdset, (long long)md->P, o->K);
        st = GHF_EXIT_USAGE;
    }
    if (!st) st = (dry ? ghf_h5_out_check_access : ghf_h5_out_check)(o->out, err, errlen);
    if (!st) {
        const ghf_path_use u[3] = {{o->model, "--model", GHF_PATH_INPUT, NULL},
                                   {o->wfile, "--portfolios", GHF_PATH_INPUT, NULL},
                                   {o->out, "--out", GHF_PATH_RISK, NULL}};
        st = ghf_paths_check(u, 3, err, errlen);
    }
    if (!st) st = (dry ? ghf_out_lock_query : ghf_out_lock)(o->out, err, errlen);
    return st;
}

/* rank 0's model to every rank (after an agreed success) */
static int bcast_model(ghf_risk_model *md, int rank)
{
    double hdr[8] = {md->d, md->gauss, (double)md->P, md->p, md->a, md->b, md->nf, md->n_components};
    MPI_Bcast(hdr, 8, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Bcast(md->family, sizeof md->family, MPI_CHAR, 0, MPI_COMM_WORLD);
    const int d = (int)hdr[0], nf = (int)hdr[6], Kc = (int)hdr[7];
    if (Kc >= 2) { /* a mixture: its proportions and packed components */
        const size_t per = (size_t)(2 * d + d * d + 3);
        md->d = d, md->gauss = (int)hdr[1], md->P = (int64_t)hdr[2], md->nf = -1, md->n_components = Kc;
        if (rank != 0) {
            md->prop = malloc((size_t)Kc * sizeof(double));
            md->cp = malloc((size_t)Kc * per * sizeof(double));
        }
        int st = ghf_agree(MPI_COMM_WORLD, !md->prop || !md->cp ? GHF_EXIT_RUNTIME : 0, NULL, 0);
        if (st) return st;
        MPI_Bcast(md->prop, Kc, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        MPI_Bcast(md->cp, (int)(Kc * per), MPI_DOUBLE, 0, MPI_COMM_WORLD);
        return 0;
    }
    md->d = d, md->gauss = (int)hdr[1], md->P = (int64_t)hdr[2], md->p = hdr[3], md->a = hdr[4], md->b = hdr[5];
    md->nf = nf;
    /* the factor form: B and D (one block), never the d x d Sigma */
    const size_t nbd = nf >= 0 ? (size_t)d * (size_t)(nf > 0 ? nf : 1) + (size_t)d : 0;
    if (rank != 0) {
        md->mu = malloc((size_t)d * sizeof(double));
        md->gamma = malloc((size_t)d * sizeof(double));
        if (nf < 0) md->sigma = malloc((size_t)d * (size_t)d * sizeof(double));
        else {
            md->B = malloc(nbd * sizeof(double));
            md->D = md->B ? md->B + (size_t)d * (size_t)(nf > 0 ? nf : 1) : NULL;
        }
    }
    int st = ghf_agree(MPI_COMM_WORLD, !md->mu || !md->gamma || (nf < 0 ? !md->sigma : !md->B) ? GHF_EXIT_RUNTIME : 0,
                       NULL, 0);
    if (st) return st;
    MPI_Bcast(md->mu, d, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Bcast(md->gamma, d, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (nf < 0) MPI_Bcast(md->sigma, d * d, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    else MPI_Bcast(md->B, (int)nbd, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return 0;
}

/* VaR/ES of this rank's portfolios (rows of w, n x d) into var/es [n][K]
 * (src/law/risk.h); the worst law status and its first global row */
static int risk_compute(const ghf_risk_model *md, const ghf_risk_opts *o, const double *w, int64_t n, int64_t row0,
                        double *var, double *es, int64_t *bad_row)
{
    if (md->n_components >= 2) { /* a mixture: each portfolio on its own (rank-independent values) */
        const int d = md->d, Kc = md->n_components, per = 2 * d + d * d + 3;
        ghf_risk_law *cl = malloc((size_t)Kc * sizeof *cl);
        if (!cl) return -1;
        for (int k = 0; k < Kc; k++) {
            const double *q = md->cp + (size_t)k * per;
            cl[k] = (ghf_risk_law){md->gauss, d, q[per - 3], q[per - 2], q[per - 1], q, q + d, q + 2 * d, 0, NULL, NULL};
        }
        const int ws = ghf_risk_portfolios_mix(cl, md->prop, Kc, o->K, o->alpha, w, n, row0, var, es, bad_row);
        free(cl);
        return ws;
    }
    const ghf_risk_law lw = {md->gauss, md->d, md->p, md->a, md->b, md->mu, md->gamma, md->sigma,
                             md->nf, md->nf >= 0 ? md->B : NULL, md->nf >= 0 ? md->D : NULL};
    /* the global count sizes the plan: the same bits on any number of ranks */
    return ghf_risk_portfolios(&lw, o->K, o->alpha, (size_t)md->P, w, n, row0, var, es, bad_row);
}

static int severity(int s) { return ghf_risk_severity(s); }

/* the note on the file (and a warning) for the worst status over all ranks */
static void risk_note(int sev, int64_t row, char *note, size_t len)
{
    note[0] = '\0';
    if (sev == 3)
        snprintf(note, len, "some portfolios have no law (NaN values; first: row %lld)", (long long)row);
    else if (sev == 2)
        snprintf(note, len, "some values missed the 1e-11 tolerance of the quadrature (best estimates kept; first: "
                 "row %lld)", (long long)row);
    else if (sev == 1)
        snprintf(note, len, "ES is +inf where the loss's tail has no mean (first: row %lld)", (long long)row);
}

void ghf_risk_nonfinite_msg(char *err, size_t errlen)
{
    char *hint = strstr(err, "; use --drop-nonfinite");
    if (hint) snprintf(hint, errlen - (size_t)(hint - err), " (non-finite weights)");
}

/* Everything after the checks: read the shards, compute, gather to rank 0, write. */
static int risk_run(const ghf_risk_opts *o, const ghf_risk_model *md, int rank, int size, char *err, size_t errlen)
{
    ghf_shard sh;
    const ghf_read_opts ro = {.path = o->wfile, .dataset = o->wdset, .win_len = -1};
    int st = ghf_h5_read_shard(MPI_COMM_WORLD, &ro, &sh, err, errlen);
    if (st) {
        ghf_risk_nonfinite_msg(err, errlen);
        return st;
    }
    const int K = o->K;
    double *var = malloc((size_t)(sh.nrows > 0 ? sh.nrows : 1) * K * sizeof(double));
    double *es = malloc((size_t)(sh.nrows > 0 ? sh.nrows : 1) * K * sizeof(double));
    int64_t bad_row = -1;
    int ws = var && es ? risk_compute(md, o, sh.x, sh.nrows, sh.row0, var, es, &bad_row) : -1;
    ghf_shard_free(&sh);
    if (ws < 0) snprintf(err, errlen, "out of memory");
    st = ghf_agree(MPI_COMM_WORLD, ws < 0 ? GHF_EXIT_RUNTIME : 0, err, errlen);
    /* the worst status and its first row over the ranks */
    int sev = ws < 0 ? 0 : severity(ws), gsev = 0;
    MPI_Allreduce(&sev, &gsev, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    long long lr = sev == gsev && bad_row >= 0 ? (long long)bad_row : LLONG_MAX, grow = LLONG_MAX;
    MPI_Allreduce(&lr, &grow, 1, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    /* gather [P][K] to rank 0 (block ranges: rank r holds rows ghf_block_range(P, r)) */
    int *cnt = rank == 0 ? calloc((size_t)size, sizeof(int)) : NULL, *dsp = rank == 0 ? calloc((size_t)size, sizeof(int)) : NULL;
    double *allv = rank == 0 ? malloc((size_t)(md->P * K) * sizeof(double)) : NULL;
    double *alle = rank == 0 ? malloc((size_t)(md->P * K) * sizeof(double)) : NULL;
    if (!st) st = ghf_agree(MPI_COMM_WORLD, rank == 0 && (!cnt || !dsp || !allv || !alle) ? GHF_EXIT_RUNTIME : 0, err, errlen);
    if (!st) {
        for (int r = 0; rank == 0 && r < size; r++) {
            int64_t r0, nr;
            ghf_block_range(md->P, r, size, &r0, &nr);
            cnt[r] = (int)(nr * K), dsp[r] = (int)(r0 * K);
        }
        int64_t r0, nr;
        ghf_block_range(md->P, rank, size, &r0, &nr);
        MPI_Gatherv(var, (int)(nr * K), MPI_DOUBLE, allv, cnt, dsp, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        MPI_Gatherv(es, (int)(nr * K), MPI_DOUBLE, alle, cnt, dsp, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    }
    if (st) goto done;
    if (rank == 0) {
        char note[256];
        risk_note(gsev, (int64_t)grow, note, sizeof note);
        if (note[0]) fprintf(stderr, "ghfit: warning: %s\n", note);
        const ghf_out_meta meta = {.version = GHFIT_VERSION, .git_commit = GHFIT_GIT_COMMIT,
                                   .command_line = ghf_command_line(), .n_ranks = size};
        const ghf_risk_file rf = {&meta, o->model, o->fit, md->family, o->wfile, o->wdset, md->P, md->d, K,
                                  o->alpha, allv, alle, note[0] ? note : NULL, md->n_components};
        st = ghf_h5_write_risk(o->out, &rf, err, errlen);
    }
    ghf_bcast_status(MPI_COMM_WORLD, &st, err, errlen); /* rank 0's write */
done:
    free(var), free(es), free(cnt), free(dsp), free(allv), free(alle);
    return st;
}

int ghf_cmd_risk(int argc, char **argv)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ghf_risk_opts o;
    int st = ghf_risk_parse(argc, argv, &o);
    if (st < 0) {
        if (rank == 0) risk_usage(stdout);
        return GHF_EXIT_OK;
    }
    if (st) return st;
    ghf_risk_model md;
    memset(&md, 0, sizeof md);
    char err[16384] = "";
    if (rank == 0) st = ghf_risk_check(&o, &md, 0, err, sizeof err);
    st = ghf_agree(MPI_COMM_WORLD, st, err, sizeof err);
    if (!st) st = bcast_model(&md, rank);
    if (!st) st = risk_run(&o, &md, rank, size, err, sizeof err);
    char kc[48] = "";
    if (md.n_components >= 2) snprintf(kc, sizeof kc, "%d-component mixture, ", md.n_components);
    if (st) ghf_error0("%s", err[0] ? err : "risk failed");
    else
        ghf_print0("wrote %s: VaR and ES of %lld portfolios at %d level%s under %s:/fits/%s (%s%s, d = %d)\n", o.out,
                   (long long)md.P, o.K, o.K == 1 ? "" : "s", o.model, o.fit, kc, md.family, md.d);
    free(md.mu), free(md.gamma), free(md.sigma), free(md.B), free(md.prop), free(md.cp);
    return st;
}
