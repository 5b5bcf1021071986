/* test_score_pass.c - `ghfit eval`'s pass (ghf_backend_cpu_score, ghf_score_loglik) against the E-step.
 *
 * For every family (gh, hyp, nig, vg, t, gauss), d = 1, 2, 3, 10, rows with
 * NaN / Inf put in, rows exactly at mu and an odd tail of the last block:
 *   * the rows with a non-finite value, and only they, are flagged 1;
 *   * every other row's log-density is a one-row E-step's (direct Bessel
 *     evaluation) to 1e-12 relative, and its q the Mahalanobis form;
 *     E[Y|x], E[1/Y|x] > 0;
 *   * the total (ghf_score_loglik) is the E-step's log-likelihood on the
 *     finite rows to 1e-13 relative, n_obs their number; the Gaussian's is
 *     its closed form;
 *   * the total has the same bits on 1 and 2 threads, and whether the pass
 *     may use the rows' memory for its results (spend_x) or not; spend_x = 0
 *     leaves the rows as they were. */
#include <math.h>
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "family.h"
#include "model.h"
#include "sample.h"
#include "score.h"
#include "testutil.h"

typedef struct fam_case {
    const char *name;
    ghf_family fam;
    double p, a, b, g;
} fam_case;

/* E-step statistics of rows x[n*d] under t (one backend, default tuning) */
static void estep_stats(const double *x, int64_t n, int d, const ghf_params *t, double *st)
{
    char err[256];
    ghf_derived g;
    ghf_derived_alloc(&g, d);
    CHECK(ghf_derive(t, &g) == 0, "derive");
    ghf_estep_input in = {d, t->mu, g.Linv, g.w, g.c, 0};
    ghf_backend *be = ghf_backend_cpu_create(MPI_COMM_SELF, x, n, d, err, sizeof err);
    CHECK(be && be->estep(be, &in, st, err, sizeof err) == 0, "estep: %s", err);
    if (be) be->destroy(be);
    ghf_derived_free(&g);
}

/* the law as a result file holds it */
static ghf_fit_law law_of(const fam_case *f, const ghf_params *t)
{
    ghf_fit_law law;
    memset(&law, 0, sizeof law);
    snprintf(law.name, sizeof law.name, "%s", f->name);
    law.d = t->d, law.mu = t->mu, law.gamma = t->gamma, law.sigma = t->sigma;
    law.p = t->p, law.a = t->a, law.b = t->b;
    return law;
}

/* the pass's per-block values into whole arrays */
typedef struct rows_out {
    double *ll, *ey, *eu, *q; /* q: NULL, or the block's q kept too (the one pass's are scratch) */
} rows_out;

static void keep_block(void *ctx, const ghf_score_block *b)
{
    const rows_out *o = ctx;
    memcpy(o->ll + b->r0, b->ll, (size_t)b->nb * sizeof(double));
    memcpy(o->ey + b->r0, b->ey, (size_t)b->nb * sizeof(double));
    memcpy(o->eu + b->r0, b->einvy, (size_t)b->nb * sizeof(double));
    if (o->q) memcpy(o->q + b->r0, b->q, (size_t)b->nb * sizeof(double));
}

/* ghf_backend_cpu_score1 (eval's one pass, 1 and 2 threads; the moments to
 * scratch, then into a copy of the rows) against the two passes' values:
 * the same bits, the same flags */
static void check_one_pass(const fam_case *f, const ghf_estep_input *in, const double *x, int64_t n,
                           const double *q, const double *ll, const double *ey, const double *eu,
                           const unsigned char *flag)
{
    const int d = in->d;
    char err[256];
    double *b = malloc((size_t)n * 4 * sizeof(double)), *xc = malloc((size_t)n * d * sizeof(double));
    unsigned char *fl = malloc((size_t)n);
    for (int th = 1; th <= 2; th++) {
        memset(fl, 0, (size_t)n);
        rows_out o = {b, b + n, b + 2 * n, b + 3 * n};
        omp_set_num_threads(th);
        memcpy(xc, x, (size_t)n * d * sizeof(double));
        ghf_backend *be = ghf_backend_cpu_create(MPI_COMM_SELF, xc, n, d, err, sizeof err);
        CHECK(be && ghf_backend_cpu_score1(be, in, 0, th == 2, fl, keep_block, &o, err, sizeof err) == 0,
              "%s d=%d: one pass: %s", f->name, d, err);
        if (be) be->destroy(be);
        omp_set_num_threads(1);
        int64_t diff = 0;
        for (int64_t i = 0; i < n; i++)
            diff += fl[i] != flag[i] || (!fl[i] && (memcmp(&o.q[i], &q[i], sizeof(double)) ||
                                                  memcmp(&o.ll[i], &ll[i], sizeof(double)) ||
                                                  memcmp(&o.ey[i], &ey[i], sizeof(double)) ||
                                                  memcmp(&o.eu[i], &eu[i], sizeof(double))));
        CHECK(diff == 0, "%s d=%d, %d threads: %lld rows of the one pass differ from the two passes", f->name, d, th,
              (long long)diff);
    }
    free(b);
    free(xc);
    free(fl);
}

/* the per-row values of the pass against one-row E-steps and the flags */
static void check_rows(const fam_case *f, const ghf_params *t, const double *x, int64_t n, const int *bad)
{
    const int d = t->d;
    char err[256];
    ghf_derived g;
    ghf_derived_alloc(&g, d);
    CHECK(ghf_derive(t, &g) == 0, "derive");
    ghf_estep_input in = {d, t->mu, g.Linv, g.w, g.c, 0};
    double *q = malloc((size_t)n * sizeof(double)), *zw = malloc((size_t)n * sizeof(double));
    double *ll = malloc((size_t)n * sizeof(double)), *ey = malloc((size_t)n * sizeof(double));
    double *eu = malloc((size_t)n * sizeof(double));
    unsigned char *flag = calloc((size_t)n, 1);
    ghf_backend *be = ghf_backend_cpu_create(MPI_COMM_SELF, x, n, d, err, sizeof err);
    rows_out o = {ll, ey, eu, NULL};
    CHECK(be && ghf_backend_cpu_score(be, &in, 0, q, zw, flag, keep_block, &o, err, sizeof err) == 0,
          "%s d=%d: score: %s", f->name, d, err);
    if (be) be->destroy(be);
    if (d >= 3 && d <= GHF_SCORE_ONE_PASS_MAX_D) check_one_pass(f, &in, x, n, q, ll, ey, eu, flag);
    int nflag = 0, wrong = 0;
    double worst = 0.0;
    const int len = ghf_stats_len(d);
    double *st = malloc((size_t)len * sizeof(double));
    for (int64_t i = 0; i < n; i++) {
        nflag += flag[i] != 0;
        if ((flag[i] == 1) != (bad[i] != 0)) wrong++;
        if (bad[i] || (i % 53 && i != 5 && i != n - 2)) continue;
        estep_stats(x + i * d, 1, d, t, st);
        /* vg at mu: the E-step leaves out a row whose moments are not all
         * finite (E[1/Y|x] = inf); eval keeps its log-density if finite */
        if (st[GHF_ST_NBAD] == 0.0) {
            const double e = fabs(ll[i] - st[GHF_ST_LL]) / fmax(1.0, fabs(st[GHF_ST_LL]));
            worst = e > worst ? e : worst;
        }
        double qq = 0.0; /* |L^-1 (x - mu)|^2 */
        for (int j = 0; j < d; j++) {
            double z = 0.0;
            for (int k = 0; k <= j; k++) z += g.Linv[j * d + k] * (x[i * d + k] - t->mu[k]);
            qq += z * z;
        }
        CHECK(fabs(q[i] - qq) <= 1e-12 * fmax(1.0, qq), "%s d=%d row %lld: q %.17g vs %.17g", f->name, d,
              (long long)i, q[i], qq);
        CHECK(!isfinite(ll[i]) || (ey[i] > 0.0 && eu[i] > 0.0), "%s d=%d row %lld: E[Y|x] %g, E[1/Y|x] %g", f->name, d, (long long)i,
              ey[i], eu[i]);
    }
    CHECK(wrong == 0 && nflag > 0, "%s d=%d: %d rows wrongly flagged (%d flagged)", f->name, d, wrong, nflag);
    CHECK(worst <= 1e-12, "%s d=%d: log-density vs a one-row E-step: worst %.2e", f->name, d, worst);
    free(st), free(q), free(zw), free(ll), free(ey), free(eu), free(flag);
    ghf_derived_free(&g);
}

/* the totals: threads, spend_x, against the E-step on the finite rows
 * (but those at mu: the E-step leaves out vg's there, see check_rows) */
static void check_total(const fam_case *f, const ghf_params *t, const double *x, int64_t n, const int *bad)
{
    const int d = t->d;
    char err[256];
    ghf_fit_law law = law_of(f, t);
    double tot[4];
    int64_t nobs[4];
    double *xc = malloc((size_t)n * d * sizeof(double));
    for (int c = 0; c < 4; c++) { /* threads 1, 2; spend_x 0, 1 */
        memcpy(xc, x, (size_t)n * d * sizeof(double));
        ghf_shard sh;
        memset(&sh, 0, sizeof sh);
        sh.d = d, sh.nrows = n, sh.n_global = n, sh.row0 = 0, sh.x = xc;
        omp_set_num_threads(1 + c % 2);
        CHECK(ghf_score_loglik(MPI_COMM_SELF, &law, f->fam, &sh, c / 2, &tot[c], &nobs[c], err, sizeof err) == 0,
              "%s d=%d: score_loglik: %s", f->name, d, err);
        omp_set_num_threads(1);
        if (c / 2 == 0)
            CHECK(memcmp(xc, x, (size_t)n * d * sizeof(double)) == 0, "%s d=%d: spend_x = 0 changed the rows",
                  f->name, d);
    }
    for (int c = 1; c < 4; c++)
        CHECK(memcmp(&tot[c], &tot[0], sizeof(double)) == 0 && nobs[c] == nobs[0],
              "%s d=%d: case %d: %.17g vs %.17g (threads, spend_x: the same bits)", f->name, d, c, tot[c], tot[0]);
    /* the finite rows not at mu, through eval and the E-step */
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        if (!bad[i] && i != 5 && i != n - 2) memcpy(xc + k++ * d, x + i * d, (size_t)d * sizeof(double));
    CHECK(nobs[0] >= k && nobs[0] <= k + 2, "%s d=%d: n_obs %lld, want %lld + the rows at mu", f->name, d,
          (long long)nobs[0], (long long)k);
    {
        ghf_shard sh;
        memset(&sh, 0, sizeof sh);
        sh.d = d, sh.nrows = k, sh.n_global = k, sh.row0 = 0, sh.x = xc;
        CHECK(ghf_score_loglik(MPI_COMM_SELF, &law, f->fam, &sh, 0, &tot[0], &nobs[0], err, sizeof err) == 0,
              "%s d=%d: score_loglik: %s", f->name, d, err);
        CHECK(nobs[0] == k, "%s d=%d: n_obs %lld, want %lld", f->name, d, (long long)nobs[0], (long long)k);
    }
    double want;
    if (f->fam == GHF_FAMILY_GAUSS) { /* -0.5 (d log 2 pi + log det Sigma + q), q by the derived L^-1 */
        ghf_derived g;
        ghf_derived_alloc(&g, d);
        ghf_params s = *t;
        double *gz = calloc((size_t)d, sizeof(double));
        s.gamma = gz, s.p = -0.5, s.a = s.b = 1.0;
        CHECK(ghf_derive(&s, &g) == 0, "derive");
        want = 0.0;
        for (int64_t i = 0; i < k; i++) {
            double qq = 0.0;
            for (int j = 0; j < d; j++) {
                double z = 0.0;
                for (int m = 0; m <= j; m++) z += g.Linv[j * d + m] * (xc[i * d + m] - t->mu[m]);
                qq += z * z;
            }
            want += -0.5 * (d * GHF_LOG_2PI + g.logdet) - 0.5 * qq;
        }
        free(gz);
        ghf_derived_free(&g);
    } else {
        double *st = malloc((size_t)ghf_stats_len(d) * sizeof(double));
        estep_stats(xc, k, d, t, st);
        want = st[GHF_ST_LL];
        free(st);
    }
    CHECK(fabs(tot[0] - want) <= 1e-13 * fabs(want), "%s d=%d: total %.17g vs the E-step's %.17g", f->name, d,
          tot[0], want);
    free(xc);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const fam_case fams[] = {{"gh", GHF_FAMILY_GH, -1.5, 2.0, 1.0, 0.2},   {"hyp", GHF_FAMILY_HYP, 0.0, 1.2, 0.8, 0.1},
                             {"nig", GHF_FAMILY_NIG, -0.5, 1.5, 0.7, 0.2}, {"vg", GHF_FAMILY_VG, 1.7, 1.1, 0.0, 0.2},
                             {"t", GHF_FAMILY_T, -2.5, 0.0, 1.4, 0.2},     {"gauss", GHF_FAMILY_GAUSS, 0, 0, 0, 0}};
    const int dims[] = {1, 2, 3, 10};
    for (int di = 0; di < 4; di++) {
        const int d = dims[di];
        const int64_t n = 4 * 1024 + 256 + 37; /* an exact-sum block past the plan's threshold, an odd tail */
        ghf_rng r;
        ghf_rng_seed(&r, 11, (uint64_t)d);
        double *x = malloc((size_t)n * d * sizeof(double));
        int *bad = calloc((size_t)n, sizeof(int));
        for (int64_t i = 0; i < n * d; i++) x[i] = ghf_rng_normal(&r) * (1.0 + (i % d) * 0.1);
        const int64_t nan_rows[] = {3, 700, 2049, n - 1};
        for (int k = 0; k < 4; k++) {
            x[nan_rows[k] * d + (k % d)] = k == 1 ? INFINITY : k == 2 ? -INFINITY : NAN;
            bad[nan_rows[k]] = 1;
        }
        for (size_t fi = 0; fi < sizeof fams / sizeof fams[0]; fi++) {
            const fam_case *f = &fams[fi];
            ghf_params t;
            ghf_params_alloc(&t, d);
            for (int j = 0; j < d; j++) {
                t.mu[j] = 0.1 * j;
                t.gamma[j] = f->g * (j % 2 ? -1.0 : 1.0);
                for (int k = 0; k < d; k++) t.sigma[j * d + k] = (j == k) ? 1.0 + 0.05 * j : 0.2;
            }
            t.p = f->fam == GHF_FAMILY_HYP ? 0.5 * (d + 1) : f->p;
            t.a = f->a, t.b = f->b;
            for (int j = 0; j < d; j++) x[5 * d + j] = x[(n - 2) * d + j] = t.mu[j]; /* rows at mu */
            if (f->fam != GHF_FAMILY_GAUSS) check_rows(f, &t, x, n, bad);
            check_total(f, &t, x, n, bad);
            ghf_params_free(&t);
        }
        free(x);
        free(bad);
    }
    const int rc = test_summary("test_score_pass");
    MPI_Finalize();
    return rc;
}
