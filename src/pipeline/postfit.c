/* postfit.c - after a job's fits (postfit.h): risk of portfolios, rolling
 * backtest with Kupiec's test, out-of-sample log-likelihoods, goodness of
 * fit (with bootstrap p-values). */
#include "postfit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agree.h"
#include "family.h"
#include "gofboot.h"
#include "portopt.h"
#include "risk.h"
#include "score.h"
#include "uni1d.h"
#include "util.h"

int ghf_postfit_wanted(const ghf_job *j)
{
    return j->risk_file != NULL || j->eval != GHF_JOB_EVAL_OFF || j->gof || j->opt;
}

/* rank 0: one file's shape against d */
static int check_one(const ghf_job *j, const char *key, const char *file, const char *ds, int d, int64_t *n,
                     char *err, size_t errlen)
{
    int dd = 0;
    char e[1024];
    if (ghf_h5_probe(file, ds, n, &dd, e, sizeof e) != 0) {
        snprintf(err, errlen, "%s: %s: %s", j->source, key, e);
        return GHF_EXIT_USAGE;
    }
    if (dd != d) {
        snprintf(err, errlen, "%s: %s: %s:%s has %d columns, but the data %s:%s have dimension %d", j->source, key,
                 file, ds, dd, j->data_file, j->dataset ? j->dataset : "/X", d);
        return GHF_EXIT_USAGE;
    }
    return 0;
}

int ghf_postfit_check_local(const ghf_job *j, int d, char *err, size_t errlen)
{
    int st = 0;
    int64_t n = 0;
    if (j->risk_file) {
        st = check_one(j, "risk.portfolios", j->risk_file, j->risk_dataset, d, &n, err, errlen);
        if (!st && (n < 1 || n > (int64_t)(1 << 24) / j->risk_n_alpha)) {
            snprintf(err, errlen, "%s: risk.portfolios: %s:%s: %lld portfolios x %d levels (1 to 2^24 values)",
                     j->source, j->risk_file, j->risk_dataset, (long long)n, j->risk_n_alpha);
            st = GHF_EXIT_USAGE;
        }
    }
    if (!st && j->eval == GHF_JOB_EVAL_FILE) st = check_one(j, "eval", j->eval_file, j->eval_dataset, d, &n, err, errlen);
    if (!st && j->gof && j->gof_file) st = check_one(j, "gof.data", j->gof_file, j->gof_dataset, d, &n, err, errlen);
    if (!st && j->opt) { /* the constraints must hold a portfolio of d assets */
        double *lo = malloc((size_t)d * sizeof(double)), *hi = malloc((size_t)d * sizeof(double));
        char why[512];
        if (!lo || !hi) {
            snprintf(err, errlen, "out of memory");
            st = GHF_EXIT_RUNTIME;
        }
        for (int i = 0; !st && i < d; i++) lo[i] = j->opt_lo, hi[i] = j->opt_hi;
        const ghf_opt_cons cs = {j->opt_budget, lo, hi};
        if (!st && ghf_opt_feasible(&cs, d, why, sizeof why)) {
            snprintf(err, errlen, "%s: optimize: infeasible constraints: %s (d = %d assets)", j->source, why, d);
            st = GHF_EXIT_USAGE;
        }
        free(lo), free(hi);
    }
    return st;
}

int ghf_postfit_check(MPI_Comm world, const ghf_job *j, int d, char *err, size_t errlen)
{
    if (!ghf_postfit_wanted(j)) return 0;
    int rank;
    MPI_Comm_rank(world, &rank);
    const int st = rank == 0 ? ghf_postfit_check_local(j, d, err, errlen) : 0;
    return ghf_agree(world, st, err, errlen);
}

/* ------------------------------------------------------------------------ */

/* Rows (serial read on this process) with the non-finite ones removed. */
static int read_rows(const char *file, const char *ds, int64_t start, int64_t len, ghf_shard *sh, char *err,
                     size_t errlen)
{
    const ghf_read_opts ro = {.path = file, .dataset = ds, .win_start = start, .win_len = len, .drop_nonfinite = 2};
    if (ghf_h5_read_shard(MPI_COMM_SELF, &ro, sh, err, errlen) != 0) return 1;
    if (ghf_shard_widen(sh) != 0) {
        snprintf(err, errlen, "out of memory reading %s:%s", file, ds);
        ghf_shard_free(sh);
        return 1;
    }
    const int d = sh->d;
    int64_t k = 0;
    for (int64_t i = 0; i < sh->nrows; i++) {
        int ok = 1;
        for (int c = 0; c < d; c++) ok &= isfinite(sh->x[i * d + c]) != 0;
        if (ok && k != i) memmove(sh->x + k * d, sh->x + i * d, (size_t)d * sizeof(double));
        k += ok;
    }
    sh->nrows = sh->n_global = k;
    sh->row0 = 0;
    return 0;
}

typedef struct post {
    const ghf_job *j;
    int d, P, K;
    double *W;                 /* [P][d] weights */
    ghf_shard ev;              /* eval: FILE rows */
    ghf_shard gv;              /* gof: FILE rows */
    void (*beat)(void *);      /* the other ranks wait: heartbeats */
    void *beat_arg;
    /* per fit [n][P][K] (NULL without risk), n_next [n] */
    int *exc;
    int64_t *n_next;
    int *has_risk;
    /* optimize: per fit the optimal and the Gaussian minimum-variance weights
     * [n][d] (ok flags [n]), and the realised returns of the three strategies
     * (optimal, equal weight, min-variance) over the rows after the window
     * [rn[i]][3] */
    double *optW, *mvW, **rr;
    int *opt_ok, *mv_ok;
    int64_t *rn;
} post;

/* the fit's law as eval reads it; 0, or -1 when it has none (failed fit) */
static int rec_law(const ghf_fit_record *r, ghf_fit_law *law, ghf_family *fam)
{
    memset(law, 0, sizeof *law);
    if (ghf_family_parse(r->family, fam) != 0 || strncmp(r->status, "failed", 6) == 0) return -1;
    snprintf(law->name, sizeof law->name, "%s", r->name);
    snprintf(law->family, sizeof law->family, "%s", r->family);
    law->d = r->d;
    law->mu = (double *)r->mu, law->gamma = (double *)r->gamma, law->sigma = (double *)r->sigma;
    law->p = r->p, law->a = r->a, law->b = r->b;
    int ok = 1;
    for (int i = 0; i < r->d; i++) ok &= isfinite(r->mu[i]) && isfinite(r->gamma[i]);
    for (int i = 0; i < r->d * r->d; i++) ok &= isfinite(r->sigma[i]) != 0;
    if (*fam != GHF_FAMILY_GAUSS) ok &= isfinite(r->p) && isfinite(r->a) && isfinite(r->b);
    return ok ? 0 : -1;
}

/* the fit that is window w + 1 of the same chain, or -1 */
/* the fit of the chain's next window, or -1 */
static int next_of(const ghf_fit_spec *s, int n, int i)
{
    if (s[i].window < 0) return -1;
    for (int k = 0; k < n; k++)
        if (s[k].chain == s[i].chain && s[k].window == s[i].window + 1) return k;
    return -1;
}

/* VaR/ES of the P portfolios under fit i, written; exceedances of the next rows */
static int fit_risk(post *q, int i, const ghf_fit_record *r, const ghf_fit_law *law, ghf_family fam,
                    const ghf_shard *nx, ghf_h5_writer *w, char *err, size_t errlen)
{
    const int P = q->P, K = q->K, d = q->d;
    double *var = malloc((size_t)P * K * sizeof(double)), *es = malloc((size_t)P * K * sizeof(double));
    double *ex = malloc((size_t)P * K * sizeof(double));
    int st = var && es && ex ? 0 : 1;
    const ghf_risk_law lw = {fam == GHF_FAMILY_GAUSS, d, law->p, law->a, law->b, law->mu, law->gamma, law->sigma,
                             r->D ? r->factors : 0, r->D ? r->B : NULL, r->D};
    int64_t bad = -1;
    int ws = st ? -1 : ghf_risk_portfolios(&lw, K, q->j->risk_alpha, (size_t)P, q->W, P, 0, var, es, &bad);
    if (ws < 0) {
        snprintf(err, errlen, "risk of fit %s: out of memory", r->name);
        st = 1;
    }
    int *exc = q->exc + (size_t)i * P * K;
    for (int p = 0; !st && p < P; p++) {
        const double *wp = q->W + (size_t)p * d;
        for (int64_t t = 0; nx && t < nx->nrows; t++) {
            double L = 0.0;
            for (int c = 0; c < d; c++) L -= wp[c] * nx->x[t * d + c];
            for (int k = 0; k < K; k++) exc[p * K + k] += L > var[p * K + k];
        }
        for (int k = 0; k < K; k++) ex[p * K + k] = exc[p * K + k];
    }
    char base[128], note[256] = "";
    snprintf(base, sizeof base, "/fits/%s/risk", r->name);
    if (!st) {
        if (ws != 0)
            snprintf(note, sizeof note, "status %s (first: portfolio %lld)", ghf_uni_status_str(ws), (long long)bad);
        char na[160], nv[160], ne[160], nc[160];
        snprintf(na, sizeof na, "%s/alpha", base), snprintf(nv, sizeof nv, "%s/var", base);
        snprintf(ne, sizeof ne, "%s/es", base), snprintf(nc, sizeof nc, "%s/exceedances", base);
        const ghf_h5_array arr[4] = {
            {na, 1, {K, 0, 0}, q->j->risk_alpha, "the levels alpha"},
            {nv, 2, {P, K, 0}, var, "VaR_alpha of the loss -w'X of each portfolio (the alpha-quantile)"},
            {ne, 2, {P, K, 0}, es, "ES_alpha = E[-w'X | -w'X >= VaR_alpha]"},
            {nc, 2, {P, K, 0}, ex, "rows after the window (to the end of the next) whose loss -w'x exceeds VaR (0 without one)"}};
        const ghf_h5_attr at[3] = {
            {"description", GHF_H5_ATTR_STR, "VaR and ES of the job's portfolios under this fit (job key risk)", 0, 0},
            {"n_next", GHF_H5_ATTR_I64, NULL, 0, q->n_next[i]},
            {"note", GHF_H5_ATTR_STR, note, 0, 0}};
        st = ghf_h5_out_put(w, base, note[0] ? 3 : 2, at, 4, arr, err, errlen);
    }
    free(var), free(es), free(ex);
    return st;
}

/* loglik of the law on rows sh */
static int loglik_of(const ghf_fit_law *law, ghf_family fam, const ghf_shard *sh, double *ll, int64_t *n,
                     char *err, size_t errlen)
{
    *ll = NAN, *n = 0;
    if (!sh || sh->nrows == 0) return 0;
    ghf_shard c = *sh; /* the rows are left as they are (spend_x = 0) */
    return ghf_score_loglik(MPI_COMM_SELF, law, fam, &c, 0, ll, n, err, errlen) ? 1 : 0;
}

/* the description attributes of gof/margins and gof/radial (every group
 * under /fits carries one: docs/output-schema.md) */
static int gof_group_descriptions(ghf_h5_writer *w, const char *base, char *err, size_t errlen)
{
    static const char *const sub[2][2] = {
        {"margins", "per margin: KS, AD and CvM statistics of the PITs, their p-values, QQ tables"},
        {"radial", "the same for the radial statistic q = (x - mu)' Sigma^-1 (x - mu)"}};
    int st = 0;
    for (int i = 0; i < 2 && !st; i++) {
        char obj[192];
        snprintf(obj, sizeof obj, "%s/%s", base, sub[i][0]);
        const ghf_h5_attr at[1] = {{"description", GHF_H5_ATTR_STR, sub[i][1], 0, 0}};
        st = ghf_h5_out_put(w, obj, 1, at, 0, NULL, err, errlen);
    }
    return st;
}

#define POST_GOF_PIT_MAX 2000000 /* as `ghfit gof`: PITs kept when n * (d + 1) is at most this */

/* gof: the statistics of fit i on rows x (n x d), with bootstrap p-values,
 * under /fits/<name>/gof/ (the datasets of `ghfit gof`) */
static int fit_gof_rows(post *q, const ghf_fit_spec *s, const ghf_fit_record *r, const ghf_fit_law *law,
                        ghf_family fam, const ghf_shard *rows, const char *dfile, const char *dds, ghf_h5_writer *w,
                        char *err, size_t errlen)
{
    const ghf_job *j = q->j;
    const int64_t n = rows->nrows, d = law->d;
    char base[128];
    snprintf(base, sizeof base, "/fits/%s/gof", r->name);
    char obj[96];
    snprintf(obj, sizeof obj, "/fits/%s", r->name);
    if (n < 2) { /* nothing to check: say so */
        const ghf_h5_attr at[1] = {{"gof_note", GHF_H5_ATTR_STR, "fewer than 2 finite rows: no goodness of fit", 0, 0}};
        return ghf_h5_out_put(w, obj, 1, at, 0, NULL, err, errlen);
    }
    const ghf_gof_input in = {law->d, fam == GHF_FAMILY_GAUSS, law->mu, law->gamma, law->sigma, law->p, law->a,
                              law->b, rows->x, (size_t)n, j->gof_qq, 20000, 4096, n * (d + 1) <= POST_GOF_PIT_MAX,
                              NULL, q->beat, q->beat_arg, {0}};
    ghf_gof_result res;
    char e[1024];
    if (ghf_gof_compute(&in, &res, e, sizeof e) != 0) { /* a law gof cannot check: noted, the job goes on */
        const ghf_h5_attr at[1] = {{"gof_note", GHF_H5_ATTR_STR, e, 0, 0}};
        return ghf_h5_out_put(w, obj, 1, at, 0, NULL, err, errlen);
    }
    ghf_gof_boot bt;
    memset(&bt, 0, sizeof bt);
    int st = 0;
    if (j->gof_bootstrap > 0) {
        const ghf_gof_refit m = {s->family, s->symmetric, s->fix_p, s->fix_p ? s->p : NAN, s->tol, j->max_iter};
        st = ghf_gof_bootstrap(MPI_COMM_SELF, law, &m, n, &in, &res, j->gof_bootstrap, j->gof_seed, 0, q->beat,
                               q->beat_arg, &bt, err, errlen);
    }
    if (!st) {
        ghf_gof_names nm;
        ghf_h5_array a[GHF_GOF_MAX_ARRAYS];
        char pre[160];
        snprintf(pre, sizeof pre, "%s/", base);
        const int k = ghf_gof_arrays(pre, d, j->gof_qq, n, &res, j->gof_bootstrap > 0 ? &bt : NULL, &nm, a);
        ghf_h5_attr at[12] = {
            {"description", GHF_H5_ATTR_STR, "goodness of fit of this fit on the rows named (job key gof)", 0, 0},
            {"data_file", GHF_H5_ATTR_STR, dfile, 0, 0},
            {"dataset", GHF_H5_ATTR_STR, dds, 0, 0},
            {"n_obs", GHF_H5_ATTR_I64, NULL, 0, n},
            {"n_qq", GHF_H5_ATTR_I64, NULL, 0, j->gof_qq},
            {"pit_max_error", GHF_H5_ATTR_F64, NULL, res.pit_err, 0},
            {"radial_delta2", GHF_H5_ATTR_F64, NULL, res.delta2, 0}};
        int na = 7;
        if (j->gof_bootstrap > 0) {
            at[na++] = (ghf_h5_attr){"bootstrap", GHF_H5_ATTR_I64, NULL, 0, bt.B};
            at[na++] = (ghf_h5_attr){"seed", GHF_H5_ATTR_I64, NULL, 0, bt.seed};
            at[na++] = (ghf_h5_attr){"bootstrap_failed", GHF_H5_ATTR_I64, NULL, 0, bt.n_failed};
            at[na++] = (ghf_h5_attr){"bootstrap_max_iter", GHF_H5_ATTR_I64, NULL, 0, bt.n_capped};
            if (bt.why[0]) at[na++] = (ghf_h5_attr){"bootstrap_note", GHF_H5_ATTR_STR, bt.why, 0, 0};
        }
        st = ghf_h5_out_put(w, base, na, at, k, a, err, errlen);
        if (!st) st = gof_group_descriptions(w, base, err, errlen);
        if (!st && bt.n_failed && !j->quiet)
            printf("ghfit: %s: gof: %d of %d bootstrap replicates failed and were left out (first: %s)\n", r->name,
                   bt.n_failed, bt.B, bt.why);
    }
    ghf_gof_boot_free(&bt);
    ghf_gof_result_free(&res);
    return st;
}

/* gof of fit i: on the gof FILE's rows, or on the fit's own */
static int fit_gof(post *q, const ghf_fit_spec *s, const ghf_fit_record *r, const ghf_fit_law *law, ghf_family fam,
                   ghf_h5_writer *w, char *err, size_t errlen)
{
    const ghf_job *j = q->j;
    if (j->gof_file) return fit_gof_rows(q, s, r, law, fam, &q->gv, j->gof_file, j->gof_dataset, w, err, errlen);
    const char *ds = j->dataset ? j->dataset : "/X";
    ghf_shard own;
    memset(&own, 0, sizeof own);
    int st = read_rows(j->data_file, ds, s->row_start, s->row_len, &own, err, errlen);
    if (!st) st = fit_gof_rows(q, s, r, law, fam, &own, j->data_file, ds, w, err, errlen);
    ghf_shard_free(&own);
    return st;
}

static void chain_name(const char *fit, char *out, size_t len);

/* optimize: constraints of the job for d assets (lo, hi [d]) */
static void opt_cons(const ghf_job *j, int d, double *lo, double *hi, ghf_opt_cons *cs)
{
    for (int i = 0; i < d; i++) lo[i] = j->opt_lo, hi[i] = j->opt_hi;
    *cs = (ghf_opt_cons){j->opt_budget, lo, hi};
}

static const char *const OPT_MEAS[3] = {"sd", "var", "es"}, *const OPT_TYPE[3] = {"min-risk", "target-return", "tangency"};

/* the Gaussian minimum-variance portfolio of rows (sample mean and
 * covariance) under the job's constraints into w; 0, or -1 (no law) */
static int gauss_minvar(const ghf_job *j, const ghf_shard *rows, int d, double *w)
{
    const int64_t n = rows->nrows;
    if (n < 2) return -1;
    double *mu = calloc((size_t)d, sizeof(double)), *S = calloc((size_t)d * d, sizeof(double));
    double *z = calloc((size_t)d, sizeof(double)), *lo = malloc((size_t)d * sizeof(double));
    double *hi = malloc((size_t)d * sizeof(double));
    int rc = -1;
    if (!mu || !S || !z || !lo || !hi) goto done;
    for (int64_t t = 0; t < n; t++)
        for (int c = 0; c < d; c++) mu[c] += rows->x[t * d + c];
    for (int c = 0; c < d; c++) mu[c] /= (double)n;
    for (int64_t t = 0; t < n; t++) {
        const double *x = rows->x + t * d;
        for (int a = 0; a < d; a++)
            for (int b = 0; b <= a; b++) S[a * d + b] += (x[a] - mu[a]) * (x[b] - mu[b]);
    }
    for (int a = 0; a < d; a++)
        for (int b = 0; b <= a; b++) S[b * d + a] = S[a * d + b] /= (double)(n - 1);
    ghf_opt_law L = {.d = d, .gauss = 1, .mu = mu, .gamma = z, .disp = {ghf_opt_quad_dense, S}, .losses = j->opt_losses};
    ghf_opt_cons cs;
    opt_cons(j, d, lo, hi, &cs);
    const ghf_opt_spec sp = {GHF_OPT_SD, GHF_OPT_MIN_RISK, j->opt_alpha, 0.0, 0.0};
    ghf_opt_result res;
    if (ghf_opt_law_init(&L) == 0 && ghf_opt_solve(&L, &cs, &sp, NULL, w, &res) == 0) rc = 0;
done:
    free(mu), free(S), free(z), free(lo), free(hi);
    return rc;
}

/* optimize: the job's portfolio under fit i, under /fits/<name>/optimize;
 * with windows also the Gaussian minimum-variance one of the window's rows */
static int fit_opt(post *q, const ghf_fit_spec *s, int i, const ghf_fit_record *r, const ghf_fit_law *law,
                   ghf_family fam, ghf_h5_writer *w, char *err, size_t errlen)
{
    const ghf_job *j = q->j;
    const int d = q->d;
    char obj[96], base[128], why[512] = "";
    snprintf(obj, sizeof obj, "/fits/%s", r->name);
    snprintf(base, sizeof base, "/fits/%s/optimize", r->name);
    double *lo = malloc((size_t)d * sizeof(double)), *hi = malloc((size_t)d * sizeof(double));
    if (!lo || !hi) {
        free(lo), free(hi);
        snprintf(err, errlen, "optimize: out of memory");
        return 1;
    }
    ghf_opt_cons cs;
    opt_cons(j, d, lo, hi, &cs);
    ghf_opt_law L = {.d = d, .gauss = fam == GHF_FAMILY_GAUSS, .p = law->p, .a = law->a, .b = law->b, .mu = law->mu,
                     .gamma = law->gamma, .disp = {ghf_opt_quad_dense, law->sigma}, .losses = j->opt_losses};
    const ghf_opt_factor fac = {r->D ? r->factors : 0, r->B, r->D}; /* the factor form: Sigma never used */
    if (r->D) L.disp = (ghf_opt_disp){ghf_opt_quad_factor, &fac};
    const char *lack = NULL;
    if (ghf_opt_law_init(&L) != 0) snprintf(why, sizeof why, "the fit's law is outside its family's domain");
    else if ((lack = ghf_opt_law_lacks(&L, j->opt_measure, 1)) != NULL) snprintf(why, sizeof why, "%s", lack);
    else if (j->opt_type == GHF_OPT_TARGET) {
        const double rmax = ghf_opt_max_return(&L, &cs, NULL);
        if (j->opt_target > rmax)
            snprintf(why, sizeof why, "target_return %g is above the highest attainable expected return %.10g", j->opt_target,
                     rmax);
    }
    int st = 0;
    double *wo = q->optW + (size_t)i * d;
    if (why[0]) { /* noted on the fit; the job goes on */
        const ghf_h5_attr at[1] = {{"optimize_note", GHF_H5_ATTR_STR, why, 0, 0}};
        st = ghf_h5_out_put(w, obj, 1, at, 0, NULL, err, errlen);
    } else {
        const ghf_opt_spec sp = {j->opt_measure, j->opt_type, j->opt_alpha, j->opt_target, j->opt_rf};
        ghf_opt_result res;
        if (ghf_opt_solve(&L, &cs, &sp, NULL, wo, &res) != 0) {
            snprintf(err, errlen, "optimize of fit %s: out of memory", r->name);
            st = 1;
        } else {
            q->opt_ok[i] = 1;
            const double v[8] = {res.ret, res.risk, res.sd, res.var, res.es, res.status, res.converged, res.kkt};
            static const char *const nm[8] = {"expected_return", "risk", "sd", "var", "es", "status", "converged", "kkt"};
            static const char *const ds[8] = {"the expected return", "the measure optimised", "sd of the loss",
                                              "VaR_alpha of the loss", "ES_alpha of the loss",
                                              "NLopt's result code (as in ghfit optimize)",
                                              "1: NLopt succeeded, feasible, first-order residual <= 1e-6",
                                              "the first-order (KKT) residual"};
            char names[9][192];
            ghf_h5_array arr[9];
            snprintf(names[0], sizeof names[0], "%s/weights", base);
            arr[0] = (ghf_h5_array){names[0], 1, {d, 0, 0}, wo, "the optimal portfolio's weights [d]"};
            for (int k = 0; k < 8; k++) {
                snprintf(names[k + 1], sizeof names[k + 1], "%s/%s", base, nm[k]);
                arr[k + 1] = (ghf_h5_array){names[k + 1], 0, {0, 0, 0}, &v[k], ds[k]};
            }
            const ghf_h5_attr at[6] = {
                {"description", GHF_H5_ATTR_STR, "the portfolio of least risk under this fit (job key optimize)", 0, 0},
                {"measure", GHF_H5_ATTR_STR, OPT_MEAS[j->opt_measure], 0, 0},
                {"type", GHF_H5_ATTR_STR, OPT_TYPE[j->opt_type], 0, 0},
                {"alpha", GHF_H5_ATTR_F64, NULL, j->opt_alpha, 0},
                {"budget", GHF_H5_ATTR_F64, NULL, j->opt_budget, 0},
                {"sense", GHF_H5_ATTR_STR, j->opt_losses ? "losses" : "returns", 0, 0}};
            st = ghf_h5_out_put(w, base, 6, at, 9, arr, err, errlen);
        }
    }
    if (!st && j->has_windows && s->window >= 0) { /* the benchmark of this window */
        ghf_shard own;
        memset(&own, 0, sizeof own);
        st = read_rows(j->data_file, j->dataset ? j->dataset : "/X", s->row_start, s->row_len, &own, err, errlen);
        if (!st) q->mv_ok[i] = gauss_minvar(j, &own, d, q->mvW + (size_t)i * d) == 0;
        ghf_shard_free(&own);
    }
    free(lo), free(hi);
    return st;
}

/* optimize: the returns of the three strategies of fit i over the rows nx */
static int opt_realise(post *q, int i, const ghf_shard *nx)
{
    const int d = q->d;
    const double sg = q->j->opt_losses ? -1.0 : 1.0;
    const int64_t n = nx->nrows;
    q->rr[i] = malloc((size_t)(n > 0 ? n : 1) * 3 * sizeof(double));
    if (!q->rr[i]) return 1;
    q->rn[i] = n;
    const double *W3[3] = {q->optW + (size_t)i * d, NULL, q->mvW + (size_t)i * d};
    for (int64_t t = 0; t < n; t++) {
        const double *x = nx->x + t * d;
        for (int k = 0; k < 3; k++) {
            double v = 0.0;
            for (int c = 0; c < d; c++) v += (k == 1 ? q->j->opt_budget / d : W3[k][c]) * x[c];
            q->rr[i][t * 3 + k] = sg * v;
        }
    }
    return 0;
}

static int cmp_desc(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x > y ? -1 : x < y ? 1 : 0;
}

/* /backtest/<chain>/optimize of the chain of fit `first`, and its lines */
static int chain_opt_backtest(post *q, const ghf_fit_spec *specs, const ghf_fit_record *const *recs, int n, int first,
                              ghf_h5_writer *w, char *err, size_t errlen)
{
    const int d = q->d;
    const double alpha = q->j->opt_alpha;
    int *ord = malloc((size_t)n * sizeof(int)), m = 0;
    if (!ord) goto oom;
    for (int i = 0; i < n; i++) /* the chain's windows in order */
        if (specs[i].chain == specs[first].chain) {
            int k = m++;
            while (k > 0 && specs[ord[k - 1]].window > specs[i].window) ord[k] = ord[k - 1], k--;
            ord[k] = i;
        }
    int64_t N = 0;
    for (int a = 0; a < m; a++) {
        const int i = ord[a];
        if (q->opt_ok[i] && q->mv_ok[i] && q->rr[i] && q->rn[i] > 0) N += q->rn[i];
    }
    double *R = malloc((size_t)(N > 0 ? N : 1) * 3 * sizeof(double)), *L = malloc((size_t)(N > 0 ? N : 1) * sizeof(double));
    if (!R || !L) {
        free(R), free(L), free(ord);
        goto oom;
    }
    int64_t t = 0;
    double turn[3] = {0, 0, 0};
    int nturn = 0, prev = -1, windows = 0;
    for (int a = 0; a < m; a++) { /* the windows held: those with rows after them */
        const int i = ord[a];
        if (!(q->opt_ok[i] && q->mv_ok[i] && q->rr[i] && q->rn[i] > 0)) {
            prev = -1;
            continue;
        }
        memcpy(R + t * 3, q->rr[i], (size_t)q->rn[i] * 3 * sizeof(double));
        t += q->rn[i];
        windows++;
        if (prev >= 0) { /* rebalancing from the previous window's weights (drift ignored) */
            for (int c = 0; c < d; c++) {
                turn[0] += fabs(q->optW[(size_t)i * d + c] - q->optW[(size_t)prev * d + c]);
                turn[2] += fabs(q->mvW[(size_t)i * d + c] - q->mvW[(size_t)prev * d + c]);
            }
            nturn++;
        }
        prev = i;
    }
    double mean[3], vol[3], es[3], tov[3];
    for (int k = 0; k < 3; k++) {
        double s = 0.0, s2 = 0.0;
        for (int64_t u = 0; u < N; u++) s += R[u * 3 + k];
        mean[k] = N > 0 ? s / (double)N : NAN;
        for (int64_t u = 0; u < N; u++) s2 += (R[u * 3 + k] - mean[k]) * (R[u * 3 + k] - mean[k]);
        vol[k] = N > 1 ? sqrt(s2 / (double)(N - 1)) : NAN;
        for (int64_t u = 0; u < N; u++) L[u] = -R[u * 3 + k];
        qsort(L, (size_t)N, sizeof(double), cmp_desc);
        int64_t kk = (int64_t)ceil((1.0 - alpha) * (double)N - 1e-9);
        if (kk < 1) kk = 1;
        double e = 0.0;
        for (int64_t u = 0; u < kk && u < N; u++) e += L[u];
        es[k] = N > 0 ? e / (double)(kk < N ? kk : N) : NAN;
        tov[k] = nturn > 0 ? turn[k] / nturn : NAN;
    }
    char cn[64], nm[6][192];
    chain_name(recs[first]->name, cn, sizeof cn);
    static const char *const field[5] = {"mean_return", "volatility", "realised_es", "turnover", "returns"};
    static const char *const desc[5] = {
        "mean realised return [3]: the optimal portfolio of each window, equal weights, the Gaussian minimum-variance "
        "portfolio of each window; each held over the rows the next refit adds",
        "sample standard deviation of the realised returns [3]",
        "realised ES at alpha [3]: the mean of the ceil((1 - alpha) n) largest realised losses",
        "mean turnover per refit [3]: sum |w_new - w_old| between consecutive windows held (drift ignored; 0 for "
        "equal weights)",
        "the realised returns [n][3], rows in window order"};
    const double *val[5] = {mean, vol, es, tov, R};
    ghf_h5_array arr[5];
    for (int f = 0; f < 5; f++) {
        snprintf(nm[f], sizeof nm[f], "/backtest/%s/optimize/%s", cn, field[f]);
        arr[f] = f < 4 ? (ghf_h5_array){nm[f], 1, {3, 0, 0}, val[f], desc[f]} : (ghf_h5_array){nm[f], 2, {N, 3, 0}, R, desc[f]};
    }
    snprintf(nm[5], sizeof nm[5], "/backtest/%s/optimize", cn);
    const ghf_h5_attr at[6] = {
        {"description", GHF_H5_ATTR_STR, "out-of-sample backtest of the job key optimize over this chain's windows", 0, 0},
        {"strategies", GHF_H5_ATTR_STR, "optimal, equal-weight, gaussian-min-variance", 0, 0},
        {"n", GHF_H5_ATTR_I64, NULL, 0, N},
        {"windows", GHF_H5_ATTR_I64, NULL, 0, windows},
        {"alpha", GHF_H5_ATTR_F64, NULL, alpha, 0},
        {"measure", GHF_H5_ATTR_STR, OPT_MEAS[q->j->opt_measure], 0, 0}};
    int st = ghf_h5_out_put(w, nm[5], 6, at, 5, arr, err, errlen);
    if (!st) {
        static const char *const sn[3] = {"optimal", "equal-weight", "gaussian-min-variance"};
        for (int k = 0; k < 3; k++)
            printf("%-36s %-22s %9lld %12.6g %12.6g %12.6g %9.4g\n", cn, sn[k], (long long)N, mean[k], vol[k], es[k],
                   tov[k]);
    }
    free(R), free(L), free(ord);
    return st;
oom:
    snprintf(err, errlen, "optimize backtest: out of memory");
    return 1;
}

/* everything for fit i */
static int fit_post(post *q, const ghf_fit_spec *specs, int n, int i, const ghf_fit_record *r, ghf_h5_writer *w,
                    char *err, size_t errlen)
{
    const ghf_job *j = q->j;
    ghf_fit_law law;
    ghf_family fam;
    if (rec_law(r, &law, &fam) != 0) return 0; /* a failed fit: nothing to add */
    ghf_shard nx;
    memset(&nx, 0, sizeof nx);
    int have_nx = 0, st = 0;
    const int k = next_of(specs, n, i);
    if (k >= 0) {
        /* the rows the next refit adds: from the end of this window to the
         * end of the next one (its last `step` rows; the whole next window
         * when step = length): never a row this fit saw */
        const int64_t r0 = specs[i].row_start + specs[i].row_len, r1 = specs[k].row_start + specs[k].row_len;
        st = read_rows(j->data_file, j->dataset ? j->dataset : "/X", r0, r1 - r0, &nx, err, errlen);
        have_nx = st == 0;
        if (have_nx) q->n_next[i] = nx.nrows;
    }
    if (!st && j->risk_file) {
        q->has_risk[i] = 1;
        st = fit_risk(q, i, r, &law, fam, have_nx ? &nx : NULL, w, err, errlen);
    }
    char obj[96];
    snprintf(obj, sizeof obj, "/fits/%s", r->name);
    double ll = NAN;
    int64_t m = 0;
    if (!st && j->eval == GHF_JOB_EVAL_NEXT && (st = loglik_of(&law, fam, have_nx ? &nx : NULL, &ll, &m, err, errlen)) == 0) {
        const ghf_h5_attr at[2] = {{"loglik_next", GHF_H5_ATTR_F64, NULL, ll, 0},
                                   {"n_next", GHF_H5_ATTR_I64, NULL, 0, q->n_next[i]}};
        st = ghf_h5_out_put(w, obj, 2, at, 0, NULL, err, errlen);
    }
    if (!st && j->eval == GHF_JOB_EVAL_FILE && (st = loglik_of(&law, fam, &q->ev, &ll, &m, err, errlen)) == 0) {
        const ghf_h5_attr at[2] = {{"loglik_eval", GHF_H5_ATTR_F64, NULL, ll, 0},
                                   {"n_eval", GHF_H5_ATTR_I64, NULL, 0, m}};
        st = ghf_h5_out_put(w, obj, 2, at, 0, NULL, err, errlen);
    }
    if (!st && j->gof) st = fit_gof(q, &specs[i], r, &law, fam, w, err, errlen);
    if (!st && j->opt) st = fit_opt(q, &specs[i], i, r, &law, fam, w, err, errlen);
    if (!st && j->opt && have_nx && q->opt_ok[i] && q->mv_ok[i] && opt_realise(q, i, &nx)) {
        snprintf(err, errlen, "optimize backtest: out of memory");
        st = 1;
    }
    if (have_nx) ghf_shard_free(&nx);
    return st;
}

/* the chain's name: a fit's name without its window suffix _wNNNNNN */
static void chain_name(const char *fit, char *out, size_t len)
{
    snprintf(out, len, "%s", fit);
    char *u = strrchr(out, '_');
    if (u && u[1] == 'w') *u = '\0';
}

/* /backtest/<chain>/ of the chain of fit `first`, and its table */
static int chain_backtest(post *q, const ghf_fit_spec *specs, const ghf_fit_record *const *recs, int n, int first,
                          ghf_h5_writer *w, char *err, size_t errlen)
{
    const int P = q->P, K = q->K, PK = P * K;
    double *a = malloc((size_t)PK * 6 * sizeof(double));
    if (!a) {
        snprintf(err, errlen, "backtest: out of memory");
        return 1;
    }
    double *al = a, *x = a + PK, *ex = a + 2 * PK, *nn = a + 3 * PK, *lr = a + 4 * PK, *pv = a + 5 * PK;
    int64_t ntot = 0;
    for (int e = 0; e < PK; e++) x[e] = 0.0;
    for (int i = 0; i < n; i++) {
        if (specs[i].chain != specs[first].chain || !q->has_risk[i] || q->n_next[i] == 0) continue;
        ntot += q->n_next[i];
        for (int e = 0; e < PK; e++) x[e] += q->exc[(size_t)i * PK + e];
    }
    for (int p = 0; p < P; p++)
        for (int k = 0; k < K; k++) {
            const int e = p * K + k;
            const double alpha = q->j->risk_alpha[k];
            al[e] = alpha, nn[e] = (double)ntot, ex[e] = (1.0 - alpha) * (double)ntot;
            ghf_kupiec(ntot, (int64_t)x[e], alpha, &lr[e], &pv[e]);
        }
    char cn[64], nm[6][160];
    chain_name(recs[first]->name, cn, sizeof cn);
    static const char *const field[6] = {"alpha", "exceedances", "expected", "n", "kupiec_lr", "kupiec_p"};
    static const char *const desc[6] = {
        "the level alpha of each column", "rows after each window whose loss -w'x exceeded its VaR",
        "(1 - alpha) n", "rows after the windows (to the end of the next; over the chain)",
        "Kupiec's unconditional coverage likelihood ratio (chi2(1) under a right VaR)", "its p-value"};
    ghf_h5_array arr[6];
    for (int f = 0; f < 6; f++) {
        snprintf(nm[f], sizeof nm[f], "/backtest/%s/%s", cn, field[f]);
        arr[f] = (ghf_h5_array){nm[f], 2, {P, K, 0}, a + (size_t)f * PK, desc[f]};
    }
    int st = ghf_h5_out_put(w, NULL, 0, NULL, 6, arr, err, errlen);
    if (!st) { /* printed like the fits' table, also when quiet */
        for (int p = 0; p < P && p < 8; p++)
            for (int k = 0; k < K; k++) {
                const int e = p * K + k;
                printf("%-36s %9d %7.4g %9lld %11.0f %9.2f %9.4g %9.4g\n", cn, p, al[e], (long long)ntot, x[e], ex[e],
                       lr[e], pv[e]);
            }
        if (P > 8) printf("%-36s (%d more portfolios: see /backtest/%s)\n", cn, P - 8, cn);
    }
    free(a);
    return st;
}

static int post_load(post *q, int n, char *err, size_t errlen)
{
    const ghf_job *j = q->j;
    q->n_next = calloc((size_t)n, sizeof(int64_t));
    q->has_risk = calloc((size_t)n, sizeof(int));
    if (!q->n_next || !q->has_risk) goto oom;
    if (j->risk_file) {
        ghf_shard ws;
        const ghf_read_opts ro = {.path = j->risk_file, .dataset = j->risk_dataset, .win_len = -1};
        if (ghf_h5_read_shard(MPI_COMM_SELF, &ro, &ws, err, errlen) != 0) return 1;
        if (ghf_shard_widen(&ws) != 0) {
            ghf_shard_free(&ws);
            goto oom;
        }
        q->W = ws.x, q->P = (int)ws.nrows, q->K = j->risk_n_alpha;
        q->exc = calloc((size_t)n * q->P * q->K, sizeof(int));
        if (!q->exc) goto oom;
    }
    if (j->opt) {
        const int d = q->d;
        q->optW = calloc((size_t)n * d, sizeof(double));
        q->mvW = calloc((size_t)n * d, sizeof(double));
        q->rr = calloc((size_t)n, sizeof(double *));
        q->opt_ok = calloc((size_t)n, sizeof(int));
        q->mv_ok = calloc((size_t)n, sizeof(int));
        q->rn = calloc((size_t)n, sizeof(int64_t));
        if (!q->optW || !q->mvW || !q->rr || !q->opt_ok || !q->mv_ok || !q->rn) goto oom;
    }
    if (j->eval == GHF_JOB_EVAL_FILE && read_rows(j->eval_file, j->eval_dataset, 0, -1, &q->ev, err, errlen) != 0)
        return 1;
    if (j->gof && j->gof_file) return read_rows(j->gof_file, j->gof_dataset, 0, -1, &q->gv, err, errlen);
    return 0;
oom:
    snprintf(err, errlen, "after the fits: out of memory");
    return 1;
}

int ghf_postfit_run(const ghf_job *j, const ghf_fit_spec *specs, const ghf_fit_record *const *recs, int n,
                    ghf_h5_writer *w, void (*beat)(void *), void *arg, char *err, size_t errlen)
{
    if (!ghf_postfit_wanted(j) || n < 1) return 0;
    post q;
    memset(&q, 0, sizeof q);
    q.j = j;
    q.d = recs[0]->d;
    q.beat = beat;
    q.beat_arg = arg;
    int st = post_load(&q, n, err, errlen);
    for (int i = 0; !st && i < n; i++) {
        st = fit_post(&q, specs, n, i, recs[i], w, err, errlen);
        if (beat) beat(arg);
    }
    if (!st && j->risk_file && j->has_windows) {
        printf("backtest (%s; losses -w'x after each window > its VaR):\n%-36s %9s %7s %9s %11s %9s %9s %9s\n",
                   j->risk_file, "chain", "portfolio", "alpha", "n", "exceedances", "expected", "kupiec_lr",
                   "p");
        for (int i = 0; !st && i < n; i++) {
            int seen = 0;
            for (int k = 0; k < i; k++) seen |= specs[k].chain == specs[i].chain;
            if (!seen) st = chain_backtest(&q, specs, recs, n, i, w, err, errlen);
        }
    }
    if (!st && j->opt && j->has_windows) {
        printf("optimize backtest (%s %s at alpha %g; each window's portfolio held over the rows the next refit adds):\n"
               "%-36s %-22s %9s %12s %12s %12s %9s\n", OPT_TYPE[j->opt_type], OPT_MEAS[j->opt_measure], j->opt_alpha,
               "chain", "strategy", "n", "mean", "volatility", "realised_es", "turnover");
        for (int i = 0; !st && i < n; i++) {
            int seen = 0;
            for (int k = 0; k < i; k++) seen |= specs[k].chain == specs[i].chain;
            if (!seen) st = chain_opt_backtest(&q, specs, recs, n, i, w, err, errlen);
        }
    }
    for (int i = 0; q.rr && i < n; i++) free(q.rr[i]);
    free(q.optW), free(q.mvW), free(q.rr), free(q.opt_ok), free(q.mv_ok), free(q.rn);
    free(q.W), free(q.exc), free(q.n_next), free(q.has_risk);
    ghf_shard_free(&q.ev);
    ghf_shard_free(&q.gv);
    return st;
}
