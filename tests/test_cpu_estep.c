/* test_cpu_estep.c - the CPU E-step's paths agree: plain loops vs BLAS for the
 * d x d work, Bessel plan vs direct evaluation, and both against a slow
 * per-row reference built from ghf_logpdf-style arithmetic; for d = 1, 3, 10,
 * 32 and random parameters.  Agreement to 1e-12 relative (statistics are sums
 * of positive terms or well-scaled sums). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend.h"
#include "model.h"
#include "sample.h"
#include "testutil.h"

static double relerr(double a, double b, double scale)
{
    return fabs(a - b) / fmax(fabs(b), scale);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    const int dims[] = {1, 3, 10, 32};
    for (int di = 0; di < 4; di++) {
        const int d = dims[di];
        const int64_t n = 3000;
        ghf_rng r;
        ghf_rng_seed(&r, 99, (uint64_t)d);
        double *x = malloc((size_t)n * d * sizeof(double));
        for (int64_t i = 0; i < n * d; i++) x[i] = ghf_rng_normal(&r) * (1.0 + (i % d) * 0.1);
        ghf_params t;
        ghf_params_alloc(&t, d);
        for (int j = 0; j < d; j++) {
            t.mu[j] = 0.1 * ghf_rng_normal(&r);
            t.gamma[j] = 0.2 * ghf_rng_normal(&r);
            for (int k = 0; k < d; k++) t.sigma[j * d + k] = (j == k) ? 1.0 + 0.05 * j : 0.2;
        }
        const double subs[3][3] = {{-1.5, 2.0, 1.0}, {-0.5, 0.7, 1.3}, {3.0, 1.0, 0.05}};
        for (int si = 0; si < 3; si++) {
            t.p = subs[si][0];
            t.a = subs[si][1];
            t.b = subs[si][2];
            ghf_derived g;
            ghf_derived_alloc(&g, d);
            CHECK(ghf_derive(&t, &g) == 0, "derive");
            ghf_estep_input in = {d, t.mu, g.Linv, g.w, g.c, 0};
            const int len = ghf_stats_len(d);
            double *st[4];
            char err[256];
            const int cfg[4][2] = {{32, 0}, {0, 0}, {32, 1}, {0, 1}};
            for (int c = 0; c < 4; c++) {
                st[c] = calloc((size_t)len, sizeof(double));
                ghf_backend *be = ghf_backend_cpu_create(MPI_COMM_WORLD, x, n, d, err, sizeof err);
                ghf_backend_cpu_tune(be, cfg[c][0], cfg[c][1]);
                CHECK(be->estep(be, &in, st[c], err, sizeof err) == 0, "estep");
                CHECK(be->last_used_plan == cfg[c][1], "plan mode honoured");
                be->destroy(be);
            }
            /* slow reference for the scalar sums */
            double ref_ll = 0.0;
            for (int64_t i = 0; i < n; i += 97) ref_ll += ghf_logpdf(&t, x + i * d);
            double sub_ll = 0.0;
            {
                /* same subsample through a 1-row-at-a-time backend */
                for (int64_t i = 0; i < n; i += 97) {
                    ghf_backend *be = ghf_backend_cpu_create(MPI_COMM_WORLD, x + i * d, 1, d, err, sizeof err);
                    double *s1 = calloc((size_t)len, sizeof(double));
                    be->estep(be, &in, s1, err, sizeof err);
                    sub_ll += s1[GHF_ST_LL];
                    free(s1);
                    be->destroy(be);
                }
            }
            CHECK(relerr(sub_ll, ref_ll, 1.0) < 1e-12, "d=%d sub %d: per-row loglik %.17g vs ghf_logpdf %.17g", d, si,
                  sub_ll, ref_ll);
            double worst = 0.0;
            for (int c = 1; c < 4; c++) {
                for (int k = 0; k < len; k++) {
                    if (k == GHF_ST_STOP) continue;
                    /* s6: only the lower triangle is defined */
                    if (k >= ghf_stats_s6(d)) {
                        const int e = k - ghf_stats_s6(d), row = e / d, col = e % d;
                        if (col > row) continue;
                    }
                    double scale = 1.0;
                    if (k >= GHF_ST_S4) scale = fabs(st[0][GHF_ST_S1]) + fabs(st[0][GHF_ST_N]);
                    const double e = relerr(st[c][k], st[0][k], scale);
                    if (e > worst) worst = e;
                }
            }
            CHECK(worst < 1e-12, "d=%d sub %d: loops/BLAS/plan/direct statistics agree (worst %.2e)", d, si, worst);
            for (int c = 0; c < 4; c++) free(st[c]);
            ghf_derived_free(&g);
        }
        ghf_params_free(&t);
        free(x);
    }
    const int rc = test_summary("test_cpu_estep");
    MPI_Finalize();
    return rc;
}
