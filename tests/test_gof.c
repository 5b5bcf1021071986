/* test_gof.c - the goodness-of-fit core (src/law/gof.c): asymptotic p-values
 * at published critical values, the noncentral chi-square cdf against a
 * direct Poisson sum, the radial law of a symmetric t against its closed form
 * (a scaled F distribution), the statistics of an exact uniform grid, and the
 * interpolated PITs against exact ones.  (Monte Carlo checks of the radial
 * law with gamma != 0: tests/cli_gof.sh.) */
#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_sf_gamma.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gof.h"
#include "testutil.h"

static void check_pvalues(void)
{
    /* asymptotic upper-tail critical values (Stephens 1974; Anderson & Darling 1954) */
    const double lam[3] = {1.2238, 1.3581, 1.6276}, ad[3] = {1.933, 2.492, 3.857}, cvm[3] = {0.3473, 0.4614, 0.7435};
    const double lev[3] = {0.10, 0.05, 0.01};
    const size_t n = 100000000;
    const double sn = sqrt((double)n);
    for (int i = 0; i < 3; i++) {
        double p = ghf_gof_ks_pvalue(lam[i] / (sn + 0.12 + 0.11 / sn), n);
        CHECK(fabs(p - lev[i]) < 0.002 * lev[i] * 10, "KS p(%g) = %g, want %g", lam[i], p, lev[i]);
        p = ghf_gof_ad_pvalue(ad[i]);
        CHECK(fabs(p - lev[i]) < 0.03 * lev[i], "AD p(%g) = %g, want %g", ad[i], p, lev[i]);
        p = ghf_gof_cvm_pvalue(cvm[i]);
        CHECK(fabs(p - lev[i]) < 0.02 * lev[i], "CvM p(%g) = %g, want %g", cvm[i], p, lev[i]);
    }
    CHECK(ghf_gof_ks_pvalue(0.0, 10) == 1.0 && ghf_gof_ad_pvalue(0.0) == 1.0 && ghf_gof_cvm_pvalue(0.0) == 1.0,
          "p-values of a zero statistic");
    CHECK(ghf_gof_ks_pvalue(0.5, 1000) < 1e-100 && ghf_gof_ad_pvalue(50.0) < 1e-15 && ghf_gof_cvm_pvalue(20.0) == 0.0,
          "p-values of huge statistics");
    /* the KS series agree where they switch (lambda = 1.18) */
    const double D1 = 1.18 / (sn + 0.12 + 0.11 / sn);
    CHECK(fabs(ghf_gof_ks_pvalue(D1 * (1 - 1e-9), n) - ghf_gof_ks_pvalue(D1 * (1 + 1e-9), n)) < 1e-8,
          "KS series disagree at 1.18");
}

static double ncx2_direct(double x, double k, double lam)
{
    double s = 0.0;
    for (int j = 0; j < 2000; j++) s += gsl_ran_poisson_pdf((unsigned)j, lam / 2) * gsl_cdf_chisq_P(x, k + 2.0 * j);
    return s;
}

static void check_ncx2(void)
{
    double worst = 0.0;
    const double ks[3] = {1, 3, 10}, lams[5] = {0, 0.3, 4, 50, 400}, xs[6] = {0.01, 0.5, 2, 10, 60, 600};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 5; b++)
            for (int c = 0; c < 6; c++) {
                const double e = fabs(ghf_ncx2_cdf(xs[c], ks[a], lams[b]) - ncx2_direct(xs[c], ks[a], lams[b]));
                worst = fmax(worst, e);
            }
    CHECK(worst < 1e-12, "noncentral chi-square: worst |error| %.3g", worst);
    printf("ncx2 against the direct Poisson sum: worst %.2e\n", worst);
}

static void check_radial_t(void)
{
    /* symmetric t: Y ~ inverse Gamma(-p, rate b/2), q = b (d/nu) F(d, nu), nu = -2p */
    const double p = -2.5, b = 3.0, nu = -2 * p;
    ghf_uni_mix mx;
    CHECK(ghf_uni_mix_init(&mx, 0, p, 0.0, b) == GHF_UNI_OK, "t mix");
    double worst = 0.0;
    for (int d = 1; d <= 6; d += 5) {
        const ghf_radial_law R = {&mx, d, 0.0};
        for (double t = 0.01; t < 500; t *= 1.7) {
            double c;
            ghf_radial_cdf(&R, t, &c);
            worst = fmax(worst, fabs(c - gsl_cdf_fdist_P(t * nu / (b * d), d, nu)));
        }
        double q;
        CHECK(ghf_radial_quantile(&R, 0.9, &q) == GHF_UNI_OK &&
                  fabs(gsl_cdf_fdist_P(q * nu / (b * d), d, nu) - 0.9) < 1e-10,
              "radial quantile of the t at d = %d", d);
    }
    CHECK(worst < 1e-9, "radial cdf of the t against F: worst %.3g", worst);
    printf("radial t against the F distribution: worst %.2e\n", worst);
    /* gauss: chi2(d) */
    ghf_uni_mix mg;
    ghf_uni_mix_init(&mg, 1, 0, 0, 0);
    const ghf_radial_law G = {&mg, 4, 0.0};
    double c;
    ghf_radial_cdf(&G, 3.0, &c);
    CHECK(fabs(c - gsl_cdf_chisq_P(3.0, 4)) < 1e-15, "gauss radial");
}

static int cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cdf_fn(const void *ctx, double x, double *u) { return ghf_uni_cdf(ctx, x, u); }

static void check_stats_and_pit(void)
{
    const size_t n = 1000;
    double *u = malloc(n * sizeof *u);
    for (size_t i = 0; i < n; i++) u[i] = (i + 0.5) / n;
    ghf_gof_stat s;
    ghf_gof_stats(u, n, &s);
    CHECK(fabs(s.ks - 0.5 / n) < 1e-15 && fabs(s.cvm - 1.0 / (12.0 * n)) < 1e-15 && s.ks_p > 0.999 && s.ad_p > 0.999,
          "uniform grid: ks %g cvm %g", s.ks, s.cvm);
    free(u);
    /* interpolated PITs of a skewed heavy GH margin: 300000 sorted points */
    ghf_uni_mix mx;
    ghf_uni_mix_init(&mx, 0, -1.2, 0.4, 1.3);
    const ghf_uni_law L = {&mx, 0.1, 0.8, 1.1};
    const size_t N = 300000;
    double *x = malloc(N * sizeof *x), *v = malloc(N * sizeof *v), err = 0.0;
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    for (size_t i = 0; i < N; i++) x[i] = gsl_ran_tdist(r, 3.0) * 2.0 + 1.0;
    gsl_rng_free(r);
    qsort(x, N, sizeof *x, cmp);
    int st = ghf_gof_pit_sorted(x, N, cdf_fn, &L, 20000, 4096, v, &err);
    double worst = 0.0;
    for (size_t i = 0; i < N; i += 997) {
        double e;
        ghf_uni_cdf(&L, x[i], &e);
        worst = fmax(worst, fabs(e - v[i]));
    }
    CHECK(st == 0 && worst < 1e-6 && err < 1e-6 && worst <= 4 * err + 1e-12,
          "interpolated PITs: worst %.3g, reported %.3g", worst, err);
    printf("interpolated PITs (4096 knots, 3e5 rows): worst %.2e at every 997th row, reported %.2e\n", worst, err);
    free(x);
    free(v);
}

/* The exact sums per block of GHF_GOF_XBLOCK order statistics (an xsum's
 * int64 bins take 2^31 additions; A^2 adds 2 per row): a piece across a
 * block boundary gives the same blocks whichever calls it is split into,
 * and the joined sums equal a long double reference. */
static void check_stats_blocks(void)
{
    CHECK(ghf_gof_xblocks(1) == 1 && ghf_gof_xblocks(GHF_GOF_XBLOCK) == 1 && ghf_gof_xblocks(GHF_GOF_XBLOCK + 1) == 2 &&
              ghf_gof_xblocks(GHF_GOF_MAX_N) == GHF_GOF_XBLOCKS,
          "ghf_gof_xblocks");
    const size_t m = 300000, off = GHF_GOF_XBLOCK - 100000, n = GHF_GOF_XBLOCK + 500000;
    double *u = malloc(m * sizeof *u);
    for (size_t i = 0; i < m; i++) u[i] = ((double)(off + i) + 0.25 + 0.5 * sin((double)i)) / (double)n;
    static ghf_gof_part a, b;
    ghf_gof_part_init(&a);
    ghf_gof_part_init(&b);
    ghf_gof_stats_part(u, m, off, n, &a);
    ghf_gof_stats_part(u, 70000, off, n, &b);                                  /* block 0 only */
    ghf_gof_stats_part(u + 70000, 150000, off + 70000, n, &b);                 /* across the boundary */
    ghf_gof_stats_part(u + 220000, m - 220000, off + 220000, n, &b);           /* block 1 only */
    CHECK(a.ad[0].top != GHF_XSUM_EMPTY && a.ad[1].top != GHF_XSUM_EMPTY && a.ad[2].top == GHF_XSUM_EMPTY,
          "stats part: blocks 0 and 1 hold terms, block 2 none");
    CHECK(memcmp(&a, &b, sizeof a) == 0, "stats part: the same blocks whatever the split");
    /* the same double terms as gof.c, summed in long double */
    long double ad = 0.0L, cvm = 0.0L;
    const double nn = (double)n;
    for (size_t i = 0; i < m; i++) {
        const double k = (double)(off + i) + 1.0, c = fmin(fmax(u[i], 1e-300), 1.0 - 1e-16);
        ad += (long double)((2.0 * k - 1.0) * log(c)) + (long double)((2.0 * nn - 2.0 * k + 1.0) * log1p(-c));
        const double e = u[i] - (2.0 * k - 1.0) / (2.0 * nn);
        cvm += (long double)(e * e);
    }
    cvm += (long double)(1.0 / (12.0 * nn));
    ghf_gof_stat s;
    ghf_gof_stats_finish(&a, n, &s);
    const double want_ad = -nn - (double)ad / nn;
    CHECK(fabs(s.ad - want_ad) <= 1e-6 && fabs(s.cvm - (double)cvm) <= 1e-13 * (double)cvm,
          "joined blocks: A^2 %.17g want %.17g, W^2 %.17g want %.17g", s.ad, want_ad, s.cvm, (double)cvm);
    free(u);
}

int main(void)
{
    check_stats_blocks();
    check_pvalues();
    check_ncx2();
    check_radial_t();
    check_stats_and_pit();
    return test_summary("test_gof");
}
