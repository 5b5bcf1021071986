/* test_gig.c - kernels/gig.h against 40-digit references computed from the
 * integral representation (tests/data/gig_ref.csv, made by
 * tests/data/gen_gig_ref.py), plus identities: the scale law, the b -> 0 and
 * a -> 0 limits, Cov(1/Y, Y) = 1 - E[1/Y] E[Y], the gradient of log Z, the
 * digamma/trigamma helpers, the domain, and a cross-check with bessel.h.
 *
 * Tolerances are in units of DBL_EPSILON (eps = 2.2e-16):
 *   E 1/Y, E Y                  relative                     TOL_MEAN  = 200 eps (4.4e-14)
 *   E log Y                     relative to max(|E log Y|, sd log Y)      TOL_MEAN
 *   log Z                       relative to max(|log Z|, 1) + |p E log Y| TOL_MEAN
 *   Cov entries h_ij            relative to sqrt(h_ii h_jj)               TOL_COV = 400 eps
 * (the brief's bound is 1e-13 relative for the moments; the table spans
 * p in [-50, 50], sqrt(ab) in [1e-10, 1e4], b/a in [1e-8, 1e8], both exact
 * limits a = 0 and b = 0, and the math.md 4.10 points).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bessel.h"
#include "gig.h"
#include "testutil.h"

#define EPS DBL_EPSILON
#define TOL_MEAN (200 * EPS)
#define TOL_COV (400 * EPS)

typedef struct {
    double p, a, b;
    double v[10]; /* log_norm e_log e_inv e_y h11 h12 h13 h22 h23 h33 */
} ref_row;

static int read_refs(const char *path, ref_row *rows, int maxrows)
{
    FILE *f = fopen(path, "r");
    char line[2048];
    int n = 0;
    if (!f) return -1;
    while (fgets(line, sizeof line, f) && n < maxrows) {
        char *s = line, *e;
        double x[13];
        int k;
        if (line[0] == '#' || line[0] == 'p') continue;
        for (k = 0; k < 13; k++) {
            x[k] = strtod(s, &e);
            if (e == s) break;
            s = e;
            if (*s == ',') s++;
        }
        if (k != 13) continue;
        rows[n].p = x[0];
        rows[n].a = x[1];
        rows[n].b = x[2];
        memcpy(rows[n].v, x + 3, sizeof rows[n].v);
        n++;
    }
    fclose(f);
    return n;
}

static const char *names[10] = {"log_norm", "e_log", "e_inv", "e_y", "h11", "h12", "h13", "h22", "h23", "h33"};

static void test_reference_table(void)
{
    static ref_row rows[1000];
    char path[1024];
    const char *src = getenv("GHF_SOURCE_DIR");
    double worst[10] = {0};
    int worst_row[10] = {0};
    int n, nlimit = 0, ntiny = 0;
    snprintf(path, sizeof path, "%s/tests/data/gig_ref.csv", src ? src : ".");
    n = read_refs(path, rows, 1000);
    CHECK(n >= 300, "read %d reference rows from %s", n, path);
    for (int i = 0; i < n; i++) {
        const ref_row *r = &rows[i];
        const ghf_gig_stats s = ghf_gig_stats_eval(r->p, r->a, r->b);
        const ghf_gig_moments m = ghf_gig_moments_eval(r->p, r->a, r->b);
        const double got[10] = {s.log_norm, s.e_log, s.e_inv, s.e_y, s.h11, s.h12, s.h13, s.h22, s.h23, s.h33};
        const double sd = sqrt(r->v[4]);
        const double hd[3] = {r->v[4], r->v[7], r->v[9]};
        const int ij[6][2] = {{0, 0}, {0, 1}, {0, 2}, {1, 1}, {1, 2}, {2, 2}};
        if (r->a == 0.0 || r->b == 0.0) nlimit++;
        else if (sqrt(r->a) * sqrt(r->b) < 1e-3) ntiny++;
        /* the means-only entry point (a narrower node range) agrees with the full one */
        CHECK(fabs(m.e_log - s.e_log) <= TOL_MEAN * fmax(fabs(s.e_log), sd) || (isinf(m.e_log) && isinf(s.e_log)),
              "moments_eval vs stats_eval e_log at (%g,%g,%g)", r->p, r->a, r->b);
        CHECK(fabs(m.e_inv - s.e_inv) <= TOL_MEAN * s.e_inv || (isinf(m.e_inv) && isinf(s.e_inv)),
              "moments_eval vs stats_eval e_inv at (%g,%g,%g)", r->p, r->a, r->b);
        CHECK(fabs(m.e_y - s.e_y) <= TOL_MEAN * s.e_y || (isinf(m.e_y) && isinf(s.e_y)),
              "moments_eval vs stats_eval e_y at (%g,%g,%g)", r->p, r->a, r->b);
        for (int k = 0; k < 10; k++) {
            const double ref = r->v[k];
            double scale, err;
            if (!isfinite(ref)) {
                /* infinite moments in the limits must come out infinite (or
                 * undefined where the reference says nan) */
                CHECK(isnan(ref) ? !isfinite(got[k]) : (isinf(got[k]) && got[k] * ref > 0),
                      "%s at (%g,%g,%g): got %g, reference %g", names[k], r->p, r->a, r->b, got[k], ref);
                continue;
            }
            if (k == 0) scale = fmax(fabs(ref), 1.0) + fabs(r->p * r->v[1]);
            else if (k == 1) scale = fmax(fabs(ref), sd);
            else if (k <= 3) scale = fabs(ref);
            else {
                const int i0 = ij[k - 4][0], j0 = ij[k - 4][1];
                scale = sqrt(hd[i0] * hd[j0]);
                if (!isfinite(scale)) scale = fabs(ref);
            }
            err = fabs(got[k] - ref) / scale;
            CHECK(err <= (k <= 3 ? TOL_MEAN : TOL_COV), "%s at (%.17g,%.17g,%.17g): got %.17g, reference %.17g, error %.2e",
                  names[k], r->p, r->a, r->b, got[k], ref, err);
            if (!(err <= worst[k])) {
                worst[k] = err;
                worst_row[k] = i;
            }
        }
    }
    printf("reference table: %d rows (%d exact limits, %d with sqrt(ab) < 1e-3); worst scaled errors:\n", n, nlimit, ntiny);
    for (int k = 0; k < 10; k++)
        printf("  %-8s %.2e (%.1f eps) at p=%g a=%g b=%g\n", names[k], worst[k], worst[k] / EPS,
               rows[worst_row[k]].p, rows[worst_row[k]].a, rows[worst_row[k]].b);
}

/* If Y ~ GIG(p,a,b) then cY ~ GIG(p, a/c, b c) (math.md 1.1). */
static void test_scale_identity(void)
{
    const double pts[][3] = {{1.5, 2.0, 0.5}, {-3.0, 0.3, 3.0}, {40.0, 1e3, 2e3}, {0.2, 1e-6, 1e-8}, {-0.7, 1e4, 1e-9}};
    const double cs[] = {1e-3, 7.5, 1e5};
    for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) {
        const double p = pts[i][0], a = pts[i][1], b = pts[i][2];
        const ghf_gig_stats s = ghf_gig_stats_eval(p, a, b);
        for (size_t j = 0; j < sizeof cs / sizeof cs[0]; j++) {
            const double c = cs[j];
            const ghf_gig_stats t = ghf_gig_stats_eval(p, a / c, b * c);
            const double sd = sqrt(s.h11);
            /* Z scales by c^p */
            CHECK(fabs(t.log_norm - (s.log_norm + p * log(c))) <= TOL_MEAN * (fabs(t.log_norm) + fabs(p * log(c)) + 1),
                  "scale: log Z at (%g,%g,%g) c=%g: %.17g vs %.17g", p, a, b, c, t.log_norm, s.log_norm + p * log(c));
            CHECK(fabs(t.e_log - (s.e_log + log(c))) <= TOL_MEAN * (fmax(fabs(t.e_log), sd) + fabs(log(c))),
                  "scale: E log Y at (%g,%g,%g) c=%g", p, a, b, c);
            CHECK(fabs(t.e_inv - s.e_inv / c) <= TOL_MEAN * t.e_inv, "scale: E 1/Y at (%g,%g,%g) c=%g", p, a, b, c);
            CHECK(fabs(t.e_y - s.e_y * c) <= TOL_MEAN * t.e_y, "scale: E Y at (%g,%g,%g) c=%g", p, a, b, c);
            CHECK(fabs(t.h11 - s.h11) <= TOL_COV * s.h11, "scale: Var log Y at (%g,%g,%g) c=%g", p, a, b, c);
            CHECK(fabs(t.h33 - s.h33 * c * c) <= TOL_COV * t.h33, "scale: Var Y at (%g,%g,%g) c=%g", p, a, b, c);
        }
    }
}

/* b -> 0 (p > 0) and a -> 0 (p < 0): the interior rule must approach the
 * closed forms smoothly, with no jump at the switch to a = 0 / b = 0.  For
 * p > 2 (resp. p < -2) the corrections are O(ab), so at sqrt(ab) <= 1e-9 the
 * interior values must equal the limit to rounding. */
static void test_limits(void)
{
    const double ps[] = {2.5, 7.0, 30.0};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        const double p = ps[i];
        const ghf_gig_stats g0 = ghf_gig_stats_eval(p, 3.0, 0.0);   /* Gamma(p, 1.5) */
        const ghf_gig_stats i0 = ghf_gig_stats_eval(-p, 0.0, 3.0);  /* 1/Gamma(p, 1.5) */
        CHECK(fabs(g0.e_y - p / 1.5) <= 4 * EPS * g0.e_y, "Gamma mean");
        CHECK(fabs(g0.e_inv - 1.5 / (p - 1)) <= 4 * EPS * g0.e_inv, "Gamma E 1/Y");
        CHECK(fabs(g0.log_norm - (lgamma(p) - p * log(1.5))) <= 8 * EPS * fabs(g0.log_norm) + 4 * EPS,
              "Gamma log Z");
        CHECK(fabs(i0.e_inv - p / 1.5) <= 4 * EPS * i0.e_inv, "InvGamma E 1/Y");
        CHECK(fabs(i0.e_log + g0.e_log) <= 4 * EPS * fabs(g0.e_log), "InvGamma E log Y = -Gamma E log X");
        for (double b = 1e-16; b <= 1e-15; b *= 10) { /* sqrt(ab) ~ 2e-8 .. 5e-8 */
            const ghf_gig_stats g = ghf_gig_stats_eval(p, 3.0, b);
            const ghf_gig_stats iv = ghf_gig_stats_eval(-p, b, 3.0);
            const double rel = 3.0 * b / (2.0 * (p - 1) * (p - 2)) * 4; /* bound on the O(ab) correction */
            CHECK(g.n_nodes > 0 && iv.n_nodes > 0, "interior rule used for b > 0");
            CHECK(fabs(g.e_y - g0.e_y) <= (TOL_MEAN + rel) * g0.e_y, "b->0: E Y %.17g vs %.17g", g.e_y, g0.e_y);
            CHECK(fabs(g.e_inv - g0.e_inv) <= (TOL_MEAN + rel) * g0.e_inv, "b->0: E 1/Y");
            CHECK(fabs(g.e_log - g0.e_log) <= (TOL_MEAN + rel) * fmax(fabs(g0.e_log), sqrt(g0.h11)), "b->0: E log Y");
            CHECK(fabs(g.log_norm - g0.log_norm) <= (TOL_MEAN + rel) * (fabs(g0.log_norm) + 1), "b->0: log Z");
            CHECK(fabs(iv.e_y - i0.e_y) <= (TOL_MEAN + rel) * i0.e_y, "a->0: E Y");
            CHECK(fabs(iv.e_log - i0.e_log) <= (TOL_MEAN + rel) * fmax(fabs(i0.e_log), sqrt(i0.h11)), "a->0: E log Y");
        }
    }
    /* 0 < p <= 1: E 1/Y is infinite at b = 0 and grows like b^(p-1) as b -> 0 */
    {
        const ghf_gig_moments m0 = ghf_gig_moments_eval(0.5, 2.0, 0.0);
        const ghf_gig_moments m1 = ghf_gig_moments_eval(0.5, 2.0, 1e-20);
        const ghf_gig_moments m2 = ghf_gig_moments_eval(0.5, 2.0, 1e-22);
        CHECK(isinf(m0.e_inv) && isfinite(m1.e_inv), "E 1/Y infinite at b = 0, finite for b > 0 (p = 1/2)");
        /* GIG(1/2, a, b): E 1/Y = sqrt(a/b) exactly (K_{-1/2} = K_{1/2}) */
        CHECK(fabs(m1.e_inv - sqrt(2.0 / 1e-20)) <= TOL_MEAN * m1.e_inv, "GIG(1/2) E 1/Y = sqrt(a/b)");
        CHECK(fabs(m2.e_inv / m1.e_inv - 10.0) <= 1e-12, "E 1/Y ~ b^(-1/2)");
    }
}

/* Cov(1/Y, Y) = 1 - E[1/Y] E[Y]; E[Y] for IG; grad log Z = E t (central FD). */
static void test_identities(void)
{
    const double pts[][3] = {{1, 1, 1}, {0.7, 1.4, 0.9}, {-2, 0.5, 4}, {10, 1, 1}, {-10, 1, 1}, {0.5, 0.01, 0.01},
                             {25, 200, 3}, {-0.5, 2, 8}, {3, 1e-2, 1e-3}};
    for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) {
        const double p = pts[i][0], a = pts[i][1], b = pts[i][2];
        const ghf_gig_stats s = ghf_gig_stats_eval(p, a, b);
        const double d = 1.0 - s.e_inv * s.e_y;
        CHECK(fabs(s.h23 - d) <= TOL_COV * sqrt(s.h22 * s.h33) + 64 * EPS * s.e_inv * s.e_y,
              "Cov(1/Y,Y) = 1 - E[1/Y]E[Y] at (%g,%g,%g): %.17g vs %.17g", p, a, b, s.h23, d);
        CHECK(s.h11 > 0 && s.h22 > 0 && s.h33 > 0, "variances positive at (%g,%g,%g)", p, a, b);
        CHECK(s.h12 * s.h12 < s.h11 * s.h22 && s.h13 * s.h13 < s.h11 * s.h33 && s.h23 * s.h23 < s.h22 * s.h33,
              "Cov t(Y) positive definite (2x2 minors) at (%g,%g,%g)", p, a, b);
        /* d log Z / d p = E log Y; d log Z / d b = -E[1/Y]/2; d log Z / d a = -E[Y]/2 */
        {
            const double hp = 1e-5, ha = 1e-5 * a, hb = 1e-5 * b;
            const double dp = (ghf_gig_log_norm(p + hp, a, b) - ghf_gig_log_norm(p - hp, a, b)) / (2 * hp);
            const double da = (ghf_gig_log_norm(p, a + ha, b) - ghf_gig_log_norm(p, a - ha, b)) / (2 * ha);
            const double db = (ghf_gig_log_norm(p, a, b + hb) - ghf_gig_log_norm(p, a, b - hb)) / (2 * hb);
            const double nz = 4e-15 * (fabs(s.log_norm) + 1); /* rounding of log Z, divided by the step below */
            CHECK(fabs(dp - s.e_log) <= 1e-7 * fmax(fabs(s.e_log), 1) + nz / hp, "dlogZ/dp at (%g,%g,%g)", p, a, b);
            CHECK(fabs(-2 * da - s.e_y) <= 1e-7 * s.e_y + 2 * nz / ha, "dlogZ/da at (%g,%g,%g)", p, a, b);
            CHECK(fabs(-2 * db - s.e_inv) <= 1e-7 * s.e_inv + 2 * nz / hb, "dlogZ/db at (%g,%g,%g)", p, a, b);
        }
    }
    /* inverse Gaussian: GIG(-1/2, lambda/mu^2, lambda) has mean mu */
    {
        const double mu = 1.7, lam = 0.6;
        const ghf_gig_moments m = ghf_gig_moments_eval(-0.5, lam / (mu * mu), lam);
        CHECK(fabs(m.e_y - mu) <= 8 * EPS * mu, "IG mean");
        CHECK(fabs(m.e_inv - (1 / mu + 1 / lam)) <= 8 * EPS * m.e_inv, "IG E 1/Y");
    }
    /* symmetry: GIG(-p, b, a) is the law of 1/Y */
    {
        const ghf_gig_stats s = ghf_gig_stats_eval(2.3, 0.4, 5.0), t = ghf_gig_stats_eval(-2.3, 5.0, 0.4);
        CHECK(fabs(s.e_log + t.e_log) <= 4 * EPS * fmax(fabs(s.e_log), sqrt(s.h11)), "1/Y: E log");
        CHECK(fabs(s.e_y - t.e_inv) <= 4 * EPS * s.e_y && fabs(s.e_inv - t.e_y) <= 4 * EPS * s.e_inv, "1/Y: means");
        CHECK(fabs(s.log_norm - t.log_norm) <= 4 * EPS * (fabs(s.log_norm) + 1), "1/Y: log Z");
    }
}

static void test_special_functions(void)
{
    const double pi = 3.14159265358979323846, g = GHF_EULER;
    CHECK(fabs(ghf_digamma(1.0) + g) <= 4 * EPS, "digamma(1)");
    CHECK(fabs(ghf_digamma(0.5) + g + 2 * log(2.0)) <= 8 * EPS, "digamma(1/2)");
    CHECK(fabs(ghf_digamma(1e-8) - (-1e8 - g + 1.6449340668482264e-8)) <= 8 * EPS * 1e8, "digamma(1e-8)");
    CHECK(fabs(ghf_digamma(100.0) - 4.6001618527380874) <= 8 * EPS * 4.6, "digamma(100)");
    CHECK(fabs(ghf_trigamma(1.0) - pi * pi / 6) <= 8 * EPS, "trigamma(1)");
    CHECK(fabs(ghf_trigamma(0.5) - pi * pi / 2) <= 8 * EPS * 5, "trigamma(1/2)");
    CHECK(fabs(ghf_trigamma(50.0) - 0.020201333226697125) <= 8 * EPS * 0.02, "trigamma(50)");
    CHECK(isnan(ghf_digamma(0.0)) && isnan(ghf_trigamma(-1.0)), "digamma/trigamma domain");
}

static void test_domain(void)
{
    const double bad[][3] = {{1, -1, 1}, {1, 1, -1}, {0, 1, 0}, {-1, 1, 0}, {0, 0, 1}, {1, 0, 1}, {1, 0, 0},
                             {NAN, 1, 1}, {1, NAN, 1}, {1, INFINITY, 1}, {INFINITY, 1, 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const ghf_gig_moments m = ghf_gig_moments_eval(bad[i][0], bad[i][1], bad[i][2]);
        CHECK(isnan(m.e_log) && isnan(m.e_inv) && isnan(m.e_y) && isnan(ghf_gig_log_norm(bad[i][0], bad[i][1], bad[i][2])),
              "NaN outside the domain at (%g,%g,%g)", bad[i][0], bad[i][1], bad[i][2]);
    }
    /* extreme but valid inputs stay finite */
    {
        const double ok[][3] = {{0.01, 1.0, 1e-200}, {-0.01, 1e-200, 1.0}, {0.0, 1e-150, 1e-150}, {50, 1e-300, 1e10},
                                {-50, 1e10, 1e-300}, {0.3, 1e200, 1e200}, {5.0, 1e-5, 1e200}};
        for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
            const ghf_gig_stats s = ghf_gig_stats_eval(ok[i][0], ok[i][1], ok[i][2]);
            CHECK(isfinite(s.log_norm) && isfinite(s.e_log) && isfinite(s.e_inv) && isfinite(s.e_y) && s.e_inv > 0 &&
                      s.e_y > 0 && s.e_inv * s.e_y >= 1.0 && s.n_nodes <= GHF_GIG_MAXN,
                  "finite at (%g,%g,%g): %g %g %g %g n=%d", ok[i][0], ok[i][1], ok[i][2], s.log_norm, s.e_log, s.e_inv,
                  s.e_y, s.n_nodes);
        }
    }
}

/* log Z against the Bessel form log 2 + (p/2) log(b/a) + log K_p(sqrt(ab))
 * (kernels/bessel.h) away from the limits, where that form has no
 * cancellation; a loose tolerance, since it also tests bessel.h. */
static void test_vs_bessel(void)
{
    const double pts[][3] = {{1, 1, 1}, {0.7, 1.4, 0.9}, {-2, 0.5, 4}, {10, 1, 1}, {5, 30, 20}, {-0.5, 2, 2}, {20, 100, 50}};
    for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++) {
        const double p = pts[i][0], a = pts[i][1], b = pts[i][2], z = sqrt(a * b);
        const double lz = GHF_LN2 + 0.5 * p * log(b / a) + ghf_log_kv(p, z);
        const double l = ghf_gig_log_norm(p, a, b);
        CHECK(fabs(l - lz) <= 1e-11 * (fabs(lz) + 1), "log Z vs Bessel form at (%g,%g,%g): %.17g vs %.17g", p, a, b, l, lz);
    }
}

int main(void)
{
    test_reference_table();
    test_scale_identity();
    test_limits();
    test_identities();
    test_special_functions();
    test_domain();
    test_vs_bessel();
    return test_summary("test_gig");
}
