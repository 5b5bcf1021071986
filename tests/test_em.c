/* test_em.c - EM on synthetic and real data, in one process:
 *   - monotonicity: the log-likelihood never falls by more than 1e-12
 *     relative, for GH and NIG with d = 1, 3, 10 and on two real return series;
 *   - statistical correctness: on N = 2e5 draws from known parameters the
 *     fitted log-likelihood is at least that of the true parameters, and the
 *     fitted mean and covariance are within 4 standard errors of the true ones;
 *   - d = 1 works; the status and parameters are finite on degenerate data
 *     (tied observations), with "boundary" when a boundary is hit. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "em.h"
#include "fit.h"
#include "sample.h"
#include "testutil.h"

static void draw(const ghf_params *t, int64_t n, uint64_t seed, double *x)
{
    const int d = t->d;
    double *L = calloc((size_t)d * d, sizeof(double)), *z = calloc((size_t)d, sizeof(double));
    ghf_cholesky(d, t->sigma, L);
    for (int64_t i = 0; i < n; i++) {
        ghf_rng r;
        ghf_rng_seed(&r, seed, (uint64_t)i);
        const double y = ghf_rng_gig(&r, t->p, t->a, t->b);
        for (int j = 0; j < d; j++) z[j] = ghf_rng_normal(&r);
        for (int j = 0; j < d; j++) {
            double s = 0;
            for (int k = 0; k <= j; k++) s += L[j * d + k] * z[k];
            x[i * d + j] = t->mu[j] + t->gamma[j] * y + sqrt(y) * s;
        }
    }
    free(L);
    free(z);
}

static void make_params(ghf_params *t, int d, double p, double a, double b)
{
    ghf_params_alloc(t, d);
    for (int j = 0; j < d; j++) {
        t->mu[j] = 0.1 * (j + 1);
        t->gamma[j] = (j % 2) ? -0.15 : 0.25;
        for (int k = 0; k < d; k++) t->sigma[j * d + k] = (j == k) ? 1.0 + 0.1 * j : 0.3;
    }
    t->p = p;
    t->a = a;
    t->b = b;
}

typedef struct run {
    ghf_em_result em;
    ghf_data data;
    ghf_shard shard;
    ghf_backend *be;
} run;

static int fit(run *R, double *x, int64_t n, int d, ghf_family fam, int max_iter, double tol)
{
    char err[512];
    memset(R, 0, sizeof *R);
    R->shard.n_global = n;
    R->shard.d = d;
    R->shard.nrows = n;
    R->shard.x = x;
    if (ghf_data_prepare(MPI_COMM_WORLD, &R->shard, "test", &R->data, err, sizeof err)) {
        fprintf(stderr, "prepare: %s\n", err);
        return -1;
    }
    R->be = ghf_backend_cpu_create(MPI_COMM_WORLD, R->data.x, n, d, err, sizeof err);
    ghf_em_opts o;
    ghf_em_opts_defaults(&o);
    o.family = fam;
    o.max_iter = max_iter;
    o.tol = tol;
    o.quiet = 1;
    ghf_data_em_opts(&R->data, &o);
    if (ghf_em_fit(MPI_COMM_WORLD, R->be, d, &o, &R->em, err, sizeof err)) {
        fprintf(stderr, "em: %s\n", err);
        return -1;
    }
    return 0;
}

static void run_free(run *R)
{
    ghf_em_result_free(&R->em);
    ghf_data_free(&R->data);
    if (R->be) R->be->destroy(R->be);
}

static void check_monotone(const run *R, const char *what)
{
    int bad = 0;
    for (int k = 1; k < R->em.n_trace; k++) {
        const double prev = R->em.trace[k - 1], cur = R->em.trace[k];
        if (cur < prev - 1e-12 * fabs(prev)) {
            bad++;
            fprintf(stderr, "  %s: loglik fell at iteration %d: %.17g -> %.17g\n", what, k, prev, cur);
        }
    }
    CHECK(bad == 0, "%s: EM is monotone (%d decreases over %d iterations)", what, bad, R->em.n_iter);
    CHECK(ghf_params_finite(&R->em.params) && isfinite(R->em.loglik), "%s: finite result", what);
    CHECK(R->em.outcome == GHF_EM_CONVERGED || R->em.outcome == GHF_EM_MAX_ITER ||
              R->em.outcome == GHF_EM_BOUNDARY, "%s: outcome %d (%s)", what, R->em.outcome, R->em.status);
}

static double *read_csv(const char *name, int d, int64_t *n)
{
    char path[1024];
    const char *src = getenv("GHF_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/tests/data/%s", src ? src : ".", name);
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t cap = 4096, k = 0;
    double *x = malloc(cap * sizeof(double));
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        char *s = line;
        for (int j = 0; j < d; j++) {
            if (k == cap) x = realloc(x, (cap *= 2) * sizeof(double));
            x[k++] = strtod(s, &s);
            if (*s == ',') s++;
        }
    }
    fclose(f);
    *n = (int64_t)(k / (size_t)d);
    return x;
}

/* log-likelihood of given parameters (in data coordinates) on centred data */
static double loglik_at(const run *R, const ghf_params *t_data)
{
    ghf_params t;
    ghf_params_alloc(&t, t_data->d);
    ghf_params_copy(&t, t_data);
    for (int j = 0; j < t.d; j++) t.mu[j] -= R->data.shift[j];
    ghf_derived g;
    ghf_derived_alloc(&g, t.d);
    ghf_derive(&t, &g);
    double *stats = calloc((size_t)ghf_stats_len(t.d), sizeof(double));
    ghf_estep_input in = {t.d, t.mu, g.Linv, g.w, g.c, 0};
    char err[256];
    R->be->estep(R->be, &in, stats, err, sizeof err);
    const double ll = stats[GHF_ST_LL];
    free(stats);
    ghf_derived_free(&g);
    ghf_params_free(&t);
    return ll;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    /* 1. monotonicity on synthetic data */
    const int dims[] = {1, 3, 10};
    for (int fi = 0; fi < 2; fi++) {
        const ghf_family fam = fi ? GHF_FAMILY_NIG : GHF_FAMILY_GH;
        for (int di = 0; di < 3; di++) {
            const int d = dims[di];
            const int64_t n = 4000;
            ghf_params t;
            make_params(&t, d, fi ? -0.5 : -1.5, 1.5, 0.8);
            double *x = malloc((size_t)n * d * sizeof(double));
            draw(&t, n, 100 + d, x);
            run R;
            char what[64];
            snprintf(what, sizeof what, "%s d=%d", ghf_family_name(fam), d);
            if (fit(&R, x, n, d, fam, 300, 1e-10) == 0) check_monotone(&R, what);
            else CHECK(0, "%s: fit failed", what);
            run_free(&R);
            free(x);
            ghf_params_free(&t);
        }
    }
    /* 2. real return series */
    const struct { const char *file; int d; } real[] = {{"sp500.csv", 1}, {"capm.csv", 4}};
    for (int i = 0; i < 2; i++) {
        int64_t n = 0;
        double *x = read_csv(real[i].file, real[i].d, &n);
        CHECK(x && n > 100, "read %s", real[i].file);
        if (!x) continue;
        for (int fi = 0; fi < 2; fi++) {
            run R;
            char what[64];
            snprintf(what, sizeof what, "%s %s", real[i].file, fi ? "nig" : "gh");
            if (fit(&R, x, n, real[i].d, fi ? GHF_FAMILY_NIG : GHF_FAMILY_GH, 500, 1e-10) == 0)
                check_monotone(&R, what);
            else CHECK(0, "%s: fit failed", what);
            printf("%s: n=%lld loglik %.10f iters %d %s\n", what, (long long)n, R.em.loglik, R.em.n_iter, R.em.status);
            run_free(&R);
        }
        free(x);
    }
    /* 3. statistical correctness, N = 2e5 */
    for (int fi = 0; fi < 2; fi++) {
        const ghf_family fam = fi ? GHF_FAMILY_NIG : GHF_FAMILY_GH;
        const int d = 3;
        const int64_t n = 200000;
        ghf_params t;
        make_params(&t, d, fi ? -0.5 : -1.5, 1.5, 0.8);
        double *x = malloc((size_t)n * d * sizeof(double));
        draw(&t, n, 2024, x);
        /* standard errors of the mean and covariance from the sample itself */
        double m[3] = {0}, c[9] = {0}, vc[9] = {0};
        for (int64_t i = 0; i < n; i++)
            for (int j = 0; j < d; j++) m[j] += x[i * d + j] / n;
        for (int64_t i = 0; i < n; i++)
            for (int j = 0; j < d; j++)
                for (int k = 0; k < d; k++) c[j * d + k] += (x[i * d + j] - m[j]) * (x[i * d + k] - m[k]) / n;
        for (int64_t i = 0; i < n; i++)
            for (int j = 0; j < d; j++)
                for (int k = 0; k < d; k++) {
                    const double e = (x[i * d + j] - m[j]) * (x[i * d + k] - m[k]) - c[j * d + k];
                    vc[j * d + k] += e * e / n;
                }
        double tmean[3], tcov[9];
        ghf_params_moments(&t, tmean, tcov, NULL, 0);
        run R;
        const char *what = ghf_family_name(fam);
        if (fit(&R, x, n, d, fam, 2000, 1e-10) != 0) {
            CHECK(0, "%s: large fit failed", what);
            continue;
        }
        const double ll_true = loglik_at(&R, &t);
        printf("N=2e5 %s: fitted loglik %.6f (iters %d, %s), true-parameter loglik %.6f\n", what, R.em.loglik,
               R.em.n_iter, R.em.status, ll_true);
        CHECK(R.em.loglik >= ll_true - 1e-9 * fabs(ll_true), "%s: fitted loglik %.10g >= true %.10g", what,
              R.em.loglik, ll_true);
        CHECK(R.em.converged, "%s: converged (%s)", what, R.em.status);
        double fmean[3], fcov[9];
        ghf_params_moments(&R.em.params, fmean, fcov, NULL, 0);
        for (int j = 0; j < d; j++) {
            fmean[j] += R.data.shift[j];
            const double se = sqrt(c[j * d + j] / n);
            CHECK(fabs(fmean[j] - tmean[j]) < 4 * se, "%s: mean[%d] fitted %.6g true %.6g (se %.3g)", what, j,
                  fmean[j], tmean[j], se);
            for (int k = 0; k < d; k++) {
                const double sek = sqrt(vc[j * d + k] / n);
                CHECK(fabs(fcov[j * d + k] - tcov[j * d + k]) < 4 * sek, "%s: cov[%d][%d] fitted %.6g true %.6g (se %.3g)",
                      what, j, k, fcov[j * d + k], tcov[j * d + k], sek);
            }
        }
        run_free(&R);
        free(x);
        ghf_params_free(&t);
    }
    /* 4. degenerate data: half the rows tied at one point */
    {
        const int d = 2;
        const int64_t n = 2000;
        ghf_params t;
        make_params(&t, d, -0.5, 1, 1);
        double *x = malloc((size_t)n * d * sizeof(double));
        draw(&t, n, 5, x);
        for (int64_t i = 0; i < n / 2; i++) {
            x[i * d] = 0.5;
            x[i * d + 1] = -0.25;
        }
        for (int fi = 0; fi < 2; fi++) {
            run R;
            const char *what = fi ? "tied nig" : "tied gh";
            if (fit(&R, x, n, d, fi ? GHF_FAMILY_NIG : GHF_FAMILY_GH, 400, 1e-10) == 0) {
                CHECK(ghf_params_finite(&R.em.params) && isfinite(R.em.loglik), "%s: finite parameters", what);
                CHECK(R.em.converged || strstr(R.em.status, "boundary") || R.em.outcome == GHF_EM_MAX_ITER,
                      "%s: status '%s'", what, R.em.status);
                printf("%s: %s after %d iterations, loglik %.6f, b = %.3g\n", what, R.em.status, R.em.n_iter, R.em.loglik,
                       R.em.params.b);
            } else {
                CHECK(0, "%s: fit failed", what);
            }
            run_free(&R);
        }
        free(x);
        ghf_params_free(&t);
    }
    const int rc = test_summary("test_em");
    MPI_Finalize();
    return rc;
}
