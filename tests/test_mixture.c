/* test_mixture.c - the mixture EM (src/em/em_mixture.c, docs/math.md 10) in
 * one process, small enough for the sanitizer build:
 *   - a 3-component NIG mixture (d = 3, N = 3000: the block kernels and the
 *     Bessel plans) and a Gaussian one: converged, the trace monotone to
 *     1e-12 relative, the log-likelihood equal to the sum of the slow path
 *     ghf_mixture_logpdf over the rows (1e-10), the ICL term equal to the
 *     sum of log max_k tau_ik (1e-8), proportions positive, summing to 1 and
 *     in decreasing order, every start recorded, ghf_em_mixture_loglik
 *     equal to the fit's log-likelihood;
 *   - the E-step's BLAS path (GHFIT_TEST_MIXTURE_BLAS=1): the same fit (1e-10);
 *   - three distinct rows and K = 4: every start collapses, outcome FAILED
 *     with a status that says so (no NaN, no hang). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "em.h"
#include "fit.h"
#include "sample.h"
#include "testutil.h"

/* N rows of a 3-component mixture of one family (p, a, b shared; gauss: Y = 1) */
static double *draw_mixture(int64_t n, int d, int gauss, uint64_t seed)
{
    double *x = malloc((size_t)n * d * sizeof(double));
    const double pr[3] = {0.5, 0.3, 0.2};
    for (int64_t i = 0; i < n; i++) {
        ghf_rng r;
        ghf_rng_seed(&r, seed, (uint64_t)i);
        const double u = ghf_rng_uniform(&r);
        const int k = u < pr[0] ? 0 : (u < pr[0] + pr[1] ? 1 : 2);
        const double y = gauss ? 1.0 : ghf_rng_gig(&r, -0.5, 2.0, 2.0);
        for (int j = 0; j < d; j++) {
            const double mu = (k == 1 && j == 0) || (k == 2 && j == 1) ? 8.0 : 0.0;
            const double g = gauss ? 0.0 : (j == 0 ? 0.5 * (k % 2 ? -1.0 : 1.0) : 0.0);
            x[i * d + j] = mu + g * y + sqrt(y) * (1.0 + 0.2 * k) * ghf_rng_normal(&r);
        }
    }
    return x;
}

typedef struct mrun {
    ghf_shard shard;
    ghf_data data;
    ghf_em_result em;
    ghf_em_mix mx;
    int rc;
} mrun;

static void fit_mix(mrun *R, double *x, int64_t n, int d, ghf_family fam, int K)
{
    char err[512];
    memset(R, 0, sizeof *R);
    R->shard.n_global = n;
    R->shard.d = d;
    R->shard.nrows = n;
    R->shard.x = x;
    if (ghf_data_prepare(MPI_COMM_WORLD, &R->shard, "test", &R->data, err, sizeof err)) {
        fprintf(stderr, "prepare: %s\n", err);
        R->rc = -1;
        return;
    }
    ghf_em_opts o;
    ghf_em_opts_defaults(&o);
    o.family = fam;
    o.quiet = 1;
    o.n_starts = 2;
    ghf_data_em_opts(&R->data, &o);
    R->rc = ghf_em_fit_mixture(MPI_COMM_WORLD, R->data.x, NULL, n, d, K, &o, &R->em, &R->mx, err, sizeof err);
    if (R->rc) fprintf(stderr, "mixture: %s\n", err);
}

static void mrun_free(mrun *R)
{
    ghf_em_result_free(&R->em);
    ghf_em_mix_free(&R->mx);
    ghf_data_free(&R->data);
}

static void check_fit(mrun *R, int64_t n, int d, ghf_family fam, const char *what)
{
    CHECK(R->rc == 0 && R->em.outcome == GHF_EM_CONVERGED, "%s: converged (%s)", what, R->em.status);
    if (R->rc) return;
    int bad = 0;
    for (int k = 1; k < R->em.n_trace; k++)
        if (R->em.trace[k] < R->em.trace[k - 1] - 1e-12 * fabs(R->em.trace[k - 1])) bad++;
    CHECK(bad == 0 && R->em.n_trace == R->em.n_iter + 1, "%s: monotone trace (%d decreases, %d entries)", what, bad,
          R->em.n_trace);
    const ghf_mixture *m = &R->mx.m;
    double ps = 0.0;
    int order = 1;
    for (int k = 0; k < m->K; k++) {
        ps += m->prop[k];
        if (k > 0 && m->prop[k] > m->prop[k - 1]) order = 0;
        if (!(m->prop[k] > 0.0)) order = 0;
    }
    CHECK(fabs(ps - 1.0) < 1e-14 && order, "%s: proportions positive, sum 1, decreasing", what);
    double ll = 0.0, lmap = 0.0, tau[8];
    for (int64_t i = 0; i < n; i++) {
        ll += ghf_mixture_logpdf(m, R->data.x + i * d, tau);
        double t = 0.0;
        for (int k = 0; k < m->K; k++) t = fmax(t, tau[k]);
        lmap += log(t);
    }
    CHECK(fabs(ll - R->em.loglik) <= 1e-10 * fabs(ll), "%s: loglik %.15g is the slow path's %.15g", what,
          R->em.loglik, ll);
    CHECK(fabs(lmap - R->mx.map_ll) <= 1e-8 * fmax(1.0, fabs(lmap)), "%s: ICL term %.12g vs %.12g", what,
          R->mx.map_ll, lmap);
    CHECK(R->mx.n_starts == 2 && isfinite(R->mx.start_ll[0]) && isfinite(R->mx.start_ll[1]) &&
              R->em.loglik >= fmax(R->mx.start_ll[0], R->mx.start_ll[1]),
          "%s: every start recorded, the fit is the best", what);
    double llu = NAN;
    char err[256];
    CHECK(ghf_em_mixture_loglik(MPI_COMM_WORLD, R->data.x, n, m, fam, &llu, err, sizeof err) == 0 &&
              fabs(llu - R->em.loglik) <= 1e-12 * fabs(llu),
          "%s: ghf_em_mixture_loglik %.15g", what, llu);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const int64_t n = 3000;
    const int d = 3;
    {
        double *x = draw_mixture(n, d, 0, 7);
        mrun R;
        fit_mix(&R, x, n, d, GHF_FAMILY_NIG, 3);
        check_fit(&R, n, d, GHF_FAMILY_NIG, "nig K=3");
        const double ll = R.em.loglik;
        mrun_free(&R);
        free(x);
        /* the BLAS path (d > 128) on the same data */
        x = draw_mixture(n, d, 0, 7);
        setenv("GHFIT_TEST_MIXTURE_BLAS", "1", 1);
        fit_mix(&R, x, n, d, GHF_FAMILY_NIG, 3);
        unsetenv("GHFIT_TEST_MIXTURE_BLAS");
        CHECK(R.rc == 0 && fabs(R.em.loglik - ll) <= 1e-10 * fabs(ll), "the BLAS path: %.15g vs %.15g", R.em.loglik,
              ll);
        mrun_free(&R);
        free(x);
    }
    {
        double *x = draw_mixture(1500, d, 1, 9);
        mrun R;
        fit_mix(&R, x, 1500, d, GHF_FAMILY_GAUSS, 3);
        check_fit(&R, 1500, d, GHF_FAMILY_GAUSS, "gauss K=3");
        mrun_free(&R);
        free(x);
    }
    {
        /* three distinct rows, K = 4: every start collapses */
        const int64_t m = 30;
        double *x = malloc((size_t)m * 2 * sizeof(double));
        for (int64_t i = 0; i < m; i++) {
            x[2 * i] = (double)(i % 3 == 1);
            x[2 * i + 1] = (double)(i % 3 == 2);
        }
        mrun R;
        fit_mix(&R, x, m, 2, GHF_FAMILY_NIG, 4);
        CHECK(R.rc == 0 && R.em.outcome == GHF_EM_FAILED && strstr(R.em.status, "collapsed"),
              "tied rows, K = 4: failed, collapsed (%s)", R.em.status);
        mrun_free(&R);
        free(x);
    }
    const int st = test_summary("test_mixture");
    MPI_Finalize();
    return st;
}
