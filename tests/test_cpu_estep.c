/* test_cpu_estep.c - the CPU E-step's paths agree: plain loops vs BLAS for the
 * d x d work, Bessel plan vs direct evaluation, and both against a slow
 * per-row reference built from ghf_logpdf-style arithmetic; for d = 1, 3, 10,
 * 32 and random parameters.  Agreement to 1e-12 relative (statistics are sums
 * of positive terms or well-scaled sums).
 *
 * The vectorised per-row path (the folded plan, src/backend/cpu_block.h)
 * against the scalar reference path (ghf_estep_point, one log and two exps
 * per row) for every family, faces included (vg rows exactly at mu, the
 * symmetric t), d = 1 .. 40 (loops and BLAS), odd block tails: 1e-13 per
 * statistic; and its statistics have the same bits on 1 and 2 threads. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "backend.h"
#include "model.h"
#include "sample.h"
#include "testutil.h"

static double relerr(double a, double b, double scale)
{
    return fabs(a - b) / fmax(fabs(b), scale);
}

/* the statistics of one E-step on x[n*d] (plan forced on) by the given path */
static void estep_path(const double *x, int64_t n, int d, const ghf_estep_input *in, int ref, int small_d,
                       int nthreads, double *st)
{
    char err[256];
    omp_set_num_threads(nthreads);
    ghf_backend *be = ghf_backend_cpu_create(MPI_COMM_WORLD, x, n, d, err, sizeof err);
    CHECK(be != NULL, "backend: %s", err);
    ghf_backend_cpu_tune(be, small_d, 1);
    ghf_backend_cpu_tune_path(be, ref);
    CHECK(be->estep(be, in, st, err, sizeof err) == 0, "estep: %s", err);
    CHECK(be->last_used_plan == (in->c.A > 0.0), "the plan is used (but on the symmetric t's face)");
    be->destroy(be);
    omp_set_num_threads(1);
}

static void test_vec_vs_ref(void)
{
    /* family: p, a, b, gamma scale (0: symmetric) */
    const struct {
        const char *name;
        double p, a, b, g;
    } fam[] = {{"gh", -1.5, 2.0, 1.0, 0.2}, {"gh big p", 7.0, 0.3, 2.5, 0.3}, {"hyp", 0.0, 1.2, 0.8, 0.1},
               {"nig", -0.5, 1.5, 0.7, 0.2},  {"vg", 1.7, 1.1, 0.0, 0.2},       {"vg p<1", 0.6, 2.0, 0.0, 0.1},
               {"t", -2.5, 0.0, 1.4, 0.2},    {"t symmetric", -2.5, 0.0, 1.4, 0.0}};
    const int nf = (int)(sizeof fam / sizeof fam[0]);
    const int dims[] = {1, 3, 10, 13, 32, 40};
    double worst = 0.0;
    for (int di = 0; di < 6; di++) {
        const int d = dims[di];
        const int64_t n = 3 * 1024 + 256 + 37; /* four exact-sum blocks, the last with an odd tail */
        ghf_rng r;
        ghf_rng_seed(&r, 7, (uint64_t)d);
        double *x = malloc((size_t)n * d * sizeof(double));
        for (int64_t i = 0; i < n * d; i++) x[i] = ghf_rng_normal(&r) * (1.0 + (i % d) * 0.1);
        ghf_params t;
        ghf_params_alloc(&t, d);
        for (int fi = 0; fi < nf; fi++) {
            for (int j = 0; j < d; j++) {
                t.mu[j] = 0.1 * j;
                t.gamma[j] = fam[fi].g * (j % 2 ? -1.0 : 1.0);
                for (int k = 0; k < d; k++) t.sigma[j * d + k] = (j == k) ? 1.0 + 0.05 * j : 0.2;
            }
            t.p = fam[fi].name[0] == 'h' ? 0.5 * (d + 1) : fam[fi].p;
            t.a = fam[fi].a;
            t.b = fam[fi].b;
            /* rows exactly at mu: on the vg face (B = 0), in the first block and the tail */
            for (int j = 0; j < d; j++) x[5 * d + j] = x[(n - 2) * d + j] = t.mu[j];
            ghf_derived g;
            ghf_derived_alloc(&g, d);
            CHECK(ghf_derive(&t, &g) == 0, "derive %s d=%d", fam[fi].name, d);
            ghf_estep_input in = {d, t.mu, g.Linv, g.w, g.c, 0};
            const int len = ghf_stats_len(d);
            double *sr = calloc((size_t)len, sizeof(double)), *sv = calloc((size_t)len, sizeof(double));
            double *sv2 = calloc((size_t)len, sizeof(double));
            estep_path(x, n, d, &in, 1, 32, 1, sr);
            estep_path(x, n, d, &in, 0, 32, 1, sv);
            estep_path(x, n, d, &in, 0, 32, 2, sv2);
            CHECK(memcmp(sv, sv2, (size_t)len * sizeof(double)) == 0, "%s d=%d: 1 and 2 threads, same bits",
                  fam[fi].name, d);
            CHECK(sr[GHF_ST_NBAD] == sv[GHF_ST_NBAD] && sr[GHF_ST_N] == sv[GHF_ST_N],
                  "%s d=%d: row counts (bad %g vs %g)", fam[fi].name, d, sv[GHF_ST_NBAD], sr[GHF_ST_NBAD]);
            for (int k = 0; k < len; k++) {
                if (k == GHF_ST_STOP) continue;
                if (k >= ghf_stats_s6(d) && (k - ghf_stats_s6(d)) % d > (k - ghf_stats_s6(d)) / d) continue;
                /* sums of n per-row values: relative to max(|sum|, n); the
                 * weighted sums of x relative to |s1| + n, as above */
                const double scale = k < GHF_ST_S4 ? (double)n : fabs(sr[GHF_ST_S1]) + (double)n;
                const double e = relerr(sv[k], sr[k], scale);
                CHECK(e <= 1e-13 || (isnan(sv[k]) && isnan(sr[k])), "%s d=%d stat %d: vec %.17g ref %.17g (%.2e)",
                      fam[fi].name, d, k, sv[k], sr[k], e);
                if (e > worst) worst = e;
            }
            free(sr);
            free(sv);
            free(sv2);
            ghf_derived_free(&g);
        }
        ghf_params_free(&t);
        free(x);
    }
    printf("vectorised vs reference per-row path: worst %.2e (every family, d = 1..40)\n", worst);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    test_vec_vs_ref();
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
