/* test_uni1d.c - src/law/uni1d.c against 40-digit mpmath references
 * (tests/data/uni1d_ref.csv, made by tests/data/gen_uni1d_ref.py from the
 * closed-form density integrated in x, confirmed by the normal-mixture
 * integral), plus identities, the batch path and the domain.
 *
 * Per law (all six families; skewed, heavy-tailed, p far from -1/2, the vg
 * spike) and per alpha in {1e-4, 1e-3, 0.01, 0.05, 0.25, 0.5, 0.75, 0.9,
 * 0.95, 0.975, 0.99, 0.999, 0.9999}:
 *   quantile / VaR   |x - q| <= TOL_Q   max(|q|, IQR)   (IQR: the law's
 *                    interquartile range, for quantiles that cross 0)
 *   ES               |e - es| <= TOL_ES max(|es|, IQR);  status INF where
 *                    the reference is inf
 *   cdf(x), sf(x)    relative TOL_P, each computed directly (tails to 1e-4)
 *   logpdf(x)        |d| <= TOL_LP max(1, |ref|)
 *   the batch path   the same tolerances, on transformed copies c + k L
 * The acceptance is 1e-9 relative for VaR and ES; the tolerances here
 * are tighter.  The worst errors are printed (the report quotes them).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uni1d.h"
#include "testutil.h"

#define TOL_Q 1e-11
#define TOL_ES 1e-11
#define TOL_P 1e-12
#define TOL_LP 1e-12
#define MAXLAW 64
#ifndef REF_MIN_LAWS
#define REF_MIN_LAWS 8
#endif
#define MAXPT 32

typedef struct {
    double alpha, q, x, cdf, sf, lp, es;
} ref_pt;

typedef struct {
    char id[64], fam[16];
    double p, a, b, m, g, s;
    int n;
    ref_pt pt[MAXPT];
} ref_law;

static ref_law g_law[MAXLAW];
static int g_nlaw = 0;

static int split(char *line, char **f, int max)
{
    int n = 0;
    char *s = line;
    while (n < max) {
        f[n++] = s;
        s = strchr(s, ',');
        if (!s) break;
        *s++ = '\0';
    }
    return n;
}

static int read_refs(const char *path)
{
    FILE *fp = fopen(path, "r");
    char line[1024];
    if (!fp) return -1;
    while (fgets(line, sizeof line, fp)) {
        char *f[12];
        int n;
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0') continue;
        n = split(line, f, 12);
        if (f[0][0] == 'L' && n == 9 && g_nlaw < MAXLAW) {
            ref_law *L = &g_law[g_nlaw++];
            snprintf(L->id, sizeof L->id, "%s", f[1]);
            snprintf(L->fam, sizeof L->fam, "%s", f[2]);
            L->p = strtod(f[3], NULL);
            L->a = strtod(f[4], NULL);
            L->b = strtod(f[5], NULL);
            L->m = strtod(f[6], NULL);
            L->g = strtod(f[7], NULL);
            L->s = strtod(f[8], NULL);
            L->n = 0;
        } else if (f[0][0] == 'P' && n == 9) {
            for (int i = 0; i < g_nlaw; i++) {
                ref_law *L = &g_law[i];
                if (strcmp(L->id, f[1]) || L->n >= MAXPT) continue;
                L->pt[L->n].alpha = strtod(f[2], NULL);
                L->pt[L->n].q = strtod(f[3], NULL);
                L->pt[L->n].x = strtod(f[4], NULL);
                L->pt[L->n].cdf = strtod(f[5], NULL);
                L->pt[L->n].sf = strtod(f[6], NULL);
                L->pt[L->n].lp = strtod(f[7], NULL);
                L->pt[L->n].es = strtod(f[8], NULL); /* "inf" -> +inf */
                L->n++;
            }
        }
    }
    fclose(fp);
    return g_nlaw;
}

static double rel(double v, double ref, double floor_)
{
    return fabs(v - ref) / fmax(fabs(ref), floor_);
}

typedef struct {
    double q, es, p, lp, batch;
    char wq[96], wes[96], wp[96];
} worst_t;

static worst_t W;

static double law_iqr(const ref_law *L)
{
    double q1 = NAN, q3 = NAN;
    for (int i = 0; i < L->n; i++) {
        if (L->pt[i].alpha == 0.25) q1 = L->pt[i].q;
        if (L->pt[i].alpha == 0.75) q3 = L->pt[i].q;
    }
    return q3 - q1;
}

static void check_law(const ref_law *R)
{
    ghf_uni_mix mx;
    ghf_uni_law L;
    const double iqr = law_iqr(R);
    const int gauss = !strcmp(R->fam, "gauss");
    int st = ghf_uni_mix_init(&mx, gauss, R->p, R->a, R->b);
    CHECK(st == GHF_UNI_OK, "%s: mix_init status %d", R->id, st);
    CHECK(iqr > 0.0, "%s: no IQR in the reference", R->id);
    L.mix = &mx;
    L.m = R->m;
    L.g = R->g;
    L.s = R->s;
    for (int i = 0; i < R->n; i++) {
        const ref_pt *P = &R->pt[i];
        double q = NAN, v = NAN, e = NAN, c = NAN, sf = NAN, lp = NAN, r;
        st = ghf_uni_quantile(&L, P->alpha, &q);
        r = rel(q, P->q, iqr);
        CHECK(st == GHF_UNI_OK && r <= TOL_Q, "%s alpha=%g: quantile %.17g ref %.17g (err %.2e, st %d)", R->id,
              P->alpha, q, P->q, r, st);
        if (r > W.q) {
            W.q = r;
            snprintf(W.wq, sizeof W.wq, "%.48s alpha=%g", R->id, P->alpha);
        }
        if (P->alpha > 0.5) { /* the same from the upper-tail probability */
            st = ghf_uni_isf(&L, 1.0 - P->alpha, &v);
            CHECK(st == GHF_UNI_OK && rel(v, P->q, iqr) <= TOL_Q, "%s: isf(%g) %.17g ref %.17g", R->id,
                  1.0 - P->alpha, v, P->q);
        }
        st = ghf_uni_var_es(&L, P->alpha, &v, &e);
        CHECK(rel(v, P->q, iqr) <= TOL_Q, "%s alpha=%g: VaR %.17g ref %.17g", R->id, P->alpha, v, P->q);
        if (isinf(P->es)) {
            CHECK(st == GHF_UNI_INF && isinf(e) && e > 0, "%s alpha=%g: ES %g status %d, want +inf / INF",
                  R->id, P->alpha, e, st);
        } else {
            r = rel(e, P->es, iqr);
            CHECK(st == GHF_UNI_OK && r <= TOL_ES, "%s alpha=%g: ES %.17g ref %.17g (err %.2e, st %d)", R->id,
                  P->alpha, e, P->es, r, st);
            if (r > W.es) {
                W.es = r;
                snprintf(W.wes, sizeof W.wes, "%.48s alpha=%g", R->id, P->alpha);
            }
        }
        st = ghf_uni_cdf(&L, P->x, &c);
        st |= ghf_uni_sf(&L, P->x, &sf);
        r = fmax(rel(c, P->cdf, 0.0), rel(sf, P->sf, 0.0));
        CHECK(st == GHF_UNI_OK && r <= TOL_P, "%s x=%.17g: cdf %.17g ref %.17g, sf %.17g ref %.17g", R->id, P->x,
              c, P->cdf, sf, P->sf);
        if (r > W.p) {
            W.p = r;
            snprintf(W.wp, sizeof W.wp, "%.48s x=%g", R->id, P->x);
        }
        st = ghf_uni_logpdf(&L, P->x, &lp);
        r = fabs(lp - P->lp) / fmax(1.0, fabs(P->lp));
        CHECK(st == GHF_UNI_OK && r <= TOL_LP, "%s x=%.17g: logpdf %.17g ref %.17g", R->id, P->x, lp, P->lp);
        if (r > W.lp) W.lp = r;
    }
}

/* The batch path on copies c + k L of a law (the same mix): VaR and ES are
 * c + k VaR, c + k ES for k > 0; once without tables (a small batch), once
 * through a plan with tables. */
enum { NP = 40, NK = 4 };
static const double g_bal[NK] = {0.01, 0.9, 0.99, 0.9999};

static double copy_k(int i) { return i == 0 ? 1.0 : exp(0.37 * (i - NP / 2)); }
static double copy_c(int i) { return i == 0 ? 0.0 : 0.5 * (i % 7 - 3); }

static void batch_compare(const ref_law *R, const char *how, const double *var, const double *es,
                          const int *stv)
{
    const double iqr = law_iqr(R);
    for (int k = 0; k < NK; k++) {
        double rq = NAN, re = NAN;
        for (int j = 0; j < R->n; j++)
            if (R->pt[j].alpha == g_bal[k]) {
                rq = R->pt[j].q;
                re = R->pt[j].es;
            }
        for (int i = 0; i < NP; i++) {
            const double kk = copy_k(i), c = copy_c(i), wq = c + kk * rq, we = c + kk * re;
            const double fl = kk * iqr + fabs(c) * 1e-3; /* errors relative to the copy's size */
            const double eq = rel(var[i * NK + k], wq, fl);
            CHECK(eq <= TOL_Q, "%s %s %d alpha=%g: VaR %.17g want %.17g (%.2e)", R->id, how, i, g_bal[k],
                  var[i * NK + k], wq, eq);
            if (eq > W.batch) W.batch = eq;
            if (isinf(re)) {
                CHECK(stv[i * NK + k] == GHF_UNI_INF && isinf(es[i * NK + k]), "%s %s: ES not INF", R->id, how);
            } else {
                const double ee = rel(es[i * NK + k], we, fl);
                CHECK(stv[i * NK + k] == GHF_UNI_OK && ee <= TOL_ES, "%s %s %d alpha=%g: ES %.17g want %.17g", R->id,
                      how, i, g_bal[k], es[i * NK + k], we);
                if (ee > W.batch) W.batch = ee;
            }
        }
    }
}

static void check_batch(const ref_law *R)
{
    double m[NP], g[NP], s[NP], var[NP * NK], es[NP * NK];
    int stv[NP * NK], st;
    ghf_uni_mix mx;
    ghf_uni_plan *pl;
    ghf_uni_mix_init(&mx, !strcmp(R->fam, "gauss"), R->p, R->a, R->b);
    for (int i = 0; i < NP; i++) {
        m[i] = copy_c(i) + copy_k(i) * R->m;
        g[i] = copy_k(i) * R->g;
        s[i] = copy_k(i) * R->s;
    }
    st = ghf_uni_batch(&mx, NP, m, g, s, NK, g_bal, var, es, stv);
    CHECK(st == GHF_UNI_OK || st == GHF_UNI_INF, "%s: batch status %d", R->id, st);
    batch_compare(R, "batch", var, es, stv);
    pl = ghf_uni_plan_new(&mx, NK, g_bal, 100000);
    CHECK(pl != NULL, "%s: plan", R->id);
    if (!pl) return;
    for (int i = 0; i < NP; i++) ghf_uni_plan_eval(pl, m[i], g[i], s[i], var + i * NK, es + i * NK, stv + i * NK);
    ghf_uni_plan_free(pl);
    batch_compare(R, "plan", var, es, stv);
}

/* Y/c ~ GIG(p, a c, b/c): the mix (p, a c, b/c) with (m, g c, s sqrt(c)) is
 * the same law. */
static void check_scale_orbit(const ref_law *R)
{
    static const double cs[2] = {1e-3, 250.0};
    ghf_uni_mix m0, m1;
    ghf_uni_law L0, L1;
    if (!strcmp(R->fam, "gauss")) return;
    ghf_uni_mix_init(&m0, 0, R->p, R->a, R->b);
    L0.mix = &m0;
    L0.m = R->m;
    L0.g = R->g;
    L0.s = R->s;
    for (int j = 0; j < 2; j++) {
        const double c = cs[j];
        double v0, e0, v1, e1, iqr = law_iqr(R);
        ghf_uni_mix_init(&m1, 0, R->p, R->a * c, R->b / c);
        L1.mix = &m1;
        L1.m = R->m;
        L1.g = R->g * c;
        L1.s = R->s * sqrt(c);
        for (int i = 0; i < R->n; i += 3) {
            const int s0 = ghf_uni_var_es(&L0, R->pt[i].alpha, &v0, &e0);
            const int s1 = ghf_uni_var_es(&L1, R->pt[i].alpha, &v1, &e1);
            CHECK(s0 == s1 && rel(v1, v0, iqr) <= TOL_Q && (isinf(e0) ? isinf(e1) : rel(e1, e0, iqr) <= TOL_ES),
                  "%s scale orbit c=%g alpha=%g: VaR %.17g vs %.17g, ES %.17g vs %.17g", R->id, c, R->pt[i].alpha,
                  v1, v0, e1, e0);
        }
    }
}

/* Far tails: sf(isf(q)) = q and cdf(quantile(q)) = q, cdf + sf = 1. */
static void check_far_tails(const ref_law *R)
{
    static const double qs[3] = {1e-6, 1e-9, 1e-12};
    ghf_uni_mix mx;
    ghf_uni_law L;
    ghf_uni_mix_init(&mx, !strcmp(R->fam, "gauss"), R->p, R->a, R->b);
    L.mix = &mx;
    L.m = R->m;
    L.g = R->g;
    L.s = R->s;
    for (int j = 0; j < 3; j++) {
        double x, v, c, s;
        int st = ghf_uni_isf(&L, qs[j], &x);
        st |= ghf_uni_sf(&L, x, &v);
        CHECK(st == GHF_UNI_OK && rel(v, qs[j], 0.0) <= 1e-10, "%s: sf(isf(%g)) = %.17g (st %d)", R->id, qs[j], v,
              st);
        st = ghf_uni_quantile(&L, qs[j], &x);
        st |= ghf_uni_cdf(&L, x, &v);
        CHECK(st == GHF_UNI_OK && rel(v, qs[j], 0.0) <= 1e-10, "%s: cdf(quantile(%g)) = %.17g (st %d)", R->id,
              qs[j], v, st);
        st = ghf_uni_cdf(&L, x, &c);
        st |= ghf_uni_sf(&L, x, &s);
        CHECK(st == GHF_UNI_OK && fabs(c + s - 1.0) <= 4e-15, "%s: cdf + sf - 1 = %g", R->id, c + s - 1.0);
    }
}

static void check_domain(void)
{
    ghf_uni_mix mx, mg, mt;
    ghf_uni_law L;
    double v, e, al[2] = {0.5, 1.0};
    int st;
    CHECK(ghf_uni_mix_init(&mx, 0, 1.0, 0.0, 1.0) == GHF_UNI_EDOM, "a = 0 needs p < 0");
    CHECK(ghf_uni_mix_init(&mx, 0, -1.0, 1.0, 0.0) == GHF_UNI_EDOM, "b = 0 needs p > 0");
    CHECK(ghf_uni_mix_init(&mx, 0, -1.0, -1.0, 1.0) == GHF_UNI_EDOM, "a < 0");
    CHECK(ghf_uni_mix_init(&mx, 0, NAN, 1.0, 1.0) == GHF_UNI_EDOM, "p NaN");
    CHECK(ghf_uni_mix_init(&mx, 0, 1.0, INFINITY, 1.0) == GHF_UNI_EDOM, "a inf");
    CHECK(ghf_uni_mix_init(&mx, 0, -0.5, 2.0, 1.0) == GHF_UNI_OK, "nig");
    L.mix = &mx;
    L.m = 0.5;
    L.g = 0.0;
    L.s = -1.0;
    CHECK(ghf_uni_var_es(&L, 0.99, &v, &e) == GHF_UNI_EDOM && isnan(v), "s < 0");
    L.s = 0.0;
    L.g = 1.0;
    CHECK(ghf_uni_quantile(&L, 0.99, &v) == GHF_UNI_EDOM, "s = 0 with g != 0");
    L.g = 0.0; /* w = 0: the point mass at m */
    CHECK(ghf_uni_var_es(&L, 0.99, &v, &e) == GHF_UNI_OK && v == 0.5 && e == 0.5, "point mass");
    CHECK(ghf_uni_cdf(&L, 0.5, &v) == GHF_UNI_OK && v == 1.0, "point mass cdf");
    CHECK(ghf_uni_sf(&L, 0.5, &v) == GHF_UNI_OK && v == 0.0, "point mass sf");
    L.s = 1.0;
    CHECK(ghf_uni_var_es(&L, 0.0, &v, &e) == GHF_UNI_EDOM, "alpha = 0");
    CHECK(ghf_uni_var_es(&L, 1.0, &v, &e) == GHF_UNI_EDOM, "alpha = 1");
    CHECK(ghf_uni_quantile(&L, NAN, &v) == GHF_UNI_EDOM, "prob NaN");
    CHECK(ghf_uni_cdf(&L, NAN, &v) == GHF_UNI_EDOM, "x NaN");
    CHECK(ghf_uni_plan_new(&mx, 2, al, 1000) == NULL, "plan with alpha = 1");
    {
        double m = 0, g = 0, s = 1, var[2], es[2];
        int sts[2];
        st = ghf_uni_batch(&mx, 1, &m, &g, &s, 2, al, var, es, sts);
        CHECK(st == GHF_UNI_EDOM && sts[0] == GHF_UNI_EDOM && isnan(var[1]), "batch with alpha = 1");
    }
    /* gauss: closed forms, and s = 0 is the point mass at m + g */
    ghf_uni_mix_init(&mg, 1, 0, 0, 0);
    L.mix = &mg;
    L.m = 1.0;
    L.g = 0.5;
    L.s = 2.0;
    st = ghf_uni_var_es(&L, 0.975, &v, &e);
    CHECK(st == GHF_UNI_OK && fabs(v - (1.5 + 2.0 * 1.959963984540054)) < 1e-14 * v, "gauss VaR %.17g", v);
    L.s = 0.0;
    CHECK(ghf_uni_quantile(&L, 0.3, &v) == GHF_UNI_OK && v == 1.5, "gauss point mass");
    /* infinite ES: Cauchy (nu = 1); nu = 1.5 with the heavy tail up; finite
     * with the skew down */
    ghf_uni_mix_init(&mt, 0, -0.5, 0.0, 1.0);
    L.mix = &mt;
    L.m = 0.0;
    L.g = 0.0;
    L.s = 1.0;
    st = ghf_uni_var_es(&L, 0.99, &v, &e);
    CHECK(st == GHF_UNI_INF && isinf(e) && fabs(v - 31.820515953773958) < 1e-9 * v, "Cauchy: VaR %.17g ES %g st %d",
          v, e, st);
    ghf_uni_mix_init(&mt, 0, -0.75, 0.0, 1.5);
    L.g = 0.3;
    CHECK(ghf_uni_var_es(&L, 0.99, &v, &e) == GHF_UNI_INF && isinf(e), "nu = 1.5, g > 0: ES inf");
    L.g = -0.3;
    CHECK(ghf_uni_var_es(&L, 0.99, &v, &e) == GHF_UNI_OK && isfinite(e) && e > v, "nu = 1.5, g < 0: ES finite");
    CHECK(strcmp(ghf_uni_status_str(GHF_UNI_INF), "infinite") == 0, "status string");
}

int main(int argc, char **argv)
{
    char path[4096];
    const char *src = getenv("GHF_SOURCE_DIR");
    int n;
    if (argc > 1) snprintf(path, sizeof path, "%s", argv[1]);
    else snprintf(path, sizeof path, "%s/tests/data/uni1d_ref.csv", src ? src : ".");
    n = read_refs(path);
    /* the committed table holds REF_MIN_LAWS of the generator's 19 laws
     * (tests/data/README.md: the rest cost hours of mpmath; regenerate with
     * tests/data/gen_uni1d_ref.py for all of them) */
    CHECK(n >= REF_MIN_LAWS, "reference table %s: %d laws (expected at least %d)", path, n, REF_MIN_LAWS);
    printf("reference laws:");
    for (int i = 0; i < g_nlaw; i++) printf(" %s", g_law[i].id);
    printf("\n");
    for (int i = 0; i < g_nlaw; i++) {
        CHECK(g_law[i].n == 13, "%s: %d points", g_law[i].id, g_law[i].n);
        check_law(&g_law[i]);
        check_batch(&g_law[i]);
        check_scale_orbit(&g_law[i]);
        check_far_tails(&g_law[i]);
    }
    check_domain();
    printf("worst errors: quantile/VaR %.2e (%s), ES %.2e (%s), cdf/sf %.2e (%s), logpdf %.2e, batch %.2e\n", W.q,
           W.wq, W.es, W.wes, W.p, W.wp, W.lp, W.batch);
    return test_summary("test_uni1d");
}
