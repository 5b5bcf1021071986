/* test_missing.c - the E-step of rows with missing coordinates (--missing em,
 * src/em/em_missing.c) against direct numerical integration of the full
 * density over the missing coordinates: the observed-data log-density
 * log int f(x_O, x_M) dx_M and the conditional mean E[x_M | x_O] (one and two
 * missing coordinates, GH, NIG and a Student t), and the weights; and the
 * block path (the CPU backend's kernels, many rows and patterns) against the
 * scalar one, row by row. */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "em.h"
#include "estep.h"
#include "model.h"
#include "testutil.h"

static void set_params(ghf_params *t, double p, double a, double b)
{
    const double mu[3] = {0.2, -0.1, 0.4}, ga[3] = {0.3, -0.2, 0.1};
    const double S[9] = {1.2, 0.4, -0.3, 0.4, 0.9, 0.2, -0.3, 0.2, 1.5};
    memcpy(t->mu, mu, sizeof mu);
    memcpy(t->gamma, ga, sizeof ga);
    memcpy(t->sigma, S, sizeof S);
    t->p = p;
    t->a = a;
    t->b = b;
}

/* The row's statistics from the missing-coordinate E-step (one row, weight w). */
static void estep_row(const ghf_params *t, const double *x, double w, double *stats)
{
    const int len = ghf_stats_len(3);
    memset(stats, 0, (size_t)len * sizeof(double));
    ghf_missing *m = ghf_missing_create(x, &w, 1, 3);
    char err[256];
    CHECK(m && ghf_missing_estep(MPI_COMM_SELF, m, t, 1, stats, err, sizeof err) == 0, "estep");
    ghf_missing_free(m);
}

/* int f dx_M and int x_M f dx_M over the missing coordinates of x (one or
 * two, at idx[]) by the trapezoid rule on [-L, L] around 0 (the integrand
 * decays exponentially: the rule converges geometrically) */
static void integrate(const ghf_params *t, const double *x, const int *idx, int nm, double h, double L,
                      double *I0, double *I1)
{
    double y[3];
    memcpy(y, x, sizeof y);
    const int n = (int)(L / h);
    double s0 = 0.0, s1[2] = {0.0, 0.0};
    for (int i = -n; i <= n; i++) {
        y[idx[0]] = i * h;
        if (nm == 1) {
            const double f = exp(ghf_logpdf(t, y));
            s0 += f;
            s1[0] += f * y[idx[0]];
            continue;
        }
        for (int k = -n; k <= n; k++) {
            y[idx[1]] = k * h;
            const double f = exp(ghf_logpdf(t, y));
            s0 += f;
            s1[0] += f * y[idx[0]];
            s1[1] += f * y[idx[1]];
        }
    }
    const double area = nm == 1 ? h : h * h;
    *I0 = s0 * area;
    I1[0] = s1[0] * area;
    I1[1] = s1[1] * area;
}

/* A few thousand weighted rows at d = 5 with 30% of the entries missing at
 * random (some patterns span several work units, one has none missing):
 * the block path's statistics against the scalar path's (the same formulas
 * row by row; the Bessel functions by the folded plan or the plan). */
static void check_paths(double p, double a, double b, const char *name)
{
    enum { D = 5, N = 3000 };
    ghf_params t;
    ghf_params_alloc(&t, D);
    for (int j = 0; j < D; j++) {
        t.mu[j] = 0.1 * j - 0.2;
        t.gamma[j] = 0.15 * (j % 3) - 0.1;
        for (int k = 0; k < D; k++) t.sigma[j * D + k] = (j == k ? 1.0 + 0.1 * j : 0.0) + 0.4 * pow(0.6, abs(j - k));
    }
    t.p = p, t.a = a, t.b = b;
    double *x = malloc((size_t)N * D * sizeof(double)), *w = malloc((size_t)N * sizeof(double));
    uint64_t s = 12345;
#define U01() ((s = s * 6364136223846793005ULL + 1442695040888963407ULL), (double)(s >> 11) * 0x1p-53)
    for (int i = 0; i < N; i++) {
        int nobs = 0;
        for (int j = 0; j < D; j++) {
            const double u1 = U01(), u2 = U01();
            x[i * D + j] = t.mu[j] + sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2) * (1.0 + U01());
            if (U01() < 0.3) x[i * D + j] = NAN;
            else nobs++;
        }
        if (!nobs) x[i * D] = 0.5;
        w[i] = i % 17 == 0 ? 0.0 : 2.0 * U01();
    }
#undef U01
    const int len = ghf_stats_len(D);
    double *st[2];
    char err[256];
    for (int sc = 0; sc < 2; sc++) {
        st[sc] = calloc((size_t)len, sizeof(double));
        ghf_missing *m = ghf_missing_create(x, w, N, D);
        CHECK(m != NULL, "create");
        if (!m) return;
        ghf_missing_tune(m, sc);
        CHECK(ghf_missing_estep(MPI_COMM_SELF, m, &t, 1, st[sc], err, sizeof err) == 0, "estep %s", err);
        ghf_missing_free(m);
    }
    int bad = 0;
    for (int i = 0; i < len; i++) {
        if (i == GHF_ST_STOP) continue;
        const double tol = 1e-11 * (fabs(st[1][i]) + st[1][GHF_ST_N]);
        if (!(fabs(st[0][i] - st[1][i]) <= tol)) {
            fprintf(stderr, "%s: statistic %d: block %.17g, scalar %.17g\n", name, i, st[0][i], st[1][i]);
            bad++;
        }
    }
    printf("%s: block and scalar paths: %d of %d statistics differ (sum w %.6g, log-lik %.12g)\n", name, bad,
           len, st[0][GHF_ST_N], st[0][GHF_ST_LL]);
    CHECK(bad == 0 && st[0][GHF_ST_NBAD] == 0.0, "%s: block and scalar paths agree", name);
    free(st[0]), free(st[1]), free(x), free(w);
    ghf_params_free(&t);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    ghf_params t;
    ghf_params_alloc(&t, 3);
    const double subs[3][3] = {{-1.3, 1.2, 0.8}, {-0.5, 2.0, 1.5}, {-2.5, 0.0, 3.0}}; /* gh, nig, Student t */
    const int len = ghf_stats_len(3);
    double *st = malloc((size_t)len * sizeof(double));
    for (int si = 0; si < 3; si++) {
        set_params(&t, subs[si][0], subs[si][1], subs[si][2]);
        /* one missing coordinate */
        {
            const double x[3] = {0.3, NAN, -0.5};
            const int idx[1] = {1};
            double I0, I1[2];
            integrate(&t, x, idx, 1, 0.01, 80.0, &I0, I1);
            estep_row(&t, x, 1.0, st);
            const double ll = log(I0), m1 = I1[0] / I0;
            const double s4 = st[GHF_ST_S4 + 1];
            printf("sub %d, 1 missing: log f(x_O) %.15g (integral %.15g), E[x_M|x_O] %.15g (integral %.15g)\n", si,
                   st[GHF_ST_LL], ll, s4, m1);
            CHECK(fabs(st[GHF_ST_LL] - ll) <= 1e-10 * fabs(ll), "sub %d: log f(x_O) %.17g vs %.17g", si,
                  st[GHF_ST_LL], ll);
            CHECK(fabs(s4 - m1) <= 1e-9 * (1.0 + fabs(m1)), "sub %d: E[x_M|x_O] %.17g vs %.17g", si, s4, m1);
            CHECK(st[GHF_ST_S4] == 0.3 && st[GHF_ST_S4 + 2] == -0.5, "observed coordinates in s4");
            CHECK(st[GHF_ST_N] == 1.0 && st[GHF_ST_NBAD] == 0.0, "count");
            /* a weight multiplies every statistic */
            double *st2 = malloc((size_t)len * sizeof(double));
            estep_row(&t, x, 2.5, st2);
            int same = 1;
            for (int i = 0; i < len; i++)
                if (i != GHF_ST_NBAD && i != GHF_ST_STOP && fabs(st2[i] - 2.5 * st[i]) > 1e-14 * fabs(2.5 * st[i]))
                    same = 0;
            CHECK(same, "sub %d: weight 2.5 scales the statistics", si);
            free(st2);
        }
        /* two missing coordinates */
        {
            const double x[3] = {NAN, 0.1, NAN};
            const int idx[2] = {0, 2};
            double I0, I1[2];
            integrate(&t, x, idx, 2, 0.05, 25.0, &I0, I1);
            estep_row(&t, x, 1.0, st);
            const double ll = log(I0);
            printf("sub %d, 2 missing: log f(x_O) %.15g (integral %.15g), E[x_M|x_O] %.12g %.12g (integral %.12g %.12g)\n",
                   si, st[GHF_ST_LL], ll, st[GHF_ST_S4], st[GHF_ST_S4 + 2], I1[0] / I0, I1[1] / I0);
            /* the Student t's polynomial tails put mass ~ L^-nu outside the square: a looser check */
            const double tol = si == 2 ? 1e-5 : 1e-9;
            CHECK(fabs(st[GHF_ST_LL] - ll) <= tol * fabs(ll), "sub %d: 2 missing: log f(x_O) %.17g vs %.17g", si,
                  st[GHF_ST_LL], ll);
            CHECK(fabs(st[GHF_ST_S4] - I1[0] / I0) <= 100 * tol, "sub %d: 2 missing: E[x_0|x_O]", si);
            CHECK(fabs(st[GHF_ST_S4 + 2] - I1[1] / I0) <= 100 * tol, "sub %d: 2 missing: E[x_2|x_O]", si);
        }
        /* a complete row through the same path: ghf_logpdf */
        {
            const double x[3] = {0.3, 0.2, -0.5};
            estep_row(&t, x, 1.0, st);
            const double ll = ghf_logpdf(&t, x);
            CHECK(fabs(st[GHF_ST_LL] - ll) <= 1e-12 * fabs(ll), "sub %d: complete row %.17g vs %.17g", si,
                  st[GHF_ST_LL], ll);
        }
    }
    free(st);
    ghf_params_free(&t);
    check_paths(-1.3, 1.2, 0.8, "gh");
    check_paths(-0.5, 2.0, 1.5, "nig");
    check_paths(-2.5, 0.0, 3.0, "student t");
    const int rc = test_summary("test_missing");
    MPI_Finalize();
    return rc;
}
